//! What a hostile (or merely unlucky) user types: mistakes are refused with exit 2 before
//! anything is measured, an input is never overwritten by an output, and a late write failure
//! does not lose the result that was printed (docs/ARCHITECTURE.md §1).

mod common;
use common::signals::{await_handler, finish_within, wait_until};
use common::{require, xrunlab};
use std::time::{Duration, Instant};

/// Run xrunlab with `args`; return (exit code, stderr, wall time).
fn run(args: &[&str]) -> (i32, String, Duration) {
    let t0 = Instant::now();
    let out = xrunlab()
        .args(args)
        .timeout(Duration::from_secs(45))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        t0.elapsed(),
    )
}

/// Exit 2 within `bound`, with `needle` in the message.
fn refused_fast(args: &[&str], needle: &str, bound: Duration) {
    let (rc, err, took) = run(args);
    assert_eq!(rc, 2, "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: '{needle}' not in: {err}");
    assert!(took < bound, "{args:?} took {took:?}");
}

// --- unbounded ranges -------------------------------------------------------------------

/// Ranges that once expanded billions of values (or wrapped a u32 and never ended): each is
/// refused with exit 2, naming its option, long before any expansion could finish.
#[test]
fn huge_ranges_are_refused_before_expanding() {
    let cases: [(&[&str], &str); 4] = [
        (
            &["rtl", "--model", "--buffers", "1..2147483648"],
            "--buffers",
        ),
        (
            &["load", "--driver", "sim", "--buffers", "16..4294967295"],
            "--buffers",
        ),
        (
            &["load", "--driver", "sim", "--tracks", "1..4294967295"],
            "--tracks",
        ),
        (
            &["latency", "--duration", "60s", "--cpus", "0-4294967295"],
            "CPU",
        ),
    ];
    for (args, option) in cases {
        refused_fast(args, option, Duration::from_secs(20));
    }
}

/// CPU lists beyond any machine once panicked (capacity overflow) or aborted (a 34 GB
/// allocation); every option taking one names the CPU and the ones this process may use.
#[test]
fn cpu_lists_beyond_the_machine_name_the_allowed_cpus() {
    // The child inherits this process's affinity mask.
    use xrunlab::rt::affinity::{allowed_cpus, format_cpu_list};
    let allowed = format!("(allowed: {})", format_cpu_list(&allowed_cpus().unwrap()));
    let cases: [&[&str]; 4] = [
        &["latency", "--duration", "60s", "--cpus"],
        &[
            "run",
            "--driver",
            "sim",
            "--duration",
            "60s",
            "--stress",
            "cpu",
            "--stress-cpus",
        ],
        &[
            "stress",
            "--duration",
            "60s",
            "--compete",
            "voip",
            "--compete-cpus",
        ],
        &["latencytest", "--phase-duration", "60s", "--stress-cpus"],
    ];
    for args in cases {
        for (list, cpu) in [
            (
                "0-18446744073709551615",
                "CPU 18446744073709551615 is not available",
            ),
            ("0-4294967295", "CPU 4294967295 is not available"),
        ] {
            let mut a = args.to_vec();
            a.push(list);
            let (rc, err, took) = run(&a);
            assert_eq!(rc, 2, "{a:?}: {err}");
            assert!(err.contains(cpu), "{a:?}: {err}");
            assert!(err.contains(&allowed), "{a:?}: {err}");
            assert!(took < BEFORE_MEASURING, "{a:?} took {took:?}");
        }
    }
}

// --- outputs checked before measuring ---------------------------------------------------

/// Far below the 60 s every measuring command here is asked for, and far above what a
/// loaded 2-core CI machine needs to start a debug binary and refuse: measuring would not
/// fit, a slow start would.
const BEFORE_MEASURING: Duration = Duration::from_secs(20);

#[test]
fn latency_missing_output_directory_is_refused_before_measuring() {
    refused_fast(
        &[
            "latency",
            "--duration",
            "60s",
            "-o",
            "/nonexistent-dir/x.json",
        ],
        "/nonexistent-dir/x.json",
        BEFORE_MEASURING,
    );
}

#[test]
fn latency_output_that_is_a_directory_is_refused_before_measuring() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    refused_fast(
        &["latency", "--duration", "60s", "-o", d],
        d,
        BEFORE_MEASURING,
    );
    refused_fast(
        &["latency", "--duration", "60s", "--histogram", d],
        "--histogram",
        BEFORE_MEASURING,
    );
}

#[test]
fn run_sim_missing_output_directory_is_refused_before_measuring() {
    refused_fast(
        &[
            "run",
            "--driver",
            "sim",
            "--duration",
            "60s",
            "-o",
            "/nonexistent-dir/x.json",
        ],
        "/nonexistent-dir/x.json",
        BEFORE_MEASURING,
    );
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    refused_fast(
        &["run", "--driver", "sim", "--duration", "60s", "-o", d],
        d,
        BEFORE_MEASURING,
    );
}

#[test]
fn stress_and_rtl_missing_output_directory_is_refused_before_measuring() {
    refused_fast(
        &[
            "stress",
            "--duration",
            "60s",
            "-o",
            "/nonexistent-dir/x.json",
        ],
        "/nonexistent-dir/x.json",
        BEFORE_MEASURING,
    );
    refused_fast(
        &["rtl", "--duration", "60s", "-o", "/nonexistent-dir/x.json"],
        "/nonexistent-dir/x.json",
        BEFORE_MEASURING,
    );
}

#[test]
fn output_inside_a_file_is_refused_with_the_right_reason() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("plain");
    std::fs::write(&f, "x").unwrap();
    let o = f.join("x.json");
    refused_fast(
        &["latency", "--duration", "60s", "-o", o.to_str().unwrap()],
        "is not a directory",
        BEFORE_MEASURING,
    );
}

#[test]
fn late_write_failure_still_prints_the_result_and_exits_3() {
    if !require(
        std::path::Path::new("/dev/full").exists(),
        "/dev/full (a device whose writes fail with ENOSPC)",
    ) {
        return;
    }
    let args = [
        "run",
        "--driver",
        "sim",
        "--duration",
        "1s",
        "-o",
        "/dev/full",
    ];
    let out = xrunlab().args(args).arg("--json").output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(doc["kind"], "run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cycles"), "summary lost: {err}");
    assert!(
        err.contains("/dev/full") && err.contains("not saved"),
        "{err}"
    );
    let out = xrunlab().args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stdout).contains("cycles"));
}

// --- bounded inputs -----------------------------------------------------------------------

