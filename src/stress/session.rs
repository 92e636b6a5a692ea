//! Running the stressors: `StressSession` starts them as child processes and is the guard
//! that stops and reaps them on every exit path.
//!
//! Each child gets its own process group so that one `kill(-pgid)` reaches everything it
//! forked (stress-ng's workers), so that a terminal's Ctrl-C reaches only xrunlab (which then
//! stops the stressors in order and writes its partial result), and so that tests can check
//! from /proc that nothing of the group is left. PR_SET_PDEATHSIG(SIGKILL) covers the one
//! path no code of ours runs on: xrunlab itself being SIGKILLed.

use super::process::{child_setup, cpu_set, describe_status, peek_exit};
pub use super::process::{group_members, remove_stale_dirs, session_members, SESSION_ENV};
use super::registry;
use super::spec::{BackendChoice, Preset, StressSpec};
use crate::error::{Error, Result};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Overrides the executable that runs the built-in stressors.
pub const STRESSOR_EXE_ENV: &str = "XRUNLAB_STRESSOR_EXE";

/// How long stressors get to stop on their own (stress-ng prints its metrics, the built-in
/// stressors print their operation counts) before the group is SIGKILLed.
const GRACE: Duration = Duration::from_secs(3);
/// How long to wait for the kernel to remove SIGKILLed processes before giving up.
const REAP_LIMIT: Duration = Duration::from_secs(5);
/// stress-ng's own --timeout is the run plus this margin: stress starts before the
/// measurement and is stopped explicitly after it, the timeout is only a safety net.
const TIMEOUT_MARGIN_S: u64 = 5;
/// How long after starting a stressor that dies at once is treated as a failed start.
const STARTUP_CHECK: Duration = Duration::from_millis(150);
/// Bytes of each stressor's output kept in the record.
const OUTPUT_TAIL: usize = 8192;

/// stress-ng as found on PATH.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StressNgInfo {
    pub path: String,
    pub version: String,
}

/// One child process the session ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StressProcess {
    /// `stress-ng`, `builtin` or `command`.
    pub backend: String,
    /// Presets this process implements (empty for a user command).
    pub presets: Vec<String>,
    pub argv: Vec<String>,
    pub pid: i32,
    /// How it ended, e.g. `exit 0`, `signal 9`.
    pub exit: String,
    /// It ended before the session stopped it (a user command may do so legitimately).
    pub ended_early: bool,
    /// The last bytes of its standard output and error.
    pub output_tail: String,
}

/// One line of stress-ng's `--metrics-brief` table, or a built-in stressor's count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StressMetric {
    pub stressor: String,
    /// `stress-ng` or `builtin`.
    pub source: String,
    pub bogo_ops: f64,
    pub real_time_s: f64,
    pub usr_time_s: Option<f64>,
    pub sys_time_s: Option<f64>,
    pub bogo_ops_per_s: f64,
}

/// A preset that could not run, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SkippedPreset {
    pub preset: String,
    pub reason: String,
}

/// What load ran during a measurement; results embed it beside their environment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StressRecord {
    pub presets: Vec<String>,
    /// Who ran the stress-ng classes: `stress-ng`, `builtin`, or `none` when no such class
    /// was asked for.
    pub backend: String,
    pub stress_ng: Option<StressNgInfo>,
    pub processes: Vec<StressProcess>,
    pub metrics: Vec<StressMetric>,
    pub skipped: Vec<SkippedPreset>,
    pub workers: u32,
    /// CPUs the stressors were pinned to; empty = not pinned.
    pub cpus: Vec<usize>,
    /// Directory the disk classes used (removed afterwards).
    pub dir: Option<String>,
    pub file_size_bytes: u64,
    /// From the first start to the end of the stop.
    pub duration_ns: u64,
    #[serde(default)]
    pub warnings: Vec<String>,
}

#[derive(Debug)]
struct Child {
    pid: libc::pid_t,
    backend: &'static str,
    presets: Vec<String>,
    argv: Vec<String>,
    log: PathBuf,
    /// Raw wait status once reaped.
    status: Option<libc::c_int>,
    ended_early: bool,
}

