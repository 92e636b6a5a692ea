//! The LAVA test definition in Linaro's test-definitions layout
//! (`contrib/lava/automated/linux/xrunlab/`) and the job that runs it
//! (`contrib/lava/xrunlab-job.yaml`): both validated by the schemas of Debian's
//! `lava-common` (`lava_common.schemas.validate` for the job, `…schemas.test.testdef` for
//! the definition), and the definition's script run outside LAVA on the sim driver, where it
//! prints the `lava-test-case` calls it would make.

mod common;

use common::require;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Debian's python3 with lava-common (scripts/install-deps installs it).
fn lava_python() -> Option<PathBuf> {
    let py = PathBuf::from("/usr/bin/python3");
    let ok = Command::new(&py)
        .args(["-c", "import lava_common.schemas, yaml"])
        .output()
        .is_ok_and(|o| o.status.success());
    require(ok, "lava-common (Debian package) for /usr/bin/python3").then_some(py)
}

/// lava-common's verdict on a YAML file: Ok, or the schema's complaint.
fn validate(py: &Path, what: &str, file: &Path) -> Result<(), String> {
    let check = match what {
        "job" => "lava_common.schemas.validate(doc)",
        _ => "lava_common.schemas.test.testdef.validate(doc)",
    };
    let script = format!(
        "import sys, yaml, lava_common.schemas, lava_common.schemas.test.testdef\n\
         doc = yaml.safe_load(open(sys.argv[1]))\n{check}\n"
    );
    let o = Command::new(py)
        .args(["-c", &script])
        .arg(file)
        .output()
        .unwrap();
    if o.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&o.stderr).into_owned())
    }
}

#[test]
fn job_and_test_definitions_pass_lava_commons_schemas() {
    let Some(py) = lava_python() else { return };
    let lava = repo().join("contrib/lava");
    validate(&py, "job", &lava.join("xrunlab-job.yaml")).unwrap();
    for def in ["automated/linux/xrunlab/xrunlab.yaml", "xrunlab-suite.yaml"] {
        validate(&py, "testdef", &lava.join(def)).unwrap_or_else(|e| panic!("{def}: {e}"));
    }
    // The job points at the definition that is here, with parameters it declares.
    let job = std::fs::read_to_string(lava.join("xrunlab-job.yaml")).unwrap();
    let def = std::fs::read_to_string(lava.join("automated/linux/xrunlab/xrunlab.yaml")).unwrap();
    assert!(job.contains("path: contrib/lava/automated/linux/xrunlab/xrunlab.yaml"));
    for p in ["DURATION", "BUFFERS", "STRESS", "BACKGROUND_CMD", "DRIVER"] {
        assert!(job.contains(&format!("{p}:")), "job sets {p}");
        assert!(def.contains(&format!("  {p}:")), "definition declares {p}");
    }
    // The schemas can fail: a job without timeouts, a definition in another format.
    let tmp = tempfile::tempdir().unwrap();
    let bad_job = tmp.path().join("job.yaml");
    std::fs::write(&bad_job, job.replace("timeouts:", "timeouts_missing:")).unwrap();
    assert!(validate(&py, "job", &bad_job).is_err());
    let bad_def = tmp.path().join("def.yaml");
    std::fs::write(
        &bad_def,
        def.replace("Lava-Test Test Definition 1.0", "Lava-Test 0.9"),
    )
    .unwrap();
    assert!(validate(&py, "testdef", &bad_def).is_err());
}