fn mkfifo(p: &std::path::Path) {
    let c = std::ffi::CString::new(s(p)).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// `report /dev/zero` and a suite directory holding a result linked to /dev/zero read until
/// the OOM killer fired, and a FIFO no one writes blocked for ever. Every reader of a file
/// the user names refuses what is not a regular file, or is larger than its kind can be,
/// with exit 2 naming why, before reading it.
#[test]
fn inputs_that_are_not_files_or_too_large_are_refused_before_reading() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let fifo = t.join("fifo.json");
    mkfifo(&fifo);
    let zero = t.join("zero.json");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    // Beyond every kind's cap (a cyclictest file's is the largest); sparse, it takes no disk.
    let huge = t.join("huge.json");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(xrunlab::common::input::CYCLICTEST_MAX_BYTES + 1)
        .unwrap();
    let good = format!(
        "{}/tests/fixtures/verdict/latency-stress.json",
        env!("CARGO_MANIFEST_DIR")
    );
    for (bad, why) in [
        (s(&fifo), "is a FIFO"),
        (s(&zero), "is a character device (the symlink's target)"),
        ("/dev/zero", "is a character device"),
        (s(&huge), "more than a"),
    ] {
        let cases: [&[&str]; 8] = [
            &["report", bad],
            &["compare", bad, &good],
            &["verdict", bad],
            &["verdict", &good, "--cost", bad],
            &["predict", "--latency", bad, "--load-pct", "50"],
            &["report", &good, "--manifest", bad],
            &[
                "load",
                "--driver",
                "sim",
                "--duration",
                "1s",
                "--resume",
                bad,
            ],
            &["import", bad],
        ];
        for args in cases {
            refused_fast(args, why, Duration::from_secs(30));
        }
    }
    refused_fast(&["import", s(t)], "is a directory", Duration::from_secs(30));

    // A suite directory whose manifest lists a result that is a link to /dev/zero.
    let suite = t.join("suite");
    std::fs::create_dir(&suite).unwrap();
    std::os::unix::fs::symlink("/dev/zero", suite.join("01-latency.json")).unwrap();
    std::fs::write(
        suite.join("manifest.json"),
        common::manifest_listing(&["01-latency.json"]),
    )
    .unwrap();
    refused_fast(
        &["verdict", s(&suite)],
        "character device",
        Duration::from_secs(30),
    );
    // `report DIR` reads a suite directory as `verdict DIR` does, and refuses the same.
    refused_fast(
        &["report", s(&suite)],
        "character device",
        Duration::from_secs(30),
    );
    refused_fast(
        &["compare", s(&suite), s(&suite)],
        "character device",
        Duration::from_secs(30),
    );
}

/// `check --root` reads a fixture tree: a FIFO or a device in it is a file it cannot read,
/// not a hang or an allocation without end.
#[test]
fn check_of_a_fixture_tree_with_a_fifo_and_a_device_ends() {
    let tmp = tempfile::tempdir().unwrap();
    let proc_ = tmp.path().join("proc");
    std::fs::create_dir(&proc_).unwrap();
    mkfifo(&proc_.join("interrupts"));
    std::os::unix::fs::symlink("/dev/zero", proc_.join("cpuinfo")).unwrap();
    let (rc, err, _) = run(&["check", "--root", s(tmp.path()), "-q"]);
    assert!(rc == 0 || rc == 1, "exit {rc}: {err}");
}

/// `load --driver sim --plugins burn(10%) --rate 0` panicked (burn divides its share of a
/// period by the rate when it is created, before the rate was checked).
#[test]
fn a_rate_of_0_is_refused_before_any_plugin_is_made() {
    for args in [
        &[
            "load",
            "--driver",
            "sim",
            "--plugins",
            "burn(10%)",
            "--rate",
            "0",
        ][..],
        &["load", "--driver", "sim", "--rate", "0"],
        &["sched", "--rate", "0", "--duration", "1s"],
    ] {
        refused_fast(
            args,
            "--rate 0 is outside 1000..768000 Hz",
            Duration::from_secs(30),
        );
    }
    refused_fast(
        &["sched", "--buffer", "4294967295", "--duration", "1s"],
        "--buffer 4294967295 is outside 1..65536",
        Duration::from_secs(30),
    );
}

/// `--policy deadline:1s/1h` reached the kernel and failed there (exit 3, after the set-up).
/// A period beyond the kernel's bound is refused up front naming the sysctl; two hours are
/// beyond any (the bound is an unsigned int of µs).
#[test]
fn a_deadline_period_beyond_the_kernels_bound_is_refused_up_front() {
    for cmd in ["latency", "run"] {
        refused_fast(
            &[cmd, "--policy", "deadline:1s/2h", "--duration", "1s"],
            "sched_deadline_period_max_us",
            Duration::from_secs(30),
        );
    }
}

/// A relative `--stress-dir` named another directory in the stressors (they run in their
/// own): the disk classes failed at start (exit 3) where the absolute path worked.
#[test]
fn a_relative_stress_dir_works_as_the_absolute_one_does() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("rel")).unwrap();
    let out = xrunlab()
        .current_dir(tmp.path())
        .args([
            "stress",
            "--stress",
            "disk-write",
            "--stress-backend",
            "builtin",
        ])
        .args([
            "--stress-dir",
            "rel",
            "--stress-size",
            "4M",
            "--duration",
            "1s",
            "-q",
        ])
        .timeout(Duration::from_secs(45))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", common::show(&out));
    let left: Vec<_> = std::fs::read_dir(tmp.path().join("rel"))
        .unwrap()
        .flatten()
        .collect();
    assert!(left.is_empty(), "stressor files left: {left:?}");
}

// --- an output never overwrites an input ------------------------------------------------

