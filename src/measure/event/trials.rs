//! The trials around any device: the trigger loop, the watchdog over the device thread,
//! pairing what the cycle reported with the trigger times, and the xruns that fell while
//! the trials ran.

use super::config::{EventConfig, EventTrial};
use super::gpio::GpioLine;
use super::handler::{Onset, Shared};
use super::trigger::TriggerKind;
use crate::engine::watchdog::{default_bound_ns, Watchdog};
use crate::error::{Error, Result};
use crate::progress::Progress;
use crate::rt::clock::monotonic_ns;
use crate::rt::Policy;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What the trigger loop hands back.
pub(super) struct TrialTimes {
    pub(super) te: Vec<(u64, u64)>,
    /// (cycles, xruns) counted from the first trigger until the last trial's silence.
    pub(super) window: (u64, u64),
    pub(super) ignored: u64,
    pub(super) interrupted: bool,
    pub(super) warnings: Vec<String>,
}

/// Trigger `trials` times: wait for the device to run, then per trial wait for a trigger,
/// publish it, and wait for its tone to be rendered and silence restored.
pub(super) fn trigger_loop(
    cfg: &EventConfig,
    gpio: Option<&GpioLine>,
    sh: &Shared,
    period_ns: u64,
    finished: &dyn Fn() -> bool,
    progress: &dyn Progress,
) -> Result<TrialTimes> {
    let mut out = TrialTimes {
        te: Vec::with_capacity(cfg.trials as usize),
        window: (0, 0),
        ignored: 0,
        interrupted: false,
        warnings: Vec::new(),
    };
    let mut source = super::trigger::Source::open(cfg.trigger, period_ns, cfg.seed)?;
    let stop = || crate::rt::interrupt::requested() || finished();
    let limit = Duration::from_nanos((200 * period_ns).max(3_000_000_000));
    let wait_for = |what: &dyn Fn() -> bool| -> bool {
        let t = std::time::Instant::now();
        while !what() {
            if stop() || t.elapsed() > limit {
                return false;
            }
            std::thread::sleep(Duration::from_micros(300));
        }
        true
    };
    // Let the device start and settle.
    if !wait_for(&|| sh.cycles.load(Ordering::Relaxed) >= 10) {
        out.interrupted = crate::rt::interrupt::requested();
        if !out.interrupted {
            return Err(Error::cannot_measure(
                "the audio device did not start cycling within 3 s",
            ));
        }
        return Ok(out);
    }
    if cfg.trigger != TriggerKind::Internal {
        // The user (or the device sending datagrams) has to know the run is ready.
        eprintln!(
            "xrunlab event: ready for {} triggers on {}",
            cfg.trials, cfg.trigger
        );
    }
    let counts = || {
        (
            sh.cycles.load(Ordering::Relaxed),
            sh.xruns.load(Ordering::Relaxed),
        )
    };
    let mut first: Option<(u64, u64)> = None;
    for i in 0..cfg.trials {
        out.ignored += source.drain();
        let Some(te) = source.wait(&stop) else {
            out.interrupted = crate::rt::interrupt::requested() || finished();
            if !out.interrupted {
                out.warnings.push(format!(
                    "the trigger source ended after {i} of {} trials",
                    cfg.trials
                ));
            }
            break;
        };
        if let Some(g) = gpio {
            g.set(true)?;
        }
        let seq = i as u64 + 1;
        first.get_or_insert_with(counts);
        sh.trigger_seq.store(seq, Ordering::Release);
        let published = monotonic_ns();
        out.te.push((te, published));
        let rendered = wait_for(&|| sh.rendered_seq.load(Ordering::Acquire) >= seq);
        if let Some(g) = gpio {
            g.set(false)?;
        }
        let silent = rendered && wait_for(&|| sh.silent_seq.load(Ordering::Acquire) >= seq);
        if !silent {
            out.interrupted = stop();
            if !out.interrupted {
                out.warnings.push(format!(
                    "trial {i}: the tone was not {} within {} s; stopped",
                    if rendered { "silenced" } else { "rendered" },
                    limit.as_secs()
                ));
            }
            break;
        }
        progress.set_position(seq);
    }
    if let Some(a) = first {
        let b = counts();
        out.window = (b.0 - a.0, b.1 - a.1);
    }
    Ok(out)
}

