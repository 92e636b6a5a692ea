//! docs/ARCHITECTURE.md §5 on the `alsa` driver: once cycles run, nothing on the driver thread
//! allocates — not the engine, not the driver's wait/status/write/delay path, not the
//! duplex capture read. The device is the ALSA `jack` plugin on a private jackd dummy
//! (see alsa_driver.rs). Counting is armed on the driver thread after a few warm-up cycles
//! and disarmed in the last one, so setup and teardown are not counted.

mod common;

use common::counting::{Counting, ALLOCS, ARMED};
use common::require;
use common::servers::{AudioServer, JackdServer};
use std::sync::atomic::{AtomicBool, Ordering};
use xrunlab::common::cycle::CycleRecord;
use xrunlab::driver::alsa::{AlsaAccess, AlsaConfig, AlsaDevice, AlsaDriver};
use xrunlab::driver::signal::{ContinuitySink, Generator, SignalKind};
use xrunlab::driver::{AudioIo, CycleHandler, CycleTiming, LoopDriver, StopReason};
use xrunlab::engine::{Engine, EngineSpec};

#[global_allocator]
static GLOBAL: Counting = Counting;

const TOTAL: u64 = 200;

struct Armed {
    engine: Engine,
    seen: u64,
}

impl CycleHandler for Armed {
    fn process_cycle(&mut self, io: &mut AudioIo<'_>, t: &CycleTiming) -> CycleRecord {
        self.seen += 1;
        if self.seen == 10 {
            ARMED.with(|a| a.set(true));
        }
        let r = self.engine.process_cycle(io, t);
        if t.cycle + 1 >= TOTAL {
            ARMED.with(|a| a.set(false));
        }
        r
    }
}

fn run_on(device: &str, access: AlsaAccess) {
    let dev = AlsaDevice::open(
        &AlsaConfig {
            device: device.into(),
            access,
        },
        48000,
        256,
        2,
    )
    .unwrap();
    let spec = EngineSpec {
        threads: 2,
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
    let mut h = Armed { engine, seen: 0 };
    let mut d = AlsaDriver::new(dev, TOTAL);
    ALLOCS.store(0, Ordering::SeqCst);
    let (reason, stats) = d.run(
        &mut h,
        &AtomicBool::new(false),
        &mut Generator::new(input, 48000, 1),
        &mut ContinuitySink::new(input, 48000),
    );
    ARMED.with(|a| a.set(false));
    let report = d.report();
    assert_eq!(reason, StopReason::Complete, "{report:?}");
    assert!(h.seen > 50, "{stats:?}");
    let n = ALLOCS.load(Ordering::SeqCst);
    // Recovering from an xrun (stop, prepare, pre-fill, restart both streams) is outside
    // the cycle path and does allocate (seen: 7 heap operations for one recovery under a
    // stalling host); the cycles themselves must not.
    let recovered = report.xruns_recovered as usize;
    if recovered == 0 {
        assert_eq!(
            n, 0,
            "{device} {access:?}: {n} heap operations in the cycle path"
        );
    } else {
        eprintln!("{device} {access:?}: {n} heap operations around {recovered} xrun recoveries");
        assert!(
            n <= 16 * recovered,
            "{device} {access:?}: {n} heap operations with only {recovered} recoveries"
        );
    }
}

#[test]
fn no_allocation_in_the_alsa_cycle_path() {
    if !require(
        common::alsa::jack_plugin().is_some(),
        "the ALSA jack plugin (apt install libasound2-plugins)",
    ) {
        return;
    }
    let s = JackdServer::start(48000, 256);
    if !require(
        s.is_ok(),
        &format!("a jackd2 dummy server: {:?}", s.as_ref().err()),
    ) {
        return;
    }
    let s = s.unwrap();
    // The counter itself works on an armed thread.
    ARMED.with(|a| a.set(true));
    std::hint::black_box(Box::new(1u64));
    ARMED.with(|a| a.set(false));
    assert!(ALLOCS.swap(0, Ordering::SeqCst) > 0);

    let dir = tempfile::tempdir().unwrap();
    let conf = common::alsa::write_conf(dir.path());
    // One test in this binary: the process environment is ours to set.
    s.apply_env_to_self();
    std::env::set_var("ALSA_CONFIG_PATH", &conf);
    run_on("xrl", AlsaAccess::Rw);
    run_on("xrlplay", AlsaAccess::Mmap);
}
