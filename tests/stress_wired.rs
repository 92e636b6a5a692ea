//! `--stress` on latency and run, `latency --baseline idle`, `run --compete`, `latencytest`:
//! the load is recorded in the result and never outlives the command. Measuring threads run
//! SCHED_OTHER without mlock where the point is the wiring, so these tests need no privilege.

mod common;
use common::{is_root, pids_with_env, require, xrunlab};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use xrunlab::measure::latencytest::{self, LatencytestConfig};
use xrunlab::rt::Policy;
use xrunlab::stress::StressSpec;

/// The tests load the machine on purpose; overlapping them would skew each other's counts.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

const UNPRIVILEGED: [&str; 5] = [
    "--policy",
    "other",
    "--no-mlock",
    "--no-dma-latency",
    "--json",
];

/// Run xrunlab with a unique marker in its environment; return the parsed JSON of stdout
/// and the processes still carrying the marker afterwards.
fn run_marked(tag: &str, args: &[&str]) -> (serde_json::Value, Vec<i32>, i32) {
    let mark = format!("XRUNLAB_WIRED_MARK={}-{tag}", std::process::id());
    let (k, v) = mark.split_once('=').unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_xrunlab"))
        .args(args)
        .env(k, v)
        .env_remove("CI")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: stdout {} stderr {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (doc, pids_with_env(&mark), out.status.code().unwrap_or(-1))
}

#[test]
fn latency_under_stress_records_the_load_and_leaves_nothing() {
    let _g = serial();
    let mut args = vec!["latency", "--stress", "cpu", "--duration", "2s"];
    args.extend(UNPRIVILEGED);
    let (doc, left, rc) = run_marked("lat", &args);
    assert_eq!(rc, 0, "{doc}");
    assert!(left.is_empty(), "stressors left behind: {left:?}");
    let r = &doc["results"];
    assert_eq!(r["stress"]["presets"], serde_json::json!(["cpu"]));
    assert!(
        !r["stress"]["processes"].as_array().unwrap().is_empty(),
        "no stressor recorded: {}",
        r["stress"]
    );
    assert_eq!(doc["config"]["stress"], serde_json::json!(["cpu"]));
    assert_eq!(doc["environment"]["stress"], serde_json::json!(["cpu"]));
    assert!(
        doc["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("under stress")),
        "{}",
        doc["warnings"]
    );
    assert!(r["baseline"].is_null());
    assert!(r["overall"]["count"].as_u64().unwrap() > 1000);
}

#[test]
fn baseline_idle_measures_both_phases_back_to_back() {
    let _g = serial();
    let mut args = vec![
        "latency",
        "--baseline",
        "idle",
        "--stress",
        "cpu",
        "--duration",
        "1s",
        "-i",
        "1ms",
    ];
    args.extend(UNPRIVILEGED);
    let (doc, left, rc) = run_marked("base", &args);
    assert_eq!(rc, 0, "{doc}");
    assert!(left.is_empty(), "stressors left behind: {left:?}");
    let r = &doc["results"];
    let b = &r["baseline"];
    // 1 s at 1 ms per CPU: a wide band for a loaded 2-core VM.
    let cpus = r["per_cpu"].as_array().unwrap().len() as u64;
    for phase in [b, r] {
        let n = phase["overall"]["count"].as_u64().unwrap();
        assert!(
            (300 * cpus..=1100 * cpus).contains(&n),
            "{n} wake-ups on {cpus} CPUs"
        );
    }
    assert!(b["stress"].is_null(), "the baseline ran idle");
    assert!(b["baseline"].is_null());
    assert_eq!(r["stress"]["presets"], serde_json::json!(["cpu"]));
    assert!(doc["config"]["baseline_idle"].as_bool().unwrap());
}

#[test]
fn run_with_compete_voip_reports_its_jobs_beside_the_engine() {
    let _g = serial();
    // As SCHED_OTHER the task would only measure how busy the machine's other tenants are.
    if !require(is_root(), "root, for a SCHED_FIFO competing task") {
        return;
    }
    let (doc, _, rc) = run_marked(
        "run",
        &[
            "run",
            "--chain",
            "thru",
            "--compete",
            "voip:fifo:15",
            "--duration",
            "2s",
            "--json",
        ],
    );
    assert_eq!(rc, 0, "{doc}");
    let r = &doc["results"];
    let jobs = r["compete"]["stats"]["jobs"].as_u64().unwrap();
    // 10 ms period for about 2 s (the task starts just before the engine, stops after it).
    // A host stall can cut the count (so the lower bound is generous); the engine's own
    // start and stop add a few releases on top of the 200.
    assert!((100..=250).contains(&jobs), "{jobs} jobs");
    assert_eq!(doc["config"]["compete"]["name"], "voip");
    // 1500 periods of 64 frames in 2 s; host stalls skip some (seen: under 1000 ran).
    let (cycles, skipped) = (
        r["cycles"].as_u64().unwrap(),
        r["skipped_periods"].as_u64().unwrap(),
    );
    assert_eq!(cycles + skipped, r["periods_elapsed"].as_u64().unwrap());
    assert!(cycles > 300, "{cycles} cycles");
    assert!(r["stress"].is_null());
}

#[test]
fn sigint_during_latency_under_stress_reaps_every_stressor() {
    let _g = serial();
    let mark = format!("XRUNLAB_WIRED_MARK={}-sigint", std::process::id());
    let (k, v) = mark.split_once('=').unwrap();
    let mut args = vec!["latency", "--stress", "cpu,proc", "--duration", "60s"];
    args.extend(UNPRIVILEGED);
    let child = Command::new(env!("CARGO_BIN_EXE_xrunlab"))
        .args(&args)
        .env(k, v)
        .env_remove("CI")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let me = child.id() as i32;
    let t = Instant::now();
    while pids_with_env(&mark).iter().filter(|&&p| p != me).count() < 2 {
        assert!(
            t.elapsed() < Duration::from_secs(15),
            "stressors did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(me, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["status"], "interrupted");
    assert_eq!(
        doc["results"]["stress"]["presets"],
        serde_json::json!(["cpu", "proc"])
    );
    let left = pids_with_env(&mark);
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn latencytest_phases_on_short_real_runs() {
    let _g = serial();
    // A SCHED_OTHER loop on a machine busy compiling gets a fraction of a core and misses most
    // fragments: only a real-time loop makes the cycle count a property of the device.
    if !require(is_root(), "root, for the SCHED_FIFO loop") {
        return;
    }
    let cfg = LatencytestConfig {
        phase_duration_ns: 2_000_000_000,
        classes: vec!["graphics".into(), "cpu".into(), "proc".into()],
        policy: Policy::fifo(50),
        mlock: false,
        ..Default::default()
    };
    let stress = StressSpec {
        stressor_exe: Some(env!("CARGO_BIN_EXE_xrunlab").into()),
        ..Default::default()
    };
    let r = latencytest::run(
        &cfg,
        &mut xrunlab::measure::session::Session::silent().with_stress(stress),
    )
    .unwrap()
    .results;
    let graphics = latencytest::graphics_stressor();
    let names: Vec<&str> = r.phases.iter().map(|p| p.name.as_str()).collect();
    if let Err(reason) = &graphics {
        assert_eq!(names, ["idle", "cpu", "proc"]);
        assert_eq!(r.skipped.len(), 1);
        assert_eq!(r.skipped[0].preset, "graphics");
        assert_eq!(&r.skipped[0].reason, reason);
    } else {
        assert_eq!(names, ["idle", "graphics", "cpu", "proc"]);
    }
    let nominal = 2e9 / r.fragment_ns as f64;
    for p in &r.phases {
        let c = p.cycles as f64;
        // A host stall of a second empties the device and loses the cycles it covered,
        // so the lower bound leaves room for one; more cycles than fragments cannot be.
        assert!(
            (0.3 * nominal..=1.3 * nominal).contains(&c),
            "{}: {} cycles, expected about {nominal:.0}",
            p.name,
            p.cycles
        );
        // The series holds every cycle and the statistics cover them all.
        assert_eq!(p.series.loop_ns.len() as u64, p.cycles);
        assert_eq!(p.series.dropped, 0);
        assert_eq!(p.loop_ns.count, p.cycles);
        // The loop is paced by the blocking write: its median is one fragment.
        let med = p.loop_ns.p50 as f64 / r.fragment_ns as f64;
        assert!(
            (0.5..=1.5).contains(&med),
            "{}: median loop {med} fragments",
            p.name
        );
        assert!(p.burn_ns.p50 >= r.burn_nominal_ns / 2, "{}", p.name);
        assert!(p.overruns <= p.over_fragment);
        assert!((0.0..=100.0).contains(&p.loop_within_1ms_pct));
        assert!(p.loop_within_100us_pct <= p.loop_within_1ms_pct);
        assert_eq!(p.stress.is_some(), p.name != "idle", "{}", p.name);
    }
    assert!(!r.interrupted);
}

#[test]
fn bad_arguments_exit_2_without_writing() {
    let out = std::env::temp_dir().join(format!("xrunlab-wired-{}.json", std::process::id()));
    let o = out.to_str().unwrap();
    for args in [
        &["latencytest", "--fragments", "1"][..],
        &["latencytest", "--burn", "150%"],
        &["latencytest", "--classes", "cpu,bogus"],
        &["latencytest", "--phase-duration", "soon"],
        &["latency", "--baseline", "idle", "--duration", "1s"],
        &["latency", "--baseline", "busy", "--stress", "cpu"],
        &["latency", "--stress", "cpu,nonsense", "--duration", "1s"],
        &["run", "--compete", "sometimes", "--duration", "1s"],
        &["run", "--stress", "bogus", "--duration", "1s"],
    ] {
        let mut a = args.to_vec();
        a.extend(["-o", o]);
        xrunlab().args(&a).assert().code(2);
        assert!(!out.exists(), "{args:?} wrote {o}");
    }
}
