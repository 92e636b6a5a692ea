//! What a journal may ask of a restore. `tune --restore` runs as root and writes what the
//! journal names, so the journal is checked first: a file root owns and only root may
//! write, of bounded size, whose every target is one a profile produces. Anything else is
//! refused whole (exit 2) rather than partly obeyed; `tune --restore --defaults` is the way
//! back without it.

use super::settings::{thread_flags, Target, PF_KTHREAD};
use super::sides::Side;
use crate::system::{cpu_list, Root};

/// A journal holds one entry per tuned setting plus the tasks a cpuset moved: a few
/// hundred entries on a large machine, well under a megabyte. Anything near this is not
/// ours.
pub const MAX_JOURNAL_BYTES: u64 = 16 << 20;

/// The value files a profile writes, as patterns: `N` stands for a decimal number.
const FILES: &[&str] = &[
    "/proc/irq/N/smp_affinity_list",
    "/sys/devices/system/cpu/cpuN/cpufreq/scaling_governor",
    "/sys/devices/system/cpu/cpuN/cpufreq/energy_performance_preference",
    "/sys/devices/virtual/workqueue/cpumask",
    "/proc/sys/kernel/timer_migration",
    "/proc/sys/kernel/sched_rt_runtime_us",
    "/proc/sys/vm/swappiness",
];

/// True when `path` is `pattern` with each `N` a decimal number (no `..`, no other path).
fn matches(pattern: &str, path: &str) -> bool {
    let mut p = pattern.split('N');
    let mut rest = path;
    let Some(first) = p.next() else { return false };
    let Some(r) = rest.strip_prefix(first) else {
        return false;
    };
    rest = r;
    for lit in p {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 6 {
            return false;
        }
        let Some(r) = rest[digits..].strip_prefix(lit) else {
            return false;
        };
        rest = r;
    }
    rest.is_empty()
}

/// Whether a profile could have made this change. `Err` says why not, in one line.
pub fn check_target(root: &Root, t: &Target) -> Result<(), String> {
    match t {
        Target::File { path, .. } => FILES
            .iter()
            .any(|p| matches(p, path))
            .then_some(())
            .ok_or_else(|| format!("{path} is not a setting any profile tunes")),
        // Only IRQ threads get a policy, only kernel threads get CPUs; a live thread that is
        // neither (a process named like one) is refused.
        Target::Thread { pid, comm } => {
            if !comm.starts_with("irq/") {
                return Err(format!("thread {pid} ({comm}) is not an IRQ thread"));
            }
            kernel_thread(root, *pid, comm)
        }
        Target::Affinity { pid, comm } => kernel_thread(root, *pid, comm),
        Target::Cpuset(c) => {
            let mounts = root.read("/proc/mounts").unwrap_or_default();
            let is_cgroup = mounts.lines().any(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.get(1) == Some(&c.mount.as_str())
                    && matches!(f.get(2), Some(&"cgroup") | Some(&"cgroup2"))
            });
            if !is_cgroup {
                return Err(format!("{} is not a cgroup mount", c.mount));
            }
            Ok(())
        }
    }
}

fn kernel_thread(root: &Root, pid: u32, comm: &str) -> Result<(), String> {
    // A thread that is gone is skipped by the restore itself; one that lives must be the
    // kernel's.
    match thread_flags(root, pid) {
        Some(f) if f & PF_KTHREAD == 0 => Err(format!("pid {pid} ({comm}) is not a kernel thread")),
        _ => Ok(()),
    }
}

/// What a side may ask: CPUs that parse, IRQs that exist.
pub fn check_side(s: &Side) -> Result<(), String> {
    let cpus = match s {
        Side::Effective { cpus, .. } | Side::Task { cpus, .. } => cpus,
    };
    if cpu_list(cpus).is_none_or(|c| c.is_empty()) {
        return Err(format!("'{cpus}' is not a CPU list"));
    }
    Ok(())
}

/// A value the kernel could have shown: one line, short.
pub fn check_value(v: &str) -> Result<(), String> {
    if v.len() > 4096 || v.contains(['\n', '\0']) {
        return Err("a value that no kernel setting shows".into());
    }
    Ok(())
}

/// As root, a journal must be root's and writable by root alone: otherwise anyone who can
/// edit it chooses what root writes.
#[cfg(unix)]
pub fn check_owner(meta: &std::fs::Metadata, as_root: bool) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    if !as_root {
        return Ok(());
    }
    if meta.uid() != 0 {
        return Err(format!(
            "owned by uid {}, not root: refusing to act on it as root",
            meta.uid()
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(format!(
            "writable by {} (mode {:o}): refusing to act on it as root",
            if meta.mode() & 0o002 != 0 {
                "everyone"
            } else {
                "its group"
            },
            meta.mode() & 0o777
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_files_a_profile_writes_pass() {
        assert!(matches(FILES[0], "/proc/irq/24/smp_affinity_list"));
        assert!(matches(
            FILES[1],
            "/sys/devices/system/cpu/cpu12/cpufreq/scaling_governor"
        ));
        assert!(matches(FILES[3], "/sys/devices/virtual/workqueue/cpumask"));
        for bad in [
            "/proc/irq/24/../../../etc/passwd",
            "/proc/irq//smp_affinity_list",
            "/proc/irq/x/smp_affinity_list",
            "/etc/passwd",
            "/proc/sys/vm/swappiness/../../../../etc/shadow",
            "/proc/sys/vm/swappinessX",
        ] {
            assert!(!FILES.iter().any(|p| matches(p, bad)), "{bad}");
        }
    }

    #[test]
    fn values_and_sides_are_bounded() {
        assert!(check_value("0-1").is_ok());
        assert!(check_value("0\n/etc/passwd").is_err());
        assert!(check_side(&Side::Effective {
            irq: 1,
            cpus: "0".into()
        })
        .is_ok());
        assert!(check_side(&Side::Effective {
            irq: 1,
            cpus: "0-99999999".into()
        })
        .is_err());
    }
}
