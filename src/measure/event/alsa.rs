//! `--driver alsa`: the engine pushes periods into an ALSA PCM; the sound time follows from
//! the delay ALSA reports right after the write that carried the onset.

use super::config::{EventConfig, EventDriver, EventRun, LatencyStats, ModelBand};
use super::gpio::GpioLine;
use super::handler::{build_handler, drain, Discard, Onset};
use super::trials::{
    ns_of_frames, trials_from, trials_on_device_thread, watchdog_warning, xruns_during_trials,
};
use super::Setting;
use crate::common::Status;
use crate::driver::signal::{Generator, SignalKind};
use crate::driver::Driver;
use crate::error::Result;
use crate::progress::Progress;
use crate::rt::thread::{spawn_rt, ThreadSpec};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The engine pushes periods into an ALSA PCM. The onset's sound time is the delay ALSA
/// reported right after the write that carried it, less the frames written after the onset.
pub(super) fn run(
    cfg: &EventConfig,
    s: &Setting,
    gpio: Option<&GpioLine>,
    progress: &dyn Progress,
) -> Result<EventRun> {
    use crate::driver::alsa::{AlsaDevice, AlsaDriver};
    let ac = cfg.alsa.clone().unwrap_or_default();
    let want = s.period_frames.unwrap_or(64);
    let dev = AlsaDevice::open(&ac, cfg.rate, want, s.periods)?;
    let (rate, frames, periods) = (dev.rate(), dev.period_frames(), dev.periods());
    let mut warnings = Vec::new();
    if (rate, frames, periods) != (cfg.rate, want, s.periods) {
        warnings.push(format!(
            "ALSA device '{}' negotiated {rate} Hz, period {frames} × {periods} (asked {} Hz, {want} × {})",
            ac.device, cfg.rate, s.periods
        ));
    }
    let period_ns = crate::engine::period_ns(rate, frames as usize);
    let mut drv = AlsaDriver::new(dev, u64::MAX / 4);
    let wd = drv.write_delay();
    let (mut handler, mut rx, sh, monitor) = build_handler(s.scenario, rate, frames, cfg.policy)?;
    handler.delay_probe = Some(Box::new(move || wd.latest()));
    let _mlock = crate::rt::memory::MemoryLock::acquire()?;
    let stop = Arc::new(AtomicBool::new(false));
    let (stop2, seed) = (stop.clone(), cfg.seed);
    let th = spawn_rt(
        ThreadSpec {
            name: "xr-event-alsa".into(),
            policy: cfg.policy,
            cpus: Vec::new(),
        },
        move || {
            let mut handler = handler;
            let mut src = Generator::new(SignalKind::Silence, rate, seed);
            let (reason, stats) = drv.run(&mut handler, &stop2, &mut src, &mut Discard);
            drop(handler);
            (drv.report(), reason, stats)
        },
    )?;
    let (times, wdr, (report, _reason, stats)) =
        trials_on_device_thread(cfg, gpio, &sh, period_ns, progress, th, monitor, &stop)?;
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
            (at as i64 + ahead * 1_000_000_000 / rate as i64) as u64
        })
    };
    let trials = trials_from(&times.te, &onsets, &t_sound, &|_| None);
    warnings.extend(times.warnings);
    warnings.extend(watchdog_warning(wdr.as_ref()));
    if let Some(e) = &report.error {
        warnings.push(format!("ALSA: {e}"));
    }
    // Device xruns while the trials ran, as for JACK's server xruns.
    let t0 = sh.t0_ns.load(Ordering::Relaxed);
    let device_xruns = xruns_during_trials(
        &times.te,
        &trials,
        period_ns,
        report.xrun_events.iter().map(|e| t0 + e.at_ns),
    );
    let onset_typ = trials.first().map(|t| t.onset_frame).unwrap_or(0);
    // At the period interrupt one period is free and n−1 are queued ahead of the write.
    let queued = (periods as u64 - 1) * frames as u64;
    let status = if wdr.is_some() {
        Status::Watchdog
    } else if times.interrupted {
        Status::Interrupted
    } else {
        Status::Complete
    };
    Ok(EventRun {
        driver: EventDriver::Alsa,
        scenario: s.scenario,
        status,
        rate,
        period_frames: frames,
        periods: Some(periods),
        grid_buffer_frames: s.grid_buffer,
        output_delay_frames: report.delay_frames.mean.max(0.0) as u64,
        playback_latency_frames: None,
        playback_latency_port: None,
        model: ModelBand::new(
            period_ns as f64,
            ns_of_frames(queued + onset_typ as u64, rate) as f64,
        ),
        latency: LatencyStats::in_time(&trials),
        trials,
        ignored_triggers: times.ignored,
        cycles: times.window.0,
        xruns: times.window.1,
        skipped_periods: stats.skipped_periods,
        server_xruns: Some(device_xruns),
        device_t0_ns: None,
        background: None,
        jack: None,
        alsa: Some(report),
        warnings,
    })
}
