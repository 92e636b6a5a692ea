//! Shared output path of every command: JSON to a file (atomic) and/or stdout, the human
//! summary to stdout (or stderr when stdout carries JSON), nothing with --quiet.

use super::Global;
use crate::error::Result;
use crate::results::{write_json_atomic, ResultDoc};
use std::io::Write;

/// Write to stdout, treating a closed pipe (`xrunlab ... --json | head`) as the reader's
/// choice rather than an error: the result file, if any, is already written.
pub fn stdout(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
}

/// Like [`stdout`], for stderr.
pub fn stderr(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes());
}

/// Wrap a measurement's result in the envelope (environment, its warnings) and emit it;
/// `Some(exit 3)` when the run was interrupted (said on stderr: the result is partial),
/// None when the command decides its exit code from the result.
#[allow(clippy::too_many_arguments)]
pub fn emit_measured(
    body: crate::results::Body,
    status: crate::results::Status,
    started: String,
    env: crate::system::Environment,
    warnings: &[String],
    g: &Global,
    human: &str,
    command: &str,
) -> Result<Option<u8>> {
    let mut doc = ResultDoc::new(body, status, started, env);
    doc.warnings.extend(warnings.iter().cloned());
    emit(&doc, g, human)?;
    if status != crate::results::Status::Complete {
        stderr(&format!(
            "xrunlab: {command} interrupted; partial result reported\n"
        ));
        return Ok(Some(crate::error::EXIT_CANNOT_MEASURE));
    }
    Ok(None)
}

/// Emit a finished (or partial) result as the global options ask.
pub fn emit(doc: &ResultDoc, g: &Global, human: &str) -> Result<()> {
    if let Some(path) = &g.output {
        write_json_atomic(path, doc)?;
    }
    if g.json {
        stdout(&format!("{}\n", doc.to_json()));
    }
    if !g.quiet {
        if g.json {
            stderr(human);
        } else {
            stdout(human);
        }
        if let Some(path) = &g.output {
            let line = format!("result written to {}\n", path.display());
            if g.json {
                stderr(&line);
            } else {
                stdout(&line);
            }
        }
    }
    Ok(())
}
