//! `xrunlab watch` (docs/methods.md "Watch"): every xrun of the user's own live audio
//! session, recorded while it runs, without adding work to its graph.
//!
//! One module per server adapter (`jack.rs`; `pipewire/`, its profiler). An adapter
//! attaches, reports the server's identity and hands over the xruns it saw since the last
//! poll; this file owns the loop that is server-agnostic: the duration, Ctrl-C, a server
//! that goes away (the result ends `server-shutdown`, or with `follow` the gap is recorded
//! and the watch goes on once the server is back) and the DSP-load samples. The one-sentence
//! answer is the report's (`report::text::watch::answer`).
//!
//! The live counters are [`Live`], atomics only, so another thread (a metrics endpoint) can
//! snapshot them at any time without taking a lock the watcher's loop or libjack's
//! notification thread could hold.

pub mod clients;
pub mod cycles;
pub mod inside;
pub mod jack;
pub mod late_now;
pub mod names;
pub mod pipewire;
pub mod runs;
pub mod sizes;

use crate::common::Status;
use crate::error::{Error, Result};
use crate::measure::session::{Outcome, Session};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

/// Which server to watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ServerKind {
    /// PipeWire's profiler if a PipeWire daemon answers, else the JACK server libjack
    /// finds.
    #[default]
    Auto,
    Jack,
    Pipewire,
}

/// What `watch` was asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WatchConfig {
    pub server: ServerKind,
    /// The JACK server's name (`--server jack:NAME`); None = $JACK_DEFAULT_SERVER or "default".
    #[serde(default)]
    pub server_name: Option<String>,
    /// Stop after this long; None = until Ctrl-C or the server going away.
    #[serde(default)]
    pub duration_ns: Option<u64>,
    /// Wait for a server that went away and go on (the gap is recorded).
    #[serde(default)]
    pub follow: bool,
    /// `--forensics` was asked.
    #[serde(default)]
    pub forensics: bool,
    /// `--sample-every`: with `--forensics`, each client thread sampled every this much of
    /// its CPU time (`inside`); 0 = not sampled.
    #[serde(default)]
    pub sample_ns: u64,
}

/// The server as the watch found it (the last one, after a `follow` reconnect).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct ServerInfo {
    /// `jackd2` or `pipewire` (pipewire-jack's libjack).
    pub kind: String,
    /// The JACK server name watched.
    pub name: String,
    /// The client library's version string.
    pub version: String,
    pub rate: u32,
    pub frames: u32,
}

impl ServerInfo {
    /// 0 while the rate is unknown (a PipeWire graph that has not run a cycle yet).
    pub fn period_ns(&self) -> u64 {
        if self.rate == 0 {
            return 0;
        }
        crate::common::device::ns_of_frames(self.frames as u64, self.rate)
    }
}

/// One xrun the server reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WatchXrun {
    /// 1, 2, … in the order seen.
    pub index: u64,
    /// CLOCK_MONOTONIC when the notification arrived, ns after the watch started.
    pub at_ns: u64,
    /// Wall-clock time of the notification (RFC 3339, ms).
    pub wall: String,
    /// The server's frame time when it was noticed (JACK's `jack_frame_time`).
    pub frame: u64,
    /// `frame / buffer frames`: the graph cycle it fell in.
    pub cycle: u64,
    /// `jack_get_xrun_delayed_usecs`: how late the driver said it was, µs (0 when the
    /// driver does not say: jackd's dummy driver, a client that was not finished).
    pub delayed_us: f64,
    /// The server's DSP load (`jack_cpu_load`, %) right after the xrun.
    pub dsp_load_pct: f64,
    /// The client or node that was late, by how much, and (`--forensics`) what took its
    /// CPU. On PipeWire the profiler names it; on JACK it needs `--forensics`.
    #[serde(default)]
    pub late: Option<clients::LateClient>,
    /// PipeWire: how far past the cycle's deadline the late node finished, ns (None when
    /// it is not known: it was signalled again before it was seen finished).
    #[serde(default)]
    pub late_by_ns: Option<u64>,
    /// PipeWire: the late node's times in that cycle, for `--forensics` to find its thread
    /// and window (not kept in the result: the late client and forensics sections say it).
    #[serde(skip)]
    pub node_run: Option<NodeRun>,
    /// Raspberry Pi: what the firmware's throttled flags showed around this xrun
    /// ("under-voltage", "throttled", …); empty where they showed nothing or there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub soc_throttled: Vec<String>,
}

