//! The boards' builds, tested where they cannot run natively: xrunlab cross-built for arm64
//! (aarch64-unknown-linux-gnu) and armhf (armv7-unknown-linux-gnueabihf) with Debian's cross
//! toolchains (.cargo/config.toml, `scripts/install-deps --cross`), packaged by
//! `scripts/build-deb --arch` (lintian without errors), and run under qemu-user: `--version`,
//! `check --json`, `run --driver sim`, `latency --sim-latency` and `rtl --model` (the last two
//! must give the native binary's exact numbers: the same code on another ISA), `plugins list`
//! and a `run` hosting Debian's zam-plugins of that architecture, and the library's unit tests
//! (`cargo test --target … --lib`, with the qemu runner of .cargo/config.toml).
//!
//! A cold cross build of this project takes minutes on a 2-core machine, per architecture, so
//! the builds go to a cache outside the clone (CARGO_TARGET_DIR=/var/cache/xrunlab-cross/ARCH,
//! kept between CI runs on the same machine; `XRUNLAB_CROSS_CACHE` overrides the directory) in
//! the test profile, whose incremental compilation rebuilds only what a commit changed. From a
//! cold cache the test works the same, only slower. A missing toolchain skips outside CI and
//! fails in CI.

mod common;

use common::{require, show, which};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Instant;

struct Arch {
    /// Debian's name (dpkg, `:arch` packages, the .deb's Architecture).
    deb: &'static str,
    /// Rust's target triple.
    target: &'static str,
    /// The GNU triplet: the cross tools' prefix and the multiarch directory.
    triplet: &'static str,
    /// qemu-user for the architecture, called directly (binfmt_misc may not be mounted).
    qemu: &'static str,
}

const ARM64: Arch = Arch {
    deb: "arm64",
    target: "aarch64-unknown-linux-gnu",
    triplet: "aarch64-linux-gnu",
    qemu: "qemu-aarch64-static",
};

const ARMHF: Arch = Arch {
    deb: "armhf",
    target: "armv7-unknown-linux-gnueabihf",
    triplet: "arm-linux-gnueabihf",
    qemu: "qemu-arm-static",
};

/// Library unit tests that cannot run under qemu-user, each with the reason; skipped (by name,
/// so a renamed test runs again) and listed in the test's output.
const CANNOT_EMULATE: &[(&str, &str)] = &[
    (
        "common::input::tests::a_file_reporting_a_small_size_is_still_stopped_at_the_cap",
        "qemu-user answers /proc/self/maps itself, from a file whose size stat reports (the \
         kernel reports 0 bytes, which the test needs)",
    ),
    (
        "common::procs::tests::this_process_is_listed_with_its_parent",
        "qemu-user answers /proc/self/stat itself, with 0 for the process group and session",
    ),
];

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The target directory of one architecture's cross build. One per architecture, so that the
/// two tests build in parallel (one target directory is one cargo lock): the host's build
/// scripts and proc macros are built twice, a minute of CPU, against a build that otherwise
/// waits through the other's single-threaded phases (the xrunlab crate, the link).
fn cache(a: &Arch) -> PathBuf {
    let base = match std::env::var_os("XRUNLAB_CROSS_CACHE") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from("/var/cache/xrunlab-cross"),
    };
    let d = base.join(a.deb);
    if std::fs::create_dir_all(&d).is_ok() && tempfile::tempfile_in(&d).is_ok() {
        return d;
    }
    // Not root and no writable system cache: the clone's own target/ (cold every clean clone).
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("cross")
        .join(a.deb)
}

/// The unpacked zam-plugins of the architecture (install-deps --cross).
fn lv2_dir(a: &Arch) -> PathBuf {
    Path::new("/var/cache/xrunlab-cross/plugins")
        .join(a.deb)
        .join("usr/lib/lv2")
}

