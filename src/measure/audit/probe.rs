//! What a plugin's code does on the audit's audio thread (docs/methods.md "Plugin audit"):
//! heap operations, locks and blocking calls, counted while [`Armed`] and only on a thread
//! that [`mark_this_thread`] marked.
//!
//! The counting itself is called from the binary: `src/main.rs` defines `malloc`, `free`,
//! `pthread_mutex_lock`, `read`, `nanosleep`… (as tests/common/interpose.rs does for the
//! tests), the dynamic linker binds every plugin library's calls to them, and each calls
//! [`note`] before forwarding to libc. The library cannot define those symbols itself: every
//! test binary links it, and some define their own. When the library runs without that
//! binary (a test calling the audit directly), [`shims_present`] is false and the real-time
//! checks are skipped with that reason instead of reporting zero.
//!
//! [`note`] runs inside `malloc`: it touches only atomics and const-initialised
//! thread-locals, and the first call site of each operation is a raw `backtrace(3)` into a
//! static array, resolved to symbols (`dladdr`) after the counted run.

use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// The operations counted, by what they mean on a real-time thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum Op {
    /// malloc, calloc, realloc, posix_memalign, aligned_alloc, memalign, valloc (and C++'s
    /// `new`, which libstdc++ implements with malloc).
    Alloc = 0,
    /// free (C++'s `delete`).
    Free = 1,
    /// pthread_mutex_lock, pthread_rwlock_rdlock/wrlock (C++'s std::mutex).
    Lock = 2,
    /// pthread_cond_wait/timedwait, sem_wait/timedwait.
    Wait = 3,
    /// nanosleep, clock_nanosleep, usleep, sleep.
    Sleep = 4,
    /// read, write, poll (called directly: glibc's own stdio reaches the kernel without them).
    Io = 5,
}

pub const OPS: usize = 6;
const FRAMES: usize = 12;

static SHIMS: AtomicBool = AtomicBool::new(false);
static ARMED: AtomicBool = AtomicBool::new(false);
static COUNTS: [AtomicU64; OPS] = [const { AtomicU64::new(0) }; OPS];
static SITES: [[AtomicUsize; FRAMES]; OPS] =
    [const { [const { AtomicUsize::new(0) }; FRAMES] }; OPS];
static SITE_TAKEN: [AtomicBool; OPS] = [const { AtomicBool::new(false) }; OPS];