/// The late node's times in its xrun's cycle as the profiler gave them (absolute
/// CLOCK_MONOTONIC ns, the trace's clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NodeRun {
    pub signal_ns: u64,
    /// When its thread started the cycle's work; None when it was never seen awake.
    pub awake_ns: Option<u64>,
    /// When it finished; None when it was not seen finished.
    pub finish_ns: Option<u64>,
    /// Its previous cycle's finish, when it was not yet running at the deadline (its block
    /// still showed it then).
    pub prev_finish_ns: Option<u64>,
    /// The cycle's deadline.
    pub deadline_ns: u64,
}

/// A span without a server (`--follow`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WatchGap {
    /// When the server went away, ns after the watch started.
    pub from_ns: u64,
    /// When it answered again; None = it never came back before the watch ended.
    pub to_ns: Option<u64>,
}

/// The server's DSP load, sampled every poll (10 per second).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct LoadSamples {
    pub samples: u64,
    pub mean_pct: f64,
    pub max_pct: f64,
}

impl LoadSamples {
    fn add(&mut self, pct: f64) {
        if !pct.is_finite() {
            return;
        }
        self.samples += 1;
        self.mean_pct += (pct - self.mean_pct) / self.samples as f64;
        self.max_pct = self.max_pct.max(pct);
    }
}

/// What `watch` recorded.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct WatchResults {
    pub server: ServerInfo,
    /// How long the watch ran, gaps included, ns.
    pub watched_ns: u64,
    pub xruns: Vec<WatchXrun>,
    /// Xrun notifications that arrived faster than the watcher drained them (their count
    /// is known, their details are not): never silent.
    #[serde(default)]
    pub xruns_lost: u64,
    pub dsp_load: LoadSamples,
    /// `jack_get_max_delayed_usecs` at the end, µs.
    #[serde(default)]
    pub max_delayed_us: f64,
    #[serde(default)]
    pub gaps: Vec<WatchGap>,
    /// What `--forensics` would add, or why it is off; None when it ran.
    #[serde(default)]
    pub forensics_note: Option<String>,
    /// `--forensics`: each client's real-time thread, its busy time and wake-up delay per
    /// cycle, and the xruns it was late in.
    #[serde(default)]
    pub clients: Vec<clients::ClientTiming>,
    /// `--forensics`: the attribution of each late client's run (what ran on its CPU).
    #[serde(default)]
    pub forensics: Option<crate::trace::Forensics>,
    /// The near-miss histogram: every cycle's headroom on PipeWire; on JACK (`--forensics`)
    /// that of the cycles the flight recorder kept (`of_cycles` says of how many).
    #[serde(default)]
    pub headroom: Option<cycles::Headroom>,
    /// Each client's or node's busy time per cycle (PipeWire; JACK with `--forensics`,
    /// over the cycles kept).
    #[serde(default)]
    pub busy_histograms: Vec<cycles::BusyHistogram>,
    /// The worst xrun's cycle, one lane per node (PipeWire).
    #[serde(default)]
    pub worst_cycle: Option<cycles::CycleTimeline>,
    /// `--forensics`: when its trace began, ns after the attach. Setting the trace up takes
    /// about a second; an xrun before this came while it did, and no trace covers it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traced_from_ns: Option<u64>,
    /// The xruns the same graph would have had at ½×, 2× and 4× the period, from every
    /// cycle's stall and busy time (`sizes`; PipeWire, JACK with `--forensics`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_sizes: Option<sizes::OtherSizes>,
    /// Raspberry Pi: the firmware's throttled word over the watch (read every second),
    /// where the board has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soc_throttle: Option<crate::system::throttle::ThrottleRecord>,
    /// `--forensics` with sampling: the code inside each client thread per cycle (plugin,
    /// host, library, kernel), and what held each late run (`inside`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inside: Option<inside::InsideSummary>,
}

impl WatchResults {
    /// Xruns seen, lost ones included.
    pub fn total_xruns(&self) -> u64 {
        (self.xruns.len() as u64).saturating_add(self.xruns_lost)
    }
}

