//! docs/ARCHITECTURE.md §5: nothing in the cycle path allocates. A counting global allocator counts
//! every allocation in the process while cycles run — on the driver thread and on the
//! workers — through the engine directly and through the virtual and sim driver loops.
//! One test function only, so no other test allocates concurrently.

mod common;

use common::counting::{on_all_threads, Counting};
use std::sync::atomic::AtomicBool;
use xrunlab::driver::signal::{ContinuitySink, Generator, SignalKind};
use xrunlab::driver::sim::{LatencyModel, SimConfig, SimDriver};
use xrunlab::driver::virtual_dev::VirtualDriver;
use xrunlab::driver::{AudioIo, CycleHandler, CycleTiming, DeviceParams, LoopDriver, TimeBase};
use xrunlab::engine::cost::CostModel;
use xrunlab::engine::{Engine, EngineSpec};
use xrunlab::rt::clock::monotonic_ns;

#[global_allocator]
static GLOBAL: Counting = Counting;

fn counted(what: &str, f: impl FnOnce()) {
    let ((), n) = on_all_threads(f);
    assert_eq!(n, 0, "{what}: {n} heap operations in the cycle path");
}

fn spec(cost: Option<CostModel>) -> EngineSpec {
    EngineSpec {
        threads: 2,
        // Pinned with stealing (the default placement): claims of other threads' tracks
        // are in the counted path.
        steal: true,
        // A tiny ring that fills up: the drop path must not allocate either.
        ring_capacity: 16,
        cost,
        // Elements switched on during the counted cycles (k = 100, 200, 300): joining must
        // not allocate either.
        ramp: Some(xrunlab::engine::Ramp {
            start: 0,
            every_ns: 100 * (64 * 1_000_000_000 / 48000),
        }),
        ..EngineSpec::new(
            48000,
            64,
            3,
            xrunlab::dsp::parse_chain("burn(5%),gain(0.5),thru").unwrap(),
        )
    }
}

#[test]
fn no_allocation_in_the_cycle_path() {
    // The counter itself works.
    let (_, n) = on_all_threads(|| std::hint::black_box(Box::new(1u64)));
    assert!(n > 0, "counting allocator is not active");

    let (mut engine, _consumer) = Engine::new(&spec(None)).unwrap();
    let (il, ir) = (vec![0.25f32; 64], vec![0.25f32; 64]);
    let (mut ol, mut or) = (vec![0f32; 64], vec![0f32; 64]);
    let mut cycle = |engine: &mut Engine, k: u64, time: TimeBase| {
        let now = monotonic_ns();
        let t = CycleTiming {
            cycle: k,
            t_ideal_ns: now,
            release_ns: now,
            wake_ns: now,
            deadline_ns: now + 1_333_333,
            prev_wake_ns: 0,
            skipped_before: 0,
            time,
        };
        let mut io = AudioIo {
            in_l: &il,
            in_r: &ir,
            out_l: &mut ol,
            out_r: &mut or,
        };
        engine.process_cycle(&mut io, &t)
    };
    for k in 0..20 {
        cycle(&mut engine, k, TimeBase::Real);
    }
    counted("engine, real time", || {
        for k in 20..520 {
            let r = cycle(&mut engine, k, TimeBase::Real);
            assert_eq!(r.tracks, 3);
            assert_eq!(r.active_clients as u64, (k / 100).min(3));
        }
        let stalled = |k: u64| k == 530 || k == 580;
        for k in 520..620 {
            // Twice the worker's core stalls for 50 ms (the sim's injected stall): thread 0
            // steals its track, and stealing must not allocate either.
            let r = cycle(
                &mut engine,
                k,
                TimeBase::Simulated {
                    extra_cpu_ns: 5,
                    extra_interference_ns: 7,
                    stall_worker_ns: if stalled(k) { 50_000_000 } else { 0 },
                },
            );
            if stalled(k) {
                assert_eq!(r.track_thread[1], 0, "cycle {k}: track 1 was not stolen");
            }
        }
    });
    // More tracks than threads (a work queue): when the worker stalls, thread 0 takes all
    // 16 tracks, one claim each, without allocating.
    let (mut many, _many_rx) = Engine::new(&EngineSpec {
        threads: 2,
        steal: true,
        ring_capacity: 16,
        ..EngineSpec::new(
            48000,
            64,
            16,
            xrunlab::dsp::parse_chain("burn(1%)").unwrap(),
        )
    })
    .unwrap();
    for k in 0..20 {
        cycle(&mut many, k, TimeBase::Real);
    }
    counted("16 tracks on 2 threads, stealing", || {
        for k in 20..220 {
            let stalled = k % 50 == 0;
            let r = cycle(
                &mut many,
                k,
                TimeBase::Simulated {
                    extra_cpu_ns: 0,
                    extra_interference_ns: 0,
                    stall_worker_ns: if stalled { 20_000_000 } else { 0 },
                },
            );
            if stalled {
                assert!(
                    r.track_thread[..16].iter().all(|&t| t == 0),
                    "cycle {k}: thread 0 did not take every track"
                );
            }
        }
    });
    drop(many);
    assert!(
        engine.monitor().dropped_records() > 0,
        "the ring should have overflowed"
    );

    let params = DeviceParams {
        rate: 48000,
        frames: 64,
        periods: 2,
    };
    let kind = SignalKind::Sine { freq_hz: 440.0 };
    let mut src = Generator::new(kind, 48000, 1);
    let mut sink = ContinuitySink::new(kind, 48000);
    let stop = AtomicBool::new(false);
    let mut vd = VirtualDriver::new(params, 150);
    counted("virtual driver loop", || {
        vd.run(&mut engine, &stop, &mut src, &mut sink);
    });
    drop(engine);

    let cost = CostModel {
        costs: vec![CostModel::parse_cost("gain=20us").unwrap()],
        overhead_ns: 1000,
    };
    let (mut engine, _c) = Engine::new(&spec(Some(cost))).unwrap();
    let cfg = SimConfig {
        latency: LatencyModel::parse("heavy:10us,10us,1.5").unwrap(),
        events: vec!["late:5:3ms".parse().unwrap()],
    };
    let mut sd = SimDriver::new(params, &cfg, 7, 5000);
    counted("sim driver loop", || {
        sd.run(&mut engine, &stop, &mut src, &mut sink);
    });
}
