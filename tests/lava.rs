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
