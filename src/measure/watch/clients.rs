//! Per-client timing of a JACK session from a kernel trace (`watch --forensics`,
//! docs/methods.md "Watch"): each client's real-time thread wakes (`sched_waking`), runs
//! (`sched_switch` in and out, preemptions summed) and sleeps again once per cycle. That
//! run is the client's cycle: its wake-up delay (waking → first on CPU) and its busy time
//! (time on CPU until it sleeps). An xrun's late client is the one whose run around the
//! notification (woken before it, ended at most two periods before it) exceeds its own usual
//! figures the most; the rest of the trace says what ran
//! on its CPU instead (`trace::attribute`).
//!
//! Pure functions over the trace; the threads are found in `/proc` by
//! [`super::names::session_threads`].

use super::runs::{processes_of, runs_with};
use crate::trace::parse::{untraced_switch_ins, Kind};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

pub use super::names::{ClientThread, NamedBy};

pub use super::cycles::Run;

/// Count and p50 / p99 / max of a set of durations, ns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Timing {
    pub count: u64,
    pub p50: u64,
    pub p99: u64,
    pub max: u64,
}

impl Timing {
    pub fn of(mut v: Vec<u64>) -> Timing {
        if v.is_empty() {
            return Timing::default();
        }
        v.sort_unstable();
        let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
        Timing {
            count: v.len() as u64,
            p50: at(0.5),
            p99: at(0.99),
            max: *v.last().expect("not empty"),
        }
    }
}

/// A client's timing over the whole watch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ClientTiming {
    /// The JACK client's (or PipeWire node's) name, else the process's (`named_by`).
    pub name: String,
    pub pid: i32,
    pub tid: i32,
    /// The process's comm (empty in results written before clients were named).
    #[serde(default)]
    pub process: String,
    #[serde(default)]
    pub named_by: NamedBy,
    pub busy_ns: Timing,
    /// First on CPU to asleep again (busy plus preemptions).
    pub run_ns: Timing,
    pub wake_delay_ns: Timing,
    /// Xruns it was named late in.
    pub xruns_late: u64,
}

/// The client named late in one xrun.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LateClient {
    /// As in [`ClientTiming`]: the client's name when it was established.
    pub name: String,
    pub tid: i32,
    /// Its process: comm and pid (empty and 0 when not known).
    #[serde(default)]
    pub process: String,
    #[serde(default)]
    pub pid: i32,
    /// Its run around the xrun.
    pub wake_delay_ns: u64,
    pub busy_ns: u64,
    pub run_ns: u64,
    /// Its usual (median) figures.
    pub usual_wake_delay_ns: u64,
    pub usual_busy_ns: u64,
    pub usual_run_ns: u64,
    /// By how much it exceeded its usual figures (the larger of the two excesses).
    pub excess_ns: u64,
    /// It woke late (the wake-up delay exceeded more than its run did), else it ran long
    /// (busy, or kept off the CPU once running).
    pub woke_late: bool,
    /// What took its CPU most in that run (from the attribution), with the time it took.
    #[serde(default)]
    pub culprit: Option<String>,
    #[serde(default)]
    pub culprit_ns: u64,
    /// Its run's first time on CPU and end (absolute CLOCK_MONOTONIC ns), for the samples
    /// of what ran inside it (`inside`); not kept in the result.
    #[serde(skip)]
    #[schemars(skip)]
    pub span_ns: Option<(u64, u64)>,
    /// `--forensics`: the code (plugin, host, library, kernel) that held its thread most in
    /// that run, from sampling it (`watch/inside.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inside: Option<super::inside::Held>,
    /// `--forensics`: the class of what made that run late (its own work, a real-time
    /// task, interrupts, a kernel thread, a wait on I/O or a lock, throttling, a quota, the
    /// host), from the attribution and the thread's settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<crate::trace::CulpritClass>,
}

impl ClientTiming {
    /// As the user knows it: `client (process[pid])`.
    pub fn who(&self) -> String {
        super::names::display(&self.name, &self.process, self.pid)
    }
}

impl LateClient {
    /// As the user knows it: `client (process[pid])`.
    pub fn who(&self) -> String {
        super::names::display(&self.name, &self.process, self.pid)
    }

