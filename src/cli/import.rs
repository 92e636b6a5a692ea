//! `xrunlab import`.

use super::{output, Global};
use crate::error::Result;
use crate::results::{import, Body, ResultDoc, Status};
use crate::system::Environment;
use clap::Args;
use std::path::PathBuf;

/// Read cyclictest output (-h text or --json) into a latency result.
#[derive(Debug, Args)]
#[command(after_help = "\
Reads the text histogram cyclictest prints with -h (the dense layout of rt-tests <= 2.6 with
'# Total:', and the sparse one of rt-tests >= 2.7) and cyclictest --json files. Percentiles
come from cyclictest's 1 µs buckets. The environment recorded is this machine's, not the one
that ran cyclictest: treat it as unknown.

Examples:
  cyclictest -q -m -S -p 90 -i 200 -h 400 -D 5m > ct.txt
  xrunlab import ct.txt -o ct.json
  xrunlab import --json cyclictest-output.json | python3 -m json.tool")]
pub struct ImportArgs {
    /// cyclictest text histogram or --json file.
    pub file: PathBuf,
}

pub fn run(a: ImportArgs, g: &Global) -> Result<u8> {
    let started = crate::rt::clock::wall_clock_rfc3339();
    let (cfg, result) = import::import_file(&a.file)?;
    let human = crate::report::text::latency::summary(&cfg, &result);
    let mut doc = ResultDoc::new(
        Body::Latency {
            config: cfg,
            results: Box::new(result),
        },
        Status::Complete,
        started,
        Environment::default(),
    );
    doc.warnings.push(format!(
        "imported from {}: the environment block is empty because the file does not record it",
        a.file.display()
    ));
    output::emit(&doc, g, &human)?;
    Ok(0)
}
