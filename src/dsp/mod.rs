//! Plugins (docs/ARCHITECTURE.md §2 `dsp/`): the contract the engine runs them through, the
//! plugin formats that make them (`format.rs`, `registry.rs`: the built-ins, LV2) and the
//! chain elements that name them.
//!
//! A plugin processes one stereo block in place. `process` runs on a real-time thread:
//! it must not allocate, lock, block or do I/O (docs/ARCHITECTURE.md §5); everything it needs is
//! allocated in its constructor for the largest block it will see.

pub mod builtin;
pub mod burn;
pub mod clap;
pub mod contain;
pub mod denormal;
pub mod fdn;
pub mod files;
pub mod filterbank;
pub mod format;
pub mod lv2;
pub mod osc;
pub mod plugin_cost;
pub mod registry;
pub mod reverb;
pub mod vst3;

use crate::error::{Error, Result};

/// The most plugin instances one track's chain may hold in series (a chain element's count,
/// the sum over a chain, `plugins bench --instances`). A track runs its chain in series within
/// one period, and past this a chain measures nothing but memory and patience: at 64 frames and
/// 48 kHz (1.33 ms) each of 4096 instances would have 0.33 µs, about what calling a plugin and
/// copying its ports costs; 4096 reverb-heavy instances hold about 2 GB; and an LV2 instance
/// such as ZamComp takes ~0.2 ms and ~50 kB to create, so a typo of 100000 would spend
/// 20 s and 5 GB per track before the first cycle.
pub const MAX_INSTANCES: u32 = 4096;

/// Refuse a chain of more than [`MAX_INSTANCES`] instances per track, naming the cap (exit 2),
/// before anything is instantiated. A cost-modelled (`sim`) run instantiates one of each
/// element whatever the count, and does not ask.
pub fn check_chain_size(chain: &[ChainElement]) -> Result<()> {
    let total: u64 = chain.iter().map(|e| u64::from(e.count)).sum();
    if total <= u64::from(MAX_INSTANCES) {
        return Ok(());
    }
    let text: Vec<String> = chain.iter().map(ChainElement::to_string).collect();
    Err(Error::usage(format!(
        "the chain '{}' holds {total} plugin instances per track; at most {MAX_INSTANCES} are allowed (a track runs them in series within one period: more cannot meet any deadline and only take memory and time to create)",
        text.join(",")
    )))
}

/// What a plugin needs to know when it is created.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PluginContext {
    /// Sample rate in Hz.
    pub rate: u32,
    /// The largest block `process` will be called with (the driver's buffer size).
    pub max_frames: usize,
}

impl PluginContext {
    /// Duration of one block of `max_frames`, in nanoseconds.
    pub fn period_ns(&self) -> u64 {
        self.max_frames as u64 * 1_000_000_000 / self.rate as u64
    }
}

pub trait Plugin: Send {
    /// Process `left.len()` (== `right.len()` <= max_frames) frames in place. Real-time safe.
    fn process(&mut self, left: &mut [f32], right: &mut [f32]);
    /// Start a note / tone now (synths); others ignore it. Real-time safe.
    fn note_on(&mut self) {}
    /// Stop a note / tone (synths); others ignore it. Real-time safe.
    fn note_off(&mut self) {}
    /// The latency the plugin reports (as its format defines it, e.g. an LV2 latency port), in
    /// frames; `None` when it reports none. Not called in the cycle.
    fn latency_frames(&self) -> Option<u32> {
        None
    }
    /// Set the control input `index` (a control-input port's index in the plugin's
    /// [`format::PluginDesc`]) to `value`, as a host moving a parameter between blocks does;
    /// false when the plugin cannot (the built-ins). Real-time safe. Used by `plugins audit`.
    fn set_control(&mut self, _index: usize, _value: f32) -> bool {
        false
    }
    /// The plugin's whole state (controls and what it keeps inside) as bytes that
    /// [`Plugin::restore_state`] of a fresh instance of the same plugin reads back; `None`
    /// when the plugin has none to offer (a CLAP plugin without `clap.state`, the built-ins;
    /// an LV2 plugin's state is at least its controls). Not real-time. Used by `plugins audit`.
    fn save_state(&mut self) -> Option<Result<Vec<u8>>> {
        None
    }
    /// Restore what [`Plugin::save_state`] gave; `None` when the plugin offers no state.
    fn restore_state(&mut self, _state: &[u8]) -> Option<Result<()>> {
        None
    }
}