/// Running stressors. Dropping it stops them; `stop` also returns what ran.
#[derive(Debug)]
pub struct StressSession {
    children: Vec<Child>,
    record: StressRecord,
    dir: Option<PathBuf>,
    marker: String,
    started_ns: u64,
    done: bool,
}

static SEQ: AtomicU64 = AtomicU64::new(0);

impl StressSession {
    /// Start the stressors of `spec` for a measurement of about `run_duration`
    /// (`Duration::ZERO` = open-ended: stress-ng then gets no timeout of its own).
    ///
    /// Call it from a thread that outlives the session (normally the main thread):
    /// PR_SET_PDEATHSIG fires when the *thread* that spawned a child exits.
    /// On error every stressor already started is stopped before returning.
    pub fn start(spec: &StressSpec, run_duration: Duration) -> Result<StressSession> {
        let seq = SEQ.fetch_add(1, Ordering::SeqCst);
        let mut s = StressSession {
            children: Vec::new(),
            record: StressRecord {
                presets: spec.labels(),
                backend: "none".into(),
                workers: spec.workers,
                cpus: spec.cpus.clone(),
                file_size_bytes: spec.file_size,
                ..Default::default()
            },
            dir: None,
            marker: format!(
                "{}-{}-{}",
                std::process::id(),
                seq,
                crate::rt::clock::monotonic_ns()
            ),
            started_ns: crate::rt::clock::monotonic_ns(),
            done: false,
        };
        if spec.is_idle() {
            return Ok(s);
        }
        // Orphaned grandchildren (stress-ng workers whose parent died first) are then
        // re-parented to us, so we can reap them instead of leaving zombies to init.
        // SAFETY: prctl with these arguments has no memory-safety preconditions.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
        s.make_dir(spec)?;
        s.spawn_all(spec, run_duration)?;
        s.check_startup()?;
        Ok(s)
    }

    /// The value of `XRUNLAB_STRESS_SESSION` in this session's stressors.
    pub fn marker(&self) -> &str {
        &self.marker
    }

    /// Process groups of the running stressors (one per child).
    pub fn pgids(&self) -> Vec<libc::pid_t> {
        self.children.iter().map(|c| c.pid).collect()
    }

    /// The session's private directory, if one was made.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// Stop every stressor, reap it, remove the files, and say what ran.
    pub fn stop(mut self) -> StressRecord {
        self.shutdown();
        std::mem::take(&mut self.record)
    }

    fn make_dir(&mut self, spec: &StressSpec) -> Result<()> {
        let parent = match &spec.dir {
            Some(d) => d.clone(),
            // /tmp is often tmpfs, where "disk" stress would never reach a disk.
            None if spec.presets.iter().any(|p| p.uses_files())
                && Path::new("/var/tmp").is_dir() =>
            {
                PathBuf::from("/var/tmp")
            }
            None => std::env::temp_dir(),
        };
        remove_stale_dirs(&parent);
        let dir = parent.join(format!("xrunlab-stress-{}", self.marker));
        std::fs::create_dir(&dir)
            .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        // Removed by shutdown; the registry removes it if a signal kills us first.
        registry::register_dir(&dir);
        self.record.dir = Some(dir.display().to_string());
        self.dir = Some(dir.clone());
        if spec.presets.iter().any(|p| p.uses_files()) {
            if is_tmpfs(&dir) {
                self.record.warnings.push(format!(
                    "{} is on tmpfs: the disk classes exercise memory, not a disk (use --stress-dir)",
                    parent.display()
                ));
            }
            // One file per disk class at a time; disk-copy holds its source and the copy.
            let files = spec.presets.iter().filter(|p| p.uses_files()).count() as u64
                + u64::from(spec.presets.contains(&Preset::DiskCopy));
            let need = spec.file_size.saturating_mul(files);
            if let Some(free) = free_bytes(&dir) {
                if free < need + (64 << 20) {
                    return Err(Error::cannot_measure(format!(
                        "{} has {} MiB free; the disk classes need about {} MiB: use a smaller --stress-size or another --stress-dir",
                        parent.display(),
                        free >> 20,
                        need >> 20
                    )));
                }
            }
        }
        Ok(())
    }

