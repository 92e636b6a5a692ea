//! One window split into its phases (due, runnable, running), each stretch named and judged by
//! the module's rules.

use super::blocked::{awake, blocked};
use super::shares::{merge, move_to_unaccounted, shares};
use super::timeline::Timeline;
use super::{
    kind_ns, prio_label, prio_rank, top_of, Culprit, CulpritKind, Share, WakeVerdict, Wakeup,
    Window, WindowReport,
};
use crate::trace::parse::Trace;

/// The text format's times are whole µs: a wake-up that came just after t_ideal may read up
/// to 1 µs before it.
const RESOLUTION_NS: u64 = 1_000;

/// From a thread's switch-in to its own clock read after the wake-up, at most (the burst
/// fixture shows 10 µs).
pub(super) const SWITCH_TO_WAKE_NS: u64 = 20_000;

/// How far back [`WindowReport::rt_share_before`] looks: the default
/// `sched_rt_period_us`, over which throttling counts real-time tasks' time.
const RT_PERIOD_NS: u64 = 1_000_000_000;

/// The parts of a window the attribution's rules tell apart (module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// [t_ideal, our sched_waking]: the timer was due and had not woken us.
    Due,
    /// [sched_waking, wake]: runnable and not running.
    Runnable,
    /// [wake, end].
    Running,
}

/// Where a window's phases begin and end, on which CPU, and our priority there.
pub(super) struct Bounds {
    pub(super) cpu: Option<u16>,
    pub(super) waking: Option<u64>,
    pub(super) due_until: u64,
    pub(super) wake: u64,
    pub(super) end: u64,
    pub(super) own_rank: Option<i32>,
}

impl Bounds {
    pub(super) fn of(tl: &Timeline, w: &Window) -> Bounds {
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

    pub(super) fn phases(&self, t_ideal: u64) -> [(Phase, u64, u64); 3] {
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
pub(super) fn not_to_blame(phase: Phase, c: &Culprit, own_rank: Option<i32>) -> bool {
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
    let mut held_by: Option<Share> = None;
    // Time it slept inside its run was taken by nobody: what ran meanwhile is left out.
    let (asleep_in, asleep) = blocked(trace, tl, w, ours);
    if let Some(c) = cpu {
        let split = |a, b| {
            let (parts, l) = tl.split(c, a, b);
            (shares(trace, &parts, w.tid, ours), l)
        };
        let (b1, l1) = split(w.t_ideal_ns, due_until);
        let b1 = reclassify(b1, Phase::Due, own_rank);
        let (b2, l2) = split(due_until, wake);
        held_by = b2
            .iter()
            .filter(|s| s.culprit.kind != CulpritKind::SelfThread)
            .max_by_key(|s| s.ns)
            .cloned();
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
        if early > SWITCH_TO_WAKE_NS && !w.shared_thread {
            move_to_unaccounted(
                &mut before,
                CulpritKind::SelfThread,
                early - SWITCH_TO_WAKE_NS,
            );
        }
        let (mut a, mut l3) = (Vec::new(), false);
        for (x, y) in awake(wake, end, &asleep) {
            let (part, l) = split(x, y);
            a = merge(a, part);
            l3 |= l;
        }
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
            held_by,
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
                held_by,
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
        own_prio: own_rank.map(prio_label),
        rt_share_before: cpu
            .and_then(|c| tl.rt_share(c, w.t_ideal_ns.saturating_sub(RT_PERIOD_NS), w.t_ideal_ns)),
        blocked: asleep_in,
    }
}
