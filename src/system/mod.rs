//! The environment a measurement ran in, and `xrunlab check` (docs/ARCHITECTURE.md §2 `system/`).
//!
//! Every probe reads through a [`Root`] so tests can point it at fixture trees of /proc and
//! /sys instead of the live system.

pub mod check;
mod env;
mod holds;
pub mod interrupts;
pub mod kconfig;
pub mod probe;
pub mod steal;
pub mod throttle;
pub mod tune;

pub use env::{Cpus, Environment, Isolation, Limits, Preempt};
pub use holds::{cpu_quota_in, cpu_quota_of, preemptible, rt_runtime_share, rt_runtime_share_in};

use std::path::{Path, PathBuf};

/// Where /proc, /sys, /etc and /dev are read from: `/` on a live system, a fixture
/// directory in tests.
#[derive(Debug, Clone)]
pub struct Root(PathBuf);

impl Default for Root {
    fn default() -> Self {
        Root(PathBuf::from("/"))
    }
}

impl Root {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Root(path.into())
    }

    /// True when probing the running system (so live-only probes such as trying a policy
    /// may run).
    pub fn is_live(&self) -> bool {
        self.0 == Path::new("/")
    }

    /// The path of an absolute system path under this root.
    pub fn path(&self, abs: &str) -> PathBuf {
        self.0.join(abs.trim_start_matches('/'))
    }

    /// File contents, trimmed; None when absent, unreadable, not a regular file or larger
    /// than any such file is (a fixture tree is user input).
    pub fn read(&self, abs: &str) -> Option<String> {
        crate::common::input::read_capped(
            &self.path(abs),
            crate::common::input::SYSTEM_FILE_MAX_BYTES,
            "system file",
        )
        .ok()
        .map(|s| s.trim().to_string())
    }

    pub fn exists(&self, abs: &str) -> bool {
        self.path(abs).exists()
    }

    /// Entry names of a directory, sorted; empty when absent.
    pub fn list(&self, abs: &str) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.path(abs))
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }
}

/// A kernel CPU list (`0-3,8`), refusing numbers no machine has so that a corrupt file
/// cannot make the parser expand a range into billions of entries.
pub(crate) fn cpu_list(s: &str) -> Option<Vec<usize>> {
    let too_big = s
        .split(|c: char| !c.is_ascii_digit())
        .filter(|n| !n.is_empty())
        .any(|n| n.len() > 5 || n.parse::<usize>().map_or(true, |v| v > 16_384));
    if too_big {
        return None;
    }
    crate::rt::affinity::parse_cpu_list(s).ok()
}
