//! `xrunlab predict`: the model against the sim driver it describes (statistical, with
//! fixed seeds, so deterministic), the command on the committed fixtures, and every bad
//! input it must refuse with exit 2 and the reason.

mod common;
use common::{read_json, show, xrunlab};
use predicates::prelude::*;
use serde_json::json;
use std::path::{Path, PathBuf};
use xrunlab::driver::sim::LatencyModel;
use xrunlab::measure::latency::{self, LatencyConfig, LatencySource};
use xrunlab::measure::predict::{
    self, poisson_high, poisson_low, CostInput, LatencyInput, PredictConfig, PredictRow,
};
use xrunlab::measure::run::DriverKind;
use xrunlab::measure::run::{run, RunConfig};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/results")
        .join(name)
}

/// One case: the latency result the sim's model gives (seed 11), the prediction from it,
/// and what `run --driver sim` with the same model and compute measured (seed 5).
struct Case {
    row: PredictRow,
    xruns: u64,
    hours: f64,
}

impl Case {
    fn run(model: &str, interval_ns: u64, frames: u32, n: u32, load: f64, secs: u64) -> Self {
        let model = LatencyModel::parse(model).unwrap();
        let lcfg = LatencyConfig {
            source: LatencySource::Simulated {
                model: model.clone(),
                seed: 11,
            },
            cpus: vec![0],
            interval_ns: Some(interval_ns),
            duration_ns: Some(secs * 1_000_000_000),
            ..LatencyConfig::default()
        };
        let lat = latency::simulate(&lcfg, &model, 11).unwrap();
        let inputs =
            LatencyInput::from_result(Path::new("sim"), "sim", &lcfg, &lat, None, None).unwrap();
        let cfg = PredictConfig {
            latency: vec!["sim".into()],
            cost_file: None,
            load_pct: Some(load),
            instances: None,
            cell: None,
            cpu: None,
            interval_ns: None,
            rate: 48_000,
            buffers: vec![frames],
            periods: vec![n],
            target_per_hour: 1.0,
            confidence: predict::CONFIDENCE,
            holds: predict::Holds::default(),
        };
        let p = predict::predict(&cfg, &inputs, &CostInput::load_pct(load));
        let row = p.tables[0].rows[0].clone();

        let mut rc = RunConfig::new(DriverKind::Sim, &format!("burn({load}%)")).unwrap();
        rc.buffer_frames = frames;
        rc.periods = n;
        rc.duration_ns = secs * 1_000_000_000;
        rc.seed = 5;
        rc.sim.latency = model;
        let r = run(&rc, &mut xrunlab::measure::session::Session::silent())
            .unwrap()
            .results;
        assert_eq!(r.dropped_records, 0);
        Case {
            row,
            xruns: r.xruns.total,
            hours: r.periods_elapsed as f64 * r.period_ns as f64 / 3.6e12,
        }
    }

    /// The measured rate's 95 % interval.
    fn measured(&self) -> (f64, f64, f64) {
        let k = self.xruns as f64;
        (
            k / self.hours,
            poisson_low(k, 0.05) / self.hours,
            poisson_high(k, 0.05) / self.hours,
        )
    }

    /// Predicted episodes (the sim resynchronises after an xrun: one xrun per episode) and
    /// measured xruns agree when their intervals overlap.
    fn agrees_with(&self, low: f64, high: f64) -> bool {
        let (_, m_lo, m_hi) = self.measured();
        low <= m_hi && m_lo <= high
    }

    fn agrees(&self) -> bool {
        let e = &self.row.episodes_per_hour;
        self.agrees_with(e.low, e.high)
    }

    fn describe(&self) -> String {
        let (m, lo, hi) = self.measured();
        let e = &self.row.episodes_per_hour;
        format!(
            "predicted {:.1}/h [{:.1}, {:.1}] (p {:.3e}, fresh {:.3}), measured {} xruns = {m:.1}/h [{lo:.1}, {hi:.1}]",
            e.per_hour, e.low, e.high, self.row.p_miss, self.row.fresh_share, self.xruns
        )
    }
}

