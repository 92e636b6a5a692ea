//! What ran inside the late client (`watch --forensics`, methods.md "Inside the late
//! client"): each session thread sampled on its own CPU clock (`trace::sample`), each
//! sample's address mapped to its shared object (`trace::objects`) and the object to the
//! plugin a user knows (an LV2 bundle's plugin, a `.clap` or `.vst3` file, a LADSPA
//! library) or to the host, a system library or the kernel.
//!
//! Per thread and object, each period of the graph's clock is a bin: the samples in it
//! times the sampling period are that object's CPU time in that cycle. The per-cycle
//! figures are kept as counts (a histogram by samples per cycle), so hours of watching
//! cost the same memory. The samples themselves are kept only around the xruns (the pins
//! the flight recorder keeps too): the last 2 s in a ring, and of older ones those inside
//! a pin, at most [`KEEP_MAX`] of them.

use super::names::ClientThread;
use crate::trace::objects::{Maps, Symbols};
use crate::trace::sample::{Sample, ThreadSampler};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet, VecDeque};

/// Samples older than this leave the ring (kept only when a pin covers them).
const RECENT_NS: u64 = 2_000_000_000;
/// At most this many samples are kept around xruns (about 6 MB).
const KEEP_MAX: usize = 250_000;
/// At most this many threads are sampled (each has a 68 KiB ring).
const MAX_THREADS: usize = 64;
/// A map is re-read for an address it does not hold at most this often.
const MAPS_EVERY_NS: u64 = 500_000_000;
/// A per-cycle count above this is counted as this (a period of 1 s at 250 µs).
const MAX_PER_CYCLE: usize = 4096;

/// What a piece of code is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CodeKind {
    Lv2,
    Clap,
    Vst3,
    Ladspa,
    /// The host's own code: its executable and the libraries it ships.
    Host,
    /// The C library, the loader, libm, libstdc++ and the like.
    System,
    Kernel,
    /// Code no file maps (a JIT) or a process gone before its map was read.
    Unknown,
}

/// A piece of code as the summary names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Code {
    /// The plugin's name (LV2: `doap:name`; CLAP, VST3, LADSPA: the file's), else the
    /// object's file name (`libc.so.6`, `[kernel]`).
    pub name: String,
    pub kind: CodeKind,
    /// The shared object's path (empty for the kernel).
    #[serde(default)]
    pub object: String,
    /// The plugin's identifiers (LV2 URIs) where the object says.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ids: Vec<String>,
}

impl CodeTime {
    /// Its thread as the user knows it: `client (process[pid])`.
    pub fn who(&self) -> String {
        super::names::display(&self.client, &self.process, self.pid)
    }
}

/// What held the late client's thread in one xrun's late run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Held {
    pub code: Code,
    /// The function most of its samples fell in, where the object names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
    /// Its share of the run's samples, 0–1.
    pub share: f64,
    /// Its CPU time in the run (samples × period), ns.
    pub ns: u64,
    /// Its usual CPU time per cycle in that thread (its mean per period over the span the
    /// thread was sampled), ns.
    pub usual_ns: u64,
    /// The run's samples in all.
    pub samples: u64,
}

/// One piece of code in one thread over the watch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CodeTime {
    /// The client thread's name (its JACK client, PipeWire node, or process/thread).
    pub client: String,
    /// Its process: comm and pid.
    #[serde(default)]
    pub process: String,
    #[serde(default)]
    pub pid: i32,
    pub tid: i32,
    pub code: Code,
    /// Its CPU time per period of the graph, over the periods from the thread's first
    /// sample to its last, ns (samples × sampling period: a cycle with less than one
    /// sampling period of it reads 0 or one, the mean is unbiased).
    pub mean_ns: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    /// Cycles in which it held the thread most.
    pub top_cycles: u64,
    /// Xruns whose late run it held most.
    pub xruns_led: u64,
}

