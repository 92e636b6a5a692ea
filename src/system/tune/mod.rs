//! `xrunlab tune`: apply the runtime part of a real-time tuning profile, remember every value
//! it replaced, and put them back (docs/methods.md "Tuning").
//!
//! A [`Plan`] is built from the current state through a [`Root`] (fixture trees in tests);
//! [`apply`] records each setting's original value in the undo [`journal`] — written and
//! fsync'd before the setting is touched — and only then writes it; [`restore`] writes the
//! recorded originals back in reverse order, from any process, after a crash or `kill -9`.
//! A setting the machine lacks or refuses is reported and skipped, never fatal.

pub mod defaults;
pub mod journal;
pub mod profile;
pub mod round_trip;
pub mod settings;
pub mod sides;
pub mod trust;

pub use defaults::restore_defaults;
pub use journal::{Entry, Journal};
pub use profile::{build_plan, Profile};
pub use round_trip::{with_profile, Tuned};
pub use settings::Target;

use super::Root;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// One setting the profile wants, as planned from the current state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Change {
    /// Stable identifier, unique in a plan: `governor:cpu3`, `irq:16`, `cpuset`…
    pub id: String,
    pub title: String,
    pub target: Target,
    /// The value now; None when it cannot be read.
    pub current: Option<String>,
    pub wanted: String,
    /// One line on why the change helps.
    pub why: String,
    /// The `xrunlab check` finding this addresses, where one exists.
    pub addresses: Option<String>,
    /// Why it will not be written (missing, not offered by the kernel); None when it will.
    pub skip: Option<String>,
}

impl Change {
    /// True when the current value already is the wanted one.
    pub fn already(&self) -> bool {
        self.current
            .as_deref()
            .is_some_and(|c| settings::same(&self.target, c, &self.wanted))
    }
}

/// Kernel command-line parameters the profile needs but cannot set at run time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BootAdvice {
    /// Parameters missing from the running kernel's command line, each with why.
    pub add: Vec<(String, String)>,
    /// The parameters to append, space separated (empty when none are missing).
    pub cmdline: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Plan {
    pub profile: Profile,
    /// The CPUs set aside for audio threads.
    pub audio_cpus: Vec<usize>,
    /// The other online CPUs, where everything else goes.
    pub housekeeping_cpus: Vec<usize>,
    pub changes: Vec<Change>,
    pub boot: BootAdvice,
    /// What the profile relies on that is not a setting (held by the measuring process).
    pub notes: Vec<String>,
}

