//! Round-trip latency (Vignati et al. §3.1.3, §3.2.3): the model of eq. 1 and a multi-sine phase
//! estimator (the jack_iodelay principle, our own implementation).
//!
//! ## The estimator
//! All test tones sit on bins of one analysis window of `W` frames (frequency `m/W` cycles
//! per frame), so a sum over any whole window is orthogonal between tones: no leakage, and
//! once the window is clear of the loop's start-up an integer delay in a noise-free loop is
//! recovered to rounding error. The window is a ring of 32
//! hops; a new estimate is formed every hop from the last 32 hop sums, which add because
//! every hop demodulates against the absolute frame index.
//!
//! Hop `h` covers frames `[h·W/32, (h+1)·W/32)`, so its ring slot `h mod 32` is also its place
//! in the tones' common period W: any 32 hops with distinct slots cover every residue of the frame
//! index modulo W once and stay orthogonal, contiguous or not. A hop an xrun or a skipped
//! period disturbed therefore does not enter its slot: the slot keeps the last clean hop of
//! that residue (at most `STALE_HOPS` old), and estimates go on from clean hops alone. On a
//! host that stalls every few hundred milliseconds this is the difference between an estimate
//! and none: no 1.25 s stretch is ever clean there.
//!
//! A returning tone `m` has phase `θ = 2π·off/W − 2π·m·D/W (+π if inverted)`, so
//! `u_m = frac(off/W − θ/2π)` is `m·D/W mod 1`. The difference of two tones `m_a − m_b = d`
//! gives `d·D/W mod 1` (an inversion cancels): d = 1 fixes D modulo W (the maximum
//! measurable delay), d = 16, 256, 4096 refine it step by step (each step only has to be
//! right within 1/32 of its cycle), and the highest tone on its own gives D modulo its
//! period of `W/M` ≈ 9.6 frames at 5 kHz, finely — and tells whether the loop inverts,
//! because an inversion moves that last candidate by half a period.
//!
//! Delays ≥ W would wrap; the per-hop return level gives a coarse onset time that picks the
//! right wrap, so such delays are refused instead of reported wrongly.

use crate::driver::signal::{InputSource, OutputSink, Rng, SinkStats};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

// ---------------------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------------------

/// The loop's fixed latencies besides buffering (Vignati et al. eq. 1).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LoopLatency {
    /// I²S (or other interface) FIFO latency, frames.
    pub fifo_frames: u32,
    /// Converter latencies, frames.
    pub adc_frames: u32,
    pub dac_frames: u32,
}

impl LoopLatency {
    pub fn fixed_frames(&self) -> u64 {
        self.fifo_frames as u64 + self.adc_frames as u64 + self.dac_frames as u64
    }
}

/// Parse `ADC+DAC` (e.g. `2+10`) or a single total.
pub fn parse_codec(s: &str) -> crate::Result<(u32, u32)> {
    let bad = || crate::Error::usage(format!("bad --codec '{s}': use ADC+DAC frames, e.g. 2+10"));
    match s.split_once('+') {
        Some((a, d)) => Ok((
            a.trim().parse().map_err(|_| bad())?,
            d.trim().parse().map_err(|_| bad())?,
        )),
        None => Ok((0, s.trim().parse().map_err(|_| bad())?)),
    }
}

/// A named hardware setup of Vignati et al.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Profile {
    pub name: &'static str,
    pub latency: LoopLatency,
    /// Smallest buffer the study's system ran at (Table 1 prints "-" below it).
    pub min_buffer: u32,
}

pub const PROFILES: [Profile; 2] = [
    Profile {
        name: "xenomai-hifiberry",
        latency: LoopLatency {
            fifo_frames: 13,
            adc_frames: 2,
            dac_frames: 10,
        },
        min_buffer: 16,
    },
    Profile {
        name: "preemptrt-hifiberry",
        latency: LoopLatency {
            fifo_frames: 20,
            adc_frames: 2,
            dac_frames: 10,
        },
        min_buffer: 64,
    },
];

pub fn profile(name: &str) -> crate::Result<Profile> {
    PROFILES
        .iter()
        .find(|p| p.name == name)
        .copied()
        .ok_or_else(|| {
            crate::Error::usage(format!(
                "unknown --profile '{name}': use {}",
                PROFILES.map(|p| p.name).join(" or ")
            ))
        })
}

/// One modelled buffer size.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ModelRow {
    pub buffer_frames: u32,
    /// periods·buffer + FIFO + ADC + DAC.
    pub rtl_frames: u64,
    /// rtl_frames / rate, exactly.
    pub rtl_ms: f64,
    /// The ms value as Vignati et al.'s Table 1 prints it (see [`seed000_ms`]).
    pub seed000_ms: f64,
    /// The profile's system did not run at this buffer size in Vignati et al.
    pub below_profile_min: bool,
}

/// RTL in frames: each of the `periods` periods of buffering delays the loop by one buffer
/// (capture completes one period, playback queues n−1); with n = 2 this is eq. 1's
/// 2·buffer/fs.
pub fn model_frames(buffer: u32, periods: u32, lat: &LoopLatency) -> u64 {
    periods as u64 * buffer as u64 + lat.fixed_frames()
}

/// Table 1(a) of Vignati et al. is not `frames/fs` rounded one way: its cells are the sum of
/// separately rounded terms — the period `buffer/fs` rounded *up* to 0.01 ms, times the
/// periods, plus eq. 2/3's fixed part rounded *down* to 0.01 ms (25/48 → 0.52, 32/48 → 0.66).
/// This reproduces all ten printed cells; the exact value is `rtl_ms`.
pub fn seed000_ms(buffer: u32, periods: u32, rate: u32, lat: &LoopLatency) -> f64 {
    let period_cms = (buffer as u64 * 100_000).div_ceil(rate as u64);
    let fixed_cms = lat.fixed_frames() * 100_000 / rate as u64;
    (periods as u64 * period_cms + fixed_cms) as f64 / 100.0
}

