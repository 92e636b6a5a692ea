//! `xrunlab suite`: the whole protocol in one command. Every stage runs this same binary as
//! a child with the argv of [`stages::STAGES`] and `-o DIR/NN-stage.json`, so each stage's
//! output is exactly what the user would get by hand; the suite only plans, runs, records
//! (DIR/manifest.json, rewritten after every stage) and ends with `xrunlab report`.

pub mod adapt;
mod reserve;
pub mod rights;
pub mod stages;

pub use crate::results::suite::{
    Manifest, StageRecord, StageStatus, SuiteStatus, MANIFEST, TUNED_SUFFIX,
};
pub use stages::{Mode, Need, Stage, STAGES};

use crate::error::{Error, Result};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

pub const REPORT: &str = "report.html";

pub struct SuiteConfig {
    pub dir: PathBuf,
    pub mode: Mode,
    /// `virtual` or `jack`: the driver of the stages whose argv says `{driver}`.
    pub driver: String,
    /// Keep the stages whose complete result is already in `dir`.
    pub resume: bool,
    /// The binary every stage runs (this one).
    pub exe: PathBuf,
    /// Where the progress lines go (the CLI: stderr unless --quiet); the suite prints nothing.
    pub say: Box<dyn Fn(&str)>,
    /// `--tuned`: the tuned stages again with this profile applied, then restored.
    pub tuning: Option<TuneSpec>,
    /// `--forensics` on the stages that measure, when tracing is usable here (the suite
    /// says why not otherwise); false: `--no-forensics`.
    pub forensics: bool,
    /// `--budget`: the wall time the suite may take; after the protocol it measures the
    /// stressed latency longer (adapt.rs) while the budget lasts. None: no extension.
    pub budget: Option<Duration>,
}

/// What the planner learnt about this build and machine; asked once per suite.
struct Probe {
    exe: PathBuf,
    help: HashMap<String, Option<String>>,
    jack: Option<bool>,
}

impl Probe {
    /// `xrunlab CMD --help`, or None when this build has no such subcommand.
    fn help(&mut self, cmd: &str) -> Option<&str> {
        let exe = self.exe.clone();
        self.help
            .entry(cmd.to_string())
            .or_insert_with(|| {
                let out = Command::new(&exe)
                    .args([cmd, "--help"])
                    .stdin(Stdio::null())
                    .output()
                    .ok()?;
                out.status
                    .success()
                    .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
            })
            .as_deref()
    }

    fn jack_server(&mut self) -> bool {
        *self.jack.get_or_insert_with(jack_server_answers)
    }
}

/// Whether `--driver` of a command's help accepts `driver`: the "[possible values: …]" lists,
/// read across line wraps, or, for a free-form `--driver`, the name in its help.
fn accepts_driver(help: &str, driver: &str) -> bool {
    let lists: Vec<&str> = help
        .match_indices("possible values:")
        .map(|(i, m)| {
            let rest = &help[i + m.len()..];
            &rest[..rest.find(']').unwrap_or(rest.len())]
        })
        .collect();
    if lists
        .iter()
        .any(|l| l.split([',', ' ', '\n']).any(|v| v.trim() == driver))
    {
        return true;
    }
    help.lines()
        .any(|l| l.contains("--driver") && l.contains(driver))
}

/// A JACK server answers a client that must not start one.
pub fn jack_server_answers() -> bool {
    crate::driver::jack::connect(&Default::default(), "xrunlab-suite-probe").is_ok()
}

fn stress_ng_installed() -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("stress-ng").is_file()))
}

/// The driver an argv runs on (`--driver X`), if it names one.
fn argv_driver(argv: &[String]) -> Option<&str> {
    argv.iter()
        .position(|a| a == "--driver")
        .and_then(|i| argv.get(i + 1))
        .map(String::as_str)
}

/// Why `stage` cannot run here, if it cannot.
fn unmet(stage: &Stage, argv: &[String], probe: &mut Probe) -> Option<String> {
    let cmd = stage.command();
    for need in stage.needs {
        match need {
            Need::Driver => {
                let Some(d) = argv_driver(argv) else { continue };
                match probe.help(cmd) {
                    None => return Some(format!("xrunlab {cmd} not available in this build")),
                    Some(h) if !accepts_driver(h, d) => {
                        return Some(format!("xrunlab {cmd} has no --driver {d} in this build"))
                    }
                    Some(_) => {}
                }
                if d == "jack" && !probe.jack_server() {
                    return Some(
                        "no JACK server answers (start jackd, or PipeWire with pipewire-jack)"
                            .into(),
                    );
                }
            }
            Need::Root => {
                // SAFETY: geteuid has no preconditions.
                if unsafe { libc::geteuid() } != 0 {
                    return Some(
                        "needs root for SCHED_FIFO and SCHED_DEADLINE (run the suite with sudo)"
                            .into(),
                    );
                }
            }
        }
    }
    None
}

