//! What a JACK run reports beside the engine's records, and the matching of server xruns
//! with our cycles (after the run, off the real-time path).

#[cfg(test)]
use super::process::HISTORY;
use super::process::{Brief, XrunSlot};
use crate::common::cycle::Cause;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A run of the engine inside a JACK graph: what the result's `jack` section holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JackReport {
    /// "jackd2" or "pipewire", from the loaded libjack.
    pub server: String,
    /// `jack_get_version_string()` of the loaded libjack.
    pub library_version: String,
    /// The client name the server gave us.
    pub client_name: String,
    pub rate: u32,
    pub buffer_frames: u32,
    /// The buffer size was changed with jack_set_buffer_size (`--set-buffer`) from this.
    pub buffer_set_from: Option<u32>,
    /// That original size was put back when the run ended. False when nothing was changed,
    /// or when someone else changed the size during the run (theirs is left alone).
    #[serde(default)]
    pub buffer_restored: bool,
    /// Why putting that size back failed: a warning of the run, not a field of the result.
    #[serde(skip)]
    pub restore_error: Option<String>,
    /// CLOCK_MONOTONIC − JACK clock, ns: mean and largest magnitude over the run's samples.
    pub clock_offset_ns: i64,
    pub clock_offset_max_abs_ns: i64,
    /// Mean of JACK's period estimate (`period_usecs`), ns.
    pub server_period_ns: f64,
    /// Cycles we woke before the cycle start JACK reported (wake-up latency clamps to 0).
    /// jackd2 reports its delay-locked loop's *estimate* of the cycle start, not the
    /// driver's actual wake-up; when the server's own timer is noisy (the dummy driver on
    /// a loaded VM) the estimate can run ahead of the real wake by hundreds of µs.
    /// PipeWire reports its driver's timer time, so this stays 0 there.
    pub wakes_before_cycle_start: u64,
    pub max_wake_before_cycle_start_ns: u64,
    /// Cycles where jack_get_cycle_times failed; their t_ideal comes from
    /// frames_since_cycle_start.
    pub cycle_time_errors: u64,
    /// Cycles whose reported cycle start (`current_usecs`) lay outside the bracket that
    /// `jack_frames_since_cycle_start` gives for the real one (± 50 µs): jackd2's DLL was
    /// not locked, and t_ideal/deadline came from the bracket (± half a frame) instead.
    pub cycle_start_from_frames: u64,
    /// The largest such disagreement, ns.
    pub cycle_start_dll_error_max_ns: u64,
    /// Cycles whose predicted next cycle start (`next_usecs`) was more than P/8 from
    /// t_ideal + P (jackd2's DLL re-locking after a stall): their deadline is t_ideal + P.
    #[serde(default)]
    pub deadline_from_period: u64,
    /// The largest such misprediction, ns.
    #[serde(default)]
    pub deadline_prediction_error_max_ns: u64,
    /// xrun callbacks from the server during the run.
    pub server_xruns: u64,
    /// Our late cycles that the server also reported. Counted per cycle: jackd2 can send
    /// several xrun callbacks for one late cycle, and each of them is listed in the events.
    pub server_xruns_matched: u64,
    /// Our xruns (deadline misses) the server did not report.
    pub xruns_not_reported_by_server: u64,
    pub server_xrun_events: Vec<ServerXrun>,
    /// `jack_cpu_load()` sampled every 100 ms: the server's DSP meter beside ours.
    pub jack_cpu_load_pct: JackLoad,
    /// Buffer size or sample rate changed during the run (the run stopped there).
    pub param_change: Option<String>,
    /// The server shut down during the run (callback, or it stopped running our cycles).
    pub server_shutdown: bool,
    /// The server stopped scheduling us without a shutdown callback (pipewire-jack does
    /// that when the daemon dies): no cycle for max(2 s, 200 periods).
    pub server_stalled: bool,
    pub connections: Vec<String>,
}

