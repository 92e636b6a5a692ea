//! `watch --forensics` on PipeWire (docs/methods.md "Watch"): the profiler names the late
//! node and its signal, awake and finish times; the trace says what ran on its CPU then.
//!
//! The node's thread is found in the trace, with no more than the profiler gives: a
//! node's `awake` time is taken by its own data thread inside its process callback, and
//! its `finish` by the same thread just before it goes back to sleep. So the node's thread
//! is a thread of a PipeWire client or of the server (`trace::clients::identify`) whose run
//! (woken → asleep, `clients::runs`, switches the kernel did not trace included) spans
//! `awake` and ends at about `finish`. One xrun's answer can be ambiguous (the server's
//! thread still running when a follower wakes); each node's thread is the one most of its
//! xruns agree on, and it serves the xruns where none was clear (a node never seen awake).

use super::super::clients::{self, LateClient};
use super::super::types::{NodeRun, WatchXrun};
use crate::trace::{AudioRole, Recording, Window};
use std::collections::HashMap;

/// How far a run may end before the node's `finish` and still be its thread's (the trace's
/// switch and the profiler's clock read are the same clock, a few µs apart).
const FINISH_SLACK_NS: u64 = 50_000;

/// The thread whose run spans `awake` and ends nearest after `finish` (the latest one when
/// the node was not seen finished); None when no run spans it, or when two threads fit
/// equally well (within `FINISH_SLACK_NS` of each other).
pub fn thread_at(
    runs: &HashMap<i32, Vec<clients::Run>>,
    awake: u64,
    finish: Option<u64>,
) -> Option<i32> {
    let mut fits: Vec<(u64, i32)> = Vec::new();
    for (&tid, rs) in runs {
        for r in rs
            .iter()
            .filter(|r| r.start_ns <= awake && awake <= r.end_ns)
        {
            let score = match finish {
                Some(f) if r.end_ns + FINISH_SLACK_NS < f => continue,
                Some(f) => r.end_ns.abs_diff(f),
                // Still running at the cycle's end: the longest run is the late one.
                None => u64::MAX - r.end_ns,
            };
            fits.push((score, tid));
        }
    }
    fits.sort_unstable();
    match fits.as_slice() {
        [] => None,
        [(_, t)] => Some(*t),
        [(a, t), (b, _), ..] => (b - a > FINISH_SLACK_NS).then_some(*t),
    }
}

/// How soon after a node's signal its thread is woken: the server (or the node before)
/// writes its eventfd at the signal time, and the wake-up follows within microseconds.
const WOKEN_NS: u64 = 100_000;

/// The one thread woken within `WOKEN_NS` after `signal`; None when none or several were
/// (nodes signalled together).
pub fn woken_at(runs: &HashMap<i32, Vec<clients::Run>>, signal: u64) -> Option<i32> {
    let mut woken = runs.iter().filter(|(_, rs)| {
        rs.iter()
            .any(|r| r.waking_ns >= signal && r.waking_ns <= signal + WOKEN_NS)
    });
    match (woken.next(), woken.next()) {
        (Some((&t, _)), None) => Some(t),
        _ => None,
    }
}

