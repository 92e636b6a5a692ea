//! The competing periodic task (rt-app-like, Cucinotta et al.): every `period` it wakes at an
//! absolute release time, burns `exec` of its own CPU time, and records when it woke and
//! when it finished. Presets `video` (40 ms / 5 ms) and `voip` (10 ms / 1.7 ms).
//!
//! The job loop follows docs/ARCHITECTURE.md §5: the trace and histograms are allocated before the
//! first job, recording a job never allocates, and the loop does no I/O.

use crate::common::stats::{new_ns_histogram, record_clamped, Histogram, Summary};
use crate::error::{Error, Result};
use crate::rt::clock::{monotonic_ns, sleep_until_ns, thread_cpu_ns};
use crate::rt::thread::{spawn_rt, RtThread, ThreadSpec};
use crate::rt::Policy;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Cucinotta et al.'s reservations were over-provisioned by 5 % with respect to the execution time.
pub const DEADLINE_BUDGET_PERCENT: u64 = 105;
/// Priority of `fifo`/`rr` when none is given: Cucinotta et al.'s rt-app in its configuration (2).
pub const DEFAULT_PRIORITY: u32 = 15;
/// Jobs kept in the per-job trace; statistics keep counting beyond it.
pub const DEFAULT_TRACE_JOBS: usize = 100_000;

/// What the competing task does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PeriodicSpec {
    /// `video`, `voip`, or `custom`.
    pub name: String,
    pub period_ns: u64,
    /// CPU time burnt per job.
    pub exec_ns: u64,
    /// Relative deadline of each job (the period, as in rt-app's default).
    pub deadline_ns: u64,
    pub policy: Policy,
    /// Pin to these CPUs; empty = not pinned.
    #[serde(default)]
    pub cpus: Vec<usize>,
    #[serde(default = "default_trace_jobs")]
    pub trace_jobs: usize,
}

fn default_trace_jobs() -> usize {
    DEFAULT_TRACE_JOBS
}

impl PeriodicSpec {
    pub fn new(name: &str, period_ns: u64, exec_ns: u64, policy: Policy) -> Result<Self> {
        let s = PeriodicSpec {
            name: name.into(),
            period_ns,
            exec_ns,
            deadline_ns: period_ns,
            policy,
            cpus: Vec::new(),
            trace_jobs: DEFAULT_TRACE_JOBS,
        };
        s.validate()?;
        Ok(s)
    }

    /// Cucinotta et al.'s video-player-like load: 40 ms period, 5 ms execution (25 frames/s).
    pub fn video(policy: Policy) -> Result<Self> {
        Self::new("video", 40_000_000, 5_000_000, policy)
    }

    /// Cucinotta et al.'s VoIP-like load: 10 ms period, 1.7 ms execution.
    pub fn voip(policy: Policy) -> Result<Self> {
        Self::new("voip", 10_000_000, 1_700_000, policy)
    }

    pub fn validate(&self) -> Result<()> {
        if self.period_ns < 100_000 || self.period_ns > 4_000_000_000 {
            return Err(Error::usage(format!(
                "competing task period {} µs is outside 100 µs .. 4 s",
                self.period_ns / 1000
            )));
        }
        if self.exec_ns == 0 || self.exec_ns >= self.period_ns {
            return Err(Error::usage(format!(
                "competing task execution time {} µs must be > 0 and below its period {} µs",
                self.exec_ns / 1000,
                self.period_ns / 1000
            )));
        }
        if self.deadline_ns == 0 || self.deadline_ns > self.period_ns {
            return Err(Error::usage(
                "competing task deadline must be in 0 < deadline <= period",
            ));
        }
        self.policy.validate()
    }
}

/// A DEADLINE reservation for a task of this period and execution time.
pub fn reservation(period_ns: u64, exec_ns: u64, reclaim: bool) -> Policy {
    Policy::Deadline {
        runtime_ns: (exec_ns * DEADLINE_BUDGET_PERCENT / 100).min(period_ns),
        deadline_ns: period_ns,
        period_ns,
        reclaim,
    }
}

