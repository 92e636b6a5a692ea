//! `compare`: results of one kind side by side, as tables that render to text or HTML.

use super::{default_label, flatten, Input, Loaded};
use crate::error::{Error, Result};
use crate::results::Body;
use crate::units::format_ns;
use maud::html;

pub use super::grid::{table_html, to_text, Table};

/// Column labels: `--label KEY=TEXT` where KEY is the file as given, its file name, or its
/// 1-based position; everything else is named by hostname, kernel and stress.
pub fn labels(inputs: &[Input], overrides: &[String]) -> Result<Vec<String>> {
    let mut out: Vec<String> = inputs.iter().map(default_label).collect();
    for o in overrides {
        let Some((key, text)) = o.split_once('=') else {
            return Err(Error::usage(format!(
                "--label {o:?}: expected FILE=TEXT or N=TEXT"
            )));
        };
        let hit = inputs.iter().position(|i| {
            i.path.as_os_str() == key
                || i.name() == key
                || key.parse::<usize>().ok()
                    == Some(inputs.iter().position(|j| std::ptr::eq(i, j)).unwrap() + 1)
        });
        match hit {
            Some(k) => out[k] = text.to_string(),
            None => {
                return Err(Error::usage(format!(
                    "--label {o:?}: {key} names none of the files compared"
                )))
            }
        }
    }
    // Identical labels would make columns indistinguishable: number them.
    let copy = out.clone();
    for (i, l) in out.iter_mut().enumerate() {
        if copy.iter().filter(|c| *c == l).count() > 1 {
            l.push_str(&format!(" #{}", i + 1));
        }
    }
    Ok(out)
}

/// Refuse mixed kinds, naming them (exit 2).
pub fn check_kinds(inputs: &[Input]) -> Result<()> {
    let first = inputs[0].kind();
    if let Some(other) = inputs.iter().find(|i| i.kind() != first) {
        return Err(Error::usage(format!(
            "cannot compare results of different kinds: {} is {first}, {} is {}",
            inputs[0].path.display(),
            other.path.display(),
            other.kind()
        )));
    }
    Ok(())
}

fn us(ns: f64) -> String {
    format!("{:.1}", ns / 1e3)
}

/// The comparison tables for `inputs` (all of one kind) under `labels`.
pub fn compare(inputs: &[Input], labels: &[String]) -> Result<Vec<Table>> {
    if inputs.len() < 2 {
        return Err(Error::usage("compare needs at least two result files"));
    }
    check_kinds(inputs)?;
    let docs: Vec<&Body> = inputs
        .iter()
        .filter_map(|i| match &i.item {
            Loaded::Doc(d) => Some(&d.body),
            Loaded::Other { .. } => None,
        })
        .collect();
    if docs.len() != inputs.len() {
        return Ok(vec![generic(inputs, labels)]);
    }
    let mut header = vec![String::new()];
    header.extend(labels.iter().cloned());
    let mut out = match docs[0] {
        Body::Latency { .. } => {
            let mut t = latency(&docs, labels);
            t.extend(super::compare_kinds::latency_deltas(&docs, labels));
            t
        }
        Body::Latencytest { .. } => super::compare_kinds::latencytest(&docs, &header),
        Body::Event { .. } => super::compare_kinds::event(&docs, &header),
        Body::Run { .. } => runs(&docs, &header),
        Body::Bench { .. } => bench(&docs, &header),
        Body::Check { .. } => checks(&docs, &header),
        Body::Rtl { .. } => rtl(&docs, &header),
        Body::Load { .. } => load(&docs, &header),
        Body::Sched { .. } => sched(&docs, &header),
        Body::Watch { .. } => watch(&docs, &header),
        // Kinds without a dedicated comparison yet: their fields side by side.
        Body::Stress { .. } | Body::Audit { .. } | Body::Predict { .. } | Body::Verdict { .. } => {
            vec![generic(inputs, labels)]
        }
    };
    out.extend(forensics(&docs, &header));
    Ok(out)
}

