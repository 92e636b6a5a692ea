//! The host a CLAP plugin calls back into: one `clap_host` per instance, whose `host_data`
//! is the instance's [`HostShared`].
//!
//! CLAP lets a plugin call some host functions from its audio thread (`request_process`,
//! `request_callback`, `request_restart`, thread-check, `log`, `params.request_flush`): those
//! only store an atomic or read a thread-local, so `process` stays free of allocations and
//! locks (docs/ARCHITECTURE.md §5). What must run on the main thread — `on_main_thread` after
//! a `request_callback`, timers — is served by one thread of the process's
//! ([`MainThread`]), never by the engine's.

use clap_sys::ext::audio_ports::{clap_host_audio_ports, CLAP_EXT_AUDIO_PORTS};
use clap_sys::ext::latency::{clap_host_latency, CLAP_EXT_LATENCY};
use clap_sys::ext::log::{clap_host_log, clap_log_severity, CLAP_EXT_LOG};
use clap_sys::ext::params::{
    clap_host_params, clap_param_clear_flags, clap_param_rescan_flags, CLAP_EXT_PARAMS,
};
use clap_sys::ext::thread_check::{clap_host_thread_check, CLAP_EXT_THREAD_CHECK};
use clap_sys::ext::timer_support::{
    clap_host_timer_support, clap_plugin_timer_support, CLAP_EXT_TIMER_SUPPORT,
};
use clap_sys::host::clap_host;
use clap_sys::id::clap_id;
use clap_sys::plugin::clap_plugin;
use clap_sys::version::CLAP_VERSION;
use std::cell::Cell;
use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

