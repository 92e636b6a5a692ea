//! `tune --restore --defaults`: the kernel's own defaults for everything a profile tunes,
//! for when the journal is lost, damaged or refused. Nothing here knows what the machine
//! had before: it puts back what a freshly booted kernel has (CPU frequency governors
//! excepted: their default is a build option, so they are left and said so).

use super::settings::{self, format_mask, parse_mask, Cpuset, Form, Target};
use super::settings::{thread_flags, PF_KTHREAD, PF_NO_SETAFFINITY};
use super::{RestoreReport, Restored};
use crate::rt::affinity::format_cpu_list;
use crate::system::{cpu_list, Root};
use std::path::Path;

/// The kernel's values for the sysctls a profile writes (kernel/sched/rt.c, kernel/time,
/// mm/vmscan.c).
const SYSCTLS: &[(&str, &str, &str)] = &[
    ("/proc/sys/kernel/timer_migration", "1", "Timer migration"),
    (
        "/proc/sys/kernel/sched_rt_runtime_us",
        "950000",
        "RT throttling (kernel.sched_rt_runtime_us)",
    ),
    ("/proc/sys/vm/swappiness", "60", "vm.swappiness"),
];

/// An IRQ thread's policy as the kernel creates it (SCHED_FIFO at MAX_RT_PRIO / 2).
const IRQ_THREAD_POLICY: &str = "fifo 50";

struct Put<'a> {
    root: &'a Root,
    items: Vec<Restored>,
}

impl Put<'_> {
    /// Write `value` unless the target already means it. A setting the kernel refuses to
    /// have written (a driver-managed IRQ) could never have been tuned either: left out.
    fn put(&mut self, id: String, title: String, target: Target, value: &str) {
        let now = settings::read(self.root, &target);
        if now
            .as_deref()
            .is_some_and(|n| settings::same(&target, n, value))
        {
            return;
        }
        let error = match settings::write(self.root, &target, value) {
            Ok(()) => None,
            Err(e) if settings::refused(&e) => return,
            Err(e) => Some(e),
        };
        self.items.push(Restored {
            id,
            title,
            value: value.to_string(),
            error,
        });
    }
}

/// Put the kernel's defaults back. A journal at `journal_path` is moved aside to
/// `<journal>.refused` (kept for a look, no longer in the way of the next `--apply`).
pub fn restore_defaults(root: &Root, journal_path: &Path) -> crate::Result<RestoreReport> {
    let online = root
        .read("/sys/devices/system/cpu/online")
        .and_then(|s| cpu_list(&s))
        .unwrap_or_default();
    let possible = root
        .read("/sys/devices/system/cpu/possible")
        .and_then(|s| cpu_list(&s))
        .unwrap_or_else(|| online.clone());
    let isolated = root
        .read("/sys/devices/system/cpu/isolated")
        .and_then(|s| cpu_list(&s))
        .unwrap_or_default();
    let not_isolated = |cpus: &[usize]| -> Vec<usize> {
        let v: Vec<usize> = cpus
            .iter()
            .copied()
            .filter(|c| !isolated.contains(c))
            .collect();
        if v.is_empty() {
            cpus.to_vec()
        } else {
            v
        }
    };
    let mut p = Put {
        root,
        items: Vec::new(),
    };
    let mut notes = Vec::new();

    // The groups first: leaving them gives every task the CPUs the rest assumes.
    // Written whatever they read as: a half-made pair (the system set alone) reads "absent".
    for cs in cpusets(root) {
        let title = format!("cpusets {}/xrunlab-*", cs.mount);
        p.items.push(Restored {
            id: format!("cpuset:{}", cs.mount),
            error: settings::write(root, &Target::Cpuset(cs), "absent").err(),
            title,
            value: "absent".into(),
        });
    }
    put_irqs(&mut p, &online);
    let kthread_cpus = not_isolated(&online);
    put_kthreads(&mut p, &kthread_cpus);
    let wq = "/sys/devices/virtual/workqueue/cpumask";
    if root.exists(wq) {
        p.put(
            "workqueue".into(),
            "Unbound workqueue CPUs".into(),
            Target::File {
                path: wq.into(),
                form: Form::CpuMask,
            },
            &format_mask(&not_isolated(&possible)),
        );
    }
    for (path, value, title) in SYSCTLS {
        if root.exists(path) {
            p.put(
                format!("sysctl:{path}"),
                title.to_string(),
                Target::File {
                    path: path.to_string(),
                    form: Form::Text,
                },
                value,
            );
        }
    }
    if root.exists("/sys/devices/system/cpu/cpu0/cpufreq") {
        notes.push("CPU frequency governors left as they are: their default is a kernel build option (CONFIG_CPU_FREQ_DEFAULT_GOV_*)".into());
    }
    let found = journal_path.exists();
    if found {
        notes.push(move_aside(journal_path));
    }
    Ok(RestoreReport {
        journal: journal_path.to_path_buf(),
        found,
        items: p.items,
        notes,
    })
}

