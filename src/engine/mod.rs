//! The audio host under test (docs/ARCHITECTURE.md §2 `engine/`): tracks × plugin chains, run in
//! parallel by a pool of RT threads once per period, with per-cycle probes.
//!
//! Cycle protocol (driver thread = engine thread 0, which also processes tracks):
//! 1. copy the device input, reset the checkout counter, publish the cycle number in the
//!    `start` futex word;
//! 2. every thread claims tracks with a CAS on the track's claim word, from the previous
//!    cycle's number to this one's: first its home tracks (track i's home is thread
//!    i mod threads), then — with `Placement::Steal` or `Unpinned` — any other thread's
//!    track not yet started, from the back, so a thread whose core stalled loses its
//!    unstarted tracks to the others (docs/methods.md "Track placement");
//! 3. a worker adds the count of tracks it ran to `checkout` after writing its slot, and
//!    thread 0 waits until the checkouts plus its own tracks make every track.
//!
//! A worker that wakes too late to find a track never delays the cycle, and a stale worker
//! cannot claim a track of a newer cycle because a claim needs the previous cycle's number.

pub mod collector;
pub mod cost;
pub mod harness;
mod pool;
pub mod prior;
pub mod watchdog;

pub use cost::CostModel;
pub use pool::{futex_wait, futex_wake};

use crate::common::cycle::{
    account_after, Cause, CycleRecord, MAX_CLIENTS, MAX_THREADS, MAX_TRACKS,
};
use crate::driver::{AudioIo, CycleHandler, CycleTiming, TimeBase};
use crate::dsp::{registry, ChainElement, Plugin, PluginContext};
use crate::error::{Error, Result};
use crate::rt::clock::{monotonic_ns, thread_cpu_ns};
use crate::rt::thread::{spawn_rt, RtThread, ThreadSpec};
use crate::rt::Policy;
use pool::Event;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Chain elements switched on one at a time during a run (Cucinotta et al.'s clients joining JACK).
/// Every instance is built before the first cycle and the engine runs the first `active` of
/// them, so a client "joins" without any allocation or lock on the real-time path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Ramp {
    /// Elements active from the first cycle.
    pub start: u32,
    /// One more element every this much device time.
    pub every_ns: u64,
}

impl Ramp {
    /// Elements active in device period `cycle` of a chain of `len` elements. A pure function
    /// of the period index, so every driver (sim included) ramps identically.
    pub fn active_at(&self, cycle: u64, period_ns: u64, len: usize) -> usize {
        let added = (cycle as u128 * period_ns as u128 / self.every_ns.max(1) as u128)
            .min(len as u128) as usize;
        (self.start as usize + added).min(len)
    }
}

/// Where the engine's threads run and which tracks each may take (`--pin`,
/// docs/methods.md "Track placement"). Track i's home thread is i mod threads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// Each thread pinned to its CPU runs its home tracks only: a stalled core delays them.
    Pinned,
    /// No thread pinned (the kernel places and migrates them); any thread takes any track not
    /// yet started.
    Unpinned,
    /// Threads pinned; each runs its home tracks first, then takes other threads' tracks not
    /// yet started (thread 0 helps instead of waiting for the join).
    #[default]
    Steal,
}

impl Placement {
    /// Threads may run tracks whose home is another thread.
    pub fn steals(self) -> bool {
        self != Placement::Pinned
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Placement::Pinned => "pinned",
            Placement::Unpinned => "unpinned",
            Placement::Steal => "steal",
        }
    }
}

