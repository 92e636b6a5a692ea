//! VST3 hosting through the binary, on zam-plugins' VST3 builds (Debian's `zam-plugins`,
//! installed by scripts/install-deps) and on a fixture compiled here
//! (tests/fixtures/vst3/refuses-init.c):
//! - ZamEQ2 (1→1), ZamComp (with its sidechain bus) and ZamVerb (a background thread) run in
//!   `run` on the virtual driver and make sound (not silence, not NaN), recorded as VST3;
//! - ZamComp runs in a short load grid on the sim driver with its cost measured by `plugins
//!   bench`, where the maximum is then exact;
//! - listing and showing say whether each plugin can be hosted;
//! - bad input exits 2 (unknown plugin with the closest of every format, a parameter out of
//!   range, a bundle that is not a plugin) or 3 (an initialize that fails, with its result).
//!
//! The same DSP as LV2, CLAP and VST3 is compared in tests/clap.rs, and the no-allocation
//! proof with a VST3 plugin is in tests/clap_noalloc.rs.

mod common;
use common::{require, show, xrunlab};
use std::path::Path;

/// ZamComp's class id, as `plugins list --format vst3` prints it.
const COMP: &str = "2046504473616C63504D435A00000000";

fn json(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", show(o)))
}

/// Whether zam-plugins' VST3 builds are installed (under CI their absence fails the test).
fn installed() -> bool {
    let ok = xrunlab()
        .args(["-q", "plugins", "show", "vst3:/usr/lib/vst3/ZamComp.vst3"])
        .output()
        .unwrap()
        .status
        .success();
    require(
        ok,
        "zam-plugins' VST3 plugins in /usr/lib/vst3 (Debian package zam-plugins)",
    )
}

#[test]
fn zam_vst3_plugins_make_sound_in_run_on_the_virtual_driver() {
    if !installed() {
        return;
    }
    for (element, name) in [
        ("vst3:ZamEQ2(boost_cut_1=6)", "ZamEQ2"),
        ("vst3:ZamComp(threshold=-30,ratio=8)", "ZamComp"),
        ("vst3:/usr/lib/vst3/ZamVerb.vst3", "ZamVerb"),
    ] {
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
        assert_eq!(r["plugins"][0]["format"], "vst3", "{}", r["plugins"]);
        assert_eq!(r["plugins"][0]["name"], name);
        assert_eq!(r["plugins"][0]["instances"], 1);
        assert!(r["plugins"][0]["latency_frames"].is_u64());
    }
}

#[test]
fn load_grid_on_the_sim_driver_with_a_bench_cost() {
    if !installed() {
        return;
    }
    let element = format!("vst3:{COMP}");
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

#[test]
fn listing_and_showing_say_what_can_be_hosted() {
    if !installed() {
        return;
    }
    let o = xrunlab()
        .args(["--json", "plugins", "list", "--format", "vst3", "zam"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let all = json(&o);
    let all = all.as_array().unwrap();
    assert_eq!(all.len(), 17, "zam-plugins installs 17 VST3 plugins");
    assert!(all
        .iter()
        .all(|d| d["format"] == "vst3" && d["unhostable"].is_null()));
    let o = xrunlab()
        .args(["plugins", "show", "vst3:ZamComp"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    for s in [
        "hostable: yes",
        "threshold",
        "-80..=0",
        "use: --chain 'vst3:",
    ] {
        assert!(out.contains(s), "show should say '{s}': {out}");
    }
    // Two audio inputs: the main bus and the sidechain, each its own port.
    let o = xrunlab()
        .args(["--json", "plugins", "show", &format!("vst3:{COMP}")])
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

fn refused(env: Option<&Path>, chain: &str, code: i32, says: &[&str]) {
    let mut c = xrunlab();
    if let Some(dir) = env {
        c.env("VST3_PATH", dir);
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
    // The closest are named in every format: the LV2 and CLAP builds of the same plugin too.
    refused(
        None,
        "vst3:ZamCompp",
        2,
        &[
            "no installed VST3 plugin is called 'ZamCompp'",
            "vst3:",
            "lv2:urn:zamaudio:ZamComp",
            "clap:com.zamaudio.ZamComp",
        ],
    );
    refused(
        None,
        "vst3:ZamComp(threshold=5)",
        2,
        &["threshold=5", "range -80..=0"],
    );
    refused(
        None,
        "vst3:ZamComp(loudness=1)",
        2,
        &["no parameter 'loudness'", "threshold (-80..=0)"],
    );

    let dir = tempfile::tempdir().unwrap();
    let arch = format!("{}-linux", std::env::consts::ARCH);
    let junk = dir.path().join("junk.vst3/Contents").join(&arch);
    std::fs::create_dir_all(&junk).unwrap();
    std::fs::write(junk.join("junk.so"), b"not an ELF file").unwrap();
    let bin = dir.path().join("refuses-init.vst3/Contents").join(&arch);
    std::fs::create_dir_all(&bin).unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/vst3/refuses-init.c");
    let cc = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(bin.join("refuses-init.so"))
        .arg(&fixture)
        .output()
        .expect("cc (gcc) builds the fixture plugin");
    assert!(cc.status.success(), "{}", show(&cc));
    // A bundle that is not a plugin is listed as unhostable, with why, and refused (exit 2).
    let o = xrunlab()
        .env("VST3_PATH", dir.path())
        .args(["--json", "plugins", "list", "--format", "vst3", "junk"])
        .output()
        .unwrap();
    let listed = json(&o);
    let why = listed[0]["unhostable"].as_str().unwrap_or_default();
    assert!(why.contains("it does not load"), "{listed}");
    refused(
        Some(dir.path()),
        "vst3:junk",
        2,
        &["cannot be hosted", "it does not load"],
    );
    // An initialize that fails: exit 3 with the result it gave.
    refused(
        Some(dir.path()),
        "vst3:Refuses Init",
        3,
        &["its initialize failed", "kInternalError"],
    );
}
