//! `xrunlab load`: the DSP load test grid of Vignati et al. §3.1.1.

use super::output::{self, Measured};
use super::stress_args::StressArgs;
use super::Global;
use crate::driver::sim::{LatencyModel, SimConfig};
use crate::engine::CostModel;
use crate::error::{Error, Result};
use crate::measure::loadtest::{self, Criterion, LoadConfig, LoadResults};
use crate::measure::run::DriverKind;
use crate::results::{read_result, write_json_atomic, Body, ResultDoc, Status};
use crate::rt::Policy;
use crate::stress::StressSpec;
use clap::{Args, ValueEnum};
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum CriterionArg {
    Overload,
    All,
}

/// The drivers `load` runs on.
const LOAD_DRIVERS: &[DriverKind] = &[DriverKind::Virtual, DriverKind::Sim, DriverKind::Jack];

/// The DSP load test: the most plugin instances per track without xruns, per buffer size,
/// track count and plugin type (Vignati et al. §3.1.1, Fig. 2).
#[derive(Debug, Args)]
// The sim flags are run's (cli/sim_args.rs); three say it for a grid.
#[command(
    mut_arg("sim_latency", |a| a.help("sim: wake-up latency model (see `xrunlab run --help`)")),
    mut_arg("cost", |a| a.help(
        "sim: declared cost of one plugin instance, NAME=DURATION or NAME=DURATION/frame"
    )),
    mut_arg("inject", |a| a.help(
        "sim: inject an event into every trial: late:CYCLE:DURATION, compute:… or preempt:…"
    ))
)]
#[command(after_help = "\
Each cell starts at the physical limit (instances of the plugin that fit one period per engine
thread, from a short benchmark), brackets the maximum by steps 1, 2, 4… and closes it by
binary search. A trial stops at its first disqualifying xrun: with --criterion overload (the
default) only xruns caused by the DSP's CPU time disqualify, the others are reported. A cycle
that is late only because the xrun before it left a backlog (a JACK server runs a late
client's next cycles back to back) carries that xrun's cause (counted in xruns.inherited).
The first 8 cycles of every trial on a real driver are its warm-up (config.warmup_cycles; 0 on
sim): a JACK client's first cycles run while its process is still starting around them, so
their xruns are recorded (trials[].warmup_disqualifying) but do not decide the trial.
The stress load runs once for the whole grid. With -o the file is rewritten atomically after
every cell, so an interrupted grid leaves a valid partial result that --resume continues.
A grid the JACK server's death or the watchdog stops ends the same way: the cells measured so
far, a status saying why, exit 3; --resume FILE continues it once a server runs again.
With --driver jack every trial is a client of the running server (jackd2, or PipeWire under
pw-jack): the rate and, without --buffers, the buffer size are the server's; --set-buffer
applies each size of --buffers to the server and restores its own size afterwards.

Examples:
  xrunlab load --buffers 64,128,256,512 --tracks 1,2 --duration 10s -o load.json
  xrunlab load --duration 10m --validate 2h -o paper.json        # Vignati et al.'s protocol
  xrunlab load --resume paper.json                               # continue after Ctrl-C
  xrunlab load --buffers 256 --tracks 1 --plugins 'burn(10%)' --duration 2s --stress none
  xrunlab load --buffers 256 --tracks 1,2 --plugins lv2:reverbDesigner-heavy,lv2:urn:dragonfly:room
  xrunlab load --driver sim --plugins reverb-heavy --cost reverb-heavy=40ns/frame --cost-overhead 20us
  xrunlab load --driver jack --plugins reverb-heavy --tracks 1 --duration 10s   # inside jackd
  pw-jack xrunlab load --driver jack --buffers 64,128,256 --set-buffer --tracks 1")]
pub struct LoadArgs {
    /// What paces the cycles: a timer-paced software codec, the deterministic simulator,
    /// or a JACK server (jackd2, or PipeWire under pw-jack).
    #[arg(long, value_parser = super::values::driver_parser(LOAD_DRIVERS), default_value = "virtual")]
    pub driver: DriverKind,
    /// Buffer sizes in frames, e.g. 64,128 or 16..512 (powers of two)
    /// [default: 16,32,64,128,256,512; jack: the server's, see --set-buffer].
    #[arg(long)]
    pub buffers: Option<String>,
    #[command(flatten)]
    pub jack: super::jack_args::JackArgs,
    /// Parallel track counts, e.g. 1,2 or 1..4 [default: 1..number of RT CPUs].
    #[arg(long)]
    pub tracks: Option<String>,
    /// CPUs of the engine threads, e.g. 2-3 (on a tuned machine: its audio CPUs)
    /// [default: every CPU this process may use].
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// Keep this CPU free of real-time work (Vignati et al.'s PREEMPT_RT setup).
    #[arg(long, value_name = "CPU")]
    pub reserve_cpu: Option<usize>,
    /// Plugin types, one chain element each: reverb-light,reverb-heavy,'burn(10%)', or an
    /// installed LV2 plugin: lv2:URI or lv2:NAME[(symbol=value,…)] (`plugins list --lv2`),
    /// e.g. lv2:reverbDesigner-heavy (scripts/build-reverb-designer builds the study's own),
    /// or a CLAP plugin: clap:ID or clap:NAME[(name=value,…)] (`plugins list --clap`).
    /// A crashing plugin takes xrunlab with it; `--resume` the grid from its -o file.
    #[arg(long, default_value = "reverb-light,reverb-heavy")]
    pub plugins: String,
    /// Sample rate in Hz [default: 48000; jack: the server's].
    #[arg(long, value_name = "HZ", value_parser = crate::units::parse_rate)]
    pub rate: Option<u32>,
    /// Periods of buffering n.
    #[arg(long, default_value_t = 2)]
    pub periods: u32,
    /// Length of each search trial (10m for the paper's protocol).
    #[arg(long, default_value = "10s", value_parser = crate::units::parse_duration_ns)]
    pub duration: u64,
    /// Rerun each maximum this long and lower it until it passes (the paper: 2h).
    #[arg(long, value_name = "DURATION", value_parser = crate::units::parse_duration_ns)]
    pub validate: Option<u64>,
    /// Which xruns disqualify a count.
    #[arg(long, value_enum, default_value = "overload")]
    pub criterion: CriterionArg,
    /// Track placement: steal (threads pinned one per CPU, each runs its home tracks first,
    /// then takes other threads' tracks not yet started, so a stalled core loses them),
    /// pinned (home tracks only), unpinned (no affinity, any thread takes any track).
    #[arg(long, value_enum, default_value = "steal")]
    pub pin: crate::engine::Placement,
    /// Never try more instances per track than this.
    #[arg(long, default_value_t = 1024)]
    pub max_instances: u32,
    /// Scheduling policy of the engine threads [default: fifo:80, other for sim].
    #[arg(long, value_name = "POLICY")]
    pub policy: Option<Policy>,
    /// Do not lock memory (mlockall) during the trials.
    #[arg(long)]
    pub no_mlock: bool,
    /// Continue the interrupted grid in this result (written back to it unless -o says
    /// otherwise) with the settings it was started with. Options given beside it must say
    /// what the file says (exit 2 names any that do not), except --buffers, --tracks and
    /// --plugins, which choose the grid: the cells it shares with the file are kept.
    #[arg(long, value_name = "RESULT.json")]
    pub resume: Option<PathBuf>,
    /// Seed for the input noise and the sim driver.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub sim: super::sim_args::SimArgs<super::sim_args::NoMore>,
    #[command(flatten)]
    pub stress: StressArgs,
    #[command(flatten)]
    pub forensics: super::forensics::ForensicsArgs,
    /// The options the command line gave (their clap ids), as opposed to clap's defaults:
    /// `--resume` takes every other setting from its file.
    #[arg(skip)]
    pub given: Vec<String>,
}

/// The options behind each setting of a [`LoadConfig`] (its serialised keys), to name them
/// when a resumed grid's settings differ from its file's.
const OPTIONS_OF_SETTING: &[(&str, &[&str])] = &[
    ("driver", &["driver"]),
    ("rate", &["rate"]),
    ("periods", &["periods"]),
    ("duration_ns", &["duration"]),
    ("validate_ns", &["validate"]),
    ("criterion", &["criterion"]),
    ("cpus", &["cpus", "reserve_cpu"]),
    ("reserve_cpu", &["reserve_cpu"]),
    ("policy", &["policy", "driver"]),
    ("mlock", &["no_mlock", "driver"]),
    ("max_instances", &["max_instances"]),
    ("seed", &["seed"]),
    ("sim", &["sim_latency", "inject", "driver"]),
    ("cost", &["cost", "cost_overhead", "driver"]),
    (
        "stress",
        &[
            "stress",
            "stress_cmd",
            "stress_workers",
            "stress_cpus",
            "stress_dir",
            "stress_size",
            "stress_backend",
        ],
    ),
    (
        "jack",
        &["server", "client_name", "connect", "set_buffer", "driver"],
    ),
    ("warmup_cycles", &["driver"]),
    ("pin", &["pin"]),
];

/// A clap id as the option it is on the command line.
fn option_name(id: &str) -> String {
    format!("--{}", id.replace('_', "-"))
}

impl LoadArgs {
    fn given(&self, id: &str) -> bool {
        self.given.iter().any(|g| g == id)
    }

    /// The grid these options ask for.
    pub fn to_config(&self) -> Result<LoadConfig> {
        self.build(None)
    }

    /// The grid a `--resume` continues: `base` (the file's configuration), with the options
    /// the command line gave applied over it. Whether they changed anything is for the
    /// caller to judge ([`loadtest::resume_conflicts`]).
    pub fn to_config_over(&self, base: &LoadConfig) -> Result<LoadConfig> {
        self.build(Some(base))
    }

    /// One construction for both: without a base every option counts (given or clap's
    /// default); with one, an option counts only when given, and a setting made of several
    /// options (the cost model, the sim's model, the JACK client, the CPUs) is made anew from
    /// them when any of them is given.
    fn build(&self, base: Option<&LoadConfig>) -> Result<LoadConfig> {
        let from_args = |ids: &[&str]| base.is_none() || ids.iter().any(|id| self.given(id));
        let driver = match base {
            Some(b) if !from_args(&["driver"]) => b.driver,
            _ => self.driver.accept("load", LOAD_DRIVERS)?,
        };
        let sim_flags = self.sim.given();
        if !driver.simulated() && sim_flags {
            return Err(Error::usage(
                "--sim-latency, --cost, --cost-overhead and --inject need --driver sim",
            ));
        }
        let mut c = match base {
            Some(b) if !from_args(&["cpus", "reserve_cpu"]) => LoadConfig {
                driver,
                ..b.clone()
            },
            _ => {
                let mut cpus = crate::rt::affinity::select_cpus(self.cpus.as_deref())?;
                if let Some(r) = self.reserve_cpu {
                    if !cpus.contains(&r) {
                        return Err(Error::usage(format!(
                            "--reserve-cpu {r}: not a CPU this process may use ({})",
                            crate::rt::affinity::format_cpu_list(&cpus)
                        )));
                    }
                    cpus.retain(|&c| c != r);
                    if cpus.is_empty() {
                        return Err(Error::usage(
                            "--reserve-cpu leaves no CPU for the real-time threads",
                        ));
                    }
                }
                let mut c = match base {
                    Some(b) => LoadConfig {
                        driver,
                        cpus,
                        ..b.clone()
                    },
                    None => LoadConfig::new(driver, cpus),
                };
                c.reserve_cpu = self.reserve_cpu;
                c
            }
        };
        if let Some(b) = &self.buffers {
            c.buffers = crate::units::parse_uint_list(
                "--buffers",
                b,
                true,
                crate::units::MAX_BUFFER_FRAMES,
            )?;
        }
        // With a base the grid's sizes stand as given: the server is checked against them.
        let buffers_given = self.buffers.is_some() || base.is_some();
        if from_args(&["server", "client_name", "connect", "set_buffer"]) {
            // The first size stands for "a size was given" (JackArgs refuses --set-buffer
            // without).
            c.jack = self.jack.to_config(
                driver == DriverKind::Jack,
                c.buffers.first().copied().filter(|_| buffers_given),
                self.rate,
            )?;
        }
        if let Some(t) = &self.tracks {
            c.tracks = crate::units::parse_uint_list(
                "--tracks",
                t,
                false,
                crate::common::cycle::MAX_TRACKS as u32,
            )?;
        }
        if from_args(&["plugins"]) {
            c.plugins = split_plugins(&self.plugins);
        }
        if let Some(r) = self.rate {
            c.rate = r;
        }
        if from_args(&["periods"]) {
            c.periods = self.periods;
        }
        if from_args(&["duration"]) {
            c.duration_ns = self.duration;
        }
        if let Some(v) = self.validate {
            c.validate_ns = Some(v);
        }
        if from_args(&["criterion"]) {
            c.criterion = match self.criterion {
                CriterionArg::Overload => Criterion::Overload,
                CriterionArg::All => Criterion::All,
            };
        }
        if from_args(&["max_instances"]) {
            c.max_instances = self.max_instances;
        }
        if from_args(&["pin"]) {
            c.pin = self.pin;
        }
        if let Some(p) = self.policy {
            c.policy = p;
        }
        if from_args(&["seed"]) {
            c.seed = self.seed;
        }
        c.mlock &= !self.no_mlock;
        if driver.simulated() {
            if from_args(&["sim_latency", "inject"]) {
                c.sim = SimConfig {
                    latency: LatencyModel::parse(&self.sim.sim_latency)?,
                    events: self.sim.inject.clone(),
                };
            }
            if from_args(&["cost", "cost_overhead"]) {
                let mut chain = Vec::new();
                for p in &c.plugins {
                    chain.extend(crate::dsp::parse_chain(p)?);
                }
                c.cost = CostModel::from_flags(&self.sim.cost, self.sim.cost_overhead, &chain)?;
            }
        }
        if driver == DriverKind::Jack {
            c.adopt_jack_server(buffers_given, self.rate.or(base.map(|b| b.rate)))?;
        }
        c.validate()?;
        Ok(c)
    }
}

/// Split on commas outside parentheses, so `burn(10%)` style parameters survive.
fn split_plugins(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let (mut depth, mut cur) = (0i32, String::new());
    for ch in s.chars() {
        match ch {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur).trim().to_string());
                continue;
            }
            _ => {}
        }
        cur.push(ch);
    }
    out.push(cur.trim().to_string());
    out.retain(|p| !p.is_empty());
    out
}

