//! The plugin formats, one line each, and plugin names → instances. `plugins list`, the
//! engine, the results and the load search all go through here, so a plugin exists
//! everywhere once its format is registered.

pub use super::builtin::PluginInfo;
// Renamed: the layer check reads `clap::` outside the CLI as the command-line crate.
use super::clap as clap_format;
use super::format::{PluginDesc, PluginFormat, PluginRecord};
use super::{ChainElement, Plugin, PluginContext};
use crate::error::{Error, Result};

/// Every plugin format, one line each. The built-ins claim what no prefix does.
const FORMATS: &[&dyn PluginFormat] = &[
    &super::builtin::Builtin,
    &super::lv2::Lv2,
    &clap_format::Clap,
    &super::vst3::Vst3,
];

/// Every format, in registration order.
pub fn formats() -> impl Iterator<Item = &'static dyn PluginFormat> {
    FORMATS.iter().copied()
}

/// The format a chain element's plugin (or a typed chain element) belongs to, and the text
/// after its prefix: the longest prefix that matches, so the built-ins' empty one is the
/// fallback.
pub fn format_of(plugin: &str) -> (&'static dyn PluginFormat, &str) {
    let f = formats()
        .filter(|f| plugin.starts_with(f.prefix()))
        .max_by_key(|f| f.prefix().len())
        .unwrap_or(FORMATS[0]);
    (f, &plugin[f.prefix().len()..])
}

/// The format of installed plugins that `plugin` names by its prefix, and the text after it;
/// `None` for a built-in.
pub fn installed_format(plugin: &str) -> Option<(&'static dyn PluginFormat, &str)> {
    Some(format_of(plugin)).filter(|(f, _)| !f.prefix().is_empty())
}

/// The format of installed plugins that `plugins list --KEY` selects.
pub fn by_key(key: &str) -> Option<&'static dyn PluginFormat> {
    formats().find(|f| !f.key().is_empty() && f.key() == key)
}

