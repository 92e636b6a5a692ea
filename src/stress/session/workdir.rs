//! The session's working directory: where stressors write, and the stale ones of dead
//! sessions.

use super::reap::session_members;
use super::StressSession;
use crate::error::{Error, Result};
use crate::stress::registry;
use crate::stress::spec::{Preset, StressSpec};
use std::path::{Path, PathBuf};

impl StressSession {
    pub(super) fn make_dir(&mut self, spec: &StressSpec) -> Result<()> {
        let parent = match &spec.dir {
            Some(d) => d.clone(),
            // /tmp is often tmpfs, where "disk" stress would never reach a disk.
            None if spec.presets.iter().any(|p| p.uses_files())
                && Path::new("/var/tmp").is_dir() =>
            {
                PathBuf::from("/var/tmp")
            }
            None => std::env::temp_dir(),
        };
        remove_stale_dirs(&parent);
        let dir = parent.join(format!("xrunlab-stress-{}", self.marker));
        std::fs::create_dir(&dir)
            .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        // Removed by shutdown; the registry removes it if a signal kills us first.
        registry::register_dir(&dir);
        self.record.dir = Some(dir.display().to_string());
        self.dir = Some(dir.clone());
        if spec.presets.iter().any(|p| p.uses_files()) {
            if is_tmpfs(&dir) {
                self.record.warnings.push(format!(
                    "{} is on tmpfs: the disk classes exercise memory, not a disk (use --stress-dir)",
                    parent.display()
                ));
            }
            // One file per disk class at a time; disk-copy holds its source and the copy.
            let files = spec.presets.iter().filter(|p| p.uses_files()).count() as u64
                + u64::from(spec.presets.contains(&Preset::DiskCopy));
            let need = spec.file_size.saturating_mul(files);
            if let Some(free) = free_bytes(&dir) {
                if free < need + (64 << 20) {
                    return Err(Error::cannot_measure(format!(
                        "{} has {} MiB free; the disk classes need about {} MiB: use a smaller --stress-size or another --stress-dir",
                        parent.display(),
                        free >> 20,
                        need >> 20
                    )));
                }
            }
        }
        Ok(())
    }
}

/// Remove the stress directories of sessions whose process is gone and whose stressors are
/// too: what a SIGKILLed xrunlab (the one signal it cannot clean up after) left in `parent`.
/// A directory whose pid is alive, or that a live stressor still names, is kept.
pub fn remove_stale_dirs(parent: &Path) {
    let Ok(rd) = std::fs::read_dir(parent) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(marker) = name
            .to_str()
            .and_then(|n| n.strip_prefix("xrunlab-stress-"))
        else {
            continue;
        };
        let Some(pid) = marker
            .split('-')
            .next()
            .and_then(|p| p.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        // SAFETY: signal 0 only asks whether the pid exists.
        let gone = pid > 0
            && unsafe { libc::kill(pid, 0) } == -1
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if gone && session_members(marker).is_empty() && e.path().is_dir() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

fn statfs(dir: &Path) -> Option<libc::statfs> {
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: a zeroed statfs is valid plain data.
    let mut buf: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is NUL-terminated; buf is writable and of the type statfs fills.
    (unsafe { libc::statfs(c.as_ptr(), &mut buf) } == 0).then_some(buf)
}

// statfs field types differ between architectures (32-bit ARM boards), hence the casts.
#[allow(clippy::unnecessary_cast)]
fn is_tmpfs(dir: &Path) -> bool {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    statfs(dir).is_some_and(|s| s.f_type as i64 == TMPFS_MAGIC)
}

#[allow(clippy::unnecessary_cast)]
fn free_bytes(dir: &Path) -> Option<u64> {
    statfs(dir).map(|s| s.f_bavail as u64 * s.f_bsize as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_stress_dirs_of_dead_sessions_are_removed_and_live_ones_kept() {
        let parent = tempfile::tempdir().unwrap();
        // A pid that surely existed and is gone: a child that has been reaped.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let stale = parent.path().join(format!("xrunlab-stress-{dead}-0-1"));
        let live = parent
            .path()
            .join(format!("xrunlab-stress-{}-0-1", std::process::id()));
        let other = parent.path().join("xrunlab-stress-notapid");
        for d in [&stale, &live, &other] {
            std::fs::create_dir(d).unwrap();
            std::fs::write(d.join("out-0.log"), "x").unwrap();
        }
        remove_stale_dirs(parent.path());
        assert!(!stale.exists());
        assert!(live.exists() && other.exists());
    }
}
