//! Distribution summaries from HDR histograms, shared by the engine, the stressors and every
//! measurement so that "p99" means the same thing in `latency`, `run`, `load` and `sched`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub type Histogram = hdrhistogram::Histogram<u64>;

/// Highest value a nanosecond histogram records exactly (10 s); larger values are clamped
/// to it and counted as saturated.
pub const HIST_MAX_NS: u64 = 10_000_000_000;

/// A histogram of nanosecond values from 1 ns to 10 s at 3 significant digits (~0.1 %
/// resolution). Allocated up front; recording never allocates.
pub fn new_ns_histogram() -> Histogram {
    Histogram::new_with_bounds(1, HIST_MAX_NS, 3).expect("static bounds are valid")
}

/// Record a value without allocating: values outside the range are clamped.
#[inline]
pub fn record_clamped(h: &mut Histogram, v: u64) {
    let v = v.clamp(1, HIST_MAX_NS);
    // Cannot fail: v is within the histogram's bounds and auto-resize is off.
    let _ = h.record(v);
}

/// The percentiles every summary reports.
pub const PERCENTILES: [(&str, f64); 6] = [
    ("p50", 50.0),
    ("p90", 90.0),
    ("p99", 99.0),
    ("p99_9", 99.9),
    ("p99_99", 99.99),
    ("p99_9999", 99.9999),
];

/// count/min/mean/max and fixed percentiles of a distribution, in the histogram's unit
/// (nanoseconds unless a field name says otherwise).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Summary {
    pub count: u64,
    pub min: u64,
    pub mean: f64,
    pub max: u64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p99_9: u64,
    pub p99_99: u64,
    pub p99_9999: u64,
}

impl Summary {
    /// Nothing was recorded (a field a result's older writer did not fill).
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Summarise a histogram. `min`/`max` are exact when the caller tracked them
    /// (`with_exact_extremes`); the histogram's are within its resolution.
    pub fn of(h: &Histogram) -> Self {
        if h.is_empty() {
            return Summary::default();
        }
        let q = |p: f64| h.value_at_percentile(p);
        Summary {
            count: h.len(),
            min: h.min(),
            mean: h.mean(),
            max: h.max(),
            p50: q(50.0),
            p90: q(90.0),
            p99: q(99.0),
            p99_9: q(99.9),
            p99_99: q(99.99),
            p99_9999: q(99.9999),
        }
    }

    /// Replace the histogram's bucketed min/max/mean with exactly tracked ones. Bucketed
    /// percentiles are clamped into [min, max]: a bucket's upper edge can lie above the
    /// exact maximum, and "p99.9999 > max" would be nonsense to a reader.
    pub fn with_exact(mut self, min: u64, max: u64, sum: u128) -> Self {
        if self.count > 0 {
            self.min = min;
            self.max = max;
            self.mean = sum as f64 / self.count as f64;
            for p in [
                &mut self.p50,
                &mut self.p90,
                &mut self.p99,
                &mut self.p99_9,
                &mut self.p99_99,
                &mut self.p99_9999,
            ] {
                *p = (*p).clamp(min, max);
            }
        }
        self
    }

    /// The value of a named percentile (`p50`, `p99_9`, ... or `max`/`min`).
    pub fn get(&self, name: &str) -> Option<u64> {
        Some(match name {
            "min" => self.min,
            "max" => self.max,
            "p50" => self.p50,
            "p90" => self.p90,
            "p99" => self.p99,
            "p99_9" => self.p99_9,
            "p99_99" => self.p99_99,
            "p99_9999" => self.p99_9999,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn percentiles_match_sorting_within_resolution(mut v in prop::collection::vec(1u64..5_000_000, 1..2000)) {
            let mut h = new_ns_histogram();
            for &x in &v { record_clamped(&mut h, x); }
            let s = Summary::of(&h);
            v.sort_unstable();
            for (p, got) in [(50.0, s.p50), (90.0, s.p90), (99.0, s.p99)] {
                // The value at percentile p is the smallest value with at least p% of samples <= it.
                let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
                let want = v[rank - 1];
                let tol = (want as f64 * 0.001).max(1.0);
                prop_assert!((got as f64 - want as f64).abs() <= tol, "p{p}: got {got}, want {want}");
            }
            prop_assert_eq!(s.count, v.len() as u64);
        }
    }

    #[test]
    fn exact_extremes_bound_the_percentiles() {
        let mut h = new_ns_histogram();
        for v in [4_288_336u64, 1000, 1001] {
            record_clamped(&mut h, v);
        }
        let s = Summary::of(&h).with_exact(1000, 4_288_336, 4_290_337);
        assert!(s.p99_9999 <= s.max && s.p50 >= s.min, "{s:?}");
    }

    #[test]
    fn clamps_out_of_range_values() {
        let mut h = new_ns_histogram();
        record_clamped(&mut h, 0);
        record_clamped(&mut h, u64::MAX);
        assert_eq!(h.len(), 2);
        assert!(h.max() >= HIST_MAX_NS);
    }
}