    fn spawn_all(&mut self, spec: &StressSpec, run_duration: Duration) -> Result<()> {
        let ng_presets: Vec<Preset> = spec
            .presets
            .iter()
            .copied()
            .filter(|p| *p == Preset::Paper || p.stress_ng_stressor().is_some())
            .collect();
        let stress_ng = if ng_presets.is_empty() {
            None
        } else {
            match spec.backend {
                BackendChoice::Builtin => None,
                BackendChoice::Auto => find_stress_ng(),
                BackendChoice::StressNg => Some(find_stress_ng().ok_or_else(|| {
                    Error::cannot_measure(
                        "--stress-backend stress-ng: stress-ng is not on PATH (apt install stress-ng)",
                    )
                })?),
            }
        };
        let timeout = stress_ng_timeout(run_duration);
        if !ng_presets.is_empty() {
            self.record.backend = if stress_ng.is_some() {
                "stress-ng"
            } else {
                "builtin"
            }
            .into();
        }
        if let Some(info) = &stress_ng {
            if ng_presets.contains(&Preset::Paper) {
                // Vignati et al.'s line exactly, plus a timeout (stress-ng's default is a day) and
                // the metrics the record keeps.
                let mut argv: Vec<String> = [
                    &info.path,
                    "--sched",
                    "other",
                    "--cpu",
                    "1",
                    "--udp",
                    "1",
                    "--io",
                    "1",
                    "--netdev",
                    "1",
                    "--aggressive",
                    "--maximize",
                ]
                .iter()
                .map(|s| s.to_string())
                .collect();
                argv.extend([
                    "--timeout".into(),
                    timeout.clone(),
                    "--metrics-brief".into(),
                ]);
                self.spawn("stress-ng", vec!["paper".into()], argv, spec)?;
            }
            let classes: Vec<Preset> = ng_presets
                .iter()
                .copied()
                .filter(|p| *p != Preset::Paper)
                .collect();
            if !classes.is_empty() {
                let mut argv = vec![info.path.clone(), "--sched".into(), "other".into()];
                for p in &classes {
                    let name = p
                        .stress_ng_stressor()
                        .expect("filtered to stress-ng classes");
                    argv.push(format!("--{name}"));
                    argv.push(spec.workers.to_string());
                    if *p == Preset::Udp {
                        argv.extend(["--udp-if".into(), "lo".into()]);
                    }
                }
                argv.extend([
                    "--timeout".into(),
                    timeout.clone(),
                    "--metrics-brief".into(),
                ]);
                if let Some(d) = &self.dir {
                    argv.extend(["--temp-path".into(), d.display().to_string()]);
                }
                let names = classes.iter().map(|p| p.name().to_string()).collect();
                self.spawn("stress-ng", names, argv, spec)?;
            }
            self.record.stress_ng = Some(info.clone());
        }
        let exe = stressor_exe(spec);
        // The record names the real binary; /proc/self/exe is what is executed.
        let exe_shown = std::fs::read_link(&exe)
            .unwrap_or_else(|_| exe.clone())
            .display()
            .to_string();
        for &p in &spec.presets {
            let kinds: Vec<Preset> = match p {
                Preset::Paper if stress_ng.is_none() => {
                    self.record.warnings.push(
                        "paper preset without stress-ng: approximated by the built-in cpu, udp, io and netdev stressors"
                            .into(),
                    );
                    vec![Preset::Cpu, Preset::Udp, Preset::Io, Preset::Netdev]
                }
                Preset::Paper => continue,
                p if p.stress_ng_stressor().is_some() && stress_ng.is_some() => continue,
                p => vec![p],
            };
            for kind in kinds {
                // Senoner's classes are one activity each; the others scale with --stress-workers.
                let n = if p == Preset::Paper
                    || matches!(
                        kind,
                        Preset::DiskWrite
                            | Preset::DiskCopy
                            | Preset::DiskRead
                            | Preset::Proc
                            | Preset::Top
                    ) {
                    1
                } else {
                    spec.workers
                };
                for _ in 0..n {
                    let mut argv = vec![exe_shown.clone(), "__stressor".into(), kind.name().into()];
                    if kind.uses_files() {
                        let d = self.dir.as_ref().expect("made for file classes");
                        argv.extend([
                            "--dir".into(),
                            d.display().to_string(),
                            "--size".into(),
                            spec.file_size.to_string(),
                        ]);
                    }
                    self.spawn_exe(&exe, "builtin", vec![p.name().into()], argv, spec)?;
                }
            }
        }
        for cmd in &spec.commands {
            self.spawn("command", Vec::new(), cmd.clone(), spec)?;
        }
        Ok(())
    }

