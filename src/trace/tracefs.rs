//! A private tracefs instance (docs/methods.md "Forensics"): found or mounted, set up
//! with the mono clock, the events attribution needs and the measured CPUs, and removed on
//! every exit path — its guard's `Drop`, an `atexit` hook (the watchdog's `process::exit`),
//! the signal escalation hooks of `rt::interrupt`, and at the next start for an instance
//! whose process is gone.

use crate::rt::interrupt::{self, Escalation};
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};

/// Events the attribution reads. `sched_switch` is required; the others refine it.
/// `sched_wakeup` is left out: `sched_waking` says when the wake-up came, and the switch when
/// it ran; `sched_migrate_task` too: the switches say where a task ran. At 10^4 wake-ups a
/// second (and far more under `--stress paper`) every event costs recording and reading.
pub const EVENTS: &[(&str, &str)] = &[
    ("sched", "sched_switch"),
    ("sched", "sched_waking"),
    ("irq", "irq_handler_entry"),
    ("irq", "irq_handler_exit"),
    ("irq", "softirq_entry"),
    ("irq", "softirq_exit"),
    ("timer", "hrtimer_expire_entry"),
    ("timer", "hrtimer_expire_exit"),
];

/// Instance names start with this, then the owner's pid.
pub const PREFIX: &str = "xrunlab-";

/// Why tracing cannot be used here, in one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unusable(pub String);

impl std::fmt::Display for Unusable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where tracefs is mounted, and whether we mounted it (then we unmount it when we are done
/// and nobody else uses it).
#[derive(Debug, Clone)]
pub struct Tracefs {
    pub root: PathBuf,
    pub mounted_by_us: bool,
}

const DEFAULT_MOUNT: &str = "/sys/kernel/tracing";

fn mount_point(fstype: &str) -> Option<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|l| {
        // "36 25 0:12 / /sys/kernel/tracing rw,… - tracefs tracefs rw"
        let (left, right) = l.split_once(" - ")?;
        let fs = right.split_whitespace().next()?;
        if fs != fstype {
            return None;
        }
        Some(PathBuf::from(left.split_whitespace().nth(4)?))
    })
}

fn lockdown() -> Option<String> {
    let s = std::fs::read_to_string("/sys/kernel/security/lockdown").ok()?;
    let mode = s.split_whitespace().find(|w| w.starts_with('['))?;
    (mode == "[confidentiality]").then(|| mode.trim_matches(['[', ']']).to_string())
}

/// Find tracefs, mounting it when it is not. The error says why it cannot be used.
pub fn discover() -> Result<Tracefs, Unusable> {
    if let Some(mode) = lockdown() {
        return Err(Unusable(format!(
            "kernel lockdown ({mode}) forbids tracing"
        )));
    }
    // SAFETY: geteuid has no preconditions.
    let root_user = unsafe { libc::geteuid() } == 0;
    let found = mount_point("tracefs").or_else(|| {
        mount_point("debugfs")
            .map(|d| d.join("tracing"))
            .filter(|p| p.join("instances").is_dir())
    });
    if let Some(root) = found {
        // First: tracefs is mode 0700, so to anyone else its instances look missing.
        if !root_user && access_w(&root.join("instances")).is_err() {
            return Err(Unusable(
                "tracing needs root (run with sudo, or grant write access to tracefs)".into(),
            ));
        }
        if !root.join("instances").is_dir() {
            return Err(Unusable(format!(
                "{} has no instances directory (kernel too old for private trace instances)",
                root.display()
            )));
        }
        return Ok(Tracefs {
            root,
            mounted_by_us: false,
        });
    }
    if !root_user {
        return Err(Unusable(
            "tracefs is not mounted and mounting it needs root".into(),
        ));
    }
    // A mount a killed xrunlab left is unmounted first, so the one we make is ours to remove.
    clean_stale_mount(Path::new(MOUNT_RECORD), Path::new(DEFAULT_MOUNT));
    if mount_tracefs(&c(DEFAULT_MOUNT)) != 0 {
        return Err(Unusable(format!(
            "tracefs is not mounted and mounting it at {DEFAULT_MOUNT} failed: {}",
            std::io::Error::last_os_error()
        )));
    }
    record_mount(
        Path::new(MOUNT_RECORD),
        Path::new(DEFAULT_MOUNT),
        std::process::id(),
    );
    Ok(Tracefs {
        root: PathBuf::from(DEFAULT_MOUNT),
        mounted_by_us: true,
    })
}