// The result schema carries this doc text (schema/result.schema.json): other formats' elements
// follow LV2's form with their own prefix (`format::PluginFormat::parse_element`).
/// One element of a chain as typed on the CLI: `name[(params)][:count]`, or
/// `lv2:URI[(symbol=value,…)][:count]` / `lv2:NAME…` for an installed LV2 plugin.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct ChainElement {
    /// Plugin name, e.g. `reverb-heavy`, `burn`, `lv2:urn:zamaudio:ZamComp`.
    pub plugin: String,
    /// Plugin parameter text, e.g. `30%` for `burn(30%)`; empty when none.
    #[serde(default)]
    pub params: String,
    /// Number of instances in series.
    pub count: u32,
}

/// The element as it is typed, `parse_chain`'s inverse: `plugin[(params)][:count]`. An
/// installed plugin's identifier that itself ends in `:DIGITS` keeps an explicit count, or it
/// would read as one.
impl std::fmt::Display for ChainElement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.plugin)?;
        if !self.params.is_empty() {
            write!(f, "({})", self.params)?;
        }
        let ends_in_count = self.params.is_empty()
            && registry::installed_format(&self.plugin).is_some()
            && self.plugin.rsplit_once(':').is_some_and(|(_, c)| {
                !c.is_empty() && c.trim().chars().all(|ch| ch.is_ascii_digit())
            });
        if self.count != 1 || ends_in_count {
            write!(f, ":{}", self.count)?;
        }
        Ok(())
    }
}

/// Parse `--chain reverb-heavy:4,gain,burn(30%)` into elements. Plugin names are checked
/// when the chain is instantiated.
pub fn parse_chain(s: &str) -> Result<Vec<ChainElement>> {
    let mut out = Vec::new();
    let bad = |p: &str, why: &str| {
        Error::usage(format!(
            "bad chain element '{p}' in '{s}': {why} (expected plugin[(params)][:count], e.g. reverb-heavy:4,burn(30%),gain)"
        ))
    };
    // Split on commas outside parentheses. A ')' without '(' leaves the depth at 0, so the
    // element holding it is the one named.
    let mut depth = 0u32;
    let mut start = 0;
    let mut parts = Vec::new();
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    for part in parts.into_iter().map(str::trim) {
        if part.is_empty() {
            return Err(bad(part, "empty element"));
        }
        let (format, target) = registry::format_of(part);
        out.push(
            format
                .parse_element(target)
                .map_err(|why| bad(part, &why))?,
        );
    }
    Ok(out)
}

/// `NAME(params)` or `NAME` as (name, params), each trimmed. The parameters run from the
/// first '(' to the last ')', so that a parameter may hold parentheses; text after that ')'
/// is named (`burn(10%)x` is not an unclosed parenthesis).
fn name_and_params(head: &str) -> std::result::Result<(&str, &str), String> {
    match head.split_once('(') {
        Some((name, _)) if name.contains(')') => Err("')' without '('".into()),
        Some((name, rest)) => match rest.rsplit_once(')') {
            Some((params, after)) if after.trim().is_empty() => Ok((name.trim(), params.trim())),
            Some((_, after)) => Err(format!("'{}' after the closing parenthesis", after.trim())),
            None => Err("unclosed parenthesis".into()),
        },
        None if head.contains(')') => Err("')' without '('".into()),
        None => Ok((head.trim(), "")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_parse() {
        let c = parse_chain("reverb-heavy:4,gain,burn(30%):2").unwrap();
        assert_eq!(c.len(), 3);
        assert_eq!(c[0].plugin, "reverb-heavy");
        assert_eq!(c[0].count, 4);
        assert_eq!(c[1].count, 1);
        assert_eq!(c[2].params, "30%");
        assert_eq!(c[2].count, 2);
        for bad in ["", "a,,b", "x:0", "x:y", "burn(30%", "re verb"] {
            assert!(parse_chain(bad).is_err(), "{bad}");
        }
        // A ')' without '(' is named in its own element; text after ')' is named.
        for (bad, why) in [
            ("burn(10%)x", "'x' after the closing parenthesis"),
            ("gain),burn(5%)", "')' without '('"),
        ] {
            let e = parse_chain(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn elements_print_as_they_are_typed() {
        for text in ["reverb-heavy:4", "burn(30%):2", "gain"] {
            let c = parse_chain(text).unwrap();
            assert_eq!(c[0].to_string(), text);
        }
    }
}
