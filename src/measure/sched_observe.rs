//! What `xrunlab sched` takes from every cycle record of a row (Cucinotta et al.'s Tables 1/3 and
//! Figs. 1–5): driver period statistics with the standard deviation, driver end time extremes
//! and CDF, per-client end times, the controller's Set Q and Predicted Q per cycle, and the
//! budget split among the engine threads.
//!
//! `RowObserver` is pure (records in, numbers out): the non-RT helper of `measure::sched`
//! feeds it from the collector's tap and applies what it answers with `sched_setattr`, and
//! tests feed it synthetic records.

use super::reservation::{rank_index, split_budget, Controller, ControllerConfig, Step};
use crate::common::cycle::{CycleRecord, MAX_CLIENTS};
use crate::common::Summary;
use crate::engine::collector::Dist;
use crate::error::Result;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Most points of a per-cycle series kept in a result (the CSV trace has every cycle).
pub const SERIES_MAX: usize = 2000;

/// Driver period statistics in the shape of Cucinotta et al.'s Tables 1 and 3.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PeriodStats {
    pub count: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    pub mean_ns: f64,
    /// Population standard deviation.
    pub std_ns: f64,
}

/// One point of an empirical CDF: `fraction` of the samples are at or below `value_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CdfPoint {
    pub value_ns: u64,
    pub fraction: f64,
}

/// Driver end time (end − t_ideal): exact extremes and its CDF (Cucinotta et al. Fig. 5a).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EndTimeStats {
    pub min_ns: u64,
    pub max_ns: u64,
    pub cdf: Vec<CdfPoint>,
}

/// One client (chain element) of the pipeline: when it joined and when it ends in the cycle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClientEnd {
    /// 0 = the first client after the input.
    pub index: u32,
    /// First cycle it ran in and that cycle's time since the row's first cycle; None = never.
    pub joined_cycle: Option<u64>,
    pub joined_at_ns: Option<u64>,
    /// End time after the driver's wake, over the cycles it ran in.
    pub end_ns: Summary,
}

/// Set Q and Predicted Q after one cycle (decimated in the result; every cycle in the trace).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct QPoint {
    pub cycle: u64,
    /// Since the row's first cycle (ideal start).
    pub t_ns: u64,
    pub set_q_ns: u64,
    pub predicted_q_ns: u64,
    /// The cycle's CPU time (all engine threads) that fed the controller.
    pub cpu_ns: u64,
    pub active_clients: u32,
}

/// Everything a row's observer measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RowTiming {
    pub driver_period: PeriodStats,
    pub end_time: EndTimeStats,
    /// Driver end time per cycle, the largest of each bucket of `series_stride` cycles.
    pub end_time_series_ns: Vec<u64>,
    pub series_stride: u64,
    pub clients: Vec<ClientEnd>,
    pub q_series: Vec<QPoint>,
    /// Controller bumps: (xruns, clients added).
    pub bumps_xrun: u64,
    pub bumps_client: u64,
}

/// The nearest-rank CDF of `v` at 1 % steps plus the tail (99.5, 99.9, 99.99 %).
pub fn cdf(mut v: Vec<u64>) -> Vec<CdfPoint> {
    if v.is_empty() {
        return Vec::new();
    }
    v.sort_unstable();
    let mut fr: Vec<f64> = (0..=100).map(|i| i as f64 / 100.0).collect();
    fr.splice(100..100, [0.995, 0.999, 0.9999]);
    fr.into_iter()
        .map(|f| CdfPoint {
            value_ns: v[rank_index(v.len(), f * 100.0)],
            fraction: f,
        })
        .collect()
}

/// At most `SERIES_MAX` points, each the largest of its bucket, so peaks stay visible.
pub fn decimate_max(v: &[u64]) -> (Vec<u64>, u64) {
    let stride = v.len().div_ceil(SERIES_MAX).max(1);
    (
        v.chunks(stride)
            .map(|c| c.iter().copied().max().unwrap_or(0))
            .collect(),
        stride as u64,
    )
}

