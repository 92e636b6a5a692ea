//! `xrunlab run`: parse, call `measure::run`, print and write the result.

use super::output::{self, Measured};
use super::sim_args::ComputeArg;
use super::Global;
use crate::driver::signal::SignalKind;
use crate::driver::sim::{LatencyModel, SimConfig};
use crate::engine::CostModel;
use crate::error::{Error, Result};
use crate::measure::run::{ComputeKind, DriverKind, RunConfig};
use crate::results::{Body, Status};
use crate::rt::Policy;
use clap::Args;
use std::path::PathBuf;

/// Run the audio engine: per-cycle timing, DSP load and xruns with their causes.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  xrunlab run --buffer 64 --tracks 2 --chain 'burn(20%)' --duration 30s
  xrunlab run --buffer 256 --chain 'burn(30%)' --duration 2s --trace cycles.csv -o run.json
  xrunlab run --buffer 128 --chain 'lv2:urn:zamaudio:ZamComp,lv2:Dragonfly Room Reverb' --duration 30s
  xrunlab run --chain thru --buffer 64 --duration 10s --fail-on-xrun      # engine overhead, for CI
  xrunlab run --driver sim --chain 'burn(40%):2' --sim-latency normal:30us,10us --duration 60s
  xrunlab run --driver sim --chain gain:30 --cost gain=20us --buffer 48   # what-if from a cost model
  xrunlab run --driver sim --chain 'burn(10%)' --inject late:100:2ms --inject preempt:200:3ms
  xrunlab run --chain 'burn(30%)' --stress cpu,proc --duration 30s       # under load
  xrunlab run --chain 'burn(30%)' --compete voip --duration 10s          # beside a VoIP-like RT task
  xrunlab run --driver alsa --device hw:0 --buffer 128 --periods 2 --chain 'burn(20%)'
  xrunlab run --driver alsa --device hw:Loopback --access mmap --buffer 64 --periods 3

