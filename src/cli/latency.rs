//! `xrunlab latency`.

use super::output::{self, Measured};
use super::Global;
use crate::error::{Error, Result};
use crate::measure::latency::{self, FailAbove, LatencyConfig, LatencySource};
use crate::report::text;
use crate::results::Body;
use crate::rt::{affinity, Policy};
use crate::units::{parse_duration_ns, parse_duration_or_us, AudioPeriod};
use clap::Args;
use std::path::PathBuf;

/// Scheduling latency per CPU (cyclictest's method, plus percentiles and missed periods).
#[derive(Debug, Args)]
#[command(after_help = "\
Each selected CPU gets one pinned thread that sleeps with absolute clock_nanosleep to its next
target and records how late it woke (now − target, in ns). Periods skipped because a wake-up
came after the next target are counted as 'missed'.

Examples:
  xrunlab latency                                  # 10 s, FIFO 90, 200 µs, every CPU
  xrunlab latency --duration 5h --histogram h.txt  # Vignati et al.'s protocol; h.txt as cyclictest -h400
  xrunlab latency --audio-period 64@48000 --duration 10m
  xrunlab latency --cpus 2-3 -i 1ms --loops 100000 -o lat.json
  xrunlab latency --policy other --no-mlock --no-dma-latency   # the system as configured
  xrunlab latency --duration 1m --fail-above 100us@p99.99      # exit 1 when crossed (CI)
  xrunlab latency --stress cpu,proc --duration 30s             # under load (stress-ng or built-in)
  xrunlab latency --baseline idle --stress paper --duration 15s   # idle then stressed (Huang et al.)
  xrunlab latency --sim-latency normal:30us,10us --duration 1h --seed 1 -o model.json   # the sim's model, for predict
  xrunlab latency --cpus 0 -i 2667us --busy 40 --no-dma-latency --duration 6m -o lat.json   # as a 128-frame engine at 40 % DSP load runs")]
pub struct LatencyArgs {
    /// Real-time priority for fifo/rr (1..99).
    #[arg(short = 'p', long, value_name = "PRIO")]
    pub priority: Option<u32>,
    /// Scheduling policy: fifo, rr, other, or deadline[:RUNTIME/PERIOD] (e.g. deadline:50us/200us).
    #[arg(long, default_value = "fifo", value_name = "POLICY")]
    pub policy: String,
    /// Interval between wake-ups: 200us, 1ms; a bare number is µs, as in cyclictest.
    #[arg(short = 'i', long, default_value = "200us", value_name = "DURATION")]
    pub interval: String,
    /// Run length: 30s, 10m, 5h [default: 10s].
    #[arg(long, value_name = "DURATION", conflicts_with = "loops")]
    pub duration: Option<String>,
    /// Run length in wake-ups per CPU (instead of --duration).
    #[arg(short = 'l', long, value_name = "N")]
    pub loops: Option<u64>,
    /// CPUs to measure, e.g. 0-3,6 [default: every CPU this process may use].
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// Leave /dev/cpu_dma_latency alone (measure C-state exit latency as configured).
    #[arg(long)]
    pub no_dma_latency: bool,
    /// Do not lock memory with mlockall.
    #[arg(long)]
    pub no_mlock: bool,
    /// Bound of the cyclictest-format histogram (1 µs buckets); later wake-ups are overflows.
    /// A bare number is µs, as cyclictest's -h.
    #[arg(long, default_value = "400us", value_name = "DURATION")]
    pub hist_max: String,
    /// Write the histogram in cyclictest's -h text format to FILE.
    #[arg(long, value_name = "FILE")]
    pub histogram: Option<PathBuf>,
    /// Count wake-ups later than this audio period, e.g. 64@48000.
    #[arg(long, value_name = "FRAMES@RATE")]
    pub audio_period: Option<String>,
    /// Exit 1 when latency at PERCENTILE (default max) exceeds DURATION, e.g. 100us@p99.9.
    #[arg(long, value_name = "DURATION[@PERCENTILE]")]
    pub fail_above: Option<String>,
    /// Measure a baseline phase first, then the stressed one: only `idle` (needs --stress).
    #[arg(long, value_name = "idle")]
    pub baseline: Option<String>,
    /// Do not measure: draw each wake-up's latency from this sim driver model (const:20us,
    /// normal:30us,10us, heavy:10us,5us,2.5 or file:PATH) on a simulated timeline, as `run
    /// --driver sim --sim-latency` does; deterministic for --seed. Nothing sleeps: --duration
    /// is simulated time.
    #[arg(long, value_name = "MODEL", conflicts_with = "baseline")]
    pub sim_latency: Option<String>,
    /// After each wake-up, compute for PCT % of the interval as an audio engine does and
    /// record each compute's held total (gaps ≥ 10 µs between clock reads: interrupts,
    /// preemption, the host taking a vCPU). `predict` adds the xruns those holds cause
    /// during an engine's compute. Give the engine's DSP load, at its period (-i), and
    /// --no-dma-latency unless the engine holds /dev/cpu_dma_latency too.
    #[arg(long, value_name = "PCT")]
    pub busy: Option<f64>,
    /// Seed of --sim-latency (CPU i draws with SEED + i).
    #[arg(long, default_value_t = 0, requires = "sim_latency")]
    pub seed: u64,
    #[command(flatten)]
    pub stress: super::stress_args::StressArgs,
    #[command(flatten)]
    pub forensics: super::forensics::ForensicsArgs,
    /// With --forensics: explain every wake-up later than this [default: the --audio-period;
    /// without either, only each CPU's maximum].
    #[arg(long, value_name = "DURATION", requires = "forensics", value_parser = parse_duration_ns)]
    pub forensics_above: Option<u64>,
}