    /// `'client' (process[pid])`, as prose quotes it.
    pub fn quoted(&self) -> String {
        let b = super::names::beside(&self.name, &self.process, self.pid);
        format!("'{}'{b}", self.name)
    }
}

/// How long after the late run an xrun's notification may arrive and still be matched to
/// it. jackd2 tells clients of an xrun from its non-real-time notification thread, and the
/// watcher's own notification thread is SCHED_OTHER too: on a loaded machine the callback
/// runs tens of milliseconds after the cycle, well past the two periods an unloaded one
/// needs (issue 29: with two compiles or `stress-ng --cpu 2` beside it, a third of the
/// bursts' xruns arrived after the late run's two periods and named no client, or the
/// server).
pub const NOTIFY_LAG_NS: u64 = 200_000_000;

/// The late client of an xrun notified at `at_ns` (absolute CLOCK_MONOTONIC) with period
/// `period_ns`: among each thread's runs woken before the notification, the one exceeding
/// its thread's usual figures (`usual`: median wake-up delay and run, per thread) the most —
/// by at least a twentieth of a period for a run that ended at most two periods before the
/// notification, and by at least half a period (enough to spoil a cycle on its own) for one
/// that ended up to [`NOTIFY_LAG_NS`] before it and after the previous xrun's notification
/// (`prev_ns`; a run that ended before that one was there to explain it, and taking it again
/// would blame a host stall's victim for the xruns after it): a notification that came late
/// still finds its cause, and ordinary jitter that far back is never taken for it.
/// Only threads that run in the graph's cycles (`per_cycle`) can be late for one.
/// Returns the thread's index in `threads` and the run.
pub fn late_client(
    threads: &[ClientThread],
    runs: &HashMap<i32, Vec<Run>>,
    usual: &[(u64, u64)],
    per_cycle: &[bool],
    at_ns: u64,
    prev_ns: u64,
    period_ns: u64,
) -> Option<(usize, Run, u64, bool)> {
    let mut best: Option<(usize, Run, u64, bool)> = None;
    for (i, t) in threads.iter().enumerate() {
        if !per_cycle[i] {
            continue;
        }
        let Some(rs) = runs.get(&t.tid) else { continue };
        let (uw, ur) = usual[i];
        // Runs are in end order: walk back from the notification over the lag.
        for r in rs.iter().rev() {
            if r.end_ns.saturating_add(NOTIFY_LAG_NS.max(2 * period_ns)) < at_ns {
                break;
            }
            if r.waking_ns > at_ns {
                continue;
            }
            let ran = r.run_ns().saturating_sub(ur);
            let woke = r.wake_delay_ns().saturating_sub(uw);
            let excess = ran.max(woke);
            // A twentieth of a period past its usual is jitter, not what made the cycle
            // late; further back only a run that could spoil a cycle by itself counts.
            let near = r.end_ns.saturating_add(2 * period_ns) >= at_ns;
            if !near && r.end_ns <= prev_ns {
                continue;
            }
            let least = if near { period_ns / 20 } else { period_ns / 2 };
            if excess >= least.max(1) && excess > best.as_ref().map_or(0, |b| b.2) {
                best = Some((i, *r, excess, woke > ran));
            }
        }
    }
    best
}

/// Whether a thread with these runs is one the graph wakes every cycle (a client's or the
/// server's process thread): it ran in at least half of the periods between its first and
/// last run. A client's other real-time threads (JACK's notification thread, a plugin's
/// worker) wake on their own schedule, and their "wake-up delay" — seconds between the
/// wake-up and the run of a thread that waits on a lock — says nothing about a cycle.
/// With a `coverage` (the times a flight recorder kept), the periods are counted within each
/// covered range only.
pub fn runs_every_cycle(rs: &[Run], period_ns: u64, coverage: &[(u64, u64)]) -> bool {
    let span = |rs: &[Run]| {
        let first = rs.iter().map(|r| r.start_ns).min();
        let last = rs.iter().map(|r| r.end_ns).max();
        match (first, last) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => 0,
        }
    };
    let spanned = if coverage.is_empty() {
        span(rs)
    } else {
        coverage
            .iter()
            .map(|&(a, b)| {
                let inside: Vec<Run> = rs
                    .iter()
                    .filter(|r| r.start_ns >= a && r.start_ns <= b)
                    .copied()
                    .collect();
                span(&inside)
            })
            .sum()
    };
    let periods = spanned / period_ns.max(1);
    rs.len() >= 10 && rs.len() as u64 * 2 >= periods
}

