//! The vocabulary every layer shares (docs/ARCHITECTURE.md §2): what a cycle record is and how
//! its xrun and cause are decided, what a device's parameters are and how frames convert to
//! nanoseconds, how a run ended, and what a distribution summary reports. Each is written once
//! here so drivers, the engine, the stressors, the measurements and the results agree on it.
//!
//! This module is the bottom layer: it imports nothing from the crate but `crate::error`
//! (tests/layers.rs checks it), so any layer may use it without creating a cycle.

pub mod cycle;
pub mod device;
pub mod input;
pub mod output;
pub mod procs;
pub mod stats;
pub mod status;
pub mod target;

pub use cycle::{account, account_after, Cause, CycleRecord};
pub use device::{frames_of_ns, ns_of_frames, DeviceParams};
pub use stats::{Histogram, Summary};
pub use status::Status;
