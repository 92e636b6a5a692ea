//! Each session thread's runs — from a wake-up to the interruptible sleep that ends its
//! cycle — rebuilt from the trace's scheduler events (`watch --forensics`).

use super::cycles::Run;
use super::names::ClientThread;
use crate::trace::parse::{untraced_switch_ins, Kind, Trace};
use std::collections::HashMap;

/// Each thread's runs, from the trace's scheduler events; `coverage` is the times the trace
/// holds in full (empty: all of it). Runs are followed within each covered range only: a
/// wake-up before a gap and a switch after it are not one run.
pub fn runs(trace: &Trace, tids: &[i32], coverage: &[(u64, u64)]) -> HashMap<i32, Vec<Run>> {
    runs_with(
        trace,
        tids,
        coverage,
        &untraced_switch_ins(&trace.events, tids),
        &HashMap::new(),
    )
}

/// Every thread of the session threads' processes, by thread id: its process's pid. A
/// thread woken by another thread of its own process that is not itself a session thread
/// (a lock's holder) goes on with the same cycle (see `runs_in`).
pub fn processes_of(threads: &[ClientThread]) -> HashMap<i32, i32> {
    let mut out = HashMap::new();
    let mut pids: Vec<i32> = threads.iter().map(|t| t.pid).filter(|&p| p > 0).collect();
    pids.sort_unstable();
    pids.dedup();
    for pid in pids {
        let Ok(d) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for tid in d
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        {
            out.insert(tid, pid);
        }
    }
    out
}

/// [`runs`] with the switches the kernel did not trace (`unseen`) already found.
pub(super) fn runs_with(
    trace: &Trace,
    tids: &[i32],
    coverage: &[(u64, u64)],
    unseen: &[crate::trace::parse::Event],
    process: &HashMap<i32, i32>,
) -> HashMap<i32, Vec<Run>> {
    // An unseen switch goes before a seen event at the same time: it came first.
    let mut evs: Vec<_> = trace
        .events
        .iter()
        .filter(|e| match e.kind {
            Kind::Switch {
                prev_pid, next_pid, ..
            } => tids.contains(&prev_pid) || tids.contains(&next_pid),
            Kind::Waking { pid, .. } => tids.contains(&pid),
            _ => false,
        })
        .map(|e| (1, e))
        .chain(unseen.iter().map(|e| (0, e)))
        .collect();
    evs.sort_by_key(|&(seen, e)| (e.ts_ns, seen));
    let evs: Vec<_> = evs.into_iter().map(|(_, e)| e).collect();
    let mut out: HashMap<i32, Vec<Run>> = tids.iter().map(|&t| (t, Vec::new())).collect();
    if coverage.is_empty() {
        let first = trace.events.iter().map(|e| e.ts_ns).min().unwrap_or(0);
        runs_in(&evs, tids, process, first, &mut out);
        return out;
    }
    for &(a, b) in coverage {
        let from = evs.partition_point(|e| e.ts_ns < a);
        let to = evs.partition_point(|e| e.ts_ns <= b);
        runs_in(&evs[from..to], tids, process, a, &mut out);
    }
    out
}

