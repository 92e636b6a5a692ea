//! The flight recorder (`watch --forensics`, docs/ARCHITECTURE.md "watch"): the reader
//! drains the per-CPU binary pipes as for any measurement, but keeps only the last
//! [`Flight::keep_ns`] of pages in memory, and of the older ones only those that overlap a
//! *pin* — a time range the watch asked for: around each xrun it is notified of, and a
//! short sample every so often for each client's usual timing. Hours of watching then hold
//! the xruns' surroundings, not the hours; decoding waits until the end as before.
//!
//! Why in user space rather than the kernel's overwrite ring and its snapshot: the reader
//! already drains pages cheaply (the kernel hands over whole pages), a snapshot needs a
//! second kernel buffer as large as the first on every traced CPU and freezes all CPUs at
//! once, and an xrun is notified tens of milliseconds after it happened, which a
//! user-space ring covers by keeping seconds of history at no cost to the measured CPUs.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Mutex};
use std::time::Duration;

/// What the watch wants kept: the history length and the pinned ranges (CLOCK_MONOTONIC
/// ns, the trace clock). Shared by the watch's thread (which pins) and the trace reader
/// (which keeps); neither is a real-time thread, so a mutex is fine here.
#[derive(Debug)]
pub struct Flight {
    keep_ns: u64,
    pins: Mutex<Vec<(u64, u64)>>,
    dropped_pages: AtomicU64,
    looks: Mutex<Vec<Look>>,
}

/// A look asked of the reader: the history's pages over a time range, decoded.
#[derive(Debug)]
pub(super) struct Look {
    pub(super) from_ns: u64,
    pub(super) to_ns: u64,
    pub(super) reply: mpsc::Sender<super::Trace>,
}

impl Flight {
    pub fn new(keep_ns: u64) -> Flight {
        Flight {
            keep_ns,
            pins: Mutex::new(Vec::new()),
            dropped_pages: AtomicU64::new(0),
            looks: Mutex::new(Vec::new()),
        }
    }

