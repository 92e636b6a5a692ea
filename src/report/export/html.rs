use super::{Export, Exporter};
use crate::error::Result;

/// The self-contained HTML report (inline CSS and SVG, nothing fetched), headed by the
/// suite's stage table when there is a manifest.
pub struct Html;

impl Exporter for Html {
    fn name(&self) -> &'static str {
        "html"
    }

    fn extension(&self) -> &'static str {
        "html"
    }

    fn export(&self, input: &Export, out: &mut dyn std::io::Write) -> Result<()> {
        let page = crate::report::html::report_with(input.results, input.manifest);
        out.write_all(page.as_bytes())
            .map_err(|e| super::io(self.name(), e))
    }
}
