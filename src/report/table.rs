//! Terminal tables (comfy-table), shared by every command's human summary.

use crate::system::check::{CheckReport, Verdict};
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
    if let Some(c) = &env.container {
        parts.push(format!("container: {c}"));
    }
    parts.join(", ")
}

pub fn checks(r: &CheckReport) -> String {
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

/// µs with one decimal, the unit cyclictest users read.
fn us(ns: impl Into<f64>) -> String {
    format!("{:.1}", ns.into() / 1e3)
}

/// The compact per-CPU latency table: seed 004's min/avg/max plus p99, p99.99 and missed
/// periods (and late audio periods with `--audio-period`).
pub fn latency(
    cfg: &crate::measure::latency::LatencyConfig,
    r: &crate::measure::latency::LatencyResult,
) -> String {
    use crate::units::format_ns;
    let audio = cfg.audio_period;
    let mut header = vec![
        "CPU",
        "wake-ups",
        "min µs",
        "avg µs",
        "max µs",
        "p99 µs",
        "p99.99 µs",
        "missed",
    ];
    let late_label = audio.map(|a| format!("late > {}", format_ns(a.period_ns())));
    if let Some(l) = &late_label {
        header.push(l);
        header.push("late/h");
    }
    let mut t = new_table(&header);
    let row = |label: String, s: &crate::measure::latency::LatencyStats| {
        let mut cells = vec![
            Cell::new(label),
            num(s.summary.count),
            num(us(s.summary.min as f64)),
            num(us(s.summary.mean)),
            num(us(s.summary.max as f64)),
            num(us(s.summary.p99 as f64)),
            num(us(s.summary.p99_99 as f64)),
            num(s.missed_periods.map_or("-".into(), |m| m.to_string())),
        ];
        if audio.is_some() {
            cells.push(num(s.audio_late.map_or("-".into(), |m| m.to_string())));
            cells.push(num(s
                .audio_late_per_hour
                .map_or("-".into(), |m| format!("{m:.0}"))));
        }
        cells
    };
    for c in &r.per_cpu {
        t.add_row(row(c.cpu.to_string(), &c.stats));
    }
    if r.per_cpu.len() > 1 {
        t.add_row(row("all".into(), &r.overall));
    }
    let mut out = format!("{t}\n");
    let o = &r.overall;
    if let (Some(cpu), Some(cycle), Some(at)) = (o.max_cpu, o.max_cycle, o.max_at_ns) {
        out.push_str(&format!(
            "max {} on CPU {cpu} at wake-up {cycle}, {:.3} s into the run\n",
            format_ns(o.summary.max),
            at as f64 / 1e9
        ));
    }
    if o.overflows > 0 {
        out.push_str(&format!(
            "{} wake-ups at or above the histogram bound ({})\n",
            o.overflows,
            format_ns(cfg.hist_max_ns)
        ));
    }
    if let Some(f) = &r.fail_above {
        out.push_str(&format!(
            "--fail-above: {} = {} {} {}\n",
            crate::measure::latency::percentile_label(&f.percentile),
            format_ns(f.value_ns),
            if f.crossed { ">" } else { "<=" },
            format_ns(f.threshold_ns)
        ));
    }
    if r.interrupted {
        out.push_str("interrupted: partial result\n");
    }
    out
}
