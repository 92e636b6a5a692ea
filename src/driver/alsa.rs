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

use super::signal::{InputSource, OutputSink};
use super::{AudioIo, CycleHandler, CycleTiming, DeviceParams, DriverStats, StopReason, TimeBase};
use crate::common::cycle::{Cause, CycleRecord};
use crate::error::{Error, Result};
use crate::rt::clock::monotonic_ns;
use ::alsa::pcm::{Access, Format, HwParams, IoFormat, State, TstampType, IO, PCM};
use ::alsa::{Direction, ValueOr};
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

/// Frames of delay ALSA reported after each period was written (`snd_pcm_delay`): what a
/// sample written now waits before it reaches the DAC.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DelayFrames {
    pub min: i64,
    pub mean: f64,
    pub max: i64,
    /// The mean as time at the negotiated rate, ns.
    pub mean_ns: f64,
}

/// Running min/mean/max of a delay, kept on the driver thread without allocating.
#[derive(Debug, Clone, Copy)]
struct DelayAcc {
    min: i64,
    max: i64,
    sum: f64,
    n: u64,
}

impl DelayAcc {
    const EMPTY: DelayAcc = DelayAcc {
        min: i64::MAX,
        max: i64::MIN,
        sum: 0.0,
        n: 0,
    };
    fn add(&mut self, d: i64) {
        self.min = self.min.min(d);
        self.max = self.max.max(d);
        self.sum += d as f64;
        self.n += 1;
    }
    fn finish(&self, rate: u64) -> Option<DelayFrames> {
        (self.n > 0).then(|| {
            let mean = self.sum / self.n as f64;
            DelayFrames {
                min: self.min,
                mean,
                max: self.max,
                mean_ns: mean * 1e9 / rate as f64,
            }
        })
    }
}

impl AlsaReport {
    /// What the user should hear about the run from the device's side.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if let Some(n) = &self.capture_note {
            w.push(format!("ALSA: playback only ({n})"));
        }
        if self.xruns_recovered > 0 {
            w.push(format!(
                "ALSA: {} xruns recovered (prepare and restart)",
                self.xruns_recovered
            ));
        }
        if self.stalled {
            w.push("ALSA: the device stopped delivering periods; the run stopped".into());
        }
        if let Some(e) = &self.error {
            w.push(format!("ALSA: {e}; the run stopped there"));
        }
        w
    }
}

/// What the result's `alsa` section holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AlsaReport {
    pub device: String,
    /// `snd_pcm_info` name of the playback PCM (empty for plugins without one).
    pub pcm_name: String,
    /// Capture was open beside playback (full duplex).
    pub capture: bool,
    /// Why there is no capture stream, when there is none.
    pub capture_note: Option<String>,
    /// Capture and playback linked with snd_pcm_link (start/stop together).
    pub linked: bool,
    /// Negotiated sample format ("FLOAT_LE", "S32_LE", "S16_LE").
    pub format: String,
    pub access: AlsaAccess,
    pub channels: u32,
    pub rate: u32,
    /// ALSA's period size = xrunlab's --buffer.
    pub period_frames: u32,
    /// ALSA's periods = xrunlab's --periods.
    pub periods: u32,
    /// ALSA's buffer size = period × periods (as negotiated).
    pub buffer_frames: u32,
    /// ALSA's delay after each write: the latency the device reports.
    pub delay_frames: DelayFrames,
    /// Duplex: the capture stream's delay (frames captured and not yet read), read right
    /// after the playback delay.
    #[serde(default)]
    pub capture_delay_frames: Option<DelayFrames>,
    /// Duplex: playback + capture delay read together after each write: the round trip ALSA
    /// declares (a frame written now plays in the playback delay; the frame captured at
    /// that moment is read after the capture delay and everything before it).
    #[serde(default)]
    pub loop_delay_frames: Option<DelayFrames>,
    /// The same sum at the last cycle: what ALSA declared when the run ended (a loop's
    /// structure can shift during a run, e.g. a JACK-side xrun behind a plugin).
    #[serde(default)]
    pub loop_delay_last_frames: Option<i64>,
    /// Duplex: the engine got the captured periods as its input (`xrunlab rtl`), not the
    /// generated --input signal.
    #[serde(default)]
    pub capture_input: bool,
    /// Cycles whose t_ideal came from the device's status timestamp / from our wake-up.
    pub tstamp_cycles: u64,
    pub wake_estimate_cycles: u64,
    /// Cycles whose reconstructed t_ideal fell before the previous cycle's and was raised
    /// to it (the pointer or the timestamp jumped back). A t_ideal after our wake-up read
    /// (a status taken after it with no backlog) is lowered to the wake-up and not counted.
    pub clamped_cycles: u64,
    /// ALSA xruns detected and recovered.
    pub xruns_recovered: u64,
    pub xrun_events: Vec<AlsaXrun>,
    /// The device stopped delivering periods (no wake-up within the timeout); the run stopped.
    pub stalled: bool,
    /// A recovery failed; the run stopped there with this ALSA error.
    pub error: Option<String>,
}

