//! The DSP load test of Vignati et al. §3.1.1, automated: for every cell (buffer size, parallel
//! tracks, plugin type) the largest number of plugin instances per track that runs for a
//! trial duration without a disqualifying xrun.
//!
//! Search per cell (see [`search`]): the first trial runs the physical limit `est` (how many
//! instances of the plugin fit in one period per engine thread, from `dsp::plugin_cost` of as many
//! instances in series as a thread will run on a real driver, see
//! [`LoadConfig::physical_limit`], or from the cost model on `sim`). If it passes, the count grows by steps 1, 2, 4 …
//! until a trial fails (or `max_instances` is reached); if it fails, it shrinks by the same
//! steps until one passes (0 always passes: no instances). The bracket is then closed by
//! binary search. An exact estimate therefore costs 2 trials (`est` passes, `est+1` fails).
//! Each trial stops at its first disqualifying xrun (`RunConfig::stop_on`) after its first
//! `warmup_cycles` ([`WARMUP_CYCLES`] on real drivers): those are recorded but not judged.
//!
//! Disqualifying (`--criterion`): `overload` (default, as docs/methods.md says the load test
//! judges) only xruns whose cause is the critical path's CPU time; `all` every xrun.
//!
//! DSP load per instance is the mean DSP load divided by the instances per track: tracks run
//! in parallel, so the load of the critical path is that of one track's chain, and any rise
//! of this figure with the track count is the cost of parallelism (Vignati et al. Fig. 2b).

use crate::common::Status;
use crate::driver::jack::{JackConfig, JackControl, JackLoad};
use crate::driver::sim::SimConfig;
use crate::dsp::{parse_chain, ChainElement, PluginContext};
use crate::engine::collector::StopCriterion;
use crate::engine::prior::{CostPrior, ElementCost};
use crate::engine::CostModel;
use crate::error::{Error, ErrorKind, Result};
use crate::measure::run::{ComputeKind, DriverKind, LoadPct, RunConfig, RunOutcome, XrunCounts};
use crate::measure::session::{Outcome, Session};
use crate::progress::Silent;
use crate::rt::Policy;
use crate::stress::session::StressRecord;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod grid;
pub use grid::{run, search, Checkpoints};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Criterion {
    /// Only overload-caused xruns disqualify; the others are reported.
    Overload,
    /// Every xrun disqualifies.
    All,
}

impl Criterion {
    fn stop_on(self) -> StopCriterion {
        match self {
            Criterion::Overload => StopCriterion::Overload,
            Criterion::All => StopCriterion::AnyXrun,
        }
    }
    /// How many of the xruns counted in `x` disqualify.
    fn disqualifying(self, x: &XrunCounts) -> u64 {
        match self {
            Criterion::Overload => x.overload,
            Criterion::All => x.total,
        }
    }
}

/// Cycles at the start of every trial on a real driver whose xruns are recorded but do not
/// decide it. A JACK client's first cycles run while its process is still starting around
/// them (measured on jackd2 and PipeWire, reverb-heavy × 30 at 256 frames, 20 runs each:
/// cycles 1-2 take up to 1.25-1.5× the CPU time of later cycles at the 90th percentile and
/// wake up to 1.2 ms late; from cycle 3 on they are like the rest). Eight cycles (43 ms at
/// 256 frames, 48 kHz) cover that with room. The same count serves the virtual driver; the
/// sim driver has no start-up and gets none.
pub const WARMUP_CYCLES: u32 = 8;

/// What `xrunlab load` was asked to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LoadConfig {
    pub driver: DriverKind,
    pub rate: u32,
    pub periods: u32,
    pub buffers: Vec<u32>,
    pub tracks: Vec<u32>,
    /// Chain elements as typed, one per plugin type, e.g. `reverb-heavy`, `burn(10%)`.
    pub plugins: Vec<String>,
    /// Length of a search trial (device time).
    pub duration_ns: u64,
    /// Rerun each found maximum this long and lower it until it passes.
    pub validate_ns: Option<u64>,
    pub criterion: Criterion,
    /// CPUs the engine threads may use (the reserved CPU already removed).
    pub cpus: Vec<usize>,
    /// The CPU kept free of real-time work, if any.
    pub reserve_cpu: Option<usize>,
    pub policy: Policy,
    /// mlockall during each trial (virtual and jack drivers).
    pub mlock: bool,
    /// The search never goes above this many instances per track.
    pub max_instances: u32,
    pub seed: u64,
    /// sim: wake-up latency model and injected events, applied to every trial.
    pub sim: SimConfig,
    /// sim: the cost model that stands in for the DSP.
    pub cost: CostModel,
    /// Wall time spent benchmarking each plugin for the physical limit (real drivers).
    pub bench_ns: u64,
    /// Stress labels as asked (the record of what ran is in the results).
    pub stress: Vec<String>,
    /// `--driver jack`: the client options; every trial is a client of this server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jack: Option<JackConfig>,
    /// A trial's first cycles: their xruns are recorded but do not disqualify
    /// ([`WARMUP_CYCLES`] on real drivers, 0 on sim).
    #[serde(default)]
    pub warmup_cycles: u32,
    /// Track placement of every trial (`--pin`).
    #[serde(default)]
    pub pin: crate::engine::Placement,
}

