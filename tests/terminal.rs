//! Any terminal (issue 31): every command's summary, rendered from committed results, is a
//! golden snapshot at 80 columns; no line is wider, and rendering the same text very wide
//! holds exactly the same numbers, so none was split across two lines.
//!
//! Rendered in-process where the summary is the library's (`report::text`), and through the
//! binary where the CLI composes it (plugins, `rtl --model`, `verdict`, `predict`, `check`);
//! no time stamps or machine paths enter a snapshot.

mod common;
use common::xrunlab;
use std::path::{Path, PathBuf};
use xrunlab::report::text::style;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Numbers as tokens: runs of digits and dots with a digit in them, in order of appearance.
fn numbers(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in text.chars().chain([' ']) {
        if c.is_ascii_digit() || (c == '.' && !cur.is_empty()) {
            cur.push(c);
        } else if !cur.is_empty() {
            out.push(std::mem::take(&mut cur).trim_end_matches('.').to_string());
        }
    }
    // A set: a header repeated in each row's block (the stacked form) repeats its numbers.
    out.sort();
    out.dedup();
    out
}

fn assert_fits(name: &str, text: &str) {
    for (k, line) in text.lines().enumerate() {
        assert!(
            line.chars().count() <= style::WIDTH,
            "{name}: line {} is {} columns:\n{line}\n\n{text}",
            k + 1,
            line.chars().count()
        );
    }
}

/// `render` at 80 columns is golden and fits; at 10,000 it shows the same numbers.
fn golden(name: &str, render: impl Fn() -> String) {
    let narrow = render();
    style::set_width(10_000);
    let wide = render();
    style::set_width(style::WIDTH);
    assert_fits(name, &narrow);
    assert_eq!(
        numbers(&narrow),
        numbers(&wide),
        "{name}: a number was split across lines:\n{narrow}\n--- wide:\n{wide}"
    );
    insta::assert_snapshot!(name, narrow);
}

fn input(rel: &str) -> xrunlab::report::Input {
    // Relative, so the heading names the fixture the same on every machine.
    let _ = root();
    xrunlab::report::load(Path::new(rel)).expect("a committed fixture loads")
}

/// The width is process-wide: the renderings of this binary run one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn every_result_kind_renders_golden_in_80_columns() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    std::env::set_current_dir(root()).unwrap();
    let mut files: Vec<PathBuf> = std::fs::read_dir("tests/fixtures/results")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files.push("tests/fixtures/forensics/run-paper.json".into());
    // A JACK watch with --forensics: its clients by their JACK names, the process beside.
    files.push("tests/fixtures/watch/watch-jack.json".into());
    for f in files {
        let rel = f.to_str().unwrap().to_string();
        let name = format!("report_{}", f.file_stem().unwrap().to_str().unwrap());
        golden(&name, || xrunlab::report::text::input(&input(&rel)));
    }
}

/// A watch with what its cycles say of the other buffer sizes (`other_sizes`, added to the
/// PipeWire fixture, which stays as an older watch wrote it).
#[test]
fn a_watch_with_other_sizes_renders_golden_in_80_columns() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    std::env::set_current_dir(root()).unwrap();
    let text = std::fs::read_to_string("tests/fixtures/results/watch-pipewire.json").unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let row = |frames: u32, xruns: f64, low: f64, high: f64, watched: bool, rough: bool| {
        serde_json::json!({"frames": frames, "xruns": xruns, "low": low, "high": high,
                           "watched": watched, "lower_bound": rough})
    };
    doc["results"]["other_sizes"] = serde_json::json!({
        "frames": 256, "rate": 48000, "period_ns": 5_333_333u64, "cycles": 733,
        "span_ns": 3_909_333_089u64, "sampled": false,
        "sizes": [
            row(128, 9.0, 4.12, 17.08, false, true),
            row(256, 4.0, 1.09, 10.24, true, false),
            row(512, 1.5, 0.11, 4.84, false, false),
            row(1024, 0.0, 0.0, 3.69, false, false),
        ]
    });
    // Relative to the root where it can be, so the heading reads the same on every machine.
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let dir = tmp.strip_prefix(root()).unwrap_or(tmp);
    let path = dir.join("watch-other-sizes.json");
    std::fs::write(&path, doc.to_string()).unwrap();
    let rel = path.to_str().unwrap();
    let summary = xrunlab::report::text::input(&input(rel));
    assert!(
        summary.contains("at 512 it would have had about 2 (0-5)"),
        "{summary}"
    );
    // The fixture is a version-3 watch: its `lower_bound` row is read as rough, not a floor.
    assert!(
        summary.contains("at 128 roughly 9") && !summary.contains("at least"),
        "{summary}"
    );
    golden("report_watch-other-sizes", || {
        xrunlab::report::text::input(&input(rel))
    });
}

