//! The compute-time input: a share of the period, or a run, bench or load result's
//! distribution, as cost points per buffer size.

use crate::common::stats::Summary;
use crate::dsp::plugin_cost::{BenchConfig, BenchResult};
use crate::error::{Error, Result};
use crate::measure::loadtest::{LoadConfig, LoadResults};
use crate::measure::run::RunConfig;
use crate::measure::run::RunResults;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// One point of a compute time distribution.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CostPoint {
    pub probability: f64,
    pub ns: f64,
}

/// A distribution measured at one buffer size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BufferCost {
    pub frames: u32,
    pub points: Vec<CostPoint>,
}

/// The compute time of one cycle, per buffer size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "model", rename_all = "kebab-case")]
pub enum Compute {
    /// A fixed share of every period (`--load-pct`).
    LoadPct { pct: f64 },
    /// The same time whatever the buffer size.
    Fixed { ns: f64 },
    /// Distributions measured at some buffer sizes; another size is scaled per frame from
    /// the nearest (ratio) one.
    PerFrame { measured: Vec<BufferCost> },
}

impl Compute {
    /// The distribution at `frames` frames (period `period_ns`).
    pub fn at(&self, frames: u32, period_ns: f64) -> Vec<CostPoint> {
        match self {
            Compute::LoadPct { pct } => vec![CostPoint {
                probability: 1.0,
                ns: pct / 100.0 * period_ns,
            }],
            Compute::Fixed { ns } => vec![CostPoint {
                probability: 1.0,
                ns: *ns,
            }],
            Compute::PerFrame { measured } => {
                let ratio = |m: &BufferCost| (m.frames as f64 / frames as f64).ln().abs();
                let Some(m) = measured.iter().min_by(|a, b| ratio(a).total_cmp(&ratio(b))) else {
                    return vec![CostPoint {
                        probability: 1.0,
                        ns: 0.0,
                    }];
                };
                let scale = frames as f64 / m.frames as f64;
                m.points
                    .iter()
                    .map(|p| CostPoint {
                        probability: p.probability,
                        ns: p.ns * scale,
                    })
                    .collect()
            }
        }
    }
}

/// A compute time read from a result file, with the rate it was measured at.
#[derive(Debug, Clone, PartialEq)]
pub struct CostInput {
    pub compute: Compute,
    pub rate: Option<u32>,
    pub description: String,
    /// The CPU a run's driver thread was pinned to: the wake-up latency the audio thread
    /// meets is that CPU's, not the pool of every CPU measured.
    pub engine_cpu: Option<usize>,
}

/// Sub-points each percentile band is spread over.
const BAND_STEPS: usize = 8;

/// A distribution known by percentiles: each band's probability spread evenly between its
/// lower and upper percentile (`first_lo`, when known, the lower end of the first band,
/// else it is a point), like a latency bucket over its width. Still on the conservative
/// side for tails that thin out within a band; placing each band at its upper end instead
/// put a run's top 0.01 % at its maximum and over-predicted short buffers twofold (§3).
fn bands(first_lo: Option<f64>, quantiles: &[(f64, f64)]) -> Vec<CostPoint> {
    let mut out = Vec::new();
    let mut lo = first_lo;
    for &(probability, hi) in quantiles {
        let from = lo.unwrap_or(hi).min(hi);
        if hi > from {
            let w = (hi - from) / BAND_STEPS as f64;
            out.extend((0..BAND_STEPS).map(|k| CostPoint {
                probability: probability / BAND_STEPS as f64,
                ns: from + (k as f64 + 0.5) * w,
            }));
        } else {
            out.push(CostPoint {
                probability,
                ns: hi,
            });
        }
        lo = Some(hi);
    }
    out
}

fn summary_points(s: &Summary) -> Vec<CostPoint> {
    bands(
        Some(s.min as f64),
        &[
            (0.5, s.p50 as f64),
            (0.4, s.p90 as f64),
            (0.09, s.p99 as f64),
            (0.009, s.p99_9 as f64),
            (0.0009, s.p99_99 as f64),
            (0.000099, s.p99_9999 as f64),
            (0.000001, s.max as f64),
        ],
    )
}

pub(super) fn cost_mean(points: &[CostPoint]) -> f64 {
    points.iter().map(|p| p.probability * p.ns).sum()
}

pub(super) fn cost_max(points: &[CostPoint]) -> f64 {
    points
        .iter()
        .filter(|p| p.probability > 0.0)
        .map(|p| p.ns)
        .fold(0.0, f64::max)
}

fn ms(ns: f64) -> String {
    format!("{:.3} ms", ns / 1e6)
}

