//! C-side counting for "no allocation, no lock on the real-time path" tests with foreign code
//! in the cycle (LV2 plugins, docs/ARCHITECTURE.md §5). Rust's `#[global_allocator]` sees only
//! Rust's allocations; a C or C++ plugin calls `malloc`/`operator new` (which libstdc++
//! implements with `malloc`) and `pthread_mutex_lock` itself. A test binary that includes
//! this file — as `#[path = "common/interpose.rs"] mod interpose;`, never from
//! `common/mod.rs`, which every test binary includes — defines those symbols, and the
//! dynamic linker binds every shared library's calls to them, because GNU ld puts a symbol the executable defines into its
//! dynamic symbol table when a shared library in the link also defines it (libc does) — no
//! `--export-dynamic`, no build script. [`install`] checks that this really happened.
//!
//! The allocation functions forward to glibc's exported `__libc_*` entry points (not
//! `dlsym`, which allocates); `pthread_mutex_lock` forwards to libc's, found once with
//! `dlsym(RTLD_NEXT)` (its alias `__pthread_mutex_lock` exists only as a compat version
//! nothing can link against).
//!
//! Counting is on every thread while [`ARMED`] is set, except threads named
//! `xrunlab-lv2-…` (an LV2 worker thread, which exists to do the non-real-time work a plugin
//! schedules); what those do is counted apart, in [`Counts::worker`]. The prefix is the name
//! src/dsp/lv2/worker.rs gives its thread: if that name changes, worker operations count as
//! the cycle path's — a false failure, never a false pass.
//!
//! Rust's `std::sync::Mutex` is a futex, not `pthread_mutex_lock`: locks taken by Rust code
//! are invisible here.
//!
//! Because every Rust allocation also goes through `malloc`, this count is a superset of
//! the counting global allocator's: C-side operations are the difference.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

extern "C" {
    fn __libc_malloc(size: usize) -> *mut c_void;
    fn __libc_calloc(n: usize, size: usize) -> *mut c_void;
    fn __libc_realloc(p: *mut c_void, size: usize) -> *mut c_void;
    fn __libc_free(p: *mut c_void);
    fn __libc_memalign(align: usize, size: usize) -> *mut c_void;
    fn __libc_valloc(size: usize) -> *mut c_void;
    fn __libc_pvalloc(size: usize) -> *mut c_void;
}

/// Count while set (see the module doc for which threads).
pub static ARMED: AtomicBool = AtomicBool::new(false);
/// `XRUNLAB_INTERPOSE_TRAP=1` (read by [`install`]): raise SIGTRAP at the first operation
/// counted inside [`counted_cycles`], so `gdb` shows who made it. Diagnosis only.
static TRAP_ASKED: AtomicBool = AtomicBool::new(false);
static TRAP: AtomicBool = AtomicBool::new(false);

/// One counter per interposed operation, per kind of thread.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Ops {
    pub malloc: usize,
    pub calloc: usize,
    pub realloc: usize,
    pub free: usize,
    pub memalign: usize,
    pub lock: usize,
}

impl Ops {
    pub fn heap(&self) -> usize {
        self.malloc + self.calloc + self.realloc + self.free + self.memalign
    }
    pub fn total(&self) -> usize {
        self.heap() + self.lock
    }
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Every counted thread but the LV2 worker threads: the cycle path.
    pub rt: Ops,
    /// LV2 worker threads.
    pub worker: Ops,
}

#[derive(Clone, Copy)]
enum Op {
    Malloc,
    Calloc,
    Realloc,
    Free,
    Memalign,
    Lock,
}

struct Bank([AtomicUsize; 6]);

impl Bank {
    const fn new() -> Bank {
        Bank([const { AtomicUsize::new(0) }; 6])
    }
    fn read(&self) -> Ops {
        let g = |i: usize| self.0[i].load(Ordering::SeqCst);
        Ops {
            malloc: g(0),
            calloc: g(1),
            realloc: g(2),
            free: g(3),
            memalign: g(4),
            lock: g(5),
        }
    }
}

static RT: Bank = Bank::new();
static WORKER: Bank = Bank::new();

/// True on an LV2 worker thread. Asked of the kernel on every counted operation (prctl: a
/// syscall, no allocation) rather than cached, so a thread counted before it named itself
/// is not misfiled.
fn on_worker_thread() -> bool {
    let mut name = [0u8; 16];
    unsafe { libc::prctl(libc::PR_GET_NAME, name.as_mut_ptr()) };
    name.starts_with(b"xrunlab-lv2-")
}

#[inline]
fn count(op: Op) {
    if !ARMED.load(Ordering::Relaxed) {
        return;
    }
    if on_worker_thread() {
        WORKER.0[op as usize].fetch_add(1, Ordering::Relaxed);
        return;
    }
    RT.0[op as usize].fetch_add(1, Ordering::Relaxed);
    if TRAP.load(Ordering::Relaxed) {
        unsafe { libc::raise(libc::SIGTRAP) };
    }
}

/// Operations counted while cycles run in `f`: as [`counted`], and where one is found the
/// diagnostic trap (see [`TRAP_ASKED`]) fires.
pub fn counted_cycles<R>(f: impl FnOnce() -> R) -> (R, Counts) {
    TRAP.store(TRAP_ASKED.load(Ordering::SeqCst), Ordering::SeqCst);
    let out = counted(f);
    TRAP.store(false, Ordering::SeqCst);
    out
}

