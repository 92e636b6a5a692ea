//! cyclictest's `--json` output.

use super::{
    beyond, latency_ns, option_value, poll_interrupt, Recorded, Thread, FORMAT_JSON, MAX_LATENCY_NS,
};
use crate::rt::affinity::MAX_CPUS;
use serde_json::Value;

/// The lines of a JSON file, to name the line of a value in errors about it.
struct JsonLines<'a>(Vec<&'a str>);

impl JsonLines<'_> {
    /// `line N: ` of the value at `path`, or nothing when it is not found: each key of `path`
    /// is looked for after the line of the one before (thread 1's "min" is after "1", not
    /// thread 0's).
    fn line_of(&self, path: &[&str]) -> String {
        let mut from = 0;
        for key in path {
            let quoted = format!("\"{key}\"");
            let is_key = |l: &&str| {
                l.split(&quoted)
                    .nth(1)
                    .is_some_and(|rest| rest.trim_start().starts_with(':'))
            };
            match self.0.iter().skip(from).position(is_key) {
                Some(i) => from += i,
                None => return String::new(),
            }
        }
        format!("line {}: ", from + 1)
    }
}

/// Thread `k`'s histogram: its non-empty buckets and the samples they hold.
fn json_histogram(
    hist: &serde_json::Map<String, Value>,
    k: &str,
    scale_ns: u64,
    lines: &JsonLines,
) -> Result<(Vec<(u64, u64)>, u64), String> {
    let line_of = |path: &[&str]| lines.line_of(path);
    let unit = if scale_ns == 1 { "ns" } else { "µs" };
    let mut buckets = Vec::with_capacity(hist.len());
    let mut binned = 0u64;
    for (j, (key, c)) in hist.iter().enumerate() {
        poll_interrupt(j)?;
        // Looked up only for an error: a lookup scans the file, once per bucket it made
        // a 300,000-bucket import quadratic (minutes instead of a second).
        let at = || line_of(&["thread", k, "histogram", key]);
        let b: u64 = key.parse().map_err(|_| {
            format!(
                "{}expected a bucket number in thread.{k}.histogram, found \"{key}\"",
                at()
            )
        })?;
        if latency_ns(b, scale_ns).is_none() {
            return Err(format!(
                "{}thread.{k}.histogram: {}",
                at(),
                beyond("bucket", b, unit)
            ));
        }
        let c = c.as_u64().ok_or_else(|| {
            format!(
                "{}expected a whole number of samples for bucket {b} of thread {k}, found {c}",
                at()
            )
        })?;
        binned = binned.checked_add(c).ok_or_else(|| {
            format!(
                "{}thread.{k}.histogram: the counts add up beyond 2^64",
                at()
            )
        })?;
        if c > 0 {
            buckets.push((b, c));
        }
    }
    Ok((buckets, binned))
}

