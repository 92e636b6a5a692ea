//! Terminal text: one summary per result kind (text/KIND.rs, mirroring html/KIND.rs), each
//! rendered from the result document's own types, so that a command printing what it just
//! measured and `report FILE` printing it later say the same thing.

pub mod audit;
pub mod bench;
pub mod check;
pub mod event;
pub mod forensics;
pub mod inside;
pub mod latency;
pub mod latencytest;
pub mod load;
pub mod predict;
pub mod rtl;
pub mod run;
pub mod sched;
pub mod stress;
pub mod style;
pub mod verdict;
pub mod watch;

use super::{Input, Loaded};
use crate::results::{Body, ResultDoc};

/// The summary of one result document's body, as `report FILE` prints it.
pub fn body(doc: &ResultDoc) -> String {
    style::fit(&match &doc.body {
        Body::Check { results, .. } => check::summary(results),
        Body::Latency { config, results } => latency::summary(config, results),
        Body::Run { config, results } => run::summary(config, results, doc.status),
        Body::Bench { config, results } => {
            bench::summary(results, config.rate, config.buffer_frames)
        }
        Body::Stress { results, .. } => stress::summary(results),
        Body::Audit { results, .. } => audit::summary(results),
        Body::Load { config, results } => load::summary(config, results),
        Body::Latencytest { results, .. } => latencytest::summary(results),
        Body::Sched { results, .. } => sched::summary(results),
        Body::Rtl { config, results } => rtl::summary(config, results),
        Body::Predict { config, results } => predict::summary(config, results),
        Body::Verdict { config, results } => verdict::summary(config, results),
        Body::Event { config, results } => event::summary(config, results),
        Body::Watch { config, results } => watch::summary(config, results, doc.status),
    })
}

