//! Deterministic tests of the engine's xrun accounting on the sim driver: every expected
//! count is exact, because the sim's time is simulated and its compute is a cost model.

use xrunlab::common::cycle::Cause;
use xrunlab::driver::sim::{LatencyModel, SimEvent};
use xrunlab::engine::cost::CostModel;
use xrunlab::measure::run::{run, RunConfig, RunOutcome};
use xrunlab::measure::run::{ComputeKind, DriverKind};
use xrunlab::progress::Silent;
use xrunlab::results::Status;

/// 48 frames at 48 kHz: P = 1 ms exactly, so boundaries are exact.
fn sim(chain: &str, duration_ms: u64) -> RunConfig {
    let mut c = RunConfig::new(DriverKind::Sim, chain).unwrap();
    c.buffer_frames = 48;
    c.duration_ns = duration_ms * 1_000_000;
    c
}

fn events(list: &[&str]) -> Vec<SimEvent> {
    list.iter().map(|s| s.parse().unwrap()).collect()
}

fn go(c: &RunConfig) -> RunOutcome {
    let r = run(c, &mut xrunlab::measure::session::Session::silent()).unwrap();
    assert_eq!(r.status, Status::Complete);
    assert_eq!(r.results.dropped_records, 0);
    r
}

#[test]
fn a_clean_run_has_no_xrun_and_exact_loads() {
    let r = go(&sim("burn(30%),thru", 1000));
    let x = &r.results;
    assert_eq!(x.period_ns, 1_000_000);
    assert_eq!(x.cycles, 1000);
    assert_eq!(x.xruns.total, 0);
    assert_eq!(x.skipped_periods, 0);
    assert_eq!(x.wall_ns.max, 300_000);
    assert!((x.dsp_load_pct.mean - 30.0).abs() < 1e-9);
    assert!((x.cpu_load_pct.max - 30.0).abs() < 1e-9);
    assert_eq!(x.wake_latency_ns.max, 0);
    assert_eq!(x.driver_period_ns.min, 1_000_000);
    assert_eq!(x.driver_period_ns.max, 1_000_000);
    assert!(
        r.warnings.iter().any(|w| w.contains("thru")),
        "{:?}",
        r.warnings
    );
}

#[test]
fn injected_events_give_exactly_the_expected_xruns_and_causes() {
    let mut c = sim("burn(30%)", 1000);
    c.sim.events = events(&[
        "late:100:2ms",      // wake 2 ms late: late-wakeup, ends at 2.3 ms -> skips 2 periods
        "compute:200:1ms",   // 1.3 ms of CPU: overload, skips 1
        "preempt:300:1ms",   // 0.3 ms CPU + 1 ms off-CPU: interference, skips 1
        "compute:400:700us", // ends exactly at the deadline: in time
        "late:500:600us",    // 0.6 + 0.3 = 0.9 ms: in time
        "preempt:601:5ms",   // 0.3 + 5 ms: interference, skips 5
    ]);
    let r = go(&c);
    let x = &r.results;
    assert_eq!(x.xruns.total, 4);
    assert_eq!(x.xruns.late_wakeup, 1);
    assert_eq!(x.xruns.overload, 1);
    assert_eq!(x.xruns.interference, 2);
    assert_eq!(x.skipped_periods, 2 + 1 + 1 + 5);
    assert_eq!(x.cycles + x.skipped_periods, 1000);
    assert_eq!(x.periods_elapsed, 1000);
    let got: Vec<(u64, Cause)> = x.xrun_events.iter().map(|e| (e.cycle, e.cause)).collect();
    assert_eq!(
        got,
        vec![
            (100, Cause::LateWakeup),
            (200, Cause::Overload),
            (300, Cause::Interference),
            (601, Cause::Interference)
        ]
    );
    let e = x.xrun_events[0];
    assert_eq!(
        (e.wake_latency_ns, e.wall_ns, e.end_time_ns),
        (2_000_000, 300_000, 2_300_000)
    );
    let e = x.xrun_events[2];
    assert_eq!((e.crit_cpu_ns, e.interference_ns), (300_000, 1_000_000));
    // The sink saw the same gaps the device clock counted.
    assert_eq!(x.sink.periods_missing, x.skipped_periods);
    assert_eq!(x.sink.periods_late, 4);
}

