//! The measurement session (docs/ARCHITECTURE.md §2 "The measurement session"): what every
//! measuring command shares, owned once. A command builds a [`Session`] from its flags, hands
//! it to its measurement's one entry point `measure::X::run(config, &mut session)`, and gets
//! an [`Outcome`] back; the session captured the environment before the measurement, carries
//! its progress, starts and stops the stressors and the competing task around it, and runs
//! the whole forensics lifecycle: a recording per measured part on the measured CPUs, the
//! windows the measurement hands it explained, the parts merged, the CSV written.
//!
//! The session prints nothing: what must be said at once (forensics being off, and why) goes
//! to `Progress::say` of the progress it owns, warnings go into the outcome.

use crate::common::Status;
use crate::error::Result;
use crate::progress::Progress;
use crate::stress::{PeriodicResult, PeriodicSpec, StressRecord, StressSession, StressSpec};
use crate::system::Environment;
use crate::trace::{Forensics, ReaderKind, Recorder};
use std::path::PathBuf;
use std::time::Duration;

/// What every measurement returns: how it ended, the configuration it ran (as negotiated: a
/// device may have changed the buffer size), its results and its warnings.
#[derive(Debug, Clone)]
pub struct Outcome<C, R> {
    pub status: Status,
    pub config: C,
    pub results: R,
    pub warnings: Vec<String>,
}

/// When a measurement started and the environment it started in, captured before measuring so
/// that the result's stolen time (environment.hypervisor_steal) covers the whole run.
#[derive(Debug, Clone)]
pub struct Started {
    pub at: String,
    pub env: Environment,
}

impl Started {
    /// Now, on this machine; `stress` names the load that runs beside the measurement (the
    /// environment's own "measured under stress" warning comes from it).
    pub fn now(stress: Vec<String>) -> Self {
        let at = crate::rt::clock::wall_clock_rfc3339();
        let mut env = Environment::capture();
        env.stress = stress;
        Started { at, env }
    }
}

/// `--forensics` as asked: how to read the trace, where the CSV of attributed windows goes,
/// and (latency) the wake-up above which a spike is explained.
#[derive(Debug, Clone, Default)]
pub struct ForensicsPlan {
    pub reader: ReaderKind,
    pub csv: Option<PathBuf>,
    pub above_ns: Option<u64>,
}

/// Whether recordings are still tried: the first part that cannot record says why, and the
/// others do not try again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tracing {
    Off,
    On,
    GaveUp,
}

/// The stressors and the competing task a part ran beside, stopped.
#[derive(Debug, Default)]
pub struct Loaded {
    pub stress: Option<StressRecord>,
    pub compete: Option<PeriodicResult>,
}

/// See the module documentation.
pub struct Session<'a> {
    started: Started,
    progress: Box<dyn Progress + 'a>,
    stress: StressSpec,
    forensics: Option<ForensicsPlan>,
    tracing: Tracing,
}

impl<'a> Session<'a> {
    /// A session that captures the environment now; `stress_labels` names the load the
    /// environment says the measurement ran under; `progress` shows it and says what must be
    /// said at once. No stress, no forensics until the builders below say otherwise.
    pub fn start(progress: Box<dyn Progress + 'a>, stress_labels: Vec<String>) -> Self {
        Session {
            started: Started::now(stress_labels),
            progress,
            stress: StressSpec::default(),
            forensics: None,
            tracing: Tracing::Off,
        }
    }

