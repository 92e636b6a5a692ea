use super::{figure, n, us};
use crate::measure::latency::{LatencyConfig, LatencyResult, LatencyStats};
use crate::report::plot::{line_chart, Axes, Series};
use maud::{html, Markup};

pub fn section(cfg: &LatencyConfig, r: &LatencyResult) -> Markup {
    let hist: Vec<Series> = r
        .per_cpu
        .iter()
        .map(|c| Series {
            label: format!("CPU {}", c.cpu),
            points: c
                .histogram_us
                .iter()
                .map(|&(b, k)| (b as f64, k as f64))
                .collect(),
        })
        .collect();
    let mut over_time = Vec::new();
    for c in &r.per_cpu {
        for (what, f) in [
            (
                "max",
                (|p: &crate::measure::latency::SeriesPoint| p.max_ns as f64) as fn(&_) -> f64,
            ),
            ("mean", |p| p.mean_ns),
            ("min", |p| p.min_ns as f64),
        ] {
            over_time.push(Series {
                label: format!("CPU {} {what}", c.cpu),
                points: c
                    .series
                    .iter()
                    .map(|p| (p.t_s as f64, f(p) / 1e3))
                    .collect(),
            });
        }
    }
    let rows: Vec<(String, &LatencyStats)> = r
        .per_cpu
        .iter()
        .map(|c| (c.cpu.to_string(), &c.stats))
        .chain((r.per_cpu.len() > 1).then(|| ("all".to_string(), &r.overall)))
        .collect();
    let interval = cfg
        .interval_ns
        .map_or("default".into(), crate::units::format_ns);
    html! {
        h3 { "Scheduling latency" }
        p { (r.per_cpu.len()) " CPU(s), interval " (interval) ", "
            (format!("{:.1}", r.elapsed_ns as f64 / 1e9)) " s measured"
            @if r.interrupted { " (interrupted: partial result)" } }
        (figure(line_chart(&Axes { title: "Latency histogram per CPU", x_label: "latency (µs)",
                y_label: "wake-ups (log)", log_x: false, log_y: true, points_only: false, x_range: None, ..Default::default() }, &hist),
            &format!("Wake-ups per 1 µs bucket, one curve per CPU, count on a log scale (OSADL style). Wake-ups at or above the histogram bound ({}) are counted as overflows, not drawn.", crate::units::format_ns(cfg.hist_max_ns))))
        h4 { "Percentiles (µs)" }
        table.percentiles {
            tr { th { "CPU" } th { "wake-ups" } th { "min" } th { "avg" } th { "p50" } th { "p90" } th { "p99" }
                 th { "p99.9" } th { "p99.99" } th { "p99.9999" } th { "max" } th { "overflows" } }
            @for (cpu, s) in &rows {
                @let m = &s.summary;
                tr { td { (cpu) } (n(m.count)) (n(us(m.min as f64))) (n(us(m.mean))) (n(us(m.p50 as f64)))
                     (n(us(m.p90 as f64))) (n(us(m.p99 as f64))) (n(us(m.p99_9 as f64))) (n(us(m.p99_99 as f64)))
                     (n(us(m.p99_9999 as f64))) (n(us(m.max as f64))) (n(s.overflows)) }
            }
        }
        @if let (Some(cpu), Some(cycle), Some(at)) = (r.overall.max_cpu, r.overall.max_cycle, r.overall.max_at_ns) {
            p { "Maximum " (crate::units::format_ns(r.overall.summary.max)) " on CPU " (cpu) " at wake-up " (cycle)
                ", " (format!("{:.3}", at as f64 / 1e9)) " s into the run." }
        }
        (figure(line_chart(&Axes { title: "Latency over time (per second)", x_label: "time (s)",
                y_label: "latency (µs, log)", log_x: false, log_y: true, points_only: false, x_range: None, ..Default::default() }, &over_time),
            "Minimum, mean and maximum wake-up latency of each second of the run, per CPU."))
        h4 { "Missed periods and audio deadlines" }
        @if let Some(a) = cfg.audio_period {
            p { "Audio period " (a.frames) " frames @ " (a.rate) " Hz = " (crate::units::format_ns(a.period_ns())) ": a wake-up later than that misses the audio deadline." }
        } @else {
            p { "No " code { "--audio-period" } " given: only timer periods missed are counted." }
        }
        table.misses {
            tr { th { "CPU" } th { "missed timer periods" } th { "late audio periods" } th { "late audio periods per hour" } }
            @for (cpu, s) in &rows {
                tr { td { (cpu) } (n(s.missed_periods.map_or("-".into(), |m| m.to_string())))
                     (n(s.audio_late.map_or("-".into(), |m| m.to_string())))
                     (n(s.audio_late_per_hour.map_or("-".into(), |m| format!("{m:.0}")))) }
            }
        }
        @if let Some(f) = &r.forensics {
            (super::forensics::section(f))
        }
    }
}