/// What `--forensics` adds to a watch.
pub struct Explained {
    pub timings: Vec<ClientTiming>,
    pub forensics: crate::trace::Forensics,
    pub warnings: Vec<String>,
    /// The near-miss histogram of the cycles the trace kept (`cycles::jack_headroom`); None
    /// when no server cycle thread was found in it.
    pub headroom: Option<super::cycles::Headroom>,
    /// Busy time per cycle of each thread the graph wakes every cycle.
    pub busy: Vec<super::cycles::BusyHistogram>,
    /// The cycle of the xrun whose late client was furthest past its usual figures.
    pub worst_cycle: Option<super::cycles::CycleTimeline>,
    /// The cycles the trace kept, for the other buffer sizes.
    pub sizes: super::sizes::SizesAcc,
}

/// What `--forensics` adds to a watch: each client's timing, the late client of each xrun
/// (written into `xruns`), the attribution of each late run (the `forensics` section), the
/// near-miss and busy histograms of the cycles the trace kept, with the warnings the
/// recording carries. `t0` is the watch's start (CLOCK_MONOTONIC).
pub fn explain(
    recording: &crate::trace::Recording,
    threads: &[ClientThread],
    xruns: &mut [super::WatchXrun],
    t0: u64,
    period_ns: u64,
) -> Explained {
    let tids: Vec<i32> = threads.iter().map(|t| t.tid).collect();
    let unseen = untraced_switch_ins(&recording.trace.events, &tids);
    let process = processes_of(threads);
    let all = runs_with(
        &recording.trace,
        &tids,
        &recording.coverage,
        &unseen,
        &process,
    );
    let mut timings: Vec<ClientTiming> = threads
        .iter()
        .map(|t| {
            let rs = all.get(&t.tid).map(Vec::as_slice).unwrap_or_default();
            ClientTiming {
                name: t.name.clone(),
                pid: t.pid,
                tid: t.tid,
                process: t.process.clone(),
                named_by: t.named_by,
                busy_ns: Timing::of(rs.iter().map(|r| r.busy_ns).collect()),
                run_ns: Timing::of(rs.iter().map(Run::run_ns).collect()),
                wake_delay_ns: Timing::of(rs.iter().map(Run::wake_delay_ns).collect()),
                xruns_late: 0,
            }
        })
        .collect();
    let usual: Vec<(u64, u64)> = timings
        .iter()
        .map(|t| (t.wake_delay_ns.p50, t.run_ns.p50))
        .collect();
    let per_cycle = in_graph(threads, &all, period_ns, &recording.coverage);
    let mut sizes = super::sizes::SizesAcc::default();
    let (headroom, busy) = cycles_of(
        threads,
        &all,
        &per_cycle,
        &recording.coverage,
        period_ns,
        &mut sizes,
    );
    if let Some(dir) = std::env::var_os(crate::trace::DUMP_ENV) {
        // A debugging aid, as the trace's own dump: the runs the cycles were rebuilt from.
        let _ = dump_runs(
            std::path::Path::new(&dir),
            threads,
            &all,
            &recording.coverage,
            period_ns,
        );
    }
    let runs_of = |t: &ClientThread| all.get(&t.tid).map(Vec::as_slice).unwrap_or_default();
    let mut windows = Vec::new();
    let mut prev = 0;
    let mut worst: Option<(u64, u64, usize, Run)> = None;
    for x in xruns.iter_mut() {
        let at = t0 + x.at_ns;
        let late = late_client(threads, &all, &usual, &per_cycle, at, prev, period_ns);
        prev = at;
        let Some((i, run, excess, woke_late)) = late else {
            continue;
        };
        if worst.is_none_or(|w| excess > w.0) {
            worst = Some((excess, x.index, i, run));
        }
        timings[i].xruns_late += 1;
        x.late = Some(late_record(
            &threads[i],
            run,
            usual[i],
            timings[i].busy_ns.p50,
            excess,
            woke_late,
        ));
        windows.push(crate::trace::Window {
            id: x.index,
            tid: threads[i].tid,
            cpu: None,
            t_ideal_ns: run.waking_ns,
            wake_ns: run.start_ns,
            end_ns: run.end_ns,
            own_cpu_ns: Some(run.busy_ns),
            shared_thread: false,
        });
    }
    let ours = our_threads();
    let mut namer = Namer::new();
    let own_work = |l: &LateClient, _: &crate::trace::WindowReport| l.busy_ns * 10 >= l.run_ns * 9;
    let f = recording.explain_each("xrun", &windows, &ours, &mut |w| {
        namer.name(w, xruns, &own_work)
    });
    let worst_cycle = worst.map(|(_, index, i, run)| {
        // The graph's threads, the late one among them (a thread woken every cycle by
        // definition, `late_client` names no other).
        let graph: Vec<usize> = (0..threads.len()).filter(|&k| per_cycle[k]).collect();
        let lanes: Vec<(&str, &[Run])> = graph
            .iter()
            .map(|&k| (threads[k].name.as_str(), runs_of(&threads[k])))
            .collect();
        let late_lane = graph.iter().position(|&k| k == i).unwrap_or(usize::MAX);
        let server = server_thread(threads, &all, &per_cycle).map(runs_of);
        super::cycles::jack_timeline(index, server, &lanes, (late_lane, run), period_ns)
    });
    let mut warnings = recording.warnings(&f);
    let mut unseen_cpus: Vec<u16> = unseen
        .iter()
        .filter(|e| matches!(e.kind, Kind::Switch { next_pid, .. } if tids.contains(&next_pid)))
        .map(|e| e.cpu)
        .collect();
    let n = unseen_cpus.len();
    unseen_cpus.sort_unstable();
    unseen_cpus.dedup();
    if n > 0 {
        let cpus: Vec<String> = unseen_cpus.iter().map(u16::to_string).collect();
        warnings.push(format!(
            "forensics: the kernel did not trace {n} switch(es) to the clients' threads (CPU {}; some kernels never trace a switch out of a CPU's idle task); those runs start at the CPU's previous event, so their wake-up delays read low",
            cpus.join(", ")
        ));
    }
    Explained {
        timings,
        forensics: f,
        warnings,
        headroom,
        busy,
        worst_cycle,
        sizes,
    }
}

