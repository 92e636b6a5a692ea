//! The per-cycle record and the accounting that turns raw timestamps into the quantities of
//! docs/methods.md. One pure function (`account`) decides deadline, xrun and cause for
//! every driver, so `virtual`, `sim` and `jack` results mean the same. It lives in `common`
//! because drivers produce records, the engine fills them and measurements read them
//! (docs/ARCHITECTURE.md §2).
//!
//! Decomposition of a cycle's response time (all on the driver's timeline, ns):
//!
//! ```text
//! end − t_ideal = backlog + sched_latency + crit_cpu + interference
//!   backlog       = release − t_ideal   (earlier cycles still running; only possible with n ≥ 3)
//!   sched_latency = wake − release      (the scheduler was late: `late-wakeup`)
//!   crit_cpu      = CPU time of the critical thread (the one whose track ended last: `overload`)
//!   interference  = wall − crit_cpu     (preemption, IRQs, hypervisor steal, hand-off: `interference`)
//! ```
//!
//! `wake_latency = wake − t_ideal` is reported exactly as docs/ARCHITECTURE.md defines it; the cause
//! compares `sched_latency` (which equals it whenever there is no backlog) so that a backlog
//! inherited from an earlier overrun is not blamed on the scheduler.
//! Ties go to `overload`, then `late-wakeup`, then `interference`, so the result is exact and
//! reproducible on the sim driver.
//!
//! Backlog after an xrun. The `virtual` and `sim` devices resynchronise after an xrun (the
//! periods in between are skipped), so with n = 2 a cycle never starts with a backlog. A JACK
//! server does not skip a late client: it hands over the next cycle at once, and a client
//! that lost 30 ms to a host stall processes several cycles back to back, each starting long
//! after its `t_ideal`. Those cycles miss their deadlines because the cycle before them did,
//! and by the largest-component rule alone they would be blamed on their own CPU time
//! (`overload`): release = the previous end, so the scheduler is not late, and crit_cpu is the
//! largest of what is left. So a cycle that would have been in time had it been released at
//! its `t_ideal` (`end − backlog ≤ deadline`) inherits the cause of the xrun before it, and is
//! marked `inherited`. A chain of such cycles keeps the first one's cause.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Most tracks a graph may have (issue 4: 1..64).
pub const MAX_TRACKS: usize = 64;
/// Most engine threads (driver thread + workers) whose CPU time a record carries.
pub const MAX_THREADS: usize = 32;
/// Most chain elements of track 0 whose end times a record carries (Cucinotta et al.'s clients).
pub const MAX_CLIENTS: usize = 32;

/// Why a cycle missed its deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Cause {
    LateWakeup,
    Overload,
    Interference,
}

impl Cause {
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::LateWakeup => "late-wakeup",
            Cause::Overload => "overload",
            Cause::Interference => "interference",
        }
    }
}

/// Everything measured about one audio cycle. Plain data (`Copy`, no heap) so it can cross
/// the wait-free ring from a real-time thread.
#[derive(Debug, Clone, Copy)]
pub struct CycleRecord {
    /// Device period index k (skipped periods leave gaps).
    pub cycle: u64,
    pub t_ideal_ns: u64,
    /// max(t_ideal, end of the previous cycle).
    pub release_ns: u64,
    pub wake_ns: u64,
    /// When the last track finished.
    pub end_ns: u64,
    /// t_ideal + (n−1)·P.
    pub deadline_ns: u64,
    /// wake(k) − wake(k−1); 0 on the first cycle.
    pub driver_period_ns: u64,
    /// CPU time of all engine threads in the cycle.
    pub cpu_ns: u64,
    /// CPU time of the critical thread.
    pub crit_cpu_ns: u64,
    /// Periods skipped by the device just before this cycle (after an xrun).
    pub skipped_before: u32,
    pub xrun: bool,
    pub cause: Option<Cause>,
    /// The cause is the previous xrun's: this cycle was late only by its backlog.
    pub inherited: bool,
    pub threads: u8,
    pub tracks: u8,
    /// Index of the critical thread (0 = the driver thread).
    pub crit_thread: u8,
    /// Per engine thread: CPU ns in this cycle, read by the thread itself.
    pub thread_cpu_ns: [u32; MAX_THREADS],
    /// Per track: start and end as ns after `wake`.
    pub track_start_ns: [u32; MAX_TRACKS],
    pub track_end_ns: [u32; MAX_TRACKS],
    /// Per track: the engine thread that ran it (its home is track mod threads; another
    /// thread means it was stolen, docs/methods.md "Track placement").
    pub track_thread: [u8; MAX_TRACKS],
    /// Chain elements that ran in each track (fewer than the chain while a ramp adds them).
    pub active_clients: u8,
    /// Track 0: when each of its first `active_clients` elements (up to MAX_CLIENTS) ended,
    /// ns after `wake` — Cucinotta et al.'s per-client end times of a serial pipeline.
    pub client_end_ns: [u32; MAX_CLIENTS],
}