/// The installed plugin `target` names, with its format: by the format its prefix names, or
/// without a prefix the first format that knows it (the first one's error if none does).
pub fn describe(target: &str) -> Result<(&'static dyn PluginFormat, PluginDesc)> {
    if let Some((f, t)) = installed_format(target) {
        return Ok((f, f.describe(t).map_err(|e| name_closest(f, t, e))?));
    }
    let mut first_error = None;
    for f in formats().filter(|f| !f.prefix().is_empty()) {
        match f.describe(target) {
            Ok(d) => return Ok((f, d)),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    Err(first_error.unwrap_or_else(|| Error::usage(format!("no plugin is called '{target}'"))))
}

/// The chain elements of every hostable installed plugin of the format `key`, and the others
/// as `element: why it cannot be hosted` (`plugins bench --all KEY`).
pub fn all_of(key: &str) -> Result<(Vec<String>, Vec<String>)> {
    let f = by_key(key).ok_or_else(|| {
        let known: Vec<&str> = formats()
            .filter(|f| !f.key().is_empty())
            .map(|f| f.key())
            .collect();
        Error::usage(format!(
            "--all {key}: no such plugin format; known are {}",
            known.join(", ")
        ))
    })?;
    Ok(split_hostable(f, f.list(None)))
}

/// The installed plugins of the files in the folder `dir` (for the formats that can say so
/// of a folder: CLAP, VST3), as [`all_of`] gives them; a usage error for a folder no format knows.
pub fn in_dir(dir: &std::path::Path) -> Result<(Vec<String>, Vec<String>)> {
    for f in formats() {
        if let Some(found) = f.in_dir(dir) {
            return Ok(split_hostable(f, found));
        }
    }
    Err(Error::usage(format!(
        "{}: no CLAP plugin file (*.clap) or VST3 bundle (*.vst3) in this folder; a folder of LV2 bundles is searched through LV2_PATH (`plugins bench --all lv2`)",
        dir.display()
    )))
}

fn split_hostable(f: &dyn PluginFormat, found: Vec<PluginDesc>) -> (Vec<String>, Vec<String>) {
    let (mut ok, mut not) = (Vec::new(), Vec::new());
    for d in found {
        let element = format!("{}{}", f.prefix(), d.uri);
        match d.unhostable {
            None => ok.push(element),
            Some(why) => not.push(format!("{element}: cannot be hosted: {why}")),
        }
    }
    (ok, not)
}

/// The built-in plugins, in registration order (what `plugins list` shows).
pub fn list() -> impl Iterator<Item = &'static PluginInfo> {
    super::builtin::list()
}

/// Create one instance of a plugin by name.
pub fn create(name: &str, params: &str, ctx: &PluginContext) -> Result<Box<dyn Plugin>> {
    let (f, target) = format_of(name);
    f.instantiate(target, params, ctx)
        .map_err(|e| name_closest(f, target, e))
}

/// `e` as it was, unless it is `f`'s "no such plugin" ([`super::format::unknown_message`]):
/// then with the closest installed plugins of every format after it (a CLAP user may have
/// meant the LV2 build of the same plugin).
fn name_closest(f: &dyn PluginFormat, target: &str, e: Error) -> Error {
    let unknown = super::format::unknown_message(f.title(), target);
    if e.kind() != crate::error::ErrorKind::Usage {
        return e;
    }
    e.map_message(|m| {
        if m != unknown {
            return m;
        }
        let close = closest_everywhere(target);
        if close.is_empty() {
            format!("{m} (`xrunlab plugins list --{}` lists them)", f.key())
        } else {
            format!(
                "{m}; closest: {} (`xrunlab plugins list` lists them all)",
                close.join(", ")
            )
        }
    })
}

/// The installed plugins of every format nearest to `target`, as `PREFIX:ID (NAME)`:
/// substring matches first, then by edit distance.
fn closest_everywhere(target: &str) -> Vec<String> {
    let t = target.to_lowercase();
    let tail = |id: &str| {
        id.rsplit(['/', '#', ':', '.'])
            .next()
            .unwrap_or(id)
            .to_lowercase()
    };
    let mut scored: Vec<(usize, String)> = Vec::new();
    for f in formats().filter(|f| !f.prefix().is_empty()) {
        for d in f.list(None) {
            let name = d.name.to_lowercase();
            let score = if name.contains(&t) || d.uri.to_lowercase().contains(&t) {
                0
            } else {
                1 + crate::units::edit_distance(&t, &name)
                    .min(crate::units::edit_distance(&t, &tail(&d.uri)))
            };
            scored.push((score, format!("{}{} ({})", f.prefix(), d.uri, d.name)));
        }
    }
    scored.sort();
    let limit = 1 + t.len() / 2;
    scored
        .into_iter()
        .filter(|(s, _)| *s <= limit)
        .take(5)
        .map(|(_, s)| s)
        .collect()
}

/// What a result records of the plugins of `chain`, each by its format (the built-ins record
/// none), with the latency each element reported (`latencies` is per chain element, as the
/// engine measured them).
pub fn records(chain: &[ChainElement], latencies: &[Option<u32>]) -> Vec<PluginRecord> {
    chain
        .iter()
        .zip(latencies.iter().chain(std::iter::repeat(&None)))
        .filter_map(|(e, lat)| {
            let (f, target) = format_of(&e.plugin);
            f.record(e, target, *lat)
        })
        .collect()
}

/// How long instantiating a chain goes on after a Ctrl-C. A set-up shorter than this
/// finishes, and the measurement after it stops at its first check and writes its
/// (interrupted) result; a longer one (thousands of installed plugins' instances, plugins that load samples)
/// is given up, since nothing has been measured yet.
pub const SETUP_PATIENCE_NS: u64 = 500_000_000;

/// Instantiate a whole chain (each element `count` times, in series). A chain longer than
/// [`super::MAX_INSTANCES`] is refused before anything is made (exit 2); a Ctrl-C during a
/// long set-up ends it with [`Error::Aborted`] (exit 3).
pub fn create_chain(chain: &[ChainElement], ctx: &PluginContext) -> Result<Vec<Box<dyn Plugin>>> {
    super::check_chain_size(chain)?;
    let total: usize = chain.iter().map(|e| e.count as usize).sum();
    let t0 = crate::rt::clock::monotonic_ns();
    let mut out = Vec::with_capacity(total);
    for e in chain {
        for _ in 0..e.count {
            if crate::rt::interrupt::requested()
                && crate::rt::clock::monotonic_ns().saturating_sub(t0) > SETUP_PATIENCE_NS
            {
                return Err(Error::Aborted(format!(
                    "interrupted while instantiating the chain ({} of {total} instances made); nothing was measured",
                    out.len()
                )));
            }
            out.push(create(&e.plugin, &e.params, ctx)?);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_known_and_rejects_unknown() {
        let ctx = PluginContext {
            rate: 48000,
            max_frames: 64,
        };
        let chain = super::super::parse_chain("gain(0.5):2,thru").unwrap();
        let mut plugins = create_chain(&chain, &ctx).unwrap();
        assert_eq!(plugins.len(), 3);
        let (mut l, mut r) = (vec![1.0f32; 64], vec![1.0f32; 64]);
        for p in plugins.iter_mut() {
            p.process(&mut l, &mut r);
        }
        assert_eq!(l[0], 0.25);
        let e = create("nope", "", &ctx).err().unwrap();
        assert!(e.to_string().contains("available are"));
        assert!(create("thru", "3", &ctx).is_err());
        assert!(create("gain", "x", &ctx).is_err());
    }
}
