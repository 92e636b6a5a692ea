//! Event-to-sound latency (Topliss et al.): the time from a trigger to the moment the first
//! sample of the tone it starts reaches the DAC, per backend, buffer/period setting and
//! scenario, with the under-runs seen meanwhile.
//!
//! ## One trial
//! A non-real-time thread reads `te` (CLOCK_MONOTONIC) the moment it knows of a trigger
//! (random timer, Enter, UDP datagram), raises the GPIO line if asked, and publishes the trial
//! number in an atomic. The driver's cycle reads that atomic first thing (no lock, no
//! allocation), sends note-on to the synth (the `sine`/`poly` plugins run by the engine),
//! and the cycle that renders the first non-zero sample of the tone records its cycle, the
//! driver's `t_ideal` for it and the sample's frame offset into a wait-free ring. When the
//! sample reaches the DAC follows from the driver's clock:
//! - virtual: output of cycle k starts playing at `t_ideal(k) + (n−1)·P` (docs/ARCHITECTURE.md §3), then
//!   passes the output FIFO and the DAC: `t_sound = t0 + ((k + n − 1)·frames + FIFO + DAC +
//!   offset)/fs`, exactly;
//! - jack: the cycle start the server reports plus the playback latency of our output port
//!   (the server's own figure for "written now, heard then"): `t_sound = t_cycle(k) +
//!   (latency + offset)/fs`.
//!
//! latency = t_sound − te. After a fixed tone the synth gets note-off, and the next trial
//! waits until a silent period was rendered, so every onset is a clean silence→tone edge.

pub mod gpio;
pub mod trigger;

use crate::driver::signal::{Generator, OutputSink, SignalKind, SinkStats};
use crate::driver::{AudioIo, CycleHandler, CycleTiming, DeviceParams, Driver, StopReason};
use crate::engine::probe::CycleRecord;
use crate::engine::watchdog::{default_bound_ns, Watchdog};
use crate::engine::{Engine, EngineSpec};
use crate::error::{Error, Result};
use crate::progress::Progress;
use crate::results::Status;
use crate::rt::clock::monotonic_ns;
use crate::rt::thread::{spawn_rt, ThreadSpec};
use crate::rt::Policy;
use gpio::{GpioLine, GpioSpec};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use trigger::TriggerKind;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EventDriver {
    /// The timer-paced virtual codec: the DAC time is exact from the device model.
    Virtual,
    /// The engine as a JACK client: cycle start + playback port latency.
    Jack,
    /// Direct ALSA: the engine pushes periods; the delay ALSA reports after the write.
    Alsa,
}

impl EventDriver {
    pub fn name(self) -> &'static str {
        match self {
            EventDriver::Virtual => "virtual",
            EventDriver::Jack => "jack",
            EventDriver::Alsa => "alsa",
        }
    }
}

impl std::str::FromStr for EventDriver {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim() {
            "virtual" => Ok(EventDriver::Virtual),
            "jack" => Ok(EventDriver::Jack),
            "alsa" => Ok(EventDriver::Alsa),
            _ => Err(Error::usage(format!(
                "unknown event driver '{s}': use virtual, jack or alsa"
            ))),
        }
    }
}

/// Topliss et al.'s three test scenarios.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// One wavetable sine.
    Mono,
    /// The same tone while a `top -d 0.1` background process runs at normal priority.
    MonoBg,
    /// Three harmonically related oscillators summed (the `poly` plugin).
    Poly,
}

impl Scenario {
    pub const ALL: [Scenario; 3] = [Scenario::Mono, Scenario::MonoBg, Scenario::Poly];

    pub fn name(self) -> &'static str {
        match self {
            Scenario::Mono => "mono",
            Scenario::MonoBg => "mono-bg",
            Scenario::Poly => "poly",
        }
    }

    /// The chain the engine runs: the synth, silent until note-on.
    pub fn chain(self) -> &'static str {
        match self {
            Scenario::Mono | Scenario::MonoBg => "sine(freq=440,gate=0)",
            Scenario::Poly => "poly(freq=220,gate=0)",
        }
    }
}

impl std::str::FromStr for Scenario {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Scenario::ALL
            .into_iter()
            .find(|c| c.name() == s.trim())
            .ok_or_else(|| {
                Error::usage(format!(
                    "unknown --scenario '{s}': use mono, mono-bg or poly"
                ))
            })
    }
}

/// One of Topliss et al.'s buffer/period settings. In Topliss et al.'s notation `buffer` is the whole
/// device buffer and `period` the frames per interrupt; xrunlab's `--buffer` is the period
/// and `--periods` is n = buffer / period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SeedPair {
    pub buffer_frames: u32,
    pub period_frames: u32,
}

impl SeedPair {
    pub fn periods(&self) -> u32 {
        self.buffer_frames / self.period_frames
    }
}

/// Every buffer/period pair of Topliss et al.'s Figures 4–7 (ALSA and JACK, USB and Audio Cape).
pub const SEED_PAIRS: [SeedPair; 15] = {
    const fn p(buffer_frames: u32, period_frames: u32) -> SeedPair {
        SeedPair {
            buffer_frames,
            period_frames,
        }
    }
    [
        p(128, 8),
        p(256, 8),
        p(512, 8),
        p(128, 16),
        p(256, 16),
        p(512, 16),
        p(128, 32),
        p(256, 32),
        p(512, 32),
        p(128, 64),
        p(256, 64),
        p(512, 64),
        p(256, 128),
        p(512, 128),
        p(512, 256),
    ]
};

/// Parse `B/P[,B/P…]` (Topliss et al.'s buffer/period).
pub fn parse_pairs(s: &str) -> Result<Vec<SeedPair>> {
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim).filter(|x| !x.is_empty()) {
        let bad = || {
            Error::usage(format!(
                "bad --pairs item '{item}': use BUFFER/PERIOD frames, e.g. 256/64 (BUFFER a multiple of PERIOD, 2..64 periods)"
            ))
        };
        let (b, p) = item.split_once('/').ok_or_else(bad)?;
        let b: u32 = b.trim().parse().map_err(|_| bad())?;
        let p: u32 = p.trim().parse().map_err(|_| bad())?;
        if p == 0 || !b.is_multiple_of(p) || !(2..=64).contains(&(b / p)) || p > 65536 {
            return Err(bad());
        }
        out.push(SeedPair {
            buffer_frames: b,
            period_frames: p,
        });
    }
    if out.is_empty() {
        return Err(Error::usage("--pairs needs at least one BUFFER/PERIOD"));
    }
    Ok(out)
}

