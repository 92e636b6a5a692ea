//! Where each tuned value lives and how it is read, compared and written: a file (sysfs,
//! procfs, sysctl), an IRQ thread's scheduling policy, or the audio cpuset. Everything goes
//! through [`Root`]; the two targets that are not plain files emulate the kernel's
//! semantics on a fixture root (a thread's policy in its `stat` line, cgroup task files as
//! plain lists) so plan/apply/restore run the same code in tests.

use crate::system::{cpu_list, Root};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::io::Write;

/// How a file's value compares: as text, as a CPU list (`0-1` = `0,1`) or as a hex CPU
/// mask (`3` = `00000003`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Form {
    Text,
    CpuList,
    CpuMask,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Target {
    /// A value file (absolute system path).
    File { path: String, form: Form },
    /// A kernel thread's policy and RT priority, as `fifo 90` / `other 0`. The name guards
    /// against a pid reused by another thread since.
    Thread { pid: u32, comm: String },
    /// A kernel thread's CPU affinity, as a CPU list (`Cpus_allowed_list` of its status).
    Affinity { pid: u32, comm: String },
    /// The audio cpuset: `present` or `absent` (v2: `absent, controller off` when the
    /// cpuset controller had to be enabled in the root's subtree_control).
    Cpuset(Cpuset),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Cpuset {
    /// Mount point of the hierarchy holding the cpuset controller.
    pub mount: String,
    /// cgroup v2 (a partition root) or v1 (an exclusive cpuset plus a system one).
    pub v2: bool,
    /// v1 only: the controller's files carry the `cpuset.` prefix (not mounted noprefix).
    pub prefixed: bool,
    pub audio_cpus: Vec<usize>,
    pub housekeeping_cpus: Vec<usize>,
}

pub const AUDIO_GROUP: &str = "xrunlab-audio";
pub const SYSTEM_GROUP: &str = "xrunlab-system";

impl Cpuset {
    fn dir(&self, group: &str) -> String {
        format!("{}/{group}", self.mount.trim_end_matches('/'))
    }

    fn file(&self, dir: &str, name: &str) -> String {
        let p = if self.v2 || self.prefixed {
            "cpuset."
        } else {
            ""
        };
        format!("{dir}/{p}{name}")
    }

    fn tasks(&self, dir: &str) -> String {
        format!("{dir}/{}", if self.v2 { "cgroup.procs" } else { "tasks" })
    }

    /// The file a process writes its pid to in order to run on the audio CPUs.
    pub fn join_file(&self) -> String {
        self.tasks(&self.dir(AUDIO_GROUP))
    }

    /// The file a task writes `0` to in order to leave the audio CPUs again: v1's system
    /// set, v2's root (the partition took the audio CPUs out of it).
    pub fn leave_file(&self) -> String {
        if self.v2 {
            self.tasks(&self.mount)
        } else {
            self.tasks(&self.dir(SYSTEM_GROUP))
        }
    }
}

/// Parse a hex CPU mask (`00000000,0000000f`).
pub fn parse_mask(s: &str) -> Option<Vec<usize>> {
    let hex: String = s.trim().chars().filter(|c| *c != ',').collect();
    if hex.is_empty() || hex.len() > 4096 {
        return None;
    }
    let mut cpus = Vec::new();
    for (i, c) in hex.chars().rev().enumerate() {
        let d = c.to_digit(16)?;
        cpus.extend((0..4).filter(|b| d & (1 << b) != 0).map(|b| i * 4 + b));
    }
    cpus.sort_unstable();
    Some(cpus)
}

/// A CPU set as the kernel's hex mask, comma-separated in 32-bit groups.
pub fn format_mask(cpus: &[usize]) -> String {
    let words = cpus.iter().max().map_or(1, |m| m / 32 + 1);
    let mut w = vec![0u32; words];
    for &c in cpus {
        w[c / 32] |= 1 << (c % 32);
    }
    let mut out: Vec<String> = w.iter().rev().map(|x| format!("{x:08x}")).collect();
    // The kernel prints leading groups in full; a single group reads better trimmed.
    if out.len() == 1 {
        out[0] = format!("{:x}", w[0]);
    }
    out.join(",")
}

/// True when two values of `target` mean the same.
pub fn same(target: &Target, a: &str, b: &str) -> bool {
    let (a, b) = (a.trim(), b.trim());
    match target {
        Target::File {
            form: Form::CpuList,
            ..
        } => cpu_list(a).is_some() && cpu_list(a) == cpu_list(b),
        Target::File {
            form: Form::CpuMask,
            ..
        } => parse_mask(a).is_some() && parse_mask(a) == parse_mask(b),
        Target::Affinity { .. } => cpu_list(a).is_some() && cpu_list(a) == cpu_list(b),
        Target::Cpuset(_) => a.split(',').next() == b.split(',').next(),
        _ => a == b,
    }
}

/// The value now; None when it cannot be read (missing, unreadable, thread gone).
pub fn read(root: &Root, target: &Target) -> Option<String> {
    match target {
        Target::File { path, .. } => root.read(path),
        Target::Thread { pid, comm } => {
            if root.read(&format!("/proc/{pid}/comm")).as_deref() != Some(comm) {
                return None;
            }
            let stat = root.read(&format!("/proc/{pid}/stat"))?;
            let (prio, policy) = stat_policy(&stat)?;
            Some(format!("{} {prio}", policy_name(policy)?))
        }
        Target::Affinity { pid, comm } => {
            if root.read(&format!("/proc/{pid}/comm")).as_deref() != Some(comm) {
                return None;
            }
            status_field(&root.read(&format!("/proc/{pid}/status"))?, CPUS_ALLOWED)
        }
        Target::Cpuset(c) => {
            let dir = c.dir(AUDIO_GROUP);
            if root.path(&dir).is_dir() {
                return Some("present".into());
            }
            if c.v2 {
                let ctl = root.read(&format!("{}/cgroup.subtree_control", c.mount))?;
                if !ctl.split_whitespace().any(|w| w == "cpuset") {
                    return Some("absent, controller off".into());
                }
            }
            Some("absent".into())
        }
    }
}

/// Write `value`; the error says what the kernel answered, in one line.
pub fn write(root: &Root, target: &Target, value: &str) -> Result<(), String> {
    match target {
        Target::File { path, .. } => write_file(root, path, value),
        Target::Thread { pid, comm } => write_thread(root, *pid, comm, value),
        Target::Affinity { pid, comm } => write_affinity(root, *pid, comm, value),
        Target::Cpuset(c) => {
            if value.starts_with("present") {
                cpuset_create(root, c)
            } else {
                cpuset_remove(root, c, value.contains("controller off"))
            }
        }
    }
}

/// Write a value file in one `write`, as `echo VALUE > FILE` does; never creates it.
pub fn write_file(root: &Root, path: &str, value: &str) -> Result<(), String> {
    let p = root.path(path);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&p)
        .map_err(|e| format!("{path}: {}", explain(&e)))?;
    f.write_all(format!("{value}\n").as_bytes())
        .map_err(|e| format!("{path}: writing '{value}': {}", explain(&e)))
}

