//! `xrunlab check` against fixture trees of /proc, /sys, /etc and /dev:
//! - `vm-capture`: files captured from the 2-core PREEMPT_DYNAMIC KVM guest this was built on;
//! - `rpi4-rt`: a hand-made Raspberry Pi 4 with a PREEMPT_RT kernel, tuned for audio;
//! - `desktop-dynamic`: a hand-made untuned desktop (voluntary preemption, powersave, SMT,
//!   sound card sharing its IRQ with the USB controller);
//! - `rpi4-throttled`: a hand-made Raspberry Pi 4 on Raspberry Pi OS's stock kernel, its
//!   supply too weak (under-voltage since boot), ondemand, dwc_otg on a shared line, the
//!   RT kernel package installed but not booted;
//! - `rpi5-rt`: a hand-made Raspberry Pi 5 on a self-built 16 KiB-page PREEMPT_RT kernel,
//!   clean.
//!
//! The Pi trees' formats come from the Raspberry Pi documentation (`vcgencmd
//! get_throttled` bits; config.txt and its `[piN]` filters; 80 °C throttling in
//! "Frequency management and thermal control"), raspberrypi/linux
//! `drivers/firmware/raspberrypi.c` (`get_throttled` printed as `%x`), and the kernel's
//! `Documentation/filesystems/proc.rst` (`/proc/interrupts`, `KernelPageSize` in smaps) and
//! `Documentation/thermal/sysfs-api.rst` (`thermal_zoneN/temp` in millidegrees Celsius).
//!
//! Every check's verdict is asserted on every tree, then single files are changed in a copy
//! of a tree to show each verdict follows the file it claims to read.

mod common;

use common::{require, which, xrunlab};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use xrunlab::system::check::{run_checks, CheckReport, Verdict};
use xrunlab::system::{Environment, Root};

use Verdict::{Fail, Ok as Pass, Warn};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/system")
        .join(name)
}

fn check_at(dir: &Path) -> (Environment, CheckReport) {
    let root = Root::new(dir);
    let env = Environment::capture_at(&root);
    let report = run_checks(&root, &env);
    (env, report)
}

fn assert_verdicts(tree: &str, report: &CheckReport, expected: &[(&str, Verdict)]) {
    let got: BTreeMap<&str, Verdict> = report
        .checks
        .iter()
        .map(|c| (c.id.as_str(), c.verdict))
        .collect();
    let want: BTreeMap<&str, Verdict> = expected.iter().copied().collect();
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "{tree}: check ids differ"
    );
    for (id, v) in &want {
        let c = report.get(id).unwrap();
        assert_eq!(
            c.verdict, *v,
            "{tree}: check {id} observed '{}', advice '{}'",
            c.observed, c.advice
        );
    }
    for c in &report.checks {
        assert!(
            !c.observed.is_empty(),
            "{tree}: {} has no observation",
            c.id
        );
        // Advice exactly when something needs doing.
        assert_eq!(c.advice.is_empty(), c.verdict == Pass, "{tree}: {c:?}");
    }
}

fn observed<'a>(r: &'a CheckReport, id: &str) -> &'a str {
    &r.get(id).unwrap().observed
}

/// Copy a fixture tree into a temporary directory so single files can be changed.
fn copy_tree(name: &str) -> tempfile::TempDir {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            let target = to.join(e.file_name());
            if e.file_type().unwrap().is_dir() {
                copy(&e.path(), &target);
            } else {
                std::fs::copy(e.path(), &target).unwrap();
            }
        }
    }
    let d = tempfile::tempdir().unwrap();
    copy(&fixture(name), d.path());
    d
}

