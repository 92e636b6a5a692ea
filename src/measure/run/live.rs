//! `run`'s live progress line: the cycles done move the bar; xruns and DSP load (the
//! largest cycle since the last refresh, and the run's maximum) follow as its message. The
//! figures are the collector's atomics (`collector::Live`), read on the supervising thread,
//! and the line is formatted only when a display shows it.

use crate::engine::collector::{Live, LiveFigures};
use crate::engine::harness::Harness;
use std::time::Duration;

/// How often the bar moves; the message follows every `MESSAGE_EVERY`-th time (100 ms), as
/// the latency line does: faster is unreadable.
const POLL: Duration = Duration::from_millis(20);
const MESSAGE_EVERY: u32 = 5;

/// "3 xruns · DSP 23 % · max 67 %": at most 40 columns for any figures, so it fits beside
/// the bar on an 80-column terminal.
pub fn line(f: &LiveFigures, period_ns: u64) -> String {
    let pct = |wall: u64| (wall as u128 * 100 / period_ns.max(1) as u128).min(999);
    let s = if f.xruns == 1 { "" } else { "s" };
    format!(
        "{} xrun{s} · DSP {} % · max {} %",
        f.xruns.min(999_999_999),
        pct(f.recent_wall_ns),
        pct(f.max_wall_ns)
    )
}

/// Poll until `ended()`, moving the bar with the engine's cycles and, on a display, showing
/// the collector's figures.
pub fn show(ended: &dyn Fn() -> bool, h: &Harness<'_>, live: &Live, period_ns: u64) {
    let mut tick = 0u32;
    while !ended() {
        h.progress.set_position(h.monitor.cycles_done());
        tick += 1;
        if tick.is_multiple_of(MESSAGE_EVERY) && h.progress.shows() {
            h.progress.set_message(&line(&live.take(), period_ns));
        }
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_its_figures_and_stays_short() {
        let f = LiveFigures {
            cycles: 1000,
            xruns: 3,
            recent_wall_ns: 1_230_000,
            max_wall_ns: 3_580_000,
        };
        assert_eq!(line(&f, 5_333_333), "3 xruns · DSP 23 % · max 67 %");
        let one = LiveFigures { xruns: 1, ..f };
        assert!(line(&one, 5_333_333).starts_with("1 xrun ·"));
        let huge = LiveFigures {
            cycles: u64::MAX,
            xruns: u64::MAX,
            recent_wall_ns: u64::MAX,
            max_wall_ns: u64::MAX,
        };
        let l = line(&huge, 1);
        assert_eq!(l, "999999999 xruns · DSP 999 % · max 999 %");
        assert!(l.chars().count() <= 40, "{l}");
        assert_eq!(
            line(&LiveFigures::default(), 0),
            "0 xruns · DSP 0 % · max 0 %"
        );
    }
}