#[test]
fn predicted_rates_agree_with_the_sim_driver_within_their_intervals() {
    // Normal latency, n = 2: frequent misses (z = 2) and rare ones (z = 3.7).
    for (frames, secs) in [(48, 600), (64, 1200)] {
        let c = Case::run("normal:30us,10us", 200_000, frames, 2, 95.0, secs);
        eprintln!(
            "normal:30us,10us {frames} frames n=2 95 %: {}",
            c.describe()
        );
        assert!(
            c.row.events_beyond >= 3.0 && c.xruns > 20,
            "{}",
            c.describe()
        );
        assert!(c.agrees(), "{frames} frames: {}", c.describe());
    }
    // Far in the tail: nothing seen on either side; the prediction is only a bound.
    let c = Case::run("normal:30us,10us", 200_000, 80, 2, 95.0, 600);
    eprintln!("normal:30us,10us 80 frames n=2 95 %: {}", c.describe());
    assert!(c.row.episodes_per_hour.upper_bound && c.row.measure_for_ns.is_some());
    assert_eq!(c.xruns, 0, "{}", c.describe());
    assert!(c.agrees(), "{}", c.describe());
}

#[test]
fn catch_up_cycles_that_draw_no_latency_are_why_n3_misses_less_than_independent_cycles() {
    // Latency near the period at 90 % load and n = 3: most cycles end after the next
    // period's start, and the one behind them starts at once, without a wake-up latency of
    // its own, and cannot miss. Only about one period in five wakes from sleep.
    let c = Case::run("normal:300us,130us", 1_000_000, 32, 3, 90.0, 1200);
    eprintln!("normal:300us,130us 32 frames n=3 90 %: {}", c.describe());
    assert!((0.15..0.3).contains(&c.row.fresh_share), "{}", c.describe());
    assert!(c.agrees(), "{}", c.describe());
    // The same p with every period a fresh draw (the model without catch-up) is refuted.
    let naive = c.row.p_miss * c.row.cycles_per_hour;
    let k = c.row.events_beyond;
    let scale = naive / k;
    assert!(
        !c.agrees_with(scale * poisson_low(k, 0.05), scale * poisson_high(k, 0.05)),
        "naive {naive:.1}/h should disagree: {}",
        c.describe()
    );
}

#[test]
fn a_wrong_compute_time_is_refuted_by_the_sim() {
    // Predicting 94 % load where the sim runs 95 %: the 13 µs of budget it assumes spare
    // move the threshold from 3.7 to 5 standard deviations.
    let c = Case::run("normal:30us,10us", 200_000, 64, 2, 95.0, 600);
    let model = LatencyModel::parse("normal:30us,10us").unwrap();
    let lcfg = LatencyConfig {
        cpus: vec![0],
        duration_ns: Some(600_000_000_000),
        ..LatencyConfig::default()
    };
    let lat = latency::simulate(&lcfg, &model, 11).unwrap();
    let inputs = LatencyInput::from_result(Path::new("x"), "x", &lcfg, &lat, None, None).unwrap();
    let d = &inputs[0].data;
    let cost = predict::Compute::LoadPct { pct: 94.0 }.at(64, 64e9 / 48e3);
    let cfg = PredictConfig {
        latency: vec![],
        cost_file: None,
        load_pct: Some(94.0),
        instances: None,
        cell: None,
        cpu: None,
        interval_ns: None,
        rate: 48_000,
        buffers: vec![64],
        periods: vec![2],
        target_per_hour: 1.0,
        confidence: predict::CONFIDENCE,
        holds: predict::Holds::default(),
    };
    let wrong = predict::row(d, &cost, 64, 2, &cfg);
    let e = wrong.episodes_per_hour;
    assert!(!c.agrees_with(e.low, e.high), "{}", c.describe());
}

// ---------------------------------------------------------------------------------------
// The command

fn predict_json(args: &[&str]) -> serde_json::Value {
    let out = xrunlab()
        .arg("predict")
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", show(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn predicts_from_the_fixtures_for_every_cost_source() {
    let lat = fixture("latency.json");
    let lat = lat.to_str().unwrap();
    let v = predict_json(&["--latency", lat, "--load-pct", "30"]);
    assert_eq!(v["kind"], "predict");
    let tables = v["results"]["tables"].as_array().unwrap();
    // Periods 2 and 3, buffers 16..1024.
    assert_eq!(tables.len(), 2);
    assert_eq!(tables[0]["rows"].as_array().unwrap().len(), 7);
    // The fixture predates the overflows' buckets: its tail is censored, and said so.
    assert_eq!(v["results"]["latency"][0]["censored"], 87);
    assert!(v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w.as_str().unwrap().contains("known only by their count")));
    for cost in [
        vec!["--cost", "run.json"],
        vec!["--cost", "bench.json"],
        vec!["--cost", "load.json", "--cell", "1:reverb-heavy"],
    ] {
        let path = fixture(cost[1]);
        let mut args = vec!["--latency", lat, "--cost", path.to_str().unwrap()];
        args.extend(&cost[2..]);
        let v = predict_json(&args);
        assert_eq!(v["config"]["rate"], 48_000, "{cost:?}");
        // A run pinned its driver thread to CPU 0: the latency that thread meets is CPU 0's
        // (the fixture measured CPUs 0 and 1); bench and load name no CPU: every CPU pooled.
        let one = cost[1] == "run.json";
        assert_eq!(v["config"]["cpu"], if one { json!(0) } else { json!(null) });
        assert_eq!(
            v["results"]["latency"][0]["cpus"].as_array().unwrap().len(),
            if one { 1 } else { 2 },
            "{cost:?}"
        );
        let rows = v["results"]["tables"][0]["rows"].as_array().unwrap();
        // Compute scales per frame: twice the buffer, twice the time.
        let c = |i: usize| rows[i]["compute_mean_ns"].as_f64().unwrap();
        assert!(
            (c(3) / c(2) - 2.0).abs() < 1e-9,
            "{cost:?}: {} {}",
            c(2),
            c(3)
        );
    }
    // The human table names the outlook and the smallest buffer within the target.
    xrunlab()
        .args([
            "predict",
            "--latency",
            lat,
            "--load-pct",
            "30",
            "--periods",
            "2",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("glitches/h (95 %)"))
        .stdout(predicate::str::contains("outlook"));
}

