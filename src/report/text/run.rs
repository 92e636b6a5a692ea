//! `run`: timing, loads, xruns and what the host took.

use super::style::{new_table, num};
use comfy_table::{Cell, Table};

/// Which track or chain element took the most time in the recorded overload xruns, by how
/// often it was the heaviest (from the engine's probes, `xrun_events[].heaviest`).
pub fn heaviest_line(
    events: &[crate::engine::collector::XrunEvent],
    chain: &[crate::dsp::ChainElement],
) -> Option<String> {
    let mut counts: Vec<(String, u64, u64)> = Vec::new();
    for h in events.iter().filter_map(|e| e.heaviest) {
        let label = h.label(chain);
        let ns = h.element_ns.unwrap_or(h.track_ns);
        match counts.iter_mut().find(|c| c.0 == label) {
            Some(c) => {
                c.1 += 1;
                c.2 = c.2.max(ns);
            }
            None => counts.push((label, 1, ns)),
        }
    }
    let n: u64 = counts.iter().map(|c| c.1).sum();
    counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let (label, k, worst) = counts.first()?;
    Some(format!(
        "overload xruns: the heaviest was {label} in {k} of {n} (worst {}){}\n",
        crate::units::format_ns(*worst),
        if counts.len() > 1 {
            format!(", then {}", counts[1].0)
        } else {
            String::new()
        }
    ))
}

/// The human summary of `xrunlab run`.
pub fn summary(
    c: &crate::measure::run::RunConfig,
    x: &crate::measure::run::RunResults,
    status: crate::common::Status,
) -> String {
    use crate::units::format_ns;
    let mut t = new_table(&["", "p50", "p99", "max", "mean"]);
    let row = |t: &mut Table, name: &str, s: &crate::common::Summary| {
        t.add_row(vec![
            Cell::new(name),
            num(format_ns(s.p50)),
            num(format_ns(s.p99)),
            num(format_ns(s.max)),
            num(format_ns(s.mean.round() as u64)),
        ]);
    };
    row(&mut t, "wake-up latency", &x.wake_latency_ns);
    row(&mut t, "compute wall (end−wake)", &x.wall_ns);
    row(&mut t, "compute CPU", &x.cpu_ns);
    row(&mut t, "interference", &x.interference_ns);
    row(&mut t, "driver end time", &x.end_time_ns);
    let pct = |l: &crate::measure::run::LoadPct| {
        vec![
            num(format!("{:.1} %", l.p50)),
            num(format!("{:.1} %", l.p99)),
            num(format!("{:.1} %", l.max)),
            num(format!("{:.1} %", l.mean)),
        ]
    };
    let mut dsp = vec![Cell::new("DSP load")];
    dsp.extend(pct(&x.dsp_load_pct));
    t.add_row(dsp);
    let mut cpu = vec![Cell::new("CPU load")];
    cpu.extend(pct(&x.cpu_load_pct));
    t.add_row(cpu);
    let mut s = format!(
        "run: {:?} driver, {} frames @ {} Hz (P = {}), {} periods, {} track(s) × '{}', {} engine thread(s), {}\n",
        c.driver,
        c.buffer_frames,
        c.rate,
        format_ns(x.period_ns),
        c.periods,
        c.tracks,
        c.chain,
        x.threads.len(),
        c.policy
    );
    s.push_str(&format!("{t}\n"));
    s.push_str(&super::latency::slack_line(x.timer_slack_ns));
    s.push_str(&format!(
        "cycles {}  xruns {} (late-wakeup {}, overload {}, interference {})  skipped periods {}",
        x.cycles,
        x.xruns.total,
        x.xruns.late_wakeup,
        x.xruns.overload,
        x.xruns.interference,
        x.skipped_periods
    ));
    if x.xruns.inherited > 0 {
        s.push_str(&format!(
            "  ({} late only by the previous xrun's backlog, counted under its cause)",
            x.xruns.inherited
        ));
    }
    if x.dropped_records > 0 {
        s.push_str(&format!("  dropped records {}", x.dropped_records));
    }
    s.push('\n');
    if let Some(l) = heaviest_line(&x.xrun_events, &c.chain_elements) {
        s.push_str(&l);
    }
    if let Some(w) = &x.watchdog {
        s.push_str(&format!(
            "WATCHDOG: a cycle ran {} (bound {}); {} thread(s) demoted\n",
            format_ns(w.stuck_ns),
            format_ns(w.bound_ns),
            w.demoted.len()
        ));
    }
    if let Some(h) = x.host_steal.as_ref().filter(|h| h.stolen_ms > 0.0) {
        s.push_str(&host_steal_line(h));
    }
    s.push_str(&host_stall_lines(x));
    if let Some(a) = &x.alsa {
        s.push_str(&alsa_line(a));
    }
    if let Some(st) = &x.stress {
        s.push_str(&super::stress::stress_line(st));
    }
    if let Some(c) = &x.compete {
        s.push_str(&super::stress::compete_line(c));
    }
    if let Some(f) = &x.forensics {
        s.push_str(&super::forensics::section(f));
    }
    if status != crate::common::Status::Complete {
        s.push_str(&format!("status: {:?} (partial result)\n", status));
    }
    s
}

