//! `watch`: the line per xrun and the status line printed while watching, the end summary
//! and its one-sentence answer (docs/methods.md "Watch").

use super::style::{new_table, num};
use crate::common::Status;
use crate::measure::watch::clients::LateClient;
use crate::measure::watch::cycles::{Headroom, BINS};
use crate::measure::watch::sizes::{OtherSizes, SizeEstimate};
use crate::measure::watch::{LiveSnapshot, ServerInfo, WatchConfig, WatchResults, WatchXrun};
use crate::report::format::span;
use crate::units::format_ns;

/// The clock time of a wall stamp (`…T14:03:22.120Z` → `14:03:22.120`).
fn clock(wall: &str) -> &str {
    wall.split_once('T')
        .map(|(_, t)| t.trim_end_matches('Z'))
        .unwrap_or(wall)
}

/// One xrun as it is printed the moment it is seen.
pub fn xrun_line(x: &WatchXrun, s: &ServerInfo) -> String {
    if let Some(l) = x
        .late
        .as_ref()
        .filter(|_| x.late_by_ns.is_some() || x.delayed_us == 0.0)
    {
        if l.tid == 0 {
            return node_line(x, l, s);
        }
    }
    let delay = if x.delayed_us > 0.0 {
        format!("driver {:.2} ms late", x.delayed_us / 1000.0)
    } else {
        "no driver delay (a client was not finished)".into()
    };
    format!(
        "{}  xrun {}  {}/{}  cycle {}  {}  DSP {:.0} %",
        clock(&x.wall),
        x.index,
        s.frames,
        s.rate,
        x.cycle,
        delay,
        x.dsp_load_pct
    )
}

/// A JACK xrun's late client, named from the trace a moment after its own line
/// (`watch --forensics`): under the xrun's line, indented to its text.
pub fn late_line(index: u64, l: &LateClient) -> String {
    let inside = l
        .inside
        .as_ref()
        .map(|h| format!(", {}", super::inside::held_cell(h)))
        .unwrap_or_default();
    let line = format!(
        "              xrun {index}: late client {} {}{inside}",
        l.quoted(),
        how(l)
    );
    super::style::wrap(&line, 16)
}

/// How a late client was late: woke late, ran long, or (PipeWire) was not seen to finish.
fn how(l: &LateClient) -> String {
    if l.busy_ns == 0 {
        if l.woke_late {
            "not yet running at the deadline".to_string()
        } else {
            "still running at the deadline".to_string()
        }
    } else if l.woke_late {
        format!(
            "woke {} late (usual {})",
            format_ns(l.wake_delay_ns),
            format_ns(l.usual_wake_delay_ns)
        )
    } else {
        format!(
            "ran {} (usual {})",
            format_ns(l.busy_ns),
            format_ns(l.usual_busy_ns)
        )
    }
}

/// A PipeWire xrun: the late node named by the profiler, within 80 columns.
fn node_line(x: &WatchXrun, l: &LateClient, s: &ServerInfo) -> String {
    let how = how(l);
    let by = x
        .late_by_ns
        .filter(|&b| b > 0)
        .map(|b| format!(", {} late", format_ns(b)))
        .unwrap_or_default();
    let line = format!(
        "{}  xrun {}  {}/{}  {} {how}{by}",
        clock(&x.wall),
        x.index,
        s.frames,
        s.rate,
        l.quoted()
    );
    super::style::wrap(&line, 4)
}

