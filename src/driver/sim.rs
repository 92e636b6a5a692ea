//! The `sim` driver: the virtual device's semantics on a simulated timeline — no sleeping,
//! deterministic for a seed, as fast as the handler allows.
//!
//! Per processed period k: `wake = release + L + late(k)` where `release =
//! max(t_ideal(k), end(k−1))`, L is drawn from the latency model (one draw per processed
//! cycle, so the stream depends only on the seed) and applied only when the driver thread
//! would have slept (release == t_ideal; catching up needs no wake-up), and `late(k)` is an
//! injected late wake-up. Injected long compute / preemption reach the handler through
//! `TimeBase::Simulated`. Events aimed at a period that ends up skipped are not applied.

use super::device::PeriodBuffers;
use super::signal::{InputSource, OutputSink, Rng};
use super::{CycleHandler, DeviceClock, DeviceParams, DriverStats};
use super::{StopReason, TimeBase};
use crate::error::{Error, Result};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// Where simulated wake-up latencies come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "model", rename_all = "kebab-case")]
pub enum LatencyModel {
    Constant {
        ns: u64,
    },
    /// Normal, truncated at 0.
    Normal {
        mean_ns: u64,
        sd_ns: u64,
    },
    /// `base + scale·(U^(−1/alpha) − 1)`: a Pareto tail, as hypervisor stalls have.
    HeavyTail {
        base_ns: u64,
        scale_ns: u64,
        alpha: f64,
    },
    /// Drawn from a recorded distribution of (value_ns, count) pairs.
    Empirical {
        source: String,
        buckets: Vec<(u64, u64)>,
    },
}

impl Default for LatencyModel {
    fn default() -> Self {
        LatencyModel::Constant { ns: 0 }
    }
}

impl LatencyModel {
    /// `const:20us`, `normal:MEAN,SD`, `heavy:BASE,SCALE,ALPHA`, or `file:PATH` (see
    /// [`load_latencies`]).
    pub fn parse(s: &str) -> Result<Self> {
        let bad = || {
            Error::usage(format!(
                "bad --sim-latency '{s}': use const:20us, normal:20us,5us, heavy:10us,5us,2.5 or file:PATH"
            ))
        };
        let (kind, arg) = s.split_once(':').ok_or_else(bad)?;
        let parts: Vec<&str> = arg.split(',').map(str::trim).collect();
        let d = crate::units::parse_duration_ns;
        Ok(match (kind, parts.as_slice()) {
            ("const" | "constant", [v]) => LatencyModel::Constant { ns: d(v)? },
            ("normal", [m, sd]) => LatencyModel::Normal {
                mean_ns: d(m)?,
                sd_ns: d(sd)?,
            },
            ("heavy" | "pareto", [b, sc, a]) => {
                let alpha: f64 = a.parse().map_err(|_| bad())?;
                if !(alpha > 0.0 && alpha.is_finite()) {
                    return Err(bad());
                }
                LatencyModel::HeavyTail {
                    base_ns: d(b)?,
                    scale_ns: d(sc)?,
                    alpha,
                }
            }
            ("file", _) => load_latencies(Path::new(arg))?,
            _ => return Err(bad()),
        })
    }
}

