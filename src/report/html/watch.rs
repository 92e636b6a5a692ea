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
                tr { th { "#" } th { "time" } th { "cycle" } th { "driver delay" } th { "DSP load" } th { "late client" } th { "what ran on its CPU" } }
                @for x in &r.xruns {
                    tr { (super::n(x.index.to_string())) td { (x.wall) } (super::n(x.cycle.to_string()))
                         (super::n(if x.delayed_us > 0.0 { format!("{:.2} ms", x.delayed_us / 1000.0) } else { "-".into() }))
                         (super::n(format!("{:.0} %", x.dsp_load_pct)))
                         @match &x.late {
                             Some(l) => {
                                 td { (l.name) @if l.woke_late { " woke " (format_ns(l.wake_delay_ns)) " late (usual " (format_ns(l.usual_wake_delay_ns)) ")" }
                                      @else { " ran " (format_ns(l.run_ns)) " (usual " (format_ns(l.usual_run_ns)) "; busy " (format_ns(l.busy_ns)) ")" } }
                                 td { (l.culprit.clone().unwrap_or_default()) @if l.culprit_ns > 0 { " " (format_ns(l.culprit_ns)) } }
                             },
                             None => { td { "-" } td { "-" } },
                         } }
                }
            }
        }
        @if r.xruns_lost > 0 { p.warn { (r.xruns_lost) " xrun notification(s) counted but not detailed" } }
        @for g in &r.gaps {
            p { "server away from " (crate::report::format::span(g.from_ns))
                @match g.to_ns { Some(t) => { " to " (crate::report::format::span(t)) }, None => { " until the end" } } }
        }
        @if !r.clients.is_empty() {
            h4 { "Client threads: busy time and wake-up delay per cycle" }
            table.clients {
                tr { th { "client thread" } th { "pid/tid" } th { "cycles" } th { "busy p50" } th { "busy p99" } th { "busy max" }
                     th { "wake-up p50" } th { "wake-up p99" } th { "wake-up max" } th { "xruns late" } }
                @for c in &r.clients {
                    tr { td { (c.name) } td { (c.pid) "/" (c.tid) } (super::n(c.busy_ns.count.to_string()))
                         (super::n(format_ns(c.busy_ns.p50))) (super::n(format_ns(c.busy_ns.p99))) (super::n(format_ns(c.busy_ns.max)))
                         (super::n(format_ns(c.wake_delay_ns.p50))) (super::n(format_ns(c.wake_delay_ns.p99))) (super::n(format_ns(c.wake_delay_ns.max)))
                         (super::n(c.xruns_late.to_string())) }
                }
            }
        }
        @if let Some(f) = &r.forensics { (super::forensics::section(f)) }
        @if let Some(n) = &r.forensics_note { p.note { (n) } }
    }
}
