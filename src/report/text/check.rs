//! `check`: one block per check, stacked so that any terminal shows it whole: the verdict,
//! the title and what was observed, then the advice on its own indented lines (a command in
//! it is never split).

use super::style::wrap;
use crate::system::check::{CheckReport, Verdict};

/// The checks, worst last so the advice ends next to the tally, and the tally.
pub fn summary(r: &CheckReport) -> String {
    let mut s = String::new();
    for c in &r.checks {
        let v = match c.verdict {
            Verdict::Ok => "ok  ",
            Verdict::Warn => "WARN",
            Verdict::Fail => "FAIL",
        };
        s.push_str(&wrap(&format!("{v} {}: {}", c.title, c.observed), 5));
        s.push('\n');
        if c.verdict != Verdict::Ok && !c.advice.is_empty() {
            s.push_str(&wrap(&format!("     → {}", c.advice), 7));
            s.push('\n');
        }
    }
    format!("{s}{} ok, {} warn, {} fail\n", r.ok, r.warn, r.fail)
}
