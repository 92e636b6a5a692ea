//! `predict`: one table per latency input and period count.

use super::style::{new_table, num};
use crate::report::format::{per_hour, rate_cell, span};
use comfy_table::Cell;

/// The outlook of one predicted row, with what would settle a marginal one.
pub fn outlook_cell(r: &crate::measure::predict::PredictRow) -> String {
    let mut s = r.outlook.word().to_string();
    if r.overload {
        s.push_str(" (overload)");
    }
    if let Some(t) = r.measure_for_ns {
        s.push_str(&format!(
            " (measure {})",
            crate::report::format::span_at_least(t)
        ));
    }
    if r.censored {
        s.push_str(" *");
    }
    s
}

/// What a `latency --busy` input's threads met while computing.
pub fn busy_phrase(b: &crate::measure::predict::BusyInfo) -> String {
    use crate::units::format_ns;
    format!(
        "busy {:.0} % of each interval: {} computes held {} or more in {} of compute, max {}; \
         an engine meets those in its compute too (added to the rates)",
        b.share_pct,
        b.holds,
        format_ns(b.gap_min_ns),
        span(b.exposed_ns),
        format_ns(b.max_ns),
    )
}

/// The part of each row's glitches that holds met while computing make, when the input
/// measured them.
pub fn held_in_compute(tb: &crate::measure::predict::PredictTable) -> Option<String> {
    let held: Vec<String> = tb
        .rows
        .iter()
        .filter_map(|x| {
            x.in_compute
                .map(|h| format!("{} at {}", per_hour(h.episodes_per_hour), x.buffer_frames))
        })
        .collect();
    (!held.is_empty()).then(|| {
        format!(
            "of the glitches/h, from holds met while computing: {}",
            held.join(", ")
        )
    })
}

/// `predict`: one table per latency input and period count.
pub fn summary(
    cfg: &crate::measure::predict::PredictConfig,
    r: &crate::measure::predict::PredictResults,
) -> String {
    use crate::units::format_ns;
    let mut s = String::new();
    for l in &r.latency {
        let stress = if l.stress.is_empty() {
            String::new()
        } else {
            format!(", under {}", l.stress.join(","))
        };
        s.push_str(&format!(
            "latency {}: {} ({}{stress}): {} wake-ups every {} on {} CPU(s), {} of CPU time, max {}\n",
            l.label,
            l.file,
            l.source,
            l.samples,
            format_ns(l.interval_ns),
            l.cpus.len(),
            span(l.observed_ns),
            format_ns(l.max_ns),
        ));
        if let Some(from) = l.censored_above_ns {
            s.push_str(&format!(
                "  * {} wake-ups above {} are known only by their count: taken at the maximum\n",
                l.censored,
                format_ns(from)
            ));
        }
        if let Some(b) = &l.busy {
            s.push_str(&format!("  {}\n", busy_phrase(b)));
        }
    }
    s.push_str(&format!("compute: {}\n", r.compute_description));
    s.push_str(&format!("{}\n", cfg.holds.describe()));
    let ms = |ns: f64| format!("{:.3}", ns / 1e6);
    for tb in &r.tables {
        s.push_str(&format!(
            "\n{}, {} periods, {} Hz: target {}/h\n",
            tb.latency,
            tb.periods,
            cfg.rate,
            per_hour(cfg.target_per_hour)
        ));
        let mut t = new_table(&[
            "buffer",
            "P",
            "budget",
            "compute",
            "P(miss)",
            "xruns/h (95 %)",
            "glitches/h (95 %)",
            "cyc/ep",
            "outlook",
        ]);
        for x in &tb.rows {
            t.add_row(vec![
                num(x.buffer_frames),
                num(ms(x.period_ns)),
                num(ms(x.budget_ns)),
                num(if x.compute_max_ns > x.compute_mean_ns * 1.0005 {
                    format!("{}/{}", ms(x.compute_mean_ns), ms(x.compute_max_ns))
                } else {
                    ms(x.compute_mean_ns)
                }),
                num(if x.p_miss == 0.0 || x.p_miss == 1.0 {
                    format!("{}", x.p_miss)
                } else {
                    format!("{:.1e}", x.p_miss)
                }),
                num(rate_cell(&x.xruns_per_hour)),
                num(rate_cell(&x.episodes_per_hour)),
                num(format!("{:.1}", x.cycles_per_episode)),
                Cell::new(outlook_cell(x)),
            ]);
        }
        s.push_str(&format!("{t}\n"));
        s.push_str(
            "P, budget (n-1)·P and compute (mean/max) in ms; P(miss): one cycle's; cyc/ep: late cycles per episode when the driver catches up\n",
        );
        if let Some(h) = held_in_compute(tb) {
            s.push_str(&format!("{h}\n"));
        }
        s.push_str(&match tb.smallest_ok_frames {
            Some(f) => format!(
                "smallest buffer within {}/h: {f} frames\n",
                per_hour(cfg.target_per_hour)
            ),
            None => format!(
                "no buffer size is surely within {}/h\n",
                per_hour(cfg.target_per_hour)
            ),
        });
    }
    s
}
