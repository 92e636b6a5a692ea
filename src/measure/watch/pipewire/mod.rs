//! The PipeWire adapter of `watch`: binds the daemon's `PipeWire:Interface:Profiler`
//! (module-profiler, in the default pipewire.conf) and reads its stream, one sample per
//! driver cycle with every node's signal, awake and finish times and status — what pw-top
//! shows. Binding it adds no node to the graph; it needs no root. A daemon without the
//! module is refused with how to add it: a client cannot load a module into the daemon.
//!
//! libpipewire runs our callbacks on its own (non-real-time) thread loop: they parse the
//! POD and feed the [`track::Tracker`] under a mutex the watcher's loop takes ten times a
//! second; nothing here runs in the audio graph's cycle.

pub mod threads;
pub mod track;

use super::types::{Adapter, ServerInfo, WallClock, WatchConfig, WatchResults, WatchXrun};
use crate::driver::pipewire::ffi::{
    self, CoreEvents, CoreInfo, Lib, ProfilerEvents, RegistryEvents, SpaHook, SpaPod,
};
use crate::driver::pipewire::pod;
use crate::error::{Error, Result};
use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What the callbacks share with the watcher.
struct Shared {
    lib: &'static Lib,
    registry: AtomicPtr<c_void>,
    profiler: AtomicPtr<c_void>,
    /// The profiler's listener, in [`Conn::hooks`].
    profiler_hook: *mut SpaHook,
    done_seq: AtomicI32,
    gone: AtomicBool,
    error: Mutex<Option<String>>,
    /// The daemon's name and version (core info).
    daemon: Mutex<(String, String)>,
    tracker: Mutex<track::Tracker>,
}

// SAFETY: `profiler_hook` points into the connection's boxed hooks, touched only by the
// loop thread's callbacks (under libpipewire's loop lock); the rest is atomics and mutexes.
unsafe impl Send for Shared {}
// SAFETY: as above.
unsafe impl Sync for Shared {}

struct Hooks {
    core: SpaHook,
    registry: SpaHook,
    profiler: SpaHook,
}

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

static CORE_EVENTS: CoreEvents = CoreEvents {
    version: 0,
    info: Some(on_info),
    done: Some(on_done),
    ping: None,
    error: Some(on_error),
    remove_id: None,
    bound_id: None,
    add_mem: None,
    remove_mem: None,
};

static REGISTRY_EVENTS: RegistryEvents = RegistryEvents {
    version: 0,
    global: Some(on_global),
    global_remove: None,
};

static PROFILER_EVENTS: ProfilerEvents = ProfilerEvents {
    version: 0,
    profile: Some(on_profile),
};

// SAFETY (all callbacks below): libpipewire calls them on its loop thread with the `data`
// registered with them, a `Shared` that outlives the connection (see `Conn`'s drop).
unsafe extern "C" fn on_info(data: *mut c_void, info: *const CoreInfo) {
    // SAFETY: see above; `info` is valid for the call.
    let (s, i) = unsafe { (&*(data as *const Shared), &*info) };
    // SAFETY: NUL-terminated strings of the info, valid for the call.
    let (name, version) = unsafe { (ffi::string(i.name), ffi::string(i.version)) };
    *locked(&s.daemon) = (name, version);
}

unsafe extern "C" fn on_done(data: *mut c_void, id: u32, seq: c_int) {
    // SAFETY: see above.
    let s = unsafe { &*(data as *const Shared) };
    if id == ffi::PW_ID_CORE {
        s.done_seq.store(seq, Ordering::Release);
    }
}

unsafe extern "C" fn on_error(
    data: *mut c_void,
    id: u32,
    _seq: c_int,
    res: c_int,
    msg: *const c_char,
) {
    // SAFETY: see above; `msg` is null or a string valid for the call.
    let (s, msg) = unsafe { (&*(data as *const Shared), ffi::string(msg)) };
    *locked(&s.error) = Some(format!(
        "{msg} ({})",
        std::io::Error::from_raw_os_error(-res)
    ));
    if id == ffi::PW_ID_CORE {
        s.gone.store(true, Ordering::Release);
    }
}

