//! `xrunlab verdict` and `compare` of suite directories: golden output on committed results
//! of this VM, the recommendation on a latency drawn from a known model (exact, since the
//! model and the seed fix it), `--fail-above` as a CI gate, JUnit from a verdict, and
//! every bad input refused with exit 2 and the reason.

mod common;
use common::{read_json, xrunlab, xrunlab_wide};
use predicates::prelude::*;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/verdict")
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The committed suite-like directory (check, latency idle and under `paper`, load grid,
/// rtl model, a 20 s run at 128 frames under `paper`), judged with the defaults.
#[test]
fn verdict_of_the_committed_results_is_golden() {
    let out = xrunlab()
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["verdict", "tests/fixtures/verdict", "--json", "-q"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["kind"], "verdict");
    insta::assert_json_snapshot!("verdict_fixtures_config", v["config"]);
    insta::assert_json_snapshot!("verdict_fixtures_results", v["results"]);
    // What the snapshot says, in words that must not drift with it.
    let r = &v["results"];
    assert_eq!(r["judged_on"], "stressed");
    assert_eq!(r["recommended_frames"], serde_json::Value::Null);
    let rows = r["rows"].as_array().unwrap();
    // Nothing meets up to 1024 frames: the rows go on to 4096.
    assert_eq!(rows.len(), 9);
    assert_eq!(rows[8]["buffer_frames"], 4096);
    let r128 = rows.iter().find(|x| x["buffer_frames"] == 128).unwrap();
    assert_eq!(r128["measured"][0]["file"], "run-128-stress.json");
    assert_eq!(r128["measured"][0]["stress"][0], "paper");
    assert_eq!(r128["plugins"].as_array().unwrap().len(), 4);
    // preempt=none fails and the latency tail is the symptom: it ranks first.
    assert_eq!(r["advice"][0]["id"], "preempt");
    // The terminal form opens with the answer.
    let text = xrunlab()
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["verdict", "tests/fixtures/verdict"])
        .output()
        .unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    // The answer opens it, wrapped at 80 columns; undecided, the exact command that settles
    // it comes next; no colour off a terminal.
    let answer = r["headline"].as_str().unwrap();
    assert!(
        answer.starts_with("Not decided yet: 512 frames glitches "),
        "{text}"
    );
    // Undecided still says what the data shows: the undecided size's rate or its bound.
    let r1024 = rows.iter().find(|x| x["buffer_frames"] == 1024).unwrap();
    let high = r1024["stressed"]["episodes_per_hour"]["high"]
        .as_f64()
        .unwrap();
    assert!(
        answer.contains(&format!(
            "(1024 frames so far: at most {} glitches an hour)",
            xrunlab::report::format::per_hour(high)
        )) || answer.contains("(1024 frames so far: about "),
        "{answer}"
    );
    let opening: Vec<&str> = text
        .lines()
        .take_while(|l| !l.starts_with("next:"))
        .collect();
    assert_eq!(opening.join(" "), answer);
    // The next latency measures as the judged one did, so that it pools with it; on the
    // terminal it is one command however it is broken.
    let next = "xrunlab latency --stress paper --audio-period 64@48000 --duration 1m -o \
                lat-more.json";
    let next = next.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(r["next"], next.as_str());
    let shown = text.split("\nnext:\n").nth(1).unwrap_or("");
    let shown = shown.split("\n\n").next().unwrap().replace(" \\\n", " ");
    assert_eq!(shown.split_whitespace().collect::<Vec<_>>().join(" "), next);
    assert!(!text.contains('\x1b'), "{text}");
    fits_80_columns(&text, 9);
    insta::assert_snapshot!("verdict_fixtures_text", text);
}

/// Every line of a terminal summary fits 80 columns, and its table (`rows` rows) has one
/// line per row: a cell wrapped onto a second line would split a number.
fn fits_80_columns(text: &str, rows: usize) {
    for l in text.lines() {
        assert!(
            l.chars().count() <= 80,
            "{} columns: {l}",
            l.chars().count()
        );
    }
    let table = text.lines().filter(|l| l.starts_with('│')).count();
    assert_eq!(table, rows + 1, "a wrapped table row:\n{text}");
}

