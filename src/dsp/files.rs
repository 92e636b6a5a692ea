//! What the formats whose plugins are files of their own (CLAP's `.clap`, VST3's `.vst3`)
//! share, so that each format's folder keeps only what is its own (loading a module, asking
//! its factory): walking the search path, a file that is no plugin, the plugins one folder
//! holds, the catalog where the first of an identifier wins, naming one plugin by identifier,
//! name or path, `name=value` parameters, and probing each file in a contained child
//! ([`contained`]) so that no file's entry or `init` can crash or hang xrunlab.

use super::contain::{self, End, Scratch};
use super::format::PluginDesc;
use crate::error::{Error, Result};
use serde::{de::DeserializeOwned, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// One plugin a format found in a file, as this module needs to see it.
pub trait Probed: Clone {
    fn desc(&self) -> &PluginDesc;
    fn into_desc(self) -> PluginDesc;
    /// Its module loaded; a file that is no plugin is listed without one, as unhostable.
    fn loaded(&self) -> bool;
}

/// How one format names its files and identifiers in paths and messages.
pub struct Kind {
    /// The chain element's prefix without the colon (`clap`).
    pub prefix: &'static str,
    /// The format's name (`CLAP`).
    pub title: &'static str,
    /// The files' extension (`clap`).
    pub ext: &'static str,
    /// A plugin is a regular file, not a bundle folder.
    pub file_only: bool,
    /// What its identifier is called (`id`, `class id`).
    pub id_word: &'static str,
}

/// One parameter: the format's id for it, its port in the description (what
/// `Plugin::set_control` names), what `name=value` matches, and its range in plain units.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Param<Id> {
    pub id: Id,
    pub port: usize,
    pub symbol: String,
    pub name: String,
    pub min: f64,
    pub max: f64,
}

/// Every plugin file of `kind` under `dir`, sorted, `depth` folders deep (vendors put theirs
/// in folders); a bundle is not searched inside.
pub fn walk(kind: &Kind, dir: &Path, depth: u32, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.extension().is_some_and(|e| e == kind.ext) && (!kind.file_only || p.is_file()) {
            out.push(p);
        } else if p.is_dir() && depth > 0 {
            walk(kind, &p, depth - 1, out);
        }
    }
}

/// The description of a file that is no plugin: named after the file, unhostable with why.
pub fn broken(path: &Path, why: String) -> PluginDesc {
    PluginDesc {
        uri: path.display().to_string(),
        name: path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
        class: String::new(),
        ports: Vec::new(),
        required_features: Vec::new(),
        latency_port: None,
        unhostable: Some(format!("{}: {why}", path.display())),
    }
}

/// The plugins of the files directly in `dir`, as chain elements know them: a file holding
/// one plugin by its path (found wherever the folder is), one holding several by their
/// identifiers, which must then be on the search path.
pub fn in_dir<P: Probed + Send>(
    kind: &Kind,
    dir: &Path,
    plugins_of: impl Fn(&Path) -> Vec<P> + Sync,
) -> Vec<PluginDesc> {
    let mut files = Vec::new();
    walk(kind, dir, 0, &mut files);
    let mut out = Vec::new();
    for (file, found) in files.iter().zip(each_file(&files, plugins_of)) {
        let one = found.len() == 1;
        for f in found {
            let loaded = f.loaded();
            let mut d = f.into_desc();
            if one && loaded {
                d.uri = file.display().to_string();
            }
            out.push(d);
        }
    }
    out
}

/// `plugins_of` of each file, in order, a few files at a time: each probe is a child process
/// that mostly waits (exec, dlopen), so a few side by side list a folder in a fraction of
/// the time.
fn each_file<P: Send>(
    files: &[PathBuf],
    plugins_of: impl Fn(&Path) -> Vec<P> + Sync,
) -> Vec<Vec<P>> {
    const AT_ONCE: usize = 4;
    let next = std::sync::atomic::AtomicUsize::new(0);
    let slots: Vec<Mutex<Vec<P>>> = files.iter().map(|_| Mutex::new(Vec::new())).collect();
    std::thread::scope(|s| {
        for _ in 0..AT_ONCE.min(files.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(file) = files.get(i) else {
                    break;
                };
                let found = plugins_of(file);
                *slots[i].lock().unwrap_or_else(|e| e.into_inner()) = found;
            });
        }
    });
    slots
        .into_iter()
        .map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()))
        .collect()
}

