//! Outputs another user cannot redirect and names libjack cannot choke on (issue 45, items 1
//! and 4; docs/ARCHITECTURE.md §2 "Writing"). xrunlab runs as root; the attacker here is uid
//! 65534 owning the directory, or the symlink in a sticky world-writable one. Every case runs
//! the binary under a timeout, so a hang fails the test instead of stalling the suite.

mod common;
use common::{is_root, require, xrunlab};
use std::os::unix::fs::{lchown, symlink, FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

const NOBODY: u32 = 65534;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results/run.json")
}

/// (exit code, stderr) of xrunlab `args`, killed after 20 s.
fn run(args: &[&str]) -> (i32, String) {
    let out = xrunlab()
        .args(args)
        .timeout(Duration::from_secs(20))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A directory owned by the attacker, as a node-exporter textfile folder owned by its user.
fn attacker_dir() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::os::unix::fs::chown(d.path(), Some(NOBODY), Some(NOBODY)).unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

/// A root-only file the attacker wants overwritten.
fn victim() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let v = d.path().join("victim");
    std::fs::write(&v, b"root only").unwrap();
    std::fs::set_permissions(&v, std::fs::Permissions::from_mode(0o600)).unwrap();
    (d, v)
}

fn plant(link: &Path, to: &Path) {
    symlink(to, link).unwrap();
    lchown(link, Some(NOBODY), Some(NOBODY)).unwrap();
}

/// Symlinks over every name the old writer would have used next (`.NAME.PID.tmp`).
#[test]
fn a_symlink_spray_over_temp_names_writes_nothing_through() {
    if !require(is_root(), "root, to plant links as another uid") {
        return;
    }
    let d = attacker_dir();
    let (_vd, v) = victim();
    let last: u32 = std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    for pid in last + 1..last + 400 {
        plant(&d.path().join(format!(".xrunlab.prom.{pid}.tmp")), &v);
    }
    let dir = d.path().to_str().unwrap();
    let (rc, err) = run(&["export", "--textfile", dir, fixture().to_str().unwrap()]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(std::fs::read(&v).unwrap(), b"root only");
    assert!(std::fs::symlink_metadata(d.path().join("xrunlab.prom"))
        .unwrap()
        .is_file());
}

/// A link planted at the name itself: to a device it is refused (exit 2, the device
/// untouched); to a file it is replaced, never followed.
#[test]
fn a_planted_link_to_a_device_is_refused_and_to_a_file_replaced() {
    if !require(is_root(), "root, to plant links as another uid") {
        return;
    }
    let d = attacker_dir();
    plant(&d.path().join("xrunlab.prom"), Path::new("/dev/null"));
    let dir = d.path().to_str().unwrap();
    let r = fixture();
    let (rc, err) = run(&["export", "--textfile", dir, r.to_str().unwrap()]);
    assert_eq!(rc, 2, "{err}");
    assert!(
        err.contains("character device (through a symbolic link)"),
        "{err}"
    );
    let out = d.path().join("out.prom");
    plant(&out, Path::new("/dev/null"));
    let o = out.to_str().unwrap();
    let (rc, err) = run(&[
        "export",
        "--format",
        "openmetrics",
        "-o",
        o,
        r.to_str().unwrap(),
    ]);
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains("owned by uid 65534"), "{err}");
    assert!(std::fs::metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device());

    let (_vd, v) = victim();
    std::fs::remove_file(&out).unwrap();
    plant(&out, &v);
    let (rc, err) = run(&[
        "export",
        "--format",
        "openmetrics",
        "-o",
        o,
        r.to_str().unwrap(),
    ]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(std::fs::read(&v).unwrap(), b"root only");
    assert!(std::fs::symlink_metadata(&out).unwrap().is_file());
}

/// What the user names as a device is still written in place.
#[test]
fn dev_null_and_dev_stdout_keep_working() {
    let r = fixture();
    let out = xrunlab()
        .args(["export", "--format", "openmetrics", "-o", "/dev/stdout"])
        .arg(&r)
        .timeout(Duration::from_secs(20))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("xrunlab_"));
    // Standard output redirected to a file: that file is written through the descriptor,
    // the line saying so after it, and /dev/stdout stays a link.
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("out.json");
    let st = std::process::Command::new(assert_cmd::cargo::cargo_bin("xrunlab"))
        .args(["schema", "-o", "/dev/stdout"])
        .stdout(std::fs::File::create(&f).unwrap())
        .status()
        .unwrap();
    assert!(st.success());
    let text = std::fs::read_to_string(&f).unwrap();
    assert!(text.starts_with("{\n  \"$schema\""), "{}", &text[..80]);
    assert!(
        text.ends_with("}\nschema written to /dev/stdout\n"),
        "{text}"
    );
    assert!(std::fs::symlink_metadata("/dev/stdout")
        .unwrap()
        .file_type()
        .is_symlink());
    let (rc, err) = run(&["schema", "-o", "/dev/null"]);
    assert_eq!(rc, 0, "{err}");
    assert!(std::fs::metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device());
}

