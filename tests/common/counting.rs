//! A counting global allocator for "no allocation on the real-time path" tests (docs/ARCHITECTURE.md §5).
//! Each test binary that uses it declares `#[global_allocator] static A: Counting = Counting;`
//! itself. Heap operations (alloc, realloc, dealloc) are counted on threads that armed
//! [`ARMED`], or on every thread while [`ALL_THREADS`] is set — the latter only in a test that
//! is alone in its binary, since any concurrent test's allocations would count too.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

pub struct Counting;

pub static ALLOCS: AtomicUsize = AtomicUsize::new(0);

pub static ALL_THREADS: AtomicBool = AtomicBool::new(false);

thread_local! {
    pub static ARMED: Cell<bool> = const { Cell::new(false) };
}

fn count() {
    if ALL_THREADS.load(Ordering::Relaxed) || ARMED.with(|a| a.get()) {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
    }
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
    let before = ALLOCS.load(Ordering::SeqCst);
    ALL_THREADS.store(true, Ordering::SeqCst);
    let r = f();
    ALL_THREADS.store(false, Ordering::SeqCst);
    (r, ALLOCS.load(Ordering::SeqCst) - before)
}
