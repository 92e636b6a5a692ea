//! What a watch keeps of every graph cycle, whatever the server: the near-miss histogram
//! (each cycle's headroom: its deadline minus the time the graph finished), each client's
//! or node's busy-time histogram, and the timeline of the worst xrun's cycle, one lane per
//! client or node. PipeWire's profiler gives all of it directly; on JACK it needs the
//! trace of the clients' threads (docs/methods.md "Watch").

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Bins of the headroom and busy histograms: 5 % of the period each.
pub const BINS: usize = 20;

/// The near-miss histogram.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Headroom {
    /// Cycles measured.
    pub cycles: u64,
    /// Cycles the graph had not finished by their deadline (the xruns).
    pub missed: u64,
    /// Finished cycles by headroom in 5 % steps of the period: `bins[0]` finished with
    /// less than 5 % of the period to spare, `bins[19]` with 95 % or more.
    pub bins: Vec<u64>,
    /// Over the finished cycles: the least headroom, and its 1st and 50th percentiles, ns.
    pub min_ns: u64,
    pub p1_ns: u64,
    pub p50_ns: u64,
    /// The period the bins are relative to, ns (the last one seen).
    pub period_ns: u64,
}

impl Headroom {
    /// Cycles that finished with less than `pct` % of the period to spare, and the xruns.
    pub fn within_pct(&self, pct: u32) -> u64 {
        let k = (pct as usize / (100 / BINS)).min(BINS);
        // Saturating: a result read from a file may hold any counts.
        self.bins
            .iter()
            .take(k)
            .fold(self.missed, |a, &b| a.saturating_add(b))
    }
}

/// Two watches' histograms as one (a `--follow` reconnect): counts add, the least headroom
/// is the least of both, the percentiles are the larger sample's.
pub fn merge(a: Headroom, b: Headroom) -> Headroom {
    let (big, small) = if a.cycles >= b.cycles { (a, b) } else { (b, a) };
    let mut bins = big.bins.clone();
    bins.resize(BINS, 0);
    for (x, y) in bins.iter_mut().zip(&small.bins) {
        *x += y;
    }
    let min = |x: u64, y: u64| match (x, y) {
        (0, y) => y,
        (x, 0) => x,
        (x, y) => x.min(y),
    };
    Headroom {
        cycles: big.cycles + small.cycles,
        missed: big.missed + small.missed,
        bins,
        min_ns: min(big.min_ns, small.min_ns),
        ..big
    }
}

/// Accumulates [`Headroom`]: a fixed histogram, no allocation per cycle.
pub struct HeadroomAcc {
    h: hdrhistogram::Histogram<u64>,
    bins: [u64; BINS],
    missed: u64,
    period_ns: u64,
}

impl Default for HeadroomAcc {
    fn default() -> Self {
        HeadroomAcc {
            h: hdrhistogram::Histogram::new_with_bounds(1, 60_000_000_000, 2)
                .expect("static bounds"),
            bins: [0; BINS],
            missed: 0,
            period_ns: 0,
        }
    }
}

impl HeadroomAcc {
    /// One cycle: `headroom_ns` to spare (None: it missed its deadline).
    pub fn add(&mut self, headroom_ns: Option<u64>, period_ns: u64) {
        self.period_ns = period_ns;
        match headroom_ns {
            None => self.missed += 1,
            Some(h) => {
                let _ = self.h.record(h.max(1));
                let b = (h as u128 * BINS as u128 / period_ns.max(1) as u128) as usize;
                self.bins[b.min(BINS - 1)] += 1;
            }
        }
    }

    pub fn result(&self) -> Headroom {
        let q = |p: f64| {
            if self.h.is_empty() {
                0
            } else {
                self.h.value_at_quantile(p)
            }
        };
        Headroom {
            cycles: self.h.len() + self.missed,
            missed: self.missed,
            bins: self.bins.to_vec(),
            min_ns: if self.h.is_empty() { 0 } else { self.h.min() },
            p1_ns: q(0.01),
            p50_ns: q(0.5),
            period_ns: self.period_ns,
        }
    }
}

/// A client's or node's busy time per cycle, in 5 % steps of the period (the last bin
/// holds everything at or past 95 %).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct BusyHistogram {
    pub name: String,
    pub bins: Vec<u64>,
    pub period_ns: u64,
}

/// One client's or node's times in the worst xrun's cycle, ns from the cycle's start.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Lane {
    pub name: String,
    pub signal_ns: i64,
    pub awake_ns: i64,
    /// None: it had not finished when it was last seen.
    pub finish_ns: Option<i64>,
    /// The one named late.
    pub late: bool,
}

/// The worst xrun's cycle.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct CycleTimeline {
    /// The xrun's index in the watch.
    pub xrun: u64,
    pub period_ns: u64,
    pub lanes: Vec<Lane>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headroom_bins_count_cycles_by_their_share_of_the_period() {
        let mut a = HeadroomAcc::default();
        let p = 1_000_000;
        for h in [10_000, 40_000, 60_000, 500_000, 999_999, 2_000_000] {
            a.add(Some(h), p);
        }
        a.add(None, p);
        let r = a.result();
        assert_eq!((r.cycles, r.missed), (7, 1));
        assert_eq!(r.bins[0], 2);
        assert_eq!(r.bins[1], 1);
        assert_eq!(r.bins[10], 1);
        assert_eq!(r.bins[19], 2);
        assert_eq!(r.within_pct(5), 3);
        assert_eq!(r.within_pct(10), 4);
        assert!(r.min_ns.abs_diff(10_000) < 200);
    }
}