/// What `xrunlab event` was asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EventConfig {
    /// One driver for a single measurement; one or more with `grid`.
    pub drivers: Vec<EventDriver>,
    /// Sample rate of the virtual device (JACK: the server's).
    pub rate: u32,
    /// Frames per period (`--buffer`); None = 64 on the virtual device, the server's on JACK.
    pub buffer_frames: Option<u32>,
    /// Periods of buffering n (`--periods`, virtual device); JACK's nperiods belongs to the
    /// server and shows in its playback port latency.
    pub periods: Option<u32>,
    pub scenarios: Vec<Scenario>,
    pub trigger: TriggerKind,
    pub trials: u32,
    pub gpio: Option<GpioSpec>,
    /// Virtual device: output FIFO and DAC latency, frames.
    pub fifo_frames: u32,
    pub dac_frames: u32,
    /// Grid mode: these buffer/period pairs for every driver and scenario.
    pub grid: Option<Vec<SeedPair>>,
    pub seed: u64,
    pub policy: Policy,
    pub jack: Option<crate::driver::jack::JackConfig>,
    /// `--driver alsa`: the PCM and access.
    #[serde(default)]
    pub alsa: Option<crate::driver::alsa::AlsaConfig>,
}

impl EventConfig {
    pub fn new(driver: EventDriver) -> Self {
        EventConfig {
            drivers: vec![driver],
            rate: 48000,
            buffer_frames: None,
            periods: None,
            scenarios: vec![Scenario::Mono],
            trigger: TriggerKind::Internal,
            trials: 200,
            gpio: None,
            fifo_frames: 0,
            dac_frames: 0,
            grid: None,
            seed: 1,
            policy: Policy::fifo(80),
            jack: (driver == EventDriver::Jack).then(Default::default),
            alsa: (driver == EventDriver::Alsa).then(Default::default),
        }
    }

    pub fn validate(&self) -> Result<()> {
        if self.drivers.is_empty() || self.scenarios.is_empty() {
            return Err(Error::usage("event needs a driver and a scenario"));
        }
        if !(1..=100_000).contains(&self.trials) {
            return Err(Error::usage(format!(
                "--trials {} is outside 1..100000",
                self.trials
            )));
        }
        if !(8000..=384_000).contains(&self.rate) {
            return Err(Error::usage(format!(
                "--rate {} is outside 8000..384000",
                self.rate
            )));
        }
        if let Some(b) = self.buffer_frames {
            if !(1..=65536).contains(&b) {
                return Err(Error::usage(format!("--buffer {b} is outside 1..65536")));
            }
        }
        if let Some(n) = self.periods {
            if !(2..=64).contains(&n) {
                return Err(Error::usage(format!(
                    "--periods {n} is outside 2..64 (one period of buffering leaves no time to compute)"
                )));
            }
            if self.drivers.contains(&EventDriver::Jack) && self.grid.is_none() {
                return Err(Error::usage(
                    "--periods is the virtual device's n: a JACK server's nperiods is set when it starts (jackd -d alsa -n N) and shows in its playback latency",
                ));
            }
        }
        if self.fifo_frames > 1 << 20 || self.dac_frames > 1 << 20 {
            return Err(Error::usage("--fifo / --dac are at most 1048576 frames"));
        }
        if self.grid.is_some() && self.trigger != TriggerKind::Internal {
            return Err(Error::usage(
                "--grid runs many settings back to back: it needs --trigger internal",
            ));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LatencyStats {
    pub count: u64,
    pub min_ns: i64,
    pub mean_ns: f64,
    pub max_ns: i64,
    /// Sample standard deviation.
    pub std_ns: f64,
}

impl LatencyStats {
    /// Over the trials whose rendering cycle met its deadline. When it did not, the device
    /// played something else in that period and the tone reached the DAC at some later,
    /// unrecorded time: its computed latency is meaningless (seen: −8.6 ms), so such a trial
    /// counts as an under-run, not as a latency.
    pub fn in_time(trials: &[EventTrial]) -> Self {
        Self::of(
            &trials
                .iter()
                .filter(|t| !t.xrun)
                .map(|t| t.latency_ns)
                .collect::<Vec<_>>(),
        )
    }

    pub fn of(v: &[i64]) -> Self {
        if v.is_empty() {
            return LatencyStats::default();
        }
        let n = v.len() as f64;
        let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n;
        let var = if v.len() > 1 {
            v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / (n - 1.0)
        } else {
            0.0
        };
        LatencyStats {
            count: v.len() as u64,
            min_ns: *v.iter().min().expect("non-empty"),
            mean_ns: mean,
            max_ns: *v.iter().max().expect("non-empty"),
            std_ns: var.sqrt(),
        }
    }
}

/// What the model expects for a trigger at a uniformly random phase.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ModelBand {
    /// Trigger just before a period interrupt: output delay + onset.
    pub min_ns: f64,
    /// Half a period more.
    pub mean_ns: f64,
    /// A whole period more.
    pub max_ns: f64,
}

impl ModelBand {
    pub fn new(period_ns: f64, fixed_ns: f64) -> Self {
        ModelBand {
            min_ns: fixed_ns,
            mean_ns: fixed_ns + period_ns / 2.0,
            max_ns: fixed_ns + period_ns,
        }
    }
}

/// One trigger and the sound it produced.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EventTrial {
    pub trial: u32,
    /// Trigger time, CLOCK_MONOTONIC ns, read in the triggering thread.
    pub te_ns: u64,
    /// When the trigger was published to the audio cycle (after the GPIO edge).
    pub published_ns: u64,
    /// Device cycle whose output carried the tone's first sample.
    pub cycle: u64,
    /// That cycle's period interrupt / cycle start (the driver's t_ideal).
    pub t_ideal_ns: u64,
    /// When the cycle that started the tone read the trigger.
    pub seen_ns: u64,
    /// When the cycle before it read the trigger flag and found nothing.
    pub prev_check_ns: u64,
    /// Frame offset of the first non-zero sample in that cycle's output.
    pub onset_frame: u32,
    /// When that sample reaches the DAC.
    pub t_sound_ns: u64,
    /// t_sound − te.
    pub latency_ns: i64,
    /// Virtual device: the absolute device frame at which its output sink saw the tone
    /// start (the device-side view of the same edge).
    pub device_frame: Option<u64>,
    /// The rendering cycle missed its deadline (the device played something else then).
    pub xrun: bool,
}

/// What ran in the background of the mono-bg scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Background {
    /// `top -b -d 0.1`, or the built-in equivalent when top is not installed.
    pub what: String,
    pub record: crate::stress::StressRecord,
}

