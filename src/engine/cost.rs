//! The sim driver's cost model: compute time from declared per-instance costs instead of
//! running the DSP, so what-if questions have exact, reproducible answers.
//!
//! Model (all integer nanoseconds):
//! - an instance of plugin p costs `per_cycle_ns(p) + per_frame_ns(p) · frames`; `burn(X%)`
//!   without a declared cost costs X % of the period, the same as its real calibration;
//!   plugins with no declared cost cost 0 (the run warns);
//! - a track costs the sum of its chain; thread 0 first spends `overhead_ns`;
//! - tracks are taken in index order by whichever engine thread is free first (lowest
//!   index on ties), as the atomic claim does; no hand-off cost between threads;
//! - wall = the finish time of the last thread, the critical thread is that thread and its
//!   busy time is the critical CPU time.
//!
//! With the sim's device semantics (probe.rs, device.rs) a cycle is an xrun exactly when
//! `end − t_ideal > (n−1)·P`, and with zero wake-up latency its cause is `overload`. So,
//! with one track on one thread, no latency and no overhead, k instances of cost c ns per
//! cycle give:
//! - n = 2: an overload xrun in a cycle iff `k·c > P`; the largest count without one is
//!   `floor(P / c)`, i.e. `floor(B / c)` for a budget `B = P` (or `floor(f·P / c)` for a
//!   budget fraction f).
//! - n ≥ 3: a single cycle may take up to `(n−1)·P`, but a sustained `k·c > P` builds a
//!   backlog of `k·c − P` per cycle until a cycle misses; over a run of more than
//!   `(n−2)·P / (k·c − P) + 1` cycles the largest count is again `floor(P / c)`.
//!
//! The inequality is strict (`end == deadline` is in time), so `k·c == P` is no xrun.

