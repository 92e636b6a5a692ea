//! The watchdog (docs/ARCHITECTURE.md §5): xrunlab must never lock up the machine it measures.
//!
//! A thread one priority above the engine polls the engine's "cycle entered at" stamp. If a
//! cycle has not ended within the bound it demotes every engine thread to SCHED_OTHER, asks
//! the run to stop and reports what it did. A thread stuck inside a plugin cannot be killed
//! safely in-process, so it is abandoned: the run returns a partial result with status
//! `watchdog`, and the CLI exits right after writing it, which ends the stuck thread too.
//!
//! SCHED_DEADLINE outranks every FIFO priority, so a FIFO 99 watchdog cannot preempt a
//! runaway DEADLINE engine thread. It does not need to: the kernel bounds a DEADLINE thread by
//! its own reservation. Without reclaim it is throttled once it has used its runtime Q in a
//! period; with SCHED_FLAG_RECLAIM (GRUB) it may use idle bandwidth but never more than
//! sched_rt_runtime_us / sched_rt_period_us (95 %) of a CPU; and admission keeps the sum of
//! all DEADLINE bandwidth under 95 % of the root domain's CPUs, so a runtime = period thread
//! (admitted on a machine with several CPUs) leaves the other CPUs to the unpinned watchdog.
//! Either way the watchdog gets CPU time every period, sees the stuck cycle and demotes the
//! thread with sched_setattr from outside. Running the watchdog itself as DEADLINE would add a
//! reservation to admission control and buy nothing. `tests/watchdog.rs` checks it with a
//! `hang` plugin under DEADLINE (runtime = period, with reclaim).

use super::EngineMonitor;
use crate::error::Result;
use crate::rt::clock::monotonic_ns;
use crate::rt::thread::{spawn_rt, RtThread, ThreadSpec};
use crate::rt::Policy;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What the watchdog and the progress bar read of a running cycle handler. The engine's
/// [`EngineMonitor`] is one; a handler that is not the engine keeps a [`CycleGauge`].
pub trait CycleMonitor: Send + Sync + 'static {
    /// CLOCK_MONOTONIC time the cycle in progress entered the handler, None between cycles.
    fn cycle_entered_ns(&self) -> Option<u64>;
    fn cycles_done(&self) -> u64;
}

impl CycleMonitor for EngineMonitor {
    fn cycle_entered_ns(&self) -> Option<u64> {
        EngineMonitor::cycle_entered_ns(self)
    }
    fn cycles_done(&self) -> u64 {
        EngineMonitor::cycles_done(self)
    }
}

/// A bench (`measure::plugin_bench`) is watched per plugin call, not per block: see `BenchGauge`.
impl CycleMonitor for crate::dsp::plugin_cost::BenchGauge {
    fn cycle_entered_ns(&self) -> Option<u64> {
        self.stalled_since_ns()
    }
    fn cycles_done(&self) -> u64 {
        self.calls()
    }
}

impl<T: CycleMonitor + ?Sized> CycleMonitor for Arc<T> {
    fn cycle_entered_ns(&self) -> Option<u64> {
        (**self).cycle_entered_ns()
    }
    fn cycles_done(&self) -> u64 {
        (**self).cycles_done()
    }
}

/// A [`CycleMonitor`] for a handler that is not the engine: it calls [`CycleGauge::enter`]
/// first thing in its cycle and [`CycleGauge::leave`] last (two atomic stores each, no
/// allocation: real-time safe).
#[derive(Clone, Default)]
pub struct CycleGauge(Arc<Gauge>);

#[derive(Default)]
struct Gauge {
    entered_ns: std::sync::atomic::AtomicU64,
    done: std::sync::atomic::AtomicU64,
}

impl CycleGauge {
    pub fn enter(&self, now_ns: u64) {
        self.0.entered_ns.store(now_ns.max(1), Ordering::Release);
    }
    pub fn leave(&self) {
        self.0.done.fetch_add(1, Ordering::Relaxed);
        self.0.entered_ns.store(0, Ordering::Release);
    }
}

impl CycleMonitor for CycleGauge {
    fn cycle_entered_ns(&self) -> Option<u64> {
        match self.0.entered_ns.load(Ordering::Acquire) {
            0 => None,
            t => Some(t),
        }
    }
    fn cycles_done(&self) -> u64 {
        self.0.done.load(Ordering::Relaxed)
    }
}

