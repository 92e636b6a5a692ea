//! Any kind: the result's fields as a flat table, so a kind this build does not know
//! (or has no special view for) is still readable.

use maud::{html, Markup};

pub fn section(kind: &str, value: &serde_json::Value) -> Markup {
    let results = value.get("results").unwrap_or(value);
    let rows = crate::report::flatten(results, 200);
    html! {
        h3 { "Results" }
        p { "This xrunlab has no dedicated view for kind " code { (kind) } "; its fields follow." }
        (table(&rows))
    }
}

pub fn table(rows: &[(String, String)]) -> Markup {
    html! {
        table.generic {
            tr { th { "field" } th { "value" } }
            @for (k, v) in rows { tr { td { code { (k) } } td { (v) } } }
        }
    }
}
