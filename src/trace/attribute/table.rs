//! The windows summed: the culprit table, and other audio clients named as such.

use super::shares::merge;
use super::{Culprit, CulpritKind, CulpritRow, WindowReport, WindowTimeline};
use crate::trace::clients::AudioClient;
use std::collections::{BTreeMap, HashMap};

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
