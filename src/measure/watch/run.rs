//! The server-agnostic loop of `watch`: the duration, Ctrl-C, a server that goes away
//! (the result ends `server-shutdown`, or with `follow` the gap is recorded and the watch
//! goes on once the server is back), the DSP-load samples and, with `--forensics`, the
//! trace and the sampling around each xrun.

use crate::common::Status;
use crate::error::{Error, Result};
use crate::measure::session::{Outcome, Session};
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::types::*;
use super::{clients, inside, jack, late_now, names, pipewire};

/// How often the loop polls: xruns are timed by the notification itself, so this only
/// bounds how late a line appears and how fine the DSP-load samples are.
const POLL: Duration = Duration::from_millis(100);
/// How often `--forensics` looks for the session's threads again (a scan of /proc).
const SCAN_NS: u64 = 2_000_000_000;
/// The flight recorder (`--forensics`, `trace::flight`): seconds of trace history kept in
/// full, so that an xrun notified a poll late still finds the cycles before it; around each
/// xrun what its late client's run and the culprits need; and a sample every so often for
/// each client's usual figures (the first one at the start).
const FLIGHT_KEEP_NS: u64 = 5_000_000_000;
const XRUN_BEFORE_NS: u64 = 1_500_000_000;
const XRUN_AFTER_NS: u64 = 300_000_000;
/// Samples come every 20 s for the first 5 minutes, then every 5 minutes: enough cycles
/// for each client's medians while a long watch keeps little more than its xruns.
const SAMPLE_EVERY_NS: u64 = 20_000_000_000;
const SAMPLE_LATER_NS: u64 = 300_000_000_000;
const SAMPLE_EARLY_NS: u64 = 300_000_000_000;
const SAMPLE_NS: u64 = 1_000_000_000;
/// How often `follow` asks whether the server is back.
const RECONNECT: Duration = Duration::from_millis(250);

/// Attach to the configured server.
pub fn attach(cfg: &WatchConfig) -> Result<Box<dyn Adapter>> {
    attach_noted(cfg).map(|(a, _)| a)
}

/// What PipeWire's libjack does not say: a client late in PipeWire's graph is skipped in
/// that cycle, and the JACK xrun callback does not fire for it (checked here with PipeWire
/// 0.3.65: a client spinning 3 periods twice a second, 30 xruns in the profiler and none
/// through libjack).
const PW_JACK_BLIND: &str = "PipeWire's libjack reports no xrun for a client that is late in \
PipeWire's graph";

/// [`attach`], with what the user should know of the choice made. Under `pw-jack` the JACK
/// graph is PipeWire's own: asked for `--server jack`, the watch reads it through PipeWire's
/// profiler, which times every node and names the late one, rather than through libjack,
/// which would call a glitching session clean.
fn attach_noted(cfg: &WatchConfig) -> Result<(Box<dyn Adapter>, Vec<String>)> {
    let plain = |a: Box<dyn Adapter>| (a, Vec::new());
    if cfg.server == ServerKind::Pipewire {
        return Ok(plain(Box::new(pipewire::PipeWireAdapter::attach(cfg)?)));
    }
    if cfg.server == ServerKind::Auto && pipewire_socket().is_some_and(|p| p.exists()) {
        return match pipewire::PipeWireAdapter::attach(cfg) {
            Ok(a) => Ok(plain(Box::new(a))),
            // A daemon without its profiler may still serve JACK clients.
            Err(e) => attach_noted(&WatchConfig {
                server: ServerKind::Jack,
                ..cfg.clone()
            })
            .map_err(|_| e),
        };
    }
    let a = match jack::JackAdapter::attach(cfg) {
        Ok(a) => a,
        Err(e) if e.kind() == crate::error::ErrorKind::NoServer => {
            return Err(Error::no_server(no_server_message(cfg)))
        }
        Err(e) => return Err(e),
    };
    if a.info().kind != "pipewire" {
        return Ok(plain(Box::new(a)));
    }
    match pipewire::PipeWireAdapter::attach(cfg) {
        Ok(p) => {
            drop(a);
            Ok((
                Box::new(p),
                vec![format!(
                    "{PW_JACK_BLIND}: the JACK graph here is PipeWire's, so this watch reads it \
                     through PipeWire's profiler, which times every node (--server pipewire)"
                )],
            ))
        }
        Err(e) => Ok((
            Box::new(a),
            vec![format!(
                "{PW_JACK_BLIND}, and PipeWire's profiler could not be read ({e}): this watch \
                 sees only the xruns libjack reports; with the profiler loaded \
                 (module-profiler), --server pipewire names each late node"
            )],
        )),
    }
}

