//! `--driver alsa`: the engine pushes periods into an ALSA PCM; the sound time follows from
//! the delay ALSA reports right after the write that carried the onset.

use super::config::{EventConfig, EventRun};
use super::gpio::GpioLine;
use super::handler::{build_handler, drain, Discard, Onset};
use super::trials::{run_trials, trials_from, xruns_during_trials};
use super::Setting;
use crate::common::ns_of_frames;
use crate::driver::alsa::AlsaDriver;
use crate::driver::{Device, DeviceParams, DriverKind};
use crate::error::Result;
use crate::progress::Progress;
use std::sync::atomic::Ordering;

/// The engine pushes periods into an ALSA PCM. The onset's sound time is the delay ALSA
/// reported right after the write that carried it, less the frames written after the onset.
pub(super) fn run(
    cfg: &EventConfig,
    s: &Setting,
    gpio: Option<&GpioLine>,
    progress: &dyn Progress,
) -> Result<EventRun> {
    let asked = DeviceParams {
        rate: cfg.rate,
        frames: s.period_frames.unwrap_or(64),
        periods: s.periods,
    };
    // What the device accepted instead of `asked` is its own warning.
    let mut dev = AlsaDriver::open(&cfg.alsa.clone().unwrap_or_default(), asked)?;
    let DeviceParams {
        rate,
        frames,
        periods,
    } = dev.params();
    let period_ns = dev.params().period_ns();
    let wd = dev.write_delay();
    let (mut handler, mut rx, sh, monitor) =
        build_handler(cfg.chain(s.scenario), rate, frames, cfg.policy)?;
    handler.delay_probe = Some(Box::new(move || wd.latest()));
    let _mlock = crate::rt::memory::MemoryLock::acquire_if(cfg.mlock)?;
    let done = run_trials(
        cfg,
        s,
        gpio,
        progress,
        dev,
        (handler, &sh, monitor),
        Discard,
        &mut || {},
    )?;
    let times = &done.times;
    let mut warnings = done.warnings.clone();
    let onsets = drain(&mut rx);
    let unmeasured = onsets.iter().filter(|o| o.write_delay.is_none()).count();
    if unmeasured > 0 {
        warnings.push(format!(
            "{unmeasured} onsets were in a period whose write failed (ALSA xrun): not measured"
        ));
    }
    let t_sound = |o: &Onset| {
        o.write_delay.map(|(d, at)| {
            // The onset sample sits (frames − offset) frames before the end of the queue.
            let ahead = d - (frames as i64 - o.onset_frame as i64);
            let dt = ns_of_frames(ahead.unsigned_abs(), rate);
            if ahead < 0 {
                at - dt
            } else {
                at + dt
            }
        })
    };
    let trials = trials_from(&times.te, &onsets, &t_sound, &|_| None);
    // None when the watchdog had to abandon a stuck device thread.
    let report = done.report.clone().into_alsa();
    let xrun_at = report.iter().flat_map(|r| &r.xrun_events);
    // Device xruns while the trials ran, as for JACK's server xruns.
    let t0 = sh.t0_ns.load(Ordering::Relaxed);
    let device_xruns =
        xruns_during_trials(&times.te, &trials, period_ns, xrun_at.map(|e| t0 + e.at_ns));
    // At the period interrupt one period is free and n−1 are queued ahead of the write.
    let queued = (periods as u64 - 1) * frames as u64;
    let params = DeviceParams {
        rate,
        frames,
        periods,
    };
    Ok(EventRun {
        output_delay_frames: report
            .as_ref()
            .map_or(0, |r| r.delay_frames.mean.max(0.0) as u64),
        server_xruns: Some(device_xruns),
        alsa: report,
        ..done.event_run(
            s,
            (DriverKind::Alsa, params, Some(periods)),
            queued,
            trials,
            warnings,
        )
    })
}
