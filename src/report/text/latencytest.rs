//! `latencytest`: Senoner's loop, idle and under each stress class.

use super::style::{new_table, num};
use crate::measure::latencytest::LatencytestResult;
use crate::units::format_ns;
use comfy_table::Cell;

/// One row per phase, as Senoner's result list (latency and overruns per stress class).
pub fn summary(r: &LatencytestResult) -> String {
    let ms = |ns: u64| format!("{:.2}", ns as f64 / 1e6);
    let mut t = new_table(&[
        "phase",
        "cycles",
        "loop max ms",
        "loop p99 ms",
        "loop mean ms",
        "overruns",
        "underruns",
        "loop ±0.1ms",
        "loop ±1ms",
        "burn max dev ms",
        "burn ±0.1ms",
    ]);
    for p in &r.phases {
        t.add_row(vec![
            Cell::new(&p.name),
            num(p.cycles),
            num(ms(p.loop_ns.max)),
            num(ms(p.loop_ns.p99)),
            num(ms(p.loop_ns.mean.round() as u64)),
            num(p.overruns),
            num(p.underruns),
            num(format!("{:.2} %", p.loop_within_100us_pct)),
            num(format!("{:.2} %", p.loop_within_1ms_pct)),
            num(ms(p.burn_max_dev_ns)),
            num(format!("{:.2} %", p.burn_within_100us_pct)),
        ]);
    }
    let mut out = format!(
        "latencytest: fragment {}, buffer {} (overrun: loop > buffer), burn {} per cycle\n{t}\n",
        format_ns(r.fragment_ns),
        format_ns(r.buffer_ns),
        format_ns(r.burn_nominal_ns)
    );
    for s in &r.skipped {
        out.push_str(&format!("skipped {}: {}\n", s.preset, s.reason));
    }
    for p in &r.phases {
        if let Some(st) = &p.stress {
            for k in &st.skipped {
                out.push_str(&format!("{}: note: {}: {}\n", p.name, k.preset, k.reason));
            }
        }
    }
    if let Some(f) = &r.forensics {
        out.push_str("forensics per phase:\n");
        out.push_str(&super::forensics::parts(
            crate::report::parts::latencytest_phases(r),
        ));
        out.push_str(&super::forensics::section(f));
    }
    if r.interrupted {
        out.push_str("interrupted: partial result\n");
    }
    out
}
