//! `watch --forensics` names the plugin inside the late client (docs/methods.md "Inside the
//! late client"): on a private jackd2 dummy server, a `jalv` hosting the test's own LV2
//! plugin that spins now and then (tests/fixtures/lv2-spin, built here, on an LV2_PATH the
//! watcher does not share) and a `jalv` hosting an innocent mda-lv2 plugin, the same on a
//! private PipeWire, the same two plugins in a filter-chain inside a PipeWire daemon, and
//! in a headless Ardour session; and the object-and-symbol mapping on that plugin's ELF,
//! stripped and not.

mod common;

use common::jack_clients::{has_plugin, jalv, watch_forensics};
use common::servers::{
    require_jackd, require_pipewire, AudioServer, PipeWireExtra, PipeWireServer,
};
use common::{require, show};
use std::process::Stdio;
use xrunlab::trace::objects::{Maps, Symbols};
use xrunlab::trace::sample::ThreadSampler;

const RATE: u32 = 48000;
const FRAMES: u32 = 256;
const SPIN: &str = "urn:xrunlab:test:spin";
const INNOCENT: &str = "http://drobilla.net/plugins/mda/Delay";

/// The spin fixture built, and what the tests need beside it; None after a skip.
fn set_up() -> Option<(common::trace::Traced, tempfile::TempDir)> {
    let t = common::trace::setup()?;
    let lv2 = common::lv2_fixture::build("lv2-spin", "spin", &[])?;
    if !require(common::which("jalv").is_some(), "jalv (apt install jalv)")
        || !require(
            has_plugin(INNOCENT, None),
            "mda-lv2's Delay for jalv (apt install mda-lv2)",
        )
    {
        return None;
    }
    assert!(
        has_plugin(SPIN, Some(lv2.path())),
        "the spin fixture builds"
    );
    Some((t, lv2))
}

#[test]
fn the_spinning_plugin_inside_a_jalv_is_named_for_the_xruns_it_causes() {
    let Some((_t, lv2)) = set_up() else {
        return;
    };
    let Some(server) = require_jackd(RATE, FRAMES) else {
        return;
    };
    let server_arg = format!("jack:{}", server.name);
    check_session(&server, &server_arg, &lv2);
}

#[test]
fn the_spinning_plugin_inside_a_jalv_on_pipewire_is_named_for_the_xruns_it_causes() {
    let Some((_t, lv2)) = set_up() else {
        return;
    };
    let Some(server) = require_pipewire(RATE, FRAMES) else {
        return;
    };
    check_session(&server, "pipewire", &lv2);
}

