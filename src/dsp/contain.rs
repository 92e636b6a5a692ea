//! A child process that foreign code cannot turn against its parent: the plugin probes
//! (`dsp::files`) and the plugin audit (`measure::audit::child`) re-execute this binary with
//! a hidden subcommand and run it through [`run`].
//!
//! - The child leads a process group of its own, and the whole group is killed when the
//!   child ends, hangs or is interrupted: a plugin that forks (in `init`, in `process`)
//!   leaves no orphans behind. One that leaves the group (`setsid`, a double fork) is found
//!   by the mark every process of the child inherits in its environment ([`MARK_ENV`]) and
//!   killed too; while a child runs this process is a child subreaper, so such orphans are
//!   reparented to us rather than to init and their zombies are ours to reap.
//! - Its address space is limited (`RLIMIT_AS`, [`memory_limit`]): a plugin that allocates
//!   without end fails its allocation in the child instead of pressing the machine.
//! - What it prints is read as it comes and only the last [`TAIL`] bytes of each stream are
//!   kept: a plugin writing a gigabyte fills neither a disk nor the parent's memory.
//! - The child names what it is doing in a stage file ([`stage`]), so that a crash or a hang
//!   says where (`clap_entry.init`, `clap_plugin.init`…).

use crate::common::procs;
use crate::error::{Error, Result};
use nix::sys::signal::{killpg, Signal};
use nix::sys::wait::{waitid, Id, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Bytes kept of each of the child's stdout and stderr (the last ones).
pub const TAIL: usize = 64 * 1024;

/// The address-space limit of a child unless `XRUNLAB_CHILD_MEMORY_MIB` says otherwise:
/// generous for any effect or instrument, far below what would press a workstation.
const DEFAULT_MEMORY_MIB: u64 = 4096;

/// The variable that sets the limit, in MiB.
pub const MEMORY_ENV: &str = "XRUNLAB_CHILD_MEMORY_MIB";

/// Below this a child cannot even load the binary and a plugin.
const MIN_MEMORY_MIB: u64 = 64;

/// The child's address-space limit in bytes (`XRUNLAB_CHILD_MEMORY_MIB`, default 4 GiB). A
/// value that is not a whole number of MiB of at least 64 is a usage error (exit 2), not a
/// silent return to the default.
pub fn memory_limit() -> Result<u64> {
    let mib = match std::env::var(MEMORY_ENV) {
        Err(_) => DEFAULT_MEMORY_MIB,
        Ok(v) => match v.trim().parse::<u64>() {
            Ok(m) if (MIN_MEMORY_MIB..=1 << 40).contains(&m) => m,
            _ => {
                return Err(Error::usage(format!(
                    "{MEMORY_ENV}={v:?}: expected the plugin child's memory limit as a whole number of MiB from {MIN_MEMORY_MIB} (default {DEFAULT_MEMORY_MIB})"
                )))
            }
        },
    };
    Ok(mib * 1024 * 1024)
}

/// The environment variable whose value marks the processes of one contained child.
pub const MARK_ENV: &str = "XRUNLAB_CONTAINED";

/// How a contained child ended.
#[derive(Debug)]
pub enum End {
    /// It exited with this code.
    Exited(i32),
    /// A signal killed it (its name, e.g. `SIGSEGV`).
    Signalled(String),
    /// It outlived the time limit and was killed.
    Hung,
    /// A Ctrl-C stopped the parent; the child was killed.
    Interrupted,
}

/// What a contained child left: how it ended, the last words of its output, its stage.
#[derive(Debug)]
pub struct Ended {
    pub end: End,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// The last stage it named (`"starting"` when it named none).
    pub stage: String,
    pub seconds: f64,
}

impl Ended {
    /// The last non-empty lines of what it printed, stderr first (crash lines go there).
    pub fn tail_lines(&self, n: usize) -> String {
        let pick = |b: &[u8]| -> Vec<String> {
            let text = String::from_utf8_lossy(b);
            let v: Vec<String> = text
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_string)
                .collect();
            v[v.len().saturating_sub(n)..].to_vec()
        };
        let mut lines = pick(&self.stderr);
        if lines.is_empty() {
            lines = pick(&self.stdout);
        }
        lines.join(" / ")
    }
}

/// The file in a child's scratch directory that names its stage.
pub const STAGE_FILE: &str = "stage";

static STAGE_PATH: OnceLock<PathBuf> = OnceLock::new();

/// In a contained child: write stages into `dir` from now on.
pub fn set_stage_dir(dir: &Path) {
    let _ = STAGE_PATH.set(dir.join(STAGE_FILE));
}

/// Name what the child is about to do, for the parent's message should it crash or hang.
/// A no-op outside a contained child.
pub fn stage(what: &str) {
    if let Some(p) = STAGE_PATH.get() {
        // Best effort: a lost stage only makes a crash message vaguer.
        let _ = std::fs::write(p, what);
    }
}

