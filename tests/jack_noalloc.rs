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
use xrunlab::driver::{AudioIo, CycleHandler, CycleTiming};
use xrunlab::engine::{Engine, EngineSpec};

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
    let stop = AtomicBool::new(false);
    let mut tid = 0;
    // 2 s of server periods.
    let (reason, stats, report) = client
        .run(
            Marked { engine, cycles: 0 },
            375,
            &stop,
            Some(Box::new(Generator::new(input, 48000, 1))),
            Box::new(ContinuitySink::new(input, 48000)),
            &mut |t| tid = t,
        )
        .unwrap();
    // Read at once: the process thread is gone once `run` has closed the client.
    let n = ALLOCS.load(Ordering::SeqCst);
    assert_eq!(reason, xrunlab::driver::StopReason::Complete);
    // Enough cycles ran to mean something; a host stall skips periods (seen: 295 of 375).
    assert!(stats.cycles > 100, "{stats:?}");
    assert_eq!(stats.cycles + stats.skipped_periods, stats.periods_elapsed);
    assert!(tid > 0);
    assert_eq!(report.server, "jackd2");
    assert_eq!(n, 0, "{n} heap operations on the JACK process thread");
}
