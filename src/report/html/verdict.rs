//! The verdict section: first in a suite's report.

use crate::report::answer::Tone;
use crate::report::format::per_hour;
use crate::report::verdict::{row_cells, HEADER};
use crate::results::verdict::{VerdictConfig, VerdictResults};
use maud::{html, Markup};

/// The answer in a box coloured by its tone (green decided, amber undecided, red failing),
/// with the command to run next: what a reader of the report sees first.
pub fn answer(r: &VerdictResults) -> Markup {
    let tone = match crate::report::answer::tone(r.recommended_frames, &r.rows, r.judged_on) {
        Tone::Ok => "tone-ok",
        Tone::Warn => "tone-warn",
        Tone::Fail => "tone-fail",
    };
    html! {
        div class={ "answer " (tone) } {
            p.headline { (r.headline) }
            @if let Some(next) = &r.next { p.next { "next: " code { (next) } } }
        }
    }
}

pub fn section(cfg: &VerdictConfig, r: &VerdictResults) -> Markup {
    html! {
        p { (cfg.rate) " Hz, " (cfg.periods) " periods, target " (per_hour(cfg.target_per_hour))
            " glitch/h; " (cfg.holds.describe()) "; compute: " (r.compute) }
        table.verdict {
            tr { @for h in HEADER { th { (h) } } }
            @for row in &r.rows {
                @let best = r.recommended_frames == Some(row.buffer_frames);
                tr.best[best] { @for c in row_cells(row) { td { @if best { b { (c) } } @else { (c) } } } }
            }
        }
        @if !r.causes.is_empty() {
            h4 { "Causes of the xruns seen" }
            table {
                tr { th { "cause" } th { "xruns" } th { "share" } th { "where" } th { "meaning" } }
                @for c in &r.causes {
                    tr { td { (c.cause) } td.n { (c.xruns) } td.n { (format!("{:.1} %", c.share_pct)) }
                         td { (c.files.join(", ")) } td { (c.meaning) } }
                }
            }
        }
        @if !r.culprits.is_empty() {
            h4 { "Culprits named by kernel tracing" }
            table {
                tr { th { "culprit" } th { "top in" } th { "time taken" } th { "worst" } th { "where" } }
                @for c in &r.culprits {
                    tr { td { (c.culprit) } td.n { (c.explained) } td.n { (crate::units::format_ns(c.total_ns)) }
                         td.n { (crate::units::format_ns(c.worst_ns)) } td { (c.files.join(", ")) } }
                }
            }
        }
        @if !r.advice.is_empty() {
            h4 { "What to fix first" }
            ol {
                @for a in &r.advice {
                    li { b { (a.title) } " (" (a.verdict) "): " (a.advice)
                         br; small { "evidence: " (a.evidence.join("; ")) } }
                }
            }
        }
        @if !r.gaps.is_empty() {
            ul { @for g in &r.gaps { li { (g) } } }
        }
        p { "Predicted glitches/h (episodes of late cycles per hour) per latency result (the worst idle and the worst stressed), with their 95 % interval; "
            "measured: run results at that size, as late cycles (xruns) per hour; free %: the share of the period the assumed compute leaves; max instances: "
            "the load grid's maxima (+: capped); a size meets the target when its interval under the judged condition lies within it "
            "and no run under that condition surely exceeded it (docs/methods.md \"Verdict\")." }
    }
}
