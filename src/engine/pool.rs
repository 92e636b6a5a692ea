//! Wake/join of the worker pool: atomics plus a futex, with a short spin before sleeping.
//!
//! Why not a Barrier/Condvar: both take a mutex that a preempted non-RT holder could keep,
//! and both always go through the kernel. Here the hot path is two atomic RMWs per thread
//! per cycle; the kernel is entered only to wake a sleeping thread (FUTEX_WAKE) or to sleep
//! after the spin budget (FUTEX_WAIT), and never when nobody sleeps.
//!
//! Lost wake-ups are impossible by the usual Dekker argument: a sleeper increments its
//! "waiting" counter and re-checks the word with SeqCst before FUTEX_WAIT (which re-checks
//! atomically in the kernel), and a waker changes the word before it reads the counter,
//! also SeqCst; one of the two must see the other.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

#[inline]
pub fn futex_wait(word: &AtomicU32, expected: u32) {
    // SAFETY: the word lives as long as the call; a null timeout waits indefinitely, and the
    // kernel returns at once if the word no longer holds `expected`.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            std::ptr::null::<libc::timespec>(),
        );
    }
}

#[inline]
pub fn futex_wake(word: &AtomicU32, n: i32) {
    // SAFETY: waking has no memory effects beyond the kernel's wait queue.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            n,
        );
    }
}

/// A futex word with a sleeper count, so that wakers skip the system call when every
/// waiter is still spinning.
#[derive(Default)]
#[repr(align(64))]
pub struct Event {
    pub word: AtomicU32,
    sleepers: AtomicU32,
    /// How often a waiter had to sleep in the kernel (for the overhead figures).
    pub sleeps: AtomicU64,
    /// How often a waker had to enter the kernel.
    pub wakes: AtomicU64,
}

impl Event {
    /// Spin for about `spin_ns` while `cond(word)` is false, then sleep on the futex until it
    /// is true. `cond` must become true only after a `notify`.
    #[inline]
    pub fn wait_until(&self, spin_ns: u64, cond: impl Fn(u32) -> bool) -> u32 {
        let mut v = self.word.load(Ordering::Acquire);
        if cond(v) {
            return v;
        }
        let start = crate::rt::clock::monotonic_ns();
        let mut i = 0u32;
        loop {
            v = self.word.load(Ordering::Acquire);
            if cond(v) {
                return v;
            }
            i = i.wrapping_add(1);
            if i.is_multiple_of(64) && crate::rt::clock::monotonic_ns() - start >= spin_ns {
                break;
            }
            std::hint::spin_loop();
        }
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        loop {
            v = self.word.load(Ordering::SeqCst);
            if cond(v) {
                break;
            }
            self.sleeps.fetch_add(1, Ordering::Relaxed);
            futex_wait(&self.word, v);
        }
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
        std::sync::atomic::fence(Ordering::Acquire);
        v
    }

    /// Wake every sleeper, after the caller changed `word` (SeqCst).
    #[inline]
    pub fn notify_all(&self) {
        if self.sleepers.load(Ordering::SeqCst) != 0 {
            self.wakes.fetch_add(1, Ordering::Relaxed);
            futex_wake(&self.word, i32::MAX);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn ping_pong_never_loses_a_wake_up() {
        let a = Arc::new(Event::default());
        let b = Arc::new(Event::default());
        let (a2, b2) = (a.clone(), b.clone());
        let t = std::thread::spawn(move || {
            for i in 1..=20_000u32 {
                a2.wait_until(if i % 2 == 0 { 0 } else { 2_000 }, |v| v >= i);
                b2.word.store(i, Ordering::SeqCst);
                b2.notify_all();
            }
        });
        for i in 1..=20_000u32 {
            a.word.store(i, Ordering::SeqCst);
            a.notify_all();
            b.wait_until(if i % 3 == 0 { 0 } else { 1_000 }, |v| v >= i);
        }
        t.join().unwrap();
    }
}
