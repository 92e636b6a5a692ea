//! What the watched cycles say of the other buffer sizes (docs/methods.md "Watch", "Other
//! sizes"): the xruns the same graph would have had at ½×, 2× and 4× the period, from each
//! recorded cycle's elapsed time (its start to the graph's last finish) and the graph's busy
//! time in it.
//!
//! The model: a cycle's busy time is work for its frames, so at k× the period a cycle's work
//! is the busy time of the k recorded cycles it spans (½×: half of one); the rest of the
//! elapsed time is *stall* (wake-up delays, the hops between clients, a host that held the
//! CPU), which does not scale: it is a span of time in which the graph could not run. A new
//! cycle starts with the stall of the recorded cycle it starts with (or what is left of an
//! earlier one), then works; a later recorded cycle's stall inside it delays it only if the
//! graph is still working when that stall begins. It glitches when that passes its period;
//! consecutive glitched cycles are one xrun, as the watch counts them. At k× the new cycles
//! can start at any of k recorded cycles: each alignment is counted and their mean reported.
//! The watched size itself is modelled too, so the reader can see that the model gives back
//! what was measured.
//!
//! Memory is fixed however long the watch: a ring of the last [`RING`] cycles and a few
//! counters per size. Cycles are judged [`DELAY`] cycles after they arrive, so that an xrun
//! whose late node's finish comes later (PipeWire) is judged with it (`patch`).

use crate::measure::predict::{poisson_high, poisson_low};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Cycles kept: the judging delay plus the windows and the stalls carried into them.
const RING: usize = 512;
/// Cycles a cycle waits before it is judged: longer than the PipeWire tracker waits for a
/// late node's finish (`track::WAIT_CYCLES`, 200).
const DELAY: u64 = 256;
/// Earlier cycles whose stall may still be going on at a new cycle's start.
const CARRY: u64 = 8;

/// The sizes modelled, as period ratios (numerator, denominator); 1:1 is the size watched.
pub const FACTORS: [(u32, u32); 4] = [(1, 2), (1, 1), (2, 1), (4, 1)];

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Cycle {
    start_ns: u64,
    elapsed_ns: u64,
    busy_ns: u64,
}

impl Cycle {
    /// Its work: busy time, never more than the cycle took (nodes that ran side by side).
    fn work(&self) -> u64 {
        self.busy_ns.min(self.elapsed_ns)
    }

    fn stall(&self) -> u64 {
        self.elapsed_ns - self.work()
    }
}

/// One alignment's count of xruns at one size.
#[derive(Debug, Clone, Copy, Default)]
struct Phase {
    xruns: u64,
    glitched_last: bool,
}

/// Accumulates the other sizes' xruns, cycle by cycle.
pub struct SizesAcc {
    ring: Vec<Cycle>,
    /// Cycles added (the next one's index).
    n: u64,
    /// The next cycle to judge as the start of its windows.
    next: u64,
    /// The first cycle of the current unbroken stretch (windows and stalls do not cross a
    /// gap in the record).
    first: u64,
    period_ns: u64,
    judged: u64,
    phases: [[Phase; 4]; FACTORS.len()],
}

impl Default for SizesAcc {
    fn default() -> Self {
        SizesAcc {
            ring: vec![Cycle::default(); RING],
            n: 0,
            next: 0,
            first: 0,
            period_ns: 0,
            judged: 0,
            phases: [[Phase::default(); 4]; FACTORS.len()],
        }
    }
}

impl SizesAcc {
    /// One recorded cycle: when it started, how long until the graph finished it (past the
    /// period for an xrun), and the graph's busy time in it. A change of period starts
    /// over: the model speaks of the size watched last.
    pub fn add(&mut self, start_ns: u64, elapsed_ns: u64, busy_ns: u64, period_ns: u64) {
        if period_ns == 0 {
            return;
        }
        if period_ns != self.period_ns {
            *self = SizesAcc {
                ring: std::mem::take(&mut self.ring),
                ..SizesAcc::default()
            };
            self.period_ns = period_ns;
        }
        self.ring[(self.n % RING as u64) as usize] = Cycle {
            start_ns,
            elapsed_ns,
            busy_ns,
        };
        self.n += 1;
        while self.n - self.next > DELAY {
            self.judge(self.next);
            self.next += 1;
        }
    }

