//! `xrunlab sched` on the virtual driver: every policy row runs and records Cucinotta et al.'s metrics,
//! and an over-committed DEADLINE system gives the admission message. Timing is not judged: a
//! 2-core VM shared with compilers cannot be expected to meet 2.6 ms deadlines.

mod common;
use common::{is_root, require, xrunlab};
use xrunlab::measure::reservation::{Controller, ControllerConfig};
use xrunlab::measure::sched::{run, SchedConfig, SchedPolicy};
use xrunlab::progress::Silent;
use xrunlab::results::Status;
use xrunlab::rt::Policy;

/// The DEADLINE tests share the machine's admission budget (95 % of each CPU): the
/// over-commit test would make the others' reservations fail, so they take turns.
static DEADLINE_BANDWIDTH: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn bandwidth() -> std::sync::MutexGuard<'static, ()> {
    DEADLINE_BANDWIDTH.lock().unwrap_or_else(|e| e.into_inner())
}

fn config(policies: Vec<SchedPolicy>, duration_ns: u64) -> SchedConfig {
    let period_ns = 128 * 1_000_000_000 / 48000;
    SchedConfig {
        policies,
        driver: xrunlab::measure::run::DriverKind::Virtual,
        rate: 48000,
        buffer_frames: 128,
        clients: 4,
        client_pct: 5.0,
        chain: None,
        duration_ns,
        prio: 10,
        budget_ns: period_ns * 9 / 10,
        controller: ControllerConfig::for_period(period_ns),
        compete: Some("voip".parse().unwrap()),
        ramp_every_ns: None,
        trace: None,
        mlock: true,
        pin: Default::default(),
    }
}

#[test]
fn every_policy_runs_and_records_its_metrics() {
    if !require(is_root(), "root (FIFO and DEADLINE policies)") {
        return;
    }
    let _bw = bandwidth();
    use SchedPolicy::*;
    let cfg = config(
        vec![Other, Fifo, Deadline, DeadlineAdaptive, DeadlineReclaim],
        2_000_000_000,
    );
    let r = run(&cfg, &mut xrunlab::measure::session::Session::silent()).unwrap();
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
        // The row's helper saw exactly the records the collector folded.
        let (p, end) = (&row.driver_period, &row.end_time);
        assert_eq!(p.count, e.driver_period_ns.count, "{}", row.label);
        assert_eq!(
            (p.min_ns, p.max_ns),
            (e.driver_period_ns.min, e.driver_period_ns.max)
        );
        assert!(p.std_ns > 0.0 && (p.mean_ns - e.driver_period_ns.mean).abs() < 1.0);
        assert_eq!(
            (end.min_ns, end.max_ns),
            (e.end_time_ns.min, e.end_time_ns.max)
        );
        assert_eq!(end.cdf.first().unwrap().value_ns, end.min_ns);
        assert_eq!(end.cdf.last().unwrap().value_ns, end.max_ns);
        assert!(!row.end_time_series_ns.is_empty() && row.end_time_series_ns.len() <= 2000);
        // A serial pipeline: each client ends after the one before it, in every cycle.
        assert_eq!(row.clients.len(), 4);
        for w in row.clients.windows(2) {
            // No ramp: every client runs from the row's first processed cycle.
            assert!(w[0].joined_cycle.is_some(), "{}", row.label);
            assert_eq!(w[0].joined_cycle, w[1].joined_cycle, "{}", row.label);
            assert!(w[0].end_ns.mean <= w[1].end_ns.mean, "{}", row.label);
            assert!(w[0].end_ns.min <= w[1].end_ns.min, "{}", row.label);
        }
        let c = row.compete.as_ref().expect("competitor stats");
        assert!(c.jobs > 50, "{}: {} jobs", row.label, c.jobs);
        let cdf = &row.compete_response_cdf;
        assert_eq!(
            cdf.last().unwrap().value_ns,
            c.response_ns.max,
            "{}",
            row.label
        );
        assert_eq!(
            cdf.first().unwrap().value_ns,
            c.response_ns.min,
            "{}",
            row.label
        );
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
            // Fed per cycle: one point per record (decimated only beyond 2000).
            let n = e.cpu_ns.count as usize;
            assert!(row.q_series.len() >= n.min(2000) / 2, "{}", row.label);
            assert_eq!(
                row.thread_budgets_ns.len(),
                e.threads.len(),
                "{}",
                row.label
            );
            // The budget follows the load (4 × 5 % of P ≈ 533 µs) instead of the cap: the
            // estimator's prediction sits well below 95 % of P. Set Q adds the xrun bumps, which
            // a stalling host makes frequent (seen: median Set Q 1.94 ms of a 2.53 ms cap), so
            // of Set Q only require that it left the cap's neighbourhood at some point.
            let median = |mut v: Vec<u64>| {
                v.sort_unstable();
                v[v.len() / 2]
            };
            let predicted = median(row.q_series.iter().map(|q| q.predicted_q_ns).collect());
            assert!(
                predicted < hi * 3 / 4,
                "{}: median predicted Q {predicted}",
                row.label
            );
            let lowest = row.q_series.iter().map(|q| q.set_q_ns).min().unwrap();
            assert!(lowest < hi * 3 / 4, "{}: lowest Set Q {lowest}", row.label);
        } else {
            assert!(row.q_series.is_empty(), "{}", row.label);
        }
    }
    assert!(r.warnings.iter().any(|w| w.contains("unpinned")));
    assert!(r.results.budget_split.contains("split"));
}