/// How to build an engine.
#[derive(Debug, Clone)]
pub struct EngineSpec {
    pub rate: u32,
    /// The driver's buffer size.
    pub frames: usize,
    pub tracks: usize,
    /// The chain every track runs.
    pub chain: Vec<ChainElement>,
    /// Engine threads including the driver thread (thread 0), 1..=MAX_THREADS.
    pub threads: usize,
    /// CPU of each worker (threads 1..): `worker_cpus[i]` pins worker i+1; empty = unpinned.
    pub worker_cpus: Vec<usize>,
    /// Threads may take tracks homed on another thread (`Placement::steals`).
    pub steal: bool,
    pub policy: Policy,
    /// Simulated compute (sim driver only); None = run the DSP.
    pub cost: Option<CostModel>,
    /// Capacity of the probe ring in records.
    pub ring_capacity: usize,
    /// Wait for space instead of dropping when the ring is full: only for the sim driver,
    /// which has no real-time thread to protect.
    pub block_when_full: bool,
    /// Spin budget before a worker sleeps waiting for a cycle.
    pub worker_spin_ns: u64,
    /// Spin budget before thread 0 sleeps waiting for the join.
    pub join_spin_ns: u64,
    /// Switch chain elements on during the run; None = all from the start.
    pub ramp: Option<Ramp>,
}

impl EngineSpec {
    pub fn new(rate: u32, frames: usize, tracks: usize, chain: Vec<ChainElement>) -> Self {
        EngineSpec {
            rate,
            frames,
            tracks,
            chain,
            threads: 1,
            worker_cpus: Vec::new(),
            steal: true,
            policy: Policy::Other { nice: 0 },
            cost: None,
            ring_capacity: 4096,
            block_when_full: false,
            worker_spin_ns: 5_000,
            join_spin_ns: 50_000,
            ramp: None,
        }
    }
}

struct Track {
    plugins: Vec<Box<dyn Plugin>>,
    l: Vec<f32>,
    r: Vec<f32>,
    /// Real end time of each of the first MAX_CLIENTS elements; recorded for track 0 only
    /// (empty elsewhere) to keep clock reads off the other tracks.
    element_end: Vec<u64>,
}

/// A track is touched only by the thread that claimed it in the current cycle, and by
/// thread 0 between cycles; the claim CAS and the join give the happens-before edges.
struct TrackCell(UnsafeCell<Track>);
// SAFETY: exclusive access is guaranteed by the claim protocol described above.
unsafe impl Sync for TrackCell {}

#[derive(Default)]
#[repr(align(64))]
struct ThreadSlot {
    /// Cycle number this slot was written for.
    cycle: AtomicU64,
    cpu_ns: AtomicU64,
    /// Real time the thread's last track ended; 0 = it ran none.
    last_end: AtomicU64,
}

struct TrackTime {
    start: AtomicU64,
    end: AtomicU64,
    /// The cycle that claimed the track last; a claim for cycle c succeeds only from
    /// `prev_cycle(c)`, once.
    claim: AtomicU32,
    /// The engine thread that ran it in that cycle.
    thread: AtomicU32,
}

impl Default for TrackTime {
    fn default() -> Self {
        TrackTime {
            start: AtomicU64::new(0),
            end: AtomicU64::new(0),
            claim: AtomicU32::new(prev_cycle(1)),
            thread: AtomicU32::new(0),
        }
    }
}

/// The cycle number before `c` in the engine's sequence 1, 2, …, u32::MAX, 1, … (0 is never
/// used, so a fresh claim word can hold the one before the first cycle).
#[inline]
fn prev_cycle(c: u32) -> u32 {
    if c <= 1 {
        u32::MAX
    } else {
        c - 1
    }
}

struct Input(UnsafeCell<(Vec<f32>, Vec<f32>)>);
// SAFETY: written by thread 0 only before a cycle is published, read by workers after.
unsafe impl Sync for Input {}

