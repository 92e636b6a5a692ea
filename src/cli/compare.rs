//! `xrunlab compare`.

use super::{output, Global};
use crate::error::{Error, Result};
use crate::report::{self, compare, verdict};
use clap::Args;
use std::path::PathBuf;

/// Results of one kind side by side (kernels, machines, stress conditions), or whole suite
/// directories (one column per machine or kernel), as text or HTML.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  xrunlab compare idle.json stressed.json
  xrunlab compare a.json b.json --label a.json='6.1 PREEMPT_RT' --label 2=stock -o compare.html
  xrunlab compare suite-stock suite-rt --label suite-rt='6.1 PREEMPT_RT'   # two suite directories

Columns are named hostname + kernel + stress unless --label says otherwise. Directories give
one table of verdicts (the smallest buffer size meeting 1 glitch/h, each size's outcome, the top
cause and fix; `xrunlab verdict` with its defaults) and then every stage all of them ran,
compared as its kind is. Results recorded with --forensics add a table of who took the time:
windows explained, lost trace events and each result's top culprits.")]
pub struct CompareArgs {
    /// Two or more result files of the same kind, or two or more suite directories.
    #[arg(required = true, num_args = 2.., value_name = "RESULT.json|DIR")]
    pub files: Vec<PathBuf>,
    /// Name a column: FILE=TEXT, DIR=TEXT or N=TEXT (N counts from 1). Repeatable.
    #[arg(long = "label", value_name = "FILE=TEXT")]
    pub labels: Vec<String>,
}

/// A directory's results and the verdict over them; a note on how they were found is said
/// on stderr unless `quiet`.
fn suite(dir: &std::path::Path, quiet: bool) -> Result<compare::Suite> {
    let mut inputs = Vec::new();
    let mut stages = Vec::new();
    let names = crate::results::suite::Manifest::read_file(&dir.join(crate::suite::MANIFEST)).ok();
    let found = report::results_in(dir)?;
    if !quiet {
        output::warn(&found.note);
    }
    for f in found.files {
        crate::rt::interrupt::check("nothing compared")?;
        let i = report::load(&f)?;
        if ["verdict", "predict"].contains(&i.kind()) {
            continue;
        }
        let rel = f
            .strip_prefix(dir)
            .unwrap_or(&f)
            .to_string_lossy()
            .into_owned();
        let stage = names
            .as_ref()
            .and_then(|m| {
                m.stages
                    .iter()
                    .find(|s| s.file.as_deref() == Some(rel.as_str()))
            })
            .map(|s| s.stage.clone())
            .unwrap_or_else(|| {
                f.file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or(rel)
            });
        stages.push(stage);
        inputs.push(i);
    }
    if inputs.is_empty() {
        return Err(Error::input(dir, "holds no result to compare"));
    }
    let cost = verdict::default_cost();
    let cfg = verdict::settle(&inputs, &cost, verdict::Options::defaults())?;
    let results = verdict::build(&cfg, &inputs, &cost)?;
    Ok(compare::Suite {
        dir: dir.to_path_buf(),
        inputs,
        stages,
        verdict: (cfg, results),
    })
}

pub fn run(a: CompareArgs, g: &Global) -> Result<u8> {
    let dirs = a.files.iter().filter(|p| p.is_dir()).count();
    let (tables, inputs, labels) = if dirs == 0 {
        let inputs = a
            .files
            .iter()
            .map(|p| {
                crate::rt::interrupt::check("nothing compared")?;
                report::load(p)
            })
            .collect::<Result<Vec<_>>>()?;
        compare::check_kinds(&inputs)?;
        let labels = compare::labels(&inputs, &a.labels)?;
        (compare::compare(&inputs, &labels)?, inputs, labels)
    } else if dirs == a.files.len() {
        let suites = a
            .files
            .iter()
            .map(|d| suite(d, g.quiet))
            .collect::<Result<Vec<_>>>()?;
        let labels = compare::suite_labels(&suites, &a.labels)?;
        let tables = compare::suites(&suites, &labels)?;
        // The page's table of inputs: one line per directory, its first result's machine.
        let inputs = suites
            .iter()
            .map(|s| {
                let mut i = report::load(&s.inputs[0].path)?;
                i.path = s.dir.clone();
                Ok(i)
            })
            .collect::<Result<Vec<_>>>()?;
        (tables, inputs, labels)
    } else {
        return super::usage(
            "compare takes result files or suite directories, not both: give only files or only directories",
        );
    };
    if let Some(path) = &g.output {
        let html = compare::to_html(&tables, &inputs, &labels);
        crate::results::write_atomic(path, html.as_bytes())?;
    }
    if !g.quiet {
        output::human(&compare::to_text(&tables));
        if let Some(path) = &g.output {
            output::stdout(&format!("comparison written to {}\n", output::shown(path)));
        }
    }
    Ok(0)
}