/// A complete result already in the directory (for --resume).
fn complete_result(path: &Path) -> Option<bool> {
    let input = crate::report::load(path).ok()?;
    Some(input.status() == "complete")
}

/// The child running now, for the last-resort hook.
static CHILD: AtomicI32 = AtomicI32::new(0);

/// How long the suite has after giving up: its stage child gets the give-up once the
/// child's own grace has passed, then has its own deadline to write its partial result,
/// and the suite still records it in the manifest.
const DEADLINE: Duration = Duration::from_secs(
    crate::rt::interrupt::GRACE.as_secs() + crate::rt::interrupt::DEADLINE_S as u64 + 2,
);

/// A give-up is passed on by `run_child` at the right time; only if the suite itself must
/// die is its stage killed outright.
fn on_escalation(stage: crate::rt::interrupt::Escalation) {
    let pid = CHILD.load(Ordering::SeqCst);
    if pid > 0 && stage == crate::rt::interrupt::Escalation::Die {
        // SAFETY: kill is async-signal-safe; the child leads its own process group.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
}

struct Ran {
    code: i32,
    interrupted: bool,
    secs: f64,
}

/// Run `exe argv` with its output in `log`, in its own process group so a terminal's
/// Ctrl-C reaches the suite only, which passes exactly one SIGINT on: the child then stops
/// as it would by hand (partial result, machine restored). When the suite gives up, so does
/// the child: a SIGTERM after the child's grace (docs/ARCHITECTURE.md §5).
fn run_child(exe: &Path, argv: &[String], log: &Path) -> Result<Ran> {
    use std::os::unix::process::CommandExt;
    // A new file renamed over the name before the child writes (docs/ARCHITECTURE.md §2
    // "Writing"): never a write through what another user planted in a shared results
    // folder, and at its name at once, so it can be followed while the stage runs and a
    // killed suite leaves it where its stage says.
    let log_file = crate::common::output::Output::create_derived(log)?;
    let dup = || {
        log_file
            .file()
            .try_clone()
            .map_err(|e| Error::cannot_measure(format!("{}: {e}", log.display())))
    };
    let (out, err) = (dup()?, dup()?);
    log_file.commit()?;
    let t = Instant::now();
    let mut child = Command::new(exe)
        .args(argv)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0)
        .spawn()
        .map_err(|e| Error::cannot_measure(format!("cannot run {}: {e}", exe.display())))?;
    let pid = child.id() as i32;
    CHILD.store(pid, Ordering::SeqCst);
    let mut forwarded: Option<Instant> = None;
    let mut gave_up = false;
    // The child would take a give-up within its grace for the first signal repeated.
    let child_grace = crate::rt::interrupt::GRACE + Duration::from_millis(250);
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) => {}
            Err(e) => return Err(Error::cannot_measure(format!("waiting for a stage: {e}"))),
        }
        let give_up = crate::rt::interrupt::gave_up()
            && !gave_up
            && forwarded.is_some_and(|t| t.elapsed() > child_grace);
        if (crate::rt::interrupt::requested() && forwarded.is_none()) || give_up {
            // SAFETY: pid is our live child (not reaped: try_wait saw it running).
            unsafe {
                libc::kill(pid, if give_up { libc::SIGTERM } else { libc::SIGINT });
            }
            gave_up |= give_up;
            forwarded.get_or_insert_with(Instant::now);
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    CHILD.store(0, Ordering::SeqCst);
    use std::os::unix::process::ExitStatusExt;
    Ok(Ran {
        code: status
            .code()
            .unwrap_or_else(|| -status.signal().unwrap_or(0)),
        interrupted: crate::rt::interrupt::requested(),
        secs: t.elapsed().as_secs_f64(),
    })
}

