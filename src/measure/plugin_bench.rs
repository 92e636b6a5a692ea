//! `plugins bench` under the watchdog (docs/methods.md "Plugin cost", §5): the runs
//! go on a thread of their own, watched as an engine is, so that a plugin that never returns
//! ends the bench with the runs finished before it instead of hanging, and a Ctrl-C is
//! answered even while a plugin holds the thread.
//!
//! - The watchdog (`engine::watchdog`, the bound of `run`: max(1 s, 100 periods)) reads the
//!   bench's [`BenchGauge`]: it fires when no plugin call has returned for the bound while the
//!   bench processes. The stuck thread cannot be killed in-process: it is abandoned, the
//!   status is `watchdog`, and the CLI exits 3 once the result is written.
//! - A Ctrl-C stops the bench at its next check (between blocks, between instances of a long
//!   set-up). A thread that has not come back [`STUCK_AFTER_INTERRUPT`] later is inside a
//!   plugin (instantiating, which is not watched, or processing before the watchdog's bound):
//!   it is abandoned and the result is `interrupted`.

use crate::common::Status;
use crate::dsp::plugin_cost::{bench_element_watched, BenchGauge, BenchResult, Signal};
use crate::dsp::{ChainElement, PluginContext};
use crate::engine::watchdog::{default_bound_ns, Watchdog, WatchdogReport};
use crate::error::{Error, Result};
use crate::rt::Policy;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a Ctrl-C waits for the bench thread before abandoning it.
pub const STUCK_AFTER_INTERRUPT: Duration = Duration::from_secs(1);

/// What a watched bench measured.
pub struct BenchRuns {
    /// The runs that finished, in order.
    pub results: Vec<BenchResult>,
    /// Runs that failed (only when the bench was asked to go on after a failure).
    pub failed: Vec<(ChainElement, Error)>,
    /// `complete`, `interrupted` (a signal) or `watchdog`.
    pub status: Status,
    pub watchdog: Option<WatchdogReport>,
    /// Why the bench ended early, for the result's warnings and stderr; None when it did not
    /// or when the thread came back from a Ctrl-C by itself.
    pub stopped: Option<String>,
    /// The thread was left inside a plugin: the process must exit without waiting for it.
    pub abandoned: bool,
}

enum Msg {
    Started(usize),
    Done(usize, Box<Result<BenchResult>>),
}

/// Benchmark each of `runs` in turn, as `dsp::plugin_cost::bench_element_on` does, on a thread
/// watched by the watchdog. With `stop_at_error` the first failing run ends the bench with its
/// error; otherwise failures are collected and the bench goes on.
pub fn bench_runs(
    runs: &[ChainElement],
    ctx: &PluginContext,
    duration_ns: u64,
    signal: Signal,
    stop_at_error: bool,
    progress: &dyn crate::progress::Progress,
) -> Result<BenchRuns> {
    progress.set_unit(crate::progress::Unit::Items("runs"));
    progress.set_total(runs.len() as u64);
    let gauge = BenchGauge::default();
    let (tx, rx) = mpsc::channel::<Msg>();
    let (tid_tx, tid_rx) = mpsc::sync_channel::<libc::pid_t>(1);
    let (go_tx, go_rx) = mpsc::sync_channel::<bool>(1);
    let thread = {
        let (gauge, runs, ctx) = (gauge.clone(), runs.to_vec(), *ctx);
        std::thread::Builder::new()
            .name("xr-bench".into())
            .spawn(move || {
                let _ = tid_tx.send(crate::rt::clock::gettid());
                // Not one plugin call before the watchdog watches.
                if !go_rx.recv().unwrap_or(false) {
                    return;
                }
                for (i, e) in runs.iter().enumerate() {
                    if crate::rt::interrupt::requested()
                        || gauge.stop_flag().load(std::sync::atomic::Ordering::Relaxed)
                    {
                        break;
                    }
                    let _ = tx.send(Msg::Started(i));
                    let r = bench_element_watched(e, &ctx, duration_ns, signal, &gauge);
                    let failed = r.is_err();
                    if tx.send(Msg::Done(i, Box::new(r))).is_err() || (failed && stop_at_error) {
                        break;
                    }
                }
            })
            .map_err(|e| Error::io("starting the bench thread", e))?
    };
    let tid = tid_rx
        .recv()
        .map_err(|_| Error::cannot_measure("the bench thread died before it started"))?;
    let bound_ns = default_bound_ns(ctx.period_ns());
    let watchdog = match Watchdog::start(
        gauge.clone(),
        vec![tid],
        bound_ns,
        &Policy::Other { nice: 0 },
        gauge.stop_flag(),
    ) {
        Ok(w) => w,
        Err(e) => {
            // Never an unwatched bench.
            let _ = go_tx.send(false);
            let _ = thread.join();
            return Err(e);
        }
    };
    let _ = go_tx.send(true);

    let mut results = Vec::new();
    let mut failed = Vec::new();
    let mut current: Option<usize> = None;
    let mut interrupted_at: Option<Instant> = None;
    let mut abandoned = false;
    loop {
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(Msg::Started(i)) => {
                current = Some(i);
                progress.set_position(i as u64);
                progress.set_message(&runs[i].plugin);
            }
            Ok(Msg::Done(i, r)) => {
                current = None;
                match *r {
                    Ok(r) => results.push(r),
                    // A run cut short by the stop is no failure of its plugin.
                    Err(_) if crate::rt::interrupt::requested() || watchdog.has_fired() => {}
                    Err(e) => failed.push((runs[i].clone(), e)),
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            // The thread ended.
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        if watchdog.has_fired() {
            abandoned = true;
            break;
        }
        if crate::rt::interrupt::requested()
            && interrupted_at.get_or_insert_with(Instant::now).elapsed() > STUCK_AFTER_INTERRUPT
        {
            abandoned = true;
            break;
        }
    }
    progress.finish();
    let report = watchdog.finish();
    if !abandoned {
        let _ = thread.join();
    }
    // else: the thread is left to the process's exit (dropping the handle detaches it).
    let what = current.map(|i| runs[i].to_string()).unwrap_or_default();
    let (status, stopped) = if let Some(r) = &report {
        (
            Status::Watchdog,
            Some(format!(
                "watchdog: no plugin call of '{what}' returned for {} (bound {}): the thread was abandoned inside the plugin",
                crate::units::format_ns(r.stuck_ns),
                crate::units::format_ns(r.bound_ns)
            )),
        )
    } else if crate::rt::interrupt::requested() {
        (
            Status::Interrupted,
            abandoned.then(|| {
                format!(
                    "interrupted while '{what}' held the bench thread; it did not come back within {} s and was abandoned",
                    STUCK_AFTER_INTERRUPT.as_secs()
                )
            }),
        )
    } else {
        (Status::Complete, None)
    };
    if stop_at_error && status == Status::Complete {
        if let Some((_, e)) = failed.into_iter().next() {
            return Err(e);
        }
        failed = Vec::new();
    }
    Ok(BenchRuns {
        results,
        failed,
        status,
        watchdog: report,
        stopped,
        abandoned,
    })
}
