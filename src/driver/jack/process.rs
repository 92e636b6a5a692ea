//! The process callback: the server's real-time thread runs one engine cycle per call, and
//! the notification thread's counters it watches.

use crate::common::cycle::Cause;
use crate::driver::signal::{InputSource, OutputSink};
use crate::driver::{AudioIo, CycleHandler, CycleTiming, DriverStats, TimeBase};
use crate::rt::clock::monotonic_ns;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// Cycles of history copied out per server xrun; the xrun notification can lag its cycle
/// by a period or two on a busy machine.
pub(super) const HISTORY: usize = 8;
/// Server xruns kept with their cycle history; more are counted but not matched.
pub(super) const MAX_XRUN_EVENTS: usize = 1024;
/// How far JACK's reported cycle start may lie outside the frame-resolution bracket of the
/// real one before it is not trusted: scheduling between the two clock reads plus rounding.
pub(super) const DLL_SLACK_NS: u64 = 50_000;

/// What a cycle leaves behind for xrun matching.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Brief {
    pub(super) valid: bool,
    pub(super) cycle: u64,
    pub(super) t_ideal_ns: u64,
    pub(super) end_ns: u64,
    pub(super) deadline_ns: u64,
    pub(super) xrun: bool,
    pub(super) cause: Option<Cause>,
}

#[derive(Clone, Copy)]
pub(super) struct XrunSlot {
    pub(super) at_ns: u64,
    pub(super) history: [Brief; HISTORY],
}

/// State shared by the process thread, the notification thread and the waiting thread.
/// Atomics only: the notification callbacks must be async-signal-safe.
pub(super) struct Shared {
    pub(super) done: AtomicBool,
    pub(super) shutdown: AtomicBool,
    /// New buffer size (or 0) / sample rate (or 0) the server switched to.
    pub(super) new_frames: AtomicU32,
    pub(super) new_rate: AtomicU32,
    pub(super) server_xruns: AtomicU64,
    pub(super) xrun_times: Box<[AtomicU64]>,
    pub(super) clock_offset_ns: AtomicI64,
    pub(super) process_tid: AtomicI32,
    /// Wake time of the cycle in progress, 0 between cycles: a cycle stuck in a plugin
    /// must not be torn down (see the teardown in `run`).
    pub(super) in_cycle_ns: AtomicU64,
    /// Our process callback is running (any branch of it). jackd2's libjack stops the
    /// process thread on deactivate with pthread_cancel, and the thread's cancellation type
    /// is asynchronous: a cancel that lands inside the callback unwinds through Rust frames
    /// and aborts the process ("FATAL: exception not rethrown"). The teardown waits for the
    /// callback to be out of our code before it deactivates.
    pub(super) in_callback: AtomicBool,
    /// Mirrors of the process thread's counters: if the server dies, the handler goes down
    /// with the client and these are what is left.
    pub(super) cycles_done: AtomicU64,
    pub(super) xruns: AtomicU64,
    pub(super) skipped: AtomicU64,
    pub(super) periods_elapsed: AtomicU64,
}

pub(super) struct Notifications {
    pub(super) sh: Arc<Shared>,
    pub(super) rate: u32,
}

impl jack::NotificationHandler for Notifications {
    // SAFETY: the trait marks this unsafe because it may run in a signal-like context after
    // the server died; it only stores an atomic flag, touching no client, lock or allocation.
    unsafe fn shutdown(&mut self, _status: jack::ClientStatus, _reason: &str) {
        self.sh.shutdown.store(true, Ordering::SeqCst);
    }

    fn sample_rate(&mut self, _: &jack::Client, srate: jack::Frames) -> jack::Control {
        if srate != self.rate {
            self.sh.new_rate.store(srate, Ordering::SeqCst);
        }
        jack::Control::Continue
    }

    fn xrun(&mut self, _: &jack::Client) -> jack::Control {
        let n = self.sh.server_xruns.fetch_add(1, Ordering::AcqRel) as usize;
        let t = monotonic_ns();
        let slots = &self.sh.xrun_times;
        slots[n % slots.len()].store(t, Ordering::Release);
        jack::Control::Continue
    }
}

