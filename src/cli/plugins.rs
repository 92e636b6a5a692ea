//! `xrunlab plugins list` and `xrunlab plugins bench`.

use super::output::{self, Measured, Started};
use super::Global;
use crate::dsp::bench::{bench_element, BenchConfig, BenchResult, NEVER_RETURNS};
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
        after_help = "PLUGIN is a chain element: name[(params)][:count]; a count runs that many instances in series\n(the figure stays per instance, cache effects included). Without PLUGIN every plugin is measured.\n\nExamples:\n  xrunlab plugins bench reverb-light reverb-heavy\n  xrunlab plugins bench --buffer 64 'reverb(N=4,BSO=5)' reverb-heavy:8\n  xrunlab plugins bench --json reverb-heavy > bench.json"
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
    let ctx = PluginContext {
        rate: b.rate,
        max_frames: b.buffer as usize,
    };
    let explicit = !b.plugins.is_empty();
    let started = Started::now(Vec::new());
    let mut results: Vec<BenchResult> = Vec::new();
    let mut skipped: Vec<String> = Vec::new();
    for e in &elements {
        match bench_element(e, &ctx, duration_ns) {
            Ok(r) => results.push(r),
            // Asked for by name: a bad name or parameter is the user's error.
            Err(err) if explicit => return Err(err),
            // Listing everything: a plugin that cannot run without parameters is noted.
            Err(err) => skipped.push(format!("{}: {err}", e.plugin)),
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
        },
        results,
    };
    output::finish(Measured::new(body, Status::Complete, started, human), g)
}
