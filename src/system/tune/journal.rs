//! The undo journal: every original value `tune --apply` replaced, on disk before the change
//! (atomic rename, file and directory fsync'd), so `tune --restore` works from any process —
//! after a crash, a `kill -9`, or in another shell.

use super::{Change, Plan, Profile, Target};
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
        }
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
    /// The journal at `path`; None when there is none (nothing applied).
    pub fn load(path: &Path) -> Result<Option<Journal>> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(format!("reading {}", path.display()), e)),
        };
        let mut j: Journal = serde_json::from_str(&text)
            .map_err(|e| Error::input(path, format!("not a tune journal: {e}")))?;
        if j.version != VERSION {
            return Err(Error::input(
                path,
                format!(
                    "tune journal version {} (this build reads {VERSION})",
                    j.version
                ),
            ));
        }
        j.path = path.to_path_buf();
        Ok(Some(j))
    }

    /// The existing journal (its originals are kept: they predate any tuning), or a new one.
    /// Its directory is created; nothing is written until the first entry.
    pub fn load_or_new(path: &Path, root: &Root, plan: &Plan) -> Result<Journal> {
        if let Some(mut j) = Self::load(path)? {
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
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let tmp = path.with_file_name(format!(
            ".{}.{}.tmp",
            name.unwrap_or_default(),
            std::process::id()
        ));
        let mut text = serde_json::to_string_pretty(self).expect("journal serialises");
        text.push('\n');
        let r = (|| {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, path)
        })();
        if let Err(e) = r {
            let _ = std::fs::remove_file(&tmp);
            return Err(ctx(e));
        }
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
                path: format!("/x/{id}"),
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
        let back = Journal::load(&path).unwrap().unwrap();
        assert_eq!(back.entries.len(), 1);
        assert_eq!(back.entries[0].original, "0");
        j.forget("a").unwrap();
        j.remove().unwrap();
        assert!(Journal::load(&path).unwrap().is_none());
    }

    #[test]
    fn a_corrupt_journal_is_an_input_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tune.json");
        std::fs::write(&path, "{ torn").unwrap();
        let e = Journal::load(&path).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{e}");
    }
}