/// What was looked for and how to start it.
pub fn no_server_message(cfg: &WatchConfig) -> String {
    let name = cfg
        .server_name
        .clone()
        .or_else(|| std::env::var("JACK_DEFAULT_SERVER").ok())
        .unwrap_or_else(|| "default".into());
    let pw_line = match pipewire_socket() {
        Some(p) if p.exists() => format!(
            "; a PipeWire socket is at {} but its daemon did not answer",
            p.display()
        ),
        Some(p) => format!("; no PipeWire daemon at {}", p.display()),
        None => "; no PipeWire daemon (XDG_RUNTIME_DIR is not set)".into(),
    };
    format!(
        "nothing to watch: no JACK server named '{name}' is running{pw_line}. Start one \
         (`jackd -d alsa -d hw:0 -p 256`, or `jackd -d dummy` to try) or start PipeWire \
         (`systemctl --user start pipewire`), then watch again"
    )
}

pub(crate) fn pipewire_socket() -> Option<std::path::PathBuf> {
    let dir =
        std::env::var_os("PIPEWIRE_RUNTIME_DIR").or_else(|| std::env::var_os("XDG_RUNTIME_DIR"))?;
    let name = std::env::var("PIPEWIRE_REMOTE").unwrap_or_else(|_| "pipewire-0".into());
    Some(std::path::Path::new(&dir).join(name))
}

/// Watch until the duration, Ctrl-C, or the server going away (with `follow`: until the
/// duration or Ctrl-C). `on` hears each event as it happens; `live` is kept current.
/// The watch's clock (CLOCK_MONOTONIC at the attach), its flight recorder and, with
/// `--forensics`, the trace, noting in `r` when the trace began. The clock starts first: an
/// xrun during the trace's set-up (the ring buffer's resize takes about a second) is listed
/// at its own time, not at 0 s.
fn start_clock_and_trace(
    cfg: &WatchConfig,
    session: &mut Session,
    r: &mut WatchResults,
) -> (
    u64,
    std::sync::Arc<crate::trace::flight::Flight>,
    Option<crate::trace::Recorder>,
) {
    let t0 = crate::rt::clock::monotonic_ns();
    let flight = std::sync::Arc::new(crate::trace::flight::Flight::new(FLIGHT_KEEP_NS));
    let recorder = if cfg.forensics {
        session.start_trace_with(&[], cfg.duration_ns.unwrap_or(0), Some(flight.clone()))
    } else {
        None
    };
    r.traced_from_ns = recorder
        .is_some()
        .then(|| crate::rt::clock::monotonic_ns().saturating_sub(t0));
    (t0, flight, recorder)
}

