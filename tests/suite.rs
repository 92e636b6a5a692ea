//! `xrunlab suite` end to end, in its hidden seconds-long mode: every stage really runs (as
//! a child of the real binary), the manifest is typed back and checked against the stage
//! table and the files, the report has a section per result; then --resume and Ctrl-C.

mod common;

use common::servers::{require_jackd, AudioServer};
use common::{bin, is_root, read_json, show, xrunlab};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use xrunlab::suite::{Manifest, Mode, StageStatus, SuiteStatus, STAGES};

fn manifest(dir: &Path) -> Manifest {
    Manifest::read(dir).expect("manifest.json parses as a Manifest")
}

/// Every stage parses as the command line it is: a typo in the table would otherwise show
/// only as a failed stage at the end of a long suite. (Here rather than beside the table:
/// the suite sits below the CLI, docs/ARCHITECTURE.md §2.)
#[test]
fn every_stage_parses() {
    use clap::Parser;
    for s in STAGES {
        for mode in [Mode::Quick, Mode::Full, Mode::Smoke] {
            let argv = s.argv(mode, "virtual");
            assert!(
                !argv.iter().any(|a| a.contains('{')),
                "{}: {argv:?}",
                s.name
            );
            let mut full = vec!["xrunlab".to_string()];
            full.extend(argv.iter().cloned());
            full.extend(["-o".into(), "x.json".into()]);
            if let Err(e) = xrunlab::cli::Cli::try_parse_from(&full) {
                panic!("{} ({mode:?}): {e}", s.name);
            }
        }
    }
}

