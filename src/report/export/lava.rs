//! LAVA result lines, as Linaro's test-definitions write `output/result.txt`:
//! `<case> <pass|fail|skip> [<measurement> <units>]`, one per line, which their
//! `send-to-lava.sh` turns into `lava-test-case` calls. Times are in µs (`us`), as the
//! rt-tests definitions report cyclictest's.

use super::cases::{cases, Outcome, Unit};
use super::{Export, Exporter};
use crate::error::Result;

pub struct Lava;

impl Exporter for Lava {
    fn name(&self) -> &'static str {
        "lava"
    }

    // Not `txt`, the text exporter's: a LAVA job names its file (`-o result.txt`).
    fn extension(&self) -> &'static str {
        "lava"
    }

    fn export(&self, input: &Export, out: &mut dyn std::io::Write) -> Result<()> {
        out.write_all(lines(input).as_bytes())
            .map_err(|e| super::io(self.name(), e))
    }
}

/// A measurement as few digits as it needs (at most 3 decimals).
fn num(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.into()
    }
}

/// The result lines of `input`.
pub fn lines(input: &Export) -> String {
    let mut s = String::new();
    for c in cases(input) {
        let result = match c.outcome {
            Outcome::Pass | Outcome::Done => "pass",
            Outcome::Fail => "fail",
            Outcome::Skip => "skip",
        };
        s.push_str(&c.path.join("-"));
        s.push(' ');
        s.push_str(result);
        if let Some((v, unit)) = c.measurement {
            let (v, u) = match unit {
                Unit::Seconds => (v * 1e6, "us"),
                Unit::Frames => (v, "frames"),
                Unit::Xruns => (v, "xruns"),
                Unit::XrunsPerHour => (v, "xruns/h"),
                Unit::Percent => (v, "%"),
            };
            s.push_str(&format!(" {} {u}", num(v)));
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Input;
    use std::path::Path;

    fn fixture(dir: &str, name: &str) -> Input {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(dir);
        crate::report::load(&p.join(name)).unwrap()
    }

    #[test]
    fn results_become_cases_with_measurements_and_units() {
        let inputs = [
            fixture("results", "check.json"),
            fixture("results", "latency.json"),
            fixture("results", "run.json"),
            fixture("results", "rtl.json"),
        ];
        let t = lines(&Export::of(&inputs));
        assert!(t.contains("\nlatency-idle-max-latency pass 13052.441 us\n"), "{t}");
        assert!(t.contains("\nrun-virtual-64-frames-idle-xruns fail 17 xruns\n"), "{t}");
        assert!(t.contains("\nrtl-virtual-round-trip pass 3340.11 us\n"), "{t}");
        assert!(t.contains("\ncheck-rt-priority pass\n"), "{t}");
        let re = |l: &str| {
            let f: Vec<&str> = l.split(' ').collect();
            let name_ok = f[0]
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
            let result_ok = ["pass", "fail", "skip"].contains(&f[1]);
            let m_ok = f.len() == 2 || (f.len() == 4 && f[2].parse::<f64>().is_ok());
            name_ok && result_ok && m_ok
        };
        for l in t.lines() {
            assert!(re(l), "{l}");
        }
    }

    #[test]
    fn numbers_are_short() {
        assert_eq!(num(17.0), "17");
        assert_eq!(num(3340.1096), "3340.11");
        assert_eq!(num(-0.0001), "0");
    }
}
