//! LV2 hosting through the binary, on real third-party plugins from Debian's packages
//! (installed by scripts/install-deps) and on fixtures in tests/fixtures/lv2:
//! - each real plugin runs in `run` on the virtual driver and makes sound (not silence, not
//!   NaN), and the result names it;
//! - each runs in a short load grid on the sim driver with its cost measured by `plugins
//!   bench`, where the maximum is then exact;
//! - every bad input the issue lists exits with its code and a message that says what to do;
//! - a plugin that crashes takes xrunlab with it, naming the plugin on stderr, and the
//!   stressors xrunlab started die too;
//! - hostile plugin data and code (tests/fixtures/lv2-hostile) are refused, capped, watched.

mod common;
use common::{pids_with_env, require, show, xrunlab};
use std::path::PathBuf;
use std::process::{Command, Stdio};

const AMP: &str = "http://plugin.org.uk/swh-plugins/amp";
const ZAMCOMP: &str = "urn:zamaudio:ZamComp";
const HALL: &str = "https://github.com/michaelwillis/dragonfly-reverb";
const LIGHT: &str = "urn:xrunlab:reverbDesigner-light";
const HEAVY: &str = "urn:xrunlab:reverbDesigner-heavy";
const EPIANO: &str = "http://drobilla.net/plugins/mda/EPiano";

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lv2")
}

/// The fixtures first, then lilv's default directories (where Debian's packages and
/// scripts/build-reverb-designer put theirs).
fn lv2_path() -> String {
    let home = std::env::var("HOME").unwrap_or_default();
    format!(
        "{}:{home}/.lv2:/usr/local/lib/lv2:/usr/lib/lv2",
        fixtures().display()
    )
}

fn cmd() -> assert_cmd::Command {
    let mut c = xrunlab();
    c.env("LV2_PATH", lv2_path());
    c
}

/// `run --json` of `chain` on the virtual driver for `duration`.
fn run_virtual(chain: &str, duration: &str) -> std::process::Output {
    cmd()
        .args(["-q", "--json", "run", "--driver", "virtual"])
        .args(["--duration", duration, "--chain", chain])
        .output()
        .unwrap()
}

/// Whether `uri` is installed (under CI its absence fails the test: install-deps installs
/// every plugin used here).
fn installed(uri: &str, package: &str) -> bool {
    let ok = cmd()
        .args(["-q", "plugins", "show", uri])
        .output()
        .unwrap()
        .status
        .success();
    require(ok, &format!("LV2 plugin {uri} ({package})"))
}

fn json(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}\n{}", show(o)))
}

#[test]
fn real_plugins_make_sound_in_run_on_the_virtual_driver() {
    let cases = [
        // No required feature, mono in and out (mapped onto both channels).
        (AMP, "swh-lv2", format!("lv2:{AMP}(gain=-6)")),
        // DPF: options + urid:map.
        (ZAMCOMP, "zam-plugins", format!("lv2:{ZAMCOMP}")),
        // DPF with the worker, by name.
        (
            HALL,
            "dragonfly-reverb-lv2",
            "lv2:Dragonfly Hall Reverb".into(),
        ),
        // The Raspberry Pi 4 study's own Faust plugin.
        (
            LIGHT,
            "scripts/build-reverb-designer",
            format!("lv2:{LIGHT}"),
        ),
        (
            HEAVY,
            "scripts/build-reverb-designer",
            format!("lv2:{HEAVY}"),
        ),
    ];
    for (uri, package, element) in cases {
        if !installed(uri, package) {
            continue;
        }
        let o = run_virtual(&element, "2s");
        assert!(o.status.success(), "{element}: {}", show(&o));
        let doc = json(&o);
        let r = &doc["results"];
        let sink = &r["sink"];
        let peak = sink["peak"].as_f64().unwrap();
        assert!(
            peak > 1e-3 && peak < 100.0,
            "{element}: output peak {peak} is silence or garbage: {sink}"
        );
        assert_eq!(sink["nonfinite_samples"], 0, "{element}: NaN in the output");
        assert!(sink["periods_on_time"].as_u64().unwrap() > 0, "{sink}");
        assert_eq!(r["plugins"][0]["uri"], uri, "{element}: {}", r["plugins"]);
        assert_eq!(r["plugins"][0]["format"], "lv2");
        assert_eq!(r["plugins"][0]["instances"], 1);
        assert!(r["dsp_load_pct"]["mean"].as_f64().unwrap() > 0.0);
    }
}

