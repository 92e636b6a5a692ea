//! The latency input: a latency result's histograms read as buckets of wake-up latency.

use crate::common::stats;
use crate::error::{Error, Result};
use crate::measure::latency::{CpuLatency, LatencyConfig, LatencyResult, LatencySource};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Latency values spread evenly over `[lo_ns, hi_ns)`; a point when `lo_ns == hi_ns`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    pub lo_ns: u64,
    pub hi_ns: u64,
    pub count: u64,
}

/// Wake-ups known only to lie in `[from_ns, max_ns]`: an imported histogram's overflows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Censored {
    pub from_ns: u64,
    pub max_ns: u64,
    pub count: u64,
}

/// One latency distribution as the model uses it: every CPU's samples pooled.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyData {
    pub buckets: Vec<Bucket>,
    pub censored: Vec<Censored>,
    /// Wake-ups recorded.
    pub samples: u64,
    /// CPU time the samples cover: per CPU (wake-ups + missed periods) × interval.
    pub observed_ns: f64,
    /// The measurement's interval I (cyclictest's -i).
    pub interval_ns: u64,
    /// CPUs measured in parallel, so that wall time = observed / cpus.
    pub cpus: usize,
    /// `latency --busy`: the holds its threads met while computing.
    pub busy: Option<BusyData>,
}

/// The holds a busy thread met, as the model uses them: every CPU's pooled.
#[derive(Debug, Clone, PartialEq)]
pub struct BusyData {
    /// Wall time spent computing, all CPUs: the exposure the holds are counted over.
    pub exposed_ns: f64,
    /// Hold lengths, spread evenly over each bucket.
    pub holds: Vec<Bucket>,
}

impl LatencyData {
    /// Values at `ns`, `count` times each, as points: synthetic distributions for tests and
    /// what-ifs.
    pub fn points(values: &[(u64, u64)], interval_ns: u64) -> Self {
        let samples = values.iter().map(|v| v.1).sum();
        LatencyData {
            buckets: values
                .iter()
                .map(|&(ns, count)| Bucket {
                    lo_ns: ns,
                    hi_ns: ns,
                    count,
                })
                .collect(),
            censored: Vec::new(),
            samples,
            observed_ns: samples as f64 * interval_ns as f64,
            interval_ns,
            cpus: 1,
            busy: None,
        }
    }
}

/// What the result says about one latency input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LatencyInfo {
    pub label: String,
    pub file: String,
    /// `measured`, `imported` or `simulated`.
    pub source: String,
    /// Stress presets it ran under.
    pub stress: Vec<String>,
    pub cpus: Vec<usize>,
    pub samples: u64,
    pub interval_ns: u64,
    /// CPU time covered (wake-ups + missed periods, × interval, summed over CPUs).
    pub observed_ns: u64,
    pub max_ns: u64,
    /// Wake-ups above the histogram's bound whose values the file does not hold (imported
    /// cyclictest data): they are taken at the recorded maximum.
    pub censored: u64,
    pub censored_above_ns: Option<u64>,
    /// `latency --busy`: what its threads met while computing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy: Option<BusyInfo>,
}

/// What a `latency --busy` input's threads met while computing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BusyInfo {
    /// The share of each interval computed after the wake-up, %.
    pub share_pct: f64,
    /// Wall time spent computing, all CPUs.
    pub exposed_ns: u64,
    /// Computes held by gaps of at least `gap_min_ns` between two clock reads.
    pub holds: u64,
    pub gap_min_ns: u64,
    /// The longest held total of a compute.
    pub max_ns: u64,
}

/// A latency input: the distribution and what to say about it.
#[derive(Debug, Clone)]
pub struct LatencyInput {
    pub info: LatencyInfo,
    pub data: LatencyData,
}

