//! `--driver virtual`: the timer-paced virtual codec. Output of cycle k starts playing at
//! `t_ideal(k) + (n−1)·P`, then passes the output FIFO and the DAC, so the sound time is
//! exact from the device model.

use super::config::{EventConfig, EventRun};
use super::gpio::GpioLine;
use super::handler::{build_handler, drain, Onset, OnsetSink};
use super::trials::{run_trials, trials_from};
use super::Setting;
use crate::common::ns_of_frames;
use crate::driver::virtual_dev::VirtualDriver;
use crate::driver::{DeviceParams, DriverKind};
use crate::error::Result;
use crate::progress::Progress;
use std::sync::atomic::Ordering;

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
    let (handler, mut rx, sh, monitor) =
        build_handler(cfg.chain(s.scenario), cfg.rate, frames, cfg.policy)?;
    let _mlock = crate::rt::memory::MemoryLock::acquire_if(cfg.mlock)?;
    let sink = OnsetSink::new(cfg.trials as usize + 64);
    let dev = VirtualDriver::new(params, 0);
    let done = run_trials(
        cfg,
        s,
        gpio,
        progress,
        dev,
        (handler, &sh, monitor),
        sink,
        &mut || {},
    )?;
    let times = &done.times;
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
    // The sink's view is lost with a device thread the watchdog had to abandon.
    let played: &[u64] = done.sink.as_ref().map_or(&[], |k| &k.onsets);
    let device_frame = |o: &Onset| {
        let lo = o.cycle * frames as u64;
        played
            .iter()
            .copied()
            .find(|&f| f >= lo && f < lo + frames as u64)
    };
    let trials = trials_from(&times.te, &onsets, &t_sound, &device_frame);
    Ok(EventRun {
        device_t0_ns: Some(t0),
        ..done.event_run(
            s,
            (DriverKind::Virtual, params, Some(s.periods)),
            out_delay,
            trials,
            done.warnings.clone(),
        )
    })
}