/// One measured setting: driver × buffer/period × scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EventRun {
    pub driver: EventDriver,
    pub scenario: Scenario,
    pub status: Status,
    pub rate: u32,
    /// Frames per period (cycle).
    pub period_frames: u32,
    /// Periods of buffering n of the virtual device; None on JACK (the server's nperiods is
    /// inside its port latency).
    pub periods: Option<u32>,
    /// Topliss et al.'s buffer column when the run came from a grid pair.
    pub seed_buffer_frames: Option<u32>,
    /// Frames from the start of the rendering cycle to the DAC for its first frame:
    /// virtual (n−1)·period + FIFO + DAC; JACK the playback latency of our output port.
    pub output_delay_frames: u64,
    /// JACK: the playback latency range [min, max] of our output port and where it was read.
    pub playback_latency_frames: Option<[u32; 2]>,
    pub playback_latency_port: Option<String>,
    pub model: ModelBand,
    pub latency: LatencyStats,
    pub trials: Vec<EventTrial>,
    /// Triggers that arrived while a trial was still sounding (stdin/udp); not measured.
    pub ignored_triggers: u64,
    /// Audio cycles run from the first trigger to the last trial's silence, and those that
    /// missed their deadline (our under-runs) in that window.
    pub cycles: u64,
    pub xruns: u64,
    /// Periods played without fresh data over the whole run (warm-up included).
    pub skipped_periods: u64,
    /// JACK: xruns the server reported in that window (its full list is in `jack`); ALSA:
    /// the xruns the device reported and the driver recovered from (list in `alsa`).
    pub server_xruns: Option<u64>,
    /// Virtual device: t_ideal of cycle 0 (the device clock's origin).
    pub device_t0_ns: Option<u64>,
    pub background: Option<Background>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jack: Option<crate::driver::jack::JackReport>,
    /// `--driver alsa`: what the device negotiated, its xruns and delays.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alsa: Option<crate::driver::alsa::AlsaReport>,
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EventResults {
    pub runs: Vec<EventRun>,
    /// Grid settings a backend refused (e.g. a buffer size the JACK server rejects).
    pub skipped: Vec<String>,
}

/// The outcome of `run`.
#[derive(Debug, Clone)]
pub struct EventRunResult {
    pub status: Status,
    pub config: EventConfig,
    pub results: EventResults,
    pub warnings: Vec<String>,
}

// ---------------------------------------------------------------------------------------
// The real-time side
// ---------------------------------------------------------------------------------------

/// State shared between the trigger thread and the audio cycle: atomics only.
#[derive(Default)]
struct Shared {
    /// Trial number of the latest trigger (0 = none yet).
    trigger_seq: AtomicU64,
    /// Trial whose onset was rendered.
    rendered_seq: AtomicU64,
    /// Trial after whose tone a silent period was rendered again.
    silent_seq: AtomicU64,
    cycles: AtomicU64,
    xruns: AtomicU64,
    /// t_ideal of the first cycle seen.
    t0_ns: AtomicU64,
}

/// What the rendering cycle reports, through a wait-free ring.
#[derive(Debug, Clone, Copy)]
struct Onset {
    seq: u64,
    cycle: u64,
    t_ideal_ns: u64,
    seen_ns: u64,
    prev_check_ns: u64,
    onset_frame: u32,
    xrun: bool,
    /// Push drivers: the delay (frames) reported right after the write that carried the
    /// onset, and when it was read.
    write_delay: Option<(i64, u64)>,
}

/// Reads (cycle, delay frames, time read) of the latest period a push driver wrote. Called
/// on the driver thread; must not allocate or block.
pub type DelayProbe = Box<dyn Fn() -> Option<(u64, i64, u64)> + Send>;

#[derive(Debug, Clone, Copy)]
enum Phase {
    Idle,
    /// Note-on sent; waiting for the first non-zero sample.
    Pending {
        seq: u64,
        seen_ns: u64,
        prev_check_ns: u64,
    },
    Sounding {
        left: u32,
    },
    /// Note-off sent; waiting for a silent period.
    Releasing,
}

fn first_sound(out: &[f32]) -> Option<usize> {
    out.iter().position(|&x| x != 0.0)
}

/// Wraps the engine: reads the trigger before each cycle and finds the onset after it.
struct EventHandler {
    engine: Engine,
    sh: Arc<Shared>,
    tx: rtrb::Producer<Onset>,
    phase: Phase,
    seen_seq: u64,
    prev_check_ns: u64,
    tone_cycles: u32,
    /// Push drivers: the onset waits here until the delay of its write is known.
    delay_probe: Option<DelayProbe>,
    held: Option<Onset>,
}

impl EventHandler {
    /// The write of the onset's cycle happened after that cycle's handler returned: pick up
    /// its delay now (a later write means that one failed; the onset goes without).
    fn release_held(&mut self) {
        let (Some(o), Some(p)) = (self.held, &self.delay_probe) else {
            return;
        };
        match p() {
            Some((c, d, at)) if c == o.cycle => {
                let _ = self.tx.push(Onset {
                    write_delay: Some((d, at)),
                    ..o
                });
                self.held = None;
            }
            Some((c, _, _)) if c > o.cycle => {
                let _ = self.tx.push(o);
                self.held = None;
            }
            _ => {}
        }
    }
}

