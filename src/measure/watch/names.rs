//! A thread of the watched session by the name its user knows: the JACK client name (or
//! PipeWire node), with the process beside it (`xbsynth (python3[4121])`).
//!
//! jackd2 1.9.21's libjack has no working `jack_get_client_pid`, so on jackd2 the name is
//! found through the client's semaphore: jackd2 on Linux gives each client a POSIX
//! semaphore, `/dev/shm/jack_sem.<uid>_<server>_<client>`, that the server (or the client
//! before it in the graph) posts to start the client's cycle. A client process maps its own
//! semaphore and those of the clients it signals next, so the mapping alone does not say
//! which is whose; but each client's real-time thread sleeps between cycles in `futex` on
//! its own semaphore, so the futex address `/proc/PID/task/TID/syscall` shows, inside one
//! of those mappings, names that thread's client. A process holding several clients gets
//! each thread its own (checked on this machine: two Python clients in one process).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// How a thread's client name was established.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum NamedBy {
    /// The JACK client semaphore its thread waits on (jackd2).
    Semaphore,
    /// The client library's own client-to-pid call (PipeWire's libjack).
    Pid,
    /// The PipeWire profiler's node name.
    Node,
    /// Not established: the process's name stands in (results written before names were
    /// looked for read as this).
    #[default]
    Process,
}

/// `name (process[pid])`, or `name` alone when the process adds nothing (it is the name,
/// or unknown).
pub fn display(name: &str, process: &str, pid: i32) -> String {
    format!("{name}{}", beside(name, process, pid))
}

/// What stands beside a client's name: ` (process[pid])`, or nothing when the process adds
/// nothing (it is the name, or unknown).
pub fn beside(name: &str, process: &str, pid: i32) -> String {
    if process.is_empty() || pid <= 0 || name == process || name.starts_with("server:") {
        return String::new();
    }
    format!(" ({process}[{pid}])")
}

/// A semaphore mapping of one JACK client: its address range and the client's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SemMap {
    pub lo: u64,
    pub hi: u64,
    pub client: String,
}

/// The client semaphores of server `server` in a process's `/proc/PID/maps`.
pub fn semaphores(maps: &str, server: &str) -> Vec<SemMap> {
    maps.lines()
        .filter_map(|line| {
            let (range, path) = split_maps_line(line)?;
            let file = path.strip_suffix(" (deleted)").unwrap_or(path);
            let client = sem_client(file.strip_prefix("/dev/shm/")?, server)?;
            let (lo, hi) = range.split_once('-')?;
            Some(SemMap {
                lo: u64::from_str_radix(lo, 16).ok()?,
                hi: u64::from_str_radix(hi, 16).ok()?,
                client: client.to_string(),
            })
        })
        .collect()
}

/// The address range and the path of a maps line (the path may hold spaces: a client
/// name may).
fn split_maps_line(line: &str) -> Option<(&str, &str)> {
    let mut rest = line;
    let mut range = "";
    // address, perms, offset, device, inode, then the path.
    for i in 0..5 {
        rest = rest.trim_start();
        let end = rest.find(char::is_whitespace)?;
        if i == 0 {
            range = &rest[..end];
        }
        rest = &rest[end..];
    }
    let path = rest.trim_start();
    (!path.is_empty()).then_some((range, path))
}

/// The client name of a semaphore file name `jack_sem.<uid>_<server>_<client>` (glibc names
/// it `sem.jack_sem…` on some builds; a promiscuous server leaves the uid out).
fn sem_client<'a>(file: &'a str, server: &str) -> Option<&'a str> {
    let file = file.strip_prefix("sem.").unwrap_or(file);
    let rest = file.strip_prefix("jack_sem.")?;
    let rest = match rest.split_once('_') {
        Some((uid, r)) if !uid.is_empty() && uid.bytes().all(|b| b.is_ascii_digit()) => r,
        _ => rest,
    };
    let client = rest.strip_prefix(server)?.strip_prefix('_')?;
    (!client.is_empty()).then_some(client)
}

/// The futex word a thread is blocked on, from `/proc/PID/task/TID/syscall` (`NR arg1 …`);
/// None when it is running or in another call.
pub fn futex_word(syscall: &str) -> Option<u64> {
    let mut f = syscall.split_whitespace();
    // A C long, as the kernel prints it and libc names it (32 bits on armhf).
    let nr: libc::c_long = f.next()?.parse().ok()?;
    if nr != libc::SYS_futex {
        return None;
    }
    u64::from_str_radix(f.next()?.trim_start_matches("0x"), 16).ok()
}

/// The client whose semaphore holds `addr`.
pub fn client_at(sems: &[SemMap], addr: u64) -> Option<&str> {
    sems.iter()
        .find(|s| s.lo <= addr && addr < s.hi)
        .map(|s| s.client.as_str())
}

/// How often a thread is looked at before it is given up on: a client thread of a session
/// that is not overloaded sleeps on its semaphore most of each cycle, so a few looks a
/// millisecond apart find it there.
const LOOKS: usize = 20;