/// Metric rows × result columns, the common shape of every kind but latency.
fn by_metric(title: &str, header: &[String], metrics: Vec<(String, Vec<String>)>) -> Table {
    Table {
        title: title.into(),
        header: header.to_vec(),
        rows: metrics
            .into_iter()
            .map(|(m, v)| std::iter::once(m).chain(v).collect())
            .collect(),
    }
}

/// Huang et al. Table 2: one row per system (and condition), min / avg / max.
fn latency(docs: &[&Body], labels: &[String]) -> Vec<Table> {
    let mut rows = Vec::new();
    for (b, l) in docs.iter().zip(labels) {
        if let Body::Latency { results, .. } = b {
            let s = &results.overall.summary;
            rows.push(vec![
                l.clone(),
                us(s.min as f64),
                us(s.mean),
                us(s.max as f64),
                us(s.p99 as f64),
                us(s.p99_99 as f64),
                s.count.to_string(),
                results
                    .overall
                    .missed_periods
                    .map_or("-".into(), |m| m.to_string()),
            ]);
        }
    }
    vec![Table {
        title: "Scheduling latency (µs), all CPUs".into(),
        header: [
            "system", "min", "avg", "max", "p99", "p99.99", "wake-ups", "missed",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
        rows,
    }]
}

/// Engine runs: configuration, xruns by cause, loads and the timing percentiles.
fn runs(docs: &[&Body], header: &[String]) -> Vec<Table> {
    let mut m: Vec<(String, Vec<String>)> = Vec::new();
    let mut add = |name: &str,
                   f: &dyn Fn(
        &crate::measure::run::RunConfig,
        &crate::measure::run::RunResults,
    ) -> String| {
        m.push((
            name.into(),
            docs.iter()
                .map(|b| match b {
                    Body::Run { config, results } => f(config, results),
                    _ => "-".into(),
                })
                .collect(),
        ));
    };
    add("driver", &|c, _| format!("{:?}", c.driver).to_lowercase());
    add("buffer", &|c, x| {
        format!(
            "{} @ {} Hz ({})",
            c.buffer_frames,
            c.rate,
            format_ns(x.period_ns)
        )
    });
    add("tracks × chain", &|c, _| {
        format!("{} × {}", c.tracks, c.chain)
    });
    add("policy", &|c, _| c.policy.to_string());
    add("cycles", &|_, x| x.cycles.to_string());
    add("xruns", &|_, x| x.xruns.total.to_string());
    add("  late-wakeup", &|_, x| x.xruns.late_wakeup.to_string());
    add("  overload", &|_, x| x.xruns.overload.to_string());
    add("  interference", &|_, x| x.xruns.interference.to_string());
    add("skipped periods", &|_, x| x.skipped_periods.to_string());
    add("DSP load mean / p99 / max %", &|_, x| {
        let l = &x.dsp_load_pct;
        format!("{:.1} / {:.1} / {:.1}", l.mean, l.p99, l.max)
    });
    add("CPU load mean / p99 / max %", &|_, x| {
        let l = &x.cpu_load_pct;
        format!("{:.1} / {:.1} / {:.1}", l.mean, l.p99, l.max)
    });
    add("wake-up p50 / p99 / max", &|_, x| {
        let s = &x.wake_latency_ns;
        format!(
            "{} / {} / {}",
            format_ns(s.p50),
            format_ns(s.p99),
            format_ns(s.max)
        )
    });
    add("end time p50 / p99 / max", &|_, x| {
        let s = &x.end_time_ns;
        format!(
            "{} / {} / {}",
            format_ns(s.p50),
            format_ns(s.p99),
            format_ns(s.max)
        )
    });
    add("interference p99 / max", &|_, x| {
        let s = &x.interference_ns;
        format!("{} / {}", format_ns(s.p99), format_ns(s.max))
    });
    vec![by_metric("Engine runs", header, m)]
}

/// Watches side by side: the server, how long, the xruns and the load.
fn watch(docs: &[&Body], header: &[String]) -> Vec<Table> {
    let mut m: Vec<(String, Vec<String>)> = Vec::new();
    let mut add = |name: &str, f: &dyn Fn(&crate::measure::watch::WatchResults) -> String| {
        m.push((
            name.into(),
            docs.iter()
                .map(|b| match b {
                    Body::Watch { results, .. } => f(results),
                    _ => "-".into(),
                })
                .collect(),
        ));
    };
    add("server", &|r| {
        format!("{} '{}'", r.server.kind, r.server.name)
    });
    add("buffer", &|r| {
        format!("{} @ {} Hz", r.server.frames, r.server.rate)
    });
    add("watched", &|r| super::format::span(r.watched_ns));
    add("xruns", &|r| r.total_xruns().to_string());
    add("xruns / min", &|r| {
        format!(
            "{:.2}",
            r.total_xruns() as f64 / (r.watched_ns.max(1) as f64 / 60e9)
        )
    });
    add("  with a driver delay", &|r| {
        r.xruns
            .iter()
            .filter(|x| x.delayed_us > 0.0)
            .count()
            .to_string()
    });
    add("worst driver delay", &|r| {
        let w = r.xruns.iter().map(|x| x.delayed_us).fold(0.0, f64::max);
        format!("{:.2} ms", w / 1000.0)
    });
    add("DSP load mean / max %", &|r| {
        format!("{:.1} / {:.1}", r.dsp_load.mean_pct, r.dsp_load.max_pct)
    });
    add("server away", &|r| r.gaps.len().to_string());
    add("late clients / nodes (xruns)", &|r| {
        let mut by: Vec<(&str, u64)> = Vec::new();
        for l in r.xruns.iter().filter_map(|x| x.late.as_ref()) {
            match by.iter_mut().find(|(n, _)| *n == l.name) {
                Some(e) => e.1 += 1,
                None => by.push((&l.name, 1)),
            }
        }
        by.sort_by_key(|e| std::cmp::Reverse(e.1));
        let top: Vec<String> = by
            .iter()
            .take(3)
            .map(|(n, k)| format!("{n} ({k})"))
            .collect();
        if top.is_empty() {
            "-".into()
        } else {
            top.join(", ")
        }
    });
    let head = |f: fn(&crate::measure::watch::cycles::Headroom) -> String| {
        move |r: &crate::measure::watch::WatchResults| r.headroom.as_ref().map_or("-".into(), f)
    };
    add("cycles", &head(|h| h.cycles.to_string()));
    add(
        "headroom least / p1 / p50",
        &head(|h| {
            format!(
                "{} / {} / {}",
                format_ns(h.min_ns),
                format_ns(h.p1_ns),
                format_ns(h.p50_ns)
            )
        }),
    );
    add(
        "cycles with < 10 % spare",
        &head(|h| (h.within_pct(10) - h.missed).to_string()),
    );
    vec![by_metric("Watches", header, m)]
}

/// Plugin cost per frame, one row per plugin any of the results measured.
fn bench(docs: &[&Body], header: &[String]) -> Vec<Table> {
    let mut names: Vec<String> = Vec::new();
    for b in docs {
        if let Body::Bench { results, .. } = b {
            for r in results {
                let l = crate::report::html::bench_label(r);
                if !names.contains(&l) {
                    names.push(l);
                }
            }
        }
    }
    let m = names
        .iter()
        .map(|name| {
            let v = docs
                .iter()
                .map(|b| match b {
                    Body::Bench { results, .. } => results
                        .iter()
                        .find(|r| crate::report::html::bench_label(r) == *name)
                        .map_or("-".into(), |r| format!("{:.1}", r.ns_per_frame)),
                    _ => "-".into(),
                })
                .collect();
            (name.clone(), v)
        })
        .collect();
    vec![by_metric(
        "Plugin cost, ns per frame (median block)",
        header,
        m,
    )]
}

/// Each check's verdict, one row per check any of the results made.
fn checks(docs: &[&Body], header: &[String]) -> Vec<Table> {
    let mut titles: Vec<String> = Vec::new();
    for b in docs {
        if let Body::Check { results, .. } = b {
            for c in &results.checks {
                if !titles.contains(&c.title) {
                    titles.push(c.title.clone());
                }
            }
        }
    }
    let m = titles
        .iter()
        .map(|t| {
            let v = docs
                .iter()
                .map(|b| match b {
                    Body::Check { results, .. } => results
                        .checks
                        .iter()
                        .find(|c| c.title == *t)
                        .map_or("-".into(), |c| {
                            serde_json::to_value(c.verdict)
                                .ok()
                                .and_then(|v| v.as_str().map(str::to_uppercase))
                                .unwrap_or_default()
                        }),
                    _ => "-".into(),
                })
                .collect();
            (t.clone(), v)
        })
        .collect();
    vec![by_metric("Checks", header, m)]
}

/// Top culprits shown side by side.
const CULPRITS_COMPARED: usize = 5;

/// The `--forensics` of each result side by side: windows explained, events lost, wake-up
/// verdicts and the top culprits with the windows they explained and the time they took.
fn forensics(docs: &[&Body], header: &[String]) -> Option<Table> {
    use crate::trace::{Forensics, WakeVerdict};
    let fs: Vec<Option<&Forensics>> = docs.iter().map(|b| b.forensics()).collect();
    if fs.iter().all(Option::is_none) {
        return None;
    }
    let cells = |f: &dyn Fn(&Forensics) -> String| -> Vec<String> {
        fs.iter().map(|x| x.map_or("-".into(), f)).collect()
    };
    let count =
        |f: &Forensics, v: WakeVerdict| f.windows.iter().filter(|w| w.wakeup.verdict == v).count();
    let mut m: Vec<(String, Vec<String>)> = vec![
        (
            "windows explained".into(),
            cells(&|f| format!("{} {}(s)", f.windows_total, f.windows_of)),
        ),
        (
            "trace events / lost".into(),
            cells(&|f| format!("{} / {}", f.events, f.lost_events)),
        ),
        (
            "wake-ups late / not scheduled / not traced".into(),
            cells(&|f| {
                // The verdicts are counted over the windows the result keeps in full.
                let kept = f.windows.len() as u64;
                format!(
                    "{} / {} / {}{}",
                    count(f, WakeVerdict::WakeupLate),
                    count(f, WakeVerdict::NotScheduled),
                    count(f, WakeVerdict::NoWakeupTraced),
                    if kept < f.windows_total {
                        format!(" of {kept} kept")
                    } else {
                        String::new()
                    }
                )
            }),
        ),
    ];
    let most = fs
        .iter()
        .flatten()
        .map(|f| f.culprits.len())
        .max()
        .unwrap_or(0)
        .min(CULPRITS_COMPARED);
    for k in 0..most {
        m.push((
            format!("culprit #{}", k + 1),
            cells(&|f| f.culprits.get(k).map_or("-".into(), |r| r.culprit.label())),
        ));
        m.push((
            format!("  #{} top in · time taken · worst", k + 1),
            cells(&|f| {
                f.culprits.get(k).map_or("-".into(), |r| {
                    format!(
                        "{} of {} · {} · {}",
                        r.explained,
                        f.windows_total,
                        format_ns(r.total_ns),
                        format_ns(r.worst_ns)
                    )
                })
            }),
        ));
    }
    Some(Table {
        title: "Forensics: who took the time (--forensics)".into(),
        header: header.to_vec(),
        rows: m
            .into_iter()
            .map(|(name, v)| std::iter::once(name).chain(v).collect())
            .collect(),
    })
}

/// Values in first-seen order without repeats (the union of rows over results).
fn union<T: PartialEq + Clone>(items: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for x in items {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

/// Vignati et al. Table 1: modelled RTL per buffer size for each system, then the measured loops.
fn rtl(docs: &[&Body], header: &[String]) -> Vec<Table> {
    let rtls: Vec<_> = docs
        .iter()
        .filter_map(|b| match b {
            Body::Rtl { config, results } => Some((config, &**results)),
            _ => None,
        })
        .collect();
    let buffers = union(
        rtls.iter()
            .flat_map(|(_, r)| r.model.iter().map(|m| m.buffer_frames)),
    );
    let rows = buffers
        .iter()
        .map(|&b| {
            std::iter::once(format!("{b} frames"))
                .chain(rtls.iter().map(|(_, r)| {
                    r.model
                        .iter()
                        .find(|m| m.buffer_frames == b)
                        .map_or("-".into(), |m| {
                            format!("{:.2} ({} fr)", m.rtl_ms, m.rtl_frames)
                        })
                }))
                .collect()
        })
        .collect();
    let mut out = vec![Table {
        title: "Round-trip latency, modelled: ms (frames) per buffer size (Vignati et al. Table 1)"
            .into(),
        header: header.to_vec(),
        rows,
    }];
    if rtls.iter().any(|(_, r)| r.measured.is_some()) {
        let cell = |f: &dyn Fn(
            &crate::measure::rtl::RtlConfig,
            &crate::measure::rtl::RtlResults,
        ) -> Option<String>| {
            rtls.iter()
                .map(|(c, r)| f(c, r).unwrap_or_else(|| "-".into()))
                .collect::<Vec<_>>()
        };
        let metrics: Vec<(&str, Vec<String>)> = vec![
            (
                "loop",
                cell(&|c, r| {
                    let b = c.buffers.first().map_or("?".into(), u32::to_string);
                    c.driver.map(|d| match &r.alsa {
                        Some(a) => {
                            format!("alsa '{}' @ {b} frames × {}", a.driver.device, c.periods)
                        }
                        None => format!("{d:?} @ {b} frames").to_lowercase(),
                    })
                }),
            ),
            (
                "outcome",
                cell(&|_, r| {
                    r.measured
                        .as_ref()
                        .map(|m| format!("{:?}", m.outcome).to_lowercase())
                }),
            ),
            (
                "measured (frames)",
                cell(&|_, r| r.measured.as_ref()?.delay_frames.map(|d| format!("{d:.3}"))),
            ),
            (
                "measured (ms)",
                cell(&|_, r| r.measured.as_ref()?.delay_ms.map(|d| format!("{d:.4}"))),
            ),
            (
                "model (frames)",
                cell(&|c, r| {
                    r.measured
                        .as_ref()
                        .and(r.model.first())
                        .filter(|_| c.driver.is_some())
                        .map(|m| m.rtl_frames.to_string())
                }),
            ),
            (
                "measured − model (frames)",
                cell(&|_, r| r.difference_frames.map(|d| format!("{d:+.3}"))),
            ),
            (
                "declared by the stack (frames)",
                cell(&|_, r| r.declared().map(|(d, _, _)| format!("{d:.0}"))),
            ),
            (
                "measured − declared (frames)",
                cell(&|_, r| r.declared()?.1.map(|x| format!("{:+.3}", x + 0.0))),
            ),
            (
                "polarity",
                cell(&|_, r| {
                    r.measured.as_ref()?.inverted.map(|i| {
                        if i {
                            "inverted".to_string()
                        } else {
                            "normal".to_string()
                        }
                    })
                }),
            ),
            (
                "xruns / cycles",
                cell(&|c, r| c.driver.map(|_| format!("{} / {}", r.xruns, r.cycles))),
            ),
        ];
        out.push(Table {
            title: "Round-trip latency, measured".into(),
            header: header.to_vec(),
            rows: metrics
                .into_iter()
                .map(|(m, v)| std::iter::once(m.to_string()).chain(v).collect())
                .collect(),
        });
    }
    out
}

/// Vignati et al. Fig. 2 as tables: per cell, the maximum instances per track and the mean DSP
/// load per instance, systems side by side.
fn load(docs: &[&Body], header: &[String]) -> Vec<Table> {
    let loads: Vec<_> = docs
        .iter()
        .filter_map(|b| match b {
            Body::Load { results, .. } => Some(results),
            _ => None,
        })
        .collect();
    let keys = union(loads.iter().flat_map(|r| {
        r.cells
            .iter()
            .map(|c| (c.buffer_frames, c.tracks, c.plugin.clone()))
    }));
    let table = |title: &str, f: &dyn Fn(&crate::measure::loadtest::Cell) -> String| Table {
        title: title.into(),
        header: std::iter::once("buffer · tracks · plugin".to_string())
            .chain(header[1..].iter().cloned())
            .collect(),
        rows: keys
            .iter()
            .map(|(b, t, p)| {
                std::iter::once(format!("{b} · {t} · {p}"))
                    .chain(
                        loads
                            .iter()
                            .map(|r| r.cell(*b, *t, p).map_or("-".into(), f)),
                    )
                    .collect()
            })
            .collect(),
    };
    vec![
        table("Max instances per track (Fig. 2 a/c/e…)", &|c| {
            format!("{}{}", c.max_per_track, if c.capped { "+" } else { "" })
        }),
        table(
            "Mean DSP load per instance, % of the period (Fig. 2 b/d/f…)",
            &|c| format!("{:.2}", c.dsp_load_per_instance_pct),
        ),
    ]
}

/// Cucinotta et al.'s rows (policies) side by side: end time, xruns, budget, the competitor.
fn sched(docs: &[&Body], header: &[String]) -> Vec<Table> {
    let scheds: Vec<_> = docs
        .iter()
        .filter_map(|b| match b {
            Body::Sched { results, .. } => Some(&**results),
            _ => None,
        })
        .collect();
    let labels = union(
        scheds
            .iter()
            .flat_map(|r| r.rows.iter().map(|x| x.label.clone())),
    );
    let table = |title: &str, f: &dyn Fn(&crate::measure::sched::SchedRow) -> String| Table {
        title: title.into(),
        header: std::iter::once("policy row".to_string())
            .chain(header[1..].iter().cloned())
            .collect(),
        rows: labels
            .iter()
            .map(|l| {
                std::iter::once(l.clone())
                    .chain(
                        scheds
                            .iter()
                            .map(|r| r.rows.iter().find(|x| x.label == *l).map_or("-".into(), f)),
                    )
                    .collect()
            })
            .collect(),
    };
    let us = |ns: u64| format!("{:.0}", ns as f64 / 1e3);
    vec![
        table("Driver end time p50 / p99 / max (µs)", &|x| {
            let e = &x.engine.end_time_ns;
            format!("{} / {} / {}", us(e.p50), us(e.p99), us(e.max))
        }),
        table("Xruns + skipped periods / cycles", &|x| {
            format!(
                "{} / {}",
                super::xruns_and_skipped(&x.engine),
                x.engine.cycles
            )
        }),
        table("Set Q avg / max (µs)", &|x| {
            crate::report::html::sched_set_q(x)
        }),
        table(
            "Competing task: deadline misses / jobs, response p99 (ms)",
            &|x| {
                x.compete.as_ref().map_or("-".into(), |c| {
                    format!(
                        "{} / {}, {:.2}",
                        c.deadline_misses,
                        c.jobs,
                        c.response_ns.p99 as f64 / 1e6
                    )
                })
            },
        ),
    ]
}

/// Any kind: every scalar field of the results side by side.
fn generic(inputs: &[Input], labels: &[String]) -> Table {
    let flat: Vec<Vec<(String, String)>> = inputs
        .iter()
        .map(|i| {
            let v = i.value();
            flatten(v.get("results").unwrap_or(&v), 150)
        })
        .collect();
    let mut keys: Vec<String> = Vec::new();
    for f in &flat {
        for (k, _) in f {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
    }
    let mut header = vec!["field".to_string()];
    header.extend(labels.iter().cloned());
    Table {
        title: format!("{} results", inputs[0].kind()),
        header,
        rows: keys
            .iter()
            .map(|k| {
                std::iter::once(k.clone())
                    .chain(flat.iter().map(|f| {
                        f.iter()
                            .find(|(x, _)| x == k)
                            .map_or("-".into(), |(_, v)| v.clone())
                    }))
                    .collect()
            })
            .collect(),
    }
}

/// Charts for the kinds whose study shows a figure: Fig. 2 of Vignati et al. for `load` (one curve
/// per system, plugin and buffer size), Cucinotta et al.'s end-time CDF for `sched`.
fn figures(inputs: &[Input], labels: &[String]) -> Vec<(String, &'static str)> {
    use super::plot::{line_chart, Axes, Series};
    let mut max = Vec::new();
    let mut per_inst = Vec::new();
    let mut end = Vec::new();
    for (i, l) in inputs.iter().zip(labels) {
        let Loaded::Doc(d) = &i.item else { continue };
        match &d.body {
            Body::Load { config, results } => {
                for (dst, f) in [
                    (
                        &mut max,
                        (|c: &crate::measure::loadtest::Cell| c.max_per_track as f64)
                            as fn(&_) -> f64,
                    ),
                    (&mut per_inst, |c| c.dsp_load_per_instance_pct),
                ] {
                    dst.extend(
                        super::html::load_series(config, results, f)
                            .into_iter()
                            .map(|s| Series {
                                label: format!("{l}: {}", s.label),
                                points: s.points,
                            }),
                    );
                }
            }
            Body::Sched { results, .. } => end.extend(results.rows.iter().map(|r| Series {
                label: format!("{l}: {}", r.label),
                points: super::html::cdf(&r.engine.end_time_ns),
            })),
            _ => {}
        }
    }
    let axes = |title, x_label, y_label, log_x| Axes {
        title,
        x_label,
        y_label,
        log_x,
        x_integer: !log_x,
        log_y: false,
        points_only: false,
        x_range: None,
        ..Default::default()
    };
    let mut out = super::compare_kinds::latency_figures(inputs, labels);
    if !max.is_empty() {
        out.push((line_chart(&axes("Max instances per track", "parallel tracks", "instances per track", false), &max),
            "Vignati et al. Fig. 2 for every system compared: the most plugin instances per track without a disqualifying xrun, one curve per system, plugin and buffer size (frames)."));
        out.push((line_chart(&axes("Mean DSP load per instance", "parallel tracks", "% of the period per instance", false), &per_inst),
            "Mean DSP load at the maximum divided by the instances per track, per system, plugin and buffer size."));
    }
    if !end.is_empty() {
        out.push((line_chart(&axes("Driver end time CDF", "end − ideal start (µs, log)", "share of cycles ≤ x", true), &end),
            "Share of cycles whose last client finished within x of the ideal cycle start, one curve per system and policy row."));
    }
    out
}

/// Tables as a self-contained HTML page.
pub fn to_html(tables: &[Table], inputs: &[Input], labels: &[String]) -> String {
    super::html::page(
        "xrunlab compare",
        html! {
            h2 { "Results compared" }
            table.inputs {
                tr { th { "label" } th { "file" } th { "system" } }
                @for (i, l) in inputs.iter().zip(labels) {
                    tr { td { (l) } td { (i.path.display().to_string()) }
                         td { (i.environment().map(super::text::style::system_line).unwrap_or_default()) } }
                }
            }
            @for (svg, caption) in figures(inputs, labels) {
                (super::html::figure(svg, caption))
            }
            @for t in tables {
                section.compare {
                    h2 { (t.title) }
                    (table_html(t))
                }
            }
        },
    )
}

/// One suite directory (or any directory of results) in a comparison.
pub struct Suite {
    pub dir: std::path::PathBuf,
    /// Its results, derived kinds (verdicts, predictions) left out.
    pub inputs: Vec<Input>,
    /// Each result's stage: the manifest's name for it, else the file's stem.
    pub stages: Vec<String>,
    pub verdict: (
        crate::results::verdict::VerdictConfig,
        crate::results::verdict::VerdictResults,
    ),
}

/// Column labels of suite directories: the machine and kernel of their first result, or
/// `--label DIR=TEXT` / `N=TEXT`.
pub fn suite_labels(suites: &[Suite], overrides: &[String]) -> Result<Vec<String>> {
    let mut out: Vec<String> = suites
        .iter()
        .map(|s| match s.inputs.iter().find_map(|i| i.environment()) {
            Some(env) if !env.hostname.is_empty() => format!("{} {}", env.hostname, env.kernel),
            _ => s.dir.display().to_string(),
        })
        .collect();
    for o in overrides {
        let Some((key, text)) = o.split_once('=') else {
            return Err(Error::usage(format!(
                "--label {o:?}: expected DIR=TEXT or N=TEXT"
            )));
        };
        let hit = suites.iter().enumerate().position(|(k, s)| {
            s.dir.as_os_str() == key
                || s.dir.file_name().is_some_and(|n| n == key)
                || key.parse::<usize>().ok() == Some(k + 1)
        });
        match hit {
            Some(k) => out[k] = text.to_string(),
            None => {
                return Err(Error::usage(format!(
                    "--label {o:?}: {key} names none of the directories compared"
                )))
            }
        }
    }
    let copy = out.clone();
    for (i, l) in out.iter_mut().enumerate() {
        if copy.iter().filter(|c| *c == l).count() > 1 {
            l.push_str(&format!(" #{}", i + 1));
        }
    }
    Ok(out)
}

/// Suites side by side: the verdicts in one table (a row per buffer size), then every stage
/// all of them ran, compared as its kind is.
pub fn suites(suites: &[Suite], labels: &[String]) -> Result<Vec<Table>> {
    use super::format::{per_hour, rate_cell};
    use crate::results::verdict::Condition;
    let mut header = vec!["".to_string()];
    header.extend(labels.iter().cloned());
    let mut rows = Vec::new();
    let each = |f: &dyn Fn(&Suite) -> String| -> Vec<String> { suites.iter().map(f).collect() };
    let row = |name: String, cells: Vec<String>| {
        let mut r = vec![name];
        r.extend(cells);
        r
    };
    rows.push(row(
        "smallest size meeting the target".into(),
        each(&|s| {
            s.verdict
                .1
                .recommended_frames
                .map_or("none shown".into(), |f| format!("{f} frames"))
        }),
    ));
    rows.push(row(
        "judged".into(),
        each(&|s| {
            format!(
                "{}, {}/h, {} Hz, n={}",
                s.verdict.1.judged_on.map_or("—", Condition::word),
                per_hour(s.verdict.0.target_per_hour),
                s.verdict.0.rate,
                s.verdict.0.periods
            )
        }),
    ));
    let sizes = union(
        suites
            .iter()
            .flat_map(|s| s.verdict.1.rows.iter().map(|r| r.buffer_frames)),
    );
    for f in sizes {
        rows.push(row(
            format!("{f} frames"),
            each(
                &|s| match s.verdict.1.rows.iter().find(|r| r.buffer_frames == f) {
                    None => "—".into(),
                    Some(r) => {
                        let p = r.stressed.as_ref().or(r.idle.as_ref());
                        format!(
                            "{}{}",
                            match r.meets_target {
                                Some(true) => "meets",
                                Some(false) => "fails",
                                None => "undecided",
                            },
                            p.map(|p| format!(" ({}/h)", rate_cell(&p.xruns_per_hour)))
                                .unwrap_or_default()
                        )
                    }
                },
            ),
        ));
    }
    rows.push(row(
        "top cause of xruns".into(),
        each(&|s| {
            s.verdict.1.causes.first().map_or("no xruns".into(), |c| {
                format!("{} ({} xruns)", c.cause, c.xruns)
            })
        }),
    ));
    rows.push(row(
        "fix first".into(),
        each(&|s| {
            s.verdict
                .1
                .advice
                .first()
                .map_or("—".into(), |a| a.title.clone())
        }),
    ));
    let mut out = vec![Table {
        title: "Verdicts".into(),
        header,
        rows,
    }];
    // Stages every suite has a result for, in the first suite's order.
    let Some(first) = suites.first() else {
        return Ok(out);
    };
    for stage in &first.stages {
        let picked: Option<Vec<Input>> = suites
            .iter()
            .map(|s| {
                let k = s.stages.iter().position(|x| x == stage)?;
                super::load(&s.inputs[k].path).ok()
            })
            .collect();
        let Some(picked) = picked else { continue };
        if check_kinds(&picked).is_err() {
            continue;
        }
        for mut t in compare(&picked, labels)? {
            t.title = format!("{stage}: {}", t.title);
            out.push(t);
        }
    }
    Ok(out)
}
