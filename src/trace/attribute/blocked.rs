//! Our thread asleep inside its own window: a sleep in `[wake, end]` is time nobody took
//! from it. It waited — for a page of memory read in, for I/O, for a lock — and what ran on
//! the CPU meanwhile (idle, often) is not the culprit.

use super::shares::culprit;
use super::timeline::{Owner, Timeline};
use super::{Culprit, Window};
use crate::trace::parse::Trace;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Blocked {
    /// Time asleep within `[wake, end]`, summed over its sleeps.
    pub ns: u64,
    /// The longest sleep was uninterruptible (state D): I/O, a page read in on a major
    /// fault. Else it waited interruptibly (a lock, a condition).
    pub uninterruptible: bool,
    /// Who woke it from its longest sleep: the task current where the wake-up was raised
    /// (a lock's holder; for an I/O completion, whatever its interrupt interrupted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub woken_by: Option<Culprit>,
}

/// The sleeps of `w`'s thread that began in `[wake, end)`, each until it was woken (or, with
/// no wake-up traced, its next switch-in; at most the end), in time order, and what they add
/// up to (None when it did not sleep there). Runnable after its wake-up, it was asleep no
/// more: what held it off then is a culprit like any other.
pub(super) fn blocked(
    trace: &Trace,
    tl: &Timeline,
    w: &Window,
    ours: &[i32],
) -> (Option<Blocked>, Vec<(u64, u64)>) {
    let mut asleep = Vec::new();
    let Some(sleeps) = tl.sleeps.get(&w.tid) else {
        return (None, asleep);
    };
    let wake = w.wake_ns.max(w.t_ideal_ns);
    let end = w.end_ns;
    let ins = tl
        .switch_in
        .get(&w.tid)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let wakings = tl.waking.get(&w.tid).map(Vec::as_slice).unwrap_or_default();
    let mut total = 0u64;
    let mut longest: Option<(u64, u64, u64, bool)> = None;
    let first = sleeps.partition_point(|&(t, _)| t < wake);
    for &(out, d) in &sleeps[first..] {
        if out >= end {
            break;
        }
        let i = ins.partition_point(|&(t, _)| t <= out);
        let back = ins.get(i).map_or(end, |&(t, _)| t.min(end));
        let k = wakings.partition_point(|&t| t <= out);
        let back = wakings.get(k).map_or(back, |&t| t.min(back));
        let ns = back.saturating_sub(out);
        if ns > 0 {
            asleep.push((out, back));
        }
        total = total.saturating_add(ns);
        if longest.is_none_or(|l| ns > l.0) {
            longest = Some((ns, out, back, d));
        }
    }
    let Some((_, out, back, uninterruptible)) = longest else {
        return (None, asleep);
    };
    let woken_by = tl.woken_by.get(&w.tid).and_then(|v| {
        let i = v.partition_point(|&(t, _)| t < out);
        let &(t, pid) = v.get(i)?;
        (t <= back && pid >= 0).then(|| {
            let prio = tl.prio.get(&pid).copied().unwrap_or(120);
            culprit(trace, Owner::Task { pid, prio }, w.tid, ours)
        })
    });
    let b = Blocked {
        ns: total,
        uninterruptible,
        woken_by,
    };
    (Some(b), asleep)
}

/// `[a, b)` without the stretches in `asleep` (in time order, not overlapping).
pub(super) fn awake(a: u64, b: u64, asleep: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut from = a;
    for &(s, e) in asleep {
        if s > from {
            out.push((from, s.min(b)));
        }
        from = from.max(e);
        if from >= b {
            break;
        }
    }
    if from < b {
        out.push((from, b));
    }
    out.retain(|&(x, y)| y > x);
    out
}