pub(super) struct Process<H, I, O> {
    pub(super) handler: H,
    pub(super) sh: Arc<Shared>,
    pub(super) ins: Vec<jack::Port<jack::AudioIn>>,
    pub(super) outs: Vec<jack::Port<jack::AudioOut>>,
    /// Generated input used when our input ports are not connected, so the graph processes
    /// the same signal as on the virtual driver.
    pub(super) source: I,
    /// Take the input from `source` (our input ports are not connected).
    pub(super) use_source: bool,
    pub(super) sink: O,
    pub(super) in_l: Vec<f32>,
    pub(super) in_r: Vec<f32>,
    pub(super) frames: u32,
    pub(super) rate: u32,
    pub(super) periods_total: u64,
    pub(super) first_frame: Option<u32>,
    pub(super) first_t_ideal: u64,
    pub(super) next_k: u64,
    pub(super) prev_wake: u64,
    pub(super) prev_end: u64,
    pub(super) stats: DriverStats,
    pub(super) history: [Brief; HISTORY],
    pub(super) hist_pos: usize,
    pub(super) xruns_seen: u64,
    pub(super) xrun_slots: Vec<XrunSlot>,
    pub(super) period_usecs_sum: f64,
    pub(super) cycle_time_errors: u64,
    pub(super) early_wakes: u64,
    pub(super) max_early_ns: u64,
    pub(super) dll_unlocked: u64,
    pub(super) dll_error_max_ns: u64,
    pub(super) deadline_from_period: u64,
    pub(super) deadline_error_max_ns: u64,
}

impl<H, I, O> Process<H, I, O> {
    pub(super) fn into_parts(self) -> crate::driver::Parts<H, I, O> {
        crate::driver::Parts {
            handler: self.handler,
            source: self.source,
            sink: self.sink,
        }
    }

    fn note_server_xruns(&mut self) {
        let n = self.sh.server_xruns.load(Ordering::Acquire);
        while self.xruns_seen < n {
            let slots = &self.sh.xrun_times;
            let at = slots[self.xruns_seen as usize % slots.len()].load(Ordering::Acquire);
            if self.xrun_slots.len() < self.xrun_slots.capacity() {
                let mut history = [Brief::default(); HISTORY];
                for (i, h) in history.iter_mut().enumerate() {
                    *h = self.history[(self.hist_pos + i) % HISTORY];
                }
                // Capacity reserved up front: this push never allocates.
                self.xrun_slots.push(XrunSlot { at_ns: at, history });
            }
            self.xruns_seen += 1;
        }
    }
}

impl<H, I, O> jack::ProcessHandler for Process<H, I, O>
where
    H: CycleHandler + Send,
    I: InputSource,
    O: OutputSink,
{
    fn process(&mut self, _: &jack::Client, ps: &jack::ProcessScope) -> jack::Control {
        let wake = monotonic_ns();
        self.sh.in_callback.store(true, Ordering::SeqCst);
        let c = self.cycle(ps, wake);
        self.sh.in_callback.store(false, Ordering::SeqCst);
        c
    }

    fn buffer_size(&mut self, _: &jack::Client, size: jack::Frames) -> jack::Control {
        if size != self.frames {
            self.sh.new_frames.store(size, Ordering::SeqCst);
        }
        jack::Control::Continue
    }
}

