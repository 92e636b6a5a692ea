//! `--forensics` for the measuring commands: start a kernel trace before the measurement,
//! explain its xruns (or spikes) after it, and write the CSV of attributed windows
//! (docs/methods.md "Forensics"). Without root or tracefs the measurement goes on
//! and stderr says why in one line.

use super::output;
use super::Global;
use crate::trace::{Forensics, Recorder, Window};
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
        if o.starts_with("/dev") || o.starts_with("/proc") {
            return None;
        }
        let stem = o.file_stem()?.to_string_lossy().into_owned();
        Some(o.with_file_name(format!("{stem}.forensics.csv")))
    }
}

fn say(line: &str) {
    output::stderr(&format!("xrunlab: forensics: {line}\n"));
}

/// Start recording on `cpus` (all allowed CPUs when empty), or say why not.
pub fn start(
    a: &ForensicsArgs,
    cpus: &[usize],
    duration_ns: u64,
    simulated: bool,
) -> Option<Recorder> {
    if !a.forensics {
        return None;
    }
    if simulated {
        say("off: the sim driver's timeline is computed, not scheduled by the kernel");
        return None;
    }
    let cpus = if cpus.is_empty() {
        crate::rt::affinity::allowed_cpus().unwrap_or_default()
    } else {
        cpus.to_vec()
    };
    match Recorder::start(&cpus, duration_ns, a.forensics_reader) {
        Ok(r) => {
            for s in &r.stale_removed {
                say(&format!(
                    "removed the stale trace instance {s} (its process is gone)"
                ));
            }
            Some(r)
        }
        Err(e) => {
            say(&format!("off: {e}"));
            None
        }
    }
}

/// Starts a recording for each part of a command that measures several (load trials, sched
/// rows, latencytest phases): the first that cannot start says why, and the others do not
/// try again.
pub struct Tracing<'a> {
    args: &'a ForensicsArgs,
    simulated: bool,
    off: bool,
}

impl<'a> Tracing<'a> {
    pub fn new(args: &'a ForensicsArgs, simulated: bool) -> Self {
        Tracing {
            args,
            simulated,
            off: !args.forensics,
        }
    }

    pub fn start(&mut self, cpus: &[usize], duration_ns: u64) -> Option<Recorder> {
        if self.off {
            return None;
        }
        let r = start(self.args, cpus, duration_ns, self.simulated);
        self.off = r.is_none();
        r
    }
}

/// Write the CSV of `f`'s windows to `csv`, naming it in `f`; a failure is a warning.
pub fn write_csv(f: &mut Forensics, csv: Option<&Path>, warnings: &mut Vec<String>) {
    if let Some(p) = csv {
        match crate::trace::write_csv(p, f) {
            Ok(()) => f.csv_file = Some(p.display().to_string()),
            Err(e) => warnings.push(format!("forensics: cannot write {}: {e}", p.display())),
        }
    }
}

/// Stop recording and explain `windows` (`what`: "xrun" or "spike"); returns the section and
/// the warnings it adds.
pub fn finish(
    rec: Recorder,
    what: &str,
    windows: &[Window],
    ours: &[i32],
    csv: Option<&Path>,
) -> (Forensics, Vec<String>) {
    let (mut f, mut warnings) = rec.explain(what, windows, ours);
    write_csv(&mut f, csv, &mut warnings);
    (f, warnings)
}

/// The section of a command made of several traced parts: their sections merged (see
/// `Forensics::merged`), its CSV written; None when no part was traced. The parts' lost
/// events are said once, for the whole, instead of once per part.
pub fn merged<'f>(
    parts: impl IntoIterator<Item = &'f Forensics>,
    csv: Option<&Path>,
    warnings: &mut Vec<String>,
) -> Option<Forensics> {
    let parts: Vec<&Forensics> = parts.into_iter().collect();
    let per_part: Vec<String> = parts
        .iter()
        .filter_map(|p| crate::trace::lost_warning(p))
        .collect();
    warnings.retain(|w| !per_part.contains(w));
    let mut f = Forensics::merged(parts)?;
    warnings.extend(crate::trace::lost_warning(&f));
    write_csv(&mut f, csv, warnings);
    Some(f)
}
