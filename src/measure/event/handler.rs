//! The real-time side: the cycle handler that reads the trigger before each engine cycle
//! and finds the tone's onset after it, the sinks the devices play into, and the handle a
//! test drives that handler through.

use super::config::Scenario;
use crate::common::cycle::CycleRecord;
use crate::driver::signal::{OutputSink, SinkStats};
use crate::driver::{AudioIo, CycleHandler, CycleTiming};
use crate::engine::{Engine, EngineSpec};
use crate::error::Result;
use crate::rt::clock::monotonic_ns;
use crate::rt::Policy;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// State shared between the trigger thread and the audio cycle: atomics only.
#[derive(Default)]
pub(super) struct Shared {
    /// Trial number of the latest trigger (0 = none yet).
    pub(super) trigger_seq: AtomicU64,
    /// Trial whose onset was rendered.
    pub(super) rendered_seq: AtomicU64,
    /// Trial after whose tone a silent period was rendered again.
    pub(super) silent_seq: AtomicU64,
    pub(super) cycles: AtomicU64,
    pub(super) xruns: AtomicU64,
    /// t_ideal of the first cycle seen.
    pub(super) t0_ns: AtomicU64,
}

/// What the rendering cycle reports, through a wait-free ring.
#[derive(Debug, Clone, Copy)]
pub(super) struct Onset {
    pub(super) seq: u64,
    pub(super) cycle: u64,
    pub(super) t_ideal_ns: u64,
    pub(super) seen_ns: u64,
    pub(super) prev_check_ns: u64,
    pub(super) onset_frame: u32,
    pub(super) xrun: bool,
    /// Push drivers: the delay (frames) reported right after the write that carried the
    /// onset, and when it was read.
    pub(super) write_delay: Option<(i64, u64)>,
}

/// One cycle that missed its deadline, CLOCK_MONOTONIC ns: the window `--forensics` explains.
#[derive(Debug, Clone, Copy)]
pub(super) struct XrunAt {
    pub(super) cycle: u64,
    pub(super) t_ideal_ns: u64,
    pub(super) wake_ns: u64,
    pub(super) end_ns: u64,
    pub(super) crit_cpu_ns: u64,
}

/// Reads (cycle, delay frames, time read) of the latest period a push driver wrote. Called
/// on the driver thread; must not allocate or block.
pub type DelayProbe = Box<dyn Fn() -> Option<(u64, i64, u64)> + Send>;

#[derive(Debug, Clone, Copy)]
enum Phase {
    Idle,
    /// Note-on sent; waiting for the first non-zero sample.
    Pending {
        seq: u64,
        seen_ns: u64,
        prev_check_ns: u64,
    },
    Sounding {
        left: u32,
    },
    /// Note-off sent; waiting for a silent period.
    Releasing,
}

fn first_sound(out: &[f32]) -> Option<usize> {
    out.iter().position(|&x| x != 0.0)
}

/// Wraps the engine: reads the trigger before each cycle and finds the onset after it.
pub(super) struct EventHandler {
    engine: Engine,
    sh: Arc<Shared>,
    tx: rtrb::Producer<Onset>,
    phase: Phase,
    seen_seq: u64,
    prev_check_ns: u64,
    tone_cycles: u32,
    /// Push drivers: the onset waits here until the delay of its write is known.
    pub(super) delay_probe: Option<DelayProbe>,
    held: Option<Onset>,
    /// The run's xruns, the first `crate::trace::MAX_WINDOWS` (capacity reserved up front:
    /// no allocation on the device thread).
    pub(super) xruns: Vec<XrunAt>,
}

impl EventHandler {
    /// The engine's worker threads, watched with the device's.
    pub(super) fn worker_tids(&self) -> Vec<libc::pid_t> {
        self.engine.worker_tids()
    }

    /// The write of the onset's cycle happened after that cycle's handler returned: pick up
    /// its delay now (a later write means that one failed; the onset goes without).
    fn release_held(&mut self) {
        let (Some(o), Some(p)) = (self.held, &self.delay_probe) else {
            return;
        };
        match p() {
            Some((c, d, at)) if c == o.cycle => {
                let _ = self.tx.push(Onset {
                    write_delay: Some((d, at)),
                    ..o
                });
                self.held = None;
            }
            Some((c, _, _)) if c > o.cycle => {
                let _ = self.tx.push(o);
                self.held = None;
            }
            _ => {}
        }
    }
}