pub fn model_table(
    buffers: &[u32],
    periods: u32,
    rate: u32,
    lat: &LoopLatency,
    min_buffer: u32,
) -> Vec<ModelRow> {
    buffers
        .iter()
        .map(|&b| {
            let f = model_frames(b, periods, lat);
            ModelRow {
                buffer_frames: b,
                rtl_frames: f,
                rtl_ms: f as f64 * 1000.0 / rate as f64,
                seed000_ms: seed000_ms(b, periods, rate, lat),
                below_profile_min: b < min_buffer,
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// The estimator
// ---------------------------------------------------------------------------------------

/// Hops per window. Fine hops make a disturbance cost little: it spoils the one or two
/// 39 ms hops it touches, not an eighth of the window.
const HOPS: usize = 32;
/// A slot's clean hop older than this (4 windows) no longer stands in for a disturbed one:
/// the loop may have changed meanwhile (a JACK client that misses a cycle moves an ALSA
/// plugin loop by a period).
const STALE_HOPS: u64 = 4 * HOPS as u64;
/// A ring slot with no clean hop.
const EMPTY: u64 = u64::MAX;
/// Tone-pair differences, coarse to fine (in bins); the first fixes D modulo W.
const DIFFS: [u64; 4] = [1, 16, 256, 4096];
const TONE_AMP: f64 = 0.15;
/// How still the estimate must be over the last second.
pub const CONVERGED_FRAMES: f64 = 0.01;

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EstimatorConfig {
    pub rate: u32,
    /// Longest run the estimator keeps estimates for (sizes its buffers up front).
    pub max_duration_ns: u64,
    /// Below this return level (dBFS, a full-scale sine = 0) the result is "too weak".
    pub min_level_dbfs: f64,
    /// Below this tone-to-rest ratio the result is "too weak".
    pub min_snr_db: f64,
}

impl EstimatorConfig {
    pub fn new(rate: u32, max_duration_ns: u64) -> Self {
        EstimatorConfig {
            rate,
            max_duration_ns,
            min_level_dbfs: -60.0,
            min_snr_db: 10.0,
        }
    }
}

/// One estimate, every hop, for plotting.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EstimatePoint {
    /// Seconds of stream when the window ended.
    pub t_s: f64,
    /// None when the return was too weak or the delay out of range.
    pub delay_frames: Option<f64>,
    pub inverted: bool,
    pub level_dbfs: f64,
    pub snr_db: f64,
    /// The delay wrapped: it is at least the maximum measurable.
    pub beyond_range: bool,
    /// The window held frames an xrun or skipped period disturbed (lost output or input):
    /// left out of the result and of convergence.
    #[serde(default)]
    pub excluded: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RtlOutcome {
    /// A delay was measured (see `converged`).
    Measured,
    /// The return was below the level or SNR threshold.
    TooWeak,
    /// The delay is at least the maximum measurable delay.
    BeyondRange,
    /// The run ended before a full analysis window.
    NoEstimate,
}

/// What the estimator concluded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RtlMeasurement {
    pub outcome: RtlOutcome,
    /// Mean of the estimates of the last second (frames, with a fraction).
    pub delay_frames: Option<f64>,
    pub delay_ms: Option<f64>,
    pub inverted: Option<bool>,
    /// Stable to `CONVERGED_FRAMES` over the last second.
    pub converged: bool,
    /// Stream time when it first converged.
    pub converged_after_s: Option<f64>,
    /// max − min of the estimates of the last second.
    pub spread_frames: Option<f64>,
    pub level_dbfs: f64,
    pub snr_db: f64,
    pub max_measurable_frames: u64,
    pub max_measurable_ms: f64,
    pub window_frames: u64,
    pub hop_frames: u64,
    pub tones_hz: Vec<f64>,
    /// One estimate per hop.
    pub estimates: Vec<EstimatePoint>,
    /// Estimates left out because a disturbance learnt after they were formed hit a hop of
    /// theirs.
    #[serde(default)]
    pub excluded_estimates: u64,
    /// Analysis hops left out of the ring because an xrun or skipped period touched them
    /// (their slot kept its last clean hop).
    #[serde(default)]
    pub disturbed_hops: u64,
    pub message: String,
}

struct Tone {
    m: u64,
    off: u64,
}

/// Emits the test signal and analyses the return, block by block. `process` neither
/// allocates nor locks: everything is sized in `new`.
pub struct Estimator {
    cfg: EstimatorConfig,
    w: u64,
    hop: u64,
    cos: Vec<f64>,
    tones: Vec<Tone>,
    cur: Vec<[f64; 2]>,
    cur_pow: f64,
    cur_hop: u64,
    ring: Vec<[f64; 2]>,
    ring_pow: [f64; HOPS],
    /// The hop each slot holds (EMPTY: none clean yet).
    slot_hop: [u64; HOPS],
    /// The hops each estimate was formed from, for disturbances learnt later.
    est_hops: Vec<[u64; HOPS]>,
    /// Hops left out because a disturbance touched them.
    tainted_hops: u64,
    hops_done: u64,
    hop_rms: Vec<f64>,
    estimates: Vec<EstimatePoint>,
    converged_at: Option<usize>,
    /// Estimates spanning one second.
    k_second: usize,
    /// Frames `[taint_from, taint_until)` are disturbed (see [`Estimator::disturb`]): a hop
    /// that overlaps them when it finishes stays out of the ring.
    taint_from: u64,
    taint_until: u64,
}

impl Estimator {
    pub fn new(cfg: EstimatorConfig) -> Self {
        let rate = cfg.rate as u64;
        // W ≈ 1.25 s, a multiple of HOPS and 4 (sine from the cosine table).
        let w = (rate * 5 / 4).div_ceil(HOPS as u64 * 4) * (HOPS as u64 * 4);
        let hop = w / HOPS as u64;
        let top = (5000.0f64).min(0.2 * rate as f64);
        let m0 = (top * w as f64 / rate as f64).round() as u64;
        let m0 = m0.max(DIFFS[3] + 64);
        let mut tones = vec![Tone { m: m0, off: 0 }];
        for (i, d) in DIFFS.iter().enumerate() {
            // Spread the starting phases so the tones do not peak together.
            tones.push(Tone {
                m: m0 - d,
                off: w * (i as u64 + 1) * (i as u64 + 1) / 11 % w,
            });
        }
        let cos = (0..w)
            .map(|i| (2.0 * std::f64::consts::PI * i as f64 / w as f64).cos())
            .collect();
        let max_hops =
            (cfg.max_duration_ns as u128 * rate as u128 / 1_000_000_000 / hop as u128) as usize + 2;
        let k_second = (rate as usize).div_ceil(hop as usize) + 1;
        Estimator {
            cfg,
            w,
            hop,
            cos,
            cur: vec![[0.0; 2]; tones.len()],
            ring: vec![[0.0; 2]; tones.len() * HOPS],
            tones,
            cur_pow: 0.0,
            cur_hop: 0,
            ring_pow: [0.0; HOPS],
            slot_hop: [EMPTY; HOPS],
            est_hops: Vec::with_capacity(max_hops),
            tainted_hops: 0,
            hops_done: 0,
            hop_rms: Vec::with_capacity(max_hops),
            estimates: Vec::with_capacity(max_hops),
            converged_at: None,
            k_second,
            taint_from: 0,
            taint_until: 0,
        }
    }

    pub fn window_frames(&self) -> u64 {
        self.w
    }
    pub fn hop_frames(&self) -> u64 {
        self.hop
    }
    pub fn tones_hz(&self) -> Vec<f64> {
        self.tones
            .iter()
            .map(|t| t.m as f64 * self.cfg.rate as f64 / self.w as f64)
            .collect()
    }
    /// RMS of the emitted test signal.
    pub fn emitted_rms(&self) -> f64 {
        TONE_AMP * (self.tones.len() as f64 / 2.0).sqrt()
    }

    /// One block at absolute stream frame `frame`: analyse `input` (the loop's return for
    /// these frames) and write the test signal into `output`. Frames never passed (a
    /// skipped period) count as silence.
    pub fn process(&mut self, frame: u64, input: &[f32], output: &mut [f32]) {
        let w = self.w;
        let q = w / 4 * 3; // sin(x) = cos(x + 3π/2)
        for (i, (o, &y)) in output.iter_mut().zip(input.iter()).enumerate() {
            let n = frame + i as u64;
            let h = n / self.hop;
            while self.cur_hop < h {
                self.finish_hop();
            }
            let y = y as f64;
            let mut x = 0.0;
            for (t, acc) in self.tones.iter().zip(self.cur.iter_mut()) {
                let p = t.m * (n % w) % w;
                x += self.cos[((p + t.off) % w) as usize];
                acc[0] += y * self.cos[p as usize];
                acc[1] -= y * self.cos[((p + q) % w) as usize];
            }
            self.cur_pow += y * y;
            *o = (TONE_AMP * x) as f32;
        }
    }

    fn finish_hop(&mut self) {
        let slot = (self.cur_hop % HOPS as u64) as usize;
        let nt = self.tones.len();
        let (start, end) = (self.cur_hop * self.hop, (self.cur_hop + 1) * self.hop);
        let clean = !(start < self.taint_until && end > self.taint_from);
        if clean {
            self.ring[slot * nt..(slot + 1) * nt].copy_from_slice(&self.cur);
            self.ring_pow[slot] = self.cur_pow;
            self.slot_hop[slot] = self.cur_hop;
        } else {
            self.tainted_hops += 1;
        }
        if self.hop_rms.len() < self.hop_rms.capacity() {
            self.hop_rms.push((self.cur_pow / self.hop as f64).sqrt());
        }
        self.cur.iter_mut().for_each(|a| *a = [0.0; 2]);
        self.cur_pow = 0.0;
        let newest = self.cur_hop;
        self.cur_hop += 1;
        self.hops_done += 1;
        // A new estimate needs new clean data and a clean hop, fresh enough, in every slot.
        let full = self
            .slot_hop
            .iter()
            .all(|&h| h != EMPTY && h + STALE_HOPS > newest);
        if clean && full && self.estimates.len() < self.estimates.capacity() {
            let e = self.estimate();
            self.estimates.push(e);
            self.est_hops.push(self.slot_hop);
            if self.converged_at.is_none() && self.stable_ending(self.estimates.len() - 1) {
                self.converged_at = Some(self.estimates.len() - 1);
            }
        }
    }

    fn estimate(&self) -> EstimatePoint {
        let nt = self.tones.len();
        let w = self.w as f64;
        let t_s = (self.cur_hop * self.hop) as f64 / self.cfg.rate as f64;
        let mut u = [0.0f64; 8];
        let mut tone_pow = 0.0;
        for (j, t) in self.tones.iter().enumerate() {
            let (mut re, mut im) = (0.0, 0.0);
            for s in 0..HOPS {
                re += self.ring[s * nt + j][0];
                im += self.ring[s * nt + j][1];
            }
            let amp = 2.0 * (re * re + im * im).sqrt() / w;
            tone_pow += amp * amp / 2.0;
            let theta = im.atan2(re);
            u[j] = (t.off as f64 / w - theta / std::f64::consts::TAU).rem_euclid(1.0);
        }
        let total_pow = self.ring_pow.iter().sum::<f64>() / w;
        let level_dbfs = 10.0 * (2.0 * tone_pow).max(1e-30).log10();
        let snr_db = 10.0
            * (tone_pow / (total_pow - tone_pow).max(1e-30))
                .max(1e-30)
                .log10();
        let mut p = EstimatePoint {
            t_s,
            delay_frames: None,
            inverted: false,
            level_dbfs,
            snr_db,
            beyond_range: false,
            excluded: false,
        };
        if level_dbfs < self.cfg.min_level_dbfs || snr_db < self.cfg.min_snr_db {
            return p;
        }
        // Coarse to fine over the tone differences.
        let mut d_est = 0.0;
        for (i, &d) in DIFFS.iter().enumerate() {
            let v = (u[0] - u[i + 1]).rem_euclid(1.0);
            let period = w / d as f64;
            d_est = period * (v + (d_est / period - v).round());
        }
        // The top tone alone: fine, and half a period off when the loop inverts.
        let period = w / self.tones[0].m as f64;
        let cand = |inv: f64| {
            let v = (u[0] - inv).rem_euclid(1.0);
            period * (v + (d_est / period - v).round())
        };
        let (c0, c1) = (cand(0.0), cand(0.5));
        let (mut delay, inverted) = if (c0 - d_est).abs() <= (c1 - d_est).abs() {
            (c0, false)
        } else {
            (c1, true)
        };
        // Pick the wrap of W that agrees with when the return started.
        if let Some(onset) = self.onset_frames() {
            let k = ((onset - delay) / w).round();
            delay += k * w;
        }
        p.inverted = inverted;
        if delay >= w {
            p.beyond_range = true;
        } else {
            p.delay_frames = Some(delay);
        }
        p
    }

    /// Coarse time the return appeared: the first hop at half the current hop's level
    /// (that hop then holds ≥ a quarter of full energy, the one before less).
    fn onset_frames(&self) -> Option<f64> {
        let reference = *self.hop_rms.last()?;
        let h = self.hop_rms.iter().position(|&r| r >= 0.5 * reference)?;
        Some((h as f64 + 0.25) * self.hop as f64)
    }

    /// The `k_second` estimates ending at index `i` are all clean numbers of one polarity
    /// within `CONVERGED_FRAMES` of each other.
    fn stable_ending(&self, i: usize) -> bool {
        if i + 1 < self.k_second {
            return false;
        }
        let last = &self.estimates[i + 1 - self.k_second..=i];
        let inv = last[0].inverted;
        let (mut lo, mut hi) = (f64::MAX, f64::MIN);
        for e in last {
            let Some(d) = e.delay_frames else {
                return false;
            };
            if e.excluded || e.inverted != inv {
                return false;
            }
            lo = lo.min(d);
            hi = hi.max(d);
        }
        hi - lo <= CONVERGED_FRAMES
    }

    /// Stream frames `[from, to)` were disturbed: a cycle missed its deadline (its output
    /// never reached the loop) or periods were skipped (neither their input nor their
    /// output exists). The damage reaches the input at those frames and again one loop
    /// delay later, so every hop overlapping `[from, to + delay)` is left out: hops still to
    /// come stay out of the ring, hops in the ring are dropped from it, and estimates formed
    /// from any of them are excluded. Before a delay is known the whole window stands in for
    /// it. Allocation-free: callable from the real-time cycle, and after a run for xruns the
    /// server reported late.
    pub fn disturb(&mut self, from: u64, to: u64) {
        let until = to + self.delay_bound();
        if from > self.taint_until {
            self.taint_from = from;
        } else {
            self.taint_from = self.taint_from.min(from);
        }
        self.taint_until = self.taint_until.max(until);
        let hop = self.hop;
        let hit = |h: u64| h != EMPTY && h * hop < until && (h + 1) * hop > from;
        for h in self.slot_hop.iter_mut() {
            if hit(*h) {
                *h = EMPTY;
            }
        }
        let mut hit_converged = false;
        for (i, (e, used)) in self.estimates.iter_mut().zip(&self.est_hops).enumerate() {
            if !e.excluded && used.iter().any(|&h| hit(h)) {
                e.excluded = true;
                if let Some(c) = self.converged_at {
                    hit_converged |= i + self.k_second > c && i <= c;
                }
            }
        }
        if hit_converged {
            self.converged_at = (0..self.estimates.len()).find(|&i| self.stable_ending(i));
        }
    }

    /// At least the loop delay, for extending a disturbance to where it comes back: the last
    /// clean estimate; before there is one, the end of the hop where the return appeared
    /// (a stalling host may never leave a clean window to estimate from, so waiting for an
    /// estimate would wait forever); before the return appeared, the whole window.
    fn delay_bound(&self) -> u64 {
        if let Some(d) = self
            .estimates
            .iter()
            .rev()
            .find_map(|e| e.delay_frames.filter(|_| !e.excluded))
        {
            return (d.ceil() as u64 + 1).min(self.w);
        }
        if self.return_heard() {
            let loudest = self.hop_rms.iter().cloned().fold(0.0, f64::max);
            if let Some(h) = self.hop_rms.iter().position(|&r| r >= 0.5 * loudest) {
                // The return is established once a later hop exists.
                if h + 1 < self.hop_rms.len() {
                    return ((h as u64 + 1) * self.hop).min(self.w);
                }
            }
        }
        self.w
    }

    /// Some hop carried a return above the level threshold.
    fn return_heard(&self) -> bool {
        let loudest = self.hop_rms.iter().cloned().fold(0.0, f64::max);
        loudest >= 10f64.powf(self.cfg.min_level_dbfs / 20.0)
    }

    /// `disturb` for a disturbance learnt after the run (a server's or device's xrun
    /// report): only one that began before the estimate converged is applied — later ones
    /// came while the loop only waited to stop. True when applied.
    pub fn disturb_before_convergence(&mut self, from: u64, to: u64) -> bool {
        if from >= self.converged_at_frame().unwrap_or(u64::MAX) {
            return false;
        }
        self.disturb(from, to);
        true
    }

    pub fn converged(&self) -> bool {
        self.converged_at.is_some()
    }

    /// Stream frame at which the estimate converged (the end of that window).
    pub fn converged_at_frame(&self) -> Option<u64> {
        self.converged_at
            .map(|i| (self.estimates[i].t_s * self.cfg.rate as f64).round() as u64)
    }

    /// The conclusion so far (allocates: call after the real-time part).
    pub fn result(&self) -> RtlMeasurement {
        let rate = self.cfg.rate as f64;
        // Estimates an xrun disturbed do not count; the last second is the last k_second
        // clean ones.
        let clean: Vec<EstimatePoint> = self
            .estimates
            .iter()
            .filter(|e| !e.excluded)
            .copied()
            .collect();
        let excluded = (self.estimates.len() - clean.len()) as u64;
        let last = clean.last().copied();
        let n = clean.len();
        let tail = &clean[n.saturating_sub(self.k_second)..];
        let valid: Vec<f64> = tail.iter().filter_map(|e| e.delay_frames).collect();
        let (mut outcome, mut delay, mut spread, mut message);
        match last {
            None if self.tainted_hops > 0 && !self.return_heard() => {
                outcome = RtlOutcome::TooWeak;
                delay = None;
                spread = None;
                message = format!(
                    "signal too weak: no analysis hop heard a return above {:.0} dBFS (and xruns disturbed {} of {} hops); is the loop connected?",
                    self.cfg.min_level_dbfs, self.tainted_hops, self.hops_done
                );
            }
            None if excluded > 0 || self.tainted_hops > 0 => {
                outcome = RtlOutcome::NoEstimate;
                delay = None;
                spread = None;
                message = format!(
                    "no estimate: xruns or skipped periods disturbed {} of {} analysis hops and {excluded} estimates, leaving no clean hop of every phase of the window",
                    self.tainted_hops, self.hops_done
                );
            }
            None => {
                outcome = RtlOutcome::NoEstimate;
                delay = None;
                spread = None;
                message = format!(
                    "no estimate: the run must last longer than one analysis window ({:.2} s)",
                    self.w as f64 / rate
                );
            }
            Some(l) if l.beyond_range => {
                outcome = RtlOutcome::BeyondRange;
                delay = None;
                spread = None;
                message = format!(
                    "the delay is beyond the maximum measurable {} frames ({:.1} ms): refused rather than reported modulo the range",
                    self.w,
                    self.w as f64 * 1000.0 / rate
                );
            }
            Some(l) if l.delay_frames.is_none() => {
                outcome = RtlOutcome::TooWeak;
                delay = None;
                spread = None;
                message = format!(
                    "signal too weak: return level {:.1} dBFS, SNR {:.1} dB (need ≥ {:.0} dBFS and ≥ {:.0} dB); is the loop connected?",
                    l.level_dbfs, l.snr_db, self.cfg.min_level_dbfs, self.cfg.min_snr_db
                );
            }
            Some(_) => {
                outcome = RtlOutcome::Measured;
                let vals = if valid.len() == tail.len() {
                    valid.clone()
                } else {
                    vec![last.and_then(|e| e.delay_frames).unwrap_or(0.0)]
                };
                let lo = vals.iter().cloned().fold(f64::MAX, f64::min);
                let hi = vals.iter().cloned().fold(f64::MIN, f64::max);
                delay = Some(vals.iter().sum::<f64>() / vals.len() as f64);
                spread = Some(hi - lo);
                message = if self.converged() {
                    "converged".into()
                } else {
                    format!(
                        "not converged: estimates still move by more than {CONVERGED_FRAMES} frame over a second"
                    )
                };
            }
        }
        if outcome == RtlOutcome::Measured && delay.is_none() {
            outcome = RtlOutcome::NoEstimate;
            spread = None;
            delay = None;
        }
        if self.tainted_hops > 0 && outcome != RtlOutcome::NoEstimate {
            message.push_str(&format!(
                " ({} of {} analysis hops left out: an xrun or skipped period touched them)",
                self.tainted_hops, self.hops_done
            ));
        }
        if excluded > 0 && outcome != RtlOutcome::NoEstimate {
            message.push_str(&format!(
                " ({excluded} of {} estimates left out: an xrun reported later hit their window)",
                self.estimates.len()
            ));
        }
        RtlMeasurement {
            outcome,
            delay_frames: delay,
            delay_ms: delay.map(|d| d * 1000.0 / rate),
            inverted: (outcome == RtlOutcome::Measured)
                .then(|| last.map(|l| l.inverted))
                .flatten(),
            converged: self.converged() && outcome == RtlOutcome::Measured,
            converged_after_s: self.converged_at.map(|i| self.estimates[i].t_s),
            spread_frames: spread,
            level_dbfs: last
                .map(|l| l.level_dbfs)
                .unwrap_or(f64::NEG_INFINITY)
                .max(-200.0),
            snr_db: last
                .map(|l| l.snr_db)
                .unwrap_or(f64::NEG_INFINITY)
                .max(-200.0),
            max_measurable_frames: self.w,
            max_measurable_ms: self.w as f64 * 1000.0 / rate,
            window_frames: self.w,
            hop_frames: self.hop,
            tones_hz: self.tones_hz(),
            estimates: self.estimates.clone(),
            excluded_estimates: excluded,
            disturbed_hops: self.tainted_hops,
            message,
        }
    }
}

// ---------------------------------------------------------------------------------------
// The virtual analog loopback
// ---------------------------------------------------------------------------------------

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
const FD_CENTER: usize = FD_TAPS / 2 - 1;

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

    #[test]
    fn codec_parses() {
        assert_eq!(parse_codec("2+10").unwrap(), (2, 10));
        assert!(parse_codec("2+x").is_err());
    }
}

// ---------------------------------------------------------------------------------------
// `xrunlab rtl`: the library entry point
// ---------------------------------------------------------------------------------------

/// What paces a measured loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RtlDriver {
    /// The virtual device's cycles run back to back without real time (deterministic).
    Sim,
    /// The timer-paced virtual device on an RT thread, its outputs looped back.
    Virtual,
    /// A JACK client: its process callback runs the estimator on its ports (see
    /// `measure::rtl_jack`); the server decides buffer size and rate.
    Jack,
    /// The `alsa` driver in full duplex: playback out, capture in (see
    /// `measure::rtl_alsa`); the device negotiates rate, period and periods.
    Alsa,
}

/// What `xrunlab rtl` was asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RtlConfig {
    /// None = the model only.
    pub driver: Option<RtlDriver>,
    pub profile: Option<String>,
    pub rate: u32,
    /// Buffer sizes modelled (a measured run uses the first).
    pub buffers: Vec<u32>,
    pub periods: u32,
    pub loopback: LoopbackSpec,
    /// Longest measurement; it ends earlier once converged.
    pub duration_ns: u64,
    pub min_level_dbfs: f64,
    pub seed: u64,
    /// Policy of the virtual driver's thread.
    pub policy: crate::rt::Policy,
    /// The JACK client (`--driver jack`): server, name, and the loop's ports — `connect_out`
    /// /`connect_in` hold `--out`/`--in`; both empty = our output into our own input.
    #[serde(default)]
    pub jack: Option<crate::driver::jack::JackConfig>,
    /// The ALSA device (`--driver alsa`): PCM name and access.
    #[serde(default)]
    pub alsa: Option<crate::driver::alsa::AlsaConfig>,
}

