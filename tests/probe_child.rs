//! No CLAP file or VST3 bundle can crash or hang xrunlab (docs/ARCHITECTURE.md, `dsp::contain`):
//! each is probed in a contained child, and so is each audited plugin. The hostile plugins
//! (tests/fixtures/clap/hostile.c, tests/fixtures/vst3/hostile.c) are compiled here with `cc`;
//! probes time out after 2 s (XRUNLAB_PROBE_TIMEOUT_S) to keep the tests short.

mod common;

use common::{show, xrunlab};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Build `hostile.c` of `format` with fault `n` as `dir/NAME`.
fn build(format: &str, n: u32, dir: &Path, name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(format)
        .join("hostile.c");
    let out = dir.join(name);
    let cc = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-O1"])
        .arg(format!("-DHOSTILE={n}"))
        .arg(format!("-DPLUGIN_ID=\"org.xrunlab.hostile.h{n}\""))
        .arg("-o")
        .arg(&out)
        .arg(src)
        .output()
        .unwrap();
    assert!(cc.status.success(), "cc: {}", show(&cc));
    out
}

/// `xrunlab --json ARGS` with only `dir` on the format's search path (and an empty home).
fn run(var: &str, dir: &Path, args: &[&str]) -> std::process::Output {
    xrunlab()
        .env(var, dir)
        .env("HOME", dir.join("no-home"))
        .env("XRUNLAB_PROBE_TIMEOUT_S", "2")
        .arg("--json")
        .args(args)
        .output()
        .unwrap()
}

fn listed(o: &std::process::Output) -> Vec<Value> {
    assert_eq!(o.status.code(), Some(0), "{}", show(o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", show(o)))
}

/// The entry whose `field` contains `has`.
fn find<'a>(all: &'a [Value], field: &str, has: &str) -> &'a Value {
    all.iter()
        .find(|p| p[field].as_str().unwrap_or_default().contains(has))
        .unwrap_or_else(|| panic!("{has} not listed: {all:?}"))
}

fn entry<'a>(all: &'a [Value], uri_has: &str) -> &'a Value {
    find(all, "uri", uri_has)
}

fn unhostable(all: &[Value], uri_has: &str) -> String {
    entry(all, uri_has)["unhostable"]
        .as_str()
        .unwrap_or_else(|| panic!("{uri_has} should be unhostable: {all:?}"))
        .to_string()
}

/// A NULL dereference or an endless loop in `clap_entry.init` or `clap_plugin.init` is
/// that file's outcome; the good plugin beside them is listed, shown and usable in a chain.
#[test]
fn a_crash_or_hang_in_init_is_that_files_outcome_and_the_rest_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    build("clap", 0, dir.path(), "good.clap");
    build("clap", 1, dir.path(), "entry-segv.clap");
    build("clap", 2, dir.path(), "init-segv.clap");
    build("clap", 3, dir.path(), "init-spin.clap");
    build("clap", 7, dir.path(), "entry-spin.clap");
    let all = listed(&run(
        "CLAP_PATH",
        dir.path(),
        &["plugins", "list", "--clap"],
    ));
    assert_eq!(entry(&all, "hostile.h0")["unhostable"], Value::Null);
    let why = unhostable(&all, "entry-segv.clap");
    assert!(
        why.contains("crashed (SIGSEGV) in clap_entry.init"),
        "{why}"
    );
    let why = unhostable(&all, "init-segv.clap");
    assert!(
        why.contains("crashed (SIGSEGV) in clap_plugin.init (org.xrunlab.hostile.h2)"),
        "{why}"
    );
    let why = unhostable(&all, "init-spin.clap");
    assert!(why.contains("hung > 2 s in clap_plugin.init"), "{why}");
    let why = unhostable(&all, "entry-spin.clap");
    assert!(why.contains("hung > 2 s in clap_entry.init"), "{why}");

    // A chain naming the good plugin by id resolves past the others and runs.
    let o = run(
        "CLAP_PATH",
        dir.path(),
        &[
            "-q",
            "plugins",
            "bench",
            "--duration",
            "100ms",
            "clap:org.xrunlab.hostile.h0",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
}

/// A VST3 module crashing in `ModuleEntry` or spinning in `GetPluginFactory` is listed as
/// such; the listing ends.
#[test]
fn a_vst3_module_that_crashes_or_hangs_is_listed_as_such() {
    let dir = tempfile::tempdir().unwrap();
    build("vst3", 1, dir.path(), "entry-segv.vst3");
    build("vst3", 2, dir.path(), "factory-spin.vst3");
    let all = listed(&run(
        "VST3_PATH",
        dir.path(),
        &["plugins", "list", "--format", "vst3"],
    ));
    let why = unhostable(&all, "entry-segv.vst3");
    assert!(why.contains("crashed (SIGSEGV) in ModuleEntry"), "{why}");
    let why = unhostable(&all, "factory-spin.vst3");
    assert!(why.contains("hung > 2 s in GetPluginFactory"), "{why}");
}

/// The processes named `xrl-orphan` (what hostile.c's fork names itself) still alive.
fn orphans() -> Vec<i32> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        // "pid (comm) S …": a zombie (Z) is dead, only not yet reaped by its new parent.
        let Some((comm, rest)) = stat.split_once(") ") else {
            continue;
        };
        if comm.ends_with("(xrl-orphan") && !rest.starts_with('Z') {
            v.push(pid);
        }
    }
    v
}