/// Mean and population standard deviation, exactly (Welford).
#[derive(Debug, Default, Clone, Copy)]
struct Moments {
    n: u64,
    mean: f64,
    m2: f64,
    min: u64,
    max: u64,
}

impl Moments {
    fn add(&mut self, x: u64) {
        if self.n == 0 {
            self.min = x;
            self.max = x;
        }
        self.min = self.min.min(x);
        self.max = self.max.max(x);
        self.n += 1;
        let d = x as f64 - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (x as f64 - self.mean);
    }
    fn stats(&self) -> PeriodStats {
        PeriodStats {
            count: self.n,
            min_ns: self.min,
            max_ns: self.max,
            mean_ns: self.mean,
            std_ns: if self.n > 0 {
                (self.m2 / self.n as f64).sqrt()
            } else {
                0.0
            },
        }
    }
}

/// Folds a row's records; with a controller, also answers the budget after each cycle.
pub struct RowObserver {
    ctl: Option<Controller>,
    period: Moments,
    end_times: Vec<u64>,
    clients: Vec<Dist>,
    joined: Vec<Option<(u64, u64)>>,
    last_active: Option<u8>,
    first_t_ideal: Option<u64>,
    q: Vec<QPoint>,
    /// CPU ns per engine thread over the row: the split of the budget follows these.
    thread_cpu: Vec<u64>,
    bumps_xrun: u64,
    bumps_client: u64,
}

impl RowObserver {
    /// `clients`: pipeline length; `controller`: Some for the adaptive rows.
    pub fn new(clients: usize, controller: Option<ControllerConfig>) -> Result<Self> {
        let n = clients.min(MAX_CLIENTS);
        Ok(RowObserver {
            ctl: controller.map(Controller::new).transpose()?,
            period: Moments::default(),
            end_times: Vec::new(),
            clients: (0..n).map(|_| Dist::default()).collect(),
            joined: vec![None; n],
            last_active: None,
            first_t_ideal: None,
            q: Vec::new(),
            thread_cpu: Vec::new(),
            bumps_xrun: 0,
            bumps_client: 0,
        })
    }

    /// Fold one cycle. Returns the controller's answer for the next period (adaptive rows):
    /// an xrun bumps, and so does a client joining (more elements active than last cycle).
    pub fn observe(&mut self, r: &CycleRecord) -> Option<Step> {
        let t0 = *self.first_t_ideal.get_or_insert(r.t_ideal_ns);
        let t = r.t_ideal_ns.saturating_sub(t0);
        if r.driver_period_ns > 0 {
            self.period.add(r.driver_period_ns);
        }
        self.end_times.push(r.end_time_ns());
        let active = r.active_clients as usize;
        for (i, d) in self.clients.iter_mut().enumerate().take(active) {
            d.record(r.client_end_ns[i] as u64);
            self.joined[i].get_or_insert((r.cycle, t));
        }
        let nt = r.threads as usize;
        if self.thread_cpu.len() < nt {
            self.thread_cpu.resize(nt, 0);
        }
        for (s, &c) in self.thread_cpu.iter_mut().zip(&r.thread_cpu_ns[..nt]) {
            *s += c as u64;
        }
        let added = self.last_active.is_some_and(|a| r.active_clients > a);
        self.last_active = Some(r.active_clients);
        let ctl = self.ctl.as_mut()?;
        if r.xrun {
            self.bumps_xrun += 1;
        }
        let mut step = ctl.observe(r.cpu_ns, r.xrun);
        if added {
            self.bumps_client += 1;
            step = ctl.client_added();
        }
        self.q.push(QPoint {
            cycle: r.cycle,
            t_ns: t,
            set_q_ns: step.set_q_ns,
            predicted_q_ns: step.predicted_q_ns,
            cpu_ns: r.cpu_ns,
            active_clients: r.active_clients as u32,
        });
        Some(step)
    }

