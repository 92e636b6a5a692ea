//! The watchdog end to end (DESIGN.md §5), through the binary and the test-only `hang`
//! plugin. In its own test binary because its stuck FIFO threads would starve the real-time
//! tests running beside it.

mod common;
use common::{is_root, xrunlab};
use std::time::{Duration, Instant};

fn policy_args() -> Vec<&'static str> {
    if is_root() {
        vec!["--policy", "fifo:80"]
    } else {
        vec!["--policy", "other", "--no-mlock"]
    }
}

#[test]
fn hang_plugin_trips_the_watchdog_which_demotes_and_writes_a_partial_result() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run.json");
    let t = Instant::now();
    let o = xrunlab()
        .args([
            "run",
            "--chain",
            "hang",
            "--tracks",
            "2",
            "--watchdog",
            "500ms",
        ])
        .args(["--duration", "30s", "--quiet", "-o"])
        .arg(&out)
        .args(policy_args())
        .timeout(Duration::from_secs(20))
        .output()
        .unwrap();
    let took = t.elapsed();
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        took < Duration::from_millis(500 + 2000),
        "took {took:?} for a 500 ms watchdog bound"
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("watchdog"));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(v["kind"], "run");
    assert_eq!(v["status"], "watchdog");
    let w = &v["results"]["watchdog"];
    assert_eq!(w["bound_ns"], 500_000_000);
    let demoted = w["demoted"].as_array().unwrap();
    let cpus = xrunlab::rt::affinity::allowed_cpus().unwrap();
    assert_eq!(demoted.len(), cpus.len().min(2));
    for t in demoted {
        assert_eq!(t["policy_after"], "other", "{t}");
        assert!(t["error"].is_null(), "{t}");
    }
}