    fn spawn(
        &mut self,
        backend: &'static str,
        presets: Vec<String>,
        argv: Vec<String>,
        spec: &StressSpec,
    ) -> Result<()> {
        let program = PathBuf::from(&argv[0]);
        self.spawn_exe(&program, backend, presets, argv, spec)
    }

    /// Start `program` with `argv[1..]`; `argv[0]` is what the record shows.
    fn spawn_exe(
        &mut self,
        program: &Path,
        backend: &'static str,
        presets: Vec<String>,
        argv: Vec<String>,
        spec: &StressSpec,
    ) -> Result<()> {
        let dir = self.dir.clone().unwrap_or_else(std::env::temp_dir);
        let log = dir.join(format!("out-{}.log", self.children.len()));
        let out = std::fs::File::create(&log)
            .map_err(|e| Error::io(format!("creating {}", log.display()), e))?;
        let err = out
            .try_clone()
            .map_err(|e| Error::io("duplicating a log handle", e))?;
        let cpuset = cpu_set(&spec.cpus)?;
        let leave = crate::system::tune::housekeeping_cgroup();
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        let mut cmd = Command::new(program);
        cmd.args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .current_dir(&dir)
            .env(SESSION_ENV, &self.marker)
            .process_group(0);
        // SAFETY: the closure runs between fork and exec and only makes async-signal-safe
        // system calls on data prepared before the fork.
        unsafe {
            cmd.pre_exec(move || child_setup(parent, cpuset.as_ref(), leave));
        }
        let child = cmd.spawn().map_err(|e| {
            let what = match e.kind() {
                std::io::ErrorKind::NotFound => "not found".to_string(),
                _ => e.to_string(),
            };
            let msg = format!("cannot start stressor '{}': {what}", argv.join(" "));
            if backend == "command" {
                Error::usage(msg)
            } else {
                Error::cannot_measure(msg)
            }
        })?;
        let pid = child.id() as libc::pid_t;
        // We wait for it ourselves (waitid/waitpid on the group); std's handle is not needed
        // and dropping it neither waits nor kills.
        drop(child);
        registry::register(pid);
        self.children.push(Child {
            pid,
            backend,
            presets,
            argv,
            log,
            status: None,
            ended_early: false,
        });
        Ok(())
    }

