//! CLI behaviour common to every command: help, exit codes, bad values.

mod common;
use common::xrunlab;
use predicates::prelude::*;

#[test]
fn help_lists_commands_and_exit_codes() {
    xrunlab()
        .arg("--help")
        .assert()
        .success()
        .stdout(predicate::str::contains("check"))
        .stdout(predicate::str::contains("Exit codes"));
}

#[test]
fn every_subcommand_help_has_examples() {
    let out = xrunlab().arg("--help").output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let cmds: Vec<String> = text
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        // Wrapped descriptions are indented deeper than command names.
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect();
    assert!(!cmds.is_empty(), "no commands listed in:\n{text}");
    for c in cmds {
        xrunlab()
            .args([c.as_str(), "--help"])
            .assert()
            .success()
            .stdout(predicate::str::contains("Examples:"));
    }
}

#[test]
fn unknown_option_is_usage_error() {
    xrunlab()
        .args(["check", "--no-such-flag"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("unexpected argument"));
}

#[test]
fn unknown_command_is_usage_error() {
    xrunlab().arg("frobnicate").assert().code(2);
}

#[test]
fn output_into_missing_directory_is_usage_error_and_writes_nothing() {
    let d = tempfile::tempdir().unwrap();
    let target = d.path().join("missing/dir/check.json");
    xrunlab()
        .args(["check", "-o"])
        .arg(&target)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("does not exist"));
    assert!(!target.exists());
}

/// Computations say nothing about the machine they ran on: none of its conditions (a VM,
/// the governor, RT throttling…) is warned about or recorded in their results.
#[test]
fn pure_computations_warn_of_no_machine_condition() {
    let machine = xrunlab::system::Environment::capture().warnings();
    let tmp = tempfile::tempdir().unwrap();
    let runs: [&[&str]; 3] = [
        &["rtl", "--model"],
        &["run", "--driver", "sim", "--duration", "1s"],
        &["latency", "--sim-latency", "const:20us", "--duration", "1s"],
    ];
    for (i, args) in runs.iter().enumerate() {
        let file = tmp.path().join(format!("{i}.json"));
        let out = xrunlab().args(*args).arg("-o").arg(&file).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let recorded = doc["warnings"].to_string();
        for w in &machine {
            let head: String = w.chars().take(30).collect();
            assert!(
                !stderr.contains(&head),
                "{args:?} warned '{head}':\n{stderr}"
            );
            assert!(!recorded.contains(&head), "{args:?} recorded '{head}'");
        }
    }
}
