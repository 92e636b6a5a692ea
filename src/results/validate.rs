//! The one check of a result after it is typed (docs/ARCHITECTURE.md §6): every reader
//! (`read_result`, so `report`, `compare` and `load --resume`) and `import` run it, so a
//! well-formed file whose values cannot describe a measurement is refused with an input error
//! (exit 2) naming the field, instead of panicking or printing wrapped numbers later.
//!
//! It checks what the presentation and the resumption rely on and what no run of xrunlab can
//! write: lists a command never leaves empty, sample rates and buffer sizes within what every
//! command accepts, percentiles in order, and counts that agree with each other. It does not
//! repeat a command's own checks of its settings (those may depend on the machine: an LV2
//! plugin installed, a JACK server), since a result is often read elsewhere.

use super::Body;
use crate::common::device::RATES;
use crate::measure::latency::{LatencyConfig, LatencyResult, LatencyStats};
use crate::measure::run::RunResults;
use crate::units::MAX_BUFFER_FRAMES;
use serde_json::Value;

/// What is wrong with a result, as "FIELD: why" (the caller adds the file).
pub type Problem = String;

/// Check a result's body; `Err` names the first field found wrong.
pub fn validate_body(body: &Body) -> Result<(), Problem> {
    match body {
        Body::Check { .. } | Body::Stress { .. } => {}
        Body::Watch { results, .. } => {
            rate("results.server.rate", results.server.rate)?;
            frames("results.server.frames", results.server.frames)?;
            for (i, x) in results.xruns.iter().enumerate() {
                if x.at_ns > results.watched_ns {
                    return Err(format!("results.xruns[{i}].at_ns is after the watch ended"));
                }
            }
            let bins = crate::measure::watch::cycles::BINS;
            if let Some(h) = &results.headroom {
                if h.bins.len() != bins {
                    return Err(format!(
                        "results.headroom.bins has {} bins, not {bins}",
                        h.bins.len()
                    ));
                }
            }
            for (i, b) in results.busy_histograms.iter().enumerate() {
                if b.bins.len() != bins {
                    return Err(format!(
                        "results.busy_histograms[{i}].bins has {} bins, not {bins}",
                        b.bins.len()
                    ));
                }
            }
            for (i, e) in results
                .other_sizes
                .iter()
                .flat_map(|o| &o.sizes)
                .enumerate()
            {
                if !(e.xruns >= 0.0 && e.low >= 0.0 && e.low <= e.xruns && e.xruns <= e.high) {
                    return Err(format!(
                        "results.other_sizes.sizes[{i}]: xruns, low and high must be counts \
                         with low <= xruns <= high"
                    ));
                }
            }
        }
        Body::Predict { config, results } => {
            rate("config.rate", config.rate)?;
            non_empty("config.buffers", &config.buffers)?;
            for (i, &b) in config.buffers.iter().enumerate() {
                frames(&format!("config.buffers[{i}]"), b)?;
            }
            non_empty("config.periods", &config.periods)?;
            for (i, &n) in config.periods.iter().enumerate() {
                periods(&format!("config.periods[{i}]"), n)?;
            }
            non_empty("results.tables", &results.tables)?;
        }
        Body::Verdict { config, results } => {
            rate("config.rate", config.rate)?;
            periods("config.periods", config.periods)?;
            non_empty("config.buffers", &config.buffers)?;
            for (i, &b) in config.buffers.iter().enumerate() {
                frames(&format!("config.buffers[{i}]"), b)?;
            }
            if results.rows.len() != config.buffers.len() {
                return Err("results.rows: one row per buffer size of config.buffers".into());
            }
        }
        Body::Latency { config, results } => latency(config, results)?,
        Body::Run { config, results } => {
            rate("config.rate", config.rate)?;
            frames("config.buffer_frames", config.buffer_frames)?;
            periods("config.periods", config.periods)?;
            engine("results", results)?;
        }
        Body::Bench { config, results } => {
            rate("config.rate", config.rate)?;
            frames("config.buffer_frames", config.buffer_frames)?;
            non_empty("config.plugins", &config.plugins)?;
            for (i, r) in results.iter().enumerate() {
                rate(&format!("results[{i}].rate"), r.rate)?;
                frames(&format!("results[{i}].buffer_frames"), r.buffer_frames)?;
            }
        }
        Body::Audit { config, .. } => {
            rate("config.cost_rate", config.cost_rate)?;
            frames("config.cost_block", config.cost_block)?;
            non_empty("config.blocks", &config.blocks)?;
            non_empty("config.rates", &config.rates)?;
        }
        Body::Latencytest { config, .. } => {
            rate("config.rate", config.rate)?;
            frames("config.fragment_frames", config.fragment_frames)?;
            periods("config.fragments", config.fragments)?;
            percent("config.burn_pct", config.burn_pct)?;
        }
        Body::Load { config, results } => {
            rate("config.rate", config.rate)?;
            periods("config.periods", config.periods)?;
            non_empty("config.buffers", &config.buffers)?;
            for (i, &b) in config.buffers.iter().enumerate() {
                frames(&format!("config.buffers[{i}]"), b)?;
            }
            non_empty("config.tracks", &config.tracks)?;
            non_empty("config.plugins", &config.plugins)?;
            if results.cells.len() as u64 > results.cells_total as u64 {
                return Err(format!(
                    "results.cells holds {} cells but results.cells_total says the grid has {}",
                    results.cells.len(),
                    results.cells_total
                ));
            }
        }
        Body::Sched { config, results } => {
            rate("config.rate", config.rate)?;
            frames("config.buffer_frames", config.buffer_frames)?;
            non_empty("config.policies", &config.policies)?;
            for (i, row) in results.rows.iter().enumerate() {
                engine(&format!("results.rows[{i}].engine"), &row.engine)?;
            }
        }
        Body::Rtl { config, results } => {
            rate("config.rate", config.rate)?;
            periods("config.periods", config.periods)?;
            non_empty("config.buffers", &config.buffers)?;
            for (i, &b) in config.buffers.iter().enumerate() {
                frames(&format!("config.buffers[{i}]"), b)?;
            }
            // The model's first row is the measured buffer's (a measured run models one).
            non_empty("results.model", &results.model)?;
            at_most(
                "results.xruns",
                results.xruns,
                "results.cycles",
                results.cycles,
            )?;
        }
        Body::Event { config, .. } => {
            rate("config.rate", config.rate)?;
            if let Some(b) = config.buffer_frames {
                frames("config.buffer_frames", b)?;
            }
            non_empty("config.drivers", &config.drivers)?;
            non_empty("config.scenarios", &config.scenarios)?;
        }
    }
    let value = serde_json::to_value(body).map_err(|e| format!("cannot be re-encoded: {e}"))?;
    summaries("", &value)
}

