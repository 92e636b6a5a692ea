//! `xrunlab plugins list|show|bench`: the built-in and installed (LV2, CLAP, VST3) plugins and their
//! cost.

use super::output::{self, Measured, Started};
use super::Global;
use crate::dsp::format::{PluginFormat, PortKind};
use crate::dsp::plugin_cost::{BenchRequest, BenchResult, Signal};
use crate::dsp::registry;
use crate::error::Result;
use crate::report::text::style::new_table;
use crate::results::{Body, Status};
use clap::{Args, Subcommand};
use comfy_table::Cell;

/// Built-in and installed LV2, CLAP and VST3 plugins: list and show them, or measure their cost per block and
/// per frame.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  xrunlab plugins list\n  xrunlab plugins bench reverb-light reverb-heavy\n  xrunlab plugins bench --buffer 64 --duration 5s 'reverb(N=4,NB=3)'"
)]
pub struct PluginsArgs {
    #[command(subcommand)]
    pub command: PluginsCommand,
}

#[derive(Debug, Subcommand)]
pub enum PluginsCommand {
    /// List the built-in plugins with their parameters, or (--lv2, --clap, --format, FILTER) the
    /// installed ones, each saying whether xrunlab can host it and if not why.
    #[command(
        after_help = "LV2 plugins are found on LV2_PATH (default ~/.lv2:/usr/local/lib/lv2:/usr/lib/lv2). Each is\nused in a chain as lv2:URI or lv2:NAME, with control values as lv2:URI(symbol=value,…).\nCLAP plugins are found on CLAP_PATH, in ~/.clap and /usr/lib/clap (one .clap file may hold\nseveral); each is used as clap:ID or clap:NAME, with parameters as clap:ID(name=value,…).\nVST3 plugins are found on VST3_PATH if set, else in ~/.vst3, /usr/lib/vst3, /usr/local/lib/vst3\n(bundles X.vst3); each is used as vst3:CLASSID, vst3:NAME or vst3:/path/X.vst3, with\nparameters in plain units as vst3:NAME(name=value,…).\nA FILTER without a format searches every installed format.\nA plugin runs inside xrunlab's process: one that crashes takes xrunlab with it, after a line\nnaming it on stderr (stressors started by xrunlab die with it).\nListing and describing load each CLAP file and VST3 bundle in a child process of its own: one\nthat crashes or hangs there (over 10 s, XRUNLAB_PROBE_TIMEOUT_S) is listed as not hostable with why.\n\nExamples:\n  xrunlab plugins list\n  xrunlab plugins list --lv2\n  xrunlab plugins list --lv2 reverb\n  xrunlab plugins list --clap\n  xrunlab plugins list --format lv2,clap,vst3 zam\n  xrunlab plugins list --format vst3\n  xrunlab --json plugins list --lv2 > lv2.json"
    )]
    List(ListArgs),
    /// The ports of one installed plugin (LV2, CLAP, VST3): kinds, ranges and defaults, required
    /// features, whether it can be hosted.
    #[command(
        after_help = "Examples:\n  xrunlab plugins show urn:dragonfly:room\n  xrunlab plugins show 'Dragonfly Hall Reverb'\n  xrunlab plugins show lv2:amp\n  xrunlab plugins show clap:com.zamaudio.ZamComp\n  xrunlab plugins show vst3:ZamComp"
    )]
    Show(ShowArgs),
    /// Cost per frame and share of one core per instance: the physical limit of instances per core.
    #[command(
        after_help = "PLUGIN is a chain element: name[(params)][:count]; a count runs that many distinct instances in\nseries (every figure stays per instance, cache effects included). --instances 1,8,96 measures each\nplugin at each count instead: the cost per instance as a function of K. Without PLUGIN every\nplugin is measured. --all FORMAT (lv2, clap, vst3) measures every installed plugin of a format,\nand a folder as PLUGIN every CLAP plugin file or VST3 bundle in it; what cannot be hosted is skipped with the reason.\n\nEvery block is timed: the mean per frame (all blocks' time / frames / instances, lv2bench's\nfigure; lv2bench feeds silence), and per block p50, p99, p99.9 and max, where bursts show. The\nmedian of ~50 µs groups (robust against host steal) gives % core and instances per core.\n\nExamples:\n  xrunlab plugins bench reverb-light reverb-heavy\n  xrunlab plugins bench --buffer 64 'reverb(N=4,BSO=5)' reverb-heavy:8\n  xrunlab plugins bench --instances 1,8,32,96 reverb-heavy\n  xrunlab plugins bench --signal silence --buffer 512 reverb-light\n  xrunlab plugins bench --json reverb-heavy > bench.json\n  xrunlab plugins bench --all clap --duration 500ms\n  xrunlab plugins bench ~/.clap\n  xrunlab plugins bench --all vst3 --duration 500ms"
    )]
    Bench(BenchArgs),
    /// Is this plugin safe to play live? Allocations, locks and blocking calls on the audio
    /// thread, its output, its cost's tails and bursts, its latency and state; each plugin in
    /// a child process.
    #[command(after_help = super::audit::AUDIT_HELP)]
    Audit(super::audit::AuditArgs),
    #[command(hide = true)]
    AuditChild(super::audit::AuditChildArgs),
    #[command(hide = true)]
    ProbeChild(ProbeChildArgs),
}