/// What sampling inside the session's threads found.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct InsideSummary {
    /// The sampling period, ns of each thread's own CPU time.
    pub sample_period_ns: u64,
    /// Threads sampled.
    pub threads: u64,
    pub samples: u64,
    /// Samples the kernel dropped (a ring full between two drains).
    pub lost: u64,
    /// Why some threads could not be sampled (the first refusal), if any were refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// Per thread and code, most time first (at most 12 per thread).
    pub code: Vec<CodeTime>,
}

#[derive(Debug, Clone, Copy)]
struct Kept {
    time_ns: u64,
    tid: i32,
    obj: u32,
    /// File offset in the object (for its symbol).
    off: u64,
}

#[derive(Debug, Default)]
struct Stat {
    /// Cycles by its samples in them (index = samples; zeros are not counted here).
    per_cycle: Vec<u64>,
    samples: u64,
    top: u64,
    led: u64,
}

/// The sampler of a watch: opened on the session's threads, polled by the watch's loop.
pub struct Inside {
    period_ns: u64,
    cycle_ns: u64,
    samplers: Vec<(ThreadSampler, i32)>,
    tried: HashSet<i32>,
    maps: HashMap<i32, (Maps, u64)>,
    objects: Vec<String>,
    index: HashMap<String, u32>,
    recent: VecDeque<Kept>,
    kept: Vec<Kept>,
    pins: Vec<(u64, u64)>,
    /// Per thread: the bin (cycle) being counted and its counts per object.
    bins: HashMap<i32, (u64, Vec<(u32, u32)>)>,
    /// Per thread: the first and last cycle it was sampled in.
    span: HashMap<i32, (u64, u64)>,
    stats: HashMap<(i32, u32), Stat>,
    samples: u64,
    lost: u64,
    refused: Option<String>,
    buf: Vec<Sample>,
    bytes: Vec<u8>,
    /// Each object's name, found once it is asked for.
    named: Vec<Option<Code>>,
    lv2: Lv2Names,
    symbols: HashMap<u32, Option<Symbols>>,
}

const KERNEL: u32 = 0;
const UNKNOWN: u32 = 1;

impl Inside {
    /// A sampler for a graph of period `cycle_ns`, sampling every `period_ns` of each
    /// thread's CPU time.
    pub fn new(period_ns: u64, cycle_ns: u64) -> Inside {
        Inside {
            period_ns: period_ns.max(10_000),
            cycle_ns: cycle_ns.max(1),
            samplers: Vec::new(),
            tried: HashSet::new(),
            maps: HashMap::new(),
            objects: vec!["[kernel]".into(), "[unknown]".into()],
            index: HashMap::new(),
            recent: VecDeque::new(),
            kept: Vec::new(),
            pins: Vec::new(),
            bins: HashMap::new(),
            span: HashMap::new(),
            stats: HashMap::new(),
            samples: 0,
            lost: 0,
            refused: None,
            buf: Vec::new(),
            bytes: Vec::new(),
            named: Vec::new(),
            lv2: Lv2Names::default(),
            symbols: HashMap::new(),
        }
    }

    /// Start sampling the threads not sampled yet (clients come and go during a watch).
    pub fn add(&mut self, threads: &[ClientThread]) {
        for t in threads {
            if self.samplers.len() >= MAX_THREADS || !self.tried.insert(t.tid) {
                continue;
            }
            match ThreadSampler::open(t.tid, self.period_ns) {
                Ok(s) => self.samplers.push((s, t.pid)),
                Err(e) => {
                    self.refused
                        .get_or_insert_with(|| format!("perf_event_open on thread {}: {e}", t.tid));
                }
            }
        }
    }

    /// Keep the samples of `from..to` (absolute ns) past the ring's 2 s.
    pub fn pin(&mut self, from_ns: u64, to_ns: u64) {
        self.pins.push((from_ns, to_ns));
        crate::trace::flight::merge(&mut self.pins);
    }

    /// Pin the spans around the xruns just seen (`pins`), then read every ring.
    pub fn poll_after(&mut self, now: u64, pins: impl Iterator<Item = (u64, u64)>) {
        for (from, to) in pins {
            self.pin(from, to);
        }
        self.poll(now);
    }

