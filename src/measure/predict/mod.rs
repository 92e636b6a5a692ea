//! `xrunlab predict`: the expected xruns per hour of each buffer size and period count, from a
//! wake-up latency distribution and a compute time (docs/methods.md, "Predicted xrun
//! rate", which defines every figure here).
//!
//! A cycle misses when wake-up latency L plus compute time C exceeds the budget B = (n−1)·P.
//! L comes from a latency result's histograms (the 1 µs buckets below its bound, the HDR
//! buckets of the overflows), each bucket's values spread evenly over its width; C is a
//! discrete distribution (a share of the period, or a measured distribution's percentiles).
//! Everything is a sum over (bucket, cost point) pairs, so the arithmetic is exact on the
//! buckets.

mod cost_input;
mod latency_input;
mod model;
mod special;

pub use cost_input::*;
pub use latency_input::*;
pub use model::row;
pub use special::{poisson_high, poisson_low};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

const NS_PER_HOUR: f64 = 3.6e12;
/// Below this many latency samples beyond the budget a rate is reported as an upper bound.
pub const MIN_EVENTS: f64 = 3.0;
/// The confidence of every interval.
pub const CONFIDENCE: f64 = 0.95;
/// Default `--target`: one xrun episode per hour.
pub const DEFAULT_TARGET_PER_HOUR: f64 = 1.0;

// ---------------------------------------------------------------------------------------
// What is asked and what comes out

/// How a latency sample beyond the budget is read (docs/methods.md, "Predicted xrun
/// rate", where the measurements that chose the default are).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Holds {
    /// Delays come with wake-ups: each wake-up of the audio thread draws one latency as the
    /// measurement's wake-ups did, whatever the interval (a halted vCPU waiting for its host,
    /// a wake-up path's lock). Matches the sim and, within 1.3–3.3×, this project's KVM
    /// guest at three buffer sizes.
    #[default]
    Wakeup,
    /// Delays are holds arriving in time, independently of any thread's timer (SMIs, a
    /// preempted busy vCPU): a long sample is a stall the audio thread meets however often it
    /// wakes. Conservative; over-predicted that guest 7–35×.
    Timed,
}

impl Holds {
    pub fn word(self) -> &'static str {
        match self {
            Holds::Wakeup => "wakeup",
            Holds::Timed => "timed",
        }
    }

    /// One phrase for the reports.
    pub fn describe(self) -> &'static str {
        match self {
            Holds::Wakeup => "latency drawn per wake-up (--holds wakeup)",
            Holds::Timed => "long latencies read as stalls in time (--holds timed, conservative)",
        }
    }

    /// Predictions written before the choice existed were read as timed holds.
    pub fn legacy() -> Self {
        Holds::Timed
    }
}

/// What to predict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PredictConfig {
    /// `--latency` values as given (`FILE` or `LABEL=FILE`).
    pub latency: Vec<String>,
    /// `--cost FILE` (a run, load or bench result).
    pub cost_file: Option<String>,
    pub load_pct: Option<f64>,
    /// `--instances K`: the bench results used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instances: Option<u32>,
    /// `--cell TRACKS:PLUGIN`: the load grid's column used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell: Option<String>,
    /// Only this CPU's samples (None: every CPU pooled).
    pub cpu: Option<usize>,
    /// The interval assumed for files that do not record theirs.
    pub interval_ns: Option<u64>,
    pub rate: u32,
    pub buffers: Vec<u32>,
    pub periods: Vec<u32>,
    /// Episodes per hour a buffer size may have to be `ok`.
    pub target_per_hour: f64,
    pub confidence: f64,
    /// How samples beyond the budget are read (`--holds`).
    #[serde(default = "Holds::legacy")]
    pub holds: Holds,
}

/// A rate with its interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Rate {
    /// Expected per hour.
    pub per_hour: f64,
    /// The interval at the configured confidence (exact Poisson on the latency samples
    /// beyond the budget, scaled).
    pub low: f64,
    pub high: f64,
    /// Fewer than 3 samples beyond the budget: the data only bounds the rate (`< high`).
    pub upper_bound: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Outlook {
    /// The interval's upper end is within the target.
    Ok,
    /// The interval contains the target: the data cannot tell (measure longer).
    Marginal,
    /// The interval's lower end is above the target, or the compute alone overloads.
    Fails,
}

