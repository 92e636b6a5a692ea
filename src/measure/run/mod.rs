//! `measure::run`: the library entry point behind `xrunlab run` — open the device, build the
//! graph for what it accepted, run it under the real-time harness, fold the probes into a
//! result.

pub mod forensics;
mod live;

use crate::common::Status;
use crate::common::Summary;
use crate::driver::alsa::{AlsaConfig, AlsaReport};
use crate::driver::jack::{JackConfig, JackReport};
use crate::driver::signal::{ContinuitySink, Generator, SignalKind, SinkStats};
use crate::driver::sim::SimConfig;
use crate::driver::{
    AnyDevice, Device, DeviceParams, DriverOptions, DriverReport, Parts, RunSpec, StopReason,
};
use crate::dsp::ChainElement;
use crate::engine::collector::{
    self, EarlyStop, Folded, StopCriterion, TraceWriter, WorkCost, XrunEvent,
};
use crate::engine::harness::{self, Harness, HarnessOutcome, Supervisor};
use crate::engine::watchdog::{bound_ns, WatchdogReport};
use crate::engine::{CostModel, Engine, EngineSpec};
use crate::error::{Error, Result};
use crate::measure::session::{Outcome, Session};
use crate::progress::Progress;
use crate::rt::thread::ThreadSpec;
use crate::rt::Policy;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The driver kinds, with their capabilities (see `driver::kind`).
pub use crate::driver::kind::{ComputeKind, DriverKind};

/// What `xrunlab run` was asked to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunConfig {
    pub driver: DriverKind,
    pub rate: u32,
    pub buffer_frames: u32,
    /// Periods of buffering n.
    pub periods: u32,
    pub tracks: u32,
    /// The chain as typed, and parsed.
    pub chain: String,
    pub chain_elements: Vec<ChainElement>,
    pub duration_ns: u64,
    /// CPUs for the engine threads (thread 0 on the first); empty = all allowed.
    pub cpus: Vec<usize>,
    pub policy: Policy,
    pub seed: u64,
    pub input: SignalKind,
    /// Per-cycle CSV trace path.
    pub trace: Option<String>,
    /// Watchdog bound; None = max(1 s, 100 periods).
    pub watchdog_ns: Option<u64>,
    /// mlockall for the run (virtual driver).
    pub mlock: bool,
    pub sim: SimConfig,
    pub compute: ComputeKind,
    pub cost: CostModel,
    /// `--driver jack` options (server, client name, connections, --set-buffer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jack: Option<JackConfig>,
    /// `--driver alsa` options (device, access).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alsa: Option<AlsaConfig>,
    /// How long a worker spins for the next cycle before sleeping on the futex. Longer than
    /// a period = workers never sleep (lowest wake overhead, a busy core each).
    #[serde(default = "default_worker_spin_ns")]
    pub worker_spin_ns: u64,
    /// Stress presets run around the engine by `run_under` (labels; the results' `stress`
    /// record says what ran).
    #[serde(default)]
    pub stress: Vec<String>,
    /// A competing periodic task run beside the engine by `run_under`.
    #[serde(default)]
    pub compete: Option<crate::stress::PeriodicSpec>,
    /// End the run at the first xrun this criterion matches (the run is then `complete`,
    /// shorter than asked, and `RunResults::early_stop_cycle` says where).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_on: Option<StopCriterion>,
    /// `stop_on` ignores xruns of cycles before this one (a load trial's warm-up).
    #[serde(default)]
    pub stop_from_cycle: u64,
    /// Leave every engine thread unpinned. SCHED_DEADLINE needs it: the kernel refuses a
    /// DEADLINE thread whose affinity is narrower than its root domain (EPERM).
    #[serde(default)]
    pub unpinned: bool,
    /// Switch the chain's elements on one at a time during the run (`xrunlab sched --ramp`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ramp: Option<crate::engine::Ramp>,
    /// Track placement (`--pin`); results written before it existed ran what is now `steal`.
    #[serde(default)]
    pub pin: crate::engine::Placement,
    /// What each chain element is expected to cost (`--cost-prior FILE`, a `plugins bench`
    /// result); None: burn's calibration when the chain is all burn, else the run's own cost
    /// (docs/methods.md "Xrun and cause").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_prior: Option<crate::engine::prior::CostPrior>,
}

