//! Command-line front end: one file per subcommand, parsing and printing only
//! (docs/ARCHITECTURE.md §2). Measurement logic lives in the library modules.

mod alsa_args;
mod audit;
mod check;
mod compare;
mod event;
mod export;
pub mod export_args;
mod forensics;
mod generate;
mod import;
mod jack_args;
mod latency;
mod latencytest;
mod load;
pub mod output;
mod plugins;
mod predict;
mod report;
mod rtl;
mod run;
mod sched;
mod schema;
mod sim_args;
mod stress;
mod stress_args;
mod suite;
mod tune;
mod values;
mod verdict;
mod watch;

use crate::error::Error;
use clap::{Args, Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Options every subcommand accepts.
#[derive(Debug, Clone, Args)]
pub struct Global {
    /// Write the JSON result to FILE (atomically; `-` for standard output, the summary then on
    /// stderr). Some commands write a directory or a page instead: their --help says which.
    #[arg(short = 'o', long = "output", global = true, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Print the JSON result to standard output (the human summary goes to stderr).
    #[arg(long, global = true)]
    pub json: bool,
    /// Print no human summary and no progress.
    #[arg(short, long, global = true)]
    pub quiet: bool,
}

#[derive(Debug, Parser)]
#[command(
    name = "xrunlab",
    version,
    about = "Measured evidence of whether a Linux machine can run real-time audio, at which buffer size, and why it glitches",
    after_help = "Exit codes: 0 ok, 1 a --fail-* threshold was crossed, 2 bad usage or input, 3 could not measure.\n\nExamples:\n  xrunlab check\n  xrunlab latency --duration 30s --audio-period 64@48000\n  xrunlab import cyclictest.txt -o ct.json\n  xrunlab check --json | python3 -m json.tool"
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

// Parsed once per process: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    Check(check::CheckArgs),
    Latency(latency::LatencyArgs),
    Load(load::LoadArgs),
    Import(import::ImportArgs),
    Run(run::RunArgs),
    Rtl(rtl::RtlArgs),
    Plugins(plugins::PluginsArgs),
    Report(report::ReportArgs),
    Compare(compare::CompareArgs),
    Schema(schema::SchemaArgs),
    Sched(sched::SchedArgs),
    Stress(stress::StressCmdArgs),
    Latencytest(latencytest::LatencytestArgs),
    Suite(suite::SuiteArgs),
    Event(event::EventArgs),
    Predict(predict::PredictArgs),
    Verdict(verdict::VerdictArgs),
    Tune(tune::TuneArgs),
    Watch(watch::WatchArgs),
    Export(export::ExportArgs),
    #[command(name = "__stressor", hide = true)]
    Stressor(stress::StressorArgs),
    #[command(name = "__generate", hide = true)]
    Generate(generate::GenerateArgs),
}

/// What `-o` writes, for the commands whose output is not a JSON result.
const OUTPUT_HELP: &[(&str, &str)] = &[
    ("suite", "Write every result into DIR (created): one JSON file per stage, manifest.json and report.html"),
    ("report", "Write the HTML report to FILE (without -o: a terminal summary)"),
    ("compare", "Also write the comparison as an HTML page to FILE"),
    ("export", "Write the exported document to FILE (without -o: standard output)"),
    ("schema", "Write the JSON Schema to FILE"),
];

/// The command line's definition, with `-o`'s help said per command: one global option
/// writes a JSON file, a directory or a page depending on the command, and a single help
/// line would be wrong for most of them.
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    let global = cmd
        .get_arguments()
        .find(|a| a.get_id() == "output")
        .cloned()
        .expect("Global has -o");
    // A subcommand that has its own `output` before the tree is built keeps it (clap then
    // skips propagating the global one), and its value still reaches Global, by id.
    for (name, help) in OUTPUT_HELP {
        let value = if *name == "suite" { "DIR" } else { "FILE" };
        let own = global.clone().help(*help).value_name(value);
        cmd = cmd.mut_subcommand(*name, |sc| sc.arg(own));
    }
    cmd
}

