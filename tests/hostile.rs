//! What a hostile (or merely unlucky) user types: mistakes are refused with exit 2 before
//! anything is measured, an input is never overwritten by an output, and a late write failure
//! does not lose the result that was printed (docs/ARCHITECTURE.md §1).

mod common;
use common::xrunlab;
use std::time::{Duration, Instant};

/// Run xrunlab with `args`; return (exit code, stderr, wall time).
fn run(args: &[&str]) -> (i32, String, Duration) {
    let t0 = Instant::now();
    let out = xrunlab()
        .args(args)
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        t0.elapsed(),
    )
}

/// Exit 2 within `bound`, with `needle` in the message.
fn refused_fast(args: &[&str], needle: &str, bound: Duration) {
    let (rc, err, took) = run(args);
    assert_eq!(rc, 2, "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: '{needle}' not in: {err}");
    assert!(took < bound, "{args:?} took {took:?}");
}

// --- unbounded ranges -------------------------------------------------------------------

#[test]
fn rtl_model_buffers_range_is_bounded() {
    refused_fast(
        &["rtl", "--model", "--buffers", "1..2147483648"],
        "--buffers",
        Duration::from_secs(5),
    );
}

#[test]
fn load_buffers_range_is_bounded() {
    refused_fast(
        &["load", "--driver", "sim", "--buffers", "16..4294967295"],
        "--buffers",
        Duration::from_secs(5),
    );
}

#[test]
fn load_tracks_range_is_bounded() {
    refused_fast(
        &["load", "--driver", "sim", "--tracks", "1..4294967295"],
        "--tracks",
        Duration::from_secs(5),
    );
}

#[test]
fn cpu_range_is_bounded() {
    refused_fast(
        &["latency", "--duration", "5s", "--cpus", "0-4294967295"],
        "CPU",
        Duration::from_secs(5),
    );
}