/// True when a write's error (as [`write`] words it) is the kernel declining the setting
/// itself (a driver-managed IRQ, a value the hardware cannot take), not a failure to reach it.
pub fn refused(err: &str) -> bool {
    err.contains("(EIO)") || err.contains("(EPERM;")
}

fn explain(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EINVAL) => "the kernel refused the value (EINVAL)".into(),
        Some(libc::EIO) => "the kernel cannot do this here (EIO)".into(),
        // SAFETY: geteuid has no failure mode.
        Some(libc::EACCES) | Some(libc::EPERM) if unsafe { libc::geteuid() } == 0 => {
            "the kernel does not allow it (EPERM; an IRQ managed by its driver cannot be moved)"
                .into()
        }
        Some(libc::EACCES) | Some(libc::EPERM) => "not permitted (run as root)".into(),
        Some(libc::EROFS) => "read-only".into(),
        Some(libc::EBUSY) => "busy (EBUSY)".into(),
        Some(libc::ENOENT) => "missing".into(),
        Some(libc::EISDIR) => "not a value file".into(),
        _ => e.to_string(),
    }
}

/// rt_priority (field 40) and policy (field 41) of a `/proc/PID/stat` line. The name
/// (field 2) may hold spaces and parentheses, so fields are counted after its last `)`.
fn stat_policy(stat: &str) -> Option<(u32, u32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3.
    Some((f.get(37)?.parse().ok()?, f.get(38)?.parse().ok()?))
}

fn policy_name(p: u32) -> Option<&'static str> {
    Some(match p {
        0 => "other",
        1 => "fifo",
        2 => "rr",
        3 => "batch",
        5 => "idle",
        _ => return None,
    })
}

fn policy_number(name: &str) -> Option<u32> {
    Some(match name {
        "other" => 0,
        "fifo" => 1,
        "rr" => 2,
        "batch" => 3,
        "idle" => 5,
        _ => return None,
    })
}