fn default_worker_spin_ns() -> u64 {
    5_000
}

impl RunConfig {
    /// Defaults of `xrunlab run` for a driver.
    pub fn new(driver: DriverKind, chain: &str) -> Result<Self> {
        Ok(RunConfig {
            driver,
            rate: 48000,
            buffer_frames: 64,
            periods: 2,
            tracks: 1,
            chain: chain.to_string(),
            chain_elements: crate::dsp::parse_chain(chain)?,
            duration_ns: 10_000_000_000,
            cpus: Vec::new(),
            policy: driver.default_policy(),
            seed: 1,
            input: SignalKind::Sine { freq_hz: 1000.0 },
            trace: None,
            watchdog_ns: None,
            mlock: driver.mlock_applies(),
            sim: SimConfig::default(),
            compute: driver.default_compute(),
            cost: CostModel::default(),
            jack: (driver == DriverKind::Jack).then(JackConfig::default),
            alsa: (driver == DriverKind::Alsa).then(AlsaConfig::default),
            worker_spin_ns: default_worker_spin_ns(),
            stress: Vec::new(),
            compete: None,
            stop_on: None,
            stop_from_cycle: 0,
            unpinned: false,
            ramp: None,
            pin: crate::engine::Placement::default(),
            cost_prior: None,
        })
    }

    /// No engine thread is pinned: `--pin unpinned`, or SCHED_DEADLINE (`unpinned`).
    pub fn threads_unpinned(&self) -> bool {
        self.unpinned || self.pin == crate::engine::Placement::Unpinned
    }

    pub fn device(&self) -> DeviceParams {
        DeviceParams {
            rate: self.rate,
            frames: self.buffer_frames,
            periods: self.periods,
        }
    }

    pub fn validate(&self) -> Result<()> {
        crate::common::device::check_rate(self.rate)?;
        self.input.check(self.rate)?;
        if !(1..=65536).contains(&self.buffer_frames) {
            return Err(Error::usage(format!(
                "--buffer {} is outside 1..65536",
                self.buffer_frames
            )));
        }
        if !(2..=64).contains(&self.periods) {
            return Err(Error::usage(format!(
                "--periods {} is outside 2..64 (one period of buffering leaves no time to compute)",
                self.periods
            )));
        }
        if !(1..=crate::common::cycle::MAX_TRACKS as u32).contains(&self.tracks) {
            return Err(Error::usage(format!(
                "--tracks {} is outside 1..{}",
                self.tracks,
                crate::common::cycle::MAX_TRACKS
            )));
        }
        if self.duration_ns == 0 {
            return Err(Error::usage("--duration must be positive"));
        }
        if !self.driver.can_model_compute() && self.compute == ComputeKind::Model {
            return Err(Error::usage(
                "a cost model needs simulated time: use --driver sim",
            ));
        }
        // A modelled run makes one instance of each element, whatever its count.
        if self.compute != ComputeKind::Model {
            crate::dsp::check_chain_size(&self.chain_elements)?;
        }
        Ok(())
    }