    /// A cycle added while its late node was still running, now that it finished: its
    /// elapsed time reaches `finish_ns` and `busy_ns` more was worked. Too old (judged
    /// already) or unknown: nothing changes.
    pub fn patch(&mut self, start_ns: u64, finish_ns: u64, busy_ns: u64) {
        for i in (self.next..self.n).rev() {
            let c = &mut self.ring[(i % RING as u64) as usize];
            if c.start_ns == start_ns {
                c.elapsed_ns = c.elapsed_ns.max(finish_ns.saturating_sub(start_ns));
                c.busy_ns = c.busy_ns.saturating_add(busy_ns);
                return;
            }
        }
    }

    /// The record breaks here (a stretch of cycles not kept, a server gone): judge what is
    /// pending, and let nothing cross the break.
    pub fn gap(&mut self) {
        while self.next < self.n {
            self.judge(self.next);
            self.next += 1;
        }
        self.first = self.n;
        for p in self.phases.iter_mut().flatten() {
            p.glitched_last = false;
        }
    }

    fn at(&self, i: u64) -> Cycle {
        self.ring[(i % RING as u64) as usize]
    }

    /// When a new cycle of `k` recorded periods starting with cycle `i` is due: the
    /// previous one's start plus its period, or cycle `i`'s start if that is earlier. A
    /// long stall pushed the recorded cycles after it later than the new schedule's.
    fn origin(&self, i: u64, k: u64) -> u64 {
        let t = self.at(i).start_ns;
        if i < self.first + k {
            return t;
        }
        t.min(self.at(i - k).start_ns + k * self.period_ns)
    }

    /// What is left at `origin` of the stalls of the cycles before `i`.
    fn carried(&self, i: u64, origin: u64) -> u64 {
        (i.saturating_sub(CARRY).max(self.first)..i)
            .map(|j| {
                let c = self.at(j);
                (c.start_ns + c.stall()).saturating_sub(origin)
            })
            .max()
            .unwrap_or(0)
    }

    /// The stall a new cycle starting with cycle `i` begins with, from `origin`.
    fn first_stall(&self, i: u64, origin: u64) -> u64 {
        let c = self.at(i);
        let own = (c.start_ns + c.stall()).saturating_sub(origin);
        self.carried(i, origin).max(own)
    }

    /// Cycle `i` as the first of a new cycle at each size.
    fn judge(&mut self, i: u64) {
        self.judged += 1;
        let p = self.period_ns;
        let c = self.at(i);
        for (f, &(num, den)) in FACTORS.iter().enumerate() {
            if den > 1 {
                // The recorded cycle split in `den`: its work shared out, its stall at the
                // start of the first part and whatever of it is left at each next one's.
                let stall = self.first_stall(i, self.origin(i, 1));
                let (budget, work) = (p / den as u64, c.work() / den as u64);
                for part in 0..den as u64 {
                    let left = stall.saturating_sub(part * budget);
                    count(&mut self.phases[f][0], left + work > budget);
                }
                continue;
            }
            let k = num as u64;
            if i + k > self.n {
                continue; // the record ends inside this window
            }
            let o = self.origin(i, k);
            let work: u64 = (i..i + k).map(|j| self.at(j).work()).sum();
            let mut finish = self.first_stall(i, o) + work;
            for j in i + 1..i + k {
                let d = self.at(j);
                if d.start_ns.saturating_sub(o) < finish {
                    finish += d.stall();
                }
            }
            count(&mut self.phases[f][(i % k) as usize], finish > k * p);
        }
    }

