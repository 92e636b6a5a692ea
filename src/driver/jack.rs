//! The `jack` driver: the engine as a client of a JACK server (jackd2, or PipeWire through
//! `pw-jack`). The server owns the loop; its process thread is the engine's thread 0.
//!
//! Timeline. `t_ideal(k)` is the cycle start the server reports (`jack_get_cycle_times`:
//! `current_usecs`), the deadline is the next cycle start it predicts (`next_usecs`; or
//! t_ideal + P when that prediction is more than P/8 off: a DLL re-locking after a stall
//! predicted periods of 0.2–41 ms here, which would judge a normal cycle late or excuse a
//! late one), and
//! `wake` is CLOCK_MONOTONIC read first thing in the callback, so wake-up latency, end time
//! and DSP load mean what they mean on the `virtual` driver.
//!
//! What "cycle start" means differs between servers. jackd2's `current_usecs` is the
//! prediction of its delay-locked loop (filter coefficient 0.01) for this cycle's wake-up,
//! i.e. a smoothed ideal period interrupt — close to docs/ARCHITECTURE.md's `t_ideal` — while the
//! driver's actual wake is hidden; PipeWire's is its driver timer's time. A client can
//! therefore wake *before* jackd2's cycle start when the server's own timer is late. So the
//! callback also reads `jack_frames_since_cycle_start` (the real start, to one frame) and
//! uses JACK's µs timestamp only when it lies inside that bracket; otherwise t_ideal is the
//! bracket's middle and the deadline t_ideal + P (counted in `cycle_start_from_frames`).
//!
//! JACK's microsecond clock is not always CLOCK_MONOTONIC: jackd2 1.9.21 (Debian 12) reads
//! CLOCK_MONOTONIC_RAW (measured here: 239 ms apart after a day of NTP slewing, and drifting
//! by the slew rate), while pipewire-jack's `jack_get_time` is CLOCK_MONOTONIC (offset
//! within ±3 µs). So the driver measures the offset between `jack_get_time()` and
//! CLOCK_MONOTONIC every 100 ms on its non-real-time thread and the process callback adds
//! the latest value; offsets under 50 µs are read jitter and are not applied. The report
//! carries the mean and the largest offset seen.
//!
//! Cycle index k comes from the server's frame counter (`current_frames`), so cycles the
//! server ran without us (we were late and it skipped us) show up as skipped periods.
//!
//! Server xruns arrive on JACK's notification thread. The callback stores only a counter and
//! a timestamp; the process thread notices the new count after its cycle and copies its
//! short history of cycles into a preallocated slot. Matching that history with the server
//! xrun (which cycle, what cause) happens after the run, off the real-time path.

use super::signal::{InputSource, OutputSink, SinkStats};
use super::{AudioIo, CycleHandler, CycleTiming, DriverStats, StopReason, TimeBase};
use crate::engine::probe::Cause;
use crate::error::{Error, Result};
use crate::rt::clock::monotonic_ns;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The one message for every way of failing to reach a server.
pub const NO_SERVER: &str = "no JACK server running: start jackd, or run under pw-jack";

/// `--driver jack` options.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct JackConfig {
    /// Server name (`--server`); None = $JACK_DEFAULT_SERVER or "default".
    pub server: Option<String>,
    pub client_name: String,
    /// Ports to connect to our inputs (in order: in_1, in_2, …).
    pub connect_in: Vec<String>,
    /// Ports our outputs feed (out_1, out_2, …).
    pub connect_out: Vec<String>,
    /// Apply a differing `--buffer` with jack_set_buffer_size instead of refusing.
    pub set_buffer: bool,
    /// `--buffer` / `--rate` as the user gave them; None = take the server's.
    #[serde(default)]
    pub buffer_requested: Option<u32>,
    #[serde(default)]
    pub rate_requested: Option<u32>,
}

impl Default for JackConfig {
    fn default() -> Self {
        JackConfig {
            server: None,
            client_name: "xrunlab".into(),
            connect_in: Vec::new(),
            connect_out: Vec::new(),
            set_buffer: false,
            buffer_requested: None,
            rate_requested: None,
        }
    }
}

impl JackConfig {
    /// Parse `--connect in=PORT,…,out=PORT,…` into this config.
    pub fn parse_connect(&mut self, spec: &str) -> Result<()> {
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match item.split_once('=') {
                Some(("in", p)) if !p.is_empty() => self.connect_in.push(p.to_string()),
                Some(("out", p)) if !p.is_empty() => self.connect_out.push(p.to_string()),
                _ => {
                    return Err(Error::usage(format!(
                        "--connect: `{item}` is not in=PORT or out=PORT"
                    )))
                }
            }
        }
        if self.connect_in.len() > CHANNELS || self.connect_out.len() > CHANNELS {
            return Err(Error::usage(format!(
                "--connect: at most {CHANNELS} in= and {CHANNELS} out= ports (the engine is stereo)"
            )));
        }
        Ok(())
    }
}

const CHANNELS: usize = 2;
/// Cycles of history copied out per server xrun; the xrun notification can lag its cycle
/// by a period or two on a busy machine.
const HISTORY: usize = 8;
/// Server xruns kept with their cycle history; more are counted but not matched.
const MAX_XRUN_EVENTS: usize = 1024;
/// How far JACK's reported cycle start may lie outside the frame-resolution bracket of the
/// real one before it is not trusted: scheduling between the two clock reads plus rounding.
const DLL_SLACK_NS: u64 = 50_000;

/// A run of the engine inside a JACK graph: what the result's `jack` section holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JackReport {
    /// "jackd2" or "pipewire", from the loaded libjack.
    pub server: String,
    /// `jack_get_version_string()` of the loaded libjack.
    pub library_version: String,
    /// The client name the server gave us.
    pub client_name: String,
    pub rate: u32,
    pub buffer_frames: u32,
    /// The buffer size was changed with jack_set_buffer_size (`--set-buffer`) from this.
    pub buffer_set_from: Option<u32>,
    /// That original size was put back when the run ended. False when nothing was changed,
    /// or when someone else changed the size during the run (theirs is left alone).
    #[serde(default)]
    pub buffer_restored: bool,
    /// CLOCK_MONOTONIC − JACK clock, ns: mean and largest magnitude over the run's samples.
    pub clock_offset_ns: i64,
    pub clock_offset_max_abs_ns: i64,
    /// Mean of JACK's period estimate (`period_usecs`), ns.
    pub server_period_ns: f64,
    /// Cycles we woke before the cycle start JACK reported (wake-up latency clamps to 0).
    /// jackd2 reports its delay-locked loop's *estimate* of the cycle start, not the
    /// driver's actual wake-up; when the server's own timer is noisy (the dummy driver on
    /// a loaded VM) the estimate can run ahead of the real wake by hundreds of µs.
    /// PipeWire reports its driver's timer time, so this stays 0 there.
    pub wakes_before_cycle_start: u64,
    pub max_wake_before_cycle_start_ns: u64,
    /// Cycles where jack_get_cycle_times failed; their t_ideal comes from
    /// frames_since_cycle_start.
    pub cycle_time_errors: u64,
    /// Cycles whose reported cycle start (`current_usecs`) lay outside the bracket that
    /// `jack_frames_since_cycle_start` gives for the real one (± 50 µs): jackd2's DLL was
    /// not locked, and t_ideal/deadline came from the bracket (± half a frame) instead.
    pub cycle_start_from_frames: u64,
    /// The largest such disagreement, ns.
    pub cycle_start_dll_error_max_ns: u64,
    /// Cycles whose predicted next cycle start (`next_usecs`) was more than P/8 from
    /// t_ideal + P (jackd2's DLL re-locking after a stall): their deadline is t_ideal + P.
    #[serde(default)]
    pub deadline_from_period: u64,
    /// The largest such misprediction, ns.
    #[serde(default)]
    pub deadline_prediction_error_max_ns: u64,
    /// xrun callbacks from the server during the run.
    pub server_xruns: u64,
    /// Our late cycles that the server also reported. Counted per cycle: jackd2 can send
    /// several xrun callbacks for one late cycle, and each of them is listed in the events.
    pub server_xruns_matched: u64,
    /// Our xruns (deadline misses) the server did not report.
    pub xruns_not_reported_by_server: u64,
    pub server_xrun_events: Vec<ServerXrun>,
    /// `jack_cpu_load()` sampled every 100 ms: the server's DSP meter beside ours.
    pub jack_cpu_load_pct: JackLoad,
    /// Buffer size or sample rate changed during the run (the run stopped there).
    pub param_change: Option<String>,
    /// The server shut down during the run (callback, or it stopped running our cycles).
    pub server_shutdown: bool,
    /// The server stopped scheduling us without a shutdown callback (pipewire-jack does
    /// that when the daemon dies): no cycle for max(2 s, 200 periods).
    pub server_stalled: bool,
    pub connections: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JackLoad {
    pub samples: u64,
    pub mean: f64,
    pub max: f64,
}

