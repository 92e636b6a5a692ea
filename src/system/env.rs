//! The environment block every result embeds (DESIGN.md §6).

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
}

/// Parse the kernel command line into (key, optional value) pairs.
pub(crate) fn cmdline_params(cmdline: &str) -> Vec<(String, Option<String>)> {
    cmdline
        .split_whitespace()
        .map(|w| match w.split_once('=') {
            Some((k, v)) => (k.to_string(), Some(v.to_string())),
            None => (w.to_string(), None),
        })
        .collect()
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

pub(crate) fn preempt_model(root: &Root, kernel_version: &str, cmdline: &str) -> Preempt {
    let dynamic = kernel_version.contains("PREEMPT_DYNAMIC");
    if root.read("/sys/kernel/realtime").as_deref() == Some("1") {
        return Preempt {
            model: "rt".into(),
            source: "/sys/kernel/realtime".into(),
            dynamic,
        };
    }
    // PREEMPT_DYNAMIC exposes the active mode with brackets: "none voluntary (full) lazy".
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
    if let Some(v) = cmdline_params(cmdline)
        .into_iter()
        .find(|(k, _)| k == "preempt")
        .and_then(|(_, v)| v)
    {
        return Preempt {
            model: v,
            source: "preempt= on the kernel command line".into(),
            dynamic,
        };
    }
    let v = kernel_version;
    let (model, source) = if v.contains("PREEMPT_RT") {
        ("rt", "uname -v")
    } else if dynamic {
        // A dynamic kernel without the debugfs file and without preempt= runs its built-in
        // default; the build string alone cannot tell which, so say so.
        (
            "dynamic (mode not readable: mount debugfs to see it)",
            "uname -v",
        )
    } else if v.contains("PREEMPT_LAZY") {
        ("lazy", "uname -v")
    } else if v.contains("PREEMPT ") || v.ends_with("PREEMPT") || v.contains(" PREEMPT") {
        ("full", "uname -v")
    } else if v.contains("SMP") {
        ("none or voluntary", "uname -v")
    } else {
        ("unknown", "uname -v")
    };
    Preempt {
        model: model.into(),
        source: source.into(),
        dynamic,
    }
}

pub(crate) fn virtualization(root: &Root) -> Option<String> {
    if let Some(t) = root.read("/sys/hypervisor/type") {
        if !t.is_empty() {
            return Some(t);
        }
    }
    let vendor = root
        .read("/sys/class/dmi/id/sys_vendor")
        .unwrap_or_default();
    let product = root
        .read("/sys/class/dmi/id/product_name")
        .unwrap_or_default();
    let known = [
        ("QEMU", "qemu"),
        ("KVM", "kvm"),
        ("VMware", "vmware"),
        ("VirtualBox", "virtualbox"),
        ("innotek", "virtualbox"),
        ("Xen", "xen"),
        ("Microsoft Corporation", "hyper-v"),
        ("Amazon EC2", "amazon"),
        ("Google", "google"),
        ("Firecracker", "firecracker"),
        ("Parallels", "parallels"),
    ];
    for (needle, name) in known {
        if vendor.contains(needle) || product.contains(needle) {
            return Some(name.into());
        }
    }
    let cpuinfo = root.read("/proc/cpuinfo").unwrap_or_default();
    let flagged = cpuinfo
        .lines()
        .filter(|l| l.starts_with("flags"))
        .any(|l| l.split_whitespace().any(|f| f == "hypervisor"));
    flagged.then(|| {
        if vendor.is_empty() {
            "unknown hypervisor (cpu flag)".into()
        } else {
            format!("unknown hypervisor (cpu flag; DMI vendor '{vendor}')")
        }
    })
}

pub(crate) fn container(root: &Root) -> Option<String> {
    if root.exists("/.dockerenv") {
        return Some("docker".into());
    }
    if root.exists("/run/.containerenv") {
        return Some("podman".into());
    }
    if let Some(t) = root.read("/proc/1/environ") {
        if let Some(c) = t
            .split('\0')
            .find_map(|kv| kv.strip_prefix("container="))
            .filter(|c| !c.is_empty())
        {
            return Some(c.to_string());
        }
    }
    let cg = root.read("/proc/1/cgroup").unwrap_or_default();
    for (needle, name) in [
        ("docker", "docker"),
        ("kubepods", "kubernetes"),
        ("lxc", "lxc"),
        ("containerd", "containerd"),
    ] {
        if cg.contains(needle) {
            return Some(name.into());
        }
    }
    None
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
        let online = root
            .read("/sys/devices/system/cpu/online")
            .unwrap_or_default();
        let online_cpus = crate::rt::affinity::parse_cpu_list(&online).unwrap_or_default();
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
        let params = cmdline_params(&cmdline);
        let param = |k: &str| {
            params
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.clone().unwrap_or_default())
        };
        let isolation = Isolation {
            isolcpus: param("isolcpus"),
            nohz_full: param("nohz_full"),
            rcu_nocbs: param("rcu_nocbs"),
            threadirqs: params.iter().any(|(k, _)| k == "threadirqs"),
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
        };
        Environment {
            hostname: root.read("/proc/sys/kernel/hostname").unwrap_or_default(),
            preempt: preempt_model(root, &kernel_version, &cmdline),
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
            virtualization: virtualization(root),
            container: container(root),
            limits,
            clocksource: root
                .read("/sys/devices/system/clocksource/clocksource0/current_clocksource"),
            cmdline,
            stress: Vec::new(),
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
        if self.preempt.model != "rt" && self.preempt.model != "full" {
            w.push(format!(
                "kernel preemption model is '{}': not PREEMPT_RT or full preemption",
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
    fn live_capture_sees_this_machine() {
        let e = Environment::capture();
        assert!(!e.kernel.is_empty());
        assert!(e.cpus.count >= 1);
        assert!(!e.preempt.model.is_empty());
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
        let p = preempt_model(&Root::new(d.path()), "#1 SMP PREEMPT_DYNAMIC", "");
        assert_eq!(p.model, "full");
        assert!(p.dynamic);
    }
}