fn non_empty<T>(field: &str, v: &[T]) -> Result<(), Problem> {
    if v.is_empty() {
        return Err(format!("{field} is empty"));
    }
    Ok(())
}

fn rate(field: &str, r: u32) -> Result<(), Problem> {
    if !RATES.contains(&r) {
        return Err(format!(
            "{field} {r} Hz is outside {}..{} Hz",
            RATES.start(),
            RATES.end()
        ));
    }
    Ok(())
}

fn frames(field: &str, f: u32) -> Result<(), Problem> {
    if !(1..=MAX_BUFFER_FRAMES).contains(&f) {
        return Err(format!(
            "{field} {f} frames is outside 1..{MAX_BUFFER_FRAMES}"
        ));
    }
    Ok(())
}

fn periods(field: &str, n: u32) -> Result<(), Problem> {
    if n == 0 {
        return Err(format!("{field} is 0: a device has at least one period"));
    }
    Ok(())
}

fn percent(field: &str, p: f64) -> Result<(), Problem> {
    if !(0.0..=100.0).contains(&p) {
        return Err(format!("{field} {p} is outside 0..100 %"));
    }
    Ok(())
}

fn at_most(field: &str, v: u64, bound_field: &str, bound: u64) -> Result<(), Problem> {
    if v > bound {
        return Err(format!("{field} {v} is more than {bound_field} {bound}"));
    }
    Ok(())
}

/// The engine's counts (run, and each sched row): cycles and skipped periods are periods that
/// elapsed, an xrun is a cycle, and each cause counts some of the xruns.
fn engine(at: &str, r: &RunResults) -> Result<(), Problem> {
    let f = |name: &str| format!("{at}.{name}");
    at_most(
        &f("cycles"),
        r.cycles,
        &f("periods_elapsed"),
        r.periods_elapsed,
    )?;
    at_most(
        &f("skipped_periods"),
        r.skipped_periods,
        &f("periods_elapsed"),
        r.periods_elapsed,
    )?;
    at_most(&f("xruns.total"), r.xruns.total, &f("cycles"), r.cycles)?;
    let x = &r.xruns;
    for (name, v) in [
        ("late_wakeup", x.late_wakeup),
        ("overload", x.overload),
        ("interference", x.interference),
        ("inherited", x.inherited),
    ] {
        at_most(&f(&format!("xruns.{name}")), v, &f("xruns.total"), x.total)?;
    }
    Ok(())
}

