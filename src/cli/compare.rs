//! `xrunlab compare`.

use super::{output, Global};
use crate::error::Result;
use crate::report::{self, compare};
use clap::Args;
use std::path::PathBuf;

/// Results of one kind side by side (kernels, machines, stress conditions), as text or HTML.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  xrunlab compare idle.json stressed.json\n  xrunlab compare a.json b.json --label a.json='6.1 PREEMPT_RT' --label 2=stock -o compare.html\n\nColumns are named hostname + kernel + stress unless --label says otherwise."
)]
pub struct CompareArgs {
    /// Two or more result files of the same kind.
    #[arg(required = true, num_args = 2.., value_name = "RESULT.json")]
    pub files: Vec<PathBuf>,
    /// Name a column: FILE=TEXT or N=TEXT (N counts files from 1). Repeatable.
    #[arg(long = "label", value_name = "FILE=TEXT")]
    pub labels: Vec<String>,
}

pub fn run(a: CompareArgs, g: &Global) -> Result<u8> {
    let inputs = a
        .files
        .iter()
        .map(|p| report::load(p))
        .collect::<Result<Vec<_>>>()?;
    compare::check_kinds(&inputs)?;
    let labels = compare::labels(&inputs, &a.labels)?;
    let tables = compare::compare(&inputs, &labels)?;
    if let Some(path) = &g.output {
        let html = compare::to_html(&tables, &inputs, &labels);
        crate::results::write_atomic(path, html.as_bytes())?;
    }
    if !g.quiet {
        output::stdout(&compare::to_text(&tables));
        if let Some(path) = &g.output {
            output::stdout(&format!("comparison written to {}\n", path.display()));
        }
    }
    Ok(0)
}