/// Parses `PRESET|PERIOD/EXEC[:POLICY[:PRIO]]`, e.g. `voip`, `video:fifo:15`,
/// `10ms/1.7ms:fifo:15`, `40ms/5ms:deadline`, `10ms/1.7ms:deadline-reclaim`.
/// POLICY is `other` (default), `fifo`, `rr`, `deadline` or `deadline-reclaim`; a deadline
/// reservation gets runtime = 105 % of EXEC and period = PERIOD, as in Cucinotta et al.
impl FromStr for PeriodicSpec {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let bad = |why: &str| {
            Error::usage(format!(
                "bad --compete '{s}': {why}; expected video, voip or PERIOD/EXEC[:POLICY[:PRIO]], e.g. 10ms/1.7ms:fifo:15"
            ))
        };
        let mut parts = s.trim().split(':');
        let head = parts.next().unwrap_or("");
        let (name, period_ns, exec_ns) = match head.to_ascii_lowercase().as_str() {
            "video" => ("video", 40_000_000, 5_000_000),
            "voip" => ("voip", 10_000_000, 1_700_000),
            h => {
                let (p, e) = h.split_once('/').ok_or_else(|| bad("no PERIOD/EXEC"))?;
                (
                    "custom",
                    crate::units::parse_duration_ns(p)?,
                    crate::units::parse_duration_ns(e)?,
                )
            }
        };
        let pol = parts.next().map(|p| p.to_ascii_lowercase());
        let prio = parts.next();
        if parts.next().is_some() {
            return Err(bad("too many ':' fields"));
        }
        let priority = || -> Result<u32> {
            match prio {
                None => Ok(DEFAULT_PRIORITY),
                Some(p) => p.parse().map_err(|_| bad("priority must be a number")),
            }
        };
        let policy = match pol.as_deref() {
            None | Some("other") | Some("cfs") => {
                if prio.is_some() {
                    return Err(bad("other takes no priority"));
                }
                Policy::Other { nice: 0 }
            }
            Some("fifo") => Policy::Fifo {
                priority: priority()?,
            },
            Some("rr") => Policy::Rr {
                priority: priority()?,
            },
            Some(d @ ("deadline" | "dl" | "deadline-reclaim" | "reclaim")) => {
                if prio.is_some() {
                    return Err(bad("a deadline reservation takes no priority"));
                }
                reservation(period_ns, exec_ns, d.contains("reclaim"))
            }
            Some(_) => return Err(bad("unknown policy")),
        };
        PeriodicSpec::new(name, period_ns, exec_ns, policy)
    }
}

impl fmt::Display for PeriodicSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}us/{}us {}",
            self.name,
            self.period_ns / 1000,
            self.exec_ns / 1000,
            self.policy
        )
    }
}

/// One job's times. In a result they are relative to the first release; in a synthetic
/// timeline any common origin works.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Job {
    pub release_ns: u64,
    /// When the task ran after its sleep (wake-up).
    pub start_ns: u64,
    /// When the job's work was done.
    pub end_ns: u64,
}

impl Job {
    pub fn wake_ns(&self) -> u64 {
        self.start_ns.saturating_sub(self.release_ns)
    }
    /// Release → completion (rt-app's and Cucinotta et al.'s response time).
    pub fn response_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.release_ns)
    }
    pub fn missed(&self, deadline_ns: u64) -> bool {
        self.response_ns() > deadline_ns
    }
}

/// Statistics of a run of jobs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PeriodicStats {
    pub jobs: u64,
    pub deadline_misses: u64,
    /// Index of the first job that missed its deadline.
    pub first_miss_job: Option<u64>,
    /// Largest completion time past a deadline (0 when none was missed).
    pub max_tardiness_ns: u64,
    pub wake_ns: Summary,
    pub response_ns: Summary,
}

