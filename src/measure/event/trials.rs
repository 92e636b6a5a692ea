//! The trials around any device: the trigger loop as the real-time harness's supervisor
//! (the harness starts the device, guards it with the watchdog and tears it down), pairing what the cycle reported with the trigger times, and the xruns that fell while
//! the trials ran.

use super::config::{EventConfig, EventRun, EventTrial, LatencyStats, ModelBand};
use super::gpio::GpioLine;
use super::handler::{EventHandler, Onset, Shared};
use super::trigger::TriggerKind;
use super::Setting;
use crate::common::Status;
use crate::common::{ns_of_frames, DeviceParams};
use crate::driver::signal::{Generator, SignalKind};
use crate::driver::RtSink;
use crate::driver::{Device, DriverKind, DriverReport, DriverStats, Parts, RunSpec};
use crate::engine::harness::{self, Harness, Supervisor};
use crate::engine::watchdog::{default_bound_ns, CycleMonitor};
use crate::error::{Error, Result};
use crate::progress::Progress;
use crate::rt::clock::monotonic_ns;
use crate::rt::thread::ThreadSpec;
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
        // A device that ended (the watchdog fired, it gave up) leaves a partial result.
        out.interrupted = stop();
        if !out.interrupted {
            return Err(Error::cannot_measure(
                "the audio device did not start cycling within 3 s",
            ));
        }
        return Ok(out);
    }
    if cfg.trigger != TriggerKind::Internal {
        // The user (or the device sending datagrams) has to know the run is ready.
        progress.say(&format!(
            "xrunlab event: ready for {} triggers on {}",
            cfg.trials, cfg.trigger
        ));
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

/// The trigger loop as the harness's supervisor: the trials run while the device cycles
/// under the watchdog, and `look` runs once the device's threads exist and again when the
/// trials are done (JACK reads its port latency then).
struct TriggerLoop<'a> {
    cfg: &'a EventConfig,
    gpio: Option<&'a GpioLine>,
    sh: &'a Shared,
    period_ns: u64,
    look: &'a mut dyn FnMut(),
    times: Option<Result<TrialTimes>>,
    /// The device had stopped, the watchdog fired or a signal arrived by the time the
    /// trials ended: the run is not complete, even with every trial measured.
    ended: bool,
}

impl Supervisor for TriggerLoop<'_> {
    fn on_threads(&mut self, _tids: &[libc::pid_t]) {
        (self.look)();
    }

    fn supervise(&mut self, ended: &dyn Fn() -> bool, h: &Harness<'_>) {
        self.times = Some(trigger_loop(
            self.cfg,
            self.gpio,
            self.sh,
            self.period_ns,
            ended,
            h.progress,
        ));
        self.ended = ended();
        (self.look)();
    }
}

/// What a device left after its trials.
pub(super) struct DeviceRun<O> {
    pub(super) times: TrialTimes,
    pub(super) stats: DriverStats,
    pub(super) report: DriverReport,
    /// The output sink back from the device; None when its thread was stuck and abandoned.
    pub(super) sink: Option<O>,
    /// The device's warnings (opening, its report), the trials' and the watchdog's.
    pub(super) warnings: Vec<String>,
    pub(super) status: Status,
    /// The real-time threads (the device's first) and the xruns as forensic windows.
    pub(super) tids: Vec<i32>,
    pub(super) xrun_windows: Vec<crate::trace::Window>,
}

impl<O> DeviceRun<O> {
    /// The setting's record with what every driver fills alike. `queued_frames` is what the
    /// device holds ahead of a new period's first sample (periods queued, FIFO, converter):
    /// the output delay and the model band's fixed part; a runner overrides what its device
    /// knows better (ALSA's measured delay, JACK's port latency and server xruns).
    pub(super) fn event_run(
        &self,
        s: &Setting,
        device: (DriverKind, DeviceParams, Option<u32>),
        queued_frames: u64,
        trials: Vec<EventTrial>,
        warnings: Vec<String>,
    ) -> EventRun {
        let (driver, p, periods) = device;
        let onset_typ = trials.first().map(|t| t.onset_frame).unwrap_or(0) as u64;
        EventRun {
            driver,
            scenario: s.scenario,
            status: self.status,
            rate: p.rate,
            period_frames: p.frames,
            periods,
            grid_buffer_frames: s.grid_buffer,
            output_delay_frames: queued_frames,
            playback_latency_frames: None,
            playback_latency_port: None,
            model: ModelBand::new(
                p.period_ns() as f64,
                ns_of_frames(queued_frames + onset_typ, p.rate) as f64,
            ),
            latency: LatencyStats::in_time(&trials),
            trials,
            ignored_triggers: self.times.ignored,
            cycles: self.times.window.0,
            xruns: self.times.window.1,
            skipped_periods: self.stats.skipped_periods,
            server_xruns: None,
            device_t0_ns: None,
            background: None,
            jack: None,
            alsa: None,
            warnings,
            forensics: None,
            tids: self.tids.clone(),
            xrun_windows: self.xrun_windows.clone(),
        }
    }
}

