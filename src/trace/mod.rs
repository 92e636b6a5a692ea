//! Kernel-trace forensics (docs/methods.md "Forensics"): record what ran on the
//! measured CPUs in a private tracefs instance while a measurement runs, then name who took
//! the time of each xrun or latency spike.
//!
//! - [`tracefs`]: finding/mounting tracefs, the instance guard and its removal on every exit
//!   path;
//! - [`raw`]: per-CPU `trace_pipe_raw` pages into the same events (the default reader);
//! - [`parse`]: trace_pipe's text into compact events;
//! - [`attribute`]: pure attribution of windows to culprits, and the culprit table;
//! - [`clients`]: which tasks are other clients (or the server) of the audio session;
//! - [`flight`]: the flight recorder's page history and pins (`watch --forensics`).
//!
//! [`Recorder::start`] is called by the CLI before the measurement, [`Recorder::finish`] after
//! it; the reader is a normal-priority thread that drains the per-CPU binary pipes (or
//! `trace_pipe`) into memory.

pub mod attribute;
pub mod clients;
pub mod flight;
pub mod objects;
pub mod parse;
pub mod raw;
pub mod sample;
pub mod tracefs;

pub use attribute::{
    classify, Blocked, ClassEnv, Culprit, CulpritClass, CulpritKind, CulpritRow, Share, Span,
    WakeVerdict, Window, WindowReport, WindowTimeline,
};
pub use clients::{AudioClient, AudioRole};
pub use parse::Trace;
pub use tracefs::Unusable;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Most windows a result keeps in full (the culprit table covers all of them).
pub const MAX_WINDOWS: usize = 1000;

/// Events kept in memory at most (about 40 bytes each); past it the reader counts them lost.
const MAX_EVENTS: usize = 20_000_000;

/// The `forensics` section of a result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Forensics {
    /// The tracefs instance used.
    pub instance: String,
    /// The CPUs traced.
    pub cpus: Vec<usize>,
    /// Events recorded.
    pub events: u64,
    /// Events the kernel lost (ring buffer overrun or dropped) or the reader could not keep.
    pub lost_events: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lost_per_cpu: Vec<CpuLost>,
    /// Events this kernel lacks (attribution is coarser without them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_events: Vec<String>,
    /// What was explained: `xrun` or `spike` windows.
    pub windows_of: String,
    /// Windows explained (every xrun / spike), of which `windows` keeps the first 1000.
    pub windows_total: u64,
    pub windows: Vec<WindowReport>,
    /// Per culprit and CPU: windows it explained, time it took, worst single intrusion.
    pub culprits: Vec<CulpritRow>,
    /// The CSV of attributed windows, when written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub csv_file: Option<String>,
    /// The worst window (longest from t_ideal to its end) interval by interval, for the
    /// report's timeline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worst: Option<WindowTimeline>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CpuLost {
    pub cpu: usize,
    pub events: u64,
}

/// How the trace is read: per-CPU binary pages (`trace_pipe_raw`, the default: the kernel
/// hands over pages instead of printing every event, ns times) or the text of `trace_pipe`
/// (kept for scripts/bench-forensics, which compares the two; the CLI's hidden
/// `--forensics-reader` defaults to `raw` too).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReaderKind {
    #[default]
    Raw,
    Text,
}

/// A recording in progress. Dropping it stops the reader and removes the instance.
pub struct Recorder {
    inst: tracefs::Instance,
    stop: Arc<AtomicBool>,
    reader: Option<std::thread::JoinHandle<(Trace, u64)>>,
    reader_tid: Arc<std::sync::atomic::AtomicI32>,
    pub stale_removed: Vec<String>,
    flight: Option<Arc<flight::Flight>>,
}

impl Recorder {
    /// Set up an instance on `cpus` sized for `duration_ns`, start reading, turn tracing on.
    pub fn start(cpus: &[usize], duration_ns: u64, kind: ReaderKind) -> Result<Recorder, Unusable> {
        Recorder::start_with(cpus, duration_ns, kind, None)
    }