impl Outlook {
    pub fn word(self) -> &'static str {
        match self {
            Outlook::Ok => "ok",
            Outlook::Marginal => "marginal",
            Outlook::Fails => "fails",
        }
    }
}

/// One buffer size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PredictRow {
    pub buffer_frames: u32,
    pub period_ns: f64,
    /// (n−1)·P.
    pub budget_ns: f64,
    pub compute_mean_ns: f64,
    pub compute_max_ns: f64,
    pub cycles_per_hour: f64,
    /// P(L + C > budget): one cycle's chance to miss, its wake-up one draw of L.
    pub p_miss: f64,
    /// Latency samples beyond the budget (fractional: buckets straddling it count in part,
    /// cost points by their probability): what the intervals rest on.
    pub events_beyond: f64,
    /// Cycles that end late, per hour.
    pub xruns_per_hour: Rate,
    /// Runs of consecutive late cycles (one host stall each), per hour.
    pub episodes_per_hour: Rate,
    /// xruns / episodes: cycles a stall costs when the driver catches up (JACK).
    pub cycles_per_episode: f64,
    /// The share of device periods whose cycle wakes from sleep and so draws a wake-up
    /// latency; the rest catch up behind a late cycle or are skipped after a miss.
    pub fresh_share: f64,
    /// Mean compute ≥ P: the backlog grows without bound whatever the latency.
    pub overload: bool,
    /// Some samples beyond the budget are censored (taken at the recorded maximum).
    pub censored: bool,
    /// When the rate is only bounded: the latency measurement (wall time, same CPUs)
    /// that would see 3 samples beyond the budget if episodes came at the target rate.
    pub measure_for_ns: Option<u64>,
    pub outlook: Outlook,
    /// With a `latency --busy` input: the part of the rates that comes from holds met
    /// while computing (already in `xruns_per_hour` and `episodes_per_hour`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_compute: Option<HeldInCompute>,
}

/// The holds an engine meets while computing, from a busy thread's (`latency --busy`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HeldInCompute {
    /// Holds longer than the budget the compute leaves, B − C (fractional, as
    /// `events_beyond`): what the intervals rest on besides the wake-ups.
    pub holds_beyond: f64,
    pub episodes_per_hour: f64,
    pub xruns_per_hour: f64,
}

/// One latency input at one period count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PredictTable {
    pub latency: String,
    pub periods: u32,
    pub rows: Vec<PredictRow>,
    /// The smallest buffer size whose outlook is `ok`.
    pub smallest_ok_frames: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PredictResults {
    pub latency: Vec<LatencyInfo>,
    pub compute: Compute,
    pub compute_description: String,
    pub tables: Vec<PredictTable>,
}

/// Every table: one per latency input and period count, one row per buffer size.
pub fn predict(cfg: &PredictConfig, inputs: &[LatencyInput], cost: &CostInput) -> PredictResults {
    let mut tables = Vec::new();
    for input in inputs {
        for &n in &cfg.periods {
            let rows: Vec<PredictRow> = cfg
                .buffers
                .iter()
                .map(|&frames| {
                    let period = frames as f64 * 1e9 / cfg.rate as f64;
                    row(
                        &input.data,
                        &cost.compute.at(frames, period),
                        frames,
                        n,
                        cfg,
                    )
                })
                .collect();
            tables.push(PredictTable {
                latency: input.info.label.clone(),
                periods: n,
                smallest_ok_frames: rows
                    .iter()
                    .find(|r| r.outlook == Outlook::Ok)
                    .map(|r| r.buffer_frames),
                rows,
            });
        }
    }
    PredictResults {
        latency: inputs.iter().map(|i| i.info.clone()).collect(),
        compute: cost.compute.clone(),
        compute_description: cost.description.clone(),
        tables,
    }
}
