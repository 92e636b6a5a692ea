//! Process-wide list of the stressors' process groups, readable from a signal handler.
//!
//! `StressSession`'s Drop is the normal cleanup. This list covers the paths where no Drop
//! runs: `std::process::exit` (atexit hook), a second SIGINT/SIGTERM that kills us with
//! the default action (the interrupt module's last-resort hook), and a panic under
//! `panic = "abort"`-like conditions that still reach atexit. Only atomics and `kill` are
//! used, so `kill_all` is async-signal-safe.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

const SLOTS: usize = 256;

static GROUPS: [AtomicI32; SLOTS] = [const { AtomicI32::new(0) }; SLOTS];
static HOOKS_INSTALLED: AtomicBool = AtomicBool::new(false);

/// Remember a stressor's process group. Returns false when the table is full (the caller
/// then still owns the cleanup through its guard; PDEATHSIG remains as the last line).
pub fn register(pgid: libc::pid_t) -> bool {
    install_hooks();
    for slot in &GROUPS {
        if slot
            .compare_exchange(0, pgid, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            return true;
        }
    }
    false
}

pub fn unregister(pgid: libc::pid_t) {
    for slot in &GROUPS {
        if slot
            .compare_exchange(pgid, 0, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            return;
        }
    }
}

/// Process groups currently registered.
pub fn registered() -> Vec<libc::pid_t> {
    GROUPS
        .iter()
        .map(|s| s.load(Ordering::SeqCst))
        .filter(|&g| g != 0)
        .collect()
}

/// SIGKILL every registered group. Async-signal-safe; does not reap (the kernel or our
/// subreaper role does that once we exit).
pub fn kill_all() {
    for slot in &GROUPS {
        let g = slot.swap(0, Ordering::SeqCst);
        if g > 0 {
            // SAFETY: kill has no memory-safety preconditions; a negative pid names a group.
            unsafe { libc::kill(-g, libc::SIGKILL) };
        }
    }
}

extern "C" fn at_exit() {
    kill_all();
}

fn install_hooks() {
    if HOOKS_INSTALLED.swap(true, Ordering::SeqCst) {
        return;
    }
    // SAFETY: at_exit is a plain extern "C" fn that only uses atomics and kill.
    unsafe { libc::atexit(at_exit) };
    crate::rt::interrupt::set_last_resort_hook(kill_all);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    #[test]
    fn kill_all_ends_registered_groups_and_forgets_them() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let pgid = child.id() as libc::pid_t;
        assert!(register(pgid));
        assert!(registered().contains(&pgid));
        kill_all();
        assert!(!registered().contains(&pgid));
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        // Unregistering an unknown group is harmless.
        unregister(pgid);
    }
}
