//! `event`: Topliss et al.'s trigger-to-sound latency — per setting the measured min/mean/max/std
//! beside the model, measured against modelled means (one point per setting), and the
//! per-trial latencies of single runs.

use super::{figure, n};
use crate::measure::event::{EventConfig, EventResults, EventRun};
use crate::report::plot::{line_chart, Axes, Series};
use maud::{html, Markup};

fn ms(ns: f64) -> String {
    format!("{:.3}", ns / 1e6)
}

fn name(r: &EventRun) -> String {
    let d = format!("{:?}", r.driver).to_lowercase();
    let s = format!("{:?}", r.scenario).to_lowercase();
    format!("{d} {s}")
}

fn setting(r: &EventRun) -> String {
    match (r.grid_buffer_frames, r.periods) {
        (Some(b), _) => format!("{b}/{}", r.period_frames),
        (None, Some(p)) => format!("{}×{p}", r.period_frames),
        (None, None) => r.period_frames.to_string(),
    }
}

/// Measured against modelled mean latency, one series per driver and scenario (the chart
/// draws the diagonal where the two agree as a dashed line: a series of markers cannot).
fn model_series(r: &EventResults) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    for run in r.runs.iter().filter(|x| x.latency.count > 0) {
        let p = (run.model.mean_ns / 1e6, run.latency.mean_ns / 1e6);
        match out.iter_mut().find(|s| s.label == name(run)) {
            Some(s) => s.points.push(p),
            None => out.push(Series {
                label: name(run),
                points: vec![p],
            }),
        }
    }
    out
}

pub fn section(cfg: &EventConfig, r: &EventResults) -> Markup {
    let vs_model = model_series(r);
    // Per-trial diagrams only for a handful of runs: a grid has dozens of settings.
    let single: Vec<&EventRun> = r.runs.iter().filter(|x| !x.trials.is_empty()).collect();
    html! {
        h3 { "Trigger-to-sound latency" }
        p { (cfg.trials) " trials per setting at " (cfg.rate) " Hz; drivers "
            (cfg.drivers.iter().map(|d| format!("{d:?}").to_lowercase()).collect::<Vec<_>>().join(", "))
            "; trigger " (format!("{:?}", cfg.trigger).to_lowercase())
            @if cfg.grid.is_some() { "; grid of Topliss et al.'s buffer/period pairs" } "." }
        table.cells {
            tr { th { "driver" } th { "scenario" } th { "buffer/period" } th { "trials" }
                 th { "min / mean / max ms" } th { "std ms" } th { "model min / mean / max ms" }
                 th { "output delay frames" } th { "xruns (ours / server)" } }
            @for x in &r.runs {
                tr { td { (format!("{:?}", x.driver).to_lowercase()) } td { (format!("{:?}", x.scenario).to_lowercase()) }
                     (n(setting(x))) (n(x.latency.count))
                     (n(format!("{} / {} / {}", ms(x.latency.min_ns as f64), ms(x.latency.mean_ns), ms(x.latency.max_ns as f64))))
                     (n(ms(x.latency.std_ns)))
                     (n(format!("{} / {} / {}", ms(x.model.min_ns), ms(x.model.mean_ns), ms(x.model.max_ns))))
                     (n(x.output_delay_frames))
                     (n(format!("{} / {}", x.xruns, x.server_xruns.map_or("-".to_string(), |v| v.to_string())))) }
            }
        }
        @if !r.skipped.is_empty() {
            p { "Not measured: " (r.skipped.join("; ")) }
        }
        @if let Some(f) = &r.forensics {
            (super::forensics::parts("setting", &crate::report::parts::event_runs(r)))
            (super::forensics::section(f))
        }
        @if !vs_model.is_empty() {
            (figure(line_chart(&Axes { title: "Mean latency: measured vs model", x_label: "model mean (ms)",
                    y_label: "measured mean (ms)", points_only: true, diagonal: Some("measured = model"), ..Default::default() }, &vs_model),
                "One point per setting; on the diagonal the measurement equals the model (output delay + half a period + onset). ALSA pushes, so its latency grows with the whole buffer; JACK pulls, so it grows with the period."))
        }
        @if single.len() <= 4 {
            @for x in &single {
                (figure(line_chart(&Axes { title: &format!("{} at {}: latency per trial", name(x), setting(x)),
                        x_label: "trial", y_label: "ms", points_only: true, ..Default::default() },
                        &[Series { label: "trigger to sound".into(),
                                   points: x.trials.iter().map(|t| (t.trial as f64, t.latency_ns as f64 / 1e6)).collect() }]),
                    "The random trigger phase spreads the trials over one period above the model's minimum."))
            }
        }
    }
}
