//! The environment block every result embeds (docs/ARCHITECTURE.md §6).

use super::kconfig::KernelConfig;
use super::probe::RtProbe;
use super::Root;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Environment {
    pub hostname: String,
    /// `uname -r`.
    pub kernel: String,
    /// The kernel's build string (`uname -v`), which names PREEMPT / PREEMPT_RT / PREEMPT_DYNAMIC.
    pub kernel_version: String,
    /// Preemption model: `rt`, `full`, `voluntary`, `none`, `lazy`, or `unknown`, with how
    /// it was determined.
    pub preempt: Preempt,
    pub cpus: Cpus,
    /// Governor per online CPU, in CPU order (empty when cpufreq is absent, as in most VMs).
    pub governor: Vec<String>,
    /// Simultaneous multithreading active; None when the kernel does not say.
    pub smt: Option<bool>,
    pub isolation: Isolation,
    /// Hypervisor or VM vendor when running virtualised, else None.
    pub virtualization: Option<String>,
    /// Container runtime when inside one, else None.
    pub container: Option<String>,
    pub limits: Limits,
    pub clocksource: Option<String>,
    /// The kernel command line.
    pub cmdline: String,
    /// Stress presets active during the run (empty = idle).
    #[serde(default)]
    pub stress: Vec<String>,
    /// CPU time the hypervisor took from this machine between capture and the result
    /// (`steal` in /proc/stat); None on bare metal or when the kernel does not count it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hypervisor_steal: Option<Steal>,
    /// /proc/stat's (steal, total) ticks at capture, for `hypervisor_steal`.
    #[serde(skip)]
    #[schemars(skip)]
    steal_at_capture: Option<(u64, u64)>,
}

/// Stolen CPU time over a measurement: while the hypervisor runs something else, every
/// thread of the guest stands still, and timing figures show the host, not this system.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Steal {
    /// Summed over all CPUs, ms.
    pub stolen_ms: f64,
    /// Share of all CPU time over the measurement, %.
    pub share_pct: f64,
}

/// /proc/stat's aggregate line: (steal, user+nice+system+idle+iowait+irq+softirq+steal)
/// in USER_HZ ticks; None when the kernel has no steal column.
pub(crate) fn steal_ticks(stat: &str) -> Option<(u64, u64)> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    (f.len() == 8).then(|| (f[7], f.iter().sum()))
}