/// The child's own error line, else its last line: what a failed stage says.
fn failure_reason(code: i32, log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let line = text
        .lines()
        .rev()
        .find(|l| l.starts_with("xrunlab: error:"))
        .or_else(|| text.lines().rev().find(|l| !l.trim().is_empty()))
        .unwrap_or("")
        .trim();
    let line: String = line.chars().take(300).collect();
    if line.is_empty() {
        format!("exit {code}")
    } else {
        format!("exit {code}: {line}")
    }
}

fn rel(dir: &Path, p: &Path) -> String {
    p.strip_prefix(dir)
        .unwrap_or(p)
        .to_string_lossy()
        .into_owned()
}

/// One stage to run: its number, name (`-tuned` for the "after" of `suite --tuned`) and argv.
struct Step<'a> {
    n: usize,
    name: String,
    stage: &'a Stage,
    argv: Vec<String>,
}

/// Run one stage (or record why not) and add it to the manifest, which is rewritten.
fn run_stage(
    cfg: &SuiteConfig,
    step: Step,
    total: usize,
    probe: &mut Probe,
    manifest: &mut Manifest,
    say: &dyn Fn(String),
) -> Result<()> {
    let Step {
        n,
        name,
        stage,
        mut argv,
    } = step;
    let tag = format!("[{n:>2}/{total}] {name}");
    let stem = format!("{n:02}-{name}");
    let file = cfg.dir.join(format!("{stem}.json"));
    let log = cfg.dir.join(format!("{stem}.log"));
    let mut rec = StageRecord::not_run(&name, argv.clone());
    if crate::rt::interrupt::requested() {
        rec.reason = Some("suite interrupted".into());
        manifest.stages.push(rec);
        return Ok(());
    }
    if let Some(why) = unmet(stage, &argv, probe) {
        say(format!("{tag}: skipped: {why}"));
        rec.reason = Some(why);
        manifest.stages.push(rec);
        return manifest.write(&cfg.dir);
    }
    let prior = if cfg.resume {
        complete_result(&file)
    } else {
        None
    };
    match prior {
        Some(true) => {
            let why = format!("already done: {stem}.json is complete (--resume)");
            say(format!("{tag}: skipped: {why}"));
            rec.reason = Some(why);
            rec.file = Some(rel(&cfg.dir, &file));
            rec.log = log.exists().then(|| rel(&cfg.dir, &log));
            manifest.stages.push(rec);
            return manifest.write(&cfg.dir);
        }
        Some(false) if stage.resumable => {
            argv.push("--resume".into());
            argv.push(file.to_string_lossy().into_owned());
        }
        // A stale or partial result must not pass for this run's.
        _ => {
            let _ = std::fs::remove_file(&file);
        }
    }
    argv.push("-o".into());
    argv.push(file.to_string_lossy().into_owned());
    rec.argv = argv.clone();
    if stage.uses_stress_ng && !stress_ng_installed() {
        rec.note = Some(
            "stress-ng not installed: the paper load is approximated by the built-in stressors"
                .into(),
        );
    }
    say(format!("{tag}: xrunlab {}", argv.join(" ")));
    let ran = run_child(&cfg.exe, &argv, &log)?;
    rec.exit_code = Some(ran.code);
    rec.duration_s = (ran.secs * 10.0).round() / 10.0;
    rec.log = Some(rel(&cfg.dir, &log));
    let parsed = crate::report::load(&file);
    if file.exists() && parsed.is_ok() {
        rec.file = Some(rel(&cfg.dir, &file));
    }
    if ran.interrupted {
        rec.status = StageStatus::Failed;
        rec.reason = Some("interrupted".into());
    } else if ran.code != 0 {
        rec.status = StageStatus::Failed;
        rec.reason = Some(failure_reason(ran.code, &log));
    } else if let Err(e) = parsed {
        rec.status = StageStatus::Failed;
        rec.reason = Some(format!("exit 0 but no valid result: {e}"));
    } else {
        rec.status = StageStatus::Ok;
    }
    say(format!(
        "{tag}: {} in {:.1} s{}",
        match rec.status {
            StageStatus::Ok => "ok".to_string(),
            _ => format!("FAILED ({})", rec.reason.as_deref().unwrap_or("")),
        },
        ran.secs,
        rec.file
            .as_ref()
            .map(|f| format!(" → {f}"))
            .unwrap_or_default()
    ));
    manifest.stages.push(rec);
    manifest.write(&cfg.dir)
}

