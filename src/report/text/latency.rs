//! `latency` and `import`: the per-CPU latency table, and idle beside stress.

use super::style::{new_table, num, us};
use comfy_table::Cell;

/// The compact per-CPU latency table: Huang et al.'s min/avg/max plus p99, p99.99 and missed
/// periods (and late audio periods with `--audio-period`).
pub fn summary(
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

/// Huang et al.'s Table 2 shape: min/avg/max (and p99) per phase and CPU, phases side by side.
pub fn phases(phases: &[(&str, &crate::measure::latency::LatencyResult)]) -> String {
    let mut t = new_table(&[
        "phase", "CPU", "wake-ups", "min µs", "avg µs", "max µs", "p99 µs", "missed",
    ]);
    for (name, r) in phases {
        let mut rows: Vec<(String, &crate::measure::latency::LatencyStats)> = r
            .per_cpu
            .iter()
            .map(|c| (c.cpu.to_string(), &c.stats))
            .collect();
        if r.per_cpu.len() > 1 {
            rows.push(("all".into(), &r.overall));
        }
        for (cpu, s) in rows {
            t.add_row(vec![
                Cell::new(*name),
                Cell::new(cpu),
                num(s.summary.count),
                num(us(s.summary.min as f64)),
                num(us(s.summary.mean)),
                num(us(s.summary.max as f64)),
                num(us(s.summary.p99 as f64)),
                num(s.missed_periods.map_or("-".into(), |m| m.to_string())),
            ]);
        }
    }
    let mut out = format!("{t}\n");
    if phases.iter().any(|(_, r)| r.interrupted) {
        out.push_str("interrupted: partial result\n");
    }
    out
}

/// What `latency` prints when it has measured: idle beside stress when it measured an idle
/// baseline first, then the load that ran and the forensics.
pub fn measured(
    cfg: &crate::measure::latency::LatencyConfig,
    r: &crate::measure::latency::LatencyResult,
) -> String {
    let mut s = match &r.baseline {
        Some(b) => phases(&[("idle", b), ("stress", r)]),
        None => summary(cfg, r),
    };
    if let Some(st) = &r.stress {
        s.push_str(&super::stress::stress_line(st));
    }
    if let Some(f) = &r.forensics {
        s.push_str(&super::forensics::section(f));
    }
    s
}
