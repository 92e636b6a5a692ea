//! xrunlab: measured evidence of whether a Linux machine can run real-time audio, at which
//! buffer size, with how much DSP headroom, and why each xrun happened.
//!
//! The architecture is docs/ARCHITECTURE.md §2: data flows driver → engine → probes → results → report.
//! Every measurement is a library function taking a config and returning a result; the
//! binary (`cli`) only parses, calls and prints.

pub mod cli;
pub mod common;
pub mod driver;
pub mod dsp;
pub mod engine;
pub mod error;
pub mod measure;
pub mod progress;
pub mod report;
pub mod results;
pub mod rt;
pub mod stress;
pub mod suite;
pub mod system;
pub mod trace;
pub mod units;

pub use error::{Error, Result};
