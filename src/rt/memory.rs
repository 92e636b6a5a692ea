//! Locking memory so page faults cannot stall a real-time thread (cyclictest's `-m`).

use crate::error::{Error, Result};

/// Holds `mlockall(MCL_CURRENT | MCL_FUTURE)` and undoes it on drop, so the machine is
/// left as found.
pub struct MemoryLock(());

/// The `mlock` of a config read from a result written before the setting could be turned
/// off: such runs locked.
pub fn locked_by_default() -> bool {
    true
}

impl MemoryLock {
    /// `acquire` when `wanted` (a command's `--no-mlock` makes it false).
    pub fn acquire_if(wanted: bool) -> Result<Option<Self>> {
        wanted.then(Self::acquire).transpose()
    }

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