    /// Device periods the run lasts.
    pub fn periods_total(&self) -> u64 {
        let p = self.duration_ns as u128 * self.rate as u128
            / (self.buffer_frames as u128 * 1_000_000_000);
        (p as u64).max(1)
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct XrunCounts {
    /// Cycles that missed their deadline.
    pub total: u64,
    pub late_wakeup: u64,
    pub overload: u64,
    pub interference: u64,
    /// Of `total` (and of the cause it is counted under): cycles late only by the backlog
    /// the xrun before them left, whose cause is that xrun's. Only a JACK server, which never
    /// skips a late client's cycles, produces them (see `common::cycle`).
    #[serde(default)]
    pub inherited: u64,
    /// Of `interference`: xruns whose critical thread's CPU clock ran far beyond the cost of
    /// its work (the cost prior's, else the run's own p99 per element run): host time
    /// charged to the thread, which
    /// the raw rule would have called `overload` (docs/methods.md "Xrun and cause").
    #[serde(default)]
    pub host_cpu: u64,
}

/// Which engine thread ran which track (docs/methods.md "Track placement"): a core
/// that stalled shows as its home tracks run by other threads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PlacementReport {
    pub mode: crate::engine::Placement,
    /// Per engine thread: tracks it ran over the run.
    pub tracks_run: Vec<u64>,
    /// Per engine thread: its home tracks (track index mod threads) another thread ran.
    pub home_tracks_taken: Vec<u64>,
    /// Track runs by a thread other than the track's home.
    pub stolen_tracks: u64,
    /// Cycles with at least one such track run.
    pub cycles_with_stolen: u64,
    /// Per track: how many cycles each engine thread ran it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_track: Vec<Vec<u64>>,
}

/// One engine thread's host stalls (docs/methods.md "Host stalls per core"): cycles
/// in which its CPU clock ran beyond the expected cost of the work it did, by at least a
/// quarter and 50 µs. Its clock runs only while it is the task on its CPU, so that time was
/// not this system's: the host (a vCPU taken away), an SMI.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CoreStalls {
    /// Engine thread (0 = the driver thread).
    pub thread: u32,
    /// Its CPU (None: unpinned).
    pub cpu: Option<usize>,
    /// Stalled cycles.
    pub stalls: u64,
    /// CPU time beyond the expectation, summed over them, and the largest.
    pub stall_total_ns: u64,
    pub stall_max_ns: u64,
    /// The cycle of the largest, and its time since the first cycle's ideal start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worst_cycle: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worst_at_ns: Option<u64>,
    /// Of the stalls: xruns with this thread critical (whatever their cause).
    pub stall_xruns: u64,
    /// The tracks it was running in its stalled cycles, with how often.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stalled_tracks: Vec<TrackCycles>,
    /// Steal on its CPU over the run (/proc/stat `cpuN`), ms, and the 50 ms windows with
    /// steal (as `host_steal`); None when unpinned or not counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal_windows: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TrackCycles {
    pub track: u32,
    pub cycles: u64,
}

/// The cost prior a run was judged against (docs/methods.md "Xrun and cause").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PriorReport {
    pub prior: crate::engine::prior::CostPrior,
    /// Expected ns of one track's whole chain per cycle.
    pub track_cycle_ns: u64,
    /// The in-time cycles' median critical CPU time over the prior's expectation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_median_ratio: Option<f64>,
    /// Cycles were judged against it to the end; false once the run's median reached 1.25×
    /// it (the prior does not describe this machine) and the run's own cost took over.
    pub used: bool,
}

/// Percent-of-period summary (DSP load = wall/P, CPU load = CPU/P).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LoadPct {
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

