//! What is installed: every LV2 plugin lilv finds on `LV2_PATH`, its ports and required
//! features, and whether xrunlab can host it. `plugins list --lv2`, `plugins show` and the
//! chain element `lv2:…` all resolve plugins here, so a name means the same plugin everywhere.

use super::features::SUPPORTED_FEATURES;
use crate::dsp::format::{PluginDesc, PortDesc, PortKind};
use crate::error::{Error, Result};
use crate::units::edit_distance;
use std::sync::OnceLock;

/// lilv's world, loaded once per process: discovery reads every bundle's manifest, and the
/// plugins it returns keep the world alive for as long as their instances exist.
pub(super) fn world() -> &'static lilv::World {
    static WORLD: OnceLock<lilv::World> = OnceLock::new();
    WORLD.get_or_init(lilv::World::with_load_all)
}

const LV2: &str = "http://lv2plug.in/ns/lv2core#";
const ATOM: &str = "http://lv2plug.in/ns/ext/atom#";

const RDF_TYPE: &str = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type";
const DOAP_NAME: &str = "http://usefulinc.com/ns/doap#name";

/// Why lilv's verification (`lilv_plugin_verify`) refused `p`, in words: the three
/// statements it requires, or its data files failing to parse. Called only when it did.
fn verify_failure(p: &lilv::plugin::Plugin) -> String {
    let w = world();
    let has = |predicate: &str| p.value(&w.new_uri(predicate)).count() > 0;
    if !has(RDF_TYPE) {
        "lilv refuses it: it has no rdf:type".into()
    } else if !has(DOAP_NAME) {
        "lilv refuses it: it has no doap:name (a plugin must have a name)".into()
    } else if !has(&format!("{LV2}port")) {
        "lilv refuses it: it has no lv2:port".into()
    } else {
        "lilv refuses it: its data files do not parse (lilv's message says where)".into()
    }
}

