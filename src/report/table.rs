//! Terminal tables (comfy-table), shared by every command's human summary.

use crate::system::check::{CheckReport, Verdict};
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
