//! Parsing of the values users type: durations, percentages, `FRAMES@RATE`, lists and ranges.
//! Every parser returns a usage error (exit 2) naming the value and the expected form.

use crate::error::{Error, Result};

/// The longest duration any option or recorded command line may say (half of u64 ns, 292
/// years: far beyond any run, and room to add a few without overflowing).
pub const MAX_DURATION_NS: u64 = u64::MAX / 2;

/// A duration such as `200us`, `1.5ms`, `30s`, `10m`, `5h`, `250ns`. A bare number is
/// rejected: the unit must be explicit, because a wrong guess is a silent 1000× error.
pub fn parse_duration_ns(s: &str) -> Result<u64> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let bad = || {
        Error::usage(format!(
            "bad duration '{s}': expected a number with a unit, e.g. 200us, 2ms, 30s, 10m, 5h"
        ))
    };
    if num.is_empty() {
        return Err(bad());
    }
    let value: f64 = num.parse().map_err(|_| bad())?;
    let scale = match unit.trim() {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" | "sec" => 1e9,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        _ => return Err(bad()),
    };
    let ns = value * scale;
    if !ns.is_finite() || ns > MAX_DURATION_NS as f64 {
        return Err(Error::usage(format!(
            "duration '{s}' is longer than the maximum, {}h (about 292 years)",
            MAX_DURATION_NS / 3_600_000_000_000
        )));
    }
    Ok(ns.round() as u64)
}

/// A duration as [`parse_duration_ns`], or a bare whole number of microseconds: the options
/// that mirror one of cyclictest's µs options (`-i`, `-h`) read its command lines unchanged.
pub fn parse_duration_or_us(s: &str) -> Result<u64> {
    match s.trim().parse::<u64>() {
        Ok(us) => us
            .checked_mul(1_000)
            .filter(|&ns| ns <= MAX_DURATION_NS)
            .ok_or_else(|| Error::usage(format!("duration '{s}' µs is longer than any run"))),
        Err(_) => parse_duration_ns(s),
    }
}

/// Print nanoseconds with a unit that keeps 3–4 significant digits.
pub fn format_ns(ns: u64) -> String {
    if ns < 10_000 {
        format!("{ns} ns")
    } else if ns < 10_000_000 {
        format!("{:.1} µs", ns as f64 / 1e3)
    } else if ns < 10_000_000_000 {
        format!("{:.2} ms", ns as f64 / 1e6)
    } else {
        format!("{:.2} s", ns as f64 / 1e9)
    }
}

/// A number that is one (`NaN` and `inf` parse as f64 but mean nothing as a gain or a
/// level): the value parser of every f64 option.
pub fn parse_finite(s: &str) -> Result<f64> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(Error::usage(format!(
            "'{s}' is not a number (expected e.g. -6 or 0.5)"
        ))),
    }
}

/// A percentage such as `80%` or `80` (0..=100, fractions allowed).
pub fn parse_percent(s: &str) -> Result<f64> {
    let t = s.trim().trim_end_matches('%');
    let v: f64 = t
        .parse()
        .map_err(|_| Error::usage(format!("bad percentage '{s}': expected e.g. 80%")))?;
    if !(0.0..=100.0).contains(&v) {
        return Err(Error::usage(format!("percentage '{s}' is outside 0..100")));
    }
    Ok(v)
}

/// A sample rate as people write it: `48000`, `48k`, `44.1k`, `48kHz`, `96000Hz`. Only the
/// form is checked here; the range is [`crate::common::device::check_rate`]'s, so every
/// command keeps one message for a rate it cannot run.
pub fn parse_rate(s: &str) -> Result<u32> {
    let bad = || {
        Error::usage(format!(
            "bad sample rate '{s}': expected Hz or kHz, e.g. 48000, 48k, 44.1k"
        ))
    };
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let t = lower.strip_suffix("hz").unwrap_or(&lower).trim_end();
    let (num, scale) = match t.strip_suffix('k') {
        Some(n) => (n.trim_end(), 1000.0),
        None => (t, 1.0),
    };
    if num.is_empty() || !num.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(bad());
    }
    let hz = num.parse::<f64>().map_err(|_| bad())? * scale;
    // 44.1k is exact; 44.12345k is not a rate anyone runs, and rounding it would hide a typo.
    if !hz.is_finite() || hz.fract() != 0.0 || hz > u32::MAX as f64 {
        return Err(bad());
    }
    Ok(hz as u32)
}