thread_local! {
    // Plain TLS words (const-initialised, no destructor): readable from inside malloc on any
    // thread at any time without allocating.
    static MARKED: Cell<bool> = const { Cell::new(false) };
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

extern "C" {
    fn backtrace(buffer: *mut *mut c_void, size: c_int) -> c_int;
}

/// Called once by the binary after it checked that its symbols are the ones the dynamic
/// linker hands out.
pub fn set_shims_present() {
    SHIMS.store(true, Ordering::SeqCst);
}

pub fn shims_present() -> bool {
    SHIMS.load(Ordering::SeqCst)
}

/// Count what this thread does while armed (the audit's audio thread).
pub fn mark_this_thread() {
    MARKED.with(|m| m.set(true));
    // backtrace(3) loads libgcc_s on its first call, which allocates: done here, not in a
    // counted run.
    let mut frames = [std::ptr::null_mut(); 4];
    // SAFETY: the buffer holds 4 pointers, the size given.
    unsafe { backtrace(frames.as_mut_ptr(), 4) };
}

/// Record one operation. Called from the binary's interposed functions; see the module doc.
#[inline]
pub fn note(op: Op) {
    if !ARMED.load(Ordering::Relaxed) {
        return;
    }
    let marked = MARKED.try_with(Cell::get).unwrap_or(false);
    if !marked || INSIDE.try_with(Cell::get).unwrap_or(true) {
        return;
    }
    INSIDE.with(|i| i.set(true));
    COUNTS[op as usize].fetch_add(1, Ordering::Relaxed);
    if !SITE_TAKEN[op as usize].swap(true, Ordering::Relaxed) {
        let mut frames = [std::ptr::null_mut(); FRAMES];
        // SAFETY: the buffer holds FRAMES pointers, the size given; libgcc_s was loaded by
        // mark_this_thread, and INSIDE keeps a nested malloc from coming back here.
        let n = unsafe { backtrace(frames.as_mut_ptr(), FRAMES as c_int) }.max(0) as usize;
        for (slot, f) in SITES[op as usize].iter().zip(&frames[..n.min(FRAMES)]) {
            slot.store(*f as usize, Ordering::Relaxed);
        }
    }
    INSIDE.with(|i| i.set(false));
}

/// The operations counted during one run, with the first call site of each kind.
#[derive(Debug, Clone, Default)]
pub struct Counted {
    pub counts: [u64; OPS],
    /// Per op, the first frame outside xrunlab and the C/C++ runtime, as `symbol+0xOFF (lib)`.
    pub sites: [Option<String>; OPS],
}

/// Count the marked thread's operations while `f` runs. Not re-entrant: one counted run at
/// a time (the audit child runs one).
pub fn counted<R>(f: impl FnOnce() -> R) -> (R, Counted) {
    for op in 0..OPS {
        COUNTS[op].store(0, Ordering::SeqCst);
        SITE_TAKEN[op].store(false, Ordering::SeqCst);
        for s in &SITES[op] {
            s.store(0, Ordering::SeqCst);
        }
    }
    ARMED.store(true, Ordering::SeqCst);
    let r = f();
    ARMED.store(false, Ordering::SeqCst);
    let mut out = Counted::default();
    for op in 0..OPS {
        out.counts[op] = COUNTS[op].load(Ordering::SeqCst);
        if out.counts[op] > 0 {
            let frames: Vec<usize> = SITES[op]
                .iter()
                .map(|s| s.load(Ordering::SeqCst))
                .take_while(|&a| a != 0)
                .collect();
            out.sites[op] = site_of(&frames);
        }
    }
    (r, out)
}

/// Libraries whose frames are the runtime, not the caller: the site is the first frame past
/// them and past xrunlab itself.
const RUNTIME: [&str; 6] = [
    "libc.so",
    "libstdc++.so",
    "libgcc_s.so",
    "ld-linux",
    "libpthread.so",
    "libm.so",
];

fn site_of(frames: &[usize]) -> Option<String> {
    let own = std::env::current_exe().ok();
    let mut fallback = None;
    for &pc in frames {
        let Some((lib, sym)) = resolve(pc) else {
            continue;
        };
        let ours = own
            .as_ref()
            .is_some_and(|o| std::path::Path::new(&lib) == o.as_path())
            || std::fs::canonicalize(&lib).ok() == own.as_ref().and_then(|o| o.canonicalize().ok());
        let runtime = RUNTIME.iter().any(|r| lib.contains(r));
        let text = format!(
            "{sym} ({})",
            std::path::Path::new(&lib)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or(lib.clone())
        );
        if !ours && !runtime {
            return Some(text);
        }
        if !ours && fallback.is_none() {
            fallback = Some(text);
        }
    }
    fallback
}

/// The library and nearest exported symbol (`name+0xOFF`, or the library offset when none)
/// of an address.
fn resolve(pc: usize) -> Option<(String, String)> {
    // A return address points after the call; one byte back is inside it.
    let addr = pc.checked_sub(1)?;
    // SAFETY: Dl_info is plain C data (pointers and integers): all zeroes is a valid value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the loader's tables and writes `info`.
    if unsafe { libc::dladdr(addr as *const c_void, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr returned non-null C strings owned by the loader, alive while the
    // library stays loaded (it does: the plugin instance is alive).
    let lib = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) }
        .to_string_lossy()
        .into_owned();
    let sym = if info.dli_sname.is_null() {
        format!("+{:#x}", addr - info.dli_fbase as usize)
    } else {
        // SAFETY: as above.
        let name = unsafe { std::ffi::CStr::from_ptr(info.dli_sname) }.to_string_lossy();
        format!("{name}+{:#x}", addr - info.dli_saddr as usize)
    };
    Some((lib, sym))
}

/// The thread's voluntary context switches so far (it blocked in the kernel), from
/// getrusage(RUSAGE_THREAD): what no interposer sees (a raw futex, a page fault on a file).
pub fn voluntary_switches() -> u64 {
    // SAFETY: rusage is plain C data (integers): all zeroes is a valid value.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes the struct given.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) };
    u.ru_nvcsw.max(0) as u64
}
