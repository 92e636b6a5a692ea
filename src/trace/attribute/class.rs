//! Which kind of cause made a window late, from its explanation: the classes users meet
//! (docs/methods.md "Forensics: the class of a cause"), so that "a real-time task", "the
//! network's softirq" and "its cgroup's quota" read apart, and a benchmark
//! (scripts/bench-attribution) can score the attribution class by class.

use super::{prio_rank, Culprit, CulpritKind, Share, WindowReport};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The class of what made a late window late.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum CulpritClass {
    /// Its own work (a plugin, the host's code): nothing else took its CPU.
    OwnWork,
    /// A real-time task of its priority or above ran in its place.
    RtTask,
    /// Interrupts: a hard IRQ handler (or its IRQ thread), a softirq (network, block,
    /// timers), an hrtimer callback.
    Interrupt,
    /// A kernel thread (kworker, writeback, kswapd, jbd2, …) kept the CPU: on a kernel
    /// without full preemption its non-preemptible sections hold off even a real-time
    /// thread.
    KernelThread,
    /// A normal task kept the CPU while the real-time thread was runnable: on a kernel
    /// that does not preempt kernel code (`none`, `voluntary`), a system call or a fault
    /// runs to its next preemption point first.
    KernelSection,
    /// Asleep uninterruptibly inside its own cycle: a page read in (a major fault of
    /// memory not locked), or I/O.
    BlockedIo,
    /// Asleep inside its own cycle until another thread woke it: a lock or a condition.
    Lock,
    /// Real-time throttling (`sched_rt_runtime_us`): runnable, real-time, while the CPU
    /// ran normal tasks or idled.
    RtThrottled,
    /// Its thread is not real-time, and a normal task ran in its place.
    NotRealtime,
    /// Its cgroup's CPU quota (`cpu.max`): runnable while the CPU idled.
    CpuQuota,
    /// Time the guest did not see: the wake-up came late or the vCPU was not run.
    Hypervisor,
}

impl CulpritClass {
    pub const ALL: [CulpritClass; 11] = [
        CulpritClass::OwnWork,
        CulpritClass::RtTask,
        CulpritClass::Interrupt,
        CulpritClass::KernelThread,
        CulpritClass::KernelSection,
        CulpritClass::BlockedIo,
        CulpritClass::Lock,
        CulpritClass::RtThrottled,
        CulpritClass::NotRealtime,
        CulpritClass::CpuQuota,
        CulpritClass::Hypervisor,
    ];

    /// Its name in results (kebab-case, as serialized).
    pub fn key(self) -> &'static str {
        match self {
            CulpritClass::OwnWork => "own-work",
            CulpritClass::RtTask => "rt-task",
            CulpritClass::Interrupt => "interrupt",
            CulpritClass::KernelThread => "kernel-thread",
            CulpritClass::KernelSection => "kernel-section",
            CulpritClass::BlockedIo => "blocked-io",
            CulpritClass::Lock => "lock",
            CulpritClass::RtThrottled => "rt-throttled",
            CulpritClass::NotRealtime => "not-realtime",
            CulpritClass::CpuQuota => "cpu-quota",
            CulpritClass::Hypervisor => "hypervisor",
        }
    }

    /// As prose says it after "the cause:".
    pub fn phrase(self) -> &'static str {
        match self {
            CulpritClass::OwnWork => "its own work",
            CulpritClass::RtTask => "a real-time task",
            CulpritClass::Interrupt => "interrupts",
            CulpritClass::KernelThread => "a kernel thread",
            CulpritClass::KernelSection => "a task in a non-preemptible kernel section",
            CulpritClass::BlockedIo => "waiting on I/O or a page fault",
            CulpritClass::Lock => "waiting on a lock",
            CulpritClass::RtThrottled => "real-time throttling",
            CulpritClass::NotRealtime => "not real-time",
            CulpritClass::CpuQuota => "its cgroup's CPU quota",
            CulpritClass::Hypervisor => "the host (time the guest did not see)",
        }
    }
}

/// What the window alone does not say: the machine's and the thread's settings.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ClassEnv {
    /// Real-time throttling's share of each period for real-time tasks
    /// (`sched_rt_runtime_us / sched_rt_period_us`); None when it is off (-1).
    pub rt_runtime_share: Option<f64>,
    /// The thread's cgroup (or one above it) has a CPU quota (`cpu.max` not `max`).
    pub cpu_quota: bool,
    /// The kernel preempts kernel code (`full`, `lazy`, `rt`).
    pub preemptible: bool,
    /// The thread's usual CPU time per run, where known (a watched client's median): its
    /// own work made a run late only by what it took beyond that.
    pub usual_busy_ns: Option<u64>,
}

