//! KCIDB I/O JSON (schema v5.3, as the `kcidb-io` package publishes it): the cases of
//! [`super::cases`] as test records with a dotted `path` under `xrunlab`, a `status` and a
//! `number`, on a build and a checkout named after the kernel the results were measured on
//! (what KernelCI tests is a kernel; xrunlab does not know its git commit, so the ids say
//! the release and the host).

use super::cases::{cases, Outcome, Unit};
use super::{Export, Exporter};
use crate::error::{Error, Result};
use serde_json::{json, Map, Value};

pub struct Kcidb;

/// The schema version written.
pub const VERSION: (u32, u32) = (5, 3);

/// The origin used when none is given.
pub const ORIGIN: &str = "xrunlab";

impl Exporter for Kcidb {
    fn name(&self) -> &'static str {
        "kcidb"
    }

    fn extension(&self) -> &'static str {
        "kcidb"
    }

    fn export(&self, input: &Export, out: &mut dyn std::io::Write) -> Result<()> {
        out.write_all(&render(input, ORIGIN)?)
            .map_err(|e| super::io(self.name(), e))
    }
}

/// Whether `origin` is one KCIDB accepts (`[a-z0-9_]+`).
pub fn valid_origin(origin: &str) -> bool {
    !origin.is_empty()
        && origin
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// The KCIDB document of `input` with ids under `origin`, as bytes.
pub fn render(input: &Export, origin: &str) -> Result<Vec<u8>> {
    if !valid_origin(origin) {
        return Err(Error::usage(format!(
            "KCIDB origin {origin:?}: only lower-case letters, digits and '_'"
        )));
    }
    let list = cases(input);
    let fallback = list
        .iter()
        .find(|c| !c.kernel.is_empty())
        .map(|c| (c.host.clone(), c.kernel.clone()))
        .unwrap_or_default();
    let mut kernels: Vec<String> = Vec::new();
    let mut tests = Vec::new();
    for c in &list {
        let (host, kernel) = if c.kernel.is_empty() {
            fallback.clone()
        } else {
            (c.host.clone(), c.kernel.clone())
        };
        let kernel = if kernel.is_empty() { "unknown".to_string() } else { kernel };
        if !kernels.contains(&kernel) {
            kernels.push(kernel.clone());
        }
        let path = format!("xrunlab.{}", c.path.join("."));
        let mut t = Map::new();
        t.insert(
            "id".into(),
            json!(format!(
                "{origin}:{host}:{}:{path}",
                c.started_at.as_deref().unwrap_or("")
            )),
        );
        t.insert("build_id".into(), json!(format!("{origin}:{kernel}")));
        t.insert("origin".into(), json!(origin));
        t.insert("path".into(), json!(path));
        t.insert(
            "status".into(),
            json!(match c.outcome {
                Outcome::Pass => "PASS",
                Outcome::Fail => "FAIL",
                Outcome::Skip => "SKIP",
                Outcome::Done => "DONE",
            }),
        );
        if let Some((v, unit)) = c.measurement {
            let n = match unit {
                Unit::Seconds => json!({"value": v, "unit": "s", "prefix": "metric"}),
                Unit::Frames => json!({"value": v, "unit": "frames"}),
                Unit::Xruns => json!({"value": v, "unit": "xruns"}),
                Unit::XrunsPerHour => json!({"value": v, "unit": "xruns/h"}),
                Unit::Percent => json!({"value": v, "unit": "%"}),
            };
            t.insert("number".into(), n);
        }
        if let Some(s) = &c.started_at {
            t.insert("start_time".into(), json!(s));
        }
        if let Some(d) = c.duration_s {
            t.insert("duration".into(), json!(d));
        }
        if !host.is_empty() {
            t.insert("environment".into(), json!({"comment": host}));
        }
        tests.push(Value::Object(t));
    }
    let checkouts: Vec<Value> = kernels
        .iter()
        .map(|k| json!({"id": format!("{origin}:{k}"), "origin": origin, "misc": {"kernel": k}}))
        .collect();
    let builds: Vec<Value> = kernels
        .iter()
        .map(|k| {
            json!({"id": format!("{origin}:{k}"), "checkout_id": format!("{origin}:{k}"),
                   "origin": origin, "misc": {"kernel": k}})
        })
        .collect();
    let doc = json!({
        "version": {"major": VERSION.0, "minor": VERSION.1},
        "checkouts": checkouts,
        "builds": builds,
        "tests": tests,
    });
    let mut s = serde_json::to_string_pretty(&doc).expect("JSON values serialise");
    s.push('\n');
    Ok(s.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Input;
    use std::path::Path;

    #[test]
    fn cases_are_tests_on_the_kernels_build() {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results");
        let inputs: Vec<Input> = ["latency.json", "run.json"]
            .iter()
            .map(|n| crate::report::load(&p.join(n)).unwrap())
            .collect();
        let v: Value = serde_json::from_slice(&render(&Export::of(&inputs), "lab_1").unwrap()).unwrap();
        assert_eq!(v["version"]["major"], 5);
        let tests = v["tests"].as_array().unwrap();
        let t = tests
            .iter()
            .find(|t| t["path"] == "xrunlab.latency.idle.max-latency")
            .unwrap();
        assert_eq!(t["status"], "PASS");
        assert_eq!(t["number"]["unit"], "s");
        assert!((t["number"]["value"].as_f64().unwrap() - 0.013052441).abs() < 1e-12);
        assert_eq!(t["build_id"], v["builds"][0]["id"]);
        assert!(t["id"].as_str().unwrap().starts_with("lab_1:"));
        let x = tests
            .iter()
            .find(|t| t["path"] == "xrunlab.run.virtual.64-frames.idle.xruns")
            .unwrap();
        assert_eq!(x["status"], "FAIL");
        assert_eq!(x["number"]["value"], 17.0);
    }

    #[test]
    fn a_bad_origin_is_refused() {
        assert!(render(&Export::of(&[]), "My Lab").is_err());
    }
}