/// A scratch directory holding a copy of a result fixture as `name`.
fn scratch(name: &str, fixture: &str) -> (tempfile::TempDir, std::path::PathBuf, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(format!(
        "{}/tests/fixtures/{fixture}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let p = dir.path().join(name);
    std::fs::write(&p, &bytes).unwrap();
    (dir, p, bytes)
}

fn s(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn report_refuses_to_overwrite_its_input() {
    let (dir, r, bytes) = scratch("r.json", "results/latency.json");
    refused_fast(&["report", s(&r), "-o", s(&r)], s(&r), BEFORE_MEASURING);
    // Through a symbolic link, and a relative path to the same file.
    let link = dir.path().join("link.html");
    std::os::unix::fs::symlink(&r, &link).unwrap();
    refused_fast(
        &["report", s(&r), "-o", s(&link)],
        "input",
        BEFORE_MEASURING,
    );
    xrunlab()
        .current_dir(dir.path())
        .args(["report", s(&r), "-o", "./r.json"])
        .assert()
        .code(2);
    // The manifest is an input too.
    let m = dir.path().join("m.json");
    std::fs::write(&m, &bytes).unwrap();
    refused_fast(
        &["report", "--manifest", s(&m), s(&r), "-o", s(&m)],
        "--manifest",
        BEFORE_MEASURING,
    );
    assert_eq!(std::fs::read(&r).unwrap(), bytes);
    assert_eq!(std::fs::read(&m).unwrap(), bytes);
}

#[test]
fn compare_refuses_to_overwrite_an_input_even_through_a_hard_link() {
    let (dir, a, bytes) = scratch("a.json", "results/latency.json");
    let b = dir.path().join("b.json");
    std::fs::write(&b, &bytes).unwrap();
    refused_fast(
        &["compare", s(&a), s(&b), "-o", s(&b)],
        s(&b),
        BEFORE_MEASURING,
    );
    let hard = dir.path().join("hard.html");
    std::fs::hard_link(&b, &hard).unwrap();
    refused_fast(
        &["compare", s(&a), s(&b), "-o", s(&hard)],
        "input",
        BEFORE_MEASURING,
    );
    assert_eq!(std::fs::read(&a).unwrap(), bytes);
    assert_eq!(std::fs::read(&b).unwrap(), bytes);
}

#[test]
fn import_refuses_to_overwrite_its_input() {
    let (dir, ct, bytes) = scratch("ct.txt", "cyclictest/sparse-rt-tests-2.7.txt");
    refused_fast(&["import", s(&ct), "-o", s(&ct)], s(&ct), BEFORE_MEASURING);
    let link = dir.path().join("ct.json");
    std::os::unix::fs::symlink("ct.txt", &link).unwrap();
    refused_fast(
        &["import", s(&ct), "-o", s(&link)],
        "input",
        BEFORE_MEASURING,
    );
    assert_eq!(std::fs::read(&ct).unwrap(), bytes);
}

#[test]
fn measuring_commands_refuse_one_file_for_two_outputs() {
    let (dir, h, bytes) = scratch("h.txt", "results/latency.json");
    refused_fast(
        &[
            "latency",
            "--duration",
            "60s",
            "--histogram",
            s(&h),
            "-o",
            s(&h),
        ],
        "--histogram",
        BEFORE_MEASURING,
    );
    let link = dir.path().join("t.json");
    std::os::unix::fs::symlink(&h, &link).unwrap();
    refused_fast(
        &[
            "run",
            "--driver",
            "sim",
            "--duration",
            "60s",
            "--trace",
            s(&h),
            "-o",
            s(&link),
        ],
        "--trace",
        BEFORE_MEASURING,
    );
    // Not yet existing, named two ways.
    let x = dir.path().join("x");
    let x2 = dir.path().join(".").join("x");
    refused_fast(
        &[
            "run",
            "--driver",
            "sim",
            "--duration",
            "60s",
            "--trace",
            s(&x),
            "-o",
            s(&x2),
        ],
        "another output",
        BEFORE_MEASURING,
    );
    assert_eq!(std::fs::read(&h).unwrap(), bytes);
}

#[test]
fn device_outputs_may_be_shared() {
    let out = xrunlab()
        .args(["run", "--driver", "sim", "--duration", "200ms"])
        .args(["--trace", "/dev/null", "-o", "/dev/null", "-q"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn late_histogram_failure_keeps_the_result_and_exits_3() {
    if !require(
        std::path::Path::new("/dev/full").exists(),
        "/dev/full (a device whose writes fail with ENOSPC)",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let o = dir.path().join("lat.json");
    let out = xrunlab()
        .args([
            "latency",
            "--duration",
            "300ms",
            "--histogram",
            "/dev/full",
            "-o",
        ])
        .arg(&o)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("/dev/full"), "{err}");
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&o).unwrap()).unwrap();
    assert_eq!(doc["kind"], "latency");
}

// --- signals ------------------------------------------------------------------------------

/// Signal tests start stressors and real-time-ish loops: they take turns, so that on a
/// 2-core machine one test's load does not stretch another's stop.
static SIGNALS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn signals_turn() -> std::sync::MutexGuard<'static, ()> {
    SIGNALS.lock().unwrap_or_else(|e| e.into_inner())
}

/// No real-time privilege needed, nothing that starves the machine.
const GENTLE: [&str; 4] = ["--policy", "other", "--no-mlock", "-q"];

/// xrunlab `args` as GNU timeout runs its command: in a process group of its own, here with
/// `mark` (KEY=VALUE) in its environment, which every stressor inherits.
fn spawn_marked(args: &[&str], mark: &str) -> std::process::Child {
    use std::os::unix::process::CommandExt;
    let (k, v) = mark.split_once('=').unwrap();
    std::process::Command::new(common::bin())
        .args(args)
        .env(k, v)
        .env_remove("CI")
        .env_remove("XRUNLAB_LOG")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap()
}

fn mark(test: &str) -> String {
    format!("XRUNLAB_HOSTILE_MARK={}-{test}", std::process::id())
}

/// Processes carrying `mark` other than `me`: the stressors.
fn stressors(mark: &str, me: i32) -> Vec<i32> {
    common::pids_with_env(mark)
        .into_iter()
        .filter(|&p| p != me)
        .collect()
}

/// Wait until at least `n` stressors of `child` run, then a little longer so it measures.
fn await_stressors(child: &std::process::Child, mark: &str, n: usize) {
    let me = child.id() as i32;
    assert!(
        wait_until(Duration::from_secs(20), || stressors(mark, me).len() >= n),
        "stressors did not start"
    );
    std::thread::sleep(Duration::from_millis(300));
}

fn kill(pid: i32, sig: i32) {
    // SAFETY: kill(2) of our own child or its process group.
    unsafe { libc::kill(pid, sig) };
}

/// What GNU timeout does when the time is up: the signal to the command, then to the
/// command's whole group (the 50 ms between them keep the kernel from merging the two).
fn signal_like_timeout(child: &std::process::Child, sig: i32) {
    let pid = child.id() as i32;
    kill(pid, sig);
    std::thread::sleep(Duration::from_millis(50));
    kill(-pid, sig);
}

/// Open `fifo` for writing once `child` has it open for reading (a blocking open would wait
/// forever for a child that died first); the writer is blocking again when returned.
fn fifo_writer(fifo: &std::path::Path, child: &mut std::process::Child) -> std::fs::File {
    use std::os::unix::fs::OpenOptionsExt;
    let t = Instant::now();
    loop {
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(fifo)
        {
            Ok(f) => {
                use std::os::fd::AsRawFd;
                // SAFETY: fcntl on a descriptor f owns.
                unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETFL, 0) };
                return f;
            }
            // ENXIO: no reader yet.
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {}
            Err(e) => panic!("{}: {e}", fifo.display()),
        }
        if let Some(s) = child.try_wait().unwrap() {
            panic!("ended ({s:?}) without opening {}", fifo.display());
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "{} never opened",
            fifo.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Nothing carrying `mark` is left and `dir` (the stressors' --stress-dir) is empty.
fn nothing_left(mark: &str, dir: &std::path::Path) {
    assert!(
        wait_until(Duration::from_secs(5), || common::pids_with_env(mark)
            .is_empty()),
        "left behind: {:?}",
        common::pids_with_env(mark)
    );
    let left: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
    assert!(left.is_empty(), "stressor files left: {left:?}");
}

fn status_of(path: &std::path::Path) -> serde_json::Value {
    common::read_json(path)["status"].clone()
}

/// The signalled child exits 3 within 30 s and leaves `out` as an interrupted result.
fn ends_interrupted(child: std::process::Child, out: &std::path::Path) {
    let (status, err) = finish_within(child, Duration::from_secs(30));
    assert_eq!(status.code(), Some(3), "{status:?}: {err}");
    assert_eq!(status_of(out), "interrupted");
}

/// `timeout -s INT T xrunlab run … --stress …` once lost the result 4 times in 10: the second
/// SIGINT (to the group) took the give-up path. Both signals are one request now.
#[test]
fn two_sigints_like_gnu_timeout_keep_the_run_result_and_clean_up() {
    let _t = signals_turn();
    let tmp = tempfile::tempdir().unwrap();
    let (sdir, out) = (tmp.path().join("stress"), tmp.path().join("r.json"));
    std::fs::create_dir(&sdir).unwrap();
    let mark = mark("run2");
    let mut args = vec!["run", "--chain", "burn(10%)", "--duration", "60s"];
    args.extend(["--stress", "cpu", "--stress-backend", "builtin"]);
    args.extend(["--stress-dir", s(&sdir), "-o", s(&out)]);
    args.extend(GENTLE);
    let child = spawn_marked(&args, &mark);
    await_stressors(&child, &mark, 1);
    signal_like_timeout(&child, libc::SIGINT);
    ends_interrupted(child, &out);
    nothing_left(&mark, &sdir);
}

#[test]
fn two_sigterms_like_gnu_timeout_keep_the_latency_result_and_clean_up() {
    let _t = signals_turn();
    let tmp = tempfile::tempdir().unwrap();
    let (sdir, out) = (tmp.path().join("stress"), tmp.path().join("lat.json"));
    std::fs::create_dir(&sdir).unwrap();
    let mark = mark("lat2");
    let mut args = vec!["latency", "--duration", "60s", "--no-dma-latency"];
    args.extend(["--stress", "cpu,proc", "--stress-backend", "builtin"]);
    args.extend(["--stress-dir", s(&sdir), "-o", s(&out)]);
    args.extend(GENTLE);
    let child = spawn_marked(&args, &mark);
    await_stressors(&child, &mark, 2);
    signal_like_timeout(&child, libc::SIGTERM);
    ends_interrupted(child, &out);
    nothing_left(&mark, &sdir);
}

/// A stressor that swaps its log for a FIFO: the stop blocks reading it (the orderly stop
/// has signalled the stressors and collects their output) until the test opens the FIFO
/// for writing. A process stuck in its stop, for exactly as long as the test wants.
const STUCK_LOG: &str = "sh -c 'rm -f out-0.log; mkfifo out-0.log; exec sleep 600'";

/// Start `run` under the stuck-log stressor and send the first SIGINT once its stop is
/// blocked; return the child and the FIFO.
fn run_stuck_in_its_stop(
    sdir: &std::path::Path,
    out: &std::path::Path,
    mark: &str,
) -> (std::process::Child, std::path::PathBuf) {
    let mut args = vec!["run", "--chain", "thru", "--duration", "60s"];
    args.extend([
        "--stress-cmd",
        STUCK_LOG,
        "--stress-dir",
        s(sdir),
        "-o",
        s(out),
    ]);
    args.extend(GENTLE);
    let child = spawn_marked(&args, mark);
    let mut fifo = None;
    let found = wait_until(Duration::from_secs(20), || {
        fifo = std::fs::read_dir(sdir)
            .unwrap()
            .flatten()
            .map(|e| e.path().join("out-0.log"))
            .find(|p| {
                use std::os::unix::fs::FileTypeExt;
                std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_fifo())
            });
        fifo.is_some()
    });
    assert!(found, "the stressor did not make its FIFO");
    std::thread::sleep(Duration::from_millis(300));
    kill(child.id() as i32, libc::SIGINT);
    (child, fifo.unwrap())
}

/// After the grace a signal gives up waiting: the stressors are SIGKILLed at once and the
/// process, unblocked within its deadline, still writes its partial result (exit 3) and
/// removes the stressors' directory.
#[test]
fn a_signal_after_the_grace_gives_up_waiting_but_still_writes_the_result() {
    let _t = signals_turn();
    let tmp = tempfile::tempdir().unwrap();
    let (sdir, out) = (tmp.path().join("stress"), tmp.path().join("r.json"));
    std::fs::create_dir(&sdir).unwrap();
    let mark = mark("giveup");
    let (mut child, fifo) = run_stuck_in_its_stop(&sdir, &out, &mark);
    // Past the 2 s grace (docs/ARCHITECTURE.md §5).
    std::thread::sleep(Duration::from_millis(2600));
    kill(child.id() as i32, libc::SIGINT);
    std::thread::sleep(Duration::from_millis(100));
    // Unblock the stop: a writer that opens and closes the FIFO gives its reader EOF.
    drop(fifo_writer(&fifo, &mut child));
    let (status, err) = finish_within(child, Duration::from_secs(30));
    assert_eq!(status.code(), Some(3), "{status:?}: {err}");
    let doc = common::read_json(&out);
    assert_eq!(doc["status"], "interrupted");
    let warnings = doc["results"]["stress"]["warnings"].to_string();
    assert!(warnings.contains("gave up"), "{warnings}");
    nothing_left(&mark, &sdir);
}

/// Given up and still stuck past the deadline, the process removes the stressors'
/// directory from the signal handler and dies by the signal.
#[test]
fn a_process_stuck_past_the_give_up_deadline_cleans_up_and_dies_by_the_signal() {
    use std::os::unix::process::ExitStatusExt;
    let _t = signals_turn();
    let tmp = tempfile::tempdir().unwrap();
    let (sdir, out) = (tmp.path().join("stress"), tmp.path().join("r.json"));
    std::fs::create_dir(&sdir).unwrap();
    let mark = mark("die");
    let (child, _fifo) = run_stuck_in_its_stop(&sdir, &out, &mark);
    std::thread::sleep(Duration::from_millis(2600));
    kill(child.id() as i32, libc::SIGINT);
    // The deadline is 3 s; nothing opens the FIFO.
    let (status, err) = finish_within(child, Duration::from_secs(30));
    assert_eq!(status.signal(), Some(libc::SIGINT), "{status:?}: {err}");
    assert!(
        !out.exists(),
        "a result from a process that could not write one"
    );
    nothing_left(&mark, &sdir);
}

/// An ssh session that drops closes the terminal and sends SIGHUP: like SIGTERM, the result
/// is written and the command exits 3, though nothing can be printed any more.
#[test]
fn sighup_with_the_terminal_gone_still_writes_the_result() {
    let _t = signals_turn();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("r.json");
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty writes two descriptors; the name, termios and winsize are optional.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty");
    let tty = |fd: i32| {
        // SAFETY: dup of a descriptor we own; the Stdio owns the copy.
        std::process::Stdio::from(unsafe {
            <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(libc::dup(fd))
        })
    };
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new(common::bin());
    cmd.args(["run", "--chain", "thru", "--duration", "60s", "-o", s(&out)])
        .args(["--policy", "other", "--no-mlock"])
        .stdin(std::process::Stdio::null())
        .stdout(tty(slave))
        .stderr(tty(slave));
    // A test run under nohup would hand its ignored SIGHUP down (and xrunlab keeps an ignored
    // SIGHUP ignored, as `an_ignored_sighup_stays_ignored` checks): start from the default.
    // SAFETY: signal() is async-signal-safe, as pre_exec requires.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGHUP, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    // SAFETY: closing the descriptors openpty gave us: the terminal hangs up.
    unsafe {
        libc::close(slave);
    }
    await_handler(child.id(), libc::SIGHUP);
    std::thread::sleep(Duration::from_millis(500));
    unsafe {
        libc::close(master);
    }
    kill(child.id() as i32, libc::SIGHUP);
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("still running after SIGHUP");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(3), "{status:?}");
    assert_eq!(status_of(&out), "interrupted");
}

/// Under `nohup` SIGHUP is ignored when xrunlab starts, and stays ignored.
#[test]
fn an_ignored_sighup_stays_ignored() {
    use std::os::unix::process::CommandExt;
    let _t = signals_turn();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("r.json");
    let mut cmd = std::process::Command::new(common::bin());
    cmd.args(["run", "--chain", "thru", "--duration", "60s", "-o", s(&out)])
        .args(GENTLE)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    // SAFETY: signal() is async-signal-safe, as pre_exec requires.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGHUP, libc::SIG_IGN);
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    await_handler(child.id(), libc::SIGINT);
    kill(child.id() as i32, libc::SIGHUP);
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        child.try_wait().unwrap().is_none(),
        "SIGHUP was not ignored"
    );
    kill(child.id() as i32, libc::SIGINT);
    ends_interrupted(child, &out);
}

/// `stress` stopped by a signal is a partial result like any other: exit 3 (it was 0).
/// (tests/stress_session.rs checks the same for SIGTERM with the stressors' reaping.)
#[test]
fn stress_interrupted_exits_3() {
    let _t = signals_turn();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("s.json");
    let mark = mark("stress");
    let mut args = vec!["stress", "--stress", "cpu", "--stress-backend", "builtin"];
    args.extend(["--duration", "60s", "-q", "-o", s(&out)]);
    let child = spawn_marked(&args, &mark);
    await_stressors(&child, &mark, 1);
    kill(child.id() as i32, libc::SIGINT);
    ends_interrupted(child, &out);
}

/// `plugins bench` took its first Ctrl-C for nothing and ran every plugin to the end (exit 0).
/// Now the runs finished before the signal are the result, in order, and it exits 3.
#[test]
fn plugins_bench_interrupted_keeps_the_runs_it_finished() {
    let _t = signals_turn();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("bench.json");
    let counts: Vec<String> = (1..=20).map(|k| k.to_string()).collect();
    let counts = counts.join(",");
    // 20 runs of about 1.1 s each: 7 s after start at least one has ended (unless capturing
    // the environment took 6 s) and most have not.
    let args = [
        "plugins",
        "bench",
        "gain",
        "--instances",
        &counts,
        "--buffer",
        "64",
        "--duration",
        "1s",
        "-q",
        "-o",
        s(&out),
    ];
    let child = spawn_marked(&args, &mark("bench"));
    await_handler(child.id(), libc::SIGINT);
    std::thread::sleep(Duration::from_secs(7));
    kill(child.id() as i32, libc::SIGINT);
    let (status, err) = finish_within(child, Duration::from_secs(20));
    assert_eq!(status.code(), Some(3), "{status:?}: {err}");
    assert!(err.contains("interrupted"), "{err}");
    let doc = common::read_json(&out);
    assert_eq!(doc["status"], "interrupted");
    let done: Vec<u64> = doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| common::u(&r["instances"]))
        .collect();
    assert!(
        !done.is_empty() && done.len() < 20,
        "{} runs kept",
        done.len()
    );
    assert_eq!(done, (1..=done.len() as u64).collect::<Vec<_>>());
}

/// `args` followed by `path` `copies` times: work that takes seconds for the signal to
/// arrive in, for commands that read every file they are given.
fn many<'a>(args: &[&'a str], path: &'a str, copies: usize) -> Vec<&'a str> {
    let mut v = args.to_vec();
    v.extend(std::iter::repeat_n(path, copies));
    v
}