/// An audio period `FRAMES@RATE`, e.g. `64@48000` or `64@48k`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct AudioPeriod {
    pub frames: u32,
    pub rate: u32,
}

impl AudioPeriod {
    /// Frames > 0 at a rate within [`crate::common::device::RATES`]: what the parser accepts
    /// and what a result read back must hold (a rate of 0 divides by zero).
    pub fn is_valid(&self) -> bool {
        self.frames > 0 && crate::common::device::RATES.contains(&self.rate)
    }

    pub fn period_ns(&self) -> u64 {
        crate::common::ns_of_frames(self.frames as u64, self.rate)
    }
}

impl std::str::FromStr for AudioPeriod {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let bad = || {
            Error::usage(format!(
                "bad audio period '{s}': expected FRAMES@RATE, e.g. 64@48000 or 64@48k"
            ))
        };
        let (f, r) = s.split_once('@').ok_or_else(bad)?;
        let frames: u32 = f.trim().parse().map_err(|_| bad())?;
        let rate = parse_rate(r).map_err(|_| bad())?;
        let p = AudioPeriod { frames, rate };
        if !p.is_valid() {
            let r = crate::common::device::RATES;
            return Err(Error::usage(format!(
                "audio period '{s}': frames must be > 0 and the rate within {}..{} Hz",
                r.start(),
                r.end()
            )));
        }
        Ok(p)
    }
}

/// The largest buffer size (frames) any command accepts in a list: far above any real period,
/// and small enough that a mistyped range cannot expand into gigabytes.
pub const MAX_BUFFER_FRAMES: u32 = 65_536;

