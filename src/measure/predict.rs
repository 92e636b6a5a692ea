//! `xrunlab predict`: the expected xruns per hour of each buffer size and period count, from a
//! wake-up latency distribution and a compute time (docs/methods.md, "Predicted xrun
//! rate", which defines every figure here).
//!
//! A cycle misses when wake-up latency L plus compute time C exceeds the budget B = (n−1)·P.
//! L comes from a latency result's histograms (the 1 µs buckets below its bound, the HDR
//! buckets of the overflows), each bucket's values spread evenly over its width; C is a
//! discrete distribution (a share of the period, or a measured distribution's percentiles).
//! Everything is a sum over (bucket, cost point) pairs, so the arithmetic is exact on the
//! buckets.

use crate::common::stats::{self, Summary};
use crate::dsp::bench::{BenchConfig, BenchResult};
use crate::error::{Error, Result};
use crate::measure::latency::{LatencyConfig, LatencyResult, LatencySource};
use crate::measure::loadtest::{LoadConfig, LoadResults};
use crate::measure::run::RunConfig;
use crate::measure::run::RunResults;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::Path;

const NS_PER_HOUR: f64 = 3.6e12;
/// Below this many latency samples beyond the budget a rate is reported as an upper bound.
pub const MIN_EVENTS: f64 = 3.0;
/// The confidence of every interval.
pub const CONFIDENCE: f64 = 0.95;
/// Default `--target`: one xrun episode per hour.
pub const DEFAULT_TARGET_PER_HOUR: f64 = 1.0;

// ---------------------------------------------------------------------------------------
// Latency

/// Latency values spread evenly over `[lo_ns, hi_ns)`; a point when `lo_ns == hi_ns`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    pub lo_ns: u64,
    pub hi_ns: u64,
    pub count: u64,
}

/// Wake-ups known only to lie in `[from_ns, max_ns]`: an imported histogram's overflows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Censored {
    pub from_ns: u64,
    pub max_ns: u64,
    pub count: u64,
}

/// One latency distribution as the model uses it: every CPU's samples pooled.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyData {
    pub buckets: Vec<Bucket>,
    pub censored: Vec<Censored>,
    /// Wake-ups recorded.
    pub samples: u64,
    /// CPU time the samples cover: per CPU (wake-ups + missed periods) × interval.
    pub observed_ns: f64,
    /// The measurement's interval I (cyclictest's -i).
    pub interval_ns: u64,
    /// CPUs measured in parallel, so that wall time = observed / cpus.
    pub cpus: usize,
}

impl LatencyData {
    /// Values at `ns`, `count` times each, as points: synthetic distributions for tests and
    /// what-ifs.
    pub fn points(values: &[(u64, u64)], interval_ns: u64) -> Self {
        let samples = values.iter().map(|v| v.1).sum();
        LatencyData {
            buckets: values
                .iter()
                .map(|&(ns, count)| Bucket {
                    lo_ns: ns,
                    hi_ns: ns,
                    count,
                })
                .collect(),
            censored: Vec::new(),
            samples,
            observed_ns: samples as f64 * interval_ns as f64,
            interval_ns,
            cpus: 1,
        }
    }
}

/// What the result says about one latency input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LatencyInfo {
    pub label: String,
    pub file: String,
    /// `measured`, `imported` or `simulated`.
    pub source: String,
    /// Stress presets it ran under.
    pub stress: Vec<String>,
    pub cpus: Vec<usize>,
    pub samples: u64,
    pub interval_ns: u64,
    /// CPU time covered (wake-ups + missed periods, × interval, summed over CPUs).
    pub observed_ns: u64,
    pub max_ns: u64,
    /// Wake-ups above the histogram's bound whose values the file does not hold (imported
    /// cyclictest data): they are taken at the recorded maximum.
    pub censored: u64,
    pub censored_above_ns: Option<u64>,
}

/// A latency input: the distribution and what to say about it.
#[derive(Debug, Clone)]
pub struct LatencyInput {
    pub info: LatencyInfo,
    pub data: LatencyData,
}

impl LatencyInput {
    /// The inputs a latency result holds: itself, preceded by its idle baseline when it has
    /// one. `cpu` keeps one CPU's samples; `interval_ns` stands in for an interval the file
    /// does not record.
    pub fn from_result(
        path: &Path,
        label: &str,
        cfg: &LatencyConfig,
        r: &LatencyResult,
        cpu: Option<usize>,
        interval_ns: Option<u64>,
    ) -> Result<Vec<LatencyInput>> {
        let mut out = Vec::new();
        let stress = cfg.stress.clone();
        if let Some(b) = &r.baseline {
            out.push(Self::one(
                path,
                &format!("{label} idle"),
                cfg,
                b,
                cpu,
                interval_ns,
                Vec::new(),
            )?);
            let tag = if stress.is_empty() {
                "stressed".to_string()
            } else {
                stress.join(",")
            };
            out.push(Self::one(
                path,
                &format!("{label} {tag}"),
                cfg,
                r,
                cpu,
                interval_ns,
                stress,
            )?);
        } else {
            out.push(Self::one(path, label, cfg, r, cpu, interval_ns, stress)?);
        }
        Ok(out)
    }

    fn one(
        path: &Path,
        label: &str,
        cfg: &LatencyConfig,
        r: &LatencyResult,
        cpu: Option<usize>,
        interval_ns: Option<u64>,
        stress: Vec<String>,
    ) -> Result<LatencyInput> {
        let interval = cfg.interval_ns.or(interval_ns).ok_or_else(|| {
            Error::input(
                path,
                "the file does not record the measurement's interval (cyclictest -i): give it \
                 with --interval",
            )
        })?;
        if interval == 0 {
            return Err(Error::input(path, "the recorded interval is 0"));
        }
        let cpus: Vec<_> = r
            .per_cpu
            .iter()
            .filter(|c| cpu.is_none_or(|want| c.cpu == want))
            .collect();
        if cpus.is_empty() {
            let have: Vec<String> = r.per_cpu.iter().map(|c| c.cpu.to_string()).collect();
            return Err(Error::input(
                path,
                match cpu {
                    Some(c) if !have.is_empty() => {
                        format!("has no CPU {c} (it has {})", have.join(", "))
                    }
                    _ => "holds no per-CPU latency data".to_string(),
                },
            ));
        }
        // The µs histogram's bound: a wake-up is in bucket lat/1000 when that is below it.
        let from = cfg.hist_max_ns / 1_000 * 1_000;
        let hdr = stats::new_ns_histogram();
        let mut data = LatencyData {
            buckets: Vec::new(),
            censored: Vec::new(),
            samples: 0,
            observed_ns: 0.0,
            interval_ns: interval,
            cpus: cpus.len(),
        };
        let mut max_ns = 0;
        for c in cpus {
            let count = c.stats.summary.count;
            if count == 0 {
                continue;
            }
            let binned: u64 = c.histogram_us.iter().map(|b| b.1).sum();
            if binned + c.stats.overflows != count {
                return Err(Error::input(
                    path,
                    format!(
                        "CPU {} has no usable histogram ({} of its {count} wake-ups are in it): \
                         predict needs the 1 µs histogram of `xrunlab latency` or of cyclictest \
                         -h (an imported cyclictest --json with ns resolution keeps none)",
                        c.cpu,
                        binned + c.stats.overflows
                    ),
                ));
            }
            data.buckets
                .extend(c.histogram_us.iter().map(|&(us, n)| Bucket {
                    lo_ns: us * 1_000,
                    hi_ns: (us + 1) * 1_000,
                    count: n,
                }));
            let mut tail = 0;
            for &(v, n) in &c.overflow_ns {
                data.buckets.push(Bucket {
                    lo_ns: hdr.lowest_equivalent(v).max(from),
                    hi_ns: v + 1,
                    count: n,
                });
                tail += n;
            }
            let unknown = c.stats.overflows.saturating_sub(tail);
            if unknown > 0 {
                data.censored.push(Censored {
                    from_ns: from,
                    max_ns: c.stats.summary.max.max(from),
                    count: unknown,
                });
            }
            data.samples += count;
            data.observed_ns += match c.stats.missed_periods {
                Some(m) => (count + m) as f64 * interval as f64,
                // cyclictest skips late periods silently: its run length, when recorded, is
                // the better measure of the time covered.
                None => (count as f64 * interval as f64).max(cfg.duration_ns.unwrap_or(0) as f64),
            };
            max_ns = max_ns.max(c.stats.summary.max);
        }
        if data.samples == 0 {
            return Err(Error::input(path, "holds no wake-ups"));
        }
        let censored: u64 = data.censored.iter().map(|c| c.count).sum();
        let source = match cfg.source {
            LatencySource::Measured => "measured",
            LatencySource::Imported { .. } => "imported",
            LatencySource::Simulated { .. } => "simulated",
        };
        Ok(LatencyInput {
            info: LatencyInfo {
                label: label.to_string(),
                file: path.display().to_string(),
                source: source.into(),
                stress,
                cpus: r
                    .per_cpu
                    .iter()
                    .map(|c| c.cpu)
                    .filter(|&c| cpu.is_none_or(|w| w == c))
                    .collect(),
                samples: data.samples,
                interval_ns: interval,
                observed_ns: data.observed_ns.round() as u64,
                max_ns,
                censored,
                censored_above_ns: (censored > 0).then_some(from),
            },
            data,
        })
    }
}

