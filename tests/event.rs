//! `xrunlab event` (Topliss et al.'s trigger-to-sound latency). On the virtual device every trial is
//! checked against the device model, computed here from the recorded trigger time and the
//! device clock; on a private jackd dummy server the mean must lie in the band the server's
//! declared latency predicts, with generous bounds (noisy VM, docs/ARCHITECTURE.md §4).

mod common;

use common::servers::{AudioServer, JackdServer};
use common::{bin, read_json, u};
use common::{require, xrunlab};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use xrunlab::dsp::{parse_chain, registry, PluginContext};

const RATE: u64 = 48000;

/// Real-time runs one at a time: two RT runs at once on a 2-core VM measure each other.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn ns_of_frames(frames: u64) -> u64 {
    (frames as u128 * 1_000_000_000 / RATE as u128) as u64
}

/// The frame of the first non-zero sample a synth renders after note-on, from the plugin
/// itself (not from the measurement).
fn synth_onset(chain: &str) -> u64 {
    let ctx = PluginContext {
        rate: RATE as u32,
        max_frames: 64,
    };
    let mut p = registry::create_chain(&parse_chain(chain).unwrap(), &ctx).unwrap();
    let (mut l, mut r) = (vec![0f32; 64], vec![0f32; 64]);
    for x in p.iter_mut() {
        x.process(&mut l, &mut r);
    }
    assert!(l.iter().all(|&v| v == 0.0), "{chain} sounds before note-on");
    for x in p.iter_mut() {
        x.note_on();
        x.process(&mut l, &mut r);
    }
    l.iter()
        .position(|&v| v != 0.0)
        .expect("the synth sounds after note-on") as u64
}

fn chain_of(scenario: &str) -> &'static str {
    match scenario {
        "poly" => "poly(freq=220,gate=0)",
        _ => "sine(freq=440,gate=0)",
    }
}

#[test]
fn virtual_trials_equal_the_device_model_within_a_frame() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ev.json");
    let (frames, n, fifo, dac) = (64u64, 3u64, 20u64, 10u64);
    xrunlab()
        .args([
            "event",
            "--driver",
            "virtual",
            "--buffer",
            "64",
            "--periods",
            "3",
        ])
        .args(["--fifo", "20", "--dac", "10", "--trials", "40"])
        .args(["--scenario", "mono,poly", "--quiet", "-o"])
        .arg(&out)
        .assert()
        .success();
    let doc = read_json(&out);
    assert_eq!(doc["kind"], "event");
    let runs = doc["results"]["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    let period_ns = ns_of_frames(frames);
    for run in runs {
        let scenario = run["scenario"].as_str().unwrap();
        let onset = synth_onset(chain_of(scenario));
        let t0 = u(&run["device_t0_ns"]);
        let trials = run["trials"].as_array().unwrap();
        assert_eq!(trials.len(), 40, "{scenario}: every trial measured");
        let (mut phase_sum, mut phased) = (0i64, 0i64);
        for t in trials {
            let k = u(&t["cycle"]);
            let te = u(&t["te_ns"]);
            let seen = u(&t["seen_ns"]);
            // The device clock: period interrupts at t0 + k·frames/fs, exactly.
            let t_ideal = t0 + ns_of_frames(k * frames);
            assert_eq!(
                u(&t["t_ideal_ns"]),
                t_ideal,
                "{scenario}: off the device clock"
            );
            // Causality: the cycle read the trigger after it happened and after its interrupt;
            // a cycle in time did so before its deadline t_ideal + (n−1)·P.
            assert!(
                te <= seen,
                "{scenario}: trigger seen before it happened: {t}"
            );
            assert!(
                t_ideal <= seen,
                "{scenario}: a cycle ran before its interrupt: {t}"
            );
            if !t["xrun"].as_bool().unwrap() {
                assert!(seen < t0 + ns_of_frames((k + n - 1) * frames), "{t}");
            }
            assert_eq!(u(&t["onset_frame"]), onset, "{scenario}: onset frame");
            // The model: output of cycle k plays from t_ideal(k) + (n−1)·P, then FIFO and DAC.
            let expect = t0 as i64 + ns_of_frames((k + n - 1) * frames + fifo + dac + onset) as i64
                - te as i64;
            let got = t["latency_ns"].as_i64().unwrap();
            assert!(
                (got - expect).abs() <= ns_of_frames(1) as i64,
                "{scenario}: latency {got} ns vs model {expect} ns: {t}"
            );
            // The device's own view of the edge: its output sink saw the tone start there.
            if !t["xrun"].as_bool().unwrap() {
                assert_eq!(u(&t["device_frame"]), k * frames + onset, "{t}");
            }
            // A trigger after the interrupt was caught by a late (catching-up) cycle: not
            // part of the phase the random trigger spreads over the period.
            if te <= t_ideal {
                phase_sum += (t_ideal - te) as i64;
                phased += 1;
            }
        }
        // Random trigger phase: on average about half a period before the interrupt. Host
        // stalls make cycles late and add catch-up trials; most must still be ordinary.
        assert!(
            phased * 2 > trials.len() as i64,
            "{scenario}: {phased} ordinary trials"
        );
        let mean_phase = phase_sum / phased;
        assert!(
            mean_phase > period_ns as i64 / 10 && mean_phase < period_ns as i64 * 9 / 10,
            "{scenario}: mean phase {mean_phase} ns of a {period_ns} ns period"
        );
        // The statistics leave out trials whose cycle missed its deadline.
        let in_time = trials.iter().filter(|t| t["xrun"] == false).count() as u64;
        assert_eq!(u(&run["latency"]["count"]), in_time, "{scenario}");
        let mean = run["latency"]["mean_ns"].as_f64().unwrap();
        let lo = ns_of_frames((n - 1) * frames + fifo + dac) as f64;
        assert!(
            mean > lo && mean < lo + period_ns as f64 + 1e6,
            "{scenario}: mean {mean} outside the model band from {lo}"
        );
    }
}