/// The stress options a grid runs under: as given, `paper` when none is (Vignati et al. ran
/// every cell under stress-ng; `--stress-backend auto` falls back to the built-in equivalent
/// where stress-ng is missing), or on `--resume` without any, the presets the file names.
fn stress_args(a: &LoadArgs, base: Option<&LoadConfig>) -> Result<StressArgs> {
    let mut s = a.stress.clone();
    let given = OPTIONS_OF_SETTING
        .iter()
        .find(|(k, _)| *k == "stress")
        .is_some_and(|(_, ids)| ids.iter().any(|id| a.given(id)));
    match base {
        Some(b) if !given => {
            // The file keeps a command's name only, not its arguments.
            if let Some(cmd) = b.stress.iter().find(|l| l.starts_with("cmd:")) {
                return Err(Error::usage(format!(
                    "--resume: the grid ran beside a --stress-cmd ({cmd}) whose arguments the file does not keep; give the same --stress-cmd beside --resume"
                )));
            }
            s.stress = Some(if b.stress.is_empty() {
                "none".into()
            } else {
                b.stress.join(",")
            });
        }
        _ if s.stress.is_none() && s.stress_cmd.is_empty() => s.stress = Some("paper".into()),
        _ => {}
    }
    Ok(s)
}

/// The configuration and the cells a `--resume FILE` continues; exit 2 when the file is not
/// a load result, or names the options given beside it that say otherwise than the file.
fn resume(a: &LoadArgs, path: &std::path::Path) -> Result<(LoadConfig, LoadResults, StressSpec)> {
    let doc = read_result(path)?;
    let (base, results) = match doc.body {
        Body::Load { config, results } => (config, results),
        other => {
            return Err(Error::usage(format!(
                "--resume {}: a '{}' result, not a load result",
                path.display(),
                other.kind()
            )))
        }
    };
    let mut cfg = a.to_config_over(&base)?;
    let spec = stress_args(a, Some(&base))?.to_spec()?;
    cfg.stress = spec.labels();
    let conflicts = loadtest::resume_conflicts(&cfg, &base);
    if conflicts.is_empty() {
        return Ok((cfg, results, spec));
    }
    let mut options: Vec<String> = Vec::new();
    for d in &conflicts {
        let ids = OPTIONS_OF_SETTING
            .iter()
            .find(|(k, _)| *k == d.key)
            .map_or(&[][..], |(_, ids)| *ids);
        options.extend(
            ids.iter()
                .filter(|id| a.given(id))
                .map(|id| option_name(id)),
        );
    }
    options.dedup();
    options.sort();
    options.dedup();
    let detail: Vec<String> = conflicts
        .iter()
        .map(|d| format!("{} (was {}, now {})", d.key, d.was, d.now))
        .collect();
    Err(Error::usage(format!(
        "--resume {}: {} differ{} from the settings the grid was started with: {}; drop {} to continue with the file's settings",
        path.display(),
        if options.is_empty() { "the options given".to_string() } else { options.join(", ") },
        if options.len() == 1 { "s" } else { "" },
        detail.join(", "),
        if options.len() == 1 { "it" } else { "them" },
    )))
}