impl<H, I, O> Process<H, I, O>
where
    H: CycleHandler + Send,
    I: InputSource,
    O: OutputSink,
{
    /// One process callback; `wake` was read first thing in it.
    #[inline]
    fn cycle(&mut self, ps: &jack::ProcessScope, wake: u64) -> jack::Control {
        if self.sh.process_tid.load(Ordering::Relaxed) == 0 {
            // SAFETY: gettid has no preconditions.
            let tid = unsafe { libc::gettid() };
            self.sh.process_tid.store(tid, Ordering::Relaxed);
        }
        let n = ps.n_frames();
        let stopping = self.sh.done.load(Ordering::Relaxed)
            || self.sh.shutdown.load(Ordering::Relaxed)
            || self.sh.new_frames.load(Ordering::Relaxed) != 0
            || self.sh.new_rate.load(Ordering::Relaxed) != 0;
        if stopping || n != self.frames {
            if n != self.frames {
                self.sh.new_frames.store(n, Ordering::SeqCst);
            }
            for p in self.outs.iter_mut() {
                p.as_mut_slice(ps).fill(0.0);
            }
            return jack::Control::Continue;
        }
        // Frame-resolution bracket of the server's actual cycle start, read right after wake.
        let since = ps.frames_since_cycle_start() as u64;
        let off = self.sh.clock_offset_ns.load(Ordering::Relaxed);
        let to_mono = |usecs: u64| (usecs as i64 * 1000 + off).max(0) as u64;
        let frame_ns = 1_000_000_000 / self.rate as u64;
        let period_ns = self.frames as u64 * 1_000_000_000 / self.rate as u64;
        let latest = wake.saturating_sub(since * frame_ns);
        let earliest = latest.saturating_sub(frame_ns);
        let (frame, t_ideal, deadline) = match ps.cycle_times() {
            Ok(ct) => {
                self.period_usecs_sum += ct.period_usecs as f64;
                let t = to_mono(ct.current_usecs);
                let next = to_mono(ct.next_usecs);
                if t + DLL_SLACK_NS >= earliest && t <= latest + DLL_SLACK_NS {
                    let (deadline, miss) = cycle_deadline(t, next, period_ns);
                    if let Some(m) = miss {
                        self.deadline_from_period += 1;
                        self.deadline_error_max_ns = self.deadline_error_max_ns.max(m);
                    }
                    (ct.current_frames, t, deadline)
                } else {
                    // jackd2's cycle start is its DLL's prediction, and a dummy driver on
                    // a busy VM leaves the DLL unlocked by milliseconds (seen: 3 ms ahead of
                    // the real start and drifting 30 µs per cycle). Then the start measured
                    // through frames_since_cycle_start is the truth, to ± half a frame.
                    self.dll_unlocked += 1;
                    self.dll_error_max_ns = self
                        .dll_error_max_ns
                        .max(t.abs_diff((earliest + latest) / 2));
                    let est = (earliest + latest) / 2;
                    (ct.current_frames, est, est + period_ns)
                }
            }
            Err(_) => {
                self.cycle_time_errors += 1;
                let est = (earliest + latest) / 2;
                (ps.last_frame_time(), est, est + period_ns)
            }
        };
        if wake < t_ideal {
            self.early_wakes += 1;
            self.max_early_ns = self.max_early_ns.max(t_ideal - wake);
        }
        let first = *self.first_frame.get_or_insert(frame);
        if self.stats.cycles == 0 {
            self.first_t_ideal = t_ideal;
        }
        let k = (frame.wrapping_sub(first) / self.frames) as u64;
        let k = k.max(self.next_k);
        let skipped = (k - self.next_k) as u32;
        if k >= self.periods_total {
            self.sh.done.store(true, Ordering::SeqCst);
            for p in self.outs.iter_mut() {
                p.as_mut_slice(ps).fill(0.0);
            }
            return jack::Control::Continue;
        }
        let timing = CycleTiming {
            cycle: k,
            t_ideal_ns: t_ideal,
            release_ns: t_ideal.max(self.prev_end),
            wake_ns: wake,
            deadline_ns: deadline,
            prev_wake_ns: self.prev_wake,
            skipped_before: skipped,
            time: TimeBase::Real,
        };
        let f = self.frames as usize;
        let frame_pos = k * self.frames as u64;
        self.sh.in_cycle_ns.store(wake, Ordering::Relaxed);
        let rec = {
            let (o1, o2) = self.outs.split_at_mut(1);
            let out_l = o1[0].as_mut_slice(ps);
            let out_r = o2[0].as_mut_slice(ps);
            let mut io = match self.use_source {
                true => {
                    self.source
                        .fill(frame_pos, &mut self.in_l[..f], &mut self.in_r[..f]);
                    AudioIo {
                        in_l: &self.in_l[..f],
                        in_r: &self.in_r[..f],
                        out_l,
                        out_r,
                    }
                }
                false => AudioIo {
                    in_l: self.ins[0].as_slice(ps),
                    in_r: self.ins[1].as_slice(ps),
                    out_l,
                    out_r,
                },
            };
            let rec = self.handler.process_cycle(&mut io, &timing);
            self.sink.consume(frame_pos, io.out_l, io.out_r, !rec.xrun);
            rec
        };
        self.sh.in_cycle_ns.store(0, Ordering::Relaxed);
        self.stats.cycles += 1;
        self.stats.skipped_periods += skipped as u64;
        self.stats.xruns += rec.xrun as u64;
        self.stats.periods_elapsed = k + 1;
        self.next_k = k + 1;
        self.prev_wake = wake;
        self.prev_end = rec.end_ns;
        self.history[self.hist_pos] = Brief {
            valid: true,
            cycle: k,
            t_ideal_ns: rec.t_ideal_ns,
            end_ns: rec.end_ns,
            deadline_ns: rec.deadline_ns,
            xrun: rec.xrun,
            cause: rec.cause,
        };
        self.hist_pos = (self.hist_pos + 1) % HISTORY;
        self.note_server_xruns();
        self.sh
            .cycles_done
            .store(self.stats.cycles, Ordering::Relaxed);
        self.sh.xruns.store(self.stats.xruns, Ordering::Relaxed);
        self.sh
            .skipped
            .store(self.stats.skipped_periods, Ordering::Relaxed);
        self.sh
            .periods_elapsed
            .store(self.stats.periods_elapsed, Ordering::Relaxed);
        jack::Control::Continue
    }
}