/// Run the trials of setting `s` on `device` under the real-time harness: `handler` cycles
/// on the device into `sink` while the trigger loop runs; see [`TriggerLoop`] for `look`.
#[allow(clippy::too_many_arguments)]
pub(super) fn run_trials<D: Device, O: RtSink>(
    cfg: &EventConfig,
    s: &Setting,
    gpio: Option<&GpioLine>,
    progress: &dyn Progress,
    device: D,
    (handler, sh, monitor): (EventHandler, &Shared, impl CycleMonitor),
    sink: O,
    look: &mut dyn FnMut(),
) -> Result<DeviceRun<O>> {
    let p = device.params();
    let period_ns = p.period_ns();
    let label = s.label();
    let h = Harness {
        policy: cfg.policy,
        watchdog_bound_ns: default_bound_ns(period_ns),
        monitor: Arc::new(monitor),
        extra_tids: handler.worker_tids(),
        progress,
        progress_total: cfg.trials as u64,
        progress_unit: crate::progress::Unit::Items("trials"),
        progress_message: &label,
    };
    let parts = Parts {
        handler,
        source: Generator::new(SignalKind::Silence, p.rate, cfg.seed),
        sink,
    };
    let spec = RunSpec {
        // Until the trials are done: the supervisor's return stops the device.
        periods_total: u64::MAX / 4,
        stop: Arc::new(AtomicBool::new(false)),
        thread: ThreadSpec {
            name: format!("xr-ev-{}", device.kind()),
            policy: cfg.policy,
            cpus: cfg.cpus.clone(),
        },
    };
    let mut sup = TriggerLoop {
        cfg,
        gpio,
        sh,
        period_ns,
        look,
        times: None,
        ended: false,
    };
    let out = harness::run(&h, device, parts, spec, &mut sup)?;
    let times = sup
        .times
        .unwrap_or_else(|| Err(Error::cannot_measure("the trials did not run")))?;
    let status = match out.status {
        Status::ServerShutdown | Status::Watchdog => out.status,
        _ if times.interrupted || sup.ended => Status::Interrupted,
        _ => Status::Complete,
    };
    let mut warnings = out.warnings;
    warnings.extend(times.warnings.iter().cloned());
    warnings.extend(watchdog_warning(out.watchdog.as_ref()));
    let (stats, report, sink, xruns) = match out.driver {
        Some(d) => {
            let (sink, xruns) = match d.parts {
                Some(p) => (Some(p.sink), p.handler.xruns),
                None => (None, Vec::new()),
            };
            (d.stats, d.report, sink, xruns)
        }
        None => (DriverStats::default(), DriverReport::None, None, Vec::new()),
    };
    // The engine runs one track on the device's thread: that thread is every cycle's.
    let tid = out.tids.first().copied().unwrap_or(0);
    let xrun_windows = xruns
        .iter()
        .filter(|_| tid > 0)
        .map(|x| crate::trace::Window {
            id: x.cycle,
            tid,
            cpu: match cfg.cpus.as_slice() {
                [c] => Some(*c),
                _ => None,
            },
            t_ideal_ns: x.t_ideal_ns,
            wake_ns: x.wake_ns,
            end_ns: x.end_ns,
            own_cpu_ns: Some(x.crit_cpu_ns),
            shared_thread: false,
        })
        .collect();
    Ok(DeviceRun {
        times,
        stats,
        report,
        sink,
        warnings,
        status,
        tids: out.tids.clone(),
        xrun_windows,
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::signal::{OutputSink, SinkStats};
    use crate::driver::virtual_dev::VirtualDriver;
    use crate::driver::{DeviceParams, DriverKind};
    use crate::engine::watchdog::CycleGauge;
    use crate::measure::event::handler::build_handler;
    use crate::measure::event::Scenario;

    /// Stuck for 4 s in the device thread at `frame`, under the gauge the watchdog reads:
    /// far past the 1 s bound plus the harness's 200 ms grace, so a loaded host that polls
    /// the watchdog late still finds the thread stuck and abandons it.
    struct StallingSink {
        gauge: CycleGauge,
        frame: u64,
    }

    impl OutputSink for StallingSink {
        fn consume(&mut self, frame: u64, _: &[f32], _: &[f32], _: bool) {
            if frame == self.frame {
                self.gauge.enter(monotonic_ns());
                std::thread::sleep(Duration::from_secs(4));
                self.gauge.leave();
            }
        }
        fn stats(&self) -> SinkStats {
            SinkStats::default()
        }
    }

    #[test]
    fn a_stuck_cycle_ends_the_trials_with_the_watchdog_status_and_warning() {
        let mut cfg = EventConfig::new(DriverKind::Virtual);
        cfg.policy = crate::rt::Policy::Other { nice: 0 };
        cfg.trials = 1000;
        let s = Setting {
            driver: DriverKind::Virtual,
            scenario: Scenario::Mono,
            period_frames: Some(64),
            periods: 2,
            grid_buffer: None,
        };
        let params = DeviceParams {
            rate: cfg.rate,
            frames: 64,
            periods: 2,
        };
        let (handler, _rx, sh, _monitor) =
            build_handler(cfg.chain(s.scenario), cfg.rate, 64, cfg.policy).unwrap();
        let gauge = CycleGauge::default();
        let sink = StallingSink {
            gauge: gauge.clone(),
            frame: 64 * 40,
        };
        let done = run_trials(
            &cfg,
            &s,
            None,
            &crate::progress::Silent,
            VirtualDriver::new(params, 0),
            (handler, &sh, gauge),
            sink,
            &mut || {},
        )
        .unwrap();
        assert_eq!(done.status, Status::Watchdog);
        assert!(done.sink.is_none(), "the stuck thread was abandoned");
        assert!(done.times.te.len() < 1000, "the trials stopped early");
        assert!(
            done.warnings
                .iter()
                .any(|w| w.starts_with("the watchdog stopped a cycle stuck for")),
            "{:?}",
            done.warnings
        );
    }
}