pub(super) fn parse_json(text: &str) -> Result<(Vec<Thread>, Recorded), String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| {
        format!(
            "line {}: not valid JSON (column {}): {e}",
            e.line(),
            e.column()
        )
    })?;
    let lines = JsonLines(text.lines().collect());
    let line_of = |path: &[&str]| lines.line_of(path);
    let threads = v.get("thread").and_then(|t| t.as_object()).ok_or_else(|| {
        "line 1: expected a cyclictest --json file: an object with a \"thread\" object".to_string()
    })?;
    let scale_ns = match v.get("resolution_in_ns").and_then(|r| r.as_u64()) {
        Some(1) => 1,
        _ => 1_000,
    };
    // rt-tests writes the key with a colon in it.
    let command_key = ["cmdline:", "cmdline"]
        .into_iter()
        .find(|k| v.get(*k).is_some())
        .unwrap_or("cmdline");
    let command = v
        .get(command_key)
        .and_then(|c| c.as_str())
        .map(str::to_string);
    let mut keys: Vec<(usize, &String)> = Vec::new();
    for k in threads.keys() {
        // An unpinned thread's number stands for its CPU: bounded as one.
        let i = k
            .parse::<usize>()
            .ok()
            .filter(|&i| i < MAX_CPUS)
            .ok_or_else(|| {
                format!(
                    "{}expected thread numbers below {MAX_CPUS} as keys of \"thread\", found \"{k}\"",
                    line_of(&["thread", k])
                )
            })?;
        keys.push((i, k));
    }
    keys.sort();
    let unit = if scale_ns == 1 { "ns" } else { "µs" };
    let mut out = Vec::new();
    for (i, k) in keys {
        let t = &threads[k];
        let field = |name: &str| format!("{}thread.{k}.{name}", line_of(&["thread", k, name]));
        // Counts and extremes are whole numbers: `"cycles": 1e30` once became u64::MAX.
        let whole = |name: &str| -> Result<u64, String> {
            let v = t.get(name);
            v.and_then(|x| x.as_u64()).ok_or_else(|| match v {
                Some(x) => format!("{}: expected a whole number, found {x}", field(name)),
                None => format!("{}: expected a whole number, found nothing", field(name)),
            })
        };
        // A latency is a number of `unit`s within the bound; named as the file writes it.
        let latency = |name: &str| -> Result<f64, String> {
            let x = t.get(name);
            match x.and_then(Value::as_f64) {
                Some(v) if v >= 0.0 && v * scale_ns as f64 <= MAX_LATENCY_NS as f64 => Ok(v),
                Some(_) => Err(format!(
                    "{}: {}",
                    field(name),
                    beyond("", x.unwrap_or(&Value::Null), unit).trim_start()
                )),
                None => Err(format!("{}: expected a number", field(name))),
            }
        };
        let count = whole("cycles")?;
        let (min, max) = (whole("min")?, whole("max")?);
        latency("min")?;
        latency("max")?;
        let avg = latency("avg")?;
        if count > 0 && min > max {
            return Err(format!(
                "{}: {min} {unit} is above thread.{k}.max {max} {unit}",
                field("min")
            ));
        }
        let hist = t
            .get("histogram")
            .and_then(|h| h.as_object())
            .ok_or_else(|| {
                format!(
                "{}thread {k} has no \"histogram\": percentiles need one (run cyclictest with -h)",
                line_of(&["thread", k])
            )
            })?;
        let (mut buckets, binned) = json_histogram(hist, k, scale_ns, &lines)?;
        if binned > count {
            return Err(format!(
                "{}: {count} is fewer than the {binned} samples in thread.{k}.histogram",
                field("cycles")
            ));
        }
        buckets.sort_unstable();
        // cyclictest writes -1 for a thread it did not pin; it then stands for its number.
        let cpu = match t.get("cpu") {
            None => i,
            Some(c) if c.as_i64() == Some(-1) => i,
            Some(c) => c.as_u64().filter(|&c| c < MAX_CPUS as u64).ok_or_else(|| {
                format!(
                    "{}: expected a CPU number below {MAX_CPUS} (or -1: not pinned), found {c}",
                    field("cpu")
                )
            })? as usize,
        };
        out.push(Thread {
            cpu,
            buckets,
            count,
            min,
            avg,
            max,
            overflows: count - binned,
            overflow_cycles: Vec::new(),
        });
    }
    if out.is_empty() {
        return Err(format!(
            "{}\"thread\" lists no thread",
            line_of(&["thread"])
        ));
    }
    let hist_buckets = command
        .as_deref()
        .and_then(|c| {
            option_value(c, Some('h'), "histogram")
                .or_else(|| option_value(c, Some('H'), "histofall"))
        })
        .and_then(|v| v.parse().ok());
    Ok((
        out,
        Recorded {
            format: FORMAT_JSON,
            dma_latency: command
                .as_deref()
                .map(|c| !c.split_whitespace().any(|w| w == "--default-system")),
            command,
            command_at: line_of(&[command_key]),
            hist_buckets,
            scale_ns,
        },
    ))
}
