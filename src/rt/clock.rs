//! Clocks the measurements are defined on (docs/methods.md): CLOCK_MONOTONIC for every
//! timestamp, per-thread CPU time for compute time. All values are integer nanoseconds.

/// Nanoseconds per second.
pub const NS_PER_S: u64 = 1_000_000_000;

fn read(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec; the clock ids used here always exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * NS_PER_S + ts.tv_nsec as u64
}

/// CLOCK_MONOTONIC in nanoseconds. Async-signal-safe and allocation-free.
#[inline]
pub fn monotonic_ns() -> u64 {
    read(libc::CLOCK_MONOTONIC)
}

/// CPU time consumed by the calling thread, in nanoseconds.
#[inline]
pub fn thread_cpu_ns() -> u64 {
    read(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time of another thread of this process, by its kernel thread id.
/// Returns None when the thread no longer exists.
pub fn thread_cpu_ns_of(tid: libc::pid_t) -> Option<u64> {
    // The per-thread CPU clock id encoding is the kernel's MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED).
    let clock: libc::clockid_t = (!tid << 3) | 6;
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer; an invalid clock id only yields an error return.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    (rc == 0).then(|| ts.tv_sec as u64 * NS_PER_S + ts.tv_nsec as u64)
}

/// Sleep until an absolute CLOCK_MONOTONIC time, as cyclictest does (TIMER_ABSTIME), so
/// sleeping never accumulates drift. Restarts after signal interruptions unless `stop`
/// reports that the run is being stopped.
#[inline]
pub fn sleep_until_ns(target_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (target_ns / NS_PER_S) as libc::time_t,
        tv_nsec: (target_ns % NS_PER_S) as libc::c_long,
    };
    loop {
        // SAFETY: ts is valid; remaining-time pointer may be null with TIMER_ABSTIME.
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        if rc != libc::EINTR || crate::rt::interrupt::requested() {
            return;
        }
    }
}

/// Wall-clock time as RFC 3339 text, for result timestamps only (never for measuring).
pub fn wall_clock_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// Kernel thread id of the calling thread.
pub fn gettid() -> libc::pid_t {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_advances_and_sleep_reaches_target() {
        let a = monotonic_ns();
        let target = a + 2_000_000;
        sleep_until_ns(target);
        let b = monotonic_ns();
        assert!(b >= target, "woke before the absolute target");
    }

    #[test]
    fn thread_cpu_time_of_self_matches_own_clock() {
        let tid = gettid();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_add(i * i);
        }
        std::hint::black_box(x);
        let own = thread_cpu_ns();
        let other = thread_cpu_ns_of(tid).expect("own thread exists");
        assert!(own > 0);
        // Read in sequence, so the second reading is never smaller.
        assert!(other >= own);
    }
}
