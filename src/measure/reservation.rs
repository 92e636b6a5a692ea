//! The adaptive reservation controller of Cucinotta et al. (the AQuoSA QoS loop around JACK), as a pure
//! state machine: it is fed each cycle's consumed CPU time and answers the budget Q to reserve
//! per period. Nothing here makes a syscall, so the same code drives `sched_setattr` from a
//! non-RT helper in `xrunlab sched` and runs deterministically under test.
//!
//! - Predicted Q: the p-th percentile (nearest rank) of the last W cycles' CPU time.
//! - Set Q: Predicted Q × (1 + over-provisioning), raised by the bump floor, clamped to
//!   [Q_min, 0.95·P].
//! - Bump: an xrun or a client joining says the window no longer describes the load, so the
//!   budget is multiplied by (1 + bump) and that floor is held for W cycles — long enough for
//!   the window to be refilled with samples of the new situation.

use crate::error::{Error, Result};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The controller's tunables (every one is a `xrunlab sched` option).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ControllerConfig {
    /// Reservation period P (the audio period).
    pub period_ns: u64,
    /// Moving window W, cycles.
    pub window: usize,
    /// Percentile of the window's CPU times to predict, in (0, 100].
    pub percentile: f64,
    /// Over-provisioning factor: Q = estimate × (1 + this).
    pub overprovision: f64,
    /// Bump on an xrun or a new client: Q × (1 + this).
    pub bump: f64,
    /// Lower clamp of Q.
    pub q_min_ns: u64,
    /// Budget before the first sample (also what an empty window predicts).
    pub initial_ns: u64,
}

/// Upper clamp of Q as a share of P: a reservation of the whole period would leave the CPU no
/// room for anything else and is refused by admission anyway.
pub const Q_MAX_SHARE: f64 = 0.95;

/// SCHED_DEADLINE refuses runtimes below 1024 ns.
pub const KERNEL_MIN_RUNTIME_NS: u64 = 1024;

impl ControllerConfig {
    /// Cucinotta et al.'s settings for a period: a window of 100 cycles, p = 99.9 %, 5 % over-provisioning,
    /// a 20 % bump, Q_min = 2 % of P, starting from half the period.
    pub fn for_period(period_ns: u64) -> Self {
        ControllerConfig {
            period_ns,
            window: 100,
            percentile: 99.9,
            overprovision: 0.05,
            bump: 0.2,
            q_min_ns: (period_ns / 50).max(KERNEL_MIN_RUNTIME_NS),
            initial_ns: period_ns / 2,
        }
    }

    pub fn q_max_ns(&self) -> u64 {
        (self.period_ns as f64 * Q_MAX_SHARE) as u64
    }

    pub fn validate(&self) -> Result<()> {
        if self.period_ns < 10 * KERNEL_MIN_RUNTIME_NS {
            return Err(Error::usage(
                "the reservation period must be at least 10 µs",
            ));
        }
        if !(1..=1_000_000).contains(&self.window) {
            return Err(Error::usage(format!(
                "--window {} is outside 1..1000000 cycles",
                self.window
            )));
        }
        if !(self.percentile > 0.0 && self.percentile <= 100.0) {
            return Err(Error::usage(format!(
                "--percentile {} is outside (0, 100]",
                self.percentile
            )));
        }
        for (name, v) in [
            ("--overprovision", self.overprovision),
            ("--bump", self.bump),
        ] {
            if !(0.0..=10.0).contains(&v) {
                return Err(Error::usage(format!("{name} {v} is outside 0..1000 %")));
            }
        }
        if self.q_min_ns > self.q_max_ns() {
            return Err(Error::usage(format!(
                "--q-min {} µs is above 95 % of the period ({} µs)",
                self.q_min_ns / 1000,
                self.q_max_ns() / 1000
            )));
        }
        Ok(())
    }
}

/// What the controller says after a cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Step {
    /// The budget to reserve for the next period.
    pub set_q_ns: u64,
    /// The percentile estimate it was derived from.
    pub predicted_q_ns: u64,
}

/// The controller. All memory is allocated by `new`; `observe` never allocates, so it may run
/// on any thread.
#[derive(Debug, Clone)]
pub struct Controller {
    cfg: ControllerConfig,
    /// Samples in arrival order (circular).
    ring: Vec<u64>,
    /// The same samples, sorted: the exact order statistics of the window.
    sorted: Vec<u64>,
    head: usize,
    /// Bump floor and the cycles it is still held for.
    floor_ns: u64,
    floor_left: usize,
    last: Step,
    bumps: u64,
}

