//! Presentation of results: terminal text, the self-contained HTML report, `compare`, and
//! the exporters that write them (and JSON, JUnit) as files.
//!
//! Every result kind is rendered by one function per presentation (text/KIND.rs,
//! html/KIND.rs, a match arm in compare.rs); a kind this build does not know (written by a
//! newer xrunlab) still loads as [`Loaded::Other`] and gets a generic section, so a report
//! never fails on it.

pub mod answer;
pub mod compare;
mod compare_kinds;
pub mod decide;
pub mod export;
pub mod format;
pub mod grid;
pub mod html;
pub mod parts;
pub mod plot;
pub mod serve;
pub mod text;
pub mod tuning;
pub mod verdict;

use crate::error::{Error, Result};
use crate::results::{parse_result, read_result_text, ResultDoc};
use crate::system::Environment;
use std::path::{Path, PathBuf};

/// Whether this build has a typed body for `kind` (derived from `results::Body`, so a new
/// kind is known here the moment it exists).
pub fn known_kind(kind: &str) -> bool {
    crate::results::Kind::all().any(|k| k == kind)
}

/// One input file of a report or comparison.
pub struct Input {
    pub path: PathBuf,
    pub item: Loaded,
}

pub enum Loaded {
    Doc(Box<ResultDoc>),
    /// A valid envelope of a kind this build cannot type: shown generically.
    Other {
        kind: String,
        status: String,
        environment: Option<Box<Environment>>,
        warnings: Vec<String>,
        value: serde_json::Value,
    },
}

impl Input {
    pub fn kind(&self) -> &str {
        match &self.item {
            Loaded::Doc(d) => d.kind(),
            Loaded::Other { kind, .. } => kind,
        }
    }

    pub fn environment(&self) -> Option<&Environment> {
        match &self.item {
            Loaded::Doc(d) => Some(&d.environment),
            Loaded::Other { environment, .. } => environment.as_deref(),
        }
    }

    pub fn warnings(&self) -> &[String] {
        match &self.item {
            Loaded::Doc(d) => &d.warnings,
            Loaded::Other { warnings, .. } => warnings,
        }
    }

    pub fn status(&self) -> String {
        match &self.item {
            Loaded::Doc(d) => format!("{:?}", d.status).to_lowercase(),
            Loaded::Other { status, .. } => status.clone(),
        }
    }

    /// The file name, for headings.
    pub fn name(&self) -> String {
        self.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| self.path.display().to_string())
    }

    /// The whole document as JSON, for the generic renderers.
    pub fn value(&self) -> serde_json::Value {
        match &self.item {
            Loaded::Doc(d) => serde_json::to_value(d).unwrap_or_default(),
            Loaded::Other { value, .. } => value.clone(),
        }
    }
}

/// The result files a path stands for ([`results_in`]).
#[derive(Debug)]
pub struct Found {
    pub files: Vec<PathBuf>,
    /// Set when a suite directory's manifest lists no result that is there, and the `*.json`
    /// files the directory holds were taken instead: why, for the user to read.
    pub note: Option<String>,
}