/// What happened to one change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Written; the original is in the journal.
    Applied,
    /// Already at the wanted value: nothing written.
    AlreadySet,
    /// Not written: the reason (missing, not offered, refused by the kernel).
    Skipped(String),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Applied {
    pub id: String,
    pub title: String,
    pub from: Option<String>,
    pub to: String,
    pub outcome: Outcome,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ApplyReport {
    pub journal: PathBuf,
    pub items: Vec<Applied>,
}

impl ApplyReport {
    pub fn count(&self, f: impl Fn(&Outcome) -> bool) -> usize {
        self.items.iter().filter(|i| f(&i.outcome)).count()
    }
}

/// Test hook of `tune --apply`: after this many writes it stops and waits to be killed, so
/// tests can prove the journal survives a `kill -9` mid-way (the CLI's `after_write`).
pub const PAUSE_ENV: &str = "XRUNLAB_TUNE_PAUSE_AFTER";

/// Apply every change of `plan` that is not skipped or already set, journalling each
/// original value before writing it. Errors only when the journal cannot be written (then
/// nothing unrecorded has been changed).
pub fn apply(
    root: &Root,
    plan: &Plan,
    journal_path: &std::path::Path,
) -> crate::Result<ApplyReport> {
    apply_each(root, plan, journal_path, &mut |_| {})
}

/// [`apply`], calling `after_write` with the count of values written so far after each
/// write (the journal holds its original by then).
pub fn apply_each(
    root: &Root,
    plan: &Plan,
    journal_path: &std::path::Path,
    after_write: &mut dyn FnMut(usize),
) -> crate::Result<ApplyReport> {
    let mut journal = Journal::load_or_new(journal_path, root, plan)?;
    let mut writes = 0usize;
    let mut items = Vec::new();
    for c in &plan.changes {
        let report = |outcome| Applied {
            id: c.id.clone(),
            title: c.title.clone(),
            from: c.current.clone(),
            to: c.wanted.clone(),
            outcome,
        };
        if let Some(why) = &c.skip {
            items.push(report(Outcome::Skipped(why.clone())));
            continue;
        }
        // Read again: an earlier change (the cpuset, an IRQ) may have moved this one.
        let now = settings::read(root, &c.target);
        let Some(now) = now else {
            items.push(report(Outcome::Skipped("cannot be read".into())));
            continue;
        };
        if settings::same(&c.target, &now, &c.wanted) {
            items.push(report(Outcome::AlreadySet));
            continue;
        }
        // The original goes to disk before the change; a second apply keeps the first
        // original, so a restore returns to the state before any tuning.
        let also = sides::record(root, &c.target);
        let added = journal.record(Entry::new(c, &now).with(also))?;
        match settings::write(root, &c.target, &c.wanted) {
            Ok(()) => items.push(report(Outcome::Applied)),
            Err(e) => {
                if added {
                    journal.forget(&c.id)?;
                }
                items.push(report(Outcome::Skipped(e)));
                continue;
            }
        }
        writes += 1;
        after_write(writes);
    }
    if journal.entries.is_empty() {
        journal.remove()?;
    }
    Ok(ApplyReport {
        journal: journal_path.to_path_buf(),
        items,
    })
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Restored {
    pub id: String,
    pub title: String,
    pub value: String,
    /// None when restored; the error otherwise.
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RestoreReport {
    pub journal: PathBuf,
    /// False when there was no journal: nothing was applied.
    pub found: bool,
    pub items: Vec<Restored>,
    /// What the kernel kept otherwise, though every value was written back (an IRQ that
    /// stays on the CPU it was moved to until it fires).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl RestoreReport {
    pub fn failed(&self) -> usize {
        self.items.iter().filter(|i| i.error.is_some()).count()
    }
}

/// Write every journalled original back, newest first. Each restored entry leaves the
/// journal at once, so a restore that is itself interrupted can be resumed; the journal is
/// removed only when it is empty.
pub fn restore(root: &Root, journal_path: &std::path::Path) -> crate::Result<RestoreReport> {
    let Some(mut journal) = Journal::load(journal_path, root)? else {
        return Ok(RestoreReport {
            journal: journal_path.to_path_buf(),
            found: false,
            items: Vec::new(),
            notes: Vec::new(),
        });
    };
    let mut items = Vec::new();
    let mut notes = Vec::new();
    for e in journal.entries.clone().iter().rev() {
        let mut errors = Vec::new();
        sides::before(root, &e.target, &e.also, &mut errors, &mut notes);
        match settings::write(root, &e.target, &e.original) {
            // What the value's write moved is put back only once the value is.
            Ok(()) => errors.extend(sides::after(root, &e.also)),
            Err(err) => errors.insert(0, err),
        }
        let error = (!errors.is_empty()).then(|| errors.join("; "));
        if error.is_none() {
            journal.forget(&e.id)?;
        }
        items.push(Restored {
            id: e.id.clone(),
            title: e.title.clone(),
            value: e.original.clone(),
            error,
        });
    }
    if journal.entries.is_empty() {
        journal.remove()?;
    }
    Ok(RestoreReport {
        journal: journal_path.to_path_buf(),
        found: true,
        items,
        notes,
    })
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StatusEntry {
    pub id: String,
    pub title: String,
    pub original: String,
    pub applied: String,
    /// The value now; None when it cannot be read.
    pub now: Option<String>,
    /// True when the value is no longer the one applied.
    pub drifted: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Status {
    pub journal: PathBuf,
    /// None when nothing is applied.
    pub applied: Option<StatusApplied>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StatusApplied {
    pub profile: Profile,
    pub audio_cpus: Vec<usize>,
    pub since: String,
    pub pid: u32,
    /// Whether the process that applied last still runs (a pid may have been reused).
    pub pid_alive: bool,
    pub entries: Vec<StatusEntry>,
}

/// What the journal says is applied, and which values changed since.
pub fn status(root: &Root, journal_path: &std::path::Path) -> crate::Result<Status> {
    let applied = Journal::load(journal_path, root)?.map(|j| StatusApplied {
        profile: j.profile,
        audio_cpus: j.audio_cpus.clone(),
        since: j.since.clone(),
        pid: j.pid,
        pid_alive: std::path::Path::new(&format!("/proc/{}", j.pid)).exists(),
        entries: j
            .entries
            .iter()
            .map(|e| {
                let now = settings::read(root, &e.target);
                StatusEntry {
                    id: e.id.clone(),
                    title: e.title.clone(),
                    original: e.original.clone(),
                    applied: e.applied.clone(),
                    drifted: !now
                        .as_deref()
                        .is_some_and(|n| settings::same(&e.target, n, &e.applied)),
                    now,
                }
            })
            .collect(),
    });
    Ok(Status {
        journal: journal_path.to_path_buf(),
        applied,
    })
}

/// Environment variable naming the journal file (tests, several roots).
pub const JOURNAL_ENV: &str = "XRUNLAB_TUNE_JOURNAL";

/// Where the journal lives: `$XRUNLAB_TUNE_JOURNAL`, else `/run/xrunlab/tune.json` under
/// the root (a tmpfs on a live system: it goes with a reboot, as the settings do).
pub fn default_journal(root: &Root) -> PathBuf {
    match std::env::var_os(JOURNAL_ENV) {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => root.path("/run/xrunlab/tune.json"),
    }
}

/// Move this process into the audio cpuset the journal records, so threads it starts may
/// run on the audio CPUs (everything else was moved off them). Child processes that are
/// not audio (stressors) leave it again through [`housekeeping_cgroup`]. Returns what went
/// wrong, if anything; None also when no cpuset is applied.
pub fn enter_audio_cpuset(root: &Root, journal_path: &std::path::Path) -> Option<String> {
    let cs = applied_cpuset(root, journal_path)?;
    let r = settings::write_file(root, &cs.join_file(), &std::process::id().to_string());
    match r {
        Ok(()) => {
            if let Ok(p) =
                std::ffi::CString::new(root.path(&cs.leave_file()).as_os_str().as_encoded_bytes())
            {
                let _ = HOUSEKEEPING.set(p);
            }
            None
        }
        Err(e) => Some(format!(
            "cannot enter the audio cpuset ({e}): measuring from outside it"
        )),
    }
}

/// The audio cpuset a journal at `journal_path` records as applied, if any.
pub fn applied_cpuset(root: &Root, journal_path: &std::path::Path) -> Option<settings::Cpuset> {
    let j = Journal::load(journal_path, root).ok()??;
    j.entries.iter().find_map(|e| match &e.target {
        Target::Cpuset(c) => Some(c.clone()),
        _ => None,
    })
}

static HOUSEKEEPING: std::sync::OnceLock<std::ffi::CString> = std::sync::OnceLock::new();

/// Once this process has entered the audio cpuset: the cgroup file a child process writes
/// `0` to (between fork and exec) to run on the housekeeping CPUs instead, as a load
/// beside the audio threads would on a tuned machine.
pub fn housekeeping_cgroup() -> Option<&'static std::ffi::CStr> {
    HOUSEKEEPING.get().map(|c| c.as_c_str())
}
