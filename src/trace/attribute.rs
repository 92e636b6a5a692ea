//! Who took the time of a late cycle (docs/methods.md "Forensics"): pure functions
//! from a parsed trace and the windows of the xruns (or latency spikes) to their culprits.
//!
//! Each traced CPU's events become a timeline of what ran there: the task between two
//! `sched_switch`es, minus the hard IRQs, softirqs and hrtimer callbacks nested in it. A
//! window `[t_ideal, wake]`, `[wake, end]` is split along that timeline. Time the trace cannot
//! give to anyone is `unaccounted`: before a CPU's first event or after events were lost until
//! its next event; tasks or idle while our timer was already due (the timer interrupt
//! preempts any task: the wake-up itself came late, a vCPU not run or interrupts held off); a
//! lower-priority task that kept the CPU while we were runnable (a non-preemptible kernel
//! section or a held vCPU, which the trace cannot tell apart); our thread "running" by the
//! trace beyond the CPU time it measured itself (steal), or before its own clock says it
//! woke.

use super::clients::AudioClient;
use super::parse::{Event, Kind, Trace, SOFTIRQ_NAMES};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// What took a share of a window.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum CulpritKind {
    /// The window's own thread running.
    #[serde(rename = "self")]
    SelfThread,
    /// Another thread of ours (an engine worker, a latency thread).
    Ours,
    /// Another task.
    Task,
    /// A hard IRQ handler, or an hrtimer callback (`irq` absent).
    Irq,
    Softirq,
    Idle,
    /// Time the trace cannot give to anyone (see the module doc).
    Unaccounted,
    /// The chain element (or track) that took the most time in an overload xrun's cycle,
    /// named from the engine's own probes; its time comes out of `self`.
    Element,
}

#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub struct Culprit {
    pub kind: CulpritKind,
    /// Comm of a task, action of an IRQ, vector of a softirq, "timer:FUNCTION".
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irq: Option<i32>,
    /// A task's priority as the scheduler saw it: `rt:N` (FIFO/RR priority N), `nice:N`, or
    /// `deadline`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prio: Option<String>,
    /// A task of another audio client (or the server) of the session: its process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<AudioClient>,
}

impl Culprit {
    fn simple(kind: CulpritKind, name: &str) -> Culprit {
        Culprit {
            kind,
            name: name.into(),
            pid: None,
            irq: None,
            prio: None,
            client: None,
        }
    }

    /// One short label for tables: `xrl-burst[1234] rt:90`, `irq 24 virtio0`, `softirq NET_RX`,
    /// `JACK client jalv[1234]: jalv[1236] rt:80`.
    pub fn label(&self) -> String {
        match self.kind {
            CulpritKind::Task | CulpritKind::Ours | CulpritKind::SelfThread => format!(
                "{}{}[{}]{}",
                self.client
                    .as_ref()
                    .map(|c| format!("{} {}[{}]: ", c.role.word(), c.process, c.pid))
                    .unwrap_or_default(),
                self.name,
                self.pid.unwrap_or(0),
                self.prio
                    .as_deref()
                    .map(|p| format!(" {p}"))
                    .unwrap_or_default()
            ),
            CulpritKind::Irq => match self.irq {
                Some(n) => format!("irq {n} {}", self.name),
                None => self.name.clone(),
            },
            CulpritKind::Softirq => format!("softirq {}", self.name),
            CulpritKind::Idle => "idle".into(),
            CulpritKind::Unaccounted => "unaccounted".into(),
            CulpritKind::Element => self.name.clone(),
        }
    }