/// Suites run their stages for real (latency threads at FIFO 90 on every CPU, the RTL loop
/// at FIFO 80): two at once disturb each other's stages (seen: the RTL loop never got a clean
/// window while the interrupted suite's latency stage ran), so they take turns.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn suite_smoke_end_to_end_then_resume() {
    let _g = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("out");
    let junit = tmp.path().join("junit.xml");
    let lava = tmp.path().join("result.txt");
    let prom = tmp.path().join("textfile");
    std::fs::create_dir(&prom).unwrap();
    // A shared results folder where someone planted links at every name the suite will
    // write (stage logs and the manifest): none may be written through.
    let victim = tmp.path().join("victim");
    std::fs::write(&victim, "victim\n").unwrap();
    std::fs::create_dir(&dir).unwrap();
    let planted: Vec<PathBuf> = STAGES
        .iter()
        .map(|s| s.name)
        .chain(["verdict", "report"])
        .enumerate()
        .map(|(i, s)| dir.join(format!("{:02}-{s}.log", i + 1)))
        .chain([dir.join("manifest.json")])
        .collect();
    for p in &planted {
        std::os::unix::fs::symlink(&victim, p).unwrap();
    }
    let t = Instant::now();
    let out = xrunlab()
        .args(["suite", "--smoke", "--junit"])
        .arg(&junit)
        .arg("-o")
        .arg(&dir)
        .arg("--export")
        .arg(format!("lava={}", lava.display()))
        .arg("--export")
        .arg(format!("openmetrics={}", prom.display()))
        .output()
        .unwrap();
    let took = t.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let m = manifest(&dir);
    // Every stage of the table once, in order, then the verdict and the report: none
    // silently dropped.
    let names: Vec<&str> = m.stages.iter().map(|s| s.stage.as_str()).collect();
    let mut want: Vec<&str> = STAGES.iter().map(|s| s.name).collect();
    want.extend(["verdict", "report"]);
    assert_eq!(names, want);
    assert_eq!(m.status, SuiteStatus::Complete);
    assert!(m.ended_at.is_some());
    let failed: Vec<_> = m
        .stages
        .iter()
        .filter(|s| s.status == StageStatus::Failed)
        .collect();
    assert!(failed.is_empty(), "failed stages: {failed:#?}\n{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "victim\n");
    // Each name the suite wrote is its own file now (a skipped stage writes no log).
    let written = m.stages.iter().filter_map(|s| s.log.as_ref());
    for p in written
        .map(|l| dir.join(l))
        .chain([dir.join("manifest.json")])
    {
        assert!(planted.contains(&p), "{} was not planted", p.display());
        let meta = std::fs::symlink_metadata(&p).unwrap();
        assert!(meta.is_file(), "{} is still a link", p.display());
    }
    // The machine's conditions once for the whole suite, not once per stage. (A machine
    // without any — bare metal, performance governor, PREEMPT_RT — has nothing to count.)
    let machine = xrunlab::system::Environment::capture().warnings();
    for w in machine.iter().filter(|w| !w.starts_with("no RT privilege")) {
        let head: String = w.chars().take(30).collect();
        let said = stderr.matches(&format!("warning: {head}")).count();
        assert_eq!(said, 1, "'{head}…' said {said} times:\n{stderr}");
    }
    // One progress line per stage on stderr.
    for n in &want {
        assert!(
            stderr.contains(&format!("] {n}")),
            "no progress for {n}:\n{stderr}"
        );
    }
    let by = |n: &str| m.stages.iter().find(|s| s.stage == n).unwrap();
    for s in &m.stages {
        match s.status {
            StageStatus::Ok => {
                let f = dir.join(s.file.as_ref().expect("an ok stage names its file"));
                assert!(f.exists(), "{}", f.display());
                if s.stage != "report" {
                    assert_eq!(s.argv[s.argv.len() - 2], "-o");
                    assert_eq!(Path::new(&s.argv[s.argv.len() - 1]), f);
                    let v: serde_json::Value =
                        serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
                    assert_eq!(v["status"], "complete", "{}", s.stage);
                }
                assert_eq!(s.exit_code, Some(0));
                assert!(dir.join(s.log.as_ref().unwrap()).exists());
            }
            StageStatus::Skipped => {
                let why = s.reason.as_deref().unwrap_or("");
                assert!(!why.is_empty(), "{} skipped without a reason", s.stage);
                assert!(s.file.is_none() && s.exit_code.is_none());
            }
            StageStatus::Failed => unreachable!(),
        }
    }
    for n in [
        "check",
        "latency-idle",
        "latency-stress",
        "load",
        "latencytest",
        "rtl-model",
        "rtl-virtual",
        "verdict",
        "report",
    ] {
        assert_eq!(by(n).status, StageStatus::Ok, "{n}");
    }
    let sched = by("sched");
    if is_root() {
        assert_eq!(sched.status, StageStatus::Ok);
    } else {
        assert!(sched.reason.as_deref().unwrap().contains("root"));
    }
    assert_eq!(by("event").status, StageStatus::Ok);
    // The report holds one section per stage result, kinds as the stages say.
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    let results = m
        .stages
        .iter()
        .filter(|s| s.stage != "report" && s.file.is_some())
        .count();
    assert_eq!(html.matches("<section class=\"result\"").count(), results);
    for kind in ["check", "latency", "load", "latencytest", "rtl", "event"] {
        assert!(html.contains(&format!("data-kind=\"{kind}\"")), "{kind}");
    }
    assert!(!html.to_lowercase().contains("<script"));
    // The answer comes first: the verdict's section precedes the stage table, and the
    // terminal output starts with it.
    let verdict_at = html
        .find("data-kind=\"verdict\"")
        .expect("a verdict section");
    assert!(verdict_at < html.find("<section class=\"suite\"").unwrap());
    let stdout = String::from_utf8_lossy(&out.stdout);
    // The terminal opens with the verdict's one sentence (wrapped at 80 columns).
    let v = common::read_json(
        &dir.join(
            m.stages
                .iter()
                .find(|s| s.stage == "verdict")
                .unwrap()
                .file
                .as_ref()
                .unwrap(),
        ),
    );
    let opening: Vec<&str> = stdout
        .lines()
        .take_while(|l| !l.is_empty() && !l.starts_with("next:"))
        .collect();
    assert_eq!(
        Some(opening.join(" ").as_str()),
        v["results"]["headline"].as_str(),
        "{stdout}"
    );
    // The suite's stage table heads it: what ran, and why anything did not.
    assert!(html.contains("<section class=\"suite\""));
    for s in m.stages.iter().filter(|s| s.stage != "report") {
        assert!(
            html.contains(&format!("<td>{}</td>", s.stage)),
            "{}",
            s.stage
        );
        if let Some(r) = &s.reason {
            assert!(html.contains(r.as_str()), "{r}");
        }
    }
    junit_matches(&std::fs::read_to_string(&junit).unwrap(), &m);
    // --export: a LAVA line per stage, and the metrics in the textfile directory.
    let lines = std::fs::read_to_string(&lava).unwrap();
    for s in &m.stages {
        let want = match s.status {
            StageStatus::Ok => "pass",
            StageStatus::Skipped => "skip",
            StageStatus::Failed => "fail",
        };
        assert!(
            lines.contains(&format!("suite-{} {want}\n", s.stage)),
            "{}: {lines}",
            s.stage
        );
    }
    let metrics = std::fs::read_to_string(prom.join("xrunlab.prom")).unwrap();
    assert!(
        metrics.contains("xrunlab_suite_stage{stage=\"check\",status=\"ok\"} 1\n"),
        "{metrics}"
    );
    assert!(metrics.contains("xrunlab_verdict_pass{"), "{metrics}");
    eprintln!("suite --smoke took {took:?}");

    // --resume keeps every complete result and says so; nothing is rerun.
    let before = std::fs::metadata(dir.join("02-latency-idle.json"))
        .unwrap()
        .modified()
        .unwrap();
    let out = xrunlab()
        .args(["suite", "--resume"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = manifest(&dir);
    for s in &r.stages {
        let first = by(&s.stage);
        // The verdict and the report are derived from the stages: made anew each time.
        if first.status == StageStatus::Ok && !["verdict", "report"].contains(&s.stage.as_str()) {
            assert_eq!(s.status, StageStatus::Skipped, "{}", s.stage);
            assert!(s.reason.as_deref().unwrap().contains("--resume"));
            assert_eq!(s.file, first.file);
        }
    }
    assert_eq!(by("report").status, StageStatus::Ok);
    let after = std::fs::metadata(dir.join("02-latency-idle.json"))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(before, after);
}

#[test]
fn suite_interrupted_writes_the_manifest_and_exits_3() {
    let _g = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("out");
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("xrunlab"))
        .args(["suite", "--smoke", "-q", "-o"])
        .arg(&dir)
        .spawn()
        .unwrap();
    // Ctrl-C once the first measuring stage is under way.
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(30) {
        if dir.join("02-latency-idle.log").exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: the pid is our child's.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(3));
    let m = manifest(&dir);
    assert_eq!(m.status, SuiteStatus::Interrupted);
    let stopped = m
        .stages
        .iter()
        .position(|s| s.reason.as_deref() == Some("interrupted"))
        .expect("the running stage is marked interrupted");
    assert_eq!(m.stages[stopped].status, StageStatus::Failed);
    // The child stopped as by hand: its partial result is there and says so.
    if let Some(f) = &m.stages[stopped].file {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join(f)).unwrap()).unwrap();
        assert_eq!(v["status"], "interrupted");
    }
    // Everything after it is listed (the verdict and the report too), as skipped because of
    // the interruption.
    assert_eq!(m.stages.len(), STAGES.len() + 2);
    for s in &m.stages[stopped + 1..] {
        assert_eq!(s.status, StageStatus::Skipped, "{}", s.stage);
        assert_eq!(s.reason.as_deref(), Some("suite interrupted"));
    }
}

