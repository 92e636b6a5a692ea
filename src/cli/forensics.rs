//! `--forensics` for the measuring commands: start a kernel trace before the measurement,
//! explain its xruns (or spikes) after it, and write the CSV of attributed windows
//! (docs/ARCHITECTURE.md §3 "Forensics"). Without root or tracefs the measurement goes on
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

/// Stop recording and explain `windows` (`what`: "xrun" or "spike"); returns the section and
/// the warnings it adds.
pub fn finish(
    rec: Recorder,
    what: &str,
    windows: &[Window],
    ours: &[i32],
    csv: Option<&Path>,
) -> (Forensics, Vec<String>) {
    let recording = rec.finish();
    let mut f = recording.explain(what, windows, ours);
    let mut warnings = recording.warnings(&f);
    if let Some(p) = csv {
        match crate::trace::write_csv(p, &f) {
            Ok(()) => f.csv_file = Some(p.display().to_string()),
            Err(e) => warnings.push(format!("forensics: cannot write {}: {e}", p.display())),
        }
    }
    (f, warnings)
}

/// The windows of a run's recorded xruns and all its thread ids.
pub fn run_windows(r: &crate::engine::run::RunResults) -> (Vec<Window>, Vec<i32>) {
    let ours: Vec<i32> = r.threads.iter().map(|t| t.tid).collect();
    let windows = r
        .xrun_events
        .iter()
        .filter(|e| e.t_ideal_ns > 0)
        .filter_map(|e| {
            let t = r.threads.get(e.crit_thread as usize)?;
            let wake = e.t_ideal_ns + e.wake_latency_ns;
            Some(Window {
                id: e.cycle,
                tid: t.tid,
                cpu: t.cpu,
                t_ideal_ns: e.t_ideal_ns,
                wake_ns: wake,
                end_ns: wake + e.wall_ns,
                own_cpu_ns: Some(e.crit_cpu_ns),
            })
        })
        .collect();
    (windows, ours)
}