fn write_thread(root: &Root, pid: u32, comm: &str, value: &str) -> Result<(), String> {
    let bad = || format!("bad thread policy '{value}'");
    let (name, prio) = value.split_once(' ').ok_or_else(bad)?;
    let policy = policy_number(name).ok_or_else(bad)?;
    let prio: u32 = prio.parse().map_err(|_| bad())?;
    if root.read(&format!("/proc/{pid}/comm")).as_deref() != Some(comm) {
        return Err(format!("thread {pid} ({comm}) is gone"));
    }
    if root.is_live() {
        let param = libc::sched_param {
            sched_priority: prio as i32,
        };
        // SAFETY: param is a valid sched_param; pid names a thread of this system.
        let rc = unsafe { libc::sched_setscheduler(pid as i32, policy as i32, &param) };
        return if rc == 0 {
            Ok(())
        } else {
            Err(format!(
                "sched_setscheduler({pid}, {value}): {}",
                explain(&std::io::Error::last_os_error())
            ))
        };
    }
    // A fixture thread is its stat line: rewrite fields 40 and 41.
    let path = format!("/proc/{pid}/stat");
    let stat = root.read(&path).ok_or_else(|| format!("{path}: missing"))?;
    let cut = stat
        .rfind(')')
        .ok_or_else(|| format!("{path}: not a stat line"))?
        + 1;
    let mut f: Vec<String> = stat[cut..].split_whitespace().map(String::from).collect();
    if f.len() < 39 {
        return Err(format!("{path}: short stat line"));
    }
    f[37] = prio.to_string();
    f[38] = policy.to_string();
    write_file(root, &path, &format!("{} {}", &stat[..cut], f.join(" ")))
}

pub(super) const CPUS_ALLOWED: &str = "Cpus_allowed_list";

/// The value of `Name:\tvalue` in a `/proc/PID/status` text.
pub fn status_field(status: &str, name: &str) -> Option<String> {
    status.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k == name).then(|| v.trim().to_string())
    })
}

pub(super) fn write_affinity(root: &Root, pid: u32, comm: &str, value: &str) -> Result<(), String> {
    let cpus = cpu_list(value).filter(|c| !c.is_empty());
    let cpus = cpus.ok_or_else(|| format!("bad CPU list '{value}'"))?;
    if root.read(&format!("/proc/{pid}/comm")).as_deref() != Some(comm) {
        return Err(format!("thread {pid} ({comm}) is gone"));
    }
    if root.is_live() {
        // SAFETY: cpu_set_t is plain data; CPU_SET's bound is checked.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for &c in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
            // SAFETY: c is below CPU_SETSIZE (filtered above), so the bit is inside the set.
            unsafe { libc::CPU_SET(c, &mut set) };
        }
        // SAFETY: set is initialised and its size passed; pid names a thread of this system.
        let rc = unsafe {
            libc::sched_setaffinity(
                pid as libc::pid_t,
                std::mem::size_of::<libc::cpu_set_t>(),
                &set,
            )
        };
        return if rc == 0 {
            Ok(())
        } else {
            Err(format!(
                "sched_setaffinity({pid}, {value}): {}",
                explain(&std::io::Error::last_os_error())
            ))
        };
    }
    // A fixture thread's affinity is its status line; a per-CPU kernel thread refuses
    // (EINVAL) as the kernel would, marked in the fixture by `PF_NO_SETAFFINITY` in stat.
    let path = format!("/proc/{pid}/status");
    let status = root.read(&path).ok_or_else(|| format!("{path}: missing"))?;
    if thread_flags(root, pid).is_some_and(|f| f & PF_NO_SETAFFINITY != 0) {
        return Err(format!(
            "sched_setaffinity({pid}, {value}): the kernel refused the value (EINVAL)"
        ));
    }
    let text: Vec<String> = status
        .lines()
        .map(|l| match l.split_once(':') {
            Some((k, _)) if k == CPUS_ALLOWED => format!("{CPUS_ALLOWED}:\t{value}"),
            _ => l.to_string(),
        })
        .collect();
    write_file(root, &path, &text.join("\n"))
}

/// A kernel thread (`PF_KTHREAD` in the flags of `/proc/PID/stat`).
pub const PF_KTHREAD: u64 = 0x0020_0000;
/// Its affinity is the kernel's to set: `sched_setaffinity` refuses (EINVAL).
pub const PF_NO_SETAFFINITY: u64 = 0x0400_0000;

