//! A side-by-side table of figures (`compare`, `tune --measure`, the tuned stages of a suite)
//! and its two renderings, so that every comparison looks the same in a terminal and a page.

use super::text::style::{new_table, num};
use maud::html;

/// One side-by-side table.
pub struct Table {
    pub title: String,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

/// Tables as terminal text.
pub fn to_text(tables: &[Table]) -> String {
    let mut out = String::new();
    for t in tables {
        let header: Vec<&str> = t.header.iter().map(String::as_str).collect();
        let mut ct = new_table(&header);
        for r in &t.rows {
            let mut cells = vec![comfy_table::Cell::new(&r[0])];
            cells.extend(r[1..].iter().map(num));
            ct.add_row(cells);
        }
        out.push_str(&format!("{}\n{ct}\n", t.title));
    }
    out
}

/// One table as HTML: the first column labels its row, the others are numbers.
pub fn table_html(t: &Table) -> maud::Markup {
    html! {
        table {
            tr { @for h in &t.header { th { (h) } } }
            @for r in &t.rows {
                tr { td { (r[0]) } @for c in &r[1..] { td.n { (c) } } }
            }
        }
    }
}