/// P = 2 ms exactly at 96 frames and 48 kHz.
fn expected_max(per_frame_ns: f64) -> u64 {
    let c = (per_frame_ns * 96.0).round() as u64;
    2_000_000 / c
}

#[test]
fn load_grid_on_the_sim_driver_with_a_measured_cost() {
    for (uri, package) in [
        (ZAMCOMP, "zam-plugins"),
        (HEAVY, "scripts/build-reverb-designer"),
    ] {
        if !installed(uri, package) {
            continue;
        }
        let element = format!("lv2:{uri}");
        let o = cmd()
            .args(["-q", "--json", "plugins", "bench", "--buffer", "96"])
            .args(["--duration", "300ms", &element])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", show(&o));
        let per_frame = json(&o)["results"][0]["ns_per_frame"].as_f64().unwrap();
        assert!(per_frame > 0.0 && per_frame.is_finite());
        // The model takes the measured cost to three decimals, as the CLI would be told.
        let per_frame = (per_frame * 1000.0).round() / 1000.0;
        let o = cmd()
            .args(["-q", "--json", "load", "--driver", "sim", "--buffers", "96"])
            .args(["--tracks", "1,2", "--duration", "1s", "--stress", "none"])
            .args(["--plugins", &element, "--max-instances", "8192"])
            .args(["--cost", &format!("{element}={per_frame:.3}ns/frame")])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", show(&o));
        let doc = json(&o);
        let cells = doc["results"]["cells"].as_array().unwrap();
        assert_eq!(cells.len(), 2, "{doc}");
        let m = expected_max(per_frame);
        for cell in cells {
            assert_eq!(cell["plugin"], element);
            assert_eq!(cell["max_per_track"].as_u64().unwrap(), m, "{cell}");
        }
    }
}

#[test]
fn listing_and_showing_plugins() {
    let o = cmd()
        .args(["plugins", "list", "--lv2", "xrunlab:test"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("urn:xrunlab:test:needs-feature"), "{out}");
    // The table wraps long cells; the JSON below has the reason whole.
    assert!(out.contains("2 plugins, 1 hostable"), "{out}");
    let o = cmd()
        .args(["--json", "plugins", "list", "--lv2"])
        .output()
        .unwrap();
    let all = json(&o);
    let needs = all
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["uri"] == "urn:xrunlab:test:needs-feature")
        .expect("the fixture is listed");
    assert!(needs["unhostable"]
        .as_str()
        .unwrap()
        .contains("urn:xrunlab:test:feature:unobtainable"));
    if installed(AMP, "swh-lv2") {
        cmd()
            .args(["plugins", "show", "lv2:amp"])
            .assert()
            .success()
            .stdout(predicates::str::contains("gain"))
            .stdout(predicates::str::contains("-70..=70"));
    }
}

/// Runs `args` and asserts its exit code and that stderr says `says`.
fn refused(args: &[&str], code: i32, says: &[&str]) {
    let o = cmd().args(args).output().unwrap();
    assert_eq!(o.status.code(), Some(code), "{args:?}: {}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    for s in says {
        assert!(err.contains(s), "{args:?} should say '{s}': {}", show(&o));
    }
    assert!(!err.contains("panicked"), "{}", show(&o));
}

