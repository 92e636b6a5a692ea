//! The JACK adapter of `watch`: a client with no ports and no process callback, so libjack
//! starts no real-time thread for it and jackd2 leaves it out of the graph it runs each
//! cycle (a client is activated in the graph only when it is "real-time": it has a process,
//! thread, sync or timebase callback). It only listens: the xrun callback, which jackd2 and
//! pipewire-jack fire on every graph xrun, and the shutdown callback.
//!
//! Both callbacks run on libjack's notification thread and only store atomics: the xrun
//! callback reads the clock, the frame time, the driver's delay and the DSP load into the
//! next slot of a fixed ring, and the watcher's loop drains the ring (a slot overwritten
//! before it was read is counted as lost, never silently dropped).

use super::types::{Adapter, ServerInfo, WallClock, WatchConfig, WatchXrun};
use crate::driver::jack::JackConfig;
use crate::error::Result;
use jack::jack_sys as j;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

/// Notifications held between two polls (100 ms): far more than a server in trouble
/// produces (jackd2 reports at most one per cycle, 187/s at 256/48000).
const CAP: usize = 1024;

#[derive(Default)]
struct Slot {
    /// n + 1 once slot holds notification n completely; 0 while it is being written.
    seq: AtomicU64,
    mono_ns: AtomicU64,
    frame: AtomicU64,
    delayed_us: AtomicU64,
    load: AtomicU64,
}

/// What the callbacks write and the loop reads.
struct Shared {
    client: AtomicPtr<j::jack_client_t>,
    gone: AtomicBool,
    written: AtomicU64,
    slots: Vec<Slot>,
}

/// Attached to one JACK server.
pub struct JackAdapter {
    // Declared first, so dropped first: closing the client stops the notification thread
    // before `shared`, which its callbacks point at, is freed.
    client: jack::Client,
    shared: Box<Shared>,
    info: ServerInfo,
    read: u64,
    wall: WallClock,
}

// SAFETY: libjack calls this with the `arg` registered below, a `Shared` that outlives the
// client (see `JackAdapter`'s field order); it only reads and stores atomics and calls
// libjack's lock-free readers of the engine's shared memory.
unsafe extern "C" fn on_xrun(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: see above: `arg` is a live `Shared`.
    let s = unsafe { &*(arg as *const Shared) };
    let mono = crate::rt::clock::monotonic_ns();
    let c = s.client.load(Ordering::Acquire);
    if c.is_null() {
        return 0;
    }
    // SAFETY: `c` is our open client; these read the server's engine control block.
    let (frame, delayed, load) = unsafe {
        (
            j::jack_frame_time(c),
            j::jack_get_xrun_delayed_usecs(c),
            j::jack_cpu_load(c),
        )
    };
    let n = s.written.load(Ordering::Relaxed);
    let slot = &s.slots[(n % CAP as u64) as usize];
    slot.seq.store(0, Ordering::Release);
    slot.mono_ns.store(mono, Ordering::Relaxed);
    slot.frame.store(frame as u64, Ordering::Relaxed);
    slot.delayed_us
        .store((delayed as f64).to_bits(), Ordering::Relaxed);
    slot.load.store((load as f64).to_bits(), Ordering::Relaxed);
    slot.seq.store(n + 1, Ordering::Release);
    s.written.store(n + 1, Ordering::Release);
    0
}

// SAFETY: as `on_xrun`: `arg` is a live `Shared`; only an atomic is stored (libjack calls
// this like a signal handler).
unsafe extern "C" fn on_shutdown(
    _code: j::jack_status_t,
    _reason: *const libc::c_char,
    arg: *mut libc::c_void,
) {
    // SAFETY: see above.
    let s = unsafe { &*(arg as *const Shared) };
    s.gone.store(true, Ordering::Release);
}