/// xrunlab `args`, SIGINT once its handler is installed: exit 3 saying `interrupted` within
/// 20 s, and no file added to `dir`. Returns stderr.
fn interrupted_leaves_nothing(args: &[&str], dir: &std::path::Path, test: &str) -> String {
    let entries = || {
        std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect::<std::collections::BTreeSet<_>>()
    };
    let before = entries();
    let child = spawn_marked(args, &mark(test));
    await_handler(child.id(), libc::SIGINT);
    kill(child.id() as i32, libc::SIGINT);
    let (status, err) = finish_within(child, Duration::from_secs(20));
    assert_eq!(status.code(), Some(3), "{status:?}: {err}");
    assert!(err.contains("interrupted"), "{err}");
    assert_eq!(entries(), before, "a partial file was left");
    err
}

/// `report` finished after Ctrl-C (exit 0). Now it exits 3 and writes no page: a report cut
/// short would pass for the whole. (Its input was a FIFO, for the signal to arrive while it
/// read; a FIFO is refused now: the same result many times over takes the time instead.)
#[test]
fn report_interrupted_writes_nothing_and_exits_3() {
    let _t = signals_turn();
    let (tmp, input, _) = scratch("r.json", "results/latency.json");
    let html = tmp.path().join("r.html");
    let args = many(&["report", "-o", s(&html)], s(&input), 5000);
    let err = interrupted_leaves_nothing(&args, tmp.path(), "report");
    assert!(err.contains("no report written"), "{err}");
}