/// A latency drawn from normal(100 µs, 20 µs) every 20 ms for 10 simulated hours, in `dir`.
fn sim_latency(dir: &Path) -> PathBuf {
    let lat = dir.join("lat.json");
    xrunlab()
        .args([
            "latency",
            "--sim-latency",
            "normal:100us,20us",
            "-i",
            "20ms",
        ])
        .args(["--duration", "10h", "--seed", "1", "-q", "-o", s(&lat)])
        .assert()
        .success();
    lat
}

/// A latency drawn from normal(100 µs, 20 µs) every 20 ms for 10 simulated hours, at 50 %
/// DSP load: 16 frames fails (its 167 µs of slack is 3.3 σ), nothing is seen beyond any
/// larger budget, and "nothing in N·P hours" bounds the rate below 1/h from 512 frames on
/// (3.69 / (1.8 M × 10.67 ms) = 0.69/h; at 256 frames 1.38/h).
#[test]
fn the_recommendation_follows_the_data_and_gates_ci() {
    let d = tempfile::tempdir().unwrap();
    let lat = sim_latency(d.path());
    let out = d.path().join("v.json");
    xrunlab()
        .args(["verdict", s(&lat), "-q", "-o", s(&out)])
        .assert()
        .code(0);
    let v = read_json(&out);
    let r = &v["results"];
    assert_eq!(r["judged_on"], "idle");
    assert_eq!(r["recommended_frames"], 512);
    let meets: Vec<(u64, serde_json::Value)> = r["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["buffer_frames"].as_u64().unwrap(),
                x["meets_target"].clone(),
            )
        })
        .collect();
    use serde_json::json;
    assert_eq!(
        meets,
        vec![
            (16, json!(false)),
            (32, json!(null)),
            (64, json!(null)),
            (128, json!(null)),
            (256, json!(null)),
            (512, json!(true)),
            (1024, json!(true)),
        ]
    );
    // Decided: which size, how often it glitches, what the next size down does; no next step.
    assert!(
        r["headline"]
            .as_str()
            .unwrap()
            .starts_with("This machine can run 512 frames at 48 kHz (2 periods, "),
        "{}",
        r["headline"]
    );
    assert!(r["headline"]
        .as_str()
        .unwrap()
        .contains("at most 1 glitch in 87 min (predicted) idle"));
    assert!(r["headline"]
        .as_str()
        .unwrap()
        .ends_with("; 256 frames is not decided yet."));
    assert_eq!(r.get("next"), None);
    // Undecided sizes say how long to measure.
    assert!(r["gaps"]
        .as_array()
        .unwrap()
        .iter()
        .any(|g| g.as_str().unwrap().contains("32 frames is undecided")));
    // The CI gate: above the recommendation passes, below it fails (exit 1, not 2); the old
    // name --fail-if-above still works.
    xrunlab()
        .args(["verdict", s(&lat), "-q", "--fail-above", "512"])
        .assert()
        .code(0);
    xrunlab()
        .args(["verdict", s(&lat), "-q", "--fail-if-above", "256"])
        .assert()
        .code(1);
    // A looser target moves the recommendation down; a heavier load moves it up.
    let looser = xrunlab()
        .args(["verdict", s(&lat), "--json", "-q", "--target", "10/h"])
        .output()
        .unwrap();
    let looser: serde_json::Value = serde_json::from_slice(&looser.stdout).unwrap();
    assert_eq!(looser["results"]["recommended_frames"], 64);
    let heavy = xrunlab()
        .args(["verdict", s(&lat), "--json", "-q", "--load-pct", "100"])
        .output()
        .unwrap();
    let heavy: serde_json::Value = serde_json::from_slice(&heavy.stdout).unwrap();
    assert_eq!(
        heavy["results"]["recommended_frames"],
        serde_json::Value::Null
    );
    // Decided, failing: the sentence says so and why; tuning cannot lengthen the period, so
    // no next command. On latency alone (16 frames only), tuning is the next step.
    assert_eq!(
        heavy["results"]["headline"],
        "This machine cannot run even 4096 frames at 48 kHz within 1 glitch an hour idle \
         (not measured under load): it cannot keep up (the DSP fills the period)."
    );
    assert_eq!(heavy["results"].get("next"), None);
    let small = xrunlab()
        .args(["verdict", s(&lat), "--json", "-q", "--buffers", "16"])
        .output()
        .unwrap();
    let small: serde_json::Value = serde_json::from_slice(&small.stdout).unwrap();
    let said = small["results"]["headline"].as_str().unwrap();
    assert!(
        said.starts_with("This machine cannot run even 16 frames at 48 kHz within 1 glitch an hour idle (not measured under load): it glitches about "),
        "{said}"
    );
    assert_eq!(
        small["results"]["next"],
        "sudo xrunlab suite --tuned --quick -o xrunlab-tuned"
    );
    assert!(heavy["results"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .all(|x| x["meets_target"] == false && x["idle"]["overload"] == true));
}

