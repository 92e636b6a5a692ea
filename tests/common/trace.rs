//! What the `--forensics` tests share (docs/methods.md "Forensics"): tracefs mounted
//! for a test's duration when it was not, one test at a time, and an injected culprit — a
//! named thread pinned to a CPU that busy-loops in bursts — whose spans the windows are
//! matched against.

use serde_json::Value;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The tests of one binary take turns: they share CPU 1 and tracefs.
pub static SERIAL: Mutex<()> = Mutex::new(());

pub const TRACEFS: &str = "/sys/kernel/tracing";

pub fn tracefs_mounted() -> bool {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .any(|l| l.contains(" - tracefs ") && l.contains(&format!(" {TRACEFS} ")))
}

/// Mounted for one test when it was not, unmounted after it.
pub struct Mount(bool);

impl Mount {
    pub fn ensure() -> Option<Mount> {
        if tracefs_mounted() {
            return Some(Mount(false));
        }
        let ok = std::process::Command::new("mount")
            .args(["-t", "tracefs", "nodev", TRACEFS])
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(Mount(true))
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        // A child that just exited may still be releasing its files: retry a while.
        for _ in 0..30 {
            if !self.0 || !tracefs_mounted() {
                return;
            }
            let _ = std::process::Command::new("umount")
                .arg(TRACEFS)
                .stderr(std::process::Stdio::null())
                .status();
            std::thread::sleep(Duration::from_millis(100));
        }
        // Still busy (a reader that outlives its test holds a file open): detach it now, so
        // the machine is left as it was found; the kernel frees it when the last file closes.
        if tracefs_mounted() {
            let _ = std::process::Command::new("umount")
                .args(["-l", TRACEFS])
                .status();
        }
    }
}

/// One test's hold on tracefs: the mount it made (if any) and its turn.
pub struct Traced {
    // Fields drop in this order: the mount is undone before the turn passes on. The other
    // way round, the next test found tracefs still mounted, took it as not its own, and
    // the unmount then removed the trace instance it was configuring (buffer_size_kb: no
    // such file, on a fresh machine where the first test mounts tracefs).
    _mount: Mount,
    _turn: std::sync::MutexGuard<'static, ()>,
}

/// The lock, tracefs mounted, and two CPUs — or None (skip) with the reason printed; under
/// CI a missing prerequisite fails.
pub fn setup() -> Option<Traced> {
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let fs = std::fs::read_to_string("/proc/filesystems").unwrap_or_default();
    if !super::require(
        super::is_root() && fs.contains("tracefs"),
        "root and a kernel with tracefs",
    ) {
        return None;
    }
    if !super::require(
        std::thread::available_parallelism().map_or(0, |n| n.get()) >= 2,
        "two CPUs",
    ) {
        return None;
    }
    let m = Mount::ensure();
    if !super::require(m.is_some(), "tracefs mounted (mount -t tracefs failed)") {
        return None;
    }
    Some(Traced {
        _mount: m?,
        _turn: guard,
    })
}

