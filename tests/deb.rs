//! The Debian package: scripts/build-deb packages the binary this test run built (seconds,
//! not a release build), lintian reports no error, and as root it installs with `dpkg -i`,
//! works (`xrunlab --version`, `xrunlab check`, `man -w xrunlab-latency`, bash completion,
//! `systemd-analyze verify` of the unit where systemd is there) and is purged again, leaving
//! no file or directory it added.

mod common;

use common::{is_root, require, which};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn run(cmd: &mut Command) -> Output {
    let o = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(o.status.success(), "{cmd:?}: {}", common::show(&o));
    o
}

fn build(out: &Path) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let o = run(Command::new(root.join("scripts/build-deb"))
        .arg(env!("CARGO_BIN_EXE_xrunlab"))
        .arg(out));
    PathBuf::from(String::from_utf8(o.stdout).unwrap().trim())
}

/// Purges the package when dropped, so that a failed assertion leaves the machine as it was.
struct Installed;

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = Command::new("dpkg").args(["--purge", "xrunlab"]).output();
    }
}

/// man-db's trigger rebuilds the whole manual page index on every `dpkg -i` and `--purge`
/// (about 20 s and 15 s of this test on a loaded 2-core VM) unless its `auto-update` flag
/// file (debconf's `man-db/auto-update`) is absent; `man -w` finds the pages without the
/// index. Moved aside for the test, put back when dropped (also when an assertion fails).
struct NoMandbTrigger(Option<PathBuf>);

const MANDB_FLAG: &str = "/var/lib/man-db/auto-update";

impl NoMandbTrigger {
    fn new() -> NoMandbTrigger {
        let aside = PathBuf::from(format!("{MANDB_FLAG}.xrunlab-test"));
        let moved = Path::new(MANDB_FLAG).exists() && std::fs::rename(MANDB_FLAG, &aside).is_ok();
        NoMandbTrigger(moved.then_some(aside))
    }
}

impl Drop for NoMandbTrigger {
    fn drop(&mut self) {
        if let Some(aside) = &self.0 {
            let _ = std::fs::rename(aside, MANDB_FLAG);
        }
    }
}

fn installed() -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", "xrunlab"])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
}

#[test]
fn the_deb_builds_passes_lintian_installs_works_and_purges_cleanly() {
    let tools = ["dpkg-deb", "dpkg-shlibdeps", "lintian"];
    if !require(
        tools.iter().all(|t| which(t).is_some()),
        "dpkg-deb, dpkg-shlibdeps (dpkg-dev) and lintian",
    ) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let deb = build(tmp.path());
    let listing =
        String::from_utf8(run(Command::new("dpkg-deb").arg("-c").arg(&deb)).stdout).unwrap();
    for f in [
        "./usr/bin/xrunlab",
        "./usr/share/man/man1/xrunlab.1.gz",
        "./usr/share/man/man1/xrunlab-latency.1.gz",
        "./usr/share/man/man1/xrunlab-export.1.gz",
        "./usr/share/bash-completion/completions/xrunlab",
        "./usr/share/zsh/vendor-completions/_xrunlab",
        "./usr/share/fish/vendor_completions.d/xrunlab.fish",
        "./lib/systemd/system/xrunlab-watch.service",
        "./usr/share/doc/xrunlab/copyright",
    ] {
        assert!(
            listing.contains(&format!(" {f}\n")),
            "{f} missing:\n{listing}"
        );
    }
    let control = String::from_utf8(
        run(Command::new("dpkg-deb")
            .args(["-f"])
            .arg(&deb)
            .arg("Depends"))
        .stdout,
    )
    .unwrap();
    assert!(
        control.contains("libc6"),
        "runtime libraries declared: {control}"
    );

    // lintian reads the .deb file only: it runs while the package is installed and tried.
    let lintian = Command::new("lintian")
        .args(["--fail-on", "error", "--tag-display-limit", "0"])
        .arg(&deb)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    try_installed(&deb, &listing);
    let o = lintian.wait_with_output().unwrap();
    let tags = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "lintian: {}", common::show(&o));
    assert!(!tags.lines().any(|l| l.starts_with("E: ")), "{tags}");
}

/// As root: install, use, purge, and check the machine is as it was.
fn try_installed(deb: &Path, listing: &str) {
    if !require(is_root(), "root, to dpkg -i the package") {
        return;
    }
    if !require(
        !installed(),
        "no xrunlab package already installed (it is not ours to remove)",
    ) {
        return;
    }
    // Every path the package holds, and whether it was there before.
    let paths: Vec<PathBuf> = listing
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .map(|p| PathBuf::from(p.trim_start_matches('.')))
        .filter(|p| p != Path::new("/"))
        .collect();
    let before: Vec<bool> = paths.iter().map(|p| p.exists()).collect();
    assert!(!Path::new("/usr/bin/xrunlab").exists());
    // Dropped after `guard` (declared first), so the flag is back after the purge.
    let mandb = NoMandbTrigger::new();
    let guard = Installed;
    run(Command::new("dpkg").arg("-i").arg(deb));
    let v = run(Command::new("/usr/bin/xrunlab").arg("--version"));
    assert!(String::from_utf8_lossy(&v.stdout).starts_with("xrunlab "));
    let c = Command::new("/usr/bin/xrunlab")
        .args(["check", "--json", "-q"])
        .output()
        .unwrap();
    assert!(
        matches!(c.status.code(), Some(0 | 1)),
        "{}",
        common::show(&c)
    );
    let doc: serde_json::Value = serde_json::from_slice(&c.stdout).unwrap();
    assert_eq!(doc["kind"], "check");
    let m = run(Command::new("man").args(["-w", "xrunlab-latency"]));
    assert_eq!(
        String::from_utf8_lossy(&m.stdout).trim(),
        "/usr/share/man/man1/xrunlab-latency.1.gz"
    );
    let b = run(Command::new("bash").args([
        "-c",
        "source /usr/share/bash-completion/completions/xrunlab; COMP_WORDS=(xrunlab lat); \
         COMP_CWORD=1; COMP_LINE='xrunlab lat'; COMP_POINT=11; _xrunlab xrunlab lat xrunlab; \
         echo \"${COMPREPLY[@]}\"",
    ]));
    assert_eq!(
        String::from_utf8_lossy(&b.stdout).trim(),
        "latency latencytest"
    );
    if which("systemd-analyze").is_some() {
        run(Command::new("systemd-analyze")
            .args(["verify", "/lib/systemd/system/xrunlab-watch.service"]));
    } else {
        eprintln!("no systemd-analyze here: the unit is not verified");
    }
    run(Command::new("dpkg").args(["--purge", "xrunlab"]));
    drop(guard);
    let moved = mandb.0.is_some();
    drop(mandb);
    assert!(
        !moved || Path::new(MANDB_FLAG).exists(),
        "man-db's flag is back"
    );
    assert!(!installed());
    for (p, was) in paths.iter().zip(before) {
        assert_eq!(p.exists(), was, "{} after purge", p.display());
    }
}
