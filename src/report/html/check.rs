use crate::system::check::{CheckReport, Verdict};
use maud::{html, Markup};

pub fn section(r: &CheckReport) -> Markup {
    html! {
        h3 { "Checks" }
        p { (r.ok) " ok, " (r.warn) " warn, " (r.fail) " fail" }
        table.checks {
            tr { th { "check" } th { "verdict" } th { "observed" } th { "advice" } }
            @for c in &r.checks {
                @let (class, label) = match c.verdict {
                    Verdict::Ok => ("ok", "ok"),
                    Verdict::Warn => ("warn", "WARN"),
                    Verdict::Fail => ("fail", "FAIL"),
                };
                tr { td { (c.title) } td class=(class) { (label) } td { (c.observed) } td { (c.advice) } }
            }
        }
    }
}
