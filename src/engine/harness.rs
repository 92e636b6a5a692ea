//! The real-time harness (docs/ARCHITECTURE.md §5): every measurement that runs cycles on a
//! device runs them here, so each gets the same guard. Start the device, wait for its
//! real-time thread, tell the caller the threads, start the watchdog (or stop and join the
//! device when it cannot start: never an unwatched real-time run), supervise (progress,
//! Ctrl-C, the watchdog firing), tear down, and return one outcome.

use super::watchdog::{CycleMonitor, Watchdog, WatchdogReport};
use crate::common::Status;
use crate::driver::{Device, DriverOutcome, Parts, RunSpec, Running, StopReason, RT_TID_WAIT};
use crate::driver::{RtHandler, RtSink, RtSource};
use crate::error::Result;
use crate::progress::Progress;
use crate::rt::Policy;
use std::time::Duration;

/// How long a thread that was merely slow gets to come back after the watchdog fired,
/// before it is abandoned.
const GRACE: Duration = Duration::from_millis(200);

/// What the harness guards and shows.
pub struct Harness<'a> {
    /// The policy of the real-time threads; the watchdog runs one step above it.
    pub policy: Policy,
    /// How long a cycle may run before the watchdog demotes the threads and stops the run.
    pub watchdog_bound_ns: u64,
    /// Where the watchdog reads the cycle in progress and the progress bar the cycles done:
    /// the engine's `EngineMonitor`, or a `CycleGauge` the handler keeps.
    pub monitor: std::sync::Arc<dyn CycleMonitor>,
    /// Real-time threads besides the device's (the engine's workers), watched with it.
    pub extra_tids: Vec<libc::pid_t>,
    pub progress: &'a dyn Progress,
    /// The progress bar's total, its unit and message, set once the watchdog runs.
    pub progress_total: u64,
    pub progress_unit: crate::progress::Unit,
    pub progress_message: &'a str,
}

/// The caller's part in a harnessed run. Both methods have defaults: a run that needs
/// nothing but progress implements neither.
pub trait Supervisor {
    /// The real-time threads exist (the device's first, then `Harness::extra_tids`); the
    /// watchdog starts right after this returns.
    fn on_threads(&mut self, _tids: &[libc::pid_t]) {}

    /// Called once while the device runs, under the watchdog. Return when `ended()` is true
    /// (the device stopped, the watchdog fired or SIGINT/SIGTERM arrived), or earlier to end the run: the harness
    /// then stops the device. The default shows the monitor's cycles as progress.
    fn supervise(&mut self, ended: &dyn Fn() -> bool, h: &Harness<'_>) {
        show_progress(ended, h)
    }
}

/// A supervisor that only shows progress.
pub struct Progressing;

impl Supervisor for Progressing {}

/// A supervisor that hands the threads to a callback (`measure::run::run_observed`'s observers).
pub struct OnThreads<'f>(pub &'f dyn Fn(&[libc::pid_t]));

impl Supervisor for OnThreads<'_> {
    fn on_threads(&mut self, tids: &[libc::pid_t]) {
        (self.0)(tids)
    }
}