impl CycleRecord {
    pub const EMPTY: CycleRecord = CycleRecord {
        cycle: 0,
        t_ideal_ns: 0,
        release_ns: 0,
        wake_ns: 0,
        end_ns: 0,
        deadline_ns: 0,
        driver_period_ns: 0,
        cpu_ns: 0,
        crit_cpu_ns: 0,
        skipped_before: 0,
        xrun: false,
        cause: None,
        inherited: false,
        threads: 0,
        tracks: 0,
        crit_thread: 0,
        thread_cpu_ns: [0; MAX_THREADS],
        track_start_ns: [0; MAX_TRACKS],
        track_end_ns: [0; MAX_TRACKS],
        track_thread: [0; MAX_TRACKS],
        active_clients: 0,
        client_end_ns: [0; MAX_CLIENTS],
    };

    pub fn wake_latency_ns(&self) -> u64 {
        self.wake_ns.saturating_sub(self.t_ideal_ns)
    }
    pub fn sched_latency_ns(&self) -> u64 {
        self.wake_ns.saturating_sub(self.release_ns)
    }
    pub fn backlog_ns(&self) -> u64 {
        self.release_ns.saturating_sub(self.t_ideal_ns)
    }
    /// Compute wall time, end − wake.
    pub fn wall_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.wake_ns)
    }
    pub fn interference_ns(&self) -> u64 {
        self.wall_ns().saturating_sub(self.crit_cpu_ns)
    }
    /// Driver end time, end − t_ideal (Cucinotta et al.).
    pub fn end_time_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.t_ideal_ns)
    }
}

/// Decide xrun and cause from the timestamps already in `r`; sets `xrun`, `cause` and
/// `inherited`. For a cycle with no predecessor in view (or none that was an xrun).
pub fn account(r: &mut CycleRecord) {
    account_after(r, None);
}

/// `account` for a cycle processed right after one whose xrun had cause `before` (None: the
/// previous cycle was in time, or there was none). See the module notes on backlog.
pub fn account_after(r: &mut CycleRecord, before: Option<Cause>) {
    r.xrun = r.end_ns > r.deadline_ns;
    let own_end = r.end_ns.saturating_sub(r.backlog_ns());
    let inherit = match before {
        Some(c) if r.xrun && r.backlog_ns() > 0 && own_end <= r.deadline_ns => Some(c),
        _ => None,
    };
    r.inherited = inherit.is_some();
    r.cause = if !r.xrun {
        None
    } else {
        inherit.or(Some(cause_of(
            r.sched_latency_ns(),
            r.crit_cpu_ns,
            r.interference_ns(),
        )))
    };
}

/// The critical thread's work in a cycle, in chain-element runs: the tracks it ran times the
/// elements active per track (at least 1 of each, so a cycle without the counters still
/// weighs one unit). Two cycles with equal work cost the same CPU time unless the host
/// charged the thread for time it did not compute.
pub fn crit_work(r: &CycleRecord) -> u64 {
    tracks_on(r, r.crit_thread).max(1) * (r.active_clients as u64).max(1)
}

/// Tracks engine thread `thread` ran in the cycle.
pub fn tracks_on(r: &CycleRecord, thread: u8) -> u64 {
    let n = (r.tracks as usize).min(MAX_TRACKS);
    r.track_thread[..n].iter().filter(|&&t| t == thread).count() as u64
}