/// Load a recorded latency distribution. Until the `latency` result type lands, accepted
/// forms are: a JSON array of ns values; a JSON array of `[value_ns, count]` pairs; a JSON
/// object with `values` (ns) or `histogram` (pairs or `{value_ns, count}` objects); a text
/// or CSV file of `value_ns` or `value_ns,count` lines; or cyclictest's `-h` histogram
/// (whitespace-separated `usec count...` lines, `#` comments), whose µs are converted.
pub fn load_latencies(path: &Path) -> Result<LatencyModel> {
    let text = crate::common::input::read_capped(
        path,
        crate::common::input::CYCLICTEST_MAX_BYTES,
        "latency distribution",
    )?;
    let mut buckets: Vec<(u64, u64)> = Vec::new();
    let t = text.trim_start();
    if t.starts_with('[') || t.starts_with('{') {
        let v: serde_json::Value =
            serde_json::from_str(t).map_err(|e| Error::input(path, format!("not JSON: {e}")))?;
        let list = match &v {
            serde_json::Value::Array(a) => a.clone(),
            serde_json::Value::Object(o) => o
                .get("values")
                .or_else(|| o.get("histogram"))
                .and_then(|x| x.as_array().cloned())
                .ok_or_else(|| Error::input(path, "expected a 'values' or 'histogram' array"))?,
            _ => return Err(Error::input(path, "expected an array or an object")),
        };
        for item in list {
            let pair = match &item {
                serde_json::Value::Number(n) => n.as_u64().map(|v| (v, 1)),
                serde_json::Value::Array(p) if p.len() == 2 => p[0].as_u64().zip(p[1].as_u64()),
                serde_json::Value::Object(o) => o
                    .get("value_ns")
                    .and_then(|x| x.as_u64())
                    .zip(o.get("count").and_then(|x| x.as_u64())),
                _ => None,
            };
            buckets.push(pair.ok_or_else(|| {
                Error::input(
                    path,
                    format!("bad latency entry {item}: expected ns or [ns, count]"),
                )
            })?);
        }
    } else {
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if line.contains(',') {
                let mut it = line.split(',').map(str::trim);
                let v = it.next().and_then(|x| x.parse::<u64>().ok());
                let c = it.next().map(|x| x.parse::<u64>().ok()).unwrap_or(Some(1));
                match (v, c) {
                    (Some(v), Some(c)) => buckets.push((v, c)),
                    // A header line such as "value_ns,count".
                    _ if buckets.is_empty() => continue,
                    _ => return Err(Error::input(path, format!("bad line '{line}'"))),
                }
            } else {
                let nums: Vec<u64> = line
                    .split_whitespace()
                    .map(|x| x.parse::<u64>())
                    .collect::<std::result::Result<_, _>>()
                    .map_err(|_| Error::input(path, format!("bad line '{line}'")))?;
                match nums.as_slice() {
                    [v] => buckets.push((*v, 1)),
                    // cyclictest -h: microsecond bucket, then one count per thread.
                    [us, counts @ ..] => buckets.push((us * 1000, counts.iter().sum())),
                    [] => {}
                }
            }
        }
    }
    buckets.retain(|&(_, c)| c > 0);
    if buckets.is_empty() {
        return Err(Error::input(path, "no latency samples"));
    }
    Ok(LatencyModel::Empirical {
        source: path.display().to_string(),
        buckets,
    })
}

/// A sampler prepared from a model: allocation happens here, not per draw.
pub struct Sampler {
    model: LatencyModel,
    cdf: Vec<u64>,
    rng: Rng,
}

impl Sampler {
    pub fn new(model: &LatencyModel, seed: u64) -> Self {
        let cdf = match model {
            LatencyModel::Empirical { buckets, .. } => buckets
                .iter()
                .scan(0u64, |acc, &(_, c)| {
                    *acc += c;
                    Some(*acc)
                })
                .collect(),
            _ => Vec::new(),
        };
        Sampler {
            model: model.clone(),
            cdf,
            rng: Rng::new(seed),
        }
    }

