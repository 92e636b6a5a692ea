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
//!
//! By phase: [`timeline`] rebuilds what ran on each CPU, [`shares`] names who a stretch of
//! it belongs to, [`explain`] splits a window into its phases and applies the rules above,
//! [`layout`] lays the worst window out interval by interval, and [`table`] sums the
//! windows into the culprit table and names other audio clients.

mod blocked;
mod class;
mod explain;
mod layout;
mod shares;
mod table;
#[cfg(test)]
mod tests;
mod timeline;

pub use blocked::Blocked;
pub use class::{classify, ClassEnv, CulpritClass};
pub use explain::explain;
pub use layout::{window_timeline, Span, WindowTimeline, MAX_SPANS};
pub use shares::{kind_ns, prio_label, prio_rank, top_of};
pub use table::{culprit_table, mark_clients, sort_culprit_rows, task_pids};
pub use timeline::Timeline;

use super::clients::AudioClient;
use super::parse::Trace;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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
    /// What held the CPU longest while we were runnable, as the trace saw it (idle
    /// included), before the rules made time unaccounted: a kernel thread in a
    /// non-preemptible section, or an idle CPU while a quota or RT throttling held us.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_by: Option<Share>,
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
    /// The thread runs other work than the window's (PipeWire's data thread runs every
    /// node of its process): its time on the CPU before the wake is that work, not a
    /// switch the trace placed early.
    pub shared_thread: bool,
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
    /// The thread's own priority as the trace saw it (`rt:N`, `nice:N`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own_prio: Option<String>,
    /// The share of its CPU real-time tasks held in the second before `t_ideal`, of what
    /// the trace holds of it: near the throttling limit, real-time tasks are throttled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rt_share_before: Option<f64>,
    /// Time it slept inside `[wake, end]` (see `blocked`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked: Option<Blocked>,
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
