//! `xrunlab rtl --driver alsa`: the RTL estimator on the `alsa` driver in full duplex —
//! the multi-sine goes out on the device's playback stream and the estimator reads the
//! capture stream, cycle by cycle as the driver runs (a loopback cable, or any PCM whose
//! playback reaches its capture).
//!
//! The latency ALSA *declares* for the loop is read each cycle right after the period is
//! written: the playback delay (a frame written now plays that many frames later) plus the
//! capture delay (frames already captured and not yet read), back to back so both describe
//! one instant. With the engine's frame numbering (cycle k writes and reads frames
//! k·period…), the frame playing at that instant is `written − playback delay` and the
//! frame being captured is `read + capture delay`; a loop with no latency outside ALSA's
//! view therefore measures exactly their sum. measured − declared is what the driver does
//! not report (FIFO, converters, the analog path): the ALSA counterpart of JACK's `-I`/`-O`.
//!
//! The model is the device's negotiated periods × period + `--fifo` + `--codec`.

use super::handler::{on_rt_thread, LoopHandler, LoopRun, NoSink};
use super::{Estimator, RtlConfig, RtlOutcome};
use crate::driver::alsa::{AlsaDevice, AlsaDriver, AlsaReport, DelayFrames};
use crate::driver::signal::InputSource;
use crate::driver::{Driver, StopReason};
use crate::error::{Error, Result};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What the ALSA loop was, what ALSA declares for it, and what it measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RtlAlsa {
    /// playback + capture delay read together after each write (frames): the round trip
    /// ALSA declares. None when no cycle ran.
    pub declared_frames: Option<DelayFrames>,
    /// measured − what ALSA declared at the end of the run (the estimate converges on the
    /// run's last seconds): the latency ALSA does not report.
    pub extra_frames: Option<f64>,
    /// ALSA xruns whose windows were excluded after the run (the periods around the xrun
    /// and the pre-filled silence after each restart).
    pub xruns_excluded: u64,
    /// The device as negotiated and run: format, period × periods, each stream's delay,
    /// the xruns recovered.
    pub driver: AlsaReport,
}

/// Open `cfg.alsa` for the loop: capture is required.
pub(super) fn open(cfg: &RtlConfig) -> Result<AlsaDevice> {
    let ac = cfg.alsa.clone().unwrap_or_default();
    let dev = AlsaDevice::open(&ac, cfg.rate, cfg.buffers[0], cfg.periods)?;
    if !dev.has_capture() {
        return Err(Error::cannot_measure(format!(
            "ALSA device '{}' gives no capture stream ({}): a loop needs playback and capture",
            ac.device,
            dev.capture_note().unwrap_or("no reason given")
        )));
    }
    Ok(dev)
}

/// The driver reads the captured periods; this source is never asked.
struct Silence;

impl InputSource for Silence {
    fn fill(&mut self, _: u64, l: &mut [f32], r: &mut [f32]) {
        l.fill(0.0);
        r.fill(0.0);
    }
}

/// Measure the loop on the opened device. `est` was built for its rate.
pub(super) fn run(
    cfg: &RtlConfig,
    dev: AlsaDevice,
    est: Estimator,
    progress: &dyn crate::progress::Progress,
) -> Result<LoopRun> {
    let (period, periods) = (dev.period_frames(), dev.periods() as u64);
    let max_frames = (cfg.duration_ns as u128 * dev.rate() as u128 / 1_000_000_000) as u64;
    let periods_total = max_frames.div_ceil(period as u64).max(1);
    let stop = Arc::new(AtomicBool::new(false));
    let mut handler = LoopHandler::new(est, period, stop.clone());
    handler.late_loses_output = false;
    let cycles = handler.cycles.clone();
    let stop2 = stop.clone();
    let (h, reason, report) = on_rt_thread(
        cfg.policy,
        "rtl (alsa loop)",
        periods_total,
        &cycles,
        progress,
        move || {
            let mut drv = AlsaDriver::new(dev, periods_total);
            drv.capture_input();
            let (reason, _) = drv.run(&mut handler, &stop2, &mut Silence, &mut NoSink);
            (handler, reason, drv.report())
        },
    )?;
    let mut est = h.est;
    // An xrun loses up to n periods of output queued before it was detected, and after the
    // restart the first loop delay of input returns the pre-filled silence, not our signal
    // (the estimator extends every disturbance by one loop delay).
    let p = period as u64;
    let mut excluded = 0;
    for x in &report.xrun_events {
        let from = x.after_cycle.map_or(0, |c| c + 1).saturating_sub(periods) * p;
        let to = x.resumed_cycle.unwrap_or(u64::MAX / p) * p;
        excluded += est.disturb_before_convergence(from, to) as u64;
    }
    let mut warnings = Vec::new();
    if report.xruns_recovered > 0 {
        warnings.push(format!(
            "ALSA: {} xruns recovered (prepare and restart); the estimates around them are left out",
            report.xruns_recovered
        ));
    }
    if report.stalled {
        warnings.push("ALSA: the device stopped delivering periods; the run stopped".into());
    }
    if let Some(e) = &report.error {
        warnings.push(format!("ALSA: {e}; the run stopped there"));
    }
    let m = est.result();
    let measured = m.delay_frames.filter(|_| m.outcome == RtlOutcome::Measured);
    let declared = report.loop_delay_frames;
    let last = report.loop_delay_last_frames;
    let extra = measured.zip(last).map(|(d, l)| d - l as f64);
    if let (Some(x), Some(l)) = (extra, last) {
        if x < -0.5 {
            warnings.push(format!(
                "ALSA declares {l} frames for this loop, more than measured"
            ));
        }
    }

    // Only the handler (on convergence) sets `stop`; any other stop is an interruption
    // (a signal, a stalled device, a failed recovery).
    let interrupted = reason == StopReason::Stopped && !stop.load(Ordering::SeqCst);
    let cycles = cycles.load(Ordering::Relaxed);
    Ok(LoopRun {
        cycles,
        xruns: h.xruns,
        skipped: h.skipped,
        est: Some(est),
        interrupted,
        warnings,
        jack: None,
        alsa: Some(RtlAlsa {
            declared_frames: declared,
            extra_frames: extra,
            xruns_excluded: excluded,
            driver: report,
        }),
    })
}