/// The result files `path` stands for: itself, or a directory's (the manifest's list when it
/// has one, else every `*.json` in it). A suite's tuned stages (`suite --tuned`) are left
/// out: they describe the machine while the profile was applied, not as the suite left it
/// (restored); the report shows them beside their untuned stages instead.
///
/// A manifest that lists files of which only some are there is an error naming them (a
/// verdict over part of a suite would pass for the whole); one that lists none that is there
/// (another suite's, or one written before any stage ran) gives way to the `*.json` files
/// present, with a note saying so.
pub fn results_in(path: &Path) -> Result<Found> {
    use crate::results::suite::MANIFEST;
    if !path.is_dir() {
        return Ok(Found {
            files: vec![path.to_path_buf()],
            note: None,
        });
    }
    // Every `*.json` but a directory: a FIFO or a link to a device is named by the reader
    // when it refuses it, not skipped in silence.
    let rd = std::fs::read_dir(path).map_err(|e| Error::input(path, e.to_string()))?;
    let mut present: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json") && !p.is_dir())
        .filter(|p| p.file_name().is_some_and(|n| n != MANIFEST))
        .collect();
    present.sort();
    let manifest = path.join(MANIFEST);
    if !manifest.exists() {
        if present.is_empty() {
            return Err(Error::input(
                path,
                "holds no result (*.json) to judge: give a suite directory or result files",
            ));
        }
        return Ok(Found {
            files: present,
            note: None,
        });
    }
    let listed: Vec<PathBuf> = crate::results::suite::Manifest::read_file(&manifest)?
        .stages
        .iter()
        .filter(|s| !s.is_tuned())
        .filter_map(|s| s.file.as_ref())
        .filter(|f| {
            f.ends_with(".json") && Path::new(f).file_name() != Some(std::ffi::OsStr::new(MANIFEST))
        })
        .map(|f| path.join(f))
        .collect();
    // A file listed twice is one result: the suite never lists one twice, and a doctored
    // manifest must neither count a run's hours twice nor make every reader parse it again.
    let mut seen = std::collections::HashSet::new();
    let listed: Vec<PathBuf> = listed
        .into_iter()
        .filter(|f| seen.insert(f.clone()))
        .collect();
    // A link is there even when what it points to is not a file: the reader says what it is.
    let (here, missing): (Vec<PathBuf>, Vec<PathBuf>) = listed
        .into_iter()
        .partition(|f| std::fs::symlink_metadata(f).is_ok());
    let names = |v: &[PathBuf]| {
        let shown: Vec<String> = v.iter().take(3).map(|f| f.display().to_string()).collect();
        match v.len() {
            n if n > 3 => format!("{} and {} more", shown.join(", "), n - 3),
            _ => shown.join(", "),
        }
    };
    if !here.is_empty() {
        if !missing.is_empty() {
            return Err(Error::input(
                &manifest,
                format!(
                    "lists {} result file(s) that are not there ({}): moved or deleted since the suite wrote it",
                    missing.len(),
                    names(&missing)
                ),
            ));
        }
        return Ok(Found {
            files: here,
            note: None,
        });
    }
    let lists = if missing.is_empty() {
        "lists no result file (no stage wrote one)".to_string()
    } else {
        format!(
            "lists only result files that are not there ({}): it is another suite's, or they were moved",
            names(&missing)
        )
    };
    if present.is_empty() {
        return Err(Error::input(
            path,
            format!("holds no result (*.json) to judge, and its {MANIFEST} {lists}"),
        ));
    }
    Ok(Found {
        note: Some(format!(
            "{} {lists}; read the {} *.json file(s) in {} instead",
            manifest.display(),
            present.len(),
            path.display()
        )),
        files: present,
    })
}

/// Read one result file; errors name the file (exit 2).
pub fn load(path: &Path) -> Result<Input> {
    let text = read_result_text(path)?;
    match parse_result(path, &text) {
        Ok(doc) => Ok(Input {
            path: path.into(),
            item: Loaded::Doc(Box::new(doc)),
        }),
        Err(e) => {
            // parse_result has checked the JSON and the schema version before typing the
            // body; only a kind it does not know falls through to the generic path.
            let value: Option<serde_json::Value> = serde_json::from_str(&text).ok();
            let Some(mut value) = value else {
                return Err(e);
            };
            crate::results::migrate::upgrade(&mut value);
            let kind = value.get("kind").and_then(|k| k.as_str()).unwrap_or("");
            let version_ok = value.get("schema_version").and_then(|v| v.as_u64())
                == Some(crate::results::SCHEMA_VERSION as u64);
            if kind.is_empty() || known_kind(kind) || !version_ok {
                return Err(e);
            }
            if !kind
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                return Err(Error::input(path, format!("kind {kind:?} is not a kind")));
            }
            Ok(Input {
                path: path.into(),
                item: Loaded::Other {
                    kind: kind.into(),
                    status: value
                        .get("status")
                        .and_then(|s| s.as_str())
                        .unwrap_or("?")
                        .into(),
                    environment: value
                        .get("environment")
                        .and_then(|e| serde_json::from_value(e.clone()).ok())
                        .map(Box::new),
                    warnings: value
                        .get("warnings")
                        .and_then(|w| serde_json::from_value(w.clone()).ok())
                        .unwrap_or_default(),
                    value,
                },
            })
        }
    }
}

