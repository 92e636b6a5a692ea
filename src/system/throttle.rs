//! The Raspberry Pi firmware's throttled word, read by `check` once and by `watch` all along,
//! so an xrun can be set against the SoC slowing itself down while it happened.
//!
//! Sources: Raspberry Pi documentation, "Raspberry Pi OS" → `vcgencmd get_throttled` (bits
//! 0–3 say under-voltage, ARM frequency capped, throttled and soft temperature limit *now*;
//! bits 16–19 the same *since boot*); raspberrypi/linux `drivers/firmware/raspberrypi.c`
//! prints the word in sysfs as bare hex (`"%x\n"`).

use super::Root;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The firmware driver's sysfs node (Raspberry Pi kernels).
pub const PATH: &str = "/sys/devices/platform/soc/soc:firmware/get_throttled";

/// Bit meanings of the throttled word (the "since boot" ones are these shifted by 16).
pub const BITS: [&str; 4] = [
    "under-voltage",
    "ARM frequency capped",
    "throttled",
    "soft temperature limit",
];

/// `50005` (sysfs) or `throttled=0x50005` (vcgencmd).
pub fn parse(t: &str) -> Option<u32> {
    let t = t.trim();
    let t = t.strip_prefix("throttled=").unwrap_or(t);
    let t = t.strip_prefix("0x").unwrap_or(t);
    u32::from_str_radix(t, 16).ok()
}

/// The names of the bits set in `word`: `shift` 0 for "now", 16 for "since boot".
pub fn names(word: u32, shift: u32) -> Vec<&'static str> {
    (0..4)
        .filter(|b| word & (1 << (b + shift)) != 0)
        .map(|b| BITS[b as usize])
        .collect()
}

/// The word from sysfs under `root`; None where the node is absent (not a Pi, or a kernel
/// without the firmware driver).
pub fn read(root: &Root) -> Option<u32> {
    root.read(PATH).and_then(|t| parse(&t))
}

/// The word changed: to `word`, at some time between `since_ns` (the last sample that
/// still read the old word) and `at_ns` (the first that read this one), ns after the watch
/// started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ThrottleChange {
    pub since_ns: u64,
    pub at_ns: u64,
    pub word: u32,
}

/// The throttled word over a watch: the first reading and every change, so that a record
/// of hours stays a few lines long.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ThrottleRecord {
    /// The word when the watch started.
    pub first: u32,
    /// The word when it ended.
    pub last: u32,
    pub changes: Vec<ThrottleChange>,
    /// When the word was last read (ns after the start): a change is dated between two
    /// readings, so the last one bounds what the record can say.
    #[serde(skip)]
    last_read_ns: u64,
}

/// At most this many changes are kept: the flags of a failing supply can flap for hours,
/// and the record is for the xruns, not a power log.
pub const MAX_CHANGES: usize = 4096;

impl ThrottleRecord {
    /// Reads the word once; None where there is none to watch.
    pub fn start(root: &Root) -> Option<ThrottleRecord> {
        read(root).map(|w| ThrottleRecord {
            first: w,
            last: w,
            changes: Vec::new(),
            last_read_ns: 0,
        })
    }

    /// One reading `at_ns` after the start.
    pub fn sample(&mut self, at_ns: u64, word: u32) {
        if word != self.last && self.changes.len() < MAX_CHANGES {
            self.changes.push(ThrottleChange {
                since_ns: self.last_read_ns,
                at_ns,
                word,
            });
        }
        self.last = word;
        self.last_read_ns = at_ns;
    }

    /// Reads the word from `root` now.
    pub fn read_now(&mut self, root: &Root, at_ns: u64) {
        if let Some(w) = read(root) {
            self.sample(at_ns, w);
        }
    }