/// PipeWire's profiler times every node in every cycle: there `--forensics` keeps the trace
/// only around xruns, for what ran on the late node's CPU.
pub fn run(
    cfg: &WatchConfig,
    session: &mut Session,
    live: &Live,
    on: &mut dyn FnMut(Event),
) -> Result<Outcome<WatchConfig, WatchResults>> {
    let (mut adapter, mut warnings) = attach_noted(cfg)?;
    let mut r = WatchResults {
        server: adapter.info(),
        forensics_note: Some(forensics_note(cfg)),
        ..WatchResults::default()
    };
    let profiled = adapter.names_late();
    if profiled {
        r.forensics_note = Some(pipewire_forensics_note(cfg));
    }
    let (t0, flight, recorder) = start_clock_and_trace(cfg, session, &mut r);
    let traced = recorder.is_some() && !profiled;
    let (mut threads, mut inside, mut sampled) = session_threads(
        cfg,
        adapter.as_ref(),
        &r.server,
        recorder.is_some(),
        profiled,
    );
    live.server(&r.server, true);
    on(Event::Attached(&r.server));
    let end = cfg.duration_ns.map(|d| t0.saturating_add(d));
    let sysfs = crate::system::Root::default();
    r.soc_throttle = crate::system::throttle::ThrottleRecord::start(&sysfs);
    let mut fresh = Vec::new();
    let mut next_tick = t0;
    let mut next_scan = t0 + SCAN_NS;
    let mut next_sample = t0;
    let mut late_now = late_now::LateNow::default();
    let status = loop {
        let now = crate::rt::clock::monotonic_ns();
        let (up, lost) = adapter.poll(t0, &mut fresh);
        let late = traced.then_some(&mut late_now);
        let seen = r.xruns.len();
        take_xruns(&mut fresh, &mut r, (t0, &flight, late), live, on);
        if let Some(s) = inside.as_mut() {
            s.poll_after(now, r.xruns[seen..].iter().map(|x| pin_of(x, t0)));
        }
        count_lost(lost, &mut r, live, on);
        if up {
            read_load(adapter.as_ref(), &mut r, live);
        }
        live.watched_ns.store(now - t0, Ordering::Relaxed);
        if crate::rt::interrupt::requested() {
            break Status::Interrupted;
        }
        if end.is_some_and(|e| now >= e) {
            break Status::Complete;
        }
        if !up {
            live.server(&r.server, false);
            on(Event::ServerGone { follow: cfg.follow });
            if !cfg.follow {
                break Status::ServerShutdown;
            }
            if traced {
                more_threads(&mut threads, adapter.as_ref(), &r.server);
            }
            end_adapter(adapter.as_mut(), t0, &mut r, live, on);
            // Closes the client of the server that went away.
            adapter = Box::new(Away);
            r.gaps.push(WatchGap {
                from_ns: now - t0,
                to_ns: None,
            });
            live.gaps.fetch_add(1, Ordering::Relaxed);
            match wait_for_server(cfg, end, live, t0) {
                Some(a) => {
                    adapter = a;
                    let back = crate::rt::clock::monotonic_ns() - t0;
                    let from = r.gaps.last().map_or(back, |g| g.from_ns);
                    if let Some(g) = r.gaps.last_mut() {
                        g.to_ns = Some(back);
                    }
                    r.server = adapter.info();
                    live.server(&r.server, true);
                    on(Event::ServerBack(&r.server, back - from));
                    continue;
                }
                None if crate::rt::interrupt::requested() => break Status::Interrupted,
                None => break Status::Complete,
            }
        }
        if now >= next_tick {
            if let Some(t) = r.soc_throttle.as_mut() {
                t.read_now(&sysfs, now - t0);
            }
            on(Event::Tick(live.snapshot()));
            next_tick = now + 1_000_000_000;
        }
        if traced && now >= next_sample {
            flight.pin(now, now + SAMPLE_NS);
            next_sample = now + sample_gap(now - t0);
        }
        if let Some((i, mut l)) = recorder
            .as_ref()
            .filter(|_| traced)
            .and_then(|rec| late_now.poll(now, rec, &threads, r.server.period_ns()))
        {
            l.inside = inside.as_mut().and_then(|s| s.held_now(l.tid, l.span_ns));
            on(Event::Late(i, &l));
        }
        if (traced || inside.is_some()) && now >= next_scan {
            // Clients that come and go during the watch are caught while they run.
            if traced {
                more_threads(&mut threads, adapter.as_ref(), &r.server);
            }
            sample_more(inside.as_mut(), &mut sampled, &threads, profiled);
            next_scan = now + SCAN_NS;
        }
        std::thread::sleep(POLL);
    };
    r.watched_ns = crate::rt::clock::monotonic_ns() - t0;
    live.watched_ns.store(r.watched_ns, Ordering::Relaxed);
    soc_throttled(&mut r, &sysfs);
    end_adapter(adapter.as_mut(), t0, &mut r, live, on);
    if let Some(rec) = recorder {
        if !profiled && status != Status::ServerShutdown {
            more_threads(&mut threads, adapter.as_ref(), &r.server);
        }
        let recording = rec.finish();
        let (mut f, w) = if profiled {
            pipewire::threads::explain(&recording, &mut r.xruns, &mut r.clients)
        } else {
            explain_jack(&recording, &threads, t0, &mut r)
        };
        session.keep(&mut f, &mut warnings);
        warnings.extend(w);
        r.forensics = Some(f);
        r.forensics_note = None;
    }
    if let Some(s) = inside {
        named_by_trace(&mut sampled, &r.clients);
        finish_inside(s, &mut r, &sampled);
    }
    Ok(Outcome {
        status,
        config: cfg.clone(),
        results: r,
        warnings,
    })
}