/// The runs within one stretch of complete trace starting at `first`, appended to `out`.
/// A run ends when its thread sleeps interruptibly — unless the wake-up that follows comes
/// from another thread of its process (`process`) that is not a session thread: a lock it
/// waited on inside its cycle, which goes on.
fn runs_in(
    evs: &[&crate::trace::parse::Event],
    tids: &[i32],
    process: &HashMap<i32, i32>,
    first: u64,
    out: &mut HashMap<i32, Vec<Run>>,
) {
    #[derive(Clone, Copy)]
    struct Open {
        waking: u64,
        start: u64,
        last_in: Option<u64>,
        busy: u64,
    }
    let mut open: HashMap<i32, Open> = HashMap::new();
    // Asleep since the time given: ended there unless a sibling thread wakes it.
    let mut asleep: HashMap<i32, (Open, u64)> = HashMap::new();
    let close = |out: &mut HashMap<i32, Vec<Run>>, tid: i32, o: Open, end: u64| {
        out.entry(tid).or_default().push(Run {
            waking_ns: o.waking,
            start_ns: o.start,
            end_ns: end,
            busy_ns: o.busy,
            open: false,
        });
    };
    let sibling = |waker: i32, tid: i32| {
        waker > 0
            && !tids.contains(&waker)
            && process
                .get(&waker)
                .is_some_and(|p| process.get(&tid) == Some(p))
    };
    let mut woken: HashMap<i32, u64> = HashMap::new();
    // Threads already with a run in this stretch: one switched out first was running when
    // the stretch started.
    let mut seen: std::collections::HashSet<i32> = std::collections::HashSet::new();
    let mut last = first;
    for e in evs.iter().copied() {
        last = e.ts_ns;
        match e.kind {
            Kind::Waking { pid, .. } if !open.contains_key(&pid) => {
                if let Some((o, t)) = asleep.remove(&pid) {
                    if sibling(e.pid, pid) {
                        open.insert(pid, o);
                        continue;
                    }
                    close(out, pid, o, t);
                }
                woken.entry(pid).or_insert(e.ts_ns);
            }
            Kind::Switch {
                prev_pid,
                prev_runnable,
                prev_blocked,
                next_pid,
                ..
            } => {
                if tids.contains(&prev_pid)
                    && !open.contains_key(&prev_pid)
                    && !seen.contains(&prev_pid)
                {
                    // Running when the trace started: its run is known from there on.
                    open.insert(
                        prev_pid,
                        Open {
                            waking: first,
                            start: first,
                            last_in: Some(first),
                            busy: 0,
                        },
                    );
                }
                if let Some(o) = open.get_mut(&prev_pid) {
                    if let Some(t) = o.last_in.take() {
                        o.busy += e.ts_ns.saturating_sub(t);
                    }
                    // A cycle ends in an interruptible wait (the next cycle's semaphore,
                    // poll); an uninterruptible sleep (a page read in, I/O) is inside it.
                    if !prev_runnable && !prev_blocked {
                        let o = open.remove(&prev_pid).expect("present");
                        asleep.insert(prev_pid, (o, e.ts_ns));
                    }
                }
                if let Some((o, t)) = asleep.remove(&next_pid) {
                    // Back on the CPU with no wake-up traced: its run had ended.
                    close(out, next_pid, o, t);
                }
                if tids.contains(&next_pid) {
                    seen.insert(next_pid);
                    let o = open.entry(next_pid).or_insert_with(|| {
                        let w = woken.remove(&next_pid).unwrap_or(e.ts_ns);
                        Open {
                            waking: w.min(e.ts_ns),
                            start: e.ts_ns,
                            last_in: None,
                            busy: 0,
                        }
                    });
                    o.last_in = Some(e.ts_ns);
                }
            }
            _ => {}
        }
    }
    for (tid, (o, t)) in asleep {
        close(out, tid, o, t);
    }
    for (tid, o) in open {
        let busy = o.busy + o.last_in.map_or(0, |t| last.saturating_sub(t));
        out.entry(tid).or_default().push(Run {
            waking_ns: o.waking,
            start_ns: o.start,
            end_ns: last,
            busy_ns: busy,
            open: true,
        });
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::trace::parse::Event;

    /// A switch on CPU 0 from `prev` (left in `state`: R, S or D) to `next`, both at `prio`.
    pub(in crate::measure::watch) fn switch(
        ts: u64,
        prev: i32,
        state: char,
        next: i32,
        prio: i32,
    ) -> Event {
        Event {
            ts_ns: ts,
            cpu: 0,
            pid: prev,
            kind: Kind::Switch {
                prev_pid: prev,
                prev_prio: prio,
                prev_runnable: state == 'R',
                prev_blocked: state == 'D',
                next_pid: next,
                next_prio: prio,
            },
        }
    }

    fn sw(ts: u64, prev: i32, state: char, next: i32) -> Event {
        switch(ts, prev, state, next, 19)
    }

    fn wk(ts: u64, pid: i32, by: i32) -> Event {
        Event {
            ts_ns: ts,
            cpu: 0,
            pid: by,
            kind: Kind::Waking {
                pid,
                prio: 19,
                target_cpu: 0,
            },
        }
    }

    /// Thread 7 sleeps inside its cycle and is woken at 300: by a sibling of its process
    /// (8, a lock's holder), or from an I/O wait (D), its cycle goes on to 400; woken by a
    /// thread of another process (9, the next cycle's) after an interruptible sleep, its
    /// run had ended at 200.
    #[test]
    fn a_cycle_goes_on_through_a_wait_on_its_own_process_or_on_io() {
        let process: HashMap<i32, i32> = [(7, 40), (8, 40), (9, 50)].into_iter().collect();
        let one = Run {
            waking_ns: 100,
            start_ns: 110,
            end_ns: 400,
            busy_ns: 90 + 50,
            open: false,
        };
        for (state, waker, want) in [
            ('S', 8, vec![one]),
            ('D', 0, vec![one]),
            (
                'S',
                9,
                vec![
                    Run {
                        end_ns: 200,
                        busy_ns: 90,
                        ..one
                    },
                    Run {
                        waking_ns: 300,
                        start_ns: 350,
                        end_ns: 400,
                        busy_ns: 50,
                        open: false,
                    },
                ],
            ),
        ] {
            let mut trace = Trace::default();
            trace.events = vec![
                wk(100, 7, 9),
                sw(110, 0, 'S', 7),
                sw(200, 7, state, 0),
                wk(300, 7, waker),
                sw(350, 0, 'S', 7),
                sw(400, 7, 'S', 0),
            ];
            let r = runs_with(&trace, &[7], &[], &[], &process);
            assert_eq!(r[&7], want, "asleep in {state}, woken by {waker}");
        }
    }
}
