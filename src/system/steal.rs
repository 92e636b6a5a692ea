//! Hypervisor steal over a run, sampled beside it, so each xrun can be set against what the
//! host took at that moment. A guest cannot see steal per cycle on its real-time path (it is
//! a /proc/stat counter, accounted in 10 ms units), but a non-real-time thread can sample it
//! every few tens of ms; after the run each recorded xrun is placed in its window.

use crate::rt::clock::monotonic_ns;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Sampling interval: several steal units (10 ms), short against a run.
pub const INTERVAL_NS: u64 = 50_000_000;

/// Samples the host's steal, summed and per CPU, until stopped.
pub struct StealSampler {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<StealRecord>,
}

impl StealSampler {
    /// None when this kernel does not count steal (or the thread cannot start).
    pub fn start() -> Option<StealSampler> {
        read()?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("xrunlab-steal".into())
            .spawn(move || {
                let mut rec = StealRecord::default();
                let mut sample = || {
                    if let Ok(stat) = std::fs::read_to_string("/proc/stat") {
                        if let Some((s, _)) = super::env::steal_ticks(&stat) {
                            rec.sample(monotonic_ns(), s, &per_cpu_ticks(&stat));
                        }
                    }
                };
                while !flag.load(Ordering::Relaxed) {
                    sample();
                    std::thread::sleep(std::time::Duration::from_nanos(INTERVAL_NS));
                }
                sample();
                rec
            })
            .ok()?;
        Some(StealSampler { stop, handle })
    }

    pub fn stop(self) -> StealRecord {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or_default()
    }
}

/// One counter's windows with steal, counted as samples arrive. Window i is marked when it
/// or window i+1 saw steal (the guest accounts steal when its vCPU runs again, so a stall
/// shows up at most one window late): a window is final once the next one is known.
#[derive(Debug, Clone, Copy, Default)]
struct Marks {
    first: u64,
    last: u64,
    windows: u64,
    prev_stole: bool,
    /// Marked windows among those that are final.
    marked: u64,
}

impl Marks {
    fn new(ticks: u64) -> Self {
        Marks {
            first: ticks,
            last: ticks,
            ..Default::default()
        }
    }

    /// One more window, ending at `ticks`; whether it stole.
    fn step(&mut self, ticks: u64) -> bool {
        let stole = ticks > self.last;
        self.windows += 1;
        if self.windows >= 2 && (self.prev_stole || stole) {
            self.marked += 1;
        }
        self.prev_stole = stole;
        self.last = ticks;
        stole
    }

    fn marked(&self) -> u64 {
        self.marked + u64::from(self.windows >= 1 && self.prev_stole)
    }

    fn stolen_ms(&self) -> f64 {
        self.last.saturating_sub(self.first) as f64 * 10.0
    }
}

/// The host's steal over a run, kept as it is sampled: counts per counter, and the time
/// spans of the windows marked as having steal, merged where they touch. Memory grows with
/// the number of steal episodes, not with the run's length: a run of hours on a host that
/// steals nothing keeps nothing (every sample used to be kept, 5 MB an hour).
#[derive(Debug, Clone, Default)]
pub struct StealRecord {
    /// CLOCK_MONOTONIC ns of the first and the latest sample.
    span: Option<(u64, u64)>,
    summed: Marks,
    /// `[start, end)` of marked windows (summed over CPUs), in order.
    marked: Vec<(u64, u64)>,
    /// Where the latest window started.
    prev_start: u64,
    per_cpu: Vec<Marks>,
    /// CPUs listed by every sample so far (a CPU some sample lacks has no figure).
    cpus: usize,
}

