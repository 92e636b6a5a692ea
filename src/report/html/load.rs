//! `load`: Vignati et al. Fig. 2 — the most plugin instances per track against the number of
//! parallel tracks, one curve per plugin type and buffer size, and beside it the mean DSP
//! load per instance; then every cell of the grid.

use super::{figure, n};
use crate::measure::loadtest::{Cell, LoadConfig, LoadResults};
use crate::report::plot::{line_chart, Axes, Series};
use crate::units::format_ns;
use maud::{html, Markup};

/// One curve per (buffer, plugin) over the track counts, of `f(cell)`.
pub(crate) fn fig2_series(
    cfg: &LoadConfig,
    r: &LoadResults,
    f: impl Fn(&Cell) -> f64,
) -> Vec<Series> {
    let mut out = Vec::new();
    for &b in &cfg.buffers {
        for p in &cfg.plugins {
            let points: Vec<(f64, f64)> = cfg
                .tracks
                .iter()
                .filter_map(|&t| r.cell(b, t, p).map(|c| (t as f64, f(c))))
                .collect();
            if !points.is_empty() {
                out.push(Series {
                    label: format!("{p} @ {b}"),
                    points,
                });
            }
        }
    }
    out
}

fn tracks_range(cfg: &LoadConfig) -> Option<(f64, f64)> {
    let lo = *cfg.tracks.iter().min()? as f64;
    let hi = *cfg.tracks.iter().max()? as f64;
    Some((lo - 0.25, hi + 0.25))
}

pub fn section(cfg: &LoadConfig, r: &LoadResults) -> Markup {
    let max = fig2_series(cfg, r, |c| c.max_per_track as f64);
    let per_inst = fig2_series(cfg, r, |c| c.dsp_load_per_instance_pct);
    let x_range = tracks_range(cfg);
    html! {
        h3 { "DSP load test" }
        p { (format!("{:?}", cfg.driver).to_lowercase()) " driver, " (cfg.rate) " Hz, " (cfg.periods) " periods; "
            "trials of " (format_ns(cfg.duration_ns))
            @if let Some(v) = cfg.validate_ns { ", maxima validated for " (format_ns(v)) }
            "; criterion " (format!("{:?}", cfg.criterion).to_lowercase()) "; "
            (r.cells.len()) " of " (r.cells_total) " cells measured"
            @if (r.cells.len() as u32) < r.cells_total { " (partial grid: resume it with " code { "xrunlab load --resume" } ")" }
            "." }
        @if let Some(st) = &r.stress { p { (crate::report::text::stress::stress_line(st)) } }
        @else { p { "No stress load ran during the grid." } }
        @if let Some(l) = crate::report::text::load::load_host_line(r) { p.warn { (l) } }
        (figure(line_chart(&Axes { title: "Max instances per track (Fig. 2 a/c/e…)", x_label: "parallel tracks",
                y_label: "instances per track", log_x: false, log_y: false, points_only: false, x_range, x_integer: true, ..Default::default() }, &max),
            "The largest number of plugin instances per track that ran a whole trial without a disqualifying xrun, per number of parallel tracks; one curve per plugin type @ buffer size (frames)."))
        (figure(line_chart(&Axes { title: "Mean DSP load per instance (Fig. 2 b/d/f…)", x_label: "parallel tracks",
                y_label: "% of the period per instance", log_x: false, log_y: false, points_only: false, x_range, x_integer: true, ..Default::default() }, &per_inst),
            "Mean DSP load ((end − wake) / P) at the maximum, divided by the instances per track: the cost of one instance including the engine's overhead."))
        h4 { "Cells" }
        table.cells {
            tr { th { "buffer" } th { "period" } th { "tracks" } th { "plugin" } th { "limit/track" } th { "max/track" }
                 th { "total" } th { "DSP load mean / p99 / max %" } th { "% per instance" } th { "xruns (non-disqualifying)" }
                 th { "wake p99 / max" } th { "trials" } th { "time" } }
            @for c in &r.cells {
                tr { (n(c.buffer_frames)) (n(format_ns(c.period_ns))) (n(c.tracks)) td { (c.plugin) }
                     (n(match c.limit.used() {
                         Some(u) => format!("{} ({}: {:.1} ns/frame at K = {})", c.limit.per_track, c.limit.source, u.ns_per_frame, u.instances),
                         None => format!("{} ({})", c.limit.per_track, c.limit.source),
                     }))
                     (n(format!("{}{}", c.max_per_track, if c.capped { "+" } else { "" })))
                     (n(c.total_instances))
                     (n(format!("{:.1} / {:.1} / {:.1}", c.dsp_load_pct.mean, c.dsp_load_pct.p99, c.dsp_load_pct.max)))
                     (n(format!("{:.2}", c.dsp_load_per_instance_pct)))
                     (n(c.xruns.total))
                     (n(format!("{} / {}", format_ns(c.wake_latency_p99_ns), format_ns(c.wake_latency_max_ns))))
                     (n(format!("{} ({} passed)", c.trials.len(), c.trials.iter().filter(|t| t.passed).count())))
                     (n(format_ns(c.time_spent_ns))) }
            }
        }
        p { "limit/track: instances that fit one period by the cost of an instance with nothing else running (its source in brackets; "
            "bench: measured with K distinct instances in series, K = the instances a thread runs at the limit of one instance, then at the limit found at that K); "
            "+ : the search stopped at --max-instances without a failure." }
        @if let Some(f) = &r.forensics {
            (super::forensics::parts("failed trial", &crate::report::parts::load_trials(r)))
            (super::forensics::section(f))
        }
    }
}
