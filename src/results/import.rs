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
use crate::common::Summary;
use crate::error::{Error, Result};
use crate::measure::latency::{
    CpuLatency, LatencyConfig, LatencyResult, LatencySource, LatencyStats,
};
use crate::rt::affinity::MAX_CPUS;
use crate::rt::Policy;
use serde_json::Value;
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

fn parse_list(rest: &str, line_no: usize, what: &str) -> Result<Vec<u64>, String> {
    rest.split_whitespace()
        .map(|v| {
            v.parse::<u64>()
                .map_err(|_| format!("line {line_no}: '{what}' expects whole numbers, found '{v}'"))
        })
        .collect()
}

/// Footer values of the text format, each with the line it came from.
#[derive(Default)]
struct Footer {
    total: Option<(usize, Vec<u64>)>,
    min: Option<(usize, Vec<u64>)>,
    avg: Option<(usize, Vec<u64>)>,
    max: Option<(usize, Vec<u64>)>,
    overflows: Option<(usize, Vec<u64>)>,
    /// `# Thread N:` lines: (N as written, line, cycle numbers listed).
    cycles: Vec<(String, usize, Vec<u64>)>,
}

/// The text format's lines, read in one pass: the histogram rows and the footer, each value
/// with the line it came from.
struct TextLines {
    /// (bucket, counts per column)
    rows: Vec<(u64, Vec<u64>)>,
    first_row_line: usize,
    footer: Footer,
    in_footer: bool,
    last_line: usize,
}

/// Read every line of the text format, checking each row as it comes; what the footer
/// says is checked against the rows afterwards ([`text_columns`]).
fn read_text_lines(text: &str, rec: &mut Recorded) -> Result<TextLines, String> {
    let mut rows: Vec<(u64, Vec<u64>)> = Vec::new();
    let mut first_row_line = 0;
    let mut f = Footer::default();
    let mut in_footer = false;
    let mut last_line = 0;
    for (i, raw) in text.lines().enumerate() {
        poll_interrupt(i)?;
        let n = i + 1;
        last_line = n;
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(c) = line.strip_prefix('#') {
            let c = c.trim();
            let mut footer = |slot: &mut Option<(usize, Vec<u64>)>, label: &str, rest: &str| {
                in_footer = true;
                parse_list(rest, n, label).map(|v| *slot = Some((n, v)))
            };
            if let Some(r) = c.strip_prefix("Total:") {
                footer(&mut f.total, "# Total:", r)?;
            } else if let Some(r) = c.strip_prefix("Min Latencies:") {
                footer(&mut f.min, "# Min Latencies:", r)?;
            } else if let Some(r) = c.strip_prefix("Avg Latencies:") {
                footer(&mut f.avg, "# Avg Latencies:", r)?;
            } else if let Some(r) = c.strip_prefix("Max Latencies:") {
                footer(&mut f.max, "# Max Latencies:", r)?;
            } else if let Some(r) = c.strip_prefix("Histogram Overflows:") {
                footer(&mut f.overflows, "# Histogram Overflows:", r)?;
            } else if let Some(r) = c.strip_prefix("Thread ") {
                // "# Thread Ids:" and other words carry nothing; a number is a thread, checked
                // against the footer once it is read (never used to size anything: a line
                // "# Thread 4294967295:" once allocated gigabytes).
                if let Some((idx, list)) = r.split_once(':') {
                    let idx = idx.trim();
                    if !idx.is_empty() && idx.bytes().all(|b| b.is_ascii_digit()) {
                        // "# 01957 others" ends the listed cycle numbers.
                        let listed = list.split('#').next().unwrap_or("");
                        let v = parse_list(listed, n, "# Thread N:")?;
                        f.cycles.push((idx.to_string(), n, v));
                    }
                }
            } else if c.starts_with("/dev/cpu_dma_latency set to") {
                rec.dma_latency = Some(true);
            }
            // Other comments (# Histogram, # Thread Ids:, # Break value:, ...) carry
            // nothing the model holds.
            continue;
        }
        if line.starts_with(|c: char| c.is_ascii_digit()) {
            if in_footer {
                return Err(format!(
                    "line {n}: histogram row after the '# Min Latencies:'... footer; expected only '#' lines there"
                ));
            }
            let v = parse_list(line, n, "histogram row")?;
            let (bucket, counts) = match v.split_first() {
                Some((&b, counts)) if !counts.is_empty() => (b, counts),
                _ => {
                    return Err(format!(
                    "line {n}: expected a histogram row 'BUCKET COUNT [COUNT...]', found '{line}'"
                ))
                }
            };
            if latency_ns(bucket, rec.scale_ns).is_none() {
                return Err(format!(
                    "line {n}: {}",
                    beyond("histogram bucket", bucket, "µs")
                ));
            }
            if let Some((prev, cols)) = rows.last() {
                if counts.len() != cols.len() {
                    return Err(format!(
                        "line {n}: expected {} counts like the first histogram row (line {first_row_line}), found {}",
                        cols.len(),
                        counts.len()
                    ));
                }
                if bucket <= *prev {
                    return Err(format!(
                        "line {n}: expected bucket numbers to increase, found {bucket} after {prev}"
                    ));
                }
            } else {
                first_row_line = n;
            }
            rows.push((bucket, counts.to_vec()));
            continue;
        }
        if rows.is_empty()
            && !in_footer
            && (line.starts_with("policy:") || line.starts_with("T:") || line.contains('\x1b'))
        {
            // cyclictest's live status lines when it ran without -q.
            continue;
        }
        return Err(format!(
            "line {n}: expected a histogram row such as '000017 000123' or a '#' line, found '{}'",
            line.chars().take(60).collect::<String>()
        ));
    }
    Ok(TextLines {
        rows,
        first_row_line,
        footer: f,
        in_footer,
        last_line,
    })
}

