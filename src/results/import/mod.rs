//! `xrunlab import`: cyclictest output into the latency result model, so `report` and
//! `compare` work on data measured before xrunlab existed.
//!
//! Three inputs are read:
//! - the `-h` text histogram of rt-tests ≤ 2.6 (every bucket printed, `# Total:` line);
//! - the same of rt-tests ≥ 2.7, which prints only non-empty buckets and no `# Total:`;
//! - the `--json` file.
//!
//! Cyclictest reports whole microseconds (rounded down). Percentiles are read from its
//! 1 µs buckets (a bucket's value is its lower edge, as cyclictest prints it); a percentile that falls among the histogram overflows is reported as the
//! recorded maximum, an upper bound.

// Every index here comes from the file (thread numbers, column counts): access is checked.
#![deny(clippy::indexing_slicing)]
mod json;
mod text;

use json::parse_json;
use text::parse_text;

use crate::common::Summary;
use crate::error::{Error, Result};
use crate::measure::latency::{
    CpuLatency, LatencyConfig, LatencyResult, LatencySource, LatencyStats,
};
use crate::rt::Policy;
use std::path::Path;

pub const FORMAT_TEXT: &str = "cyclictest-text";
pub const FORMAT_TEXT_SPARSE: &str = "cyclictest-text-sparse";
pub const FORMAT_JSON: &str = "cyclictest-json";

/// The largest latency (and histogram bucket) a file may hold, in ns: a wake-up a day late
/// is a suspended machine or a corrupt file, not a scheduling latency. Bounding every value
/// keeps the sums and the µs → ns scaling below far from overflowing.
pub const MAX_LATENCY_NS: u64 = 86_400 * 1_000_000_000;

/// One cyclictest thread, in the tool's own units (µs unless `scale_ns` says otherwise).
#[derive(Debug, Default, Clone)]
struct Thread {
    cpu: usize,
    buckets: Vec<(u64, u64)>,
    count: u64,
    min: u64,
    avg: f64,
    max: u64,
    overflows: u64,
    overflow_cycles: Vec<u64>,
}

/// What a file says about how it was measured.
#[derive(Debug, Default)]
struct Recorded {
    format: &'static str,
    command: Option<String>,
    /// "line N: " of the command line in the file, for errors about its options.
    command_at: String,
    dma_latency: Option<bool>,
    hist_buckets: Option<u64>,
    scale_ns: u64,
}

/// Read a cyclictest text or JSON file into a latency config and result.
pub fn import_file(path: &Path) -> Result<(LatencyConfig, LatencyResult)> {
    let text = crate::common::input::read_capped(
        path,
        crate::common::input::CYCLICTEST_MAX_BYTES,
        "cyclictest output",
    )?;
    import_str(&text, &path.display().to_string())
}

/// As `import_file`, from text; `name` is used in errors and recorded as the source.
pub fn import_str(text: &str, name: &str) -> Result<(LatencyConfig, LatencyResult)> {
    let (threads, rec) = if text.trim_start().starts_with('{') {
        parse_json(text).map_err(|m| bad_or_stopped(name, m))?
    } else {
        parse_text(text).map_err(|m| bad_or_stopped(name, m))?
    };
    let (config, results) = build(threads, rec, name).map_err(|m| bad_or_stopped(name, m))?;
    // The check every reader of a result runs: an import is held to what it will meet.
    let body = super::Body::Latency {
        config,
        results: Box::new(results),
    };
    super::validate::validate_body(&body).map_err(|m| Error::input(name, m))?;
    match body {
        super::Body::Latency { config, results } => Ok((config, *results)),
        _ => unreachable!("built as a latency body above"),
    }
}

/// Lines or buckets read between two looks at the interrupt flag.
const POLL_EVERY: usize = 4096;

/// Stops the parse (every `POLL_EVERY`th call with `i`) once a signal asked to stop; the
/// message is replaced by [`bad_or_stopped`].
fn poll_interrupt(i: usize) -> Result<(), String> {
    if i.is_multiple_of(POLL_EVERY) && crate::rt::interrupt::requested() {
        return Err("interrupted".into());
    }
    Ok(())
}

/// The error of a parse that stopped with `msg`: the interruption, if a signal asked for
/// one (exit 3, nothing imported), else what is wrong with the file (exit 2).
fn bad_or_stopped(name: &str, msg: String) -> Error {
    match crate::rt::interrupt::check("nothing imported") {
        Err(stopped) => stopped,
        Ok(()) => Error::input(name, msg),
    }
}

