//! Cost (docs/methods.md "Plugin audit"): the thread CPU time of every block (preemption by
//! other work on the machine does not count), on noise, while the controls move, and on the
//! silence after the noise; tails, periodic bursts (a burst every N blocks, the Dragonfly
//! case), silence against noise (denormals) and moving against still.

use super::{AuditConfig, Check, Feed, Stage, Subject, Verdict};
use crate::rt::clock::thread_cpu_ns;

/// How far past the mean (in shares of the block's duration) a p99.9 must reach to warn or
/// fail: a tail that eats less of the deadline is no danger live, and smaller ones come and
/// go with the machine's other work even in thread CPU time (interrupts are charged to the
/// thread they interrupt).
const TAIL_WARN: f64 = 0.05;
const TAIL_FAIL: f64 = 0.25;

/// A phase stops early past this much CPU time (a very heavy plugin), keeping what it has.
const PHASE_BUDGET_NS: u64 = 4_000_000_000;

/// Time `n` blocks, `before` preparing each one (off the clock).
fn timed(
    p: &mut dyn crate::dsp::Plugin,
    feed: &mut Feed,
    n: usize,
    mut before: impl FnMut(usize, &mut dyn crate::dsp::Plugin, &mut Feed),
) -> Vec<u64> {
    let mut t = Vec::with_capacity(n);
    let start = thread_cpu_ns();
    for b in 0..n {
        before(b, p, feed);
        let t0 = thread_cpu_ns();
        feed.process(p);
        t.push(thread_cpu_ns().saturating_sub(t0));
        if t0.saturating_sub(start) > PHASE_BUDGET_NS {
            break;
        }
    }
    t
}

fn mean(x: &[u64]) -> f64 {
    x.iter().sum::<u64>() as f64 / x.len().max(1) as f64
}

fn quantile(x: &[u64], q: f64) -> f64 {
    let mut v = x.to_vec();
    v.sort_unstable();
    if v.is_empty() {
        return 0.0;
    }
    v[((q * (v.len() - 1) as f64).round() as usize).min(v.len() - 1)] as f64
}

fn us(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.1} µs", ns / 1e3)
    }
}

/// Blocks that stand out, and the period between them when they recur regularly.
#[derive(Debug, PartialEq)]
pub struct Bursts {
    /// The blocks of the regular bursts (empty when there is no period).
    pub spikes: Vec<usize>,
    /// Blocks between bursts.
    pub period: Option<usize>,
}

/// Regular bursts among the blocks above 3× the median and at least `floor_ns` above it.
/// A spike belongs to period P when another spike lies P (±1) blocks before or after it;
/// the period is the smallest P whose bursts reach nearly the best count, and it counts
/// when at least 4 bursts and 60% of the run's expected ones (len/P) are there. Isolated
/// spikes from elsewhere on the machine neither make a period nor break one.
pub fn bursts(t: &[u64], floor_ns: f64) -> Bursts {
    let med = quantile(t, 0.5);
    let spike: Vec<bool> = t
        .iter()
        .map(|&x| x as f64 > 3.0 * med && x as f64 - med > floor_ns)
        .collect();
    let at = |i: isize| i >= 0 && (i as usize) < t.len() && spike[i as usize];
    let members = |p: usize| -> Vec<usize> {
        (0..t.len())
            .filter(|&i| spike[i])
            .filter(|&i| {
                let i = i as isize;
                let p = p as isize;
                (-1..=1).any(|d| at(i + p + d) || at(i - p - d))
            })
            .collect()
    };
    let counts: Vec<(usize, usize)> = (2..=t.len() / 4).map(|p| (p, members(p).len())).collect();
    let best = counts.iter().map(|c| c.1).max().unwrap_or(0);
    let found = counts
        .iter()
        .find(|&&(p, n)| n >= 4 && 10 * n >= 9 * best && 10 * n >= 6 * (t.len() / p));
    // Tolerance makes P−1 qualify as well as P: of the first qualifying P and the next, the
    // one more spikes match exactly.
    let exact = |p: usize| {
        (0..t.len())
            .filter(|&i| spike[i] && at((i + p) as isize))
            .count()
    };
    let found = found.map(|&(p, n)| {
        if exact(p + 1) > exact(p) {
            (p + 1, n)
        } else {
            (p, n)
        }
    });
    match found {
        Some((p, _)) => Bursts {
            spikes: members(p),
            period: Some(p),
        },
        None => Bursts {
            spikes: Vec::new(),
            period: None,
        },
    }
}

