//! Which driver paces the cycles, and what that means for the callers: one enum for the
//! command line (`--driver`), the configs and the results (lowercase names in JSON).

use crate::error::{Error, Result};
use crate::rt::Policy;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DriverKind {
    // A timer-paced software codec (CLOCK_MONOTONIC, cyclictest's method). Undocumented
    // variants keep the result schema's text as it was.
    Virtual,
    // The deterministic simulator: simulated time, a latency model, injected events.
    Sim,
    /// The engine as a JACK client (jackd2, or PipeWire under pw-jack).
    Jack,
    /// The engine pushing periods straight into an ALSA PCM.
    Alsa,
}

/// Where the period size comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BufferSource {
    /// The caller's `--buffer` (a device may round it: ALSA).
    Asked,
    /// The server's current size, unless the caller asks it to change (JACK `--set-buffer`).
    Server,
}

/// Where the sim driver's compute time comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ComputeKind {
    /// Run the DSP and take its measured time.
    Measured,
    /// The cost model (see `engine::cost`).
    Model,
}

impl DriverKind {
    pub const ALL: [DriverKind; 4] = [
        DriverKind::Virtual,
        DriverKind::Sim,
        DriverKind::Jack,
        DriverKind::Alsa,
    ];

    pub fn name(self) -> &'static str {
        match self {
            DriverKind::Virtual => "virtual",
            DriverKind::Sim => "sim",
            DriverKind::Jack => "jack",
            DriverKind::Alsa => "alsa",
        }
    }

    /// Cycles run on real time (CLOCK_MONOTONIC) rather than a simulated timeline: real-time
    /// scheduling, the watchdog's bound and the host's steal mean something.
    pub fn real_time(self) -> bool {
        self != DriverKind::Sim
    }

    /// The sim driver's timeline: its latency model, injected events and cost model apply.
    pub fn simulated(self) -> bool {
        !self.real_time()
    }

    /// The engine's policy unless asked otherwise: FIFO 80 on real time, OTHER on sim.
    pub fn default_policy(self) -> Policy {
        if self.real_time() {
            Policy::fifo(80)
        } else {
            Policy::Other { nice: 0 }
        }
    }

    /// Where compute time comes from unless asked otherwise.
    pub fn default_compute(self) -> ComputeKind {
        if self.real_time() {
            ComputeKind::Measured
        } else {
            ComputeKind::Model
        }
    }

    /// A cost model can stand in for compute time (it needs simulated time).
    pub fn can_model_compute(self) -> bool {
        self.simulated()
    }

    /// `--periods` applies. A JACK client's cycle is always "done before the next cycle
    /// starts": n = 2 whatever is asked.
    pub fn periods_apply(self) -> bool {
        self != DriverKind::Jack
    }

    pub fn buffer_source(self) -> BufferSource {
        match self {
            DriverKind::Jack => BufferSource::Server,
            _ => BufferSource::Asked,
        }
    }

    /// `mlockall` for the run matters (a simulated run cannot page-fault into lateness).
    pub fn mlock_applies(self) -> bool {
        self.real_time()
    }

    /// Sampling the hypervisor's steal beside the run means something (sim runs on its own
    /// clock).
    pub fn steal_sampling(self) -> bool {
        self.real_time()
    }

    /// The probe ring blocks the engine when the collector falls behind instead of dropping
    /// records: only simulated time can wait.
    pub fn block_when_full(self) -> bool {
        !self.real_time()
    }

    /// A command that takes only some drivers: a usage error (exit 2) naming the accepted
    /// ones for any other.
    pub fn accept(self, command: &str, accepted: &[DriverKind]) -> Result<Self> {
        if accepted.contains(&self) {
            Ok(self)
        } else {
            let names: Vec<&str> = accepted.iter().map(|k| k.name()).collect();
            Err(Error::usage(format!(
                "{command} --driver {}: not available here (use {})",
                self.name(),
                names.join(", ")
            )))
        }
    }
}

impl std::fmt::Display for DriverKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_json_names() {
        for k in DriverKind::ALL {
            assert_eq!(serde_json::to_string(&k).unwrap(), format!("\"{k}\""));
        }
    }

    #[test]
    fn capabilities() {
        assert_eq!(DriverKind::Sim.default_policy(), Policy::Other { nice: 0 });
        assert_eq!(DriverKind::Alsa.default_policy(), Policy::fifo(80));
        assert!(!DriverKind::Jack.periods_apply());
        assert_eq!(DriverKind::Jack.buffer_source(), BufferSource::Server);
        assert_eq!(DriverKind::Sim.default_compute(), ComputeKind::Model);
        assert!(!DriverKind::Sim.mlock_applies() && DriverKind::Virtual.steal_sampling());
        let e = DriverKind::Alsa
            .accept("suite", &[DriverKind::Virtual, DriverKind::Jack])
            .unwrap_err();
        assert_eq!(e.exit_code(), 2);
    }
}