/// The probe child's arguments (hidden: `dsp::files::contained` starts it): load one CLAP
/// file or VST3 bundle, describe its plugins, write them into --dir.
#[derive(Debug, Args)]
pub struct ProbeChildArgs {
    #[arg(long, value_name = "FORMAT")]
    pub format: String,
    #[arg(long)]
    pub dir: std::path::PathBuf,
    pub file: std::path::PathBuf,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// List the installed LV2 plugins instead of the built-in ones.
    #[arg(long)]
    pub lv2: bool,
    /// List the installed CLAP plugins instead of the built-in ones.
    #[arg(long)]
    pub clap: bool,
    /// List the installed plugins of these formats (lv2, clap, vst3).
    #[arg(long, value_name = "FORMAT[,FORMAT…]", value_delimiter = ',')]
    pub format: Vec<String>,
    /// Only installed plugins whose identifier or name contains this (case-insensitive); without
    /// a format, of every installed format.
    #[arg(value_name = "FILTER")]
    pub filter: Option<String>,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The plugin's URI, id or name (an `lv2:`, `clap:` or `vst3:` prefix picks the format).
    #[arg(value_name = "PLUGIN")]
    pub plugin: String,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Sample rate in Hz.
    #[arg(long, default_value_t = 48000, value_name = "HZ", value_parser = crate::units::parse_rate)]
    pub rate: u32,
    /// Frames per block (the driver's buffer size).
    #[arg(long, default_value_t = 256)]
    pub buffer: u32,
    /// Timing per plugin, e.g. 2s, 500ms.
    #[arg(long, default_value = "2s")]
    pub duration: String,
    /// The input: noise (white, −20 dBFS peak, −24.8 dBFS RMS), silence (zeros: some plugins'
    /// feedback paths turn denormal on it) or sine (1 kHz, −20 dBFS peak).
    #[arg(long, value_enum, default_value_t = Signal::Noise)]
    pub signal: Signal,
    /// Distinct instances in series, a list (e.g. 1,8,32,96; a range a..b takes its powers of
    /// two), each 1..4096: one result per plugin and count, the cost per instance against K.
    #[arg(long, value_name = "K[,K…]")]
    pub instances: Option<String>,
    /// Every installed plugin of this format (lv2, clap, vst3), besides any PLUGIN.
    #[arg(long, value_name = "FORMAT")]
    pub all: Option<String>,
    /// Plugins to measure (default: all built-ins but those that never return), or folders
    /// of CLAP plugin files or VST3 bundles.
    #[arg(value_name = "PLUGIN")]
    pub plugins: Vec<String>,
}

pub fn run(a: PluginsArgs, g: &Global) -> Result<u8> {
    match a.command {
        // The flags name the formats whose installed plugins are listed.
        PluginsCommand::List(l)
            if l.lv2 || l.clap || !l.format.is_empty() || l.filter.is_some() =>
        {
            let formats = list_formats(&l)?;
            list_installed(&formats, l.filter.as_deref(), g)
        }
        PluginsCommand::Show(s) => show(&s.plugin, g),
        PluginsCommand::List(_) => {
            let mut t = new_table(&["plugin", "description", "parameters"]);
            for i in registry::list() {
                t.add_row(vec![
                    Cell::new(i.name),
                    Cell::new(i.description),
                    Cell::new(i.params),
                ]);
            }
            if !g.quiet {
                output::human(&format!("{t}\n"));
            }
            Ok(0)
        }
        PluginsCommand::Bench(b) => bench(b, g),
        PluginsCommand::Audit(a) => super::audit::run(a, g),
        PluginsCommand::AuditChild(a) => super::audit::child(a),
        PluginsCommand::ProbeChild(p) => {
            match p.format.as_str() {
                "clap" => crate::dsp::clap::catalog::probe_child(&p.dir, &p.file)?,
                "vst3" => crate::dsp::vst3::catalog::probe_child(&p.dir, &p.file)?,
                other => return super::usage(format!("probe-child: no file format '{other}'")),
            }
            Ok(0)
        }
    }
}