/// (option, path) pairs: the files a command writes, then the files it reads.
type Files<'a> = Vec<(&'static str, &'a Path)>;

/// A `--cpus LIST` option resolved against this process's CPUs; absent: none (unpinned).
fn select_cpus_opt(spec: Option<&str>) -> crate::Result<Vec<usize>> {
    spec.map_or(Ok(Vec::new()), |s| {
        crate::rt::affinity::select_cpus(Some(s))
    })
}

impl Command {
    /// The commands whose real-time threads belong on a tuned machine's audio CPUs.
    fn measures_audio(&self) -> bool {
        matches!(
            self,
            Command::Latency(_)
                | Command::Run(_)
                | Command::Load(_)
                | Command::Rtl(_)
                | Command::Sched(_)
                | Command::Latencytest(_)
                | Command::Event(_)
        )
    }

    /// Every file this command writes and every file it reads whose loss would matter, for
    /// [`output::preflight`]. A new file option belongs here.
    fn files<'a>(&'a self, g: &'a Global) -> (Files<'a>, Files<'a>) {
        let mut outputs: Files = Vec::new();
        let mut inputs: Files = Vec::new();
        match self {
            // The suite's -o names a directory it creates; the stressor writes nothing.
            Command::Suite(_) | Command::Stressor(_) | Command::Generate(_) => {
                return (outputs, inputs)
            }
            Command::Latency(a) => {
                outputs.extend(a.histogram.as_deref().map(|p| ("--histogram", p)));
                outputs.extend(a.forensics.csv_arg());
            }
            Command::Run(a) => {
                outputs.extend(a.trace.as_deref().map(|p| ("--trace", p)));
                outputs.extend(a.forensics.csv_arg());
            }
            Command::Sched(a) => {
                outputs.extend(a.trace.as_deref().map(|p| ("--trace", p)));
                outputs.extend(a.forensics.csv_arg());
            }
            Command::Load(a) => outputs.extend(a.forensics.csv_arg()),
            Command::Latencytest(a) => outputs.extend(a.forensics.csv_arg()),
            Command::Event(a) => outputs.extend(a.forensics.csv_arg()),
            Command::Report(a) => {
                inputs.extend(
                    a.files
                        .iter()
                        .filter(|p| !p.is_dir())
                        .map(|p| ("RESULT.json", p.as_path())),
                );
                inputs.extend(a.manifest.as_deref().map(|p| ("--manifest", p)));
            }
            Command::Export(a) => inputs.extend(
                a.paths
                    .iter()
                    .filter(|p| !p.is_dir())
                    .map(|p| ("RESULT.json", p.as_path())),
            ),
            Command::Compare(a) => {
                inputs.extend(a.files.iter().map(|p| ("RESULT.json", p.as_path())))
            }
            Command::Import(a) => inputs.push(("FILE", a.file.as_path())),
            Command::Predict(a) => {
                inputs.extend(a.latency.iter().map(|s| ("--latency", s.path.as_path())));
                inputs.extend(a.cost.as_deref().map(|p| ("--cost", p)));
            }
            Command::Verdict(a) => {
                inputs.extend(
                    a.paths
                        .iter()
                        .filter(|p| !p.is_dir())
                        .map(|p| ("RESULT.json", p.as_path())),
                );
                inputs.extend(a.cost.as_deref().map(|p| ("--cost", p)));
            }
            // `load --resume FILE` writes the grid back to FILE by design.
            _ => {}
        }
        outputs.extend(g.output.as_deref().map(|p| ("-o", p)));
        (outputs, inputs)
    }
}

