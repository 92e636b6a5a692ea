//! The profiles: which settings `audio` and `measure` want, read from the current state.
//! One small function per setting kind; each adds nothing when the machine lacks the
//! setting entirely, or one skipped change saying what is missing when that is news.

use super::settings::{format_mask, Cpuset, Form, Target};
use super::{BootAdvice, Change, Plan};
use crate::error::{Error, Result};
use crate::rt::affinity::format_cpu_list;
use crate::system::env::{cmdline_param, cmdline_params};
use crate::system::{cpu_list, interrupts, Environment, Root};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// The runtime settings for an audio workstation.
    Audio,
    /// `audio` plus what only a measurement box should get: RT throttling off (safe only
    /// with xrunlab's watchdog) and mitigations=off on the boot line.
    Measure,
}

impl std::fmt::Display for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Profile::Audio => "audio",
            Profile::Measure => "measure",
        })
    }
}

/// What every setting function looks at.
struct Ctx<'a> {
    root: &'a Root,
    profile: Profile,
    audio: &'a [usize],
    housekeeping: &'a [usize],
    online: &'a [usize],
}

/// A file change with the common fields filled in; skipped when the file is missing.
fn file_change(
    c: &Ctx,
    id: impl Into<String>,
    title: impl Into<String>,
    (path, form): (&str, Form),
    wanted: impl Into<String>,
    why: &str,
    addresses: Option<&str>,
) -> Change {
    let current = c.root.read(path);
    Change {
        id: id.into(),
        title: title.into(),
        skip: current.is_none().then(|| format!("{path} is missing")),
        target: Target::File {
            path: path.into(),
            form,
        },
        current,
        wanted: wanted.into(),
        why: why.into(),
        addresses: addresses.map(str::to_string),
    }
}

/// The plan for `profile` with `cpus` (None: the isolated CPUs of the command line, else
/// the last online CPU) set aside for audio.
pub fn build_plan(root: &Root, profile: Profile, cpus: Option<&[usize]>) -> Result<Plan> {
    let online = root
        .read("/sys/devices/system/cpu/online")
        .and_then(|s| cpu_list(&s))
        .filter(|l| !l.is_empty())
        .ok_or_else(|| Error::cannot_measure("cannot read /sys/devices/system/cpu/online"))?;
    let env = Environment::capture_at(root);
    let audio: Vec<usize> = match cpus {
        Some(c) => {
            if let Some(bad) = c.iter().find(|x| !online.contains(x)) {
                return Err(Error::usage(format!(
                    "--cpus: CPU {bad} is not online (online: {})",
                    format_cpu_list(&online)
                )));
            }
            if c.len() >= online.len() && online.len() > 1 {
                return Err(Error::usage(format!(
                    "--cpus {} leaves no CPU for everything else (online: {})",
                    format_cpu_list(c),
                    format_cpu_list(&online)
                )));
            }
            c.to_vec()
        }
        None => env
            .isolation
            .isolcpus
            .as_deref()
            .and_then(|v| {
                let digits: Vec<&str> = v
                    .split(',')
                    .filter(|p| p.starts_with(|ch: char| ch.is_ascii_digit()))
                    .collect();
                cpu_list(&digits.join(","))
            })
            .filter(|l| {
                !l.is_empty() && l.iter().all(|x| online.contains(x)) && l.len() < online.len()
            })
            .unwrap_or_else(|| vec![*online.last().expect("non-empty")]),
    };
    let housekeeping: Vec<usize> = online
        .iter()
        .copied()
        .filter(|x| !audio.contains(x))
        .collect();
    let c = Ctx {
        root,
        profile,
        audio: &audio,
        housekeeping: &housekeeping,
        online: &online,
    };
    let mut changes = Vec::new();
    cpufreq(&c, &mut changes);
    let card_irqs = sound_irqs(root);
    irq_affinity(&c, &card_irqs, &mut changes);
    irq_threads(&c, &card_irqs, &mut changes);
    workqueue(&c, &mut changes);
    let per_cpu = kthreads(&c, &mut changes);
    timer_migration(&c, &mut changes);
    cpuset(&c, &mut changes);
    rt_runtime(&c, &mut changes);
    swappiness(&c, &mut changes);
    let mut notes = vec![
        "/dev/cpu_dma_latency: `xrunlab latency` holds it at 0 µs while it runs, as cyclictest does (deep C-state exits are wake-up latency); the engines (`run`, `load`, JACK, PipeWire) do not, and neither does this profile: it is not persisted, closing the file releases it".to_string(),
    ];
    if profile == Profile::Measure {
        notes.push("kernel.sched_rt_runtime_us=-1 removes the kernel's guard against a runaway RT thread: use it only with xrunlab's watchdog running (every xrunlab measurement starts one), and restore afterwards".into());
    }
    if per_cpu > 0 {
        notes.push(format!("{per_cpu} per-CPU kernel threads stay on their CPU (bound to it by the kernel: ksoftirqd, migration, kworker/N…); isolcpus and nohz_full below quieten them"));
    }
    if housekeeping.is_empty() {
        notes.push("one CPU online: nothing can be set aside for audio".into());
    }
    Ok(Plan {
        profile,
        boot: boot(&c, &env),
        audio_cpus: audio,
        housekeeping_cpus: housekeeping,
        changes,
        notes,
    })
}

