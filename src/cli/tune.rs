//! `xrunlab tune`: plan, apply, restore and report a real-time tuning profile
//! (docs/methods.md "Tuning"). The logic is `system::tune`; this file parses and
//! prints.

use super::{output, Global};
use crate::error::{Error, Result};
use crate::rt::affinity::{format_cpu_list, parse_cpu_list};
use crate::system::tune::{self, Outcome, Plan, Profile};
use crate::system::Root;
use clap::Args;
use std::fmt::Write as _;
use std::path::PathBuf;

/// Apply the runtime part of a real-time tuning profile, and put everything back.
#[derive(Debug, Args)]
#[command(
    after_help = "Every value is recorded (fsync'd, in /run/xrunlab/tune.json) before it is \
changed, so --restore works after a crash, a kill -9 or from another shell; applying twice keeps \
the original values. A setting the machine lacks or refuses is reported and skipped. Boot-time \
settings are printed as the kernel command line to add, never written.

The journal is input: a restore refuses (exit 2) a journal that is not a regular file, is not \
root's or is writable by others (as root), or names anything a profile does not tune; \
--restore --defaults then puts the kernel's own values back without it.

Exit codes: 0 ok (skipped settings included), 1 --restore could not put every value back \
(said on stderr), 2 bad usage or an unusable journal, 3 not permitted (--apply/--restore need \
root) or the journal cannot be written.

Examples:
  xrunlab tune                         # the plan: what would change and why
  sudo xrunlab tune --apply --cpus 3   # audio threads get CPU 3, everything else the rest
  sudo xrunlab tune --apply --profile measure --measure   # latency before/after, then restore
  xrunlab tune --status                # what is applied, by which process, what drifted
  sudo xrunlab tune --restore
  sudo xrunlab tune --restore --defaults   # the kernel's values, without the journal"
)]
pub struct TuneArgs {
    /// Print what would change, from the current state, and why (the default).
    #[arg(long, conflicts_with_all = ["apply", "restore", "status"])]
    pub plan: bool,
    /// Apply the profile, journalling every original value first.
    #[arg(long, conflicts_with_all = ["restore", "status"])]
    pub apply: bool,
    /// Put every journalled value back (newest first) and remove the journal.
    #[arg(long, conflicts_with = "status")]
    pub restore: bool,
    /// With --restore: put the kernel's defaults back instead of the journal's values (for a
    /// journal that is lost, damaged or refused); the journal is moved aside to .refused.
    #[arg(long, requires = "restore")]
    pub defaults: bool,
    /// What is applied, since when, by which process, and which values drifted since.
    #[arg(long)]
    pub status: bool,
    /// audio: the runtime settings; measure: also RT throttling off (only with xrunlab's
    /// watchdog) and mitigations=off on the boot line.
    #[arg(long, value_enum, default_value = "audio", conflicts_with_all = ["restore", "status"])]
    pub profile: Profile,
    /// The CPUs set aside for audio threads (default: the isolcpus of the kernel command
    /// line, else the last online CPU).
    #[arg(long, value_name = "AUDIO_CPUS", conflicts_with_all = ["restore", "status"])]
    pub cpus: Option<String>,
    /// With --apply: measure scheduling latency on the audio CPUs before and after
    /// applying, restore, and print the two side by side.
    #[arg(long, requires = "apply")]
    pub measure: bool,
    /// Length of each --measure latency run.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "5s",
        requires = "measure"
    )]
    pub measure_duration: String,
    /// The undo journal (default: $XRUNLAB_TUNE_JOURNAL, else /run/xrunlab/tune.json).
    #[arg(long, value_name = "FILE")]
    pub journal: Option<PathBuf>,
    /// Read and write /proc and /sys under DIR instead of / (fixtures).
    #[arg(long, value_name = "DIR", hide = true)]
    pub root: Option<PathBuf>,
}

pub fn run(a: TuneArgs, g: &Global) -> Result<u8> {
    let root = match &a.root {
        Some(p) if !p.is_dir() => {
            return super::usage(format!("--root {}: not a directory", p.display()))
        }
        Some(p) => Root::new(p),
        None => Root::default(),
    };
    let journal = a
        .journal
        .clone()
        .unwrap_or_else(|| tune::default_journal(&root));
    let changes_system = a.apply || a.restore;
    if changes_system && root.is_live() && !nix::unistd::geteuid().is_root() {
        return Err(Error::no_privilege(format!(
            "tune --{} writes /proc and /sys: run it as root",
            if a.apply { "apply" } else { "restore" }
        )));
    }
    let (doc, human, code) = if a.restore {
        let r = if a.defaults {
            tune::restore_defaults(&root, &journal)?
        } else {
            tune::restore(&root, &journal)?
        };
        let code = u8::from(r.failed() > 0);
        let (text, failures) = restore_text(&r, a.defaults);
        output::stderr(&failures);
        (json(&r), text, code)
    } else if a.status {
        let s = tune::status(&root, &journal)?;
        (json(&s), status_text(&s), 0)
    } else {
        let cpus = a
            .cpus
            .as_deref()
            .map(|s| {
                parse_cpu_list(s).and_then(|v| {
                    if v.is_empty() {
                        Err(Error::usage(format!("--cpus '{s}' selects no CPU")))
                    } else {
                        Ok(v)
                    }
                })
            })
            .transpose()?;
        let plan = tune::build_plan(&root, a.profile, cpus.as_deref())?;
        if a.apply && a.measure {
            return measure_round_trip(&root, &plan, &journal, &a.measure_duration, g);
        }
        if a.apply {
            let r = tune::apply_each(&root, &plan, &journal, &mut pause_hook())?;
            (json(&r), apply_text(&plan, &r, false), 0)
        } else {
            (json(&plan), plan_text(&plan), 0)
        }
    };
    emit(&doc, &human, g)?;
    Ok(code)
}