    /// Read every ring; `now` is the watch's monotonic time.
    pub fn poll(&mut self, now: u64) {
        let mut samplers = std::mem::take(&mut self.samplers);
        for (s, pid) in &mut samplers {
            self.buf.clear();
            self.lost = self
                .lost
                .saturating_add(s.drain(&mut self.buf, &mut self.bytes));
            let buf = std::mem::take(&mut self.buf);
            for smp in &buf {
                self.take(*smp, *pid, now);
            }
            self.buf = buf;
        }
        self.samplers = samplers;
        while self
            .recent
            .front()
            .is_some_and(|k| k.time_ns + RECENT_NS < now)
        {
            if let Some(k) = self.recent.pop_front() {
                self.keep_if_pinned(k);
            }
        }
    }

    fn keep_if_pinned(&mut self, k: Kept) {
        if self.kept.len() < KEEP_MAX
            && self
                .pins
                .iter()
                .any(|&(a, b)| k.time_ns >= a && k.time_ns <= b)
        {
            self.kept.push(k);
        }
    }

    fn take(&mut self, s: Sample, pid: i32, now: u64) {
        self.samples += 1;
        let (obj, off) = if s.user {
            self.object_of(pid, s.ip, now)
        } else {
            (KERNEL, 0)
        };
        let bin = s.time_ns / self.cycle_ns;
        let span = self.span.entry(s.tid).or_insert((bin, bin));
        *span = (span.0.min(bin), span.1.max(bin));
        let cur = self.bins.entry(s.tid).or_insert((bin, Vec::new()));
        if cur.0 != bin {
            let (_, counts) = std::mem::replace(cur, (bin, Vec::new()));
            self.close(s.tid, &counts);
        }
        let counts = &mut self.bins.get_mut(&s.tid).expect("inserted above").1;
        match counts.iter_mut().find(|c| c.0 == obj) {
            Some(c) => c.1 += 1,
            None => counts.push((obj, 1)),
        }
        self.recent.push_back(Kept {
            time_ns: s.time_ns,
            tid: s.tid,
            obj,
            off,
        });
    }

    /// A thread's cycle ended: count each object's samples in it.
    fn close(&mut self, tid: i32, counts: &[(u32, u32)]) {
        if counts.is_empty() {
            return;
        }
        let top = counts.iter().max_by_key(|c| c.1).map(|c| c.0);
        for &(obj, n) in counts {
            let st = self.stats.entry((tid, obj)).or_default();
            let i = (n as usize).min(MAX_PER_CYCLE);
            if st.per_cycle.len() <= i {
                st.per_cycle.resize(i + 1, 0);
            }
            st.per_cycle[i] += 1;
            st.samples += n as u64;
            if Some(obj) == top {
                st.top += 1;
            }
        }
    }

    /// The object holding `ip` in process `pid` and the file offset; its map is re-read
    /// when it holds no such address (a plugin loaded since), at most every 0.5 s.
    fn object_of(&mut self, pid: i32, ip: u64, now: u64) -> (u32, u64) {
        let fresh = |now| (Maps::of(pid), now);
        let entry = self.maps.entry(pid).or_insert_with(|| fresh(now));
        if entry.0.find(ip).is_none() && now.saturating_sub(entry.1) >= MAPS_EVERY_NS {
            *entry = fresh(now);
        }
        let Some((m, off)) = entry.0.find(ip) else {
            return (UNKNOWN, 0);
        };
        let path = m.path.clone();
        let next = self.objects.len() as u32;
        let obj = *self.index.entry(path.clone()).or_insert(next);
        if obj == next {
            self.objects.push(path);
        }
        (obj, off)
    }

