//! `xrunlab tune` against a copy of the `tune-desktop` fixture tree (a 4-CPU desktop with
//! intel_pstate, threaded IRQs, a PCI sound card and a USB audio interface behind xhci, a v1
//! cpuset and a v2 hierarchy without cpuset), and, as root, against this machine with every
//! value checked back.
//!
//! The fixture tests compare the whole tree before apply and after restore, so any value
//! not put back fails them.

mod common;

use common::{in_ci, is_root, require, show, xrunlab, xrunlab_wide};
use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use xrunlab::system::tune::{self, Profile};
use xrunlab::system::Root;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/system/tune-desktop")
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let ty = e.file_type().unwrap();
        if ty.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src).unwrap(), &dst).unwrap();
        } else if ty.is_dir() {
            copy_tree(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// Every path under `dir` (but the journal's `run/`) with its contents, link target or
/// "dir".
fn snapshot(dir: &Path) -> BTreeMap<String, String> {
    fn walk(base: &Path, d: &Path, out: &mut BTreeMap<String, String>) {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(base).unwrap().display().to_string();
            if rel.starts_with("run") {
                continue;
            }
            let meta = std::fs::symlink_metadata(&p).unwrap();
            if meta.file_type().is_symlink() {
                out.insert(
                    rel,
                    format!("-> {}", std::fs::read_link(&p).unwrap().display()),
                );
            } else if meta.is_dir() {
                out.insert(rel, "dir".into());
                walk(base, &p, out);
            } else {
                out.insert(rel, std::fs::read_to_string(&p).unwrap());
            }
        }
    }
    let mut m = BTreeMap::new();
    walk(dir, dir, &mut m);
    m
}

struct Tree {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    journal: PathBuf,
}

impl Tree {
    fn new() -> Tree {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        copy_tree(&fixture(), &root);
        let journal = root.join("run/xrunlab/tune.json");
        Tree {
            _tmp: tmp,
            root,
            journal,
        }
    }

    fn read(&self, abs: &str) -> String {
        std::fs::read_to_string(self.root.join(abs.trim_start_matches('/')))
            .unwrap_or_else(|e| panic!("{abs}: {e}"))
            .trim()
            .to_string()
    }

    fn write(&self, abs: &str, v: &str) {
        std::fs::write(self.root.join(abs.trim_start_matches('/')), v).unwrap();
    }

    fn tune(&self, args: &[&str]) -> std::process::Output {
        // Wide: the tests look up lines by their words, which 80 columns may wrap.
        xrunlab_wide()
            .arg("tune")
            .args(args)
            .arg("--root")
            .arg(&self.root)
            .arg("--journal")
            .arg(&self.journal)
            .output()
            .unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let o = self.tune(args);
        assert_eq!(o.status.code(), Some(0), "tune {args:?}: {}", show(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn json(&self, args: &[&str]) -> serde_json::Value {
        let mut a = args.to_vec();
        a.push("--json");
        serde_json::from_str(&self.ok(&a)).unwrap()
    }
}

const CPUSET: &str = "/sys/fs/cgroup/cpuset";

#[test]
fn plan_reads_every_setting_and_says_why() {
    let t = Tree::new();
    let plan = tune::build_plan(&Root::new(&t.root), Profile::Audio, None).unwrap();
    assert_eq!(plan.audio_cpus, vec![3], "the last CPU by default");
    assert_eq!(plan.housekeeping_cpus, vec![0, 1, 2]);
    let get = |id: &str| {
        plan.changes
            .iter()
            .find(|c| c.id == id)
            .unwrap_or_else(|| panic!("no {id} in {:#?}", plan.changes))
    };
    for cpu in 0..4 {
        assert_eq!(get(&format!("epp:cpu{cpu}")).wanted, "performance");
    }
    assert_eq!(get("governor:cpu0").current.as_deref(), Some("powersave"));
    assert!(get("governor:cpu3")
        .skip
        .as_deref()
        .unwrap()
        .contains("does not offer"));
    // The PCI card's MSI and the xhci controller the USB interface hangs off go to the
    // audio CPU; everything else away from it.
    assert_eq!(get("irq:130").wanted, "3");
    assert_eq!(get("irq:120").wanted, "3");
    assert_eq!(get("irq:131").wanted, "0-2");
    assert_eq!(get("irq-thread:irq/130-snd_hda").wanted, "fifo 90");
    assert_eq!(
        get("irq-thread:irq/130-snd_hda").current.as_deref(),
        Some("fifo 50")
    );
    assert_eq!(get("irq-thread:irq/120-xhci_hc").wanted, "fifo 90");
    assert!(plan
        .changes
        .iter()
        .all(|c| c.id != "irq-thread:irq/131-nvme0q1"));
    assert_eq!(get("workqueue").wanted, "7");
    // Movable kernel threads leave the audio CPU; per-CPU ones are a note, kernel-managed
    // ones one skipped line naming them; IRQ threads follow their IRQ.
    assert_eq!(get("kthread:14").wanted, "0-2");
    assert_eq!(get("kthread:14").current.as_deref(), Some("0-3"));
    assert_eq!(get("kthread:15").wanted, "2");
    for pid in [16, 30, 31, 131, 141] {
        let id = format!("kthread:{pid}");
        assert!(plan.changes.iter().all(|c| c.id != id), "{id}");
    }
    let kept = get("kthreads:kernel-managed");
    assert!(
        kept.skip.as_deref().unwrap().contains("kworker/u8:1"),
        "{kept:?}"
    );
    assert!(
        plan.notes
            .iter()
            .any(|n| n.contains("1 per-CPU kernel threads")),
        "{:?}",
        plan.notes
    );
    assert_eq!(get("timer-migration").wanted, "0");
    assert_eq!(get("cpuset").current.as_deref(), Some("absent"));
    assert_eq!(get("swappiness").wanted, "10");
    assert!(
        plan.changes.iter().all(|c| c.id != "rt-runtime"),
        "audio leaves RT throttling"
    );
    for c in &plan.changes {
        assert!(!c.why.is_empty(), "{} says why", c.id);
    }
    assert_eq!(get("cpuset").addresses.as_deref(), Some("isolation"));
    // threadirqs is on this command line; the rest of the boot line is missing.
    assert_eq!(
        plan.boot.cmdline,
        "preempt=full isolcpus=managed_irq,domain,3 nohz_full=3 rcu_nocbs=3 irqaffinity=0-2"
    );
    assert!(plan.notes.iter().any(|n| n.contains("cpu_dma_latency")));

    let m = tune::build_plan(&Root::new(&t.root), Profile::Measure, Some(&[2, 3])).unwrap();
    let rt = m.changes.iter().find(|c| c.id == "rt-runtime").unwrap();
    assert_eq!(rt.wanted, "-1");
    assert!(m.notes.iter().any(|n| n.contains("watchdog")));
    assert!(m.boot.cmdline.contains("mitigations=off"));
    let irq = m.changes.iter().find(|c| c.id == "irq:131").unwrap();
    assert_eq!(irq.wanted, "0-1");

    // The CLI prints the same plan and writes nothing.
    let before = snapshot(&t.root);
    let text = t.ok(&[]);
    assert!(text.contains("IRQ 130 (sound) affinity"), "{text}");
    assert!(text.contains("[check: isolation]"), "{text}");
    assert!(text.contains("nohz_full=3"), "{text}");
    assert_eq!(snapshot(&t.root), before);
    assert!(!t.journal.exists());
}

#[test]
fn apply_then_restore_puts_every_value_back() {
    let t = Tree::new();
    let before = snapshot(&t.root);
    let r = t.json(&["--apply", "--profile", "measure"]);
    let items = r["items"].as_array().unwrap();
    let applied = items.iter().filter(|i| i["outcome"] == "applied").count();
    assert_eq!(applied, 22, "{r:#}");

    assert_eq!(
        t.read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        "performance"
    );
    assert_eq!(
        t.read("/sys/devices/system/cpu/cpu3/cpufreq/scaling_governor"),
        "powersave"
    );
    assert_eq!(
        t.read("/sys/devices/system/cpu/cpu3/cpufreq/energy_performance_preference"),
        "performance"
    );
    assert_eq!(t.read("/proc/irq/130/smp_affinity_list"), "3");
    assert_eq!(t.read("/proc/irq/120/smp_affinity_list"), "3");
    assert_eq!(t.read("/proc/irq/0/smp_affinity_list"), "0-2");
    let stat = t.read("/proc/141/stat");
    let f: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    assert_eq!((f[37], f[38]), ("90", "1"), "{stat}");
    assert_eq!(t.read("/sys/devices/virtual/workqueue/cpumask"), "7");
    // Kernel threads: off the audio CPU, each keeping the rest of its CPUs.
    let cpus_of = |pid: u32| {
        t.read(&format!("/proc/{pid}/status"))
            .lines()
            .find_map(|l| {
                l.strip_prefix("Cpus_allowed_list:")
                    .map(|v| v.trim().to_string())
            })
            .unwrap()
    };
    assert_eq!(cpus_of(14), "0-2");
    assert_eq!(cpus_of(15), "2");
    assert_eq!(cpus_of(16), "0-1", "never on the audio CPU: left");
    assert_eq!(cpus_of(30), "3", "per-CPU: left");
    assert_eq!(cpus_of(31), "0-3", "kernel-managed: left");
    assert_eq!(t.read("/proc/sys/kernel/timer_migration"), "0");
    assert_eq!(t.read("/proc/sys/kernel/sched_rt_runtime_us"), "-1");
    assert_eq!(t.read("/proc/sys/vm/swappiness"), "10");
    assert_eq!(t.read(&format!("{CPUSET}/xrunlab-audio/cpuset.cpus")), "3");
    assert_eq!(
        t.read(&format!("{CPUSET}/xrunlab-audio/cpuset.cpu_exclusive")),
        "1"
    );
    assert_eq!(
        t.read(&format!("{CPUSET}/xrunlab-system/cpuset.cpus")),
        "0-2"
    );
    assert_eq!(
        t.read(&format!("{CPUSET}/xrunlab-system/tasks")),
        "1\n2\n131\n900"
    );
    assert_eq!(t.read(&format!("{CPUSET}/tasks")), "");

    let j = common::read_json(&t.journal);
    assert!(j["pid"].as_u64().unwrap() > 0);
    let swap = j["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"] == "swappiness")
        .unwrap();
    assert_eq!(swap["original"], "60");

    let st = t.json(&["--status"]);
    let entries = st["applied"]["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 22);
    assert!(entries.iter().all(|e| e["drifted"] == false), "{st:#}");
    assert_eq!(
        st["applied"]["pid_alive"], false,
        "the applying process has exited"
    );

    let text = t.ok(&["--restore"]);
    assert!(text.contains("22 restored; journal removed"), "{text}");
    assert!(!t.journal.exists());
    assert_eq!(snapshot(&t.root), before);
    // Nothing applied: restore and status say so and succeed.
    assert!(t.ok(&["--restore"]).contains("nothing is applied"));
    assert!(t.ok(&["--status"]).contains("nothing applied"));
}

#[test]
fn a_second_apply_keeps_the_original_values() {
    let t = Tree::new();
    let before = snapshot(&t.root);
    t.ok(&["--apply"]);
    // Something changes a tuned value behind our back; status sees it.
    t.write("/proc/sys/vm/swappiness", "30\n");
    let st = t.json(&["--status"]);
    let swap = st["applied"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"] == "swappiness")
        .unwrap()
        .clone();
    assert_eq!(swap["drifted"], true, "{st:#}");
    assert_eq!(swap["now"], "30");
    let text = t.ok(&["--status"]);
    assert!(text.contains("1 drifted since"), "{text}");

    let r = t.json(&["--apply"]);
    let items = r["items"].as_array().unwrap();
    assert_eq!(
        items.iter().filter(|i| i["outcome"] == "applied").count(),
        1,
        "{r:#}"
    );
    let j = common::read_json(&t.journal);
    let orig: Vec<_> = j["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["id"] == "swappiness")
        .map(|e| e["original"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(orig, vec!["60"], "the first original is kept");
    t.ok(&["--restore"]);
    assert_eq!(snapshot(&t.root), before);
}

#[test]
fn the_journal_survives_kill_9_mid_apply() {
    let t = Tree::new();
    let before = snapshot(&t.root);
    let mut child = std::process::Command::new(common::bin())
        .args(["tune", "--apply", "--root"])
        .arg(&t.root)
        .arg("--journal")
        .arg(&t.journal)
        // 7 cpufreq writes, 6 IRQs, 2 IRQ threads, workqueue, 2 kernel threads, timer
        // migration, cpuset: the pause comes right after the cpuset was made, before
        // swappiness.
        .env(tune::PAUSE_ENV, "20")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut paused = false;
    for line in std::io::BufReader::new(stderr).lines() {
        if line.unwrap().contains("paused after 20 writes") {
            paused = true;
            break;
        }
    }
    assert!(paused, "the child never reached the pause");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    assert!(t.root.join("sys/fs/cgroup/cpuset/xrunlab-audio").is_dir());
    assert_eq!(t.read("/proc/sys/vm/swappiness"), "60", "not reached");
    let j = common::read_json(&t.journal);
    assert_eq!(j["entries"].as_array().unwrap().len(), 20);

    let st = t.ok(&["--status"]);
    assert!(st.contains("(exited)"), "{st}");
    let text = t.ok(&["--restore"]);
    assert!(text.contains("20 restored"), "{text}");
    assert_eq!(snapshot(&t.root), before);
}

#[test]
fn unwritable_and_missing_settings_are_skipped_not_fatal() {
    let t = Tree::new();
    // IRQ 9's file refuses every write (a 0444 sysctl refuses even root); IRQ 16 has none.
    let irq9 = t.root.join("proc/irq/9/smp_affinity_list");
    std::fs::remove_file(&irq9).unwrap();
    std::os::unix::fs::symlink("/proc/sys/kernel/ngroups_max", &irq9).unwrap();
    let irq16 = t.root.join("proc/irq/16/smp_affinity_list");
    std::fs::remove_file(&irq16).unwrap();
    std::fs::create_dir(&irq16).unwrap();
    std::fs::remove_file(t.root.join("proc/sys/kernel/timer_migration")).unwrap();
    let before = snapshot(&t.root);

    let plan = t.ok(&["--plan"]);
    assert!(plan.contains("smp_affinity_list is missing"), "{plan}");
    assert!(
        !plan.contains("Timer migration"),
        "absent setting not planned: {plan}"
    );

    let r = t.json(&["--apply"]);
    let item = |id: &str| {
        r["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["id"] == id)
            .unwrap_or_else(|| panic!("{id}: {r:#}"))
            .clone()
    };
    let skipped = |id: &str| {
        item(id)["outcome"]["skipped"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    assert!(skipped("irq:9").contains("smp_affinity_list"), "{r:#}");
    assert!(skipped("irq:16").contains("missing"), "{r:#}");
    assert_eq!(item("irq:131")["outcome"], "applied");
    assert_eq!(item("swappiness")["outcome"], "applied");
    let j = common::read_json(&t.journal);
    assert!(
        j["entries"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["id"] != "irq:9"),
        "a refused write leaves no journal entry"
    );
    t.ok(&["--restore"]);
    assert_eq!(snapshot(&t.root), before);
}

#[test]
fn a_failed_restore_keeps_what_failed_and_exits_1() {
    let t = Tree::new();
    t.ok(&["--apply"]);
    let swap = t.root.join("proc/sys/vm/swappiness");
    std::fs::remove_file(&swap).unwrap();
    std::fs::create_dir(&swap).unwrap();
    let o = t.tune(&["--restore"]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    // What failed goes to stderr: a failed restore must not read as a success.
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("FAILED") && err.contains("vm.swappiness"),
        "{err}"
    );
    assert!(!String::from_utf8_lossy(&o.stdout).contains("FAILED"));
    let j = common::read_json(&t.journal);
    let left: Vec<_> = j["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].clone())
        .collect();
    assert_eq!(left, vec![serde_json::json!("swappiness")]);
    // Fixed, the retry finishes the job.
    std::fs::remove_dir(&swap).unwrap();
    std::fs::write(&swap, "10\n").unwrap();
    assert!(t.ok(&["--restore"]).contains("1 restored; journal removed"));
    assert_eq!(t.read("/proc/sys/vm/swappiness"), "60");
}

#[test]
fn a_cgroup_v2_partition_where_v2_has_cpuset() {
    let t = Tree::new();
    t.write(
        "/sys/fs/cgroup/unified/cgroup.controllers",
        "cpuset cpu io memory\n",
    );
    let before = snapshot(&t.root);
    let plan = t.ok(&["--plan"]);
    assert!(
        plan.contains("cgroup v2 partition /sys/fs/cgroup/unified/xrunlab-audio"),
        "{plan}"
    );
    t.ok(&["--apply"]);
    let g = "/sys/fs/cgroup/unified/xrunlab-audio";
    assert_eq!(t.read(&format!("{g}/cpuset.cpus")), "3");
    assert_eq!(t.read(&format!("{g}/cpuset.cpus.partition")), "root");
    assert_eq!(
        t.read("/sys/fs/cgroup/unified/cgroup.subtree_control"),
        "cpuset"
    );
    assert!(!t.root.join("sys/fs/cgroup/cpuset/xrunlab-audio").exists());
    t.ok(&["--restore"]);
    assert_eq!(
        snapshot(&t.root),
        before,
        "controller disabled again, group gone"
    );
}

#[test]
fn bad_usage_exits_2() {
    let t = Tree::new();
    for (args, says) in [
        (&["--cpus", "7"][..], "not online"),
        (&["--cpus", "0-3"][..], "leaves no CPU"),
        (&["--cpus", "x"][..], "bad CPU list"),
        (&["--restore", "--profile", "measure"][..], "cannot be used"),
        (&["--measure"][..], "--apply"),
        (&["--apply", "--measure"][..], "cannot run with --root"),
    ] {
        let o = t.tune(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", show(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let o = xrunlab()
        .args(["tune", "--root", "/nonexistent-root"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
}

/// The live tests change the same machine: one at a time.
static LIVE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A live test's turn: root and two online CPUs (else skipped with the reason, or failed
/// under CI), then the machine to itself.
fn live_turn(why_root: &str) -> Option<std::sync::MutexGuard<'static, ()>> {
    if !require(is_root(), why_root) {
        return None;
    }
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    if !require(online.trim() != "0", "two or more online CPUs") {
        return None;
    }
    Some(LIVE.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Restores the live system whatever happens to the test (panic included).
struct LiveGuard(PathBuf);

impl Drop for LiveGuard {
    fn drop(&mut self) {
        if self.0.exists() {
            let r = tune::restore(&Root::default(), &self.0);
            eprintln!("live guard restore: {r:?}");
        }
    }
}

/// On this machine: the measure profile applied and restored for real, every journalled
/// value back afterwards.
#[test]
fn live_apply_and_restore_round_trip() {
    let Some(_one) = live_turn("root, to write /proc and /sys") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let journal = tmp.path().join("tune.json");
    let files = [
        "/sys/devices/virtual/workqueue/cpumask",
        "/proc/sys/kernel/timer_migration",
        "/proc/sys/kernel/sched_rt_runtime_us",
        "/proc/sys/vm/swappiness",
    ];
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
    };
    let irqs: Vec<String> = std::fs::read_dir("/proc/irq")
        .unwrap()
        .flatten()
        .map(|e| e.path().join("smp_affinity_list").display().to_string())
        .filter(|p| Path::new(p).exists())
        .collect();
    let before: BTreeMap<String, Option<String>> = files
        .iter()
        .map(|s| s.to_string())
        .chain(irqs.iter().cloned())
        .map(|p| (p.clone(), read(&p)))
        .collect();
    let kthreads_before = kthread_cpus();
    let irqs_before = irq_delivery();
    let guard = LiveGuard(journal.clone());
    let o = xrunlab()
        .args([
            "tune",
            "--apply",
            "--profile",
            "measure",
            "--json",
            "--journal",
        ])
        .arg(&journal)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let outcome = |id: &str| {
        r["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["id"] == id)
            .map(|i| i["outcome"].clone())
    };
    // Every writable setting this machine has was changed (or already was as wanted).
    let changed_or_set = |id: &str| {
        outcome(id).is_none_or(|o| o == "applied" || o == "already-set" || in_ci_skip(&o))
    };
    fn in_ci_skip(o: &serde_json::Value) -> bool {
        // A refusal is allowed only where the kernel refuses (reported, not fatal).
        o.get("skipped").is_some() && !in_ci()
    }
    for id in [
        "workqueue",
        "timer-migration",
        "rt-runtime",
        "swappiness",
        "cpuset",
    ] {
        assert!(changed_or_set(id), "{id}: {:?}", outcome(id));
    }
    if outcome("timer-migration").is_some() {
        assert_eq!(
            read("/proc/sys/kernel/timer_migration").as_deref(),
            Some("0")
        );
    }
    if outcome("rt-runtime").is_some() {
        assert_eq!(
            read("/proc/sys/kernel/sched_rt_runtime_us").as_deref(),
            Some("-1")
        );
    }
    let cpuset_made = outcome("cpuset") == Some(serde_json::json!("applied"));
    let j = common::read_json(&journal);
    let entries = j["entries"].as_array().unwrap();
    assert!(
        entries
            .iter()
            .any(|e| e["id"].as_str().unwrap().starts_with("irq:")),
        "at least one IRQ moved: {r:#}"
    );
    let st = xrunlab()
        .args(["tune", "--status", "--json", "--journal"])
        .arg(&journal)
        .output()
        .unwrap();
    let st: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    assert_eq!(
        st["applied"]["entries"].as_array().unwrap().len(),
        entries.len(),
        "{st:#}"
    );

    let o = xrunlab()
        .args(["tune", "--restore", "--journal"])
        .arg(&journal)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    drop(guard);
    assert!(!journal.exists());
    let after: BTreeMap<String, Option<String>> =
        before.keys().map(|p| (p.clone(), read(p))).collect();
    assert_eq!(after, before, "every value back");
    assert_same_kthreads(&kthreads_before);
    assert_same_irq_delivery(&irqs_before);
    assert_no_groups_left();
    if cpuset_made {
        // This test process went to the system set and came back.
        let cg = std::fs::read_to_string("/proc/self/cgroup").unwrap();
        assert!(!cg.contains("xrunlab-"), "{cg}");
    }
}

/// `tune --apply --measure` on this machine: latency before and after, then everything back.
#[test]
fn live_measure_before_and_after() {
    let Some(_one) = live_turn("root, to tune and to measure at SCHED_FIFO") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let journal = tmp.path().join("tune.json");
    let _guard = LiveGuard(journal.clone());
    let swappiness = std::fs::read_to_string("/proc/sys/vm/swappiness").unwrap();
    let o = xrunlab()
        .args([
            "tune",
            "--apply",
            "--measure",
            "--measure-duration",
            "1s",
            "--json",
            "--journal",
        ])
        .arg(&journal)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for phase in ["before", "after"] {
        assert!(
            doc[phase]["count"].as_u64().unwrap() > 1000,
            "{phase}: {doc:#}"
        );
    }
    let human = String::from_utf8_lossy(&o.stderr);
    assert!(human.contains("before and after tuning"), "{human}");
    assert!(human.contains("restored below"), "{human}");
    assert!(!human.contains("undo with"), "already restored: {human}");
    assert!(!journal.exists(), "restored and removed");
    assert_eq!(
        std::fs::read_to_string("/proc/sys/vm/swappiness").unwrap(),
        swappiness
    );
    assert!(!Path::new("/sys/fs/cgroup/cpuset/xrunlab-audio").exists());
}

/// Every kernel thread's CPUs (`Cpus_allowed_list`), by pid and name.
fn kthread_cpus() -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        let root = Root::default();
        let flags = tune::settings::thread_flags(&root, pid).unwrap_or(0);
        if flags & tune::settings::PF_KTHREAD == 0 {
            continue;
        }
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        if let Some(c) = tune::settings::status_field(&status, "Cpus_allowed_list") {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            out.insert(format!("{pid} {}", comm.trim()), c);
        }
    }
    out
}

/// Every kernel thread that still exists has the CPUs it had (threads come and go).
fn assert_same_kthreads(before: &BTreeMap<String, String>) {
    let now = kthread_cpus();
    for (k, v) in before {
        if let Some(n) = now.get(k) {
            assert_eq!(n, v, "kernel thread {k}: CPUs not restored");
        }
    }
}

#[test]
fn a_kernel_thread_that_refuses_is_skipped_not_fatal() {
    let t = Tree::new();
    let root = Root::new(&t.root);
    let plan = tune::build_plan(&root, Profile::Audio, None).unwrap();
    assert!(plan.changes.iter().any(|c| c.id == "kthread:14"));
    // Between plan and apply the kernel made it unmovable (as a thread that binds itself).
    let stat = t.read("/proc/14/stat").replace(" 2129984 ", " 69238848 ");
    t.write("/proc/14/stat", &stat);
    let r = tune::apply(&root, &plan, &t.journal).unwrap();
    let item = r.items.iter().find(|i| i.id == "kthread:14").unwrap();
    match &item.outcome {
        tune::Outcome::Skipped(why) => assert!(why.contains("EINVAL"), "{why}"),
        o => panic!("{o:?}"),
    }
    let j = common::read_json(&t.journal);
    assert!(
        j["entries"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["id"] != "kthread:14"),
        "a refused write leaves no journal entry"
    );
    assert!(t
        .read("/proc/14/status")
        .contains("Cpus_allowed_list:\t0-3"));
    assert_eq!(tune::restore(&root, &t.journal).unwrap().failed(), 0);
}

/// `--cpus` on the measuring commands is accepted and recorded in their results.
#[test]
fn measure_commands_take_cpus_and_record_them() {
    let tmp = tempfile::tempdir().unwrap();
    let cpu = "0";
    let runs: [(&str, &[&str], &str); 3] = [
        (
            "rtl",
            &[
                "rtl",
                "--driver",
                "virtual",
                "--loopback",
                "--buffer",
                "256",
                "--periods",
                "4",
                "--profile",
                "preemptrt-hifiberry",
                "--fraction",
                "0.37",
                "--duration",
                "15s",
                "--policy",
                "other",
            ],
            "/config/cpus",
        ),
        (
            "latencytest",
            &[
                "latencytest",
                "--classes",
                "none",
                "--phase-duration",
                "300ms",
                "--policy",
                "other",
                "--no-mlock",
            ],
            "/config/cpus",
        ),
        (
            "load",
            &[
                "load",
                "--driver",
                "sim",
                "--buffers",
                "256",
                "--tracks",
                "1",
                "--plugins",
                "burn(10%)",
                "--duration",
                "100ms",
                "--max-instances",
                "4",
                "--stress",
                "none",
            ],
            "/config/cpus",
        ),
    ];
    for (name, args, pointer) in runs {
        let out = tmp.path().join(format!("{name}.json"));
        let o = xrunlab()
            .args(args)
            .args(["--cpus", cpu, "-q", "-o"])
            .arg(&out)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{name}: {}", show(&o));
        let doc = common::read_json(&out);
        assert_eq!(
            doc.pointer(pointer),
            Some(&serde_json::json!([0])),
            "{name}: {doc:#}"
        );
    }
    let o = xrunlab()
        .args(["rtl", "--driver", "virtual", "--loopback", "--cpus", "999"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
}

/// `suite --tuned --smoke` as root: the tuned stages ran, the manifest records the tuning,
/// the report shows before and after, the verdict read only the untuned results, and every
/// setting the profile touches is back afterwards.
#[test]
fn live_suite_tuned_restores_everything() {
    let Some(_one) = live_turn("root, to tune and to measure at SCHED_FIFO") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let journal = tmp.path().join("tune.json");
    let _guard = LiveGuard(journal.clone());
    let dir = tmp.path().join("suite");
    // What the profile may write, as the plan names it.
    let plan = tune::build_plan(&Root::default(), Profile::Audio, None).unwrap();
    let targets: Vec<tune::Target> = plan.changes.iter().map(|c| c.target.clone()).collect();
    let read_all = || -> Vec<Option<String>> {
        targets
            .iter()
            .map(|t| tune::settings::read(&Root::default(), t))
            .collect()
    };
    let before = read_all();
    let kthreads_before = kthread_cpus();
    let o = xrunlab()
        .args(["suite", "--tuned", "--smoke", "-o"])
        .arg(&dir)
        .env(tune::JOURNAL_ENV, &journal)
        .output()
        .unwrap();
    let m = common::read_json(&dir.join("manifest.json"));
    assert!(
        matches!(o.status.code(), Some(0) | Some(1)),
        "{}\n{m:#}",
        show(&o)
    );
    let stages = m["stages"].as_array().unwrap();
    for name in ["latency-idle-tuned", "latency-stress-tuned", "load-tuned"] {
        let s = stages
            .iter()
            .find(|s| s["stage"] == name)
            .unwrap_or_else(|| panic!("{name}: {m:#}"));
        assert_eq!(s["status"], "ok", "{name}: {s:#}");
        assert!(
            s["file"]
                .as_str()
                .unwrap()
                .ends_with(&format!("-{name}.json")),
            "{s:#}"
        );
        assert!(
            s["argv"].as_array().unwrap().iter().any(|a| a == "--cpus"),
            "{s:#}"
        );
    }
    let tuning = &m["tuning"];
    assert_eq!(tuning["profile"], "audio", "{m:#}");
    assert!(tuning["error"].is_null(), "{tuning:#}");
    let applied = tuning["applied"].as_array().unwrap();
    assert!(
        applied.iter().any(|i| i["outcome"] == "applied"),
        "{tuning:#}"
    );
    let restored = tuning["restored"].as_array().unwrap();
    assert!(restored.iter().all(|r| r["error"].is_null()), "{tuning:#}");
    assert_eq!(
        restored.len(),
        applied.iter().filter(|i| i["outcome"] == "applied").count()
    );
    // The tuned latency stage measured from inside the audio cpuset.
    let log = std::fs::read_to_string(
        dir.join(
            stages
                .iter()
                .find(|s| s["stage"] == "latency-idle-tuned")
                .unwrap()["log"]
                .as_str()
                .unwrap(),
        ),
    )
    .unwrap();
    assert!(log.contains("measuring inside its audio cpuset"), "{log}");
    // The verdict read the untuned results only.
    let v = stages.iter().find(|s| s["stage"] == "verdict").unwrap();
    assert_eq!(v["status"], "ok", "{v:#}");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("Tuning: before and after"));
    assert!(html.contains("Scheduling latency, idle: before and after tuning"));
    assert!(html.contains("DSP load: most instances per track, before and after tuning"));

    assert!(!journal.exists(), "restored and removed");
    assert_eq!(read_all(), before, "every setting back");
    assert_same_kthreads(&kthreads_before);
    assert_no_groups_left();
}

/// An edited journal must not choose what root writes: an entry whose target no profile
/// produces makes the whole journal refused (exit 2), and nothing is written.
#[test]
fn a_journal_naming_another_file_is_refused_whole() {
    let t = Tree::new();
    t.ok(&["--apply"]);
    std::fs::create_dir_all(t.root.join("etc")).unwrap();
    t.write("/etc/passwd", "root:x:0:0\n");
    let mut j = common::read_json(&t.journal);
    let entries = j["entries"].as_array_mut().unwrap();
    let swap = entries
        .iter_mut()
        .find(|e| e["id"] == "swappiness")
        .unwrap();
    swap["target"]["path"] = "/etc/passwd".into();
    swap["original"] = "pwned".into();
    let before = std::fs::read_to_string(&t.journal).unwrap();
    std::fs::write(&t.journal, serde_json::to_string(&j).unwrap()).unwrap();
    let o = t.tune(&["--restore"]);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("/etc/passwd is not a setting any profile tunes")
            && err.contains("--defaults"),
        "{err}"
    );
    assert_eq!(t.read("/etc/passwd"), "root:x:0:0");
    assert_ne!(t.read("/proc/sys/vm/swappiness"), "60", "nothing restored");
    assert_ne!(std::fs::read_to_string(&t.journal).unwrap(), before);
    // Traversal through an allowed prefix is no better.
    let mut j = common::read_json(&t.journal);
    let entries = j["entries"].as_array_mut().unwrap();
    let swap = entries
        .iter_mut()
        .find(|e| e["id"] == "swappiness")
        .unwrap();
    swap["target"]["path"] = "/proc/irq/1/../../../etc/passwd".into();
    std::fs::write(&t.journal, serde_json::to_string(&j).unwrap()).unwrap();
    assert_eq!(t.tune(&["--restore"]).status.code(), Some(2));
    assert_eq!(t.read("/etc/passwd"), "root:x:0:0");
}

/// Every journal that cannot be used is exit 2 with the reason, before memory grows.
#[test]
fn unusable_journals_are_exit_2_with_the_reason() {
    let t = Tree::new();
    std::fs::create_dir_all(t.journal.parent().unwrap()).unwrap();
    type Make = Box<dyn Fn(&Path)>;
    let cases: Vec<(&str, Make)> = vec![
        (
            "is not UTF-8 text",
            Box::new(|p: &Path| std::fs::write(p, [0xff, 0xfe, 0x00, 0x9c]).unwrap()),
        ),
        (
            "is a directory",
            Box::new(|p: &Path| std::fs::create_dir(p).unwrap()),
        ),
        (
            "is a FIFO",
            Box::new(|p: &Path| nix::unistd::mkfifo(p, nix::sys::stat::Mode::S_IRWXU).unwrap()),
        ),
        (
            "more than a tune journal can be",
            Box::new(|p: &Path| std::fs::File::create(p).unwrap().set_len(64 << 20).unwrap()),
        ),
        (
            "not a tune journal",
            Box::new(|p: &Path| std::fs::write(p, "{ torn").unwrap()),
        ),
    ];
    for (why, make) in cases {
        let _ = std::fs::remove_dir(&t.journal);
        let _ = std::fs::remove_file(&t.journal);
        make(&t.journal);
        for args in [&["--restore"][..], &["--status"], &["--apply"]] {
            let o = t.tune(args);
            assert_eq!(o.status.code(), Some(2), "{why} {args:?}: {}", show(&o));
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(err.contains(why), "{why} {args:?}: {err}");
        }
    }
}

/// `--restore --defaults`: with the journal damaged, the kernel's defaults come back and the
/// journal is moved aside so the next `--apply` can start.
#[test]
fn restore_defaults_puts_the_kernels_values_back() {
    let t = Tree::new();
    t.ok(&["--apply"]);
    assert!(t.root.join(&CPUSET[1..]).join("xrunlab-audio").is_dir());
    std::fs::write(&t.journal, "{ torn").unwrap();
    assert_eq!(t.tune(&["--restore"]).status.code(), Some(2));
    let out = t.ok(&["--restore", "--defaults"]);
    assert!(out.contains("the kernel's defaults"), "{out}");
    assert!(out.contains("moved aside"), "{out}");
    assert_eq!(t.read("/proc/sys/vm/swappiness"), "60");
    assert_eq!(t.read("/proc/sys/kernel/timer_migration"), "1");
    assert!(!t.root.join(&CPUSET[1..]).join("xrunlab-audio").exists());
    assert!(!t.root.join(&CPUSET[1..]).join("xrunlab-system").exists());
    assert!(!t.journal.exists());
    assert!(t.journal.with_file_name("tune.json.refused").exists());
    // Nothing is left to put back: a second run changes nothing, and --apply works again.
    let again = t.json(&["--restore", "--defaults"]);
    assert_eq!(again["items"].as_array().unwrap().len(), 0, "{again:#}");
    t.ok(&["--apply"]);
    t.ok(&["--restore"]);
}

/// As root, a journal that others could have edited is refused.
#[test]
fn as_root_a_journal_others_can_write_is_refused() {
    if !require(is_root(), "root, to see a journal through root's eyes") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let journal = tmp.path().join("tune.json");
    let doc = serde_json::json!({"version": 1, "root": "/", "profile": "audio",
        "audio_cpus": [1], "since": "2026-01-01T00:00:00Z", "pid": 1, "entries": []});
    std::fs::write(&journal, doc.to_string()).unwrap();
    let status = || {
        xrunlab()
            .args(["tune", "--status", "--journal"])
            .arg(&journal)
            .output()
            .unwrap()
    };
    let o = status();
    assert_eq!(o.status.code(), Some(0), "root's own journal: {}", show(&o));
    std::fs::set_permissions(&journal, std::fs::Permissions::from_mode(0o666)).unwrap();
    let o = status();
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("writable by everyone"));
    std::fs::set_permissions(&journal, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::os::unix::fs::chown(&journal, Some(65534), None).unwrap();
    let o = status();
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("owned by uid 65534"));
}

/// Neither xrunlab cgroup left in any hierarchy.
fn assert_no_groups_left() {
    for g in ["xrunlab-audio", "xrunlab-system"] {
        for m in [
            "/sys/fs/cgroup/cpuset",
            "/sys/fs/cgroup/unified",
            "/sys/fs/cgroup",
        ] {
            assert!(!Path::new(m).join(g).exists(), "{m}/{g} left behind");
        }
    }
}

/// Every IRQ list as it was, and every delivery CPU as it was or, for an IRQ that stayed
/// quiet since the restore, inside its restored list (the kernel moves delivery only when an
/// IRQ fires).
fn assert_same_irq_delivery(before: &BTreeMap<String, (String, String)>) {
    let cpus = |l: &str| xrunlab::rt::affinity::parse_cpu_list(l).unwrap();
    for (irq, (list, eff)) in irq_delivery() {
        let Some((list0, eff0)) = before.get(&irq) else {
            continue;
        };
        assert_eq!(&list, list0, "IRQ {irq}: affinity list not restored");
        if &eff != eff0 {
            assert!(
                cpus(&eff).iter().all(|c| cpus(&list).contains(c)),
                "IRQ {irq}: delivered on {eff}, outside its list {list}"
            );
            eprintln!("IRQ {irq}: delivered on {eff} (was {eff0}): quiet since the restore");
        }
    }
}

/// IRQs' delivery CPUs, as `(list, effective)` by IRQ.
fn irq_delivery() -> BTreeMap<String, (String, String)> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir("/proc/irq").unwrap().flatten() {
        let d = e.path();
        let read = |f: &str| std::fs::read_to_string(d.join(f)).map(|s| s.trim().to_string());
        if let (Ok(l), Ok(eff)) = (read("smp_affinity_list"), read("effective_affinity_list")) {
            out.insert(e.file_name().to_string_lossy().into_owned(), (l, eff));
        }
    }
    out
}

/// A fork loop beside `--apply`/`--restore`: children born while the cpusets are emptied
/// keep them busy unless the restore moves them too. Every cycle restores with exit 0,
/// leaves no group, and puts back every IRQ list, every kernel thread's CPUs, and every
/// IRQ's delivery CPU (or leaves it inside the restored list, which the restore says).
#[test]
fn live_restore_under_a_fork_loop_restores_everything() {
    let Some(_one) = live_turn("root, to write /proc and /sys") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let journal = tmp.path().join("tune.json");
    let guard = LiveGuard(journal.clone());
    let kthreads_before = kthread_cpus();
    let irqs_before = irq_delivery();
    let mut forker = std::process::Command::new("sh")
        .args(["-c", "while :; do /bin/true; done"])
        .spawn()
        .unwrap();
    let mut failures = Vec::new();
    for cycle in 0..3 {
        let o = xrunlab()
            .args(["tune", "--apply", "--journal"])
            .arg(&journal)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", show(&o));
        let o = xrunlab()
            .args(["tune", "--restore", "--json", "--journal"])
            .arg(&journal)
            .output()
            .unwrap();
        if o.status.code() != Some(0) {
            failures.push(format!("cycle {cycle}: {}", show(&o)));
        }
    }
    let _ = forker.kill();
    let _ = forker.wait();
    drop(guard);
    assert!(failures.is_empty(), "{failures:#?}");
    assert_same_kthreads(&kthreads_before);
    assert_same_irq_delivery(&irqs_before);
    assert_no_groups_left();
}