/// The footer's per-thread values, each list with its line.
struct TextColumns {
    threads: usize,
    min: Vec<u64>,
    avg: Vec<u64>,
    max: Vec<u64>,
    overflows: Vec<u64>,
    avg_line: usize,
    max_line: usize,
    of_line: usize,
}

/// The footer's lists, checked against each other and the histogram's columns.
fn text_columns(t: &TextLines) -> Result<TextColumns, String> {
    let (rows, f, in_footer, first_row_line) = (&t.rows, &t.footer, t.in_footer, t.first_row_line);
    let eof = t.last_line + 1;
    let need = |slot: &Option<(usize, Vec<u64>)>, label: &str| {
        slot.clone().ok_or_else(|| {
            if rows.is_empty() && !in_footer {
                format!(
                    "line {eof}: end of file without a cyclictest histogram: expected rows such as '000017 000123' and a '# Min Latencies:' footer (was cyclictest run with -h?)"
                )
            } else {
                format!("line {eof}: end of file: expected a '{label}' line")
            }
        })
    };
    let (_, min) = need(&f.min, "# Min Latencies:")?;
    let (avg_line, avg) = need(&f.avg, "# Avg Latencies:")?;
    let (max_line, max) = need(&f.max, "# Max Latencies:")?;
    let (of_line, overflows) = need(&f.overflows, "# Histogram Overflows:")?;
    let threads = min.len();
    let min_at = f.min.as_ref().map_or(eof, |m| m.0);
    if threads == 0 {
        return Err(format!("line {min_at}: '# Min Latencies:' lists no thread"));
    }
    // A thread's column number stands for its CPU.
    if threads > MAX_CPUS {
        return Err(format!(
            "line {min_at}: '# Min Latencies:' lists {threads} threads, more than any machine has CPUs ({MAX_CPUS})"
        ));
    }
    // With -H (histofall) and several threads, a summary column follows the threads.
    let fits = |len: usize| len == threads || (threads > 1 && len == threads + 1);
    for (line, len, label, allow_sum) in [
        (avg_line, avg.len(), "# Avg Latencies:", false),
        (max_line, max.len(), "# Max Latencies:", true),
        (of_line, overflows.len(), "# Histogram Overflows:", true),
    ] {
        if !(len == threads || (allow_sum && fits(len))) {
            return Err(format!(
                "line {line}: expected {threads} values in '{label}' (one per thread, as in '# Min Latencies:'), found {len}"
            ));
        }
    }
    if let Some((_, cols)) = rows.first() {
        if !fits(cols.len()) {
            return Err(format!(
                "line {first_row_line}: expected {threads} counts per histogram row (one per thread), found {}",
                cols.len()
            ));
        }
    }
    Ok(TextColumns {
        threads,
        min,
        avg,
        max,
        overflows,
        avg_line,
        max_line,
        of_line,
    })
}

