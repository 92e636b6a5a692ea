//! Folding cycle records into the run's distributions, counters, xrun events, host stalls
//! and track placement.

use super::{Dist, Heaviest, WorkCost, XrunEvent, MAX_XRUN_EVENTS};
use crate::common::cycle::{MAX_THREADS, MAX_TRACKS};
use crate::common::{Cause, CycleRecord};

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
    /// The critical thread's CPU time less the host stall judged in it: its compute. On KVM
    /// the host's time is charged to the running thread, so `crit_cpu` also holds the holds a
    /// latency measurement meets as late wake-ups (docs/methods.md §3 "Predicted xrun rate").
    pub crit_compute: Dist,
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
        let crit_excess = excess.get(r.crit_thread as usize).copied().unwrap_or(0);
        self.crit_compute
            .record(r.crit_cpu_ns.saturating_sub(crit_excess));
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

#[cfg(test)]
mod tests {
    use super::super::HOST_CPU_MIN_CYCLES;
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
        // The critical thread's compute leaves its stall out (the xrun's 1100 µs) and keeps
        // the rest: the 30 µs too small to be a stall, and thread 0's stall (not critical).
        assert_eq!(f.crit_cpu.summary().max, 1_500_000);
        assert_eq!(f.crit_compute.summary().max, 430_000);
        assert_eq!(f.crit_compute.summary().count, 13);
        // Not judged (sim): nothing counted, the compute is the CPU time.
        let mut s = Folded::default();
        s.judge_and_fold(&mut two_threads(0, 400, 1500, 4));
        assert!(s.stalls.is_empty());
        assert_eq!(s.crit_compute.summary().max, 1_500_000);
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