The sim driver is deterministic for a --seed. Its compute time comes from a cost model by
default (burn(X%) costs X% of the period; other plugins cost what --cost declares, else 0,
with a warning; a --cost for a plugin not in --chain is refused); --sim-compute measured runs
the DSP for real instead (hang is refused on sim).
With --driver alsa, --buffer is ALSA's period size, --periods ALSA's periods, and ALSA's buffer
size is their product; the device may round them and the run uses what it accepted (the
result's `alsa` section has the negotiated setup, the delay ALSA reports and the xruns it
recovered). A device that cannot be opened exits 3 with ALSA's error.
A cycle is an xrun when it ends after t_ideal + (n-1)·P; its cause is the largest of the
scheduler's wake-up delay (late-wakeup), the critical path's CPU time (overload) and the rest
of its wall time (interference); a cycle late only by the backlog the xrun before it left (JACK
runs a late client's next cycles back to back) keeps that xrun's cause. Exit codes: 0 ok, 1 --fail-on-xrun and xruns happened,
2 bad usage, 3 cannot measure, interrupted or stopped by the watchdog (partial result written).")]
pub struct RunArgs {
    /// What paces the cycles: a timer-paced software codec, the deterministic simulator,
    /// a JACK server (jackd2, or PipeWire under pw-jack), or an ALSA PCM (--device).
    #[arg(long, value_enum, default_value = "virtual")]
    pub driver: DriverKind,
    /// Sample rate in Hz [default: 48000; jack: the server's].
    #[arg(long, value_name = "HZ", value_parser = crate::units::parse_rate)]
    pub rate: Option<u32>,
    /// Frames per period [default: 64; jack: the server's, see --set-buffer; alsa: ALSA's
    /// period size].
    #[arg(long)]
    pub buffer: Option<u32>,
    #[command(flatten)]
    pub jack: super::jack_args::JackArgs,
    #[command(flatten)]
    pub alsa: super::alsa_args::AlsaArgs,
    /// Periods of buffering n (the deadline is n−1 periods after the interrupt; alsa:
    /// ALSA's periods).
    #[arg(long, default_value_t = 2)]
    pub periods: u32,
    /// Tracks run in parallel, 1..64.
    #[arg(long, default_value_t = 1)]
    pub tracks: u32,
    /// Plugin chain of every track: plugin[(params)][:count],... e.g. 'burn(20%):2,gain';
    /// installed LV2 plugins as lv2:URI or lv2:NAME[(symbol=value,…)] (`plugins list --lv2`),
    /// CLAP plugins as clap:ID or clap:NAME[(name=value,…)] (`plugins list --clap`).
    /// An installed plugin runs inside xrunlab: if it crashes, xrunlab goes with it (its stressors
    /// die with it; no result is written).
    #[arg(long, default_value = "thru")]
    pub chain: String,
    /// How long to run (device time), e.g. 30s, 10m.
    #[arg(long, default_value = "10s", value_parser = crate::units::parse_duration_ns)]
    pub duration: u64,
    /// Write every cycle to this CSV file. If a write fails (a full disk) it is cut at its
    /// last complete line, the run goes on without it, and the command exits 3.
    #[arg(long, value_name = "FILE.csv")]
    pub trace: Option<PathBuf>,
    /// CPUs for the engine threads (one thread per CPU, up to one per track), e.g. 0-1.
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// Scheduling policy of the engine threads [default: fifo:80, other for sim].
    #[arg(long, value_name = "POLICY")]
    pub policy: Option<Policy>,
    /// Exit 1 when any xrun (or skipped period) happened.
    #[arg(long)]
    pub fail_on_xrun: bool,
    /// Seed for the input noise and the sim driver.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Input signal: silence, noise, sine or sine:FREQ.
    #[arg(long, default_value = "sine:1000")]
    pub input: SignalKind,
    /// Stop when a cycle has not ended after this long [default: max(1s, 100 periods)].
    #[arg(long, value_name = "DURATION", value_parser = crate::units::parse_duration_ns)]
    pub watchdog: Option<u64>,
    /// Track placement: steal (threads pinned one per CPU, each runs its home tracks first,
    /// then takes other threads' tracks not yet started, so a stalled core loses them),
    /// pinned (home tracks only), unpinned (no affinity, any thread takes any track).
    #[arg(long, value_enum, default_value = "steal")]
    pub pin: crate::engine::Placement,
    /// A `plugins bench` result file (`-o FILE`) giving each chain element's cost per block: its tail
    /// (p99.9) is the work a cycle is expected to cost when telling host time from overload
    /// (real drivers). Without it a chain of burns uses burn's calibration, others the run's
    /// own cost.
    #[arg(long, value_name = "FILE.json")]
    pub cost_prior: Option<PathBuf>,
    /// How long a worker spins waiting for the next cycle before it sleeps on a futex;
    /// longer than a period keeps workers spinning (lowest overhead, one busy core each).
    #[arg(long, value_name = "DURATION", default_value = "5us", value_parser = crate::units::parse_duration_ns)]
    pub worker_spin: u64,
    /// Do not lock memory (mlockall) during the run.
    #[arg(long)]
    pub no_mlock: bool,
    #[command(flatten)]
    pub sim: super::sim_args::SimArgs<super::sim_args::SimCompute>,
    /// Run a competing periodic task beside the engine: video, voip or
    /// PERIOD/EXEC[:POLICY[:PRIO]] (e.g. 10ms/1.7ms:fifo:15, 40ms/5ms:deadline-reclaim).
    #[arg(long, value_name = "SPEC")]
    pub compete: Option<crate::stress::PeriodicSpec>,
    #[command(flatten)]
    pub stress: super::stress_args::StressArgs,
    #[command(flatten)]
    pub forensics: super::forensics::ForensicsArgs,
}

impl RunArgs {
    pub fn to_config(&self) -> Result<RunConfig> {
        let driver = self.driver;
        let sim = &self.sim;
        let sim_flags = sim.given() || matches!(sim.more.sim_compute, ComputeArg::Measured);
        if !driver.simulated() && sim_flags {
            return Err(Error::usage(
                "--sim-latency, --sim-compute, --cost, --cost-overhead and --inject need --driver sim",
            ));
        }
        let mut c = RunConfig::new(driver, &self.chain)?;
        c.rate = self.rate.unwrap_or(48000);
        c.buffer_frames = self.buffer.unwrap_or(64);
        c.jack = self
            .jack
            .to_config(driver == DriverKind::Jack, self.buffer, self.rate)?;
        c.alsa = self.alsa.to_config(driver == DriverKind::Alsa)?;
        c.periods = self.periods;
        c.tracks = self.tracks;
        c.duration_ns = self.duration;
        c.cpus = match &self.cpus {
            Some(s) => crate::rt::affinity::select_cpus(Some(s))?,
            None => Vec::new(),
        };
        if let Some(p) = self.policy {
            c.policy = p;
        }
        // The kernel refuses a DEADLINE thread pinned narrower than its root domain: without
        // --cpus leave the engine unpinned; with --cpus the refusal explains itself.
        c.unpinned = matches!(c.policy, crate::rt::Policy::Deadline { .. }) && self.cpus.is_none();
        c.pin = self.pin;
        c.seed = self.seed;
        c.input = self.input;
        c.trace = self.trace.as_ref().map(|p| p.display().to_string());
        c.watchdog_ns = self.watchdog;
        c.worker_spin_ns = self.worker_spin;
        if let Some(f) = &self.cost_prior {
            if driver.simulated() {
                return Err(Error::usage(
                    "--cost-prior judges xruns on real drivers; the sim's compute is modelled or injected",
                ));
            }
            c.cost_prior = Some(read_bench_prior(f, &c.chain_elements)?);
        }
        c.compete = self.compete.clone();
        c.mlock = driver.mlock_applies() && !self.no_mlock;
        if driver.simulated() {
            c.sim = SimConfig {
                latency: LatencyModel::parse(&sim.sim_latency)?,
                events: sim.inject.clone(),
            };
            c.compute = match sim.more.sim_compute {
                ComputeArg::Measured => ComputeKind::Measured,
                ComputeArg::Model => ComputeKind::Model,
            };
            if matches!(sim.more.sim_compute, ComputeArg::Measured)
                && (!sim.cost.is_empty() || sim.cost_overhead != 0)
            {
                return Err(Error::usage(
                    "--cost and --cost-overhead are the cost model: they do nothing with --sim-compute measured",
                ));
            }
            if let Some(e) = c
                .chain_elements
                .iter()
                .find(|e| crate::dsp::plugin_cost::NEVER_RETURNS.contains(&e.plugin.as_str()))
            {
                // As `load` refuses it: in a model it costs nothing, measured it never ends.
                return Err(Error::usage(format!(
                    "--chain: '{}' never returns; it exercises the watchdog on a real driver, not on sim",
                    e.plugin
                )));
            }
            c.cost = CostModel::from_flags(&sim.cost, sim.cost_overhead, &c.chain_elements)?;
        }
        c.validate()?;
        Ok(c)
    }
}

pub fn run(a: RunArgs, g: &Global) -> Result<u8> {
    let mut cfg = a.to_config()?;
    let spec = a.stress.to_spec()?;
    cfg.stress = spec.labels();
    let mut session = output::session(g.quiet, cfg.periods_total(), spec.labels())
        .with_stress(spec)
        .with_forensics(a.forensics.plan(g, None));
    let r = crate::measure::run::run(&cfg, &mut session)?;
    let started = session.into_started();
    let human = crate::report::text::run::summary(&r.config, &r.results, r.status);
    let partial = partial_line(&r, g);
    let glitches = r.results.xruns.total + r.results.skipped_periods;
    // A trace cut short is an output lost: exit 3 even when the run itself is whole.
    let lost = r
        .results
        .trace_error
        .as_ref()
        .map(|e| output::Verdict::OutputLost(format!("xrunlab: error: {e}\n")));
    let simulated = r.config.driver.simulated();
    let body = Body::Run {
        config: r.config,
        results: r.results,
    };
    let m = Measured::new(body, r.status, started, human)
        .warnings(r.warnings)
        .computed(simulated)
        .threshold(a.fail_on_xrun && glitches > 0)
        .partial(partial);
    output::finish(
        match lost {
            Some(v) => m.verdict(v),
            None => m,
        },
        g,
    )
}

/// What stderr says when the run ended early, by why it did.
fn partial_line(r: &crate::measure::run::RunOutcome, g: &Global) -> String {
    match r.status {
        Status::Watchdog => format!(
            "xrunlab: error: watchdog: a cycle did not end within {}; engine threads demoted to SCHED_OTHER and the run stopped (partial result{})\n",
            crate::units::format_ns(r.results.watchdog.as_ref().map(|w| w.bound_ns).unwrap_or(0)),
            if g.output.is_some() { " written" } else { " above" }
        ),
        Status::ServerShutdown => format!(
            "xrunlab: error: the JACK server shut down after {} cycles; partial result reported\n",
            r.results.cycles
        ),
        Status::Interrupted | Status::Complete => {
            let change = r.results.jack.as_ref().and_then(|j| j.param_change.as_ref());
            format!(
                "{}xrunlab: run interrupted after {} cycles; partial result reported\n",
                change
                    .map(|c| format!("xrunlab: the JACK server changed its configuration: {c}\n"))
                    .unwrap_or_default(),
                r.results.cycles
            )
        }
    }
}

/// Read `file` as a `plugins bench` result and build the chain's prior from it (exit 2 on a
/// file that is not one, or lacks an element of the chain).
fn read_bench_prior(
    file: &std::path::Path,
    chain: &[crate::dsp::ChainElement],
) -> Result<crate::engine::prior::CostPrior> {
    let doc = crate::results::read_result(file)?;
    match &doc.body {
        crate::results::Body::Bench { results, .. } => {
            crate::engine::prior::CostPrior::from_bench(chain, results, &file.display().to_string())
        }
        other => Err(Error::input(
            file,
            format!(
                "a '{}' result, not a 'bench' result (write one with `xrunlab plugins bench PLUGIN -o FILE`)",
                other.kind()
            ),
        )),
    }
}
