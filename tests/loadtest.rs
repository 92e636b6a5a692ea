//! The DSP load search (`xrunlab load`) on the sim driver with a cost model of known
//! capacity, where every maximum is exact; plus one tiny real grid on the virtual driver.
//!
//! The model (src/engine/cost.rs): with n = 2 and one track per engine thread, k instances
//! of cost c plus a per-cycle overhead o on thread 0 overload a cycle iff o + k·c > P, so the
//! maximum is ⌊(P − o)/c⌋ — the issue's ⌊B·k/c⌋ with budget B = P − o and k = 1 (the
//! sustained budget is one period for any n).

mod common;

use common::{is_root, xrunlab};
use xrunlab::common::cycle::Cause;
use xrunlab::engine::collector::StopCriterion;
use xrunlab::engine::cost::CostModel;
use xrunlab::measure::loadtest::{
    search, Checkpoints, Criterion, LoadConfig, LoadResults, LIMIT_STEPS,
};
use xrunlab::measure::run::DriverKind;
use xrunlab::measure::run::RunConfig;
use xrunlab::results::{Body, ResultDoc, Status};
use xrunlab::rt::Policy;

/// Buffers that are multiples of 48 frames at 48 kHz: P is an exact number of ns.
fn sim_cfg(buffers: &[u32], tracks: &[u32], per_frame_ns: &[(&str, f64)], o_ns: u64) -> LoadConfig {
    let mut c = LoadConfig::new(DriverKind::Sim, vec![0, 1]);
    c.buffers = buffers.to_vec();
    c.tracks = tracks.to_vec();
    c.plugins = per_frame_ns.iter().map(|(p, _)| p.to_string()).collect();
    c.cost = CostModel {
        costs: per_frame_ns
            .iter()
            .map(|(p, f)| CostModel::parse_cost(&format!("{p}={f}ns/frame")).unwrap())
            .collect(),
        overhead_ns: o_ns,
    };
    c.duration_ns = 2_000_000_000;
    c
}

fn expected_max(buffer: u32, per_frame_ns: f64, o_ns: u64) -> u32 {
    let p = buffer as u64 * 1_000_000_000 / 48_000;
    let c = (per_frame_ns * buffer as f64).round() as u64;
    ((p - o_ns) / c) as u32
}

fn go(c: &LoadConfig, prior: Option<&LoadResults>) -> (LoadResults, usize) {
    let mut calls = 0;
    let out = xrunlab::measure::loadtest::run(
        c,
        &mut xrunlab::measure::session::Session::silent(),
        Checkpoints {
            prior,
            on_cell: &mut |_| {
                calls += 1;
                Ok(())
            },
        },
    )
    .unwrap();
    assert_eq!(out.status, Status::Complete);
    (out.results, calls)
}

#[test]
fn search_finds_every_maximum_of_a_monotone_trial() {
    for est in 0..40u32 {
        for m in 0..40u32 {
            let mut asked = Vec::new();
            let r = search(est, 64, |n| {
                asked.push(n);
                Ok(Some(n <= m))
            })
            .unwrap();
            assert_eq!(r, Some((m, false)), "est {est} max {m}");
            assert!(!asked.contains(&0), "0 instances is never run");
            let mut dedup = asked.clone();
            dedup.sort();
            dedup.dedup();
            assert_eq!(
                dedup.len(),
                asked.len(),
                "no count is tried twice: {asked:?}"
            );
            // Bracketing by doubling steps plus bisection: logarithmic in the estimate's error.
            let err = est.max(1).abs_diff(m) + 1;
            let bound = 2 * (32 - err.leading_zeros()) + 2;
            assert!(asked.len() as u32 <= bound, "est {est} max {m}: {asked:?}");
        }
    }
    // The cap is a maximum of its own.
    assert_eq!(
        search(10, 12, |_| Ok(Some(true))).unwrap(),
        Some((12, true))
    );
    // Interrupted.
    assert_eq!(search(10, 12, |_| Ok(None)).unwrap(), None);
}

