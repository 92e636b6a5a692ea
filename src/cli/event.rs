//! `xrunlab event`: parse, call `measure::event::run`, print and write the result.

use super::output::{self, Measured, Verdict};
use super::Global;
use crate::driver::DriverKind;
use crate::error::Result;
use crate::measure::event::{self, EventConfig, Scenario, DRIVERS, GRID_PAIRS};
use crate::results::Body;
use crate::rt::Policy;
use clap::Args;

/// Trigger-to-sound latency (Topliss et al.): from a trigger to the tone's first sample at the DAC.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  xrunlab event --driver virtual --buffer 64 --periods 2 --scenario mono
  xrunlab event --driver virtual --instrument lv2:http://drobilla.net/plugins/mda/EPiano
  xrunlab event --driver virtual --buffer 32 --periods 4 --fifo 20 --dac 10 --trials 500 -o ev.json
  xrunlab event --driver jack --scenario poly                      # the server's buffer size
  xrunlab event --driver jack --buffer 128 --set-buffer --scenario mono-bg
  xrunlab event --driver virtual --trigger stdin --gpio gpiochip0:17   # Enter = trigger, GPIO edge for a scope
  xrunlab event --driver jack --trigger udp:9000 --trials 50          # any datagram = trigger
  xrunlab event --driver alsa --device hw:0 --buffer 64 --periods 4 --scenario poly
  xrunlab event --grid --drivers virtual,jack,alsa --device hw:0 -o grid.json   # Topliss et al.'s tables

Topliss et al. gives a device buffer and a period; here --buffer is the period (frames per cycle)
and --periods the number of periods n, so Topliss et al.'s buffer 256 / period 64 is
--buffer 64 --periods 4 (--pairs 256/64 in a grid). A trial: the trigger time te is read
(CLOCK_MONOTONIC, triggering thread), the next audio cycle sends note-on to the synth (sine,
or poly for three oscillators), and the time its first non-zero sample reaches the DAC comes
from the driver's clock — virtual: t_ideal + (n−1)·period + FIFO + DAC + offset, exactly;
jack: the cycle start + the playback latency of our output port (connected to the physical
playback ports unless --connect says otherwise) + offset; alsa: the delay ALSA reports right
after the write that carried the onset (snd_pcm_delay) less the frames after it. Latency = t_sound − te, over
--trials triggers at a random phase (internal trigger), with the under-runs seen. mono-bg
runs `top -b -d 0.1` (or a built-in /proc reader when top is missing) in the background.
A grid on JACK sets each period with jack_set_buffer_size and restores the server's size
afterwards; the server's nperiods is its own (it shows in the port latency).
Exit codes: 0 measured, 2 bad usage, 3 cannot measure (no server, no GPIO chip),
interrupted or no trial completed (partial result written).")]
pub struct EventArgs {
    /// The backend: virtual (timer-paced codec model), jack (pull) or alsa (push).
    #[arg(long, value_parser = super::values::driver_parser(DRIVERS))]
    pub driver: Option<DriverKind>,
    /// Grid: the backends, e.g. virtual,jack,alsa.
    #[arg(long, value_name = "LIST")]
    pub drivers: Option<String>,
    /// Frames per period [default: 64; jack: the server's, see --set-buffer].
    #[arg(long)]
    pub buffer: Option<u32>,
    /// Periods of buffering n of the virtual device [default: 2].
    #[arg(long)]
    pub periods: Option<u32>,
    /// Sample rate of the virtual device (jack: the server's).
    #[arg(long, default_value_t = 48000, value_name = "HZ", value_parser = crate::units::parse_rate)]
    pub rate: u32,
    /// mono, mono-bg or poly; a comma list runs each [default: mono; grid: all three].
    #[arg(long, value_name = "LIST")]
    pub scenario: Option<String>,
    /// Play this LV2 instrument instead of the built-in sine (mono, mono-bg): an installed
    /// plugin with a MIDI input, as lv2:URI or lv2:NAME[(symbol=value,…)] (or a CLAP one with a
    /// note input, clap:ID or clap:NAME); each trigger sends
    /// it a note on (A4), the note off follows the tone. Its attack counts in the latency.
    #[arg(long, value_name = "lv2:PLUGIN")]
    pub instrument: Option<String>,
    /// internal (random phase), stdin (Enter) or udp:PORT (any datagram).
    #[arg(long, default_value = "internal")]
    pub trigger: String,
    /// Triggers per setting.
    #[arg(long, default_value_t = 200)]
    pub trials: u32,
    /// Drive this GPIO line high at each trigger (CHIP:LINE, e.g. gpiochip0:17).
    #[arg(long, value_name = "CHIP:LINE")]
    pub gpio: Option<String>,
    /// Reproduce Topliss et al.'s tables: every --pairs setting × scenario × driver.
    #[arg(long)]
    pub grid: bool,
    /// Grid settings as Topliss et al.'s BUFFER/PERIOD, e.g. 128/64,256/64 [default: every pair of
    /// Topliss et al.'s figures].
    #[arg(long, value_name = "B/P,…")]
    pub pairs: Option<String>,
    /// Virtual device: output FIFO latency, frames.
    #[arg(long, default_value_t = 0)]
    pub fifo: u32,
    /// Virtual device: DAC latency, frames.
    #[arg(long, default_value_t = 0)]
    pub dac: u32,
    /// Scheduling policy of the audio thread (virtual) and the engine.
    #[arg(long, default_value = "fifo:80")]
    pub policy: Policy,
    /// CPUs of the audio thread (virtual, ALSA) or of the JACK client's activation, e.g. 3 or 2-3 (on a tuned machine: its audio CPUs).
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Do not lock memory (mlockall) during the trials.
    #[arg(long)]
    pub no_mlock: bool,
    #[command(flatten)]
    pub jack: super::jack_args::JackArgs,
    #[command(flatten)]
    pub alsa: super::alsa_args::AlsaArgs,
    #[command(flatten)]
    pub forensics: super::forensics::ForensicsArgs,
}

