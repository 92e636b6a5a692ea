//! `rtl`: round-trip latency, modelled and measured.

use super::style::{new_table, num};
use crate::measure::rtl::{self, RtlConfig, RtlJack, RtlOutcome, RtlResults};

/// The model table, or a measured loop beside its model (or beside what JACK declares).
pub fn summary(cfg: &RtlConfig, res: &RtlResults) -> String {
    let c = &cfg;
    let l = c.loopback.latency;
    let mut s = format!(
        "RTL model: {}·buffer + FIFO {} + codec {}+{} frames at {} Hz{}\n",
        c.periods,
        l.fifo_frames,
        l.adc_frames,
        l.dac_frames,
        c.rate,
        c.profile
            .as_deref()
            .map(|p| format!(" (profile {p})"))
            .unwrap_or_default()
    );
    if res.measured.is_none() {
        // Vignati et al.'s rounding is only meaningful next to its own profiles.
        let published = c.profile.is_some();
        let mut head = vec!["buffer", "RTL frames", "RTL ms"];
        if published {
            head.push("as printed in Vignati et al.");
        }
        let mut t = new_table(&head);
        for row in &res.model {
            let mut cells = vec![
                num(row.buffer_frames),
                num(row.rtl_frames),
                num(format!("{:.4}", row.rtl_ms)),
            ];
            if published {
                cells.push(num(if row.below_profile_min {
                    "- (not run)".to_string()
                } else {
                    format!("{:.2}", row.published_ms)
                }));
            }
            t.add_row(cells);
        }
        s.push_str(&format!("{t}\n"));
        return s;
    }
    let m = res.measured.as_ref().expect("checked");
    // A measured run models its one buffer (results::validate refuses a file without it).
    let Some(row) = res.model.first() else {
        return s;
    };
    if let Some(j) = &res.jack {
        s = jack_summary(cfg, j, m);
    } else {
        if let Some(a) = &res.alsa {
            let d = &a.driver;
            s.push_str(&format!(
                "RTL through ALSA '{}' ({}, {}, {} ch), period {} × {} periods at {} Hz: playback → capture\n",
                d.device,
                d.format,
                d.access.as_str(),
                d.channels,
                d.period_frames,
                d.periods,
                d.rate
            ));
        }
        s.push_str(&loop_summary(cfg, res, m, row));
    }
    if let Some(a) = &res.alsa {
        let x = &a.driver;
        if x.xruns_recovered + res.skipped_periods > 0 {
            s.push_str(&format!(
                "{} ALSA xruns recovered, {} periods skipped; {} estimates left out\n",
                x.xruns_recovered, res.skipped_periods, m.excluded_estimates
            ));
        }
    } else if res.xruns + res.skipped_periods > 0 {
        s.push_str(&format!(
            "{} of {} cycles missed their deadline, {} periods skipped; {} estimates left out\n",
            res.xruns, res.cycles, res.skipped_periods, m.excluded_estimates
        ));
    }
    s
}

fn polarity_line(m: &rtl::RtlMeasurement) -> String {
    format!(
        "polarity {}; level {:.1} dBFS, SNR {:.1} dB; {}{}\n",
        if m.inverted == Some(true) {
            "INVERTED"
        } else {
            "normal"
        },
        m.level_dbfs,
        m.snr_db,
        m.message,
        m.converged_after_s
            .map(|t| format!(" after {t:.2} s"))
            .unwrap_or_default()
    )
}

/// The buffer a measured loop ran at, as text ("?" in a file without one).
fn row_buffer(c: &RtlConfig) -> String {
    c.buffers.first().map_or("?".into(), u32::to_string)
}

