//! The non-real-time end of the probe ring: folds cycle records into HDR histograms and
//! counters and, with `--trace`, writes every cycle to CSV. Runs on a normal thread; the
//! real-time side only ever does a wait-free push (or counts a drop).

use crate::common::cycle::{MAX_THREADS, MAX_TRACKS};
use crate::common::stats::{new_ns_histogram, record_clamped, Histogram, Summary};
use crate::common::{Cause, CycleRecord};
use crate::error::{Error, Result};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// How many xrun events are kept individually in a result.
pub const MAX_XRUN_EVENTS: usize = 1000;

/// A distribution with exact extremes and mean next to its histogram.
pub struct Dist {
    h: Histogram,
    min: u64,
    max: u64,
    sum: u128,
}

impl Default for Dist {
    fn default() -> Self {
        Dist {
            h: new_ns_histogram(),
            min: u64::MAX,
            max: 0,
            sum: 0,
        }
    }
}

impl Dist {
    pub fn record(&mut self, v: u64) {
        record_clamped(&mut self.h, v);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.sum += v as u128;
    }
    /// The q-quantile, within the exact max (0 while empty).
    pub fn quantile(&self, q: f64) -> u64 {
        if self.h.is_empty() {
            return 0;
        }
        self.h.value_at_quantile(q).min(self.max)
    }
    pub fn summary(&self) -> Summary {
        let mut s = Summary::of(&self.h).with_exact(self.min, self.max, self.sum);
        // The histogram cannot hold 0 (it records 1): keep percentiles within the exact max.
        for p in [
            &mut s.p50,
            &mut s.p90,
            &mut s.p99,
            &mut s.p99_9,
            &mut s.p99_99,
            &mut s.p99_9999,
        ] {
            *p = (*p).min(s.max);
        }
        s
    }
}

/// One xrun as kept in the result.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct XrunEvent {
    pub cycle: u64,
    pub cause: Cause,
    pub wake_latency_ns: u64,
    pub sched_latency_ns: u64,
    pub wall_ns: u64,
    pub crit_cpu_ns: u64,
    pub interference_ns: u64,
    pub end_time_ns: u64,
    /// Time since the first cycle's ideal start.
    pub at_ns: u64,
    /// release − t_ideal: how late the previous cycle left this one to start.
    #[serde(default)]
    pub backlog_ns: u64,
    /// Late only by that backlog: the cause is the previous xrun's (see `common::cycle`).
    #[serde(default)]
    pub inherited: bool,
    /// CLOCK_MONOTONIC t_ideal and the critical thread's index, for the forensics of this
    /// xrun (docs/methods.md "Forensics"); in-process only, `at_ns` is what a file keeps.
    #[serde(skip)]
    pub t_ideal_ns: u64,
    #[serde(skip)]
    pub crit_thread: u8,
    /// Set when the CPU clock ran without work: what the critical thread's work was expected
    /// to cost (the cost prior's, or the run's own p99 per element run × its element runs). `crit_cpu_ns` stays
    /// the raw clock reading; the excess over this is host time and the cause is
    /// `interference` (docs/methods.md "Xrun and cause").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_cpu_ns: Option<u64>,
    /// Overload xruns: the track and chain element that took the most time in the cycle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heaviest: Option<Heaviest>,
}

/// What took the most time in an overload xrun's cycle, from the engine's own probes: the
/// track that ran longest (end − start) and, when that is track 0, its longest chain
/// instance (only track 0's elements are timed, to keep clock reads off the other tracks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Heaviest {
    /// Track index, from 0 as in the `--trace` CSV.
    pub track: u32,
    pub track_ns: u64,
    /// Instance index in the chain's series, from 0 (`burn:3,gain` has 0..3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub element: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub element_ns: Option<u64>,
}

impl Heaviest {
    /// From a cycle's per-track start/end and track 0's per-element end times.
    pub fn of(r: &CycleRecord) -> Option<Heaviest> {
        use crate::common::cycle::{MAX_CLIENTS, MAX_TRACKS};
        let n = (r.tracks as usize).min(MAX_TRACKS);
        let (track, track_ns) = (0..n)
            .map(|i| {
                let ns = r.track_end_ns[i].saturating_sub(r.track_start_ns[i]);
                (i, ns as u64)
            })
            // The first of equals.
            .max_by_key(|&(i, ns)| (ns, std::cmp::Reverse(i)))?;
        if track_ns == 0 {
            return None;
        }
        let mut best: Option<(usize, u64)> = None;
        if track == 0 {
            let ran = (r.active_clients as usize).min(MAX_CLIENTS);
            let mut prev = r.track_start_ns[0];
            for (i, &end) in r.client_end_ns[..ran].iter().enumerate() {
                // Untimed (0) or out of order: nothing more is known.
                if end < prev {
                    break;
                }
                let ns = (end - prev) as u64;
                if ns > 0 && best.is_none_or(|(_, b)| ns > b) {
                    best = Some((i, ns));
                }
                prev = end;
            }
        }
        Some(Heaviest {
            track: track as u32,
            track_ns,
            element: best.map(|b| b.0 as u32),
            element_ns: best.map(|b| b.1),
        })
    }

