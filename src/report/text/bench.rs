//! `plugins bench`: cost per frame and the physical limit per core.

use super::style::{new_table, num};
use comfy_table::Cell;

/// `plugins bench`: one row per plugin and instance count K, the counts of a plugin together
/// so its cost per instance reads as a curve of K (with its ratio to the first K when a
/// plugin was measured at several).
pub fn summary(results: &[crate::dsp::plugin_cost::BenchResult], rate: u32, buffer: u32) -> String {
    use crate::units::format_ns;
    let label = |r: &crate::dsp::plugin_cost::BenchResult| {
        if r.params.is_empty() {
            r.plugin.clone()
        } else {
            format!("{}({})", r.plugin, r.params)
        }
    };
    let curve = results.iter().any(|r| {
        results
            .iter()
            .any(|o| label(o) == label(r) && o.instances != r.instances)
    });
    let mut header = vec!["plugin", "K", "ns/f mean"];
    if curve {
        header.push("× first K");
    }
    header.extend([
        "block mean",
        "p50",
        "p99",
        "p99.9",
        "max",
        "ns/f median",
        "CPU ns/f",
        "inst/core",
    ]);
    let mut t = new_table(&header);
    // Names stay whole; the numbers' headers wrap instead.
    if let Some(c) = t.column_mut(0) {
        c.set_constraint(comfy_table::ColumnConstraint::ContentWidth);
    }
    let dash = || num("—");
    for r in results {
        let mut row = vec![
            Cell::new(label(r)),
            num(r.instances),
            r.mean_ns_per_frame
                .map_or_else(dash, |m| num(format!("{m:.1}"))),
        ];
        if curve {
            let first = results.iter().find(|o| label(o) == label(r));
            row.push(
                match (first.and_then(|f| f.mean_ns_per_frame), r.mean_ns_per_frame) {
                    (Some(f), Some(m)) if f > 0.0 => num(format!("{:.2}×", m / f)),
                    _ => dash(),
                },
            );
        }
        match &r.per_block {
            Some(b) => row.extend([
                num(format_ns(b.mean_ns.round() as u64)),
                num(format_ns(b.p50_ns)),
                num(format_ns(b.p99_ns)),
                num(format_ns(b.p999_ns)),
                num(format_ns(b.max_ns)),
            ]),
            None => row.extend((0..5).map(|_| dash())),
        }
        row.extend([
            num(format!("{:.1}", r.ns_per_frame)),
            num(format!("{:.1}", r.cpu_ns_per_frame_mean)),
            num(format!("{:.1}", r.instances_per_core)),
        ]);
        t.add_row(row);
    }
    let signal = results
        .first()
        .map_or("white noise", |r| r.signal_description.as_str());
    let harness = results
        .iter()
        .filter_map(|r| r.per_block.map(|b| b.harness_ns))
        .max()
        .map_or(String::new(), |h| {
            format!(", the harness alone (input copy, clock read) {h} ns")
        });
    format!(
        "plugins bench at {rate} Hz, {buffer} frames per block, input {signal}\n{t}\n\
         K: distinct instances in series; ns/f: ns per frame per instance.\n\
         ns/f mean: all timed blocks' wall time / frames / K (comparable with lv2bench, which feeds silence).\n\
         block mean … max: wall time of one block through all K instances{harness}.\n\
         ns/f median: the median ~50 µs group, robust against host steal; inst/core (the physical limit, \
         nothing else running) derives from it. CPU: thread CPU time per frame.\n"
    )
}
