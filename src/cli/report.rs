//! `xrunlab report`.

use super::{output, Global};
use crate::error::Result;
use crate::report::export::{self, Export};
use crate::report::{self, Input};
use clap::Args;
use std::path::PathBuf;

/// Present results: a self-contained HTML report with plots (-o FILE.html), or a terminal summary.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  xrunlab report lat.json run.json -o report.html\n  xrunlab report check.json          # terminal summary\n  xrunlab report xrunlab-results -o report.html   # a suite directory, as `verdict DIR`\n  xrunlab report --manifest out/manifest.json out/0*.json -o out/report.html   # a suite's results\n\nThe HTML file has inline CSS and SVG only: no scripts, nothing fetched."
)]
pub struct ReportArgs {
    /// Result files written by xrunlab (any kind), or a suite's directory (the files its
    /// manifest lists, with the manifest's stage table; else every *.json in it).
    #[arg(required = true, value_name = "RESULT.json|DIR")]
    pub files: Vec<PathBuf>,
    /// A suite's manifest.json: its stage table (what ran, what was skipped and why) heads the report.
    #[arg(long, value_name = "MANIFEST.json")]
    pub manifest: Option<PathBuf>,
}

/// A report has nothing partial worth keeping: Ctrl-C ends it with exit 3 and no file (a
/// half-built page would pass for the whole), checked between the steps that take time.
fn stop_if_interrupted() -> Result<()> {
    crate::rt::interrupt::check("no report written")
}

pub fn run(a: ReportArgs, g: &Global) -> Result<u8> {
    let mut inputs = Vec::with_capacity(a.files.len());
    let mut manifest = match &a.manifest {
        Some(p) => Some(crate::suite::Manifest::read_file(p)?),
        None => None,
    };
    for p in &a.files {
        let found = report::results_in(p)?;
        if let (Some(n), false) = (&found.note, g.quiet) {
            output::warn([n]);
        }
        // A directory's own manifest heads its report unless --manifest named one.
        let m = p.join(crate::results::suite::MANIFEST);
        if p.is_dir() && manifest.is_none() && m.is_file() {
            manifest = Some(crate::suite::Manifest::read_file(&m)?);
        }
        for f in &found.files {
            stop_if_interrupted()?;
            inputs.push(report::load(f)?);
        }
    }
    // The answer first, as the suite orders its own report (a directory lists it last).
    inputs.sort_by_key(|i| i.kind() != "verdict");
    stop_if_interrupted()?;
    match &g.output {
        Some(path) => {
            // Whatever the file is called: the report is a page (an HTML file named .json
            // is what it has always been, and the flag stays as it was).
            let input = Export {
                results: &inputs,
                manifest: manifest.as_ref(),
            };
            let html = export::render(&export::Html, &input)?;
            stop_if_interrupted()?;
            crate::results::write_atomic(path, &html)?;
            if !g.quiet {
                output::stdout(&format!(
                    "report of {} result(s) written to {}\n",
                    inputs.len(),
                    output::shown(path)
                ));
            }
        }
        None => {
            if !g.quiet {
                for i in &inputs {
                    stop_if_interrupted()?;
                    output::stdout(&summary(i));
                }
            }
        }
    }
    Ok(0)
}