    /// [`Recorder::start`] keeping only what `flight` pins (and its recent history) of the
    /// binary reader's pages; the text reader keeps everything.
    pub fn start_with(
        cpus: &[usize],
        duration_ns: u64,
        kind: ReaderKind,
        flight: Option<Arc<flight::Flight>>,
    ) -> Result<Recorder, Unusable> {
        // The text reader keeps everything: its recording covers all of the time.
        let flight = flight.filter(|_| kind == ReaderKind::Raw);
        let fs = tracefs::discover()?;
        let stale_removed = tracefs::sweep_stale(&fs);
        let inst = tracefs::Instance::create(fs, cpus, duration_ns)?;
        let open = |rel: &str| {
            inst.open_pipe(rel)
                .map_err(|e| Unusable(format!("cannot open {rel}: {e}")))
        };
        let source = match kind {
            ReaderKind::Text => Source::Text(open("trace_pipe")?),
            ReaderKind::Raw => Source::Raw(
                inst.cpus
                    .iter()
                    .map(|&c| Ok((c as u16, open(&format!("per_cpu/cpu{c}/trace_pipe_raw"))?)))
                    .collect::<Result<Vec<_>, Unusable>>()?,
                raw::Formats::load(&inst.dir, tracefs::EVENTS),
                inst.subbuf_size(),
                flight.clone(),
            ),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let reader_tid = Arc::new(std::sync::atomic::AtomicI32::new(0));
        let t2 = reader_tid.clone();
        let reader = std::thread::Builder::new()
            .name("xrunlab-trace".into())
            .spawn(move || {
                // SAFETY: gettid has no preconditions.
                t2.store(unsafe { libc::gettid() }, Ordering::SeqCst);
                match source {
                    Source::Text(pipe) => read_pipe(pipe, &s2),
                    Source::Raw(pipes, formats, size, flight) => {
                        read_raw(pipes, &formats, size, flight.as_deref(), &s2)
                    }
                }
            })
            .map_err(|e| Unusable(format!("cannot start the trace reader: {e}")))?;
        let mut r = Recorder {
            inst,
            stop,
            reader: Some(reader),
            reader_tid,
            stale_removed,
            flight,
        };
        r.inst
            .set_on(true)
            .map_err(|e| Unusable(format!("cannot turn tracing on: {e}")))?;
        // The reader must be reading before the measurement starts: a first empty poll.
        std::thread::sleep(Duration::from_millis(5));
        if r.reader.as_ref().is_some_and(|h| h.is_finished()) {
            r.stop_reader();
            return Err(Unusable("the trace reader stopped at once".into()));
        }
        Ok(r)
    }

    /// What the flight recorder's history holds from `from_ns` to `to_ns`, as a recording
    /// of that range, while the trace goes on ([`flight::Flight::look`]); None without a
    /// flight recorder or without an answer within `wait`.
    pub fn look(&self, from_ns: u64, to_ns: u64, wait: Duration) -> Option<Recording> {
        let trace = self.flight.as_ref()?.look(from_ns, to_ns, wait)?;
        Some(Recording {
            coverage: vec![(from_ns, to_ns)],
            instance: self.inst.name.clone(),
            cpus: self.inst.cpus.clone(),
            missing_events: Vec::new(),
            reader_dropped: 0,
            reader_tid: self.reader_tid.load(Ordering::SeqCst),
            trace,
            removal_error: None,
        })
    }

    pub fn instance_name(&self) -> &str {
        &self.inst.name
    }

    pub fn missing_events(&self) -> &[String] {
        &self.inst.missing_events
    }

    fn stop_reader(&mut self) -> Option<(Trace, u64)> {
        let _ = self.inst.set_on(false);
        self.stop.store(true, Ordering::SeqCst);
        let out = self.reader.take().and_then(|h| h.join().ok());
        self.inst.pipe_closed();
        out
    }

    /// Stop, read what is left, count the lost events and remove the instance.
    pub fn finish(mut self) -> Recording {
        let (mut trace, reader_dropped) = self.stop_reader().unwrap_or_default();
        let per_cpu = self.inst.lost_per_cpu();
        for &(cpu, n) in &per_cpu {
            trace.add_lost(cpu as u16, n);
        }
        let removal = self.inst.remove().err().map(|e| {
            format!(
                "trace instance {} could not be removed: {e}",
                self.inst.dir.display()
            )
        });
        Recording {
            coverage: self.flight.as_ref().map(|f| f.pins()).unwrap_or_default(),
            instance: self.inst.name.clone(),
            cpus: self.inst.cpus.clone(),
            missing_events: self.inst.missing_events.clone(),
            reader_dropped,
            reader_tid: self.reader_tid.load(Ordering::SeqCst),
            trace,
            removal_error: removal,
        }
    }
}

impl Recorder {
    /// Stop and explain `windows` (`what`: "xrun", "spike", "overrun"): the section and the
    /// warnings it adds (lost events, an instance left behind).
    pub fn explain(self, what: &str, windows: &[Window], ours: &[i32]) -> (Forensics, Vec<String>) {
        let recording = self.finish();
        let f = recording.explain(what, windows, ours);
        let mut w = recording.warnings(&f);
        if let Some(dir) = std::env::var_os(DUMP_ENV) {
            // A debugging aid that failed is said like any warning (on stderr by the CLI).
            if let Err(e) = dump_windows(&recording.trace, windows, std::path::Path::new(&dir)) {
                w.push(format!("{DUMP_ENV}: {e}"));
            }
        }
        (f, w)
    }
}

/// The warning a section with lost events carries. The kernel's losses are counted per CPU;
/// the rest are events the reader read but did not keep, past its memory bound: a user who
/// sees them should shorten the run or trace fewer CPUs, not grow the ring buffer.
pub fn lost_warning(f: &Forensics) -> Option<String> {
    let kernel: u64 = f.lost_per_cpu.iter().map(|c| c.events).sum();
    let kept_not = f.lost_events.saturating_sub(kernel);
    if kept_not == 0 {
        return (f.lost_events > 0).then(|| {
            format!(
                "forensics: {} trace events were lost (ring buffer overrun); windows touching them are marked and their figures are lower bounds",
                f.lost_events
            )
        });
    }
    Some(format!(
        "forensics: {} trace events were lost: {kernel} overwritten in the kernel's ring buffer, {kept_not} read after xrunlab's bound on kept trace ({} MiB, {} million events) was reached; windows after that bound show their time as unaccounted, others touching lost events are marked and their figures are lower bounds",
        f.lost_events,
        MAX_RAW_BYTES >> 20,
        MAX_EVENTS / 1_000_000
    ))
}

/// Whether a recording could start here, leaving tracefs as found (mounted only for the
/// look when it was not): the suite asks once before turning `--forensics` on for its
/// stages.
pub fn probe() -> Result<(), Unusable> {
    let fs = tracefs::discover()?;
    if fs.mounted_by_us {
        if let Ok(t) = std::ffi::CString::new(fs.root.as_os_str().as_encoded_bytes()) {
            // SAFETY: t is a valid NUL-terminated path.
            unsafe { libc::umount2(t.as_ptr(), 0) };
        }
    }
    Ok(())
}

impl Forensics {
    /// One section for a measurement made of several traced parts (load trials, sched rows,
    /// latencytest phases): events, losses and windows summed, the culprit tables merged
    /// row by row (exact even where a part kept only its first windows). Window ids stay
    /// those of their part. None without parts.
    pub fn merged<'a>(parts: impl IntoIterator<Item = &'a Forensics>) -> Option<Forensics> {
        let mut it = parts.into_iter();
        let mut m = it.next()?.clone();
        m.csv_file = None;
        for p in it {
            for &c in &p.cpus {
                if !m.cpus.contains(&c) {
                    m.cpus.push(c);
                }
            }
            m.events += p.events;
            m.lost_events += p.lost_events;
            for l in &p.lost_per_cpu {
                match m.lost_per_cpu.iter_mut().find(|x| x.cpu == l.cpu) {
                    Some(x) => x.events += l.events,
                    None => m.lost_per_cpu.push(*l),
                }
            }
            for e in &p.missing_events {
                if !m.missing_events.contains(e) {
                    m.missing_events.push(e.clone());
                }
            }
            m.windows_total += p.windows_total;
            // The worst window of the whole: the longest of the parts' worst.
            let len = |t: &WindowTimeline| t.end_ns.saturating_sub(t.t_ideal_ns);
            if let Some(w) = &p.worst {
                if m.worst.as_ref().is_none_or(|x| len(w) > len(x)) {
                    m.worst = Some(w.clone());
                }
            }
            let room = MAX_WINDOWS.saturating_sub(m.windows.len());
            m.windows.extend(p.windows.iter().take(room).cloned());
            for r in &p.culprits {
                match m
                    .culprits
                    .iter_mut()
                    .find(|x| x.culprit == r.culprit && x.cpu == r.cpu)
                {
                    Some(x) => {
                        x.explained += r.explained;
                        x.present += r.present;
                        x.total_ns = x.total_ns.saturating_add(r.total_ns);
                        x.worst_ns = x.worst_ns.max(r.worst_ns);
                    }
                    None => m.culprits.push(r.clone()),
                }
            }
        }
        m.cpus.sort_unstable();
        m.lost_per_cpu.sort_by_key(|c| c.cpu);
        attribute::sort_culprit_rows(&mut m.culprits);
        Some(m)
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.stop_reader();
    }
}