#[test]
fn events_on_skipped_periods_are_not_applied() {
    let mut c = sim("burn(10%)", 100);
    c.sim.events = events(&["late:10:1500us", "late:11:5ms"]);
    let x = go(&c).results;
    assert_eq!(x.xruns.total, 1);
    assert_eq!(x.skipped_periods, 1);
}

#[test]
fn device_time_never_shifts() {
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("t.csv");
    let mut c = sim("burn(50%)", 300);
    c.sim.events = events(&["late:50:3500us", "compute:120:2ms", "preempt:200:700us"]);
    c.trace = Some(trace.display().to_string());
    let x = go(&c).results;
    let mut rd = csv::Reader::from_path(&trace).unwrap();
    let h = rd.headers().unwrap().clone();
    let col = |n: &str| h.iter().position(|c| c == n).unwrap();
    let (ci, ti, si) = (col("cycle"), col("t_ideal_ns"), col("skipped_before"));
    let mut rows = 0u64;
    let mut prev: Option<u64> = None;
    let mut t0 = None;
    for rec in rd.records() {
        let rec = rec.unwrap();
        let k: u64 = rec[ci].parse().unwrap();
        let t: u64 = rec[ti].parse().unwrap();
        let skipped: u64 = rec[si].parse().unwrap();
        let t0 = *t0.get_or_insert(t);
        assert_eq!(t, t0 + k * 1_000_000, "period {k} moved");
        if let Some(p) = prev {
            assert_eq!(k, p + 1 + skipped, "gap before {k} not counted");
        }
        prev = Some(k);
        rows += 1;
    }
    assert_eq!(rows, x.cycles);
    assert_eq!(x.xruns.total, 3);
    // 3.5 ms late + 0.5 ms -> ends at 4 ms: periods 51..53 skipped, 54 starts on time.
    assert_eq!(x.skipped_periods, 3 + 2 + 1);
}

#[test]
fn cost_model_capacity_is_floor_of_period_over_cost() {
    // c = 100 µs, P = 1 ms: 10 instances fit exactly (end == deadline is in time).
    let mut c = sim("gain:10", 100);
    c.cost.costs = vec![CostModel::parse_cost("gain=100us").unwrap()];
    let x = go(&c).results;
    assert_eq!(x.xruns.total, 0);
    assert_eq!(x.wall_ns.max, 1_000_000);
    // 11 instances: every processed cycle overruns and skips the next period.
    c.chain_elements = xrunlab::dsp::parse_chain("gain:11").unwrap();
    let x = go(&c).results;
    assert_eq!(x.xruns.total, 50);
    assert_eq!(x.xruns.overload, 50);
    assert_eq!(x.skipped_periods, 50);
    // n = 3 absorbs single spikes but not a sustained 10 % overrun.
    c.periods = 3;
    let x = go(&c).results;
    assert!(x.xruns.total > 0 && x.xruns.overload == x.xruns.total);
    c.chain_elements = xrunlab::dsp::parse_chain("gain:10").unwrap();
    assert_eq!(go(&c).results.xruns.total, 0);
}

#[test]
fn tracks_spread_over_threads_as_the_model_says() {
    // 4 tracks of 400 µs on 2 threads: 800 µs wall, 1.6 ms CPU.
    let mut c = sim("burn(40%)", 50);
    c.tracks = 4;
    c.cpus = vec![0, 0];
    let x = go(&c).results;
    assert_eq!(x.threads.len(), 2);
    assert_eq!(x.wall_ns.max, 800_000);
    assert_eq!(x.cpu_ns.max, 1_600_000);
    assert_eq!(x.track_end_max_ns, vec![400_000, 400_000, 800_000, 800_000]);
    assert_eq!(x.xruns.total, 0);
    c.tracks = 6; // 1.2 ms on the critical thread
    let x = go(&c).results;
    assert_eq!(x.xruns.overload, x.xruns.total);
    assert!(x.xruns.total > 0);
}

