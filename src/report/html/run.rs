use super::{figure, n, plot_bars};
use crate::common::Summary;
use crate::engine::collector::XrunEvent;
use crate::measure::run::RunConfig;
use crate::measure::run::{LoadPct, RunResults};
use crate::report::plot::{line_chart, Axes, Series};
use crate::units::format_ns;
use maud::{html, Markup};

/// The exceedance curve P(X > x) through the percentiles a Summary keeps: the result
/// stores percentiles, not every cycle, so the distribution is drawn through them.
pub(crate) fn exceedance(s: &Summary) -> Vec<(f64, f64)> {
    if s.count == 0 {
        return Vec::new();
    }
    let mut pts = vec![
        (s.min, 1.0),
        (s.p50, 0.5),
        (s.p90, 0.1),
        (s.p99, 1e-2),
        (s.p99_9, 1e-3),
        (s.p99_99, 1e-4),
        (s.p99_9999, 1e-6),
    ];
    let tail = 1.0 / s.count as f64;
    // Percentiles beyond what the cycle count resolves repeat the maximum: stop there.
    pts.retain(|&(_, p)| p >= tail);
    pts.push((s.max, tail));
    pts.into_iter().map(|(v, p)| (v as f64 / 1e3, p)).collect()
}

/// The CDF P(X ≤ x) through the stored percentiles, x in µs (Cucinotta et al.'s end-time and
/// response-time CDFs); like [`exceedance`] it stops where the cycle count stops resolving.
pub(crate) fn cdf(s: &Summary) -> Vec<(f64, f64)> {
    let mut pts: Vec<(f64, f64)> = exceedance(s)
        .into_iter()
        .map(|(x, p)| (x, if p >= 1.0 { 0.0 } else { 1.0 - p }))
        .collect();
    // The maximum is where every cycle is at or below.
    if let Some(last) = pts.last_mut() {
        last.1 = 1.0;
    }
    pts
}

fn load_row(name: &str, l: &LoadPct) -> Markup {
    html! { tr { td { (name) } (n(format!("{:.1}", l.mean))) (n(format!("{:.1}", l.p50)))
    (n(format!("{:.1}", l.p99))) (n(format!("{:.1}", l.max))) } }
}

fn summary_row(name: &str, s: &Summary) -> Markup {
    html! { tr { td { (name) } (n(format_ns(s.min))) (n(format_ns(s.p50))) (n(format_ns(s.p99)))
    (n(format_ns(s.p99_9))) (n(format_ns(s.max))) (n(format_ns(s.mean.round() as u64))) } }
}

/// Per engine thread, the host stalls its CPU clock showed and its CPU's steal
/// (docs/methods.md "Host stalls per core").
fn host_stalls(x: &RunResults) -> Markup {
    let shown = x
        .host_stalls
        .iter()
        .any(|c| c.stalls > 0 || c.steal_ms.unwrap_or(0.0) > 0.0);
    let opt = |v: Option<String>| v.unwrap_or_else(|| "–".into());
    html! {
        @if let Some(prior) = &x.cost_prior {
            p { (crate::report::text::run::cost_prior_line(prior).trim_end()) }
        }
        @if shown {
            h4 { "Host stalls per engine thread" }
            table.stalls {
                tr { th { "thread" } th { "CPU" } th { "stalled cycles" } th { "beyond the work" } th { "worst" }
                     th { "worst at" } th { "xruns" } th { "tracks stalled (cycles)" } th { "CPU steal" } }
                @for c in &x.host_stalls {
                    @let tracks: Vec<String> = c.stalled_tracks.iter().map(|t| format!("{} ({})", t.track, t.cycles)).collect();
                    tr {
                        (n(c.thread))
                        (n(opt(c.cpu.map(|v| v.to_string()))))
                        (n(c.stalls))
                        (n(format_ns(c.stall_total_ns)))
                        (n(format_ns(c.stall_max_ns)))
                        (n(opt(c.worst_at_ns.map(|t| format!("{:.2} s", t as f64 / 1e9)))))
                        (n(c.stall_xruns))
                        td { (tracks.join(", ")) }
                        (n(opt(c.steal_ms.map(|ms| format!("{ms:.0} ms in {} windows", c.steal_windows.unwrap_or(0))))))
                    }
                }
            }
            p { "A stalled cycle is one whose thread's CPU clock ran at least a quarter (and 50 µs) beyond what its work was expected to cost. The clock runs only while the thread is the task on its CPU, so that time was taken by the host (a vCPU descheduled) or firmware, not by this system. CPU steal is the hypervisor's own count for that CPU." }
        }
    }
}