fn policy(a: &LatencyArgs, interval_ns: u64) -> Result<Policy> {
    let prio = a.priority.unwrap_or(latency::DEFAULT_PRIORITY);
    let p = match a.policy.to_ascii_lowercase().as_str() {
        "fifo" => Policy::fifo(prio),
        "rr" => Policy::Rr { priority: prio },
        "deadline" | "dl" => {
            // A reservation of a quarter of each interval: ample for a wake-up and a clock read.
            let runtime_ns = (interval_ns / 4).max(10_000).min(interval_ns);
            Policy::Deadline {
                runtime_ns,
                deadline_ns: interval_ns,
                period_ns: interval_ns,
                reclaim: false,
            }
        }
        _ => {
            let p: Policy = a.policy.parse()?;
            if let (Some(given), Policy::Fifo { priority } | Policy::Rr { priority }) =
                (a.priority, p)
            {
                if given != priority {
                    return Err(Error::usage(format!(
                        "-p {given} contradicts --policy {}",
                        a.policy
                    )));
                }
            }
            p
        }
    };
    p.validate()?;
    Ok(p)
}

/// Turn the arguments into a measurement config (usage errors, exit 2, before measuring).
pub fn config(a: &LatencyArgs) -> Result<LatencyConfig> {
    // A bare number is microseconds, as in cyclictest's -i and -h, so its command lines
    // carry over.
    let interval_ns = parse_duration_or_us(&a.interval)?;
    if interval_ns == 0 {
        return Err(crate::error::Error::usage(
            "--interval must be greater than zero",
        ));
    }
    let duration_ns = match (&a.duration, a.loops) {
        (Some(d), _) => Some(parse_duration_ns(d)?),
        (None, Some(_)) => None,
        (None, None) => LatencyConfig::default().duration_ns,
    };
    let audio_period = a
        .audio_period
        .as_deref()
        .map(str::parse::<AudioPeriod>)
        .transpose()?;
    let fail_above = a
        .fail_above
        .as_deref()
        .map(str::parse::<FailAbove>)
        .transpose()?;
    Ok(LatencyConfig {
        source: LatencySource::Measured,
        cpus: affinity::select_cpus(a.cpus.as_deref())?,
        policy: Some(policy(a, interval_ns)?),
        interval_ns: Some(interval_ns),
        duration_ns,
        loops: a.loops,
        dma_latency: Some(!a.no_dma_latency),
        mlock: Some(!a.no_mlock),
        hist_max_ns: parse_duration_or_us(&a.hist_max)?,
        audio_period,
        fail_above,
        stress: Vec::new(),
        baseline_idle: false,
        busy_pct: a.busy,
    })
}

pub fn run(a: LatencyArgs, g: &Global) -> Result<u8> {
    let mut cfg = config(&a)?;
    let spec = a.stress.to_spec()?;
    if let Some(model) = &a.sim_latency {
        if !spec.is_idle() {
            return super::usage("--sim-latency draws from a model: --stress has nothing to load");
        }
        let model = crate::driver::sim::LatencyModel::parse(model)?;
        cfg.source = LatencySource::Simulated {
            model,
            seed: a.seed,
        };
        if a.cpus.is_none() {
            cfg.cpus = vec![0];
        }
        cfg.policy = None;
        cfg.dma_latency = None;
        cfg.mlock = None;
    } else {
        cfg.stress = spec.labels();
    }
    match a
        .baseline
        .as_deref()
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        None => {}
        Some(_) if a.sim_latency.is_some() => {}
        Some("idle") if spec.is_idle() => {
            return super::usage("--baseline idle compares with a stressed phase: add --stress")
        }
        Some("idle") if cfg.duration_ns.is_none() => {
            return super::usage("--baseline idle needs --duration (each phase runs that long)")
        }
        Some("idle") => cfg.baseline_idle = true,
        Some(other) => return super::usage(format!("--baseline {other}: only 'idle' is known")),
    }
    let simulated = a.sim_latency.is_some();
    let mut session = output::session(g.quiet || simulated, 0, cfg.stress.clone())
        .with_stress(spec)
        .with_forensics(a.forensics.plan(g, a.forensics_above));
    let r = latency::run(&cfg, &mut session)?;
    let started = session.into_started();
    // A failed histogram write must not lose the result: it is reported after it (exit 3).
    let histogram = match &a.histogram {
        Some(h) => {
            let text =
                crate::results::cyclictest::histogram_text(&r.results, cfg.hist_max_ns / 1_000);
            crate::results::write_atomic(h, text.as_bytes())
        }
        None => Ok(()),
    };
    let result = &r.results;
    let mut human = text::latency::measured(&cfg, result);
    let unpinned = matches!(cfg.policy, Some(Policy::Deadline { .. }));
    if unpinned {
        human.push_str("SCHED_DEADLINE threads ran unpinned: rows are threads, not CPUs\n");
    }
    let crossed = result.fail_above.as_ref().is_some_and(|f| f.crossed);
    let body = Body::Latency {
        config: r.config,
        results: Box::new(r.results),
    };
    let mut m = Measured::new(body, r.status, started, human)
        .warnings(r.warnings)
        .threshold(crossed)
        .computed(simulated);
    if !simulated {
        m = m.partial("xrunlab: interrupted; the partial result was written\n");
    }
    let code = output::finish(m, g)?;
    histogram
        .map_err(|e| Error::cannot_measure(format!("{e}; the result was reported without it")))?;
    Ok(code)
}
