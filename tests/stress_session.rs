//! Stressors never outlive xrunlab: normal stop, error paths, SIGINT, SIGTERM, SIGKILL.
//! Every check looks at /proc: by process group, and by the session marker that every
//! descendant inherits in its environment (found even if a process left its group).

mod common;
use common::{is_root, pids_with_env, require, which, xrunlab};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use xrunlab::stress::session::{group_members, session_members, SESSION_ENV};
use xrunlab::stress::{BackendChoice, StressSession, StressSpec};

/// Session tests look for "any stressor of this test process" in /proc, so they must not
/// overlap.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn spec(presets: &str) -> StressSpec {
    let mut s = StressSpec::presets(presets).unwrap();
    s.stressor_exe = Some(env!("CARGO_BIN_EXE_xrunlab").into());
    s
}

/// Stressors started by this test process, from any session.
fn ours() -> Vec<i32> {
    pids_with_env(&format!("{SESSION_ENV}={}-", std::process::id()))
}

fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    while t.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    f()
}

#[test]
fn normal_stop_leaves_nothing_and_records_what_ran() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec("cpu,proc");
    s.backend = BackendChoice::Builtin;
    s.dir = Some(dir.path().into());
    let session = StressSession::start(&s, Duration::from_secs(2)).unwrap();
    let pgids = session.pgids();
    let marker = session.marker().to_string();
    assert_eq!(pgids.len(), 2);
    for &g in &pgids {
        assert!(!group_members(g).is_empty(), "group {g} not running");
        // Stressors lead their own process group.
        assert_ne!(g, unsafe { libc::getpgrp() });
    }
    assert!(session.dir().unwrap().starts_with(dir.path()));
    std::thread::sleep(Duration::from_millis(700));
    let rec = session.stop();
    for &g in &pgids {
        assert!(group_members(g).is_empty(), "group {g} survived stop");
    }
    assert!(session_members(&marker).is_empty());
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "files left"
    );
    assert_eq!(rec.backend, "builtin");
    assert_eq!(rec.presets, vec!["cpu", "proc"]);
    assert_eq!(rec.processes.len(), 2);
    for p in &rec.processes {
        assert_eq!(p.backend, "builtin");
        assert_eq!(p.exit, "exit 0", "{p:?}");
        assert!(!p.ended_early);
    }
    let kinds: Vec<&str> = rec.metrics.iter().map(|m| m.stressor.as_str()).collect();
    assert_eq!(kinds, vec!["cpu", "proc"]);
    assert!(
        rec.metrics.iter().all(|m| m.bogo_ops > 0.0),
        "{:?}",
        rec.metrics
    );
    assert!(rec.duration_ns >= 700_000_000);
}

#[test]
fn an_error_during_start_stops_what_was_started() {
    let _g = serial();
    let mut s = spec("cpu,proc");
    s.backend = BackendChoice::Builtin;
    s.commands = vec![vec!["/nonexistent/xrunlab-test-prog".into()]];
    let e = StressSession::start(&s, Duration::from_secs(2)).unwrap_err();
    assert_eq!(e.exit_code(), 2, "{e}");
    assert!(e.to_string().contains("not found"), "{e}");
    assert!(
        wait_until(Duration::from_secs(1), || ours().is_empty()),
        "{:?}",
        ours()
    );
}

#[test]
fn an_error_during_the_measurement_stops_the_stressors() {
    let _g = serial();
    let mut pgids = Vec::new();
    let mut measure = || -> xrunlab::Result<()> {
        let session = StressSession::start(&spec("cpu"), Duration::from_secs(2))?;
        pgids = session.pgids();
        std::thread::sleep(Duration::from_millis(200));
        Err(xrunlab::Error::cannot_measure("simulated failure mid-run"))
    };
    assert!(measure().is_err());
    assert!(!pgids.is_empty());
    for g in pgids {
        assert!(group_members(g).is_empty(), "group {g} survived the error");
    }
    assert!(ours().is_empty(), "{:?}", ours());
}

