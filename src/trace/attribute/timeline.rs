//! What ran on each CPU: a trace's events folded into non-overlapping segments per CPU, with
//! each thread's switch-ins, wake-ups and priority.

use super::Window;
use crate::trace::parse::{Event, Kind};
use std::collections::HashMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Owner {
    Task { pid: i32, prio: i32 },
    Irq(i32),
    Softirq(u8),
    Timer(u32),
    Unknown,
}

#[derive(Debug, Clone, Copy)]
struct Seg {
    start: u64,
    end: u64,
    owner: Owner,
    /// Events were lost just before this segment's state was known again.
    lost: bool,
}

/// What ran on each CPU, as non-overlapping segments in time order.
pub struct Timeline {
    cpus: HashMap<u16, Vec<Seg>>,
    /// Per thread: (time, CPU) of each switch-in and each sched_waking.
    pub(super) switch_in: HashMap<i32, Vec<(u64, u16)>>,
    pub(super) waking: HashMap<i32, Vec<u64>>,
    /// Per thread: when it went to sleep (switched out not runnable), and whether
    /// uninterruptibly (D).
    pub(super) sleeps: HashMap<i32, Vec<(u64, bool)>>,
    /// Per thread: each sched_waking's time and the task current where it was raised (the
    /// waker, or what an interrupt that woke it interrupted).
    pub(super) woken_by: HashMap<i32, Vec<(u64, i32)>>,
    /// Per thread: the priority it was last switched in with.
    pub(super) prio: HashMap<i32, i32>,
}

impl Timeline {
    /// Build from events in any order (trace_pipe merges CPUs; a late reader or a lost batch
    /// can leave them out of order across CPUs).
    pub fn build(events: &[Event], tids: &[i32]) -> Timeline {
        let mut per_cpu: HashMap<u16, Vec<&Event>> = HashMap::new();
        let mut waking: HashMap<i32, Vec<u64>> = HashMap::new();
        let mut sleeps: HashMap<i32, Vec<(u64, bool)>> = HashMap::new();
        let mut woken_by: HashMap<i32, Vec<(u64, i32)>> = HashMap::new();
        // Every task's latest priority in time (events come CPU after CPU, and a thread
        // starts as SCHED_OTHER before it is made FIFO): a switch the kernel did not trace
        // has to take it from elsewhere, and a window compares it with its culprits'.
        let mut latest: HashMap<i32, (u64, i32)> = HashMap::new();
        let mut seen = |pid: i32, t: u64, p: i32| {
            let e = latest.entry(pid).or_insert((t, p));
            if t >= e.0 {
                *e = (t, p);
            }
        };
        // Per target CPU, every task's wake-ups: the earliest a switch not traced can be,
        // and the priority the task had then.
        let mut wakes_to: HashMap<u16, Vec<(u64, i32, i32)>> = HashMap::new();
        for e in events {
            match e.kind {
                Kind::Switch {
                    prev_pid,
                    prev_prio,
                    prev_runnable,
                    prev_blocked,
                    next_pid,
                    next_prio,
                } => {
                    if !prev_runnable && tids.contains(&prev_pid) {
                        sleeps
                            .entry(prev_pid)
                            .or_default()
                            .push((e.ts_ns, prev_blocked));
                    }
                    seen(prev_pid, e.ts_ns, prev_prio);
                    seen(next_pid, e.ts_ns, next_prio);
                }
                Kind::Waking {
                    pid,
                    prio: p,
                    target_cpu,
                } => {
                    seen(pid, e.ts_ns, p);
                    wakes_to
                        .entry(target_cpu)
                        .or_default()
                        .push((e.ts_ns, pid, p));
                    if tids.contains(&pid) {
                        waking.entry(pid).or_default().push(e.ts_ns);
                        woken_by.entry(pid).or_default().push((e.ts_ns, e.pid));
                    }
                }
                _ => {}
            }
            per_cpu.entry(e.cpu).or_default().push(e);
        }
        let prio: HashMap<i32, i32> = latest.into_iter().map(|(k, (_, p))| (k, p)).collect();
        let mut switch_in: HashMap<i32, Vec<(u64, u16)>> = HashMap::new();
        let cpus = per_cpu
            .into_iter()
            .map(|(cpu, mut evs)| {
                evs.sort_by_key(|e| e.ts_ns);
                let mut wakes = wakes_to.remove(&cpu).unwrap_or_default();
                wakes.sort_unstable();
                let segs = segments(&evs, &wakes, &prio, |pid, t| {
                    if tids.contains(&pid) {
                        switch_in.entry(pid).or_default().push((t, cpu));
                    }
                });
                (cpu, segs)
            })
            .collect();
        for v in switch_in.values_mut() {
            v.sort_unstable();
        }
        for v in waking.values_mut() {
            v.sort_unstable();
        }
        for v in sleeps.values_mut() {
            v.sort_unstable();
        }
        for v in woken_by.values_mut() {
            v.sort_unstable();
        }
        Timeline {
            cpus,
            switch_in,
            waking,
            sleeps,
            woken_by,
            prio,
        }
    }

