//! `xrunlab watch --server pipewire` against a private PipeWire daemon started by the test
//! (its own runtime directory, the Dummy-Driver pacing the graph), with JACK clients under
//! `pw-jack`: two innocent `jack_metro`s and an injected slow client of the test's own,
//! `xrl-slowpoke` — this test binary run again under pw-jack (see `slow_client_process`),
//! which spins 3 periods long in one cycle a second and writes down how long each of those
//! process callbacks took by its own clock. Bounds are generous: noisy 2-core VMs.
//!
//! With `--forensics` the slow client is quick but pinned to CPU 1, where a FIFO burst of
//! the test's own (`common::trace::Culprit`) takes the CPU for 3 periods once a second:
//! the xruns it causes must name the node late and the burst as what ran instead.

mod common;

use common::servers::{require_pipewire, AudioServer, PipeWireServer};
use common::{bin, read_json, show, u};
use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const RATE: u32 = 48000;
const FRAMES: u32 = 256;
const SLOW_ENV: &str = "XRL_TEST_SLOW_CLIENT_OUT";
/// The slow client's spin in periods (3 unless set) and its CPU (none unless set).
const SPIN_ENV: &str = "XRL_TEST_SLOW_CLIENT_SPIN";
const CPU_ENV: &str = "XRL_TEST_SLOW_CLIENT_CPU";

fn period() -> Duration {
    Duration::from_nanos(FRAMES as u64 * 1_000_000_000 / RATE as u64)
}

/// Spins `spin` in one cycle of every `every`; its measured callback times go to `took`.
struct Slow {
    n: u64,
    every: u64,
    spin: Duration,
    took: rtrb::Producer<u64>,
}

impl jack::ProcessHandler for Slow {
    fn process(&mut self, _: &jack::Client, _: &jack::ProcessScope) -> jack::Control {
        let t = Instant::now();
        self.n += 1;
        if self.n.is_multiple_of(self.every) {
            while t.elapsed() < self.spin {
                std::hint::spin_loop();
            }
            let _ = self.took.push(t.elapsed().as_nanos() as u64);
        }
        jack::Control::Continue
    }
}