    /// Takes time from us (everything but our own thread and an idle CPU).
    pub fn is_culprit(&self) -> bool {
        !matches!(self.kind, CulpritKind::SelfThread | CulpritKind::Idle)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Share {
    pub culprit: Culprit,
    pub ns: u64,
}

/// For a late wake-up: did the wake-up itself come late, or were we runnable and kept off
/// the CPU?
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum WakeVerdict {
    /// The timer or IRQ that should have woken us fired late (`sched_waking` long after
    /// t_ideal).
    WakeupLate,
    /// We were woken in time and runnable, but something else had the CPU.
    NotScheduled,
    /// No `sched_waking` of the thread in the window: it did not sleep (a backlog) or the
    /// event was lost.
    NoWakeupTraced,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Wakeup {
    pub verdict: WakeVerdict,
    /// sched_waking − t_ideal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wakeup_delay_ns: Option<u64>,
    /// wake − sched_waking: runnable and not running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runnable_ns: Option<u64>,
    /// The largest culprit while we were runnable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behind: Option<Culprit>,
}

/// One late cycle (or latency spike) to explain, in CLOCK_MONOTONIC ns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    /// The cycle (or sample) number, carried into the report.
    pub id: u64,
    pub tid: i32,
    /// The CPU the thread is pinned to; else found from the trace.
    pub cpu: Option<usize>,
    pub t_ideal_ns: u64,
    pub wake_ns: u64,
    pub end_ns: u64,
    /// CPU time the thread measured itself in `[wake, end]`, when known.
    pub own_cpu_ns: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WindowReport {
    pub id: u64,
    pub tid: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<usize>,
    pub t_ideal_ns: u64,
    pub wake_ns: u64,
    pub end_ns: u64,
    /// What ran on the CPU in [t_ideal, wake], largest first.
    pub before_wake: Vec<Share>,
    /// What ran on the CPU in [wake, end], largest first.
    pub after_wake: Vec<Share>,
    /// The largest culprits of both parts together (at most 3).
    pub top: Vec<Share>,
    pub wakeup: Wakeup,
    /// Events were lost on this CPU during the window: its figures are a lower bound.
    #[serde(default)]
    pub lost_events: bool,
}

/// One line of the culprit table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CulpritRow {
    pub culprit: Culprit,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<usize>,
    /// Windows in which it was the top culprit.
    pub explained: u64,
    /// Windows in which it took any time.
    pub present: u64,
    /// Time it took from us, summed over the windows.
    pub total_ns: u64,
    /// Its largest share of one window.
    pub worst_ns: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Owner {
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
    switch_in: HashMap<i32, Vec<(u64, u16)>>,
    waking: HashMap<i32, Vec<u64>>,
    /// Per thread: the priority it was last switched in with.
    prio: HashMap<i32, i32>,
}

impl Timeline {
    /// Build from events in any order (trace_pipe merges CPUs; a late reader or a lost batch
    /// can leave them out of order across CPUs).
    pub fn build(events: &[Event], tids: &[i32]) -> Timeline {
        let mut per_cpu: HashMap<u16, Vec<&Event>> = HashMap::new();
        let mut waking: HashMap<i32, Vec<u64>> = HashMap::new();
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
                    next_pid,
                    next_prio,
                    ..
                } => {
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
        Timeline {
            cpus,
            switch_in,
            waking,
            prio,
        }
    }

    /// What ran on `cpu` in [a, b), interval by interval in time order: `f(from, to, owner,
    /// lost)`; nobody is known before the CPU's first event.
    fn walk(&self, cpu: u16, a: u64, b: u64, mut f: impl FnMut(u64, u64, Owner, bool)) {
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
    fn split(&self, cpu: u16, a: u64, b: u64) -> (Vec<(Owner, u64)>, bool) {
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

    fn cpu_of(&self, w: &Window) -> Option<u16> {
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

/// The kernel's prio back from [`prio_label`] (lower runs first).
pub fn prio_rank(label: &str) -> Option<i32> {
    if label == "deadline" {
        return Some(-1);
    }
    if let Some(n) = label.strip_prefix("rt:") {
        return n.parse::<i32>().ok().map(|n| 99 - n);
    }
    label
        .strip_prefix("nice:")?
        .parse::<i32>()
        .ok()
        .map(|n| 120 + n)
}

/// `rt:N`, `nice:N` or `deadline` from the kernel's prio as sched_switch prints it.
pub fn prio_label(prio: i32) -> String {
    match prio {
        p if p < 0 => "deadline".into(),
        p if p < 100 => format!("rt:{}", 99 - p),
        p => format!("nice:{}", p - 120),
    }
}

fn culprit(trace: &Trace, o: Owner, tid: i32, ours: &[i32]) -> Culprit {
    match o {
        Owner::Task { pid: 0, .. } => Culprit::simple(CulpritKind::Idle, "idle"),
        Owner::Task { pid, prio } => Culprit {
            kind: if pid == tid {
                CulpritKind::SelfThread
            } else if ours.contains(&pid) {
                CulpritKind::Ours
            } else {
                CulpritKind::Task
            },
            name: trace.comms.get(&pid).cloned().unwrap_or_else(|| "?".into()),
            pid: Some(pid),
            irq: None,
            prio: Some(prio_label(prio)),
            client: None,
        },
        Owner::Irq(n) => Culprit {
            kind: CulpritKind::Irq,
            name: trace
                .irq_names
                .get(&n)
                .cloned()
                .unwrap_or_else(|| "?".into()),
            pid: None,
            irq: Some(n),
            prio: None,
            client: None,
        },
        Owner::Softirq(v) => Culprit::simple(
            CulpritKind::Softirq,
            SOFTIRQ_NAMES.get(v as usize).copied().unwrap_or("?"),
        ),
        Owner::Timer(f) => Culprit::simple(
            CulpritKind::Irq,
            &format!(
                "timer:{}",
                trace.functions.get(f as usize).map_or("?", String::as_str)
            ),
        ),
        Owner::Unknown => Culprit::simple(CulpritKind::Unaccounted, "unaccounted"),
    }
}

fn shares(trace: &Trace, parts: &[(Owner, u64)], tid: i32, ours: &[i32]) -> Vec<Share> {
    let mut v: Vec<Share> = Vec::new();
    for &(o, ns) in parts {
        let c = culprit(trace, o, tid, ours);
        match v.iter_mut().find(|s| s.culprit == c) {
            Some(s) => s.ns += ns,
            None => v.push(Share { culprit: c, ns }),
        }
    }
    sort_shares(&mut v);
    v
}

fn sort_shares(v: &mut [Share]) {
    v.sort_by(|a, b| b.ns.cmp(&a.ns).then_with(|| a.culprit.cmp(&b.culprit)));
}

/// The time of one kind of culprit among `v`.
pub fn kind_ns(v: &[Share], kind: CulpritKind) -> u64 {
    v.iter()
        .filter(|s| s.culprit.kind == kind)
        .map(|s| s.ns)
        .sum()
}

fn move_to_unaccounted(v: &mut Vec<Share>, kind: CulpritKind, ns: u64) {
    let mut left = ns;
    for s in v.iter_mut().filter(|s| s.culprit.kind == kind) {
        let take = left.min(s.ns);
        s.ns -= take;
        left -= take;
    }
    let moved = ns - left;
    if moved > 0 {
        let u = Culprit::simple(CulpritKind::Unaccounted, "unaccounted");
        match v.iter_mut().find(|s| s.culprit == u) {
            Some(s) => s.ns += moved,
            None => v.push(Share {
                culprit: u,
                ns: moved,
            }),
        }
    }
    v.retain(|s| s.ns > 0);
    sort_shares(v);
}

/// The text format's times are whole µs: a wake-up that came just after t_ideal may read up
/// to 1 µs before it.
const RESOLUTION_NS: u64 = 1_000;

/// From a thread's switch-in to its own clock read after the wake-up, at most (the burst
/// fixture shows 10 µs).
const SWITCH_TO_WAKE_NS: u64 = 20_000;

/// The parts of a window the attribution's rules tell apart (module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// [t_ideal, our sched_waking]: the timer was due and had not woken us.
    Due,
    /// [sched_waking, wake]: runnable and not running.
    Runnable,
    /// [wake, end].
    Running,
}

/// Where a window's phases begin and end, on which CPU, and our priority there.
struct Bounds {
    cpu: Option<u16>,
    waking: Option<u64>,
    due_until: u64,
    wake: u64,
    end: u64,
    own_rank: Option<i32>,
}

impl Bounds {
    fn of(tl: &Timeline, w: &Window) -> Bounds {
        let wake = w.wake_ns.max(w.t_ideal_ns);
        let waking = tl.waking.get(&w.tid).and_then(|v| {
            let i = v.partition_point(|&t| t <= wake);
            let t = *v.get(i.checked_sub(1)?)?;
            (t + RESOLUTION_NS >= w.t_ideal_ns).then_some(t)
        });
        Bounds {
            cpu: tl.cpu_of(w),
            waking,
            due_until: waking.unwrap_or(w.t_ideal_ns).clamp(w.t_ideal_ns, wake),
            wake,
            end: w.end_ns.max(wake),
            own_rank: tl.prio.get(&w.tid).copied(),
        }
    }

    fn phases(&self, t_ideal: u64) -> [(Phase, u64, u64); 3] {
        [
            (Phase::Due, t_ideal, self.due_until),
            (Phase::Runnable, self.due_until, self.wake),
            (Phase::Running, self.wake, self.end),
        ]
    }
}

/// Time `c` took in `phase` that is not its fault, and so unaccounted:
/// - until the wake-up, tasks (and idle) could not have held it back: the timer interrupt
///   preempts any task. Their time is the wake-up coming late (a vCPU the hypervisor did not
///   run, interrupts held off); IRQs and softirqs that ran meanwhile keep their names;
/// - runnable, we preempt any task of lower priority at once: one that kept the CPU did so
///   in a non-preemptible kernel section or while the hypervisor held the vCPU (the trace
///   cannot tell them apart).
fn not_to_blame(phase: Phase, c: &Culprit, own_rank: Option<i32>) -> bool {
    match phase {
        Phase::Due => matches!(
            c.kind,
            CulpritKind::Idle | CulpritKind::Task | CulpritKind::Ours
        ),
        Phase::Runnable => {
            c.kind == CulpritKind::Task
                && own_rank.is_some_and(|own| {
                    c.prio
                        .as_deref()
                        .and_then(prio_rank)
                        .is_some_and(|r| r > own)
                })
        }
        Phase::Running => false,
    }
}

fn reclassify(v: Vec<Share>, phase: Phase, own_rank: Option<i32>) -> Vec<Share> {
    let v = v
        .into_iter()
        .map(|mut s| {
            if not_to_blame(phase, &s.culprit, own_rank) {
                s.culprit = Culprit::simple(CulpritKind::Unaccounted, "unaccounted");
            }
            s
        })
        .collect();
    merge(Vec::new(), v)
}

/// Explain one window.
pub fn explain(trace: &Trace, tl: &Timeline, w: &Window, ours: &[i32]) -> WindowReport {
    let Bounds {
        cpu,
        waking,
        due_until,
        wake,
        end,
        own_rank,
    } = Bounds::of(tl, w);
    let (mut before, mut after, mut lost) = (Vec::new(), Vec::new(), false);
    let mut runnable_top: Option<Culprit> = None;
    if let Some(c) = cpu {
        let split = |a, b| {
            let (parts, l) = tl.split(c, a, b);
            (shares(trace, &parts, w.tid, ours), l)
        };
        let (b1, l1) = split(w.t_ideal_ns, due_until);
        let b1 = reclassify(b1, Phase::Due, own_rank);
        let (b2, l2) = split(due_until, wake);
        let b2 = reclassify(b2, Phase::Runnable, own_rank);
        runnable_top = b2
            .iter()
            .find(|s| s.culprit.is_culprit())
            .map(|s| s.culprit.clone());
        before = merge(b1, b2);
        // On the CPU by the trace but not yet awake by its own clock: the vCPU was not run,
        // or a switch the trace did not show came later than it could place it (see
        // `segments`). Only the few µs from switch-in to the thread's clock read are ours.
        let early = kind_ns(&before, CulpritKind::SelfThread);
        if early > SWITCH_TO_WAKE_NS {
            move_to_unaccounted(
                &mut before,
                CulpritKind::SelfThread,
                early - SWITCH_TO_WAKE_NS,
            );
        }
        let (mut a, l3) = split(wake, end);
        if let Some(own) = w.own_cpu_ns {
            let seen = kind_ns(&a, CulpritKind::SelfThread);
            // Beyond a few µs of clock reads at each end: time we were "running" without CPU.
            if seen > own + 4 * RESOLUTION_NS {
                move_to_unaccounted(&mut a, CulpritKind::SelfThread, seen - own);
            }
        }
        after = a;
        lost = l1 || l2 || l3;
    } else {
        let u = Culprit::simple(CulpritKind::Unaccounted, "unaccounted");
        if wake > w.t_ideal_ns {
            before.push(Share {
                culprit: u.clone(),
                ns: wake - w.t_ideal_ns,
            });
        }
        if end > wake {
            after.push(Share {
                culprit: u,
                ns: end - wake,
            });
        }
    }
    let top = top_of(&before, &after);
    let wakeup = match waking {
        None => Wakeup {
            verdict: WakeVerdict::NoWakeupTraced,
            wakeup_delay_ns: None,
            runnable_ns: None,
            behind: None,
        },
        Some(t) => {
            let delay = t.saturating_sub(w.t_ideal_ns);
            let runnable = wake.saturating_sub(t);
            let behind = runnable_top.clone();
            Wakeup {
                verdict: if delay > runnable {
                    WakeVerdict::WakeupLate
                } else {
                    WakeVerdict::NotScheduled
                },
                wakeup_delay_ns: Some(delay),
                runnable_ns: Some(runnable),
                behind,
            }
        }
    };
    WindowReport {
        id: w.id,
        tid: w.tid,
        cpu: cpu.map(usize::from),
        t_ideal_ns: w.t_ideal_ns,
        wake_ns: w.wake_ns,
        end_ns: w.end_ns,
        before_wake: before,
        after_wake: after,
        top,
        wakeup,
        lost_events: lost,
    }
}

fn merge(mut a: Vec<Share>, b: Vec<Share>) -> Vec<Share> {
    for s in b {
        match a.iter_mut().find(|x| x.culprit == s.culprit) {
            Some(x) => x.ns += s.ns,
            None => a.push(s),
        }
    }
    sort_shares(&mut a);
    a
}

/// The largest culprits of both parts of a window together (at most 3).
pub fn top_of(before: &[Share], after: &[Share]) -> Vec<Share> {
    let mut top = merge(before.to_vec(), after.to_vec());
    top.retain(|s| s.culprit.is_culprit());
    top.truncate(3);
    top
}

/// Explain every window; `ours` are all our thread ids.
pub fn attribute(trace: &Trace, windows: &[Window], ours: &[i32]) -> Vec<WindowReport> {
    attribute_all(trace, windows, ours).0
}

/// Explain every window, and lay out the worst one (the longest from t_ideal to its end, the
/// first of equals) interval by interval.
pub fn attribute_all(
    trace: &Trace,
    windows: &[Window],
    ours: &[i32],
) -> (Vec<WindowReport>, Option<WindowTimeline>) {
    let mut tids: Vec<i32> = windows.iter().map(|w| w.tid).collect();
    tids.extend_from_slice(ours);
    tids.sort_unstable();
    tids.dedup();
    let tl = Timeline::build(&trace.events, &tids);
    let reports = windows
        .iter()
        .map(|w| explain(trace, &tl, w, ours))
        .collect();
    let worst = windows
        .iter()
        .enumerate()
        .max_by_key(|(i, w)| {
            (
                w.end_ns.max(w.wake_ns).saturating_sub(w.t_ideal_ns),
                std::cmp::Reverse(*i),
            )
        })
        .map(|(_, w)| window_timeline(trace, &tl, w, ours));
    (reports, worst)
}

/// Most intervals a [`WindowTimeline`] keeps (a window of milliseconds under an IRQ storm
/// can hold thousands; the figure cannot show more anyway).
pub const MAX_SPANS: usize = 2000;

/// One interval of a window: who had the CPU, in ns after the window's t_ideal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Span {
    pub from_ns: u64,
    pub to_ns: u64,
    pub culprit: Culprit,
}

/// What ran on a window's CPU interval by interval, named as the attribution names it (time
/// that is not a task's fault is unaccounted here too); only our thread's steal, which the
/// trace cannot place in time, still shows as `self`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WindowTimeline {
    pub id: u64,
    pub tid: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<usize>,
    pub t_ideal_ns: u64,
    pub wake_ns: u64,
    pub end_ns: u64,
    /// Our `sched_waking`, when traced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waking_ns: Option<u64>,
    /// In time order, adjacent intervals of the same culprit joined.
    pub spans: Vec<Span>,
    /// Intervals past the first [`MAX_SPANS`], left out.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub spans_dropped: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Lay out one window interval by interval.
pub fn window_timeline(trace: &Trace, tl: &Timeline, w: &Window, ours: &[i32]) -> WindowTimeline {
    let b = Bounds::of(tl, w);
    let t0 = w.t_ideal_ns;
    let mut spans: Vec<Span> = Vec::new();
    let mut dropped = 0u64;
    let mut push = |from: u64, to: u64, c: Culprit| {
        if to <= from {
            return;
        }
        let (from, to) = (from - t0, to - t0);
        let full = spans.len() >= MAX_SPANS;
        match spans.last_mut() {
            Some(l) if l.culprit == c && l.to_ns == from => l.to_ns = to,
            _ if full => dropped += 1,
            _ => spans.push(Span {
                from_ns: from,
                to_ns: to,
                culprit: c,
            }),
        }
    };
    // Our thread on the CPU before its own wake-up is unaccounted but for the last
    // SWITCH_TO_WAKE_NS of it, as in `explain`.
    let mut early_left = b.cpu.map_or(0, |cpu| {
        let on_cpu: u64 = tl
            .split(cpu, t0, b.wake)
            .0
            .iter()
            .filter(|(o, _)| matches!(o, Owner::Task { pid, .. } if *pid == w.tid))
            .map(|p| p.1)
            .sum();
        on_cpu.saturating_sub(SWITCH_TO_WAKE_NS)
    });
    for (phase, a, z) in b.phases(t0) {
        match b.cpu {
            Some(cpu) => tl.walk(cpu, a, z, |mut from, to, o, _| {
                let mut c = culprit(trace, o, w.tid, ours);
                if c.kind == CulpritKind::SelfThread && phase != Phase::Running && early_left > 0 {
                    let cut = (to - from).min(early_left);
                    early_left -= cut;
                    push(
                        from,
                        from + cut,
                        Culprit::simple(CulpritKind::Unaccounted, "unaccounted"),
                    );
                    from += cut;
                }
                if not_to_blame(phase, &c, b.own_rank) {
                    c = Culprit::simple(CulpritKind::Unaccounted, "unaccounted");
                }
                push(from, to, c)
            }),
            None => push(
                a,
                z,
                Culprit::simple(CulpritKind::Unaccounted, "unaccounted"),
            ),
        }
    }
    WindowTimeline {
        id: w.id,
        tid: w.tid,
        cpu: b.cpu.map(usize::from),
        t_ideal_ns: w.t_ideal_ns,
        wake_ns: w.wake_ns,
        end_ns: w.end_ns,
        waking_ns: b.waking,
        spans,
        spans_dropped: dropped,
    }
}

/// The tasks named in `reports` and `timeline` (to look up as audio clients).
pub fn task_pids(reports: &[WindowReport], timeline: Option<&WindowTimeline>) -> Vec<i32> {
    let shares = reports
        .iter()
        .flat_map(|r| r.before_wake.iter().chain(&r.after_wake))
        .map(|s| &s.culprit);
    let spans = timeline
        .into_iter()
        .flat_map(|t| &t.spans)
        .map(|s| &s.culprit);
    let mut v: Vec<i32> = shares
        .chain(spans)
        .filter(|c| c.kind == CulpritKind::Task)
        .filter_map(|c| c.pid)
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// Name the tasks that are other clients (or the server) of the audio session as such, in
/// every share, top culprit, `behind` and interval (`clients`: tid → its process).
pub fn mark_clients(
    reports: &mut [WindowReport],
    timeline: Option<&mut WindowTimeline>,
    clients: &HashMap<i32, AudioClient>,
) {
    if clients.is_empty() {
        return;
    }
    let mark = |c: &mut Culprit| {
        if c.kind == CulpritKind::Task {
            if let Some(a) = c.pid.and_then(|p| clients.get(&p)) {
                c.client = Some(a.clone());
            }
        }
    };
    for r in reports.iter_mut() {
        for s in r
            .before_wake
            .iter_mut()
            .chain(r.after_wake.iter_mut())
            .chain(r.top.iter_mut())
        {
            mark(&mut s.culprit);
        }
        if let Some(b) = r.wakeup.behind.as_mut() {
            mark(b);
        }
    }
    for s in timeline.into_iter().flat_map(|t| t.spans.iter_mut()) {
        mark(&mut s.culprit);
    }
}

/// The culprit table: per culprit and CPU, the windows it explained (was top culprit of),
/// those it was present in, the time it took and its worst single share; largest total first.
pub fn culprit_table(reports: &[WindowReport]) -> Vec<CulpritRow> {
    let mut rows: BTreeMap<(Culprit, Option<usize>), CulpritRow> = BTreeMap::new();
    for r in reports {
        let all = merge(r.before_wake.clone(), r.after_wake.clone());
        for s in all.iter().filter(|s| s.culprit.is_culprit()) {
            let row = rows
                .entry((s.culprit.clone(), r.cpu))
                .or_insert_with(|| CulpritRow {
                    culprit: s.culprit.clone(),
                    cpu: r.cpu,
                    explained: 0,
                    present: 0,
                    total_ns: 0,
                    worst_ns: 0,
                });
            row.present += 1;
            row.total_ns = row.total_ns.saturating_add(s.ns);
            row.worst_ns = row.worst_ns.max(s.ns);
            if r.top.first().is_some_and(|t| t.culprit == s.culprit) {
                row.explained += 1;
            }
        }
    }
    let mut v: Vec<CulpritRow> = rows.into_values().collect();
    sort_culprit_rows(&mut v);
    v
}

/// The culprit table's order: most windows explained, then most time taken.
pub fn sort_culprit_rows(v: &mut [CulpritRow]) {
    v.sort_by(|a, b| {
        b.explained
            .cmp(&a.explained)
            .then(b.total_ns.cmp(&a.total_ns))
            .then_with(|| a.culprit.cmp(&b.culprit))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1_000;

    fn trace(text: &str) -> Trace {
        let mut t = Trace::default();
        t.push_text(text);
        t
    }

    fn ns_of(v: &[Share], kind: CulpritKind, name: &str) -> u64 {
        v.iter()
            .filter(|s| s.culprit.kind == kind && s.culprit.name == name)
            .map(|s| s.ns)
            .sum()
    }

    fn at(s: u64, us: u64) -> u64 {
        s * 1_000_000_000 + us * US
    }

    #[test]
    fn burst_is_the_top_culprit_and_we_were_runnable_behind_it() {
        let t = trace(include_str!("../../tests/fixtures/trace/burst.txt"));
        assert_eq!(t.skipped_lines, 0);
        let w = Window {
            id: 7,
            tid: 500,
            cpu: Some(1),
            t_ideal_ns: at(100, 1000),
            wake_ns: at(100, 10_510),
            end_ns: at(100, 11_500),
            own_cpu_ns: Some(800 * US),
        };
        let r = &attribute(&t, &[w], &[500])[0];
        assert_eq!(
            ns_of(&r.before_wake, CulpritKind::Task, "xrl-burst"),
            9398 * US
        );
        assert_eq!(
            ns_of(&r.before_wake, CulpritKind::Irq, "virtio0-input.0"),
            100 * US
        );
        assert_eq!(
            ns_of(&r.before_wake, CulpritKind::Irq, "timer:hrtimer_wakeup"),
            2 * US
        );
        assert_eq!(
            ns_of(&r.before_wake, CulpritKind::SelfThread, "xrunlab-rt"),
            10 * US
        );
        assert_eq!(
            ns_of(&r.after_wake, CulpritKind::SelfThread, "xrunlab-rt"),
            790 * US
        );
        assert_eq!(
            ns_of(&r.after_wake, CulpritKind::Softirq, "NET_RX"),
            200 * US
        );
        let top = &r.top[0].culprit;
        assert_eq!(
            (top.name.as_str(), top.pid, top.prio.as_deref()),
            ("xrl-burst", Some(700), Some("rt:90"))
        );
        assert_eq!(r.top.len(), 3);
        assert_eq!(r.wakeup.verdict, WakeVerdict::NotScheduled);
        assert_eq!(r.wakeup.wakeup_delay_ns, Some(US));
        assert_eq!(r.wakeup.behind.as_ref().map(|c| c.pid), Some(Some(700)));
        assert!(!r.lost_events);
        // The parts add up to the window.
        let sum: u64 = r
            .before_wake
            .iter()
            .chain(&r.after_wake)
            .map(|s| s.ns)
            .sum();
        assert_eq!(sum, w.end_ns - w.t_ideal_ns);
        let table = culprit_table(std::slice::from_ref(r));
        assert_eq!(table[0].culprit.name, "xrl-burst");
        assert_eq!((table[0].explained, table[0].present), (1, 1));
        assert_eq!(table[0].worst_ns, 9398 * US);
        assert!(table.iter().all(|row| row.culprit.is_culprit()));
    }

    #[test]
    fn the_cpu_is_found_from_the_trace_when_not_pinned() {
        let t = trace(include_str!("../../tests/fixtures/trace/burst.txt"));
        let w = Window {
            id: 1,
            tid: 500,
            cpu: None,
            t_ideal_ns: at(100, 1000),
            wake_ns: at(100, 10_510),
            end_ns: at(100, 11_500),
            own_cpu_ns: None,
        };
        let r = &attribute(&t, &[w], &[500])[0];
        assert_eq!(r.cpu, Some(1));
        assert_eq!(r.top[0].culprit.name, "xrl-burst");
    }

    #[test]
    fn lost_events_leave_time_unaccounted_and_mark_the_window() {
        let t = trace(include_str!("../../tests/fixtures/trace/overrun.txt"));
        assert_eq!(t.lost_total(), 40);
        let w = Window {
            id: 2,
            tid: 500,
            cpu: Some(1),
            t_ideal_ns: at(200, 1000),
            wake_ns: at(200, 6010),
            end_ns: at(200, 6500),
            own_cpu_ns: None,
        };
        let r = &attribute(&t, &[w], &[500])[0];
        assert!(r.lost_events);
        // Unknown from the loss to the first event after it, whose task (idle) is known.
        assert_eq!(
            ns_of(&r.before_wake, CulpritKind::Unaccounted, "unaccounted"),
            3000 * US
        );
        assert_eq!(ns_of(&r.before_wake, CulpritKind::Irq, "eth0"), 50 * US);
        assert_eq!(ns_of(&r.before_wake, CulpritKind::Idle, "idle"), 1950 * US);
        assert_eq!(r.wakeup.verdict, WakeVerdict::NoWakeupTraced);
        assert_eq!(r.top[0].culprit.kind, CulpritKind::Unaccounted);
    }

    #[test]
    fn idle_while_due_is_a_late_wakeup_and_a_cfs_task_preempted_at_once_is_not_blamed() {
        let t = trace(include_str!("../../tests/fixtures/trace/late_timer.txt"));
        let w = Window {
            id: 3,
            tid: 500,
            cpu: Some(1),
            t_ideal_ns: at(300, 1000),
            wake_ns: at(300, 3010),
            end_ns: at(300, 3600),
            own_cpu_ns: Some(590 * US),
        };
        let r = &attribute(&t, &[w], &[500])[0];
        assert_eq!(r.wakeup.verdict, WakeVerdict::WakeupLate);
        assert_eq!(r.wakeup.wakeup_delay_ns, Some(2001 * US));
        assert_eq!(ns_of(&r.before_wake, CulpritKind::Idle, "idle"), 0);
        assert_eq!(
            ns_of(&r.before_wake, CulpritKind::Unaccounted, "unaccounted"),
            2002 * US
        );
        assert_eq!(r.top[0].culprit.kind, CulpritKind::Unaccounted);
        // Idle and the hog ran while the wake-up was late; woken, the engine preempted the
        // hog (its 2 µs then are unaccounted too: see the next test).
        assert_eq!(ns_of(&r.before_wake, CulpritKind::Task, "cfs-hog"), 0);
    }

    #[test]
    fn steal_while_running_is_unaccounted() {
        let t = trace(include_str!("../../tests/fixtures/trace/burst.txt"));
        // The thread measured 300 µs of CPU where the trace shows it on CPU for 790 µs.
        let w = Window {
            id: 4,
            tid: 500,
            cpu: Some(1),
            t_ideal_ns: at(100, 1000),
            wake_ns: at(100, 10_510),
            end_ns: at(100, 11_500),
            own_cpu_ns: Some(300 * US),
        };
        let r = &attribute(&t, &[w], &[500])[0];
        assert_eq!(
            ns_of(&r.after_wake, CulpritKind::SelfThread, "xrunlab-rt"),
            300 * US
        );
        assert_eq!(
            ns_of(&r.after_wake, CulpritKind::Unaccounted, "unaccounted"),
            490 * US
        );
    }

    /// A real trace of this VM, whose kernel does not trace switches out of idle: the burst
    /// that started on an idle CPU is found from its own events, not read as idle.
    #[test]
    fn a_task_switched_in_from_idle_without_a_sched_switch_is_named() {
        let t = trace(include_str!("../../tests/fixtures/trace/idle_exit.txt"));
        assert_eq!(t.skipped_lines, 0);
        let w = Window {
            id: 8,
            tid: 11675,
            cpu: Some(1),
            t_ideal_ns: 41_233_144_900_000,
            wake_ns: 41_233_154_210_000,
            end_ns: 41_233_154_224_000,
            own_cpu_ns: None,
        };
        let r = &attribute(&t, &[w], &[11675])[0];
        assert_eq!(ns_of(&r.before_wake, CulpritKind::Idle, "idle"), 0);
        // From the end of the timer interrupt that woke it (.144902) to its switch to us
        // (.154208), less the two ticks and the SCHED softirq that interrupted it.
        assert_eq!(
            ns_of(&r.before_wake, CulpritKind::Task, "xrl-burst"),
            (154_208 - 144_902 - 5) * US
        );
        let top = &r.top[0].culprit;
        assert_eq!(
            (top.name.as_str(), top.pid, top.prio.as_deref()),
            ("xrl-burst", Some(11630), Some("rt:95"))
        );
        assert_eq!(r.wakeup.verdict, WakeVerdict::NotScheduled);
        assert_eq!(r.wakeup.wakeup_delay_ns, Some(US));
        assert_eq!(
            r.wakeup.behind.as_ref().map(|c| c.name.as_str()),
            Some("xrl-burst")
        );
        // Before the burst the CPU was idle, and the burst began once the interrupt that
        // woke it returned (.144141), not at the idle CPU's last event before.
        let early = Window {
            t_ideal_ns: 41_233_144_050_000,
            wake_ns: 41_233_144_500_000,
            end_ns: 41_233_144_500_000,
            ..w
        };
        let r = &attribute(&t, &[early], &[11675])[0];
        let mut tl_parts = Timeline::build(&t.events, &[11675])
            .split(1, early.t_ideal_ns, early.wake_ns)
            .0;
        tl_parts.sort_by_key(|p| p.1);
        assert!(
            tl_parts.contains(&(
                Owner::Task {
                    pid: 11630,
                    prio: 4
                },
                359 * US
            )),
            "{tl_parts:?}"
        );
        assert_eq!(r.cpu, Some(1));
    }

    /// A switch to our thread that the trace does not show, with no event for 1.9 ms: the
    /// time before our thread's own clock says it woke is nobody's, not ours and not the
    /// nice-0 task's that ran last.
    #[test]
    fn our_thread_on_the_cpu_before_its_own_wake_up_is_unaccounted() {
        let t = trace(include_str!(
            "../../tests/fixtures/trace/switch_untraced.txt"
        ));
        assert_eq!(t.skipped_lines, 0);
        let w = Window {
            id: 7736,
            tid: 15982,
            cpu: Some(0),
            t_ideal_ns: 42_154_760_246_634,
            wake_ns: 42_154_761_772_437,
            end_ns: 42_154_762_172_001,
            own_cpu_ns: Some(395_518),
        };
        let r = &attribute(&t, &[w], &[15982])[0];
        assert_eq!(
            ns_of(&r.before_wake, CulpritKind::SelfThread, "xr-driver"),
            SWITCH_TO_WAKE_NS
        );
        assert_eq!(
            ns_of(&r.before_wake, CulpritKind::Task, "tokio-rt-worker"),
            0
        );
        let unaccounted = ns_of(&r.before_wake, CulpritKind::Unaccounted, "unaccounted");
        assert!(unaccounted > 1_480_000, "{r:?}");
        assert_eq!(r.top[0].culprit.kind, CulpritKind::Unaccounted);
        assert_eq!(r.wakeup.verdict, WakeVerdict::NotScheduled);
        let sum: u64 = r
            .before_wake
            .iter()
            .chain(&r.after_wake)
            .map(|s| s.ns)
            .sum();
        assert_eq!(sum, w.end_ns - w.t_ideal_ns);
        // Its timeline names the same: our thread only in the last 20 µs before its wake-up.
        let w = Window {
            own_cpu_ns: None,
            ..w
        };
        let (reports, tl) = attribute_all(&t, &[w], &[15982]);
        let (r, tl) = (&reports[0], tl.unwrap());
        assert_eq!(
            spans_by_culprit(&tl),
            merge(r.before_wake.clone(), r.after_wake.clone())
        );
        let wake = w.wake_ns - w.t_ideal_ns;
        let ours_before: Vec<&Span> = tl
            .spans
            .iter()
            .filter(|s| s.culprit.kind == CulpritKind::SelfThread && s.from_ns < wake)
            .collect();
        assert_eq!(ours_before[0].from_ns, wake - SWITCH_TO_WAKE_NS);
    }

    /// Events come CPU after CPU: a thread's priority is its latest in time, not the last
    /// one read (here its SCHED_OTHER start on CPU 1, read after its FIFO life on CPU 0), so
    /// a nice-0 task it waited behind is not blamed.
    #[test]
    fn a_thread_has_its_latest_priority_in_time() {
        let t = trace(
            "worker-500 [000] d..2. 60.002000: sched_switch: prev_comm=worker prev_pid=500 prev_prio=19 prev_state=S ==> next_comm=hog next_pid=800 next_prio=120\n\
             hog-800 [000] d.h2. 60.003000: sched_waking: comm=worker pid=500 prio=19 target_cpu=000\n\
             hog-800 [000] d..2. 60.004000: sched_switch: prev_comm=hog prev_pid=800 prev_prio=120 prev_state=R ==> next_comm=worker next_pid=500 next_prio=19\n\
             worker-500 [001] d..2. 60.000000: sched_switch: prev_comm=worker prev_pid=500 prev_prio=120 prev_state=R ==> next_comm=swapper/1 next_pid=0 next_prio=120\n",
        );
        assert_eq!(t.skipped_lines, 0);
        let w = Window {
            id: 1,
            tid: 500,
            cpu: Some(0),
            t_ideal_ns: at(60, 3000),
            wake_ns: at(60, 4005),
            end_ns: at(60, 4100),
            own_cpu_ns: None,
        };
        let r = &attribute(&t, &[w], &[500])[0];
        assert_eq!(ns_of(&r.before_wake, CulpritKind::Task, "hog"), 0, "{r:?}");
        assert_eq!(r.wakeup.verdict, WakeVerdict::NotScheduled);
    }

    /// A task that starts on an idle CPU woken from another CPU (no interrupt on this one):
    /// it ran no earlier than its sched_waking, and idle has the time before.
    #[test]
    fn an_names_task_starts_no_earlier_than_the_remote_wake_up() {
        let t = trace(
            "       worker-500   [001] d..2.   50.000000: sched_switch: prev_comm=worker prev_pid=500 prev_prio=19 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120\n\
             \x20      server-600   [000] d..2.   50.004000: sched_waking: comm=worker pid=500 prio=19 target_cpu=001\n\
             \x20      worker-500   [001] d..2.   50.005000: sched_switch: prev_comm=worker prev_pid=500 prev_prio=19 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120\n",
        );
        assert_eq!(t.skipped_lines, 0);
        let tl = Timeline::build(&t.events, &[500]);
        let (mut parts, lost) = tl.split(1, at(50, 0), at(50, 5000));
        parts.sort_by_key(|p| p.1);
        assert!(!lost);
        assert_eq!(
            parts,
            vec![
                (Owner::Task { pid: 500, prio: 19 }, 1000 * US),
                (Owner::Task { pid: 0, prio: 120 }, 4000 * US)
            ]
        );
        assert_eq!(tl.switch_in[&500].last(), Some(&(at(50, 4000), 1)));
    }

    #[test]
    fn a_window_on_an_untraced_cpu_is_unaccounted() {
        let t = trace(include_str!("../../tests/fixtures/trace/burst.txt"));
        let w = Window {
            id: 5,
            tid: 500,
            cpu: Some(3),
            t_ideal_ns: at(100, 1000),
            wake_ns: at(100, 2000),
            end_ns: at(100, 2500),
            own_cpu_ns: None,
        };
        let r = &attribute(&t, &[w], &[500])[0];
        assert_eq!(r.top.len(), 1);
        assert_eq!(r.top[0].ns, 1500 * US);
    }

    #[test]
    fn a_lower_priority_task_that_kept_the_cpu_while_we_were_runnable_is_not_blamed() {
        let t = trace(include_str!("../../tests/fixtures/trace/late_timer.txt"));
        // The engine (rt:80) woken at 3.001 ran at 3.004: the hog (nice:0) kept the CPU 2 µs.
        let w = Window {
            id: 6,
            tid: 500,
            cpu: Some(1),
            t_ideal_ns: at(300, 1000),
            wake_ns: at(300, 3010),
            end_ns: at(300, 3600),
            own_cpu_ns: None,
        };
        let r = &attribute(&t, &[w], &[500])[0];
        assert_eq!(ns_of(&r.before_wake, CulpritKind::Task, "cfs-hog"), 0);
        assert!(r.wakeup.behind.as_ref().is_none_or(|b| b.name != "cfs-hog"));
        assert_eq!(prio_rank(&prio_label(19)), Some(19));
        assert_eq!(prio_rank(&prio_label(125)), Some(125));
    }

    fn burst_window(id: u64) -> Window {
        Window {
            id,
            tid: 500,
            cpu: Some(1),
            t_ideal_ns: at(100, 1000),
            wake_ns: at(100, 10_510),
            end_ns: at(100, 11_500),
            own_cpu_ns: None,
        }
    }

    fn spans_by_culprit(tl: &WindowTimeline) -> Vec<Share> {
        let mut by_culprit: Vec<Share> = Vec::new();
        for sp in &tl.spans {
            by_culprit = merge(
                by_culprit,
                vec![Share {
                    culprit: sp.culprit.clone(),
                    ns: sp.to_ns - sp.from_ns,
                }],
            );
        }
        by_culprit
    }

    #[test]
    fn the_worst_window_is_laid_out_as_the_attribution_names_it() {
        let t = trace(include_str!("../../tests/fixtures/trace/burst.txt"));
        let short = Window {
            end_ns: at(100, 2000),
            wake_ns: at(100, 1500),
            ..burst_window(1)
        };
        let (reports, worst) = attribute_all(&t, &[short, burst_window(7), short], &[500]);
        let tl = worst.unwrap();
        assert_eq!(
            (tl.id, tl.cpu, tl.waking_ns),
            (7, Some(1), Some(at(100, 1001)))
        );
        // Intervals tile the window in order.
        assert_eq!(tl.spans[0].from_ns, 0);
        assert!(tl.spans.windows(2).all(|p| p[0].to_ns == p[1].from_ns));
        assert_eq!(tl.spans.last().unwrap().to_ns, 10_500 * US);
        assert_eq!(tl.spans_dropped, 0);
        // The same names and times as the window's report, interval by interval.
        let r = &reports[1];
        assert_eq!(
            spans_by_culprit(&tl),
            merge(r.before_wake.clone(), r.after_wake.clone())
        );
        // The burst is cut by the virtio IRQ: two intervals in the task lane.
        let burst: Vec<&Span> = tl
            .spans
            .iter()
            .filter(|s| s.culprit.name == "xrl-burst")
            .collect();
        assert_eq!(burst.len(), 2);
        assert_eq!(burst[0].from_ns, 2 * US);
        assert_eq!(burst[1].to_ns, 9500 * US);
    }

    #[test]
    fn a_window_without_a_cpu_is_one_unaccounted_interval() {
        let t = trace(include_str!("../../tests/fixtures/trace/burst.txt"));
        let w = Window {
            tid: 9999,
            cpu: None,
            ..burst_window(3)
        };
        let tl = attribute_all(&t, &[w], &[500]).1.unwrap();
        assert_eq!(tl.cpu, None);
        assert_eq!(tl.spans.len(), 1);
        assert_eq!(tl.spans[0].culprit.kind, CulpritKind::Unaccounted);
        assert_eq!(tl.spans[0].to_ns, 10_500 * US);
    }

    #[test]
    fn other_audio_clients_are_named_as_such() {
        use crate::trace::clients::AudioRole;
        let t = trace(include_str!("../../tests/fixtures/trace/burst.txt"));
        let (mut reports, mut tl) = attribute_all(&t, &[burst_window(7)], &[500]);
        assert_eq!(task_pids(&reports, tl.as_ref()), vec![700]);
        let clients = HashMap::from([(
            700,
            AudioClient {
                role: AudioRole::JackClient,
                process: "jalv".into(),
                pid: 690,
            },
        )]);
        mark_clients(&mut reports, tl.as_mut(), &clients);
        let r = &reports[0];
        let label = "JACK client jalv[690]: xrl-burst[700] rt:90";
        assert_eq!(r.top[0].culprit.label(), label);
        assert_eq!(
            r.wakeup.behind.as_ref().map(Culprit::label).as_deref(),
            Some(label)
        );
        assert!(r
            .before_wake
            .iter()
            .filter(|s| s.culprit.pid == Some(700))
            .all(|s| s.culprit.client.is_some()));
        assert!(tl
            .unwrap()
            .spans
            .iter()
            .filter(|s| s.culprit.pid == Some(700))
            .all(|s| s.culprit.label() == label));
        assert_eq!(culprit_table(&reports)[0].culprit.label(), label);
        // Our own thread and IRQs are never a client.
        assert!(r.after_wake.iter().all(|s| s.culprit.client.is_none()));
    }

    #[test]
    fn prio_labels() {
        assert_eq!(prio_label(19), "rt:80");
        assert_eq!(prio_label(120), "nice:0");
        assert_eq!(prio_label(100), "nice:-20");
        assert_eq!(prio_label(-1), "deadline");
    }
}