    /// The trace from `from_ns` to `to_ns` as the reader's history holds it now, decoded
    /// while the recording goes on: the watch names an xrun's late client in its live line
    /// from it. The reader answers between two reads (at least every 50 ms); None when it
    /// does not within `wait`, or has stopped. What the end decodes stays the result.
    pub fn look(&self, from_ns: u64, to_ns: u64, wait: Duration) -> Option<super::Trace> {
        let (reply, answer) = mpsc::channel();
        self.looks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Look {
                from_ns,
                to_ns,
                reply,
            });
        answer.recv_timeout(wait).ok()
    }

    /// The looks asked since the last call, for the reader to answer.
    pub(super) fn take_looks(&self) -> Vec<Look> {
        std::mem::take(&mut *self.looks.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// History kept in full, ns: a pin must arrive within it to find its pages.
    pub fn keep_ns(&self) -> u64 {
        self.keep_ns
    }

    /// Keep what the trace holds from `from_ns` to `to_ns`.
    pub fn pin(&self, from_ns: u64, to_ns: u64) {
        let mut p = self.pins.lock().unwrap_or_else(|e| e.into_inner());
        p.push((from_ns, to_ns.max(from_ns)));
        merge(&mut p);
    }

    /// The pinned ranges, sorted and merged: the times the recording covers in full.
    pub fn pins(&self) -> Vec<(u64, u64)> {
        self.pins.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Pages older than the history and outside every pin, let go.
    pub fn dropped_pages(&self) -> u64 {
        self.dropped_pages.load(Ordering::Relaxed)
    }

    fn pinned(&self, from_ns: u64, to_ns: u64) -> bool {
        let p = self.pins.lock().unwrap_or_else(|e| e.into_inner());
        p.iter().any(|&(a, b)| from_ns <= b && to_ns >= a)
    }
}

/// Sort and merge overlapping ranges in place.
pub fn merge(r: &mut Vec<(u64, u64)>) {
    r.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(r.len());
    for &(a, b) in r.iter() {
        match out.last_mut() {
            Some(l) if a <= l.1 => l.1 = l.1.max(b),
            _ => out.push((a, b)),
        }
    }
    *r = out;
}

/// Bytes of history one CPU's ring holds at most, whatever its event rate: the watcher's
/// memory is this history (the kept pages go to a file), and at a few MB a second of trace
/// (a machine busy with compiles or a 200 µs latency test) 5 s of it would grow the
/// watcher by tens of MB. 8 MiB still holds over 2 s at 3.5 MB a second, more than the
/// 1.5 s before an xrun plus a poll's notification delay that a pin reaches back.
const HISTORY_MAX_BYTES: usize = 8 << 20;

/// One CPU's pages within the history, oldest first, each with its first time stamp.
#[derive(Default)]
pub(super) struct Ring {
    pages: VecDeque<(u64, Vec<u8>)>,
    bytes: usize,
}

impl Ring {
    pub(super) fn push(&mut self, ts_ns: u64, page: &[u8]) {
        self.bytes += page.len();
        self.pages.push_back((ts_ns, page.to_vec()));
    }

    /// Let go of the pages that ended before `horizon_ns`, and of the oldest beyond
    /// [`HISTORY_MAX_BYTES`], handing those that overlap a pin to `keep`. A page ends where
    /// the next one starts; the newest stays (its end is open).
    pub(super) fn evict(&mut self, horizon_ns: u64, flight: &Flight, keep: &mut dyn FnMut(&[u8])) {
        self.evict_within(horizon_ns, HISTORY_MAX_BYTES, flight, keep);
    }

    fn evict_within(
        &mut self,
        horizon_ns: u64,
        max_bytes: usize,
        flight: &Flight,
        keep: &mut dyn FnMut(&[u8]),
    ) {
        while self.pages.len() >= 2 && (self.pages[1].0 < horizon_ns || self.bytes > max_bytes) {
            let (ts, page) = self.pages.pop_front().expect("two pages");
            self.bytes -= page.len();
            self.settle(ts, self.pages[0].0, page, flight, keep);
        }
    }

    /// The pages held that overlap `from_ns..=to_ns` (a page ends where the next starts;
    /// the newest's end is open), oldest first.
    pub(super) fn each_between(&self, from_ns: u64, to_ns: u64, f: &mut dyn FnMut(&[u8])) {
        for (k, (ts, page)) in self.pages.iter().enumerate() {
            let end = self.pages.get(k + 1).map_or(u64::MAX, |n| n.0);
            if *ts <= to_ns && end >= from_ns {
                f(page);
            }
        }
    }

    /// At the end: every page, kept if it overlaps a pin.
    pub(super) fn drain(&mut self, flight: &Flight, keep: &mut dyn FnMut(&[u8])) {
        while let Some((ts, page)) = self.pages.pop_front() {
            self.bytes -= page.len();
            let end = self.pages.front().map_or(u64::MAX, |p| p.0);
            self.settle(ts, end, page, flight, keep);
        }
    }

    fn settle(
        &self,
        from: u64,
        to: u64,
        page: Vec<u8>,
        flight: &Flight,
        keep: &mut dyn FnMut(&[u8]),
    ) {
        if flight.pinned(from, to) {
            keep(&page);
        } else {
            flight.dropped_pages.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The first time stamp of a raw page (its header's first word).
pub(super) fn page_ts(page: &[u8]) -> u64 {
    page.get(..8)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_ne_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(ts: u64) -> Vec<u8> {
        let mut p = ts.to_ne_bytes().to_vec();
        p.extend_from_slice(&[0; 8]);
        p
    }

    fn kept_after(f: &Flight, ts: &[u64], horizon: u64, end: bool) -> Vec<u64> {
        let mut r = Ring::default();
        for &t in ts {
            r.push(t, &page(t));
        }
        let mut kept = Vec::new();
        let mut keep = |p: &[u8]| kept.push(page_ts(p));
        r.evict(horizon, f, &mut keep);
        if end {
            r.drain(f, &mut keep);
        }
        kept
    }

    #[test]
    fn a_look_sees_the_pages_that_overlap_its_range() {
        let mut r = Ring::default();
        for t in [0, 10, 20, 30] {
            r.push(t, &page(t));
        }
        let seen = |a, b| {
            let mut v = Vec::new();
            r.each_between(a, b, &mut |p| v.push(page_ts(p)));
            v
        };
        assert_eq!(seen(12, 25), vec![10, 20]);
        // The newest page runs on: a range past its start still finds it.
        assert_eq!(seen(100, 200), vec![30]);
        assert_eq!(seen(0, 0), vec![0]);
    }

    #[test]
    fn a_look_nobody_answers_gives_none_and_is_handed_over_once() {
        let f = Flight::new(10);
        assert!(f.look(0, 1, Duration::from_millis(1)).is_none());
        assert_eq!(f.take_looks().len(), 1);
        assert!(f.take_looks().is_empty());
    }

    #[test]
    fn pins_merge_and_stay_sorted() {
        let f = Flight::new(10);
        f.pin(50, 60);
        f.pin(10, 20);
        f.pin(15, 30);
        f.pin(60, 70);
        assert_eq!(f.pins(), vec![(10, 30), (50, 70)]);
    }

    #[test]
    fn only_pinned_pages_survive_the_history() {
        let f = Flight::new(10);
        f.pin(25, 26);
        // Pages start at 0, 10, 20, 30, 40: the one from 20 to 30 holds the pin.
        let kept = kept_after(&f, &[0, 10, 20, 30, 40], 45, false);
        assert_eq!(kept, vec![20]);
        assert_eq!(f.dropped_pages(), 3);
    }

    #[test]
    fn pages_within_the_history_wait_for_a_pin() {
        let f = Flight::new(10);
        // Nothing before the horizon ends: nothing is let go yet.
        let kept = kept_after(&f, &[100, 110, 120], 105, false);
        assert!(kept.is_empty());
        assert_eq!(f.dropped_pages(), 0);
    }

    #[test]
    fn a_history_past_its_bytes_lets_the_oldest_go_early() {
        let f = Flight::new(10);
        f.pin(105, 106);
        let mut r = Ring::default();
        for t in [100, 110, 120, 130] {
            r.push(t, &page(t)); // 16 bytes each
        }
        let mut kept = Vec::new();
        // Nothing is older than the horizon; 64 bytes against a bound of 40: the two oldest
        // go, the pinned one to `keep`.
        r.evict_within(0, 40, &f, &mut |p| kept.push(page_ts(p)));
        assert_eq!(kept, vec![100]);
        assert_eq!((r.pages.len(), r.bytes, f.dropped_pages()), (2, 32, 1));
    }

    #[test]
    fn the_end_keeps_the_newest_page_when_pinned() {
        let f = Flight::new(10);
        f.pin(500, 600);
        let kept = kept_after(&f, &[0, 10, 490], 0, true);
        // 10..490 overlaps nothing, 490.. is open-ended and overlaps the pin.
        assert_eq!(kept, vec![490]);
        assert_eq!(f.dropped_pages(), 2);
    }
}