/// `--ramp`: clients join one at a time, each join bumps the adaptive budget, and Set Q
/// climbs with the load; the CSV trace has every cycle with Set Q and each client's end.
#[test]
fn ramp_adds_clients_and_each_join_bumps_the_budget() {
    if !require(is_root(), "root (SCHED_DEADLINE)") {
        return;
    }
    let _bw = bandwidth();
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("sched.csv");
    let mut cfg = config(vec![SchedPolicy::DeadlineAdaptive], 2_500_000_000);
    cfg.compete = None;
    cfg.ramp_every_ns = Some(500_000_000);
    cfg.trace = Some(trace.display().to_string());
    let r = run(&cfg, &mut xrunlab::measure::session::Session::silent()).unwrap();
    assert_eq!(r.status, Status::Complete);
    let row = &r.results.rows[0];
    assert_eq!(row.bumps_client, 4, "one bump per client joining");
    // The trace: a header and one line per processed cycle.
    let mut rd = csv::Reader::from_path(&trace).unwrap();
    let h = rd.headers().unwrap().clone();
    // Columns by name, so the checks below do not depend on the trace's column order.
    let col = |name: &str| {
        h.iter()
            .position(|x| x == name)
            .unwrap_or_else(|| panic!("no {name} column in {h:?}"))
    };
    let [cycle, cpu, xrun, active, set_q, predicted_q] = [
        "cycle",
        "cpu_ns",
        "xrun",
        "active_clients",
        "set_q_ns",
        "predicted_q_ns",
    ]
    .map(col);
    assert_eq!(&h[h.len() - 1], "client3_end_ns");
    let lines: Vec<csv::StringRecord> = rd.records().map(|x| x.unwrap()).collect();
    assert_eq!(lines.len() as u64, row.engine.cpu_ns.count);
    assert!(lines
        .iter()
        .all(|l| !l[set_q].is_empty() && &l[col("row")] == "deadline-adaptive"));
    let num = |l: &csv::StringRecord, i: usize| l[i].parse::<u64>().unwrap();
    // Client i joins in period ceil((i+1)·500 ms / P): it runs from the first processed
    // cycle at or after that period (a stalled host makes the engine skip periods, so that
    // can be later than due, but never another cycle).
    let period = cfg.period_ns();
    for (i, c) in row.clients.iter().enumerate() {
        let due = ((i as u64 + 1) * 500_000_000).div_ceil(period);
        let first_after = lines.iter().map(|l| num(l, cycle)).find(|&k| k >= due);
        assert_eq!(
            c.joined_cycle, first_after,
            "client {i} (due in period {due})"
        );
    }
    // The loop fed the controller every cycle, in order: a fresh controller given the
    // recorded CPU times, xruns and joins computes exactly the recorded Set Q and Predicted
    // Q. (How Q follows load, spikes and the clamp is tested on synthetic sequences in the
    // reservation module; here a stalling host may add xrun bumps, never other values.)
    let mut ctl = Controller::new(cfg.controller).unwrap();
    let mut last_active = None;
    for l in &lines {
        let active = num(l, active);
        let mut step = ctl.observe(num(l, cpu), &l[xrun] == "1");
        if last_active.is_some_and(|a| active > a) {
            step = ctl.client_added();
        }
        last_active = Some(active);
        assert_eq!(
            (step.set_q_ns, step.predicted_q_ns),
            (num(l, set_q), num(l, predicted_q)),
            "cycle {}",
            &l[cycle]
        );
    }
    // The helper applied Q (at least once; then only moves over 1 %, so a budget held at
    // the cap by xrun bumps is not reapplied), and what it applied last is a Set Q the
    // controller computed, split over the engine's threads. (Not always the final one: the
    // engine thread may be gone when the last records arrive.)
    let applied: u64 = row.thread_budgets_ns.iter().sum();
    assert!(row.q_updates >= 1 && row.q_errors == 0, "{row:?}");
    assert!(
        lines.iter().any(|l| num(l, set_q).abs_diff(applied)
            <= num(l, set_q) / 100 + row.thread_budgets_ns.len() as u64),
        "applied {applied} ns is no recorded Set Q"
    );
    // Four 5 % clients consume CPU, and the budget covers what a typical cycle of them
    // takes: Predicted Q is a high percentile of the window, never below its median.
    let mut four_cpu: Vec<u64> = lines
        .iter()
        .filter(|l| &l[active] == "4")
        .map(|l| num(l, cpu))
        .collect();
    four_cpu.sort_unstable();
    let median4 = four_cpu[four_cpu.len() / 2];
    assert!(
        median4 >= 3 * period / 20,
        "median CPU time with four 5 % clients: {median4} ns of {period}"
    );
    let last = lines.last().unwrap();
    assert!(
        num(last, set_q) >= median4.min(cfg.controller.q_max_ns()),
        "final Set Q {} ns below the median four-client cycle's {median4} ns",
        &last[set_q]
    );
    let four = lines
        .iter()
        .find(|l| &l[active] == "4")
        .expect("a cycle with four clients");
    assert!(!four[h.len() - 1].is_empty());
}