/// `v` (in units of `scale_ns`) as ns, if it is a latency a file may hold.
fn latency_ns(v: u64, scale_ns: u64) -> Option<u64> {
    v.checked_mul(scale_ns).filter(|&ns| ns <= MAX_LATENCY_NS)
}

/// The error for a latency beyond [`MAX_LATENCY_NS`]: `what` says where it is.
fn beyond(what: &str, v: impl std::fmt::Display, unit: &str) -> String {
    format!(
        "{what} {v} {unit} is beyond any latency (at most {} s: a day)",
        MAX_LATENCY_NS / 1_000_000_000
    )
}

/// The value of `-X V`, `-XV`, `--long=V` or `--long V` in a recorded command line.
fn option_value(cmd: &str, short: Option<char>, long: &str) -> Option<String> {
    let w: Vec<&str> = cmd.split_whitespace().collect();
    let s = short.map(|c| format!("-{c}"));
    let l = format!("--{long}");
    for (i, a) in w.iter().enumerate() {
        if Some(*a) == s.as_deref() || *a == l {
            return w.get(i + 1).map(|v| v.to_string());
        }
        if let Some(v) = a.strip_prefix(&format!("{l}=")) {
            return Some(v.to_string());
        }
        if let Some(v) = s.as_deref().and_then(|s| a.strip_prefix(s)) {
            if !v.is_empty() && !a.starts_with("--") {
                return Some(v.to_string());
            }
        }
    }
    None
}

fn has_flag(cmd: &str, short: char, long: &str) -> bool {
    cmd.split_whitespace().any(|a| {
        a == format!("--{long}")
            || (a.starts_with('-')
                && !a.starts_with("--")
                && a[1..].contains(short)
                && a[1..].chars().all(|c| c.is_ascii_alphabetic()))
    })
}

/// How cyclictest ran, from its recorded command line (its defaults where an option is absent).
type CommandConfig = (Option<Policy>, Option<u64>, Option<u64>, Option<u64>, bool);

/// How cyclictest ran, from its recorded command line (its defaults where an option is
/// absent). An interval or duration no run can have is an error naming the option.
fn config_from_command(cmd: &str) -> Result<CommandConfig, String> {
    let prio: u32 = option_value(cmd, Some('p'), "priority")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let named = option_value(cmd, None, "policy").unwrap_or_default();
    let policy = match named.as_str() {
        "rr" if prio > 0 => Policy::Rr { priority: prio },
        "other" | "normal" | "batch" | "idle" => Policy::Other { nice: 0 },
        _ if prio > 0 => Policy::fifo(prio.min(99)),
        _ => Policy::Other { nice: 0 },
    };
    let too_long = |opt: &str, v: &str| {
        format!("cmdline: {opt} {v} is longer than any run (at most 292 years)")
    };
    let interval_us: u64 = option_value(cmd, Some('i'), "interval")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000);
    let interval_ns = interval_us
        .checked_mul(1_000)
        .filter(|&ns| ns <= crate::units::MAX_DURATION_NS)
        .ok_or_else(|| too_long("-i", &interval_us.to_string()))?;
    let loops = option_value(cmd, Some('l'), "loops")
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|&l| l > 0);
    let duration = match option_value(cmd, Some('D'), "duration") {
        None => None,
        Some(v) => {
            let t = v.trim();
            let (num, mult) = match t.chars().last() {
                Some('s') => (&t[..t.len() - 1], 1),
                Some('m') => (&t[..t.len() - 1], 60),
                Some('h') => (&t[..t.len() - 1], 3600),
                Some('d') => (&t[..t.len() - 1], 86_400),
                _ => (t, 1),
            };
            match num.parse::<u64>() {
                // A value cyclictest would not take says nothing the model holds.
                Err(_) => None,
                Ok(n) => Some(
                    n.checked_mul(mult)
                        .and_then(|s| s.checked_mul(1_000_000_000))
                        .filter(|&ns| ns <= crate::units::MAX_DURATION_NS)
                        .ok_or_else(|| too_long("-D", t))?,
                ),
            }
        }
    };
    let mlock = has_flag(cmd, 'm', "mlockall");
    Ok((Some(policy), Some(interval_ns), duration, loops, mlock))
}

