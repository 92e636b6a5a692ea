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
        // Every block timed: the mean per frame and the per-block distribution.
        let k = x["instances"].as_f64().unwrap();
        let b = &x["per_block"];
        let mean = x["mean_ns_per_frame"].as_f64().unwrap();
        assert!(mean > 0.0);
        assert!((mean - b["mean_ns"].as_f64().unwrap() / 64.0 / k).abs() <= 1e-9 * mean);
        let u = |f: &str| b[f].as_u64().unwrap();
        assert!(u("max_ns") >= u("p999_ns") && u("p999_ns") >= u("p99_ns"));
        assert!(u("p99_ns") >= u("p50_ns") && u("blocks") >= 5);
        assert_eq!(
            b["p999_ns_per_frame"].as_f64().unwrap(),
            u("p999_ns") as f64 / 64.0 / k
        );
        assert_eq!(x["signal"], "noise");
        assert!(x["signal_description"]
            .as_str()
            .unwrap()
            .contains("−20 dBFS peak"));
    }
    assert_eq!(v["config"]["signal"], "noise");
    // The human table goes to stderr when stdout carries JSON.
    assert!(String::from_utf8_lossy(&out.stderr).contains("inst/core"));
}

fn bench_json(args: &[&str]) -> serde_json::Value {
    let out = xrunlab()
        .args([
            "plugins",
            "bench",
            "--json",
            "--duration",
            "20ms",
            "--buffer",
            "64",
        ])
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn bench_instances_gives_one_result_per_plugin_and_count() {
    let v = bench_json(&["--instances", "1,4,2", "gain", "reverb-light"]);
    let got: Vec<(String, u64)> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["plugin"].as_str().unwrap().to_string(),
                r["instances"].as_u64().unwrap(),
            )
        })
        .collect();
    let want: Vec<(String, u64)> = ["gain", "reverb-light"]
        .iter()
        .flat_map(|p| [1, 2, 4].map(|k| (p.to_string(), k)))
        .collect();
    assert_eq!(got, want);
    assert_eq!(v["config"]["instances"], serde_json::json!([1, 2, 4]));
    // A range takes its powers of two.
    let v = bench_json(&["--instances", "1..8", "gain"]);
    let ks: Vec<u64> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["instances"].as_u64().unwrap())
        .collect();
    assert_eq!(ks, [1, 2, 4, 8]);
}

#[test]
fn bench_records_the_signal_and_the_table_says_it() {
    for (sig, words) in [
        ("silence", "silence"),
        ("sine", "1 kHz sine, −20 dBFS peak"),
        ("noise", "white noise, −20 dBFS peak"),
    ] {
        let out = xrunlab()
            .args(["plugins", "bench", "--json", "--duration", "20ms"])
            .args(["--signal", sig, "gain"])
            .output()
            .unwrap();
        assert!(out.status.success());
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["config"]["signal"], sig);
        assert_eq!(v["results"][0]["signal"], sig);
        let d = v["results"][0]["signal_description"].as_str().unwrap();
        assert!(d.contains(words), "{d}");
        let table = String::from_utf8_lossy(&out.stderr);
        // The heading may wrap at 80 columns: its first two lines, joined.
        let header = table
            .lines()
            .take(2)
            .flat_map(str::split_whitespace)
            .collect::<Vec<_>>()
            .join(" ");
        assert!(header.contains(words), "{header}");
    }
}

#[test]
fn bench_rejects_bad_input_with_exit_2() {
    // The arguments after `plugins bench`, and what the message must name.
    for (args, says) in [
        (&["nope"][..], "nope"),
        (&["reverb(N=3)"], "N"),
        (&["hang"], "hang"),
        (&["--duration", "10", "gain"], "10"),
        (&["--buffer", "0", "gain"], "--buffer"),
        (&["--signal", "pink", "gain"], "--signal"),
        (&["--signal", "", "gain"], "--signal"),
        (&["--instances", "0", "gain"], "--instances"),
        (&["--instances", "1,0,2", "gain"], "--instances"),
        (&["--instances", "4097", "gain"], "4096"),
        (&["--instances", "1..99999999999", "gain"], "--instances"),
        (&["--instances", "two", "gain"], "--instances"),
        (&["--instances", "", "gain"], "--instances"),
        (&["--instances", "1,2", "gain:3"], "--instances"),
        (&["gain:5000"], "4096"),
    ] {
        let out = xrunlab()
            .args(["plugins", "bench"])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        // Refused before measuring: no table.
        assert!(!err.contains("inst/core"), "{args:?}: {err}");
    }
}

/// `run --cost-prior FILE`: a bench result's per-block tail is the work each cycle is judged
/// against (with burn's calibration for burns), recorded in the result beside the per-thread
/// host stalls; a file that cannot be that prior is a usage error.
#[test]
fn a_bench_result_is_the_cost_prior_of_a_run() {
    let d = tempfile::tempdir().unwrap();
    let bench = d.path().join("bench.json");
    xrunlab()
        .args([
            "plugins",
            "bench",
            "--duration",
            "30ms",
            "--buffer",
            "64",
            "reverb-light:2",
            "--quiet",
            "-o",
        ])
        .arg(&bench)
        .assert()
        .success();
    let run = d.path().join("run.json");
    let o = xrunlab()
        .args([
            "run",
            "--buffer",
            "64",
            "--chain",
            "reverb-light:2,burn(5%)",
            "--duration",
            "300ms",
            "--policy",
            "other",
            "--no-mlock",
            "--quiet",
            "--cost-prior",
        ])
        .arg(&bench)
        .arg("-o")
        .arg(&run)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&run).unwrap()).unwrap();
    let p = &v["results"]["cost_prior"];
    let e = &p["prior"]["elements"];
    assert_eq!(e[0]["from"], "bench");
    assert_eq!(e[0]["instances"], 2);
    assert_eq!(e[1]["from"], "burn");
    // burn(5%) of 64 frames at 48 kHz alone is 66.7 µs.
    assert!(p["track_cycle_ns"].as_u64().unwrap() > 66_000, "{p}");
    assert!(p["used"].is_boolean());
    assert_eq!(
        v["config"]["cost_prior"]["bench_file"],
        bench.display().to_string()
    );
    assert_eq!(v["results"]["host_stalls"].as_array().unwrap().len(), 1);

    let refused = |chain: &str, file: &std::path::Path, driver: &str, why: &str| {
        xrunlab()
            .args(["run", "--driver", driver, "--chain", chain, "--cost-prior"])
            .arg(file)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(why));
    };
    refused(
        "reverb-heavy",
        &bench,
        "virtual",
        "no bench of 'reverb-heavy'",
    );
    refused("reverb-light:2", &run, "virtual", "not a 'bench' result");
    refused("burn(5%)", &bench, "sim", "real drivers");
}
