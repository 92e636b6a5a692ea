//! Signalling a spawned xrunlab: wait for its handlers, then for its end within a bound.

use std::time::{Duration, Instant};

/// Poll `ok` every 20 ms; false after `limit`.
pub fn wait_until(limit: Duration, mut ok: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    while t.elapsed() < limit {
        if ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    ok()
}

/// Wait until `pid` catches `sig` (its handlers are installed, /proc/PID/status SigCgt): a
/// signal sent before that would find the default action.
pub fn await_handler(pid: u32, sig: i32) {
    let caught = || {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|t| {
                let hex = t
                    .lines()
                    .find_map(|l| l.strip_prefix("SigCgt:"))?
                    .trim()
                    .to_string();
                u64::from_str_radix(&hex, 16).ok()
            })
            .is_some_and(|mask| mask & (1 << (sig - 1)) != 0)
    };
    assert!(
        wait_until(Duration::from_secs(20), caught),
        "no handler for signal {sig}"
    );
}

/// The child's exit status and stderr, failing the test (after killing it) past `limit`.
pub fn finish_within(
    mut child: std::process::Child,
    limit: Duration,
) -> (std::process::ExitStatus, String) {
    use std::io::Read;
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    let _ = child.stderr.take().unwrap().read_to_string(&mut err);
    (status, err)
}
