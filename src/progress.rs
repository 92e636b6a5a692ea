//! Progress for long runs: an indicatif bar with ETA on a terminal, nothing in pipes, under
//! CI (`CI` set) or with --quiet. Measurements take `&dyn Progress` so they stay UI-free.

use std::io::IsTerminal;

pub trait Progress: Send + Sync {
    /// Total units of work (e.g. seconds or grid cells) are now `total`.
    fn set_total(&self, total: u64);
    /// `done` units are finished.
    fn set_position(&self, done: u64);
    /// A short phase description ("latency idle", "cell 64/2/heavy").
    fn set_message(&self, msg: &str);
    /// What one unit of `set_total`/`set_position` is, for the count beside the bar.
    fn set_unit(&self, _unit: Unit) {}
    fn finish(&self);
    /// A line the user must read now, bar or not ("ready for 20 triggers"): the library
    /// prints nothing, so only a front end that shows lines says it (the CLI on stderr).
    fn say(&self, _line: &str) {}
    /// Whether anything is shown: a live line is only worth formatting for a display.
    fn shows(&self) -> bool {
        true
    }
}

/// What a progress count counts: a bare count means nothing to the reader.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Unit {
    /// Whole seconds of measurement.
    Seconds,
    /// Audio periods of `period_ns`, shown as the seconds of device time they make.
    Periods { period_ns: u64 },
    /// Items of some kind ("cells", "trials", "plugins").
    Items(&'static str),
}

/// The count beside the bar: "12.0/30.0 s", "3/12 cells". At most 16 columns up to a day
/// of seconds or 999 items, so that bar, count and ETA leave 40 columns of an 80-column line
/// to the live figures (beyond, indicatif shortens the figures, never wraps).
pub fn count(pos: u64, len: u64, unit: Unit) -> String {
    const CAP: u64 = 9_999_999;
    match unit {
        Unit::Seconds => format!("{}/{} s", pos.min(CAP), len.min(CAP)),
        Unit::Periods { period_ns } => {
            let s = |n: u64| (n as f64 * period_ns as f64 / 1e9).min(CAP as f64);
            // Tenths while they say something; whole seconds beyond a quarter hour.
            if s(len) < 900.0 {
                format!("{:.1}/{:.1} s", s(pos), s(len))
            } else {
                format!("{:.0}/{:.0} s", s(pos), s(len))
            }
        }
        Unit::Items(name) => format!("{}/{} {name}", pos.min(CAP), len.min(CAP)),
    }
}

/// The bar's template: no `{elapsed}` (the count says how far, the ETA how long still).
const TEMPLATE: &str = "{spinner} [{bar:10}] {count} ETA {eta} {wide_msg}";

fn style(unit: Unit) -> indicatif::ProgressStyle {
    indicatif::ProgressStyle::with_template(
        // The live figures (`msg`) take what is left of the terminal's width, so the
        // line never wraps and `finish_and_clear` leaves nothing behind.
        TEMPLATE,
    )
    .expect("static template")
    .with_key(
        "count",
        move |st: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
            let _ = w.write_str(&count(st.pos(), st.len().unwrap_or(0), unit));
        },
    )
    .progress_chars("=> ")
}

/// Reports nothing.
pub struct Silent;

impl Progress for Silent {
    fn set_total(&self, _: u64) {}
    fn set_position(&self, _: u64) {}
    fn set_message(&self, _: &str) {}
    fn finish(&self) {}
    fn shows(&self) -> bool {
        false
    }
}

pub struct Bar(indicatif::ProgressBar);

impl Progress for Bar {
    fn set_total(&self, total: u64) {
        self.0.set_length(total);
    }
    fn set_position(&self, done: u64) {
        self.0.set_position(done);
    }
    fn set_message(&self, msg: &str) {
        self.0.set_message(msg.to_string());
    }
    fn set_unit(&self, unit: Unit) {
        self.0.set_style(style(unit));
    }
    fn finish(&self) {
        self.0.finish_and_clear();
    }
}

impl Drop for Bar {
    /// A run that ends in an error or a Ctrl-C may never reach `finish`: the bar still goes,
    /// so no stale line stays above what is printed next.
    fn drop(&mut self) {
        if !self.0.is_finished() {
            self.0.finish_and_clear();
        }
    }
}

/// True when a progress bar should be shown: stderr is a terminal and not under CI.
pub fn wanted(quiet: bool) -> bool {
    !quiet && std::io::stderr().is_terminal() && std::env::var_os("CI").is_none()
}

/// A bar on stderr when `wanted`, otherwise silence.
pub fn for_terminal(quiet: bool, total: u64) -> Box<dyn Progress> {
    if !wanted(quiet) {
        return Box::new(Silent);
    }
    let bar = indicatif::ProgressBar::new(total);
    bar.set_style(style(Unit::Items("")));
    bar.enable_steady_tick(std::time::Duration::from_millis(250));
    Box::new(Bar(bar))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_names_its_unit_and_fits_beside_the_live_figures() {
        assert_eq!(count(12, 30, Unit::Seconds), "12/30 s");
        let p = Unit::Periods {
            period_ns: 5_333_333,
        };
        // 30 s of 256-frame periods at 48 kHz.
        assert_eq!(count(2250, 5625, p), "12.0/30.0 s");
        assert_eq!(count(0, 1_125_000, p), "0/6000 s");
        assert_eq!(count(3, 12, Unit::Items("cells")), "3/12 cells");
        // Absurd figures stay bounded.
        assert_eq!(count(u64::MAX, u64::MAX, p), "9999999/9999999 s");
        assert_eq!(
            count(u64::MAX, u64::MAX, Unit::Seconds),
            "9999999/9999999 s"
        );
        // The widest count of a day-long measurement or 999 items, with the bar, the widest
        // ETA indicatif writes ("59m", "23h", "59s": 3 columns) and the 40 columns the live
        // figures take (measure::run::live), is one 80-column line.
        let day = Unit::Periods { period_ns: 666_667 };
        let widest = [
            count(86_399, 86_400, Unit::Seconds),
            count(129_599_000, 129_600_000, day),
            count(998, 999, Unit::Items("elements")),
            count(998, 999, Unit::Items("plugins")),
        ]
        .into_iter()
        .map(|c| c.chars().count())
        .max()
        .unwrap();
        assert!(widest <= 16, "{widest}");
        let fixed = TEMPLATE
            .replace("{spinner}", "x")
            .replace("{bar:10}", &"=".repeat(10))
            .replace("{count}", &"9".repeat(widest))
            .replace("{eta}", "59m")
            .replace("{wide_msg}", "");
        assert!(fixed.chars().count() + 40 <= 80, "{fixed}");
    }

    #[test]
    fn a_unit_set_on_a_bar_keeps_its_template() {
        // A hidden bar formats nothing, but the style must build from the template.
        let b = Bar(indicatif::ProgressBar::hidden());
        b.set_unit(Unit::Items("cells"));
        b.set_total(4);
        b.set_position(1);
        b.finish();
    }
}