    /// `track 0: burn(30%) 3/4` (the third of four instances), `track 0: gain`, or
    /// `track 2` when only the track is known.
    pub fn label(&self, chain: &[crate::dsp::ChainElement]) -> String {
        let track = format!("track {}", self.track);
        let Some(i) = self.element else {
            return track;
        };
        let mut at = 0u32;
        for e in chain {
            if i < at + e.count {
                let one = crate::dsp::ChainElement {
                    count: 1,
                    ..e.clone()
                };
                return if e.count > 1 {
                    format!("{track}: {one} {}/{}", i - at + 1, e.count)
                } else {
                    format!("{track}: {one}")
                };
            }
            at += e.count;
        }
        format!("{track}: element {i}")
    }
}

/// How many in-time cycles the expected cost per element run needs before overload xruns
/// are judged against it (before that an xrun keeps its raw cause).
pub const HOST_CPU_MIN_CYCLES: u64 = 32;

/// A prior is set aside once the run's median in-time cycle costs this much of it (per
/// mille): against the prior that ordinary cycle would itself count as host time
/// (`common::cycle::host_excess`), so the prior does not describe this machine or chain.
pub const PRIOR_STALE_PER_MILLE: u64 = 1250;

/// What a thread's work in a cycle is expected to cost, to tell an overload from host time
/// charged to its CPU clock (docs/methods.md "Xrun and cause"): a prior known before
/// the run (`prior::CostPrior`: burn's calibration or a bench's tail) while the run's typical
/// cycle agrees with it, else the run's own p99 cost of a unit of work
/// (`common::cycle::crit_work`) from its in-time cycles.
#[derive(Default)]
pub struct WorkCost {
    per_unit: Dist,
    n: u64,
    /// `per_unit`'s p99, refreshed as cycles are learnt (a percentile per cycle would cost
    /// the collector more than the engine's cycle).
    unit_p99: u64,
    /// The raw and the judged cause of the last xrun, for cycles that inherit it.
    last: Option<(Cause, Cause)>,
    /// Expected ns of one track's first k chain instances (`CostPrior::prefix_ns`); empty:
    /// no prior.
    prior: Vec<u64>,
    /// In-time cycles' critical CPU time per mille of the prior's expectation.
    prior_ratio: Dist,
    prior_n: u64,
    prior_stale: bool,
}

impl WorkCost {
    /// Judged against `prefix_ns` (`CostPrior::prefix_ns` of the run's chain and block).
    pub fn with_prior(prefix_ns: Vec<u64>) -> Self {
        WorkCost {
            prior: prefix_ns,
            ..WorkCost::default()
        }
    }

    /// The prior is what cycles are judged against (there is one, and it is not stale).
    pub fn prior_in_use(&self) -> bool {
        !self.prior.is_empty() && !self.prior_stale
    }

    /// The in-time cycles' median critical CPU time as a share of the prior's expectation.
    pub fn prior_median_ratio(&self) -> Option<f64> {
        (self.prior_n > 0).then(|| self.prior_ratio.summary().p50 as f64 / 1000.0)
    }

    /// The prior's expectation for `tracks` tracks of `r`'s active elements.
    fn prior_ns(&self, r: &CycleRecord, tracks: u64) -> u64 {
        let len = self.prior.len().saturating_sub(1);
        // `active_clients` saturates at 255: a longer chain then runs whole.
        let active = if r.active_clients == u8::MAX {
            len
        } else {
            (r.active_clients as usize).min(len)
        };
        tracks * self.prior.get(active).copied().unwrap_or(0)
    }

    /// What engine thread `thread`'s work in `r` is expected to cost; None while nothing is
    /// known (no prior, fewer than `HOST_CPU_MIN_CYCLES` in-time cycles).
    pub fn expected(&self, r: &CycleRecord, thread: u8) -> Option<u64> {
        let mut tracks = crate::common::cycle::tracks_on(r, thread);
        if thread == r.crit_thread {
            tracks = tracks.max(1);
        }
        if self.prior_in_use() {
            return Some(self.prior_ns(r, tracks));
        }
        (self.n >= HOST_CPU_MIN_CYCLES)
            .then(|| self.unit_p99 * tracks * (r.active_clients as u64).max(1))
    }

    fn learn(&mut self, r: &CycleRecord) {
        self.per_unit
            .record(r.crit_cpu_ns / crate::common::cycle::crit_work(r));
        self.n += 1;
        if !self.prior.is_empty() {
            let tracks = crate::common::cycle::tracks_on(r, r.crit_thread).max(1);
            let e = self.prior_ns(r, tracks);
            if let Some(ratio) = (r.crit_cpu_ns * 1000).checked_div(e) {
                self.prior_ratio.record(ratio);
                self.prior_n += 1;
            }
        }
        // Often while the estimate is young, then every 64 cycles.
        if self.n < 4 * HOST_CPU_MIN_CYCLES || self.n.is_multiple_of(64) {
            self.unit_p99 = self.per_unit.quantile(0.99);
            self.prior_stale = self.prior_n >= HOST_CPU_MIN_CYCLES
                && self.prior_ratio.quantile(0.5) >= PRIOR_STALE_PER_MILLE;
        }
    }

