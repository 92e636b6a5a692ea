//! `xrunlab import`: real cyclictest output, the rt-tests ≥ 2.7 sparse format, JSON, errors.

mod common;
use common::{is_root, require, which, xrunlab};
use predicates::prelude::*;
use std::path::Path;
use xrunlab::measure::latency::LatencySource;
use xrunlab::results::import::{import_file, import_str};

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/cyclictest")
        .join(name)
}

/// The values of a footer line such as `# Max Latencies: 00012 00019`.
fn footer(text: &str, label: &str) -> Vec<u64> {
    let line = text
        .lines()
        .find(|l| l.starts_with(label))
        .unwrap_or_else(|| panic!("no '{label}' in:\n{text}"));
    line[label.len()..]
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect()
}

#[test]
fn a_real_cyclictest_run_imports_with_its_own_summary() {
    if !require(
        which("cyclictest").is_some() && is_root(),
        "cyclictest (rt-tests) and root",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("ct.json");
    let out = std::process::Command::new("cyclictest")
        .args([
            "-q", "-m", "-S", "-p", "90", "-i", "200", "-h", "100", "-l", "2000",
        ])
        .arg(format!("--json={}", json.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let txt = dir.path().join("ct.txt");
    std::fs::write(&txt, &text).unwrap();

    let (cfg, r) = import_file(&txt).unwrap();
    let (min, avg, max) = (
        footer(&text, "# Min Latencies:"),
        footer(&text, "# Avg Latencies:"),
        footer(&text, "# Max Latencies:"),
    );
    let ovf = footer(&text, "# Histogram Overflows:");
    assert_eq!(r.per_cpu.len(), min.len());
    for (i, c) in r.per_cpu.iter().enumerate() {
        let s = &c.stats.summary;
        // cyclictest drops the periods a late wake-up overran (the VM's host can stall it:
        // seen 1895 of 2000), so its own histogram holds at most -l samples.
        assert!(
            (500..=2000).contains(&s.count),
            "thread {i}: {} of -l 2000",
            s.count
        );
        assert_eq!(s.min, min[i] * 1000);
        assert_eq!(s.max, max[i] * 1000);
        assert_eq!((s.mean / 1000.0).floor() as u64, avg[i]);
        assert_eq!(c.stats.overflows, ovf[i]);
        assert!(s.min <= s.p50 && s.p50 <= s.p99 && s.p99 <= s.max);
    }
    assert_eq!(cfg.hist_max_ns, 100_000);
    assert!(
        matches!(cfg.source, LatencySource::Imported { ref format, .. } if format == "cyclictest-text")
    );

    // The JSON file of the same run agrees with the text.
    let (jcfg, j) = import_file(&json).unwrap();
    assert_eq!(jcfg.interval_ns, Some(200_000));
    assert_eq!(jcfg.loops, Some(2000));
    for (a, b) in r.per_cpu.iter().zip(&j.per_cpu) {
        assert_eq!(a.stats.summary.count, b.stats.summary.count);
        assert_eq!(a.stats.summary.min, b.stats.summary.min);
        assert_eq!(a.stats.summary.max, b.stats.summary.max);
        assert_eq!(a.stats.overflows, b.stats.overflows);
        assert_eq!(a.histogram_us, b.histogram_us);
    }
}

#[test]
fn the_sparse_rt_tests_2_7_format_imports() {
    let (cfg, r) = import_file(&fixture("sparse-rt-tests-2.7.txt")).unwrap();
    assert!(
        matches!(cfg.source, LatencySource::Imported { ref format, .. } if format == "cyclictest-text-sparse")
    );
    assert_eq!(cfg.dma_latency, Some(true));
    let t0 = &r.per_cpu[0];
    let s = &t0.stats.summary;
    assert_eq!((s.count, s.min, s.max), (1000, 3_000, 700_000));
    assert_eq!(s.mean, 4_000.0);
    assert_eq!(s.p50, 5_000);
    assert_eq!(s.p99, 9_000);
    assert!((s.p99_9 as f64 - 42_000.0).abs() <= 42.0, "{}", s.p99_9);
    // Among the overflows: the maximum, an upper bound.
    assert_eq!(s.p99_99, 700_000);
    assert_eq!(t0.stats.overflows, 1);
    assert_eq!(t0.overflow_cycles, vec![711]);
    let t1 = &r.per_cpu[1];
    assert_eq!(t1.stats.summary.count, 1002);
    assert_eq!(t1.overflow_cycles, vec![17, 400]);
    assert_eq!(t1.histogram_us.len(), 5);
    assert_eq!(r.overall.summary.count, 2002);
    assert_eq!(r.overall.max_cpu, Some(0));
}

#[test]
fn cyclictest_json_imports_with_its_command_line() {
    let (cfg, r) = import_file(&fixture("rt-tests.json")).unwrap();
    assert_eq!(cfg.policy, Some(xrunlab::rt::Policy::fifo(90)));
    assert_eq!(cfg.interval_ns, Some(200_000));
    assert_eq!(cfg.mlock, Some(true));
    assert_eq!(cfg.hist_max_ns, 400_000);
    let t0 = &r.per_cpu[0].stats;
    assert_eq!((t0.summary.count, t0.overflows), (1000, 2));
    assert_eq!(t0.summary.max, 1_192_000);
    assert!((t0.summary.mean - 18_830.0).abs() < 1.0);
    assert_eq!(r.per_cpu[1].stats.summary.p50, 16_000);
    assert_eq!(r.per_cpu[1].stats.summary.p90, 19_000);
}

#[test]
fn the_cli_writes_a_latency_result() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    xrunlab()
        .arg("import")
        .arg(fixture("sparse-rt-tests-2.7.txt"))
        .arg("-o")
        .arg(&out)
        .assert()
        .success()
        .stdout(predicate::str::contains("p99.99"));
    let doc = xrunlab::results::read_result(&out).unwrap();
    assert_eq!(doc.kind(), "latency");
}

#[test]
fn malformed_files_exit_2_with_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.txt");
    let text = std::fs::read_to_string(fixture("sparse-rt-tests-2.7.txt")).unwrap();
    std::fs::write(
        &bad,
        text.replace("000009 000020\t000040", "000009 000020\tx"),
    )
    .unwrap();
    xrunlab()
        .arg("import")
        .arg(&bad)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("line 7"))
        .stderr(predicate::str::contains("whole numbers"));
    std::fs::write(&bad, "not a histogram\n").unwrap();
    xrunlab()
        .arg("import")
        .arg(&bad)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("line 1: expected a histogram row"));
    xrunlab().args(["import", "/no/such/file"]).assert().code(2);
}

