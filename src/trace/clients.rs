//! Which tasks of a trace are other clients (or the server) of an audio session, so that a
//! culprit reads "JACK client jalv[1234]" instead of a bare thread (docs/methods.md
//! "Forensics"). Read from `/proc` once, after the measurement, never on the cycle path.
//!
//! A process is a JACK client when it maps libjack (jack2's) and a server's shm segments
//! (`/dev/shm/jack-…`: it has connected), the JACK server when it maps
//! libjackserver (or is `jackd`/`jackdbus`), a PipeWire client when it maps libpipewire or
//! PipeWire's libjack (`pw-jack`), the PipeWire server when that process is `pipewire`. When
//! we are a JACK client ourselves, a JACK process counts only if it maps one of the server
//! segments (`/dev/shm/jack…`) we map: a client of another server is not of our session.

use crate::system::Root;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// A process's part in an audio session.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum AudioRole {
    JackClient,
    JackServer,
    PipewireClient,
    PipewireServer,
}

impl AudioRole {
    pub fn word(self) -> &'static str {
        match self {
            AudioRole::JackClient => "JACK client",
            AudioRole::JackServer => "JACK server",
            AudioRole::PipewireClient => "PipeWire client",
            AudioRole::PipewireServer => "PipeWire server",
        }
    }

    fn is_jack(self) -> bool {
        matches!(self, AudioRole::JackClient | AudioRole::JackServer)
    }
}

/// The audio process a task belongs to.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub struct AudioClient {
    pub role: AudioRole,
    /// The process's comm (its main thread's name).
    pub process: String,
    /// The process id (thread group id).
    pub pid: i32,
}

/// What one process's `maps` say: its role, and the JACK server segments it maps.
struct Mapped {
    role: Option<AudioRole>,
    segments: Vec<String>,
}

fn mapped(maps: &str, comm: &str) -> Mapped {
    let (mut pw, mut jack_server, mut jack_client) = (false, false, false);
    let mut segments: Vec<String> = Vec::new();
    for line in maps.lines() {
        // The path is the last field and may hold spaces; the fields before hold no '/'.
        let Some(path) = line.find('/').map(|i| &line[i..]) else {
            continue;
        };
        let base = path.rsplit('/').next().unwrap_or(path);
        if path.contains("/pipewire-0.3/jack/") || base.starts_with("libpipewire-0.3.so") {
            pw = true;
        } else if base.starts_with("libjackserver.so") {
            jack_server = true;
        } else if base.starts_with("libjack.so") {
            jack_client = true;
        } else if let Some(seg) = path.strip_prefix("/dev/shm/") {
            // The registry is shared by every server on the machine: it says nothing about
            // which one a process belongs to.
            let seg = seg.trim_end_matches(" (deleted)");
            if (seg.starts_with("jack") || seg.starts_with("sem.jack"))
                && seg != "jack-shm-registry"
                && !segments.iter().any(|s| s == seg)
            {
                segments.push(seg.to_string());
            }
        }
    }
    let role = if pw {
        Some(if comm == "pipewire" {
            AudioRole::PipewireServer
        } else {
            AudioRole::PipewireClient
        })
    } else if jack_server || comm == "jackd" || comm == "jackdbus" {
        Some(AudioRole::JackServer)
    } else if jack_client && !segments.is_empty() {
        // Linking libjack is not being a client (xrunlab itself links it): a client maps
        // a server's segments once it has connected.
        Some(AudioRole::JackClient)
    } else {
        None
    };
    Mapped { role, segments }
}

fn tgid(root: &Root, tid: i32) -> Option<i32> {
    root.read(&format!("/proc/{tid}/status"))?
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))?
        .trim()
        .parse()
        .ok()
}

