//! `xrunlab export`.

use super::export_args::format_named;
use super::{output, Global};
use crate::error::{Error, Result};
use crate::report::export::{self, openmetrics, Export};
use crate::report::{self, Input};
use clap::Args;
use std::path::PathBuf;

/// Write results in a format other tools read: Prometheus metrics, LAVA result lines,
/// KCIDB JSON, JUnit, HTML, JSON or text.
#[derive(Debug, Args)]
#[command(after_help = "\
RESULT may be result files or a directory (a suite's: the files its manifest lists, and the
manifest itself for the formats that show stages; else every *.json in it). Without -o the
output goes to standard output.

Formats:
  openmetrics  Prometheus text exposition (promtool check metrics; node exporter textfile)
  lava         LAVA result lines: <case> <pass|fail|skip> [<measurement> <units>]
  kcidb        KCIDB I/O JSON (tests with path, status and number), for kcidb-submit
  junit        JUnit XML of a suite (needs its directory)
  json, html, text

Examples:
  xrunlab export --format openmetrics xrunlab-suite
  xrunlab export --textfile /var/lib/prometheus/node-exporter xrunlab-suite
  xrunlab export --format lava xrunlab-suite -o result.txt
  xrunlab export --format kcidb --origin mylab run.json latency.json -o kcidb.json")]
pub struct ExportArgs {
    /// Result files or a directory of them.
    #[arg(required = true, value_name = "RESULT.json|DIR")]
    pub paths: Vec<PathBuf>,
    /// The format (openmetrics, lava, kcidb, junit, json, html, text).
    #[arg(
        long,
        short = 'f',
        value_name = "FORMAT",
        required_unless_present = "textfile"
    )]
    pub format: Option<String>,
    /// Write the metrics as DIR/xrunlab.prom for a node exporter's textfile collector
    /// (openmetrics; written under a temporary name and renamed into place).
    #[arg(long, value_name = "DIR")]
    pub textfile: Option<PathBuf>,
    /// kcidb: the origin (the submitting lab's name) in every id.
    #[arg(long, default_value = "xrunlab", value_name = "NAME")]
    pub origin: String,
}

pub fn run(a: ExportArgs, g: &Global) -> Result<u8> {
    let format = match (&a.format, &a.textfile) {
        (Some(f), Some(_)) if f != "openmetrics" => {
            return super::usage(format!("--textfile writes openmetrics, not {f}"))
        }
        (Some(f), _) => format_named(f)?,
        (None, _) => &openmetrics::OpenMetrics,
    };
    if let Some(d) = &a.textfile {
        if g.output.is_some() {
            return super::usage(
                "--textfile DIR names the file already (DIR/xrunlab.prom); drop -o",
            );
        }
        if !d.is_dir() {
            return Err(Error::usage(format!(
                "--textfile {}: not a directory",
                d.display()
            )));
        }
        let file = d.join(openmetrics::TEXTFILE);
        crate::results::check_target_derived(&file)?;
        output::preflight(&[("--textfile", file.as_path())], &[])?;
    }
    let mut inputs: Vec<Input> = Vec::new();
    let mut manifest = None;
    for p in &a.paths {
        let found = report::results_in(p)?;
        if let Some(n) = &found.note {
            output::warn([n]);
        }
        if p.is_dir() {
            let m = p.join(crate::results::suite::MANIFEST);
            if m.is_file() && manifest.is_none() {
                manifest = Some(crate::suite::Manifest::read_file(&m)?);
            }
        }
        for f in &found.files {
            inputs.push(report::load(f)?);
        }
    }
    let input = Export {
        results: &inputs,
        manifest: manifest.as_ref(),
    };
    let bytes = if format.name() == "kcidb" {
        export::kcidb::render(&input, &a.origin)?
    } else {
        export::render(format, &input)?
    };
    match (&a.textfile, &g.output) {
        (Some(d), _) => {
            let text = String::from_utf8(bytes).expect("metrics are UTF-8");
            let file = openmetrics::write_textfile(d, &text)?;
            if !g.quiet {
                output::stderr(&format!(
                    "metrics of {} result(s) written to {}\n",
                    inputs.len(),
                    file.display()
                ));
            }
        }
        (None, Some(o)) => {
            crate::results::write_atomic(o, &bytes)?;
            if !g.quiet {
                output::stderr(&format!(
                    "{} of {} result(s) written to {}\n",
                    format.name(),
                    inputs.len(),
                    output::shown(o)
                ));
            }
        }
        (None, None) => output::stdout(&String::from_utf8_lossy(&bytes)),
    }
    Ok(0)
}