#[test]
fn bad_input_exits_with_the_right_code_and_says_why() {
    let run = |chain: &str| -> Vec<String> {
        [
            "run",
            "--driver",
            "virtual",
            "--duration",
            "30s",
            "--chain",
            chain,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let refuse_run = |chain: &str, code: i32, says: &[&str]| {
        let a = run(chain);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        refused(&a, code, says);
    };
    // A feature no host provides: exit 2, naming it, on every command.
    let needs = "lv2:urn:xrunlab:test:needs-feature";
    refuse_run(needs, 2, &["urn:xrunlab:test:feature:unobtainable"]);
    refused(
        &["plugins", "bench", "--duration", "50ms", needs],
        2,
        &["urn:xrunlab:test:feature:unobtainable"],
    );
    refused(
        &[
            "load",
            "--buffers",
            "64",
            "--plugins",
            needs,
            "--stress",
            "none",
        ],
        2,
        &["urn:xrunlab:test:feature:unobtainable"],
    );
    // Instantiation fails: exit 3, with the plugin named.
    refuse_run(
        "lv2:urn:xrunlab:test:broken",
        3,
        &["urn:xrunlab:test:broken", "failed to instantiate"],
    );
    if installed(HALL, "dragonfly-reverb-lv2") {
        // Unknown name: exit 2 with the closest installed plugins.
        refuse_run(
            "lv2:Dragonfly Hal Reverb",
            2,
            &["no installed LV2 plugin", "Dragonfly Hall Reverb"],
        );
    }
    if installed(AMP, "swh-lv2") {
        // A value out of range and an unknown port: exit 2, naming the valid range/ports.
        refuse_run("lv2:amp(gain=100)", 2, &["gain=100", "-70..=70"]);
        refuse_run(
            "lv2:amp(gian=1)",
            2,
            &["no control input 'gian'", "gain (-70..=70)"],
        );
        refuse_run("lv2:amp(gain)", 2, &["not symbol=value"]);
        // Not an instrument.
        refused(
            &["event", "--driver", "virtual", "--instrument", "lv2:amp"],
            2,
            &["an instrument needs a MIDI"],
        );
    }
}

#[test]
fn an_lv2_instrument_sounds_at_each_trigger() {
    if !installed(EPIANO, "mda-lv2") {
        return;
    }
    let o = cmd()
        .args([
            "-q", "--json", "event", "--driver", "virtual", "--trials", "20",
        ])
        .args(["--instrument", &format!("lv2:{EPIANO}")])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let doc = json(&o);
    assert_eq!(doc["config"]["instrument"], format!("lv2:{EPIANO}"));
    let run = &doc["results"]["runs"][0];
    let lat = &run["latency"];
    // Every trigger found its onset, and no onset came before its trigger or seconds late.
    assert_eq!(lat["count"], 20, "{run}");
    let max_ms = lat["max_ns"].as_f64().unwrap() / 1e6;
    assert!(
        lat["min_ns"].as_f64().unwrap() > 0.0 && max_ms < 200.0,
        "{lat}"
    );
}

/// A plugin that crashes in `run` (hostile.c's `segv`, from its 51st call: the first is
/// xrunlab's priming block at instantiation, so it crashes while the engine runs) takes
/// xrunlab with it, by the same signal, and the stressors xrunlab started die too; the one
/// line on stderr names the plugin and what it was doing. Before, the user saw nothing but
/// the shell's "Segmentation fault".
#[test]
fn a_crashing_plugin_is_named_and_takes_xrunlab_and_its_stressors_with_it() {
    let Some(dir) = common::hostile_lv2::build() else {
        return;
    };
    let element = format!("lv2:{}", common::hostile_lv2::SEGV);
    let line = format!(
        "xrunlab: the plugin {element} (xrunlab hostile: run crashes) crashed with SIGSEGV"
    );
    let mark = format!("XRUNLAB_LV2_CRASH_MARK={}", std::process::id());
    let (k, v) = mark.split_once('=').unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_xrunlab"))
        .args(["run", "--driver", "virtual", "--duration", "30s"])
        .args(["--policy", "other", "--no-mlock"])
        .args(["--stress", "cpu", "--chain", &element])
        .env("LV2_PATH", dir.path())
        .env(k, v)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(o.status.signal(), Some(libc::SIGSEGV), "{}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&line) && err.contains("while processing audio"),
        "{}",
        show(&o)
    );
    // PR_SET_PDEATHSIG kills the stressors with their parent; give the kernel a moment.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut left = pids_with_env(&mark);
    while !left.is_empty() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(100));
        left = pids_with_env(&mark);
    }
    assert!(left.is_empty(), "stressors outlived the crash: {left:?}");
    // The bench runs the plugin on a thread of its own: the line names it there too.
    let o = hostile_cmd(&dir)
        .args(["plugins", "bench", "--duration", "100ms", &element])
        .output()
        .unwrap();
    assert_eq!(o.status.signal(), Some(libc::SIGSEGV), "{}", show(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(&line),
        "{}",
        show(&o)
    );
}

const DPL: &str = "http://gareus.org/oss/lv2/dpl#stereo";

#[test]
fn a_plugins_reported_latency_is_recorded() {
    if !installed(DPL, "x42-plugins") {
        return;
    }
    let element = format!("lv2:{DPL}");
    let o = run_virtual(&format!("{element}:2"), "1s");
    assert!(o.status.success(), "{}", show(&o));
    let lv2 = &json(&o)["results"]["plugins"][0];
    assert_eq!(lv2["instances"], 2, "{lv2}");
    // x42's limiter looks ahead: a positive latency, the same in the bench result.
    let lat = lv2["latency_frames"]
        .as_u64()
        .expect("dpl reports its latency");
    assert!(lat > 0, "{lv2}");
    let o = cmd()
        .args([
            "-q",
            "--json",
            "plugins",
            "bench",
            "--duration",
            "50ms",
            &element,
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    assert_eq!(json(&o)["results"][0]["latency_frames"].as_u64(), Some(lat));
}

#[test]
fn sched_runs_a_chain_of_lv2_plugins_as_its_pipeline() {
    if !installed(AMP, "swh-lv2") {
        return;
    }
    let o = cmd()
        .args([
            "-q",
            "--json",
            "sched",
            "--policies",
            "other",
            "--duration",
            "1s",
        ])
        .args(["--chain", "lv2:amp(gain=-3):3"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let doc = json(&o);
    assert_eq!(doc["config"]["chain"], "lv2:amp(gain=-3):3");
    assert_eq!(doc["config"]["clients"], 3);
    refused(
        &["sched", "--chain", "lv2:amp", "--graph", "3x5%"],
        2,
        &["cannot be used with"],
    );
}

/// `cmd()` with the hostile bundle first on LV2_PATH.
fn hostile_cmd(dir: &tempfile::TempDir) -> assert_cmd::Command {
    let mut c = xrunlab();
    c.env(
        "LV2_PATH",
        format!("{}:{}", dir.path().display(), lv2_path()),
    );
    c
}

/// Data that lilv's verification refuses (no doap:name) or whose port indices lilv would
/// connect wrongly (index 999 of 3; index 0 twice) is listed as not hostable with the
/// reason, and every command that would instantiate it exits 2 saying why; the rest of
/// LV2_PATH still lists. Before, the nameless plugin made every listing (and any command
/// resolving a name) panic inside the lilv crate, and the other two were instantiated with
/// their ports unconnected and died of SIGSEGV.
#[test]
fn hostile_plugin_data_is_listed_as_unhostable_and_never_instantiated() {
    let Some(dir) = common::hostile_lv2::build() else {
        return;
    };
    use common::hostile_lv2::{DUP, GAP, HANG, NONAME};
    let reasons = [
        (NONAME, "no doap:name"),
        (GAP, "lv2:index 999, but the plugin has 3 ports"),
        (DUP, "ports 'in' and 'out' both have lv2:index 0"),
    ];
    let o = hostile_cmd(&dir)
        .args(["--json", "plugins", "list", "--lv2"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let all = json(&o);
    let all = all.as_array().unwrap();
    let find = |uri: &str| {
        all.iter()
            .find(|p| p["uri"] == uri)
            .unwrap_or_else(|| panic!("{uri} is not listed"))
    };
    for (uri, why) in reasons {
        let why_listed = find(uri)["unhostable"].as_str().unwrap_or_default();
        assert!(why_listed.contains(why), "{uri}: '{why_listed}'");
    }
    assert!(find(HANG)["unhostable"].is_null(), "{}", find(HANG));
    // The rest of the path: the fixtures beside them.
    assert!(find("urn:xrunlab:test:broken")["unhostable"].is_null());
    let o = hostile_cmd(&dir)
        .args(["plugins", "list", "--lv2", "hostile"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("7 LV2 plugins, 4 hostable"),
        "{}",
        show(&o)
    );
    for (uri, why) in reasons {
        let element = format!("lv2:{uri}");
        let commands: [&[&str]; 4] = [
            &[
                "run",
                "--driver",
                "virtual",
                "--duration",
                "1s",
                "--chain",
                &element,
            ],
            &["plugins", "bench", "--duration", "50ms", &element],
            &[
                "load",
                "--buffers",
                "64",
                "--stress",
                "none",
                "--plugins",
                &element,
            ],
            &["plugins", "show", uri],
        ];
        for args in commands {
            let o = hostile_cmd(&dir).args(args).output().unwrap();
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(!err.contains("panicked"), "{args:?}: {}", show(&o));
            if args[1] == "show" {
                assert!(o.status.success(), "{args:?}: {}", show(&o));
                assert!(
                    String::from_utf8_lossy(&o.stdout).contains(why),
                    "{}",
                    show(&o)
                );
            } else {
                assert_eq!(o.status.code(), Some(2), "{args:?}: {}", show(&o));
                assert!(
                    err.contains("cannot be hosted") && err.contains(why),
                    "{}",
                    show(&o)
                );
            }
        }
    }
}

/// A chain count typed as 100000 (or a chain summing past the cap) is refused before
/// anything is instantiated, naming the cap; on a cost model, which instantiates one of each
/// element, it is not. Before, `run --chain lv2:…ZamComp:100000` spent minutes and gigabytes
/// creating instances and ignored Ctrl-C meanwhile.
#[test]
fn a_chain_past_the_instance_cap_is_refused_naming_it() {
    let mut chains = vec!["gain:100000".to_string(), "gain:3000,thru:3000".to_string()];
    if installed(ZAMCOMP, "zam-plugins") {
        chains.push(format!("lv2:{ZAMCOMP}:100000"));
    }
    for chain in &chains {
        let t = std::time::Instant::now();
        refused(
            &[
                "run",
                "--driver",
                "virtual",
                "--duration",
                "10s",
                "--chain",
                chain,
            ],
            2,
            &["plugin instances per track", "at most 4096"],
        );
        assert!(
            t.elapsed() < std::time::Duration::from_secs(10),
            "{chain}: refused late"
        );
    }
    refused(
        &["plugins", "bench", "--duration", "50ms", "gain:5000"],
        2,
        &["4096"],
    );
    let o = cmd()
        .args(["-q", "run", "--driver", "sim", "--duration", "1s"])
        .args(["--chain", "gain:100000", "--cost", "gain=1ns/frame"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
}

/// Ctrl-C while a long chain is being instantiated ends the set-up (exit 3, saying so) instead
/// of creating every instance first: 4000 instances of a plugin that takes 10 ms to
/// instantiate are 40 s of set-up, which the old code sat through.
#[test]
fn ctrl_c_during_a_long_set_up_ends_it() {
    let Some(dir) = common::hostile_lv2::build() else {
        return;
    };
    let element = format!("lv2:{}:4000", common::hostile_lv2::SLOW_INIT);
    let child = Command::new(common::bin())
        .args(["run", "--driver", "virtual", "--duration", "10s"])
        .args(["--policy", "other", "--no-mlock", "--chain", &element])
        .env("LV2_PATH", dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    common::signals::await_handler(child.id(), libc::SIGINT);
    // Into the set-up, past the patience a short one is given.
    std::thread::sleep(std::time::Duration::from_secs(2));
    // SAFETY: kill(2) of our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let (status, err) = common::signals::finish_within(child, std::time::Duration::from_secs(15));
    assert_eq!(status.code(), Some(3), "{status:?}: {err}");
    assert!(err.contains("interrupted while instantiating"), "{err}");
}

/// `plugins bench` of `gain` then `lv2:…` with the hostile bundle on LV2_PATH, writing `out`,
/// spawned with its stderr piped.
fn spawn_bench(dir: &tempfile::TempDir, uri: &str, out: &std::path::Path) -> std::process::Child {
    Command::new(common::bin())
        .args(["plugins", "bench", "--duration", "300ms", "-o"])
        .arg(out)
        .args(["gain", &format!("lv2:{uri}")])
        .env("LV2_PATH", dir.path())
        .env_remove("CI")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The plugins a partial bench result kept.
fn benched(out: &std::path::Path) -> (serde_json::Value, Vec<String>) {
    let doc = common::read_json(out);
    let plugins = doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["plugin"].as_str().unwrap().to_string())
        .collect();
    (doc["status"].clone(), plugins)
}

/// A plugin whose `run` never returns (hostile.c's `hang`, from its 2001st call, inside the
/// bench's warm-up) is stopped by the watchdog: exit 3, the run before it kept in a result of
/// status `watchdog`, stderr naming the plugin. Before, the bench hung for ever and a Ctrl-C
/// went unheard (the plugin held the only thread).
#[test]
fn a_bench_of_a_plugin_that_never_returns_stops_under_the_watchdog() {
    let Some(dir) = common::hostile_lv2::build() else {
        return;
    };
    let out = dir.path().join("bench.json");
    let child = spawn_bench(&dir, common::hostile_lv2::HANG, &out);
    let (status, err) = common::signals::finish_within(child, std::time::Duration::from_secs(60));
    assert_eq!(status.code(), Some(3), "{status:?}: {err}");
    assert!(
        err.contains("watchdog") && err.contains(common::hostile_lv2::HANG),
        "{err}"
    );
    let (status, plugins) = benched(&out);
    assert_eq!(status, "watchdog");
    assert_eq!(plugins, ["gain"]);
}

/// A Ctrl-C while a plugin holds the bench thread in its instantiation (hostile.c's
/// `stuck-init`, which the watchdog does not bound: a plugin may load samples for seconds)
/// ends the bench: exit 3, the runs before it kept in an `interrupted` result, stderr saying
/// which plugin held it. Before, the Ctrl-C went unheard.
#[test]
fn ctrl_c_stops_a_bench_held_by_a_plugin() {
    let Some(dir) = common::hostile_lv2::build() else {
        return;
    };
    let out = dir.path().join("bench.json");
    let child = spawn_bench(&dir, common::hostile_lv2::STUCK_INIT, &out);
    common::signals::await_handler(child.id(), libc::SIGINT);
    // gain's 300 ms (after its warm-up) are over well before this; then the plugin holds on.
    std::thread::sleep(std::time::Duration::from_secs(4));
    // SAFETY: kill(2) of our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let (status, err) = common::signals::finish_within(child, std::time::Duration::from_secs(15));
    assert_eq!(status.code(), Some(3), "{status:?}: {err}");
    assert!(
        err.contains("interrupted while") && err.contains(common::hostile_lv2::STUCK_INIT),
        "{err}"
    );
    let (status, plugins) = benched(&out);
    assert_eq!(status, "interrupted");
    assert_eq!(plugins, ["gain"]);
}