/// The flags (field 9) of `/proc/PID/stat`.
pub fn thread_flags(root: &Root, pid: u32) -> Option<u64> {
    let stat = root.read(&format!("/proc/{pid}/stat"))?;
    let rest = &stat[stat.rfind(')')? + 1..];
    // rest starts at field 3.
    rest.split_whitespace().nth(6)?.parse().ok()
}

fn cpuset_create(root: &Root, c: &Cpuset) -> Result<(), String> {
    let r = if c.v2 {
        cpuset_create_v2(root, c)
    } else {
        cpuset_create_v1(root, c)
    };
    if r.is_err() {
        // Leave nothing half made; the journal still says "absent".
        let _ = cpuset_remove(root, c, false);
    }
    r
}

/// Make a cgroup. cgroupfs fills a new group with its control files; on a fixture root
/// the ones xrunlab writes are made empty.
fn mkdir(root: &Root, dir: &str, files: &[String]) -> Result<(), String> {
    std::fs::create_dir(root.path(dir)).map_err(|e| format!("mkdir {dir}: {}", explain(&e)))?;
    if !root.is_live() {
        for f in files {
            std::fs::write(root.path(f), "").map_err(|e| format!("{f}: {e}"))?;
        }
    }
    Ok(())
}

/// Enable or disable a controller for a cgroup's children (`+cpuset` / `-cpuset`). A
/// fixture's subtree_control is the list the kernel would show.
fn subtree_control(root: &Root, mount: &str, change: &str) -> Result<(), String> {
    let path = format!("{mount}/cgroup.subtree_control");
    if root.is_live() {
        return write_file(root, &path, change);
    }
    let name = &change[1..];
    let mut on: Vec<String> = root
        .read(&path)
        .unwrap_or_default()
        .split_whitespace()
        .filter(|w| *w != name)
        .map(String::from)
        .collect();
    if change.starts_with('+') {
        on.push(name.to_string());
    }
    write_file(root, &path, &on.join(" "))
}

fn cpuset_create_v1(root: &Root, c: &Cpuset) -> Result<(), String> {
    let list = crate::rt::affinity::format_cpu_list;
    let mems = root
        .read(&c.file(&c.mount, "mems"))
        .ok_or_else(|| format!("{}: missing", c.file(&c.mount, "mems")))?;
    let audio = c.dir(AUDIO_GROUP);
    let files = |dir: &str| {
        ["cpus", "mems", "cpu_exclusive"]
            .iter()
            .map(|f| c.file(dir, f))
            .chain([c.tasks(dir)])
            .collect::<Vec<_>>()
    };
    mkdir(root, &audio, &files(&audio))?;
    write_file(root, &c.file(&audio, "cpus"), &list(&c.audio_cpus))?;
    write_file(root, &c.file(&audio, "mems"), &mems)?;
    write_file(root, &c.file(&audio, "cpu_exclusive"), "1")?;
    // An exclusive cpuset alone keeps no one off its CPUs: everything else moves to a
    // sibling holding the housekeeping CPUs (what `cset shield` does).
    let system = c.dir(SYSTEM_GROUP);
    mkdir(root, &system, &files(&system))?;
    write_file(root, &c.file(&system, "cpus"), &list(&c.housekeeping_cpus))?;
    write_file(root, &c.file(&system, "mems"), &mems)?;
    move_tasks(root, &c.tasks(&c.mount), &c.tasks(&system));
    Ok(())
}

fn cpuset_create_v2(root: &Root, c: &Cpuset) -> Result<(), String> {
    let ctl = format!("{}/cgroup.subtree_control", c.mount);
    let enabled = root
        .read(&ctl)
        .is_some_and(|s| s.split_whitespace().any(|w| w == "cpuset"));
    if !enabled {
        subtree_control(root, &c.mount, "+cpuset")?;
    }
    let audio = c.dir(AUDIO_GROUP);
    let files = [
        c.file(&audio, "cpus"),
        c.file(&audio, "cpus.partition"),
        c.tasks(&audio),
    ];
    mkdir(root, &audio, &files)?;
    write_file(
        root,
        &c.file(&audio, "cpus"),
        &crate::rt::affinity::format_cpu_list(&c.audio_cpus),
    )?;
    // A partition root takes its CPUs out of every other cgroup's effective set.
    let part = c.file(&audio, "cpus.partition");
    write_file(root, &part, "root")?;
    match root.read(&part) {
        Some(p) if p == "root" => Ok(()),
        p => Err(format!(
            "{part}: the kernel made it '{}'",
            p.unwrap_or_default()
        )),
    }
}

