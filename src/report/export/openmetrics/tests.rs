use super::*;
use crate::report::Input;
use std::collections::HashSet;

fn fixture(dir: &str, name: &str) -> Input {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(dir);
    crate::report::load(&p.join(name)).unwrap()
}

fn all_fixtures() -> Vec<Input> {
    let mut v = Vec::new();
    for dir in ["results", "verdict", "forensics"] {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(dir);
        let mut names: Vec<_> = std::fs::read_dir(&p)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".json"))
            .collect();
        names.sort();
        v.extend(names.iter().map(|n| fixture(dir, n)));
    }
    v
}

fn text(inputs: &[Input]) -> String {
    String::from_utf8(super::super::render(&OpenMetrics, &Export::of(inputs)).unwrap()).unwrap()
}

/// The sample lines as (series, value): series is the name with its labels as written.
fn samples(t: &str) -> Vec<(String, f64)> {
    t.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').expect("a value");
            let v = match value {
                "+Inf" => f64::INFINITY,
                "-Inf" => f64::NEG_INFINITY,
                v => v.parse().unwrap_or_else(|_| panic!("{l}")),
            };
            (series.to_string(), v)
        })
        .collect()
}

fn value(t: &str, series: &str) -> f64 {
    samples(t)
        .into_iter()
        .find(|(s, _)| s == series)
        .unwrap_or_else(|| panic!("no {series} in\n{t}"))
        .1
}

#[test]
fn every_fixture_gives_well_formed_unique_series() {
    let inputs = all_fixtures();
    for one in &inputs {
        let t = text(std::slice::from_ref(one));
        assert!(t.ends_with('\n'));
        assert!(t.contains("xrunlab_last_run_timestamp_seconds{test="), "{t}");
    }
    let t = text(&inputs);
    let mut seen = HashSet::new();
    for (series, _) in samples(&t) {
        assert!(seen.insert(series.clone()), "{series} twice");
    }
    let mut types = HashSet::new();
    for l in t.lines().filter(|l| l.starts_with("# TYPE ")) {
        assert!(types.insert(l.split(' ').nth(2).unwrap().to_string()), "{l}");
    }
}

#[test]
fn a_run_gives_xruns_by_cause_and_headroom_quantiles() {
    let t = text(&[fixture("results", "run.json")]);
    let l = "test=\"run\",driver=\"virtual\",rate=\"48000\",period=\"64\",condition=\"idle\"";
    assert_eq!(
        value(&t, &format!("xrunlab_xruns_total{{{l},cause=\"late-wakeup\"}}")),
        15.0
    );
    assert_eq!(
        value(&t, &format!("xrunlab_xruns_total{{{l},cause=\"interference\"}}")),
        2.0
    );
    assert_eq!(value(&t, &format!("xrunlab_cycles_total{{{l}}}")), 2226.0);
    // Budget 1333333 ns minus the slowest cycle's end, 3915952 ns: 2.58 ms late.
    let worst = value(
        &t,
        &format!("xrunlab_cycle_headroom_seconds{{{l},quantile=\"0\"}}"),
    );
    assert!((worst - (-0.002582619)).abs() < 1e-9, "{worst}");
    assert_eq!(
        value(&t, &format!("xrunlab_cycle_headroom_seconds_count{{{l}}}")),
        2226.0
    );
}

#[test]
fn latency_is_a_cumulative_histogram_of_every_wake_up() {
    let t = text(&[fixture("results", "latency.json")]);
    let b: Vec<f64> = samples(&t)
        .into_iter()
        .filter(|(s, _)| s.starts_with("xrunlab_wakeup_latency_seconds_bucket"))
        .map(|(_, v)| v)
        .collect();
    assert_eq!(b.len(), LATENCY_BUCKETS.len() + 1);
    assert!(b.windows(2).all(|w| w[0] <= w[1]), "{b:?}");
    let count = value(
        &t,
        "xrunlab_wakeup_latency_seconds_count{test=\"latency\",condition=\"idle\"}",
    );
    assert_eq!(count, 29189.0);
    assert_eq!(*b.last().unwrap(), count);
    // Nothing is faster than the minimum, 6.6 µs; the 10 ms bucket holds all but the
    // wake-ups above it (the maximum is 13 ms).
    assert_eq!(b[0], 0.0);
    assert!(b[LATENCY_BUCKETS.len() - 1] < count);
}