/// Poll `ended` every 20 ms, moving the progress bar meanwhile.
pub fn show_progress(ended: &dyn Fn() -> bool, h: &Harness<'_>) {
    while !ended() {
        h.progress.set_position(h.monitor.cycles_done());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// How a harnessed run ended.
pub struct HarnessOutcome<T> {
    /// None when the device thread was stuck and abandoned after the watchdog fired.
    pub driver: Option<DriverOutcome<T>>,
    pub watchdog: Option<WatchdogReport>,
    /// The real-time threads: the device's first, then `Harness::extra_tids`.
    pub tids: Vec<libc::pid_t>,
    /// The device's warnings: what opening it said, then what its report says.
    pub warnings: Vec<String>,
    /// The timer slack of the device's thread when it runs the cycles under SCHED_OTHER
    /// (`Running::timer_slack_ns`).
    pub timer_slack_ns: Option<u64>,
    /// `server_shutdown` when the audio server went away, `watchdog` when it fired,
    /// `complete` when the device ran all its periods, else `interrupted` (a stop request,
    /// a signal, a device that gave up). Callers whose own stop means "done" refine it.
    pub status: Status,
}

impl<T> HarnessOutcome<T> {
    pub fn reason(&self) -> Option<StopReason> {
        self.driver.as_ref().map(|d| d.reason)
    }
}

/// Run `device` with `parts` under the harness `h` until it stops; see the module notes.
/// Errors: the device refused to start, the watchdog could not start (the device was
/// stopped and joined), or the device failed in its teardown.
pub fn run<D, H: RtHandler, I: RtSource, O: RtSink>(
    h: &Harness<'_>,
    device: D,
    parts: Parts<H, I, O>,
    spec: RunSpec,
    sup: &mut dyn Supervisor,
) -> Result<HarnessOutcome<Parts<H, I, O>>>
where
    D: Device,
{
    run_with(h, device, parts, spec, sup, |tids, stop| {
        Watchdog::start(
            h.monitor.clone(),
            tids.to_vec(),
            h.watchdog_bound_ns,
            &h.policy,
            stop,
        )
    })
}

fn run_with<D, H: RtHandler, I: RtSource, O: RtSink>(
    h: &Harness<'_>,
    device: D,
    parts: Parts<H, I, O>,
    spec: RunSpec,
    sup: &mut dyn Supervisor,
    start_watchdog: impl FnOnce(
        &[libc::pid_t],
        std::sync::Arc<std::sync::atomic::AtomicBool>,
    ) -> Result<Watchdog>,
) -> Result<HarnessOutcome<Parts<H, I, O>>>
where
    D: Device,
{
    let mut warnings = device.warnings();
    let stop = spec.stop.clone();
    let running = device.start(parts, spec)?;
    let mut tids = vec![running.wait_rt_tid(RT_TID_WAIT)];
    let timer_slack_ns = running.timer_slack_ns();
    tids.extend(&h.extra_tids);
    sup.on_threads(&tids);
    let watchdog = match start_watchdog(&tids, stop) {
        Ok(w) => w,
        Err(e) => {
            // Never leave an unwatched real-time run behind.
            running.stop();
            let _ = running.join();
            return Err(e);
        }
    };
    h.progress.set_unit(h.progress_unit);
    h.progress.set_total(h.progress_total);
    h.progress.set_message(h.progress_message);
    // Ctrl-C ends the supervision too: the device sees it on its own, a custom supervisor
    // (a trigger loop) need not.
    let ended =
        || running.is_finished() || watchdog.has_fired() || crate::rt::interrupt::requested();
    sup.supervise(&ended, h);
    if !watchdog.has_fired() {
        running.stop();
        // A cycle stuck in a plugin ignores the stop as it ignored its deadline: wait for the
        // device or the watchdog, so that Ctrl-C during a hung cycle still ends with the
        // watchdog's partial result instead of waiting in join for ever.
        while !running.is_finished() && !watchdog.has_fired() {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let driver = if watchdog.has_fired() {
        // The stuck thread is abandoned (see watchdog.rs); give a thread that was merely
        // slow a moment to come back.
        let t = std::time::Instant::now();
        while !running.is_finished() && t.elapsed() < GRACE {
            std::thread::sleep(Duration::from_millis(10));
        }
        finish(running)
    } else {
        Some(running.join())
    };
    let wd = watchdog.finish();
    let driver = driver.transpose()?;
    if let Some(d) = &driver {
        warnings.extend(d.report.warnings());
    }
    let status = match &driver {
        Some(d) if d.report.server_shutdown() => Status::ServerShutdown,
        _ if wd.is_some() => Status::Watchdog,
        Some(d) if d.reason == StopReason::Complete => Status::Complete,
        _ => Status::Interrupted,
    };
    Ok(HarnessOutcome {
        driver,
        watchdog: wd,
        tids,
        timer_slack_ns,
        warnings,
        status,
    })
}

/// Join a device that finished, abandon one that did not.
fn finish<T>(running: Running<T>) -> Option<Result<DriverOutcome<T>>> {
    if running.is_finished() {
        Some(running.join())
    } else {
        running.abandon();
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::cycle::CycleRecord;
    use crate::driver::signal::{ContinuitySink, Generator, SignalKind};
    use crate::driver::sim::{SimConfig, SimDriver};
    use crate::driver::CycleHandler;
    use crate::driver::{AudioIo, CycleTiming, DeviceParams, DriverReport};
    use crate::engine::{Engine, EngineSpec};
    use crate::rt::thread::ThreadSpec;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    const PARAMS: DeviceParams = DeviceParams {
        rate: 48_000,
        frames: 64,
        periods: 2,
    };

    fn spec(periods_total: u64) -> RunSpec {
        RunSpec {
            periods_total,
            stop: Arc::new(AtomicBool::new(false)),
            thread: ThreadSpec {
                name: "xr-test".into(),
                policy: Policy::Other { nice: 0 },
                cpus: Vec::new(),
            },
        }
    }

    fn engine() -> (Engine, crate::engine::EngineMonitor) {
        let s = EngineSpec {
            policy: Policy::Other { nice: 0 },
            block_when_full: false,
            ..EngineSpec::new(48_000, 64, 1, crate::dsp::parse_chain("thru").unwrap())
        };
        let (e, _consumer) = Engine::new(&s).unwrap();
        let m = e.monitor();
        (e, m)
    }

    /// A sim device that warns, as an ALSA device that accepted other parameters does.
    struct Warning(SimDriver);

    impl Device for Warning {
        fn kind(&self) -> crate::driver::DriverKind {
            crate::driver::DriverKind::Sim
        }
        fn params(&self) -> DeviceParams {
            self.0.params()
        }
        fn warnings(&self) -> Vec<String> {
            vec!["the device accepted something else".into()]
        }
        fn start<H: RtHandler, I: RtSource, O: RtSink>(
            self,
            parts: Parts<H, I, O>,
            run: RunSpec,
        ) -> Result<Running<Parts<H, I, O>>> {
            self.0.start(parts, run)
        }
    }

    /// Counts its cycles and flags whether it ever ran after the harness returned.
    struct Counting {
        cycles: u64,
    }

    impl CycleHandler for Counting {
        fn process_cycle(&mut self, _io: &mut AudioIo<'_>, t: &CycleTiming) -> CycleRecord {
            self.cycles += 1;
            CycleRecord {
                t_ideal_ns: t.t_ideal_ns,
                wake_ns: t.wake_ns,
                end_ns: t.wake_ns,
                deadline_ns: t.deadline_ns,
                ..CycleRecord::EMPTY
            }
        }
    }

    fn parts<H>(handler: H) -> Parts<H, Generator, ContinuitySink> {
        Parts {
            handler,
            source: Generator::new(SignalKind::Silence, 48_000, 1),
            sink: ContinuitySink::new(SignalKind::Silence, 48_000),
        }
    }

    fn harness(monitor: crate::engine::EngineMonitor) -> Harness<'static> {
        Harness {
            policy: Policy::Other { nice: 0 },
            watchdog_bound_ns: 1_000_000_000,
            monitor: Arc::new(monitor),
            extra_tids: Vec::new(),
            progress: &crate::progress::Silent,
            progress_total: 0,
            progress_unit: crate::progress::Unit::Items("cycles"),
            progress_message: "test",
        }
    }

    #[test]
    fn a_watchdog_that_cannot_start_stops_and_joins_the_device() {
        let (_engine, monitor) = engine();
        let h = harness(monitor);
        let dev = SimDriver::new(PARAMS, &SimConfig::default(), 1, 0);
        // Forever, unless the harness stops it: a run the harness left running would hang
        // the test in join.
        let run = spec(u64::MAX / 4);
        let stop = run.stop.clone();
        let mut seen = Vec::new();
        struct See<'a>(&'a mut Vec<libc::pid_t>);
        impl Supervisor for See<'_> {
            fn on_threads(&mut self, tids: &[libc::pid_t]) {
                self.0.extend_from_slice(tids);
            }
        }
        let r = run_with(
            &h,
            dev,
            parts(Counting { cycles: 0 }),
            run,
            &mut See(&mut seen),
            |_, _| Err(crate::error::Error::cannot_measure("no watchdog today")),
        );
        assert!(r.is_err());
        assert!(stop.load(Ordering::SeqCst), "the device was asked to stop");
        assert_eq!(seen.len(), 1, "the device's thread was announced first");
    }

    #[test]
    fn the_outcome_carries_the_device_warnings_and_the_handler() {
        let (_engine, monitor) = engine();
        let h = harness(monitor);
        let dev = Warning(SimDriver::new(PARAMS, &SimConfig::default(), 1, 0));
        let out = run(
            &h,
            dev,
            parts(Counting { cycles: 0 }),
            spec(100),
            &mut Progressing,
        )
        .unwrap();
        assert_eq!(out.status, Status::Complete);
        assert_eq!(out.warnings, ["the device accepted something else"]);
        let d = out.driver.unwrap();
        assert_eq!(d.report, DriverReport::None);
        assert_eq!(d.stats.cycles, 100);
        assert_eq!(d.parts.unwrap().handler.cycles, 100);
        assert!(out.watchdog.is_none());
    }

    /// A handler that is not the engine, stuck in one cycle: the watchdog it keeps a gauge
    /// for fires, and the harness abandons the thread after the grace.
    struct Stuck {
        gauge: crate::engine::watchdog::CycleGauge,
    }

    impl CycleHandler for Stuck {
        fn process_cycle(&mut self, _io: &mut AudioIo<'_>, t: &CycleTiming) -> CycleRecord {
            self.gauge.enter(crate::rt::clock::monotonic_ns());
            if t.cycle == 3 {
                std::thread::sleep(Duration::from_millis(1500));
            }
            self.gauge.leave();
            CycleRecord::EMPTY
        }
    }

    #[test]
    fn a_stuck_cycle_ends_with_the_watchdog_and_the_thread_abandoned() {
        let gauge = crate::engine::watchdog::CycleGauge::default();
        let h = Harness {
            watchdog_bound_ns: 100_000_000,
            monitor: Arc::new(gauge.clone()),
            ..harness(engine().1)
        };
        let dev = SimDriver::new(PARAMS, &SimConfig::default(), 1, 0);
        let out = run(
            &h,
            dev,
            parts(Stuck { gauge }),
            spec(1000),
            &mut Progressing,
        )
        .unwrap();
        assert_eq!(out.status, Status::Watchdog);
        assert!(out.driver.is_none(), "the stuck thread was abandoned");
        assert!(out.watchdog.unwrap().stuck_ns >= 100_000_000);
    }
}
