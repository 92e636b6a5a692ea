//! `xrunlab suite`.

use super::{output, Global};
use crate::driver::DriverKind;
use crate::error::{Error, Result};
use crate::suite::{self, Manifest, Mode, SuiteConfig};
use clap::Args;
use std::path::PathBuf;

/// The drivers the suite's stages take.
const SUITE_DRIVERS: &[DriverKind] = &[DriverKind::Virtual, DriverKind::Jack];

/// The whole protocol in one command: check, latency idle and under stress, the DSP load grid,
/// latencytest, round-trip latency, scheduling policies, event latency, then one HTML report.
#[derive(Debug, Args)]
#[command(
    after_help = "-o DIR (default ./xrunlab-suite) receives everything. Each stage runs this binary as `xrunlab CMD … -o DIR/NN-stage.json` (the exact argv is in \
DIR/manifest.json, its output in DIR/NN-stage.log), so every result is what the command gives by hand. \
Stages whose prerequisites are missing (no JACK server, not root, a command this build lacks) are listed \
as skipped with the reason. A failed stage does not stop the suite; the exit code is then 1. Ctrl-C stops \
the running stage as it would by hand, writes the manifest and exits 3. An error of the suite's own (a file \
it cannot write: a full disk) stops it with the manifest's status failed and the reason, exit 3; a manifest \
that cannot be rewritten either is said on stderr.\n\n\
Examples:\n  xrunlab suite --quick                      # at most 5 minutes → ./xrunlab-suite/report.html\n  \
xrunlab suite --quick --budget 20m         # measure longer until 128…512 frames are decided\n  \
sudo xrunlab suite --quick -o results       # as root the sched stage runs too\n  \
xrunlab suite --full -o full                # the studies' durations: days (the load grid alone)\n  \
xrunlab suite --resume full                 # after Ctrl-C: keeps the stages already complete\n  \
xrunlab suite --driver jack                 # load and event on a running JACK server\n  \
sudo xrunlab suite --tuned --quick -o tq    # latency and load before and after `tune`, restored\n  \
xrunlab suite --junit junit.xml -o results  # CI: stages and verdict criteria as JUnit test cases\n  \
xrunlab suite --export lava=result.txt --export openmetrics=/var/lib/prometheus/node-exporter\n                                             # LAVA result lines, node exporter textfile"
)]
pub struct SuiteArgs {
    /// Short durations and a tiny load grid (the default): a few minutes.
    #[arg(long, conflicts_with_all = ["full", "smoke"])]
    pub quick: bool,
    /// the studies' durations (10 min load trials validated for 2 h, 5 h of latency…): days.
    #[arg(long, conflicts_with = "smoke")]
    pub full: bool,
    /// Seconds per stage: every stage once (for the test suite).
    #[arg(long, hide = true)]
    pub smoke: bool,
    /// Driver of the stages that take one (load, event); rtl runs on the virtual loop and,
    /// when a JACK server answers, on JACK too.
    #[arg(long, value_parser = super::values::driver_parser(SUITE_DRIVERS), default_value = "virtual")]
    pub driver: DriverKind,
    /// Continue the suite in DIR: stages whose result there is complete are kept.
    #[arg(long, value_name = "DIR")]
    pub resume: Option<PathBuf>,
    /// Run the latency (idle, stressed) and load stages on the audio CPUs, apply the tuning
    /// profile (root; journalled as `tune --apply`), run them again (`STAGE-tuned`), restore
    /// everything, and show before and after side by side in the report.
    #[arg(long, conflicts_with = "resume")]
    pub tuned: bool,
    /// With --tuned: the profile (audio, measure).
    #[arg(long, value_enum, default_value = "audio", requires = "tuned")]
    pub profile: crate::system::tune::Profile,
    /// With --tuned: the CPUs set aside for audio [default: isolcpus, else the last CPU].
    #[arg(long, value_name = "AUDIO_CPUS", requires = "tuned")]
    pub cpus: Option<String>,
    /// Also write JUnit XML to FILE: a test case per stage and per verdict criterion, for
    /// GitLab, Jenkins and GitHub Actions.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Wall time the suite may take (30s, 5m, 1h): after the protocol it measures latency
    /// under stress longer, in stretches, until the buffer sizes around the knee are decided
    /// or the budget is spent; 0 measures no more [default: 5m with --quick, 0 otherwise].
    #[arg(long, value_name = "DURATION")]
    pub budget: Option<String>,
    /// Do not trace: by default the stages that measure run with --forensics when tracefs is
    /// usable (root, no lockdown), and the suite says in one line why not otherwise.
    #[arg(long)]
    pub no_forensics: bool,
    #[command(flatten)]
    pub export: super::export_args::ExportArgs,
}