/// Keep reading `r` to its end, keeping the last `TAIL` bytes; the result goes to `tx`.
fn drain(mut r: impl Read + Send + 'static, tx: mpsc::Sender<(bool, Vec<u8>)>, err: bool) {
    std::thread::spawn(move || {
        let mut kept: Vec<u8> = Vec::with_capacity(TAIL);
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match r.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    kept.extend_from_slice(&buf[..n]);
                    if kept.len() > 2 * TAIL {
                        kept.drain(..kept.len() - TAIL);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        if kept.len() > TAIL {
            kept.drain(..kept.len() - TAIL);
        }
        let _ = tx.send((err, kept));
    });
}

/// Run `cmd` contained (see the module's note), its stage in `scratch`, killing it after
/// `limit`. Errors only when it cannot be started.
pub fn run(mut cmd: Command, scratch: &Path, limit: Duration) -> Result<Ended> {
    // Never above the hard limit this process has (raising it is refused without privilege).
    let limit_bytes = memory_limit()?;
    // rlim_t is u64 on 64-bit targets but u32 on armhf, where a limit past 4 GiB saturates to
    // u32::MAX, RLIM_INFINITY there: a 32-bit process cannot map that much anyway. On 64-bit
    // targets the conversion is the identity clippy would call useless.
    #[allow(clippy::useless_conversion)]
    let want = libc::rlim_t::try_from(limit_bytes).unwrap_or(libc::rlim_t::MAX);
    let mem = match nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_AS) {
        Ok((_, hard)) => want.min(hard),
        Err(_) => want,
    };
    static SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mark = format!(
        "{}.{}",
        std::process::id(),
        SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let _reaper = Subreaper::enter();
    cmd.env(MARK_ENV, &mark)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // SAFETY: between fork and exec only setrlimit runs, an async-signal-safe system call
    // that neither allocates nor takes a lock.
    unsafe {
        cmd.pre_exec(move || {
            use nix::sys::resource::{setrlimit, Resource};
            setrlimit(Resource::RLIMIT_AS, mem, mem).map_err(std::io::Error::from)
        });
    }
    let t0 = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| Error::io("starting a contained child of xrunlab", e))?;
    let group = Pid::from_raw(child.id() as i32);
    let (tx, rx) = mpsc::channel();
    if let Some(o) = child.stdout.take() {
        drain(o, tx.clone(), false);
    }
    if let Some(e) = child.stderr.take() {
        drain(e, tx.clone(), true);
    }
    drop(tx);
    // Wait without reaping, so that the group's id cannot be reused before it is killed.
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
    let end = loop {
        match waitid(Id::Pid(group), flags) {
            Ok(WaitStatus::Exited(_, code)) => break End::Exited(code),
            Ok(WaitStatus::Signaled(_, sig, _)) => break End::Signalled(sig.as_str().into()),
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => {
                let _ = killpg(group, Signal::SIGKILL);
                let _ = child.wait();
                return Err(Error::cannot_measure(format!(
                    "waiting for a contained child: {e}"
                )));
            }
        }
        if crate::rt::interrupt::requested() {
            break End::Interrupted;
        }
        if t0.elapsed() > limit {
            break End::Hung;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    // The whole group: what the plugin forked dies with the child; then whatever left it.
    let _ = killpg(group, Signal::SIGKILL);
    let _ = child.wait();
    sweep(&mark, group);
    let seconds = t0.elapsed().as_secs_f64();
    // A process that left the group (setsid) may keep the pipes open: wait a little only.
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let deadline = Instant::now() + Duration::from_secs(1);
    for _ in 0..2 {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((true, b)) => stderr = b,
            Ok((false, b)) => stdout = b,
            Err(_) => break,
        }
    }
    let stage = std::fs::read_to_string(scratch.join(STAGE_FILE))
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| "starting".into());
    Ok(Ended {
        end,
        stdout,
        stderr,
        stage,
        seconds,
    })
}

/// This process as a child subreaper (`PR_SET_CHILD_SUBREAPER`) while any contained child
/// runs: an orphan of the child is reparented to us, not to init, so it stays in our tree
/// and its zombie is reaped by [`sweep`]. Counted, since probes run four at a time, and
/// switched off with the last so that the orphans of unrelated children (a stressor's) are
/// not ours to reap for the rest of a long command.
struct Subreaper;

static SUBREAPERS: std::sync::Mutex<usize> = std::sync::Mutex::new(0);

impl Subreaper {
    fn enter() -> Subreaper {
        let mut n = SUBREAPERS.lock().unwrap_or_else(|e| e.into_inner());
        if *n == 0 {
            // SAFETY: prctl(PR_SET_CHILD_SUBREAPER, 1) takes integers only and changes one
            // attribute of this process; a failure (an old kernel) leaves the marks alone.
            unsafe {
                libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
            }
        }
        *n += 1;
        Subreaper
    }
}

impl Drop for Subreaper {
    fn drop(&mut self) {
        let mut n = SUBREAPERS.lock().unwrap_or_else(|e| e.into_inner());
        *n -= 1;
        if *n == 0 {
            // SAFETY: as in `enter`.
            unsafe {
                libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
            }
        }
    }
}