    /// The watch ended: what held each late run (`late`: its thread and span, one entry per
    /// xrun, None where no late run is known) and each thread's code over the watch.
    pub fn finish(
        mut self,
        now: u64,
        late: &[Option<(i32, u64, u64)>],
        threads: &[ClientThread],
    ) -> (InsideSummary, Vec<Option<Held>>) {
        self.poll(now);
        for k in std::mem::take(&mut self.recent) {
            self.keep_if_pinned(k);
        }
        for (tid, (_, counts)) in std::mem::take(&mut self.bins) {
            self.close(tid, &counts);
        }
        let mut held = Vec::with_capacity(late.len());
        for &run in late {
            let h = run.and_then(|(tid, from, to)| {
                let (obj, h) = self.held(tid, from, to)?;
                if let Some(st) = self.stats.get_mut(&(tid, obj)) {
                    st.led += 1;
                }
                Some(h)
            });
            held.push(h);
        }
        let summary = InsideSummary {
            sample_period_ns: self.period_ns,
            threads: self.samplers.len() as u64,
            samples: self.samples,
            lost: self.lost,
            refused: self.refused.clone(),
            code: self.code_times(threads),
        };
        (summary, held)
    }

    /// What held thread `tid` in its run `span` (absolute ns), from the samples read so
    /// far: a live look at an xrun a moment after it, its run ended before the last poll.
    pub fn held_now(&mut self, tid: i32, span: Option<(u64, u64)>) -> Option<Held> {
        let (from, to) = span?;
        self.held(tid, from, to).map(|(_, h)| h)
    }

    /// What held thread `tid` most in `from..to`, and its object.
    fn held(&mut self, tid: i32, from: u64, to: u64) -> Option<(u32, Held)> {
        let inside = |k: &&Kept| k.tid == tid && k.time_ns >= from && k.time_ns <= to;
        let run: Vec<Kept> = self
            .kept
            .iter()
            .chain(self.recent.iter())
            .filter(inside)
            .copied()
            .collect();
        let mut counts: HashMap<u32, u64> = HashMap::new();
        for k in &run {
            *counts.entry(k.obj).or_default() += 1;
        }
        let (&obj, &n) = counts
            .iter()
            .max_by_key(|(o, n)| (**n, std::cmp::Reverse(**o)))?;
        let mut by_sym: HashMap<String, u64> = HashMap::new();
        if let Some(s) = self.symbols_of(obj) {
            for k in run.iter().filter(|k| k.obj == obj) {
                if let Some(f) = s.at_offset(k.off) {
                    *by_sym.entry(f.to_string()).or_default() += 1;
                }
            }
        }
        let symbol = by_sym
            .into_iter()
            .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
            .map(|(f, _)| f);
        let cycles = self.cycles(tid).max(1);
        let usual = self.stats.get(&(tid, obj)).map_or(0, |s| s.samples) * self.period_ns / cycles;
        let held = Held {
            code: self.code(obj),
            symbol,
            share: n as f64 / run.len() as f64,
            ns: n * self.period_ns,
            usual_ns: usual,
            samples: run.len() as u64,
        };
        Some((obj, held))
    }

    /// Object `obj` as a user knows it, named once.
    fn code(&mut self, obj: u32) -> Code {
        let i = obj as usize;
        if self.named.len() <= i {
            self.named.resize(i + 1, None);
        }
        if self.named[i].is_none() {
            self.named[i] = Some(name_object(obj, &self.objects[i], &mut self.lv2));
        }
        self.named[i].clone().unwrap_or_else(|| unknown_code(obj))
    }

    /// Object `obj`'s symbols, read once (None: no file, or no ELF).
    fn symbols_of(&mut self, obj: u32) -> Option<&Symbols> {
        let path = self.objects.get(obj as usize)?;
        self.symbols
            .entry(obj)
            .or_insert_with(|| {
                (obj > UNKNOWN)
                    .then(|| Symbols::of(std::path::Path::new(path)))
                    .flatten()
            })
            .as_ref()
    }

    /// The graph's periods from the first to the last a thread was sampled in: a client's
    /// process thread runs in every one, most of them too briefly for a sample.
    fn cycles(&self, tid: i32) -> u64 {
        self.span.get(&tid).map_or(0, |(a, b)| b - a + 1)
    }

