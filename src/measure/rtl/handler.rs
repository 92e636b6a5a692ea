//! What every loop driver shares: the estimator as a device's cycle handler, the RT thread
//! a device loop runs on, and what a loop run hands back to [`super::run`].

use super::{Estimator, RtlAlsa, RtlJack};
use crate::driver::signal::{OutputSink, SinkStats};

/// What a loop run hands back to [`super::run`].
pub(super) struct LoopRun {
    /// None when the handler went down with a dead server.
    pub est: Option<Estimator>,
    pub cycles: u64,
    pub xruns: u64,
    pub skipped: u64,
    pub interrupted: bool,
    pub warnings: Vec<String>,
    pub jack: Option<RtlJack>,
    pub alsa: Option<RtlAlsa>,
}

/// Our output goes to the loop, not to a recorder.
pub(super) struct NoSink;

impl OutputSink for NoSink {
    fn consume(&mut self, _: u64, _: &[f32], _: &[f32], _: bool) {}
    fn stats(&self) -> SinkStats {
        SinkStats::default()
    }
}

/// The estimator as the whole "graph" of a device cycle: the virtual device's and JACK's
/// loops run this handler.
pub(super) struct LoopHandler {
    pub(super) est: Estimator,
    frames: u64,
    /// A copy of the input: a server may hand out one buffer for a port and the port that
    /// feeds it, and the estimator reads and writes sample by sample.
    scratch: Vec<f32>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    pub(super) cycles: std::sync::Arc<std::sync::atomic::AtomicU64>,
    pub(super) xruns: u64,
    pub(super) skipped: u64,
    /// A cycle past its deadline lost its output (virtual device, JACK). An ALSA device
    /// plays a late period if its buffer has not run dry, and reports the times it did as
    /// its own xruns: there only those disturb the loop (see `alsa`).
    pub(super) late_loses_output: bool,
}

impl LoopHandler {
    pub(super) fn new(
        est: Estimator,
        frames: u32,
        stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    ) -> Self {
        LoopHandler {
            est,
            frames: frames as u64,
            scratch: vec![0.0; frames as usize],
            stop,
            cycles: Default::default(),
            xruns: 0,
            skipped: 0,
            late_loses_output: true,
        }
    }
}

impl crate::driver::CycleHandler for LoopHandler {
    fn process_cycle(
        &mut self,
        io: &mut crate::driver::AudioIo<'_>,
        t: &crate::driver::CycleTiming,
    ) -> crate::common::cycle::CycleRecord {
        use std::sync::atomic::Ordering;
        let wake = crate::rt::clock::monotonic_ns();
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
        self.cycles.fetch_add(1, Ordering::Relaxed);
        if self.est.converged() {
            self.stop.store(true, Ordering::Relaxed);
        }
        rec
    }
}

/// Run a device loop on an RT thread (`policy`) and show its cycles as progress until it
/// ends: the virtual and ALSA loops.
pub(super) fn on_rt_thread<T: Send + 'static>(
    policy: crate::rt::Policy,
    message: &str,
    periods_total: u64,
    cycles: &std::sync::atomic::AtomicU64,
    progress: &dyn crate::progress::Progress,
    body: impl FnOnce() -> T + Send + 'static,
) -> crate::Result<T> {
    let th = crate::rt::thread::spawn_rt(
        crate::rt::thread::ThreadSpec {
            name: "xr-rtl".into(),
            policy,
            cpus: Vec::new(),
        },
        body,
    )?;
    progress.set_total(periods_total);
    progress.set_message(message);
    while !th.is_finished() {
        progress.set_position(cycles.load(std::sync::atomic::Ordering::Relaxed));
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Ok(th.join())
}