/// A cycle's deadline from the server's prediction of the next cycle start, unless that
/// is more than P/8 away from `t_ideal + P`; then `t_ideal + P` and the misprediction.
pub(super) fn cycle_deadline(t_ideal: u64, next: u64, period_ns: u64) -> (u64, Option<u64>) {
    let nominal = t_ideal + period_ns;
    let miss = next.abs_diff(nominal);
    if miss <= period_ns / 8 {
        (next, None)
    } else {
        (nominal, Some(miss))
    }
}

#[derive(Default)]
pub(super) struct OffsetStats {
    pub(super) n: i64,
    pub(super) sum: i64,
    pub(super) max_abs: i64,
}

impl OffsetStats {
    /// Bracket jack_get_time() between two CLOCK_MONOTONIC reads and keep the narrowest of
    /// `tries` brackets: this thread is not real-time, and a bracket it was preempted in
    /// would put milliseconds of error into every t_ideal. The midpoint minus JACK's µs
    /// (plus half a µs for its truncation) is the offset to add to JACK times. A sample
    /// whose best bracket is still wider than 20 µs is dropped.
    pub(super) fn sample(&mut self, client: &jack::Client, sh: &Shared, tries: usize) {
        let mut best: Option<(u64, i64)> = None;
        for _ in 0..tries {
            let a = monotonic_ns();
            let j = client.time();
            let b = monotonic_ns();
            let width = b - a;
            if best.is_none_or(|(w, _)| width < w) {
                best = Some((width, ((a + b) / 2) as i64 - (j as i64 * 1000 + 500)));
            }
            if width < 2_000 {
                break;
            }
        }
        let Some((width, off)) = best else { return };
        if width > 20_000 {
            return;
        }
        // Below 50 µs the clocks are the same and the difference is read jitter: keep 0 so
        // t_ideal is exactly the server's timestamp.
        let applied = if off.abs() < 50_000 { 0 } else { off };
        sh.clock_offset_ns.store(applied, Ordering::Relaxed);
        self.n += 1;
        self.sum += off;
        self.max_abs = self.max_abs.max(off.abs());
    }
    pub(super) fn mean(&self) -> i64 {
        if self.n == 0 {
            0
        } else {
            self.sum / self.n
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadline_is_the_predicted_next_start_unless_the_dll_is_re_locking() {
        let p = 5_333_333;
        // A locked DLL predicts within ppm of P: its prediction is the deadline.
        assert_eq!(
            cycle_deadline(1_000, 1_000 + p + 40, p),
            (1_000 + p + 40, None)
        );
        assert_eq!(cycle_deadline(1_000, 1_000 + p - p / 8, p).1, None);
        // Seen on jackd2 after stalls: 218 µs and 41 ms "periods".
        assert_eq!(
            cycle_deadline(1_000, 1_000 + 218_000, p),
            (1_000 + p, Some(p - 218_000))
        );
        assert_eq!(
            cycle_deadline(1_000, 1_000 + 41_089_000, p),
            (1_000 + p, Some(41_089_000 - p))
        );
        // A prediction before the cycle start itself.
        assert_eq!(cycle_deadline(1_000, 0, p), (1_000 + p, Some(1_000 + p)));
    }
}
