//! docs/ARCHITECTURE.md §5 with third-party code in the cycle: real plugins of every format
//! from Debian packages neither allocate nor lock while cycles run, and neither does the
//! host side (LV2: the features and the worker; CLAP: the process struct, the event lists,
//! the callbacks the plugins make from their audio thread; VST3: the process data, the
//! parameter changes and event lists, the component handler). Two counters watch at once:
//! the counting global allocator (Rust's heap, as in engine_noalloc.rs) and an interposer of
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

/// (chain element, parameters, Debian package), one row per plugin and format: a plain C
/// LV2 plugin with no required feature, DPF (C++) plugins needing options + urid:map, one
/// needing the LV2 worker as well; in CLAP and VST3 a 1→1 EQ with parameters sent in the
/// priming block (CLAP events, VST3 parameter changes) and a compressor whose sidechain
/// input needs buffers of its own.
const PLUGINS: [(&str, &str, &str); 7] = [
    (
        "lv2:http://plugin.org.uk/swh-plugins/amp",
        "gain=-6",
        "swh-lv2",
    ),
    ("lv2:urn:zamaudio:ZamComp", "", "zam-plugins"),
    ("lv2:urn:dragonfly:room", "", "dragonfly-reverb-lv2"),
    ("clap:com.zamaudio.ZamEQ2", "boost_cut_1=6", "zam-plugins"),
    ("clap:com.zamaudio.ZamComp", "threshold=-30", "zam-plugins"),
    ("vst3:ZamEQ2", "boost_cut_1=6", "zam-plugins"),
    ("vst3:ZamComp", "threshold=-30", "zam-plugins"),
];

const RATE: u32 = 48000;
const FRAMES: usize = 64;
/// Blocks run before counting: plugins may set up lazily on their first runs.
const WARM: u64 = 300;
const COUNTED: u64 = 500;

/// As [`plugin_noalloc::both_cycles`], and no LV2 URID map/unmap call either: those take
/// the URID table's lock (a futex: neither counter sees it), so the host counts them itself.
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
fn plugins_of_every_format_neither_allocate_nor_lock_in_the_cycle() {
    let missing: Vec<String> = PLUGINS
        .iter()
        .filter(|(id, ..)| xrunlab::dsp::registry::describe(id).is_err())
        .map(|(id, _, pkg)| format!("{id} (Debian package {pkg})"))
        .collect();
    if !common::require(
        missing.is_empty(),
        &format!(
            "plugins not installed: {} — scripts/install-deps installs them",
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
    for (id, params, _) in PLUGINS {
        let (p, rust, made) = both(|| xrunlab::dsp::registry::create(id, params, &ctx));
        let mut p = p.unwrap_or_else(|e| panic!("{id}: {e}"));
        // Instantiation may allocate; that it is seen is one more proof of the interposer.
        assert!(
            made.rt.heap() > rust,
            "{id}: instantiation showed no C-side allocation ({rust} Rust, {made:?})"
        );
        let ((), _, warm) = both(|| run_blocks(p.as_mut(), &mut noise, &mut l, &mut r, WARM));
        let ((), rust, c) =
            both_cycles(|| run_blocks(p.as_mut(), &mut noise, &mut l, &mut r, COUNTED));
        eprintln!(
            "{id}: instantiation {made:?}; first {WARM} blocks {warm:?}; next {COUNTED} blocks: {rust} Rust heap ops, {c:?}"
        );
        assert!(
            l.iter().chain(&r).all(|s| s.is_finite()),
            "{id}: output is not finite"
        );
        if rust != 0 || c.rt.total() != 0 {
            failures.push(format!(
                "{id} alone, {COUNTED} blocks: {rust} Rust heap operations, C side {:?}",
                c.rt
            ));
        }
    }

    // All in series in an engine: 2 tracks on 2 threads, cycles through process_cycle as a
    // driver runs them.
    let chain: Vec<String> = PLUGINS
        .iter()
        .map(|(id, params, _)| {
            if params.is_empty() {
                id.to_string()
            } else {
                format!("{id}({params})")
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
    let (mut engine, _consumer): (Engine, _) = Engine::new(&spec).unwrap();
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