/// `suite --tuned`: the profile and the CPUs it sets aside (None: the profile's default).
#[derive(Debug, Clone)]
pub struct TuneSpec {
    pub profile: crate::system::tune::Profile,
    pub cpus: Option<Vec<usize>>,
}

/// Run the suite into `cfg.dir`; the manifest comes back with its exit code.
pub fn run(cfg: &SuiteConfig) -> Result<Manifest> {
    use crate::system::{tune, Root};
    let root = Root::default();
    let journal = tune::default_journal(&root);
    let plan = match &cfg.tuning {
        Some(t) => {
            if tune::status(&root, &journal)?.applied.is_some() {
                return Err(Error::usage(format!(
                    "a tune profile is already applied ({}): --tuned measures before tuning; \
                     run `xrunlab tune --restore` first",
                    journal.display()
                )));
            }
            Some(tune::build_plan(&root, t.profile, t.cpus.as_deref())?)
        }
        None => None,
    };
    std::fs::create_dir_all(&cfg.dir)
        .map_err(|e| Error::input(&cfg.dir, format!("cannot create the directory: {e}")))?;
    crate::rt::interrupt::add_hook(on_escalation);
    crate::rt::interrupt::set_deadline(DEADLINE);
    let mut manifest = Manifest {
        tool: crate::results::Tool::default(),
        mode: cfg.mode,
        driver: cfg.driver.clone(),
        status: SuiteStatus::Running,
        reason: None,
        started_at: crate::rt::clock::wall_clock_rfc3339(),
        ended_at: None,
        stages: Vec::new(),
        report: None,
        tuning: None,
    };
    manifest.write(&cfg.dir)?;
    let reserve = reserve::Reserve::make(&cfg.dir);
    match run_steps(cfg, plan, &root, &journal, &mut manifest) {
        Ok(()) => Ok(manifest),
        Err(e) => Err(end_failed(cfg, &mut manifest, reserve, e)),
    }
}

/// The suite stopped on `e`: the manifest gets its final status (interrupted when a signal
/// asked to stop, failed otherwise) and the reason, written into the reserved space. The
/// error returned says whether the manifest could be rewritten.
fn end_failed(
    cfg: &SuiteConfig,
    manifest: &mut Manifest,
    mut reserve: reserve::Reserve,
    e: Error,
) -> Error {
    manifest.status = if crate::rt::interrupt::requested() {
        SuiteStatus::Interrupted
    } else {
        SuiteStatus::Failed
    };
    manifest.reason = Some(e.to_string());
    manifest.ended_at = Some(crate::rt::clock::wall_clock_rfc3339());
    reserve.release();
    let path = cfg.dir.join(MANIFEST);
    let said = |m: String| format!("{m}; the suite stopped, as {} says", path.display());
    match manifest.write(&cfg.dir) {
        // An I/O error keeps its text under map_message; it is exit 3 either way.
        Ok(()) if e.kind() == crate::error::ErrorKind::Io => Error::cannot_measure(said(e.to_string())),
        Ok(()) => e.map_message(said),
        Err(w) => Error::cannot_measure(format!(
            "{e}; the suite stopped, and {} could not be rewritten either ({w}): it still says running",
            path.display()
        )),
    }
}

