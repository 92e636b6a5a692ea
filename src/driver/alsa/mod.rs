//! The `alsa` driver: the engine pushes periods straight into an ALSA PCM (issue 9).
//!
//! Naming. xrunlab's `--buffer` is the frames per cycle everywhere, which ALSA calls the
//! *period size*; xrunlab's `--periods` n is ALSA's *periods*; ALSA's *buffer size* is
//! therefore `--buffer × --periods`. The device may round each; the run then uses what it
//! negotiated (reported in `alsa` and warned about).
//!
//! Loop. Playback is pre-filled with n silent periods and started (capture, when the
//! device has one, is linked to it with `snd_pcm_link` so both start and stop together, or
//! started right after it when the plugin cannot link). The RT thread sleeps in
//! `snd_pcm_wait` until a period of space is free (`avail_min` = one period), reads the
//! status, runs the cycle and writes the period. A period of space is freed when the device
//! has played one, so with n periods queued the cycle's output must be written within the
//! n−1 periods still queued: the engine's deadline `t_ideal + (n−1)·P` is the ALSA underrun
//! time, and the engine's cause analysis applies unchanged. When the thread is behind
//! (avail ≥ 2 periods) the next cycle runs at once, as on the `virtual` driver.
//!
//! `t_ideal` (the period interrupt) is reconstructed from a pair (time, avail) read
//! together: the device freed its latest period `(avail − period)` frames before that time.
//! `snd_pcm_status` gives the pair with the device's own timestamp (CLOCK_MONOTONIC, set
//! with `tstamp_type`), taken by the kernel where it read the hardware pointer; without a
//! usable timestamp we use our wake-up read and `avail`, which adds the few µs between
//! the two reads. Either way t_ideal is clamped to [previous t_ideal, wake]. Its resolution
//! is the device's pointer granularity: through the ALSA `jack` plugin the pointer moves in
//! whole JACK periods and its timestamp is the time of the status call, so there wake-up
//! latency measures only our own path from the poll wake to the status read.
//!
//! Capture. In duplex the captured period is read every cycle; the engine gets it as its
//! input only when asked (`capture_input`, for `xrunlab rtl`), the --input signal
//! otherwise. After each write the playback and capture delays are read back to back: their
//! sum is the round trip ALSA declares for a cable from output to input.
//!
//! Xruns. An `EPIPE`/`ESTRPIPE` from wait, read or write, or a status in XRUN, is an ALSA
//! xrun: we note the delay ALSA reports, recover (stop both streams, prepare, re-fill and
//! restart), and the device periods lost until the restart become skipped periods of the
//! next cycle. Each ALSA xrun is kept (up to a preallocated number) with the engine's view
//! of the last cycle before it: whether it missed its deadline and why.
//!
//! Nothing in the cycle path allocates: the crate's `IO` handles are made once (making one
//! reads the hw params through a malloc), the status lives on the stack and the buffers and
//! the xrun list are preallocated.

mod device;
mod period;
mod report;
mod run;

pub use device::AlsaDevice;
pub use report::{AlsaReport, DelayFrames};

use super::signal::{InputSource, OutputSink};
use super::{CycleHandler, DeviceParams, DriverStats, StopReason};
use crate::common::cycle::Cause;
use crate::error::Result;
use ::alsa::pcm::Format;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

/// How the driver moves samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AlsaAccess {
    /// `snd_pcm_writei`/`readi` (interleaved read/write).
    #[default]
    Rw,
    /// `snd_pcm_mmap_begin`/`commit` straight into the device's ring buffer.
    Mmap,
}

impl AlsaAccess {
    pub fn as_str(self) -> &'static str {
        match self {
            AlsaAccess::Rw => "rw",
            AlsaAccess::Mmap => "mmap",
        }
    }
}

/// `--driver alsa` options.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AlsaConfig {
    /// The PCM name (`hw:0`, `default`, a PCM from the ALSA configuration…).
    pub device: String,
    pub access: AlsaAccess,
}

impl Default for AlsaConfig {
    fn default() -> Self {
        AlsaConfig {
            device: "default".into(),
            access: AlsaAccess::Rw,
        }
    }
}

/// ALSA xruns kept with their details; more are counted.
const MAX_XRUN_EVENTS: usize = 1024;
/// The engine is stereo; a device with more channels gets silence on the rest.
const ENGINE_CHANNELS: usize = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AlsaStream {
    Playback,
    Capture,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AlsaXrunKind {
    /// Playback ran out of data (EPIPE).
    Underrun,
    /// Capture ran out of space (EPIPE).
    Overrun,
    /// The device was suspended (ESTRPIPE).
    Suspend,
}

impl AlsaXrunKind {
    fn as_str(self) -> &'static str {
        match self {
            AlsaXrunKind::Underrun => "underrun",
            AlsaXrunKind::Overrun => "overrun",
            AlsaXrunKind::Suspend => "suspend",
        }
    }
}

