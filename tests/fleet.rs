//! Fleet outputs checked by the real tools that read them: `promtool check metrics`, a
//! node exporter serving a `--textfile` export scraped by a Prometheus server (both started
//! here on loopback ports, stopped at the end), the KCIDB schema of `kcidb-io` (installed
//! from PyPI into a venv under target/), and the bad inputs of `export` and `--export`;
//! `watch --metrics` scraped by a Prometheus server while a crowd of slow clients holds
//! connections open, and ended by Ctrl-C with them open.

mod common;

use common::{require, which, xrunlab};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every committed result file (each kind), one by one.
fn fixture_files() -> Vec<PathBuf> {
    let mut v = Vec::new();
    for d in ["results", "verdict", "forensics"] {
        let dir = root().join("tests/fixtures").join(d);
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "json") {
                v.push(p);
            }
        }
    }
    v.sort();
    v
}

fn export(args: &[&str]) -> String {
    let o = xrunlab().arg("export").args(args).output().unwrap();
    assert!(o.status.success(), "{}", common::show(&o));
    String::from_utf8(o.stdout).unwrap()
}

/// A verdict over the verdict fixtures, written to `dir`.
fn verdict_file(dir: &Path) -> PathBuf {
    let v = dir.join("verdict.json");
    let o = xrunlab()
        .args(["verdict", "tests/fixtures/verdict", "-q", "-o"])
        .arg(&v)
        .current_dir(root())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::show(&o));
    v
}

fn promtool_check(text: &str, what: &str) {
    let mut c = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let o = c.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "promtool rejects the metrics of {what}: {}{}\n{text}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn promtool_accepts_the_metrics_of_every_result_kind() {
    if !require(
        which("promtool").is_some(),
        "promtool (Debian package prometheus)",
    ) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let v = verdict_file(tmp.path());
    let mut all: Vec<String> = vec![v.display().to_string()];
    for f in fixture_files() {
        let text = export(&["--format", "openmetrics", f.to_str().unwrap()]);
        promtool_check(&text, &f.display().to_string());
        all.push(f.display().to_string());
    }
    let text = export(
        &[
            &["--format", "openmetrics"],
            &all.iter().map(String::as_str).collect::<Vec<_>>()[..],
        ]
        .concat(),
    );
    promtool_check(&text, "every fixture and a verdict together");
    assert!(text.contains("xrunlab_verdict_pass{"), "{text}");
}

/// A loopback port nobody listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The body of `GET path` on 127.0.0.1:port, or None while nothing answers.
fn get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut r = String::new();
    s.read_to_string(&mut r).ok()?;
    let (head, body) = r.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.0 200")
        .then_some(())
        .or_else(|| head.starts_with("HTTP/1.1 200").then_some(()))?;
    Some(body.to_string())
}

