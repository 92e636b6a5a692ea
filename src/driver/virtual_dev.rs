//! The `virtual` driver: a software codec whose period interrupt is an absolute
//! `clock_nanosleep` on CLOCK_MONOTONIC (cyclictest's method), so the device clock is exact
//! and never shifts with the engine (see `device.rs` for the semantics).

use super::signal::{InputSource, OutputSink};
use super::{AudioIo, CycleHandler, CycleTiming, DeviceClock, DeviceParams, DriverStats};
use super::{StopReason, TimeBase};
use crate::rt::clock::{monotonic_ns, sleep_until_ns};
use std::sync::atomic::{AtomicBool, Ordering};

/// Lead time before the first period, so thread start-up is not measured as latency.
pub const START_DELAY_NS: u64 = 20_000_000;

pub struct VirtualDriver {
    params: DeviceParams,
    periods_total: u64,
    in_l: Vec<f32>,
    in_r: Vec<f32>,
    out_l: Vec<f32>,
    out_r: Vec<f32>,
}

impl VirtualDriver {
    pub fn new(params: DeviceParams, periods_total: u64) -> Self {
        let f = params.frames as usize;
        VirtualDriver {
            params,
            periods_total,
            in_l: vec![0.0; f],
            in_r: vec![0.0; f],
            out_l: vec![0.0; f],
            out_r: vec![0.0; f],
        }
    }

    /// Run on the calling thread (which should be the engine's RT thread 0) until the
    /// device periods are done or `stop` / a signal asks to stop.
    fn run_loop(
        &mut self,
        h: &mut dyn CycleHandler,
        stop: &AtomicBool,
        source: &mut dyn InputSource,
        sink: &mut dyn OutputSink,
    ) -> (StopReason, DriverStats) {
        let mut clock = DeviceClock::new(self.params, monotonic_ns() + START_DELAY_NS);
        let frames = self.params.frames as u64;
        let reason = loop {
            let n = clock.next_cycle();
            if n.cycle >= self.periods_total {
                break StopReason::Complete;
            }
            if stop.load(Ordering::Relaxed) || crate::rt::interrupt::requested() {
                break StopReason::Stopped;
            }
            if monotonic_ns() < n.t_ideal_ns {
                sleep_until_ns(n.t_ideal_ns);
            }
            let wake = monotonic_ns();
            if wake < n.t_ideal_ns {
                // A signal cut the sleep short: re-check the stop request, never run early.
                continue;
            }
            let timing = CycleTiming {
                cycle: n.cycle,
                t_ideal_ns: n.t_ideal_ns,
                release_ns: n.release_ns,
                wake_ns: wake,
                deadline_ns: n.deadline_ns,
                prev_wake_ns: n.prev_wake_ns,
                skipped_before: n.skipped_before,
                time: TimeBase::Real,
            };
            source.fill(n.cycle * frames, &mut self.in_l, &mut self.in_r);
            let mut io = AudioIo {
                in_l: &self.in_l,
                in_r: &self.in_r,
                out_l: &mut self.out_l,
                out_r: &mut self.out_r,
            };
            let rec = h.process_cycle(&mut io, &timing);
            sink.consume(n.cycle * frames, &self.out_l, &self.out_r, !rec.xrun);
            clock.complete(rec.wake_ns, rec.end_ns, rec.xrun);
        };
        (
            reason,
            DriverStats {
                cycles: clock.cycles,
                skipped_periods: clock.totals_within(self.periods_total).0,
                xruns: clock.xruns,
                periods_elapsed: clock.totals_within(self.periods_total).1,
                sink: sink.stats(),
            },
        )
    }
}

impl super::Driver for VirtualDriver {
    fn run(
        &mut self,
        handler: &mut dyn CycleHandler,
        stop: &AtomicBool,
        source: &mut dyn InputSource,
        sink: &mut dyn OutputSink,
    ) -> (StopReason, DriverStats) {
        self.run_loop(handler, stop, source, sink)
    }
}
