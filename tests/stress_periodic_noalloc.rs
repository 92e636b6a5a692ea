//! The periodic task's job loop never allocates (docs/ARCHITECTURE.md §5). Alone in its binary: the
//! counting allocator sees every thread, so nothing else may run while it counts.

mod common;

use common::counting::{on_all_threads, Counting};
use std::time::Duration;

#[global_allocator]
static A: Counting = Counting;

#[test]
fn job_loop_does_not_allocate() {
    let mut spec: xrunlab::stress::PeriodicSpec = "2ms/200us".parse().unwrap();
    spec.trace_jobs = 10_000;
    let t = xrunlab::stress::PeriodicTask::start(spec).unwrap();
    // Past calibration and the first jobs.
    std::thread::sleep(Duration::from_millis(300));
    let ((), allocs) = on_all_threads(|| std::thread::sleep(Duration::from_millis(500)));
    let r = t.stop();
    // ~400 releases; a host stall can cut that (seen: 175), and the point here is that
    // jobs ran during the counted window, not how many.
    assert!(r.stats.jobs > 100, "{} jobs", r.stats.jobs);
    assert_eq!(allocs, 0, "allocations during ~250 jobs");
}