/// Online accumulation of `PeriodicStats`; `add` never allocates, so the job loop and the
/// pure `job_stats` share exactly this code.
pub struct Accum {
    deadline_ns: u64,
    wake: Histogram,
    response: Histogram,
    jobs: u64,
    misses: u64,
    first_miss: Option<u64>,
    max_tardiness: u64,
    wake_min: u64,
    wake_max: u64,
    wake_sum: u128,
    resp_min: u64,
    resp_max: u64,
    resp_sum: u128,
}

impl Accum {
    pub fn new(deadline_ns: u64) -> Self {
        Accum {
            deadline_ns,
            wake: new_ns_histogram(),
            response: new_ns_histogram(),
            jobs: 0,
            misses: 0,
            first_miss: None,
            max_tardiness: 0,
            wake_min: u64::MAX,
            wake_max: 0,
            wake_sum: 0,
            resp_min: u64::MAX,
            resp_max: 0,
            resp_sum: 0,
        }
    }

    #[inline]
    pub fn add(&mut self, j: &Job) {
        let w = j.wake_ns();
        let r = j.response_ns();
        record_clamped(&mut self.wake, w);
        record_clamped(&mut self.response, r);
        self.wake_min = self.wake_min.min(w);
        self.wake_max = self.wake_max.max(w);
        self.wake_sum += w as u128;
        self.resp_min = self.resp_min.min(r);
        self.resp_max = self.resp_max.max(r);
        self.resp_sum += r as u128;
        if j.missed(self.deadline_ns) {
            self.misses += 1;
            self.first_miss.get_or_insert(self.jobs);
            self.max_tardiness = self.max_tardiness.max(r - self.deadline_ns);
        }
        self.jobs += 1;
    }

    pub fn finish(&self) -> PeriodicStats {
        PeriodicStats {
            jobs: self.jobs,
            deadline_misses: self.misses,
            first_miss_job: self.first_miss,
            max_tardiness_ns: self.max_tardiness,
            wake_ns: Summary::of(&self.wake).with_exact(
                self.wake_min,
                self.wake_max,
                self.wake_sum,
            ),
            response_ns: Summary::of(&self.response).with_exact(
                self.resp_min,
                self.resp_max,
                self.resp_sum,
            ),
        }
    }
}

/// Statistics of a timeline of jobs against a relative deadline (pure; for tests,
/// imported traces and what-if analysis).
pub fn job_stats(jobs: &[Job], deadline_ns: u64) -> PeriodicStats {
    let mut a = Accum::new(deadline_ns);
    for j in jobs {
        a.add(j);
    }
    a.finish()
}

/// What the competing task did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PeriodicResult {
    pub spec: PeriodicSpec,
    pub stats: PeriodicStats,
    /// Busy-loop iterations per µs of thread CPU time, measured at start.
    pub calibration_loops_per_us: f64,
    /// Mean CPU time actually burnt per job (checks the calibration).
    pub exec_cpu_mean_ns: u64,
    /// Kernel thread id (for matching with traces).
    pub tid: i32,
    /// First release → stop.
    pub duration_ns: u64,
    /// Per-job times relative to the first release, up to `spec.trace_jobs` jobs.
    pub trace: Vec<Job>,
    /// Jobs beyond the trace's capacity (counted in `stats`, not in `trace`).
    pub trace_dropped: u64,
}

struct Outcome {
    accum: Accum,
    trace: Vec<Job>,
    dropped: u64,
    loops_per_us: f64,
    cpu_sum: u128,
    t0: u64,
    t_end: u64,
}

/// The running task. Dropping it stops it (the thread never outlives the handle).
pub struct PeriodicTask {
    spec: PeriodicSpec,
    stop: Arc<AtomicBool>,
    thread: Option<RtThread<Outcome>>,
}

/// One unit of busy work; the optimiser may not remove it.
#[inline(never)]
fn spin(iters: u64) {
    let mut x = 0x1234_5678u64;
    for i in 0..iters {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
    }
    std::hint::black_box(x);
}