impl CostInput {
    pub fn load_pct(pct: f64) -> Self {
        CostInput {
            compute: Compute::LoadPct { pct },
            rate: None,
            description: format!("{pct} % of each period (--load-pct)"),
            engine_cpu: None,
        }
    }

    /// A run's compute time at its buffer size: the critical thread's CPU time per cycle,
    /// without the interference its wall time (end − wake) also holds. The interference is
    /// the host's and other tasks' holds, which the latency input already carries as late
    /// wake-ups: adding them again as compute counted each hold twice, and the run's rare
    /// 10–50 ms holds, spread over its top percentile bands, tripled the prediction at 32
    /// frames on this project's VM (docs/methods.md §3). The CPU time itself holds the host's
    /// holds too (on KVM a descheduled vCPU's time is charged to the running thread), so the
    /// compute is the CPU time less the host stall judged in each cycle (`crit_compute_ns`);
    /// files before it keep the CPU time, files without either the wall time.
    pub fn from_run(path: &Path, cfg: &RunConfig, r: &RunResults) -> Result<Self> {
        if r.wall_ns.count == 0 {
            return Err(Error::input(path, "the run processed no cycle"));
        }
        let (s, what) = if r.crit_compute_ns.count > 0 && r.crit_compute_ns.max > 0 {
            (&r.crit_compute_ns, "compute CPU time without host stalls")
        } else if r.crit_cpu_ns.count > 0 && r.crit_cpu_ns.max > 0 {
            (&r.crit_cpu_ns, "compute CPU time")
        } else {
            (&r.wall_ns, "compute wall time")
        };
        let points = summary_points(s);
        let engine_cpu = r.threads.first().and_then(|t| t.cpu);
        Ok(CostInput {
            description: format!(
                "run {}: {what} at {} frames, mean {}, p99 {}, max {}, scaled per frame{}",
                path.display(),
                cfg.buffer_frames,
                ms(s.mean),
                ms(s.p99 as f64),
                ms(s.max as f64),
                engine_cpu
                    .map(|c| format!("; its driver thread ran on CPU {c}"))
                    .unwrap_or_default()
            ),
            engine_cpu,
            compute: Compute::PerFrame {
                measured: vec![BufferCost {
                    frames: cfg.buffer_frames,
                    points,
                }],
            },
            rate: Some(cfg.rate),
        })
    }

    /// A bench's per-block distribution: one block through the benched chain, each plugin
    /// at its measured instance count (`instances` picks one where several were measured).
    /// Plugins benched separately are added percentile by percentile, as if their slow
    /// blocks coincided: an upper bound for a chain of them.
    pub fn from_bench(
        path: &Path,
        cfg: &BenchConfig,
        results: &[BenchResult],
        instances: Option<u32>,
    ) -> Result<Self> {
        let mut groups: Vec<(String, Vec<&BenchResult>)> = Vec::new();
        for r in results {
            let name = if r.params.is_empty() {
                r.plugin.clone()
            } else {
                format!("{}({})", r.plugin, r.params)
            };
            match groups.iter_mut().find(|g| g.0 == name) {
                Some(g) => g.1.push(r),
                None => groups.push((name, vec![r])),
            }
        }
        if groups.is_empty() {
            return Err(Error::input(path, "the bench holds no result"));
        }
        const BANDS: [f64; 4] = [0.5, 0.49, 0.009, 0.001];
        let mut sum = [0.0f64; 4];
        let mut parts = Vec::new();
        let mut frames = None;
        for (name, rs) in &groups {
            let r = match instances {
                Some(k) => rs.iter().find(|r| r.instances == k).ok_or_else(|| {
                    Error::input(
                        path,
                        format!(
                            "{name} was not benched with {k} instances (it was with {})",
                            list(rs.iter().map(|r| r.instances))
                        ),
                    )
                })?,
                None if rs.len() == 1 => &rs[0],
                None => {
                    return Err(Error::usage(format!(
                        "{}: {name} was benched with {} instances: pick one with --instances K",
                        path.display(),
                        list(rs.iter().map(|r| r.instances))
                    )))
                }
            };
            if frames.is_some_and(|f| f != r.buffer_frames) {
                return Err(Error::input(
                    path,
                    "its results were measured at different buffer sizes",
                ));
            }
            frames = Some(r.buffer_frames);
            let quantiles = match &r.per_block {
                Some(b) => [b.p50_ns, b.p99_ns, b.p999_ns, b.max_ns].map(|v| v as f64),
                // Files from before blocks were timed one by one: the median cost only.
                None => [r.ns_per_frame * r.instances as f64 * r.buffer_frames as f64; 4],
            };
            for (s, q) in sum.iter_mut().zip(quantiles) {
                *s += q;
            }
            parts.push(format!("{name} ×{}", r.instances));
        }
        let frames = frames.unwrap_or(cfg.buffer_frames);
        let points = bands(None, &BANDS.into_iter().zip(sum).collect::<Vec<_>>());
        Ok(CostInput {
            engine_cpu: None,
            description: format!(
                "bench {}: one block of {} at {frames} frames, p50 {}, p99 {}, p99.9 {}, max {}, scaled per frame",
                path.display(),
                parts.join(" + "),
                ms(sum[0]),
                ms(sum[1]),
                ms(sum[2]),
                ms(sum[3])
            ),
            compute: Compute::PerFrame {
                measured: vec![BufferCost { frames, points }],
            },
            rate: Some(cfg.rate),
        })
    }