impl JackReport {
    /// What the user should hear about the run from the server's side.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if let Some(c) = &self.param_change {
            w.push(format!("JACK: {c}; the run stopped there"));
        }
        if self.server_shutdown {
            w.push("JACK: the server shut down during the run".to_string());
        }
        w.extend(self.restore_error.clone());
        w
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JackLoad {
    pub samples: u64,
    pub mean: f64,
    pub max: f64,
}

/// One xrun the server reported, matched with our cycle records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ServerXrun {
    /// When the notification arrived, ns after the first cycle's t_ideal.
    pub at_ns: u64,
    /// The cycle of ours it belongs to (the last one started before the report).
    pub cycle: Option<u64>,
    /// That cycle missed its deadline in our own accounting.
    pub our_xrun: bool,
    pub cause: Option<Cause>,
    /// end − deadline of that cycle (negative: it was in time), ns.
    pub lateness_ns: Option<i64>,
}

/// Attribute each server xrun to the last of our cycles that started before it was
/// reported, preferring a cycle that missed its deadline within the history window.
pub(super) fn match_xruns(slots: &[XrunSlot], t0: u64, report: &mut JackReport) {
    let mut matched_cycles: Vec<u64> = Vec::new();
    for s in slots {
        let before: Vec<&Brief> = s
            .history
            .iter()
            .filter(|b| b.valid && b.t_ideal_ns <= s.at_ns)
            .collect();
        let late = before.iter().filter(|b| b.xrun).max_by_key(|b| b.cycle);
        let pick = late.or_else(|| before.iter().max_by_key(|b| b.cycle));
        let ev = match pick {
            Some(b) => ServerXrun {
                at_ns: s.at_ns.saturating_sub(t0),
                cycle: Some(b.cycle),
                our_xrun: b.xrun,
                cause: b.cause,
                lateness_ns: Some(b.end_ns as i64 - b.deadline_ns as i64),
            },
            None => ServerXrun {
                at_ns: s.at_ns.saturating_sub(t0),
                cycle: None,
                our_xrun: false,
                cause: None,
                lateness_ns: None,
            },
        };
        if let (true, Some(c)) = (ev.our_xrun, ev.cycle) {
            if !matched_cycles.contains(&c) {
                matched_cycles.push(c);
                report.server_xruns_matched += 1;
            }
        }
        report.server_xrun_events.push(ev);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brief(cycle: u64, t: u64, xrun: bool) -> Brief {
        Brief {
            valid: true,
            cycle,
            t_ideal_ns: t,
            end_ns: t + if xrun { 7_000_000 } else { 1_000_000 },
            deadline_ns: t + 5_000_000,
            xrun,
            cause: xrun.then_some(Cause::Overload),
        }
    }

    #[test]
    fn server_xruns_match_the_late_cycle_before_the_report() {
        let mut history = [Brief::default(); HISTORY];
        for (i, h) in history.iter_mut().enumerate().take(5) {
            *h = brief(10 + i as u64, 1_000_000_000 + i as u64 * 5_000_000, i == 2);
        }
        let late = XrunSlot {
            at_ns: 1_000_000_000 + 16_000_000,
            history,
        };
        let mut in_time = late;
        in_time.history[2].xrun = false;
        in_time.history[2].cause = None;
        let mut r = JackReport::default();
        match_xruns(&[late, in_time], 1_000_000_000, &mut r);
        assert_eq!(r.server_xruns_matched, 1);
        let e = &r.server_xrun_events;
        assert_eq!((e[0].cycle, e[0].our_xrun), (Some(12), true));
        assert_eq!(e[0].cause, Some(Cause::Overload));
        assert_eq!(e[0].lateness_ns, Some(2_000_000));
        // A second report of the same late cycle is listed but not counted twice.
        let mut r2 = JackReport::default();
        match_xruns(&[late, late], 1_000_000_000, &mut r2);
        assert_eq!(r2.server_xrun_events.len(), 2);
        assert_eq!(r2.server_xruns_matched, 1);
        // No late cycle of ours: the report goes to the last cycle started before it.
        assert_eq!((e[1].cycle, e[1].our_xrun), (Some(13), false));
        assert_eq!(e[1].at_ns, 16_000_000);
    }
}