/// One xrun the server reported, matched with our cycle records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ServerXrun {
    /// When the notification arrived, ns after the first cycle's t_ideal.
    pub at_ns: u64,
    /// The cycle of ours it belongs to (the last one started before the report).
    pub cycle: Option<u64>,
    /// That cycle missed its deadline in our own accounting.
    pub our_xrun: bool,
    pub cause: Option<Cause>,
    /// end − deadline of that cycle (negative: it was in time), ns.
    pub lateness_ns: Option<i64>,
}

/// What a cycle leaves behind for xrun matching.
#[derive(Debug, Clone, Copy, Default)]
struct Brief {
    valid: bool,
    cycle: u64,
    t_ideal_ns: u64,
    end_ns: u64,
    deadline_ns: u64,
    xrun: bool,
    cause: Option<Cause>,
}

#[derive(Clone, Copy)]
struct XrunSlot {
    at_ns: u64,
    history: [Brief; HISTORY],
}

/// State shared by the process thread, the notification thread and the waiting thread.
/// Atomics only: the notification callbacks must be async-signal-safe.
struct Shared {
    done: AtomicBool,
    shutdown: AtomicBool,
    /// New buffer size (or 0) / sample rate (or 0) the server switched to.
    new_frames: AtomicU32,
    new_rate: AtomicU32,
    server_xruns: AtomicU64,
    xrun_times: Box<[AtomicU64]>,
    clock_offset_ns: AtomicI64,
    process_tid: AtomicI32,
    /// Wake time of the cycle in progress, 0 between cycles: a cycle stuck in a plugin
    /// must not be torn down (see the teardown in `run`).
    in_cycle_ns: AtomicU64,
    /// Our process callback is running (any branch of it). jackd2's libjack stops the
    /// process thread on deactivate with pthread_cancel, and the thread's cancellation type
    /// is asynchronous: a cancel that lands inside the callback unwinds through Rust frames
    /// and aborts the process ("FATAL: exception not rethrown"). The teardown waits for the
    /// callback to be out of our code before it deactivates.
    in_callback: AtomicBool,
    /// Mirrors of the process thread's counters: if the server dies, the handler goes down
    /// with the client and these are what is left.
    cycles_done: AtomicU64,
    xruns: AtomicU64,
    skipped: AtomicU64,
    periods_elapsed: AtomicU64,
}

struct Notifications {
    sh: Arc<Shared>,
    rate: u32,
}

impl jack::NotificationHandler for Notifications {
    unsafe fn shutdown(&mut self, _status: jack::ClientStatus, _reason: &str) {
        self.sh.shutdown.store(true, Ordering::SeqCst);
    }

    fn sample_rate(&mut self, _: &jack::Client, srate: jack::Frames) -> jack::Control {
        if srate != self.rate {
            self.sh.new_rate.store(srate, Ordering::SeqCst);
        }
        jack::Control::Continue
    }

    fn xrun(&mut self, _: &jack::Client) -> jack::Control {
        let n = self.sh.server_xruns.fetch_add(1, Ordering::AcqRel) as usize;
        let t = monotonic_ns();
        let slots = &self.sh.xrun_times;
        slots[n % slots.len()].store(t, Ordering::Release);
        jack::Control::Continue
    }
}

struct Process<H: CycleHandler> {
    handler: H,
    sh: Arc<Shared>,
    ins: Vec<jack::Port<jack::AudioIn>>,
    outs: Vec<jack::Port<jack::AudioOut>>,
    /// Generated input used when our input ports are not connected, so the graph processes
    /// the same signal as on the virtual driver.
    source: Option<Box<dyn InputSource>>,
    sink: Box<dyn OutputSink>,
    in_l: Vec<f32>,
    in_r: Vec<f32>,
    frames: u32,
    rate: u32,
    periods_total: u64,
    first_frame: Option<u32>,
    first_t_ideal: u64,
    next_k: u64,
    prev_wake: u64,
    prev_end: u64,
    stats: DriverStats,
    history: [Brief; HISTORY],
    hist_pos: usize,
    xruns_seen: u64,
    xrun_slots: Vec<XrunSlot>,
    period_usecs_sum: f64,
    cycle_time_errors: u64,
    early_wakes: u64,
    max_early_ns: u64,
    dll_unlocked: u64,
    dll_error_max_ns: u64,
    deadline_from_period: u64,
    deadline_error_max_ns: u64,
}

impl<H: CycleHandler> Process<H> {
    fn note_server_xruns(&mut self) {
        let n = self.sh.server_xruns.load(Ordering::Acquire);
        while self.xruns_seen < n {
            let slots = &self.sh.xrun_times;
            let at = slots[self.xruns_seen as usize % slots.len()].load(Ordering::Acquire);
            if self.xrun_slots.len() < self.xrun_slots.capacity() {
                let mut history = [Brief::default(); HISTORY];
                for (i, h) in history.iter_mut().enumerate() {
                    *h = self.history[(self.hist_pos + i) % HISTORY];
                }
                // Capacity reserved up front: this push never allocates.
                self.xrun_slots.push(XrunSlot { at_ns: at, history });
            }
            self.xruns_seen += 1;
        }
    }
}

impl<H: CycleHandler + Send> jack::ProcessHandler for Process<H> {
    fn process(&mut self, _: &jack::Client, ps: &jack::ProcessScope) -> jack::Control {
        let wake = monotonic_ns();
        self.sh.in_callback.store(true, Ordering::SeqCst);
        let c = self.cycle(ps, wake);
        self.sh.in_callback.store(false, Ordering::SeqCst);
        c
    }

