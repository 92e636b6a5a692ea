//! The `--forensics` sections every measuring kind may carry.

use super::style::{new_table, num};
use comfy_table::Cell;

/// Most parts [`parts`] lists; the result has them all.
const PARTS_SHOWN: usize = 20;

/// One line per traced part of a measurement (a failed load trial, a sched row, a
/// latencytest phase): its windows and the first row of its culprit table.
pub fn parts(parts: Vec<(String, &crate::trace::Forensics)>) -> String {
    use crate::units::format_ns;
    let mut s = String::new();
    for (label, f) in parts.iter().take(PARTS_SHOWN) {
        s.push_str(&match f.culprits.first() {
            Some(c) => format!(
                "  {label}: {} {}(s); top culprit {} (top in {}, took {}, worst {})\n",
                f.windows_total,
                f.windows_of,
                c.culprit.label(),
                c.explained,
                format_ns(c.total_ns),
                format_ns(c.worst_ns)
            ),
            None => format!(
                "  {label}: {} {}(s); nobody took their time\n",
                f.windows_total, f.windows_of
            ),
        });
    }
    if parts.len() > PARTS_SHOWN {
        s.push_str(&format!(
            "  … and {} more in the result\n",
            parts.len() - PARTS_SHOWN
        ));
    }
    s
}

/// The culprit table of a `--forensics` section: who took the time of the xruns (or spikes).
pub fn section(f: &crate::trace::Forensics) -> String {
    use crate::trace::WakeVerdict;
    use crate::units::format_ns;
    let mut s = format!(
        "forensics: {} {}(s) explained from {} trace events on CPU {}{}\n",
        f.windows_total,
        f.windows_of,
        f.events,
        crate::rt::affinity::format_cpu_list(&f.cpus),
        if f.lost_events > 0 {
            format!(" ({} events LOST: figures are lower bounds)", f.lost_events)
        } else {
            String::new()
        }
    );
    if f.windows_total == 0 {
        return s;
    }
    let mut t = new_table(&[
        "culprit",
        "cpu",
        "top in",
        "present in",
        "time taken",
        "worst",
    ]);
    for row in f.culprits.iter().take(10) {
        t.add_row(vec![
            Cell::new(row.culprit.label()),
            num(row.cpu.map(|c| c.to_string()).unwrap_or_default()),
            num(row.explained),
            num(row.present),
            num(format_ns(row.total_ns)),
            num(format_ns(row.worst_ns)),
        ]);
    }
    s.push_str(&format!("{t}\n"));
    if f.culprits.len() > 10 {
        s.push_str(&format!(
            "… and {} more culprits in the result\n",
            f.culprits.len() - 10
        ));
    }
    s.push_str(&offenders(f));
    let count = |v: WakeVerdict| f.windows.iter().filter(|w| w.wakeup.verdict == v).count();
    s.push_str(&format!(
        "wake-ups: {} came late (timer/IRQ), {} runnable but not scheduled, {} not traced (no sleep or lost)\n",
        count(WakeVerdict::WakeupLate),
        count(WakeVerdict::NotScheduled),
        count(WakeVerdict::NoWakeupTraced)
    ));
    if let Some(p) = &f.csv_file {
        s.push_str(&format!("attributed windows: {p}\n"));
    }
    s
}

/// LatencyMon's sections from the trace: the top hard IRQ (timer callbacks included),
/// softirq and task by the time they took (max in one window, share of all time taken),
/// then per CPU the windows and what each kind took there. Page faults are not traced.
fn offenders(f: &crate::trace::Forensics) -> String {
    use crate::trace::CulpritKind as K;
    use crate::units::format_ns;
    let all: u64 = f.culprits.iter().map(|c| c.total_ns).sum();
    if all == 0 {
        return String::new();
    }
    let share = |ns: u64| format!("{:.0} %", ns as f64 * 100.0 / all as f64);
    let kinds = [
        (K::Irq, "hard IRQ"),
        (K::Softirq, "softirq"),
        (K::Task, "task"),
    ];
    let mut t = new_table(&["top offender", "", "max", "share"]);
    for (kind, what) in kinds {
        let top = f
            .culprits
            .iter()
            .filter(|c| c.culprit.kind == kind)
            .max_by_key(|c| c.total_ns);
        t.add_row(match top {
            Some(c) => vec![
                Cell::new(what),
                Cell::new(c.culprit.label()),
                num(format_ns(c.worst_ns)),
                num(share(c.total_ns)),
            ],
            None => vec![Cell::new(what), Cell::new("none"), num("—"), num("—")],
        });
    }
    t.add_row(vec![
        Cell::new("page faults"),
        Cell::new("not traced"),
        num("—"),
        num("—"),
    ]);
    let mut s = format!("{t}\n");
    if f.cpus.len() > 1 {
        let mut c = new_table(&["CPU", "windows", "hard IRQ", "softirq", "tasks"]);
        for &cpu in &f.cpus {
            let took = |kind: K| {
                let ns: u64 = f
                    .culprits
                    .iter()
                    .filter(|r| r.cpu == Some(cpu) && r.culprit.kind == kind)
                    .map(|r| r.total_ns)
                    .sum();
                num(format_ns(ns))
            };
            c.add_row(vec![
                num(cpu),
                num(f.windows.iter().filter(|w| w.cpu == Some(cpu)).count()),
                took(K::Irq),
                took(K::Softirq),
                took(K::Task),
            ]);
        }
        s.push_str(&format!("{c}\n"));
    }
    s
}
