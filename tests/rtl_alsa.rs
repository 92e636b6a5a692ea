//! `xrunlab rtl --driver alsa` without a sound card: the ALSA `jack` plugin on a private
//! `jackd -d dummy`, with a test-local PCM (`xrlloop`, tests/common/alsa.rs) whose playback
//! client's outputs feed its capture client's inputs inside JACK.
//!
//! What that loop must measure, from the plugin's structure. Each stream is its own JACK
//! client moving one JACK period J per server cycle between the ALSA ring and its ports;
//! the playback client runs before the capture client it feeds, so inside a cycle the
//! loop adds nothing. The driver pre-fills n ALSA periods P of silence, so output frame i
//! of the engine is playback stream frame nP + i; capture stream frame j is the engine's
//! input frame j. If the capture client's transfers lag the playback client's by m server
//! cycles, input frame j carries output frame j − (nP − mJ): the loop is exactly nP − mJ
//! frames, an integer on that lattice. m is start-up timing: the playback client moves
//! only once ALSA marks playback running (after its start callback activated the client and
//! connected its ports), the capture client copies from its activation on (in pcm_jack.c
//! only the playback side waits for RUNNING), even while its own port connections are
//! still being made (a server round trip per channel) — so m is a small integer of either
//! sign, and a client that misses a server cycle later moves it
//! by one. Seen on this VM: m from −2 to 2; a host stall during start-up can widen that, so
//! the bound is [J, nP + 4J] (the lattice and ALSA's own count are the sharp checks), and two runs
//! agree modulo J. ALSA's declared round trip (playback + capture delay read together)
//! counts the same frames: nP + written − played on one side, captured − read on the
//! other, which sums to nP − mJ whenever no server cycle falls between the two reads.

mod common;

use common::servers::{AudioServer, JackdServer};
use common::{bin, f, show, u};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;

const RATE: u32 = 48000;
/// The JACK period J.
const JACK_FRAMES: u32 = 128;

/// One server test at a time: two loops on a 2-core VM would measure each other.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A private jackd dummy at J frames and an ALSA configuration with `xrlloop`, or None
/// (skip outside CI) when jackd or the plugin is missing.
fn setup() -> Option<(JackdServer, tempfile::TempDir, PathBuf)> {
    common::alsa::require_plugin_on_jackd(RATE, JACK_FRAMES)
}

/// `xrunlab rtl --driver alsa ARGS -o FILE`; the output and the result (Null if none).
fn rtl(server: &JackdServer, conf: &Path, out: &Path, args: &[&str]) -> (Output, Value) {
    let o = server
        .command(&bin())
        .env("ALSA_CONFIG_PATH", conf)
        .args(["rtl", "--driver", "alsa", "-q", "-o"])
        .arg(out)
        .args(args)
        .output()
        .unwrap();
    let v = std::fs::read_to_string(out)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    (o, v)
}

/// Server lines saying one of the loop's clients missed a cycle (which moves m).
fn loop_client_xruns(log: &str) -> usize {
    log.lines()
        .filter(|l| l.contains("was not finished") && l.contains("xrlloop"))
        .count()
}

/// One measured loop at ALSA period `p` × `n`: checked against the structure above.
/// Returns the measured delay.
fn measure_loop(server: &JackdServer, conf: &Path, dir: &Path, p: u32, n: u32, tag: &str) -> f64 {
    let out = dir.join(format!("rtl-{tag}.json"));
    let before = loop_client_xruns(&server.log());
    let (o, v) = rtl(
        server,
        conf,
        &out,
        &[
            "--device",
            "xrlloop",
            "--buffer",
            &p.to_string(),
            "--periods",
            &n.to_string(),
            "--duration",
            "30s",
        ],
    );
    let log = server.log();
    let ctx = format!("{}\njackd:\n{log}", show(&o));
    assert!(o.status.success(), "{ctx}");
    assert_eq!(v["status"], "complete", "{ctx}");
    assert_eq!(v["config"]["driver"], "alsa", "{ctx}");
    let r = &v["results"];
    let a = &r["alsa"];
    let d = &a["driver"];
    // The plugin accepts any period and periods count: the loop runs what was asked.
    assert_eq!(u(&d["period_frames"]), p as u64, "{ctx}");
    assert_eq!(u(&d["periods"]), n as u64, "{ctx}");
    assert_eq!(d["capture"], true, "{ctx}");
    assert_eq!(d["capture_input"], true, "{ctx}");
    assert_eq!(u(&r["model"][0]["rtl_frames"]), (n * p) as u64, "{ctx}");

    let m = &r["measured"];
    assert_eq!(m["outcome"], "measured", "{ctx}");
    assert_eq!(m["converged"], true, "{ctx}");
    assert_eq!(m["inverted"], false, "{ctx}");
    let delay = f(&m["delay_frames"]);
    let (np, j) = ((n * p) as f64, JACK_FRAMES as f64);
    // On the lattice nP − mJ, to 0.05 frame.
    let lag = (np - delay) / j;
    assert!(
        (np - lag.round() * j - delay).abs() <= 0.05,
        "{delay} frames is not nP − m·J = {np} − m·{j}\n{ctx}"
    );
    assert!(
        delay >= j - 0.05 && delay <= np + 4.0 * j + 0.05,
        "{delay} frames is outside [J, nP + 4J] = [{j}, {}]\n{ctx}",
        np + 4.0 * j
    );
    assert!(
        (f(&r["difference_frames"]) - (delay - np)).abs() < 1e-9,
        "{ctx}"
    );

    // ALSA's declared round trip holds the same frames: the measurement lies within what
    // it declared over the run, and equals what it declared at the end unless one of the
    // loop's clients missed a server cycle during the run (m moved).
    let dec = &a["declared_frames"];
    assert!(
        f(&dec["min"]) - 0.05 <= delay && delay <= f(&dec["max"]) + 0.05,
        "{delay} outside ALSA's declared {dec}\n{ctx}"
    );
    let last = f(&d["loop_delay_last_frames"]);
    if loop_client_xruns(&log) == before {
        assert!(
            (delay - last).abs() <= 0.05,
            "measured {delay}, ALSA declared {last} at the end\n{ctx}"
        );
        assert!(f(&a["extra_frames"]).abs() <= 0.05, "{ctx}");
    }
    // Convergence: the estimate was stable to 0.01 frame over its last second.
    assert!(f(&m["spread_frames"]) <= 0.01, "{ctx}");
    assert!(f(&m["converged_after_s"]) <= 30.0, "{ctx}");
    delay
}