#[test]
fn comparisons_render_golden_in_80_columns() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    std::env::set_current_dir(root()).unwrap();
    use xrunlab::report::compare;
    for (name, a, b) in [
        ("compare_latency", "latency.json", "latency-audio.json"),
        ("compare_event", "event.json", "event-grid.json"),
        ("compare_rtl", "rtl.json", "rtl-alsa.json"),
    ] {
        golden(name, || {
            let inputs = vec![
                input(&format!("tests/fixtures/results/{a}")),
                input(&format!("tests/fixtures/results/{b}")),
            ];
            let labels = compare::labels(&inputs, &[]).unwrap();
            // As the CLI prints it (`output::human`).
            style::fit(&compare::to_text(
                &compare::compare(&inputs, &labels).unwrap(),
            ))
        });
    }
}

/// What a command computes without measuring, written as a result and rendered back.
#[test]
fn verdict_and_predict_render_golden_in_80_columns() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    std::env::set_current_dir(root()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let runs: [(&str, Vec<&str>); 2] = [
        ("verdict", vec!["verdict", "tests/fixtures/verdict"]),
        (
            "predict",
            vec![
                "predict",
                "--latency",
                "tests/fixtures/results/latency.json",
                "--cost",
                "tests/fixtures/results/run.json",
            ],
        ),
    ];
    for (name, args) in runs {
        let out = dir.path().join(format!("{name}.json"));
        let st = xrunlab()
            .current_dir(root())
            .args(&args)
            .args(["-q", "-o", out.to_str().unwrap()])
            .output()
            .unwrap()
            .status;
        assert!(st.code().is_some_and(|c| c <= 1), "{name}: {st}");
        let doc = xrunlab::results::read_result(&out).unwrap();
        golden(&format!("{name}_summary"), || {
            xrunlab::report::text::body(&doc)
        });
    }
}

/// `plugins audit`'s table, from a committed audit of three built-ins (`plugins audit gain
/// reverb-light sine`: a pass with skips, a failed latency check, a long skip reason): the
/// live audit's cost checks depend on the machine's load.
#[test]
fn the_plugin_audit_renders_golden_in_80_columns() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    std::env::set_current_dir(root()).unwrap();
    let doc = xrunlab::results::read_result(Path::new("tests/fixtures/audit/builtins.json"))
        .expect("the committed audit reads");
    golden("plugins_audit", || xrunlab::report::text::body(&doc));
}

/// The summaries the CLI composes itself: 80 columns and golden. `check` and `tune`'s plan
/// read committed system trees (`--root`), not this machine; the tune journal named is
/// never written by a plan.
#[test]
fn cli_composed_summaries_fit_80_columns() {
    let cases: [(&str, &[&str]); 5] = [
        ("plugins_list", &["plugins", "list"]),
        ("rtl_model", &["rtl", "--model"]),
        ("verdict_cli", &["verdict", "tests/fixtures/verdict"]),
        (
            "check_desktop",
            &["check", "--root", "tests/fixtures/system/desktop-dynamic"],
        ),
        (
            "tune_plan",
            &[
                "tune",
                "--root",
                "tests/fixtures/system/tune-desktop",
                "--journal",
                "/nonexistent/xrunlab-tune.json",
            ],
        ),
    ];
    for (name, args) in cases {
        let out = xrunlab().current_dir(root()).args(args).output().unwrap();
        assert!(out.status.code().is_some_and(|c| c <= 1), "{name}");
        let text = String::from_utf8(out.stdout).unwrap();
        assert_fits(name, &text);
        insta::assert_snapshot!(name, text);
        // The same command very wide says the same numbers: none was split.
        let wide = common::xrunlab_wide()
            .current_dir(root())
            .args(args)
            .output()
            .unwrap();
        let wide = String::from_utf8(wide.stdout).unwrap();
        assert_eq!(numbers(&text), numbers(&wide), "{name}: a number was split");
    }
}

#[test]
fn a_table_too_wide_for_80_columns_is_turned_and_keeps_its_numbers() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let head: Vec<String> = (0..14).map(|k| format!("column {k}")).collect();
    let mut t = style::new_table(&head.iter().map(String::as_str).collect::<Vec<_>>());
    t.add_row(
        (0..14)
            .map(|k| style::num(format!("{}.{k}", 1000 + k)))
            .collect::<Vec<_>>(),
    );
    let s = t.to_string();
    assert_fits("turned", &s);
    assert!(
        s.lines()
            .any(|l| l.contains("column 13") && l.contains("1013.13")),
        "{s}"
    );
    // Many rows do not turn: each row is a block of `header: value` pairs.
    for k in 0..8 {
        t.add_row(vec![style::num(k); 14]);
    }
    let s = t.to_string();
    assert_fits("records", &s);
    assert!(s.contains("column 13: 1013.13"), "{s}");
}