/// `verdict` ignored SIGINT over a large directory; it stops between files and writes
/// nothing.
#[test]
fn verdict_interrupted_writes_nothing_and_exits_3() {
    let _t = signals_turn();
    let (tmp, input, _) = scratch("lat.json", "verdict/latency-stress.json");
    let out = tmp.path().join("v.json");
    let args = many(&["verdict", "-q", "-o", s(&out)], s(&input), 5000);
    let err = interrupted_leaves_nothing(&args, tmp.path(), "verdict");
    assert!(err.contains("no verdict written"), "{err}");
}

/// `import` of a large cyclictest file ignored SIGINT and SIGTERM for minutes; it stops
/// now, writing nothing.
#[test]
fn import_interrupted_writes_nothing_and_exits_3() {
    let _t = signals_turn();
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("ct.json");
    std::fs::write(&input, common::cyclictest_json(1_000_000)).unwrap();
    let out = tmp.path().join("lat.json");
    let err = interrupted_leaves_nothing(
        &["import", s(&input), "-q", "-o", s(&out)],
        tmp.path(),
        "import",
    );
    assert!(err.contains("nothing imported"), "{err}");
}

// --- the sim cost model -------------------------------------------------------------------

/// A misspelt `--cost` name left the real plugin at cost 0: 0 % DSP and no xrun instead of
/// 120 % and 1875 xruns. It is refused, naming the closest element of the chain.
#[test]
fn a_cost_for_a_plugin_not_in_the_chain_is_refused_naming_the_closest() {
    let chain = ["--chain", "reverb-heavy:4,gain"];
    refused_fast(
        &[
            &["run", "--driver", "sim", "--duration", "60s"][..],
            &chain,
            &["--cost", "reverb-hevy=400us"],
        ]
        .concat(),
        "did you mean 'reverb-heavy'",
        BEFORE_MEASURING,
    );
    refused_fast(
        &[
            &["run", "--driver", "sim", "--duration", "60s"][..],
            &chain,
            &["--cost", "gain=1us", "--cost", "gain=2us"],
        ]
        .concat(),
        "has a cost already",
        BEFORE_MEASURING,
    );
    refused_fast(
        &[
            "load",
            "--driver",
            "sim",
            "--duration",
            "60s",
            "--plugins",
            "reverb-heavy",
            "--cost",
            "reverb-heavy=40ns/frame",
            "--cost",
            "reverb-ligth=20ns/frame",
            "--stress",
            "none",
        ],
        "'reverb-ligth' is not in the chain",
        BEFORE_MEASURING,
    );
    // The costs were only ever a model: measured compute has no use for them.
    refused_fast(
        &[
            &["run", "--driver", "sim", "--sim-compute", "measured"][..],
            &["--duration", "60s", "--chain", "gain", "--cost", "gain=1us"],
        ]
        .concat(),
        "--sim-compute measured",
        BEFORE_MEASURING,
    );
}

