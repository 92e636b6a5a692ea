//! Real runs on the virtual driver and the CLI's exit paths. Timing bounds are generous:
//! the machines this runs on are noisy VMs (docs/ARCHITECTURE.md §4).

mod common;
use common::{is_root, xrunlab, xrunlab_wide};
use std::time::{Duration, Instant};
use xrunlab::measure::run::DriverKind;
use xrunlab::measure::run::{run, RunConfig};
use xrunlab::results::Status;
use xrunlab::rt::Policy;

/// FIFO only where it is permitted (root in CI); elsewhere the same run at SCHED_OTHER.
fn policy() -> Policy {
    if is_root() {
        Policy::fifo(80)
    } else {
        Policy::Other { nice: 0 }
    }
}

fn policy_args() -> Vec<&'static str> {
    if is_root() {
        vec!["--policy", "fifo:80"]
    } else {
        vec!["--policy", "other", "--no-mlock"]
    }
}

#[test]
fn a_short_real_run_reports_a_plausible_dsp_load() {
    let mut c = RunConfig::new(DriverKind::Virtual, "burn(30%)").unwrap();
    c.buffer_frames = 256;
    c.duration_ns = 2_000_000_000;
    c.policy = policy();
    c.mlock = is_root();
    let r = run(&c, &mut xrunlab::measure::session::Session::silent()).unwrap();
    assert_eq!(r.status, Status::Complete);
    let x = &r.results;
    assert_eq!(x.periods_elapsed, 375);
    assert_eq!(x.cycles + x.skipped_periods, 375);
    assert!(
        (10.0..90.0).contains(&x.dsp_load_pct.mean),
        "DSP load {:?}",
        x.dsp_load_pct
    );
    assert!(x.cpu_load_pct.mean > 5.0 && x.cpu_load_pct.mean <= x.dsp_load_pct.mean + 1.0);
    // Every processed cycle is probed; a host stall may skip periods (counted above), so
    // only a generous share of the 375 is required to have run.
    assert_eq!(x.wake_latency_ns.count, x.cycles);
    assert!(x.cycles > 100, "{} cycles", x.cycles);
    // The driver period averages P over the periods that ran, whatever the jitter: skipped
    // periods lengthen the gaps between processed cycles, never the device clock.
    let mean = x.driver_period_ns.mean;
    let expect = 5_333_333.0 * 374.0 / (x.cycles.max(2) - 1) as f64;
    assert!(
        (mean - expect).abs() < 0.1 * expect + 500_000.0,
        "driver period {mean}, expected about {expect}"
    );
    assert!(x.sink.peak > 0.3, "the sine must reach the output");
    // Where the kernel counts steal, the run was sampled beside it every 50 ms: at most
    // 2 s / 50 ms windows (fewer when the sampler was held up), and every recorded xrun
    // inside the sampled span placed in one.
    match &x.host_steal {
        Some(h) => {
            assert!((10..=60).contains(&h.windows), "{h:?}");
            assert!(h.windows_with_steal <= h.windows, "{h:?}");
            assert!(h.xruns_in_steal_windows <= h.xruns, "{h:?}");
            assert!(h.xruns <= x.xrun_events.len() as u64, "{h:?}");
            assert_eq!(h.stolen_ms == 0.0, h.windows_with_steal == 0, "{h:?}");
        }
        None => assert!(
            std::fs::read_to_string("/proc/stat")
                .unwrap()
                .lines()
                .next()
                .is_none_or(|l| l.split_whitespace().count() <= 8),
            "this kernel counts steal: the run must report host_steal"
        ),
    }
}

#[test]
fn two_tracks_run_on_two_threads_when_there_are_two_cpus() {
    let cpus = xrunlab::rt::affinity::allowed_cpus().unwrap();
    let mut c = RunConfig::new(DriverKind::Virtual, "burn(10%),gain(0.5)").unwrap();
    c.buffer_frames = 128;
    c.tracks = 2;
    c.duration_ns = 1_000_000_000;
    c.policy = policy();
    c.mlock = false;
    let x = run(&c, &mut xrunlab::measure::session::Session::silent())
        .unwrap()
        .results;
    assert_eq!(x.threads.len(), cpus.len().min(2));
    assert_eq!(x.track_end_max_ns.len(), 2);
    assert!(x.track_end_max_ns.iter().all(|&e| e > 0));
    // Two tracks of 10 % each: CPU load about 20 %, generous.
    assert!(
        (8.0..60.0).contains(&x.cpu_load_pct.mean),
        "{:?}",
        x.cpu_load_pct
    );
    // Two tracks at gain 0.5 summed: the sine's 0.5 peak comes out at about 0.5.
    assert!((0.4..0.6).contains(&x.sink.peak), "peak {}", x.sink.peak);
}

