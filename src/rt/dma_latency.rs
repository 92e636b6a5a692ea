//! `/dev/cpu_dma_latency` guard: while the file is held open with a value written, the CPU
//! idle governor avoids deep C-states with longer exit latency (cyclictest does the same).
//! Closing the file restores the system's own setting, so dropping the guard is the release.

use crate::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;

pub const DEFAULT_PATH: &str = "/dev/cpu_dma_latency";

pub struct DmaLatencyGuard {
    _file: File,
    pub value_us: i32,
}

impl DmaLatencyGuard {
    /// Open `path`, write `value_us` as the kernel's 32-bit binary value, and hold it.
    pub fn acquire_at(path: &Path, value_us: i32) -> Result<Self> {
        let mut file = OpenOptions::new().write(true).open(path).map_err(|e| {
            let msg = format!(
                "cannot open {} ({e}): run as root, or pass --no-dma-latency to measure the system as configured",
                path.display()
            );
            if e.kind() == std::io::ErrorKind::PermissionDenied {
                Error::no_privilege(msg)
            } else {
                Error::cannot_measure(msg)
            }
        })?;
        file.write_all(&value_us.to_ne_bytes())
            .map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
        Ok(DmaLatencyGuard {
            _file: file,
            value_us,
        })
    }

    pub fn acquire(value_us: i32) -> Result<Self> {
        Self::acquire_at(Path::new(DEFAULT_PATH), value_us)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_the_binary_value_and_explains_failure() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("dma");
        std::fs::write(&p, b"").unwrap();
        {
            let g = DmaLatencyGuard::acquire_at(&p, 0).unwrap();
            assert_eq!(g.value_us, 0);
        }
        assert_eq!(std::fs::read(&p).unwrap(), 0i32.to_ne_bytes());
        let e = DmaLatencyGuard::acquire_at(&dir.path().join("missing"), 0)
            .err()
            .unwrap();
        assert!(e.to_string().contains("--no-dma-latency"));
        // A missing file is not a refused privilege.
        assert_eq!(e.kind(), crate::error::ErrorKind::CannotMeasure);
    }
}
