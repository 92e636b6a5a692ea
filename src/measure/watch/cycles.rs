//! What a watch keeps of every graph cycle, whatever the server: the near-miss histogram
//! (each cycle's headroom: its deadline minus the time the graph finished), each client's
//! or node's busy-time histogram, and the timeline of the worst xrun's cycle, one lane per
//! client or node. PipeWire's profiler gives all of it directly; on JACK it needs the
//! trace of the clients' threads (docs/methods.md "Watch").

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One cycle of a thread: woken, first on CPU, asleep again (from the trace of its
/// scheduler events, `clients::runs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    pub waking_ns: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    pub busy_ns: u64,
    /// Still running when the trace ended.
    pub open: bool,
}

impl Run {
    pub fn wake_delay_ns(&self) -> u64 {
        self.start_ns.saturating_sub(self.waking_ns)
    }

    /// First on CPU to asleep again: its busy time plus any preemption.
    pub fn run_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

/// Bins of the headroom and busy histograms: 5 % of the period each.
pub const BINS: usize = 20;

/// The near-miss histogram.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Headroom {
    /// Cycles measured.
    pub cycles: u64,
    /// Cycles the graph had not finished by their deadline (the xruns).
    pub missed: u64,
    /// Finished cycles by headroom in 5 % steps of the period: `bins[0]` finished with
    /// less than 5 % of the period to spare, `bins[19]` with 95 % or more.
    pub bins: Vec<u64>,
    /// Over the finished cycles: the least headroom, and its 1st and 50th percentiles, ns.
    pub min_ns: u64,
    pub p1_ns: u64,
    pub p50_ns: u64,
    /// The period the bins are relative to, ns (the last one seen).
    pub period_ns: u64,
    /// The cycles the watch ran, when `cycles` is a sample of them (JACK: the cycles the
    /// flight recorder kept and decoded); 0 when every cycle was measured (PipeWire).
    #[serde(default)]
    pub of_cycles: u64,
}

impl Headroom {
    /// Cycles that finished with less than `pct` % of the period to spare, and the xruns.
    pub fn within_pct(&self, pct: u32) -> u64 {
        let k = (pct as usize / (100 / BINS)).min(BINS);
        // Saturating: a result read from a file may hold any counts.
        self.bins
            .iter()
            .take(k)
            .fold(self.missed, |a, &b| a.saturating_add(b))
    }
}

/// Two watches' histograms as one (a `--follow` reconnect): counts add, the least headroom
/// is the least of both, the percentiles are the larger sample's.
pub fn merge(a: Headroom, b: Headroom) -> Headroom {
    let (big, small) = if a.cycles >= b.cycles { (a, b) } else { (b, a) };
    let mut bins = big.bins.clone();
    bins.resize(BINS, 0);
    for (x, y) in bins.iter_mut().zip(&small.bins) {
        *x += y;
    }
    let min = |x: u64, y: u64| match (x, y) {
        (0, y) => y,
        (x, 0) => x,
        (x, y) => x.min(y),
    };
    Headroom {
        cycles: big.cycles + small.cycles,
        of_cycles: big.of_cycles.saturating_add(small.of_cycles),
        missed: big.missed + small.missed,
        bins,
        min_ns: min(big.min_ns, small.min_ns),
        ..big
    }
}

/// Accumulates [`Headroom`]: a fixed histogram, no allocation per cycle.
pub struct HeadroomAcc {
    h: hdrhistogram::Histogram<u64>,
    bins: [u64; BINS],
    missed: u64,
    period_ns: u64,
}

impl Default for HeadroomAcc {
    fn default() -> Self {
        HeadroomAcc {
            h: hdrhistogram::Histogram::new_with_bounds(1, 60_000_000_000, 2)
                .expect("static bounds"),
            bins: [0; BINS],
            missed: 0,
            period_ns: 0,
        }
    }
}

