//! Figures as people read them: rates per hour and measurement lengths, shared by every
//! presentation (text, HTML, JUnit) and by the verdict's own sentences.

/// A rate per hour with 2–3 significant digits.
pub fn per_hour(x: f64) -> String {
    if x == 0.0 {
        "0".into()
    } else if x >= 1e4 {
        format!("{x:.1e}")
    } else if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else if x >= 0.01 {
        format!("{x:.2}")
    } else {
        format!("{x:.1e}")
    }
}

/// `rate [low, high]`, or `< high` when the data only bounds it.
pub fn rate_cell(r: &crate::measure::predict::Rate) -> String {
    if r.upper_bound && r.low > 0.0 {
        // Too few samples for a rate, enough to place it above the lower end.
        format!("< {} (≥ {})", per_hour(r.high), per_hour(r.low))
    } else if r.upper_bound {
        format!("< {}", per_hour(r.high))
    } else {
        format!(
            "{} [{}, {}]",
            per_hour(r.per_hour),
            per_hour(r.low),
            per_hour(r.high)
        )
    }
}

/// A measurement length a person would type: seconds, minutes, hours or days.
/// A time still to spend ("measure 102 s"), rounded up: rounding a requirement down would
/// ask for too little.
pub fn span_at_least(ns: u64) -> String {
    let s = ns as f64 / 1e9;
    if s < 120.0 {
        format!("{:.0} s", s.ceil())
    } else if s < 7_200.0 {
        format!("{:.0} min", (s / 60.0).ceil())
    } else {
        span(ns)
    }
}

/// A time spent ("watched 10 min"), to the nearest unit.
pub fn span(ns: u64) -> String {
    let s = ns as f64 / 1e9;
    // Nearest, not up: a 10-minute watch ends a few ms past 600 s and must read "10 min";
    // under a second still reads "1 s", never "0 s".
    if s < 119.5 {
        format!("{:.0} s", s.round().max(1.0))
    } else if s < 7_200.0 {
        format!("{:.0} min", (s / 60.0).round())
    } else if s < 172_800.0 {
        format!("{:.1} h", s / 3_600.0)
    } else {
        format!("{:.1} days", s / 86_400.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_keep_two_or_three_digits() {
        let cases = [
            (0.0, "0"),
            (0.004, "4.0e-3"),
            (0.5, "0.50"),
            (12.34, "12.3"),
            (345.6, "346"),
            (12345.0, "1.2e4"),
        ];
        for (x, s) in cases {
            assert_eq!(per_hour(x), s, "{x}");
        }
    }

    #[test]
    fn lengths_are_said_as_a_person_types_them() {
        assert_eq!(span(1_500_000_000), "2 s");
        assert_eq!(span(600_000_000_000), "10 min");
        // A 10-minute watch that ended 52 ms late (it read "11 min").
        assert_eq!(span(600_052_194_827), "10 min");
        assert_eq!(span(300_000_000), "1 s");
        assert_eq!(span_at_least(101_200_000_000), "102 s");
        assert_eq!(span_at_least(600_052_194_827), "11 min");
        assert_eq!(span(3 * 3_600_000_000_000), "3.0 h");
        assert_eq!(span(3 * 86_400_000_000_000), "3.0 days");
    }
}
