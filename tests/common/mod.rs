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