/// The right name gives the model's answer; an element without a cost says so on the
/// terminal, not only in the JSON.
#[test]
fn the_cost_model_answers_and_names_what_it_leaves_at_zero() {
    let out = xrunlab()
        .args(["run", "--driver", "sim", "--duration", "2s"])
        .args([
            "--chain",
            "reverb-heavy:4,gain",
            "--cost",
            "reverb-heavy=400us",
        ])
        .args(["--json"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // 4 × 400 µs in a 1333 µs period: every cycle that runs overloads (the model is exact);
    // with the cost under a misspelt name none did.
    let r = &doc["results"];
    let (cycles, overload) = (common::u(&r["cycles"]), common::u(&r["xruns"]["overload"]));
    assert!(cycles > 0 && overload == cycles, "{overload} of {cycles}");
    assert!(
        err.lines()
            .any(|l| l.starts_with("xrunlab: warning:") && l.contains("no --cost for gain")),
        "{err}"
    );
}

#[test]
fn the_hang_plugin_is_refused_on_sim() {
    for compute in ["model", "measured"] {
        refused_fast(
            &[
                "run",
                "--driver",
                "sim",
                "--sim-compute",
                compute,
                "--chain",
                "gain,hang",
                "--duration",
                "60s",
            ],
            "'hang' never returns",
            BEFORE_MEASURING,
        );
    }
}

// --- schema -------------------------------------------------------------------------------

/// `schema -o FILE` printed to stdout and ignored -o (exit 0 even for a missing directory).
#[test]
fn schema_honours_output_and_quiet() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("schema.json");
    let printed = xrunlab().arg("schema").output().unwrap();
    assert_eq!(printed.status.code(), Some(0));
    let out = xrunlab()
        .args(["schema", "-q", "-o", s(&f)])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty() && out.stderr.is_empty(), "-q printed");
    assert_eq!(std::fs::read(&f).unwrap(), printed.stdout);
    let out = xrunlab().args(["schema", "-o", s(&f)]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("schema written to"));
    refused_fast(
        &["schema", "-o", "/nonexistent-dir/x.json"],
        "/nonexistent-dir/x.json",
        BEFORE_MEASURING,
    );
    let d = tmp.path().to_str().unwrap();
    refused_fast(&["schema", "-o", d], d, BEFORE_MEASURING);
}

// --- low ------------------------------------------------------------------------------------

/// A watchdog bound below one period would stop every healthy run at its first cycle.
#[test]
fn a_watchdog_below_one_period_is_refused_before_measuring() {
    for bound in ["0s", "1ns", "1ms"] {
        refused_fast(
            &[
                "run",
                "--driver",
                "sim",
                "--buffer",
                "64",
                "--duration",
                "60s",
                "--watchdog",
                bound,
            ],
            "below one period",
            BEFORE_MEASURING,
        );
        refused_fast(
            &[
                "rtl",
                "--driver",
                "virtual",
                "--loopback",
                "--duration",
                "60s",
                "--watchdog",
                bound,
            ],
            "below one period",
            BEFORE_MEASURING,
        );
    }
}

#[test]
fn stress_refuses_a_zero_duration_as_the_others_do() {
    refused_fast(
        &["stress", "--stress", "cpu", "--duration", "0s"],
        "--duration must be positive",
        BEFORE_MEASURING,
    );
}

/// The mlock advice ("pass --no-mlock") names an option `sched` and `event` now take, and
/// the result records it.
#[test]
fn sched_and_event_take_the_no_mlock_they_advise() {
    let tmp = tempfile::tempdir().unwrap();
    let (e, sc) = (tmp.path().join("e.json"), tmp.path().join("s.json"));
    let out = xrunlab()
        .args([
            "event",
            "--driver",
            "virtual",
            "--trials",
            "5",
            "--no-mlock",
        ])
        .args(["--policy", "other", "-q", "-o", s(&e)])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(common::read_json(&e)["config"]["mlock"], false);
    let out = xrunlab()
        .args(["sched", "--policies", "other", "--duration", "500ms"])
        .args(["--no-mlock", "-q", "-o", s(&sc)])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(common::read_json(&sc)["config"]["mlock"], false);
}

/// An output ending in '/' names a directory; when there is none the message says so
/// (it once said "is a directory" of a plain file, or the OS's bare "Not a directory").
#[test]
fn output_ending_in_a_slash_says_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("plain");
    std::fs::write(&f, "x").unwrap();
    let file_slash = format!("{}/", f.display());
    let none_slash = format!("{}/", dir.path().join("none").display());
    for (o, why) in [
        (&file_slash, "is not a directory"),
        (&none_slash, "does not exist"),
    ] {
        for args in [
            &["latency", "--duration", "60s", "-o"][..],
            &["report", "tests/fixtures/results/latency.json", "-o"][..],
        ] {
            let mut a = args.to_vec();
            a.push(o);
            let (rc, err, _) = run(&a);
            assert_eq!(rc, 2, "{a:?}: {err}");
            assert!(err.contains("ends in '/', but"), "{a:?}: {err}");
            assert!(err.contains(why), "{a:?}: {err}");
        }
    }
    assert_eq!(std::fs::read(&f).unwrap(), b"x");
}

// --- messages that name the problem -----------------------------------------------------