// ---------------------------------------------------------------------------------------
// Compute time

/// One point of a compute time distribution.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CostPoint {
    pub probability: f64,
    pub ns: f64,
}

/// A distribution measured at one buffer size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BufferCost {
    pub frames: u32,
    pub points: Vec<CostPoint>,
}

/// The compute time of one cycle, per buffer size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "model", rename_all = "kebab-case")]
pub enum Compute {
    /// A fixed share of every period (`--load-pct`).
    LoadPct { pct: f64 },
    /// The same time whatever the buffer size.
    Fixed { ns: f64 },
    /// Distributions measured at some buffer sizes; another size is scaled per frame from
    /// the nearest (ratio) one.
    PerFrame { measured: Vec<BufferCost> },
}

impl Compute {
    /// The distribution at `frames` frames (period `period_ns`).
    pub fn at(&self, frames: u32, period_ns: f64) -> Vec<CostPoint> {
        match self {
            Compute::LoadPct { pct } => vec![CostPoint {
                probability: 1.0,
                ns: pct / 100.0 * period_ns,
            }],
            Compute::Fixed { ns } => vec![CostPoint {
                probability: 1.0,
                ns: *ns,
            }],
            Compute::PerFrame { measured } => {
                let ratio = |m: &BufferCost| (m.frames as f64 / frames as f64).ln().abs();
                let Some(m) = measured.iter().min_by(|a, b| ratio(a).total_cmp(&ratio(b))) else {
                    return vec![CostPoint {
                        probability: 1.0,
                        ns: 0.0,
                    }];
                };
                let scale = frames as f64 / m.frames as f64;
                m.points
                    .iter()
                    .map(|p| CostPoint {
                        probability: p.probability,
                        ns: p.ns * scale,
                    })
                    .collect()
            }
        }
    }
}

/// A compute time read from a result file, with the rate it was measured at.
#[derive(Debug, Clone, PartialEq)]
pub struct CostInput {
    pub compute: Compute,
    pub rate: Option<u32>,
    pub description: String,
}

/// Sub-points each percentile band is spread over.
const BAND_STEPS: usize = 8;

/// A distribution known by percentiles: each band's probability spread evenly between its
/// lower and upper percentile (`first_lo`, when known, the lower end of the first band,
/// else it is a point), like a latency bucket over its width. Still on the conservative
/// side for tails that thin out within a band; placing each band at its upper end instead
/// put a run's top 0.01 % at its maximum and over-predicted short buffers twofold (§3).
fn bands(first_lo: Option<f64>, quantiles: &[(f64, f64)]) -> Vec<CostPoint> {
    let mut out = Vec::new();
    let mut lo = first_lo;
    for &(probability, hi) in quantiles {
        let from = lo.unwrap_or(hi).min(hi);
        if hi > from {
            let w = (hi - from) / BAND_STEPS as f64;
            out.extend((0..BAND_STEPS).map(|k| CostPoint {
                probability: probability / BAND_STEPS as f64,
                ns: from + (k as f64 + 0.5) * w,
            }));
        } else {
            out.push(CostPoint {
                probability,
                ns: hi,
            });
        }
        lo = Some(hi);
    }
    out
}

fn summary_points(s: &Summary) -> Vec<CostPoint> {
    bands(
        Some(s.min as f64),
        &[
            (0.5, s.p50 as f64),
            (0.4, s.p90 as f64),
            (0.09, s.p99 as f64),
            (0.009, s.p99_9 as f64),
            (0.0009, s.p99_99 as f64),
            (0.000099, s.p99_9999 as f64),
            (0.000001, s.max as f64),
        ],
    )
}

fn cost_mean(points: &[CostPoint]) -> f64 {
    points.iter().map(|p| p.probability * p.ns).sum()
}

fn cost_max(points: &[CostPoint]) -> f64 {
    points
        .iter()
        .filter(|p| p.probability > 0.0)
        .map(|p| p.ns)
        .fold(0.0, f64::max)
}

fn ms(ns: f64) -> String {
    format!("{:.3} ms", ns / 1e6)
}

impl CostInput {
    pub fn load_pct(pct: f64) -> Self {
        CostInput {
            compute: Compute::LoadPct { pct },
            rate: None,
            description: format!("{pct} % of each period (--load-pct)"),
        }
    }

    /// A run's compute wall time (end − wake): what a cycle took once awake, interference
    /// included, at the run's buffer size.
    pub fn from_run(path: &Path, cfg: &RunConfig, r: &RunResults) -> Result<Self> {
        if r.wall_ns.count == 0 {
            return Err(Error::input(path, "the run processed no cycle"));
        }
        let points = summary_points(&r.wall_ns);
        Ok(CostInput {
            description: format!(
                "run {}: compute wall time at {} frames, mean {}, p99 {}, max {}, scaled per frame",
                path.display(),
                cfg.buffer_frames,
                ms(r.wall_ns.mean),
                ms(r.wall_ns.p99 as f64),
                ms(r.wall_ns.max as f64)
            ),
            compute: Compute::PerFrame {
                measured: vec![BufferCost {
                    frames: cfg.buffer_frames,
                    points,
                }],
            },
            rate: Some(cfg.rate),
        })
    }

