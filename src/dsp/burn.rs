//! `burn(X%)`: a calibrated CPU load that behaves like DSP (fixed, deterministic work per
//! block; scales with the block length), for Senoner's 80 % client and Cucinotta et al.'s 7 %
//! client. And `hang`, which never returns, for watchdog tests only.

use super::{Plugin, PluginContext};
use crate::error::{Error, Result};
use crate::rt::clock::thread_cpu_ns;
use std::hint::black_box;
use std::sync::OnceLock;

/// One unit of busy work: a dependent chain the CPU cannot skip or overlap across units.
#[inline(always)]
fn unit(mut x: u64) -> u64 {
    for _ in 0..8 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    x
}

#[inline(never)]
fn spin(units: u64, seed: u64) -> u64 {
    let mut x = seed | 1;
    for _ in 0..units {
        x = unit(black_box(x));
    }
    x
}

/// Nanoseconds of thread CPU time per unit, measured once per process: the fastest of a
/// few ~5 ms trials, because preemption and cache misses only ever make a trial slower
/// and thread CPU time already excludes time spent off the CPU.
pub fn ns_per_unit() -> f64 {
    static CAL: OnceLock<f64> = OnceLock::new();
    *CAL.get_or_init(|| {
        let mut units = 1_000u64;
        // Grow the trial until it takes ~5 ms so clock resolution does not matter.
        loop {
            let c0 = thread_cpu_ns();
            black_box(spin(units, 7));
            let dt = thread_cpu_ns() - c0;
            if dt >= 5_000_000 || units >= 1 << 34 {
                break;
            }
            units *= 2;
        }
        let mut best = f64::MAX;
        for _ in 0..5 {
            let c0 = thread_cpu_ns();
            black_box(spin(units, 11));
            let dt = (thread_cpu_ns() - c0) as f64;
            best = best.min(dt / units as f64);
        }
        best.max(1e-3)
    })
}

pub struct Burn {
    /// Units for a block of `max_frames`.
    units_per_block: u64,
    max_frames: usize,
    state: u64,
}

impl Burn {
    pub fn new(percent: f64, ctx: &PluginContext) -> Self {
        let target_ns = ctx.period_ns() as f64 * percent / 100.0;
        Burn {
            units_per_block: (target_ns / ns_per_unit()).round() as u64,
            max_frames: ctx.max_frames.max(1),
            state: 0x9e37_79b9,
        }
    }

    pub fn from_params(params: &str, ctx: &PluginContext) -> Result<Box<dyn Plugin>> {
        if params.is_empty() {
            return Err(Error::usage(
                "burn needs a share of the period, e.g. burn(30%)",
            ));
        }
        let pct = crate::units::parse_percent(params)?;
        Ok(Box::new(Burn::new(pct, ctx)))
    }

    pub fn units_per_block(&self) -> u64 {
        self.units_per_block
    }
}

impl Plugin for Burn {
    fn process(&mut self, left: &mut [f32], _right: &mut [f32]) {
        let units = self.units_per_block * left.len() as u64 / self.max_frames as u64;
        self.state = spin(units, self.state);
        // Audio passes unchanged; the state is kept so the work cannot be optimised away.
        black_box(self.state);
    }
}

/// TEST ONLY: never returns from `process`, busy-looping like a plugin stuck in an endless
/// loop. Exists so the watchdog (docs/ARCHITECTURE.md §5) can be tested end to end; never use it in a
/// measurement.
pub struct Hang;

impl Plugin for Hang {
    fn process(&mut self, _left: &mut [f32], _right: &mut [f32]) {
        let mut x = 1u64;
        loop {
            x = unit(black_box(x));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burn_takes_about_its_share_of_the_period_in_cpu_time() {
        let ctx = PluginContext {
            rate: 48000,
            max_frames: 480,
        }; // 10 ms
        let mut b = Burn::new(20.0, &ctx);
        assert!(b.units_per_block() > 0);
        let (mut l, mut r) = (vec![0.5f32; 480], vec![0.5f32; 480]);
        let mut best = u64::MAX;
        for _ in 0..5 {
            let c0 = thread_cpu_ns();
            b.process(&mut l, &mut r);
            best = best.min(thread_cpu_ns() - c0);
        }
        // 2 ms nominal; generous bounds for a noisy VM.
        assert!(
            (1_000_000..6_000_000).contains(&best),
            "burn(20%) of 10 ms took {best} ns"
        );
        assert!(l.iter().all(|&v| v == 0.5), "burn must not touch the audio");
        // Half a block is half the work.
        let c0 = thread_cpu_ns();
        b.process(&mut l[..240], &mut r[..240]);
        let half = thread_cpu_ns() - c0;
        assert!(
            half < best,
            "half a block took {half} ns, a full one {best} ns"
        );
    }
}
