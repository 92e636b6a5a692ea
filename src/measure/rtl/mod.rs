//! Round-trip latency (Vignati et al. §3.1.3, §3.2.3): the model of eq. 1 ([`model`]), a
//! multi-sine phase estimator ([`estimator`], the jack_iodelay principle in our own
//! implementation), and the loops it measures: the virtual analog loopback offline or on
//! the timer-paced device ([`loopback`]), a JACK client ([`jack`]) and an ALSA PCM in full
//! duplex ([`alsa`]). This file holds what `xrunlab rtl` is asked and answers, and [`run`].

mod alsa;
mod estimator;
mod handler;
mod jack;
mod loopback;
mod model;

pub use alsa::RtlAlsa;
pub use estimator::{
    frames_for_an_estimate, hop_frames_at, window_frames_at, EstimatePoint, Estimator,
    EstimatorConfig, RtlMeasurement, RtlOutcome, CONVERGED_FRAMES,
};
pub use jack::RtlJack;
pub use loopback::{
    fractional_delay_fir, loopback, run_offline, LoopLine, LoopSink, LoopSource, LoopbackSpec,
};
pub use model::{
    model_frames, model_table, parse_codec, profile, published_ms, LoopLatency, ModelRow, Profile,
    PROFILES,
};

use crate::driver::kind::BufferSource;
use crate::driver::{AnyDevice, Device, DeviceParams, DriverKind, DriverOptions};
use loopback::FD_CENTER;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What `xrunlab rtl` was asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RtlConfig {
    /// What paces the measured loop; None = the model only. `sim` runs the virtual
    /// device's loop offline (its cycles back to back, deterministic), `virtual` on the
    /// timer-paced device, `jack` as a JACK client (the server decides buffer size and
    /// rate), `alsa` on a PCM in full duplex (the device negotiates rate, period and periods).
    pub driver: Option<DriverKind>,
    pub profile: Option<String>,
    pub rate: u32,
    /// Buffer sizes modelled (a measured run uses the first).
    pub buffers: Vec<u32>,
    pub periods: u32,
    pub loopback: LoopbackSpec,
    /// Longest measurement; it ends earlier once converged.
    pub duration_ns: u64,
    pub min_level_dbfs: f64,
    pub seed: u64,
    /// Policy of the virtual driver's thread.
    pub policy: crate::rt::Policy,
    /// The JACK client (`--driver jack`): server, name, and the loop's ports — `connect_out`
    /// /`connect_in` hold `--out`/`--in`; both empty = our output into our own input.
    #[serde(default)]
    pub jack: Option<crate::driver::jack::JackConfig>,
    /// The ALSA device (`--driver alsa`): PCM name and access.
    #[serde(default)]
    pub alsa: Option<crate::driver::alsa::AlsaConfig>,
    /// Watchdog bound of a real-time loop; None = max(1 s, 100 periods).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watchdog_ns: Option<u64>,
    /// TEST ONLY (`--hang-at-cycle`): the loop's handler never returns from this cycle, so
    /// the watchdog can be tested end to end. A result made with it says so here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hang_at_cycle: Option<u64>,
    /// CPUs of the loop thread (`--cpus`); empty: wherever the process may run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpus: Vec<usize>,
}

impl RtlConfig {
    pub fn model(rate: u32, buffers: Vec<u32>, periods: u32, latency: LoopLatency) -> Self {
        RtlConfig {
            driver: None,
            profile: None,
            rate,
            buffers,
            periods,
            loopback: LoopbackSpec::new(latency),
            duration_ns: 10_000_000_000,
            min_level_dbfs: -60.0,
            seed: 1,
            policy: crate::rt::Policy::fifo(80),
            jack: None,
            alsa: None,
            watchdog_ns: None,
            hang_at_cycle: None,
            cpus: Vec::new(),
        }
    }

    pub fn validate(&self) -> crate::Result<()> {
        use crate::Error;
        if !(8000..=384_000).contains(&self.rate) {
            return Err(Error::usage(format!(
                "--rate {} is outside 8000..384000",
                self.rate
            )));
        }
        if self.buffers.is_empty() || self.buffers.iter().any(|&b| !(1..=65536).contains(&b)) {
            return Err(Error::usage("buffer sizes must be within 1..65536"));
        }
        if !(2..=64).contains(&self.periods) {
            return Err(Error::usage(format!(
                "--periods {} is outside 2..64",
                self.periods
            )));
        }
        let f = self.loopback.fraction;
        if !(0.0..1.0).contains(&f) {
            return Err(Error::usage(format!("--fraction {f} is outside [0, 1)")));
        }
        if self.driver.is_some() {
            if self.duration_ns == 0 {
                return Err(Error::usage("--duration must be positive"));
            }
            let b = self.buffers[0];
            let total = model_frames(b, self.periods, &self.loopback.latency);
            if !LoopLine::causal(b, total, f != 0.0) {
                return Err(Error::usage(format!(
                    "a fractional delay needs buffer + FIFO + codec ≥ {} frames here (the filter's own delay comes out of them)",
                    b as usize + FD_CENTER
                )));
            }
            self.check_loop_fits(total)?;
        }
        Ok(())
    }