fn parse_text(text: &str) -> Result<(Vec<Thread>, Recorded), String> {
    let mut rec = Recorded {
        scale_ns: 1_000,
        ..Default::default()
    };
    let lines = read_text_lines(text, &mut rec)?;
    let TextColumns {
        threads,
        min,
        avg,
        max,
        overflows,
        avg_line,
        max_line,
        of_line,
    } = text_columns(&lines)?;
    let TextLines {
        rows,
        first_row_line,
        footer: mut f,
        ..
    } = lines;
    // With -H (histofall) and several threads, a summary column follows the threads.
    let fits = |len: usize| len == threads || (threads > 1 && len == threads + 1);
    rec.format = if f.total.is_some() {
        FORMAT_TEXT
    } else {
        FORMAT_TEXT_SPARSE
    };
    let mut listed: Vec<Option<(usize, Vec<u64>)>> = vec![None; threads];
    for (idx, line, v) in std::mem::take(&mut f.cycles) {
        let Some(slot) = idx.parse::<usize>().ok().and_then(|i| listed.get_mut(i)) else {
            return Err(format!(
                "line {line}: '# Thread {idx}:' names a thread '# Min Latencies:' does not list (it lists {threads}, from 0)"
            ));
        };
        if slot.is_some() {
            return Err(format!("line {line}: '# Thread {idx}:' is listed twice"));
        }
        *slot = Some((line, v));
    }
    let (min_line, max_line) = (f.min.as_ref().map_or(0, |m| m.0), max_line);
    // Footer values and bucket numbers are µs; each must be a latency.
    for (line, label, values) in [
        (min_line, "# Min Latencies:", &min),
        (avg_line, "# Avg Latencies:", &avg),
        (max_line, "# Max Latencies:", &max),
    ] {
        if let Some(v) = values
            .iter()
            .find(|&&v| latency_ns(v, rec.scale_ns).is_none())
        {
            return Err(format!(
                "line {line}: {}",
                beyond(&format!("'{label}'"), v, "µs")
            ));
        }
    }
    // Avg has one value per thread, max and overflows may have a summary column after them
    // (checked above): zipped with min, each thread's values come out together.
    let per_thread = min.iter().zip(&avg).zip(&max).zip(&overflows);
    let mut out = Vec::with_capacity(threads);
    for (t, (((&t_min, &t_avg), &t_max), &t_overflows)) in per_thread.enumerate() {
        // Each thread reads every row: a look per thread.
        poll_interrupt(0)?;
        let column = |c: &Vec<u64>| c.get(t).copied().unwrap_or(0);
        let buckets: Vec<(u64, u64)> = rows
            .iter()
            .filter(|(_, c)| column(c) > 0)
            .map(|(k, c)| (*k, column(c)))
            .collect();
        let binned = buckets
            .iter()
            .try_fold(0u64, |a, b| a.checked_add(b.1))
            .ok_or_else(|| {
                format!("line {first_row_line}: the histogram column of thread {t} adds up beyond 2^64 samples")
            })?;
        let count = binned.checked_add(t_overflows).ok_or_else(|| {
            format!("line {of_line}: thread {t}'s histogram and '# Histogram Overflows:' add up beyond 2^64 samples")
        })?;
        if count > 0 && t_min > t_max {
            return Err(format!(
                "line {min_line}: '# Min Latencies:' says {t_min} µs for thread {t}, above its '# Max Latencies:' {t_max} µs (line {max_line})"
            ));
        }
        let overflow_cycles = match listed.get_mut(t).and_then(Option::take) {
            Some((line, v)) if v.len() as u64 > t_overflows => {
                return Err(format!(
                    "line {line}: '# Thread {t}:' lists {} overflow cycles but '# Histogram Overflows:' counts {t_overflows} (line {of_line})",
                    v.len()
                ))
            }
            Some((_, v)) => v,
            None => Vec::new(),
        };
        if let Some((line, total)) = &f.total {
            match total.get(t) {
                Some(&said) if fits(total.len()) && said == binned => {}
                Some(&said) if fits(total.len()) => {
                    return Err(format!(
                        "line {line}: '# Total:' says {said} samples for thread {t} but its histogram column sums to {binned}"
                    ))
                }
                _ => {
                    return Err(format!(
                        "line {line}: expected {threads} values in '# Total:', found {}",
                        total.len()
                    ))
                }
            }
        }
        out.push(Thread {
            cpu: t,
            buckets,
            count,
            min: t_min,
            avg: t_avg as f64,
            max: t_max,
            overflows: t_overflows,
            overflow_cycles,
        });
    }
    if rec.format == FORMAT_TEXT {
        rec.hist_buckets = rows.last().map(|r| r.0 + 1);
    }
    Ok((out, rec))
}

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

fn parse_json(text: &str) -> Result<(Vec<Thread>, Recorded), String> {
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