/// Each node's thread: the one most of its xruns' runs point at.
pub fn node_threads(
    runs: &HashMap<i32, Vec<clients::Run>>,
    xruns: &[WatchXrun],
) -> HashMap<String, i32> {
    let mut votes: HashMap<(String, i32), usize> = HashMap::new();
    for x in xruns {
        let (Some(l), Some(n)) = (&x.late, &x.node_run) else {
            continue;
        };
        // This cycle's run, and the cycle before for a node not yet running.
        let seen = n.awake_ns.map(|a| (a, n.finish_ns));
        // Its thread was running when it wrote that finish, and slept right after.
        let before = n.prev_finish_ns.map(|f| (f, Some(f)));
        let mut found: Vec<i32> = seen
            .into_iter()
            .chain(before)
            .filter_map(|(awake, finish)| thread_at(runs, awake, finish))
            .collect();
        if n.awake_ns.is_none() {
            // Not yet running at the deadline: the thread its signal woke.
            found.extend(woken_at(runs, n.signal_ns));
        }
        for tid in found {
            *votes.entry((l.name.clone(), tid)).or_default() += 1;
        }
    }
    let mut best: HashMap<String, (i32, usize)> = HashMap::new();
    for ((name, tid), n) in votes {
        let b = best.entry(name).or_insert((tid, 0));
        if n > b.1 || (n == b.1 && tid < b.0) {
            *b = (tid, n);
        }
    }
    best.into_iter().map(|(k, (t, _))| (k, t)).collect()
}

/// How long after its signal a node never seen awake may have first run.
const LATE_RUN_NS: u64 = 1_000_000_000;

/// The window of a late node's run: woken at its signal, running from awake, until it
/// finished (or the cycle's end when it was not seen finished). A node never seen awake
/// runs, by its thread's runs (`rs`), from its first run after the signal to that run's end.
pub fn window(id: u64, tid: i32, n: &NodeRun, rs: &[clients::Run]) -> Window {
    let traced = || {
        rs.iter()
            .find(|r| r.start_ns >= n.signal_ns && r.start_ns <= n.signal_ns + LATE_RUN_NS)
    };
    let (wake, end) = match (n.awake_ns, n.finish_ns) {
        (Some(a), f) => (a, f.unwrap_or(n.deadline_ns)),
        (None, _) => match traced() {
            Some(r) => (r.start_ns, r.end_ns),
            None => (n.deadline_ns, n.deadline_ns),
        },
    };
    let end = end.max(n.signal_ns);
    let wake = wake.clamp(n.signal_ns, end);
    Window {
        id,
        tid,
        cpu: None,
        t_ideal_ns: n.signal_ns,
        wake_ns: wake,
        end_ns: end,
        own_cpu_ns: None,
        shared_thread: false,
    }
}

/// The PipeWire clients' and server's threads among those the trace names: each one's
/// process, and whether it is the daemon's.
fn pipewire_threads(recording: &Recording) -> HashMap<i32, (i32, bool)> {
    use crate::trace::parse::Kind;
    let mut tids: Vec<i32> = recording
        .trace
        .events
        .iter()
        .flat_map(|e| match e.kind {
            Kind::Switch {
                prev_pid, next_pid, ..
            } => [prev_pid, next_pid],
            _ => [e.pid, e.pid],
        })
        .filter(|&t| t > 0)
        .collect();
    tids.sort_unstable();
    tids.dedup();
    let own = std::process::id() as i32;
    crate::trace::clients::identify(&crate::system::Root::default(), &tids, own)
        .into_iter()
        .filter(|(_, c)| {
            matches!(
                c.role,
                AudioRole::PipewireClient | AudioRole::PipewireServer
            )
        })
        .map(|(tid, c)| (tid, (c.pid, c.role == AudioRole::PipewireServer)))
        .collect()
}

