//! Stopping the stressors: SIGTERM, a grace period, SIGKILL to the group, reaping, and
//! whatever escaped its group.

use super::output::{parse_builtin_metrics, parse_metrics_brief, tail_of};
use super::{Child, SkippedPreset, StressProcess, StressSession, GRACE, REAP_LIMIT, SESSION_ENV};
use crate::stress::registry;
use std::time::Duration;

impl StressSession {
    pub(super) fn shutdown(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        for c in &mut self.children {
            c.ended_early = peek_exit(c.pid).is_some();
        }
        for c in &self.children {
            // stress-ng reports its metrics on SIGINT (as on Ctrl-C); ours and user commands
            // stop on SIGTERM.
            let sig = if c.backend == "stress-ng" {
                libc::SIGINT
            } else {
                libc::SIGTERM
            };
            // SAFETY: signalling a process group we created; the leader is not reaped yet
            // (peek_exit leaves it a zombie), so the group id cannot have been reused.
            unsafe { libc::kill(-c.pid, sig) };
        }
        let grace_end = crate::rt::clock::monotonic_ns() + GRACE.as_nanos() as u64;
        while crate::rt::clock::monotonic_ns() < grace_end
            && self.children.iter().any(|c| peek_exit(c.pid).is_none())
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        for c in &self.children {
            // Whatever is left of the group (workers, a child that ignored SIGTERM).
            // SAFETY: as above.
            unsafe { libc::kill(-c.pid, libc::SIGKILL) };
        }
        let reap_end = crate::rt::clock::monotonic_ns() + REAP_LIMIT.as_nanos() as u64;
        loop {
            let mut left = false;
            for c in &mut self.children {
                reap_group(c);
                if c.status.is_none() || !group_members(c.pid).is_empty() {
                    left = true;
                }
            }
            if !left || crate::rt::clock::monotonic_ns() >= reap_end {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        for c in &self.children {
            registry::unregister(c.pid);
            let left = group_members(c.pid);
            if !left.is_empty() {
                self.record.warnings.push(format!(
                    "stressor group {} still has processes {left:?} after SIGKILL",
                    c.pid
                ));
            }
        }
        self.kill_escapees();
        self.collect();
        if crate::rt::interrupt::gave_up() && !self.children.is_empty() {
            self.record.warnings.push(
                "a signal after the first gave up waiting: the stressors were killed (SIGKILL) before they could report"
                    .into(),
            );
        }
        if let Some(d) = self.dir.take() {
            if let Err(e) = std::fs::remove_dir_all(&d) {
                self.record
                    .warnings
                    .push(format!("could not remove {}: {e}", d.display()));
            }
            registry::unregister_dir(&d);
        }
        self.record.duration_ns = crate::rt::clock::monotonic_ns() - self.started_ns;
    }

    /// A stressor that left its process group (a user command that daemonises, setsid)
    /// still carries the session marker in its environment: kill it too.
    fn kill_escapees(&mut self) {
        if self.children.is_empty() {
            return;
        }
        let left = session_members(&self.marker);
        if left.is_empty() {
            return;
        }
        for &pid in &left {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        let end = crate::rt::clock::monotonic_ns() + REAP_LIMIT.as_nanos() as u64;
        while crate::rt::clock::monotonic_ns() < end {
            for &pid in &left {
                // Reaps those re-parented to us (we are a subreaper); others are init's.
                let mut status = 0;
                // SAFETY: status is writable.
                unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            }
            if session_members(&self.marker).is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.record.warnings.push(format!(
            "stressor processes {left:?} had left their process group; killed"
        ));
    }

    pub(super) fn collect(&mut self) {
        for c in &self.children {
            let full = std::fs::read(&c.log).unwrap_or_default();
            let text = String::from_utf8_lossy(&full);
            match c.backend {
                "stress-ng" => self.record.metrics.extend(parse_metrics_brief(&text)),
                "builtin" => self.record.metrics.extend(parse_builtin_metrics(&text)),
                _ => {}
            }
            for line in text.lines() {
                if let Some(reason) = line.strip_prefix("xrunlab-stressor-skip: ") {
                    self.record.skipped.push(SkippedPreset {
                        preset: c.presets.join(","),
                        reason: reason.to_string(),
                    });
                }
            }
            self.record.processes.push(StressProcess {
                backend: c.backend.into(),
                presets: c.presets.clone(),
                argv: c.argv.clone(),
                pid: c.pid,
                exit: c
                    .status
                    .map(describe_status)
                    .unwrap_or_else(|| "not reaped".into()),
                ended_early: c.ended_early,
                output_tail: tail_of(&text),
            });
        }
    }
}

/// The exit status of child `pid` if it has ended, leaving it a zombie (WNOWAIT) so its
/// pid, and with it the process-group id, stays reserved until we SIGKILL the group.
pub(super) fn peek_exit(pid: libc::pid_t) -> Option<libc::c_int> {
    // SAFETY: siginfo is plain data, valid all-zero.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: info is a writable siginfo_t; WNOHANG keeps waitid from blocking.
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
    // SAFETY: as above, a WEXITED report with a pid carries si_status.
    let status = unsafe { info.si_status() };
    // Rebuild a wait(2)-style status so one decoder serves both paths.
    Some(match info.si_code {
        libc::CLD_EXITED => (status & 0xff) << 8,
        _ => status & 0x7f,
    })
}

/// Reap every ended process of `c`'s group that is our child (the leader, and orphaned
/// workers re-parented to us as subreaper).
fn reap_group(c: &mut Child) {
    loop {
        let mut status = 0;
        // SAFETY: status is writable.
        let r = unsafe { libc::waitpid(-c.pid, &mut status, libc::WNOHANG) };
        if r <= 0 {
            break;
        }
        if r == c.pid {
            c.status = Some(status);
        }
    }
    if c.status.is_none() {
        // The group may be empty of children but the leader already gone (ECHILD).
        let mut status = 0;
        // SAFETY: status is writable.
        let r = unsafe { libc::waitpid(c.pid, &mut status, libc::WNOHANG) };
        if r == c.pid {
            c.status = Some(status);
        } else if r < 0 {
            c.status = Some(-1);
        }
    }
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
    crate::common::procs::all()
        .into_iter()
        .filter(|p| p.pgrp == pgid)
        .map(|p| p.pid)
        .collect()
}

/// Processes whose environment carries `XRUNLAB_STRESS_SESSION=marker` (needs permission
/// to read other processes' environ: same user or root).
pub fn session_members(marker: &str) -> Vec<libc::pid_t> {
    let entry = format!("{SESSION_ENV}={marker}");
    crate::common::procs::marked(entry.as_bytes())
        .into_iter()
        .map(|p| p.pid)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_decoding() {
        assert_eq!(describe_status(0), "exit 0");
        assert_eq!(describe_status(3 << 8), "exit 3");
        assert_eq!(describe_status(9), "signal 9");
    }
}