fn no_orphans_after(what: &str) {
    // SIGKILL is delivered at once, but let a loaded machine schedule the victims.
    for _ in 0..100 {
        if orphans().is_empty() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(30));
    }
    panic!("{what} left processes behind: {:?}", orphans());
}

/// A plugin that forks in `init` leaves nothing running after the listing, nor after its
/// audit (where `init` runs once per configuration).
#[test]
fn a_plugin_that_forks_in_init_leaves_no_process_behind() {
    leaves_no_process_behind(4, "forks.clap");
}

/// Probed by `plugins list` and audited, the hostile plugin `h` leaves no process of its own
/// behind, however it made them.
fn leaves_no_process_behind(h: u32, name: &str) {
    let dir = tempfile::tempdir().unwrap();
    let file = build("clap", h, dir.path(), name);
    let all = listed(&run(
        "CLAP_PATH",
        dir.path(),
        &["plugins", "list", "--clap"],
    ));
    assert_eq!(
        entry(&all, &format!("hostile.h{h}"))["unhostable"],
        Value::Null
    );
    no_orphans_after("plugins list");
    let element = format!("clap:{}", file.display());
    let o = run(
        "CLAP_PATH",
        dir.path(),
        &["-q", "plugins", "audit", &element],
    );
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    no_orphans_after("plugins audit");
}

/// A plugin writing 1 GiB to stdout in `init` is probed, and no process of the run holds
/// more than a fraction of it.
#[test]
fn a_gigabyte_on_stdout_is_kept_as_a_bounded_tail() {
    let dir = tempfile::tempdir().unwrap();
    build("clap", 5, dir.path(), "spams.clap");
    let o = xrunlab()
        .env("CLAP_PATH", dir.path())
        .env("HOME", dir.path().join("no-home"))
        .args(["--json", "plugins", "list", "--clap"])
        .output()
        .unwrap();
    let all = listed(&o);
    assert_eq!(entry(&all, "hostile.h5")["unhostable"], Value::Null);
    // ru_maxrss of the waited-for descendants (KiB): the parent, its probe children.
    let peak = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .unwrap()
        .max_rss();
    assert!(
        peak < 400 * 1024,
        "a process of the run reached {peak} KiB: the output was not bounded"
    );
}

