//! The kernel: preemption model, threaded IRQs, its config, high-resolution timers, tickless
//! operation, RT throttling and CPU vulnerability mitigations.

use super::{item, CheckItem, Ctx, Verdict};
use crate::system::env::cmdline_param;

pub(super) fn preempt(c: &Ctx) -> CheckItem {
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

pub(super) fn threadirqs(c: &Ctx) -> CheckItem {
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

pub(super) fn kernel_config(c: &Ctx) -> CheckItem {
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

pub(super) fn hrtimers(c: &Ctx) -> CheckItem {
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

pub(super) fn tickless(c: &Ctx) -> CheckItem {
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

pub(super) fn rt_throttling(c: &Ctx) -> CheckItem {
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
                "a runaway RT thread is stopped, but so is a busy audio thread; for measurements: `sysctl kernel.sched_rt_runtime_us=-1` (xrunlab's watchdog guards the machine)",
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

pub(super) fn mitigations(c: &Ctx) -> CheckItem {
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
