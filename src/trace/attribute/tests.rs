use super::explain::SWITCH_TO_WAKE_NS;
use super::shares::merge;
use super::timeline::Owner;
use super::*;
use crate::trace::clients::AudioClient;
use crate::trace::parse::Trace;
use std::collections::HashMap;

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
    let t = trace(include_str!("../../../tests/fixtures/trace/burst.txt"));
    assert_eq!(t.skipped_lines, 0);
    let w = Window {
        id: 7,
        tid: 500,
        cpu: Some(1),
        t_ideal_ns: at(100, 1000),
        wake_ns: at(100, 10_510),
        end_ns: at(100, 11_500),
        own_cpu_ns: Some(800 * US),
        shared_thread: false,
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
    let t = trace(include_str!("../../../tests/fixtures/trace/burst.txt"));
    let w = Window {
        id: 1,
        tid: 500,
        cpu: None,
        t_ideal_ns: at(100, 1000),
        wake_ns: at(100, 10_510),
        end_ns: at(100, 11_500),
        own_cpu_ns: None,
        shared_thread: false,
    };
    let r = &attribute(&t, &[w], &[500])[0];
    assert_eq!(r.cpu, Some(1));
    assert_eq!(r.top[0].culprit.name, "xrl-burst");
}

#[test]
fn lost_events_leave_time_unaccounted_and_mark_the_window() {
    let t = trace(include_str!("../../../tests/fixtures/trace/overrun.txt"));
    assert_eq!(t.lost_total(), 40);
    let w = Window {
        id: 2,
        tid: 500,
        cpu: Some(1),
        t_ideal_ns: at(200, 1000),
        wake_ns: at(200, 6010),
        end_ns: at(200, 6500),
        own_cpu_ns: None,
        shared_thread: false,
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
    let t = trace(include_str!("../../../tests/fixtures/trace/late_timer.txt"));
    let w = Window {
        id: 3,
        tid: 500,
        cpu: Some(1),
        t_ideal_ns: at(300, 1000),
        wake_ns: at(300, 3010),
        end_ns: at(300, 3600),
        own_cpu_ns: Some(590 * US),
        shared_thread: false,
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
    let t = trace(include_str!("../../../tests/fixtures/trace/burst.txt"));
    // The thread measured 300 µs of CPU where the trace shows it on CPU for 790 µs.
    let w = Window {
        id: 4,
        tid: 500,
        cpu: Some(1),
        t_ideal_ns: at(100, 1000),
        wake_ns: at(100, 10_510),
        end_ns: at(100, 11_500),
        own_cpu_ns: Some(300 * US),
        shared_thread: false,
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
    let t = trace(include_str!("../../../tests/fixtures/trace/idle_exit.txt"));
    assert_eq!(t.skipped_lines, 0);
    let w = Window {
        id: 8,
        tid: 11675,
        cpu: Some(1),
        t_ideal_ns: 41_233_144_900_000,
        wake_ns: 41_233_154_210_000,
        end_ns: 41_233_154_224_000,
        own_cpu_ns: None,
        shared_thread: false,
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
        "../../../tests/fixtures/trace/switch_untraced.txt"
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
        shared_thread: false,
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
        shared_thread: false,
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
        shared_thread: false,
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
    let t = trace(include_str!("../../../tests/fixtures/trace/burst.txt"));
    let w = Window {
        id: 5,
        tid: 500,
        cpu: Some(3),
        t_ideal_ns: at(100, 1000),
        wake_ns: at(100, 2000),
        end_ns: at(100, 2500),
        own_cpu_ns: None,
        shared_thread: false,
    };
    let r = &attribute(&t, &[w], &[500])[0];
    assert_eq!(r.top.len(), 1);
    assert_eq!(r.top[0].ns, 1500 * US);
}

#[test]
fn a_lower_priority_task_that_kept_the_cpu_while_we_were_runnable_is_not_blamed() {
    let t = trace(include_str!("../../../tests/fixtures/trace/late_timer.txt"));
    // The engine (rt:80) woken at 3.001 ran at 3.004: the hog (nice:0) kept the CPU 2 µs.
    let w = Window {
        id: 6,
        tid: 500,
        cpu: Some(1),
        t_ideal_ns: at(300, 1000),
        wake_ns: at(300, 3010),
        end_ns: at(300, 3600),
        own_cpu_ns: None,
        shared_thread: false,
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
        shared_thread: false,
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
    let t = trace(include_str!("../../../tests/fixtures/trace/burst.txt"));
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
    let t = trace(include_str!("../../../tests/fixtures/trace/burst.txt"));
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
    let t = trace(include_str!("../../../tests/fixtures/trace/burst.txt"));
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

/// A thread that sleeps inside its own window (a page read in: D; a lock: S) waited:
/// the window says how long, how, and who woke it, and its class is the wait, not the
/// idle CPU or the task that ran meanwhile.
#[test]
fn a_sleep_inside_the_window_is_a_wait_with_its_waker() {
    for (state, waker, want) in [
        ("D", "swapper/0-0", CulpritClass::BlockedIo),
        ("S", "holder-501", CulpritClass::Lock),
    ] {
        let (wcomm, wpid) = waker.rsplit_once('-').unwrap();
        let t = trace(&format!(
            "swapper/0-0 [000] d..2. 70.000000: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=worker next_pid=500 next_prio=19\n\
             worker-500 [000] d..2. 70.001000: sched_switch: prev_comm=worker prev_pid=500 prev_prio=19 prev_state={state} ==> next_comm=hog next_pid=800 next_prio=120\n\
             swapper/1-0 [001] d..2. 70.008000: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm={wcomm} next_pid={wpid} next_prio=120\n\
             {wcomm}-{wpid} [001] d..2. 70.009000: sched_waking: comm=worker pid=500 prio=19 target_cpu=000\n\
             hog-800 [000] d..2. 70.009010: sched_switch: prev_comm=hog prev_pid=800 prev_prio=120 prev_state=R ==> next_comm=worker next_pid=500 next_prio=19\n\
             worker-500 [000] d..2. 70.010000: sched_switch: prev_comm=worker prev_pid=500 prev_prio=19 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120\n"
        ));
        assert_eq!(t.skipped_lines, 0);
        let w = Window {
            id: 1,
            tid: 500,
            cpu: Some(0),
            t_ideal_ns: at(70, 0),
            wake_ns: at(70, 0),
            end_ns: at(70, 10_000),
            own_cpu_ns: None,
            shared_thread: false,
        };
        let r = &attribute(&t, &[w], &[])[0];
        let b = r.blocked.as_ref().expect("a sleep inside the window");
        // Asleep until its wake-up at 9 ms; the 10 µs runnable behind the hog after it
        // are the hog's.
        assert_eq!(b.ns, 8_000 * US, "{r:?}");
        assert_eq!(
            ns_of(&r.after_wake, CulpritKind::Task, "hog"),
            10 * US,
            "{r:?}"
        );
        assert_eq!(b.uninterruptible, state == "D");
        let by = b.woken_by.as_ref().expect("its waker");
        if wpid == "0" {
            assert_eq!(by.kind, CulpritKind::Idle);
        } else {
            assert_eq!((by.name.as_str(), by.pid), (wcomm, Some(501)));
        }
        assert_eq!(r.own_prio.as_deref(), Some("rt:80"));
        let env = ClassEnv {
            rt_runtime_share: Some(0.95),
            cpu_quota: false,
            preemptible: false,
            usual_busy_ns: None,
        };
        assert_eq!(classify(r, &env), want, "{r:?}");
    }
}
