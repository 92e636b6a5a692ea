//! `watch`: what was watched, the answer, and every xrun.

use crate::measure::watch::{WatchConfig, WatchResults};
use crate::report::text::watch::answer;
use crate::units::format_ns;
use maud::{html, Markup};

pub fn section(_cfg: &WatchConfig, r: &WatchResults) -> Markup {
    let s = &r.server;
    html! {
        h3 { "Watch of a live session" }
        p { (s.kind) " '" (s.name) "' (" (s.version) "), " (s.frames) " frames at " (s.rate) " Hz ("
            (format_ns(s.period_ns())) "), watched " (crate::report::format::span(r.watched_ns)) }
        p.answer { strong { (answer(r)) } }
        @if !r.xruns.is_empty() {
            table.xruns {
                tr { th { "#" } th { "time" } th { "cycle" } th { "driver delay" } th { "DSP load" } }
                @for x in &r.xruns {
                    tr { (super::n(x.index.to_string())) td { (x.wall) } (super::n(x.cycle.to_string()))
                         (super::n(if x.delayed_us > 0.0 { format!("{:.2} ms", x.delayed_us / 1000.0) } else { "-".into() }))
                         (super::n(format!("{:.0} %", x.dsp_load_pct))) }
                }
            }
        }
        @if r.xruns_lost > 0 { p.warn { (r.xruns_lost) " xrun notification(s) counted but not detailed" } }
        @for g in &r.gaps {
            p { "server away from " (crate::report::format::span(g.from_ns))
                @match g.to_ns { Some(t) => { " to " (crate::report::format::span(t)) }, None => { " until the end" } } }
        }
        @if let Some(n) = &r.forensics_note { p.note { (n) } }
    }
}
