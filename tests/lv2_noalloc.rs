//! docs/ARCHITECTURE.md §5 with third-party code in the cycle: real LV2 plugins from Debian
//! packages neither allocate nor lock while cycles run. Two counters watch at once: the
//! counting global allocator (Rust's heap, as in engine_noalloc.rs) and an interposer of
//! `malloc`/`free`/…/`pthread_mutex_lock` (tests/common/interpose.rs), which sees what the
//! plugins' C and C++ code does. The interposer must first count known C-side operations
//! (positive controls), so a broken one fails the test instead of reporting zero.
//! One test function only: counting is on every thread.

mod common;
#[path = "common/interpose.rs"]
mod interpose;

use common::counting::{on_all_threads, Counting};
use interpose::Counts;
use std::ffi::c_void;
use std::hint::black_box;
use xrunlab::driver::{AudioIo, CycleHandler, CycleTiming, TimeBase};
use xrunlab::dsp::{Plugin, PluginContext};
use xrunlab::engine::{Engine, EngineSpec};
use xrunlab::rt::clock::monotonic_ns;

#[global_allocator]
static GLOBAL: Counting = Counting;

/// (URI, parameters, what it stands for): one plain C plugin with no required feature, one
/// DPF (C++) plugin needing options + urid:map, one needing the worker as well.
const PLUGINS: [(&str, &str, &str); 3] = [
    ("http://plugin.org.uk/swh-plugins/amp", "gain=-6", "swh-lv2"),
    ("urn:zamaudio:ZamComp", "", "zam-plugins"),
    ("urn:dragonfly:room", "", "dragonfly-reverb-lv2"),
];

const RATE: u32 = 48000;
const FRAMES: usize = 64;
/// Blocks run before counting: plugins may set up lazily on their first runs.
const WARM: u64 = 300;
const COUNTED: u64 = 500;

/// Rust-side heap operations and the interposer's counts while `f` runs.
fn both<R>(f: impl FnOnce() -> R) -> (R, usize, Counts) {
    let ((r, rust), c) = interpose::counted(|| on_all_threads(f));
    (r, rust, c)
}

/// As [`both`], for the cycles that must count nothing (`XRUNLAB_INTERPOSE_TRAP=1` under gdb
/// stops at the first operation found there).
/// URID map/unmap calls take the URID table's lock (a futex: neither counter sees it), so
/// they are counted by the host itself and must not happen here either.
fn both_cycles<R>(f: impl FnOnce() -> R) -> (R, usize, Counts) {
    let maps = xrunlab::dsp::lv2::features::map_calls();
    let ((r, rust), c) = interpose::counted_cycles(|| on_all_threads(f));
    let maps = xrunlab::dsp::lv2::features::map_calls() - maps;
    assert_eq!(
        maps, 0,
        "{maps} URID map/unmap calls in the cycle path (each takes the URID table's lock)"
    );
    (r, rust, c)
}

/// Noise at −20 dBFS peak, so compressor and reverb do real work (silence can take
/// shortcuts). xorshift: no allocation.
struct Noise(u32);

impl Noise {
    fn fill(&mut self, l: &mut [f32], r: &mut [f32]) {
        for (a, b) in l.iter_mut().zip(r.iter_mut()) {
            for s in [a, b] {
                self.0 ^= self.0 << 13;
                self.0 ^= self.0 >> 17;
                self.0 ^= self.0 << 5;
                *s = 0.1 * (self.0 as f32 / u32::MAX as f32 * 2.0 - 1.0);
            }
        }
    }
}

type NewFn = unsafe extern "C" fn(usize) -> *mut c_void;
type PtrFn = unsafe extern "C" fn(*mut c_void);
type LockerNewFn = unsafe extern "C" fn(*mut u8, *const c_void);
type LockerDropFn = unsafe extern "C" fn(*mut u8);

/// Symbols of libstdc++ (what C++ plugins' `new`, `delete` and mutexes go through).
struct Libstdcxx {
    new: NewFn,
    delete: PtrFn,
    /// `std::_Sp_locker::_Sp_locker(const void*)`: locks one of libstdc++'s own mutexes
    /// (those behind atomic shared_ptr operations); the destructor unlocks it.
    locker_new: LockerNewFn,
    locker_drop: LockerDropFn,
}