fn write(root: &Path, abs: &str, text: &str) {
    let p = root.join(abs.trim_start_matches('/'));
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn has_zcat() -> bool {
    require(
        which("zcat").is_some(),
        "zcat (package gzip) to read /proc/config.gz",
    )
}

#[test]
fn vm_capture_notices_hypervisor_dynamic_none_kernel_and_throttling() {
    if !has_zcat() {
        return;
    }
    let (env, r) = check_at(&fixture("vm-capture"));
    assert_verdicts(
        "vm-capture",
        &r,
        &[
            ("user", Pass),
            ("rtprio-limit", Pass),
            ("rt-priority", Pass),
            ("memlock", Pass),
            ("cpu-dma-latency", Pass),
            ("preempt", Fail),
            ("threadirqs", Warn),
            ("kernel-config", Pass),
            ("hrtimers", Pass),
            ("tickless", Pass),
            ("rt-throttling", Warn),
            ("mitigations", Warn),
            ("governor", Pass),
            ("smt", Pass),
            ("isolation", Pass),
            ("clocksource", Pass),
            ("sound-card", Warn),
            ("irq-sharing", Pass),
            ("swap", Pass),
            ("filesystems", Pass),
            ("virtualization", Warn),
            ("container", Pass),
        ],
    );
    assert_eq!(env.preempt.model, "none");
    assert!(env.preempt.dynamic);
    assert!(observed(&r, "preempt").contains("CONFIG_PREEMPT_NONE"));
    assert_eq!(env.virtualization.as_deref(), Some("kvm"));
    assert!(observed(&r, "virtualization").contains("hypervisor"));
    assert!(observed(&r, "rt-throttling").contains("950000"));
    // /.dockerenv is there, but / is ext4 on a virtio disk: not a container.
    assert_eq!(env.container, None);
    assert!(observed(&r, "container").contains("/.dockerenv"));
    // The init arguments after "--" on this VM's command line are not kernel parameters.
    assert!(!env.isolation.threadirqs);
    assert!(observed(&r, "rt-priority").contains("not probed (fixture)"));
    assert_eq!(env.cpus.count, 2);
    assert_eq!(env.limits.sched_rt_runtime_us, Some(950_000));
    let w = env.warnings().join("\n");
    assert!(w.contains("virtual machine"), "{w}");
    assert!(w.contains("RT throttling"), "{w}");
    assert!(w.contains("'none'"), "{w}");
    // Root, unprobed: nothing says RT is out of reach.
    assert!(!w.contains("no RT privilege"), "{w}");
}

#[test]
fn rpi4_rt_is_ready_for_audio() {
    let (env, r) = check_at(&fixture("rpi4-rt"));
    assert_verdicts(
        "rpi4-rt",
        &r,
        &[
            ("user", Pass),
            ("rtprio-limit", Pass),
            ("rt-priority", Pass),
            ("memlock", Pass),
            ("cpu-dma-latency", Pass),
            ("preempt", Pass),
            ("threadirqs", Pass),
            ("kernel-config", Pass),
            ("hrtimers", Pass),
            ("tickless", Pass),
            ("rt-throttling", Pass),
            ("mitigations", Warn),
            ("governor", Pass),
            ("smt", Pass),
            ("isolation", Pass),
            ("clocksource", Pass),
            ("sound-card", Pass),
            ("irq-sharing", Pass),
            ("swap", Pass),
            ("filesystems", Pass),
            ("virtualization", Pass),
            ("container", Pass),
            ("pi-board", Pass),
            ("pi-throttled", Pass),
            ("pi-temperature", Pass),
            ("pi-clock", Pass),
            ("page-size", Pass),
            ("rt-kernel", Pass),
        ],
    );
    assert_eq!(r.fail, 0);
    assert_eq!(env.preempt.model, "rt");
    assert_eq!(env.cpus.count, 4);
    assert_eq!(env.cpus.model, "Raspberry Pi 4 Model B Rev 1.4");
    assert_eq!(env.governor, vec!["performance"; 4]);
    assert_eq!(env.isolation.isolcpus.as_deref(), Some("3"));
    assert!(env.isolation.threadirqs);
    assert_eq!(env.limits.rtprio, "95");
    assert_eq!(env.limits.euid, 1000);
    assert_eq!(env.virtualization, None);
    assert_eq!(observed(&r, "governor"), "cpu0-3: performance");
    assert!(observed(&r, "irq-sharing").contains("xhci_hcd (IRQ 55)"));
    assert!(observed(&r, "user").contains("audio"));
    assert!(env.warnings().is_empty(), "{:?}", env.warnings());
}

#[test]
fn desktop_dynamic_voluntary_is_flagged() {
    let (env, r) = check_at(&fixture("desktop-dynamic"));
    assert_verdicts(
        "desktop-dynamic",
        &r,
        &[
            ("user", Warn),
            ("rtprio-limit", Fail),
            ("rt-priority", Fail),
            ("memlock", Warn),
            ("cpu-dma-latency", Pass),
            ("preempt", Fail),
            ("threadirqs", Warn),
            ("kernel-config", Pass),
            ("hrtimers", Pass),
            ("tickless", Pass),
            ("rt-throttling", Warn),
            ("mitigations", Warn),
            ("governor", Warn),
            ("smt", Warn),
            ("isolation", Warn),
            ("clocksource", Pass),
            ("sound-card", Pass),
            ("irq-sharing", Warn),
            ("swap", Warn),
            ("filesystems", Warn),
            ("virtualization", Pass),
            ("container", Pass),
        ],
    );
    assert_eq!(env.preempt.model, "voluntary");
    assert_eq!(env.preempt.source, "/sys/kernel/debug/sched/preempt");
    assert!(env.preempt.dynamic);
    assert_eq!(env.smt, Some(true));
    assert_eq!(
        observed(&r, "governor"),
        "cpu0-5: powersave; cpu6-7: schedutil"
    );
    assert_eq!(
        observed(&r, "irq-sharing"),
        "shared: IRQ 16: snd_hda_intel:card0 + xhci_hcd"
    );
    assert!(observed(&r, "filesystems").contains("fuseblk on /media/alex/Samples"));
    // The portal's FUSE mount under /run is not a place for audio files.
    assert!(!observed(&r, "filesystems").contains("portal"));
    let w = env.warnings().join("\n");
    assert!(w.contains("no RT privilege"), "{w}");
    assert!(w.contains("governor is 'powersave'"), "{w}");
    assert!(!w.contains("virtual machine"), "{w}");
}

#[test]
fn verdicts_follow_the_files_they_read() {
    let d = copy_tree("rpi4-rt");
    let p = d.path();
    write(p, "/proc/sys/kernel/sched_rt_runtime_us", "950000\n");
    write(
        p,
        "/sys/devices/system/cpu/cpu2/cpufreq/scaling_governor",
        "ondemand\n",
    );
    write(p, "/sys/devices/system/cpu/smt/active", "1\n");
    write(p, "/sys/devices/system/cpu/smt/control", "on\n");
    write(
        p,
        "/proc/swaps",
        "Filename Type Size Used Priority\n/dev/zram0 partition 1000 0 100\n",
    );
    write(
        p,
        "/sys/devices/system/clocksource/clocksource0/current_clocksource",
        "hpet\n",
    );
    write(
        p,
        "/proc/cmdline",
        "root=/dev/mmcblk0p2 isolcpus=7 mitigations=off\n",
    );
    write(p, "/proc/asound/cards", "--- no soundcards ---\n");
    write(p, "/proc/self/limits", "Max realtime priority     50                   50\nMax locked memory         65536                65536                bytes\n");
    write(
        p,
        "/proc/cpuinfo",
        "processor\t: 0\nflags\t\t: fpu hypervisor\n",
    );
    write(p, "/sys/class/dmi/id/sys_vendor", "QEMU\n");
    write(p, "/proc/mounts", "overlay / overlay rw 0 0\n");
    write(p, "/.dockerenv", "");
    std::fs::remove_file(p.join("sys/kernel/realtime")).unwrap();
    write(
        p,
        "/proc/sys/kernel/version",
        "#1 SMP PREEMPT Debian 6.12.47\n",
    );
    std::fs::remove_file(p.join("boot/config-6.12.47+rpt-rpi-v8-rt")).unwrap();
    let (env, r) = check_at(p);
    let v = |id: &str| r.get(id).unwrap().verdict;
    assert_eq!(v("rt-throttling"), Warn);
    assert_eq!(v("governor"), Warn);
    assert_eq!(
        observed(&r, "governor"),
        "cpu0-1,3: performance; cpu2: ondemand"
    );
    assert_eq!(v("smt"), Warn);
    assert_eq!(v("swap"), Warn);
    assert_eq!(v("clocksource"), Warn);
    assert_eq!(v("isolation"), Warn, "{}", observed(&r, "isolation"));
    assert!(observed(&r, "isolation").contains("CPU 7 is not online"));
    assert_eq!(v("mitigations"), Pass);
    assert_eq!(v("sound-card"), Warn);
    assert_eq!(v("rtprio-limit"), Warn);
    assert_eq!(v("rt-priority"), Warn);
    assert_eq!(v("memlock"), Warn);
    assert_eq!(v("virtualization"), Warn);
    assert_eq!(env.virtualization.as_deref(), Some("qemu"));
    assert_eq!(v("container"), Warn);
    assert_eq!(env.container.as_deref(), Some("docker"));
    // No /sys/kernel/realtime and no config: the build string decides.
    assert_eq!(env.preempt.model, "full");
    assert_eq!(v("preempt"), Pass);
    // threadirqs was dropped from the command line and the kernel is no longer RT.
    assert_eq!(v("threadirqs"), Warn);
    assert_eq!(v("kernel-config"), Warn);
    assert_eq!(v("tickless"), Warn);
    assert_eq!(v("hrtimers"), Warn);
    write(
        p,
        "/proc/timer_list",
        "cpu: 0\n clock 0:\n  .hres_active    : 1\n",
    );
    assert_eq!(check_at(p).1.get("hrtimers").unwrap().verdict, Pass);
}

#[test]
fn dynamic_kernel_modes_resolve_in_order() {
    let d = copy_tree("desktop-dynamic");
    let p = d.path();
    // debugfs wins over everything else.
    write(p, "/proc/cmdline", "ro quiet preempt=none threadirqs\n");
    let (env, r) = check_at(p);
    assert_eq!(env.preempt.model, "voluntary");
    assert_eq!(r.get("threadirqs").unwrap().verdict, Pass);
    // Without debugfs, preempt= on the command line decides.
    std::fs::remove_file(p.join("sys/kernel/debug/sched/preempt")).unwrap();
    write(p, "/proc/cmdline", "ro quiet preempt=full threadirqs\n");
    let (env, r) = check_at(p);
    assert_eq!(env.preempt.model, "full");
    assert_eq!(r.get("preempt").unwrap().verdict, Pass);
    // Without preempt=, the build default from the config does.
    write(p, "/proc/cmdline", "ro quiet\n");
    let (env, _) = check_at(p);
    assert_eq!(env.preempt.model, "voluntary");
    assert!(env.preempt.source.contains("CONFIG_PREEMPT_VOLUNTARY"));
    // A value the kernel does not know is ignored, as the kernel ignores it.
    write(p, "/proc/cmdline", "preempt=bogus\n");
    assert_eq!(check_at(p).0.preempt.model, "voluntary");
}

#[test]
fn empty_and_garbage_trees_do_not_panic() {
    let d = tempfile::tempdir().unwrap();
    let (_, r) = check_at(d.path());
    assert_eq!(r.checks.len(), 22);
    let p = d.path();
    write(
        p,
        "/proc/interrupts",
        "garbage\n\u{0}\u{1}: ::\n 5: 1 2 3\n",
    );
    write(p, "/sys/devices/system/cpu/online", "0-99999999999999\n");
    write(p, "/proc/cmdline", "isolcpus= nohz_full=,,, = == preempt\n");
    write(p, "/proc/self/limits", "Max realtime priority\n");
    write(p, "/proc/self/status", "Uid:\nGroups: x y\n");
    write(p, "/proc/swaps", "\n\n");
    write(p, "/proc/sys/kernel/osrelease", "../../../etc\n");
    let (env, r) = check_at(p);
    assert_eq!(env.cpus.count, 0);
    assert_eq!(r.checks.len(), 22);
}

#[test]
fn binary_json_parses_and_strict_exit_codes_follow_failures() {
    for (tree, strict_code) in [("rpi4-rt", 0), ("desktop-dynamic", 1)] {
        let dir = fixture(tree);
        let out = xrunlab()
            .args(["check", "--json", "--root"])
            .arg(&dir)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{tree}: without --strict");
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{tree}: stdout is not JSON: {e}"));
        assert_eq!(doc["kind"], "check");
        let checks = doc["results"]["checks"].as_array().unwrap();
        assert_eq!(checks.len(), check_at(&dir).1.checks.len());
        let fails = checks.iter().filter(|c| c["verdict"] == "fail").count();
        assert_eq!(doc["results"]["fail"].as_u64(), Some(fails as u64));
        assert_eq!(fails > 0, strict_code == 1, "{tree}");
        assert_eq!(doc["config"]["root"], dir.display().to_string());
        // The table goes to stderr when stdout carries JSON.
        assert!(String::from_utf8_lossy(&out.stderr).contains("Kernel preemption model"));
        // And the result reads back through the library's own reader.
        let parsed: xrunlab::results::ResultDoc = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(parsed.kind(), "check");

        // The gate under its name and its old one.
        for gate in ["--fail-on-problem", "--strict"] {
            xrunlab()
                .args(["check", gate, "--quiet", "--root"])
                .arg(&dir)
                .assert()
                .code(strict_code);
        }
    }
}

#[test]
fn bad_root_is_a_usage_error() {
    xrunlab()
        .args(["check", "--root", "/no/such/dir"])
        .assert()
        .code(2);
}

/// The checks every machine gets, in order; a Pi adds its own after them.
const GENERAL: [&str; 22] = [
    "user",
    "rtprio-limit",
    "rt-priority",
    "memlock",
    "cpu-dma-latency",
    "preempt",
    "threadirqs",
    "kernel-config",
    "hrtimers",
    "tickless",
    "rt-throttling",
    "mitigations",
    "governor",
    "smt",
    "isolation",
    "clocksource",
    "sound-card",
    "irq-sharing",
    "swap",
    "filesystems",
    "virtualization",
    "container",
];

#[test]
fn rpi4_throttled_names_the_pis_own_causes() {
    let (env, r) = check_at(&fixture("rpi4-throttled"));
    assert_verdicts(
        "rpi4-throttled",
        &r,
        &[
            ("user", Pass),
            ("rtprio-limit", Pass),
            ("rt-priority", Pass),
            ("memlock", Pass),
            ("cpu-dma-latency", Pass),
            ("preempt", Pass),
            ("threadirqs", Warn),
            ("kernel-config", Pass),
            ("hrtimers", Pass),
            ("tickless", Pass),
            ("rt-throttling", Pass),
            ("mitigations", Warn),
            ("governor", Warn),
            ("smt", Pass),
            ("isolation", Warn),
            ("clocksource", Pass),
            ("sound-card", Pass),
            ("irq-sharing", Warn),
            ("swap", Pass),
            ("filesystems", Pass),
            ("virtualization", Pass),
            ("container", Pass),
            ("pi-board", Pass),
            ("pi-throttled", Warn),
            ("pi-temperature", Pass),
            ("pi-clock", Warn),
            ("page-size", Pass),
            ("rt-kernel", Warn),
        ],
    );
    let ids: Vec<&str> = r.checks.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(
        ids[..22],
        GENERAL,
        "the general checks come first, in order"
    );
    // The device tree's model, NUL and all, names the board.
    assert_eq!(
        observed(&r, "pi-board"),
        "Raspberry Pi 4 Model B Rev 1.4, 4 CPUs online"
    );
    // 0x50000: bits 16 and 18, under-voltage and throttling since boot, nothing now.
    assert_eq!(
        observed(&r, "pi-throttled"),
        "get_throttled = 0x50000; since boot: under-voltage, throttled"
    );
    assert!(r.get("pi-throttled").unwrap().advice.contains("supply"));
    assert!(observed(&r, "pi-temperature").starts_with("61.9 °C"));
    assert_eq!(observed(&r, "governor"), "cpu0-3: ondemand");
    assert!(observed(&r, "pi-clock").contains("ondemand governor ramps"));
    assert!(r.get("pi-clock").unwrap().advice.contains("force_turbo=1"));
    // dwc_otg's own three handlers are one driver; the SPI controller beside it shares.
    assert!(observed(&r, "irq-sharing").contains("IRQ 40: dwc_otg"));
    assert!(observed(&r, "irq-sharing").contains("fe204000.spi"));
    assert!(r
        .get("irq-sharing")
        .unwrap()
        .advice
        .contains("blue USB 3 port"));
    assert_eq!(observed(&r, "isolation"), "none of 4 CPUs set aside");
    assert_eq!(observed(&r, "page-size"), "4 KiB");
    let rt = observed(&r, "rt-kernel");
    assert!(rt.contains("booted: 6.12.47+rpt-rpi-v8, not RT"), "{rt}");
    assert!(rt.contains("/lib/modules/6.12.47+rpt-rpi-v8-rt"), "{rt}");
    assert!(rt.contains("/boot/firmware/kernel8_rt.img"), "{rt}");
    // The stock module tree and image are not mistaken for RT ones.
    assert!(
        !rt.contains("/lib/modules/6.12.47+rpt-rpi-v8,") && !rt.contains("kernel8.img"),
        "{rt}"
    );
    assert!(r
        .get("rt-kernel")
        .unwrap()
        .advice
        .contains("kernel=kernel8_rt.img"));
    assert_eq!(env.preempt.model, "full");
    assert_eq!(r.fail, 0);
}

#[test]
fn rpi5_rt_with_16k_pages_is_clean() {
    let (env, r) = check_at(&fixture("rpi5-rt"));
    let mut want: Vec<(&str, Verdict)> = GENERAL.iter().map(|id| (*id, Pass)).collect();
    // An Arm core with spectre_v1 mitigated by default: the only warning, as on every tree.
    want.iter_mut()
        .find(|(id, _)| *id == "mitigations")
        .unwrap()
        .1 = Warn;
    for id in [
        "pi-board",
        "pi-throttled",
        "pi-temperature",
        "pi-clock",
        "page-size",
        "rt-kernel",
    ] {
        want.push((id, Pass));
    }
    assert_verdicts("rpi5-rt", &r, &want);
    assert_eq!(env.preempt.model, "rt");
    assert!(observed(&r, "pi-board").starts_with("Raspberry Pi 5 Model B Rev 1.0"));
    assert!(observed(&r, "page-size").starts_with("16 KiB"));
    assert!(observed(&r, "pi-clock").contains("force_turbo=1"));
    assert!(observed(&r, "pi-throttled").starts_with("get_throttled = 0x0"));
    assert_eq!(
        observed(&r, "rt-kernel"),
        "booted: 6.12.47-v8-16k-rt+ (PREEMPT_RT)"
    );
    // RP1's two xHCI controllers and the I2S block each have their own line.
    assert!(observed(&r, "irq-sharing").starts_with("not shared: xhci-hcd:usb1 (IRQ 131)"));
}

#[test]
fn pi_verdicts_follow_the_files_they_read() {
    let d = copy_tree("rpi5-rt");
    let p = d.path();
    let throttled = "/sys/devices/platform/soc/soc:firmware/get_throttled";
    let v = |p: &Path, id: &str| check_at(p).1.get(id).unwrap().verdict;
    // Under-voltage now: the cores are being slowed as the check runs.
    write(p, throttled, "50005\n");
    assert_eq!(v(p, "pi-throttled"), Fail);
    let (_, r) = check_at(p);
    assert!(observed(&r, "pi-throttled").contains("now: under-voltage, throttled"));
    // Soft temperature limit since boot only: a warning about cooling, not the supply.
    write(p, throttled, "80000\n");
    let (_, r) = check_at(p);
    assert_eq!(r.get("pi-throttled").unwrap().verdict, Warn);
    assert!(r.get("pi-throttled").unwrap().advice.contains("heatsink"));
    write(p, throttled, "not hex\n");
    assert_eq!(v(p, "pi-throttled"), Warn);
    write(p, "/sys/class/thermal/thermal_zone0/temp", "81500\n");
    assert_eq!(v(p, "pi-temperature"), Fail);
    write(p, "/sys/class/thermal/thermal_zone0/temp", "72000\n");
    assert_eq!(v(p, "pi-temperature"), Warn);
    // force_turbo under another board's filter does not apply to this Pi 5.
    write(
        p,
        "/boot/firmware/config.txt",
        "[pi4]\nforce_turbo=1\n[pi5]\nkernel=kernel_2712_rt.img\n",
    );
    write(
        p,
        "/sys/devices/system/cpu/cpu1/cpufreq/scaling_governor",
        "ondemand\n",
    );
    assert_eq!(v(p, "pi-clock"), Warn);
    // 4 KiB pages on a Pi 5 are named for what they are.
    write(p, "/proc/self/smaps", "KernelPageSize:        4 kB\n");
    let (_, r) = check_at(p);
    assert!(observed(&r, "page-size").contains("kernel_2712 has 16 KiB"));
    // config.txt asks for the RT image but a stock kernel came up (rpi-update #50).
    std::fs::remove_file(p.join("sys/kernel/realtime")).unwrap();
    write(
        p,
        "/proc/sys/kernel/version",
        "#1 SMP PREEMPT Debian 1:6.12.47-1+rpt1\n",
    );
    write(p, "/proc/sys/kernel/osrelease", "6.12.47+rpt-rpi-2712\n");
    let (env, r) = check_at(p);
    assert_ne!(env.preempt.model, "rt");
    assert_eq!(r.get("rt-kernel").unwrap().verdict, Warn);
    assert!(observed(&r, "rt-kernel").contains("config.txt asks for kernel=kernel_2712_rt.img"));
    // Without the model file and cpuinfo's Model line it is not a Pi: no Pi checks,
    // but the installed RT kernel is still reported.
    std::fs::remove_file(p.join("proc/device-tree/model")).unwrap();
    write(p, "/proc/cpuinfo", "processor\t: 0\nCPU part\t: 0xd0b\n");
    std::fs::remove_file(p.join(throttled.trim_start_matches('/'))).unwrap();
    let (_, r) = check_at(p);
    let ids: Vec<&str> = r.checks.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids[..22], GENERAL);
    assert_eq!(ids[22..], ["rt-kernel"]);
}