    /// What the SoC was doing around an event at `at_ns`: the "now" flags of the word in
    /// force then, and of a change dated around it, with the "since boot" flags that came
    /// on across such a change (a throttle that began and ended between two readings
    /// leaves only those). Empty when nothing shows.
    pub fn during(&self, at_ns: u64) -> Vec<&'static str> {
        let mut word = self.first;
        let mut found: Vec<&'static str> = Vec::new();
        let mut add = |v: Vec<&'static str>| {
            for n in v {
                if !found.contains(&n) {
                    found.push(n);
                }
            }
        };
        for c in &self.changes {
            if c.since_ns <= at_ns && at_ns <= c.at_ns {
                // The change came somewhere in a window holding the event.
                add(Self::flags_across(word, c.word));
            }
            if c.at_ns > at_ns {
                break;
            }
            word = c.word;
        }
        add(names(word, 0));
        found.sort_by_key(|n| BITS.iter().position(|b| b == n));
        found
    }

    /// The flags a change from `from` to `to` shows: `to`'s "now" flags and the "since
    /// boot" flags it gained.
    fn flags_across(from: u32, to: u32) -> Vec<&'static str> {
        let mut v = names(to, 0);
        v.extend(names(to & !from, 16));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_from_sysfs_and_vcgencmd() {
        assert_eq!(parse("50005\n"), Some(0x50005));
        assert_eq!(parse("throttled=0x0"), Some(0));
        assert_eq!(parse("nonsense"), None);
        assert_eq!(names(0x50005, 0), ["under-voltage", "throttled"]);
        assert_eq!(names(0x50005, 16), ["under-voltage", "throttled"]);
    }

    fn record(samples: &[(u64, u32)]) -> ThrottleRecord {
        let mut r = ThrottleRecord {
            first: samples[0].1,
            last: samples[0].1,
            changes: Vec::new(),
            last_read_ns: samples[0].0,
        };
        for &(t, w) in &samples[1..] {
            r.sample(t, w);
        }
        r
    }

    const S: u64 = 1_000_000_000;

    #[test]
    fn an_xrun_while_the_flags_are_on_is_named_and_one_before_is_not() {
        // Readings every second; under-voltage now from the 5th second to the 8th.
        let r = record(&[
            (0, 0),
            (S, 0),
            (2 * S, 0),
            (3 * S, 0),
            (4 * S, 0),
            (5 * S, 0x10001),
            (6 * S, 0x10001),
            (7 * S, 0x10001),
            (8 * S, 0x10000),
            (9 * S, 0x10000),
        ]);
        assert_eq!(r.changes.len(), 2, "{r:?}");
        assert_eq!((r.first, r.last), (0, 0x10000));
        assert!(r.during(2 * S).is_empty());
        // Between the 4th and 5th readings the change came: it may have caused the xrun.
        assert_eq!(r.during(4 * S + S / 2), ["under-voltage"]);
        assert_eq!(r.during(6 * S), ["under-voltage"]);
        // Off again after the 8th: the sticky bits alone say nothing new.
        assert!(r.during(8 * S + S / 2).is_empty());
    }

    #[test]
    fn a_throttle_between_two_readings_shows_by_its_since_boot_bits() {
        // Throttled on and off between the readings at 2 s and 3 s: only bit 18 stays.
        let r = record(&[
            (0, 0),
            (S, 0),
            (2 * S, 0),
            (3 * S, 0x40000),
            (4 * S, 0x40000),
        ]);
        assert_eq!(r.during(2 * S + S / 3), ["throttled"]);
        assert!(r.during(S).is_empty());
        assert!(r.during(3 * S + S / 2).is_empty());
    }

    #[test]
    fn a_board_already_throttled_at_the_start_names_every_xrun() {
        let r = record(&[(0, 0x50005), (S, 0x50005), (2 * S, 0x50005)]);
        assert!(r.changes.is_empty());
        assert_eq!(r.during(S / 2), ["under-voltage", "throttled"]);
    }

    #[test]
    fn the_record_reads_a_fixture_tree() {
        let dir = tempfile::tempdir().unwrap();
        let node = dir.path().join(PATH.trim_start_matches('/'));
        std::fs::create_dir_all(node.parent().unwrap()).unwrap();
        std::fs::write(&node, "0\n").unwrap();
        let root = Root::new(dir.path());
        let mut r = ThrottleRecord::start(&root).unwrap();
        std::fs::write(&node, "50005\n").unwrap();
        r.read_now(&root, S);
        assert_eq!(r.last, 0x50005);
        assert_eq!(r.during(S / 2), ["under-voltage", "throttled"]);
        assert!(ThrottleRecord::start(&Root::new(dir.path().join("none"))).is_none());
    }
}
