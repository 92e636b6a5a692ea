//! What a run's progress line shows while it runs: the collector (a normal thread, already
//! reading every cycle record) keeps a few counters in atomics, and the thread showing
//! progress snapshots them. The real-time cycle does nothing more than it did: the figures
//! come from the records it already pushes (docs/ARCHITECTURE.md §5).

use crate::common::CycleRecord;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The run so far, as the collector has folded it.
#[derive(Debug, Default)]
pub struct Live {
    cycles: AtomicU64,
    xruns: AtomicU64,
    /// The largest cycle wall time (wake to end) since the display last looked: a "current"
    /// DSP load that a single light cycle read at the wrong moment cannot hide a peak from.
    recent_wall_ns: AtomicU64,
    max_wall_ns: AtomicU64,
}

/// One snapshot of [`Live`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LiveFigures {
    pub cycles: u64,
    pub xruns: u64,
    pub recent_wall_ns: u64,
    pub max_wall_ns: u64,
}

impl Live {
    /// One folded record (collector thread).
    pub fn observe(&self, r: &CycleRecord) {
        self.cycles.fetch_add(1, Relaxed);
        if r.cause.is_some() {
            self.xruns.fetch_add(1, Relaxed);
        }
        let wall = r.wall_ns();
        self.recent_wall_ns.fetch_max(wall, Relaxed);
        self.max_wall_ns.fetch_max(wall, Relaxed);
    }

    /// The figures so far; the "recent" maximum starts again from here.
    pub fn take(&self) -> LiveFigures {
        LiveFigures {
            cycles: self.cycles.load(Relaxed),
            xruns: self.xruns.load(Relaxed),
            recent_wall_ns: self.recent_wall_ns.swap(0, Relaxed),
            max_wall_ns: self.max_wall_ns.load(Relaxed),
        }
    }
}