    /// A run that ends before the loop's return has filled one analysis window gives no
    /// estimate, and what it reports then ("too weak: is the loop connected?") blames the
    /// cable: refuse it before running, with the duration that would do. The virtual and sim
    /// loops are the model, so their delay is known; a JACK or ALSA loop may be shorter than
    /// the model (a loop inside the JACK graph is one period), so only the window is counted.
    fn check_loop_fits(&self, model: u64) -> crate::Result<()> {
        let b = self.buffers[0] as u64;
        let w = window_frames_at(self.rate);
        let known = matches!(
            self.driver,
            Some(DriverKind::Sim) | Some(DriverKind::Virtual)
        );
        let delay = if known {
            model + (self.loopback.fraction > 0.0) as u64
        } else {
            0
        };
        let terms = format!(
            "{} × {b} + FIFO {} + codec {}+{}",
            self.periods,
            self.loopback.latency.fifo_frames,
            self.loopback.latency.adc_frames,
            self.loopback.latency.dac_frames
        );
        if delay >= w {
            return Err(crate::Error::usage(format!(
                "this loop's delay is {delay} frames ({terms}), beyond the longest the estimator measures, {w} frames ({:.2} s) at {} Hz: no --duration helps; use a smaller --buffer, fewer --periods or less FIFO and codec",
                w as f64 / self.rate as f64,
                self.rate
            )));
        }
        // The loop runs whole cycles: what the duration holds, rounded up to a cycle.
        let cycles = |frames: u64| frames.div_ceil(b).max(1);
        let need = frames_for_an_estimate(self.rate, delay);
        if cycles(crate::common::frames_of_ns(self.duration_ns, self.rate)) >= cycles(need) {
            return Ok(());
        }
        // The shortest whole-ms duration whose cycles reach `frames`: one frame into its
        // last cycle.
        let ms_for = |frames: u64| {
            let f = (cycles(frames) - 1) * b + 1;
            (f as u128 * 1_000).div_ceil(self.rate as u128) as u64
        };
        // Convergence asks for a second more of estimates, one per hop.
        let hop = hop_frames_at(self.rate);
        let (min_ms, converge_ms) = (
            ms_for(need),
            ms_for(need + (self.rate as u64).div_ceil(hop) * hop),
        );
        let why = if known {
            format!("its return starts after {delay} frames ({terms}) and ")
        } else {
            String::new()
        };
        Err(crate::Error::usage(format!(
            "--duration {}: too short for this loop: {why}an estimate needs one whole analysis window of the return ({w} frames, {:.2} s at {} Hz); give at least --duration {min_ms}ms (about {converge_ms}ms to converge)",
            crate::units::format_ns(self.duration_ns),
            w as f64 / self.rate as f64,
            self.rate
        )))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RtlResults {
    /// Eq. 1 for every buffer size asked.
    pub model: Vec<ModelRow>,
    pub measured: Option<RtlMeasurement>,
    /// The virtual loop's ground truth: model + fractional delay.
    pub truth_frames: Option<f64>,
    /// measured − model (frames).
    pub difference_frames: Option<f64>,
    /// measured − truth (frames).
    pub error_frames: Option<f64>,
    /// Device cycles run and cycles that missed their deadline (their output was lost).
    pub cycles: u64,
    pub xruns: u64,
    /// Periods the device ran without our cycle (a late cycle made the server skip us).
    #[serde(default)]
    pub skipped_periods: u64,
    /// `--driver jack`: the loop's ports, the server's declared latencies and the extra
    /// latency its `-I`/`-O` would need.
    #[serde(default)]
    pub jack: Option<RtlJack>,
    /// `--driver alsa`: the device as negotiated, the round trip ALSA declares and the
    /// latency it does not.
    #[serde(default)]
    pub alsa: Option<RtlAlsa>,
    /// What the watchdog did when a loop's cycle got stuck (status `watchdog`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watchdog: Option<crate::engine::watchdog::WatchdogReport>,
}

impl RtlResults {
    /// What the loop's own stack declares for it — the JACK server's port latencies (plus
    /// the graph's period), or ALSA's playback + capture delay at the end of the run — with
    /// measured − declared and what declared it. None on the virtual loop.
    pub fn declared(&self) -> Option<(f64, Option<f64>, &'static str)> {
        if let Some(j) = &self.jack {
            return Some((
                j.declared_frames as f64,
                j.extra_frames,
                "JACK port latencies",
            ));
        }
        let a = self.alsa.as_ref()?;
        let l = a.driver.loop_delay_last_frames?;
        Some((l as f64, a.extra_frames, "ALSA playback + capture delay"))
    }
}

/// The outcome of `rtl`.
pub type RtlRunOutcome = crate::measure::session::Outcome<RtlConfig, RtlResults>;

/// `xrunlab rtl`: model, and measure when a driver is set.
pub fn run(
    cfg: &RtlConfig,
    session: &mut crate::measure::session::Session,
) -> crate::Result<RtlRunOutcome> {
    use crate::common::Status;
    let progress = session.progress();
    // A JACK server decides buffer size and rate, an ALSA device negotiates rate, period
    // and periods: open the device first and model what it serves.
    let device = match cfg.driver {
        Some(kind) => Some(open(cfg, kind)?),
        None => None,
    };
    let cfg = &match &device {
        Some(d) => {
            let got = d.params();
            let mut c = cfg.clone();
            c.rate = got.rate;
            c.buffers = vec![got.frames];
            if d.kind().periods_apply() {
                c.periods = got.periods;
            }
            c
        }
        None => cfg.clone(),
    };
    cfg.validate()?;
    let min = cfg
        .profile
        .as_deref()
        .and_then(|p| profile(p).ok())
        .map(|p| p.min_buffer)
        .unwrap_or(0);
    let model = model_table(
        &cfg.buffers,
        cfg.periods,
        cfg.rate,
        &cfg.loopback.latency,
        min,
    );
    let mut res = RtlResults {
        model,
        measured: None,
        truth_frames: None,
        difference_frames: None,
        error_frames: None,
        cycles: 0,
        xruns: 0,
        skipped_periods: 0,
        jack: None,
        alsa: None,
        watchdog: None,
    };
    let Some(device) = device else {
        return Ok(RtlRunOutcome {
            status: Status::Complete,
            config: cfg.clone(),
            results: res,
            warnings: Vec::new(),
        });
    };
    let buffer = cfg.buffers[0];
    let mut ecfg = EstimatorConfig::new(cfg.rate, cfg.duration_ns);
    ecfg.min_level_dbfs = cfg.min_level_dbfs;
    let est = Estimator::new(ecfg);
    let lr = match device {
        AnyDevice::Sim(_) => loopback::run_sim(cfg, est, progress),
        AnyDevice::Virtual(d) => loopback::run_virtual(cfg, d, est, progress)?,
        AnyDevice::Jack(c) => jack::run(cfg, c, est, progress)?,
        AnyDevice::Alsa(d) => alsa::run(cfg, d, est, progress)?,
    };
    progress.finish();
    res.cycles = lr.cycles;
    res.xruns = lr.xruns;
    res.skipped_periods = lr.skipped;
    res.jack = lr.jack;
    res.alsa = lr.alsa;
    res.watchdog = lr.watchdog;
    let mut warnings = lr.warnings;
    if res.alsa.is_some() {
        if lr.xruns + lr.skipped > 0 {
            warnings.push(format!(
                "{} cycles ended past the engine's deadline and {} periods were skipped; on an ALSA device only its own xruns lose output, and the estimates around those are left out",
                lr.xruns, lr.skipped
            ));
        }
    } else if lr.xruns + lr.skipped > 0 {
        warnings.push(format!(
            "{} cycles missed their deadline and {} periods were skipped: the estimates whose window they touched are left out",
            lr.xruns, lr.skipped
        ));
    }
    let model_f = model_frames(buffer, cfg.periods, &cfg.loopback.latency) as f64;
    if let Some(est) = lr.est {
        let m = est.result();
        if lr.ground_truth {
            let truth = model_f + cfg.loopback.fraction;
            res.truth_frames = Some(truth);
            res.error_frames = m.delay_frames.map(|d| d - truth);
        }
        res.difference_frames = m.delay_frames.map(|d| d - model_f);
        if m.outcome == RtlOutcome::Measured && !m.converged {
            warnings.push(m.message.clone());
        }
        res.measured = Some(m);
    }
    Ok(RtlRunOutcome {
        status: lr.status,
        config: cfg.clone(),
        results: res,
        warnings,
    })
}

/// Open the loop's device for what `cfg` asks: the virtual device takes it as it is, a
/// JACK server serves its own buffer size and rate, an ALSA device the closest it accepts
/// (its warning says so when that differs).
fn open(cfg: &RtlConfig, kind: DriverKind) -> crate::Result<AnyDevice> {
    if kind.buffer_source() == BufferSource::Asked {
        // What is asked must make sense before a device is asked for it.
        cfg.validate()?;
    }
    let opts = DriverOptions {
        seed: cfg.seed,
        jack: cfg.jack.clone(),
        alsa: cfg.alsa.clone(),
        ..DriverOptions::default()
    };
    let asked = DeviceParams {
        rate: cfg.rate,
        frames: cfg.buffers[0],
        periods: cfg.periods,
    };
    AnyDevice::open(kind, asked, &opts)
}