unsafe extern "C" fn on_global(
    data: *mut c_void,
    id: u32,
    _perms: u32,
    ty: *const c_char,
    _version: u32,
    _props: *const c_void,
) {
    // SAFETY: see above.
    let s = unsafe { &*(data as *const Shared) };
    if ty.is_null() || !s.profiler.load(Ordering::Acquire).is_null() {
        return;
    }
    // SAFETY: `ty` is a NUL-terminated type name valid for the call.
    if unsafe { std::ffi::CStr::from_ptr(ty) }.to_bytes() != ffi::PW_TYPE_INTERFACE_PROFILER {
        return;
    }
    let reg = s.registry.load(Ordering::Acquire);
    // SAFETY: `reg` is our live registry proxy (set before its listener was added); its
    // method table is `pw_registry_methods`.
    let (m, d) = unsafe { ffi::methods::<ffi::RegistryMethods>(reg) };
    let Some(bind) = m.bind else { return };
    // SAFETY: `pw_registry_bind(registry, id, type, version, 0)`, as the C macro calls it.
    let proxy = unsafe { bind(d, id, ty, ffi::PW_VERSION_PROFILER, 0) };
    if proxy.is_null() {
        return;
    }
    // SAFETY: `proxy` is the bound profiler; the hook is zeroed and lives as long as the
    // connection; the events table is static.
    unsafe {
        (s.lib.proxy_add_object_listener)(
            proxy,
            s.profiler_hook,
            &PROFILER_EVENTS as *const ProfilerEvents as *const c_void,
            data,
        )
    };
    s.profiler.store(proxy, Ordering::Release);
}

unsafe extern "C" fn on_profile(data: *mut c_void, pod: *const SpaPod) {
    // SAFETY: see above; `pod` is a POD whose header says its body's size, valid for the call.
    let (s, bytes) = unsafe {
        let len = 8 + (*pod).size as usize;
        (
            &*(data as *const Shared),
            std::slice::from_raw_parts(pod as *const u8, len),
        )
    };
    let samples = pod::samples(bytes);
    let mut t = locked(&s.tracker);
    for x in &samples {
        t.feed(x);
    }
}

/// The connection: a thread loop, a context, the core, the registry, the profiler.
struct Conn {
    lib: &'static Lib,
    tloop: *mut c_void,
    context: *mut c_void,
    core: *mut c_void,
    // Dropped after the loop is stopped and the core disconnected (see Drop).
    _hooks: Box<Hooks>,
    shared: Box<Shared>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        // SAFETY: our own objects, torn down in libpipewire's order: proxies and core under
        // the loop lock, then the loop stopped, then the context and the loop freed; no
        // callback can run after the stop, so `shared` and the hooks may go.
        unsafe {
            (self.lib.thread_loop_lock)(self.tloop);
            let p = self
                .shared
                .profiler
                .swap(std::ptr::null_mut(), Ordering::AcqRel);
            if !p.is_null() {
                (self.lib.proxy_destroy)(p);
            }
            if !self.core.is_null() {
                (self.lib.core_disconnect)(self.core);
            }
            (self.lib.thread_loop_unlock)(self.tloop);
            (self.lib.thread_loop_stop)(self.tloop);
            if !self.context.is_null() {
                (self.lib.context_destroy)(self.context);
            }
            (self.lib.thread_loop_destroy)(self.tloop);
        }
    }
}

/// Attached to one PipeWire daemon's profiler.
pub struct PipeWireAdapter {
    conn: Conn,
    info: ServerInfo,
    wall: WallClock,
}

// SAFETY: the raw pointers are libpipewire objects used only under its loop lock (or in
// Drop, after the loop stopped); the watcher owns the adapter from one thread at a time.
unsafe impl Send for PipeWireAdapter {}

/// How long attaching waits for the daemon's registry, and then for a first cycle.
const SYNC_WAIT: Duration = Duration::from_secs(3);
const FIRST_CYCLE_WAIT: Duration = Duration::from_millis(1500);