/// The plugins inside the PipeWire daemon: a filter-chain (module-filter-chain, a drop-in
/// of the private daemon's configuration) running the spinner and then an innocent mda-lv2
/// Delay, between a null sink's monitor and the sink, linked by WirePlumber. The chain's
/// capture node runs both plugins on the daemon's data thread; a 6-s watch must name the
/// spinning plugin inside it for the xruns it is late in, and never the Delay.
#[test]
fn the_spinning_plugin_inside_a_pipewire_filter_chain_is_named_for_the_xruns_it_causes() {
    let Some((_t, lv2)) = set_up() else {
        return;
    };
    // 9 ms (1.7 periods) in one cycle of 40.
    let conf = format!(
        r#"context.objects = [
    {{ factory = adapter
      args = {{ factory.name = support.null-audio-sink node.name = xrl_sink
               media.class = Audio/Sink audio.channels = 1 audio.position = [ MONO ] }} }}
]
context.modules = [
    {{ name = libpipewire-module-filter-chain
      args = {{
          node.description = "xrunlab chain"
          filter.graph = {{
              nodes = [
                  {{ type = lv2 name = spin plugin = "{SPIN}" control = {{ "every" = 40 "ms" = 9 }} }}
                  {{ type = lv2 name = delay plugin = "{INNOCENT}" }}
              ]
              links = [ {{ output = "spin:out" input = "delay:left_in" }} ]
              inputs = [ "spin:in" ]
              outputs = [ "delay:left_out" ]
          }}
          audio.channels = 1
          audio.position = [ MONO ]
          capture.props = {{ node.name = xrl_chain_in node.always-process = true }}
          playback.props = {{ node.name = xrl_chain_out target.object = xrl_sink }}
      }}
    }}
]
"#
    );
    // The daemon finds the fixture, and mda-lv2 where Debian installs it.
    let lv2_path = format!("{}:/usr/lib/lv2", lv2.path().display());
    let extra = PipeWireExtra {
        conf: Some(&conf),
        env: vec![("LV2_PATH", lv2_path)],
        session_manager: true,
    };
    let server = PipeWireServer::start_extra(RATE, FRAMES, &extra);
    if !require(
        server.is_ok(),
        &format!(
            "a private PipeWire with a filter-chain and WirePlumber: {:?}",
            server.as_ref().err()
        ),
    ) {
        return;
    }
    let server = server.unwrap();
    let t = std::time::Instant::now();
    while !(server.linked_from("xrl_chain_out") && server.linked_from("xrl_sink")) {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(15),
            "WirePlumber did not link the chain in 15 s:\n{}",
            server.log()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("w.json");
    let (o, r) = watch_forensics(
        &server,
        "pipewire",
        &["--sample-every", "250us"],
        "6s",
        &out,
    );
    let xruns = r["xruns"].as_array().unwrap();
    // The chain's capture node runs its plugins (it triggers the playback node after).
    let spun: Vec<_> = xruns
        .iter()
        .filter(|x| x["late"]["name"] == "xrl_chain_in")
        .collect();
    assert!(spun.len() >= 5, "{}\n{}", r["xruns"], show(&o));
    assert_spinner_named(&spun, &r["xruns"]);
    for x in xruns {
        assert_ne!(x["late"]["inside"]["code"]["name"], "MDA Delay", "{x}");
    }
    // The playback node, signalled by the capture node once the plugins ran, is not the
    // late node of those xruns.
    let blamed_out = xruns
        .iter()
        .filter(|x| x["late"]["name"] == "xrl_chain_out")
        .count();
    assert!(blamed_out * 5 < spun.len(), "{}", r["xruns"]);
}

/// At least 90 % of the xruns the spinner's host was late in (`spun`) name the spinning
/// plugin inside it, by its own name and URI read from its bundle (the watcher's LV2_PATH
/// does not hold it), and none of them names the innocent Delay; how many did.
fn assert_spinner_named(spun: &[&serde_json::Value], xruns: &serde_json::Value) -> usize {
    let named = spun
        .iter()
        .filter(|x| {
            let c = &x["late"]["inside"]["code"];
            c["name"] == "xrunlab spin" && c["kind"] == "lv2" && c["ids"][0] == SPIN
        })
        .count();
    assert!(
        named * 10 >= spun.len() * 9,
        "{named} of {} named the spinning plugin: {xruns}",
        spun.len()
    );
    for x in spun {
        assert_ne!(x["late"]["inside"]["code"]["name"], "MDA Delay", "{x}");
    }
    named
}

