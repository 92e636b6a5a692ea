//! The live line's late client on JACK: `watch --forensics` names an xrun's late client as
//! soon as the trace around it has been read, not only in the summary. PipeWire's profiler
//! names the late node at once; on jackd2 the name comes from the trace (`clients`), which
//! the flight recorder decodes at the end. Here, a moment after each xrun, the watch asks
//! the reader for the history around it (`Recorder::look`) and runs the same choice of the
//! late client over it. Rate-bound: at most one look every [`EVERY_NS`], spaced further by
//! what the last one cost ([`SPACING`]), and xruns past a backlog of [`BACKLOG`] are left
//! to the summary (the end's explanation, over everything kept, is the result's either way).

use super::clients::{self, ClientThread, LateClient};
use std::collections::VecDeque;
use std::time::Duration;

/// Trace before the xrun a look decodes: enough cycles (94 at 256/48000) for each client's
/// usual figures.
const BEFORE_NS: u64 = 500_000_000;
/// How long after the xrun a look waits: the late cycle and the next are in the history.
const AFTER_NS: u64 = 200_000_000;
/// At most one look this often.
const EVERY_NS: u64 = 1_000_000_000;
/// A look's cost sets the pause before the next: `SPACING` times the wall time it took
/// (decoding in the reader thread, the choice here), so looks take at most 1/400 (0.25 %)
/// of a core however many xruns come. Measured with `scripts/bench-watch` at an xrun every
/// 130 ms: one look a second with 1.5 s of history added 1.6–1.8 % of a core to the
/// watcher's 0.72 %.
const SPACING: u64 = 400;
/// Xruns waiting for a look at most; older ones are named in the summary only.
const BACKLOG: usize = 8;
/// How long the watch waits for the reader's answer (it answers within its 50 ms poll).
const WAIT: Duration = Duration::from_millis(300);

/// The xruns waiting for a look: (index, when, when the one before it was).
#[derive(Debug, Default)]
pub struct LateNow {
    waiting: VecDeque<(u64, u64, u64)>,
    prev_at: u64,
    next_ns: u64,
}

impl LateNow {
    /// An xrun at `at_ns` (CLOCK_MONOTONIC) was notified.
    pub fn xrun(&mut self, index: u64, at_ns: u64) {
        // A full backlog keeps its oldest: under a flood of xruns (one a cycle) the newest
        // would never grow old enough for their look.
        if self.waiting.len() < BACKLOG {
            self.waiting.push_back((index, at_ns, self.prev_at));
        }
        self.prev_at = at_ns;
    }

    /// The xrun due for a look at `now_ns`, if any may be looked at now: (index, the range
    /// to look at, the xrun's time and its predecessor's).
    fn due(&mut self, now_ns: u64) -> Option<(u64, u64, u64)> {
        let &(_, at, _) = self.waiting.front()?;
        if now_ns < at.saturating_add(AFTER_NS) || now_ns < self.next_ns {
            return None;
        }
        self.next_ns = now_ns + EVERY_NS;
        self.waiting.pop_front()
    }

    /// The next xrun's late client, when one is due and the trace names it.
    pub fn poll(
        &mut self,
        now_ns: u64,
        recorder: &crate::trace::Recorder,
        threads: &[ClientThread],
        period_ns: u64,
    ) -> Option<(u64, LateClient)> {
        let (index, at, prev) = self.due(now_ns)?;
        let late = recorder
            .look(at.saturating_sub(BEFORE_NS), at + AFTER_NS, WAIT)
            .and_then(|look| clients::late_now(&look, threads, at, prev, period_ns));
        let spent = crate::rt::clock::monotonic_ns().saturating_sub(now_ns);
        self.next_ns = self
            .next_ns
            .max(now_ns.saturating_add(spent.saturating_mul(SPACING)));
        late.map(|l| (index, l))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn looks_wait_for_the_trace_after_the_xrun_and_keep_their_pace() {
        let mut l = LateNow::default();
        l.xrun(1, 1_000_000_000);
        l.xrun(2, 1_010_000_000);
        // Not before the 200 ms after it.
        assert_eq!(l.due(1_100_000_000), None);
        assert_eq!(l.due(1_200_000_000), Some((1, 1_000_000_000, 0)));
        // The second is due, but one look a second.
        assert_eq!(l.due(1_300_000_000), None);
        assert_eq!(l.due(2_150_000_000), None);
        assert_eq!(
            l.due(2_200_000_000),
            Some((2, 1_010_000_000, 1_000_000_000))
        );
        assert_eq!(l.due(9_000_000_000), None);
    }

    #[test]
    fn a_backlog_keeps_the_oldest() {
        let mut l = LateNow::default();
        for i in 1..=20 {
            l.xrun(i, i * 1_000);
        }
        assert_eq!(l.waiting.len(), BACKLOG);
        assert_eq!(l.due(u64::MAX / 2).map(|d| d.0), Some(1));
        // The next taken in its place carries its own predecessor's time.
        l.xrun(21, 21_000);
        assert_eq!(l.waiting.back(), Some(&(21, 21_000, 20_000)));
    }
}