#[test]
fn virtual_grid_latency_grows_with_the_buffer() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("grid.json");
    let a = xrunlab()
        .args([
            "event",
            "--grid",
            "--drivers",
            "virtual",
            "--pairs",
            "128/64,256/64",
        ])
        .args(["--scenario", "mono", "--trials", "20", "-o"])
        .arg(&out)
        .assert()
        .success();
    let text = String::from_utf8_lossy(&a.get_output().stdout).into_owned();
    assert!(
        text.contains("mono ms") && text.contains("under-runs"),
        "{text}"
    );
    let doc = read_json(&out);
    let runs = doc["results"]["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!((u(&runs[0]["periods"]), u(&runs[1]["periods"])), (2, 4));
    let mean = |r: &Value| r["latency"]["mean_ns"].as_f64().unwrap();
    // Pushing into a deeper buffer: two more periods of 64 frames (2.67 ms) on average.
    let d = mean(&runs[1]) - mean(&runs[0]);
    let p = ns_of_frames(64) as f64;
    assert!(d > p && d < 3.0 * p, "buffer 256 vs 128: +{d} ns");
}

#[test]
fn mono_bg_runs_a_top_like_background_and_stops_it() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bg.json");
    xrunlab()
        .args(["event", "--driver", "virtual", "--scenario", "mono-bg"])
        .args(["--trials", "10", "--quiet", "-o"])
        .arg(&out)
        .assert()
        .success();
    let doc = read_json(&out);
    let run = &doc["results"]["runs"][0];
    let bg = &run["background"];
    let what = bg["what"].as_str().unwrap();
    assert!(what.contains("top"), "{what}");
    assert_eq!(run["trials"].as_array().unwrap().len(), 10);
    // The session stopped every background process it started.
    let procs = bg["record"]["processes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(!procs.is_empty(), "no background process recorded: {bg}");
}

#[test]
fn udp_datagrams_trigger_trials() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    // The sender is bound first so the port picked for the receiver can never be its own.
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    // Exit 3 with every trial overlapping an xrun means the host stalled the device for the
    // whole (short) run: nothing was measured, and that is what exit 3 says. Measure again
    // then; anything else fails at once.
    for attempt in 1..=3 {
        let out = dir.path().join(format!("udp{attempt}.json"));
        let port = std::net::UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = Command::new(bin())
            .args(["event", "--driver", "virtual", "--trigger"])
            .arg(format!("udp:{port}"))
            .args(["--trials", "3", "--quiet", "-o"])
            .arg(&out)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let t = Instant::now();
        let status = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break st;
            }
            if t.elapsed() > Duration::from_secs(30) {
                let _ = child.kill();
                panic!("event did not finish within 30 s");
            }
            let _ = sock.send_to(b"x", ("127.0.0.1", port));
            std::thread::sleep(Duration::from_millis(60));
        };
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
        let doc = out.exists().then(|| read_json(&out));
        let trials = doc
            .as_ref()
            .map(|d| d["results"]["runs"][0]["trials"].clone())
            .unwrap_or(Value::Null);
        if status.code() == Some(3)
            && trials
                .as_array()
                .is_some_and(|t| t.len() == 3 && t.iter().all(|x| x["xrun"] == true))
        {
            eprintln!("attempt {attempt}: every trial overlapped an xrun (host stall); again");
            continue;
        }
        assert!(status.success(), "{status}\nstderr:\n{stderr}");
        let doc = doc.expect("a result file");
        assert_eq!(trials.as_array().unwrap().len(), 3, "{stderr}");
        assert_eq!(doc["config"]["trigger"]["kind"], "udp");
        let mean = doc["results"]["runs"][0]["latency"]["mean_ns"]
            .as_f64()
            .unwrap();
        assert!(mean > 0.0 && mean < 20e6, "{mean}");
        return;
    }
    panic!("three runs in a row had every trial disturbed by an xrun");
}

