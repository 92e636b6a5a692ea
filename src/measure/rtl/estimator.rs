//! The multi-sine phase estimator of the round trip (the jack_iodelay principle, our own
//! implementation).
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

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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

/// The analysis window W at `rate`: ≈ 1.25 s, a multiple of HOPS and 4 (sine from the cosine
/// table). It is also the longest measurable delay.
pub fn window_frames_at(rate: u32) -> u64 {
    (rate as u64 * 5 / 4).div_ceil(HOPS as u64 * 4) * (HOPS as u64 * 4)
}

/// One analysis hop at `rate`: the window's 32nd part, and the time between estimates.
pub fn hop_frames_at(rate: u32) -> u64 {
    window_frames_at(rate) / HOPS as u64
}

/// Frames a run must pass for one estimate whose window lies wholly after the return began,
/// on a loop of `delay` frames: the hops that start at or after the return, a whole window of
/// them, and one frame more, since a hop is finished by the first frame of the next. An
/// estimate whose window still holds the silence before the return is not one to report.
pub fn frames_for_an_estimate(rate: u32, delay: u64) -> u64 {
    let hop = hop_frames_at(rate);
    (delay.div_ceil(hop) + HOPS as u64) * hop + 1
}

impl Estimator {
    pub fn new(cfg: EstimatorConfig) -> Self {
        let rate = cfg.rate as u64;
        let (w, hop) = (window_frames_at(cfg.rate), hop_frames_at(cfg.rate));
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
            (crate::common::frames_of_ns(cfg.max_duration_ns, cfg.rate) / hop) as usize + 2;
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
            // Silence is the answer whether the disturbances spoiled hops during the run or,
            // reported afterwards, the estimates formed from them.
            None if (self.tainted_hops > 0 || excluded > 0) && !self.return_heard() => {
                outcome = RtlOutcome::TooWeak;
                delay = None;
                spread = None;
                message = format!(
                    "signal too weak: no analysis hop heard a return above {:.0} dBFS (and xruns disturbed {} of {} hops and {excluded} estimates); is the loop connected?",
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