/// `timeout -s INT T xrunlab suite …` signals the suite, then its whole group: two signals
/// in quick succession are one request. The stage under way (latency under stress) stops as
/// by hand, the manifest says interrupted, and no stressor or stressor directory is left.
#[test]
fn suite_signalled_like_gnu_timeout_still_writes_the_manifest_and_cleans_up() {
    use std::os::unix::process::CommandExt;
    let _g = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("out");
    // Stressor directories go to TMPDIR when no file class needs /var/tmp.
    let scratch = tmp.path().join("tmp");
    std::fs::create_dir(&scratch).unwrap();
    let mark = format!("XRUNLAB_SUITE_MARK={}-timeout", std::process::id());
    let (k, v) = mark.split_once('=').unwrap();
    let mut child = std::process::Command::new(bin())
        .args(["suite", "--quick", "-q", "-o"])
        .arg(&dir)
        .env(k, v)
        .env("TMPDIR", &scratch)
        .process_group(0)
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    // Once the stage's stressors run (marked processes beyond the suite and its stage).
    let t = Instant::now();
    while !(dir.join("03-latency-stress.log").exists() && common::pids_with_env(&mark).len() >= 3) {
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "the stress stage did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: our child and its process group.
    unsafe {
        libc::kill(pid, libc::SIGINT);
    }
    std::thread::sleep(Duration::from_millis(50));
    unsafe {
        libc::kill(-pid, libc::SIGINT);
    }
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("the suite did not stop");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(3), "{status:?}");
    let m = manifest(&dir);
    assert_eq!(m.status, SuiteStatus::Interrupted);
    let stage = m
        .stages
        .iter()
        .find(|s| s.stage == "latency-stress")
        .unwrap();
    assert_eq!(stage.reason.as_deref(), Some("interrupted"), "{stage:?}");
    let file = stage.file.as_ref().expect("the stage's partial result");
    assert_eq!(read_json(&dir.join(file))["status"], "interrupted");
    let gone = (0..250).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        common::pids_with_env(&mark).is_empty()
    });
    assert!(gone, "left behind: {:?}", common::pids_with_env(&mark));
    let left: Vec<_> = std::fs::read_dir(&scratch).unwrap().flatten().collect();
    assert!(left.is_empty(), "stressor directories left: {left:?}");
}

