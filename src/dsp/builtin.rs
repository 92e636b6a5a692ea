//! The built-in plugins (reverb, burn, sine, gain, …) as a plugin format without a prefix: a
//! chain element that no other format's prefix claims names one of them.

use super::format::{PluginDesc, PluginFormat, PluginRecord, PortDesc, PortKind};
use super::{name_and_params, ChainElement, Plugin, PluginContext};
use crate::error::{Error, Result};

/// What `plugins list` shows.
#[derive(Debug, Clone, Copy)]
pub struct PluginInfo {
    pub name: &'static str,
    pub description: &'static str,
    /// Parameter syntax, empty when the plugin takes none.
    pub params: &'static str,
}

type Ctor = fn(&str, &PluginContext) -> Result<Box<dyn Plugin>>;

fn no_params(name: &str, params: &str) -> Result<()> {
    if params.is_empty() {
        Ok(())
    } else {
        Err(Error::usage(format!(
            "plugin '{name}' takes no parameters, got '({params})'"
        )))
    }
}

/// Unity gain: the identity with a multiply, for overhead baselines.
struct Gain(f32);

impl Plugin for Gain {
    fn process(&mut self, left: &mut [f32], right: &mut [f32]) {
        for s in left.iter_mut().chain(right.iter_mut()) {
            *s *= self.0;
        }
    }
}

/// Passes audio untouched: measures pure engine overhead.
struct Thru;

impl Plugin for Thru {
    fn process(&mut self, _left: &mut [f32], _right: &mut [f32]) {}
}

const BUILTINS: &[(PluginInfo, Ctor)] = &[
    (
        PluginInfo {
            name: "burn",
            description: "busy work calibrated to a share of the period (synthetic DSP load)",
            params: "burn(PERCENT)",
        },
        super::burn::Burn::from_params,
    ),
    (
        PluginInfo {
            name: "hang",
            description: "TEST ONLY: never returns from process (exercises the watchdog)",
            params: "",
        },
        |p, _| {
            no_params("hang", p)?;
            Ok(Box::new(super::burn::Hang))
        },
    ),
    (
        PluginInfo {
            name: "gain",
            description: "multiplies by a gain (default 1.0 = unity)",
            params: "gain(FACTOR)",
        },
        |p, _| {
            let g = if p.is_empty() {
                1.0
            } else {
                p.parse::<f32>()
                    .ok()
                    .filter(|g| g.is_finite())
                    .ok_or_else(|| Error::usage(format!("gain: bad factor '{p}'")))?
            };
            Ok(Box::new(Gain(g)))
        },
    ),
    (
        PluginInfo {
            name: "thru",
            description: "passes audio through untouched (engine overhead baseline)",
            params: "",
        },
        |p, _| {
            no_params("thru", p)?;
            Ok(Box::new(Thru))
        },
    ),
    (
        PluginInfo {
            name: "reverb",
            description: "FDN reverb equivalent to Faust's re.fdnrev0 (reverbDesigner): N prime-power delay lines, NB-band filterbank of order BSO, Hadamard feedback",
            params: super::reverb::PARAMS_HELP,
        },
        |p, ctx| super::reverb::create(p, 8, 5, 3, ctx),
    ),
    (
        PluginInfo {
            name: "reverb-light",
            description: "reverb with N=8, NB=5, BSO=3 (Vignati et al.'s light reverbDesigner)",
            params: "reverb-light(same keys as reverb)",
        },
        |p, ctx| super::reverb::create(p, 8, 5, 3, ctx),
    ),
    (
        PluginInfo {
            name: "reverb-heavy",
            description: "reverb with N=16, NB=5, BSO=3 (Vignati et al.'s heavy reverbDesigner)",
            params: "reverb-heavy(same keys as reverb)",
        },
        |p, ctx| super::reverb::create(p, 16, 5, 3, ctx),
    ),
    (
        PluginInfo {
            name: "sine",
            description: "wavetable sine added to the signal (Topliss et al.'s tone); note_on restarts it at phase 0, note_off silences it",
            params: "sine(FREQ=440) or sine(freq=HZ,amp=0.5,gate=1)",
        },
        super::osc::create_sine,
    ),
    (
        PluginInfo {
            name: "poly",
            description: "three harmonically related wavetable oscillators (f, 2f, 3f) summed (Topliss et al.'s polyphonic tone)",
            params: "poly(FREQ=220) or poly(freq=HZ,amp=0.5,gate=1)",
        },
        super::osc::create_poly,
    ),
];