impl LatencyInput {
    /// The inputs a latency result holds: itself, preceded by its idle baseline when it has
    /// one. `cpu` keeps one CPU's samples; `interval_ns` stands in for an interval the file
    /// does not record.
    pub fn from_result(
        path: &Path,
        label: &str,
        cfg: &LatencyConfig,
        r: &LatencyResult,
        cpu: Option<usize>,
        interval_ns: Option<u64>,
    ) -> Result<Vec<LatencyInput>> {
        let mut out = Vec::new();
        let stress = cfg.stress.clone();
        if let Some(b) = &r.baseline {
            out.push(Self::one(
                path,
                &format!("{label} idle"),
                cfg,
                b,
                cpu,
                interval_ns,
                Vec::new(),
            )?);
            let tag = if stress.is_empty() {
                "stressed".to_string()
            } else {
                stress.join(",")
            };
            out.push(Self::one(
                path,
                &format!("{label} {tag}"),
                cfg,
                r,
                cpu,
                interval_ns,
                stress,
            )?);
        } else {
            out.push(Self::one(path, label, cfg, r, cpu, interval_ns, stress)?);
        }
        Ok(out)
    }

    fn one(
        path: &Path,
        label: &str,
        cfg: &LatencyConfig,
        r: &LatencyResult,
        cpu: Option<usize>,
        interval_ns: Option<u64>,
        stress: Vec<String>,
    ) -> Result<LatencyInput> {
        let interval = cfg.interval_ns.or(interval_ns).ok_or_else(|| {
            Error::input(
                path,
                "the file does not record the measurement's interval (cyclictest -i): give it \
                 with --interval",
            )
        })?;
        if interval == 0 {
            return Err(Error::input(path, "the recorded interval is 0"));
        }
        let cpus: Vec<_> = r
            .per_cpu
            .iter()
            .filter(|c| cpu.is_none_or(|want| c.cpu == want))
            .collect();
        if cpus.is_empty() {
            let have: Vec<String> = r.per_cpu.iter().map(|c| c.cpu.to_string()).collect();
            return Err(Error::input(
                path,
                match cpu {
                    Some(c) if !have.is_empty() => {
                        format!("has no CPU {c} (it has {})", have.join(", "))
                    }
                    _ => "holds no per-CPU latency data".to_string(),
                },
            ));
        }
        // The µs histogram's bound: a wake-up is in bucket lat/1000 when that is below it.
        let from = cfg.hist_max_ns / 1_000 * 1_000;
        let hdr = stats::new_ns_histogram();
        let mut data = LatencyData {
            buckets: Vec::new(),
            censored: Vec::new(),
            samples: 0,
            observed_ns: 0.0,
            interval_ns: interval,
            cpus: cpus.len(),
            busy: None,
        };
        let mut max_ns = 0;
        let (busy_data, busy_info) = busy_of(cfg, &cpus).unzip();
        data.busy = busy_data;
        for c in cpus {
            let count = c.stats.summary.count;
            if count == 0 {
                continue;
            }
            let binned: u64 = c.histogram_us.iter().map(|b| b.1).sum();
            if binned + c.stats.overflows != count {
                return Err(Error::input(
                    path,
                    format!(
                        "CPU {} has no usable histogram ({} of its {count} wake-ups are in it): \
                         predict needs the 1 µs histogram of `xrunlab latency` or of cyclictest \
                         -h (an imported cyclictest --json with ns resolution keeps none)",
                        c.cpu,
                        binned + c.stats.overflows
                    ),
                ));
            }
            data.buckets
                .extend(c.histogram_us.iter().map(|&(us, n)| Bucket {
                    lo_ns: us * 1_000,
                    hi_ns: (us + 1) * 1_000,
                    count: n,
                }));
            let mut tail = 0;
            for &(v, n) in &c.overflow_ns {
                data.buckets.push(Bucket {
                    lo_ns: hdr.lowest_equivalent(v).max(from),
                    hi_ns: v + 1,
                    count: n,
                });
                tail += n;
            }
            let unknown = c.stats.overflows.saturating_sub(tail);
            if unknown > 0 {
                data.censored.push(Censored {
                    from_ns: from,
                    max_ns: c.stats.summary.max.max(from),
                    count: unknown,
                });
            }
            data.samples += count;
            data.observed_ns += match c.stats.missed_periods {
                Some(m) => (count + m) as f64 * interval as f64,
                // cyclictest skips late periods silently: its run length, when recorded, is
                // the better measure of the time covered.
                None => (count as f64 * interval as f64).max(cfg.duration_ns.unwrap_or(0) as f64),
            };
            max_ns = max_ns.max(c.stats.summary.max);
        }
        if data.samples == 0 {
            return Err(Error::input(path, "holds no wake-ups"));
        }
        let censored: u64 = data.censored.iter().map(|c| c.count).sum();
        let source = match cfg.source {
            LatencySource::Measured => "measured",
            LatencySource::Imported { .. } => "imported",
            LatencySource::Simulated { .. } => "simulated",
        };
        Ok(LatencyInput {
            info: LatencyInfo {
                label: label.to_string(),
                file: path.display().to_string(),
                source: source.into(),
                stress,
                cpus: r
                    .per_cpu
                    .iter()
                    .map(|c| c.cpu)
                    .filter(|&c| cpu.is_none_or(|w| w == c))
                    .collect(),
                samples: data.samples,
                interval_ns: interval,
                observed_ns: data.observed_ns.round() as u64,
                max_ns,
                censored,
                censored_above_ns: (censored > 0).then_some(from),
                busy: busy_info,
            },
            data,
        })
    }
}

