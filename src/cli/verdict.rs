//! `xrunlab verdict`.

use super::{output, Global};
use crate::error::{Error, Result};
use crate::measure::predict::CostInput;
use crate::report::{self, verdict, Input};
use crate::results::verdict::VerdictConfig;
use crate::results::{read_result, Body, ResultDoc, Status};
use crate::system::Environment;
use crate::units::{parse_percent, parse_uint_list, MAX_BUFFER_FRAMES};
use clap::Args;
use std::path::PathBuf;

/// The answer first: per buffer size, the predicted glitches per hour idle and under stress,
/// measured xruns, DSP headroom and round-trip latency, the smallest size that meets a
/// target, the causes of the xruns seen and what to fix first.
#[derive(Debug, Args)]
#[command(after_help = "\
Reads a suite directory (the files its manifest lists) or result files: latency results
(idle and under stress) give the predictions (docs/methods.md 'Predicted xrun rate');
run results give measured xruns at their buffer size; load grids the most plugin instances
per track; rtl results the modelled and measured round trip; check results the advice,
ranked by the symptoms the measurements show. The recommendation is judged under stress when
a stressed latency result exists, else idle; a buffer size meets the target when its 95 %
interval lies within it and no run under the same condition surely exceeded it.

Exit codes: 0, or 1 with --fail-above when the recommended size is larger than BUFFER
(or no size is shown to meet the target); 2 for bad input (no results, a latency result
without histograms, results at another rate than --rate).

Examples:
  xrunlab suite --quick -o results && xrunlab verdict results
  xrunlab verdict lat-idle.json lat-stress.json load.json check.json
  xrunlab verdict results --target 0.1/h --periods 3 --load-pct 70
  xrunlab verdict results --cost run.json --fail-above 256   # in CI: exit 1 above 256 frames
  xrunlab verdict results --json -o verdict.json")]
pub struct VerdictArgs {
    /// A suite directory or result files.
    #[arg(required = true, value_name = "DIR|RESULT.json")]
    pub paths: Vec<PathBuf>,
    /// Glitch episodes per hour a buffer size may have: 1/h, 0.5/h, 10/day, 1/min.
    #[arg(long, default_value = "1/h", value_name = "RATE")]
    pub target: String,
    /// Period count n (the budget is (n-1)·P).
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub periods: u32,
    /// Buffer sizes in frames (a range keeps powers of two).
    #[arg(long, default_value = "16..1024", value_name = "LIST")]
    pub buffers: String,
    /// Sample rate [default: the results', else 48000].
    #[arg(long, value_name = "HZ", value_parser = crate::units::parse_rate)]
    pub rate: Option<u32>,
    /// The DSP cost as a share of each period [default: 50 % unless --cost].
    #[arg(long, value_name = "PERCENT", conflicts_with = "cost")]
    pub load_pct: Option<String>,
    /// The DSP cost from a run, load or plugins bench result (as `predict --cost`).
    #[arg(long, value_name = "FILE")]
    pub cost: Option<PathBuf>,
    /// With a --cost load grid of several columns: the one to use, e.g. 1:reverb-heavy.
    #[arg(long, value_name = "TRACKS:PLUGIN")]
    pub cell: Option<String>,
    /// Exit 1 when the smallest buffer size meeting the target is above BUFFER frames
    /// (the old --fail-if-above is still accepted).
    #[arg(long = "fail-above", alias = "fail-if-above", value_name = "BUFFER")]
    pub fail_if_above: Option<u32>,
    /// How latency samples beyond the budget are read (as `predict --holds`): wakeup, or the
    /// conservative timed.
    #[arg(long, value_enum, default_value = "wakeup")]
    pub holds: crate::measure::predict::Holds,
}

/// Kinds a verdict does not read: its own, and predictions (derived from latency results
/// that are read themselves).
const DERIVED: &[&str] = &["verdict", "predict"];

/// Every input the paths stand for, derived kinds left out, and the notes on how a
/// directory's were found.
pub fn load_all(paths: &[PathBuf]) -> Result<(Vec<Input>, Vec<String>)> {
    let mut inputs = Vec::new();
    let mut notes = Vec::new();
    for p in paths {
        let found = report::results_in(p)?;
        notes.extend(found.note);
        for f in found.files {
            crate::rt::interrupt::check(verdict::NOTHING_JUDGED)?;
            let i = report::load(&f)?;
            if !DERIVED.contains(&i.kind()) {
                inputs.push(i);
            }
        }
    }
    if inputs.is_empty() {
        return Err(Error::usage(
            "no result to judge: the inputs hold only predictions or verdicts",
        ));
    }
    Ok((inputs, notes))
}