impl StealRecord {
    /// A sample at `t_ns`: steal ticks summed over CPUs, and each CPU's (`per_cpu_ticks`).
    pub fn sample(&mut self, t_ns: u64, summed: u64, per_cpu: &[u64]) {
        let Some((_, prev_t)) = self.span else {
            self.span = Some((t_ns, t_ns));
            self.summed = Marks::new(summed);
            self.per_cpu = per_cpu.iter().map(|&t| Marks::new(t)).collect();
            self.cpus = per_cpu.len();
            return;
        };
        // This window is [prev_t, t_ns); the one before it [prev_start, prev_t).
        let prev_start = self.prev_start;
        self.prev_start = prev_t;
        self.span = self.span.map(|(first, _)| (first, t_ns));
        if self.summed.step(summed) {
            // This window is marked, and so is the one before it.
            let from = if self.summed.windows >= 2 {
                prev_start
            } else {
                prev_t
            };
            match self.marked.last_mut() {
                Some(m) if m.1 >= from => m.1 = m.1.max(t_ns),
                _ => self.marked.push((from, t_ns)),
            }
        }
        self.cpus = self.cpus.min(per_cpu.len());
        for (m, &t) in self.per_cpu.iter_mut().zip(per_cpu) {
            m.step(t);
        }
    }

    /// The run's xruns (CLOCK_MONOTONIC ns of their cycles' ideal starts) placed in the
    /// sampled windows.
    pub fn host_steal(&self, xruns: impl IntoIterator<Item = u64>) -> HostSteal {
        let mut out = HostSteal {
            interval_ms: INTERVAL_NS as f64 / 1e6,
            windows: self.summed.windows,
            windows_with_steal: self.summed.marked(),
            stolen_ms: self.summed.stolen_ms(),
            ..Default::default()
        };
        let Some((first, last)) = self.span else {
            return out;
        };
        for t in xruns {
            if t < first || t >= last {
                continue;
            }
            out.xruns += 1;
            let i = self.marked.partition_point(|m| m.0 <= t);
            out.xruns_in_steal_windows += u64::from(i > 0 && t < self.marked[i - 1].1);
        }
        out
    }

    /// `cpu`'s steal; None when some sample did not list it.
    pub fn cpu(&self, cpu: usize) -> Option<CpuSteal> {
        (cpu < self.cpus).then(|| {
            let m = &self.per_cpu[cpu];
            CpuSteal {
                stolen_ms: m.stolen_ms(),
                windows_with_steal: m.marked(),
            }
        })
    }
}

/// Steal ticks of each CPU from the `cpuN` lines of /proc/stat, indexed by N (0 for a CPU
/// the file does not list).
pub fn per_cpu_ticks(stat: &str) -> Vec<u64> {
    let mut out = Vec::new();
    for l in stat.lines() {
        // `cpuN`, not the aggregate `cpu ` line.
        let Some(rest) = l
            .strip_prefix("cpu")
            .filter(|r| r.starts_with(|c: char| c.is_ascii_digit()))
        else {
            continue;
        };
        let mut f = rest.split_whitespace();
        let Some(Ok(n)) = f.next().map(str::parse::<usize>) else {
            continue;
        };
        // user nice system idle iowait irq softirq steal
        if let Some(Ok(steal)) = f.nth(7).map(str::parse::<u64>) {
            if out.len() <= n {
                out.resize(n + 1, 0);
            }
            out[n] = steal;
        }
    }
    out
}

/// One CPU's steal over the samples of `StealSampler::stop_per_cpu`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuSteal {
    pub stolen_ms: f64,
    /// Windows marked as in `HostSteal::windows_with_steal`, for this CPU alone.
    pub windows_with_steal: u64,
}

fn read() -> Option<u64> {
    super::env::steal_ticks(&std::fs::read_to_string("/proc/stat").ok()?).map(|(s, _)| s)
}

