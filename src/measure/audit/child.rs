//! One child process per plugin (docs/methods.md "Plugin audit"): the parent re-executes its
//! own binary with the hidden `plugins audit-child` subcommand, which audits one plugin and
//! writes its [`PluginAudit`] as JSON into a scratch directory. A child that dies of a signal
//! is reported as crashed (with the stage it was in and the crash line it wrote), one that
//! outlives the time limit is killed and reported as hung; the parent goes on with the next
//! plugin either way.

use super::{audit_plugin, AuditConfig, Outcome, PluginAudit, Stage, Subject};
use crate::dsp::contain::{self, End, Scratch};
use crate::error::{Error, Result};
use crate::progress::Progress;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The hidden subcommand the child runs (src/cli/audit.rs parses it).
pub const CHILD_ARGS: [&str; 2] = ["plugins", "audit-child"];

const RESULT: &str = "result.json";

/// Writes the stage to the scratch directory, where the parent reads it after a crash or a
/// hang. The audit's own stages only: those of loading a module (`dsp::contain::stage`)
/// would hide which check was running.
struct FileStage(PathBuf);

impl Stage for FileStage {
    fn set(&mut self, what: &str) {
        // Best effort: a lost stage only makes a crash message vaguer.
        let _ = std::fs::write(&self.0, what);
    }
}

/// Write `text` as the child's result, whole or not at all (renamed into place).
fn write_result(dir: &Path, text: &str) -> Result<()> {
    let part = dir.join("result.part");
    std::fs::write(&part, text)
        .and_then(|_| std::fs::rename(&part, dir.join(RESULT)))
        .map_err(|e| Error::io(format!("writing {}", dir.join(RESULT).display()), e))
}

/// The child's side: audit `plugin` and write the result into `dir`. Errors resolving the
/// plugin are a result too (skipped, with the reason), so the parent always finds one.
pub fn child_main(dir: &Path, cfg: &AuditConfig, plugin: &str) -> Result<()> {
    let mut stage = FileStage(dir.join(contain::STAGE_FILE));
    stage.set("resolving the plugin");
    let audit = match Subject::resolve(plugin) {
        Ok(s) => audit_plugin(&s, cfg, &mut stage),
        Err(e) => skipped(plugin, "", e.to_string()),
    };
    let text = serde_json::to_string(&audit)
        .map_err(|e| Error::cannot_measure(format!("serialising the audit: {e}")))?;
    write_result(dir, &text)
}

/// One plugin to audit: its chain element, name, why it cannot be hosted (then it is
/// skipped without a child), and the search-path variable and folder its child gets
/// (`plugins audit DIR`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Target {
    pub element: String,
    pub name: String,
    pub unhostable: Option<String>,
    pub env: Option<(String, PathBuf)>,
}

/// The child's side of a folder listing: the plugins of format `key` it sees (its search
/// path is the folder), written into `dir`.
pub fn child_list(dir: &Path, key: &str) -> Result<()> {
    let f = crate::dsp::registry::by_key(key)
        .ok_or_else(|| Error::usage(format!("no plugin format '{key}'")))?;
    let found: Vec<Target> = f
        .list(None)
        .into_iter()
        .map(|d| Target {
            element: format!("{}{}", f.prefix(), d.uri),
            name: d.name,
            unhostable: d.unhostable,
            env: None,
        })
        .collect();
    let text = serde_json::to_string(&found)
        .map_err(|e| Error::cannot_measure(format!("serialising the listing: {e}")))?;
    write_result(dir, &text)
}

/// The plugins `folder` holds, of every format that looks there: formats whose plugins are
/// files (CLAP, VST3) probe each file in a contained child (`dsp::files`); the others (LV2)
/// are listed by a contained child whose search path is that folder (a format's catalogue is
/// loaded once per process, from its own search path). Each target's child gets the folder
/// as its format's search path, where identifiers resolve.
pub fn list_folder(folder: &Path) -> Result<Vec<Target>> {
    let exe = std::env::current_exe().map_err(|e| Error::io("finding xrunlab's own binary", e))?;
    let mut out = Vec::new();
    for f in crate::dsp::registry::formats() {
        let Some(var) = f.path_var() else {
            continue;
        };
        let env = Some((var.to_string(), folder.to_path_buf()));
        if f.plugin_files() {
            let found = f.in_dir(folder).unwrap_or_default();
            out.extend(found.into_iter().map(|d| Target {
                element: format!("{}{}", f.prefix(), d.uri),
                name: d.name,
                unhostable: d.unhostable,
                env: env.clone(),
            }));
            continue;
        }
        let dir = Scratch::new("list")?;
        let mut cmd = Command::new(&exe);
        cmd.args(CHILD_ARGS)
            .arg("--dir")
            .arg(dir.path())
            .args(["--list", f.key()])
            .env(var, folder);
        let ended = contain::run(cmd, dir.path(), Duration::from_secs(120))?;
        if matches!(ended.end, End::Interrupted) {
            return Err(Error::cannot_measure("interrupted while listing plugins"));
        }
        let text = std::fs::read_to_string(dir.path().join(RESULT)).map_err(|_| {
            Error::cannot_measure(format!(
                "listing the {} plugins of {} failed: {}",
                f.title(),
                folder.display(),
                ended.tail_lines(3)
            ))
        })?;
        let found: Vec<Target> = serde_json::from_str(&text)
            .map_err(|e| Error::cannot_measure(format!("reading a listing: {e}")))?;
        out.extend(found.into_iter().map(|t| Target {
            env: env.clone(),
            ..t
        }));
    }
    Ok(out)
}