    /// A bench's per-block distribution: one block through the benched chain, each plugin
    /// at its measured instance count (`instances` picks one where several were measured).
    /// Plugins benched separately are added percentile by percentile, as if their slow
    /// blocks coincided: an upper bound for a chain of them.
    pub fn from_bench(
        path: &Path,
        cfg: &BenchConfig,
        results: &[BenchResult],
        instances: Option<u32>,
    ) -> Result<Self> {
        let mut groups: Vec<(String, Vec<&BenchResult>)> = Vec::new();
        for r in results {
            let name = if r.params.is_empty() {
                r.plugin.clone()
            } else {
                format!("{}({})", r.plugin, r.params)
            };
            match groups.iter_mut().find(|g| g.0 == name) {
                Some(g) => g.1.push(r),
                None => groups.push((name, vec![r])),
            }
        }
        if groups.is_empty() {
            return Err(Error::input(path, "the bench holds no result"));
        }
        const BANDS: [f64; 4] = [0.5, 0.49, 0.009, 0.001];
        let mut sum = [0.0f64; 4];
        let mut parts = Vec::new();
        let mut frames = None;
        for (name, rs) in &groups {
            let r = match instances {
                Some(k) => rs.iter().find(|r| r.instances == k).ok_or_else(|| {
                    Error::input(
                        path,
                        format!(
                            "{name} was not benched with {k} instances (it was with {})",
                            list(rs.iter().map(|r| r.instances))
                        ),
                    )
                })?,
                None if rs.len() == 1 => &rs[0],
                None => {
                    return Err(Error::usage(format!(
                        "{}: {name} was benched with {} instances: pick one with --instances K",
                        path.display(),
                        list(rs.iter().map(|r| r.instances))
                    )))
                }
            };
            if frames.is_some_and(|f| f != r.buffer_frames) {
                return Err(Error::input(
                    path,
                    "its results were measured at different buffer sizes",
                ));
            }
            frames = Some(r.buffer_frames);
            let quantiles = match &r.per_block {
                Some(b) => [b.p50_ns, b.p99_ns, b.p999_ns, b.max_ns].map(|v| v as f64),
                // Files from before blocks were timed one by one: the median cost only.
                None => [r.ns_per_frame * r.instances as f64 * r.buffer_frames as f64; 4],
            };
            for (s, q) in sum.iter_mut().zip(quantiles) {
                *s += q;
            }
            parts.push(format!("{name} ×{}", r.instances));
        }
        let frames = frames.unwrap_or(cfg.buffer_frames);
        let points = bands(None, &BANDS.into_iter().zip(sum).collect::<Vec<_>>());
        Ok(CostInput {
            description: format!(
                "bench {}: one block of {} at {frames} frames, p50 {}, p99 {}, p99.9 {}, max {}, scaled per frame",
                path.display(),
                parts.join(" + "),
                ms(sum[0]),
                ms(sum[1]),
                ms(sum[2]),
                ms(sum[3])
            ),
            compute: Compute::PerFrame {
                measured: vec![BufferCost { frames, points }],
            },
            rate: Some(cfg.rate),
        })
    }

    /// A load grid's cells at their maximum: the passing trial's DSP load (p50, p99, max) as
    /// the compute time at each buffer size measured. `cell` (`TRACKS:PLUGIN`) picks the
    /// column where the grid has several.
    pub fn from_load(
        path: &Path,
        cfg: &LoadConfig,
        r: &LoadResults,
        cell: Option<&str>,
    ) -> Result<Self> {
        let mut combos: Vec<(u32, &str)> = Vec::new();
        for c in &r.cells {
            if !combos.contains(&(c.tracks, c.plugin.as_str())) {
                combos.push((c.tracks, c.plugin.as_str()));
            }
        }
        let names = || list(combos.iter().map(|(t, p)| format!("{t}:{p}")));
        let (tracks, plugin) = match cell {
            Some(want) => {
                let (t, p) = want
                    .split_once(':')
                    .and_then(|(t, p)| Some((t.trim().parse::<u32>().ok()?, p.trim())))
                    .ok_or_else(|| {
                        Error::usage(format!("--cell '{want}': expected TRACKS:PLUGIN, e.g. 1:reverb-heavy"))
                    })?;
                *combos.iter().find(|c| **c == (t, p)).ok_or_else(|| {
                    Error::input(path, format!("has no cell {want} (it has {})", names()))
                })?
            }
            None => match combos[..] {
                [] => return Err(Error::input(path, "the load grid holds no finished cell")),
                [one] => one,
                _ => {
                    return Err(Error::usage(format!(
                        "{}: the load grid has several columns ({}): pick one with --cell TRACKS:PLUGIN",
                        path.display(),
                        names()
                    )))
                }
            },
        };
        let mut measured = Vec::new();
        let mut parts = Vec::new();
        for c in r
            .cells
            .iter()
            .filter(|c| c.tracks == tracks && c.plugin == plugin)
        {
            let p = c.period_ns as f64 / 100.0;
            let l = &c.dsp_load_pct;
            measured.push(BufferCost {
                frames: c.buffer_frames,
                points: bands(
                    None,
                    &[(0.5, l.p50 * p), (0.49, l.p99 * p), (0.01, l.max * p)],
                ),
            });
            parts.push(format!("{} frames ×{}", c.buffer_frames, c.max_per_track));
        }
        Ok(CostInput {
            description: format!(
                "load {}: {tracks} track(s) of {plugin} at the grid's maximum ({}), DSP load p50/p99/max; other sizes scaled per frame",
                path.display(),
                parts.join(", ")
            ),
            compute: Compute::PerFrame { measured },
            rate: Some(cfg.rate),
        })
    }
}

fn list<T: ToString>(it: impl Iterator<Item = T>) -> String {
    it.map(|x| x.to_string()).collect::<Vec<_>>().join(", ")
}

// ---------------------------------------------------------------------------------------
// The model

/// How a latency sample beyond the budget is read (docs/methods.md, "Predicted xrun
/// rate", where the measurements that chose the default are).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum Holds {
    /// Delays come with wake-ups: each wake-up of the audio thread draws one latency as the
    /// measurement's wake-ups did, whatever the interval (a halted vCPU waiting for its host,
    /// a wake-up path's lock). Matches the sim and, within 1.3–3.3×, this project's KVM
    /// guest at three buffer sizes.
    #[default]
    Wakeup,
    /// Delays are holds arriving in time, independently of any thread's timer (SMIs, a
    /// preempted busy vCPU): a long sample is a stall the audio thread meets however often it
    /// wakes. Conservative; over-predicted that guest 7–35×.
    Timed,
}

impl Holds {
    pub fn word(self) -> &'static str {
        match self {
            Holds::Wakeup => "wakeup",
            Holds::Timed => "timed",
        }
    }

    /// One phrase for the reports.
    pub fn describe(self) -> &'static str {
        match self {
            Holds::Wakeup => "latency drawn per wake-up (--holds wakeup)",
            Holds::Timed => "long latencies read as stalls in time (--holds timed, conservative)",
        }
    }

    /// Predictions written before the choice existed were read as timed holds.
    pub fn legacy() -> Self {
        Holds::Timed
    }
}

/// What to predict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PredictConfig {
    /// `--latency` values as given (`FILE` or `LABEL=FILE`).
    pub latency: Vec<String>,
    /// `--cost FILE` (a run, load or bench result).
    pub cost_file: Option<String>,
    pub load_pct: Option<f64>,
    /// `--instances K`: the bench results used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instances: Option<u32>,
    /// `--cell TRACKS:PLUGIN`: the load grid's column used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell: Option<String>,
    /// Only this CPU's samples (None: every CPU pooled).
    pub cpu: Option<usize>,
    /// The interval assumed for files that do not record theirs.
    pub interval_ns: Option<u64>,
    pub rate: u32,
    pub buffers: Vec<u32>,
    pub periods: Vec<u32>,
    /// Episodes per hour a buffer size may have to be `ok`.
    pub target_per_hour: f64,
    pub confidence: f64,
    /// How samples beyond the budget are read (`--holds`).
    #[serde(default = "Holds::legacy")]
    pub holds: Holds,
}