#[test]
fn sigint_stops_the_run_with_a_partial_interrupted_result() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run.json");
    let bin = assert_cmd::cargo::cargo_bin("xrunlab");
    let mut child = std::process::Command::new(bin)
        .args([
            "run",
            "--chain",
            "burn(10%)",
            "--duration",
            "60s",
            "--quiet",
            "-o",
        ])
        .arg(&out)
        .args(policy_args())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: plain kill(2) of our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "did not stop on SIGINT"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(v["status"], "interrupted");
    let cycles = v["results"]["cycles"].as_u64().unwrap();
    assert!(cycles > 100 && cycles < 45_000, "cycles {cycles}");
    // In a VM whose kernel counts steal, the environment says what the host took during
    // the run (captured before it, finished with the result): at most all of it.
    let env = &v["environment"];
    let counts_steal = std::fs::read_to_string("/proc/stat")
        .unwrap()
        .lines()
        .next()
        .is_some_and(|l| l.split_whitespace().count() > 8);
    if !env["virtualization"].is_null() && counts_steal {
        let st = &env["hypervisor_steal"];
        let share = st["share_pct"].as_f64().expect("hypervisor_steal recorded");
        let ms = st["stolen_ms"].as_f64().unwrap();
        assert!((0.0..=100.0).contains(&share) && ms >= 0.0, "{st}");
    } else {
        assert!(env["hypervisor_steal"].is_null(), "{env}");
    }
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        vec!["run", "--periods", "1"],
        vec!["run", "--tracks", "65"],
        vec!["run", "--chain", "nope"],
        vec!["run", "--chain", "burn"],
        vec!["run", "--cost", "burn=1us"],
        vec!["run", "--driver", "sim", "--inject", "late:x:1ms"],
        vec![
            "run",
            "--driver",
            "sim",
            "--sim-latency",
            "file:/nonexistent",
        ],
        vec!["run", "--duration", "10"],
    ] {
        let o = xrunlab().args(&args).output().unwrap();
        assert_eq!(
            o.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

#[test]
fn sim_run_json_and_fail_on_xrun() {
    let o = xrunlab()
        .args([
            "run",
            "--driver",
            "sim",
            "--buffer",
            "48",
            "--chain",
            "burn(50%)",
        ])
        .args([
            "--duration",
            "1s",
            "--inject",
            "compute:10:1ms",
            "--json",
            "--fail-on-xrun",
        ])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["kind"], "run");
    assert_eq!(v["status"], "complete");
    assert_eq!(v["results"]["xruns"]["overload"], 1);
    assert_eq!(v["config"]["driver"], "sim");
    assert!(String::from_utf8_lossy(&o.stderr).contains("xruns 1"));
}

/// The environment says "measured under stress"; the command adds no second copy, and the
/// finisher says each warning once on stderr.
#[test]
fn the_stress_warning_is_said_once_in_the_result_and_once_on_stderr() {
    let cases: [&[&str]; 2] = [
        &["run", "--driver", "sim", "--duration", "1s"],
        &[
            "latency",
            "--duration",
            "300ms",
            "--policy",
            "other",
            "--no-mlock",
        ],
    ];
    for args in cases {
        let o = xrunlab_wide()
            .args(args)
            .args(["--no-dma-latency"].iter().filter(|_| args[0] == "latency"))
            .args(["--stress", "cpu", "--stress-backend", "builtin", "--json"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {err}");
        let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let said: Vec<&str> = doc["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|w| w.as_str())
            .filter(|w| w.contains("measured under stress"))
            .collect();
        assert_eq!(said, ["measured under stress: cpu"], "{args:?}");
        assert_eq!(
            err.matches("xrunlab: warning: measured under stress")
                .count(),
            1,
            "{args:?}: {err}"
        );
        // Every warning of the result appears on stderr exactly once.
        for w in doc["warnings"].as_array().unwrap() {
            let line = format!("xrunlab: warning: {}\n", w.as_str().unwrap());
            assert_eq!(err.matches(&line).count(), 1, "{args:?}: {line}");
        }
    }
}

/// `run --trace` into a target that fails every write (/dev/full, no root needed): the run
/// goes on without the trace, its result is whole and written, and it exits 3 with one line
/// saying what was lost. Before, the run ended in an error and wrote no result.
#[test]
fn a_trace_that_cannot_be_written_loses_only_the_trace() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.json");
    let o = xrunlab()
        .args([
            "run",
            "--driver",
            "sim",
            "--chain",
            "burn(10%)",
            "--buffer",
            "64",
        ])
        .args(["--duration", "3s", "--trace", "/dev/full", "-q", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert_eq!(err.matches("xrunlab: error:").count(), 1, "{err}");
    assert!(
        err.contains("/dev/full") && err.contains("No space left"),
        "{err}"
    );
    let d = common::read_json(&out);
    assert_eq!(d["status"], "complete");
    // 3 s of 64-frame periods at 48 kHz: every cycle is in the result.
    assert_eq!(d["results"]["cycles"], 2250);
    let lost = d["results"]["trace_error"].as_str().unwrap();
    assert!(lost.contains("No space left"), "{lost}");
}

/// `run --trace` on a full disk (a small tmpfs): the trace is cut at its last complete line
/// and the result says at which cycle; the run goes on, and its result, written elsewhere,
/// holds every cycle. With the result on the same full disk, nothing half-written is left and
/// stderr says what was lost: the trace's end and the result file (the summary is printed).
/// Before, the trace ended mid-line, the run ended in an error and no result was written.
#[test]
fn a_trace_on_a_full_disk_is_cut_at_its_last_line_and_the_result_kept() {
    let Some(fs) = common::tmpfs::require_small_fs("256k") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.json");
    let trace = fs.path().join("cycles.csv");
    let run = |out: &std::path::Path, quiet: bool| {
        let mut c = xrunlab();
        c.args([
            "run",
            "--driver",
            "sim",
            "--chain",
            "burn(10%)",
            "--buffer",
            "64",
        ])
        .args(["--duration", "20s", "--trace"])
        .arg(&trace)
        .arg("-o")
        .arg(out);
        if quiet {
            c.arg("-q");
        }
        c.output().unwrap()
    };
    let o = run(&out, true);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    let d = common::read_json(&out);
    assert_eq!(d["status"], "complete");
    assert_eq!(d["results"]["cycles"], 15000, "the run went on to its end");
    let lost = d["results"]["trace_error"].as_str().unwrap().to_string();
    assert!(err.contains(&lost), "{err}");
    let cycle: u64 = lost
        .split("last complete line, cycle ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no cycle in: {lost}"));
    let text = std::fs::read_to_string(&trace).unwrap();
    assert!(text.ends_with('\n'), "the trace ends with a whole line");
    let lines: Vec<&str> = text.lines().collect();
    let fields = lines[0].split(',').count();
    assert!(lines.iter().all(|l| l.split(',').count() == fields));
    assert_eq!(lines.len() as u64, cycle + 2, "header + cycles 0..={cycle}");
    assert!(lines[lines.len() - 1].starts_with(&format!("{cycle},")));
    assert!(cycle > 100 && cycle < 15000, "{cycle}");

    // The result on the same full disk: not saved, and said so beside the trace's loss.
    let inside = fs.path().join("run.json");
    std::fs::remove_file(&trace).unwrap();
    let o = run(&inside, false);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains("the trace was cut"), "{err}");
    assert!(
        err.contains("the result was printed but not saved"),
        "{err}"
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("cycles 15000"));
    let left: Vec<_> = std::fs::read_dir(fs.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["cycles.csv"], "no partial result or temp file");
    assert!(std::fs::read_to_string(&trace).unwrap().ends_with('\n'));
}

#[test]
fn the_live_line_is_built_only_for_a_display() {
    let mut c = RunConfig::new(DriverKind::Virtual, "burn(20%)").unwrap();
    c.buffer_frames = 256;
    c.duration_ns = 600_000_000;
    c.policy = policy();
    c.mlock = is_root();
    let live = |shows: bool| {
        let (spy, messages) = common::spy::Spy::new(shows);
        let r = xrunlab::measure::run::run_observed(&c, &spy, Default::default()).unwrap();
        assert_eq!(r.status, Status::Complete);
        let m = messages.lock().unwrap().clone();
        m.into_iter()
            .filter(|m| m.contains("· DSP "))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        live(false),
        Vec::<String>::new(),
        "formatted with no display"
    );
    // Refreshed every 100 ms over 0.6 s: several lines, each with the run's figures.
    let shown = live(true);
    assert!(shown.len() >= 2, "{shown:?}");
    for l in &shown {
        assert!(
            l.contains(" xrun") && l.ends_with(" %") && l.len() <= 80,
            "{l}"
        );
    }
}
