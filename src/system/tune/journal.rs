//! The undo journal: every original value `tune --apply` replaced, on disk before the change
//! (atomic rename, file and directory fsync'd), so `tune --restore` works from any process —
//! after a crash, a `kill -9`, or in another shell.

use super::{sides::Side, trust, Change, Plan, Profile, Target};
use crate::error::{Error, Result};
use crate::system::Root;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

pub const VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Entry {
    pub id: String,
    pub title: String,
    pub target: Target,
    /// The value before any tuning: what `--restore` writes back.
    pub original: String,
    /// The value the profile wrote (`--status` reports drift from it).
    pub applied: String,
    /// The process that made the change, and when.
    pub pid: u32,
    pub at: String,
    /// What the change moves besides its value (an IRQ's delivery CPU, tasks' CPUs), put
    /// back with it. Absent in journals written before it was recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also: Vec<Side>,
}

impl Entry {
    pub fn new(c: &Change, original: &str) -> Self {
        Entry {
            id: c.id.clone(),
            title: c.title.clone(),
            target: c.target.clone(),
            original: original.to_string(),
            applied: c.wanted.clone(),
            pid: std::process::id(),
            at: crate::rt::clock::wall_clock_rfc3339(),
            also: Vec::new(),
        }
    }

    /// The same entry, recording what the change moves besides its value.
    pub fn with(mut self, also: Vec<Side>) -> Self {
        self.also = also;
        self
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Journal {
    pub version: u32,
    /// The root the settings were written under (`/` on a live system).
    pub root: String,
    pub profile: Profile,
    pub audio_cpus: Vec<usize>,
    /// When the first change was applied.
    pub since: String,
    /// The process that applied last.
    pub pid: u32,
    /// In the order applied; restored in reverse.
    pub entries: Vec<Entry>,
    #[serde(skip)]
    path: PathBuf,
}

impl Journal {
    /// The journal at `path`; None when there is none (nothing applied). Every other
    /// journal that cannot be used is an input error (exit 2) saying why: not a regular
    /// file, too large, not root's (as root), not UTF-8 or JSON, or naming a target that no
    /// profile produces (`root` is where those targets are looked up).
    pub fn load(path: &Path, root: &Root) -> Result<Option<Journal>> {
        let bad = |msg: String| {
            Error::input(
                path,
                format!(
                    "{msg} (`xrunlab tune --restore --defaults` puts the kernel's defaults back without a journal)"
                ),
            )
        };
        let meta = match std::fs::metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(bad(format!("cannot read the tune journal: {e}"))),
        };
        // SAFETY: geteuid has no failure mode.
        let as_root = root.is_live() && unsafe { libc::geteuid() } == 0;
        if meta.is_file() {
            trust::check_owner(&meta, as_root).map_err(|e| bad(format!("tune journal {e}")))?;
        }
        let text =
            crate::common::input::read_capped(path, trust::MAX_JOURNAL_BYTES, "tune journal")
                .map_err(|e| match e {
                    Error::Input { msg, .. } => bad(msg),
                    e => e,
                })?;
        let mut j: Journal =
            serde_json::from_str(&text).map_err(|e| bad(format!("not a tune journal: {e}")))?;
        if j.version != VERSION {
            return Err(bad(format!(
                "tune journal version {} (this build reads {VERSION})",
                j.version
            )));
        }
        for e in &j.entries {
            let why = trust::check_target(root, &e.target)
                .and_then(|()| trust::check_value(&e.original))
                .and_then(|()| e.also.iter().try_for_each(trust::check_side));
            if let Err(why) = why {
                return Err(bad(format!(
                    "entry '{}' is not one a tune profile makes: {why}; refusing the whole journal",
                    e.id
                )));
            }
        }
        j.path = path.to_path_buf();
        Ok(Some(j))
    }

    /// The existing journal (its originals are kept: they predate any tuning), or a new one.
    /// Its directory is created; nothing is written until the first entry.
    pub fn load_or_new(path: &Path, root: &Root, plan: &Plan) -> Result<Journal> {
        if let Some(mut j) = Self::load(path, root)? {
            j.pid = std::process::id();
            return Ok(j);
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        }
        Ok(Journal {
            version: VERSION,
            root: root.path("/").display().to_string(),
            profile: plan.profile,
            audio_cpus: plan.audio_cpus.clone(),
            since: crate::rt::clock::wall_clock_rfc3339(),
            pid: std::process::id(),
            entries: Vec::new(),
            path: path.to_path_buf(),
        })
    }

    /// Record an original before its change and sync it to disk. False (and nothing
    /// written) when the setting is already recorded: its original predates this apply.
    pub fn record(&mut self, e: Entry) -> Result<bool> {
        if self.entries.iter().any(|x| x.id == e.id) {
            // Still sync: the pid of the applying process is news for --status.
            self.save()?;
            return Ok(false);
        }
        self.entries.push(e);
        self.save()?;
        Ok(true)
    }

    /// Drop a setting that is back to its original (or was never changed).
    pub fn forget(&mut self, id: &str) -> Result<()> {
        self.entries.retain(|e| e.id != id);
        self.save()
    }

    pub fn remove(&self) -> Result<()> {
        match std::fs::remove_file(&self.path) {
            Ok(()) => sync_dir(&self.path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io(format!("removing {}", self.path.display()), e)),
        }
    }

    /// Temp file + fsync + rename + directory fsync: after this returns, a power cut or
    /// `kill -9` leaves either the old journal or the new one, never a torn one.
    fn save(&self) -> Result<()> {
        let path = &self.path;
        let ctx = |e| Error::io(format!("writing tune journal {}", path.display()), e);
        let mut text = serde_json::to_string_pretty(self).expect("journal serialises");
        text.push('\n');
        // The one writer's new file (unpredictable name, O_EXCL|O_NOFOLLOW, renamed over the
        // journal): `$XRUNLAB_TUNE_JOURNAL` may name a folder other users can write.
        let mut out = crate::common::output::Output::create_derived(path)?;
        out.write_all(text.as_bytes()).map_err(ctx)?;
        out.commit()?;
        sync_dir(path)
    }
}

fn sync_dir(path: &Path) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(format!("syncing {}", dir.display()), e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::tune::{Change, Plan, Profile, Target};

    fn change(id: &str, wanted: &str) -> Change {
        Change {
            id: id.into(),
            title: id.into(),
            target: Target::File {
                // A file a profile tunes: the journal refuses any other.
                path: "/proc/sys/vm/swappiness".into(),
                form: crate::system::tune::settings::Form::Text,
            },
            current: Some("old".into()),
            wanted: wanted.into(),
            why: String::new(),
            addresses: None,
            skip: None,
        }
    }

    #[test]
    fn keeps_the_first_original_and_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run/tune.json");
        let plan = Plan {
            profile: Profile::Audio,
            audio_cpus: vec![1],
            housekeeping_cpus: vec![0],
            changes: vec![],
            boot: Default::default(),
            notes: vec![],
        };
        let root = Root::new(dir.path());
        let mut j = Journal::load_or_new(&path, &root, &plan).unwrap();
        assert!(!path.exists(), "nothing written before the first entry");
        assert!(j.record(Entry::new(&change("a", "1"), "0")).unwrap());
        assert!(!j.record(Entry::new(&change("a", "1"), "1")).unwrap());
        let back = Journal::load(&path, &root).unwrap().unwrap();
        assert_eq!(back.entries.len(), 1);
        assert_eq!(back.entries[0].original, "0");
        j.forget("a").unwrap();
        j.remove().unwrap();
        assert!(Journal::load(&path, &root).unwrap().is_none());
    }

    #[test]
    fn a_corrupt_journal_is_an_input_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tune.json");
        std::fs::write(&path, "{ torn").unwrap();
        let e = Journal::load(&path, &Root::new(dir.path())).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{e}");
    }
}
