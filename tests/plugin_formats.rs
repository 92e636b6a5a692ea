//! CLAP and VST3 hosting through the binary, from one table of what differs between them, on
//! zam-plugins' builds of both formats (Debian's `zam-plugins`, installed by
//! scripts/install-deps) and on fixtures compiled here (tests/fixtures/{clap,vst3}/
//! refuses-init.c). For each format:
//! - ZamEQ2 (1→1), ZamComp (with its sidechain input) and ZamVerb (a background thread) run in
//!   `run` on the virtual driver and make sound (not silence, not NaN), recorded in the format;
//! - ZamComp runs in a short load grid on the sim driver with its cost measured by `plugins
//!   bench`, where the maximum is then exact;
//! - listing and showing say whether each plugin can be hosted;
//! - bad input exits 2 (unknown plugin with the closest of every format, a parameter out of
//!   range, a file that is not a plugin) or 3 (an init that fails, with what it said).
//!
//! Then what crosses formats: the same DSP as LV2, CLAP and VST3 gives the same output, a
//! folder is benched skipping what cannot be hosted, and formats mix in one load grid. The
//! no-allocation proof with these plugins is in tests/plugins_noalloc.rs.

mod common;
use common::{require, show, xrunlab};
use std::path::Path;

/// What a test needs to know of one plugin format.
struct Format {
    /// The chain prefix and `--format` key.
    key: &'static str,
    /// The search path variable.
    path_var: &'static str,
    /// ZamComp as `plugins list --format KEY` names it (its id).
    comp: &'static str,
    /// Chain elements of ZamEQ2, ZamComp and ZamVerb for `run`, each with a field of its
    /// plugin record and the value it must hold.
    sound: [(&'static str, &'static str, &'static str); 3],
    /// What a misspelt ZamComp's refusal names besides the format's own closest.
    closest: &'static [&'static str],
    /// Puts a file that is not a plugin, named `junk`, into a search folder.
    junk: fn(&Path),
    /// Builds tests/fixtures/KEY/refuses-init.c into a search folder.
    fixture: fn(&Path, &Path) -> std::process::Command,
    /// The fixture's chain element, and what its failed init must say.
    refuses: (&'static str, &'static [&'static str]),
    /// Every plugin reports its latency (VST3's `GetLatencySamples`); in CLAP only those
    /// with the latency extension do, and the others are recorded without one (null).
    latency_always: bool,
}

const FORMATS: [Format; 2] = [
    Format {
        key: "clap",
        path_var: "CLAP_PATH",
        comp: "com.zamaudio.ZamComp",
        sound: [
            ("clap:com.zamaudio.ZamEQ2", "uri", "com.zamaudio.ZamEQ2"),
            (
                "clap:ZamComp(threshold=-30,ratio=8)",
                "uri",
                "com.zamaudio.ZamComp",
            ),
            ("clap:com.zamaudio.ZamVerb", "uri", "com.zamaudio.ZamVerb"),
        ],
        closest: &[
            "no installed CLAP plugin is called 'ZamCompp'",
            "clap:com.zamaudio.ZamComp",
            "lv2:urn:zamaudio:ZamComp",
        ],
        junk: |dir| std::fs::write(dir.join("junk.clap"), b"not an ELF file").unwrap(),
        fixture: |dir, source| {
            let mut c = cc(source);
            c.arg(dir.join("refuses-init.clap"));
            c
        },
        refuses: (
            "clap:org.xrunlab.test.refuses-init",
            &["its init failed", "cannot open its license file"],
        ),
        latency_always: false,
    },
    Format {
        key: "vst3",
        path_var: "VST3_PATH",
        comp: "2046504473616C63504D435A00000000",
        sound: [
            ("vst3:ZamEQ2(boost_cut_1=6)", "name", "ZamEQ2"),
            ("vst3:ZamComp(threshold=-30,ratio=8)", "name", "ZamComp"),
            ("vst3:/usr/lib/vst3/ZamVerb.vst3", "name", "ZamVerb"),
        ],
        closest: &[
            "no installed VST3 plugin is called 'ZamCompp'",
            "vst3:",
            "lv2:urn:zamaudio:ZamComp",
            "clap:com.zamaudio.ZamComp",
        ],
        junk: |dir| {
            let so = dir.join("junk.vst3/Contents").join(arch());
            std::fs::create_dir_all(&so).unwrap();
            std::fs::write(so.join("junk.so"), b"not an ELF file").unwrap();
        },
        fixture: |dir, source| {
            let so = dir.join("refuses-init.vst3/Contents").join(arch());
            std::fs::create_dir_all(&so).unwrap();
            let mut c = cc(source);
            c.arg(so.join("refuses-init.so"));
            c
        },
        refuses: (
            "vst3:Refuses Init",
            &["its initialize failed", "kInternalError"],
        ),
        latency_always: true,
    },
];

/// A VST3 bundle's binary folder for this machine.
fn arch() -> String {
    format!("{}-linux", std::env::consts::ARCH)
}

/// `cc` building `source` as a shared object; the caller adds the output path.
fn cc(source: &Path) -> std::process::Command {
    let mut c = std::process::Command::new("cc");
    c.args(["-shared", "-fPIC"]).arg(source).arg("-o");
    c
}

fn json(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", show(o)))
}

/// Whether zam-plugins' builds of every format are installed (under CI their absence fails
/// the test).
fn installed() -> bool {
    FORMATS.iter().all(|f| {
        let ok = xrunlab()
            .args(["-q", "plugins", "show", &format!("{}:{}", f.key, f.comp)])
            .output()
            .unwrap()
            .status
            .success();
        require(
            ok,
            &format!(
                "zam-plugins' {} plugins (Debian package zam-plugins)",
                f.key
            ),
        )
    })
}

#[test]
fn zam_plugins_make_sound_in_run_on_the_virtual_driver() {
    if !installed() {
        return;
    }
    for f in &FORMATS {
        for (element, field, value) in f.sound {
            let o = xrunlab()
                .args(["-q", "--json", "run", "--driver", "virtual"])
                .args(["--duration", "1s", "--chain", element])
                .output()
                .unwrap();
            assert!(o.status.success(), "{element}: {}", show(&o));
            let doc = json(&o);
            let r = &doc["results"];
            let sink = &r["sink"];
            let peak = sink["peak"].as_f64().unwrap();
            assert!(
                peak > 1e-3 && peak < 100.0,
                "{element}: output peak {peak} is silence or garbage: {sink}"
            );
            assert_eq!(sink["nonfinite_samples"], 0, "{element}: NaN in the output");
            let p = &r["plugins"][0];
            assert_eq!(p["format"], f.key, "{}", r["plugins"]);
            assert_eq!(p[field], value, "{p}");
            assert_eq!(p["instances"], 1);
            let latency = &p["latency_frames"];
            assert!(
                latency.is_u64() || (latency.is_null() && !f.latency_always),
                "{p}"
            );
        }
    }
}

#[test]
fn load_grid_on_the_sim_driver_with_a_bench_cost() {
    if !installed() {
        return;
    }
    for f in &FORMATS {
        let element = format!("{}:{}", f.key, f.comp);
        let o = xrunlab()
            .args(["-q", "--json", "plugins", "bench", "--buffer", "96"])
            .args(["--duration", "300ms", &element])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", show(&o));
        let per_frame = json(&o)["results"][0]["ns_per_frame"].as_f64().unwrap();
        assert!(per_frame > 0.0 && per_frame.is_finite());
        let per_frame = (per_frame * 1000.0).round() / 1000.0;
        let o = xrunlab()
            .args(["-q", "--json", "load", "--driver", "sim", "--buffers", "96"])
            .args(["--tracks", "1,2", "--duration", "1s", "--stress", "none"])
            .args(["--plugins", &element, "--max-instances", "8192"])
            .args(["--cost", &format!("{element}={per_frame:.3}ns/frame")])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", show(&o));
        let doc = json(&o);
        let cells = doc["results"]["cells"].as_array().unwrap();
        assert_eq!(cells.len(), 2, "{doc}");
        // P = 2 ms exactly at 96 frames and 48 kHz.
        let m = 2_000_000 / (per_frame * 96.0).round() as u64;
        for cell in cells {
            assert_eq!(cell["plugin"], element);
            assert_eq!(cell["max_per_track"].as_u64().unwrap(), m, "{cell}");
        }
    }
}

#[test]
fn listing_and_showing_say_what_can_be_hosted() {
    if !installed() {
        return;
    }
    for f in &FORMATS {
        let o = xrunlab()
            .args(["--json", "plugins", "list", "--format", f.key, "zam"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", show(&o));
        let all = json(&o);
        let all = all.as_array().unwrap();
        assert_eq!(all.len(), 17, "zam-plugins installs 17 {} plugins", f.key);
        assert!(all
            .iter()
            .all(|d| d["format"] == f.key && d["unhostable"].is_null()));
        let o = xrunlab()
            .args(["plugins", "show", &format!("{}:ZamComp", f.key)])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", show(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        let use_line = format!("use: --chain '{}:", f.key);
        for s in ["hostable: yes", "threshold", "-80..=0", &use_line] {
            assert!(out.contains(s), "show should say '{s}': {out}");
        }
        // Two audio inputs: the main one and the sidechain, each its own port.
        let o = xrunlab()
            .args([
                "--json",
                "plugins",
                "show",
                &format!("{}:{}", f.key, f.comp),
            ])
            .output()
            .unwrap();
        let d = json(&o);
        let audio_in = d["ports"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["kind"] == "audio" && p["input"] == true)
            .count();
        assert_eq!(audio_in, 2, "{d}");
    }
}

/// `run` of `chain` on the virtual driver (with `var` set to `dir` when given), refused
/// with `code` saying each of `says`.
fn refused_run(var: Option<(&str, &Path)>, chain: &str, code: i32, says: &[&str]) {
    let mut c = xrunlab();
    if let Some((k, dir)) = var {
        c.env(k, dir);
    }
    let o = c
        .args(["run", "--driver", "virtual", "--duration", "1s", "--chain"])
        .arg(chain)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(code), "{chain}: {}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    for s in says {
        assert!(err.contains(s), "{chain} should say '{s}': {}", show(&o));
    }
    assert!(!err.contains("panicked"), "{}", show(&o));
}

#[test]
fn bad_input_exits_with_the_right_code_and_says_why() {
    if !installed() {
        return;
    }
    for f in &FORMATS {
        // The closest are named in every format: the other builds of the same plugin too.
        refused_run(None, &format!("{}:ZamCompp", f.key), 2, f.closest);
        let comp = |params: &str| format!("{}:ZamComp({params})", f.key);
        refused_run(
            None,
            &comp("threshold=5"),
            2,
            &["threshold=5", "range -80..=0"],
        );
        refused_run(
            None,
            &comp("loudness=1"),
            2,
            &["no parameter 'loudness'", "threshold (-80..=0)"],
        );

        let dir = tempfile::tempdir().unwrap();
        (f.junk)(dir.path());
        let source = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(f.key)
            .join("refuses-init.c");
        let built = (f.fixture)(dir.path(), &source)
            .output()
            .expect("cc (gcc) builds the fixture plugin");
        assert!(built.status.success(), "{}", show(&built));
        let var = Some((f.path_var, dir.path()));
        // A file that is not a plugin is listed as unhostable, with why, and refused (exit 2).
        let o = xrunlab()
            .env(f.path_var, dir.path())
            .args(["--json", "plugins", "list", "--format", f.key, "junk"])
            .output()
            .unwrap();
        let listed = json(&o);
        let why = listed[0]["unhostable"].as_str().unwrap_or_default();
        assert!(why.contains("it does not load"), "{listed}");
        refused_run(
            var,
            &format!("{}:junk", f.key),
            2,
            &["cannot be hosted", "it does not load"],
        );
        // An init that fails: exit 3 with what the plugin said.
        refused_run(var, f.refuses.0, 3, f.refuses.1);
    }
}

/// The most the same DSP may differ between its LV2, CLAP and VST3 builds: all run DPF's one
/// `run()` on the same floats, so any difference is the host's doing.
const SAME: f32 = 1e-6;

/// `blocks` blocks of the same noise through `a` and `b`: the largest difference between
/// their outputs, and `a`'s peak.
fn compare(
    a: &mut dyn xrunlab::dsp::Plugin,
    b: &mut dyn xrunlab::dsp::Plugin,
    blocks: usize,
) -> (f32, f32) {
    let mut seed = 0x9e37_79b9u32;
    let (mut max_diff, mut peak) = (0f32, 0f32);
    for _ in 0..blocks {
        let mut l = vec![0f32; 256];
        for s in l.iter_mut() {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            *s = 0.1 * (seed as f32 / u32::MAX as f32 * 2.0 - 1.0);
        }
        let (mut al, mut ar) = (l.clone(), l.clone());
        let (mut bl, mut br) = (l.clone(), l);
        a.process(&mut al, &mut ar);
        b.process(&mut bl, &mut br);
        for (x, y) in al.iter().chain(&ar).zip(bl.iter().chain(&br)) {
            max_diff = max_diff.max((x - y).abs());
            peak = peak.max(x.abs());
        }
    }
    (max_diff, peak)
}

#[test]
fn the_same_dsp_as_lv2_clap_and_vst3_gives_the_same_output() {
    if !installed() {
        return;
    }
    let ctx = xrunlab::dsp::PluginContext {
        rate: 48000,
        max_frames: 256,
    };
    let mut found = Vec::new();
    for (name, params_lv2, params_other) in [
        ("ZamEQ2", "boost1=12", "boost_cut_1=12"),
        ("ZamComp", "thr=-30", "threshold=-30"),
        ("ZamTube", "", ""),
        ("ZamAutoSat", "", ""),
    ] {
        let lv2 = format!("lv2:urn:zamaudio:{name}");
        let clap = format!("clap:com.zamaudio.{name}");
        if xrunlab::dsp::registry::create(&lv2, params_lv2, &ctx).is_err() {
            assert!(!require(false, &format!("{lv2} (zam-plugins)")));
            return;
        }
        let vst3 = format!("vst3:{name}");
        for other in [clap, vst3] {
            let mut a = xrunlab::dsp::registry::create(&lv2, params_lv2, &ctx).unwrap();
            let mut b = xrunlab::dsp::registry::create(&other, params_other, &ctx)
                .unwrap_or_else(|e| panic!("{other}: {e}"));
            let (d, peak) = compare(a.as_mut(), b.as_mut(), 200);
            eprintln!("{name}: LV2 against {other}, max |difference| {d:e} (output peak {peak})");
            assert!(peak > 1e-3, "{name}: silence");
            found.push((other, d));
        }
    }
    for (other, d) in found {
        assert!(
            d <= SAME,
            "{other} differs from its LV2 build by up to {d:e}"
        );
    }
}

#[test]
fn a_folder_is_benched_skipping_what_cannot_be_hosted_and_formats_mix_in_load() {
    if !installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("junk.clap"), b"not an ELF file").unwrap();
    std::fs::copy("/usr/lib/clap/ZamEQ2.clap", dir.path().join("ZamEQ2.clap")).unwrap();
    let o = xrunlab()
        .args(["plugins", "bench", "--duration", "100ms", "--buffer", "128"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("ZamEQ2.clap"), "{out}");
    assert!(
        out.contains("skipped clap:") && out.contains("junk.clap: cannot be hosted"),
        "{out}"
    );
    // LV2 and CLAP builds of one plugin side by side in the load grid (sim: a declared cost).
    let o = xrunlab()
        .args(["-q", "--json", "load", "--driver", "sim", "--buffers", "96"])
        .args(["--tracks", "1", "--duration", "1s", "--stress", "none"])
        .args(["--plugins", "lv2:urn:zamaudio:ZamEQ2,clap:ZamEQ2"])
        .args(["--cost", "lv2:urn:zamaudio:ZamEQ2=100ns/frame"])
        .args(["--cost", "clap:ZamEQ2=200ns/frame"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let doc = json(&o);
    let cells = doc["results"]["cells"].as_array().unwrap();
    let max = |p: &str| {
        cells.iter().find(|c| c["plugin"] == p).unwrap()["max_per_track"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(max("lv2:urn:zamaudio:ZamEQ2"), 2_000_000 / 9600, "{doc}");
    assert_eq!(max("clap:ZamEQ2"), 2_000_000 / 19200, "{doc}");
}
