//! An xrun as a result keeps it, with what took the most time in its cycle.

use crate::common::{Cause, CycleRecord};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One xrun as kept in the result.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct XrunEvent {
    pub cycle: u64,
    pub cause: Cause,
    pub wake_latency_ns: u64,
    pub sched_latency_ns: u64,
    pub wall_ns: u64,
    pub crit_cpu_ns: u64,
    pub interference_ns: u64,
    pub end_time_ns: u64,
    /// Time since the first cycle's ideal start.
    pub at_ns: u64,
    /// release − t_ideal: how late the previous cycle left this one to start.
    #[serde(default)]
    pub backlog_ns: u64,
    /// Late only by that backlog: the cause is the previous xrun's (see `common::cycle`).
    #[serde(default)]
    pub inherited: bool,
    /// CLOCK_MONOTONIC t_ideal and the critical thread's index, for the forensics of this
    /// xrun (docs/methods.md "Forensics"); in-process only, `at_ns` is what a file keeps.
    #[serde(skip)]
    pub t_ideal_ns: u64,
    #[serde(skip)]
    pub crit_thread: u8,
    /// Set when the CPU clock ran without work: what the critical thread's work was expected
    /// to cost (the cost prior's, or the run's own p99 per element run × its element runs). `crit_cpu_ns` stays
    /// the raw clock reading; the excess over this is host time and the cause is
    /// `interference` (docs/methods.md "Xrun and cause").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_cpu_ns: Option<u64>,
    /// Overload xruns: the track and chain element that took the most time in the cycle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heaviest: Option<Heaviest>,
}

/// What took the most time in an overload xrun's cycle, from the engine's own probes: the
/// track that ran longest (end − start) and, when that is track 0, its longest chain
/// instance (only track 0's elements are timed, to keep clock reads off the other tracks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Heaviest {
    /// Track index, from 0 as in the `--trace` CSV.
    pub track: u32,
    pub track_ns: u64,
    /// Instance index in the chain's series, from 0 (`burn:3,gain` has 0..3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub element: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub element_ns: Option<u64>,
}

impl Heaviest {
    /// From a cycle's per-track start/end and track 0's per-element end times.
    pub fn of(r: &CycleRecord) -> Option<Heaviest> {
        use crate::common::cycle::{MAX_CLIENTS, MAX_TRACKS};
        let n = (r.tracks as usize).min(MAX_TRACKS);
        let (track, track_ns) = (0..n)
            .map(|i| {
                let ns = r.track_end_ns[i].saturating_sub(r.track_start_ns[i]);
                (i, ns as u64)
            })
            // The first of equals.
            .max_by_key(|&(i, ns)| (ns, std::cmp::Reverse(i)))?;
        if track_ns == 0 {
            return None;
        }
        let mut best: Option<(usize, u64)> = None;
        if track == 0 {
            let ran = (r.active_clients as usize).min(MAX_CLIENTS);
            let mut prev = r.track_start_ns[0];
            for (i, &end) in r.client_end_ns[..ran].iter().enumerate() {
                // Untimed (0) or out of order: nothing more is known.
                if end < prev {
                    break;
                }
                let ns = (end - prev) as u64;
                if ns > 0 && best.is_none_or(|(_, b)| ns > b) {
                    best = Some((i, ns));
                }
                prev = end;
            }
        }
        Some(Heaviest {
            track: track as u32,
            track_ns,
            element: best.map(|b| b.0 as u32),
            element_ns: best.map(|b| b.1),
        })
    }

    /// `track 0: burn(30%) 3/4` (the third of four instances), `track 0: gain`, or
    /// `track 2` when only the track is known.
    pub fn label(&self, chain: &[crate::dsp::ChainElement]) -> String {
        let track = format!("track {}", self.track);
        let Some(i) = self.element else {
            return track;
        };
        let mut at = 0u32;
        for e in chain {
            if i < at + e.count {
                let one = crate::dsp::ChainElement {
                    count: 1,
                    ..e.clone()
                };
                return if e.count > 1 {
                    format!("{track}: {one} {}/{}", i - at + 1, e.count)
                } else {
                    format!("{track}: {one}")
                };
            }
            at += e.count;
        }
        format!("{track}: element {i}")
    }
}