/// Which threads the graph runs every cycle.
fn in_graph(
    threads: &[ClientThread],
    all: &HashMap<i32, Vec<Run>>,
    period_ns: u64,
    coverage: &[(u64, u64)],
) -> Vec<bool> {
    threads
        .iter()
        .map(|t| {
            // A thread found waiting on its client's semaphore is that client's process
            // thread, which the graph wakes every cycle it can: one so overloaded that
            // jackd skips it most cycles (it wakes a client only once it finished) runs in
            // fewer than half of them, and leaving it out of the graph hid every xrun it
            // caused (bench-watch-sizes at LOAD 70: 1519 xruns measured, 0 cycles missed).
            let rs = all.get(&t.tid).map(Vec::as_slice).unwrap_or_default();
            t.named_by == NamedBy::Semaphore || runs_every_cycle(rs, period_ns, coverage)
        })
        .collect()
}

/// The late client of the xrun at `at_ns` (after the one at `prev_ns`) from a look at the
/// trace while the watch goes on, for its live line: the same choice as [`explain`]'s,
/// over the look's range only, without the culprit. The end's explanation, over all that
/// was kept, is what the result records.
pub fn late_now(
    look: &crate::trace::Recording,
    threads: &[ClientThread],
    at_ns: u64,
    prev_ns: u64,
    period_ns: u64,
) -> Option<LateClient> {
    let tids: Vec<i32> = threads.iter().map(|t| t.tid).collect();
    let unseen = untraced_switch_ins(&look.trace.events, &tids);
    let all = runs_with(
        &look.trace,
        &tids,
        &look.coverage,
        &unseen,
        &processes_of(threads),
    );
    let runs = |t: &ClientThread| all.get(&t.tid).map(Vec::as_slice).unwrap_or_default();
    let usual: Vec<(u64, u64)> = threads
        .iter()
        .map(|t| {
            let rs = runs(t);
            (
                Timing::of(rs.iter().map(Run::wake_delay_ns).collect()).p50,
                Timing::of(rs.iter().map(Run::run_ns).collect()).p50,
            )
        })
        .collect();
    let per_cycle = in_graph(threads, &all, period_ns, &look.coverage);
    let (i, run, excess, woke_late) =
        late_client(threads, &all, &usual, &per_cycle, at_ns, prev_ns, period_ns)?;
    let usual_busy = Timing::of(runs(&threads[i]).iter().map(|r| r.busy_ns).collect()).p50;
    Some(late_record(
        &threads[i],
        run,
        usual[i],
        usual_busy,
        excess,
        woke_late,
    ))
}