fn cpufreq(c: &Ctx, out: &mut Vec<Change>) {
    let mut any = false;
    for &cpu in c.online {
        let dir = format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq");
        if !c.root.exists(&dir) {
            continue;
        }
        any = true;
        let offered = |f: &str, v: &str| {
            c.root
                .read(&format!("{dir}/{f}"))
                .is_none_or(|s| s.split_whitespace().any(|w| w == v))
        };
        // The preference first: with intel_pstate, the performance governor pins it and
        // refuses later writes (EBUSY).
        let epp = format!("{dir}/energy_performance_preference");
        if c.root.exists(&epp) {
            let mut ch = file_change(
                c,
                format!("epp:cpu{cpu}"),
                format!("CPU {cpu} energy-performance preference"),
                (&epp, Form::Text),
                "performance",
                "the hardware ramps the clock for throughput, not savings: no slow first cycles after idle",
                Some("governor"),
            );
            if !offered("energy_performance_available_preferences", "performance") {
                ch.skip = Some("the driver does not offer 'performance'".into());
            }
            out.push(ch);
        }
        let mut ch = file_change(
            c,
            format!("governor:cpu{cpu}"),
            format!("CPU {cpu} frequency governor"),
            (&format!("{dir}/scaling_governor"), Form::Text),
            "performance",
            "a fixed top frequency: a cycle's compute time does not depend on how idle the CPU was",
            Some("governor"),
        );
        if !offered("scaling_available_governors", "performance") {
            ch.skip = Some("the driver does not offer the performance governor".into());
        }
        out.push(ch);
    }
    if !any {
        out.push(Change {
            id: "governor".into(),
            title: "CPU frequency governor".into(),
            target: Target::File {
                path: "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor".into(),
                form: Form::Text,
            },
            current: None,
            wanted: "performance".into(),
            why: "a fixed top frequency".into(),
            addresses: Some("governor".into()),
            skip: Some("no cpufreq: the frequency is not under the kernel's control (a VM, or a fixed clock)".into()),
        });
    }
}