/// The near-miss histogram: how close the cycles came to their deadline, one row per
/// band of headroom with a bar of its share (log-scaled: the rare near misses are what
/// matters, next to thousands of easy cycles).
pub fn headroom_section(h: &Headroom) -> String {
    if h.cycles == 0 {
        return String::new();
    }
    let band = |lo: usize, hi: usize| {
        h.bins
            .iter()
            .skip(lo)
            .take(hi - lo)
            .fold(0u64, |a, &b| a.saturating_add(b))
    };
    let rows = [
        ("missed (xrun)", h.missed),
        ("< 5 % spare", band(0, 1)),
        ("5-10 %", band(1, 2)),
        ("10-25 %", band(2, 5)),
        ("25-50 %", band(5, 10)),
        (">= 50 %", band(10, BINS)),
    ];
    let top = (h.cycles as f64).ln_1p();
    let mut s = format!(
        "near misses: {} cycles of {}; headroom least {}, p1 {}, median {}\n",
        h.cycles,
        format_ns(h.period_ns),
        format_ns(h.min_ns),
        format_ns(h.p1_ns),
        format_ns(h.p50_ns)
    );
    if h.of_cycles > 0 {
        let pct = h.cycles as f64 * 100.0 / h.of_cycles as f64;
        let line = format!(
            "(a sample: the {} cycles the flight recorder kept of the {} watched, {pct:.1} %: \
             around each xrun and 1 s every 20 s, every 5 min later)",
            h.cycles, h.of_cycles
        );
        s.push_str(&super::style::wrap(&line, 2));
        s.push('\n');
    }
    for (name, n) in rows {
        let bar = ((n as f64).ln_1p() / top.max(1e-9) * 40.0).round() as usize;
        s.push_str(&format!("  {name:<14} {n:>10}  {}\n", "#".repeat(bar)));
    }
    s
}

/// One size's expected xruns as the sentence says them.
fn size_count(e: &SizeEstimate) -> String {
    if e.xruns == 0.0 {
        format!("at {} none seen (at most {:.1})", e.frames, e.high)
    } else if e.rough {
        format!("at {} roughly {:.0}", e.frames, e.xruns.max(1.0))
    } else {
        format!(
            "at {} it would have had about {:.0} ({:.0}-{:.0})",
            e.frames,
            e.xruns.max(1.0),
            e.low.floor(),
            e.high.ceil()
        )
    }
}

/// What the watched cycles say of the other buffer sizes (`measure::watch::sizes`): the
/// size watched as measured, beside the model's reading of it, then each other size, and
/// the model's assumptions.
pub fn other_sizes_section(o: &OtherSizes, r: &WatchResults) -> String {
    let from = if o.sampled {
        format!(
            "the {} cycles the flight recorder kept ({}, around each xrun)",
            o.cycles,
            span(o.span_ns)
        )
    } else {
        format!("{} cycles ({})", o.cycles, span(o.span_ns))
    };
    let mut parts = Vec::new();
    if let Some(w) = o.sizes.iter().find(|e| e.watched) {
        parts.push(format!(
            "at {} frames: {} xruns in {} (the model reads {:.0} from the same cycles)",
            o.frames,
            r.total_xruns(),
            span(r.watched_ns),
            w.xruns
        ));
    }
    let mut others: Vec<&SizeEstimate> = o.sizes.iter().filter(|e| !e.watched).collect();
    others.sort_by_key(|e| (e.rough, e.frames));
    parts.extend(others.into_iter().map(size_count));
    let line = format!("other buffer sizes, from {from}: {}", parts.join("; "));
    let mut s = super::style::wrap(&line, 2);
    s.push('\n');
    // The model's check on itself: the size watched, read from the same cycles.
    let measured = r.total_xruns() as f64;
    if let Some(w) = o
        .sizes
        .iter()
        .find(|e| e.watched && (measured < e.low || measured > e.high))
    {
        let warn = format!(
            "warning: the model does not give back what was measured at {} frames ({} \
             xruns; it reads {:.0}, 95 % {:.0}-{:.0}): its figures for the other sizes are \
             rough here",
            o.frames,
            r.total_xruns(),
            w.xruns,
            w.low.floor(),
            w.high.ceil()
        );
        s.push_str(&super::style::wrap(&warn, 2));
        s.push('\n');
    }
    let why = "(assumed: each cycle's work scales with the period, its stalls - wake-up \
               delays, a host that held the CPU - do not, and a stall longer than the new \
               period still glitches; a smaller size's own costs per cycle and wake-ups are \
               not in the data, so its figure is rough either way)";
    s.push_str(&super::style::wrap(why, 2));
    s.push('\n');
    s
}