/// What `--forensics` adds to a PipeWire watch: each late node's thread (written into its
/// xruns' `late.tid` and the node's timing), the attribution of its late run (the
/// `forensics` section and each `late.culprit`), and the warnings that go with it.
pub fn explain(
    recording: &Recording,
    xruns: &mut [WatchXrun],
    timings: &mut [clients::ClientTiming],
) -> (crate::trace::Forensics, Vec<String>) {
    let pids = pipewire_threads(recording);
    let tids: Vec<i32> = pids.keys().copied().collect();
    let runs = super::super::runs::runs(&recording.trace, &tids, &recording.coverage);
    let threads = node_threads(&runs, xruns);
    let mut windows = Vec::new();
    let mut unknown = 0;
    for x in xruns.iter_mut() {
        let (Some(l), Some(n)) = (x.late.as_mut(), x.node_run) else {
            continue;
        };
        let Some(&tid) = threads.get(&l.name) else {
            unknown += 1;
            continue;
        };
        l.tid = tid;
        l.pid = pids.get(&tid).map_or(0, |p| p.0);
        l.process = process_name(l.pid);
        let rs = runs.get(&tid).map(Vec::as_slice).unwrap_or_default();
        let mut w = window(x.index, tid, &n, rs);
        // The daemon's data thread runs every node of the daemon (drivers, adapters, a
        // filter-chain's plugins): busy with the others while one waits.
        w.shared_thread = pids.get(&tid).is_some_and(|p| p.1);
        if n.awake_ns.is_none() && w.wake_ns < w.end_ns {
            // Never seen awake: the trace has when its thread first ran after the signal.
            l.wake_delay_ns = w.wake_ns - n.signal_ns;
            l.excess_ns = l
                .excess_ns
                .max(l.wake_delay_ns.saturating_sub(l.usual_wake_delay_ns));
        }
        windows.push(w);
    }
    for t in timings.iter_mut() {
        if let Some(&tid) = threads.get(&t.name) {
            t.tid = tid;
            t.pid = pids.get(&tid).map_or(0, |p| p.0);
            t.process = process_name(t.pid);
        }
    }
    // The profiler's busy time is wall time: the node's own work is its own thread's share.
    let busy = |_: &LateClient, w: &crate::trace::WindowReport| {
        let own: u64 = w
            .after_wake
            .iter()
            .filter(|s| s.culprit.kind == crate::trace::CulpritKind::SelfThread)
            .map(|s| s.ns)
            .sum();
        own * 10 >= w.end_ns.saturating_sub(w.wake_ns) * 9
    };
    let mut namer = clients::Namer::new();
    let f = recording.explain_each("xrun", &windows, &clients::our_threads(), &mut |w| {
        namer.name(w, xruns, &busy)
    });
    let mut warnings = recording.warnings(&f);
    if unknown > 0 {
        warnings.push(format!(
            "forensics: {unknown} xrun(s) name a node whose thread the trace did not show running \
             from its wake-up to its finish (a node never seen awake, or a run the flight \
             recorder did not keep): what ran on its CPU is not said for them"
        ));
    }
    (f, warnings)
}