    fn buffer_size(&mut self, _: &jack::Client, size: jack::Frames) -> jack::Control {
        if size != self.frames {
            self.sh.new_frames.store(size, Ordering::SeqCst);
        }
        jack::Control::Continue
    }
}

impl<H: CycleHandler + Send> Process<H> {
    /// One process callback; `wake` was read first thing in it.
    #[inline]
    fn cycle(&mut self, ps: &jack::ProcessScope, wake: u64) -> jack::Control {
        if self.sh.process_tid.load(Ordering::Relaxed) == 0 {
            // SAFETY: gettid has no preconditions.
            let tid = unsafe { libc::gettid() };
            self.sh.process_tid.store(tid, Ordering::Relaxed);
        }
        let n = ps.n_frames();
        let stopping = self.sh.done.load(Ordering::Relaxed)
            || self.sh.shutdown.load(Ordering::Relaxed)
            || self.sh.new_frames.load(Ordering::Relaxed) != 0
            || self.sh.new_rate.load(Ordering::Relaxed) != 0;
        if stopping || n != self.frames {
            if n != self.frames {
                self.sh.new_frames.store(n, Ordering::SeqCst);
            }
            for p in self.outs.iter_mut() {
                p.as_mut_slice(ps).fill(0.0);
            }
            return jack::Control::Continue;
        }
        // Frame-resolution bracket of the server's actual cycle start, read right after wake.
        let since = ps.frames_since_cycle_start() as u64;
        let off = self.sh.clock_offset_ns.load(Ordering::Relaxed);
        let to_mono = |usecs: u64| (usecs as i64 * 1000 + off).max(0) as u64;
        let frame_ns = 1_000_000_000 / self.rate as u64;
        let period_ns = self.frames as u64 * 1_000_000_000 / self.rate as u64;
        let latest = wake.saturating_sub(since * frame_ns);
        let earliest = latest.saturating_sub(frame_ns);
        let (frame, t_ideal, deadline) = match ps.cycle_times() {
            Ok(ct) => {
                self.period_usecs_sum += ct.period_usecs as f64;
                let t = to_mono(ct.current_usecs);
                let next = to_mono(ct.next_usecs);
                if t + DLL_SLACK_NS >= earliest && t <= latest + DLL_SLACK_NS {
                    let (deadline, miss) = cycle_deadline(t, next, period_ns);
                    if let Some(m) = miss {
                        self.deadline_from_period += 1;
                        self.deadline_error_max_ns = self.deadline_error_max_ns.max(m);
                    }
                    (ct.current_frames, t, deadline)
                } else {
                    // jackd2's cycle start is its DLL's prediction, and a dummy driver on
                    // a busy VM leaves the DLL unlocked by milliseconds (seen: 3 ms ahead of
                    // the real start and drifting 30 µs per cycle). Then the start measured
                    // through frames_since_cycle_start is the truth, to ± half a frame.
                    self.dll_unlocked += 1;
                    self.dll_error_max_ns = self
                        .dll_error_max_ns
                        .max(t.abs_diff((earliest + latest) / 2));
                    let est = (earliest + latest) / 2;
                    (ct.current_frames, est, est + period_ns)
                }
            }
            Err(_) => {
                self.cycle_time_errors += 1;
                let est = (earliest + latest) / 2;
                (ps.last_frame_time(), est, est + period_ns)
            }
        };
        if wake < t_ideal {
            self.early_wakes += 1;
            self.max_early_ns = self.max_early_ns.max(t_ideal - wake);
        }
        let first = *self.first_frame.get_or_insert(frame);
        if self.stats.cycles == 0 {
            self.first_t_ideal = t_ideal;
        }
        let k = (frame.wrapping_sub(first) / self.frames) as u64;
        let k = k.max(self.next_k);
        let skipped = (k - self.next_k) as u32;
        if k >= self.periods_total {
            self.sh.done.store(true, Ordering::SeqCst);
            for p in self.outs.iter_mut() {
                p.as_mut_slice(ps).fill(0.0);
            }
            return jack::Control::Continue;
        }
        let timing = CycleTiming {
            cycle: k,
            t_ideal_ns: t_ideal,
            release_ns: t_ideal.max(self.prev_end),
            wake_ns: wake,
            deadline_ns: deadline,
            prev_wake_ns: self.prev_wake,
            skipped_before: skipped,
            time: TimeBase::Real,
        };
        let f = self.frames as usize;
        let frame_pos = k * self.frames as u64;
        self.sh.in_cycle_ns.store(wake, Ordering::Relaxed);
        let rec = {
            let (o1, o2) = self.outs.split_at_mut(1);
            let out_l = o1[0].as_mut_slice(ps);
            let out_r = o2[0].as_mut_slice(ps);
            let mut io = match self.source.as_mut() {
                Some(src) => {
                    src.fill(frame_pos, &mut self.in_l[..f], &mut self.in_r[..f]);
                    AudioIo {
                        in_l: &self.in_l[..f],
                        in_r: &self.in_r[..f],
                        out_l,
                        out_r,
                    }
                }
                None => AudioIo {
                    in_l: self.ins[0].as_slice(ps),
                    in_r: self.ins[1].as_slice(ps),
                    out_l,
                    out_r,
                },
            };
            let rec = self.handler.process_cycle(&mut io, &timing);
            self.sink.consume(frame_pos, io.out_l, io.out_r, !rec.xrun);
            rec
        };
        self.sh.in_cycle_ns.store(0, Ordering::Relaxed);
        self.stats.cycles += 1;
        self.stats.skipped_periods += skipped as u64;
        self.stats.xruns += rec.xrun as u64;
        self.stats.periods_elapsed = k + 1;
        self.next_k = k + 1;
        self.prev_wake = wake;
        self.prev_end = rec.end_ns;
        self.history[self.hist_pos] = Brief {
            valid: true,
            cycle: k,
            t_ideal_ns: rec.t_ideal_ns,
            end_ns: rec.end_ns,
            deadline_ns: rec.deadline_ns,
            xrun: rec.xrun,
            cause: rec.cause,
        };
        self.hist_pos = (self.hist_pos + 1) % HISTORY;
        self.note_server_xruns();
        self.sh
            .cycles_done
            .store(self.stats.cycles, Ordering::Relaxed);
        self.sh.xruns.store(self.stats.xruns, Ordering::Relaxed);
        self.sh
            .skipped
            .store(self.stats.skipped_periods, Ordering::Relaxed);
        self.sh
            .periods_elapsed
            .store(self.stats.periods_elapsed, Ordering::Relaxed);
        jack::Control::Continue
    }
}

/// An open (not yet active) client: the server's buffer size and rate are known, so the
/// engine can be built for them before the first cycle.
pub struct JackClient {
    client: jack::Client,
    cfg: JackConfig,
    pub rate: u32,
    pub frames: u32,
    buffer_set_from: Option<u32>,
    /// Holds the size `--set-buffer` changed, to put the original back after the run.
    control: Option<JackControl>,
    library_version: String,
    server: String,
}

