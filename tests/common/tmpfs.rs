//! A small private tmpfs for the tests that need a full disk: mounted on a fresh temporary
//! directory for one test (root), unmounted and removed on drop.

use std::path::Path;
use std::time::Duration;

pub struct SmallFs {
    dir: tempfile::TempDir,
}

impl SmallFs {
    /// A tmpfs of `size` (mount's syntax, e.g. `256k`), or why it could not be mounted.
    pub fn mount(size: &str) -> Result<SmallFs, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let o = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0755"),
                "tmpfs",
            ])
            .arg(dir.path())
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !o.status.success() {
            return Err(format!(
                "mount -t tmpfs failed: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ));
        }
        Ok(SmallFs { dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        // A child that just exited may still hold a file open: retry a while.
        for _ in 0..50 {
            let ok = std::process::Command::new("umount")
                .arg(self.dir.path())
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// A tmpfs of `size`, or None (skip, the reason printed) when this is not root or the mount
/// fails; under CI either fails the test.
pub fn require_small_fs(size: &str) -> Option<SmallFs> {
    if !super::require(super::is_root(), "root to mount a small tmpfs") {
        return None;
    }
    let fs = SmallFs::mount(size);
    let ok = super::require(
        fs.is_ok(),
        &format!("a small tmpfs: {:?}", fs.as_ref().err()),
    );
    ok.then(|| fs.unwrap())
}