proptest::proptest! {
    // Percentiles of an imported histogram against a brute-force sort of its samples.
    #[test]
    fn imported_percentiles_match_sorting(counts in proptest::collection::vec(0u64..50, 1..300)) {
        let total: u64 = counts.iter().sum();
        proptest::prop_assume!(total > 0);
        let mut text = String::from("# Histogram\n");
        let mut samples = Vec::new();
        for (k, &n) in counts.iter().enumerate() {
            text.push_str(&format!("{k:06} {n:06}\n"));
            samples.extend(std::iter::repeat_n(k as u64 * 1000, n as usize));
        }
        let min = samples[0];
        let max = *samples.last().unwrap();
        text.push_str(&format!(
            "# Total: {total:09}\n# Min Latencies: {:05}\n# Avg Latencies: 00000\n# Max Latencies: {:05}\n# Histogram Overflows: 00000\n",
            min / 1000, max / 1000
        ));
        let (_, r) = import_str(&text, "p.txt").unwrap();
        let s = &r.per_cpu[0].stats.summary;
        proptest::prop_assert_eq!(s.count, total);
        for (q, got) in [(50.0, s.p50), (90.0, s.p90), (99.0, s.p99), (99.9, s.p99_9)] {
            let rank = ((q / 100.0) * samples.len() as f64).ceil().max(1.0) as usize;
            let want = samples[rank - 1];
            let tol = (want as f64 * 0.001).max(1.0);
            proptest::prop_assert!((got as f64 - want as f64).abs() <= tol, "p{}: got {}, want {}", q, got, want);
        }
    }
}