thread_local! {
    /// Set while this thread is inside one of the plugin's audio-thread functions: what
    /// thread-check answers, and what keeps `log` from allocating there. Const-initialised
    /// with no destructor, so reading it never allocates.
    static ON_AUDIO_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// Marks the current thread as the plugin's audio thread until dropped.
pub struct AudioThread(bool);

impl AudioThread {
    pub fn enter() -> AudioThread {
        AudioThread(ON_AUDIO_THREAD.with(|c| c.replace(true)))
    }
}

impl Drop for AudioThread {
    fn drop(&mut self) {
        ON_AUDIO_THREAD.with(|c| c.set(self.0));
    }
}

fn on_audio_thread() -> bool {
    ON_AUDIO_THREAD.with(Cell::get)
}

/// The most log lines kept from one instance (its init failure's message is among the first).
const MAX_LOG_LINES: usize = 16;

struct Timer {
    id: clap_id,
    period: Duration,
    due: Instant,
}

/// What the host callbacks of one instance reach. Boxed by its owner so that `host.host_data`
/// (which points here) stays valid for the instance's whole life.
pub struct HostShared {
    host: clap_host,
    /// The plugin once created: what the main-thread server calls back.
    plugin: AtomicPtr<clap_plugin>,
    callback_requested: AtomicBool,
    /// `request_restart`, `request_process`, `params.request_flush`: noted, never acted on
    /// (the engine processes every block and never restarts an instance it measures).
    pub restart_requested: AtomicBool,
    /// Log lines the plugin sent from its audio thread, dropped there without a record.
    pub audio_thread_logs: AtomicU64,
    logs: Mutex<Vec<String>>,
    timers: Mutex<Vec<Timer>>,
    next_timer: AtomicU32,
}

impl HostShared {
    pub fn new() -> Box<HostShared> {
        let mut shared = Box::new(HostShared {
            host: clap_host {
                clap_version: CLAP_VERSION,
                host_data: std::ptr::null_mut(),
                name: c"xrunlab".as_ptr(),
                vendor: c"xrunlab".as_ptr(),
                url: c"https://github.com/xrunlab/xrunlab".as_ptr(),
                version: c"0.1".as_ptr(),
                get_extension: Some(get_extension),
                request_restart: Some(request_restart),
                request_process: Some(request_restart),
                request_callback: Some(request_callback),
            },
            plugin: AtomicPtr::new(std::ptr::null_mut()),
            callback_requested: AtomicBool::new(false),
            restart_requested: AtomicBool::new(false),
            audio_thread_logs: AtomicU64::new(0),
            logs: Mutex::new(Vec::new()),
            timers: Mutex::new(Vec::new()),
            next_timer: AtomicU32::new(1),
        });
        let me: *mut HostShared = &mut *shared;
        shared.host.host_data = me.cast();
        shared
    }

    /// The `clap_host` to give `create_plugin`; valid as long as `self`.
    pub fn host(&self) -> *const clap_host {
        &self.host
    }

    pub fn set_plugin(&self, plugin: *const clap_plugin) {
        self.plugin.store(plugin as *mut _, Ordering::Release);
    }

    /// What the plugin logged from other threads than its audio thread, one line each.
    pub fn log_lines(&self) -> Vec<String> {
        self.logs.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// One round of main-thread work: `on_main_thread` if it was asked for, then the timers
    /// that are due. Called only from a thread that may be the plugin's main thread.
    fn serve(&self) {
        let plugin = self.plugin.load(Ordering::Acquire) as *const clap_plugin;
        if plugin.is_null() {
            return;
        }
        if self.callback_requested.swap(false, Ordering::AcqRel) {
            // SAFETY: `plugin` is live while the server runs (its owner stops the server
            // before destroying it), and this is a main-thread call made from the only
            // thread that makes main-thread calls once the instance is built.
            unsafe {
                if let Some(f) = (*plugin).on_main_thread {
                    f(plugin)
                }
            }
        }
        let now = Instant::now();
        let due: Vec<clap_id> = {
            let mut timers = self.timers.lock().unwrap_or_else(|e| e.into_inner());
            timers
                .iter_mut()
                .filter(|t| t.due <= now)
                .map(|t| {
                    t.due = now + t.period;
                    t.id
                })
                .collect()
        };
        if due.is_empty() {
            return;
        }
        // SAFETY: as above; the extension pointer is the plugin's, valid while it lives. The
        // timer lock is released first: `on_timer` may register or unregister timers.
        unsafe {
            let ext = (*plugin).get_extension.map_or(std::ptr::null(), |f| {
                f(plugin, CLAP_EXT_TIMER_SUPPORT.as_ptr())
            }) as *const clap_plugin_timer_support;
            if let Some(on_timer) = ext.as_ref().and_then(|e| e.on_timer) {
                for id in due {
                    on_timer(plugin, id);
                }
            }
        }
    }
}

/// An instance's registration with the process's one main-thread server, which calls its
/// `on_main_thread` and timers while it runs. Dropping it unregisters the instance, under
/// the lock the server serves under, so no main-thread call can overlap the teardown that
/// follows. One thread for all instances: a load test makes hundreds, and a thread each
/// waking every few milliseconds would load the machine it measures.
pub struct MainThread {
    addr: usize,
}

/// The instances served, as (address of their `HostShared`, crash label).
static SERVED: Mutex<Vec<(usize, crate::rt::crash::Label)>> = Mutex::new(Vec::new());
static SERVER: Mutex<Option<std::thread::Thread>> = Mutex::new(None);

/// How often the server looks for requests and due timers: CLAP promises no latency for
/// `request_callback`, and a plugin's timers (DPF's are for its UI) need no better.
const SERVE_EVERY: Duration = Duration::from_millis(10);

fn serve_all() {
    loop {
        let idle = {
            let served = SERVED.lock().unwrap_or_else(|e| e.into_inner());
            for &(addr, label) in served.iter() {
                // SAFETY: an address is removed (under this lock) before its `HostShared`
                // is freed, so every one listed is alive while the lock is held.
                let s = unsafe { &*(addr as *const HostShared) };
                let _in_plugin =
                    crate::rt::crash::enter(label, crate::rt::crash::Phase::Instantiating);
                s.serve();
            }
            served.is_empty()
        };
        if idle {
            std::thread::park();
        } else {
            std::thread::park_timeout(SERVE_EVERY);
        }
    }
}

/// The server thread, started on first use. It returns once the thread runs: its start-up
/// allocates (thread handle, thread-local storage), and that must not fall into the cycles
/// that follow.
fn server() -> std::io::Result<std::thread::Thread> {
    let mut server = SERVER.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(t) = server.as_ref() {
        return Ok(t.clone());
    }
    // A flag, not a channel: the channel's last end could be freed on the new thread after
    // the caller went on, inside a measured cycle.
    static READY: AtomicBool = AtomicBool::new(false);
    let handle = std::thread::Builder::new()
        .name("xrunlab-clap-main".into())
        .spawn(|| {
            let _ = std::thread::current();
            READY.store(true, Ordering::Release);
            serve_all();
        })?;
    while !READY.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let t = handle.thread().clone();
    *server = Some(t.clone());
    Ok(t)
}

impl MainThread {
    /// Serve `shared`, which must outlive the returned value.
    pub fn start(
        shared: &HostShared,
        label: crate::rt::crash::Label,
    ) -> std::io::Result<MainThread> {
        let server = server()?;
        let addr = shared as *const HostShared as usize;
        SERVED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((addr, label));
        server.unpark();
        Ok(MainThread { addr })
    }
}

/// Run `f` as the plugins' main thread while the server waits: main-thread calls the
/// instance's owner makes after start-up (state save and load) never overlap the server's.
pub fn as_main_thread<R>(f: impl FnOnce() -> R) -> R {
    let _served = SERVED.lock().unwrap_or_else(|e| e.into_inner());
    f()
}

impl Drop for MainThread {
    fn drop(&mut self) {
        SERVED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(a, _)| *a != self.addr);
    }
}

/// The [`HostShared`] behind a `clap_host` the plugin passed back.
///
/// # Safety
/// `host` is a pointer this module handed out ([`HostShared::host`]) and its owner is alive.
unsafe fn shared<'a>(host: *const clap_host) -> Option<&'a HostShared> {
    // SAFETY: the caller's contract; `host_data` was set to the box's address in `new`.
    unsafe {
        host.as_ref()
            .and_then(|h| (h.host_data as *const HostShared).as_ref())
    }
}

static THREAD_CHECK: clap_host_thread_check = clap_host_thread_check {
    is_main_thread: Some(is_main_thread),
    is_audio_thread: Some(is_audio_thread),
};
static LOG: clap_host_log = clap_host_log { log: Some(log) };
static TIMERS: clap_host_timer_support = clap_host_timer_support {
    register_timer: Some(register_timer),
    unregister_timer: Some(unregister_timer),
};
static PARAMS: clap_host_params = clap_host_params {
    rescan: Some(params_rescan),
    clear: Some(params_clear),
    request_flush: Some(request_restart),
};
static LATENCY: clap_host_latency = clap_host_latency {
    changed: Some(latency_changed),
};
static AUDIO_PORTS: clap_host_audio_ports = clap_host_audio_ports {
    is_rescan_flag_supported: Some(rescan_flag_supported),
    rescan: Some(ports_rescan),
};

unsafe extern "C" fn get_extension(_: *const clap_host, id: *const c_char) -> *const c_void {
    if id.is_null() {
        return std::ptr::null();
    }
    // SAFETY: CLAP passes a NUL-terminated extension id; comparing it does not allocate.
    let id = unsafe { CStr::from_ptr(id) };
    let ext: *const c_void = if id == CLAP_EXT_THREAD_CHECK {
        (&THREAD_CHECK as *const clap_host_thread_check).cast()
    } else if id == CLAP_EXT_LOG {
        (&LOG as *const clap_host_log).cast()
    } else if id == CLAP_EXT_TIMER_SUPPORT {
        (&TIMERS as *const clap_host_timer_support).cast()
    } else if id == CLAP_EXT_PARAMS {
        (&PARAMS as *const clap_host_params).cast()
    } else if id == CLAP_EXT_LATENCY {
        (&LATENCY as *const clap_host_latency).cast()
    } else if id == CLAP_EXT_AUDIO_PORTS {
        (&AUDIO_PORTS as *const clap_host_audio_ports).cast()
    } else {
        std::ptr::null()
    };
    ext
}

unsafe extern "C" fn request_restart(host: *const clap_host) {
    // SAFETY: the plugin passes back the host it was given, alive while it is.
    if let Some(s) = unsafe { shared(host) } {
        s.restart_requested.store(true, Ordering::Relaxed);
    }
}

unsafe extern "C" fn request_callback(host: *const clap_host) {
    // SAFETY: as in `request_restart`.
    if let Some(s) = unsafe { shared(host) } {
        s.callback_requested.store(true, Ordering::Release);
    }
}

unsafe extern "C" fn is_main_thread(_: *const clap_host) -> bool {
    !on_audio_thread()
}

unsafe extern "C" fn is_audio_thread(_: *const clap_host) -> bool {
    on_audio_thread()
}

unsafe extern "C" fn log(host: *const clap_host, _severity: clap_log_severity, msg: *const c_char) {
    // SAFETY: as in `request_restart`.
    let Some(s) = (unsafe { shared(host) }) else {
        return;
    };
    if on_audio_thread() {
        // Keeping the text would allocate in the cycle: count it only.
        s.audio_thread_logs.fetch_add(1, Ordering::Relaxed);
        return;
    }
    if msg.is_null() {
        return;
    }
    // SAFETY: CLAP passes a NUL-terminated message, valid for this call.
    let text = unsafe { CStr::from_ptr(msg) }
        .to_string_lossy()
        .into_owned();
    let mut logs = s.logs.lock().unwrap_or_else(|e| e.into_inner());
    if logs.len() < MAX_LOG_LINES {
        logs.push(text);
    }
}

unsafe extern "C" fn register_timer(
    host: *const clap_host,
    period_ms: u32,
    timer_id: *mut clap_id,
) -> bool {
    // SAFETY: as in `request_restart`.
    let Some(s) = (unsafe { shared(host) }) else {
        return false;
    };
    if timer_id.is_null() || on_audio_thread() {
        return false;
    }
    let id = s.next_timer.fetch_add(1, Ordering::Relaxed);
    let period = Duration::from_millis(u64::from(period_ms.max(1)));
    s.timers
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(Timer {
            id,
            period,
            due: Instant::now() + period,
        });
    // SAFETY: checked non-null; the plugin gives a place for the id.
    unsafe { *timer_id = id };
    true
}

unsafe extern "C" fn unregister_timer(host: *const clap_host, timer_id: clap_id) -> bool {
    // SAFETY: as in `request_restart`.
    let Some(s) = (unsafe { shared(host) }) else {
        return false;
    };
    if on_audio_thread() {
        return false;
    }
    let mut timers = s.timers.lock().unwrap_or_else(|e| e.into_inner());
    let before = timers.len();
    timers.retain(|t| t.id != timer_id);
    timers.len() != before
}

unsafe extern "C" fn params_rescan(_: *const clap_host, _: clap_param_rescan_flags) {}

unsafe extern "C" fn params_clear(_: *const clap_host, _: clap_id, _: clap_param_clear_flags) {}

unsafe extern "C" fn latency_changed(_: *const clap_host) {}

unsafe extern "C" fn rescan_flag_supported(_: *const clap_host, _: u32) -> bool {
    false
}

unsafe extern "C" fn ports_rescan(_: *const clap_host, _: u32) {}
