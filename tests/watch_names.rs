//! `watch --forensics` names each client thread by its JACK client name, with its process
//! beside it, on a private jackd2 dummy server: two Python clients (python3-jack-client) in
//! one process, a third in a process of its own that spins 3 periods twice a second, and
//! two `jalv` instances — names with spaces, every process's comm alike within a program.
//! About 8 s (4 s of watching).

mod common;

use common::jack_clients::{has_plugin, jalv, watch_forensics, Kid};
use common::servers::{require_jackd, AudioServer, JackdServer};
use common::{require, show};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

const RATE: u32 = 48000;
const FRAMES: u32 = 256;
/// Debian's interpreter, where python3-jack-client is installed (scripts/install-deps).
const PYTHON: &str = "/usr/bin/python3";
/// An LV2 plugin of Debian's mda-lv2; jalv runs one per process.
const PLUGIN: &str = "http://drobilla.net/plugins/mda/Delay";

/// Opens one client per name after the first argument (`every`: spin 3 periods in every
/// `every`-th cycle of each, 0 never), says "ready", and closes them at end of stdin.
const CLIENTS_PY: &str = r#"
import jack, sys, time
every = int(sys.argv[1])
period = 256 / 48000
cs = []
for name in sys.argv[2:]:
    c = jack.Client(name, no_start_server=True)
    n = [0]
    def process(frames, n=n):
        n[0] += 1
        if every and n[0] % every == 0:
            t = time.perf_counter()
            while time.perf_counter() - t < 3 * period:
                pass
    c.set_process_callback(process)
    c.activate()
    cs.append(c)
print("ready", flush=True)
sys.stdin.read()
for c in cs:
    c.deactivate()
    c.close()
"#;

fn python_clients(server: &JackdServer, every: u32, names: &[&str]) -> Kid {
    let mut c = Command::new(PYTHON);
    c.args(["-c", CLIENTS_PY, &every.to_string()]).args(names);
    for (k, v) in server.client_env() {
        c.env(k, v);
    }
    let mut kid = Kid(c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("python3 starts"));
    let mut line = String::new();
    BufReader::new(kid.0.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(
        line.trim(),
        "ready",
        "python clients {names:?} did not start"
    );
    kid
}

fn python_has_jack() -> bool {
    Command::new(PYTHON)
        .args(["-c", "import jack"])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn each_client_thread_is_named_by_its_jack_name_with_its_process_beside_it() {
    let Some(_t) = common::trace::setup() else {
        return;
    };
    if !require(
        python_has_jack(),
        "python3-jack-client (apt install python3-jack-client)",
    ) || !require(common::which("jalv").is_some(), "jalv (apt install jalv)")
    {
        return;
    }
    if !require(
        has_plugin(PLUGIN, None),
        "mda-lv2's Delay for jalv (apt install mda-lv2)",
    ) {
        return;
    }
    let Some(server) = require_jackd(RATE, FRAMES) else {
        return;
    };
    let pair = python_clients(&server, 0, &["py one", "py two"]);
    // Twice a second, 3 periods long.
    let spinner = python_clients(&server, RATE / FRAMES / 2, &["spin three"]);
    let jalvs = [
        jalv(&server, "jalv a", PLUGIN, &[], &[]),
        jalv(&server, "jalv b", PLUGIN, &[], &[]),
    ];
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("w.json");
    let server_arg = format!("jack:{}", server.name);
    let (o, r) = watch_forensics(&server, &server_arg, &[], "4s", &out);
    let r = &r;
    let clients = r["clients"].as_array().unwrap();
    let client = |name: &str| {
        clients
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no client '{name}' in {}", r["clients"]))
    };
    // Each by its own JACK name and semaphore, the process beside it: the two of one
    // process each get their own thread.
    let expect = [
        ("py one", "python3", pair.pid()),
        ("py two", "python3", pair.pid()),
        ("spin three", "python3", spinner.pid()),
        ("jalv a", "jalv", jalvs[0].pid()),
        ("jalv b", "jalv", jalvs[1].pid()),
    ];
    for (name, process, pid) in expect {
        let c = client(name);
        assert_eq!(c["named_by"], "semaphore", "{c}");
        assert_eq!(c["process"], process, "{c}");
        assert_eq!(c["pid"].as_i64(), Some(pid), "{c}");
    }
    assert_ne!(client("py one")["tid"], client("py two")["tid"]);
    // Only this server's session: its one jackd and these clients, never the threads of
    // another jackd running beside it (other tests, other users).
    let ours: Vec<i64> = expect.iter().map(|e| e.2).collect();
    let mut servers: Vec<i64> = clients
        .iter()
        .filter(|c| c["name"].as_str().unwrap_or("").starts_with("server:"))
        .map(|c| c["pid"].as_i64().unwrap())
        .collect();
    servers.sort_unstable();
    servers.dedup();
    assert_eq!(servers.len(), 1, "{}", r["clients"]);
    for c in clients {
        let pid = c["pid"].as_i64().unwrap();
        assert!(ours.contains(&pid) || servers.contains(&pid), "{c}");
    }
    // The spinner is named late by its client name, with its process, in the result and
    // in the summary; no late client is a bare process name.
    let xruns = r["xruns"].as_array().unwrap();
    let spun = xruns
        .iter()
        .filter(|x| {
            x["late"]["name"] == "spin three" && x["late"]["pid"].as_i64() == Some(spinner.pid())
        })
        .count();
    assert!(spun >= 2, "{}\n{}", r["xruns"], show(&o));
    for x in xruns.iter().filter(|x| x["late"].is_object()) {
        let n = x["late"]["name"].as_str().unwrap();
        assert!(
            !n.starts_with("python3") && !n.starts_with("jalv/") && n != "jalv",
            "{x}"
        );
    }
    let stdout = String::from_utf8_lossy(&o.stdout);
    let words = stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains(&format!("'spin three' (python3[{}])", spinner.pid())),
        "{stdout}"
    );
    // Named live too (on stderr, with the xrun lines), a moment after the xrun's own line,
    // from the trace read so far: the spinner stalls twice a second, and a look is taken
    // every second at most.
    let stderr = String::from_utf8_lossy(&o.stderr);
    let live = stderr
        .lines()
        .filter(|l| l.trim_start().starts_with("xrun ") && l.contains(": late client "))
        .collect::<Vec<_>>();
    assert!(
        live.iter()
            .any(|l| l.contains(&format!("'spin three' (python3[{}])", spinner.pid()))),
        "no live line names the spinner: {live:?}\n{stderr}"
    );
}
