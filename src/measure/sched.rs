//! `xrunlab sched` (Cucinotta et al.): the same audio graph under CFS, FIFO (above and below a competing
//! task), a fixed SCHED_DEADLINE reservation, an adaptive one (the `reservation` controller) and
//! an adaptive one with GRUB reclaiming, each against the same competing periodic task.
//!
//! The graph is one serial pipeline of M `burn` clients on one engine thread (JACK's pipeline of
//! Cucinotta et al.), optionally switched on one at a time (`--ramp`). Every row has a non-RT helper
//! thread fed with each cycle's record by the engine's collector (`run_observed`): it folds the
//! row's Cucinotta et al. metrics (`sched_observe`) and, on the adaptive rows, feeds the controller with
//! the cycle's CPU time and applies Set Q with `sched_setattr` — at most once per batch of
//! records, so at most once per cycle, and never from the RT path. With several engine threads
//! each is its own DEADLINE entity and the budget is split by each thread's measured CPU share.

use super::reservation::ControllerConfig;
pub use super::sched_observe::QPoint;
use super::sched_observe::{cdf, decimate_max, CdfPoint, ClientEnd, EndTimeStats, PeriodStats};
use super::sched_observe::{RowObserver, RowTiming};
use crate::common::cycle::{CycleRecord, MAX_CLIENTS};
use crate::common::Status;
use crate::engine::Ramp;
use crate::error::{Error, Result};
use crate::measure::run::{run_observed, DriverKind, Observe, RunConfig, RunResults};
use crate::measure::session::{Outcome, Session};
use crate::progress::Progress;
use crate::rt::Policy;
use crate::stress::periodic::{reservation, PeriodicSpec, PeriodicStats, PeriodicTask};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::str::FromStr;
use std::sync::mpsc;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SchedPolicy {
    Other,
    Fifo,
    Deadline,
    DeadlineAdaptive,
    DeadlineReclaim,
}

impl FromStr for SchedPolicy {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s.trim() {
            "other" | "cfs" => SchedPolicy::Other,
            "fifo" => SchedPolicy::Fifo,
            "deadline" => SchedPolicy::Deadline,
            "deadline-adaptive" => SchedPolicy::DeadlineAdaptive,
            "deadline-reclaim" => SchedPolicy::DeadlineReclaim,
            o => {
                return Err(Error::usage(format!(
                "unknown policy '{o}'; expected other, fifo, deadline, deadline-adaptive, deadline-reclaim"
            )))
            }
        })
    }
}

/// What `xrunlab sched` was asked to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SchedConfig {
    pub policies: Vec<SchedPolicy>,
    pub driver: DriverKind,
    pub rate: u32,
    pub buffer_frames: u32,
    /// Burn clients in the pipeline.
    pub clients: u32,
    /// Share of a period each client burns, percent (0 with `chain`).
    pub client_pct: f64,
    /// The user's chain as the pipeline instead of the burn clients (`--chain`, e.g. LV2
    /// plugins); `clients` is then its instance count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain: Option<String>,
    /// Per row.
    pub duration_ns: u64,
    /// FIFO priority of the engine; the competitor runs at prio+5 and prio−5.
    pub prio: u32,
    /// Fixed DEADLINE runtime per engine thread (`deadline` row).
    pub budget_ns: u64,
    pub controller: ControllerConfig,
    /// The competing task (its policy is replaced per row).
    pub compete: Option<PeriodicSpec>,
    /// `--ramp`: no client at the start, one more every this long; None = all from the start.
    #[serde(default)]
    pub ramp_every_ns: Option<u64>,
    /// Per-cycle CSV trace of every row (`--trace`).
    #[serde(default)]
    pub trace: Option<String>,
    /// mlockall during every row (`--no-mlock`: false); results before the option locked.
    #[serde(default = "crate::rt::memory::locked_by_default")]
    pub mlock: bool,
    /// Engine placement (`--pin`; DEADLINE rows are unpinned whatever it says).
    #[serde(default)]
    pub pin: crate::engine::Placement,
}