fn json<T: serde::Serialize>(v: &T) -> String {
    let mut s = serde_json::to_string_pretty(v).expect("tune documents serialise");
    s.push('\n');
    s
}

/// The human text on stdout, or on stderr with --json; -o writes the document.
pub(super) fn emit(doc: &str, human: &str, g: &Global) -> Result<()> {
    if !g.quiet {
        let human = crate::report::text::style::fit(human);
        if g.json {
            output::stderr(&human);
        } else {
            output::stdout(&human);
        }
    }
    if let Some(path) = &g.output {
        crate::results::write_atomic(path, doc.as_bytes())?;
    }
    if g.json {
        output::stdout(doc);
    }
    Ok(())
}

fn or_dash(v: &Option<String>) -> &str {
    v.as_deref().unwrap_or("-")
}

pub(super) fn plan_text(p: &Plan) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "tune plan: profile {}, audio CPUs {}, housekeeping CPUs {}",
        p.profile,
        format_cpu_list(&p.audio_cpus),
        if p.housekeeping_cpus.is_empty() {
            "none".into()
        } else {
            format_cpu_list(&p.housekeeping_cpus)
        }
    );
    for c in &p.changes {
        let (tag, detail) = if let Some(why) = &c.skip {
            ("skip", why.clone())
        } else if c.already() {
            ("ok", c.why.clone())
        } else {
            ("change", c.why.clone())
        };
        let check = c
            .addresses
            .as_deref()
            .map(|a| format!(" [check: {a}]"))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "  {tag:<6} {:<44} {} -> {}\n         {detail}{check}",
            c.title,
            or_dash(&c.current),
            c.wanted
        );
    }
    if p.boot.add.is_empty() {
        s.push_str("Boot-time: nothing to add to the kernel command line.\n");
    } else {
        let _ = writeln!(
            s,
            "Boot-time (never written; add to the kernel command line, e.g. GRUB_CMDLINE_LINUX):\n  {}",
            p.boot.cmdline
        );
        for (param, why) in &p.boot.add {
            let _ = writeln!(s, "    {param}: {why}");
        }
    }
    for n in &p.notes {
        let _ = writeln!(s, "Note: {n}");
    }
    s
}

/// `restored`: the caller has already put everything back (`--measure`), so the summary
/// does not tell the user to.
pub(super) fn apply_text(p: &Plan, r: &tune::ApplyReport, restored: bool) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "tune apply: profile {}, audio CPUs {}; journal {}",
        p.profile,
        format_cpu_list(&p.audio_cpus),
        r.journal.display()
    );
    for i in &r.items {
        match &i.outcome {
            Outcome::Applied => {
                let _ = writeln!(
                    s,
                    "  applied {:<44} {} -> {}",
                    i.title,
                    or_dash(&i.from),
                    i.to
                );
            }
            Outcome::AlreadySet => {
                let _ = writeln!(s, "  ok      {:<44} {}", i.title, i.to);
            }
            Outcome::Skipped(why) => {
                let _ = writeln!(s, "  skipped {:<44} {why}", i.title);
            }
        }
    }
    let _ = writeln!(
        s,
        "{} applied, {} already set, {} skipped; {}",
        r.count(|o| *o == Outcome::Applied),
        r.count(|o| *o == Outcome::AlreadySet),
        r.count(|o| matches!(o, Outcome::Skipped(_))),
        if restored {
            "restored below"
        } else {
            "undo with: xrunlab tune --restore"
        }
    );
    if !p.boot.add.is_empty() {
        let _ = writeln!(s, "Boot-time (not applied): {}", p.boot.cmdline);
    }
    s
}

/// The restore's report, and separately what could not be put back (for stderr: a failed
/// restore must not read as a success to someone who only sees errors).
fn restore_text(r: &tune::RestoreReport, defaults: bool) -> (String, String) {
    if !defaults && !r.found {
        return (
            format!(
                "tune restore: no journal at {}: nothing is applied\n",
                r.journal.display()
            ),
            String::new(),
        );
    }
    let mut s = if defaults {
        "tune restore: the kernel's defaults, whatever the journal says\n".to_string()
    } else {
        format!("tune restore: journal {}\n", r.journal.display())
    };
    let mut bad = String::new();
    for i in &r.items {
        match &i.error {
            None => {
                let _ = writeln!(s, "  restored {:<44} {}", i.title, i.value);
            }
            Some(e) => {
                let _ = writeln!(
                    bad,
                    "xrunlab tune: FAILED to restore {} to {} ({e})",
                    i.title, i.value
                );
            }
        }
    }
    for n in &r.notes {
        let _ = writeln!(s, "  note: {n}");
    }
    let failed = r.failed();
    if failed == 0 {
        let _ = writeln!(
            s,
            "{} restored{}",
            r.items.len(),
            if defaults || r.journal.exists() {
                ""
            } else {
                "; journal removed"
            }
        );
    } else {
        let _ = writeln!(
            bad,
            "xrunlab tune: {failed} of {} not restored; the journal keeps them: retry xrunlab tune --restore (or --restore --defaults for the kernel's defaults)",
            r.items.len()
        );
    }
    (s, bad)
}

