//! Before and after tuning, side by side with the difference and its uncertainty: one piece
//! for `tune --apply --measure` (terminal) and the suite report's "Tuning: before and after"
//! (`suite --tuned`, HTML). Tables are [`grid::Table`](super::grid::Table)s, so both render them the way
//! `compare` does.

use super::grid::Table;
use crate::measure::latency::{LatencyConfig, LatencyResult};
use crate::measure::loadtest::{LoadConfig, LoadResults};
use crate::measure::predict::{self, LatencyData, LatencyInput, PredictConfig, Rate};
use std::path::Path;

/// One latency result: its file (named in input errors), what was asked, what was measured.
#[derive(Clone, Copy)]
pub struct Latency<'a> {
    pub path: &'a Path,
    pub config: &'a LatencyConfig,
    pub results: &'a LatencyResult,
}

/// The audio period the predicted rate is computed at when the result names none.
const DEFAULT_FRAMES: u32 = 64;
const DEFAULT_RATE: u32 = 48_000;
/// The period count of the prediction: JACK's default, as the verdict's.
const PERIODS: u32 = 2;

fn us(ns: f64) -> String {
    format!("{:.1}", ns / 1e3)
}

/// The value at 1-based rank `r` of the latency samples (the bucket's upper edge; a censored
/// sample at its recorded maximum).
fn at_rank(d: &LatencyData, r: u64) -> f64 {
    let mut seen = 0u64;
    for b in &d.buckets {
        seen = seen.saturating_add(b.count);
        if seen >= r {
            return b.hi_ns as f64;
        }
    }
    d.censored
        .iter()
        .map(|c| c.max_ns)
        .max()
        .or_else(|| d.buckets.last().map(|b| b.hi_ns))
        .unwrap_or(0) as f64
}

/// A distribution-free 95 % interval of the `p` quantile: the order statistics at
/// n·p ± 1.96·√(n·p·(1−p)) (normal approximation of the binomial rank).
fn quantile_interval(d: &LatencyData, p: f64) -> Option<(f64, f64)> {
    let n = d.samples as f64;
    if n < 1.0 {
        return None;
    }
    let half = 1.96 * (n * p * (1.0 - p)).sqrt();
    let lo = (n * p - half).floor().max(1.0) as u64;
    let hi = ((n * p + half).ceil() + 1.0).min(n) as u64;
    Some((at_rank(d, lo), at_rank(d, hi)))
}

struct Side {
    data: Option<LatencyData>,
    predicted: Option<Rate>,
}

fn side(l: &Latency, frames: u32, rate: u32) -> Side {
    let input = LatencyInput::from_result(l.path, "x", l.config, l.results, None, None)
        .ok()
        .and_then(|v| v.into_iter().last());
    let predicted = input.as_ref().map(|i| {
        let cfg = PredictConfig {
            latency: vec![i.info.file.clone()],
            cost_file: None,
            load_pct: None,
            instances: None,
            cell: None,
            cpu: None,
            interval_ns: None,
            rate,
            buffers: vec![frames],
            periods: vec![PERIODS],
            target_per_hour: 1.0,
            confidence: predict::CONFIDENCE,
            holds: predict::Holds::default(),
        };
        let cost = super::verdict::default_cost();
        predict::predict(&cfg, std::slice::from_ref(i), &cost).tables[0].rows[0].episodes_per_hour
    });
    Side {
        data: input.map(|i| i.data),
        predicted,
    }
}

/// `value [low, high]` in µs.
fn with_interval(v: f64, iv: Option<(f64, f64)>) -> String {
    match iv {
        Some((lo, hi)) => format!("{} [{}, {}]", us(v), us(lo), us(hi)),
        None => us(v),
    }
}

/// The change after − before, with the interval of the difference of two independent
/// intervals (conservative: ends against ends).
fn change(b: f64, a: f64, bi: Option<(f64, f64)>, ai: Option<(f64, f64)>) -> String {
    let d = a - b;
    let sign = |x: f64| {
        if x > 0.0 {
            format!("+{}", us(x))
        } else {
            us(x)
        }
    };
    match (bi, ai) {
        (Some((bl, bh)), Some((al, ah))) => {
            let (lo, hi) = (al - bh, ah - bl);
            let verdict = if hi < 0.0 {
                "lower"
            } else if lo > 0.0 {
                "higher"
            } else {
                "no clear change"
            };
            format!("{} [{}, {}] {verdict}", sign(d), sign(lo), sign(hi))
        }
        _ => sign(d),
    }
}

/// Two rates: lower, higher, or intervals that overlap (no evidence either way).
fn rate_change(b: &Rate, a: &Rate) -> String {
    if a.high < b.low {
        "lower (intervals apart)".into()
    } else if a.low > b.high {
        "higher (intervals apart)".into()
    } else {
        "intervals overlap: no clear change".into()
    }
}

