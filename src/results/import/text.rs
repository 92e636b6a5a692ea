//! cyclictest's text output (`-h`/`-H`, dense or rt-tests ≥ 2.7 sparse): the histogram rows
//! and the footer, checked against each other.

use super::{
    beyond, latency_ns, poll_interrupt, Recorded, Thread, FORMAT_TEXT, FORMAT_TEXT_SPARSE,
};
use crate::rt::affinity::MAX_CPUS;

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

pub(super) fn parse_text(text: &str) -> Result<(Vec<Thread>, Recorded), String> {
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
