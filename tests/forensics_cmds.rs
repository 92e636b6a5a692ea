//! `--forensics` on the commands beyond `run` and `latency` — `load` (failed trials),
//! `sched`, `latencytest`, `event` — and on by default in `suite` (docs/methods.md
//! "Forensics"). Needs root and tracefs: fails under CI without them, skips elsewhere.

mod common;

use common::trace::{burst_hits, our_instances, setup, Culprit};
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

fn xrunlab(args: &[&str], out: &Path) -> std::process::Output {
    std::process::Command::new(common::bin())
        .args(args)
        .args(["--quiet", "-o"])
        .arg(out)
        .output()
        .unwrap()
}

/// The windows of every section in `sections`.
fn windows_of<'a>(sections: &[&'a Value]) -> Vec<&'a Value> {
    sections
        .iter()
        .flat_map(|f| f["windows"].as_array().into_iter().flatten())
        .collect()
}

/// A FIFO 90 burst beside the engine (FIFO 80) on CPU 1: every trial of the grid fails on an
/// xrun (criterion all), and the failed trials' forensics name the burst; the merged section
/// of the result agrees.
#[test]
fn a_failed_load_trial_names_the_fifo_burst_that_failed_it() {
    let Some(_g) = setup() else { return };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("load.json");
    let burst = Duration::from_millis(10);
    let fifo = Culprit::start("xrl-burst", 1, Some(90), burst, Duration::from_millis(300));
    let o = xrunlab(
        &[
            "load",
            "--driver",
            "virtual",
            "--cpus",
            "1",
            "--buffers",
            "64",
            "--tracks",
            "1",
            "--plugins",
            "burn(10%)",
            "--duration",
            "3s",
            "--criterion",
            "all",
            "--max-instances",
            "8",
            "--stress",
            "none",
            "--forensics",
        ],
        &out,
    );
    let spans = fifo.stop();
    let doc = common::read_json(&out);
    let r = &doc["results"];
    let trials: Vec<&Value> = r["cells"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["trials"].as_array().unwrap())
        .collect();
    let failed: Vec<&&Value> = trials.iter().filter(|t| t["passed"] == false).collect();
    assert!(!failed.is_empty(), "no trial failed\n{}", common::show(&o));
    // Failed trials are explained, passing ones not.
    for t in &trials {
        assert_eq!(
            t["forensics"].is_object(),
            t["passed"] == false,
            "trial {t}\n{}",
            common::show(&o)
        );
    }
    let sections: Vec<&Value> = failed.iter().map(|t| &t["forensics"]).collect();
    let windows = windows_of(&sections);
    let (hit, named) = burst_hits(&windows, &spans, "end_ns", "xrl-burst", burst);
    eprintln!(
        "failed trials {}, windows {}, overlapping a burst {}, named with a time within 20 % {}",
        failed.len(),
        windows.len(),
        hit.len(),
        named
    );
    for w in &hit {
        eprintln!(
            "  window {}: wake-up {}, {} µs from t_ideal to end, top {}",
            w["id"],
            w["wakeup"],
            (common::u(&w["end_ns"]) - common::u(&w["t_ideal_ns"])) / 1000,
            w["top"]
        );
    }
    assert!(!hit.is_empty(), "no failed trial's xrun overlapped a burst");
    assert!(
        named * 3 >= hit.len() * 2,
        "{named} of {} burst xruns name xrl-burst with its time",
        hit.len()
    );
    let merged = &r["forensics"];
    assert_eq!(
        common::u(&merged["windows_total"]),
        sections
            .iter()
            .map(|f| common::u(&f["windows_total"]))
            .sum::<u64>()
    );
    // The merged section agrees with the trials' sections on the burst. Not that the burst
    // is its first row: rows rank by xruns explained, and on a noisy guest the vCPU's own
    // stalls ("unaccounted") can fail more 64-frame trials than the burst does.
    let burst_rows = |f: &Value| -> Vec<Value> {
        f["culprits"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["culprit"]["name"] == "xrl-burst")
            .cloned()
            .collect()
    };
    let m = burst_rows(merged);
    assert_eq!(
        m.len(),
        1,
        "one merged row for the burst's CPU: {}",
        merged["culprits"]
    );
    let parts: Vec<Value> = sections.iter().flat_map(|f| burst_rows(f)).collect();
    let sum = |k: &str| parts.iter().map(|c| common::u(&c[k])).sum::<u64>();
    let worst = parts.iter().map(|c| common::u(&c["worst_ns"])).max();
    assert_eq!(
        (
            common::u(&m[0]["explained"]),
            common::u(&m[0]["total_ns"]),
            Some(common::u(&m[0]["worst_ns"]))
        ),
        (sum("explained"), sum("total_ns"), worst),
        "merged {} against the trials' {parts:?}",
        m[0]
    );
    assert!(
        common::u(&m[0]["explained"]) >= 1,
        "the burst explains none of the failed trials' xruns: {}",
        merged["culprits"]
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.stdout.is_empty() || text.contains("xrl-burst"),
        "the summary names the burst:\n{text}"
    );
    assert!(our_instances().is_empty(), "left: {:?}", our_instances());
}