/// Where a tracefs mount xrunlab made is recorded as `PID MOUNT_ID`: `kill -9` runs no hook,
/// and the next start must tell the mount that run left from one the system or a live run
/// uses (docs/ARCHITECTURE.md §5).
pub const MOUNT_RECORD: &str = "/run/xrunlab/tracefs-mount";

/// The mount id (mountinfo's first field) of the tracefs mounted at exactly `point`, the
/// topmost when several are stacked.
fn mount_id_at(point: &Path) -> Option<u64> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().rev().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let f: Vec<&str> = left.split_whitespace().collect();
        (right.split_whitespace().next()? == "tracefs" && Path::new(f.get(4)?) == point)
            .then(|| f[0].parse().ok())
            .flatten()
    })
}

/// Note that `pid` mounted the tracefs at `point`. Best effort: without the record a mount
/// a killed run leaves stays, as it did before there was one.
fn record_mount(record: &Path, point: &Path, pid: u32) {
    let Some(id) = mount_id_at(point) else {
        return;
    };
    if let Some(dir) = record.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if let Ok(mut out) = crate::common::output::Output::create_derived(record) {
        use std::io::Write;
        if writeln!(out, "{pid} {id}").is_ok() {
            let _ = out.commit();
        }
    }
}

/// [`clean_stale_mount`] of the mount [`discover`] makes: at every start as root, so a
/// killed run's mount does not wait for the next traced measurement.
pub fn clean_stale_default() -> Option<String> {
    clean_stale_mount(Path::new(MOUNT_RECORD), Path::new(DEFAULT_MOUNT))
}

/// The record's (pid, mount id), if it is ours (written by this uid) and well formed.
fn read_record(record: &Path) -> Option<(i32, u64)> {
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;
    let f = std::fs::File::open(record).ok()?;
    // SAFETY: geteuid has no preconditions.
    if f.metadata().ok()?.uid() != unsafe { libc::geteuid() } {
        return None;
    }
    let mut text = String::new();
    f.take(64).read_to_string(&mut text).ok()?;
    let mut w = text.split_whitespace();
    Some((w.next()?.parse().ok()?, w.next()?.parse().ok()?))
}

/// Unmount the tracefs at `point` when `record` says an xrunlab that is gone mounted it and
/// it is still that mount (same mount id), and no live xrunlab has an instance in it; drop
/// a record whose mount is gone. Returns what it unmounted.
pub fn clean_stale_mount(record: &Path, point: &Path) -> Option<String> {
    let (pid, id) = read_record(record)?;
    if pid_alive(pid) {
        return None;
    }
    if mount_id_at(point) != Some(id) {
        let _ = std::fs::remove_file(record);
        return None;
    }
    let fs = Tracefs {
        root: point.to_path_buf(),
        mounted_by_us: false,
    };
    sweep_stale(&fs);
    let in_use = std::fs::read_dir(point.join("instances")).map_or(true, |d| {
        d.flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with(PREFIX))
    });
    if in_use {
        return None;
    }
    let t = CString::new(point.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: t is a valid NUL-terminated path.
    if unsafe { libc::umount2(t.as_ptr(), 0) } != 0 {
        // EBUSY: another tracer holds a file in it; left for a later start.
        return None;
    }
    let _ = std::fs::remove_file(record);
    Some(format!(
        "unmounted the tracefs at {} that xrunlab {pid} mounted before it was killed",
        point.display()
    ))
}

fn c(s: &str) -> CString {
    CString::new(s).expect("no NUL in a constant")
}

/// mount(2) of a tracefs at `target`: its return code, errno set when it is not 0.
fn mount_tracefs(target: &CString) -> i32 {
    let (src, fs) = (c("nodev"), c("tracefs"));
    // SAFETY: all three are valid NUL-terminated strings; data may be null.
    unsafe {
        libc::mount(
            src.as_ptr(),
            target.as_ptr(),
            fs.as_ptr(),
            0,
            std::ptr::null(),
        )
    }
}

