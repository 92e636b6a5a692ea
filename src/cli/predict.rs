//! `xrunlab predict`.

use super::{output, Global};
use crate::error::{Error, Result};
use crate::measure::predict::{self, CostInput, LatencyInput, PredictConfig};
use crate::results::{read_result, Body, ResultDoc, Status};
use crate::system::Environment;
use crate::units::{parse_duration_ns, parse_percent, parse_uint_list, MAX_BUFFER_FRAMES};
use clap::Args;
use std::path::{Path, PathBuf};

/// Expected glitches and xruns per hour for each buffer size and period count, from a latency result and
/// a compute time, with a confidence interval and an outlook against a target.
#[derive(Debug, Args)]
#[command(after_help = "\
A cycle misses when its wake-up latency (drawn from the latency result's histograms) plus its
compute time exceeds (n-1)·P. Per buffer size and period count: the chance a cycle misses,
late cycles per hour (xruns, as a driver that catches up counts them), glitches per hour
(episodes: runs of consecutive late cycles, one host stall each, what a listener hears), each with a 95 %
interval from the number of latency samples beyond the budget. With fewer than 3 such samples
the rate is only bounded ('< X') and the outlook says how long a latency measurement would
settle it. Outlook: ok when the interval lies within --target, fails when it lies above,
marginal when it contains it. Each of the audio thread's wake-ups draws one latency, as the
measurement's did (--holds wakeup, the default: on a KVM guest the delays came with wake-ups);
--holds timed reads a long sample as a stall in time that the audio thread meets however often
it wakes (conservative, for SMIs). docs/methods.md defines the model.

Examples:
  xrunlab latency --baseline idle --stress paper --duration 10m -o lat.json
  xrunlab predict --latency lat.json --load-pct 30
  xrunlab predict --latency idle=idle.json --latency stressed=stress.json --cost run.json
  xrunlab predict --latency ct.json --interval 200us --cost bench.json --buffers 64..512 --periods 2
  xrunlab predict --latency lat.json --cost load.json --cell 1:reverb-heavy --target 0.1/h -o predict.json
  xrunlab predict --latency lat.json --load-pct 40 --holds timed   # the conservative reading
  xrunlab predict --latency s=slice1.json --latency s=slice2.json --cost run1.json   # pooled")]
pub struct PredictArgs {
    /// A latency result (`latency -o`, or cyclictest data through `import`), as FILE or
    /// LABEL=FILE; repeatable. A result with an idle baseline gives two inputs. Files
    /// given one LABEL are pooled into one input: one condition measured in slices, e.g.
    /// between the runs it predicts (they must agree on interval, stress and --busy).
    #[arg(long = "latency", required = true, value_name = "[LABEL=]FILE", value_parser = LatencySpec::parse)]
    pub latency: Vec<LatencySpec>,
    /// The compute time from a result: a `run` (its compute wall time), a `load` grid (its
    /// DSP load at each cell's maximum) or a `plugins bench` (per-block percentiles).
    /// Scaled per frame to each buffer size.
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present = "load_pct",
        conflicts_with = "load_pct"
    )]
    pub cost: Option<PathBuf>,
    /// The compute time as a fixed share of each period, e.g. 30 or 30%.
    #[arg(long, value_name = "PERCENT")]
    pub load_pct: Option<String>,
    /// With a bench result measured at several instance counts: the count to use.
    #[arg(long, value_name = "K")]
    pub instances: Option<u32>,
    /// With a load grid of several columns: the one to use, e.g. 1:reverb-heavy.
    #[arg(long, value_name = "TRACKS:PLUGIN")]
    pub cell: Option<String>,
    /// Buffer sizes in frames (a range keeps powers of two).
    #[arg(long, default_value = "16..1024", value_name = "LIST")]
    pub buffers: String,
    /// Period counts n (the budget is (n-1)·P).
    #[arg(long, default_value = "2,3", value_name = "LIST")]
    pub periods: String,
    /// Sample rate [default: the cost result's, else 48000].
    #[arg(long, value_name = "HZ", value_parser = crate::units::parse_rate)]
    pub rate: Option<u32>,
    /// Episodes per hour a buffer size may have: 1/h, 0.5/h, 10/day, 1/min.
    #[arg(long, default_value = "1/h", value_name = "RATE")]
    pub target: String,
    /// Use only this CPU's samples [default: the CPU a `--cost` run's driver thread was
    /// pinned to, when the latency result measured it; else every CPU pooled].
    #[arg(long, value_name = "N")]
    pub cpu: Option<usize>,
    /// The measurement interval of latency files that do not record it (cyclictest -i).
    #[arg(long, value_name = "DURATION")]
    pub interval: Option<String>,
    /// How a latency sample beyond the budget is read: wakeup (each wake-up of the audio
    /// thread draws one latency, as the measurement's did) or timed (a long sample is a stall
    /// in time the audio thread meets however often it wakes: conservative, for machines
    /// whose long delays are SMIs or host preemption of busy vCPUs).
    #[arg(long, value_enum, default_value = "wakeup")]
    pub holds: predict::Holds,
}

