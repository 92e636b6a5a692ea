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

impl Json {
    /// One document as its result file holds it (`-o FILE.json`, `--json`).
    pub fn document(doc: &ResultDoc) -> String {
        let mut text = doc.to_json();
        text.push('\n');
        text
    }
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
        let text = match items.as_slice() {
            [Item::Doc(d)] => Json::document(d),
            [one] => serde_json::to_string_pretty(one).expect("a value read serialises") + "\n",
            all => serde_json::to_string_pretty(all).expect("result documents serialise") + "\n",
        };
        out.write_all(text.as_bytes())
            .map_err(|e| super::io(self.name(), e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Input;

    fn fixture(name: &str) -> Input {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results");
        crate::report::load(&p.join(name)).unwrap()
    }

    #[test]
    fn one_document_is_its_file_and_several_an_array() {
        let one = [fixture("check.json")];
        let text =
            String::from_utf8(super::super::render(&Json, &Export::of(&one)).unwrap()).unwrap();
        let Loaded::Doc(d) = &one[0].item else {
            panic!("a known kind")
        };
        assert_eq!(text, format!("{}\n", d.to_json()));
        let two = [fixture("check.json"), fixture("rtl-model.json")];
        let text = super::super::render(&Json, &Export::of(&two)).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&text).unwrap();
        let kinds: Vec<&str> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["check", "rtl"]);
    }
}