/// How the budget reaches several engine threads (also in `--help`).
pub const BUDGET_SPLIT: &str = "each engine thread is its own SCHED_DEADLINE entity (mainline has no shared reservation like AQuoSA's): Set Q is split among them in proportion to each thread's measured CPU time over the row (thread_budgets_ns)";

/// One row of the comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SchedRow {
    /// e.g. "fifo engine 10 / compete 15".
    pub label: String,
    pub policy: SchedPolicy,
    pub engine_policy: Policy,
    pub compete_policy: Option<Policy>,
    pub status: Status,
    pub unpinned: bool,
    pub engine: RunResults,
    /// Driver period wake(k) − wake(k−1) with its standard deviation (Cucinotta et al. Tables 1/3).
    pub driver_period: PeriodStats,
    /// Driver end time end − t_ideal: extremes and CDF (Cucinotta et al. Fig. 5a).
    pub end_time: EndTimeStats,
    /// Driver end time per cycle, the largest of each bucket of `series_stride` cycles.
    pub end_time_series_ns: Vec<u64>,
    pub series_stride: u64,
    /// Per client of the pipeline: when it joined and its end time in the cycle.
    pub clients: Vec<ClientEnd>,
    /// Set Q and Predicted Q after each cycle, decimated to ≤ 2000 points (every cycle in the
    /// `--trace` CSV). Empty on rows without the controller.
    pub q_series: Vec<QPoint>,
    /// sched_setattr updates applied by the helper (at most one per cycle).
    pub q_updates: u64,
    /// sched_setattr calls that failed (e.g. admission), with the first error.
    pub q_errors: u64,
    pub q_first_error: Option<String>,
    /// Controller bumps on an xrun and on a client joining.
    pub bumps_xrun: u64,
    pub bumps_client: u64,
    /// The last budget applied to each engine thread (see `SchedResults::budget_split`).
    pub thread_budgets_ns: Vec<u64>,
    pub compete: Option<PeriodicStats>,
    /// The competitor's response time (release → completion) CDF and per-job series (largest
    /// of each bucket of `compete_series_stride` jobs).
    pub compete_response_cdf: Vec<CdfPoint>,
    pub compete_response_series_ns: Vec<u64>,
    pub compete_series_stride: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SchedResults {
    pub period_ns: u64,
    /// How an adaptive budget is shared by several engine threads.
    pub budget_split: String,
    pub rows: Vec<SchedRow>,
    pub trace_file: Option<String>,
    /// `--forensics`: the rows' sections merged (`rows[].engine.forensics` has each).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forensics: Option<crate::trace::Forensics>,
}

/// The outcome of `sched`.
pub type SchedOutcome = Outcome<SchedConfig, SchedResults>;

impl SchedConfig {
    pub fn period_ns(&self) -> u64 {
        crate::common::ns_of_frames(self.buffer_frames as u64, self.rate)
    }

    pub fn validate(&self) -> Result<()> {
        if self.policies.is_empty() {
            return Err(Error::usage("--policies is empty"));
        }
        if !(1..=MAX_CLIENTS as u32).contains(&self.clients) {
            return Err(Error::usage(format!(
                "the graph must have 1..{MAX_CLIENTS} clients"
            )));
        }
        if let Some(e) = self.ramp_every_ns {
            if e < self.period_ns() {
                return Err(Error::usage("--ramp-every must be at least one period"));
            }
        }
        match self.driver {
            DriverKind::Virtual => {}
            DriverKind::Jack => return Err(Error::usage(JACK_REFUSAL)),
            DriverKind::Sim | DriverKind::Alsa => {
                return Err(Error::usage(
                    "xrunlab sched schedules the engine against the virtual driver's exact clock: use --driver virtual",
                ))
            }
        }
        if !(0.0..=100.0).contains(&self.client_pct) {
            return Err(Error::usage("client share must be 0..100 %"));
        }
        if !(6..=94).contains(&self.prio) {
            return Err(Error::usage(
                "--prio must be 6..94 (the competitor runs 5 above and 5 below it)",
            ));
        }
        self.controller.validate()?;
        let p = self.period_ns();
        if self.budget_ns < 1024 || self.budget_ns > p {
            return Err(Error::usage(format!(
                "--budget must be between 1.024 µs and the period ({} µs)",
                p / 1000
            )));
        }
        Ok(())
    }

