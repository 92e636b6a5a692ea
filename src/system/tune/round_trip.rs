//! The tuned half of a before/after comparison, once for `tune --apply --measure` and
//! `suite --tuned`: apply the profile, measure with it applied, and put every value back
//! whatever the measurement did (an error, Ctrl-C, a panic). The "before" is each caller's
//! own measurement, taken first on the untouched machine.

use super::{apply_each, restore, ApplyReport, Plan, RestoreReport};
use crate::system::Root;
use std::path::Path;

/// What the tuned phase came to. The restore ran whether or not applying or the
/// measurement succeeded, so both outcomes are kept for the caller to report.
pub struct Tuned<T> {
    pub applied: crate::Result<ApplyReport>,
    /// What `during` returned; None when applying failed and nothing was measured.
    pub during: Option<T>,
    pub restored: crate::Result<RestoreReport>,
}

/// Puts the journalled values back if the tuned phase is left other than through its
/// explicit restore (a panic in the measurement). A forced kill leaves the journal to
/// `tune --restore`.
struct RestoreGuard<'a> {
    root: &'a Root,
    journal: &'a Path,
    armed: bool,
}

impl Drop for RestoreGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            let _ = restore(self.root, self.journal);
        }
    }
}

/// Apply `plan` (journalled in `journal`; `after_write` as [`apply_each`]), run `during`
/// with the profile applied when applying succeeded, then restore.
pub fn with_profile<T>(
    root: &Root,
    plan: &Plan,
    journal: &Path,
    after_write: &mut dyn FnMut(usize),
    during: impl FnOnce(&ApplyReport) -> T,
) -> Tuned<T> {
    let mut guard = RestoreGuard {
        root,
        journal,
        armed: true,
    };
    let applied = apply_each(root, plan, journal, after_write);
    let during = applied.as_ref().ok().map(during);
    let restored = restore(root, journal);
    guard.armed = false;
    Tuned {
        applied,
        during,
        restored,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::tune::{build_plan, Outcome, Profile};
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    fn copy_tree(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            let (src, dst) = (e.path(), to.join(e.file_name()));
            let ty = e.file_type().unwrap();
            if ty.is_symlink() {
                std::os::unix::fs::symlink(std::fs::read_link(&src).unwrap(), &dst).unwrap();
            } else if ty.is_dir() {
                copy_tree(&src, &dst);
            } else {
                std::fs::copy(&src, &dst).unwrap();
            }
        }
    }

    /// Every file's contents under `dir` but the journal's `run/`.
    fn snapshot(base: &Path, d: &Path, out: &mut BTreeMap<PathBuf, String>) {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(base).unwrap().to_path_buf();
            if rel.starts_with("run") {
                continue;
            }
            let meta = std::fs::symlink_metadata(&p).unwrap();
            if meta.is_dir() {
                out.insert(rel, "dir".into());
                snapshot(base, &p, out);
            } else if meta.is_file() {
                out.insert(rel, std::fs::read_to_string(&p).unwrap());
            }
        }
    }

    fn tree() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        copy_tree(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/system/tune-desktop"),
            &root,
        );
        let journal = root.join("run/xrunlab/tune.json");
        (tmp, root, journal)
    }

    fn state(root: &Path) -> BTreeMap<PathBuf, String> {
        let mut m = BTreeMap::new();
        snapshot(root, root, &mut m);
        m
    }

    #[test]
    fn measures_applied_and_restores_after() {
        let (_tmp, dir, journal) = tree();
        let root = Root::new(&dir);
        let plan = build_plan(&root, Profile::Audio, None).unwrap();
        let before = state(&dir);
        let mut writes = 0;
        let t = with_profile(
            &root,
            &plan,
            &journal,
            &mut |n| writes = n,
            |r: &ApplyReport| {
                assert!(
                    journal.exists(),
                    "measured while the journal holds the originals"
                );
                (r.count(|o| *o == Outcome::Applied), state(&dir) != before)
            },
        );
        let (applied, changed) = t.during.unwrap();
        assert!(applied > 0 && changed);
        assert_eq!(writes, applied);
        assert_eq!(t.applied.unwrap().items.len(), plan.changes.len());
        assert_eq!(t.restored.unwrap().failed(), 0);
        assert!(!journal.exists());
        assert_eq!(state(&dir), before);
    }

    #[test]
    fn a_panic_while_measuring_still_restores() {
        let (_tmp, dir, journal) = tree();
        let root = Root::new(&dir);
        let plan = build_plan(&root, Profile::Audio, None).unwrap();
        let before = state(&dir);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            with_profile(&root, &plan, &journal, &mut |_| {}, |_| -> () {
                panic!("the measurement failed")
            })
        }));
        assert!(r.is_err());
        assert_eq!(state(&dir), before);
    }

    #[test]
    fn nothing_is_measured_when_applying_fails() {
        let (_tmp, dir, _) = tree();
        let root = Root::new(&dir);
        let plan = build_plan(&root, Profile::Audio, None).unwrap();
        // The journal's directory is a file: nothing can be recorded, so nothing is written.
        std::fs::write(dir.join("blocker"), "").unwrap();
        let journal = dir.join("blocker/tune.json");
        let before = state(&dir);
        let t = with_profile(&root, &plan, &journal, &mut |_| {}, |_| ());
        assert!(t.applied.is_err());
        assert!(t.during.is_none());
        // Restoring has nothing to put back (and says it cannot read the journal).
        assert!(!matches!(t.restored, Ok(r) if r.found));
        assert_eq!(state(&dir), before);
    }
}
