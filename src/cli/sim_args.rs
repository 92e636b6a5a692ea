//! The sim driver's flags, declared once for `run` and `load` (`#[command(flatten)]`).

use crate::driver::sim::SimEvent;
use clap::{Args, ValueEnum};

/// What `run` has and `load` has not between the latency model and the cost model: `run`
/// flattens [`SimCompute`] there, `load` [`NoMore`], so each `--help` lists its flags in
/// the order it always has. `load` words three of the helps its own way
/// (`#[command(mut_arg(…))]` in `cli/load.rs`).
#[derive(Debug, Args)]
pub struct SimArgs<C: Args> {
    /// sim: wake-up latency model: const:D, normal:MEAN,SD, heavy:BASE,SCALE,ALPHA or
    /// file:PATH (JSON list of ns, [ns,count] pairs, CSV, or cyclictest -h output).
    #[arg(long, value_name = "MODEL", default_value = "const:0us")]
    pub sim_latency: String,
    #[command(flatten)]
    pub more: C,
    /// sim: declared cost of one plugin instance, NAME=DURATION (per cycle) or
    /// NAME=DURATION/frame. Repeatable.
    #[arg(long, value_name = "NAME=COST")]
    pub cost: Vec<String>,
    /// sim: engine overhead per cycle in the cost model.
    #[arg(long, value_name = "DURATION", default_value = "0ns", value_parser = crate::units::parse_duration_ns)]
    pub cost_overhead: u64,
    /// sim: inject an event: late:CYCLE:DURATION, compute:CYCLE:DURATION or
    /// preempt:CYCLE:DURATION. Repeatable.
    #[arg(long, value_name = "EVENT")]
    pub inject: Vec<SimEvent>,
}

impl<C: Args> SimArgs<C> {
    /// Any of the shared flags differs from its default (they need `--driver sim`).
    pub fn given(&self) -> bool {
        self.sim_latency != "const:0us"
            || !self.cost.is_empty()
            || self.cost_overhead != 0
            || !self.inject.is_empty()
    }
}

/// `run`'s `--sim-compute`.
#[derive(Debug, Args)]
pub struct SimCompute {
    /// sim: compute time from the cost model or from running the DSP.
    #[arg(long, value_enum, default_value = "model")]
    pub sim_compute: ComputeArg,
}

/// Where `run --driver sim` takes compute time from.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ComputeArg {
    Measured,
    Model,
}

/// Nothing more (`load`).
#[derive(Debug, Args)]
pub struct NoMore {}
