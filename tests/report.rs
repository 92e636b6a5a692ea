//! `xrunlab report` and `xrunlab compare` on committed fixtures produced by the real
//! commands (tests/fixtures/results/README.md says how they were made).

mod common;

use common::{require, which, xrunlab, xrunlab_wide};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/results")
        .join(format!("{name}.json"))
}

/// kind, fixture, inline SVG charts its section must carry.
const FIXTURES: &[(&str, &str, usize)] = &[
    ("check", "check", 0),
    ("latency", "latency", 2),
    ("latency", "latency-audio", 2),
    ("run", "run", 3),
    ("bench", "bench", 1),
    ("stress", "stress", 0),
    ("load", "load", 2),
    ("latencytest", "latencytest", 2),
    ("sched", "sched", 4),
    ("rtl", "rtl", 1),
    ("rtl", "rtl-model", 1),
    ("rtl", "rtl-alsa", 1),
    ("event", "event", 2),
    ("event", "event-grid", 1),
];

/// What each kind's dedicated section shows (figures and tables shaped like the studies').
const PARTS: &[(&str, &[&str])] = &[
    (
        "event",
        &[
            "Trigger-to-sound latency",
            "model min / mean / max ms",
            "Mean latency: measured vs model",
            "latency per trial",
        ],
    ),
    (
        "load",
        &[
            "DSP load test",
            "Max instances per track",
            "Mean DSP load per instance",
            "Cells",
            "max/track",
        ],
    ),
    (
        "latencytest",
        &[
            "Audio loop latency",
            "t3 − t1 (loop)",
            "t2 − t1 (work)",
            "Phase idle",
            "Phase cpu",
            "overruns",
        ],
    ),
    (
        "sched",
        &[
            "Scheduling policies",
            "Driver end time CDF",
            "Competing task response time CDF",
            "Budget: deadline",
            "Set Q",
            "Predicted Q",
            "fifo 10 / compete 15",
        ],
    ),
    (
        "rtl",
        &[
            "Round-trip latency",
            "Modelled RTL (Table 1 shape)",
            "Measured against the model",
            "loop's ground truth",
            "RTL estimate over the measurement",
        ],
    ),
];

fn report_html(files: &[PathBuf], dir: &Path) -> String {
    let out = dir.join("report.html");
    xrunlab()
        .arg("report")
        .args(files)
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    std::fs::read_to_string(&out).unwrap()
}

/// Nothing that could make a browser fetch: no scripts, no external src/href, no CSS url().
fn assert_self_contained(html: &str) {
    let lower = html.to_lowercase();
    assert!(!lower.contains("<script"), "report has a script");
    assert!(!lower.contains("url("), "report has a CSS url()");
    for attr in ["src=", "href="] {
        for (i, _) in lower.match_indices(attr) {
            let v = lower[i + attr.len()..].trim_start_matches(['"', '\'']);
            assert!(
                v.starts_with('#'),
                "{attr} points outside the page: {}",
                &v[..v.len().min(60)]
            );
        }
    }
}

fn section<'a>(html: &'a str, kind: &str) -> &'a str {
    let start = html
        .find(&format!("data-kind=\"{kind}\""))
        .unwrap_or_else(|| panic!("no {kind} section"));
    let rest = &html[start..];
    &rest[..rest.find("</section>").unwrap()]
}