/// Measured beside what the JACK server declares, and the -I/-O advice.
fn jack_summary(cfg: &RtlConfig, j: &RtlJack, m: &rtl::RtlMeasurement) -> String {
    let c = &cfg;
    let ms = |f: f64| format!("{:.4}", f * 1000.0 / c.rate as f64);
    let mut s = format!(
        "RTL through JACK ({} {}), {} frames at {} Hz: {}\n",
        j.driver.server,
        j.driver.library_version,
        row_buffer(c),
        c.rate,
        if j.self_loop {
            format!(
                "{} → {} (our output into our own input)",
                j.in_port, j.out_port
            )
        } else {
            format!(
                "{n}:out_1 → {} … {} → {n}:in_1",
                j.out_port,
                j.in_port,
                n = j.driver.client_name
            )
        }
    );
    let mut t = new_table(&["", "frames", "ms"]);
    if let Some(d) = m.delay_frames.filter(|_| m.outcome == RtlOutcome::Measured) {
        t.add_row(vec![num("measured"), num(format!("{d:.4}")), num(ms(d))]);
    }
    let dec = j.declared_frames as f64;
    t.add_row(vec![
        num(format!(
            "declared: playback {} + capture {} + graph {}×{}",
            j.playback_latency_frames[1],
            j.capture_latency_frames[1],
            j.graph_periods,
            row_buffer(c)
        )),
        num(j.declared_frames),
        num(ms(dec)),
    ]);
    if let Some(x) = j.extra_frames {
        t.add_row(vec![
            num("extra (measured − declared)"),
            // No "-0.0000" for a rounding residue.
            num(format!("{:+.4}", (x * 1e4).round() / 1e4 + 0.0)),
            num(ms((x * 1e4).round() / 1e4 + 0.0)),
        ]);
    }
    s.push_str(&format!("{t}\n"));
    match m.outcome {
        RtlOutcome::Measured => {
            if let Some(io) = j.io_arg_frames {
                s.push_str(&format!("use {io} for the backend arguments -I and -O\n"));
            }
            if let Some(x) = j.iodelay_extra_frames {
                s.push_str(&format!(
                    "jack_iodelay would print \"extra loopback latency\" {x:.0} frames (it counts no graph period)\n"
                ));
            }
            s.push_str(&polarity_line(m));
        }
        _ => s.push_str(&format!("no measurement: {}\n", m.message)),
    }
    if j.driver.server_xruns > 0 {
        s.push_str(&format!(
            "the server reported {} xruns; {} were excluded after the run\n",
            j.driver.server_xruns, j.server_xruns_excluded
        ));
    }
    s
}

fn loop_summary(
    cfg: &RtlConfig,
    res: &RtlResults,
    m: &rtl::RtlMeasurement,
    row: &rtl::ModelRow,
) -> String {
    let c = &cfg;
    let mut s = String::new();
    match m.outcome {
        RtlOutcome::Measured => {
            let d = m.delay_frames.unwrap_or(0.0);
            let mut t = new_table(&["", "frames", "ms"]);
            t.add_row(vec![
                num("measured"),
                num(format!("{d:.4}")),
                num(format!("{:.5}", m.delay_ms.unwrap_or(0.0))),
            ]);
            t.add_row(vec![
                num("model"),
                num(row.rtl_frames),
                num(format!("{:.5}", row.rtl_ms)),
            ]);
            t.add_row(vec![
                num("measured − model"),
                num(format!(
                    "{:+.4}",
                    (res.difference_frames.unwrap_or(0.0) * 1e4).round() / 1e4 + 0.0
                )),
                num(format!(
                    "{:+.5}",
                    res.difference_frames.unwrap_or(0.0) * 1000.0 / c.rate as f64
                )),
            ]);
            if c.loopback.fraction != 0.0 {
                t.add_row(vec![
                    num("measured − truth"),
                    num(format!("{:+.4}", res.error_frames.unwrap_or(0.0))),
                    num(""),
                ]);
            }
            if let Some(a) = &res.alsa {
                let ms = |f: f64| format!("{:+.5}", f * 1000.0 / c.rate as f64);
                if let Some(l) = a.driver.loop_delay_last_frames {
                    t.add_row(vec![
                        num("declared by ALSA (playback + capture delay)"),
                        num(l),
                        num(ms(l as f64).trim_start_matches('+').to_string()),
                    ]);
                }
                if let Some(x) = a.extra_frames {
                    // No "-0.0000" for a rounding residue.
                    let x = (x * 1e4).round() / 1e4 + 0.0;
                    t.add_row(vec![
                        num("extra (measured − declared)"),
                        num(format!("{x:+.4}")),
                        num(ms(x)),
                    ]);
                }
            }
            s.push_str(&format!("{t}\n"));
            s.push_str(&polarity_line(m));
        }
        _ => s.push_str(&format!("no measurement: {}\n", m.message)),
    }
    if let Some(d) = res.alsa.as_ref().and_then(|a| a.declared_frames) {
        s.push_str(&format!(
            "ALSA's declared round trip over the run: min {} / mean {:.1} / max {} frames\n",
            d.min, d.mean, d.max
        ));
    }
    s
}
