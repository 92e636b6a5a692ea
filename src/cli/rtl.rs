//! `xrunlab rtl`: parse, call `measure::rtl::run`, print and write the result.

use super::output::{self, Measured, Verdict};
use super::Global;
use crate::driver::DriverKind;
use crate::error::Result;
use crate::measure::rtl::{self, LoopLatency, RtlConfig, RtlOutcome};
use crate::results::Body;
use crate::rt::Policy;
use clap::Args;

/// The drivers a loop can run on (all of them).
const DRIVERS: &[DriverKind] = &DriverKind::ALL;

/// Round-trip latency: modelled (2·buffer/fs + FIFO + codec, Vignati et al. eq. 1) and measured by
/// multi-sine phase on a loop.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  xrunlab rtl --model --profile xenomai-hifiberry                # Vignati et al. Table 1, Xenomai column
  xrunlab rtl --model --fifo 20 --codec 2+10 --buffers 64..512 --periods 2
  xrunlab rtl --driver virtual --loopback --buffer 64 --fifo 13 --codec 2+10 --fraction 0.37
  xrunlab rtl --driver sim --buffer 128 --fifo 20 --codec 2+10 --snr 20 --invert -o rtl.json
  xrunlab rtl --driver jack                                      # our out_1 → our in_1 inside the graph
  xrunlab rtl --driver jack --out system:playback_1 --in system:capture_1   # through a cable
  xrunlab rtl --driver alsa --device hw:0 --buffer 128 --periods 2 --fifo 20 --codec 2+10
  xrunlab rtl --driver alsa --device hw:Loopback --access mmap --buffer 256 --periods 3

