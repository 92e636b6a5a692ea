//! What a change moves besides its own value, so that a restore can put that back too.
//!
//! Writing an IRQ's affinity list moves the CPU the IRQ is delivered to (its *effective*
//! affinity, which the kernel picks inside the list) and, the next time the IRQ fires, its
//! `irq/N-…` thread onto that CPU. Moving tasks into a cpuset sets each one's CPU affinity to
//! the set's CPUs, and moving them back gives them all CPUs. Writing the original value back
//! undoes neither: the list `0-1` keeps whatever CPU delivery moved to (the kernel does not
//! move an IRQ whose CPU is still in its list), and an IRQ thread that was on CPU 0 comes
//! back from the cpuset on `0-1`. So the journal records these with the change.

use super::settings::{self, thread_flags, Target, CPUS_ALLOWED, PF_NO_SETAFFINITY};
use crate::system::{cpu_list, Root};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Side {
    /// An IRQ's effective affinity before the change: written as its list first, so that the
    /// original list (a superset) keeps delivery on this CPU.
    Effective { irq: u32, cpus: String },
    /// A task's CPU affinity before the change, put back after the original value. `start`
    /// (clock ticks after boot, field 22 of its stat) and `comm` tell a reused pid apart.
    Task {
        pid: u32,
        comm: String,
        start: u64,
        cpus: String,
    },
}

/// The IRQ whose affinity list `target` is, if it is one.
pub fn irq_of(target: &Target) -> Option<u32> {
    let Target::File { path, .. } = target else {
        return None;
    };
    path.strip_prefix("/proc/irq/")?
        .strip_suffix("/smp_affinity_list")?
        .parse()
        .ok()
}

/// What changing `target` will move besides it, read now (before the change).
pub fn record(root: &Root, target: &Target) -> Vec<Side> {
    if let Some(irq) = irq_of(target) {
        let mut out: Vec<Side> = root
            .read(&format!("/proc/irq/{irq}/effective_affinity_list"))
            .filter(|c| cpu_list(c).is_some_and(|l| !l.is_empty()))
            .map(|cpus| Side::Effective { irq, cpus })
            .into_iter()
            .collect();
        out.extend(
            tasks(root).into_iter().filter(
                |t| matches!(t, Side::Task { comm, .. } if irq_thread_of(comm) == Some(irq)),
            ),
        );
        return out;
    }
    if matches!(target, Target::Cpuset(_)) {
        // Tasks on all online CPUs get all of them back from the kernel; only those bound
        // to fewer need their own CPUs back.
        let online = root
            .read("/sys/devices/system/cpu/online")
            .and_then(|s| cpu_list(&s));
        return tasks(root)
            .into_iter()
            .filter(|t| match t {
                Side::Task { cpus, .. } => cpu_list(cpus) != online,
                Side::Effective { .. } => false,
            })
            .collect();
    }
    Vec::new()
}

