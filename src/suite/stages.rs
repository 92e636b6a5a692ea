//! The suite's stage table: what each stage runs (an argv of this same binary, without
//! `-o`), in quick, full and smoke mode, and what it needs to run at all.

pub use crate::results::suite::Mode;

/// A condition a stage needs; unmet, the stage is listed as skipped with the reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// The subcommand's `--driver` accepts the driver the stage's argv names (the suite's
    /// `--driver` where the argv says `{driver}`); `jack` also needs a JACK server to answer.
    Driver,
    /// Root: SCHED_FIFO and SCHED_DEADLINE for every policy row.
    Root,
}

pub struct Stage {
    pub name: &'static str,
    pub quick: &'static [&'static str],
    pub full: &'static [&'static str],
    pub smoke: &'static [&'static str],
    pub needs: &'static [Need],
    /// The command continues its own partial result with `--resume FILE`.
    pub resumable: bool,
    /// Said in the manifest when stress-ng is missing (the stage runs an approximation).
    pub uses_stress_ng: bool,
}

impl Stage {
    pub fn argv(&self, mode: Mode, driver: &str) -> Vec<String> {
        let a = match mode {
            Mode::Quick => self.quick,
            Mode::Full => self.full,
            Mode::Smoke => self.smoke,
        };
        let mut v: Vec<String> = a.iter().map(|s| s.replace("{driver}", driver)).collect();
        if driver == "jack" {
            // A JACK server runs one buffer size, and the suite does not change the user's
            // server: the load grid runs at the server's size.
            if let Some(i) = v.iter().position(|x| x == "--buffers") {
                v.drain(i..i + 2);
            }
        }
        v
    }

    /// The subcommand, for help probing.
    pub fn command(&self) -> &'static str {
        self.quick[0]
    }
}

const AP: &str = "64@48000";
/// The stressed latency's compute share, %: the verdict's default compute
/// (`report::verdict::DEFAULT_LOAD_PCT`), which its holds in compute are judged for.
const BUSY: &str = "50";

/// The commands whose stages get `--forensics` when the suite traces
/// (docs/methods.md "Forensics"). Not `load`: a recording per trial made the quick
/// suite's load stage 52 s → 96 s (about 0.27 s more per trial under the paper stress).
pub const FORENSICS: &[&str] = &["latency", "run", "latencytest", "sched", "event"];

/// The stages `suite --tuned` runs again with the tuning profile applied (docs/methods.md
/// "Tuning"): scheduling latency idle and stressed, and the DSP load grid.
pub const TUNED: &[&str] = &["latency-idle", "latency-stress", "load"];