/// Version string of the loaded libjack, and which server it speaks to.
fn library_identity() -> (String, String) {
    // SAFETY: RTLD_NOLOAD only returns the libjack the jack crate already loaded (or null);
    // jack_get_version_string takes no arguments and returns a static NUL-terminated string
    // in both jackd2's and PipeWire's libjack.
    let version = unsafe {
        let h = libc::dlopen(
            c"libjack.so.0".as_ptr(),
            libc::RTLD_LAZY | libc::RTLD_NOLOAD,
        );
        let mut v = String::new();
        if !h.is_null() {
            let f = libc::dlsym(h, c"jack_get_version_string".as_ptr());
            if !f.is_null() {
                let f: unsafe extern "C" fn() -> *const libc::c_char = std::mem::transmute(f);
                let p = f();
                if !p.is_null() {
                    v = std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned();
                }
            }
            libc::dlclose(h);
        }
        v
    };
    let server = if version.to_ascii_lowercase().contains("pipewire") {
        "pipewire"
    } else {
        "jackd2"
    };
    (version, server.to_string())
}

/// A cycle's deadline from the server's prediction of the next cycle start, unless that
/// is more than P/8 away from `t_ideal + P`; then `t_ideal + P` and the misprediction.
fn cycle_deadline(t_ideal: u64, next: u64, period_ns: u64) -> (u64, Option<u64>) {
    let nominal = t_ideal + period_ns;
    let miss = next.abs_diff(nominal);
    if miss <= period_ns / 8 {
        (next, None)
    } else {
        (nominal, Some(miss))
    }
}

/// libjack's messages, to stderr (never stdout, which may carry `--json`), without the one
/// jackd2's libjack prints for every external client: the jack crate always registers a
/// thread-init callback, and libjack reports that its message-buffer thread cannot run it,
/// which is not an error of ours (a grid of trials would print it once per trial).
unsafe extern "C" fn jack_message(msg: *const libc::c_char) {
    if msg.is_null() {
        return;
    }
    // SAFETY: libjack passes a NUL-terminated string valid for the call.
    let m = unsafe { std::ffi::CStr::from_ptr(msg) }.to_bytes();
    if m.starts_with(b"JackMessageBuffer::SetInitCallback") {
        return;
    }
    // While this thread opens a client the lines are held: a failed open ends in our own
    // error, and libjack's half-dozen lines about sockets and shared memory before it are
    // noise to a user who has simply not started a server.
    if OPENING.with(|o| o.get()) {
        HELD.with(|h| h.borrow_mut().push(String::from_utf8_lossy(m).into_owned()));
        return;
    }
    // The raw syscall, not libc::write: jackd2's libjack stops its threads with
    // pthread_cancel (on deactivate and close), and a cancellation taken at write(), a
    // cancellation point, would unwind through this Rust frame — the crate's own handler
    // catches that unwind and glibc aborts the process ("FATAL: exception not rethrown":
    // seen once in a load grid under the crate's default handler, which prints with
    // eprintln!). syscall() is no cancellation point and takes no lock on libjack's
    // real-time threads.
    // SAFETY: write(2) on stderr with valid buffers.
    unsafe {
        libc::syscall(libc::SYS_write, 2, m.as_ptr(), m.len());
        libc::syscall(libc::SYS_write, 2, b"\n".as_ptr(), 1usize);
    }
}

thread_local! {
    static OPENING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    static HELD: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Open a client named `name` on the configured server, never starting one. Every client
/// and probe of ours opens here, so all get the same logger, server name and errors.
pub(crate) fn connect(cfg: &JackConfig, name: &str) -> Result<jack::Client> {
    static LOGGER: std::sync::Once = std::sync::Once::new();
    // Without libjack the crate's function table panics on first use; Client::new below
    // reports the missing library instead.
    if jack::jack_sys::library().is_ok() {
        LOGGER.call_once(|| {
            jack::set_logger(jack::LoggerType::Custom {
                info: jack_message,
                error: jack_message,
            })
        });
    }
    if cfg.set_buffer && std::env::var_os("PIPEWIRE_PROPS").is_none() {
        // pipewire-jack applies jack_set_buffer_size to the calling client's own node only
        // (node.force-quantum, effective while it is active) unless the client has
        // jack.global-buffer-size, which jack.conf gives only to jack_bufsize. A buffer size
        // is a server setting here, as on jackd2: ask for the global one (the settings
        // metadata's clock.force-quantum). jackd2 ignores the variable. Written before any
        // client of ours exists, while the process is still single-threaded.
        std::env::set_var("PIPEWIRE_PROPS", "{ jack.global-buffer-size = true }");
    }
    if let Some(s) = &cfg.server {
        // The crate has no way to pass JackServerName; libjack reads this variable at
        // open time. Only written when it differs: `load` opens a client per trial while
        // its stress threads run, and an unchanged environment is one nobody races on.
        if std::env::var_os("JACK_DEFAULT_SERVER").as_deref() != Some(s.as_ref()) {
            std::env::set_var("JACK_DEFAULT_SERVER", s);
        }
    }
    OPENING.with(|o| o.set(true));
    let opened = jack::Client::new(name, jack::ClientOptions::NO_START_SERVER);
    OPENING.with(|o| o.set(false));
    let held = HELD.with(|h| std::mem::take(&mut *h.borrow_mut()));
    match opened {
        Ok((client, _status)) => {
            for m in &held {
                eprintln!("{m}");
            }
            Ok(client)
        }
        Err(jack::Error::LibraryError(m)) => Err(Error::cannot_measure(format!(
            "{NO_SERVER} (libjack could not be loaded: {m})"
        ))),
        Err(_) => Err(Error::cannot_measure(match held.first() {
            Some(why) => format!("{NO_SERVER} (libjack: {why})"),
            None => NO_SERVER.to_string(),
        })),
    }
}

/// The server's buffer size now. jackd2's clients read it from the server's shared state;
/// an inactive pipewire-jack client keeps the size it saw at open, so there a fresh client
/// is asked.
fn server_frames(client: &jack::Client) -> u32 {
    if library_identity().1 != "pipewire" {
        return client.buffer_size();
    }
    let probe = format!("{}-probe", client.name());
    match jack::Client::new(&probe, jack::ClientOptions::NO_START_SERVER) {
        Ok((c, _)) => c.buffer_size(),
        Err(_) => client.buffer_size(),
    }
}

/// Ask the server for `want` frames per period (jack_set_buffer_size) and wait until the
/// change has reached it: it arrives asynchronously (PipeWire re-negotiates the quantum),
/// and a client must not start at the old size.
fn set_buffer_size(client: &jack::Client, want: u32) -> Result<()> {
    let before = server_frames(client);
    if before == want {
        return Ok(());
    }
    client.set_buffer_size(want).map_err(|e| {
        Error::cannot_measure(format!(
            "jack_set_buffer_size({want}) failed: {e} (the server stays at {before})"
        ))
    })?;
    let t = std::time::Instant::now();
    let mut now = server_frames(client);
    while now != want && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
        now = server_frames(client);
    }
    if now == want {
        Ok(())
    } else {
        Err(Error::cannot_measure(format!(
            "asked the JACK server for {want} frames, it stays at {now}"
        )))
    }
}

