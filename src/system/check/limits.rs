//! Who may run real-time: the user's groups, RLIMIT_RTPRIO and an actual SCHED_FIFO probe,
//! locked memory and /dev/cpu_dma_latency.

use super::{item, CheckItem, Ctx, Verdict};
use crate::system::probe::PROBE_PRIORITY;
use crate::system::Root;

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

pub(super) fn user(c: &Ctx) -> CheckItem {
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
            "`sudo usermod -aG audio $USER`, then log in again",
        ),
    }
}

pub(super) fn rtprio_limit(c: &Ctx) -> CheckItem {
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
            "run `ulimit -r` to see the limit",
        ),
    }
}

pub(super) fn rt_priority(c: &Ctx) -> CheckItem {
    rt_priority_verdict(&c.env.limits)
}

/// The `rt-priority` verdict from the live probe, or inferred from the limits when the
/// probe did not run (fixtures). Separate so its logic is testable without privileges.
pub fn rt_priority_verdict(l: &crate::system::Limits) -> CheckItem {
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

pub(super) fn memlock(c: &Ctx) -> CheckItem {
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
            "run `ulimit -l` to see the limit",
        ),
    }
}

pub(super) fn cpu_dma_latency(c: &Ctx) -> CheckItem {
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
    match crate::system::probe::dma_latency_writable(&path) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::probe::RtProbe;
    use crate::system::Limits;

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
    fn sizes_are_human() {
        assert_eq!(human_bytes(8 << 20), "8 MiB");
        assert_eq!(human_bytes(1 << 30), "1 GiB");
        assert_eq!(human_bytes(65536), "64 KiB");
    }
}
