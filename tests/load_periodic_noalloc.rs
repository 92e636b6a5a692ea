//! The periodic task's job loop never allocates (DESIGN.md §5). Alone in its binary: the
//! counting allocator sees every thread, so nothing else may run while it counts.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

struct Counting;
static ALLOCS: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::SeqCst);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::SeqCst);
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: Counting = Counting;

#[test]
fn job_loop_does_not_allocate() {
    let mut spec: xrunlab::load::PeriodicSpec = "2ms/200us".parse().unwrap();
    spec.trace_jobs = 10_000;
    let t = xrunlab::load::PeriodicTask::start(spec).unwrap();
    // Past calibration and the first jobs.
    std::thread::sleep(Duration::from_millis(300));
    let before = ALLOCS.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(500));
    let after = ALLOCS.load(Ordering::SeqCst);
    let r = t.stop();
    // ~400 releases; a host stall can cut that (seen: 175), and the point here is that
    // jobs ran during the counted window, not how many.
    assert!(r.stats.jobs > 100, "{} jobs", r.stats.jobs);
    assert_eq!(after - before, 0, "allocations during ~250 jobs");
}