#[test]
fn a_simulated_latency_result_feeds_predict_end_to_end() {
    let d = tempfile::tempdir().unwrap();
    let lat = d.path().join("lat.json");
    xrunlab()
        .args([
            "latency",
            "--sim-latency",
            "const:450us",
            "--loops",
            "1000",
            "-q",
            "-o",
        ])
        .arg(&lat)
        .assert()
        .success();
    let v = read_json(&lat);
    assert_eq!(v["config"]["source"]["kind"], "simulated");
    let c = &v["results"]["per_cpu"][0];
    assert_eq!(c["overflows"], 1000);
    assert_eq!(c["overflow_ns"][0][1], 1000);
    let v = predict_json(&[
        "--latency",
        lat.to_str().unwrap(),
        "--load-pct",
        "40",
        "--buffers",
        "32,64",
        "--periods",
        "2",
    ]);
    let rows = v["results"]["tables"][0]["rows"].as_array().unwrap();
    // 32 frames: P = 667 µs, 0.45 + 0.27 = 0.72 ms > P: every cycle misses.
    assert_eq!(rows[0]["p_miss"], 1.0);
    assert_eq!(rows[0]["outlook"], "fails");
    // 64 frames: 0.45 + 0.53 = 0.98 ms < 1.33 ms: none does.
    assert_eq!(rows[1]["p_miss"], 0.0);
    // A threshold applies to drawn latencies as to measured ones.
    xrunlab()
        .args([
            "latency",
            "--sim-latency",
            "const:450us",
            "--loops",
            "10",
            "-q",
        ])
        .args(["--fail-above", "400us"])
        .assert()
        .code(1);
    // Drawn from a model, with stress refused: there is nothing to load.
    xrunlab()
        .args(["latency", "--sim-latency", "const:1us", "--stress", "cpu"])
        .assert()
        .code(2);
}