    fn run_config(&self, policy: Policy, unpinned: bool) -> Result<RunConfig> {
        let chain = match &self.chain {
            Some(c) => c.clone(),
            None => format!("burn({}%):{}", self.client_pct, self.clients),
        };
        let mut c = RunConfig::new(self.driver, &chain)?;
        c.rate = self.rate;
        c.buffer_frames = self.buffer_frames;
        c.tracks = 1;
        c.duration_ns = self.duration_ns;
        c.policy = policy;
        c.unpinned = unpinned;
        c.pin = self.pin;
        c.mlock &= self.mlock;
        c.ramp = self
            .ramp_every_ns
            .map(|every_ns| Ramp { start: 0, every_ns });
        c.validate()?;
        Ok(c)
    }

    /// The rows: FIFO gives two (competitor above, then below the engine).
    fn rows(&self) -> Vec<(String, SchedPolicy, Policy, Option<Policy>)> {
        let p = self.period_ns();
        let dl = |runtime_ns, reclaim| Policy::Deadline {
            runtime_ns,
            deadline_ns: p,
            period_ns: p,
            reclaim,
        };
        let comp = self.compete.as_ref();
        let resv = |reclaim| comp.map(|c| reservation(c.period_ns, c.exec_ns, reclaim));
        let mut out = Vec::new();
        for &sp in &self.policies {
            match sp {
                SchedPolicy::Other => out.push((
                    "other (CFS)".into(),
                    sp,
                    Policy::Other { nice: 0 },
                    comp.map(|_| Policy::Other { nice: 0 }),
                )),
                SchedPolicy::Fifo => {
                    for cp in [self.prio + 5, self.prio - 5] {
                        out.push((
                            format!("fifo {} / compete {}", self.prio, cp),
                            sp,
                            Policy::fifo(self.prio),
                            comp.map(|_| Policy::fifo(cp)),
                        ));
                    }
                }
                SchedPolicy::Deadline => out.push((
                    "deadline (fixed)".into(),
                    sp,
                    dl(self.budget_ns, false),
                    resv(false),
                )),
                SchedPolicy::DeadlineAdaptive => out.push((
                    "deadline-adaptive".into(),
                    sp,
                    dl(self.controller.initial_ns.max(1024), false),
                    resv(false),
                )),
                SchedPolicy::DeadlineReclaim => out.push((
                    "deadline-reclaim".into(),
                    sp,
                    dl(self.controller.initial_ns.max(1024), true),
                    resv(true),
                )),
            }
        }
        out
    }
}

/// Why `--driver jack` is refused (exit 2).
pub const JACK_REFUSAL: &str = "xrunlab sched runs on the virtual driver only. Under JACK the server owns the process thread and runs its own driver thread: a SCHED_DEADLINE reservation set on our client's thread would leave jackd's threads outside it (Cucinotta et al. put the server and every client in one AQuoSA reservation; mainline DEADLINE cannot share a reservation between threads), and the ramp and driver timing would be judged against a server xrunlab does not pace. For JACK beside a competing task use `xrunlab run --driver jack --compete voip`";

