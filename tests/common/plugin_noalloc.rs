//! What the no-allocation test of plugins (tests/plugins_noalloc.rs) builds on, kept apart
//! from it as the interposer is: the two counters together, positive controls that prove the
//! interposer sees C and C++ code in shared libraries, noise without allocation, and one
//! engine cycle as a driver runs it. The including test declares `mod interpose` (at
//! common/interpose.rs) and the counting global allocator.
#![allow(dead_code)]

use crate::common::counting::on_all_threads;
use crate::interpose::{self, Counts};
use std::ffi::c_void;
use std::hint::black_box;
use xrunlab::driver::{AudioIo, CycleHandler, CycleTiming, TimeBase};
use xrunlab::dsp::Plugin;
use xrunlab::engine::Engine;
use xrunlab::rt::clock::monotonic_ns;

/// Rust-side heap operations and the interposer's counts while `f` runs.
pub fn both<R>(f: impl FnOnce() -> R) -> (R, usize, Counts) {
    let ((r, rust), c) = interpose::counted(|| on_all_threads(f));
    (r, rust, c)
}

/// As [`both`], for the cycles that must count nothing (`XRUNLAB_INTERPOSE_TRAP=1` under gdb
/// stops at the first operation found there).
pub fn both_cycles<R>(f: impl FnOnce() -> R) -> (R, usize, Counts) {
    let ((r, rust), c) = interpose::counted_cycles(|| on_all_threads(f));
    if rust > 0 {
        eprintln!(
            "Rust heap operations on threads {}",
            crate::common::counting::counted_threads().join(", ")
        );
    }
    (r, rust, c)
}

/// Noise at −20 dBFS peak, so compressor and reverb do real work (silence can take
/// shortcuts). xorshift: no allocation.
pub struct Noise(pub u32);

impl Noise {
    pub fn fill(&mut self, l: &mut [f32], r: &mut [f32]) {
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
pub struct Libstdcxx {
    new: NewFn,
    delete: PtrFn,
    /// `std::_Sp_locker::_Sp_locker(const void*)`: locks one of libstdc++'s own mutexes
    /// (those behind atomic shared_ptr operations); the destructor unlocks it.
    locker_new: LockerNewFn,
    locker_drop: LockerDropFn,
}

pub fn libstdcxx() -> Libstdcxx {
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
pub fn positive_controls() {
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
pub fn run_blocks(
    p: &mut dyn Plugin,
    noise: &mut Noise,
    l: &mut [f32],
    r: &mut [f32],
    blocks: u64,
) {
    for _ in 0..blocks {
        noise.fill(l, r);
        p.process(l, r);
    }
}

pub fn cycle(engine: &mut Engine, k: u64, noise: &mut Noise, bufs: &mut [Vec<f32>; 4]) -> u8 {
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