impl LoadConfig {
    /// Defaults of `xrunlab load` for a driver, on `cpus`.
    pub fn new(driver: DriverKind, cpus: Vec<usize>) -> Self {
        let n = cpus.len().max(1) as u32;
        LoadConfig {
            driver,
            rate: 48000,
            periods: 2,
            buffers: vec![16, 32, 64, 128, 256, 512],
            tracks: (1..=n).collect(),
            plugins: vec!["reverb-light".into(), "reverb-heavy".into()],
            duration_ns: 10_000_000_000,
            validate_ns: None,
            criterion: Criterion::Overload,
            cpus,
            reserve_cpu: None,
            policy: driver.default_policy(),
            mlock: driver.mlock_applies(),
            max_instances: 1024,
            seed: 1,
            sim: SimConfig::default(),
            cost: CostModel::default(),
            bench_ns: 300_000_000,
            stress: Vec::new(),
            jack: (driver == DriverKind::Jack).then(JackConfig::default),
            warmup_cycles: if driver.real_time() { WARMUP_CYCLES } else { 0 },
            pin: crate::engine::Placement::default(),
        }
    }

    /// `--driver jack`: take the running server's rate and, without `buffers_given`, its
    /// buffer size as the grid's only one. A grid buffer size the server does not run is a
    /// usage error naming the server's, unless `--set-buffer` lets each cell apply its own.
    /// `rate_given` is an explicit `--rate`, checked against the server's.
    pub fn adopt_jack_server(
        &mut self,
        buffers_given: bool,
        rate_given: Option<u32>,
    ) -> Result<()> {
        let jc = self.jack.get_or_insert_with(JackConfig::default).clone();
        let ctl = JackControl::open(&jc)?;
        let frames = ctl.frames();
        if let Some(r) = rate_given.filter(|&r| r != ctl.rate) {
            return Err(Error::usage(format!(
                "--rate {r}: the JACK server runs at {} Hz (omit --rate)",
                ctl.rate
            )));
        }
        self.rate = ctl.rate;
        if !buffers_given {
            self.buffers = vec![frames];
        } else if !jc.set_buffer {
            if let Some(b) = self.buffers.iter().find(|&&b| b != frames) {
                return Err(Error::usage(format!(
                    "--buffers: {b} frames, but the JACK server's buffer size is {frames} \
                     (omit --buffers, or add --set-buffer to apply each size to the server)"
                )));
            }
        }
        if self.periods != 2 {
            return Err(Error::usage(
                "--periods: a JACK client's cycle must end before the next one starts (n = 2)",
            ));
        }
        Ok(())
    }

    pub fn validate(&self) -> Result<()> {
        // Before the plugins below are created at it.
        crate::common::device::check_rate(self.rate)?;
        if self.buffers.is_empty() || self.tracks.is_empty() || self.plugins.is_empty() {
            return Err(Error::usage(
                "--buffers, --tracks and --plugins each need at least one value",
            ));
        }
        if self.tracks.contains(&0) {
            return Err(Error::usage("--tracks: a cell needs at least one track"));
        }
        if self.max_instances == 0 {
            return Err(Error::usage("--max-instances must be at least 1"));
        }
        for p in &self.plugins {
            let e = self.element(p)?;
            if crate::dsp::plugin_cost::NEVER_RETURNS.contains(&e.plugin.as_str()) {
                return Err(Error::usage(format!(
                    "--plugins: '{}' never returns; it has no maximum",
                    e.plugin
                )));
            }
            // One instance now: a missing LV2 plugin, a bad port value or a plugin that will
            // not instantiate must stop the grid before hours of it, not at its first trial.
            let ctx = PluginContext {
                rate: self.rate,
                max_frames: self.buffers.iter().copied().max().unwrap_or(1) as usize,
            };
            crate::dsp::registry::create(&e.plugin, &e.params, &ctx)?;
        }
        // Every cell's run configuration must be valid before hours of grid start.
        for &b in &self.buffers {
            for &t in &self.tracks {
                self.trial_config(b, t, &self.plugins[0], 1, self.duration_ns)?
                    .validate()?;
            }
        }
        Ok(())
    }