#[test]
fn report_from_every_fixture() {
    let dir = tempfile::tempdir().unwrap();
    for (kind, name, svgs) in FIXTURES {
        let html = report_html(&[fixture(name)], dir.path());
        assert_self_contained(&html);
        let s = section(&html, kind);
        // The environment is said once, above the sections; every fixture was measured in
        // a VM, and that warning is in it, not repeated per section.
        assert_eq!(html.matches("<h2>Environment</h2>").count(), 1, "{name}");
        let env = html.find("<h2>Environment</h2>").unwrap();
        let warn = html.find("virtual machine").expect("VM warning");
        assert!(
            env < warn && warn < html.find("section class=\"result\"").unwrap(),
            "{name}"
        );
        assert!(
            !s.contains("<li>⚠ running in a virtual machine"),
            "{name}: the warning repeated"
        );
        assert!(s.contains("command"), "{name}: no command line");
        assert_eq!(s.matches("<svg").count(), *svgs, "{name}: charts");
        assert_eq!(s.matches("</svg>").count(), *svgs, "{name}: charts closed");
    }
    let html = report_html(&[fixture("latency"), fixture("run")], dir.path());
    assert!(section(&html, "latency").contains("Latency histogram per CPU"));
    assert!(section(&html, "latency").contains("Latency over time"));
    assert!(section(&html, "latency").contains("Percentiles"));
    let run = section(&html, "run");
    for part in [
        "DSP load",
        "Distributions",
        "Xruns by cause",
        "Xruns over the run",
    ] {
        assert!(run.contains(part), "run section lacks {part}");
    }
    for (kind, parts) in PARTS {
        let html = report_html(&[fixture(kind)], dir.path());
        let sec = section(&html, kind);
        for part in *parts {
            assert!(sec.contains(part), "{kind} section lacks {part}");
        }
        // Sections shaped like the studies' replace the generic field table.
        assert!(!sec.contains("no dedicated view"), "{kind}");
    }
    let model = report_html(&[fixture("rtl-model")], dir.path());
    let sec = section(&model, "rtl");
    assert!(sec.contains("Modelled RTL per buffer size"));
    assert!(sec.contains("as printed in Vignati et al."));
    // A loop through a device shows what its stack declares beside the measurement.
    let alsa = report_html(&[fixture("rtl-alsa")], dir.path());
    let sec = section(&alsa, "rtl");
    assert!(
        sec.contains("declared (ALSA playback + capture delay)"),
        "{sec}"
    );
    assert!(sec.contains("measured − declared"), "{sec}");
    let audio = report_html(&[fixture("latency-audio")], dir.path());
    assert!(audio.contains("Audio period 64 frames @ 48000 Hz"));
}

#[test]
fn unknown_kind_gets_a_generic_section() {
    let dir = tempfile::tempdir().unwrap();
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("bench")).unwrap()).unwrap();
    v["kind"] = "futurekind".into();
    let p = dir.path().join("future.json");
    std::fs::write(&p, v.to_string()).unwrap();
    let html = report_html(&[p.clone(), fixture("check")], dir.path());
    let s = section(&html, "futurekind");
    assert!(s.contains("no dedicated view"));
    assert!(s.contains("ns_per_frame"));
    assert!(html.contains("data-kind=\"check\""));
    // The terminal summary takes it too.
    xrunlab().arg("report").arg(&p).assert().success();
}

#[test]
fn terminal_summary_without_output() {
    let files: Vec<PathBuf> = FIXTURES.iter().map(|f| fixture(f.1)).collect();
    let out = xrunlab().arg("report").args(&files).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    // A heading whose path is too deep for one line (the checkout's depth decides) has its
    // kind on the next line.
    let headings = text.replace("\n   (", " (");
    for (kind, name, _) in FIXTURES {
        assert!(
            headings.contains(&format!("{name}.json ({kind}, complete)")),
            "{text}"
        );
    }
    for part in [
        "p99.99 µs",
        "DSP load",
        "ns/f median",
        "bogo ops",
        "RT throttling",
        "max/track",
        "loop max ms",
        "period P = ",
        "deadline-adaptive",
        "RTL model",
        "measured − model",
    ] {
        assert!(text.contains(part), "summary lacks {part}");
    }
}

#[test]
fn bad_files_exit_2_naming_them_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"schema_version\": 1, \"kind\": \"latency\"}").unwrap();
    let out = dir.path().join("r.html");
    for f in [bad.clone(), dir.path().join("missing.json")] {
        let o = xrunlab()
            .args(["report"])
            .arg(fixture("check"))
            .arg(&f)
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(f.file_name().unwrap().to_str().unwrap()),
            "{err}"
        );
        assert!(!out.exists());
    }
}

#[test]
fn compare_latency_prints_table_2_shape() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("c.html");
    let out = xrunlab_wide()
        .arg("compare")
        .arg(fixture("latency"))
        .arg(fixture("latency-audio"))
        .arg("--label")
        .arg("latency-audio.json=with audio period")
        .arg("-o")
        .arg(&html)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let header = text
        .lines()
        .find(|l| l.contains("system"))
        .expect("header row");
    let cols: Vec<&str> = header.split_whitespace().collect();
    for c in ["min", "avg", "max", "p99"] {
        assert!(cols.contains(&c), "{header}");
    }
    // One row per system: the default label (hostname kernel idle) and the override.
    assert!(
        text.lines().any(|l| l.contains("with audio period")),
        "{text}"
    );
    assert!(text.lines().any(|l| l.contains(" idle")), "{text}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert_self_contained(&page);
    assert!(page.contains("with audio period"));
}