#[test]
fn bad_flags_are_usage_errors_without_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("never.json");
    let cases: &[&[&str]] = &[
        &["event"],
        &["event", "--driver", "alsa-x"],
        &["event", "--driver", "virtual", "--periods", "1"],
        &["event", "--driver", "virtual", "--buffer", "0"],
        &["event", "--driver", "virtual", "--scenario", "chord"],
        &["event", "--driver", "virtual", "--trigger", "udp:0"],
        &["event", "--driver", "virtual", "--trigger", "keyboard"],
        &["event", "--driver", "virtual", "--trials", "0"],
        &["event", "--driver", "virtual", "--gpio", "gpiochip0"],
        &[
            "event",
            "--driver",
            "virtual",
            "--set-buffer",
            "--buffer",
            "64",
        ],
        &["event", "--driver", "jack", "--periods", "3"],
        &["event", "--driver", "virtual", "--pairs", "256/64"],
        &["event", "--grid", "--pairs", "100/64"],
        &["event", "--grid", "--buffer", "64"],
        &["event", "--grid", "--trigger", "stdin"],
        &["event", "--grid", "--drivers", "virtual,nope"],
    ];
    for args in cases {
        xrunlab().args(*args).arg("-o").arg(&out).assert().code(2);
        assert!(!out.exists(), "{args:?} left a file");
    }
}

#[test]
fn a_missing_gpio_chip_is_exit_3_naming_the_device() {
    let chip = (90..200)
        .map(|i| format!("/dev/gpiochip{i}"))
        .find(|p| !Path::new(p).exists())
        .unwrap();
    let a = xrunlab()
        .args(["event", "--driver", "virtual", "--trials", "1", "--gpio"])
        .arg(format!("{chip}:3"))
        .assert()
        .code(3);
    let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    assert!(err.contains(&chip), "{err}");
}

#[test]
fn jack_mean_latency_is_in_the_band_the_server_declares() {
    let _g = serial();
    let server = JackdServer::start(RATE as u32, 256);
    if !require(
        server.is_ok(),
        "jackd (dummy driver) for event --driver jack",
    ) {
        return;
    }
    let server = server.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("jack.json");
    let o = server
        .command(&bin())
        .args([
            "event",
            "--driver",
            "jack",
            "--trials",
            "40",
            "--scenario",
            "mono",
        ])
        .args(["--quiet", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&o.stderr),
        server.log()
    );
    let doc = read_json(&out);
    let run = &doc["results"]["runs"][0];
    assert_eq!(u(&run["period_frames"]), 256);
    // Connected to system:playback_*, our port inherits its playback latency. The dummy
    // driver runs asynchronously: at least its own period plus the async period.
    let lat = run["playback_latency_frames"].as_array().unwrap();
    let port = u(&lat[1]);
    assert!(port >= 256, "playback latency {port} frames");
    let onset = synth_onset("sine(freq=440,gate=0)");
    let trials = run["trials"].as_array().unwrap();
    assert_eq!(trials.len(), 40);
    for t in trials {
        // t_sound is the cycle start plus the declared latency and the onset, exactly.
        assert_eq!(
            u(&t["t_sound_ns"]),
            u(&t["t_ideal_ns"]) + ns_of_frames(port + onset),
            "{t}"
        );
        assert!(u(&t["te_ns"]) <= u(&t["seen_ns"]), "{t}");
    }
    // Model: a uniformly random phase before the next cycle start, then the port latency.
    let p = ns_of_frames(256) as f64;
    let fixed = ns_of_frames(port + onset) as f64;
    let mean = run["latency"]["mean_ns"].as_f64().unwrap();
    assert!(
        mean > fixed - 1e6 && mean < fixed + p + 5e6,
        "mean {mean} ns outside [{fixed}, {fixed} + {p}] (+ slack)"
    );
    // The server's buffer size is left as found.
    assert_eq!(
        doc["results"]["runs"][0]["jack"]["buffer_set_from"],
        Value::Null
    );
}

