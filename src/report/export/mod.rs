//! One interface for every format a set of results is written in: an [`Exporter`] per file
//! in this folder, and [`EXPORTERS`], one line per format in `formats!`. Adding a format
//! (OpenMetrics, LAVA result lines, KCIDB JSON…) is one new file here and one line in that
//! list (docs/ARCHITECTURE.md §7 "Add an exporter").

pub use html::Html;
pub use json::Json;
pub use junit::Junit;
pub use kcidb::Kcidb;
pub use lava::Lava;
pub use openmetrics::OpenMetrics;
pub use text::Text;

use super::Input;

pub mod cases;
use crate::error::Result;
use crate::results::suite::Manifest;
use std::io::Write;
use std::path::Path;

/// What an exporter renders: result documents in the order given (loaded from files, or just
/// measured), and, when they are a suite's, its manifest (the stages, what was skipped and
/// why). Every format reads what it needs from this and ignores the rest: one document or
/// many, with or without a suite.
#[derive(Clone, Copy)]
pub struct Export<'a> {
    pub results: &'a [Input],
    pub manifest: Option<&'a Manifest>,
}

impl<'a> Export<'a> {
    /// Results that are not a suite's.
    pub fn of(results: &'a [Input]) -> Self {
        Export {
            results,
            manifest: None,
        }
    }
}

/// A file format for results.
pub trait Exporter: Sync {
    /// The format's name as given on the command line.
    fn name(&self) -> &'static str;
    /// The file name extension of the format, without the dot.
    fn extension(&self) -> &'static str;
    /// Write `input` in this format to `out`.
    fn export(&self, input: &Export, out: &mut dyn Write) -> Result<()>;
}

/// Declares each format's file and lists its exporter in [`EXPORTERS`], so that a format is
/// registered by one line (`file::Type`) and cannot be declared without being listed.
macro_rules! formats {
    ($($file:ident :: $exporter:ident),* $(,)?) => {
        $(pub mod $file;)*
        /// Every format, one line each in the `formats!` below.
        pub const EXPORTERS: &[&dyn Exporter] = &[$(&$file::$exporter),*];
    };
}

formats! {
    text::Text,
    json::Json,
    html::Html,
    junit::Junit,
    openmetrics::OpenMetrics,
    lava::Lava,
    kcidb::Kcidb,
}

/// The exporter a name stands for.
pub fn by_name(name: &str) -> Option<&'static dyn Exporter> {
    EXPORTERS.iter().copied().find(|e| e.name() == name)
}

/// The exporter a file name's extension stands for.
pub fn by_extension(path: &Path) -> Option<&'static dyn Exporter> {
    let ext = path.extension()?.to_str()?;
    EXPORTERS.iter().copied().find(|e| e.extension() == ext)
}

/// `input` in `format`, as bytes.
pub fn render(format: &dyn Exporter, input: &Export) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    format.export(input, &mut out)?;
    Ok(out)
}

/// `input` in `format`, written to `path` atomically (a reader never sees half a file).
pub fn write_file(format: &dyn Exporter, input: &Export, path: &Path) -> Result<()> {
    crate::results::write_atomic(path, &render(format, input)?)
}

/// An I/O error of the writer handed to an exporter, naming the format.
fn io(format: &str, e: std::io::Error) -> crate::error::Error {
    crate::error::Error::io(format!("writing {format}"), e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_extensions_are_unique_and_found() {
        for (i, e) in EXPORTERS.iter().enumerate() {
            assert!(EXPORTERS[..i].iter().all(|o| o.name() != e.name()));
            assert!(EXPORTERS[..i]
                .iter()
                .all(|o| o.extension() != e.extension()));
            assert_eq!(by_name(e.name()).unwrap().name(), e.name());
            let file = format!("x.{}", e.extension());
            assert_eq!(by_extension(Path::new(&file)).unwrap().name(), e.name());
        }
        assert!(by_name("csv").is_none());
        assert!(by_extension(Path::new("x")).is_none());
    }
}