/// Kernel threads by the names the kernel gives them (their comm).
fn kernel_thread(name: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "kworker/",
        "ksoftirqd/",
        "kswapd",
        "kcompactd",
        "khugepaged",
        "jbd2/",
        "flush-",
        "writeback",
        "kblockd",
        "rcu_",
        "rcuc/",
        "rcuop/",
        "migration/",
        "kthreadd",
        "watchdog",
        "kauditd",
        "oom_reaper",
        "xfsaild",
        "btrfs-",
        "scsi_eh_",
        "nvme-",
    ];
    PREFIXES.iter().any(|p| name.starts_with(p))
}

fn is_task(c: &Culprit) -> bool {
    matches!(c.kind, CulpritKind::Task | CulpritKind::Ours)
}

/// The class of one explained window.
///
/// In order: a sleep inside the window longer than anything that took its CPU is the
/// wait (I/O or a lock); then the largest culprit by its kind, a task by its name and
/// priority against ours; time made unaccounted, or an idle CPU while we were runnable, by
/// what the trace saw hold the CPU and the settings that can hold a runnable thread off
/// (RT throttling, a quota); the rest the host's.
pub fn classify(w: &WindowReport, env: &ClassEnv) -> CulpritClass {
    let own = w.own_prio.as_deref().and_then(prio_rank);
    let realtime = own.is_some_and(|r| r < 100);
    let top = w.top.first();
    let top_ns = top.map_or(0, |s| s.ns);
    if let Some(b) = &w.blocked {
        if b.ns > top_ns {
            return if b.uninterruptible {
                CulpritClass::BlockedIo
            } else {
                CulpritClass::Lock
            };
        }
    }
    let share = |v: &[Share], k: CulpritKind| -> u64 {
        v.iter().filter(|s| s.culprit.kind == k).map(|s| s.ns).sum()
    };
    // Its own time before the wake is a shared thread's other work (a PipeWire data
    // thread running the nodes before this one); otherwise it is a few µs at most.
    let self_ns = share(&w.after_wake, CulpritKind::SelfThread)
        + share(&w.before_wake, CulpritKind::SelfThread);
    // An idle CPU while we were runnable (before the wake, or preempted after it): held
    // off by a throttle, a quota, or the host.
    let idle_ns = w
        .wakeup
        .held_by
        .as_ref()
        .filter(|s| s.culprit.kind == CulpritKind::Idle)
        .map_or(0, |s| s.ns)
        + share(&w.after_wake, CulpritKind::Idle);
    // Throttling holds real-time tasks back once they used their share of the period:
    // real-time tasks held the CPU near that share in the second before.
    let throttled = realtime
        && env
            .rt_runtime_share
            .is_some_and(|s| w.rt_share_before.is_some_and(|b| b >= 0.9 * s));
    let held_off = || {
        if env.cpu_quota && !realtime {
            CulpritClass::CpuQuota
        } else if throttled {
            CulpritClass::RtThrottled
        } else {
            CulpritClass::Hypervisor
        }
    };
    if idle_ns > top_ns && idle_ns > self_ns {
        return held_off();
    }
    let Some(top) = top else {
        return CulpritClass::OwnWork;
    };
    let own_excess = self_ns.saturating_sub(env.usual_busy_ns.unwrap_or(0));
    if own_excess >= top.ns && top.culprit.kind != CulpritKind::Unaccounted {
        return CulpritClass::OwnWork;
    }
    let c = &top.culprit;
    match c.kind {
        CulpritKind::Irq | CulpritKind::Softirq => CulpritClass::Interrupt,
        CulpritKind::Element | CulpritKind::SelfThread | CulpritKind::Idle => CulpritClass::OwnWork,
        CulpritKind::Task | CulpritKind::Ours => task_class(c, own, throttled, env),
        CulpritKind::Unaccounted => {
            // What the trace saw hold the CPU while we were runnable, before the rules
            // made it unaccounted.
            let held = w.wakeup.held_by.as_ref();
            match held.map(|s| &s.culprit) {
                Some(h) if is_task(h) && h.name.starts_with("irq/") => CulpritClass::Interrupt,
                Some(h) if is_task(h) && kernel_thread(&h.name) => CulpritClass::KernelThread,
                // A normal task kept a real-time one waiting: throttling, or a kernel
                // section where kernel code is not preempted.
                Some(h) if is_task(h) && realtime && held.is_some_and(|s| s.ns * 2 >= top.ns) => {
                    lower_task(throttled, env)
                }
                _ => CulpritClass::Hypervisor,
            }
        }
    }
}