    /// The estimates so far, pending cycles judged (`gap` first at the end of a watch).
    pub fn result(&self, frames: u32, rate: u32) -> Option<OtherSizes> {
        if self.judged == 0 || self.period_ns == 0 {
            return None;
        }
        let sizes = FACTORS
            .iter()
            .zip(&self.phases)
            .map(|(&(num, den), ph)| {
                let k = (num / den).max(1) as usize;
                let total: u64 = ph.iter().take(k).map(|p| p.xruns).sum();
                let xruns = total as f64 / k as f64;
                SizeEstimate {
                    frames: frames.saturating_mul(num) / den,
                    xruns,
                    low: poisson_low(xruns, 0.05),
                    high: poisson_high(xruns, 0.05),
                    watched: num == den,
                    rough: den > 1,
                }
            })
            .collect();
        Some(OtherSizes {
            frames,
            rate,
            period_ns: self.period_ns,
            cycles: self.judged,
            span_ns: self.judged.saturating_mul(self.period_ns),
            sampled: false,
            sizes,
        })
    }
}

fn count(p: &mut Phase, glitch: bool) {
    if glitch && !p.glitched_last {
        p.xruns += 1;
    }
    p.glitched_last = glitch;
}

/// The xruns the watched graph would have had at other buffer sizes.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct OtherSizes {
    /// The size watched (the last one, when it changed), frames, and its rate.
    pub frames: u32,
    pub rate: u32,
    pub period_ns: u64,
    /// Recorded cycles the model read, and their time at the size watched, ns.
    pub cycles: u64,
    pub span_ns: u64,
    /// The cycles are a sample (JACK `--forensics`: those the flight recorder kept, around
    /// every xrun and a second now and then): the counts at larger sizes, whose glitches
    /// come where the size watched had xruns, are whole; the smaller size's is a sample's.
    #[serde(default)]
    pub sampled: bool,
    /// One row per size, smallest first; the size watched is one of them (the model's own
    /// reading of what was measured).
    pub sizes: Vec<SizeEstimate>,
}

