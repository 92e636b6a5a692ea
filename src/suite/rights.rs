//! The suite's pre-flight: every real-time right the stages need, probed at once, so that a
//! user without them reads one list with both remedies instead of fixing one error per
//! attempt; the suite then measures what a thread without them gets (SCHED_OTHER, memory
//! not locked, C-states as configured) and every stage says so.

/// One right the machine does not give this user, and the stage option that does without.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// What is missing, in a few words.
    pub what: String,
    /// The option a stage takes to measure without it.
    pub without: &'static [&'static str],
}

/// The label every result of such a suite carries, verdict included.
pub const NOT_REALTIME: &str =
    "not real-time: what an audio thread without RT priority gets (as PipeWire without rtkit)";

/// Probe SCHED_FIFO (on a short-lived thread), mlockall and /dev/cpu_dma_latency: what is
/// missing, in the order the stages would fail on it.
pub fn missing() -> Vec<Missing> {
    let mut out = Vec::new();
    // mlockall of what is mapped now, released at once: the stages lock the same way.
    // SAFETY: mlockall/munlockall take flags only and change no memory contents.
    let locked = unsafe { libc::mlockall(libc::MCL_CURRENT) } == 0;
    if locked {
        // SAFETY: as above.
        unsafe {
            libc::munlockall();
        }
    } else {
        out.push(Missing {
            what: format!(
                "locked memory (mlockall: {})",
                std::io::Error::last_os_error()
            ),
            without: &["--no-mlock"],
        });
    }
    // Opening adds a default PM QoS request, closing removes it: nothing changes.
    if let Err(e) = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/cpu_dma_latency")
    {
        out.push(Missing {
            what: format!("/dev/cpu_dma_latency ({e})"),
            without: &["--no-dma-latency"],
        });
    }
    let rt = crate::system::probe::try_rt_priority();
    if !rt.obtained {
        out.push(Missing {
            what: format!("SCHED_FIFO ({})", rt.reason()),
            without: &["--policy", "other"],
        });
    }
    out
}

/// The one pre-flight message: everything missing, then both remedies.
pub fn say(missing: &[Missing]) -> String {
    let what: Vec<&str> = missing.iter().map(|m| m.what.as_str()).collect();
    let flags: Vec<&str> = missing
        .iter()
        .flat_map(|m| m.without.iter().copied())
        .collect();
    format!(
        "pre-flight: this user lacks {}.\n  Either run it with the rights: sudo xrunlab suite …, or add yourself to the \
         audio group with '@audio - rtprio 95' and '@audio - memlock unlimited' in \
         /etc/security/limits.d/audio.conf and log in again;\n  or, as now, measure without \
         them: the stages run with {} and every result says \"{NOT_REALTIME}\".",
        what.join(", "),
        flags.join(" ")
    )
}

/// `argv` with the options that do without each missing right, where the command's help
/// (`help`) shows it takes them.
pub fn without(mut argv: Vec<String>, missing: &[Missing], help: &str) -> Vec<String> {
    for m in missing {
        if help.contains(m.without[0]) && !argv.iter().any(|a| a == m.without[0]) {
            argv.extend(m.without.iter().map(|s| s.to_string()));
        }
    }
    argv
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_stage_gets_only_the_options_it_takes() {
        let missing = vec![
            Missing {
                what: "locked memory".into(),
                without: &["--no-mlock"],
            },
            Missing {
                what: "SCHED_FIFO".into(),
                without: &["--policy", "other"],
            },
        ];
        let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            without(argv(&["rtl"]), &missing, "  --policy <POLICY>\n"),
            argv(&["rtl", "--policy", "other"])
        );
        assert_eq!(
            without(argv(&["sched"]), &missing, "  --no-mlock\n"),
            argv(&["sched", "--no-mlock"])
        );
        let said = say(&missing);
        assert!(said.contains("lacks locked memory, SCHED_FIFO."), "{said}");
        assert!(said.contains("--no-mlock --policy other"), "{said}");
        assert!(said.contains("sudo xrunlab suite"), "{said}");
    }
}
