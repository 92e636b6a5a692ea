//! Process-wide list of the stressors' process groups and directories, readable from a
//! signal handler.
//!
//! `StressSession`'s Drop is the normal cleanup. This list covers the paths where no Drop
//! runs: `std::process::exit` (atexit hook), and a signal that gives up
//! (docs/ARCHITECTURE.md §5): the groups are SIGKILLed at once, so the orderly stop still
//! under way need not wait for them, and if the process then has to die by the signal its
//! stressors' directories are removed first. Only atomics and raw system calls are used, so
//! every function called from a handler is async-signal-safe.

use crate::rt::interrupt::{self, Escalation};
use std::ffi::{c_char, CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, Ordering};

const SLOTS: usize = 256;
/// One directory per session; a process runs a few sessions at a time at most.
const DIR_SLOTS: usize = 32;
/// Levels below a stressor directory that are emptied (stress-ng makes one per stressor).
const DIR_DEPTH: u32 = 4;

static GROUPS: [AtomicI32; SLOTS] = [const { AtomicI32::new(0) }; SLOTS];
/// NUL-terminated paths leaked from `CString`s; whoever swaps one out owns it.
static DIRS: [AtomicPtr<c_char>; DIR_SLOTS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; DIR_SLOTS];
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

/// Remember a stressor directory to remove if the process must die by a signal. Returns
/// false when the table is full or the path has a NUL byte (the session's guard still
/// removes it on every other path).
pub fn register_dir(dir: &Path) -> bool {
    install_hooks();
    let Ok(c) = CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    let p = c.into_raw();
    for slot in &DIRS {
        if slot
            .compare_exchange(std::ptr::null_mut(), p, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            return true;
        }
    }
    // SAFETY: p came from into_raw above and was not published.
    drop(unsafe { CString::from_raw(p) });
    false
}

/// Forget a directory the session removed itself.
pub fn unregister_dir(dir: &Path) {
    let want = dir.as_os_str().as_bytes();
    for slot in &DIRS {
        let p = slot.load(Ordering::SeqCst);
        // SAFETY: a non-null slot holds a live CString until it is swapped out; a handler
        // that swaps it meanwhile leaks it rather than freeing it.
        if p.is_null() || unsafe { CStr::from_ptr(p) }.to_bytes() != want {
            continue;
        }
        if slot
            .compare_exchange(p, std::ptr::null_mut(), Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            // SAFETY: we swapped it out, so we own it; it came from CString::into_raw.
            drop(unsafe { CString::from_raw(p) });
        }
        return;
    }
}

/// Directories currently registered.
pub fn registered_dirs() -> Vec<std::path::PathBuf> {
    DIRS.iter()
        .map(|s| s.load(Ordering::SeqCst))
        .filter(|p| !p.is_null())
        // SAFETY: as in unregister_dir; a test-only view.
        .map(|p| {
            std::path::PathBuf::from(std::ffi::OsStr::from_bytes(
                unsafe { CStr::from_ptr(p) }.to_bytes(),
            ))
        })
        .collect()
}

/// Remove every registered directory with what is inside. Async-signal-safe: raw
/// openat/getdents64/unlinkat on stack buffers; the paths are leaked, not freed.
pub fn remove_dirs() {
    for slot in &DIRS {
        let p = slot.swap(std::ptr::null_mut(), Ordering::SeqCst);
        if !p.is_null() {
            // SAFETY: p is a NUL-terminated path we now own.
            unsafe { remove_tree(p) };
        }
    }
}

/// `rm -r path` without allocating. Entries that cannot be removed are left.
// SAFETY: `path` must be NUL-terminated and stay valid for the call (remove_dirs passes a
// leaked registry path); the fd opened here is closed before return.
unsafe fn remove_tree(path: *const c_char) {
    let fd = libc::open(
        path,
        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
    );
    if fd >= 0 {
        empty_dir(fd, 0);
        libc::close(fd);
    }
    libc::rmdir(path);
}

/// Remove what `fd` (an open directory) holds, `depth` levels below the registered one.
// SAFETY: `fd` must be an open directory. Every entry is read inside the `n` bytes getdents64
// wrote to `buf`, whose records the kernel NUL-terminates; recursion is bounded by DIR_DEPTH.
unsafe fn empty_dir(fd: libc::c_int, depth: u32) {
    // Small: a signal handler runs on whatever thread's stack it interrupted.
    let mut buf = [0u8; 1024];
    // Removing entries while reading can make getdents skip some: read again until a pass
    // removes nothing more (bounded, in case something keeps failing).
    for _ in 0..64 {
        libc::lseek(fd, 0, libc::SEEK_SET);
        let mut removed = false;
        loop {
            let n = libc::syscall(libc::SYS_getdents64, fd, buf.as_mut_ptr(), buf.len());
            if n <= 0 {
                break;
            }
            let mut off = 0usize;
            while off < n as usize {
                // struct linux_dirent64: u64 ino, i64 off, u16 reclen, u8 type, name[].
                let ent = buf.as_ptr().add(off);
                let reclen = u16::from_ne_bytes([*ent.add(16), *ent.add(17)]) as usize;
                let name = ent.add(19) as *const c_char;
                off += reclen.max(1);
                let dot = *name == b'.' as c_char
                    && (*name.add(1) == 0 || (*name.add(1) == b'.' as c_char && *name.add(2) == 0));
                if dot {
                    continue;
                }
                if libc::unlinkat(fd, name, 0) == 0 {
                    removed = true;
                    continue;
                }
                if depth < DIR_DEPTH {
                    let sub = libc::openat(
                        fd,
                        name,
                        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                    );
                    if sub >= 0 {
                        empty_dir(sub, depth + 1);
                        libc::close(sub);
                    }
                }
                if libc::unlinkat(fd, name, libc::AT_REMOVEDIR) == 0 {
                    removed = true;
                }
            }
        }
        if !removed {
            break;
        }
    }
}

/// What a signal that gives up does to the stressors (see the module doc).
fn on_escalation(stage: Escalation) {
    kill_all();
    if stage == Escalation::Die {
        remove_dirs();
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
    interrupt::add_hook(on_escalation);
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

    #[test]
    fn remove_tree_empties_nested_directories_without_following_links() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("keep"), b"x").unwrap();
        let top = tempfile::tempdir().unwrap();
        let d = top.path().join("xrunlab-stress-test");
        // stress-ng's layout: a directory per stressor, files in it; many entries so that
        // getdents needs several reads of the 1 KiB buffer.
        let deep = d.join("tmp-stress-ng-io-1-0").join("a").join("b");
        std::fs::create_dir_all(&deep).unwrap();
        for i in 0..200 {
            std::fs::write(d.join(format!("out-{i}.log")), b"log").unwrap();
        }
        std::fs::write(deep.join("f"), b"data").unwrap();
        std::os::unix::fs::symlink(outside.path(), d.join("link")).unwrap();
        assert!(register_dir(&d));
        assert!(registered_dirs().contains(&d));
        unregister_dir(&d);
        assert!(!registered_dirs().contains(&d));
        let c = CString::new(d.as_os_str().as_bytes()).unwrap();
        // SAFETY: c is a NUL-terminated path.
        unsafe { remove_tree(c.as_ptr()) };
        assert!(!d.exists(), "{} left", d.display());
        assert!(outside.path().join("keep").exists(), "followed a link");
    }
}