    /// A stressor that dies right away (bad option, missing permission) makes the
    /// measurement meaningless; a user's command may legitimately be short-lived.
    fn check_startup(&mut self) -> Result<()> {
        let deadline = crate::rt::clock::monotonic_ns() + STARTUP_CHECK.as_nanos() as u64;
        while crate::rt::clock::monotonic_ns() < deadline {
            for c in &self.children {
                if c.backend == "command" {
                    continue;
                }
                if let Some(status) = peek_exit(c.pid) {
                    let tail = read_tail(&c.log);
                    return Err(Error::cannot_measure(format!(
                        "stressor '{}' ended at start ({}): {}",
                        c.argv.join(" "),
                        describe_status(status),
                        tail.trim()
                    )));
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    fn shutdown(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        for c in &mut self.children {
            c.ended_early = peek_exit(c.pid).is_some();
        }
        for c in &self.children {
            // stress-ng reports its metrics on SIGINT (as on Ctrl-C); ours and user commands
            // stop on SIGTERM.
            let sig = if c.backend == "stress-ng" {
                libc::SIGINT
            } else {
                libc::SIGTERM
            };
            // SAFETY: signalling a process group we created; the leader is not reaped yet
            // (peek_exit leaves it a zombie), so the group id cannot have been reused.
            unsafe { libc::kill(-c.pid, sig) };
        }
        let grace_end = crate::rt::clock::monotonic_ns() + GRACE.as_nanos() as u64;
        while crate::rt::clock::monotonic_ns() < grace_end
            && self.children.iter().any(|c| peek_exit(c.pid).is_none())
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        for c in &self.children {
            // Whatever is left of the group (workers, a child that ignored SIGTERM).
            // SAFETY: as above.
            unsafe { libc::kill(-c.pid, libc::SIGKILL) };
        }
        let reap_end = crate::rt::clock::monotonic_ns() + REAP_LIMIT.as_nanos() as u64;
        loop {
            let mut left = false;
            for c in &mut self.children {
                reap_group(c);
                if c.status.is_none() || !group_members(c.pid).is_empty() {
                    left = true;
                }
            }
            if !left || crate::rt::clock::monotonic_ns() >= reap_end {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        for c in &self.children {
            registry::unregister(c.pid);
            let left = group_members(c.pid);
            if !left.is_empty() {
                self.record.warnings.push(format!(
                    "stressor group {} still has processes {left:?} after SIGKILL",
                    c.pid
                ));
            }
        }
        self.kill_escapees();
        self.collect();
        if crate::rt::interrupt::gave_up() && !self.children.is_empty() {
            self.record.warnings.push(
                "a signal after the first gave up waiting: the stressors were killed (SIGKILL) before they could report"
                    .into(),
            );
        }
        if let Some(d) = self.dir.take() {
            if let Err(e) = std::fs::remove_dir_all(&d) {
                self.record
                    .warnings
                    .push(format!("could not remove {}: {e}", d.display()));
            }
            registry::unregister_dir(&d);
        }
        self.record.duration_ns = crate::rt::clock::monotonic_ns() - self.started_ns;
    }

    /// A stressor that left its process group (a user command that daemonises, setsid)
    /// still carries the session marker in its environment: kill it too.
    fn kill_escapees(&mut self) {
        if self.children.is_empty() {
            return;
        }
        let left = session_members(&self.marker);
        if left.is_empty() {
            return;
        }
        for &pid in &left {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        let end = crate::rt::clock::monotonic_ns() + REAP_LIMIT.as_nanos() as u64;
        while crate::rt::clock::monotonic_ns() < end {
            for &pid in &left {
                // Reaps those re-parented to us (we are a subreaper); others are init's.
                let mut status = 0;
                // SAFETY: status is writable.
                unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            }
            if session_members(&self.marker).is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.record.warnings.push(format!(
            "stressor processes {left:?} had left their process group; killed"
        ));
    }

    fn collect(&mut self) {
        for c in &self.children {
            let full = std::fs::read(&c.log).unwrap_or_default();
            let text = String::from_utf8_lossy(&full);
            match c.backend {
                "stress-ng" => self.record.metrics.extend(parse_metrics_brief(&text)),
                "builtin" => self.record.metrics.extend(parse_builtin_metrics(&text)),
                _ => {}
            }
            for line in text.lines() {
                if let Some(reason) = line.strip_prefix("xrunlab-stressor-skip: ") {
                    self.record.skipped.push(SkippedPreset {
                        preset: c.presets.join(","),
                        reason: reason.to_string(),
                    });
                }
            }
            self.record.processes.push(StressProcess {
                backend: c.backend.into(),
                presets: c.presets.clone(),
                argv: c.argv.clone(),
                pid: c.pid,
                exit: c
                    .status
                    .map(describe_status)
                    .unwrap_or_else(|| "not reaped".into()),
                ended_early: c.ended_early,
                output_tail: tail_of(&text),
            });
        }
    }
}

impl Drop for StressSession {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Reap every ended process of `c`'s group that is our child (the leader, and orphaned
/// workers re-parented to us as subreaper).
fn reap_group(c: &mut Child) {
    loop {
        let mut status = 0;
        // SAFETY: status is writable.
        let r = unsafe { libc::waitpid(-c.pid, &mut status, libc::WNOHANG) };
        if r <= 0 {
            break;
        }
        if r == c.pid {
            c.status = Some(status);
        }
    }
    if c.status.is_none() {
        // The group may be empty of children but the leader already gone (ECHILD).
        let mut status = 0;
        // SAFETY: status is writable.
        let r = unsafe { libc::waitpid(c.pid, &mut status, libc::WNOHANG) };
        if r == c.pid {
            c.status = Some(status);
        } else if r < 0 {
            c.status = Some(-1);
        }
    }
}

/// stress-ng's `--timeout` for a run of `run`: the run rounded up plus a margin; a zero
/// duration means open-ended (stress-ng's `0` = no timeout; the session stops it).
fn stress_ng_timeout(run: Duration) -> String {
    if run.is_zero() {
        return "0".into();
    }
    let s = run.as_secs() + u64::from(run.subsec_nanos() > 0);
    format!("{}s", s + TIMEOUT_MARGIN_S)
}

fn stressor_exe(spec: &StressSpec) -> PathBuf {
    if let Some(p) = &spec.stressor_exe {
        return p.clone();
    }
    if let Some(p) = std::env::var_os(STRESSOR_EXE_ENV) {
        return PathBuf::from(p);
    }
    // /proc/self/exe keeps working even if the binary on disk is replaced meanwhile.
    PathBuf::from("/proc/self/exe")
}

fn find_stress_ng() -> Option<StressNgInfo> {
    let path = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("stress-ng"))
            .find(|f| f.is_file())
    })?;
    let out = Command::new(&path)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text
        .split_whitespace()
        .skip_while(|w| *w != "version")
        .nth(1)
        .unwrap_or("unknown")
        .to_string();
    Some(StressNgInfo {
        path: path.display().to_string(),
        version,
    })
}

/// Parse the rows of stress-ng's `--metrics-brief` table:
/// `stress-ng: metrc: [PID] cpu  1562  3.05  1.17  0.05  511.96  1285.19`
/// (older versions say `info:` instead of `metrc:`).
pub fn parse_metrics_brief(text: &str) -> Vec<StressMetric> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.split_once("] ").map(|(_, r)| r) else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        if f.len() < 7 {
            continue;
        }
        let nums: Option<Vec<f64>> = f[1..7].iter().map(|x| x.parse().ok()).collect();
        let Some(n) = nums else { continue };
        if f[0].parse::<f64>().is_ok() {
            continue;
        }
        out.push(StressMetric {
            stressor: f[0].to_string(),
            source: "stress-ng".into(),
            bogo_ops: n[0],
            real_time_s: n[1],
            usr_time_s: Some(n[2]),
            sys_time_s: Some(n[3]),
            bogo_ops_per_s: n[4],
        });
    }
    out
}

/// Parse the built-in stressors' closing line `xrunlab-stressor: KIND ops=N seconds=S`.
pub fn parse_builtin_metrics(text: &str) -> Vec<StressMetric> {
    text.lines()
        .filter_map(|l| l.strip_prefix("xrunlab-stressor: "))
        .filter_map(|rest| {
            let mut it = rest.split_whitespace();
            let kind = it.next()?.to_string();
            let mut ops = None;
            let mut secs = None;
            for kv in it {
                match kv.split_once('=') {
                    Some(("ops", v)) => ops = v.parse::<f64>().ok(),
                    Some(("seconds", v)) => secs = v.parse::<f64>().ok(),
                    _ => {}
                }
            }
            let (ops, secs) = (ops?, secs?);
            Some(StressMetric {
                stressor: kind,
                source: "builtin".into(),
                bogo_ops: ops,
                real_time_s: secs,
                usr_time_s: None,
                sys_time_s: None,
                bogo_ops_per_s: if secs > 0.0 { ops / secs } else { 0.0 },
            })
        })
        .collect()
}

fn read_tail(path: &Path) -> String {
    tail_of(&String::from_utf8_lossy(
        &std::fs::read(path).unwrap_or_default(),
    ))
}

fn tail_of(text: &str) -> String {
    if text.len() <= OUTPUT_TAIL {
        return text.to_string();
    }
    let mut start = text.len() - OUTPUT_TAIL;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].to_string()
}

fn statfs(dir: &Path) -> Option<libc::statfs> {
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: c is NUL-terminated; buf is writable plain data.
    let mut buf: libc::statfs = unsafe { std::mem::zeroed() };
    (unsafe { libc::statfs(c.as_ptr(), &mut buf) } == 0).then_some(buf)
}

// statfs field types differ between architectures (32-bit ARM boards), hence the casts.
#[allow(clippy::unnecessary_cast)]
fn is_tmpfs(dir: &Path) -> bool {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    statfs(dir).is_some_and(|s| s.f_type as i64 == TMPFS_MAGIC)
}

#[allow(clippy::unnecessary_cast)]
fn free_bytes(dir: &Path) -> Option<u64> {
    statfs(dir).map(|s| s.f_bavail as u64 * s.f_bsize as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_stress_dirs_of_dead_sessions_are_removed_and_live_ones_kept() {
        let parent = tempfile::tempdir().unwrap();
        // A pid that surely existed and is gone: a child that has been reaped.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let stale = parent.path().join(format!("xrunlab-stress-{dead}-0-1"));
        let live = parent
            .path()
            .join(format!("xrunlab-stress-{}-0-1", std::process::id()));
        let other = parent.path().join("xrunlab-stress-notapid");
        for d in [&stale, &live, &other] {
            std::fs::create_dir(d).unwrap();
            std::fs::write(d.join("out-0.log"), "x").unwrap();
        }
        remove_stale_dirs(parent.path());
        assert!(!stale.exists());
        assert!(live.exists() && other.exists());
    }

    #[test]
    fn parses_stress_ng_metrics_brief() {
        let text = "\
stress-ng: info:  [19352] setting to a 10 second run per stressor
stress-ng: metrc: [19352] stressor       bogo ops real time  usr time  sys time   bogo ops/s     bogo ops/s
stress-ng: metrc: [19352]                           (secs)    (secs)    (secs)   (real time) (usr+sys time)
stress-ng: metrc: [19352] cpu                1562      3.05      1.17      0.05       511.96        1285.19
stress-ng: metrc: [19352] udp              167598      3.06      0.08      1.73     54842.34       92566.22
stress-ng: info:  [19352] successful run completed in 3.06s
";
        let m = parse_metrics_brief(text);
        assert_eq!(m.len(), 2, "{m:?}");
        assert_eq!(m[0].stressor, "cpu");
        assert_eq!(m[0].bogo_ops, 1562.0);
        assert_eq!(m[1].real_time_s, 3.06);
        assert_eq!(m[1].bogo_ops_per_s, 54842.34);
        assert_eq!(m[1].sys_time_s, Some(1.73));
    }

    #[test]
    fn parses_builtin_metrics() {
        let m = parse_builtin_metrics("noise\nxrunlab-stressor: cpu ops=200 seconds=2.0\n");
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].bogo_ops_per_s, 100.0);
    }

    #[test]
    fn idle_session_runs_nothing() {
        let s = StressSession::start(&StressSpec::default(), Duration::from_secs(1)).unwrap();
        assert!(s.pgids().is_empty());
        let r = s.stop();
        assert!(r.processes.is_empty());
        assert_eq!(r.backend, "none");
    }

    #[test]
    fn stress_ng_timeout_covers_the_run() {
        assert_eq!(stress_ng_timeout(Duration::from_secs(10)), "15s");
        assert_eq!(stress_ng_timeout(Duration::from_millis(1500)), "7s");
        assert_eq!(stress_ng_timeout(Duration::ZERO), "0");
    }

    #[test]
    fn status_decoding() {
        assert_eq!(describe_status(0), "exit 0");
        assert_eq!(describe_status(3 << 8), "exit 3");
        assert_eq!(describe_status(9), "signal 9");
    }
}
