//! Scheduling latency per CPU, by cyclictest's method (docs/methods.md): one pinned thread per
//! CPU sleeps with absolute `clock_nanosleep` to its next target and records `now − target`.
//!
//! What cyclictest does not do, and this does: periods skipped because a wake-up came after
//! the next target are counted, latencies are kept in nanoseconds in an HDR histogram (so
//! high percentiles are exact to 0.1 %), the cycle and time of each maximum are kept, a
//! per-second min/mean/max series is recorded, and wake-ups later than an audio period are
//! counted.
//!
//! Real-time rules (docs/ARCHITECTURE.md §5): every buffer a measuring thread touches is allocated
//! before its first cycle and handed back to the caller through `join` when it ends; the
//! loop itself only reads the clock, sleeps and writes into those buffers.

use crate::common::stats::{self, Histogram, Summary};
use crate::common::Status;
use crate::error::{Error, Result};
use crate::measure::session::{Outcome, Session};
use crate::progress::Progress;
use crate::rt::{self, affinity, clock, interrupt, Policy};
use crate::stress::StressRecord;
use crate::units::{format_ns, AudioPeriod};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

mod cycle;
mod live;
use cycle::{measure_keeping, plan, simulate_thread, summarise, ThreadState};

/// The default interval, 200 µs, as in Vignati et al.'s `cyclictest -i200`.
pub const DEFAULT_INTERVAL_NS: u64 = 200_000;
/// The default bound of the cyclictest-format histogram, 400 µs (Vignati et al.'s `-h400`).
pub const DEFAULT_HIST_MAX_NS: u64 = 400_000;
/// The default FIFO priority, as in Vignati et al.'s `-p 90`.
pub const DEFAULT_PRIORITY: u32 = 90;
/// Upper bound for `--hist-max`: its µs buckets are allocated per CPU.
pub const MAX_HIST_MAX_NS: u64 = 1_000_000_000;
/// Longest run whose per-second series is preallocated (7 days).
pub const MAX_RUN_NS: u64 = 7 * 24 * 3600 * clock::NS_PER_S;
/// Histogram overflows whose cycle numbers are remembered per CPU (cyclictest keeps as many
/// as it has buckets; this caps the memory for large `--hist-max`).
const MAX_OVERFLOW_CYCLES: usize = 1024;
/// Lead time between releasing the threads and their common start, long enough for every
/// thread (which polls for the release every millisecond) to be asleep on the start time.
const START_LEAD_NS: u64 = 20_000_000;
const NOT_RELEASED: u64 = 0;
const ABORT: u64 = u64::MAX;

/// Where a latency result came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum LatencySource {
    /// Measured by `xrunlab latency`.
    Measured,
    /// Read from another tool's output by `xrunlab import`.
    Imported {
        /// The file it was read from, as given.
        file: String,
        /// `cyclictest-text` (dense, with `# Total:`), `cyclictest-text-sparse` (rt-tests ≥ 2.7)
        /// or `cyclictest-json`.
        format: String,
        /// The command line recorded in the file, when it has one.
        command: Option<String>,
        /// Resolution of the imported values (cyclictest rounds down to whole µs).
        resolution_ns: u64,
    },
    /// Drawn from the sim driver's latency model on a simulated timeline (`latency
    /// --sim-latency`): what `run --driver sim` with the same model draws, one value per
    /// wake-up, through the same loop and statistics as a measurement.
    Simulated {
        model: crate::driver::sim::LatencyModel,
        seed: u64,
    },
}

/// A `--fail-above DURATION[@PERCENTILE]` threshold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FailAbove {
    pub threshold_ns: u64,
    /// `max` or a percentile name as in `Summary` (`p50`, `p99_9`, ...).
    pub percentile: String,
}

impl std::str::FromStr for FailAbove {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let (d, p) = match s.split_once('@') {
            Some((d, p)) => (d, Some(p)),
            None => (s, None),
        };
        let threshold_ns = crate::units::parse_duration_ns(d)?;
        let percentile = match p {
            None => "max".to_string(),
            Some(p) => percentile_name(p).ok_or_else(|| {
                Error::usage(format!(
                    "--fail-above '{s}': unknown percentile '{p}'; use max, p50, p90, p99, p99.9, p99.99 or p99.9999"
                ))
            })?,
        };
        Ok(FailAbove {
            threshold_ns,
            percentile,
        })
    }
}

