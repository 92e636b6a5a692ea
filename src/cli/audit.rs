//! `xrunlab plugins audit`: is this plugin safe to play live? Parses, calls
//! `measure::audit` (one child process per plugin) and prints.

use super::output::{self, Measured, Started};
use super::Global;
use crate::dsp::registry;
use crate::error::Result;
use crate::measure::audit::child::{self, Target};
use crate::measure::audit::{AuditConfig, Verdict};
use crate::results::{Body, Status};
use clap::Args;
use std::path::PathBuf;

pub const AUDIT_HELP: &str = "Each plugin runs in a child process of its own: one that crashes or hangs is reported \
(crashed: SIGSEGV while …; hung) and the audit goes on with the next. The checks, each pass, warn, fail or \
skip with the figure behind it (docs/methods.md \"Plugin audit\"):
  rt.heap, rt.locks, rt.blocking   allocations/frees, mutex locks, waits/sleeps/read/write on the
                                   audio thread after warm-up, at 64/256/1024 frames and
                                   44.1/48/96 kHz, controls moving; the first call site
  output.finite, .subnormal, .signal   NaN/Inf, subnormal samples, silence with noise in
  cost.tail, .burst, .denormal, .params   per-block CPU time: p99.9 and max against the mean,
                                   a burst every N blocks, silence against noise, moving controls
  latency                          reported against an impulse through the plugin
  state                            save, restore in a fresh instance: the same output

Examples:
  xrunlab plugins audit lv2:urn:zamaudio:ZamEQ2
  xrunlab plugins audit --all lv2
  xrunlab plugins audit ~/.lv2/
  xrunlab plugins audit --all clap --filter zam
  xrunlab plugins audit vst3:ZamComp ~/.vst3/
  xrunlab plugins audit --fail-on-problem 'lv2:ZamComp' reverb-light
  xrunlab -o audit.json plugins audit --all lv2 && xrunlab report audit.json -o audit.html";

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Audit every installed plugin of this format (lv2, clap, vst3), skipping those that cannot be
    /// hosted with the reason.
    #[arg(long, value_name = "FORMAT")]
    pub all: Option<String>,
    /// With --all: only plugins whose identifier or name contains this (case-insensitive).
    #[arg(long, value_name = "TEXT", requires = "all")]
    pub filter: Option<String>,
    /// Exit 1 when a check fails, a plugin crashes or hangs (for plugin developers' CI; the
    /// old --strict is still accepted).
    #[arg(long = "fail-on-problem", alias = "strict")]
    pub strict: bool,
    /// Seconds one plugin's audit may take before its child is killed as hung.
    #[arg(long, default_value_t = 300.0, value_name = "SECONDS")]
    pub timeout: f64,
    /// Plugins to audit: chain elements (lv2:URI, clap:ID, vst3:NAME, a built-in name…), or
    /// folders of plugins (a path with a '/', searched as LV2_PATH, CLAP_PATH and VST3_PATH
    /// would be), all of whose plugins are audited.
    #[arg(value_name = "PLUGIN")]
    pub plugins: Vec<String>,
}

/// The child's arguments (hidden: `measure::audit::child` starts it): audit one plugin, or
/// (--list) list a format's plugins.
#[derive(Debug, Args)]
pub struct AuditChildArgs {
    #[arg(long)]
    pub dir: PathBuf,
    #[arg(long, required_unless_present = "list")]
    pub config: Option<String>,
    #[arg(long, value_name = "FORMAT")]
    pub list: Option<String>,
    #[arg(required_unless_present = "list")]
    pub plugin: Option<String>,
}

pub fn child(a: AuditChildArgs) -> Result<u8> {
    if let Some(key) = &a.list {
        child::child_list(&a.dir, key)?;
        return Ok(0);
    }
    let cfg: AuditConfig = serde_json::from_str(a.config.as_deref().unwrap_or_default())
        .map_err(|e| crate::error::Error::usage(format!("bad --config: {e}")))?;
    child::child_main(&a.dir, &cfg, a.plugin.as_deref().unwrap_or_default())?;
    Ok(0)
}

fn targets(a: &AuditArgs) -> Result<Vec<Target>> {
    let mut out: Vec<Target> = Vec::new();
    if let Some(key) = &a.all {
        let Some(f) = registry::by_key(key) else {
            let keys: Vec<&str> = registry::formats()
                .map(|f| f.key())
                .filter(|k| !k.is_empty())
                .collect();
            return super::usage(format!(
                "--all {key}: no such plugin format (known: {})",
                keys.join(", ")
            ));
        };
        for d in f.list(a.filter.as_deref()) {
            out.push(Target {
                element: format!("{}{}", f.prefix(), d.uri),
                name: d.name.clone(),
                unhostable: d.unhostable.clone(),
                env: None,
            });
        }
        if out.is_empty() {
            return super::usage(format!(
                "no {} plugin{} found on {}",
                f.title(),
                a.filter
                    .as_deref()
                    .map(|t| format!(" matching '{t}'"))
                    .unwrap_or_default(),
                f.search_path()
            ));
        }
    }
    for p in &a.plugins {
        let path = std::path::Path::new(p);
        if (p.contains('/') || p == ".") && path.is_dir() {
            let found = child::list_folder(path)?;
            if found.is_empty() {
                return super::usage(format!(
                    "{p}: no plugin found in this folder (looked for LV2 bundles as LV2_PATH \
                     would, CLAP files (.clap) and VST3 bundles (.vst3) directly in it)"
                ));
            }
            out.extend(found);
            continue;
        }
        // Resolved here so that an unknown name is a usage error (exit 2) before any child.
        let s = crate::measure::audit::Subject::resolve(p)?;
        if let Some(d) = &s.desc {
            if let Some(why) = &d.unhostable {
                return super::usage(format!("{p} ({}) cannot be hosted: {why}", d.name));
            }
        } else {
            // A built-in: its parameters are checked by making one.
            registry::create(
                &s.element.plugin,
                &s.element.params,
                &crate::dsp::PluginContext {
                    rate: 48000,
                    max_frames: 64,
                },
            )?;
        }
        out.push(Target {
            element: s.element.to_string(),
            name: s.name(),
            unhostable: None,
            env: None,
        });
    }
    if out.is_empty() {
        return super::usage(
            "name the plugins to audit, or --all FORMAT (e.g. xrunlab plugins audit --all lv2)",
        );
    }
    Ok(out)
}

pub fn run(a: AuditArgs, g: &Global) -> Result<u8> {
    if !(a.timeout.is_finite() && a.timeout >= 1.0) {
        return super::usage(format!(
            "--timeout {}: expected at least 1 second",
            a.timeout
        ));
    }
    let list = targets(&a)?;
    let config = AuditConfig {
        timeout_s: a.timeout,
        strict: a.strict,
        ..AuditConfig::default()
    };
    let started = Started::now(Vec::new());
    let progress = crate::progress::for_terminal(g.quiet, list.len() as u64);
    let (results, interrupted) = child::audit_all(&list, &config, progress.as_ref())?;
    let human = crate::report::text::audit::summary(&results);
    let failed = results.iter().any(|r| r.verdict() == Verdict::Fail);
    let done = results.len();
    let status = if interrupted {
        Status::Interrupted
    } else {
        Status::Complete
    };
    let measured = Measured::new(Body::Audit { config, results }, status, started, human)
        .threshold(a.strict && failed)
        .partial(format!(
            "xrunlab: audit interrupted after {done} of {} plugins; partial result reported\n",
            list.len()
        ));
    output::finish(measured, g)
}
