//! `xrunlab stress` as a library function: hold a load (and optionally the competing
//! periodic task) for a duration, then report what ran. Useful on its own to watch a
//! machine under a preset, and as the end-to-end exercise of every cleanup path.

use super::periodic::{PeriodicResult, PeriodicSpec, PeriodicTask};
use super::session::{StressRecord, StressSession};
use super::spec::StressSpec;
use crate::common::Status;
use crate::error::Result;
use crate::progress::Progress;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StressConfig {
    pub presets: Vec<String>,
    pub duration_ns: u64,
    pub compete: Option<PeriodicSpec>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StressResults {
    pub stress: StressRecord,
    pub compete: Option<PeriodicResult>,
}

/// Run the load for `duration_ns`, or until SIGINT/SIGTERM (then the status is
/// `Interrupted` and the record covers the time until then).
pub fn run_stress(
    spec: &StressSpec,
    duration_ns: u64,
    compete: Option<&PeriodicSpec>,
    progress: &dyn Progress,
) -> Result<(StressResults, Status)> {
    let session = StressSession::start(spec, Duration::from_nanos(duration_ns))?;
    let task = compete
        .map(|c| PeriodicTask::start(c.clone()))
        .transpose()?;
    let t0 = crate::rt::clock::monotonic_ns();
    let secs = duration_ns.div_ceil(1_000_000_000);
    progress.set_unit(crate::progress::Unit::Seconds);
    progress.set_total(secs);
    progress.set_message("stress");
    loop {
        let el = crate::rt::clock::monotonic_ns() - t0;
        if el >= duration_ns || crate::rt::interrupt::requested() {
            break;
        }
        progress.set_position(el / 1_000_000_000);
        crate::rt::clock::sleep_until_ns(
            crate::rt::clock::monotonic_ns() + (duration_ns - el).min(50_000_000),
        );
    }
    progress.finish();
    let status = if crate::rt::interrupt::requested() {
        Status::Interrupted
    } else {
        Status::Complete
    };
    let compete = task.map(PeriodicTask::stop);
    let stress = session.stop();
    Ok((StressResults { stress, compete }, status))
}