pub fn checks(s: &Subject, cfg: &AuditConfig, stage: &mut dyn Stage) -> Vec<Check> {
    let (rate, frames) = (cfg.cost_rate, cfg.cost_block as usize);
    stage.set(&format!("processing at {frames} frames/{rate} Hz (cost)"));
    let mut p = match s.instantiate(rate, frames) {
        Ok(p) => p,
        Err(e) => {
            let why = format!("could not instantiate at {frames} frames/{rate} Hz: {e}");
            return ["cost.tail", "cost.burst", "cost.denormal", "cost.params"]
                .iter()
                .map(|id| Check::new(id, Verdict::Fail, why.clone()))
                .collect();
        }
    };
    let period_ns = frames as f64 * 1e9 / rate as f64;
    let n = cfg.cost_blocks.max(64) as usize;
    let mut feed = Feed::new(rate, frames);
    let instrument = s.is_instrument();
    let noise = |b: usize, p: &mut dyn crate::dsp::Plugin, f: &mut Feed| {
        if instrument && b.is_multiple_of(64) {
            p.note_on();
        }
        f.fill(false);
    };
    timed(p.as_mut(), &mut feed, 64, noise);
    let still = timed(p.as_mut(), &mut feed, n, noise);
    let controls = s.controls();
    let mut settable = !controls.is_empty();
    let moving = timed(p.as_mut(), &mut feed, n / 4, |b, p, f| {
        let ph = (b % 64) as f32 / 32.0;
        let x = if ph <= 1.0 { ph } else { 2.0 - ph };
        for c in &controls {
            settable &= p.set_control(c.index, c.at(x));
        }
        noise(b, p, f);
    });
    // Back to the defaults for the silence: the last swept values could mute the plugin.
    let fresh = s.instantiate(rate, frames).ok();
    if let Some(f) = fresh {
        p = f;
        timed(p.as_mut(), &mut feed, 64, noise);
    }
    if instrument {
        p.note_off();
    }
    let silence = timed(p.as_mut(), &mut feed, n, |_, _, f| f.fill(true));
    vec![
        tail_check(&still, period_ns),
        burst_check(&still, period_ns, frames),
        denormal_check(&still, &silence[silence.len() / 2..], period_ns),
        params_check(&still, &moving, controls.len(), settable, period_ns),
    ]
}

fn tail_check(t: &[u64], period_ns: f64) -> Check {
    // A regular burst is the burst check's figure; the tail is what is left around it.
    let b = bursts(t, 0.005 * period_ns);
    let rest: Vec<u64> = if b.period.is_some() {
        (0..t.len())
            .filter(|i| b.spikes.binary_search(i).is_err())
            .map(|i| t[i])
            .collect()
    } else {
        t.to_vec()
    };
    let m = mean(&rest);
    let (p999, max) = (quantile(&rest, 0.999), quantile(&rest, 1.0));
    let ratio = p999 / m.max(1.0);
    let excess = (p999 - m) / period_ns;
    let verdict = if ratio > 10.0 && excess > TAIL_FAIL {
        Verdict::Fail
    } else if ratio > 3.0 && excess > TAIL_WARN {
        Verdict::Warn
    } else {
        Verdict::Pass
    };
    Check::new(
        "cost.tail",
        verdict,
        format!(
            "p99.9 {ratio:.1}× the mean, max {:.1}× (mean {} = {:.2}% of the block's {}){}",
            max / m.max(1.0),
            us(m),
            100.0 * m / period_ns,
            us(period_ns),
            if b.period.is_some() {
                ", regular bursts aside"
            } else {
                ""
            }
        ),
    )
    .value(ratio)
}