/// A FIFO at the name: exit 2 at once, whether nobody reads it (a user's own) or another user
/// made it; never a hang.
#[test]
fn a_fifo_target_is_refused_promptly() {
    let mode = nix::sys::stat::Mode::from_bits_truncate(0o666);
    let own = tempfile::tempdir().unwrap();
    let f = own.path().join("f");
    nix::unistd::mkfifo(&f, mode).unwrap();
    let r = fixture();
    let t0 = std::time::Instant::now();
    let (rc, err) = run(&[
        "export",
        "--format",
        "openmetrics",
        "-o",
        f.to_str().unwrap(),
        r.to_str().unwrap(),
    ]);
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains("FIFO no process reads"), "{err}");
    let dir = own.path().to_str().unwrap();
    std::fs::rename(&f, own.path().join("xrunlab.prom")).unwrap();
    let (rc, err) = run(&["export", "--textfile", dir, r.to_str().unwrap()]);
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains("is a FIFO, not a regular file"), "{err}");
    // Generous: a hang is the 20 s timeout, a refusal a fraction of a second.
    assert!(t0.elapsed() < Duration::from_secs(15));
    if !require(is_root(), "root, to make a FIFO as another uid") {
        return;
    }
    let d = attacker_dir();
    let g = d.path().join("g");
    nix::unistd::mkfifo(&g, mode).unwrap();
    std::os::unix::fs::chown(&g, Some(NOBODY), Some(NOBODY)).unwrap();
    let (rc, err) = run(&["schema", "-o", g.to_str().unwrap()]);
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains("owned by uid 65534"), "{err}");
}

/// /tmp's case: sticky and world-writable, the link another uid's. Whatever
/// fs.protected_symlinks says (left as found), the link is replaced, not followed.
#[test]
fn a_link_planted_in_a_sticky_world_writable_directory() {
    if !require(is_root(), "root, to plant links as another uid") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    let (_vd, v) = victim();
    let out = d.path().join("r.json");
    plant(&out, &v);
    let r = fixture();
    let (rc, err) = run(&[
        "export",
        "--format",
        "json",
        "-o",
        out.to_str().unwrap(),
        r.to_str().unwrap(),
    ]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(std::fs::read(&v).unwrap(), b"root only");
    assert!(std::fs::symlink_metadata(&out).unwrap().is_file());
    let dev = d.path().join("d.json");
    plant(&dev, Path::new("/dev/zero"));
    let (rc, err) = run(&["schema", "-o", dev.to_str().unwrap()]);
    assert_eq!(rc, 2, "{err}");
}

/// A 300-byte JACK server name from each source: exit 2 naming the limit, libjack never
/// reached (it smashed its stack: rc 134).
#[test]
fn an_overlong_jack_server_name_is_refused_from_flag_and_environment() {
    let long = "n".repeat(300);
    let watch = format!("jack:{long}");
    for (args, env) in [
        (
            vec!["watch", "--server", watch.as_str(), "--duration", "1s"],
            None,
        ),
        (
            vec!["watch", "--server", "jack", "--duration", "1s"],
            Some(long.as_str()),
        ),
        (
            vec![
                "run",
                "--driver",
                "jack",
                "--server",
                long.as_str(),
                "--duration",
                "1s",
            ],
            None,
        ),
        (
            vec!["run", "--driver", "jack", "--duration", "1s"],
            Some(long.as_str()),
        ),
    ] {
        let mut c = xrunlab();
        c.args(&args).timeout(Duration::from_secs(20));
        match env {
            Some(v) => c.env("JACK_DEFAULT_SERVER", v),
            None => c.env_remove("JACK_DEFAULT_SERVER"),
        };
        let out = c.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("300 bytes long"), "{args:?}: {err}");
        assert!(err.contains("JACK_SERVER_NAME_SIZE"), "{args:?}: {err}");
        assert!(!err.contains("stack smashing"), "{err}");
    }
    let (rc, err) = run(&[
        "run",
        "--driver",
        "jack",
        "--client-name",
        &"c".repeat(100),
        "--duration",
        "1s",
    ]);
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains("JACK_CLIENT_NAME_SIZE"), "{err}");
}