fn json(name: &str) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(fixture(name)).unwrap()).unwrap()
}

fn compare_text(a: &str, b: &str) -> String {
    let out = xrunlab_wide()
        .arg("compare")
        .arg(fixture(a))
        .arg(fixture(b))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Vignati et al. Table 1: one row per buffer size, the two systems' modelled RTL side by side.
#[test]
fn compare_rtl_prints_table_1_shape() {
    let text = compare_text("rtl-model", "rtl-xenomai");
    assert!(text.contains("Vignati et al. Table 1"), "{text}");
    let (a, b) = (json("rtl-model"), json("rtl-xenomai"));
    let rows = a["results"]["model"].as_array().unwrap();
    assert_eq!(rows.len(), 6);
    for (ra, rb) in rows.iter().zip(b["results"]["model"].as_array().unwrap()) {
        let buffer = ra["buffer_frames"].as_u64().unwrap();
        assert_eq!(buffer, rb["buffer_frames"].as_u64().unwrap());
        let line = text
            .lines()
            .find(|l| l.contains(&format!(" {buffer} frames ")))
            .unwrap_or_else(|| panic!("no row for {buffer}:\n{text}"));
        let cells: Vec<&str> = line
            .split('│')
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        for (cell, r) in cells[1..].iter().zip([ra, rb]) {
            let want = format!(
                "{:.2} ({} fr)",
                r["rtl_ms"].as_f64().unwrap(),
                r["rtl_frames"].as_u64().unwrap()
            );
            assert_eq!(*cell, want, "{line}");
        }
    }
    // A measured loop adds the measured table beside the models.
    let text = compare_text("rtl", "rtl-model");
    assert!(text.contains("Round-trip latency, measured"), "{text}");
    let d = json("rtl")["results"]["measured"]["delay_frames"]
        .as_f64()
        .unwrap();
    assert!(text.contains(&format!("{d:.3}")), "{text}");
    // An ALSA loop beside the virtual one: its device and what ALSA declared for it.
    let text = compare_text("rtl-alsa", "rtl");
    let v = json("rtl-alsa");
    let last = v["results"]["alsa"]["driver"]["loop_delay_last_frames"]
        .as_i64()
        .unwrap();
    let row = text
        .lines()
        .find(|l| l.contains("declared by the stack (frames)"))
        .unwrap_or_else(|| panic!("no declared row:\n{text}"));
    assert!(row.contains(&last.to_string()), "{row}");
    assert!(text.contains("alsa 'xrlloop' @ 256 frames × 3"), "{text}");
    assert!(text.contains("measured − declared (frames)"), "{text}");
}

/// Fig. 2 for two systems and sched policies side by side, text and HTML with charts.
#[test]
fn compare_load_and_sched_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    let text = compare_text("load", "load");
    assert!(text.contains("Max instances per track"), "{text}");
    assert!(text.contains("Mean DSP load per instance"), "{text}");
    let v = json("load");
    let cells = v["results"]["cells"].as_array().unwrap();
    let c = &cells[0];
    let key = format!(
        "{} · {} · {}",
        c["buffer_frames"],
        c["tracks"],
        c["plugin"].as_str().unwrap()
    );
    assert!(text.lines().any(|l| l.contains(&key)), "{key}: {text}");
    let text = compare_text("sched", "sched");
    for part in [
        "Driver end time p50 / p99 / max",
        "Set Q avg / max",
        "deadline-adaptive",
    ] {
        assert!(text.contains(part), "{part}: {text}");
    }
    for (name, svgs) in [("load", 2), ("sched", 1)] {
        let page = dir.path().join(format!("{name}.html"));
        xrunlab()
            .arg("compare")
            .arg(fixture(name))
            .arg(fixture(name))
            .arg("-o")
            .arg(&page)
            .assert()
            .success();
        let html = std::fs::read_to_string(&page).unwrap();
        assert_self_contained(&html);
        assert_eq!(html.matches("<svg").count(), svgs, "{name}");
    }
}

