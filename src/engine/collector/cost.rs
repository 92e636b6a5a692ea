//! The expected cost of a cycle's work, learnt in the run or given as a prior, against which
//! an overload xrun is judged host time or more work.

use super::Dist;
use crate::common::{Cause, CycleRecord};

/// How many in-time cycles the expected cost per element run needs before overload xruns
/// are judged against it (before that an xrun keeps its raw cause).
pub const HOST_CPU_MIN_CYCLES: u64 = 32;

/// A prior is set aside once the run's median in-time cycle costs this much of it (per
/// mille): against the prior that ordinary cycle would itself count as host time
/// (`common::cycle::host_excess`), so the prior does not describe this machine or chain.
pub const PRIOR_STALE_PER_MILLE: u64 = 1250;

/// What a thread's work in a cycle is expected to cost, to tell an overload from host time
/// charged to its CPU clock (docs/methods.md "Xrun and cause"): a prior known before
/// the run (`prior::CostPrior`: burn's calibration or a bench's tail) while the run's typical
/// cycle agrees with it, else the run's own p99 cost of a unit of work
/// (`common::cycle::crit_work`) from its in-time cycles.
#[derive(Default)]
pub struct WorkCost {
    per_unit: Dist,
    n: u64,
    /// `per_unit`'s p99, refreshed as cycles are learnt (a percentile per cycle would cost
    /// the collector more than the engine's cycle).
    unit_p99: u64,
    /// The raw and the judged cause of the last xrun, for cycles that inherit it.
    last: Option<(Cause, Cause)>,
    /// Expected ns of one track's first k chain instances (`CostPrior::prefix_ns`); empty:
    /// no prior.
    prior: Vec<u64>,
    /// In-time cycles' critical CPU time per mille of the prior's expectation.
    prior_ratio: Dist,
    prior_n: u64,
    prior_stale: bool,
}

impl WorkCost {
    /// Judged against `prefix_ns` (`CostPrior::prefix_ns` of the run's chain and block).
    pub fn with_prior(prefix_ns: Vec<u64>) -> Self {
        WorkCost {
            prior: prefix_ns,
            ..WorkCost::default()
        }
    }

    /// The prior is what cycles are judged against (there is one, and it is not stale).
    pub fn prior_in_use(&self) -> bool {
        !self.prior.is_empty() && !self.prior_stale
    }

    /// The in-time cycles' median critical CPU time as a share of the prior's expectation.
    pub fn prior_median_ratio(&self) -> Option<f64> {
        (self.prior_n > 0).then(|| self.prior_ratio.summary().p50 as f64 / 1000.0)
    }

    /// The prior's expectation for `tracks` tracks of `r`'s active elements.
    fn prior_ns(&self, r: &CycleRecord, tracks: u64) -> u64 {
        let len = self.prior.len().saturating_sub(1);
        // `active_clients` saturates at 255: a longer chain then runs whole.
        let active = if r.active_clients == u8::MAX {
            len
        } else {
            (r.active_clients as usize).min(len)
        };
        tracks * self.prior.get(active).copied().unwrap_or(0)
    }

    /// What engine thread `thread`'s work in `r` is expected to cost; None while nothing is
    /// known (no prior, fewer than `HOST_CPU_MIN_CYCLES` in-time cycles).
    pub fn expected(&self, r: &CycleRecord, thread: u8) -> Option<u64> {
        let mut tracks = crate::common::cycle::tracks_on(r, thread);
        if thread == r.crit_thread {
            tracks = tracks.max(1);
        }
        if self.prior_in_use() {
            return Some(self.prior_ns(r, tracks));
        }
        (self.n >= HOST_CPU_MIN_CYCLES)
            .then(|| self.unit_p99 * tracks * (r.active_clients as u64).max(1))
    }

    fn learn(&mut self, r: &CycleRecord) {
        self.per_unit
            .record(r.crit_cpu_ns / crate::common::cycle::crit_work(r));
        self.n += 1;
        if !self.prior.is_empty() {
            let tracks = crate::common::cycle::tracks_on(r, r.crit_thread).max(1);
            let e = self.prior_ns(r, tracks);
            if let Some(ratio) = (r.crit_cpu_ns * 1000).checked_div(e) {
                self.prior_ratio.record(ratio);
                self.prior_n += 1;
            }
        }
        // Often while the estimate is young, then every 64 cycles.
        if self.n < 4 * HOST_CPU_MIN_CYCLES || self.n.is_multiple_of(64) {
            self.unit_p99 = self.per_unit.quantile(0.99);
            self.prior_stale = self.prior_n >= HOST_CPU_MIN_CYCLES
                && self.prior_ratio.quantile(0.5) >= PRIOR_STALE_PER_MILLE;
        }
    }

    /// Judge `r` (reclassifying host time) and learn from it when it was in time. Returns the
    /// expected CPU time when the xrun was reclassified.
    pub fn judge(&mut self, r: &mut CycleRecord) -> Option<u64> {
        if r.cause.is_none() {
            self.learn(r);
            self.last = None;
            return None;
        }
        if r.inherited {
            if let Some((raw, judged)) = self.last.filter(|l| Some(l.0) == r.cause) {
                r.cause = Some(judged);
                self.last = Some((raw, judged));
            }
            return None;
        }
        let raw = r.cause?;
        let mut expected = None;
        if let Some(e) = self.expected(r, r.crit_thread) {
            if crate::common::cycle::host_cpu_excess(r, e).is_some() {
                r.cause = Some(Cause::Interference);
                expected = Some(e);
            }
        }
        self.last = Some((raw, r.cause.unwrap_or(raw)));
        expected
    }
}