impl HeadroomAcc {
    /// One cycle: `headroom_ns` to spare (None: it missed its deadline).
    pub fn add(&mut self, headroom_ns: Option<u64>, period_ns: u64) {
        self.period_ns = period_ns;
        match headroom_ns {
            None => self.missed += 1,
            Some(h) => {
                let _ = self.h.record(h.max(1));
                let b = (h as u128 * BINS as u128 / period_ns.max(1) as u128) as usize;
                self.bins[b.min(BINS - 1)] += 1;
            }
        }
    }

    pub fn result(&self) -> Headroom {
        let q = |p: f64| {
            if self.h.is_empty() {
                0
            } else {
                self.h.value_at_quantile(p)
            }
        };
        Headroom {
            cycles: self.h.len() + self.missed,
            missed: self.missed,
            bins: self.bins.to_vec(),
            min_ns: if self.h.is_empty() { 0 } else { self.h.min() },
            p1_ns: q(0.01),
            p50_ns: q(0.5),
            period_ns: self.period_ns,
            of_cycles: 0,
        }
    }
}

/// JACK's cycles from the trace of its threads' runs (`watch --forensics`). A cycle starts
/// when the server's cycle thread (`server`) is woken — the driver's period wake-up — and
/// ends where the next one starts: the runs woken in between are its own. Bounding it by the
/// next wake-up rather than by a period after its own matters because the driver keeps its
/// wake-ups on the sample clock's grid, not a period after the last one: after a late
/// wake-up the next comes early, and the clients it wakes would otherwise be taken for the
/// late cycle's. Its deadline is when the server checks the graph again, the next cycle's
/// first time on CPU (jackd2 decides "not finished" there, so a server held off the CPU
/// gives the graph that time too); without a next cycle, one period after its wake-up.
/// The graph finished when the last run that overlaps the cycle and was woken in it or
/// before ended, the server's own run and each client's (`clients`: the threads the graph
/// wakes every cycle). A run still going from an earlier cycle counts: the graph is not done
/// while it runs, so that cycle missed too. A server run woken less than half a period after
/// its cycle's start (its thread slept inside the cycle, on a lock or a request) is part of
/// that cycle, not a new one. Only cycles with their whole period inside one kept range of
/// the trace (`coverage`, empty = all of it) and no run cut by the trace's end are counted:
/// a sample, whose size the result says (`of_cycles` is set by the caller). Each counted
/// cycle goes to `sizes` too, its busy time that of the runs woken in it, its start moved
/// to a period before its deadline so that the model's reading of the size watched gives
/// back the misses counted here; a cycle not counted breaks its record there.
pub fn jack_headroom(
    server: &[Run],
    clients: &[&[Run]],
    coverage: &[(u64, u64)],
    period_ns: u64,
    sizes: &mut super::sizes::SizesAcc,
) -> Headroom {
    let mut acc = HeadroomAcc::default();
    if period_ns == 0 {
        return acc.result();
    }
    let inside =
        |a: u64, b: u64| coverage.is_empty() || coverage.iter().any(|&(x, y)| a >= x && b <= y);
    let ticks = server_cycles(server, period_ns);
    for (k, &(first, last)) in ticks.iter().enumerate() {
        let s = &server[first];
        let start = s.waking_ns;
        // The next cycle, when it follows within two periods (else the trace or the server
        // broke off: the period stands in).
        let next = ticks
            .get(k + 1)
            .map(|&(n, _)| server[n])
            .filter(|n| n.waking_ns < start + 2 * period_ns);
        let (end, deadline) = match next {
            Some(n) => (n.waking_ns, n.start_ns.max(n.waking_ns)),
            None => (start + period_ns, start + period_ns),
        };
        if !inside(start, start + 2 * period_ns) {
            sizes.gap();
            continue;
        }
        let own_server = &server[first..=last];
        let mut finish = own_server
            .iter()
            .map(|r| r.end_ns)
            .max()
            .unwrap_or(s.end_ns);
        // The cycle's own runs (not one still going from before: that work is an earlier
        // cycle's) make its record for `sizes`.
        let mut busy = own_server.iter().map(|r| r.busy_ns).sum::<u64>();
        let mut own = finish;
        let mut cut = false;
        for rs in clients {
            // Runs are in end order: those ending after the cycle's start are at the back.
            for r in rs.iter().rev().take_while(|r| r.end_ns > start) {
                if r.waking_ns < end {
                    finish = finish.max(r.end_ns);
                    cut |= r.open;
                    if r.waking_ns >= start {
                        busy = busy.saturating_add(r.busy_ns);
                        own = own.max(r.end_ns);
                    }
                }
            }
        }
        if cut {
            sizes.gap();
            continue;
        }
        acc.add(deadline.checked_sub(finish), period_ns);
        let from = deadline.saturating_sub(period_ns);
        sizes.add(from, own.saturating_sub(from), busy, period_ns);
    }
    acc.result()
}

