//! docs/ARCHITECTURE.md §5 with CLAP and VST3 plugins in the cycle: zam-plugins' CLAP and
//! VST3 builds (DPF, C++) neither allocate nor lock while cycles run, and neither does the
//! host side (CLAP: the process struct, the event lists, the callbacks the plugins make from
//! their audio thread; VST3: the process data, the parameter changes and event lists, the
//! component handler).
//! Both counters watch, as in tests/lv2_noalloc.rs, after the same positive controls.
//! One test function only: counting is on every thread.

mod common;
#[path = "common/interpose.rs"]
mod interpose;
#[path = "common/plugin_noalloc.rs"]
mod plugin_noalloc;

use common::counting::Counting;
use plugin_noalloc::{both, both_cycles, cycle, positive_controls, run_blocks, Noise};
use xrunlab::dsp::PluginContext;
use xrunlab::engine::{Engine, EngineSpec};

#[global_allocator]
static GLOBAL: Counting = Counting;

/// (element, parameters), in each format: a 1→1 EQ with parameters sent in the priming
/// block (CLAP events, VST3 parameter changes), and a compressor whose sidechain input needs
/// buffers of its own.
const PLUGINS: [(&str, &str); 4] = [
    ("clap:com.zamaudio.ZamEQ2", "boost_cut_1=6"),
    ("clap:com.zamaudio.ZamComp", "threshold=-30"),
    ("vst3:ZamEQ2", "boost_cut_1=6"),
    ("vst3:ZamComp", "threshold=-30"),
];

const RATE: u32 = 48000;
const FRAMES: usize = 64;
const WARM: u64 = 300;
const COUNTED: u64 = 500;

#[test]
fn clap_and_vst3_plugins_neither_allocate_nor_lock_in_the_cycle() {
    let installed = PLUGINS
        .iter()
        .all(|(id, _)| xrunlab::dsp::registry::describe(id).is_ok());
    if !common::require(
        installed,
        "zam-plugins' CLAP and VST3 builds in /usr/lib/clap and /usr/lib/vst3 — scripts/install-deps installs them",
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
    for (id, params) in PLUGINS {
        let (p, rust, made) = both(|| xrunlab::dsp::registry::create(id, params, &ctx));
        let mut p = p.unwrap_or_else(|e| panic!("{id}: {e}"));
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

    let chain: Vec<String> = PLUGINS
        .iter()
        .map(|(id, params)| format!("{id}({params})"))
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