/// The run's xruns against the host's steal, window by window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HostSteal {
    /// Sampling interval, ms.
    pub interval_ms: f64,
    /// Windows sampled over the run.
    pub windows: u64,
    /// Windows in which the host stole time, or in the window after (the guest accounts
    /// steal when its CPU runs again, so a stall shows up at the latest one window late).
    pub windows_with_steal: u64,
    /// Steal over the run, ms, summed over CPUs.
    pub stolen_ms: f64,
    /// Recorded xruns placed in a window (those outside the sampled span are not counted).
    pub xruns: u64,
    /// Of those, the ones in a window with steal (same rule as `windows_with_steal`).
    pub xruns_in_steal_windows: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record of `(ms, summed ticks, per-CPU ticks)` samples.
    fn record(samples: &[(u64, u64, &[u64])]) -> StealRecord {
        let mut r = StealRecord::default();
        for &(ms, s, c) in samples {
            r.sample(ms * 1_000_000, s, c);
        }
        r
    }

    #[test]
    fn xruns_are_placed_in_their_window_and_steal_counts_one_window_late() {
        // Windows [0,50) [50,100) [100,150) [150,200) ms; steal shows in the third.
        let ms = 1_000_000;
        let r = record(&[
            (0, 7, &[]),
            (50, 7, &[]),
            (100, 7, &[]),
            (150, 9, &[]),
            (200, 9, &[]),
        ]);
        let h = r.host_steal([10 * ms, 60 * ms, 120 * ms, 160 * ms, 250 * ms, 0, 50 * ms]);
        // The second window is marked because steal appeared in the one after it.
        assert_eq!((h.windows, h.windows_with_steal), (4, 2));
        assert_eq!(h.stolen_ms, 20.0);
        // 250 ms is after the last sample; 0 and 50 ms open their windows.
        assert_eq!((h.xruns, h.xruns_in_steal_windows), (6, 3));
        assert_eq!(
            r.marked,
            [(50 * ms, 150 * ms)],
            "one span, not one entry per window"
        );
        assert_eq!(StealRecord::default().host_steal([1]).xruns, 0);
    }

    #[test]
    fn steal_in_the_last_window_and_in_separate_episodes() {
        let ms = 1_000_000;
        let r = record(&[
            (0, 1, &[]),
            (50, 2, &[]),
            (100, 2, &[]),
            (150, 2, &[]),
            (200, 2, &[]),
            (250, 3, &[]),
        ]);
        let h = r.host_steal([10 * ms, 120 * ms, 160 * ms, 240 * ms]);
        // Windows 0, 3 (before the steal) and 4 (the last, with steal) are marked.
        assert_eq!((h.windows, h.windows_with_steal), (5, 3));
        assert_eq!((h.xruns, h.xruns_in_steal_windows), (4, 3));
        assert_eq!(r.marked, [(0, 50 * ms), (150 * ms, 250 * ms)]);
    }

    #[test]
    fn steal_is_read_and_marked_per_cpu() {
        let stat = "cpu  10 0 0 0 0 0 0 9 0 0\ncpu0 5 0 0 0 0 0 0 4 0 0\ncpu2 5 0 0 0 0 0 0 5 0 0\nintr 1 2\n";
        assert_eq!(per_cpu_ticks(stat), [4, 0, 5]);
        // CPU 1 stole in the third window only; CPU 0 never.
        let r = record(&[
            (0, 0, &[4, 7]),
            (50, 0, &[4, 7]),
            (100, 0, &[4, 7]),
            (150, 0, &[4, 9]),
            (200, 0, &[4, 9]),
        ]);
        let one = r.cpu(1).unwrap();
        assert_eq!((one.stolen_ms, one.windows_with_steal), (20.0, 2));
        assert_eq!(r.cpu(0).unwrap(), CpuSteal::default());
        assert_eq!(r.cpu(5), None);
        // A CPU one sample does not list has no figure.
        let r = record(&[(0, 0, &[4, 7]), (50, 0, &[4])]);
        assert_eq!(r.cpu(1), None);
        assert!(r.cpu(0).is_some());
    }

    #[test]
    fn the_sampler_samples_until_stopped() {
        let Some(s) = StealSampler::start() else {
            return; // a kernel without the steal column: nothing to sample
        };
        std::thread::sleep(std::time::Duration::from_millis(120));
        let r = s.stop();
        assert!(r.summed.windows >= 2, "{r:?}");
        let (first, last) = r.span.unwrap();
        assert!(first < last, "{r:?}");
    }
}
