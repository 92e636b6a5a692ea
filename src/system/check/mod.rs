//! `xrunlab check`: is this system set up for real-time audio? rtcqs's checks plus what
//! real-time audio measurement needs. Each check reports ok / warn / fail, what it observed
//! and one line of advice.
//!
//! Every check reads through [`Root`], so fixture trees decide the verdicts in tests; the
//! two probes that must act on the system (trying SCHED_FIFO, opening
//! `/dev/cpu_dma_latency`) run only on the live root and are inferred from files otherwise.

mod cpu;
mod kernel;
mod limits;
mod pi;
mod platform;

use cpu::{clocksource, governor, isolation, smt};
use kernel::{hrtimers, kernel_config, mitigations, preempt, rt_throttling, threadirqs, tickless};
use limits::{cpu_dma_latency, memlock, rt_priority, rtprio_limit, user};
use platform::{container, filesystems, irq_sharing, sound_cards, swap, virtualization};

pub use limits::rt_priority_verdict;

use super::kconfig::KernelConfig;
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

/// What every check may look at.
struct Ctx<'a> {
    root: &'a Root,
    env: &'a Environment,
    config: Option<KernelConfig>,
}

/// Run every check against `root` (and, when it is the live system, the live probes), then
/// the board's own (a Raspberry Pi's) where they apply.
pub fn run_checks(root: &Root, env: &Environment) -> CheckReport {
    let ctx = Ctx {
        root,
        env,
        config: KernelConfig::read(root, &env.kernel),
    };
    let checks: [fn(&Ctx) -> CheckItem; 22] = [
        user,
        rtprio_limit,
        rt_priority,
        memlock,
        cpu_dma_latency,
        preempt,
        threadirqs,
        kernel_config,
        hrtimers,
        tickless,
        rt_throttling,
        mitigations,
        governor,
        smt,
        isolation,
        clocksource,
        sound_cards,
        irq_sharing,
        swap,
        filesystems,
        virtualization,
        container,
    ];
    let mut items: Vec<CheckItem> = checks.iter().map(|c| c(&ctx)).collect();
    // Board-specific checks follow the general ones, only where they apply.
    items.extend(pi::checks(&ctx));
    CheckReport::from_items(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_checks_run_and_notice_this_machine() {
        let root = Root::default();
        let env = Environment::capture_at(&root);
        let r = run_checks(&root, &env);
        assert!(r.checks.len() >= 22, "{}", r.checks.len());
        assert_eq!(r.ok + r.warn + r.fail, r.checks.len());
        // Live, the RT probe must have run rather than being inferred.
        let rt = r.get("rt-priority").unwrap();
        assert!(!rt.observed.contains("not probed"), "{rt:?}");
        for c in &r.checks {
            assert!(!c.observed.is_empty(), "{c:?}");
            assert_eq!(c.advice.is_empty(), c.verdict == Verdict::Ok, "{c:?}");
        }
        // A guest must never pass for bare metal.
        let guest = root
            .read("/proc/cpuinfo")
            .is_some_and(|t| t.split_whitespace().any(|w| w == "hypervisor"));
        if guest {
            assert_eq!(r.get("virtualization").unwrap().verdict, Verdict::Warn);
        }
        // Throttling on must be reported, whatever the machine.
        if env.limits.sched_rt_runtime_us.is_some_and(|v| v >= 0) {
            assert_eq!(r.get("rt-throttling").unwrap().verdict, Verdict::Warn);
        }
    }
}
