//! The non-real-time end of the probe ring: folds cycle records into HDR histograms and
//! counters and, with `--trace`, writes every cycle to CSV. Runs on a normal thread; the
//! real-time side only ever does a wait-free push (or counts a drop).

mod cost;
mod events;
mod fold;
mod live;
mod trace_csv;

pub use cost::{WorkCost, HOST_CPU_MIN_CYCLES, PRIOR_STALE_PER_MILLE};
pub use events::{Heaviest, XrunEvent};
pub use fold::{Folded, PlacementFold, ThreadStalls};
pub use live::{Live, LiveFigures};
pub use trace_csv::{cut_at_last_line, TraceWriter};

use crate::common::stats::{new_ns_histogram, record_clamped, Histogram, Summary};
use crate::common::{Cause, CycleRecord};
use crate::error::{Error, Result};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// How many xrun events are kept individually in a result.
pub const MAX_XRUN_EVENTS: usize = 1000;

/// A distribution with exact extremes and mean next to its histogram.
pub struct Dist {
    h: Histogram,
    min: u64,
    max: u64,
    sum: u128,
}

impl Default for Dist {
    fn default() -> Self {
        Dist {
            h: new_ns_histogram(),
            min: u64::MAX,
            max: 0,
            sum: 0,
        }
    }
}

impl Dist {
    pub fn record(&mut self, v: u64) {
        record_clamped(&mut self.h, v);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.sum += v as u128;
    }
    /// The q-quantile, within the exact max (0 while empty).
    pub fn quantile(&self, q: f64) -> u64 {
        if self.h.is_empty() {
            return 0;
        }
        self.h.value_at_quantile(q).min(self.max)
    }
    pub fn summary(&self) -> Summary {
        let mut s = Summary::of(&self.h).with_exact(self.min, self.max, self.sum);
        // The histogram cannot hold 0 (it records 1): keep percentiles within the exact max.
        for p in [
            &mut s.p50,
            &mut s.p90,
            &mut s.p99,
            &mut s.p99_9,
            &mut s.p99_99,
            &mut s.p99_9999,
        ] {
            *p = (*p).min(s.max);
        }
        s
    }
}

/// Which xruns end a run early (`RunConfig::stop_on`), e.g. for the DSP load search where
/// the first disqualifying xrun decides a trial and the rest of it would be wasted time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum StopCriterion {
    /// Only xruns whose cause is `overload`.
    Overload,
    /// Any xrun.
    AnyXrun,
}

impl StopCriterion {
    pub fn matches(self, cause: Cause) -> bool {
        match self {
            StopCriterion::Overload => cause == Cause::Overload,
            StopCriterion::AnyXrun => true,
        }
    }
}

/// The early stop as the collector applies it: the criterion and the driver's stop flag.
/// Checked here, off the real-time path: the driver only sees its ordinary stop flag.
pub struct EarlyStop {
    pub on: StopCriterion,
    /// Xruns of earlier cycles do not stop the run (they are still recorded).
    pub from_cycle: u64,
    pub driver_stop: Arc<AtomicBool>,
}

/// Run the collector on a normal thread until `stop` is set (then drain) or the producer
/// is gone.
pub fn spawn(
    consumer: rtrb::Consumer<CycleRecord>,
    trace: Option<TraceWriter>,
    stop: Arc<AtomicBool>,
    early: Option<EarlyStop>,
) -> Result<std::thread::JoinHandle<Result<Folded>>> {
    spawn_tapped(
        consumer,
        trace,
        stop,
        early,
        None,
        Some(WorkCost::default()),
        None,
    )
}

/// `spawn`, also forwarding every record to `tap` (a non-RT observer such as `xrunlab
/// sched`'s reservation controller; a closed tap is dropped and the collection goes on) and
/// counting it in `live` for the progress line.
pub fn spawn_tapped(
    mut consumer: rtrb::Consumer<CycleRecord>,
    mut trace: Option<TraceWriter>,
    stop: Arc<AtomicBool>,
    early: Option<EarlyStop>,
    mut tap: Option<std::sync::mpsc::Sender<CycleRecord>>,
    judge: Option<WorkCost>,
    live: Option<Arc<Live>>,
) -> Result<std::thread::JoinHandle<Result<Folded>>> {
    std::thread::Builder::new()
        .name("xr-collector".into())
        .spawn(move || {
            let mut f = Folded {
                judge_host_cpu: judge.is_some(),
                work_cost: judge.unwrap_or_default(),
                ..Folded::default()
            };
            loop {
                let mut n = 0;
                while let Ok(mut r) = consumer.pop() {
                    f.judge_and_fold(&mut r);
                    if let Some(l) = &live {
                        l.observe(&r);
                    }
                    if let (Some(e), Some(c), None) = (&early, r.cause, f.early_stop_cycle) {
                        if e.on.matches(c) && r.cycle >= e.from_cycle {
                            f.early_stop_cycle = Some(r.cycle);
                            e.driver_stop.store(true, Ordering::SeqCst);
                        }
                    }
                    if tap.as_ref().is_some_and(|t| t.send(r).is_err()) {
                        tap = None;
                    }
                    if let Some(Err(e)) = trace.as_mut().map(|t| t.write(&r)) {
                        f.trace_error = trace.take().map(|t| t.abandon(&e));
                    }
                    n += 1;
                }
                if n == 0 {
                    if stop.load(Ordering::Acquire) || consumer.is_abandoned() {
                        if consumer.is_empty() {
                            break;
                        }
                        continue;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
            }
            if let Some(Err(lost)) = trace.map(TraceWriter::finish) {
                f.trace_error = Some(lost);
            }
            Ok(f)
        })
        .map_err(|e| Error::io("spawning the collector", e))
}