fn cost(a: &VerdictArgs) -> Result<CostInput> {
    if let Some(p) = &a.load_pct {
        return Ok(CostInput::load_pct(parse_percent(p)?));
    }
    let Some(path) = a.cost.as_deref() else {
        return Ok(verdict::default_cost());
    };
    let doc = read_result(path)?;
    match &doc.body {
        Body::Run { config, results } => CostInput::from_run(path, config, results),
        Body::Bench { config, results } => CostInput::from_bench(path, config, results, None),
        Body::Load { config, results } => {
            CostInput::from_load(path, config, results, a.cell.as_deref())
        }
        other => Err(Error::input(
            path,
            format!(
                "is a {} result: --cost reads a run, load or bench result",
                other.kind()
            ),
        )),
    }
}

/// The verdict's settings, checked before any file is read.
fn settings(a: &VerdictArgs) -> Result<(f64, Vec<u32>)> {
    if !(2..=16).contains(&a.periods) {
        return super::usage(format!(
            "--periods {}: expected 2..16 (with one period the budget (n-1)·P is 0)",
            a.periods
        ));
    }
    let buffers = parse_uint_list("--buffers", &a.buffers, true, MAX_BUFFER_FRAMES)?;
    if buffers.contains(&0) {
        return super::usage("--buffers: a buffer of 0 frames");
    }
    if let Some(0) = a.fail_if_above {
        return super::usage("--fail-above 0: expected a buffer size in frames");
    }
    if a.cell.is_some() && a.cost.is_none() {
        return super::usage("--cell picks a column of the --cost load grid: give --cost");
    }
    if let Some(p) = &a.load_pct {
        parse_percent(p)?;
    }
    Ok((super::predict::parse_target(&a.target)?, buffers))
}

/// The verdict over `inputs` with the arguments' settings: the library call `suite` uses too.
pub fn judge(a: &VerdictArgs, inputs: &[Input]) -> Result<(VerdictConfig, ResultDocParts)> {
    let (target, buffers) = settings(a)?;
    let cost = cost(a)?;
    let mut cfg = verdict::settle(
        inputs,
        &cost,
        verdict::Options {
            rate: a.rate,
            periods: a.periods,
            buffers,
            target_per_hour: target,
            load_pct: a.load_pct.as_deref().map(parse_percent).transpose()?,
            cost_file: a.cost.as_ref().map(|p| p.display().to_string()),
            fail_if_above: a.fail_if_above,
            holds: a.holds,
        },
    )?;
    let results = verdict::build(&cfg, inputs, &cost)?;
    verdict::list_rows(&mut cfg, &results);
    let env = inputs
        .iter()
        .find_map(|i| i.environment().cloned())
        .unwrap_or_default();
    Ok((cfg, ResultDocParts { results, env }))
}

/// What `judge` adds to the config: the results and the machine they describe.
pub struct ResultDocParts {
    pub results: crate::results::verdict::VerdictResults,
    pub env: Environment,
}

pub fn run(a: VerdictArgs, g: &Global) -> Result<u8> {
    let started = crate::rt::clock::wall_clock_rfc3339();
    settings(&a)?;
    let (inputs, notes) = load_all(&a.paths)?;
    let (cfg, parts) = judge(&a, &inputs)?;
    crate::rt::interrupt::check(verdict::NOTHING_JUDGED)?;
    let human = crate::report::text::verdict::summary(&cfg, &parts.results);
    let failed = parts.results.failed_threshold;
    let mut doc = ResultDoc::new(
        Body::Verdict {
            config: cfg,
            results: Box::new(parts.results),
        },
        Status::Complete,
        started,
        parts.env,
    );
    // The environment is the inputs' machine; its warnings are theirs, said in their files.
    // What is said here is how the inputs were found.
    doc.warnings = notes;
    output::emit(&doc, g, &human)?;
    if !g.quiet {
        output::warn(&doc.warnings);
    }
    Ok(if failed { 1 } else { 0 })
}