fn burst_check(t: &[u64], period_ns: f64, frames: usize) -> Check {
    let b = bursts(t, 0.005 * period_ns);
    let med = quantile(t, 0.5);
    let isolated = {
        let m = quantile(t, 0.5);
        t.iter()
            .filter(|&&x| x as f64 > 3.0 * m && x as f64 - m > 0.005 * period_ns)
            .count()
    };
    match b.period {
        Some(every) => {
            let peak = b.spikes.iter().map(|&i| t[i] as f64).sum::<f64>() / b.spikes.len() as f64;
            let share = peak / period_ns;
            // A burst that adds less than the tail's warning share to the block is reported
            // but passes: machine noise with a period (a 1 Hz timer) looks like that too.
            let verdict = if share > 0.5 {
                Verdict::Fail
            } else if (peak - med) / period_ns > TAIL_WARN {
                Verdict::Warn
            } else {
                Verdict::Pass
            };
            Check::new(
                "cost.burst",
                verdict,
                format!(
                    "a burst every {every} blocks ({} frames): {} = {:.1}× the median, {:.0}% of the block",
                    every * frames,
                    us(peak),
                    peak / med.max(1.0),
                    100.0 * share
                ),
            )
            .value(every as f64)
        }
        None => Check::new(
            "cost.burst",
            Verdict::Pass,
            format!(
                "no periodic burst in {} blocks ({isolated} isolated spikes over 3× the median)",
                t.len()
            ),
        ),
    }
}

fn denormal_check(noise: &[u64], silence: &[u64], period_ns: f64) -> Check {
    let (a, s) = (mean(noise), mean(silence));
    let ratio = s / a.max(1.0);
    let excess = (s - a) / period_ns;
    let verdict = if ratio > 5.0 && excess > 0.01 {
        Verdict::Fail
    } else if ratio > 2.0 && excess > 0.01 {
        Verdict::Warn
    } else {
        Verdict::Pass
    };
    Check::new(
        "cost.denormal",
        verdict,
        format!(
            "on the silence after noise {ratio:.2}× the cost on noise ({} against {} per block){}",
            us(s),
            us(a),
            if verdict == Verdict::Pass {
                ""
            } else {
                ": subnormal numbers in its state?"
            }
        ),
    )
    .value(ratio)
}

fn params_check(still: &[u64], moving: &[u64], n: usize, settable: bool, period_ns: f64) -> Check {
    if n == 0 || !settable {
        return Check::new(
            "cost.params",
            Verdict::Skip,
            if n == 0 {
                "no control input with a range to move"
            } else {
                "its format cannot set controls while it runs"
            },
        );
    }
    let (a, m) = (mean(still), mean(moving));
    let ratio = m / a.max(1.0);
    let max_ratio = quantile(moving, 1.0) / quantile(still, 0.999).max(1.0);
    let excess = (m - a) / period_ns;
    let verdict = if ratio > 2.0 && excess > 0.01 {
        Verdict::Warn
    } else {
        Verdict::Pass
    };
    Check::new(
        "cost.params",
        verdict,
        format!("moving {n} controls: mean {ratio:.2}× still, max {max_ratio:.1}× the still p99.9"),
    )
    .value(ratio)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_burst_is_found_and_noise_is_not() {
        let mut t = vec![1000u64; 1000];
        for i in (5..1000).step_by(16) {
            t[i] = 20_000;
        }
        // Isolated spikes from the rest of the machine, between and beside the bursts.
        let mut x = 12345u32;
        let mut random = vec![1000u64; 1000];
        for _ in 0..40 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let i = x as usize % 1000;
            t[i] = t[i].max(9000);
            random[i] = 9000;
        }
        let b = bursts(&t, 100.0);
        assert_eq!(b.period, Some(16));
        assert!(b.spikes.len() >= 60, "{}", b.spikes.len());
        assert_eq!(bursts(&random, 100.0).period, None);
        let flat = vec![1000u64; 1000];
        assert_eq!(bursts(&flat, 100.0).period, None);
        let mut few = vec![1000u64; 1000];
        few[10] = 50_000;
        few[700] = 50_000;
        assert_eq!(bursts(&few, 100.0).period, None);
    }
}
