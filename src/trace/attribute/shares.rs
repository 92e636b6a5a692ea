//! Who a stretch of a CPU's time belongs to, and the arithmetic of shares.

use super::timeline::Owner;
use super::{Culprit, CulpritKind, Share};
use crate::trace::parse::{Trace, SOFTIRQ_NAMES};

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

pub(super) fn culprit(trace: &Trace, o: Owner, tid: i32, ours: &[i32]) -> Culprit {
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
        Owner::Timer(f) => {
            let f = trace.functions.get(f as usize).map_or("?", String::as_str);
            // The software clock of a sampling profiler: `watch --forensics`'s own
            // sampling (`--sample-every`), or a perf the user runs.
            let by = if f == "perf_swevent_hrtimer" {
                " (perf sampling)"
            } else {
                ""
            };
            Culprit::simple(CulpritKind::Irq, &format!("timer:{f}{by}"))
        }
        Owner::Unknown => Culprit::simple(CulpritKind::Unaccounted, "unaccounted"),
    }
}

pub(super) fn shares(trace: &Trace, parts: &[(Owner, u64)], tid: i32, ours: &[i32]) -> Vec<Share> {
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

pub(super) fn move_to_unaccounted(v: &mut Vec<Share>, kind: CulpritKind, ns: u64) {
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

pub(super) fn merge(mut a: Vec<Share>, b: Vec<Share>) -> Vec<Share> {
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