/// The streamed outputs go through the same writer as whole ones (issue 45's follow-up):
/// `run --trace`, `sched --trace` and `__generate`'s pages. For each, a link another user
/// planted at the name is replaced, its target unchanged; a FIFO there is exit 2 at once.
#[test]
fn streamed_outputs_replace_a_planted_link_and_refuse_a_fifo() {
    if !require(is_root(), "root, to plant links as another uid") {
        return;
    }
    let private = tempfile::tempdir().unwrap();
    let result = private.path().join("r.json");
    let result = result.to_str().unwrap();
    let d = attacker_dir();
    let completions = d.path().join("completions");
    std::fs::create_dir(&completions).unwrap();
    std::os::unix::fs::chown(&completions, Some(NOBODY), Some(NOBODY)).unwrap();
    let trace = d.path().join("cycles.csv");
    let t = trace.to_str().unwrap();
    let dir = d.path().to_str().unwrap();
    let run_args = [
        "run",
        "--driver",
        "sim",
        "--chain",
        "burn(10%)",
        "--buffer",
        "64",
        "--duration",
        "1s",
        "-q",
        "--trace",
        t,
        "-o",
        result,
    ];
    let sched_args = [
        "sched",
        "--policies",
        "other",
        "--duration",
        "500ms",
        "-q",
        "--trace",
        t,
        "-o",
        result,
    ];
    let generate_args = ["__generate", dir];
    let cases: [(&[&str], PathBuf, &str); 3] = [
        (&run_args, trace.clone(), "cycle,"),
        (&sched_args, trace.clone(), "row,cycle,"),
        (
            &generate_args,
            completions.join("xrunlab.bash"),
            "_xrunlab()",
        ),
    ];
    let mode = nix::sys::stat::Mode::from_bits_truncate(0o666);
    for (args, name, starts) in cases {
        let (_vd, v) = victim();
        plant(&name, &v);
        let (rc, err) = run(args);
        assert_eq!(rc, 0, "{args:?}: {err}");
        assert_eq!(std::fs::read(&v).unwrap(), b"root only", "{args:?}");
        assert!(
            std::fs::symlink_metadata(&name).unwrap().is_file(),
            "{args:?}"
        );
        let text = std::fs::read_to_string(&name).unwrap();
        assert!(
            text.starts_with(starts),
            "{args:?}: {}",
            &text[..40.min(text.len())]
        );
        std::fs::remove_file(&name).unwrap();

        nix::unistd::mkfifo(&name, mode).unwrap();
        std::os::unix::fs::chown(&name, Some(NOBODY), Some(NOBODY)).unwrap();
        let t0 = std::time::Instant::now();
        let (rc, err) = run(args);
        assert_eq!(rc, 2, "{args:?}: {err}");
        assert!(err.contains("FIFO"), "{args:?}: {err}");
        assert!(t0.elapsed() < Duration::from_secs(15), "{args:?}");
        std::fs::remove_file(&name).unwrap();
        // Nothing half-written is left beside it.
        let debris: Vec<_> = std::fs::read_dir(name.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect();
        assert!(debris.is_empty(), "{args:?}: {debris:?}");
    }
    // A link at the pages' folder itself would send them where another user chose.
    let (_vd, v) = victim();
    let man = d.path().join("man");
    std::fs::remove_dir_all(&man).unwrap();
    plant(&man, v.parent().unwrap());
    let (rc, err) = run(&generate_args);
    assert_eq!(rc, 2, "{err}");
    assert_eq!(std::fs::read_dir(v.parent().unwrap()).unwrap().count(), 1);
}

/// `-o -` is standard output, as `-o /dev/stdout` is, with the summary on stderr; no file
/// named "-" appears. `--json` beside it, or `suite -o -`, is exit 2.
#[test]
fn dash_is_standard_output() {
    let d = tempfile::tempdir().unwrap();
    let r = fixture();
    let out = |args: &[&str]| {
        xrunlab()
            .current_dir(d.path())
            .args(args)
            .timeout(Duration::from_secs(60))
            .output()
            .unwrap()
    };
    let o = out(&["schema", "-o", "-"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let schema: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(schema.get("$schema").is_some());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("schema written to standard output"),
        "the line after it goes to stderr and names standard output, not a file \"-\""
    );
    let o = out(&[
        "export",
        "--format",
        "openmetrics",
        "-o",
        "-",
        r.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("# HELP xrunlab_"));
    assert!(
        String::from_utf8_lossy(&o.stderr).ends_with("written to standard output\n"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = out(&[
        "run",
        "--driver",
        "sim",
        "--chain",
        "burn(10%)",
        "--buffer",
        "64",
        "--duration",
        "1s",
        "-o",
        "-",
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["kind"], "run");
    assert!(
        !String::from_utf8_lossy(&o.stderr).is_empty(),
        "the summary is on stderr"
    );
    for args in [
        &["schema", "-o", "-", "--json"][..],
        &["suite", "--smoke", "-o", "-"],
        &[
            "run",
            "--driver",
            "sim",
            "--duration",
            "1s",
            "-o",
            "-",
            "--trace",
            "-",
        ],
    ] {
        let o = out(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(o.stdout.is_empty(), "{args:?}");
    }
    assert_eq!(
        std::fs::read_dir(d.path()).unwrap().count(),
        0,
        "no file named -"
    );
}
