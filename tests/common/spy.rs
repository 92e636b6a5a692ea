//! A progress display for tests: it records the messages it is given, and says it shows or
//! not, so a test can prove a live line is built only for a display.

use std::sync::{Arc, Mutex};

pub struct Spy {
    pub shows: bool,
    pub messages: Arc<Mutex<Vec<String>>>,
}

impl Spy {
    /// A display that shows (or not), and the handle its messages can be read through after
    /// it has been handed away.
    pub fn new(shows: bool) -> (Spy, Arc<Mutex<Vec<String>>>) {
        let messages = Arc::new(Mutex::new(Vec::new()));
        (
            Spy {
                shows,
                messages: messages.clone(),
            },
            messages,
        )
    }
}

impl xrunlab::progress::Progress for Spy {
    fn set_total(&self, _: u64) {}
    fn set_position(&self, _: u64) {}
    fn set_message(&self, m: &str) {
        self.messages.lock().unwrap().push(m.to_string());
    }
    fn finish(&self) {}
    fn shows(&self) -> bool {
        self.shows
    }
}
