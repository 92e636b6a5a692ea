//! The `--forensics` section of a run or latency result: the culprit table and what took the
//! worst window, part by part (docs/ARCHITECTURE.md §3 "Forensics").

use super::n;
use crate::trace::{Forensics, WakeVerdict, WindowReport};
use crate::units::format_ns;
use maud::{html, Markup};

fn verdict(v: WakeVerdict) -> &'static str {
    match v {
        WakeVerdict::WakeupLate => "the wake-up came late (timer or IRQ)",
        WakeVerdict::NotScheduled => "woken in time, runnable, not scheduled",
        WakeVerdict::NoWakeupTraced => "no wake-up traced (did not sleep, or events lost)",
    }
}

fn worst(f: &Forensics) -> Option<&WindowReport> {
    f.windows
        .iter()
        .max_by_key(|w| w.end_ns.max(w.wake_ns).saturating_sub(w.t_ideal_ns))
}

/// The traced parts of a measurement (failed load trials, sched rows, latencytest phases),
/// each with its top culprit; `section` of the merged table follows it.
pub fn parts(what: &str, parts: &[(String, &Forensics)]) -> Markup {
    html! {
        @if !parts.is_empty() {
            table.culprits {
                tr { th { (what) } th { "explained" } th { "top culprit" } th { "top in" } th { "time taken" } th { "worst single" } }
                @for (label, f) in parts {
                    tr { td { (label) } (n(format!("{} {}(s)", f.windows_total, f.windows_of)))
                         @match f.culprits.first() {
                             Some(c) => { td { (c.culprit.label()) } (n(c.explained)) (n(format_ns(c.total_ns))) (n(format_ns(c.worst_ns))) }
                             None => { td { "—" } (n("")) (n("")) (n("")) }
                         } }
                }
            }
        }
    }
}

pub fn section(f: &Forensics) -> Markup {
    html! {
        h4 { "Forensics: who took the time" }
        p { (f.windows_total) " " (f.windows_of) "(s) explained from " (f.events) " kernel trace events on CPU "
            (crate::rt::affinity::format_cpu_list(&f.cpus)) "." }
        @if f.lost_events > 0 {
            p.warn { (f.lost_events) " trace events were lost: windows touching them are lower bounds." }
        }
        @if !f.culprits.is_empty() {
            table.culprits {
                tr { th { "culprit" } th { "CPU" } th { "top culprit of" } th { "present in" } th { "time taken" } th { "worst single" } }
                @for r in f.culprits.iter().take(20) {
                    tr { td { (r.culprit.label()) } (n(r.cpu.map_or(String::new(), |c| c.to_string())))
                         (n(r.explained)) (n(r.present)) (n(format_ns(r.total_ns))) (n(format_ns(r.worst_ns))) }
                }
            }
        }
        @if let Some(w) = worst(f) {
            p { "Worst " (f.windows_of) ": #" (w.id) " on CPU " (w.cpu.map_or("?".into(), |c| c.to_string()))
                ", woken " (format_ns(w.wake_ns.saturating_sub(w.t_ideal_ns))) " after its ideal time, ended "
                (format_ns(w.end_ns.saturating_sub(w.t_ideal_ns))) " after it; " (verdict(w.wakeup.verdict))
                @if let Some(b) = &w.wakeup.behind { ", behind " (b.label()) } "." }
            table.worst {
                tr { th { "part" } th { "who" } th { "time" } }
                @for (part, shares) in [("ideal → wake", &w.before_wake), ("wake → end", &w.after_wake)] {
                    @for s in shares.iter() {
                        tr { td { (part) } td { (s.culprit.label()) } (n(format_ns(s.ns))) }
                    }
                }
            }
        }
        p { "Unaccounted: time the trace gives to nobody — tasks or idle before a late wake-up (the timer interrupt preempts any task, so the wake-up itself was late: a vCPU not run, interrupts held off), our thread on the CPU beyond the CPU time it measured (steal), or lost events." }
    }
}