/// A rate with its interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Rate {
    /// Expected per hour.
    pub per_hour: f64,
    /// The interval at the configured confidence (exact Poisson on the latency samples
    /// beyond the budget, scaled).
    pub low: f64,
    pub high: f64,
    /// Fewer than 3 samples beyond the budget: the data only bounds the rate (`< high`).
    pub upper_bound: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Outlook {
    /// The interval's upper end is within the target.
    Ok,
    /// The interval contains the target: the data cannot tell (measure longer).
    Marginal,
    /// The interval's lower end is above the target, or the compute alone overloads.
    Fails,
}

impl Outlook {
    pub fn word(self) -> &'static str {
        match self {
            Outlook::Ok => "ok",
            Outlook::Marginal => "marginal",
            Outlook::Fails => "fails",
        }
    }
}

/// One buffer size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PredictRow {
    pub buffer_frames: u32,
    pub period_ns: f64,
    /// (n−1)·P.
    pub budget_ns: f64,
    pub compute_mean_ns: f64,
    pub compute_max_ns: f64,
    pub cycles_per_hour: f64,
    /// P(L + C > budget): one cycle's chance to miss, its wake-up one draw of L.
    pub p_miss: f64,
    /// Latency samples beyond the budget (fractional: buckets straddling it count in part,
    /// cost points by their probability): what the intervals rest on.
    pub events_beyond: f64,
    /// Cycles that end late, per hour.
    pub xruns_per_hour: Rate,
    /// Runs of consecutive late cycles (one host stall each), per hour.
    pub episodes_per_hour: Rate,
    /// xruns / episodes: cycles a stall costs when the driver catches up (JACK).
    pub cycles_per_episode: f64,
    /// The share of device periods whose cycle wakes from sleep and so draws a wake-up
    /// latency; the rest catch up behind a late cycle or are skipped after a miss.
    pub fresh_share: f64,
    /// Mean compute ≥ P: the backlog grows without bound whatever the latency.
    pub overload: bool,
    /// Some samples beyond the budget are censored (taken at the recorded maximum).
    pub censored: bool,
    /// When the rate is only bounded: the latency measurement (wall time, same CPUs)
    /// that would see 3 samples beyond the budget if episodes came at the target rate.
    pub measure_for_ns: Option<u64>,
    pub outlook: Outlook,
}

/// One latency input at one period count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PredictTable {
    pub latency: String,
    pub periods: u32,
    pub rows: Vec<PredictRow>,
    /// The smallest buffer size whose outlook is `ok`.
    pub smallest_ok_frames: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PredictResults {
    pub latency: Vec<LatencyInfo>,
    pub compute: Compute,
    pub compute_description: String,
    pub tables: Vec<PredictTable>,
}

/// Every table: one per latency input and period count, one row per buffer size.
pub fn predict(cfg: &PredictConfig, inputs: &[LatencyInput], cost: &CostInput) -> PredictResults {
    let mut tables = Vec::new();
    for input in inputs {
        for &n in &cfg.periods {
            let rows: Vec<PredictRow> = cfg
                .buffers
                .iter()
                .map(|&frames| {
                    let period = frames as f64 * 1e9 / cfg.rate as f64;
                    row(
                        &input.data,
                        &cost.compute.at(frames, period),
                        frames,
                        n,
                        cfg,
                    )
                })
                .collect();
            tables.push(PredictTable {
                latency: input.info.label.clone(),
                periods: n,
                smallest_ok_frames: rows
                    .iter()
                    .find(|r| r.outlook == Outlook::Ok)
                    .map(|r| r.buffer_frames),
                rows,
            });
        }
    }
    PredictResults {
        latency: inputs.iter().map(|i| i.info.clone()).collect(),
        compute: cost.compute.clone(),
        compute_description: cost.description.clone(),
        tables,
    }
}

/// How much more (or less) often the audio thread, waking every P, meets a delay whose
/// sample overshot the budget by `e` than the latency measurement, waking every I, did.
/// Per wake-up, each of its wake-ups draws one sample: I/P. As a timed hold, a stall of
/// length D makes a thread with interval Q late by more than x when one of its targets falls
/// in the first D − x of it, with probability min(1, (D − x)/Q); the sample says D ≥ ℓ, and
/// the shortest such stall is taken.
fn weight(e: f64, i: f64, p: f64, holds: Holds) -> f64 {
    if e <= 0.0 {
        0.0
    } else if holds == Holds::Wakeup {
        i / p
    } else {
        (e / p).min(1.0) / (e / i).min(1.0)
    }
}

/// ∫ weight(e) de over [a, b], 0 ≤ a ≤ b, in closed form on its pieces.
fn weight_integral(a: f64, b: f64, i: f64, p: f64, holds: Holds) -> f64 {
    if holds == Holds::Wakeup {
        return (b - a).max(0.0) * i / p;
    }
    let (lo, hi) = (i.min(p), i.max(p));
    let clip = |x0: f64, x1: f64| (a.max(x0), b.min(x1));
    let mut s = 0.0;
    let (x0, x1) = clip(0.0, lo);
    if x1 > x0 {
        s += (x1 - x0) * i / p;
    }
    let (x0, x1) = clip(lo, hi);
    if x1 > x0 {
        s += if i < p {
            (x1 * x1 - x0 * x0) / (2.0 * p)
        } else {
            i * (x1 / x0).ln()
        };
    }
    let (x0, x1) = clip(hi, f64::INFINITY);
    if x1 > x0 {
        s += x1 - x0;
    }
    s
}

/// The largest weight a sample can have: what an unseen sample is bounded by.
fn weight_max(i: f64, p: f64, holds: Holds) -> f64 {
    match holds {
        Holds::Wakeup => i / p,
        Holds::Timed => (i / p).max(1.0),
    }
}

/// Late cycles one stall costs when the driver catches up: cycle m after the late wake-up
/// ends at ℓ + (m+1)·C against its deadline m·P + B, so it is late while m < e / (P − C).
fn cycles_per_stall(e: f64, slack: f64) -> f64 {
    (e / slack).ceil().max(1.0)
}

/// ∫ weight(e)·cycles(e) de over [a, b]: cycles is a step function of e.
fn weighted_cycles_integral(a: f64, b: f64, i: f64, p: f64, slack: f64, holds: Holds) -> f64 {
    let (ja, jb) = ((a / slack).floor(), (b / slack).ceil());
    // NaN (an infinite edge) takes this way too.
    if (jb - ja).partial_cmp(&4096.0) != Some(std::cmp::Ordering::Less) {
        // A bucket far wider than a step: its middle step stands for it.
        return weight_integral(a, b, i, p, holds) * cycles_per_stall((a + b) / 2.0, slack);
    }
    // Steps by index, so that rounding cannot stall the walk at a step's edge.
    (ja as u64..jb as u64)
        .map(|j| {
            let (x0, x1) = (a.max(j as f64 * slack), b.min((j + 1) as f64 * slack));
            if x1 > x0 {
                weight_integral(x0, x1, i, p, holds) * (j + 1) as f64
            } else {
                0.0
            }
        })
        .sum()
}

