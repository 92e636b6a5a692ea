//! A run of the client, in named steps: `activate` (ports, latency callback, process
//! callback, connections), `wait` (on a non-real-time thread, sampling the server's load
//! and the clock offset), `teardown` (stop the callback, deactivate or abandon, restore the
//! buffer size, complete the report). [`Device::start`] runs them on the device thread.

use super::buffer::restore_buffer;
use super::latency::{on_latency, LatencyPorts, ENGINE_LATENCY_FRAMES};
use super::process::{
    Brief, Notifications, OffsetStats, Process, Shared, HISTORY, MAX_XRUN_EVENTS,
};
use super::report::match_xruns;
use super::{JackClient, JackControl, JackLoad, JackReport, ServerXrun};
use crate::driver::signal::{OutputSink, SinkStats};
use crate::driver::{
    Device, DeviceParams, DriverKind, DriverOutcome, DriverReport, DriverStats, Parts, RunSpec,
    Running, StopReason,
};
use crate::driver::{RtHandler, RtSink, RtSource};
use crate::error::{Error, Result};
use crate::rt::clock::monotonic_ns;
use crate::rt::thread::ThreadSpec;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

impl JackClient {
    /// Step 1 of a run: register our ports, answer latency questions, activate with the
    /// process callback and make the asked connections. `use_source`: the engine's input
    /// comes from `parts.source` unless `--connect in=` feeds our input ports.
    fn activate<H: RtHandler, I: RtSource, O: RtSink>(
        self,
        parts: Parts<H, I, O>,
        periods_total: u64,
        use_source: bool,
    ) -> Result<Active<H, I, O>> {
        let JackClient {
            client,
            cfg,
            rate,
            frames,
            buffer_set_from,
            control,
            library_version,
            server,
            // Read by `start`, which passes it as `use_source`.
            capture_input: _,
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
        let latency_ports = LatencyCallback::install(&client, &ins, &outs)?;
        let in_names: Vec<String> = ins.iter().filter_map(|p| p.name().ok()).collect();
        let out_names: Vec<String> = outs.iter().filter_map(|p| p.name().ok()).collect();
        let client_name = client.name().to_string();
        let f = frames as usize;
        let process = Process {
            handler: parts.handler,
            sh: sh.clone(),
            ins,
            outs,
            source: parts.source,
            use_source: use_source && cfg.connect_in.is_empty(),
            sink: parts.sink,
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
        Ok(Active {
            active,
            sh,
            latency_ports,
            control,
            offsets,
            report: JackReport {
                server,
                library_version,
                client_name,
                rate,
                buffer_frames: frames,
                buffer_set_from,
                connections,
                ..JackReport::default()
            },
        })
    }
}

impl Device for JackClient {
    fn kind(&self) -> DriverKind {
        DriverKind::Jack
    }

    fn params(&self) -> DeviceParams {
        DeviceParams {
            rate: self.rate,
            frames: self.frames,
            periods: 2,
        }
    }

    /// The thread `run.thread` describes, at SCHED_OTHER, activates the client, waits and
    /// tears it down. Activation happens there, not on the caller's thread, because
    /// libjack creates the process thread from the activating thread and it inherits that
    /// thread's CPUs. A refusal (ports, callbacks, activation, connections) is returned
    /// here, before anything runs.
    fn start<H: RtHandler, I: RtSource, O: RtSink>(
        self,
        parts: Parts<H, I, O>,
        run: RunSpec,
    ) -> Result<Running<Parts<H, I, O>>> {
        let spec = ThreadSpec {
            policy: crate::rt::Policy::Other { nice: 0 },
            ..run.thread
        };
        let (stop, periods_total) = (run.stop.clone(), run.periods_total);
        let (tx, rx) = std::sync::mpsc::sync_channel::<Option<Error>>(1);
        let running = Running::spawn_waiting(spec, run.stop, move |rt_tid| {
            let use_source = !self.capture_input;
            let mut active = match self.activate(parts, periods_total, use_source) {
                Ok(a) => {
                    let _ = tx.send(None);
                    a
                }
                Err(e) => {
                    let _ = tx.send(Some(e));
                    return Err(Error::cannot_measure("the JACK client did not start"));
                }
            };
            let waited = active.wait(&stop, &mut |tid| rt_tid.store(tid, Ordering::SeqCst));
            active.teardown(waited)
        })?;
        match rx.recv() {
            Ok(None) => Ok(running),
            Ok(Some(e)) => {
                let _ = running.join();
                Err(e)
            }
            Err(_) => Err(running
                .join()
                .err()
                .unwrap_or_else(|| Error::cannot_measure("the JACK client thread ended early"))),
        }
    }
}

/// Our latency callback's argument, owned by the run: freed once the client is closed,
/// leaked with a client that is abandoned (libjack may still call it).
struct LatencyCallback(*mut LatencyPorts);

// SAFETY: the pointer is only dereferenced by libjack's notification thread (through the
// callback) and freed by the thread that closed the client.
unsafe impl Send for LatencyCallback {}

impl LatencyCallback {
    /// Answer the server's latency questions for our ports (before activation, as libjack
    /// requires of every callback).
    fn install(
        client: &jack::Client,
        ins: &[jack::Port<jack::AudioIn>],
        outs: &[jack::Port<jack::AudioOut>],
    ) -> Result<Self> {
        let ports = Box::into_raw(Box::new(LatencyPorts {
            ins: ins.iter().map(|p| p.raw()).collect(),
            outs: outs.iter().map(|p| p.raw()).collect(),
            own: ENGINE_LATENCY_FRAMES,
        }));
        // SAFETY: the client is open and inactive; `ports` stays valid until the client is
        // closed (see `free`).
        let rc = unsafe {
            jack::jack_sys::jack_set_latency_callback(
                client.raw(),
                Some(on_latency),
                ports as *mut libc::c_void,
            )
        };
        if rc != 0 {
            // SAFETY: libjack refused it, so nothing else holds the pointer.
            drop(unsafe { Box::from_raw(ports) });
            return Err(Error::cannot_measure(
                "JACK refused our latency callback (jack_set_latency_callback)",
            ));
        }
        Ok(LatencyCallback(ports))
    }

    /// For a client that is abandoned or not closed in time: libjack may still call
    /// on_latency with the pointer, so it is never freed.
    fn leak(self) {}

    /// Call only after the client is closed: libjack calls on_latency no more.
    fn free(self) {
        // SAFETY: see above; the pointer came from Box::into_raw in `install`.
        drop(unsafe { Box::from_raw(self.0) });
    }
}

/// An active client: the server runs our process callback.
struct Active<H, I, O> {
    active: jack::AsyncClient<Notifications, Process<H, I, O>>,
    sh: Arc<Shared>,
    latency_ports: LatencyCallback,
    /// Holds the size `--set-buffer` changed, to put the original back after the run.
    control: Option<JackControl>,
    offsets: OffsetStats,
    /// Filled in as the run goes: identity and connections now, the rest at teardown.
    report: JackReport,
}

/// How the waiting ended.
struct Waited {
    reason: StopReason,
    stalled: bool,
    load: JackLoad,
}

impl<H: RtHandler, I: RtSource, O: RtSink> Active<H, I, O> {
    /// Step 2: wait on this (non-real-time) thread until the run ends, sampling
    /// `jack_cpu_load` and the clock offset meanwhile. `on_active` gets the process
    /// thread's tid once the first cycle has run.
    fn wait(&mut self, stop: &AtomicBool, on_active: &mut dyn FnMut(libc::pid_t)) -> Waited {
        let sh = &self.sh;
        let mut load = JackLoad::default();
        let mut load_sum = 0.0;
        let mut told_tid = false;
        let mut last_sample = std::time::Instant::now();
        // pipewire-jack does not call the shutdown callback when the daemon dies; the only
        // sign is that cycles stop. A server that runs no cycle of ours for this long is
        // gone as far as the measurement is concerned. The first cycle gets longer: PipeWire
        // negotiates the graph before it schedules a new client.
        let (rate, frames) = (self.report.rate, self.report.buffer_frames);
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
                let l = self.active.as_client().cpu_load() as f64;
                load.samples += 1;
                load_sum += l;
                load.max = load.max.max(l);
                self.offsets.sample(self.active.as_client(), sh, 20);
            }
        };
        if load.samples > 0 {
            load.mean = load_sum / load.samples as f64;
        }
        Waited {
            reason,
            stalled,
            load,
        }
    }

