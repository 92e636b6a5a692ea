//! The one result model (docs/ARCHITECTURE.md §6): a versioned envelope around a kind-specific body,
//! written atomically, with a JSON Schema generated from these types and committed under
//! `schema/`.

pub mod cyclictest;
pub mod import;
pub mod migrate;
pub mod suite;
pub mod validate;
pub mod verdict;
pub mod write;

use crate::system::Environment;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::common::Status;
pub use write::{
    check_target, check_target_derived, parse_result, read_result, read_result_text, write_atomic,
    write_atomic_derived, write_json_atomic,
};

/// Check a typed result (docs/ARCHITECTURE.md §6): every reader and `import` call this, so
/// nothing downstream meets an empty list, a zero rate or counts that disagree. The error
/// names the field; callers add the file.
pub fn validate(doc: &ResultDoc) -> std::result::Result<(), validate::Problem> {
    validate::validate_body(&doc.body)
}

/// Bumped whenever a change to the types would break readers of older files; readers bring
/// older files up to it with [`migrate::upgrade`]. 2: fields named after a study got names
/// saying what they hold (`published_ms`, `grid_buffer_frames`). 3: a run's `lv2` plugin
/// records became `plugins`, each with its `format` (CLAP and VST3 beside LV2). 4: a watch's
/// smaller buffer size is `rough`, no longer a `lower_bound` (measured, it was not one).
pub const SCHEMA_VERSION: u32 = 4;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Tool {
    pub name: String,
    pub version: String,
}

impl Default for Tool {
    fn default() -> Self {
        Tool {
            name: env!("CARGO_PKG_NAME").into(),
            version: env!("CARGO_PKG_VERSION").into(),
        }
    }
}

/// The kind-specific part: `kind` names it, `config` is what was asked, `results` what was
/// measured. One variant per measuring command.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, strum::EnumDiscriminants)]
#[serde(tag = "kind", rename_all = "lowercase")]
// `Kind` is Body's list of variants made by the compiler, so the kinds this build knows are
// never a hand-copied list that a new variant can miss (report::known_kind reads it).
#[strum_discriminants(name(Kind), derive(strum::EnumIter, strum::IntoStaticStr))]
#[strum_discriminants(strum(serialize_all = "lowercase"))]
// One document per run: variant sizes differing is harmless.
#[allow(clippy::large_enum_variant)]
pub enum Body {
    Check {
        config: crate::system::check::CheckConfig,
        results: crate::system::check::CheckReport,
    },
    Stress {
        config: crate::stress::run::StressConfig,
        results: Box<crate::stress::run::StressResults>,
    },
    Latency {
        config: crate::measure::latency::LatencyConfig,
        results: Box<crate::measure::latency::LatencyResult>,
    },
    Run {
        config: crate::measure::run::RunConfig,
        results: crate::measure::run::RunResults,
    },
    /// `plugins bench`: cost per frame of built-in plugins, the physical limit per core.
    Bench {
        config: crate::dsp::plugin_cost::BenchConfig,
        results: Vec<crate::dsp::plugin_cost::BenchResult>,
    },
    /// `plugins audit`: per plugin, real-time safety, output, cost, latency and state checks.
    Audit {
        config: crate::measure::audit::AuditConfig,
        results: Vec<crate::measure::audit::PluginAudit>,
    },
    /// `latencytest`: Senoner's loop, idle and under each stress class.
    Latencytest {
        config: crate::measure::latencytest::LatencytestConfig,
        results: Box<crate::measure::latencytest::LatencytestResult>,
    },
    /// `load`: the DSP load test grid (Vignati et al. §3.1.1), maximum instances per cell.
    Load {
        config: crate::measure::loadtest::LoadConfig,
        results: crate::measure::loadtest::LoadResults,
    },
    /// `sched`: the graph under each scheduling policy against a competing task (Cucinotta et al.).
    Sched {
        config: crate::measure::sched::SchedConfig,
        results: Box<crate::measure::sched::SchedResults>,
    },
    /// `rtl`: round-trip latency, modelled (eq. 1 of Vignati et al.) and measured on a loop.
    Rtl {
        config: crate::measure::rtl::RtlConfig,
        results: Box<crate::measure::rtl::RtlResults>,
    },
    /// `event`: trigger-to-sound latency per backend, setting and scenario (Topliss et al.).
    Event {
        config: crate::measure::event::EventConfig,
        results: Box<crate::measure::event::EventResults>,
    },
    /// `predict`: expected xruns and episodes per hour per buffer size and period count,
    /// from a latency result and a compute time.
    Predict {
        config: crate::measure::predict::PredictConfig,
        results: Box<crate::measure::predict::PredictResults>,
    },
    /// `verdict`: per buffer size, predicted and measured xruns, headroom and round trip;
    /// the smallest size that meets a target; causes and advice.
    Verdict {
        config: verdict::VerdictConfig,
        results: Box<verdict::VerdictResults>,
    },
    /// `watch`: every xrun of a live JACK or PipeWire session.
    Watch {
        config: crate::measure::watch::WatchConfig,
        results: Box<crate::measure::watch::WatchResults>,
    },
}

impl Kind {
    /// Every kind this build has a typed body for, as written in the JSON.
    pub fn all() -> impl Iterator<Item = &'static str> {
        <Kind as strum::IntoEnumIterator>::iter().map(<&'static str>::from)
    }
}

impl Body {
    /// The `kind` string as written in the JSON.
    pub fn kind(&self) -> &'static str {
        Kind::from(self).into()
    }

    /// The `--forensics` section of a result that has one.
    pub fn forensics(&self) -> Option<&crate::trace::Forensics> {
        match self {
            Body::Run { results, .. } => results.forensics.as_ref(),
            Body::Latency { results, .. } => results.forensics.as_ref(),
            Body::Load { results, .. } => results.forensics.as_ref(),
            Body::Sched { results, .. } => results.forensics.as_ref(),
            Body::Latencytest { results, .. } => results.forensics.as_ref(),
            Body::Event { results, .. } => results.forensics.as_ref(),
            Body::Watch { results, .. } => results.forensics.as_ref(),
            _ => None,
        }
    }
}

/// One result document.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ResultDoc {
    pub schema_version: u32,
    pub tool: Tool,
    #[serde(flatten)]
    pub body: Body,
    pub status: Status,
    /// RFC 3339 wall-clock time the run started / ended.
    pub started_at: String,
    pub ended_at: String,
    /// The command line that produced the result.
    pub command: Vec<String>,
    pub environment: Environment,
    /// Conditions that weaken the evidence (VM, governor, RT throttling, no privilege...).
    #[serde(default)]
    pub warnings: Vec<String>,
}

impl ResultDoc {
    /// Wrap a body measured between `started_at` and now, in `environment`.
    pub fn new(
        body: Body,
        status: Status,
        started_at: String,
        mut environment: Environment,
    ) -> Self {
        environment.finish_steal();
        let mut warnings = environment.warnings();
        warnings.dedup();
        ResultDoc {
            schema_version: SCHEMA_VERSION,
            tool: Tool::default(),
            body,
            status,
            started_at,
            ended_at: crate::rt::clock::wall_clock_rfc3339(),
            command: std::env::args().collect(),
            environment,
            warnings,
        }
    }

    pub fn kind(&self) -> &'static str {
        self.body.kind()
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("result types always serialise")
    }
}

/// The JSON Schema of `ResultDoc`, as committed in `schema/result.schema.json`.
pub fn schema_json() -> String {
    let schema = schemars::schema_for!(ResultDoc);
    let mut s = serde_json::to_string_pretty(&schema).expect("schema serialises");
    s.push('\n');
    s
}