/// The protocol, in order: check → latency idle → latency under `paper` stress → load grid →
/// latencytest → rtl (model, virtual loop, JACK loop) → sched → event. The report follows.
pub const STAGES: &[Stage] = &[
    Stage {
        name: "check",
        quick: &["check"],
        full: &["check"],
        smoke: &["check"],
        needs: &[],
        resumable: false,
        uses_stress_ng: false,
    },
    Stage {
        name: "latency-idle",
        quick: &["latency", "--duration", "10s", "--audio-period", AP],
        full: &["latency", "--duration", "1h", "--audio-period", AP],
        smoke: &["latency", "--duration", "1s", "--audio-period", AP],
        needs: &[],
        resumable: false,
        uses_stress_ng: false,
    },
    Stage {
        name: "latency-stress",
        // The thread computes the verdict's compute share of each period after it wakes and
        // leaves /dev/cpu_dma_latency alone, as an engine does: a thread that only sleeps
        // meets neither the stressors' softirqs nor the host's stalls in an engine's compute,
        // and predicted 1024 frames safe where runs under the same stress glitched 28 times
        // an hour (docs/methods.md "The suite's verdict, under stress").
        quick: &[
            "latency",
            "--stress",
            "paper",
            "--duration",
            "10s",
            "--audio-period",
            AP,
            "--busy",
            BUSY,
            "--no-dma-latency",
        ],
        // Vignati et al.'s 5 h under its stress-ng line, as the engine computes.
        full: &[
            "latency",
            "--stress",
            "paper",
            "--duration",
            "5h",
            "--audio-period",
            AP,
            "--busy",
            BUSY,
            "--no-dma-latency",
        ],
        smoke: &[
            "latency",
            "--stress",
            "paper",
            "--duration",
            "1s",
            "--audio-period",
            AP,
            "--busy",
            BUSY,
            "--no-dma-latency",
        ],
        needs: &[],
        resumable: false,
        uses_stress_ng: true,
    },
    Stage {
        name: "load",
        quick: &[
            "load",
            "--driver",
            "{driver}",
            "--buffers",
            "128,256",
            "--tracks",
            "1,2",
            "--plugins",
            "reverb-light,reverb-heavy",
            "--duration",
            "500ms",
        ],
        // Vignati et al. §3.1.1: 10 min trials, maxima validated for 2 h, under the stress line.
        full: &[
            "load",
            "--driver",
            "{driver}",
            "--duration",
            "10m",
            "--validate",
            "2h",
            "--stress",
            "paper",
        ],
        smoke: &[
            "load",
            "--driver",
            "{driver}",
            "--buffers",
            "256",
            "--tracks",
            "1",
            "--plugins",
            "reverb-light",
            "--duration",
            "300ms",
            "--max-instances",
            "64",
        ],
        needs: &[Need::Driver],
        resumable: true,
        uses_stress_ng: true,
    },
    Stage {
        name: "latencytest",
        quick: &["latencytest", "--classes", "cpu", "--phase-duration", "5s"],
        full: &["latencytest", "--phase-duration", "5m"],
        smoke: &[
            "latencytest",
            "--classes",
            "none",
            "--phase-duration",
            "500ms",
        ],
        needs: &[],
        resumable: false,
        uses_stress_ng: false,
    },
    Stage {
        name: "rtl-model",
        quick: &["rtl", "--model", "--profile", "preemptrt-hifiberry"],
        full: &["rtl", "--model", "--profile", "preemptrt-hifiberry"],
        smoke: &["rtl", "--model", "--profile", "preemptrt-hifiberry"],
        needs: &[],
        resumable: false,
        uses_stress_ng: false,
    },
    // rtl stops once its estimate has converged (about 2.5 s on a quiet machine): the
    // --duration limits leave room for a clean stretch when xruns spoil some windows, and
    // quick/smoke use 4 periods of 256 frames, which a VM's 10–20 ms stalls rarely overrun
    // (at 64 × 2 a loaded VM left no clean window in 15 s).
    Stage {
        name: "rtl-virtual",
        quick: &[
            "rtl",
            "--driver",
            "virtual",
            "--loopback",
            "--buffer",
            "256",
            "--periods",
            "4",
            "--profile",
            "preemptrt-hifiberry",
            "--fraction",
            "0.37",
            "--duration",
            "30s",
        ],
        full: &[
            "rtl",
            "--driver",
            "virtual",
            "--loopback",
            "--buffer",
            "64",
            "--profile",
            "preemptrt-hifiberry",
            "--fraction",
            "0.37",
            "--duration",
            "60s",
        ],
        smoke: &[
            "rtl",
            "--driver",
            "virtual",
            "--loopback",
            "--buffer",
            "256",
            "--periods",
            "4",
            "--profile",
            "preemptrt-hifiberry",
            "--fraction",
            "0.37",
            "--duration",
            "15s",
        ],
        needs: &[],
        resumable: false,
        uses_stress_ng: false,
    },
    Stage {
        name: "rtl-jack",
        quick: &["rtl", "--driver", "jack", "--duration", "30s"],
        full: &["rtl", "--driver", "jack", "--duration", "60s"],
        smoke: &["rtl", "--driver", "jack", "--duration", "15s"],
        needs: &[Need::Driver],
        resumable: false,
        uses_stress_ng: false,
    },
    Stage {
        name: "sched",
        quick: &["sched", "--duration", "2s", "--compete", "voip"],
        // Cucinotta et al.: one minute per configuration, JACK at 96 kHz / 128, the video-like rt-app.
        full: &[
            "sched",
            "--preset",
            "96k128",
            "--compete",
            "video",
            "--duration",
            "1m",
        ],
        smoke: &[
            "sched",
            "--policies",
            "other,fifo",
            "--duration",
            "500ms",
            "--compete",
            "voip",
        ],
        needs: &[Need::Root],
        resumable: false,
        uses_stress_ng: false,
    },
    Stage {
        name: "event",
        quick: &["event", "--driver", "{driver}", "--trials", "20"],
        full: &["event", "--driver", "{driver}", "--trials", "200"],
        smoke: &["event", "--driver", "{driver}", "--trials", "5"],
        needs: &[Need::Driver],
        resumable: false,
        uses_stress_ng: false,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_the_order_is_the_protocol() {
        let names: Vec<&str> = STAGES.iter().map(|s| s.name).collect();
        for (i, n) in names.iter().enumerate() {
            assert!(!names[i + 1..].contains(n), "{n} twice");
        }
        let pos = |n: &str| names.iter().position(|x| *x == n).unwrap();
        assert!(pos("check") < pos("latency-idle"));
        assert!(pos("latency-idle") < pos("latency-stress"));
        assert!(pos("latency-stress") < pos("load"));
        assert!(pos("load") < pos("latencytest"));
        assert!(pos("latencytest") < pos("rtl-virtual"));
        assert!(pos("rtl-virtual") < pos("sched"));
        assert!(pos("sched") < pos("event"));
        for mode in [Mode::Quick, Mode::Full, Mode::Smoke] {
            let jack = STAGES[pos("load")].argv(mode, "jack");
            assert_eq!(jack[..3], ["load", "--driver", "jack"]);
            assert!(!jack.iter().any(|a| a == "--buffers"), "{jack:?}");
        }
        assert!(STAGES[pos("load")]
            .argv(Mode::Quick, "virtual")
            .iter()
            .any(|a| a == "--buffers"));
    }

    #[test]
    fn the_stressed_latency_computes_the_verdicts_share_in_every_mode() {
        let stage = STAGES.iter().find(|s| s.name == "latency-stress").unwrap();
        for mode in [Mode::Quick, Mode::Full, Mode::Smoke] {
            let a = stage.argv(mode, "virtual");
            let busy = a.iter().position(|x| x == "--busy").expect("--busy");
            assert_eq!(
                a[busy + 1].parse::<f64>().ok(),
                Some(crate::report::verdict::DEFAULT_LOAD_PCT)
            );
            assert!(a.iter().any(|x| x == "--no-dma-latency"), "{a:?}");
        }
    }
}
