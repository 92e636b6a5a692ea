//! The `--forensics` section of a run or latency result: the culprit table, what took the
//! worst window part by part, and its timeline (docs/methods.md "Forensics").

use super::n;
use crate::trace::{CulpritKind, Forensics, WakeVerdict, WindowReport, WindowTimeline};
use crate::units::format_ns;
use maud::{html, Markup};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

fn verdict(v: WakeVerdict) -> &'static str {
    match v {
        WakeVerdict::WakeupLate => "the wake-up came late (timer or IRQ)",
        WakeVerdict::NotScheduled => "woken in time, runnable, not scheduled",
        WakeVerdict::NoWakeupTraced => "no wake-up traced (did not sleep, or events lost)",
    }
}

fn worst(f: &Forensics) -> Option<&WindowReport> {
    let laid_out = f
        .worst
        .as_ref()
        .and_then(|t| f.windows.iter().find(|w| w.id == t.id && w.tid == t.tid));
    laid_out.or_else(|| {
        f.windows
            .iter()
            .max_by_key(|w| w.end_ns.max(w.wake_ns).saturating_sub(w.t_ideal_ns))
    })
}

/// The timeline's lanes, top to bottom, and their colours.
const LANES: [(&str, RGBColor); 7] = [
    ("self", RGBColor(46, 139, 87)),
    ("ours", RGBColor(102, 194, 165)),
    ("tasks", RGBColor(215, 48, 39)),
    ("IRQ", RGBColor(244, 109, 67)),
    ("softirq", RGBColor(117, 112, 179)),
    ("idle", RGBColor(200, 200, 200)),
    ("unaccounted", RGBColor(90, 90, 90)),
];

fn lane(k: CulpritKind) -> usize {
    match k {
        // An element is our own thread's time, named after the probes: its lane is self's.
        CulpritKind::SelfThread | CulpritKind::Element => 0,
        CulpritKind::Ours => 1,
        CulpritKind::Task => 2,
        CulpritKind::Irq => 3,
        CulpritKind::Softirq => 4,
        CulpritKind::Idle => 5,
        CulpritKind::Unaccounted => 6,
    }
}

/// The worst window on its CPU as an SVG: time from t_ideal to the end, one lane per kind of
/// culprit, the culprit named on intervals wide enough to hold it.
pub fn timeline_svg(t: &WindowTimeline, what: &str) -> String {
    let mut svg = String::new();
    {
        let root =
            SVGBackend::with_string(&mut svg, (crate::report::plot::W, 300)).into_drawing_area();
        let _ = draw_timeline(&root, t, what);
        let _ = root.present();
    }
    svg
}

fn draw_timeline(
    root: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    t: &WindowTimeline,
    what: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    root.fill(&WHITE)?;
    let us = |ns: u64| ns as f64 / 1e3;
    let len = us(t.end_ns.max(t.wake_ns).saturating_sub(t.t_ideal_ns)).max(1e-3);
    let lanes = LANES.len() as f64;
    let mut chart = ChartBuilder::on(root)
        .caption(
            format!(
                "Worst {what} #{} on CPU {}",
                t.id,
                t.cpu.map_or("?".into(), |c| c.to_string())
            ),
            ("sans-serif", 16),
        )
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(90)
        .build_cartesian_2d(0f64..len, 0f64..lanes)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(0)
        .x_desc("µs after the ideal start (t_ideal)")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;
    let top = |i: usize| lanes - i as f64;
    for (i, (name, _)) in LANES.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(0.0, top(i) - 0.5));
        root.draw(&Text::new(
            name.to_string(),
            (x - 8, y),
            ("sans-serif", 13)
                .into_font()
                .color(&BLACK)
                .pos(Pos::new(HPos::Right, VPos::Center)),
        ))?;
    }
    // A 2 µs IRQ in a 10 ms window is a tenth of a pixel: draw it at least visible.
    let min_w = len * 0.002;
    chart.draw_series(t.spans.iter().map(|s| {
        let i = lane(s.culprit.kind);
        let (a, b) = (us(s.from_ns), us(s.to_ns).max(us(s.from_ns) + min_w));
        Rectangle::new(
            [(a, top(i) - 0.85), (b.min(len), top(i) - 0.15)],
            LANES[i].1.filled(),
        )
    }))?;
    chart.draw_series(
        t.spans
            .iter()
            .filter(|s| {
                !matches!(s.culprit.kind, CulpritKind::SelfThread | CulpritKind::Idle)
                    && us(s.to_ns - s.from_ns) >= 0.12 * len
            })
            .map(|s| {
                let i = lane(s.culprit.kind);
                // A label as long as its span (about 6 px a character over ~640 px of
                // plot): neighbours in a lane never run into each other.
                let fits = ((us(s.to_ns - s.from_ns) / len * 640.0) / 6.0) as usize;
                Text::new(
                    fit_label(&s.culprit.label(), fits.saturating_sub(1)),
                    (us(s.from_ns) + len * 0.005, top(i) - 0.5),
                    ("sans-serif", 11)
                        .into_font()
                        .color(&WHITE)
                        .pos(Pos::new(HPos::Left, VPos::Center)),
                )
            }),
    )?;
    // "woken" hangs from the top and "running" stands on the bottom: two marks a few µs
    // apart do not print over each other.
    let marks = [
        (
            t.waking_ns,
            "woken",
            RGBColor(33, 102, 172),
            lanes,
            VPos::Top,
        ),
        (
            Some(t.wake_ns.max(t.t_ideal_ns)),
            "running",
            BLACK,
            0.0,
            VPos::Bottom,
        ),
    ];
    for (at, label, color, y, vpos) in marks {
        let Some(at) = at else { continue };
        let x = us(at.saturating_sub(t.t_ideal_ns)).min(len);
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(x, 0.0), (x, lanes)],
            color.stroke_width(2),
        )))?;
        chart.draw_series(std::iter::once(Text::new(
            label,
            (x, y),
            ("sans-serif", 12)
                .into_font()
                .color(&color)
                .pos(Pos::new(HPos::Left, vpos)),
        )))?;
    }
    Ok(())
}

