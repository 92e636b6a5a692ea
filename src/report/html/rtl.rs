//! `rtl`: Vignati et al. Table 1 (modelled RTL per buffer size), the measured loop against its
//! model, and the estimator's per-hop estimates over time.

use super::{figure, n};
use crate::driver::DriverKind;
use crate::measure::rtl::{RtlConfig, RtlOutcome, RtlResults};
use crate::report::plot::{hline, line_chart, Axes, Series};
use maud::{html, Markup};

fn estimates_chart(c: &RtlConfig, r: &RtlResults) -> Option<String> {
    let m = r.measured.as_ref()?;
    let pts: Vec<(f64, f64)> = m
        .estimates
        .iter()
        .filter_map(|e| e.delay_frames.map(|d| (e.t_s, d)))
        .collect();
    let end = m.estimates.last().map_or(1.0, |e| e.t_s.max(1e-3));
    let mut series = vec![Series {
        label: "estimate per hop".into(),
        points: pts,
    }];
    if let Some(row) = r.model.first() {
        series.push(hline(
            format!("model {} frames", row.rtl_frames),
            row.rtl_frames as f64,
            0.0,
            end,
        ));
    }
    if let Some(t) = r.truth_frames.filter(|_| c.loopback.fraction != 0.0) {
        series.push(hline(format!("truth {t:.3} frames"), t, 0.0, end));
    }
    Some(line_chart(
        &Axes {
            title: "RTL estimate over the measurement",
            x_label: "stream time (s)",
            y_label: "delay (frames)",
            log_x: false,
            log_y: false,
            points_only: false,
            x_range: Some((0.0, end)),
            y_tight: true,
            ..Default::default()
        },
        &series,
    ))
}

pub fn section(c: &RtlConfig, r: &RtlResults) -> Markup {
    let l = c.loopback.latency;
    // Vignati et al.'s rounding is only meaningful next to its own profiles.
    let published = c.profile.is_some();
    let model_curve = vec![Series {
        label: format!("{}·buffer + {} frames", c.periods, l.fixed_frames()),
        points: r
            .model
            .iter()
            .map(|m| (m.buffer_frames as f64, m.rtl_ms))
            .collect(),
    }];
    html! {
        h3 { "Round-trip latency" }
        p { "Model: " (c.periods) "·buffer + FIFO " (l.fifo_frames) " + codec " (l.adc_frames) "+" (l.dac_frames)
            " frames at " (c.rate) " Hz"
            @if let Some(p) = &c.profile { " (profile " (p) ")" }
            "; "
            @match c.driver {
                None => { "model only, no loop measured." }
                Some(d) => { "measured on the " (format!("{d:?}").to_lowercase()) " loop at " (c.buffers.first().map_or("?".into(), u32::to_string)) " frames." }
            } }
        h4 { "Modelled RTL (Table 1 shape)" }
        table.model {
            tr { th { "buffer (frames)" } th { "RTL (frames)" } th { "RTL (ms)" } @if published { th { "as printed in Vignati et al. (ms)" } } }
            @for m in &r.model {
                tr { (n(m.buffer_frames)) (n(m.rtl_frames)) (n(format!("{:.3}", m.rtl_ms)))
                     @if published { (n(if m.below_profile_min { "- (not run)".to_string() } else { format!("{:.2}", m.published_ms) })) } }
            }
        }
        @if r.model.len() > 1 {
            (figure(line_chart(&Axes { title: "Modelled RTL per buffer size", x_label: "buffer (frames, log)", y_label: "RTL (ms)",
                    log_x: true, log_y: false, points_only: false, x_range: None, ..Default::default() }, &model_curve),
                "Eq. 1 of Vignati et al. extended to n periods: n·buffer/fs plus the interface FIFO and the converters."))
        }
        @if let Some(m) = &r.measured {
            h4 { "Measured against the model" }
            @if m.outcome == RtlOutcome::Measured {
                @let row = r.model.first();
                table.measured {
                    tr { th { "" } th { "frames" } th { "ms" } }
                    tr { td { "measured" } (n(format!("{:.4}", m.delay_frames.unwrap_or(0.0)))) (n(format!("{:.5}", m.delay_ms.unwrap_or(0.0)))) }
                    @if let Some(row) = row {
                        tr { td { "model" } (n(row.rtl_frames)) (n(format!("{:.5}", row.rtl_ms))) }
                    }
                    @if let Some(d) = r.difference_frames {
                        tr { td { "measured − model" } (n(format!("{d:+.4}"))) (n(format!("{:+.5}", d * 1000.0 / c.rate as f64))) }
                    }
                    @if let Some((d, x, what)) = r.declared() {
                        tr { td { "declared (" (what) ")" } (n(format!("{d:.0}"))) (n(format!("{:.5}", d * 1000.0 / c.rate as f64))) }
                        @if let Some(x) = x {
                            tr { td { "measured − declared" } (n(format!("{:+.4}", x + 0.0))) (n(format!("{:+.5}", x * 1000.0 / c.rate as f64 + 0.0))) }
                        }
                    }
                    @if let (Some(t), Some(e)) = (r.truth_frames, r.error_frames) {
                        tr { td { "loop's ground truth" } (n(format!("{t:.4}"))) (n(format!("{:.5}", t * 1000.0 / c.rate as f64))) }
                        tr { td { "measured − truth" } (n(format!("{e:+.4}"))) (n("")) }
                    }
                }
                p { "Polarity " @if m.inverted == Some(true) { strong { "inverted" } } @else { "normal" }
                    "; return level " (format!("{:.1}", m.level_dbfs)) " dBFS, SNR " (format!("{:.1}", m.snr_db)) " dB; "
                    (m.message)
                    @if let Some(t) = m.converged_after_s { " after " (format!("{t:.2}")) " s" }
                    @if let Some(s) = m.spread_frames { " (spread " (format!("{s:.4}")) " frames over the last second)" }
                    "." }
            } @else {
                p.fail { "No measurement (" (format!("{:?}", m.outcome).to_lowercase()) "): " (m.message) }
            }
            p { (r.cycles) " device cycles, " (r.xruns) " missed their deadline "
                (if c.driver == Some(DriverKind::Alsa) {
                    "(on an ALSA device a late write still plays unless the device ran dry: its own xruns are what lose output)"
                } else {
                    "(their output was lost)"
                })
                "; largest measurable delay "
                (m.max_measurable_frames) " frames (" (format!("{:.0}", m.max_measurable_ms)) " ms); tones "
                (m.tones_hz.iter().map(|t| format!("{t:.0}")).collect::<Vec<_>>().join(", ")) " Hz." }
            @if let Some(svg) = estimates_chart(c, r) {
                (figure(svg, &format!("One delay estimate per analysis hop ({} frames; window {} frames), against the model{}.",
                    m.hop_frames, m.window_frames, if c.loopback.fraction != 0.0 { " and the virtual loop's ground truth" } else { "" })))
            }
        }
    }
}