    /// Step 3: stop the callback, deactivate and close the client (or abandon one with a
    /// stuck cycle), put the buffer size back and complete the report.
    fn teardown(self, w: Waited) -> Result<DriverOutcome<Parts<H, I, O>>> {
        let Active {
            active,
            sh,
            latency_ports,
            control,
            offsets,
            mut report,
        } = self;
        let shutdown = sh.shutdown.load(Ordering::SeqCst) || w.stalled;
        report.server_stalled = w.stalled;
        report.server_shutdown = shutdown;
        report.jack_cpu_load_pct = w.load;
        let (rate, frames) = (report.rate, report.buffer_frames);
        let new_frames = sh.new_frames.load(Ordering::SeqCst);
        let new_rate = sh.new_rate.load(Ordering::SeqCst);
        // Stop the process callback from touching the engine before deactivating, so the
        // last cycles are not half-measured while the server tears us down.
        sh.done.store(true, Ordering::SeqCst);
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
            // is written. Abandon the client (and the latency callback's argument with it);
            // the process exits right after.
            std::mem::forget(active);
            latency_ports.leak();
            report.server_xruns = sh.server_xruns.load(Ordering::SeqCst);
            return Ok(DriverOutcome {
                reason: StopReason::Stopped,
                stats: shared_stats(&sh),
                report: DriverReport::Jack(report),
                parts: None,
            });
        }
        let process = close(active, shutdown, latency_ports)?;
        report.buffer_restored = if shutdown {
            if let Some(c) = control {
                c.abandon();
            }
            false
        } else {
            restore_buffer(control, frames).unwrap_or_else(|e| {
                report.restore_error = Some(e.to_string());
                false
            })
        };
        report.param_change = match (new_frames, new_rate) {
            (0, 0) => None,
            (f2, 0) => Some(format!("buffer size changed from {frames} to {f2} frames")),
            (0, r2) => Some(format!("sample rate changed from {rate} to {r2} Hz")),
            (f2, r2) => Some(format!(
                "buffer size changed from {frames} to {f2} and sample rate from {rate} to {r2}"
            )),
        };
        report.clock_offset_ns = offsets.mean();
        report.clock_offset_max_abs_ns = offsets.max_abs;
        report.server_xruns = sh.server_xruns.load(Ordering::SeqCst);
        let (stats, parts) = match process {
            Some(p) => {
                let stats = fold_process(&p, &sh, &mut report);
                (stats, Some(p.into_parts()))
            }
            // The handler went down with the client; only the counters that live in the
            // shared state survive. The engine's own records (already collected) carry
            // the rest.
            None => (shared_stats(&sh), None),
        };
        Ok(DriverOutcome {
            reason: w.reason,
            stats,
            report: DriverReport::Jack(report),
            parts,
        })
    }
}