#[test]
fn compare_every_kind_with_itself() {
    for (_, name, _) in FIXTURES {
        let out = xrunlab()
            .arg("compare")
            .arg(fixture(name))
            .arg(fixture(name))
            .output()
            .unwrap();
        assert!(out.status.success(), "{name}");
        let text = String::from_utf8(out.stdout).unwrap();
        // Same label twice is numbered so the columns stay distinct.
        assert!(text.contains("#1") && text.contains("#2"), "{name}: {text}");
    }
}

#[test]
fn compare_mismatched_kinds_exits_2_naming_them() {
    let out = xrunlab()
        .arg("compare")
        .arg(fixture("latency"))
        .arg(fixture("run"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("latency") && err.contains("run"), "{err}");
    let out = xrunlab()
        .args(["compare", "--label", "9=x"])
        .arg(fixture("bench"))
        .arg(fixture("bench"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// The report as a browser sees it: every section and chart in the DOM, no console
/// errors, nothing fetched.
#[test]
fn report_in_headless_chromium() {
    let Some(chromium) = which("chromium") else {
        let _ = require(false, "chromium (apt-get install chromium)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<PathBuf> = FIXTURES.iter().map(|f| fixture(f.1)).collect();
    report_html(&files, dir.path());
    let page = dir.path().join("report.html");
    let out = std::process::Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            // Any fetch would fail to resolve and show in the log as a console error.
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!(
            "--user-data-dir={}",
            dir.path().join("profile").display()
        ))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dom = String::from_utf8(out.stdout).unwrap();
    for (i, (kind, _, svgs)) in FIXTURES.iter().enumerate() {
        assert!(
            dom.contains(&format!("id=\"r{}\"", i + 1)),
            "section {}",
            i + 1
        );
        assert_eq!(section(&dom, kind).matches("<svg").count() > 0, *svgs > 0);
    }
    let total: usize = FIXTURES.iter().map(|f| f.2).sum();
    assert_eq!(dom.matches("<svg").count(), total);
    assert_self_contained(&dom);
    let log = String::from_utf8_lossy(&out.stderr);
    for bad in [
        "CONSOLE(",
        "Uncaught",
        "net::ERR",
        "Failed to load resource",
    ] {
        assert!(!log.contains(bad), "chromium reported {bad}:\n{log}");
    }
}

/// The load summary sets failed trials against the host's steal: how many had every xrun in
/// a window where the hypervisor stole time, beside the share of windows that had steal.
#[test]
fn load_summary_says_which_failed_trials_the_host_explains() {
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture("load")).unwrap()).unwrap();
    // The fixture predates the sampling: give its first cell's failed trials a record.
    let mut failed = 0u32;
    for t in v["results"]["cells"][0]["trials"].as_array_mut().unwrap() {
        if t["passed"] == false {
            let all = failed.is_multiple_of(2);
            t["host_steal"] = serde_json::json!({
                "interval_ms": 50.0, "windows": 10, "windows_with_steal": 2,
                "stolen_ms": 30.0, "xruns": 2, "xruns_in_steal_windows": if all { 2 } else { 1 }
            });
            failed += 1;
        }
    }
    assert!(failed >= 2);
    let doc: xrunlab::results::ResultDoc = serde_json::from_value(v).unwrap();
    let xrunlab::results::Body::Load { config, results } = doc.body else {
        panic!("not a load result")
    };
    let s = xrunlab::report::text::load::summary(&config, &results);
    let want = format!(
        "host: in {} of {failed} failed trials every xrun fell in a window where the hypervisor stole time (20 % of their 50 ms windows had steal)",
        failed.div_ceil(2)
    );
    assert!(s.contains(&want), "{s}");
}

/// The committed fixtures are schema version 1 and stay so: every reader brings them up to
/// the current version, with the fields version 2 renamed under their new names.
#[test]
fn version_1_results_are_read_with_the_renamed_fields() {
    use xrunlab::results::{read_result, Body, SCHEMA_VERSION};
    assert_eq!(json("rtl")["schema_version"], 1);
    assert_eq!(json("event-grid")["schema_version"], 1);
    // rtl: the model's `seed000_ms` is `published_ms`.
    for name in ["rtl", "rtl-model", "rtl-xenomai"] {
        let old = json(name);
        let doc = read_result(&fixture(name)).unwrap();
        assert_eq!(doc.schema_version, SCHEMA_VERSION);
        let Body::Rtl { results, .. } = &doc.body else {
            panic!("{name}: not rtl")
        };
        let rows = old["results"]["model"].as_array().unwrap();
        assert_eq!(rows.len(), results.model.len());
        for (o, m) in rows.iter().zip(&results.model) {
            assert_eq!(o["seed000_ms"].as_f64().unwrap(), m.published_ms, "{name}");
        }
        let again = doc.to_json();
        assert!(again.contains("\"published_ms\"") && !again.contains("seed000"));
    }
    // event: a run's `seed_buffer_frames` is `grid_buffer_frames`.
    for name in ["event", "event-grid"] {
        let old = json(name);
        let doc = read_result(&fixture(name)).unwrap();
        let Body::Event { results, .. } = &doc.body else {
            panic!("{name}: not event")
        };
        for (o, r) in old["results"]["runs"]
            .as_array()
            .unwrap()
            .iter()
            .zip(&results.runs)
        {
            assert_eq!(
                o["seed_buffer_frames"].as_u64().map(|b| b as u32),
                r.grid_buffer_frames,
                "{name}"
            );
        }
    }

    // `report` shows them: Table 1's printed ms beside the exact one (3.333 ms exactly, 3.34
    // as printed), and the grid's BUFFER/PERIOD settings.
    let dir = tempfile::tempdir().unwrap();
    let html = report_html(&[fixture("rtl")], dir.path());
    let sec = section(&html, "rtl");
    assert!(
        sec.contains(r#"<td class="n">3.333</td><td class="n">3.34</td>"#),
        "{sec}"
    );
    let html = report_html(&[fixture("event-grid")], dir.path());
    let sec = section(&html, "event");
    for pair in ["128/32", "256/64", "512/128"] {
        assert!(
            sec.contains(&format!(r#"<td class="n">{pair}</td>"#)),
            "{pair}: {sec}"
        );
    }
    let out = xrunlab_wide()
        .arg("report")
        .arg(fixture("rtl-model"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("as printed in Vignati et al."), "{text}");
    for r in json("rtl-model")["results"]["model"].as_array().unwrap() {
        if !r["below_profile_min"].as_bool().unwrap() {
            let ms = format!("{:.2}", r["seed000_ms"].as_f64().unwrap());
            assert!(text.contains(&ms), "{ms}: {text}");
        }
    }

    // `compare` takes version 1 too, and tables its event settings (read under their new
    // field names) instead of listing every field.
    let text = compare_text("event-grid", "event");
    assert!(
        text.contains("virtual mono 32×4: mean (model) ms"),
        "{text}"
    );
    assert!(!text.contains("seed"), "{text}");
    let text = compare_text("rtl", "rtl-xenomai");
    assert!(text.contains("Vignati et al. Table 1"), "{text}");
}

#[test]
fn a_result_newer_than_this_build_exits_2_saying_which_versions_it_reads() {
    let dir = tempfile::tempdir().unwrap();
    let mut v = json("rtl");
    v["schema_version"] = 99.into();
    let p = dir.path().join("future.json");
    std::fs::write(&p, v.to_string()).unwrap();
    let out = xrunlab().arg("report").arg(&p).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("schema_version 99"), "{err}");
    assert!(err.contains("versions 1 to"), "{err}");
}

/// Well-formed results with an empty list or a zero rate once panicked `report` (index out
/// of bounds, division by zero) and `compare`: every reader refuses them with exit 2 naming
/// the file and the field (issue 20 defect 8), and `load --resume` reads through the same
/// check.
#[test]
fn well_formed_results_with_empty_or_zero_fields_exit_2_naming_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &[&str], serde_json::Value, &str); 5] = [
        (
            "rtl",
            &["config", "buffers"],
            serde_json::json!([]),
            "config.buffers is empty",
        ),
        (
            "rtl",
            &["results", "model"],
            serde_json::json!([]),
            "results.model is empty",
        ),
        (
            "rtl-alsa",
            &["results", "model"],
            serde_json::json!([]),
            "results.model is empty",
        ),
        (
            "latency-audio",
            &["config", "audio_period", "rate"],
            0.into(),
            "config.audio_period 64@0",
        ),
        (
            "load",
            &["config", "buffers"],
            serde_json::json!([]),
            "config.buffers is empty",
        ),
    ];
    for (name, path, value, needle) in cases {
        let mut v = json(name);
        *path.iter().fold(&mut v, |v, k| &mut v[*k]) = value;
        let p = dir.path().join(format!("{name}-hostile.json"));
        std::fs::write(&p, v.to_string()).unwrap();
        let html = dir.path().join("r.html");
        let runs: [Vec<std::ffi::OsString>; 3] = [
            vec!["report".into(), p.clone().into()],
            vec![
                "report".into(),
                p.clone().into(),
                "-o".into(),
                html.clone().into(),
            ],
            vec!["compare".into(), fixture(name).into(), p.clone().into()],
        ];
        for args in runs {
            let out = xrunlab().args(&args).output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
            let want = format!("{}: {needle}", p.display());
            assert!(err.contains(&want), "{args:?}: '{want}' not in {err}");
            assert!(!html.exists());
        }
        if name == "load" {
            let out = xrunlab()
                .args(["load", "--driver", "sim", "--resume"])
                .arg(&p)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{err}");
            assert!(err.contains("config.buffers is empty"), "{err}");
        }
    }
}

/// The fixtures with 1-3 fields (anywhere in the document, the envelope too) replaced by
/// values no run writes.
fn hostile_result() -> impl proptest::strategy::Strategy<Value = (String, serde_json::Value)> {
    use proptest::prelude::*;
    use serde_json::{json, Value};
    // The smaller fixtures: every kind but sched and event-grid, whose size would make each
    // case slow (the in-crate sweep over single fields covers them).
    let names = [
        "check",
        "latency",
        "latency-audio",
        "run",
        "bench",
        "stress",
        "load",
        "latencytest",
        "rtl",
        "rtl-model",
        "rtl-alsa",
        "event",
    ];
    let docs: Vec<(String, Value)> = names.iter().map(|n| (n.to_string(), json(n))).collect();
    let value = prop_oneof![
        Just(json!(null)),
        Just(json!([])),
        Just(json!({})),
        Just(json!("")),
        Just(json!("x")),
        Just(json!(0)),
        Just(json!(-1)),
        Just(json!(1.5)),
        Just(json!(1e300)),
        Just(json!(u64::MAX)),
        Just(json!(i64::MIN)),
        any::<u64>().prop_map(|v| json!(v)),
    ];
    let edit = (any::<proptest::sample::Index>(), value);
    (0..docs.len(), proptest::collection::vec(edit, 1..4)).prop_map(move |(d, edits)| {
        let (name, mut doc) = docs[d].clone();
        for (at, v) in edits {
            let mut paths = Vec::new();
            leaf_paths(&doc, &mut Vec::new(), &mut paths);
            let path = &paths[at.index(paths.len())];
            *path.iter().fold(&mut doc, |x, k| match k.parse::<usize>() {
                Ok(i) if x.is_array() => &mut x[i],
                _ => &mut x[k.as_str()],
            }) = v;
        }
        (name, doc)
    })
}

/// Paths of every value under `v` (keys, and indices of the first two items of arrays).
fn leaf_paths(v: &serde_json::Value, at: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    out.push(at.clone());
    let mut go = |k: String, x: &serde_json::Value, out: &mut Vec<Vec<String>>| {
        at.push(k);
        leaf_paths(x, at, out);
        at.pop();
    };
    match v {
        serde_json::Value::Object(m) => m.iter().for_each(|(k, x)| go(k.clone(), x, out)),
        serde_json::Value::Array(a) => a
            .iter()
            .enumerate()
            .take(2)
            .for_each(|(i, x)| go(i.to_string(), x, out)),
        _ => {}
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]

    /// A hostile result file is read and presented (terminal-free: HTML report and
    /// comparison), or refused with exit 2 naming the file; never a panic.
    #[test]
    fn hostile_result_files_are_read_or_refused((name, doc) in hostile_result()) {
        use xrunlab::report::{compare, html, load};
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(format!("{name}.json"));
        std::fs::write(&p, doc.to_string()).unwrap();
        match load(&p) {
            Err(e) => {
                proptest::prop_assert_eq!(e.exit_code(), 2, "{}", e);
                proptest::prop_assert!(e.to_string().starts_with(&p.display().to_string()), "{}", e);
            }
            Ok(a) => {
                let inputs = [a, load(&p).unwrap()];
                let _ = html::report_with(&inputs, None);
                let labels = compare::labels(&inputs, &[]).unwrap();
                if let Ok(t) = compare::compare(&inputs, &labels) {
                    let _ = compare::to_text(&t);
                    let _ = compare::to_html(&t, &inputs, &labels);
                }
            }
        }
    }
}

/// Every fixture read, written back and read again is the same document.
#[test]
fn results_round_trip_through_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    for (_, name, _) in FIXTURES {
        let doc = xrunlab::results::read_result(&fixture(name)).unwrap();
        let p = dir.path().join("again.json");
        xrunlab::results::write_json_atomic(&p, &doc).unwrap();
        let again = xrunlab::results::read_result(&p).unwrap();
        assert_eq!(
            serde_json::to_value(&again).unwrap(),
            serde_json::to_value(&doc).unwrap(),
            "{name}"
        );
    }
}

/// Issue 17: the forensics of each result side by side — windows explained, lost events and
/// the top culprits with their windows and time — and "-" for a result traced by nobody.
#[test]
fn compare_shows_the_forensics_of_each_result_side_by_side() {
    let traced =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/forensics/run-paper.json");
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("cmp.html");
    let out = xrunlab_wide()
        .arg("compare")
        .arg(fixture("run"))
        .arg(&traced)
        .arg("-o")
        .arg(&html)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("Forensics: who took the time"), "{text}");
    let row = |name: &str| {
        text.lines()
            .find(|l| l.contains(name))
            .unwrap_or_else(|| panic!("no row {name}:\n{text}"))
            .to_string()
    };
    let windows = row("windows explained");
    assert!(
        windows.contains("29 xrun(s)") && windows.contains(" - "),
        "{windows}"
    );
    assert!(row("trace events / lost").contains("4104534 / 6983971"));
    // The fixture keeps 3 of its 29 windows in full: the verdicts say over which.
    assert!(row("wake-ups late").contains("1 / 1 / 1 of 3 kept"));
    assert!(row("culprit #1").contains("unaccounted"), "{text}");
    let first = row("#1 top in");
    assert!(first.contains("18 of 29 · 47.05 ms · 4799.7 µs"), "{first}");
    assert!(row("culprit #2").contains("softirq RCU"));
    assert!(row("#2 top in").contains("5 of 29"));
    assert!(text.contains("culprit #5") && !text.contains("culprit #6"));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("Forensics: who took the time"));
    assert!(page.contains("softirq RCU"));
}

