//! `verdict`: the answer, the table per buffer size, causes, advice and gaps, in 80 columns.

use super::style::{new_table, num, wrap};
use crate::report::format::{per_hour, rate_cell};
use crate::results::verdict::{Predicted, VerdictRow};
use comfy_table::Cell;

/// A rate short enough for an 80-column table: `189 (69–411)`, `< 18.8`; `point` keeps the
/// estimate alone.
fn short_rate(p: &Option<Predicted>, point: bool) -> String {
    match p {
        None => "—".into(),
        Some(p) if p.overload => "overload".into(),
        Some(p) => {
            let r = &p.episodes_per_hour;
            if r.upper_bound {
                format!("< {}", per_hour(r.high))
            } else if point {
                per_hour(r.per_hour)
            } else {
                format!(
                    "{} ({}–{})",
                    per_hour(r.per_hour),
                    per_hour(r.low),
                    per_hour(r.high)
                )
            }
        }
    }
}

/// The measured runs of a row: `< 1300 (2 in 20 s)`.
fn measured(r: &VerdictRow) -> String {
    r.measured
        .iter()
        .map(|m| {
            format!(
                "{} ({} in {})",
                rate_cell(&m.per_hour)
                    .split(" (")
                    .next()
                    .unwrap_or_default(),
                m.xruns,
                crate::report::format::span((m.hours * 3.6e12) as u64)
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The engine's pooled runs at a row's size, short: `120 (15–434)`, `< 221` when it saw
/// none, `—` where nothing ran.
fn run_rate(r: &VerdictRow) -> String {
    match &r.checked {
        None => "—".into(),
        Some(c) if c.per_hour.upper_bound => format!("< {}", per_hour(c.per_hour.high)),
        Some(c) => format!(
            "{} ({}–{})",
            per_hour(c.per_hour.per_hour),
            per_hour(c.per_hour.low),
            per_hour(c.per_hour.high)
        ),
    }
}

/// The outcome with what it rests on, short enough for the table: `fails m` (the run
/// decided), `meets p` (the prediction), `meets p+m` (the prediction, with a run that did
/// not contradict it). The legend under the table spells the letters out.
fn outcome(r: &VerdictRow) -> String {
    use crate::results::verdict::Basis;
    let word = match r.meets_target {
        Some(true) => "meets",
        Some(false) => "fails",
        None => return "undecided".into(),
    };
    match r.basis.unwrap_or(Basis::Predicted) {
        Basis::Measured => format!("{word} m"),
        Basis::Predicted => format!("{word} p"),
        Basis::Both => format!("{word} p+m"),
    }
}

/// The table: glitch episodes per hour predicted under load and idle (95 % interval), the
/// engine's measured rate where it ran that size, the round trip and the outcome with its
/// basis, so a "fails" beside a small prediction shows the run that failed it.
fn table(r: &crate::results::verdict::VerdictResults) -> String {
    let mut t = new_table(&[
        "frames",
        "predicted/h",
        "idle",
        "run/h",
        "RTL ms",
        "outcome",
    ]);
    t.set_width(super::style::WIDTH as u16);
    let mut runs = Vec::new();
    for row in &r.rows {
        let mut cells = vec![
            // The period is in the round trip beside it; the width goes to the rates.
            num(row.buffer_frames.to_string()),
            num(short_rate(&row.stressed, false)),
            num(short_rate(&row.idle, true)),
            num(run_rate(row)),
        ];
        if !row.measured.is_empty() {
            // Runs whose xruns came in bursts: the run/h interval is wider than Garwood's.
            let bursty = match row.checked.as_ref().and_then(|c| c.dispersion) {
                Some(phi) if phi >= 1.05 => {
                    format!(", bursty: {phi:.1}× a Poisson count's spread, interval widened")
                }
                _ => String::new(),
            };
            runs.push(format!(
                "{} frames {}{bursty}",
                row.buffer_frames,
                measured(row)
            ));
        }
        cells.push(num(format!(
            "{:.1}{}",
            row.rtl_measured_ms.unwrap_or(row.rtl_model_ms),
            if row.rtl_measured_ms.is_some() {
                ""
            } else {
                "*"
            }
        )));
        cells.push(Cell::new(outcome(row)));
        if r.recommended_frames == Some(row.buffer_frames) {
            cells = cells
                .into_iter()
                .map(|c| c.add_attribute(comfy_table::Attribute::Bold))
                .collect();
        }
        t.add_row(cells);
    }
    let mut s = format!("{t}\n");
    if !runs.is_empty() {
        s.push_str(&wrap(
            &format!("Measured runs, xruns/h: {}", runs.join("; ")),
            2,
        ));
        s.push('\n');
    }
    s
}

/// `verdict`: the answer, the table per buffer size, causes, advice and gaps.
pub fn summary(
    cfg: &crate::results::verdict::VerdictConfig,
    r: &crate::results::verdict::VerdictResults,
) -> String {
    use crate::report::verdict::{row_cells, PLUGINS_COLUMN};
    let tone = crate::report::answer::tone(r.recommended_frames, &r.rows, r.judged_on);
    let mut s = format!("{}\n", super::style::paint(&wrap(&r.headline, 0), tone));
    if let Some(n) = &r.next {
        s.push_str(&format!("next:\n{}\n", super::style::command(n, 2)));
    }
    s.push('\n');
    s.push_str(&table(r));
    s.push_str(&wrap(
        &format!(
            "Predicted/h: episodes of late cycles per hour predicted from the latency measured \
             under load (95 % interval in brackets) and idle, `<` an upper bound (too few late \
             wake-ups to tell more); run/h: glitches per hour the engine measured at that size \
             under the same load; outcome: m measured (the run decided), p predicted, p+m \
             predicted and not contradicted by the run; * the round trip is modelled. {} Hz, \
             {} periods, target {}/h; {}; compute: {}.",
            cfg.rate,
            cfg.periods,
            per_hour(cfg.target_per_hour),
            cfg.holds.describe(),
            r.compute
        ),
        0,
    ));
    s.push('\n');
    let headroom: Vec<String> = r
        .rows
        .iter()
        .filter(|row| !row.plugins.is_empty())
        .map(|row| {
            format!(
                "{} frames: {}",
                row.buffer_frames,
                row_cells(row)[PLUGINS_COLUMN]
            )
        })
        .collect();
    if !headroom.is_empty() {
        s.push_str(&wrap(
            &format!(
                "Headroom (load grid, most instances per track at 1/2/… tracks): {}",
                headroom.join("; ")
            ),
            2,
        ));
        s.push('\n');
    }
    if !r.causes.is_empty() {
        s.push_str("Causes of the xruns seen:\n");
        for c in &r.causes {
            s.push_str(&wrap(
                &format!(
                    "  {:.0} % {} ({} xruns in {}): {}",
                    c.share_pct,
                    c.cause,
                    c.xruns,
                    c.files.join(", "),
                    c.meaning
                ),
                4,
            ));
            s.push('\n');
        }
    }
    let (ours, machine): (Vec<_>, Vec<_>) = r.culprits.iter().partition(|c| c.ours);
    if !machine.is_empty() {
        s.push_str("Culprits named by kernel tracing (--forensics), top in at least one:\n");
        for c in &machine {
            s.push_str(&wrap(
                &format!(
                    "  {}: top in {}, took {} in all, worst {} ({})",
                    c.culprit,
                    c.explained,
                    crate::units::format_ns(c.total_ns),
                    crate::units::format_ns(c.worst_ns),
                    c.files.join(", ")
                ),
                4,
            ));
            s.push('\n');
        }
        let names: Vec<&str> = machine.iter().map(|c| c.culprit.as_str()).collect();
        if names.contains(&crate::report::verdict::HYPERVISOR) {
            s.push_str(&wrap(
                "  (hypervisor: the host ran something else on this vCPU, so the guest's \
                 trace shows a gap no task of the guest filled)",
                3,
            ));
            s.push('\n');
        } else if names.contains(&crate::report::verdict::UNTRACED) {
            s.push_str(&wrap(
                "  (untraced: time inside the window no traced event accounts for: \
                 firmware (SMI), or events the trace lost)",
                3,
            ));
            s.push('\n');
        }
    }
    if !ours.is_empty() {
        let names: Vec<String> = ours
            .iter()
            .map(|c| format!("{} (top in {})", c.culprit, c.explained))
            .collect();
        s.push_str(&wrap(
            &format!(
                "Ours (xrunlab's own threads and test load, not the machine's): {}",
                names.join(", ")
            ),
            2,
        ));
        s.push('\n');
    }
    if !r.advice.is_empty() {
        s.push_str("What to fix first:\n");
        for (i, a) in r.advice.iter().enumerate() {
            s.push_str(&wrap(
                &format!("  {}. [{}] {}: {}", i + 1, a.verdict, a.title, a.advice),
                5,
            ));
            s.push('\n');
            s.push_str(&wrap(
                &format!("     evidence: {}", a.evidence.join("; ")),
                5,
            ));
            s.push('\n');
        }
    }
    for g in &r.gaps {
        s.push_str(&wrap(&format!("note: {g}"), 2));
        s.push('\n');
    }
    s
}
