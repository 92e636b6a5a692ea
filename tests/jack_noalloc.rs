//! docs/ARCHITECTURE.md §5 inside JACK: nothing on the server's process thread allocates once cycles
//! run — not the engine, not the jack driver's bookkeeping around it (cycle-time mapping,
//! xrun history, counters), not the crate's callback trampoline. The counting allocator
//! counts heap operations made on the JACK process thread only, so the test's own threads
//! (and the driver's waiting thread, which may allocate) do not disturb it.

mod common;

use common::counting::{Counting, ALLOCS, ARMED};
use common::require;
use common::servers::JackdServer;
use std::sync::atomic::{AtomicBool, Ordering};
use xrunlab::common::cycle::CycleRecord;
use xrunlab::driver::jack::{JackClient, JackConfig};
use xrunlab::driver::signal::{ContinuitySink, Generator, SignalKind};
use xrunlab::driver::{AudioIo, CycleHandler, CycleTiming, Device, Parts, RunSpec, RT_TID_WAIT};
use xrunlab::engine::{Engine, EngineSpec};
use xrunlab::rt::thread::ThreadSpec;
use xrunlab::rt::Policy;

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Arms the counter on the JACK process thread after a few warm-up cycles.
struct Marked {
    engine: Engine,
    cycles: u64,
}

impl CycleHandler for Marked {
    fn process_cycle(&mut self, io: &mut AudioIo<'_>, t: &CycleTiming) -> CycleRecord {
        self.cycles += 1;
        if self.cycles == 10 {
            ARMED.with(|a| a.set(true));
        }
        self.engine.process_cycle(io, t)
    }
}

#[test]
fn no_allocation_on_the_jack_process_thread() {
    let s = JackdServer::start(48000, 256);
    if !require(
        s.is_ok(),
        &format!("a jackd2 dummy server: {:?}", s.as_ref().err()),
    ) {
        return;
    }
    let s = s.unwrap();
    // The counter itself works on a marked thread.
    ARMED.with(|a| a.set(true));
    std::hint::black_box(Box::new(1u64));
    ARMED.with(|a| a.set(false));
    assert!(ALLOCS.swap(0, Ordering::SeqCst) > 0);

    let cfg = JackConfig {
        server: Some(s.name.clone()),
        ..JackConfig::default()
    };
    let client = JackClient::open(&cfg, None, None).unwrap();
    assert_eq!((client.rate, client.frames), (48000, 256));
    let spec = EngineSpec {
        threads: 2,
        // A tiny ring that fills up: the drop path must not allocate either.
        ring_capacity: 16,
        ..EngineSpec::new(
            48000,
            256,
            3,
            xrunlab::dsp::parse_chain("burn(5%),gain(0.5),thru").unwrap(),
        )
    };
    let (engine, _consumer) = Engine::new(&spec).unwrap();
    let input = SignalKind::Sine { freq_hz: 1000.0 };
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    // 2 s of server periods.
    let running = client
        .start(
            Parts {
                handler: Marked { engine, cycles: 0 },
                source: Generator::new(input, 48000, 1),
                sink: ContinuitySink::new(input, 48000),
            },
            RunSpec {
                periods_total: 375,
                stop,
                thread: ThreadSpec {
                    name: "xr-noalloc".into(),
                    policy: Policy::Other { nice: 0 },
                    cpus: Vec::new(),
                },
            },
        )
        .unwrap();
    running.wait_rt_tid(RT_TID_WAIT);
    let tid = running.rt_tid();
    let out = running.join().unwrap();
    let (reason, stats) = (out.reason, out.stats);
    let report = out.report.into_jack().unwrap();
    // Read at once: the process thread is gone once `join` has closed the client.
    let n = ALLOCS.load(Ordering::SeqCst);
    assert_eq!(reason, xrunlab::driver::StopReason::Complete);
    // Enough cycles ran to mean something; a host stall skips periods (seen: 295 of 375).
    assert!(stats.cycles > 100, "{stats:?}");
    assert_eq!(stats.cycles + stats.skipped_periods, stats.periods_elapsed);
    assert!(
        tid.is_some_and(|t| t > 0),
        "the process thread never showed"
    );
    assert_eq!(report.server, "jackd2");
    assert_eq!(n, 0, "{n} heap operations on the JACK process thread");
}
