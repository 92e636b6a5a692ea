//! `xrunlab check` on the machine the tests run on: the live probes run, the JSON is a
//! valid result document, and what every machine must get right is right.

mod common;

use common::{is_root, require, which, xrunlab};

fn live_json() -> serde_json::Value {
    let out = xrunlab().args(["check", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "check without --strict exits 0");
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON document")
}

fn verdict<'a>(doc: &'a serde_json::Value, id: &str) -> &'a str {
    doc["results"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .and_then(|c| c["verdict"].as_str())
        .unwrap_or_else(|| panic!("no check {id}"))
}

#[test]
fn live_check_runs_the_probes_and_reports_the_machine() {
    let doc = live_json();
    assert_eq!(doc["kind"], "check");
    assert_eq!(doc["results"]["checks"].as_array().unwrap().len(), 22);
    let probe = &doc["environment"]["limits"]["rt_probe"];
    assert!(
        probe.is_object(),
        "the live run must try SCHED_FIFO: {probe}"
    );
    let obtained = probe["obtained"].as_bool().unwrap();
    assert_eq!(
        verdict(&doc, "rt-priority"),
        if obtained { "ok" } else { "fail" }
    );
    let warnings: Vec<&str> = doc["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w.as_str())
        .collect();
    assert_eq!(
        warnings.iter().any(|w| w.contains("no RT privilege")),
        !obtained,
        "{warnings:?}"
    );
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    if cpuinfo.split_whitespace().any(|w| w == "hypervisor") {
        assert_eq!(verdict(&doc, "virtualization"), "warn");
        assert!(warnings.iter().any(|w| w.contains("virtual machine")));
    }
    let rt_runtime = std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us")
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok());
    if rt_runtime.is_some_and(|v| v >= 0) {
        assert_eq!(verdict(&doc, "rt-throttling"), "warn");
    }
    let version = std::fs::read_to_string("/proc/sys/kernel/version").unwrap_or_default();
    if version.contains("PREEMPT_DYNAMIC") {
        assert_eq!(doc["environment"]["preempt"]["dynamic"], true);
    }
}

#[test]
fn root_gets_rt_priority_live() {
    // CI runs as root; elsewhere a normal user legitimately may not get SCHED_FIFO.
    if !require(is_root(), "root, to check that SCHED_FIFO 80 is obtained") {
        return;
    }
    let doc = live_json();
    assert_eq!(verdict(&doc, "rt-priority"), "ok");
    assert_eq!(verdict(&doc, "user"), "ok");
}

#[test]
fn live_json_matches_the_committed_schema_when_a_validator_exists() {
    // No JSON Schema validator is among the crate's dependencies; the schema test keeps the
    // types and the schema in step, and this one validates real output when python3's
    // jsonschema module happens to be installed.
    let has_validator = which("python3").is_some()
        && std::process::Command::new("python3")
            .args(["-c", "import jsonschema"])
            .status()
            .is_ok_and(|s| s.success());
    if !has_validator {
        eprintln!("SKIPPED: python3 jsonschema not installed (the schema test still ran)");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("check.json");
    xrunlab()
        .args(["check", "-q", "-o"])
        .arg(&out)
        .assert()
        .success();
    let schema = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/result.schema.json");
    let script = "import json,sys,jsonschema; jsonschema.validate(json.load(open(sys.argv[1])), json.load(open(sys.argv[2])))";
    let st = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(&out)
        .arg(&schema)
        .status()
        .unwrap();
    assert!(
        st.success(),
        "check JSON does not validate against the committed schema"
    );
}