#[test]
fn plugin_loop_measures_its_structure_and_alsa_declares_it() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some((server, dir, conf)) = setup() else {
        return;
    };
    let a = measure_loop(&server, &conf, dir.path(), 256, 3, "a");
    let b = measure_loop(&server, &conf, dir.path(), 256, 3, "b");
    // Reproducible: the same structure, up to the start-up lag in whole JACK periods.
    let j = JACK_FRAMES as f64;
    let diff = (a - b).abs();
    assert!(
        (diff - (diff / j).round() * j).abs() <= 0.05,
        "two runs measured {a} and {b}: they differ by other than whole JACK periods"
    );
    // Another setting: one ALSA period per JACK period, four of them.
    measure_loop(&server, &conf, dir.path(), 128, 4, "c");
}

#[test]
fn a_playback_only_device_cannot_close_a_loop() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some((server, dir, conf)) = setup() else {
        return;
    };
    let out = dir.path().join("none.json");
    let (o, _) = rtl(&server, &conf, &out, &["--device", "xrlplay"]);
    assert_eq!(o.status.code(), Some(3), "{}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("ALSA device 'xrlplay' gives no capture stream"),
        "{}",
        show(&o)
    );
    assert!(!out.exists());
}

/// No server or plugin needed: the PCM does not exist in any configuration.
#[test]
fn missing_device_exits_3_with_the_alsa_text() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rtl.json");
    let o = common::xrunlab()
        .args([
            "rtl",
            "--driver",
            "alsa",
            "--device",
            "xrl_no_such_pcm",
            "-o",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    // alsa-lib's own text for an unknown PCM name (ENOENT).
    assert!(
        err.contains("cannot open ALSA device 'xrl_no_such_pcm': No such file or directory"),
        "{}",
        show(&o)
    );
    assert!(!out.exists());
}

#[test]
fn bad_flag_combinations_exit_2_without_a_file() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--driver", "alsa", "--loopback"],
            "shape the virtual loop",
        ),
        (
            &["--driver", "alsa", "--fraction", "0.3"],
            "shape the virtual loop",
        ),
        (
            &["--driver", "alsa", "--snr", "20"],
            "shape the virtual loop",
        ),
        (
            &["--driver", "alsa", "--out", "a:b", "--in", "c:d"],
            "--out and --in need --driver jack",
        ),
        (&["--driver", "alsa", "--server", "x"], "need --driver jack"),
        (
            &["--driver", "jack", "--device", "xrl"],
            "--device and --access need --driver alsa",
        ),
        (
            &["--driver", "virtual", "--loopback", "--access", "mmap"],
            "need --driver alsa",
        ),
        (&["--model", "--device", "hw:0"], "need --driver alsa"),
        (&["--driver", "alsa", "--device", " "], "empty device name"),
        (
            &["--driver", "alsa", "--periods", "1"],
            "--periods 1 is outside 2..64",
        ),
        (
            &["--driver", "alsa", "--buffer", "0"],
            "buffer sizes must be within",
        ),
        (&["--driver", "alsa", "--access", "dma"], "invalid value"),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (i, (args, want)) in cases.iter().enumerate() {
        let out = dir.path().join(format!("{i}.json"));
        let o = common::xrunlab()
            .arg("rtl")
            .args(*args)
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", show(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(want), "{args:?}: want '{want}'\n{}", show(&o));
        assert!(!out.exists(), "{args:?} wrote a file");
    }
}