impl CycleHandler for EventHandler {
    fn process_cycle(&mut self, io: &mut AudioIo<'_>, t: &CycleTiming) -> CycleRecord {
        self.release_held();
        // The flag first, then the clock: a trigger seen here was published before `check`,
        // so te <= seen_ns holds exactly.
        let seq = self.sh.trigger_seq.load(Ordering::Acquire);
        let check = monotonic_ns();
        if self.sh.cycles.load(Ordering::Relaxed) == 0 {
            self.sh.t0_ns.store(t.t_ideal_ns, Ordering::Relaxed);
        }
        if let Phase::Idle = self.phase {
            if seq != self.seen_seq {
                self.seen_seq = seq;
                self.engine.note(true);
                self.phase = Phase::Pending {
                    seq,
                    seen_ns: check,
                    prev_check_ns: self.prev_check_ns,
                };
            }
        }
        self.prev_check_ns = check;
        let rec = self.engine.process_cycle(io, t);
        match self.phase {
            Phase::Pending {
                seq,
                seen_ns,
                prev_check_ns,
            } => {
                if let Some(i) = first_sound(io.out_l) {
                    let o = Onset {
                        seq,
                        cycle: t.cycle,
                        t_ideal_ns: t.t_ideal_ns,
                        seen_ns,
                        prev_check_ns,
                        onset_frame: i as u32,
                        xrun: rec.xrun,
                        write_delay: None,
                    };
                    if self.delay_probe.is_some() {
                        self.held = Some(o);
                    } else {
                        let _ = self.tx.push(o);
                    }
                    self.sh.rendered_seq.store(seq, Ordering::Release);
                    self.phase = Phase::Sounding {
                        left: self.tone_cycles,
                    };
                }
            }
            Phase::Sounding { left } => {
                if left <= 1 {
                    self.engine.note(false);
                    self.phase = Phase::Releasing;
                } else {
                    self.phase = Phase::Sounding { left: left - 1 };
                }
            }
            Phase::Releasing => {
                if first_sound(io.out_l).is_none() {
                    self.sh.silent_seq.store(self.seen_seq, Ordering::Release);
                    self.phase = Phase::Idle;
                }
            }
            Phase::Idle => {}
        }
        self.sh.cycles.fetch_add(1, Ordering::Relaxed);
        if rec.xrun {
            self.sh.xruns.fetch_add(1, Ordering::Relaxed);
        }
        rec
    }
}

/// The virtual device's output side: the absolute frames at which the played signal goes
/// from silence to sound (periods the device actually played; late ones were not).
struct OnsetSink {
    sounding: bool,
    onsets: Vec<u64>,
}

impl OnsetSink {
    fn new(capacity: usize) -> Self {
        OnsetSink {
            sounding: false,
            onsets: Vec::with_capacity(capacity),
        }
    }
}

impl OutputSink for OnsetSink {
    fn consume(&mut self, frame: u64, l: &[f32], _r: &[f32], on_time: bool) {
        if !on_time {
            self.sounding = false;
            return;
        }
        match first_sound(l) {
            None => self.sounding = false,
            Some(i) if !self.sounding => {
                self.sounding = true;
                // Capacity reserved up front: no allocation on the device thread.
                if self.onsets.len() < self.onsets.capacity() {
                    self.onsets.push(frame + i as u64);
                }
            }
            Some(_) => {}
        }
    }
    fn stats(&self) -> SinkStats {
        SinkStats::default()
    }
}

/// A sink that only discards (JACK plays the port buffers itself).
struct Discard;
impl OutputSink for Discard {
    fn consume(&mut self, _: u64, _: &[f32], _: &[f32], _: bool) {}
    fn stats(&self) -> SinkStats {
        SinkStats::default()
    }
}

/// How long the tone sounds: at least 5 ms and one period.
fn tone_cycles(period_ns: u64) -> u32 {
    (5_000_000u64.div_ceil(period_ns.max(1))).max(1) as u32
}

// ---------------------------------------------------------------------------------------
// One setting
// ---------------------------------------------------------------------------------------

/// One setting to measure.
#[derive(Debug, Clone)]
struct Setting {
    driver: EventDriver,
    scenario: Scenario,
    period_frames: Option<u32>,
    periods: u32,
    seed_buffer: Option<u32>,
}

/// The engine and its handler for `frames` at `rate`.
fn build_handler(
    scenario: Scenario,
    rate: u32,
    frames: u32,
    policy: Policy,
) -> Result<(
    EventHandler,
    rtrb::Consumer<Onset>,
    Arc<Shared>,
    crate::engine::EngineMonitor,
)> {
    let spec = EngineSpec {
        policy,
        ring_capacity: 64,
        ..EngineSpec::new(
            rate,
            frames as usize,
            1,
            crate::dsp::parse_chain(scenario.chain())?,
        )
    };
    let (engine, _probe) = Engine::new(&spec)?;
    let monitor = engine.monitor();
    let sh = Arc::new(Shared::default());
    let (tx, rx) = rtrb::RingBuffer::new(1024);
    let period_ns = crate::engine::period_ns(rate, frames as usize);
    Ok((
        EventHandler {
            engine,
            sh: sh.clone(),
            tx,
            phase: Phase::Idle,
            seen_seq: 0,
            prev_check_ns: 0,
            tone_cycles: tone_cycles(period_ns),
            delay_probe: None,
            held: None,
        },
        rx,
        sh,
        monitor,
    ))
}

/// What a test (or another driver) sees of one rendered onset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OnsetView {
    pub trial: u64,
    pub cycle: u64,
    pub onset_frame: u32,
    pub write_delay_frames: Option<i64>,
}

/// The trigger side of a handler made by [`cycle_handler`].
pub struct TriggerHandle {
    sh: Arc<Shared>,
    rx: rtrb::Consumer<Onset>,
}

impl TriggerHandle {
    /// Publish trial `seq` (1, 2, …) as the trigger thread does.
    pub fn trigger(&self, seq: u64) {
        self.sh.trigger_seq.store(seq, Ordering::Release);
    }
    /// The latest trial whose onset was rendered.
    pub fn rendered(&self) -> u64 {
        self.sh.rendered_seq.load(Ordering::Acquire)
    }
    /// The latest trial after which silence was rendered again.
    pub fn silent(&self) -> u64 {
        self.sh.silent_seq.load(Ordering::Acquire)
    }
    /// Onsets reported since the last call.
    pub fn onsets(&mut self) -> Vec<OnsetView> {
        drain(&mut self.rx)
            .into_iter()
            .map(|o| OnsetView {
                trial: o.seq,
                cycle: o.cycle,
                onset_frame: o.onset_frame,
                write_delay_frames: o.write_delay.map(|d| d.0),
            })
            .collect()
    }
}

