//! `watch`: what was watched, the answer, and every xrun.

use crate::measure::watch::cycles::{CycleTimeline, Headroom, BINS};
use crate::measure::watch::sizes::OtherSizes;
use crate::measure::watch::{WatchConfig, WatchResults};
use crate::report::text::inside::{held_cell, label};
use crate::report::text::watch::{answer, other_sizes_section};
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
                tr { th { "#" } th { "time" } th { "cycle" } th { "driver delay" } th { "DSP load" } th { "late client" } th { "what ran on its CPU" } th { "cause" } }
                @for x in &r.xruns {
                    tr { (super::n(x.index.to_string())) td { (x.wall) } (super::n(x.cycle.to_string()))
                         (super::n(if x.delayed_us > 0.0 { format!("{:.2} ms", x.delayed_us / 1000.0) } else { "-".into() }))
                         (super::n(format!("{:.0} %", x.dsp_load_pct)))
                         @match &x.late {
                             Some(l) => {
                                 td { (l.who()) @if l.woke_late { " woke " (format_ns(l.wake_delay_ns)) " late (usual " (format_ns(l.usual_wake_delay_ns)) ")" }
                                      @else { " ran " (format_ns(l.run_ns)) " (usual " (format_ns(l.usual_run_ns)) "; busy " (format_ns(l.busy_ns)) ")" }
                                      @if let Some(h) = &l.inside { ", " (held_cell(h)) } }
                                 td { (l.culprit.clone().unwrap_or_default()) @if l.culprit_ns > 0 { " " (format_ns(l.culprit_ns)) } }
                                 td { (l.class.map_or("-", |c| c.phrase())) }
                             },
                             None => { td { "-" } td { "-" } td { "-" } },
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
                tr { th { "client thread" } th { "named by" } th { "pid/tid" } th { "cycles" } th { "busy p50" } th { "busy p99" } th { "busy max" }
                     th { "wake-up p50" } th { "wake-up p99" } th { "wake-up max" } th { "xruns late" } }
                @for c in &r.clients {
                    tr { td { (c.who()) } td { (named_by(c.named_by)) } td { (c.pid) "/" (c.tid) } (super::n(c.busy_ns.count.to_string()))
                         (super::n(format_ns(c.busy_ns.p50))) (super::n(format_ns(c.busy_ns.p99))) (super::n(format_ns(c.busy_ns.max)))
                         (super::n(format_ns(c.wake_delay_ns.p50))) (super::n(format_ns(c.wake_delay_ns.p99))) (super::n(format_ns(c.wake_delay_ns.max)))
                         (super::n(c.xruns_late.to_string())) }
                }
            }
        }
        @if let Some(i) = &r.inside { (inside(i)) }
        @if let Some(o) = &r.other_sizes { (other_sizes(o, r)) }
        @if let Some(h) = &r.headroom { (headroom(h)) }
        @if !r.busy_histograms.is_empty() { (busy(r)) }
        @if let Some(t) = &r.worst_cycle { (timeline(t)) }
        @if let Some(f) = &r.forensics { (super::forensics::section(f)) }
        @if let Some(n) = &r.forensics_note { p.note { (n) } }
    }
}

/// The code inside each client thread, from sampling it: every code the result keeps.
fn inside(i: &crate::measure::watch::inside::InsideSummary) -> Markup {
    html! {
        h4 { "Inside each client thread (sampled every " (format_ns(i.sample_period_ns)) " of its CPU time)" }
        @if let Some(why) = &i.refused { p.warn { "some threads were not sampled: " (why) } }
        @if !i.code.is_empty() {
            table.inside {
                tr { th { "client thread" } th { "code" } th { "per cycle mean" } th { "p50" } th { "p99" } th { "max" } th { "top in cycles" } th { "xruns led" } }
                @for c in &i.code {
                    tr { td { (c.who()) } td { (label(&c.code)) } (super::n(format_ns(c.mean_ns)))
                         (super::n(format_ns(c.p50_ns))) (super::n(format_ns(c.p99_ns))) (super::n(format_ns(c.max_ns)))
                         (super::n(c.top_cycles.to_string())) (super::n(c.xruns_led.to_string())) }
                }
            }
        }
    }
}

/// What the watched cycles say of the other buffer sizes: a row per size, the one watched
/// with what was measured; the terminal's sentence above it.
fn other_sizes(o: &OtherSizes, r: &WatchResults) -> Markup {
    html! {
        h4 { "Other buffer sizes, from the watched cycles" }
        p { (other_sizes_section(o, r)) }
        table.sizes {
            tr { th { "frames" } th { "xruns (model)" } th { "95 % interval" } th { "measured" } }
            @for e in &o.sizes {
                tr { (super::n(e.frames.to_string()))
                     (super::n(format!("{}{:.1}", if e.rough { "~ " } else { "" }, e.xruns)))
                     (super::n(if e.rough { "rough either way".into() } else { format!("{:.1}–{:.1}", e.low, e.high) }))
                     (super::n(if e.watched { r.total_xruns().to_string() } else { "-".into() })) }
            }
        }
    }
}