/// A node's process by its comm, to stand beside the node's name; empty once it is gone.
fn process_name(pid: i32) -> String {
    if pid <= 0 {
        return String::new();
    }
    crate::system::Root::default()
        .read(&format!("/proc/{pid}/comm"))
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::watch::clients::Run;

    fn run(start: u64, end: u64) -> Run {
        Run {
            waking_ns: start,
            start_ns: start,
            end_ns: end,
            busy_ns: end - start,
            open: false,
        }
    }

    fn node(awake: u64, finish: Option<u64>) -> NodeRun {
        NodeRun {
            signal_ns: awake.saturating_sub(10_000),
            awake_ns: Some(awake),
            finish_ns: finish,
            prev_finish_ns: None,
            deadline_ns: awake + 5_000_000,
        }
    }

    #[test]
    fn the_nodes_thread_runs_from_awake_to_about_finish() {
        let mut runs = HashMap::new();
        // The server's thread: it signalled the node and went to sleep soon after.
        runs.insert(10, vec![run(0, 1_020_000)]);
        // The node's: woken at 1.01 ms, asleep just after its finish at 9 ms.
        runs.insert(20, vec![run(1_010_000, 9_000_030)]);
        // Another client's, asleep all along.
        runs.insert(30, vec![run(20_000_000, 20_100_000)]);
        assert_eq!(thread_at(&runs, 1_015_000, Some(9_000_000)), Some(20));
        // Not seen finished: the run that lasted longest.
        assert_eq!(thread_at(&runs, 1_015_000, None), Some(20));
        // Nothing spans awake: no thread.
        assert_eq!(thread_at(&runs, 15_000_000, Some(16_000_000)), None);
        // Woken within microseconds of a signal at 1.0 ms: the node's thread.
        assert_eq!(woken_at(&runs, 1_000_000), Some(20));
        assert_eq!(woken_at(&runs, 5_000_000), None);
        // Two threads that fit alike: ambiguous, no answer.
        runs.insert(40, vec![run(1_000_000, 9_000_010)]);
        assert_eq!(thread_at(&runs, 1_015_000, Some(9_000_000)), None);
        // Two woken at one signal (nodes signalled together): neither.
        assert_eq!(woken_at(&runs, 1_000_000), None);
    }

    #[test]
    fn each_node_takes_the_thread_most_of_its_xruns_point_at() {
        let mut runs = HashMap::new();
        runs.insert(
            20,
            vec![run(1_000, 9_000_000), run(100_000_000, 104_000_000)],
        );
        runs.insert(
            50,
            vec![run(200_000_000, 204_000_000), run(300_000_000, 304_000_000)],
        );
        let late = |name: &str| LateClient {
            name: name.into(),
            tid: 0,
            process: String::new(),
            pid: 0,
            wake_delay_ns: 0,
            busy_ns: 0,
            run_ns: 0,
            usual_wake_delay_ns: 0,
            usual_busy_ns: 0,
            usual_run_ns: 0,
            excess_ns: 0,
            woke_late: false,
            culprit: None,
            culprit_ns: 0,
            span_ns: None,
            inside: None,
            class: None,
        };
        let x = |i: u64, name: &str, n: NodeRun| WatchXrun {
            index: i,
            at_ns: 0,
            wall: String::new(),
            frame: 0,
            cycle: 0,
            delayed_us: 0.0,
            dsp_load_pct: 0.0,
            late: Some(late(name)),
            late_by_ns: None,
            node_run: Some(n),
            soc_throttled: Vec::new(),
        };
        let xs = vec![
            x(1, "slow", node(2_000, Some(9_000_000))),
            x(2, "slow", node(100_010_000, Some(104_000_000))),
            // One xrun whose run another thread happened to fit.
            x(3, "slow", node(200_010_000, Some(204_000_000))),
            x(4, "other", node(300_010_000, Some(304_000_000))),
        ];
        let t = node_threads(&runs, &xs);
        assert_eq!(t.get("slow"), Some(&20));
        assert_eq!(t.get("other"), Some(&50));
        // A node never seen awake votes with the cycle before, whose finish it still showed
        // (nothing was woken at its signal here).
        let never = NodeRun {
            signal_ns: 110_000_000,
            awake_ns: None,
            finish_ns: None,
            prev_finish_ns: Some(104_000_000),
            deadline_ns: 115_000_000,
        };
        let t = node_threads(&runs, &[x(5, "late-waker", never)]);
        assert_eq!(t.get("late-waker"), Some(&20));
        // Its window: woken at the signal, running from awake, until the finish (or the
        // cycle's end when unfinished).
        let n = node(2_000_000, None);
        let w = window(7, 20, &n, &[]);
        assert_eq!(
            (w.t_ideal_ns, w.wake_ns, w.end_ns),
            (1_990_000, 2_000_000, n.deadline_ns)
        );
        // Never seen awake: its thread's first run after the signal is the late run.
        let rs = [run(90_000_000, 90_100_000), run(125_000_000, 125_050_000)];
        let w = window(8, 20, &never, &rs);
        assert_eq!(
            (w.t_ideal_ns, w.wake_ns, w.end_ns),
            (110_000_000, 125_000_000, 125_050_000)
        );
        // No such run in the trace: up to the deadline, its wake-up unknown.
        let w = window(9, 20, &never, &rs[..1]);
        assert_eq!((w.wake_ns, w.end_ns), (115_000_000, 115_000_000));
    }
}