/// Canonical `Summary` field name for `max`, `p99.9`, `99.9`, `p99_9`...
fn percentile_name(p: &str) -> Option<String> {
    let p = p.trim().to_ascii_lowercase();
    if p == "max" || p == "min" {
        return Some(p);
    }
    let num = p.trim_start_matches('p').replace('_', ".");
    let v: f64 = num.parse().ok()?;
    stats::PERCENTILES
        .iter()
        .find(|(_, q)| (q - v).abs() < 1e-9)
        .map(|(n, _)| n.to_string())
}

/// Display form of a canonical percentile name (`p99_9` → `p99.9`).
pub fn percentile_label(name: &str) -> String {
    name.replace('_', ".")
}

/// What to measure. `Default` is Vignati et al.'s protocol (FIFO 90, 200 µs, `-h400`, mlock,
/// `/dev/cpu_dma_latency` at 0) on every allowed CPU for 10 s. Fields are optional only
/// because imported results may not record them; `measure` requires them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LatencyConfig {
    pub source: LatencySource,
    /// CPUs measured, one thread each (empty = every CPU this process may use). For imported
    /// text histograms, which do not record CPUs, cyclictest's thread numbers.
    pub cpus: Vec<usize>,
    pub policy: Option<Policy>,
    pub interval_ns: Option<u64>,
    /// Run length: exactly one of `duration_ns` and `loops` (wake-ups per CPU).
    pub duration_ns: Option<u64>,
    pub loops: Option<u64>,
    /// `/dev/cpu_dma_latency` held at 0 during the run.
    pub dma_latency: Option<bool>,
    /// `mlockall` during the run.
    pub mlock: Option<bool>,
    /// Bound of the cyclictest-format µs histogram; larger latencies count as overflows.
    pub hist_max_ns: u64,
    pub audio_period: Option<AudioPeriod>,
    pub fail_above: Option<FailAbove>,
    /// Stress presets run around the measurement (labels; what ran is in the result's
    /// `stress` record).
    #[serde(default)]
    pub stress: Vec<String>,
    /// Measure an idle phase of the same length first (`--baseline idle`): the result's
    /// `baseline` holds it, the top-level statistics are the stressed phase.
    #[serde(default)]
    pub baseline_idle: bool,
    /// `--busy PCT`: after each wake-up the thread computes for this share of the interval,
    /// as an audio engine does, reading the clock; a gap between two reads of at least
    /// [`BUSY_GAP_NS`] is a hold met while busy, and each compute's held total is recorded
    /// (each CPU's `busy`). A sleeping thread meets
    /// only the holds that cover its wake-up; an engine also meets those that land in its
    /// compute, which on a VM (the host preempting a running vCPU) are most of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_pct: Option<f64>,
}

impl Default for LatencyConfig {
    fn default() -> Self {
        LatencyConfig {
            source: LatencySource::Measured,
            cpus: Vec::new(),
            policy: Some(Policy::fifo(DEFAULT_PRIORITY)),
            interval_ns: Some(DEFAULT_INTERVAL_NS),
            duration_ns: Some(10 * clock::NS_PER_S),
            loops: None,
            dma_latency: Some(true),
            mlock: Some(true),
            hist_max_ns: DEFAULT_HIST_MAX_NS,
            audio_period: None,
            fail_above: None,
            stress: Vec::new(),
            baseline_idle: false,
            busy_pct: None,
        }
    }
}

/// One second of the latency-over-time series.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SeriesPoint {
    /// Seconds since the start of the run (this point covers `[t, t+1)`).
    pub t_s: u32,
    pub count: u32,
    pub min_ns: u64,
    pub mean_ns: f64,
    pub max_ns: u64,
}