impl JackAdapter {
    /// Open a listening client on the configured server and activate it.
    pub fn attach(cfg: &WatchConfig) -> Result<JackAdapter> {
        let jcfg = JackConfig {
            server: cfg.server_name.clone(),
            ..JackConfig::default()
        };
        let client = crate::driver::jack::connect(&jcfg, "xrunlab-watch")?;
        let (version, kind) = crate::driver::jack::library_identity();
        let shared = Box::new(Shared {
            client: AtomicPtr::new(client.raw()),
            gone: AtomicBool::new(false),
            written: AtomicU64::new(0),
            slots: (0..CAP).map(|_| Slot::default()).collect(),
        });
        let arg = &*shared as *const Shared as *mut libc::c_void;
        // SAFETY: the client is open and not active; `arg` outlives it (field order above);
        // the callbacks have libjack's exact C signatures.
        let activated = unsafe {
            j::jack_set_xrun_callback(client.raw(), Some(on_xrun), arg);
            j::jack_on_info_shutdown(client.raw(), Some(on_shutdown), arg);
            j::jack_activate(client.raw())
        };
        if activated != 0 {
            return Err(crate::error::Error::no_server(format!(
                "the JACK server refused to activate the watching client (jack_activate: {activated})"
            )));
        }
        let name = cfg
            .server_name
            .clone()
            .or_else(|| std::env::var("JACK_DEFAULT_SERVER").ok())
            .unwrap_or_else(|| "default".into());
        let info = ServerInfo {
            kind,
            name,
            version,
            rate: client.sample_rate(),
            frames: client.buffer_size(),
        };
        Ok(JackAdapter {
            client,
            shared,
            info,
            read: 0,
            wall: WallClock::now(),
        })
    }
}

impl Adapter for JackAdapter {
    fn info(&self) -> ServerInfo {
        self.info.clone()
    }

    fn poll(&mut self, t0: u64, out: &mut Vec<WatchXrun>) -> (bool, u64) {
        let s = &self.shared;
        let w = s.written.load(Ordering::Acquire);
        let mut lost = 0;
        if w - self.read > CAP as u64 {
            lost += w - self.read - CAP as u64;
            self.read = w - CAP as u64;
        }
        let frames = self.info.frames.max(1) as u64;
        while self.read < w {
            let n = self.read;
            self.read += 1;
            let slot = &s.slots[(n % CAP as u64) as usize];
            let seq = slot.seq.load(Ordering::Acquire);
            let mono = slot.mono_ns.load(Ordering::Relaxed);
            let frame = slot.frame.load(Ordering::Relaxed);
            let delayed = f64::from_bits(slot.delayed_us.load(Ordering::Relaxed));
            let load = f64::from_bits(slot.load.load(Ordering::Relaxed));
            if seq != n + 1 || slot.seq.load(Ordering::Acquire) != seq {
                // Overwritten while we read it: the callback lapped us.
                lost += 1;
                continue;
            }
            out.push(WatchXrun {
                index: 0,
                at_ns: mono.saturating_sub(t0),
                wall: self.wall.format(mono),
                frame,
                cycle: frame / frames,
                delayed_us: if delayed.is_finite() { delayed } else { 0.0 },
                dsp_load_pct: if load.is_finite() { load } else { 0.0 },
                late: None,
                late_by_ns: None,
                node_run: None,
                soc_throttled: Vec::new(),
            });
        }
        (!s.gone.load(Ordering::Acquire), lost)
    }

    fn dsp_load(&self) -> f64 {
        if self.shared.gone.load(Ordering::Acquire) {
            return 0.0;
        }
        // SAFETY: our open client; reads the engine control block.
        unsafe { j::jack_cpu_load(self.client.raw()) as f64 }
    }

    fn max_delayed_us(&self) -> f64 {
        if self.shared.gone.load(Ordering::Acquire) {
            return 0.0;
        }
        // SAFETY: as above.
        let d = unsafe { j::jack_get_max_delayed_usecs(self.client.raw()) as f64 };
        if d.is_finite() {
            d
        } else {
            0.0
        }
    }
}
