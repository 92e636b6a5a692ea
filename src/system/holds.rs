//! What can hold a runnable thread off its CPU by configuration rather than by load:
//! real-time throttling and a cgroup's CPU quota (the forensics' culprit classes).

use super::Root;

/// Real-time throttling's share of each period for real-time tasks:
/// `kernel.sched_rt_runtime_us / sched_rt_period_us` (the default 0.95); None when it is
/// off (-1) or unreadable.
pub fn rt_runtime_share_in(root: &Root) -> Option<f64> {
    let num = |p: &str| root.read(p).and_then(|s| s.trim().parse::<i64>().ok());
    let runtime = num("/proc/sys/kernel/sched_rt_runtime_us")?;
    let period = num("/proc/sys/kernel/sched_rt_period_us").filter(|&p| p > 0)?;
    (runtime >= 0).then(|| runtime as f64 / period as f64)
}

/// [`rt_runtime_share_in`] of the live system.
pub fn rt_runtime_share() -> Option<f64> {
    rt_runtime_share_in(&Root::default())
}

/// The running kernel preempts a task in kernel code for a higher-priority one (model
/// `full`, `lazy` or `rt`); with `none` or `voluntary` a task keeps its CPU through a
/// kernel section until it reaches a preemption point, real-time threads waiting.
pub fn preemptible() -> bool {
    let root = Root::default();
    let kernel = root.read("/proc/sys/kernel/osrelease").unwrap_or_default();
    let version = root.read("/proc/sys/kernel/version").unwrap_or_default();
    let cmdline = root.read("/proc/cmdline").unwrap_or_default();
    let config = super::kconfig::KernelConfig::read(&root, &kernel);
    let p = super::env::preempt_model(&root, &version, &cmdline, config.as_ref());
    matches!(p.model.as_str(), "full" | "lazy" | "rt")
}

/// The process's cgroup or one above it has a CPU quota: in cgroup v2 a `cpu.max` other
/// than `max …` (at /sys/fs/cgroup, or /sys/fs/cgroup/unified on a hybrid system), in v1's
/// cpu controller a `cpu.cfs_quota_us` other than -1. False where none can be read (the
/// process gone).
pub fn cpu_quota_in(root: &Root, pid: i32) -> bool {
    let Some(cg) = root.read(&format!("/proc/{pid}/cgroup")) else {
        return false;
    };
    let v2 = |q: &str| q.split_whitespace().next().is_some_and(|q| q != "max");
    let v1 = |q: &str| q.trim().parse::<i64>().is_ok_and(|q| q >= 0);
    for line in cg.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(id), Some(ctrl), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let found = if id == "0" && ctrl.is_empty() {
            limited_above(
                root,
                path,
                &["/sys/fs/cgroup", "/sys/fs/cgroup/unified"],
                "cpu.max",
                &v2,
            )
        } else if ctrl.split(',').any(|c| c == "cpu") {
            let mounts = ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"];
            limited_above(root, path, &mounts, "cpu.cfs_quota_us", &v1)
        } else {
            false
        };
        if found {
            return true;
        }
    }
    false
}

/// `file` under `path` or a cgroup above it, under one of `mounts`, says `limited`.
fn limited_above(
    root: &Root,
    path: &str,
    mounts: &[&str],
    file: &str,
    limited: &dyn Fn(&str) -> bool,
) -> bool {
    // The path comes from the kernel; a component that climbs out is not one.
    if path.split('/').any(|c| c == "..") {
        return false;
    }
    let mut dir = path.trim().trim_end_matches('/').to_string();
    loop {
        let hit = mounts.iter().any(|m| {
            root.read(&format!("{m}{dir}/{file}"))
                .is_some_and(|q| limited(&q))
        });
        if hit {
            return true;
        }
        match dir.rfind('/') {
            Some(i) => dir.truncate(i),
            None => return false,
        }
    }
}

/// [`cpu_quota_in`] of the live system.
pub fn cpu_quota_of(pid: i32) -> bool {
    cpu_quota_in(&Root::default(), pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(files: &[(&str, &str)]) -> (tempfile::TempDir, Root) {
        let d = tempfile::tempdir().unwrap();
        for (p, s) in files {
            let f = d.path().join(p.trim_start_matches('/'));
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, s).unwrap();
        }
        let r = Root::new(d.path());
        (d, r)
    }

    #[test]
    fn throttling_is_off_only_at_minus_one() {
        let period = ("/proc/sys/kernel/sched_rt_period_us", "1000000\n");
        let (_d, r) = root(&[("/proc/sys/kernel/sched_rt_runtime_us", "950000\n"), period]);
        assert_eq!(rt_runtime_share_in(&r), Some(0.95));
        let (_d, r) = root(&[("/proc/sys/kernel/sched_rt_runtime_us", "-1\n"), period]);
        assert_eq!(rt_runtime_share_in(&r), None);
        let (_d, r) = root(&[]);
        assert_eq!(rt_runtime_share_in(&r), None);
    }

    #[test]
    fn a_quota_is_found_on_the_process_cgroup_or_above() {
        let (_d, r) = root(&[
            ("/proc/5/cgroup", "0::/a/b\n"),
            ("/sys/fs/cgroup/a/b/cpu.max", "max 100000\n"),
            ("/sys/fs/cgroup/a/cpu.max", "20000 100000\n"),
        ]);
        assert!(cpu_quota_in(&r, 5));
        let (_d, r) = root(&[
            ("/proc/5/cgroup", "0::/a/b\n"),
            ("/sys/fs/cgroup/a/b/cpu.max", "max 100000\n"),
        ]);
        assert!(!cpu_quota_in(&r, 5));
        let (_d, r) = root(&[("/proc/5/cgroup", "0::/\n")]);
        assert!(!cpu_quota_in(&r, 5));
        assert!(!cpu_quota_in(&r, 6));
    }

    #[test]
    fn a_v1_quota_is_found_through_the_cpu_controller() {
        let (_d, r) = root(&[
            ("/proc/5/cgroup", "4:memory:/m\n1:cpu:/a\n0::/\n"),
            ("/sys/fs/cgroup/cpu/a/cpu.cfs_quota_us", "1000\n"),
            ("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n"),
        ]);
        assert!(cpu_quota_in(&r, 5));
        let (_d, r) = root(&[
            ("/proc/5/cgroup", "2:cpu,cpuacct:/a\n"),
            ("/sys/fs/cgroup/cpu,cpuacct/a/cpu.cfs_quota_us", "-1\n"),
        ]);
        assert!(!cpu_quota_in(&r, 5));
    }
}