impl CycleHandler for EventHandler {
    fn process_cycle(&mut self, io: &mut AudioIo<'_>, t: &CycleTiming) -> CycleRecord {
        self.release_held();
        // The flag first, then the clock: a trigger seen here was published before `check`,
        // so te <= seen_ns holds exactly.
        let seq = self.sh.trigger_seq.load(Ordering::Acquire);
        let check = monotonic_ns();
        if self.sh.cycles.load(Ordering::Relaxed) == 0 {
            self.sh.t0_ns.store(t.t_ideal_ns, Ordering::Relaxed);
        }
        if let Phase::Idle = self.phase {
            if seq != self.seen_seq {
                self.seen_seq = seq;
                self.engine.note(true);
                self.phase = Phase::Pending {
                    seq,
                    seen_ns: check,
                    prev_check_ns: self.prev_check_ns,
                };
            }
        }
        self.prev_check_ns = check;
        let rec = self.engine.process_cycle(io, t);
        match self.phase {
            Phase::Pending {
                seq,
                seen_ns,
                prev_check_ns,
            } => {
                if let Some(i) = first_sound(io.out_l) {
                    let o = Onset {
                        seq,
                        cycle: t.cycle,
                        t_ideal_ns: t.t_ideal_ns,
                        seen_ns,
                        prev_check_ns,
                        onset_frame: i as u32,
                        xrun: rec.xrun,
                        write_delay: None,
                    };
                    if self.delay_probe.is_some() {
                        self.held = Some(o);
                    } else {
                        let _ = self.tx.push(o);
                    }
                    self.sh.rendered_seq.store(seq, Ordering::Release);
                    self.phase = Phase::Sounding {
                        left: self.tone_cycles,
                    };
                }
            }
            Phase::Sounding { left } => {
                if left <= 1 {
                    self.engine.note(false);
                    self.phase = Phase::Releasing;
                } else {
                    self.phase = Phase::Sounding { left: left - 1 };
                }
            }
            Phase::Releasing => {
                if first_sound(io.out_l).is_none() {
                    self.sh.silent_seq.store(self.seen_seq, Ordering::Release);
                    self.phase = Phase::Idle;
                }
            }
            Phase::Idle => {}
        }
        self.sh.cycles.fetch_add(1, Ordering::Relaxed);
        if rec.xrun {
            self.sh.xruns.fetch_add(1, Ordering::Relaxed);
            if self.xruns.len() < self.xruns.capacity() {
                self.xruns.push(XrunAt {
                    cycle: rec.cycle,
                    t_ideal_ns: rec.t_ideal_ns,
                    wake_ns: rec.wake_ns,
                    end_ns: rec.end_ns,
                    crit_cpu_ns: rec.crit_cpu_ns,
                });
            }
        }
        rec
    }
}

/// The virtual device's output side: the absolute frames at which the played signal goes
/// from silence to sound (periods the device actually played; late ones were not).
pub(super) struct OnsetSink {
    sounding: bool,
    pub(super) onsets: Vec<u64>,
}

impl OnsetSink {
    pub(super) fn new(capacity: usize) -> Self {
        OnsetSink {
            sounding: false,
            onsets: Vec::with_capacity(capacity),
        }
    }
}

impl OutputSink for OnsetSink {
    fn consume(&mut self, frame: u64, l: &[f32], _r: &[f32], on_time: bool) {
        if !on_time {
            self.sounding = false;
            return;
        }
        match first_sound(l) {
            None => self.sounding = false,
            Some(i) if !self.sounding => {
                self.sounding = true;
                // Capacity reserved up front: no allocation on the device thread.
                if self.onsets.len() < self.onsets.capacity() {
                    self.onsets.push(frame + i as u64);
                }
            }
            Some(_) => {}
        }
    }
    fn stats(&self) -> SinkStats {
        SinkStats::default()
    }
}

/// A sink that only discards (JACK plays the port buffers itself).
pub(super) struct Discard;
impl OutputSink for Discard {
    fn consume(&mut self, _: u64, _: &[f32], _: &[f32], _: bool) {}
    fn stats(&self) -> SinkStats {
        SinkStats::default()
    }
}

