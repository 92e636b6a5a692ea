//! `sched`: Cucinotta et al. — one row per policy (driver period, end time, CPU time, xruns, budget,
//! the competitor's response times), the driver end-time CDF and the competitor's
//! response-time CDF per policy, and Set Q / Predicted Q / CPU time over time for the
//! reservation rows.

use super::run::cdf;
use super::{figure, n};
use crate::measure::sched::{SchedConfig, SchedResults, SchedRow};
use crate::report::plot::{decimate, line_chart, vline, Axes, Series};
use crate::units::format_ns;
use maud::{html, Markup};

fn us(ns: f64) -> String {
    format!("{:.0}", ns / 1e3)
}

/// Average and maximum Set Q of a row, µs, or "-" for rows without a controller.
pub(crate) fn set_q(row: &SchedRow) -> String {
    if row.q_series.is_empty() {
        return "-".into();
    }
    let k = row.q_series.len() as f64;
    let avg = row.q_series.iter().map(|x| x.set_q_ns as f64).sum::<f64>() / k;
    let max = row.q_series.iter().map(|x| x.set_q_ns).max().unwrap_or(0);
    format!("{} / {}", us(avg), us(max as f64))
}

fn q_chart(row: &SchedRow) -> String {
    let curve = |label: &str, f: fn(&crate::measure::sched::QPoint) -> u64| Series {
        label: label.into(),
        points: decimate(
            &row.q_series
                .iter()
                .map(|q| (q.t_ns as f64 / 1e9, f(q) as f64 / 1e3))
                .collect::<Vec<_>>(),
            2000,
        ),
    };
    line_chart(
        &Axes {
            title: &format!("Budget: {}", row.label),
            x_label: "time (s)",
            y_label: "µs per period",
            log_x: false,
            log_y: false,
            points_only: false,
            x_range: None,
            ..Default::default()
        },
        &[
            curve("Set Q", |q| q.set_q_ns),
            curve("Predicted Q", |q| q.predicted_q_ns),
            curve("CPU time", |q| q.cpu_ns),
        ],
    )
}

pub fn section(cfg: &SchedConfig, r: &SchedResults) -> Markup {
    let p_us = r.period_ns as f64 / 1e3;
    let mut end: Vec<Series> = r
        .rows
        .iter()
        .map(|row| Series {
            label: row.label.clone(),
            points: cdf(&row.engine.end_time_ns),
        })
        .collect();
    end.push(vline(
        format!("P = {}", format_ns(r.period_ns)),
        p_us,
        0.0,
        1.0,
    ));
    let mut resp: Vec<Series> = r
        .rows
        .iter()
        .filter_map(|row| {
            row.compete.as_ref().map(|c| Series {
                label: row.label.clone(),
                points: cdf(&c.response_ns),
            })
        })
        .collect();
    if let Some(c) = &cfg.compete {
        if !resp.is_empty() {
            resp.push(vline(
                format!("deadline {}", format_ns(c.deadline_ns)),
                c.deadline_ns as f64 / 1e3,
                0.0,
                1.0,
            ));
        }
    }
    let cdf_axes = |title: &'static str, x_label: &'static str| Axes {
        title,
        x_label,
        y_label: "share of cycles ≤ x",
        log_x: true,
        log_y: false,
        points_only: false,
        x_range: None,
        ..Default::default()
    };
    html! {
        h3 { "Scheduling policies" }
        p { @match &cfg.chain {
                Some(c) => { "Graph: the chain " code { (c) } " (" (cfg.clients) " client(s)) in one pipeline, " }
                None => { "Graph of " (cfg.clients) " burn client(s) × " (format!("{:.1}", cfg.client_pct)) " % of P in one pipeline, " }
            }
            (cfg.buffer_frames) " frames @ " (cfg.rate) " Hz: P = " (format_ns(r.period_ns)) "; "
            (format_ns(cfg.duration_ns)) " per row; "
            @match &cfg.compete {
                Some(c) => { "competing task " (c.name) " (" (format_ns(c.exec_ns)) " every " (format_ns(c.period_ns)) ")." }
                None => { "no competing task." }
            } }
        table.policies {
            tr { th { "row" } th { "status" } th { "period min / avg / max µs" } th { "end time min / p99 / max µs" }
                 th { "CPU avg µs" } th { "xruns + skipped" } th { "Set Q avg / max µs" } th { "Q updates (errors)" }
                 th { "compete response p50 / p99 / max ms" } th { "compete misses / jobs" } }
            @for row in &r.rows {
                @let e = &row.engine;
                tr { td { (row.label) } td { (format!("{:?}", row.status).to_lowercase()) }
                     (n(format!("{} / {} / {}", us(e.driver_period_ns.min as f64), us(e.driver_period_ns.mean), us(e.driver_period_ns.max as f64))))
                     (n(format!("{} / {} / {}", us(e.end_time_ns.min as f64), us(e.end_time_ns.p99 as f64), us(e.end_time_ns.max as f64))))
                     (n(us(e.cpu_ns.mean)))
                     (n(crate::report::xruns_and_skipped(e)))
                     (n(set_q(row)))
                     (n(format!("{} ({})", row.q_updates, row.q_errors)))
                     @match &row.compete {
                         Some(c) => {
                             (n(format!("{:.2} / {:.2} / {:.2}", c.response_ns.p50 as f64 / 1e6, c.response_ns.p99 as f64 / 1e6, c.response_ns.max as f64 / 1e6)))
                             (n(format!("{} / {}", c.deadline_misses, c.jobs)))
                         }
                         None => { (n("-")) (n("-")) }
                     } }
            }
        }
        @if let Some(f) = &r.forensics {
            (super::forensics::parts("row", &crate::report::parts::sched_rows(r)))
            (super::forensics::section(f))
        }
        @for row in r.rows.iter().filter(|r| r.q_first_error.is_some()) {
            p.warn { (row.label) ": sched_setattr failed " (row.q_errors) " time(s), first: " (row.q_first_error.as_deref().unwrap_or("")) }
        }
        (figure(line_chart(&cdf_axes("Driver end time CDF", "end − ideal start (µs, log)"), &end),
            "Share of cycles whose last client finished within x of the cycle's ideal start, one curve per row, drawn through the stored percentiles; the vertical line is the period P (Cucinotta et al.'s deadline)."))
        @if !resp.is_empty() {
            (figure(line_chart(&cdf_axes("Competing task response time CDF", "response time (µs, log)"), &resp),
                "Share of the competing task's jobs that completed within x of their release, per row; the vertical line is its deadline."))
        }
        @for row in r.rows.iter().filter(|r| !r.q_series.is_empty()) {
            (figure(q_chart(row), "Set Q (the runtime applied with sched_setattr), Predicted Q (the controller's percentile estimate before over-provisioning and bumps) and the CPU time the engine used, per controller step."))
        }
    }
}
