//! Device semantics shared by the `virtual` and `sim` drivers (docs/methods.md).
//!
//! The device clock never stops and never shifts: period k's interrupt is at
//! `t0 + k·frames/rate`, computed from the exact rational so there is no drift. The engine
//! may process period k from `max(t_ideal(k), end(k−1))` (catch-up without sleeping when it
//! is behind but still in time, as JACK's ALSA driver does) until its deadline
//! `t_ideal(k) + (n−1)·P`. A cycle that ends after its deadline is an xrun; the driver then
//! resynchronises to the first period whose interrupt is not before that end, and the
//! periods in between are *skipped*: the device played them with no fresh data. With n = 2
//! no backlog can build up without an xrun.

use super::signal::{InputSource, OutputSink};
use super::{AudioIo, CycleHandler, CycleTiming, DeviceParams, DriverStats, TimeBase};

#[derive(Debug, Clone)]
pub struct DeviceClock {
    pub params: DeviceParams,
    t0_ns: u64,
    next: u64,
    prev_end_ns: u64,
    prev_wake_ns: u64,
    pending_skipped: u32,
    pub skipped_total: u64,
    pub cycles: u64,
    pub xruns: u64,
}

/// The next period to process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextCycle {
    pub cycle: u64,
    pub t_ideal_ns: u64,
    pub release_ns: u64,
    pub deadline_ns: u64,
    pub prev_wake_ns: u64,
    pub skipped_before: u32,
}

impl NextCycle {
    /// The timing the handler sees when this period woke at `wake_ns`.
    #[inline]
    pub fn timing(&self, wake_ns: u64, time: TimeBase) -> CycleTiming {
        CycleTiming {
            cycle: self.cycle,
            t_ideal_ns: self.t_ideal_ns,
            release_ns: self.release_ns,
            wake_ns,
            deadline_ns: self.deadline_ns,
            prev_wake_ns: self.prev_wake_ns,
            skipped_before: self.skipped_before,
            time,
        }
    }
}

/// A software device's stereo period buffers, and the one step both software drivers take
/// per period once it has woken: input in, handler, output out, clock advanced.
pub struct PeriodBuffers {
    in_l: Vec<f32>,
    in_r: Vec<f32>,
    out_l: Vec<f32>,
    out_r: Vec<f32>,
}

impl PeriodBuffers {
    pub fn new(frames: u32) -> Self {
        let f = frames as usize;
        PeriodBuffers {
            in_l: vec![0.0; f],
            in_r: vec![0.0; f],
            out_l: vec![0.0; f],
            out_r: vec![0.0; f],
        }
    }

    #[inline]
    pub fn process(
        &mut self,
        clock: &mut DeviceClock,
        timing: &CycleTiming,
        h: &mut dyn CycleHandler,
        source: &mut dyn InputSource,
        sink: &mut dyn OutputSink,
    ) {
        let first_frame = timing.cycle * clock.params.frames as u64;
        source.fill(first_frame, &mut self.in_l, &mut self.in_r);
        let mut io = AudioIo {
            in_l: &self.in_l,
            in_r: &self.in_r,
            out_l: &mut self.out_l,
            out_r: &mut self.out_r,
        };
        let rec = h.process_cycle(&mut io, timing);
        sink.consume(first_frame, &self.out_l, &self.out_r, !rec.xrun);
        clock.complete(rec.wake_ns, rec.end_ns, rec.xrun);
    }
}

impl DeviceClock {
    /// What a run of `periods_total` device periods did, counted within those periods.
    pub fn stats(&self, periods_total: u64, sink: &dyn OutputSink) -> DriverStats {
        let (skipped_periods, periods_elapsed) = self.totals_within(periods_total);
        DriverStats {
            cycles: self.cycles,
            skipped_periods,
            xruns: self.xruns,
            periods_elapsed,
            sink: sink.stats(),
        }
    }

    pub fn new(params: DeviceParams, t0_ns: u64) -> Self {
        DeviceClock {
            params,
            t0_ns,
            next: 0,
            prev_end_ns: 0,
            prev_wake_ns: 0,
            pending_skipped: 0,
            skipped_total: 0,
            cycles: 0,
            xruns: 0,
        }
    }

    pub fn t0_ns(&self) -> u64 {
        self.t0_ns
    }

    pub fn params(&self) -> DeviceParams {
        self.params
    }

    /// Exact interrupt time of period k.
    #[inline]
    pub fn t_ideal(&self, k: u64) -> u64 {
        let off =
            k as u128 * self.params.frames as u128 * 1_000_000_000u128 / self.params.rate as u128;
        self.t0_ns + off as u64
    }

    /// The last period whose interrupt is at or before `ns` (0 before the first): the
    /// inverse of `t_ideal`, rounded down.
    #[inline]
    fn period_begun_by(&self, ns: u64) -> u64 {
        let per_ns = self.params.frames as u128 * 1_000_000_000u128;
        let k = ns.saturating_sub(self.t0_ns) as u128 * self.params.rate as u128 / per_ns;
        k.min(u64::MAX as u128 / 2) as u64
    }

