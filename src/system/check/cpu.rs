//! The CPUs: frequency governors, SMT, isolation and the clocksource.

use super::{item, CheckItem, Ctx, Verdict};

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

pub(super) fn governor(c: &Ctx) -> CheckItem {
    const T: (&str, &str) = ("governor", "CPU frequency governor");
    let online = crate::system::cpu_list(&c.env.cpus.online).unwrap_or_default();
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
        "frequency ramps add latency and change DSP load: `cpupower frequency-set -g performance`",
    )
}

pub(super) fn smt(c: &Ctx) -> CheckItem {
    const T: (&str, &str) = ("smt", "SMT (hyper-threading)");
    let control = c.root.read("/sys/devices/system/cpu/smt/control");
    match (c.env.smt, control.as_deref()) {
        (Some(true), _) => item(
            T.0,
            T.1,
            Verdict::Warn,
            "active: sibling threads share a core's execution units",
            "a busy sibling slows the audio thread unpredictably: boot with nosmt, or `echo off > /sys/devices/system/cpu/smt/control`",
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
    crate::system::cpu_list(&list.join(",")).filter(|l| !l.is_empty())
}

pub(super) fn isolation(c: &Ctx) -> CheckItem {
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
    let online = crate::system::cpu_list(&c.env.cpus.online).unwrap_or_default();
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

pub(super) fn clocksource(c: &Ctx) -> CheckItem {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