/// Move every task listed in `from` into `to`, as a cgroup does one pid per write. Tasks
/// the kernel refuses (per-CPU kernel threads) stay where they are. On a live system the
/// list is read again until a pass moves nothing: a task forked while a pass ran was born
/// in `from` (its parent was still there) and would stay behind.
fn move_tasks(root: &Root, from: &str, to: &str) -> usize {
    let listed = || -> Vec<String> {
        root.read(from)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    };
    if !root.is_live() {
        // A fixture's task files are plain lists: append to one, empty the other.
        let pids = listed();
        let mut dest = root.read(to).unwrap_or_default();
        for p in &pids {
            dest.push('\n');
            dest.push_str(p);
        }
        let _ = write_file(root, to, dest.trim());
        let _ = std::fs::write(root.path(from), "");
        return pids.len();
    }
    let mut moved = 0;
    for _ in 0..MOVE_PASSES {
        let n = listed()
            .iter()
            .filter(|p| write_file(root, to, p).is_ok())
            .count();
        moved += n;
        if n == 0 {
            break;
        }
    }
    moved
}

/// Passes over a cgroup's task list (each re-reads it): a fork loop adds a few tasks per
/// pass, and the first pass moves their parents, so this settles in a handful.
const MOVE_PASSES: usize = 50;
/// How long a restore keeps emptying a group the kernel still calls busy.
const DRAIN_FOR: std::time::Duration = std::time::Duration::from_secs(5);

/// Empty a group into `to` and remove it. A child forked between reading the task list and
/// the `rmdir` keeps the group busy (EBUSY), so this moves what is listed again and retries
/// until the group is gone or [`DRAIN_FOR`] has passed.
fn drain_and_remove(root: &Root, dir: &str, tasks: &str, to: &str) -> Result<(), String> {
    let until = std::time::Instant::now() + DRAIN_FOR;
    loop {
        move_tasks(root, tasks, to);
        // cgroupfs removes a group with rmdir even though it lists files; a fixture's
        // directory holds real files.
        let r = if root.is_live() {
            std::fs::remove_dir(root.path(dir))
        } else {
            std::fs::remove_dir_all(root.path(dir))
        };
        match r {
            Ok(()) => return Ok(()),
            Err(e)
                if e.raw_os_error() == Some(libc::EBUSY) && std::time::Instant::now() < until =>
            {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            Err(e) => return Err(format!("rmdir {dir}: {}", explain(&e))),
        }
    }
}

fn cpuset_remove(root: &Root, c: &Cpuset, disable_controller: bool) -> Result<(), String> {
    let mut errors = Vec::new();
    for group in [AUDIO_GROUP, SYSTEM_GROUP] {
        let dir = c.dir(group);
        if !root.path(&dir).is_dir() {
            continue;
        }
        if let Err(e) = drain_and_remove(root, &dir, &c.tasks(&dir), &c.tasks(&c.mount)) {
            errors.push(e);
        }
    }
    if disable_controller && errors.is_empty() {
        if let Err(e) = subtree_control(root, &c.mount, "-cpuset") {
            errors.push(e);
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_and_lists_compare_by_meaning() {
        assert_eq!(parse_mask("00000000,00000003"), Some(vec![0, 1]));
        assert_eq!(format_mask(&[0, 2]), "5");
        assert_eq!(format_mask(&[0, 33]), "00000002,00000001");
        assert_eq!(parse_mask(&format_mask(&[0, 33])), Some(vec![0, 33]));
        assert_eq!(parse_mask("xyz"), None);
        let mask = Target::File {
            path: "/x".into(),
            form: Form::CpuMask,
        };
        assert!(same(&mask, "00000003", "3"));
        assert!(!same(&mask, "1", "3"));
        let list = Target::File {
            path: "/x".into(),
            form: Form::CpuList,
        };
        assert!(same(&list, "0-1", "0,1"));
        assert!(!same(&list, "0-1", "1"));
    }

    #[test]
    fn stat_fields_survive_names_with_spaces() {
        let mut fields: Vec<String> = (3..=52).map(|i| i.to_string()).collect();
        fields[37] = "50".into();
        fields[38] = "1".into();
        let line = format!("77 (irq/16-snd hda) {}", fields.join(" "));
        assert_eq!(stat_policy(&line), Some((50, 1)));
        assert_eq!(stat_policy("77 (x) S 1"), None);
    }
}
