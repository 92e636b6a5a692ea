//! SIGINT / SIGTERM handling: the first signal asks every measurement loop to stop so the
//! partial result is written and the machine restored (docs/ARCHITECTURE.md §5); a second one restores
//! the default action and re-raises it, so a stuck process can still be killed.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);
static SIGNAL: AtomicI32 = AtomicI32::new(0);
/// A `fn()` run before a second signal kills us, so children we own die with us.
static LAST_RESORT: AtomicUsize = AtomicUsize::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    if REQUESTED.swap(true, Ordering::SeqCst) {
        // Second signal: give up politely waiting. Only async-signal-safe calls here.
        let hook = LAST_RESORT.load(Ordering::SeqCst);
        if hook != 0 {
            // SAFETY: only set_last_resort_hook stores here, from a valid fn() pointer.
            let f: fn() = unsafe { std::mem::transmute::<usize, fn()>(hook) };
            f();
        }
        // SAFETY: signal() and raise() are async-signal-safe.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
    }
    SIGNAL.store(sig, Ordering::SeqCst);
}

/// Install the handlers for SIGINT and SIGTERM. Idempotent.
pub fn install() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: on_signal only touches atomics and async-signal-safe functions.
        // No SA_RESTART: blocking waits must return EINTR so loops notice the request.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            sa.sa_flags = 0;
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// Run `f` when a second SIGINT/SIGTERM is about to kill the process with the default
/// action (e.g. `stress::registry::kill_all`). `f` must be async-signal-safe.
pub fn set_last_resort_hook(f: fn()) {
    LAST_RESORT.store(f as usize, Ordering::SeqCst);
}

/// True once SIGINT/SIGTERM arrived (or `request` was called). Cheap enough for RT loops.
#[inline]
pub fn requested() -> bool {
    REQUESTED.load(Ordering::Relaxed)
}

/// The signal that asked us to stop, if any.
pub fn signal() -> Option<i32> {
    match SIGNAL.load(Ordering::Relaxed) {
        0 => None,
        s => Some(s),
    }
}

/// Ask running measurements to stop, as a signal would (used by the watchdog and tests).
pub fn request() {
    REQUESTED.store(true, Ordering::SeqCst);
}

/// Forget a previous request (tests run several measurements in one process).
pub fn reset() {
    REQUESTED.store(false, Ordering::SeqCst);
    SIGNAL.store(0, Ordering::SeqCst);
}
