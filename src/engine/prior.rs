//! The cost of a chain's work per cycle known before the run (docs/methods.md "Xrun and
//! cause"): burn's calibration, or each plugin's per-block distribution measured by `plugins
//! bench` (`run --cost-prior FILE`). The collector judges a cycle's CPU time against it to tell
//! host time from overload from the first cycle on, instead of against the run's own typical
//! cost, which a run full of host stalls inflates.

use crate::dsp::plugin_cost::BenchResult;
use crate::dsp::ChainElement;
use crate::error::{Error, Result};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What one instance of a chain element is expected to cost per block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", tag = "from")]
pub enum ElementCost {
    /// `burn(X%)`: calibrated to X % of the period (its work is the same every block).
    Burn { percent: f64 },
    /// A `plugins bench` result's tail: p99.9 of one block through `instances` instances in
    /// series, per frame per instance (the median group when the file has no per-block
    /// figures), measured at `buffer_frames`.
    Bench {
        ns_per_frame: f64,
        instances: u32,
        buffer_frames: u32,
    },
}

impl ElementCost {
    /// Expected ns of one instance for a block of `frames` at `rate`.
    pub fn ns(&self, rate: u32, frames: u32) -> f64 {
        match *self {
            ElementCost::Burn { percent } => {
                percent / 100.0 * frames as f64 * 1e9 / rate.max(1) as f64
            }
            ElementCost::Bench { ns_per_frame, .. } => ns_per_frame * frames as f64,
        }
    }
}

/// The expected cost of every element of a chain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CostPrior {
    /// The bench result file the figures came from; None: measured by the command itself
    /// (burn's calibration, `load`'s physical-limit bench).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bench_file: Option<String>,
    /// One per chain element, in chain order.
    pub elements: Vec<ElementCost>,
}

impl CostPrior {
    /// burn's calibration: Some when every element of the chain is a burn.
    pub fn calibrated(chain: &[ChainElement]) -> Option<CostPrior> {
        let elements = chain.iter().map(burn_cost).collect::<Option<Vec<_>>>()?;
        (!elements.is_empty()).then_some(CostPrior {
            bench_file: None,
            elements,
        })
    }

    /// Every element from `bench` (the results of a `plugins bench` file named `file`), burn
    /// from its calibration. An element the file has no bench of is a usage error: a prior
    /// for part of the chain cannot say what a whole cycle should cost.
    pub fn from_bench(chain: &[ChainElement], bench: &[BenchResult], file: &str) -> Result<Self> {
        let elements = chain
            .iter()
            .map(|e| {
                bench_cost(e, bench).or_else(|| burn_cost(e)).ok_or_else(|| {
                    let one = ChainElement {
                        count: 1,
                        ..e.clone()
                    };
                    Error::usage(format!(
                        "--cost-prior {file}: no bench of '{one}' in it (measure it with `xrunlab plugins bench '{one}' -o FILE`)"
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(CostPrior {
            bench_file: Some(file.to_string()),
            elements,
        })
    }

    /// Expected ns of the first k instances of the chain with every element's count expanded,
    /// for k = 0..=instances, for blocks of `frames` at `rate`: `[k]` is one track's work
    /// with k elements active.
    pub fn prefix_ns(&self, chain: &[ChainElement], rate: u32, frames: u32) -> Vec<u64> {
        let mut out = vec![0u64];
        let mut sum = 0.0;
        for (e, c) in chain.iter().zip(&self.elements) {
            let one = c.ns(rate, frames);
            for _ in 0..e.count {
                sum += one;
                out.push(sum.round() as u64);
            }
        }
        out
    }
}

fn burn_cost(e: &ChainElement) -> Option<ElementCost> {
    if e.plugin != "burn" {
        return None;
    }
    let percent = crate::units::parse_percent(&e.params).ok()?;
    Some(ElementCost::Burn { percent })
}

/// The bench of `e`: same plugin and parameters, at the instance count nearest the chain's
/// (ties to the larger), because the per-instance cost rises once K instances' state leaves
/// the cache.
fn bench_cost(e: &ChainElement, bench: &[BenchResult]) -> Option<ElementCost> {
    bench
        .iter()
        .filter(|b| b.plugin == e.plugin && b.params == e.params)
        .min_by_key(|b| {
            (
                (b.instances as i64 - e.count as i64).unsigned_abs(),
                std::cmp::Reverse(b.instances),
            )
        })
        .map(|b| ElementCost::Bench {
            ns_per_frame: b
                .per_block
                .map(|p| p.p999_ns_per_frame)
                .unwrap_or(b.ns_per_frame),
            instances: b.instances,
            buffer_frames: b.buffer_frames,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dsp::parse_chain;

    fn bench(plugin: &str, instances: u32, p999: f64) -> BenchResult {
        BenchResult {
            plugin: plugin.into(),
            params: String::new(),
            instances,
            rate: 48000,
            buffer_frames: 256,
            signal: Default::default(),
            signal_description: String::new(),
            latency_frames: None,
            measured_frames: 0,
            mean_ns_per_frame: None,
            per_block: Some(crate::dsp::plugin_cost::BlockStats {
                blocks: 1000,
                mean_ns: 0.0,
                p50_ns: 0,
                p99_ns: 0,
                p999_ns: 0,
                max_ns: 0,
                p50_ns_per_frame: 0.0,
                p99_ns_per_frame: 0.0,
                p999_ns_per_frame: p999,
                max_ns_per_frame: 0.0,
                harness_ns: 0,
            }),
            ns_per_frame: p999 / 2.0,
            ns_per_frame_min: 0.0,
            cpu_ns_per_frame_mean: 0.0,
            core_percent: 0.0,
            instances_per_core: 0.0,
        }
    }

    #[test]
    fn burn_is_its_share_of_the_period_and_a_bench_its_tail_at_the_nearest_count() {
        // 48 frames at 48 kHz: P = 1 ms.
        let chain = parse_chain("burn(10%):2,burn(5%)").unwrap();
        let p = CostPrior::calibrated(&chain).unwrap();
        assert_eq!(
            p.prefix_ns(&chain, 48000, 48),
            [0, 100_000, 200_000, 250_000]
        );
        assert!(CostPrior::calibrated(&parse_chain("burn(10%),gain(0.5)").unwrap()).is_none());

        let chain = parse_chain("reverb-heavy:8,burn(10%)").unwrap();
        let b = [
            bench("reverb-heavy", 1, 10.0),
            bench("reverb-heavy", 6, 12.0),
            bench("reverb-heavy", 10, 14.0),
            bench("reverb-light", 8, 1.0),
        ];
        let p = CostPrior::from_bench(&chain, &b, "b.json").unwrap();
        assert_eq!(
            p.elements[0],
            ElementCost::Bench {
                ns_per_frame: 14.0,
                instances: 10,
                buffer_frames: 256
            },
            "K = 6 and 10 are as near to 8; the larger is the safer tail"
        );
        let v = p.prefix_ns(&chain, 48000, 48);
        assert_eq!(v.len(), 10);
        assert_eq!((v[1], v[8], v[9]), (672, 8 * 672, 8 * 672 + 100_000));
        let e = CostPrior::from_bench(&parse_chain("fdn").unwrap(), &b, "b.json").unwrap_err();
        assert!(e.to_string().contains("no bench of 'fdn'"), "{e}");
    }
}