#[test]
fn the_definitions_script_sends_each_buffer_sizes_cases() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("output");
    let o = Command::new(repo().join("contrib/lava/automated/linux/xrunlab/xrunlab.sh"))
        .env("XRUNLAB", assert_cmd::cargo::cargo_bin("xrunlab"))
        // Outside LAVA: the script prints the calls instead of making them.
        .env("PATH", "/usr/bin:/bin")
        .args(["-d", "2s", "-b", "64 128", "-D", "sim", "-s", "none"])
        // A background command the script must stop when the runs end (else its wait hangs).
        .args(["-w", "sleep 60"])
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    for b in [64, 128] {
        for want in [
            format!("lava-test-case run-sim-{b}-frames-idle-complete --result pass"),
            format!(
                "lava-test-case run-sim-{b}-frames-idle-xruns --result pass --measurement 0 --units xruns"
            ),
            format!("lava-test-case run-sim-{b}-frames-idle-min-headroom --result pass --measurement "),
        ] {
            assert!(text.contains(&want), "missing '{want}' in:\n{text}");
        }
    }
    // One call per result line, and the runs kept beside result.txt.
    let lines = std::fs::read_to_string(out.join("result.txt")).unwrap();
    assert_eq!(text.lines().count(), lines.lines().count(), "{text}");
    assert!(out.join("runs/run-64.json").is_file());
    // A bad buffer size is the run's usage error, passed on (exit 2), not a sent result.
    let o = Command::new(repo().join("contrib/lava/automated/linux/xrunlab/xrunlab.sh"))
        .env("XRUNLAB", assert_cmd::cargo::cargo_bin("xrunlab"))
        .args(["-d", "1s", "-b", "zero", "-D", "sim", "-o"])
        .arg(tmp.path().join("bad"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(!String::from_utf8_lossy(&o.stdout).contains("lava-test-case"));
}

/// One case a LAVA dispatcher recorded, as `scripts/lava-localhost` lists it in
/// results.yaml (and .json).
#[derive(Debug, Clone)]
struct LavaCase {
    suite: String,
    name: String,
    result: String,
    measurement: Option<f64>,
    unit: Option<String>,
}

fn lava_results(dir: &Path) -> Vec<LavaCase> {
    let text = std::fs::read_to_string(dir.join("results.json")).unwrap();
    let rows: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    let s = |v: &serde_json::Value, k: &str| v.get(k).and_then(|x| x.as_str()).map(String::from);
    rows.iter()
        .map(|r| LavaCase {
            suite: s(r, "suite").unwrap_or_default(),
            name: s(r, "name").unwrap_or_default(),
            result: s(r, "result").unwrap_or_default(),
            measurement: r.get("measurement").and_then(|m| {
                m.as_f64()
                    .or_else(|| m.as_str().and_then(|t| t.parse().ok()))
            }),
            unit: s(r, "unit"),
        })
        .collect()
}

/// The machine state a LAVA run touches: LAVA's work directory, sshd's privilege-separation
/// directory, and overlays LAVA unpacks at the device's root.
fn lava_footprint() -> Vec<String> {
    let mut seen: Vec<String> = ["/var/lib/lava", "/run/sshd"]
        .iter()
        .filter(|p| Path::new(p).exists())
        .map(|p| p.to_string())
        .collect();
    for e in std::fs::read_dir("/").unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("lava-") {
            seen.push(format!("/{name}"));
        }
    }
    seen.sort();
    seen
}

#[test]
fn a_lava_dispatcher_runs_the_job_on_this_machine_and_records_its_cases() {
    if !require(common::is_root(), "root (the LAVA job logs in as root)") {
        return;
    }
    let unpacked = Path::new("/var/cache/xrunlab-lava/root/usr/bin/lava-run").is_file();
    if !require(
        unpacked || Path::new("/usr/bin/lava-run").is_file(),
        "Debian's lava-dispatcher (scripts/install-deps unpacks it)",
    ) || !require(
        Path::new("/usr/sbin/sshd").is_file(),
        "openssh-server (scripts/install-deps)",
    ) {
        return;
    }
    let before = lava_footprint();
    let tmp = tempfile::tempdir().unwrap();
    let run = |dir: &Path, buffers: &str| {
        let o = Command::new(repo().join("scripts/lava-localhost"))
            .env("XRUNLAB", assert_cmd::cargo::cargo_bin("xrunlab"))
            .env("BUFFERS", buffers)
            .env("DURATION", "2s")
            .env("DRIVER", "sim")
            .arg(dir)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "lava-run failed: {}\n{}",
            String::from_utf8_lossy(&o.stderr),
            std::fs::read_to_string(dir.join("lava.log")).unwrap_or_default()
        );
        lava_results(dir)
    };
    let ok = run(&tmp.path().join("ok"), "64 128");
    let find = |rows: &[LavaCase], name: &str| {
        rows.iter()
            .find(|r| r.name == name)
            .cloned()
            .unwrap_or_else(|| panic!("LAVA recorded no case {name}: {rows:?}"))
    };
    // LAVA deployed, logged in and ran the definition: its own cases passed, and each of the
    // definition's `lava-test-case` calls is a case of the definition's suite, with its
    // measurement.
    for case in ["scp-deploy", "0_xrunlab", "job"] {
        assert_eq!(find(&ok, case).result, "pass", "{case}: {ok:?}");
    }
    for b in [64, 128] {
        let xruns = find(&ok, &format!("run-sim-{b}-frames-idle-xruns"));
        assert_eq!(xruns.suite, "0_xrunlab");
        assert_eq!(
            (xruns.result.as_str(), xruns.measurement),
            ("pass", Some(0.0))
        );
        assert_eq!(xruns.unit.as_deref(), Some("xruns"));
        let headroom = find(&ok, &format!("run-sim-{b}-frames-idle-min-headroom"));
        // The sim driver's empty chain leaves the whole period: 64 or 128 frames at 48 kHz.
        let period_us = b as f64 / 48_000.0 * 1e6;
        let h = headroom.measurement.unwrap();
        assert!((h - period_us).abs() < 1.0, "{b}: headroom {h} µs");
    }
    // A definition that fails (a buffer size the run refuses, exit 2) is a failed suite in
    // LAVA, and the size it refused sends no case.
    let bad = run(&tmp.path().join("bad"), "64 zero");
    assert_eq!(find(&bad, "0_xrunlab").result, "fail", "{bad:?}");
    assert!(!bad.iter().any(|r| r.name.contains("zero")), "{bad:?}");
    assert_eq!(
        lava_footprint(),
        before,
        "the LAVA runs left the machine changed"
    );
}
