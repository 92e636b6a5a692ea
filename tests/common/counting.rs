//! A counting global allocator for "no allocation on the real-time path" tests (docs/ARCHITECTURE.md §5).
//! Each test binary that uses it declares `#[global_allocator] static A: Counting = Counting;`
//! itself. Heap operations (alloc, realloc, dealloc) are counted on threads that armed
//! [`ARMED`], or on every thread but a plugin format's worker while [`ALL_THREADS`] is set —
//! the latter only in a test that is alone in its binary, since any concurrent test's
//! allocations would count too.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};

pub struct Counting;

pub static ALLOCS: AtomicUsize = AtomicUsize::new(0);

pub static ALL_THREADS: AtomicBool = AtomicBool::new(false);

thread_local! {
    pub static ARMED: Cell<bool> = const { Cell::new(false) };
    /// This thread is a plugin format's worker (LV2's `xrunlab-lv2-worker`): its work is off
    /// the real-time path by design (the interposer counts it apart), so all-thread counting
    /// leaves it out. Looked up once per thread.
    static WORKER: Cell<Option<bool>> = const { Cell::new(None) };
}

fn is_worker() -> bool {
    WORKER.with(|w| {
        *w.get().get_or_insert_with(|| {
            let mut name = [0u8; 16];
            // SAFETY: PR_GET_NAME writes at most 16 bytes, NUL-terminated, into `name`; no
            // allocation.
            unsafe { libc::prctl(libc::PR_GET_NAME, name.as_mut_ptr()) };
            name.starts_with(b"xrunlab-lv2-wor")
        })
    })
}

/// The first few threads whose heap operations were counted, so that a failure can say
/// whose they were (the test's own thread, or a plugin's or library's background thread).
static TIDS: [AtomicI32; 8] = [const { AtomicI32::new(0) }; 8];

fn count() {
    let armed = ARMED.with(|a| a.get());
    if armed || (ALL_THREADS.load(Ordering::Relaxed) && !is_worker()) {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: gettid has no preconditions and does not allocate.
        let tid = unsafe { libc::gettid() };
        for slot in &TIDS {
            match slot.compare_exchange(0, tid, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => break,
                Err(t) if t == tid => break,
                Err(_) => {}
            }
        }
    }
}

/// The threads counted since the last call, as `tid (name)` (`this thread` for the
/// caller's; a thread that has ended since shows no name), and forget them.
pub fn counted_threads() -> Vec<String> {
    // SAFETY: as in `count`.
    let me = unsafe { libc::gettid() };
    TIDS.iter()
        .map(|s| s.swap(0, Ordering::Relaxed))
        .filter(|&t| t != 0)
        .map(|t| {
            if t == me {
                return format!("{t} (this thread)");
            }
            let name = std::fs::read_to_string(format!("/proc/self/task/{t}/comm"))
                .map(|n| n.trim().to_string())
                .unwrap_or_else(|_| "ended".into());
            format!("{t} ({name})")
        })
        .collect()
}

// SAFETY: forwards to the system allocator; counting has no effect on the memory returned.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        count();
        unsafe { System.realloc(p, l, n) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        count();
        unsafe { System.dealloc(p, l) }
    }
}

/// Heap operations made on any thread while `f` runs.
pub fn on_all_threads<R>(f: impl FnOnce() -> R) -> (R, usize) {
    // Without allocating: this may run inside the interposer's counting.
    for slot in &TIDS {
        slot.store(0, Ordering::Relaxed);
    }
    let before = ALLOCS.load(Ordering::SeqCst);
    ALL_THREADS.store(true, Ordering::SeqCst);
    let r = f();
    ALL_THREADS.store(false, Ordering::SeqCst);
    (r, ALLOCS.load(Ordering::SeqCst) - before)
}