/// Each of these once gave a message about something else, or was accepted while its
/// twin was refused.
#[test]
fn mistakes_are_named_for_what_they_are() {
    fn with<'a>(extra: &[&'a str]) -> Vec<&'a str> {
        [&["run", "--driver", "sim", "--duration", "60s"][..], extra].concat()
    }
    refused_fast(
        &with(&["--chain", "burn(10%)x"]),
        "'x' after the closing parenthesis",
        BEFORE_MEASURING,
    );
    refused_fast(
        &with(&["--chain", "sine(0)"]),
        "frequency must be above 0 Hz",
        BEFORE_MEASURING,
    );
    // The input signal follows the sine plugin's rule.
    refused_fast(
        &with(&["--input", "sine:1e9"]),
        "--input sine:1000000000: frequency 1000000000 Hz is at or above Nyquist (24000 Hz)",
        BEFORE_MEASURING,
    );
    // A value left out of a list is a slip, not a shorter list (the load grid ran).
    for (args, opt) in [
        (
            &["load", "--driver", "sim", "--buffers", "1,,2"][..],
            "--buffers",
        ),
        (
            &["load", "--driver", "sim", "--tracks", "1,,2"][..],
            "--tracks",
        ),
        (
            &["plugins", "bench", "--instances", "1,2,", "gain"][..],
            "--instances",
        ),
    ] {
        refused_fast(args, &format!("{opt}: empty element"), BEFORE_MEASURING);
    }
    refused_fast(
        &["latency", "--duration", "60s", "--cpus", "0,,1"],
        "bad CPU list '0,,1'",
        BEFORE_MEASURING,
    );
    // An empty list (an unset variable) is not "idle only": that is spelled none.
    refused_fast(
        &["latencytest", "--phase-duration", "60s", "--classes", ""],
        "--classes '' names no class",
        BEFORE_MEASURING,
    );
    for opt in ["--gain", "--min-level", "--fraction", "--snr"] {
        for v in ["NaN", "inf"] {
            refused_fast(
                &["rtl", "--driver", "sim", "--duration", "60s", opt, v],
                &format!("'{v}' is not a number"),
                BEFORE_MEASURING,
            );
        }
    }
    // A wrong type is named as such, not as missing or as another kind.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("r.json");
    let base: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string("tests/fixtures/results/run.json").unwrap())
            .unwrap();
    for (key, value, needle) in [
        (
            "schema_version",
            serde_json::json!("1"),
            "schema_version is \"1\"",
        ),
        ("kind", serde_json::json!(5), "kind is 5"),
    ] {
        let mut v = base.clone();
        v[key] = value;
        std::fs::write(&p, v.to_string()).unwrap();
        refused_fast(&["report", s(&p)], needle, BEFORE_MEASURING);
    }
}

/// `--hist-max` takes a bare number as µs, as cyclictest's -h does (and `-i` already did).
#[test]
fn hist_max_takes_bare_microseconds_like_cyclictest() {
    let dir = tempfile::tempdir().unwrap();
    let o = dir.path().join("lat.json");
    let out = xrunlab()
        .args([
            "latency",
            "--duration",
            "200ms",
            "-i",
            "500",
            "--hist-max",
            "2000",
            "-q",
        ])
        .arg("-o")
        .arg(&o)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&o).unwrap()).unwrap();
    assert_eq!(doc["config"]["hist_max_ns"], 2_000_000);
    assert_eq!(doc["config"]["interval_ns"], 500_000);
}

// --- parsers of user input: property tests ----------------------------------------------

/// Every parser of what users type or hand in (durations, lists, CPU lists, chains, plugin
/// parameters, cost models, cyclictest text and JSON, result JSON): arbitrary input never
/// panics and either parses to a value within its bounds or is a usage/input error (exit
/// 2); a parsed value printed back parses to itself where a printer exists.
mod parsers {
    use proptest::prelude::*;
    use xrunlab::dsp::{parse_chain, PluginContext};
    use xrunlab::engine::cost::CostModel;
    use xrunlab::rt::affinity::{
        allowed_cpus, format_cpu_list, parse_cpu_list, select_cpus, MAX_CPUS,
    };
    use xrunlab::units::*;

    /// What a hostile user types: the characters the parsers split on around digits and
    /// units, long numbers, and anything at all.
    fn hostile() -> impl Strategy<Value = String> {
        prop_oneof![
            "[0-9a-zµ.,:;=()%@/ +_-]{0,40}",
            "(lv2:)?[a-z:/.]{0,12}(\\([a-z0-9=.,()%-]{0,12}\\))?[a-z)]{0,2}(:[0-9]{1,12})?(,[a-z(0-9%):]{0,10}){0,3}",
            "[0-9]{12,30}(\\.[0-9]{1,5})?(ns|us|ms|s|m|h|%|@[0-9]{1,12})?",
            "-?[0-9]{1,20}(-[0-9]{1,25})?(,-?[0-9]{1,20}(-[0-9]{1,25})?){0,3}",
            any::<String>(),
        ]
    }

    /// Ok within bounds, or an error with exit code 2.
    fn exit_2<T>(r: &xrunlab::Result<T>) -> Result<(), TestCaseError> {
        if let Err(e) = r {
            prop_assert_eq!(e.exit_code(), 2, "{}", e);
        }
        Ok(())
    }

    const UNITS: [(&str, u64); 6] = [
        ("ns", 1),
        ("us", 1_000),
        ("ms", 1_000_000),
        ("s", 1_000_000_000),
        ("m", 60_000_000_000),
        ("h", 3_600_000_000_000),
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn scalars_parse_within_bounds_or_exit_2(t in hostile()) {
            let d = parse_duration_ns(&t);
            exit_2(&d)?;
            prop_assert!(d.map_or(true, |ns| ns <= MAX_DURATION_NS));
            let d = parse_duration_or_us(&t);
            exit_2(&d)?;
            prop_assert!(d.map_or(true, |ns| ns <= MAX_DURATION_NS));
            let p = parse_percent(&t);
            exit_2(&p)?;
            prop_assert!(p.map_or(true, |p| (0.0..=100.0).contains(&p)));
            let x = parse_finite(&t);
            exit_2(&x)?;
            prop_assert!(x.map_or(true, f64::is_finite));
            let a = t.parse::<AudioPeriod>();
            exit_2(&a)?;
            prop_assert!(a.map_or(true, |a| a.is_valid()));
        }

        #[test]
        fn scalars_round_trip(
            unit in 0..UNITS.len(),
            v in 0u64..(1 << 53),
            pct in 0.0f64..=100.0,
            x in proptest::num::f64::NORMAL | proptest::num::f64::ZERO,
            frames in 1u32..,
            rate in xrunlab::common::device::RATES,
        ) {
            let (u, scale) = UNITS[unit];
            let v = v / scale;
            prop_assert_eq!(parse_duration_ns(&format!("{v}{u}")).unwrap(), v * scale);
            prop_assert_eq!(parse_percent(&format!("{pct}%")).unwrap(), pct);
            prop_assert_eq!(parse_finite(&x.to_string()).unwrap(), x);
            let p = AudioPeriod { frames, rate };
            prop_assert_eq!(format!("{}@{}", p.frames, p.rate).parse::<AudioPeriod>().unwrap(), p);
        }

        #[test]
        fn lists_parse_within_bounds_or_exit_2(t in hostile(), pow2: bool, max in 1u32..=70_000) {
            let l = parse_uint_list("--x", &t, pow2, max);
            exit_2(&l)?;
            if let Ok(l) = l {
                prop_assert!(!l.is_empty() && l.iter().all(|&v| v <= max));
                prop_assert!(l.windows(2).all(|w| w[0] < w[1]));
            }
            let c = parse_cpu_list(&t);
            exit_2(&c)?;
            if let Ok(c) = c {
                prop_assert!(c.iter().all(|&v| v < MAX_CPUS));
                prop_assert!(c.windows(2).all(|w| w[0] < w[1]));
            }
            let s = select_cpus(Some(&t));
            exit_2(&s)?;
            if let Ok(s) = s {
                let allowed = allowed_cpus().unwrap();
                prop_assert!(!s.is_empty() && s.iter().all(|c| allowed.contains(c)));
            }
        }

        #[test]
        fn lists_round_trip(
            values in proptest::collection::btree_set(0u32..=65_536, 1..40),
            cpus in proptest::collection::btree_set(0usize..MAX_CPUS, 0..40),
        ) {
            let v: Vec<u32> = values.into_iter().collect();
            let text = v.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
            prop_assert_eq!(parse_uint_list("--x", &text, false, 65_536).unwrap(), v);
            let c: Vec<usize> = cpus.into_iter().collect();
            prop_assert_eq!(parse_cpu_list(&format_cpu_list(&c)).unwrap(), c);
        }

        #[test]
        fn chains_parse_and_print_back(t in hostile()) {
            let c = parse_chain(&t);
            exit_2(&c)?;
            if let Ok(c) = c {
                prop_assert!(c.iter().all(|e| e.count >= 1 && !e.plugin.is_empty()));
                let printed = c.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(",");
                prop_assert_eq!(parse_chain(&printed).unwrap(), c, "printed as {}", printed);
            }
        }

        #[test]
        fn plugin_parameters_build_or_exit_2(t in hostile(), which in any::<proptest::sample::Index>()) {
            let plugins: Vec<_> = xrunlab::dsp::registry::list().collect();
            let p = plugins[which.index(plugins.len())];
            let ctx = PluginContext { rate: 48_000, max_frames: 256 };
            exit_2(&xrunlab::dsp::registry::create(p.name, &t, &ctx))?;
            exit_2(&xrunlab::dsp::lv2::instance::parse_params(&lv2_desc(), &t))?;
        }

        #[test]
        fn lv2_parameters_within_their_ports(gain in -100.0f32..100.0, on in 0.0f32..=1.0) {
            let text = format!("gain={gain},on={on}");
            let r = xrunlab::dsp::lv2::instance::parse_params(&lv2_desc(), &text);
            let in_range = (-60.0..=24.0).contains(&gain);
            prop_assert_eq!(r.is_ok(), in_range, "{}", text);
            if let Ok(v) = r {
                prop_assert_eq!(v, vec![(3, gain), (4, on)]);
            }
        }

        #[test]
        fn cost_models_parse_and_print_back(
            t in hostile(),
            name in "[a-z][a-z0-9-]{0,12}",
            ns in 0u64..(1 << 53),
            per_frame in 0.0f64..1e6,
        ) {
            let c = CostModel::parse_cost(&t);
            exit_2(&c)?;
            if let Ok(c) = c {
                prop_assert!(!c.plugin.is_empty());
                prop_assert!(c.per_frame_ns.is_finite() && c.per_frame_ns >= 0.0);
            }
            let c = CostModel::parse_cost(&format!("{name}={ns}ns")).unwrap();
            prop_assert_eq!((c.plugin.as_str(), c.per_cycle_ns), (name.as_str(), ns));
            let c = CostModel::parse_cost(&format!("{name}={per_frame}ns/frame")).unwrap();
            prop_assert_eq!(c.per_frame_ns, per_frame);
        }
    }

