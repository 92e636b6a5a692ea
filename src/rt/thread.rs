//! Spawning named real-time threads: name, affinity and policy are applied inside the new
//! thread before its body runs, and any failure is returned to the spawner instead of
//! leaving a half-configured thread behind.

use super::{affinity, clock, policy::Policy};
use crate::error::{Error, Result};
use std::sync::mpsc;
use std::thread::JoinHandle;

/// How a real-time thread is to be set up.
#[derive(Debug, Clone)]
pub struct ThreadSpec {
    /// Thread name (max 15 bytes are visible in /proc and ps).
    pub name: String,
    pub policy: Policy,
    /// Pin to these CPUs; empty = leave the inherited mask.
    pub cpus: Vec<usize>,
}

/// A spawned RT thread and its kernel thread id (for CPU-time reads and demotion).
pub struct RtThread<T> {
    pub tid: libc::pid_t,
    /// The thread's timer slack as the kernel reports it after set-up, for a SCHED_OTHER
    /// thread (set to the minimum, 1 ns); None under a real-time policy, where the kernel
    /// applies no slack.
    pub timer_slack_ns: Option<u64>,
    handle: JoinHandle<Option<T>>,
}

impl<T> RtThread<T> {
    /// Wait for the thread's body to return; a panic in the body is propagated.
    pub fn join(self) -> T {
        match self.handle.join() {
            Ok(Some(v)) => v,
            Ok(None) => unreachable!("the body always runs after a successful setup"),
            Err(p) => std::panic::resume_unwind(p),
        }
    }

    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }
}

/// Spawn `body` on a thread configured by `spec`. Returns once the thread is configured.
pub fn spawn_rt<T, F>(spec: ThreadSpec, body: F) -> Result<RtThread<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    spec.policy.validate()?;
    let (tx, rx) = mpsc::sync_channel::<Result<(libc::pid_t, Option<u64>)>>(1);
    let (go_tx, go_rx) = mpsc::sync_channel::<bool>(1);
    let name = spec.name.clone();
    let handle = std::thread::Builder::new()
        .name(spec.name.clone())
        .spawn(move || {
            let setup = (|| {
                if !spec.cpus.is_empty() {
                    affinity::set_affinity(0, &spec.cpus)?;
                }
                super::policy::set_policy(0, &spec.policy)?;
                let mut slack = None;
                if !spec.policy.is_realtime() {
                    // A SCHED_OTHER sleep ends up to the 50 µs default timer slack late:
                    // that is the kernel batching timers, not scheduling latency.
                    // SAFETY: PR_SET_TIMERSLACK takes a value and touches no memory.
                    unsafe {
                        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
                    }
                    // Read back: what the result records is the slack in effect.
                    // SAFETY: PR_GET_TIMERSLACK takes no pointer and returns the value.
                    let got = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK) };
                    slack = u64::try_from(got).ok();
                }
                Ok((clock::gettid(), slack))
            })();
            let ok = setup.is_ok();
            let _ = tx.send(setup);
            // Wait for the spawner to acknowledge; on failure the body never runs.
            if ok && go_rx.recv().unwrap_or(false) {
                Some(body())
            } else {
                None
            }
        })
        .map_err(|e| super::policy::explain_spawn(&format!("thread {name}"), e))?;
    let (tid, timer_slack_ns) = match rx.recv() {
        Ok(Ok(got)) => got,
        Ok(Err(e)) => {
            let _ = handle.join();
            return Err(e);
        }
        Err(_) => {
            let _ = handle.join();
            return Err(Error::cannot_measure(format!(
                "thread {name} died during setup"
            )));
        }
    };
    let _ = go_tx.send(true);
    Ok(RtThread {
        tid,
        timer_slack_ns,
        handle,
    })
}

/// Demote a thread to SCHED_OTHER (used by the watchdog and on every exit path).
pub fn demote(tid: libc::pid_t) -> Result<()> {
    super::policy::set_policy(tid, &Policy::Other { nice: 0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spawns_with_other_policy_and_reports_tid() {
        let cpu = affinity::allowed_cpus().unwrap()[0];
        let t = spawn_rt(
            ThreadSpec {
                name: "xr-test".into(),
                policy: Policy::Other { nice: 0 },
                cpus: vec![cpu],
            },
            || 41 + 1,
        )
        .unwrap();
        assert!(t.tid > 0);
        assert_eq!(t.timer_slack_ns, Some(1));
        assert_eq!(t.join(), 42);
    }

    #[test]
    fn setup_failure_is_returned_and_body_never_runs() {
        let ran = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let r2 = ran.clone();
        let err = spawn_rt(
            ThreadSpec {
                name: "xr-bad".into(),
                policy: Policy::Other { nice: 0 },
                cpus: vec![4000],
            },
            move || r2.store(true, std::sync::atomic::Ordering::SeqCst),
        );
        assert!(err.is_err());
        assert!(!ran.load(std::sync::atomic::Ordering::SeqCst));
    }
}