/// A finished recording.
pub struct Recording {
    /// The times the trace holds in full when a flight recorder kept only parts of it
    /// (sorted, disjoint); empty: all of it, from start to end.
    pub coverage: Vec<(u64, u64)>,
    pub instance: String,
    pub cpus: Vec<usize>,
    pub missing_events: Vec<String>,
    /// Events read but not kept (past MAX_EVENTS).
    pub reader_dropped: u64,
    /// The reader thread is ours too: its time is named as ours, not another task's.
    pub reader_tid: i32,
    pub trace: Trace,
    pub removal_error: Option<String>,
}

impl Recording {
    /// Explain `windows` (`what`: "xrun" or "spike"); `ours` are all our thread ids.
    pub fn explain(&self, what: &str, windows: &[Window], ours: &[i32]) -> Forensics {
        self.explain_each(what, windows, ours, &mut |_| {})
    }

    /// [`Recording::explain`], handing `each` every window's report — those past the
    /// [`MAX_WINDOWS`] the result keeps too, so that what a caller takes from a report (a
    /// watch's culprit and class per xrun) covers every window.
    pub fn explain_each(
        &self,
        what: &str,
        windows: &[Window],
        ours: &[i32],
        each: &mut dyn FnMut(&WindowReport),
    ) -> Forensics {
        let mut ours = ours.to_vec();
        ours.push(self.reader_tid);
        let (mut reports, mut worst) = attribute::attribute_all(&self.trace, windows, &ours);
        // Other audio clients are looked up while they still run: now, not at report time.
        let clients = clients::identify(
            &crate::system::Root::default(),
            &attribute::task_pids(&reports, worst.as_ref()),
            std::process::id() as i32,
        );
        attribute::mark_clients(&mut reports, worst.as_mut(), &clients);
        reports.iter().for_each(&mut *each);
        let culprits = attribute::culprit_table(&reports);
        let mut lost_per_cpu: Vec<CpuLost> = self
            .trace
            .lost
            .iter()
            .filter(|(_, &n)| n > 0)
            .map(|(&c, &n)| CpuLost {
                cpu: c as usize,
                events: n,
            })
            .collect();
        lost_per_cpu.sort_by_key(|c| c.cpu);
        let windows_total = reports.len() as u64;
        let mut kept = reports;
        kept.truncate(MAX_WINDOWS);
        Forensics {
            instance: self.instance.clone(),
            cpus: self.cpus.clone(),
            events: self.trace.events.len() as u64,
            lost_events: self.trace.lost_total() + self.reader_dropped,
            lost_per_cpu,
            missing_events: self.missing_events.clone(),
            windows_of: what.into(),
            windows_total,
            windows: kept,
            culprits,
            csv_file: None,
            worst,
        }
    }