    /// A plugin with two control inputs, as lilv would describe it.
    fn lv2_desc() -> xrunlab::dsp::lv2::PluginDesc {
        use xrunlab::dsp::lv2::{PluginDesc, PortDesc, PortKind};
        let port = |index, symbol: &str, kind, input, range: Option<(f32, f32)>| PortDesc {
            index,
            symbol: symbol.into(),
            name: symbol.into(),
            kind,
            input,
            optional: false,
            default: range.map(|r| r.0),
            minimum: range.map(|r| r.0),
            maximum: range.map(|r| r.1),
            steps: None,
            unsupported_class: None,
        };
        PluginDesc {
            uri: "urn:xrunlab:test".into(),
            name: "test".into(),
            class: "Plugin".into(),
            ports: vec![
                port(0, "in", PortKind::Audio, true, None),
                port(1, "out", PortKind::Audio, false, None),
                port(2, "level", PortKind::Control, false, None),
                port(3, "gain", PortKind::Control, true, Some((-60.0, 24.0))),
                port(4, "on", PortKind::Control, true, Some((0.0, 1.0))),
            ],
            required_features: Vec::new(),
            latency_port: None,
            unhostable: None,
        }
    }
}

// --- the committed corpus of malformed files --------------------------------------------

/// Every file of tests/fixtures/hostile (written by scripts/gen-hostile-corpus) through
/// `import`, `report` and `compare`: exit 2, a message naming the file, never a panic; the
/// reader of the file's format says what expected.json says (the field or the line).
#[test]
fn hostile_corpus_is_refused_by_every_reader() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hostile");
    let expected: std::collections::BTreeMap<String, String> =
        serde_json::from_slice(&std::fs::read(root.join("expected.json")).unwrap()).unwrap();
    assert!(expected.len() >= 60, "{} files", expected.len());
    for sub in ["results", "cyclictest"] {
        for f in std::fs::read_dir(root.join(sub)).unwrap() {
            let rel = format!("{sub}/{}", f.unwrap().file_name().to_string_lossy());
            assert!(expected.contains_key(&rel), "{rel} is not in expected.json");
        }
    }
    let cases: Vec<(&String, &String)> = expected.iter().collect();
    let failures: Vec<String> = std::thread::scope(|s| {
        let workers: Vec<_> = cases
            .chunks(cases.len().div_ceil(4))
            .map(|chunk| {
                let root = &root;
                s.spawn(move || {
                    let mut bad = Vec::new();
                    for (rel, say) in chunk {
                        let f = root.join(rel);
                        let f = f.to_str().unwrap();
                        let result_file = rel.starts_with("results/");
                        for (args, reads_format) in [
                            (vec!["import", f], !result_file),
                            (vec!["report", f], result_file),
                            (vec!["compare", f, f], result_file),
                        ] {
                            let (rc, err, _) = run(&args);
                            if rc != 2
                                || !err.contains(f)
                                || err.contains("panicked")
                                || (reads_format && !err.contains(say.as_str()))
                            {
                                bad.push(format!("{args:?}: rc {rc}, want '{say}': {err}"));
                            }
                        }
                    }
                    bad
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    assert!(failures.is_empty(), "{failures:#?}");
}

/// A cost model's numbers are the user's: a million hours per instance once overflowed the
/// track's sum (64 instances, 64 tracks: a panic) or stepped through 10^16 skipped periods
/// one by one (4 instances: a hang that ignored SIGTERM). Each is one long xrun, at once.
#[test]
fn absurd_sim_costs_are_one_long_xrun_not_a_hang() {
    for (chain, tracks) in [("gain:4", "1"), ("gain:64", "64")] {
        let t0 = Instant::now();
        let out = xrunlab()
            .args([
                "run",
                "--driver",
                "sim",
                "--duration",
                "100ms",
                "--chain",
                chain,
            ])
            .args([
                "--tracks",
                tracks,
                "--cost",
                "gain=1000000h",
                "--json",
                "-q",
            ])
            .timeout(Duration::from_secs(60))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{chain}: {err}");
        assert!(
            t0.elapsed() < BEFORE_MEASURING,
            "{chain}: {:?}",
            t0.elapsed()
        );
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let r = &doc["results"];
        assert_eq!(r["cycles"], 1, "{chain}: {r}");
        assert_eq!(r["xruns"]["overload"], 1, "{chain}");
        assert_eq!(
            r["periods_elapsed"],
            r["skipped_periods"].as_u64().unwrap() + 1
        );
    }
}