    /// Judge `r` (reclassifying host time) and learn from it when it was in time. Returns the
    /// expected CPU time when the xrun was reclassified.
    pub fn judge(&mut self, r: &mut CycleRecord) -> Option<u64> {
        if r.cause.is_none() {
            self.learn(r);
            self.last = None;
            return None;
        }
        if r.inherited {
            if let Some((raw, judged)) = self.last.filter(|l| Some(l.0) == r.cause) {
                r.cause = Some(judged);
                self.last = Some((raw, judged));
            }
            return None;
        }
        let raw = r.cause?;
        let mut expected = None;
        if let Some(e) = self.expected(r, r.crit_thread) {
            if crate::common::cycle::host_cpu_excess(r, e).is_some() {
                r.cause = Some(Cause::Interference);
                expected = Some(e);
            }
        }
        self.last = Some((raw, r.cause.unwrap_or(raw)));
        expected
    }
}

/// One engine thread's host stalls over a run (docs/methods.md "Host stalls per
/// core"): cycles in which its CPU clock ran beyond the expected cost of the work it did
/// (`common::cycle::host_excess`). Its CPU clock advances only while it is the task running
/// on its CPU, so no other task of this system took that time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ThreadStalls {
    pub cycles: u64,
    /// The CPU time beyond the expectation, summed and the largest.
    pub total_ns: u64,
    pub max_ns: u64,
    /// The cycle of the largest, and its time since the first cycle's ideal start.
    pub worst_cycle: u64,
    pub worst_at_ns: u64,
    /// Of `cycles`: xruns whose critical thread this was.
    pub xruns: u64,
    /// Per track: the stalled cycles in which this thread ran it.
    pub tracks: Vec<u64>,
}

/// Which engine thread ran which track, over a run (docs/methods.md "Track
/// placement").
#[derive(Default)]
pub struct PlacementFold {
    /// Per engine thread: tracks it ran.
    pub tracks_run: Vec<u64>,
    /// Per engine thread: its home tracks (track mod threads) that another thread ran.
    pub home_taken: Vec<u64>,
    pub stolen: u64,
    pub cycles_with_stolen: u64,
    /// Per track: how often each engine thread ran it.
    pub per_track: Vec<Vec<u64>>,
}

impl PlacementFold {
    fn fold(&mut self, r: &CycleRecord) {
        let nt = (r.threads as usize).max(1);
        if self.tracks_run.len() < nt {
            self.tracks_run.resize(nt, 0);
            self.home_taken.resize(nt, 0);
        }
        let ntr = r.tracks as usize;
        if self.per_track.len() < ntr {
            self.per_track.resize(ntr, Vec::new());
        }
        let mut any = false;
        for (i, &t) in r.track_thread[..ntr].iter().enumerate() {
            if let Some(c) = self.tracks_run.get_mut(t as usize) {
                *c += 1;
            }
            let row = &mut self.per_track[i];
            if row.len() < nt {
                row.resize(nt, 0);
            }
            if let Some(c) = row.get_mut(t as usize) {
                *c += 1;
            }
            if t as usize != i % nt {
                self.home_taken[i % nt] += 1;
                self.stolen += 1;
                any = true;
            }
        }
        self.cycles_with_stolen += any as u64;
    }
}

/// Everything folded from the records.
#[derive(Default)]
pub struct Folded {
    /// `--trace`: a write failed and the trace was given up; what became of it.
    pub trace_error: Option<String>,
    pub records: u64,
    pub xruns: u64,
    pub late_wakeup: u64,
    pub overload: u64,
    pub interference: u64,
    /// Of `xruns`, those whose cause was inherited from the xrun before them.
    pub inherited: u64,
    /// Of `interference`: xruns the raw rule called overload whose critical thread's CPU
    /// clock ran far beyond its work (`WorkCost`).
    pub host_cpu: u64,
    /// Judge overload xruns against the run's cost of work (real drivers; the sim's CPU
    /// time is modelled or injected, so its `compute` events are work that grew).
    pub judge_host_cpu: bool,
    pub work_cost: WorkCost,
    /// Per engine thread: its host stalls (judged runs only).
    pub stalls: Vec<ThreadStalls>,
    pub placement: PlacementFold,
    pub skipped: u64,
    pub wake_latency: Dist,
    pub sched_latency: Dist,
    pub wall: Dist,
    pub cpu: Dist,
    pub crit_cpu: Dist,
    pub interference_ns: Dist,
    pub end_time: Dist,
    pub driver_period: Dist,
    pub xrun_events: Vec<XrunEvent>,
    /// Sum of CPU ns per engine thread.
    pub thread_cpu_sum: Vec<u64>,
    /// Per track: the largest end offset after wake.
    pub track_end_max: Vec<u64>,
    /// The cycle whose xrun met `RunConfig::stop_on` and stopped the run.
    pub early_stop_cycle: Option<u64>,
    /// The first cycle's ideal start (the origin of `XrunEvent::at_ns`).
    pub first_t_ideal: Option<u64>,
}

