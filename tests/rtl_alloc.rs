//! docs/ARCHITECTURE.md §5: the RTL estimator neither allocates nor frees per block, hop boundaries and
//! estimates included. A counting global allocator (own test binary) counts on this thread.

mod common;
use common::counting::{Counting, ALLOCS, ARMED};
use std::sync::atomic::Ordering;
use xrunlab::measure::rtl::{Estimator, EstimatorConfig};

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn estimator_process_does_not_allocate() {
    // Run longer than the configured duration too: estimates beyond capacity are dropped,
    // never pushed into a growing vector.
    let mut est = Estimator::new(EstimatorConfig::new(48000, 2_000_000_000));
    let b = 64usize;
    let delay = 200usize;
    let mut hist = vec![0.0f32; 48000 * 5 + delay];
    let (mut inp, mut out) = (vec![0.0f32; b], vec![0.0f32; b]);
    ARMED.with(|a| a.set(true));
    let mut frame = 0usize;
    while frame + b <= 48000 * 5 {
        for i in 0..b {
            inp[i] = if frame + i >= delay {
                hist[frame + i - delay]
            } else {
                0.0
            };
        }
        est.process(frame as u64, &inp, &mut out);
        hist[frame..frame + b].copy_from_slice(&out);
        frame += b;
    }
    ARMED.with(|a| a.set(false));
    assert_eq!(ALLOCS.load(Ordering::Relaxed), 0);
    let m = est.result();
    assert!(
        (m.delay_frames.unwrap() - delay as f64).abs() < 0.01,
        "{}",
        m.message
    );
}