    /// The controller's current answer (None on fixed-policy rows).
    pub fn current(&self) -> Option<Step> {
        self.ctl.as_ref().map(Controller::current)
    }

    /// Split `total_ns` among `n` engine threads by their measured CPU share: each thread is
    /// its own SCHED_DEADLINE entity, so one reservation cannot be shared as AQuoSA did.
    pub fn split(&self, total_ns: u64, n: usize, out: &mut Vec<u64>) {
        let mut shares = self.thread_cpu.clone();
        shares.resize(n, 0);
        out.resize(n, 0);
        split_budget(total_ns, &shares, out);
    }

    pub fn finish(self) -> RowTiming {
        let (end_time_series_ns, series_stride) = decimate_max(&self.end_times);
        let (min_ns, max_ns) = (
            self.end_times.iter().copied().min().unwrap_or(0),
            self.end_times.iter().copied().max().unwrap_or(0),
        );
        let q_stride = self.q.len().div_ceil(SERIES_MAX).max(1);
        RowTiming {
            driver_period: self.period.stats(),
            end_time: EndTimeStats {
                min_ns,
                max_ns,
                cdf: cdf(self.end_times),
            },
            end_time_series_ns,
            series_stride,
            clients: self
                .clients
                .iter()
                .zip(&self.joined)
                .enumerate()
                .map(|(i, (d, j))| ClientEnd {
                    index: i as u32,
                    joined_cycle: j.map(|x| x.0),
                    joined_at_ns: j.map(|x| x.1),
                    end_ns: d.summary(),
                })
                .collect(),
            q_series: self.q.into_iter().step_by(q_stride).collect(),
            bumps_xrun: self.bumps_xrun,
            bumps_client: self.bumps_client,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: u64 = 2_666_666;

    fn rec(k: u64, cpu: u64, active: u8, xrun: bool) -> CycleRecord {
        let mut r = CycleRecord {
            cycle: k,
            t_ideal_ns: 1_000_000 + k * P,
            wake_ns: 1_000_000 + k * P + 10_000,
            end_ns: 1_000_000 + k * P + 10_000 + cpu,
            driver_period_ns: if k == 0 { 0 } else { P + (k % 3) * 1000 },
            cpu_ns: cpu,
            xrun,
            threads: 1,
            tracks: 1,
            active_clients: active,
            ..CycleRecord::EMPTY
        };
        r.thread_cpu_ns[0] = cpu as u32;
        for i in 0..active as usize {
            r.client_end_ns[i] = ((i as u64 + 1) * cpu / active as u64) as u32;
        }
        r
    }

    #[test]
    fn clients_joining_bump_the_budget_and_the_estimate_follows_the_load() {
        let ccfg = ControllerConfig {
            window: 50,
            ..ControllerConfig::for_period(P)
        };
        let mut o = RowObserver::new(4, Some(ccfg)).unwrap();
        let per_client = 180_000;
        let mut k = 0;
        let mut bumped = Vec::new();
        for active in 0..=4u8 {
            let mut before = o.current().unwrap().set_q_ns;
            for i in 0..200 {
                let cpu = 5_000 + active as u64 * per_client;
                let s = o.observe(&rec(k, cpu, active, false)).unwrap();
                if i == 0 && active > 0 {
                    bumped.push(s.set_q_ns > before);
                }
                before = s.set_q_ns;
                k += 1;
            }
            // Within a window the prediction is the new load, Q = it × 1.05.
            let want = 5_000 + active as u64 * per_client;
            let s = o.current().unwrap();
            assert_eq!(s.predicted_q_ns, want);
            assert_eq!(
                s.set_q_ns,
                ((want as f64 * 1.05).ceil() as u64).max(ccfg.q_min_ns)
            );
        }
        assert_eq!(bumped, vec![true; 4], "every join bumps");
        let t = o.finish();
        assert_eq!(t.bumps_client, 4);
        assert_eq!(t.bumps_xrun, 0);
        assert_eq!(t.clients.len(), 4);
        assert_eq!(t.clients[3].joined_cycle, Some(800));
        assert_eq!(t.clients[3].joined_at_ns, Some(800 * P));
        assert_eq!(t.clients[0].joined_cycle, Some(200));
        // Client i of n ends at (i+1)/n of the cycle's CPU time: client 0 latest when alone,
        // the last client at the cycle's end.
        assert_eq!(t.clients[0].end_ns.max, 5_000 + per_client);
        assert_eq!(t.clients[3].end_ns.max, 5_000 + 4 * per_client);
        assert_eq!(t.clients[3].end_ns.count, 200);
        assert!(t.q_series.len() <= SERIES_MAX && !t.q_series.is_empty());
    }

    #[test]
    fn an_xrun_record_bumps() {
        let mut o = RowObserver::new(1, Some(ControllerConfig::for_period(P))).unwrap();
        for k in 0..300 {
            o.observe(&rec(k, 400_000, 1, false));
        }
        let before = o.current().unwrap().set_q_ns;
        let after = o.observe(&rec(300, 400_000, 1, true)).unwrap().set_q_ns;
        assert_eq!(after, (before as f64 * 1.2) as u64);
        assert_eq!(o.finish().bumps_xrun, 1);
    }

    #[test]
    fn fixed_rows_have_no_controller_but_full_timing() {
        let mut o = RowObserver::new(2, None).unwrap();
        for k in 0..=300 {
            assert!(o.observe(&rec(k, 100_000 + k * 10, 2, false)).is_none());
        }
        let t = o.finish();
        assert!(t.q_series.is_empty());
        // Periods P, P+1000, P+2000 in turn (k = 1..=300): exact mean and std.
        assert_eq!(t.driver_period.count, 300);
        assert_eq!(t.driver_period.min_ns, P);
        assert_eq!(t.driver_period.max_ns, P + 2000);
        assert!((t.driver_period.mean_ns - (P + 1000) as f64).abs() < 1e-6);
        let std = (2.0f64 / 3.0).sqrt() * 1000.0;
        assert!((t.driver_period.std_ns - std).abs() < 1e-6);
        // End time = 10 µs wake latency + the CPU time.
        assert_eq!(t.end_time.min_ns, 110_000);
        assert_eq!(t.end_time.max_ns, 110_000 + 3000);
        assert_eq!(t.end_time.cdf.first().unwrap().value_ns, 110_000);
        assert_eq!(t.end_time.cdf.last().unwrap().value_ns, 113_000);
    }

    #[test]
    fn cdf_is_the_nearest_rank_percentile_and_monotone() {
        let v: Vec<u64> = (1..=1000).rev().collect();
        let c = cdf(v);
        assert_eq!(c.len(), 104);
        assert_eq!(c[0].value_ns, 1);
        let at = |f: f64| c.iter().find(|p| p.fraction == f).unwrap().value_ns;
        assert_eq!(at(0.5), 500);
        assert_eq!(at(0.999), 999);
        assert_eq!(at(1.0), 1000);
        assert!(c
            .windows(2)
            .all(|w| w[0].value_ns <= w[1].value_ns && w[0].fraction < w[1].fraction));
        assert!(cdf(Vec::new()).is_empty());
    }

    #[test]
    fn decimation_keeps_peaks() {
        let mut v = vec![1u64; 10_000];
        v[4321] = 99;
        let (d, stride) = decimate_max(&v);
        assert_eq!(stride, 5);
        assert_eq!(d.len(), 2000);
        assert_eq!(d[4321 / 5], 99);
        assert_eq!(d.iter().filter(|&&x| x == 99).count(), 1);
    }
}