/// `exit(0)` inside `process` is a crash, not a skip: --fail-on-problem exits 1.
#[test]
fn an_exit_in_process_is_a_crash_and_fails_the_audit() {
    let dir = tempfile::tempdir().unwrap();
    let file = build("clap", 6, dir.path(), "exits.clap");
    let element = format!("clap:{}", file.display());
    let o = run(
        "CLAP_PATH",
        dir.path(),
        &["-q", "plugins", "audit", "--fail-on-problem", &element],
    );
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let r = &v["results"][0];
    assert_eq!(r["outcome"], "crashed", "{r}");
    assert!(
        r["reason"]
            .as_str()
            .unwrap()
            .contains("exited (code 0) without a result"),
        "{r}"
    );
}

/// `plugins audit DIR` takes a folder of CLAP files: the good plugin is audited, the broken
/// file beside it skipped with why; an empty folder names the formats looked for.
#[test]
fn a_clap_folder_is_audited_and_an_empty_one_says_what_was_looked_for() {
    let dir = tempfile::tempdir().unwrap();
    build("clap", 0, dir.path(), "good.clap");
    build("clap", 1, dir.path(), "entry-segv.clap");
    let folder = format!("{}/", dir.path().display());
    let o = xrunlab()
        .env("XRUNLAB_PROBE_TIMEOUT_S", "2")
        .args(["-q", "--json", "plugins", "audit", &folder])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{results:?}");
    let good = find(results, "plugin", "good.clap");
    assert_eq!(good["outcome"], "audited", "{good}");
    let bad = find(results, "plugin", "entry-segv.clap");
    assert_eq!(bad["outcome"], "skipped", "{bad}");
    assert!(
        bad["reason"]
            .as_str()
            .unwrap()
            .contains("crashed (SIGSEGV) in clap_entry.init"),
        "{bad}"
    );

    let empty = tempfile::tempdir().unwrap();
    let o = xrunlab()
        .args(["plugins", "audit"])
        .arg(format!("{}/", empty.path().display()))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    for format in ["LV2", "CLAP", "VST3"] {
        assert!(err.contains(format), "{err}");
    }
}

/// A plugin that leaves the probe's process group and session (`setsid`, then a double
/// fork) is still killed: the supervisor finds it by the mark its environment inherited, as
/// an orphan reparented to it (a child subreaper), not to init.
#[test]
fn a_plugin_that_setsids_and_double_forks_leaves_no_process_behind() {
    leaves_no_process_behind(8, "escapes.clap");
}

/// A plugin allocating 64 GiB meets the child's memory limit (`XRUNLAB_CHILD_MEMORY_MIB`,
/// here 512 MiB; 4 GiB by default): that file is reported crashed, promptly, and the
/// listing goes on. A limit that is not a number of MiB is refused, not ignored.
#[test]
fn a_plugin_allocating_past_the_memory_limit_is_that_files_crash() {
    let dir = tempfile::tempdir().unwrap();
    build("clap", 0, dir.path(), "good.clap");
    build("clap", 9, dir.path(), "greedy.clap");
    let t = std::time::Instant::now();
    let o = xrunlab()
        .env("CLAP_PATH", dir.path())
        .env("HOME", dir.path().join("no-home"))
        .env("XRUNLAB_PROBE_TIMEOUT_S", "20")
        .env("XRUNLAB_CHILD_MEMORY_MIB", "512")
        .args(["--json", "plugins", "list", "--clap"])
        .output()
        .unwrap();
    let all = listed(&o);
    assert!(
        t.elapsed() < std::time::Duration::from_secs(15),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(entry(&all, "hostile.h0")["unhostable"], Value::Null);
    let why = unhostable(&all, "greedy.clap");
    assert!(
        why.contains("crashed (SIGABRT) in clap_plugin.init"),
        "{why}"
    );
    let o = xrunlab()
        .env("CLAP_PATH", dir.path())
        .env("HOME", dir.path().join("no-home"))
        .env("XRUNLAB_CHILD_MEMORY_MIB", "lots")
        .args(["--json", "plugins", "list", "--clap"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("XRUNLAB_CHILD_MEMORY_MIB"));
}