/// Everything after the first manifest: the stages (and with a plan, the tuned ones), then
/// the verdict and the report. The manifest is rewritten after each step; its final status
/// is written here when the suite reaches its end, by [`end_failed`] when it does not.
fn run_steps(
    cfg: &SuiteConfig,
    plan: Option<crate::system::tune::Plan>,
    root: &crate::system::Root,
    journal: &Path,
    manifest: &mut Manifest,
) -> Result<()> {
    let tuned: Vec<&Stage> = match plan {
        Some(_) => STAGES
            .iter()
            .filter(|s| stages::TUNED.contains(&s.name))
            .collect(),
        None => Vec::new(),
    };
    let mut runner = Runner {
        cfg,
        probe: Probe {
            exe: cfg.exe.clone(),
            help: HashMap::new(),
            jack: None,
        },
        // Asked once: a stage's own line would say the same for each of them.
        forensics: cfg
            .forensics
            .then(|| crate::trace::probe().map_err(|e| e.to_string())),
        // With --tuned the stages compared run on the audio CPUs before as after, so the
        // two measure the same CPUs.
        audio: plan
            .as_ref()
            .map(|p| crate::rt::affinity::format_cpu_list(&p.audio_cpus)),
        // The stages (and their tuned repeats), then the verdict and the report.
        total: STAGES.len() + tuned.len() + 2,
        missing: rights::missing(),
    };
    if !runner.missing.is_empty() {
        say(cfg, rights::say(&runner.missing));
    }
    match &runner.forensics {
        Some(Ok(())) => say(cfg, format!(
            // Two lines: each fits 80 columns.
            "forensics: on for the {} stages\n  (a kernel trace of who took each xrun's time; --no-forensics turns it off)",
            stages::FORENSICS.join(", ")
        )),
        Some(Err(why)) => say(cfg, format!("forensics: off: {why}")),
        None => {}
    }
    let started = Instant::now();
    for (i, stage) in STAGES.iter().enumerate() {
        runner.step(i + 1, stage.name.to_string(), stage, manifest)?;
    }
    if let Some(budget) = cfg.budget {
        runner.extend(manifest, started, budget)?;
    }
    if let Some(plan) = &plan {
        run_tuned(&mut runner, &tuned, plan, root, journal, manifest)?;
    }
    finish(cfg, runner.total, manifest)
}

/// A progress line, to wherever the caller wants it.
fn say(cfg: &SuiteConfig, s: String) {
    (cfg.say)(&s);
}

/// What every stage of one suite shares: the planner's probe and what its argv gets.
struct Runner<'a> {
    cfg: &'a SuiteConfig,
    probe: Probe,
    /// Whether the stages that measure get `--forensics` (None: `--no-forensics`).
    forensics: Option<std::result::Result<(), String>>,
    /// `--tuned`: the audio CPUs the tuned stages run on, before as after.
    audio: Option<String>,
    total: usize,
    /// The real-time rights this user lacks (rights.rs): each stage does without them.
    missing: Vec<rights::Missing>,
}

impl Runner<'_> {
    fn argv(&mut self, stage: &Stage) -> Vec<String> {
        let argv = self.argv_as_planned(stage);
        if self.missing.is_empty() {
            return argv;
        }
        let help = self.probe.help(stage.command()).unwrap_or("").to_string();
        rights::without(argv, &self.missing, &help)
    }

    fn argv_as_planned(&self, stage: &Stage) -> Vec<String> {
        let mut argv = stage.argv(self.cfg.mode, &self.cfg.driver);
        if matches!(self.forensics, Some(Ok(()))) && stages::FORENSICS.contains(&stage.command()) {
            argv.push("--forensics".into());
        }
        if let Some(a) = self
            .audio
            .as_ref()
            .filter(|_| stages::TUNED.contains(&stage.name))
        {
            argv.extend(["--cpus".to_string(), a.clone()]);
        }
        argv
    }

    /// Run stage number `n` as `name` into the manifest.
    fn step(
        &mut self,
        n: usize,
        name: String,
        stage: &Stage,
        manifest: &mut Manifest,
    ) -> Result<()> {
        let cfg = self.cfg;
        let step = Step {
            n,
            name,
            stage,
            argv: self.argv(stage),
        };
        run_stage(cfg, step, self.total, &mut self.probe, manifest, &|s| {
            say(cfg, s)
        })
    }

    /// The adaptive slices (adapt.rs): the engine at the sizes to check and the stressed
    /// latency again, in turn, as long as they have something to decide and the budget
    /// leaves (a few seconds kept for the verdict and the report).
    fn extend(
        &mut self,
        manifest: &mut Manifest,
        started: Instant,
        budget: Duration,
    ) -> Result<()> {
        const KEEP: Duration = Duration::from_secs(8);
        let latency = adapt::stage();
        let base = self.argv(latency);
        let run_base = self.argv(&adapt::RUN_STAGE);
        let jack = self.cfg.driver == "jack";
        let (mut k, mut r, mut last_was_run) = (0, 0, false);
        while !crate::rt::interrupt::requested() {
            let Some(next) = adapt::next(manifest, &self.cfg.dir, jack, last_was_run) else {
                break;
            };
            let left = budget.saturating_sub(started.elapsed() + KEEP);
            let (name, stage, argv) = match &next {
                adapt::Next::Run { frames, ran } => {
                    let secs = adapt::SLICE.min(left);
                    let at = frames.map_or("the server's size".into(), |f| format!("{f} frames"));
                    if secs < adapt::MIN_STRETCH {
                        say(self.cfg, format!(
                            "adaptive: the engine at {at} is not checked further ({} s run so far): --budget is spent",
                            ran.as_secs()
                        ));
                        break;
                    }
                    r += 1;
                    say(
                        self.cfg,
                        format!(
                        "adaptive: the engine at {at} under stress ({} s run so far): {} s more",
                        ran.as_secs(),
                        secs.as_secs()
                    ),
                    );
                    let argv = adapt::run_argv(&run_base, *frames, secs.as_secs());
                    (format!("{}{r}", adapt::RUN), &adapt::RUN_STAGE, argv)
                }
                adapt::Next::Latency(knee) => {
                    let Some(secs) = adapt::stretch(knee, left.min(adapt::SLICE.max(left / 2)))
                    else {
                        say(self.cfg, format!(
                            "adaptive: {} frames is still undecided; it needs about {} s more of latency under stress, beyond --budget",
                            knee.frames,
                            adapt::wanted(knee).as_secs()
                        ));
                        break;
                    };
                    k += 1;
                    say(self.cfg, format!(
                        "adaptive: {} frames is undecided after {} s of latency under stress: {} s more",
                        knee.frames,
                        knee.measured.as_secs(),
                        secs.as_secs()
                    ));
                    (
                        format!("{}{k}", adapt::MORE),
                        latency,
                        adapt::argv(&base, secs.as_secs()),
                    )
                }
            };
            last_was_run = matches!(next, adapt::Next::Run { .. });
            self.total += 1;
            let step = Step {
                n: STAGES.len() + k + r,
                name,
                stage,
                argv,
            };
            let cfg = self.cfg;
            run_stage(cfg, step, self.total, &mut self.probe, manifest, &|s| {
                say(cfg, s)
            })?;
            if manifest
                .stages
                .last()
                .is_some_and(|s| s.status != StageStatus::Ok)
            {
                break;
            }
        }
        Ok(())
    }
}