/// The server thread's runs grouped into cycles, as index ranges into `server` (closed runs
/// only): a run woken at least half a period after its cycle's first starts a new one.
fn server_cycles(server: &[Run], period_ns: u64) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    for (i, r) in server.iter().enumerate() {
        if r.open {
            break;
        }
        match out.last_mut() {
            Some((f, l)) if r.waking_ns < server[*f].waking_ns + period_ns / 2 => *l = i,
            _ => out.push((i, i)),
        }
    }
    out
}

/// The worst xrun's cycle on JACK, from the threads' runs: it starts at the server cycle
/// thread's last wake-up at or before the late run's (`server`: its runs; without one, at the
/// late run's wake-up), and each lane is a graph thread's run in that cycle — the first
/// woken within its period, else one still going from before it. `lanes` are the graph's
/// threads by name with their runs; `late` is the index of the late one and its run.
pub fn jack_timeline(
    xrun: u64,
    server: Option<&[Run]>,
    lanes: &[(&str, &[Run])],
    late: (usize, Run),
    period_ns: u64,
) -> CycleTimeline {
    let start = server
        .and_then(|s| {
            s.iter()
                .map(|r| r.waking_ns)
                .filter(|&w| w <= late.1.waking_ns)
                .max()
        })
        .unwrap_or(late.1.waking_ns);
    let end = start + period_ns;
    let rel = |t: u64| t as i64 - start as i64;
    let lanes = lanes
        .iter()
        .enumerate()
        .filter_map(|(i, (name, rs))| {
            let r = if i == late.0 {
                late.1
            } else {
                *rs.iter()
                    .find(|r| r.waking_ns >= start && r.waking_ns < end)
                    .or_else(|| rs.iter().find(|r| r.start_ns < start && r.end_ns > start))?
            };
            Some(Lane {
                name: name.to_string(),
                signal_ns: rel(r.waking_ns),
                awake_ns: rel(r.start_ns),
                finish_ns: (!r.open).then(|| rel(r.end_ns)),
                late: i == late.0,
            })
        })
        .collect();
    CycleTimeline {
        xrun,
        period_ns,
        lanes,
    }
}

/// A thread's busy time per cycle as a [`BusyHistogram`].
pub fn busy_histogram(name: &str, runs: &[Run], period_ns: u64) -> BusyHistogram {
    let mut bins = vec![0u64; BINS];
    for r in runs.iter().filter(|r| !r.open) {
        let b = (r.busy_ns as u128 * BINS as u128 / period_ns.max(1) as u128) as usize;
        bins[b.min(BINS - 1)] += 1;
    }
    BusyHistogram {
        name: name.to_string(),
        bins,
        period_ns,
    }
}

/// A client's or node's busy time per cycle, in 5 % steps of the period (the last bin
/// holds everything at or past 95 %).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct BusyHistogram {
    pub name: String,
    pub bins: Vec<u64>,
    pub period_ns: u64,
}