#[test]
fn exact_maxima_with_two_trials_when_the_limit_is_exact() {
    let plugins = [("reverb-light", 250.0), ("reverb-heavy", 700.0)];
    let c = sim_cfg(&[48, 96, 192], &[1, 2], &plugins, 0);
    let (r, calls) = go(&c, None);
    assert_eq!(calls, 12);
    assert_eq!(r.cells.len(), 12);
    for cell in &r.cells {
        let f = plugins.iter().find(|p| p.0 == cell.plugin).unwrap().1;
        let m = expected_max(cell.buffer_frames, f, 0);
        assert_eq!(cell.max_per_track, m, "{cell:?}");
        assert_eq!(cell.total_instances, m * cell.tracks);
        assert_eq!(cell.limit.per_track, m);
        // The cost model is the estimate: no bench, nothing measured with K instances.
        assert_eq!(cell.limit.source, "cost-model");
        assert!(cell.limit.steps.is_empty() && cell.limit.used().is_none());
        // The estimate is exact: it passes and one more fails.
        let seq: Vec<(u32, bool)> = cell
            .trials
            .iter()
            .map(|t| (t.instances_per_track, t.passed))
            .collect();
        assert_eq!(seq, [(m, true), (m + 1, false)], "{}", cell.plugin);
        assert_eq!(cell.xruns.total, 0);
        assert!(cell.dsp_load_pct.mean > 90.0 && cell.dsp_load_pct.max <= 100.0);
        let per = cell.dsp_load_pct.mean / m as f64;
        assert!((cell.dsp_load_per_instance_pct - per).abs() < 1e-9);
    }
}

#[test]
fn overhead_makes_the_search_bracket_down_then_bisect() {
    // 48 frames: P = 1 ms, c = 24 µs, est = ⌊1000/24⌋ = 41; with 100 µs overhead the
    // maximum is ⌊900/24⌋ = 37: 41 ✗, 40 ✗, 38 ✗, 34 ✓, then 36 ✓, 37 ✓.
    let c = sim_cfg(&[48], &[1], &[("reverb-heavy", 500.0)], 100_000);
    let (r, _) = go(&c, None);
    let cell = &r.cells[0];
    assert_eq!(cell.limit.per_track, 41);
    assert_eq!(cell.max_per_track, 37);
    let seq: Vec<(u32, bool)> = cell
        .trials
        .iter()
        .map(|t| (t.instances_per_track, t.passed))
        .collect();
    assert_eq!(
        seq,
        [
            (41, false),
            (40, false),
            (38, false),
            (34, true),
            (36, true),
            (37, true)
        ]
    );
}

#[test]
fn a_larger_buffer_never_yields_fewer_instances() {
    let c = sim_cfg(
        &[48, 96, 192, 384, 768],
        &[1],
        &[("reverb-light", 300.0)],
        80_000,
    );
    let (r, _) = go(&c, None);
    let maxima: Vec<u32> = r.cells.iter().map(|c| c.max_per_track).collect();
    for (cell, &m) in r.cells.iter().zip(&maxima) {
        assert_eq!(m, expected_max(cell.buffer_frames, 300.0, 80_000));
    }
    assert!(maxima.windows(2).all(|w| w[0] <= w[1]), "{maxima:?}");
    assert!(maxima[0] < maxima[4]);
}

#[test]
fn a_trial_stops_at_its_first_disqualifying_xrun() {
    // 60 s at P = 1 ms is 60 000 cycles; a failing trial overloads from cycle 0 and must stop
    // long before (the driver is at most one probe ring, 4096 records, ahead).
    let mut c = sim_cfg(&[48], &[1], &[("reverb-heavy", 500.0)], 0);
    c.duration_ns = 60_000_000_000;
    let (r, _) = go(&c, None);
    let cell = &r.cells[0];
    let failed = cell.trials.iter().find(|t| !t.passed).unwrap();
    assert_eq!(failed.stopped_at_cycle, Some(0));
    assert!(failed.cycles < 30_000, "{failed:?}");
    assert!(failed.duration_ns < 30_000_000_000);
    let passed = cell.trials.iter().find(|t| t.passed).unwrap();
    assert_eq!(passed.cycles, 60_000);
    assert_eq!(passed.stopped_at_cycle, None);

    // The engine hook itself: a late wake-up does not stop an overload-criterion run, the
    // first long compute does.
    let mut rc = RunConfig::new(DriverKind::Sim, "burn(50%)").unwrap();
    rc.buffer_frames = 48;
    rc.duration_ns = 20_000_000_000;
    rc.sim.events = ["late:100:2ms", "compute:500:900us", "compute:600:900us"]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
    rc.stop_on = Some(StopCriterion::Overload);
    let r =
        xrunlab::measure::run::run(&rc, &mut xrunlab::measure::session::Session::silent()).unwrap();
    assert_eq!(r.status, Status::Complete);
    assert_eq!(r.results.early_stop_cycle, Some(500));
    assert_eq!(r.results.xrun_events[0].cause, Cause::LateWakeup);
    assert!(r.results.xrun_events.iter().any(|e| e.cycle == 500));
    assert!(r.results.cycles < 15_000, "{}", r.results.cycles);
    rc.stop_on = Some(StopCriterion::AnyXrun);
    let r =
        xrunlab::measure::run::run(&rc, &mut xrunlab::measure::session::Session::silent()).unwrap();
    assert_eq!(r.results.early_stop_cycle, Some(100));
}