use crate::common::cycle::{CycleRecord, MAX_THREADS, MAX_TRACKS};
use crate::dsp::{ChainElement, PluginContext};
use crate::error::{Error, Result};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Declared cost of one instance of a plugin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PluginCost {
    pub plugin: String,
    pub per_cycle_ns: u64,
    pub per_frame_ns: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CostModel {
    pub costs: Vec<PluginCost>,
    /// Engine overhead per cycle on thread 0.
    pub overhead_ns: u64,
}

impl CostModel {
    /// The model the `--cost` values and `--cost-overhead` describe for `chain` (shared by
    /// every command that can run on the sim driver). A cost for a plugin the chain does not
    /// hold is a typo that would leave the real one at cost 0: refused, naming the closest
    /// element; so is a name given twice.
    pub fn from_flags(costs: &[String], overhead_ns: u64, chain: &[ChainElement]) -> Result<Self> {
        let mut model = CostModel {
            costs: Vec::with_capacity(costs.len()),
            overhead_ns,
        };
        for s in costs {
            let c = Self::parse_cost(s)?;
            if model.costs.iter().any(|o| o.plugin == c.plugin) {
                return Err(Error::usage(format!(
                    "--cost {s}: '{}' has a cost already",
                    c.plugin
                )));
            }
            if !chain.iter().any(|e| e.plugin == c.plugin) {
                return Err(Error::usage(not_in_chain(s, &c.plugin, chain)));
            }
            model.costs.push(c);
        }
        Ok(model)
    }

    /// Parse one `--cost` value: `NAME=DURATION` (per instance per cycle) or
    /// `NAME=DURATION/frame` (per instance per frame), e.g. `burn=50us`, `reverb-heavy=120ns/frame`.
    pub fn parse_cost(s: &str) -> Result<PluginCost> {
        let bad = || {
            Error::usage(format!(
                "bad --cost '{s}': expected NAME=DURATION or NAME=DURATION/frame, e.g. burn=50us"
            ))
        };
        // The last '=': an LV2 URI may hold one, a cost never does.
        let (name, v) = s.rsplit_once('=').ok_or_else(bad)?;
        let name = name.trim();
        if name.is_empty() {
            return Err(bad());
        }
        let (per_cycle_ns, per_frame_ns) = match v.trim().strip_suffix("/frame") {
            Some(d) => {
                // Sub-nanosecond per-frame costs are meaningful: keep the fraction.
                let ns = parse_fractional_ns(d).ok_or_else(bad)?;
                (0, ns)
            }
            None => (crate::units::parse_duration_ns(v.trim())?, 0.0),
        };
        Ok(PluginCost {
            plugin: name.to_string(),
            per_cycle_ns,
            per_frame_ns,
        })
    }

    /// Cost of one instance of `e` at `ctx`, and whether it was declared or defaulted.
    pub fn instance_cost(&self, e: &ChainElement, ctx: &PluginContext) -> Result<(u64, bool)> {
        if let Some(c) = self.costs.iter().find(|c| c.plugin == e.plugin) {
            let ns = c.per_cycle_ns + (c.per_frame_ns * ctx.max_frames as f64).round() as u64;
            return Ok((ns, true));
        }
        if e.plugin == "burn" {
            let pct = crate::units::parse_percent(&e.params)?;
            return Ok(((ctx.period_ns() as f64 * pct / 100.0).round() as u64, true));
        }
        Ok((0, false))
    }

    /// Plugins of `chain` the model has no cost for (they cost 0).
    pub fn unmodelled(&self, chain: &[ChainElement]) -> Vec<String> {
        let mut v: Vec<String> = chain
            .iter()
            .filter(|e| e.plugin != "burn" && !self.costs.iter().any(|c| c.plugin == e.plugin))
            .map(|e| e.plugin.clone())
            .collect();
        v.dedup();
        v
    }

    pub(crate) fn track_costs(
        &self,
        chain: &[ChainElement],
        tracks: usize,
        ctx: &PluginContext,
    ) -> Result<TrackCosts> {
        let mut per_track = 0u64;
        for e in chain {
            let (ns, _) = self.instance_cost(e, ctx)?;
            per_track = per_track.saturating_add(ns.saturating_mul(e.count as u64));
        }
        Ok(TrackCosts {
            track_ns: [per_track.min(MAX_MODELLED_NS); MAX_TRACKS],
            tracks,
            overhead_ns: self.overhead_ns.min(MAX_MODELLED_NS),
        })
    }
}

/// "--cost S: 'NAME' is not in the chain (…); did you mean 'X'?"
fn not_in_chain(s: &str, name: &str, chain: &[ChainElement]) -> String {
    let mut names: Vec<&str> = Vec::new();
    for e in chain {
        if !names.contains(&e.plugin.as_str()) {
            names.push(&e.plugin);
        }
    }
    let closest = names
        .iter()
        .min_by_key(|n| crate::units::edit_distance(name, n))
        .map(|n| format!("; did you mean '{n}'?"))
        .unwrap_or_default();
    format!(
        "--cost {s}: '{name}' is not in the chain ({}){closest}",
        names.join(", ")
    )
}

fn parse_fractional_ns(s: &str) -> Option<f64> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (n, u) = s.split_at(split);
    let v: f64 = n.parse().ok()?;
    let scale = match u {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        _ => return None,
    };
    Some(v * scale).filter(|x| x.is_finite())
}

/// The longest a modelled track (or the overhead) takes per cycle, 2^50 ns (13 days). Costs
/// are the user's numbers times instances the load search may double many times; a cycle
/// beyond this is an xrun all the same, and bounded, the schedule's sums and the simulated
/// timeline cannot overflow.
const MAX_MODELLED_NS: u64 = 1 << 50;

/// Precomputed costs, so the modelled cycle allocates nothing.
#[derive(Debug, Clone)]
pub(crate) struct TrackCosts {
    track_ns: [u64; MAX_TRACKS],
    tracks: usize,
    overhead_ns: u64,
}

