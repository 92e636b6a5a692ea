//! The watchdog guards `rtl`'s loops too (docs/ARCHITECTURE.md §5): a loop cycle that never
//! returns (the hidden `--hang-at-cycle`, rtl's counterpart of the engine's `hang` plugin)
//! ends the run with status `watchdog`, exit 3 and a partial result. In its own test binary
//! because its stuck thread would starve the real-time tests running beside it.

mod common;
use common::{is_root, xrunlab};
use std::time::{Duration, Instant};

#[test]
fn a_stuck_rtl_cycle_ends_with_the_watchdog_and_a_partial_result() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("rtl.json");
    // The default policy (FIFO 80) where it can be had: the case the watchdog exists for.
    let policy = if is_root() { "fifo:80" } else { "other" };
    let t = Instant::now();
    let o = xrunlab()
        .args([
            "rtl",
            "--driver",
            "virtual",
            "--loopback",
            "--buffer",
            "256",
        ])
        .args(["--hang-at-cycle", "10", "--watchdog", "500ms"])
        .args(["--duration", "20s", "--policy", policy, "--quiet", "-o"])
        .arg(&out)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let took = t.elapsed();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{stderr}");
    assert!(took < Duration::from_secs(30), "took {took:?}");
    assert!(stderr.contains("watchdog"), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(v["kind"], "rtl");
    assert_eq!(v["status"], "watchdog");
    assert_eq!(v["config"]["hang_at_cycle"], 10);
    let w = &v["results"]["watchdog"];
    assert_eq!(w["bound_ns"], 500_000_000, "{w}");
    assert!(w["stuck_ns"].as_u64().unwrap() >= 500_000_000, "{w}");
    // The loop ran up to the stuck cycle; the estimator went down with it.
    assert!(v["results"]["cycles"].as_u64().unwrap() >= 10);
    assert!(v["results"]["measured"].is_null());
}