    /// A load grid's cells at their maximum: the passing trial's DSP load (p50, p99, max) as
    /// the compute time at each buffer size measured. `cell` (`TRACKS:PLUGIN`) picks the
    /// column where the grid has several.
    pub fn from_load(
        path: &Path,
        cfg: &LoadConfig,
        r: &LoadResults,
        cell: Option<&str>,
    ) -> Result<Self> {
        let mut combos: Vec<(u32, &str)> = Vec::new();
        for c in &r.cells {
            if !combos.contains(&(c.tracks, c.plugin.as_str())) {
                combos.push((c.tracks, c.plugin.as_str()));
            }
        }
        let names = || list(combos.iter().map(|(t, p)| format!("{t}:{p}")));
        let (tracks, plugin) = match cell {
            Some(want) => {
                let (t, p) = want
                    .split_once(':')
                    .and_then(|(t, p)| Some((t.trim().parse::<u32>().ok()?, p.trim())))
                    .ok_or_else(|| {
                        Error::usage(format!("--cell '{want}': expected TRACKS:PLUGIN, e.g. 1:reverb-heavy"))
                    })?;
                *combos.iter().find(|c| **c == (t, p)).ok_or_else(|| {
                    Error::input(path, format!("has no cell {want} (it has {})", names()))
                })?
            }
            None => match combos[..] {
                [] => return Err(Error::input(path, "the load grid holds no finished cell")),
                [one] => one,
                _ => {
                    return Err(Error::usage(format!(
                        "{}: the load grid has several columns ({}): pick one with --cell TRACKS:PLUGIN",
                        path.display(),
                        names()
                    )))
                }
            },
        };
        let mut measured = Vec::new();
        let mut parts = Vec::new();
        for c in r
            .cells
            .iter()
            .filter(|c| c.tracks == tracks && c.plugin == plugin)
        {
            let p = c.period_ns as f64 / 100.0;
            let l = &c.dsp_load_pct;
            measured.push(BufferCost {
                frames: c.buffer_frames,
                points: bands(
                    None,
                    &[(0.5, l.p50 * p), (0.49, l.p99 * p), (0.01, l.max * p)],
                ),
            });
            parts.push(format!("{} frames ×{}", c.buffer_frames, c.max_per_track));
        }
        Ok(CostInput {
            engine_cpu: None,
            description: format!(
                "load {}: {tracks} track(s) of {plugin} at the grid's maximum ({}), DSP load p50/p99/max; other sizes scaled per frame",
                path.display(),
                parts.join(", ")
            ),
            compute: Compute::PerFrame { measured },
            rate: Some(cfg.rate),
        })
    }
}