/// What the cross build and the emulated runs need and this machine lacks.
fn missing(a: &Arch) -> Vec<String> {
    let mut out = Vec::new();
    for tool in [
        format!("{}-gcc", a.triplet),
        format!("{}-pkg-config", a.triplet),
        format!("{}-strip", a.triplet),
        a.qemu.to_string(),
    ] {
        if which(&tool).is_none() {
            out.push(tool);
        }
    }
    let sysroot = Command::new("rustc").args(["--print", "sysroot"]).output();
    let std_there = sysroot.is_ok_and(|o| {
        Path::new(String::from_utf8_lossy(&o.stdout).trim())
            .join("lib/rustlib")
            .join(a.target)
            .join("lib")
            .is_dir()
    });
    if !std_there {
        out.push(format!("the Rust target {} (rustup target add)", a.target));
    }
    for lib in ["alsa", "jack", "lilv-0"] {
        let found = Command::new(format!("{}-pkg-config", a.triplet))
            .args(["--exists", lib])
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            out.push(format!("{lib}.pc for {}", a.deb));
        }
    }
    if !lv2_dir(a).join("ZamComp.lv2/manifest.ttl").is_file() {
        out.push(format!(
            "zam-plugins:{} unpacked in {}",
            a.deb,
            lv2_dir(a).display()
        ));
    }
    out
}

fn run(cmd: &mut Command) -> Output {
    let o = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(o.status.success(), "{cmd:?}: {}", show(&o));
    o
}

/// cargo on the cross target, into the cache, for what is already compiled: a hung emulated
/// test must not hang the suite, so `timeout` ends it.
fn cargo(cache: &Path, limit_s: u32) -> Command {
    let mut c = Command::new("timeout");
    c.args(["--kill-after=10", &limit_s.to_string(), env!("CARGO")])
        .current_dir(ROOT)
        .env("CARGO_TARGET_DIR", cache)
        .stdin(Stdio::null());
    c
}

/// The cross-built binary under qemu-user.
fn emulated(a: &Arch, bin: &Path) -> Command {
    let mut c = Command::new(a.qemu);
    c.arg(bin)
        .env_remove("XRUNLAB_LOG")
        .env_remove("COLUMNS")
        .stdin(Stdio::null());
    c
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", show(o)))
}

/// The same deterministic command on the native and the emulated binary: equal results.
fn same_as_native(a: &Arch, bin: &Path, args: &[&str]) {
    let native = json(&run(Command::new(env!("CARGO_BIN_EXE_xrunlab")).args(args)));
    let foreign = json(&run(emulated(a, bin).args(args)));
    assert_eq!(
        native["results"], foreign["results"],
        "{} {args:?}: the emulated binary computes differently",
        a.deb
    );
}