/// Two jalv clients of `server`: the spinner (the fixture) and an innocent mda-lv2 Delay;
/// a 5-s `watch --server SERVER_ARG --forensics` must name the spinning plugin for the
/// xruns the spinner is late in, and never the innocent one.
fn check_session(server: &dyn AudioServer, server_arg: &str, lv2: &tempfile::TempDir) {
    let innocent = jalv(server, "innocent", INNOCENT, &[], &[]);
    let jack = server_arg.starts_with("jack");
    // 8 ms (1.5 periods) in one cycle of 40: about 4 a second.
    let spinner = jalv(
        server,
        "spinner",
        SPIN,
        &["-c", "every=40", "-c", "ms=8"],
        &[("LV2_PATH", lv2.path())],
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("w.json");
    let (o, r) = watch_forensics(server, server_arg, &["--sample-every", "250us"], "5s", &out);
    let r = &r;
    let xruns = r["xruns"].as_array().unwrap();
    let spun: Vec<_> = xruns
        .iter()
        .filter(|x| {
            x["late"]["name"] == "spinner" && x["late"]["pid"].as_i64() == Some(spinner.pid())
        })
        .collect();
    assert!(spun.len() >= 5, "{}\n{}", r["xruns"], show(&o));
    // With the function it spun in.
    let named = assert_spinner_named(&spun, &r["xruns"]);
    let burn = spun
        .iter()
        .filter(|x| x["late"]["inside"]["symbol"] == "xrunlab_spin_burn")
        .count();
    assert!(burn * 2 > spun.len(), "{}", r["xruns"]);
    // The class of their cause is the client's own work for most: nothing took its CPU
    // (a loaded machine beside the test makes some of them something else's).
    let own = spun
        .iter()
        .filter(|x| x["late"]["class"] == "own-work")
        .count();
    assert!(
        own * 2 > spun.len(),
        "{own} of {} classed own-work: {}",
        spun.len(),
        r["xruns"]
    );
    // Over the watch, per client: the innocent jalv's thread was sampled (its plugin, a
    // few µs a cycle, is in it where a sample fell on it), and none of its code led an
    // xrun.
    let code = r["inside"]["code"].as_array().unwrap();
    let theirs: Vec<_> = code
        .iter()
        .filter(|c| c["pid"].as_i64() == Some(innocent.pid()))
        .collect();
    assert!(!theirs.is_empty(), "{}", r["inside"]);
    for c in &theirs {
        assert_eq!(c["process"], "jalv", "{c}");
        // On PipeWire a thread is known by its node only where the trace saw the node
        // run around an xrun; an innocent never late keeps its process's name.
        assert!(
            c["client"] == "innocent" || (!jack && c["client"] == "jalv"),
            "{c}"
        );
        assert_eq!(c["xruns_led"], 0, "{c}");
    }
    assert!(
        code.iter()
            .filter(|c| c["code"]["name"] == "MDA Delay")
            .all(|c| c["pid"].as_i64() == Some(innocent.pid())),
        "{}",
        r["inside"]
    );
    let spin = code
        .iter()
        .find(|c| c["code"]["name"] == "xrunlab spin")
        .unwrap_or_else(|| panic!("{}", r["inside"]));
    assert!(
        spin["xruns_led"].as_u64().unwrap() as usize >= named,
        "{spin}"
    );
    assert!(spin["max_ns"].as_u64().unwrap() >= 4_000_000, "{spin}");
    // On jackd2 the live line under an xrun names it too, a moment after the xrun (PipeWire's
    // live lines come from its profiler, before any sample is read).
    let stderr = String::from_utf8_lossy(&o.stderr);
    if jack {
        let words = stderr.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            words
                .split(" xrun ")
                .any(|l| l.contains(": late client 'spinner'")
                    && l.contains("in 'xrunlab spin' (LV2 plugin)")),
            "{stderr}"
        );
    }
    // The answer says it in words.
    let stdout = String::from_utf8_lossy(&o.stdout);
    let words = stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains("inside it 'xrunlab spin' (LV2 plugin)"),
        "{stdout}"
    );
}

/// Makes an Ardour session of 4 mono tracks, each with ZamEQ2 and ZamComp, and on the
/// third the spin fixture (one run in 40 spins 8 ms); then prints "made".
const SESSION_LUA: &str = r#"
AudioEngine:set_backend("None (Dummy)", "", "")
local s = create_session(DIR, "sess", 48000)
assert(s, "no session")
local tracks = Session:new_audio_track(1, 2, nil, 4, "T", ARDOUR.PresentationInfo.max_order, ARDOUR.TrackMode.Normal, true)
local n = 0
for t in tracks:iter() do
  n = n + 1
  for _, uri in ipairs({"urn:zamaudio:ZamEQ2", "urn:zamaudio:ZamComp"}) do
    local p = ARDOUR.LuaAPI.new_plugin(Session, uri, ARDOUR.PluginType.LV2, "")
    assert(not p:isnil(), "no plugin " .. uri)
    t:add_processor_by_index(p, 0, nil, true)
  end
  if n == 3 then
    local p = ARDOUR.LuaAPI.new_plugin(Session, "urn:xrunlab:test:spin", ARDOUR.PluginType.LV2, "")
    assert(not p:isnil(), "no spin plugin")
    ARDOUR.LuaAPI.set_processor_param(p, 0, 40)
    ARDOUR.LuaAPI.set_processor_param(p, 1, 8)
    t:add_processor_by_index(p, 0, nil, true)
  end
end
Session:save_state("", false, false, false, false, false)
close_session()
print("made")
"#;