/// A run under the judged condition that surely saw more than the target overrides an
/// optimistic prediction.
#[test]
fn a_measured_run_overrides_an_optimistic_prediction() {
    let d = tempfile::tempdir().unwrap();
    let lat = sim_latency(d.path());
    // A run at 512 frames with many xruns: its own fixture, with the count raised (the
    // file is otherwise a real run).
    let mut run = read_json(&fixtures().join("run-128-stress.json"));
    run["config"]["buffer_frames"] = 512.into();
    run["config"]["stress"] = serde_json::json!([]);
    run["results"]["stress"] = serde_json::Value::Null;
    run["results"]["xruns"]["total"] = 50.into();
    run["results"]["xruns"]["late_wakeup"] = 50.into();
    run["results"]["xruns"]["overload"] = 0.into();
    run["results"]["xruns"]["interference"] = 0.into();
    run["results"]["skipped_periods"] = 0.into();
    let runf = d.path().join("run.json");
    std::fs::write(&runf, run.to_string()).unwrap();
    let v = xrunlab()
        .args(["verdict", s(&lat), s(&runf), "--json", "-q"])
        .output()
        .unwrap();
    assert_eq!(
        v.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&v.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&v.stdout).unwrap();
    let r = &v["results"];
    let row = |f: u64| {
        r["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["buffer_frames"] == f)
            .unwrap()
            .clone()
    };
    assert_eq!(row(512)["meets_target"], false);
    assert_eq!(row(512)["measured"][0]["xruns"], 50);
    assert_eq!(row(512)["basis"], "measured");
    // The run's ratio to the prediction is carried to 1024 frames, whose optimistic
    // prediction alone met the target: it no longer passes on it.
    assert_eq!(row(1024)["calibration"]["from_frames"], 512);
    assert_ne!(row(1024)["meets_target"], true);
    assert_ne!(r["recommended_frames"], 1024);
    assert_eq!(r["causes"][0]["cause"], "late-wakeup");
}

/// A suite directory in `under` holding a copy of every result fixture (no manifest yet),
/// and their names, sorted.
fn suite_of_fixtures(under: &std::path::Path) -> (std::path::PathBuf, Vec<String>) {
    let dir = under.join("suite");
    std::fs::create_dir(&dir).unwrap();
    let mut names = Vec::new();
    for e in std::fs::read_dir(fixtures()).unwrap().flatten() {
        let n = e.file_name().into_string().unwrap();
        if n.ends_with(".json") {
            std::fs::copy(e.path(), dir.join(&n)).unwrap();
            names.push(n);
        }
    }
    names.sort();
    (dir, names)
}

/// "DIR holds no result (*.json) to judge" was said of a directory holding the results,
/// because its manifest listed none of them. The verdict says what the manifest lists and
/// judges the results that are there; a manifest listing some files that are gone is
/// refused naming them (a verdict over part of a suite would pass for the whole).
#[test]
fn a_manifest_listing_no_result_there_gives_way_to_the_results_present() {
    let d = tempfile::tempdir().unwrap();
    let (dir, names) = suite_of_fixtures(d.path());
    let manifest = dir.join("manifest.json");
    let verdict = |listed: &[&str]| {
        std::fs::write(&manifest, common::manifest_listing(listed)).unwrap();
        xrunlab_wide()
            .args(["verdict", s(&dir), "--json"])
            .output()
            .unwrap()
    };
    let golden = xrunlab_wide()
        .args(["verdict", s(&fixtures()), "--json", "-q"])
        .output()
        .unwrap();
    let golden: serde_json::Value = serde_json::from_slice(&golden.stdout).unwrap();
    for (listed, says) in [
        (
            &["../elsewhere/01-latency.json", "02-run.json"][..],
            "lists only result files that are not there",
        ),
        (&[], "lists no result file"),
    ] {
        let out = verdict(listed);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{listed:?}: {err}");
        let note = format!("read the {} *.json file(s) in", names.len());
        // Warnings wrap at the terminal's width: compare their words.
        let flat = err.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(flat.contains(says) && flat.contains(&note), "{err}");
        let mut v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        // A suite's directory is resumed to measure longer; loose files get a latency command.
        let next = v["results"]
            .as_object_mut()
            .unwrap()
            .remove("next")
            .unwrap();
        assert!(
            next.as_str()
                .unwrap()
                .starts_with("xrunlab suite --resume "),
            "{next}"
        );
        let mut golden = golden.clone();
        golden["results"].as_object_mut().unwrap().remove("next");
        assert_eq!(v["results"], golden["results"], "{listed:?}");
        assert!(v["warnings"][0].as_str().unwrap().contains(says));
    }
    let out = verdict(&["latency-idle.json", "gone.json"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("lists 1 result file(s) that are not there") && err.contains("gone.json"),
        "{err}"
    );
    // Nothing there either: both are said.
    let empty = d.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    std::fs::write(empty.join("manifest.json"), common::manifest_listing(&[])).unwrap();
    xrunlab_wide()
        .args(["verdict", s(&empty)])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "holds no result (*.json) to judge, and its manifest.json lists no result file",
        ));
}

