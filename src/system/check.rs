//! `xrunlab check`: is this system set up for real-time audio? rtcqs's checks plus what
//! real-time audio measurement needs. Each check reports ok / warn / fail, what it observed
//! and one line of advice.

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

/// Run every check against `root` (and, when it is the live system, the live probes).
pub fn run_checks(_root: &Root, env: &Environment) -> CheckReport {
    let mut items = Vec::new();

    items.push(match &env.virtualization {
        None => item("virtualization", "Virtualisation", Verdict::Ok, "bare metal", ""),
        Some(v) => item(
            "virtualization",
            "Virtualisation",
            Verdict::Warn,
            v.clone(),
            "a hypervisor can stall this guest for milliseconds; measure on bare metal for final figures",
        ),
    });

    let model = env.preempt.model.as_str();
    items.push(item(
        "preempt",
        "Kernel preemption model",
        match model {
            "rt" => Verdict::Ok,
            "full" | "lazy" => Verdict::Warn,
            _ => Verdict::Fail,
        },
        format!("{model} (from {})", env.preempt.source),
        if env.preempt.dynamic {
            "boot with preempt=full (PREEMPT_DYNAMIC), or better a PREEMPT_RT kernel (linux-image-rt-*)"
        } else {
            "install a PREEMPT_RT kernel (Debian: linux-image-rt-amd64 / linux-image-rt-arm64)"
        },
    ));

    items.push(match env.limits.sched_rt_runtime_us {
        Some(-1) => item("rt-throttling", "RT throttling", Verdict::Ok, "off (-1)", ""),
        Some(v) => item(
            "rt-throttling",
            "RT throttling",
            Verdict::Warn,
            format!("sched_rt_runtime_us = {v} of {} µs", env.limits.sched_rt_period_us.unwrap_or(1_000_000)),
            "RT tasks are throttled after that budget; for measurements: sysctl kernel.sched_rt_runtime_us=-1 (keep the watchdog on)",
        ),
        None => item(
            "rt-throttling",
            "RT throttling",
            Verdict::Warn,
            "not readable",
            "/proc/sys/kernel/sched_rt_runtime_us is missing",
        ),
    });

    CheckReport::from_items(items)
}
