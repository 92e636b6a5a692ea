//! `latencytest`: Senoner's diagrams, one per phase — t3 − t1 (the whole loop) and t2 − t1
//! (the work alone) over time, against the fragment and buffer times — and its result list.

use super::{figure, n};
use crate::measure::latencytest::{LatencytestConfig, LatencytestResult, Phase};
use crate::report::plot::{decimate, hline, line_chart, Axes, Series};
use crate::units::format_ns;
use maud::{html, Markup};

/// Points per curve: enough to see every spike at report width, small enough for a long phase.
const MAX_POINTS: usize = 3000;

fn ms(ns: u64) -> String {
    format!("{:.2}", ns as f64 / 1e6)
}

fn diagram(r: &LatencytestResult, p: &Phase) -> String {
    let s = &p.series;
    let curve = |label: &str, v: &[u64]| Series {
        label: label.into(),
        points: decimate(
            &s.t1_ns
                .iter()
                .zip(v)
                .map(|(&t, &d)| (t as f64 / 1e9, d as f64 / 1e6))
                .collect::<Vec<_>>(),
            MAX_POINTS,
        ),
    };
    let end = s
        .t1_ns
        .last()
        .map_or(p.elapsed_ns as f64 / 1e9, |&t| t as f64 / 1e9);
    let series = vec![
        curve("t3 − t1 (loop)", &s.loop_ns),
        curve("t2 − t1 (work)", &s.burn_ns),
        hline(
            format!("buffer {} (overrun above)", format_ns(r.buffer_ns)),
            r.buffer_ns as f64 / 1e6,
            0.0,
            end,
        ),
        hline(
            format!("fragment {}", format_ns(r.fragment_ns)),
            r.fragment_ns as f64 / 1e6,
            0.0,
            end,
        ),
    ];
    line_chart(
        &Axes {
            title: &format!("latencytest: {}", p.name),
            x_label: "time (s)",
            y_label: "ms",
            log_x: false,
            log_y: false,
            points_only: false,
            x_range: Some((0.0, end)),
            ..Default::default()
        },
        &series,
    )
}

pub fn section(cfg: &LatencytestConfig, r: &LatencytestResult) -> Markup {
    html! {
        h3 { "Audio loop latency (latencytest)" }
        p { (cfg.rate) " Hz, " (cfg.fragments) " fragments × " (cfg.fragment_frames) " frames: fragment "
            (format_ns(r.fragment_ns)) ", buffer " (format_ns(r.buffer_ns)) "; work per cycle "
            (format_ns(r.burn_nominal_ns)) " (" (format!("{:.0}", cfg.burn_pct)) " % of a fragment); phases of "
            (format_ns(cfg.phase_duration_ns)) ", policy " (cfg.policy.to_string()) "."
            @if r.interrupted { " Interrupted: partial result." } }
        table.phases {
            tr { th { "phase" } th { "cycles" } th { "loop max ms" } th { "loop p99 ms" } th { "loop mean ms" }
                 th { "overruns" } th { "over fragment" } th { "underruns" } th { "loop ±0.1 ms" } th { "loop ±1 ms" }
                 th { "work max dev ms" } th { "work ±0.1 ms" } }
            @for p in &r.phases {
                tr { td { (p.name) } (n(p.cycles)) (n(ms(p.loop_ns.max))) (n(ms(p.loop_ns.p99)))
                     (n(ms(p.loop_ns.mean.round() as u64))) (n(p.overruns)) (n(p.over_fragment)) (n(p.underruns))
                     (n(format!("{:.2} %", p.loop_within_100us_pct))) (n(format!("{:.2} %", p.loop_within_1ms_pct)))
                     (n(ms(p.burn_max_dev_ns))) (n(format!("{:.2} %", p.burn_within_100us_pct))) }
            }
        }
        @if !r.skipped.is_empty() {
            ul.warnings { @for s in &r.skipped { li { "phase " (s.preset) " skipped: " (s.reason) } } }
        }
        @if let Some(f) = &r.forensics {
            (super::forensics::parts("phase", &crate::report::parts::latencytest_phases(r)))
            (super::forensics::section(f))
        }
        @for p in &r.phases {
            h4 { "Phase " (p.name) }
            @if let Some(st) = &p.stress { p { (crate::report::text::stress::stress_line(st)) } }
            (figure(diagram(r, p), &format!(
                "Each cycle at its start time t1: t3 − t1 is one loop (work plus the blocking write), t2 − t1 the work alone, drawn over it. A loop above the buffer line is an overrun (an audible dropout); where the work rises with it the work itself was held up, a loop spike alone was a late wake-up from the write.{}",
                if p.series.dropped > 0 { format!(" {} later cycles are counted in the table but not drawn.", p.series.dropped) } else { String::new() })))
        }
    }
}
