//! SIGINT, SIGTERM and SIGHUP (docs/ARCHITECTURE.md §5 "Leaving the machine as found").
//!
//! - The first signal asks every measurement loop to stop, so the partial result is written
//!   and the machine restored.
//! - Signals within [`GRACE`] of the first are the same request. GNU `timeout` signals the
//!   process and then its whole group, a terminal's Ctrl-C pressed twice in a hurry and a
//!   supervisor that forwards a signal it also delivers all arrive as two; taking the second
//!   as "give up" lost the result they had asked to keep.
//! - A signal after the grace gives up waiting politely: the [`Escalation::GiveUp`] hooks run
//!   at once (stressors are SIGKILLed instead of being left their time to report), and the
//!   process has [`set_deadline`] seconds (default [`DEADLINE_S`]) to write what it can and
//!   exit by itself; if it has not, the [`Escalation::Die`] hooks run (stressor directories
//!   are removed) and the signal is re-raised with its default action.
//!
//! SIGHUP (a dropped ssh session) is SIGTERM: the result is written and the summary is lost
//! with the terminal. A SIGHUP ignored when we start (`nohup`) stays ignored.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// Signals this long after the first are one request.
pub const GRACE: Duration = Duration::from_secs(2);
/// Seconds a process that gave up has to write what it can before it dies by the signal.
pub const DEADLINE_S: u32 = 3;

static REQUESTED: AtomicBool = AtomicBool::new(false);
/// The first signal that asked us to stop.
static SIGNAL: AtomicI32 = AtomicI32::new(0);
/// CLOCK_MONOTONIC of the first signal, ns; 0 = none yet.
static FIRST_NS: AtomicU64 = AtomicU64::new(0);
/// The signal that gave up; 0 = not given up.
static GAVE_UP: AtomicI32 = AtomicI32::new(0);
static DEADLINE: AtomicU32 = AtomicU32::new(DEADLINE_S);

const HOOK_SLOTS: usize = 4;
/// `fn(Escalation)` pointers, 0 = empty.
static HOOKS: [AtomicUsize; HOOK_SLOTS] = [const { AtomicUsize::new(0) }; HOOK_SLOTS];

/// When a hook runs (always inside a signal handler: a hook must be async-signal-safe and
/// idempotent, and may run on any thread).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Escalation {
    /// A signal came after the grace: stop waiting for children, the process still runs.
    GiveUp,
    /// The deadline after giving up passed: the process dies when the hooks return.
    Die,
}

/// CLOCK_MONOTONIC in ns, never 0. clock_gettime is async-signal-safe.
fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64).max(1)
}

fn run_hooks(stage: Escalation) {
    for slot in &HOOKS {
        let h = slot.load(Ordering::SeqCst);
        if h != 0 {
            // SAFETY: only add_hook stores here, from a valid fn(Escalation) pointer.
            let f: fn(Escalation) = unsafe { std::mem::transmute::<usize, fn(Escalation)>(h) };
            f(stage);
        }
    }
}