/// The live counters, shared with whoever wants a snapshot (a status line, a metrics
/// endpoint): atomics only, written by the watcher's loop.
#[derive(Debug, Default)]
pub struct Live {
    xruns: AtomicU64,
    lost: AtomicU64,
    worst_delay_ns: AtomicU64,
    /// DSP load in thousandths of a percent.
    dsp_load_milli: AtomicU32,
    dsp_load_max_milli: AtomicU32,
    watched_ns: AtomicU64,
    gaps: AtomicU64,
    server_up: AtomicBool,
    frames: AtomicU32,
    rate: AtomicU32,
}

/// One reading of [`Live`] (each field is read atomically; a snapshot taken while an xrun
/// is being counted may show the count before the delay: harmless).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LiveSnapshot {
    pub xruns: u64,
    pub lost: u64,
    pub worst_delay_ns: u64,
    pub dsp_load_pct: f64,
    pub dsp_load_max_pct: f64,
    pub watched_ns: u64,
    pub gaps: u64,
    pub server_up: bool,
    pub frames: u32,
    pub rate: u32,
}

impl Live {
    pub fn snapshot(&self) -> LiveSnapshot {
        let r = Ordering::Relaxed;
        LiveSnapshot {
            xruns: self.xruns.load(r),
            lost: self.lost.load(r),
            worst_delay_ns: self.worst_delay_ns.load(r),
            dsp_load_pct: self.dsp_load_milli.load(r) as f64 / 1000.0,
            dsp_load_max_pct: self.dsp_load_max_milli.load(r) as f64 / 1000.0,
            watched_ns: self.watched_ns.load(r),
            gaps: self.gaps.load(r),
            server_up: self.server_up.load(r),
            frames: self.frames.load(r),
            rate: self.rate.load(r),
        }
    }

    fn server(&self, s: &ServerInfo, up: bool) {
        self.server_up.store(up, Ordering::Relaxed);
        self.frames.store(s.frames, Ordering::Relaxed);
        self.rate.store(s.rate, Ordering::Relaxed);
    }

    fn load(&self, pct: f64) {
        let m = (pct.clamp(0.0, 1e6) * 1000.0) as u32;
        self.dsp_load_milli.store(m, Ordering::Relaxed);
        self.dsp_load_max_milli.fetch_max(m, Ordering::Relaxed);
    }

    fn xrun(&self, x: &WatchXrun) {
        self.xruns.fetch_add(1, Ordering::Relaxed);
        let d = (x.delayed_us.max(0.0) * 1000.0) as u64;
        self.worst_delay_ns.fetch_max(d, Ordering::Relaxed);
    }
}

/// What the watch tells its caller as it goes (the CLI prints them).
#[derive(Debug, Clone)]
pub enum Event<'a> {
    /// Attached; the server as found.
    Attached(&'a ServerInfo),
    Xrun(&'a WatchXrun, &'a ServerInfo),
    /// JACK with `--forensics`: xrun N's late client, from the trace read so far (the
    /// summary's, from everything kept, may differ).
    Late(u64, &'a clients::LateClient),
    /// Notifications lost (counted, not detailed).
    Lost(u64),
    /// About once a second.
    Tick(LiveSnapshot),
    /// The server went away; `follow` says whether the watch waits for it.
    ServerGone {
        follow: bool,
    },
    /// It answered again after `gap_ns`.
    ServerBack(&'a ServerInfo, u64),
}

/// A server adapter: attached to one server until it goes away.
pub trait Adapter {
    fn info(&self) -> ServerInfo;
    /// Xruns since the last poll, into `out` (at_ns relative to `t0`), and how many were
    /// lost; false once the server has gone away.
    fn poll(&mut self, t0: u64, out: &mut Vec<WatchXrun>) -> (bool, u64);
    /// The server's DSP load now, %.
    fn dsp_load(&self) -> f64;
    /// The server's largest driver delay so far, µs.
    fn max_delayed_us(&self) -> f64;
    /// The session's client names by process id (for naming their threads).
    fn client_names(&self) -> std::collections::HashMap<i32, Vec<String>> {
        Default::default()
    }
    /// The watch ends: report xruns still being completed at the next poll.
    fn flush(&mut self) {}
    /// Add what the adapter kept of every cycle (timings, histograms) to the result.
    fn finish(&mut self, _t0: u64, _r: &mut WatchResults) {}
    /// The adapter names each xrun's late client itself (PipeWire's profiler).
    fn names_late(&self) -> bool {
        false
    }
}

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
        r.inside = Some(s.finish(crate::rt::clock::monotonic_ns(), &mut r.xruns, &sampled));
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