/// A daemon of the test's own, killed and reaped when dropped.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `n` connections to 127.0.0.1:port kept open by a thread until dropped, each sending one
/// byte of a request head that never ends every 250 ms, and opened again when the server
/// closes it (a slowloris).
struct Crowd {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Crowd {
    fn start(port: u16, n: usize) -> Crowd {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let open = move || {
            let s = TcpStream::connect(("127.0.0.1", port)).ok()?;
            s.set_nonblocking(true).ok()?;
            Some(s)
        };
        let mut socks: Vec<Option<TcpStream>> = (0..n).map(|_| open()).collect();
        let thread = std::thread::spawn(move || {
            let head = b"GET /metrics HTTP/1.1\r\nX-Slow: ";
            let mut i = 0;
            while !flag.load(Ordering::Relaxed) {
                for s in &mut socks {
                    let byte = head.get(i).copied().unwrap_or(b'a');
                    // Open while there is nothing to read: an answer (408) or EOF ends it.
                    let alive = s.as_mut().is_some_and(|c| {
                        let mut buf = [0u8; 256];
                        let idle = matches!(c.read(&mut buf),
                            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
                        idle && c.write(&[byte]).is_ok()
                    });
                    if !alive {
                        *s = open();
                    }
                }
                i += 1;
                std::thread::sleep(Duration::from_millis(250));
            }
        });
        Crowd {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Crowd {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn wait_for(limit: Duration, mut f: impl FnMut() -> Option<String>) -> Option<String> {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if let Some(v) = f() {
            return Some(v);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    None
}

/// A PromQL query's single value, once the server has one.
fn query(port: u16, q: &str) -> Option<f64> {
    let r = series(port, q)?;
    if r.len() != 1 {
        return None;
    }
    r[0]["value"][1].as_str()?.parse().ok()
}

/// The series Prometheus' query API answers `q` with.
fn series(port: u16, q: &str) -> Option<Vec<serde_json::Value>> {
    let enc: String = q
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let body = get(port, &format!("/api/v1/query?query={enc}"))?;
    let mut v: serde_json::Value = serde_json::from_str(&body).ok()?;
    match v["data"]["result"].take() {
        serde_json::Value::Array(a) => Some(a),
        _ => None,
    }
}

/// The last sample of a range query `q` (e.g. `metric[1m]`): its scrape time, Unix seconds,
/// and its value.
fn last_sample(port: u16, q: &str) -> Option<(f64, f64)> {
    let r = series(port, q)?;
    let last = r.first()?["values"].as_array()?.last()?;
    Some((last[0].as_f64()?, last[1].as_str()?.parse().ok()?))
}

#[test]
fn prometheus_scrapes_a_textfile_export_through_the_node_exporter() {
    let have = ["prometheus", "prometheus-node-exporter"]
        .iter()
        .all(|p| which(p).is_some());
    if !require(
        have,
        "prometheus and prometheus-node-exporter (Debian packages)",
    ) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let textdir = tmp.path().join("textfile");
    std::fs::create_dir(&textdir).unwrap();
    let o = xrunlab()
        .args(["export", "--textfile"])
        .arg(&textdir)
        .arg(root().join("tests/fixtures/results/run.json"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::show(&o));
    let names: Vec<String> = std::fs::read_dir(&textdir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, ["xrunlab.prom"], "only the renamed file is left");

    let ne_port = free_port();
    let _ne = Daemon(
        Command::new("prometheus-node-exporter")
            .arg(format!("--web.listen-address=127.0.0.1:{ne_port}"))
            .args(["--collector.disable-defaults", "--collector.textfile"])
            .arg(format!(
                "--collector.textfile.directory={}",
                textdir.display()
            ))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start prometheus-node-exporter"),
    );
    let metrics = wait_for(Duration::from_secs(20), || get(ne_port, "/metrics"))
        .expect("the node exporter answers on its port");
    assert!(
        metrics.contains("xrunlab_cycles_total{"),
        "the node exporter serves the textfile:\n{metrics}"
    );
    assert!(metrics.contains("node_textfile_mtime_seconds{file="));
    assert!(
        metrics.lines().any(|l| l == "node_textfile_scrape_error 0"),
        "the textfile collector reports an error:\n{metrics}"
    );

    let prom_port = free_port();
    let cfg = tmp.path().join("prometheus.yml");
    std::fs::write(
        &cfg,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: board\n    static_configs:\n      - targets: ['127.0.0.1:{ne_port}']\n"
        ),
    )
    .unwrap();
    let _prom = Daemon(
        Command::new("prometheus")
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                tmp.path().join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{prom_port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start prometheus"),
    );
    // run.json: 15 late wake-ups among its 17 xruns, 2226 cycles.
    let q = "xrunlab_xruns_total{job=\"board\",cause=\"late-wakeup\",period=\"64\"}";
    let late = wait_for(Duration::from_secs(60), || {
        query(prom_port, q).map(|v| v.to_string())
    })
    .expect("Prometheus answers the query after scraping the node exporter");
    assert_eq!(late, "15");
    assert_eq!(
        query(prom_port, "sum(xrunlab_xruns_total{job=\"board\"})"),
        Some(17.0)
    );
    assert_eq!(
        query(prom_port, "xrunlab_cycles_total{job=\"board\"}"),
        Some(2226.0)
    );
    // The staleness alert's input: the textfile's age is known to the server.
    assert!(query(
        prom_port,
        "time() - node_textfile_mtime_seconds{file=~\".*xrunlab.prom\"}"
    )
    .is_some_and(|age| (0.0..600.0).contains(&age)));
}

/// A venv under target/ with kcidb-io, made once; None (with the reason) when it cannot be.
fn kcidb_python() -> Result<PathBuf, String> {
    let venv = root().join("target/kcidb-venv");
    let py = venv.join("bin/python");
    let ok = |py: &Path| {
        Command::new(py)
            .args(["-c", "import kcidb_io"])
            .status()
            .is_ok_and(|s| s.success())
    };
    if ok(&py) {
        return Ok(py);
    }
    let s = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .map_err(|e| format!("python3: {e}"))?;
    if !s.success() {
        return Err("python3 -m venv failed (Debian: python3-venv)".into());
    }
    let o = Command::new(venv.join("bin/pip"))
        .args(["install", "-q", "kcidb-io"])
        .output()
        .map_err(|e| format!("pip: {e}"))?;
    if !o.status.success() || !ok(&py) {
        return Err(format!(
            "pip install kcidb-io failed: {}",
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    Ok(py)
}

/// kcidb-io's verdict on `file`: Ok, or the validation error.
fn kcidb_validate(py: &Path, file: &Path) -> Result<(), String> {
    let o = Command::new(py)
        .args([
            "-c",
            "import json,sys,kcidb_io\nkcidb_io.schema.LATEST.validate(json.load(open(sys.argv[1])))",
        ])
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
fn kcidb_output_validates_against_the_kcidb_io_schema() {
    let py = kcidb_python();
    if !require(
        py.is_ok(),
        &format!("kcidb-io from PyPI: {:?}", py.as_ref().err()),
    ) {
        return;
    }
    let py = py.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let v = verdict_file(tmp.path());
    let out = tmp.path().join("kcidb.json");
    let o = xrunlab()
        .args(["export", "--format", "kcidb", "--origin", "test_lab", "-q"])
        .arg(root().join("tests/fixtures/results"))
        .arg(root().join("tests/fixtures/forensics/run-paper.json"))
        .arg(&v)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::show(&o));
    kcidb_validate(&py, &out).unwrap();
    let doc: serde_json::Value = common::read_json(&out);
    let tests = doc["tests"].as_array().unwrap();
    assert!(tests
        .iter()
        .any(|t| t["status"] == "FAIL" && t["number"]["unit"] == "xruns"));
    assert!(tests
        .iter()
        .any(|t| t["status"] == "PASS" && t["number"]["unit"] == "s"));
    // The validator can fail: a status outside the schema's list is refused.
    let mut bad = doc.clone();
    bad["tests"][0]["status"] = "BOGUS".into();
    let badf = tmp.path().join("bad.json");
    std::fs::write(&badf, bad.to_string()).unwrap();
    assert!(kcidb_validate(&py, &badf).is_err());
}

#[test]
fn lava_lines_are_well_formed() {
    let tmp = tempfile::tempdir().unwrap();
    let v = verdict_file(tmp.path());
    let text = export(&[
        "--format",
        "lava",
        root().join("tests/fixtures/results").to_str().unwrap(),
        v.to_str().unwrap(),
    ]);
    let mut seen = std::collections::HashSet::new();
    for l in text.lines() {
        let f: Vec<&str> = l.split(' ').collect();
        assert!(f.len() == 2 || f.len() == 4, "{l}");
        assert!(
            f[0].chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
            "{l}"
        );
        assert!(["pass", "fail", "skip"].contains(&f[1]), "{l}");
        if f.len() == 4 {
            assert!(f[2].parse::<f64>().is_ok_and(f64::is_finite), "{l}");
            assert!(!f[3].is_empty(), "{l}");
        }
        assert!(seen.insert(f[0].to_string()), "{} twice", f[0]);
    }
    assert!(text.contains("\nrun-virtual-64-frames-idle-xruns fail 17 xruns\n"));
}

#[test]
fn an_unknown_format_is_refused_with_the_list() {
    let o = xrunlab()
        .args([
            "export",
            "--format",
            "csv",
            "tests/fixtures/results/run.json",
        ])
        .current_dir(root())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", common::show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("openmetrics") && err.contains("kcidb") && err.contains("lava"),
        "{err}"
    );
    let o = xrunlab()
        .args(["suite", "--smoke", "--export", "csv=x.csv"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", common::show(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("openmetrics"));
}

/// A directory nobody may write: read-only tmpfs as root (root ignores modes), mode 0555
/// otherwise. The guard unmounts it.
struct ReadOnlyDir {
    dir: tempfile::TempDir,
    mounted: bool,
}

impl ReadOnlyDir {
    fn new() -> ReadOnlyDir {
        let dir = tempfile::tempdir().unwrap();
        let mounted = common::is_root()
            && Command::new("mount")
                .args(["-t", "tmpfs", "-o", "ro,size=64k", "tmpfs"])
                .arg(dir.path())
                .status()
                .is_ok_and(|s| s.success());
        if !mounted {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o555)).unwrap();
        }
        ReadOnlyDir { dir, mounted }
    }
}

impl Drop for ReadOnlyDir {
    fn drop(&mut self) {
        if self.mounted {
            let _ = Command::new("umount").arg(self.dir.path()).status();
        } else {
            use std::os::unix::fs::PermissionsExt;
            let _ =
                std::fs::set_permissions(self.dir.path(), std::fs::Permissions::from_mode(0o755));
        }
    }
}

#[test]
fn an_unwritable_directory_is_refused_before_anything_runs() {
    let ro = ReadOnlyDir::new();
    let o = xrunlab()
        .args(["export", "--textfile"])
        .arg(ro.dir.path())
        .arg("tests/fixtures/results/run.json")
        .current_dir(root())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", common::show(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not writable"));
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("suite");
    let started = Instant::now();
    let o = xrunlab()
        .args(["suite", "--smoke", "-o"])
        .arg(&out)
        .arg("--export")
        .arg(format!("openmetrics={}", ro.dir.path().display()))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", common::show(&o));
    assert!(!out.exists(), "no stage ran");
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// The `run: steps:` of a LAVA test definition (its `- ` lines after `steps:`).
fn lava_steps(yaml: &str) -> Vec<String> {
    yaml.lines()
        .skip_while(|l| l.trim() != "steps:")
        .skip(1)
        .map_while(|l| l.trim().strip_prefix("- ").map(str::to_string))
        .collect()
}

#[test]
fn the_lava_definitions_steps_send_well_formed_test_cases() {
    let repo = root();
    let yaml = std::fs::read_to_string(repo.join("contrib/lava/xrunlab-suite.yaml")).unwrap();
    let steps = lava_steps(&yaml);
    assert!(steps.len() >= 2, "{steps:?}");
    // A suite directory as `suite` leaves it: results, and a manifest with a skipped stage.
    let tmp = tempfile::tempdir().unwrap();
    let suite = tmp.path().join("suite");
    std::fs::create_dir(&suite).unwrap();
    for f in ["latency.json", "run.json", "rtl.json"] {
        std::fs::copy(repo.join("tests/fixtures/results").join(f), suite.join(f)).unwrap();
    }
    let mut m: serde_json::Value = serde_json::from_str(&common::manifest_listing(&[
        "latency.json",
        "run.json",
        "rtl.json",
    ]))
    .unwrap();
    m["stages"].as_array_mut().unwrap().push(serde_json::json!({
        "stage": "sched", "argv": [], "status": "skipped", "reason": "not root", "note": null,
        "exit_code": null, "duration_s": 0.0, "file": null, "log": null}));
    std::fs::write(suite.join("manifest.json"), m.to_string()).unwrap();
    let text = run_lava_steps(&steps, &suite, &tmp.path().join("output"));
    let lines: Vec<&str> = text.lines().collect();
    for want in [
        "lava-test-case suite-s0 --result pass",
        "lava-test-case suite-sched --result skip",
        "lava-test-case run-virtual-64-frames-idle-xruns --result fail --measurement 17 --units xruns",
        "lava-test-case latency-idle-max-latency --result pass --measurement 13052.441 --units us",
    ] {
        assert!(lines.contains(&want), "{want} missing:\n{text}");
    }
    // And as a board runs it: no RESULTS, a fresh `suite --smoke` measured by the steps.
    let text = run_lava_steps(&steps, Path::new(""), &tmp.path().join("fresh"));
    assert!(
        text.lines()
            .any(|l| l.starts_with("lava-test-case suite-check --result ")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("lava-test-case verdict-min-buffer --result ")),
        "{text}"
    );
}

/// The definition's steps with RESULTS (empty: a suite is measured) into OUTPUT: the
/// `lava-test-case` calls they print, each checked for its form and against result.txt.
fn run_lava_steps(steps: &[String], results: &Path, out: &Path) -> String {
    let o = Command::new("sh")
        .arg("-c")
        .arg(steps.join(" && "))
        .current_dir(root())
        .env("SUITE_ARGS", "--smoke")
        .env("RESULTS", results)
        .env("OUTPUT", out)
        .env("XRUNLAB", env!("CARGO_BIN_EXE_xrunlab"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::show(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    let result_txt = std::fs::read_to_string(out.join("result.txt")).unwrap();
    assert_eq!(text.lines().count(), result_txt.lines().count());
    assert!(!text.is_empty());
    for l in text.lines() {
        let f: Vec<&str> = l.split(' ').collect();
        assert_eq!(f[0], "lava-test-case", "{l}");
        assert!(
            f[1].chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
            "{l}"
        );
        assert_eq!(f[2], "--result", "{l}");
        assert!(["pass", "fail", "skip"].contains(&f[3]), "{l}");
        match f.len() {
            4 => {}
            8 => {
                assert_eq!((f[4], f[6]), ("--measurement", "--units"), "{l}");
                assert!(f[5].parse::<f64>().is_ok(), "{l}");
            }
            _ => panic!("not a lava-test-case call: {l}"),
        }
    }
    text
}

#[test]
fn the_alert_rules_fire_on_rising_xruns_and_stale_results() {
    if !require(
        which("promtool").is_some(),
        "promtool (Debian package prometheus)",
    ) {
        return;
    }
    let dir = root().join("contrib/prometheus");
    for args in [
        ["check", "rules", "xrunlab.rules.yml"],
        ["test", "rules", "xrunlab.rules.test.yml"],
    ] {
        let o = Command::new("promtool")
            .args(args)
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "promtool {args:?}: {}",
            common::show(&o)
        );
    }
}

/// A JACK client of the test's own that runs 3 periods long in one cycle of every 94
/// (about twice a second at 256/48000) until `stop` is set: an xrun source that can be
/// silenced without leaving the graph (which would be a graph change of its own).
struct Slow {
    n: u64,
    spin: Duration,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl jack::ProcessHandler for Slow {
    fn process(&mut self, _: &jack::Client, _: &jack::ProcessScope) -> jack::Control {
        self.n += 1;
        if self.n.is_multiple_of(94) && !self.stop.load(std::sync::atomic::Ordering::Relaxed) {
            let t = Instant::now();
            while t.elapsed() < self.spin {
                std::hint::spin_loop();
            }
        }
        jack::Control::Continue
    }
}

#[test]
fn prometheus_scrapes_watch_metrics_and_holds_the_results_xrun_count() {
    use common::servers::{require_jackd, AudioServer};
    use std::sync::atomic::{AtomicBool, Ordering};
    if !require(
        which("prometheus").is_some() && which("promtool").is_some(),
        "prometheus and promtool (Debian package prometheus)",
    ) {
        return;
    }
    let Some(server) = require_jackd(48000, 256) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (port, prom_port) = (free_port(), free_port());
    let cfg = tmp.path().join("prometheus.yml");
    std::fs::write(
        &cfg,
        format!(
            "global:\n  scrape_interval: 500ms\n  scrape_timeout: 400ms\nscrape_configs:\n  - job_name: watch\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
        ),
    )
    .unwrap();
    let _prom = Daemon(
        Command::new("prometheus")
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                tmp.path().join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{prom_port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start prometheus"),
    );
    // A cold Prometheus takes seconds to open its TSDB; the watch's clock starts once it
    // scrapes, so that the live count below is not waited for out of the watch's time.
    wait_for(Duration::from_secs(30), || get(prom_port, "/-/ready"))
        .expect("Prometheus answers /-/ready within 30 s");

    // This test is the only one here that opens a JACK client in-process.
    server.apply_env_to_self();
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let (c, _) = jack::Client::new("xrl-slowpoke", jack::ClientOptions::NO_START_SERVER)
        .expect("the slow client opens");
    let slow = Slow {
        n: 0,
        spin: Duration::from_micros(3 * 5333),
        stop: stop.clone(),
    };
    let client = c
        .activate_async((), slow)
        .expect("the slow client activates");

    let textdir = tmp.path().join("textfile");
    std::fs::create_dir(&textdir).unwrap();
    let out = tmp.path().join("watch.json");
    let started = Instant::now();
    let watch = server
        .command(&common::bin())
        .args(["watch", "--duration", "12s", "--interval", "1s"])
        .arg(format!("--server=jack:{}", server.name))
        .arg(format!("--metrics=127.0.0.1:{port}"))
        .arg("--textfile")
        .arg(&textdir)
        .arg("-o")
        .arg(&out)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let body = wait_for(Duration::from_secs(5), || get(port, "/metrics"))
        .expect("watch --metrics answers on its port");
    let answered = started.elapsed();
    // Prometheus scrapes (400 ms timeout) beside 200 slow clients for the whole watch.
    let crowd = Crowd::start(port, 200);
    promtool_check(&body, "watch --metrics");
    assert!(
        body.contains("xrunlab_watch_xruns_total{server=\"jackd2\""),
        "{body}"
    );

    // Live: Prometheus holds a count above zero while the watch still runs.
    let q = "xrunlab_watch_xruns_total{job=\"watch\"}";
    let live = wait_for(Duration::from_secs(6), || {
        query(prom_port, q)
            .filter(|v| *v > 0.0)
            .map(|v| v.to_string())
    });
    // Then no more injected xruns: the last scrapes, every 500 ms over the rest of the watch
    // (3 s or more), see the count the watch ends with.
    stop.store(true, Ordering::Relaxed);
    let quiet_from = started.elapsed();
    let o = watch.wait_with_output().unwrap();
    drop(crowd);
    drop(client);
    assert_eq!(o.status.code(), Some(0), "{}", common::show(&o));
    let live: f64 = live
        .expect("Prometheus scraped a live xrun count above 0 within 6 s")
        .parse()
        .unwrap();
    assert!(
        quiet_from < Duration::from_secs(9),
        "the injections stopped {quiet_from:?} into a 12 s watch (its metrics answered \
         {answered:?} into it)"
    );
    let j = common::read_json(&out);
    let r = &j["results"];
    let total = r["xruns"].as_array().unwrap().len() as u64 + common::u(&r["xruns_lost"]);
    assert!(
        live >= 1.0 && live <= total as f64,
        "{live} live, {total} at the end"
    );
    // Prometheus' last scrape holds every xrun the watch had noticed by then: those up to
    // half a second before it surely (the watcher polls every 100 ms; this guest's spikes
    // are 10-20 ms), none after the scrape's 400 ms timeout. An xrun of the host's in the
    // watch's last half second, after that scrape, is in the result only.
    let (ts, last) = last_sample(prom_port, "xrunlab_watch_xruns_total{job=\"watch\"}[1m]")
        .expect("Prometheus holds the watch's xrun count");
    let secs = |rfc: &str| {
        humantime::parse_rfc3339_weak(rfc)
            .unwrap()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
    };
    let xruns = r["xruns"].as_array().unwrap();
    let by = |t: f64| {
        xruns
            .iter()
            .filter(|x| secs(x["wall"].as_str().unwrap()) <= t)
            .count() as f64
    };
    assert!(
        by(ts - 0.5) <= last && last <= by(ts + 0.4) + common::u(&r["xruns_lost"]) as f64,
        "Prometheus' last scrape ({last} at {ts:.3}) against the result's xruns noticed by \
         then ({} to {} of {total})\n{}",
        by(ts - 0.5),
        by(ts + 0.4),
        common::show(&o)
    );
    // And it scraped until the watch ended (ended_at has whole seconds).
    assert!(
        ts >= secs(j["ended_at"].as_str().unwrap()) - 2.0,
        "the last scrape at {ts:.3}, the watch ended at {}",
        j["ended_at"]
    );
    // The endpoint ended with the watch; the textfile holds the same count.
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
    let text = std::fs::read_to_string(textdir.join("xrunlab.prom")).unwrap();
    promtool_check(&text, "watch --textfile");
    assert!(
        text.lines()
            .any(|l| l.starts_with("xrunlab_watch_xruns_total{")
                && l.ends_with(&format!(" {total}"))),
        "{text}"
    );
}

#[test]
fn ctrl_c_ends_a_watch_at_once_with_its_result_while_slow_clients_hold_its_metrics() {
    use common::servers::{require_jackd, AudioServer};
    let Some(server) = require_jackd(48000, 256) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (port, out) = (free_port(), tmp.path().join("watch.json"));
    let watch = server
        .command(&common::bin())
        .args(["watch", "--server"])
        .arg(format!("jack:{}", server.name))
        .arg(format!("--metrics=127.0.0.1:{port}"))
        .arg("-o")
        .arg(&out)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(Duration::from_secs(10), || get(port, "/metrics"))
        .expect("watch --metrics answers on its port");
    let crowd = Crowd::start(port, 200);
    std::thread::sleep(Duration::from_secs(1));
    let beside = get(port, "/metrics");
    let sent = Instant::now();
    // SAFETY: kill(2) on our own child's pid, which it still is until waited for.
    unsafe { libc::kill(watch.id() as i32, libc::SIGINT) };
    let o = watch.wait_with_output().unwrap();
    let took = sent.elapsed();
    drop(crowd);
    assert!(
        beside.is_some(),
        "a scrape beside 200 slow clients got no answer"
    );
    // The old endpoint waited for its client: a minute. 1 s is the aim; the bound is generous.
    assert!(
        took < Duration::from_secs(5),
        "the watch ended {took:?} after SIGINT"
    );
    assert_eq!(o.status.code(), Some(3), "{}", common::show(&o));
    let j = common::read_json(&out);
    assert_eq!(j["status"], "interrupted", "{j}");
}

#[test]
fn a_metrics_port_in_use_is_refused_before_attaching() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    // No such server: exit 2 (not 3) shows the port was refused before any attaching.
    let o = xrunlab()
        .args(["watch", "--server", "jack:xrl-nobody-here", "--metrics"])
        .arg(port.to_string())
        .env("JACK_NO_START_SERVER", "1")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", common::show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("127.0.0.1:{port}: the port is in use")),
        "{err}"
    );
    let o = xrunlab()
        .args(["watch", "--metrics", "somewhere"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", common::show(&o));
}
