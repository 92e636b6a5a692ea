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

pub fn xrunlab() -> assert_cmd::Command {
    let mut c = assert_cmd::Command::cargo_bin("xrunlab").unwrap();
    c.env_remove("XRUNLAB_LOG");
    c
}
pub mod alsa;
pub mod counting;
pub mod servers;
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
