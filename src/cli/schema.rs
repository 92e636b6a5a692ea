//! `xrunlab schema`: print the JSON Schema of result files.

use super::Global;
use crate::error::Result;
use clap::Args;

/// Print the JSON Schema that every result file follows.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  xrunlab schema > result.schema.json")]
pub struct SchemaArgs {}

pub fn run(_a: SchemaArgs, _g: &Global) -> Result<u8> {
    super::output::stdout(&crate::results::schema_json());
    Ok(0)
}
