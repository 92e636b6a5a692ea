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
    fn finish(&self);
    /// A line the user must read now, bar or not ("ready for 20 triggers"): the library
    /// prints nothing, so only a front end that shows lines says it (the CLI on stderr).
    fn say(&self, _line: &str) {}
    /// Whether anything is shown: a live line is only worth formatting for a display.
    fn shows(&self) -> bool {
        true
    }
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
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            // The live figures (`msg`) take what is left of the terminal's width, so the
            // line never wraps and `finish_and_clear` leaves nothing behind.
            "{spinner} [{bar:16}] {pos}/{len} {elapsed} ETA {eta} {wide_msg}",
        )
        .expect("static template")
        .progress_chars("=> "),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(250));
    Box::new(Bar(bar))
}