/// The latency range `(min, max)` in frames that the JACK graph assigns to the port called
/// `port` (full name, e.g. `system:capture_1` or `xrunlab:out_1`), as
/// jack_port_get_latency_range reports it:
/// - `LatencyType::Capture`: how long ago the audio now at this port entered the system
///   (for `system:capture_N`, the driver's input latency);
/// - `LatencyType::Playback`: how long until audio written to this port now leaves the
///   system (for `system:playback_N`, the driver's output latency).
///
/// The values are only as complete as the graph: the server recomputes them when ports are
/// connected, so ask after connecting. An unknown port is a usage error naming it.
pub fn port_latency_range(
    client: &jack::Client,
    port: &str,
    mode: jack::LatencyType,
) -> Result<(u32, u32)> {
    let p = client
        .port_by_name(port)
        .ok_or_else(|| Error::usage(format!("no JACK port named `{port}`")))?;
    Ok(p.get_latency_range(mode))
}

/// Frames the engine adds between its input and output ports: every plugin processes the
/// period it is given within the same cycle (no look-ahead, no internal buffering), so what
/// leaves in cycle k arrived in cycle k.
pub const ENGINE_LATENCY_FRAMES: u32 = 0;

/// Combine the ranges of the connected ports on one side of the engine and add `own` frames:
/// the earliest and the latest any of them can be, shifted by what the processing adds
/// (JACK's rule for a client's latency callback). Every input reaches every output (the
/// chain mixes channels), so all ports of a side count.
fn through_latency(ranges: impl IntoIterator<Item = (u32, u32)>, own: u32) -> (u32, u32) {
    let (mut lo, mut hi, mut any) = (u32::MAX, 0u32, false);
    for (a, b) in ranges {
        lo = lo.min(a);
        hi = hi.max(b);
        any = true;
    }
    if !any {
        (lo, hi) = (0, 0);
    }
    (lo.saturating_add(own), hi.saturating_add(own))
}

/// Our ports, for JACK's latency callback. It is heap-allocated and handed to libjack as the
/// callback argument, so it must outlive the client: it is freed only after the client is
/// closed, and leaked with it when the client is abandoned.
struct LatencyPorts {
    ins: Vec<*mut jack::jack_sys::jack_port_t>,
    outs: Vec<*mut jack::jack_sys::jack_port_t>,
    own: u32,
}

/// jack_set_latency_callback's callback, on the client's notification thread (not the
/// process thread). Capture mode: our outputs carry what entered through our inputs, plus our
/// processing. Playback mode: what enters our inputs leaves through our outputs, plus our
/// processing.
unsafe extern "C" fn on_latency(
    mode: jack::jack_sys::jack_latency_callback_mode_t,
    arg: *mut libc::c_void,
) {
    // SAFETY: arg is the LatencyPorts registered with this callback, alive until the client
    // is closed (see `LatencyPorts`); the port pointers belong to that client.
    let lp = unsafe { &*(arg as *const LatencyPorts) };
    let get = |p: *mut jack::jack_sys::jack_port_t| {
        let mut r = jack::jack_sys::jack_latency_range_t { min: 0, max: 0 };
        // SAFETY: a registered port of the live client; r is a valid out-pointer.
        unsafe { jack::jack_sys::jack_port_get_latency_range(p, mode, &mut r) };
        (r.min, r.max)
    };
    let (from, to) = if mode == jack::jack_sys::JackCaptureLatency {
        (&lp.ins, &lp.outs)
    } else {
        (&lp.outs, &lp.ins)
    };
    // An unconnected port has no latency to pass on; its (0, 0) would only widen the range.
    // SAFETY: as above.
    let connected = |p: &&*mut jack::jack_sys::jack_port_t| unsafe {
        jack::jack_sys::jack_port_connected(**p) > 0
    };
    let (min, max) = through_latency(from.iter().filter(connected).map(|&p| get(p)), lp.own);
    for &p in to {
        let mut r = jack::jack_sys::jack_latency_range_t { min, max };
        // SAFETY: as above.
        unsafe { jack::jack_sys::jack_port_set_latency_range(p, mode, &mut r) };
    }
}

/// A client that only manages the server for a series of runs (`load`'s grid): reads its
/// buffer size and rate, sets the buffer size per cell, and puts the original size back
/// when dropped — after the grid, on an error, or on an interrupt. It is never activated,
/// so it is not part of the graph and costs the server nothing per cycle.
pub struct JackControl {
    client: jack::Client,
    pub rate: u32,
    /// The server's buffer size when we came.
    pub original_frames: u32,
    pub server: String,
    pub library_version: String,
    changed: bool,
}

impl JackControl {
    pub fn open(cfg: &JackConfig) -> Result<JackControl> {
        let client = connect(cfg, &format!("{}-ctl", cfg.client_name))?;
        let (library_version, server) = library_identity();
        Ok(JackControl {
            rate: client.sample_rate(),
            original_frames: client.buffer_size(),
            client,
            server,
            library_version,
            changed: false,
        })
    }

    /// The server's buffer size now.
    pub fn frames(&self) -> u32 {
        server_frames(&self.client)
    }

    /// Switch the server to `frames` per period and wait until it took effect.
    pub fn set_frames(&mut self, frames: u32) -> Result<()> {
        if frames != self.frames() {
            self.changed = true;
        }
        set_buffer_size(&self.client, frames)
    }

    /// Put the original buffer size back if we changed it; true when we had. Drop does this
    /// too, but only this call reports a failure. One attempt either way.
    pub fn restore(&mut self) -> Result<bool> {
        let changed = std::mem::take(&mut self.changed);
        if changed {
            set_buffer_size(&self.client, self.original_frames)?;
        }
        Ok(changed)
    }
}

impl Drop for JackControl {
    fn drop(&mut self) {
        if let Err(e) = self.restore() {
            eprintln!("xrunlab: warning: {e}");
        }
    }
}

/// Put back the size `--set-buffer` changed, unless someone else changed it meanwhile (the
/// run then stopped on that change, and the newer choice is theirs). True when restored.
fn restore_buffer(control: Option<JackControl>, ours: u32) -> bool {
    let Some(mut c) = control else {
        return false;
    };
    if c.frames() != ours {
        c.changed = false;
        return false;
    }
    match c.restore() {
        Ok(restored) => restored,
        Err(e) => {
            eprintln!("xrunlab: warning: {e}");
            false
        }
    }
}

impl JackClient {
    /// Connect to the server. `requested_frames` / `requested_rate` are the user's explicit
    /// `--buffer` / `--rate` (None = take the server's).
    pub fn open(
        cfg: &JackConfig,
        requested_frames: Option<u32>,
        requested_rate: Option<u32>,
    ) -> Result<JackClient> {
        let client = connect(cfg, &cfg.client_name)?;
        let (library_version, server) = library_identity();
        let rate = client.sample_rate();
        let mut frames = client.buffer_size();
        if let Some(r) = requested_rate {
            if r != rate {
                return Err(Error::usage(format!(
                    "--rate {r}: the JACK server runs at {rate} Hz (omit --rate, or restart the server at {r})"
                )));
            }
        }
        let mut buffer_set_from = None;
        let mut control = None;
        if let Some(want) = requested_frames {
            if want != frames {
                if !cfg.set_buffer {
                    return Err(Error::usage(format!(
                        "--buffer {want}: the JACK server's buffer size is {frames} (omit --buffer, or add --set-buffer to change the server's)"
                    )));
                }
                // Through a control client, which puts the original size back when the
                // run ends, fails or is interrupted (it restores on drop).
                let mut c = JackControl::open(cfg)?;
                c.set_frames(want)?;
                control = Some(c);
                buffer_set_from = Some(frames);
                frames = want;
            }
        }
        Ok(JackClient {
            client,
            cfg: cfg.clone(),
            rate,
            frames,
            buffer_set_from,
            control,
            library_version,
            server,
        })
    }