/// The status line a terminal shows while watching.
pub fn status_line(l: &LiveSnapshot) -> String {
    let secs = l.watched_ns / 1_000_000_000;
    let mut s = format!(
        "watching {:02}:{:02}:{:02}  xruns {}  worst delay {}  DSP {:.0} % (max {:.0} %)",
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        l.xruns + l.lost,
        format_ns(l.worst_delay_ns),
        l.dsp_load_pct,
        l.dsp_load_max_pct
    );
    if !l.server_up {
        s.push_str("  server away, waiting");
    }
    s
}

/// The one-sentence answer.
pub fn answer(r: &WatchResults) -> String {
    let n = r.total_xruns();
    let server = format!(
        "{} '{}' at {}/{}",
        r.server.kind, r.server.name, r.server.frames, r.server.rate
    );
    let gaps = match r.gaps.len() {
        0 => String::new(),
        1 => " (the server was away once)".into(),
        g => format!(" (the server was away {g} times)"),
    };
    let load = format!(
        "DSP load mean {:.0} %, max {:.0} %",
        r.dsp_load.mean_pct, r.dsp_load.max_pct
    );
    if n == 0 {
        return format!(
            "No xruns in {} on {server}{gaps}: the session ran clean ({load}).",
            span(r.watched_ns)
        );
    }
    let per_min = n as f64 / (r.watched_ns.max(1) as f64 / 60e9);
    let mut rate = match set_up_xruns(r) {
        0 => format!("{per_min:.1}/min"),
        k => format!("{per_min:.1}/min, {k} while xrunlab set up its trace"),
    };
    if let Some(c) = soc_clause(r) {
        rate.push_str(&format!(", {c}"));
    }
    if let Some(late) = late_clause(r) {
        return format!(
            "{n} xrun{} in {} on {server} ({rate}){gaps}; {late}; {load}.",
            if n == 1 { "" } else { "s" },
            span(r.watched_ns)
        );
    }
    let delayed = r.xruns.iter().filter(|x| x.delayed_us > 0.0).count();
    let cause = if delayed == 0 {
        "the server reported no driver delay for any, so clients finished late".to_string()
    } else {
        let worst = r.xruns.iter().map(|x| x.delayed_us).fold(0.0, f64::max);
        format!(
            "{delayed} came with a late driver wake-up (worst {:.2} ms)",
            worst / 1000.0
        )
    };
    format!(
        "{n} xrun{} in {} on {server} ({rate}){gaps}; {cause}; {load}.",
        if n == 1 { "" } else { "s" },
        span(r.watched_ns)
    )
}

/// "K of them while 'CLIENT' ran long (usual busy …, worst …) behind CULPRIT": the client
/// late most often, and the culprit most often on its CPU then; None without forensics.
fn late_clause(r: &WatchResults) -> Option<String> {
    // By client and process: two processes may open clients of one name.
    let mut by: Vec<(String, u64)> = Vec::new();
    for l in r.xruns.iter().filter_map(|x| x.late.as_ref()) {
        let who = l.who();
        match by.iter_mut().find(|(n, _)| *n == who) {
            Some(e) => e.1 += 1,
            None => by.push((who, 1)),
        }
    }
    by.sort_by_key(|e| std::cmp::Reverse(e.1));
    let (name, k) = by.first()?.clone();
    let mine: Vec<_> = r
        .xruns
        .iter()
        .filter_map(|x| x.late.as_ref())
        .filter(|l| l.who() == name)
        .collect();
    let ran_long = mine.iter().filter(|l| !l.woke_late).count();
    // "Usual" over the whole watch when it was timed; the first xrun's view may predate
    // any ordinary cycle of the client.
    let whole = r
        .clients
        .iter()
        .find(|c| c.who() == name && c.busy_ns.count > 0);
    let how = if ran_long * 2 >= mine.len() {
        let worst = mine.iter().map(|l| l.run_ns).max().unwrap_or(0);
        let usual = whole.map_or(mine[0].usual_run_ns, |c| c.run_ns.p50);
        format!(
            "ran long (usually {}, up to {})",
            format_ns(usual),
            format_ns(worst)
        )
    } else {
        let worst = mine.iter().map(|l| l.wake_delay_ns).max().unwrap_or(0);
        let usual = whole.map_or(mine[0].usual_wake_delay_ns, |c| c.wake_delay_ns.p50);
        format!(
            "woke late (usual delay {}, worst {})",
            format_ns(usual),
            format_ns(worst)
        )
    };
    let mut culprits: Vec<(&str, usize)> = Vec::new();
    for c in mine.iter().filter_map(|l| l.culprit.as_deref()) {
        match culprits.iter_mut().find(|(n, _)| *n == c) {
            Some(e) => e.1 += 1,
            None => culprits.push((c, 1)),
        }
    }
    culprits.sort_by_key(|e| std::cmp::Reverse(e.1));
    // Without one process behind most of them, maybe one program (bursts from two runs of
    // one tool, a plugin host restarted): its name without the pids.
    let mut programs: Vec<(String, usize, usize)> = Vec::new();
    for &(c, m) in &culprits {
        let p = without_pids(c);
        match programs.iter_mut().find(|(n, _, _)| *n == p) {
            Some(e) => (e.1, e.2) = (e.1 + m, e.2 + 1),
            None => programs.push((p, m, 1)),
        }
    }
    programs.sort_by_key(|e| std::cmp::Reverse(e.1));
    let behind = match (culprits.first(), programs.first()) {
        (Some((c, m)), _) if m * 2 > mine.len() => format!(" behind {c} on its CPU"),
        (_, Some((p, m, n))) if m * 2 > mine.len() => {
            format!(" behind {p} ({n} processes) on its CPU")
        }
        _ => String::new(),
    };
    let all = if k == r.total_xruns() {
        "all".to_string()
    } else {
        format!("{k} of them")
    };
    let inside = super::inside::answer_clause(r, &name).unwrap_or_default();
    let class = class_clause(&mine);
    let name = mine[0].quoted();
    Some(format!("{all} while {name} {how}{inside}{behind}{class}"))
}