/// `suite --tuned` after the stages: the tuned stages again with the profile applied, then
/// everything restored (system::tune::with_profile), recorded in the manifest's tuning.
fn run_tuned(
    runner: &mut Runner,
    tuned: &[&Stage],
    plan: &crate::system::tune::Plan,
    root: &crate::system::Root,
    journal: &Path,
    manifest: &mut Manifest,
) -> Result<()> {
    use crate::system::tune;
    let cfg = runner.cfg;
    // After the adaptive stretches; the verdict and the report come last.
    let first = runner.total - tuned.len() - 1;
    let mut record = crate::results::suite::Tuning {
        profile: plan.profile,
        audio_cpus: plan.audio_cpus.clone(),
        housekeeping_cpus: plan.housekeeping_cpus.clone(),
        journal: journal.display().to_string(),
        applied: Vec::new(),
        restored: Vec::new(),
        boot_cmdline: plan.boot.cmdline.clone(),
        error: None,
    };
    let mut phase: Result<()> = Ok(());
    if crate::rt::interrupt::requested() {
        record.error = Some("suite interrupted before tuning: nothing applied".into());
        for stage in tuned {
            let mut rec =
                StageRecord::not_run(&format!("{}{TUNED_SUFFIX}", stage.name), Vec::new());
            rec.reason = Some("suite interrupted".into());
            manifest.stages.push(rec);
        }
    } else {
        say(cfg, format!(
            "tuning: applying the {} profile (audio CPUs {}; journal {}: if this suite is killed, `xrunlab tune --restore` puts everything back)",
            plan.profile,
            runner.audio.as_deref().unwrap_or(""),
            journal.display()
        ));
        let t = tune::with_profile(root, plan, journal, &mut |_| {}, |r| {
            say(
                cfg,
                format!(
                    "tuning: {} applied, {} already set, {} skipped",
                    r.count(|o| *o == tune::Outcome::Applied),
                    r.count(|o| *o == tune::Outcome::AlreadySet),
                    r.count(|o| matches!(o, tune::Outcome::Skipped(_)))
                ),
            );
            for (k, stage) in tuned.iter().enumerate() {
                let name = format!("{}{TUNED_SUFFIX}", stage.name);
                phase = runner.step(first + k, name, stage, manifest);
                if phase.is_err() {
                    break;
                }
            }
        });
        match t.applied {
            Ok(r) => record.applied = r.items,
            Err(e) => record.error = Some(format!("applying: {e}")),
        }
        // Whatever happened above (a failed stage, Ctrl-C, an error): back as it was.
        match t.restored {
            Ok(r) => {
                let failed = r.failed();
                say(
                    cfg,
                    format!(
                        "tuning: {} restored{}",
                        r.items.len() - failed,
                        if failed > 0 {
                            format!(
                            ", {failed} NOT restored: retry `xrunlab tune --restore --journal {}`",
                            journal.display()
                        )
                        } else {
                            String::new()
                        }
                    ),
                );
                if failed > 0 {
                    record.error = Some(format!("{failed} value(s) not restored"));
                }
                record.restored = r.items;
            }
            Err(e) => record.error = Some(format!("restoring: {e}")),
        }
    }
    manifest.tuning = Some(record);
    manifest.write(&cfg.dir)?;
    phase
}