    /// The latency range of any port in the graph (ours or another client's), by its full
    /// name; see [`port_latency_range`].
    pub fn port_latency_range(&self, port: &str, mode: jack::LatencyType) -> Result<(u32, u32)> {
        port_latency_range(&self.client, port, mode)
    }

    pub fn server(&self) -> &str {
        &self.server
    }

    /// Activate with `handler` as the process callback and run until `periods_total`
    /// server periods elapsed, `stop`/a signal, a server shutdown or a buffer-size /
    /// sample-rate change. Blocks the calling (non-real-time) thread, which samples
    /// `jack_cpu_load` and the clock offset meanwhile. `on_active` gets the process
    /// thread's tid once the first cycle has run (for the watchdog).
    pub fn run<H: CycleHandler + Send + 'static>(
        self,
        handler: H,
        periods_total: u64,
        stop: &AtomicBool,
        source: Option<Box<dyn InputSource>>,
        sink: Box<dyn OutputSink>,
        on_active: &mut dyn FnMut(libc::pid_t),
    ) -> Result<(StopReason, DriverStats, JackReport)> {
        let JackClient {
            client,
            cfg,
            rate,
            frames,
            buffer_set_from,
            control,
            library_version,
            server,
        } = self;
        let sh = Arc::new(Shared {
            done: AtomicBool::new(false),
            shutdown: AtomicBool::new(false),
            new_frames: AtomicU32::new(0),
            new_rate: AtomicU32::new(0),
            server_xruns: AtomicU64::new(0),
            xrun_times: (0..MAX_XRUN_EVENTS).map(|_| AtomicU64::new(0)).collect(),
            clock_offset_ns: AtomicI64::new(0),
            process_tid: AtomicI32::new(0),
            in_cycle_ns: AtomicU64::new(0),
            in_callback: AtomicBool::new(false),
            cycles_done: AtomicU64::new(0),
            xruns: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            periods_elapsed: AtomicU64::new(0),
        });
        let mut offsets = OffsetStats::default();
        offsets.sample(&client, &sh, 1000);
        let reg = |e: jack::Error| Error::cannot_measure(format!("JACK port registration: {e}"));
        let ins = vec![
            client
                .register_port("in_1", jack::AudioIn::default())
                .map_err(reg)?,
            client
                .register_port("in_2", jack::AudioIn::default())
                .map_err(reg)?,
        ];
        let outs = vec![
            client
                .register_port("out_1", jack::AudioOut::default())
                .map_err(reg)?,
            client
                .register_port("out_2", jack::AudioOut::default())
                .map_err(reg)?,
        ];
        // Answer the server's latency questions for our ports (before activation, as
        // libjack requires of every callback).
        let latency_ports = Box::into_raw(Box::new(LatencyPorts {
            ins: ins.iter().map(|p| p.raw()).collect(),
            outs: outs.iter().map(|p| p.raw()).collect(),
            own: ENGINE_LATENCY_FRAMES,
        }));
        // SAFETY: the client is open and inactive; latency_ports stays valid until the
        // client is closed (freed below only after the teardown closed it).
        let rc = unsafe {
            jack::jack_sys::jack_set_latency_callback(
                client.raw(),
                Some(on_latency),
                latency_ports as *mut libc::c_void,
            )
        };
        if rc != 0 {
            // SAFETY: libjack refused it, so nothing else holds the pointer.
            drop(unsafe { Box::from_raw(latency_ports) });
            return Err(Error::cannot_measure(
                "JACK refused our latency callback (jack_set_latency_callback)",
            ));
        }
        let in_names: Vec<String> = ins.iter().filter_map(|p| p.name().ok()).collect();
        let out_names: Vec<String> = outs.iter().filter_map(|p| p.name().ok()).collect();
        let client_name = client.name().to_string();
        let source = if cfg.connect_in.is_empty() {
            source
        } else {
            None
        };
        let f = frames as usize;
        let process = Process {
            handler,
            sh: sh.clone(),
            ins,
            outs,
            source,
            sink,
            in_l: vec![0.0; f],
            in_r: vec![0.0; f],
            frames,
            periods_total,
            first_frame: None,
            first_t_ideal: 0,
            next_k: 0,
            prev_wake: 0,
            prev_end: 0,
            stats: DriverStats::default(),
            history: [Brief::default(); HISTORY],
            hist_pos: 0,
            xruns_seen: 0,
            xrun_slots: Vec::with_capacity(MAX_XRUN_EVENTS),
            period_usecs_sum: 0.0,
            cycle_time_errors: 0,
            early_wakes: 0,
            max_early_ns: 0,
            dll_unlocked: 0,
            dll_error_max_ns: 0,
            deadline_from_period: 0,
            deadline_error_max_ns: 0,
            rate,
        };
        let notes = Notifications {
            sh: sh.clone(),
            rate,
        };
        let active = client
            .activate_async(notes, process)
            .map_err(|e| Error::cannot_measure(format!("JACK client activation failed: {e}")))?;
        let mut connections = Vec::new();
        for (src, dst) in cfg.connect_in.iter().zip(&in_names) {
            active
                .as_client()
                .connect_ports_by_name(src, dst)
                .map_err(|e| Error::cannot_measure(format!("cannot connect {src} → {dst}: {e}")))?;
            connections.push(format!("{src} -> {dst}"));
        }
        for (src, dst) in out_names.iter().zip(&cfg.connect_out) {
            active
                .as_client()
                .connect_ports_by_name(src, dst)
                .map_err(|e| Error::cannot_measure(format!("cannot connect {src} → {dst}: {e}")))?;
            connections.push(format!("{src} -> {dst}"));
        }

        let mut load = JackLoad::default();
        let mut load_sum = 0.0;
        let mut told_tid = false;
        let mut last_sample = std::time::Instant::now();
        // pipewire-jack does not call the shutdown callback when the daemon dies; the only
        // sign is that cycles stop. A server that runs no cycle of ours for this long is
        // gone as far as the measurement is concerned. The first cycle gets longer: PipeWire
        // negotiates the graph before it schedules a new client.
        let period_ns = frames as u64 * 1_000_000_000 / rate as u64;
        let stall = Duration::from_nanos((200 * period_ns).max(2_000_000_000));
        let first_stall = Duration::from_secs(10);
        let mut last_cycles = 0;
        let mut last_progress = std::time::Instant::now();
        let mut stalled = false;
        let reason = loop {
            std::thread::sleep(Duration::from_millis(10));
            if !told_tid {
                let tid = sh.process_tid.load(Ordering::Relaxed);
                if tid != 0 {
                    on_active(tid);
                    told_tid = true;
                }
            }
            if sh.shutdown.load(Ordering::SeqCst) {
                break StopReason::Stopped;
            }
            if sh.done.load(Ordering::SeqCst) {
                break StopReason::Complete;
            }
            if sh.new_frames.load(Ordering::SeqCst) != 0 || sh.new_rate.load(Ordering::SeqCst) != 0
            {
                break StopReason::Stopped;
            }
            if stop.load(Ordering::Relaxed) || crate::rt::interrupt::requested() {
                break StopReason::Stopped;
            }
            let c = sh.cycles_done.load(Ordering::Relaxed);
            if c != last_cycles {
                last_cycles = c;
                last_progress = std::time::Instant::now();
            } else if last_progress.elapsed() > if c == 0 { first_stall } else { stall } {
                stalled = true;
                break StopReason::Stopped;
            }
            if last_sample.elapsed() >= Duration::from_millis(100) {
                last_sample = std::time::Instant::now();
                let l = active.as_client().cpu_load() as f64;
                load.samples += 1;
                load_sum += l;
                load.max = load.max.max(l);
                offsets.sample(active.as_client(), &sh, 20);
            }
        };
        if load.samples > 0 {
            load.mean = load_sum / load.samples as f64;
        }
        let shutdown = sh.shutdown.load(Ordering::SeqCst);
        let new_frames = sh.new_frames.load(Ordering::SeqCst);
        let new_rate = sh.new_rate.load(Ordering::SeqCst);
        // Stop the process callback from touching the engine before deactivating, so the
        // last cycles are not half-measured while the server tears us down.
        sh.done.store(true, Ordering::SeqCst);
        let shutdown = shutdown || stalled;
        // Deactivate only while the process thread is outside our callback (see
        // `in_callback`): a cycle in progress finishes first, and the callbacks after it see
        // `done` and return within microseconds. Seen without this wait: a load grid aborted
        // when a trial stopped in the middle of a heavy cycle. A cycle stuck for longer is
        // the case below.
        let t = std::time::Instant::now();
        while sh.in_callback.load(Ordering::SeqCst) && t.elapsed() < Duration::from_millis(150) {
            std::thread::sleep(Duration::from_micros(200));
        }
        let entered = sh.in_cycle_ns.load(Ordering::SeqCst);
        if entered != 0 && monotonic_ns().saturating_sub(entered) > 100_000_000 {
            // A cycle is stuck in the handler (the watchdog's case). libjack would
            // pthread_cancel the process thread on deactivate/close, and the forced unwind
            // through the crate's catch_unwind aborts the process before the partial result
            // is written. Abandon the client instead; the process exits right after.
            std::mem::forget(active);
            let report = JackReport {
                server,
                library_version,
                client_name,
                rate,
                buffer_frames: frames,
                buffer_set_from,
                server_xruns: sh.server_xruns.load(Ordering::SeqCst),
                jack_cpu_load_pct: load,
                server_shutdown: shutdown,
                server_stalled: stalled,
                connections,
                ..JackReport::default()
            };
            let stats = DriverStats {
                cycles: sh.cycles_done.load(Ordering::SeqCst),
                xruns: sh.xruns.load(Ordering::SeqCst),
                skipped_periods: sh.skipped.load(Ordering::SeqCst),
                periods_elapsed: sh.periods_elapsed.load(Ordering::SeqCst),
                sink: SinkStats::default(),
            };
            return Ok((StopReason::Stopped, stats, report));
        }
        // Tearing down a client whose server died can block in libjack; do it on a helper
        // thread and give up on it (and on the handler it holds) after a bound.
        let (tx, rx) = std::sync::mpsc::channel();
        let teardown = std::thread::Builder::new()
            .name("xr-jack-close".into())
            .spawn(move || {
                let p = if shutdown {
                    drop(active);
                    None
                } else {
                    active.deactivate().ok().map(|(_c, _n, p)| p)
                };
                let _ = tx.send(p);
            })
            .map_err(|e| Error::io("spawn the JACK teardown thread", e))?;
        let process = match rx.recv_timeout(Duration::from_secs(3)) {
            Ok(p) => {
                let _ = teardown.join();
                // SAFETY: the client is closed, so libjack calls on_latency no more.
                drop(unsafe { Box::from_raw(latency_ports) });
                p
            }
            // The client may still call back into latency_ports: leave it allocated.
            Err(_) => None,
        };
        let buffer_restored = if shutdown {
            // Closing a client of a dead server can block in libjack; nothing to restore.
            std::mem::forget(control);
            false
        } else {
            restore_buffer(control, frames)
        };
        let param_change = match (new_frames, new_rate) {
            (0, 0) => None,
            (f2, 0) => Some(format!("buffer size changed from {frames} to {f2} frames")),
            (0, r2) => Some(format!("sample rate changed from {rate} to {r2} Hz")),
            (f2, r2) => Some(format!(
                "buffer size changed from {frames} to {f2} and sample rate from {rate} to {r2}"
            )),
        };
        let mut report = JackReport {
            server_stalled: stalled,
            server,
            library_version,
            client_name,
            rate,
            buffer_frames: frames,
            buffer_set_from,
            buffer_restored,
            clock_offset_ns: offsets.mean(),
            clock_offset_max_abs_ns: offsets.max_abs,
            server_period_ns: 0.0,
            server_xruns: sh.server_xruns.load(Ordering::SeqCst),
            jack_cpu_load_pct: load,
            param_change,
            server_shutdown: shutdown,
            connections,
            ..JackReport::default()
        };
        let stats = match process {
            Some(p) => {
                let mut stats = p.stats;
                stats.sink = p.sink.stats();
                report.server_period_ns = if stats.cycles > 0 {
                    p.period_usecs_sum * 1000.0 / stats.cycles as f64
                } else {
                    0.0
                };
                report.wakes_before_cycle_start = p.early_wakes;
                report.max_wake_before_cycle_start_ns = p.max_early_ns;
                report.cycle_time_errors = p.cycle_time_errors;
                report.cycle_start_from_frames = p.dll_unlocked;
                report.cycle_start_dll_error_max_ns = p.dll_error_max_ns;
                report.deadline_from_period = p.deadline_from_period;
                report.deadline_prediction_error_max_ns = p.deadline_error_max_ns;
                match_xruns(&p.xrun_slots, p.first_t_ideal, &mut report);
                // Reports that arrived after our last cycle (while the client was torn
                // down) have no cycle to match; list them so every report appears once.
                let total = sh.server_xruns.load(Ordering::SeqCst);
                report.server_xruns = total;
                let slots = &sh.xrun_times;
                for n in p.xruns_seen..total {
                    if report.server_xrun_events.len() >= MAX_XRUN_EVENTS {
                        break;
                    }
                    let at = slots[n as usize % slots.len()].load(Ordering::Acquire);
                    report.server_xrun_events.push(ServerXrun {
                        at_ns: at.saturating_sub(p.first_t_ideal),
                        cycle: None,
                        our_xrun: false,
                        cause: None,
                        lateness_ns: None,
                    });
                }
                report.xruns_not_reported_by_server =
                    stats.xruns.saturating_sub(report.server_xruns_matched);
                stats
            }
            // The handler went down with the client; only the counters that live in the
            // shared state survive. The engine's own records (already collected) carry
            // the rest.
            None => DriverStats {
                cycles: sh.cycles_done.load(Ordering::SeqCst),
                xruns: sh.xruns.load(Ordering::SeqCst),
                skipped_periods: sh.skipped.load(Ordering::SeqCst),
                periods_elapsed: sh.periods_elapsed.load(Ordering::SeqCst),
                sink: SinkStats::default(),
            },
        };
        Ok((reason, stats, report))
    }
}