    /// One plugin type as a single chain element with count 1.
    fn element(&self, plugin: &str) -> Result<ChainElement> {
        let v = parse_chain(plugin)?;
        match v.as_slice() {
            [e] if e.count == 1 => Ok(e.clone()),
            _ => Err(Error::usage(format!(
                "--plugins: '{plugin}' must be one plugin without a count (the search sets it)"
            ))),
        }
    }

    /// Engine threads a cell gets: one per track, up to one per CPU.
    fn threads(&self, tracks: u32) -> u32 {
        (self.cpus.len().max(1) as u32).min(tracks)
    }

    fn trial_config(
        &self,
        buffer: u32,
        tracks: u32,
        plugin: &str,
        n: u32,
        duration_ns: u64,
    ) -> Result<RunConfig> {
        let chain = format!("{plugin}:{n}");
        let mut c = RunConfig::new(self.driver, &chain)?;
        c.rate = self.rate;
        c.buffer_frames = buffer;
        c.periods = self.periods;
        c.tracks = tracks;
        c.duration_ns = duration_ns;
        c.cpus = self.cpus.clone();
        c.policy = self.policy;
        c.seed = self.seed;
        c.mlock = self.mlock && self.driver.mlock_applies();
        c.stop_on = Some(self.criterion.stop_on());
        c.stop_from_cycle = self.warmup_cycles as u64;
        c.pin = self.pin;
        // The grid sets the server's buffer size per cell (`run`); a trial only checks it.
        c.jack = self.jack.as_ref().map(|j| JackConfig {
            buffer_requested: Some(buffer),
            rate_requested: Some(self.rate),
            set_buffer: false,
            ..j.clone()
        });
        if self.driver.simulated() {
            c.sim = self.sim.clone();
            c.cost = self.cost.clone();
            c.compute = ComputeKind::Model;
        }
        Ok(c)
    }

    /// The physical limit of a cell: instances per track that fit in one period when each
    /// engine thread runs its share of the tracks and nothing else costs anything.
    ///
    /// On real drivers the cost is measured with as many distinct instances in series as one
    /// engine thread will run, because one hot instance's cost is not that of the 96th once
    /// their state no longer fits in cache: bench one instance, bench the count its limit
    /// implies and take the limit at that count, once more if it moved again
    /// ([`LIMIT_STEPS`] benches at most, `bench_ns` each). On `sim` the cost model has no
    /// cache and the limit stays its deterministic one.
    pub fn physical_limit(&self, buffer: u32, tracks: u32, plugin: &str) -> Result<PhysicalLimit> {
        let e = self.element(plugin)?;
        let ctx = PluginContext {
            rate: self.rate,
            max_frames: buffer as usize,
        };
        let per_thread = tracks.div_ceil(self.threads(tracks));
        let period_ns = ctx.period_ns() as f64;
        let fit = |instance_ns: f64| {
            if instance_ns <= 0.0 {
                self.max_instances
            } else {
                (period_ns / (instance_ns * per_thread as f64))
                    .floor()
                    .min(self.max_instances as f64) as u32
            }
        };
        if self.driver.simulated() {
            let instance_ns = self.cost.instance_cost(&e, &ctx)?.0 as f64;
            return Ok(PhysicalLimit {
                instance_ns,
                source: "cost-model".into(),
                per_track: fit(instance_ns),
                steps: Vec::new(),
            });
        }
        let mut steps: Vec<LimitStep> = Vec::new();
        let mut k = 1u32;
        loop {
            let b = crate::dsp::plugin_cost::bench_element(
                &ChainElement {
                    count: k,
                    ..e.clone()
                },
                &ctx,
                self.bench_ns,
            )?;
            let per_track = fit(b.ns_per_frame * buffer as f64);
            steps.push(LimitStep {
                instances: k,
                ns_per_frame: b.ns_per_frame,
                p999_ns_per_frame: b.per_block.map(|p| p.p999_ns_per_frame),
                per_track,
            });
            // The instances one engine thread runs in series at that limit.
            let next = per_track
                .saturating_mul(per_thread)
                .clamp(1, crate::dsp::MAX_INSTANCES);
            if next == k || steps.len() >= LIMIT_STEPS {
                break;
            }
            k = next;
        }
        let used = steps.last().expect("one step at least");
        Ok(PhysicalLimit {
            instance_ns: used.ns_per_frame * buffer as f64,
            source: "bench".into(),
            per_track: used.per_track,
            steps,
        })
    }
}