/// A SCHED_DEADLINE thread cannot create threads: the error says so instead of a bare EAGAIN.
#[test]
fn creating_a_thread_from_a_deadline_thread_is_explained() {
    if !require(is_root(), "root (SCHED_DEADLINE)") {
        return;
    }
    let _bw = bandwidth();
    let msg = std::thread::spawn(|| {
        let p = Policy::Deadline {
            runtime_ns: 1_000_000,
            deadline_ns: 10_000_000,
            period_ns: 10_000_000,
            reclaim: false,
        };
        xrunlab::rt::policy::set_policy(0, &p).unwrap();
        let r = xrunlab::rt::thread::spawn_rt(
            xrunlab::rt::thread::ThreadSpec {
                name: "xr-child".into(),
                policy: Policy::Other { nice: 0 },
                cpus: Vec::new(),
            },
            || (),
        );
        r.err().map(|e| (e.to_string(), e.exit_code()))
    })
    .join()
    .unwrap();
    let (msg, code) = msg.expect("the kernel refuses clone from a DEADLINE thread");
    assert!(
        msg.contains("SCHED_DEADLINE") && msg.contains("fork"),
        "{msg}"
    );
    assert_eq!(code, 3);
}

/// DEADLINE on a thread pinned to fewer CPUs than its root domain: the message says unpin or
/// use an exclusive cpuset.
#[test]
fn pinned_deadline_thread_gives_the_affinity_message() {
    if !require(is_root(), "root (SCHED_DEADLINE)") {
        return;
    }
    let _bw = bandwidth();
    if xrunlab::rt::affinity::allowed_cpus().unwrap().len() < 2 {
        eprintln!("skipped: one CPU, pinning cannot be narrower than the root domain");
        return;
    }
    let o = xrunlab()
        .args([
            "run",
            "--policy",
            "deadline:500us/2666us",
            "--buffer",
            "128",
        ])
        .args(["--cpus", "0", "--duration", "1s", "--quiet"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("root domain") && err.contains("Unpin"),
        "{err}"
    );
    assert!(err.contains("cpuset"), "{err}");
}

#[test]
fn overcommitted_deadline_bandwidth_gives_the_admission_message() {
    if !require(is_root(), "root (SCHED_DEADLINE)") {
        return;
    }
    let _bw = bandwidth();
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
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("t.csv");
    cfg.trace = Some(trace.display().to_string());
    let out = run(&cfg, &mut xrunlab::measure::session::Session::silent());
    assert!(!trace.exists(), "a refused run leaves no partial trace");
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
        &["sched", "--ramp", "40x1%"],
        &["sched", "--ramp", "4x5%", "--graph", "3x5%"],
        &["sched", "--ramp-every", "1s"],
        &["sched", "--ramp", "4x5%", "--ramp-every", "1us"],
        &["sched", "--driver", "alsa"],
    ] {
        xrunlab().args(args).assert().code(2);
    }
    let o = xrunlab()
        .args(["sched", "--driver", "jack"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("virtual driver only") && err.contains("jackd"),
        "{err}"
    );
}

/// The ramp on the sim driver, exactly: the engine runs the first `start + k·P/every` chain
/// elements in period k, reports them in every record, and gives each active element an end
/// time in pipeline order. No privilege and no real time needed.
#[test]
fn ramp_switches_prebuilt_elements_on_at_exact_periods() {
    use xrunlab::measure::run::{run_observed, ComputeKind, DriverKind, Observe, RunConfig};
    let mut c = RunConfig::new(DriverKind::Sim, "burn(1%):5").unwrap();
    c.buffer_frames = 48; // P = 1 ms
    c.duration_ns = 100_000_000;
    c.compute = ComputeKind::Measured;
    c.ramp = Some(xrunlab::engine::Ramp {
        start: 1,
        every_ns: 20_000_000,
    });
    let (tx, rx) = std::sync::mpsc::channel();
    let r = run_observed(
        &c,
        &Silent,
        Observe {
            tap: Some(tx),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(r.status, Status::Complete);
    let recs: Vec<_> = rx.iter().collect();
    // Measured compute: a host stall can make a cycle late and skip periods (seen: 99 + 1).
    assert_eq!(recs.len() as u64 + r.results.skipped_periods, 100);
    assert!(recs.len() >= 90, "{}", recs.len());
    for rec in &recs {
        let want = (1 + rec.cycle / 20).min(5) as u8;
        assert_eq!(rec.active_clients, want, "cycle {}", rec.cycle);
        let n = want as usize;
        assert!(rec.client_end_ns[..n].windows(2).all(|w| w[0] <= w[1]));
        assert!(rec.client_end_ns[0] > 0, "cycle {}", rec.cycle);
        assert!(rec.client_end_ns[n..].iter().all(|&e| e == 0));
    }
}
