//! Writing a latency result in cyclictest's `-h` text format, so OSADL-style plotting
//! scripts and existing parsers read xrunlab's histograms unchanged.
//!
//! The dense layout of rt-tests ≤ 2.6 is written (every bucket, with `# Total:`): it is the
//! one most scripts were written against, and `xrunlab import` reads it back.

use crate::measure::latency::LatencyResult;
use std::fmt::Write;

/// The histogram text for `r`, with `hist_buckets` 1 µs buckets (cyclictest's `-h` value).
pub fn histogram_text(r: &LatencyResult, hist_buckets: u64) -> String {
    let n = r.per_cpu.len();
    // Dense per-CPU bucket arrays from the sparse pairs.
    let mut dense = vec![vec![0u64; hist_buckets as usize]; n];
    for (c, cpu) in r.per_cpu.iter().enumerate() {
        for &(k, count) in &cpu.histogram_us {
            if let Some(slot) = dense[c].get_mut(k as usize) {
                *slot += count;
            }
        }
    }
    let mut out = String::with_capacity(16 * (hist_buckets as usize + 8) * n.max(1));
    out.push_str("# Histogram\n");
    for k in 0..hist_buckets as usize {
        let _ = write!(out, "{k:06} ");
        let cols: Vec<String> = dense.iter().map(|d| format!("{:06}", d[k])).collect();
        out.push_str(&cols.join("\t"));
        out.push('\n');
    }
    let line = |out: &mut String, label: &str, vals: Vec<String>| {
        out.push_str(label);
        for v in vals {
            out.push(' ');
            out.push_str(&v);
        }
        out.push('\n');
    };
    line(
        &mut out,
        "# Total:",
        dense
            .iter()
            .map(|d| format!("{:09}", d.iter().sum::<u64>()))
            .collect(),
    );
    // Cyclictest's footer values are whole microseconds, rounded down.
    let us = |ns: f64| format!("{:05}", (ns / 1000.0).floor() as u64);
    let s = |f: fn(&crate::common::Summary) -> f64| -> Vec<String> {
        r.per_cpu.iter().map(|c| us(f(&c.stats.summary))).collect()
    };
    line(&mut out, "# Min Latencies:", s(|s| s.min as f64));
    line(&mut out, "# Avg Latencies:", s(|s| s.mean));
    line(&mut out, "# Max Latencies:", s(|s| s.max as f64));
    line(
        &mut out,
        "# Histogram Overflows:",
        r.per_cpu
            .iter()
            .map(|c| format!("{:05}", c.stats.overflows))
            .collect(),
    );
    out.push_str("# Histogram Overflow at cycle number:\n");
    for (i, c) in r.per_cpu.iter().enumerate() {
        let _ = write!(out, "# Thread {i}:");
        for cy in &c.overflow_cycles {
            let _ = write!(out, " {cy:05}");
        }
        let listed = c.overflow_cycles.len() as u64;
        if listed < c.stats.overflows {
            let _ = write!(out, " # {:05} others", c.stats.overflows - listed);
        }
        out.push('\n');
    }
    out.push('\n');
    out
}