/// Xruns and skipped periods together: the periods a run or sched row did not deliver on
/// time. Saturating, as every sum over a file's counts here: a file is not trusted to keep
/// them small.
pub fn xruns_and_skipped(e: &crate::measure::run::RunResults) -> u64 {
    e.xruns.total.saturating_add(e.skipped_periods)
}

/// Leaves of a JSON value as (dotted path, value) rows; long arrays are cut to keep a
/// generic section readable (traces belong in CSV files, not in a report table).
pub fn flatten(v: &serde_json::Value, max_rows: usize) -> Vec<(String, String)> {
    fn walk(prefix: &str, v: &serde_json::Value, out: &mut Vec<(String, String)>, max: usize) {
        if out.len() >= max {
            return;
        }
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    let p = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(&p, x, out, max);
                }
            }
            serde_json::Value::Array(a) => {
                if a.is_empty() {
                    out.push((prefix.into(), "[]".into()));
                } else if a.iter().all(|x| !x.is_object() && !x.is_array()) && a.len() <= 16 {
                    let items: Vec<String> = a.iter().map(scalar).collect();
                    out.push((prefix.into(), items.join(", ")));
                } else {
                    for (i, x) in a.iter().take(8).enumerate() {
                        walk(&format!("{prefix}[{i}]"), x, out, max);
                    }
                    if a.len() > 8 {
                        out.push((prefix.into(), format!("… {} items in all", a.len())));
                    }
                }
            }
            x => out.push((prefix.into(), scalar(x))),
        }
    }
    fn scalar(v: &serde_json::Value) -> String {
        match v {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Null => "-".into(),
            x => x.to_string(),
        }
    }
    let mut out = Vec::new();
    walk("", v, &mut out, max_rows);
    out
}

/// A column label for a result: hostname, kernel and stress, as Huang et al. names systems.
pub fn default_label(input: &Input) -> String {
    match input.environment() {
        Some(env) => {
            let mut s = format!(
                "{} {}",
                if env.hostname.is_empty() {
                    "?"
                } else {
                    &env.hostname
                },
                env.kernel
            );
            if env.stress.is_empty() {
                s.push_str(" idle");
            } else {
                s.push_str(&format!(" +{}", env.stress.join(",")));
            }
            s
        }
        None => input.name(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_text(name: &str, text: &str) -> Result<Input> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        load(&p)
    }

    #[test]
    fn every_kind_of_the_build_is_known_and_a_malformed_one_is_refused() {
        let v = crate::results::SCHEMA_VERSION;
        let kinds: Vec<&str> = crate::results::Kind::all().collect();
        // The kinds the JSON Schema lists are the kinds this build refuses when malformed.
        let schema = crate::results::schema_json();
        for k in &kinds {
            assert!(
                schema.contains(&format!("\"{k}\"")),
                "{k} not in the schema"
            );
        }
        assert!(kinds.contains(&"audit") && kinds.contains(&"watch"));
        for kind in kinds {
            let text = format!(
                r#"{{"schema_version": {v}, "tool": {{"name": "xrunlab", "version": "0"}},
                "kind": "{kind}", "config": {{}}, "results": {{"nonsense": true}}}}"#
            );
            match load_text("r.json", &text) {
                Err(e) => assert_eq!(e.exit_code(), 2, "{kind}: {e}"),
                Ok(i) => panic!("a malformed {kind} result was read as {:?}", i.kind()),
            }
        }
    }

    #[test]
    fn a_kind_of_a_newer_build_is_shown_generically() {
        let v = crate::results::SCHEMA_VERSION;
        let text = format!(
            r#"{{"schema_version": {v}, "tool": {{"name": "xrunlab", "version": "9"}},
            "kind": "futurekind", "status": "complete", "config": {{}}, "results": {{}}}}"#
        );
        let i = load_text("f.json", &text).expect("an unknown kind is shown, not refused");
        assert!(matches!(i.item, Loaded::Other { .. }));
        assert_eq!(i.kind(), "futurekind");
    }
}