fn status_text(st: &tune::Status) -> String {
    let Some(a) = &st.applied else {
        return format!(
            "tune status: nothing applied (no journal at {})\n",
            st.journal.display()
        );
    };
    let mut s = format!(
        "tune status: profile {}, audio CPUs {}, applied since {} by pid {} ({}); journal {}\n",
        a.profile,
        format_cpu_list(&a.audio_cpus),
        a.since,
        a.pid,
        if a.pid_alive { "running" } else { "exited" },
        st.journal.display()
    );
    for e in &a.entries {
        let _ = writeln!(
            s,
            "  {} {:<44} {} (was {}{})",
            if e.drifted { "DRIFTED" } else { "applied" },
            e.title,
            or_dash(&e.now),
            e.original,
            if e.drifted {
                format!("; applied {}", e.applied)
            } else {
                String::new()
            }
        );
    }
    let drifted = a.entries.iter().filter(|e| e.drifted).count();
    let _ = writeln!(s, "{} applied, {drifted} drifted since", a.entries.len());
    s
}

/// `tune --apply --measure`: latency on the audio CPUs, apply, the same again from inside
/// the audio cpuset, restore (whatever happened in between), and the two side by side.
fn measure_round_trip(
    root: &Root,
    plan: &Plan,
    journal: &std::path::Path,
    duration: &str,
    g: &Global,
) -> Result<u8> {
    use crate::measure::latency::{self, LatencyConfig};
    if !root.is_live() {
        return super::usage("--measure measures this machine: it cannot run with --root");
    }
    let cfg = LatencyConfig {
        cpus: plan.audio_cpus.clone(),
        duration_ns: Some(crate::units::parse_duration_ns(duration)?),
        ..LatencyConfig::default()
    };
    let say = |s: String| {
        if !g.quiet {
            output::stderr(&s)
        }
    };
    say(format!(
        "tune: measuring latency on CPU {} before tuning ({duration})\n",
        format_cpu_list(&plan.audio_cpus)
    ));
    let measure = || {
        let progress = crate::progress::for_terminal(g.quiet, 0);
        latency::measure(&cfg, progress.as_ref())
    };
    let before = measure()?;
    if before.interrupted {
        return Err(Error::cannot_measure(
            "interrupted before anything was applied",
        ));
    }
    let tuned = tune::with_profile(root, plan, journal, &mut pause_hook(), |_| {
        if let Some(why) = tune::enter_audio_cpuset(root, journal) {
            say(format!("tune: {why}\n"));
        }
        say("tune: measuring again with the profile applied\n".into());
        measure()
    });
    let applied = tuned.applied?;
    let after = tuned.during.expect("measured once applied")?;
    let restored = tuned.restored?;
    let mut human = apply_text(plan, &applied, true);
    let side = |r| crate::report::tuning::Latency {
        path: std::path::Path::new("tune --measure"),
        config: &cfg,
        results: r,
    };
    human.push_str(&crate::report::compare::to_text(&[
        crate::report::tuning::latency("idle", side(&before), side(&after)),
    ]));
    human.push_str("(one short run each: `suite --tuned` runs the suite's latency and load stages before and after)\n");
    let (text, failures) = restore_text(&restored, false);
    human.push_str(&text);
    output::stderr(&failures);
    let doc = json(&serde_json::json!({
        "profile": plan.profile,
        "audio_cpus": plan.audio_cpus,
        "applied": applied,
        "before": before.overall,
        "after": after.overall,
        "restored": restored,
    }));
    emit(&doc, &human, g)?;
    if after.interrupted {
        return Err(Error::cannot_measure(
            "interrupted while measuring with the profile applied (everything was restored)",
        ));
    }
    Ok(u8::from(restored.failed() > 0))
}

/// The test hook of [`tune::PAUSE_ENV`]: after that many writes, say so and wait to be
/// killed (tests prove the journal survives a `kill -9` mid-apply).
fn pause_hook() -> impl FnMut(usize) {
    let pause_after: Option<usize> = std::env::var(tune::PAUSE_ENV)
        .ok()
        .and_then(|v| v.parse().ok());
    move |writes| {
        if pause_after == Some(writes) {
            eprintln!(
                "xrunlab tune: paused after {writes} writes ({})",
                tune::PAUSE_ENV
            );
            loop {
                std::thread::sleep(std::time::Duration::from_secs(60));
            }
        }
    }
}