fn libstdcxx() -> Libstdcxx {
    unsafe {
        let h = libc::dlopen(
            c"libstdc++.so.6".as_ptr(),
            libc::RTLD_NOW | libc::RTLD_LOCAL,
        );
        assert!(
            !h.is_null(),
            "libstdc++.so.6 not found (the DPF plugins need it)"
        );
        let sym = |name: &std::ffi::CStr| {
            let p = libc::dlsym(h, name.as_ptr());
            assert!(!p.is_null(), "libstdc++ lacks {name:?}");
            p
        };
        Libstdcxx {
            new: std::mem::transmute::<*mut c_void, NewFn>(sym(c"_Znwm")),
            delete: std::mem::transmute::<*mut c_void, PtrFn>(sym(c"_ZdlPv")),
            locker_new: std::mem::transmute::<*mut c_void, LockerNewFn>(sym(
                c"_ZNSt10_Sp_lockerC1EPKv",
            )),
            locker_drop: std::mem::transmute::<*mut c_void, LockerDropFn>(sym(
                c"_ZNSt10_Sp_lockerD1Ev",
            )),
        }
    }
}

/// The interposer sees what shared libraries do, not only what this executable does.
fn positive_controls() {
    interpose::install();

    let (_, rust, c) = both(|| black_box(Box::new(1u64)));
    assert!(rust > 0, "the counting global allocator is not active");
    assert!(c.rt.malloc > 0, "Rust's allocation did not reach malloc");

    // strdup allocates inside libc.so.6, through its own PLT entry for malloc.
    let ((), _, c) = both(|| unsafe {
        // black_box: LLVM knows strdup and free, and would delete the pair.
        let p = black_box(libc::strdup(black_box(c"interposed".as_ptr())));
        assert!(!p.is_null());
        libc::free(p.cast());
    });
    assert_eq!(
        (c.rt.malloc, c.rt.free),
        (1, 1),
        "strdup's malloc inside libc was not counted: {c:?}"
    );

    // A C++ plugin's operator new/delete and std::mutex, as libstdc++ implements them.
    let cxx = libstdcxx();
    let ((), rust, c) = both(|| unsafe {
        let p = (cxx.new)(64);
        let mut locker = [0u8; 16];
        (cxx.locker_new)(locker.as_mut_ptr(), p);
        (cxx.locker_drop)(locker.as_mut_ptr());
        (cxx.delete)(p);
    });
    eprintln!("positive control, libstdc++ new + _Sp_locker + delete: {c:?}");
    assert_eq!(rust, 0);
    assert_eq!(
        (c.rt.malloc, c.rt.free),
        (1, 1),
        "operator new/delete in libstdc++ did not reach the interposed malloc/free: {c:?}"
    );
    assert!(
        c.rt.lock >= 1,
        "a mutex libstdc++ locks did not reach the interposed pthread_mutex_lock: {c:?}"
    );
}

/// `blocks` blocks of noise through `p`; every buffer exists before the call.
fn run_blocks(p: &mut dyn Plugin, noise: &mut Noise, l: &mut [f32], r: &mut [f32], blocks: u64) {
    for _ in 0..blocks {
        noise.fill(l, r);
        p.process(l, r);
    }
}

fn cycle(engine: &mut Engine, k: u64, noise: &mut Noise, bufs: &mut [Vec<f32>; 4]) -> u8 {
    let [il, ir, ol, or] = bufs;
    noise.fill(il, ir);
    let now = monotonic_ns();
    let t = CycleTiming {
        cycle: k,
        t_ideal_ns: now,
        release_ns: now,
        wake_ns: now,
        deadline_ns: now + 1_333_333,
        prev_wake_ns: 0,
        skipped_before: 0,
        time: TimeBase::Real,
    };
    let mut io = AudioIo {
        in_l: il,
        in_r: ir,
        out_l: ol,
        out_r: or,
    };
    engine.process_cycle(&mut io, &t).tracks
}