#[test]
fn latency_models_are_reproducible_for_a_seed() {
    let mut c = sim("burn(60%)", 2000);
    c.sim.latency = LatencyModel::parse("heavy:20us,30us,1.3").unwrap();
    c.seed = 42;
    let a = go(&c).results;
    let b = go(&c).results;
    assert_eq!(a, b);
    assert!(
        a.xruns.total > 0,
        "a heavy tail past 400 µs should hit a few cycles"
    );
    // The larger of the late wake-up and the 600 µs of CPU is the cause, cycle by cycle.
    assert!(a.xruns.late_wakeup > 0 && a.xruns.interference == 0);
    for e in &a.xrun_events {
        let want = if e.sched_latency_ns > e.crit_cpu_ns {
            Cause::LateWakeup
        } else {
            Cause::Overload
        };
        assert_eq!(e.cause, want, "{e:?}");
        assert!(e.sched_latency_ns > 400_000);
    }
    c.seed = 43;
    assert_ne!(go(&c).results.xrun_events, a.xrun_events);
}

#[test]
fn measured_compute_runs_the_real_dsp_on_simulated_time() {
    let mut c = sim("burn(20%)", 200);
    c.compute = ComputeKind::Measured;
    c.input = "sine:1000".parse().unwrap();
    let x = go(&c).results;
    // Real time can preempt the real DSP (tests run in parallel), so only the device
    // accounting is exact here.
    assert_eq!(x.cycles + x.skipped_periods, 200);
    // Real burn work measured, laid on simulated time: generous bounds.
    assert!(
        x.cpu_ns.p50 > 50_000 && x.cpu_ns.p50 < 800_000,
        "{:?}",
        x.cpu_ns
    );
    assert_eq!(x.wake_latency_ns.max, 0);
    assert!(x.sink.peak > 0.4, "the sine must pass through burn");
}

/// The cycles at which `stalled_worker` stalls worker 1's core.
const STALLS: [u64; 6] = [100, 130, 160, 190, 220, 250];