/// One condition's latency before and after: p99, p99.9 (each with its 95 % interval), the
/// maximum (a single extreme: no interval), wake-ups, and the predicted xrun rate at the
/// audio period (the result's `--audio-period`, else 64 frames at 48 kHz; n = 2 and half of
/// each period computing, the verdict's defaults) with its 95 % interval.
pub fn latency(condition: &str, before: Latency, after: Latency) -> Table {
    let (frames, rate) = before
        .config
        .audio_period
        .map_or((DEFAULT_FRAMES, DEFAULT_RATE), |a| (a.frames, a.rate));
    let (sb, sa) = (side(&before, frames, rate), side(&after, frames, rate));
    let (b, a) = (
        &before.results.overall.summary,
        &after.results.overall.summary,
    );
    let mut rows = Vec::new();
    for (name, p, bv, av) in [
        ("p99 (µs)", 0.99, b.p99, a.p99),
        ("p99.9 (µs)", 0.999, b.p99_9, a.p99_9),
    ] {
        let bi = sb.data.as_ref().and_then(|d| quantile_interval(d, p));
        let ai = sa.data.as_ref().and_then(|d| quantile_interval(d, p));
        rows.push(vec![
            name.to_string(),
            with_interval(bv as f64, bi),
            with_interval(av as f64, ai),
            change(bv as f64, av as f64, bi, ai),
        ]);
    }
    rows.push(vec![
        "max (µs)".into(),
        us(b.max as f64),
        us(a.max as f64),
        change(b.max as f64, a.max as f64, None, None),
    ]);
    rows.push(vec![
        "wake-ups".into(),
        b.count.to_string(),
        a.count.to_string(),
        String::new(),
    ]);
    if let (Some(pb), Some(pa)) = (&sb.predicted, &sa.predicted) {
        rows.push(vec![
            format!("predicted glitches/h at {frames} frames × {PERIODS} @ {rate} Hz"),
            super::format::rate_cell(pb),
            super::format::rate_cell(pa),
            rate_change(pb, pa),
        ]);
    }
    Table {
        title: format!("Scheduling latency, {condition}: before and after tuning (95 % intervals)"),
        header: ["", "before", "after", "change"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        rows,
    }
}

/// The DSP load grid before and after: the most instances per track in every cell either
/// measured. One search each: a difference of one instance is within its resolution.
pub fn load(before: (&LoadConfig, &LoadResults), after: (&LoadConfig, &LoadResults)) -> Table {
    let mut keys: Vec<(u32, u32, String)> = Vec::new();
    for c in before.1.cells.iter().chain(&after.1.cells) {
        let k = (c.buffer_frames, c.tracks, c.plugin.clone());
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let cell = |r: &LoadResults, k: &(u32, u32, String)| r.cell(k.0, k.1, &k.2).cloned();
    let rows = keys
        .iter()
        .map(|k| {
            let (b, a) = (cell(before.1, k), cell(after.1, k));
            let show = |c: &Option<crate::measure::loadtest::Cell>| {
                c.as_ref().map_or("-".to_string(), |c| {
                    format!("{}{}", c.max_per_track, if c.capped { "+" } else { "" })
                })
            };
            let diff = match (&b, &a) {
                (Some(b), Some(a)) => {
                    let d = a.max_per_track as i64 - b.max_per_track as i64;
                    let what = match d {
                        d if d.abs() <= 1 => "within one search's resolution",
                        d if d > 0 => "more",
                        _ => "fewer",
                    };
                    format!("{d:+} ({what})")
                }
                _ => "-".into(),
            };
            vec![
                format!("{} · {} · {}", k.0, k.1, k.2),
                show(&b),
                show(&a),
                diff,
            ]
        })
        .collect();
    Table {
        title: "DSP load: most instances per track, before and after tuning".into(),
        header: ["buffer · tracks · plugin", "before", "after", "change"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        rows,
    }
}

/// What the profile did: one row per setting applied or skipped (already-set ones are
/// counted in the title).
pub fn settings(items: &[crate::system::tune::Applied]) -> Table {
    use crate::system::tune::Outcome;
    let already = items
        .iter()
        .filter(|i| i.outcome == Outcome::AlreadySet)
        .count();
    let dash = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    Table {
        title: format!("Settings applied and skipped ({already} already as wanted)"),
        header: ["setting", "outcome", "before", "applied / why not"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        rows: items
            .iter()
            .filter_map(|i| match &i.outcome {
                Outcome::Applied => Some(vec![
                    i.title.clone(),
                    "applied".into(),
                    dash(&i.from),
                    i.to.clone(),
                ]),
                Outcome::Skipped(why) => Some(vec![
                    i.title.clone(),
                    "skipped".into(),
                    dash(&i.from),
                    why.clone(),
                ]),
                Outcome::AlreadySet => None,
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::predict::Bucket;

    #[test]
    fn quantile_intervals_come_from_the_ranks() {
        let d = LatencyData {
            buckets: (1..=100)
                .map(|i| Bucket {
                    lo_ns: (i - 1) * 1000,
                    hi_ns: i * 1000,
                    count: 100,
                })
                .collect(),
            censored: Vec::new(),
            samples: 10_000,
            observed_ns: 1e9,
            interval_ns: 1_000_000,
            cpus: 1,
            busy: None,
        };
        // n·p = 9900 ± 19.5 ranks: from the 99th 1 µs bucket into the 100th (upper edges).
        assert_eq!(quantile_interval(&d, 0.99), Some((99_000.0, 100_000.0)));
        assert_eq!(quantile_interval(&d, 0.5), Some((50_000.0, 51_000.0)));
        assert_eq!(
            change(10_000.0, 5_000.0, Some((9e3, 11e3)), Some((4e3, 6e3))),
            "-5.0 [-7.0, -3.0] lower"
        );
        assert!(
            change(10e3, 9e3, Some((8e3, 11e3)), Some((8e3, 10e3))).ends_with("no clear change")
        );
    }
}
