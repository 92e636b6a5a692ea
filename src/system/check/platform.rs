//! The machine around the CPUs: sound cards and their IRQs, swap, filesystems, virtualization
//! and containers.

use super::{item, CheckItem, Ctx, Verdict};
use crate::system::env::{detect_container, detect_virtualization};
use crate::system::interrupts;

pub(super) fn sound_cards(c: &Ctx) -> CheckItem {
    const T: (&str, &str) = ("sound-card", "Sound cards");
    let cards: Vec<String> = c
        .root
        .read("/proc/asound/cards")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            // Card lines look like " 0 [PCH            ]: HDA-Intel - HDA Intel PCH".
            let t = l.trim_start();
            let (num, rest) = t.split_once(' ')?;
            if num.is_empty() || !num.chars().all(|c| c.is_ascii_digit()) {
                return None;
            }
            let name = rest.split_once(" - ").map_or(rest, |(_, n)| n).trim();
            Some(format!("{num}: {name}"))
        })
        .collect();
    if cards.is_empty() {
        item(
            T.0,
            T.1,
            Verdict::Warn,
            "no ALSA sound card",
            "only the virtual and sim drivers can run here; round-trip and JACK/ALSA hardware tests need a card",
        )
    } else {
        item(T.0, T.1, Verdict::Ok, cards.join("; "), "")
    }
}

pub(super) fn irq_sharing(c: &Ctx) -> CheckItem {
    const T: (&str, &str) = ("irq-sharing", "Sound/USB IRQ sharing");
    let Some(text) = c.root.read("/proc/interrupts") else {
        return item(
            T.0,
            T.1,
            Verdict::Warn,
            "/proc/interrupts not readable",
            "run on a system with /proc mounted",
        );
    };
    let s = interrupts::sharing(&interrupts::parse(&text));
    if !s.shared.is_empty() {
        let lines: Vec<String> = s
            .shared
            .iter()
            .map(|l| format!("IRQ {}: {}", l.irq, l.devices.join(" + ")))
            .collect();
        return item(
            T.0,
            T.1,
            Verdict::Warn,
            format!("shared: {}", lines.join("; ")),
            if s.shared
                .iter()
                .flat_map(|l| &l.devices)
                .any(|d| d.starts_with("dwc_otg"))
            {
                // The Pi's dwc_otg serves the USB 2 ports (all of them, and Ethernet, on a
                // Pi 3 and older); a Pi 4's blue USB 3 ports are on the VL805's own PCIe interrupt.
                "every interrupt on a shared line runs all its handlers: on a Pi 4 plug the audio interface into a blue USB 3 port (xhci, its own interrupt); on older Pis keep other USB devices and network traffic off during sessions"
            } else {
                "every interrupt on a shared line runs all its handlers: move the interface to another port/slot, or enable MSI"
            },
        );
    }
    if s.exclusive.is_empty() {
        return item(
            T.0,
            T.1,
            Verdict::Ok,
            "no sound or USB controller interrupts",
            "",
        );
    }
    let names: Vec<String> = s
        .exclusive
        .iter()
        .map(|l| format!("{} (IRQ {})", l.devices.join(", "), l.irq))
        .collect();
    item(
        T.0,
        T.1,
        Verdict::Ok,
        format!("not shared: {}", names.join(", ")),
        "",
    )
}

pub(super) fn swap(c: &Ctx) -> CheckItem {
    const T: (&str, &str) = ("swap", "Swap and swappiness");
    let swaps: Vec<String> = c
        .root
        .read("/proc/swaps")
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    if swaps.is_empty() {
        return item(T.0, T.1, Verdict::Ok, "no swap", "");
    }
    let swappiness = c
        .root
        .read("/proc/sys/vm/swappiness")
        .and_then(|s| s.parse::<u32>().ok());
    let on = format!("swap on {}", swaps.join(", "));
    match swappiness {
        Some(v) if v <= 10 => item(T.0, T.1, Verdict::Ok, format!("{on}, swappiness {v}"), ""),
        Some(v) => item(
            T.0,
            T.1,
            Verdict::Warn,
            format!("{on}, swappiness {v}"),
            "`sysctl vm.swappiness=10` (persist in /etc/sysctl.d/) so audio memory is not swapped out",
        ),
        None => item(
            T.0,
            T.1,
            Verdict::Warn,
            format!("{on}, swappiness not readable"),
            "check `sysctl vm.swappiness`",
        ),
    }
}

