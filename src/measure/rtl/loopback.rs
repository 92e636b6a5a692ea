//! The virtual analog loopback: what the device plays comes back after FIFO + codec frames
//! and a fractional delay, and the two drivers that run the estimator over it — `sim`
//! (offline, the cycles back to back) and `virtual` (the timer-paced device on an RT thread).

use super::handler::{run_loop, LoopRun, LoopSpec};
use super::model::{model_frames, LoopLatency};
use super::{Estimator, RtlConfig};
use crate::driver::signal::{InputSource, OutputSink, Rng, SinkStats};
use crate::driver::virtual_dev::VirtualDriver;
use crate::engine::harness::Progressing;
use crate::progress::Progress;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The analog side of a virtual loop: what the device plays comes back after FIFO + codec
/// frames (+ a fractional delay), optionally inverted and with noise.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LoopbackSpec {
    pub latency: LoopLatency,
    /// Extra fractional delay in [0, 1) frames (a windowed-sinc fractional-delay filter).
    pub fraction: f64,
    /// Noise relative to the test signal's RMS; None = noise-free.
    pub snr_db: Option<f64>,
    pub invert: bool,
    /// False = the cable is unplugged (input is silence).
    pub connected: bool,
    /// A gain of the return (dB), e.g. to test the weak-signal threshold.
    pub gain_db: f64,
}

impl LoopbackSpec {
    pub fn new(latency: LoopLatency) -> Self {
        LoopbackSpec {
            latency,
            fraction: 0.0,
            snr_db: None,
            invert: false,
            connected: true,
            gain_db: 0.0,
        }
    }
}

const FD_TAPS: usize = 32;
pub(super) const FD_CENTER: usize = FD_TAPS / 2 - 1;

/// The delay line shared by both sides of the loop, in device frame labels: input frame
/// `f` receives output frame `f − total` where `total = n·buffer + FIFO + codec (+fraction)`.
/// Why n·buffer: input labelled for cycle k was captured during the period before
/// t_ideal(k), and output of cycle k starts playing at t_ideal(k) + (n−1)·P.
pub struct LoopLine {
    ring: Vec<f32>,
    mask: u64,
    written_to: u64,
    total_int: u64,
    fir: Option<[f32; FD_TAPS]>,
    gain: f32,
    noise_sd: f64,
    rng: Rng,
    connected: bool,
}

impl LoopLine {
    /// `buffer`, `periods` of the device; `signal_rms` scales the noise for `snr_db`.
    pub fn new(spec: &LoopbackSpec, buffer: u32, periods: u32, signal_rms: f64, seed: u64) -> Self {
        let total_int = model_frames(buffer, periods, &spec.latency);
        let fir = (spec.fraction != 0.0).then(|| fractional_delay_fir(spec.fraction));
        let size = (total_int as usize + 4 * buffer as usize + FD_TAPS + 16).next_power_of_two();
        let gain = 10f64.powf(spec.gain_db / 20.0) * if spec.invert { -1.0 } else { 1.0 };
        LoopLine {
            ring: vec![0.0; size],
            mask: size as u64 - 1,
            written_to: 0,
            total_int,
            fir,
            gain: gain as f32,
            noise_sd: spec
                .snr_db
                .map(|s| signal_rms * 10f64.powf(-s / 20.0) * gain.abs())
                .unwrap_or(0.0),
            rng: Rng::new(seed),
            connected: spec.connected,
        }
    }

    fn at(&self, idx: i64) -> f32 {
        if idx < 0 || idx as u64 >= self.written_to {
            0.0
        } else {
            self.ring[(idx as u64 & self.mask) as usize]
        }
    }

    fn fill_block(&mut self, frame: u64, out: &mut [f32]) {
        for (i, o) in out.iter_mut().enumerate() {
            let f = (frame + i as u64) as i64;
            let v = match &self.fir {
                // The filter's own FD_CENTER frames come out of the integer part.
                Some(h) => {
                    let base = f - self.total_int as i64 + FD_CENTER as i64;
                    h.iter()
                        .enumerate()
                        .map(|(t, c)| c * self.at(base - t as i64))
                        .sum::<f32>()
                }
                None => self.at(f - self.total_int as i64),
            };
            let mut v = if self.connected { v * self.gain } else { 0.0 };
            if self.noise_sd > 0.0 {
                v += (self.noise_sd * self.rng.next_normal()) as f32;
            }
            *o = v;
        }
    }

    fn consume_block(&mut self, frame: u64, l: &[f32], on_time: bool) {
        // A gap (skipped periods) or a late period was silence on the wire.
        while self.written_to < frame {
            let i = (self.written_to & self.mask) as usize;
            self.ring[i] = 0.0;
            self.written_to += 1;
        }
        for (i, &v) in l.iter().enumerate() {
            let idx = ((frame + i as u64) & self.mask) as usize;
            self.ring[idx] = if on_time { v } else { 0.0 };
        }
        self.written_to = self.written_to.max(frame + l.len() as u64);
    }

    /// Whether the loop can be fed causally: input of cycle k needs output of cycle < k.
    pub fn causal(buffer: u32, total_int: u64, fractional: bool) -> bool {
        let need = buffer as u64 + if fractional { FD_CENTER as u64 } else { 0 };
        total_int >= need
    }
}