/// A real traced run (the binary reader, no event lost) carries the timeline of its worst
/// xrun into the report.
#[test]
fn a_traced_run_reports_its_worst_xrun_as_a_timeline() {
    let traced =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/forensics/run-paper-raw.json");
    let dir = tempfile::tempdir().unwrap();
    let html = report_html(&[traced], dir.path());
    assert_self_contained(&html);
    assert!(html.contains("What ran on the CPU of the worst xrun"));
    let title = html
        .find("Worst xrun #35710 on CPU 0")
        .expect("no timeline of the worst xrun");
    let svg_start = html[..title]
        .rfind("<svg")
        .expect("the title is not in an SVG");
    let svg = &html[svg_start..title + html[title..].find("</svg>").unwrap()];
    // One lane per kind: our thread and unaccounted time at least.
    assert!(svg.matches("<rect").count() > 10, "{svg}");
}

/// Issue 31 §6: a suite's report opens with the verdict's answer in a coloured box, then the
/// verdict, then the environment once; a later section lists only the rows that differ.
#[test]
fn the_answer_comes_first_and_the_environment_once() {
    let dir = tempfile::tempdir().unwrap();
    let v = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/verdict");
    let suite = dir.path().join("suite");
    std::fs::create_dir(&suite).unwrap();
    for f in ["check.json", "latency-idle.json", "latency-stress.json"] {
        std::fs::copy(v.join(f), suite.join(f)).unwrap();
    }
    xrunlab()
        .args(["verdict", "-q", "-o"])
        .arg(suite.join("verdict.json"))
        .arg(&suite)
        .assert()
        .code(0);
    let out = dir.path().join("r.html");
    xrunlab()
        .arg("report")
        .arg(&suite)
        .arg("-o")
        .arg(&out)
        .arg("-q")
        .assert()
        .code(0);
    let html = std::fs::read_to_string(&out).unwrap();
    let answer = html.find("class=\"answer tone-").expect("no answer box");
    let first_section = html.find("<section").unwrap();
    assert!(answer < first_section, "the answer is not first");
    let verdict = html.find("data-kind=\"verdict\"").unwrap();
    let env = html
        .find("<h2>Environment</h2>")
        .expect("no environment block");
    assert!(verdict < env, "the verdict comes before the environment");
    assert_eq!(html.matches("<h2>Environment</h2>").count(), 1);
    assert_eq!(
        html.matches("<th>preemption</th>").count(),
        1,
        "environment repeated"
    );
    // The stressed latency differs from the first result in its stress row only.
    let stressed = html[html.find("latency-stress.json</h2>").unwrap()..].to_string();
    let stressed = &stressed[..stressed.find("</section>").unwrap()];
    assert!(
        stressed.contains("<th>stress</th>"),
        "the differing row is missing"
    );
    assert!(!stressed.contains("<th>preemption</th>"));
    // The box's colour says the tone, and an undecided answer names its next command.
    let tone = &html[answer + "class=\"answer tone-".len()..][..4];
    assert!(
        ["ok\"", "warn", "fail"].iter().any(|t| tone.starts_with(t)),
        "{tone}"
    );
    if tone.starts_with("warn") {
        assert!(html[answer..first_section].contains("next: "));
    }
}

