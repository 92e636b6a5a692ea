//! `verdict`: the headline, the table per buffer size, causes, advice and gaps.

use super::style::new_table;
use crate::report::format::per_hour;
use comfy_table::Cell;

/// `verdict`: the headline, the table per buffer size, causes, advice and gaps.
pub fn summary(
    cfg: &crate::results::verdict::VerdictConfig,
    r: &crate::results::verdict::VerdictResults,
) -> String {
    use crate::report::verdict::{row_cells, HEADER, PLUGINS_COLUMN};
    let tone = crate::report::answer::tone(r.recommended_frames, &r.rows, r.judged_on);
    let mut s = format!("{}\n", super::style::paint(&r.headline, tone));
    if let Some(n) = &r.next {
        s.push_str(&format!("next: {n}\n"));
    }
    s.push_str(&format!(
        "{} Hz, {} periods, target {}/h; {}; compute: {}\n",
        cfg.rate,
        cfg.periods,
        per_hour(cfg.target_per_hour),
        cfg.holds.describe(),
        r.compute
    ));
    // The headroom column is long: below the table, for the sizes a grid measured.
    let keep = |i: usize| i != PLUGINS_COLUMN;
    let header: Vec<&str> = HEADER
        .iter()
        .enumerate()
        .filter(|(i, _)| keep(*i))
        .map(|(_, h)| *h)
        .collect();
    let mut t = new_table(&header);
    let mut headroom = Vec::new();
    for row in &r.rows {
        let all = row_cells(row);
        if !row.plugins.is_empty() {
            headroom.push(format!(
                "{} frames: {}",
                row.buffer_frames, all[PLUGINS_COLUMN]
            ));
        }
        let mut cells: Vec<Cell> = all
            .into_iter()
            .enumerate()
            .filter(|(i, _)| keep(*i))
            .map(|(_, c)| Cell::new(c))
            .collect();
        if r.recommended_frames == Some(row.buffer_frames) {
            cells = cells
                .into_iter()
                .map(|c| c.add_attribute(comfy_table::Attribute::Bold))
                .collect();
        }
        t.add_row(cells);
    }
    s.push_str(&format!("{t}\n"));
    if !headroom.is_empty() {
        s.push_str(&format!(
            "Headroom (load grid, most instances per track at 1/2/… tracks): {}\n",
            headroom.join("; ")
        ));
    }
    if !r.causes.is_empty() {
        s.push_str("Causes of the xruns seen:\n");
        for c in &r.causes {
            s.push_str(&format!(
                "  {:>5.1} %  {} ({} xruns in {}): {}\n",
                c.share_pct,
                c.cause,
                c.xruns,
                c.files.join(", "),
                c.meaning
            ));
        }
    }
    if !r.culprits.is_empty() {
        s.push_str("Culprits named by kernel tracing (--forensics):\n");
        for c in &r.culprits {
            s.push_str(&format!(
                "  {}: top in {}, took {} in all, worst {} ({})\n",
                c.culprit,
                c.explained,
                crate::units::format_ns(c.total_ns),
                crate::units::format_ns(c.worst_ns),
                c.files.join(", ")
            ));
        }
    }
    if !r.advice.is_empty() {
        s.push_str("What to fix first:\n");
        for (i, a) in r.advice.iter().enumerate() {
            s.push_str(&format!(
                "  {}. [{}] {}: {}\n     evidence: {}\n",
                i + 1,
                a.verdict,
                a.title,
                a.advice,
                a.evidence.join("; ")
            ));
        }
    }
    for g in &r.gaps {
        s.push_str(&format!("note: {g}\n"));
    }
    s
}
