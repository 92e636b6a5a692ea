//! `event`: trigger-to-sound latency per setting (Topliss et al.).

use super::style::{new_table, num};
use crate::driver::DriverKind;
use crate::measure::event::{EventConfig, EventResults, EventRun};

fn ms(ns: f64) -> String {
    format!("{:.3}", ns / 1e6)
}

fn setting(r: &EventRun) -> String {
    match r.periods {
        Some(n) => format!("{}×{}", r.period_frames, n),
        None => format!("{}", r.period_frames),
    }
}

/// The table of one run, or Topliss et al.'s grid, then what else the settings said.
pub fn summary(cfg: &EventConfig, res: &EventResults) -> String {
    let mut s = String::new();
    if cfg.grid.is_some() {
        s.push_str(&grid_tables(cfg, res));
    } else {
        let mut t = new_table(&[
            "driver",
            "period×n",
            "scenario",
            "trials",
            "min ms",
            "mean ms",
            "max ms",
            "std ms",
            "model mean ms",
            "xruns",
        ]);
        for x in &res.runs {
            t.add_row(vec![
                num(x.driver.name()),
                num(setting(x)),
                num(x.scenario.name()),
                num(x.latency.count),
                num(ms(x.latency.min_ns as f64)),
                num(ms(x.latency.mean_ns)),
                num(ms(x.latency.max_ns as f64)),
                num(ms(x.latency.std_ns)),
                num(ms(x.model.mean_ns)),
                num(xruns(x)),
            ]);
        }
        s.push_str(&format!(
            "Trigger-to-sound latency at {} Hz{}\n{t}\n",
            rate(cfg, res),
            cfg.instrument
                .as_deref()
                .map(|i| format!(", instrument {i} (its attack counts)"))
                .unwrap_or_default()
        ));
    }
    let mut lines: Vec<String> = Vec::new();
    for x in &res.runs {
        if let Some(p) = &x.playback_latency_port {
            let l = x.playback_latency_frames.unwrap_or([0, 0]);
            let line = format!(
                "jack period {}: playback latency of {p} = [{}, {}] frames\n",
                x.period_frames, l[0], l[1]
            );
            if !lines.contains(&line) {
                lines.push(line);
            }
        }
    }
    s.extend(lines);
    if let Some(b) = res.runs.iter().find_map(|x| x.background.as_ref()) {
        s.push_str(&format!("mono-bg background: {}\n", b.what));
    }
    for k in &res.skipped {
        s.push_str(&format!("skipped: {k}\n"));
    }
    if let Some(f) = &res.forensics {
        s.push_str("forensics per setting:\n");
        s.push_str(&super::forensics::parts(crate::report::parts::event_runs(
            res,
        )));
        s.push_str(&super::forensics::section(f));
    }
    s
}

fn rate(cfg: &EventConfig, res: &EventResults) -> u32 {
    res.runs.first().map(|x| x.rate).unwrap_or(cfg.rate)
}

fn xruns(x: &EventRun) -> String {
    match x.server_xruns {
        Some(sx) if x.driver == DriverKind::Alsa => format!("{} (alsa {sx})", x.xruns),
        Some(sx) => format!("{} (server {sx})", x.xruns),
        None => x.xruns.to_string(),
    }
}

/// Topliss et al.'s figures: one table per backend, rows = buffer/period, a mean-latency column
/// per scenario, then the under-runs.
fn grid_tables(cfg: &EventConfig, res: &EventResults) -> String {
    let scen = &cfg.scenarios;
    let mut out = String::new();
    for &d in &cfg.drivers {
        let runs: Vec<&EventRun> = res.runs.iter().filter(|x| x.driver == d).collect();
        if runs.is_empty() {
            continue;
        }
        let mut head: Vec<String> = vec![
            "buffer".into(),
            "period".into(),
            "n".into(),
            "model mean ms".into(),
        ];
        head.extend(scen.iter().map(|c| format!("{} ms", c.name())));
        head.push("under-runs".into());
        let mut t = new_table(&head.iter().map(String::as_str).collect::<Vec<_>>());
        let mut rows: Vec<(Option<u32>, u32)> = Vec::new();
        for x in &runs {
            let key = (x.grid_buffer_frames, x.period_frames);
            if !rows.contains(&key) {
                rows.push(key);
            }
        }
        for key in rows {
            let cells: Vec<&&EventRun> = runs
                .iter()
                .filter(|x| (x.grid_buffer_frames, x.period_frames) == key)
                .collect();
            let first = cells[0];
            let mut row = vec![
                num(match first.periods {
                    Some(n) => (first.period_frames * n).to_string(),
                    None => "server".into(),
                }),
                num(first.period_frames),
                num(first
                    .periods
                    .map(|n| n.to_string())
                    .unwrap_or_else(|| "server".into())),
                num(ms(first.model.mean_ns)),
            ];
            let mut under = Vec::new();
            for c in scen {
                match cells.iter().find(|x| x.scenario == *c) {
                    Some(x) => {
                        row.push(num(ms(x.latency.mean_ns)));
                        under.push(xruns(x));
                    }
                    None => {
                        row.push(num("-"));
                        under.push("-".into());
                    }
                }
            }
            row.push(num(under.join(" / ")));
            t.add_row(row);
        }
        out.push_str(&format!(
            "{} — mean trigger-to-sound latency at {} Hz ({} trials per cell)\n{t}\n",
            d.name(),
            runs[0].rate,
            cfg.trials
        ));
    }
    out
}