/// The event cycle handler (engine + synth + trigger/onset logic) without a driver: drive
/// its cycles yourself and trigger through the handle. What the drivers of this module run.
pub fn cycle_handler(
    scenario: Scenario,
    rate: u32,
    frames: u32,
) -> Result<(impl CycleHandler + Send, TriggerHandle)> {
    let (h, rx, sh, _) = build_handler(scenario, rate, frames, Policy::Other { nice: 0 })?;
    Ok((h, TriggerHandle { sh, rx }))
}

/// The background of mono-bg: `top -b -d 0.1` when installed, else the built-in stressor
/// that reads /proc every 100 ms the way top does.
fn start_background() -> Result<(crate::stress::StressSession, String)> {
    let have_top = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("top").is_file()));
    let mut spec = crate::stress::StressSpec::default();
    let what = if have_top {
        spec.commands = vec![vec!["top".into(), "-b".into(), "-d".into(), "0.1".into()]];
        "top -b -d 0.1".to_string()
    } else {
        spec.presets = vec![crate::stress::spec::Preset::Top];
        "built-in top (reads /proc every 100 ms; top is not installed)".to_string()
    };
    let s = crate::stress::StressSession::start(&spec, Duration::ZERO)?;
    Ok((s, what))
}

/// What the trigger loop hands back.
struct TrialTimes {
    te: Vec<(u64, u64)>,
    /// (cycles, xruns) counted from the first trigger until the last trial's silence.
    window: (u64, u64),
    ignored: u64,
    interrupted: bool,
    warnings: Vec<String>,
}