/// The text ALSA gives for an error (what `snd_strerror` prints for a system errno).
fn alsa_text(e: &::alsa::Error) -> String {
    nix::errno::Errno::from_raw(e.errno()).desc().to_string()
}

/// A sample format the driver converts to and from.
trait Sample: IoFormat + Send + 'static {
    const ZERO: Self;
    fn from_f32(x: f32) -> Self;
    fn to_f32(self) -> f32;
}

impl Sample for f32 {
    const ZERO: Self = 0.0;
    #[inline]
    fn from_f32(x: f32) -> Self {
        x
    }
    #[inline]
    fn to_f32(self) -> f32 {
        self
    }
}

impl Sample for i32 {
    const ZERO: Self = 0;
    #[inline]
    fn from_f32(x: f32) -> Self {
        // f64: 2^31−1 is not representable in f32, and the cast saturates anyway.
        (x.clamp(-1.0, 1.0) as f64 * i32::MAX as f64) as i32
    }
    #[inline]
    fn to_f32(self) -> f32 {
        (self as f64 / i32::MAX as f64) as f32
    }
}

impl Sample for i16 {
    const ZERO: Self = 0;
    #[inline]
    fn from_f32(x: f32) -> Self {
        (x.clamp(-1.0, 1.0) * i16::MAX as f32) as i16
    }
    #[inline]
    fn to_f32(self) -> f32 {
        self as f32 / i16::MAX as f32
    }
}

/// What one PCM accepted.
#[derive(Debug, Clone, Copy)]
struct Negotiated {
    format: Format,
    channels: u32,
    rate: u32,
    period: u32,
    periods: u32,
    buffer: u32,
}

/// Formats in order of preference: the engine's own float first, then integer formats
/// converted in the driver.
const FORMATS: [Format; 3] = [Format::FloatLE, Format::S32LE, Format::S16LE];

