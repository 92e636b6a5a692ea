//! Running the stressors: `StressSession` starts them as child processes and is the guard
//! that stops and reaps them on every exit path.
//!
//! Each child gets its own process group so that one `kill(-pgid)` reaches everything it
//! forked (stress-ng's workers), so that a terminal's Ctrl-C reaches only xrunlab (which then
//! stops the stressors in order and writes its partial result), and so that tests can check
//! from /proc that nothing of the group is left. PR_SET_PDEATHSIG(SIGKILL) covers the one
//! path no code of ours runs on: xrunlab itself being SIGKILLed.

mod output;
mod reap;
mod spawn;
mod workdir;

pub use output::{parse_builtin_metrics, parse_metrics_brief};
pub use reap::{group_members, session_members};
pub use workdir::remove_stale_dirs;

use super::spec::StressSpec;
use crate::error::Result;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Environment variable set in every stressor; its value is unique per session, so any
/// descendant (even one that left its process group) can be found in /proc/PID/environ.
pub const SESSION_ENV: &str = "XRUNLAB_STRESS_SESSION";
/// Overrides the executable that runs the built-in stressors.
pub const STRESSOR_EXE_ENV: &str = "XRUNLAB_STRESSOR_EXE";

/// How long stressors get to stop on their own (stress-ng prints its metrics, the built-in
/// stressors print their operation counts) before the group is SIGKILLed.
const GRACE: Duration = Duration::from_secs(3);
/// How long to wait for the kernel to remove SIGKILLed processes before giving up.
const REAP_LIMIT: Duration = Duration::from_secs(5);
/// stress-ng's own --timeout is the run plus this margin: stress starts before the
/// measurement and is stopped explicitly after it, the timeout is only a safety net.
const TIMEOUT_MARGIN_S: u64 = 5;
/// How long after starting a stressor that dies at once is treated as a failed start.
const STARTUP_CHECK: Duration = Duration::from_millis(150);
/// Bytes of each stressor's output kept in the record.
const OUTPUT_TAIL: usize = 8192;

/// stress-ng as found on PATH.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StressNgInfo {
    pub path: String,
    pub version: String,
}

/// One child process the session ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StressProcess {
    /// `stress-ng`, `builtin` or `command`.
    pub backend: String,
    /// Presets this process implements (empty for a user command).
    pub presets: Vec<String>,
    pub argv: Vec<String>,
    pub pid: i32,
    /// How it ended, e.g. `exit 0`, `signal 9`.
    pub exit: String,
    /// It ended before the session stopped it (a user command may do so legitimately).
    pub ended_early: bool,
    /// The last bytes of its standard output and error.
    pub output_tail: String,
}

/// One line of stress-ng's `--metrics-brief` table, or a built-in stressor's count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StressMetric {
    pub stressor: String,
    /// `stress-ng` or `builtin`.
    pub source: String,
    pub bogo_ops: f64,
    pub real_time_s: f64,
    pub usr_time_s: Option<f64>,
    pub sys_time_s: Option<f64>,
    pub bogo_ops_per_s: f64,
}

/// A preset that could not run, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SkippedPreset {
    pub preset: String,
    pub reason: String,
}

/// What load ran during a measurement; results embed it beside their environment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StressRecord {
    pub presets: Vec<String>,
    /// Who ran the stress-ng classes: `stress-ng`, `builtin`, or `none` when no such class
    /// was asked for.
    pub backend: String,
    pub stress_ng: Option<StressNgInfo>,
    pub processes: Vec<StressProcess>,
    pub metrics: Vec<StressMetric>,
    pub skipped: Vec<SkippedPreset>,
    pub workers: u32,
    /// CPUs the stressors were pinned to; empty = not pinned.
    pub cpus: Vec<usize>,
    /// Directory the disk classes used (removed afterwards).
    pub dir: Option<String>,
    pub file_size_bytes: u64,
    /// From the first start to the end of the stop.
    pub duration_ns: u64,
    #[serde(default)]
    pub warnings: Vec<String>,
}

#[derive(Debug)]
struct Child {
    pid: libc::pid_t,
    backend: &'static str,
    presets: Vec<String>,
    argv: Vec<String>,
    log: PathBuf,
    /// Raw wait status once reaped.
    status: Option<libc::c_int>,
    ended_early: bool,
}

/// Running stressors. Dropping it stops them; `stop` also returns what ran.
#[derive(Debug)]
pub struct StressSession {
    children: Vec<Child>,
    record: StressRecord,
    dir: Option<PathBuf>,
    marker: String,
    started_ns: u64,
    done: bool,
}

static SEQ: AtomicU64 = AtomicU64::new(0);

impl StressSession {
    /// Start the stressors of `spec` for a measurement of about `run_duration`
    /// (`Duration::ZERO` = open-ended: stress-ng then gets no timeout of its own).
    ///
    /// Call it from a thread that outlives the session (normally the main thread):
    /// PR_SET_PDEATHSIG fires when the *thread* that spawned a child exits.
    /// On error every stressor already started is stopped before returning.
    pub fn start(spec: &StressSpec, run_duration: Duration) -> Result<StressSession> {
        let seq = SEQ.fetch_add(1, Ordering::SeqCst);
        let mut s = StressSession {
            children: Vec::new(),
            record: StressRecord {
                presets: spec.labels(),
                backend: "none".into(),
                workers: spec.workers,
                cpus: spec.cpus.clone(),
                file_size_bytes: spec.file_size,
                ..Default::default()
            },
            dir: None,
            marker: format!(
                "{}-{}-{}",
                std::process::id(),
                seq,
                crate::rt::clock::monotonic_ns()
            ),
            started_ns: crate::rt::clock::monotonic_ns(),
            done: false,
        };
        if spec.is_idle() {
            return Ok(s);
        }
        // Orphaned grandchildren (stress-ng workers whose parent died first) are then
        // re-parented to us, so we can reap them instead of leaving zombies to init.
        // SAFETY: prctl with these arguments has no memory-safety preconditions.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
        s.make_dir(spec)?;
        s.spawn_all(spec, run_duration)?;
        s.check_startup()?;
        Ok(s)
    }

    /// The value of `XRUNLAB_STRESS_SESSION` in this session's stressors.
    pub fn marker(&self) -> &str {
        &self.marker
    }

    /// Process groups of the running stressors (one per child).
    pub fn pgids(&self) -> Vec<libc::pid_t> {
        self.children.iter().map(|c| c.pid).collect()
    }

    /// The session's private directory, if one was made.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// Stop every stressor, reap it, remove the files, and say what ran.
    pub fn stop(mut self) -> StressRecord {
        self.shutdown();
        std::mem::take(&mut self.record)
    }
}

impl Drop for StressSession {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_session_runs_nothing() {
        let s = StressSession::start(&StressSpec::default(), Duration::from_secs(1)).unwrap();
        assert!(s.pgids().is_empty());
        let r = s.stop();
        assert!(r.processes.is_empty());
        assert_eq!(r.backend, "none");
    }
}