/// Iterations of `spin` per µs of this thread's CPU time (best of a few tries, so a
/// preemption during calibration does not inflate the burn).
fn calibrate() -> f64 {
    let mut best: f64 = 0.0;
    for _ in 0..5 {
        let n = 200_000;
        let a = thread_cpu_ns();
        spin(n);
        let dt = (thread_cpu_ns() - a).max(1);
        best = best.max(n as f64 * 1000.0 / dt as f64);
    }
    best.max(1.0)
}

/// Burn `ns` of this thread's CPU time. Checking the CPU clock (not wall time) makes the
/// execution time the work, not the work plus whatever preempted it, as rt-app intends.
#[inline]
fn burn(ns: u64, chunk: u64) -> u64 {
    let start = thread_cpu_ns();
    loop {
        spin(chunk);
        let used = thread_cpu_ns() - start;
        if used >= ns {
            return used;
        }
    }
}

impl PeriodicTask {
    /// Start the task on its own thread with its policy and affinity. Fails (exit 3)
    /// when the policy is not permitted or a DEADLINE reservation is not admitted.
    pub fn start(spec: PeriodicSpec) -> Result<PeriodicTask> {
        spec.validate()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let (period, exec) = (spec.period_ns, spec.exec_ns);
        let mut accum = Accum::new(spec.deadline_ns);
        let mut trace = Vec::with_capacity(spec.trace_jobs);
        let cap = spec.trace_jobs;
        let thread = spawn_rt(
            ThreadSpec {
                name: format!("xr-{}", spec.name),
                policy: spec.policy,
                cpus: spec.cpus.clone(),
            },
            move || {
                let loops_per_us = calibrate();
                // ~20 µs between clock reads: overshoot stays small against ms-scale jobs.
                let chunk = (loops_per_us * 20.0).max(1.0) as u64;
                let mut dropped = 0;
                let mut cpu_sum: u128 = 0;
                let t0 = monotonic_ns() + 1_000_000;
                let mut k: u64 = 0;
                loop {
                    let release = t0 + k * period;
                    if stop2.load(Ordering::Relaxed) || crate::rt::interrupt::requested() {
                        break;
                    }
                    sleep_until_ns(release);
                    let start = monotonic_ns();
                    cpu_sum += burn(exec, chunk) as u128;
                    let end = monotonic_ns();
                    let job = Job {
                        release_ns: release - t0,
                        start_ns: start - t0,
                        end_ns: end - t0,
                    };
                    accum.add(&job);
                    if trace.len() < cap {
                        trace.push(job);
                    } else {
                        dropped += 1;
                    }
                    k += 1;
                }
                Outcome {
                    accum,
                    trace,
                    dropped,
                    loops_per_us,
                    cpu_sum,
                    t0,
                    t_end: monotonic_ns(),
                }
            },
        )?;
        Ok(PeriodicTask {
            spec,
            stop,
            thread: Some(thread),
        })
    }

    pub fn spec(&self) -> &PeriodicSpec {
        &self.spec
    }

    /// Kernel thread id of the task.
    pub fn tid(&self) -> Option<libc::pid_t> {
        self.thread.as_ref().map(|t| t.tid)
    }

    /// Stop after the current job (at most one period) and return what it did.
    pub fn stop(mut self) -> PeriodicResult {
        self.stop.store(true, Ordering::SeqCst);
        let t = self.thread.take().expect("a started task has its thread");
        let tid = t.tid;
        let o = t.join();
        let stats = o.accum.finish();
        PeriodicResult {
            exec_cpu_mean_ns: if stats.jobs > 0 {
                (o.cpu_sum / stats.jobs as u128) as u64
            } else {
                0
            },
            stats,
            spec: self.spec.clone(),
            calibration_loops_per_us: o.loops_per_us,
            tid,
            duration_ns: o.t_end.saturating_sub(o.t0),
            trace: o.trace,
            trace_dropped: o.dropped,
        }
    }
}

impl Drop for PeriodicTask {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            self.stop.store(true, Ordering::SeqCst);
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(release: u64, start: u64, end: u64) -> Job {
        Job {
            release_ns: release,
            start_ns: start,
            end_ns: end,
        }
    }