/// Default bound: max(1 s, 100 periods).
pub fn default_bound_ns(period_ns: u64) -> u64 {
    (100 * period_ns).max(1_000_000_000)
}

/// The bound for a device of `period_ns`: `asked` (`--watchdog`), else the default. A bound
/// below one period would stop every healthy run at its first cycle: a usage error, given
/// before the device runs (the period is known only once the device is negotiated).
pub fn bound_ns(asked: Option<u64>, period_ns: u64) -> crate::error::Result<u64> {
    match asked {
        None => Ok(default_bound_ns(period_ns)),
        Some(b) if b < period_ns => Err(crate::error::Error::usage(format!(
            "--watchdog {}: below one period ({}), so every cycle would trip it",
            crate::units::format_ns(b),
            crate::units::format_ns(period_ns)
        ))),
        Some(b) => Ok(b),
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DemotedThread {
    pub tid: i32,
    /// The policy the kernel reports after demotion ("other" when it worked).
    pub policy_after: String,
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WatchdogReport {
    pub bound_ns: u64,
    /// How long the stuck cycle had been running when the watchdog acted.
    pub stuck_ns: u64,
    pub demoted: Vec<DemotedThread>,
}

/// The policy one step above the engine's, so the watchdog can always run (for a DEADLINE
/// engine FIFO 99 runs whenever the reservation is throttled: see the module notes).
pub fn watchdog_policy(engine: &Policy) -> Policy {
    match *engine {
        Policy::Fifo { priority } | Policy::Rr { priority } => Policy::fifo((priority + 1).min(99)),
        Policy::Deadline { .. } => Policy::fifo(99),
        Policy::Other { .. } => Policy::Other { nice: -5 },
    }
}

pub struct Watchdog {
    thread: Option<RtThread<Option<WatchdogReport>>>,
    done: Arc<AtomicBool>,
    pub fired: Arc<AtomicBool>,
}

impl Watchdog {
    /// Start watching. `stop` is set when the watchdog fires.
    pub fn start(
        monitor: impl CycleMonitor,
        tids: Vec<libc::pid_t>,
        bound_ns: u64,
        engine_policy: &Policy,
        stop: Arc<AtomicBool>,
    ) -> Result<Watchdog> {
        let done = Arc::new(AtomicBool::new(false));
        let fired = Arc::new(AtomicBool::new(false));
        let (d, f) = (done.clone(), fired.clone());
        let poll_ns = (bound_ns / 20).clamp(1_000_000, 50_000_000);
        let mut policy = watchdog_policy(engine_policy);
        // A negative nice needs privilege; an unprivileged OTHER run gets a plain watchdog.
        // SAFETY: geteuid takes no arguments, cannot fail and touches no memory of ours.
        if matches!(policy, Policy::Other { .. }) && unsafe { libc::geteuid() } != 0 {
            policy = Policy::Other { nice: 0 };
        }
        let thread = spawn_rt(
            ThreadSpec {
                name: "xr-watchdog".into(),
                policy,
                cpus: Vec::new(),
            },
            move || loop {
                if d.load(Ordering::Acquire) {
                    return None;
                }
                std::thread::sleep(std::time::Duration::from_nanos(poll_ns));
                let Some(entered) = monitor.cycle_entered_ns() else {
                    continue;
                };
                let stuck = monotonic_ns().saturating_sub(entered);
                if stuck <= bound_ns {
                    continue;
                }
                let demoted = tids
                    .iter()
                    .map(|&tid| {
                        let r = crate::rt::thread::demote(tid);
                        DemotedThread {
                            tid,
                            policy_after: crate::rt::policy::get_policy(tid)
                                .map(|p| p.to_string())
                                .unwrap_or_else(|e| format!("unknown ({e})")),
                            error: r.err().map(|e| e.to_string()),
                        }
                    })
                    .collect();
                stop.store(true, Ordering::SeqCst);
                f.store(true, Ordering::SeqCst);
                return Some(WatchdogReport {
                    bound_ns,
                    stuck_ns: stuck,
                    demoted,
                });
            },
        )?;
        Ok(Watchdog {
            thread: Some(thread),
            done,
            fired,
        })
    }

    pub fn has_fired(&self) -> bool {
        self.fired.load(Ordering::SeqCst)
    }

    /// Stop watching and return the report if it fired.
    pub fn finish(mut self) -> Option<WatchdogReport> {
        self.done.store(true, Ordering::Release);
        self.thread.take().and_then(|t| t.join())
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