/// lilv's rule for a port symbol: a C identifier.
fn is_symbol(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Check the plugin's ports as its data declares them, before lilv builds its port table:
/// every port has exactly one integer `lv2:index` and a valid `lv2:symbol`, and the indices
/// are 0..n with no gap and no repeat. lilv does not refuse such a plugin: a gap or an
/// invalid symbol empties its port table (so nothing gets connected and `run` writes through
/// a null pointer), a repeated index merges two ports into one, and a negative index makes
/// lilv itself write out of bounds. Only the RDF model is read here (the plugin's data must
/// be loaded: `verify` did).
fn port_layout_problem(p: &lilv::plugin::Plugin) -> Option<String> {
    let w = world();
    let subject = p.uri();
    let (port, index, symbol) = (
        w.new_uri(&format!("{LV2}port")),
        w.new_uri(&format!("{LV2}index")),
        w.new_uri(&format!("{LV2}symbol")),
    );
    let mut seen: Vec<(i64, String)> = Vec::new();
    for node in w.find_nodes(Some(&subject), &port, None).iter() {
        if !(node.is_uri() || node.is_blank()) {
            return Some("an lv2:port is a literal, not a port".into());
        }
        let symbols: Vec<String> = w
            .find_nodes(Some(&node), &symbol, None)
            .iter()
            .filter(|n| n.is_string())
            .filter_map(|n| n.as_str().map(str::to_string))
            .collect();
        let name = match symbols.as_slice() {
            [s] if is_symbol(s) => s.clone(),
            [s] => return Some(format!("port symbol '{s}' is not a valid lv2:symbol")),
            [] => return Some("a port has no lv2:symbol".into()),
            _ => return Some("a port has more than one lv2:symbol".into()),
        };
        let indices: Vec<lilv::node::Node> =
            w.find_nodes(Some(&node), &index, None).iter().collect();
        let i = match indices.as_slice() {
            [n] => match n.as_int() {
                Some(i) if i >= 0 => i64::from(i),
                _ => {
                    return Some(format!(
                        "port '{name}' has an lv2:index that is not a whole number ≥ 0"
                    ))
                }
            },
            [] => return Some(format!("port '{name}' has no lv2:index")),
            _ => return Some(format!("port '{name}' has more than one lv2:index")),
        };
        seen.push((i, name));
    }
    // Sorted by index, then symbol, so that the message is the same on every run.
    seen.sort_unstable();
    if let Some(w) = seen.windows(2).find(|w| w[0].0 == w[1].0) {
        return Some(format!(
            "ports '{}' and '{}' both have lv2:index {}",
            w[0].1, w[1].1, w[0].0
        ));
    }
    // Distinct indices below n are exactly 0..n: the first one at or past n leaves a gap.
    let n = seen.len() as i64;
    seen.iter().find(|(i, _)| *i >= n).map(|(i, name)| {
        format!(
            "port '{name}' has lv2:index {i}, but the plugin has {n} ports: indices must run 0..{} without a gap",
            n - 1
        )
    })
}

/// The plugin's name: the first string `doap:name` (lilv's `lilv_plugin_get_name` returns
/// null without one, and the `lilv` crate's `Plugin::name` unwraps that).
fn plugin_name(p: &lilv::plugin::Plugin) -> Option<String> {
    p.value(&world().new_uri(DOAP_NAME))
        .iter()
        .find(|n| n.is_string())
        .and_then(|n| n.as_str().map(str::to_string))
}

/// Everything `plugins list` and the host need of `p`. Data that lilv's verification
/// refuses, or whose ports are laid out so that lilv would connect them wrongly, makes the
/// plugin unhostable with the reason; its ports are then not read (`ports` is empty), and
/// it is never instantiated. Only calls that cannot panic on hostile data are made: the
/// `lilv` crate unwraps null returns in `Plugin::name` (a plugin without `doap:name`).
fn describe(p: &lilv::plugin::Plugin) -> PluginDesc {
    let uri = p.uri().as_uri().unwrap_or_default().to_string();
    let verified = p.verify();
    let name = plugin_name(p);
    let refused = if verified {
        name.is_none()
            .then(|| "it has no doap:name that is a string".to_string())
    } else {
        Some(verify_failure(p))
    }
    .or_else(|| port_layout_problem(p));
    let name = name.unwrap_or_else(|| uri.clone());
    // Never null: lilv falls back to lv2:Plugin, and makes no class without a label.
    let class = p.class().label().as_str().unwrap_or("Plugin").to_string();
    if let Some(why) = refused {
        return PluginDesc {
            uri,
            name,
            class,
            ports: Vec::new(),
            required_features: Vec::new(),
            latency_port: None,
            unhostable: Some(why),
        };
    }
    let w = world();
    let node = |s: &str| w.new_uri(s);
    let (audio, control, cv, atom) = (
        node(&format!("{LV2}AudioPort")),
        node(&format!("{LV2}ControlPort")),
        node(&format!("{LV2}CVPort")),
        node(&format!("{ATOM}AtomPort")),
    );
    let (input, optional) = (
        node(&format!("{LV2}InputPort")),
        node(&format!("{LV2}connectionOptional")),
    );
    let (integer, toggled) = (
        node(&format!("{LV2}integer")),
        node(&format!("{LV2}toggled")),
    );
    let (buffer_type, sequence) = (
        node(&format!("{ATOM}bufferType")),
        node(&format!("{ATOM}Sequence")),
    );
    let ranges = p.port_ranges_float();
    let mut ports = Vec::new();
    for port in p.iter_ports() {
        let index = port.index();
        let is_sequence = port
            .value(&buffer_type)
            .iter()
            .any(|n| n.as_uri() == sequence.as_uri());
        let (kind, unsupported_class) = if port.is_a(&audio) {
            (PortKind::Audio, None)
        } else if port.is_a(&control) {
            (PortKind::Control, None)
        } else if port.is_a(&cv) {
            (PortKind::Cv, None)
        } else if port.is_a(&atom) && is_sequence {
            (PortKind::AtomSequence, None)
        } else {
            let classes: Vec<String> = port
                .classes()
                .iter()
                .filter_map(|n| n.as_uri().map(str::to_string))
                .filter(|u| !u.ends_with("#InputPort") && !u.ends_with("#OutputPort"))
                .collect();
            (
                PortKind::Unsupported,
                Some(classes.join(" ")).filter(|s| !s.is_empty()),
            )
        };
        let r = ranges.get(index);
        let finite = |v: f32| Some(v).filter(|v| v.is_finite());
        let control_range = kind == PortKind::Control;
        ports.push(PortDesc {
            index,
            symbol: port
                .symbol()
                .and_then(|n| n.as_str().map(str::to_string))
                .unwrap_or_else(|| format!("port{index}")),
            name: port
                .name()
                .and_then(|n| n.as_str().map(str::to_string))
                .unwrap_or_default(),
            kind,
            input: port.is_a(&input),
            optional: port.has_property(&optional),
            default: r.filter(|_| control_range).and_then(|r| finite(r.default)),
            minimum: r.filter(|_| control_range).and_then(|r| finite(r.min)),
            maximum: r.filter(|_| control_range).and_then(|r| finite(r.max)),
            steps: match r.filter(|_| control_range) {
                Some(_) if port.has_property(&toggled) => Some(1),
                Some(r) if port.has_property(&integer) && (r.max - r.min).is_finite() => {
                    Some((r.max - r.min).round().max(1.0) as u32)
                }
                _ => None,
            },
            unsupported_class,
        });
    }
    let required_features: Vec<String> = p
        .required_features()
        .iter()
        .filter_map(|n| n.as_uri().map(str::to_string))
        .collect();
    let unhostable = required_features
        .iter()
        .find(|f| !SUPPORTED_FEATURES.contains(&f.as_str()))
        .map(|f| format!("needs the feature {f}, which xrunlab does not provide"))
        .or_else(|| {
            ports
                .iter()
                .find(|p| p.kind == PortKind::Unsupported && !p.optional)
                .map(|p| {
                    format!(
                        "port '{}' is of a type xrunlab does not connect ({})",
                        p.symbol,
                        p.unsupported_class.as_deref().unwrap_or("no known class")
                    )
                })
        });
    PluginDesc {
        uri,
        name,
        class,
        latency_port: p.latency_port_index(),
        ports,
        required_features,
        unhostable,
    }
}

/// Every installed plugin, sorted by URI.
pub fn list() -> Vec<PluginDesc> {
    let mut v: Vec<PluginDesc> = world().plugins().iter().map(|p| describe(&p)).collect();
    v.sort_by(|a, b| a.uri.cmp(&b.uri));
    v
}

/// Plugins whose URI or name contains `filter` (case-insensitive).
pub fn filter(filter: &str) -> Vec<PluginDesc> {
    let f = filter.to_lowercase();
    list()
        .into_iter()
        .filter(|d| d.uri.to_lowercase().contains(&f) || d.name.to_lowercase().contains(&f))
        .collect()
}

/// The last segment of a URI: what follows its last `/`, `#` or `:`.
fn tail(uri: &str) -> &str {
    uri.rsplit(['/', '#', ':']).next().unwrap_or(uri)
}

/// Find a plugin by URI, by name, or by the last segment of its URI (all case-insensitive
/// but the URI). An unknown or ambiguous target is the user's mistake (exit 2), named with
/// the closest installed plugins.
pub fn resolve(target: &str) -> Result<(lilv::plugin::Plugin, PluginDesc)> {
    let all = world().plugins();
    // Compared as strings: lilv's new_uri aborts on text that is not a valid URI.
    if let Some(p) = all.iter().find(|p| p.uri().as_uri() == Some(target)) {
        let d = describe(&p);
        return Ok((p, d));
    }
    let t = target.to_lowercase();
    let by = |pred: &dyn Fn(&PluginDesc) -> bool| -> Vec<(lilv::plugin::Plugin, PluginDesc)> {
        all.iter()
            .map(|p| {
                let d = describe(&p);
                (p, d)
            })
            .filter(|(_, d)| pred(d))
            .collect()
    };
    for found in [
        by(&|d| d.name.to_lowercase() == t),
        by(&|d| tail(&d.uri).to_lowercase() == t),
    ] {
        match found.len() {
            0 => continue,
            1 => return Ok(found.into_iter().next().unwrap()),
            _ => {
                let uris: Vec<String> = found.iter().map(|(_, d)| d.uri.clone()).collect();
                return Err(Error::usage(format!(
                    "lv2:{target} names {} installed plugins; use the URI: {}",
                    uris.len(),
                    uris.join(", ")
                )));
            }
        }
    }
    let close = closest(target, &list(), 5);
    Err(Error::usage(if close.is_empty() {
        format!(
            "no installed LV2 plugin is called '{target}' (none found on LV2_PATH; `xrunlab plugins list --lv2` lists them)"
        )
    } else {
        format!(
            "no installed LV2 plugin is called '{target}'; closest: {} (`xrunlab plugins list --lv2` lists them all)",
            close.join(", ")
        )
    }))
}

/// The `n` installed plugins whose name or URI tail is nearest to `target`: substring
/// matches first, then by edit distance.
fn closest(target: &str, all: &[PluginDesc], n: usize) -> Vec<String> {
    let t = target.to_lowercase();
    let mut scored: Vec<(usize, &PluginDesc)> = all
        .iter()
        .map(|d| {
            let (name, tl) = (d.name.to_lowercase(), tail(&d.uri).to_lowercase());
            let score = if name.contains(&t) || d.uri.to_lowercase().contains(&t) {
                0
            } else {
                1 + edit_distance(&t, &name).min(edit_distance(&t, &tl))
            };
            (score, d)
        })
        .collect();
    scored.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.uri.cmp(&b.1.uri)));
    let limit = 1 + t.len() / 2;
    scored
        .into_iter()
        .filter(|(s, _)| *s <= limit)
        .take(n)
        .map(|(_, d)| format!("{} ({})", d.uri, d.name))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tails() {
        assert_eq!(tail("http://plugin.org.uk/swh-plugins/amp"), "amp");
        assert_eq!(tail("urn:dragonfly:room"), "room");
        assert_eq!(tail("http://x/y#Stereo"), "Stereo");
    }
}