fn the_cli_runs(a: &Arch, bin: &Path) {
    let v = run(emulated(a, bin).arg("--version"));
    assert!(String::from_utf8_lossy(&v.stdout).starts_with("xrunlab "));

    // The host's /proc and /sys, read by the foreign binary: findings of this machine.
    let c = emulated(a, bin)
        .args(["check", "--json", "-q"])
        .output()
        .unwrap();
    assert!(matches!(c.status.code(), Some(0 | 1)), "{}", show(&c));
    assert_eq!(json(&c)["kind"], "check");

    let r = json(&run(emulated(a, bin).args([
        "run",
        "--driver",
        "sim",
        "--buffer",
        "64",
        "--chain",
        "burn(20%)",
        "--duration",
        "2s",
        "--json",
        "-q",
    ])));
    assert_eq!(r["kind"], "run");
    assert_eq!(r["status"], "complete", "{r}");

    same_as_native(
        a,
        bin,
        &[
            "latency",
            "--sim-latency",
            "normal:30us,10us",
            "--duration",
            "10s",
            "--seed",
            "1",
            "--json",
            "-q",
        ],
    );
    same_as_native(
        a,
        bin,
        &[
            "rtl", "--model", "--fifo", "20", "--codec", "2+10", "--json", "-q",
        ],
    );

    // Debian's plugins of the same architecture: lilv reads them, and the DSP code of the
    // foreign .so runs inside the emulated engine.
    let copy = tempfile::tempdir_in("/dev/shm").unwrap();
    let lv2 = if a.deb == "armhf" {
        // Under qemu-arm, lilv finds no bundle in the ext4 cache and finds them in a tmpfs
        // copy (seen here). The likely cause, a known qemu-user limitation: ext4 gives qemu,
        // a 64-bit process, 64-bit directory hash offsets that the 32-bit guest's getdents
        // cannot hold (EOVERFLOW). A real armhf board gets 32-bit offsets.
        let to = copy.path().join("lv2");
        run(Command::new("cp").arg("-r").arg(lv2_dir(a)).arg(&to));
        to
    } else {
        lv2_dir(a)
    };
    let list = json(&run(emulated(a, bin)
        .env("LV2_PATH", &lv2)
        .args(["plugins", "list", "--lv2", "--json", "-q", "Zam"])));
    let plugins = list.as_array().expect("a list of plugins");
    let comp = plugins
        .iter()
        .find(|p| p["uri"] == "urn:zamaudio:ZamComp")
        .unwrap_or_else(|| panic!("ZamComp not listed from {}: {list}", lv2.display()));
    assert!(comp["unhostable"].is_null(), "{comp}");
    assert!(plugins.len() >= 10, "{} zam plugins listed", plugins.len());
    let hosted = json(&run(emulated(a, bin).env("LV2_PATH", &lv2).args([
        "run",
        "--driver",
        "sim",
        "--buffer",
        "256",
        "--chain",
        "lv2:urn:zamaudio:ZamComp",
        "--duration",
        "1s",
        "--json",
        "-q",
    ])));
    assert_eq!(hosted["status"], "complete", "{hosted}");
}

/// `scripts/build-deb --arch` on the cross-built binary; lintian runs on it meanwhile.
fn package(a: &Arch, bin: &Path, out: &Path) -> std::process::Child {
    let o = run(Command::new(Path::new(ROOT).join("scripts/build-deb"))
        .args(["--arch", a.deb])
        .arg(bin)
        .arg(out));
    let deb = PathBuf::from(String::from_utf8(o.stdout).unwrap().trim());
    assert!(deb.is_file(), "{deb:?}");
    let field = |f: &str| {
        String::from_utf8(run(Command::new("dpkg-deb").arg("-f").arg(&deb).arg(f)).stdout).unwrap()
    };
    assert_eq!(field("Architecture").trim(), a.deb);
    assert!(field("Depends").contains("libc6"), "{}", field("Depends"));
    let listing =
        String::from_utf8(run(Command::new("dpkg-deb").arg("-c").arg(&deb)).stdout).unwrap();
    for f in [
        "./usr/bin/xrunlab",
        "./usr/share/man/man1/xrunlab-latency.1.gz",
        "./usr/share/bash-completion/completions/xrunlab",
        "./lib/systemd/system/xrunlab-watch.service",
    ] {
        assert!(listing.contains(&format!(" {f}\n")), "{f}:\n{listing}");
    }
    Command::new("lintian")
        .args(["--fail-on", "error", "--tag-display-limit", "0"])
        .arg(&deb)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The library's unit tests for the target, under qemu (the runner in .cargo/config.toml).
fn unit_tests(a: &Arch, cache: &Path) {
    build(
        a,
        cache,
        &[
            "test", "--locked", "--target", a.target, "--lib", "--no-run",
        ],
    );
    // Compiled: only the emulated tests run under the time limit.
    let mut c = cargo(cache, 1500);
    c.args(["test", "--locked", "--target", a.target, "--lib", "--"]);
    for (name, why) in CANNOT_EMULATE {
        eprintln!("{}: not under emulation: {name}: {why}", a.deb);
        c.args(["--skip", name]);
    }
    // Once (libtest refuses it twice): the skips name whole tests, not substrings.
    if !CANNOT_EMULATE.is_empty() {
        c.arg("--exact");
    }
    let o = c.output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let summary: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("test result:"))
        .collect();
    // Prefixed: the suite totals the outer run's own "test result:" lines.
    eprintln!("{} unit tests under qemu: {summary:?}", a.deb);
    assert!(o.status.success(), "{}", show(&o));
    assert!(!summary.is_empty(), "no unit test ran: {}", show(&o));
}