/// The record of a late client: its run in the late cycle beside its usual figures.
fn late_record(
    t: &ClientThread,
    run: Run,
    (usual_wake, usual_run): (u64, u64),
    usual_busy: u64,
    excess: u64,
    woke_late: bool,
) -> LateClient {
    LateClient {
        name: t.name.clone(),
        tid: t.tid,
        process: t.process.clone(),
        pid: t.pid,
        wake_delay_ns: run.wake_delay_ns(),
        busy_ns: run.busy_ns,
        run_ns: run.run_ns(),
        usual_wake_delay_ns: usual_wake,
        usual_busy_ns: usual_busy,
        usual_run_ns: usual_run,
        excess_ns: excess,
        woke_late,
        culprit: None,
        culprit_ns: 0,
        span_ns: Some((run.start_ns, run.end_ns)),
        inside: None,
        class: None,
    }
}

/// Each thread's runs as text (`runs.txt` in `dir`): `period NS`, `cover A B` per kept
/// range, then `run TID NAME WAKING START END BUSY OPEN` in end order per thread.
fn dump_runs(
    dir: &std::path::Path,
    threads: &[ClientThread],
    all: &HashMap<i32, Vec<Run>>,
    coverage: &[(u64, u64)],
    period_ns: u64,
) -> std::io::Result<()> {
    use std::io::Write;
    std::fs::create_dir_all(dir)?;
    let mut f = std::io::BufWriter::new(std::fs::File::create(dir.join("runs.txt"))?);
    writeln!(f, "period {period_ns}")?;
    for (a, b) in coverage {
        writeln!(f, "cover {a} {b}")?;
    }
    for t in threads {
        for r in all.get(&t.tid).map(Vec::as_slice).unwrap_or_default() {
            writeln!(
                f,
                "run {} {} {} {} {} {} {}",
                t.tid,
                t.name.replace(' ', "_"),
                r.waking_ns,
                r.start_ns,
                r.end_ns,
                r.busy_ns,
                u8::from(r.open)
            )?;
        }
    }
    f.flush()
}

/// The server's cycle thread: of its threads the graph wakes every cycle, the one with the
/// most runs (jackd's driver thread; its other real-time threads wake on their own schedule).
fn server_thread<'a>(
    threads: &'a [ClientThread],
    all: &HashMap<i32, Vec<Run>>,
    per_cycle: &[bool],
) -> Option<&'a ClientThread> {
    threads
        .iter()
        .zip(per_cycle)
        .filter(|(t, &p)| p && t.name.starts_with("server:"))
        .map(|(t, _)| t)
        .max_by_key(|t| all.get(&t.tid).map_or(0, Vec::len))
}

/// Names each late client's culprit — what took its CPU most in its window, unless it did
/// not wake late and was `busy` on its own nearly all along (its own work: nothing took its
/// CPU) — and the class of its cause, window by window (by xrun index).
pub struct Namer {
    rt_runtime_share: Option<f64>,
    preemptible: bool,
    quota: HashMap<i32, bool>,
}