    /// Warnings a result must carry: lost events, an instance left behind.
    pub fn warnings(&self, f: &Forensics) -> Vec<String> {
        let mut w: Vec<String> = lost_warning(f).into_iter().collect();
        if let Some(e) = &self.removal_error {
            w.push(format!("forensics: {e}"));
        }
        w
    }
}

/// A directory to write each window's events into as kernel text (`window-ID.txt`, at most
/// [`DUMP_MAX`] windows): what a puzzling attribution was made from, and the start of a test
/// fixture. A debugging aid, not a user option.
pub const DUMP_ENV: &str = "XRUNLAB_FORENSICS_DUMP";
const DUMP_MAX: usize = 100;
/// Events kept before a window's t_ideal and after its end.
const DUMP_BEFORE_NS: u64 = 5_000_000;
const DUMP_AFTER_NS: u64 = 1_000_000;

fn dump_windows(trace: &Trace, windows: &[Window], dir: &std::path::Path) -> std::io::Result<()> {
    use std::io::Write;
    std::fs::create_dir_all(dir)?;
    let mut by_time: Vec<&parse::Event> = trace.events.iter().collect();
    by_time.sort_by_key(|e| (e.ts_ns, e.cpu));
    for w in windows.iter().take(DUMP_MAX) {
        let (a, b) = (
            w.t_ideal_ns.saturating_sub(DUMP_BEFORE_NS),
            w.end_ns.max(w.wake_ns).saturating_add(DUMP_AFTER_NS),
        );
        let from = by_time.partition_point(|e| e.ts_ns < a);
        let to = by_time.partition_point(|e| e.ts_ns <= b);
        let other = |e: crate::error::Error| std::io::Error::other(e.to_string());
        let out = crate::common::output::Output::create_derived(
            &dir.join(format!("window-{}.txt", w.id)),
        )
        .map_err(other)?;
        let mut f = std::io::BufWriter::new(out);
        writeln!(f, "# tracer: nop")?;
        writeln!(
            f,
            "# window {} tid {} cpu {} t_ideal_ns {} wake_ns {} end_ns {} own_cpu_ns {}",
            w.id,
            w.tid,
            w.cpu.map_or("-".into(), |c| c.to_string()),
            w.t_ideal_ns,
            w.wake_ns,
            w.end_ns,
            w.own_cpu_ns.map_or("-".into(), |c| c.to_string())
        )?;
        for e in &by_time[from..to] {
            writeln!(f, "{}", trace.text_line(e))?;
        }
        f.into_inner()
            .map_err(|e| e.into_error())?
            .commit()
            .map_err(other)?;
    }
    Ok(())
}