/// Put the device thread `th` (its real-time thread is `tids`) under the watchdog. If the
/// watchdog cannot start, no real-time run may go on unwatched: stop and `join` the thread.
pub(super) fn watch<T>(
    monitor: crate::engine::EngineMonitor,
    tids: Vec<libc::pid_t>,
    period_ns: u64,
    policy: &Policy,
    stop: &Arc<AtomicBool>,
    th: T,
    join: impl FnOnce(T),
) -> Result<(Watchdog, T)> {
    match Watchdog::start(
        monitor,
        tids,
        default_bound_ns(period_ns),
        policy,
        stop.clone(),
    ) {
        Ok(w) => Ok((w, th)),
        Err(e) => {
            stop.store(true, Ordering::SeqCst);
            join(th);
            Err(e)
        }
    }
}

/// Run the trials while the device thread `th` cycles under the watchdog; then stop the
/// thread and return the trial times, the watchdog's report and what the thread returned.
#[allow(clippy::too_many_arguments)]
pub(super) fn trials_on_device_thread<T>(
    cfg: &EventConfig,
    gpio: Option<&GpioLine>,
    sh: &Shared,
    period_ns: u64,
    progress: &dyn Progress,
    th: crate::rt::thread::RtThread<T>,
    monitor: crate::engine::EngineMonitor,
    stop: &Arc<AtomicBool>,
) -> Result<(
    TrialTimes,
    Option<crate::engine::watchdog::WatchdogReport>,
    T,
)> {
    let tids = vec![th.tid];
    let (watchdog, th) = watch(monitor, tids, period_ns, &cfg.policy, stop, th, |t| {
        let _ = t.join();
    })?;
    let finished = || th.is_finished() || watchdog.has_fired();
    let times = trigger_loop(cfg, gpio, sh, period_ns, &finished, progress);
    stop.store(true, Ordering::SeqCst);
    let wd = watchdog.finish();
    let out = th.join();
    Ok((times?, wd, out))
}

/// Pair what the cycle reported with the trigger times.
pub(super) fn trials_from(
    times: &[(u64, u64)],
    onsets: &[Onset],
    t_sound: &dyn Fn(&Onset) -> Option<u64>,
    device_frames: &dyn Fn(&Onset) -> Option<u64>,
) -> Vec<EventTrial> {
    onsets
        .iter()
        .filter_map(|o| {
            let &(te, published) = times.get((o.seq as usize).checked_sub(1)?)?;
            let ts = t_sound(o)?;
            Some(EventTrial {
                trial: o.seq as u32 - 1,
                te_ns: te,
                published_ns: published,
                cycle: o.cycle,
                t_ideal_ns: o.t_ideal_ns,
                seen_ns: o.seen_ns,
                prev_check_ns: o.prev_check_ns,
                onset_frame: o.onset_frame,
                t_sound_ns: ts,
                latency_ns: ts as i64 - te as i64,
                device_frame: device_frames(o),
                xrun: o.xrun,
            })
        })
        .collect()
}

/// The warning a run carries when the watchdog had to stop a stuck cycle.
pub(super) fn watchdog_warning(
    wd: Option<&crate::engine::watchdog::WatchdogReport>,
) -> Option<String> {
    wd.map(|w| {
        format!(
            "the watchdog stopped a cycle stuck for {} ms",
            w.stuck_ns / 1_000_000
        )
    })
}

/// How many of the xruns a server or device reported (at these CLOCK_MONOTONIC times) fell
/// while the trials ran: from the first trigger to two periods after the last tone sounded.
/// Activation and teardown cause their own, which are no trial's business.
pub(super) fn xruns_during_trials(
    te: &[(u64, u64)],
    trials: &[EventTrial],
    period_ns: u64,
    at: impl Iterator<Item = u64>,
) -> u64 {
    match te
        .first()
        .zip(trials.last())
        .map(|(f, t)| (f.0, t.t_sound_ns + 2 * period_ns))
    {
        Some((a, b)) => at.filter(|t| (a..=b).contains(t)).count() as u64,
        None => 0,
    }
}

pub(super) fn ns_of_frames(frames: u64, rate: u32) -> u64 {
    (frames as u128 * 1_000_000_000 / rate as u128) as u64
}
