//! Device-side signals: what the virtual codec feeds the engine's inputs and what it does
//! with the outputs. Both are indexed by the absolute device frame (k·frames), so a skipped
//! period leaves a real gap in the signal, exactly as on hardware.
//!
//! An analog loopback for RTL (output → input after a FIFO + codec delay) is meant to be a
//! type implementing both [`InputSource`] and [`OutputSink`] over one delay line; drivers take
//! `&mut dyn` of each, so adding it touches neither the engine nor the drivers' loops.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A small, fast, seeded PRNG (SplitMix64). Deterministic across platforms; not for crypto.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x5851_f42d_4c95_7f2d)
    }
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    #[inline]
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Standard normal (Box–Muller; one value per call keeps the stream simple).
    pub fn next_normal(&mut self) -> f64 {
        let u1 = self.next_f64().max(f64::MIN_POSITIVE);
        let u2 = self.next_f64();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

/// The input signal of the virtual codec.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum SignalKind {
    Silence,
    /// Uniform white noise at −20 dBFS peak.
    Noise,
    /// A sine at `freq_hz`, amplitude 0.5.
    Sine {
        freq_hz: f64,
    },
}

impl std::str::FromStr for SignalKind {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<Self> {
        let s = s.trim();
        match s {
            "silence" => return Ok(SignalKind::Silence),
            "noise" => return Ok(SignalKind::Noise),
            "sine" => return Ok(SignalKind::Sine { freq_hz: 1000.0 }),
            _ => {}
        }
        if let Some(f) = s.strip_prefix("sine:") {
            let freq_hz: f64 = f
                .trim_end_matches("Hz")
                .trim_end_matches("hz")
                .parse()
                .map_err(|_| crate::Error::usage(format!("bad sine frequency in '{s}'")))?;
            if freq_hz > 0.0 && freq_hz.is_finite() {
                return Ok(SignalKind::Sine { freq_hz });
            }
        }
        Err(crate::Error::usage(format!(
            "bad input signal '{s}': use silence, noise, sine or sine:FREQ"
        )))
    }
}

impl SignalKind {
    /// Whether the signal can be played at `rate` Hz: a sine below Nyquist, as the sine
    /// plugin requires (`sine:FREQ` once ran at any frequency `sine(FREQ)` refused).
    pub fn check(&self, rate: u32) -> crate::Result<()> {
        match self {
            SignalKind::Sine { freq_hz } => {
                match crate::dsp::osc::tone_problem(*freq_hz, 1.0, rate) {
                    Some(why) => Err(crate::Error::usage(format!(
                        "--input sine:{freq_hz}: {why}"
                    ))),
                    None => Ok(()),
                }
            }
            SignalKind::Silence | SignalKind::Noise => Ok(()),
        }
    }
}

/// Fills the engine's input for the period starting at device frame `frame`.
pub trait InputSource: Send {
    fn fill(&mut self, frame: u64, l: &mut [f32], r: &mut [f32]);
}

/// Receives the engine's output for the period starting at `frame`; `on_time` is false when
/// the cycle missed its deadline (the device already played something else in that slot).
pub trait OutputSink: Send {
    fn consume(&mut self, frame: u64, l: &[f32], r: &[f32], on_time: bool);
    fn stats(&self) -> SinkStats;
}

/// A boxed source or sink is one: callers that choose theirs at run time pass a box.
impl<T: InputSource + ?Sized> InputSource for Box<T> {
    fn fill(&mut self, frame: u64, l: &mut [f32], r: &mut [f32]) {
        (**self).fill(frame, l, r)
    }
}

impl<T: OutputSink + ?Sized> OutputSink for Box<T> {
    fn consume(&mut self, frame: u64, l: &[f32], r: &[f32], on_time: bool) {
        (**self).consume(frame, l, r, on_time)
    }
    fn stats(&self) -> SinkStats {
        (**self).stats()
    }
}

pub struct Generator {
    kind: SignalKind,
    rate: f64,
    rng: Rng,
}

impl Generator {
    pub fn new(kind: SignalKind, rate: u32, seed: u64) -> Self {
        Generator {
            kind,
            rate: rate as f64,
            rng: Rng::new(seed),
        }
    }
}