#[test]
fn a_stressor_that_dies_at_start_is_an_error() {
    let _g = serial();
    let mut s = spec("disk-write");
    s.backend = BackendChoice::Builtin;
    // Stands in for a stressor that fails at once (bad option, no permission).
    s.stressor_exe = Some("/bin/false".into());
    let e = StressSession::start(&s, Duration::from_secs(2)).unwrap_err();
    assert_eq!(e.exit_code(), 3, "{e}");
    assert!(e.to_string().contains("ended at start"), "{e}");
    assert!(ours().is_empty());
}

#[test]
fn stressors_are_sched_other_even_from_a_realtime_thread() {
    if !require(is_root(), "root (to run a SCHED_FIFO thread)") {
        return;
    }
    let _g = serial();
    let cpu = xrunlab::rt::affinity::allowed_cpus().unwrap();
    let last = *cpu.last().unwrap();
    // PDEATHSIG follows the spawning thread, so the session lives and dies in this thread.
    let (policies, pinned) = std::thread::spawn(move || {
        xrunlab::rt::policy::set_policy(0, &xrunlab::rt::Policy::fifo(50)).unwrap();
        let mut s = spec("cpu");
        s.backend = BackendChoice::Builtin;
        s.cpus = vec![last];
        let session = StressSession::start(&s, Duration::from_secs(2)).unwrap();
        let pids = session.pgids();
        let policies: Vec<i32> = pids
            .iter()
            .map(|&p| unsafe { libc::sched_getscheduler(p) })
            .collect();
        let pinned: Vec<String> = pids
            .iter()
            .map(|p| {
                std::fs::read_to_string(format!("/proc/{p}/status"))
                    .unwrap()
                    .lines()
                    .find_map(|l| {
                        l.strip_prefix("Cpus_allowed_list:")
                            .map(|v| v.trim().to_string())
                    })
                    .unwrap()
            })
            .collect();
        session.stop();
        (policies, pinned)
    })
    .join()
    .unwrap();
    assert_eq!(policies, vec![libc::SCHED_OTHER]);
    assert_eq!(pinned, vec![last.to_string()]);
}

#[test]
fn disk_classes_write_copy_read_and_clean_up() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec("disk-write,disk-copy,disk-read");
    s.dir = Some(dir.path().into());
    s.file_size = 4 << 20;
    let session = StressSession::start(&s, Duration::from_secs(2)).unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let rec = session.stop();
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    let kinds: Vec<&str> = rec.metrics.iter().map(|m| m.stressor.as_str()).collect();
    assert_eq!(kinds, vec!["disk-write", "disk-copy", "disk-read"]);
    // Each class moved at least one MiB.
    assert!(
        rec.metrics.iter().all(|m| m.bogo_ops >= 1.0),
        "{:?}",
        rec.metrics
    );
    assert_eq!(rec.file_size_bytes, 4 << 20);
}

#[test]
fn stress_ng_runs_the_paper_line_and_its_metrics_are_kept() {
    if !require(which("stress-ng").is_some(), "stress-ng installed") {
        return;
    }
    let _g = serial();
    let rec = {
        let session = StressSession::start(&spec("paper"), Duration::from_secs(3)).unwrap();
        std::thread::sleep(Duration::from_millis(1500));
        session.stop()
    };
    assert_eq!(rec.backend, "stress-ng");
    assert!(
        rec.stress_ng.as_ref().unwrap().version.starts_with("0."),
        "{rec:?}"
    );
    let p = &rec.processes[0];
    let argv: Vec<&str> = p.argv.iter().map(String::as_str).collect();
    assert_eq!(
        &argv[1..],
        [
            "--sched",
            "other",
            "--cpu",
            "1",
            "--udp",
            "1",
            "--io",
            "1",
            "--netdev",
            "1",
            "--aggressive",
            "--maximize",
            "--timeout",
            "8s",
            "--metrics-brief"
        ]
    );
    let kinds: Vec<&str> = rec.metrics.iter().map(|m| m.stressor.as_str()).collect();
    for k in ["cpu", "udp", "io", "netdev"] {
        assert!(kinds.contains(&k), "no metrics for {k}: {}", p.output_tail);
    }
    assert!(ours().is_empty(), "{:?}", ours());
}

