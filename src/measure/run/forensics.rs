//! `--forensics` of an engine run (docs/methods.md "Forensics"): the windows of its
//! recorded xruns for the kernel trace, and the chain element named as the culprit of an
//! overload xrun. One piece for every command that runs the engine (`run`, `load` trials,
//! `sched` rows).

use super::RunResults;
use crate::common::Cause;
use crate::dsp::ChainElement;
use crate::engine::collector::XrunEvent;
use crate::trace::{Culprit, CulpritKind, Forensics, Recorder, Share, Window};

/// Starts a recording before each measurement of a command that runs several (load trials,
/// sched rows, latencytest phases): the CPUs (all allowed when empty) and the expected
/// duration in; None when forensics is off (the caller said why, once).
pub type StartTrace<'a> = &'a mut dyn FnMut(&[usize], u64) -> Option<Recorder>;

/// The windows of a run's recorded xruns and all its thread ids.
pub fn run_windows(r: &RunResults) -> (Vec<Window>, Vec<i32>) {
    let ours: Vec<i32> = r.threads.iter().map(|t| t.tid).collect();
    let windows = r
        .xrun_events
        .iter()
        .filter(|e| e.t_ideal_ns > 0)
        .filter_map(|e| {
            let t = r.threads.get(e.crit_thread as usize)?;
            let wake = e.t_ideal_ns + e.wake_latency_ns;
            Some(Window {
                id: e.cycle,
                tid: t.tid,
                cpu: t.cpu,
                t_ideal_ns: e.t_ideal_ns,
                wake_ns: wake,
                end_ns: wake + e.wall_ns,
                own_cpu_ns: Some(e.crit_cpu_ns),
                shared_thread: false,
            })
        })
        .collect();
    (windows, ours)
}

/// Stop `rec` and explain the xruns of `r` into `r.forensics`, naming the chain element of
/// each overload xrun; returns the warnings to add to the result.
pub fn explain_run(rec: Recorder, r: &mut RunResults, chain: &[ChainElement]) -> Vec<String> {
    let (windows, ours) = run_windows(r);
    let (mut f, w) = rec.explain("xrun", &windows, &ours);
    name_elements(&mut f, &r.xrun_events, chain);
    r.forensics = Some(f);
    w
}

