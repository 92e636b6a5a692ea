//! `--forensics` for the measuring commands: the flags, turned into the measurement session's
//! plan (`measure::session`), which records the kernel trace, explains the xruns (or spikes)
//! and writes the CSV of attributed windows (docs/methods.md "Forensics"). Without root or
//! tracefs the measurement goes on and stderr says why in one line.

use super::Global;
use crate::measure::session::ForensicsPlan;
use clap::Args;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Default, Args)]
pub struct ForensicsArgs {
    /// Record a kernel trace of the measured CPUs (a private tracefs instance) and name who
    /// took the time of each xrun: tasks, IRQs, softirqs, or time the trace cannot account
    /// for. Needs root and tracefs; without them the measurement runs and says why.
    #[arg(long)]
    pub forensics: bool,
    /// Write every attributed window as CSV [default with -o FILE.json: FILE.forensics.csv].
    #[arg(long, value_name = "FILE.csv", requires = "forensics")]
    pub forensics_csv: Option<PathBuf>,
    /// How the trace is read: raw (per-CPU binary pages) or text (trace_pipe); for
    /// scripts/bench-forensics, which compares their overhead.
    #[arg(
        long,
        value_enum,
        default_value = "raw",
        hide = true,
        requires = "forensics"
    )]
    pub forensics_reader: crate::trace::ReaderKind,
}

impl ForensicsArgs {
    /// `--forensics-csv` for the output preflight.
    pub fn csv_arg(&self) -> Option<(&'static str, &Path)> {
        self.forensics_csv
            .as_deref()
            .map(|p| ("--forensics-csv", p))
    }

    /// Where the CSV goes: the asked file, else beside a regular `-o` file.
    pub fn csv_path(&self, g: &Global) -> Option<PathBuf> {
        if !self.forensics {
            return None;
        }
        if let Some(p) = &self.forensics_csv {
            return Some(p.clone());
        }
        let o = g.output.as_deref()?;
        if o.starts_with("/dev") || o.starts_with("/proc") || super::output::is_stdout(o) {
            return None;
        }
        let stem = o.file_stem()?.to_string_lossy().into_owned();
        Some(o.with_file_name(format!("{stem}.forensics.csv")))
    }

    /// The session's forensics plan: None without `--forensics`; `above_ns` is
    /// `latency --forensics-above`.
    pub fn plan(&self, g: &Global, above_ns: Option<u64>) -> Option<ForensicsPlan> {
        self.forensics.then(|| ForensicsPlan {
            reader: self.forensics_reader,
            csv: self.csv_path(g),
            above_ns,
        })
    }
}