/// Start `xrunlab stress` with a marker in its environment; return the child and the
/// marker once at least `n` stressors run.
fn start_cli(args: &[&str], n: usize) -> (std::process::Child, String) {
    let mark = format!(
        "XRUNLAB_TEST_MARK={}-{}",
        std::process::id(),
        args.join("_").len()
    );
    let (k, v) = mark.split_once('=').unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_xrunlab"))
        .args(args)
        .env(k, v)
        .env_remove("CI")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let me = child.id() as i32;
    let ok = wait_until(Duration::from_secs(10), || {
        pids_with_env(&mark).iter().filter(|&&p| p != me).count() >= n
    });
    assert!(ok, "stressors did not start");
    std::thread::sleep(Duration::from_millis(300));
    (child, mark)
}

fn stressor_groups(mark: &str, me: i32) -> Vec<i32> {
    pids_with_env(mark)
        .into_iter()
        .filter(|&p| p != me)
        .filter_map(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
            let rest = &stat[stat.rfind(')')? + 1..];
            rest.split_whitespace().nth(2)?.parse().ok()
        })
        .collect()
}

fn signal_test(sig: i32) {
    let _g = serial();
    let (child, mark) = start_cli(
        &[
            "stress",
            "--stress",
            "cpu,proc",
            "--duration",
            "60s",
            "--json",
        ],
        2,
    );
    let me = child.id() as i32;
    let groups = stressor_groups(&mark, me);
    assert!(!groups.is_empty());
    assert!(!groups.contains(&me), "a stressor shares xrunlab's group");
    unsafe { libc::kill(me, sig) };
    let t = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "took {:?} to stop",
        t.elapsed()
    );
    // A held load cut short is a partial result like any other: exit 3.
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["status"], "interrupted");
    assert_eq!(doc["kind"], "stress");
    let left = pids_with_env(&mark);
    assert!(left.is_empty(), "left behind: {left:?}");
    for g in groups {
        assert!(group_members(g).is_empty(), "group {g} survived");
    }
}

#[test]
fn sigint_stops_and_reaps_every_stressor() {
    signal_test(libc::SIGINT);
}

#[test]
fn sigterm_stops_and_reaps_every_stressor() {
    signal_test(libc::SIGTERM);
}

#[test]
fn sigkill_of_xrunlab_takes_the_stressors_with_it() {
    let _g = serial();
    let (mut child, mark) = start_cli(
        &[
            "stress",
            "--stress",
            "cpu,proc",
            "--stress-backend",
            "builtin",
            "--duration",
            "60s",
        ],
        2,
    );
    child.kill().unwrap();
    child.wait().unwrap();
    // PR_SET_PDEATHSIG: nothing of ours ran, the kernel killed them.
    let gone = wait_until(Duration::from_secs(5), || pids_with_env(&mark).is_empty());
    assert!(gone, "left behind: {:?}", pids_with_env(&mark));
}

