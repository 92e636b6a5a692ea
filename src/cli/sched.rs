//! `xrunlab sched`: Cucinotta et al.'s comparison of scheduling policies for the audio graph.

use super::output::{self, Measured};
use super::Global;
use crate::error::Result;
use crate::measure::reservation::ControllerConfig;
use crate::measure::run::DriverKind;
use crate::measure::sched::{self, SchedConfig, SchedPolicy};
use crate::results::Body;
use crate::stress::periodic::PeriodicSpec;
use crate::units::{parse_duration_ns, parse_percent};
use clap::Args;

/// `--driver` takes these; `jack` is refused with the reason (see `measure::sched`).
const SCHED_DRIVERS: &[DriverKind] = &[DriverKind::Virtual, DriverKind::Jack];

/// Run the same audio graph (a serial pipeline of `burn` clients on one engine thread) once
/// per scheduling policy against the same competing periodic task, and compare driver period,
/// driver end time, CPU time, xruns and the competitor's response times (Cucinotta et al.).
///
/// Rows: `other` (CFS for both); `fifo` gives two rows, the competitor FIFO 5 above and 5 below
/// --prio; `deadline` a fixed --budget per period P; `deadline-adaptive` the reservation
/// controller (p-th percentile of the last --window cycles' CPU time × (1 + --overprovision),
/// bumped by --bump, clamped to [--q-min, 0.95·P]); `deadline-reclaim` the same plus
/// SCHED_FLAG_RECLAIM (GRUB). For the deadline rows the competitor gets a DEADLINE reservation
/// of 105 % of its execution time (+ reclaim in the last row).
///
/// The controller is fed every cycle's CPU time from the engine's per-cycle records (through
/// the non-RT collector) and runs on a non-RT helper thread, which applies Set Q with
/// sched_setattr at most once per cycle and only when it moved by more than 1 %; the RT path
/// never makes that syscall. An xrun or a client joining bumps Q by --bump. Each engine thread
/// is its own SCHED_DEADLINE entity (mainline cannot share one reservation between threads as
/// AQuoSA did): the budget is split by each thread's measured CPU share, and the result says
/// so (budget_split, thread_budgets_ns). DEADLINE rows run the engine unpinned (the kernel
/// refuses DEADLINE threads pinned to fewer CPUs than their root domain).
///
/// --ramp NxPCT starts with no client and adds one every --ramp-every (default: the row's
/// duration / (N+1)), as Cucinotta et al. added its dn1 clients one after the other; all N are built
/// before the run and switched on without allocation. --trace writes every cycle of every row
/// (driver period, end time, CPU time, Set Q, Predicted Q, each client's end time) to CSV.
/// Needs root for FIFO/DEADLINE. Only the virtual driver: under JACK the server's own threads
/// would stay outside the reservation (--driver jack is refused with the reason).
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  sudo xrunlab sched --preset 48k128 --compete voip --duration 10s\n  sudo xrunlab sched --preset 96k128 --ramp 10x7% --ramp-every 5s --duration 60s --compete video --trace sched.csv -o sched.json\n  sudo xrunlab sched --policies other,fifo --graph 10x7% --compete video -o sched.json\n  sudo xrunlab sched --policies deadline-adaptive --window 200 --percentile 99 --overprovision 10%\n  sudo xrunlab sched --policies fifo,deadline-adaptive --chain 'lv2:urn:zamaudio:ZamComp:4,lv2:urn:dragonfly:room'"
)]
pub struct SchedArgs {
    /// Comma-separated: other, fifo, deadline, deadline-adaptive, deadline-reclaim.
    #[arg(
        long,
        value_name = "LIST",
        default_value = "other,fifo,deadline,deadline-adaptive,deadline-reclaim"
    )]
    pub policies: String,
    /// Cucinotta et al.'s settings: 96k128 (1333 µs), 48k128 (2666 µs), 96k64 (667 µs). Overrides
    /// --rate/--buffer.
    #[arg(long, value_name = "NAME")]
    pub preset: Option<String>,
    #[arg(long, default_value_t = 48000, value_name = "HZ", value_parser = crate::units::parse_rate)]
    pub rate: u32,
    #[arg(long, default_value_t = 128)]
    pub buffer: u32,
    /// The graph: COUNTxSHARE burn clients in one serial pipeline, all active from the start.
    #[arg(
        long,
        value_name = "NxPCT",
        default_value = "10x7%",
        conflicts_with = "ramp"
    )]
    pub graph: String,
    /// The same pipeline, its clients added one at a time during each row.
    #[arg(long, value_name = "NxPCT")]
    pub ramp: Option<String>,
    /// Your own pipeline instead of the burn clients: a chain as `run --chain` takes it, e.g.
    /// 'lv2:urn:zamaudio:ZamComp:4,lv2:urn:dragonfly:room' or 'clap:ZamComp:4' (each instance
    /// is one client).
    #[arg(long, value_name = "CHAIN", conflicts_with_all = ["graph", "ramp"])]
    pub chain: Option<String>,
    /// With --ramp: time between two clients joining [default: duration / (N+1)].
    #[arg(long, value_name = "DURATION", requires = "ramp")]
    pub ramp_every: Option<String>,
    /// Per-cycle CSV trace of every row.
    #[arg(long, value_name = "FILE.csv")]
    pub trace: Option<std::path::PathBuf>,
    /// Only `virtual`; `jack` is refused with the reason.
    #[arg(long, value_name = "DRIVER", value_parser = super::values::driver_parser(SCHED_DRIVERS), default_value = "virtual")]
    pub driver: DriverKind,
    /// Length of each row.
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub duration: String,
    /// FIFO priority of the engine (`fifo` rows).
    #[arg(long, default_value_t = 10)]
    pub prio: u32,
    /// Fixed DEADLINE runtime per period (`deadline` row), a duration or a share of P.
    #[arg(long, value_name = "DUR|PCT", default_value = "90%")]
    pub budget: String,
    /// Controller window, cycles.
    #[arg(long, default_value_t = 100)]
    pub window: usize,
    /// Controller percentile.
    #[arg(long, default_value_t = 99.9)]
    pub percentile: f64,
    /// Controller over-provisioning.
    #[arg(long, value_name = "PCT", default_value = "5%")]
    pub overprovision: String,
    /// Controller bump on an xrun or a new client.
    #[arg(long, value_name = "PCT", default_value = "20%")]
    pub bump: String,
    /// Lower clamp of Q (default 2 % of P).
    #[arg(long, value_name = "DURATION")]
    pub q_min: Option<String>,
    /// The competing task: video (40 ms/5 ms), voip (10 ms/1.7 ms) or PERIOD/EXEC. Its policy
    /// is set per row.
    #[arg(long, value_name = "SPEC")]
    pub compete: Option<String>,
    /// Do not lock memory (mlockall) during the rows.
    #[arg(long)]
    pub no_mlock: bool,
    /// Engine placement: steal, pinned or unpinned (see `xrunlab run --help`); a sched
    /// row runs one track, so only thread 0's affinity changes. DEADLINE rows are unpinned.
    #[arg(long, value_enum, default_value = "steal")]
    pub pin: crate::engine::Placement,
    #[command(flatten)]
    pub forensics: super::forensics::ForensicsArgs,
}

