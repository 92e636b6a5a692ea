//! `watch --forensics`: the code inside the late client, as the summary, the xrun table and
//! the answer say it (docs/methods.md "Inside the late client").

use super::style::{new_table, num};
use crate::measure::watch::inside::{CodeKind, Held, InsideSummary};
use crate::measure::watch::WatchResults;
use crate::units::format_ns;

/// `'ZamEQ2' (LV2 plugin)`, `libc.so.6 (system library)`.
pub fn label(c: &crate::measure::watch::inside::Code) -> String {
    let what = match c.kind {
        CodeKind::Lv2 => "LV2 plugin",
        CodeKind::Clap => "CLAP plugin",
        CodeKind::Vst3 => "VST3 plugin",
        CodeKind::Ladspa => "LADSPA plugin",
        CodeKind::Host => "host code",
        CodeKind::System => "system library",
        CodeKind::Kernel => "kernel",
        CodeKind::Unknown => "unmapped code",
    };
    match c.kind {
        CodeKind::Kernel | CodeKind::Unknown => what.to_string(),
        _ => format!("'{}' ({what})", c.name),
    }
}

/// What held a late run, for the xrun table: `in 'spin' (LV2 plugin) 91 % spin_run, 8.9 ms
/// (usual 120 µs)`.
pub fn held_cell(h: &Held) -> String {
    let sym = h
        .symbol
        .as_deref()
        .map(|s| format!(" {s}"))
        .unwrap_or_default();
    format!(
        "in {} {:.0} %{sym}, {} (usual {})",
        label(&h.code),
        h.share * 100.0,
        format_ns(h.ns),
        format_ns(h.usual_ns)
    )
}

/// The code that held the late runs most, for the answer: `in 'spin' (LV2 plugin) in 48
/// of them`; None when nothing was sampled or no code led a majority of them.
pub fn answer_clause(r: &WatchResults, of_client: &str) -> Option<String> {
    let held: Vec<&Held> = r
        .xruns
        .iter()
        .filter_map(|x| x.late.as_ref())
        .filter(|l| l.who() == of_client)
        .filter_map(|l| l.inside.as_ref())
        .collect();
    let mut by: Vec<(String, usize)> = Vec::new();
    for h in &held {
        let l = label(&h.code);
        match by.iter_mut().find(|(n, _)| *n == l) {
            Some(e) => e.1 += 1,
            None => by.push((l, 1)),
        }
    }
    by.sort_by_key(|e| std::cmp::Reverse(e.1));
    let (l, n) = by.first()?;
    (n * 2 > held.len()).then(|| format!(", inside it {l} in {n} of them"))
}

/// The code inside each client thread over the watch.
pub fn section(i: &InsideSummary) -> String {
    let mut s = String::new();
    if i.code.is_empty() {
        if let Some(why) = &i.refused {
            s.push_str(&format!("inside the clients: not sampled ({why})\n"));
        }
        return s;
    }
    let mut t = new_table(&[
        "client thread",
        "code",
        "per cycle: mean / p99 / max",
        "top in cycles",
        "xruns led",
    ]);
    // The threads that led xruns first; of each, its five largest (the JSON keeps 12).
    let led = |tid: i32| -> u64 {
        i.code
            .iter()
            .filter(|c| c.tid == tid)
            .map(|c| c.xruns_led)
            .sum()
    };
    let mut rows: Vec<&crate::measure::watch::inside::CodeTime> = Vec::new();
    let mut tids: Vec<i32> = i.code.iter().map(|c| c.tid).collect();
    tids.dedup();
    tids.sort_by_key(|&t| std::cmp::Reverse(led(t)));
    for tid in tids {
        rows.extend(i.code.iter().filter(|c| c.tid == tid).take(5));
    }
    for c in rows {
        t.add_row(vec![
            c.who().into(),
            label(&c.code).into(),
            num(format!(
                "{} / {} / {}",
                format_ns(c.mean_ns),
                format_ns(c.p99_ns),
                format_ns(c.max_ns)
            )),
            num(c.top_cycles),
            num(c.xruns_led),
        ]);
    }
    s.push_str(&format!(
        "inside each client thread (sampled every {} of its CPU time: {} samples of {} threads{}):\n{t}\n",
        format_ns(i.sample_period_ns),
        i.samples,
        i.threads,
        if i.lost > 0 {
            format!(", {} lost", i.lost)
        } else {
            String::new()
        }
    ));
    if let Some(why) = &i.refused {
        s.push_str(&format!("  some threads were not sampled: {why}\n"));
    }
    s
}