/// Tearing down a client whose server died can block in libjack; do it on a helper thread
/// and give up on it (and on the process handler it holds) after a bound. The process
/// handler comes back when the client was deactivated in time.
fn close<H: RtHandler, I: RtSource, O: RtSink>(
    active: jack::AsyncClient<Notifications, Process<H, I, O>>,
    shutdown: bool,
    latency_ports: LatencyCallback,
) -> Result<Option<Process<H, I, O>>> {
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
    Ok(match rx.recv_timeout(Duration::from_secs(3)) {
        Ok(p) => {
            let _ = teardown.join();
            latency_ports.free();
            p
        }
        // The client may still call back into the latency ports: leave them allocated.
        Err(_) => {
            latency_ports.leak();
            None
        }
    })
}

/// The counters that outlive the process handler (mirrored in the shared state).
fn shared_stats(sh: &Shared) -> DriverStats {
    DriverStats {
        cycles: sh.cycles_done.load(Ordering::SeqCst),
        xruns: sh.xruns.load(Ordering::SeqCst),
        skipped_periods: sh.skipped.load(Ordering::SeqCst),
        periods_elapsed: sh.periods_elapsed.load(Ordering::SeqCst),
        sink: SinkStats::default(),
    }
}

/// What the process handler counted goes into the report; server xruns are matched with
/// its cycle history.
fn fold_process<H, I, O: OutputSink>(
    p: &Process<H, I, O>,
    sh: &Shared,
    report: &mut JackReport,
) -> DriverStats {
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
    match_xruns(&p.xrun_slots, p.first_t_ideal, report);
    // Reports that arrived after our last cycle (while the client was torn down) have no
    // cycle to match; list them so every report appears once.
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
    report.xruns_not_reported_by_server = stats.xruns.saturating_sub(report.server_xruns_matched);
    stats
}