/// The xruns an adapter handed over: numbered, their time pinned in the trace (and queued
/// for a live look at their late client on JACK), told and kept.
/// What held each xrun's late run, into its late client, and each thread's code over the
/// watch.
fn finish_inside(s: inside::Inside, r: &mut WatchResults, sampled: &[names::ClientThread]) {
    let late: Vec<_> = r
        .xruns
        .iter()
        .map(|x| {
            Some(x.late.as_ref()?.tid)
                .zip(x.late_span())
                .map(|(t, (a, b))| (t, a, b))
        })
        .collect();
    let (summary, held) = s.finish(crate::rt::clock::monotonic_ns(), &late, sampled);
    for (x, h) in r.xruns.iter_mut().zip(held) {
        if let (Some(l), Some(h)) = (x.late.as_mut(), h) {
            l.inside = Some(h);
        }
    }
    r.inside = Some(summary);
}

fn take_xruns(
    fresh: &mut Vec<WatchXrun>,
    r: &mut WatchResults,
    (t0, flight, mut late): (
        u64,
        &crate::trace::flight::Flight,
        Option<&mut late_now::LateNow>,
    ),
    live: &Live,
    on: &mut dyn FnMut(Event),
) {
    for mut x in fresh.drain(..) {
        x.index = r.total_xruns() + 1;
        let (from, to) = pin_of(&x, t0);
        flight.pin(from, to);
        let at = t0 + x.at_ns;
        if let Some(l) = late.as_deref_mut() {
            l.xrun(x.index, at);
        }
        live.xrun(&x);
        on(Event::Xrun(&x, &r.server));
        r.xruns.push(x);
    }
}

/// The span a trace (and the samples) keep around an xrun: from 1.5 s before its
/// notification to 0.3 s after it, or after a PipeWire node that ran long finished (it is
/// reported once it finished, past the deadline).
fn pin_of(x: &WatchXrun, t0: u64) -> (u64, u64) {
    let at = t0 + x.at_ns;
    let until = x
        .node_run
        .and_then(|n| n.finish_ns)
        .map_or(at, |f| f.max(at));
    (at.saturating_sub(XRUN_BEFORE_NS), until + XRUN_AFTER_NS)
}

/// The session's threads as the watch starts: those the trace follows (JACK, with a
/// trace), the sampler (with a trace and `sample_ns`) and the threads it samples.
#[allow(clippy::type_complexity)]
fn session_threads(
    cfg: &WatchConfig,
    adapter: &dyn Adapter,
    server: &ServerInfo,
    traced: bool,
    profiled: bool,
) -> (
    Vec<clients::ClientThread>,
    Option<inside::Inside>,
    Vec<clients::ClientThread>,
) {
    let threads = if traced && !profiled {
        names::session_threads(&adapter.client_names(), semaphore_server(server), false)
    } else {
        Vec::new()
    };
    let mut inside = (cfg.sample_ns > 0 && traced)
        .then(|| inside::Inside::new(cfg.sample_ns, server.period_ns()));
    let mut sampled = Vec::new();
    sample_more(inside.as_mut(), &mut sampled, &threads, profiled);
    (threads, inside, sampled)
}