    /// A session for library callers and tests: silent, no stress, no forensics.
    pub fn silent() -> Session<'static> {
        Session::start(Box::new(crate::progress::Silent), Vec::new())
    }

    /// The stress the measurement runs under (started by [`Session::loaded`]).
    pub fn with_stress(mut self, spec: StressSpec) -> Self {
        self.stress = spec;
        self
    }

    /// Record kernel traces (`--forensics`).
    pub fn with_forensics(mut self, plan: Option<ForensicsPlan>) -> Self {
        self.tracing = if plan.is_some() {
            Tracing::On
        } else {
            Tracing::Off
        };
        self.forensics = plan;
        self
    }

    pub fn progress(&self) -> &dyn Progress {
        self.progress.as_ref()
    }

    /// Stop the progress display (before a summary is printed).
    pub fn finish_progress(&mut self) {
        self.progress = Box::new(crate::progress::Silent);
    }

    pub fn started(&self) -> &Started {
        &self.started
    }

    /// When and in what environment the measurement started, for its result document.
    pub fn into_started(self) -> Started {
        self.started
    }

    pub fn stress(&self) -> &StressSpec {
        &self.stress
    }

    /// The forensics plan, when `--forensics` was asked and no part has given up on it.
    pub fn forensics(&self) -> Option<&ForensicsPlan> {
        match self.tracing {
            Tracing::On => self.forensics.as_ref(),
            _ => None,
        }
    }

    fn say(&self, line: &str) {
        self.progress.say(&format!("xrunlab: forensics: {line}"));
    }

    /// The measurement's timeline is computed, not scheduled by the kernel: there is nothing
    /// to trace, and the session says so once when forensics was asked.
    pub fn simulated(&mut self) {
        if self.tracing == Tracing::On {
            self.say("off: the sim driver's timeline is computed, not scheduled by the kernel");
            self.tracing = Tracing::GaveUp;
        }
    }

    /// Start recording on `cpus` (all allowed CPUs when empty) for a part expected to last
    /// `duration_ns` (0: unknown); None when forensics is off or cannot start (said once).
    pub fn start_trace(&mut self, cpus: &[usize], duration_ns: u64) -> Option<Recorder> {
        self.start_trace_with(cpus, duration_ns, None)
    }

    /// [`Session::start_trace`] as a flight recorder: only what `flight` pins is kept.
    pub fn start_trace_with(
        &mut self,
        cpus: &[usize],
        duration_ns: u64,
        flight: Option<std::sync::Arc<crate::trace::flight::Flight>>,
    ) -> Option<Recorder> {
        if self.tracing != Tracing::On {
            return None;
        }
        let reader = self
            .forensics
            .as_ref()
            .map(|f| f.reader)
            .unwrap_or_default();
        let cpus = if cpus.is_empty() {
            crate::rt::affinity::allowed_cpus().unwrap_or_default()
        } else {
            cpus.to_vec()
        };
        match Recorder::start_with(&cpus, duration_ns, reader, flight) {
            Ok(r) => {
                for s in &r.stale_removed {
                    self.say(&format!(
                        "removed the stale trace instance {s} (its process is gone)"
                    ));
                }
                Some(r)
            }
            Err(e) => {
                self.say(&format!("off: {e}"));
                self.tracing = Tracing::GaveUp;
                None
            }
        }
    }

    /// The section of a measurement of one part: its CSV written (a failure is a warning).
    pub fn keep(&self, f: &mut Forensics, warnings: &mut Vec<String>) {
        let csv = self.forensics.as_ref().and_then(|p| p.csv.clone());
        write_csv(f, csv, warnings);
    }

    /// The section of a measurement made of several traced parts: their sections merged
    /// (see `Forensics::merged`), its CSV written; None when no part was traced. The parts'
    /// lost events are said once, for the whole, instead of once per part.
    pub fn merged<'f>(
        &self,
        parts: impl IntoIterator<Item = &'f Forensics>,
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
        self.keep(&mut f, warnings);
        Some(f)
    }

    /// Run `part` under the session's stress (`spec` instead, for a measurement whose parts
    /// each run their own) and beside `compete`, both started here before it and stopped
    /// after it on every path. Call it from a thread that outlives the part (normally the
    /// main thread): the stressors' PR_SET_PDEATHSIG is tied to the thread that started them.
    pub fn loaded<T>(
        &mut self,
        spec: Option<&StressSpec>,
        duration: Duration,
        compete: Option<PeriodicSpec>,
        part: impl FnOnce(&mut Self) -> Result<T>,
    ) -> Result<(T, Loaded)> {
        let spec = spec.unwrap_or(&self.stress).clone();
        let stress = if spec.is_idle() {
            None
        } else {
            Some(StressSession::start(&spec, duration)?)
        };
        let task = compete
            .map(crate::stress::PeriodicTask::start)
            .transpose()?;
        let out = part(self);
        let loaded = Loaded {
            compete: task.map(crate::stress::PeriodicTask::stop),
            stress: stress.map(StressSession::stop),
        };
        Ok((out?, loaded))
    }
}

/// Write the CSV of `f`'s windows to `csv`, naming it in `f`; a failure is a warning.
fn write_csv(f: &mut Forensics, csv: Option<PathBuf>, warnings: &mut Vec<String>) {
    if let Some(p) = csv {
        match crate::trace::write_csv(&p, f) {
            Ok(()) => f.csv_file = Some(p.display().to_string()),
            Err(e) => warnings.push(format!("forensics: cannot write {}: {e}", p.display())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A progress that keeps what it is told to say.
    #[derive(Default)]
    struct Said(Mutex<Vec<String>>);

    impl Progress for &Said {
        fn set_total(&self, _: u64) {}
        fn set_position(&self, _: u64) {}
        fn set_message(&self, _: &str) {}
        fn finish(&self) {}
        fn say(&self, line: &str) {
            self.0.lock().unwrap().push(line.to_string());
        }
    }

    #[test]
    fn a_simulated_measurement_says_once_why_forensics_is_off() {
        let said = Said::default();
        let mut s = Session::start(Box::new(&said), Vec::new())
            .with_forensics(Some(ForensicsPlan::default()));
        s.simulated();
        s.simulated();
        assert!(s.start_trace(&[0], 1).is_none());
        assert!(s.forensics().is_none());
        drop(s);
        assert_eq!(
            said.0.into_inner().unwrap(),
            vec!["xrunlab: forensics: off: the sim driver's timeline is computed, not scheduled by the kernel"]
        );
    }

    #[test]
    fn without_forensics_nothing_is_said_or_started() {
        let said = Said::default();
        let mut s = Session::start(Box::new(&said), Vec::new());
        s.simulated();
        assert!(s.start_trace(&[], 0).is_none());
        assert!(s.merged(std::iter::empty(), &mut Vec::new()).is_none());
        drop(s);
        assert!(said.0.into_inner().unwrap().is_empty());
    }

    #[test]
    fn an_idle_part_starts_no_stressor_and_an_error_passes_through() {
        let mut s = Session::silent();
        let (v, l) = s
            .loaded(None, Duration::ZERO, None, |_| Ok(7))
            .expect("idle");
        assert_eq!(v, 7);
        assert!(l.stress.is_none() && l.compete.is_none());
        let e = s
            .loaded(None, Duration::ZERO, None, |_| -> Result<()> {
                Err(crate::error::Error::usage("bad"))
            })
            .unwrap_err();
        assert_eq!(e.exit_code(), 2);
    }
}