impl LoadPct {
    fn of(s: &Summary, period_ns: u64) -> Self {
        let f = |v: f64| 100.0 * v / period_ns as f64;
        LoadPct {
            mean: f(s.mean),
            p50: f(s.p50 as f64),
            p99: f(s.p99 as f64),
            max: f(s.max as f64),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EngineThread {
    /// 0 = the driver thread (also processes tracks).
    pub index: u32,
    pub tid: i32,
    pub cpu: Option<usize>,
    pub policy: String,
    /// Mean CPU ns per cycle.
    pub mean_cpu_ns: f64,
}

/// Futex traffic of the worker pool (how often the spin was not enough).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SyncCounts {
    pub worker_sleeps: u64,
    pub start_wakes: u64,
    pub join_sleeps: u64,
    pub join_wakes: u64,
}

/// What `xrunlab run` measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunResults {
    pub period_ns: u64,
    /// (n−1)·P: the time from interrupt to deadline.
    pub budget_ns: u64,
    pub threads: Vec<EngineThread>,
    /// Cycles processed.
    pub cycles: u64,
    /// Device periods elapsed (processed + skipped).
    pub periods_elapsed: u64,
    pub skipped_periods: u64,
    pub xruns: XrunCounts,
    /// Records lost because the probe ring was full (summaries then miss those cycles).
    pub dropped_records: u64,
    pub dsp_load_pct: LoadPct,
    pub cpu_load_pct: LoadPct,
    pub wake_latency_ns: Summary,
    /// wake − max(t_ideal, previous end): the part the cause analysis blames on the scheduler.
    pub sched_latency_ns: Summary,
    /// Compute wall time end − wake.
    pub wall_ns: Summary,
    pub cpu_ns: Summary,
    pub crit_cpu_ns: Summary,
    /// `crit_cpu_ns` less the host stall judged in each cycle (docs/methods.md "Host stalls
    /// per core"): the compute `predict --cost` takes. Empty in results written before it.
    #[serde(default, skip_serializing_if = "Summary::is_empty")]
    pub crit_compute_ns: Summary,
    pub interference_ns: Summary,
    /// Driver end time end − t_ideal.
    pub end_time_ns: Summary,
    pub driver_period_ns: Summary,
    /// Per track: the latest its processing ended after wake.
    pub track_end_max_ns: Vec<u64>,
    pub xrun_events: Vec<XrunEvent>,
    /// Which thread ran which track (engines of two threads or more).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<PlacementReport>,
    /// Real drivers in a guest whose kernel counts steal: the recorded xruns set against
    /// the windows in which the hypervisor took CPU time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_steal: Option<crate::system::steal::HostSteal>,
    /// Real drivers: per engine thread, its host stalls and its CPU's steal.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_stalls: Vec<CoreStalls>,
    /// Real drivers with a known cost per chain element: the prior xruns were judged against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_prior: Option<PriorReport>,
    pub sink: SinkStats,
    pub sync: SyncCounts,
    pub trace_file: Option<String>,
    /// `--trace`: a write to it failed (a full disk) and the run went on without it; what
    /// became of the file (cut at its last complete line, at which cycle, or removed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_error: Option<String>,
    pub watchdog: Option<WatchdogReport>,
    /// `--driver jack`: the server's view beside ours (xruns it reported, its DSP meter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jack: Option<JackReport>,
    /// `--driver alsa`: the negotiated device setup, ALSA's delay and the xruns it recovered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alsa: Option<AlsaReport>,
    /// The load that ran during the run (None: no stress was asked for).
    #[serde(default)]
    pub stress: Option<crate::stress::StressRecord>,
    /// The competing periodic task's jobs, beside the engine's statistics.
    #[serde(default)]
    pub compete: Option<crate::stress::PeriodicResult>,
    /// The installed plugins (LV2, CLAP, VST3) of the chain, with the latency each reported.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plugins: Vec<crate::dsp::format::PluginRecord>,
    /// `--forensics`: who took the time of each xrun, from a kernel trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forensics: Option<crate::trace::Forensics>,
    /// Under SCHED_OTHER, the timer slack of the thread whose sleeps pace the cycles, read
    /// back after setting the minimum (1 ns); None under a real-time policy, on a server's
    /// thread (JACK), and in older files. See `LatencyResult::timer_slack_ns`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timer_slack_ns: Option<u64>,
    /// Set when `stop_on` ended the run: the cycle of the xrun that did. Not in the result
    /// document: a load trial reports it as its `stopped_at_cycle`.
    #[serde(skip)]
    #[schemars(skip)]
    pub early_stop_cycle: Option<u64>,
}

/// The outcome of `run`: what a result document needs besides the environment.
pub type RunOutcome = Outcome<RunConfig, RunResults>;

/// Told the engine threads' tids, driver first.
pub type OnThreads<'o> = &'o dyn Fn(&[libc::pid_t]);

/// Who watches one engine run from outside the real-time path (see [`run_observed`]).
#[derive(Default)]
pub struct Observe<'o> {
    /// Told the engine threads' tids (driver first) once they exist, so a non-RT observer
    /// (`xrunlab sched`'s reservation controller) can read their CPU clocks and change their
    /// scheduling parameters during the run.
    pub on_threads: Option<OnThreads<'o>>,
    /// Sent every cycle record from the (non-RT) collector thread; the receiver sees the
    /// channel close once the run's records are all sent.
    pub tap: Option<std::sync::mpsc::Sender<crate::common::cycle::CycleRecord>>,
}

/// `xrunlab run`: the engine on the configured driver until the duration elapsed, a signal
/// arrived or the watchdog fired, under the session's stress and beside `cfg.compete`, with
/// its xruns explained when the session records traces. Privilege problems are
/// `CannotMeasure` errors; an interrupted or watchdog-stopped run is still `Ok` with the
/// matching status and the partial result.
pub fn run(cfg: &RunConfig, session: &mut Session) -> Result<RunOutcome> {
    cfg.validate()?;
    if cfg.driver.simulated() {
        session.simulated();
    }
    let rec = session.start_trace(&cfg.cpus, cfg.duration_ns);
    let (mut r, loaded) = session.loaded(
        None,
        std::time::Duration::from_nanos(cfg.duration_ns),
        cfg.compete.clone(),
        |s| run_observed(cfg, s.progress(), Observe::default()),
    )?;
    r.results.stress = loaded.stress;
    r.results.compete = loaded.compete;
    if !session.stress().is_idle() {
        r.config.stress = session.stress().labels();
    }
    if let Some(rec) = rec {
        let mut w = forensics::explain_run(rec, &mut r.results, &r.config.chain_elements);
        if let Some(f) = r.results.forensics.as_mut() {
            session.keep(f, &mut w);
        }
        r.warnings.extend(w);
    }
    Ok(r)
}

