//! `xrunlab latencytest`: Senoner's loop, idle and under each stress class.

use super::output::{self, Measured};
use super::Global;
use crate::error::Result;
use crate::measure::latencytest::{self, LatencytestConfig, DEFAULT_CLASSES};
use crate::results::Body;
use crate::rt::Policy;
use crate::units::{parse_duration_ns, parse_percent};
use clap::Args;
use std::path::PathBuf;

/// Senoner's benchmark: burn, blocking write, measure; idle and under stress classes.
#[derive(Debug, Args)]
#[command(after_help = "\
A SCHED_FIFO loop takes t1, burns --burn of one fragment, takes t2, writes the fragment to a
device that blocks until one of --fragments slots is free (as an OSS/ALSA write does), and
takes t3. t3 − t1 longer than the buffer is an overrun (an audible dropout); t2 − t1 should
stay at the nominal burn. The idle phase runs first, then one phase per stress class. The
graphics class runs only when an X11 display is reachable; otherwise it is listed as skipped.
It takes no --driver: the loop is its own push-model device (it writes and blocks, as
Senoner's program did), not the engine, so it cannot run inside JACK; `run` and `load` can
(--driver jack).

Examples:
  xrunlab latencytest                                   # 44.1 kHz, 3 × 64 frames, 80 %, 10 s phases
  xrunlab latencytest --classes proc,disk-write --phase-duration 30s -o lt.json
  xrunlab latencytest --fragments 3 --fragment-frames 128 --burn 60% --classes cpu
  xrunlab latencytest --classes none --phase-duration 1m   # idle only")]
pub struct LatencytestArgs {
    /// Sample rate in Hz.
    #[arg(long, default_value_t = 44_100, value_name = "HZ", value_parser = crate::units::parse_rate)]
    pub rate: u32,
    /// Frames per fragment.
    #[arg(long, default_value_t = 64)]
    pub fragment_frames: u32,
    /// Fragments the device buffers.
    #[arg(long, default_value_t = 3)]
    pub fragments: u32,
    /// Work per cycle as a share of one fragment, e.g. 80%.
    #[arg(long, default_value = "80%", value_name = "PERCENT")]
    pub burn: String,
    /// Length of each phase.
    #[arg(long, default_value = "10s", value_name = "DURATION")]
    pub phase_duration: String,
    /// Stress classes after the idle phase, in order: graphics or any --stress preset; none
    /// for the idle phase only.
    #[arg(long, default_value = DEFAULT_CLASSES, value_name = "LIST")]
    pub classes: String,
    /// Scheduling policy of the loop.
    #[arg(long, default_value = "fifo:90", value_name = "POLICY")]
    pub policy: Policy,
    /// Pin the loop to this CPU.
    #[arg(long, value_name = "CPU", conflicts_with = "cpus")]
    pub cpu: Option<usize>,
    /// CPUs of the loop thread (--cpu for one), e.g. 3 or 2-3 (on a tuned machine: its audio CPUs).
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// Do not lock memory (mlockall).
    #[arg(long)]
    pub no_mlock: bool,
    /// Directory for the disk classes' files (a private subdirectory is created and removed).
    #[arg(long, value_name = "DIR")]
    pub stress_dir: Option<PathBuf>,
    /// Size of the disk classes' file [default: 256M].
    #[arg(long, value_name = "SIZE")]
    pub stress_size: Option<String>,
    /// Pin the stressors to these CPUs.
    #[arg(long, value_name = "LIST")]
    pub stress_cpus: Option<String>,
    #[command(flatten)]
    pub forensics: super::forensics::ForensicsArgs,
}

pub fn config(a: &LatencytestArgs) -> Result<LatencytestConfig> {
    // An empty value is a mistake (an unset variable), not a way to say "idle only".
    if a.classes.split(',').all(|c| c.trim().is_empty()) {
        return Err(crate::error::Error::usage(format!(
            "--classes '{}' names no class: give classes, or none for the idle phase only",
            a.classes
        )));
    }
    let classes: Vec<String> = a
        .classes
        .split(',')
        .map(|c| c.trim().to_ascii_lowercase())
        .filter(|c| !c.is_empty() && c != "none")
        .collect();
    if let Some(cpu) = a.cpu {
        crate::rt::affinity::select_cpus(Some(&cpu.to_string()))?;
    }
    let c = LatencytestConfig {
        rate: a.rate,
        fragment_frames: a.fragment_frames,
        fragments: a.fragments,
        burn_pct: parse_percent(&a.burn)?,
        phase_duration_ns: parse_duration_ns(&a.phase_duration)?,
        classes,
        policy: a.policy,
        cpu: a.cpu,
        mlock: !a.no_mlock,
        cpus: super::select_cpus_opt(a.cpus.as_deref())?,
    };
    c.validate()?;
    Ok(c)
}

pub fn run(a: LatencytestArgs, g: &Global) -> Result<u8> {
    let cfg = config(&a)?;
    let stress = super::stress_args::StressArgs {
        stress_dir: a.stress_dir.clone(),
        stress_size: a.stress_size.clone(),
        stress_cpus: a.stress_cpus.clone(),
        ..Default::default()
    }
    .to_spec()?;
    let mut session = output::session(g.quiet, 0, cfg.classes.clone())
        .with_stress(stress)
        .with_forensics(a.forensics.plan(g, None));
    let out = latencytest::run(&cfg, &mut session)?;
    let started = session.into_started();
    let (r, warnings, status) = (out.results, out.warnings, out.status);
    let human = crate::report::text::latencytest::summary(&r);
    let body = Body::Latencytest {
        config: cfg,
        results: Box::new(r),
    };
    output::finish(
        Measured::new(body, status, started, human)
            .warnings(warnings)
            .partial("xrunlab: interrupted; the partial result was written\n"),
        g,
    )
}
