//! The model: one buffer size's chance to miss, its episodes and their intervals, summed
//! over (latency bucket, cost point) pairs.

use super::cost_input::{cost_max, cost_mean};
use super::{
    poisson_high, poisson_low, BusyData, CostPoint, HeldInCompute, Holds, LatencyData, Outlook,
    PredictConfig, PredictRow, Rate, MIN_EVENTS, NS_PER_HOUR,
};

/// How much more (or less) often the audio thread, waking every P, meets a delay whose
/// sample overshot the budget by `e` than the latency measurement, waking every I, did.
/// Per wake-up, each of its wake-ups draws one sample: I/P. As a timed hold, a stall of
/// length D makes a thread with interval Q late by more than x when one of its targets falls
/// in the first D − x of it, with probability min(1, (D − x)/Q); the sample says D ≥ ℓ, and
/// the shortest such stall is taken.
fn weight(e: f64, i: f64, p: f64, holds: Holds) -> f64 {
    if e <= 0.0 {
        0.0
    } else if holds == Holds::Wakeup {
        i / p
    } else {
        (e / p).min(1.0) / (e / i).min(1.0)
    }
}

/// ∫ weight(e) de over [a, b], 0 ≤ a ≤ b, in closed form on its pieces.
fn weight_integral(a: f64, b: f64, i: f64, p: f64, holds: Holds) -> f64 {
    if holds == Holds::Wakeup {
        return (b - a).max(0.0) * i / p;
    }
    let (lo, hi) = (i.min(p), i.max(p));
    let clip = |x0: f64, x1: f64| (a.max(x0), b.min(x1));
    let mut s = 0.0;
    let (x0, x1) = clip(0.0, lo);
    if x1 > x0 {
        s += (x1 - x0) * i / p;
    }
    let (x0, x1) = clip(lo, hi);
    if x1 > x0 {
        s += if i < p {
            (x1 * x1 - x0 * x0) / (2.0 * p)
        } else {
            i * (x1 / x0).ln()
        };
    }
    let (x0, x1) = clip(hi, f64::INFINITY);
    if x1 > x0 {
        s += x1 - x0;
    }
    s
}

/// The largest weight a sample can have: what an unseen sample is bounded by.
fn weight_max(i: f64, p: f64, holds: Holds) -> f64 {
    match holds {
        Holds::Wakeup => i / p,
        Holds::Timed => (i / p).max(1.0),
    }
}

/// Late cycles one stall costs when the driver catches up: cycle m after the late wake-up
/// ends at ℓ + (m+1)·C against its deadline m·P + B, so it is late while m < e / (P − C).
fn cycles_per_stall(e: f64, slack: f64) -> f64 {
    (e / slack).ceil().max(1.0)
}

/// ∫ weight(e)·cycles(e) de over [a, b]: cycles is a step function of e.
fn weighted_cycles_integral(a: f64, b: f64, i: f64, p: f64, slack: f64, holds: Holds) -> f64 {
    let (ja, jb) = ((a / slack).floor(), (b / slack).ceil());
    // NaN (an infinite edge) takes this way too.
    if (jb - ja).partial_cmp(&4096.0) != Some(std::cmp::Ordering::Less) {
        // A bucket far wider than a step: its middle step stands for it.
        return weight_integral(a, b, i, p, holds) * cycles_per_stall((a + b) / 2.0, slack);
    }
    // Steps by index, so that rounding cannot stall the walk at a step's edge.
    (ja as u64..jb as u64)
        .map(|j| {
            let (x0, x1) = (a.max(j as f64 * slack), b.min((j + 1) as f64 * slack));
            if x1 > x0 {
                weight_integral(x0, x1, i, p, holds) * (j + 1) as f64
            } else {
                0.0
            }
        })
        .sum()
}

/// ∫ ceil(u / s) du over [u0, u1], 0 ≤ u0 ≤ u1, in closed form.
fn ceil_integral(u0: f64, u1: f64, s: f64) -> f64 {
    let f = |u: f64| {
        let k = (u / s).ceil();
        s * k * (k - 1.0) / 2.0 + (u - (k - 1.0) * s) * k
    };
    f(u1) - f(u0)
}