/// In each overload xrun's window, the time of the track or chain element that took the
/// most (from the engine's probes) comes out of the thread's own share and is charged to
/// that element: the trace sees our thread running, the probes say what it ran. The top
/// culprits and the culprit table follow.
pub fn name_elements(f: &mut Forensics, events: &[XrunEvent], chain: &[ChainElement]) {
    let mut changed = false;
    for w in f.windows.iter_mut() {
        let Some(h) = events
            .iter()
            .find(|e| e.cycle == w.id && e.cause == Cause::Overload)
            .and_then(|e| e.heaviest)
        else {
            continue;
        };
        let ns = h.element_ns.unwrap_or(h.track_ns);
        let own = crate::trace::attribute::kind_ns(&w.after_wake, CulpritKind::SelfThread);
        let take = ns.min(own);
        if take == 0 {
            continue;
        }
        let mut left = take;
        for s in w
            .after_wake
            .iter_mut()
            .filter(|s| s.culprit.kind == CulpritKind::SelfThread)
        {
            let t = left.min(s.ns);
            s.ns -= t;
            left -= t;
        }
        w.after_wake.retain(|s| s.ns > 0);
        w.after_wake.push(Share {
            culprit: Culprit {
                kind: CulpritKind::Element,
                name: h.label(chain),
                pid: None,
                irq: None,
                prio: None,
                client: None,
            },
            ns: take,
        });
        w.after_wake
            .sort_by(|a, b| b.ns.cmp(&a.ns).then_with(|| a.culprit.cmp(&b.culprit)));
        w.top = crate::trace::attribute::top_of(&w.before_wake, &w.after_wake);
        changed = true;
    }
    // A run keeps at most as many xrun events as a section keeps windows, so the table
    // rebuilt from the windows covers all of them.
    if changed && f.windows.len() as u64 == f.windows_total {
        f.culprits = crate::trace::attribute::culprit_table(&f.windows);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::collector::Heaviest;
    use crate::trace::{WakeVerdict, WindowReport};

    fn share(kind: CulpritKind, name: &str, ns: u64) -> Share {
        Share {
            culprit: Culprit {
                kind,
                name: name.into(),
                pid: Some(7),
                irq: None,
                prio: None,
                client: None,
            },
            ns,
        }
    }

    fn window(id: u64, after: Vec<Share>) -> WindowReport {
        WindowReport {
            id,
            tid: 7,
            cpu: Some(1),
            t_ideal_ns: 1_000,
            wake_ns: 2_000,
            end_ns: 3_000_000,
            before_wake: Vec::new(),
            top: crate::trace::attribute::top_of(&[], &after),
            after_wake: after,
            wakeup: crate::trace::attribute::Wakeup {
                verdict: WakeVerdict::NoWakeupTraced,
                wakeup_delay_ns: None,
                runnable_ns: None,
                behind: None,
                held_by: None,
            },
            lost_events: false,
            own_prio: None,
            rt_share_before: None,
            blocked: None,
        }
    }

    fn event(cycle: u64, cause: Cause, heaviest: Option<Heaviest>) -> XrunEvent {
        XrunEvent {
            cycle,
            cause,
            wake_latency_ns: 0,
            sched_latency_ns: 0,
            wall_ns: 0,
            crit_cpu_ns: 0,
            interference_ns: 0,
            end_time_ns: 0,
            at_ns: 0,
            backlog_ns: 0,
            inherited: false,
            t_ideal_ns: 0,
            crit_thread: 0,
            expected_cpu_ns: None,
            heaviest,
        }
    }

    #[test]
    fn an_overload_window_names_its_heaviest_element_and_keeps_others_as_they_were() {
        let chain = crate::dsp::parse_chain("gain,burn(30%):4").unwrap();
        let h = Heaviest {
            track: 0,
            track_ns: 2_500_000,
            element: Some(3),
            element_ns: Some(800_000),
        };
        let mut f = Forensics {
            instance: "xrunlab-1".into(),
            cpus: vec![1],
            events: 10,
            lost_events: 0,
            lost_per_cpu: Vec::new(),
            missing_events: Vec::new(),
            windows_of: "xrun".into(),
            windows_total: 2,
            windows: vec![
                window(
                    5,
                    vec![
                        share(CulpritKind::SelfThread, "xr-engine", 2_400_000),
                        share(CulpritKind::Task, "kworker", 300_000),
                    ],
                ),
                window(9, vec![share(CulpritKind::Task, "kworker", 300_000)]),
            ],
            culprits: Vec::new(),
            csv_file: None,
            worst: None,
        };
        let events = [
            event(5, Cause::Overload, Some(h)),
            event(9, Cause::LateWakeup, Some(h)),
        ];
        name_elements(&mut f, &events, &chain);
        let w = &f.windows[0];
        assert_eq!(w.top[0].culprit.kind, CulpritKind::Element);
        assert_eq!(w.top[0].culprit.name, "track 0: burn(30%) 3/4");
        assert_eq!(w.top[0].ns, 800_000);
        let own = crate::trace::attribute::kind_ns(&w.after_wake, CulpritKind::SelfThread);
        assert_eq!(own, 1_600_000, "the element's time came out of self");
        assert_eq!(
            f.windows[1].top[0].culprit.name, "kworker",
            "not an overload"
        );
        let row = f
            .culprits
            .iter()
            .find(|r| r.culprit.kind == CulpritKind::Element)
            .expect("the element is in the culprit table");
        assert_eq!((row.explained, row.total_ns), (1, 800_000));
    }

    #[test]
    fn heaviest_is_the_longest_track_and_track_0s_longest_element() {
        let mut r = crate::common::CycleRecord::EMPTY;
        r.tracks = 2;
        r.active_clients = 3;
        r.track_start_ns[0] = 10;
        r.track_end_ns[0] = 1_010;
        r.client_end_ns[..3].copy_from_slice(&[110, 810, 1_010]);
        r.track_start_ns[1] = 0;
        r.track_end_ns[1] = 900;
        let h = Heaviest::of(&r).unwrap();
        assert_eq!((h.track, h.track_ns), (0, 1_000));
        assert_eq!((h.element, h.element_ns), (Some(1), Some(700)));
        let chain = crate::dsp::parse_chain("burn(10%):3").unwrap();
        assert_eq!(h.label(&chain), "track 0: burn(10%) 2/3");
        // Another track longest: only the track is known.
        r.track_end_ns[1] = 5_000;
        let h = Heaviest::of(&r).unwrap();
        assert_eq!((h.track, h.element), (1, None));
        assert_eq!(h.label(&chain), "track 1");
    }
}