fn latency(config: &LatencyConfig, r: &LatencyResult) -> Result<(), Problem> {
    if let Some(p) = &config.audio_period {
        if !p.is_valid() {
            return Err(format!(
                "config.audio_period {}@{}: frames must be > 0 and the rate within {}..{} Hz",
                p.frames,
                p.rate,
                RATES.start(),
                RATES.end()
            ));
        }
    }
    latency_counts("results", r)
}

/// A latency result's counts agree: each CPU's histogram and overflows make its count, and
/// the overall statistics are the CPUs' together.
fn latency_counts(at: &str, r: &LatencyResult) -> Result<(), Problem> {
    let (mut count, mut overflows) = (0u64, 0u64);
    for (i, c) in r.per_cpu.iter().enumerate() {
        let here = format!("{at}.per_cpu[{i}]");
        let s = &c.stats;
        overflows_within(&here, s)?;
        if !c.histogram_us.is_empty() {
            let binned = c
                .histogram_us
                .iter()
                .try_fold(0u64, |a, &(_, n)| a.checked_add(n))
                .and_then(|b| b.checked_add(s.overflows));
            if binned != Some(s.summary.count) {
                return Err(format!(
                    "{here}: histogram_us and overflows do not add up to count {}",
                    s.summary.count
                ));
            }
        }
        count = count
            .checked_add(s.summary.count)
            .ok_or_else(|| format!("{at}.per_cpu: the counts add up beyond 2^64"))?;
        overflows = overflows.saturating_add(s.overflows);
    }
    let o = &r.overall;
    overflows_within(&format!("{at}.overall"), o)?;
    if !r.per_cpu.is_empty() && (o.summary.count != count || o.overflows != overflows) {
        return Err(format!(
            "{at}.overall: count {} and overflows {} are not the sums over per_cpu ({count} and {overflows})",
            o.summary.count, o.overflows
        ));
    }
    if let Some(b) = &r.baseline {
        latency_counts(&format!("{at}.baseline"), b)?;
    }
    Ok(())
}

fn overflows_within(at: &str, s: &LatencyStats) -> Result<(), Problem> {
    at_most(
        &format!("{at}.overflows"),
        s.overflows,
        &format!("{at}.count"),
        s.summary.count,
    )
}

/// The fields of a `common::Summary`, lowest first: wherever one is (flattened into other
/// objects too), a non-empty summary's values are in this order.
const ORDERED: [&str; 8] = [
    "min", "p50", "p90", "p99", "p99_9", "p99_99", "p99_9999", "max",
];

fn summaries(at: &str, v: &Value) -> Result<(), Problem> {
    match v {
        Value::Object(m) => {
            let values: Option<Vec<u64>> = ORDERED
                .iter()
                .map(|k| m.get(*k).and_then(Value::as_u64))
                .collect();
            let count = m.get("count").and_then(Value::as_u64);
            if let (Some(values), Some(count)) = (values, count) {
                if count > 0 {
                    if let Some(i) = (1..ORDERED.len()).find(|&i| values[i] < values[i - 1]) {
                        return Err(format!(
                            "{at}: {} {} is below {} {} (a summary's values rise from min to max)",
                            ORDERED[i],
                            values[i],
                            ORDERED[i - 1],
                            values[i - 1]
                        ));
                    }
                }
            }
            for (k, x) in m.iter().filter(|(_, x)| nested(x)) {
                let here = if at.is_empty() {
                    k.clone()
                } else {
                    format!("{at}.{k}")
                };
                summaries(&here, x)?;
            }
            Ok(())
        }
        Value::Array(a) => a
            .iter()
            .enumerate()
            .filter(|(_, x)| nested(x))
            .try_for_each(|(i, x)| summaries(&format!("{at}[{i}]"), x)),
        _ => Ok(()),
    }
}

/// Only objects and arrays can hold a summary (long series of numbers are passed over).
fn nested(v: &Value) -> bool {
    v.is_object() || v.is_array()
}
