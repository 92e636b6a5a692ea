//! LV2 hosting: users' own plugins in the engine, the bench and the load test, as the chain
//! element `lv2:URI` or `lv2:NAME`, with parameters `lv2:URI(symbol=value,…)`.
//!
//! Built on the `lilv` crate (bindings to Debian's liblilv) for discovery, port data,
//! instantiation and default state; the host features are ours (features.rs, worker.rs)
//! because the higher-level `livi` 0.9 announces no sample rate, nominal block length or
//! sequence size option, polls its worker every 100 ms under a mutex, and hides the plugins
//! it cannot host — while `plugins list --lv2` must say why.
//!
//! A plugin runs in xrunlab's own process: one that crashes takes the process with it, after
//! one line naming it (`rt::crash`; instance.rs and worker.rs enter its slot). The stressors
//! die with it (PR_SET_PDEATHSIG); a tracefs instance left behind is removed at the next
//! start.

pub mod catalog;
pub mod features;
pub mod instance;
pub mod state;
pub mod worker;

use super::format::PluginFormat;
use super::{Plugin, PluginContext};
pub use crate::dsp::format::{PluginDesc, PortDesc, PortKind};
use crate::error::Result;
pub use instance::Lv2Plugin;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// The prefix that marks a chain element as an LV2 plugin.
pub const PREFIX: &str = "lv2:";

/// Resolve `target` once per process: a load test instantiates the same plugin hundreds of
/// times, and matching a name walks every installed plugin.
fn resolve_cached(target: &str) -> Result<(lilv::plugin::Plugin, PluginDesc)> {
    type Cache = Mutex<HashMap<String, (lilv::plugin::Plugin, PluginDesc)>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(hit) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(target) {
        return Ok(hit.clone());
    }
    let found = catalog::resolve(target)?;
    cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(target.to_string(), found.clone());
    Ok(found)
}

/// The installed plugin `target` (URI or name) names.
pub fn describe(target: &str) -> Result<PluginDesc> {
    Ok(resolve_cached(target)?.1)
}

/// Instantiate `target` with `params` (`symbol=value,…`) for `ctx`.
pub fn create(target: &str, params: &str, ctx: &PluginContext) -> Result<Lv2Plugin> {
    let (plugin, desc) = resolve_cached(target)?;
    let values = instance::parse_params(&desc, params)?;
    Lv2Plugin::new(&plugin, &desc, &values, ctx)
}

/// As [`create`], boxed for a chain.
pub fn create_boxed(target: &str, params: &str, ctx: &PluginContext) -> Result<Box<dyn Plugin>> {
    Ok(Box::new(create(target, params, ctx)?))
}

/// LV2 as a plugin format (`dsp::format`): the registry's line for it.
pub struct Lv2;

impl PluginFormat for Lv2 {
    fn prefix(&self) -> &'static str {
        PREFIX
    }

    fn key(&self) -> &'static str {
        "lv2"
    }

    fn title(&self) -> &'static str {
        "LV2"
    }

    fn path_var(&self) -> Option<&'static str> {
        Some("LV2_PATH")
    }

    fn example(&self) -> &'static str {
        "urn:zamaudio:ZamComp"
    }

    fn search_path(&self) -> String {
        format!(
            "LV2_PATH ({})",
            std::env::var("LV2_PATH")
                .unwrap_or_else(|_| "default: ~/.lv2:/usr/local/lib/lv2:/usr/lib/lv2".into())
        )
    }

    fn list(&self, filter: Option<&str>) -> Vec<PluginDesc> {
        match filter {
            Some(f) => catalog::filter(f),
            None => catalog::list(),
        }
    }

    fn describe(&self, target: &str) -> Result<PluginDesc> {
        describe(target)
    }

    fn instantiate(
        &self,
        target: &str,
        params: &str,
        ctx: &PluginContext,
    ) -> Result<Box<dyn Plugin>> {
        create_boxed(target, params, ctx)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn lv2_elements_parse_with_colons_in_their_uri() {
        let c = crate::dsp::parse_chain(
            "lv2:urn:dragonfly:room,lv2:http://plugin.org.uk/swh-plugins/amp(gain=-6):3,lv2:Dragonfly Hall Reverb:2,gain",
        )
        .unwrap();
        assert_eq!(c.len(), 4);
        assert_eq!(c[0].plugin, "lv2:urn:dragonfly:room");
        assert_eq!(c[0].count, 1);
        assert_eq!(c[1].plugin, "lv2:http://plugin.org.uk/swh-plugins/amp");
        assert_eq!(c[1].params, "gain=-6");
        assert_eq!(c[1].count, 3);
        assert_eq!(c[2].plugin, "lv2:Dragonfly Hall Reverb");
        assert_eq!(c[2].count, 2);
        assert_eq!(c[3].plugin, "gain");
        // The load test builds `ELEMENT:N` from an element; it must parse back.
        let again = crate::dsp::parse_chain(&format!("{}:7", c[0].plugin)).unwrap();
        assert_eq!(
            (again[0].plugin.as_str(), again[0].count),
            ("lv2:urn:dragonfly:room", 7)
        );
        for bad in ["lv2:", "lv2:x:0", "lv2:x(a=1", "lv2:x)"] {
            assert!(crate::dsp::parse_chain(bad).is_err(), "{bad}");
        }
        let e = crate::dsp::parse_chain("lv2:),()").unwrap_err().to_string();
        assert!(e.contains("')' without '('"), "{e}");
        let e = crate::dsp::parse_chain("lv2:").unwrap_err().to_string();
        assert!(
            e.contains("lv2: needs a plugin URI or name, e.g. lv2:urn:zamaudio:ZamComp"),
            "{e}"
        );
        // An identifier that itself ends in `:DIGITS` prints with its count.
        for text in ["lv2:urn:x:7:1", "lv2:urn:x(gain=-6):3"] {
            assert_eq!(crate::dsp::parse_chain(text).unwrap()[0].to_string(), text);
        }
    }
}