/// Issue 31 §6: compare gives latencytest and event real tables, not every JSON path, and
/// two latency results their differences, overlaid histograms and exceedance curves.
#[test]
fn compare_has_tables_for_latencytest_event_and_latency_deltas() {
    let dir = tempfile::tempdir().unwrap();
    let text = |files: &[PathBuf]| {
        let o = xrunlab_wide()
            .arg("compare")
            .args(files)
            .arg("-o")
            .arg(dir.path().join("c.html"))
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        (
            String::from_utf8(o.stdout).unwrap(),
            std::fs::read_to_string(dir.path().join("c.html")).unwrap(),
        )
    };
    let (t, _) = text(&[fixture("latencytest"), fixture("latencytest")]);
    assert!(t.contains("latencytest (Senoner): per phase"), "{t}");
    assert!(t.contains("idle: overruns / cycles"), "{t}");
    assert!(t.lines().count() < 40, "a raw field dump:\n{t}");
    let (t, _) = text(&[fixture("event-grid"), fixture("event")]);
    assert!(t.contains("per setting"), "{t}");
    assert!(t.contains("mean (model) ms"), "{t}");
    assert!(!t.contains("runs.0."), "raw JSON paths:\n{t}");
    let v = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/verdict");
    let (t, html) = text(&[v.join("latency-idle.json"), v.join("latency-stress.json")]);
    assert!(t.contains("Latency differences"), "{t}");
    assert!(t.contains("(×"), "{t}");
    assert!(html.contains("Latency histograms, all CPUs"));
    assert!(html.contains("Exceedance: share of wake-ups later than x"));
    assert_eq!(html.matches("<svg").count(), 2);
}

