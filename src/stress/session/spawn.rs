//! Starting the stressors: one child process group each, set up between fork and exec.

use super::output::read_tail;
use super::reap::{describe_status, peek_exit};
use super::{
    Child, StressNgInfo, StressSession, SESSION_ENV, STARTUP_CHECK, STRESSOR_EXE_ENV,
    TIMEOUT_MARGIN_S,
};
use crate::error::{Error, Result};
use crate::stress::registry;
use crate::stress::spec::{BackendChoice, Preset, StressSpec};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

impl StressSession {
    pub(super) fn spawn_all(&mut self, spec: &StressSpec, run_duration: Duration) -> Result<()> {
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
    pub(super) fn check_startup(&mut self) -> Result<()> {
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
}

/// Runs in the child between fork and exec: async-signal-safe calls only.
fn child_setup(
    parent: libc::pid_t,
    cpus: Option<&libc::cpu_set_t>,
    leave: Option<&std::ffi::CStr>,
) -> std::io::Result<()> {
    // SAFETY: plain system calls on values owned by this (single-threaded) child.
    unsafe {
        if libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
        // The parent may have died between fork and prctl; then nobody would kill us.
        if libc::getppid() != parent {
            libc::_exit(1);
        }
        // Children inherit the spawning thread's policy; stressors must never be real-time.
        let param = libc::sched_param { sched_priority: 0 };
        if libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // A measurement inside a tuned machine's audio cpuset: the load runs where the
        // machine's other work does (a refusal leaves it beside the audio threads).
        if let Some(file) = leave {
            let fd = libc::open(file.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd >= 0 {
                libc::write(fd, b"0\n".as_ptr().cast(), 2);
                libc::close(fd);
            }
        }
        if let Some(set) = cpus {
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

fn cpu_set(cpus: &[usize]) -> Result<Option<libc::cpu_set_t>> {
    if cpus.is_empty() {
        return Ok(None);
    }
    // SAFETY: cpu_set_t is plain data.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        if c >= libc::CPU_SETSIZE as usize {
            return Err(Error::usage(format!("CPU {c} is beyond CPU_SETSIZE")));
        }
        // SAFETY: c is within the set's bounds.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    Ok(Some(set))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stress_ng_timeout_covers_the_run() {
        assert_eq!(stress_ng_timeout(Duration::from_secs(10)), "15s");
        assert_eq!(stress_ng_timeout(Duration::from_millis(1500)), "7s");
        assert_eq!(stress_ng_timeout(Duration::ZERO), "0");
    }
}
