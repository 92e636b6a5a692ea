//! A plugin that crashes says so (docs/ARCHITECTURE.md §5 "A plugin that crashes").
//!
//! A plugin is foreign code in our process: a null pointer or an `abort()` in it kills
//! xrunlab, and before this the user saw the shell's "Segmentation fault" and nothing else.
//! [`install`] catches SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGABRT; the handler writes one
//! line naming the plugin the crashing thread was running and what it was doing, then
//! restores the default action and re-raises, so the process still dies of the signal (exit
//! status, core dump) as it did.
//!
//! The slot the handler reads is per thread: several engine threads run different plugins
//! at once, and a fault is delivered to the thread that caused it (an `abort()` raises on the
//! calling thread too). Entering a plugin ([`enter`]) stores a pre-formatted [`Label`] and a
//! [`Phase`] in two const-initialised thread-locals (no allocation, no lock: it is done
//! around every `run` in the real-time cycle), and the returned [`Scope`] puts the previous
//! values back. The handler only reads those, copies bytes into a buffer on its stack and
//! `write(2)`s it: no allocation, lock or formatting.
//!
//! With no plugin in the slot the crash is xrunlab's own: the handler steps aside for the
//! action that was there before (Rust's, which reports a stack overflow), or the default.
//! The handler runs on the thread's alternate signal stack (`SA_ONSTACK`): Rust's runtime
//! gives the main thread and every thread it spawns one, and [`install`] makes sure the
//! calling thread has one, so a stack overflow in a plugin still gets its line.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// The signals that mean the process is dying of a fault.
const FATAL: [libc::c_int; 5] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGILL,
    libc::SIGFPE,
    libc::SIGABRT,
];

/// A plugin's name as the crash line gives it (`lv2:URI (Name)`), formatted and leaked once
/// per distinct text so that the handler can read it at any time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Label(&'static [u8]);

impl Label {
    /// The label for `text`. Interned: a load test creates thousands of instances of one
    /// plugin, and each distinct text is leaked once. Not for the real-time cycle.
    pub fn new(text: &str) -> Label {
        static INTERNED: OnceLock<Mutex<HashMap<String, &'static [u8]>>> = OnceLock::new();
        let mut map = INTERNED
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(&bytes) = map.get(text) {
            return Label(bytes);
        }
        let bytes: &'static [u8] = Box::leak(text.as_bytes().to_vec().into_boxed_slice());
        map.insert(text.to_string(), bytes);
        Label(bytes)
    }

    pub fn as_str(&self) -> &str {
        std::str::from_utf8(self.0).unwrap_or("?")
    }
}

/// What the thread was doing in the plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Phase {
    /// instantiate, connecting ports, restoring its default state, activate.
    Instantiating = 1,
    /// `run` and the worker responses delivered after it.
    Processing = 2,
    /// The LV2 worker's `work`, on the worker thread.
    Working = 3,
}

impl Phase {
    fn words(code: u8) -> &'static [u8] {
        match code {
            1 => b"while being instantiated",
            2 => b"while processing audio",
            3 => b"in its worker thread",
            _ => b"",
        }
    }
}

thread_local! {
    // Const-initialised and without a destructor: a plain TLS word, which a signal handler
    // may read and the real-time cycle may write without allocating.
    static CURRENT: Cell<Option<Label>> = const { Cell::new(None) };
    static PHASE: Cell<u8> = const { Cell::new(0) };
}

/// The plugin this thread runs until the returned scope ends. Real-time safe (two
/// thread-local stores); nests.
#[inline]
pub fn enter(label: Label, phase: Phase) -> Scope {
    let prev = (
        CURRENT.with(|c| c.replace(Some(label))),
        PHASE.with(|p| p.replace(phase as u8)),
    );
    Scope {
        prev,
        _not_send: std::marker::PhantomData,
    }
}

/// Puts the thread's previous plugin back when dropped. Stays on the thread it was made on.
#[must_use]
pub struct Scope {
    prev: (Option<Label>, u8),
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Drop for Scope {
    #[inline]
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.prev.0));
        PHASE.with(|p| p.set(self.prev.1));
    }
}

/// The plugin this thread is in, if any (for tests and messages).
pub fn current() -> Option<Label> {
    CURRENT.with(Cell::get)
}

/// The actions installed before ours, per signal of [`FATAL`], read by the handler.
static PREVIOUS: OnceLock<[libc::sigaction; FATAL.len()]> = OnceLock::new();

fn signal_name(sig: libc::c_int) -> &'static [u8] {
    match sig {
        libc::SIGSEGV => b"SIGSEGV (invalid memory access)",
        libc::SIGBUS => b"SIGBUS (bus error)",
        libc::SIGILL => b"SIGILL (illegal instruction)",
        libc::SIGFPE => b"SIGFPE (arithmetic fault)",
        libc::SIGABRT => b"SIGABRT (it aborted)",
        _ => b"a fatal signal",
    }
}

/// Appends `src` to `buf` at `*len`, as far as it fits.
fn append(buf: &mut [u8], len: &mut usize, src: &[u8]) {
    let n = src.len().min(buf.len() - *len);
    buf[*len..*len + n].copy_from_slice(&src[..n]);
    *len += n;
}

/// The crash line for `label`, `phase` and `sig`, built in `buf` without allocating;
/// returns its length.
fn crash_line(buf: &mut [u8], label: Label, phase: u8, sig: libc::c_int) -> usize {
    let mut n = 0;
    for part in [
        b"xrunlab: the plugin ".as_slice(),
        label.0,
        b" crashed with ",
        signal_name(sig),
        b" ",
        Phase::words(phase),
        b"; xrunlab dies with it and writes no result\n",
    ] {
        append(buf, &mut n, part);
    }
    // A label too long for the buffer still ends the line.
    if n == buf.len() {
        buf[n - 1] = b'\n';
    }
    n
}

