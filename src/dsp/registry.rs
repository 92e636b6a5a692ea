//! Plugin names → constructors. `plugins list`, the engine and the load search all go
//! through here, so a plugin exists everywhere once it is registered.

use super::{ChainElement, Plugin, PluginContext};
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

const REGISTRY: &[(PluginInfo, Ctor)] = &[
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
    REGISTRY.iter().map(|(i, _)| i)
}

/// Create one instance of a plugin by name.
pub fn create(name: &str, params: &str, ctx: &PluginContext) -> Result<Box<dyn Plugin>> {
    if let Some(target) = name.strip_prefix(super::lv2::PREFIX) {
        return super::lv2::create_boxed(target, params, ctx);
    }
    let (_, ctor) = REGISTRY
        .iter()
        .find(|(i, _)| i.name == name)
        .ok_or_else(|| {
            let names: Vec<&str> = list().map(|i| i.name).collect();
            Error::usage(format!(
                "unknown plugin '{name}': available are {}",
                names.join(", ")
            ))
        })?;
    ctor(params, ctx)
}

/// How long instantiating a chain goes on after a Ctrl-C. A set-up shorter than this
/// finishes, and the measurement after it stops at its first check and writes its
/// (interrupted) result; a longer one (thousands of LV2 instances, plugins that load samples)
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
