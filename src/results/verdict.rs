//! The verdict (`xrunlab verdict`, the first section of a suite's report): one line per buffer
//! size that answers "can this machine run real-time audio at this size", built from the other
//! results (docs/methods.md "Verdict"). Its types live here, beside the other result
//! kinds; `report::verdict` builds it from the results it reads.

use crate::measure::predict::{Outlook, Rate};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct VerdictConfig {
    /// The files read (a directory's results, or the files given).
    pub inputs: Vec<String>,
    pub rate: u32,
    /// n: the budget of a cycle is (n−1)·P.
    pub periods: u32,
    pub buffers: Vec<u32>,
    /// Glitch episodes per hour a buffer size may have (`--target`).
    pub target_per_hour: f64,
    /// `--load-pct`: the compute time assumed, when no `--cost` result gives it.
    pub load_pct: Option<f64>,
    /// `--cost FILE`.
    pub cost_file: Option<String>,
    /// `--fail-above BUFFER` (formerly `--fail-if-above`): exit 1 when the recommended size is larger (or none is).
    pub fail_if_above: Option<u32>,
    /// How the predictions read latency samples beyond the budget (`--holds`).
    #[serde(default = "crate::measure::predict::Holds::legacy")]
    pub holds: crate::measure::predict::Holds,
}

/// Under which load the latency behind a prediction was measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Condition {
    Idle,
    Stressed,
}

impl Condition {
    pub fn word(self) -> &'static str {
        match self {
            Condition::Idle => "idle",
            Condition::Stressed => "stressed",
        }
    }
}

/// The prediction of one buffer size under one condition: the worst of that condition's
/// latency inputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Predicted {
    /// The latency input it comes from (label).
    pub latency: String,
    pub xruns_per_hour: Rate,
    pub episodes_per_hour: Rate,
    pub outlook: Outlook,
    /// Only bounded: the latency measurement that would settle it.
    pub measure_for_ns: Option<u64>,
    /// Mean compute alone fills the period.
    pub overload: bool,
}

/// xruns a `run` measured at this buffer size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MeasuredRun {
    pub file: String,
    /// Stress presets it ran under (empty: idle).
    pub stress: Vec<String>,
    pub periods: u32,
    pub hours: f64,
    /// Late cycles plus skipped periods, as the run's summary counts them.
    pub xruns: u64,
    pub per_hour: Rate,
    pub dsp_load_mean_pct: f64,
    /// The run's xruns counted in windows of equal length, whose spread says how bursty
    /// they came (`report::decide::dispersion`); none in results written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub windows: Option<Windows>,
}

/// xruns counted in `count` consecutive windows of `seconds` each: their sum and the sum of
/// their squares, which is all a dispersion pooled over several runs needs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Windows {
    pub seconds: f64,
    pub count: u64,
    pub sum: u64,
    pub sum_sq: u64,
}

/// What a size's outcome rests on (docs/methods.md "Verdict"): the engine's runs under the
/// judged condition, the prediction, or the prediction where the runs are too short to tell
/// and do not contradict it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Basis {
    Measured,
    Predicted,
    Both,
}

impl Basis {
    pub fn word(self) -> &'static str {
        match self {
            Basis::Measured => "measured",
            Basis::Predicted => "predicted",
            Basis::Both => "predicted and measured",
        }
    }
}

/// The engine's runs at one size under the judged condition and period count, pooled: one
/// longer run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Checked {
    pub xruns: u64,
    pub hours: f64,
    /// Glitches per hour with Garwood's exact 95 % interval, widened by `dispersion`.
    pub per_hour: Rate,
    /// How much more the runs' xruns spread than a Poisson count's (variance over mean of
    /// their counts in windows, at least 1): their interval is widened by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispersion: Option<f64>,
}

/// The ratio of the measured glitch rate to the predicted one at a size with both, and the
/// prediction it makes of a size without a run of its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Calibration {
    /// The size whose run and prediction gave the ratio (this row's own when equal).
    pub from_frames: u32,
    /// measured / predicted, with the measured rate's 95 % interval over the prediction.
    pub ratio: Rate,
    /// This size's prediction times the ratio (only on a size without a run of its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibrated: Option<Rate>,
}