/// Debian's headless Ardour: the `hardour` binary and the environment its launchers set.
fn hardour() -> Option<(std::path::PathBuf, Vec<(&'static str, String)>)> {
    let dir = std::fs::read_dir("/usr/lib")
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("ardour"))
        })?;
    let bin = std::fs::read_dir(&dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("hardour-"))
        })?;
    let d = dir.to_string_lossy().into_owned();
    let version = d.trim_start_matches("/usr/lib/ardour").to_string();
    let env = vec![
        ("LD_LIBRARY_PATH", d.clone()),
        ("ARDOUR_DATA_PATH", format!("/usr/share/ardour{version}")),
        ("ARDOUR_CONFIG_PATH", format!("/etc/ardour{version}")),
        ("ARDOUR_DLL_PATH", d.clone()),
        ("VAMP_PATH", format!("{d}/vamp")),
    ];
    Some((bin, env))
}

/// A process stopped at drop: SIGTERM, then SIGKILL after 5 s.
struct Stopped(std::process::Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        // SAFETY: signals our own child.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let t = std::time::Instant::now();
        while t.elapsed() < std::time::Duration::from_secs(5) {
            if matches!(self.0.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A private jackd running the session `sess` in hardour as client `mix`, once jackd has
/// seen the spinning track make the session late (loading takes seconds, more beside
/// other tests). hardour 7.3 now and then garbles its requests to jackd at start
/// ("CheckSize error", "Unknown request" in jackd's log, its bytes those of a URI; seen 2
/// starts in 5 here, from a shell too): then both are started again, 3 times at most.
fn run_session(
    hardour: &std::path::Path,
    env: &[(&'static str, String)],
    sess: &std::path::Path,
    lv2_path: &str,
) -> Option<(common::servers::JackdServer, Stopped)> {
    let mut why = String::new();
    for _ in 0..3 {
        let server = require_jackd(RATE, FRAMES)?;
        let mut c = std::process::Command::new(hardour);
        c.args(["-c", "mix"]).arg(sess).arg("sess");
        for (k, v) in server.client_env() {
            c.env(k, v);
        }
        c.envs(env.iter().map(|(k, v)| (k, v)))
            .env("LV2_PATH", lv2_path);
        // Its stdin is not a terminal it could read commands from.
        let ardour = Stopped(
            c.stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("hardour starts"),
        );
        let t = std::time::Instant::now();
        loop {
            let log = server.log();
            if log.contains("client = mix was not finished") {
                return Some((server, ardour));
            }
            if log.contains("CheckSize error") || t.elapsed().as_secs() > 40 {
                why = log;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }
    panic!("hardour never ran its session late in 3 starts: {why}");
}

#[test]
fn the_spinning_plugin_inside_an_ardour_session_is_named_for_the_xruns_it_causes() {
    let Some((_t, lv2)) = set_up() else {
        return;
    };
    let found = hardour();
    if !require(
        found.is_some() && common::which("ardour7-lua").is_some(),
        "Debian's ardour (hardour, ardour7-lua: apt install ardour)",
    ) {
        return;
    }
    let (hardour_bin, env) = found.unwrap();
    let lv2_path = format!("{}:/usr/lib/lv2", lv2.path().display());
    let dir = tempfile::tempdir().unwrap();
    let sess = dir.path().join("sess");
    let script = dir.path().join("make.lua");
    let lua = SESSION_LUA.replace("DIR", &format!("{:?}", sess.to_str().unwrap()));
    std::fs::write(&script, lua).unwrap();
    // Ardour keeps its configuration and plugin caches under HOME (~/.config/ardour7,
    // ~/.cache/ardour7): give it the test's own, so the machine's stays as it was.
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let mut env = env;
    env.push(("HOME", home.to_string_lossy().into_owned()));
    env.push((
        "XDG_CONFIG_HOME",
        home.join(".config").to_string_lossy().into_owned(),
    ));
    env.push((
        "XDG_CACHE_HOME",
        home.join(".cache").to_string_lossy().into_owned(),
    ));
    let made = std::process::Command::new("ardour7-lua")
        .arg(&script)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("LV2_PATH", &lv2_path)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&made.stdout).contains("made"),
        "ardour7-lua: {}",
        show(&made)
    );
    let Some((server, ardour)) = run_session(&hardour_bin, &env, &sess, &lv2_path) else {
        return;
    };
    let out = dir.path().join("w.json");
    let server_arg = format!("jack:{}", server.name);
    let (o, r) = watch_forensics(&server, &server_arg, &[], "5s", &out);
    let r = &r;
    let xruns = r["xruns"].as_array().unwrap();
    let late: Vec<_> = xruns
        .iter()
        .filter(|x| {
            x["late"]["name"] == "mix" && x["late"]["pid"].as_i64() == Some(ardour.0.id() as i64)
        })
        .collect();
    assert!(late.len() >= 5, "{}\n{}", r["xruns"], show(&o));
    let spin = late
        .iter()
        .filter(|x| x["late"]["inside"]["code"]["name"] == "xrunlab spin")
        .count();
    assert!(
        spin * 10 >= late.len() * 9,
        "{spin} of {}: {}",
        late.len(),
        r["xruns"]
    );
    for x in &late {
        let name = x["late"]["inside"]["code"]["name"].as_str().unwrap_or("");
        assert!(!name.starts_with("Zam"), "an innocent plugin named: {x}");
    }
    let stdout = String::from_utf8_lossy(&o.stdout);
    let words = stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains("inside it 'xrunlab spin' (LV2 plugin)"),
        "{stdout}"
    );
}

#[test]
fn a_sample_maps_to_its_function_in_a_plugin_stripped_or_not() {
    let Some(lv2) = common::lv2_fixture::build("lv2-spin", "spin", &[]) else {
        return;
    };
    let so = lv2.path().join("spin.lv2/spin.so");
    let stripped = lv2.path().join("stripped.so");
    let st = std::process::Command::new("strip")
        .arg("--strip-all")
        .arg(&so)
        .arg("-o")
        .arg(&stripped)
        .output()
        .unwrap();
    assert!(st.status.success(), "{}", show(&st));
    // Load both (the plugin twice, at two addresses) and find a function's address.
    let open = |p: &std::path::Path| {
        let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
        // SAFETY: dlopen of our own fixture, whose constructors do nothing.
        let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        assert!(!h.is_null(), "dlopen {}", p.display());
        // SAFETY: a symbol lookup in a handle just opened.
        let f = unsafe { libc::dlsym(h, c"xrunlab_spin_burn".as_ptr()) };
        assert!(!f.is_null());
        f as u64
    };
    let (a, b) = (open(&so), open(&stripped));
    assert_ne!(a, b);
    let maps = Maps::of(std::process::id() as i32);
    for (ip, path, table) in [(a + 4, &so, "symtab"), (b + 4, &stripped, "dynsym")] {
        let (m, off) = maps.find(ip).expect("the function's address is mapped");
        assert_eq!(std::path::Path::new(&m.path), path.as_path());
        let syms = Symbols::of(path).unwrap();
        assert_eq!(syms.table, table);
        assert_eq!(syms.at_offset(off), Some("xrunlab_spin_burn"), "{path:?}");
    }
    // A static function: named where the object kept its symbol table, not guessed where
    // it was stripped (the exported one before it has a size it lies outside of).
    let syms = Symbols::of(&so).unwrap();
    let run_named = (0..0x4000u64).any(|o| syms.at_offset(o) == Some("run"));
    assert!(run_named, "the unstripped object names its static run()");
    let s = Symbols::of(&stripped).unwrap();
    assert!((0..0x4000u64).all(|o| s.at_offset(o) != Some("run")));
    // No ELF at all: no symbols, no panic.
    let junk = lv2.path().join("junk.so");
    std::fs::write(&junk, b"\x7fELF not really").unwrap();
    assert!(Symbols::of(&junk).is_none());
}

#[test]
fn a_spinning_thread_is_sampled_on_the_monotonic_clock() {
    // SAFETY: gettid has no arguments.
    let tid = unsafe { libc::gettid() };
    let mut s = match ThreadSampler::open(tid, 100_000) {
        Ok(s) => s,
        Err(e) => {
            let _ = require(false, &format!("perf_event_open (root): {e}"));
            return;
        }
    };
    let now = || {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: t is a valid timespec to write.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
        t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
    };
    let t0 = now();
    let mut x = 0u64;
    while now() - t0 < 50_000_000 {
        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
    }
    let t1 = now();
    let (mut out, mut bytes) = (Vec::new(), Vec::new());
    s.drain(&mut out, &mut bytes);
    // 50 ms of wall time is at least a few ms of CPU, even beside a load.
    assert!(out.len() >= 5, "{} samples", out.len());
    assert!(out.iter().all(|s| s.tid == tid));
    assert!(out
        .iter()
        .all(|s| s.time_ns >= t0 && s.time_ns <= t1 + 1_000_000));
    // Drained: a second drain finds only what came since.
    let n = out.len();
    s.drain(&mut out, &mut bytes);
    assert!(out.len() - n < n);
}
