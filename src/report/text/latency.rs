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
    out.push_str(&buckets(&[("", r)]));
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
    for c in &r.per_cpu {
        if let Some(b) = &c.busy {
            let over = |x: u64| {
                b.holds_ns
                    .iter()
                    .filter(|h| h.0 > x)
                    .map(|h| h.1)
                    .sum::<u64>()
            };
            out.push_str(&format!(
                "CPU {} busy {:.0} %: {} computes held {} or more in {} of compute ({} over \
                 100 µs, {} over 1 ms), max {}\n",
                c.cpu,
                cfg.busy_pct.unwrap_or(0.0),
                b.holds,
                format_ns(b.gap_min_ns),
                crate::report::format::span(b.busy_ns),
                over(100_000),
                over(1_000_000),
                format_ns(b.max_ns),
            ));
        }
    }
    out.push_str(&slack_line(r.timer_slack_ns));
    if r.interrupted {
        out.push_str("interrupted: partial result\n");
    }
    out
}

/// What timer slack the SCHED_OTHER threads ran with (none for a real-time policy): a
/// normal thread's sleep may end up to its slack late, which is not scheduling latency.
pub(super) fn slack_line(slack_ns: Option<u64>) -> String {
    match slack_ns {
        None => String::new(),
        Some(ns) => format!(
            "SCHED_OTHER threads: timer slack {}{} (the default, 50 µs, would add up to that \
             to every wake-up)\n",
            crate::units::format_ns(ns),
            if ns <= 1 { ", the minimum" } else { "" }
        ),
    }
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
        Some(b) => {
            let both = [("idle", b.as_ref()), ("stress", r)];
            phases(&both) + &buckets(&both)
        }
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

/// LatencyMon's count buckets, in µs: where a wake-up's lateness falls.
const BUCKETS_US: [u64; 5] = [250, 500, 1000, 2000, 4000];

/// One CPU's wake-ups counted in [`BUCKETS_US`] (six counts, the last ≥ 4000 µs), from the
/// 1 µs histogram and the overflows' values; and the overflows no value was kept for
/// (imported results), which no bucket can hold.
fn bucket_counts(c: &crate::measure::latency::CpuLatency) -> ([u64; 6], u64) {
    let mut n = [0u64; 6];
    let at = |v_us: u64| BUCKETS_US.iter().take_while(|&&b| v_us >= b).count();
    for &(v, k) in &c.histogram_us {
        n[at(v)] += k;
    }
    let mut split = 0;
    for &(v_ns, k) in &c.overflow_ns {
        n[at(v_ns / 1000)] += k;
        split += k;
    }
    (n, c.stats.overflows.saturating_sub(split))
}

/// The wake-ups of each phase and CPU counted in LatencyMon's buckets (< 250 µs up to
/// ≥ 4000 µs), all CPUs last; empty without histograms.
pub fn buckets(phases: &[(&str, &crate::measure::latency::LatencyResult)]) -> String {
    if phases
        .iter()
        .all(|(_, r)| r.per_cpu.iter().all(|c| c.histogram_us.is_empty()))
    {
        return String::new();
    }
    let mut t = new_table(&[
        "CPU",
        "< 250",
        "250–500",
        "500–1000",
        "1000–2000",
        "2000–4000",
        "≥ 4000",
    ]);
    let mut unsplit = 0;
    for (name, r) in phases {
        let mut all = [0u64; 6];
        let label = |cpu: &str| match name {
            &"" => cpu.to_string(),
            n => format!("{n} {cpu}"),
        };
        for c in &r.per_cpu {
            let (n, u) = bucket_counts(c);
            unsplit += u;
            all.iter_mut().zip(n).for_each(|(a, b)| *a += b);
            let mut row = vec![Cell::new(label(&c.cpu.to_string()))];
            row.extend(n.iter().map(num));
            t.add_row(row);
        }
        if r.per_cpu.len() > 1 {
            let mut row = vec![Cell::new(label("all"))];
            row.extend(all.iter().map(num));
            t.add_row(row);
        }
    }
    let mut out = format!("wake-ups by lateness, µs (LatencyMon's buckets):\n{t}\n");
    if unsplit > 0 {
        out.push_str(&format!(
            "{unsplit} wake-ups above the histogram's bound are in no bucket: the file kept \
             only their count\n"
        ));
    }
    out
}
