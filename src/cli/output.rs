//! Shared output path of every command: JSON to a file (atomic) and/or stdout, the human
//! summary to stdout (or stderr when stdout carries JSON), nothing with --quiet.

use super::Global;
use crate::error::Result;
use crate::results::{write_json_atomic, ResultDoc};

/// Emit a finished (or partial) result as the global options ask.
pub fn emit(doc: &ResultDoc, g: &Global, human: &str) -> Result<()> {
    if let Some(path) = &g.output {
        write_json_atomic(path, doc)?;
    }
    if g.json {
        println!("{}", doc.to_json());
    }
    if !g.quiet {
        if g.json {
            eprint!("{human}");
        } else {
            print!("{human}");
        }
        if let Some(path) = &g.output {
            let line = format!("result written to {}\n", path.display());
            if g.json {
                eprint!("{line}");
            } else {
                print!("{line}");
            }
        }
    }
    Ok(())
}