/// A doctored manifest that lists each result many times judges as one listing each once:
/// a run's hours are not counted again (12,000 listings of one suite's files once turned
/// "fails, measured" into "meets, measured in 15.4 h"), nor each file parsed again.
#[test]
fn a_result_listed_twice_in_a_manifest_counts_once() {
    let d = tempfile::tempdir().unwrap();
    let (dir, names) = suite_of_fixtures(d.path());
    let verdict = |times: usize| {
        let listed: Vec<&str> = (0..times)
            .flat_map(|_| names.iter().map(String::as_str))
            .collect();
        std::fs::write(dir.join("manifest.json"), common::manifest_listing(&listed)).unwrap();
        let o = xrunlab_wide()
            .args(["verdict", s(&dir), "--json", "-q"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", common::show(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["results"].clone()
    };
    let once = verdict(1);
    assert!(
        once["rows"].as_array().is_some_and(|r| r
            .iter()
            .any(|r| r["measured"].as_array().is_some_and(|m| !m.is_empty()))),
        "the fixtures hold a run the verdict counts: {once}"
    );
    assert_eq!(verdict(50), once);
}

#[test]
fn bad_input_exits_2_with_the_reason() {
    let d = tempfile::tempdir().unwrap();
    let fail = |args: &[&str], why: &str| {
        xrunlab()
            .arg("verdict")
            .args(args)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(why));
    };
    // An empty directory.
    let empty = d.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    fail(&[s(&empty)], "holds no result");
    // A latency result without histograms.
    let mut v = read_json(&fixtures().join("latency-idle.json"));
    for c in v["results"]["per_cpu"].as_array_mut().unwrap() {
        c["histogram_us"] = serde_json::json!([]);
        c["overflow_ns"] = serde_json::json!([]);
    }
    let nohist = d.path().join("nohist.json");
    std::fs::write(&nohist, v.to_string()).unwrap();
    fail(&[s(&nohist)], "no usable histogram");
    // A cost measured at another rate than asked.
    let bench = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results/bench.json");
    let lat = fixtures().join("latency-stress.json");
    fail(
        &[s(&lat), "--cost", s(&bench), "--rate", "44100"],
        "measured at 48000 Hz",
    );
    // Options.
    fail(&[s(&lat), "--periods", "1"], "--periods 1");
    fail(&[s(&lat), "--fail-above", "0"], "--fail-above 0");
    fail(&[s(&lat), "--target", "0/h"], "--target");
    fail(&[s(&lat), "--cell", "1:x"], "--cost");
    fail(&[s(&lat), "--buffers", "0,64"], "0 frames");
    // A directory holding only derived results.
    let only = d.path().join("only");
    std::fs::create_dir(&only).unwrap();
    let out = xrunlab()
        .args(["verdict", s(&lat), "-q", "-o"])
        .arg(only.join("v.json"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    fail(&[s(&only)], "only predictions or verdicts");
    // A missing file.
    fail(&["/nonexistent/lat.json"], "lat.json");
}

/// Two suite directories side by side: one table of verdicts, then each stage both ran.
#[test]
fn compare_takes_whole_suite_directories() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = (d.path().join("stock"), d.path().join("tuned"));
    for dir in [&a, &b] {
        std::fs::create_dir(dir).unwrap();
        for e in std::fs::read_dir(fixtures()).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
        }
    }
    // The second machine has no run and no load grid: their rows say so.
    std::fs::remove_file(b.join("run-128-stress.json")).unwrap();
    std::fs::remove_file(b.join("load.json")).unwrap();
    let html = d.path().join("cmp.html");
    let out = xrunlab_wide()
        .args([
            "compare",
            s(&a),
            s(&b),
            "--label",
            "tuned=RT kernel",
            "-o",
            s(&html),
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("Verdicts"), "{text}");
    assert!(text.contains("RT kernel"), "{text}");
    assert!(text.contains("smallest size meeting the target"));
    assert!(text.contains("128 frames"));
    // Stages both have are compared by kind; the load grid only one has is not.
    assert!(text.contains("latency-idle: "), "{text}");
    assert!(text.contains("check: "), "{text}");
    assert!(!text.contains("load: "), "{text}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("Verdicts") && page.contains("RT kernel"));
    // Files and directories do not mix.
    xrunlab_wide()
        .args(["compare", s(&a), s(&b.join("check.json"))])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("not both"));
    // A directory with nothing in it.
    let empty = d.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    xrunlab_wide()
        .args(["compare", s(&a), s(&empty)])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("holds no result"));
}

/// Where `--forensics` traced a run, the verdict names its culprits, the same culprit summed
/// over results (a real 60 s `run --forensics --stress paper` of this VM, trimmed to three
/// windows; its culprit table is whole).
#[test]
fn culprits_of_traced_runs_are_summed_into_the_verdict() {
    let d = tempfile::tempdir().unwrap();
    let run = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/forensics/run-paper.json");
    let twice = d.path().join("again.json");
    std::fs::copy(&run, &twice).unwrap();
    let lat = fixtures().join("latency-stress.json");
    let out = xrunlab()
        .args(["verdict", s(&lat), s(&run), s(&twice), "--json", "-q"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let one = read_json(&run);
    let rows = one["results"]["forensics"]["culprits"].as_array().unwrap();
    let top_unaccounted: u64 = rows
        .iter()
        .filter(|r| r["culprit"]["kind"] == "unaccounted")
        .map(|r| r["explained"].as_u64().unwrap())
        .sum();
    let c = v["results"]["culprits"].as_array().unwrap();
    assert!(!c.is_empty());
    // The guest's untraced time, on a run whose host stole 80 ms, is named for what it is.
    assert!(c.iter().all(|x| x["culprit"] != "unaccounted"));
    let u = c
        .iter()
        .find(|x| x["culprit"] == "hypervisor: the vCPU was not running")
        .unwrap();
    assert_eq!(u["explained"].as_u64().unwrap(), 2 * top_unaccounted);
    assert_eq!(u["files"].as_array().unwrap().len(), 2);
    // Most explained first; our own thread and idle time are no culprits.
    let explained: Vec<u64> = c.iter().map(|x| x["explained"].as_u64().unwrap()).collect();
    assert!(explained.windows(2).all(|w| w[0] >= w[1]));
    assert!(c.iter().all(|x| x["culprit"] != "idle"));
    // Only culprits that were the top one of some xrun: the run names 4 of its 20 rows.
    assert!(
        c.iter().all(|x| x["explained"].as_u64().unwrap() >= 1),
        "{c:?}"
    );
    assert_eq!(c.len(), 4, "{c:?}");
    // The suite's own competing threads and stressors are listed apart, as ours.
    let mut doc = read_json(&run);
    let rows = doc["results"]["forensics"]["culprits"]
        .as_array_mut()
        .unwrap();
    rows[2]["culprit"]["name"] = "xr-voip".into();
    rows[3]["culprit"]["name"] = "stress-ng-cpu".into();
    let ours = d.path().join("ours.json");
    std::fs::write(&ours, serde_json::to_vec(&doc).unwrap()).unwrap();
    let out = xrunlab()
        .args(["verdict", s(&lat), s(&ours), "--json", "-q"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = v["results"]["culprits"].as_array().unwrap();
    let whose = |n: &str| {
        c.iter()
            .find(|x| x["culprit"].as_str().unwrap().starts_with(n))
            .unwrap()["ours"]
            .clone()
    };
    assert_eq!(whose("xr-voip"), true);
    assert_eq!(whose("stress-ng-cpu"), true);
    assert_eq!(whose("softirq RCU"), serde_json::Value::Null);
    let text = xrunlab()
        .args(["verdict", s(&lat), s(&ours)])
        .output()
        .unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    let machine = &text[text.find("Culprits named").unwrap()..text.find("Ours (").unwrap()];
    assert!(
        !machine.contains("xr-voip") && machine.contains("softirq RCU"),
        "{text}"
    );
    assert!(
        machine.contains("(hypervisor: the host ran something else"),
        "{text}"
    );
}

/// The suite's adaptive stretches: two stretches of one latency measurement are pooled into
/// one longer measurement, which decides a size neither decides alone (10 simulated hours
/// bound 256 frames at 1.38/h, 20 hours at 0.69/h); and the knee the suite extends for is
/// the first undecided size above the largest failing one, with the time it still needs.
#[test]
fn stretches_of_one_measurement_are_pooled_and_the_knee_is_found() {
    let d = tempfile::tempdir().unwrap();
    let one = sim_latency(d.path());
    let two = d.path().join("lat2.json");
    xrunlab()
        .args([
            "latency",
            "--sim-latency",
            "normal:100us,20us",
            "-i",
            "20ms",
        ])
        .args(["--duration", "10h", "--seed", "2", "-q", "-o", s(&two)])
        .assert()
        .success();
    let out = xrunlab()
        .args(["verdict", s(&one), s(&two), "--json", "-q"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["results"]["recommended_frames"], 256, "{v}");
    let r256 = &v["results"]["rows"][4];
    assert_eq!(r256["buffer_frames"], 256);
    assert_eq!(r256["idle"]["latency"], "lat + 1 more");

    // The committed suite-like results: 512 frames and below fail, 1024 is undecided.
    use xrunlab::suite::{adapt, Manifest, Mode, StageRecord, StageStatus, SuiteStatus};
    let stages = std::fs::read_dir(fixtures())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".json"))
        .map(|n| StageRecord {
            status: StageStatus::Ok,
            file: Some(n.clone()),
            ..StageRecord::not_run(&n, vec![])
        })
        .collect();
    let m = Manifest {
        tool: xrunlab::results::Tool::default(),
        mode: Mode::Quick,
        driver: "virtual".into(),
        status: SuiteStatus::Running,
        reason: None,
        started_at: String::new(),
        ended_at: None,
        stages,
        report: None,
        tuning: None,
    };
    let k = adapt::knee(&m, &fixtures()).expect("1024 frames is undecided");
    assert_eq!(k.frames, 1024);
    // The verdict's own note says about 51 s; the stressed fixture ran 10 s.
    assert_eq!(k.need.as_secs(), 50, "{k:?}");
    assert_eq!(k.measured.as_secs(), 10, "{k:?}");
    let next = adapt::stretch(&k, std::time::Duration::from_secs(600)).unwrap();
    assert_eq!(next.as_secs(), 53);
}