/// `xrunlab sched`: every row in turn. Privilege or admission problems are errors naming the
/// row. With forensics a recording starts before every row, the row's xruns are explained
/// after it (`rows[].engine.forensics`) and the rows' sections are merged.
pub fn run(cfg: &SchedConfig, session: &mut Session) -> Result<SchedOutcome> {
    cfg.validate()?;
    let mut trace = match &cfg.trace {
        Some(p) => Some(TraceCsv::create(p, cfg.clients as usize)?),
        None => None,
    };
    let mut rows = Vec::new();
    let mut warnings = Vec::new();
    let mut status = Status::Complete;
    for (label, sp, engine_policy, compete_policy) in cfg.rows() {
        if crate::rt::interrupt::requested() {
            status = Status::Interrupted;
            break;
        }
        session.progress().set_message(&label);
        let is_dl = matches!(engine_policy, Policy::Deadline { .. });
        let rc = cfg.run_config(engine_policy, is_dl)?;
        let rec = session.start_trace(&rc.cpus, rc.duration_ns);
        let row = run_row(
            cfg,
            &rc,
            &label,
            sp,
            compete_policy,
            trace.take(),
            session.progress(),
        );
        let (mut row, t) = match row {
            Ok(x) => x,
            // A failed run leaves no half-written trace behind: the trace's new file went
            // with the row, and the name keeps what it had.
            Err(e) => return Err(in_row(e, &label)),
        };
        trace = t;
        if let Some(rec) = rec {
            warnings.extend(crate::measure::run::forensics::explain_run(
                rec,
                &mut row.engine,
                &rc.chain_elements,
            ));
        }
        if row.status != Status::Complete {
            status = row.status;
        }
        if is_dl {
            let w = "DEADLINE rows run the engine unpinned: the kernel refuses DEADLINE threads pinned to fewer CPUs than their root domain".to_string();
            if !warnings.contains(&w) {
                warnings.push(w);
            }
        }
        let stop = row.status != Status::Complete;
        rows.push(row);
        if stop {
            break;
        }
    }
    if let Some(t) = trace {
        t.finish()?;
    }
    let forensics = session.merged(
        rows.iter().filter_map(|x| x.engine.forensics.as_ref()),
        &mut warnings,
    );
    Ok(SchedOutcome {
        status,
        config: cfg.clone(),
        results: SchedResults {
            period_ns: cfg.period_ns(),
            budget_split: BUDGET_SPLIT.into(),
            rows,
            trace_file: cfg.trace.clone(),
            forensics,
        },
        warnings,
    })
}

