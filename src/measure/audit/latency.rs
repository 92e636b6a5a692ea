//! Latency (docs/methods.md "Plugin audit"): the latency the plugin reports against the delay
//! of an impulse through it. The delay is the first output sample reaching half the
//! response's peak: the direct path of an EQ, a compressor or a reverb with its dry signal,
//! the centre of a linear-phase filter.

use super::{AuditConfig, Check, Stage, Subject, Verdict};

/// Impulse height: −6 dBFS, loud enough to stand out, not so loud a limiter flattens it.
const IMPULSE: f32 = 0.5;
/// A response peak below this (−80 dBFS) is no response.
const NO_RESPONSE: f32 = 1e-4;
/// Frames the measured delay may differ from the reported one (interpolating filters).
const TOLERANCE: u32 = 2;
/// The loudest output sample must hold at least this share of the response's energy for its
/// position to be a delay.
const MIN_CONCENTRATION: f64 = 0.05;
/// Seconds after the loudest sample from which energy counts as a tail.
const TAIL_AFTER_S: f64 = 0.02;
/// A response with more than this share of its energy in the tail is a reverb's: its loudest
/// sample is a strong early reflection (a sparse reverb puts over 5% in one), not a delay.
const MAX_TAIL: f64 = 0.5;

pub fn check(s: &Subject, cfg: &AuditConfig, stage: &mut dyn Stage) -> Check {
    if !s.has_audio_in() {
        return Check::new(
            "latency",
            Verdict::Skip,
            "no audio input to send an impulse through",
        );
    }
    let (rate, frames) = (cfg.cost_rate, cfg.cost_block as usize);
    stage.set(&format!("measuring latency at {frames} frames/{rate} Hz"));
    let mut p = match s.instantiate(rate, frames) {
        Ok(p) => p,
        Err(e) => {
            return Check::new(
                "latency",
                Verdict::Fail,
                format!("could not instantiate: {e}"),
            )
        }
    };
    let (mut l, mut r) = (vec![0.0f32; frames], vec![0.0f32; frames]);
    for _ in 0..16 {
        l.fill(0.0);
        r.fill(0.0);
        p.process(&mut l, &mut r);
    }
    let window = rate as usize;
    let mut y = Vec::with_capacity(window + frames);
    let mut first = true;
    while y.len() < window {
        l.fill(0.0);
        r.fill(0.0);
        if first {
            l[0] = IMPULSE;
            r[0] = IMPULSE;
            first = false;
        }
        p.process(&mut l, &mut r);
        y.extend(l.iter().zip(r.iter()).map(|(a, b)| {
            if a.is_finite() && b.is_finite() {
                a.abs().max(b.abs())
            } else {
                0.0
            }
        }));
    }
    let reported = p.latency_frames();
    let said = reported
        .map(|f| format!("reports {f}"))
        .unwrap_or_else(|| "reports none".into());
    let peak = y.iter().copied().fold(0.0f32, f32::max);
    if peak < NO_RESPONSE {
        return Check::new(
            "latency",
            Verdict::Warn,
            format!(
                "no response to an impulse within {} ms ({said})",
                1000 * window / rate as usize
            ),
        );
    }
    // A delay, an EQ, a compressor put most of the impulse's energy in a few samples; a
    // reverb without its dry signal spreads it over thousands, and its first reflection is
    // no latency.
    let sq = |v: &f32| (*v as f64) * (*v as f64);
    let energy: f64 = y.iter().map(sq).sum::<f64>().max(f64::MIN_POSITIVE);
    let concentration = (peak as f64).powi(2) / energy;
    let loudest = y.iter().position(|&v| v == peak).unwrap_or(0);
    let tail_from = (loudest + (TAIL_AFTER_S * rate as f64) as usize).min(y.len());
    let tail = y[tail_from..].iter().map(sq).sum::<f64>() / energy;
    if concentration < MIN_CONCENTRATION || tail > MAX_TAIL {
        return Check::new(
            "latency",
            Verdict::Skip,
            format!(
                "no direct path to time: the impulse comes out spread (its loudest sample holds {:.1}% of the energy, {:.0}% comes over 20 ms after it; a reverb?); {said}",
                100.0 * concentration,
                100.0 * tail
            ),
        );
    }
    let measured = y.iter().position(|&v| v >= 0.5 * peak).unwrap_or(0) as u32;
    let diff = measured.abs_diff(reported.unwrap_or(0));
    Check::new(
        "latency",
        if diff <= TOLERANCE {
            Verdict::Pass
        } else {
            Verdict::Fail
        },
        format!("measured {measured} frames, {said}"),
    )
    .value(measured as f64)
}