#[test]
fn bad_inputs_exit_2_with_the_reason() {
    let d = tempfile::tempdir().unwrap();
    let lat = fixture("latency.json");
    let lat = lat.to_str().unwrap();
    let fail = |args: &[&str], why: &str| {
        xrunlab()
            .arg("predict")
            .args(args)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(why));
    };
    // A latency result without histograms.
    let mut v = read_json(&fixture("latency.json"));
    for c in v["results"]["per_cpu"].as_array_mut().unwrap() {
        c["histogram_us"] = serde_json::json!([]);
    }
    let nohist = d.path().join("nohist.json");
    std::fs::write(&nohist, v.to_string()).unwrap();
    fail(
        &["--latency", nohist.to_str().unwrap(), "--load-pct", "30"],
        "no usable histogram",
    );
    // Mismatched rates: the bench ran at 48 kHz.
    let bench = fixture("bench.json");
    fail(
        &[
            "--latency",
            lat,
            "--cost",
            bench.to_str().unwrap(),
            "--rate",
            "44100",
        ],
        "measured at 48000 Hz",
    );
    // An empty file, a missing one, the wrong kinds.
    let empty = d.path().join("empty.json");
    std::fs::write(&empty, "").unwrap();
    fail(
        &["--latency", empty.to_str().unwrap(), "--load-pct", "30"],
        "empty.json",
    );
    fail(
        &["--latency", "/nonexistent/lat.json", "--load-pct", "30"],
        "lat.json",
    );
    let run = fixture("run.json");
    fail(
        &["--latency", run.to_str().unwrap(), "--load-pct", "30"],
        "is a run result",
    );
    fail(
        &["--latency", lat, "--cost", lat],
        "--cost reads a run, load or bench",
    );
    // A load grid of several columns needs --cell; a bench needs nothing more.
    let load = fixture("load.json");
    fail(
        &["--latency", lat, "--cost", load.to_str().unwrap()],
        "--cell",
    );
    fail(
        &[
            "--latency",
            lat,
            "--cost",
            load.to_str().unwrap(),
            "--cell",
            "3:x",
        ],
        "has no cell 3:x",
    );
    // Options.
    fail(
        &["--latency", lat, "--load-pct", "30", "--periods", "1"],
        "at least 2",
    );
    fail(
        &["--latency", lat, "--load-pct", "30", "--target", "0/h"],
        "--target",
    );
    fail(&["--latency", lat, "--load-pct", "130"], "130");
    fail(
        &["--latency", lat, "--load-pct", "30", "--cpu", "7"],
        "has no CPU 7",
    );
    fail(&["--latency", lat], "--cost");
    fail(
        &[
            "--latency",
            lat,
            "--load-pct",
            "30",
            "--cost",
            run.to_str().unwrap(),
        ],
        "cannot be used with",
    );
    // cyclictest's text histogram records no interval: it must be given.
    let ct = d.path().join("ct.json");
    xrunlab()
        .args(["import", "-q", "-o"])
        .arg(&ct)
        .arg(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/cyclictest/sparse-rt-tests-2.7.txt"),
        )
        .assert()
        .success();
    let ct = ct.to_str().unwrap();
    fail(&["--latency", ct, "--load-pct", "30"], "--interval");
    let v = predict_json(&["--latency", ct, "--load-pct", "30", "--interval", "200"]);
    assert_eq!(v["results"]["latency"][0]["interval_ns"], 200_000);
}

#[test]
fn slices_under_one_label_pool_into_one_input_and_other_conditions_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let slice = |name: &str, model: &str, extra: &[&str]| {
        let p = d.path().join(name);
        xrunlab()
            .args(["latency", "--sim-latency", model, "--loops", "1000", "-q"])
            .args(extra)
            .arg("-o")
            .arg(&p)
            .assert()
            .success();
        format!("s={}", p.display())
    };
    let a = slice("a.json", "const:450us", &["-i", "1ms"]);
    let b = slice("b.json", "const:20us", &["-i", "1ms"]);
    let v = predict_json(&[
        "--latency",
        &a,
        "--latency",
        &b,
        "--load-pct",
        "40",
        "--buffers",
        "32,64",
        "--periods",
        "2",
    ]);
    let inputs = v["results"]["latency"].as_array().unwrap();
    assert_eq!(inputs.len(), 1, "{inputs:?}");
    let l = &inputs[0];
    assert_eq!(
        (l["label"].as_str(), l["samples"].as_u64()),
        (Some("s"), Some(2000))
    );
    assert_eq!(l["observed_ns"], 2_000_000_000u64);
    assert_eq!(l["max_ns"], 450_000);
    let p_miss = |i: usize| {
        v["results"]["tables"][0]["rows"][i]["p_miss"]
            .as_f64()
            .unwrap()
    };
    // 32 frames: P = 667 µs, 267 µs of compute: half the wake-ups (the 450 µs slice) miss,
    // whichever slice they came from.
    assert!((p_miss(0) - 0.5).abs() < 1e-9, "{}", p_miss(0));
    // 64 frames: P = 1.33 ms, 0.53 ms of compute: a 450 µs wake-up still ends in time.
    assert_eq!(p_miss(1), 0.0);
    // Different labels stay apart.
    let other = b.replacen("s=", "t=", 1);
    let v = predict_json(&["--latency", &a, "--latency", &other, "--load-pct", "40"]);
    assert_eq!(v["results"]["latency"].as_array().unwrap().len(), 2);
    // A slice of another condition under the same label is refused, with both files named.
    let fail = |c: &str, why: &str| {
        xrunlab()
            .args([
                "predict",
                "--latency",
                &a,
                "--latency",
                c,
                "--load-pct",
                "40",
            ])
            .assert()
            .code(2)
            .stderr(predicate::str::contains(why))
            .stderr(predicate::str::contains("its own label"));
    };
    fail(
        &slice("c.json", "const:20us", &["-i", "2ms"]),
        "every 2000000 ns",
    );
    fail(
        &slice("e.json", "const:20us", &["-i", "1ms", "--busy", "40"]),
        "--busy 40",
    );
}
