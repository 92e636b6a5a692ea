//! `xrunlab check`: is this system set up for real-time audio? rtcqs's checks plus what
//! real-time audio measurement needs. Each check reports ok / warn / fail, what it observed
//! and one line of advice.
//!
//! Every check reads through [`Root`], so fixture trees decide the verdicts in tests; the
//! two probes that must act on the system (trying SCHED_FIFO, opening
//! `/dev/cpu_dma_latency`) run only on the live root and are inferred from files otherwise.

use super::env::{cmdline_param, detect_container, detect_virtualization};
use super::interrupts;
use super::kconfig::KernelConfig;
use super::probe::PROBE_PRIORITY;
use super::{Environment, Root};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Ok,
    Warn,
    Fail,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CheckItem {
    /// Stable identifier, e.g. `rt-priority`.
    pub id: String,
    pub title: String,
    pub verdict: Verdict,
    pub observed: String,
    /// One line on what to do; empty when nothing needs doing.
    pub advice: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CheckConfig {
    /// Root the probes read from (`/` on a live system).
    pub root: String,
    pub strict: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CheckReport {
    pub checks: Vec<CheckItem>,
    pub ok: usize,
    pub warn: usize,
    pub fail: usize,
}

impl CheckReport {
    fn from_items(checks: Vec<CheckItem>) -> Self {
        let count = |v| checks.iter().filter(|c| c.verdict == v).count();
        CheckReport {
            ok: count(Verdict::Ok),
            warn: count(Verdict::Warn),
            fail: count(Verdict::Fail),
            checks,
        }
    }

    pub fn get(&self, id: &str) -> Option<&CheckItem> {
        self.checks.iter().find(|c| c.id == id)
    }
}

fn item(
    id: &str,
    title: &str,
    verdict: Verdict,
    observed: impl Into<String>,
    advice: &str,
) -> CheckItem {
    CheckItem {
        id: id.into(),
        title: title.into(),
        verdict,
        observed: observed.into(),
        advice: if verdict == Verdict::Ok {
            String::new()
        } else {
            advice.into()
        },
    }
}

/// What every check may look at.
struct Ctx<'a> {
    root: &'a Root,
    env: &'a Environment,
    config: Option<KernelConfig>,
}

/// Run every check against `root` (and, when it is the live system, the live probes).
pub fn run_checks(root: &Root, env: &Environment) -> CheckReport {
    let ctx = Ctx {
        root,
        env,
        config: KernelConfig::read(root, &env.kernel),
    };
    let checks: [fn(&Ctx) -> CheckItem; 22] = [
        user,
        rtprio_limit,
        rt_priority,
        memlock,
        cpu_dma_latency,
        preempt,
        threadirqs,
        kernel_config,
        hrtimers,
        tickless,
        rt_throttling,
        mitigations,
        governor,
        smt,
        isolation,
        clocksource,
        sound_cards,
        irq_sharing,
        swap,
        filesystems,
        virtualization,
        container,
    ];
    CheckReport::from_items(checks.iter().map(|c| c(&ctx)).collect())
}

const LIMITS_HINT: &str = "add the user to group audio and put '@audio - rtprio 95' and '@audio - memlock unlimited' in /etc/security/limits.d/audio.conf, then log in again";

/// Supplementary groups of this process by name (gids without an /etc/group entry stay
/// numeric).
fn group_names(root: &Root) -> Vec<String> {
    let status = root.read("/proc/self/status").unwrap_or_default();
    let gids: Vec<&str> = status
        .lines()
        .filter(|l| l.starts_with("Groups:") || l.starts_with("Gid:"))
        .flat_map(|l| {
            let ws = l.split_whitespace().skip(1);
            // Of the Gid: line only the effective gid counts.
            if l.starts_with("Gid:") {
                ws.skip(1).take(1).collect::<Vec<_>>()
            } else {
                ws.collect()
            }
        })
        .collect();
    let groups = root.read("/etc/group").unwrap_or_default();
    let mut names: Vec<String> = gids
        .iter()
        .map(|gid| {
            groups
                .lines()
                .find_map(|l| {
                    let f: Vec<&str> = l.split(':').collect();
                    (f.len() >= 3 && f[2] == *gid).then(|| f[0].to_string())
                })
                .unwrap_or_else(|| gid.to_string())
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

fn user(c: &Ctx) -> CheckItem {
    const T: (&str, &str) = ("user", "User and audio group");
    let euid = c.env.limits.euid;
    if euid == 0 {
        return item(
            T.0,
            T.1,
            Verdict::Ok,
            "root (uid 0): full rights here; a normal user's groups and limits are not checked",
            "",
        );
    }
    let groups = group_names(c.root);
    let rt_groups = ["audio", "realtime", "pipewire", "jackuser"];
    match groups.iter().find(|g| rt_groups.contains(&g.as_str())) {
        Some(g) => item(
            T.0,
            T.1,
            Verdict::Ok,
            format!("uid {euid}, in group {g}"),
            "",
        ),
        None => item(
            T.0,
            T.1,
            Verdict::Warn,
            format!(
                "uid {euid}, groups: {} (no audio/realtime group)",
                if groups.is_empty() {
                    "none".to_string()
                } else {
                    groups.join(", ")
                }
            ),
            "sudo usermod -aG audio $USER, then log in again",
        ),
    }
}

fn rtprio_limit(c: &Ctx) -> CheckItem {
    const T: (&str, &str) = ("rtprio-limit", "RLIMIT_RTPRIO");
    let l = &c.env.limits;
    if l.euid == 0 {
        return item(
            T.0,
            T.1,
            Verdict::Ok,
            format!("{} (root is not bound by it)", l.rtprio),
            "",
        );
    }
    let n = match l.rtprio.as_str() {
        "unlimited" => Some(99),
        v => v.parse::<u32>().ok(),
    };
    match n {
        Some(n) if n >= PROBE_PRIORITY => item(T.0, T.1, Verdict::Ok, l.rtprio.clone(), ""),
        Some(n) if n > 0 => item(
            T.0,
            T.1,
            Verdict::Warn,
            format!("{n}: below the {PROBE_PRIORITY}+ that JACK and PipeWire ask for"),
            LIMITS_HINT,
        ),
        Some(_) => item(
            T.0,
            T.1,
            Verdict::Fail,
            "0: no real-time scheduling allowed",
            LIMITS_HINT,
        ),
        None => item(
            T.0,
            T.1,
            Verdict::Warn,
            format!("{} (/proc/self/limits not readable)", l.rtprio),
            "run ulimit -r to see the limit",
        ),
    }
}

fn rt_priority(c: &Ctx) -> CheckItem {
    rt_priority_verdict(&c.env.limits)
}

/// The `rt-priority` verdict from the live probe, or inferred from the limits when the
/// probe did not run (fixtures). Separate so its logic is testable without privileges.
pub fn rt_priority_verdict(l: &super::Limits) -> CheckItem {
    const T: (&str, &str) = ("rt-priority", "RT priority obtainable");
    match &l.rt_probe {
        Some(p) if p.obtained => item(T.0, T.1, Verdict::Ok, p.detail.clone(), ""),
        Some(p) => item(
            T.0,
            T.1,
            Verdict::Fail,
            format!("SCHED_FIFO {PROBE_PRIORITY} refused: {}", p.reason()),
            if l.euid == 0 {
                "root was refused: a cgroup with cpu.rt_runtime_us = 0 (RT group scheduling) or a container without CAP_SYS_NICE; run in the root cgroup or grant the capability"
            } else {
                LIMITS_HINT
            },
        ),
        None => {
            let n = match l.rtprio.as_str() {
                "unlimited" => Some(99),
                v => v.parse::<u32>().ok(),
            };
            let (verdict, why) = if l.euid == 0 {
                (Verdict::Ok, "root".to_string())
            } else {
                match n {
                    Some(n) if n >= PROBE_PRIORITY => {
                        (Verdict::Ok, format!("RLIMIT_RTPRIO {n} allows it"))
                    }
                    Some(0) => (Verdict::Fail, "RLIMIT_RTPRIO 0 forbids it".to_string()),
                    Some(n) => (
                        Verdict::Warn,
                        format!("RLIMIT_RTPRIO {n} allows only priorities up to {n}"),
                    ),
                    None => (Verdict::Warn, "limits not readable".to_string()),
                }
            };
            item(
                T.0,
                T.1,
                verdict,
                format!("not probed (fixture); {why}"),
                LIMITS_HINT,
            )
        }
    }
}

/// Bytes as a short human figure (limits are powers of two in practice).
fn human_bytes(b: u64) -> String {
    const MIB: u64 = 1 << 20;
    if b >= 1 << 30 && b.is_multiple_of(1 << 30) {
        format!("{} GiB", b >> 30)
    } else if b >= MIB {
        format!("{} MiB", b / MIB)
    } else {
        format!("{} KiB", b / 1024)
    }
}

fn memlock(c: &Ctx) -> CheckItem {
    const T: (&str, &str) = ("memlock", "Locked-memory limit");
    let v = c.env.limits.memlock.as_str();
    let shown = match v.parse::<u64>() {
        Ok(b) => human_bytes(b),
        Err(_) => v.to_string(),
    };
    if c.env.limits.euid == 0 {
        return item(
            T.0,
            T.1,
            Verdict::Ok,
            format!("{shown} (root: CAP_IPC_LOCK ignores it)"),
            "",
        );
    }
    match v.parse::<u64>() {
        _ if v == "unlimited" => item(T.0, T.1, Verdict::Ok, "unlimited", ""),
        Ok(b) if b >= 512 << 20 => item(T.0, T.1, Verdict::Ok, shown, ""),
        Ok(_) => item(
            T.0,
            T.1,
            Verdict::Warn,
            format!("{shown}: mlockall of an audio engine will fail, so its memory can be paged out"),
            "put '@audio - memlock unlimited' in /etc/security/limits.d/audio.conf and log in again",
        ),
        Err(_) => item(
            T.0,
            T.1,
            Verdict::Warn,
            format!("{v} (/proc/self/limits not readable)"),
            "run ulimit -l to see the limit",
        ),
    }
}

fn cpu_dma_latency(c: &Ctx) -> CheckItem {
    const T: (&str, &str) = ("cpu-dma-latency", "/dev/cpu_dma_latency");
    let path = c.root.path("/dev/cpu_dma_latency");
    let advice_absent =
        "the kernel has no PM QoS device: deep C-state exits cannot be prevented from user space";
    if !path.exists() {
        return item(T.0, T.1, Verdict::Warn, "absent", advice_absent);
    }
    if !c.root.is_live() {
        return item(
            T.0,
            T.1,
            Verdict::Ok,
            "present; writability not probed (fixture)",
            "",
        );
    }
    match super::probe::dma_latency_writable(&path) {
        Ok(()) => item(
            T.0,
            T.1,
            Verdict::Ok,
            "writable: C-state exit latency can be capped during runs",
            "",
        ),
        Err(e) => item(
            T.0,
            T.1,
            Verdict::Warn,
            format!("not writable ({e})"),
            "udev rule KERNEL==\"cpu_dma_latency\", GROUP=\"audio\", MODE=\"0660\" lets audio apps keep CPUs out of deep C-states",
        ),
    }
}

fn preempt(c: &Ctx) -> CheckItem {
    const T: (&str, &str) = ("preempt", "Kernel preemption model");
    let p = &c.env.preempt;
    let model = p.model.as_str();
    let observed = format!(
        "{model}{} — {}",
        if p.dynamic && model != "rt" {
            " (PREEMPT_DYNAMIC)"
        } else {
            ""
        },
        p.source
    );
    let verdict = match model {
        "rt" | "full" | "lazy" => Verdict::Ok,
        "none" | "voluntary" | "none or voluntary" => Verdict::Fail,
        _ => Verdict::Warn,
    };
    item(
        T.0,
        T.1,
        verdict,
        observed,
        if p.dynamic {
            "boot with preempt=full threadirqs (this PREEMPT_DYNAMIC kernel can switch), or install a PREEMPT_RT kernel (linux-image-rt-amd64/-arm64)"
        } else {
            "install a PREEMPT_RT kernel (Debian: linux-image-rt-amd64 / linux-image-rt-arm64)"
        },
    )
}

fn threadirqs(c: &Ctx) -> CheckItem {
    const T: (&str, &str) = ("threadirqs", "Threaded IRQs");
    if c.env.preempt.model == "rt" {
        return item(T.0, T.1, Verdict::Ok, "always on under PREEMPT_RT", "");
    }
    if c.env.isolation.threadirqs {
        return item(T.0, T.1, Verdict::Ok, "threadirqs on the command line", "");
    }
    let unavailable = c
        .config
        .as_ref()
        .is_some_and(|k| !k.is_y("IRQ_FORCED_THREADING"));
    item(
        T.0,
        T.1,
        Verdict::Warn,
        if unavailable {
            "off, and the kernel lacks CONFIG_IRQ_FORCED_THREADING"
        } else {
            "off: IRQ handlers run in hard-IRQ context, ahead of any audio thread"
        },
        "add threadirqs to the kernel command line, then raise the sound card's IRQ thread priority (rtirq)",
    )
}

fn kernel_config(c: &Ctx) -> CheckItem {
    const T: (&str, &str) = ("kernel-config", "Kernel configuration");
    match &c.config {
        Some(k) => item(T.0, T.1, Verdict::Ok, format!("read from {}", k.source), ""),
        None => item(
            T.0,
            T.1,
            Verdict::Warn,
            format!(
                "not readable (no /boot/config-{}, no /proc/config.gz or no zcat)",
                c.env.kernel
            ),
            "install the kernel's config file, or load the configs module for /proc/config.gz",
        ),
    }
}

fn hrtimers(c: &Ctx) -> CheckItem {
    const T: (&str, &str) = ("hrtimers", "High-resolution timers");
    const ADVICE: &str =
        "use a kernel built with CONFIG_HIGH_RES_TIMERS=y (every distribution kernel is)";
    if let Some(k) = &c.config {
        return if k.is_y("HIGH_RES_TIMERS") {
            item(T.0, T.1, Verdict::Ok, "CONFIG_HIGH_RES_TIMERS=y", "")
        } else {
            item(
                T.0,
                T.1,
                Verdict::Fail,
                "CONFIG_HIGH_RES_TIMERS not set: timers fire on the tick only",
                ADVICE,
            )
        };
    }
    // Without the config, the timer list says whether high-resolution mode is active.
    match c.root.read("/proc/timer_list").and_then(|t| {
        t.lines()
            .find(|l| l.trim_start().starts_with(".hres_active"))
            .and_then(|l| l.split(':').nth(1))
            .map(|v| v.trim() == "1")
    }) {
        Some(true) => item(T.0, T.1, Verdict::Ok, "active (/proc/timer_list)", ""),
        Some(false) => item(
            T.0,
            T.1,
            Verdict::Fail,
            "inactive (/proc/timer_list)",
            ADVICE,
        ),
        None => item(
            T.0,
            T.1,
            Verdict::Warn,
            "not readable (no kernel config, no /proc/timer_list)",
            "run as root so /proc/timer_list is readable",
        ),
    }
}

fn tickless(c: &Ctx) -> CheckItem {
    const T: (&str, &str) = ("tickless", "Timer tick (NO_HZ)");
    let Some(k) = &c.config else {
        return item(
            T.0,
            T.1,
            Verdict::Warn,
            "not readable (no kernel config)",
            "install the kernel's config file to check CONFIG_NO_HZ_*",
        );
    };
    let hz = k.get("HZ").map(|h| format!(", HZ={h}")).unwrap_or_default();
    if k.is_y("NO_HZ_FULL") {
        item(T.0, T.1, Verdict::Ok, format!("NO_HZ_FULL{hz}"), "")
    } else if k.is_y("NO_HZ_IDLE") || k.is_y("NO_HZ") {
        item(T.0, T.1, Verdict::Ok, format!("NO_HZ_IDLE{hz}"), "")
    } else {
        item(
            T.0,
            T.1,
            Verdict::Warn,
            format!("periodic tick{hz}"),
            "a kernel with CONFIG_NO_HZ_IDLE (or NO_HZ_FULL) lets idle CPUs skip the tick",
        )
    }
}

fn rt_throttling(c: &Ctx) -> CheckItem {
    const T: (&str, &str) = ("rt-throttling", "RT throttling");
    let l = &c.env.limits;
    match l.sched_rt_runtime_us {
        Some(v) if v < 0 => item(
            T.0,
            T.1,
            Verdict::Ok,
            format!("off (sched_rt_runtime_us = {v})"),
            "",
        ),
        Some(v) => {
            let period = l.sched_rt_period_us.unwrap_or(1_000_000);
            item(
                T.0,
                T.1,
                Verdict::Warn,
                format!(
                    "on: RT tasks may run {} ms of every {} ms (sched_rt_runtime_us = {v})",
                    v as f64 / 1000.0,
                    period / 1000
                ),
                "a runaway RT thread is stopped, but so is a busy audio thread; for measurements: sysctl kernel.sched_rt_runtime_us=-1 (xrunlab's watchdog guards the machine)",
            )
        }
        None => item(
            T.0,
            T.1,
            Verdict::Warn,
            "not readable",
            "/proc/sys/kernel/sched_rt_runtime_us is missing",
        ),
    }
}

fn mitigations(c: &Ctx) -> CheckItem {
    const T: (&str, &str) = ("mitigations", "CPU vulnerability mitigations");
    let param = cmdline_param(&c.env.cmdline, "mitigations");
    if param.as_deref() == Some("off") {
        return item(
            T.0,
            T.1,
            Verdict::Ok,
            "off (mitigations=off): fastest kernel entry, least protection",
            "",
        );
    }
    let dir = "/sys/devices/system/cpu/vulnerabilities";
    let listed = c.root.list(dir);
    let active: Vec<&String> = listed
        .iter()
        .filter(|v| {
            c.root
                .read(&format!("{dir}/{v}"))
                .is_some_and(|t| t.starts_with("Mitigation"))
        })
        .collect();
    let how = match &param {
        Some(p) => format!("mitigations={p}"),
        None => "kernel default".to_string(),
    };
    if listed.is_empty() {
        return item(
            T.0,
            T.1,
            Verdict::Warn,
            format!("{how}; {dir} not readable"),
            "mitigations=off saves time on every kernel entry; only for offline, dedicated audio machines",
        );
    }
    if active.is_empty() {
        return item(
            T.0,
            T.1,
            Verdict::Ok,
            format!("{how}; nothing is mitigated on this CPU"),
            "",
        );
    }
    item(
        T.0,
        T.1,
        Verdict::Warn,
        format!(
            "{how}; {} active: {}",
            active.len(),
            active
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        "mitigations=off saves time on every kernel entry and context switch; only for offline, dedicated audio machines",
    )
}

/// CPUs grouped by a per-CPU value: "cpu0-3: performance; cpu4,6: powersave".
fn group_by_cpu(per_cpu: &[(usize, String)]) -> String {
    let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
    for (cpu, v) in per_cpu {
        match groups.iter_mut().find(|(g, _)| g == v) {
            Some((_, cpus)) => cpus.push(*cpu),
            None => groups.push((v.clone(), vec![*cpu])),
        }
    }
    groups
        .iter()
        .map(|(v, cpus)| format!("cpu{}: {v}", crate::rt::affinity::format_cpu_list(cpus)))
        .collect::<Vec<_>>()
        .join("; ")
}

fn governor(c: &Ctx) -> CheckItem {
    const T: (&str, &str) = ("governor", "CPU frequency governor");
    let online = super::cpu_list(&c.env.cpus.online).unwrap_or_default();
    let per_cpu: Vec<(usize, String)> = online
        .iter()
        .filter_map(|cpu| {
            c.root
                .read(&format!(
                    "/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor"
                ))
                .map(|g| (*cpu, g))
        })
        .collect();
    if per_cpu.is_empty() {
        return if c.env.virtualization.is_some() {
            item(
                T.0,
                T.1,
                Verdict::Ok,
                "no cpufreq (virtual machine: the host sets the frequency)",
                "",
            )
        } else {
            item(
                T.0,
                T.1,
                Verdict::Warn,
                "no cpufreq driver: firmware alone sets the frequency",
                "check the BIOS/firmware power settings, or load the cpufreq driver (intel_pstate, amd-pstate, acpi-cpufreq, cpufreq-dt)",
            )
        };
    }
    let all_perf = per_cpu.iter().all(|(_, g)| g == "performance");
    let mut observed = group_by_cpu(&per_cpu);
    if per_cpu.len() < online.len() {
        observed.push_str(&format!(
            " ({} of {} online CPUs report one)",
            per_cpu.len(),
            online.len()
        ));
    }
    item(
        T.0,
        T.1,
        if all_perf { Verdict::Ok } else { Verdict::Warn },
        observed,
        "frequency ramps add latency and change DSP load: cpupower frequency-set -g performance",
    )
}

fn smt(c: &Ctx) -> CheckItem {
    const T: (&str, &str) = ("smt", "SMT (hyper-threading)");
    let control = c.root.read("/sys/devices/system/cpu/smt/control");
    match (c.env.smt, control.as_deref()) {
        (Some(true), _) => item(
            T.0,
            T.1,
            Verdict::Warn,
            "active: sibling threads share a core's execution units",
            "a busy sibling slows the audio thread unpredictably: boot with nosmt, or echo off > /sys/devices/system/cpu/smt/control",
        ),
        (_, Some("notsupported")) | (_, Some("notimplemented")) => item(
            T.0,
            T.1,
            Verdict::Ok,
            if c.env.virtualization.is_some() {
                "not supported by the virtual CPU (host threads may still be siblings)"
            } else {
                "not supported by this CPU"
            },
            "",
        ),
        (Some(false), ctl) => item(
            T.0,
            T.1,
            Verdict::Ok,
            format!("inactive (control: {})", ctl.unwrap_or("unknown")),
            "",
        ),
        (None, _) => item(T.0, T.1, Verdict::Ok, "not reported by the kernel", ""),
    }
}

/// CPU numbers of an isolation parameter; `isolcpus` may lead with flags
/// (`isolcpus=nohz,domain,managed_irq,2-3`).
fn isolated_cpus(v: &str) -> Option<Vec<usize>> {
    let list: Vec<&str> = v
        .split(',')
        .filter(|p| p.starts_with(|c: char| c.is_ascii_digit()))
        .collect();
    super::cpu_list(&list.join(",")).filter(|l| !l.is_empty())
}

fn isolation(c: &Ctx) -> CheckItem {
    const T: (&str, &str) = ("isolation", "CPU isolation");
    let iso = &c.env.isolation;
    let n = c.env.cpus.count;
    let Some(isol) = iso.isolcpus.as_deref().or(iso.nohz_full.as_deref()) else {
        return if n < 4 {
            item(
                T.0,
                T.1,
                Verdict::Ok,
                format!("none ({n} CPUs: too few to set one aside)"),
                "",
            )
        } else {
            item(
                T.0,
                T.1,
                Verdict::Warn,
                format!("none of {n} CPUs set aside"),
                "optional: isolcpus=N nohz_full=N rcu_nocbs=N keeps other work off the audio CPU",
            )
        };
    };
    let describe = |k: &str, v: &Option<String>| v.as_ref().map(|v| format!("{k}={v}"));
    let set: Vec<String> = [
        describe("isolcpus", &iso.isolcpus),
        describe("nohz_full", &iso.nohz_full),
        describe("rcu_nocbs", &iso.rcu_nocbs),
    ]
    .into_iter()
    .flatten()
    .collect();
    let online = super::cpu_list(&c.env.cpus.online).unwrap_or_default();
    let Some(cpus) = isolated_cpus(isol) else {
        return item(
            T.0,
            T.1,
            Verdict::Warn,
            format!("{}: CPU list not understood", set.join(" ")),
            "give plain CPU lists such as isolcpus=3 nohz_full=3 rcu_nocbs=3",
        );
    };
    if let Some(bad) = cpus.iter().find(|c| !online.contains(c)) {
        return item(
            T.0,
            T.1,
            Verdict::Warn,
            format!("{}: CPU {bad} is not online", set.join(" ")),
            "isolate CPUs that exist and are online",
        );
    }
    if cpus.len() >= online.len() && !online.is_empty() {
        return item(
            T.0,
            T.1,
            Verdict::Warn,
            format!("{}: every CPU isolated", set.join(" ")),
            "leave at least one CPU for housekeeping",
        );
    }
    let missing: Vec<&str> = [("nohz_full", &iso.nohz_full), ("rcu_nocbs", &iso.rcu_nocbs)]
        .iter()
        .filter(|(_, v)| v.is_none())
        .map(|(k, _)| *k)
        .collect();
    let mut observed = format!(
        "{} (CPU {} for RT work)",
        set.join(" "),
        crate::rt::affinity::format_cpu_list(&cpus)
    );
    if !missing.is_empty() {
        observed.push_str(&format!("; {} not set", missing.join(", ")));
    }
    item(T.0, T.1, Verdict::Ok, observed, "")
}

fn clocksource(c: &Ctx) -> CheckItem {
    const T: (&str, &str) = ("clocksource", "Clocksource");
    match c.env.clocksource.as_deref() {
        Some(s @ ("tsc" | "arch_sys_counter")) => item(T.0, T.1, Verdict::Ok, s, ""),
        Some(s) => item(
            T.0,
            T.1,
            Verdict::Warn,
            format!("{s}: slower to read or less precise than the CPU counter"),
            "if the kernel switched away from tsc (dmesg | grep -i clocksource), fix the cause or boot with tsc=reliable only when the TSC is known good",
        ),
        None => item(
            T.0,
            T.1,
            Verdict::Warn,
            "not readable",
            "/sys/devices/system/clocksource/clocksource0/current_clocksource is missing",
        ),
    }
}

fn sound_cards(c: &Ctx) -> CheckItem {
    const T: (&str, &str) = ("sound-card", "Sound cards");
    let cards: Vec<String> = c
        .root
        .read("/proc/asound/cards")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            // Card lines look like " 0 [PCH            ]: HDA-Intel - HDA Intel PCH".
            let t = l.trim_start();
            let (num, rest) = t.split_once(' ')?;
            if num.is_empty() || !num.chars().all(|c| c.is_ascii_digit()) {
                return None;
            }
            let name = rest.split_once(" - ").map_or(rest, |(_, n)| n).trim();
            Some(format!("{num}: {name}"))
        })
        .collect();
    if cards.is_empty() {
        item(
            T.0,
            T.1,
            Verdict::Warn,
            "no ALSA sound card",
            "only the virtual and sim drivers can run here; round-trip and JACK/ALSA hardware tests need a card",
        )
    } else {
        item(T.0, T.1, Verdict::Ok, cards.join("; "), "")
    }
}

fn irq_sharing(c: &Ctx) -> CheckItem {
    const T: (&str, &str) = ("irq-sharing", "Sound/USB IRQ sharing");
    let Some(text) = c.root.read("/proc/interrupts") else {
        return item(
            T.0,
            T.1,
            Verdict::Warn,
            "/proc/interrupts not readable",
            "run on a system with /proc mounted",
        );
    };
    let s = interrupts::sharing(&interrupts::parse(&text));
    if !s.shared.is_empty() {
        let lines: Vec<String> = s
            .shared
            .iter()
            .map(|l| format!("IRQ {}: {}", l.irq, l.devices.join(" + ")))
            .collect();
        return item(
            T.0,
            T.1,
            Verdict::Warn,
            format!("shared: {}", lines.join("; ")),
            "every interrupt on a shared line runs all its handlers: move the interface to another port/slot, or enable MSI",
        );
    }
    if s.exclusive.is_empty() {
        return item(
            T.0,
            T.1,
            Verdict::Ok,
            "no sound or USB controller interrupts",
            "",
        );
    }
    let names: Vec<String> = s
        .exclusive
        .iter()
        .map(|l| format!("{} (IRQ {})", l.devices.join(""), l.irq))
        .collect();
    item(
        T.0,
        T.1,
        Verdict::Ok,
        format!("not shared: {}", names.join(", ")),
        "",
    )
}

fn swap(c: &Ctx) -> CheckItem {
    const T: (&str, &str) = ("swap", "Swap and swappiness");
    let swaps: Vec<String> = c
        .root
        .read("/proc/swaps")
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    if swaps.is_empty() {
        return item(T.0, T.1, Verdict::Ok, "no swap", "");
    }
    let swappiness = c
        .root
        .read("/proc/sys/vm/swappiness")
        .and_then(|s| s.parse::<u32>().ok());
    let on = format!("swap on {}", swaps.join(", "));
    match swappiness {
        Some(v) if v <= 10 => item(T.0, T.1, Verdict::Ok, format!("{on}, swappiness {v}"), ""),
        Some(v) => item(
            T.0,
            T.1,
            Verdict::Warn,
            format!("{on}, swappiness {v}"),
            "sysctl vm.swappiness=10 (persist in /etc/sysctl.d/) so audio memory is not swapped out",
        ),
        None => item(
            T.0,
            T.1,
            Verdict::Warn,
            format!("{on}, swappiness not readable"),
            "check sysctl vm.swappiness",
        ),
    }
}

fn filesystems(c: &Ctx) -> CheckItem {
    const T: (&str, &str) = ("filesystems", "Filesystems");
    // Network and FUSE block filesystems stall on I/O in ways a disk streaming audio
    // cannot absorb; pseudo filesystems are irrelevant.
    let slow = [
        "nfs",
        "nfs4",
        "cifs",
        "smb3",
        "fuseblk",
        "reiserfs",
        "fuse.sshfs",
    ];
    let real = [
        "ext2", "ext3", "ext4", "xfs", "btrfs", "zfs", "f2fs", "vfat", "exfat",
    ];
    let mut bad = Vec::new();
    let mut good = Vec::new();
    for l in c.root.read("/proc/mounts").unwrap_or_default().lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 3 {
            continue;
        }
        let (mnt, fstype) = (f[1], f[2]);
        if ["/proc", "/sys", "/dev", "/run"]
            .iter()
            .any(|p| mnt == *p || mnt.starts_with(&format!("{p}/")))
        {
            continue;
        }
        if slow.contains(&fstype) {
            bad.push(format!("{fstype} on {mnt}"));
        } else if real.contains(&fstype) {
            good.push(format!("{fstype} on {mnt}"));
        }
    }
    if !bad.is_empty() {
        return item(
            T.0,
            T.1,
            Verdict::Warn,
            format!("avoid for audio files: {}", bad.join(", ")),
            "keep sessions and samples on a local ext4/xfs/btrfs disk",
        );
    }
    if good.is_empty() {
        return item(
            T.0,
            T.1,
            Verdict::Ok,
            "no local disk filesystems listed",
            "",
        );
    }
    item(T.0, T.1, Verdict::Ok, good.join(", "), "")
}

fn virtualization(c: &Ctx) -> CheckItem {
    const T: (&str, &str) = ("virtualization", "Virtualisation");
    match detect_virtualization(c.root) {
        None => item(
            T.0,
            T.1,
            Verdict::Ok,
            "bare metal (no hypervisor flag, DMI vendor or paravirtual clock)",
            "",
        ),
        Some((name, evidence)) => {
            // Steal since boot: how much the host has been taking, before any measurement.
            let stolen = c
                .root
                .read("/proc/stat")
                .and_then(|t| super::env::steal_ticks(&t))
                .filter(|&(_, total)| total > 0)
                .map(|(steal, total)| {
                    format!(
                        "; the host has taken {:.1} % of its CPU time since boot (steal)",
                        steal as f64 * 100.0 / total as f64
                    )
                })
                .unwrap_or_default();
            item(
                T.0,
                T.1,
                Verdict::Warn,
                format!("{name}: {}{stolen}", evidence.join(", ")),
                "the hypervisor can stall this guest for milliseconds: take final figures on bare metal (each result records the CPU time stolen during it)",
            )
        }
    }
}

fn container(c: &Ctx) -> CheckItem {
    const T: (&str, &str) = ("container", "Container");
    match detect_container(c.root) {
        (Some(name), _) => item(
            T.0,
            T.1,
            Verdict::Warn,
            name,
            "RT scheduling needs --cap-add=SYS_NICE --ulimit rtprio=99 and /dev/cpu_dma_latency passed in; kernel tuning is the host's",
        ),
        (None, Some(note)) => item(T.0, T.1, Verdict::Ok, format!("none ({note})"), ""),
        (None, None) => item(T.0, T.1, Verdict::Ok, "none", ""),
    }
}

#[cfg(test)]
mod tests {
    use super::super::probe::RtProbe;
    use super::super::Limits;
    use super::*;

    fn limits(euid: u32, rtprio: &str, probe: Option<(bool, &str)>) -> Limits {
        Limits {
            rtprio: rtprio.into(),
            memlock: "unlimited".into(),
            euid,
            rt_probe: probe.map(|(obtained, detail)| RtProbe {
                obtained,
                detail: detail.into(),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn rt_probe_outcome_decides_the_verdict() {
        let ok = rt_priority_verdict(&limits(1000, "0", Some((true, "set"))));
        assert_eq!(ok.verdict, Verdict::Ok);
        let refused = rt_priority_verdict(&limits(
            1000,
            "0",
            Some((
                false,
                "not permitted to set fifo:80 on this thread: raise RLIMIT_RTPRIO",
            )),
        ));
        assert_eq!(refused.verdict, Verdict::Fail);
        assert!(refused.observed.contains("EPERM"), "{refused:?}");
        assert!(refused.advice.contains("rtprio 95"));
        let other = rt_priority_verdict(&limits(
            1000,
            "0",
            Some((
                false,
                "the kernel rejected fifo:80 for this thread: Invalid argument",
            )),
        ));
        assert_eq!(other.verdict, Verdict::Fail);
        assert!(other.observed.contains("Invalid argument"), "{other:?}");
        let root_refused = rt_priority_verdict(&limits(0, "0", Some((false, "x: y"))));
        assert!(root_refused.advice.contains("cgroup"), "{root_refused:?}");
    }

    #[test]
    fn unprobed_rt_priority_is_inferred_from_the_limit() {
        assert_eq!(
            rt_priority_verdict(&limits(1000, "95", None)).verdict,
            Verdict::Ok
        );
        assert_eq!(
            rt_priority_verdict(&limits(1000, "unlimited", None)).verdict,
            Verdict::Ok
        );
        assert_eq!(
            rt_priority_verdict(&limits(1000, "50", None)).verdict,
            Verdict::Warn
        );
        assert_eq!(
            rt_priority_verdict(&limits(1000, "0", None)).verdict,
            Verdict::Fail
        );
        assert_eq!(
            rt_priority_verdict(&limits(0, "0", None)).verdict,
            Verdict::Ok
        );
        let v = rt_priority_verdict(&limits(1000, "0", None));
        assert!(v.observed.contains("not probed"));
    }

    #[test]
    fn isolcpus_flags_are_skipped() {
        assert_eq!(
            isolated_cpus("nohz,domain,managed_irq,2-3"),
            Some(vec![2, 3])
        );
        assert_eq!(isolated_cpus("3"), Some(vec![3]));
        assert_eq!(isolated_cpus("domain"), None);
        assert_eq!(isolated_cpus("0-99999999999"), None);
    }

    #[test]
    fn governors_group_by_value() {
        let g = group_by_cpu(&[
            (0, "powersave".into()),
            (1, "powersave".into()),
            (2, "schedutil".into()),
            (3, "powersave".into()),
        ]);
        assert_eq!(g, "cpu0-1,3: powersave; cpu2: schedutil");
    }

    #[test]
    fn sizes_are_human() {
        assert_eq!(human_bytes(8 << 20), "8 MiB");
        assert_eq!(human_bytes(1 << 30), "1 GiB");
        assert_eq!(human_bytes(65536), "64 KiB");
    }

    #[test]
    fn live_checks_run_and_notice_this_machine() {
        let root = Root::default();
        let env = Environment::capture_at(&root);
        let r = run_checks(&root, &env);
        assert_eq!(r.checks.len(), 22);
        assert_eq!(r.ok + r.warn + r.fail, 22);
        // Live, the RT probe must have run rather than being inferred.
        let rt = r.get("rt-priority").unwrap();
        assert!(!rt.observed.contains("not probed"), "{rt:?}");
        for c in &r.checks {
            assert!(!c.observed.is_empty(), "{c:?}");
            assert_eq!(c.advice.is_empty(), c.verdict == Verdict::Ok, "{c:?}");
        }
        // A guest must never pass for bare metal.
        let guest = root
            .read("/proc/cpuinfo")
            .is_some_and(|t| t.split_whitespace().any(|w| w == "hypervisor"));
        if guest {
            assert_eq!(r.get("virtualization").unwrap().verdict, Verdict::Warn);
        }
        // Throttling on must be reported, whatever the machine.
        if env.limits.sched_rt_runtime_us.is_some_and(|v| v >= 0) {
            assert_eq!(r.get("rt-throttling").unwrap().verdict, Verdict::Warn);
        }
    }
}
