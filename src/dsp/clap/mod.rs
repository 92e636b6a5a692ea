//! CLAP hosting: users' CLAP plugins in the engine, the bench and the load test, as the chain
//! element `clap:ID` or `clap:NAME`, with parameters `clap:ID(name=value,…)`.
//!
//! Built on `clap-sys` (the C ABI as Rust types) rather than `clack-host` 0.2: the host side
//! is small (an entry, a factory, a `clap_host`, a process struct), and writing it against the
//! ABI keeps every callback the plugin may make from its audio thread visibly free of
//! allocations and locks (host.rs) and the buffer layout ours (instance.rs), where clack's
//! handler traits and buffer builders would need to be audited for the same.
//!
//! A plugin runs in xrunlab's own process: one that crashes takes the process with it, after
//! one line naming it (`rt::crash`), as LV2's do.

pub mod catalog;
pub mod host;
pub mod instance;
pub mod state;

use super::format::{PluginDesc, PluginFormat};
use super::{Plugin, PluginContext};
use crate::error::Result;
pub use instance::ClapPlugin;

/// The prefix that marks a chain element as a CLAP plugin.
pub const PREFIX: &str = "clap:";

/// How CLAP's files and ids read in paths and messages (`dsp::files`).
pub const KIND: crate::dsp::files::Kind = crate::dsp::files::Kind {
    prefix: "clap",
    title: "CLAP",
    ext: "clap",
    file_only: true,
    id_word: "id",
};

/// Instantiate `target` with `params` (`name=value,…`) for `ctx`.
pub fn create(target: &str, params: &str, ctx: &PluginContext) -> Result<ClapPlugin> {
    let found = catalog::resolve(target)?;
    let values = instance::parse_params(&found, params)?;
    ClapPlugin::new(&found, &values, ctx)
}

/// CLAP as a plugin format (`dsp::format`): the registry's line for it.
pub struct Clap;

impl PluginFormat for Clap {
    fn prefix(&self) -> &'static str {
        PREFIX
    }

    fn key(&self) -> &'static str {
        "clap"
    }

    fn title(&self) -> &'static str {
        "CLAP"
    }

    fn example(&self) -> &'static str {
        "com.zamaudio.ZamComp"
    }

    fn search_path(&self) -> String {
        let dirs: Vec<String> = catalog::search_dirs()
            .iter()
            .map(|d| d.display().to_string())
            .collect();
        format!("CLAP_PATH, ~/.clap, /usr/lib/clap ({})", dirs.join(":"))
    }

    fn path_var(&self) -> Option<&'static str> {
        Some("CLAP_PATH")
    }

    fn list(&self, filter: Option<&str>) -> Vec<PluginDesc> {
        crate::dsp::files::list(catalog::all(), filter)
    }

    fn plugin_files(&self) -> bool {
        true
    }

    fn in_dir(&self, dir: &std::path::Path) -> Option<Vec<PluginDesc>> {
        let found = catalog::in_dir(dir);
        (!found.is_empty()).then_some(found)
    }

    fn describe(&self, target: &str) -> Result<PluginDesc> {
        Ok(catalog::resolve(target)?.desc)
    }

    fn instantiate(
        &self,
        target: &str,
        params: &str,
        ctx: &PluginContext,
    ) -> Result<Box<dyn Plugin>> {
        Ok(Box::new(create(target, params, ctx)?))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn clap_elements_parse_with_dots_in_their_id() {
        let c = crate::dsp::parse_chain("clap:com.zamaudio.ZamComp(threshold=-20):3,clap:ZamEQ2")
            .unwrap();
        assert_eq!(c[0].plugin, "clap:com.zamaudio.ZamComp");
        assert_eq!(c[0].params, "threshold=-20");
        assert_eq!(c[0].count, 3);
        assert_eq!(c[1].plugin, "clap:ZamEQ2");
        let e = crate::dsp::parse_chain("clap:").unwrap_err().to_string();
        assert!(
            e.contains("clap: needs a plugin URI or name, e.g. clap:com.zamaudio.ZamComp"),
            "{e}"
        );
    }

    #[test]
    fn symbols_are_lower_case_words() {
        assert_eq!(
            super::catalog::symbol_of("Attack Time (ms)"),
            "attack_time_ms"
        );
        assert_eq!(super::catalog::symbol_of("Sidechain"), "sidechain");
    }
}
