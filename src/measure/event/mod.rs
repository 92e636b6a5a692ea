//! Event-to-sound latency (Topliss et al.): the time from a trigger to the moment the first
//! sample of the tone it starts reaches the DAC, per backend, buffer/period setting and
//! scenario, with the under-runs seen meanwhile.
//!
//! ## One trial
//! A non-real-time thread reads `te` (CLOCK_MONOTONIC) the moment it knows of a trigger
//! (random timer, Enter, UDP datagram), raises the GPIO line if asked, and publishes the trial
//! number in an atomic. The driver's cycle reads that atomic first thing (no lock, no
//! allocation), sends note-on to the synth (the `sine`/`poly` plugins run by the engine),
//! and the cycle that renders the first non-zero sample of the tone records its cycle, the
//! driver's `t_ideal` for it and the sample's frame offset into a wait-free ring. When the
//! sample reaches the DAC follows from the driver's clock:
//! - virtual: output of cycle k starts playing at `t_ideal(k) + (n−1)·P` (docs/methods.md), then
//!   passes the output FIFO and the DAC: `t_sound = t0 + ((k + n − 1)·frames + FIFO + DAC +
//!   offset)/fs`, exactly;
//! - jack: the cycle start the server reports plus the playback latency of our output port
//!   (the server's own figure for "written now, heard then"): `t_sound = t_cycle(k) +
//!   (latency + offset)/fs`.
//!
//! latency = t_sound − te. After a fixed tone the synth gets note-off, and the next trial
//! waits until a silent period was rendered, so every onset is a clean silence→tone edge.
//!
//! ## Files
//! `config` holds what is asked and answered, `handler` the real-time side (the cycle handler
//! and the sinks), `trials` the trigger loop (the real-time harness's supervisor over every
//! driver's device) and the pairing of trials; `virtual_dev`, `jack` and `alsa` each hold one driver's runner and its sound-time
//! rule. This file lists the settings (the grid) and runs them.

mod alsa;
mod config;
pub mod gpio;
mod handler;
mod jack;
mod trials;
pub mod trigger;
mod virtual_dev;

pub use config::{
    parse_drivers, parse_pairs, Background, EventConfig, EventOutcome, EventResults, EventRun,
    EventTrial, GridPair, LatencyStats, ModelBand, Scenario, DRIVERS, GRID_PAIRS,
};
pub use handler::{cycle_handler, DelayProbe, OnsetView, TriggerHandle};

use crate::common::Status;
use crate::driver::DriverKind;
use crate::error::Result;
use crate::measure::session::Session;
use gpio::GpioLine;
use std::time::Duration;

/// One setting to measure.
#[derive(Debug, Clone)]
struct Setting {
    driver: DriverKind,
    scenario: Scenario,
    period_frames: Option<u32>,
    periods: u32,
    grid_buffer: Option<u32>,
}

impl Setting {
    /// What the progress bar says while it runs: driver, period (×n where `--periods`
    /// applies) and scenario.
    fn label(&self) -> String {
        format!(
            "{} {}{} {}",
            self.driver,
            self.period_frames
                .map(|p| p.to_string())
                .unwrap_or_default(),
            if self.driver.periods_apply() {
                format!("×{}", self.periods)
            } else {
                String::new()
            },
            self.scenario.name()
        )
    }
}

/// The background of mono-bg: `top -b -d 0.1` when installed, else the built-in stressor
/// that reads /proc every 100 ms the way top does.
fn start_background() -> Result<(crate::stress::StressSession, String)> {
    let have_top = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("top").is_file()));
    let mut spec = crate::stress::StressSpec::default();
    let what = if have_top {
        spec.commands = vec![vec!["top".into(), "-b".into(), "-d".into(), "0.1".into()]];
        "top -b -d 0.1".to_string()
    } else {
        spec.presets = vec![crate::stress::spec::Preset::Top];
        "built-in top (reads /proc every 100 ms; top is not installed)".to_string()
    };
    let s = crate::stress::StressSession::start(&spec, Duration::ZERO)?;
    Ok((s, what))
}

/// One setting on its driver, with the mono-bg background around it.
fn run_setting(
    cfg: &EventConfig,
    s: &Setting,
    gpio: Option<&GpioLine>,
    session: &mut Session,
) -> Result<EventRun> {
    let bg = if s.scenario == Scenario::MonoBg {
        Some(start_background()?)
    } else {
        None
    };
    // The trials' length is not known ahead: the smallest buffer, drained as it runs.
    let rec = session.start_trace(&cfg.cpus, 0);
    let progress = session.progress();
    let outcome = match s.driver {
        DriverKind::Virtual => virtual_dev::run(cfg, s, gpio, progress),
        DriverKind::Jack => jack::run(cfg, s, gpio, progress),
        DriverKind::Alsa => alsa::run(cfg, s, gpio, progress),
        // `validate` refuses it before any setting runs; a library caller that skipped
        // validation gets the same usage error.
        DriverKind::Sim => Err(crate::error::Error::usage(
            "event measures when sound reaches a real clock: use virtual, jack or alsa, not sim",
        )),
    };
    let background = bg.map(|(session, what)| Background {
        what,
        record: session.stop(),
    });
    let mut run = outcome?;
    run.background = background;
    if let Some(rec) = rec {
        let (f, w) = rec.explain("xrun", &run.xrun_windows, &run.tids);
        run.forensics = Some(f);
        run.warnings.extend(w);
    }
    Ok(run)
}