/// IRQ numbers of the sound cards and of the controllers they hang off (a USB audio
/// interface's xhci), from the cards' device links and from handler names in
/// /proc/interrupts.
pub fn sound_irqs(root: &Root) -> BTreeSet<u32> {
    let mut irqs = BTreeSet::new();
    let sys = std::fs::canonicalize(root.path("/sys")).unwrap_or_else(|_| root.path("/sys"));
    for card in root
        .list("/sys/class/sound")
        .into_iter()
        .filter(|n| n.starts_with("card"))
    {
        let Ok(dev) = std::fs::canonicalize(root.path(&format!("/sys/class/sound/{card}/device")))
        else {
            continue;
        };
        // Walk up to the first device with interrupts: the PCI sound device itself, or the
        // USB host controller above a USB interface.
        for d in dev.ancestors().take_while(|d| d.starts_with(&sys)) {
            let msi: Vec<u32> = std::fs::read_dir(d.join("msi_irqs"))
                .map(|rd| {
                    rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                        .collect()
                })
                .unwrap_or_default();
            let legacy = std::fs::read_to_string(d.join("irq"))
                .ok()
                .and_then(|s| s.trim().parse::<u32>().ok())
                .filter(|&n| n > 0);
            if !msi.is_empty() || legacy.is_some() {
                irqs.extend(msi);
                irqs.extend(legacy);
                break;
            }
        }
    }
    let lines = interrupts::parse(&root.read("/proc/interrupts").unwrap_or_default());
    for l in lines {
        if l.devices
            .iter()
            .any(|d| interrupts::audio_relevant(d) == Some("sound"))
        {
            irqs.extend(l.irq.parse::<u32>().ok());
        }
    }
    irqs
}

fn irq_affinity(c: &Ctx, card: &BTreeSet<u32>, out: &mut Vec<Change>) {
    if c.housekeeping.is_empty() {
        return;
    }
    let mut irqs: Vec<u32> = c
        .root
        .list("/proc/irq")
        .iter()
        .filter_map(|n| n.parse().ok())
        .filter(|n| c.root.exists(&format!("/proc/irq/{n}/smp_affinity_list")))
        .collect();
    irqs.sort_unstable();
    for n in irqs {
        let (wanted, why) = if card.contains(&n) {
            (
                c.audio,
                "the sound card's interrupt is served on the audio CPUs, next to the thread it wakes",
            )
        } else {
            (
                c.housekeeping,
                "this device's interrupts no longer preempt the audio threads",
            )
        };
        out.push(file_change(
            c,
            format!("irq:{n}"),
            format!(
                "IRQ {n}{} affinity",
                if card.contains(&n) { " (sound)" } else { "" }
            ),
            (&format!("/proc/irq/{n}/smp_affinity_list"), Form::CpuList),
            format_cpu_list(wanted),
            why,
            Some("isolation"),
        ));
    }
}

/// The `irq/N-name` kernel threads: (pid, name, IRQ number).
fn irq_thread_list(root: &Root) -> Vec<(u32, String, u32)> {
    root.list("/proc")
        .iter()
        .filter_map(|p| p.parse::<u32>().ok())
        .filter_map(|pid| {
            let comm = root.read(&format!("/proc/{pid}/comm"))?;
            let irq = comm.strip_prefix("irq/")?.split('-').next()?.parse().ok()?;
            Some((pid, comm, irq))
        })
        .collect()
}