    #[test]
    fn misses_and_response_times_on_a_synthetic_timeline() {
        // Period 10 ms, deadline 10 ms. Job 2 finishes late (12 ms after release), which
        // delays job 3's start past its release.
        let ms = 1_000_000;
        let jobs = [
            job(0, 50_000, 2 * ms),
            job(10 * ms, 10 * ms + 100_000, 12 * ms),
            job(20 * ms, 20 * ms + 10_000, 32 * ms),
            job(30 * ms, 32 * ms, 34 * ms),
            job(40 * ms, 40 * ms, 50 * ms), // exactly at the deadline: not a miss
        ];
        let s = job_stats(&jobs, 10 * ms);
        assert_eq!(s.jobs, 5);
        assert_eq!(s.deadline_misses, 1);
        assert_eq!(s.first_miss_job, Some(2));
        assert_eq!(s.max_tardiness_ns, 2 * ms);
        assert_eq!(s.response_ns.max, 12 * ms);
        assert_eq!(s.response_ns.min, 2 * ms);
        assert_eq!(
            s.response_ns.mean,
            (2 + 2 + 12 + 4 + 10) as f64 * ms as f64 / 5.0
        );
        assert_eq!(s.wake_ns.max, 2 * ms);
        assert_eq!(s.wake_ns.min, 0);
        assert_eq!(s.wake_ns.count, 5);
    }

    #[test]
    fn tighter_deadline_counts_more_misses() {
        let ms = 1_000_000;
        let jobs: Vec<Job> = (0..100)
            .map(|k| job(k * 10 * ms, k * 10 * ms, k * 10 * ms + (k % 10 + 1) * ms))
            .collect();
        // Responses are 1..10 ms, ten of each: > 5 ms for 6,7,8,9,10.
        assert_eq!(job_stats(&jobs, 5 * ms).deadline_misses, 50);
        assert_eq!(job_stats(&jobs, 10 * ms).deadline_misses, 0);
        assert_eq!(job_stats(&[], 5 * ms).jobs, 0);
    }

    #[test]
    fn parses_compete_specs() {
        let v: PeriodicSpec = "voip".parse().unwrap();
        assert_eq!((v.period_ns, v.exec_ns), (10_000_000, 1_700_000));
        assert_eq!(v.policy, Policy::Other { nice: 0 });
        let f: PeriodicSpec = "10ms/1.7ms:fifo:15".parse().unwrap();
        assert_eq!(f.policy, Policy::Fifo { priority: 15 });
        assert_eq!(f.name, "custom");
        let d: PeriodicSpec = "video:deadline-reclaim".parse().unwrap();
        assert_eq!(
            d.policy,
            Policy::Deadline {
                runtime_ns: 5_250_000,
                deadline_ns: 40_000_000,
                period_ns: 40_000_000,
                reclaim: true
            }
        );
        assert_eq!(
            "video:rr".parse::<PeriodicSpec>().unwrap().policy,
            Policy::Rr { priority: 15 }
        );
        for bad in [
            "audio",
            "10ms",
            "10ms/20ms",
            "10ms/0ms",
            "10/1.7",
            "voip:fifo:0",
            "voip:other:3",
            "voip:deadline:3",
            "voip:batch",
            "voip:fifo:1:2",
            "10s/1s",
        ] {
            let e = bad.parse::<PeriodicSpec>().unwrap_err();
            assert_eq!(e.exit_code(), crate::error::EXIT_USAGE, "{bad}: {e}");
        }
    }

    #[test]
    fn burn_consumes_the_requested_cpu_time() {
        let lpu = calibrate();
        let chunk = (lpu * 20.0) as u64;
        let used = burn(2_000_000, chunk);
        assert!(used >= 2_000_000);
        // Overshoot is at most a chunk plus a clock read; be generous for a noisy VM.
        assert!(used < 3_000_000, "burnt {used} ns for 2 ms");
    }
}