/// The settings a config asks for, in table order; a grid's rows on a driver where
/// `--periods` does not apply (JACK: the server's nperiods is not ours to change) collapse
/// to one per period.
fn settings(cfg: &EventConfig) -> Vec<Setting> {
    let mut out = Vec::new();
    match &cfg.grid {
        None => {
            for &sc in &cfg.scenarios {
                out.push(Setting {
                    driver: cfg.drivers[0],
                    scenario: sc,
                    period_frames: cfg.buffer_frames,
                    periods: cfg.periods.unwrap_or(2),
                    grid_buffer: None,
                });
            }
        }
        Some(pairs) => {
            for &d in &cfg.drivers {
                let mut periods_seen = Vec::new();
                for p in pairs {
                    if !d.periods_apply() {
                        if periods_seen.contains(&p.period_frames) {
                            continue;
                        }
                        periods_seen.push(p.period_frames);
                    }
                    for &sc in &cfg.scenarios {
                        out.push(Setting {
                            driver: d,
                            scenario: sc,
                            period_frames: Some(p.period_frames),
                            periods: p.periods(),
                            grid_buffer: Some(p.buffer_frames),
                        });
                    }
                }
            }
        }
    }
    out
}

/// Why backend `d` cannot be measured here, asked before a grid over several backends
/// measures any: a missing JACK server or ALSA device is a skipped backend with its reason
/// (as the suite skips a stage), not a failure after the others' minutes of trials.
fn unavailable(cfg: &EventConfig, d: DriverKind) -> Option<String> {
    let outcome = match d {
        DriverKind::Jack => crate::driver::jack::probe(&cfg.jack.clone().unwrap_or_default()),
        DriverKind::Alsa => {
            crate::driver::alsa::AlsaDevice::probe(&cfg.alsa.clone().unwrap_or_default())
        }
        _ => Ok(()),
    };
    outcome.err().map(|e| e.to_string())
}

/// The backends of a multi-backend grid that can run, and a skipped line for each that
/// cannot; an error when none can (nothing would be measured).
fn available_drivers(cfg: &EventConfig) -> Result<(Vec<DriverKind>, Vec<String>)> {
    if cfg.grid.is_none() || cfg.drivers.len() < 2 {
        return Ok((cfg.drivers.clone(), Vec::new()));
    }
    let mut ok = Vec::new();
    let mut skipped = Vec::new();
    for &d in &cfg.drivers {
        match unavailable(cfg, d) {
            None => ok.push(d),
            Some(why) => skipped.push(format!("{}: every row (not measured): {why}", d.name())),
        }
    }
    if ok.is_empty() {
        return Err(crate::error::Error::cannot_measure(format!(
            "no backend of --drivers can run here: {}",
            skipped.join("; ")
        )));
    }
    Ok((ok, skipped))
}

/// `xrunlab event`: every setting the config asks for. A grid row a backend refuses (a
/// buffer size the JACK server rejects) is listed in `skipped`; an interrupt ends the run with
/// what was measured so far. With forensics a recording starts before every setting, its
/// xruns are explained after it (`runs[].forensics`) and the sections are merged.
pub fn run(cfg: &EventConfig, session: &mut Session) -> Result<EventOutcome> {
    cfg.validate()?;
    // A missing GPIO chip is known before anything starts.
    let gpio = cfg.gpio.as_ref().map(GpioLine::open).transpose()?;
    let (drivers, mut skipped) = available_drivers(cfg)?;
    let list: Vec<Setting> = settings(cfg)
        .into_iter()
        .filter(|s| drivers.contains(&s.driver))
        .collect();
    let mut runs = Vec::new();
    let mut status = Status::Complete;
    session
        .progress()
        .set_unit(crate::progress::Unit::Items("trials"));
    session.progress().set_total(cfg.trials as u64);
    for s in &list {
        session.progress().set_message(&s.label());
        session.progress().set_position(0);
        match run_setting(cfg, s, gpio.as_ref(), session) {
            Ok(r) => {
                let st = r.status;
                runs.push(r);
                if st != Status::Complete {
                    status = st;
                    break;
                }
            }
            Err(e) if cfg.grid.is_some() && e.exit_code() == crate::error::EXIT_CANNOT_MEASURE => {
                skipped.push(format!(
                    "{} period {} ({}): {e}",
                    s.driver.name(),
                    s.period_frames.unwrap_or(0),
                    s.scenario.name()
                ));
                // Without a server every later JACK row fails the same way: stop here.
                if e.kind() == crate::error::ErrorKind::NoServer {
                    return Err(e);
                }
            }
            Err(e) => return Err(e),
        }
        if crate::rt::interrupt::requested() {
            status = Status::Interrupted;
            break;
        }
    }
    session.progress().finish();
    let mut warnings: Vec<String> = Vec::new();
    for r in &runs {
        for w in &r.warnings {
            if !warnings.contains(w) {
                warnings.push(w.clone());
            }
        }
    }
    let forensics = session.merged(
        runs.iter().filter_map(|x| x.forensics.as_ref()),
        &mut warnings,
    );
    Ok(EventOutcome {
        status,
        config: cfg.clone(),
        results: EventResults {
            runs,
            skipped,
            forensics,
        },
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_settings_collapse_jack_rows_per_period() {
        let mut c = EventConfig::new(DriverKind::Virtual);
        c.drivers = vec![DriverKind::Virtual, DriverKind::Jack];
        c.scenarios = Scenario::ALL.to_vec();
        c.grid = Some(parse_pairs("128/64,256/64,256/128").unwrap());
        let s = settings(&c);
        let v = s.iter().filter(|x| x.driver == DriverKind::Virtual).count();
        let j = s.iter().filter(|x| x.driver == DriverKind::Jack).count();
        assert_eq!((v, j), (9, 6));
    }
}
