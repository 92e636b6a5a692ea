//! `load`: Vignati et al.'s grid, one table per buffer size.

use super::style::{new_table, num};

/// The human summary of `xrunlab load`, shaped like Vignati et al. Fig. 2: one table per buffer
/// size, rows = tracks, columns = plugin types, cells = max instances per track and the mean
/// DSP load measured there.
pub fn summary(
    cfg: &crate::measure::loadtest::LoadConfig,
    r: &crate::measure::loadtest::LoadResults,
) -> String {
    let mut s = format!(
        "load: {:?} driver, {} Hz, {} periods, {} trials, criterion {:?}{}; {}/{} cells\n",
        cfg.driver,
        cfg.rate,
        cfg.periods,
        crate::units::format_ns(cfg.duration_ns),
        cfg.criterion,
        match cfg.validate_ns {
            Some(v) => format!(", validated {}", crate::units::format_ns(v)),
            None => String::new(),
        },
        r.cells.len(),
        r.cells_total
    );
    for &b in &cfg.buffers {
        let mut header = vec![format!("{b} frames: tracks")];
        header.extend(
            cfg.plugins
                .iter()
                .map(|p| format!("{p}: max/track · DSP load")),
        );
        let h: Vec<&str> = header.iter().map(String::as_str).collect();
        let mut t = new_table(&h);
        for &tr in &cfg.tracks {
            let mut row = vec![num(tr)];
            for p in &cfg.plugins {
                row.push(num(match r.cell(b, tr, p) {
                    Some(c) => format!(
                        "{}{} · {:.1} % ({:.1} %/inst, limit {})",
                        c.max_per_track,
                        if c.capped { "+" } else { "" },
                        c.dsp_load_pct.mean,
                        c.dsp_load_per_instance_pct,
                        limit_text(&c.limit)
                    ),
                    None => "—".into(),
                }));
            }
            t.add_row(row);
        }
        s.push_str(&format!("{t}\n"));
    }
    let trials: usize = r.cells.iter().map(|c| c.trials.len()).sum();
    let secs = r
        .cells
        .iter()
        .fold(0u64, |a, c| a.saturating_add(c.time_spent_ns))
        / 1_000_000_000;
    s.push_str(&format!(
        "{trials} trials in {secs} s; limit = instances that fit one period by {}; + = stopped at --max-instances\n",
        r.cells
            .first()
            .map(|c| c.limit.source.as_str())
            .unwrap_or("bench")
    ));
    if r.cells.iter().any(|c| c.limit.steps.len() > 1) {
        s.push_str(
            "limit a→b: a from one instance's cost, b from the cost per instance of as many distinct \
             instances in series as a thread runs at a (the cache-realistic limit the search starts from)\n",
        );
    }
    s.push_str(&super::latency::slack_line(
        r.cells.iter().filter_map(|c| c.timer_slack_ns).max(),
    ));
    if let Some(l) = load_host_line(r) {
        s.push_str(&l);
        s.push('\n');
    }
    if let Some(f) = &r.forensics {
        s.push_str("forensics of the failed trials:\n");
        s.push_str(&super::forensics::parts(crate::report::parts::load_trials(
            r,
        )));
        s.push_str(&super::forensics::section(f));
    }
    s
}

/// A cell's physical limit; `a→b` when the bench's estimate moved with the instance count.
fn limit_text(l: &crate::measure::loadtest::PhysicalLimit) -> String {
    match (l.steps.first(), l.used()) {
        (Some(a), Some(b)) if l.steps.len() > 1 => format!("{}→{}", a.per_track, b.per_track),
        _ => l.per_track.to_string(),
    }
}

/// Failed trials whose every xrun fell where the hypervisor stole time: those maxima are
/// the host's. None when no failed trial was sampled.
pub fn load_host_line(r: &crate::measure::loadtest::LoadResults) -> Option<String> {
    let sampled: Vec<_> = r
        .cells
        .iter()
        .flat_map(|c| &c.trials)
        .filter(|t| !t.passed)
        .filter_map(|t| t.host_steal.as_ref())
        .filter(|h| h.xruns > 0)
        .collect();
    let first = sampled.first()?;
    let (marked, windows) = sampled.iter().fold((0, 0), |(m, w), h| {
        (m + h.windows_with_steal, w + h.windows)
    });
    Some(format!(
        "host: in {} of {} failed trials every xrun fell in a window where the hypervisor stole time ({:.0} % of their {:.0} ms windows had steal)",
        sampled
            .iter()
            .filter(|h| h.xruns_in_steal_windows == h.xruns)
            .count(),
        sampled.len(),
        marked as f64 * 100.0 / windows.max(1) as f64,
        first.interval_ms
    ))
}
