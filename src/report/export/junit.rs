//! JUnit XML for CI servers (GitLab, Jenkins, GitHub Actions): one test case per suite stage
//! and per verdict criterion, so a pipeline shows what failed without opening the report.
//! The format is the common subset those servers read (Jenkins' junit.xsd): `testsuites` →
//! `testsuite` → `testcase` with an optional `failure` or `skipped`.

use super::{Export, Exporter};
use crate::error::{Error, Result};
use crate::report::format::{per_hour, rate_cell, span_at_least};
use crate::report::Loaded;
use crate::results::suite::{Manifest, StageStatus};
use crate::results::verdict::{VerdictConfig, VerdictResults};
use crate::results::Body;

/// JUnit XML of a suite: its manifest's stages, and the criteria of the first verdict among
/// the results (the host named is that verdict's).
pub struct Junit;

impl Exporter for Junit {
    fn name(&self) -> &'static str {
        "junit"
    }

    fn extension(&self) -> &'static str {
        "xml"
    }

    fn export(&self, input: &Export, out: &mut dyn std::io::Write) -> Result<()> {
        let Some(m) = input.manifest else {
            return Err(Error::usage(
                "JUnit is written for a suite: it needs its manifest",
            ));
        };
        let verdict = input.results.iter().find_map(|i| match &i.item {
            Loaded::Doc(d) => match &d.body {
                Body::Verdict { config, results } => {
                    Some((d.environment.hostname.as_str(), config, results.as_ref()))
                }
                _ => None,
            },
            Loaded::Other { .. } => None,
        });
        let host = verdict.map_or("", |v| v.0);
        let xml = document(m, verdict.map(|v| (v.1, v.2)), host);
        out.write_all(xml.as_bytes())
            .map_err(|e| super::io(self.name(), e))
    }
}

/// Text as XML character data or attribute value: escaped, and without the control
/// characters XML 1.0 cannot hold (a stage's log line may carry any byte).
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

enum Outcome {
    Pass,
    Fail(String),
    Skip(String),
}

struct Case {
    class: &'static str,
    name: String,
    secs: f64,
    outcome: Outcome,
}

fn suite_xml(name: &str, cases: &[Case], timestamp: &str, host: &str) -> String {
    let failures = cases
        .iter()
        .filter(|c| matches!(c.outcome, Outcome::Fail(_)))
        .count();
    let skipped = cases
        .iter()
        .filter(|c| matches!(c.outcome, Outcome::Skip(_)))
        .count();
    let time: f64 = cases.iter().map(|c| c.secs).sum();
    let mut s = format!(
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\" time=\"{time:.1}\" timestamp=\"{}\" hostname=\"{}\">\n",
        escape(name),
        cases.len(),
        escape(timestamp),
        escape(host),
    );
    for c in cases {
        let head = format!(
            "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.1}\"",
            c.class,
            escape(&c.name),
            c.secs
        );
        match &c.outcome {
            Outcome::Pass => s.push_str(&format!("{head}/>\n")),
            Outcome::Fail(m) => s.push_str(&format!(
                "{head}>\n      <failure message=\"{}\" type=\"failure\">{}</failure>\n    </testcase>\n",
                escape(m),
                escape(m)
            )),
            Outcome::Skip(m) => s.push_str(&format!(
                "{head}>\n      <skipped message=\"{}\"/>\n    </testcase>\n",
                escape(m)
            )),
        }
    }
    s.push_str("  </testsuite>\n");
    s
}