/// Parse the process arguments, run the command and map the outcome to an exit code.
pub fn main() -> ExitCode {
    crate::rt::interrupt::install();
    crate::rt::crash::install();
    use clap::FromArgMatches;
    let parsed = command()
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m).map(|c| (c, m)));
    let cli = match parsed {
        Ok((mut cli, m)) => {
            if let (Command::Load(a), Some(sub)) = (&mut cli.command, m.subcommand_matches("load"))
            {
                a.given = given_ids(sub);
            }
            cli
        }
        Err(e) => {
            // clap exits 2 for usage errors and 0 for --help/--version.
            let _ = e.print();
            return ExitCode::from(e.exit_code() as u8);
        }
    };
    if nix::unistd::geteuid().is_root() {
        if let Some(said) = crate::trace::tracefs::clean_stale_default() {
            output::warn([&said]);
        }
    }
    // A limit the plugin children would not get is said once, now, not per plugin.
    if let Err(e) = crate::dsp::contain::memory_limit() {
        output::stderr(&format!("xrunlab: error: {e}\n"));
        return ExitCode::from(e.exit_code());
    }
    if cli.global.output.as_deref().is_some_and(output::is_stdout) {
        let refused = match cli.command {
            Command::Suite(_) => {
                Some("suite -o names the directory it fills; standard output (-) cannot be one")
            }
            _ if cli.global.json => {
                Some("-o - and --json both print the result on standard output: give one")
            }
            _ => None,
        };
        if let Some(why) = refused {
            output::stderr(&format!("xrunlab: error: {why}\n"));
            return ExitCode::from(crate::error::EXIT_USAGE);
        }
        output::result_to_stdout();
    }
    // Before anything is measured (or read): a wrong output path is a usage error now, not
    // after an hour of measuring.
    let (outputs, inputs) = cli.command.files(&cli.global);
    if let Err(e) = output::preflight(&outputs, &inputs) {
        output::stderr(&format!("xrunlab: error: {e}\n"));
        return ExitCode::from(e.exit_code());
    }
    output::init_colour();
    if cli.command.measures_audio() {
        output::join_tuned_cpuset(&cli.global);
    }
    let outcome = match cli.command {
        Command::Check(a) => check::run(a, &cli.global),
        Command::Latency(a) => latency::run(a, &cli.global),
        Command::Load(a) => load::run(a, &cli.global),
        Command::Import(a) => import::run(a, &cli.global),
        Command::Run(a) => run::run(a, &cli.global),
        Command::Rtl(a) => rtl::run(a, &cli.global),
        Command::Plugins(a) => plugins::run(a, &cli.global),
        Command::Report(a) => report::run(a, &cli.global),
        Command::Compare(a) => compare::run(a, &cli.global),
        Command::Schema(a) => schema::run(a, &cli.global),
        Command::Sched(a) => sched::run(a, &cli.global),
        Command::Stress(a) => stress::run(a, &cli.global),
        Command::Latencytest(a) => latencytest::run(a, &cli.global),
        Command::Suite(a) => suite::run(a, &cli.global),
        Command::Event(a) => event::run(a, &cli.global),
        Command::Predict(a) => predict::run(a, &cli.global),
        Command::Verdict(a) => verdict::run(a, &cli.global),
        Command::Tune(a) => tune::run(a, &cli.global),
        Command::Watch(a) => watch::run(a, &cli.global),
        Command::Export(a) => export::run(a, &cli.global),
        Command::Stressor(a) => stress::run_stressor(a),
        Command::Generate(a) => generate::run(a),
    };
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            output::stderr(&format!("xrunlab: error: {e}\n"));
            ExitCode::from(e.exit_code())
        }
    }
}

/// The ids of the options the command line gave itself, not through clap's defaults.
fn given_ids(m: &clap::ArgMatches) -> Vec<String> {
    m.ids()
        .filter(|id| m.value_source(id.as_str()) == Some(clap::parser::ValueSource::CommandLine))
        .map(|id| id.to_string())
        .collect()
}

/// Helper for commands: turn clap-level combinations we cannot express in attributes
/// into usage errors.
pub(crate) fn usage<T>(msg: impl Into<String>) -> Result<T, Error> {
    Err(Error::usage(msg))
}