/// Put back what must be in place before the original value is written (an IRQ's delivery
/// CPU). Errors go to `errors`, what the kernel kept otherwise to `notes`, one line each.
pub fn before(
    root: &Root,
    target: &Target,
    sides: &[Side],
    errors: &mut Vec<String>,
    notes: &mut Vec<String>,
) {
    for s in sides {
        let Side::Effective { irq, cpus } = s else {
            continue;
        };
        let effective = || {
            root.read(&format!("/proc/irq/{irq}/effective_affinity_list"))
                .and_then(|c| cpu_list(&c))
        };
        if effective() == cpu_list(cpus) {
            continue;
        }
        // The kernel keeps an IRQ on its CPU when a new list still holds it: pinning it to
        // its old CPU first makes the original list keep it there. The move itself happens
        // when the IRQ next fires, and writing the list before that cancels it: wait for it.
        if let Err(e) = settings::write(root, target, cpus) {
            errors.push(format!("IRQ {irq} delivery back to CPU {cpus}: {e}"));
            continue;
        }
        let until = std::time::Instant::now() + EFFECTIVE_WAIT;
        while root.is_live() && effective() != cpu_list(cpus) {
            if std::time::Instant::now() >= until {
                notes.push(format!(
                    "IRQ {irq} did not fire within {} ms to move back to CPU {cpus}: the kernel keeps it on the CPU it has, inside its restored list",
                    EFFECTIVE_WAIT.as_millis()
                ));
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}

/// How long a restore waits for an IRQ to fire and so move back to its old CPU. Only IRQs
/// that fired while tuned have moved, and most of those fire often; a device that is quiet
/// (a NIC's transmit queue with nothing to send) keeps the CPU it has.
const EFFECTIVE_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// Put back what the original value's write does not (tasks' CPUs). A task that is gone,
/// or whose pid now names another task, is skipped. Errors, one line each.
pub fn after(root: &Root, sides: &[Side]) -> Vec<String> {
    let mut errors = Vec::new();
    for s in sides {
        let Side::Task {
            pid,
            comm,
            start,
            cpus,
        } = s
        else {
            continue;
        };
        let Some((now_comm, now_start, now_cpus)) = task(root, *pid) else {
            continue;
        };
        if now_comm != *comm || now_start != *start || cpu_list(&now_cpus) == cpu_list(cpus) {
            continue;
        }
        if let Err(e) = settings::write_affinity(root, *pid, comm, cpus) {
            // Exited between the read and the write: nothing to put back.
            if root.exists(&format!("/proc/{pid}/comm")) {
                errors.push(format!("{comm} (pid {pid}) CPUs back to {cpus}: {e}"));
            }
        }
    }
    errors
}

/// The IRQ an `irq/N-name` thread serves.
fn irq_thread_of(comm: &str) -> Option<u32> {
    comm.strip_prefix("irq/")?.split('-').next()?.parse().ok()
}

/// Every task (thread) whose affinity userspace may set, as a [`Side::Task`] of its current
/// CPUs. Per-CPU kernel threads (`PF_NO_SETAFFINITY`) are the kernel's and left out.
fn tasks(root: &Root) -> Vec<Side> {
    let mut out = Vec::new();
    for pid in root
        .list("/proc")
        .iter()
        .filter_map(|p| p.parse::<u32>().ok())
    {
        let tids: Vec<u32> = root
            .list(&format!("/proc/{pid}/task"))
            .iter()
            .filter_map(|t| t.parse().ok())
            .collect();
        // A fixture tree has no task directories: its processes are single-threaded.
        let tids = if tids.is_empty() { vec![pid] } else { tids };
        for tid in tids {
            if thread_flags(root, tid).is_none_or(|f| f & PF_NO_SETAFFINITY != 0) {
                continue;
            }
            if let Some((comm, start, cpus)) = task(root, tid) {
                out.push(Side::Task {
                    pid: tid,
                    comm,
                    start,
                    cpus,
                });
            }
        }
    }
    out
}

/// A task's name, start time and CPUs (`/proc/TID` works for any thread id).
fn task(root: &Root, tid: u32) -> Option<(String, u64, String)> {
    let comm = root.read(&format!("/proc/{tid}/comm"))?;
    let stat = root.read(&format!("/proc/{tid}/stat"))?;
    let start = stat_start(&stat)?;
    let cpus = settings::status_field(&root.read(&format!("/proc/{tid}/status"))?, CPUS_ALLOWED)?;
    Some((comm, start, cpus))
}

/// starttime (field 22) of a `/proc/PID/stat` line, counted after the name's last `)`.
fn stat_start(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // rest starts at field 3.
    rest.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn irq_lists_and_threads_are_recognised() {
        let t = Target::File {
            path: "/proc/irq/24/smp_affinity_list".into(),
            form: settings::Form::CpuList,
        };
        assert_eq!(irq_of(&t), Some(24));
        let t = Target::File {
            path: "/proc/irq/24/../../etc/passwd".into(),
            form: settings::Form::CpuList,
        };
        assert_eq!(irq_of(&t), None);
        assert_eq!(irq_thread_of("irq/24-ACPI:Ged"), Some(24));
        assert_eq!(irq_thread_of("kworker/0:1"), None);
    }

    #[test]
    fn start_time_survives_names_with_spaces() {
        let fields: Vec<String> = (3..=52).map(|i| i.to_string()).collect();
        let line = format!("77 (irq/16-snd hda) {}", fields.join(" "));
        assert_eq!(stat_start(&line), Some(22));
    }
}