/// CPU time beyond an expectation that is the host's rather than the work's variance: at
/// least a quarter of the expectation and 50 µs. The one threshold of the host-time rule and
/// of the per-core stall count (docs/methods.md "Xrun and cause").
pub fn host_excess(cpu_ns: u64, expected_cpu_ns: u64) -> Option<u64> {
    let excess = cpu_ns.saturating_sub(expected_cpu_ns);
    (excess >= (expected_cpu_ns / 4).max(50_000)).then_some(excess)
}

/// Host time on the CPU clock (docs/methods.md "Xrun and cause"): for an `overload`
/// xrun whose critical thread ran `crit_work(r)` units of work expected to cost
/// `expected_cpu_ns`, the CPU time beyond that expectation when it is the host's, not the
/// plugin's. The excess must be at least a quarter of the expectation (and 50 µs), and with
/// the CPU time split into work (the expectation) and host time (the excess, added to the
/// interference) the largest component must no longer be the work. Then the CPU clock ran
/// while the work did not grow — a vCPU taken away (a KVM or Firecracker guest charges the
/// stolen time to the running thread) or an SMI, not DSP. None: the xrun stays `overload`.
pub fn host_cpu_excess(r: &CycleRecord, expected_cpu_ns: u64) -> Option<u64> {
    if r.cause != Some(Cause::Overload) || r.inherited {
        return None;
    }
    let excess = host_excess(r.crit_cpu_ns, expected_cpu_ns)?;
    let work = r.crit_cpu_ns - excess;
    let split = cause_of(r.sched_latency_ns(), work, r.interference_ns() + excess);
    (split != Cause::Overload).then_some(excess)
}