/// The model's xruns at one size over the cycles read.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct SizeEstimate {
    pub frames: u32,
    /// Expected xruns over `span_ns` (the mean over the alignments of the larger period).
    pub xruns: f64,
    /// Its 95 % Poisson interval.
    pub low: f64,
    pub high: f64,
    /// The size watched.
    pub watched: bool,
    /// Rough either way: a smaller size's own costs per cycle and its own wake-ups are not in
    /// the data. It is not a floor: a period's wake-up delays can shrink with it (a thread
    /// idle for less is less often woken from a halted vCPU); measured, the figure read
    /// 0.17–24× of what the smaller size then had (`docs/methods.md`).
    pub rough: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: u64 = 5_333_333; // 256 frames at 48 kHz

    /// `n` cycles of `busy` work each; `stall(i)` adds a stall at cycle i's start (the
    /// cycle's start moves on by its period, or by the stall when that is longer).
    fn trace(n: u64, busy: u64, stall: impl Fn(u64) -> u64) -> OtherSizes {
        let mut a = SizesAcc::default();
        let mut t = 0;
        for i in 0..n {
            let s = stall(i);
            a.add(t, s + busy, busy, P);
            t += P.max(s + busy);
        }
        a.gap();
        a.result(256, 48000).unwrap()
    }

    fn xruns(o: &OtherSizes, frames: u32) -> f64 {
        o.sizes.iter().find(|s| s.frames == frames).unwrap().xruns
    }

    #[test]
    fn work_that_scales_with_the_period_fits_every_size() {
        let o = trace(10_000, P * 6 / 10, |_| 20_000);
        assert_eq!(o.cycles, 10_000);
        for f in [128, 256, 512, 1024] {
            assert_eq!(xruns(&o, f), 0.0, "{f}: {o:?}");
        }
        let sizes: Vec<u32> = o.sizes.iter().map(|s| s.frames).collect();
        assert_eq!(sizes, [128, 256, 512, 1024]);
        assert!(o.sizes[1].watched && o.sizes[0].rough && !o.sizes[2].rough);
    }

    #[test]
    fn a_stall_glitches_the_sizes_whose_period_it_outlasts() {
        // A 3 ms stall every 1000 cycles, 20 % busy: 3 + 0.53 ms passes half a period
        // (2.67 ms) only.
        let o = trace(
            20_000,
            P / 5,
            |i| if i % 1000 == 500 { 3_000_000 } else { 0 },
        );
        assert_eq!(xruns(&o, 128), 20.0, "{o:?}");
        assert_eq!(xruns(&o, 256), 0.0);
        assert_eq!(xruns(&o, 512), 0.0);
        // 7 ms: past the watched period too (one xrun each, its two halves at 128 one
        // too), within 2× whatever the alignment.
        let o = trace(
            20_000,
            P / 5,
            |i| if i % 1000 == 500 { 7_000_000 } else { 0 },
        );
        assert_eq!((xruns(&o, 128), xruns(&o, 256)), (20.0, 20.0), "{o:?}");
        assert_eq!(xruns(&o, 512), 0.0, "{o:?}");
        // 12 ms at 2× (10.7 ms): it glitches the new cycle it starts; one that starts a
        // period after the graph finished leaves 4 ms for 2.1 ms of work: half the
        // alignments. Within 4× (21.3 ms) at any.
        let o = trace(
            20_000,
            P / 5,
            |i| if i % 1000 == 500 { 12_000_000 } else { 0 },
        );
        assert_eq!((xruns(&o, 512), xruns(&o, 1024)), (10.0, 0.0), "{o:?}");
        let at = o.sizes.iter().find(|s| s.frames == 512).unwrap();
        assert!(at.low < 10.0 && at.high > 10.0 && at.low > 4.0, "{at:?}");
        // 20 ms outlasts the next 2× cycle's start whatever the alignment; at 4× only the
        // new cycle it starts.
        let o = trace(
            20_000,
            P / 5,
            |i| if i % 1000 == 500 { 20_000_000 } else { 0 },
        );
        assert_eq!((xruns(&o, 512), xruns(&o, 1024)), (20.0, 5.0), "{o:?}");
    }

    #[test]
    fn a_long_busy_cycle_fits_a_period_that_holds_its_work() {
        // One cycle in 500 works 1.5 periods, the others 30 %: an xrun at the size watched;
        // at 2× its window works 1.5 + 0.3 = 1.8 of 2 periods; at ½× both halves miss.
        let mut a = SizesAcc::default();
        let mut t = 0;
        for i in 0..10_000u64 {
            let busy = if i % 500 == 250 {
                P * 3 / 2
            } else {
                P * 3 / 10
            };
            a.add(t, busy, busy, P);
            t += P;
        }
        a.gap();
        let o = a.result(256, 48000).unwrap();
        assert_eq!(
            (xruns(&o, 128), xruns(&o, 256), xruns(&o, 512)),
            (20.0, 20.0, 0.0),
            "{o:?}"
        );
    }

    #[test]
    fn a_late_finish_patched_in_counts_and_gaps_break_windows() {
        let mut a = SizesAcc::default();
        for i in 0..1000u64 {
            a.add(i * P, P / 10, P / 10, P);
        }
        // Cycle 900 was sampled unfinished; its node finished 2 periods after its start,
        // having worked one: 1.1 periods of work, 0.9 of stall. An unknown start is
        // ignored.
        a.patch(900 * P, 900 * P + 2 * P, P);
        a.patch(900 * P + 1, 900 * P + 9 * P, 9 * P);
        a.gap();
        let o = a.result(256, 48000).unwrap();
        // 2×: 0.9 + 1.1 + 0.1 periods either way; 4×: 2.3 of 4.
        assert_eq!((xruns(&o, 256), xruns(&o, 512)), (1.0, 1.0), "{o:?}");
        assert_eq!(xruns(&o, 1024), 0.0);
        // A period change starts over.
        a.add(0, 1, 1, 2 * P);
        a.gap();
        assert_eq!(a.result(512, 48000).unwrap().cycles, 1);
    }
}