#[test]
fn lv2_plugins_neither_allocate_nor_lock_in_the_cycle() {
    let missing: Vec<String> = PLUGINS
        .iter()
        .filter(|(uri, ..)| xrunlab::dsp::lv2::describe(uri).is_err())
        .map(|(uri, _, pkg)| format!("{uri} (Debian package {pkg})"))
        .collect();
    if !common::require(
        missing.is_empty(),
        &format!(
            "LV2 plugins not installed: {} — scripts/install-deps installs them",
            missing.join(", ")
        ),
    ) {
        return;
    }
    positive_controls();

    let ctx = PluginContext {
        rate: RATE,
        max_frames: FRAMES,
    };
    let mut noise = Noise(0x1234_5678);
    let (mut l, mut r) = (vec![0f32; FRAMES], vec![0f32; FRAMES]);
    let mut failures = Vec::new();

    // Each plugin alone, so a finding names its plugin.
    for (uri, params, _) in PLUGINS {
        let (p, rust, made) = both(|| xrunlab::dsp::lv2::create(uri, params, &ctx));
        let mut p = p.unwrap_or_else(|e| panic!("{uri}: {e}"));
        // Instantiation may allocate; that it is seen is one more proof of the interposer.
        assert!(
            made.rt.heap() > rust,
            "{uri}: instantiation showed no C-side allocation ({} Rust, {made:?})",
            rust
        );
        let ((), _, warm) = both(|| run_blocks(&mut p, &mut noise, &mut l, &mut r, WARM));
        let ((), rust, c) = both_cycles(|| run_blocks(&mut p, &mut noise, &mut l, &mut r, COUNTED));
        eprintln!(
            "{uri}: instantiation {made:?}; first {WARM} blocks {warm:?}; next {COUNTED} blocks: {rust} Rust heap ops, {c:?}"
        );
        assert!(
            l.iter().chain(&r).all(|s| s.is_finite()),
            "{uri}: output is not finite"
        );
        if rust != 0 || c.rt.total() != 0 {
            failures.push(format!(
                "{uri} alone, {COUNTED} blocks: {rust} Rust heap operations, C side {:?}",
                c.rt
            ));
        }
    }

    // The three in series in an engine: 2 tracks on 2 threads, cycles through process_cycle
    // as a driver runs them.
    let chain: Vec<String> = PLUGINS
        .iter()
        .map(|(uri, params, _)| {
            if params.is_empty() {
                format!("lv2:{uri}")
            } else {
                format!("lv2:{uri}({params})")
            }
        })
        .collect();
    let spec = EngineSpec {
        threads: 2,
        ..EngineSpec::new(
            RATE,
            FRAMES,
            2,
            xrunlab::dsp::parse_chain(&chain.join(",")).unwrap(),
        )
    };
    let (mut engine, _consumer) = Engine::new(&spec).unwrap();
    let mut bufs = [
        vec![0f32; FRAMES],
        vec![0f32; FRAMES],
        vec![0f32; FRAMES],
        vec![0f32; FRAMES],
    ];
    let ((), _, warm) = both(|| {
        for k in 0..WARM {
            cycle(&mut engine, k, &mut noise, &mut bufs);
        }
    });
    let (peak, rust, c) = both_cycles(|| {
        let mut peak = 0f32;
        for k in WARM..WARM + COUNTED {
            assert_eq!(cycle(&mut engine, k, &mut noise, &mut bufs), 2);
            for s in bufs[2].iter().chain(&bufs[3]) {
                peak = peak.max(s.abs());
            }
        }
        peak
    });
    eprintln!(
        "engine ({}): first {WARM} cycles {warm:?}; next {COUNTED} cycles: {rust} Rust heap ops, {c:?}",
        chain.join(",")
    );
    assert!(
        peak.is_finite() && peak > 1e-4,
        "the chain's output should carry the noise through (peak {peak})"
    );
    if rust != 0 || c.rt.total() != 0 {
        failures.push(format!(
            "engine, {COUNTED} cycles: {rust} Rust heap operations, C side {:?}",
            c.rt
        ));
    }
    assert!(
        failures.is_empty(),
        "allocation or locking in the cycle path:\n{}",
        failures.join("\n")
    );
}