fn run_row(
    cfg: &SchedConfig,
    rc: &RunConfig,
    label: &str,
    sp: SchedPolicy,
    compete_policy: Option<Policy>,
    trace: Option<TraceCsv>,
    progress: &dyn Progress,
) -> Result<(SchedRow, Option<TraceCsv>)> {
    let competitor = match (&cfg.compete, compete_policy) {
        (Some(spec), Some(pol)) => {
            let mut s = spec.clone();
            s.policy = pol;
            s.cpus = Vec::new();
            Some(PeriodicTask::start(s)?)
        }
        _ => None,
    };
    let adaptive = matches!(
        sp,
        SchedPolicy::DeadlineAdaptive | SchedPolicy::DeadlineReclaim
    );
    let observer = RowObserver::new(cfg.clients as usize, adaptive.then_some(cfg.controller))?;
    let helper = Helper {
        label: label.to_string(),
        observer,
        reclaim: sp == SchedPolicy::DeadlineReclaim,
        period_ns: cfg.period_ns(),
        trace,
    };
    let (rec_tx, rec_rx) = mpsc::channel::<CycleRecord>();
    let (tid_tx, tid_rx) = mpsc::channel::<Vec<libc::pid_t>>();
    let helper = std::thread::Builder::new()
        .name("xr-qctl".into())
        .spawn(move || helper.run(rec_rx, tid_rx))
        .map_err(|e| Error::cannot_measure(format!("cannot start the controller: {e}")))?;
    let on_threads = |tids: &[libc::pid_t]| {
        let _ = tid_tx.send(tids.to_vec());
    };
    let out = run_observed(
        rc,
        progress,
        Observe {
            on_threads: Some(&on_threads),
            tap: Some(rec_tx),
        },
    );
    // The tap closes when the collector has sent the last record, which ends the helper.
    let h = helper
        .join()
        .map_err(|_| Error::cannot_measure("the controller thread panicked"))?;
    let comp = competitor.map(|c| c.stop());
    let r = out?;
    if let Some(e) = h.trace_error {
        return Err(e);
    }
    let responses: Vec<u64> = comp
        .as_ref()
        .map(|c| c.trace.iter().map(|j| j.response_ns()).collect())
        .unwrap_or_default();
    let (compete_series, compete_stride) = decimate_max(&responses);
    let t = h.timing;
    let row = SchedRow {
        label: label.into(),
        policy: sp,
        engine_policy: rc.policy,
        compete_policy,
        status: r.status,
        unpinned: rc.unpinned,
        engine: r.results,
        driver_period: t.driver_period,
        end_time: t.end_time,
        end_time_series_ns: t.end_time_series_ns,
        series_stride: t.series_stride,
        clients: t.clients,
        q_series: t.q_series,
        q_updates: h.updates,
        q_errors: h.errors,
        q_first_error: h.first_error,
        bumps_xrun: t.bumps_xrun,
        bumps_client: t.bumps_client,
        thread_budgets_ns: h.budgets,
        compete_response_cdf: cdf(responses),
        compete_response_series_ns: compete_series,
        compete_series_stride: compete_stride,
        compete: comp.map(|c| c.stats),
    };
    Ok((row, h.trace))
}

/// The per-cycle CSV of `--trace`: one line per cycle of every row.
struct TraceCsv {
    /// Over a duplicate of `out`'s descriptor; `out` is renamed over the name at the end
    /// (docs/ARCHITECTURE.md §2 "Writing").
    w: csv::Writer<std::io::BufWriter<std::fs::File>>,
    out: crate::common::output::Output,
    path: String,
    clients: usize,
}