impl Namer {
    /// The machine's settings the classes need, read once.
    pub fn new() -> Namer {
        Namer {
            rt_runtime_share: crate::system::rt_runtime_share(),
            preemptible: crate::system::preemptible(),
            quota: HashMap::new(),
        }
    }

    pub fn name(
        &mut self,
        w: &crate::trace::WindowReport,
        xruns: &mut [super::WatchXrun],
        busy: &dyn Fn(&LateClient, &crate::trace::WindowReport) -> bool,
    ) {
        let Some(l) = xruns
            .iter_mut()
            .find(|x| x.index == w.id)
            .and_then(|x| x.late.as_mut())
        else {
            return;
        };
        let cpu_quota = *self
            .quota
            .entry(l.pid)
            .or_insert_with(|| crate::system::cpu_quota_of(l.pid));
        let env = crate::trace::ClassEnv {
            rt_runtime_share: self.rt_runtime_share,
            cpu_quota,
            preemptible: self.preemptible,
            usual_busy_ns: Some(l.usual_busy_ns),
        };
        let class = crate::trace::classify(w, &env);
        l.class = Some(class);
        if let Some(top) = w.top.first() {
            // Its own work: what else ran on its CPU did not make it late.
            if class != crate::trace::CulpritClass::OwnWork && (l.woke_late || !busy(l, w)) {
                l.culprit = Some(top.culprit.label());
                l.culprit_ns = top.ns;
            }
        }
    }
}

impl Default for Namer {
    fn default() -> Self {
        Namer::new()
    }
}

/// The threads of our own process (the watcher's: never a culprit of the session).
pub fn our_threads() -> Vec<i32> {
    std::fs::read_dir("/proc/self/task")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
                .collect()
        })
        .unwrap_or_default()
}

/// The near-miss histogram (from the server's cycle thread's wake-ups) and the busy
/// histograms from the threads' runs.
fn cycles_of(
    threads: &[ClientThread],
    all: &HashMap<i32, Vec<Run>>,
    per_cycle: &[bool],
    coverage: &[(u64, u64)],
    period_ns: u64,
    sizes: &mut super::sizes::SizesAcc,
) -> (
    Option<super::cycles::Headroom>,
    Vec<super::cycles::BusyHistogram>,
) {
    let runs_of = |t: &ClientThread| all.get(&t.tid).map(Vec::as_slice).unwrap_or_default();
    let graph: Vec<&ClientThread> = threads
        .iter()
        .zip(per_cycle)
        .filter(|(_, &p)| p)
        .map(|(t, _)| t)
        .collect();
    let server = server_thread(threads, all, per_cycle);
    let busy = graph
        .iter()
        .map(|t| super::cycles::busy_histogram(&t.name, runs_of(t), period_ns))
        .collect();
    let headroom = server.map(|s| {
        let clients: Vec<&[Run]> = graph
            .iter()
            .filter(|t| t.tid != s.tid)
            .map(|t| runs_of(t))
            .collect();
        super::cycles::jack_headroom(runs_of(s), &clients, coverage, period_ns, sizes)
    });
    (headroom.filter(|h| h.cycles > 0), busy)
}

#[cfg(test)]
mod tests {
    use super::super::runs::runs;
    use super::*;
    use crate::trace::parse::{Event, Trace};

    fn sw(ts: u64, prev: i32, runnable: bool, next: i32) -> Event {
        super::super::runs::tests::switch(ts, prev, if runnable { 'R' } else { 'S' }, next, 120)
    }

    fn wk(ts: u64, pid: i32) -> Event {
        Event {
            ts_ns: ts,
            cpu: 0,
            pid: 0,
            kind: Kind::Waking {
                pid,
                prio: 10,
                target_cpu: 0,
            },
        }
    }

