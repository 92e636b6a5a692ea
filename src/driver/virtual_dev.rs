//! The `virtual` driver: a software codec whose period interrupt is an absolute
//! `clock_nanosleep` on CLOCK_MONOTONIC (cyclictest's method), so the device clock is exact
//! and never shifts with the engine (see `device.rs` for the semantics).

use super::device::PeriodBuffers;
use super::signal::{InputSource, OutputSink};
use super::{CycleHandler, DeviceClock, DeviceParams, DriverStats, StopReason, TimeBase};
use crate::rt::clock::{monotonic_ns, sleep_until_ns};
use std::sync::atomic::{AtomicBool, Ordering};

/// Lead time before the first period, so thread start-up is not measured as latency.
pub const START_DELAY_NS: u64 = 20_000_000;

pub struct VirtualDriver {
    params: DeviceParams,
    periods_total: u64,
    buffers: PeriodBuffers,
}

impl VirtualDriver {
    pub fn new(params: DeviceParams, periods_total: u64) -> Self {
        VirtualDriver {
            params,
            periods_total,
            buffers: PeriodBuffers::new(params.frames),
        }
    }
}

impl super::LoopDriver for VirtualDriver {
    fn kind(&self) -> super::DriverKind {
        super::DriverKind::Virtual
    }

    fn params(&self) -> DeviceParams {
        self.params
    }

    fn set_periods_total(&mut self, periods_total: u64) {
        self.periods_total = periods_total;
    }

    /// Run on the calling thread (which should be the engine's RT thread 0) until the
    /// device periods are done or `stop` / a signal asks to stop.
    fn run(
        &mut self,
        h: &mut dyn CycleHandler,
        stop: &AtomicBool,
        source: &mut dyn InputSource,
        sink: &mut dyn OutputSink,
    ) -> (StopReason, DriverStats) {
        let mut clock = DeviceClock::new(self.params, monotonic_ns() + START_DELAY_NS);
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
            let timing = n.timing(wake, TimeBase::Real);
            self.buffers.process(&mut clock, &timing, h, source, sink);
        };
        (reason, clock.stats(self.periods_total, sink))
    }
}
