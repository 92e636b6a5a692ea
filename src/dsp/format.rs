//! The plugin-format interface (docs/ARCHITECTURE.md §2 `dsp/`): what every kind of plugin the
//! engine can run offers — its chain-element prefix, a listing of what is installed, a
//! description with ports and required features, instantiation for a rate and block size, and
//! what a result records of it. The built-ins (`builtin.rs`) and LV2 (`lv2/`) implement it;
//! `registry.rs` holds one line per format, and everything above `dsp` goes through there,
//! so that a new format is a folder and a line.

use super::{name_and_params, ChainElement, Plugin, PluginContext};
use crate::error::Result;

/// One plugin format. Implementations are stateless values in the registry's slice; whatever
/// they cache (a plugin world, resolved plugins) is theirs to keep.
pub trait PluginFormat: Sync {
    /// What the chain element starts with to name this format's plugins (`lv2:`); empty for
    /// the built-ins, which own every element no other prefix claims.
    fn prefix(&self) -> &'static str;

    /// The short name `plugins list --KEY` selects it by (`lv2`); empty for the built-ins.
    fn key(&self) -> &'static str;

    /// The format's name in messages (`LV2`).
    fn title(&self) -> &'static str;

    /// An identifier to show in messages that ask for one (`urn:zamaudio:ZamComp`).
    fn example(&self) -> &'static str;

    /// Where installed plugins are searched, for the message that found none.
    fn search_path(&self) -> String;

    /// The environment variable that replaces the search path (`LV2_PATH`) or comes first
    /// on it (`CLAP_PATH`): a process started with it set to a folder resolves that folder's
    /// plugins first (`plugins audit DIR`). `None` when the format has none.
    fn path_var(&self) -> Option<&'static str> {
        None
    }

    /// The installed plugins, sorted by identifier; with a filter only those whose identifier
    /// or name contains it (case-insensitive).
    fn list(&self, filter: Option<&str>) -> Vec<PluginDesc>;

    /// The plugin `target` (identifier or name, without the prefix) names. Unknown or
    /// ambiguous is the user's mistake (exit 2), named with the closest installed plugins.
    fn describe(&self, target: &str) -> Result<PluginDesc>;

    /// Parse a chain element after the prefix: `ID-or-NAME[(params)][:count]`. Identifiers
    /// hold colons (`urn:dragonfly:room`), so only a final `:DIGITS` is a count; one that
    /// itself ends in `:DIGITS` needs an explicit `:1`. The error is the reason alone: the
    /// caller names the element.
    fn parse_element(&self, target: &str) -> std::result::Result<ChainElement, String> {
        parse_prefixed(self.prefix(), self.example(), target)
    }

    /// One instance of `target` with `params`, ready for blocks of up to `ctx.max_frames` at
    /// `ctx.rate`. Its [`Plugin::latency_frames`] is the latency it reports.
    fn instantiate(
        &self,
        target: &str,
        params: &str,
        ctx: &PluginContext,
    ) -> Result<Box<dyn Plugin>>;

    /// The plugins of the files directly in the folder `dir`, each described, when the format
    /// knows such files there (`plugins bench DIR`); `None` otherwise.
    fn in_dir(&self, _dir: &std::path::Path) -> Option<Vec<PluginDesc>> {
        None
    }

    /// Its plugins are files (`.clap`, `.vst3`) that [`PluginFormat::in_dir`] finds in a
    /// folder, rather than entries of a catalogue its search path loads.
    fn plugin_files(&self) -> bool {
        false
    }

    /// What a result records of `element` (`target` is its plugin without the prefix), given
    /// the latency its first instance reported; `None` for a format whose plugins a result
    /// does not list.
    fn record(
        &self,
        element: &ChainElement,
        target: &str,
        latency_frames: Option<u32>,
    ) -> Option<PluginRecord> {
        let d = self.describe(target).ok()?;
        Some(PluginRecord {
            element: element.plugin.clone(),
            format: self.key().to_string(),
            uri: d.uri,
            name: d.name,
            instances: element.count,
            latency_frames,
        })
    }
}

/// The default [`PluginFormat::parse_element`] of a prefixed format.
fn parse_prefixed(
    prefix: &str,
    example: &str,
    target: &str,
) -> std::result::Result<ChainElement, String> {
    let (head, count) = match target.rsplit_once(':') {
        Some((h, c)) if !c.is_empty() && c.trim().chars().all(|ch| ch.is_ascii_digit()) => {
            let n: u32 = c.trim().parse().map_err(|_| "count is too large")?;
            if n == 0 {
                return Err("count must be at least 1".into());
            }
            (h.trim(), n)
        }
        _ => (target, 1),
    };
    let (name, params) = name_and_params(head)?;
    if name.is_empty() {
        return Err(format!(
            "{prefix} needs a plugin URI or name, e.g. {prefix}{example}"
        ));
    }
    Ok(ChainElement {
        plugin: format!("{prefix}{name}"),
        params: params.to_string(),
        count,
    })
}