/// Trigger `trials` times: wait for the device to run, then per trial wait for a trigger,
/// publish it, and wait for its tone to be rendered and silence restored.
fn trigger_loop(
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
    let mut source = trigger::Source::open(cfg.trigger, period_ns, cfg.seed)?;
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
fn watch<T>(
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
fn trials_on_device_thread<T>(
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
fn trials_from(
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
fn watchdog_warning(wd: Option<&crate::engine::watchdog::WatchdogReport>) -> Option<String> {
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
fn xruns_during_trials(
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

fn drain(rx: &mut rtrb::Consumer<Onset>) -> Vec<Onset> {
    let mut v = Vec::new();
    while let Ok(o) = rx.pop() {
        v.push(o);
    }
    v
}

fn ns_of_frames(frames: u64, rate: u32) -> u64 {
    (frames as u128 * 1_000_000_000 / rate as u128) as u64
}

fn run_virtual(
    cfg: &EventConfig,
    s: &Setting,
    gpio: Option<&GpioLine>,
    progress: &dyn Progress,
) -> Result<EventRun> {
    let frames = s.period_frames.unwrap_or(64);
    let params = DeviceParams {
        rate: cfg.rate,
        frames,
        periods: s.periods,
    };
    let period_ns = params.period_ns();
    let (handler, mut rx, sh, monitor) = build_handler(s.scenario, cfg.rate, frames, cfg.policy)?;
    let _mlock = crate::rt::memory::MemoryLock::acquire()?;
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let (rate, seed) = (cfg.rate, cfg.seed);
    let sink_cap = cfg.trials as usize + 64;
    let th = spawn_rt(
        ThreadSpec {
            name: "xr-event".into(),
            policy: cfg.policy,
            cpus: Vec::new(),
        },
        move || {
            let mut handler = handler;
            let mut drv = crate::driver::virtual_dev::VirtualDriver::new(params, u64::MAX / 4);
            let mut src = Generator::new(SignalKind::Silence, rate, seed);
            let mut sink = OnsetSink::new(sink_cap);
            let (reason, stats) = drv.run(&mut handler, &stop2, &mut src, &mut sink);
            drop(handler);
            (sink, reason, stats)
        },
    )?;
    let (times, wd, (sink, _reason, stats)) =
        trials_on_device_thread(cfg, gpio, &sh, period_ns, progress, th, monitor, &stop)?;
    let t0 = sh.t0_ns.load(Ordering::Relaxed);
    let out_delay =
        (s.periods as u64 - 1) * frames as u64 + cfg.fifo_frames as u64 + cfg.dac_frames as u64;
    let onsets = drain(&mut rx);
    let t_sound = |o: &Onset| {
        Some(
            t0 + ns_of_frames(
                o.cycle * frames as u64 + out_delay + o.onset_frame as u64,
                cfg.rate,
            ),
        )
    };
    let dev = |o: &Onset| {
        let lo = o.cycle * frames as u64;
        sink.onsets
            .iter()
            .copied()
            .find(|&f| f >= lo && f < lo + frames as u64)
    };
    let trials = trials_from(&times.te, &onsets, &t_sound, &dev);
    let mut warnings = times.warnings;
    warnings.extend(watchdog_warning(wd.as_ref()));
    let onset_typ = trials.first().map(|t| t.onset_frame).unwrap_or(0);
    let status = if wd.is_some() {
        Status::Watchdog
    } else if times.interrupted {
        Status::Interrupted
    } else {
        Status::Complete
    };
    Ok(EventRun {
        driver: EventDriver::Virtual,
        scenario: s.scenario,
        status,
        rate: cfg.rate,
        period_frames: frames,
        periods: Some(s.periods),
        seed_buffer_frames: s.seed_buffer,
        output_delay_frames: out_delay,
        playback_latency_frames: None,
        playback_latency_port: None,
        model: ModelBand::new(
            period_ns as f64,
            ns_of_frames(out_delay + onset_typ as u64, cfg.rate) as f64,
        ),
        latency: LatencyStats::in_time(&trials),
        trials,
        ignored_triggers: times.ignored,
        cycles: times.window.0,
        xruns: times.window.1,
        skipped_periods: stats.skipped_periods,
        server_xruns: None,
        device_t0_ns: Some(t0),
        background: None,
        jack: None,
        alsa: None,
        warnings,
    })
}

// ---------------------------------------------------------------------------------------
// JACK
// ---------------------------------------------------------------------------------------

/// A second, passive client that looks at the graph: physical playback ports and the
/// playback latency our port gets once connected.
struct JackProbe {
    client: jack::Client,
}

impl JackProbe {
    fn open(cfg: &crate::driver::jack::JackConfig) -> Result<JackProbe> {
        // Opened before any engine thread exists: connect sets the server name in the
        // environment, where libjack reads it.
        let client = crate::driver::jack::connect(cfg, "xrunlab-event-probe")?;
        Ok(JackProbe { client })
    }

    fn physical_playback(&self) -> Vec<String> {
        self.client.ports(
            None,
            Some("32 bit float mono audio"),
            jack::PortFlags::IS_INPUT | jack::PortFlags::IS_PHYSICAL,
        )
    }

    /// Playback latency of our port connected to `target` (or of `target` itself when ours
    /// cannot be found), and the port it was read from.
    fn playback_latency(&self, target: &str, our_client: &str) -> Option<([u32; 2], String)> {
        let t = self.client.port_by_name(target)?;
        let ours = t
            .get_connections()
            .into_iter()
            .find(|c| c.starts_with(&format!("{our_client}:")));
        let (port, name) = match ours.and_then(|n| self.client.port_by_name(&n).map(|p| (p, n))) {
            Some(x) => x,
            None => (t, target.to_string()),
        };
        let (lo, hi) = port.get_latency_range(jack::LatencyType::Playback);
        Some(([lo, hi], name))
    }
}

fn run_jack(
    cfg: &EventConfig,
    s: &Setting,
    gpio: Option<&GpioLine>,
    progress: &dyn Progress,
) -> Result<EventRun> {
    use crate::driver::jack::JackClient;
    let mut jc = cfg.jack.clone().unwrap_or_default();
    if s.seed_buffer.is_some() {
        // Grid: the period is set on the server for this row; the client puts the
        // server's own size back when the row ends (JackClient restores what it set).
        jc.set_buffer = true;
        jc.buffer_requested = s.period_frames;
    }
    let probe = JackProbe::open(&jc)?;
    let mut warnings = Vec::new();
    if jc.connect_out.is_empty() {
        jc.connect_out = probe.physical_playback().into_iter().take(2).collect();
        if jc.connect_out.is_empty() {
            warnings.push(
                "the JACK server has no physical playback port: the latency counts no output path (port latency 0)"
                    .to_string(),
            );
        }
    }
    let client = JackClient::open(&jc, jc.buffer_requested, None)?;
    let mut run = run_jack_client(cfg, s, client, &jc, &probe, gpio, progress)?;
    run.warnings.splice(0..0, warnings);
    Ok(run)
}

fn run_jack_client(
    cfg: &EventConfig,
    s: &Setting,
    client: crate::driver::jack::JackClient,
    jc: &crate::driver::jack::JackConfig,
    probe: &JackProbe,
    gpio: Option<&GpioLine>,
    progress: &dyn Progress,
) -> Result<EventRun> {
    let (rate, frames) = (client.rate, client.frames);
    let period_ns = crate::engine::period_ns(rate, frames as usize);
    let (handler, mut rx, sh, monitor) = build_handler(s.scenario, rate, frames, cfg.policy)?;
    let _mlock = crate::rt::memory::MemoryLock::acquire()?;
    let stop = Arc::new(AtomicBool::new(false));
    let tid = Arc::new(AtomicI32::new(0));
    let (stop2, tid2, seed) = (stop.clone(), tid.clone(), cfg.seed);
    let th = std::thread::Builder::new()
        .name("xr-event-jack".into())
        .spawn(move || {
            client.run(
                handler,
                u64::MAX / 4,
                &stop2,
                Some(Box::new(Generator::new(SignalKind::Silence, rate, seed))),
                Box::new(Discard),
                &mut |t| tid2.store(t, Ordering::SeqCst),
            )
        })
        .map_err(|e| Error::io("spawn the JACK client thread", e))?;
    let t = std::time::Instant::now();
    while tid.load(Ordering::SeqCst) == 0 && !th.is_finished() && t.elapsed().as_secs() < 3 {
        std::thread::sleep(Duration::from_millis(5));
    }
    // tid 0 would make the watchdog demote itself: no process thread yet, nothing to guard.
    let tids: Vec<libc::pid_t> = Some(tid.load(Ordering::SeqCst))
        .filter(|&t| t != 0)
        .into_iter()
        .collect();
    let (watchdog, th) = watch(monitor, tids, period_ns, &cfg.policy, &stop, th, |t| {
        let _ = t.join();
    })?;
    // Our client name may have been made unique by the server; the probe finds our port
    // among the target's connections by the name we asked for.
    let latency_at_start = jc
        .connect_out
        .first()
        .and_then(|p| probe.playback_latency(p, &jc.client_name));
    let finished = || th.is_finished() || watchdog.has_fired();
    let times = trigger_loop(cfg, gpio, &sh, period_ns, &finished, progress);
    // Read again at the end: the server may have recomputed latencies after our connection.
    let latency_at_end = jc
        .connect_out
        .first()
        .and_then(|p| probe.playback_latency(p, &jc.client_name));
    stop.store(true, Ordering::SeqCst);
    let wd = watchdog.finish();
    let outcome = th
        .join()
        .map_err(|_| Error::cannot_measure("the JACK client thread panicked"))?;
    let times = times?;
    let (reason, stats, report) = outcome?;
    let mut warnings = times.warnings;
    let latency = latency_at_end.clone().or(latency_at_start.clone());
    if latency_at_start.as_ref().map(|l| l.0) != latency_at_end.as_ref().map(|l| l.0) {
        warnings.push(format!(
            "the playback latency changed during the run ({:?} → {:?}); the last value is used",
            latency_at_start.map(|l| l.0),
            latency_at_end.map(|l| l.0)
        ));
    }
    let port_lat = latency.as_ref().map(|l| l.0[1]).unwrap_or(0) as u64;
    let onsets = drain(&mut rx);
    let t_sound =
        |o: &Onset| Some(o.t_ideal_ns + ns_of_frames(port_lat + o.onset_frame as u64, rate));
    let trials = trials_from(&times.te, &onsets, &t_sound, &|_| None);
    warnings.extend(watchdog_warning(wd.as_ref()));
    if let Some(c) = &report.param_change {
        warnings.push(format!("JACK: {c}; the run stopped there"));
    }
    // Server xruns while the trials ran (activation and teardown can cause their own).
    let t0 = sh.t0_ns.load(Ordering::Relaxed);
    let server_xruns = xruns_during_trials(
        &times.te,
        &trials,
        period_ns,
        report.server_xrun_events.iter().map(|e| t0 + e.at_ns),
    );
    let onset_typ = trials.first().map(|t| t.onset_frame).unwrap_or(0);
    let status = if report.server_shutdown {
        Status::ServerShutdown
    } else if wd.is_some() {
        Status::Watchdog
    } else if times.interrupted || (reason == StopReason::Stopped && report.param_change.is_some())
    {
        Status::Interrupted
    } else {
        Status::Complete
    };
    Ok(EventRun {
        driver: EventDriver::Jack,
        scenario: s.scenario,
        status,
        rate,
        period_frames: frames,
        periods: None,
        seed_buffer_frames: s.seed_buffer,
        output_delay_frames: port_lat,
        playback_latency_frames: latency.as_ref().map(|l| l.0),
        playback_latency_port: latency.map(|l| l.1),
        model: ModelBand::new(
            period_ns as f64,
            ns_of_frames(port_lat + onset_typ as u64, rate) as f64,
        ),
        latency: LatencyStats::in_time(&trials),
        trials,
        ignored_triggers: times.ignored,
        cycles: times.window.0,
        xruns: times.window.1,
        skipped_periods: stats.skipped_periods,
        server_xruns: Some(server_xruns),
        device_t0_ns: None,
        background: None,
        jack: Some(report),
        alsa: None,
        warnings,
    })
}

// ---------------------------------------------------------------------------------------
// ALSA
// ---------------------------------------------------------------------------------------

/// The engine pushes periods into an ALSA PCM. The onset's sound time is the delay ALSA
/// reported right after the write that carried it, less the frames written after the onset.
fn run_alsa(
    cfg: &EventConfig,
    s: &Setting,
    gpio: Option<&GpioLine>,
    progress: &dyn Progress,
) -> Result<EventRun> {
    use crate::driver::alsa::{AlsaDevice, AlsaDriver};
    let ac = cfg.alsa.clone().unwrap_or_default();
    let want = s.period_frames.unwrap_or(64);
    let dev = AlsaDevice::open(&ac, cfg.rate, want, s.periods)?;
    let (rate, frames, periods) = (dev.rate(), dev.period_frames(), dev.periods());
    let mut warnings = Vec::new();
    if (rate, frames, periods) != (cfg.rate, want, s.periods) {
        warnings.push(format!(
            "ALSA device '{}' negotiated {rate} Hz, period {frames} × {periods} (asked {} Hz, {want} × {})",
            ac.device, cfg.rate, s.periods
        ));
    }
    let period_ns = crate::engine::period_ns(rate, frames as usize);
    let mut drv = AlsaDriver::new(dev, u64::MAX / 4);
    let wd = drv.write_delay();
    let (mut handler, mut rx, sh, monitor) = build_handler(s.scenario, rate, frames, cfg.policy)?;
    handler.delay_probe = Some(Box::new(move || wd.latest()));
    let _mlock = crate::rt::memory::MemoryLock::acquire()?;
    let stop = Arc::new(AtomicBool::new(false));
    let (stop2, seed) = (stop.clone(), cfg.seed);
    let th = spawn_rt(
        ThreadSpec {
            name: "xr-event-alsa".into(),
            policy: cfg.policy,
            cpus: Vec::new(),
        },
        move || {
            let mut handler = handler;
            let mut src = Generator::new(SignalKind::Silence, rate, seed);
            let (reason, stats) = drv.run(&mut handler, &stop2, &mut src, &mut Discard);
            drop(handler);
            (drv.report(), reason, stats)
        },
    )?;
    let (times, wdr, (report, _reason, stats)) =
        trials_on_device_thread(cfg, gpio, &sh, period_ns, progress, th, monitor, &stop)?;
    let onsets = drain(&mut rx);
    let unmeasured = onsets.iter().filter(|o| o.write_delay.is_none()).count();
    if unmeasured > 0 {
        warnings.push(format!(
            "{unmeasured} onsets were in a period whose write failed (ALSA xrun): not measured"
        ));
    }
    let t_sound = |o: &Onset| {
        o.write_delay.map(|(d, at)| {
            // The onset sample sits (frames − offset) frames before the end of the queue.
            let ahead = d - (frames as i64 - o.onset_frame as i64);
            (at as i64 + ahead * 1_000_000_000 / rate as i64) as u64
        })
    };
    let trials = trials_from(&times.te, &onsets, &t_sound, &|_| None);
    warnings.extend(times.warnings);
    warnings.extend(watchdog_warning(wdr.as_ref()));
    if let Some(e) = &report.error {
        warnings.push(format!("ALSA: {e}"));
    }
    // Device xruns while the trials ran, as for JACK's server xruns.
    let t0 = sh.t0_ns.load(Ordering::Relaxed);
    let device_xruns = xruns_during_trials(
        &times.te,
        &trials,
        period_ns,
        report.xrun_events.iter().map(|e| t0 + e.at_ns),
    );
    let onset_typ = trials.first().map(|t| t.onset_frame).unwrap_or(0);
    // At the period interrupt one period is free and n−1 are queued ahead of the write.
    let queued = (periods as u64 - 1) * frames as u64;
    let status = if wdr.is_some() {
        Status::Watchdog
    } else if times.interrupted {
        Status::Interrupted
    } else {
        Status::Complete
    };
    Ok(EventRun {
        driver: EventDriver::Alsa,
        scenario: s.scenario,
        status,
        rate,
        period_frames: frames,
        periods: Some(periods),
        seed_buffer_frames: s.seed_buffer,
        output_delay_frames: report.delay_frames.mean.max(0.0) as u64,
        playback_latency_frames: None,
        playback_latency_port: None,
        model: ModelBand::new(
            period_ns as f64,
            ns_of_frames(queued + onset_typ as u64, rate) as f64,
        ),
        latency: LatencyStats::in_time(&trials),
        trials,
        ignored_triggers: times.ignored,
        cycles: times.window.0,
        xruns: times.window.1,
        skipped_periods: stats.skipped_periods,
        server_xruns: Some(device_xruns),
        device_t0_ns: None,
        background: None,
        jack: None,
        alsa: Some(report),
        warnings,
    })
}

// ---------------------------------------------------------------------------------------
// The entry point
// ---------------------------------------------------------------------------------------

fn run_setting(
    cfg: &EventConfig,
    s: &Setting,
    gpio: Option<&GpioLine>,
    progress: &dyn Progress,
) -> Result<EventRun> {
    let bg = if s.scenario == Scenario::MonoBg {
        Some(start_background()?)
    } else {
        None
    };
    let outcome = match s.driver {
        EventDriver::Virtual => run_virtual(cfg, s, gpio, progress),
        EventDriver::Jack => run_jack(cfg, s, gpio, progress),
        EventDriver::Alsa => run_alsa(cfg, s, gpio, progress),
    };
    let background = bg.map(|(session, what)| Background {
        what,
        record: session.stop(),
    });
    let mut run = outcome?;
    run.background = background;
    Ok(run)
}

/// The settings a config asks for, in table order; JACK rows of a grid collapse to one per
/// period (the server's nperiods is not ours to change).
fn settings(cfg: &EventConfig) -> Vec<Setting> {
    let mut out = Vec::new();
    match &cfg.grid {
        None => {
            for &sc in &cfg.scenarios {
                out.push(Setting {
                    driver: cfg.drivers[0],
                    scenario: sc,
                    period_frames: cfg.buffer_frames,
                    periods: cfg.periods.unwrap_or(2),
                    seed_buffer: None,
                });
            }
        }
        Some(pairs) => {
            for &d in &cfg.drivers {
                let mut periods_seen = Vec::new();
                for p in pairs {
                    if d == EventDriver::Jack {
                        if periods_seen.contains(&p.period_frames) {
                            continue;
                        }
                        periods_seen.push(p.period_frames);
                    }
                    for &sc in &cfg.scenarios {
                        out.push(Setting {
                            driver: d,
                            scenario: sc,
                            period_frames: Some(p.period_frames),
                            periods: p.periods(),
                            seed_buffer: Some(p.buffer_frames),
                        });
                    }
                }
            }
        }
    }
    out
}

/// Measure every setting the config asks for. A grid row a backend refuses (a buffer size
/// the JACK server rejects) is listed in `skipped`; an interrupt ends the run with what was
/// measured so far.
pub fn run(cfg: &EventConfig, progress: &dyn Progress) -> Result<EventRunResult> {
    cfg.validate()?;
    // A missing GPIO chip is known before anything starts.
    let gpio = cfg.gpio.as_ref().map(GpioLine::open).transpose()?;
    let list = settings(cfg);
    let mut runs = Vec::new();
    let mut skipped = Vec::new();
    let mut status = Status::Complete;
    progress.set_total(cfg.trials as u64);
    for s in &list {
        progress.set_message(&format!(
            "{} {}{} {}",
            s.driver.name(),
            s.period_frames.map(|p| p.to_string()).unwrap_or_default(),
            if s.driver == EventDriver::Virtual {
                format!("×{}", s.periods)
            } else {
                String::new()
            },
            s.scenario.name()
        ));
        progress.set_position(0);
        match run_setting(cfg, s, gpio.as_ref(), progress) {
            Ok(r) => {
                let st = r.status;
                runs.push(r);
                if st != Status::Complete {
                    status = st;
                    break;
                }
            }
            Err(e) if cfg.grid.is_some() && e.exit_code() == crate::error::EXIT_CANNOT_MEASURE => {
                skipped.push(format!(
                    "{} period {} ({}): {e}",
                    s.driver.name(),
                    s.period_frames.unwrap_or(0),
                    s.scenario.name()
                ));
                if e.to_string().contains(crate::driver::jack::NO_SERVER) {
                    return Err(e);
                }
            }
            Err(e) => return Err(e),
        }
        if crate::rt::interrupt::requested() {
            status = Status::Interrupted;
            break;
        }
    }
    progress.finish();
    let mut warnings: Vec<String> = Vec::new();
    for r in &runs {
        for w in &r.warnings {
            if !warnings.contains(w) {
                warnings.push(w.clone());
            }
        }
    }
    Ok(EventRunResult {
        status,
        config: cfg.clone(),
        results: EventResults { runs, skipped },
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_parse_and_map_to_periods() {
        let p = parse_pairs("256/64, 512/32").unwrap();
        assert_eq!(p[0].periods(), 4);
        assert_eq!(p[1].periods(), 16);
        for bad in ["256", "256/0", "100/64", "64/64", "x/8", ""] {
            assert!(parse_pairs(bad).is_err(), "{bad}");
        }
        assert!(SEED_PAIRS.iter().all(|p| (2..=64).contains(&p.periods())));
    }

    #[test]
    fn stats_are_sample_statistics() {
        let s = LatencyStats::of(&[1, 2, 3, 4]);
        assert_eq!((s.min_ns, s.max_ns, s.count), (1, 4, 4));
        assert_eq!(s.mean_ns, 2.5);
        assert!((s.std_ns - (5.0f64 / 3.0).sqrt()).abs() < 1e-12);
        assert_eq!(LatencyStats::of(&[]).count, 0);
    }

    #[test]
    fn onset_sink_sees_each_silence_to_sound_edge_once() {
        let mut s = OnsetSink::new(4);
        let z = [0.0f32; 4];
        let mut a = [0.0f32; 4];
        a[2] = 0.5;
        let b = [0.3f32; 4];
        s.consume(0, &z, &z, true);
        s.consume(4, &a, &a, true);
        s.consume(8, &b, &b, true);
        s.consume(12, &z, &z, true);
        s.consume(16, &b, &b, false);
        s.consume(20, &b, &b, true);
        assert_eq!(s.onsets, vec![6, 20]);
    }

    #[test]
    fn grid_settings_collapse_jack_rows_per_period() {
        let mut c = EventConfig::new(EventDriver::Virtual);
        c.drivers = vec![EventDriver::Virtual, EventDriver::Jack];
        c.scenarios = Scenario::ALL.to_vec();
        c.grid = Some(parse_pairs("128/64,256/64,256/128").unwrap());
        let s = settings(&c);
        let v = s
            .iter()
            .filter(|x| x.driver == EventDriver::Virtual)
            .count();
        let j = s.iter().filter(|x| x.driver == EventDriver::Jack).count();
        assert_eq!((v, j), (9, 6));
    }
}