/// The verdict over every result there is, then the report over them all (partial ones
/// included: they say so), verdict first; the suite's final status.
fn finish(cfg: &SuiteConfig, total: usize, manifest: &mut Manifest) -> Result<()> {
    let files =
        |m: &Manifest| -> Vec<String> { m.stages.iter().filter_map(|s| s.file.clone()).collect() };
    let verdict_file = cfg.dir.join(format!("{:02}-verdict.json", total - 1));
    let have = files(manifest);
    let rec = post_step(
        cfg,
        total - 1,
        total,
        "verdict",
        (!have.is_empty()).then(|| {
            vec![
                "verdict".to_string(),
                cfg.dir.to_string_lossy().into_owned(),
                "-o".into(),
                verdict_file.to_string_lossy().into_owned(),
            ]
        }),
        &verdict_file,
    )?;
    say(cfg, rec.1);
    manifest.stages.push(rec.0);
    manifest.write(&cfg.dir)?;
    let html = cfg.dir.join(REPORT);
    let mut have = files(manifest);
    // The verdict opens the report.
    have.sort_by_key(|f| !f.ends_with("-verdict.json"));
    let rec = post_step(
        cfg,
        total,
        total,
        "report",
        (!have.is_empty()).then(|| {
            let mut argv = vec![
                "report".to_string(),
                "--manifest".into(),
                cfg.dir.join(MANIFEST).to_string_lossy().into_owned(),
            ];
            argv.extend(
                have.iter()
                    .map(|f| cfg.dir.join(f).to_string_lossy().into_owned()),
            );
            argv.push("-o".into());
            argv.push(html.to_string_lossy().into_owned());
            argv
        }),
        &html,
    )?;
    say(cfg, rec.1);
    if rec.0.status == StageStatus::Ok {
        manifest.report = Some(REPORT.into());
    }
    manifest.stages.push(rec.0);
    manifest.status = if crate::rt::interrupt::requested() {
        SuiteStatus::Interrupted
    } else {
        SuiteStatus::Complete
    };
    manifest.ended_at = Some(crate::rt::clock::wall_clock_rfc3339());
    manifest.write(&cfg.dir)
}

/// A step after the stages (`verdict`, `report`): run `argv` (None: nothing to read) into
/// `out`; the record and the progress line.
fn post_step(
    cfg: &SuiteConfig,
    n: usize,
    total: usize,
    name: &str,
    argv: Option<Vec<String>>,
    out: &Path,
) -> Result<(StageRecord, String)> {
    let tag = format!("[{n:>2}/{total}] {name}");
    let mut rec = StageRecord::not_run(name, Vec::new());
    if crate::rt::interrupt::requested() {
        rec.reason = Some("suite interrupted".into());
    } else if let Some(argv) = argv {
        rec.argv = argv.clone();
        let log = cfg.dir.join(format!("{n:02}-{name}.log"));
        let ran = run_child(&cfg.exe, &argv, &log)?;
        rec.exit_code = Some(ran.code);
        rec.duration_s = (ran.secs * 10.0).round() / 10.0;
        rec.log = Some(rel(&cfg.dir, &log));
        if ran.code == 0 && out.exists() {
            rec.status = StageStatus::Ok;
            rec.file = Some(rel(&cfg.dir, out));
        } else {
            rec.status = StageStatus::Failed;
            rec.reason = Some(failure_reason(ran.code, &log));
        }
    } else {
        rec.reason = Some("no stage produced a result".into());
    }
    let line = format!(
        "{tag}: {}",
        match rec.status {
            StageStatus::Ok => format!("ok → {}", out.display()),
            StageStatus::Skipped => format!("skipped: {}", rec.reason.as_deref().unwrap_or("")),
            StageStatus::Failed => format!("FAILED ({})", rec.reason.as_deref().unwrap_or("")),
        }
    );
    Ok((rec, line))
}