/// Set `sig`'s action to `sa`.
///
/// # Safety
/// `sa` must be a valid action (a handler that is safe to run at any time, or a default).
// SAFETY: sigaction is async-signal-safe (on_fatal calls this) and only reads `sa`; the
// caller vouches that the action it installs may run at any time.
unsafe fn set_action(sig: libc::c_int, sa: &libc::sigaction) {
    libc::sigaction(sig, sa, std::ptr::null_mut());
}

fn default_action() -> libc::sigaction {
    // SAFETY: an all-zero sigaction is SIG_DFL with an empty mask and no flags.
    unsafe { std::mem::zeroed() }
}

extern "C" fn on_fatal(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // try_with: never panics, even while the thread's TLS is being torn down.
    let current = CURRENT.try_with(Cell::get).ok().flatten();
    let phase = PHASE.try_with(Cell::get).unwrap_or(0);
    let previous = PREVIOUS
        .get()
        .and_then(|p| FATAL.iter().position(|&s| s == sig).map(|i| p[i]));
    // SAFETY: write, sigaction and raise are async-signal-safe; the buffer is on this stack;
    // `info` is the kernel's siginfo for this delivery.
    unsafe {
        match (current, previous) {
            (Some(label), _) => {
                let mut buf = [0u8; 512];
                let n = crash_line(&mut buf, label, phase, sig);
                libc::write(2, buf.as_ptr().cast(), n);
                set_action(sig, &default_action());
                // Blocked while this handler runs: delivered, with the default action, as it
                // returns.
                libc::raise(sig);
            }
            (None, Some(prev))
                if prev.sa_sigaction != libc::SIG_DFL && prev.sa_sigaction != libc::SIG_IGN =>
            {
                // Not in a plugin: the handler that was there before decides (Rust's names a
                // stack overflow). A fault re-executes and reaches it with its own siginfo; a
                // signal another process sent is raised again for it.
                set_action(sig, &prev);
                if info.is_null() || (*info).si_code <= 0 {
                    libc::raise(sig);
                }
            }
            (None, _) => {
                set_action(sig, &default_action());
                libc::raise(sig);
            }
        }
    }
}

/// Give the calling thread an alternate signal stack if it has none (Rust's runtime gives
/// the threads it starts one; this covers a thread it did not). The stack is never freed:
/// the thread may crash at any time until it ends.
fn ensure_alt_stack() {
    // SAFETY: sigaltstack with a null new stack only reads the current one.
    unsafe {
        let mut cur: libc::stack_t = std::mem::zeroed();
        if libc::sigaltstack(std::ptr::null(), &mut cur) != 0
            || cur.ss_flags & libc::SS_DISABLE == 0
        {
            return;
        }
        let size = 64 * 1024;
        let mem = libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if mem == libc::MAP_FAILED {
            return;
        }
        let st = libc::stack_t {
            ss_sp: mem,
            ss_flags: 0,
            ss_size: size,
        };
        libc::sigaltstack(&st, std::ptr::null_mut());
    }
}

/// Install the crash handler for SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGABRT, keeping the
/// actions that were there for crashes outside plugins. Idempotent; call it early on the
/// main thread (the CLI does), before any plugin runs.
pub fn install() {
    ensure_alt_stack();
    if PREVIOUS.get().is_some() {
        return;
    }
    let mut previous = [default_action(); FATAL.len()];
    for (slot, &sig) in previous.iter_mut().zip(FATAL.iter()) {
        // SAFETY: a null new action only reads the current one into a writable sigaction.
        unsafe { libc::sigaction(sig, std::ptr::null(), slot) };
    }
    if PREVIOUS.set(previous).is_err() {
        return;
    }
    for sig in FATAL {
        // SAFETY: on_fatal only reads thread-locals and a set-once table, copies bytes on its
        // stack and calls async-signal-safe functions; sa is fully initialised.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_fatal as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            set_action(sig, &sa);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_nest_and_restore() {
        assert_eq!(current(), None);
        let a = Label::new("lv2:urn:a (A)");
        assert_eq!(Label::new("lv2:urn:a (A)"), a, "interned");
        {
            let _outer = enter(a, Phase::Instantiating);
            let b = Label::new("lv2:urn:b (B)");
            {
                let _inner = enter(b, Phase::Processing);
                assert_eq!(current(), Some(b));
                assert_eq!(PHASE.with(Cell::get), Phase::Processing as u8);
            }
            assert_eq!(current(), Some(a));
            assert_eq!(PHASE.with(Cell::get), Phase::Instantiating as u8);
        }
        assert_eq!(current(), None);
    }

    #[test]
    fn the_crash_line_names_the_plugin_and_fits_its_buffer() {
        let mut buf = [0u8; 512];
        let label = Label::new("lv2:urn:x:segv (X)");
        let n = crash_line(&mut buf, label, Phase::Processing as u8, libc::SIGSEGV);
        let line = std::str::from_utf8(&buf[..n]).unwrap();
        assert_eq!(
            line,
            "xrunlab: the plugin lv2:urn:x:segv (X) crashed with SIGSEGV (invalid memory access) \
             while processing audio; xrunlab dies with it and writes no result\n"
        );
        let long = Label::new(&"x".repeat(2000));
        let n = crash_line(&mut buf, long, 0, libc::SIGABRT);
        assert_eq!(n, buf.len());
        assert_eq!(buf[n - 1], b'\n');
    }
}