/// Windowed-sinc taps for a delay of FD_CENTER + `frac` frames (Blackman window, unit DC
/// gain). Over the test tones (≤ 0.11·fs) its phase delay deviates from the target by far
/// less than 0.001 frame (checked by a unit test).
pub fn fractional_delay_fir(frac: f64) -> [f32; FD_TAPS] {
    let mut h = [0.0f64; FD_TAPS];
    let d = FD_CENTER as f64 + frac;
    let n = FD_TAPS as f64;
    for (i, c) in h.iter_mut().enumerate() {
        let x = i as f64 - d;
        let sinc = if x.abs() < 1e-12 {
            1.0
        } else {
            (std::f64::consts::PI * x).sin() / (std::f64::consts::PI * x)
        };
        // Window centred on the fractional delay, not on the tap array.
        let t = (x + n / 2.0) / n;
        let win = if (0.0..=1.0).contains(&t) {
            0.42 - 0.5 * (std::f64::consts::TAU * t).cos()
                + 0.08 * (2.0 * std::f64::consts::TAU * t).cos()
        } else {
            0.0
        };
        *c = sinc * win;
    }
    let s: f64 = h.iter().sum();
    h.map(|c| (c / s) as f32)
}

/// The input half of a loop (the device's capture side).
pub struct LoopSource(pub std::sync::Arc<std::sync::Mutex<LoopLine>>);
/// The output half of a loop (the device's playback side).
pub struct LoopSink(pub std::sync::Arc<std::sync::Mutex<LoopLine>>);

// The driver thread is the only user of the line; the mutex is never contended, it only
// lets one line serve both trait objects.
impl InputSource for LoopSource {
    fn fill(&mut self, frame: u64, l: &mut [f32], r: &mut [f32]) {
        let mut line = self.0.lock().unwrap_or_else(|e| e.into_inner());
        line.fill_block(frame, l);
        r.copy_from_slice(l);
    }
}

impl OutputSink for LoopSink {
    fn consume(&mut self, frame: u64, l: &[f32], _r: &[f32], on_time: bool) {
        let mut line = self.0.lock().unwrap_or_else(|e| e.into_inner());
        line.consume_block(frame, l, on_time);
    }
    fn stats(&self) -> SinkStats {
        SinkStats::default()
    }
}

/// A loop's two halves over one line.
pub fn loopback(line: LoopLine) -> (LoopSource, LoopSink) {
    let a = std::sync::Arc::new(std::sync::Mutex::new(line));
    (LoopSource(a.clone()), LoopSink(a))
}

/// Drive the estimator through a loop offline (no real time): the device's cycles back to
/// back, `buffer` frames each, until converged or `max_frames`. Deterministic for a seed.
pub fn run_offline(est: &mut Estimator, line: &mut LoopLine, buffer: u32, max_frames: u64) -> u64 {
    let b = buffer as usize;
    let (mut inp, mut out) = (vec![0.0f32; b], vec![0.0f32; b]);
    let mut frame = 0;
    while frame < max_frames && !est.converged() {
        line.fill_block(frame, &mut inp);
        est.process(frame, &inp, &mut out);
        line.consume_block(frame, &out, true);
        frame += b as u64;
    }
    frame
}

/// `--driver sim`: the loop offline, its cycles back to back without real time
/// (deterministic for `cfg.seed`).
pub(super) fn run_sim(cfg: &RtlConfig, mut est: Estimator, progress: &dyn Progress) -> LoopRun {
    let buffer = cfg.buffers[0];
    let mut line = LoopLine::new(
        &cfg.loopback,
        buffer,
        cfg.periods,
        est.emitted_rms(),
        cfg.seed,
    );
    progress.set_message("rtl (offline)");
    let max_frames = crate::common::frames_of_ns(cfg.duration_ns, cfg.rate);
    let frames = run_offline(&mut est, &mut line, buffer, max_frames);
    LoopRun::offline(est, frames / buffer as u64)
}

/// The loop on the timer-paced virtual device. The engine is not involved: what is
/// measured is the device's loop, and the estimator is the whole "graph".
pub(super) fn run_virtual(
    cfg: &RtlConfig,
    device: VirtualDriver,
    est: Estimator,
    progress: &dyn Progress,
) -> crate::Result<LoopRun> {
    let line = LoopLine::new(
        &cfg.loopback,
        cfg.buffers[0],
        cfg.periods,
        est.emitted_rms(),
        cfg.seed,
    );
    let (src, sink) = loopback(line);
    let spec = LoopSpec {
        est,
        late_loses_output: true,
        message: "rtl (virtual loop)",
    };
    let looped = run_loop(cfg, device, spec, src, sink, progress, &mut Progressing)?;
    Ok(LoopRun {
        ground_truth: true,
        ..looped.into_run(Vec::new())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fractional_delay_filter_has_the_target_phase_delay_at_the_tones() {
        for &frac in &[0.1, 0.25, 0.5, 0.77] {
            let h = fractional_delay_fir(frac);
            for &f in &[0.02, 0.06, 0.1042] {
                let w = std::f64::consts::TAU * f;
                let (mut re, mut im) = (0.0, 0.0);
                for (n, &c) in h.iter().enumerate() {
                    re += c as f64 * (w * n as f64).cos();
                    im -= c as f64 * (w * n as f64).sin();
                }
                // Phase delay is only known modulo the tone's period 1/f.
                let delay = -im.atan2(re) / w;
                let err = delay - (FD_CENTER as f64 + frac);
                let err = err - (err * f).round() / f;
                assert!(
                    err.abs() < 1e-3,
                    "frac {frac} f {f}: phase delay error {err}"
                );
            }
        }
    }
}