    /// Each thread's code over the watch, most time first.
    fn code_times(&mut self, threads: &[ClientThread]) -> Vec<CodeTime> {
        let mut out = Vec::new();
        let keys: Vec<(i32, u32)> = self.stats.keys().copied().collect();
        for (tid, obj) in keys {
            let code = self.code(obj);
            let Some(st) = self.stats.get(&(tid, obj)) else {
                continue;
            };
            let cycles = self.cycles(tid);
            if cycles == 0 || st.samples == 0 {
                continue;
            }
            let zeros = cycles.saturating_sub(st.per_cycle.iter().sum());
            let q = |p: f64| quantile(&st.per_cycle, zeros, p) * self.period_ns;
            let (client, process, pid) = threads.iter().find(|t| t.tid == tid).map_or_else(
                || (format!("thread {tid}"), String::new(), 0),
                |t| (t.name.clone(), t.process.clone(), t.pid),
            );
            out.push(CodeTime {
                client,
                process,
                pid,
                tid,
                code,
                mean_ns: st.samples * self.period_ns / cycles,
                p50_ns: q(0.5),
                p99_ns: q(0.99),
                max_ns: (st.per_cycle.len().saturating_sub(1) as u64) * self.period_ns,
                top_cycles: st.top,
                xruns_led: st.led,
            });
        }
        out.sort_by(|a, b| {
            (
                a.client.as_str(),
                a.tid,
                std::cmp::Reverse(a.mean_ns),
                &a.code.name,
            )
                .cmp(&(
                    b.client.as_str(),
                    b.tid,
                    std::cmp::Reverse(b.mean_ns),
                    &b.code.name,
                ))
        });
        let mut per: HashMap<i32, usize> = HashMap::new();
        out.retain(|c| {
            let n = per.entry(c.tid).or_default();
            *n += 1;
            *n <= 12
        });
        out
    }
}

/// The `p` quantile of counts `hist` (index = samples in a cycle) with `zeros` cycles of 0.
fn quantile(hist: &[u64], zeros: u64, p: f64) -> u64 {
    let total = zeros + hist.iter().skip(1).sum::<u64>() + hist.first().copied().unwrap_or(0);
    if total == 0 {
        return 0;
    }
    let rank = ((p * total as f64).ceil() as u64).clamp(1, total);
    let mut seen = zeros;
    if seen >= rank {
        return 0;
    }
    for (i, &c) in hist.iter().enumerate() {
        seen += c;
        if seen >= rank {
            return i as u64;
        }
    }
    hist.len().saturating_sub(1) as u64
}

/// Object `obj` (at `path`) as a user knows it.
fn name_object(obj: u32, path: &str, lv2: &mut Lv2Names) -> Code {
    match obj {
        KERNEL | UNKNOWN => unknown_code(obj),
        _ => classify(path, lv2),
    }
}

/// The kernel, or code no file maps.
fn unknown_code(obj: u32) -> Code {
    let (name, kind) = if obj == KERNEL {
        ("[kernel]", CodeKind::Kernel)
    } else {
        ("[unknown]", CodeKind::Unknown)
    };
    Code {
        name: name.into(),
        kind,
        object: String::new(),
        ids: Vec::new(),
    }
}

/// The plugins of LV2 bundles, read once each through a world of their own (the watched
/// host's LV2_PATH need not be ours): binary path → (names, URIs).
#[derive(Default)]
struct Lv2Names {
    world: Option<lilv::World>,
    loaded: HashSet<std::path::PathBuf>,
}