/// Every IRQ's affinity back to the kernel's default mask (its online CPUs).
fn put_irqs(p: &mut Put, online: &[usize]) {
    let irq_default = p
        .root
        .read("/proc/irq/default_smp_affinity")
        .and_then(|m| parse_mask(&m))
        .map(|c| {
            c.into_iter()
                .filter(|x| online.contains(x))
                .collect::<Vec<_>>()
        })
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| online.to_vec());
    let mut irqs: Vec<u32> = p
        .root
        .list("/proc/irq")
        .iter()
        .filter_map(|n| n.parse().ok())
        .collect();
    irqs.sort_unstable();
    for n in irqs {
        let path = format!("/proc/irq/{n}/smp_affinity_list");
        if p.root.exists(&path) {
            p.put(
                format!("irq:{n}"),
                format!("IRQ {n} affinity"),
                Target::File {
                    path,
                    form: Form::CpuList,
                },
                &format_cpu_list(&irq_default),
            );
        }
    }
}

/// Every kernel thread back on `cpus` (IRQ threads: their policy, and the CPUs their IRQ is
/// delivered to); threads the kernel pins itself are left alone.
fn put_kthreads(p: &mut Put, cpus: &[usize]) {
    let root = p.root;
    let mut pids: Vec<u32> = root
        .list("/proc")
        .iter()
        .filter_map(|p| p.parse().ok())
        .collect();
    pids.sort_unstable();
    for pid in pids {
        let Some(flags) = thread_flags(root, pid) else {
            continue;
        };
        let Some(comm) = root.read(&format!("/proc/{pid}/comm")) else {
            continue;
        };
        if flags & PF_KTHREAD == 0 {
            continue;
        }
        if let Some(irq) = comm
            .strip_prefix("irq/")
            .and_then(|r| r.split('-').next()?.parse::<u32>().ok())
        {
            p.put(
                format!("irq-thread:{comm}"),
                format!("IRQ thread {comm} (pid {pid})"),
                Target::Thread {
                    pid,
                    comm: comm.clone(),
                },
                IRQ_THREAD_POLICY,
            );
            // An IRQ thread runs where its IRQ is delivered (the kernel moves it there when
            // the IRQ next fires; this does it now).
            if let Some(eff) = root
                .read(&format!("/proc/irq/{irq}/effective_affinity_list"))
                .filter(|e| cpu_list(e).is_some_and(|c| !c.is_empty()))
            {
                p.put(
                    format!("kthread:{pid}"),
                    format!("IRQ thread {comm} (pid {pid}) CPUs"),
                    Target::Affinity { pid, comm },
                    &eff,
                );
            }
            continue;
        }
        if flags & PF_NO_SETAFFINITY != 0 {
            continue;
        }
        p.put(
            format!("kthread:{pid}"),
            format!("Kernel thread {comm} (pid {pid}) CPUs"),
            Target::Affinity { pid, comm },
            &format_cpu_list(cpus),
        );
    }
}

/// Move the journal aside to `<journal>.refused`; the note saying where (or why not).
fn move_aside(journal_path: &Path) -> String {
    let aside = journal_path.with_file_name(format!(
        "{}.refused",
        journal_path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    ));
    match std::fs::rename(journal_path, &aside) {
        Ok(()) => format!("the journal was moved aside to {}", aside.display()),
        Err(e) => format!(
            "the journal {} could not be moved aside ({e}): remove it before the next --apply",
            journal_path.display()
        ),
    }
}

/// The hierarchies that can hold an xrunlab cpuset, each as a [`Cpuset`] to remove.
fn cpusets(root: &Root) -> Vec<Cpuset> {
    let mounts = root.read("/proc/mounts").unwrap_or_default();
    let mut out = Vec::new();
    for l in mounts.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (Some(dir), Some(fs), Some(opts)) = (f.get(1), f.get(2), f.get(3)) else {
            continue;
        };
        let v2 = *fs == "cgroup2";
        if !(v2 || (*fs == "cgroup" && opts.split(',').any(|o| o == "cpuset"))) {
            continue;
        }
        let held = ["xrunlab-audio", "xrunlab-system"]
            .iter()
            .any(|g| root.path(&format!("{dir}/{g}")).is_dir());
        if held {
            out.push(Cpuset {
                mount: dir.to_string(),
                v2,
                prefixed: !v2 && root.exists(&format!("{dir}/cpuset.cpus")),
                audio_cpus: Vec::new(),
                housekeeping_cpus: Vec::new(),
            });
        }
    }
    out
}