/// `label` cut to `chars` characters with an ellipsis; empty when not even two fit.
fn fit_label(label: &str, chars: usize) -> String {
    match label.chars().count() {
        n if n <= chars => label.to_string(),
        _ if chars < 2 => String::new(),
        _ => label.chars().take(chars - 1).chain(['…']).collect(),
    }
}

/// The traced parts of a measurement (failed load trials, sched rows, latencytest phases),
/// each with its top culprit; `section` of the merged table follows it.
pub fn parts(what: &str, parts: &[(String, &Forensics)]) -> Markup {
    html! {
        @if !parts.is_empty() {
            table.culprits {
                tr { th { (what) } th { "explained" } th { "top culprit" } th { "top in" } th { "time taken" } th { "worst single" } }
                @for (label, f) in parts {
                    tr { td { (label) } (n(format!("{} {}(s)", f.windows_total, f.windows_of)))
                         @match f.culprits.first() {
                             Some(c) => { td { (c.culprit.label()) } (n(c.explained)) (n(format_ns(c.total_ns))) (n(format_ns(c.worst_ns))) }
                             None => { td { "—" } (n("")) (n("")) (n("")) }
                         } }
                }
            }
        }
    }
}

pub fn section(f: &Forensics) -> Markup {
    html! {
        h4 { "Forensics: who took the time" }
        p { (f.windows_total) " " (f.windows_of) "(s) explained from " (f.events) " kernel trace events on CPU "
            (crate::rt::affinity::format_cpu_list(&f.cpus)) "." }
        @if f.lost_events > 0 {
            p.warn { (f.lost_events) " trace events were lost: windows touching them are lower bounds." }
        }
        @if !f.culprits.is_empty() {
            table.culprits {
                tr { th { "culprit" } th { "CPU" } th { "top culprit of" } th { "present in" } th { "time taken" } th { "worst single" } }
                @for r in f.culprits.iter().take(20) {
                    tr { td { (r.culprit.label()) } (n(r.cpu.map_or(String::new(), |c| c.to_string())))
                         (n(r.explained)) (n(r.present)) (n(format_ns(r.total_ns))) (n(format_ns(r.worst_ns))) }
                }
            }
        }
        @if let Some(w) = worst(f) {
            p { "Worst " (f.windows_of) ": #" (w.id) " on CPU " (w.cpu.map_or("?".into(), |c| c.to_string()))
                ", woken " (format_ns(w.wake_ns.saturating_sub(w.t_ideal_ns))) " after its ideal time, ended "
                (format_ns(w.end_ns.saturating_sub(w.t_ideal_ns))) " after it; " (verdict(w.wakeup.verdict))
                @if let Some(b) = &w.wakeup.behind { ", behind " (b.label()) } "." }
            table.worst {
                tr { th { "part" } th { "who" } th { "time" } }
                @for (part, shares) in [("ideal → wake", &w.before_wake), ("wake → end", &w.after_wake)] {
                    @for s in shares.iter() {
                        tr { td { (part) } td { (s.culprit.label()) } (n(format_ns(s.ns))) }
                    }
                }
            }
        }
        @if let Some(t) = &f.worst {
            (super::figure(timeline_svg(t, &f.windows_of), &format!(
                "What ran on the CPU of the worst {} from its ideal start to its end, one lane per kind of culprit (time no one can be blamed for is unaccounted, as in the table){}; \"woken\" is the thread's sched_waking, \"running\" when it ran.",
                f.windows_of,
                if t.spans_dropped > 0 { format!(", {} more intervals left out", t.spans_dropped) } else { String::new() }
            )))
        }
        p { "Unaccounted: time the trace gives to nobody — tasks or idle before a late wake-up (the timer interrupt preempts any task, so the wake-up itself was late: a vCPU not run, interrupts held off), our thread on the CPU beyond the CPU time it measured (steal), or lost events." }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::attribute::{attribute_all, culprit_table, Window};

    fn burst() -> (Forensics, WindowTimeline) {
        let mut t = crate::trace::Trace::default();
        t.push_text(include_str!("../../../tests/fixtures/trace/burst.txt"));
        let s = 1_000_000_000u64 * 100;
        let w = Window {
            id: 7,
            tid: 500,
            cpu: Some(1),
            t_ideal_ns: s + 1_000_000,
            wake_ns: s + 10_510_000,
            end_ns: s + 11_500_000,
            own_cpu_ns: None,
            shared_thread: false,
        };
        let (windows, worst) = attribute_all(&t, &[w], &[500]);
        let worst = worst.unwrap();
        let f = Forensics {
            instance: "xrunlab-1".into(),
            cpus: vec![1],
            events: t.events.len() as u64,
            lost_events: 0,
            lost_per_cpu: vec![],
            missing_events: vec![],
            windows_of: "xrun".into(),
            windows_total: 1,
            culprits: culprit_table(&windows),
            windows,
            csv_file: None,
            worst: Some(worst.clone()),
        };
        (f, worst)
    }

    fn fill(c: RGBColor) -> String {
        format!("fill=\"#{:02x}{:02x}{:02x}\"", c.0, c.1, c.2)
    }

    #[test]
    fn the_worst_window_timeline_has_a_lane_per_kind_and_names_the_burst() {
        let (_, t) = burst();
        let svg = timeline_svg(&t, "xrun").to_lowercase();
        assert!(svg.starts_with("<svg"), "{svg}");
        // The contents of the text elements, in order.
        let texts: Vec<&str> = svg
            .split("<text")
            .skip(1)
            .filter_map(|t| Some(t.split_once('>')?.1.split_once("</text>")?.0.trim()))
            .collect();
        for (name, _) in LANES {
            assert!(
                texts.contains(&name.to_lowercase().as_str()),
                "lane {name}: {texts:?}"
            );
        }
        let rects = |c: RGBColor| svg.matches(&fill(c)).count();
        // The burst cut in two by the virtio IRQ; the IRQ, the hrtimer callback; NET_RX;
        // our thread before and after NET_RX. No idle, nothing of ours, nothing unaccounted.
        assert_eq!(rects(LANES[lane(CulpritKind::Task)].1), 2);
        assert_eq!(rects(LANES[lane(CulpritKind::Irq)].1), 2);
        assert_eq!(rects(LANES[lane(CulpritKind::Softirq)].1), 1);
        assert_eq!(rects(LANES[lane(CulpritKind::SelfThread)].1), 2);
        assert_eq!(rects(LANES[lane(CulpritKind::Ours)].1), 0);
        assert_eq!(rects(LANES[lane(CulpritKind::Unaccounted)].1), 0);
        // Both parts of the burst are wide enough to be named in place (a label cut to its
        // span ends in '…'); nothing else is.
        let named: Vec<&&str> = texts.iter().filter(|t| t.contains('[')).collect();
        assert_eq!(named.len(), 2, "{named:?}");
        assert!(
            named.iter().all(|t| t.starts_with("xrl-burst[700] rt:")),
            "{named:?}"
        );
        assert!(texts.contains(&"woken") && texts.contains(&"running"));
        assert!(texts.contains(&"worst xrun #7 on cpu 1"));
        assert!(texts.contains(&"10000"), "whole µs on the axis: {texts:?}");
    }

    #[test]
    fn the_section_carries_the_timeline_when_the_result_has_one() {
        let (mut f, _) = burst();
        let html = section(&f).into_string();
        assert!(html.contains("<svg"));
        assert!(html.contains("What ran on the CPU of the worst xrun"));
        f.worst = None;
        assert!(!section(&f).into_string().contains("<svg"));
    }
}