/// How long until the next second the flight recorder keeps for the clients' usual
/// figures, `since` the watch began: every 20 s for 5 minutes, then every 5 minutes.
fn sample_gap(since: u64) -> u64 {
    if since < SAMPLE_EARLY_NS {
        SAMPLE_EVERY_NS
    } else {
        SAMPLE_LATER_NS
    }
}

/// Xrun notifications that came faster than they were read: counted and told.
fn count_lost(lost: u64, r: &mut WatchResults, live: &Live, on: &mut dyn FnMut(Event)) {
    if lost > 0 {
        r.xruns_lost += lost;
        live.lost.fetch_add(lost, Ordering::Relaxed);
        on(Event::Lost(lost));
    }
}

/// The server's DSP load and largest delay, read at a poll it answered.
fn read_load(adapter: &dyn Adapter, r: &mut WatchResults, live: &Live) {
    let l = adapter.dsp_load();
    r.dsp_load.add(l);
    live.load(l);
    r.max_delayed_us = r.max_delayed_us.max(adapter.max_delayed_us());
}

/// The sampled threads known by process only take the name the trace found for them
/// (PipeWire's nodes: the trace finds each node's thread).
fn named_by_trace(sampled: &mut [clients::ClientThread], timings: &[clients::ClientTiming]) {
    for t in sampled {
        if let Some(c) = timings.iter().find(|c| c.tid == t.tid && c.tid != 0) {
            t.name.clone_from(&c.name);
            t.named_by = c.named_by;
        }
    }
}

/// Sample the session's threads not sampled yet: on JACK the client threads found for the
/// trace, on PipeWire every real-time thread of its clients and daemon.
fn sample_more(
    inside: Option<&mut inside::Inside>,
    sampled: &mut Vec<clients::ClientThread>,
    threads: &[clients::ClientThread],
    pipewire: bool,
) {
    let Some(s) = inside else { return };
    let found = if pipewire {
        names::session_threads(&Default::default(), None, true)
    } else {
        threads.to_vec()
    };
    for t in found {
        if !sampled.iter().any(|o| o.tid == t.tid) {
            sampled.push(t);
        }
    }
    s.add(sampled);
}

/// Reads the Pi's throttled word a last time and names, for each xrun, what it showed
/// around it.
fn soc_throttled(r: &mut WatchResults, sysfs: &crate::system::Root) {
    if let Some(t) = r.soc_throttle.as_mut() {
        t.read_now(sysfs, r.watched_ns);
        for x in &mut r.xruns {
            x.soc_throttled = t.during(x.at_ns).into_iter().map(String::from).collect();
        }
    }
}

/// What `--forensics` adds on PipeWire, or why it is off, said in the result's one line.
fn pipewire_forensics_note(cfg: &WatchConfig) -> String {
    let adds = "the profiler names the late node of every xrun; --forensics would add what ran \
                on its CPU instead (tasks, IRQs, softirqs)";
    if cfg.forensics {
        return format!("{adds}, but it could not record here (see the line above)");
    }
    match crate::trace::probe() {
        Ok(()) => format!("{adds}; root and tracefs are here, add --forensics"),
        Err(e) => format!("{adds}; it needs root and tracefs ({e})"),
    }
}