pub fn skipped(plugin: &str, name: &str, reason: String) -> PluginAudit {
    PluginAudit {
        plugin: plugin.to_string(),
        name: name.to_string(),
        outcome: Outcome::Skipped,
        reason: Some(reason),
        checks: Vec::new(),
        seconds: 0.0,
    }
}

/// Audit `plugin` in a contained child of `exe` (`dsp::contain`). `None` when a Ctrl-C
/// stopped it.
pub fn audit_in_child(
    exe: &Path,
    plugin: &str,
    env: Option<&(String, PathBuf)>,
    cfg: &AuditConfig,
) -> Result<Option<PluginAudit>> {
    let dir = Scratch::new("audit")?;
    let config = serde_json::to_string(cfg)
        .map_err(|e| Error::cannot_measure(format!("serialising the config: {e}")))?;
    let mut cmd = Command::new(exe);
    if let Some((var, folder)) = env {
        cmd.env(var, folder);
    }
    cmd.args(CHILD_ARGS)
        .arg("--dir")
        .arg(dir.path())
        .arg("--config")
        .arg(&config)
        .arg("--")
        .arg(plugin);
    let limit = Duration::from_secs_f64(cfg.timeout_s.max(1.0));
    let ended = contain::run(cmd, dir.path(), limit)?;
    let stage = &ended.stage;
    let failed = |outcome: Outcome, reason: String| {
        let mut a = skipped(plugin, "", reason);
        a.outcome = outcome;
        a
    };
    // A result written is the audit, whatever the plugin's exit handlers did after it.
    let result = std::fs::read_to_string(dir.path().join(RESULT)).ok();
    let mut audit = match (&ended.end, result) {
        (End::Interrupted, _) => return Ok(None),
        (_, Some(text)) => serde_json::from_str::<PluginAudit>(&text)
            .map_err(|e| Error::cannot_measure(format!("reading the audit child's result: {e}")))?,
        (End::Hung, None) => failed(
            Outcome::Hung,
            format!(
                "hung: no result after {:.0} s, killed while {stage}",
                limit.as_secs_f64()
            ),
        ),
        (End::Signalled(sig), None) => {
            failed(Outcome::Crashed, format!("crashed: {sig} while {stage}"))
        }
        // An exit without a result (a plugin calling exit() in process) is a crash too: the
        // audit did not finish.
        (End::Exited(code), None) => {
            let tail = ended.tail_lines(3);
            failed(
                Outcome::Crashed,
                format!(
                    "crashed: exited (code {code}) without a result while {stage}{}",
                    if tail.is_empty() {
                        String::new()
                    } else {
                        format!(": {tail}")
                    }
                ),
            )
        }
    };
    audit.seconds = ended.seconds;
    Ok(Some(audit))
}

/// Audit each target in turn, each in its own child; an unhostable one is skipped with the
/// reason. Stops at a Ctrl-C with what it has (the second value says so).
pub fn audit_all(
    targets: &[Target],
    cfg: &AuditConfig,
    progress: &dyn Progress,
) -> Result<(Vec<PluginAudit>, bool)> {
    let exe = std::env::current_exe().map_err(|e| Error::io("finding xrunlab's own binary", e))?;
    progress.set_unit(crate::progress::Unit::Items("plugins"));
    progress.set_total(targets.len() as u64);
    let mut out = Vec::new();
    for (i, t) in targets.iter().enumerate() {
        progress.set_message(&t.element);
        progress.set_position(i as u64);
        if let Some(why) = &t.unhostable {
            out.push(skipped(
                &t.element,
                &t.name,
                format!("cannot be hosted: {why}"),
            ));
            continue;
        }
        match audit_in_child(&exe, &t.element, t.env.as_ref(), cfg)? {
            Some(mut a) => {
                if a.name.is_empty() {
                    a.name = t.name.clone();
                }
                out.push(a)
            }
            None => {
                progress.finish();
                return Ok((out, true));
            }
        }
    }
    progress.set_position(targets.len() as u64);
    progress.finish();
    Ok((out, false))
}