/// Everything in `dirs`, sorted by identifier: each file once however it is reached, and of
/// an identifier the first on the search path (the user's variable comes first).
pub fn catalog<P: Probed + Send>(
    kind: &Kind,
    dirs: Vec<PathBuf>,
    plugins_of: impl Fn(&Path) -> Vec<P> + Sync,
) -> Vec<P> {
    let mut files = Vec::new();
    for d in dirs {
        walk(kind, &d, 3, &mut files);
    }
    let mut seen = std::collections::HashSet::new();
    files.retain(|f| seen.insert(f.canonicalize().unwrap_or_else(|_| f.clone())));
    let mut v: Vec<P> = each_file(&files, plugins_of)
        .into_iter()
        .flatten()
        .collect();
    let mut ids = std::collections::HashSet::new();
    v.retain(|f| !f.loaded() || ids.insert(f.desc().uri.clone()));
    v.sort_by(|a, b| a.desc().uri.cmp(&b.desc().uri));
    v
}

/// The installed plugins whose identifier or name contains `filter` (case-insensitive).
pub fn list<P: Probed>(all: &[P], filter: Option<&str>) -> Vec<PluginDesc> {
    let f = filter.map(str::to_lowercase);
    all.iter()
        .map(|p| p.desc())
        .filter(|d| {
            f.as_ref().is_none_or(|f| {
                d.uri.to_lowercase().contains(f) || d.name.to_lowercase().contains(f)
            })
        })
        .cloned()
        .collect()
}