#[derive(Default)]
struct OffsetStats {
    n: i64,
    sum: i64,
    max_abs: i64,
}

impl OffsetStats {
    /// Bracket jack_get_time() between two CLOCK_MONOTONIC reads and keep the narrowest of
    /// `tries` brackets: this thread is not real-time, and a bracket it was preempted in
    /// would put milliseconds of error into every t_ideal. The midpoint minus JACK's µs
    /// (plus half a µs for its truncation) is the offset to add to JACK times. A sample
    /// whose best bracket is still wider than 20 µs is dropped.
    fn sample(&mut self, client: &jack::Client, sh: &Shared, tries: usize) {
        let mut best: Option<(u64, i64)> = None;
        for _ in 0..tries {
            let a = monotonic_ns();
            let j = client.time();
            let b = monotonic_ns();
            let width = b - a;
            if best.is_none_or(|(w, _)| width < w) {
                best = Some((width, ((a + b) / 2) as i64 - (j as i64 * 1000 + 500)));
            }
            if width < 2_000 {
                break;
            }
        }
        let Some((width, off)) = best else { return };
        if width > 20_000 {
            return;
        }
        // Below 50 µs the clocks are the same and the difference is read jitter: keep 0 so
        // t_ideal is exactly the server's timestamp.
        let applied = if off.abs() < 50_000 { 0 } else { off };
        sh.clock_offset_ns.store(applied, Ordering::Relaxed);
        self.n += 1;
        self.sum += off;
        self.max_abs = self.max_abs.max(off.abs());
    }
    fn mean(&self) -> i64 {
        if self.n == 0 {
            0
        } else {
            self.sum / self.n
        }
    }
}

