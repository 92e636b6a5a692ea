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

/// The compact per-CPU latency table: seed 004's min/avg/max plus p99, p99.99 and missed
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

/// The human summary of `xrunlab run`.
pub fn run_summary(r: &crate::engine::RunResult) -> String {
    use crate::units::format_ns;
    let c = &r.config;
    let x = &r.results;
    let mut t = new_table(&["", "p50", "p99", "max", "mean"]);
    let row = |t: &mut Table, name: &str, s: &crate::measure::stats::Summary| {
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
    let pct = |l: &crate::engine::run::LoadPct| {
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
    if x.dropped_records > 0 {
        s.push_str(&format!("  dropped records {}", x.dropped_records));
    }
    s.push('\n');
    if let Some(w) = &x.watchdog {
        s.push_str(&format!(
            "WATCHDOG: a cycle ran {} (bound {}); {} thread(s) demoted\n",
            format_ns(w.stuck_ns),
            format_ns(w.bound_ns),
            w.demoted.len()
        ));
    }
    if r.status != crate::results::Status::Complete {
        s.push_str(&format!("status: {:?} (partial result)\n", r.status));
    }
    s
}

/// The human summary of `xrunlab stress`.
pub fn stress(r: &crate::load::run::StressResults) -> String {
    use crate::units::format_ns;
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
        let st = &c.stats;
        out.push_str(&format!(
            "competing task {}: {} jobs, {} deadline misses; wake-up p50 {} max {}; response p50 {} p99 {} max {}\n",
            c.spec,
            st.jobs,
            st.deadline_misses,
            format_ns(st.wake_ns.p50),
            format_ns(st.wake_ns.max),
            format_ns(st.response_ns.p50),
            format_ns(st.response_ns.p99),
            format_ns(st.response_ns.max),
        ));
    }
    out
}

/// The `plugins bench` table: cost per frame and the physical limit per core.
pub fn bench(results: &[crate::dsp::bench::BenchResult], rate: u32, buffer: u32) -> String {
    let mut t = new_table(&[
        "plugin",
        "params",
        "inst",
        "ns/frame p50",
        "ns/frame min",
        "CPU ns/frame",
        "% core/inst",
        "inst/core",
    ]);
    for r in results {
        t.add_row(vec![
            Cell::new(&r.plugin),
            Cell::new(&r.params),
            num(r.instances),
            num(format!("{:.1}", r.ns_per_frame)),
            num(format!("{:.1}", r.ns_per_frame_min)),
            num(format!("{:.1}", r.cpu_ns_per_frame_mean)),
            num(format!("{:.2}", r.core_percent)),
            num(format!("{:.1}", r.instances_per_core)),
        ]);
    }
    format!(
        "{t}\nat {rate} Hz, {buffer} frames per block; % core and instances per core are per instance, with nothing else running\n"
    )
}