/// The JUnit document of a suite (its stages) and its verdict (a case per buffer size:
/// within the target passes, above it fails, undecided is skipped with how long to measure;
/// and one for the recommendation).
fn document(
    m: &Manifest,
    verdict: Option<(&VerdictConfig, &VerdictResults)>,
    host: &str,
) -> String {
    let stages: Vec<Case> = m
        .stages
        .iter()
        .map(|s| Case {
            class: "xrunlab.suite",
            name: s.stage.clone(),
            secs: s.duration_s,
            outcome: match s.status {
                StageStatus::Ok => Outcome::Pass,
                StageStatus::Failed => {
                    Outcome::Fail(s.reason.clone().unwrap_or_else(|| "failed".into()))
                }
                StageStatus::Skipped => {
                    Outcome::Skip(s.reason.clone().unwrap_or_else(|| "not run".into()))
                }
            },
        })
        .collect();
    let mut s = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let mut body = suite_xml("xrunlab suite", &stages, &m.started_at, host);
    let mut all = stages.len();
    let mut failed = stages
        .iter()
        .filter(|c| matches!(c.outcome, Outcome::Fail(_)))
        .count();
    if let Some((cfg, r)) = verdict {
        let target = per_hour(cfg.target_per_hour);
        let cond = r.judged_on.map_or("", |c| c.word());
        let mut cases: Vec<Case> = r
            .rows
            .iter()
            .map(|row| {
                let p = match r.judged_on {
                    Some(crate::results::verdict::Condition::Stressed) => row.stressed.as_ref(),
                    _ => row.idle.as_ref(),
                };
                let rate = p
                    .map(|p| format!("{}/h predicted", rate_cell(&p.xruns_per_hour)))
                    .unwrap_or_else(|| "no prediction".into());
                Case {
                    class: "xrunlab.verdict",
                    name: format!(
                        "{} frames within {target} glitch/h {cond}",
                        row.buffer_frames
                    ),
                    secs: 0.0,
                    outcome: match row.meets_target {
                        Some(true) => Outcome::Pass,
                        Some(false) => Outcome::Fail(rate),
                        None => Outcome::Skip(format!(
                            "undecided: {rate}{}",
                            p.and_then(|p| p.measure_for_ns)
                                .map(|t| format!("; measure {} of latency to decide", span_at_least(t)))
                                .unwrap_or_default()
                        )),
                    },
                }
            })
            .collect();
        cases.push(Case {
            class: "xrunlab.verdict",
            name: match cfg.fail_if_above {
                Some(b) => format!("a buffer size of at most {b} frames meets the target"),
                None => "some buffer size meets the target".into(),
            },
            secs: 0.0,
            outcome: if r.recommended_frames.is_some() && !r.failed_threshold {
                Outcome::Pass
            } else {
                Outcome::Fail(r.headline.clone())
            },
        });
        all += cases.len();
        failed += cases
            .iter()
            .filter(|c| matches!(c.outcome, Outcome::Fail(_)))
            .count();
        body.push_str(&suite_xml("xrunlab verdict", &cases, &m.started_at, host));
    }
    s.push_str(&format!(
        "<testsuites name=\"xrunlab\" tests=\"{all}\" failures=\"{failed}\" errors=\"0\">\n{body}</testsuites>\n"
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> Manifest {
        let stage = |name: &str, status: &str, reason: Option<&str>| {
            serde_json::json!({
                "stage": name, "argv": [], "status": status, "reason": reason, "note": null,
                "exit_code": null, "duration_s": 1.5, "file": null, "log": null
            })
        };
        serde_json::from_value(serde_json::json!({
            "tool": {"name": "xrunlab", "version": "0"},
            "mode": "smoke", "driver": "sim", "status": "complete",
            "started_at": "2026-01-01T00:00:00Z", "ended_at": null, "report": null,
            "stages": [
                stage("check", "ok", None),
                stage("latency", "failed", Some("exit 3: <no privilege>")),
                stage("rtl", "skipped", Some("no loop")),
            ],
        }))
        .unwrap()
    }

    #[test]
    fn a_suite_is_a_test_case_per_stage() {
        let m = manifest();
        let input = Export {
            results: &[],
            manifest: Some(&m),
        };
        let xml = String::from_utf8(super::super::render(&Junit, &input).unwrap()).unwrap();
        assert!(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"xrunlab\" tests=\"3\" failures=\"1\" errors=\"0\">\n"), "{xml}");
        assert!(xml.contains("<testsuite name=\"xrunlab suite\" tests=\"3\" failures=\"1\" errors=\"0\" skipped=\"1\" time=\"4.5\" timestamp=\"2026-01-01T00:00:00Z\" hostname=\"\">"), "{xml}");
        assert!(
            xml.contains("<testcase classname=\"xrunlab.suite\" name=\"check\" time=\"1.5\"/>"),
            "{xml}"
        );
        assert!(
            xml.contains("<failure message=\"exit 3: &lt;no privilege&gt;\" type=\"failure\">"),
            "{xml}"
        );
        assert!(xml.contains("<skipped message=\"no loop\"/>"), "{xml}");
        assert!(xml.ends_with("</testsuites>\n"));
    }

    #[test]
    fn junit_without_a_suite_is_refused() {
        assert!(super::super::render(&Junit, &Export::of(&[])).is_err());
    }

    #[test]
    fn text_is_escaped_and_control_characters_replaced() {
        assert_eq!(
            escape("a<b & \"c\" 'd' >\u{1b}[0m\tok"),
            "a&lt;b &amp; &quot;c&quot; &apos;d&apos; &gt;\u{FFFD}[0m\tok"
        );
    }
}