/// How long the tone sounds: at least 5 ms and one period.
fn tone_cycles(period_ns: u64) -> u32 {
    (5_000_000u64.div_ceil(period_ns.max(1))).max(1) as u32
}

/// The engine and its handler for `frames` at `rate`.
pub(super) fn build_handler(
    chain: &str,
    rate: u32,
    frames: u32,
    policy: Policy,
) -> Result<(
    EventHandler,
    rtrb::Consumer<Onset>,
    Arc<Shared>,
    crate::engine::EngineMonitor,
)> {
    let spec = EngineSpec {
        policy,
        ring_capacity: 64,
        ..EngineSpec::new(rate, frames as usize, 1, crate::dsp::parse_chain(chain)?)
    };
    let (engine, _probe) = Engine::new(&spec)?;
    let monitor = engine.monitor();
    let sh = Arc::new(Shared::default());
    let (tx, rx) = rtrb::RingBuffer::new(1024);
    let period_ns = crate::engine::period_ns(rate, frames as usize);
    Ok((
        EventHandler {
            engine,
            sh: sh.clone(),
            tx,
            phase: Phase::Idle,
            seen_seq: 0,
            prev_check_ns: 0,
            tone_cycles: tone_cycles(period_ns),
            delay_probe: None,
            held: None,
            xruns: Vec::with_capacity(crate::trace::MAX_WINDOWS),
        },
        rx,
        sh,
        monitor,
    ))
}

/// What a test (or another driver) sees of one rendered onset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OnsetView {
    pub trial: u64,
    pub cycle: u64,
    pub onset_frame: u32,
    pub write_delay_frames: Option<i64>,
}

/// The trigger side of a handler made by [`cycle_handler`].
pub struct TriggerHandle {
    sh: Arc<Shared>,
    rx: rtrb::Consumer<Onset>,
}

impl TriggerHandle {
    /// Publish trial `seq` (1, 2, …) as the trigger thread does.
    pub fn trigger(&self, seq: u64) {
        self.sh.trigger_seq.store(seq, Ordering::Release);
    }
    /// The latest trial whose onset was rendered.
    pub fn rendered(&self) -> u64 {
        self.sh.rendered_seq.load(Ordering::Acquire)
    }
    /// The latest trial after which silence was rendered again.
    pub fn silent(&self) -> u64 {
        self.sh.silent_seq.load(Ordering::Acquire)
    }
    /// Onsets reported since the last call.
    pub fn onsets(&mut self) -> Vec<OnsetView> {
        drain(&mut self.rx)
            .into_iter()
            .map(|o| OnsetView {
                trial: o.seq,
                cycle: o.cycle,
                onset_frame: o.onset_frame,
                write_delay_frames: o.write_delay.map(|d| d.0),
            })
            .collect()
    }
}

/// The event cycle handler (engine + synth + trigger/onset logic) without a driver: drive
/// its cycles yourself and trigger through the handle. What the drivers of this module run.
pub fn cycle_handler(
    scenario: Scenario,
    rate: u32,
    frames: u32,
) -> Result<(impl CycleHandler + Send, TriggerHandle)> {
    let (h, rx, sh, _) = build_handler(scenario.chain(), rate, frames, Policy::Other { nice: 0 })?;
    Ok((h, TriggerHandle { sh, rx }))
}

pub(super) fn drain(rx: &mut rtrb::Consumer<Onset>) -> Vec<Onset> {
    let mut v = Vec::new();
    while let Ok(o) = rx.pop() {
        v.push(o);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn onset_sink_sees_each_silence_to_sound_edge_once() {
        let mut s = OnsetSink::new(4);
        let z = [0.0f32; 4];
        let mut a = [0.0f32; 4];
        a[2] = 0.5;
        let b = [0.3f32; 4];
        s.consume(0, &z, &z, true);
        s.consume(4, &a, &a, true);
        s.consume(8, &b, &b, true);
        s.consume(12, &z, &z, true);
        s.consume(16, &b, &b, false);
        s.consume(20, &b, &b, true);
        assert_eq!(s.onsets, vec![6, 20]);
    }
}