/// Kill every process that still carries `mark` in its environment (one that left the
/// child's group: `setsid`, a double fork), round after round until none is left (one
/// may fork between a scan and its kill), and reap those reparented to us. A process that
/// left the group *and* replaced its environment escapes this; only a cgroup would hold it.
///
/// A double fork's middle process has exited before we look: its zombie was reparented to
/// us when the child died, and a zombie's environment reads empty. It is reaped by its
/// place in the tree instead: a zombie child of ours that led, or belonged to, the
/// child's `group` or a process group or session of a marked process.
fn sweep(mark: &str, group: Pid) {
    let entry = format!("{MARK_ENV}={mark}").into_bytes();
    let me = std::process::id() as i32;
    let mut killed: Vec<Pid> = Vec::new();
    let mut theirs: Vec<i32> = vec![group.as_raw()];
    let ours = [
        nix::unistd::getpgrp().as_raw(),
        nix::unistd::getsid(None).map_or(0, |s| s.as_raw()),
    ];
    let reap = |killed: &mut Vec<Pid>| {
        killed.retain(|&p| {
            matches!(
                nix::sys::wait::waitpid(p, Some(WaitPidFlag::WNOHANG)),
                Ok(WaitStatus::StillAlive)
            )
        })
    };
    // Done after two scans in a row find none: a process forked while one scan listed
    // /proc (a double fork's grandchild, as its parent exits) may be missed by that scan
    // alone, never by the next.
    let mut empty = 0;
    for _ in 0..100 {
        let found: Vec<procs::Proc> = procs::marked(&entry)
            .into_iter()
            .filter(|p| p.pid != me)
            .collect();
        if found.is_empty() {
            empty += 1;
            if empty == 2 {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
            continue;
        }
        empty = 0;
        for p in found {
            let _ = nix::sys::signal::kill(Pid::from_raw(p.pid), Signal::SIGKILL);
            if !killed.contains(&Pid::from_raw(p.pid)) {
                killed.push(Pid::from_raw(p.pid));
            }
            // Our own group and session hold our other children (a stressor, whose
            // handle reaps it): only what the plugin made by itself is ours to reap here.
            theirs.extend(
                [p.pgrp, p.session]
                    .into_iter()
                    .filter(|g| !ours.contains(g)),
            );
        }
        reap(&mut killed);
        std::thread::sleep(Duration::from_millis(5));
    }
    killed.extend(
        procs::all()
            .into_iter()
            .filter(|p| p.state == 'Z' && p.ppid == me)
            .filter(|p| {
                [p.pid, p.pgrp, p.session]
                    .iter()
                    .any(|g| theirs.contains(g))
            })
            .map(|p| Pid::from_raw(p.pid)),
    );
    // SIGKILL is delivered at once, but a loaded machine may take a moment to run the exits.
    let t = Instant::now();
    while !killed.is_empty() && t.elapsed() < Duration::from_secs(1) {
        reap(&mut killed);
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A scratch directory of our own for one child (a fresh, unpredictable name: the parent
/// usually runs as root), removed when dropped.
pub struct Scratch(tempfile::TempDir);

impl Scratch {
    /// `what` names the directory's purpose in its name.
    pub fn new(what: &str) -> Result<Scratch> {
        tempfile::Builder::new()
            .prefix(&format!("xrunlab-{what}-"))
            .tempdir()
            .map(Scratch)
            .map_err(|e| Error::io("creating a scratch directory", e))
    }

    pub fn path(&self) -> &Path {
        self.0.path()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A double fork out of the child's group and session: the grandchild (found by its
    /// mark) is killed, and the middle process, a zombie reparented to us whose
    /// environment reads empty, is reaped rather than left until we exit.
    #[test]
    fn a_double_fork_leaves_neither_its_grandchild_nor_a_zombie() {
        let d = tempfile::tempdir().unwrap();
        let pids = d.path().join("pids");
        let mut cmd = Command::new("sh");
        // The middle (setsid's sh) records itself and its background grandchild, then
        // exits unwaited: `exec sleep` replaces the outer shell, which so never reaps it.
        cmd.arg("-c").arg(format!(
            "setsid sh -c 'sleep 60 & echo $$ $! > {0}.t; mv {0}.t {0}' & exec sleep 1",
            pids.display()
        ));
        let end = run(cmd, d.path(), Duration::from_secs(30)).unwrap();
        assert!(matches!(end.end, End::Exited(0)), "{:?}", end.end);
        let text = std::fs::read_to_string(&pids).expect("the middle process ran");
        let me = std::process::id() as i32;
        for pid in text.split_whitespace().map(|p| p.parse::<i32>().unwrap()) {
            let left = procs::all()
                .into_iter()
                .find(|p| p.pid == pid && (p.ppid == me || p.state != 'Z'));
            assert_eq!(
                left, None,
                "process {pid} of the double fork was left behind"
            );
        }
    }
}
