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
pub mod worker;

use super::{Plugin, PluginContext};
use crate::error::Result;
pub use catalog::{PluginDesc, PortDesc, PortKind};
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

/// What a result records of each LV2 element of its chain.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Lv2Record {
    /// The element as typed, e.g. `lv2:urn:dragonfly:room`.
    pub element: String,
    pub uri: String,
    pub name: String,
    /// Instances of it in series in each track.
    pub instances: u32,
    /// What its lv2:latency port reported after the first block, in frames (`None`: the
    /// plugin reports no latency).
    pub latency_frames: Option<u32>,
}

/// The LV2 elements of `chain`, with the latency each reported (`latencies` is per chain
/// element, as the engine measured them).
pub fn records(chain: &[super::ChainElement], latencies: &[Option<u32>]) -> Vec<Lv2Record> {
    chain
        .iter()
        .zip(latencies.iter().chain(std::iter::repeat(&None)))
        .filter_map(|(e, lat)| {
            let d = describe(e.plugin.strip_prefix(PREFIX)?).ok()?;
            Some(Lv2Record {
                element: e.plugin.clone(),
                uri: d.uri,
                name: d.name,
                instances: e.count,
                latency_frames: *lat,
            })
        })
        .collect()
}