impl InputSource for Generator {
    fn fill(&mut self, frame: u64, l: &mut [f32], r: &mut [f32]) {
        match self.kind {
            SignalKind::Silence => {
                l.fill(0.0);
                r.fill(0.0);
            }
            SignalKind::Noise => {
                for (a, b) in l.iter_mut().zip(r.iter_mut()) {
                    let v = (self.rng.next_f64() * 2.0 - 1.0) as f32 * 0.1;
                    *a = v;
                    *b = v;
                }
            }
            SignalKind::Sine { freq_hz } => {
                let w = 2.0 * std::f64::consts::PI * freq_hz / self.rate;
                for (i, (a, b)) in l.iter_mut().zip(r.iter_mut()).enumerate() {
                    // Phase from the absolute frame so time lost to skipped periods shows.
                    let ph = ((frame + i as u64) as f64 * w) % (2.0 * std::f64::consts::PI);
                    let v = (0.5 * ph.sin()) as f32;
                    *a = v;
                    *b = v;
                }
            }
        }
    }
}

/// What the output sink observed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SinkStats {
    /// Periods delivered in time.
    pub periods_on_time: u64,
    /// Periods delivered after their deadline.
    pub periods_late: u64,
    /// Periods the device played with no fresh data (gaps in the frame sequence).
    pub periods_missing: u64,
    /// Sample-to-sample jumps larger than the input sine allows (only with a sine input).
    pub discontinuities: u64,
    /// Largest absolute output sample, both channels.
    pub peak: f32,
    /// NaN or infinite output samples, both channels (a broken plugin's signature; the peak
    /// cannot show them).
    #[serde(default)]
    pub nonfinite_samples: u64,
}

/// Checks that output periods arrive consecutively and, for a sine input through a linear
/// graph, that the waveform has no jumps steeper than the sine's own maximum slope.
pub struct ContinuitySink {
    expect_frame: Option<u64>,
    max_step: Option<f32>,
    last: Option<f32>,
    stats: SinkStats,
}

impl ContinuitySink {
    pub fn new(input: SignalKind, rate: u32) -> Self {
        let max_step = match input {
            // 1.5× the largest step a unit-peak sine makes between two samples.
            SignalKind::Sine { freq_hz } => {
                Some((1.5 * 2.0 * std::f64::consts::PI * freq_hz / rate as f64) as f32)
            }
            _ => None,
        };
        ContinuitySink {
            expect_frame: None,
            max_step,
            last: None,
            stats: SinkStats::default(),
        }
    }
}

impl OutputSink for ContinuitySink {
    fn consume(&mut self, frame: u64, l: &[f32], r: &[f32], on_time: bool) {
        let n = l.len() as u64;
        if let Some(e) = self.expect_frame {
            if frame > e {
                self.stats.periods_missing += (frame - e) / n.max(1);
                self.last = None;
            }
        }
        self.expect_frame = Some(frame + n);
        if !on_time {
            self.stats.periods_late += 1;
            self.last = None;
            return;
        }
        self.stats.periods_on_time += 1;
        for &v in l.iter().chain(r) {
            let a = v.abs();
            if !a.is_finite() {
                self.stats.nonfinite_samples += 1;
            } else if a > self.stats.peak {
                self.stats.peak = a;
            }
        }
        if let Some(step) = self.max_step {
            // Scale the allowed step by the observed peak so any linear gain is accepted.
            let allowed = step * self.stats.peak.max(1e-6);
            for &v in l {
                if let Some(p) = self.last {
                    if (v - p).abs() > allowed {
                        self.stats.discontinuities += 1;
                    }
                }
                self.last = Some(v);
            }
        }
    }

    fn stats(&self) -> SinkStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sine_through_identity_is_continuous_and_a_gap_is_seen() {
        let kind: SignalKind = "sine:440".parse().unwrap();
        let mut g = Generator::new(kind, 48000, 1);
        let mut s = ContinuitySink::new(kind, 48000);
        let (mut l, mut r) = (vec![0.0; 64], vec![0.0; 64]);
        for k in 0..100u64 {
            g.fill(k * 64, &mut l, &mut r);
            s.consume(k * 64, &l, &r, true);
        }
        assert_eq!(s.stats().discontinuities, 0);
        assert_eq!(s.stats().periods_missing, 0);
        g.fill(105 * 64, &mut l, &mut r);
        s.consume(105 * 64, &l, &r, true);
        assert_eq!(s.stats().periods_missing, 5);
        // A zeroed stretch in the middle of a sine is a jump.
        g.fill(106 * 64, &mut l, &mut r);
        l[10..20].fill(0.0);
        s.consume(106 * 64, &l, &r, true);
        assert!(s.stats().discontinuities > 0);
        assert!("sine:x".parse::<SignalKind>().is_err());
    }

    #[test]
    fn rng_is_deterministic() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        for _ in 0..10 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        let m: f64 = (0..10000).map(|_| a.next_normal()).sum::<f64>() / 10000.0;
        assert!(m.abs() < 0.05);
    }
}