/// The PLUGIN arguments with `--all FORMAT` and folders replaced by the plugins they hold,
/// what of those cannot be hosted, and whether anything was expanded.
fn expand(b: &BenchArgs) -> Result<(Vec<String>, Vec<String>, bool)> {
    let (mut plugins, mut unhostable, mut expanded) = (Vec::new(), Vec::new(), false);
    if let Some(key) = &b.all {
        let (ok, not) = registry::all_of(key)?;
        plugins.extend(ok);
        unhostable.extend(not);
        expanded = true;
    }
    for p in &b.plugins {
        let path = std::path::Path::new(p);
        if (p.contains('/') || p == ".") && !p.contains(':') && path.is_dir() {
            let (ok, not) = registry::in_dir(path)?;
            plugins.extend(ok);
            unhostable.extend(not);
            expanded = true;
        } else {
            plugins.push(p.clone());
        }
    }
    if expanded && plugins.is_empty() {
        return Err(crate::error::Error::usage(format!(
            "no plugin to bench that can be hosted{}",
            if unhostable.is_empty() {
                String::new()
            } else {
                format!(": {}", unhostable.join("; "))
            }
        )));
    }
    Ok((plugins, unhostable, expanded))
}

fn bench(b: BenchArgs, g: &Global) -> Result<u8> {
    let (plugins, unhostable, expanded) = expand(&b)?;
    let mut plan = crate::dsp::plugin_cost::plan(&BenchRequest {
        rate: b.rate,
        buffer: b.buffer,
        duration: &b.duration,
        signal: b.signal,
        instances: b.instances.as_deref(),
        plugins: &plugins,
    })?;
    // A folder or a whole format is the user's collection, not names they typed: one that
    // fails is skipped with its reason and the bench goes on.
    if expanded {
        plan.explicit = false;
    }
    let progress = crate::progress::for_terminal(g.quiet || plan.runs.len() < 2, 0);
    let started = Started::now(Vec::new());
    let out = crate::measure::plugin_bench::bench_runs(
        &plan.runs,
        &plan.context(),
        plan.config.duration_ns,
        plan.config.signal,
        plan.explicit,
        progress.as_ref(),
    )?;
    let mut skipped = unhostable;
    skipped.extend(crate::dsp::plugin_cost::skipped(&out.failed));
    let results: Vec<BenchResult> = out.results;
    let results_len = results.len();
    let mut human =
        crate::report::text::bench::summary(&results, plan.config.rate, plan.config.buffer_frames);
    for s in &skipped {
        human.push_str(&format!("skipped {s}\n"));
    }
    let body = Body::Bench {
        config: plan.config,
        results,
    };
    let how = match out.status {
        Status::Watchdog => "stopped by the watchdog",
        _ => "interrupted",
    };
    // Why it stopped is the result's warning, printed above this line.
    let partial = format!(
        "xrunlab: bench {how} after {results_len} of {} runs; partial result reported\n",
        plan.runs.len()
    );
    let measured = Measured::new(body, out.status, started, human)
        .warnings(out.stopped.clone())
        .partial(partial);
    // A thread abandoned inside a plugin (out.abandoned) is never joined: the process ends
    // with it when this returns (a watchdog stop exits in `finish`).
    output::finish(measured, g)
}

fn print_json<T: serde::Serialize>(v: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(v)
        .map_err(|e| crate::error::Error::cannot_measure(format!("serialising: {e}")))?;
    output::stdout(&format!("{text}\n"));
    Ok(())
}

/// The formats `plugins list` was asked for, in registration order; every installed format
/// when only a filter was given.
fn list_formats(l: &ListArgs) -> Result<Vec<&'static dyn PluginFormat>> {
    let installed = || registry::formats().filter(|f| !f.key().is_empty());
    let mut keys: Vec<String> = l.format.iter().map(|k| k.trim().to_lowercase()).collect();
    keys.extend(l.lv2.then(|| "lv2".to_string()));
    keys.extend(l.clap.then(|| "clap".to_string()));
    for k in &keys {
        if registry::by_key(k).is_none() {
            let known: Vec<&str> = installed().map(|f| f.key()).collect();
            return Err(crate::error::Error::usage(format!(
                "--format {k}: no such plugin format; known are {}",
                known.join(", ")
            )));
        }
    }
    Ok(installed()
        .filter(|f| keys.is_empty() || keys.iter().any(|k| k == f.key()))
        .collect())
}