impl RtlConfig {
    pub fn model(rate: u32, buffers: Vec<u32>, periods: u32, latency: LoopLatency) -> Self {
        RtlConfig {
            driver: None,
            profile: None,
            rate,
            buffers,
            periods,
            loopback: LoopbackSpec::new(latency),
            duration_ns: 10_000_000_000,
            min_level_dbfs: -60.0,
            seed: 1,
            policy: crate::rt::Policy::fifo(80),
            jack: None,
            alsa: None,
        }
    }

    pub fn validate(&self) -> crate::Result<()> {
        use crate::Error;
        if !(8000..=384_000).contains(&self.rate) {
            return Err(Error::usage(format!(
                "--rate {} is outside 8000..384000",
                self.rate
            )));
        }
        if self.buffers.is_empty() || self.buffers.iter().any(|&b| !(1..=65536).contains(&b)) {
            return Err(Error::usage("buffer sizes must be within 1..65536"));
        }
        if !(2..=64).contains(&self.periods) {
            return Err(Error::usage(format!(
                "--periods {} is outside 2..64",
                self.periods
            )));
        }
        let f = self.loopback.fraction;
        if !(0.0..1.0).contains(&f) {
            return Err(Error::usage(format!("--fraction {f} is outside [0, 1)")));
        }
        if self.driver.is_some() {
            if self.duration_ns == 0 {
                return Err(Error::usage("--duration must be positive"));
            }
            let b = self.buffers[0];
            let total = model_frames(b, self.periods, &self.loopback.latency);
            if !LoopLine::causal(b, total, f != 0.0) {
                return Err(Error::usage(format!(
                    "a fractional delay needs buffer + FIFO + codec ≥ {} frames here (the filter's own delay comes out of them)",
                    b as usize + FD_CENTER
                )));
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RtlResults {
    /// Eq. 1 for every buffer size asked.
    pub model: Vec<ModelRow>,
    pub measured: Option<RtlMeasurement>,
    /// The virtual loop's ground truth: model + fractional delay.
    pub truth_frames: Option<f64>,
    /// measured − model (frames).
    pub difference_frames: Option<f64>,
    /// measured − truth (frames).
    pub error_frames: Option<f64>,
    /// Device cycles run and cycles that missed their deadline (their output was lost).
    pub cycles: u64,
    pub xruns: u64,
    /// Periods the device ran without our cycle (a late cycle made the server skip us).
    #[serde(default)]
    pub skipped_periods: u64,
    /// `--driver jack`: the loop's ports, the server's declared latencies and the extra
    /// latency its `-I`/`-O` would need.
    #[serde(default)]
    pub jack: Option<super::rtl_jack::RtlJack>,
    /// `--driver alsa`: the device as negotiated, the round trip ALSA declares and the
    /// latency it does not.
    #[serde(default)]
    pub alsa: Option<super::rtl_alsa::RtlAlsa>,
}

impl RtlResults {
    /// What the loop's own stack declares for it — the JACK server's port latencies (plus
    /// the graph's period), or ALSA's playback + capture delay at the end of the run — with
    /// measured − declared and what declared it. None on the virtual loop.
    pub fn declared(&self) -> Option<(f64, Option<f64>, &'static str)> {
        if let Some(j) = &self.jack {
            return Some((
                j.declared_frames as f64,
                j.extra_frames,
                "JACK port latencies",
            ));
        }
        let a = self.alsa.as_ref()?;
        let l = a.driver.loop_delay_last_frames?;
        Some((l as f64, a.extra_frames, "ALSA playback + capture delay"))
    }
}

#[derive(Debug, Clone)]
pub struct RtlRunResult {
    pub status: crate::results::Status,
    pub config: RtlConfig,
    pub results: RtlResults,
    pub warnings: Vec<String>,
}

/// Model, and measure when a driver is set.
pub fn run(
    cfg: &RtlConfig,
    progress: &dyn crate::progress::Progress,
) -> crate::Result<RtlRunResult> {
    use crate::results::Status;
    // A JACK server decides buffer size and rate, an ALSA device negotiates rate, period
    // and periods: open them first and model what they serve.
    let mut warnings = Vec::new();
    let (cfg, jack_client, alsa_dev) = match cfg.driver {
        Some(RtlDriver::Jack) => {
            let client = super::rtl_jack::open(cfg)?;
            let mut c = cfg.clone();
            c.rate = client.rate;
            c.buffers = vec![client.frames];
            (std::borrow::Cow::Owned(c), Some(client), None)
        }
        Some(RtlDriver::Alsa) => {
            cfg.validate()?;
            let dev = super::rtl_alsa::open(cfg)?;
            let mut c = cfg.clone();
            (c.rate, c.buffers, c.periods) = (dev.rate(), vec![dev.period_frames()], dev.periods());
            if (c.rate, c.buffers[0], c.periods) != (cfg.rate, cfg.buffers[0], cfg.periods) {
                warnings.push(format!(
                    "ALSA: the device accepted {} Hz, {} frames × {} periods (asked {} Hz, {} × {})",
                    c.rate, c.buffers[0], c.periods, cfg.rate, cfg.buffers[0], cfg.periods
                ));
            }
            (std::borrow::Cow::Owned(c), None, Some(dev))
        }
        _ => (std::borrow::Cow::Borrowed(cfg), None, None),
    };
    let cfg = &*cfg;
    cfg.validate()?;
    let min = cfg
        .profile
        .as_deref()
        .and_then(|p| profile(p).ok())
        .map(|p| p.min_buffer)
        .unwrap_or(0);
    let model = model_table(
        &cfg.buffers,
        cfg.periods,
        cfg.rate,
        &cfg.loopback.latency,
        min,
    );
    let mut res = RtlResults {
        model,
        measured: None,
        truth_frames: None,
        difference_frames: None,
        error_frames: None,
        cycles: 0,
        xruns: 0,
        skipped_periods: 0,
        jack: None,
        alsa: None,
    };
    let Some(driver) = cfg.driver else {
        return Ok(RtlRunResult {
            status: Status::Complete,
            config: cfg.clone(),
            results: res,
            warnings,
        });
    };
    let buffer = cfg.buffers[0];
    let mut ecfg = EstimatorConfig::new(cfg.rate, cfg.duration_ns);
    ecfg.min_level_dbfs = cfg.min_level_dbfs;
    let est = Estimator::new(ecfg);
    let line = LoopLine::new(
        &cfg.loopback,
        buffer,
        cfg.periods,
        est.emitted_rms(),
        cfg.seed,
    );
    let max_frames = (cfg.duration_ns as u128 * cfg.rate as u128 / 1_000_000_000) as u64;
    let lr = match (driver, jack_client, alsa_dev) {
        (RtlDriver::Jack, Some(client), _) => super::rtl_jack::run(cfg, client, est, progress)?,
        (RtlDriver::Alsa, _, Some(dev)) => super::rtl_alsa::run(cfg, dev, est, progress)?,
        (RtlDriver::Jack | RtlDriver::Alsa, _, _) => {
            unreachable!("the JACK client or ALSA device is opened above")
        }
        (RtlDriver::Sim, _, _) => {
            let (mut est, mut line) = (est, line);
            progress.set_message("rtl (offline)");
            let frames = run_offline(&mut est, &mut line, buffer, max_frames);
            super::rtl_jack::LoopRun {
                est: Some(est),
                cycles: frames / buffer as u64,
                xruns: 0,
                skipped: 0,
                interrupted: false,
                warnings: Vec::new(),
                jack: None,
                alsa: None,
            }
        }
        (RtlDriver::Virtual, _, _) => run_virtual(cfg, est, line, max_frames, progress)?,
    };
    progress.finish();
    res.cycles = lr.cycles;
    res.xruns = lr.xruns;
    res.skipped_periods = lr.skipped;
    res.jack = lr.jack;
    res.alsa = lr.alsa;
    warnings.extend(lr.warnings);
    let status = if lr.interrupted {
        Status::Interrupted
    } else {
        Status::Complete
    };
    if res.alsa.is_some() {
        if lr.xruns + lr.skipped > 0 {
            warnings.push(format!(
                "{} cycles ended past the engine's deadline and {} periods were skipped; on an ALSA device only its own xruns lose output, and the estimates around those are left out",
                lr.xruns, lr.skipped
            ));
        }
    } else if lr.xruns + lr.skipped > 0 {
        warnings.push(format!(
            "{} cycles missed their deadline and {} periods were skipped: the estimates whose window they touched are left out",
            lr.xruns, lr.skipped
        ));
    }
    let model_f = model_frames(buffer, cfg.periods, &cfg.loopback.latency) as f64;
    if let Some(est) = lr.est {
        let m = est.result();
        // Only the virtual loop has a ground truth.
        if matches!(driver, RtlDriver::Sim | RtlDriver::Virtual) {
            let truth = model_f + cfg.loopback.fraction;
            res.truth_frames = Some(truth);
            res.error_frames = m.delay_frames.map(|d| d - truth);
        }
        res.difference_frames = m.delay_frames.map(|d| d - model_f);
        if m.outcome == RtlOutcome::Measured && !m.converged {
            warnings.push(m.message.clone());
        }
        res.measured = Some(m);
    }
    Ok(RtlRunResult {
        status,
        config: cfg.clone(),
        results: res,
        warnings,
    })
}

/// The estimator as the whole "graph" of a device cycle: the virtual device's and JACK's
/// loops run this handler.
pub(crate) struct LoopHandler {
    pub(crate) est: Estimator,
    frames: u64,
    /// A copy of the input: a server may hand out one buffer for a port and the port that
    /// feeds it, and the estimator reads and writes sample by sample.
    scratch: Vec<f32>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    pub(crate) cycles: std::sync::Arc<std::sync::atomic::AtomicU64>,
    pub(crate) xruns: u64,
    pub(crate) skipped: u64,
    /// A cycle past its deadline lost its output (virtual device, JACK). An ALSA device
    /// plays a late period if its buffer has not run dry, and reports the times it did as
    /// its own xruns: there only those disturb the loop (see `rtl_alsa`).
    pub(crate) late_loses_output: bool,
}

impl LoopHandler {
    pub(crate) fn new(
        est: Estimator,
        frames: u32,
        stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    ) -> Self {
        LoopHandler {
            est,
            frames: frames as u64,
            scratch: vec![0.0; frames as usize],
            stop,
            cycles: Default::default(),
            xruns: 0,
            skipped: 0,
            late_loses_output: true,
        }
    }
}

impl crate::driver::CycleHandler for LoopHandler {
    fn process_cycle(
        &mut self,
        io: &mut crate::driver::AudioIo<'_>,
        t: &crate::driver::CycleTiming,
    ) -> crate::engine::probe::CycleRecord {
        use std::sync::atomic::Ordering;
        let wake = crate::rt::clock::monotonic_ns();
        // Once converged the handler only waits for the driver to stop: later cycles (and
        // their xruns) must not reach the result.
        let done = self.est.converged();
        let frame = t.cycle * self.frames;
        if done {
            io.out_l.fill(0.0);
        } else {
            let n = io.in_l.len().min(self.scratch.len());
            self.scratch[..n].copy_from_slice(&io.in_l[..n]);
            self.est
                .process(frame, &self.scratch[..n], &mut io.out_l[..n]);
        }
        io.out_r.copy_from_slice(io.out_l);
        let end = crate::rt::clock::monotonic_ns();
        let mut rec = crate::engine::probe::CycleRecord {
            cycle: t.cycle,
            t_ideal_ns: t.t_ideal_ns,
            release_ns: t.release_ns,
            wake_ns: wake,
            end_ns: end,
            deadline_ns: t.deadline_ns,
            ..crate::engine::probe::CycleRecord::EMPTY
        };
        crate::engine::probe::account(&mut rec);
        if t.skipped_before > 0 {
            self.skipped += t.skipped_before as u64;
            if !done {
                // Neither the skipped periods' input nor their output exists.
                let from = frame.saturating_sub(t.skipped_before as u64 * self.frames);
                self.est.disturb(from, frame);
            }
        }
        if rec.xrun {
            self.xruns += 1;
            if !done && self.late_loses_output {
                // This cycle's output missed the device.
                self.est.disturb(frame, frame + self.frames);
            }
        }
        self.cycles.fetch_add(1, Ordering::Relaxed);
        if self.est.converged() {
            self.stop.store(true, Ordering::Relaxed);
        }
        rec
    }
}

/// The loop on the timer-paced virtual device. The engine is not involved: what is
/// measured is the device's loop, and the estimator is the whole "graph".
fn run_virtual(
    cfg: &RtlConfig,
    est: Estimator,
    line: LoopLine,
    max_frames: u64,
    progress: &dyn crate::progress::Progress,
) -> crate::Result<super::rtl_jack::LoopRun> {
    use crate::driver::Driver;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let buffer = cfg.buffers[0];
    let params = crate::driver::DeviceParams {
        rate: cfg.rate,
        frames: buffer,
        periods: cfg.periods,
    };
    let periods_total = max_frames.div_ceil(buffer as u64).max(1);
    let stop = Arc::new(AtomicBool::new(false));
    let mut handler = LoopHandler::new(est, buffer, stop.clone());
    let cycles = handler.cycles.clone();
    let (mut src, mut sink) = loopback(line);
    let stop2 = stop.clone();
    let (h, reason) = on_rt_thread(
        cfg.policy,
        "rtl (virtual loop)",
        periods_total,
        &cycles,
        progress,
        move || {
            let mut drv = crate::driver::virtual_dev::VirtualDriver::new(params, periods_total);
            let (reason, _) = drv.run(&mut handler, &stop2, &mut src, &mut sink);
            (handler, reason)
        },
    )?;
    // Stopping on convergence uses the same flag as a stop request; only a signal counts
    // as interrupted.
    let interrupted = reason == crate::driver::StopReason::Stopped && !h.est.converged();
    Ok(super::rtl_jack::LoopRun {
        cycles: cycles.load(Ordering::Relaxed),
        xruns: h.xruns,
        skipped: h.skipped,
        est: Some(h.est),
        interrupted,
        warnings: Vec::new(),
        jack: None,
        alsa: None,
    })
}

/// Run a device loop on an RT thread (`policy`) and show its cycles as progress until it
/// ends: the virtual and ALSA loops.
pub(crate) fn on_rt_thread<T: Send + 'static>(
    policy: crate::rt::Policy,
    message: &str,
    periods_total: u64,
    cycles: &std::sync::atomic::AtomicU64,
    progress: &dyn crate::progress::Progress,
    body: impl FnOnce() -> T + Send + 'static,
) -> crate::Result<T> {
    let th = crate::rt::thread::spawn_rt(
        crate::rt::thread::ThreadSpec {
            name: "xr-rtl".into(),
            policy,
            cpus: Vec::new(),
        },
        body,
    )?;
    progress.set_total(periods_total);
    progress.set_message(message);
    while !th.is_finished() {
        progress.set_position(cycles.load(std::sync::atomic::Ordering::Relaxed));
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Ok(th.join())
}
