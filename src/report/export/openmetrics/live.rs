//! The live metrics of `watch` (`--textfile DIR`): its counters as they stand, under their
//! own `xrunlab_watch_…` names (docs/fleet.md), so that a node exporter carries a session
//! that is still being watched and an alert can fire while it plays.

use super::{Labels, Metrics};
use crate::measure::watch::LiveSnapshot;

/// The exposition text of a snapshot taken now (`--textfile` and `--metrics` serve the same).
pub fn watch_live_text(s: &LiveSnapshot, kind: &str, name: &str) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let mut m = Metrics::new();
    add_watch_live(&mut m, s, kind, name, now);
    m.render()
}

/// The snapshot's metrics, labelled with the server watched (`kind`, its JACK `name`) and the
/// period it ran at when the snapshot was taken; `now_s` is the time of the snapshot.
pub fn add_watch_live(m: &mut Metrics, s: &LiveSnapshot, kind: &str, name: &str, now_s: f64) {
    let server: Labels = vec![("server", kind.to_string()), ("name", name.to_string())];
    let mut period = server.clone();
    period.push(("period", s.frames.to_string()));
    period.push(("rate", s.rate.to_string()));
    m.counter(
        "xrunlab_watch_xruns_total",
        "Xruns of the watched session since the watch began.",
        period,
        // The same total as the result's: lost notifications are xruns too.
        s.xruns.saturating_add(s.lost) as f64,
    );
    m.counter(
        "xrunlab_watch_xruns_lost_total",
        "Xrun notifications the watch could not detail (still counted in xruns).",
        server.clone(),
        s.lost as f64,
    );
    m.gauge(
        "xrunlab_watch_worst_delay_seconds",
        "The largest driver delay the server reported for an xrun.",
        server.clone(),
        s.worst_delay_ns as f64 * 1e-9,
    );
    m.gauge(
        "xrunlab_watch_dsp_load_ratio",
        "The server's DSP load (share of the period), last reading.",
        server.clone(),
        s.dsp_load_pct / 100.0,
    );
    m.gauge(
        "xrunlab_watch_dsp_load_max_ratio",
        "The server's largest DSP load reading during the watch.",
        server.clone(),
        s.dsp_load_max_pct / 100.0,
    );
    m.counter(
        "xrunlab_watch_watched_seconds_total",
        "Time the server was watched (gaps while it was away excluded).",
        server.clone(),
        s.watched_ns as f64 * 1e-9,
    );
    m.counter(
        "xrunlab_watch_gaps_total",
        "Times the server went away during a --follow watch.",
        server.clone(),
        s.gaps as f64,
    );
    m.gauge(
        "xrunlab_watch_server_up",
        "1 while the watched server answers, 0 while it is away.",
        server.clone(),
        if s.server_up { 1.0 } else { 0.0 },
    );
    m.gauge(
        "xrunlab_watch_last_update_timestamp_seconds",
        "When this snapshot was taken (Unix time): stale when the watch stopped.",
        server,
        now_s,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_renders_in_base_units_with_bounded_labels() {
        let s = LiveSnapshot {
            xruns: 2,
            lost: 1,
            worst_delay_ns: 1_500_000,
            dsp_load_pct: 42.0,
            dsp_load_max_pct: 90.0,
            watched_ns: 60_000_000_000,
            gaps: 1,
            server_up: true,
            frames: 256,
            rate: 48000,
        };
        let mut m = Metrics::new();
        add_watch_live(&mut m, &s, "jackd2", "default", 1.8e9);
        let t = m.render();
        assert!(
            t.contains(
                "xrunlab_watch_xruns_total{server=\"jackd2\",name=\"default\",period=\"256\",rate=\"48000\"} 3"
            ),
            "{t}"
        );
        assert!(t.contains("xrunlab_watch_xruns_lost_total{server=\"jackd2\",name=\"default\"} 1"), "{t}");
        assert!(t.contains("xrunlab_watch_worst_delay_seconds{server=\"jackd2\",name=\"default\"} 0.0015"), "{t}");
        assert!(t.contains("xrunlab_watch_dsp_load_ratio{server=\"jackd2\",name=\"default\"} 0.42"), "{t}");
        assert!(t.contains("# TYPE xrunlab_watch_server_up gauge"), "{t}");
        assert!(t.ends_with('\n'));
    }
}