enum Source {
    Text(std::fs::File),
    /// The pipes, the events' formats, the ring buffer's page size, the flight recorder.
    Raw(
        Vec<(u16, std::fs::File)>,
        raw::Formats,
        usize,
        Option<Arc<flight::Flight>>,
    ),
}

/// Bytes of raw pages kept in memory at most (some 15 million events); past it pages are
/// decoded only to count their events as lost.
const MAX_RAW_BYTES: usize = 512 << 20;

/// How long the raw reader sleeps when no CPU filled a page since its last look.
const RAW_POLL: Duration = Duration::from_millis(50);

/// The pages of one CPU as read, each `u32` length then the page up to its data's end (the
/// header, the events and a stored missed-events count), decoded after the measurement.
/// A flight recorder's pages are spilled to an unlinked file instead of held in memory: a
/// watch keeps 1.8 s of trace per xrun for hours, and the watcher's memory stays flat
/// whatever their number (docs/methods.md "Watch"). Decoding reads them back at the end.
#[derive(Default)]
struct CpuPages {
    bytes: Vec<u8>,
    spill: Option<std::io::BufWriter<std::fs::File>>,
}

impl CpuPages {
    /// Pages spilled to a file in [`spill_dir`]; in memory when no file can be made there.
    fn spilled() -> CpuPages {
        CpuPages {
            bytes: Vec::new(),
            spill: tempfile::tempfile_in(spill_dir())
                .ok()
                .map(|f| std::io::BufWriter::with_capacity(1 << 16, f)),
        }
    }

