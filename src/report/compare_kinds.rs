//! `compare` for the kinds whose tables were once every JSON field side by side: latencytest
//! (Senoner's phases), event (Topliss et al.'s settings), and two or more latency results as
//! deltas against the first with overlaid histograms and exceedance curves.

use super::grid::Table;
use super::plot::{line_chart, Axes, Series};
use super::{Input, Loaded};
use crate::measure::event::EventRun;
use crate::results::Body;

fn ms(ns: f64) -> String {
    format!("{:.2}", ns / 1e6)
}

/// A metric's row name and how a cell of it reads.
type Metric<'a, T> = (&'a str, &'a dyn Fn(&T) -> String);

/// A percentile column of the latency differences.
type Col = (&'static str, fn(&crate::common::stats::Summary) -> f64);

/// One row per metric, one column per result; "-" where a result lacks the row.
fn rows_by_key<T>(items: &[Vec<(String, T)>], metrics: &[Metric<T>]) -> Vec<Vec<String>> {
    let mut keys: Vec<&String> = Vec::new();
    for it in items {
        for (k, _) in it {
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
    }
    let mut rows = Vec::new();
    for k in keys {
        for (name, f) in metrics {
            let mut row = vec![format!("{k}: {name}")];
            row.extend(items.iter().map(|it| {
                it.iter()
                    .find(|(x, _)| x == k)
                    .map_or("-".into(), |(_, v)| f(v))
            }));
            rows.push(row);
        }
    }
    rows
}

/// Senoner's latencytest: per phase (idle, each stress class) the loop's worst time, the
/// burn's worst deviation and the overruns, each result a column.
pub fn latencytest(docs: &[&Body], header: &[String]) -> Vec<Table> {
    let mut head = Vec::new();
    let mut phases = Vec::new();
    for b in docs {
        let Body::Latencytest { results, .. } = b else {
            continue;
        };
        head.push((
            ms(results.fragment_ns as f64),
            ms(results.buffer_ns as f64),
            ms(results.burn_nominal_ns as f64),
        ));
        phases.push(
            results
                .phases
                .iter()
                .map(|p| (p.name.clone(), p))
                .collect::<Vec<_>>(),
        );
    }
    let mut rows = vec![
        std::iter::once("fragment ms".to_string())
            .chain(head.iter().map(|h| h.0.clone()))
            .collect::<Vec<_>>(),
        std::iter::once("buffer ms".to_string())
            .chain(head.iter().map(|h| h.1.clone()))
            .collect(),
        std::iter::once("burn per fragment ms".to_string())
            .chain(head.iter().map(|h| h.2.clone()))
            .collect(),
    ];
    type P<'a> = &'a crate::measure::latencytest::Phase;
    rows.extend(rows_by_key(
        &phases,
        &[
            ("loop max ms", &|p: &P| ms(p.loop_ns.max as f64)),
            ("loop p99.9 ms", &|p: &P| ms(p.loop_ns.p99_9 as f64)),
            ("burn max deviation ms", &|p: &P| {
                ms(p.burn_max_dev_ns as f64)
            }),
            ("overruns / cycles", &|p: &P| {
                format!("{} / {}", p.overruns, p.cycles)
            }),
        ],
    ));
    vec![Table {
        title: "latencytest (Senoner): per phase".into(),
        header: header.to_vec(),
        rows,
    }]
}

fn event_key(r: &EventRun) -> String {
    let mut k = format!(
        "{} {} {}",
        r.driver.name(),
        r.scenario.name(),
        r.period_frames
    );
    if let Some(p) = r.periods {
        k.push_str(&format!("×{p}"));
    }
    k
}

/// Topliss et al.'s event-to-sound latency: per setting the measured mean against the
/// model's, the spread and the xruns, each result a column.
pub fn event(docs: &[&Body], header: &[String]) -> Vec<Table> {
    let runs: Vec<Vec<(String, &EventRun)>> = docs
        .iter()
        .map(|b| match b {
            Body::Event { results, .. } => results.runs.iter().map(|r| (event_key(r), r)).collect(),
            _ => Vec::new(),
        })
        .collect();
    type R<'a> = &'a EventRun;
    let rows = rows_by_key(
        &runs,
        &[
            ("mean (model) ms", &|r: &R| {
                format!("{} ({})", ms(r.latency.mean_ns), ms(r.model.mean_ns))
            }),
            ("min / max ms", &|r: &R| {
                format!(
                    "{} / {}",
                    ms(r.latency.min_ns as f64),
                    ms(r.latency.max_ns as f64)
                )
            }),
            ("trials, xruns", &|r: &R| {
                format!("{}, {}", r.latency.count, r.xruns)
            }),
        ],
    );
    let mut out = vec![Table {
        title: "Event-to-sound latency (Topliss et al.): per setting".into(),
        header: header.to_vec(),
        rows,
    }];
    let skipped: Vec<Vec<String>> = docs
        .iter()
        .zip(header.iter().skip(1))
        .filter_map(|(b, l)| match b {
            Body::Event { results, .. } if !results.skipped.is_empty() => {
                Some(vec![l.clone(), results.skipped.join("; ")])
            }
            _ => None,
        })
        .collect();
    if !skipped.is_empty() {
        out.push(Table {
            title: "Event settings not measured".into(),
            header: vec!["result".into(), "skipped".into()],
            rows: skipped,
        });
    }
    out
}

/// Each latency result against the first: the percentiles' differences (µs) and ratios, the
/// figure a reader of "did the RT kernel help" wants.
pub fn latency_deltas(docs: &[&Body], labels: &[String]) -> Option<Table> {
    let sums: Vec<&crate::common::stats::Summary> = docs
        .iter()
        .filter_map(|b| match b {
            Body::Latency { results, .. } => Some(&results.overall.summary),
            _ => None,
        })
        .collect();
    let base = *sums.first()?;
    if sums.len() < 2 {
        return None;
    }
    let cols: [Col; 6] = [
        ("avg", |s| s.mean),
        ("p50", |s| s.p50 as f64),
        ("p99", |s| s.p99 as f64),
        ("p99.9", |s| s.p99_9 as f64),
        ("p99.99", |s| s.p99_99 as f64),
        ("max", |s| s.max as f64),
    ];
    // Percentiles down, results across: the table stays narrow for long column labels.
    let rows = cols
        .iter()
        .map(|(name, f)| {
            std::iter::once(name.to_string())
                .chain(sums.iter().skip(1).map(|s| {
                    let (a, b) = (f(base), f(s));
                    let ratio = if a > 0.0 {
                        format!(" (×{:.2})", b / a)
                    } else {
                        String::new()
                    };
                    format!("{:+.1}{ratio}", (b - a) / 1e3)
                }))
                .collect()
        })
        .collect();
    Some(Table {
        title: format!("Latency differences (µs, and ratio) against {}", labels[0]),
        header: std::iter::once("percentile".to_string())
            .chain(labels.iter().skip(1).cloned())
            .collect(),
        rows,
    })
}

/// One result's histogram over all CPUs (1 µs buckets), summed from the per-CPU ones.
fn merged_histogram(r: &crate::measure::latency::LatencyResult) -> Vec<(u64, u64)> {
    let mut m: std::collections::BTreeMap<u64, u64> = Default::default();
    for c in &r.per_cpu {
        for &(b, k) in &c.histogram_us {
            // A hostile file's counts may not add up: saturate, never overflow.
            let e = m.entry(b).or_default();
            *e = e.saturating_add(k);
        }
    }
    m.into_iter().collect()
}

/// Overlaid histograms and exceedance curves of latency results, one curve per result.
pub fn latency_figures(inputs: &[Input], labels: &[String]) -> Vec<(String, &'static str)> {
    let mut hist = Vec::new();
    let mut exceed = Vec::new();
    for (i, l) in inputs.iter().zip(labels) {
        let Loaded::Doc(d) = &i.item else { continue };
        let Body::Latency { results, .. } = &d.body else {
            continue;
        };
        let h = merged_histogram(results);
        hist.push(Series {
            label: l.clone(),
            points: h.iter().map(|&(b, k)| (b as f64, k as f64)).collect(),
        });
        // Above each bucket: the wake-ups at or beyond the next one, overflows included
        // (the histogram's bound cuts the drawn buckets, not the count).
        let total = results.overall.summary.count.max(1) as f64;
        let mut seen = 0u64;
        let mut pts = Vec::with_capacity(h.len());
        for &(b, k) in &h {
            seen = seen.saturating_add(k);
            let above = results.overall.summary.count.saturating_sub(seen);
            if above > 0 {
                pts.push((b.saturating_add(1) as f64, above as f64 / total));
            }
        }
        exceed.push(Series {
            label: l.clone(),
            points: pts,
        });
    }
    if hist.len() < 2 {
        return Vec::new();
    }
    vec![
        (
            line_chart(
                &Axes {
                    title: "Latency histograms, all CPUs",
                    x_label: "latency (µs)",
                    y_label: "wake-ups (log)",
                    log_y: true,
                    ..Default::default()
                },
                &hist,
            ),
            "Wake-ups per 1 µs bucket, summed over the CPUs, one curve per result (OSADL style).",
        ),
        (
            line_chart(
                &Axes {
                    title: "Exceedance: share of wake-ups later than x",
                    x_label: "latency (µs, log)",
                    y_label: "share above x (log)",
                    log_x: true,
                    log_y: true,
                    ..Default::default()
                },
                &exceed,
            ),
            "The further left and lower a curve ends, the better; where two curves cross, one result has the better median and the other the better tail.",
        ),
    ]
}