#[test]
fn suite_bad_usage_exits_2() {
    let tmp = tempfile::tempdir().unwrap();
    for args in [
        vec!["suite", "--quick", "--full"],
        vec!["suite", "--driver", "alsa"],
    ] {
        let out = xrunlab().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
    let out = xrunlab()
        .args(["suite", "--resume"])
        .arg(tmp.path().join("missing"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing"));
}

/// On a JACK server the suite's engine stages run as its clients at the server's buffer size
/// (512 here, a size none of the stage tables names), and the server is left at that size.
#[test]
fn suite_smoke_on_a_jack_server_uses_its_buffer_size() {
    let _g = serial();
    let Some(server) = require_jackd(48000, 512) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("out");
    let o = server
        .command(&bin())
        .args(["suite", "--smoke", "--driver", "jack", "-o"])
        .arg(&dir)
        .output()
        .unwrap();
    let m = manifest(&dir);
    let failed: Vec<_> = m
        .stages
        .iter()
        .filter(|s| s.status == StageStatus::Failed)
        .collect();
    assert!(
        failed.is_empty(),
        "failed stages: {failed:#?}\n{}",
        show(&o)
    );
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let file = |n: &str| {
        let s = m.stages.iter().find(|s| s.stage == n).unwrap();
        assert_eq!(s.status, StageStatus::Ok, "{n}");
        read_json(&dir.join(s.file.as_ref().unwrap()))
    };
    let load = file("load");
    assert_eq!(load["config"]["driver"], "jack", "{}", load["config"]);
    let cells = load["results"]["cells"].as_array().expect("load cells");
    assert!(!cells.is_empty());
    for c in cells {
        assert_eq!(c["buffer_frames"], 512, "{c}");
    }
    assert_eq!(file("event")["results"]["runs"][0]["driver"], "jack");
    // Nothing changed the server's size: a run without --buffer finds 512.
    let out = tmp.path().join("after.json");
    let o = server
        .command(&bin())
        .args([
            "run",
            "--driver",
            "jack",
            "--duration",
            "200ms",
            "--quiet",
            "-o",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    assert_eq!(read_json(&out)["results"]["jack"]["buffer_frames"], 512);
}

/// Issue 44: a quick suite on a JACK server decides with the engine itself — its engine
/// checks (`run-checkN`) run as the server's clients, and the verdict has a row whose
/// outcome rests on such a run (basis "measured" or "both"). The budget counts from the
/// suite's start: a smoke suite's own stages take some 30 s here (about a minute beside
/// `stress-ng --cpu 2`), so 2m leaves a slice for the engine (a quick suite's stages take 2
/// minutes and needed 3m, 165 s of the test suite's time). Nothing here asserts timing.
#[test]
fn quick_suite_on_a_jack_server_decides_with_a_measured_row() {
    let _g = serial();
    let Some(server) = require_jackd(48000, 256) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("out");
    let o = server
        .command(&bin())
        .args([
            "suite", "--smoke", "--budget", "2m", "--driver", "jack", "-o",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    let m = manifest(&dir);
    let stage = |s: &xrunlab::suite::StageRecord| s.stage.clone();
    let checks: Vec<_> = m
        .stages
        .iter()
        .filter(|s| s.stage.starts_with("run-check"))
        .collect();
    assert!(
        !checks.is_empty(),
        "no engine check among {:?}\n{}",
        m.stages.iter().map(stage).collect::<Vec<_>>(),
        show(&o)
    );
    let mut jack_runs = Vec::new();
    for c in &checks {
        assert!(
            c.argv
                .windows(2)
                .any(|w| w[0] == "--driver" && w[1] == "jack"),
            "{:?}",
            c.argv
        );
        if let Some(f) = &c.file {
            let run = read_json(&dir.join(f));
            assert_eq!(run["config"]["driver"], "jack", "{}", run["config"]);
            jack_runs.push(f.clone());
        }
    }
    let verdict = m
        .stages
        .iter()
        .find(|s| s.stage == "verdict")
        .and_then(|s| s.file.as_ref())
        .map(|f| read_json(&dir.join(f)))
        .unwrap_or_else(|| panic!("no verdict\n{}", show(&o)));
    let rows = verdict["results"]["rows"].as_array().expect("verdict rows");
    let measured = rows.iter().find(|r| {
        matches!(r["basis"].as_str(), Some("measured" | "both"))
            && r["measured"].as_array().is_some_and(|ms| {
                ms.iter().any(|m| {
                    let f = m["file"].as_str().unwrap_or_default();
                    jack_runs.iter().any(|j| f.ends_with(j.as_str()))
                })
            })
    });
    assert!(
        measured.is_some(),
        "no row decided by a jack run ({jack_runs:?}): {}\n{}",
        serde_json::to_string_pretty(rows).unwrap(),
        show(&o)
    );
}

/// The JUnit file parses as XML and says what the manifest and the verdict say: a test case
/// per stage with its status, a case per buffer size of the verdict and one for the
/// recommendation, and counts that add up.
fn junit_matches(xml: &str, m: &xrunlab::suite::Manifest) {
    let doc = roxmltree::Document::parse(xml).unwrap_or_else(|e| panic!("{e}\n{xml}"));
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    let suites: Vec<_> = root.children().filter(|n| n.is_element()).collect();
    assert_eq!(suites.len(), 2, "{xml}");
    let cases = |s: &roxmltree::Node| -> Vec<(String, &'static str)> {
        s.children()
            .filter(|n| n.has_tag_name("testcase"))
            .map(|c| {
                let kind = if c.children().any(|x| x.has_tag_name("failure")) {
                    "failure"
                } else if c.children().any(|x| x.has_tag_name("skipped")) {
                    "skipped"
                } else {
                    "pass"
                };
                (c.attribute("name").unwrap().to_string(), kind)
            })
            .collect()
    };
    let stages = cases(&suites[0]);
    let want: Vec<(String, &str)> = m
        .stages
        .iter()
        .map(|s| {
            (
                s.stage.clone(),
                match s.status {
                    StageStatus::Ok => "pass",
                    StageStatus::Failed => "failure",
                    StageStatus::Skipped => "skipped",
                },
            )
        })
        .collect();
    assert_eq!(stages, want);
    let verdict = cases(&suites[1]);
    let v = common::read_json(std::path::Path::new(
        &m.stages.iter().find(|s| s.stage == "verdict").unwrap().argv[3],
    ));
    let rows = v["results"]["rows"].as_array().unwrap();
    assert_eq!(verdict.len(), rows.len() + 1);
    for (c, r) in verdict.iter().zip(rows) {
        assert!(c.0.starts_with(&format!("{} frames", r["buffer_frames"])));
        let want = match &r["meets_target"] {
            serde_json::Value::Bool(true) => "pass",
            serde_json::Value::Bool(false) => "failure",
            _ => "skipped",
        };
        assert_eq!(c.1, want, "{c:?}");
    }
    for s in &suites {
        let n = cases(s);
        let count = |k: &str| n.iter().filter(|c| c.1 == k).count().to_string();
        assert_eq!(s.attribute("tests").unwrap(), n.len().to_string());
        assert_eq!(s.attribute("failures").unwrap(), count("failure"));
        assert_eq!(s.attribute("skipped").unwrap(), count("skipped"));
    }
}

/// Fill the file system under `dir` (a small tmpfs): write zeros until it refuses.
fn fill(dir: &Path) {
    use std::io::Write;
    let mut f = std::fs::File::create(dir.join("filler")).unwrap();
    let chunk = [0u8; 4096];
    while f.write_all(&chunk).is_ok() {}
    // The last pages a partial write took are the filesystem's too.
    let _ = f.flush();
}

/// Start `suite --smoke` into `fs/out`, fill the disk once `ready` (file names) are there,
/// and return its exit status, its stderr and the manifest's text.
fn suite_on_a_disk_that_fills(
    fs: &Path,
    ready: &[&str],
) -> (std::process::ExitStatus, String, String) {
    let dir = fs.join("out");
    let mut child = std::process::Command::new(bin())
        .args(["suite", "--smoke", "--no-forensics", "-q", "-o"])
        .arg(&dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while !ready.iter().all(|f| dir.join(f).exists()) {
        assert!(t.elapsed() < Duration::from_secs(30), "no {ready:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
    fill(fs);
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("the suite did not stop on a full disk");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let text = std::fs::read_to_string(dir.join("manifest.json")).unwrap();
    (status, err, text)
}

/// A suite whose disk fills stops with its manifest saying so: status failed with the write
/// error as the reason, an end time, exit 3; the space it kept for that last rewrite is given
/// back. Before, the manifest said "running" forever.
#[test]
fn a_suite_on_a_full_disk_ends_its_manifest_failed_with_the_reason() {
    let _g = serial();
    let Some(fs) = common::tmpfs::require_small_fs("1m") else {
        return;
    };
    // Once the space kept for the manifest's last rewrite is there too.
    let (status, err, text) =
        suite_on_a_disk_that_fills(fs.path(), &["manifest.json", ".manifest.reserve"]);
    let m: Manifest = serde_json::from_str(&text).expect("a whole manifest");
    eprintln!("{}", m.reason.as_deref().unwrap_or_default());
    assert_eq!(m.status, SuiteStatus::Failed, "{err}\n{text}");
    let reason = m.reason.as_deref().unwrap_or_default();
    assert!(reason.contains("No space left"), "{reason}");
    assert!(m.ended_at.is_some());
    assert_eq!(status.code(), Some(3), "{err}");
    assert!(err.contains(reason), "{err}");
    assert!(!fs.path().join("out/.manifest.reserve").exists());
}

/// With no room even for the space kept for it, the manifest cannot be rewritten: stderr
/// says so (and that it still says running), exit 3.
#[test]
fn a_manifest_that_cannot_be_rewritten_is_reported_on_stderr() {
    let _g = serial();
    // Room for the first manifest, not for the reserve beside it.
    let Some(fs) = common::tmpfs::require_small_fs("48k") else {
        return;
    };
    let (status, err, text) = suite_on_a_disk_that_fills(fs.path(), &["manifest.json"]);
    assert_eq!(status.code(), Some(3), "{err}");
    let m: Manifest = serde_json::from_str(&text).expect("a whole manifest");
    assert_eq!(m.status, SuiteStatus::Running, "{text}");
    assert!(err.contains("could not be rewritten"), "{err}");
    assert!(err.contains("still says running"), "{err}");
}

/// A user without real-time rights (here `nobody`, RLIMIT_RTPRIO 0, no CAP_SYS_NICE, no
/// memlock): the suite says in one pre-flight what is missing with both remedies, measures
/// anyway with SCHED_OTHER, and its verdict is labelled not real-time.
#[test]
fn suite_without_rt_rights_measures_and_labels_its_verdict() {
    let _g = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("out");
    let mut cmd = if is_root() {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let mut c = std::process::Command::new("setpriv");
        c.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(bin());
        c
    } else if xrunlab::system::probe::try_rt_priority().obtained {
        let why = "this user has real-time rights and cannot drop them without root";
        assert!(std::env::var_os("CI").is_none(), "{why}");
        eprintln!("skipped: {why}");
        return;
    } else {
        std::process::Command::new(bin())
    };
    let out = cmd
        .args(["suite", "--smoke", "--no-forensics", "-o"])
        .arg(&dir)
        .env_remove("NO_COLOR")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    // One pre-flight, every missing right in it, both remedies.
    assert_eq!(err.matches("pre-flight:").count(), 1, "{err}");
    let pre = &err[err.find("pre-flight:").unwrap()..];
    assert!(
        pre.contains("SCHED_FIFO") && pre.contains("sudo xrunlab suite"),
        "{err}"
    );
    assert!(pre.contains("--policy other"), "{err}");
    let m = manifest(&dir);
    let by = |n: &str| m.stages.iter().find(|s| s.stage == n).unwrap();
    for n in ["latency-idle", "latency-stress", "verdict"] {
        assert_eq!(
            by(n).status,
            StageStatus::Ok,
            "{n}: {:?}\n{err}",
            by(n).reason
        );
    }
    assert!(by("latency-stress")
        .argv
        .windows(2)
        .any(|w| w == ["--policy", "other"]));
    let v = read_json(&dir.join(by("verdict").file.as_ref().unwrap()));
    let headline = v["results"]["headline"].as_str().unwrap();
    assert!(
        headline.starts_with("Not real-time (what an audio thread without RT priority gets"),
        "{headline}"
    );
    assert!(stdout.starts_with("Not real-time"), "{stdout}");
}