#[test]
fn without_stress_ng_the_builtin_stressors_run_and_say_so() {
    let _g = serial();
    let empty = tempfile::tempdir().unwrap();
    let out = xrunlab()
        .env("PATH", empty.path())
        .env_remove("CI")
        .args([
            "stress",
            "--stress",
            "cpu,udp,io,vm",
            "--duration",
            "1500ms",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &doc["results"]["stress"];
    assert_eq!(r["backend"], "builtin");
    assert!(r["stress_ng"].is_null());
    let procs = r["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 4);
    assert!(procs
        .iter()
        .all(|p| p["backend"] == "builtin" && p["exit"] == "exit 0"));
    let metrics = r["metrics"].as_array().unwrap();
    let kinds: Vec<&str> = metrics
        .iter()
        .map(|m| m["stressor"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, vec!["cpu", "udp", "io", "vm"]);
    assert!(
        metrics
            .iter()
            .all(|m| m["source"] == "builtin" && m["bogo_ops"].as_f64().unwrap() > 0.0),
        "{metrics:?}"
    );
    assert_eq!(
        doc["environment"]["stress"],
        serde_json::json!(["cpu", "udp", "io", "vm"])
    );
}

#[test]
fn stress_cmd_is_run_without_a_shell() {
    let _g = serial();
    let out = xrunlab()
        .args([
            "stress",
            "--stress-cmd",
            "echo 'a;b' $HOME | x > /tmp/xrunlab-must-not-exist",
            "--duration",
            "500ms",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = &doc["results"]["stress"]["processes"][0];
    assert_eq!(
        p["argv"],
        serde_json::json!([
            "echo",
            "a;b",
            "$HOME",
            "|",
            "x",
            ">",
            "/tmp/xrunlab-must-not-exist"
        ])
    );
    assert_eq!(
        p["output_tail"],
        "a;b $HOME | x > /tmp/xrunlab-must-not-exist\n"
    );
    assert_eq!(p["backend"], "command");
    assert_eq!(p["ended_early"], true);
    assert_eq!(p["exit"], "exit 0");
    assert!(!std::path::Path::new("/tmp/xrunlab-must-not-exist").exists());
}

#[test]
fn bad_stress_options_are_usage_errors() {
    for args in [
        &["stress", "--stress", "gpu"][..],
        &["stress", "--stress", "cpu", "--stress-size", "1T"],
        &["stress", "--stress", "cpu", "--stress-cpus", "4000"],
        &["stress", "--stress-cmd", "echo 'unterminated"],
        &["stress", "--compete", "10ms/20ms"],
        &["stress"],
    ] {
        xrunlab().args(args).assert().code(2);
    }
}

/// Two signals in quick succession (GNU timeout signals the process, then its group) are one
/// request: the orderly stop runs to its end.
#[test]
fn a_second_signal_within_the_grace_is_the_same_request() {
    let _g = serial();
    let (child, mark) = start_cli(
        &[
            "stress",
            "--stress",
            "cpu,proc,top",
            "--duration",
            "60s",
            "--json",
        ],
        3,
    );
    let me = child.id() as i32;
    unsafe { libc::kill(me, libc::SIGTERM) };
    std::thread::sleep(Duration::from_millis(50));
    unsafe { libc::kill(me, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["status"], "interrupted");
    let gone = wait_until(Duration::from_secs(5), || pids_with_env(&mark).is_empty());
    assert!(gone, "left behind: {:?}", pids_with_env(&mark));
}

#[test]
fn a_command_that_leaves_its_group_is_still_killed() {
    if !require(which("setsid").is_some(), "setsid (util-linux)") {
        return;
    }
    let _g = serial();
    let mut s = spec("none");
    // setsid forks when it is a group leader, so `sleep` ends up in a new session and group,
    // out of reach of kill(-pgid).
    s.commands = vec![vec!["setsid".into(), "sleep".into(), "30".into()]];
    let session = StressSession::start(&s, Duration::from_secs(2)).unwrap();
    let marker = session.marker().to_string();
    assert!(wait_until(Duration::from_secs(2), || {
        session_members(&marker).iter().any(|&p| {
            std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "sleep")
        })
    }));
    let rec = session.stop();
    assert!(
        session_members(&marker).is_empty(),
        "{:?}",
        session_members(&marker)
    );
    assert!(
        rec.warnings
            .iter()
            .any(|w| w.contains("left their process group")),
        "{:?}",
        rec.warnings
    );
}

#[test]
fn asking_for_stress_ng_where_there_is_none_cannot_measure() {
    let empty = tempfile::tempdir().unwrap();
    xrunlab()
        .env("PATH", empty.path())
        .args([
            "stress",
            "--stress",
            "cpu",
            "--stress-backend",
            "stress-ng",
            "--duration",
            "1s",
        ])
        .assert()
        .code(3)
        .stderr(predicates::str::contains("stress-ng is not on PATH"));
}

#[test]
fn too_little_disk_space_is_refused_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    xrunlab()
        .args([
            "stress",
            "--stress",
            "disk-copy",
            "--stress-size",
            "1000000G",
        ])
        .arg("--stress-dir")
        .arg(dir.path())
        .assert()
        .code(3)
        .stderr(predicates::str::contains("--stress-size"));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
