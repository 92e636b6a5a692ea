//! The CLI's side of `Progress::say`: the lines a measurement must tell the user at once.

use crate::progress::Progress;

/// A progress (bar or silence) that also says its lines on stderr, --quiet or not: they are
/// what the user acts on ("ready for 20 triggers"), not decoration.
pub struct Saying(pub Box<dyn Progress>);

impl Progress for Saying {
    fn set_total(&self, total: u64) {
        self.0.set_total(total)
    }
    fn set_position(&self, done: u64) {
        self.0.set_position(done)
    }
    fn set_message(&self, msg: &str) {
        self.0.set_message(msg)
    }
    fn finish(&self) {
        self.0.finish()
    }
    fn say(&self, line: &str) {
        eprintln!("{line}");
    }
}
