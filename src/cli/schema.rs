//! `xrunlab schema`: print the JSON Schema of result files.

use super::{output, Global};
use crate::error::Result;
use clap::Args;

/// Print the JSON Schema that every result file follows.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  xrunlab schema > result.schema.json\n  xrunlab schema -o result.schema.json\n\nThe schema is this command's document, as the result is a measuring command's: -o writes it\n(atomically), --json or no -o prints it, -q drops the line that says where it was written."
)]
pub struct SchemaArgs {}

pub fn run(_a: SchemaArgs, g: &Global) -> Result<u8> {
    let schema = crate::results::schema_json();
    // The target was checked before we got here (output::preflight), like every -o.
    if let Some(path) = &g.output {
        crate::results::write_atomic(path, schema.as_bytes())?;
        if !g.quiet {
            let line = format!("schema written to {}\n", output::shown(path));
            if g.json {
                output::stderr(&line);
            } else {
                output::stdout(&line);
            }
        }
    }
    if g.json || g.output.is_none() {
        output::stdout(&schema);
    }
    Ok(0)
}