pub(crate) struct Shared {
    start: Event,
    /// Tracks run by workers in the current cycle (reset by thread 0 before publishing).
    checkout: Event,
    stop: AtomicBool,
    frames: AtomicU64,
    tracks: Box<[TrackCell]>,
    times: Box<[TrackTime]>,
    slots: Box<[ThreadSlot]>,
    input: Input,
    /// Chain elements to run this cycle (set by thread 0 before a cycle is published).
    active: AtomicUsize,
    worker_spin_ns: u64,
    threads: usize,
    steal: bool,
    /// sim `--inject stall`: worker 1 sleeps this long before taking a track this cycle.
    stall_ns: AtomicU64,
    /// Real time the current cycle entered the engine; 0 between cycles (for the watchdog).
    pub(crate) cycle_entered_ns: AtomicU64,
    pub(crate) cycles_done: AtomicU64,
    pub(crate) dropped: AtomicU64,
}

/// Where a thread's scans for tracks stopped within one cycle (see `Shared::next_track`).
struct Cursor {
    /// The next home track to try.
    home: usize,
    /// Steal candidates are the tracks below this one.
    back: usize,
}

impl Shared {
    #[inline]
    fn try_claim(&self, i: usize, cycle: u32) -> bool {
        let c = &self.times[i].claim;
        let prev = prev_cycle(cycle);
        c.load(Ordering::Relaxed) == prev
            && c.compare_exchange(prev, cycle, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
    }

    /// The next track of `cycle` for thread `me`: its home tracks in order, then, when
    /// stealing, other threads' unstarted tracks from the back (their owners start at the
    /// front, so owner and thief meet once). A work queue with affinity: every idle thread
    /// takes the next unstarted track, its own first. `cur` keeps where this thread's scans
    /// stopped: a track claimed for `cycle` stays claimed, so no index is looked at twice
    /// and a thread's claims cost O(tracks) loads per cycle however many it runs.
    #[inline]
    fn next_track(&self, me: usize, cycle: u32, cur: &mut Cursor) -> Option<usize> {
        let n = self.tracks.len();
        let t = self.threads.max(1);
        while cur.home < n {
            let i = cur.home;
            cur.home += t;
            if self.try_claim(i, cycle) {
                return Some(i);
            }
        }
        if self.steal {
            while cur.back > 0 {
                cur.back -= 1;
                let i = cur.back;
                if i % t != me && self.try_claim(i, cycle) {
                    return Some(i);
                }
            }
        }
        None
    }

    /// Run tracks claimed by thread `me` until none is left; returns the end time of the
    /// last one and how many it ran.
    #[inline]
    fn run_tracks(&self, me: usize, cycle: u32) -> (u64, u32) {
        let frames = self.frames.load(Ordering::Relaxed) as usize;
        let active = self.active.load(Ordering::Relaxed);
        let mut last = 0;
        let mut ran = 0;
        let mut cur = Cursor {
            home: me,
            back: self.tracks.len(),
        };
        while let Some(i) = self.next_track(me, cycle, &mut cur) {
            let t0 = monotonic_ns();
            // SAFETY: track i was claimed by this thread for this cycle (see TrackCell).
            let tr = unsafe { &mut *self.tracks[i].0.get() };
            // SAFETY: the input is not written while a cycle is published.
            let (il, ir) = unsafe { &*self.input.0.get() };
            let (l, r) = (&mut tr.l[..frames], &mut tr.r[..frames]);
            l.copy_from_slice(&il[..frames]);
            r.copy_from_slice(&ir[..frames]);
            let ends = &mut tr.element_end;
            for (j, p) in tr.plugins.iter_mut().take(active).enumerate() {
                p.process(l, r);
                if let Some(e) = ends.get_mut(j) {
                    *e = monotonic_ns();
                }
            }
            let t1 = monotonic_ns();
            self.times[i].start.store(t0, Ordering::Relaxed);
            self.times[i].end.store(t1, Ordering::Relaxed);
            self.times[i].thread.store(me as u32, Ordering::Relaxed);
            last = t1;
            ran += 1;
        }
        (last, ran)
    }
}

fn worker_main(sh: Arc<Shared>, idx: usize) {
    let mut seen = sh.start.word.load(Ordering::Acquire);
    loop {
        let cycle = sh.start.wait_until(sh.worker_spin_ns, |v| v != seen);
        seen = cycle;
        if sh.stop.load(Ordering::Acquire) {
            return;
        }
        if idx == 1 {
            // Only the sim driver injects stalls (no real-time thread to protect there).
            let stall = sh.stall_ns.load(Ordering::Relaxed);
            if stall > 0 {
                std::thread::sleep(std::time::Duration::from_nanos(stall));
            }
        }
        let c0 = thread_cpu_ns();
        let (last, ran) = sh.run_tracks(idx, cycle);
        if ran > 0 {
            // The slot is written before the checkout that completes the count, so thread 0
            // reads it after its join.
            let slot = &sh.slots[idx];
            slot.cpu_ns.store(thread_cpu_ns() - c0, Ordering::Relaxed);
            slot.last_end.store(last, Ordering::Relaxed);
            slot.cycle.store(cycle as u64, Ordering::Relaxed);
            sh.checkout.word.fetch_add(ran, Ordering::SeqCst);
            sh.checkout.notify_all();
        }
    }
}

/// Read-only view for the watchdog and progress: safe to hold on any thread.
#[derive(Clone)]
pub struct EngineMonitor(Arc<Shared>);

impl EngineMonitor {
    /// CLOCK_MONOTONIC time the current cycle entered the engine, None between cycles.
    pub fn cycle_entered_ns(&self) -> Option<u64> {
        match self.0.cycle_entered_ns.load(Ordering::Acquire) {
            0 => None,
            t => Some(t),
        }
    }
    pub fn cycles_done(&self) -> u64 {
        self.0.cycles_done.load(Ordering::Relaxed)
    }
    /// Records the probe ring had no room for.
    pub fn dropped_records(&self) -> u64 {
        self.0.dropped.load(Ordering::Relaxed)
    }
    /// (futex sleeps of workers waiting for a cycle, futex wakes by thread 0,
    ///  futex sleeps of thread 0 waiting for the join, futex wakes by workers).
    pub fn futex_counts(&self) -> [u64; 4] {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        [
            r(&self.0.start.sleeps),
            r(&self.0.start.wakes),
            r(&self.0.checkout.sleeps),
            r(&self.0.checkout.wakes),
        ]
    }
}

/// The engine. Owned and driven by the driver thread (thread 0).
pub struct Engine {
    sh: Arc<Shared>,
    workers: Vec<RtThread<()>>,
    producer: rtrb::Producer<CycleRecord>,
    block_when_full: bool,
    join_spin_ns: u64,
    threads: usize,
    cycle: u32,
    cost: Option<cost::TrackCosts>,
    period_ns: u64,
    ramp: Option<Ramp>,
    chain_len: usize,
    /// What the first instance of each chain element reported as its latency.
    element_latency: Vec<Option<u32>>,
    /// Cause of the previous cycle's xrun (None: it was in time): a cycle late only by the
    /// backlog it left inherits it (see `probe`).
    prev_cause: Option<Cause>,
}

impl Engine {
    /// Build the graph, allocate every buffer, spawn the workers. Returns the engine and
    /// the consumer end of its probe ring.
    pub fn new(spec: &EngineSpec) -> Result<(Engine, rtrb::Consumer<CycleRecord>)> {
        if !(1..=MAX_TRACKS).contains(&spec.tracks) {
            return Err(Error::usage(format!(
                "--tracks {} is outside 1..{MAX_TRACKS}",
                spec.tracks
            )));
        }
        if !(1..=MAX_THREADS).contains(&spec.threads) {
            return Err(Error::usage(format!(
                "{} engine threads is outside 1..{MAX_THREADS}",
                spec.threads
            )));
        }
        if spec.frames == 0 || spec.frames > 65536 {
            return Err(Error::usage(format!(
                "buffer of {} frames is outside 1..65536",
                spec.frames
            )));
        }
        let ctx = PluginContext {
            rate: spec.rate,
            max_frames: spec.frames,
        };
        let period_ns = ctx.period_ns();
        let cost = match &spec.cost {
            Some(m) => Some(m.track_costs(&spec.chain, spec.tracks, &ctx)?),
            None => None,
        };
        let mut tracks = Vec::with_capacity(spec.tracks);
        let chain_len: usize = spec.chain.iter().map(|e| e.count as usize).sum();
        // A cost-modelled engine never runs its plugins: it validates the chain with one
        // instance of each element (an LV2 plugin can cost milliseconds and a thread to
        // create, and a model asks for thousands).
        let once: Vec<ChainElement> = spec
            .chain
            .iter()
            .map(|e| ChainElement {
                count: 1,
                ..e.clone()
            })
            .collect();
        let mut element_latency = Vec::new();
        for i in 0..spec.tracks {
            let plugins = match (&spec.cost, i) {
                (Some(_), 0) => registry::create_chain(&once, &ctx)?,
                (Some(_), _) => Vec::new(),
                (None, _) => registry::create_chain(&spec.chain, &ctx)?,
            };
            if i == 0 {
                let mut at = 0;
                for e in if spec.cost.is_some() {
                    &once
                } else {
                    &spec.chain
                } {
                    element_latency.push(plugins.get(at).and_then(|p| p.latency_frames()));
                    at += e.count as usize;
                }
            }
            let timed = if i == 0 {
                chain_len.min(MAX_CLIENTS)
            } else {
                0
            };
            tracks.push(TrackCell(UnsafeCell::new(Track {
                plugins,
                l: vec![0.0; spec.frames],
                r: vec![0.0; spec.frames],
                element_end: vec![0; timed],
            })));
        }
        let sh = Arc::new(Shared {
            start: Event::default(),
            checkout: Event::default(),
            stop: AtomicBool::new(false),
            frames: AtomicU64::new(spec.frames as u64),
            tracks: tracks.into_boxed_slice(),
            times: (0..spec.tracks).map(|_| TrackTime::default()).collect(),
            slots: (0..spec.threads).map(|_| ThreadSlot::default()).collect(),
            input: Input(UnsafeCell::new((
                vec![0.0; spec.frames],
                vec![0.0; spec.frames],
            ))),
            active: AtomicUsize::new(chain_len),
            worker_spin_ns: spec.worker_spin_ns,
            threads: spec.threads,
            steal: spec.steal,
            stall_ns: AtomicU64::new(0),
            cycle_entered_ns: AtomicU64::new(0),
            cycles_done: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        });
        let (producer, consumer) = rtrb::RingBuffer::new(spec.ring_capacity.max(16));
        let mut engine = Engine {
            sh: sh.clone(),
            workers: Vec::new(),
            producer,
            block_when_full: spec.block_when_full,
            join_spin_ns: spec.join_spin_ns,
            threads: spec.threads,
            cycle: 0,
            cost,
            period_ns,
            ramp: spec.ramp,
            chain_len,
            element_latency,
            prev_cause: None,
        };
        if engine.cost.is_none() {
            for idx in 1..spec.threads {
                let sh = sh.clone();
                let w = spawn_rt(
                    ThreadSpec {
                        name: format!("xr-worker-{idx}"),
                        policy: spec.policy,
                        cpus: spec
                            .worker_cpus
                            .get(idx - 1)
                            .map(|&c| vec![c])
                            .unwrap_or_default(),
                    },
                    move || worker_main(sh, idx),
                )?;
                engine.workers.push(w);
            }
        }
        Ok((engine, consumer))
    }

