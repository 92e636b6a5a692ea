//! What paces the audio cycles (docs/ARCHITECTURE.md §2 `driver/`).
//!
//! The contract is inverted the way audio servers work: a driver owns the loop (or, for
//! JACK, the server owns it and calls a process callback) and calls
//! [`CycleHandler::process_cycle`] once per period with the period's audio buffers and its
//! [`CycleTiming`]. The engine implements `CycleHandler` and never learns which driver
//! called it; a driver never learns what the handler runs.
//!
//! Every driver, JACK included, is opened, started and joined the same way: see
//! [`contract`] ([`Device`], [`Running`], [`DriverOutcome`]); [`DriverKind`] says which
//! driver a run uses and what that implies. The loop drivers (virtual, sim, alsa) also
//! implement [`Driver`], the loop their device thread runs.
//!
//! The device semantics shared by `virtual` and `sim` live in [`DeviceClock`].

pub mod alsa;
pub mod contract;
pub mod device;
pub mod jack;
pub mod kind;
pub mod pipewire;
pub mod signal;
pub mod sim;
pub mod virtual_dev;

pub use contract::{
    AnyDevice, Device, DriverOptions, DriverOutcome, DriverReport, Parts, RtHandler, RtSink,
    RtSource, RunSpec, Running, RT_TID_WAIT,
};
pub use device::DeviceClock;
pub use kind::DriverKind;

pub use crate::common::DeviceParams;

use crate::common::CycleRecord;

/// One period of stereo audio: the device's input and the output the handler must fill.
pub struct AudioIo<'a> {
    pub in_l: &'a [f32],
    pub in_r: &'a [f32],
    pub out_l: &'a mut [f32],
    pub out_r: &'a mut [f32],
}

impl AudioIo<'_> {
    pub fn frames(&self) -> usize {
        self.out_l.len()
    }
}

/// Where a cycle's time comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeBase {
    /// Timestamps are CLOCK_MONOTONIC readings; compute time is what it takes.
    Real,
    /// Timestamps are on a simulated timeline (the sim driver). Compute time comes from the
    /// handler's cost model, or from really running the DSP when it has none; the driver adds
    /// injected events on top.
    Simulated {
        /// Extra CPU time on the critical path (an injected long compute).
        extra_cpu_ns: u64,
        /// Extra wall time without CPU on the critical path (an injected preemption).
        extra_interference_ns: u64,
        /// Engine worker 1 stalls this long when the cycle starts, before it takes a track
        /// (an injected stalled core: the host took its vCPU away).
        stall_worker_ns: u64,
    },
}

/// What the driver knows about the cycle it asks the handler to process.
#[derive(Debug, Clone, Copy)]
pub struct CycleTiming {
    /// Device period index k.
    pub cycle: u64,
    /// When the period interrupt should fire: t0 + k·P.
    pub t_ideal_ns: u64,
    /// The earliest the cycle could start: max(t_ideal, previous cycle's end).
    pub release_ns: u64,
    /// Read first thing after waking (or simulated).
    pub wake_ns: u64,
    /// Output must be complete by this time: t_ideal + (n−1)·P.
    pub deadline_ns: u64,
    /// wake of the previous processed cycle; 0 for the first.
    pub prev_wake_ns: u64,
    /// Periods the device consumed without fresh data just before this cycle.
    pub skipped_before: u32,
    pub time: TimeBase,
}

/// The engine side of the driver contract.
pub trait CycleHandler {
    /// Process one period in real-time context: no allocation, lock, I/O or logging.
    /// Returns the cycle's probe record (also pushed to the handler's own probe ring).
    fn process_cycle(&mut self, io: &mut AudioIo<'_>, timing: &CycleTiming) -> CycleRecord;
}

/// A driver that owns its loop (virtual, sim, alsa). Every such driver is a [`Device`]
/// through one blanket implementation in `contract`, whose `start` runs [`LoopDriver::run`]
/// on the device thread; JACK, whose server owns the loop, implements [`Device`] itself.
pub trait LoopDriver: Send + 'static {
    fn kind(&self) -> DriverKind;

    /// The negotiated parameters.
    fn params(&self) -> DeviceParams;

    /// What opening negotiated differently from what was asked.
    fn warnings(&self) -> Vec<String> {
        Vec::new()
    }

    /// How many device periods the next `run` lasts.
    fn set_periods_total(&mut self, periods_total: u64);

    /// What the driver has to say after its loop, beside the counters.
    fn report(&self) -> DriverReport {
        DriverReport::None
    }

    /// Run cycles into `handler` on the calling thread until the run's device periods are
    /// done or `stop` (or SIGINT/SIGTERM) asks to stop. Audio comes from `source` and goes
    /// to `sink`, so a loopback or a real device's buffers slot in without touching the
    /// loop. Tests call it directly to count allocations on their own thread.
    fn run(
        &mut self,
        handler: &mut dyn CycleHandler,
        stop: &std::sync::atomic::AtomicBool,
        source: &mut dyn signal::InputSource,
        sink: &mut dyn signal::OutputSink,
    ) -> (StopReason, DriverStats);
}

/// Why a driver loop stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The requested number of device periods elapsed.
    Complete,
    /// SIGINT/SIGTERM or the run's stop flag.
    Stopped,
}

/// Counters a driver reports after its loop.
#[derive(Debug, Clone, Copy, Default)]
pub struct DriverStats {
    pub cycles: u64,
    pub skipped_periods: u64,
    pub xruns: u64,
    /// Device periods elapsed (processed + skipped).
    pub periods_elapsed: u64,
    pub sink: signal::SinkStats,
}