pub fn run(a: LoadArgs, g: &Global) -> Result<u8> {
    let (cfg, prior, spec) = match &a.resume {
        Some(p) => {
            let (cfg, results, spec) = resume(&a, p)?;
            (cfg, Some(results), spec)
        }
        None => {
            let mut cfg = a.to_config()?;
            let spec = stress_args(&a, None)?.to_spec()?;
            cfg.stress = spec.labels();
            (cfg, None, spec)
        }
    };
    let out_path = g.output.clone().or_else(|| a.resume.clone());
    let total = (cfg.buffers.len() * cfg.tracks.len() * cfg.plugins.len()) as u64;
    let forensics = a.forensics.plan(
        &Global {
            output: out_path.clone(),
            ..g.clone()
        },
        None,
    );
    let mut session = output::session(g.quiet, total, spec.labels())
        .with_stress(spec)
        .with_forensics(forensics);
    let started = session.started().clone();
    let body = |results: &LoadResults| Body::Load {
        config: cfg.clone(),
        results: results.clone(),
    };
    let mut on_cell = |r: &LoadResults| -> Result<()> {
        match &out_path {
            // Standard output gets the grid once, at the end, not a document per cell.
            Some(p) if output::is_stdout(p) => Ok(()),
            // Until the grid ends the file says interrupted: that is what it is if we die.
            Some(p) => write_json_atomic(
                p,
                &ResultDoc::new(
                    body(r),
                    Status::Interrupted,
                    started.at.clone(),
                    started.env.clone(),
                ),
            ),
            None => Ok(()),
        }
    };
    let out = loadtest::run(
        &cfg,
        &mut session,
        loadtest::Checkpoints {
            prior: prior.as_ref(),
            on_cell: &mut on_cell,
        },
    )?;
    drop(session);
    let human = crate::report::text::load::summary(&cfg, &out.results);
    let done = format!(
        "{}/{} cells",
        out.results.cells.len(),
        out.results.cells_total
    );
    let resume = match &out_path {
        Some(p) => format!("continue with --resume {}", p.display()),
        None => "give -o FILE to keep the cells for --resume".into(),
    };
    let partial = match out.status {
        Status::ServerShutdown => format!(
            "xrunlab: error: the JACK server went away: load stopped after {done}; partial result reported; {resume} once a server runs\n"
        ),
        Status::Watchdog => format!(
            "xrunlab: error: watchdog: a trial's cycle did not end: load stopped after {done}; partial result reported; {resume}\n"
        ),
        _ => format!("xrunlab: load interrupted after {done}; {resume}\n"),
    };
    let m = Measured::new(body(&out.results), out.status, started, human)
        .warnings(out.warnings)
        .computed(cfg.driver.simulated())
        .partial(partial);
    let g = Global {
        output: out_path,
        ..g.clone()
    };
    output::finish(m, &g)
}