/// The largest component wins; ties in the order overload, late-wakeup, interference.
pub fn cause_of(sched_latency_ns: u64, crit_cpu_ns: u64, interference_ns: u64) -> Cause {
    if crit_cpu_ns >= sched_latency_ns && crit_cpu_ns >= interference_ns {
        Cause::Overload
    } else if sched_latency_ns >= interference_ns {
        Cause::LateWakeup
    } else {
        Cause::Interference
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(t: u64, wake: u64, end: u64, cpu: u64, deadline: u64) -> CycleRecord {
        CycleRecord {
            t_ideal_ns: t,
            release_ns: t,
            wake_ns: wake,
            end_ns: end,
            crit_cpu_ns: cpu,
            cpu_ns: cpu,
            deadline_ns: deadline,
            ..CycleRecord::EMPTY
        }
    }

    #[test]
    fn deadline_is_strict_and_causes_pick_the_largest_component() {
        let mut r = rec(0, 10, 1000, 990, 1000);
        account(&mut r);
        assert!(!r.xrun, "ending exactly at the deadline is in time");
        let mut r = rec(0, 10, 1001, 991, 1000);
        account(&mut r);
        assert_eq!(r.cause, Some(Cause::Overload));
        let mut r = rec(0, 800, 1100, 100, 1000);
        account(&mut r);
        assert_eq!(r.cause, Some(Cause::LateWakeup));
        let mut r = rec(0, 10, 1100, 100, 1000);
        account(&mut r);
        assert_eq!(r.cause, Some(Cause::Interference));
        assert_eq!(r.interference_ns(), 990);
        assert_eq!(cause_of(5, 5, 5), Cause::Overload);
        assert_eq!(cause_of(5, 4, 5), Cause::LateWakeup);
    }

    /// A JACK client catching up after a stalled cycle: each cycle starts at the previous
    /// end, long after its t_ideal, and does its ordinary work.
    #[test]
    fn cycles_late_only_by_their_backlog_inherit_the_cause_before_them() {
        // P = 1000, n = 2: deadline t_ideal + 1000. 600 of CPU per cycle.
        let mut r = rec(1000, 2300, 2900, 600, 2000);
        r.release_ns = 2250; // the stalled cycle ended 1250 after this t_ideal
        account_after(&mut r, Some(Cause::Interference));
        assert!(r.xrun);
        assert_eq!(r.backlog_ns(), 1250);
        assert_eq!(r.cause, Some(Cause::Interference), "not overload");
        assert!(r.inherited);
        // The same cycle after an in-time predecessor (no xrun to inherit): the rule of the
        // largest component stands.
        let mut r2 = r;
        account_after(&mut r2, None);
        assert_eq!((r2.cause, r2.inherited), (Some(Cause::Overload), false));
        // Its own work would not have fit either: no inheritance, its own cause.
        let mut r3 = rec(1000, 1300, 2400, 1050, 2000);
        r3.release_ns = 1250;
        account_after(&mut r3, Some(Cause::Interference));
        assert_eq!((r3.cause, r3.inherited), (Some(Cause::Overload), false));
        // In time despite a backlog: no xrun, nothing inherited.
        let mut r4 = rec(1000, 1100, 1900, 700, 2000);
        r4.release_ns = 1080;
        account_after(&mut r4, Some(Cause::LateWakeup));
        assert_eq!((r4.xrun, r4.cause, r4.inherited), (false, None, false));
    }

    /// Synthetic cycles of a two-track engine (P = 1 ms, n = 2), critical thread 1 running
    /// track 1 with 4 elements expected to cost 400 µs.
    #[test]
    fn cpu_time_that_jumped_without_more_work_is_host_time_not_overload() {
        let us = |v: u64| v * 1000;
        let two_tracks = |end: u64, cpu: u64, active: u8| {
            let mut r = rec(0, us(10), us(end), us(cpu), us(1000));
            r.tracks = 2;
            r.crit_thread = 1;
            r.track_thread[1] = 1;
            r.active_clients = active;
            account(&mut r);
            r
        };
        let r = two_tracks(1300, 1250, 4);
        assert_eq!(
            r.cause,
            Some(Cause::Overload),
            "the raw rule blames the CPU time"
        );
        assert_eq!(crit_work(&r), 4);
        // The usual work (400 µs) charged 1250 µs: 850 µs of host time; without it the cycle
        // ends at 450 µs, in time.
        assert_eq!(host_cpu_excess(&r, us(400)), Some(us(850)));
        // The work doubled (both tracks ran on thread 1) at the usual 100 µs per element
        // run: 800 µs of work outweigh the 450 µs of excess (+ 50 of interference): overload.
        let mut d = r;
        d.track_thread[0] = 1;
        assert_eq!(crit_work(&d), 8);
        assert_eq!(host_cpu_excess(&d, 8 * us(100)), None);
        // The host also kept the thread off its CPU: 400 µs of work, 450 µs of excess and
        // 540 µs of interference; late without the excess too, but the host's share is the
        // largest.
        let mut h2 = rec(0, us(10), us(1400), us(850), us(1000));
        h2.active_clients = 4;
        account(&mut h2);
        assert_eq!(
            h2.cause,
            Some(Cause::Overload),
            "raw: 850 of CPU against 540 off it"
        );
        assert_eq!(host_cpu_excess(&h2, us(400)), Some(us(450)));
        // The work doubled and the CPU time with it (156 µs per element run before): the
        // plugin's own time, overload.
        let w = two_tracks(1300, 1250, 8);
        assert_eq!(crit_work(&w), 8);
        assert_eq!(host_cpu_excess(&w, 8 * 156_250), None);
        // A small excess is the plugin's variance, not the host: overload stays.
        let s = two_tracks(1010, 1000, 4);
        assert_eq!(host_cpu_excess(&s, us(950)), None);
        // Without the excess still late: the work itself did not fit.
        let l = two_tracks(1900, 1880, 4);
        assert_eq!(host_cpu_excess(&l, us(1100)), None);
        // Only overload xruns are judged.
        let mut i = rec(0, us(10), us(1100), us(100), us(1000));
        account(&mut i);
        assert_eq!(i.cause, Some(Cause::Interference));
        assert_eq!(host_cpu_excess(&i, us(10)), None);
    }

    #[test]
    fn backlog_is_not_blamed_on_the_scheduler() {
        let mut r = rec(0, 600, 1100, 450, 1000);
        r.release_ns = 590;
        account(&mut r);
        assert_eq!(r.wake_latency_ns(), 600);
        assert_eq!(r.sched_latency_ns(), 10);
        assert_eq!(r.backlog_ns(), 590);
        assert_eq!(r.cause, Some(Cause::Overload));
    }
}