/// One ALSA xrun the driver recovered from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AlsaXrun {
    /// The last cycle processed before it (None: before the first cycle).
    pub after_cycle: Option<u64>,
    /// When it was detected, ns after the first cycle's t_ideal.
    pub at_ns: u64,
    pub stream: AlsaStream,
    pub kind: AlsaXrunKind,
    /// The delay (frames) `snd_pcm_status` reported when it was detected.
    pub delay_frames: i64,
    /// How long recovery (prepare, re-fill, restart) took, ns.
    pub recovery_ns: u64,
    /// The engine's view of that last cycle: it missed its deadline, and why.
    pub engine_xrun: bool,
    pub cause: Option<Cause>,
    /// The first cycle after the restart (None: the run ended first). Cycles between
    /// `after_cycle` and it were skipped.
    #[serde(default)]
    pub resumed_cycle: Option<u64>,
}

/// The delay ALSA reported right after a cycle's period was written (`snd_pcm_delay`), for
/// a handler that needs it per cycle (`xrunlab event`: when a sample of that period reaches
/// the DAC). Written after the write and read by the handler, both on the driver thread.
#[derive(Debug, Default)]
pub struct WriteDelay {
    /// Cycle + 1 of the latest write (0 = none yet).
    cycle1: AtomicU64,
    delay_frames: AtomicI64,
    at_ns: AtomicU64,
}

impl WriteDelay {
    /// (cycle, delay in frames, CLOCK_MONOTONIC right after the delay was read) of the
    /// latest period written.
    pub fn latest(&self) -> Option<(u64, i64, u64)> {
        match self.cycle1.load(Ordering::Relaxed) {
            0 => None,
            c => Some((
                c - 1,
                self.delay_frames.load(Ordering::Relaxed),
                self.at_ns.load(Ordering::Relaxed),
            )),
        }
    }
}

/// The driver: an open device plus the run's length.
pub struct AlsaDriver {
    dev: AlsaDevice,
    periods_total: u64,
    report: AlsaReport,
    write_delay: Option<Arc<WriteDelay>>,
    capture_input: bool,
    /// The device accepted other parameters than asked (see [`AlsaDriver::open`]).
    accepted_other: Option<String>,
}

impl AlsaDriver {
    pub fn new(dev: AlsaDevice, periods_total: u64) -> Self {
        let mut report = dev.report();
        report.xrun_events = Vec::with_capacity(MAX_XRUN_EVENTS);
        AlsaDriver {
            dev,
            periods_total,
            report,
            write_delay: None,
            capture_input: false,
            accepted_other: None,
        }
    }

    /// Open `cfg.device` for `asked` (see [`AlsaDevice::open`]); what it accepted instead is
    /// the device's warning.
    pub fn open(cfg: &AlsaConfig, asked: DeviceParams) -> Result<Self> {
        let dev = AlsaDevice::open(cfg, asked.rate, asked.frames, asked.periods)?;
        let got = (dev.rate(), dev.period_frames(), dev.periods());
        let mut d = AlsaDriver::new(dev, 0);
        if got != (asked.rate, asked.frames, asked.periods) {
            d.accepted_other = Some(format!(
                "ALSA: the device accepted {} Hz, {} frames × {} periods (asked {} Hz, {} × {})",
                got.0, got.1, got.2, asked.rate, asked.frames, asked.periods
            ));
        }
        Ok(d)
    }

    /// Hand the engine the captured periods as its input instead of the InputSource
    /// (a loop measurement). Without a capture stream the source stays the input.
    pub fn capture_input(&mut self) {
        self.capture_input = true;
    }

    /// Publish the delay after every write from now on (see [`WriteDelay`]).
    pub fn write_delay(&mut self) -> Arc<WriteDelay> {
        self.write_delay
            .get_or_insert_with(|| Arc::new(WriteDelay::default()))
            .clone()
    }

    /// The opened device (what it negotiated, whether it captures).
    pub fn device(&self) -> &AlsaDevice {
        &self.dev
    }

    /// What the run saw; complete once `run` returned.
    pub fn report(&self) -> AlsaReport {
        self.report.clone()
    }
}

impl super::LoopDriver for AlsaDriver {
    fn kind(&self) -> super::DriverKind {
        super::DriverKind::Alsa
    }

    fn params(&self) -> DeviceParams {
        DeviceParams {
            rate: self.dev.rate(),
            frames: self.dev.period_frames(),
            periods: self.dev.periods(),
        }
    }

    fn warnings(&self) -> Vec<String> {
        self.accepted_other.iter().cloned().collect()
    }

    fn set_periods_total(&mut self, periods_total: u64) {
        self.periods_total = periods_total;
    }

    fn report(&self) -> super::DriverReport {
        super::DriverReport::Alsa(self.report())
    }

    fn run(
        &mut self,
        handler: &mut dyn CycleHandler,
        stop: &AtomicBool,
        source: &mut dyn InputSource,
        sink: &mut dyn OutputSink,
    ) -> (StopReason, DriverStats) {
        let r = match self.dev.neg.format {
            Format::FloatLE => self.run_typed::<f32>(handler, stop, source, sink),
            Format::S32LE => self.run_typed::<i32>(handler, stop, source, sink),
            _ => self.run_typed::<i16>(handler, stop, source, sink),
        };
        let _ = self.dev.play.drop();
        if let (Some(c), false) = (&self.dev.cap, self.dev.linked) {
            let _ = c.drop();
        }
        r
    }
}