/// ∫ ceil(u / s) du over [u0, u1], 0 ≤ u0 ≤ u1, in closed form.
fn ceil_integral(u0: f64, u1: f64, s: f64) -> f64 {
    let f = |u: f64| {
        let k = (u / s).ceil();
        s * k * (k - 1.0) / 2.0 + (u - (k - 1.0) * s) * k
    };
    f(u1) - f(u0)
}

/// One cost point's thresholds on the latency axis.
#[derive(Debug, Clone, Copy)]
struct Threshold {
    /// A wake-up later than this misses: B − c.
    miss: f64,
    /// A wake-up later than this (and not missing) leaves the next cycle a backlog: P − c.
    backlog: f64,
    period: f64,
    interval: f64,
    /// P − mean compute: how fast a backlog drains, one cycle at a time.
    slack: f64,
    /// n − 2: periods skipped after a miss besides those the excess covers.
    extra_skip: f64,
    holds: Holds,
}

/// Sums over the samples, per threshold.
#[derive(Debug, Default, Clone, Copy)]
struct Beyond {
    /// Samples beyond the miss threshold (censored ones all counted).
    count: f64,
    /// Samples surely beyond (censored ones only when their whole range is).
    count_low: f64,
    /// Σ weight: episodes.
    episodes: f64,
    /// Σ weight × cycles per stall: late cycles.
    cycles: f64,
    /// Σ device periods that follow a cycle before the next fresh wake-up: the catch-up
    /// cycles a late but timely cycle leaves, the periods a miss skips.
    periods_after: f64,
    censored: bool,
}

fn beyond(d: &LatencyData, t: Threshold) -> Beyond {
    let (x, y, p, i, slack, h) = (t.miss, t.backlog, t.period, t.interval, t.slack, t.holds);
    let mut s = Beyond::default();
    for b in &d.buckets {
        let (lo, hi) = (b.lo_ns as f64, b.hi_ns as f64);
        let n = b.count as f64;
        if hi <= lo {
            let e = lo - x;
            if e > 0.0 {
                s.count += n;
                s.count_low += n;
                s.episodes += n * weight(e, i, p, h);
                s.cycles += n * weight(e, i, p, h) * cycles_per_stall(e, slack);
                s.periods_after += n * (t.extra_skip + (e / p).ceil());
            } else if lo > y {
                s.periods_after += n * ((lo - y) / slack).ceil();
            }
            continue;
        }
        let density = n / (hi - lo);
        let a = lo.max(x);
        if a < hi {
            s.count += density * (hi - a);
            s.count_low += density * (hi - a);
            s.episodes += density * weight_integral(a - x, hi - x, i, p, h);
            s.cycles += density * weighted_cycles_integral(a - x, hi - x, i, p, slack, h);
            s.periods_after +=
                density * (t.extra_skip * (hi - a) + ceil_integral(a - x, hi - x, p));
        }
        let (a, z) = (lo.max(y), hi.min(x));
        if z > a {
            s.periods_after += density * ceil_integral(a - y, z - y, slack);
        }
    }
    for c in &d.censored {
        let (from, max) = (c.from_ns as f64, c.max_ns as f64);
        let n = c.count as f64;
        if max <= x {
            if from > y {
                s.periods_after += n * ((from - y) / slack).ceil();
            }
            continue;
        }
        s.censored = true;
        s.count += n;
        s.count_low += if from > x { n } else { 1.0 };
        let e = max - x;
        s.episodes += n * weight(e, i, p, h);
        s.cycles += n * weight(e, i, p, h) * cycles_per_stall(e, slack);
        s.periods_after += n * (t.extra_skip + (e / p).ceil());
    }
    s
}

/// One buffer size at n periods.
pub fn row(
    d: &LatencyData,
    cost: &[CostPoint],
    frames: u32,
    n: u32,
    cfg: &PredictConfig,
) -> PredictRow {
    let p = frames as f64 * 1e9 / cfg.rate as f64;
    let budget = (n.max(1) - 1) as f64 * p;
    let c_mean = cost_mean(cost);
    let cycles_per_hour = NS_PER_HOUR / p;
    let overload = c_mean >= p;
    // An overloaded row's rates are set below; a finite slack keeps its sums finite.
    let slack = if overload { p } else { p - c_mean };
    let mut t = Beyond::default();
    for c in cost.iter().filter(|c| c.probability > 0.0) {
        let s = beyond(
            d,
            Threshold {
                miss: budget - c.ns,
                backlog: p - c.ns,
                period: p,
                interval: d.interval_ns as f64,
                slack,
                extra_skip: n.saturating_sub(2) as f64,
                holds: cfg.holds,
            },
        );
        t.count += c.probability * s.count;
        t.count_low += c.probability * s.count_low;
        t.episodes += c.probability * s.episodes;
        t.cycles += c.probability * s.cycles;
        t.periods_after += c.probability * s.periods_after;
        t.censored |= s.censored;
    }
    // Only a cycle that slept draws a wake-up latency: one that starts at once behind a
    // late predecessor drains the backlog by P − C per cycle and cannot miss while C < P
    // (docs/methods.md). Each fresh wake-up owns itself and the periods after it
    // until the next; the rates are per device period, so they scale by that share.
    let fresh = 1.0 / (1.0 + t.periods_after / d.samples.max(1) as f64);
    let hours = d.observed_ns / NS_PER_HOUR / fresh;
    let i = d.interval_ns as f64;
    let w_max = weight_max(i, p, cfg.holds);
    let alpha = 1.0 - cfg.confidence;
    // Both rates scale the same interval on the count (the costly part of a row): once.
    let (k_low, k_high) = (
        poisson_low(t.count_low, alpha),
        poisson_high(t.count, alpha),
    );
    let rate = |sum: f64| {
        let per_hour = sum / hours;
        // Per sample beyond the budget: the observed mean, or the largest a weight can be.
        let scale = if t.count > 0.0 {
            per_hour / t.count
        } else {
            w_max / hours
        };
        Rate {
            per_hour,
            low: scale * k_low,
            high: scale * k_high,
            upper_bound: t.count < MIN_EVENTS,
        }
    };
    let (mut xruns, mut episodes) = (rate(t.cycles), rate(t.episodes));
    if overload {
        let all = Rate {
            per_hour: cycles_per_hour,
            low: cycles_per_hour,
            high: cycles_per_hour,
            upper_bound: false,
        };
        (xruns, episodes) = (all, all);
    }
    let measure_for_ns = (episodes.upper_bound && !overload).then(|| {
        let w = if t.count > 0.0 {
            t.episodes / t.count
        } else {
            w_max
        };
        let cpu_hours = MIN_EVENTS * w * fresh / cfg.target_per_hour;
        (cpu_hours * NS_PER_HOUR / d.cpus.max(1) as f64).ceil() as u64
    });
    let outlook = if overload || episodes.low > cfg.target_per_hour {
        Outlook::Fails
    } else if episodes.high <= cfg.target_per_hour {
        Outlook::Ok
    } else {
        Outlook::Marginal
    };
    PredictRow {
        buffer_frames: frames,
        period_ns: p,
        budget_ns: budget,
        compute_mean_ns: c_mean,
        compute_max_ns: cost_max(cost),
        cycles_per_hour,
        p_miss: (t.count / d.samples.max(1) as f64).min(1.0),
        events_beyond: t.count,
        xruns_per_hour: xruns,
        episodes_per_hour: episodes,
        // Overloaded, no cycle ever catches up enough to sleep.
        fresh_share: if overload { 0.0 } else { fresh },
        cycles_per_episode: if t.episodes > 0.0 && !overload {
            t.cycles / t.episodes
        } else {
            1.0
        },
        overload,
        censored: t.censored,
        measure_for_ns,
        outlook,
    }
}