/// One engine run as a part of a larger measurement (a `load` trial, a `sched` row) or for a
/// test: no stress, no trace; `observe` watches it.
pub fn run_observed(
    cfg: &RunConfig,
    progress: &dyn Progress,
    observe: Observe,
) -> Result<RunOutcome> {
    let on_threads = observe.on_threads.unwrap_or(&|_| {});
    let tap = observe.tap;
    let (device, cfg) = negotiate(cfg)?;
    let cfg = &cfg;
    let period_ns = cfg.device().period_ns();
    let watchdog_bound_ns = bound_ns(cfg.watchdog_ns, period_ns)?;
    let mut warnings = Vec::new();
    let built = build_engine(cfg, &mut warnings)?;
    let plugins = crate::dsp::registry::records(&cfg.chain_elements, built.engine.latencies());
    let monitor = built.engine.monitor();
    let stop = Arc::new(AtomicBool::new(false));
    let prior = cfg
        .cost_prior
        .clone()
        .or_else(|| crate::engine::prior::CostPrior::calibrated(&cfg.chain_elements))
        .filter(|_| cfg.driver.real_time());
    let prefix = prior
        .as_ref()
        .map(|p| p.prefix_ns(&cfg.chain_elements, cfg.rate, cfg.buffer_frames));
    let live = Arc::new(collector::Live::default());
    let collector = Collector::start(cfg, built.consumer, &stop, tap, prefix.clone(), &live)?;
    let h = Harness {
        policy: cfg.policy,
        watchdog_bound_ns,
        monitor: Arc::new(monitor.clone()),
        extra_tids: built.engine.worker_tids(),
        progress,
        progress_total: cfg.periods_total(),
        progress_unit: crate::progress::Unit::Periods { period_ns },
        progress_message: "run",
    };
    let parts = Parts {
        handler: built.engine,
        source: Generator::new(cfg.input, cfg.rate, cfg.seed),
        sink: ContinuitySink::new(cfg.input, cfg.rate),
    };
    let spec = RunSpec {
        periods_total: cfg.periods_total(),
        stop,
        thread: ThreadSpec {
            name: "xr-driver".into(),
            policy: cfg.policy,
            cpus: if cfg.threads_unpinned() {
                Vec::new()
            } else {
                vec![built.cpus[0]]
            },
        },
    };
    let mut sup = RunSupervisor {
        on_threads,
        steal_sampling: cfg.driver.steal_sampling(),
        steal: None,
        live,
        period_ns,
    };
    let out = match harness::run(&h, device, parts, spec, &mut sup) {
        Ok(o) => o,
        Err(e) => {
            let _ = collector.finish();
            return Err(e);
        }
    };
    let steal = sup
        .steal
        .take()
        .map(crate::system::steal::StealSampler::stop);
    let folded = collector.finish()?;
    let host_steal = steal.as_ref().map(|s| {
        let t0 = folded.first_t_ideal.unwrap_or(0);
        s.host_steal(folded.xrun_events.iter().map(|x| t0 + x.at_ns))
    });
    let host_stalls = core_stalls(cfg, &built.layout, &folded, steal.as_ref());
    let cost_prior = prior.map(|p| PriorReport {
        track_cycle_ns: prefix.as_ref().and_then(|v| v.last()).copied().unwrap_or(0),
        run_median_ratio: folded.work_cost.prior_median_ratio(),
        used: folded.work_cost.prior_in_use(),
        prior: p,
    });
    progress.finish();
    let mut r = fold_results(
        cfg,
        &built.layout,
        out,
        folded,
        host_steal,
        &monitor,
        warnings,
    );
    r.results.plugins = plugins;
    r.results.host_stalls = host_stalls;
    r.results.cost_prior = cost_prior;
    Ok(r)
}