/// Every registered plugin, in registration order.
pub fn list() -> impl Iterator<Item = &'static PluginInfo> {
    BUILTINS.iter().map(|(i, _)| i)
}

/// The built-ins as a [`PluginFormat`].
pub struct Builtin;

impl PluginFormat for Builtin {
    fn prefix(&self) -> &'static str {
        ""
    }

    fn key(&self) -> &'static str {
        ""
    }

    fn title(&self) -> &'static str {
        "built-in"
    }

    fn example(&self) -> &'static str {
        "reverb-heavy"
    }

    fn search_path(&self) -> String {
        "xrunlab itself".into()
    }

    fn list(&self, filter: Option<&str>) -> Vec<PluginDesc> {
        let f = filter.map(str::to_lowercase);
        list()
            .filter(|i| f.as_ref().is_none_or(|f| i.name.contains(f.as_str())))
            .map(desc)
            .collect()
    }

    fn describe(&self, target: &str) -> Result<PluginDesc> {
        find(target).map(desc)
    }

    /// `name[(params)][:count]`: names are letters, digits, '-' and '_', so any ':' is the
    /// count's.
    fn parse_element(&self, part: &str) -> std::result::Result<ChainElement, String> {
        let (head, count) = match part.rsplit_once(':') {
            Some((h, c)) if !c.contains(')') => {
                let n: u32 = c.trim().parse().map_err(|_| "count is not a number")?;
                if n == 0 {
                    return Err("count must be at least 1".into());
                }
                (h.trim(), n)
            }
            _ => (part, 1),
        };
        let (plugin, params) = name_and_params(head)?;
        if plugin.is_empty()
            || !plugin
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err("plugin names are letters, digits and '-'".into());
        }
        Ok(ChainElement {
            plugin: plugin.to_string(),
            params: params.to_string(),
            count,
        })
    }

    fn instantiate(
        &self,
        target: &str,
        params: &str,
        ctx: &PluginContext,
    ) -> Result<Box<dyn Plugin>> {
        let (_, ctor) = BUILTINS
            .iter()
            .find(|(i, _)| i.name == target)
            .ok_or_else(|| unknown(target))?;
        ctor(params, ctx)
    }

    /// A result lists the plugins it cannot name by themselves; a built-in's name is its
    /// whole description.
    fn record(&self, _: &ChainElement, _: &str, _: Option<u32>) -> Option<PluginRecord> {
        None
    }
}

fn unknown(name: &str) -> Error {
    let names: Vec<&str> = list().map(|i| i.name).collect();
    Error::usage(format!(
        "unknown plugin '{name}': available are {}",
        names.join(", ")
    ))
}

fn find(name: &str) -> Result<&'static PluginInfo> {
    list().find(|i| i.name == name).ok_or_else(|| unknown(name))
}

/// A built-in works in place on the stereo bus: two audio inputs, two outputs, no features.
fn desc(i: &PluginInfo) -> PluginDesc {
    let port =
        |index, symbol: &str, input| PortDesc::signal(index, symbol.into(), PortKind::Audio, input);
    PluginDesc {
        uri: i.name.into(),
        name: i.name.into(),
        class: i.description.into(),
        ports: vec![
            port(0, "in_l", true),
            port(1, "in_r", true),
            port(2, "out_l", false),
            port(3, "out_r", false),
        ],
        required_features: Vec::new(),
        latency_port: None,
        unhostable: None,
    }
}