impl TraceCsv {
    fn create(path: &str, clients: usize) -> Result<Self> {
        let out = crate::common::output::Output::create(std::path::Path::new(path))?;
        let f = out
            .file()
            .try_clone()
            .map_err(|e| Error::io(format!("trace file {path}"), e))?;
        let mut t = TraceCsv {
            w: csv::Writer::from_writer(std::io::BufWriter::with_capacity(1 << 20, f)),
            out,
            path: path.into(),
            clients,
        };
        let mut h: Vec<String> = [
            "row",
            "cycle",
            "t_ns",
            "driver_period_ns",
            "end_time_ns",
            "cpu_ns",
            "xrun",
            "active_clients",
            "set_q_ns",
            "predicted_q_ns",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        h.extend((0..clients).map(|i| format!("client{i}_end_ns")));
        t.w.write_record(&h).map_err(|e| t.err(e))?;
        Ok(t)
    }

    fn err(&self, e: impl std::fmt::Display) -> Error {
        Error::io(
            format!("writing trace {}", self.path),
            std::io::Error::other(e.to_string()),
        )
    }

    fn write(&mut self, row: &str, t_ns: u64, r: &CycleRecord, q: Option<&QPoint>) -> Result<()> {
        let opt = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_default();
        let mut line = vec![
            row.to_string(),
            r.cycle.to_string(),
            t_ns.to_string(),
            r.driver_period_ns.to_string(),
            r.end_time_ns().to_string(),
            r.cpu_ns.to_string(),
            (r.xrun as u8).to_string(),
            r.active_clients.to_string(),
            opt(q.map(|q| q.set_q_ns)),
            opt(q.map(|q| q.predicted_q_ns)),
        ];
        let active = r.active_clients as usize;
        line.extend(
            (0..self.clients)
                .map(|i| opt((i < active.min(MAX_CLIENTS)).then(|| r.client_end_ns[i] as u64))),
        );
        self.w.write_record(&line).map_err(|e| self.err(e))
    }

    fn finish(mut self) -> Result<()> {
        self.w.flush().map_err(|e| self.err(e))?;
        let TraceCsv { w, out, .. } = self;
        drop(w);
        out.commit()
    }
}

/// The row's non-RT helper: folds every record and, on adaptive rows, applies the budget.
struct Helper {
    label: String,
    observer: RowObserver,
    reclaim: bool,
    period_ns: u64,
    trace: Option<TraceCsv>,
}

struct HelperOut {
    timing: RowTiming,
    updates: u64,
    errors: u64,
    first_error: Option<String>,
    budgets: Vec<u64>,
    trace: Option<TraceCsv>,
    trace_error: Option<Error>,
}

impl Helper {
    fn run(
        mut self,
        records: mpsc::Receiver<CycleRecord>,
        tids: mpsc::Receiver<Vec<libc::pid_t>>,
    ) -> HelperOut {
        use crate::rt::clock::thread_cpu_ns_of;
        let mut out = HelperOut {
            timing: RowTiming::default(),
            updates: 0,
            errors: 0,
            first_error: None,
            budgets: Vec::new(),
            trace: None,
            trace_error: None,
        };
        let mut engine_tids: Option<Vec<libc::pid_t>> = None;
        let mut applied = 0u64;
        let mut parts = Vec::new();
        let mut t0 = None;
        while let Ok(first) = records.recv() {
            // Drain what has arrived, then apply at most once: never more than once a cycle.
            let mut step = None;
            for r in std::iter::once(first).chain(records.try_iter()) {
                let s = self.observer.observe(&r);
                step = s.or(step);
                if let Some(t) = self.trace.as_mut() {
                    let t_ns = r.t_ideal_ns - *t0.get_or_insert(r.t_ideal_ns);
                    let q = s.map(|s| QPoint {
                        cycle: r.cycle,
                        t_ns,
                        set_q_ns: s.set_q_ns,
                        predicted_q_ns: s.predicted_q_ns,
                        cpu_ns: r.cpu_ns,
                        active_clients: r.active_clients as u32,
                    });
                    if let Err(e) = t.write(&self.label, t_ns, &r, q.as_ref()) {
                        out.trace_error = Some(e);
                        self.trace = None;
                    }
                }
            }
            if engine_tids.is_none() {
                engine_tids = tids.try_recv().ok();
            }
            let (Some(step), Some(tids)) = (step, &engine_tids) else {
                continue;
            };
            // Moves under 1 % are noise; a bump is 20 % by default.
            if step.set_q_ns.abs_diff(applied) * 100 <= applied {
                continue;
            }
            self.observer.split(step.set_q_ns, tids.len(), &mut parts);
            for (&tid, &part) in tids.iter().zip(&parts) {
                let pol = Policy::Deadline {
                    runtime_ns: part.min(self.period_ns),
                    deadline_ns: self.period_ns,
                    period_ns: self.period_ns,
                    reclaim: self.reclaim,
                };
                if let Err(e) = crate::rt::policy::set_policy(tid, &pol) {
                    if thread_cpu_ns_of(tid).is_none() {
                        // Exited between the record and the update: the run ended.
                        continue;
                    }
                    out.errors += 1;
                    out.first_error.get_or_insert_with(|| e.to_string());
                }
            }
            applied = step.set_q_ns;
            out.budgets.clone_from(&parts);
            out.updates += 1;
        }
        out.timing = self.observer.finish();
        out.trace = self.trace;
        out
    }
}

/// Name the row in an error, keeping its exit code.
fn in_row(e: Error, label: &str) -> Error {
    e.map_message(|m| format!("row '{label}': {m}"))
}