impl Folded {
    /// Count each thread's host stalls, reclassify host time on the CPU clock
    /// (`WorkCost::judge`), then fold.
    pub fn judge_and_fold(&mut self, r: &mut CycleRecord) {
        let mut excess = [0u64; MAX_THREADS];
        let expected = if self.judge_host_cpu {
            let nt = (r.threads as usize).min(MAX_THREADS);
            for (t, x) in excess[..nt].iter_mut().enumerate() {
                // A worker that ran no track wrote no CPU time.
                let cpu = r.thread_cpu_ns[t] as u64;
                if cpu == 0 {
                    continue;
                }
                if let Some(e) = self.work_cost.expected(r, t as u8) {
                    *x = crate::common::cycle::host_excess(cpu, e).unwrap_or(0);
                }
            }
            self.work_cost.judge(r)
        } else {
            None
        };
        self.host_cpu += expected.is_some() as u64;
        self.fold(r);
        if let (Some(e), Some(x)) = (expected, self.xrun_events.last_mut()) {
            if x.cycle == r.cycle {
                x.expected_cpu_ns = Some(e);
            }
        }
        if self.judge_host_cpu {
            self.fold_stalls(r, &excess);
        }
    }

    fn fold_stalls(&mut self, r: &CycleRecord, excess: &[u64; MAX_THREADS]) {
        let nt = (r.threads as usize).min(MAX_THREADS);
        let ntr = (r.tracks as usize).min(MAX_TRACKS);
        if self.stalls.len() < nt {
            self.stalls.resize(nt, ThreadStalls::default());
        }
        let at = r.t_ideal_ns - self.first_t_ideal.unwrap_or(r.t_ideal_ns);
        for (t, &x) in excess[..nt].iter().enumerate().filter(|(_, &x)| x > 0) {
            let s = &mut self.stalls[t];
            s.cycles += 1;
            s.total_ns += x;
            if x > s.max_ns {
                s.max_ns = x;
                s.worst_cycle = r.cycle;
                s.worst_at_ns = at;
            }
            s.xruns += (r.xrun && r.crit_thread as usize == t) as u64;
            if s.tracks.len() < ntr {
                s.tracks.resize(ntr, 0);
            }
            for (c, _) in s
                .tracks
                .iter_mut()
                .zip(&r.track_thread[..ntr])
                .filter(|(_, &on)| on as usize == t)
            {
                *c += 1;
            }
        }
    }

    pub fn fold(&mut self, r: &CycleRecord) {
        let t0 = *self.first_t_ideal.get_or_insert(r.t_ideal_ns);
        self.records += 1;
        self.skipped += r.skipped_before as u64;
        self.wake_latency.record(r.wake_latency_ns());
        self.sched_latency.record(r.sched_latency_ns());
        self.wall.record(r.wall_ns());
        self.cpu.record(r.cpu_ns);
        self.crit_cpu.record(r.crit_cpu_ns);
        self.interference_ns.record(r.interference_ns());
        self.end_time.record(r.end_time_ns());
        if r.driver_period_ns > 0 {
            self.driver_period.record(r.driver_period_ns);
        }
        let nt = r.threads as usize;
        if self.thread_cpu_sum.len() < nt {
            self.thread_cpu_sum.resize(nt, 0);
        }
        for (s, &c) in self.thread_cpu_sum.iter_mut().zip(&r.thread_cpu_ns[..nt]) {
            *s += c as u64;
        }
        let ntr = r.tracks as usize;
        if self.track_end_max.len() < ntr {
            self.track_end_max.resize(ntr, 0);
        }
        for (m, &e) in self.track_end_max.iter_mut().zip(&r.track_end_ns[..ntr]) {
            *m = (*m).max(e as u64);
        }
        self.placement.fold(r);
        if let Some(c) = r.cause {
            self.xruns += 1;
            self.inherited += r.inherited as u64;
            match c {
                Cause::LateWakeup => self.late_wakeup += 1,
                Cause::Overload => self.overload += 1,
                Cause::Interference => self.interference += 1,
            }
            if self.xrun_events.len() < MAX_XRUN_EVENTS {
                self.xrun_events.push(XrunEvent {
                    cycle: r.cycle,
                    cause: c,
                    wake_latency_ns: r.wake_latency_ns(),
                    sched_latency_ns: r.sched_latency_ns(),
                    wall_ns: r.wall_ns(),
                    crit_cpu_ns: r.crit_cpu_ns,
                    interference_ns: r.interference_ns(),
                    end_time_ns: r.end_time_ns(),
                    at_ns: r.t_ideal_ns - t0,
                    backlog_ns: r.backlog_ns(),
                    inherited: r.inherited,
                    t_ideal_ns: r.t_ideal_ns,
                    crit_thread: r.crit_thread,
                    expected_cpu_ns: None,
                    heaviest: (c == Cause::Overload).then(|| Heaviest::of(r)).flatten(),
                });
            }
        }
    }
}