fn irq_threads(c: &Ctx, card: &BTreeSet<u32>, out: &mut Vec<Change>) {
    let threads = irq_thread_list(c.root);
    let skipped = |why: &str| Change {
        id: "irq-thread".into(),
        title: "Sound card IRQ thread priority".into(),
        target: Target::Thread {
            pid: 0,
            comm: String::new(),
        },
        current: None,
        wanted: "fifo 90".into(),
        why: "the card's interrupt work runs before other devices' (what rtirq does)".into(),
        addresses: Some("threadirqs".into()),
        skip: Some(why.into()),
    };
    if threads.is_empty() {
        out.push(skipped(
            "IRQs are not threaded: boot with threadirqs (below)",
        ));
        return;
    }
    if card.is_empty() {
        out.push(skipped("no sound card IRQ found"));
        return;
    }
    let mut ours = Vec::new();
    let mut highest_other = 0u32;
    for (pid, comm, irq) in &threads {
        let t = Target::Thread {
            pid: *pid,
            comm: comm.clone(),
        };
        let cur = super::settings::read(c.root, &t);
        if card.contains(irq) {
            ours.push((pid, comm, t, cur));
        } else if let Some(p) = cur.as_deref().and_then(|v| v.split_once(' ')) {
            highest_other = highest_other.max(p.1.parse().unwrap_or(0));
        }
    }
    if ours.is_empty() {
        out.push(skipped("the sound card's IRQ has no thread"));
        return;
    }
    // rtirq's default for sound is 90; above every other IRQ thread in any case.
    let prio = 90.max(highest_other + 1).min(98);
    for (pid, comm, target, current) in ours {
        out.push(Change {
            id: format!("irq-thread:{comm}"),
            title: format!("IRQ thread {comm} (pid {pid})"),
            skip: current.is_none().then(|| "cannot read its policy".into()),
            target,
            current,
            wanted: format!("fifo {prio}"),
            why: "the card's interrupt work runs before other devices' and before the audio threads it wakes (what rtirq does)".into(),
            addresses: Some("threadirqs".into()),
        });
    }
}

fn workqueue(c: &Ctx, out: &mut Vec<Change>) {
    let path = "/sys/devices/virtual/workqueue/cpumask";
    if c.housekeeping.is_empty() || !c.root.exists(path) {
        return;
    }
    out.push(file_change(
        c,
        "workqueue",
        "Unbound workqueue CPUs",
        (path, Form::CpuMask),
        format_mask(c.housekeeping),
        "kernel background work (writeback, crypto, …) stays off the audio CPUs",
        Some("isolation"),
    ));
}

/// Every kernel thread that may run on an audio CPU moves off it: one change per movable
/// thread (its affinity minus the audio CPUs), one skipped change naming those the kernel
/// keeps (`PF_NO_SETAFFINITY`). IRQ threads follow their IRQ's affinity and are left to it.
/// Returns how many per-CPU threads (bound to one CPU) were left alone.
fn kthreads(c: &Ctx, out: &mut Vec<Change>) -> usize {
    use super::settings::{thread_flags, PF_KTHREAD, PF_NO_SETAFFINITY};
    if c.housekeeping.is_empty() {
        return 0;
    }
    let mut pids: Vec<u32> = c
        .root
        .list("/proc")
        .iter()
        .filter_map(|p| p.parse().ok())
        .collect();
    pids.sort_unstable();
    let mut per_cpu = 0;
    let mut kept = Vec::new();
    for pid in pids {
        let Some(flags) = thread_flags(c.root, pid) else {
            continue;
        };
        let Some(comm) = c.root.read(&format!("/proc/{pid}/comm")) else {
            continue;
        };
        if flags & PF_KTHREAD == 0 || comm.starts_with("irq/") {
            continue;
        }
        let target = Target::Affinity {
            pid,
            comm: comm.clone(),
        };
        let Some(now) = super::settings::read(c.root, &target) else {
            continue;
        };
        let Some(cpus) = cpu_list(&now) else { continue };
        if cpus.len() == 1 {
            per_cpu += 1;
            continue;
        }
        if !cpus.iter().any(|x| c.audio.contains(x)) {
            continue;
        }
        if flags & PF_NO_SETAFFINITY != 0 {
            kept.push(comm);
            continue;
        }
        let rest: Vec<usize> = cpus
            .iter()
            .copied()
            .filter(|x| !c.audio.contains(x))
            .collect();
        let wanted = if rest.is_empty() {
            c.housekeeping
        } else {
            &rest
        };
        out.push(Change {
            id: format!("kthread:{pid}"),
            title: format!("Kernel thread {comm} (pid {pid}) CPUs"),
            target,
            current: Some(now),
            wanted: format_cpu_list(wanted),
            why: "kernel background work (RCU, kswapd, kcompactd, …) no longer preempts the audio threads".into(),
            addresses: Some("isolation".into()),
            skip: None,
        });
    }
    if !kept.is_empty() {
        let n = kept.len();
        kept.sort();
        kept.dedup();
        let names: Vec<&str> = kept.iter().take(8).map(String::as_str).collect();
        out.push(Change {
            id: "kthreads:kernel-managed".into(),
            title: format!("{n} kernel threads with kernel-managed CPUs"),
            target: Target::Affinity {
                pid: 0,
                comm: String::new(),
            },
            current: None,
            wanted: format_cpu_list(c.housekeeping),
            why: "their affinity is the kernel's (PF_NO_SETAFFINITY)".into(),
            addresses: Some("isolation".into()),
            skip: Some(format!(
                "the kernel refuses to move them (PF_NO_SETAFFINITY; unbound workqueue workers follow the workqueue cpumask): {}{}",
                names.join(", "),
                if kept.len() > names.len() { ", …" } else { "" }
            )),
        });
    }
    per_cpu
}