pub(super) fn filesystems(c: &Ctx) -> CheckItem {
    const T: (&str, &str) = ("filesystems", "Filesystems");
    // Network and FUSE block filesystems stall on I/O in ways a disk streaming audio
    // cannot absorb; pseudo filesystems are irrelevant.
    let slow = [
        "nfs",
        "nfs4",
        "cifs",
        "smb3",
        "fuseblk",
        "reiserfs",
        "fuse.sshfs",
    ];
    let real = [
        "ext2", "ext3", "ext4", "xfs", "btrfs", "zfs", "f2fs", "vfat", "exfat",
    ];
    let mut bad = Vec::new();
    let mut good = Vec::new();
    for l in c.root.read("/proc/mounts").unwrap_or_default().lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 3 {
            continue;
        }
        let (mnt, fstype) = (f[1], f[2]);
        if ["/proc", "/sys", "/dev", "/run"]
            .iter()
            .any(|p| mnt == *p || mnt.starts_with(&format!("{p}/")))
        {
            continue;
        }
        if slow.contains(&fstype) {
            bad.push(format!("{fstype} on {mnt}"));
        } else if real.contains(&fstype) {
            good.push(format!("{fstype} on {mnt}"));
        }
    }
    if !bad.is_empty() {
        return item(
            T.0,
            T.1,
            Verdict::Warn,
            format!("avoid for audio files: {}", bad.join(", ")),
            "keep sessions and samples on a local ext4/xfs/btrfs disk",
        );
    }
    if good.is_empty() {
        return item(
            T.0,
            T.1,
            Verdict::Ok,
            "no local disk filesystems listed",
            "",
        );
    }
    item(T.0, T.1, Verdict::Ok, good.join(", "), "")
}

pub(super) fn virtualization(c: &Ctx) -> CheckItem {
    const T: (&str, &str) = ("virtualization", "Virtualisation");
    match detect_virtualization(c.root) {
        None => item(
            T.0,
            T.1,
            Verdict::Ok,
            "bare metal (no hypervisor flag, DMI vendor or paravirtual clock)",
            "",
        ),
        Some((name, evidence)) => {
            // Steal since boot: how much the host has been taking, before any measurement.
            let stolen = c
                .root
                .read("/proc/stat")
                .and_then(|t| crate::system::env::steal_ticks(&t))
                .filter(|&(_, total)| total > 0)
                .map(|(steal, total)| {
                    format!(
                        "; the host has taken {:.1} % of its CPU time since boot (steal)",
                        steal as f64 * 100.0 / total as f64
                    )
                })
                .unwrap_or_default();
            item(
                T.0,
                T.1,
                Verdict::Warn,
                format!("{name}: {}{stolen}", evidence.join(", ")),
                "the hypervisor can stall this guest for milliseconds: take final figures on bare metal (each result records the CPU time stolen during it)",
            )
        }
    }
}

pub(super) fn container(c: &Ctx) -> CheckItem {
    const T: (&str, &str) = ("container", "Container");
    match detect_container(c.root) {
        (Some(name), _) => item(
            T.0,
            T.1,
            Verdict::Warn,
            name,
            "RT scheduling needs --cap-add=SYS_NICE --ulimit rtprio=99 and /dev/cpu_dma_latency passed in; kernel tuning is the host's",
        ),
        (None, Some(note)) => item(T.0, T.1, Verdict::Ok, format!("none ({note})"), ""),
        (None, None) => item(T.0, T.1, Verdict::Ok, "none", ""),
    }
}