/// `target` as the path of one plugin file: `None` when it is not a path of this kind; the
/// plugin when the file holds exactly one; else the user's mistake, naming its identifiers.
pub fn by_path<P: Probed>(
    kind: &Kind,
    target: &str,
    plugins_of: impl Fn(&Path) -> Vec<P>,
) -> Option<Result<P>> {
    if !(target.ends_with(&format!(".{}", kind.ext)) && target.contains('/')) {
        return None;
    }
    let found = plugins_of(Path::new(target));
    Some(match found.as_slice() {
        [one] => Ok(one.clone()),
        many => Err(Error::usage(format!(
            "{target} holds {} {} plugins; name one by its {}: {}",
            many.len(),
            kind.title,
            kind.id_word,
            many.iter()
                .map(|f| format!("{}:{}", kind.prefix, f.desc().uri))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    })
}

/// The one plugin among `matches` (those a name matched): `None` when there is none, the
/// user's mistake when there are several, naming their identifiers.
pub fn the_one<P: Probed>(kind: &Kind, target: &str, matches: &[&P]) -> Option<Result<P>> {
    match matches {
        [] => None,
        [one] => Some(Ok((*one).clone())),
        many => Some(Err(Error::usage(format!(
            "{}:{target} names {} installed plugins; use the {}: {}",
            kind.prefix,
            many.len(),
            kind.id_word,
            many.iter()
                .map(|f| f.desc().uri.clone())
                .collect::<Vec<_>>()
                .join(", ")
        )))),
    }
}

/// Parse `name=value,…` against `params` (by the `symbol` `plugins show` prints, the
/// parameter's name, or its numeric id), in plain units. Unknown names and values outside
/// the parameter's range are the user's mistake (exit 2), named with what is valid. Each
/// value comes back with the parameter's index in `params`.
pub fn parse_params<Id: std::fmt::Display>(
    kind: &Kind,
    uri: &str,
    params: &[Param<Id>],
    text: &str,
) -> Result<Vec<(usize, f64)>> {
    let prefix = kind.prefix;
    let valid = || {
        if params.is_empty() {
            return "none".to_string();
        }
        params
            .iter()
            .map(|p| format!("{} ({}..={})", p.symbol, p.min, p.max))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = Vec::new();
    for kv in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (sym, v) = kv.split_once('=').ok_or_else(|| {
            Error::usage(format!(
                "{prefix}:{uri}: parameter '{kv}' is not name=value; its parameters are: {}",
                valid()
            ))
        })?;
        let (sym, v) = (sym.trim(), v.trim());
        let lower = sym.to_lowercase();
        let slot = params
            .iter()
            .position(|p| {
                p.symbol == lower || p.name.to_lowercase() == lower || p.id.to_string() == sym
            })
            .ok_or_else(|| {
                Error::usage(format!(
                    "{prefix}:{uri} has no parameter '{sym}'; its parameters are: {}",
                    valid()
                ))
            })?;
        let p = &params[slot];
        let value: f64 = v
            .parse()
            .ok()
            .filter(|x: &f64| x.is_finite())
            .ok_or_else(|| {
                Error::usage(format!(
                    "{prefix}:{uri}: {sym}={v} is not a number (valid range {}..={})",
                    p.min, p.max
                ))
            })?;
        // A little slack: a range's ends may be the plugin's own conversions of 0 and 1.
        let slack = 1e-9 * (p.max - p.min).abs().max(1.0);
        if value < p.min - slack || value > p.max + slack {
            return Err(Error::usage(format!(
                "{prefix}:{uri}: {sym}={v} is outside the parameter's range {}..={}",
                p.min, p.max
            )));
        }
        out.push((slot, value));
    }
    Ok(out)
}

/// The hidden subcommand a probe child runs (src/cli/plugins.rs parses it).
pub const PROBE_CHILD_ARGS: [&str; 2] = ["plugins", "probe-child"];

const RESULT: &str = "result.json";

/// How long one file's probe may take unless `XRUNLAB_PROBE_TIMEOUT_S` says otherwise.
const DEFAULT_PROBE_TIMEOUT_S: f64 = 10.0;

fn probe_timeout() -> Duration {
    let s = std::env::var("XRUNLAB_PROBE_TIMEOUT_S")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.1 && *s <= 3600.0)
        .unwrap_or(DEFAULT_PROBE_TIMEOUT_S);
    Duration::from_secs_f64(s)
}

/// The plugins of the file at `path`, probed by a contained child (`dsp::contain`) that
/// loads it, runs its entry and each plugin's `init` and writes what it found; once per file
/// and process. A child that crashes, hangs or exits without a result makes the file one
/// unhostable entry (`broken`) saying so: crashed (SIGSEGV) in clap_entry.init, hung > 10 s
/// in clap_plugin.init (ID).
///
/// Only the xrunlab binary has the probe child: a program that uses the library itself (a
/// test harness) probes in its own process with `in_process`, as before.
pub fn contained<P>(
    kind: &Kind,
    path: &Path,
    in_process: impl Fn(&Path) -> Vec<P>,
    broken: impl Fn(&Path, String) -> P,
) -> Vec<P>
where
    P: Probed + Serialize + DeserializeOwned,
{
    let Some(exe) = own_binary() else {
        return in_process(path);
    };
    type Cache = Mutex<HashMap<(&'static str, PathBuf), String>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let key = (kind.prefix, path.to_path_buf());
    let cached = CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&key)
        .cloned();
    let text = match cached {
        Some(t) => t,
        None => match probe_in_child(&exe, kind, path) {
            Ok(t) => {
                CACHE
                    .get_or_init(Default::default)
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(key, t.clone());
                t
            }
            Err(why) => return vec![broken(path, why)],
        },
    };
    serde_json::from_str(&text).unwrap_or_else(|e| {
        vec![broken(
            path,
            format!("its probe's result does not read back: {e}"),
        )]
    })
}

/// This process's binary when it is xrunlab's (which has the hidden probe subcommand).
fn own_binary() -> Option<PathBuf> {
    std::env::current_exe()
        .ok()
        .filter(|p| p.file_name().is_some_and(|n| n == "xrunlab"))
}

/// Run the probe child for `path`: its result's text, or why there is none.
fn probe_in_child(exe: &Path, kind: &Kind, path: &Path) -> std::result::Result<String, String> {
    let scratch = Scratch::new("probe").map_err(|e| e.to_string())?;
    let mut cmd = std::process::Command::new(exe);
    cmd.args(PROBE_CHILD_ARGS)
        .args(["--format", kind.prefix, "--dir"])
        .arg(scratch.path())
        .arg("--")
        .arg(path);
    let limit = probe_timeout();
    let ended = contain::run(cmd, scratch.path(), limit).map_err(|e| e.to_string())?;
    // A result written is the probe's answer, whatever the plugin's exit handlers did after.
    if let Ok(text) = std::fs::read_to_string(scratch.path().join(RESULT)) {
        return Ok(text);
    }
    let stage = &ended.stage;
    Err(match ended.end {
        End::Signalled(sig) => format!("crashed ({sig}) in {stage}"),
        End::Hung => format!("hung > {} s in {stage}", limit.as_secs_f64()),
        End::Interrupted => "its probe was interrupted (Ctrl-C)".into(),
        End::Exited(code) => {
            let tail = ended.tail_lines(3);
            format!(
                "exited (code {code}) without a result in {stage}{}",
                if tail.is_empty() {
                    String::new()
                } else {
                    format!(": {tail}")
                }
            )
        }
    })
}

/// The probe child's side: probe `file` in this process with `plugins_of` and write what
/// it found into `dir` for the parent.
pub fn probe_child<P: Serialize>(
    dir: &Path,
    file: &Path,
    plugins_of: impl Fn(&Path) -> Vec<P>,
) -> Result<()> {
    contain::set_stage_dir(dir);
    let found = plugins_of(file);
    contain::stage("writing the result");
    let text = serde_json::to_string(&found)
        .map_err(|e| Error::cannot_measure(format!("serialising a probe: {e}")))?;
    // Written whole under another name, then renamed: the parent never reads half a result.
    let part = dir.join("result.part");
    std::fs::write(&part, text)
        .and_then(|_| std::fs::rename(&part, dir.join(RESULT)))
        .map_err(|e| Error::io(format!("writing {}", dir.join(RESULT).display()), e))
}