/// The JACK client each of `tids` (threads of process `pid`) serves on server `server`,
/// by the semaphore it waits on; threads never seen waiting on one are left out. None when
/// the process maps no semaphore of that server: it is not in its session (another jackd's
/// client or server).
pub fn jack_clients(server: &str, pid: i32, tids: &[i32]) -> Option<Vec<(i32, String)>> {
    let root = crate::system::Root::default();
    let maps = root.read(&format!("/proc/{pid}/maps"))?;
    let sems = semaphores(&maps, server);
    if sems.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    let mut left: Vec<i32> = tids.to_vec();
    for look in 0..LOOKS {
        left.retain(|&tid| {
            let sc = root.read(&format!("/proc/{pid}/task/{tid}/syscall"));
            match sc
                .as_deref()
                .and_then(futex_word)
                .and_then(|a| client_at(&sems, a))
            {
                Some(c) => {
                    out.push((tid, c.to_string()));
                    false
                }
                None => true,
            }
        });
        if left.is_empty() || look + 1 == LOOKS {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    Some(out)
}

/// A real-time thread of a JACK client (or of the server) of the watched session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ClientThread {
    /// Its JACK client's name (`named_by` says how it was found); when none was found, the
    /// process's comm with `/THREAD` when the thread's own name differs (libjack's process
    /// thread inherits the name of the thread that activated the client); the server's are
    /// `server:COMM`.
    pub name: String,
    /// The process's comm.
    #[serde(default)]
    pub process: String,
    #[serde(default)]
    pub named_by: NamedBy,
    pub pid: i32,
    pub tid: i32,
}

impl ClientThread {
    /// As the user knows it: `client (process[pid])`.
    pub fn who(&self) -> String {
        display(&self.name, &self.process, self.pid)
    }
}

/// The real-time threads (FIFO or RR) of every process that is a JACK client or server of
/// the session we are a client of (on jackd2: that maps one of its semaphores, so another
/// server's are left out), ours left out. Each client thread is named by its JACK
/// client: on jackd2 (`jack_server`: the server's name) by the semaphore it waits on
/// (`names::jack_clients`), else by `names` (pid → JACK client names, from the client
/// library), else by its process. `any_role`: PipeWire's clients and daemon too (a PipeWire
/// watch, whose profiler names the late node, samples them all).
pub fn session_threads(
    names: &HashMap<i32, Vec<String>>,
    jack_server: Option<&str>,
    any_role: bool,
) -> Vec<ClientThread> {
    let root = crate::system::Root::default();
    let own = std::process::id() as i32;
    let mut rt: Vec<i32> = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if pid == own {
            continue;
        }
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            // SAFETY: sched_getscheduler reads another thread's policy; no memory passed.
            // PipeWire's threads carry SCHED_RESET_ON_FORK beside their policy.
            let policy = unsafe { libc::sched_getscheduler(tid) } & !libc::SCHED_RESET_ON_FORK;
            if policy == libc::SCHED_FIFO || policy == libc::SCHED_RR {
                rt.push(tid);
            }
        }
    }
    let audio = crate::trace::clients::identify(&root, &rt, own);
    let (by_sem, members) = semaphore_names(&audio, jack_server);
    let mut out: Vec<ClientThread> = audio
        .into_iter()
        .filter(|(_, c)| {
            let jack = matches!(
                c.role,
                crate::trace::AudioRole::JackClient | crate::trace::AudioRole::JackServer
            );
            (jack || any_role) && members.as_ref().is_none_or(|m| m.contains(&c.pid))
        })
        .map(|(tid, c)| {
            let thread = root
                .read(&format!("/proc/{}/task/{tid}/comm", c.pid))
                .map(|s| s.trim().to_string())
                .unwrap_or_default();
            let (process, named_by) = match (by_sem.get(&tid), names.get(&c.pid)) {
                (Some(n), _) => (n.clone(), NamedBy::Semaphore),
                (None, Some(n)) if !n.is_empty() => (n.join("+"), NamedBy::Pid),
                _ => (c.process.clone(), NamedBy::Process),
            };
            let name = match c.role {
                crate::trace::AudioRole::JackServer => format!("server:{}", c.process),
                _ if named_by == NamedBy::Semaphore => process,
                _ if !thread.is_empty() && thread != c.process => format!("{process}/{thread}"),
                _ => process,
            };
            ClientThread {
                name,
                process: c.process,
                named_by: match c.role {
                    crate::trace::AudioRole::JackServer => NamedBy::Process,
                    _ => named_by,
                },
                pid: c.pid,
                tid,
            }
        })
        .collect();
    out.sort_by_key(|t| (t.pid, t.tid));
    out
}

