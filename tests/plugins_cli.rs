//! `xrunlab plugins list|bench` through the binary.

mod common;
use common::xrunlab;
use predicates::prelude::*;

#[test]
fn list_shows_the_plugins_and_their_params() {
    xrunlab()
        .args(["plugins", "list"])
        .assert()
        .success()
        .stdout(predicate::str::contains("reverb-heavy"))
        .stdout(predicate::str::contains("reverb-light"))
        .stdout(predicate::str::contains("poly"))
        .stdout(predicate::str::contains("BSO"));
}

#[test]
fn bench_writes_a_bench_result() {
    let out = xrunlab()
        .args([
            "plugins",
            "bench",
            "--json",
            "--duration",
            "50ms",
            "--buffer",
            "64",
            "reverb-light",
            "sine:2",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["kind"], "bench");
    let r = v["results"].as_array().unwrap();
    assert_eq!(r.len(), 2);
    assert_eq!(r[0]["plugin"], "reverb-light");
    assert_eq!(r[1]["instances"], 2);
    for x in r {
        let ns = x["ns_per_frame"].as_f64().unwrap();
        let pct = x["core_percent"].as_f64().unwrap();
        assert!(ns > 0.0 && (pct - ns * 48000.0 / 1e7).abs() < 1e-6 * pct.max(1.0));
        assert_eq!(x["buffer_frames"], 64);
    }
    // The human table goes to stderr when stdout carries JSON.
    assert!(String::from_utf8_lossy(&out.stderr).contains("inst/core"));
}

#[test]
fn bench_rejects_bad_input_with_exit_2() {
    for args in [
        vec!["plugins", "bench", "nope"],
        vec!["plugins", "bench", "reverb(N=3)"],
        vec!["plugins", "bench", "hang"],
        vec!["plugins", "bench", "--duration", "10", "gain"],
        vec!["plugins", "bench", "--buffer", "0", "gain"],
    ] {
        xrunlab().args(&args).assert().code(2);
    }
}