    /// The share of `cpu`'s time real-time tasks (FIFO, RR, DEADLINE) held in `[a, b)`, of
    /// the part the trace knows; None when it knows less than a quarter of it.
    pub(super) fn rt_share(&self, cpu: u16, a: u64, b: u64) -> Option<f64> {
        let (mut known, mut rt) = (0u64, 0u64);
        self.walk(cpu, a, b, |x, y, o, lost| {
            if lost || o == Owner::Unknown {
                return;
            }
            known += y - x;
            if matches!(o, Owner::Task { pid, prio } if pid != 0 && prio < 100) {
                rt += y - x;
            }
        });
        (known > 0 && known >= (b - a) / 4).then(|| rt as f64 / known as f64)
    }

    /// What ran on `cpu` in [a, b), interval by interval in time order: `f(from, to, owner,
    /// lost)`; nobody is known before the CPU's first event.
    pub(super) fn walk(&self, cpu: u16, a: u64, b: u64, mut f: impl FnMut(u64, u64, Owner, bool)) {
        if b <= a {
            return;
        }
        let Some(segs) = self.cpus.get(&cpu) else {
            f(a, b, Owner::Unknown, false);
            return;
        };
        if segs.first().is_none_or(|s| s.start > a) {
            f(
                a,
                segs.first().map_or(b, |s| s.start.min(b)),
                Owner::Unknown,
                false,
            );
        }
        let first = segs.partition_point(|s| s.end <= a);
        for s in &segs[first..] {
            if s.start >= b {
                break;
            }
            f(s.start.max(a), s.end.min(b), s.owner, s.lost);
        }
    }

    /// Time per owner on `cpu` in [a, b), and whether lost events touch it.
    pub(super) fn split(&self, cpu: u16, a: u64, b: u64) -> (Vec<(Owner, u64)>, bool) {
        let mut out: Vec<(Owner, u64)> = Vec::new();
        let mut lost = false;
        self.walk(cpu, a, b, |from, to, o, l| {
            lost |= l;
            if to <= from {
                return;
            }
            match out.iter_mut().find(|(x, _)| *x == o) {
                Some((_, n)) => *n += to - from,
                None => out.push((o, to - from)),
            }
        });
        (out, lost)
    }

    pub(super) fn cpu_of(&self, w: &Window) -> Option<u16> {
        if let Some(c) = w.cpu {
            return Some(c as u16);
        }
        let v = self.switch_in.get(&w.tid)?;
        let i = v.partition_point(|&(t, _)| t <= w.wake_ns);
        v.get(i.checked_sub(1)?).map(|&(_, c)| c)
    }
}

