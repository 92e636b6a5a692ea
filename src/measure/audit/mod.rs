//! `plugins audit` (docs/methods.md "Plugin audit"): is this plugin safe to play live?
//!
//! Each plugin is audited in a child process (`child.rs`: our own binary re-executed with a
//! hidden subcommand), so a plugin that crashes or hangs takes only that child down. Inside
//! the child, [`audit_plugin`] runs the check groups, one file each, through the plugin-format
//! interface only (`dsp::registry`, `Plugin`), so it audits every format the registry holds:
//! - `safety.rs`: heap operations, locks and blocking calls on the audio thread, over block
//!   sizes and rates (`probe.rs` counts them), and what comes out (non-finite, subnormal,
//!   silent);
//! - `cost.rs`: per-block CPU time tails, periodic bursts, silence against noise, moving
//!   parameters;
//! - `latency.rs`: reported against measured with an impulse;
//! - `state.rs`: save and restore give the same output.

pub mod child;
pub mod cost;
pub mod latency;
pub mod probe;
pub mod safety;
pub mod state;

use crate::dsp::format::{PluginDesc, PortKind};
use crate::dsp::{registry, ChainElement, Plugin, PluginContext};
use crate::error::Result;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How a check came out.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Not run, with the reason in the figure (the format offers no state, no audio input…).
    Skip,
    Pass,
    Warn,
    Fail,
}

impl Verdict {
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Skip => "skip",
            Verdict::Pass => "pass",
            Verdict::Warn => "warn",
            Verdict::Fail => "fail",
        }
    }
}

/// One check of one plugin: its verdict and the figure behind it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Check {
    /// Stable id, e.g. `rt.heap`, `cost.burst`.
    pub id: String,
    pub verdict: Verdict,
    /// The figure, in words, e.g. `12 allocations at 64 frames/44100 Hz; first in run+0x1c (x.so)`.
    pub figure: String,
    /// The figure as one number where there is one (a count, a ratio, frames).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
}

impl Check {
    pub fn new(id: &str, verdict: Verdict, figure: impl Into<String>) -> Check {
        Check {
            id: id.into(),
            verdict,
            figure: figure.into(),
            value: None,
        }
    }
    pub fn value(mut self, v: f64) -> Check {
        self.value = Some(v);
        self
    }
}

/// How the audit of one plugin ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Every check ran (some may be skipped, each with its reason).
    Audited,
    /// Not audited: it cannot be hosted, or could not be instantiated (the reason says).
    Skipped,
    /// The child process died of a signal (the reason names it and where).
    Crashed,
    /// The child did not finish within the time limit and was killed.
    Hung,
}

/// The audit of one plugin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PluginAudit {
    /// The chain element audited, e.g. `lv2:urn:zamaudio:ZamComp`.
    pub plugin: String,
    /// The plugin's name, as its format gives it.
    #[serde(default)]
    pub name: String,
    pub outcome: Outcome,
    /// Why it was skipped, how it crashed or hung.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub checks: Vec<Check>,
    /// Wall time of the child, seconds.
    pub seconds: f64,
}

impl PluginAudit {
    /// The worst verdict: a crash or a hang is a failure, a skipped plugin is a skip.
    pub fn verdict(&self) -> Verdict {
        match self.outcome {
            Outcome::Crashed | Outcome::Hung => Verdict::Fail,
            Outcome::Skipped => Verdict::Skip,
            Outcome::Audited => self
                .checks
                .iter()
                .map(|c| c.verdict)
                .max()
                .unwrap_or(Verdict::Skip),
        }
    }
}

/// What was asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AuditConfig {
    /// Block sizes the real-time checks run at, frames.
    pub blocks: Vec<u32>,
    /// Sample rates the real-time checks run at, Hz.
    pub rates: Vec<u32>,
    /// The rate and block size of the cost, latency and state checks.
    pub cost_rate: u32,
    pub cost_block: u32,
    /// Blocks timed per phase of the cost check.
    pub cost_blocks: u32,
    /// Seconds a plugin's child may take before it is killed as hung.
    pub timeout_s: f64,
    /// Fail (exit 1) when a check fails.
    pub strict: bool,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            blocks: vec![64, 256, 1024],
            rates: vec![44100, 48000, 96000],
            cost_rate: 48000,
            cost_block: 256,
            cost_blocks: 1024,
            timeout_s: 300.0,
            strict: false,
        }
    }
}

/// The stage the child is in, for the crash and hang messages: the child writes it to a
/// file the parent reads when the child dies. Set outside every counted run.
pub trait Stage {
    fn set(&mut self, what: &str);
}

/// A stage sink that forgets (tests calling [`audit_plugin`] in-process).
pub struct NoStage;
impl Stage for NoStage {
    fn set(&mut self, _: &str) {}
}

/// The plugin under audit: how to make instances of it and what its format says of it.
pub struct Subject {
    pub element: ChainElement,
    pub desc: Option<PluginDesc>,
}

