//! `xrunlab report`.

use super::{output, Global};
use crate::error::Result;
use crate::report::{self, table, Input, Loaded};
use crate::results::Body;
use clap::Args;
use std::path::PathBuf;

/// Present results: a self-contained HTML report with plots (-o FILE.html), or a terminal summary.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  xrunlab report lat.json run.json -o report.html\n  xrunlab report check.json          # terminal summary\n  xrunlab report --manifest out/manifest.json out/0*.json -o out/report.html   # a suite's results\n\nThe HTML file has inline CSS and SVG only: no scripts, nothing fetched."
)]
pub struct ReportArgs {
    /// Result files written by xrunlab (any kind).
    #[arg(required = true, value_name = "RESULT.json")]
    pub files: Vec<PathBuf>,
    /// A suite's manifest.json: its stage table (what ran, what was skipped and why) heads the report.
    #[arg(long, value_name = "MANIFEST.json")]
    pub manifest: Option<PathBuf>,
}

pub fn run(a: ReportArgs, g: &Global) -> Result<u8> {
    let inputs = a
        .files
        .iter()
        .map(|p| report::load(p))
        .collect::<Result<Vec<_>>>()?;
    let manifest = match &a.manifest {
        Some(p) => Some(crate::suite::Manifest::read_file(p)?),
        None => None,
    };
    match &g.output {
        Some(path) => {
            let html = report::html::report_with(&inputs, manifest.as_ref());
            crate::results::write_atomic(path, html.as_bytes())?;
            if !g.quiet {
                output::stdout(&format!(
                    "report of {} result(s) written to {}\n",
                    inputs.len(),
                    path.display()
                ));
            }
        }
        None => {
            if !g.quiet {
                for i in &inputs {
                    output::stdout(&summary(i));
                }
            }
        }
    }
    Ok(0)
}

fn summary(i: &Input) -> String {
    let mut s = format!(
        "== {} ({}, {}) ==\n",
        i.path.display(),
        i.kind(),
        i.status()
    );
    if let Some(env) = i.environment() {
        s.push_str(&format!("{}\n", table::system_line(env)));
    }
    for w in i.warnings() {
        s.push_str(&format!("warning: {w}\n"));
    }
    match &i.item {
        Loaded::Doc(doc) => match &doc.body {
            Body::Check { results, .. } => s.push_str(&table::checks(results)),
            Body::Latency { config, results } => s.push_str(&table::latency(config, results)),
            Body::Run { config, results } => {
                s.push_str(&table::run_summary(&crate::engine::RunResult {
                    status: doc.status,
                    config: config.clone(),
                    results: results.clone(),
                    warnings: doc.warnings.clone(),
                    early_stop_cycle: None,
                }))
            }
            Body::Bench { config, results } => {
                s.push_str(&table::bench(results, config.rate, config.buffer_frames))
            }
            Body::Stress { results, .. } => s.push_str(&table::stress(results)),
            Body::Load { config, results } => s.push_str(&table::load_summary(config, results)),
            Body::Latencytest { results, .. } => s.push_str(&super::latencytest::summary(results)),
            Body::Sched { results, .. } => s.push_str(&table::sched_summary(results)),
            Body::Rtl { config, results } => {
                s.push_str(&super::rtl::summary(&crate::measure::rtl::RtlRunResult {
                    status: doc.status,
                    config: config.clone(),
                    results: (**results).clone(),
                    warnings: doc.warnings.clone(),
                }))
            }
            Body::Predict { config, results } => s.push_str(&table::predict(config, results)),
            Body::Event { config, results } => s.push_str(&super::event::summary(
                &crate::measure::event::EventRunResult {
                    status: doc.status,
                    config: config.clone(),
                    results: (**results).clone(),
                    warnings: doc.warnings.clone(),
                },
            )),
        },
        Loaded::Other { value, .. } => {
            for (k, v) in report::flatten(value.get("results").unwrap_or(value), 40) {
                s.push_str(&format!("{k}: {v}\n"));
            }
        }
    }
    s.push('\n');
    s
}