impl Controller {
    pub fn new(cfg: ControllerConfig) -> Result<Self> {
        cfg.validate()?;
        let initial = clamp(cfg.initial_ns, &cfg);
        Ok(Controller {
            ring: Vec::with_capacity(cfg.window),
            sorted: Vec::with_capacity(cfg.window),
            head: 0,
            floor_ns: 0,
            floor_left: 0,
            last: Step {
                set_q_ns: initial,
                predicted_q_ns: cfg.initial_ns,
            },
            bumps: 0,
            cfg,
        })
    }

    pub fn config(&self) -> &ControllerConfig {
        &self.cfg
    }

    /// The latest output (the initial budget before any sample).
    pub fn current(&self) -> Step {
        self.last
    }

    /// Bumps so far (xruns + clients added).
    pub fn bumps(&self) -> u64 {
        self.bumps
    }

    /// The window's p-th percentile, nearest-rank; None while empty.
    pub fn estimate(&self) -> Option<u64> {
        if self.sorted.is_empty() {
            return None;
        }
        Some(self.sorted[rank_index(self.sorted.len(), self.cfg.percentile)])
    }

    /// Feed one cycle's consumed CPU time; `xrun` = that cycle missed its deadline.
    pub fn observe(&mut self, cpu_ns: u64, xrun: bool) -> Step {
        self.push(cpu_ns);
        if self.floor_left > 0 {
            self.floor_left -= 1;
        }
        if xrun {
            self.bump();
        }
        self.last = self.compute();
        self.last
    }

    /// A client joined the graph: no guess can be made about what it needs, so bump.
    pub fn client_added(&mut self) -> Step {
        self.bump();
        self.last = self.compute();
        self.last
    }

    fn bump(&mut self) {
        self.bumps += 1;
        // Bumps compound: a second xrun while the first floor holds asks for more again.
        let base = self.last.set_q_ns.max(self.floor_ns_active());
        self.floor_ns = (base as f64 * (1.0 + self.cfg.bump)) as u64;
        self.floor_left = self.cfg.window;
    }

    fn floor_ns_active(&self) -> u64 {
        if self.floor_left > 0 {
            self.floor_ns
        } else {
            0
        }
    }

    fn compute(&self) -> Step {
        let predicted = self.estimate().unwrap_or(self.cfg.initial_ns);
        let wanted = (predicted as f64 * (1.0 + self.cfg.overprovision)).ceil() as u64;
        Step {
            set_q_ns: clamp(wanted.max(self.floor_ns_active()), &self.cfg),
            predicted_q_ns: predicted,
        }
    }

    fn push(&mut self, v: u64) {
        if self.ring.len() < self.cfg.window {
            self.ring.push(v);
        } else {
            let old = std::mem::replace(&mut self.ring[self.head], v);
            self.head = (self.head + 1) % self.cfg.window;
            // Any copy of the value will do: equal values are interchangeable.
            let i = self.sorted.partition_point(|&x| x < old);
            self.sorted.remove(i);
        }
        let i = self.sorted.partition_point(|&x| x <= v);
        self.sorted.insert(i, v);
    }
}

fn clamp(q: u64, cfg: &ControllerConfig) -> u64 {
    q.clamp(cfg.q_min_ns, cfg.q_max_ns())
}

/// Nearest-rank percentile index into n sorted samples: the smallest sample with at least p % of
/// the samples at or below it.
pub fn rank_index(n: usize, percentile: f64) -> usize {
    debug_assert!(n > 0);
    // The tolerance keeps decimal percentiles exact: 99.9 / 100 × 1000 is 999.0000000000001
    // in binary floating point, and its ceiling would skip a rank.
    let rank = (percentile / 100.0 * n as f64 - 1e-9).ceil() as usize;
    rank.clamp(1, n) - 1
}