/// Per-cycle CSV trace. A write that fails (a full disk) does not end the run: the trace is
/// only a copy of records the run folds anyway, so its summaries, xruns and causes stay whole
/// and comparable with other runs of the same duration, where stopping would turn a disk
/// problem into a shorter, "interrupted" measurement. The trace is cut at its last complete
/// line instead ([`TraceWriter::abandon`]) and the result says where.
pub struct TraceWriter {
    w: csv::Writer<std::io::BufWriter<std::fs::File>>,
    /// The same open file, to tell a regular file (which is cut) from a device.
    file: std::fs::File,
    path: PathBuf,
    header_done: bool,
}

impl TraceWriter {
    pub fn create(path: &Path) -> Result<Self> {
        let f = std::fs::File::create(path).map_err(|e| {
            Error::usage(format!("cannot create trace file {}: {e}", path.display()))
        })?;
        let file = f
            .try_clone()
            .map_err(|e| Error::io(format!("trace file {}", path.display()), e))?;
        Ok(TraceWriter {
            w: csv::Writer::from_writer(std::io::BufWriter::with_capacity(1 << 20, f)),
            file,
            path: path.to_path_buf(),
            header_done: false,
        })
    }

    fn io(&self, e: impl std::fmt::Display) -> Error {
        Error::io(
            format!("writing trace {}", self.path.display()),
            std::io::Error::other(e.to_string()),
        )
    }

    /// Give the trace up after `e`, a failed write: drop the writer (what it still holds may
    /// or may not reach the disk), then cut a regular file at its last complete line, or
    /// remove it when not even the header is whole. Returns what became of it, for the
    /// result's `trace_error` and warnings.
    pub fn abandon(self, e: &Error) -> String {
        let TraceWriter { w, file, path, .. } = self;
        drop(w);
        if !file.metadata().is_ok_and(|m| m.is_file()) {
            return format!("{e}; the cycles after that are not in the trace (the run went on)");
        }
        let cut = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .and_then(|f| cut_at_last_line(&f));
        match cut {
            Ok(Some(last)) => match last.split(',').next().and_then(|c| c.parse::<u64>().ok()) {
                Some(cycle) => format!(
                    "{e}; the trace was cut at its last complete line, cycle {cycle} (the run went on without it)"
                ),
                None => format!(
                    "{e}; the trace was cut after its header: it holds no cycle (the run went on without it)"
                ),
            },
            Ok(None) => match std::fs::remove_file(&path) {
                Ok(()) => format!(
                    "{e} before the trace's first line was whole; it was removed (the run went on without it)"
                ),
                Err(r) => format!(
                    "{e} before the trace's first line was whole, and removing it failed: {r}"
                ),
            },
            Err(c) => format!(
                "{e}; cutting the trace at its last complete line failed ({c}): its last line may be incomplete"
            ),
        }
    }

    pub fn write(&mut self, r: &CycleRecord) -> Result<()> {
        let nt = r.threads as usize;
        let ntr = r.tracks as usize;
        if !self.header_done {
            let mut h: Vec<String> = [
                "cycle",
                "t_ideal_ns",
                "release_ns",
                "wake_ns",
                "end_ns",
                "deadline_ns",
                "wake_latency_ns",
                "wall_ns",
                "cpu_ns",
                "crit_cpu_ns",
                "interference_ns",
                "end_time_ns",
                "driver_period_ns",
                "skipped_before",
                "xrun",
                "cause",
                "crit_thread",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            h.extend((0..nt).map(|i| format!("thread{i}_cpu_ns")));
            for i in 0..ntr {
                h.push(format!("track{i}_start_ns"));
                h.push(format!("track{i}_end_ns"));
            }
            h.extend((0..ntr).map(|i| format!("track{i}_thread")));
            self.w.write_record(&h).map_err(|e| self.io(e))?;
            self.header_done = true;
        }
        let mut row: Vec<String> = vec![
            r.cycle.to_string(),
            r.t_ideal_ns.to_string(),
            r.release_ns.to_string(),
            r.wake_ns.to_string(),
            r.end_ns.to_string(),
            r.deadline_ns.to_string(),
            r.wake_latency_ns().to_string(),
            r.wall_ns().to_string(),
            r.cpu_ns.to_string(),
            r.crit_cpu_ns.to_string(),
            r.interference_ns().to_string(),
            r.end_time_ns().to_string(),
            r.driver_period_ns.to_string(),
            r.skipped_before.to_string(),
            (r.xrun as u8).to_string(),
            r.cause.map(Cause::as_str).unwrap_or("").to_string(),
            r.crit_thread.to_string(),
        ];
        row.extend(r.thread_cpu_ns[..nt].iter().map(|v| v.to_string()));
        for i in 0..ntr {
            row.push(r.track_start_ns[i].to_string());
            row.push(r.track_end_ns[i].to_string());
        }
        row.extend(r.track_thread[..ntr].iter().map(|v| v.to_string()));
        self.w.write_record(&row).map_err(|e| self.io(e))
    }

    /// Write out what is buffered; `Err` says what became of a trace whose last write
    /// failed ([`TraceWriter::abandon`]).
    pub fn finish(mut self) -> Result<(), String> {
        match self.w.flush() {
            Ok(()) => Ok(()),
            Err(e) => {
                let e = self.io(e);
                Err(self.abandon(&e))
            }
        }
    }
}

/// Cut `file` after its last newline and return that last complete line (without its
/// newline); `None` when the file holds no newline at all (it is left as it is). Only the
/// tail is read: a line is far shorter than the chunk.
pub fn cut_at_last_line(file: &std::fs::File) -> std::io::Result<Option<String>> {
    use std::os::unix::fs::FileExt;
    const CHUNK: u64 = 1 << 16;
    let len = file.metadata()?.len();
    let mut end = len;
    // The newline that ends the last complete line, searched from the end backwards.
    let mut buf = vec![0u8; CHUNK as usize];
    let cut = loop {
        if end == 0 {
            return Ok(None);
        }
        let start = end.saturating_sub(CHUNK);
        let n = (end - start) as usize;
        file.read_exact_at(&mut buf[..n], start)?;
        if let Some(i) = buf[..n].iter().rposition(|&b| b == b'\n') {
            break start + i as u64 + 1;
        }
        end = start;
    };
    file.set_len(cut)?;
    // The line before the cut: from the newline before it (or the start).
    let from = cut.saturating_sub(CHUNK).min(cut - 1);
    let n = (cut - 1 - from) as usize;
    file.read_exact_at(&mut buf[..n], from)?;
    let line = &buf[..n];
    let line = match line.iter().rposition(|&b| b == b'\n') {
        Some(i) => &line[i + 1..],
        None => line,
    };
    Ok(Some(String::from_utf8_lossy(line).into_owned()))
}

/// Which xruns end a run early (`RunConfig::stop_on`), e.g. for the DSP load search where
/// the first disqualifying xrun decides a trial and the rest of it would be wasted time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum StopCriterion {
    /// Only xruns whose cause is `overload`.
    Overload,
    /// Any xrun.
    AnyXrun,
}