/// One `--latency` value.
#[derive(Debug, Clone)]
pub struct LatencySpec {
    pub label: Option<String>,
    pub path: PathBuf,
}

impl LatencySpec {
    /// `FILE` or `LABEL=FILE`; a file whose name holds `=` is taken whole when it exists.
    fn parse(s: &str) -> std::result::Result<Self, String> {
        if s.is_empty() {
            return Err("expected FILE or LABEL=FILE".into());
        }
        match s.split_once('=') {
            Some((label, file)) if !Path::new(s).exists() => {
                if label.is_empty() || file.is_empty() {
                    return Err(format!("'{s}': expected FILE or LABEL=FILE"));
                }
                Ok(LatencySpec {
                    label: Some(label.to_string()),
                    path: PathBuf::from(file),
                })
            }
            _ => Ok(LatencySpec {
                label: None,
                path: PathBuf::from(s),
            }),
        }
    }

    fn label(&self) -> String {
        self.label.clone().unwrap_or_else(|| {
            self.path.file_stem().map_or_else(
                || self.path.display().to_string(),
                |s| s.to_string_lossy().into(),
            )
        })
    }
}

/// `1/h`, `0.5/h`, `10/day`, `2/min`, or a bare number per hour.
pub(crate) fn parse_target(s: &str) -> Result<f64> {
    let bad = || {
        Error::usage(format!(
            "--target '{s}': expected a rate such as 1/h, 0.5/h, 10/day or 1/min"
        ))
    };
    let (n, per) = s.split_once('/').unwrap_or((s, "h"));
    let n: f64 = n.trim().parse().map_err(|_| bad())?;
    let hours = match per.trim() {
        "h" | "hour" => 1.0,
        "min" | "minute" => 1.0 / 60.0,
        "s" => 1.0 / 3600.0,
        "d" | "day" => 24.0,
        _ => return Err(bad()),
    };
    if !(n.is_finite() && n > 0.0) {
        return Err(bad());
    }
    Ok(n / hours)
}