/// Inputs that share a label pooled into one, in the order their labels first appear: one
/// condition measured in slices (between the runs it predicts, so that both meet the same
/// drift of the machine) reads as one measurement of their combined length. Slices of one
/// condition agree on the interval, the source, the stress and whether they computed; a mismatch is an
/// error rather than a distribution of two conditions.
pub fn pool_by_label(inputs: Vec<LatencyInput>) -> Result<Vec<LatencyInput>> {
    let mut out: Vec<LatencyInput> = Vec::new();
    for i in inputs {
        match out.iter_mut().find(|o| o.info.label == i.info.label) {
            Some(o) => o.pool(i)?,
            None => out.push(i),
        }
    }
    Ok(out)
}

impl LatencyInput {
    fn pool(&mut self, o: LatencyInput) -> Result<()> {
        let (a, b) = (&self.info, &o.info);
        let refuse = |what: String| {
            Err(Error::input(
                Path::new(&b.file),
                format!(
                    "is pooled with {} under the label '{}' but {what}: give each condition its own label",
                    a.file, a.label
                ),
            ))
        };
        if a.interval_ns != b.interval_ns {
            return refuse(format!(
                "was measured every {} ns, not {} ns",
                b.interval_ns, a.interval_ns
            ));
        }
        if a.source != b.source {
            return refuse(format!("is {}, not {}", b.source, a.source));
        }
        if a.stress != b.stress {
            return refuse(format!(
                "ran under stress [{}], not [{}]",
                b.stress.join(","),
                a.stress.join(",")
            ));
        }
        let share = |b: &Option<BusyInfo>| b.as_ref().map(|b| (b.share_pct, b.gap_min_ns));
        if share(&a.busy) != share(&b.busy) {
            let say = |b: &Option<BusyInfo>| {
                b.as_ref()
                    .map_or("no --busy".into(), |b| format!("--busy {}", b.share_pct))
            };
            return refuse(format!(
                "was measured with {}, not {}",
                say(&b.busy),
                say(&a.busy)
            ));
        }
        let file = format!("{}, {}", a.file, b.file);
        self.absorb(o);
        self.info.file = file;
        Ok(())
    }