    pub fn monitor(&self) -> EngineMonitor {
        EngineMonitor(self.sh.clone())
    }

    /// Kernel thread ids of the workers (thread 0 is the caller's).
    pub fn worker_tids(&self) -> Vec<libc::pid_t> {
        self.workers.iter().map(|w| w.tid).collect()
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    /// The latency each chain element reports (its first instance's, as its plugin format
    /// defines it), in chain order; `None` for plugins that report none.
    pub fn latencies(&self) -> &[Option<u32>] {
        &self.element_latency
    }

    /// Run the real graph for one cycle; returns the real end time of the last track.
    fn run_graph(
        &mut self,
        io: &mut AudioIo<'_>,
        rec: &mut CycleRecord,
        reference: u64,
        stall_ns: u64,
    ) -> u64 {
        let sh = &*self.sh;
        let frames = io.frames().min(sh.max_frames());
        let c0 = thread_cpu_ns();
        {
            // SAFETY: no cycle is published, so no worker reads the input now.
            let (il, ir) = unsafe { &mut *sh.input.0.get() };
            il[..frames].copy_from_slice(&io.in_l[..frames]);
            ir[..frames].copy_from_slice(&io.in_r[..frames]);
        }
        sh.frames.store(frames as u64, Ordering::Relaxed);
        self.cycle = self.cycle.wrapping_add(1).max(1);
        let cycle = self.cycle;
        sh.checkout.word.store(0, Ordering::Relaxed);
        sh.stall_ns.store(stall_ns, Ordering::Relaxed);
        if self.threads > 1 {
            sh.start.word.store(cycle, Ordering::SeqCst);
            sh.start.notify_all();
        }
        let (own_last, own_ran) = sh.run_tracks(0, cycle);
        let own_cpu = thread_cpu_ns() - c0;
        let others = sh.tracks.len() as u32 - own_ran;
        if others > 0 {
            sh.checkout.wait_until(self.join_spin_ns, |v| v >= others);
        }
        // Gather: thread 0 is slot 0; workers' slots count only if written for this cycle.
        let mut end = own_last;
        let mut crit = (0usize, own_last, own_cpu);
        let mut total = own_cpu;
        rec.thread_cpu_ns[0] = own_cpu.min(u32::MAX as u64) as u32;
        for (i, s) in sh.slots.iter().enumerate().skip(1) {
            if s.cycle.load(Ordering::Relaxed) != cycle as u64 {
                rec.thread_cpu_ns[i] = 0;
                continue;
            }
            let cpu = s.cpu_ns.load(Ordering::Relaxed);
            let last = s.last_end.load(Ordering::Relaxed);
            rec.thread_cpu_ns[i] = cpu.min(u32::MAX as u64) as u32;
            total += cpu;
            if last > end {
                end = last;
                crit = (i, last, cpu);
            }
        }
        let off = |v: u64| v.saturating_sub(reference).min(u32::MAX as u64) as u32;
        for (i, t) in sh.times.iter().enumerate() {
            rec.track_start_ns[i] = off(t.start.load(Ordering::Relaxed));
            rec.track_end_ns[i] = off(t.end.load(Ordering::Relaxed));
            rec.track_thread[i] = t.thread.load(Ordering::Relaxed) as u8;
        }
        {
            // SAFETY: the cycle is joined; thread 0 is the only one touching tracks now.
            let t0 = unsafe { &*sh.tracks[0].0.get() };
            let ran = (rec.active_clients as usize).min(t0.element_end.len());
            for (o, &e) in rec.client_end_ns.iter_mut().zip(&t0.element_end[..ran]) {
                *o = off(e);
            }
        }
        rec.cpu_ns = total;
        rec.crit_cpu_ns = crit.2;
        rec.crit_thread = crit.0 as u8;
        // Mix after `end`: the bus sum is the driver's share, not a track's.
        io.out_l[..frames].fill(0.0);
        io.out_r[..frames].fill(0.0);
        for cell in sh.tracks.iter() {
            // SAFETY: the cycle is joined; thread 0 is the only one touching tracks now.
            let tr = unsafe { &*cell.0.get() };
            for (o, s) in io.out_l[..frames].iter_mut().zip(&tr.l[..frames]) {
                *o += *s;
            }
            for (o, s) in io.out_r[..frames].iter_mut().zip(&tr.r[..frames]) {
                *o += *s;
            }
        }
        end.max(reference)
    }

    fn push(&mut self, rec: CycleRecord) {
        let mut rec = rec;
        loop {
            match self.producer.push(rec) {
                Ok(()) => return,
                Err(rtrb::PushError::Full(r)) if self.block_when_full => {
                    rec = r;
                    std::thread::yield_now();
                }
                Err(_) => {
                    self.sh.dropped.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            }
        }
    }
}

impl Shared {
    fn max_frames(&self) -> usize {
        // SAFETY: the buffers' lengths never change after construction.
        unsafe { (*self.input.0.get()).0.len() }
    }
}

impl CycleHandler for Engine {
    fn process_cycle(&mut self, io: &mut AudioIo<'_>, t: &CycleTiming) -> CycleRecord {
        let entered = monotonic_ns();
        self.sh.cycle_entered_ns.store(entered, Ordering::Release);
        let mut rec = CycleRecord {
            cycle: t.cycle,
            t_ideal_ns: t.t_ideal_ns,
            release_ns: t.release_ns,
            wake_ns: t.wake_ns,
            deadline_ns: t.deadline_ns,
            driver_period_ns: if t.prev_wake_ns == 0 {
                0
            } else {
                t.wake_ns.saturating_sub(t.prev_wake_ns)
            },
            skipped_before: t.skipped_before,
            threads: self.threads as u8,
            tracks: self.sh.tracks.len() as u8,
            ..CycleRecord::EMPTY
        };
        let active = match &self.ramp {
            Some(r) => r.active_at(t.cycle, self.period_ns, self.chain_len),
            None => self.chain_len,
        };
        self.sh.active.store(active, Ordering::Relaxed);
        rec.active_clients = active.min(u8::MAX as usize) as u8;
        let (extra_cpu, extra_int, stall) = match t.time {
            TimeBase::Real => (0, 0, 0),
            TimeBase::Simulated {
                extra_cpu_ns,
                extra_interference_ns,
                stall_worker_ns,
            } => (extra_cpu_ns, extra_interference_ns, stall_worker_ns),
        };
        let wall = match (&self.cost, t.time) {
            (Some(c), TimeBase::Simulated { .. }) => {
                io.out_l.fill(0.0);
                io.out_r.fill(0.0);
                c.schedule(self.threads, &mut rec)
            }
            (_, time) => {
                // Real: offsets from the wake the driver read. Simulated: the DSP really
                // runs and its durations are laid onto the simulated timeline at `wake`.
                let reference = if time == TimeBase::Real {
                    t.wake_ns
                } else {
                    entered
                };
                let end = self.run_graph(io, &mut rec, reference, stall);
                end - reference
            }
        };
        rec.crit_cpu_ns += extra_cpu;
        rec.cpu_ns += extra_cpu;
        rec.end_ns = t.wake_ns + wall + extra_cpu + extra_int;
        account_after(&mut rec, self.prev_cause);
        self.prev_cause = rec.cause;
        self.push(rec);
        self.sh.cycles_done.fetch_add(1, Ordering::Relaxed);
        self.sh.cycle_entered_ns.store(0, Ordering::Release);
        rec
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.sh.stop.store(true, Ordering::SeqCst);
        self.sh
            .start
            .word
            .store(self.cycle.wrapping_add(1).max(1), Ordering::SeqCst);
        self.sh.start.notify_all();
        for w in self.workers.drain(..) {
            w.join();
        }
    }
}

/// Nominal period of an engine spec, for callers that need it before building.
pub fn period_ns(rate: u32, frames: usize) -> u64 {
    crate::common::ns_of_frames(frames as u64, rate)
}

impl Engine {
    pub fn period_ns(&self) -> u64 {
        self.period_ns
    }
}

impl Engine {
    /// Send note-on (`true`) or note-off to every plugin of every track (synths start or
    /// stop their tone; others ignore it). Call it on the driver thread between cycles, where
    /// thread 0 alone touches the tracks; real-time safe (no allocation, no lock).
    pub fn note(&mut self, on: bool) {
        for cell in self.sh.tracks.iter() {
            // SAFETY: between cycles only thread 0 (the caller, through &mut self) touches
            // the tracks; no cycle is published, so no worker claims one.
            let tr = unsafe { &mut *cell.0.get() };
            for p in tr.plugins.iter_mut() {
                if on {
                    p.note_on();
                } else {
                    p.note_off();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ramp_adds_one_element_per_step_up_to_the_chain() {
        let r = Ramp {
            start: 0,
            every_ns: 5_000_000,
        };
        // P = 2 ms: steps at 5 ms → periods 3 (6 ms), 5 (10 ms), 8 (16 ms) ...
        let p = 2_000_000;
        let got: Vec<usize> = (0..12).map(|k| r.active_at(k, p, 3)).collect();
        assert_eq!(got, [0, 0, 0, 1, 1, 2, 2, 2, 3, 3, 3, 3]);
        let r = Ramp { start: 2, ..r };
        assert_eq!(r.active_at(0, p, 3), 2);
        assert_eq!(r.active_at(u64::MAX / 4, p, 3), 3, "no overflow");
    }

    /// Every track is processed exactly once per cycle whoever claims it: with an
    /// oversubscribed pool (late workers, stealing), the bus sum must stay exact.
    #[test]
    fn every_track_runs_exactly_once_per_cycle() {
        let spec = EngineSpec {
            threads: 3,
            join_spin_ns: 1_000,
            worker_spin_ns: 1_000,
            ..EngineSpec::new(
                48000,
                32,
                8,
                // Enough work per track (~13 µs) that sleeping workers wake in time to steal.
                crate::dsp::parse_chain("burn(2%),gain(0.5),thru").unwrap(),
            )
        };
        let (mut e, mut rx) = Engine::new(&spec).unwrap();
        let mut ol = vec![0f32; 32];
        let mut or = vec![0f32; 32];
        let mut crit_seen = [false; 3];
        let mut worker_cycles = 0;
        for k in 0..2000u64 {
            let v = (k % 17) as f32 * 0.125;
            let il = vec![v; 32];
            let ir = vec![-v; 32];
            let now = monotonic_ns();
            let t = CycleTiming {
                cycle: k,
                t_ideal_ns: now,
                release_ns: now,
                wake_ns: now,
                deadline_ns: now + 10_000_000,
                prev_wake_ns: 0,
                skipped_before: 0,
                time: TimeBase::Real,
            };
            let mut io = AudioIo {
                in_l: &il,
                in_r: &ir,
                out_l: &mut ol,
                out_r: &mut or,
            };
            let r = e.process_cycle(&mut io, &t);
            assert!(
                ol.iter().all(|&x| x == 4.0 * v),
                "cycle {k}: {} != {}",
                ol[0],
                4.0 * v
            );
            assert!(or.iter().all(|&x| x == -4.0 * v));
            assert!(r.end_ns >= r.wake_ns);
            for i in 0..8 {
                assert!(r.track_end_ns[i] >= r.track_start_ns[i]);
            }
            assert!(r.wall_ns() >= r.track_end_ns[..8].iter().copied().max().unwrap() as u64);
            crit_seen[r.crit_thread as usize] = true;
            if r.thread_cpu_ns[1] > 0 || r.thread_cpu_ns[2] > 0 {
                worker_cycles += 1;
            }
            while rx.pop().is_ok() {}
        }
        assert!(crit_seen[0], "thread 0 processes tracks too");
        assert!(worker_cycles > 0, "the workers never took a track");
        assert_eq!(e.monitor().dropped_records(), 0);
    }
}
