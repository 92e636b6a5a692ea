//! The house style of terminal text: tables, number cells and the line naming the machine.

use crate::system::Environment;
use comfy_table::{presets::UTF8_BORDERS_ONLY, Cell, CellAlignment, ContentArrangement, Table};

/// A table with the house style: compact borders, wrapped to the terminal when there is one.
pub fn new_table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(header.iter().map(Cell::new));
    if t.width().is_none() {
        // Not a terminal: keep lines readable in logs.
        t.set_width(140);
    }
    t
}

/// A right-aligned cell for numbers.
pub fn num(s: impl ToString) -> Cell {
    Cell::new(s.to_string()).set_alignment(CellAlignment::Right)
}

/// One line naming the machine a check or measurement describes.
pub fn system_line(env: &Environment) -> String {
    let mut parts = vec![format!(
        "{}: Linux {} ({})",
        if env.hostname.is_empty() {
            "?"
        } else {
            &env.hostname
        },
        env.kernel,
        env.kernel_version
    )];
    let mut cpus = format!("{} CPUs", env.cpus.count);
    if !env.cpus.model.is_empty() {
        cpus.push_str(&format!(" ({})", env.cpus.model));
    }
    parts.push(cpus);
    if let Some(v) = &env.virtualization {
        parts.push(format!("virtualised: {v}"));
    }
    if let Some(st) = env.hypervisor_steal {
        parts.push(format!(
            "{:.1} % stolen by the host ({:.0} ms)",
            st.share_pct, st.stolen_ms
        ));
    }
    if let Some(c) = &env.container {
        parts.push(format!("container: {c}"));
    }
    parts.join(", ")
}

/// µs with one decimal, the unit cyclictest users read.
pub fn us(ns: impl Into<f64>) -> String {
    format!("{:.1}", ns.into() / 1e3)
}