/// Operations counted while `f` runs.
pub fn counted<R>(f: impl FnOnce() -> R) -> (R, Counts) {
    let before = Counts {
        rt: RT.read(),
        worker: WORKER.read(),
    };
    ARMED.store(true, Ordering::SeqCst);
    let r = f();
    ARMED.store(false, Ordering::SeqCst);
    let after = Counts {
        rt: RT.read(),
        worker: WORKER.read(),
    };
    let d = |a: Ops, b: Ops| Ops {
        malloc: a.malloc - b.malloc,
        calloc: a.calloc - b.calloc,
        realloc: a.realloc - b.realloc,
        free: a.free - b.free,
        memalign: a.memalign - b.memalign,
        lock: a.lock - b.lock,
    };
    (
        r,
        Counts {
            rt: d(after.rt, before.rt),
            worker: d(after.worker, before.worker),
        },
    )
}

/// Check that the interposed symbols are the ones the dynamic linker hands to shared
/// libraries: the global lookup a library's PLT entry does (executable first) must find
/// ours. Panics otherwise, so a broken interposer can never report zero. Also resolves libc's
/// `pthread_mutex_lock` before anything is counted.
pub fn install() {
    TRAP_ASKED.store(
        std::env::var("XRUNLAB_INTERPOSE_TRAP").is_ok_and(|v| v == "1"),
        Ordering::SeqCst,
    );
    real_mutex_lock();
    let ours: [(&std::ffi::CStr, usize); 9] = [
        (c"malloc", malloc as *const () as usize),
        (c"calloc", calloc as *const () as usize),
        (c"realloc", realloc as *const () as usize),
        (c"free", free as *const () as usize),
        (c"posix_memalign", posix_memalign as *const () as usize),
        (c"aligned_alloc", aligned_alloc as *const () as usize),
        (c"memalign", memalign as *const () as usize),
        (c"valloc", valloc as *const () as usize),
        (
            c"pthread_mutex_lock",
            pthread_mutex_lock as *const () as usize,
        ),
    ];
    for (name, addr) in ours {
        let found = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) } as usize;
        assert_eq!(
            found,
            addr,
            "{name:?} is not interposed: the executable does not export it (check `nm -D` on the test binary)"
        );
    }
}

type LockFn = unsafe extern "C" fn(*mut libc::pthread_mutex_t) -> c_int;
static REAL_LOCK: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());

fn real_mutex_lock() -> LockFn {
    let mut p = REAL_LOCK.load(Ordering::Acquire);
    if p.is_null() {
        // dlsym takes the loader's own lock through libc-internal calls, not through this
        // symbol, so resolving here cannot recurse.
        p = unsafe { libc::dlsym(libc::RTLD_NEXT, c"pthread_mutex_lock".as_ptr()) };
        assert!(!p.is_null(), "libc's pthread_mutex_lock not found");
        REAL_LOCK.store(p, Ordering::Release);
    }
    unsafe { std::mem::transmute::<*mut c_void, LockFn>(p) }
}

// SAFETY (all below): each forwards to glibc with the caller's arguments unchanged, so the
// contract is glibc's; counting touches only atomics and one syscall.

#[no_mangle]
pub unsafe extern "C" fn malloc(size: usize) -> *mut c_void {
    count(Op::Malloc);
    __libc_malloc(size)
}

#[no_mangle]
pub unsafe extern "C" fn calloc(n: usize, size: usize) -> *mut c_void {
    count(Op::Calloc);
    __libc_calloc(n, size)
}

#[no_mangle]
pub unsafe extern "C" fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    count(Op::Realloc);
    __libc_realloc(p, size)
}

#[no_mangle]
pub unsafe extern "C" fn reallocarray(p: *mut c_void, n: usize, size: usize) -> *mut c_void {
    count(Op::Realloc);
    match n.checked_mul(size) {
        Some(bytes) => __libc_realloc(p, bytes),
        None => {
            *libc::__errno_location() = libc::ENOMEM;
            std::ptr::null_mut()
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn free(p: *mut c_void) {
    if !p.is_null() {
        count(Op::Free);
    }
    __libc_free(p)
}

#[no_mangle]
pub unsafe extern "C" fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int {
    count(Op::Memalign);
    if !align.is_power_of_two() || !align.is_multiple_of(std::mem::size_of::<*mut c_void>()) {
        return libc::EINVAL;
    }
    let p = __libc_memalign(align, size);
    if p.is_null() && size != 0 {
        return libc::ENOMEM;
    }
    *out = p;
    0
}

#[no_mangle]
pub unsafe extern "C" fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    count(Op::Memalign);
    __libc_memalign(align, size)
}

#[no_mangle]
pub unsafe extern "C" fn memalign(align: usize, size: usize) -> *mut c_void {
    count(Op::Memalign);
    __libc_memalign(align, size)
}

#[no_mangle]
pub unsafe extern "C" fn valloc(size: usize) -> *mut c_void {
    count(Op::Memalign);
    __libc_valloc(size)
}

#[no_mangle]
pub unsafe extern "C" fn pvalloc(size: usize) -> *mut c_void {
    count(Op::Memalign);
    __libc_pvalloc(size)
}

#[no_mangle]
pub unsafe extern "C" fn pthread_mutex_lock(m: *mut libc::pthread_mutex_t) -> c_int {
    count(Op::Lock);
    real_mutex_lock()(m)
}