    /// Add `o`'s samples to this input, as one longer measurement: its buckets, censored
    /// tail, covered time, CPUs and held computes. The caller has judged the two to be of
    /// one condition; label and file stay this input's. Held computes survive only when
    /// both computed the same share (else the input loses the term rather than half of it).
    pub fn absorb(&mut self, o: LatencyInput) {
        let (d, e) = (&mut self.data, o.data);
        // Wall time is what the minimum-length advice divides by: slices add their walls.
        let wall = d.observed_ns / d.cpus.max(1) as f64 + e.observed_ns / e.cpus.max(1) as f64;
        d.buckets.extend(e.buckets);
        d.censored.extend(e.censored);
        d.samples += e.samples;
        d.observed_ns += e.observed_ns;
        d.cpus = ((d.observed_ns / wall).round() as usize).max(1);
        let (a, b) = (&mut self.info, o.info);
        let same =
            |x: &BusyInfo, y: &BusyInfo| x.share_pct == y.share_pct && x.gap_min_ns == y.gap_min_ns;
        match (d.busy.take(), e.busy, a.busy.take(), b.busy) {
            (Some(mut x), Some(y), Some(xi), Some(yi)) if same(&xi, &yi) => {
                x.exposed_ns += y.exposed_ns;
                x.holds.extend(y.holds);
                d.busy = Some(x);
                a.busy = Some(BusyInfo {
                    exposed_ns: xi.exposed_ns + yi.exposed_ns,
                    holds: xi.holds + yi.holds,
                    max_ns: xi.max_ns.max(yi.max_ns),
                    ..xi
                });
            }
            _ => {}
        }
        for c in b.cpus {
            if !a.cpus.contains(&c) {
                a.cpus.push(c);
            }
        }
        a.samples += b.samples;
        a.observed_ns += b.observed_ns;
        a.max_ns = a.max_ns.max(b.max_ns);
        a.censored += b.censored;
        a.censored_above_ns = a.censored_above_ns.or(b.censored_above_ns);
    }
}

/// The holds the CPUs' threads met while computing (`latency --busy`), pooled. Every CPU of
/// such a measurement computed; one without a record (an edited file) leaves the input
/// without the term rather than with part of it.
fn busy_of(cfg: &LatencyConfig, cpus: &[&CpuLatency]) -> Option<(BusyData, BusyInfo)> {
    let share_pct = cfg.busy_pct?;
    let mut d = BusyData {
        exposed_ns: 0.0,
        holds: Vec::new(),
    };
    let mut info = BusyInfo {
        share_pct,
        exposed_ns: 0,
        holds: 0,
        gap_min_ns: 0,
        max_ns: 0,
    };
    for c in cpus {
        let b = c.busy.as_ref()?;
        d.exposed_ns += b.busy_ns as f64;
        // Each entry holds the holds above the one before it.
        let mut lo = b.gap_min_ns;
        for &(hi, n) in &b.holds_ns {
            d.holds.push(Bucket {
                lo_ns: lo.min(hi),
                hi_ns: hi,
                count: n,
            });
            lo = hi;
        }
        info.exposed_ns += b.busy_ns;
        info.holds += b.holds;
        info.gap_min_ns = b.gap_min_ns;
        info.max_ns = info.max_ns.max(b.max_ns);
    }
    (d.exposed_ns > 0.0).then_some((d, info))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::sim::LatencyModel;
    use crate::measure::latency::{self, LatencyConfig};

    #[test]
    fn a_busy_measurements_holds_become_buckets_over_their_compute_time() {
        let cfg = LatencyConfig {
            duration_ns: None,
            loops: Some(1000),
            cpus: vec![0],
            interval_ns: Some(1_000_000),
            busy_pct: Some(40.0),
            ..LatencyConfig::default()
        };
        let mut r = latency::simulate(&cfg, &LatencyModel::Constant { ns: 20_000 }, 1).unwrap();
        let b = r.per_cpu[0].busy.as_mut().unwrap();
        (b.holds, b.holds_ns) = (5, vec![(10_199, 3), (2_000_000, 2)]);
        let path = Path::new("lat.json");
        let read = |r: &LatencyResult| {
            LatencyInput::from_result(path, "l", &cfg, r, None, None)
                .unwrap()
                .remove(0)
        };
        let input = read(&r);
        let d = input.data.busy.expect("a --busy result has the term");
        assert_eq!(d.exposed_ns, 1000.0 * 400_000.0);
        let spans: Vec<_> = d
            .holds
            .iter()
            .map(|h| (h.lo_ns, h.hi_ns, h.count))
            .collect();
        assert_eq!(spans, [(10_000, 10_199, 3), (10_199, 2_000_000, 2)]);
        let info = input.info.busy.unwrap();
        assert_eq!(
            (info.share_pct, info.holds, info.exposed_ns),
            (40.0, 5, 400_000_000)
        );
        // A CPU without its record: no term at all rather than part of one.
        r.per_cpu[0].busy = None;
        let input = read(&r);
        assert_eq!((input.data.busy, input.info.busy), (None, None));
    }
}