impl StopCriterion {
    pub fn matches(self, cause: Cause) -> bool {
        match self {
            StopCriterion::Overload => cause == Cause::Overload,
            StopCriterion::AnyXrun => true,
        }
    }
}

/// The early stop as the collector applies it: the criterion and the driver's stop flag.
/// Checked here, off the real-time path: the driver only sees its ordinary stop flag.
pub struct EarlyStop {
    pub on: StopCriterion,
    /// Xruns of earlier cycles do not stop the run (they are still recorded).
    pub from_cycle: u64,
    pub driver_stop: Arc<AtomicBool>,
}

/// Run the collector on a normal thread until `stop` is set (then drain) or the producer
/// is gone.
pub fn spawn(
    consumer: rtrb::Consumer<CycleRecord>,
    trace: Option<TraceWriter>,
    stop: Arc<AtomicBool>,
    early: Option<EarlyStop>,
) -> Result<std::thread::JoinHandle<Result<Folded>>> {
    spawn_tapped(
        consumer,
        trace,
        stop,
        early,
        None,
        Some(WorkCost::default()),
    )
}

/// `spawn`, also forwarding every record to `tap` (a non-RT observer such as `xrunlab
/// sched`'s reservation controller); a closed tap is dropped and the collection goes on.
pub fn spawn_tapped(
    mut consumer: rtrb::Consumer<CycleRecord>,
    mut trace: Option<TraceWriter>,
    stop: Arc<AtomicBool>,
    early: Option<EarlyStop>,
    mut tap: Option<std::sync::mpsc::Sender<CycleRecord>>,
    judge: Option<WorkCost>,
) -> Result<std::thread::JoinHandle<Result<Folded>>> {
    std::thread::Builder::new()
        .name("xr-collector".into())
        .spawn(move || {
            let mut f = Folded {
                judge_host_cpu: judge.is_some(),
                work_cost: judge.unwrap_or_default(),
                ..Folded::default()
            };
            loop {
                let mut n = 0;
                while let Ok(mut r) = consumer.pop() {
                    f.judge_and_fold(&mut r);
                    if let (Some(e), Some(c), None) = (&early, r.cause, f.early_stop_cycle) {
                        if e.on.matches(c) && r.cycle >= e.from_cycle {
                            f.early_stop_cycle = Some(r.cycle);
                            e.driver_stop.store(true, Ordering::SeqCst);
                        }
                    }
                    if tap.as_ref().is_some_and(|t| t.send(r).is_err()) {
                        tap = None;
                    }
                    if let Some(Err(e)) = trace.as_mut().map(|t| t.write(&r)) {
                        f.trace_error = trace.take().map(|t| t.abandon(&e));
                    }
                    n += 1;
                }
                if n == 0 {
                    if stop.load(Ordering::Acquire) || consumer.is_abandoned() {
                        if consumer.is_empty() {
                            break;
                        }
                        continue;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
            }
            if let Some(Err(lost)) = trace.map(TraceWriter::finish) {
                f.trace_error = Some(lost);
            }
            Ok(f)
        })
        .map_err(|e| Error::io("spawning the collector", e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::cycle::account;

    /// P = 1 ms, n = 2; one track of 4 elements on thread 0 costing 600 µs in time.
    fn cycle(k: u64, cpu_us: u64, elements: u8) -> CycleRecord {
        let t = k * 1_000_000;
        let mut r = CycleRecord {
            cycle: k,
            t_ideal_ns: t,
            release_ns: t,
            wake_ns: t + 10_000,
            end_ns: t + 10_000 + cpu_us * 1000,
            deadline_ns: t + 1_000_000,
            cpu_ns: cpu_us * 1000,
            crit_cpu_ns: cpu_us * 1000,
            threads: 1,
            tracks: 1,
            active_clients: elements,
            ..CycleRecord::EMPTY
        };
        account(&mut r);
        r
    }

    #[test]
    fn an_overload_with_unchanged_work_is_host_time_and_one_with_more_work_is_not() {
        let mut f = Folded {
            judge_host_cpu: true,
            ..Folded::default()
        };
        // Too early to judge: the raw cause stands.
        let mut early = cycle(0, 1200, 4);
        f.judge_and_fold(&mut early);
        assert_eq!(early.cause, Some(Cause::Overload));
        for k in 1..=HOST_CPU_MIN_CYCLES {
            let mut r = cycle(k, 590 + k % 20, 4);
            f.judge_and_fold(&mut r);
        }
        // Same 4 elements, 1500 µs of CPU: the clock ran 900 µs beyond the work.
        let mut jump = cycle(100, 1500, 4);
        f.judge_and_fold(&mut jump);
        assert_eq!(jump.cause, Some(Cause::Interference));
        assert_eq!(jump.crit_cpu_ns, 1_500_000, "the raw CPU time is kept");
        // Twice the elements, twice the CPU time: the work grew, overload.
        let mut grown = cycle(200, 1200, 8);
        f.judge_and_fold(&mut grown);
        assert_eq!(grown.cause, Some(Cause::Overload));
        assert_eq!((f.overload, f.interference, f.host_cpu), (2, 1, 1));
        let ev = f.xrun_events.iter().find(|e| e.cycle == 100).unwrap();
        assert_eq!(ev.cause, Cause::Interference);
        assert_eq!(ev.crit_cpu_ns, 1_500_000);
        let e = ev.expected_cpu_ns.expect("the expectation is kept");
        assert!((600_000..=620_000).contains(&e), "{e}");
        assert!(f
            .xrun_events
            .iter()
            .all(|e| e.cycle == 100 || e.expected_cpu_ns.is_none()));
        // The sim's injected compute is work: not judged there.
        let mut s = Folded::default();
        for k in 1..=HOST_CPU_MIN_CYCLES {
            s.judge_and_fold(&mut cycle(k, 600, 4));
        }
        let mut j = cycle(100, 1500, 4);
        s.judge_and_fold(&mut j);
        assert_eq!(j.cause, Some(Cause::Overload));
    }

    /// Two tracks of 4 elements on two threads, P = 1 ms, n = 2; the prior says 100 µs per
    /// element (400 µs per track), thread 1 is critical and runs track 1 unless told.
    fn two_threads(k: u64, cpu0_us: u64, cpu1_us: u64, elements: u8) -> CycleRecord {
        let t = k * 1_000_000;
        let mut r = CycleRecord {
            cycle: k,
            t_ideal_ns: t,
            release_ns: t,
            wake_ns: t + 10_000,
            end_ns: t + 10_000 + cpu0_us.max(cpu1_us) * 1000 + 5_000,
            deadline_ns: t + 1_000_000,
            cpu_ns: (cpu0_us + cpu1_us) * 1000,
            crit_cpu_ns: cpu1_us * 1000,
            crit_thread: 1,
            threads: 2,
            tracks: 2,
            active_clients: elements,
            ..CycleRecord::EMPTY
        };
        r.thread_cpu_ns[0] = (cpu0_us * 1000) as u32;
        r.thread_cpu_ns[1] = (cpu1_us * 1000) as u32;
        r.track_thread[..2].copy_from_slice(&[0, 1]);
        account(&mut r);
        r
    }

    fn with_prior() -> Folded {
        Folded {
            judge_host_cpu: true,
            work_cost: WorkCost::with_prior(vec![0, 100_000, 200_000, 300_000, 400_000]),
            ..Folded::default()
        }
    }

    #[test]
    fn against_a_prior_a_jump_with_unchanged_work_is_host_time_from_the_first_cycle() {
        let mut f = with_prior();
        // The very first cycle: the same 4 elements (400 µs expected) charged 1500 µs.
        let mut jump = two_threads(0, 410, 1500, 4);
        assert_eq!(jump.cause, Some(Cause::Overload), "the raw rule");
        f.judge_and_fold(&mut jump);
        assert_eq!(jump.cause, Some(Cause::Interference));
        assert_eq!(jump.crit_cpu_ns, 1_500_000, "the raw CPU time is kept");
        assert_eq!(f.xrun_events[0].expected_cpu_ns, Some(400_000));
        // Thread 1 ran both tracks (thread 0's core stalled): the work doubled, 800 µs
        // expected; 300 µs beyond is more than a quarter, but the work stays the largest
        // part of the cycle: overload.
        let mut grown = two_threads(1, 0, 1100, 4);
        grown.track_thread[0] = 1;
        grown.thread_cpu_ns[0] = 0;
        f.judge_and_fold(&mut grown);
        assert_eq!(grown.cause, Some(Cause::Overload));
        // 1.2× the prior's expectation is the plugin's own variance, not the host: overload.
        let mut tail = two_threads(2, 410, 480, 4);
        tail.deadline_ns = tail.wake_ns + 400_000;
        account(&mut tail);
        assert_eq!(tail.cause, Some(Cause::Overload));
        f.judge_and_fold(&mut tail);
        assert_eq!(tail.cause, Some(Cause::Overload), "within the prior's tail");
        assert_eq!((f.overload, f.interference, f.host_cpu), (2, 1, 1));
        assert!(f.work_cost.prior_in_use());
    }

    #[test]
    fn a_prior_the_run_does_not_agree_with_is_set_aside_for_the_runs_own_cost() {
        let mut f = with_prior();
        // Every in-time cycle costs 1.5× the prior (another machine, another cache): the
        // prior no longer judges.
        for k in 0..HOST_CPU_MIN_CYCLES {
            let mut r = two_threads(k, 600, 600 + k % 10, 4);
            f.judge_and_fold(&mut r);
            assert_eq!(r.cause, None);
        }
        assert!(!f.work_cost.prior_in_use());
        assert!(f.work_cost.prior_median_ratio().unwrap() > 1.45);
        // 1000 µs against the run's own 610: beyond a quarter, but the split keeps the work
        // (610) largest against 390 + 15: overload, where the prior (400) would have said host.
        let mut r = two_threads(100, 600, 1000, 4);
        r.end_ns += 10_000;
        account(&mut r);
        assert_eq!(r.cause, Some(Cause::Overload));
        f.judge_and_fold(&mut r);
        assert_eq!(r.cause, Some(Cause::Overload));
        // Without any prior the same 32 cycles teach the same cost.
        let mut g = Folded {
            judge_host_cpu: true,
            ..Folded::default()
        };
        for k in 0..HOST_CPU_MIN_CYCLES {
            g.judge_and_fold(&mut two_threads(k, 600, 600 + k % 10, 4));
        }
        assert!(!g.work_cost.prior_in_use());
        assert_eq!(g.work_cost.prior_median_ratio(), None);
    }

    #[test]
    fn each_threads_host_stalls_are_counted_with_the_tracks_it_was_running() {
        let mut f = with_prior();
        for k in 0..10 {
            f.judge_and_fold(&mut two_threads(k, 400, 400, 4));
        }
        // An in-time cycle whose thread 0 ran 300 µs beyond its track.
        let mut r = two_threads(10, 700, 400, 4);
        f.judge_and_fold(&mut r);
        assert!(!r.xrun);
        // An xrun on thread 1 (critical), 1100 µs beyond; thread 0 ran track 0 fine.
        let mut x = two_threads(11, 400, 1500, 4);
        f.judge_and_fold(&mut x);
        assert!(x.xrun);
        // A small excess (30 µs) is no stall.
        f.judge_and_fold(&mut two_threads(12, 430, 430, 4));
        assert_eq!(f.stalls.len(), 2);
        let (a, b) = (&f.stalls[0], &f.stalls[1]);
        assert_eq!(
            (a.cycles, a.total_ns, a.max_ns, a.worst_cycle),
            (1, 300_000, 300_000, 10)
        );
        assert_eq!((a.xruns, a.tracks.as_slice()), (0, &[1, 0][..]));
        assert_eq!(
            (b.cycles, b.max_ns, b.worst_cycle, b.xruns),
            (1, 1_100_000, 11, 1)
        );
        assert_eq!(b.worst_at_ns, 11_000_000);
        assert_eq!(b.tracks, [0, 1]);
        // Not judged (sim): nothing counted.
        let mut s = Folded::default();
        s.judge_and_fold(&mut two_threads(0, 400, 1500, 4));
        assert!(s.stalls.is_empty());
    }

    #[test]
    fn placement_counts_tracks_run_away_from_home() {
        let mut p = PlacementFold::default();
        let mut r = CycleRecord {
            threads: 2,
            tracks: 4,
            ..CycleRecord::EMPTY
        };
        r.track_thread[..4].copy_from_slice(&[0, 1, 0, 1]);
        p.fold(&r);
        // Thread 1 stalled: thread 0 ran its tracks 1 and 3.
        r.track_thread[..4].copy_from_slice(&[0, 0, 0, 0]);
        p.fold(&r);
        assert_eq!(p.tracks_run, [6, 2]);
        assert_eq!(p.home_taken, [0, 2]);
        assert_eq!(p.per_track, [[2, 0], [1, 1], [2, 0], [1, 1]]);
        assert_eq!((p.stolen, p.cycles_with_stolen), (2, 1));
    }
}