/// `latencytest` on CPU 1 for one 3 s phase with a FIFO 95 burst (above its FIFO 90) beside
/// it: the result and the burst's spans.
fn latencytest_beside_a_burst(dir: &std::path::Path) -> (Value, Vec<(u64, u64)>, String) {
    let burst = Duration::from_millis(10);
    let fifo = Culprit::start("xrl-burst", 1, Some(95), burst, Duration::from_millis(300));
    let lt = dir.join("lt.json");
    let o = xrunlab(
        &[
            "latencytest",
            "--classes",
            "none",
            "--phase-duration",
            "3s",
            "--cpus",
            "1",
            "--forensics",
        ],
        &lt,
    );
    let spans = fifo.stop();
    (common::read_json(&lt), spans, common::show(&o))
}

/// The overruns a burst caused name it.
#[test]
fn latencytest_overruns_name_the_burst() {
    let Some(_g) = setup() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (doc, spans, _) = latencytest_beside_a_burst(dir.path());
    let windows = windows_of(&[&doc["results"]["phases"][0]["forensics"]]);
    let burst = Duration::from_millis(10);
    let (hit, named) = burst_hits(&windows, &spans, "end_ns", "xrl-burst", burst);
    eprintln!(
        "latencytest: overruns {}, overlapping a burst {}, named with a time within 20 % {named}",
        windows.len(),
        hit.len()
    );
    for w in hit.iter().take(3) {
        eprintln!("  overrun {}: {}", w["id"], w);
    }
    assert!(!hit.is_empty(), "no overrun overlapped a burst");
    assert!(
        named * 10 >= hit.len() * 9,
        "{named} of {} overruns name the burst with its time",
        hit.len()
    );
}

/// `latencytest`, `sched` and `event` each carry a section per part and the merged one, and
/// leave no instance behind.
#[test]
fn latencytest_sched_and_event_carry_their_forensics() {
    let Some(_g) = setup() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (doc, spans, shown) = latencytest_beside_a_burst(dir.path());
    let phase = &doc["results"]["phases"][0]["forensics"];
    assert!(phase.is_object(), "no phase section\n{shown}");
    assert_eq!(phase["windows_of"], "overrun");
    assert_eq!(
        common::u(&phase["windows_total"]),
        common::u(&doc["results"]["phases"][0]["overruns"])
    );
    assert!(doc["results"]["forensics"].is_object());
    let windows = windows_of(&[phase]);
    let (hit, _) = burst_hits(
        &windows,
        &spans,
        "end_ns",
        "xrl-burst",
        Duration::from_millis(10),
    );
    assert!(!hit.is_empty(), "no overrun overlapped a burst");

    let sched = dir.path().join("sched.json");
    let o = xrunlab(
        &[
            "sched",
            "--policies",
            "fifo",
            "--duration",
            "1s",
            "--forensics",
        ],
        &sched,
    );
    let doc = common::read_json(&sched);
    let row = &doc["results"]["rows"][0]["engine"]["forensics"];
    assert!(row.is_object(), "no row section\n{}", common::show(&o));
    assert_eq!(row["windows_of"], "xrun");
    assert!(doc["results"]["forensics"].is_object());

    let event = dir.path().join("event.json");
    let o = xrunlab(
        &[
            "event",
            "--driver",
            "virtual",
            "--trials",
            "5",
            "--forensics",
        ],
        &event,
    );
    let doc = common::read_json(&event);
    let run = &doc["results"]["runs"][0]["forensics"];
    assert!(run.is_object(), "no setting section\n{}", common::show(&o));
    // Every xrun of the setting's run (the warm-up's too), not only the trials' window.
    assert_eq!(run["windows_of"], "xrun");
    assert!(doc["results"]["forensics"].is_object());
    assert!(our_instances().is_empty(), "left: {:?}", our_instances());
}