/// Statistics of one CPU or of all CPUs together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LatencyStats {
    /// count/min/mean/max and percentiles, in ns.
    #[serde(flatten)]
    pub summary: Summary,
    /// Wake-up number (from 0) of the maximum; None when the source does not record it.
    pub max_cycle: Option<u64>,
    /// When the maximum happened, ns after the start of the run.
    pub max_at_ns: Option<u64>,
    /// The CPU of the maximum (overall statistics only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cpu: Option<usize>,
    /// Wake-ups at or above `hist_max_ns` (outside the cyclictest-format histogram).
    pub overflows: u64,
    /// Periods skipped because a wake-up came after the next target (None: not recorded).
    pub missed_periods: Option<u64>,
    /// Wake-ups later than the audio period (None without `--audio-period`).
    pub audio_late: Option<u64>,
    pub audio_late_per_hour: Option<f64>,
}

/// Per-CPU result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CpuLatency {
    pub cpu: usize,
    #[serde(flatten)]
    pub stats: LatencyStats,
    /// Cyclictest-format histogram: `[µs, count]` pairs for the non-empty 1 µs buckets
    /// below `hist_max_ns` (a latency of 17.9 µs is in bucket 17, as cyclictest rounds).
    pub histogram_us: Vec<(u64, u64)>,
    /// Wake-up numbers of the first histogram overflows (at most 1024).
    #[serde(default)]
    pub overflow_cycles: Vec<u64>,
    /// The overflows themselves, from the HDR histogram: `[value_ns, count]` pairs, where
    /// value_ns is the bucket's highest equivalent value (3 significant digits: the bucket
    /// spans 0.1 % below it, clipped at the µs histogram's bound). Their counts add up to
    /// `overflows`. Empty when there were none, and in imported results (cyclictest does not
    /// record them), whose tail is then known only by its count and maximum.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overflow_ns: Vec<(u64, u64)>,
    /// Per-second min/mean/max; seconds without wake-ups are left out.
    #[serde(default)]
    pub series: Vec<SeriesPoint>,
    /// `--busy`: the holds met while computing after each wake-up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy: Option<BusyHolds>,
    /// True when the run outlasted the preallocated series (its end is not in `series`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub series_truncated: bool,
}

/// The outcome of `--fail-above`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FailOutcome {
    pub percentile: String,
    pub threshold_ns: u64,
    pub value_ns: u64,
    pub crossed: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LatencyResult {
    /// Time from the common start of the threads to the end of the last one.
    pub elapsed_ns: u64,
    pub per_cpu: Vec<CpuLatency>,
    pub overall: LatencyStats,
    pub fail_above: Option<FailOutcome>,
    /// The run was stopped early (SIGINT/SIGTERM); the envelope's status says so too.
    #[serde(default)]
    pub interrupted: bool,
    /// The load that ran during this measurement (None: no stress was asked for).
    #[serde(default)]
    pub stress: Option<StressRecord>,
    /// The idle phase measured just before, with the same settings (`--baseline idle`).
    #[serde(default)]
    pub baseline: Option<Box<LatencyResult>>,
    /// `--forensics`: the wake-ups to explain, in-process only (the result keeps their
    /// attribution).
    #[serde(skip)]
    pub spikes: Vec<Spike>,
    /// `--forensics`: who delayed the wake-ups above the threshold and each CPU's maximum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forensics: Option<crate::trace::Forensics>,
    /// Under SCHED_OTHER, the measuring threads' timer slack (the largest of them, read back
    /// after setting the minimum, 1 ns): a normal thread's sleep may end this late by design,
    /// which is the kernel batching timers, not scheduling latency. None under a real-time
    /// policy (no slack applies), for a simulated or imported result, and in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timer_slack_ns: Option<u64>,
}

/// One wake-up kept for forensics, CLOCK_MONOTONIC ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spike {
    pub cpu: usize,
    pub tid: i32,
    /// The wake-up's number on its CPU.
    pub cycle: u64,
    pub target_ns: u64,
    pub wake_ns: u64,
}

