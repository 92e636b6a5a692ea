//! A counting global allocator for "no allocation on the real-time path" tests (DESIGN.md §5).
//! Each test binary that uses it declares `#[global_allocator] static A: Counting = Counting;`
//! itself; allocations are counted only on threads that armed the counter.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

pub struct Counting;

pub static ALLOCS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    pub static ARMED: Cell<bool> = const { Cell::new(false) };
}

fn count() {
    if ARMED.with(|a| a.get()) {
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
