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

#[test]
fn the_measuring_loop_does_not_allocate() {
    // Warm up lazily initialised process state (thread names, TLS, ...).
    allocations(5, None);
    let (short, n_short) = allocations(20, None);
    let (long, n_long) = allocations(2_000, None);
    assert_eq!((n_short, n_long), (20, 2_000));
    // One allocation per cycle would add ~1980. The summary built after the loop may add a
    // couple when a host stall stretches the run over another second of the series (seen:
    // 27 vs 29), which is not the loop allocating.
    assert!(
        long <= short + 8,
        "allocations grew with the number of cycles: {short} for 20, {long} for 2000"
    );
}

#[test]
fn computing_after_each_wake_up_does_not_allocate_either() {
    // `--busy`: the compute records its holds in a histogram allocated before the loop.
    allocations(5, Some(30.0));
    let (short, n_short) = allocations(20, Some(30.0));
    let (long, n_long) = allocations(2_000, Some(30.0));
    assert_eq!((n_short, n_long), (20, 2_000));
    // One allocation per cycle would add ~1980. The summary built after the loop may add a
    // couple when a host stall stretches the run over another second of the series (seen:
    // 27 vs 29), which is not the loop allocating.
    assert!(
        long <= short + 8,
        "allocations grew with the number of cycles: {short} for 20, {long} for 2000"
    );
}
