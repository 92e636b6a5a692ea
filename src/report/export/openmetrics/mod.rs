//! Prometheus metrics of results (`--format openmetrics`, `--textfile DIR`): the text
//! exposition format that `promtool check metrics` and the node exporter's textfile
//! collector read, with Prometheus' naming rules (base unit seconds, `_total` counters,
//! bounded labels). The format's name is the one users search for; what is written is its
//! Prometheus text subset (no `# EOF`, no `_created`), which both readers accept.
//!
//! A live source (`watch`) builds its snapshot with [`Metrics`] and [`add_doc`] or renders
//! documents with [`render_docs`]; histograms it counts cycle by cycle take their own names
//! (`xrunlab_watch_…`), since a name has one type in a scrape and the result files only hold
//! percentiles (summaries here).

mod docs;
mod family;
mod live;

pub use docs::{add_doc, add_manifest, doc_labels, unix_seconds, LATENCY_BUCKETS, TOP_CULPRITS};
pub use family::{number, Labels, Metrics, Type};
pub use live::{add_watch_live, watch_live_text};

use super::{Export, Exporter};
use crate::error::Result;
use crate::report::Loaded;
use crate::results::ResultDoc;
use std::path::{Path, PathBuf};

/// The Prometheus text format's media type (what the textfile holds too).
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
/// The path a scraper asks for the metrics (`watch --metrics`).
pub const PATH: &str = "/metrics";

/// The file the textfile collector reads (`--textfile DIR`).
pub const TEXTFILE: &str = "xrunlab.prom";

pub struct OpenMetrics;

impl Exporter for OpenMetrics {
    fn name(&self) -> &'static str {
        "openmetrics"
    }

    fn extension(&self) -> &'static str {
        "prom"
    }

    fn export(&self, input: &Export, out: &mut dyn std::io::Write) -> Result<()> {
        out.write_all(metrics(input).render().as_bytes())
            .map_err(|e| super::io(self.name(), e))
    }
}

/// The metrics of `input`: its documents oldest first (by end time), so that where two
/// give the same series — a directory of accumulated runs — the newest one's value is kept;
/// then its suite's stages. Kinds this build cannot type are left out.
pub fn metrics(input: &Export) -> Metrics {
    let docs: Vec<&ResultDoc> = input
        .results
        .iter()
        .filter_map(|i| match &i.item {
            Loaded::Doc(d) => Some(d.as_ref()),
            Loaded::Other { .. } => None,
        })
        .collect();
    let mut m = of_docs(&docs);
    if let Some(man) = input.manifest {
        add_manifest(&mut m, man);
    }
    m
}

fn of_docs(docs: &[&ResultDoc]) -> Metrics {
    let mut docs = docs.to_vec();
    docs.sort_by(|a, b| {
        let t = |d: &ResultDoc| unix_seconds(&d.ended_at).unwrap_or(0.0);
        t(a).total_cmp(&t(b))
    });
    let mut m = Metrics::new();
    for d in docs {
        add_doc(&mut m, d, TOP_CULPRITS);
    }
    m
}

/// The exposition text of `docs` (for a live snapshot wrapped as result documents).
pub fn render_docs(docs: &[&ResultDoc]) -> String {
    of_docs(docs).render()
}

/// Write `text` as `DIR/xrunlab.prom` the way the textfile collector needs it: under a
/// temporary name (not ending in `.prom`, so never read half-written) renamed into place,
/// with its last line terminated. Returns the file written.
pub fn write_textfile(dir: &Path, text: &str) -> Result<PathBuf> {
    let path = dir.join(TEXTFILE);
    let mut bytes = text.as_bytes().to_vec();
    if !bytes.ends_with(b"\n") {
        bytes.push(b'\n');
    }
    crate::results::write_atomic_derived(&path, &bytes)?;
    Ok(path)
}

#[cfg(test)]
mod tests;
