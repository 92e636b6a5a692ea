//! `--driver virtual`: the timer-paced virtual codec. Output of cycle k starts playing at
//! `t_ideal(k) + (n−1)·P`, then passes the output FIFO and the DAC, so the sound time is
//! exact from the device model.

use super::config::{EventConfig, EventDriver, EventRun, LatencyStats, ModelBand};
use super::gpio::GpioLine;
use super::handler::{build_handler, drain, Onset, OnsetSink};
use super::trials::{ns_of_frames, trials_from, trials_on_device_thread, watchdog_warning};
use super::Setting;
use crate::common::Status;
use crate::driver::signal::{Generator, SignalKind};
use crate::driver::{DeviceParams, Driver};
use crate::error::Result;
use crate::progress::Progress;
use crate::rt::thread::{spawn_rt, ThreadSpec};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// One setting on the virtual device.
pub(super) fn run(
    cfg: &EventConfig,
    s: &Setting,
    gpio: Option<&GpioLine>,
    progress: &dyn Progress,
) -> Result<EventRun> {
    let frames = s.period_frames.unwrap_or(64);
    let params = DeviceParams {
        rate: cfg.rate,
        frames,
        periods: s.periods,
    };
    let period_ns = params.period_ns();
    let (handler, mut rx, sh, monitor) = build_handler(s.scenario, cfg.rate, frames, cfg.policy)?;
    let _mlock = crate::rt::memory::MemoryLock::acquire()?;
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let (rate, seed) = (cfg.rate, cfg.seed);
    let sink_cap = cfg.trials as usize + 64;
    let th = spawn_rt(
        ThreadSpec {
            name: "xr-event".into(),
            policy: cfg.policy,
            cpus: Vec::new(),
        },
        move || {
            let mut handler = handler;
            let mut drv = crate::driver::virtual_dev::VirtualDriver::new(params, u64::MAX / 4);
            let mut src = Generator::new(SignalKind::Silence, rate, seed);
            let mut sink = OnsetSink::new(sink_cap);
            let (reason, stats) = drv.run(&mut handler, &stop2, &mut src, &mut sink);
            drop(handler);
            (sink, reason, stats)
        },
    )?;
    let (times, wd, (sink, _reason, stats)) =
        trials_on_device_thread(cfg, gpio, &sh, period_ns, progress, th, monitor, &stop)?;
    let t0 = sh.t0_ns.load(Ordering::Relaxed);
    let out_delay =
        (s.periods as u64 - 1) * frames as u64 + cfg.fifo_frames as u64 + cfg.dac_frames as u64;
    let onsets = drain(&mut rx);
    let t_sound = |o: &Onset| {
        Some(
            t0 + ns_of_frames(
                o.cycle * frames as u64 + out_delay + o.onset_frame as u64,
                cfg.rate,
            ),
        )
    };
    let dev = |o: &Onset| {
        let lo = o.cycle * frames as u64;
        sink.onsets
            .iter()
            .copied()
            .find(|&f| f >= lo && f < lo + frames as u64)
    };
    let trials = trials_from(&times.te, &onsets, &t_sound, &dev);
    let mut warnings = times.warnings;
    warnings.extend(watchdog_warning(wd.as_ref()));
    let onset_typ = trials.first().map(|t| t.onset_frame).unwrap_or(0);
    let status = if wd.is_some() {
        Status::Watchdog
    } else if times.interrupted {
        Status::Interrupted
    } else {
        Status::Complete
    };
    Ok(EventRun {
        driver: EventDriver::Virtual,
        scenario: s.scenario,
        status,
        rate: cfg.rate,
        period_frames: frames,
        periods: Some(s.periods),
        grid_buffer_frames: s.grid_buffer,
        output_delay_frames: out_delay,
        playback_latency_frames: None,
        playback_latency_port: None,
        model: ModelBand::new(
            period_ns as f64,
            ns_of_frames(out_delay + onset_typ as u64, cfg.rate) as f64,
        ),
        latency: LatencyStats::in_time(&trials),
        trials,
        ignored_triggers: times.ignored,
        cycles: times.window.0,
        xruns: times.window.1,
        skipped_periods: stats.skipped_periods,
        server_xruns: None,
        device_t0_ns: Some(t0),
        background: None,
        jack: None,
        alsa: None,
        warnings,
    })
}
