//! One child process per plugin (docs/methods.md "Plugin audit"): the parent re-executes its
//! own binary with the hidden `plugins audit-child` subcommand, which audits one plugin and
//! writes its [`PluginAudit`] as JSON into a scratch directory. A child that dies of a signal
//! is reported as crashed (with the stage it was in and the crash line it wrote), one that
//! outlives the time limit is killed and reported as hung; the parent goes on with the next
//! plugin either way.

use super::{audit_plugin, AuditConfig, Outcome, PluginAudit, Stage, Subject};
use crate::error::{Error, Result};
use crate::progress::Progress;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The hidden subcommand the child runs (src/cli/audit.rs parses it).
pub const CHILD_ARGS: [&str; 2] = ["plugins", "audit-child"];

const RESULT: &str = "result.json";
const STAGE: &str = "stage";
const OUTPUT: &str = "output";

/// Writes the stage to the scratch directory, where the parent reads it after a crash.
struct FileStage(PathBuf);

impl Stage for FileStage {
    fn set(&mut self, what: &str) {
        // Best effort: a lost stage only makes a crash message vaguer.
        let _ = std::fs::write(&self.0, what);
    }
}

/// The child's side: audit `plugin` and write the result into `dir`. Errors resolving the
/// plugin are a result too (skipped, with the reason), so the parent always finds one.
pub fn child_main(dir: &Path, cfg: &AuditConfig, plugin: &str) -> Result<()> {
    let mut stage = FileStage(dir.join(STAGE));
    stage.set("resolving the plugin");
    let audit = match Subject::resolve(plugin) {
        Ok(s) => audit_plugin(&s, cfg, &mut stage),
        Err(e) => skipped(plugin, "", e.to_string()),
    };
    let text = serde_json::to_string(&audit)
        .map_err(|e| Error::cannot_measure(format!("serialising the audit: {e}")))?;
    std::fs::write(dir.join(RESULT), text)
        .map_err(|e| Error::io(format!("writing {}", dir.join(RESULT).display()), e))
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
    std::fs::write(dir.join(RESULT), text)
        .map_err(|e| Error::io(format!("writing {}", dir.join(RESULT).display()), e))
}

/// The plugins of every format with a search-path variable that `folder` holds, each
/// listed by a child whose search path is that folder (a format's catalogue is loaded once
/// per process, from its own search path).
pub fn list_folder(folder: &Path) -> Result<Vec<Target>> {
    let exe = std::env::current_exe().map_err(|e| Error::io("finding xrunlab's own binary", e))?;
    let mut out = Vec::new();
    for (n, f) in crate::dsp::registry::formats().enumerate() {
        let Some(var) = f.path_var() else {
            continue;
        };
        let dir = Scratch::new(10_000 + n)?;
        let o = Command::new(&exe)
            .args(CHILD_ARGS)
            .arg("--dir")
            .arg(&dir.0)
            .args(["--list", f.key()])
            .env(var, folder)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| Error::io(format!("starting {}", exe.display()), e))?;
        let text = std::fs::read_to_string(dir.0.join(RESULT)).map_err(|_| {
            Error::cannot_measure(format!(
                "listing the {} plugins of {} failed: {}",
                f.title(),
                folder.display(),
                String::from_utf8_lossy(&o.stderr).trim()
            ))
        })?;
        let found: Vec<Target> = serde_json::from_str(&text)
            .map_err(|e| Error::cannot_measure(format!("reading a listing: {e}")))?;
        out.extend(found.into_iter().map(|t| Target {
            env: Some((var.to_string(), folder.to_path_buf())),
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

/// A scratch directory of our own, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(n: usize) -> Result<Scratch> {
        let p = std::env::temp_dir().join(format!("xrunlab-audit-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir(&p).map_err(|e| Error::io(format!("creating {}", p.display()), e))?;
        Ok(Scratch(p))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The last lines of what the child printed, for messages.
fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let v: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    v[v.len().saturating_sub(lines)..].join(" / ")
}

fn signal_name(sig: i32) -> String {
    nix::sys::signal::Signal::try_from(sig)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| format!("signal {sig}"))
}

/// Audit `plugin` in a child process of `exe`. `None` when a Ctrl-C stopped it.
pub fn audit_in_child(
    exe: &Path,
    plugin: &str,
    env: Option<&(String, PathBuf)>,
    cfg: &AuditConfig,
    n: usize,
) -> Result<Option<PluginAudit>> {
    let dir = Scratch::new(n)?;
    let config = serde_json::to_string(cfg)
        .map_err(|e| Error::cannot_measure(format!("serialising the config: {e}")))?;
    let output = std::fs::File::create(dir.0.join(OUTPUT))
        .map_err(|e| Error::io(format!("creating {}", dir.0.join(OUTPUT).display()), e))?;
    let err = output
        .try_clone()
        .map_err(|e| Error::io("duplicating a file handle", e))?;
    let t0 = Instant::now();
    let mut cmd = Command::new(exe);
    if let Some((var, folder)) = env {
        cmd.env(var, folder);
    }
    let mut child = cmd
        .args(CHILD_ARGS)
        .arg("--dir")
        .arg(&dir.0)
        .arg("--config")
        .arg(&config)
        .arg("--")
        .arg(plugin)
        .stdin(Stdio::null())
        .stdout(output)
        .stderr(err)
        .spawn()
        .map_err(|e| Error::io(format!("starting {}", exe.display()), e))?;
    let limit = Duration::from_secs_f64(cfg.timeout_s.max(1.0));
    let status = loop {
        if let Some(s) = child
            .try_wait()
            .map_err(|e| Error::io("waiting for the audit child", e))?
        {
            break Some(s);
        }
        if crate::rt::interrupt::requested() || t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            if crate::rt::interrupt::requested() {
                return Ok(None);
            }
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let seconds = t0.elapsed().as_secs_f64();
    let stage = std::fs::read_to_string(dir.0.join(STAGE)).unwrap_or_else(|_| "starting".into());
    let mut audit = match status {
        None => {
            let mut a = skipped(
                plugin,
                "",
                format!(
                    "hung: no result after {:.0} s, killed while {stage}",
                    limit.as_secs_f64()
                ),
            );
            a.outcome = Outcome::Hung;
            a
        }
        Some(s) if s.signal().is_some() => {
            let sig = signal_name(s.signal().unwrap_or(0));
            let mut a = skipped(plugin, "", format!("crashed: {sig} while {stage}"));
            a.outcome = Outcome::Crashed;
            a
        }
        Some(s) => match std::fs::read_to_string(dir.0.join(RESULT)) {
            Ok(text) => serde_json::from_str::<PluginAudit>(&text).map_err(|e| {
                Error::cannot_measure(format!("reading the audit child's result: {e}"))
            })?,
            Err(_) => skipped(
                plugin,
                "",
                format!(
                    "the audit child exited with {} and no result: {}",
                    s.code().unwrap_or(-1),
                    tail(&dir.0.join(OUTPUT), 3)
                ),
            ),
        },
    };
    audit.seconds = seconds;
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
        match audit_in_child(&exe, &t.element, t.env.as_ref(), cfg, i)? {
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