/// The steal between two /proc/stat snapshots (USER_HZ is 100 on every Linux ABI).
fn steal_between(a: (u64, u64), b: (u64, u64)) -> Option<Steal> {
    let (steal, total) = (b.0.checked_sub(a.0)?, b.1.checked_sub(a.1)?);
    (total > 0).then(|| Steal {
        stolen_ms: steal as f64 * 10.0,
        share_pct: steal as f64 * 100.0 / total as f64,
    })
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Preempt {
    pub model: String,
    /// Where the model was read from (e.g. `/sys/kernel/realtime`, `/sys/kernel/debug/sched/preempt`).
    pub source: String,
    /// PREEMPT_DYNAMIC kernel (model switchable at boot or run time).
    pub dynamic: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Cpus {
    /// Online CPUs in the kernel's list format, e.g. `0-3`.
    pub online: String,
    pub count: usize,
    pub model: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Isolation {
    pub isolcpus: Option<String>,
    pub nohz_full: Option<String>,
    pub rcu_nocbs: Option<String>,
    pub threadirqs: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Limits {
    /// Soft RLIMIT_RTPRIO of this process (`unlimited` or a number).
    pub rtprio: String,
    /// Soft RLIMIT_MEMLOCK of this process in bytes, or `unlimited`.
    pub memlock: String,
    /// kernel.sched_rt_runtime_us (-1 = RT throttling off).
    pub sched_rt_runtime_us: Option<i64>,
    pub sched_rt_period_us: Option<i64>,
    pub euid: u32,
    /// Whether SCHED_FIFO 80 was really obtainable when the environment was captured;
    /// None when not probed (fixture trees, offline analysis).
    #[serde(default)]
    pub rt_probe: Option<RtProbe>,
}

impl Limits {
    /// False when real-time scheduling is known to be out of reach: the probe failed, or
    /// (unprobed) a non-root process has RLIMIT_RTPRIO 0. None when it cannot be told.
    pub fn rt_privilege(&self) -> Option<bool> {
        if let Some(p) = &self.rt_probe {
            return Some(p.obtained);
        }
        if self.euid == 0 {
            return None;
        }
        match self.rtprio.as_str() {
            "unlimited" => Some(true),
            v => v.parse::<u32>().ok().map(|n| n > 0),
        }
    }
}

/// Parse the kernel command line into (key, optional value) pairs. Words after a lone `--`
/// belong to init, not to the kernel, so they are left out.
pub(crate) fn cmdline_params(cmdline: &str) -> Vec<(String, Option<String>)> {
    cmdline
        .split_whitespace()
        .take_while(|w| *w != "--")
        .map(|w| match w.split_once('=') {
            Some((k, v)) => (k.to_string(), Some(v.to_string())),
            None => (w.to_string(), None),
        })
        .collect()
}

/// The last value given for kernel parameter `key` (the kernel lets later ones win);
/// `Some("")` for a bare flag.
pub(crate) fn cmdline_param(cmdline: &str, key: &str) -> Option<String> {
    cmdline_params(cmdline)
        .into_iter()
        .rfind(|(k, _)| k == key)
        .map(|(_, v)| v.unwrap_or_default())
}

/// The value of a soft limit from /proc/<pid>/limits, e.g. "Max realtime priority".
fn limit(root: &Root, name: &str) -> String {
    root.read("/proc/self/limits")
        .and_then(|t| {
            t.lines().find(|l| l.starts_with(name)).and_then(|l| {
                l[name.len()..]
                    .split_whitespace()
                    .next()
                    .map(str::to_string)
            })
        })
        .unwrap_or_else(|| "unknown".into())
}

const PREEMPT_MODES: [&str; 4] = ["none", "voluntary", "full", "lazy"];

pub(crate) fn preempt_model(
    root: &Root,
    kernel_version: &str,
    cmdline: &str,
    config: Option<&KernelConfig>,
) -> Preempt {
    let dynamic = kernel_version.contains("PREEMPT_DYNAMIC")
        || config.is_some_and(|c| c.is_y("PREEMPT_DYNAMIC"));
    let found = |model: &str, source: String| Preempt {
        model: model.into(),
        source,
        dynamic,
    };
    if root.read("/sys/kernel/realtime").as_deref() == Some("1") {
        return found("rt", "/sys/kernel/realtime".into());
    }
    // PREEMPT_DYNAMIC exposes the active mode with brackets: "none voluntary (full) lazy".
    // It is the only source that sees a mode changed at run time, so it wins when readable.
    for p in [
        "/sys/kernel/debug/sched/preempt",
        "/sys/kernel/sched/preempt",
    ] {
        if let Some(t) = root.read(p) {
            if let Some(m) = t
                .split_whitespace()
                .find(|w| w.starts_with('('))
                .map(|w| w.trim_matches(|c| c == '(' || c == ')').to_string())
            {
                return Preempt {
                    model: m,
                    source: p.into(),
                    dynamic: true,
                };
            }
        }
    }
    let v = kernel_version;
    if v.contains("PREEMPT_RT") {
        return found("rt", "uname -v".into());
    }
    if let Some(c) = config.filter(|c| c.is_y("PREEMPT_RT")) {
        return found("rt", format!("CONFIG_PREEMPT_RT in {}", c.source));
    }
    if dynamic {
        // Without debugfs the running mode is the boot-time one: preempt= if given (the
        // kernel ignores values it does not know), else the build's default.
        if let Some(m) = cmdline_param(cmdline, "preempt") {
            if PREEMPT_MODES.contains(&m.as_str()) {
                return found(&m, "preempt= on the kernel command line".into());
            }
        }
        if let Some((m, c)) = config.and_then(|c| c.preempt_default().map(|m| (m, c))) {
            return found(
                m,
                format!(
                    "build default CONFIG_PREEMPT_{} in {}; no preempt=, debugfs not mounted",
                    m.to_uppercase(),
                    c.source
                ),
            );
        }
        return found(
            "dynamic (mode not readable: mount debugfs to see it)",
            "uname -v".into(),
        );
    }
    if let Some((m, c)) = config.and_then(|c| c.preempt_default().map(|m| (m, c))) {
        return found(m, format!("CONFIG_PREEMPT_* in {}", c.source));
    }
    let model = if v.contains("PREEMPT_LAZY") {
        "lazy"
    } else if v.contains("PREEMPT ") || v.ends_with("PREEMPT") || v.contains(" PREEMPT") {
        "full"
    } else if v.contains("SMP") {
        "none or voluntary"
    } else {
        "unknown"
    };
    found(model, "uname -v".into())
}

/// Hypervisor name and the evidence for it, or None on bare metal.
pub(crate) fn detect_virtualization(root: &Root) -> Option<(String, Vec<String>)> {
    let mut evidence = Vec::new();
    let mut name: Option<String> = None;
    if let Some(t) = root.read("/sys/hypervisor/type").filter(|t| !t.is_empty()) {
        evidence.push(format!("/sys/hypervisor/type = {t}"));
        name = Some(t);
    }
    if let Some(t) = root.read("/proc/device-tree/hypervisor/compatible") {
        let t = t.trim_matches('\0').to_string();
        evidence.push(format!("device tree hypervisor node ({t})"));
        name = name.or_else(|| t.split(',').next().map(str::to_string));
    }
    let dmi: Vec<String> = [
        "/sys/class/dmi/id/sys_vendor",
        "/sys/class/dmi/id/product_name",
        "/sys/class/dmi/id/bios_vendor",
    ]
    .iter()
    .filter_map(|p| root.read(p))
    .collect();
    let known = [
        ("QEMU", "qemu"),
        ("KVM", "kvm"),
        ("VMware", "vmware"),
        ("VirtualBox", "virtualbox"),
        ("innotek", "virtualbox"),
        ("Xen", "xen"),
        ("Microsoft Corporation", "hyper-v"),
        ("Amazon EC2", "amazon"),
        ("Google Compute Engine", "google"),
        ("Firecracker", "firecracker"),
        ("Parallels", "parallels"),
        ("Bochs", "bochs"),
    ];
    if let Some((needle, n)) = known
        .iter()
        .find(|(needle, _)| dmi.iter().any(|d| d.contains(needle)))
    {
        // A physical Microsoft Surface also says "Microsoft Corporation"; only count it
        // with its virtual product name.
        let surface = *n == "hyper-v" && !dmi.iter().any(|d| d.contains("Virtual Machine"));
        if !surface {
            evidence.push(format!("DMI names {needle}"));
            name = name.or_else(|| Some((*n).to_string()));
        }
    }
    let cpuinfo = root.read("/proc/cpuinfo").unwrap_or_default();
    let flagged = cpuinfo
        .lines()
        .filter(|l| l.starts_with("flags"))
        .any(|l| l.split_whitespace().any(|f| f == "hypervisor"));
    if flagged {
        evidence.push("cpu flag 'hypervisor'".into());
        if root.is_live() {
            if let Some(sig) = super::probe::cpuid_hypervisor_signature() {
                evidence.push(format!("CPUID signature '{sig}'"));
                name = name.or_else(|| Some(super::probe::hypervisor_from_signature(&sig)));
            }
        }
    }
    // Paravirtual clocks exist only for guests; they name the hypervisor when nothing
    // else does (no DMI in Firecracker-like VMs, no CPUID in a fixture).
    let clocks = root
        .read("/sys/devices/system/clocksource/clocksource0/available_clocksource")
        .unwrap_or_default();
    for (clock, n) in [
        ("kvm-clock", "kvm"),
        ("xen", "xen"),
        ("hyperv_clocksource_tsc_page", "hyper-v"),
        ("hyperv_clocksource_msr", "hyper-v"),
        ("vmware-tsc", "vmware"),
    ] {
        if clocks.split_whitespace().any(|c| c == clock) {
            evidence.push(format!("paravirtual clocksource {clock}"));
            name = name.or_else(|| Some(n.into()));
            break;
        }
    }
    if evidence.is_empty() {
        return None;
    }
    Some((
        name.unwrap_or_else(|| "unknown hypervisor".into()),
        evidence,
    ))
}

pub(crate) fn virtualization(root: &Root) -> Option<String> {
    detect_virtualization(root).map(|(n, _)| n)
}

/// Container runtime (or None) and a note on evidence that was seen but not believed.
pub(crate) fn detect_container(root: &Root) -> (Option<String>, Option<String>) {
    if root.exists("/run/.containerenv") {
        return (Some("podman".into()), None);
    }
    if let Some(t) = root
        .read("/run/systemd/container")
        .filter(|t| !t.is_empty())
    {
        return (Some(t), None);
    }
    if let Some(t) = root.read("/proc/1/environ") {
        if let Some(c) = t
            .split('\0')
            .find_map(|kv| kv.strip_prefix("container="))
            .filter(|c| !c.is_empty())
        {
            return (Some(c.to_string()), None);
        }
    }
    let cg = root.read("/proc/1/cgroup").unwrap_or_default();
    for (needle, name) in [
        ("docker", "docker"),
        ("kubepods", "kubernetes"),
        ("lxc", "lxc"),
        ("containerd", "containerd"),
        ("libpod", "podman"),
    ] {
        if cg.contains(needle) {
            return (Some(name.into()), None);
        }
    }
    if root.exists("/.dockerenv") {
        // Images built with Docker keep /.dockerenv when they become a VM's root disk,
        // so it proves a container only when / is also a layered filesystem.
        let (fstype, source) = root_mount(root);
        if matches!(fstype.as_str(), "overlay" | "aufs" | "fuse-overlayfs")
            || source.contains("docker")
            || fstype.is_empty()
        {
            return (Some("docker".into()), None);
        }
        return (
            None,
            Some(format!(
                "/.dockerenv present but / is {fstype} on {source}: an image built by Docker, not a container"
            )),
        );
    }
    (None, None)
}

pub(crate) fn container(root: &Root) -> Option<String> {
    detect_container(root).0
}

/// Filesystem type and source of the mount at `/` (the last one wins, as in the kernel).
fn root_mount(root: &Root) -> (String, String) {
    root.read("/proc/mounts")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 3 && f[1] == "/").then(|| (f[2].to_string(), f[0].to_string()))
        })
        .next_back()
        .unwrap_or_default()
}

impl Environment {
    /// Capture the environment of the live system.
    pub fn capture() -> Self {
        Self::capture_at(&Root::default())
    }

    /// Capture the environment as seen under `root`.
    pub fn capture_at(root: &Root) -> Self {
        let kernel = root.read("/proc/sys/kernel/osrelease").unwrap_or_default();
        let kernel_version = root.read("/proc/sys/kernel/version").unwrap_or_default();
        let cmdline = root.read("/proc/cmdline").unwrap_or_default();
        let config = KernelConfig::read(root, &kernel);
        let online = root
            .read("/sys/devices/system/cpu/online")
            .unwrap_or_default();
        let online_cpus = super::cpu_list(&online).unwrap_or_default();
        let model = root
            .read("/proc/cpuinfo")
            .and_then(|t| {
                t.lines()
                    .find(|l| l.starts_with("model name") || l.starts_with("Model"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_default();
        let governor = online_cpus
            .iter()
            .filter_map(|c| {
                root.read(&format!(
                    "/sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor"
                ))
            })
            .collect();
        let smt = root
            .read("/sys/devices/system/cpu/smt/active")
            .map(|s| s == "1");
        let isolation = Isolation {
            isolcpus: cmdline_param(&cmdline, "isolcpus"),
            nohz_full: cmdline_param(&cmdline, "nohz_full"),
            rcu_nocbs: cmdline_param(&cmdline, "rcu_nocbs"),
            threadirqs: cmdline_param(&cmdline, "threadirqs").is_some(),
        };
        let read_i64 = |p: &str| root.read(p).and_then(|s| s.parse().ok());
        let limits = Limits {
            rtprio: limit(root, "Max realtime priority"),
            memlock: limit(root, "Max locked memory"),
            sched_rt_runtime_us: read_i64("/proc/sys/kernel/sched_rt_runtime_us"),
            sched_rt_period_us: read_i64("/proc/sys/kernel/sched_rt_period_us"),
            euid: if root.is_live() {
                // SAFETY: no preconditions.
                unsafe { libc::geteuid() }
            } else {
                root.read("/proc/self/status")
                    .and_then(|t| {
                        t.lines()
                            .find(|l| l.starts_with("Uid:"))
                            .and_then(|l| l.split_whitespace().nth(2).and_then(|v| v.parse().ok()))
                    })
                    .unwrap_or(0)
            },
            rt_probe: root.is_live().then(super::probe::try_rt_priority),
        };
        let virt = virtualization(root);
        Environment {
            hostname: root.read("/proc/sys/kernel/hostname").unwrap_or_default(),
            preempt: preempt_model(root, &kernel_version, &cmdline, config.as_ref()),
            kernel,
            kernel_version,
            cpus: Cpus {
                count: online_cpus.len(),
                online,
                model,
            },
            governor,
            smt,
            isolation,
            steal_at_capture: (root.is_live() && virt.is_some())
                .then(|| steal_ticks(&root.read("/proc/stat")?))
                .flatten(),
            virtualization: virt,
            container: container(root),
            limits,
            clocksource: root
                .read("/sys/devices/system/clocksource/clocksource0/current_clocksource"),
            cmdline,
            stress: Vec::new(),
            hypervisor_steal: None,
        }
    }

    /// Record the CPU time the hypervisor stole since capture: called when the result is
    /// made, so it covers the measurement.
    pub fn finish_steal(&mut self) {
        let now = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|t| steal_ticks(&t));
        if let (Some(a), Some(b)) = (self.steal_at_capture, now) {
            self.hypervisor_steal = steal_between(a, b);
        }
    }

    /// Conditions that weaken real-time evidence, for a result's `warnings`.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if let Some(v) = &self.virtualization {
            w.push(format!(
                "running in a virtual machine ({v}): the hypervisor can stall the guest for milliseconds; latencies are not those of bare metal"
            ));
        }
        if let Some(st) = self.hypervisor_steal.filter(|s| s.share_pct >= 0.5) {
            w.push(format!(
                "the hypervisor took {:.1} % of this machine's CPU time during the measurement ({:.0} ms stolen): maxima, xruns and load limits may be the host's, not this system's",
                st.share_pct, st.stolen_ms
            ));
        }
        if let Some(c) = &self.container {
            w.push(format!(
                "running in a container ({c}): RT privileges and tuning may be restricted"
            ));
        }
        let slow: Vec<&String> = self
            .governor
            .iter()
            .filter(|g| g.as_str() != "performance")
            .collect();
        if !slow.is_empty() {
            w.push(format!(
                "CPU frequency governor is '{}', not 'performance': frequency changes add latency and change DSP load",
                slow[0]
            ));
        }
        if let Some(rt) = self.limits.sched_rt_runtime_us {
            if rt >= 0 {
                w.push(format!(
                    "RT throttling is on (sched_rt_runtime_us = {rt}): RT tasks are stopped for the rest of each period once they use that much"
                ));
            }
        }
        if self.limits.rt_privilege() == Some(false) {
            w.push(match &self.limits.rt_probe {
                Some(p) => format!(
                    "no RT privilege: SCHED_FIFO {} was refused ({}); real-time threads cannot be created, so RT measurements fail or describe SCHED_OTHER",
                    super::probe::PROBE_PRIORITY,
                    p.reason()
                ),
                None => format!(
                    "no RT privilege: RLIMIT_RTPRIO is {} for uid {}, so real-time threads cannot be created",
                    self.limits.rtprio, self.limits.euid
                ),
            });
        }
        if !matches!(self.preempt.model.as_str(), "rt" | "full" | "lazy") {
            w.push(format!(
                "kernel preemption model is '{}': not PREEMPT_RT or full/lazy preemption, so kernel code delays RT wake-ups",
                self.preempt.model
            ));
        }
        if !self.stress.is_empty() {
            w.push(format!("measured under stress: {}", self.stress.join(",")));
        }
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steal_is_the_stolen_share_between_two_proc_stat_snapshots() {
        let a = "cpu  100 0 50 800 10 0 5 35 0 0\ncpu0 1 2 3\n";
        let b = "cpu  200 0 60 1500 10 0 5 225 0 0\ncpu0 1 2 3\n";
        let (sa, sb) = (steal_ticks(a).unwrap(), steal_ticks(b).unwrap());
        assert_eq!(sa, (35, 1000));
        let st = steal_between(sa, sb).unwrap();
        // 190 of 1000 ticks stolen = 1.9 s at USER_HZ 100.
        assert_eq!(st.stolen_ms, 1900.0);
        assert!((st.share_pct - 19.0).abs() < 1e-9);
        // Kernels without the steal column, and counters that went backwards.
        assert_eq!(steal_ticks("cpu  1 2 3 4\n"), None);
        assert_eq!(steal_between(sb, sa), None);
        let mut e = Environment {
            hypervisor_steal: Some(st),
            ..Default::default()
        };
        assert!(e.warnings().iter().any(|w| w.contains("19.0 %")));
        e.hypervisor_steal = Some(Steal {
            stolen_ms: 1.0,
            share_pct: 0.1,
        });
        assert!(!e.warnings().iter().any(|w| w.contains("hypervisor took")));
    }

    #[test]
    fn live_capture_sees_this_machine() {
        let e = Environment::capture();
        assert!(!e.kernel.is_empty());
        assert!(e.cpus.count >= 1);
        assert!(!e.preempt.model.is_empty());
    }

    #[test]
    fn warnings_report_missing_rt_privilege() {
        let mut e = Environment {
            preempt: Preempt {
                model: "rt".into(),
                ..Default::default()
            },
            ..Default::default()
        };
        e.limits.euid = 1000;
        e.limits.rtprio = "0".into();
        assert!(e.warnings().iter().any(|w| w.contains("no RT privilege")));
        e.limits.rtprio = "95".into();
        assert!(e.warnings().is_empty(), "{:?}", e.warnings());
        // A failed live probe outweighs a generous limit (e.g. an RT cgroup without budget).
        e.limits.rt_probe = Some(RtProbe {
            obtained: false,
            detail: "not permitted to set fifo:80 on this thread".into(),
        });
        let w = e.warnings().join("\n");
        assert!(w.contains("no RT privilege") && w.contains("EPERM"), "{w}");
        // Root without a probe result: unknown, so no claim either way.
        e.limits = Limits {
            euid: 0,
            rtprio: "0".into(),
            ..Default::default()
        };
        assert!(e.warnings().is_empty(), "{:?}", e.warnings());
    }

    #[test]
    fn cmdline_stops_at_init_arguments_and_last_value_wins() {
        let c = "quiet isolcpus=1 preempt=none isolcpus=2-3 -- threadirqs preempt=full";
        assert_eq!(cmdline_param(c, "isolcpus").as_deref(), Some("2-3"));
        assert_eq!(cmdline_param(c, "preempt").as_deref(), Some("none"));
        assert_eq!(cmdline_param(c, "threadirqs"), None);
        assert_eq!(cmdline_param(c, "quiet").as_deref(), Some(""));
    }

    #[test]
    fn preempt_model_from_debugfs_brackets() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("sys/kernel/debug/sched")).unwrap();
        std::fs::write(
            d.path().join("sys/kernel/debug/sched/preempt"),
            "none voluntary (full) lazy\n",
        )
        .unwrap();
        let p = preempt_model(&Root::new(d.path()), "#1 SMP PREEMPT_DYNAMIC", "", None);
        assert_eq!(p.model, "full");
        assert!(p.dynamic);
    }
}
