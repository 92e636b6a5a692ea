//! VST3 hosting: users' VST3 plugins in the engine, the bench, the load test and the audit,
//! as the chain element `vst3:CLASSID`, `vst3:NAME` or `vst3:/path/X.vst3`, with parameters
//! `vst3:NAME(name=value,…)` in plain units.
//!
//! Built on the `vst3` crate (0.3): bindings generated from the VST3 SDK headers (MIT since
//! SDK 3.8), shipped pre-generated, so neither the SDK nor libclang is needed to build. It
//! gives the interfaces and a way to implement them in Rust (`ComWrapper`) and nothing
//! more; the host side — module entry, component and controller, buses, the process data,
//! parameter changes, events, state stream — is ours (catalog.rs, instance.rs, host.rs),
//! which keeps every object the plugin reaches from its audio thread visibly free of
//! allocations and locks.
//!
//! A plugin runs in xrunlab's own process: one that crashes takes the process with it, after
//! one line naming it (`rt::crash`), as LV2's and CLAP's do.

pub mod catalog;
pub mod host;
pub mod instance;
pub mod parts;

use super::format::{PluginDesc, PluginFormat};
use super::{Plugin, PluginContext};
use crate::error::Result;
pub use instance::Vst3Plugin;

/// The prefix that marks a chain element as a VST3 plugin.
pub const PREFIX: &str = "vst3:";

/// How VST3's bundles and class ids read in paths and messages (`dsp::files`).
pub const KIND: crate::dsp::files::Kind = crate::dsp::files::Kind {
    prefix: "vst3",
    title: "VST3",
    ext: "vst3",
    file_only: false,
    id_word: "class id",
};

/// Instantiate `target` with `params` (`name=value,…`) for `ctx`.
pub fn create(target: &str, params: &str, ctx: &PluginContext) -> Result<Vst3Plugin> {
    let found = catalog::resolve(target)?;
    let values = instance::parse_params(&found, params)?;
    Vst3Plugin::new(&found, &values, ctx)
}

/// VST3 as a plugin format (`dsp::format`): the registry's line for it.
pub struct Vst3;

impl PluginFormat for Vst3 {
    fn prefix(&self) -> &'static str {
        PREFIX
    }

    fn key(&self) -> &'static str {
        "vst3"
    }

    fn title(&self) -> &'static str {
        "VST3"
    }

    fn example(&self) -> &'static str {
        "ZamComp"
    }

    fn search_path(&self) -> String {
        let dirs: Vec<String> = catalog::search_dirs()
            .iter()
            .map(|d| d.display().to_string())
            .collect();
        format!(
            "VST3_PATH, ~/.vst3, /usr/lib/vst3, /usr/local/lib/vst3 ({})",
            dirs.join(":")
        )
    }

    fn path_var(&self) -> Option<&'static str> {
        Some("VST3_PATH")
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
    fn vst3_elements_parse_by_class_id_name_or_path() {
        let c = crate::dsp::parse_chain(
            "vst3:5A616D436F6D70000000000000000000(threshold=-20):3,vst3:/usr/lib/vst3/ZamEQ2.vst3",
        )
        .unwrap();
        assert_eq!(c[0].plugin, "vst3:5A616D436F6D70000000000000000000");
        assert_eq!(c[0].params, "threshold=-20");
        assert_eq!(c[0].count, 3);
        assert_eq!(c[1].plugin, "vst3:/usr/lib/vst3/ZamEQ2.vst3");
        let e = crate::dsp::parse_chain("vst3:").unwrap_err().to_string();
        assert!(
            e.contains("vst3: needs a plugin URI or name, e.g. vst3:ZamComp"),
            "{e}"
        );
    }

    #[test]
    fn class_ids_print_as_32_hex_digits() {
        // TUID is [c_char; 16]: c_char is signed on x86_64 and unsigned on ARM.
        let ff = std::ffi::c_char::from_ne_bytes([0xFF]);
        let cid: vst3::Steinberg::TUID =
            [0x5A, 0x61, 0x6D, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, ff];
        assert_eq!(
            super::catalog::cid_text(&cid),
            "5A616D430000000000000000000000FF"
        );
    }

    #[test]
    fn a_state_stream_reads_back_what_was_written() {
        use vst3::Steinberg::{IBStream, IBStreamTrait};
        let s = vst3::ComWrapper::new(super::host::MemStream::default());
        let r = s.as_com_ref::<IBStream>().unwrap();
        let mut bytes = *b"hello";
        let (mut n, mut pos) = (0, 0);
        // SAFETY: the stream's own functions with buffers that outlive the calls.
        unsafe {
            r.write(bytes.as_mut_ptr().cast(), 5, &mut n);
            assert_eq!(n, 5);
            r.seek(1, 0, &mut pos);
            let mut back = [0u8; 8];
            r.read(back.as_mut_ptr().cast(), 8, &mut n);
            assert_eq!((pos, n, &back[..4]), (1, 4, &b"ello"[..]));
        }
        assert_eq!(s.bytes(), b"hello");
    }
}
