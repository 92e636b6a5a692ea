//! The live line of a latency run (cyclictest's `T: 0 … Max:` line, compact): each
//! measuring thread keeps its maximum and a coarse log histogram in atomics, which the
//! spawning thread reads every 100 ms for the progress display.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Four buckets per doubling of the latency in µs: a p99 read off them is within 19 %.
const SUB: u32 = 4;
const BUCKETS: usize = 128;

/// One thread's running maximum and histogram. Written by its RT thread with relaxed atomic
/// stores only (no allocation, no lock), read by anyone.
pub(super) struct Live {
    max_ns: AtomicU64,
    counts: [AtomicU64; BUCKETS],
}

impl Default for Live {
    fn default() -> Self {
        Live {
            max_ns: AtomicU64::new(0),
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// The bucket of a latency: its octave in µs, then which quarter of it.
fn bucket(lat_ns: u64) -> usize {
    let v = lat_ns / 1_000 + 1;
    let e = 63 - v.leading_zeros();
    let sub = if e >= 2 { (v >> (e - 2)) & 3 } else { v & 3 };
    ((e * SUB) as usize + sub as usize).min(BUCKETS - 1)
}

/// The lowest latency (µs) a bucket holds.
fn floor_us(b: usize) -> u64 {
    let (e, sub) = (b as u32 / SUB, b as u64 % SUB as u64);
    let v = if e >= 2 {
        (4 + sub) << (e - 2)
    } else {
        sub.max(1)
    };
    v - 1
}

impl Live {
    /// One wake-up's latency. Real-time safe: two relaxed atomic operations.
    pub(super) fn record(&self, lat_ns: u64) {
        self.max_ns.fetch_max(lat_ns, Relaxed);
        self.counts[bucket(lat_ns)].fetch_add(1, Relaxed);
    }

    /// The maximum and the approximate 99th percentile so far, in µs.
    fn max_p99_us(&self) -> (u64, u64) {
        let counts: Vec<u64> = self.counts.iter().map(|c| c.load(Relaxed)).collect();
        let total: u64 = counts.iter().sum();
        let mut seen = 0;
        let mut p99 = 0;
        for (b, n) in counts.iter().enumerate() {
            seen += n;
            if total > 0 && seen * 100 >= total * 99 {
                p99 = floor_us(b);
                break;
            }
        }
        (self.max_ns.load(Relaxed) / 1_000, p99)
    }
}

/// "max/p99 µs  CPU0 45/30  CPU1 60/28": every CPU's figures so far.
pub(super) fn line(cpus: &[usize], lives: &[std::sync::Arc<Live>]) -> String {
    let mut s = String::from("max/p99 µs");
    for (cpu, l) in cpus.iter().zip(lives) {
        let (max, p99) = l.max_p99_us();
        s.push_str(&format!("  CPU{cpu} {max}/≥{p99}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_holds_its_floor_and_p99_reads_the_tail() {
        for us in [0u64, 1, 3, 7, 50, 199, 1000, 36_000] {
            let b = bucket(us * 1_000);
            assert!(
                floor_us(b) <= us,
                "{us} µs in bucket {b} from {}",
                floor_us(b)
            );
            assert!(b + 1 >= BUCKETS || floor_us(b + 1) > us, "{us}");
        }
        let l = Live::default();
        (0..990).for_each(|_| l.record(20_000));
        (0..10).for_each(|_| l.record(900_000));
        let (max, p99) = l.max_p99_us();
        assert_eq!(max, 900);
        assert!((16..=20).contains(&p99), "{p99}");
    }
}
