//! Locking memory so page faults cannot stall a real-time thread (cyclictest's `-m`).

use crate::error::{Error, Result};

/// Holds `mlockall(MCL_CURRENT | MCL_FUTURE)` and undoes it on drop, so the machine is
/// left as found.
pub struct MemoryLock(());

impl MemoryLock {
    pub fn acquire() -> Result<Self> {
        // SAFETY: mlockall has no memory-safety preconditions.
        let rc = unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) };
        if rc == 0 {
            return Ok(MemoryLock(()));
        }
        let err = std::io::Error::last_os_error();
        Err(match err.raw_os_error() {
            Some(libc::ENOMEM) | Some(libc::EPERM) => Error::no_privilege(format!(
                "mlockall failed ({err}): raise RLIMIT_MEMLOCK (ulimit -l), e.g. '@audio - memlock unlimited' \
                 in /etc/security/limits.d/audio.conf, or run as root; pass --no-mlock to measure without it"
            )),
            _ => Error::io("mlockall", err),
        })
    }
}

impl Drop for MemoryLock {
    fn drop(&mut self) {
        // SAFETY: no preconditions.
        unsafe { libc::munlockall() };
    }
}
