//! The physical limit of a plugin: its cost per frame when it has a core to itself, and so
//! how many instances one core could run at a sample rate if nothing else existed. `plugins
//! bench` prints it and `load` starts its search from it.
//!
//! The plugin processes white noise in blocks of the driver's buffer size with nothing
//! real-time around it. Blocks are timed in groups of at least ~50 µs so that the clock
//! reads cost nothing measurable even for trivial plugins; the headline figure is the
//! median group, which ignores preemptions and hypervisor steal on a noisy machine, and the
//! thread-CPU-time mean is reported beside it as a cross-check.

use super::{registry, ChainElement, PluginContext};
use crate::error::{Error, Result};
use crate::rt::clock::{monotonic_ns, thread_cpu_ns};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Plugins `bench` refuses: they never return from `process`.
pub const NEVER_RETURNS: &[&str] = &["hang"];

/// What `plugins bench` was asked to measure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BenchConfig {
    pub rate: u32,
    pub buffer_frames: u32,
    /// Timing budget per plugin.
    pub duration_ns: u64,
    pub plugins: Vec<ChainElement>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BenchResult {
    pub plugin: String,
    #[serde(default)]
    pub params: String,
    /// Instances run in series (their cost is divided by this; >1 shows cache effects).
    pub instances: u32,
    pub rate: u32,
    pub buffer_frames: u32,
    /// Frames processed while timing (per instance).
    pub measured_frames: u64,
    /// Median over timed groups of wall time per frame per instance.
    pub ns_per_frame: f64,
    /// Fastest group.
    pub ns_per_frame_min: f64,
    /// Thread CPU time over all frames.
    pub cpu_ns_per_frame_mean: f64,
    /// Share of one core one instance takes at `rate`: ns_per_frame · rate / 1e9 · 100.
    pub core_percent: f64,
    /// 100 / core_percent: instances one core could run, the physical limit.
    pub instances_per_core: f64,
}

/// Deterministic white noise at -20 dBFS, a fixed input for every run.
fn noise(len: usize) -> Vec<f32> {
    let mut s: u32 = 0x9E37_79B9;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s as f32 / u32::MAX as f32 - 0.5) * 0.2
        })
        .collect()
}

/// Benchmark one instance of `name(params)`.
pub fn bench_plugin(
    name: &str,
    params: &str,
    ctx: &PluginContext,
    duration_ns: u64,
) -> Result<BenchResult> {
    bench_element(
        &ChainElement {
            plugin: name.to_string(),
            params: params.to_string(),
            count: 1,
        },
        ctx,
        duration_ns,
    )
}

/// Benchmark `count` instances of an element in series for about `duration_ns` of wall time.
pub fn bench_element(
    e: &ChainElement,
    ctx: &PluginContext,
    duration_ns: u64,
) -> Result<BenchResult> {
    if NEVER_RETURNS.contains(&e.plugin.as_str()) {
        return Err(Error::usage(format!(
            "plugin '{}' never returns from process; it cannot be benchmarked",
            e.plugin
        )));
    }
    if ctx.max_frames == 0 || ctx.rate == 0 {
        return Err(Error::usage("bench: buffer and rate must be positive"));
    }
    let mut chain = registry::create_chain(std::slice::from_ref(e), ctx)?;
    let buf = ctx.max_frames;
    let src_len = (buf * 64).max(1 << 16);
    let (src_l, src_r) = (noise(src_len), noise(src_len + 7)[7..].to_vec());
    let (mut l, mut r) = (vec![0.0f32; buf], vec![0.0f32; buf]);
    let mut pos = 0;
    let mut block = |chain: &mut Vec<Box<dyn super::Plugin>>| {
        l.copy_from_slice(&src_l[pos..pos + buf]);
        r.copy_from_slice(&src_r[pos..pos + buf]);
        for p in chain.iter_mut() {
            p.process(&mut l, &mut r);
        }
        std::hint::black_box((&l, &r));
        pos += buf;
        if pos + buf > src_len {
            pos = 0;
        }
    };

    // Warm-up: fill caches and delay lines, and learn the block cost to size the groups.
    let warm_until = monotonic_ns() + (duration_ns / 10).clamp(20_000_000, 300_000_000);
    let mut warm_blocks = 0u64;
    let t0 = monotonic_ns();
    while monotonic_ns() < warm_until || warm_blocks < 8 {
        block(&mut chain);
        warm_blocks += 1;
    }
    let block_ns = ((monotonic_ns() - t0) / warm_blocks).max(1);
    let per_group = (50_000 / block_ns).max(1);

    let mut groups: Vec<f64> = Vec::new();
    let frames_per_group = per_group * buf as u64;
    let per_frame = |ns: u64| ns as f64 / frames_per_group as f64 / e.count as f64;
    let start = monotonic_ns();
    let cpu0 = thread_cpu_ns();
    let mut blocks = 0u64;
    loop {
        let a = monotonic_ns();
        for _ in 0..per_group {
            block(&mut chain);
        }
        let b = monotonic_ns();
        groups.push(per_frame(b - a));
        blocks += per_group;
        if b - start >= duration_ns && groups.len() >= 5 {
            break;
        }
    }
    let cpu = thread_cpu_ns() - cpu0;
    let frames = blocks * buf as u64;
    groups.sort_by(f64::total_cmp);
    let ns_per_frame = groups[groups.len() / 2];
    let core_percent = ns_per_frame * ctx.rate as f64 / 1e9 * 100.0;
    Ok(BenchResult {
        plugin: e.plugin.clone(),
        params: e.params.clone(),
        instances: e.count,
        rate: ctx.rate,
        buffer_frames: buf as u32,
        measured_frames: frames,
        ns_per_frame,
        ns_per_frame_min: groups[0],
        cpu_ns_per_frame_mean: cpu as f64 / frames as f64 / e.count as f64,
        core_percent,
        instances_per_core: if core_percent > 0.0 {
            100.0 / core_percent
        } else {
            f64::INFINITY
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bench_measures_and_refuses_hang() {
        let ctx = PluginContext {
            rate: 48000,
            max_frames: 128,
        };
        let r = bench_plugin("reverb-light", "", &ctx, 30_000_000).unwrap();
        assert!(r.ns_per_frame > 0.0 && r.ns_per_frame.is_finite());
        assert!((r.core_percent * r.instances_per_core - 100.0).abs() < 1e-6);
        assert!(r.measured_frames > 0);
        assert!(bench_plugin("hang", "", &ctx, 1_000_000).is_err());
        assert!(bench_plugin("nope", "", &ctx, 1_000_000).is_err());
    }
}