#[test]
fn overloads_in_the_warm_up_are_recorded_not_judged() {
    // A 1 ms compute spike at cycle 10 of every trial (P = 1 ms): an overload at any count.
    let mut c = sim_cfg(&[48], &[1], &[("reverb-heavy", 500.0)], 0);
    c.duration_ns = 200_000_000;
    c.sim.events = vec!["compute:10:1ms".parse().unwrap()];
    assert_eq!(c.warmup_cycles, 0, "the sim driver has no start-up");
    let (r, _) = go(&c, None);
    assert_eq!(
        r.cells[0].max_per_track, 0,
        "without a warm-up the spike decides"
    );
    assert!(r.cells[0]
        .trials
        .iter()
        .all(|t| t.stopped_at_cycle == Some(10)));

    c.warmup_cycles = 11;
    let (r, _) = go(&c, None);
    let cell = &r.cells[0];
    assert_eq!(cell.max_per_track, expected_max(48, 500.0, 0));
    for t in &cell.trials {
        if t.passed {
            // Recorded, and all of it in the warm-up.
            assert!(t.xruns.overload >= 1, "{t:?}");
            assert_eq!(t.warmup_disqualifying, t.xruns.overload, "{t:?}");
        } else {
            // Too many instances overload every cycle they run (each skips the next period):
            // the first judged one stops the trial, the earlier ones are the warm-up's.
            assert!(t.stopped_at_cycle.is_some_and(|k| k >= 11), "{t:?}");
            assert!(t.warmup_disqualifying >= 1, "{t:?}");
            assert!(t.xruns.overload > t.warmup_disqualifying, "{t:?}");
        }
    }
}

#[test]
fn the_criterion_decides_whether_late_wakeups_disqualify() {
    // A 3 ms late wake-up at cycle 10 of every trial: a late-wakeup xrun whatever the load.
    let mut c = sim_cfg(&[48], &[1], &[("reverb-heavy", 500.0)], 0);
    c.duration_ns = 200_000_000;
    c.sim.events = vec!["late:10:3ms".parse().unwrap()];
    let (r, _) = go(&c, None);
    let cell = &r.cells[0];
    assert_eq!(cell.max_per_track, expected_max(48, 500.0, 0));
    assert!(cell.xruns.late_wakeup >= 1, "reported, not disqualifying");
    assert_eq!(cell.xruns.overload, 0);

    c.criterion = Criterion::All;
    let (r, _) = go(&c, None);
    let cell = &r.cells[0];
    assert_eq!(cell.max_per_track, 0);
    assert!(cell.trials.iter().all(|t| !t.passed));
    assert!(cell.trials.iter().any(|t| t.instances_per_track == 1));
    assert_eq!(cell.dsp_load_pct.mean, 0.0);
}

#[test]
fn validation_lowers_a_maximum_that_fails_a_longer_run() {
    // A long compute at cycle 1500 only a longer run reaches: 1.5 s > the 1 s search trials.
    let mut c = sim_cfg(&[48], &[1], &[("reverb-heavy", 500.0)], 0);
    c.duration_ns = 1_000_000_000;
    c.validate_ns = Some(2_000_000_000);
    // est 41 = 984 µs of 1 ms: 20 µs extra overloads 41, 40 (960 µs) survives it.
    c.sim.events = vec!["compute:1500:20us".parse().unwrap()];
    let (r, _) = go(&c, None);
    let cell = &r.cells[0];
    assert_eq!(cell.max_per_track, 40);
    let v: Vec<(u32, bool)> = cell
        .trials
        .iter()
        .filter(|t| t.phase == xrunlab::measure::loadtest::TrialPhase::Validate)
        .map(|t| (t.instances_per_track, t.passed))
        .collect();
    assert_eq!(v, [(41, false), (40, true)]);
}