/// "; the cause: CLASS in K of them" for the class of most of the late runs, when one
/// class holds more than half.
fn class_clause(mine: &[&crate::measure::watch::clients::LateClient]) -> String {
    let mut n: Vec<(crate::trace::CulpritClass, usize)> = Vec::new();
    for c in mine.iter().filter_map(|l| l.class) {
        match n.iter_mut().find(|(k, _)| *k == c) {
            Some(e) => e.1 += 1,
            None => n.push((c, 1)),
        }
    }
    n.sort_by_key(|e| std::cmp::Reverse(e.1));
    match n.first() {
        Some(&(c, k)) if k * 2 > mine.len() => {
            format!("; the cause: {} in {k} of them", c.phrase())
        }
        _ => String::new(),
    }
}

/// A culprit's label without its process and thread ids: "python3[812] rt:95" → "python3
/// rt:95".
fn without_pids(c: &str) -> String {
    let mut out = String::with_capacity(c.len());
    let mut rest = c;
    while let Some(i) = rest.find('[') {
        let tail = &rest[i + 1..];
        match tail.find(']') {
            Some(j) if j > 0 && tail[..j].bytes().all(|b| b.is_ascii_digit()) => {
                out.push_str(&rest[..i]);
                rest = &tail[j + 1..];
            }
            _ => {
                out.push_str(&rest[..=i]);
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The late client of an xrun, as the summary's table shows it.
fn late_cell(x: &WatchXrun) -> String {
    let Some(l) = &x.late else {
        return "-".into();
    };
    if l.tid == 0 {
        let by = x
            .late_by_ns
            .map(|b| format!(", {} late", format_ns(b)))
            .unwrap_or_default();
        return if l.busy_ns == 0 {
            format!("{} unfinished{by}", l.quoted())
        } else if l.woke_late {
            format!("{} woke {}{by}", l.quoted(), format_ns(l.wake_delay_ns))
        } else {
            format!("{} ran {}{by}", l.quoted(), format_ns(l.busy_ns))
        };
    }
    let mut s = if l.woke_late {
        format!(
            "{} woke {} late (usual {})",
            l.quoted(),
            format_ns(l.wake_delay_ns),
            format_ns(l.usual_wake_delay_ns)
        )
    } else {
        format!(
            "{} ran {} (usual {}; busy {})",
            l.quoted(),
            format_ns(l.run_ns),
            format_ns(l.usual_run_ns),
            format_ns(l.busy_ns)
        )
    };
    if let Some(h) = &l.inside {
        s.push_str(&format!(", {}", super::inside::held_cell(h)));
    }
    if let Some(c) = &l.culprit {
        s.push_str(&format!(" ← {c} {}", format_ns(l.culprit_ns)));
    }
    if let Some(c) = l.class {
        s.push_str(&format!(" [{}]", c.phrase()));
    }
    s
}

/// The end summary: what was watched, the xruns, the gaps, the answer.
/// The xruns, the first 20 in a table: time, cycle, the driver's delay or the late node,
/// and with a trace the late client and what ran on its CPU.
fn xrun_table(r: &WatchResults) -> String {
    let mut s = String::new();
    let traced = r.forensics.is_some() || r.xruns.iter().any(|x| x.late.is_some());
    let nodes = r.xruns.iter().any(|x| x.late_by_ns.is_some());
    let mut head = vec!["#", "time", "cycle"];
    if !nodes {
        head.push("driver delay");
    }
    head.push("DSP load");
    if nodes {
        head.push("late node");
    } else if traced {
        head.push("late client ← what ran on its CPU");
    }
    let mut t = new_table(&head);
    const SHOWN: usize = 20;
    for x in r.xruns.iter().take(SHOWN) {
        let mut row = vec![num(x.index), clock(&x.wall).into(), num(x.cycle)];
        if !nodes {
            row.push(num(if x.delayed_us > 0.0 {
                format!("{:.2} ms", x.delayed_us / 1000.0)
            } else {
                "-".into()
            }));
        }
        row.push(num(format!("{:.0} %", x.dsp_load_pct)));
        if traced {
            row.push(late_cell(x).into());
        }
        t.add_row(row);
    }
    s.push_str(&format!("{t}\n"));
    if r.xruns.len() > SHOWN {
        s.push_str(&format!(
            "… and {} more (all are in the JSON result)\n",
            r.xruns.len() - SHOWN
        ));
    }
    s
}

pub fn summary(cfg: &WatchConfig, r: &WatchResults, status: Status) -> String {
    let mut s = super::style::wrap(
        &format!(
            "watch: {} '{}' ({}), {} frames at {} Hz ({}), watched {}",
            r.server.kind,
            r.server.name,
            r.server.version,
            r.server.frames,
            r.server.rate,
            format_ns(r.server.period_ns()),
            span(r.watched_ns)
        ),
        4,
    );
    s.push('\n');
    match status {
        Status::ServerShutdown => s.push_str("the server went away: the watch ended there\n"),
        Status::Interrupted => s.push_str("interrupted: what was seen until then\n"),
        _ => {}
    }
    if !r.xruns.is_empty() {
        s.push_str(&xrun_table(r));
    }
    if let Some(line) = during_set_up(r) {
        s.push_str(&line);
    }
    if let Some(line) = soc_line(r) {
        s.push_str(&super::style::wrap(&line, 2));
        s.push('\n');
    }
    if r.xruns_lost > 0 {
        s.push_str(&format!(
            "{} xrun notification(s) came faster than they were read: counted, not detailed\n",
            r.xruns_lost
        ));
    }
    for g in &r.gaps {
        s.push_str(&match g.to_ns {
            Some(to) => format!(
                "server away from {} to {} ({})\n",
                span(g.from_ns),
                span(to),
                format_ns(to.saturating_sub(g.from_ns))
            ),
            None => format!("server away from {} until the end\n", span(g.from_ns)),
        });
    }
    if !r.clients.is_empty() {
        let nodes = r.clients.iter().all(|c| c.tid == 0);
        let mut head = vec![if nodes { "node" } else { "client thread" }];
        if !nodes {
            head.push("process[pid]/tid");
        }
        head.extend([
            "cycles",
            "busy p50 / p99 / max",
            "wake-up p50 / p99 / max",
            "xruns late",
        ]);
        let mut t = new_table(&head);
        let mut cs: Vec<_> = r.clients.iter().collect();
        cs.sort_by_key(|c| std::cmp::Reverse(c.xruns_late));
        for c in cs {
            let f = |t: &crate::measure::watch::clients::Timing| {
                format!(
                    "{} / {} / {}",
                    format_ns(t.p50),
                    format_ns(t.p99),
                    format_ns(t.max)
                )
            };
            let mut row = vec![c.name.clone().into()];
            if !nodes {
                let process = if c.process.is_empty() {
                    String::new()
                } else {
                    format!("{}[{}]", c.process, c.pid)
                };
                let pid = if process.is_empty() {
                    c.pid.to_string()
                } else {
                    process
                };
                row.push(format!("{pid}/{}", c.tid).into());
            }
            row.extend([
                num(c.busy_ns.count),
                num(f(&c.busy_ns)),
                num(f(&c.wake_delay_ns)),
                num(c.xruns_late),
            ]);
            t.add_row(row);
        }
        let what = if nodes { "nodes" } else { "clients" };
        s.push_str(&format!("{what} by xruns they were late in:\n{t}\n"));
    }
    if let Some(h) = &r.headroom {
        s.push_str(&headroom_section(h));
    }
    if let Some(o) = &r.other_sizes {
        s.push_str(&other_sizes_section(o, r));
    }
    if let Some(i) = &r.inside {
        s.push_str(&super::inside::section(i));
    }
    if let Some(f) = &r.forensics {
        s.push_str(&super::forensics::section(f));
    }
    if r.max_delayed_us > 0.0 {
        s.push_str(&format!(
            "largest driver delay the server recorded: {:.2} ms\n",
            r.max_delayed_us / 1000.0
        ));
    }
    if let Some(n) = &r.forensics_note {
        if !cfg.forensics || r.total_xruns() > 0 {
            s.push_str(&format!("note: {n}\n"));
        }
    }
    s.push_str(&format!("answer: {}\n", answer(r)));
    s
}

/// The xruns the Raspberry Pi's firmware flags name, "3 while the SoC throttled
/// (under-voltage)"; None where none do.
fn soc_clause(r: &WatchResults) -> Option<String> {
    let named: Vec<&WatchXrun> = r
        .xruns
        .iter()
        .filter(|x| !x.soc_throttled.is_empty())
        .collect();
    if named.is_empty() {
        return None;
    }
    let mut flags: Vec<&str> = Vec::new();
    for f in named.iter().flat_map(|x| &x.soc_throttled) {
        if !flags.contains(&f.as_str()) {
            flags.push(f);
        }
    }
    Some(format!(
        "{} while the SoC throttled ({})",
        named.len(),
        flags.join(", ")
    ))
}

/// The firmware's throttled flags over the watch: which xruns fell while the SoC slowed
/// itself, and how the word went. None off a Pi, and on a Pi whose flags stayed clear.
fn soc_line(r: &WatchResults) -> Option<String> {
    let t = r.soc_throttle.as_ref()?;
    let clause = soc_clause(r);
    if clause.is_none() && t.changes.is_empty() && t.first == 0 {
        return None;
    }
    let word = if t.changes.is_empty() {
        format!("get_throttled 0x{:x} all along", t.first)
    } else {
        format!(
            "get_throttled 0x{:x} at the start, 0x{:x} at the end ({} change{})",
            t.first,
            t.last,
            t.changes.len(),
            if t.changes.len() == 1 { "" } else { "s" }
        )
    };
    let which: Vec<String> = r
        .xruns
        .iter()
        .filter(|x| !x.soc_throttled.is_empty())
        .take(10)
        .map(|x| x.index.to_string())
        .collect();
    Some(match clause {
        Some(c) => format!(
            "SoC: of {} xruns, {c}: #{}{}; {word}",
            r.xruns.len(),
            which.join(", #"),
            if which.len() == 10 { ", …" } else { "" }
        ),
        None => format!("SoC: no xrun fell while the firmware flags showed throttling; {word}"),
    })
}

/// How many xruns came before the trace began.
fn set_up_xruns(r: &WatchResults) -> usize {
    r.traced_from_ns
        .map_or(0, |from| r.xruns.iter().filter(|x| x.at_ns < from).count())
}

/// The xruns that came while `--forensics` set up its trace, said as such: that second is
/// the watcher's own (the ring buffer's resize), and no trace explains them.
fn during_set_up(r: &WatchResults) -> Option<String> {
    let from = r.traced_from_ns?;
    let k = set_up_xruns(r);
    (k > 0).then(|| {
        super::style::wrap(
            &format!(
                "{k} of these came in the first {:.1} s, while xrunlab set up its trace (the ring buffer's resize): no trace covers {}",
                from as f64 / 1e9,
                if k == 1 { "it" } else { "them" }
            ),
            2,
        ) + "\n"
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::watch::{LoadSamples, WatchGap};

    #[test]
    fn other_sizes_say_when_the_model_does_not_give_back_the_size_watched() {
        let est = |frames, xruns: f64, watched| SizeEstimate {
            frames,
            xruns,
            low: crate::measure::predict::poisson_low(xruns, 0.05),
            high: crate::measure::predict::poisson_high(xruns, 0.05),
            watched,
            rough: false,
        };
        let mut o = OtherSizes {
            frames: 256,
            rate: 48000,
            period_ns: 5_333_333,
            cycles: 112_500,
            span_ns: 600_000_000_000,
            sampled: false,
            sizes: vec![est(256, 0.0, true), est(512, 0.0, false)],
        };
        let r = results(Vec::new());
        let s = other_sizes_section(&o, &r);
        let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(flat.contains("at 512 none seen (at most 3.7)"), "{s}");
        assert!(!s.contains("does not give back"), "{s}");
        o.sizes[0] = est(256, 91.0, true);
        let s = other_sizes_section(&o, &r);
        assert!(s.contains("does not give back"), "{s}");
        assert!(s.lines().all(|l| l.chars().count() <= 80), "{s}");
    }

    fn results(xruns: Vec<WatchXrun>) -> WatchResults {
        WatchResults {
            server: ServerInfo {
                kind: "jackd2".into(),
                name: "default".into(),
                version: "1.9.21".into(),
                rate: 48000,
                frames: 256,
            },
            watched_ns: 600_000_000_000,
            xruns,
            dsp_load: LoadSamples {
                samples: 10,
                mean_pct: 12.4,
                max_pct: 80.2,
            },
            ..WatchResults::default()
        }
    }

    fn x(i: u64, delayed_us: f64) -> WatchXrun {
        WatchXrun {
            index: i,
            at_ns: i * 1_000_000_000,
            wall: "2026-11-26T14:03:22.120Z".into(),
            frame: 1000 * i,
            cycle: 1000 * i / 256,
            delayed_us,
            dsp_load_pct: 50.0,
            late: None,
            late_by_ns: None,
            node_run: None,
            soc_throttled: Vec::new(),
        }
    }

    #[test]
    fn xruns_while_the_pi_throttled_are_named_in_the_summary_and_the_answer() {
        // Under-voltage came between the readings at 1.5 s and 2.5 s and stayed: xruns 2
        // and 3 fall in or after it, xrun 1 before.
        let mut r = results(vec![x(1, 0.0), x(2, 0.0), x(3, 0.0)]);
        r.soc_throttle = Some(
            serde_json::from_str(
                r#"{"first":0,"last":65537,"changes":[{"since_ns":1500000000,"at_ns":2500000000,"word":65537}]}"#,
            )
            .unwrap(),
        );
        let t = r.soc_throttle.clone().unwrap();
        for x in &mut r.xruns {
            x.soc_throttled = t.during(x.at_ns).into_iter().map(String::from).collect();
        }
        assert!(r.xruns[0].soc_throttled.is_empty());
        let cfg = WatchConfig {
            server: Default::default(),
            server_name: None,
            duration_ns: None,
            follow: false,
            forensics: false,
            sample_ns: 0,
        };
        let s = summary(&cfg, &r, Status::Complete);
        assert!(
            s.contains("SoC: of 3 xruns, 2 while the SoC throttled (under-voltage): #2, #3;"),
            "{s}"
        );
        assert!(
            s.contains("0x0 at the start, 0x10001 at the end (1 change)"),
            "{s}"
        );
        assert!(
            answer(&r).contains("2 while the SoC throttled (under-voltage)"),
            "{}",
            answer(&r)
        );
        // Off a Pi, or with the flags clear all along, nothing is said.
        r.soc_throttle = None;
        for x in &mut r.xruns {
            x.soc_throttled.clear();
        }
        assert!(!summary(&cfg, &r, Status::Complete).contains("SoC"));
    }

    #[test]
    fn a_clean_watch_says_so() {
        let a = answer(&results(vec![]));
        assert_eq!(
            a,
            "No xruns in 10 min on jackd2 'default' at 256/48000: the session ran clean (DSP load mean 12 %, max 80 %)."
        );
    }

    #[test]
    fn xruns_are_counted_with_rate_delay_and_gaps() {
        let mut r = results(vec![x(1, 0.0), x(2, 1500.0), x(3, 0.0)]);
        r.gaps.push(WatchGap {
            from_ns: 1,
            to_ns: Some(2),
        });
        let a = answer(&r);
        assert!(a.starts_with("3 xruns in 10 min on jackd2 'default' at 256/48000 (0.3/min) (the server was away once); 1 came with a late driver wake-up (worst 1.50 ms)"), "{a}");
        let line = xrun_line(&r.xruns[1], &r.server);
        assert_eq!(
            line,
            "14:03:22.120  xrun 2  256/48000  cycle 7  driver 1.50 ms late  DSP 50 %"
        );
        let s = summary(
            &WatchConfig {
                server: Default::default(),
                server_name: None,
                duration_ns: None,
                follow: true,
                forensics: false,
                sample_ns: 0,
            },
            &r,
            Status::Complete,
        );
        assert!(s.contains("server away from 1 s to 1 s"), "{s}");
        assert!(s.ends_with(&format!("answer: {a}\n")));
    }

    fn late(culprit: &str) -> LateClient {
        LateClient {
            name: "synth".into(),
            tid: 7,
            process: String::new(),
            pid: 0,
            wake_delay_ns: 6_000_000,
            busy_ns: 100_000,
            run_ns: 100_000,
            usual_wake_delay_ns: 20_000,
            usual_busy_ns: 100_000,
            usual_run_ns: 100_000,
            excess_ns: 5_980_000,
            woke_late: true,
            culprit: Some(culprit.into()),
            culprit_ns: 6_000_000,
            span_ns: None,
            inside: None,
            class: None,
        }
    }

    #[test]
    fn xruns_while_the_trace_was_set_up_are_said_to_be_so() {
        let mut r = results(vec![x(1, 0.0), x(2, 0.0), x(3, 0.0)]);
        assert_eq!(during_set_up(&r), None, "no trace, nothing to say");
        r.traced_from_ns = Some(500_000_000);
        assert_eq!(during_set_up(&r), None, "none before the trace began");
        r.traced_from_ns = Some(2_500_000_000);
        let l = during_set_up(&r).expect("a line");
        assert!(
            l.starts_with("2 of these came in the first 2.5 s, while xrunlab set up its trace"),
            "{l}"
        );
        assert!(l.ends_with("no trace covers them\n"), "{l}");
        let a = answer(&r);
        assert!(
            a.starts_with("3 xruns in 10 min on jackd2 'default' at 256/48000 (0.3/min, 2 while xrunlab set up its trace);"),
            "{a}"
        );
    }

    #[test]
    fn two_runs_of_one_program_behind_most_xruns_are_named_as_that_program() {
        let xs = [
            "python3[812] rt:95",
            "python3[812] rt:95",
            "python3[977] rt:95",
            "irq 45 xhci_hcd",
        ]
        .iter()
        .enumerate()
        .map(|(i, c)| WatchXrun {
            late: Some(late(c)),
            ..x(i as u64 + 1, 0.0)
        })
        .collect();
        let a = answer(&results(xs));
        assert!(
            a.contains("all while 'synth' woke late (usual delay 20.0 µs, worst 6000.0 µs) behind python3 rt:95 (2 processes) on its CPU"),
            "{a}"
        );
        assert_eq!(
            without_pids("JACK client jalv[15462]: jalv[15496] rt:80"),
            "JACK client jalv: jalv rt:80"
        );
        assert_eq!(without_pids("irq 45 xhci_hcd [x]"), "irq 45 xhci_hcd [x]");
    }
}
