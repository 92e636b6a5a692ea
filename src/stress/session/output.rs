//! What the stressors printed: stress-ng's and the built-in stressors' metrics, and the tail
//! of their output.

use super::{StressMetric, OUTPUT_TAIL};
use std::path::Path;

/// Parse the rows of stress-ng's `--metrics-brief` table:
/// `stress-ng: metrc: [PID] cpu  1562  3.05  1.17  0.05  511.96  1285.19`
/// (older versions say `info:` instead of `metrc:`).
pub fn parse_metrics_brief(text: &str) -> Vec<StressMetric> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.split_once("] ").map(|(_, r)| r) else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        if f.len() < 7 {
            continue;
        }
        let nums: Option<Vec<f64>> = f[1..7].iter().map(|x| x.parse().ok()).collect();
        let Some(n) = nums else { continue };
        if f[0].parse::<f64>().is_ok() {
            continue;
        }
        out.push(StressMetric {
            stressor: f[0].to_string(),
            source: "stress-ng".into(),
            bogo_ops: n[0],
            real_time_s: n[1],
            usr_time_s: Some(n[2]),
            sys_time_s: Some(n[3]),
            bogo_ops_per_s: n[4],
        });
    }
    out
}

/// Parse the built-in stressors' closing line `xrunlab-stressor: KIND ops=N seconds=S`.
pub fn parse_builtin_metrics(text: &str) -> Vec<StressMetric> {
    text.lines()
        .filter_map(|l| l.strip_prefix("xrunlab-stressor: "))
        .filter_map(|rest| {
            let mut it = rest.split_whitespace();
            let kind = it.next()?.to_string();
            let mut ops = None;
            let mut secs = None;
            for kv in it {
                match kv.split_once('=') {
                    Some(("ops", v)) => ops = v.parse::<f64>().ok(),
                    Some(("seconds", v)) => secs = v.parse::<f64>().ok(),
                    _ => {}
                }
            }
            let (ops, secs) = (ops?, secs?);
            Some(StressMetric {
                stressor: kind,
                source: "builtin".into(),
                bogo_ops: ops,
                real_time_s: secs,
                usr_time_s: None,
                sys_time_s: None,
                bogo_ops_per_s: if secs > 0.0 { ops / secs } else { 0.0 },
            })
        })
        .collect()
}

pub(super) fn read_tail(path: &Path) -> String {
    tail_of(&String::from_utf8_lossy(
        &std::fs::read(path).unwrap_or_default(),
    ))
}

pub(super) fn tail_of(text: &str) -> String {
    if text.len() <= OUTPUT_TAIL {
        return text.to_string();
    }
    let mut start = text.len() - OUTPUT_TAIL;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stress_ng_metrics_brief() {
        let text = "\
stress-ng: info:  [19352] setting to a 10 second run per stressor
stress-ng: metrc: [19352] stressor       bogo ops real time  usr time  sys time   bogo ops/s     bogo ops/s
stress-ng: metrc: [19352]                           (secs)    (secs)    (secs)   (real time) (usr+sys time)
stress-ng: metrc: [19352] cpu                1562      3.05      1.17      0.05       511.96        1285.19
stress-ng: metrc: [19352] udp              167598      3.06      0.08      1.73     54842.34       92566.22
stress-ng: info:  [19352] successful run completed in 3.06s
";
        let m = parse_metrics_brief(text);
        assert_eq!(m.len(), 2, "{m:?}");
        assert_eq!(m[0].stressor, "cpu");
        assert_eq!(m[0].bogo_ops, 1562.0);
        assert_eq!(m[1].real_time_s, 3.06);
        assert_eq!(m[1].bogo_ops_per_s, 54842.34);
        assert_eq!(m[1].sys_time_s, Some(1.73));
    }

    #[test]
    fn parses_builtin_metrics() {
        let m = parse_builtin_metrics("noise\nxrunlab-stressor: cpu ops=200 seconds=2.0\n");
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].bogo_ops_per_s, 100.0);
    }
}
