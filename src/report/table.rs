//! Terminal tables (comfy-table), shared by every command's human summary.

use crate::system::check::{CheckReport, Verdict};
use crate::system::Environment;
use comfy_table::{presets::UTF8_BORDERS_ONLY, Cell, CellAlignment, ContentArrangement, Table};

/// A table with the house style: compact borders, wrapped to the terminal when there is one.
pub fn new_table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(header.iter().map(Cell::new));
    if t.width().is_none() {
        // Not a terminal: keep lines readable in logs.
        t.set_width(140);
    }
    t
}

/// A right-aligned cell for numbers.
pub fn num(s: impl ToString) -> Cell {
    Cell::new(s.to_string()).set_alignment(CellAlignment::Right)
}

/// One line naming the machine a check or measurement describes.
pub fn system_line(env: &Environment) -> String {
    let mut parts = vec![format!(
        "{}: Linux {} ({})",
        if env.hostname.is_empty() {
            "?"
        } else {
            &env.hostname
        },
        env.kernel,
        env.kernel_version
    )];
    let mut cpus = format!("{} CPUs", env.cpus.count);
    if !env.cpus.model.is_empty() {
        cpus.push_str(&format!(" ({})", env.cpus.model));
    }
    parts.push(cpus);
    if let Some(v) = &env.virtualization {
        parts.push(format!("virtualised: {v}"));
    }
    if let Some(st) = env.hypervisor_steal {
        parts.push(format!(
            "{:.1} % stolen by the host ({:.0} ms)",
            st.share_pct, st.stolen_ms
        ));
    }
    if let Some(c) = &env.container {
        parts.push(format!("container: {c}"));
    }
    parts.join(", ")
}

pub fn checks(r: &CheckReport) -> String {
    let mut t = new_table(&["check", "", "observed", "advice"]);
    for c in &r.checks {
        let v = match c.verdict {
            Verdict::Ok => "ok",
            Verdict::Warn => "WARN",
            Verdict::Fail => "FAIL",
        };
        t.add_row(vec![
            Cell::new(&c.title),
            Cell::new(v),
            Cell::new(&c.observed),
            Cell::new(&c.advice),
        ]);
    }
    format!("{t}\n{} ok, {} warn, {} fail\n", r.ok, r.warn, r.fail)
}

/// µs with one decimal, the unit cyclictest users read.
fn us(ns: impl Into<f64>) -> String {
    format!("{:.1}", ns.into() / 1e3)
}