/// Per cell: buffer, plugin, maximum and the (count, passed) sequence of its trials.
type Key = Vec<(u32, String, u32, Vec<(u32, bool)>)>;

/// What a grid found, without its timings: equal for two runs of the same sim grid.
fn key(r: &LoadResults) -> Key {
    r.cells
        .iter()
        .map(|c| {
            (
                c.buffer_frames,
                c.plugin.clone(),
                c.max_per_track,
                c.trials
                    .iter()
                    .map(|t| (t.instances_per_track, t.passed))
                    .collect(),
            )
        })
        .collect()
}

#[test]
fn resume_completes_the_same_grid() {
    let plugins = [("reverb-light", 250.0), ("reverb-heavy", 700.0)];
    let c = sim_cfg(&[48, 96, 192], &[1], &plugins, 30_000);
    let (full, _) = go(&c, None);
    let mut partial = full.clone();
    partial.cells.truncate(2);
    let (resumed, calls) = go(&c, Some(&partial));
    assert_eq!(calls, 4, "only the missing cells run");
    assert_eq!(
        resumed.cells[..2],
        partial.cells[..],
        "finished cells kept as they were"
    );
    assert_eq!(key(&resumed), key(&full));

    // The same through the CLI: an interrupted file written as `load -o` writes it.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("load.json");
    let doc = ResultDoc::new(
        Body::Load {
            config: c.clone(),
            results: partial,
        },
        Status::Interrupted,
        "2026-01-01T00:00:00Z".into(),
        xrunlab::system::Environment::capture(),
    );
    xrunlab::results::write_json_atomic(&path, &doc).unwrap();
    xrunlab()
        .args([
            "load",
            "--driver",
            "sim",
            "--buffers",
            "48,96,192",
            "--tracks",
            "1",
            "--plugins",
            "reverb-light,reverb-heavy",
            "--cost",
            "reverb-light=250ns/frame",
            "--cost",
            "reverb-heavy=700ns/frame",
            "--cost-overhead",
            "30us",
            "--duration",
            "2s",
            "--stress",
            "none",
            "-q",
            "--resume",
        ])
        .arg(&path)
        .assert()
        .success();
    let doc = xrunlab::results::read_result(&path).unwrap();
    assert_eq!(doc.status, Status::Complete);
    let Body::Load { results, .. } = doc.body else {
        panic!("not a load result")
    };
    assert_eq!(key(&results), key(&full));
    // A different grid protocol is refused, not mixed in.
    xrunlab()
        .args([
            "load",
            "--driver",
            "sim",
            "--buffers",
            "48",
            "--tracks",
            "1",
        ])
        .args([
            "--plugins",
            "reverb-light",
            "--cost",
            "reverb-light=250ns/frame",
        ])
        .args(["--duration", "5s", "--stress", "none", "-q", "--resume"])
        .arg(&path)
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "duration_ns (was 2000000000, now 5000000000)",
        ))
        .stderr(predicates::str::contains("cost (was"));
}

