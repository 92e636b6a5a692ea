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

use super::handler::{run_loop, LoopRun, LoopSpec, NoSink};
use super::{Estimator, RtlConfig, RtlOutcome};
use crate::driver::alsa::{AlsaDriver, AlsaReport, DelayFrames};
use crate::driver::signal::InputSource;
use crate::driver::Device;
use crate::engine::harness::Progressing;
use crate::error::{Error, Result};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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

/// A loop needs the device's capture stream as well as its playback.
pub(super) fn check_capture(dev: &AlsaDriver) -> Result<()> {
    let d = dev.device();
    if d.has_capture() {
        return Ok(());
    }
    Err(Error::cannot_measure(format!(
        "ALSA device '{}' gives no capture stream ({}): a loop needs playback and capture",
        dev.report().device,
        d.capture_note().unwrap_or("no reason given")
    )))
}

/// The driver reads the captured periods; this source is never asked.
struct Silence;

impl InputSource for Silence {
    fn fill(&mut self, _: u64, l: &mut [f32], r: &mut [f32]) {
        l.fill(0.0);
        r.fill(0.0);
    }
}

/// Measure the loop on the opened device (its capture is the loop's input). `est` was
/// built for its rate.
pub(super) fn run(
    cfg: &RtlConfig,
    mut dev: AlsaDriver,
    est: Estimator,
    progress: &dyn crate::progress::Progress,
) -> Result<LoopRun> {
    check_capture(&dev)?;
    let p = dev.params();
    let (period, periods) = (p.frames as u64, p.periods as u64);
    dev.capture_input();
    let spec = LoopSpec {
        est,
        late_loses_output: false,
        message: "rtl (alsa loop)",
    };
    let looped = run_loop(cfg, dev, spec, Silence, NoSink, progress, &mut Progressing)?;
    let report = looped.report.clone().into_alsa();
    let mut run = looped.into_run(Vec::new());
    let (Some(report), Some(est)) = (report, run.est.as_mut()) else {
        // The stuck loop was abandoned: no estimate, no device report.
        return Ok(run);
    };
    // An xrun loses up to n periods of output queued before it was detected, and after the
    // restart the first loop delay of input returns the pre-filled silence, not our signal
    // (the estimator extends every disturbance by one loop delay).
    let mut excluded = 0;
    for x in &report.xrun_events {
        let from = x.after_cycle.map_or(0, |c| c + 1).saturating_sub(periods) * period;
        let to = x.resumed_cycle.unwrap_or(u64::MAX / period) * period;
        excluded += est.disturb_before_convergence(from, to) as u64;
    }
    let m = est.result();
    let measured = m.delay_frames.filter(|_| m.outcome == RtlOutcome::Measured);
    let declared = report.loop_delay_frames;
    let last = report.loop_delay_last_frames;
    let extra = measured.zip(last).map(|(d, l)| d - l as f64);
    if let (Some(x), Some(l)) = (extra, last) {
        if x < -0.5 {
            run.warnings.push(format!(
                "ALSA declares {l} frames for this loop, more than measured"
            ));
        }
    }
    run.alsa = Some(RtlAlsa {
        declared_frames: declared,
        extra_frames: extra,
        xruns_excluded: excluded,
        driver: report,
    });
    Ok(run)
}