/// One cost point's thresholds on the latency axis.
#[derive(Debug, Clone, Copy)]
struct Threshold {
    /// A wake-up later than this misses: B − c.
    miss: f64,
    /// A wake-up later than this (and not missing) leaves the next cycle a backlog: P − c.
    backlog: f64,
    period: f64,
    interval: f64,
    /// P − mean compute: how fast a backlog drains, one cycle at a time.
    slack: f64,
    /// n − 2: periods skipped after a miss besides those the excess covers.
    extra_skip: f64,
    holds: Holds,
}

/// Sums over the samples, per threshold.
#[derive(Debug, Default, Clone, Copy)]
struct Beyond {
    /// Samples beyond the miss threshold (censored ones all counted).
    count: f64,
    /// Samples surely beyond (censored ones only when their whole range is).
    count_low: f64,
    /// Σ weight: episodes.
    episodes: f64,
    /// Σ weight × cycles per stall: late cycles.
    cycles: f64,
    /// Σ device periods that follow a cycle before the next fresh wake-up: the catch-up
    /// cycles a late but timely cycle leaves, the periods a miss skips.
    periods_after: f64,
    censored: bool,
}

fn beyond(d: &LatencyData, t: Threshold) -> Beyond {
    let (x, y, p, i, slack, h) = (t.miss, t.backlog, t.period, t.interval, t.slack, t.holds);
    let mut s = Beyond::default();
    for b in &d.buckets {
        let (lo, hi) = (b.lo_ns as f64, b.hi_ns as f64);
        let n = b.count as f64;
        if hi <= lo {
            let e = lo - x;
            if e > 0.0 {
                s.count += n;
                s.count_low += n;
                s.episodes += n * weight(e, i, p, h);
                s.cycles += n * weight(e, i, p, h) * cycles_per_stall(e, slack);
                s.periods_after += n * (t.extra_skip + (e / p).ceil());
            } else if lo > y {
                s.periods_after += n * ((lo - y) / slack).ceil();
            }
            continue;
        }
        let density = n / (hi - lo);
        let a = lo.max(x);
        if a < hi {
            s.count += density * (hi - a);
            s.count_low += density * (hi - a);
            s.episodes += density * weight_integral(a - x, hi - x, i, p, h);
            s.cycles += density * weighted_cycles_integral(a - x, hi - x, i, p, slack, h);
            s.periods_after +=
                density * (t.extra_skip * (hi - a) + ceil_integral(a - x, hi - x, p));
        }
        let (a, z) = (lo.max(y), hi.min(x));
        if z > a {
            s.periods_after += density * ceil_integral(a - y, z - y, slack);
        }
    }
    for c in &d.censored {
        let (from, max) = (c.from_ns as f64, c.max_ns as f64);
        let n = c.count as f64;
        if max <= x {
            if from > y {
                s.periods_after += n * ((from - y) / slack).ceil();
            }
            continue;
        }
        s.censored = true;
        s.count += n;
        s.count_low += if from > x { n } else { 1.0 };
        let e = max - x;
        s.episodes += n * weight(e, i, p, h);
        s.cycles += n * weight(e, i, p, h) * cycles_per_stall(e, slack);
        s.periods_after += n * (t.extra_skip + (e / p).ceil());
    }
    s
}

/// The holds a busy thread met that would cost an engine computing `c` of each period P a
/// deadline: it meets them when they land in its compute, and misses when a compute's held
/// total is longer than the budget its compute leaves, B − c (its own wake-up delay left
/// out). The totals were measured per compute of the busy share: exact for an engine
/// computing that share, scaled by c/P for another.
#[derive(Debug, Default, Clone, Copy)]
struct InCompute {
    /// Holds beyond B − c (fractional, as `Beyond::count`, mixed over cost points).
    count: f64,
    /// Expected per hour of the engine: holds per exposed ns × c/P of each hour.
    episodes: f64,
    /// The late cycles those cost when the driver catches up.
    cycles: f64,
    /// Per hour per hold counted, at the largest compute share: what bounds an unseen one.
    per_hold_max: f64,
}