/// `load --resume FILE` alone continues the grid with the settings in FILE: before, every
/// option left out took its default and the resume was refused as "measured with other
/// settings". An option given beside it that says otherwise than the file is refused by name.
#[test]
fn resume_alone_continues_with_the_files_settings() {
    let dir = tempfile::tempdir().unwrap();
    let full_path = dir.path().join("full.json");
    let grid = [
        "load",
        "--driver",
        "sim",
        "--buffers",
        "48,96",
        "--tracks",
        "1",
        "--plugins",
        "reverb-light",
        "--cost",
        "reverb-light=250ns/frame",
        "--cost-overhead",
        "30us",
        "--duration",
        "1s",
        "--criterion",
        "all",
        "--max-instances",
        "500",
        "--stress",
        "none",
        "-q",
    ];
    xrunlab()
        .args(grid)
        .arg("-o")
        .arg(&full_path)
        .assert()
        .success();
    let full = xrunlab::results::read_result(&full_path).unwrap();
    let Body::Load { config, results } = full.body.clone() else {
        panic!("not a load result")
    };
    // The grid as an interrupted run leaves it: its first cell only.
    let path = dir.path().join("load.json");
    let mut partial = results.clone();
    partial.cells.truncate(1);
    let doc = ResultDoc::new(
        Body::Load {
            config: config.clone(),
            results: partial,
        },
        Status::Interrupted,
        full.started_at.clone(),
        full.environment.clone(),
    );
    xrunlab::results::write_json_atomic(&path, &doc).unwrap();

    let o = xrunlab()
        .args(["load", "--resume"])
        .arg(&path)
        .arg("-q")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", common::show(&o));
    let doc = xrunlab::results::read_result(&path).unwrap();
    assert_eq!(doc.status, Status::Complete);
    let Body::Load {
        config: resumed_cfg,
        results: resumed,
    } = doc.body
    else {
        panic!("not a load result")
    };
    assert_eq!(resumed_cfg, config, "the file's settings, not the defaults");
    assert_eq!(key(&resumed), key(&results));
    assert_eq!(
        resumed.cells[0], results.cells[0],
        "the kept cell as it was"
    );

    // Options beside --resume: the file's values pass, others are refused by name, and the
    // file is left as it was.
    xrunlab()
        .args(["load", "--resume"])
        .arg(&path)
        .args([
            "--duration",
            "1s",
            "--driver",
            "sim",
            "--stress",
            "none",
            "-q",
        ])
        .assert()
        .success();
    let before = std::fs::read(&path).unwrap();
    for (args, option) in [
        (&["--duration", "3s"][..], "--duration"),
        (&["--criterion", "overload"], "--criterion"),
        (&["--stress", "cpu"], "--stress"),
        (&["--driver", "virtual"], "--driver"),
    ] {
        let o = xrunlab()
            .args(["load", "--resume"])
            .arg(&path)
            .args(args)
            .arg("-q")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(&format!(": {option} differs from the settings")),
            "{args:?}: {err}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), before, "{args:?}");
    }
}

#[test]
fn bad_input_is_a_usage_error() {
    for args in [
        vec!["--plugins", "reverb-heavy:3"],
        vec!["--plugins", "hang"],
        vec!["--buffers", "0"],
        vec!["--tracks", "0"],
        vec!["--driver", "sim", "--plugins", "reverb-light"],
        vec!["--cost", "reverb-light=1us"],
        vec!["--reserve-cpu", "999"],
    ] {
        xrunlab()
            .arg("load")
            .args(&args)
            .args(["--stress", "none", "-q"])
            .assert()
            .code(2);
    }
}

#[test]
fn a_tiny_real_grid_completes_on_the_virtual_driver() {
    let mut c = LoadConfig::new(DriverKind::Virtual, vec![0]);
    c.buffers = vec![256];
    c.tracks = vec![1];
    c.plugins = vec!["burn(10%)".into()];
    c.duration_ns = 2_000_000_000;
    c.max_instances = 3;
    c.bench_ns = 50_000_000;
    if !is_root() {
        c.policy = Policy::Other { nice: 0 };
        c.mlock = false;
    }
    let (r, _) = go(&c, None);
    let cell = &r.cells[0];
    // burn(10%) fits ~10 per period: the cap of 3 is the estimate on a quiet machine. The
    // estimate is the bench's wall time, so a machine busy with other work reads the burn as
    // costlier (2 seen while two builds ran beside it); the cell must finish either way.
    assert!((1..=3).contains(&cell.limit.per_track), "{:?}", cell.limit);
    assert!(cell.max_per_track <= 3);
    assert!(!cell.trials.is_empty());
    if cell.max_per_track == 3 {
        assert!(cell.capped);
        assert!(cell.dsp_load_pct.mean > 5.0, "{:?}", cell.dsp_load_pct);
    }
    // The reported trial's thread ran with the minimum timer slack under SCHED_OTHER.
    if cell.max_per_track > 0 {
        let other = matches!(c.policy, Policy::Other { .. });
        assert_eq!(cell.timer_slack_ns, other.then_some(1), "{:?}", c.policy);
    }
}