extern "C" fn on_signal(sig: libc::c_int) {
    // SAFETY: errno is thread-local; the interrupted code must find it as it left it.
    let errno = unsafe { *libc::__errno_location() };
    let now = now_ns();
    match FIRST_NS.compare_exchange(0, now, Ordering::SeqCst, Ordering::SeqCst) {
        Ok(_) => {
            SIGNAL.store(sig, Ordering::SeqCst);
            REQUESTED.store(true, Ordering::SeqCst);
        }
        Err(first) if now.saturating_sub(first) < GRACE.as_nanos() as u64 => {}
        Err(_) => {
            if GAVE_UP
                .compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                run_hooks(Escalation::GiveUp);
                // SAFETY: sigaction and alarm are async-signal-safe; on_deadline only calls
                // async-signal-safe code.
                unsafe {
                    set_handler(libc::SIGALRM, on_deadline);
                    libc::alarm(DEADLINE.load(Ordering::SeqCst).max(1));
                }
            }
        }
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

extern "C" fn on_deadline(_: libc::c_int) {
    run_hooks(Escalation::Die);
    let sig = GAVE_UP.load(Ordering::SeqCst);
    // SAFETY: signal() and raise() are async-signal-safe; the signal is not blocked here
    // (only SIGALRM is), so raise() does not return.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}

/// Install `handler` for `sig` without SA_RESTART: blocking waits must return EINTR so
/// loops notice the request.
// SAFETY: the sigaction is fully initialised (zeroed, empty mask, no flags) before it is
// installed; callers must pass a handler that is async-signal-safe.
unsafe fn set_handler(sig: libc::c_int, handler: extern "C" fn(libc::c_int)) {
    let mut sa: libc::sigaction = std::mem::zeroed();
    sa.sa_sigaction = handler as *const () as usize;
    libc::sigemptyset(&mut sa.sa_mask);
    sa.sa_flags = 0;
    libc::sigaction(sig, &sa, std::ptr::null_mut());
}

/// Install the handlers for SIGINT, SIGTERM and SIGHUP. Idempotent.
pub fn install() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: on_signal only touches atomics and async-signal-safe functions; old is
        // a writable sigaction.
        unsafe {
            if sig == libc::SIGHUP {
                let mut old: libc::sigaction = std::mem::zeroed();
                libc::sigaction(sig, std::ptr::null(), &mut old);
                if old.sa_sigaction == libc::SIG_IGN {
                    continue;
                }
            }
            set_handler(sig, on_signal);
        }
    }
}

/// Run `f` when a signal gives up and again before the deadline kills the process (see the
/// module doc). `f` must be async-signal-safe and idempotent. Adding the same `f` twice
/// adds it once; false when every slot is taken.
pub fn add_hook(f: fn(Escalation)) -> bool {
    let h = f as usize;
    for slot in &HOOKS {
        match slot.compare_exchange(0, h, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => return true,
            Err(cur) if cur == h => return true,
            Err(_) => {}
        }
    }
    false
}

/// How long a process that gave up has to finish by itself (the suite waits for its stage
/// to finish its own). At least 1 s.
pub fn set_deadline(d: Duration) {
    DEADLINE.store(d.as_secs().clamp(1, 3600) as u32, Ordering::SeqCst);
}

/// True once a signal arrived (or `request` was called). Cheap enough for RT loops.
#[inline]
pub fn requested() -> bool {
    REQUESTED.load(Ordering::Relaxed)
}

/// `Err` (exit 3) once a signal asked to stop, for work with nothing partial worth keeping
/// (reading, judging, reporting): its loops call it between steps. `outcome` says what the
/// user is left with, e.g. "no report written".
pub fn check(outcome: &str) -> crate::error::Result<()> {
    if requested() {
        return Err(crate::error::Error::cannot_measure(format!(
            "interrupted; {outcome}"
        )));
    }
    Ok(())
}

/// True once a signal after the grace gave up.
pub fn gave_up() -> bool {
    GAVE_UP.load(Ordering::Relaxed) != 0
}

/// The signal that asked us to stop, if any.
pub fn signal() -> Option<i32> {
    match SIGNAL.load(Ordering::Relaxed) {
        0 => None,
        s => Some(s),
    }
}

/// Ask running measurements to stop, as a signal would (used by the watchdog and tests).
/// A signal after it is still a first signal: it gets its grace.
pub fn request() {
    REQUESTED.store(true, Ordering::SeqCst);
}

/// Forget a previous request (tests run several measurements in one process).
pub fn reset() {
    REQUESTED.store(false, Ordering::SeqCst);
    SIGNAL.store(0, Ordering::SeqCst);
    FIRST_NS.store(0, Ordering::SeqCst);
    GAVE_UP.store(0, Ordering::SeqCst);
}