/// The most instances of one measured plugin a load grid ran without a disqualifying xrun.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PluginHeadroom {
    pub plugin: String,
    pub tracks: u32,
    pub max_per_track: u32,
    /// The grid stopped at its cap: the machine holds at least this many.
    pub capped: bool,
    /// DSP load (mean, % of the period) at that maximum.
    pub dsp_load_pct: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct VerdictRow {
    pub buffer_frames: u32,
    pub period_ms: f64,
    pub idle: Option<Predicted>,
    pub stressed: Option<Predicted>,
    pub measured: Vec<MeasuredRun>,
    /// The share of the period the assumed compute leaves free, %.
    pub free_pct: f64,
    pub plugins: Vec<PluginHeadroom>,
    /// n·P plus the loop's fixed latency (the `rtl` model when an rtl result has this size,
    /// else the buffering alone).
    pub rtl_model_ms: f64,
    /// Measured on a loop at this buffer size.
    pub rtl_measured_ms: Option<f64>,
    /// Predicted (and, where a run exists, measured) within the target under the judged
    /// condition; None: the data cannot tell.
    pub meets_target: Option<bool>,
    /// The judged condition's runs at this size, pooled (absent: no run, or a verdict
    /// written before the engine checked it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked: Option<Checked>,
    /// What the outcome rests on (absent in older verdicts: predicted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basis: Option<Basis>,
    /// Measured over predicted, here or carried from the nearest size with both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<Calibration>,
}

/// One cause of the xruns the results saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CauseLine {
    /// `late-wakeup`, `overload`, `interference`, or a culprit named by kernel tracing.
    pub cause: String,
    pub xruns: u64,
    pub share_pct: f64,
    /// Where they were seen.
    pub files: Vec<String>,
    /// What the cause means and what it points at.
    pub meaning: String,
}

/// One culprit kernel-trace forensics named, over every traced result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CulpritLine {
    /// As the forensics table names it: `comm[pid] rt:N`, `irq N action`, `softirq RCU`,
    /// `unaccounted` (said `hypervisor: the vCPU was not running` where the host stole
    /// time, `untraced` otherwise)…
    pub culprit: String,
    /// Xruns (run) or late wake-ups (latency) in which it was the top culprit.
    pub explained: u64,
    pub total_ns: u64,
    pub worst_ns: u64,
    pub files: Vec<String>,
    /// xrunlab's own threads or test load (a stage's competing task, an engine track): not
    /// the machine's culprit, listed apart.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ours: bool,
}

/// A `check` finding, ranked by how much fixing it is expected to help here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Advice {
    pub id: String,
    pub title: String,
    /// `warn` or `fail`.
    pub verdict: String,
    pub advice: String,
    /// Why it ranks where it does: the check's observation and the measured symptom it
    /// addresses.
    pub evidence: Vec<String>,
    /// Higher first.
    pub score: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct VerdictResults {
    /// The one-sentence answer (report::answer).
    pub headline: String,
    /// The exact command to run next when a size is undecided or every size fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
    /// The condition the recommendation is judged on: stressed when a stressed latency
    /// exists, else idle.
    pub judged_on: Option<Condition>,
    /// The smallest buffer size that meets the target under that condition.
    pub recommended_frames: Option<u32>,
    /// What the predictions assume the DSP costs.
    pub compute: String,
    pub rows: Vec<VerdictRow>,
    pub causes: Vec<CauseLine>,
    /// Who took the time, where `--forensics` traced a run or a latency measurement.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub culprits: Vec<CulpritLine>,
    pub advice: Vec<Advice>,
    /// What would make the verdict firmer (too-short latency measurements, missing stages).
    pub gaps: Vec<String>,
    /// `--fail-above` was crossed.
    pub failed_threshold: bool,
}

/// For tests: a verdict row at `frames` whose stressed prediction is [low, high] per hour,
/// judged against a 1/h target, with no measured run.
#[cfg(test)]
pub fn test_row(frames: u32, low: f64, high: f64) -> VerdictRow {
    let meets = if high <= 1.0 {
        Some(true)
    } else if low > 1.0 {
        Some(false)
    } else {
        None
    };
    let rate = Rate {
        per_hour: (low + high) / 2.0,
        low,
        high,
        upper_bound: false,
    };
    VerdictRow {
        buffer_frames: frames,
        period_ms: f64::from(frames) / 48.0,
        idle: None,
        stressed: Some(Predicted {
            latency: "stress".into(),
            xruns_per_hour: rate,
            episodes_per_hour: rate,
            outlook: match meets {
                Some(true) => Outlook::Ok,
                Some(false) => Outlook::Fails,
                None => Outlook::Marginal,
            },
            measure_for_ns: None,
            overload: false,
        }),
        measured: vec![],
        free_pct: 50.0,
        plugins: vec![],
        rtl_model_ms: 0.0,
        rtl_measured_ms: None,
        meets_target: meets,
        checked: None,
        basis: Some(Basis::Predicted),
        calibration: None,
    }
}
