//! Load during measurements (docs/ARCHITECTURE.md §2 `stress/`): stress presets run by stress-ng when it
//! is installed and by built-in stressors otherwise, and the rt-app-like competing periodic
//! task. Every child process dies with xrunlab.
//!
//! Wiring `--stress` into a measuring command:
//! ```ignore
//! #[command(flatten)] stress: cli::stress_args::StressArgs, // in the command's clap Args
//! let spec = args.stress.to_spec()?;                     // usage errors exit 2
//! let session = stress::StressSession::start(&spec, run)?; // before the measurement
//! let result = measure(...);                             // an early `?` drops the session: stressors stop
//! let stress = session.stop();                           // StressRecord for the result
//! env.stress = spec.labels();
//! ```

pub mod argv;
pub mod builtin;
pub mod periodic;
pub mod registry;
pub mod run;
pub mod session;
pub mod spec;

pub use periodic::{PeriodicResult, PeriodicSpec, PeriodicStats, PeriodicTask};
pub use session::{StressRecord, StressSession};
pub use spec::{BackendChoice, Preset, StressSpec};
