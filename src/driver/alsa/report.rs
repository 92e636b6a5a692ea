//! What the result's `alsa` section holds: the negotiated device, its delays and its xruns.

use super::{AlsaAccess, AlsaXrun};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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
pub(super) struct DelayAcc {
    min: i64,
    max: i64,
    sum: f64,
    n: u64,
}

impl DelayAcc {
    pub(super) const EMPTY: DelayAcc = DelayAcc {
        min: i64::MAX,
        max: i64::MIN,
        sum: 0.0,
        n: 0,
    };
    pub(super) fn add(&mut self, d: i64) {
        self.min = self.min.min(d);
        self.max = self.max.max(d);
        self.sum += d as f64;
        self.n += 1;
    }
    pub(super) fn finish(&self, rate: u64) -> Option<DelayFrames> {
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