    /// Keep a page as read, cut to [`raw::page_used`].
    fn push(&mut self, page: &[u8]) {
        use std::io::Write;
        let len = (page.len() as u32).to_ne_bytes();
        if let Some(w) = self.spill.as_mut() {
            if w.write_all(&len).and_then(|()| w.write_all(page)).is_ok() {
                return;
            }
            // A full disk: the rest stays in memory (the bound still holds).
            self.spill = None;
        }
        self.bytes.extend_from_slice(&len);
        self.bytes.extend_from_slice(page);
    }

    /// Every page kept, oldest first: those spilled, then those in memory.
    fn each(&mut self, mut f: impl FnMut(&[u8])) {
        use std::io::{BufRead, Read, Seek};
        if let Some(w) = self.spill.take() {
            if let Ok(mut file) = w.into_inner() {
                if file.rewind().is_ok() {
                    let mut r = std::io::BufReader::with_capacity(1 << 16, file);
                    let mut len = [0u8; 4];
                    let mut page = Vec::new();
                    while r.fill_buf().is_ok_and(|b| !b.is_empty()) {
                        if r.read_exact(&mut len).is_err() {
                            break;
                        }
                        page.resize(u32::from_ne_bytes(len) as usize, 0);
                        if r.read_exact(&mut page).is_err() {
                            break;
                        }
                        f(&page);
                    }
                }
            }
        }
        let b = &self.bytes;
        let mut at = 0;
        while let Some(n) = b.get(at..at + 4) {
            let n = u32::from_ne_bytes(n.try_into().unwrap_or_default()) as usize;
            let Some(p) = b.get(at + 4..at + 4 + n) else {
                break;
            };
            f(p);
            at += 4 + n;
        }
    }
}

/// Where a flight recorder spills its pages: `$TMPDIR`, else /var/tmp — on disk, where
/// Debian 13 keeps /tmp in memory.
fn spill_dir() -> std::path::PathBuf {
    std::env::var_os("TMPDIR")
        .filter(|d| !d.is_empty())
        .map_or_else(|| "/var/tmp".into(), std::path::PathBuf::from)
}

/// Keep a page in memory within [`MAX_RAW_BYTES`]; past it, decode it into `over` only to
/// count its events as lost.
fn keep_page(
    page: &[u8],
    cpu: u16,
    kept: &mut CpuPages,
    total: &mut usize,
    fm: &raw::Formats,
    over: &mut Trace,
    dropped: &mut u64,
) {
    if *total + page.len() <= MAX_RAW_BYTES {
        kept.push(page);
        *total += page.len() + 4;
    } else {
        raw::decode_page(page, cpu, fm, over);
        *dropped += over.events.len() as u64;
        over.events.clear();
    }
}