/// Benches the physical limit takes at most on a real driver: one instance, then the count
/// its limit implies, then once more if the limit moved again.
pub const LIMIT_STEPS: usize = 3;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PhysicalLimit {
    /// Cost of one instance per cycle, ns.
    pub instance_ns: f64,
    /// `bench` (measured on a real driver, nothing else running) or `cost-model` (sim).
    pub source: String,
    /// Instances per track that fit in one period.
    pub per_track: u32,
    /// `bench`: the estimate step by step, first one instance; the last is the one used (its
    /// `instances` in series and `ns_per_frame` give `instance_ns`). Empty on `sim` and in
    /// files written before the estimate measured more than one instance.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<LimitStep>,
}

impl PhysicalLimit {
    /// The bench step the limit came from: K instances in series and their cost per instance.
    pub fn used(&self) -> Option<&LimitStep> {
        self.steps.last()
    }

    /// What that bench measured, as the trials' cost prior (`run --cost-prior`'s, docs/methods.md "Xrun
    /// and cause"): so a trial tells host stalls from overload from its first cycle, against
    /// the tail of the cost measured with nothing else running rather than against its own
    /// cycles, which stalls inflate. None on sim (no bench).
    pub fn cost_prior(&self, buffer: u32) -> Option<CostPrior> {
        let s = self.used()?;
        Some(CostPrior {
            bench_file: None,
            elements: vec![ElementCost::Bench {
                ns_per_frame: s.p999_ns_per_frame.unwrap_or(s.ns_per_frame),
                instances: s.instances,
                buffer_frames: buffer,
            }],
        })
    }
}

/// One bench of the physical limit's estimate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LimitStep {
    /// Distinct instances run in series (K).
    pub instances: u32,
    /// Their cost per instance per frame, the bench's median (`BenchResult::ns_per_frame`).
    pub ns_per_frame: f64,
    /// The same at the 99.9th percentile of blocks: the trials' cost prior.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p999_ns_per_frame: Option<f64>,
    /// The limit per track that cost gives.
    pub per_track: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TrialPhase {
    Search,
    Validate,
}

/// One run of the engine at a fixed instance count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Trial {
    pub instances_per_track: u32,
    pub phase: TrialPhase,
    pub passed: bool,
    /// Device time the trial covered (shorter than asked when it stopped early).
    pub duration_ns: u64,
    pub cycles: u64,
    pub xruns: XrunCounts,
    /// Of `xruns`, those that would disqualify but fell in the warm-up cycles.
    #[serde(default)]
    pub warmup_disqualifying: u64,
    /// The cycle of the disqualifying xrun that stopped the trial.
    pub stopped_at_cycle: Option<u64>,
    /// Wall-clock time the trial took.
    pub wall_ns: u64,
    /// Its xruns against the host's steal (real drivers, kernels that count steal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_steal: Option<crate::system::steal::HostSteal>,
    /// `--forensics`, failed trials only: who took the time of its xruns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forensics: Option<crate::trace::Forensics>,
}

/// The maximum of one cell and what was measured at it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Cell {
    pub buffer_frames: u32,
    pub tracks: u32,
    pub plugin: String,
    pub period_ns: u64,
    pub limit: PhysicalLimit,
    /// Largest count per track that passed (0: not even one instance does).
    pub max_per_track: u32,
    pub total_instances: u32,
    /// True when the search stopped at `max_instances` without a failure.
    pub capped: bool,
    /// Measured in the passing trial at the maximum (zeros when the maximum is 0).
    pub dsp_load_pct: LoadPct,
    /// Mean DSP load / instances per track.
    pub dsp_load_per_instance_pct: f64,
    /// Xruns of that trial (non-disqualifying ones only, by definition).
    pub xruns: XrunCounts,
    pub wake_latency_p99_ns: u64,
    pub wake_latency_max_ns: u64,
    pub trials: Vec<Trial>,
    /// Wall-clock time spent on the cell, benchmark included.
    pub time_spent_ns: u64,
    /// `--driver jack`: the server's view of that trial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jack: Option<CellJack>,
    /// The cost the reported run's xruns were judged against (the physical limit's bench;
    /// burn's calibration), and whether the run agreed with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_prior: Option<crate::measure::run::PriorReport>,
    /// Under SCHED_OTHER, the timer slack of the reported trial's cycle thread
    /// (`RunResults::timer_slack_ns`); None under a real-time policy and in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timer_slack_ns: Option<u64>,
}