fn parse_graph(s: &str) -> Result<(u32, f64)> {
    let bad =
        || crate::error::Error::usage(format!("bad --graph '{s}': expected NxPCT, e.g. 10x7%"));
    let (n, p) = s.split_once(['x', 'X']).ok_or_else(bad)?;
    let n: u32 = n.trim().parse().map_err(|_| bad())?;
    Ok((n, parse_percent(p)?))
}

impl SchedArgs {
    pub fn to_config(&self) -> Result<SchedConfig> {
        let policies = self
            .policies
            .split(',')
            .filter(|s| !s.trim().is_empty())
            .map(str::parse::<SchedPolicy>)
            .collect::<Result<Vec<_>>>()?;
        let (rate, buffer) = match self.preset.as_deref() {
            None => (self.rate, self.buffer),
            Some("96k128") => (96000, 128),
            Some("48k128") => (48000, 128),
            Some("96k64") => (96000, 64),
            Some(o) => {
                return super::usage(format!(
                    "unknown --preset '{o}'; expected 96k128, 48k128 or 96k64"
                ))
            }
        };
        crate::common::device::check_rate(rate)?;
        if !(1..=crate::units::MAX_BUFFER_FRAMES).contains(&buffer) {
            return super::usage(format!(
                "--buffer {buffer} is outside 1..{}",
                crate::units::MAX_BUFFER_FRAMES
            ));
        }
        let period_ns = buffer as u64 * 1_000_000_000 / rate as u64;
        let (clients, client_pct) = match &self.chain {
            Some(c) => {
                let n: u64 = crate::dsp::parse_chain(c)?
                    .iter()
                    .map(|e| u64::from(e.count))
                    .sum();
                (u32::try_from(n).unwrap_or(u32::MAX), 0.0)
            }
            None => parse_graph(self.ramp.as_deref().unwrap_or(&self.graph))?,
        };
        let driver = self.driver;
        let duration_ns = parse_duration_ns(&self.duration)?;
        let ramp_every_ns = match (&self.ramp, &self.ramp_every) {
            (None, _) => None,
            (Some(_), Some(e)) => Some(parse_duration_ns(e)?),
            (Some(_), None) => Some(duration_ns / (clients as u64 + 1)),
        };
        let budget_ns = if self.budget.trim_end().ends_with('%') {
            (parse_percent(&self.budget)? / 100.0 * period_ns as f64) as u64
        } else {
            parse_duration_ns(&self.budget)?
        };
        let mut controller = ControllerConfig::for_period(period_ns);
        controller.window = self.window;
        controller.percentile = self.percentile;
        controller.overprovision = parse_percent(&self.overprovision)? / 100.0;
        controller.bump = parse_percent(&self.bump)? / 100.0;
        if let Some(q) = &self.q_min {
            controller.q_min_ns = parse_duration_ns(q)?;
        }
        let compete = match self.compete.as_deref() {
            None => None,
            Some(c) if c.contains(':') => {
                return super::usage(
                    "--compete takes no :POLICY here: each row sets the competitor's policy",
                )
            }
            Some(c) => Some(c.parse::<PeriodicSpec>()?),
        };
        let cfg = SchedConfig {
            policies,
            driver,
            rate,
            buffer_frames: buffer,
            clients,
            client_pct,
            chain: self.chain.clone(),
            duration_ns,
            prio: self.prio,
            budget_ns,
            controller,
            compete,
            ramp_every_ns,
            trace: self.trace.as_ref().map(|p| p.display().to_string()),
            mlock: !self.no_mlock,
            pin: self.pin,
        };
        cfg.validate()?;
        Ok(cfg)
    }
}

pub fn run(a: SchedArgs, g: &Global) -> Result<u8> {
    let cfg = a.to_config()?;
    let mut session =
        output::session(g.quiet, 0, Vec::new()).with_forensics(a.forensics.plan(g, None));
    let r = sched::run(&cfg, &mut session)?;
    let started = session.into_started();
    let human = crate::report::text::sched::summary(&r.results);
    let body = Body::Sched {
        config: r.config,
        results: Box::new(r.results),
    };
    output::finish(
        Measured::new(body, r.status, started, human).warnings(r.warnings),
        g,
    )
}