/// A PipeWire watch (tests/fixtures/results/README.md): the report shows the late node, the
/// near-miss histogram, the busy histograms and the worst xrun's lanes; `compare` of two
/// watches has their late nodes and headroom; a hostile watch result is exit 2.
#[test]
fn a_pipewire_watch_renders_and_compares_and_a_hostile_one_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let w = fixture("watch-pipewire");
    let html = dir.path().join("w.html");
    let out = xrunlab_wide()
        .arg("report")
        .arg(&w)
        .arg("-o")
        .arg(&html)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(&html).unwrap();
    for part in [
        "Near misses",
        "Busy time per cycle",
        "The worst xrun",
        "xrl-slowpoke",
    ] {
        assert!(page.contains(part), "{part} missing");
    }
    let out = xrunlab().arg("report").arg(&w).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("near misses:"), "{text}");
    assert!(text.contains("'xrl-slowpoke' ran long"), "{text}");
    // Only a path deeper than a line (the checkout's own) may stand alone past 80 columns.
    for line in text.lines() {
        assert!(
            line.chars().count() <= 80 || (line.starts_with("== /") && !line[3..].contains(' ')),
            "{line}"
        );
    }
    let out = xrunlab_wide()
        .arg("compare")
        .arg(&w)
        .arg(&w)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("xrl-slowpoke (4)"), "{text}");
    assert!(text.contains("headroom least / p1 / p50"), "{text}");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&w).unwrap()).unwrap();
    v["results"]["headroom"]["bins"] = serde_json::json!("many");
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, v.to_string()).unwrap();
    let html = dir.path().join("bad.html");
    let out = xrunlab_wide()
        .arg("report")
        .arg(&bad)
        .arg("-o")
        .arg(&html)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!html.exists());
}