/// The compact per-CPU latency table: Huang et al.'s min/avg/max plus p99, p99.99 and missed
/// periods (and late audio periods with `--audio-period`).
pub fn latency(
    cfg: &crate::measure::latency::LatencyConfig,
    r: &crate::measure::latency::LatencyResult,
) -> String {
    use crate::units::format_ns;
    let audio = cfg.audio_period;
    let mut header = vec![
        "CPU",
        "wake-ups",
        "min µs",
        "avg µs",
        "max µs",
        "p99 µs",
        "p99.99 µs",
        "missed",
    ];
    let late_label = audio.map(|a| format!("late > {}", format_ns(a.period_ns())));
    if let Some(l) = &late_label {
        header.push(l);
        header.push("late/h");
    }
    let mut t = new_table(&header);
    let row = |label: String, s: &crate::measure::latency::LatencyStats| {
        let mut cells = vec![
            Cell::new(label),
            num(s.summary.count),
            num(us(s.summary.min as f64)),
            num(us(s.summary.mean)),
            num(us(s.summary.max as f64)),
            num(us(s.summary.p99 as f64)),
            num(us(s.summary.p99_99 as f64)),
            num(s.missed_periods.map_or("-".into(), |m| m.to_string())),
        ];
        if audio.is_some() {
            cells.push(num(s.audio_late.map_or("-".into(), |m| m.to_string())));
            cells.push(num(s
                .audio_late_per_hour
                .map_or("-".into(), |m| format!("{m:.0}"))));
        }
        cells
    };
    for c in &r.per_cpu {
        t.add_row(row(c.cpu.to_string(), &c.stats));
    }
    if r.per_cpu.len() > 1 {
        t.add_row(row("all".into(), &r.overall));
    }
    let mut out = format!("{t}\n");
    let o = &r.overall;
    if let (Some(cpu), Some(cycle), Some(at)) = (o.max_cpu, o.max_cycle, o.max_at_ns) {
        out.push_str(&format!(
            "max {} on CPU {cpu} at wake-up {cycle}, {:.3} s into the run\n",
            format_ns(o.summary.max),
            at as f64 / 1e9
        ));
    }
    if o.overflows > 0 {
        out.push_str(&format!(
            "{} wake-ups at or above the histogram bound ({})\n",
            o.overflows,
            format_ns(cfg.hist_max_ns)
        ));
    }
    if let Some(f) = &r.fail_above {
        out.push_str(&format!(
            "--fail-above: {} = {} {} {}\n",
            crate::measure::latency::percentile_label(&f.percentile),
            format_ns(f.value_ns),
            if f.crossed { ">" } else { "<=" },
            format_ns(f.threshold_ns)
        ));
    }
    if r.interrupted {
        out.push_str("interrupted: partial result\n");
    }
    out
}

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
pub fn run_summary(r: &crate::measure::run::RunResult) -> String {
    use crate::units::format_ns;
    let c = &r.config;
    let x = &r.results;
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
        s.push_str(&stress_line(st));
    }
    if let Some(c) = &x.compete {
        s.push_str(&compete_line(c));
    }
    if let Some(f) = &x.forensics {
        s.push_str(&forensics(f));
    }
    if r.status != crate::common::Status::Complete {
        s.push_str(&format!("status: {:?} (partial result)\n", r.status));
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

/// Huang et al.'s Table 2 shape: min/avg/max (and p99) per phase and CPU, phases side by side.
pub fn latency_phases(phases: &[(&str, &crate::measure::latency::LatencyResult)]) -> String {
    let mut t = new_table(&[
        "phase", "CPU", "wake-ups", "min µs", "avg µs", "max µs", "p99 µs", "missed",
    ]);
    for (name, r) in phases {
        let mut rows: Vec<(String, &crate::measure::latency::LatencyStats)> = r
            .per_cpu
            .iter()
            .map(|c| (c.cpu.to_string(), &c.stats))
            .collect();
        if r.per_cpu.len() > 1 {
            rows.push(("all".into(), &r.overall));
        }
        for (cpu, s) in rows {
            t.add_row(vec![
                Cell::new(*name),
                Cell::new(cpu),
                num(s.summary.count),
                num(us(s.summary.min as f64)),
                num(us(s.summary.mean)),
                num(us(s.summary.max as f64)),
                num(us(s.summary.p99 as f64)),
                num(s.missed_periods.map_or("-".into(), |m| m.to_string())),
            ]);
        }
    }
    let mut out = format!("{t}\n");
    if phases.iter().any(|(_, r)| r.interrupted) {
        out.push_str("interrupted: partial result\n");
    }
    out
}

/// One line saying what load ran.
pub fn stress_line(st: &crate::stress::StressRecord) -> String {
    let mut s = format!(
        "under stress: {} (backend {}, {} process(es){})\n",
        st.presets.join(","),
        st.backend,
        st.processes.len(),
        st.stress_ng
            .as_ref()
            .map(|n| format!(", stress-ng {}", n.version))
            .unwrap_or_default()
    );
    for k in &st.skipped {
        s.push_str(&format!("note: {}: {}\n", k.preset, k.reason));
    }
    for w in &st.warnings {
        s.push_str(&format!("warning: {w}\n"));
    }
    s
}

/// One line of the competing periodic task's statistics.
pub fn compete_line(c: &crate::stress::PeriodicResult) -> String {
    use crate::units::format_ns;
    let st = &c.stats;
    format!(
        "competing task {}: {} jobs, {} deadline misses; wake-up p50 {} max {}; response p50 {} p99 {} max {}\n",
        c.spec,
        st.jobs,
        st.deadline_misses,
        format_ns(st.wake_ns.p50),
        format_ns(st.wake_ns.max),
        format_ns(st.response_ns.p50),
        format_ns(st.response_ns.p99),
        format_ns(st.response_ns.max),
    )
}

/// The human summary of `xrunlab load`, shaped like Vignati et al. Fig. 2: one table per buffer
/// size, rows = tracks, columns = plugin types, cells = max instances per track and the mean
/// DSP load measured there.
pub fn load_summary(
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
    if let Some(l) = load_host_line(r) {
        s.push_str(&l);
        s.push('\n');
    }
    if let Some(f) = &r.forensics {
        s.push_str("forensics of the failed trials:\n");
        s.push_str(&forensics_parts(load_trial_parts(r)));
        s.push_str(&forensics(f));
    }
    s
}

/// Each failed load trial's forensics, labelled by its cell and instance count.
pub fn load_trial_parts(
    r: &crate::measure::loadtest::LoadResults,
) -> Vec<(String, &crate::trace::Forensics)> {
    r.cells
        .iter()
        .flat_map(|c| {
            c.trials.iter().filter_map(move |t| {
                let label = format!(
                    "{} frames, {} track(s), {} × {}",
                    c.buffer_frames, c.tracks, t.instances_per_track, c.plugin
                );
                t.forensics.as_ref().map(|f| (label, f))
            })
        })
        .collect()
}

/// Most parts [`forensics_parts`] lists; the result has them all.
const PARTS_SHOWN: usize = 20;

/// One line per traced part of a measurement (a failed load trial, a sched row, a
/// latencytest phase): its windows and the first row of its culprit table.
pub fn forensics_parts(parts: Vec<(String, &crate::trace::Forensics)>) -> String {
    use crate::units::format_ns;
    let mut s = String::new();
    for (label, f) in parts.iter().take(PARTS_SHOWN) {
        s.push_str(&match f.culprits.first() {
            Some(c) => format!(
                "  {label}: {} {}(s); top culprit {} (top in {}, took {}, worst {})\n",
                f.windows_total,
                f.windows_of,
                c.culprit.label(),
                c.explained,
                format_ns(c.total_ns),
                format_ns(c.worst_ns)
            ),
            None => format!(
                "  {label}: {} {}(s); nobody took their time\n",
                f.windows_total, f.windows_of
            ),
        });
    }
    if parts.len() > PARTS_SHOWN {
        s.push_str(&format!(
            "  … and {} more in the result\n",
            parts.len() - PARTS_SHOWN
        ));
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

/// `xrunlab sched`: one row per policy variant, Cucinotta et al.'s Table 1/3 columns plus the
/// competitor's response times. Times in µs (competitor in ms).
pub fn sched_summary(r: &crate::measure::sched::SchedResults) -> String {
    let us = |ns: f64| format!("{:.0}", ns / 1000.0);
    let ms = |ns: u64| format!("{:.2}", ns as f64 / 1e6);
    let mut t = new_table(&[
        "row",
        "period min/avg/max/std µs",
        "end time min/p99/max µs",
        "CPU avg µs",
        "xruns",
        "Set Q avg/max µs (bumps)",
        "compete resp p50/p99/max ms",
        "compete misses",
    ]);
    for row in &r.rows {
        let e = &row.engine;
        let p = &row.driver_period;
        let end = &e.end_time_ns;
        let q = if row.q_series.is_empty() {
            "-".to_string()
        } else {
            let n = row.q_series.len() as f64;
            let avg = row.q_series.iter().map(|x| x.set_q_ns as f64).sum::<f64>() / n;
            let max = row.q_series.iter().map(|x| x.set_q_ns).max().unwrap_or(0);
            format!(
                "{}/{} ({})",
                us(avg),
                us(max as f64),
                row.bumps_xrun + row.bumps_client
            )
        };
        let (resp, miss) = match &row.compete {
            Some(c) => (
                format!(
                    "{}/{}/{}",
                    ms(c.response_ns.p50),
                    ms(c.response_ns.p99),
                    ms(c.response_ns.max)
                ),
                format!("{}/{}", c.deadline_misses, c.jobs),
            ),
            None => ("-".into(), "-".into()),
        };
        t.add_row(vec![
            Cell::new(&row.label),
            num(format!(
                "{}/{}/{}/{:.1}",
                us(p.min_ns as f64),
                us(p.mean_ns),
                us(p.max_ns as f64),
                p.std_ns / 1000.0
            )),
            num(format!(
                "{}/{}/{}",
                us(end.min as f64),
                us(end.p99 as f64),
                us(end.max as f64)
            )),
            num(us(e.cpu_ns.mean)),
            num(super::xruns_and_skipped(e)),
            num(q),
            num(resp),
            num(miss),
        ]);
    }
    let mut s = format!("period P = {} µs\n{t}\n", r.period_ns / 1000);
    if let Some(f) = &r.forensics {
        s.push_str("forensics per row:\n");
        s.push_str(&forensics_parts(sched_row_parts(r)));
        s.push_str(&forensics(f));
    }
    s
}

/// Each traced event setting's forensics, labelled by driver, scenario and period.
pub fn event_run_parts(
    r: &crate::measure::event::EventResults,
) -> Vec<(String, &crate::trace::Forensics)> {
    r.runs
        .iter()
        .filter_map(|x| {
            let label = format!(
                "{} {} {} frames",
                x.driver.name(),
                x.scenario.name(),
                x.period_frames
            );
            x.forensics.as_ref().map(|f| (label, f))
        })
        .collect()
}

/// Each traced latencytest phase's forensics, labelled by the phase.
pub fn latencytest_phase_parts(
    r: &crate::measure::latencytest::LatencytestResult,
) -> Vec<(String, &crate::trace::Forensics)> {
    r.phases
        .iter()
        .filter_map(|p| p.forensics.as_ref().map(|f| (p.name.clone(), f)))
        .collect()
}

/// Each traced sched row's forensics, labelled by the row.
pub fn sched_row_parts(
    r: &crate::measure::sched::SchedResults,
) -> Vec<(String, &crate::trace::Forensics)> {
    r.rows
        .iter()
        .filter_map(|x| x.engine.forensics.as_ref().map(|f| (x.label.clone(), f)))
        .collect()
}

/// The human summary of `xrunlab stress`.
pub fn stress(r: &crate::stress::run::StressResults) -> String {
    let s = &r.stress;
    let mut out = String::new();
    let mut t = new_table(&["backend", "presets", "command", "exit"]);
    for p in &s.processes {
        t.add_row(vec![
            p.backend.clone(),
            p.presets.join(","),
            p.argv.join(" "),
            format!("{}{}", p.exit, if p.ended_early { " (early)" } else { "" }),
        ]);
    }
    if let Some(ng) = &s.stress_ng {
        out.push_str(&format!("stress-ng {} ({})\n", ng.version, ng.path));
    }
    out.push_str(&format!("{t}\n"));
    if !s.metrics.is_empty() {
        let mut m = new_table(&["stressor", "source", "bogo ops", "seconds", "ops/s"]);
        for x in &s.metrics {
            m.add_row(vec![
                x.stressor.clone().into(),
                x.source.clone().into(),
                num(format!("{:.0}", x.bogo_ops)),
                num(format!("{:.2}", x.real_time_s)),
                num(format!("{:.1}", x.bogo_ops_per_s)),
            ]);
        }
        out.push_str(&format!("{m}\n"));
    }
    for k in &s.skipped {
        out.push_str(&format!("note: {}: {}\n", k.preset, k.reason));
    }
    for w in &s.warnings {
        out.push_str(&format!("warning: {w}\n"));
    }
    if let Some(c) = &r.compete {
        out.push_str(&compete_line(c));
    }
    out
}

/// The `plugins bench` table: cost per frame and the physical limit per core.
/// `plugins bench`: one row per plugin and instance count K, the counts of a plugin together
/// so its cost per instance reads as a curve of K (with its ratio to the first K when a
/// plugin was measured at several).
pub fn bench(results: &[crate::dsp::bench::BenchResult], rate: u32, buffer: u32) -> String {
    use crate::units::format_ns;
    let label = |r: &crate::dsp::bench::BenchResult| {
        if r.params.is_empty() {
            r.plugin.clone()
        } else {
            format!("{}({})", r.plugin, r.params)
        }
    };
    let curve = results.iter().any(|r| {
        results
            .iter()
            .any(|o| label(o) == label(r) && o.instances != r.instances)
    });
    let mut header = vec!["plugin", "K", "ns/f mean"];
    if curve {
        header.push("× first K");
    }
    header.extend([
        "block mean",
        "p50",
        "p99",
        "p99.9",
        "max",
        "ns/f median",
        "CPU ns/f",
        "inst/core",
    ]);
    let mut t = new_table(&header);
    // Names stay whole; the numbers' headers wrap instead.
    if let Some(c) = t.column_mut(0) {
        c.set_constraint(comfy_table::ColumnConstraint::ContentWidth);
    }
    let dash = || num("—");
    for r in results {
        let mut row = vec![
            Cell::new(label(r)),
            num(r.instances),
            r.mean_ns_per_frame
                .map_or_else(dash, |m| num(format!("{m:.1}"))),
        ];
        if curve {
            let first = results.iter().find(|o| label(o) == label(r));
            row.push(
                match (first.and_then(|f| f.mean_ns_per_frame), r.mean_ns_per_frame) {
                    (Some(f), Some(m)) if f > 0.0 => num(format!("{:.2}×", m / f)),
                    _ => dash(),
                },
            );
        }
        match &r.per_block {
            Some(b) => row.extend([
                num(format_ns(b.mean_ns.round() as u64)),
                num(format_ns(b.p50_ns)),
                num(format_ns(b.p99_ns)),
                num(format_ns(b.p999_ns)),
                num(format_ns(b.max_ns)),
            ]),
            None => row.extend((0..5).map(|_| dash())),
        }
        row.extend([
            num(format!("{:.1}", r.ns_per_frame)),
            num(format!("{:.1}", r.cpu_ns_per_frame_mean)),
            num(format!("{:.1}", r.instances_per_core)),
        ]);
        t.add_row(row);
    }
    let signal = results
        .first()
        .map_or("white noise", |r| r.signal_description.as_str());
    let harness = results
        .iter()
        .filter_map(|r| r.per_block.map(|b| b.harness_ns))
        .max()
        .map_or(String::new(), |h| {
            format!(", the harness alone (input copy, clock read) {h} ns")
        });
    format!(
        "plugins bench at {rate} Hz, {buffer} frames per block, input {signal}\n{t}\n\
         K: distinct instances in series; ns/f: ns per frame per instance.\n\
         ns/f mean: all timed blocks' wall time / frames / K (comparable with lv2bench, which feeds silence).\n\
         block mean … max: wall time of one block through all K instances{harness}.\n\
         ns/f median: the median ~50 µs group, robust against host steal; inst/core (the physical limit, \
         nothing else running) derives from it. CPU: thread CPU time per frame.\n"
    )
}

/// A rate per hour with 2–3 significant digits.
pub fn per_hour(x: f64) -> String {
    if x == 0.0 {
        "0".into()
    } else if x >= 1e4 {
        format!("{x:.1e}")
    } else if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else if x >= 0.01 {
        format!("{x:.2}")
    } else {
        format!("{x:.1e}")
    }
}

/// `rate [low, high]`, or `< high` when the data only bounds it.
pub fn rate_cell(r: &crate::measure::predict::Rate) -> String {
    if r.upper_bound && r.low > 0.0 {
        // Too few samples for a rate, enough to place it above the lower end.
        format!("< {} (≥ {})", per_hour(r.high), per_hour(r.low))
    } else if r.upper_bound {
        format!("< {}", per_hour(r.high))
    } else {
        format!(
            "{} [{}, {}]",
            per_hour(r.per_hour),
            per_hour(r.low),
            per_hour(r.high)
        )
    }
}

/// A measurement length a person would type: seconds, minutes, hours or days.
pub fn span(ns: u64) -> String {
    let s = ns as f64 / 1e9;
    if s < 120.0 {
        format!("{:.0} s", s.ceil())
    } else if s < 7_200.0 {
        format!("{:.0} min", (s / 60.0).ceil())
    } else if s < 172_800.0 {
        format!("{:.1} h", s / 3_600.0)
    } else {
        format!("{:.1} days", s / 86_400.0)
    }
}

/// The outlook of one predicted row, with what would settle a marginal one.
pub fn outlook_cell(r: &crate::measure::predict::PredictRow) -> String {
    let mut s = r.outlook.word().to_string();
    if r.overload {
        s.push_str(" (overload)");
    }
    if let Some(t) = r.measure_for_ns {
        s.push_str(&format!(" (measure {})", span(t)));
    }
    if r.censored {
        s.push_str(" *");
    }
    s
}

/// `predict`: one table per latency input and period count.
pub fn predict(
    cfg: &crate::measure::predict::PredictConfig,
    r: &crate::measure::predict::PredictResults,
) -> String {
    use crate::units::format_ns;
    let mut s = String::new();
    for l in &r.latency {
        let stress = if l.stress.is_empty() {
            String::new()
        } else {
            format!(", under {}", l.stress.join(","))
        };
        s.push_str(&format!(
            "latency {}: {} ({}{stress}): {} wake-ups every {} on {} CPU(s), {} of CPU time, max {}\n",
            l.label,
            l.file,
            l.source,
            l.samples,
            format_ns(l.interval_ns),
            l.cpus.len(),
            span(l.observed_ns),
            format_ns(l.max_ns),
        ));
        if let Some(from) = l.censored_above_ns {
            s.push_str(&format!(
                "  * {} wake-ups above {} are known only by their count: taken at the maximum\n",
                l.censored,
                format_ns(from)
            ));
        }
    }
    s.push_str(&format!("compute: {}\n", r.compute_description));
    s.push_str(&format!("{}\n", cfg.holds.describe()));
    let ms = |ns: f64| format!("{:.3}", ns / 1e6);
    for tb in &r.tables {
        s.push_str(&format!(
            "\n{}, {} periods, {} Hz: target {}/h\n",
            tb.latency,
            tb.periods,
            cfg.rate,
            per_hour(cfg.target_per_hour)
        ));
        let mut t = new_table(&[
            "buffer",
            "P",
            "budget",
            "compute",
            "P(miss)",
            "xruns/h (95 %)",
            "episodes/h (95 %)",
            "cyc/ep",
            "outlook",
        ]);
        for x in &tb.rows {
            t.add_row(vec![
                num(x.buffer_frames),
                num(ms(x.period_ns)),
                num(ms(x.budget_ns)),
                num(if x.compute_max_ns > x.compute_mean_ns * 1.0005 {
                    format!("{}/{}", ms(x.compute_mean_ns), ms(x.compute_max_ns))
                } else {
                    ms(x.compute_mean_ns)
                }),
                num(if x.p_miss == 0.0 || x.p_miss == 1.0 {
                    format!("{}", x.p_miss)
                } else {
                    format!("{:.1e}", x.p_miss)
                }),
                num(rate_cell(&x.xruns_per_hour)),
                num(rate_cell(&x.episodes_per_hour)),
                num(format!("{:.1}", x.cycles_per_episode)),
                Cell::new(outlook_cell(x)),
            ]);
        }
        s.push_str(&format!("{t}\n"));
        s.push_str(
            "P, budget (n-1)·P and compute (mean/max) in ms; P(miss): one cycle's; cyc/ep: late cycles per episode when the driver catches up\n",
        );
        s.push_str(&match tb.smallest_ok_frames {
            Some(f) => format!(
                "smallest buffer within {}/h: {f} frames\n",
                per_hour(cfg.target_per_hour)
            ),
            None => format!(
                "no buffer size is surely within {}/h\n",
                per_hour(cfg.target_per_hour)
            ),
        });
    }
    s
}

/// `verdict`: the headline, the table per buffer size, causes, advice and gaps.
pub fn verdict(
    cfg: &crate::results::verdict::VerdictConfig,
    r: &crate::results::verdict::VerdictResults,
) -> String {
    use super::verdict::{row_cells, HEADER, PLUGINS_COLUMN};
    let mut s = format!("VERDICT: {}\n", r.headline);
    s.push_str(&format!(
        "{} Hz, {} periods, target {}/h; {}; compute: {}\n",
        cfg.rate,
        cfg.periods,
        per_hour(cfg.target_per_hour),
        cfg.holds.describe(),
        r.compute
    ));
    // The headroom column is long: below the table, for the sizes a grid measured.
    let keep = |i: usize| i != PLUGINS_COLUMN;
    let header: Vec<&str> = HEADER
        .iter()
        .enumerate()
        .filter(|(i, _)| keep(*i))
        .map(|(_, h)| *h)
        .collect();
    let mut t = new_table(&header);
    let mut headroom = Vec::new();
    for row in &r.rows {
        let all = row_cells(row);
        if !row.plugins.is_empty() {
            headroom.push(format!(
                "{} frames: {}",
                row.buffer_frames, all[PLUGINS_COLUMN]
            ));
        }
        let mut cells: Vec<Cell> = all
            .into_iter()
            .enumerate()
            .filter(|(i, _)| keep(*i))
            .map(|(_, c)| Cell::new(c))
            .collect();
        if r.recommended_frames == Some(row.buffer_frames) {
            cells = cells
                .into_iter()
                .map(|c| c.add_attribute(comfy_table::Attribute::Bold))
                .collect();
        }
        t.add_row(cells);
    }
    s.push_str(&format!("{t}\n"));
    if !headroom.is_empty() {
        s.push_str(&format!(
            "Headroom (load grid, most instances per track at 1/2/… tracks): {}\n",
            headroom.join("; ")
        ));
    }
    if !r.causes.is_empty() {
        s.push_str("Causes of the xruns seen:\n");
        for c in &r.causes {
            s.push_str(&format!(
                "  {:>5.1} %  {} ({} xruns in {}): {}\n",
                c.share_pct,
                c.cause,
                c.xruns,
                c.files.join(", "),
                c.meaning
            ));
        }
    }
    if !r.culprits.is_empty() {
        s.push_str("Culprits named by kernel tracing (--forensics):\n");
        for c in &r.culprits {
            s.push_str(&format!(
                "  {}: top in {}, took {} in all, worst {} ({})\n",
                c.culprit,
                c.explained,
                crate::units::format_ns(c.total_ns),
                crate::units::format_ns(c.worst_ns),
                c.files.join(", ")
            ));
        }
    }
    if !r.advice.is_empty() {
        s.push_str("What to fix first:\n");
        for (i, a) in r.advice.iter().enumerate() {
            s.push_str(&format!(
                "  {}. [{}] {}: {}\n     evidence: {}\n",
                i + 1,
                a.verdict,
                a.title,
                a.advice,
                a.evidence.join("; ")
            ));
        }
    }
    for g in &r.gaps {
        s.push_str(&format!("note: {g}\n"));
    }
    s
}

/// The culprit table of a `--forensics` section: who took the time of the xruns (or spikes).
pub fn forensics(f: &crate::trace::Forensics) -> String {
    use crate::trace::WakeVerdict;
    use crate::units::format_ns;
    let mut s = format!(
        "forensics: {} {}(s) explained from {} trace events on CPU {}{}\n",
        f.windows_total,
        f.windows_of,
        f.events,
        crate::rt::affinity::format_cpu_list(&f.cpus),
        if f.lost_events > 0 {
            format!(" ({} events LOST: figures are lower bounds)", f.lost_events)
        } else {
            String::new()
        }
    );
    if f.windows_total == 0 {
        return s;
    }
    let mut t = new_table(&[
        "culprit",
        "cpu",
        "top in",
        "present in",
        "time taken",
        "worst",
    ]);
    for row in f.culprits.iter().take(10) {
        t.add_row(vec![
            Cell::new(row.culprit.label()),
            num(row.cpu.map(|c| c.to_string()).unwrap_or_default()),
            num(row.explained),
            num(row.present),
            num(format_ns(row.total_ns)),
            num(format_ns(row.worst_ns)),
        ]);
    }
    s.push_str(&format!("{t}\n"));
    if f.culprits.len() > 10 {
        s.push_str(&format!(
            "… and {} more culprits in the result\n",
            f.culprits.len() - 10
        ));
    }
    let count = |v: WakeVerdict| f.windows.iter().filter(|w| w.wakeup.verdict == v).count();
    s.push_str(&format!(
        "wake-ups: {} came late (timer/IRQ), {} runnable but not scheduled, {} not traced (no sleep or lost)\n",
        count(WakeVerdict::WakeupLate),
        count(WakeVerdict::NotScheduled),
        count(WakeVerdict::NoWakeupTraced)
    ));
    if let Some(p) = &f.csv_file {
        s.push_str(&format!("attributed windows: {p}\n"));
    }
    s
}