fn configure(
    pcm: &PCM,
    access: AlsaAccess,
    format: Option<Format>,
    rate: u32,
    period: u32,
    periods: u32,
) -> std::result::Result<Negotiated, (&'static str, ::alsa::Error)> {
    let hw = HwParams::any(pcm).map_err(|e| ("read the hardware parameters", e))?;
    hw.set_access(match access {
        AlsaAccess::Rw => Access::RWInterleaved,
        AlsaAccess::Mmap => Access::MMapInterleaved,
    })
    .map_err(|e| ("set the access type", e))?;
    let format = match format {
        Some(f) => f,
        None => FORMATS
            .into_iter()
            .find(|f| hw.test_format(*f).is_ok())
            .ok_or((
                "find FLOAT_LE, S32_LE or S16_LE",
                ::alsa::Error::unsupported("format"),
            ))?,
    };
    hw.set_format(format).map_err(|e| ("set the format", e))?;
    let channels = hw
        .set_channels_near(ENGINE_CHANNELS as u32)
        .map_err(|e| ("set 2 channels", e))?;
    // Resampling in alsa-lib would hide the device's real clock.
    let _ = hw.set_rate_resample(false);
    let rate = hw
        .set_rate_near(rate, ValueOr::Nearest)
        .map_err(|e| ("set the rate", e))?;
    hw.set_period_size_near(period as ::alsa::pcm::Frames, ValueOr::Nearest)
        .map_err(|e| ("set the period size", e))?;
    hw.set_periods_near(periods, ValueOr::Nearest)
        .map_err(|e| ("set the periods", e))?;
    pcm.hw_params(&hw)
        .map_err(|e| ("install the hardware parameters", e))?;
    let cur = pcm
        .hw_params_current()
        .map_err(|e| ("read back the hardware parameters", e))?;
    let n = Negotiated {
        format,
        channels,
        rate: cur.get_rate().unwrap_or(rate),
        period: cur.get_period_size().map_err(|e| ("read the period", e))? as u32,
        periods: cur.get_periods().map_err(|e| ("read the periods", e))?,
        buffer: cur.get_buffer_size().map_err(|e| ("read the buffer", e))? as u32,
    };
    let sw = pcm
        .sw_params_current()
        .map_err(|e| ("read the software parameters", e))?;
    let boundary = sw.get_boundary().map_err(|e| ("read the boundary", e))?;
    sw.set_avail_min(n.period as ::alsa::pcm::Frames)
        .map_err(|e| ("set avail_min", e))?;
    // Started explicitly after the pre-fill; an empty buffer is an xrun, never a pause.
    sw.set_start_threshold(boundary)
        .map_err(|e| ("set the start threshold", e))?;
    sw.set_stop_threshold(n.buffer as ::alsa::pcm::Frames)
        .map_err(|e| ("set the stop threshold", e))?;
    sw.set_tstamp_mode(true)
        .map_err(|e| ("enable timestamps", e))?;
    // Old kernels know only gettimeofday stamps: then t_ideal comes from our own reads.
    let _ = sw.set_tstamp_type(TstampType::Monotonic);
    pcm.sw_params(&sw)
        .map_err(|e| ("install the software parameters", e))?;
    Ok(n)
}

/// An open, configured device: playback, and capture when the device has it.
pub struct AlsaDevice {
    cfg: AlsaConfig,
    play: PCM,
    cap: Option<PCM>,
    linked: bool,
    neg: Negotiated,
    monotonic_tstamps: bool,
    capture_note: Option<String>,
    pcm_name: String,
}

impl AlsaDevice {
    /// Open `cfg.device` and negotiate the period (xrunlab's `--buffer`), periods and rate
    /// closest to those asked. A device that cannot be opened or configured is an
    /// environment error (exit 3) with ALSA's text.
    pub fn open(cfg: &AlsaConfig, rate: u32, frames: u32, periods: u32) -> Result<Self> {
        let play = PCM::new(&cfg.device, Direction::Playback, false).map_err(|e| {
            let msg = format!(
                "cannot open ALSA device '{}': {}",
                cfg.device,
                alsa_text(&e)
            );
            // Another program holding the device is worth telling apart: it is the one case
            // the user fixes by closing something rather than by configuring.
            if e.errno() == libc::EBUSY {
                Error::device_busy(msg)
            } else {
                Error::cannot_measure(msg)
            }
        })?;
        let neg =
            configure(&play, cfg.access, None, rate, frames, periods).map_err(|(what, e)| {
                Error::cannot_measure(format!(
                    "ALSA device '{}' (playback): cannot {what}: {}",
                    cfg.device,
                    alsa_text(&e)
                ))
            })?;
        let monotonic_tstamps = play
            .sw_params_current()
            .and_then(|s| s.get_tstamp_type())
            .is_ok_and(|t| t == TstampType::Monotonic);
        // Capture with exactly playback's format, rate and period, or none: a duplex pair
        // that disagrees cannot share one cycle.
        let (cap, capture_note) = match PCM::new(&cfg.device, Direction::Capture, false) {
            Err(e) => (None, Some(format!("no capture stream: {}", alsa_text(&e)))),
            Ok(c) => match configure(
                &c,
                cfg.access,
                Some(neg.format),
                neg.rate,
                neg.period,
                neg.periods,
            ) {
                Ok(cn) if cn.rate == neg.rate && cn.period == neg.period => (Some(c), None),
                Ok(cn) => (
                    None,
                    Some(format!(
                        "capture negotiated {} Hz / {} frames, playback {} Hz / {} frames: playback only",
                        cn.rate, cn.period, neg.rate, neg.period
                    )),
                ),
                Err((what, e)) => (
                    None,
                    Some(format!("capture: cannot {what}: {}", alsa_text(&e))),
                ),
            },
        };
        let linked = cap.as_ref().is_some_and(|c| play.link(c).is_ok());
        let pcm_name = play
            .info()
            .ok()
            .and_then(|i| i.get_name().ok().map(str::to_string))
            .unwrap_or_default();
        Ok(AlsaDevice {
            cfg: cfg.clone(),
            play,
            cap,
            linked,
            neg,
            monotonic_tstamps,
            capture_note,
            pcm_name,
        })
    }