/// The verdict `xrunlab verdict tests/fixtures/verdict --target N/h` gives, as a document.
fn verdict_doc(target_per_hour: f64) -> ResultDoc {
    use crate::report::verdict;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/verdict");
    let inputs: Vec<Input> = crate::report::results_in(&dir)
        .unwrap()
        .files
        .iter()
        .map(|p| crate::report::load(p).unwrap())
        .collect();
    let cost = verdict::default_cost();
    let o = verdict::Options {
        target_per_hour,
        ..verdict::Options::defaults()
    };
    let cfg = verdict::settle(&inputs, &cost, o).unwrap();
    let results = verdict::build(&cfg, &inputs, &cost).unwrap();
    let Loaded::Doc(d) = &inputs[0].item else {
        panic!("typed")
    };
    let mut doc = (**d).clone();
    doc.body = crate::results::Body::Verdict {
        config: cfg,
        results: Box::new(results),
    };
    doc
}

#[test]
fn the_verdict_gives_its_smallest_good_buffer() {
    // At 1/h the fixtures meet the target nowhere: no smallest size, and a failing verdict.
    let strict = verdict_doc(1.0);
    let t = render_docs(&[&strict]);
    assert!(!t.contains("xrunlab_verdict_min_buffer_frames"), "{t}");
    assert!(t.contains("xrunlab_verdict_pass{test=\"verdict\",rate=\"48000\"} 0\n"), "{t}");
    let doc = verdict_doc(3600.0);
    let crate::results::Body::Verdict { results, config } = &doc.body else {
        panic!("a verdict")
    };
    let t = render_docs(&[&doc]);
    let l = format!("test=\"verdict\",rate=\"{}\"", config.rate);
    let f = results.recommended_frames.expect("the fixtures meet the target at some size");
    assert_eq!(
        value(&t, &format!("xrunlab_verdict_min_buffer_frames{{{l}}}")),
        f64::from(f)
    );
    assert_eq!(value(&t, &format!("xrunlab_verdict_pass{{{l}}}")), 1.0);
    let row = results.rows.iter().find(|r| r.buffer_frames == f).unwrap();
    assert_eq!(
        value(
            &t,
            &format!("xrunlab_verdict_meets_target{{{l},period=\"{f}\"}}")
        ),
        1.0
    );
    assert!(row.rtl_model_ms > 0.0);
}

#[test]
fn culprits_are_the_top_n_and_other() {
    let doc = fixture("forensics", "run-paper.json");
    let Loaded::Doc(d) = &doc.item else { panic!() };
    let f = d.body.forensics().unwrap();
    let total: u64 = f
        .culprits
        .iter()
        .filter(|r| r.culprit.is_culprit())
        .map(|r| r.total_ns)
        .sum();
    let mut m = Metrics::new();
    add_doc(&mut m, d, 2);
    let t = m.render();
    let rows: Vec<(String, f64)> = samples(&t)
        .into_iter()
        .filter(|(s, _)| s.starts_with("xrunlab_culprit_seconds_total{"))
        .collect();
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert!(rows[2].0.contains("kind=\"other\",name=\"other\""), "{rows:?}");
    assert!(rows[0].1 >= rows[1].1);
    let sum: f64 = rows.iter().map(|r| r.1).sum();
    assert!((sum - total as f64 / 1e9).abs() < 1e-6, "{sum} vs {total}");
}

#[test]
fn the_newest_of_two_runs_with_the_same_labels_wins() {
    let a = fixture("results", "run.json");
    let mut b = fixture("results", "run.json");
    let Loaded::Doc(d) = &mut b.item else { panic!() };
    d.ended_at = "2030-01-01T00:00:00Z".into();
    if let crate::results::Body::Run { results, .. } = &mut d.body {
        results.cycles = 7;
    }
    let l = "test=\"run\",driver=\"virtual\",rate=\"48000\",period=\"64\",condition=\"idle\"";
    for order in [[&b, &a], [&a, &b]] {
        let inputs = [
            Input {
                path: order[0].path.clone(),
                item: clone_item(&order[0].item),
            },
            Input {
                path: order[1].path.clone(),
                item: clone_item(&order[1].item),
            },
        ];
        let t = text(&inputs);
        assert_eq!(value(&t, &format!("xrunlab_cycles_total{{{l}}}")), 7.0);
    }
}

fn clone_item(i: &Loaded) -> Loaded {
    match i {
        Loaded::Doc(d) => Loaded::Doc(d.clone()),
        Loaded::Other { .. } => panic!("typed fixtures only"),
    }
}

#[test]
fn the_textfile_is_renamed_into_place_with_a_final_newline() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_textfile(dir.path(), "a 1").unwrap();
    assert_eq!(p, dir.path().join("xrunlab.prom"));
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "a 1\n");
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(left.len(), 1);
}