/// `xrunlab-PID…` instances whose process is gone: left behind. (Another xrunlab tracing at
/// the same time on a shared machine keeps its own, which is not ours to judge.)
pub fn our_instances() -> Vec<String> {
    std::fs::read_dir(Path::new(TRACEFS).join("instances"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| {
                    n.strip_prefix("xrunlab-")
                        .and_then(|r| r.split('-').next()?.parse::<i32>().ok())
                        .is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists())
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The instance a process of that pid traces into.
pub fn instance_of(pid: u32) -> std::path::PathBuf {
    Path::new(TRACEFS).join(format!("instances/xrunlab-{pid}"))
}

pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is writable.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Name the calling thread, pin it to `cpu` and, with `fifo`, make it SCHED_FIFO at that
/// priority.
pub fn pin_self(name: &std::ffi::CStr, cpu: usize, fifo: Option<i32>) {
    // SAFETY: plain syscalls on the calling thread with valid arguments.
    unsafe {
        libc::prctl(libc::PR_SET_NAME, name.as_ptr());
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        assert_eq!(
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
            0
        );
        if let Some(p) = fifo {
            let sp = libc::sched_param { sched_priority: p };
            assert_eq!(libc::sched_setscheduler(0, libc::SCHED_FIFO, &sp), 0);
        }
    }
}

/// A thread named `name`, pinned to `cpu`, that busy-loops for `burst` every `every`
/// (continuously when `every` is zero) under `fifo` priority (else SCHED_OTHER), recording
/// each burst's span.
pub struct Culprit {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<Vec<(u64, u64)>>>,
}

impl Culprit {
    pub fn start(
        name: &str,
        cpu: usize,
        fifo: Option<i32>,
        burst: Duration,
        every: Duration,
    ) -> Culprit {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let name = std::ffi::CString::new(name).unwrap();
        let handle = std::thread::spawn(move || {
            pin_self(&name, cpu, fifo);
            let mut spans = Vec::new();
            while !s.load(Ordering::Relaxed) {
                let t0 = now_ns();
                let until = t0 + burst.as_nanos() as u64;
                while now_ns() < until && (every.is_zero() || !s.load(Ordering::Relaxed)) {
                    std::hint::spin_loop();
                }
                spans.push((t0, now_ns()));
                if !every.is_zero() {
                    std::thread::sleep(every);
                }
            }
            spans
        });
        Culprit {
            stop,
            handle: Some(handle),
        }
    }

    /// Stop it; the spans of its bursts.
    pub fn stop(mut self) -> Vec<(u64, u64)> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.take().unwrap().join().unwrap()
    }
}

impl Drop for Culprit {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// The windows (from `t_ideal_ns` to `end_key`) that overlapped a burst span, and how many of
/// them name `name` top culprit with a time within 20 % of the burst's length.
pub fn burst_hits<'a>(
    windows: &[&'a Value],
    spans: &[(u64, u64)],
    end_key: &str,
    name: &str,
    burst: Duration,
) -> (Vec<&'a Value>, usize) {
    let hit: Vec<&Value> = windows
        .iter()
        .copied()
        .filter(|w| {
            let (a, b) = (super::u(&w["t_ideal_ns"]), super::u(&w[end_key]));
            spans.iter().any(|&(s, e)| s < b && a < e)
        })
        .collect();
    let named = hit
        .iter()
        .filter(|w| {
            let top = &w["top"][0];
            let ns = super::u(&top["ns"]) as f64;
            top["culprit"]["name"] == name
                && (ns - burst.as_nanos() as f64).abs() <= 0.2 * burst.as_nanos() as f64
        })
        .count();
    (hit, named)
}

/// Of a watch result `j`, the xruns a burst caused — those whose late client passes `slow`
/// and whose forensic window (waking to end) overlapped one of the burst's `spans` — and how
/// many of them name `name` as the culprit of the late client's CPU. Not "every xrun naming
/// the slow client": the cycle after a burst can find it a little late for reasons of its
/// own (the hypervisor), and that is no xrun of the burst's.
pub fn burst_xruns<'a>(
    j: &'a Value,
    spans: &[(u64, u64)],
    slow: impl Fn(&Value) -> bool,
    name: &str,
) -> (Vec<&'a Value>, usize) {
    static NONE: Vec<Value> = Vec::new();
    let xruns = j["results"]["xruns"].as_array().unwrap_or(&NONE);
    let windows = j["results"]["forensics"]["windows"]
        .as_array()
        .unwrap_or(&NONE);
    let caused: Vec<&Value> = xruns
        .iter()
        .filter(|x| slow(x))
        .filter(|x| {
            windows.iter().any(|w| {
                w["id"] == x["index"] && {
                    let (a, b) = (super::u(&w["t_ideal_ns"]), super::u(&w["end_ns"]));
                    spans.iter().any(|&(s, e)| s < b && a < e)
                }
            })
        })
        .collect();
    let named = caused
        .iter()
        .filter(|x| x["late"]["culprit"].as_str().unwrap_or("").contains(name))
        .count();
    (caused, named)
}

/// One line per xrun of a watch result (the late client, its times, the culprit): what a
/// failing forensics test shows.
pub fn xrun_table(j: &Value) -> String {
    let us = |v: &Value| v.as_u64().unwrap_or(0) / 1000;
    let mut s = String::new();
    for x in j["results"]["xruns"].as_array().into_iter().flatten() {
        let l = &x["late"];
        s += &format!(
            "xrun {} at {} ms: late {:?} tid {} excess {} µs woke_late {} wake {} µs run {} µs busy {} µs culprit {:?} {} µs\n",
            x["index"],
            super::u(&x["at_ns"]) / 1_000_000,
            l["name"].as_str(),
            l["tid"],
            us(&l["excess_ns"]),
            l["woke_late"],
            us(&l["wake_delay_ns"]),
            us(&l["run_ns"]),
            us(&l["busy_ns"]),
            l["culprit"].as_str(),
            us(&l["culprit_ns"]),
        );
    }
    s
}