#[test]
fn jack_grid_sets_each_period_and_restores_the_servers() {
    let _g = serial();
    let server = JackdServer::start(RATE as u32, 256);
    if !require(server.is_ok(), "jackd (dummy driver) for event --grid") {
        return;
    }
    let server = server.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("jgrid.json");
    let o = server
        .command(&bin())
        .args([
            "event",
            "--grid",
            "--drivers",
            "jack",
            "--pairs",
            "256/64,512/128",
        ])
        .args(["--scenario", "mono", "--trials", "15", "--quiet", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&o.stderr),
        server.log()
    );
    let doc = read_json(&out);
    let runs = doc["results"]["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(
        (u(&runs[0]["period_frames"]), u(&runs[1]["period_frames"])),
        (64, 128)
    );
    let mean = |r: &Value| r["latency"]["mean_ns"].as_f64().unwrap();
    // Pull: latency follows the period (the server's latency is counted in periods).
    assert!(
        mean(&runs[1]) > mean(&runs[0]),
        "{} vs {}",
        mean(&runs[1]),
        mean(&runs[0])
    );
    // The server runs at its own size again.
    let bufsize = common::which("jack_bufsize");
    if let Some(b) = bufsize {
        let o = server.command(&b).output().unwrap();
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(text.contains("256"), "jack_bufsize says: {text}");
    }
}

/// A private jackd dummy server and an ALSA configuration whose `xrlplay` PCM plays into it
/// through the ALSA `jack` plugin, or None (skip outside CI) when either is missing.
fn alsa_setup(frames: u32) -> Option<(JackdServer, tempfile::TempDir, PathBuf)> {
    common::alsa::require_plugin_on_jackd(RATE as u32, frames)
}

fn event_json(server: &JackdServer, conf: &Path, out: &Path, args: &[&str]) -> Value {
    let o = server
        .command(&bin())
        .env("ALSA_CONFIG_PATH", conf)
        .arg("event")
        .args(args)
        .args(["--quiet", "-o"])
        .arg(out)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{args:?}: {}\n{}",
        String::from_utf8_lossy(&o.stderr),
        server.log()
    );
    read_json(out)
}

#[test]
fn alsa_pushes_so_latency_grows_with_its_buffer_while_jack_pulls_per_period() {
    let _g = serial();
    let Some((server, dir, conf)) = alsa_setup(256) else {
        return;
    };
    let mean = |d: &Value| {
        d["results"]["runs"][0]["latency"]["mean_ns"]
            .as_f64()
            .unwrap()
    };
    let mut alsa = Vec::new();
    for n in ["2", "4"] {
        let out = dir.path().join(format!("alsa{n}.json"));
        let d = event_json(
            &server,
            &conf,
            &out,
            &["--driver", "alsa", "--device", "xrlplay", "--buffer", "256"]
                .iter()
                .copied()
                .chain(["--periods", n, "--trials", "20"])
                .collect::<Vec<_>>(),
        );
        let run = &d["results"]["runs"][0];
        assert_eq!(run["alsa"]["periods"].to_string(), n, "{}", run["alsa"]);
        let trials = run["trials"].as_array().unwrap();
        assert!(trials.len() >= 18, "{} of 20 trials measured", trials.len());
        for t in trials {
            // The sound cannot come before the cycle that rendered it was even started.
            assert!(u(&t["t_sound_ns"]) > u(&t["seen_ns"]), "{t}");
        }
        alsa.push(mean(&d));
    }
    // Push: two more periods of 256 frames queued ahead of every write (10.7 ms).
    let d = alsa[1] - alsa[0];
    let p = ns_of_frames(256) as f64;
    assert!(d > p && d < 4.0 * p, "ALSA n=4 vs n=2: +{d} ns");
    // Pull: the JACK client on the same server has no buffer of its own to fill; its latency
    // is the server's (period + declared port latency), below the deeper ALSA queue's.
    let out = dir.path().join("jack.json");
    let j = event_json(
        &server,
        &conf,
        &out,
        &["--driver", "jack", "--trials", "20"],
    );
    assert!(
        mean(&j) < alsa[1],
        "jack {} vs alsa n=4 {}",
        mean(&j),
        alsa[1]
    );
}

#[test]
fn a_missing_alsa_device_is_exit_3_with_the_alsa_text() {
    let a = xrunlab()
        .env("ALSA_CONFIG_PATH", "/usr/share/alsa/alsa.conf")
        .args([
            "event",
            "--driver",
            "alsa",
            "--device",
            "xrl_no_such_pcm",
            "--trials",
            "1",
        ])
        .assert()
        .code(3);
    let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    assert!(err.contains("xrl_no_such_pcm"), "{err}");
}