/// The verdict the suite wrote, if it wrote one.
fn verdict_doc(m: &Manifest, dir: &Path) -> Option<crate::results::ResultDoc> {
    let file = m
        .stages
        .iter()
        .find(|s| s.stage == "verdict")?
        .file
        .as_ref()?;
    crate::results::read_result(&dir.join(file)).ok()
}

/// The verdict the suite wrote, as the terminal prints it.
pub fn verdict_text(m: &Manifest, dir: &Path) -> Option<String> {
    match verdict_doc(m, dir)?.body {
        crate::results::Body::Verdict { config, results } => {
            Some(crate::report::text::verdict::summary(&config, &results))
        }
        _ => None,
    }
}

/// The suite as JUnit XML: its stages, then its verdict's criteria.
pub fn junit(m: &Manifest, dir: &Path) -> String {
    use crate::report::export::{self, Export};
    let verdict: Vec<crate::report::Input> = verdict_doc(m, dir)
        .map(|d| crate::report::Input {
            path: dir.to_path_buf(),
            item: crate::report::Loaded::Doc(Box::new(d)),
        })
        .into_iter()
        .collect();
    let input = Export {
        results: &verdict,
        manifest: Some(m),
    };
    let xml = export::render(&export::Junit, &input).expect("a manifest is given");
    String::from_utf8(xml).expect("the JUnit exporter writes UTF-8")
}

/// The manifest as a terminal table.
pub fn summary(m: &Manifest, dir: &Path) -> String {
    use crate::report::text::style::{new_table, num};
    let mut t = new_table(&["stage", "status", "time", "result / reason"]);
    t.set_width(crate::report::text::style::WIDTH as u16);
    for s in &m.stages {
        t.add_row(vec![
            comfy_table::Cell::new(&s.stage),
            comfy_table::Cell::new(match s.status {
                StageStatus::Ok => "ok",
                StageStatus::Failed => "FAILED",
                StageStatus::Skipped => "skipped",
            }),
            num(format!("{:.1} s", s.duration_s)),
            comfy_table::Cell::new(match (&s.status, &s.reason, &s.file) {
                (StageStatus::Ok, _, Some(f)) => match &s.note {
                    Some(n) => format!("{f} ({n})"),
                    None => f.clone(),
                },
                (_, Some(r), _) => r.clone(),
                _ => String::new(),
            }),
        ]);
    }
    let mut s = format!("{t}\n");
    s.push_str(&format!(
        "results in {}/ (manifest {MANIFEST}{})\n",
        dir.display(),
        m.report
            .as_ref()
            .map(|r| format!(", report {r}"))
            .unwrap_or_default()
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_lists_are_read_across_wraps() {
        let help = "  --driver <DRIVER>  Which loop [possible values: sim,\n          virtual]\n";
        assert!(accepts_driver(help, "virtual"));
        assert!(accepts_driver(help, "sim"));
        assert!(!accepts_driver(help, "jack"));
        assert!(accepts_driver(
            "  --driver <D>  virtual|jack|alsa\n",
            "jack"
        ));
        assert!(!accepts_driver("  --jack-server <NAME>\n", "jack"));
    }

    #[test]
    fn exit_code_follows_the_stages() {
        let rec = |status| StageRecord {
            status,
            ..StageRecord::not_run("x", vec![])
        };
        let mut m = Manifest {
            tool: crate::results::Tool::default(),
            mode: Mode::Smoke,
            driver: "virtual".into(),
            status: SuiteStatus::Complete,
            reason: None,
            started_at: String::new(),
            ended_at: None,
            stages: vec![rec(StageStatus::Ok), rec(StageStatus::Skipped)],
            report: None,
            tuning: None,
        };
        assert_eq!(m.exit_code(), 0);
        m.stages.push(rec(StageStatus::Failed));
        assert_eq!(m.exit_code(), 1);
        m.status = SuiteStatus::Interrupted;
        assert_eq!(m.exit_code(), 3);
    }
}