/// Not a test: the slow client, when this binary is run again with `SLOW_ENV` set (under
/// pw-jack, so the jack crate loads PipeWire's libjack). Writes one line per slow cycle.
#[test]
#[ignore = "the slow client's process, started by the tests below"]
fn slow_client_process() {
    let Some(out) = std::env::var_os(SLOW_ENV) else {
        return;
    };
    let var = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u32>().ok());
    if let Some(cpu) = var(CPU_ENV) {
        // libpipewire's data thread, started by the client's opening, inherits the pinning.
        common::trace::pin_self(c"xrl-slowpoke", cpu as usize, None);
    }
    let (c, _) = jack::Client::new("xrl-slowpoke", jack::ClientOptions::NO_START_SERVER)
        .expect("slow client opens");
    let _port = c
        .register_port("out", jack::AudioOut::default())
        .expect("port");
    let (tx, mut rx) = rtrb::RingBuffer::new(1024);
    let h = Slow {
        n: 0,
        every: (RATE / FRAMES) as u64,
        spin: period() * var(SPIN_ENV).unwrap_or(3),
        took: tx,
    };
    let _active = c.activate_async((), h).expect("slow client activates");
    let mut f = std::fs::File::create(out).unwrap();
    writeln!(f, "ready").unwrap();
    loop {
        while let Ok(ns) = rx.pop() {
            writeln!(f, "{ns}").unwrap();
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A child killed on drop.
struct Kid(Child);

impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_quiet(mut c: Command) -> Kid {
    Kid(c
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap())
}

/// The slow client under pw-jack, and the file it writes its callback times to.
fn slow_client(server: &PipeWireServer, dir: &std::path::Path) -> (Kid, std::path::PathBuf) {
    slow_client_with(server, dir, &[])
}

/// [`slow_client`] with more of its variables (`SPIN_ENV`, `CPU_ENV`).
fn slow_client_with(
    server: &PipeWireServer,
    dir: &std::path::Path,
    vars: &[(&str, &str)],
) -> (Kid, std::path::PathBuf) {
    let out = dir.join("slow.txt");
    let mut c = server.command(&std::env::current_exe().unwrap());
    c.args(["--exact", "slow_client_process", "--ignored", "--nocapture"])
        .env(SLOW_ENV, &out)
        .envs(vars.iter().copied());
    let kid = spawn_quiet(c);
    let t = Instant::now();
    while !std::fs::read_to_string(&out).is_ok_and(|s| s.starts_with("ready")) {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the slow client did not start\n{}",
            server.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    (kid, out)
}

fn measured(out: &std::path::Path) -> Vec<u64> {
    std::fs::read_to_string(out)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.parse().ok())
        .collect()
}

fn metro(server: &PipeWireServer, name: &str) -> Option<Kid> {
    let prog = common::which("jack_metro")?;
    let mut c = server.command(&prog);
    c.args(["-b", "120", "-n", name]);
    Some(spawn_quiet(c))
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

#[test]
fn the_profiler_names_the_slow_node_for_each_stall_with_its_own_busy_time() {
    let _one = common::one_at_a_time();
    let Some(server) = require_pipewire(RATE, FRAMES) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let innocents: Vec<Kid> = ["xrl-metro-a", "xrl-metro-b"]
        .iter()
        .filter_map(|n| metro(&server, n))
        .collect();
    assert!(
        common::require(
            innocents.len() == 2,
            "jack_metro (jackd2's example clients)"
        ),
        "jack_metro missing"
    );
    let (slow, took) = slow_client(&server, dir.path());
    let out = dir.path().join("w.json");
    // `watch` itself runs without pw-jack: it speaks to the daemon, not to its JACK graph.
    let mut c = Command::new(bin());
    for (k, v) in server.client_env() {
        c.env(k, v);
    }
    let o = c
        .args(["watch", "--server", "pipewire", "--duration", "6s", "-o"])
        .arg(&out)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    drop(slow);
    drop(innocents);
    assert_eq!(o.status.code(), Some(0), "{}\n{}", show(&o), server.log());
    let j = read_json(&out);
    let r = &j["results"];
    assert_eq!(r["server"]["kind"], "pipewire");
    assert_eq!(u(&r["server"]["frames"]), FRAMES as u64);
    let xruns = r["xruns"].as_array().unwrap();
    let late = |x: &serde_json::Value| x["late"]["name"].as_str().unwrap_or("").to_string();
    // Every stall of the slow client (one every `every` cycles) is an xrun named for it:
    // a stall blamed on an innocent node would leave a gap of two seconds in this series.
    let cycle_of = |x: &serde_json::Value| u(&x["cycle"]);
    let stalls: Vec<u64> = xruns
        .iter()
        .filter(|x| late(x) == "xrl-slowpoke")
        .map(cycle_of)
        .collect();
    let named = stalls.len();
    let every = (RATE / FRAMES) as u64;
    let total = u(&r["headroom"]["cycles"]);
    let mut edges = vec![0];
    edges.extend(&stalls);
    edges.push(total);
    assert!(
        named >= 3
            && edges
                .windows(2)
                .all(|w| w[1].abs_diff(w[0]) <= every * 3 / 2),
        "the slow node named at cycles {stalls:?} of {total}\n{}",
        show(&o)
    );
    // An innocent node is named only for a cycle of its own (a VM stall keeps its thread
    // off the CPU: it woke or finished late): never often.
    let others: Vec<u64> = xruns
        .iter()
        .filter(|x| late(x) != "xrl-slowpoke")
        .map(cycle_of)
        .collect();
    assert!(
        others.len() <= named,
        "{} xruns name another node than the slow one (cycles {others:?})\n{}",
        others.len(),
        show(&o)
    );
    // Its busy time in those xruns is what it measured itself, within 10 % (medians).
    let own = median(measured(&took));
    let seen: Vec<u64> = xruns
        .iter()
        .filter(|x| late(x) == "xrl-slowpoke" && u(&x["late"]["busy_ns"]) > 0)
        .map(|x| u(&x["late"]["busy_ns"]))
        .collect();
    assert!(seen.len() >= 3, "{}", show(&o));
    let med = median(seen);
    assert!(
        med.abs_diff(own) * 10 <= own,
        "profiler busy {med} ns, the client's own {own} ns\n{}",
        show(&o)
    );
    // Every cycle is in the near-miss histogram; the innocent nodes have timings.
    let h = &r["headroom"];
    assert!(u(&h["cycles"]) > 500, "{h}");
    assert!(u(&h["missed"]) >= named as u64, "{h}");
    let names: Vec<&str> = r["clients"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert!(
        names.contains(&"xrl-metro-a") && names.contains(&"xrl-metro-b"),
        "{names:?}"
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("'xrl-slowpoke' ran long"), "{stdout}");
}

/// `pw-jack xrunlab watch --server jack`: PipeWire's libjack fires no xrun callback for a
/// client late in the graph (30 xruns in the profiler, none through libjack, once), so
/// the JACK adapter would call this session clean. The watch reads the same graph through
/// the profiler instead, names the slow client, and says why in a warning.
#[test]
fn under_pw_jack_a_jack_watch_reads_the_profiler_and_names_the_late_client() {
    let _one = common::one_at_a_time();
    let Some(server) = require_pipewire(RATE, FRAMES) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (slow, _) = slow_client(&server, dir.path());
    let out = dir.path().join("w.json");
    let o = server
        .command(&bin())
        .args(["watch", "--server", "jack", "--duration", "4s", "-o"])
        .arg(&out)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    drop(slow);
    assert_eq!(o.status.code(), Some(0), "{}\n{}", show(&o), server.log());
    let j = read_json(&out);
    let named = j["results"]["xruns"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["late"]["name"] == "xrl-slowpoke")
        .count();
    // One stall a second for 4 s: at least two whatever the VM's start-up takes.
    assert!(
        named >= 2,
        "{named} xruns name the slow client\n{}",
        show(&o)
    );
    let warned = j["warnings"].as_array().unwrap().iter().any(|w| {
        w.as_str()
            .is_some_and(|w| w.contains("PipeWire's libjack reports no xrun"))
    });
    assert!(warned, "{}", j["warnings"]);
}

/// `watch --server pipewire` on the private daemon, `secs` long, with `args`: its result
/// and output.
fn pw_watch(
    server: &PipeWireServer,
    secs: u32,
    args: &[&str],
) -> (serde_json::Value, std::process::Output) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("w.json");
    let mut c = Command::new(bin());
    for (k, v) in server.client_env() {
        c.env(k, v);
    }
    let o = c
        .args([
            "watch",
            "--server",
            "pipewire",
            "--duration",
            &format!("{secs}s"),
        ])
        .args(args)
        .arg("-o")
        .arg(&out)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}\n{}", show(&o), server.log());
    (read_json(&out), o)
}

#[test]
fn forensics_names_a_fifo_burst_on_the_slow_nodes_cpu() {
    let _one = common::one_at_a_time();
    let Some(_t) = common::trace::setup() else {
        return;
    };
    let Some(server) = require_pipewire(RATE, FRAMES) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // The node itself is quick, its data thread on CPU 1 at PipeWire's FIFO 88: a FIFO 90
    // thread there keeps it off its CPU for 3 periods once a second.
    let (slow, _) = slow_client_with(&server, dir.path(), &[(SPIN_ENV, "0"), (CPU_ENV, "1")]);
    let burst = common::trace::Culprit::start(
        "xrl-burst",
        1,
        Some(90),
        period() * 3,
        Duration::from_millis(1000),
    );
    let (j, o) = pw_watch(&server, 5, &["--forensics"]);
    let spans = burst.stop();
    drop(slow);
    let (caused, named) = common::trace::burst_xruns(
        &j,
        &spans,
        |x| x["late"]["name"] == "xrl-slowpoke",
        "xrl-burst",
    );
    assert!(
        caused.len() >= 2,
        "{} bursts\n{}{}",
        spans.len(),
        common::trace::xrun_table(&j),
        show(&o)
    );
    eprintln!(
        "the burst named in {named} of {} xruns it caused",
        caused.len()
    );
    // The goal is 90 %; a 5 s run causes about 4 such xruns, so one VM stall
    // landing in a burst's window would fail that bound by chance (1 run in 7 here): three
    // in four over a run, the rate over many runs goes in the closing note.
    assert!(
        named * 4 >= caused.len() * 3,
        "the burst named in {named} of {} xruns\n{}{}",
        caused.len(),
        common::trace::xrun_table(&j),
        show(&o)
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("xrl-burst"), "{stdout}");
}

/// The shipped unit with the drop-in its comment shows reaches a user session's PipeWire
/// through that user's runtime directory; the unit alone, as root, does not.
#[test]
fn the_services_drop_in_reaches_a_user_sessions_pipewire() {
    let _one = common::one_at_a_time();
    if !common::require(common::is_root(), "root (the watch runs as another user)") {
        return;
    }
    let user = common::service::nobody();
    let s = PipeWireServer::start_as((user.1, user.2), RATE, FRAMES);
    if !common::require(
        s.is_ok(),
        &format!("pipewire as {}: {:?}", user.0, s.as_ref().err()),
    ) {
        return;
    }
    let server = s.unwrap();
    common::service::drop_in_reaches(&user, &server.runtime_dir, "pipewire");
}