/// A task that took our CPU: by its name, then its priority against ours.
fn task_class(c: &Culprit, own: Option<i32>, throttled: bool, env: &ClassEnv) -> CulpritClass {
    let realtime = own.is_some_and(|r| r < 100);
    if c.name.starts_with("irq/") {
        return CulpritClass::Interrupt;
    }
    if kernel_thread(&c.name) {
        return CulpritClass::KernelThread;
    }
    let theirs = c.prio.as_deref().and_then(prio_rank);
    if !realtime {
        return if theirs.is_some_and(|r| r < 100) {
            CulpritClass::RtTask
        } else {
            CulpritClass::NotRealtime
        };
    }
    match (theirs, own) {
        (Some(t), Some(o)) if t <= o => CulpritClass::RtTask,
        _ => lower_task(throttled, env),
    }
}

/// A task of lower priority kept a real-time thread off its CPU: throttling (or the fair
/// server that guards normal tasks from starving), else a kernel section where kernel code
/// is not preempted, else time the guest did not see.
fn lower_task(throttled: bool, env: &ClassEnv) -> CulpritClass {
    if throttled {
        CulpritClass::RtThrottled
    } else if !env.preemptible {
        CulpritClass::KernelSection
    } else {
        CulpritClass::Hypervisor
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::attribute::{Blocked, WakeVerdict, Wakeup};

    fn task(name: &str, prio: &str) -> Culprit {
        Culprit {
            kind: CulpritKind::Task,
            name: name.into(),
            pid: Some(9),
            irq: None,
            prio: Some(prio.into()),
            client: None,
        }
    }

    fn of(kind: CulpritKind, name: &str) -> Culprit {
        Culprit::simple(kind, name)
    }

    fn window(own: &str, after: Vec<Share>, held_by: Option<Share>) -> WindowReport {
        WindowReport {
            id: 1,
            tid: 7,
            cpu: Some(1),
            t_ideal_ns: 0,
            wake_ns: 0,
            end_ns: 10_000_000,
            before_wake: Vec::new(),
            top: super::super::top_of(&[], &after),
            after_wake: after,
            wakeup: Wakeup {
                verdict: WakeVerdict::NotScheduled,
                wakeup_delay_ns: None,
                runnable_ns: None,
                behind: None,
                held_by,
            },
            lost_events: false,
            own_prio: Some(own.into()),
            rt_share_before: None,
            blocked: None,
        }
    }

    /// Real-time tasks held `share` of the CPU in the second before.
    fn after_rt(mut w: WindowReport, share: f64) -> WindowReport {
        w.rt_share_before = Some(share);
        w
    }

    fn s(c: Culprit, ns: u64) -> Share {
        Share { culprit: c, ns }
    }

    const ENV: ClassEnv = ClassEnv {
        rt_runtime_share: Some(0.95),
        cpu_quota: false,
        preemptible: true,
        usual_busy_ns: None,
    };

    #[test]
    fn each_kind_of_culprit_has_its_class() {
        let me = of(CulpritKind::SelfThread, "me");
        let cases = [
            (vec![s(me.clone(), 9)], CulpritClass::OwnWork),
            (
                vec![s(task("xrl-burst", "rt:90"), 8), s(me.clone(), 1)],
                CulpritClass::RtTask,
            ),
            (
                vec![s(of(CulpritKind::Softirq, "NET_RX"), 8)],
                CulpritClass::Interrupt,
            ),
            (
                vec![s(task("irq/24-virtio0", "rt:50"), 8)],
                CulpritClass::Interrupt,
            ),
            (
                vec![s(task("kworker/1:2", "nice:0"), 8)],
                CulpritClass::KernelThread,
            ),
            (vec![s(task("hog", "nice:0"), 8)], CulpritClass::Hypervisor),
            (
                vec![s(of(CulpritKind::Unaccounted, "unaccounted"), 8)],
                CulpritClass::Hypervisor,
            ),
        ];
        for (after, want) in cases {
            let w = window("rt:80", after.clone(), None);
            assert_eq!(classify(&w, &ENV), want, "{after:?}");
        }
    }

    #[test]
    fn a_lower_task_is_throttling_only_after_real_time_tasks_used_their_share() {
        for hog in [task("hog", "rt:10"), task("hog", "nice:0")] {
            let w = window("rt:80", vec![s(hog, 8)], None);
            assert_eq!(classify(&w, &ENV), CulpritClass::Hypervisor);
            let w = after_rt(w, 0.93);
            assert_eq!(classify(&w, &ENV), CulpritClass::RtThrottled);
            let off = ClassEnv {
                rt_runtime_share: None,
                ..ENV
            };
            assert_eq!(classify(&w, &off), CulpritClass::Hypervisor);
            let w = after_rt(w, 0.5);
            assert_eq!(classify(&w, &ENV), CulpritClass::Hypervisor);
        }
        // An idle CPU while a real-time thread was runnable: the same test.
        let idle = s(of(CulpritKind::Idle, "idle"), 8);
        let w = window("rt:80", vec![], Some(idle));
        assert_eq!(classify(&w, &ENV), CulpritClass::Hypervisor);
        assert_eq!(classify(&after_rt(w, 0.9), &ENV), CulpritClass::RtThrottled);
    }

    #[test]
    fn a_normal_thread_is_not_realtime_or_held_by_its_quota() {
        let w = window("nice:0", vec![s(task("hog", "nice:0"), 8)], None);
        assert_eq!(classify(&w, &ENV), CulpritClass::NotRealtime);
        let w = window("nice:0", vec![s(task("xrl-burst", "rt:90"), 8)], None);
        assert_eq!(classify(&w, &ENV), CulpritClass::RtTask);
        let idle = s(of(CulpritKind::Idle, "idle"), 8);
        let w = window(
            "nice:0",
            vec![s(of(CulpritKind::SelfThread, "me"), 1)],
            Some(idle),
        );
        let quota = ClassEnv {
            cpu_quota: true,
            ..ENV
        };
        assert_eq!(classify(&w, &quota), CulpritClass::CpuQuota);
        assert_eq!(classify(&w, &ENV), CulpritClass::Hypervisor);
    }

    #[test]
    fn unaccounted_time_is_named_by_what_held_the_cpu() {
        let u = s(of(CulpritKind::Unaccounted, "unaccounted"), 8);
        let w = window(
            "rt:80",
            vec![u.clone()],
            Some(s(task("kworker/u4:1", "nice:0"), 8)),
        );
        assert_eq!(classify(&w, &ENV), CulpritClass::KernelThread);
        let w = window(
            "rt:80",
            vec![u.clone()],
            Some(s(task("stress-ng", "nice:0"), 8)),
        );
        assert_eq!(classify(&w, &ENV), CulpritClass::Hypervisor);
        assert_eq!(
            classify(&after_rt(w, 0.95), &ENV),
            CulpritClass::RtThrottled
        );
        let w = window(
            "rt:80",
            vec![u.clone()],
            Some(s(task("stress-ng", "nice:0"), 1)),
        );
        assert_eq!(classify(&after_rt(w, 0.95), &ENV), CulpritClass::Hypervisor);
        // Where kernel code is not preempted, the task's kernel section held it.
        let none = ClassEnv {
            preemptible: false,
            ..ENV
        };
        let w = window("rt:80", vec![u], Some(s(task("dd", "nice:0"), 8)));
        assert_eq!(classify(&w, &none), CulpritClass::KernelSection);
        assert_eq!(classify(&w, &ENV), CulpritClass::Hypervisor);
    }

    #[test]
    fn a_sleep_longer_than_any_culprit_is_the_wait() {
        let mut w = window("rt:80", vec![s(task("hog", "nice:0"), 3)], None);
        w.blocked = Some(Blocked {
            ns: 5,
            uninterruptible: true,
            woken_by: None,
        });
        assert_eq!(classify(&w, &ENV), CulpritClass::BlockedIo);
        w.blocked.as_mut().unwrap().uninterruptible = false;
        assert_eq!(classify(&w, &ENV), CulpritClass::Lock);
        w.blocked.as_mut().unwrap().ns = 2;
        assert_eq!(classify(&w, &ENV), CulpritClass::Hypervisor);
    }

    /// A busy client made late by a short interrupt: its own work is the cause only by
    /// what it took beyond its usual.
    #[test]
    fn own_work_counts_beyond_its_usual() {
        let me = of(CulpritKind::SelfThread, "me");
        let net = of(CulpritKind::Softirq, "NET_RX");
        let w = window("rt:80", vec![s(me, 9), s(net, 2)], None);
        assert_eq!(classify(&w, &ENV), CulpritClass::OwnWork);
        let usual = ClassEnv {
            usual_busy_ns: Some(8),
            ..ENV
        };
        assert_eq!(classify(&w, &usual), CulpritClass::Interrupt);
        let spun = ClassEnv {
            usual_busy_ns: Some(3),
            ..ENV
        };
        assert_eq!(classify(&w, &spun), CulpritClass::OwnWork);
    }

    #[test]
    fn keys_are_the_serialized_names() {
        for c in CulpritClass::ALL {
            assert_eq!(serde_json::to_value(c).unwrap(), c.key());
        }
    }
}