    #[test]
    fn a_run_sums_its_time_on_cpu_and_ends_when_it_sleeps() {
        let mut trace = Trace::default();
        trace.events = vec![
            wk(100, 7),
            sw(110, 0, false, 7),
            sw(150, 7, true, 9), // preempted
            sw(170, 9, false, 7),
            sw(200, 7, false, 0), // asleep
            wk(1000, 7),
            sw(1300, 0, false, 7),
        ];
        let r = runs(&trace, &[7], &[]);
        assert_eq!(
            r[&7],
            vec![
                Run {
                    waking_ns: 100,
                    start_ns: 110,
                    end_ns: 200,
                    busy_ns: 40 + 30,
                    open: false
                },
                Run {
                    waking_ns: 1000,
                    start_ns: 1300,
                    end_ns: 1300,
                    busy_ns: 0,
                    open: true
                }
            ]
        );
        assert_eq!(r[&7][1].wake_delay_ns(), 300);
        // A thread already running when the trace began: its run starts with the trace.
        let mut trace = Trace::default();
        // (The first event on another CPU: this one's last switch did not put 3 there.)
        let mut first = sw(50, 3, true, 3);
        first.cpu = 1;
        trace.events = vec![first, sw(90, 7, false, 0)];
        let r = runs(&trace, &[7], &[]);
        assert_eq!(
            (r[&7][0].start_ns, r[&7][0].end_ns, r[&7][0].busy_ns),
            (50, 90, 40)
        );
    }

    #[test]
    fn a_switch_from_idle_the_kernel_did_not_trace_still_starts_a_run() {
        // CPU 1 as a 6.18 guest traces it: the switch out of idle never appears, but the
        // thread's own events (it wakes a client) and its sleep do.
        let on1 = |mut e: Event, pid: i32| {
            e.cpu = 1;
            e.pid = pid;
            e
        };
        let mut trace = Trace::default();
        trace.events = vec![
            on1(sw(0, 5, false, 0), 5),
            on1(wk(1_000, 7), 0),
            on1(wk(1_020, 8), 7),
            on1(sw(1_100, 7, false, 0), 7),
            on1(wk(6_000, 7), 0),
            on1(sw(6_500, 7, false, 0), 7),
        ];
        let unseen = untraced_switch_ins(&trace.events, &[7]);
        assert_eq!(unseen.len(), 2, "{unseen:?}");
        let r = runs(&trace, &[7], &[]);
        let got: Vec<_> = r[&7]
            .iter()
            .map(|r| (r.waking_ns, r.start_ns, r.end_ns, r.busy_ns))
            .collect();
        // Each run starts just after its wake-up, the CPU's event before (the earliest the
        // unseen switch can be), never at the trace's start, and ends at its sleep.
        assert_eq!(
            got,
            vec![(1_000, 1_001, 1_100, 99), (6_000, 6_001, 6_500, 499)]
        );
        // A CPU whose switches are all traced gets nothing invented.
        let mut traced = Trace::default();
        traced.events = vec![wk(100, 7), sw(110, 0, false, 7), sw(200, 7, false, 0)];
        assert!(untraced_switch_ins(&traced.events, &[7]).is_empty());
    }

    #[test]
    fn the_late_client_is_the_one_past_its_own_usual_figures() {
        let threads = vec![
            ClientThread {
                name: "busy-but-usual".into(),
                process: "python3".into(),
                named_by: NamedBy::Semaphore,
                pid: 1,
                tid: 1,
            },
            ClientThread {
                name: "slow".into(),
                process: "python3".into(),
                named_by: NamedBy::Semaphore,
                pid: 2,
                tid: 2,
            },
        ];
        let run = |s: u64, busy: u64| Run {
            waking_ns: s,
            start_ns: s,
            end_ns: s + busy,
            busy_ns: busy,
            open: false,
        };
        let mut m = HashMap::new();
        m.insert(1, vec![run(0, 4_000_000)]);
        m.insert(2, vec![run(0, 3_000_000)]);
        let usual = [(0, 4_000_000), (0, 100_000)];
        let (i, _, excess, woke) =
            late_client(&threads, &m, &usual, &[true, true], 5_000_000, 0, 5_333_333).unwrap();
        assert_eq!((i, excess, woke), (1, 2_900_000, false));
        // Nothing past its usual figures: nobody is named.
        let usual = [(0, 4_000_000), (0, 3_000_000)];
        assert!(
            late_client(&threads, &m, &usual, &[true, true], 5_000_000, 0, 5_333_333).is_none()
        );
        // Notified 50 ms after the slow run (a loaded machine's notification thread): the
        // run is still found, as it exceeded by more than half a period.
        let usual = [(0, 4_000_000), (0, 100_000)];
        let (i, _, _, _) = late_client(
            &threads,
            &m,
            &usual,
            &[true, true],
            55_000_000,
            0,
            5_333_333,
        )
        .unwrap();
        assert_eq!(i, 1);
        // That far back, jitter of a tenth of a period is not taken for the cause.
        let mut j = HashMap::new();
        j.insert(1, vec![run(0, 4_000_000)]);
        j.insert(2, vec![run(0, 600_000)]);
        assert!(late_client(
            &threads,
            &j,
            &usual,
            &[true, true],
            55_000_000,
            0,
            5_333_333
        )
        .is_none());
        // Nor a run that ended before the previous xrun's notification: that one had it.
        assert!(late_client(
            &threads,
            &m,
            &usual,
            &[true, true],
            55_000_000,
            20_000_000,
            5_333_333
        )
        .is_none());
        // Past the lag nothing is matched at all.
        assert!(late_client(
            &threads,
            &m,
            &usual,
            &[true, true],
            300_000_000,
            0,
            5_333_333
        )
        .is_none());
        // A thread the graph does not wake every cycle is never the late client.
        let usual = [(0, 4_000_000), (0, 100_000)];
        assert!(late_client(
            &threads,
            &m,
            &usual,
            &[true, false],
            5_000_000,
            0,
            5_333_333
        )
        .is_none());
    }

