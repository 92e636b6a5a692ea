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

/// Samples (CLOCK_MONOTONIC ns, steal ticks summed over CPUs) until stopped.
pub struct StealSampler {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Vec<(u64, u64)>>,
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
                while !flag.load(Ordering::Relaxed) {
                    if let Some(s) = read() {
                        v.push((monotonic_ns(), s));
                    }
                    std::thread::sleep(std::time::Duration::from_nanos(INTERVAL_NS));
                }
                if let Some(s) = read() {
                    v.push((monotonic_ns(), s));
                }
                v
            })
            .ok()?;
        Some(StealSampler { stop, handle })
    }

    pub fn stop(self) -> Vec<(u64, u64)> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or_default()
    }
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
    // Window i spans samples i..i+1 and is marked when it or window i+1 saw steal.
    let stole: Vec<bool> = samples.windows(2).map(|w| w[1].1 > w[0].1).collect();
    let marked: Vec<bool> = (0..n)
        .map(|i| stole[i] || stole.get(i + 1).copied().unwrap_or(false))
        .collect();
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
