//! docs/ARCHITECTURE.md §5: no plugin allocates in `process`, `note_on` or `note_off`. A counting
//! global allocator (this file is its own test binary) arms itself on the test thread only.

mod common;
use common::counting::{Counting, ALLOCS, ARMED};
use std::sync::atomic::Ordering;
use xrunlab::dsp::{registry, PluginContext};

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn plugins_do_not_allocate_in_process() {
    let ctx = PluginContext {
        rate: 48000,
        max_frames: 512,
    };
    let specs = [
        ("reverb-heavy", ""),
        ("reverb-light", ""),
        ("reverb", "N=2,NB=3,BSO=1"),
        ("reverb", "N=4,NB=7,BSO=7"),
        ("reverb-light", "simd=base"),
        ("sine", ""),
        ("poly", ""),
        ("gain", "0.5"),
        ("thru", ""),
    ];
    let mut plugins: Vec<_> = specs
        .iter()
        .map(|(n, p)| registry::create(n, p, &ctx).unwrap())
        .collect();
    let (mut l, mut r) = (vec![0.1f32; 512], vec![-0.1f32; 512]);
    // Sanity check that the counter works before relying on a zero.
    ARMED.with(|a| a.set(true));
    drop(std::hint::black_box(vec![1u8; 16]));
    ARMED.with(|a| a.set(false));
    assert!(
        ALLOCS.swap(0, Ordering::Relaxed) > 0,
        "counting allocator is not active"
    );

    ARMED.with(|a| a.set(true));
    for size in [512, 1, 7, 64, 65, 256, 0, 511] {
        for p in plugins.iter_mut() {
            p.note_on();
            p.process(&mut l[..size], &mut r[..size]);
            p.note_off();
            p.process(&mut l[..size], &mut r[..size]);
        }
    }
    ARMED.with(|a| a.set(false));
    assert_eq!(
        ALLOCS.load(Ordering::Relaxed),
        0,
        "a plugin allocated in process"
    );
}
