//! The stressors as processes: what each child does between fork and exec, reading an
//! ended child's status without reaping it, and finding a session's processes in /proc
//! (by process group, or by the marker every stressor carries in its environment).

use crate::error::{Error, Result};
use std::path::Path;

/// Environment variable set in every stressor; its value is unique per session, so any
/// descendant (even one that left its process group) can be found in /proc/PID/environ.
pub const SESSION_ENV: &str = "XRUNLAB_STRESS_SESSION";

/// Runs in the child between fork and exec: async-signal-safe calls only.
pub(super) fn child_setup(
    parent: libc::pid_t,
    cpus: Option<&libc::cpu_set_t>,
    leave: Option<&std::ffi::CStr>,
) -> std::io::Result<()> {
    // SAFETY: plain system calls on values owned by this (single-threaded) child.
    unsafe {
        if libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
        // The parent may have died between fork and prctl; then nobody would kill us.
        if libc::getppid() != parent {
            libc::_exit(1);
        }
        // Children inherit the spawning thread's policy; stressors must never be real-time.
        let param = libc::sched_param { sched_priority: 0 };
        if libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // A measurement inside a tuned machine's audio cpuset: the load runs where the
        // machine's other work does (a refusal leaves it beside the audio threads).
        if let Some(file) = leave {
            let fd = libc::open(file.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd >= 0 {
                libc::write(fd, b"0\n".as_ptr().cast(), 2);
                libc::close(fd);
            }
        }
        if let Some(set) = cpus {
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

pub(super) fn cpu_set(cpus: &[usize]) -> Result<Option<libc::cpu_set_t>> {
    if cpus.is_empty() {
        return Ok(None);
    }
    // SAFETY: cpu_set_t is plain data.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        if c >= libc::CPU_SETSIZE as usize {
            return Err(Error::usage(format!("CPU {c} is beyond CPU_SETSIZE")));
        }
        // SAFETY: c is within the set's bounds.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    Ok(Some(set))
}

/// The exit status of child `pid` if it has ended, leaving it a zombie (WNOWAIT) so its
/// pid, and with it the process-group id, stays reserved until we SIGKILL the group.
pub(super) fn peek_exit(pid: libc::pid_t) -> Option<libc::c_int> {
    // SAFETY: siginfo is plain data written by the kernel.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let rc = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    // SAFETY: si_pid/si_status are valid for a WEXITED report.
    if rc != 0 || unsafe { info.si_pid() } == 0 {
        return None;
    }
    let status = unsafe { info.si_status() };
    // Rebuild a wait(2)-style status so one decoder serves both paths.
    Some(match info.si_code {
        libc::CLD_EXITED => (status & 0xff) << 8,
        _ => status & 0x7f,
    })
}

pub(super) fn describe_status(status: libc::c_int) -> String {
    if status == -1 {
        "reaped elsewhere".into()
    } else if libc::WIFEXITED(status) {
        format!("exit {}", libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        format!("signal {}", libc::WTERMSIG(status))
    } else {
        format!("status {status}")
    }
}

/// Live (or zombie) processes whose process group is `pgid`, from /proc.
pub fn group_members(pgid: libc::pid_t) -> Vec<libc::pid_t> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in rd.flatten() {
        let Some(pid) = e
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the command name (which may contain spaces and parentheses):
        // state ppid pgrp ...
        if let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) {
            let f: Vec<&str> = rest.split_whitespace().collect();
            if f.get(2).and_then(|g| g.parse::<libc::pid_t>().ok()) == Some(pgid) {
                out.push(pid);
            }
        }
    }
    out
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

/// Processes whose environment carries `XRUNLAB_STRESS_SESSION=marker` (needs permission
/// to read other processes' environ: same user or root).
pub fn session_members(marker: &str) -> Vec<libc::pid_t> {
    let needle = format!("{SESSION_ENV}={marker}");
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.parse::<libc::pid_t>().ok())
        })
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .map(|env| env.split(|&b| b == 0).any(|kv| kv == needle.as_bytes()))
                .unwrap_or(false)
        })
        .collect()
}
