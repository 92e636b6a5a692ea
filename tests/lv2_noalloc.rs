//! docs/ARCHITECTURE.md §5 with third-party code in the cycle: real LV2 plugins from Debian
//! packages neither allocate nor lock while cycles run. Two counters watch at once: the
//! counting global allocator (Rust's heap, as in engine_noalloc.rs) and an interposer of
//! `malloc`/`free`/…/`pthread_mutex_lock` (tests/common/interpose.rs), which sees what the
//! plugins' C and C++ code does. The interposer must first count known C-side operations
//! (positive controls), so a broken one fails the test instead of reporting zero.
//! One test function only: counting is on every thread.

mod common;
#[path = "common/interpose.rs"]
mod interpose;

#[path = "common/plugin_noalloc.rs"]
mod plugin_noalloc;

use common::counting::Counting;
use interpose::Counts;
use plugin_noalloc::{both, cycle, positive_controls, run_blocks, Noise};
use xrunlab::dsp::PluginContext;
use xrunlab::engine::{Engine, EngineSpec};

#[global_allocator]
static GLOBAL: Counting = Counting;

/// (URI, parameters, what it stands for): one plain C plugin with no required feature, one
/// DPF (C++) plugin needing options + urid:map, one needing the worker as well.
const PLUGINS: [(&str, &str, &str); 3] = [
    ("http://plugin.org.uk/swh-plugins/amp", "gain=-6", "swh-lv2"),
    ("urn:zamaudio:ZamComp", "", "zam-plugins"),
    ("urn:dragonfly:room", "", "dragonfly-reverb-lv2"),
];

const RATE: u32 = 48000;
const FRAMES: usize = 64;
/// Blocks run before counting: plugins may set up lazily on their first runs.
const WARM: u64 = 300;
const COUNTED: u64 = 500;

/// As [`both`], for the cycles that must count nothing (`XRUNLAB_INTERPOSE_TRAP=1` under gdb
/// stops at the first operation found there).
/// URID map/unmap calls take the URID table's lock (a futex: neither counter sees it), so
/// they are counted by the host itself and must not happen here either.
fn both_cycles<R>(f: impl FnOnce() -> R) -> (R, usize, Counts) {
    let maps = xrunlab::dsp::lv2::features::map_calls();
    let r = plugin_noalloc::both_cycles(f);
    let maps = xrunlab::dsp::lv2::features::map_calls() - maps;
    assert_eq!(
        maps, 0,
        "{maps} URID map/unmap calls in the cycle path (each takes the URID table's lock)"
    );
    r
}

#[test]
fn lv2_plugins_neither_allocate_nor_lock_in_the_cycle() {
    let missing: Vec<String> = PLUGINS
        .iter()
        .filter(|(uri, ..)| xrunlab::dsp::lv2::describe(uri).is_err())
        .map(|(uri, _, pkg)| format!("{uri} (Debian package {pkg})"))
        .collect();
    if !common::require(
        missing.is_empty(),
        &format!(
            "LV2 plugins not installed: {} — scripts/install-deps installs them",
            missing.join(", ")
        ),
    ) {
        return;
    }
    positive_controls();

    let ctx = PluginContext {
        rate: RATE,
        max_frames: FRAMES,
    };
    let mut noise = Noise(0x1234_5678);
    let (mut l, mut r) = (vec![0f32; FRAMES], vec![0f32; FRAMES]);
    let mut failures = Vec::new();

    // Each plugin alone, so a finding names its plugin.
    for (uri, params, _) in PLUGINS {
        let (p, rust, made) = both(|| xrunlab::dsp::lv2::create(uri, params, &ctx));
        let mut p = p.unwrap_or_else(|e| panic!("{uri}: {e}"));
        // Instantiation may allocate; that it is seen is one more proof of the interposer.
        assert!(
            made.rt.heap() > rust,
            "{uri}: instantiation showed no C-side allocation ({} Rust, {made:?})",
            rust
        );
        let ((), _, warm) = both(|| run_blocks(&mut p, &mut noise, &mut l, &mut r, WARM));
        let ((), rust, c) = both_cycles(|| run_blocks(&mut p, &mut noise, &mut l, &mut r, COUNTED));
        eprintln!(
            "{uri}: instantiation {made:?}; first {WARM} blocks {warm:?}; next {COUNTED} blocks: {rust} Rust heap ops, {c:?}"
        );
        assert!(
            l.iter().chain(&r).all(|s| s.is_finite()),
            "{uri}: output is not finite"
        );
        if rust != 0 || c.rt.total() != 0 {
            failures.push(format!(
                "{uri} alone, {COUNTED} blocks: {rust} Rust heap operations, C side {:?}",
                c.rt
            ));
        }
    }

    // The three in series in an engine: 2 tracks on 2 threads, cycles through process_cycle
    // as a driver runs them.
    let chain: Vec<String> = PLUGINS
        .iter()
        .map(|(uri, params, _)| {
            if params.is_empty() {
                format!("lv2:{uri}")
            } else {
                format!("lv2:{uri}({params})")
            }
        })
        .collect();
    let spec = EngineSpec {
        threads: 2,
        ..EngineSpec::new(
            RATE,
            FRAMES,
            2,
            xrunlab::dsp::parse_chain(&chain.join(",")).unwrap(),
        )
    };
    let (mut engine, _consumer) = Engine::new(&spec).unwrap();
    let mut bufs = [
        vec![0f32; FRAMES],
        vec![0f32; FRAMES],
        vec![0f32; FRAMES],
        vec![0f32; FRAMES],
    ];
    let ((), _, warm) = both(|| {
        for k in 0..WARM {
            cycle(&mut engine, k, &mut noise, &mut bufs);
        }
    });
    let (peak, rust, c) = both_cycles(|| {
        let mut peak = 0f32;
        for k in WARM..WARM + COUNTED {
            assert_eq!(cycle(&mut engine, k, &mut noise, &mut bufs), 2);
            for s in bufs[2].iter().chain(&bufs[3]) {
                peak = peak.max(s.abs());
            }
        }
        peak
    });
    eprintln!(
        "engine ({}): first {WARM} cycles {warm:?}; next {COUNTED} cycles: {rust} Rust heap ops, {c:?}",
        chain.join(",")
    );
    assert!(
        peak.is_finite() && peak > 1e-4,
        "the chain's output should carry the noise through (peak {peak})"
    );
    if rust != 0 || c.rt.total() != 0 {
        failures.push(format!(
            "engine, {COUNTED} cycles: {rust} Rust heap operations, C side {:?}",
            c.rt
        ));
    }
    assert!(
        failures.is_empty(),
        "allocation or locking in the cycle path:\n{}",
        failures.join("\n")
    );
}