    #[test]
    fn only_threads_woken_every_cycle_are_graph_threads() {
        let p = 5_333_333;
        let every: Vec<Run> = (0..100)
            .map(|k| Run {
                waking_ns: k * p,
                start_ns: k * p,
                end_ns: k * p + 10_000,
                busy_ns: 10_000,
                open: false,
            })
            .collect();
        assert!(runs_every_cycle(&every, p, &[]));
        // The same thread seen in one cycle of ten: a notification thread, not the graph's.
        let sparse: Vec<Run> = every.iter().step_by(10).copied().collect();
        assert!(!runs_every_cycle(&sparse, p, &[]));
        assert!(!runs_every_cycle(&every[..5], p, &[]));
        assert!(!runs_every_cycle(&[], p, &[]));
    }

    #[test]
    fn a_flight_recording_has_no_run_across_its_gaps() {
        let mut trace = Trace::default();
        trace.events = vec![wk(100, 7), sw(110, 0, false, 7), sw(5000, 7, false, 0)];
        // Read whole, the thread woke at 100 and slept at 5000.
        assert_eq!(runs(&trace, &[7], &[])[&7].len(), 1);
        // Kept in two parts, 200..4900 missing: its sleeps and wake-ups there are unknown,
        // so each part has its own run, neither spanning the gap.
        let r = runs(&trace, &[7], &[(0, 200), (4900, 6000)]);
        assert_eq!(r[&7].len(), 2);
        assert!(r[&7][0].open && r[&7][0].end_ns <= 200);
        assert_eq!((r[&7][1].start_ns, r[&7][1].end_ns), (4900, 5000));
    }

    #[test]
    fn a_graph_thread_seen_in_pinned_parts_still_runs_every_cycle() {
        let p = 5_333_333;
        let gap = 10_000 * p;
        let run = |t: u64| Run {
            waking_ns: t,
            start_ns: t,
            end_ns: t + 10_000,
            busy_ns: 10_000,
            open: false,
        };
        let rs: Vec<Run> = (0..100)
            .map(|k| run(k * p))
            .chain((0..100).map(|k| run(gap + k * p)))
            .collect();
        // Counted over the whole span it looks like a thread of one cycle in fifty.
        assert!(!runs_every_cycle(&rs, p, &[]));
        assert!(runs_every_cycle(
            &rs,
            p,
            &[(0, 100 * p), (gap, gap + 100 * p)]
        ));
    }

    #[test]
    fn timings_take_percentiles_of_what_they_are_given() {
        let t = Timing::of((1..=100).collect());
        assert_eq!((t.count, t.p50, t.p99, t.max), (100, 51, 99, 100));
        assert_eq!(Timing::of(vec![]), Timing::default());
    }
}