pub fn section(c: &RunConfig, x: &RunResults) -> Markup {
    let dist = [
        ("wake-up latency", &x.wake_latency_ns),
        ("compute wall", &x.wall_ns),
        ("driver end time", &x.end_time_ns),
        ("interference", &x.interference_ns),
    ]
    .iter()
    .map(|(l, s)| Series {
        label: l.to_string(),
        points: exceedance(s),
    })
    .collect::<Vec<_>>();
    let mut causes: Vec<(String, Vec<&XrunEvent>)> = Vec::new();
    for e in &x.xrun_events {
        let name = serde_json::to_value(e.cause)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_else(|| format!("{:?}", e.cause));
        match causes.iter_mut().find(|(n, _)| *n == name) {
            Some((_, v)) => v.push(e),
            None => causes.push((name, vec![e])),
        }
    }
    let timeline: Vec<Series> = causes
        .iter()
        .map(|(name, evs)| Series {
            label: format!("{name} ({})", evs.len()),
            points: evs
                .iter()
                .map(|e| (e.at_ns as f64 / 1e9, e.end_time_ns as f64 / 1e3))
                .collect(),
        })
        .collect();
    let loads = vec![
        ("DSP mean".to_string(), x.dsp_load_pct.mean),
        ("DSP p99".to_string(), x.dsp_load_pct.p99),
        ("DSP max".to_string(), x.dsp_load_pct.max),
        ("CPU mean".to_string(), x.cpu_load_pct.mean),
        ("CPU p99".to_string(), x.cpu_load_pct.p99),
        ("CPU max".to_string(), x.cpu_load_pct.max),
    ];
    html! {
        h3 { "Engine run" }
        p { (format!("{:?}", c.driver)) " driver, " (c.buffer_frames) " frames @ " (c.rate) " Hz (P = " (format_ns(x.period_ns))
            "), " (c.periods) " periods, " (c.tracks) " track(s) × " code { (c.chain) } ", "
            (x.threads.len()) " engine thread(s), " (c.policy.to_string()) ". "
            (x.cycles) " cycles, " (x.skipped_periods) " periods skipped." }
        @if let Some(w) = &x.watchdog {
            p.fail { "WATCHDOG: a cycle ran " (format_ns(w.stuck_ns)) " (bound " (format_ns(w.bound_ns)) ")." }
        }
        @if let Some(h) = x.host_steal.as_ref().filter(|h| h.stolen_ms > 0.0) {
            p.warn { (crate::report::text::run::host_steal_line(h).trim_end()) }
        }
        (host_stalls(x))
        h4 { "DSP load" }
        (figure(plot_bars("DSP and CPU load", "% of the period", &loads),
            "DSP load = (end − wake) / P, the JACK meaning; CPU load = engine CPU time / P. 100 % is the whole period."))
        table.load {
            tr { th { "% of period" } th { "mean" } th { "p50" } th { "p99" } th { "max" } }
            (load_row("DSP load", &x.dsp_load_pct))
            (load_row("CPU load", &x.cpu_load_pct))
        }
        h4 { "Timing distributions" }
        (figure(line_chart(&Axes { title: "Distributions (exceedance)", x_label: "time (µs, log)",
                y_label: "share of cycles above (log)", log_x: true, log_y: true, points_only: false, x_range: None, ..Default::default() }, &dist),
            &format!("Share of cycles whose value exceeds x, drawn through the stored percentiles (min, p50 … p99.9999, max). Wake-up latency is wake − ideal; driver end time is end − ideal (its CDF is 1 − this curve); the budget before an xrun is {}.", format_ns(x.budget_ns))))
        table.timing {
            tr { th { "" } th { "min" } th { "p50" } th { "p99" } th { "p99.9" } th { "max" } th { "mean" } }
            (summary_row("wake-up latency", &x.wake_latency_ns))
            (summary_row("scheduling latency", &x.sched_latency_ns))
            (summary_row("compute wall (end − wake)", &x.wall_ns))
            (summary_row("compute CPU", &x.cpu_ns))
            (summary_row("interference", &x.interference_ns))
            (summary_row("driver end time", &x.end_time_ns))
            (summary_row("driver period", &x.driver_period_ns))
        }
        h4 { "Xruns by cause" }
        table.xruns {
            tr { th { "total" } th { "late-wakeup" } th { "overload" } th { "interference" } }
            tr { (n(x.xruns.total)) (n(x.xruns.late_wakeup)) (n(x.xruns.overload)) (n(x.xruns.interference)) }
        }
        (figure(line_chart(&Axes { title: "Xruns over the run", x_label: "time (s)",
                y_label: "driver end time (µs)", log_x: false, log_y: false, points_only: true, x_range: Some((0.0, x.periods_elapsed as f64 * x.period_ns as f64 / 1e9)), ..Default::default() }, &timeline),
            &format!("Each xrun recorded ({} of {}), at its time in the run, by cause; the height is the cycle's end time after its ideal start.", x.xrun_events.len(), x.xruns.total)))
        @if let Some(f) = &x.forensics {
            (super::forensics::section(f))
        }
    }
}
