//! `xrunlab stress` (hold a load, optionally with a competing periodic task) and the hidden
//! `xrunlab __stressor` that runs one built-in stressor in a child process.

use super::output::{self, Measured, Started};
use super::stress_args::StressArgs;
use super::Global;
use crate::error::Result;
use crate::results::Body;
use crate::stress::builtin::{self, StressorOpts};
use crate::stress::periodic::PeriodicSpec;
use crate::stress::run::{run_stress, StressConfig};
use crate::stress::Preset;
use crate::units::parse_duration_ns;
use clap::Args;
use std::path::PathBuf;

/// Run stress presets (and a competing periodic task) for a while and report what ran.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  xrunlab stress --stress paper --duration 60s\n  xrunlab stress --stress cpu,proc --stress-cpus 1 --duration 10s --compete voip\n  xrunlab stress --stress-cmd 'dd if=/dev/zero of=/dev/null bs=1M' --duration 5s --json"
)]
pub struct StressCmdArgs {
    #[command(flatten)]
    pub stress: StressArgs,
    /// How long to hold the load.
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub duration: String,
    /// Run a competing periodic task: video, voip or PERIOD/EXEC[:POLICY[:PRIO]]
    /// (e.g. 10ms/1.7ms:fifo:15, 40ms/5ms:deadline-reclaim).
    #[arg(long, value_name = "SPEC")]
    pub compete: Option<String>,
    /// Pin the competing task to these CPUs (a DEADLINE reservation cannot be pinned to
    /// fewer CPUs than its root domain).
    #[arg(long, value_name = "LIST", requires = "compete")]
    pub compete_cpus: Option<String>,
}

pub fn run(a: StressCmdArgs, g: &Global) -> Result<u8> {
    let spec = a.stress.to_spec()?;
    let duration_ns = parse_duration_ns(&a.duration)?;
    if duration_ns == 0 {
        return super::usage("--duration must be positive");
    }
    let mut compete = a
        .compete
        .as_deref()
        .map(str::parse::<PeriodicSpec>)
        .transpose()?;
    if let (Some(c), Some(list)) = (compete.as_mut(), a.compete_cpus.as_deref()) {
        c.cpus = crate::rt::affinity::select_cpus(Some(list))?;
    }
    if spec.is_idle() && compete.is_none() {
        return super::usage("nothing to run: give --stress, --stress-cmd or --compete");
    }
    let started = Started::now(spec.labels());
    let progress = crate::progress::for_terminal(g.quiet, 0);
    let (results, status) = run_stress(&spec, duration_ns, compete.as_ref(), progress.as_ref())?;
    let human = crate::report::text::stress::summary(&results);
    let body = Body::Stress {
        config: StressConfig {
            presets: spec.labels(),
            duration_ns,
            compete,
        },
        results: Box::new(results),
    };
    // Interrupted, the record covers what ran until then and exits 3 like every command's
    // partial result (docs/ARCHITECTURE.md §1): a script cannot mistake it for the duration.
    output::finish(Measured::new(body, status, started, human), g)
}

/// Internal: one built-in stressor (started by a stress session, not by users).
#[derive(Debug, Args)]
pub struct StressorArgs {
    /// cpu, io, vm, udp, netdev, cache, timer, disk-write, disk-copy, disk-read, proc, top.
    pub kind: String,
    #[arg(long)]
    pub dir: Option<PathBuf>,
    #[arg(long, default_value_t = crate::stress::spec::DEFAULT_FILE_SIZE)]
    pub size: u64,
}

pub fn run_stressor(a: StressorArgs) -> Result<u8> {
    let kind: Preset = a.kind.parse()?;
    let ran = builtin::run(
        &StressorOpts {
            kind,
            dir: a.dir,
            size: a.size,
        },
        &mut |line| println!("{line}"),
    )?;
    println!("{ran}");
    Ok(0)
}