fn config(a: &EventArgs) -> Result<EventConfig> {
    let drivers: Vec<DriverKind> = match (a.grid, a.driver, &a.drivers) {
        (_, Some(_), Some(_)) => return super::usage("--driver and --drivers exclude each other"),
        (false, None, Some(_)) => return super::usage("--drivers is for --grid; use --driver"),
        (false, None, None) => {
            return super::usage("say which backend: --driver virtual|jack|alsa")
        }
        (_, Some(d), None) => vec![d],
        (true, None, None) => vec![DriverKind::Virtual],
        (true, None, Some(list)) => event::parse_drivers(list)?,
    };
    let scenarios = match &a.scenario {
        Some(s) => {
            let mut v = Vec::new();
            for x in s.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                let x: Scenario = x.parse()?;
                if !v.contains(&x) {
                    v.push(x);
                }
            }
            if v.is_empty() {
                return super::usage("--scenario needs mono, mono-bg or poly");
            }
            v
        }
        None if a.grid => Scenario::ALL.to_vec(),
        None => vec![Scenario::Mono],
    };
    if !a.grid && a.pairs.is_some() {
        return super::usage("--pairs is for --grid");
    }
    if a.grid && (a.buffer.is_some() || a.periods.is_some()) {
        return super::usage("--grid takes its settings from --pairs, not --buffer/--periods");
    }
    let is_jack = drivers.contains(&DriverKind::Jack);
    let mut cfg = EventConfig::new(drivers[0]);
    cfg.drivers = drivers;
    cfg.rate = a.rate;
    cfg.buffer_frames = a.buffer;
    cfg.periods = a.periods;
    cfg.scenarios = scenarios;
    cfg.instrument = a.instrument.clone();
    cfg.trigger = a.trigger.parse()?;
    cfg.trials = a.trials;
    cfg.gpio = a.gpio.as_deref().map(str::parse).transpose()?;
    cfg.fifo_frames = a.fifo;
    cfg.dac_frames = a.dac;
    cfg.seed = a.seed;
    cfg.policy = a.policy;
    cfg.cpus = super::select_cpus_opt(a.cpus.as_deref())?;
    cfg.mlock = !a.no_mlock;
    cfg.grid = if a.grid {
        Some(match &a.pairs {
            Some(p) => event::parse_pairs(p)?,
            None => GRID_PAIRS.to_vec(),
        })
    } else {
        None
    };
    let jack_buffer = if a.grid { None } else { a.buffer };
    cfg.jack = a.jack.to_config(is_jack, jack_buffer, None)?;
    cfg.alsa = a.alsa.to_config(cfg.drivers.contains(&DriverKind::Alsa))?;
    cfg.validate()?;
    Ok(cfg)
}

pub fn run(a: EventArgs, g: &Global) -> Result<u8> {
    let cfg = config(&a)?;
    let mut session = output::session(g.quiet, cfg.trials as u64, Vec::new())
        .with_forensics(a.forensics.plan(g, None));
    let r = event::run(&cfg, &mut session)?;
    let started = session.into_started();
    let human = crate::report::text::event::summary(&r.config, &r.results);
    let verdict = if r.results.runs.iter().any(|x| x.latency.count > 0) {
        Verdict::Pass
    } else {
        let trials: usize = r.results.runs.iter().map(|x| x.trials.len()).sum();
        Verdict::NothingMeasured(format!(
            "xrunlab: event measured no trial: {}\n",
            if trials == 0 {
                "no trigger arrived".to_string()
            } else {
                format!(
                    "all {trials} trials overlapped an xrun, so their timing is not the device's"
                )
            }
        ))
    };
    let body = Body::Event {
        config: r.config,
        results: Box::new(r.results),
    };
    output::finish(
        Measured::new(body, r.status, started, human)
            .warnings(r.warnings)
            .verdict(verdict),
        g,
    )
}
