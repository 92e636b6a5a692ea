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
    /// No JACK server answered the client.
    #[error("{0}")]
    NoServer(String),
    /// The kernel refused a privilege the measurement needs: a real-time priority or
    /// reservation (sched_setattr EPERM), locked memory (mlockall), /dev/cpu_dma_latency.
    #[error("{0}")]
    NoPrivilege(String),
    /// The device is held by another process (ALSA's EBUSY).
    #[error("{0}")]
    DeviceBusy(String),
    /// A run stopped by the watchdog or by the server (the partial result was written), or a
    /// set-up given up after a Ctrl-C (nothing was measured).
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

    pub fn no_server(msg: impl Into<String>) -> Self {
        Error::NoServer(msg.into())
    }

    pub fn no_privilege(msg: impl Into<String>) -> Self {
        Error::NoPrivilege(msg.into())
    }

    pub fn device_busy(msg: impl Into<String>) -> Self {
        Error::DeviceBusy(msg.into())
    }

    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    /// What went wrong, for callers that react to it (a grid gives up on a missing server
    /// but skips a setting the device refused) without reading the message.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Usage(_) => ErrorKind::Usage,
            Error::Input { .. } => ErrorKind::Input,
            Error::CannotMeasure(_) => ErrorKind::CannotMeasure,
            Error::NoServer(_) => ErrorKind::NoServer,
            Error::NoPrivilege(_) => ErrorKind::NoPrivilege,
            Error::DeviceBusy(_) => ErrorKind::DeviceBusy,
            Error::Aborted(_) => ErrorKind::Aborted,
            Error::Io { .. } => ErrorKind::Io,
        }
    }

    pub fn exit_code(&self) -> u8 {
        match self.kind() {
            ErrorKind::Usage | ErrorKind::Input => EXIT_USAGE,
            ErrorKind::CannotMeasure
            | ErrorKind::NoServer
            | ErrorKind::NoPrivilege
            | ErrorKind::DeviceBusy
            | ErrorKind::Aborted
            | ErrorKind::Io => EXIT_CANNOT_MEASURE,
        }
    }

    /// The same error, its message rewritten by `f` (e.g. to name the row or stage it came
    /// from); input and I/O errors, which name their file, are left as they are.
    pub fn map_message(self, f: impl FnOnce(String) -> String) -> Self {
        match self {
            Error::Usage(m) => Error::Usage(f(m)),
            Error::CannotMeasure(m) => Error::CannotMeasure(f(m)),
            Error::NoServer(m) => Error::NoServer(f(m)),
            Error::NoPrivilege(m) => Error::NoPrivilege(f(m)),
            Error::DeviceBusy(m) => Error::DeviceBusy(f(m)),
            Error::Aborted(m) => Error::Aborted(f(m)),
            other @ (Error::Input { .. } | Error::Io { .. }) => other,
        }
    }
}

/// The kinds of [`Error`], without their messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    Usage,
    Input,
    CannotMeasure,
    NoServer,
    NoPrivilege,
    DeviceBusy,
    Aborted,
    Io,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_refusals_keep_their_message_and_exit_3() {
        for (e, kind) in [
            (
                Error::no_server("no JACK server running"),
                ErrorKind::NoServer,
            ),
            (Error::no_privilege("not permitted"), ErrorKind::NoPrivilege),
            (Error::device_busy("device busy"), ErrorKind::DeviceBusy),
        ] {
            assert_eq!(e.kind(), kind);
            assert_eq!(e.exit_code(), EXIT_CANNOT_MEASURE);
            let text = e.to_string();
            let e = e.map_message(|m| format!("row 'fifo': {m}"));
            assert_eq!(e.kind(), kind, "the prefix keeps the kind");
            assert_eq!(e.to_string(), format!("row 'fifo': {text}"));
        }
        assert_eq!(Error::usage("x").exit_code(), EXIT_USAGE);
    }
}