/// The near-miss histogram: cycles by headroom in 5 % steps of the period.
fn headroom(h: &Headroom) -> Markup {
    let max = h
        .bins
        .iter()
        .copied()
        .chain([h.missed])
        .max()
        .unwrap_or(0)
        .max(1);
    let bar = |n: u64| {
        // Log-scaled: a handful of near misses must show next to thousands of easy cycles.
        let w = (n as f64).ln_1p() / (max as f64).ln_1p() * 300.0;
        format!("{w:.0}")
    };
    html! {
        h4 { "Near misses: every cycle's headroom" }
        p { (h.cycles) " cycles of " (format_ns(h.period_ns)) "; least headroom " (format_ns(h.min_ns))
            ", p1 " (format_ns(h.p1_ns)) ", median " (format_ns(h.p50_ns)) "; "
            (h.missed) " missed their deadline." }
        table.headroom {
            tr { th { "headroom" } th { "cycles" } th { "" } }
            tr { td { "missed (xrun)" } (super::n(h.missed)) td { svg width="310" height="10" { rect width=(bar(h.missed)) height="10" fill="#c0392b" {} } } }
            @for (i, n) in h.bins.iter().enumerate() {
                tr { td { (i * 100 / BINS) "–" ((i + 1) * 100 / BINS) " %" } (super::n(n))
                     td { svg width="310" height="10" { rect width=(bar(*n)) height="10" fill="#2c7fb8" {} } } }
            }
        }
    }
}

/// Each node's or client's busy time per cycle, in 5 % steps of the period.
fn busy(r: &WatchResults) -> Markup {
    html! {
        h4 { "Busy time per cycle, by client or node (share of the period, log-scaled bars)" }
        table.busy {
            tr { th { "client / node" } @for i in 0..BINS { th { (i * 100 / BINS) } } }
            @for b in &r.busy_histograms {
                @let max = b.bins.iter().copied().max().unwrap_or(0).max(1);
                tr { td { (b.name) }
                     @for n in &b.bins {
                         @let h = (*n as f64).ln_1p() / (max as f64).ln_1p() * 24.0;
                         td title=(n) { svg width="12" height="24" { rect y=(format!("{:.0}", 24.0 - h)) width="12" height=(format!("{h:.0}")) fill="#2c7fb8" {} } }
                     }
                }
            }
        }
    }
}

/// The worst xrun's cycle: one lane per node, waiting (signal → awake) and busy (awake →
/// finish), with the deadline; the late node's lane in red.
fn timeline(t: &CycleTimeline) -> Markup {
    let span = t
        .lanes
        .iter()
        .filter_map(|l| l.finish_ns)
        .chain([t.period_ns as i64 * 2])
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let x = |ns: i64| format!("{:.1}", 160.0 + (ns.max(0) as f64 / span) * 600.0);
    let w = |a: i64, b: i64| {
        format!(
            "{:.1}",
            (b.saturating_sub(a).max(0) as f64 / span * 600.0).max(1.0)
        )
    };
    let height = 20 * t.lanes.len() + 30;
    html! {
        h4 { "The worst xrun's cycle (xrun " (t.xrun) "), one lane per client (grey: woken, waiting for its CPU; blue: running; red: the late one)" }
        svg.timeline width="780" height=(height) {
            line x1=(x(t.period_ns as i64)) x2=(x(t.period_ns as i64)) y1="0" y2=(height - 15) stroke="black" stroke-dasharray="4" {}
            text x=(x(t.period_ns as i64)) y=(height - 3) font-size="10" { "deadline " (format_ns(t.period_ns)) }
            @for (i, l) in t.lanes.iter().enumerate() {
                @let y = 20 * i + 4;
                text x="0" y=(y + 11) font-size="11" { (l.name) }
                rect x=(x(l.signal_ns)) y=(y) width=(w(l.signal_ns, l.awake_ns)) height="14" fill="#bbbbbb" {}
                @match l.finish_ns {
                    Some(f) => { rect x=(x(l.awake_ns)) y=(y) width=(w(l.awake_ns, f)) height="14" fill=(if l.late { "#c0392b" } else { "#2c7fb8" }) {} },
                    None => { rect x=(x(l.awake_ns)) y=(y) width=(w(l.awake_ns, span as i64)) height="14" fill="#c0392b" opacity="0.5" {} },
                }
            }
        }
    }
}

/// How a client's name was found, in words.
fn named_by(n: crate::measure::watch::names::NamedBy) -> &'static str {
    use crate::measure::watch::names::NamedBy;
    match n {
        NamedBy::Semaphore => "its JACK semaphore",
        NamedBy::Pid => "libjack's client pid",
        NamedBy::Node => "PipeWire node",
        NamedBy::Process => "process only",
    }
}