/// The kind of data a port carries, as the host must connect it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PortKind {
    Audio,
    Control,
    Cv,
    /// Events in or out: MIDI, patch messages (LV2: an atom port whose buffer is an
    /// `atom:Sequence`).
    AtomSequence,
    /// Anything else (LV2: an atom port of another buffer type, the old event extension):
    /// the format's class name says what.
    Unsupported,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct PortDesc {
    pub index: usize,
    pub symbol: String,
    pub name: String,
    pub kind: PortKind,
    pub input: bool,
    /// The plugin copes with an unconnected port (LV2: lv2:connectionOptional).
    pub optional: bool,
    pub default: Option<f32>,
    pub minimum: Option<f32>,
    pub maximum: Option<f32>,
    /// A control that takes whole steps only, this many from `minimum` to `maximum` (1 for a
    /// switch; LV2 lv2:integer or lv2:toggled, CLAP's stepped flag, VST3's stepCount), so
    /// that the audit moves it to values the plugin can hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<u32>,
    /// The first class URI that made the port unsupported, for the error message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsupported_class: Option<String>,
}

impl PortDesc {
    /// A port that carries a signal or events (no range), named by its symbol.
    pub fn signal(index: usize, symbol: String, kind: PortKind, input: bool) -> Self {
        PortDesc {
            index,
            name: symbol.clone(),
            symbol,
            kind,
            input,
            optional: false,
            default: None,
            minimum: None,
            maximum: None,
            steps: None,
            unsupported_class: None,
        }
    }

    /// The valid range as text, e.g. `0..=1`, for messages and `plugins show`.
    pub fn range_text(&self) -> String {
        let f = |v: Option<f32>| v.map(|v| format!("{v}")).unwrap_or_default();
        format!("{}..={}", f(self.minimum), f(self.maximum))
    }
}

/// One plugin as its format describes it: what `plugins list` and `plugins show` print (their
/// JSON is this struct), and what the host checks before it instantiates.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct PluginDesc {
    /// The format's identifier of the plugin (LV2: its URI; built-ins: their name).
    pub uri: String,
    pub name: String,
    pub class: String,
    pub ports: Vec<PortDesc>,
    pub required_features: Vec<String>,
    /// Index of the port that reports the plugin's latency in frames (formats that report it
    /// through a port).
    pub latency_port: Option<usize>,
    /// Why xrunlab cannot host it; `None` when it can.
    pub unhostable: Option<String>,
}

impl PluginDesc {
    pub fn count(&self, kind: PortKind, input: bool) -> usize {
        self.ports
            .iter()
            .filter(|p| p.kind == kind && p.input == input)
            .count()
    }

    /// The one-word summary `plugins list` shows, e.g. `2→2 audio, 3 control, 1 atom in`.
    pub fn ports_summary(&self) -> String {
        let mut s = format!(
            "{}→{} audio",
            self.count(PortKind::Audio, true),
            self.count(PortKind::Audio, false)
        );
        let controls = self.count(PortKind::Control, true);
        if controls > 0 {
            s += &format!(", {controls} control");
        }
        let (ai, ao) = (
            self.count(PortKind::AtomSequence, true),
            self.count(PortKind::AtomSequence, false),
        );
        if ai + ao > 0 {
            s += &format!(", {ai}/{ao} atom in/out");
        }
        let cv = self.count(PortKind::Cv, true) + self.count(PortKind::Cv, false);
        if cv > 0 {
            s += &format!(", {cv} cv");
        }
        s
    }

    /// An instrument: MIDI in through an atom sequence and no audio input.
    pub fn is_instrument(&self) -> bool {
        self.count(PortKind::AtomSequence, true) > 0 && self.count(PortKind::Audio, true) == 0
    }
}

/// What a result records of each plugin of its chain that a format of installed plugins
/// (LV2, CLAP, VST3) provides; the built-ins record none.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct PluginRecord {
    /// The element as typed, e.g. `lv2:urn:dragonfly:room`.
    pub element: String,
    /// The format's key: `lv2`, `clap` or `vst3`.
    pub format: String,
    /// The format's identifier of the plugin (LV2: its URI; CLAP: its id; VST3: its class id).
    pub uri: String,
    pub name: String,
    /// Instances of it in series in each track.
    pub instances: u32,
    /// The latency the plugin reported after the first block, in frames (`None`: the plugin
    /// reports none).
    pub latency_frames: Option<u32>,
}

/// What a format's resolver says of a plugin `target` it has no plugin called: the registry
/// recognises it and names the closest installed plugins of every format after it
/// (`registry::name_closest`; a format cannot ask the registry itself, which lists it).
pub fn unknown_message(title: &str, target: &str) -> String {
    format!("no installed {title} plugin is called '{target}'")
}

/// A plugin's output channels onto the engine's stereo pair for `n` frames: a mono output
/// to both sides, the first two of more; added to what is there when the plugin is an
/// instrument layered on the chain (`adds`), else replacing it. Real-time: no allocation.
pub fn to_stereo<C: AsRef<[f32]>>(
    outs: &[C],
    left: &mut [f32],
    right: &mut [f32],
    n: usize,
    adds: bool,
) {
    match outs {
        [] => {}
        [mono] if adds => {
            let mono = mono.as_ref();
            for ((m, l), r) in mono.iter().zip(left.iter_mut()).zip(right.iter_mut()) {
                *l += m;
                *r += m;
            }
        }
        [mono] => {
            let mono = mono.as_ref();
            left[..n].copy_from_slice(&mono[..n]);
            right[..n].copy_from_slice(&mono[..n]);
        }
        [a, b, ..] if adds => {
            for (l, s) in left.iter_mut().zip(a.as_ref().iter()) {
                *l += s;
            }
            for (r, s) in right.iter_mut().zip(b.as_ref().iter()) {
                *r += s;
            }
        }
        [a, b, ..] => {
            left[..n].copy_from_slice(&a.as_ref()[..n]);
            right[..n].copy_from_slice(&b.as_ref()[..n]);
        }
    }
}