The model is periods·buffer + FIFO + ADC + DAC frames (with the default 2 periods, eq. 1).
The measurement emits five tones (about 1.7 to 5 kHz), demodulates what comes back over a
1.25 s window and resolves the delay coarse to fine from the tones' phase differences; the
largest measurable delay is that window (60032 frames, about 1.25 s, at 48 kHz). It stops once the estimate
is stable to 0.01 frame over a second, or after --duration. The sim driver runs the virtual
device's loop without real time (deterministic); virtual runs it on a timer-paced RT thread.
With --driver jack the estimator is a JACK client at the server's buffer size and rate; it
prints what the server's port latencies declare for the loop (playback + capture, plus the
one period a loop closed inside the graph takes) and the extra latency the backend's -I/-O
arguments would need, as jack_iodelay does. With --driver alsa the tones go out on the
device's playback stream and come back on its capture stream (a loopback cable, or a PCM whose
playback reaches its capture); --buffer is ALSA's period size and --periods its periods (the
device may round them: the model uses what it accepted). It prints the round trip ALSA
declares (playback + capture delay read together each cycle) and measured − declared, the
latency the driver does not report (FIFO, converters). Windows an xrun touched are left out.
A --duration too short to hold one analysis window of the loop's return (on sim and virtual
the loop is the model, so its delay counts; on JACK and ALSA only the window) is refused before
the loop runs, with the shortest one that holds it; so is a sim or virtual loop longer than the
window.
Exit codes: 0 measured or modelled, 2 bad usage (a --duration too short for the loop, a loop
beyond the window), 3 signal too weak, delay out of range, no estimate, interrupted or stopped
by the watchdog (partial result written).")]
pub struct RtlArgs {
    /// Print the model only (no loop is run).
    #[arg(long)]
    pub model: bool,
    /// A Vignati et al. setup: xenomai-hifiberry (FIFO 13, codec 2+10) or preemptrt-hifiberry (FIFO 20, codec 2+10).
    #[arg(long)]
    pub profile: Option<String>,
    /// Interface FIFO latency in frames (overrides the profile's).
    #[arg(long)]
    pub fifo: Option<u32>,
    /// Converter latencies ADC+DAC in frames, e.g. 2+10 (overrides the profile's).
    #[arg(long)]
    pub codec: Option<String>,
    /// Buffer sizes the model tabulates, e.g. 16..512 (powers of two) or 64,128.
    #[arg(long, default_value = "16..512")]
    pub buffers: String,
    /// Buffer size of a measured loop [default: 64; jack: the server's; alsa: ALSA's period
    /// size].
    #[arg(long)]
    pub buffer: Option<u32>,
    /// Sample rate [default: 48000; jack: the server's].
    #[arg(long, value_name = "HZ", value_parser = crate::units::parse_rate)]
    pub rate: Option<u32>,
    /// Periods of buffering n.
    #[arg(long, default_value_t = 2)]
    pub periods: u32,
    /// Which loop to measure.
    #[arg(long, value_parser = super::values::driver_parser(DRIVERS))]
    pub driver: Option<DriverKind>,
    /// Loop the virtual device's output back to its input (the analog cable).
    #[arg(long)]
    pub loopback: bool,
    /// Extra fractional delay of the virtual loop, in [0, 1) frames.
    #[arg(long, default_value_t = 0.0, value_parser = crate::units::parse_finite)]
    pub fraction: f64,
    /// Noise on the virtual loop, dB below the test signal.
    #[arg(long, value_parser = crate::units::parse_finite)]
    pub snr: Option<f64>,
    /// The virtual loop inverts polarity.
    #[arg(long)]
    pub invert: bool,
    /// The virtual loop returns nothing (to see the "too weak" report).
    #[arg(long)]
    pub unplugged: bool,
    /// Gain of the virtual loop's return, dB.
    #[arg(long, default_value_t = 0.0, allow_hyphen_values = true, value_parser = crate::units::parse_finite)]
    pub gain: f64,
    /// Longest measurement, e.g. 10s (ends earlier once converged).
    #[arg(long, default_value = "10s")]
    pub duration: String,
    /// Return level below which the result is "signal too weak", dBFS.
    #[arg(long, default_value_t = -60.0, allow_hyphen_values = true, value_parser = crate::units::parse_finite)]
    pub min_level: f64,
    /// Scheduling policy of the virtual or ALSA loop's thread.
    #[arg(long, default_value = "fifo:80")]
    pub policy: String,
    /// CPUs of the loop thread, e.g. 3 or 2-3 (on a tuned machine: its audio CPUs).
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Stop when a loop's cycle has not ended after this long [default: max(1s, 100
    /// periods)].
    #[arg(long, value_name = "DURATION", value_parser = crate::units::parse_duration_ns)]
    pub watchdog: Option<u64>,
    /// TEST ONLY: the loop's cycle N never returns (it spins), so the watchdog can be
    /// tested end to end (tests/rtl_watchdog.rs); never use it in a measurement.
    #[arg(long, hide = true, value_name = "N")]
    pub hang_at_cycle: Option<u64>,
    /// jack: the port our output feeds (e.g. system:playback_1); with --in. Default: our own input.
    #[arg(long, value_name = "PORT")]
    pub out: Option<String>,
    /// jack: the port that feeds our input (e.g. system:capture_1); with --out.
    #[arg(long = "in", value_name = "PORT")]
    pub in_port: Option<String>,
    #[command(flatten)]
    pub jack: super::jack_args::JackArgs,
    #[command(flatten)]
    pub alsa: super::alsa_args::AlsaArgs,
}