/// Drain every CPU's binary pipe until stopped, then what is left; decode afterwards.
///
/// While the measurement runs the reader only copies pages (the kernel hands over whole
/// pages; decoding waits until the end), so it needs little CPU beside the measured threads
/// and keeps up under load, where a starved reader lets the ring buffer overrun. It sleeps
/// [`RAW_POLL`] unless some CPU filled a page since its last look: a busy CPU is read again
/// at once, a quiet one costs one partial read per poll.
fn read_raw(
    mut pipes: Vec<(u16, std::fs::File)>,
    fm: &raw::Formats,
    page_size: usize,
    flight: Option<&flight::Flight>,
    stop: &AtomicBool,
) -> (Trace, u64) {
    let mut kept: Vec<CpuPages> = pipes
        .iter()
        .map(|_| {
            if flight.is_some() {
                CpuPages::spilled()
            } else {
                CpuPages::default()
            }
        })
        .collect();
    let mut rings: Vec<flight::Ring> = pipes.iter().map(|_| flight::Ring::default()).collect();
    let mut total = 0usize;
    let mut over = Trace::default();
    let mut dropped = 0u64;
    let mut page = vec![0u8; page_size];
    let mut stopping_rounds = 0;
    loop {
        let stopping = stop.load(Ordering::SeqCst);
        let (mut got, mut busy) = (false, false);
        for (i, (cpu, f)) in pipes.iter_mut().enumerate() {
            // A bounded number of pages per CPU per round: the others get their turn.
            for _ in 0..256 {
                match f.read(&mut page) {
                    Ok(0) => break,
                    Ok(n) => {
                        got = true;
                        let used = raw::page_used(&page[..n]);
                        busy |= used * 2 > page_size;
                        if flight.is_some() {
                            rings[i].push(flight::page_ts(&page), &page[..used]);
                        } else {
                            keep_page(
                                &page[..used],
                                *cpu,
                                &mut kept[i],
                                &mut total,
                                fm,
                                &mut over,
                                &mut dropped,
                            );
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
        }
        if let Some(f) = flight {
            for look in f.take_looks() {
                let mut t = Trace::default();
                for (i, r) in rings.iter().enumerate() {
                    let cpu = pipes[i].0;
                    r.each_between(look.from_ns, look.to_ns, &mut |p| {
                        raw::decode_page(p, cpu, fm, &mut t)
                    });
                }
                raw::resolve_functions(&mut t);
                // The asker may have stopped waiting: nothing to do then.
                let _ = look.reply.send(t);
            }
            let horizon = crate::rt::clock::monotonic_ns().saturating_sub(f.keep_ns());
            for (i, r) in rings.iter_mut().enumerate() {
                let cpu = pipes[i].0;
                r.evict(horizon, f, &mut |p| {
                    keep_page(
                        p,
                        cpu,
                        &mut kept[i],
                        &mut total,
                        fm,
                        &mut over,
                        &mut dropped,
                    )
                });
            }
        }
        if stopping {
            stopping_rounds += 1;
            if !got || stopping_rounds > 10_000 {
                break;
            }
        } else if !busy {
            std::thread::sleep(RAW_POLL);
        }
    }
    drop(page);
    if let Some(f) = flight {
        for (i, r) in rings.iter_mut().enumerate() {
            let cpu = pipes[i].0;
            r.drain(f, &mut |p| {
                keep_page(
                    p,
                    cpu,
                    &mut kept[i],
                    &mut total,
                    fm,
                    &mut over,
                    &mut dropped,
                )
            });
        }
    }
    let mut trace = Trace::default();
    for ((cpu, _), pages) in pipes.iter().zip(&mut kept) {
        pages.each(|p| {
            if trace.events.len() >= MAX_EVENTS {
                raw::decode_page(p, *cpu, fm, &mut over);
                dropped += over.events.len() as u64;
                over.events.clear();
            } else {
                raw::decode_page(p, *cpu, fm, &mut trace);
            }
        });
    }
    // Lost markers of pages past the memory bound still count.
    for (cpu, n) in over.lost {
        *trace.lost.entry(cpu).or_default() += n;
    }
    raw::resolve_functions(&mut trace);
    (trace, dropped)
}

fn read_pipe(mut pipe: std::fs::File, stop: &AtomicBool) -> (Trace, u64) {
    use std::os::unix::io::AsRawFd;
    let mut trace = Trace::default();
    let mut dropped = 0u64;
    let mut buf = vec![0u8; 1 << 16];
    let mut carry: Vec<u8> = Vec::new();
    let take = |trace: &mut Trace, dropped: &mut u64, carry: &mut Vec<u8>, data: &[u8]| {
        carry.extend_from_slice(data);
        let Some(last_nl) = carry.iter().rposition(|&b| b == b'\n') else {
            return;
        };
        let text = String::from_utf8_lossy(&carry[..=last_nl]);
        for line in text.lines() {
            if trace.events.len() >= MAX_EVENTS {
                *dropped += 1;
            } else {
                trace.push_line(line);
            }
        }
        carry.drain(..=last_nl);
    };
    let mut stopping_reads = 0;
    loop {
        let stopping = stop.load(Ordering::SeqCst);
        let mut pfd = libc::pollfd {
            fd: pipe.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: pfd is a valid pollfd for the duration of the call.
        unsafe { libc::poll(&mut pfd, 1, if stopping { 0 } else { 50 }) };
        match pipe.read(&mut buf) {
            Ok(0) => {
                if stopping {
                    break;
                }
            }
            Ok(n) => take(&mut trace, &mut dropped, &mut carry, &buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if stopping {
                    // Tracing is off: what remains is in the buffer; an empty read ends it.
                    stopping_reads += 1;
                    if stopping_reads > 2 {
                        break;
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    (trace, dropped)
}

/// One row per window and culprit share: id, tid, cpu, part, kind, name, pid, irq, prio, ns.
pub fn write_csv(path: &std::path::Path, f: &Forensics) -> std::io::Result<()> {
    let mut w = csv::Writer::from_path(path)?;
    w.write_record([
        "id",
        "tid",
        "cpu",
        "t_ideal_ns",
        "wake_ns",
        "end_ns",
        "wakeup",
        "part",
        "kind",
        "name",
        "pid",
        "irq",
        "prio",
        "ns",
    ])?;
    let opt = |v: Option<i64>| v.map(|x| x.to_string()).unwrap_or_default();
    for r in &f.windows {
        let verdict = serde_json::to_value(r.wakeup.verdict)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default();
        for (part, shares) in [
            ("before-wake", &r.before_wake),
            ("after-wake", &r.after_wake),
        ] {
            for s in shares {
                let kind = serde_json::to_value(s.culprit.kind)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default();
                w.write_record([
                    r.id.to_string(),
                    r.tid.to_string(),
                    opt(r.cpu.map(|c| c as i64)),
                    r.t_ideal_ns.to_string(),
                    r.wake_ns.to_string(),
                    r.end_ns.to_string(),
                    verdict.clone(),
                    part.to_string(),
                    kind,
                    s.culprit.name.clone(),
                    opt(s.culprit.pid.map(i64::from)),
                    opt(s.culprit.irq.map(i64::from)),
                    s.culprit.prio.clone().unwrap_or_default(),
                    s.ns.to_string(),
                ])?;
            }
        }
    }
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn back(k: &mut CpuPages) -> Vec<Vec<u8>> {
        let mut v = Vec::new();
        k.each(|p| v.push(p.to_vec()));
        v
    }

    #[test]
    fn the_lost_warning_tells_the_kernel_s_losses_from_the_reader_s_bound() {
        let mut f = Forensics {
            instance: "xrunlab".into(),
            cpus: vec![0, 1],
            events: 10,
            lost_events: 0,
            lost_per_cpu: Vec::new(),
            missing_events: Vec::new(),
            windows_of: "xrun".into(),
            windows_total: 0,
            windows: Vec::new(),
            culprits: Vec::new(),
            csv_file: None,
            worst: None,
        };
        assert_eq!(lost_warning(&f), None);
        f.lost_events = 40;
        f.lost_per_cpu = vec![CpuLost { cpu: 1, events: 40 }];
        let w = lost_warning(&f).expect("a warning");
        assert!(
            w.contains("40 trace events were lost (ring buffer overrun)"),
            "{w}"
        );
        f.lost_events = 1040;
        let w = lost_warning(&f).expect("a warning");
        assert!(
            w.contains("1040 trace events were lost: 40 overwritten in the kernel's ring buffer, 1000 read after xrunlab's bound on kept trace (512 MiB"),
            "{w}"
        );
        assert!(!w.contains("overrun"), "{w}");
    }

    #[test]
    fn kept_pages_come_back_in_order_and_whole() {
        let mut k = CpuPages::default();
        k.push(&[1, 2, 3]);
        k.push(&[]);
        k.push(&[9; 40]);
        assert_eq!(back(&mut k), vec![vec![1u8, 2, 3], vec![], vec![9u8; 40]]);
    }

    #[test]
    fn spilled_pages_leave_memory_and_come_back_in_order() {
        let mut k = CpuPages::spilled();
        assert!(
            k.spill.is_some(),
            "no file could be made in {:?}",
            spill_dir()
        );
        // More than the writer's buffer, so some pages reach the file before the end.
        let pages: Vec<Vec<u8>> = (0..40u8).map(|i| vec![i; 4096 - i as usize]).collect();
        for p in &pages {
            k.push(p);
        }
        assert!(k.bytes.is_empty(), "spilled pages stay out of memory");
        assert_eq!(back(&mut k), pages);
    }

    #[test]
    fn the_default_reader_is_raw() {
        assert_eq!(ReaderKind::default(), ReaderKind::Raw);
    }
}
