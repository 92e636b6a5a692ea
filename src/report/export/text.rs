use super::{Export, Exporter};
use crate::error::Result;

/// The terminal summary of each result, headed by its file, kind and status (`report FILE`).
pub struct Text;

impl Exporter for Text {
    fn name(&self) -> &'static str {
        "text"
    }

    fn extension(&self) -> &'static str {
        "txt"
    }

    fn export(&self, input: &Export, out: &mut dyn std::io::Write) -> Result<()> {
        for i in input.results {
            out.write_all(crate::report::text::input(i).as_bytes())
                .map_err(|e| super::io(self.name(), e))?;
        }
        Ok(())
    }
}