fn config(a: &RtlArgs) -> Result<RtlConfig> {
    let mut lat = LoopLatency {
        fifo_frames: 0,
        adc_frames: 0,
        dac_frames: 0,
    };
    if let Some(p) = &a.profile {
        lat = rtl::profile(p)?.latency;
    }
    if let Some(f) = a.fifo {
        lat.fifo_frames = f;
    }
    if let Some(c) = &a.codec {
        let (adc, dac) = rtl::parse_codec(c)?;
        lat.adc_frames = adc;
        lat.dac_frames = dac;
    }
    let driver = match (a.model, a.driver) {
        (true, Some(_)) => return super::usage("--model and --driver exclude each other"),
        (true, None) => None,
        (false, None) => {
            return super::usage(
                "say what to do: --model, --driver sim|virtual --loopback, --driver jack or --driver alsa",
            )
        }
        (false, Some(DriverKind::Virtual)) if !a.loopback => {
            return super::usage(
                "the virtual device has no cable: add --loopback to loop its output to its input",
            )
        }
        (false, Some(d)) => Some(d),
    };
    let is_jack = driver == Some(DriverKind::Jack);
    let mut jack = a.jack.to_config(is_jack, a.buffer, a.rate)?;
    let alsa = a.alsa.to_config(driver == Some(DriverKind::Alsa))?;
    let virtual_only = a.loopback
        || a.fraction != 0.0
        || a.snr.is_some()
        || a.invert
        || a.unplugged
        || a.gain != 0.0;
    if virtual_only && (is_jack || alsa.is_some()) {
        return super::usage(format!(
            "--loopback, --fraction, --snr, --invert, --unplugged and --gain shape the virtual loop; {}",
            if is_jack {
                "a JACK loop is what the graph is"
            } else {
                "an ALSA loop is what the device's cable is"
            }
        ));
    }
    if let Some(j) = jack.as_mut() {
        if a.jack.connect.is_some() {
            return super::usage("rtl's loop ports are --out PORT --in PORT, not --connect");
        }
        match (&a.out, &a.in_port) {
            (Some(o), Some(i)) => {
                j.connect_out = vec![o.clone()];
                j.connect_in = vec![i.clone()];
            }
            (None, None) => {}
            _ => {
                return super::usage(
                    "give both ends of the loop, --out PORT and --in PORT (or neither: our output into our own input)",
                )
            }
        }
    } else if a.out.is_some() || a.in_port.is_some() {
        return super::usage("--out and --in need --driver jack");
    }
    let buffers = if driver.is_some() {
        vec![a.buffer.unwrap_or(64)]
    } else {
        crate::units::parse_uint_list(
            "--buffers",
            &a.buffers,
            true,
            crate::units::MAX_BUFFER_FRAMES,
        )?
    };
    let mut cfg = RtlConfig::model(a.rate.unwrap_or(48000), buffers, a.periods, lat);
    cfg.jack = jack;
    cfg.alsa = alsa;
    cfg.driver = driver;
    cfg.profile = a.profile.clone();
    cfg.loopback.fraction = a.fraction;
    cfg.loopback.snr_db = a.snr;
    cfg.loopback.invert = a.invert;
    cfg.loopback.connected = !a.unplugged;
    cfg.loopback.gain_db = a.gain;
    cfg.duration_ns = crate::units::parse_duration_ns(&a.duration)?;
    if cfg.duration_ns > 3_600_000_000_000 {
        return super::usage("--duration is at most 1h");
    }
    cfg.min_level_dbfs = a.min_level;
    cfg.seed = a.seed;
    cfg.policy = a.policy.parse::<Policy>()?;
    cfg.cpus = super::select_cpus_opt(a.cpus.as_deref())?;
    cfg.watchdog_ns = a.watchdog;
    cfg.hang_at_cycle = a.hang_at_cycle;
    Ok(cfg)
}

pub fn run(a: RtlArgs, g: &Global) -> Result<u8> {
    let cfg = config(&a)?;
    cfg.validate()?;
    let model_only = cfg.driver.is_none();
    let mut session = output::session(g.quiet || model_only, 0, Vec::new());
    let r = rtl::run(&cfg, &mut session)?;
    let started = session.into_started();
    let human = crate::report::text::rtl::summary(&r.config, &r.results);
    // The summary says why a loop gave no estimate.
    let verdict = match &r.results.measured {
        Some(m) if m.outcome != RtlOutcome::Measured => Verdict::NothingMeasured(String::new()),
        _ => Verdict::Pass,
    };
    let watchdog = r.results.watchdog.clone();
    let body = Body::Rtl {
        config: r.config,
        results: Box::new(r.results),
    };
    let mut m = Measured::new(body, r.status, started, human)
        .warnings(r.warnings)
        .verdict(verdict)
        .computed(model_only);
    if let Some(w) = watchdog {
        m = m.partial(format!(
            "xrunlab: error: watchdog: a cycle of the loop did not end within {}; its thread was demoted to SCHED_OTHER and the run stopped (partial result{})\n",
            crate::units::format_ns(w.bound_ns),
            if g.output.is_some() { " written" } else { " above" }
        ));
    }
    output::finish(m, g)
}
