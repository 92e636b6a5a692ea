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

/// Per sample: (CLOCK_MONOTONIC ns, steal ticks summed over CPUs); beside it, each CPU's.
type Samples = (Vec<(u64, u64)>, Vec<Vec<u64>>);

/// Samples the host's steal, summed and per CPU, until stopped.
pub struct StealSampler {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Samples>,
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
                let mut v = Vec::with_capacity(4096);
                let mut c = Vec::with_capacity(4096);
                let mut sample = || {
                    if let Ok(stat) = std::fs::read_to_string("/proc/stat") {
                        if let Some((s, _)) = super::env::steal_ticks(&stat) {
                            v.push((monotonic_ns(), s));
                            c.push(per_cpu_ticks(&stat));
                        }
                    }
                };
                while !flag.load(Ordering::Relaxed) {
                    sample();
                    std::thread::sleep(std::time::Duration::from_nanos(INTERVAL_NS));
                }
                sample();
                (v, c)
            })
            .ok()?;
        Some(StealSampler { stop, handle })
    }

    pub fn stop(self) -> Vec<(u64, u64)> {
        self.stop_per_cpu().0
    }

    /// `stop`, with each sample's steal ticks per CPU (`per_cpu_ticks`) beside it.
    pub fn stop_per_cpu(self) -> Samples {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or_default()
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

/// `cpu`'s steal over `per_cpu` samples; None when the samples do not list it.
pub fn cpu_steal(per_cpu: &[Vec<u64>], cpu: usize) -> Option<CpuSteal> {
    if per_cpu.is_empty() {
        return None;
    }
    let ticks: Vec<u64> = per_cpu
        .iter()
        .map(|s| s.get(cpu).copied())
        .collect::<Option<_>>()?;
    let stole: Vec<bool> = ticks.windows(2).map(|w| w[1] > w[0]).collect();
    Some(CpuSteal {
        stolen_ms: match (ticks.first(), ticks.last()) {
            (Some(a), Some(b)) => b.saturating_sub(*a) as f64 * 10.0,
            _ => 0.0,
        },
        windows_with_steal: marked(&stole).iter().filter(|&&m| m).count() as u64,
    })
}

/// Window i is marked when it or window i+1 saw steal (the guest accounts steal when its
/// vCPU runs again, so a stall shows up at most one window late).
fn marked(stole: &[bool]) -> Vec<bool> {
    (0..stole.len())
        .map(|i| stole[i] || stole.get(i + 1).copied().unwrap_or(false))
        .collect()
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

/// Place the xruns (CLOCK_MONOTONIC ns of their cycles' ideal starts) in the sampled windows.
pub fn attribute(samples: &[(u64, u64)], xruns: impl IntoIterator<Item = u64>) -> HostSteal {
    let n = samples.len().saturating_sub(1);
    // Window i spans samples i..i+1.
    let stole: Vec<bool> = samples.windows(2).map(|w| w[1].1 > w[0].1).collect();
    let marked = marked(&stole);
    let mut out = HostSteal {
        interval_ms: INTERVAL_NS as f64 / 1e6,
        windows: n as u64,
        windows_with_steal: marked.iter().filter(|&&m| m).count() as u64,
        stolen_ms: match (samples.first(), samples.last()) {
            (Some(a), Some(b)) => b.1.saturating_sub(a.1) as f64 * 10.0,
            _ => 0.0,
        },
        ..Default::default()
    };
    for t in xruns {
        // The window whose start is the last sample at or before t.
        let i = samples.partition_point(|s| s.0 <= t);
        if i == 0 || i > n {
            continue;
        }
        out.xruns += 1;
        out.xruns_in_steal_windows += marked[i - 1] as u64;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xruns_are_placed_in_their_window_and_steal_counts_one_window_late() {
        // Windows [0,50) [50,100) [100,150) [150,200) ms; steal shows in the third.
        let ms = 1_000_000;
        let s = [
            (0, 7),
            (50 * ms, 7),
            (100 * ms, 7),
            (150 * ms, 9),
            (200 * ms, 9),
        ];
        let h = attribute(
            &s,
            [10 * ms, 60 * ms, 120 * ms, 160 * ms, 250 * ms, 0, 50 * ms],
        );
        // The second window is marked because steal appeared in the one after it.
        assert_eq!((h.windows, h.windows_with_steal), (4, 2));
        assert_eq!(h.stolen_ms, 20.0);
        // 250 ms is after the last sample; 0 and 50 ms open their windows.
        assert_eq!((h.xruns, h.xruns_in_steal_windows), (6, 3));
        assert_eq!(attribute(&[], [1]).xruns, 0);
    }

    #[test]
    fn steal_is_read_and_marked_per_cpu() {
        let stat = "cpu  10 0 0 0 0 0 0 9 0 0\ncpu0 5 0 0 0 0 0 0 4 0 0\ncpu2 5 0 0 0 0 0 0 5 0 0\nintr 1 2\n";
        assert_eq!(per_cpu_ticks(stat), [4, 0, 5]);
        // CPU 1 stole in the third window only; CPU 0 never.
        let s = vec![vec![4, 7], vec![4, 7], vec![4, 7], vec![4, 9], vec![4, 9]];
        let one = cpu_steal(&s, 1).unwrap();
        assert_eq!((one.stolen_ms, one.windows_with_steal), (20.0, 2));
        assert_eq!(cpu_steal(&s, 0).unwrap(), CpuSteal::default());
        assert_eq!(cpu_steal(&s, 5), None);
    }

    #[test]
    fn the_sampler_samples_until_stopped() {
        let Some(s) = StealSampler::start() else {
            return; // a kernel without the steal column: nothing to sample
        };
        std::thread::sleep(std::time::Duration::from_millis(120));
        let v = s.stop();
        assert!(v.len() >= 3, "{v:?}");
        assert!(v.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
    }
}