/// Per engine thread of a judged run: its host stalls and its CPU's steal.
fn core_stalls(
    cfg: &RunConfig,
    layout: &Layout,
    folded: &Folded,
    steal: Option<&crate::system::steal::StealRecord>,
) -> Vec<CoreStalls> {
    if !folded.judge_host_cpu || layout.model {
        return Vec::new();
    }
    (0..layout.threads)
        .map(|t| {
            let s = folded.stalls.get(t).cloned().unwrap_or_default();
            let cpu = (!cfg.threads_unpinned())
                .then(|| layout.cpus.get(t).copied())
                .flatten();
            let steal = cpu.and_then(|c| steal?.cpu(c));
            CoreStalls {
                thread: t as u32,
                cpu,
                stalls: s.cycles,
                stall_total_ns: s.total_ns,
                stall_max_ns: s.max_ns,
                worst_cycle: (s.cycles > 0).then_some(s.worst_cycle),
                worst_at_ns: (s.cycles > 0).then_some(s.worst_at_ns),
                stall_xruns: s.xruns,
                stalled_tracks: s
                    .tracks
                    .iter()
                    .enumerate()
                    .filter(|(_, &n)| n > 0)
                    .map(|(i, &n)| TrackCycles {
                        track: i as u32,
                        cycles: n,
                    })
                    .collect(),
                steal_ms: steal.map(|s| s.stolen_ms),
                steal_windows: steal.map(|s| s.windows_with_steal),
            }
        })
        .collect()
}

/// Open the configured device and rewrite the config with what it accepted: a JACK server
/// decides buffer size and rate (and its cycle is always "done before the next cycle
/// starts": n = 2), an ALSA device negotiates rate, period and periods. The graph is built
/// for these.
fn negotiate(asked: &RunConfig) -> Result<(AnyDevice, RunConfig)> {
    let opts = DriverOptions {
        sim: asked.sim.clone(),
        seed: asked.seed,
        jack: asked.jack.clone(),
        alsa: asked.alsa.clone(),
    };
    let device = AnyDevice::open(asked.driver, asked.device(), &opts)?;
    let got = device.params();
    let mut cfg = asked.clone();
    cfg.rate = got.rate;
    cfg.buffer_frames = got.frames;
    cfg.periods = got.periods;
    cfg.validate()?;
    Ok((device, cfg))
}

/// Where the engine's threads run, and whether its compute time is modelled.
struct Layout {
    cpus: Vec<usize>,
    threads: usize,
    /// Compute time from the cost model (sim only).
    model: bool,
}

struct Built {
    engine: Engine,
    consumer: rtrb::Consumer<crate::common::cycle::CycleRecord>,
    cpus: Vec<usize>,
    layout: Layout,
    /// Held for the run.
    _mlock: Option<crate::rt::memory::MemoryLock>,
}

/// Build the graph for the negotiated config: thread count and CPUs, the cost model's
/// warnings, mlock on real time, the probe ring sized for 2 s of cycles.
fn build_engine(cfg: &RunConfig, warnings: &mut Vec<String>) -> Result<Built> {
    let period_ns = cfg.device().period_ns();
    let cpus = if cfg.cpus.is_empty() {
        crate::rt::affinity::allowed_cpus()?
    } else {
        cfg.cpus.clone()
    };
    let threads = cpus
        .len()
        .min(cfg.tracks as usize)
        .clamp(1, crate::common::cycle::MAX_THREADS);
    let model = cfg.driver.can_model_compute() && cfg.compute == ComputeKind::Model;
    if model {
        let un = cfg.cost.unmodelled(&cfg.chain_elements);
        if !un.is_empty() {
            warnings.push(format!(
                "cost model: no --cost for {}; they cost 0",
                un.join(", ")
            ));
        }
    }
    let mlock = if cfg.mlock && cfg.driver.mlock_applies() {
        Some(crate::rt::memory::MemoryLock::acquire()?)
    } else {
        None
    };
    let ring_capacity = ((2_000_000_000 / period_ns.max(1)) as usize).clamp(4096, 1 << 16);
    let spec = EngineSpec {
        threads,
        worker_cpus: if cfg.threads_unpinned() {
            Vec::new()
        } else {
            cpus.iter().skip(1).copied().collect()
        },
        steal: cfg.pin.steals(),
        policy: cfg.policy,
        cost: model.then(|| cfg.cost.clone()),
        ring_capacity,
        block_when_full: cfg.driver.block_when_full(),
        worker_spin_ns: cfg.worker_spin_ns,
        ramp: cfg.ramp,
        ..EngineSpec::new(
            cfg.rate,
            cfg.buffer_frames as usize,
            cfg.tracks as usize,
            cfg.chain_elements.clone(),
        )
    };
    let (engine, consumer) = Engine::new(&spec)?;
    Ok(Built {
        engine,
        consumer,
        cpus: cpus.clone(),
        layout: Layout {
            cpus,
            threads,
            model,
        },
        _mlock: mlock,
    })
}