/// What the JACK server said about the passing trial at a cell's maximum.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CellJack {
    /// `jack_cpu_load()` sampled during the trial (the server's meter beside our DSP load).
    pub cpu_load_pct: JackLoad,
    /// xrun callbacks from the server during the trial.
    pub server_xruns: u64,
}

/// `--driver jack`: the server the grid ran in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JackGrid {
    /// "jackd2" or "pipewire", from the loaded libjack.
    pub server: String,
    pub library_version: String,
    /// The server's buffer size when the grid started.
    pub original_buffer_frames: u32,
    /// `--set-buffer` changed the server's buffer size and the grid put the original back
    /// (false: it never changed it, or restoring failed, which the warnings say).
    pub buffer_restored: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LoadResults {
    /// Finished cells in grid order (buffer, then tracks, then plugin).
    pub cells: Vec<Cell>,
    /// Cells the grid has (finished or not).
    pub cells_total: u32,
    /// What ran as stress during the grid (one session for all cells).
    pub stress: Option<StressRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jack: Option<JackGrid>,
    /// `--forensics`: the failed trials' sections merged (`trials[].forensics` has each).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forensics: Option<crate::trace::Forensics>,
}

impl LoadResults {
    /// The forensics of every failed trial, in grid order.
    pub fn trial_forensics(&self) -> impl Iterator<Item = &crate::trace::Forensics> {
        self.cells
            .iter()
            .flat_map(|c| c.trials.iter())
            .filter_map(|t| t.forensics.as_ref())
    }

    pub fn cell(&self, buffer: u32, tracks: u32, plugin: &str) -> Option<&Cell> {
        self.cells
            .iter()
            .find(|c| c.buffer_frames == buffer && c.tracks == tracks && c.plugin == plugin)
    }
}

/// The outcome of `load`.
pub type LoadOutcome = Outcome<LoadConfig, LoadResults>;

pub(super) fn cells_of(cfg: &LoadConfig) -> Vec<(u32, u32, String)> {
    let mut v = Vec::new();
    for &b in &cfg.buffers {
        for &t in &cfg.tracks {
            for p in &cfg.plugins {
                v.push((b, t, p.clone()));
            }
        }
    }
    v
}

/// The grid axes. Cells are matched by them, so a resumed grid may name others: the cells it
/// shares with the partial result are kept, the rest run, and cells outside it are dropped.
pub const GRID_AXES: [&str; 3] = ["buffers", "tracks", "plugins"];

/// A setting (a key of the serialised [`LoadConfig`]) in which a grid differs from the partial
/// result it would continue, with both values as JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct Differs {
    pub key: String,
    pub was: String,
    pub now: String,
}

/// Every setting but the grid axes in which `cfg` differs from `prior_cfg`, the configuration
/// a partial result was measured with. A cell measured one way must not be mixed into a grid
/// measured another, so a resume is only sound when this is empty.
pub fn resume_conflicts(cfg: &LoadConfig, prior_cfg: &LoadConfig) -> Vec<Differs> {
    let (now, then) = (
        serde_json::to_value(cfg).unwrap_or_default(),
        serde_json::to_value(prior_cfg).unwrap_or_default(),
    );
    let mut keys: Vec<&String> = now
        .as_object()
        .into_iter()
        .chain(then.as_object())
        .flat_map(|o| o.keys())
        .filter(|k| !GRID_AXES.contains(&k.as_str()))
        .collect();
    keys.sort();
    keys.dedup();
    let show = |v: &serde_json::Value, k: &str| v.get(k).map_or("none".into(), |x| x.to_string());
    keys.into_iter()
        .filter(|k| now.get(k.as_str()) != then.get(k.as_str()))
        .map(|k| Differs {
            key: k.clone(),
            was: show(&then, k),
            now: show(&now, k),
        })
        .collect()
}