// ---------------------------------------------------------------------------------------
// Exact Poisson intervals (Garwood): the quantiles of the gamma distribution.

/// Lower end of the two-sided interval for a mean, having seen k events.
pub fn poisson_low(k: f64, alpha: f64) -> f64 {
    if k <= 0.0 {
        0.0
    } else {
        gamma_quantile(k, alpha / 2.0)
    }
}

/// Upper end of the two-sided interval for a mean, having seen k events.
pub fn poisson_high(k: f64, alpha: f64) -> f64 {
    gamma_quantile(k.max(0.0) + 1.0, 1.0 - alpha / 2.0)
}

fn ln_gamma(x: f64) -> f64 {
    // Lanczos, g = 7, n = 9: 15 significant digits for x > 0.
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + 7.5;
    for (k, c) in C.iter().enumerate().skip(1) {
        a += c / (x + k as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The regularised lower incomplete gamma function P(a, x).
fn gamma_p(a: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    let front = (a * x.ln() - x - ln_gamma(a)).exp();
    if x < a + 1.0 {
        let (mut sum, mut term, mut ap) = (1.0 / a, 1.0 / a, a);
        for _ in 0..10_000 {
            ap += 1.0;
            term *= x / ap;
            sum += term;
            if term.abs() < sum.abs() * 1e-16 {
                break;
            }
        }
        (sum * front).min(1.0)
    } else {
        // Continued fraction for Q(a, x) (modified Lentz).
        let tiny = 1e-300;
        let mut b = x + 1.0 - a;
        let mut c = 1.0 / tiny;
        let mut d = 1.0 / b;
        let mut h = d;
        for i in 1..10_000 {
            let an = -(i as f64) * (i as f64 - a);
            b += 2.0;
            d = an * d + b;
            if d.abs() < tiny {
                d = tiny;
            }
            c = b + an / c;
            if c.abs() < tiny {
                c = tiny;
            }
            d = 1.0 / d;
            let delta = d * c;
            h *= delta;
            if (delta - 1.0).abs() < 1e-16 {
                break;
            }
        }
        (1.0 - front * h).max(0.0)
    }
}

/// Answers of [`gamma_quantile`] kept at most, per thread.
const QUANTILES_KEPT: usize = 1 << 16;

thread_local! {
    /// [`gamma_quantile`]'s answers by the bits of (a, q). A verdict over a suite asks for
    /// the same few (no event beyond the budget, whole counts) in most of its rows, each
    /// bisection taking thousands of incomplete gamma functions.
    static QUANTILES: std::cell::RefCell<std::collections::HashMap<(u64, u64), f64>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

/// x with P(a, x) = q.
fn gamma_quantile(a: f64, q: f64) -> f64 {
    let key = (a.to_bits(), q.to_bits());
    if let Some(x) = QUANTILES.with(|m| m.borrow().get(&key).copied()) {
        return x;
    }
    let x = gamma_quantile_bisected(a, q);
    QUANTILES.with(|m| {
        let mut m = m.borrow_mut();
        if m.len() >= QUANTILES_KEPT {
            m.clear();
        }
        m.insert(key, x);
    });
    x
}

fn gamma_quantile_bisected(a: f64, q: f64) -> f64 {
    let mut hi = a.max(1.0);
    while gamma_p(a, hi) < q && hi < f64::MAX / 4.0 {
        hi *= 2.0;
    }
    let mut lo = 0.0;
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if gamma_p(a, mid) < q {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo <= hi * 1e-13 {
            break;
        }
    }
    0.5 * (lo + hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(buffers: &[u32], periods: &[u32]) -> PredictConfig {
        PredictConfig {
            latency: vec![],
            cost_file: None,
            load_pct: None,
            instances: None,
            cell: None,
            cpu: None,
            interval_ns: None,
            rate: 48_000,
            buffers: buffers.to_vec(),
            periods: periods.to_vec(),
            target_per_hour: 1.0,
            confidence: CONFIDENCE,
            holds: Holds::Timed,
        }
    }

    fn fixed(ns: f64) -> Vec<CostPoint> {
        Compute::Fixed { ns }.at(0, 0.0)
    }

    #[test]
    fn garwood_intervals_match_the_tables() {
        // Garwood (1936) / the usual tables of exact 95 % Poisson limits.
        for (k, lo, hi) in [
            (0.0, 0.0, 3.689),
            (1.0, 0.0253, 5.572),
            (3.0, 0.619, 8.767),
            (10.0, 4.795, 18.39),
            (100.0, 81.36, 121.63),
        ] {
            let (l, h) = (poisson_low(k, 0.05), poisson_high(k, 0.05));
            assert!(
                (l - lo).abs() <= lo * 1e-3 + 1e-4,
                "k={k}: low {l}, want {lo}"
            );
            assert!((h - hi).abs() <= hi * 1e-3, "k={k}: high {h}, want {hi}");
        }
        // Fractional counts are between their neighbours.
        let h = poisson_high(2.5, 0.05);
        assert!(poisson_high(2.0, 0.05) < h && h < poisson_high(3.0, 0.05));
    }

    #[test]
    fn all_latency_at_100us_with_400us_of_compute_misses_exactly_when_the_budget_is_short() {
        let d = LatencyData::points(&[(100_000, 10_000)], 200_000);
        let c = cfg(&[16, 23, 24, 32], &[2, 3]);
        let r = |frames, n| row(&d, &fixed(400_000.0), frames, n, &c);
        // 16 frames: P = 333 µs < C: overloaded whatever n, and 500 µs > P misses at n = 2.
        let x = r(16, 2);
        assert_eq!(
            (x.p_miss, x.overload, x.outlook),
            (1.0, true, Outlook::Fails)
        );
        assert_eq!(x.xruns_per_hour.per_hour, x.cycles_per_hour);
        // 23 frames: B = 479.2 µs < 500 µs: every cycle misses by 20.8 µs, one cycle each,
        // and the period after each miss is skipped: half the periods have an xrun.
        let x = r(23, 2);
        assert_eq!((x.p_miss, x.overload), (1.0, false));
        assert_eq!(x.events_beyond, 10_000.0);
        assert_eq!(x.fresh_share, 0.5);
        assert!((x.xruns_per_hour.per_hour / x.cycles_per_hour - 0.5).abs() < 1e-12);
        assert!((x.cycles_per_episode - 1.0).abs() < 1e-12);
        assert_eq!(x.outlook, Outlook::Fails);
        // 24 frames: B = 500 µs exactly: ending at the deadline is in time.
        for (frames, n) in [(24, 2), (32, 2), (23, 3), (24, 3)] {
            let x = r(frames, n);
            assert_eq!(x.p_miss, 0.0, "{frames}/{n}");
            assert_eq!(x.events_beyond, 0.0);
            assert_eq!(x.xruns_per_hour.per_hour, 0.0);
            assert!(x.episodes_per_hour.upper_bound);
        }
        assert_eq!(r(32, 2).budget_ns, 32e9 / 48_000.0);
        assert_eq!(r(24, 3).budget_ns, 1_000_000.0);
    }

    #[test]
    fn a_bucket_straddling_the_threshold_counts_its_share_above() {
        // 1000 samples spread over [100, 110) µs, 4 µs of them above 106 µs.
        let d = LatencyData {
            buckets: vec![Bucket {
                lo_ns: 100_000,
                hi_ns: 110_000,
                count: 1000,
            }],
            censored: vec![],
            samples: 1000,
            observed_ns: 1000.0 * 200_000.0,
            interval_ns: 200_000,
            cpus: 1,
        };
        // 48 frames: P = 1 ms; C = 894 µs leaves 106 µs.
        let x = row(&d, &fixed(894_000.0), 48, 2, &cfg(&[48], &[2]));
        assert!(
            (x.events_beyond - 400.0).abs() < 1e-9,
            "{}",
            x.events_beyond
        );
        assert!((x.p_miss - 0.4).abs() < 1e-12);
        // Excesses below I and P: each sample weighs I/P, so episodes/h = p · cycles/h,
        // less the period each miss skips: 0.4 misses per 1.4 periods.
        assert!((x.fresh_share - 1.0 / 1.4).abs() < 1e-12);
        let want = 0.4 / 1.4 * x.cycles_per_hour;
        assert!((x.episodes_per_hour.per_hour - want).abs() < 1e-6 * want);
        // A cost distribution is a mixture: half the cycles at 894 µs, half at 0.
        let mixed = [
            CostPoint {
                probability: 0.5,
                ns: 894_000.0,
            },
            CostPoint {
                probability: 0.5,
                ns: 0.0,
            },
        ];
        let y = row(&d, &mixed, 48, 2, &cfg(&[48], &[2]));
        assert!((y.p_miss - 0.2).abs() < 1e-12);
        assert_eq!(y.compute_max_ns, 894_000.0);
    }

    #[test]
    fn long_stalls_are_one_episode_of_several_cycles() {
        // One 20 ms sample in 10 s of a 200 µs measurement; 64 frames (1.333 ms), 10 % load.
        let n = 50_000;
        let d = LatencyData::points(&[(20_000, n - 1), (20_000_000, 1)], 200_000);
        let c = cfg(&[64], &[2]);
        let cost = Compute::LoadPct { pct: 10.0 }.at(64, 64e9 / 48_000.0);
        let x = row(&d, &cost, 64, 2, &c);
        let hours = n as f64 * 200e3 / NS_PER_HOUR;
        // The stall's excess is beyond I and P: weight 1, one episode per sample; the
        // 15 periods it skips (18.8 ms of excess) are not at risk.
        assert!((x.fresh_share - 1.0 / (1.0 + 15.0 / n as f64)).abs() < 1e-15);
        let want = x.fresh_share / hours;
        assert!((x.episodes_per_hour.per_hour - want).abs() < 1e-9 * want);
        // e = 20 ms + 0.133 − 1.333 ms over a slack of 1.2 ms: 16 late cycles.
        assert!(
            (x.cycles_per_episode - 16.0).abs() < 1e-9,
            "{}",
            x.cycles_per_episode
        );
        assert!(x.episodes_per_hour.upper_bound && x.measure_for_ns.is_some());
        // 3 events at 1/h would need 3 h of CPU time on the one CPU (less the skipped share).
        let want = 3.0 * 3.6e12 * x.fresh_share;
        assert!((x.measure_for_ns.unwrap() as f64 - want).abs() <= 1.0);
        assert_eq!(x.outlook, Outlook::Fails, "{x:?}"); // 360/h, lower end 9/h
        assert!(x.episodes_per_hour.low > 1.0);
        // The per-cycle probability ignores the stall's length: far lower than the episodes.
        assert!(x.p_miss * x.cycles_per_hour < x.episodes_per_hour.per_hour / 5.0);
    }

    #[test]
    fn a_late_but_timely_cycle_leaves_catch_up_cycles_that_cannot_miss() {
        // 48 frames: P = 1 ms; C = 0.9 ms; n = 3: B = 2 ms. 900 wake-ups 150 µs late end
        // 50 µs into the next period: one catch-up cycle each. 100 wake-ups 1.2 ms late
        // miss by 0.1 ms and skip 1 + 1 periods. Per fresh wake-up: 0.9·2 + 0.1·3 = 2.1
        // periods, 0.1 misses.
        let d = LatencyData::points(&[(150_000, 900), (1_200_000, 100)], 200_000);
        let x = row(&d, &fixed(900_000.0), 48, 3, &cfg(&[48], &[3]));
        assert!((x.p_miss - 0.1).abs() < 1e-12);
        assert!(
            (x.fresh_share - 1.0 / 2.1).abs() < 1e-12,
            "{}",
            x.fresh_share
        );
        // The excess (100 µs) is below I and P: episodes per period = p · fresh share.
        let want = 0.1 / 2.1 * x.cycles_per_hour;
        assert!((x.episodes_per_hour.per_hour - want).abs() < 1e-9 * want);
        assert_eq!(ceil_integral(0.0, 250.0, 100.0), 100.0 + 200.0 + 150.0);
        assert_eq!(ceil_integral(50.0, 150.0, 100.0), 50.0 + 100.0);
    }

    #[test]
    fn per_wake_up_a_long_sample_weighs_i_over_p_and_as_a_timed_hold_one() {
        // Every sample 5 ms late, measured every 200 µs; 64 frames at 48 kHz, no compute.
        let d = LatencyData {
            buckets: vec![Bucket {
                lo_ns: 5_000_000,
                hi_ns: 5_000_000,
                count: 1000,
            }],
            censored: vec![],
            samples: 1000,
            observed_ns: 1000.0 * 200e3,
            interval_ns: 200_000,
            cpus: 1,
        };
        let p = 64e9 / 48e3;
        let mut c = cfg(&[64], &[2]);
        let timed = row(&d, &fixed(0.0), 64, 2, &c);
        c.holds = Holds::Wakeup;
        let wakeup = row(&d, &fixed(0.0), 64, 2, &c);
        // Every wake-up is late either way; per wake-up the audio thread, waking every P,
        // meets I/P as many late wake-ups per hour as the measurement did.
        assert_eq!(timed.p_miss, 1.0);
        assert_eq!(wakeup.p_miss, 1.0);
        let ratio = wakeup.episodes_per_hour.per_hour / timed.episodes_per_hour.per_hour;
        assert!((ratio - 200e3 / p).abs() < 1e-9, "{ratio}");
        // Unseen, the bound scales the same way.
        let none = LatencyData {
            buckets: vec![Bucket {
                lo_ns: 10_000,
                hi_ns: 10_000,
                count: 1000,
            }],
            ..d
        };
        let w = row(&none, &fixed(0.0), 64, 2, &c).episodes_per_hour.high;
        c.holds = Holds::Timed;
        let t = row(&none, &fixed(0.0), 64, 2, &c).episodes_per_hour.high;
        assert!((w / t - 200e3 / p).abs() < 1e-9, "{w} vs {t}");
    }

    #[test]
    fn a_percentile_band_is_spread_between_its_two_ends() {
        let s = Summary {
            count: 1_000_000,
            min: 100,
            p50: 200,
            p90: 300,
            p99: 400,
            p99_9: 500,
            p99_99: 600,
            p99_9999: 1000,
            max: 5000,
            ..Summary::default()
        };
        let pts = summary_points(&s);
        let mass = |lo: f64, hi: f64| -> f64 {
            pts.iter()
                .filter(|p| p.ns > lo && p.ns <= hi)
                .map(|p| p.probability)
                .sum()
        };
        // The top 0.01 % lies between p99.99 and p99.9999, save 10⁻⁶ beyond: none of it at
        // the maximum, where the band's upper end used to put it.
        assert!((mass(600.0, 1000.0) - 0.000099).abs() < 1e-15);
        assert!((mass(1000.0, 5000.0) - 0.000001).abs() < 1e-15);
        assert!(pts.iter().all(|p| p.ns < 5000.0 && p.ns > 100.0));
        // Spread evenly: the band's mean is its middle.
        let mean = cost_mean(&pts);
        let expect = 0.5 * 150.0
            + 0.4 * 250.0
            + 0.09 * 350.0
            + 0.009 * 450.0
            + 0.0009 * 550.0
            + 0.000099 * 800.0
            + 0.000001 * 3000.0;
        assert!((mean - expect).abs() < 1e-9, "{mean} vs {expect}");
        // A band whose ends coincide, or whose lower end is unknown, is a point.
        let b = bands(None, &[(0.5, 10.0), (0.5, 10.0)]);
        assert_eq!(b.len(), 2);
    }

    #[test]
    fn a_step_edge_rounding_cannot_stall_the_integral() {
        // Once looped for ever: the step's edge k·slack rounded onto the start.
        let (a, b, slack) = (
            283_030.581_249_999_93,
            283_707.666_666_666_74,
            94_343.527_083_333_32,
        );
        let v = weighted_cycles_integral(a, b, 200e3, 1e9 / 3e3, slack, Holds::Timed);
        let w = weight_integral(a, b, 200e3, 1e9 / 3e3, Holds::Timed);
        assert!(v >= 3.0 * w && v <= 4.0 * w, "{v} vs {w}");
    }

    proptest::proptest! {
        #[test]
        fn every_row_is_finite_and_its_intervals_hold_the_estimate(
            lats in proptest::collection::vec((0u64..50_000_000, 1u64..1000), 1..20),
            pct in 0.0f64..130.0,
            frames in proptest::sample::select(vec![16u32, 48, 64, 256, 1024]),
            n in 2u32..5,
            interval in proptest::sample::select(vec![100_000u64, 200_000, 1_000_000]),
        ) {
            let d = LatencyData::points(&lats, interval);
            let c = cfg(&[frames], &[n]);
            let cost = Compute::LoadPct { pct }.at(frames, frames as f64 * 1e9 / 48e3);
            let x = row(&d, &cost, frames, n, &c);
            let v = serde_json::to_value(&x).unwrap();
            let back: PredictRow = serde_json::from_value(v).unwrap();
            proptest::prop_assert_eq!(&back, &x, "every field survives JSON (no NaN)");
            proptest::prop_assert!((0.0..=1.0).contains(&x.p_miss));
            proptest::prop_assert!((0.0..=1.0).contains(&x.fresh_share));
            for r in [x.xruns_per_hour, x.episodes_per_hour] {
                proptest::prop_assert!(r.low <= r.per_hour * (1.0 + 1e-12));
                proptest::prop_assert!(r.per_hour <= r.high * (1.0 + 1e-12));
            }
            proptest::prop_assert!(x.cycles_per_episode >= 1.0);
        }
    }

    #[test]
    fn weights_integrate_in_closed_form() {
        for (i, p, h) in [
            (200e3, 1333e3, Holds::Timed),
            (1000e3, 333e3, Holds::Timed),
            (500e3, 500e3, Holds::Timed),
            (200e3, 1333e3, Holds::Wakeup),
            (1000e3, 333e3, Holds::Wakeup),
        ] {
            for (a, b) in [(0.0, 50e3), (10e3, 700e3), (100e3, 3e6), (2e6, 5e6)] {
                let steps = 100_000;
                let dx = (b - a) / steps as f64;
                let numeric: f64 = (0..steps)
                    .map(|k| weight(a + (k as f64 + 0.5) * dx, i, p, h) * dx)
                    .sum();
                let exact = weight_integral(a, b, i, p, h);
                assert!(
                    (numeric - exact).abs() <= exact * 1e-6,
                    "I={i} P={p} [{a},{b}]: {numeric} vs {exact}"
                );
                let slack = 300e3;
                let numeric: f64 = (0..steps)
                    .map(|k| {
                        let e = a + (k as f64 + 0.5) * dx;
                        weight(e, i, p, h) * cycles_per_stall(e, slack) * dx
                    })
                    .sum();
                let exact = weighted_cycles_integral(a, b, i, p, slack, h);
                assert!(
                    (numeric - exact).abs() <= exact * 1e-4,
                    "{numeric} vs {exact}"
                );
            }
        }
    }

    #[test]
    fn censored_tails_are_bounded_and_flagged() {
        let d = LatencyData {
            buckets: vec![Bucket {
                lo_ns: 10_000,
                hi_ns: 11_000,
                count: 9_990,
            }],
            censored: vec![Censored {
                from_ns: 400_000,
                max_ns: 5_000_000,
                count: 10,
            }],
            samples: 10_000,
            observed_ns: 10_000.0 * 200e3,
            interval_ns: 200_000,
            cpus: 1,
        };
        // 256 frames, 50 % load: budget 5.33 ms, threshold 2.67 ms, inside the censored range.
        let cost = Compute::LoadPct { pct: 50.0 }.at(256, 256e9 / 48e3);
        let x = row(&d, &cost, 256, 2, &cfg(&[256], &[2]));
        assert!(x.censored);
        assert_eq!(x.events_beyond, 10.0);
        // Only the maximum is surely beyond: the lower end rests on one sample.
        let one = x.episodes_per_hour.per_hour / 10.0 * poisson_low(1.0, 0.05);
        assert!((x.episodes_per_hour.low - one).abs() < 1e-9);
        // Below the censored range every overflow is beyond.
        let cost = Compute::LoadPct { pct: 95.0 }.at(256, 256e9 / 48e3);
        let y = row(&d, &cost, 256, 2, &cfg(&[256], &[2]));
        let ten = y.episodes_per_hour.per_hour / 10.0 * poisson_low(10.0, 0.05);
        assert!((y.episodes_per_hour.low - ten).abs() < 1e-9);
    }

    #[test]
    fn per_frame_costs_scale_from_the_nearest_measured_size() {
        let m = Compute::PerFrame {
            measured: vec![
                BufferCost {
                    frames: 64,
                    points: vec![CostPoint {
                        probability: 1.0,
                        ns: 100.0,
                    }],
                },
                BufferCost {
                    frames: 512,
                    points: vec![CostPoint {
                        probability: 1.0,
                        ns: 400.0,
                    }],
                },
            ],
        };
        assert_eq!(m.at(128, 0.0)[0].ns, 200.0);
        assert_eq!(m.at(256, 0.0)[0].ns, 200.0);
        assert_eq!(m.at(1024, 0.0)[0].ns, 800.0);
        assert_eq!(m.at(16, 0.0)[0].ns, 25.0);
        let pct = Compute::LoadPct { pct: 25.0 }.at(64, 1e6);
        assert_eq!(pct[0].ns, 250_000.0);
        let s = Summary {
            count: 10,
            p50: 1,
            p90: 2,
            p99: 3,
            p99_9: 4,
            p99_99: 5,
            p99_9999: 6,
            max: 7,
            ..Summary::default()
        };
        let total: f64 = summary_points(&s).iter().map(|p| p.probability).sum();
        assert!((total - 1.0).abs() < 1e-12);
    }
}