/// The probe collector (a non-RT thread folding the cycle records as they come).
struct Collector {
    thread: std::thread::JoinHandle<Result<Folded>>,
    stop: Arc<AtomicBool>,
}

impl Collector {
    /// Start folding the engine's records; with `stop_on` it sets the run's `stop` at the
    /// first matching xrun.
    fn start(
        cfg: &RunConfig,
        consumer: rtrb::Consumer<crate::common::cycle::CycleRecord>,
        run_stop: &Arc<AtomicBool>,
        tap: Option<std::sync::mpsc::Sender<crate::common::cycle::CycleRecord>>,
        prior_ns: Option<Vec<u64>>,
        live: &Arc<collector::Live>,
    ) -> Result<Self> {
        let trace = match &cfg.trace {
            Some(p) => Some(TraceWriter::create(std::path::Path::new(p))?),
            None => None,
        };
        let stop = Arc::new(AtomicBool::new(false));
        let early = cfg.stop_on.map(|on| EarlyStop {
            on,
            from_cycle: cfg.stop_from_cycle,
            driver_stop: run_stop.clone(),
        });
        let judge = cfg
            .driver
            .real_time()
            .then(|| prior_ns.map(WorkCost::with_prior).unwrap_or_default());
        let live = Some(live.clone());
        let thread =
            collector::spawn_tapped(consumer, trace, stop.clone(), early, tap, judge, live)?;
        Ok(Collector { thread, stop })
    }

    /// Fold what is left once the device stopped.
    fn finish(self) -> Result<Folded> {
        self.stop.store(true, Ordering::Release);
        self.thread
            .join()
            .map_err(|_| Error::cannot_measure("the probe collector panicked"))?
    }
}

/// `run`'s part in the harness: the caller's thread observer, the host's steal sampled
/// beside a real-time run while it is supervised, and the live line's figures.
struct RunSupervisor<'f> {
    on_threads: &'f dyn Fn(&[libc::pid_t]),
    steal_sampling: bool,
    steal: Option<crate::system::steal::StealSampler>,
    live: Arc<collector::Live>,
    period_ns: u64,
}

impl Supervisor for RunSupervisor<'_> {
    fn on_threads(&mut self, tids: &[libc::pid_t]) {
        (self.on_threads)(tids)
    }

    fn supervise(&mut self, ended: &dyn Fn() -> bool, h: &Harness<'_>) {
        self.steal = self
            .steal_sampling
            .then(crate::system::steal::StealSampler::start)
            .flatten();
        live::show(ended, h, &self.live, self.period_ns)
    }
}