    pub fn draw(&mut self) -> u64 {
        match &self.model {
            LatencyModel::Constant { ns } => *ns,
            LatencyModel::Normal { mean_ns, sd_ns } => {
                let v = *mean_ns as f64 + *sd_ns as f64 * self.rng.next_normal();
                v.max(0.0).round() as u64
            }
            LatencyModel::HeavyTail {
                base_ns,
                scale_ns,
                alpha,
            } => {
                let u = 1.0 - self.rng.next_f64(); // (0, 1]
                let tail = *scale_ns as f64 * (u.powf(-1.0 / alpha) - 1.0);
                base_ns + tail.min(1e12).round() as u64
            }
            LatencyModel::Empirical { buckets, .. } => {
                let total = *self.cdf.last().unwrap_or(&1);
                let x = self.rng.next_u64() % total;
                let i = self.cdf.partition_point(|&c| c <= x);
                buckets[i.min(buckets.len() - 1)].0
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SimEventKind {
    /// The driver thread wakes this much later.
    LateWakeup,
    /// The critical path needs this much more CPU time.
    LongCompute,
    /// The critical path is preempted for this long (wall time without CPU).
    Preemption,
    /// Engine worker 1 stalls this long as the cycle starts, before taking a track (a core
    /// the host took away); needs `--sim-compute measured` and two engine threads.
    Stall,
}

/// An injected event at device period `cycle`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SimEvent {
    pub kind: SimEventKind,
    pub cycle: u64,
    pub ns: u64,
}

impl std::str::FromStr for SimEvent {
    type Err = Error;
    /// `late:CYCLE:DURATION`, `compute:CYCLE:DURATION`, `preempt:CYCLE:DURATION`,
    /// `stall:CYCLE:DURATION`.
    fn from_str(s: &str) -> Result<Self> {
        let bad = || {
            Error::usage(format!(
                "bad --inject '{s}': use late:CYCLE:DURATION, compute:CYCLE:DURATION, preempt:CYCLE:DURATION or stall:CYCLE:DURATION"
            ))
        };
        let p: Vec<&str> = s.split(':').map(str::trim).collect();
        let [k, c, d] = p.as_slice() else {
            return Err(bad());
        };
        let kind = match *k {
            "late" | "late-wakeup" => SimEventKind::LateWakeup,
            "compute" | "long-compute" => SimEventKind::LongCompute,
            "preempt" | "preemption" => SimEventKind::Preemption,
            "stall" => SimEventKind::Stall,
            _ => return Err(bad()),
        };
        Ok(SimEvent {
            kind,
            cycle: c.parse().map_err(|_| bad())?,
            ns: crate::units::parse_duration_ns(d)?,
        })
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SimConfig {
    pub latency: LatencyModel,
    #[serde(default)]
    pub events: Vec<SimEvent>,
}

/// Simulated timeline origin: non-zero so that 0 can mean "none" in records.
pub const SIM_T0_NS: u64 = 1_000_000_000;

pub struct SimDriver {
    clock: DeviceClock,
    sampler: Sampler,
    events: Vec<SimEvent>,
    periods_total: u64,
    buffers: PeriodBuffers,
}

impl SimDriver {
    pub fn new(params: DeviceParams, cfg: &SimConfig, seed: u64, periods_total: u64) -> Self {
        let mut events = cfg.events.clone();
        events.sort_by_key(|e| e.cycle);
        SimDriver {
            clock: DeviceClock::new(params, SIM_T0_NS),
            sampler: Sampler::new(&cfg.latency, seed),
            events,
            periods_total,
            buffers: PeriodBuffers::new(params.frames),
        }
    }

    pub fn clock(&self) -> &DeviceClock {
        &self.clock
    }
}

impl super::LoopDriver for SimDriver {
    fn kind(&self) -> super::DriverKind {
        super::DriverKind::Sim
    }

    fn params(&self) -> DeviceParams {
        self.clock.params()
    }

    fn set_periods_total(&mut self, periods_total: u64) {
        self.periods_total = periods_total;
    }

    fn run(
        &mut self,
        h: &mut dyn CycleHandler,
        stop: &AtomicBool,
        source: &mut dyn InputSource,
        sink: &mut dyn OutputSink,
    ) -> (StopReason, DriverStats) {
        let mut ev = 0usize;
        let reason = loop {
            let n = self.clock.next_cycle();
            if n.cycle >= self.periods_total {
                break StopReason::Complete;
            }
            if stop.load(Ordering::Relaxed) || crate::rt::interrupt::requested() {
                break StopReason::Stopped;
            }
            while ev < self.events.len() && self.events[ev].cycle < n.cycle {
                ev += 1;
            }
            let (mut late, mut cpu, mut pre, mut stall) = (0, 0, 0, 0);
            while ev < self.events.len() && self.events[ev].cycle == n.cycle {
                let e = self.events[ev];
                match e.kind {
                    SimEventKind::LateWakeup => late += e.ns,
                    SimEventKind::LongCompute => cpu += e.ns,
                    SimEventKind::Preemption => pre += e.ns,
                    SimEventKind::Stall => stall += e.ns,
                }
                ev += 1;
            }
            let drawn = self.sampler.draw();
            let slept = n.release_ns == n.t_ideal_ns;
            let wake = n.release_ns + if slept { drawn } else { 0 } + late;
            let timing = n.timing(
                wake,
                TimeBase::Simulated {
                    extra_cpu_ns: cpu,
                    extra_interference_ns: pre,
                    stall_worker_ns: stall,
                },
            );
            self.buffers
                .process(&mut self.clock, &timing, h, source, sink);
        };
        (reason, self.clock.stats(self.periods_total, sink))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_parse_and_draw_deterministically() {
        let m = LatencyModel::parse("normal:20us,5us").unwrap();
        let (mut a, mut b) = (Sampler::new(&m, 3), Sampler::new(&m, 3));
        for _ in 0..100 {
            assert_eq!(a.draw(), b.draw());
        }
        let m = LatencyModel::parse("heavy:10us,2us,1.5").unwrap();
        let mut s = Sampler::new(&m, 1);
        let v: Vec<u64> = (0..10000).map(|_| s.draw()).collect();
        assert!(v.iter().all(|&x| x >= 10_000));
        assert!(
            *v.iter().max().unwrap() > 100_000,
            "the tail should reach far"
        );
        assert_eq!(
            Sampler::new(&LatencyModel::parse("const:7us").unwrap(), 0).draw(),
            7000
        );
        for bad in ["const", "normal:1us", "heavy:1us,1us,-1", "x:1us"] {
            assert!(LatencyModel::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn latency_files_in_every_accepted_form() {
        let d = tempfile::tempdir().unwrap();
        let cases = [
            (
                "a.json",
                "[100, 200, 200]",
                vec![(100, 1), (200, 1), (200, 1)],
            ),
            ("b.json", "[[100, 3], [5000, 1]]", vec![(100, 3), (5000, 1)]),
            (
                "c.json",
                r#"{"histogram": [{"value_ns": 7, "count": 2}]}"#,
                vec![(7, 2)],
            ),
            (
                "d.csv",
                "value_ns,count\n10,2\n20,0\n30,1\n",
                vec![(10, 2), (30, 1)],
            ),
            (
                "e.txt",
                "# cyclictest\n000003 000010 000002\n000004 000001 000000\n",
                vec![(3000, 12), (4000, 1)],
            ),
        ];
        for (name, text, want) in cases {
            let p = d.path().join(name);
            std::fs::write(&p, text).unwrap();
            match load_latencies(&p).unwrap() {
                LatencyModel::Empirical { buckets, .. } => assert_eq!(buckets, want, "{name}"),
                m => panic!("{m:?}"),
            }
        }
        let p = d.path().join("bad.json");
        std::fs::write(&p, "[\"x\"]").unwrap();
        assert_eq!(load_latencies(&p).unwrap_err().exit_code(), 2);
        let m = LatencyModel::Empirical {
            source: String::new(),
            buckets: vec![(5, 1), (9, 3)],
        };
        let mut s = Sampler::new(&m, 1);
        let nines = (0..4000).filter(|_| s.draw() == 9).count();
        assert!((2700..3300).contains(&nines), "{nines}");
    }

    #[test]
    fn events_parse() {
        let e: SimEvent = "late:10:2ms".parse().unwrap();
        assert_eq!(
            e,
            SimEvent {
                kind: SimEventKind::LateWakeup,
                cycle: 10,
                ns: 2_000_000
            }
        );
        assert!("late:x:2ms".parse::<SimEvent>().is_err());
        assert!("boom:1:2ms".parse::<SimEvent>().is_err());
    }
}