/// On a real driver the limit is measured with as many instances in series as one engine
/// thread runs at the limit of one instance, in at most three benches, and the result says
/// which count and cost it used.
#[test]
fn the_real_limit_is_measured_at_the_count_it_implies() {
    let mut c = LoadConfig::new(DriverKind::Virtual, vec![0]);
    c.rate = 48000;
    c.bench_ns = 30_000_000;
    // burn(10%) fits ~10 per period; 2 tracks on one CPU put both on the one thread.
    let l = c.physical_limit(256, 2, "burn(10%)").unwrap();
    assert_eq!(l.source, "bench");
    assert!((1..=LIMIT_STEPS).contains(&l.steps.len()), "{l:?}");
    assert_eq!(l.steps[0].instances, 1);
    let used = l.used().unwrap();
    assert_eq!(l.per_track, used.per_track);
    assert!((l.instance_ns - used.ns_per_frame * 256.0).abs() < 1e-6);
    // Each step runs the count the previous one implies (per track × 2 tracks per thread).
    for w in l.steps.windows(2) {
        assert_eq!(w[1].instances, (w[0].per_track * 2).max(1), "{l:?}");
    }
    // A factor of 3 around 5 per track (10 per thread) whatever the VM does.
    assert!((1..=15).contains(&l.per_track), "{l:?}");
    if l.steps.len() > 1 {
        assert!(used.instances > 1, "{l:?}");
    }
}

/// A plugin other than burn: the trials judge their xruns against the tail of the physical
/// limit's bench (its p99.9 per block), and the cell says so.
#[test]
fn trials_take_the_physical_limits_bench_as_their_cost_prior() {
    let mut c = LoadConfig::new(DriverKind::Virtual, vec![0]);
    c.buffers = vec![256];
    c.tracks = vec![1];
    c.plugins = vec!["reverb".into()];
    c.duration_ns = 1_000_000_000;
    c.max_instances = 2;
    c.bench_ns = 30_000_000;
    if !is_root() {
        c.policy = Policy::Other { nice: 0 };
        c.mlock = false;
    }
    let (r, _) = go(&c, None);
    let cell = &r.cells[0];
    let step = cell.limit.used().unwrap();
    let p999 = step.p999_ns_per_frame.expect("the bench's per-block tail");
    assert!(p999 >= step.ns_per_frame, "{step:?}");
    let expected = cell.limit.cost_prior(256).unwrap();
    assert_eq!(
        expected.elements,
        vec![xrunlab::engine::prior::ElementCost::Bench {
            ns_per_frame: p999,
            instances: step.instances,
            buffer_frames: 256
        }]
    );
    if cell.max_per_track > 0 {
        let p = cell.cost_prior.as_ref().expect("the reported run's prior");
        assert_eq!(p.prior, expected);
        // One track of max_per_track instances at the bench's tail.
        let want = (p999 * 256.0 * cell.max_per_track as f64).round() as u64;
        assert!(
            p.track_cycle_ns.abs_diff(want) <= cell.max_per_track as u64,
            "{p:?}"
        );
    }
}

/// The grid's live line says each trial of the cell with the one before it, and is built
/// only for a display.
#[test]
fn the_trial_line_is_built_only_for_a_display() {
    let c = sim_cfg(&[96], &[1], &[("gain", 200.0)], 0);
    let lines = |shows: bool| {
        let (spy, messages) = common::spy::Spy::new(shows);
        let mut session = xrunlab::measure::session::Session::start(Box::new(spy), Vec::new());
        let out = xrunlab::measure::loadtest::run(
            &c,
            &mut session,
            Checkpoints {
                prior: None,
                on_cell: &mut |_| Ok(()),
            },
        )
        .unwrap();
        assert_eq!(out.status, Status::Complete);
        let trials = out.results.cells[0].trials.len();
        let m = messages.lock().unwrap().clone();
        let m: Vec<String> = m.into_iter().filter(|l| l.contains("· trial ")).collect();
        (m, trials)
    };
    let (none, _) = lines(false);
    assert_eq!(none, Vec::<String>::new());
    let (shown, trials) = lines(true);
    assert_eq!(shown.len(), trials, "{shown:?}");
    assert!(shown[0].starts_with("96@48k 1 tr · trial 1: "), "{shown:?}");
    assert!(!shown[0].contains("last"), "{shown:?}");
    assert!(
        shown[1..].iter().all(|l| l.contains(" · last ")),
        "{shown:?}"
    );
    assert!(shown
        .iter()
        .all(|l| l.chars().count() <= 80 && l.ends_with("gain")));
}