impl TrackCosts {
    /// Lay the tracks onto `threads` simulated threads; fill the record's per-thread and
    /// per-track fields; return the wall time.
    pub(crate) fn schedule(&self, threads: usize, rec: &mut CycleRecord) -> u64 {
        let mut free = [0u64; MAX_THREADS];
        free[0] = self.overhead_ns;
        let mut busy = [0u64; MAX_THREADS];
        busy[0] = self.overhead_ns;
        for i in 0..self.tracks {
            let mut w = 0;
            for j in 1..threads {
                if free[j] < free[w] {
                    w = j;
                }
            }
            rec.track_start_ns[i] = free[w].min(u32::MAX as u64) as u32;
            rec.track_thread[i] = w as u8;
            free[w] += self.track_ns[i];
            busy[w] += self.track_ns[i];
            rec.track_end_ns[i] = free[w].min(u32::MAX as u64) as u32;
        }
        let mut crit = 0;
        for j in 1..threads {
            if free[j] > free[crit] {
                crit = j;
            }
        }
        let mut total = 0;
        for (slot, &b) in rec.thread_cpu_ns.iter_mut().zip(&busy[..threads]) {
            *slot = b.min(u32::MAX as u64) as u32;
            total += b;
        }
        rec.cpu_ns = total;
        rec.crit_cpu_ns = busy[crit];
        rec.crit_thread = crit as u8;
        free[crit]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dsp::parse_chain;

    #[test]
    fn parses_costs() {
        let c = CostModel::parse_cost("burn=50us").unwrap();
        assert_eq!((c.per_cycle_ns, c.per_frame_ns), (50_000, 0.0));
        let c = CostModel::parse_cost("reverb-heavy=0.5ns/frame").unwrap();
        assert_eq!((c.per_cycle_ns, c.per_frame_ns), (0, 0.5));
        for bad in ["burn", "=1us", "x=1", "x=1parsec/frame"] {
            assert!(CostModel::parse_cost(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn costs_must_name_an_element_of_the_chain() {
        let flags = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let chain = parse_chain("reverb-heavy:4,lv2:urn:zamaudio:ZamComp,burn(10%)").unwrap();
        // An LV2 URI holds ':' (and may hold '='): the cost is after the last '='.
        let m = CostModel::from_flags(
            &flags(&["lv2:urn:zamaudio:ZamComp=13ns/frame", "burn=5us"]),
            0,
            &chain,
        )
        .unwrap();
        assert_eq!(m.costs[0].plugin, "lv2:urn:zamaudio:ZamComp");
        assert_eq!(m.costs[0].per_frame_ns, 13.0);
        let e = CostModel::from_flags(&flags(&["reverb-hevy=400us"]), 0, &chain)
            .unwrap_err()
            .to_string();
        assert!(e.contains("did you mean 'reverb-heavy'"), "{e}");
        let e = CostModel::from_flags(&flags(&["burn=1us", "burn=2us"]), 0, &chain)
            .unwrap_err()
            .to_string();
        assert!(e.contains("has a cost already"), "{e}");
        assert!(CostModel::from_flags(&[], 0, &chain).is_ok());
    }

    #[test]
    fn schedules_tracks_greedily_on_threads() {
        let ctx = PluginContext {
            rate: 48000,
            max_frames: 48,
        }; // P = 1 ms
        let m = CostModel {
            costs: vec![CostModel::parse_cost("gain=100us").unwrap()],
            overhead_ns: 10_000,
        };
        let chain = parse_chain("gain:2,burn(10%)").unwrap();
        let tc = m.track_costs(&chain, 3, &ctx).unwrap();
        let mut rec = CycleRecord::EMPTY;
        // Tracks cost 300 µs each and thread 0 is busy with 10 µs of overhead first, so track 0
        // goes to thread 1 (free at 0), track 1 to thread 0 (free at 10 µs), track 2 to thread 1.
        let wall = tc.schedule(2, &mut rec);
        assert_eq!(wall, 600_000);
        assert_eq!(rec.crit_thread, 1);
        assert_eq!(rec.crit_cpu_ns, 600_000);
        assert_eq!(rec.cpu_ns, 910_000);
        assert_eq!(rec.track_start_ns[1], 10_000);
        assert_eq!(
            m.unmodelled(&parse_chain("thru,gain,burn(1%)").unwrap()),
            ["thru"]
        );
    }
}