/// The xruns set against the host's steal: if they cluster in the windows where the
/// hypervisor took time, the host, not this system, made them.
pub fn host_steal_line(h: &crate::system::steal::HostSteal) -> String {
    let pct = |a: u64, b: u64| {
        if b == 0 {
            0.0
        } else {
            a as f64 * 100.0 / b as f64
        }
    };
    format!(
        "host: {:.0} ms stolen by the hypervisor; {} of {} xruns ({:.0} %) fell in the {:.0} % of {:.0} ms windows where it stole time\n",
        h.stolen_ms,
        h.xruns_in_steal_windows,
        h.xruns,
        pct(h.xruns_in_steal_windows, h.xruns),
        pct(h.windows_with_steal, h.windows),
        h.interval_ms
    )
}

/// Per engine thread, the host stalls its CPU clock showed and its CPU's steal
/// (docs/methods.md "Host stalls per core"), after the prior the work was judged
/// against; empty when there is nothing to say.
pub fn host_stall_lines(x: &crate::measure::run::RunResults) -> String {
    use crate::units::format_ns;
    let mut s = x
        .cost_prior
        .as_ref()
        .map(cost_prior_line)
        .unwrap_or_default();
    let any = |c: &crate::measure::run::CoreStalls| c.stalls > 0 || c.steal_ms.unwrap_or(0.0) > 0.0;
    if !x.host_stalls.iter().any(any) {
        return s;
    }
    s.push_str("host stalls per engine thread (its CPU clock ran beyond the expected work):\n");
    for c in &x.host_stalls {
        s.push_str(&format!("  thread {}", c.thread));
        if let Some(cpu) = c.cpu {
            s.push_str(&format!(" (CPU {cpu})"));
        }
        if c.stalls == 0 {
            s.push_str(": no stall");
        } else {
            s.push_str(&format!(
                ": {} stalled cycle(s), {} in all, worst {}",
                c.stalls,
                format_ns(c.stall_total_ns),
                format_ns(c.stall_max_ns)
            ));
            if let (Some(k), Some(at)) = (c.worst_cycle, c.worst_at_ns) {
                s.push_str(&format!(" (cycle {k}, {:.2} s in)", at as f64 / 1e9));
            }
            s.push_str(&format!(", {} of them xruns", c.stall_xruns));
            if !c.stalled_tracks.is_empty() {
                let t: Vec<String> = c
                    .stalled_tracks
                    .iter()
                    .map(|t| format!("{} ({}×)", t.track, t.cycles))
                    .collect();
                s.push_str(&format!("; tracks {}", t.join(", ")));
            }
        }
        if let Some(ms) = c.steal_ms {
            s.push_str(&format!(
                "; steal {ms:.0} ms in {} windows",
                c.steal_windows.unwrap_or(0)
            ));
        }
        s.push('\n');
    }
    s
}

/// The cost the run's work was judged against, and whether the run agreed with it.
pub fn cost_prior_line(p: &crate::measure::run::PriorReport) -> String {
    format!(
        "expected work: {} per track and cycle from {}{}{}\n",
        crate::units::format_ns(p.track_cycle_ns),
        p.prior
            .bench_file
            .as_deref()
            .map(|f| format!("the bench in {f}"))
            .unwrap_or_else(|| {
                if p.prior
                    .elements
                    .iter()
                    .any(|e| matches!(e, crate::engine::prior::ElementCost::Bench { .. }))
                {
                    "the physical limit's bench".into()
                } else {
                    "burn's calibration".into()
                }
            }),
        p.run_median_ratio
            .map(|r| format!("; the median cycle took {r:.2}× that"))
            .unwrap_or_default(),
        if p.used {
            ""
        } else {
            ", beyond 1.25×: judged against the run's own cost instead"
        }
    )
}

/// The ALSA device as negotiated, the delay it reported and the xruns it recovered.
fn alsa_line(a: &crate::driver::alsa::AlsaReport) -> String {
    format!(
        "alsa: '{}' {} {} {}ch, period {} × {} = buffer {} frames, {}; delay {:.0} frames ({}), {} xruns recovered\n",
        a.device,
        a.format,
        a.access.as_str(),
        a.channels,
        a.period_frames,
        a.periods,
        a.buffer_frames,
        if a.capture { "duplex" } else { "playback only" },
        a.delay_frames.mean,
        crate::units::format_ns(a.delay_frames.mean_ns.round() as u64),
        a.xruns_recovered
    )
}
