//! `xrunlab sched` on the virtual driver: every policy row runs and records seed 003's metrics,
//! and an over-committed DEADLINE system gives the admission message. Timing is not judged: a
//! 2-core VM shared with compilers cannot be expected to meet 2.6 ms deadlines.

mod common;
use common::{is_root, require, xrunlab};
use xrunlab::measure::reservation::ControllerConfig;
use xrunlab::measure::sched::{run, SchedConfig, SchedPolicy};
use xrunlab::progress::Silent;
use xrunlab::results::Status;
use xrunlab::rt::Policy;

fn config(policies: Vec<SchedPolicy>, duration_ns: u64) -> SchedConfig {
    let period_ns = 128 * 1_000_000_000 / 48000;
    SchedConfig {
        policies,
        driver: xrunlab::engine::run::DriverKind::Virtual,
        rate: 48000,
        buffer_frames: 128,
        clients: 4,
        client_pct: 5.0,
        duration_ns,
        prio: 10,
        budget_ns: period_ns * 9 / 10,
        controller: ControllerConfig::for_period(period_ns),
        compete: Some("voip".parse().unwrap()),
    }
}

#[test]
fn every_policy_runs_and_records_its_metrics() {
    if !require(is_root(), "root (FIFO and DEADLINE policies)") {
        return;
    }
    use SchedPolicy::*;
    let cfg = config(
        vec![Other, Fifo, Deadline, DeadlineAdaptive, DeadlineReclaim],
        2_000_000_000,
    );
    let r = run(&cfg, &Silent).unwrap();
    assert_eq!(r.status, Status::Complete);
    let rows = &r.results.rows;
    // fifo gives two rows: the competitor above, then below the engine.
    assert_eq!(
        rows.len(),
        6,
        "{:?}",
        rows.iter().map(|r| &r.label).collect::<Vec<_>>()
    );
    assert_eq!(rows[1].compete_policy, Some(Policy::fifo(15)));
    assert_eq!(rows[2].compete_policy, Some(Policy::fifo(5)));
    for row in rows {
        let e = &row.engine;
        // 2 s of 2.67 ms periods = 750; allow for a very slow VM.
        assert!(
            e.periods_elapsed > 300,
            "{}: {}",
            row.label,
            e.periods_elapsed
        );
        assert!(e.driver_period_ns.count > 100, "{}", row.label);
        assert!(e.end_time_ns.max >= e.end_time_ns.min, "{}", row.label);
        assert!(e.cpu_ns.mean > 0.0, "{}", row.label);
        let c = row.compete.as_ref().expect("competitor stats");
        assert!(c.jobs > 50, "{}: {} jobs", row.label, c.jobs);
        let dl = matches!(row.engine_policy, Policy::Deadline { .. });
        assert_eq!(row.unpinned, dl, "{}", row.label);
        if matches!(row.policy, DeadlineAdaptive | DeadlineReclaim) {
            assert!(!row.q_series.is_empty(), "{}", row.label);
            assert!(row.q_updates >= 1, "{}", row.label);
            assert_eq!(row.q_errors, 0, "{}: {:?}", row.label, row.q_first_error);
            let (lo, hi) = (cfg.controller.q_min_ns, cfg.controller.q_max_ns());
            assert!(row
                .q_series
                .iter()
                .all(|q| q.set_q_ns >= lo && q.set_q_ns <= hi));
        } else {
            assert!(row.q_series.is_empty(), "{}", row.label);
        }
    }
    assert!(r.warnings.iter().any(|w| w.contains("unpinned")));
}

#[test]
fn overcommitted_deadline_bandwidth_gives_the_admission_message() {
    if !require(is_root(), "root (SCHED_DEADLINE)") {
        return;
    }
    // Hold a full-CPU reservation on all CPUs but one; the competitor (another full CPU) and
    // the engine (budget = P) cannot both fit under 95 % of every CPU.
    let n = xrunlab::rt::affinity::allowed_cpus().unwrap().len();
    let hold = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let (tx, rx) = std::sync::mpsc::channel();
    let holders: Vec<_> = (0..n.saturating_sub(1))
        .map(|_| {
            let (hold, tx) = (hold.clone(), tx.clone());
            std::thread::spawn(move || {
                let p = Policy::Deadline {
                    runtime_ns: 9_000_000,
                    deadline_ns: 10_000_000,
                    period_ns: 10_000_000,
                    reclaim: false,
                };
                tx.send(xrunlab::rt::policy::set_policy(0, &p).is_ok())
                    .unwrap();
                while hold.load(std::sync::atomic::Ordering::Relaxed) {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            })
        })
        .collect();
    let held = (0..holders.len()).all(|_| rx.recv().unwrap());
    let mut cfg = config(vec![SchedPolicy::Deadline], 500_000_000);
    cfg.budget_ns = 128 * 1_000_000_000 / 48000;
    cfg.compete = Some("10ms/9.9ms".parse().unwrap());
    let out = run(&cfg, &Silent);
    hold.store(false, std::sync::atomic::Ordering::Relaxed);
    for h in holders {
        h.join().unwrap();
    }
    assert!(held, "could not set up the holding reservations");
    let e = out.expect_err("an over-committed system must refuse admission");
    let msg = e.to_string();
    assert!(msg.contains("admission control refused"), "{msg}");
    assert!(msg.contains("sched_rt_runtime_us"), "{msg}");
    assert!(msg.contains("deadline (fixed)"), "the row is named: {msg}");
    assert_eq!(e.exit_code(), 3);
}

#[test]
fn bad_input_is_a_usage_error() {
    for args in [
        &["sched", "--policies", "fifo,edf"][..],
        &["sched", "--preset", "44k1"],
        &["sched", "--graph", "ten"],
        &["sched", "--compete", "voip:fifo:10"],
        &["sched", "--percentile", "0"],
        &["sched", "--budget", "200%"],
    ] {
        xrunlab().args(args).assert().code(2);
    }
}