/// The compute time the arguments name.
fn cost(a: &PredictArgs) -> Result<CostInput> {
    if let Some(p) = &a.load_pct {
        let pct = parse_percent(p)?;
        return Ok(CostInput::load_pct(pct));
    }
    let path = a
        .cost
        .as_deref()
        .expect("clap requires --cost or --load-pct");
    let doc = read_result(path)?;
    if a.instances.is_some() && !matches!(doc.body, Body::Bench { .. }) {
        return super::usage("--instances picks bench results: --cost is not a bench result");
    }
    if a.cell.is_some() && !matches!(doc.body, Body::Load { .. }) {
        return super::usage("--cell picks a load grid's column: --cost is not a load result");
    }
    match &doc.body {
        Body::Run { config, results } => CostInput::from_run(path, config, results),
        Body::Bench { config, results } => {
            CostInput::from_bench(path, config, results, a.instances)
        }
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

/// Every latency input the `--latency` files hold, `cpu`'s samples only when given.
fn latency(
    a: &PredictArgs,
    cpu: Option<usize>,
    interval_ns: Option<u64>,
) -> Result<Vec<LatencyInput>> {
    let mut out = Vec::new();
    for spec in &a.latency {
        let doc: ResultDoc = read_result(&spec.path)?;
        let Body::Latency { config, results } = &doc.body else {
            return Err(Error::input(
                &spec.path,
                format!(
                    "is a {} result: --latency reads a latency result (xrunlab latency -o, or xrunlab import)",
                    doc.kind()
                ),
            ));
        };
        out.extend(LatencyInput::from_result(
            &spec.path,
            &spec.label(),
            config,
            results,
            cpu,
            interval_ns,
        )?);
    }
    predict::pool_by_label(out)
}

pub fn config(a: &PredictArgs, cost_rate: Option<u32>) -> Result<PredictConfig> {
    let rate = match (a.rate, cost_rate) {
        (Some(r), Some(c)) if r != c => {
            return Err(Error::input(
                a.cost.as_deref().unwrap_or(Path::new("--cost")),
                format!("was measured at {c} Hz, not the {r} Hz of --rate: a cycle's compute time depends on the rate it ran at; give --rate {c} or measure at {r} Hz"),
            ))
        }
        (Some(r), _) => r,
        (None, Some(c)) => c,
        (None, None) => 48_000,
    };
    crate::common::device::check_rate(rate)?;
    let periods = parse_uint_list("--periods", &a.periods, false, 16)?;
    if periods.contains(&0) || periods.contains(&1) {
        return super::usage(
            "--periods: n must be at least 2 (with one period the budget (n-1)·P is 0)",
        );
    }
    let buffers = parse_uint_list("--buffers", &a.buffers, true, MAX_BUFFER_FRAMES)?;
    if buffers.contains(&0) {
        return super::usage("--buffers: a buffer of 0 frames");
    }
    let interval_ns = a
        .interval
        .as_deref()
        .map(|s| match s.trim().parse::<u64>() {
            // A bare number is µs, as in cyclictest's -i.
            Ok(us) => Ok(us.saturating_mul(1000)),
            Err(_) => parse_duration_ns(s),
        })
        .transpose()?;
    if interval_ns == Some(0) {
        return super::usage("--interval must be greater than zero");
    }
    Ok(PredictConfig {
        latency: a
            .latency
            .iter()
            .map(|s| match &s.label {
                Some(l) => format!("{l}={}", s.path.display()),
                None => s.path.display().to_string(),
            })
            .collect(),
        cost_file: a.cost.as_ref().map(|p| p.display().to_string()),
        load_pct: a.load_pct.as_deref().map(parse_percent).transpose()?,
        instances: a.instances,
        cell: a.cell.clone(),
        cpu: a.cpu,
        interval_ns,
        rate,
        buffers,
        periods,
        target_per_hour: parse_target(&a.target)?,
        confidence: predict::CONFIDENCE,
        holds: a.holds,
    })
}

pub fn run(a: PredictArgs, g: &Global) -> Result<u8> {
    let started = crate::rt::clock::wall_clock_rfc3339();
    // Options first, so a typo costs no file reading; the rate check needs the cost file.
    config(&a, None)?;
    let cost = cost(&a)?;
    let mut cfg = config(&a, cost.rate)?;
    // A run pinned its driver thread: the latency that thread meets is its CPU's, when the
    // latency files measured that CPU (else every CPU pooled, as without a run).
    let inputs = match cost.engine_cpu.filter(|_| a.cpu.is_none()) {
        Some(c) => match latency(&a, Some(c), cfg.interval_ns) {
            Ok(i) => {
                cfg.cpu = Some(c);
                i
            }
            Err(_) => latency(&a, None, cfg.interval_ns)?,
        },
        None => latency(&a, a.cpu, cfg.interval_ns)?,
    };
    let results = predict::predict(&cfg, &inputs, &cost);
    let human = crate::report::text::predict::summary(&cfg, &results);
    let mut doc = ResultDoc::new(
        Body::Predict {
            config: cfg,
            results: Box::new(results),
        },
        Status::Complete,
        started,
        Environment::default(),
    );
    // An empty environment's warnings describe no machine.
    doc.warnings.clear();
    for i in &inputs {
        if i.info.censored > 0 {
            doc.warnings.push(format!(
                "{}: {} wake-ups above the histogram's bound are known only by their count; they are taken at the recorded maximum, so rates beyond the bound are upper bounds",
                i.info.file, i.info.censored
            ));
        }
    }
    let censored: Vec<String> = doc.warnings.clone();
    doc.warnings.push(
        "a prediction, not a measurement: the environment block is empty; each latency input's result records its own"
            .into(),
    );
    output::emit(&doc, g, &human)?;
    if !g.quiet {
        output::warn(&censored);
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_per_hour() {
        assert_eq!(parse_target("1/h").unwrap(), 1.0);
        assert_eq!(parse_target("0.5").unwrap(), 0.5);
        assert_eq!(parse_target("24/day").unwrap(), 1.0);
        assert_eq!(parse_target("1/min").unwrap(), 60.0);
        for bad in ["0/h", "-1/h", "x/h", "1/week", "nan/h"] {
            assert!(parse_target(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn latency_specs_take_a_label() {
        let s = LatencySpec::parse("idle=a/b.json").unwrap();
        assert_eq!(s.label.as_deref(), Some("idle"));
        assert_eq!(s.path, PathBuf::from("a/b.json"));
        assert_eq!(s.label(), "idle");
        let s = LatencySpec::parse("dir/lat.json").unwrap();
        assert_eq!(
            (s.label, s.path.clone()),
            (None, PathBuf::from("dir/lat.json"))
        );
        assert!(LatencySpec::parse("=x.json").is_err());
        assert!(LatencySpec::parse("").is_err());
    }
}
