//! `stress`, and the lines other kinds print about the load beside them.

use super::style::{new_table, num};

/// One line saying what load ran.
pub fn stress_line(st: &crate::stress::StressRecord) -> String {
    let mut s = format!(
        "under stress: {} (backend {}, {} process(es){})\n",
        st.presets.join(","),
        st.backend,
        st.processes.len(),
        st.stress_ng
            .as_ref()
            .map(|n| format!(", stress-ng {}", n.version))
            .unwrap_or_default()
    );
    for k in &st.skipped {
        s.push_str(&format!("note: {}: {}\n", k.preset, k.reason));
    }
    for w in &st.warnings {
        s.push_str(&format!("warning: {w}\n"));
    }
    s
}

/// One line of the competing periodic task's statistics.
pub fn compete_line(c: &crate::stress::PeriodicResult) -> String {
    use crate::units::format_ns;
    let st = &c.stats;
    format!(
        "competing task {}: {} jobs, {} deadline misses; wake-up p50 {} max {}; response p50 {} p99 {} max {}\n",
        c.spec,
        st.jobs,
        st.deadline_misses,
        format_ns(st.wake_ns.p50),
        format_ns(st.wake_ns.max),
        format_ns(st.response_ns.p50),
        format_ns(st.response_ns.p99),
        format_ns(st.response_ns.max),
    )
}

/// The human summary of `xrunlab stress`.
pub fn summary(r: &crate::stress::run::StressResults) -> String {
    let s = &r.stress;
    let mut out = String::new();
    let mut t = new_table(&["backend", "presets", "command", "exit"]);
    for p in &s.processes {
        t.add_row(vec![
            p.backend.clone(),
            p.presets.join(","),
            p.argv.join(" "),
            format!("{}{}", p.exit, if p.ended_early { " (early)" } else { "" }),
        ]);
    }
    if let Some(ng) = &s.stress_ng {
        out.push_str(&format!("stress-ng {} ({})\n", ng.version, ng.path));
    }
    out.push_str(&format!("{t}\n"));
    if !s.metrics.is_empty() {
        let mut m = new_table(&["stressor", "source", "bogo ops", "seconds", "ops/s"]);
        for x in &s.metrics {
            m.add_row(vec![
                x.stressor.clone().into(),
                x.source.clone().into(),
                num(format!("{:.0}", x.bogo_ops)),
                num(format!("{:.2}", x.real_time_s)),
                num(format!("{:.1}", x.bogo_ops_per_s)),
            ]);
        }
        out.push_str(&format!("{m}\n"));
    }
    for k in &s.skipped {
        out.push_str(&format!("note: {}: {}\n", k.preset, k.reason));
    }
    for w in &s.warnings {
        out.push_str(&format!("warning: {w}\n"));
    }
    if let Some(c) = &r.compete {
        out.push_str(&compete_line(c));
    }
    out
}