/// Start `suite --smoke` (as `user` when given), wait until its latency-idle stage has
/// ended, then Ctrl-C it; its stderr.
fn suite_until_latency(user: Option<&str>, dir: &Path) -> String {
    let mut cmd = match user {
        Some(u) => {
            let mut c = std::process::Command::new("setpriv");
            c.args([
                &format!("--reuid={u}"),
                &format!("--regid={u}"),
                "--clear-groups",
            ])
            .arg(common::bin());
            c
        }
        None => std::process::Command::new(common::bin()),
    };
    let child = cmd
        .args(["suite", "--smoke", "-o"])
        .arg(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The stage is in the manifest once it has ended (its result written, or failed: an
    // unprivileged user cannot have FIFO threads).
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(60) {
        let listed = xrunlab::suite::Manifest::read(dir)
            .is_ok_and(|m| m.stages.iter().any(|s| s.stage == "latency-idle"));
        if listed {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: the pid is our child's.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let o = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// As root the suite traces its measuring stages: it says so once, the stage's argv has
/// `--forensics` and its result the section. As an unprivileged user it says in one line why
/// not, and the stages run without.
#[test]
fn the_suite_traces_by_default_and_says_why_when_it_cannot() {
    let Some(_g) = setup() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("root");
    let err = suite_until_latency(None, &dir);
    assert!(err.contains("forensics: on for the"), "{err}");
    let m = xrunlab::suite::Manifest::read(&dir).unwrap();
    let lat = m.stages.iter().find(|s| s.stage == "latency-idle").unwrap();
    assert!(
        lat.argv.iter().any(|a| a == "--forensics"),
        "{:?}",
        lat.argv
    );
    let check = m.stages.iter().find(|s| s.stage == "check").unwrap();
    assert!(!check.argv.iter().any(|a| a == "--forensics"));
    let doc = common::read_json(&dir.join("02-latency-idle.json"));
    assert!(
        doc["results"]["forensics"].is_object(),
        "no forensics in the latency stage's result"
    );

    // nobody may write here, not in tracefs.
    let dir = tmp.path().join("nobody");
    std::fs::create_dir(&dir).unwrap();
    let mut p = std::fs::metadata(tmp.path()).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut p, 0o777);
    std::fs::set_permissions(tmp.path(), p.clone()).unwrap();
    std::fs::set_permissions(&dir, p).unwrap();
    let err = suite_until_latency(Some("65534"), &dir);
    let off: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("forensics: off: "))
        .collect();
    assert_eq!(off.len(), 1, "one line says why:\n{err}");
    assert!(off[0].contains("root"), "{}", off[0]);
    let m = xrunlab::suite::Manifest::read(&dir).unwrap();
    let check = m.stages.iter().find(|s| s.stage == "check").unwrap();
    assert_eq!(
        check.status,
        xrunlab::suite::StageStatus::Ok,
        "the suite went on"
    );
    let lat = m.stages.iter().find(|s| s.stage == "latency-idle").unwrap();
    assert!(
        !lat.argv.iter().any(|a| a == "--forensics"),
        "{:?}",
        lat.argv
    );
    assert!(our_instances().is_empty(), "left: {:?}", our_instances());
}

/// Every stage the suite traces accepts `--forensics`: a typo in the list would otherwise
/// fail those stages only on a machine that can trace.
#[test]
fn every_stage_the_suite_traces_takes_forensics() {
    use clap::Parser;
    use xrunlab::suite::{stages::FORENSICS, Mode, STAGES};
    let mut traced = 0;
    for s in STAGES.iter().filter(|s| FORENSICS.contains(&s.command())) {
        for mode in [Mode::Quick, Mode::Full, Mode::Smoke] {
            let mut argv = vec!["xrunlab".to_string()];
            argv.extend(s.argv(mode, "virtual"));
            argv.extend(["--forensics".into(), "-o".into(), "x.json".into()]);
            if let Err(e) = xrunlab::cli::Cli::try_parse_from(&argv) {
                panic!("{} ({mode:?}): {e}", s.name);
            }
        }
        traced += 1;
    }
    // latency idle and stressed, latencytest, sched, event (not load: its cost).
    assert_eq!(traced, 5);
}

fn part(cpu: usize, culprit: &str, explained: u64, total_ns: u64, worst_ns: u64) -> Value {
    serde_json::json!({
        "instance": format!("xrunlab-1-{cpu}"), "cpus": [cpu], "events": 100, "lost_events": 2,
        "lost_per_cpu": [{"cpu": cpu, "events": 2}],
        "windows_of": "xrun", "windows_total": explained, "windows": [],
        "culprits": [{"culprit": {"kind": "task", "name": culprit, "pid": 9},
                      "cpu": cpu, "explained": explained, "present": explained,
                      "total_ns": total_ns, "worst_ns": worst_ns}]
    })
}

/// Merging parts sums what they counted and keeps the culprit table exact: rows of the same
/// culprit and CPU add up, the worst is the worst of any, the order is by windows explained.
#[test]
fn merged_sections_sum_their_parts_culprit_by_culprit() {
    use xrunlab::trace::Forensics;
    let parts: Vec<Forensics> = [
        part(1, "a", 2, 300, 200),
        part(1, "b", 1, 50, 50),
        part(1, "b", 3, 60, 30),
        part(0, "b", 1, 10, 10),
    ]
    .into_iter()
    .map(|v| serde_json::from_value(v).unwrap())
    .collect();
    assert!(Forensics::merged(&[]).is_none());
    let m = Forensics::merged(&parts).unwrap();
    assert_eq!(m.events, 400);
    assert_eq!(m.lost_events, 8);
    assert_eq!(m.windows_total, 7);
    assert_eq!(m.cpus, vec![0, 1]);
    let lost: Vec<(usize, u64)> = m.lost_per_cpu.iter().map(|l| (l.cpu, l.events)).collect();
    assert_eq!(lost, vec![(0, 2), (1, 6)]);
    let rows: Vec<(String, Option<usize>, u64, u64, u64)> = m
        .culprits
        .iter()
        .map(|r| {
            (
                r.culprit.name.clone(),
                r.cpu,
                r.explained,
                r.total_ns,
                r.worst_ns,
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            ("b".into(), Some(1), 4, 110, 50),
            ("a".into(), Some(1), 2, 300, 200),
            ("b".into(), Some(0), 1, 10, 10),
        ]
    );
}