/// `tracks` tracks on two threads, the worker's core stalled for 50 ms at each of `STALLS`
/// (`--inject stall`), the real DSP on simulated time: the records of the stalled cycles that
/// ran, and the result. P = 10 ms and 50 µs per track, and thread 0 has 50 ms to run every
/// track of a stalled cycle. On a machine shared with builds a cycle can still be late, and
/// the periods an xrun skips take their injected stalls with them, hence six stalls of which
/// some must run; the placement tests run one at a time, as each pins its two threads to the
/// same two CPUs.
fn stalled_worker(
    pin: xrunlab::engine::Placement,
    tracks: u32,
) -> (Vec<xrunlab::common::CycleRecord>, RunOutcome) {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut c = sim("burn(0.5%)", 3000);
    c.buffer_frames = 480;
    c.compute = ComputeKind::Measured;
    c.tracks = tracks;
    c.pin = pin;
    // Two engine threads even on a one-CPU machine (both then share it).
    let cpus = xrunlab::rt::affinity::allowed_cpus().unwrap();
    c.cpus = vec![cpus[0], *cpus.get(1).unwrap_or(&cpus[0])];
    c.sim.events = STALLS
        .iter()
        .map(|k| format!("stall:{k}:50ms").parse().unwrap())
        .collect();
    let (tx, rx) = std::sync::mpsc::channel();
    let r = xrunlab::measure::run::run_observed(
        &c,
        &Silent,
        xrunlab::measure::run::Observe {
            tap: Some(tx),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(r.status, Status::Complete);
    let stalled: Vec<_> = rx.iter().filter(|x| STALLS.contains(&x.cycle)).collect();
    assert!(
        stalled.len() >= 2,
        "only cycles {:?} of the stalled ones ran",
        stalled.iter().map(|x| x.cycle).collect::<Vec<_>>()
    );
    (stalled, r)
}

#[test]
fn a_stalled_worker_loses_its_unstarted_tracks_to_thread_0() {
    use xrunlab::engine::Placement;
    let (stalled, r) = stalled_worker(Placement::Steal, 4);
    let n = stalled.len() as u64;
    for rec in &stalled {
        let k = rec.cycle;
        assert_eq!(rec.threads, 2);
        assert_eq!(
            &rec.track_thread[..4],
            &[0, 0, 0, 0],
            "cycle {k}: thread 0 runs the stalled worker's tracks 1 and 3"
        );
        assert!(
            rec.wall_ns() < 25_000_000,
            "cycle {k}: thread 0 did not wait for the stalled worker ({} ns)",
            rec.wall_ns()
        );
    }
    let p = r
        .results
        .placement
        .expect("a two-thread run reports its placement");
    assert_eq!(p.mode, Placement::Steal);
    assert!(p.home_tracks_taken[1] >= 2 * n, "{p:?}");
    assert!(
        p.stolen_tracks >= 2 * n && p.cycles_with_stolen >= n,
        "{p:?}"
    );
    assert_eq!(p.tracks_run.iter().sum::<u64>(), 4 * r.results.cycles);

    // Pinned: the stalled worker's tracks wait for it, and the cycle is 50 ms long.
    let (stalled, r) = stalled_worker(Placement::Pinned, 4);
    for rec in &stalled {
        let k = rec.cycle;
        assert_eq!(&rec.track_thread[..4], &[0, 1, 0, 1], "cycle {k}");
        assert!(
            rec.wall_ns() >= 50_000_000,
            "cycle {k}: {} ns",
            rec.wall_ns()
        );
        assert!(rec.xrun);
    }
    let p = r.results.placement.unwrap();
    assert_eq!((p.stolen_tracks, p.cycles_with_stolen), (0, 0), "{p:?}");
    assert_eq!(p.home_tracks_taken, [0, 0]);
    assert_eq!(p.tracks_run[0], p.tracks_run[1]);
}

/// More tracks than CPUs (N unconnected clients of one plugin, the graph JACK2 runs with N
/// clients): the engine threads are a work queue. When worker 1's core stalls before it took
/// a track, thread 0 takes every track not yet started and the cycle does not wait for the
/// worker; the result says which thread ran each track.
#[test]
fn many_tracks_are_a_work_queue_that_survives_a_stalled_worker() {
    use xrunlab::engine::Placement;
    let (stalled, r) = stalled_worker(Placement::Steal, 16);
    let n = stalled.len() as u64;
    for rec in &stalled {
        let k = rec.cycle;
        assert_eq!((rec.threads, rec.tracks), (2, 16));
        assert!(
            rec.track_thread[..16].iter().all(|&t| t == 0),
            "cycle {k}: thread 0 runs all 16 tracks: {:?}",
            &rec.track_thread[..16]
        );
        assert!(
            rec.wall_ns() < 25_000_000,
            "cycle {k}: thread 0 waited for the stalled worker ({} ns)",
            rec.wall_ns()
        );
    }
    let p = r.results.placement.expect("placement is reported");
    assert_eq!(p.per_track.len(), 16);
    for (i, row) in p.per_track.iter().enumerate() {
        assert_eq!(row.len(), 2, "track {i}: {row:?}");
        assert_eq!(
            row.iter().sum::<u64>(),
            r.results.cycles,
            "track {i} runs once per cycle: {row:?}"
        );
        if i % 2 == 1 {
            assert!(
                row[0] >= n,
                "track {i} (worker 1's) ran on thread 0 in every stalled cycle: {row:?}"
            );
        }
    }
    assert!(p.home_tracks_taken[1] >= 8 * n, "{p:?}");
    if xrunlab::rt::affinity::allowed_cpus().unwrap().len() >= 2 {
        assert!(p.tracks_run[1] > 0, "the worker never took a track: {p:?}");
    }

    // Pinned: the stalled worker's 8 tracks wait for it.
    let (stalled, _) = stalled_worker(Placement::Pinned, 16);
    let home: Vec<u8> = (0..16).map(|i| (i % 2) as u8).collect();
    for rec in &stalled {
        assert_eq!(&rec.track_thread[..16], &home[..], "cycle {}", rec.cycle);
        assert!(
            rec.wall_ns() >= 50_000_000 && rec.xrun,
            "cycle {}: {} ns",
            rec.cycle,
            rec.wall_ns()
        );
    }
}
