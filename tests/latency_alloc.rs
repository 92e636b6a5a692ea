//! docs/ARCHITECTURE.md §5: the measuring loop never allocates. Counted with a global allocator: a run
//! a hundred times longer must make exactly as many allocations, so none happens per cycle.

mod common;

use common::counting::{on_all_threads, Counting};
use xrunlab::measure::latency::{measure, LatencyConfig};
use xrunlab::rt::Policy;

#[global_allocator]
static A: Counting = Counting;

fn allocations(loops: u64, busy_pct: Option<f64>) -> (usize, u64) {
    // Policy OTHER, no mlock, no DMA guard: needs no privilege, same code path.
    let cfg = LatencyConfig {
        cpus: vec![xrunlab::rt::affinity::allowed_cpus().unwrap()[0]],
        policy: Some(Policy::Other { nice: 0 }),
        interval_ns: Some(100_000),
        duration_ns: None,
        loops: Some(loops),
        dma_latency: Some(false),
        mlock: Some(false),
        // Every wake-up overflows a 1 µs histogram, so the overflow path runs too.
        hist_max_ns: 1_000,
        busy_pct,
        ..LatencyConfig::default()
    };
    let (r, n) = on_all_threads(|| measure(&cfg, &xrunlab::progress::Silent).unwrap());
    (n, r.per_cpu[0].stats.summary.count)
}

/// The number of allocations of the short and the long run, each warmed up first.
fn short_and_long(busy_pct: Option<f64>) -> (usize, usize) {
    // Warm up lazily initialised process state (thread names, TLS, ...).
    allocations(5, busy_pct);
    let (short, n_short) = allocations(20, busy_pct);
    let (long, n_long) = allocations(2_000, busy_pct);
    assert_eq!((n_short, n_long), (20, 2_000));
    (short, long)
}

// One test, not one per mode: the counting covers every thread of the process, so a second
// test running beside it in this binary would count its allocations here (CI saw 91 vs 123).
#[test]
fn the_measuring_loop_does_not_allocate_with_or_without_computing() {
    // `None`: wake-ups only. `Some(30.0)`, `--busy`: the compute records its holds in a
    // histogram allocated before the loop.
    for busy_pct in [None, Some(30.0)] {
        let (short, long) = short_and_long(busy_pct);
        // One allocation per cycle would add ~1980. The summary built after the loop may add
        // a couple when a host stall stretches the run over another second of the series
        // (seen: 27 vs 29), which is not the loop allocating.
        assert!(
            long <= short + 8,
            "allocations grew with the number of cycles (busy {busy_pct:?}): {short} for 20, \
             {long} for 2000"
        );
    }
}
