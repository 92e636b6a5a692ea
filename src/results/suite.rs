//! The suite's manifest (DIR/manifest.json): what `xrunlab suite` ran, skipped and why. It is
//! a result like the others, so its types live here, where the report that renders it and the
//! suite that writes it (a layer above, docs/ARCHITECTURE.md §2) can both reach them.

use crate::error::{Error, Result};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// How long the stages run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Minutes: short durations, a tiny load grid (the README's first command).
    Quick,
    /// the studies' durations: hours (Vignati et al.: 10 min trials, 2 h validation, 5 h cyclictest).
    Full,
    /// Seconds: every stage once, for the test suite.
    Smoke,
}

/// The manifest's file name in the suite's directory.
pub const MANIFEST: &str = "manifest.json";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum StageStatus {
    Ok,
    Failed,
    Skipped,
}

/// One line of the manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StageRecord {
    pub stage: String,
    /// The child's arguments after the binary (`-o FILE` included when it ran).
    pub argv: Vec<String>,
    pub status: StageStatus,
    /// Why it was skipped or failed.
    pub reason: Option<String>,
    /// What weakens an `ok` stage (e.g. stress-ng missing: an approximated load).
    pub note: Option<String>,
    pub exit_code: Option<i32>,
    pub duration_s: f64,
    /// The stage's result, relative to DIR (present when it exists).
    pub file: Option<String>,
    /// The child's stdout and stderr, relative to DIR.
    pub log: Option<String>,
}

impl StageRecord {
    /// A stage that has not run (yet): skipped until its run says otherwise.
    pub fn not_run(stage: &str, argv: Vec<String>) -> StageRecord {
        StageRecord {
            stage: stage.into(),
            argv,
            status: StageStatus::Skipped,
            reason: None,
            note: None,
            exit_code: None,
            duration_s: 0.0,
            file: None,
            log: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SuiteStatus {
    Running,
    Complete,
    Interrupted,
    /// The suite itself stopped on an error (a file it could not write: a full disk);
    /// `reason` says which.
    Failed,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Manifest {
    pub tool: super::Tool,
    pub mode: Mode,
    pub driver: String,
    pub status: SuiteStatus,
    /// Why the suite stopped before its end (status `failed`, or `interrupted` by an error
    /// met while stopping).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub started_at: String,
    pub ended_at: Option<String>,
    pub stages: Vec<StageRecord>,
    /// The HTML report, relative to DIR, once written.
    pub report: Option<String>,
    /// `suite --tuned`: what the profile applied and skipped, and what was restored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tuning: Option<Tuning>,
}

/// Stages run again with the tuning profile applied are named `STAGE-tuned`.
pub const TUNED_SUFFIX: &str = "-tuned";

impl StageRecord {
    /// Run with the tuning profile applied (`suite --tuned`): the "after" of a stage.
    pub fn is_tuned(&self) -> bool {
        self.stage.ends_with(TUNED_SUFFIX)
    }
}

/// The tuning of `suite --tuned` (docs/methods.md "Tuning").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Tuning {
    pub profile: crate::system::tune::Profile,
    pub audio_cpus: Vec<usize>,
    pub housekeeping_cpus: Vec<usize>,
    /// The undo journal (`xrunlab tune --restore --journal FILE` if the suite was killed).
    pub journal: String,
    /// Every setting of the plan: applied, already set, or skipped with why.
    pub applied: Vec<crate::system::tune::Applied>,
    /// What was written back afterwards (an error per value that could not be).
    pub restored: Vec<crate::system::tune::Restored>,
    /// Boot-time parameters the profile would add (never written).
    pub boot_cmdline: String,
    /// Why the tuned stages did not run, or what went wrong applying or restoring.
    pub error: Option<String>,
}

impl Manifest {
    /// DIR/manifest.json.
    pub fn read(dir: &Path) -> Result<Manifest> {
        Manifest::read_file(&dir.join(MANIFEST))
    }

    pub fn read_file(p: &Path) -> Result<Manifest> {
        let t = crate::common::input::read_capped(
            p,
            crate::common::input::MANIFEST_MAX_BYTES,
            "suite manifest",
        )?;
        serde_json::from_str(&t).map_err(|e| Error::input(p, format!("not a suite manifest: {e}")))
    }

    pub fn write(&self, dir: &Path) -> Result<()> {
        let mut s = serde_json::to_string_pretty(self).expect("manifest serialises");
        s.push('\n');
        super::write_atomic_derived(&dir.join(MANIFEST), s.as_bytes())
    }

    /// Exit code of the whole suite: 3 interrupted or failed, 1 a stage failed, 0 otherwise.
    pub fn exit_code(&self) -> u8 {
        if matches!(self.status, SuiteStatus::Interrupted | SuiteStatus::Failed) {
            crate::error::EXIT_CANNOT_MEASURE
        } else if self.stages.iter().any(|s| s.status == StageStatus::Failed) {
            crate::error::EXIT_THRESHOLD
        } else {
            0
        }
    }
}
