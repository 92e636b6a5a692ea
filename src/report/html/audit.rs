//! `plugins audit`: a table of plugins × checks (verdict per cell, the figure on hover), then
//! each finding that did not pass with its figure.

use crate::measure::audit::{AuditConfig, Outcome, PluginAudit, Verdict};
use maud::{html, Markup};

pub fn section(cfg: &AuditConfig, r: &[PluginAudit]) -> Markup {
    let mut ids: Vec<&str> = Vec::new();
    for a in r {
        for c in &a.checks {
            if !ids.contains(&c.id.as_str()) {
                ids.push(&c.id);
            }
        }
    }
    let rates: Vec<String> = cfg.rates.iter().map(u32::to_string).collect();
    let blocks: Vec<String> = cfg.blocks.iter().map(u32::to_string).collect();
    html! {
        h3 { "Plugin audit" }
        p { "Real-time checks at " (blocks.join(", ")) " frames and " (rates.join(", ")) " Hz; cost, latency and state at "
            (cfg.cost_block) " frames, " (cfg.cost_rate) " Hz. Each plugin ran in a child process of its own." }
        table.audit {
            tr { th { "plugin" } th { "verdict" } @for id in &ids { th { (id) } } }
            @for a in r {
                tr {
                    td { (a.name) br; small { (a.plugin) } }
                    td { (outcome(a)) }
                    @if a.outcome == Outcome::Audited {
                        @for id in &ids {
                            @match a.checks.iter().find(|c| c.id == *id) {
                                Some(c) => td title=(c.figure) { (c.verdict.word()) },
                                None => td { "—" },
                            }
                        }
                    } @else {
                        td colspan=(ids.len().max(1)) { (a.reason.clone().unwrap_or_default()) }
                    }
                }
            }
        }
        @for a in r.iter().filter(|a| a.outcome == Outcome::Audited) {
            @let found: Vec<_> = a.checks.iter().filter(|c| c.verdict != Verdict::Pass).collect();
            @if !found.is_empty() {
                h4 { (a.name) " (" (a.plugin) ")" }
                ul { @for c in found { li { b { (c.id) " " (c.verdict.word()) } ": " (c.figure) } } }
            }
        }
    }
}

fn outcome(a: &PluginAudit) -> &'static str {
    match a.outcome {
        Outcome::Crashed => "crashed",
        Outcome::Hung => "hung",
        Outcome::Skipped => "skipped",
        Outcome::Audited => a.verdict().word(),
    }
}