/// Attribute each server xrun to the last of our cycles that started before it was
/// reported, preferring a cycle that missed its deadline within the history window.
fn match_xruns(slots: &[XrunSlot], t0: u64, report: &mut JackReport) {
    let mut matched_cycles: Vec<u64> = Vec::new();
    for s in slots {
        let before: Vec<&Brief> = s
            .history
            .iter()
            .filter(|b| b.valid && b.t_ideal_ns <= s.at_ns)
            .collect();
        let late = before.iter().filter(|b| b.xrun).max_by_key(|b| b.cycle);
        let pick = late.or_else(|| before.iter().max_by_key(|b| b.cycle));
        let ev = match pick {
            Some(b) => ServerXrun {
                at_ns: s.at_ns.saturating_sub(t0),
                cycle: Some(b.cycle),
                our_xrun: b.xrun,
                cause: b.cause,
                lateness_ns: Some(b.end_ns as i64 - b.deadline_ns as i64),
            },
            None => ServerXrun {
                at_ns: s.at_ns.saturating_sub(t0),
                cycle: None,
                our_xrun: false,
                cause: None,
                lateness_ns: None,
            },
        };
        if let (true, Some(c)) = (ev.our_xrun, ev.cycle) {
            if !matched_cycles.contains(&c) {
                matched_cycles.push(c);
                report.server_xruns_matched += 1;
            }
        }
        report.server_xrun_events.push(ev);
    }
}

impl JackClient {
    /// The name the server gave this client (it renames a taken one), so a caller can
    /// address the ports `run` registers (`NAME:in_1`, `NAME:out_1`, …).
    pub fn client_name(&self) -> &str {
        self.client.name()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadline_is_the_predicted_next_start_unless_the_dll_is_re_locking() {
        let p = 5_333_333;
        // A locked DLL predicts within ppm of P: its prediction is the deadline.
        assert_eq!(
            cycle_deadline(1_000, 1_000 + p + 40, p),
            (1_000 + p + 40, None)
        );
        assert_eq!(cycle_deadline(1_000, 1_000 + p - p / 8, p).1, None);
        // Seen on jackd2 after stalls: 218 µs and 41 ms "periods".
        assert_eq!(
            cycle_deadline(1_000, 1_000 + 218_000, p),
            (1_000 + p, Some(p - 218_000))
        );
        assert_eq!(
            cycle_deadline(1_000, 1_000 + 41_089_000, p),
            (1_000 + p, Some(41_089_000 - p))
        );
        // A prediction before the cycle start itself.
        assert_eq!(cycle_deadline(1_000, 0, p), (1_000 + p, Some(1_000 + p)));
    }

    #[test]
    fn latency_through_the_engine_spans_its_connected_ports() {
        assert_eq!(through_latency([], 0), (0, 0));
        assert_eq!(through_latency([], 64), (64, 64));
        assert_eq!(through_latency([(256, 256), (128, 512)], 0), (128, 512));
        assert_eq!(through_latency([(256, 256)], 32), (288, 288));
    }

    #[test]
    fn connect_spec_parses_and_rejects() {
        let mut c = JackConfig::default();
        c.parse_connect("in=system:capture_1,in=system:capture_2,out=system:playback_1")
            .unwrap();
        assert_eq!(c.connect_in, ["system:capture_1", "system:capture_2"]);
        assert_eq!(c.connect_out, ["system:playback_1"]);
        let mut c = JackConfig::default();
        assert!(c.parse_connect("system:capture_1").is_err());
        assert!(c.parse_connect("in=a,in=b,in=c").is_err());
    }

    fn brief(cycle: u64, t: u64, xrun: bool) -> Brief {
        Brief {
            valid: true,
            cycle,
            t_ideal_ns: t,
            end_ns: t + if xrun { 7_000_000 } else { 1_000_000 },
            deadline_ns: t + 5_000_000,
            xrun,
            cause: xrun.then_some(Cause::Overload),
        }
    }

    #[test]
    fn server_xruns_match_the_late_cycle_before_the_report() {
        let mut history = [Brief::default(); HISTORY];
        for (i, h) in history.iter_mut().enumerate().take(5) {
            *h = brief(10 + i as u64, 1_000_000_000 + i as u64 * 5_000_000, i == 2);
        }
        let late = XrunSlot {
            at_ns: 1_000_000_000 + 16_000_000,
            history,
        };
        let mut in_time = late;
        in_time.history[2].xrun = false;
        in_time.history[2].cause = None;
        let mut r = JackReport::default();
        match_xruns(&[late, in_time], 1_000_000_000, &mut r);
        assert_eq!(r.server_xruns_matched, 1);
        let e = &r.server_xrun_events;
        assert_eq!((e[0].cycle, e[0].our_xrun), (Some(12), true));
        assert_eq!(e[0].cause, Some(Cause::Overload));
        assert_eq!(e[0].lateness_ns, Some(2_000_000));
        // A second report of the same late cycle is listed but not counted twice.
        let mut r2 = JackReport::default();
        match_xruns(&[late, late], 1_000_000_000, &mut r2);
        assert_eq!(r2.server_xrun_events.len(), 2);
        assert_eq!(r2.server_xruns_matched, 1);
        // No late cycle of ours: the report goes to the last cycle started before it.
        assert_eq!((e[1].cycle, e[1].our_xrun), (Some(13), false));
        assert_eq!(e[1].at_ns, 16_000_000);
    }
}