/// Percentiles straight from 1-unit buckets (exact at the file's resolution, unlike an HDR
/// histogram's highest-equivalent values); ranks among the overflows get the maximum.
fn bucket_summary(
    buckets: &[(u64, u64)],
    count: u64,
    min_ns: u64,
    max_ns: u64,
    sum_ns: u128,
    scale: u64,
) -> Summary {
    if count == 0 {
        return Summary::default();
    }
    let q = |p: f64| {
        // The epsilon keeps 99.9 % of 1000 at rank 999, not 1000 by float rounding.
        let rank = (p * count as f64 / 100.0 - 1e-9).ceil().max(1.0) as u64;
        let mut seen = 0;
        for &(k, n) in buckets {
            seen += n;
            if seen >= rank {
                return (k * scale).clamp(min_ns, max_ns);
            }
        }
        max_ns
    };
    Summary {
        count,
        min: min_ns,
        mean: sum_ns as f64 / count as f64,
        max: max_ns,
        p50: q(50.0),
        p90: q(90.0),
        p99: q(99.0),
        p99_9: q(99.9),
        p99_99: q(99.99),
        p99_9999: q(99.9999),
    }
}

/// The latency result of the threads read. Every value is bounded by the parsers
/// ([`MAX_LATENCY_NS`]); the sums over threads are still checked, since a file may list any
/// number of them.
fn build(
    threads: Vec<Thread>,
    rec: Recorded,
    name: &str,
) -> Result<(LatencyConfig, LatencyResult), String> {
    let scale = rec.scale_ns;
    // Each thread's count fits; their sum (and so the overflows') must too.
    let count = threads
        .iter()
        .try_fold(0u64, |a, t| a.checked_add(t.count))
        .ok_or("the threads' cycles add up beyond 2^64 samples")?;
    let mut merged = std::collections::BTreeMap::new();
    let mut per_cpu = Vec::with_capacity(threads.len());
    let (mut sum_all, mut overflows) = (0u128, 0u64);
    let mut max_of: Option<(u64, usize)> = None;
    let mut min_all = u64::MAX;
    let mut max_bucket = 0;
    for t in &threads {
        poll_interrupt(0)?;
        for &(k, n) in &t.buckets {
            *merged.entry(k).or_insert(0u64) += n;
            max_bucket = max_bucket.max(k + 1);
        }
        let sum = (t.avg * scale as f64 * t.count as f64).round() as u128;
        let summary = bucket_summary(
            &t.buckets,
            t.count,
            t.min * scale,
            t.max * scale,
            sum,
            scale,
        );
        if t.count > 0 {
            min_all = min_all.min(t.min * scale);
            if max_of.is_none_or(|(m, _)| t.max * scale > m) {
                max_of = Some((t.max * scale, t.cpu));
            }
        }
        let too_many = || "the threads' samples add up beyond 2^64".to_string();
        sum_all = sum_all.checked_add(sum).ok_or_else(too_many)?;
        overflows = overflows.checked_add(t.overflows).ok_or_else(too_many)?;
        per_cpu.push(CpuLatency {
            cpu: t.cpu,
            stats: LatencyStats {
                summary,
                max_cycle: None,
                max_at_ns: None,
                max_cpu: None,
                overflows: t.overflows,
                missed_periods: None,
                audio_late: None,
                audio_late_per_hour: None,
            },
            histogram_us: if scale == 1_000 {
                t.buckets.clone()
            } else {
                Vec::new()
            },
            overflow_cycles: t.overflow_cycles.clone(),
            overflow_ns: Vec::new(),
            series: Vec::new(),
            series_truncated: false,
            busy: None,
        });
    }
    let merged: Vec<(u64, u64)> = merged.into_iter().collect();
    let overall = LatencyStats {
        summary: bucket_summary(
            &merged,
            count,
            if count > 0 { min_all } else { 0 },
            max_of.map_or(0, |m| m.0),
            sum_all,
            scale,
        ),
        max_cycle: None,
        max_at_ns: None,
        max_cpu: max_of.map(|m| m.1),
        overflows,
        missed_periods: None,
        audio_late: None,
        audio_late_per_hour: None,
    };
    let (policy, interval_ns, duration_ns, loops, mlock) = match rec.command.as_deref() {
        Some(c) => {
            let (p, i, d, l, m) =
                config_from_command(c).map_err(|e| format!("{}{e}", rec.command_at))?;
            (p, i, d, l, Some(m))
        }
        None => (None, None, None, None, None),
    };
    let hist_buckets = rec.hist_buckets.unwrap_or(max_bucket).max(1);
    let hist_max_ns = latency_ns(hist_buckets, scale).ok_or_else(|| {
        format!(
            "{}cmdline: {}",
            rec.command_at,
            beyond("-h", hist_buckets, "µs")
        )
    })?;
    let cfg = LatencyConfig {
        source: LatencySource::Imported {
            file: name.to_string(),
            format: rec.format.to_string(),
            command: rec.command,
            resolution_ns: scale,
        },
        cpus: threads.iter().map(|t| t.cpu).collect(),
        policy,
        interval_ns,
        duration_ns,
        loops,
        dma_latency: rec.dma_latency,
        mlock,
        // The sparse format does not say where its histogram ended; its highest bucket is a
        // lower bound.
        hist_max_ns,
        audio_period: None,
        fail_above: None,
        stress: Vec::new(),
        baseline_idle: false,
        busy_pct: None,
    };
    let result = LatencyResult {
        elapsed_ns: 0,
        per_cpu,
        overall,
        fail_above: None,
        interrupted: false,
        stress: None,
        baseline: None,
        spikes: Vec::new(),
        forensics: None,
        timer_slack_ns: None,
    };
    Ok((cfg, result))
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    const DENSE: &str = "# /dev/cpu_dma_latency set to 0us\n# Histogram\n000000 000000\t000000\n000001 000002\t000000\n000002 000001\t000003\n# Total: 000000003 000000003\n# Min Latencies: 00001 00002\n# Avg Latencies: 00001 00002\n# Max Latencies: 00001 00009\n# Histogram Overflows: 00000 00001\n# Histogram Overflow at cycle number:\n# Thread 0:\n# Thread 1: 00003\n\n";

    #[test]
    fn dense_text_imports() {
        let (cfg, r) = import_str(DENSE, "t.txt").unwrap();
        assert_eq!(r.per_cpu.len(), 2);
        assert_eq!(r.per_cpu[1].stats.summary.count, 4);
        assert_eq!(r.per_cpu[1].stats.summary.max, 9_000);
        assert_eq!(r.per_cpu[1].stats.overflows, 1);
        assert_eq!(r.per_cpu[1].overflow_cycles, vec![3]);
        assert_eq!(r.per_cpu[0].histogram_us, vec![(1, 2), (2, 1)]);
        assert_eq!(r.overall.summary.count, 7);
        assert_eq!(r.overall.max_cpu, Some(1));
        assert_eq!(cfg.hist_max_ns, 3_000);
        assert_eq!(cfg.dma_latency, Some(true));
        assert!(
            matches!(cfg.source, LatencySource::Imported { ref format, .. } if format == FORMAT_TEXT)
        );
    }

    #[test]
    fn malformed_text_names_the_line() {
        let bad = DENSE.replace("000002 000001\t000003", "000002 000001");
        let e = import_str(&bad, "t.txt").unwrap_err().to_string();
        assert!(
            e.contains("line 5") && e.contains("expected 2 counts"),
            "{e}"
        );
        let bad = DENSE.replace("# Total: 000000003", "# Total: 000000004");
        let e = import_str(&bad, "t.txt").unwrap_err().to_string();
        assert!(e.contains("line 6") && e.contains("sums to 3"), "{e}");
        let bad = DENSE.replace("# Max Latencies: 00001 00009\n", "");
        let e = import_str(&bad, "t.txt").unwrap_err().to_string();
        assert!(e.contains("'# Max Latencies:'"), "{e}");
        let e = import_str("hello\n", "t.txt").unwrap_err();
        assert_eq!(e.exit_code(), crate::error::EXIT_USAGE);
        assert!(e.to_string().contains("line 1"), "{e}");
        let e = import_str("{\"thread\": {\"0\": {\"cycles\": 1}}}", "t.json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("histogram") || e.contains("number"), "{e}");
        let e = import_str("{\"thread\": ", "t.json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 1"), "{e}");
    }

    #[test]
    fn command_lines_are_understood() {
        let c = "cyclictest -q -m -S -p 90 -i200 -h 400 -l 2000 --json=x.json";
        let (p, i, d, l, m) = config_from_command(c).unwrap();
        assert_eq!(p, Some(Policy::fifo(90)));
        assert_eq!(i, Some(200_000));
        assert_eq!((d, l, m), (None, Some(2000), true));
        assert_eq!(
            option_value(c, Some('h'), "histogram").as_deref(),
            Some("400")
        );
        let (p, i, d, _, m) = config_from_command("cyclictest -D 1m --policy=rr -p5").unwrap();
        assert_eq!(p, Some(Policy::Rr { priority: 5 }));
        assert_eq!((i, d, m), (Some(1_000_000), Some(60_000_000_000), false));
    }
}
