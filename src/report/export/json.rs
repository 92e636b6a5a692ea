use super::{Export, Exporter};
use crate::error::Result;
use crate::report::Loaded;
use crate::results::ResultDoc;
use serde::Serialize;

/// Result documents as JSON: one document as it is written by `-o FILE.json`, several as an
/// array of them.
pub struct Json;

/// One document of either load: typed, or a kind this build does not know, kept as read.
#[derive(Serialize)]
#[serde(untagged)]
enum Item<'a> {
    Doc(&'a ResultDoc),
    Other(&'a serde_json::Value),
}

impl Exporter for Json {
    fn name(&self) -> &'static str {
        "json"
    }

    fn extension(&self) -> &'static str {
        "json"
    }

    fn export(&self, input: &Export, out: &mut dyn std::io::Write) -> Result<()> {
        let items: Vec<Item> = input
            .results
            .iter()
            .map(|i| match &i.item {
                Loaded::Doc(d) => Item::Doc(d),
                Loaded::Other { value, .. } => Item::Other(value),
            })
            .collect();
        let mut text = match items.as_slice() {
            [one] => serde_json::to_string_pretty(one),
            all => serde_json::to_string_pretty(all),
        }
        .expect("result documents always serialise");
        text.push('\n');
        out.write_all(text.as_bytes())
            .map_err(|e| super::io(self.name(), e))
    }
}