/// The result document's `results` from the harness outcome and the folded records.
fn fold_results(
    cfg: &RunConfig,
    layout: &Layout,
    out: HarnessOutcome<Parts<Engine, Generator, ContinuitySink>>,
    folded: Folded,
    host_steal: Option<crate::system::steal::HostSteal>,
    monitor: &crate::engine::EngineMonitor,
    mut warnings: Vec<String>,
) -> RunOutcome {
    let period_ns = cfg.device().period_ns();
    warnings.extend(out.warnings.iter().cloned());
    warnings.extend(folded.trace_error.clone());
    // A stop the collector asked for (`stop_on`) ends the run as complete.
    let status = match (out.status, out.reason()) {
        (Status::Interrupted, Some(StopReason::Stopped))
            if folded.early_stop_cycle.is_some() && !crate::rt::interrupt::requested() =>
        {
            Status::Complete
        }
        (s, _) => s,
    };
    let dropped = monitor.dropped_records();
    if dropped > 0 {
        warnings.push(format!(
            "{dropped} cycle records were dropped (the collector fell behind); summaries miss them"
        ));
    }
    let (stats, report) = match out.driver {
        Some(d) => (Some(d.stats), d.report),
        None => (None, DriverReport::None),
    };
    let wd_report = out.watchdog;
    let (model, tids) = (layout.model, &out.tids);
    let cycles_for_mean = folded.records.max(1) as f64;
    let threads_out = (0..layout.threads)
        .map(|i| EngineThread {
            index: i as u32,
            tid: if model {
                0
            } else {
                tids.get(i).copied().unwrap_or(0)
            },
            cpu: if model || cfg.threads_unpinned() {
                None
            } else {
                layout.cpus.get(i).copied()
            },
            policy: if model && i > 0 {
                "simulated".into()
            } else {
                // After the run the threads are gone; report the requested policy unless the
                // watchdog saw what it demoted.
                match &wd_report {
                    Some(w) => w
                        .demoted
                        .get(i)
                        .map(|d| d.policy_after.clone())
                        .unwrap_or_default(),
                    None => cfg.policy.to_string(),
                }
            },
            mean_cpu_ns: folded.thread_cpu_sum.get(i).copied().unwrap_or(0) as f64
                / cycles_for_mean,
        })
        .collect();
    let f = monitor.futex_counts();
    let wall = folded.wall.summary();
    let cpu = folded.cpu.summary();
    let results = RunResults {
        period_ns,
        budget_ns: (cfg.periods as u64 - 1) * period_ns,
        threads: threads_out,
        cycles: stats.map(|s| s.cycles).unwrap_or(folded.records),
        periods_elapsed: stats
            .map(|s| s.periods_elapsed)
            .unwrap_or(folded.records + folded.skipped),
        skipped_periods: stats.map(|s| s.skipped_periods).unwrap_or(folded.skipped),
        xruns: XrunCounts {
            total: stats.map(|s| s.xruns).unwrap_or(folded.xruns),
            late_wakeup: folded.late_wakeup,
            overload: folded.overload,
            interference: folded.interference,
            inherited: folded.inherited,
            host_cpu: folded.host_cpu,
        },
        dropped_records: dropped,
        dsp_load_pct: LoadPct::of(&wall, period_ns),
        cpu_load_pct: LoadPct::of(&cpu, period_ns),
        wake_latency_ns: folded.wake_latency.summary(),
        sched_latency_ns: folded.sched_latency.summary(),
        wall_ns: wall,
        cpu_ns: cpu,
        crit_cpu_ns: folded.crit_cpu.summary(),
        crit_compute_ns: folded.crit_compute.summary(),
        interference_ns: folded.interference_ns.summary(),
        end_time_ns: folded.end_time.summary(),
        driver_period_ns: folded.driver_period.summary(),
        track_end_max_ns: folded.track_end_max.clone(),
        xrun_events: folded.xrun_events.clone(),
        placement: (layout.threads > 1).then(|| PlacementReport {
            mode: cfg.pin,
            tracks_run: folded.placement.tracks_run.clone(),
            home_tracks_taken: folded.placement.home_taken.clone(),
            stolen_tracks: folded.placement.stolen,
            cycles_with_stolen: folded.placement.cycles_with_stolen,
            per_track: folded.placement.per_track.clone(),
        }),
        host_steal,
        host_stalls: Vec::new(),
        cost_prior: None,
        sink: stats.map(|s| s.sink).unwrap_or_default(),
        sync: SyncCounts {
            worker_sleeps: f[0],
            start_wakes: f[1],
            join_sleeps: f[2],
            join_wakes: f[3],
        },
        trace_file: cfg.trace.clone(),
        trace_error: folded.trace_error.clone(),
        watchdog: wd_report,
        alsa: match &report {
            DriverReport::Alsa(a) => Some(a.clone()),
            _ => None,
        },
        jack: report.into_jack(),
        stress: None,
        compete: None,
        plugins: Vec::new(),
        forensics: None,
        timer_slack_ns: out.timer_slack_ns.filter(|_| cfg.driver.real_time()),
        early_stop_cycle: folded.early_stop_cycle,
    };
    RunOutcome {
        status,
        config: cfg.clone(),
        results,
        warnings,
    }
}
