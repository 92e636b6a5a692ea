//! The worst window laid out interval by interval, named as the attribution names it.

use super::explain::{not_to_blame, Bounds, Phase, SWITCH_TO_WAKE_NS};
use super::shares::culprit;
use super::timeline::{Owner, Timeline};
use super::{Culprit, CulpritKind, Window};
use crate::trace::parse::Trace;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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