pub fn run(a: SuiteArgs, g: &Global) -> Result<u8> {
    let asked = if a.full {
        Some(Mode::Full)
    } else if a.smoke {
        Some(Mode::Smoke)
    } else if a.quick {
        Some(Mode::Quick)
    } else {
        None
    };
    let dir = match (&a.resume, &g.output) {
        (Some(r), Some(o)) if r != o => {
            return super::usage("--resume DIR already names the directory; drop -o")
        }
        (Some(r), _) => r.clone(),
        (None, Some(o)) => o.clone(),
        (None, None) => PathBuf::from("xrunlab-suite"),
    };
    let mut mode = asked.unwrap_or(Mode::Quick);
    let mut driver = a.driver.accept("suite", SUITE_DRIVERS)?.name().to_string();
    if a.resume.is_some() {
        if !dir.is_dir() {
            return Err(Error::input(&dir, "no such directory to resume"));
        }
        if dir.join(suite::MANIFEST).exists() {
            let prior = Manifest::read(&dir)?;
            match asked {
                Some(m) if m != prior.mode => {
                    return super::usage(
                        format!(
                            "{} was run in {:?} mode; resume it in the same mode",
                            dir.display(),
                            prior.mode
                        )
                        .to_lowercase(),
                    )
                }
                _ => mode = prior.mode,
            }
            driver = prior.driver;
        }
    }
    if let Some(j) = &a.junit {
        // A wrong path is a usage error now, not after the suite.
        output::preflight(&[("--junit", j.as_path())], &[])?;
    }
    a.export.preflight(&[])?;
    let tuning = if a.tuned {
        if !nix::unistd::geteuid().is_root() {
            return Err(Error::no_privilege(
                "suite --tuned changes /proc and /sys settings: run it as root",
            ));
        }
        let cpus = a
            .cpus
            .as_deref()
            .map(crate::rt::affinity::parse_cpu_list)
            .transpose()?;
        if cpus.as_ref().is_some_and(|c| c.is_empty()) {
            return super::usage("--cpus selects no CPU");
        }
        Some(suite::TuneSpec {
            profile: a.profile,
            cpus,
        })
    } else {
        None
    };
    let budget = match &a.budget {
        // The help's "0 measures no more": a zero needs no unit.
        Some(b) if b.trim().parse::<f64>() == Ok(0.0) => Some(std::time::Duration::ZERO),
        Some(b) => Some(std::time::Duration::from_nanos(
            crate::units::parse_duration_ns(b)?,
        )),
        None if mode == Mode::Quick => Some(std::time::Duration::from_secs(300)),
        None => None,
    }
    .filter(|b| !b.is_zero());
    let exe = std::env::current_exe()
        .map_err(|e| Error::cannot_measure(format!("cannot find this binary: {e}")))?;
    let quiet = g.quiet;
    let cfg = SuiteConfig {
        dir: dir.clone(),
        mode,
        driver,
        resume: a.resume.is_some(),
        exe,
        say: Box::new(move |s: &str| {
            use std::io::Write as _;
            if !quiet {
                // A terminal that hung up (SIGHUP) must not end the suite before its manifest.
                let _ = writeln!(std::io::stderr(), "{s}");
            }
        }),
        tuning,
        forensics: !a.no_forensics,
        budget,
    };
    if !quiet {
        // The machine's conditions, said once for the whole suite (each stage records them
        // in its result; their lines go to the stage logs). No RT privilege is the
        // pre-flight's to say, with its remedies.
        let env = crate::system::Environment::capture();
        output::warn(
            env.warnings()
                .iter()
                .filter(|w| !w.starts_with("no RT privilege")),
        );
    }
    let m = suite::run(&cfg)?;
    if let Some(j) = &a.junit {
        let xml = suite::junit(&m, &dir);
        crate::results::write_atomic(j, xml.as_bytes())?;
    }
    if !a.export.targets.is_empty() {
        export_results(&a.export, &m, &dir)?;
    }
    if g.json {
        output::human(&format!(
            "{}\n",
            serde_json::to_string_pretty(&m).expect("manifest serialises")
        ));
    } else if !g.quiet {
        // The answer first, the stages after it.
        match suite::verdict_text(&m, &dir) {
            Some(v) => output::human(&format!("{v}\n{}", suite::summary(&m, &dir))),
            None => output::human(&suite::summary(&m, &dir)),
        }
    }
    Ok(m.exit_code())
}

/// `--export FORMAT=PATH`: the suite's results (the files its manifest lists) and its stages.
fn export_results(
    e: &super::export_args::ExportArgs,
    m: &Manifest,
    dir: &std::path::Path,
) -> Result<()> {
    let mut inputs = Vec::new();
    // A suite whose every stage was skipped has no result: its stages are still exported.
    if let Ok(found) = crate::report::results_in(dir) {
        for f in &found.files {
            inputs.push(crate::report::load(f)?);
        }
    }
    let input = crate::report::export::Export {
        results: &inputs,
        manifest: Some(m),
    };
    e.write(&input)?;
    Ok(())
}