/// Compile for the target (`args`: the binary, or the unit tests without running them).
/// Incremental state that a killed build (a cancelled CI job) left inconsistent
/// shows as a failed link of symbols the cached codegen units no longer define (seen here
/// after a killed rustc): once, xrunlab's own artifacts for the target go and the build runs
/// again, saying so.
fn build(a: &Arch, cache: &Path, args: &[&str]) {
    // No time limit here: killing rustc is what leaves the incremental state inconsistent.
    let cargo = || {
        let mut c = Command::new(env!("CARGO"));
        c.args(args)
            .current_dir(ROOT)
            .env("CARGO_TARGET_DIR", cache)
            .stdin(Stdio::null());
        c
    };
    let o = cargo().output().unwrap();
    if o.status.success() {
        return;
    }
    eprintln!(
        "{}: the cross build failed; again after `cargo clean -p xrunlab` for the target:\n{}",
        a.deb,
        String::from_utf8_lossy(&o.stderr)
    );
    // Its fingerprint may call the inconsistent rlib fresh: only a clean rebuilds it.
    let _ = Command::new(env!("CARGO"))
        .args(["clean", "-p", "xrunlab", "--target", a.target])
        .current_dir(ROOT)
        .env("CARGO_TARGET_DIR", cache)
        .status();
    run(&mut cargo());
}

fn builds_packages_and_runs_under_qemu(a: &Arch) {
    let lacking = missing(a);
    if !require(
        lacking.is_empty(),
        &format!(
            "the {} cross toolchain (scripts/install-deps --cross): {}",
            a.deb,
            lacking.join(", ")
        ),
    ) {
        return;
    }
    let cache = cache(a);
    let t = Instant::now();
    // The test profile, as the unit tests below: one build of the dependencies serves both.
    build(
        a,
        &cache,
        &[
            "build",
            "--locked",
            "--profile",
            "test",
            "--target",
            a.target,
            "--bin",
            "xrunlab",
        ],
    );
    eprintln!(
        "{}: cross build {:.0?} in {}",
        a.deb,
        t.elapsed(),
        cache.display()
    );
    let bin = cache.join(a.target).join("debug/xrunlab");

    let tmp = tempfile::tempdir().unwrap();
    let lintian = package(a, &bin, tmp.path());
    let t = Instant::now();
    the_cli_runs(a, &bin);
    eprintln!("{}: CLI under qemu {:.0?}", a.deb, t.elapsed());
    let t = Instant::now();
    unit_tests(a, &cache);
    eprintln!("{}: unit tests (build + qemu) {:.0?}", a.deb, t.elapsed());

    let o = lintian.wait_with_output().unwrap();
    let tags = String::from_utf8_lossy(&o.stdout);
    eprintln!("{} lintian:\n{tags}", a.deb);
    assert!(o.status.success(), "lintian: {}", show(&o));
    assert!(!tags.lines().any(|l| l.starts_with("E: ")), "{tags}");
}

#[test]
#[ignore = "a cold cross build costs 10-15 min on 2 cores: scripts/test-cross runs it"]
fn arm64_builds_packages_and_runs_under_qemu() {
    builds_packages_and_runs_under_qemu(&ARM64);
}

#[test]
#[ignore = "a cold cross build costs 10-15 min on 2 cores: scripts/test-cross runs it"]
fn armhf_builds_packages_and_runs_under_qemu() {
    builds_packages_and_runs_under_qemu(&ARMHF);
}
