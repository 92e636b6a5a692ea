//! How a run ended, decided where the run is supervised (engine, stressors, measurements) and
//! written into every result (docs/ARCHITECTURE.md §6).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How a run ended. Anything but `complete` still carries every record collected so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    Complete,
    /// Stopped by SIGINT/SIGTERM; the result holds what was measured until then.
    Interrupted,
    /// The watchdog found a cycle that never ended and stopped the run.
    Watchdog,
    /// The audio server went away during the run.
    ServerShutdown,
}