fn list<T: ToString>(it: impl Iterator<Item = T>) -> String {
    it.map(|x| x.to_string()).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_percentile_band_is_spread_between_its_two_ends() {
        let s = Summary {
            count: 1_000_000,
            min: 100,
            p50: 200,
            p90: 300,
            p99: 400,
            p99_9: 500,
            p99_99: 600,
            p99_9999: 1000,
            max: 5000,
            ..Summary::default()
        };
        let pts = summary_points(&s);
        let mass = |lo: f64, hi: f64| -> f64 {
            pts.iter()
                .filter(|p| p.ns > lo && p.ns <= hi)
                .map(|p| p.probability)
                .sum()
        };
        // The top 0.01 % lies between p99.99 and p99.9999, save 10⁻⁶ beyond: none of it at
        // the maximum, where the band's upper end used to put it.
        assert!((mass(600.0, 1000.0) - 0.000099).abs() < 1e-15);
        assert!((mass(1000.0, 5000.0) - 0.000001).abs() < 1e-15);
        assert!(pts.iter().all(|p| p.ns < 5000.0 && p.ns > 100.0));
        // Spread evenly: the band's mean is its middle.
        let mean = cost_mean(&pts);
        let expect = 0.5 * 150.0
            + 0.4 * 250.0
            + 0.09 * 350.0
            + 0.009 * 450.0
            + 0.0009 * 550.0
            + 0.000099 * 800.0
            + 0.000001 * 3000.0;
        assert!((mean - expect).abs() < 1e-9, "{mean} vs {expect}");
        // A band whose ends coincide, or whose lower end is unknown, is a point.
        let b = bands(None, &[(0.5, 10.0), (0.5, 10.0)]);
        assert_eq!(b.len(), 2);
    }

    #[test]
    fn per_frame_costs_scale_from_the_nearest_measured_size() {
        let m = Compute::PerFrame {
            measured: vec![
                BufferCost {
                    frames: 64,
                    points: vec![CostPoint {
                        probability: 1.0,
                        ns: 100.0,
                    }],
                },
                BufferCost {
                    frames: 512,
                    points: vec![CostPoint {
                        probability: 1.0,
                        ns: 400.0,
                    }],
                },
            ],
        };
        assert_eq!(m.at(128, 0.0)[0].ns, 200.0);
        assert_eq!(m.at(256, 0.0)[0].ns, 200.0);
        assert_eq!(m.at(1024, 0.0)[0].ns, 800.0);
        assert_eq!(m.at(16, 0.0)[0].ns, 25.0);
        let pct = Compute::LoadPct { pct: 25.0 }.at(64, 1e6);
        assert_eq!(pct[0].ns, 250_000.0);
        let s = Summary {
            count: 10,
            p50: 1,
            p90: 2,
            p99: 3,
            p99_9: 4,
            p99_99: 5,
            p99_9999: 6,
            max: 7,
            ..Summary::default()
        };
        let total: f64 = summary_points(&s).iter().map(|p| p.probability).sum();
        assert!((total - 1.0).abs() < 1e-12);
    }

    fn fixture_run() -> (RunConfig, RunResults) {
        let text = include_str!("../../../tests/fixtures/results/run.json");
        let v: serde_json::Value = serde_json::from_str(text).unwrap();
        (
            serde_json::from_value(v["config"].clone()).unwrap(),
            serde_json::from_value(v["results"].clone()).unwrap(),
        )
    }

    #[test]
    fn a_runs_cost_is_its_cpu_time_without_the_interference_the_latency_already_holds() {
        let (cfg, mut r) = fixture_run();
        // A 50 ms hold in one cycle's wall time: interference, not compute.
        r.wall_ns.max = 50_000_000;
        r.wall_ns.p99_9999 = 50_000_000;
        r.wall_ns.p99_99 = 40_000_000;
        let c = CostInput::from_run(Path::new("run.json"), &cfg, &r).unwrap();
        let at = c.compute.at(cfg.buffer_frames, 0.0);
        assert_eq!(
            cost_max(&at),
            r.crit_cpu_ns.max as f64,
            "{:?}",
            c.description
        );
        assert!((cost_mean(&at) - r.crit_cpu_ns.mean).abs() < 0.2 * r.crit_cpu_ns.mean);
        assert!(
            c.description.contains("compute CPU time"),
            "{}",
            c.description
        );
        // The CPU its driver thread was pinned to, for the latency that thread meets.
        assert_eq!(c.engine_cpu, r.threads[0].cpu);
        assert!(c.engine_cpu.is_some());
        // With the host stalls judged out of each cycle, that is the compute.
        let s = r.crit_cpu_ns;
        let half = |x: u64| x / 2;
        r.crit_compute_ns = Summary {
            min: half(s.min),
            mean: s.mean / 2.0,
            max: half(s.max),
            p50: half(s.p50),
            p90: half(s.p90),
            p99: half(s.p99),
            p99_9: half(s.p99_9),
            p99_99: half(s.p99_99),
            p99_9999: half(s.p99_9999),
            ..s
        };
        let c = CostInput::from_run(Path::new("run.json"), &cfg, &r).unwrap();
        let at = c.compute.at(cfg.buffer_frames, 0.0);
        assert_eq!(cost_max(&at), half(s.max) as f64);
        assert!(
            c.description.contains("without host stalls"),
            "{}",
            c.description
        );
        r.crit_compute_ns = Summary::default();
        // A file without the CPU time keeps the wall time; an unpinned run names no CPU.
        r.crit_cpu_ns = Summary::default();
        r.threads[0].cpu = None;
        let c = CostInput::from_run(Path::new("run.json"), &cfg, &r).unwrap();
        assert_eq!(cost_max(&c.compute.at(cfg.buffer_frames, 0.0)), 50e6);
        assert_eq!(c.engine_cpu, None);
    }
}