/// The audio processes among the threads `tids` (tid → its process), read from `root`'s
/// `/proc`; `own_pid` is ours (never named, and the reference for the JACK session).
/// Threads that are gone or not audio processes are left out.
pub fn identify(root: &Root, tids: &[i32], own_pid: i32) -> HashMap<i32, AudioClient> {
    let mut out = HashMap::new();
    if tids.is_empty() {
        return out;
    }
    let ours = mapped(
        &root
            .read(&format!("/proc/{own_pid}/maps"))
            .unwrap_or_default(),
        "",
    );
    let mut by_process: HashMap<i32, Option<AudioClient>> = HashMap::new();
    for &tid in tids {
        if tid <= 0 {
            continue;
        }
        let Some(pid) = tgid(root, tid) else { continue };
        if pid == own_pid {
            continue;
        }
        let client = by_process.entry(pid).or_insert_with(|| {
            let comm = root.read(&format!("/proc/{pid}/comm"))?;
            let m = mapped(&root.read(&format!("/proc/{pid}/maps"))?, &comm);
            let role = m.role?;
            let other_server = role.is_jack()
                && !ours.segments.is_empty()
                && !m.segments.is_empty()
                && !m.segments.iter().any(|s| ours.segments.contains(s));
            (!other_server).then_some(AudioClient {
                role,
                process: comm,
                pid,
            })
        });
        if let Some(c) = client {
            out.insert(tid, c.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    const LIBC: &str =
        "7f0000001000-7f0000002000 r-xp 00001000 08:01 131 /usr/lib/x86_64-linux-gnu/libc.so.6";

    fn process(root: &Path, pid: i32, comm: &str, maps: &[&str], threads: &[i32]) {
        for &tid in std::iter::once(&pid).chain(threads) {
            let d = root.join(format!("proc/{tid}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(
                d.join("status"),
                format!("Name:\t{comm}\nTgid:\t{pid}\nPid:\t{tid}\n"),
            )
            .unwrap();
            std::fs::write(d.join("comm"), format!("{comm}\n")).unwrap();
            std::fs::write(d.join("maps"), maps.join("\n") + "\n").unwrap();
        }
    }

    fn lib(path: &str) -> String {
        format!("7f0000003000-7f0000004000 r-xp 00000000 08:01 4242   {path}")
    }

    fn shm(name: &str) -> String {
        format!("7f0000005000-7f0000006000 rw-s 00000000 00:19 77   /dev/shm/{name}")
    }

    #[test]
    fn clients_and_servers_are_named_by_what_they_map() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        let libjack = lib("/usr/lib/x86_64-linux-gnu/libjack.so.0.1.0");
        let registry = shm("jack-shm-registry");
        let seg = shm("jack-0-3");
        // Us: a JACK client of the server whose segment is jack-0-3.
        process(r, 100, "xrunlab", &[LIBC, &libjack, &registry, &seg], &[]);
        process(
            r,
            200,
            "jalv",
            &[LIBC, &libjack, &registry, &seg],
            &[201, 202],
        );
        process(
            r,
            300,
            "jackd",
            &[
                LIBC,
                &lib("/usr/lib/x86_64-linux-gnu/libjackserver.so.0.1.0"),
                &seg,
            ],
            &[301],
        );
        // A client of another server: only the registry in common.
        process(
            r,
            400,
            "other",
            &[LIBC, &libjack, &registry, &shm("jack-0-9")],
            &[],
        );
        process(r, 500, "bash", &[LIBC], &[]);
        process(
            r,
            600,
            "pipewire",
            &[
                LIBC,
                &lib("/usr/lib/x86_64-linux-gnu/libpipewire-0.3.so.0.365.0"),
            ],
            &[601],
        );
        // pw-jack: PipeWire's libjack, path with a space in a deleted memfd beside it.
        process(
            r,
            700,
            "Carla Rack",
            &[
                LIBC,
                &lib("/usr/lib/x86_64-linux-gnu/pipewire-0.3/jack/libjack.so.0.365.0"),
                "7f0000007000-7f0000008000 rw-s 00000000 00:01 9 /memfd:pipewire-memfd (deleted)",
            ],
            &[],
        );
        let got = identify(
            &Root::new(r),
            &[100, 201, 202, 301, 400, 500, 601, 700, 999],
            100,
        );
        let role = |tid: i32| got.get(&tid).map(|c| (c.role, c.process.as_str(), c.pid));
        assert_eq!(role(100), None, "we are never named");
        assert_eq!(role(201), Some((AudioRole::JackClient, "jalv", 200)));
        assert_eq!(role(202), Some((AudioRole::JackClient, "jalv", 200)));
        assert_eq!(role(301), Some((AudioRole::JackServer, "jackd", 300)));
        assert_eq!(role(400), None, "a client of another JACK server");
        assert_eq!(role(500), None);
        assert_eq!(
            role(601),
            Some((AudioRole::PipewireServer, "pipewire", 600))
        );
        assert_eq!(
            role(700),
            Some((AudioRole::PipewireClient, "Carla Rack", 700))
        );
        assert_eq!(role(999), None, "a thread that is gone");
        assert_eq!(got.len(), 5);
    }

    #[test]
    fn not_a_jack_client_ourselves_every_jack_process_counts() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        process(r, 100, "xrunlab", &[LIBC], &[]);
        process(
            r,
            400,
            "qtractor",
            &[
                LIBC,
                &lib("/usr/lib/x86_64-linux-gnu/libjack.so.0.1.0"),
                &shm("jack-0-9"),
            ],
            &[],
        );
        process(r, 500, "jackdbus", &[LIBC], &[]);
        // Linked with libjack, connected to nothing: a suite's own stage, not a client.
        process(
            r,
            600,
            "xrunlab",
            &[
                LIBC,
                &lib("/usr/lib/x86_64-linux-gnu/libjack.so.0.1.0"),
                &shm("jack-shm-registry"),
            ],
            &[],
        );
        let got = identify(&Root::new(r), &[400, 500, 600], 100);
        assert!(!got.contains_key(&600), "{got:?}");
        assert_eq!(got[&400].role, AudioRole::JackClient);
        assert_eq!(got[&500].role, AudioRole::JackServer);
        assert!(identify(&Root::new(r), &[], 100).is_empty());
    }
}