fn in_compute(b: &BusyData, cost: &[CostPoint], budget: f64, p: f64, slack: f64) -> InCompute {
    let mut s = InCompute::default();
    for c in cost.iter().filter(|c| c.probability > 0.0) {
        let per_hold = (c.ns / p).clamp(0.0, 1.0) * NS_PER_HOUR / b.exposed_ns;
        s.per_hold_max = s.per_hold_max.max(per_hold);
        let x = budget - c.ns;
        let (mut n, mut cycles) = (0.0, 0.0);
        for h in &b.holds {
            let (lo, hi) = (h.lo_ns as f64, h.hi_ns as f64);
            let count = h.count as f64;
            if hi <= lo {
                if lo > x {
                    n += count;
                    cycles += count * cycles_per_stall(lo - x, slack);
                }
                continue;
            }
            let a = lo.max(x);
            if a < hi {
                let density = count / (hi - lo);
                n += density * (hi - a);
                cycles += density * ceil_integral(a - x, hi - x, slack);
            }
        }
        s.count += c.probability * n;
        s.episodes += c.probability * n * per_hold;
        s.cycles += c.probability * cycles * per_hold;
    }
    s
}

/// One buffer size at n periods.
pub fn row(
    d: &LatencyData,
    cost: &[CostPoint],
    frames: u32,
    n: u32,
    cfg: &PredictConfig,
) -> PredictRow {
    let p = frames as f64 * 1e9 / cfg.rate as f64;
    let budget = (n.max(1) - 1) as f64 * p;
    let c_mean = cost_mean(cost);
    let cycles_per_hour = NS_PER_HOUR / p;
    let overload = c_mean >= p;
    // An overloaded row's rates are set below; a finite slack keeps its sums finite.
    let slack = if overload { p } else { p - c_mean };
    let mut t = Beyond::default();
    for c in cost.iter().filter(|c| c.probability > 0.0) {
        let s = beyond(
            d,
            Threshold {
                miss: budget - c.ns,
                backlog: p - c.ns,
                period: p,
                interval: d.interval_ns as f64,
                slack,
                extra_skip: n.saturating_sub(2) as f64,
                holds: cfg.holds,
            },
        );
        t.count += c.probability * s.count;
        t.count_low += c.probability * s.count_low;
        t.episodes += c.probability * s.episodes;
        t.cycles += c.probability * s.cycles;
        t.periods_after += c.probability * s.periods_after;
        t.censored |= s.censored;
    }
    // Only a cycle that slept draws a wake-up latency: one that starts at once behind a
    // late predecessor drains the backlog by P − C per cycle and cannot miss while C < P
    // (docs/methods.md). Each fresh wake-up owns itself and the periods after it
    // until the next; the rates are per device period, so they scale by that share.
    let fresh = 1.0 / (1.0 + t.periods_after / d.samples.max(1) as f64);
    let hours = d.observed_ns / NS_PER_HOUR / fresh;
    let i = d.interval_ns as f64;
    let w_max = weight_max(i, p, cfg.holds);
    let held = d
        .busy
        .as_ref()
        .map(|b| in_compute(b, cost, budget, p, slack));
    let h = held.unwrap_or_default();
    let alpha = 1.0 - cfg.confidence;
    // Both rates scale the same interval on the count (the costly part of a row): once.
    // The wake-ups and the holds in compute are two Poisson counts; their sum's interval,
    // scaled by the mean rate per event, stands for both (exact when an event of either
    // kind weighs the same).
    let n_all = t.count + h.count;
    let (k_low, k_high) = (
        poisson_low(t.count_low + h.count, alpha),
        poisson_high(n_all, alpha),
    );
    let rate = |wake_sum: f64, held_per_hour: f64| {
        let per_hour = wake_sum / hours + held_per_hour;
        // Per event: the observed mean, or the largest an unseen one can weigh.
        let scale = if n_all > 0.0 {
            per_hour / n_all
        } else {
            w_max / hours + h.per_hold_max
        };
        Rate {
            per_hour,
            low: scale * k_low,
            high: scale * k_high,
            upper_bound: n_all < MIN_EVENTS,
        }
    };
    let (mut xruns, mut episodes) = (rate(t.cycles, h.cycles), rate(t.episodes, h.episodes));
    if overload {
        let all = Rate {
            per_hour: cycles_per_hour,
            low: cycles_per_hour,
            high: cycles_per_hour,
            upper_bound: false,
        };
        (xruns, episodes) = (all, all);
    }
    let measure_for_ns = (episodes.upper_bound && !overload).then(|| {
        let w = if t.count > 0.0 {
            t.episodes / t.count
        } else {
            w_max
        };
        let cpu_hours = MIN_EVENTS * w * fresh / cfg.target_per_hour;
        (cpu_hours * NS_PER_HOUR / d.cpus.max(1) as f64).ceil() as u64
    });
    let outlook = if overload || episodes.low > cfg.target_per_hour {
        Outlook::Fails
    } else if episodes.high <= cfg.target_per_hour {
        Outlook::Ok
    } else {
        Outlook::Marginal
    };
    PredictRow {
        buffer_frames: frames,
        period_ns: p,
        budget_ns: budget,
        compute_mean_ns: c_mean,
        compute_max_ns: cost_max(cost),
        cycles_per_hour,
        p_miss: (t.count / d.samples.max(1) as f64).min(1.0),
        events_beyond: t.count,
        xruns_per_hour: xruns,
        episodes_per_hour: episodes,
        // Overloaded, no cycle ever catches up enough to sleep.
        fresh_share: if overload { 0.0 } else { fresh },
        cycles_per_episode: if t.episodes > 0.0 && !overload {
            t.cycles / t.episodes
        } else {
            1.0
        },
        overload,
        censored: t.censored,
        measure_for_ns,
        outlook,
        in_compute: held.filter(|_| !overload).map(|h| HeldInCompute {
            holds_beyond: h.count,
            episodes_per_hour: h.episodes,
            xruns_per_hour: h.cycles,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::predict::{Bucket, Censored, Compute, CONFIDENCE};

    fn cfg(buffers: &[u32], periods: &[u32]) -> PredictConfig {
        PredictConfig {
            latency: vec![],
            cost_file: None,
            load_pct: None,
            instances: None,
            cell: None,
            cpu: None,
            interval_ns: None,
            rate: 48_000,
            buffers: buffers.to_vec(),
            periods: periods.to_vec(),
            target_per_hour: 1.0,
            confidence: CONFIDENCE,
            holds: Holds::Timed,
        }
    }

    fn fixed(ns: f64) -> Vec<CostPoint> {
        Compute::Fixed { ns }.at(0, 0.0)
    }

    #[test]
    fn all_latency_at_100us_with_400us_of_compute_misses_exactly_when_the_budget_is_short() {
        let d = LatencyData::points(&[(100_000, 10_000)], 200_000);
        let c = cfg(&[16, 23, 24, 32], &[2, 3]);
        let r = |frames, n| row(&d, &fixed(400_000.0), frames, n, &c);
        // 16 frames: P = 333 µs < C: overloaded whatever n, and 500 µs > P misses at n = 2.
        let x = r(16, 2);
        assert_eq!(
            (x.p_miss, x.overload, x.outlook),
            (1.0, true, Outlook::Fails)
        );
        assert_eq!(x.xruns_per_hour.per_hour, x.cycles_per_hour);
        // 23 frames: B = 479.2 µs < 500 µs: every cycle misses by 20.8 µs, one cycle each,
        // and the period after each miss is skipped: half the periods have an xrun.
        let x = r(23, 2);
        assert_eq!((x.p_miss, x.overload), (1.0, false));
        assert_eq!(x.events_beyond, 10_000.0);
        assert_eq!(x.fresh_share, 0.5);
        assert!((x.xruns_per_hour.per_hour / x.cycles_per_hour - 0.5).abs() < 1e-12);
        assert!((x.cycles_per_episode - 1.0).abs() < 1e-12);
        assert_eq!(x.outlook, Outlook::Fails);
        // 24 frames: B = 500 µs exactly: ending at the deadline is in time.
        for (frames, n) in [(24, 2), (32, 2), (23, 3), (24, 3)] {
            let x = r(frames, n);
            assert_eq!(x.p_miss, 0.0, "{frames}/{n}");
            assert_eq!(x.events_beyond, 0.0);
            assert_eq!(x.xruns_per_hour.per_hour, 0.0);
            assert!(x.episodes_per_hour.upper_bound);
        }
        assert_eq!(r(32, 2).budget_ns, 32e9 / 48_000.0);
        assert_eq!(r(24, 3).budget_ns, 1_000_000.0);
    }

    #[test]
    fn a_bucket_straddling_the_threshold_counts_its_share_above() {
        // 1000 samples spread over [100, 110) µs, 4 µs of them above 106 µs.
        let d = LatencyData {
            buckets: vec![Bucket {
                lo_ns: 100_000,
                hi_ns: 110_000,
                count: 1000,
            }],
            censored: vec![],
            samples: 1000,
            observed_ns: 1000.0 * 200_000.0,
            interval_ns: 200_000,
            cpus: 1,
            busy: None,
        };
        // 48 frames: P = 1 ms; C = 894 µs leaves 106 µs.
        let x = row(&d, &fixed(894_000.0), 48, 2, &cfg(&[48], &[2]));
        assert!(
            (x.events_beyond - 400.0).abs() < 1e-9,
            "{}",
            x.events_beyond
        );
        assert!((x.p_miss - 0.4).abs() < 1e-12);
        // Excesses below I and P: each sample weighs I/P, so episodes/h = p · cycles/h,
        // less the period each miss skips: 0.4 misses per 1.4 periods.
        assert!((x.fresh_share - 1.0 / 1.4).abs() < 1e-12);
        let want = 0.4 / 1.4 * x.cycles_per_hour;
        assert!((x.episodes_per_hour.per_hour - want).abs() < 1e-6 * want);
        // A cost distribution is a mixture: half the cycles at 894 µs, half at 0.
        let mixed = [
            CostPoint {
                probability: 0.5,
                ns: 894_000.0,
            },
            CostPoint {
                probability: 0.5,
                ns: 0.0,
            },
        ];
        let y = row(&d, &mixed, 48, 2, &cfg(&[48], &[2]));
        assert!((y.p_miss - 0.2).abs() < 1e-12);
        assert_eq!(y.compute_max_ns, 894_000.0);
    }

    #[test]
    fn long_stalls_are_one_episode_of_several_cycles() {
        // One 20 ms sample in 10 s of a 200 µs measurement; 64 frames (1.333 ms), 10 % load.
        let n = 50_000;
        let d = LatencyData::points(&[(20_000, n - 1), (20_000_000, 1)], 200_000);
        let c = cfg(&[64], &[2]);
        let cost = Compute::LoadPct { pct: 10.0 }.at(64, 64e9 / 48_000.0);
        let x = row(&d, &cost, 64, 2, &c);
        let hours = n as f64 * 200e3 / NS_PER_HOUR;
        // The stall's excess is beyond I and P: weight 1, one episode per sample; the
        // 15 periods it skips (18.8 ms of excess) are not at risk.
        assert!((x.fresh_share - 1.0 / (1.0 + 15.0 / n as f64)).abs() < 1e-15);
        let want = x.fresh_share / hours;
        assert!((x.episodes_per_hour.per_hour - want).abs() < 1e-9 * want);
        // e = 20 ms + 0.133 − 1.333 ms over a slack of 1.2 ms: 16 late cycles.
        assert!(
            (x.cycles_per_episode - 16.0).abs() < 1e-9,
            "{}",
            x.cycles_per_episode
        );
        assert!(x.episodes_per_hour.upper_bound && x.measure_for_ns.is_some());
        // 3 events at 1/h would need 3 h of CPU time on the one CPU (less the skipped share).
        let want = 3.0 * 3.6e12 * x.fresh_share;
        assert!((x.measure_for_ns.unwrap() as f64 - want).abs() <= 1.0);
        assert_eq!(x.outlook, Outlook::Fails, "{x:?}"); // 360/h, lower end 9/h
        assert!(x.episodes_per_hour.low > 1.0);
        // The per-cycle probability ignores the stall's length: far lower than the episodes.
        assert!(x.p_miss * x.cycles_per_hour < x.episodes_per_hour.per_hour / 5.0);
    }

    #[test]
    fn a_late_but_timely_cycle_leaves_catch_up_cycles_that_cannot_miss() {
        // 48 frames: P = 1 ms; C = 0.9 ms; n = 3: B = 2 ms. 900 wake-ups 150 µs late end
        // 50 µs into the next period: one catch-up cycle each. 100 wake-ups 1.2 ms late
        // miss by 0.1 ms and skip 1 + 1 periods. Per fresh wake-up: 0.9·2 + 0.1·3 = 2.1
        // periods, 0.1 misses.
        let d = LatencyData::points(&[(150_000, 900), (1_200_000, 100)], 200_000);
        let x = row(&d, &fixed(900_000.0), 48, 3, &cfg(&[48], &[3]));
        assert!((x.p_miss - 0.1).abs() < 1e-12);
        assert!(
            (x.fresh_share - 1.0 / 2.1).abs() < 1e-12,
            "{}",
            x.fresh_share
        );
        // The excess (100 µs) is below I and P: episodes per period = p · fresh share.
        let want = 0.1 / 2.1 * x.cycles_per_hour;
        assert!((x.episodes_per_hour.per_hour - want).abs() < 1e-9 * want);
        assert_eq!(ceil_integral(0.0, 250.0, 100.0), 100.0 + 200.0 + 150.0);
        assert_eq!(ceil_integral(50.0, 150.0, 100.0), 50.0 + 100.0);
    }

    #[test]
    fn per_wake_up_a_long_sample_weighs_i_over_p_and_as_a_timed_hold_one() {
        // Every sample 5 ms late, measured every 200 µs; 64 frames at 48 kHz, no compute.
        let d = LatencyData {
            buckets: vec![Bucket {
                lo_ns: 5_000_000,
                hi_ns: 5_000_000,
                count: 1000,
            }],
            censored: vec![],
            samples: 1000,
            observed_ns: 1000.0 * 200e3,
            interval_ns: 200_000,
            cpus: 1,
            busy: None,
        };
        let p = 64e9 / 48e3;
        let mut c = cfg(&[64], &[2]);
        let timed = row(&d, &fixed(0.0), 64, 2, &c);
        c.holds = Holds::Wakeup;
        let wakeup = row(&d, &fixed(0.0), 64, 2, &c);
        // Every wake-up is late either way; per wake-up the audio thread, waking every P,
        // meets I/P as many late wake-ups per hour as the measurement did.
        assert_eq!(timed.p_miss, 1.0);
        assert_eq!(wakeup.p_miss, 1.0);
        let ratio = wakeup.episodes_per_hour.per_hour / timed.episodes_per_hour.per_hour;
        assert!((ratio - 200e3 / p).abs() < 1e-9, "{ratio}");
        // Unseen, the bound scales the same way.
        let none = LatencyData {
            buckets: vec![Bucket {
                lo_ns: 10_000,
                hi_ns: 10_000,
                count: 1000,
            }],
            ..d
        };
        let w = row(&none, &fixed(0.0), 64, 2, &c).episodes_per_hour.high;
        c.holds = Holds::Timed;
        let t = row(&none, &fixed(0.0), 64, 2, &c).episodes_per_hour.high;
        assert!((w / t - 200e3 / p).abs() < 1e-9, "{w} vs {t}");
    }

    #[test]
    fn a_step_edge_rounding_cannot_stall_the_integral() {
        // Once looped for ever: the step's edge k·slack rounded onto the start.
        let (a, b, slack) = (
            283_030.581_249_999_93,
            283_707.666_666_666_74,
            94_343.527_083_333_32,
        );
        let v = weighted_cycles_integral(a, b, 200e3, 1e9 / 3e3, slack, Holds::Timed);
        let w = weight_integral(a, b, 200e3, 1e9 / 3e3, Holds::Timed);
        assert!(v >= 3.0 * w && v <= 4.0 * w, "{v} vs {w}");
    }

    proptest::proptest! {
        #[test]
        fn every_row_is_finite_and_its_intervals_hold_the_estimate(
            lats in proptest::collection::vec((0u64..50_000_000, 1u64..1000), 1..20),
            pct in 0.0f64..130.0,
            frames in proptest::sample::select(vec![16u32, 48, 64, 256, 1024]),
            n in 2u32..5,
            interval in proptest::sample::select(vec![100_000u64, 200_000, 1_000_000]),
        ) {
            let d = LatencyData::points(&lats, interval);
            let c = cfg(&[frames], &[n]);
            let cost = Compute::LoadPct { pct }.at(frames, frames as f64 * 1e9 / 48e3);
            let x = row(&d, &cost, frames, n, &c);
            let v = serde_json::to_value(&x).unwrap();
            let back: PredictRow = serde_json::from_value(v).unwrap();
            proptest::prop_assert_eq!(&back, &x, "every field survives JSON (no NaN)");
            proptest::prop_assert!((0.0..=1.0).contains(&x.p_miss));
            proptest::prop_assert!((0.0..=1.0).contains(&x.fresh_share));
            for r in [x.xruns_per_hour, x.episodes_per_hour] {
                proptest::prop_assert!(r.low <= r.per_hour * (1.0 + 1e-12));
                proptest::prop_assert!(r.per_hour <= r.high * (1.0 + 1e-12));
            }
            proptest::prop_assert!(x.cycles_per_episode >= 1.0);
        }
    }

    #[test]
    fn weights_integrate_in_closed_form() {
        for (i, p, h) in [
            (200e3, 1333e3, Holds::Timed),
            (1000e3, 333e3, Holds::Timed),
            (500e3, 500e3, Holds::Timed),
            (200e3, 1333e3, Holds::Wakeup),
            (1000e3, 333e3, Holds::Wakeup),
        ] {
            for (a, b) in [(0.0, 50e3), (10e3, 700e3), (100e3, 3e6), (2e6, 5e6)] {
                let steps = 100_000;
                let dx = (b - a) / steps as f64;
                let numeric: f64 = (0..steps)
                    .map(|k| weight(a + (k as f64 + 0.5) * dx, i, p, h) * dx)
                    .sum();
                let exact = weight_integral(a, b, i, p, h);
                assert!(
                    (numeric - exact).abs() <= exact * 1e-6,
                    "I={i} P={p} [{a},{b}]: {numeric} vs {exact}"
                );
                let slack = 300e3;
                let numeric: f64 = (0..steps)
                    .map(|k| {
                        let e = a + (k as f64 + 0.5) * dx;
                        weight(e, i, p, h) * cycles_per_stall(e, slack) * dx
                    })
                    .sum();
                let exact = weighted_cycles_integral(a, b, i, p, slack, h);
                assert!(
                    (numeric - exact).abs() <= exact * 1e-4,
                    "{numeric} vs {exact}"
                );
            }
        }
    }

    #[test]
    fn holds_met_while_computing_add_the_share_of_each_hour_the_engine_computes() {
        use crate::measure::predict::BusyData;
        // Wake-ups never late; a busy thread had 100 computes held 2 ms in one hour of compute.
        let mut d = LatencyData::points(&[(10_000, 1_000_000)], 2_666_667);
        d.busy = Some(BusyData {
            exposed_ns: NS_PER_HOUR,
            holds: vec![Bucket {
                lo_ns: 2_000_000,
                hi_ns: 2_000_000,
                count: 100,
            }],
        });
        let c = cfg(&[128], &[2]);
        // 128 frames: P = B = 2.667 ms; 40 % compute leaves 1.6 ms, so every hold misses,
        // by 0.4 ms, one cycle each (slack 1.6 ms); the engine computes 0.4 of each hour.
        let x = row(
            &d,
            &Compute::LoadPct { pct: 40.0 }.at(128, 128e9 / 48e3),
            128,
            2,
            &c,
        );
        let h = x.in_compute.expect("a busy input adds the term");
        assert!((h.holds_beyond - 100.0).abs() < 1e-9);
        assert!((h.episodes_per_hour - 40.0).abs() < 1e-9, "{h:?}");
        assert!((h.xruns_per_hour - 40.0).abs() < 1e-9);
        assert_eq!(x.p_miss, 0.0);
        assert!((x.episodes_per_hour.per_hour - 40.0).abs() < 1e-9);
        // The interval rests on the 100 holds.
        let lo = 40.0 / 100.0 * poisson_low(100.0, 0.05);
        assert!((x.episodes_per_hour.low - lo).abs() < 1e-9);
        assert!(!x.episodes_per_hour.upper_bound);
        assert_eq!(x.outlook, Outlook::Fails);
        // 10 % compute leaves 2.4 ms: no hold is long enough, and none was seen beyond, so
        // the rate is only bounded by what an unseen hold or wake-up would weigh.
        let y = row(
            &d,
            &Compute::LoadPct { pct: 10.0 }.at(128, 128e9 / 48e3),
            128,
            2,
            &c,
        );
        assert_eq!(y.in_compute.unwrap().holds_beyond, 0.0);
        assert_eq!(y.episodes_per_hour.per_hour, 0.0);
        assert!(y.episodes_per_hour.upper_bound);
        let hours = d.observed_ns / NS_PER_HOUR;
        let w_max = 2_666_667.0 / (128e9 / 48e3);
        let bound = (w_max / hours + 0.1) * poisson_high(0.0, 0.05);
        assert!((y.episodes_per_hour.high - bound).abs() < 1e-9 * bound);
        // A hold spread over [1.4, 1.8] ms: half of it beyond 1.6 ms.
        d.busy.as_mut().unwrap().holds[0] = Bucket {
            lo_ns: 1_400_000,
            hi_ns: 1_800_000,
            count: 100,
        };
        let z = row(
            &d,
            &Compute::LoadPct { pct: 40.0 }.at(128, 128e9 / 48e3),
            128,
            2,
            &c,
        );
        assert!((z.in_compute.unwrap().holds_beyond - 50.0).abs() < 1e-6);
        // Without a busy input nothing changes and nothing is reported.
        d.busy = None;
        assert_eq!(row(&d, &fixed(1e6), 128, 2, &c).in_compute, None);
    }

    #[test]
    fn censored_tails_are_bounded_and_flagged() {
        let d = LatencyData {
            buckets: vec![Bucket {
                lo_ns: 10_000,
                hi_ns: 11_000,
                count: 9_990,
            }],
            censored: vec![Censored {
                from_ns: 400_000,
                max_ns: 5_000_000,
                count: 10,
            }],
            samples: 10_000,
            observed_ns: 10_000.0 * 200e3,
            interval_ns: 200_000,
            cpus: 1,
            busy: None,
        };
        // 256 frames, 50 % load: budget 5.33 ms, threshold 2.67 ms, inside the censored range.
        let cost = Compute::LoadPct { pct: 50.0 }.at(256, 256e9 / 48e3);
        let x = row(&d, &cost, 256, 2, &cfg(&[256], &[2]));
        assert!(x.censored);
        assert_eq!(x.events_beyond, 10.0);
        // Only the maximum is surely beyond: the lower end rests on one sample.
        let one = x.episodes_per_hour.per_hour / 10.0 * poisson_low(1.0, 0.05);
        assert!((x.episodes_per_hour.low - one).abs() < 1e-9);
        // Below the censored range every overflow is beyond.
        let cost = Compute::LoadPct { pct: 95.0 }.at(256, 256e9 / 48e3);
        let y = row(&d, &cost, 256, 2, &cfg(&[256], &[2]));
        let ten = y.episodes_per_hour.per_hour / 10.0 * poisson_low(10.0, 0.05);
        assert!((y.episodes_per_hour.low - ten).abs() < 1e-9);
    }
}