/// The JACK client of each client thread in `audio`, by the semaphore it waits on (jackd2),
/// and the processes that map a semaphore of the server: its session's. None when no process
/// does (the semaphores cannot be read here): then every JACK process is taken as before.
fn semaphore_names(
    audio: &HashMap<i32, crate::trace::AudioClient>,
    jack_server: Option<&str>,
) -> (HashMap<i32, String>, Option<std::collections::HashSet<i32>>) {
    let Some(server) = jack_server else {
        return (HashMap::new(), None);
    };
    let mut by_pid: HashMap<i32, Vec<i32>> = HashMap::new();
    for (&tid, c) in audio {
        match c.role {
            crate::trace::AudioRole::JackClient => by_pid.entry(c.pid).or_default().push(tid),
            // The server's threads wait on no client's semaphore: only its membership.
            crate::trace::AudioRole::JackServer => {
                by_pid.entry(c.pid).or_default();
            }
            _ => {}
        }
    }
    let mut names = HashMap::new();
    let mut members = std::collections::HashSet::new();
    for (pid, tids) in by_pid {
        if let Some(found) = jack_clients(server, pid, &tids) {
            members.insert(pid);
            names.extend(found);
        }
    }
    let members = (!members.is_empty()).then_some(members);
    (names, members)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Recorded on this machine: one python3 process holding clients "alpha one" and "beta"
    // of a jackd2 named "cnx"; each maps the semaphores of the clients it signals too.
    const MAPS: &str = "\
7f345fd67000-7f345fd93000 r-xp 0000b000 fe:00 15695971                   /usr/lib/x86_64-linux-gnu/libjack.so.0.1.0
7f345ff62000-7f345ff63000 rw-s 00000000 00:1b 18                         /dev/shm/jack-0-3 (deleted)
7f345ff63000-7f345ff64000 rw-s 00000000 00:1b 17                         /dev/shm/jack_sem.0_cnx_beta
7f345ff69000-7f345ff6a000 rw-s 00000000 00:1b 14                         /dev/shm/jack_sem.0_cnx_alpha one
7f3460078000-7f3460079000 rw-s 00000000 00:1b 12                         /dev/shm/jack_sem.0_cnx_freewheel
7f3460079000-7f346007a000 rw-s 00000000 00:1b 10                         /dev/shm/jack_sem.0_cnx_system
7f3460079000-7f346007a000 rw-s 00000000 00:1b 10                         /dev/shm/jack_sem.0_other_system
";

    #[test]
    fn each_thread_gets_the_client_whose_semaphore_it_waits_on() {
        let sems = semaphores(MAPS, "cnx");
        let names: Vec<&str> = sems.iter().map(|s| s.client.as_str()).collect();
        assert_eq!(names, ["beta", "alpha one", "freewheel", "system"]);
        // Recorded on x86_64, where futex is system call 202: the number is this target's.
        let nr = libc::SYS_futex;
        let a = format!("{nr} 0x7f345ff69000 0x0 0x0 0x0 0x0 0x0 0x7f345f677de8 0x7f3460460829");
        let b = format!("{nr} 0x7f345ff63000 0x0 0x0 0x0 0x0 0x0 0x7f345f575de8 0x7f3460460829");
        assert_eq!(
            futex_word(&a).and_then(|w| client_at(&sems, w)),
            Some("alpha one")
        );
        assert_eq!(
            futex_word(&b).and_then(|w| client_at(&sems, w)),
            Some("beta")
        );
    }

    #[test]
    fn a_thread_not_waiting_on_a_semaphore_gets_no_name() {
        let sems = semaphores(MAPS, "cnx");
        // Running, sleeping in nanosleep, or in a futex of some other object.
        assert_eq!(futex_word("running"), None);
        assert_eq!(
            futex_word("230 0x1 0x1 0x7fff88b437a0 0x0 0x0 0x0 0x0 0x0"),
            None
        );
        let other = format!(
            "{} 0x40468fd8 0x189 0x0 0x0 0x0 0xffffffff 0x0 0x0",
            libc::SYS_futex
        );
        assert_eq!(futex_word(&other).and_then(|w| client_at(&sems, w)), None);
        // Another server's semaphores are not this server's clients.
        assert!(semaphores(MAPS, "cn").is_empty());
    }

    #[test]
    fn semaphore_names_parse_with_and_without_uid_and_glibc_prefix() {
        assert_eq!(
            sem_client("jack_sem.1000_default_x y", "default"),
            Some("x y")
        );
        assert_eq!(
            sem_client("sem.jack_sem.0_default_a_b", "default"),
            Some("a_b")
        );
        assert_eq!(sem_client("jack_sem.default_c", "default"), Some("c"));
        assert_eq!(sem_client("jack_sem.0_default_", "default"), None);
        assert_eq!(sem_client("jack-0-1", "default"), None);
    }

    #[test]
    fn the_process_stands_beside_the_client_only_when_it_adds_something() {
        assert_eq!(
            display("xbsynth", "python3", 4121),
            "xbsynth (python3[4121])"
        );
        assert_eq!(display("jalv", "jalv", 7), "jalv");
        assert_eq!(display("server:jackd", "jackd", 7), "server:jackd");
        assert_eq!(display("python3", "", 0), "python3");
    }
}
