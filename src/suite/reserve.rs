//! Space set aside for the manifest's last rewrite (see [`Reserve`]).

use std::path::Path;

/// Space set aside in the suite's directory for the manifest's last rewrite: a disk the
/// stages filled would otherwise leave it saying `running`. 64 KiB holds a manifest of every
/// stage with a tuning record several times over; a disk without that much to spare at the
/// start gets no reserve (the suite runs as before).
pub struct Reserve(Option<std::path::PathBuf>);

const RESERVE: &str = ".manifest.reserve";
const RESERVE_BYTES: libc::off_t = 64 << 10;

impl Reserve {
    pub fn make(dir: &Path) -> Reserve {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::OpenOptionsExt;
        let path = dir.join(RESERVE);
        // A new file of our own, never one another user planted a link at: the suite runs
        // as root in directories others may write. A stale reserve (a killed suite's) goes
        // first; removing a name never follows a link.
        let open = || {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .custom_flags(libc::O_NOFOLLOW)
                .mode(0o600)
                .open(&path)
        };
        let f = match open() {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let _ = std::fs::remove_file(&path);
                match open() {
                    Ok(f) => f,
                    Err(_) => return Reserve(None),
                }
            }
            Err(_) => return Reserve(None),
        };
        // Allocated blocks, not a sparse length: they are what a full disk lacks.
        // SAFETY: `f` is an open file for the duration of the call.
        let rc = unsafe { libc::posix_fallocate(f.as_raw_fd(), 0, RESERVE_BYTES) };
        if rc != 0 {
            let _ = std::fs::remove_file(&path);
            return Reserve(None);
        }
        Reserve(Some(path))
    }

    /// Give the space back (before the last rewrite, and when the suite ends).
    pub fn release(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

impl Drop for Reserve {
    fn drop(&mut self) {
        self.release();
    }
}