/// The shortest gap between two clock reads of a busy thread counted as a hold: longer than
/// a clock read and a cache miss, shorter than any interrupt that could cost an audio cycle.
pub const BUSY_GAP_NS: u64 = 10_000;
/// The ratio between a busy CPU's hold buckets' bounds.
pub const BUSY_STEP: f64 = 1.02;
/// Largest `--busy` share: the thread must still sleep, or it measures no wake-ups.
pub const MAX_BUSY_PCT: f64 = 90.0;

/// The holds one CPU's thread met while it computed (`--busy`), summed per compute.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BusyHolds {
    /// Wall time spent computing, holds included: the time exposed to them.
    pub busy_ns: u64,
    /// Computes held by gaps of at least `gap_min_ns` between two clock reads (one per
    /// held compute, however many gaps it met).
    pub holds: u64,
    pub gap_min_ns: u64,
    /// Their held totals (the sum of a compute's gaps), `[upper_ns, count]`: `count` held
    /// computes longer than the previous entry's `upper_ns` (the first entry's: at least
    /// `gap_min_ns`) and at most this one's, in steps of 2 % from `gap_min_ns`, empty steps
    /// left out; the counts add up to `holds`.
    pub holds_ns: Vec<(u64, u64)>,
    /// The longest held total.
    pub max_ns: u64,
}

/// Most spikes kept per CPU for forensics.
pub const MAX_SPIKES: usize = 1000;

impl LatencyResult {
    /// Evaluate a `--fail-above` threshold against the overall statistics.
    pub fn evaluate(&self, f: &FailAbove) -> FailOutcome {
        let value_ns = self.overall.summary.get(&f.percentile).unwrap_or(0);
        FailOutcome {
            percentile: f.percentile.clone(),
            threshold_ns: f.threshold_ns,
            value_ns,
            crossed: value_ns > f.threshold_ns,
        }
    }
}

/// The outcome of `latency`.
pub type LatencyOutcome = Outcome<LatencyConfig, LatencyResult>;

/// `xrunlab latency`: scheduling latency as `cfg` says — drawn from the sim driver's model
/// when `cfg.source` is simulated — under the session's stress, after an idle phase when
/// `cfg.baseline_idle`.
///
/// The stressors are started by the session on the caller's thread (keep it alive for the
/// whole measurement: their PR_SET_PDEATHSIG is tied to it) and stopped and reaped on every
/// path. On SIGINT/SIGTERM (`rt::interrupt`) the measurement stops early and returns the
/// partial result with `interrupted` set; an interrupted baseline skips the stressed phase
/// and is returned as the (partial) result. With forensics the wake-ups later than the
/// plan's threshold (else the audio period, else only each CPU's maximum) are explained.
pub fn run(cfg: &LatencyConfig, session: &mut Session) -> Result<LatencyOutcome> {
    if let LatencySource::Simulated { model, seed } = &cfg.source {
        // Says why it is off; a simulated timeline has nothing to trace.
        session.simulated();
        let result = simulate(cfg, model, *seed)?;
        return Ok(Outcome {
            status: status_of(&result),
            config: cfg.clone(),
            results: result,
            warnings: vec![
                "simulated: drawn from the sim driver's latency model, not measured on this machine"
                    .to_string(),
            ],
        });
    }
    let unpinned = matches!(cfg.policy, Some(Policy::Deadline { .. }));
    let phases = if cfg.baseline_idle { 2 } else { 1 };
    let rec = session.start_trace(&cfg.cpus, cfg.duration_ns.unwrap_or(0) * phases);
    // Without a threshold only each CPU's maximum is explained.
    let above = rec.as_ref().map(|_| {
        session
            .forensics()
            .and_then(|f| f.above_ns)
            .or(cfg.audio_period.map(|p| p.period_ns()))
            .unwrap_or(u64::MAX)
    });
    let baseline = if cfg.baseline_idle {
        session.progress().set_message("idle");
        Some(Box::new(measure(cfg, session.progress())?))
    } else {
        None
    };
    let mut result = match baseline {
        // An interrupted baseline skips the stressed phase and is the (partial) result.
        Some(b) if b.interrupted => *b,
        baseline => {
            let run_ns = cfg.duration_ns.unwrap_or(0);
            let stressed = !session.stress().is_idle();
            let (mut r, loaded) =
                session.loaded(None, std::time::Duration::from_nanos(run_ns), None, |s| {
                    if stressed {
                        s.progress().set_message("stress");
                    }
                    measure_keeping(cfg, s.progress(), above)
                })?;
            r.stress = loaded.stress;
            r.baseline = baseline;
            r
        }
    };
    session.finish_progress();
    let mut warnings = Vec::new();
    if let Some(rec) = rec {
        let windows: Vec<crate::trace::Window> = result
            .spikes
            .iter()
            .map(|s| crate::trace::Window {
                id: s.cycle,
                tid: s.tid,
                cpu: (!unpinned).then_some(s.cpu),
                t_ideal_ns: s.target_ns,
                wake_ns: s.wake_ns,
                end_ns: s.wake_ns,
                own_cpu_ns: None,
                shared_thread: false,
            })
            .collect();
        let mut ours: Vec<i32> = result.spikes.iter().map(|s| s.tid).collect();
        ours.sort_unstable();
        ours.dedup();
        let (mut f, w) = rec.explain("spike", &windows, &ours);
        warnings = w;
        session.keep(&mut f, &mut warnings);
        result.forensics = Some(f);
    }
    Ok(finish(cfg, result, warnings))
}

