//! `--export FORMAT=PATH` (repeatable), for any command that ends with results to hand on:
//! flatten [`ExportArgs`] into its arguments, call [`ExportArgs::preflight`] before measuring
//! and [`ExportArgs::write`] at the end.

use super::output;
use crate::error::{Error, Result};
use crate::report::export::{self, Export, Exporter};
use clap::Args;
use std::path::{Path, PathBuf};

/// One `--export FORMAT=PATH`.
#[derive(Debug, Clone)]
pub struct ExportTarget {
    /// A name of `export::EXPORTERS`.
    pub format: &'static str,
    /// A file, or an existing directory that receives `xrunlab.EXT` (for openmetrics
    /// `xrunlab.prom`, the name a node exporter's textfile directory wants).
    pub path: PathBuf,
}

impl ExportTarget {
    pub fn exporter(&self) -> &'static dyn Exporter {
        export::by_name(self.format).expect("parsed from the registry")
    }

    /// The file written: PATH, or PATH/xrunlab.EXT when PATH is a directory.
    pub fn file(&self) -> PathBuf {
        if self.path.is_dir() {
            self.path
                .join(format!("xrunlab.{}", self.exporter().extension()))
        } else {
            self.path.clone()
        }
    }
}

/// The names of every format, for error messages and `--help`.
pub fn format_names() -> String {
    export::EXPORTERS
        .iter()
        .map(|e| e.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The exporter called `name`, or a usage error listing them all.
pub fn format_named(name: &str) -> Result<&'static dyn Exporter> {
    export::by_name(name).ok_or_else(|| {
        Error::usage(format!(
            "unknown format {name:?}: the formats are {}",
            format_names()
        ))
    })
}

fn parse_target(s: &str) -> std::result::Result<ExportTarget, String> {
    let (format, path) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not FORMAT=PATH (formats: {})", format_names()))?;
    let e = format_named(format).map_err(|e| e.to_string())?;
    if path.is_empty() {
        return Err(format!("{s:?}: no PATH after '='"));
    }
    Ok(ExportTarget {
        format: e.name(),
        path: PathBuf::from(path),
    })
}

#[derive(Debug, Clone, Args, Default)]
pub struct ExportArgs {
    /// Also write the results as FORMAT to PATH at the end (repeatable). Formats: text, json,
    /// html, junit, openmetrics, lava, kcidb. PATH may be a directory: it then receives
    /// xrunlab.EXT (openmetrics: xrunlab.prom, renamed into place, for a node exporter).
    #[arg(long = "export", value_name = "FORMAT=PATH", value_parser = parse_target)]
    pub targets: Vec<ExportTarget>,
}

impl ExportArgs {
    /// Every file the exports will write can be written (exit 2 now, not after measuring).
    pub fn preflight(&self, inputs: &[(&str, &Path)]) -> Result<()> {
        let files: Vec<PathBuf> = self.targets.iter().map(ExportTarget::file).collect();
        let outputs: Vec<(&str, &Path)> = files.iter().map(|f| ("--export", f.as_path())).collect();
        output::preflight(&outputs, inputs)
    }

    /// For a command that ends with one result, not a suite: a format that needs a suite's
    /// manifest (JUnit) is refused now rather than after hours of watching.
    pub fn check_single_result(&self) -> Result<()> {
        match self.targets.iter().find(|t| t.format == "junit") {
            Some(t) => Err(Error::usage(format!(
                "--export junit={}: JUnit is written for a suite, from its manifest, and this \
                 command ends with a single result (`xrunlab suite --junit FILE` writes it)",
                t.path.display()
            ))),
            None => Ok(()),
        }
    }

    /// The finisher's hook that writes these exports of the final document (`Measured::also`).
    pub fn writer(self) -> output::AlsoWrite {
        Box::new(move |doc, path| {
            let input = [crate::report::Input {
                path: path.map(Path::to_path_buf).unwrap_or_default(),
                item: crate::report::Loaded::Doc(Box::new(doc.clone())),
            }];
            self.write(&Export::of(&input)).map(|_| ())
        })
    }

    /// Write every export of `input`; all are tried, the first failure is returned.
    pub fn write(&self, input: &Export) -> Result<Vec<PathBuf>> {
        let mut written = Vec::new();
        let mut first = None;
        for t in &self.targets {
            let file = t.file();
            match export::write_file(t.exporter(), input, &file) {
                Ok(()) => written.push(file),
                Err(e) => {
                    first.get_or_insert(e);
                }
            }
        }
        match first {
            Some(e) => Err(e),
            None => Ok(written),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_and_unknown_formats_are_listed() {
        let t = parse_target("openmetrics=out/x.prom").unwrap();
        assert_eq!(t.format, "openmetrics");
        assert_eq!(t.path, PathBuf::from("out/x.prom"));
        let e = parse_target("csv=x.csv").unwrap_err();
        assert!(e.contains("openmetrics") && e.contains("junit"), "{e}");
        assert!(parse_target("json").is_err());
        assert!(parse_target("json=").is_err());
    }

    /// A watch cannot end in JUnit: said before it starts, not after it.
    #[test]
    fn junit_is_refused_for_a_single_result() {
        let a = ExportArgs {
            targets: vec![parse_target("lava=a.txt").unwrap()],
        };
        assert!(a.check_single_result().is_ok());
        let a = ExportArgs {
            targets: vec![parse_target("junit=j.xml").unwrap()],
        };
        let e = a.check_single_result().unwrap_err();
        assert_eq!(e.exit_code(), crate::error::EXIT_USAGE);
        assert!(e.to_string().contains("suite --junit"), "{e}");
    }

    #[test]
    fn a_directory_receives_the_formats_file_name() {
        let d = tempfile::tempdir().unwrap();
        let t = parse_target(&format!("openmetrics={}", d.path().display())).unwrap();
        assert_eq!(t.file(), d.path().join("xrunlab.prom"));
    }
}