/// A list of unsigned integers with ranges: `16,32,64`, `1..4`, `1..4,8`, none above `max`.
/// `A..B` is inclusive; a power-of-two range such as `16..512` with `pow2` keeps only
/// powers of two (buffer sizes), otherwise every integer. `option` names the flag in errors.
/// Every bound is checked before a range is expanded, so the list never exceeds `max` + 1
/// values whatever the text (a range up to u32::MAX once expanded into billions).
pub fn parse_uint_list(option: &str, s: &str, pow2_ranges: bool, max: u32) -> Result<Vec<u32>> {
    let mut out = Vec::new();
    let bad = |p: &str| {
        Error::usage(format!(
            "{option}: bad list '{s}' at '{p}': expected numbers and ranges such as 16,32,64 or 1..4"
        ))
    };
    let bounded = |p: &str, text: &str| -> Result<u32> {
        let v: u64 = text.trim().parse().map_err(|_| bad(p))?;
        if v > max as u64 {
            return Err(Error::usage(format!(
                "{option}: {v} in '{s}' is above the maximum {max}"
            )));
        }
        Ok(v as u32)
    };
    if s.trim().is_empty() {
        return Err(Error::usage(format!("{option}: empty list '{s}'")));
    }
    for part in s.split(',').map(str::trim) {
        // `1,,2` or `16,32,` is a slip (a value left out), not a shorter list.
        if part.is_empty() {
            return Err(Error::usage(format!(
                "{option}: empty element in '{s}': a value is missing between commas"
            )));
        }
        if let Some((a, b)) = part.split_once("..") {
            let a = bounded(part, a)?;
            let b = bounded(part, b.trim().trim_start_matches('='))?;
            if a > b {
                return Err(bad(part));
            }
            if pow2_ranges {
                // u64 so that doubling past a large `b` cannot wrap to 0 and loop for ever.
                let mut v = (a.max(1) as u64).next_power_of_two();
                while v <= b as u64 {
                    out.push(v as u32);
                    v *= 2;
                }
            } else {
                out.extend(a..=b);
            }
        } else {
            out.push(bounded(part, part)?);
        }
    }
    if out.is_empty() {
        return Err(Error::usage(format!("{option}: empty list '{s}'")));
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Levenshtein distance between what was typed and a known name, for "did you mean"
/// suggestions (plugin names, `--cost` names).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distances() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("gain", "gain"), 0);
    }

    /// Past the maximum, the message says what the maximum is.
    #[test]
    fn a_duration_too_long_names_the_maximum() {
        let e = parse_duration_ns("99999999999h").unwrap_err();
        assert_eq!(e.exit_code(), crate::error::EXIT_USAGE);
        assert!(e.to_string().contains("the maximum, 2562047h"), "{e}");
        assert!(parse_duration_ns("2562047h").is_ok());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ns("200us").unwrap(), 200_000);
        assert_eq!(parse_duration_ns("1.5ms").unwrap(), 1_500_000);
        assert_eq!(parse_duration_ns("30s").unwrap(), 30_000_000_000);
        assert_eq!(parse_duration_ns("10m").unwrap(), 600_000_000_000);
        assert_eq!(parse_duration_ns("5h").unwrap(), 18_000_000_000_000);
        for bad in ["", "10", "ms", "1.2.3s", "-1s", "10 parsecs"] {
            assert!(parse_duration_ns(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn audio_period() {
        let p: AudioPeriod = "64@48000".parse().unwrap();
        assert_eq!(p.period_ns(), 1_333_333);
        assert!("64".parse::<AudioPeriod>().is_err());
        assert!("0@48000".parse::<AudioPeriod>().is_err());
        assert_eq!("64@48k".parse::<AudioPeriod>().unwrap().rate, 48_000);
        assert_eq!("32@44.1kHz".parse::<AudioPeriod>().unwrap().rate, 44_100);
    }

    #[test]
    fn rates() {
        for (s, hz) in [
            ("48000", 48_000),
            ("48k", 48_000),
            ("44.1k", 44_100),
            ("96kHz", 96_000),
            ("48000Hz", 48_000),
            ("192 k", 192_000),
        ] {
            assert_eq!(parse_rate(s).unwrap(), hz, "{s}");
        }
        for bad in ["", "k", "48m", "-48k", "44.12345k", "1e5", "48kk", "fast"] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn lists() {
        assert_eq!(
            parse_uint_list("--buffers", "16..512", true, MAX_BUFFER_FRAMES).unwrap(),
            vec![16, 32, 64, 128, 256, 512]
        );
        assert_eq!(
            parse_uint_list("--tracks", "1..3,8", false, 64).unwrap(),
            vec![1, 2, 3, 8]
        );
        assert!(parse_uint_list("--tracks", "4..1", false, 64).is_err());
        assert!(parse_uint_list("--tracks", "a", false, 64).is_err());
        for slip in ["1,,2", "16,32,", ",8", " "] {
            let e = parse_uint_list("--tracks", slip, false, 64).unwrap_err();
            assert!(e.to_string().starts_with("--tracks: empty"), "{slip}: {e}");
        }
        assert_eq!(parse_percent("80%").unwrap(), 80.0);
        assert!(parse_percent("120").is_err());
    }

    #[test]
    fn lists_are_bounded_before_expanding() {
        // Each of these once expanded into billions of values or wrapped a u32 to 0.
        for (text, pow2, max) in [
            ("1..2147483648", true, MAX_BUFFER_FRAMES),
            ("16..4294967295", true, MAX_BUFFER_FRAMES),
            ("1..4294967295", false, 64),
            ("65", false, 64),
            ("1..18446744073709551616", false, 64),
        ] {
            let e = parse_uint_list("--x", text, pow2, max).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{text}");
            assert!(e.to_string().contains("--x"), "{e}");
        }
        // The top of the range itself is allowed, and doubling stops there.
        assert_eq!(
            parse_uint_list("--buffers", "32768..65536", true, MAX_BUFFER_FRAMES).unwrap(),
            vec![32768, 65536]
        );
        // No power of two in the range: an empty list, refused.
        assert!(parse_uint_list("--buffers", "40000..65535", true, MAX_BUFFER_FRAMES).is_err());
    }

    proptest::proptest! {
        #[test]
        fn any_list_text_parses_within_bounds_or_errors(
            text in "[0-9.,= ]{0,40}|[0-9]{1,25}\\.\\.[0-9]{1,25}",
            pow2: bool,
            max in 1u32..=70_000,
        ) {
            match parse_uint_list("--x", &text, pow2, max) {
                Ok(v) => {
                    proptest::prop_assert!(!v.is_empty());
                    proptest::prop_assert!(v.len() <= max as usize + 1);
                    proptest::prop_assert!(v.iter().all(|&x| x <= max));
                    proptest::prop_assert!(v.windows(2).all(|w| w[0] < w[1]));
                }
                Err(e) => proptest::prop_assert_eq!(e.exit_code(), 2),
            }
        }
    }
}