    pub fn rate(&self) -> u32 {
        self.neg.rate
    }
    /// ALSA's period size = xrunlab's buffer.
    pub fn period_frames(&self) -> u32 {
        self.neg.period
    }
    pub fn periods(&self) -> u32 {
        self.neg.periods
    }
    /// Capture was opened beside playback with the same setup (full duplex).
    pub fn has_capture(&self) -> bool {
        self.cap.is_some()
    }
    /// Why there is no capture stream.
    pub fn capture_note(&self) -> Option<&str> {
        self.capture_note.as_deref()
    }

    fn report(&self) -> AlsaReport {
        AlsaReport {
            device: self.cfg.device.clone(),
            pcm_name: self.pcm_name.clone(),
            capture: self.cap.is_some(),
            capture_note: self.capture_note.clone(),
            linked: self.linked,
            format: self.neg.format.to_string(),
            access: self.cfg.access,
            channels: self.neg.channels,
            rate: self.neg.rate,
            period_frames: self.neg.period,
            periods: self.neg.periods,
            buffer_frames: self.neg.buffer,
            ..AlsaReport::default()
        }
    }
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

/// Per-run state of the loop, kept out of the generic function so it is written once.
struct Loop {
    rate: u64,
    period: u64,
    period_ns: u64,
    periods: u64,
    wait_ms: u32,
    next_k: u64,
    prev_t_ideal: u64,
    prev_end: u64,
    prev_wake: u64,
    first_t_ideal: u64,
    /// Set by a recovery: the next cycle counts the periods lost since `prev_t_ideal`.
    recovered: bool,
    last: Option<(u64, bool, Option<Cause>)>,
    stats: DriverStats,
}

fn ts_ns(t: libc::timespec) -> u64 {
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// The xrun an errno stands for: `EPIPE` (xrun) or `ESTRPIPE` (suspend).
fn xrun_kind(errno: i32, capture: bool) -> Option<AlsaXrunKind> {
    match errno {
        libc::EPIPE if capture => Some(AlsaXrunKind::Overrun),
        libc::EPIPE => Some(AlsaXrunKind::Underrun),
        libc::ESTRPIPE => Some(AlsaXrunKind::Suspend),
        _ => None,
    }
}

impl AlsaDriver {
    fn run_typed<S: Sample>(
        &mut self,
        h: &mut dyn CycleHandler,
        stop: &AtomicBool,
        source: &mut dyn InputSource,
        sink: &mut dyn OutputSink,
    ) -> (StopReason, DriverStats) {
        let dev = &self.dev;
        let report = &mut self.report;
        let n = dev.neg;
        let ch = n.channels as usize;
        let f = n.period as usize;
        // Made once: io_checked reads the hw params through a malloc.
        let pio = match dev.play.io_checked::<S>() {
            Ok(io) => io,
            Err(e) => {
                report.error = Some(format!("playback I/O: {}", alsa_text(&e)));
                return (StopReason::Stopped, DriverStats::default());
            }
        };
        let cio = match dev.cap.as_ref().map(|c| c.io_checked::<S>()).transpose() {
            Ok(io) => io,
            Err(e) => {
                report.error = Some(format!("capture I/O: {}", alsa_text(&e)));
                return (StopReason::Stopped, DriverStats::default());
            }
        };
        let silence = vec![S::ZERO; f * ch];
        let mut pbuf = vec![S::ZERO; f * ch];
        let mut cbuf = vec![S::ZERO; f * ch];
        let (mut in_l, mut in_r) = (vec![0f32; f], vec![0f32; f]);
        let (mut out_l, mut out_r) = (vec![0f32; f], vec![0f32; f]);
        let period_ns = n.period as u64 * 1_000_000_000 / n.rate as u64;
        let mut lp = Loop {
            rate: n.rate as u64,
            period: n.period as u64,
            period_ns,
            periods: n.periods as u64,
            // A device that frees no period for 10 periods (at least 1 s) has stalled.
            wait_ms: ((10 * period_ns / 1_000_000) as u32).max(1000),
            next_k: 0,
            prev_t_ideal: 0,
            prev_end: 0,
            prev_wake: 0,
            first_t_ideal: 0,
            recovered: false,
            last: None,
            stats: DriverStats::default(),
        };
        let (mut play_d, mut cap_d, mut loop_d) =
            (DelayAcc::EMPTY, DelayAcc::EMPTY, DelayAcc::EMPTY);
        let mut loop_last = None;
        let from_capture = self.capture_input && cio.is_some();
        report.capture_input = from_capture;
        let write_delay = self.write_delay.clone();
        let access = dev.cfg.access;
        if let Err(e) = start(dev, &pio, &silence, ch, access, lp.periods) {
            report.error = Some(format!("cannot start: {}", alsa_text(&e)));
            return (StopReason::Stopped, lp.stats);
        }
        let reason = 'run: loop {
            if lp.next_k >= self.periods_total {
                break StopReason::Complete;
            }
            if stop.load(Ordering::Relaxed) || crate::rt::interrupt::requested() {
                break StopReason::Stopped;
            }
            match dev.play.wait(Some(lp.wait_ms)) {
                Ok(true) => {}
                Ok(false) => {
                    report.stalled = true;
                    break StopReason::Stopped;
                }
                Err(e) if e.errno() == libc::EINTR => continue,
                Err(e) => {
                    if !recover(dev, &pio, &silence, ch, &mut lp, report, e.errno(), false) {
                        break StopReason::Stopped;
                    }
                    continue;
                }
            }
            let wake = monotonic_ns();
            let st = match dev.play.status() {
                Ok(s) => s,
                Err(e) => {
                    report.error = Some(format!("status: {}", alsa_text(&e)));
                    break StopReason::Stopped;
                }
            };
            if matches!(st.get_state(), State::XRun | State::Suspended) {
                let errno = if st.get_state() == State::XRun {
                    libc::EPIPE
                } else {
                    libc::ESTRPIPE
                };
                if !recover(dev, &pio, &silence, ch, &mut lp, report, errno, false) {
                    break StopReason::Stopped;
                }
                continue;
            }
            let avail = st.get_avail().max(0) as u64;
            if avail < lp.period {
                // Woken without a full period of space (a plugin's early poll): wait again.
                continue;
            }
            // (time, avail) read together: the latest period was freed (avail − period)
            // frames before that time.
            let stamp = ts_ns(st.get_htstamp());
            let usable = dev.monotonic_tstamps
                && stamp != 0
                && stamp <= wake + 1_000_000
                && stamp + 1_000_000_000 >= wake;
            let base = if usable { stamp } else { wake };
            let back = (avail - lp.period) * 1_000_000_000 / lp.rate;
            let raw = base.saturating_sub(back);
            let t_ideal = raw.min(wake).max(lp.prev_t_ideal);
            let clamped = raw.min(wake) < lp.prev_t_ideal;
            let skipped = if lp.recovered && lp.stats.cycles > 0 {
                // Device time lost while stopped, in whole periods.
                let gap = t_ideal.saturating_sub(lp.prev_t_ideal);
                ((gap + lp.period_ns / 2) / lp.period_ns).saturating_sub(1)
            } else {
                0
            };
            let k = lp.next_k + skipped;
            if lp.recovered {
                if let Some(x) = report.xrun_events.last_mut() {
                    x.resumed_cycle.get_or_insert(k);
                }
            }
            lp.recovered = false;
            if k >= self.periods_total {
                lp.stats.skipped_periods += self.periods_total - lp.next_k;
                lp.next_k = self.periods_total;
                lp.stats.periods_elapsed = self.periods_total;
                break StopReason::Complete;
            }
            if lp.stats.cycles == 0 {
                lp.first_t_ideal = t_ideal;
            }
            let timing = CycleTiming {
                cycle: k,
                t_ideal_ns: t_ideal,
                release_ns: t_ideal.max(lp.prev_end),
                wake_ns: wake,
                deadline_ns: t_ideal + (lp.periods - 1) * lp.period_ns,
                prev_wake_ns: lp.prev_wake,
                skipped_before: skipped as u32,
                time: TimeBase::Real,
            };
            if let Some(cio) = &cio {
                // Duplex: the captured period is read to keep the linked stream flowing;
                // the engine processes the --input signal so the output stays checkable,
                // unless a loop measurement asked for the capture (`capture_input`).
                if let Err(e) = read_period(dev.cap.as_ref().unwrap(), cio, &mut cbuf, ch, access) {
                    if !recover(dev, &pio, &silence, ch, &mut lp, report, e.errno(), true) {
                        break 'run StopReason::Stopped;
                    }
                    continue;
                }
            }
            let frame = k * lp.period;
            if from_capture {
                deinterleave(&cbuf, &mut in_l, &mut in_r, ch);
            } else {
                source.fill(frame, &mut in_l, &mut in_r);
            }
            let rec: CycleRecord = {
                let mut io = AudioIo {
                    in_l: &in_l,
                    in_r: &in_r,
                    out_l: &mut out_l,
                    out_r: &mut out_r,
                };
                h.process_cycle(&mut io, &timing)
            };
            sink.consume(frame, &out_l, &out_r, !rec.xrun);
            interleave(&out_l, &out_r, &mut pbuf, ch);
            lp.stats.cycles += 1;
            report.clamped_cycles += clamped as u64;
            if usable {
                report.tstamp_cycles += 1;
            } else {
                report.wake_estimate_cycles += 1;
            }
            lp.stats.skipped_periods += skipped;
            lp.stats.xruns += rec.xrun as u64;
            lp.stats.periods_elapsed = k + 1;
            lp.next_k = k + 1;
            lp.prev_t_ideal = t_ideal;
            lp.prev_end = rec.end_ns;
            lp.prev_wake = wake;
            lp.last = Some((k, rec.xrun, rec.cause));
            if let Err(e) = write_period(&dev.play, &pio, &pbuf, ch, access) {
                if !recover(dev, &pio, &silence, ch, &mut lp, report, e.errno(), false) {
                    break StopReason::Stopped;
                }
                continue;
            }
            // Both delays back to back, so the pair describes one instant.
            let play_delay = dev.play.delay();
            let cap_delay = dev.cap.as_ref().map(|c| c.delay());
            #[allow(clippy::unnecessary_cast)] // Frames is a C long: 32 bits on some targets
            if let (Ok(p), Some(Ok(c))) = (&play_delay, &cap_delay) {
                cap_d.add(*c as i64);
                loop_d.add(*p as i64 + *c as i64);
                loop_last = Some(*p as i64 + *c as i64);
            }
            if let Ok(d) = play_delay {
                #[allow(clippy::unnecessary_cast)] // Frames is a C long: 32 bits on some targets
                let d = d as i64;
                play_d.add(d);
                if let Some(w) = &write_delay {
                    w.delay_frames.store(d, Ordering::Relaxed);
                    w.at_ns.store(monotonic_ns(), Ordering::Relaxed);
                    w.cycle1.store(k + 1, Ordering::Relaxed);
                }
            }
        };
        if let Some(d) = play_d.finish(lp.rate) {
            report.delay_frames = d;
        }
        report.capture_delay_frames = cap_d.finish(lp.rate);
        report.loop_delay_frames = loop_d.finish(lp.rate);
        report.loop_delay_last_frames = loop_last;
        lp.stats.sink = sink.stats();
        (reason, lp.stats)
    }
}

/// Pre-fill playback with `periods` silent periods and start (capture follows through the
/// link, or is started here).
fn start<S: Sample>(
    dev: &AlsaDevice,
    pio: &IO<'_, S>,
    silence: &[S],
    ch: usize,
    access: AlsaAccess,
    periods: u64,
) -> std::result::Result<(), ::alsa::Error> {
    dev.play.prepare()?;
    if let (Some(c), false) = (&dev.cap, dev.linked) {
        c.prepare()?;
    }
    for _ in 0..periods {
        write_period(&dev.play, pio, silence, ch, access)?;
    }
    dev.play.start()?;
    if let (Some(c), false) = (&dev.cap, dev.linked) {
        c.start()?;
    }
    Ok(())
}

/// Recover from the error `errno` of a wait/read/write; false when it is not an xrun or
/// recovery failed (the run then stops with the error in the report).
#[allow(clippy::too_many_arguments)]
fn recover<S: Sample>(
    dev: &AlsaDevice,
    pio: &IO<'_, S>,
    silence: &[S],
    ch: usize,
    lp: &mut Loop,
    report: &mut AlsaReport,
    errno: i32,
    capture: bool,
) -> bool {
    let Some(kind) = xrun_kind(errno, capture) else {
        report.error = Some(format!(
            "{}: {}",
            if capture { "capture" } else { "playback" },
            nix::errno::Errno::from_raw(errno).desc()
        ));
        return false;
    };
    let t = monotonic_ns();
    let pcm = match (capture, &dev.cap) {
        (true, Some(c)) => c,
        _ => &dev.play,
    };
    #[allow(clippy::unnecessary_cast)] // Frames is a C long: 32 bits on some targets
    let delay = pcm.status().map(|s| s.get_delay() as i64).unwrap_or(0);
    // Stop both streams and start them afresh (prepare, pre-fill, start) rather than
    // snd_pcm_recover one: an unlinked capture stream keeps running otherwise, and the
    // pre-fill would block on a playback buffer that is still full. Prepare also brings a
    // suspended device back.
    let _ = dev.play.drop();
    if let (Some(c), false) = (&dev.cap, dev.linked) {
        let _ = c.drop();
    }
    let ok = start(dev, pio, silence, ch, dev.cfg.access, lp.periods).is_ok();
    report.xruns_recovered += 1;
    if report.xrun_events.len() < report.xrun_events.capacity() {
        let (after, engine_xrun, cause) = match lp.last {
            Some((k, x, c)) => (Some(k), x, c),
            None => (None, false, None),
        };
        report.xrun_events.push(AlsaXrun {
            after_cycle: after,
            at_ns: t.saturating_sub(lp.first_t_ideal),
            stream: if capture {
                AlsaStream::Capture
            } else {
                AlsaStream::Playback
            },
            kind,
            delay_frames: delay,
            recovery_ns: monotonic_ns() - t,
            engine_xrun,
            cause,
            resumed_cycle: None,
        });
    }
    lp.recovered = true;
    if !ok {
        report.error = Some(format!("could not recover from an {}", kind.as_str()));
    }
    ok
}

fn interleave<S: Sample>(l: &[f32], r: &[f32], out: &mut [S], ch: usize) {
    for (i, frame) in out.chunks_exact_mut(ch).enumerate() {
        if ch == 1 {
            frame[0] = S::from_f32(0.5 * (l[i] + r[i]));
            continue;
        }
        frame[0] = S::from_f32(l[i]);
        frame[1] = S::from_f32(r[i]);
        for s in &mut frame[2..] {
            *s = S::ZERO;
        }
    }
}

fn deinterleave<S: Sample>(buf: &[S], l: &mut [f32], r: &mut [f32], ch: usize) {
    for (i, frame) in buf.chunks_exact(ch).enumerate() {
        l[i] = frame[0].to_f32();
        r[i] = frame[ch.min(2) - 1].to_f32();
    }
}

/// Move one period through a PCM, however many calls it takes: `step(done)` moves what it
/// can from frame `done` on and returns how many frames it moved; 0 means the device has no
/// room yet, so wait for it.
fn whole_period(
    pcm: &PCM,
    frames: usize,
    mut step: impl FnMut(usize) -> std::result::Result<usize, ::alsa::Error>,
) -> std::result::Result<(), ::alsa::Error> {
    let mut done = 0;
    while done < frames {
        let n = step(done)?;
        if n == 0 {
            pcm.wait(Some(1000))?;
        }
        done += n;
    }
    Ok(())
}

/// Write one period.
fn write_period<S: Sample>(
    pcm: &PCM,
    io: &IO<'_, S>,
    buf: &[S],
    ch: usize,
    access: AlsaAccess,
) -> std::result::Result<(), ::alsa::Error> {
    let frames = buf.len() / ch;
    whole_period(pcm, frames, |done| {
        let src = &buf[done * ch..];
        match access {
            AlsaAccess::Rw => io.writei(src),
            AlsaAccess::Mmap => {
                pcm.avail_update()?;
                io.mmap(frames - done, |dst| {
                    let k = dst.len().min(src.len());
                    dst[..k].copy_from_slice(&src[..k]);
                    k / ch
                })
            }
        }
    })
}

/// Read one period.
fn read_period<S: Sample>(
    pcm: &PCM,
    io: &IO<'_, S>,
    buf: &mut [S],
    ch: usize,
    access: AlsaAccess,
) -> std::result::Result<(), ::alsa::Error> {
    let frames = buf.len() / ch;
    whole_period(pcm, frames, |done| {
        let dst = &mut buf[done * ch..];
        match access {
            AlsaAccess::Rw => io.readi(dst),
            AlsaAccess::Mmap => {
                pcm.avail_update()?;
                io.mmap(frames - done, |src| {
                    let k = src.len().min(dst.len());
                    dst[..k].copy_from_slice(&src[..k]);
                    k / ch
                })
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversion_saturates_and_keeps_sign() {
        assert_eq!(i16::from_f32(1.5), i16::MAX);
        assert_eq!(i16::from_f32(-1.0), -i16::MAX);
        assert_eq!(i32::from_f32(0.5), i32::MAX / 2);
        assert_eq!(i32::from_f32(-2.0), -i32::MAX);
        assert_eq!(f32::from_f32(0.25), 0.25);
    }

    #[test]
    fn interleave_fills_extra_channels_with_silence_and_mixes_mono() {
        let (l, r) = ([0.5f32, -0.5], [0.25f32, 0.0]);
        let mut four = [9.0f32; 8];
        interleave(&l, &r, &mut four, 4);
        assert_eq!(four, [0.5, 0.25, 0.0, 0.0, -0.5, 0.0, 0.0, 0.0]);
        let mut mono = [0i16; 2];
        interleave(&l, &r, &mut mono, 1);
        assert_eq!(mono, [i16::from_f32(0.375), i16::from_f32(-0.25)]);
    }

    #[test]
    fn missing_device_is_an_environment_error_with_alsa_text() {
        let e = AlsaDevice::open(
            &AlsaConfig {
                device: "hw:9".into(),
                access: AlsaAccess::Rw,
            },
            48000,
            256,
            2,
        )
        .err()
        .expect("hw:9 does not exist");
        assert_eq!(e.exit_code(), crate::error::EXIT_CANNOT_MEASURE);
        let msg = e.to_string();
        assert!(msg.starts_with("cannot open ALSA device 'hw:9': "), "{msg}");
    }
}