/// One CPU's events (in time order) as segments, calling `switched_in(pid, time)` at each
/// task's start.
///
/// A task's start is its `sched_switch` or, where the kernel traced none, the first event
/// recorded while it was current (each event's `pid`): this VM's kernel (6.18) never traces
/// a switch out of idle (nor out of its init's threads), so a task woken on an idle CPU — a
/// burst, our own thread — is seen first by its own events. It started after the CPU's previous event and after its
/// own last wake-up towards this CPU (`wakes`: time, pid and prio, in time order), with the
/// priority it had then (else its latest, `prio`): an idle CPU
/// switches as soon as the interrupt that woke the task returns, or as soon as the remote
/// wake-up reaches it. After lost events nobody is known until the first event whose task
/// is known.
fn segments(
    evs: &[&Event],
    wakes: &[(u64, i32, i32)],
    prio: &HashMap<i32, i32>,
    mut switched_in: impl FnMut(i32, u64),
) -> Vec<Seg> {
    let mut out: Vec<Seg> = Vec::with_capacity(evs.len() / 2 + 1);
    let mut task: Option<Owner> = None;
    let mut stack: Vec<Owner> = Vec::new();
    let mut lost = false;
    let mut last: Option<u64> = None;
    let push = |out: &mut Vec<Seg>, start: u64, end: u64, owner: Owner, lost: bool| {
        if end <= start {
            return;
        }
        if let Some(p) = out.last_mut() {
            if p.owner == owner && p.end == start && p.lost == lost {
                p.end = end;
                return;
            }
        }
        out.push(Seg {
            start,
            end,
            owner,
            lost,
        });
    };
    let (mut next_wake, mut woken) = (0usize, HashMap::<i32, (u64, i32)>::new());
    let task_of = |pid: i32, woken: &HashMap<i32, (u64, i32)>| Owner::Task {
        pid,
        prio: woken
            .get(&pid)
            .map(|w| w.1)
            .or_else(|| prio.get(&pid).copied())
            .unwrap_or(120),
    };
    for e in evs {
        let current = match task {
            Some(Owner::Task { pid, .. }) => Some(pid),
            _ => None,
        };
        let names_task = e.pid >= 0 && !matches!(e.kind, Kind::Lost { .. });
        if names_task && current.is_some_and(|p| p != e.pid) {
            while let Some(&(t, pid, p)) = wakes.get(next_wake).filter(|w| w.0 <= e.ts_ns) {
                woken.insert(pid, (t, p));
                next_wake += 1;
            }
            let at = last
                .unwrap_or(e.ts_ns)
                .max(woken.get(&e.pid).map_or(0, |w| w.0));
            if let Some(t0) = last {
                let o = stack.last().copied().or(task).unwrap_or(Owner::Unknown);
                push(&mut out, t0, at, o, false);
            }
            last = Some(at);
            // No interrupt nests across a switch: what was open ended unseen.
            task = Some(task_of(e.pid, &woken));
            stack.clear();
            switched_in(e.pid, at);
        }
        if let Some(t0) = last {
            // Lost events happened somewhere since the previous event: nobody is known there.
            let (owner, l) = if matches!(e.kind, Kind::Lost { .. }) {
                (Owner::Unknown, true)
            } else {
                let o = stack.last().copied().or(task).unwrap_or(Owner::Unknown);
                (o, lost && task.is_none())
            };
            push(&mut out, t0, e.ts_ns, owner, l);
        }
        if names_task && current.is_none() {
            // Known again from here (the CPU's first event, or the first after a loss).
            task = Some(task_of(e.pid, &woken));
            lost = false;
            switched_in(e.pid, e.ts_ns);
        }
        last = Some(e.ts_ns);
        let pop = |stack: &mut Vec<Owner>, o: Owner| {
            if let Some(i) = stack.iter().rposition(|x| *x == o) {
                stack.truncate(i);
            }
        };
        match e.kind {
            Kind::Lost { .. } => {
                task = None;
                stack.clear();
                lost = true;
            }
            Kind::Switch {
                next_pid,
                next_prio,
                ..
            } => {
                task = Some(Owner::Task {
                    pid: next_pid,
                    prio: next_prio,
                });
                stack.clear();
                lost = false;
                switched_in(next_pid, e.ts_ns);
            }
            Kind::IrqEntry { irq } => stack.push(Owner::Irq(irq)),
            Kind::IrqExit { irq } => pop(&mut stack, Owner::Irq(irq)),
            Kind::SoftirqEntry { vec } => stack.push(Owner::Softirq(vec)),
            Kind::SoftirqExit { vec } => pop(&mut stack, Owner::Softirq(vec)),
            Kind::TimerEntry { function } => stack.push(Owner::Timer(function)),
            Kind::TimerExit => {
                if let Some(i) = stack.iter().rposition(|x| matches!(x, Owner::Timer(_))) {
                    stack.truncate(i);
                }
            }
            Kind::Waking { .. } | Kind::Wakeup { .. } | Kind::Migrate { .. } => {}
        }
    }
    if let Some(t0) = last {
        let owner = stack.last().copied().or(task).unwrap_or(Owner::Unknown);
        push(&mut out, t0, u64::MAX, owner, lost && task.is_none());
    }
    out
}
