//! What `xrunlab event` is asked and what it answers: drivers, scenarios, Topliss et al.'s
//! buffer/period pairs, the config, and the per-setting results with their statistics.

use super::gpio::GpioSpec;
use super::trigger::TriggerKind;
use crate::common::Status;
use crate::driver::DriverKind;
use crate::error::{Error, Result};
use crate::rt::Policy;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The drivers event runs on: every one with a real clock (the sim driver's simulated
/// timeline has no trigger-to-sound time). virtual: the DAC time is exact from the device
/// model; jack: cycle start + playback port latency; alsa: the delay ALSA reports after the
/// write.
pub const DRIVERS: &[DriverKind] = &[DriverKind::Virtual, DriverKind::Jack, DriverKind::Alsa];

/// `--drivers LIST` of a grid: a comma list of [`DRIVERS`], each once, in the order given.
pub fn parse_drivers(list: &str) -> Result<Vec<DriverKind>> {
    let mut v = Vec::new();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let d = DRIVERS
            .iter()
            .copied()
            .find(|d| d.name() == name)
            .ok_or_else(|| {
                Error::usage(format!(
                    "--drivers: event cannot run on '{name}': use virtual, jack or alsa"
                ))
            })?;
        if !v.contains(&d) {
            v.push(d);
        }
    }
    if v.is_empty() {
        return Err(Error::usage("--drivers needs at least one backend"));
    }
    Ok(v)
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
pub struct GridPair {
    pub buffer_frames: u32,
    pub period_frames: u32,
}

impl GridPair {
    pub fn periods(&self) -> u32 {
        self.buffer_frames / self.period_frames
    }
}

/// Every buffer/period pair of Topliss et al.'s Figures 4–7 (ALSA and JACK, USB and Audio Cape).
pub const GRID_PAIRS: [GridPair; 15] = {
    const fn p(buffer_frames: u32, period_frames: u32) -> GridPair {
        GridPair {
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
pub fn parse_pairs(s: &str) -> Result<Vec<GridPair>> {
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
        out.push(GridPair {
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
    pub drivers: Vec<DriverKind>,
    /// Sample rate of the virtual device (JACK: the server's).
    pub rate: u32,
    /// Frames per period (`--buffer`); None = 64 on the virtual device, the server's on JACK.
    pub buffer_frames: Option<u32>,
    /// Periods of buffering n (`--periods`, virtual device); JACK's nperiods belongs to the
    /// server and shows in its playback port latency.
    pub periods: Option<u32>,
    pub scenarios: Vec<Scenario>,
    /// An LV2 instrument (`lv2:…`) played instead of the built-in sine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instrument: Option<String>,
    pub trigger: TriggerKind,
    pub trials: u32,
    pub gpio: Option<GpioSpec>,
    /// Virtual device: output FIFO and DAC latency, frames.
    pub fifo_frames: u32,
    pub dac_frames: u32,
    /// Grid mode: these buffer/period pairs for every driver and scenario.
    pub grid: Option<Vec<GridPair>>,
    pub seed: u64,
    pub policy: Policy,
    pub jack: Option<crate::driver::jack::JackConfig>,
    /// `--driver alsa`: the PCM and access.
    #[serde(default)]
    pub alsa: Option<crate::driver::alsa::AlsaConfig>,
    /// mlockall during the trials (`--no-mlock`: false); results before the option locked.
    #[serde(default = "crate::rt::memory::locked_by_default")]
    pub mlock: bool,
    /// CPUs of the loop thread (`--cpus`); empty: wherever the process may run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpus: Vec<usize>,
}

impl EventConfig {
    pub fn new(driver: DriverKind) -> Self {
        EventConfig {
            drivers: vec![driver],
            rate: 48000,
            buffer_frames: None,
            periods: None,
            scenarios: vec![Scenario::Mono],
            instrument: None,
            trigger: TriggerKind::Internal,
            trials: 200,
            gpio: None,
            fifo_frames: 0,
            dac_frames: 0,
            grid: None,
            seed: 1,
            policy: Policy::fifo(80),
            jack: (driver == DriverKind::Jack).then(Default::default),
            alsa: (driver == DriverKind::Alsa).then(Default::default),
            mlock: true,
            cpus: Vec::new(),
        }
    }

    /// The chain a scenario's engine runs: the instrument if one was given, else the
    /// scenario's built-in synth.
    pub fn chain(&self, s: Scenario) -> &str {
        self.instrument.as_deref().unwrap_or(s.chain())
    }

    pub fn validate(&self) -> Result<()> {
        if self.drivers.is_empty() || self.scenarios.is_empty() {
            return Err(Error::usage("event needs a driver and a scenario"));
        }
        if let Some(i) = &self.instrument {
            if self.scenarios.contains(&Scenario::Poly) {
                return Err(Error::usage(
                    "--instrument replaces the sine of mono and mono-bg; poly is the built-in three-oscillator synth",
                ));
            }
            let chain = crate::dsp::parse_chain(i)?;
            let [e] = chain.as_slice() else {
                return Err(Error::usage(format!(
                    "--instrument {i}: one plugin, e.g. lv2:http://…/synth"
                )));
            };
            let (format, target) =
                crate::dsp::registry::installed_format(&e.plugin).ok_or_else(|| {
                    Error::usage(format!(
                        "--instrument {i}: an installed plugin, written lv2:URI, lv2:NAME, clap:ID or clap:NAME"
                    ))
                })?;
            let d = format.describe(target)?;
            if !d.is_instrument() {
                return Err(Error::usage(format!(
                    "--instrument: {} ({}) has {} — an instrument needs a MIDI (atom sequence) input and no audio input",
                    d.uri,
                    d.name,
                    d.ports_summary()
                )));
            }
            if e.count != 1 {
                return Err(Error::usage("--instrument: one instance, without a count"));
            }
        }
        for d in &self.drivers {
            d.accept("event", DRIVERS)?;
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
            if self.drivers.iter().any(|d| !d.periods_apply()) && self.grid.is_none() {
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
    pub driver: DriverKind,
    pub scenario: Scenario,
    pub status: Status,
    pub rate: u32,
    /// Frames per period (cycle).
    pub period_frames: u32,
    /// Periods of buffering n of the virtual device; None on JACK (the server's nperiods is
    /// inside its port latency).
    pub periods: Option<u32>,
    /// The BUFFER (whole device buffer, Topliss et al.'s notation) of the grid pair this run
    /// came from; None outside a grid. The device may have negotiated otherwise (`periods`),
    /// and a JACK row runs at the server's nperiods.
    pub grid_buffer_frames: Option<u32>,
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
    /// `--forensics`: who took the time of the xruns of this setting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forensics: Option<crate::trace::Forensics>,
    /// In-process only, for `--forensics`: the real-time threads and the xruns' windows.
    #[serde(skip)]
    pub tids: Vec<i32>,
    #[serde(skip)]
    pub xrun_windows: Vec<crate::trace::Window>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EventResults {
    pub runs: Vec<EventRun>,
    /// Grid settings a backend refused (e.g. a buffer size the JACK server rejects).
    pub skipped: Vec<String>,
    /// `--forensics`: the settings' sections merged (`runs[].forensics` has each).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forensics: Option<crate::trace::Forensics>,
}

/// The outcome of `run`.
pub type EventOutcome = crate::measure::session::Outcome<EventConfig, EventResults>;

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
        assert!(GRID_PAIRS.iter().all(|p| (2..=64).contains(&p.periods())));
    }

    #[test]
    fn drivers_list_takes_the_real_clock_drivers_once() {
        assert_eq!(
            parse_drivers("virtual, jack,virtual,alsa").unwrap(),
            [DriverKind::Virtual, DriverKind::Jack, DriverKind::Alsa]
        );
        for bad in ["sim", "virtual,nope", " , "] {
            assert_eq!(parse_drivers(bad).unwrap_err().exit_code(), 2, "{bad}");
        }
    }

    #[test]
    fn stats_are_sample_statistics() {
        let s = LatencyStats::of(&[1, 2, 3, 4]);
        assert_eq!((s.min_ns, s.max_ns, s.count), (1, 4, 4));
        assert_eq!(s.mean_ns, 2.5);
        assert!((s.std_ns - (5.0f64 / 3.0).sqrt()).abs() < 1e-12);
        assert_eq!(LatencyStats::of(&[]).count, 0);
    }
}