/// One input as the text exporter writes it.
fn summary(i: &Input) -> String {
    let one = export::render(&export::Text, &Export::of(std::slice::from_ref(i)));
    String::from_utf8(one.unwrap_or_default()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// Paths (keys, and `#i` for array items) of every value under `v`, with the value;
    /// of an array only its first item, whose shape the others share.
    fn paths(v: &Value, at: &[String], out: &mut Vec<(Vec<String>, Value)>) {
        out.push((at.to_vec(), v.clone()));
        let mut go = |k: String, x: &Value| {
            let mut p = at.to_vec();
            p.push(k);
            paths(x, &p, out);
        };
        match v {
            Value::Object(m) => m.iter().for_each(|(k, x)| go(k.clone(), x)),
            Value::Array(a) => a.iter().take(1).for_each(|x| go("#0".into(), x)),
            _ => {}
        }
    }

    /// Long series cut to 16 items, so that every field can be tried in seconds; the
    /// histograms stay whole because their counts must add up.
    fn thin(v: &mut Value) {
        match v {
            Value::Object(m) => m
                .iter_mut()
                .filter(|(k, _)| *k != "histogram_us" && *k != "bins")
                .for_each(|(_, x)| thin(x)),
            Value::Array(a) => {
                a.truncate(16);
                a.iter_mut().for_each(thin);
            }
            _ => {}
        }
    }

    fn at<'a>(doc: &'a mut Value, path: &[String]) -> &'a mut Value {
        path.iter().fold(doc, |v, k| match k.strip_prefix('#') {
            Some(i) => &mut v[i.parse::<usize>().unwrap()],
            None => &mut v[k.as_str()],
        })
    }

    /// Everything a reader does with a file: the terminal summary, the HTML report, and a
    /// comparison with itself (text and HTML). An input error is a fine answer.
    fn read_every_way(path: &std::path::Path) {
        let Ok(a) = crate::report::load(path) else {
            return;
        };
        let b = crate::report::load(path).unwrap();
        let _ = summary(&a);
        let _ = crate::report::html::report_with(std::slice::from_ref(&a), None);
        let inputs = vec![a, b];
        let labels = crate::report::compare::labels(&inputs, &[]).unwrap();
        if let Ok(t) = crate::report::compare::compare(&inputs, &labels) {
            let _ = crate::report::compare::to_text(&t);
            let _ = crate::report::compare::to_html(&t, &inputs, &labels);
        }
    }

    /// Each field of `fixture`'s config and results in turn set to each hostile value and
    /// read every way; the mutations whose reading panicked.
    fn mutate_and_read(fixture: &std::path::Path, dir: &std::path::Path) -> Vec<String> {
        let name = fixture.file_name().unwrap().to_string_lossy().into_owned();
        let p = dir.join(&name);
        let mut doc: Value = serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
        crate::results::migrate::upgrade(&mut doc);
        thin(&mut doc);
        std::fs::write(&p, doc.to_string()).unwrap();
        crate::report::load(&p).expect("the thinned fixture reads");
        let mut all = Vec::new();
        for top in ["config", "results"] {
            paths(&doc[top], &[top.to_string()], &mut all);
        }
        let mut panics = Vec::new();
        for (path, v) in all {
            let values = match &v {
                Value::Array(a) if !a.is_empty() => vec![json!([])],
                Value::Number(_) => vec![json!(0), json!(-1), json!(u64::MAX), json!(1e300)],
                _ => vec![],
            };
            for x in values {
                let mut d = doc.clone();
                *at(&mut d, &path) = x.clone();
                std::fs::write(&p, d.to_string()).unwrap();
                if std::panic::catch_unwind(|| read_every_way(&p)).is_err() {
                    panics.push(format!("{name} {} = {x}", path.join(".")));
                }
            }
        }
        panics
    }

    /// Every field of every fixture's config and results set, one at a time, to an empty
    /// list, 0, -1, u64::MAX or 1e300: reading it is refused (exit 2) or it is presented,
    /// never a panic (an index out of bounds, a division by zero, an overflowing sum, a
    /// chart coordinate beyond i32 in plotters: each once found this way).
    #[test]
    fn no_single_field_of_a_fixture_makes_a_reader_panic() {
        let dir = tempfile::tempdir().unwrap();
        let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/results");
        let files: Vec<_> = std::fs::read_dir(fixtures)
            .unwrap()
            .map(|f| f.unwrap().path())
            .filter(|f| f.extension().is_some_and(|e| e == "json"))
            .collect();
        // One thread per fixture: the renders dominate, and each file is independent.
        let panics: Vec<String> = std::thread::scope(|s| {
            let threads: Vec<_> = files
                .iter()
                .map(|f| s.spawn(|| mutate_and_read(f, dir.path())))
                .collect();
            threads
                .into_iter()
                .flat_map(|t| t.join().unwrap())
                .collect()
        });
        assert!(panics.is_empty(), "readers panicked on: {panics:#?}");
    }
}