impl Subject {
    /// Resolve a chain element (`lv2:URI`, `lv2:NAME`, a built-in name); unknown → exit 2.
    pub fn resolve(text: &str) -> Result<Subject> {
        let chain = crate::dsp::parse_chain(text)?;
        let element = chain
            .into_iter()
            .next()
            .ok_or_else(|| crate::error::Error::usage("an empty plugin name"))?;
        let desc = match registry::installed_format(&element.plugin) {
            Some(_) => Some(registry::describe(&element.plugin)?.1),
            None => None,
        };
        Ok(Subject { element, desc })
    }

    pub fn name(&self) -> String {
        self.desc
            .as_ref()
            .map(|d| d.name.clone())
            .unwrap_or_else(|| self.element.plugin.clone())
    }

    pub fn instantiate(&self, rate: u32, frames: usize) -> Result<Box<dyn Plugin>> {
        registry::create(
            &self.element.plugin,
            &self.element.params,
            &PluginContext {
                rate,
                max_frames: frames,
            },
        )
    }

    /// Audio inputs (built-ins: stereo in place).
    pub fn has_audio_in(&self) -> bool {
        self.desc
            .as_ref()
            .is_none_or(|d| d.count(PortKind::Audio, true) > 0)
    }

    pub fn is_instrument(&self) -> bool {
        self.desc.as_ref().is_some_and(PluginDesc::is_instrument)
    }

    /// The control inputs a host may move, with their ranges and steps.
    pub fn controls(&self) -> Vec<Control> {
        let Some(d) = &self.desc else {
            return Vec::new();
        };
        d.ports
            .iter()
            .filter(|p| p.kind == PortKind::Control && p.input)
            .filter_map(|p| match (p.minimum, p.maximum) {
                (Some(lo), Some(hi)) if lo.is_finite() && hi.is_finite() && hi > lo => {
                    Some(Control {
                        index: p.index,
                        lo,
                        hi,
                        steps: p.steps.filter(|&n| n > 0),
                    })
                }
                _ => None,
            })
            .collect()
    }
}

/// A control input the audit moves: its port, its range, and its steps when it takes whole
/// steps only.
#[derive(Debug, Clone, Copy)]
pub struct Control {
    pub index: usize,
    lo: f32,
    hi: f32,
    steps: Option<u32>,
}

impl Control {
    /// The value `x` (0 to 1) of the way through its range, on the nearest step when it has
    /// steps: a value between steps would be rounded by the plugin one way when set and
    /// perhaps another when restored from its state, and the audit would blame the plugin.
    pub fn at(&self, x: f32) -> f32 {
        let x = match self.steps {
            Some(n) => (x * n as f32).round() / n as f32,
            None => x,
        };
        self.lo + x * (self.hi - self.lo)
    }
}

/// Audit one plugin in this process: every check group in turn. Called by the child; a
/// crash in the plugin ends this process.
pub fn audit_plugin(subject: &Subject, cfg: &AuditConfig, stage: &mut dyn Stage) -> PluginAudit {
    let t0 = std::time::Instant::now();
    let mut checks = Vec::new();
    stage.set("instantiating");
    if let Err(e) = subject.instantiate(cfg.cost_rate, cfg.cost_block as usize) {
        return PluginAudit {
            plugin: subject.element.to_string(),
            name: subject.name(),
            outcome: Outcome::Skipped,
            reason: Some(e.to_string()),
            checks,
            seconds: t0.elapsed().as_secs_f64(),
        };
    }
    probe::mark_this_thread();
    checks.extend(safety::checks(subject, cfg, stage));
    checks.extend(cost::checks(subject, cfg, stage));
    checks.push(latency::check(subject, cfg, stage));
    checks.push(state::check(subject, cfg, stage));
    PluginAudit {
        plugin: subject.element.to_string(),
        name: subject.name(),
        outcome: Outcome::Audited,
        reason: None,
        checks,
        seconds: t0.elapsed().as_secs_f64(),
    }
}

/// White noise at −20 dBFS peak, the bench's loop (the same samples every run), played
/// round block after block without allocating.
pub struct Feed {
    left: Vec<f32>,
    right: Vec<f32>,
    pos: usize,
    pub l: Vec<f32>,
    pub r: Vec<f32>,
}

impl Feed {
    pub fn new(rate: u32, frames: usize) -> Feed {
        let (left, right) = crate::dsp::plugin_cost::Signal::Noise.tables(rate, frames);
        Feed {
            left,
            right,
            pos: 0,
            l: vec![0.0; frames],
            r: vec![0.0; frames],
        }
    }

    /// Fill the block with the next noise (or zeros when `silent`).
    #[inline]
    pub fn fill(&mut self, silent: bool) {
        if silent {
            self.l.fill(0.0);
            self.r.fill(0.0);
            return;
        }
        let n = self.l.len();
        if self.pos + n > self.left.len() {
            self.pos = 0;
        }
        self.l.copy_from_slice(&self.left[self.pos..self.pos + n]);
        self.r.copy_from_slice(&self.right[self.pos..self.pos + n]);
        self.pos += n;
    }

    #[inline]
    pub fn process(&mut self, p: &mut dyn Plugin) {
        p.process(&mut self.l, &mut self.r);
    }
}

/// Blocks that make `seconds` of audio at `rate` in blocks of `frames` (at least `min`).
pub fn blocks_for(seconds: f64, rate: u32, frames: usize, min: usize) -> usize {
    ((seconds * rate as f64 / frames as f64).ceil() as usize).max(min)
}