/// One client's or node's times in the worst xrun's cycle, ns from the cycle's start.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Lane {
    pub name: String,
    pub signal_ns: i64,
    pub awake_ns: i64,
    /// None: it had not finished when it was last seen.
    pub finish_ns: Option<i64>,
    /// The one named late.
    pub late: bool,
}

/// The worst xrun's cycle.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct CycleTimeline {
    /// The xrun's index in the watch.
    pub xrun: u64,
    pub period_ns: u64,
    pub lanes: Vec<Lane>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(waking: u64, start: u64, end: u64) -> Run {
        Run {
            waking_ns: waking,
            start_ns: start,
            end_ns: end,
            busy_ns: end - start,
            open: false,
        }
    }

    #[test]
    fn the_worst_jack_cycle_has_a_lane_per_graph_thread_from_the_server_wake_up() {
        let p = 1_000_000;
        let server: Vec<Run> = (0..3)
            .map(|k| run(k * p, k * p + 10, k * p + 50_000))
            .collect();
        let quick: Vec<Run> = (0..3)
            .map(|k| run(k * p + 60_000, k * p + 70_000, k * p + 90_000))
            .collect();
        // The slow client of cycle 1 runs 2.5 periods; a thread with no run in that cycle
        // gets no lane.
        let slow = run(p + 60_000, p + 80_000, p + 2_580_000);
        let idle: Vec<Run> = vec![run(10 * p, 10 * p, 10 * p + 5)];
        let t = jack_timeline(
            7,
            Some(&server),
            &[
                ("server:jackd", &server),
                ("quick", &quick),
                ("slow", &[slow]),
                ("elsewhere", &idle),
            ],
            (2, slow),
            p,
        );
        assert_eq!((t.xrun, t.period_ns), (7, p));
        let lane = |n: &str| t.lanes.iter().find(|l| l.name == n).cloned();
        let s = lane("server:jackd").unwrap();
        assert_eq!(
            (s.signal_ns, s.awake_ns, s.finish_ns),
            (0, 10, Some(50_000))
        );
        let q = lane("quick").unwrap();
        assert_eq!(
            (q.signal_ns, q.finish_ns, q.late),
            (60_000, Some(90_000), false)
        );
        let l = lane("slow").unwrap();
        assert_eq!(
            (l.awake_ns, l.finish_ns, l.late),
            (80_000, Some(2_580_000), true)
        );
        assert!(lane("elsewhere").is_none());
    }

    #[test]
    fn jack_cycles_finish_with_their_last_run_and_a_long_one_misses() {
        let p = 1_000_000;
        // Four cycles from 0: the server runs 50 µs; the client ends at 300 µs, then 200 µs,
        // then runs 2.5 periods from cycle 2 (missing it and cycle 3), and the fourth
        // cycle's window reaches past the trace (not counted).
        let server: Vec<Run> = (0..4).map(|k| run(k * p, k * p, k * p + 50_000)).collect();
        let client = vec![
            run(60_000, 60_000, 300_000),
            run(p + 60_000, p + 60_000, p + 200_000),
            run(2 * p + 60_000, 2 * p + 60_000, 4 * p + 500_000),
        ];
        let mut sizes = super::super::sizes::SizesAcc::default();
        let h = jack_headroom(&server, &[&client], &[(0, 4 * p + 900_000)], p, &mut sizes);
        assert_eq!((h.cycles, h.missed), (3, 1), "{h:?}");
        assert!(h.min_ns.abs_diff(700_000) < 10_000, "{h:?}");
        assert_eq!(h.bins[15] + h.bins[16], 1);
        assert_eq!(h.bins[13] + h.bins[14], 1);
        // Read whole: the fourth cycle is there, and the client still ran into it.
        let h = jack_headroom(&server, &[&client], &[], p, &mut sizes);
        assert_eq!((h.cycles, h.missed), (4, 2), "{h:?}");
        let b = busy_histogram("c", &client, p);
        assert_eq!((b.bins[4], b.bins[2], b.bins[19]), (1, 1, 1));
    }

    #[test]
    fn a_jack_cycle_ends_at_the_next_server_wake_up_not_a_period_after_its_own() {
        // Recorded on this machine (jackd2 1.9.21 -d dummy, 256/48000, the client
        // `xrunlab run --chain 'burn(70%)'`), ns from the first run: the client ran 9.8 ms in
        // the third cycle and jackd logged one "client = xrunlab was not finished" for it.
        // The server woke 97 µs late for the fifth cycle, so the driver, keeping to its
        // grid, woke 5.25 ms later for the sixth: that cycle's client run (woken 5.28 ms
        // after the fifth's start, within a period of it) is the sixth's, and ends in time.
        let p = 5_333_333;
        let r = |w, s, e, b| Run {
            waking_ns: w,
            start_ns: s,
            end_ns: e,
            busy_ns: b,
            open: false,
        };
        let server = [
            r(339_835, 352_685, 387_477, 34_792),
            r(5_673_488, 5_685_336, 5_719_307, 33_971),
            r(11_000_000, 11_011_087, 11_044_998, 33_911),
            r(16_342_126, 16_355_195, 16_419_412, 64_217),
            r(21_764_672, 21_801_958, 21_840_786, 38_828),
            r(27_012_185, 27_026_046, 27_059_586, 33_540),
            r(32_342_934, 32_356_845, 32_388_362, 31_517),
            r(37_663_988, 37_675_765, 37_711_479, 35_714),
        ];
        let client = [
            r(370_812, 395_824, 4_241_461, 3_845_637),
            r(5_703_273, 5_728_555, 9_685_810, 3_957_255),
            r(11_029_094, 11_052_804, 20_820_247, 9_767_443),
            r(21_823_270, 21_848_943, 25_749_212, 3_900_269),
            r(27_041_599, 27_068_394, 30_987_502, 3_919_108),
            r(32_372_268, 32_397_390, 36_233_663, 3_836_273),
            r(37_694_934, 37_719_926, 41_576_009, 3_856_083),
        ];
        let mut sizes = super::super::sizes::SizesAcc::default();
        let h = jack_headroom(&server, &[&client], &[], p, &mut sizes);
        // The long run misses its cycle's deadline (the next server run, at 16.36 ms) and
        // finishes before the one after (21.80 ms): one cycle missed, as jackd said.
        assert_eq!((h.cycles, h.missed), (8, 1), "{h:?}");
        sizes.gap();
        let o = sizes.result(256, 48000).unwrap();
        let at = |f: u32| o.sizes.iter().find(|s| s.frames == f).unwrap().xruns;
        assert_eq!(at(256), 1.0, "{o:?}");
        // A server run woken inside its cycle (its thread slept on a lock) is no new cycle.
        let mut split = server.to_vec();
        split.insert(3, r(12_000_000, 12_000_100, 12_000_200, 100));
        let h = jack_headroom(&split, &[&client], &[], p, &mut sizes);
        assert_eq!((h.cycles, h.missed), (8, 1), "{h:?}");
    }

    #[test]
    fn headroom_bins_count_cycles_by_their_share_of_the_period() {
        let mut a = HeadroomAcc::default();
        let p = 1_000_000;
        for h in [10_000, 40_000, 60_000, 500_000, 999_999, 2_000_000] {
            a.add(Some(h), p);
        }
        a.add(None, p);
        let r = a.result();
        assert_eq!((r.cycles, r.missed), (7, 1));
        assert_eq!(r.bins[0], 2);
        assert_eq!(r.bins[1], 1);
        assert_eq!(r.bins[10], 1);
        assert_eq!(r.bins[19], 2);
        assert_eq!(r.within_pct(5), 3);
        assert_eq!(r.within_pct(10), 4);
        assert!(r.min_ns.abs_diff(10_000) < 200);
    }
}
