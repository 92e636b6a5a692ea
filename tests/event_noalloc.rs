//! docs/ARCHITECTURE.md §5 for `xrunlab event`: the cycle path (trigger read, note-on, onset search,
//! note-off, silence detection, the report through the ring) neither allocates nor frees.
//! Deterministic: the test drives the handler's cycles itself, no real time involved.

mod common;
use common::counting::{Counting, ALLOCS, ARMED};
use std::sync::atomic::Ordering;
use xrunlab::driver::{AudioIo, CycleHandler, CycleTiming, TimeBase};
use xrunlab::measure::event::{cycle_handler, Scenario};

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn trials_through_the_handler_do_not_allocate_and_start_in_the_next_cycle() {
    for scenario in [Scenario::Mono, Scenario::Poly] {
        let frames = 64usize;
        let (mut h, mut trig) = cycle_handler(scenario, 48000, frames as u32).unwrap();
        let (il, ir) = (vec![0f32; frames], vec![0f32; frames]);
        let (mut ol, mut or) = (vec![0f32; frames], vec![0f32; frames]);
        let period = 1_333_333u64;
        let cycle = |h: &mut dyn CycleHandler, k: u64, ol: &mut [f32], or: &mut [f32]| {
            let t0 = 1_000_000_000 + k * period;
            let t = CycleTiming {
                cycle: k,
                t_ideal_ns: t0,
                release_ns: t0,
                wake_ns: t0,
                deadline_ns: t0 + period,
                prev_wake_ns: 0,
                skipped_before: 0,
                time: TimeBase::Real,
            };
            let mut io = AudioIo {
                in_l: &il,
                in_r: &ir,
                out_l: ol,
                out_r: or,
            };
            ARMED.with(|a| a.set(true));
            h.process_cycle(&mut io, &t);
            ARMED.with(|a| a.set(false));
        };
        let mut triggered_at = Vec::new();
        let mut seq = 0;
        for k in 0..600u64 {
            // Trigger when the previous trial is silent again, a few cycles later.
            if trig.silent() == seq && k % 7 == 3 && seq < 5 {
                seq += 1;
                trig.trigger(seq);
                triggered_at.push(k);
            }
            cycle(&mut h, k, &mut ol, &mut or);
            if trig.rendered() < seq {
                assert!(
                    ol.iter().all(|&x| x == 0.0),
                    "{scenario:?}: sound before onset"
                );
            }
        }
        assert_eq!(
            ALLOCS.load(Ordering::Relaxed),
            0,
            "{scenario:?}: allocations"
        );
        assert_eq!((trig.rendered(), trig.silent()), (5, 5));
        let onsets = trig.onsets();
        assert_eq!(onsets.len(), 5);
        for (o, &k) in onsets.iter().zip(&triggered_at) {
            // Published before cycle k: cycle k renders it, from its second sample (phase 0
            // of a sine is 0).
            assert_eq!(o.cycle, k, "{o:?}");
            assert_eq!(o.onset_frame, 1, "{o:?}");
            assert_eq!(o.write_delay_frames, None);
        }
    }
}
