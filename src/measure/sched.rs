//! `xrunlab sched` (seed 003): the same audio graph under CFS, FIFO (above and below a competing
//! task), a fixed SCHED_DEADLINE reservation, an adaptive one (the `reservation` controller) and
//! an adaptive one with GRUB reclaiming, each against the same competing periodic task.
//!
//! The graph is one serial pipeline of M `burn` clients on one engine thread (JACK's pipeline of
//! seed 003). The adaptive rows are driven by a non-RT helper thread: once per period it reads
//! the engine threads' CPU clocks, feeds the controller and, when Set Q changed, applies it with
//! `sched_setattr` — the RT path never makes a syscall for it. With several engine threads each
//! is its own DEADLINE entity and the budget is split by each thread's measured CPU share.

use super::reservation::{split_budget, Controller, ControllerConfig};
use crate::engine::run::{run_observed, DriverKind, RunConfig, RunResults};
use crate::error::{Error, Result};
use crate::load::periodic::{reservation, PeriodicSpec, PeriodicStats, PeriodicTask};
use crate::progress::Progress;
use crate::results::Status;
use crate::rt::Policy;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};

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
    /// Share of a period each client burns, percent.
    pub client_pct: f64,
    /// Per row.
    pub duration_ns: u64,
    /// FIFO priority of the engine; the competitor runs at prio+5 and prio−5.
    pub prio: u32,
    /// Fixed DEADLINE runtime per engine thread (`deadline` row).
    pub budget_ns: u64,
    pub controller: ControllerConfig,
    /// The competing task (its policy is replaced per row).
    pub compete: Option<PeriodicSpec>,
}

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
    /// Set Q and Predicted Q, one point per controller step (decimated to ≤ 2000 points).
    pub q_series: Vec<QPoint>,
    pub q_updates: u64,
    /// sched_setattr calls that failed (e.g. admission), with the first error.
    pub q_errors: u64,
    pub q_first_error: Option<String>,
    pub compete: Option<PeriodicStats>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct QPoint {
    pub t_ns: u64,
    pub set_q_ns: u64,
    pub predicted_q_ns: u64,
    pub cpu_ns: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SchedResults {
    pub period_ns: u64,
    pub rows: Vec<SchedRow>,
}

#[derive(Debug, Clone)]
pub struct SchedResult {
    pub status: Status,
    pub config: SchedConfig,
    pub results: SchedResults,
    pub warnings: Vec<String>,
}

const Q_SERIES_MAX: usize = 2000;

impl SchedConfig {
    pub fn period_ns(&self) -> u64 {
        self.buffer_frames as u64 * 1_000_000_000 / self.rate as u64
    }

    pub fn validate(&self) -> Result<()> {
        if self.policies.is_empty() {
            return Err(Error::usage("--policies is empty"));
        }
        if !(1..=64).contains(&self.clients) {
            return Err(Error::usage("--clients must be 1..64"));
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
        let chain = format!("burn({}%):{}", self.client_pct, self.clients);
        let mut c = RunConfig::new(self.driver, &chain)?;
        c.rate = self.rate;
        c.buffer_frames = self.buffer_frames;
        c.tracks = 1;
        c.duration_ns = self.duration_ns;
        c.policy = policy;
        c.unpinned = unpinned;
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

/// Run every row in turn. Privilege or admission problems are errors naming the row.
pub fn run(cfg: &SchedConfig, progress: &dyn Progress) -> Result<SchedResult> {
    cfg.validate()?;
    let mut rows = Vec::new();
    let mut warnings = Vec::new();
    let mut status = Status::Complete;
    for (label, sp, engine_policy, compete_policy) in cfg.rows() {
        if crate::rt::interrupt::requested() {
            status = Status::Interrupted;
            break;
        }
        progress.set_message(&label);
        let is_dl = matches!(engine_policy, Policy::Deadline { .. });
        let rc = cfg.run_config(engine_policy, is_dl)?;
        let row = run_row(cfg, &rc, &label, sp, compete_policy, progress)
            .map_err(|e| in_row(e, &label))?;
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
    Ok(SchedResult {
        status,
        config: cfg.clone(),
        results: SchedResults {
            period_ns: cfg.period_ns(),
            rows,
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
    progress: &dyn Progress,
) -> Result<SchedRow> {
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
    let reclaim = sp == SchedPolicy::DeadlineReclaim;
    let (tx, rx) = mpsc::channel::<Vec<libc::pid_t>>();
    let stop = Arc::new(AtomicBool::new(false));
    let helper = if adaptive {
        let ccfg = cfg.controller;
        let stop2 = stop.clone();
        Some(
            std::thread::Builder::new()
                .name("xr-qctl".into())
                .spawn(move || controller_loop(ccfg, reclaim, rx, stop2))
                .map_err(|e| Error::cannot_measure(format!("cannot start the controller: {e}")))?,
        )
    } else {
        None
    };
    let out = run_observed(rc, progress, &|tids| {
        let _ = tx.send(tids.to_vec());
    });
    stop.store(true, Ordering::Release);
    drop(tx);
    let q = helper.map(|h| h.join().unwrap_or_default());
    let comp = competitor.map(|c| c.stop());
    let r = out?;
    let q = q.unwrap_or_default();
    Ok(SchedRow {
        label: label.into(),
        policy: sp,
        engine_policy: rc.policy,
        compete_policy,
        status: r.status,
        unpinned: rc.unpinned,
        engine: r.results,
        q_series: q.series,
        q_updates: q.updates,
        q_errors: q.errors,
        q_first_error: q.first_error,
        compete: comp.map(|c| c.stats),
    })
}

#[derive(Debug, Default)]
struct QLog {
    series: Vec<QPoint>,
    updates: u64,
    errors: u64,
    first_error: Option<String>,
}

/// The non-RT helper: one controller step per period from the engine threads' CPU clocks,
/// `sched_setattr` only when Set Q moved by more than 1 %.
fn controller_loop(
    ccfg: ControllerConfig,
    reclaim: bool,
    rx: mpsc::Receiver<Vec<libc::pid_t>>,
    stop: Arc<AtomicBool>,
) -> QLog {
    use crate::rt::clock::{monotonic_ns, sleep_until_ns, thread_cpu_ns_of};
    let mut log = QLog::default();
    let Ok(tids) = rx.recv() else { return log };
    let Ok(mut ctl) = Controller::new(ccfg) else {
        return log;
    };
    let n = tids.len();
    let mut last_cpu: Vec<u64> = tids
        .iter()
        .map(|&t| thread_cpu_ns_of(t).unwrap_or(0))
        .collect();
    // Shares accumulate over the run so one noisy period does not swing the split.
    let mut share = vec![0u64; n];
    let mut delta = vec![0u64; n];
    let mut parts = vec![0u64; n];
    let mut applied = 0u64;
    let mut raw = Vec::new();
    let p = ccfg.period_ns;
    let t0 = monotonic_ns();
    let mut next = t0 + p;
    while !stop.load(Ordering::Acquire) {
        sleep_until_ns(next);
        next += p;
        let now = monotonic_ns();
        if now > next {
            // Fell behind (we are SCHED_OTHER): skip the missed steps rather than replay them.
            next = now + p;
        }
        let mut total = 0;
        let mut gone = false;
        for i in 0..n {
            // A thread without a CPU clock has exited: the run is over.
            let Some(c) = thread_cpu_ns_of(tids[i]) else {
                gone = true;
                break;
            };
            delta[i] = c.saturating_sub(last_cpu[i]);
            last_cpu[i] = c;
            share[i] += delta[i];
            total += delta[i];
        }
        if gone {
            break;
        }
        let step = ctl.observe(total, false);
        raw.push(QPoint {
            t_ns: now - t0,
            set_q_ns: step.set_q_ns,
            predicted_q_ns: step.predicted_q_ns,
            cpu_ns: total,
        });
        if applied == 0 || step.set_q_ns.abs_diff(applied) * 100 > applied {
            split_budget(step.set_q_ns, &share, &mut parts);
            for i in 0..n {
                let pol = Policy::Deadline {
                    runtime_ns: parts[i].min(p),
                    deadline_ns: p,
                    period_ns: p,
                    reclaim,
                };
                if let Err(e) = crate::rt::policy::set_policy(tids[i], &pol) {
                    if thread_cpu_ns_of(tids[i]).is_none() {
                        // Exited between the read and the update: the run ended.
                        continue;
                    }
                    log.errors += 1;
                    if log.first_error.is_none() {
                        log.first_error = Some(e.to_string());
                    }
                }
            }
            applied = step.set_q_ns;
            log.updates += 1;
        }
    }
    let stride = raw.len().div_ceil(Q_SERIES_MAX).max(1);
    log.series = raw.into_iter().step_by(stride).collect();
    log
}

/// Name the row in an error, keeping its exit code.
fn in_row(e: Error, label: &str) -> Error {
    match e {
        Error::Usage(m) => Error::Usage(format!("row '{label}': {m}")),
        Error::CannotMeasure(m) => Error::CannotMeasure(format!("row '{label}': {m}")),
        Error::Aborted(m) => Error::Aborted(format!("row '{label}': {m}")),
        other => other,
    }
}