#[test]
fn the_binary_reads_the_pi_trees() {
    let out = xrunlab()
        .args(["check", "--root"])
        .arg(fixture("rpi4-throttled"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    for want in [
        "Raspberry Pi board: Raspberry Pi 4 Model B Rev 1.4",
        "SoC throttling and under-voltage: get_throttled = 0x50000",
        "RT kernel installed and booted: booted: 6.12.47+rpt-rpi-v8, not RT",
        "20 ok, 8 warn, 0 fail",
    ] {
        assert!(text.contains(want), "missing '{want}' in:\n{text}");
    }
    let out = xrunlab()
        .args(["check", "--fail-on-problem", "--root"])
        .arg(fixture("rpi5-rt"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Kernel page size: 16 KiB"), "{text}");
    assert!(text.contains("27 ok, 1 warn, 0 fail"), "{text}");
    // --root is documented, with an example.
    let help = xrunlab().args(["check", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("--root <DIR>") && help.contains("xrunlab check --root"),
        "{help}"
    );
}

#[test]
fn a_bare_pi_tree_says_what_it_could_not_read() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    write(
        p,
        "/proc/device-tree/model",
        "Raspberry Pi 4 Model B Rev 1.5\0",
    );
    write(p, "/boot/firmware/config.txt", "arm_freq=1800\n");
    let (_, r) = check_at(p);
    let v = |id: &str| r.get(id).unwrap().verdict;
    assert_eq!(v("pi-throttled"), Warn);
    assert_eq!(v("pi-temperature"), Warn);
    assert_eq!(v("page-size"), Warn);
    // No cpufreq: the firmware sets the clock, not a governor that is not there.
    assert_eq!(
        observed(&r, "pi-clock"),
        "/boot/firmware/config.txt: arm_freq=1800; no cpufreq governor: the firmware alone sets the clock"
    );
    assert_eq!(
        observed(&r, "rt-kernel"),
        "booted: unknown kernel; no RT kernel installed (see preempt)"
    );
    // Older images keep config.txt in /boot.
    std::fs::remove_file(p.join("boot/firmware/config.txt")).unwrap();
    write(p, "/boot/config.txt", "force_turbo=1\n");
    assert!(observed(&check_at(p).1, "pi-clock").starts_with("/boot/config.txt: force_turbo=1"));
}
