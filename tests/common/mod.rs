//! Helpers shared by integration tests.
#![allow(dead_code)]

/// True when running under CI (`CI` set to anything but empty/false/0).
pub fn in_ci() -> bool {
    matches!(std::env::var("CI"), Ok(v) if !v.is_empty() && v != "false" && v != "0")
}

/// A test that needs something this machine may lack (root, a JACK server, stress-ng):
/// under CI a missing prerequisite is a failure; elsewhere the test says why it skips.
/// Returns false when the caller should return early (skip).
#[must_use]
pub fn require(available: bool, what: &str) -> bool {
    if available {
        return true;
    }
    if in_ci() {
        panic!("prerequisite missing in CI: {what}");
    }
    eprintln!("SKIPPED: {what}");
    false
}

/// One live server test at a time within a test binary: the tests start clients that spin
/// at real-time priority and name what took a CPU, and side by side on a 2-core VM one
/// test's spinning client is the other's culprit.
pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn is_root() -> bool {
    // SAFETY: no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Path of a program on PATH, if any.
pub fn which(prog: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(prog))
            .find(|f| f.is_file())
    })
}

/// Run `c` as `user` (uid, gid) when given: std drops the supplementary groups with it.
pub fn as_user(
    c: &mut std::process::Command,
    user: Option<(u32, u32)>,
) -> &mut std::process::Command {
    use std::os::unix::process::CommandExt;
    if let Some((uid, gid)) = user {
        c.uid(uid).gid(gid);
    }
    c
}

pub fn xrunlab() -> assert_cmd::Command {
    let mut c = assert_cmd::Command::cargo_bin("xrunlab").unwrap();
    c.env_remove("XRUNLAB_LOG");
    // Tables at the 80 columns of the default, whatever the shell running the tests exports.
    c.env_remove("COLUMNS");
    c
}

/// [`xrunlab`] on a terminal 250 columns wide: tables keep each row on one line, for tests
/// that look for a row by its label and figures.
pub fn xrunlab_wide() -> assert_cmd::Command {
    let mut c = xrunlab();
    c.env("COLUMNS", "250");
    c
}
pub mod alsa;
pub mod counting;
pub mod hostile_lv2;
pub mod jack_clients;
pub mod lv2_fixture;
pub mod servers;
pub mod service;
pub mod signals;
pub mod spy;
pub mod tmpfs;
pub mod trace;

/// Processes whose environment holds `needle`: every descendant inherits the environment,
/// so a marker variable finds a command's children even after they leave its process group.
/// Written here rather than taken from the library so tests check the library's own scan.
pub fn pids_with_env(needle: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .map(|env| {
                    env.split(|&b| b == 0)
                        .any(|kv| kv.starts_with(needle.as_bytes()))
                })
                .unwrap_or(false)
        })
        .collect()
}

/// The binary under test, for tests that need a `std::process::Command` (to spawn, pipe or
/// run it through a server's environment) rather than assert_cmd's.
pub fn bin() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_BIN_EXE_xrunlab"))
}

/// A finished command's status and both streams, for assertion messages.
pub fn show(o: &std::process::Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A result file, parsed; a missing or broken file fails the test naming the path.
pub fn read_json(p: &std::path::Path) -> serde_json::Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A JSON field that must be an unsigned integer.
pub fn u(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a u64: {v}"))
}

/// A JSON field that must be a number.
pub fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// cyclictest --json with one thread of `buckets` 1 µs buckets, one sample each, written
/// as cyclictest writes it (a line per bucket).
pub fn cyclictest_json(buckets: u64) -> String {
    let mut t = String::from(
        "{\n  \"file_version\": 1,\n  \"cmdline:\": \"cyclictest -q -m -p 90 -i 1000 -h BUCKETS\",\n  \"num_threads\": 1,\n  \"resolution_in_ns\": 0,\n  \"thread\": {\n    \"0\": {\n      \"histogram\": {\n",
    )
    .replace("BUCKETS", &buckets.to_string());
    for b in 0..buckets {
        let sep = if b + 1 < buckets { "," } else { "" };
        t.push_str(&format!("        \"{b}\": 1{sep}\n"));
    }
    t.push_str(&format!(
        "      }},\n      \"cycles\": {buckets},\n      \"min\": 0,\n      \"max\": {},\n      \"avg\": {},\n      \"cpu\": 0\n    }}\n  }}\n}}\n",
        buckets - 1,
        (buckets - 1) / 2
    ));
    t
}

/// A manifest listing `files` (relative to its directory) as ok stages.
pub fn manifest_listing(files: &[&str]) -> String {
    let stages: Vec<serde_json::Value> = files
        .iter()
        .enumerate()
        .map(|(i, f)| {
            serde_json::json!({"stage": format!("s{i}"), "argv": [], "status": "ok",
                "reason": null, "note": null, "exit_code": 0, "duration_s": 1.0,
                "file": f, "log": null})
        })
        .collect();
    serde_json::json!({"tool": {"name": "xrunlab", "version": "0.1.0"}, "mode": "quick",
        "driver": "sim", "status": "complete", "started_at": "2025-01-01T00:00:00Z",
        "ended_at": null, "stages": stages, "report": null})
    .to_string()
}
