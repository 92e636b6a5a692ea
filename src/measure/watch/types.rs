//! The watch's types: what it is asked (`WatchConfig`), what it records (`WatchResults`,
//! `WatchXrun`), its live counters (`Live`) and the adapter contract every server's adapter
//! implements. The adapters import these, not the loop (`run.rs`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use super::{clients, cycles, inside, sizes};

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
    pub(super) fn add(&mut self, pct: f64) {
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
    pub(super) lost: AtomicU64,
    worst_delay_ns: AtomicU64,
    /// DSP load in thousandths of a percent.
    dsp_load_milli: AtomicU32,
    dsp_load_max_milli: AtomicU32,
    pub(super) watched_ns: AtomicU64,
    pub(super) gaps: AtomicU64,
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

    pub(super) fn server(&self, s: &ServerInfo, up: bool) {
        self.server_up.store(up, Ordering::Relaxed);
        self.frames.store(s.frames, Ordering::Relaxed);
        self.rate.store(s.rate, Ordering::Relaxed);
    }

    pub(super) fn load(&self, pct: f64) {
        let m = (pct.clamp(0.0, 1e6) * 1000.0) as u32;
        self.dsp_load_milli.store(m, Ordering::Relaxed);
        self.dsp_load_max_milli.fetch_max(m, Ordering::Relaxed);
    }

    pub(super) fn xrun(&self, x: &WatchXrun) {
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

/// Wall-clock time for monotonic stamps: the servers' notifications are timed on
/// CLOCK_MONOTONIC (cheap, never steps) and shown in wall time, through the offset between
/// the two clocks when the adapter attached.
#[derive(Debug, Clone, Copy)]
pub struct WallClock {
    offset_ns: i128,
}

impl WallClock {
    pub fn now() -> WallClock {
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as i128)
            .unwrap_or(0);
        WallClock {
            offset_ns: wall - crate::rt::clock::monotonic_ns() as i128,
        }
    }

    /// A CLOCK_MONOTONIC stamp as RFC 3339 wall time, to the millisecond.
    pub fn format(&self, mono_ns: u64) -> String {
        let ns = (mono_ns as i128 + self.offset_ns).max(0) as u128;
        let t = std::time::UNIX_EPOCH + Duration::from_nanos(ns as u64);
        humantime::format_rfc3339_millis(t).to_string()
    }
}

impl WatchXrun {
    /// The late run's span: the trace's run on JACK, the profiler's awake-to-finish on
    /// PipeWire — from the signal for a node that woke late, whose thread may have been busy
    /// with other nodes meanwhile (the daemon's data thread running a filter-chain's plugins).
    pub fn late_span(&self) -> Option<(u64, u64)> {
        let l = self.late.as_ref()?;
        l.span_ns.or_else(|| {
            let n = self.node_run?;
            if l.woke_late {
                // Its finish, if any, may be the previous cycle's.
                let to = n.finish_ns.filter(|&f| f > n.signal_ns);
                return Some((n.signal_ns, to.unwrap_or(n.deadline_ns).max(n.signal_ns)));
            }
            Some((n.awake_ns?, n.finish_ns.unwrap_or(n.deadline_ns)))
        })
    }
}