fn timer_migration(c: &Ctx, out: &mut Vec<Change>) {
    let path = "/proc/sys/kernel/timer_migration";
    if !c.root.exists(path) {
        return;
    }
    out.push(file_change(
        c,
        "timer-migration",
        "Timer migration",
        (path, Form::Text),
        "0",
        "timers of idle CPUs are not moved onto the busy audio CPU",
        Some("isolation"),
    ));
}

/// The hierarchy to make the audio cpuset in: cgroup v2 when its cpuset controller is
/// available there, else a v1 cpuset mount.
fn cpuset_target(c: &Ctx) -> Option<Cpuset> {
    let mounts = c.root.read("/proc/mounts").unwrap_or_default();
    let mut v1 = None;
    let mut v2 = None;
    for l in mounts.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (Some(dir), Some(fs), Some(opts)) = (f.get(1), f.get(2), f.get(3)) else {
            continue;
        };
        match *fs {
            "cgroup2" => {
                let ctl = c.root.read(&format!("{dir}/cgroup.controllers"));
                if ctl.is_some_and(|s| s.split_whitespace().any(|w| w == "cpuset")) {
                    v2.get_or_insert(dir.to_string());
                }
            }
            "cgroup" if opts.split(',').any(|o| o == "cpuset") => {
                v1.get_or_insert((dir.to_string(), !opts.split(',').any(|o| o == "noprefix")));
            }
            _ => {}
        }
    }
    let make = |mount: String, v2: bool, prefixed: bool| Cpuset {
        mount,
        v2,
        prefixed,
        audio_cpus: c.audio.to_vec(),
        housekeeping_cpus: c.housekeeping.to_vec(),
    };
    v2.map(|m| make(m, true, true))
        .or_else(|| v1.map(|(m, p)| make(m, false, p)))
}

fn cpuset(c: &Ctx, out: &mut Vec<Change>) {
    if c.housekeeping.is_empty() {
        return;
    }
    let Some(cs) = cpuset_target(c) else {
        out.push(Change {
            id: "cpuset".into(),
            title: "Exclusive cpuset for audio".into(),
            target: Target::File {
                path: "/sys/fs/cgroup".into(),
                form: Form::Text,
            },
            current: None,
            wanted: "present".into(),
            why: "only tasks placed there run on the audio CPUs".into(),
            addresses: Some("isolation".into()),
            skip: Some("no cpuset controller mounted (cgroup v1 cpuset or v2 with cpuset)".into()),
        });
        return;
    };
    let (title, why) = if cs.v2 {
        (
            format!("cgroup v2 partition {}/{}", cs.mount, super::settings::AUDIO_GROUP),
            "a partition root takes the audio CPUs from every other cgroup: only tasks placed there run on them",
        )
    } else {
        (
            format!("cpuset {}/{} (exclusive), the rest in {}", cs.mount, super::settings::AUDIO_GROUP, super::settings::SYSTEM_GROUP),
            "every movable task moves to the housekeeping CPUs; only tasks placed in the audio cpuset run on the audio CPUs",
        )
    };
    let target = Target::Cpuset(cs);
    let current = super::settings::read(c.root, &target);
    out.push(Change {
        id: "cpuset".into(),
        title,
        target,
        current,
        wanted: "present".into(),
        why: why.into(),
        addresses: Some("isolation".into()),
        skip: None,
    });
}

