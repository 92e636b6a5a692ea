//! Real JACK client programs for the watch tests: `jalv` hosting one LV2 plugin per process,
//! closed through their stdin.

use super::servers::AudioServer;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A client program, closed by the end of its stdin (a client killed outright just before
/// its server stops can make jackd die of SIGPIPE).
pub struct Kid(pub Child);

impl Kid {
    pub fn pid(&self) -> i64 {
        self.0.id() as i64
    }
}

impl Drop for Kid {
    fn drop(&mut self) {
        drop(self.0.stdin.take());
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(3) {
            if matches!(self.0.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `jalv -n NAME ARGS… PLUGIN` with `env` beside the server's (under its wrapper: pw-jack),
/// waited for until its client's process thread runs.
pub fn jalv(
    server: &dyn AudioServer,
    name: &str,
    plugin: &str,
    args: &[&str],
    env: &[(&str, &std::path::Path)],
) -> Kid {
    // Under pw-jack on PipeWire.
    let mut c = match server.wrapper() {
        Some(w) => {
            let mut c = Command::new(w);
            c.arg("jalv");
            c
        }
        None => Command::new("jalv"),
    };
    c.args(["-n", name]).args(args).arg(plugin);
    for (k, v) in server.client_env() {
        c.env(k, v);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    let kid = Kid(c
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("jalv starts"));
    let t = Instant::now();
    while !has_rt_thread(kid.0.id() as i32) {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "jalv '{name}' never ran"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    kid
}

pub fn has_rt_thread(pid: i32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten().any(|t| {
                let tid: i32 = t.file_name().to_str().unwrap().parse().unwrap();
                // SAFETY: reads a thread's policy; no memory passed. PipeWire's threads
                // carry SCHED_RESET_ON_FORK beside it.
                let p = unsafe { libc::sched_getscheduler(tid) };
                p & !libc::SCHED_RESET_ON_FORK == libc::SCHED_FIFO
            })
        })
        .unwrap_or(false)
}

/// Whether lv2ls (with `lv2_path` as LV2_PATH, else the default) lists `uri`.
pub fn has_plugin(uri: &str, lv2_path: Option<&std::path::Path>) -> bool {
    let mut c = Command::new("lv2ls");
    if let Some(p) = lv2_path {
        c.env("LV2_PATH", p);
    }
    c.output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).lines().any(|l| l == uri))
}

/// `xrunlab watch --server SERVER_ARG --forensics ARGS… --duration D -o OUT` as a client of
/// `server`, which must exit 0: its output, and the result document's `results`.
pub fn watch_forensics(
    server: &dyn AudioServer,
    server_arg: &str,
    args: &[&str],
    duration: &str,
    out: &std::path::Path,
) -> (std::process::Output, serde_json::Value) {
    let o = server
        .command(&super::bin())
        .args(["watch", "--server", server_arg, "--forensics"])
        .args(args)
        .args(["--duration", duration, "-o"])
        .arg(out)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", super::show(&o));
    let r = super::read_json(out)["results"].clone();
    (o, r)
}