    /// Device periods elapsed before period `k` would be processed (processed + skipped).
    pub fn periods_elapsed(&self) -> u64 {
        self.next
    }

    /// Skipped periods and periods elapsed counted only up to period `limit` (the end of a
    /// run): a last late cycle may have skipped periods the run never reached.
    pub fn totals_within(&self, limit: u64) -> (u64, u64) {
        let beyond = self.next.saturating_sub(limit);
        (
            self.skipped_total.saturating_sub(beyond),
            self.next.min(limit),
        )
    }

    /// The period to process next.
    #[inline]
    pub fn next_cycle(&self) -> NextCycle {
        let k = self.next;
        let t = self.t_ideal(k);
        NextCycle {
            cycle: k,
            t_ideal_ns: t,
            release_ns: t.max(self.prev_end_ns),
            deadline_ns: self.t_ideal(k + self.params.periods as u64 - 1),
            prev_wake_ns: self.prev_wake_ns,
            skipped_before: self.pending_skipped,
        }
    }

    /// The cycle returned by `next_cycle` woke at `wake` and ended at `end`; advance.
    #[inline]
    pub fn complete(&mut self, wake_ns: u64, end_ns: u64, xrun: bool) {
        let k = self.next;
        self.cycles += 1;
        self.prev_end_ns = end_ns;
        self.prev_wake_ns = wake_ns;
        let mut j = k + 1;
        if xrun {
            self.xruns += 1;
            // From the last period that began by `end`, not one step per skipped period: a
            // modelled cycle may span 10^12 of them.
            j = j.max(self.period_begun_by(end_ns));
            while self.t_ideal(j) < end_ns {
                j += 1;
            }
        }
        self.pending_skipped = (j - k - 1).min(u32::MAX as u64) as u32;
        self.skipped_total += j - k - 1;
        self.next = j;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clock(n: u32) -> DeviceClock {
        DeviceClock::new(
            DeviceParams {
                rate: 48000,
                frames: 64,
                periods: n,
            },
            1_000_000,
        )
    }

    #[test]
    fn a_long_overrun_skips_the_periods_it_spans_at_once() {
        let mut c = clock(2);
        // One step at a time: the same periods, for overruns of every size near a boundary.
        let naive = |c: &DeviceClock, end: u64| {
            let mut j = c.next + 1;
            while c.t_ideal(j) < end {
                j += 1;
            }
            j
        };
        for end in [
            0, 1, 1_333_332, 1_333_333, 1_333_334, 4_000_000, 2_666_667, 99_999_999,
        ] {
            let mut d = c.clone();
            let want = naive(&d, d.t0_ns + end);
            d.complete(d.t0_ns, d.t0_ns + end, true);
            assert_eq!(d.next, want, "end +{end}");
        }
        // A cycle lasting 2^55 ns (2.7·10^10 periods) ends at once, its count of skipped
        // periods saturating.
        let end = c.t0_ns + (1 << 55);
        c.complete(c.t0_ns, end, true);
        assert!(c.t_ideal(c.next - 1) < end && c.t_ideal(c.next) >= end);
        assert_eq!(c.next_cycle().skipped_before, u32::MAX);
    }

    #[test]
    fn interrupts_follow_the_exact_rational_without_drift() {
        let c = clock(2);
        assert_eq!(c.t_ideal(0), 1_000_000);
        assert_eq!(c.t_ideal(3), 1_000_000 + 4_000_000);
        // 750 periods of 64 frames at 48 kHz are exactly one second.
        assert_eq!(c.t_ideal(750), 1_000_000 + 1_000_000_000);
        assert_eq!(c.next_cycle().deadline_ns, c.t_ideal(1));
    }

    #[test]
    fn late_cycle_skips_periods_and_device_time_does_not_shift() {
        let mut c = clock(2);
        let n = c.next_cycle();
        c.complete(n.t_ideal_ns, n.t_ideal_ns + 100, false);
        let n = c.next_cycle();
        assert_eq!((n.cycle, n.skipped_before), (1, 0));
        // Ends 2.5 periods after its interrupt: periods 2 and 3 are gone.
        let end = n.t_ideal_ns + 5 * 1_333_333 / 2;
        c.complete(n.t_ideal_ns, end, true);
        let n = c.next_cycle();
        assert_eq!(n.cycle, 4);
        assert_eq!(n.skipped_before, 2);
        assert_eq!(n.t_ideal_ns, c.t_ideal(4));
        assert_eq!(c.skipped_total, 2);
        assert_eq!(n.release_ns, n.t_ideal_ns);
    }

    #[test]
    fn three_periods_allow_catch_up_with_backlog() {
        let mut c = clock(3);
        let n = c.next_cycle();
        let end = n.t_ideal_ns + 1_500_000;
        c.complete(n.t_ideal_ns, end, false);
        let n = c.next_cycle();
        assert_eq!(n.cycle, 1);
        assert_eq!(n.release_ns, end);
        assert!(n.release_ns > n.t_ideal_ns);
    }
}