/// Split a total budget among threads in proportion to each one's measured CPU share, each part
/// at least the kernel's minimum runtime. With no measurement yet, equal parts.
pub fn split_budget(total_ns: u64, shares_ns: &[u64], out: &mut [u64]) {
    let n = shares_ns.len().min(out.len());
    if n == 0 {
        return;
    }
    let sum: u128 = shares_ns[..n].iter().map(|&s| s as u128).sum();
    for i in 0..n {
        let part = match (total_ns as u128 * shares_ns[i] as u128).checked_div(sum) {
            Some(p) => p as u64,
            None => total_ns / n as u64,
        };
        out[i] = part.max(KERNEL_MIN_RUNTIME_NS);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cfg(window: usize) -> ControllerConfig {
        ControllerConfig {
            window,
            ..ControllerConfig::for_period(2_666_000)
        }
    }

    #[test]
    fn step_up_and_down_is_followed_within_the_window() {
        let c = cfg(50);
        let mut k = Controller::new(c).unwrap();
        for _ in 0..200 {
            k.observe(300_000, false);
        }
        assert_eq!(k.current().predicted_q_ns, 300_000);
        assert_eq!(k.current().set_q_ns, 315_000);
        // Up: the estimate is near the top of the window, so it follows at once.
        for _ in 0..c.window {
            k.observe(600_000, false);
        }
        assert_eq!(k.current().set_q_ns, 630_000);
        // Down: the old samples must leave the window first — exactly W cycles.
        let mut followed_at = None;
        for i in 0..c.window {
            if k.observe(100_000, false).predicted_q_ns == 100_000 && followed_at.is_none() {
                followed_at = Some(i + 1);
            }
        }
        let at = followed_at.expect("Q never came down within W cycles");
        assert!(at <= c.window, "{at}");
        assert_eq!(k.current().set_q_ns, 105_000);
    }

    #[test]
    fn an_xrun_bumps_and_the_bump_is_held_for_a_window() {
        let c = cfg(20);
        let mut k = Controller::new(c).unwrap();
        for _ in 0..40 {
            k.observe(400_000, false);
        }
        let before = k.current().set_q_ns;
        let after = k.observe(400_000, true).set_q_ns;
        assert_eq!(after, (before as f64 * 1.2) as u64);
        assert_eq!(k.bumps(), 1);
        for _ in 0..c.window - 1 {
            assert_eq!(k.observe(400_000, false).set_q_ns, after);
        }
        assert_eq!(k.observe(400_000, false).set_q_ns, before);
        // A client joining bumps too.
        assert!(k.client_added().set_q_ns > before);
    }

    #[test]
    fn the_clamp_holds() {
        let c = cfg(10);
        let mut k = Controller::new(c).unwrap();
        assert_eq!(k.observe(0, false).set_q_ns, c.q_min_ns);
        for _ in 0..10 {
            k.observe(10 * c.period_ns, true);
        }
        assert_eq!(k.current().set_q_ns, c.q_max_ns());
        assert_eq!(c.q_max_ns(), 2_532_700);
    }

    #[test]
    fn bad_configs_are_usage_errors() {
        for bad in [
            ControllerConfig {
                window: 0,
                ..cfg(1)
            },
            ControllerConfig {
                percentile: 0.0,
                ..cfg(1)
            },
            ControllerConfig {
                percentile: 101.0,
                ..cfg(1)
            },
            ControllerConfig {
                overprovision: -0.1,
                ..cfg(1)
            },
            ControllerConfig {
                q_min_ns: 2_600_000,
                ..cfg(1)
            },
        ] {
            let e = Controller::new(bad).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{e}");
        }
    }

    #[test]
    fn budget_split_follows_shares() {
        let mut out = [0u64; 3];
        split_budget(1_000_000, &[600, 300, 100], &mut out);
        assert_eq!(out, [600_000, 300_000, 100_000]);
        split_budget(1_000_000, &[0, 0, 0], &mut out);
        assert_eq!(out, [333_333; 3]);
        split_budget(1_000_000, &[1_000_000, 0, 0], &mut out);
        assert_eq!(
            out,
            [1_000_000, KERNEL_MIN_RUNTIME_NS, KERNEL_MIN_RUNTIME_NS]
        );
    }

    proptest! {
        #[test]
        fn estimator_equals_brute_force_percentile(
            window in 1usize..64,
            p in 1.0f64..=100.0,
            xs in proptest::collection::vec(0u64..2_000, 1..300),
        ) {
            let mut k = Controller::new(ControllerConfig {
                window,
                percentile: p,
                ..ControllerConfig::for_period(1_000_000)
            }).unwrap();
            for (i, &x) in xs.iter().enumerate() {
                k.observe(x, false);
                let lo = (i + 1).saturating_sub(window);
                let mut w: Vec<u64> = xs[lo..=i].to_vec();
                w.sort_unstable();
                // Nearest rank, written out: the first sample with at least p % at or below it.
                let need = p / 100.0 * w.len() as f64;
                let brute = *w.iter().enumerate().find(|(j, _)| (j + 1) as f64 >= need - 1e-9).unwrap().1;
                prop_assert_eq!(k.estimate(), Some(brute));
                let q = k.current().set_q_ns;
                prop_assert!(q >= k.config().q_min_ns && q <= k.config().q_max_ns());
            }
        }
    }
}