impl PipeWireAdapter {
    /// Connect to the daemon ($PIPEWIRE_REMOTE in $PIPEWIRE_RUNTIME_DIR or
    /// $XDG_RUNTIME_DIR) and bind its profiler.
    pub fn attach(_cfg: &WatchConfig) -> Result<PipeWireAdapter> {
        let lib = ffi::lib().map_err(Error::no_server)?;
        let mut hooks = Box::new(Hooks {
            core: SpaHook::zeroed(),
            registry: SpaHook::zeroed(),
            profiler: SpaHook::zeroed(),
        });
        let shared = Box::new(Shared {
            lib,
            registry: AtomicPtr::new(std::ptr::null_mut()),
            profiler: AtomicPtr::new(std::ptr::null_mut()),
            profiler_hook: &mut hooks.profiler,
            done_seq: AtomicI32::new(-1),
            gone: AtomicBool::new(false),
            error: Mutex::new(None),
            daemon: Mutex::new(Default::default()),
            tracker: Mutex::new(track::Tracker::default()),
        });
        // SAFETY: a new thread loop with no properties; null on failure.
        let tloop = unsafe { (lib.thread_loop_new)(c"xrunlab-watch".as_ptr(), std::ptr::null()) };
        if tloop.is_null() {
            return Err(Error::no_server("libpipewire could not make a thread loop"));
        }
        let mut conn = Conn {
            lib,
            tloop,
            context: std::ptr::null_mut(),
            core: std::ptr::null_mut(),
            _hooks: hooks,
            shared,
        };
        let data = &*conn.shared as *const Shared as *mut c_void;
        // SAFETY: the calls libpipewire's examples make to connect from a thread loop, under
        // its lock; every object is owned by `conn`, whose Drop frees it in order.
        let seq = unsafe {
            let lp = (lib.thread_loop_get_loop)(tloop);
            conn.context = (lib.context_new)(lp, std::ptr::null_mut(), 0);
            if conn.context.is_null() {
                return Err(Error::no_server("libpipewire could not make a context"));
            }
            // The profiler's protocol marshalling lives in its module: loaded into our own
            // context (as pw-top does), it lets us bind the daemon's profiler; it adds
            // nothing to the daemon.
            if (lib.context_load_module)(
                conn.context,
                c"libpipewire-module-profiler".as_ptr(),
                std::ptr::null(),
                std::ptr::null_mut(),
            )
            .is_null()
            {
                return Err(Error::cannot_measure(
                    "libpipewire could not load its profiler module (libpipewire-module-profiler)",
                ));
            }
            if (lib.thread_loop_start)(tloop) < 0 {
                return Err(Error::no_server("libpipewire could not start its thread"));
            }
            (lib.thread_loop_lock)(tloop);
            conn.core = (lib.context_connect)(conn.context, std::ptr::null_mut(), 0);
            if conn.core.is_null() {
                let e = std::io::Error::last_os_error();
                (lib.thread_loop_unlock)(tloop);
                return Err(Error::no_server(format!(
                    "no PipeWire daemon answers at {} ({e})",
                    super::pipewire_socket()
                        .map(|p| p.display().to_string())
                        .unwrap_or_else(|| {
                            "$XDG_RUNTIME_DIR/pipewire-0 (XDG_RUNTIME_DIR is not set)".into()
                        })
                )));
            }
            let (cm, cd) = ffi::methods::<ffi::CoreMethods>(conn.core);
            let hooks = &mut *conn._hooks;
            if let Some(f) = cm.add_listener {
                f(cd, &mut hooks.core, &CORE_EVENTS, data);
            }
            let reg = cm
                .get_registry
                .map_or(std::ptr::null_mut(), |f| f(cd, ffi::PW_VERSION_REGISTRY, 0));
            conn.shared.registry.store(reg, Ordering::Release);
            if !reg.is_null() {
                let (rm, rd) = ffi::methods::<ffi::RegistryMethods>(reg);
                if let Some(f) = rm.add_listener {
                    f(rd, &mut hooks.registry, &REGISTRY_EVENTS, data);
                }
            }
            let seq = cm.sync.map_or(-1, |f| f(cd, ffi::PW_ID_CORE, 0));
            (lib.thread_loop_unlock)(tloop);
            seq
        };
        let t = Instant::now();
        while conn.shared.done_seq.load(Ordering::Acquire) < seq.max(0) {
            if t.elapsed() > SYNC_WAIT || conn.shared.gone.load(Ordering::Acquire) {
                let why = locked(&conn.shared.error).clone().unwrap_or_default();
                return Err(Error::no_server(format!(
                    "the PipeWire daemon did not answer within {} s {why}",
                    SYNC_WAIT.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        // The registry announces its globals before the sync's done: bound or absent now.
        while conn.shared.profiler.load(Ordering::Acquire).is_null() {
            if t.elapsed() > SYNC_WAIT {
                return Err(Error::cannot_measure(
                    "the PipeWire daemon offers no profiler: add `{ name = libpipewire-module-profiler }` \
                     to context.modules in pipewire.conf (it is in Debian's default) and restart it; \
                     or watch through its JACK interface with `pw-jack xrunlab watch --server jack`",
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        // The rate and quantum come with the first cycle (none while the graph is idle).
        while locked(&conn.shared.tracker).cycles == 0 && t.elapsed() < FIRST_CYCLE_WAIT {
            std::thread::sleep(Duration::from_millis(10));
        }
        let (name, version) = locked(&conn.shared.daemon).clone();
        // SAFETY: returns a static NUL-terminated string.
        let lib_version = unsafe { ffi::string((lib.get_library_version)()) };
        let mut a = PipeWireAdapter {
            conn,
            info: ServerInfo {
                kind: "pipewire".into(),
                name: if name.is_empty() {
                    "pipewire-0".into()
                } else {
                    name
                },
                version: format!(
                    "{} (profiler; libpipewire {lib_version})",
                    if version.is_empty() { "?" } else { &version }
                ),
                rate: 0,
                frames: 0,
            },
            wall: WallClock::now(),
        };
        a.refresh();
        Ok(a)
    }

    fn refresh(&mut self) {
        let t = locked(&self.conn.shared.tracker);
        if t.cycles > 0 {
            self.info.rate = t.rate;
            self.info.frames = t.frames;
        }
    }

    fn xrun(&self, f: track::Found, t0: u64) -> WatchXrun {
        WatchXrun {
            index: 0,
            at_ns: f.deadline_ns.saturating_sub(t0),
            wall: self.wall.format(f.deadline_ns),
            frame: f.position,
            cycle: f.position / f.frames.max(1),
            delayed_us: 0.0,
            dsp_load_pct: f.dsp_load_pct,
            late: f.late,
            late_by_ns: f.late_by_ns,
            node_run: f.node_run,
            soc_throttled: Vec::new(),
        }
    }
}

impl Adapter for PipeWireAdapter {
    fn info(&self) -> ServerInfo {
        self.info.clone()
    }

    fn poll(&mut self, t0: u64, out: &mut Vec<WatchXrun>) -> (bool, u64) {
        self.refresh();
        let (ready, lost) = {
            let mut t = locked(&self.conn.shared.tracker);
            (std::mem::take(&mut t.ready), std::mem::take(&mut t.lost))
        };
        for f in ready {
            out.push(self.xrun(f, t0));
        }
        (!self.conn.shared.gone.load(Ordering::Acquire), lost)
    }

    fn dsp_load(&self) -> f64 {
        locked(&self.conn.shared.tracker).cpu_load * 100.0
    }

    fn max_delayed_us(&self) -> f64 {
        0.0
    }

    fn flush(&mut self) {
        locked(&self.conn.shared.tracker).flush();
    }

    fn finish(&mut self, t0: u64, r: &mut WatchResults) {
        self.refresh();
        r.server = self.info.clone();
        let mut t = locked(&self.conn.shared.tracker);
        r.clients.extend(t.timings());
        // After a `--follow` reconnect: the last connection's cycles, at the size it ran.
        r.other_sizes = t.other_sizes().or(r.other_sizes.take());
        r.busy_histograms.extend(t.busy_histograms());
        let h = t.headroom();
        r.headroom = Some(match r.headroom.take() {
            Some(old) => super::cycles::merge(old, h),
            None => h,
        });
        if let Some((at, mut tl)) = t.worst() {
            let at_ns = at.saturating_sub(t0);
            tl.xrun = r
                .xruns
                .iter()
                .find(|x| x.at_ns == at_ns)
                .map_or(0, |x| x.index);
            r.worst_cycle = Some(tl);
        }
    }

    fn names_late(&self) -> bool {
        true
    }
}