fn list_installed(
    formats: &[&'static dyn PluginFormat],
    filter: Option<&str>,
    g: &Global,
) -> Result<u8> {
    if g.json {
        let mut all = Vec::new();
        for f in formats {
            for d in f.list(filter) {
                let mut v = serde_json::to_value(&d).unwrap_or_default();
                v["format"] = f.key().into();
                all.push(v);
            }
        }
        print_json(&all)?;
        return Ok(0);
    }
    if g.quiet {
        return Ok(0);
    }
    for f in formats {
        list_format(*f, filter);
    }
    Ok(0)
}

/// One format's table of installed plugins.
fn list_format(f: &dyn PluginFormat, filter: Option<&str>) {
    let found = f.list(filter);
    if found.is_empty() {
        output::human(&format!(
            "no {} plugin{} found on {}\n",
            f.title(),
            filter
                .map(|f| format!(" matching '{f}'"))
                .unwrap_or_default(),
            f.search_path()
        ));
        return;
    }
    let id = if f.key() == "lv2" { "URI" } else { "id" };
    let mut t = new_table(&[id, "name", "ports", "required features", "hostable"]);
    for d in &found {
        let features: Vec<&str> = d
            .required_features
            .iter()
            .map(|f| f.rsplit(['/']).next().unwrap_or(f))
            .collect();
        t.add_row(vec![
            Cell::new(&d.uri),
            Cell::new(&d.name),
            Cell::new(d.ports_summary()),
            Cell::new(features.join(" ")),
            Cell::new(match &d.unhostable {
                None => "yes".to_string(),
                Some(why) => format!("no: {why}"),
            }),
        ]);
    }
    // URIs are copied into --chain: never wrap them.
    if let Some(c) = t.column_mut(0) {
        c.set_constraint(comfy_table::ColumnConstraint::ContentWidth);
    }
    let hostable = found.iter().filter(|d| d.unhostable.is_none()).count();
    output::human(&format!("{t}\n"));
    output::human(&format!(
        "{} {} plugins, {hostable} hostable; use one as {p}{id} or {p}NAME in --chain/--plugins\n",
        found.len(),
        f.title(),
        p = f.prefix()
    ));
}

fn show(target: &str, g: &Global) -> Result<u8> {
    let (f, d) = registry::describe(target)?;
    if g.json {
        print_json(&d)?;
        return Ok(0);
    }
    if g.quiet {
        return Ok(0);
    }
    output::human(&format!("{} ({}, {})\n", d.name, d.uri, d.class));
    output::human(&format!(
        "required features: {}\n",
        if d.required_features.is_empty() {
            "none".to_string()
        } else {
            d.required_features.join(", ")
        }
    ));
    match &d.unhostable {
        None => output::human("hostable: yes\n"),
        Some(why) => output::human(&format!("hostable: no: {why}\n")),
    }
    if let Some(i) = d.latency_port {
        output::human(&format!("reports its latency on port {i}\n"));
    }
    let mut t = new_table(&["#", "symbol", "name", "kind", "dir", "default", "range"]);
    for p in &d.ports {
        let opt = |v: Option<f32>| v.map(|v| format!("{v}")).unwrap_or_default();
        t.add_row(vec![
            Cell::new(p.index),
            Cell::new(&p.symbol),
            Cell::new(&p.name),
            Cell::new(match (p.kind, &p.unsupported_class) {
                (PortKind::Unsupported, Some(c)) => format!("unsupported ({c})"),
                (k, _) => serde_json::to_value(k)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
            }),
            Cell::new(if p.input { "in" } else { "out" }),
            Cell::new(opt(p.default)),
            Cell::new(if p.minimum.is_some() || p.maximum.is_some() {
                p.range_text()
            } else {
                String::new()
            }),
        ]);
    }
    output::human(&format!("{t}\n"));
    if d.unhostable.is_some() {
        return Ok(0);
    }
    let controls: Vec<String> = d
        .ports
        .iter()
        .filter(|p| p.kind == PortKind::Control && p.input)
        .take(2)
        .map(|p| format!("{}={}", p.symbol, opt_num(p.default)))
        .collect();
    output::human(&format!(
        "use: --chain '{}{}{}'\n",
        f.prefix(),
        d.uri,
        if controls.is_empty() {
            String::new()
        } else {
            format!("({})", controls.join(","))
        }
    ));
    Ok(0)
}

fn opt_num(v: Option<f32>) -> String {
    v.map(|v| format!("{v}")).unwrap_or_else(|| "0".into())
}