impl Lv2Names {
    fn plugins_of(&mut self, bundle: &std::path::Path, binary: &str) -> (Vec<String>, Vec<String>) {
        let world = self.world.get_or_insert_with(lilv::World::new);
        if self.loaded.insert(bundle.to_path_buf()) {
            let dir = format!("{}/", bundle.display());
            world.load_bundle(&world.new_file_uri(None, &dir));
        }
        let want = std::fs::canonicalize(binary).unwrap_or_else(|_| binary.into());
        let (mut names, mut ids) = (Vec::new(), Vec::new());
        for p in world.plugins().iter() {
            let lib = p.library_uri().and_then(|n| n.path()).map(|(_, path)| path);
            let same =
                lib.is_some_and(|l| std::fs::canonicalize(&l).unwrap_or_else(|_| l.into()) == want);
            if same {
                names.extend(p.name().as_str().map(String::from));
                ids.extend(p.uri().as_uri().map(String::from));
            }
        }
        (names, ids)
    }
}

/// What the object at `path` is: a plugin by the folder or file kind that holds it, a
/// system library by its name, else the host's code.
fn classify(path: &str, lv2: &mut Lv2Names) -> Code {
    let p = std::path::Path::new(path);
    let file = p
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.to_string());
    let bundle = |ext: &str| {
        p.ancestors()
            .find(|a| a.extension().is_some_and(|e| e == ext) && a.is_dir())
    };
    let stem = |a: &std::path::Path| {
        a.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let code = |name: String, kind, ids| Code {
        name,
        kind,
        object: path.to_string(),
        ids,
    };
    if let Some(b) = bundle("lv2") {
        let (names, ids) = lv2.plugins_of(b, path);
        let name = if names.is_empty() {
            stem(b)
        } else {
            names.join(" + ")
        };
        return code(name, CodeKind::Lv2, ids);
    }
    if let Some(b) = bundle("vst3") {
        return code(stem(b), CodeKind::Vst3, Vec::new());
    }
    if p.extension().is_some_and(|e| e == "clap") {
        return code(stem(p), CodeKind::Clap, Vec::new());
    }
    if p.parent().is_some_and(|d| d.ends_with("ladspa")) {
        return code(stem(p), CodeKind::Ladspa, Vec::new());
    }
    const SYSTEM: &[&str] = &[
        "libc.so",
        "libc-",
        "ld-linux",
        "libm.so",
        "libm-",
        "libpthread",
        "libstdc++",
        "libgcc_s",
        "libdl",
        "librt",
        "libmvec",
    ];
    if SYSTEM.iter().any(|s| file.starts_with(s)) {
        return code(file, CodeKind::System, Vec::new());
    }
    code(file, CodeKind::Host, Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_count_the_cycles_without_a_sample() {
        // 10 cycles: 6 with none, 3 with 1, 1 with 4.
        let hist = vec![0, 3, 0, 0, 1];
        assert_eq!(quantile(&hist, 6, 0.5), 0);
        assert_eq!(quantile(&hist, 6, 0.7), 1);
        assert_eq!(quantile(&hist, 6, 0.99), 4);
        assert_eq!(quantile(&[], 0, 0.5), 0);
    }

    #[test]
    fn objects_are_named_by_the_plugin_folder_or_file_that_holds_them() {
        let dir = tempfile::tempdir().unwrap();
        let vst = dir.path().join("Surge XT.vst3/Contents/x86_64-linux");
        std::fs::create_dir_all(&vst).unwrap();
        let mut lv2 = Lv2Names::default();
        let c = classify(&vst.join("Surge XT.so").to_string_lossy(), &mut lv2);
        assert_eq!((c.name.as_str(), c.kind), ("Surge XT", CodeKind::Vst3));
        let c = classify("/usr/lib/clap/ZamEQ2.clap", &mut lv2);
        assert_eq!((c.name.as_str(), c.kind), ("ZamEQ2", CodeKind::Clap));
        let c = classify("/usr/lib/ladspa/amp.so", &mut lv2);
        assert_eq!((c.name.as_str(), c.kind), ("amp", CodeKind::Ladspa));
        let c = classify("/usr/lib/x86_64-linux-gnu/libc.so.6", &mut lv2);
        assert_eq!(c.kind, CodeKind::System);
        let c = classify("/usr/lib/ardour7/libardour.so.3", &mut lv2);
        assert_eq!(
            (c.name.as_str(), c.kind),
            ("libardour.so.3", CodeKind::Host)
        );
    }
}
