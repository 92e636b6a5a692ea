use super::n;
use crate::measure::predict::{PredictConfig, PredictResults};
use crate::report::format::{per_hour, rate_cell, span};
use crate::report::text::predict::{busy_phrase, held_in_compute, outlook_cell};
use maud::{html, Markup};

pub fn section(cfg: &PredictConfig, r: &PredictResults) -> Markup {
    use crate::units::format_ns;
    let ms = |ns: f64| format!("{:.3}", ns / 1e6);
    html! {
        h3 { "Predicted xruns" }
        ul {
            @for l in &r.latency {
                li { "latency " b { (l.label) } ": " (l.file) " (" (l.source) "), " (l.samples)
                     " wake-ups every " (format_ns(l.interval_ns)) " on " (l.cpus.len()) " CPU(s), "
                     (span(l.observed_ns)) " of CPU time, max " (format_ns(l.max_ns))
                     @if let Some(from) = l.censored_above_ns {
                         "; " (l.censored) " wake-ups above " (format_ns(from)) " known only by their count (*)"
                     }
                     @if let Some(b) = &l.busy {
                         "; " (busy_phrase(b))
                     } }
            }
            li { "compute: " (r.compute_description) }
            li { (cfg.holds.describe()) }
        }
        @for tb in &r.tables {
            h4 { (tb.latency) ", " (tb.periods) " periods, " (cfg.rate) " Hz — target " (per_hour(cfg.target_per_hour)) "/h" }
            table.predict {
                tr { th { "buffer" } th { "P ms" } th { "budget ms" } th { "compute ms mean/max" } th { "P(miss)/cycle" }
                     th { "xruns/h (95 %)" } th { "glitches/h (95 %)" } th { "cycles/episode" } th { "outlook" } }
                @for x in &tb.rows {
                    tr { (n(x.buffer_frames)) (n(ms(x.period_ns))) (n(ms(x.budget_ns)))
                         (n(format!("{}/{}", ms(x.compute_mean_ns), ms(x.compute_max_ns))))
                         (n(format!("{:.1e}", x.p_miss)))
                         (n(rate_cell(&x.xruns_per_hour))) (n(rate_cell(&x.episodes_per_hour)))
                         (n(format!("{:.1}", x.cycles_per_episode)))
                         td { @if tb.smallest_ok_frames == Some(x.buffer_frames) { b { (outlook_cell(x)) } } @else { (outlook_cell(x)) } } }
                }
            }
            @if let Some(h) = held_in_compute(tb) {
                p { (h) }
            }
        }
        p { "A cycle misses when wake-up latency + compute time exceeds (n−1)·P. Glitches are episodes: runs of consecutive late cycles, one per host stall, what a listener hears; "
            "xruns count every late cycle as a driver that catches up (JACK) does. Intervals are exact Poisson intervals on the latency samples beyond the budget; "
            "\"< X\": fewer than 3 such samples, the data only bounds the rate. Outlook against the target glitches per hour: ok when the interval lies within it, "
            "fails when above, marginal when it contains it (docs/methods.md)." }
    }
}
