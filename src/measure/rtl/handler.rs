//! What every loop driver shares: the estimator as a device's cycle handler, the run of a
//! device loop under the real-time harness, and what a loop run hands back to
//! [`super::run`].

use super::{Estimator, RtlAlsa, RtlConfig, RtlJack};
use crate::common::Status;
use crate::driver::signal::{OutputSink, SinkStats};
use crate::driver::{Device, DriverReport, Parts, RunSpec};
use crate::driver::{RtSink, RtSource};
use crate::engine::harness::{self, Harness, Supervisor};
use crate::engine::watchdog::{bound_ns, CycleGauge, CycleMonitor, WatchdogReport};
use crate::error::Result;
use crate::progress::Progress;
use crate::rt::thread::ThreadSpec;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What a loop run hands back to [`super::run`].
pub(super) struct LoopRun {
    /// None when the handler went down with a dead server or a stuck cycle.
    pub est: Option<Estimator>,
    pub cycles: u64,
    pub xruns: u64,
    pub skipped: u64,
    pub status: Status,
    pub watchdog: Option<WatchdogReport>,
    /// The loop is our own virtual line (offline or on the virtual device): its delay is
    /// known, the measurement has a ground truth.
    pub ground_truth: bool,
    pub warnings: Vec<String>,
    pub jack: Option<RtlJack>,
    pub alsa: Option<RtlAlsa>,
}

impl LoopRun {
    /// An offline loop's end: everything ran, nothing else to say.
    pub(super) fn offline(est: Estimator, cycles: u64) -> Self {
        LoopRun {
            est: Some(est),
            cycles,
            xruns: 0,
            skipped: 0,
            status: Status::Complete,
            watchdog: None,
            ground_truth: true,
            warnings: Vec::new(),
            jack: None,
            alsa: None,
        }
    }
}

/// Our output goes to the loop, not to a recorder.
pub(super) struct NoSink;

impl OutputSink for NoSink {
    fn consume(&mut self, _: u64, _: &[f32], _: &[f32], _: bool) {}
    fn stats(&self) -> SinkStats {
        SinkStats::default()
    }
}

/// The estimator as the whole "graph" of a device cycle: every device loop runs this
/// handler.
pub(super) struct LoopHandler {
    pub(super) est: Estimator,
    frames: u64,
    /// A copy of the input: a server may hand out one buffer for a port and the port that
    /// feeds it, and the estimator reads and writes sample by sample.
    scratch: Vec<f32>,
    /// The run's stop flag: set once the estimate converged.
    stop: Arc<AtomicBool>,
    /// What the harness's watchdog and progress bar read.
    gauge: CycleGauge,
    pub(super) xruns: u64,
    pub(super) skipped: u64,
    /// A cycle past its deadline lost its output (virtual device, JACK). An ALSA device
    /// plays a late period if its buffer has not run dry, and reports the times it did as
    /// its own xruns: there only those disturb the loop (see `alsa`).
    late_loses_output: bool,
    /// `--hang-at-cycle`: this cycle never returns (to test the watchdog).
    hang_at: Option<u64>,
}

impl crate::driver::CycleHandler for LoopHandler {
    fn process_cycle(
        &mut self,
        io: &mut crate::driver::AudioIo<'_>,
        t: &crate::driver::CycleTiming,
    ) -> crate::common::cycle::CycleRecord {
        let wake = crate::rt::clock::monotonic_ns();
        self.gauge.enter(wake);
        if self.hang_at == Some(t.cycle) {
            hang();
        }
        // Once converged the handler only waits for the driver to stop: later cycles (and
        // their xruns) must not reach the result.
        let done = self.est.converged();
        let frame = t.cycle * self.frames;
        if done {
            io.out_l.fill(0.0);
        } else {
            let n = io.in_l.len().min(self.scratch.len());
            self.scratch[..n].copy_from_slice(&io.in_l[..n]);
            self.est
                .process(frame, &self.scratch[..n], &mut io.out_l[..n]);
        }
        io.out_r.copy_from_slice(io.out_l);
        let end = crate::rt::clock::monotonic_ns();
        let mut rec = crate::common::cycle::CycleRecord {
            cycle: t.cycle,
            t_ideal_ns: t.t_ideal_ns,
            release_ns: t.release_ns,
            wake_ns: wake,
            end_ns: end,
            deadline_ns: t.deadline_ns,
            ..crate::common::cycle::CycleRecord::EMPTY
        };
        crate::common::cycle::account(&mut rec);
        if t.skipped_before > 0 {
            self.skipped += t.skipped_before as u64;
            if !done {
                // Neither the skipped periods' input nor their output exists.
                let from = frame.saturating_sub(t.skipped_before as u64 * self.frames);
                self.est.disturb(from, frame);
            }
        }
        if rec.xrun {
            self.xruns += 1;
            if !done && self.late_loses_output {
                // This cycle's output missed the device.
                self.est.disturb(frame, frame + self.frames);
            }
        }
        if self.est.converged() {
            self.stop.store(true, Ordering::Relaxed);
        }
        self.gauge.leave();
        rec
    }
}

