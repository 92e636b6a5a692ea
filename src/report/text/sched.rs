//! `sched`: one row per policy variant.

use super::style::{new_table, num};
use comfy_table::Cell;

/// `xrunlab sched`: one row per policy variant, Cucinotta et al.'s Table 1/3 columns plus the
/// competitor's response times. Times in µs (competitor in ms).
pub fn summary(r: &crate::measure::sched::SchedResults) -> String {
    let us = |ns: f64| format!("{:.0}", ns / 1000.0);
    let ms = |ns: u64| format!("{:.2}", ns as f64 / 1e6);
    let mut t = new_table(&[
        "row",
        "period min/avg/max/std µs",
        "end time min/p99/max µs",
        "CPU avg µs",
        "xruns",
        "Set Q avg/max µs (bumps)",
        "compete resp p50/p99/max ms",
        "compete misses",
    ]);
    for row in &r.rows {
        let e = &row.engine;
        let p = &row.driver_period;
        let end = &e.end_time_ns;
        let q = if row.q_series.is_empty() {
            "-".to_string()
        } else {
            let n = row.q_series.len() as f64;
            let avg = row.q_series.iter().map(|x| x.set_q_ns as f64).sum::<f64>() / n;
            let max = row.q_series.iter().map(|x| x.set_q_ns).max().unwrap_or(0);
            format!(
                "{}/{} ({})",
                us(avg),
                us(max as f64),
                row.bumps_xrun + row.bumps_client
            )
        };
        let (resp, miss) = match &row.compete {
            Some(c) => (
                format!(
                    "{}/{}/{}",
                    ms(c.response_ns.p50),
                    ms(c.response_ns.p99),
                    ms(c.response_ns.max)
                ),
                format!("{}/{}", c.deadline_misses, c.jobs),
            ),
            None => ("-".into(), "-".into()),
        };
        t.add_row(vec![
            Cell::new(&row.label),
            num(format!(
                "{}/{}/{}/{:.1}",
                us(p.min_ns as f64),
                us(p.mean_ns),
                us(p.max_ns as f64),
                p.std_ns / 1000.0
            )),
            num(format!(
                "{}/{}/{}",
                us(end.min as f64),
                us(end.p99 as f64),
                us(end.max as f64)
            )),
            num(us(e.cpu_ns.mean)),
            num(crate::report::xruns_and_skipped(e)),
            num(q),
            num(resp),
            num(miss),
        ]);
    }
    let mut s = format!("period P = {} µs\n{t}\n", r.period_ns / 1000);
    if let Some(f) = &r.forensics {
        s.push_str("forensics per row:\n");
        s.push_str(&super::forensics::parts(crate::report::parts::sched_rows(
            r,
        )));
        s.push_str(&super::forensics::section(f));
    }
    s
}