fn rt_runtime(c: &Ctx, out: &mut Vec<Change>) {
    let path = "/proc/sys/kernel/sched_rt_runtime_us";
    if c.profile != Profile::Measure || !c.root.exists(path) {
        return;
    }
    out.push(file_change(
        c,
        "rt-runtime",
        "RT throttling (kernel.sched_rt_runtime_us)",
        (path, Form::Text),
        "-1",
        "a busy RT thread is not stopped for 50 ms each second; only together with xrunlab's watchdog",
        Some("rt-throttling"),
    ));
}

fn swappiness(c: &Ctx, out: &mut Vec<Change>) {
    let path = "/proc/sys/vm/swappiness";
    let Some(now) = c.root.read(path) else { return };
    // Lower is the aim; a value already below 10 stays.
    let wanted = now.parse::<u32>().map_or(10, |v| v.min(10));
    out.push(file_change(
        c,
        "swappiness",
        "vm.swappiness",
        (path, Form::Text),
        wanted.to_string(),
        "the kernel keeps anonymous memory (audio buffers of unlocked processes) in RAM",
        Some("swap"),
    ));
}

/// Kernel parameters the profile would need that the running kernel was not booted with.
fn boot(c: &Ctx, env: &Environment) -> BootAdvice {
    let cmd = &env.cmdline;
    let has = |k: &str| cmdline_params(cmd).iter().any(|(key, _)| key == k);
    let mut add: Vec<(String, String)> = Vec::new();
    let rt = env.preempt.model == "rt";
    if !rt && !has("threadirqs") {
        add.push((
            "threadirqs".into(),
            "IRQ handlers become threads whose priority can be set (check: threadirqs)".into(),
        ));
    }
    if !rt && env.preempt.dynamic && cmdline_param(cmd, "preempt").as_deref() != Some("full") {
        add.push((
            "preempt=full".into(),
            "full preemption on this PREEMPT_DYNAMIC kernel (check: preempt)".into(),
        ));
    }
    if !c.housekeeping.is_empty() {
        let a = format_cpu_list(c.audio);
        if !has("isolcpus") {
            add.push((format!("isolcpus=managed_irq,domain,{a}"), "the scheduler and managed IRQs leave the audio CPUs alone from boot (check: isolation)".into()));
        }
        if !has("nohz_full") {
            add.push((
                format!("nohz_full={a}"),
                "no timer tick on an audio CPU running one task (check: tickless)".into(),
            ));
        }
        if !has("rcu_nocbs") {
            add.push((
                format!("rcu_nocbs={a}"),
                "RCU callbacks run elsewhere (check: isolation)".into(),
            ));
        }
        if !has("irqaffinity") {
            add.push((
                format!("irqaffinity={}", format_cpu_list(c.housekeeping)),
                "IRQs start on the housekeeping CPUs, before any tuning".into(),
            ));
        }
    }
    if c.profile == Profile::Measure && cmdline_param(cmd, "mitigations").as_deref() != Some("off")
    {
        add.push(("mitigations=off".into(), "no speculative-execution mitigation costs on kernel entry; only on a box that runs no untrusted code (check: mitigations)".into()));
    }
    let cmdline = add
        .iter()
        .map(|(p, _)| p.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    BootAdvice { add, cmdline }
}