/// A cycle stuck for good, like a plugin in an endless loop (the engine's `hang`): spins
/// without returning, so only the watchdog ends the run.
fn hang() -> ! {
    let mut x = 1u64;
    loop {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
}

/// How a device loop is run: the estimator, whether a late cycle loses its output, and
/// what the progress bar says.
pub(super) struct LoopSpec<'a> {
    pub est: Estimator,
    pub late_loses_output: bool,
    pub message: &'a str,
}

/// What [`run_loop`] leaves: the harness's outcome, refined for convergence.
pub(super) struct Looped {
    /// The driver's own account (none when the stuck device was abandoned).
    pub report: DriverReport,
    /// None when the stuck handler was abandoned.
    pub handler: Option<LoopHandler>,
    pub cycles: u64,
    pub status: Status,
    pub watchdog: Option<WatchdogReport>,
    pub warnings: Vec<String>,
}

impl Looped {
    /// The counters and estimator every loop reports; the caller adds its driver's part.
    pub(super) fn into_run(self, warnings: Vec<String>) -> LoopRun {
        let (est, xruns, skipped) = match self.handler {
            Some(h) => (Some(h.est), h.xruns, h.skipped),
            None => (None, 0, 0),
        };
        let mut w = self.warnings;
        w.extend(warnings);
        LoopRun {
            est,
            cycles: self.cycles,
            xruns,
            skipped,
            status: self.status,
            watchdog: self.watchdog,
            ground_truth: false,
            warnings: w,
            jack: None,
            alsa: None,
        }
    }
}

/// Run the estimator on `device` under the real-time harness (docs/ARCHITECTURE.md §5):
/// its thread at `cfg.policy`, the watchdog on the handler's gauge, until converged, the
/// `cfg.duration_ns` elapsed, a signal, or the watchdog fired. A stop the handler asked for
/// (converged) ends the run as complete.
pub(super) fn run_loop<D: Device, I: RtSource, O: RtSink>(
    cfg: &RtlConfig,
    device: D,
    spec: LoopSpec<'_>,
    source: I,
    sink: O,
    progress: &dyn Progress,
    sup: &mut dyn Supervisor,
) -> Result<Looped> {
    let p = device.params();
    let periods_total = crate::common::frames_of_ns(cfg.duration_ns, p.rate)
        .div_ceil(p.frames as u64)
        .max(1);
    let stop = Arc::new(AtomicBool::new(false));
    let gauge = CycleGauge::default();
    let handler = LoopHandler {
        est: spec.est,
        frames: p.frames as u64,
        scratch: vec![0.0; p.frames as usize],
        stop: stop.clone(),
        gauge: gauge.clone(),
        xruns: 0,
        skipped: 0,
        late_loses_output: spec.late_loses_output,
        hang_at: cfg.hang_at_cycle,
    };
    let h = Harness {
        policy: cfg.policy,
        watchdog_bound_ns: bound_ns(cfg.watchdog_ns, p.period_ns())?,
        monitor: Arc::new(gauge.clone()),
        extra_tids: Vec::new(),
        progress,
        progress_total: periods_total,
        progress_unit: crate::progress::Unit::Periods {
            period_ns: p.period_ns(),
        },
        progress_message: spec.message,
    };
    let run = RunSpec {
        periods_total,
        stop,
        thread: ThreadSpec {
            name: "xr-rtl".into(),
            policy: cfg.policy,
            cpus: cfg.cpus.clone(),
        },
    };
    let parts = Parts {
        handler,
        source,
        sink,
    };
    let out = harness::run(&h, device, parts, run, sup)?;
    let (report, handler) = match out.driver {
        Some(d) => (d.report, d.parts.map(|p| p.handler)),
        None => (DriverReport::None, None),
    };
    // The handler stops the run once converged, with the flag a stop request uses: that
    // stop is the measurement's end.
    let status = match out.status {
        Status::Interrupted if handler.as_ref().is_some_and(|h| h.est.converged()) => {
            Status::Complete
        }
        s => s,
    };
    Ok(Looped {
        report,
        handler,
        cycles: gauge.cycles_done(),
        status,
        watchdog: out.watchdog,
        warnings: out.warnings,
    })
}