/// One input of `report` without `-o`: a heading naming the file, its kind and status, the
/// machine, the warnings, then the kind's summary (a kind this build does not know as its
/// flattened fields).
pub fn input(i: &Input) -> String {
    // A deep path keeps its own line and the kind goes below it, so the path stays whole and
    // nothing else runs past the terminal's edge.
    let path = format!("== {}", i.path.display());
    let kind = format!("({}, {}) ==", i.kind(), i.status());
    let mut s = if path.chars().count() + 1 + kind.chars().count() <= style::width() {
        format!("{path} {kind}\n")
    } else {
        format!("{path}\n   {kind}\n")
    };
    if let Some(env) = i.environment() {
        s.push_str(&format!("{}\n", style::wrap(&style::system_line(env), 2)));
    }
    for w in i.warnings() {
        s.push_str(&format!("{}\n", style::wrap(&format!("warning: {w}"), 2)));
    }
    match &i.item {
        Loaded::Doc(doc) => s.push_str(&body(doc)),
        Loaded::Other { value, .. } => {
            for (k, v) in super::flatten(value.get("results").unwrap_or(value), 40) {
                s.push_str(&format!("{}\n", style::wrap(&format!("{k}: {v}"), 2)));
            }
        }
    }
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::check::{CheckItem, CheckReport, Verdict};
    use crate::system::Environment;
    use std::path::{Path, PathBuf};

    fn fixture(name: &str) -> Input {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results");
        crate::report::load(&p.join(name)).expect("committed fixtures load")
    }

    fn doc(i: &Input) -> &ResultDoc {
        match &i.item {
            Loaded::Doc(d) => d,
            Loaded::Other { .. } => panic!("a known kind"),
        }
    }

    #[test]
    fn the_machine_line_names_host_kernel_cpus_and_what_weakens_it() {
        let mut env = Environment::default();
        env.kernel = "6.1.0-rt".into();
        env.kernel_version = "#1 SMP PREEMPT_RT".into();
        env.cpus.count = 4;
        assert_eq!(
            style::system_line(&env),
            "?: Linux 6.1.0-rt (#1 SMP PREEMPT_RT), 4 CPUs"
        );
        env.hostname = "box".into();
        env.cpus.model = "Cortex-A72".into();
        env.virtualization = Some("kvm".into());
        env.container = Some("docker".into());
        assert_eq!(
            style::system_line(&env),
            "box: Linux 6.1.0-rt (#1 SMP PREEMPT_RT), 4 CPUs (Cortex-A72), virtualised: kvm, container: docker"
        );
    }

    #[test]
    fn a_table_printed_as_blocks_keeps_each_line_of_a_many_line_cell() {
        let mut t = style::new_table(&["plugin", "verdict", "findings"]);
        let long = "vst3:2046504473616C633244485A00000000-and-a-name-that-cannot-share-a-row";
        t.add_row(vec![
            long,
            "fail",
            "rt.heap fail: 12 heap operations\nlatency fail: measured 35 frames",
        ]);
        let text = t.to_string();
        assert!(
            text.contains("\n    rt.heap fail: 12 heap operations\n"),
            "{text}"
        );
        assert!(
            text.contains("\n    latency fail: measured 35 frames\n"),
            "{text}"
        );
        assert!(text.contains("verdict: fail"), "{text}");
    }

    #[test]
    fn a_command_in_backticks_is_never_wrapped_inside() {
        let text = "frequency ramps add latency and change the DSP load here: `cpupower frequency-set -g performance` now";
        let w = style::wrap(text, 2);
        assert!(
            w.lines()
                .any(|l| l.contains("`cpupower frequency-set -g performance`")),
            "{w}"
        );
    }

    #[test]
    fn a_check_summary_has_a_block_per_check_and_the_tally_last() {
        let item = |id: &str, verdict| CheckItem {
            id: id.into(),
            title: format!("title of {id}"),
            verdict,
            observed: format!("seen {id}"),
            advice: String::new(),
        };
        let r = CheckReport {
            checks: vec![item("a", Verdict::Ok), item("b", Verdict::Fail)],
            ok: 1,
            warn: 0,
            fail: 1,
        };
        let s = check::summary(&r);
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines.last(), Some(&"1 ok, 0 warn, 1 fail"));
        let row = |id: &str| lines.iter().find(|l| l.contains(&format!("title of {id}")));
        assert!(row("a").unwrap().starts_with("ok "), "{s}");
        assert!(row("b").unwrap().starts_with("FAIL "), "{s}");
        assert!(row("b").unwrap().contains("seen b"), "{s}");
    }

    /// Every committed fixture renders, headed the way its kind's summary starts.
    #[test]
    fn every_fixture_kind_has_its_summary() {
        let heads = [
            ("bench.json", "plugins bench at "),
            ("check.json", "ok   User and audio group: "),
            ("event.json", "Trigger-to-sound latency at "),
            ("latency.json", "┌"),
            ("latencytest.json", "latencytest: fragment "),
            ("load.json", "load: "),
            ("rtl.json", "RTL model: "),
            ("rtl-model.json", "RTL model: "),
            ("run.json", "run: "),
            ("sched.json", "period P = "),
            ("stress.json", ""),
        ];
        for (file, head) in heads {
            let i = fixture(file);
            let s = body(doc(&i));
            assert!(s.starts_with(head), "{file}: {s}");
            assert!(s.ends_with('\n'), "{file}");
            // The report form adds the heading and the machine, then the same body.
            let whole = input(&i);
            assert!(whole.starts_with("== "), "{file}");
            assert!(whole.contains(&s), "{file}");
        }
    }

    #[test]
    fn a_run_summary_says_its_counts_and_marks_a_partial_result() {
        let i = fixture("run.json");
        let Body::Run { config, results } = &doc(&i).body else {
            panic!("a run")
        };
        let s = run::summary(config, results, crate::common::Status::Complete);
        let counts = format!("cycles {}  xruns {}", results.cycles, results.xruns.total);
        assert!(s.lines().any(|l| l.starts_with(&counts)), "{s}");
        assert!(!s.contains("partial result"));
        let p = run::summary(config, results, crate::common::Status::Interrupted);
        assert!(p.ends_with("status: Interrupted (partial result)\n"), "{p}");
    }

    #[test]
    fn a_model_only_rtl_is_one_table_of_the_buffers() {
        let i = fixture("rtl-model.json");
        let Body::Rtl { config, results } = &doc(&i).body else {
            panic!("an rtl")
        };
        let s = rtl::summary(config, results);
        for row in &results.model {
            let cells = format!("{} ", row.buffer_frames);
            assert!(s.lines().any(|l| l.contains(&cells)), "{s}");
        }
        assert!(!s.contains("measured"), "{s}");
    }

    #[test]
    fn an_unknown_kind_is_shown_as_its_fields() {
        let i = Input {
            path: PathBuf::from("new.json"),
            item: Loaded::Other {
                kind: "future".into(),
                status: "complete".into(),
                environment: None,
                warnings: vec!["odd".into()],
                value: serde_json::json!({"results": {"a": 1, "b": [2, 3]}}),
            },
        };
        assert_eq!(
            input(&i),
            "== new.json (future, complete) ==\nwarning: odd\na: 1\nb: 2, 3\n\n"
        );
    }

    #[test]
    fn forensics_parts_are_cut_at_twenty() {
        let f = crate::trace::Forensics {
            instance: "xrunlab".into(),
            cpus: vec![1],
            events: 10,
            lost_events: 0,
            lost_per_cpu: Vec::new(),
            missing_events: Vec::new(),
            windows_of: "xrun".into(),
            windows_total: 0,
            windows: Vec::new(),
            culprits: Vec::new(),
            csv_file: None,
            worst: None,
        };
        let parts: Vec<(String, &crate::trace::Forensics)> =
            (0..25).map(|k| (format!("part {k}"), &f)).collect();
        let s = forensics::parts(parts);
        assert_eq!(s.lines().count(), 21, "{s}");
        assert!(
            s.starts_with("  part 0: 0 xrun(s); nobody took their time\n"),
            "{s}"
        );
        assert!(s.ends_with("  … and 5 more in the result\n"), "{s}");
    }
}