fn access_w(p: &Path) -> std::io::Result<()> {
    let cs = CString::new(p.as_os_str().as_encoded_bytes()).map_err(std::io::Error::other)?;
    // SAFETY: cs is a valid NUL-terminated path.
    if unsafe { libc::access(cs.as_ptr(), libc::W_OK) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn pid_alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks existence and permission.
    pid > 0
        && (unsafe { libc::kill(pid, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM))
}

/// The owner's pid of an instance name `xrunlab-PID` or `xrunlab-PID-N`.
pub fn owner_of(name: &str) -> Option<i32> {
    let rest = name.strip_prefix(PREFIX)?;
    rest.split('-').next()?.parse().ok()
}

/// Remove `xrunlab-*` instances whose process is gone; returns their names.
pub fn sweep_stale(fs: &Tracefs) -> Vec<String> {
    let mut removed = Vec::new();
    let Ok(dir) = std::fs::read_dir(fs.root.join("instances")) else {
        return removed;
    };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(pid) = owner_of(&name) {
            if !pid_alive(pid) && std::fs::remove_dir(e.path()).is_ok() {
                removed.push(name);
            }
        }
    }
    removed
}

// The one instance a signal hook or atexit must remove: its path (NUL-terminated) and the fd
// of its trace_pipe, which must be closed first (rmdir of an instance with an open file
// is refused with EBUSY). One per process is enough for the hooks: a second concurrent
// instance in one process (tests) is still removed by its guard.
const PATH_MAX: usize = 256;
static HOOK_PATH: [AtomicU64; PATH_MAX / 8] = [const { AtomicU64::new(0) }; PATH_MAX / 8];
static HOOK_ARMED: AtomicBool = AtomicBool::new(false);
const HOOK_FDS: usize = 64;
static HOOK_FD: [AtomicI32; HOOK_FDS] = [const { AtomicI32::new(-1) }; HOOK_FDS];
static HOOKS_INSTALLED: AtomicBool = AtomicBool::new(false);

fn arm_hook(path: &Path) -> bool {
    let bytes = path.as_os_str().as_encoded_bytes();
    if bytes.len() >= PATH_MAX || HOOK_ARMED.load(Ordering::SeqCst) {
        return false;
    }
    let mut buf = [0u8; PATH_MAX];
    buf[..bytes.len()].copy_from_slice(bytes);
    for (i, w) in HOOK_PATH.iter().enumerate() {
        let mut b = [0u8; 8];
        b.copy_from_slice(&buf[i * 8..i * 8 + 8]);
        w.store(u64::from_ne_bytes(b), Ordering::SeqCst);
    }
    HOOK_ARMED.store(true, Ordering::SeqCst);
    if !HOOKS_INSTALLED.swap(true, Ordering::SeqCst) {
        interrupt::add_hook(on_escalation);
        // SAFETY: at_exit is a plain extern "C" fn using only atomics, close and rmdir.
        unsafe { libc::atexit(at_exit) };
    }
    true
}

/// Async-signal-safe: close the pipe's fd and rmdir the armed instance.
fn remove_armed() {
    if !HOOK_ARMED.swap(false, Ordering::SeqCst) {
        return;
    }
    let mut buf = [0u8; PATH_MAX];
    for (i, w) in HOOK_PATH.iter().enumerate() {
        buf[i * 8..i * 8 + 8].copy_from_slice(&w.load(Ordering::SeqCst).to_ne_bytes());
    }
    // SAFETY: close and rmdir are async-signal-safe; buf is NUL-terminated (len < PATH_MAX).
    unsafe {
        for slot in &HOOK_FD {
            let fd = slot.swap(-1, Ordering::SeqCst);
            if fd >= 0 {
                libc::close(fd);
            }
        }
        libc::rmdir(buf.as_ptr() as *const libc::c_char);
    }
}

fn on_escalation(_: Escalation) {
    remove_armed();
}

extern "C" fn at_exit() {
    remove_armed();
}

/// The instance guard: the directory exists while it lives.
#[derive(Debug)]
pub struct Instance {
    pub fs: Tracefs,
    pub dir: PathBuf,
    pub name: String,
    pub cpus: Vec<usize>,
    hooked: bool,
    removed: bool,
    /// Events that could not be enabled (absent from this kernel), named group/event.
    pub missing_events: Vec<String>,
}

static SEQ: AtomicU64 = AtomicU64::new(0);

/// Per-CPU ring buffer size for a measurement of `duration_ns`: the reader drains it all the
/// time, so it only has to hold what arrives while the reader is late (a stalled host, a
/// loaded machine); a longer run gets more because a long stall is more likely in it.
pub fn buffer_kb_for(duration_ns: u64) -> u64 {
    let s = duration_ns / 1_000_000_000;
    (4096 + s * 128).min(65536)
}

fn cpumask(cpus: &[usize]) -> String {
    let top = cpus.iter().copied().max().unwrap_or(0);
    let mut words = vec![0u32; top / 32 + 1];
    for &c in cpus {
        words[c / 32] |= 1 << (c % 32);
    }
    words
        .iter()
        .rev()
        .map(|w| format!("{w:08x}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn write(path: &Path, value: &str) -> std::io::Result<()> {
    std::fs::write(path, value)
}

/// Per-CPU kilobytes the ring buffer grows or shrinks by in one write.
const RESIZE_STEP_KB: u64 = 512;

/// Set the instance's per-CPU ring buffer to `kb`, [`RESIZE_STEP_KB`] at a time. The kernel
/// allocates (or frees) a resize's pages in one stretch of kernel code; without kernel
/// preemption nothing else runs on that CPU meanwhile — not the audio threads of the session
/// being watched. Measured on this project's VM (preemption `none`, jackd at 50 % DSP load):
/// one write of 32 MiB took 59–88 ms and caused 108 xruns in 5 tries, 512 KiB steps none in
/// 6 (docs/methods.md "Forensics").
fn resize(dir: &Path, kb: u64) -> std::io::Result<()> {
    let path = dir.join("buffer_size_kb");
    // "1408" or, before the first resize of an instance, "7 (expanded: 1408)".
    let now = std::fs::read_to_string(&path)?;
    let mut at: u64 = now
        .rsplit(|c: char| !c.is_ascii_digit())
        .find(|w| !w.is_empty())
        .and_then(|w| w.parse().ok())
        .unwrap_or(kb);
    while at != kb {
        at = if at < kb {
            (at + RESIZE_STEP_KB).min(kb)
        } else {
            at.saturating_sub(RESIZE_STEP_KB).max(kb)
        };
        write(&path, &at.to_string())?;
    }
    Ok(())
}

impl Instance {
    /// Create `instances/xrunlab-PID[-N]`, configure it and leave tracing off.
    pub fn create(fs: Tracefs, cpus: &[usize], duration_ns: u64) -> Result<Instance, Unusable> {
        let pid = std::process::id();
        let n = SEQ.fetch_add(1, Ordering::SeqCst);
        let name = if n == 0 {
            format!("{PREFIX}{pid}")
        } else {
            format!("{PREFIX}{pid}-{n}")
        };
        let dir = fs.root.join("instances").join(&name);
        std::fs::create_dir(&dir).map_err(|e| {
            Unusable(format!(
                "cannot create trace instance {}: {e}",
                dir.display()
            ))
        })?;
        let hooked = arm_hook(&dir);
        let mut inst = Instance {
            fs,
            dir,
            name,
            cpus: cpus.to_vec(),
            hooked,
            removed: false,
            missing_events: Vec::new(),
        };
        inst.configure(duration_ns)?;
        Ok(inst)
    }

    fn configure(&mut self, duration_ns: u64) -> Result<(), Unusable> {
        let err = |what: &str, e: std::io::Error| Unusable(format!("trace instance: {what}: {e}"));
        write(&self.dir.join("tracing_on"), "0").map_err(|e| err("tracing_on", e))?;
        write(&self.dir.join("trace_clock"), "mono")
            .map_err(|e| err("trace_clock mono (CLOCK_MONOTONIC) is not available", e))?;
        resize(&self.dir, buffer_kb_for(duration_ns)).map_err(|e| err("buffer_size_kb", e))?;
        if !self.cpus.is_empty() {
            write(&self.dir.join("tracing_cpumask"), &cpumask(&self.cpus))
                .map_err(|e| err("tracing_cpumask", e))?;
        }
        for (group, event) in EVENTS {
            let p = self
                .dir
                .join("events")
                .join(group)
                .join(event)
                .join("enable");
            if write(&p, "1").is_err() {
                if *event == "sched_switch" {
                    return Err(Unusable(
                        "the kernel has no sched_switch trace event".into(),
                    ));
                }
                self.missing_events.push(format!("{group}/{event}"));
            }
        }
        Ok(())
    }

    /// The ring buffer's page ("sub-buffer") size: a raw read returns one page.
    pub fn subbuf_size(&self) -> usize {
        std::fs::read_to_string(self.dir.join("buffer_subbuf_size_kb"))
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
            .map_or(4096, |kb| kb.clamp(4, 1024) * 1024)
    }

    pub fn set_on(&self, on: bool) -> std::io::Result<()> {
        write(&self.dir.join("tracing_on"), if on { "1" } else { "0" })
    }

    /// Open `rel` (trace_pipe, per_cpu/cpuN/trace_pipe_raw) non-blocking; its fd is
    /// registered so a dying process can close it before it removes the instance.
    pub fn open_pipe(&self, rel: &str) -> std::io::Result<std::fs::File> {
        use std::os::unix::fs::OpenOptionsExt;
        use std::os::unix::io::AsRawFd;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(self.dir.join(rel))?;
        if self.hooked {
            if let Some(slot) = HOOK_FD.iter().find(|s| s.load(Ordering::SeqCst) < 0) {
                slot.store(f.as_raw_fd(), Ordering::SeqCst);
            }
        }
        Ok(f)
    }

    /// The pipes are about to be closed by their owner: the hooks must not close the fd
    /// numbers again (they may be reused).
    pub fn pipe_closed(&self) {
        if self.hooked {
            for slot in &HOOK_FD {
                slot.store(-1, Ordering::SeqCst);
            }
        }
    }

    /// Events lost per traced CPU: `overrun` (overwritten before they were read) plus
    /// `dropped events` (discarded), from per_cpu/cpuN/stats.
    pub fn lost_per_cpu(&self) -> Vec<(usize, u64)> {
        self.cpus
            .iter()
            .map(|&c| {
                let p = self.dir.join(format!("per_cpu/cpu{c}/stats"));
                let s = std::fs::read_to_string(p).unwrap_or_default();
                (c, parse_stats_lost(&s))
            })
            .collect()
    }

    /// Remove the instance now; an error says why it stayed.
    pub fn remove(&mut self) -> std::io::Result<()> {
        if self.removed {
            return Ok(());
        }
        let _ = self.set_on(false);
        // Freed in steps too, for the same reason it grew in them (a failure only means
        // rmdir frees the rest at once).
        let _ = resize(&self.dir, RESIZE_STEP_KB);
        if self.hooked {
            HOOK_ARMED.store(false, Ordering::SeqCst);
            self.hooked = false;
        }
        // An instance's rmdir is refused while a reader holds a file: retry briefly.
        let mut last = Ok(());
        for _ in 0..50 {
            last = std::fs::remove_dir(&self.dir);
            if last.is_ok() || !self.dir.exists() {
                self.removed = true;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        if self.removed && self.fs.mounted_by_us {
            let t = CString::new(self.fs.root.as_os_str().as_encoded_bytes()).ok();
            // Only when nothing else of ours is left: umount refuses (EBUSY) while another
            // process holds a tracefs file, and we leave it mounted then.
            let others = std::fs::read_dir(self.fs.root.join("instances"))
                .map(|d| {
                    d.flatten()
                        .any(|e| e.file_name().to_string_lossy().starts_with(PREFIX))
                })
                .unwrap_or(true);
            if let (Some(t), false) = (t, others) {
                // SAFETY: t is a valid NUL-terminated path.
                if unsafe { libc::umount2(t.as_ptr(), 0) } == 0
                    && read_record(Path::new(MOUNT_RECORD))
                        .is_some_and(|(pid, _)| pid == std::process::id() as i32)
                {
                    let _ = std::fs::remove_file(MOUNT_RECORD);
                }
            }
        }
        last
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = self.remove();
    }
}

/// Sum of `overrun:` and `dropped events:` in a per-CPU stats file.
pub fn parse_stats_lost(s: &str) -> u64 {
    s.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            matches!(k.trim(), "overrun" | "dropped events")
                .then(|| v.trim().parse::<u64>().ok())
                .flatten()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `kill -9` left a mount: the next start unmounts it only when its recorder is gone and
    /// it is still the recorded mount (on a private mount point, so the machine's tracefs
    /// is not touched).
    #[test]
    fn a_mount_a_killed_xrunlab_left_is_unmounted_and_no_other() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let point = dir.path().join("tracing");
        std::fs::create_dir(&point).unwrap();
        let record = dir.path().join("run/tracefs-mount");
        let target = c(point.to_str().unwrap());
        if mount_tracefs(&target) != 0 {
            return; // no tracefs in this kernel or container
        }
        let mut child = std::process::Command::new("true").spawn().unwrap();
        child.wait().unwrap();
        let dead = child.id();
        let id = mount_id_at(&point).unwrap();
        // Its recorder alive: kept.
        record_mount(&record, &point, std::process::id());
        assert_eq!(read_record(&record), Some((std::process::id() as i32, id)));
        assert_eq!(clean_stale_mount(&record, &point), None);
        assert_eq!(mount_id_at(&point), Some(id));
        // Another mount than the recorded one: kept, the record dropped.
        std::fs::write(&record, format!("{dead} {}\n", id + 100_000)).unwrap();
        assert_eq!(clean_stale_mount(&record, &point), None);
        assert_eq!(mount_id_at(&point), Some(id));
        assert!(!record.exists());
        // The recorder gone, the mount its own: unmounted.
        record_mount(&record, &point, dead);
        let said = clean_stale_mount(&record, &point);
        let left = mount_id_at(&point);
        if left.is_some() {
            // SAFETY: as above.
            unsafe { libc::umount2(target.as_ptr(), 0) };
        }
        assert!(said.is_some_and(|s| s.contains(&dead.to_string())));
        assert_eq!(left, None);
        assert!(!record.exists());
    }

    #[test]
    fn the_buffer_is_resized_to_the_size_asked_from_either_form_of_the_file() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("buffer_size_kb");
        std::fs::write(&f, "7 (expanded: 1408)\n").unwrap();
        resize(d.path(), 4096 + 100).unwrap();
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "4196");
        resize(d.path(), RESIZE_STEP_KB).unwrap();
        assert_eq!(
            std::fs::read_to_string(&f).unwrap(),
            RESIZE_STEP_KB.to_string()
        );
    }

    #[test]
    fn cpumask_words() {
        assert_eq!(cpumask(&[1]), "00000002");
        assert_eq!(cpumask(&[0, 1]), "00000003");
        assert_eq!(cpumask(&[33]), "00000002,00000000");
    }

    #[test]
    fn owner_from_names() {
        assert_eq!(owner_of("xrunlab-123"), Some(123));
        assert_eq!(owner_of("xrunlab-123-4"), Some(123));
        assert_eq!(owner_of("xrunlabx-1"), None);
        assert_eq!(owner_of("other"), None);
    }

    #[test]
    fn stats_lost_sums_overrun_and_dropped() {
        let s = "entries: 10\noverrun: 7\ncommit overrun: 0\nbytes: 100\n\
                 oldest event ts:  12.000\nnow ts:  13.000\ndropped events: 2\nread events: 5\n";
        assert_eq!(parse_stats_lost(s), 9);
    }

    #[test]
    fn buffer_grows_with_duration_and_is_bounded() {
        assert!(buffer_kb_for(60_000_000_000) > buffer_kb_for(1_000_000_000));
        assert_eq!(buffer_kb_for(u64::MAX), 65536);
    }
}
