//! `check`: one row per check.

use super::style::new_table;
use crate::system::check::{CheckReport, Verdict};
use comfy_table::Cell;

/// The check table and its tally.
pub fn summary(r: &CheckReport) -> String {
    let mut t = new_table(&["check", "", "observed", "advice"]);
    for c in &r.checks {
        let v = match c.verdict {
            Verdict::Ok => "ok",
            Verdict::Warn => "WARN",
            Verdict::Fail => "FAIL",
        };
        t.add_row(vec![
            Cell::new(&c.title),
            Cell::new(v),
            Cell::new(&c.observed),
            Cell::new(&c.advice),
        ]);
    }
    format!("{t}\n{} ok, {} warn, {} fail\n", r.ok, r.warn, r.fail)
}