/// How a latency result ended.
fn status_of(r: &LatencyResult) -> Status {
    if r.interrupted {
        Status::Interrupted
    } else {
        Status::Complete
    }
}

/// The outcome of a measured (not simulated) latency result, with what it must say: an
/// interrupt, the baseline, unpinned DEADLINE threads. The environment says "measured under
/// stress"; only the baseline needs explaining here.
fn finish(cfg: &LatencyConfig, result: LatencyResult, mut warnings: Vec<String>) -> LatencyOutcome {
    if result.interrupted {
        warnings.push("interrupted by a signal: the result covers only part of the run".into());
    }
    if result.baseline.is_some() {
        warnings
            .push("`baseline` holds the idle phase measured just before the stressed one".into());
    }
    if matches!(cfg.policy, Some(Policy::Deadline { .. })) {
        warnings.push(
            "SCHED_DEADLINE threads cannot be pinned inside the default root domain: they ran \
             unpinned, so each row is one thread, not one CPU"
                .into(),
        );
    }
    Outcome {
        status: status_of(&result),
        config: cfg.clone(),
        results: result,
        warnings,
    }
}

/// Draw a latency result from the sim driver's latency model instead of measuring
/// (`latency --sim-latency`): one simulated thread per CPU of `cfg.cpus` (CPU 0 when empty),
/// thread i seeded with `seed + i`, on the simulated timeline of cyclictest's loop. No thread
/// is real-time and nothing sleeps; the policy, mlock and DMA-latency settings are ignored.
pub fn simulate(
    cfg: &LatencyConfig,
    model: &crate::driver::sim::LatencyModel,
    seed: u64,
) -> Result<LatencyResult> {
    let cfg = LatencyConfig {
        policy: Some(Policy::Other { nice: 0 }),
        ..cfg.clone()
    };
    let (p, _) = plan(&cfg)?;
    let cpus = if cfg.cpus.is_empty() {
        vec![0]
    } else {
        cfg.cpus.clone()
    };
    let states = cpus
        .iter()
        .enumerate()
        .map(|(i, &cpu)| {
            let mut sampler = crate::driver::sim::Sampler::new(model, seed.wrapping_add(i as u64));
            simulate_thread(ThreadState::new(cpu, &p), &p, &mut sampler)
        })
        .collect();
    Ok(summarise(
        states,
        &p,
        interrupt::requested(),
        cfg.fail_above.as_ref(),
    ))
}

/// One latency measurement as a part of a larger protocol (`tune`'s before and after): no
/// stress, no trace, seconds elapsed reported to `progress`.
pub fn measure(cfg: &LatencyConfig, progress: &dyn Progress) -> Result<LatencyResult> {
    measure_keeping(cfg, progress, None)
}
