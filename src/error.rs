//! One error type for the library, carrying the exit code the CLI must return.
//!
//! docs/ARCHITECTURE.md §1 fixes the exit codes: 0 ok, 1 a `--fail-*` threshold was crossed (not an
//! error: commands return it as an outcome), 2 bad usage or input, 3 could not measure.

use std::path::PathBuf;

/// Exit code for a crossed `--fail-*` threshold.
pub const EXIT_THRESHOLD: u8 = 1;
/// Exit code for bad usage or bad input.
pub const EXIT_USAGE: u8 = 2;
/// Exit code when the measurement could not be made (privileges, server, hardware).
pub const EXIT_CANNOT_MEASURE: u8 = 3;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A bad option value or combination, detected before anything was measured.
    #[error("{0}")]
    Usage(String),
    /// A malformed input file (import, report, compare, resume).
    #[error("{path}: {msg}")]
    Input { path: PathBuf, msg: String },
    /// The system refused what the measurement needs: privileges, a server, a device.
    #[error("{0}")]
    CannotMeasure(String),
    /// A run stopped by the watchdog or by the server; the partial result was written.
    #[error("{0}")]
    Aborted(String),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    pub fn usage(msg: impl Into<String>) -> Self {
        Error::Usage(msg.into())
    }

    pub fn input(path: impl Into<PathBuf>, msg: impl Into<String>) -> Self {
        Error::Input {
            path: path.into(),
            msg: msg.into(),
        }
    }

    pub fn cannot_measure(msg: impl Into<String>) -> Self {
        Error::CannotMeasure(msg.into())
    }

    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Usage(_) | Error::Input { .. } => EXIT_USAGE,
            Error::CannotMeasure(_) | Error::Aborted(_) | Error::Io { .. } => EXIT_CANNOT_MEASURE,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