/// What the trace says of a JACK watch: each client's timing and the late client of each
/// xrun (into `r`), the attribution of each late run, its warnings.
fn explain_jack(
    recording: &crate::trace::Recording,
    threads: &[clients::ClientThread],
    t0: u64,
    r: &mut WatchResults,
) -> (crate::trace::Forensics, Vec<String>) {
    let period = r.server.period_ns();
    let e = clients::explain(recording, threads, &mut r.xruns, t0, period);
    r.clients = e.timings;
    if r.headroom.is_none() {
        // A sample of the cycles: say of how many.
        r.headroom = e.headroom.map(|mut h| {
            h.of_cycles = (r.watched_ns / period.max(1)).max(h.cycles);
            h
        });
        r.busy_histograms = e.busy;
    }
    if r.worst_cycle.is_none() {
        r.worst_cycle = e.worst_cycle;
    }
    let mut sizes = e.sizes;
    sizes.gap();
    if let Some(mut o) = sizes.result(r.server.frames, r.server.rate) {
        o.sampled = true;
        r.other_sizes = Some(o);
    }
    (e.forensics, e.warnings)
}

/// The last xruns an adapter was completing, then what it kept of every cycle.
fn end_adapter(
    adapter: &mut dyn Adapter,
    t0: u64,
    r: &mut WatchResults,
    live: &Live,
    on: &mut dyn FnMut(Event),
) {
    adapter.flush();
    let mut fresh = Vec::new();
    let (_, lost) = adapter.poll(t0, &mut fresh);
    for mut x in fresh {
        x.index = r.total_xruns() + 1;
        live.xrun(&x);
        on(Event::Xrun(&x, &r.server));
        r.xruns.push(x);
    }
    r.xruns_lost += lost;
    adapter.finish(t0, r);
}

/// The adapter while the server is away (`follow`): nothing to read.
struct Away;

impl Adapter for Away {
    fn info(&self) -> ServerInfo {
        ServerInfo::default()
    }
    fn poll(&mut self, _: u64, _: &mut Vec<WatchXrun>) -> (bool, u64) {
        (false, 0)
    }
    fn dsp_load(&self) -> f64 {
        0.0
    }
    fn max_delayed_us(&self) -> f64 {
        0.0
    }
}

/// Add the session's real-time threads not seen yet (clients started during the watch),
/// and name those whose client was not found before (a thread busy at each look).
fn more_threads(
    threads: &mut Vec<clients::ClientThread>,
    adapter: &dyn Adapter,
    server: &ServerInfo,
) {
    for t in names::session_threads(&adapter.client_names(), semaphore_server(server), false) {
        match threads.iter_mut().find(|o| o.tid == t.tid) {
            Some(o) if o.named_by == names::NamedBy::Process && o.pid == t.pid => *o = t,
            Some(_) => {}
            None => threads.push(t),
        }
    }
}

/// The jackd2 server whose client semaphores name its clients' threads (`names`); None on
/// PipeWire, whose libjack has no such semaphores.
fn semaphore_server(server: &ServerInfo) -> Option<&str> {
    (server.kind == "jackd2").then_some(server.name.as_str())
}

/// Ask for the server until it answers, the watch's end passes or Ctrl-C.
fn wait_for_server(
    cfg: &WatchConfig,
    end: Option<u64>,
    live: &Live,
    t0: u64,
) -> Option<Box<dyn Adapter>> {
    loop {
        let now = crate::rt::clock::monotonic_ns();
        live.watched_ns.store(now - t0, Ordering::Relaxed);
        if crate::rt::interrupt::requested() || end.is_some_and(|e| now >= e) {
            return None;
        }
        if let Ok(a) = attach(cfg) {
            return Some(a);
        }
        std::thread::sleep(RECONNECT);
    }
}

/// What `--forensics` would add, or why it cannot run here.
pub fn forensics_note(cfg: &WatchConfig) -> String {
    let adds = "--forensics would add each client's wake-up and busy time per cycle, the late \
                client of every xrun and what ran on its CPU instead, and the near-miss \
                histogram (on JACK it needs the trace)";
    if cfg.forensics {
        return format!("{adds}, but it could not record here (see the line above)");
    }
    match crate::trace::probe() {
        Ok(()) => format!("{adds}; root and tracefs are here, add --forensics"),
        Err(e) => format!("{adds}; it needs root and tracefs ({e})"),
    }
}
