//! `xrunlab plugins list` and `xrunlab plugins bench`.

use super::output::{self, Measured, Started};
use super::Global;
use crate::dsp::bench::{
    bench_element_on, BenchConfig, BenchResult, Signal, MAX_INSTANCES, NEVER_RETURNS,
};
use crate::dsp::{parse_chain, registry, ChainElement, PluginContext};
use crate::error::Result;
use crate::report::table::{self, new_table};
use crate::results::{Body, Status};
use clap::{Args, Subcommand};
use comfy_table::Cell;

/// The built-in plugins: list them, or measure their cost per frame.
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
    /// List the built-in plugins with their parameters.
    #[command(after_help = "Examples:\n  xrunlab plugins list")]
    List,
    /// Cost per frame and share of one core per instance: the physical limit of instances per core.
    #[command(
        after_help = "PLUGIN is a chain element: name[(params)][:count]; a count runs that many distinct instances in\nseries (every figure stays per instance, cache effects included). --instances 1,8,96 measures each\nplugin at each count instead: the cost per instance as a function of K. Without PLUGIN every\nplugin is measured.\n\nEvery block is timed: the mean per frame (all blocks' time / frames / instances, lv2bench's\nfigure; lv2bench feeds silence), and per block p50, p99, p99.9 and max, where bursts show. The\nmedian of ~50 µs groups (robust against host steal) gives % core and instances per core.\n\nExamples:\n  xrunlab plugins bench reverb-light reverb-heavy\n  xrunlab plugins bench --buffer 64 'reverb(N=4,BSO=5)' reverb-heavy:8\n  xrunlab plugins bench --instances 1,8,32,96 reverb-heavy\n  xrunlab plugins bench --signal silence --buffer 512 reverb-light\n  xrunlab plugins bench --json reverb-heavy > bench.json"
    )]
    Bench(BenchArgs),
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Sample rate in Hz.
    #[arg(long, default_value_t = 48000)]
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
    /// Plugins to measure (default: all but those that never return).
    #[arg(value_name = "PLUGIN")]
    pub plugins: Vec<String>,
}

pub fn run(a: PluginsArgs, g: &Global) -> Result<u8> {
    match a.command {
        PluginsCommand::List => {
            let mut t = new_table(&["plugin", "description", "parameters"]);
            for i in registry::list() {
                t.add_row(vec![
                    Cell::new(i.name),
                    Cell::new(i.description),
                    Cell::new(i.params),
                ]);
            }
            if !g.quiet {
                println!("{t}");
            }
            Ok(0)
        }
        PluginsCommand::Bench(b) => bench(b, g),
    }
}

fn bench(b: BenchArgs, g: &Global) -> Result<u8> {
    let duration_ns = crate::units::parse_duration_ns(&b.duration)?;
    if duration_ns == 0 || duration_ns > 600_000_000_000 {
        return super::usage(format!(
            "--duration {}: must be within 1ns..10m",
            b.duration
        ));
    }
    if !(1000..=768_000).contains(&b.rate) {
        return super::usage(format!("--rate {}: must be within 1000..768000 Hz", b.rate));
    }
    if !(1..=8192).contains(&b.buffer) {
        return super::usage(format!(
            "--buffer {}: must be within 1..8192 frames",
            b.buffer
        ));
    }
    let instances = match &b.instances {
        None => None,
        Some(s) => {
            let v = crate::units::parse_uint_list("--instances", s, true, MAX_INSTANCES)?;
            if v.contains(&0) {
                return super::usage(format!(
                    "--instances {s}: every count must be within 1..{MAX_INSTANCES}"
                ));
            }
            Some(v)
        }
    };
    let elements: Vec<ChainElement> = if b.plugins.is_empty() {
        registry::list()
            .filter(|i| !NEVER_RETURNS.contains(&i.name))
            .map(|i| ChainElement {
                plugin: i.name.to_string(),
                params: String::new(),
                count: 1,
            })
            .collect()
    } else {
        let mut v = Vec::new();
        for p in &b.plugins {
            v.extend(parse_chain(p)?);
        }
        v
    };
    for e in &elements {
        if e.count > MAX_INSTANCES {
            return super::usage(format!(
                "{}:{}: at most {MAX_INSTANCES} instances in series",
                e.plugin, e.count
            ));
        }
        if instances.is_some() && e.count != 1 {
            return super::usage(format!(
                "{}:{}: give the instance count either as :N or with --instances, not both",
                e.plugin, e.count
            ));
        }
    }
    // One run per plugin and instance count, the counts of a plugin ascending.
    let runs: Vec<ChainElement> = match &instances {
        None => elements.clone(),
        Some(ks) => elements
            .iter()
            .flat_map(|e| {
                ks.iter()
                    .map(move |&count| ChainElement { count, ..e.clone() })
            })
            .collect(),
    };
    let ctx = PluginContext {
        rate: b.rate,
        max_frames: b.buffer as usize,
    };
    let explicit = !b.plugins.is_empty();
    let started = Started::now(Vec::new());
    let mut results: Vec<BenchResult> = Vec::new();
    let mut skipped: Vec<String> = Vec::new();
    for e in &runs {
        match bench_element_on(e, &ctx, duration_ns, b.signal) {
            Ok(r) => results.push(r),
            // Asked for by name: a bad name or parameter is the user's error.
            Err(err) if explicit => return Err(err),
            // Listing everything: a plugin that cannot run without parameters is noted.
            Err(err) => {
                let s = format!("{}: {err}", e.plugin);
                if !skipped.contains(&s) {
                    skipped.push(s);
                }
            }
        }
    }
    let mut human = table::bench(&results, b.rate, b.buffer);
    for s in &skipped {
        human.push_str(&format!("skipped {s}\n"));
    }
    let body = Body::Bench {
        config: BenchConfig {
            rate: b.rate,
            buffer_frames: b.buffer,
            duration_ns,
            plugins: elements,
            instances,
            signal: b.signal,
        },
        results,
    };
    output::finish(Measured::new(body, Status::Complete, started, human), g)
}
