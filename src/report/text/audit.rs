//! `plugins audit`: one row per plugin, its verdict and what the checks that did not pass
//! found, in 80 columns; then the count of verdicts.

use super::style::new_table;
use crate::measure::audit::{Outcome, PluginAudit, Verdict};
use comfy_table::Cell;

pub fn summary(results: &[PluginAudit]) -> String {
    let mut t = new_table(&["plugin", "verdict", "findings (checks that did not pass)"]);
    t.set_width(80);
    for r in results {
        let findings = match r.outcome {
            Outcome::Audited => {
                let not_pass: Vec<String> = r
                    .checks
                    .iter()
                    .filter(|c| c.verdict != Verdict::Pass)
                    .map(|c| format!("{} {}: {}", c.id, c.verdict.word(), c.figure))
                    .collect();
                if not_pass.is_empty() {
                    format!("all {} checks pass", r.checks.len())
                } else {
                    not_pass.join("\n")
                }
            }
            _ => r.reason.clone().unwrap_or_default(),
        };
        let who = if r.name.is_empty() || r.plugin.ends_with(&r.name) {
            r.plugin.clone()
        } else {
            format!("{}\n{}", r.name, r.plugin)
        };
        let verdict = match r.outcome {
            Outcome::Crashed => "CRASHED",
            Outcome::Hung => "HUNG",
            Outcome::Skipped => "skipped",
            Outcome::Audited => r.verdict().word(),
        };
        t.add_row(vec![
            Cell::new(who),
            Cell::new(verdict),
            Cell::new(findings),
        ]);
    }
    let count = |v: Verdict| results.iter().filter(|r| r.verdict() == v).count();
    format!(
        "{t}\n{} plugins: {} pass, {} warn, {} fail, {} skipped\n",
        results.len(),
        count(Verdict::Pass),
        count(Verdict::Warn),
        count(Verdict::Fail),
        count(Verdict::Skip)
    )
}
