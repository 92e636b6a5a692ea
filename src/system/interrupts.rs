//! `/proc/interrupts`: which devices handle each interrupt line, to find sound and USB
//! controllers that share a line with other devices (every interrupt on a shared line runs
//! every handler on it, and with threaded IRQs they cannot be prioritised apart).

/// One numbered interrupt line and the handlers registered on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IrqLine {
    pub irq: String,
    pub devices: Vec<String>,
}

/// Numbered lines of `/proc/interrupts` with their handler names. Architecture rows (`LOC:`,
/// `NMI:`...) are skipped: they are per-CPU events, not shareable device lines.
pub fn parse(text: &str) -> Vec<IrqLine> {
    let mut lines = text.lines();
    let ncpu = lines
        .next()
        .map(|h| {
            h.split_whitespace()
                .filter(|w| w.starts_with("CPU"))
                .count()
        })
        .unwrap_or(0);
    lines
        .filter_map(|l| {
            let (irq, rest) = l.split_once(':')?;
            let irq = irq.trim();
            if irq.is_empty() || !irq.chars().all(|c| c.is_ascii_digit()) {
                return None;
            }
            // Skip the per-CPU counts; handlers come after the chip and trigger columns,
            // joined with ", ".
            let mut rest = rest.trim_start();
            for _ in 0..ncpu {
                let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
                if !rest[..end].chars().all(|c| c.is_ascii_digit()) {
                    break;
                }
                rest = rest[end..].trim_start();
            }
            let names = handler_list(rest)?;
            let devices = names
                .split(", ")
                .map(str::trim)
                .filter(|d| !d.is_empty())
                .map(str::to_string)
                .collect();
            Some(IrqLine {
                irq: irq.to_string(),
                devices,
            })
        })
        .collect()
}

/// The handler names after the chip, hwirq and trigger columns. The trigger column
/// (`16-fasteoi`, `0-edge`, `Level`, `Edge`) is the first word that names one; chip names
/// may contain single spaces ("BRCM STB PCIe MSI"), so column widths cannot be trusted.
fn handler_list(rest: &str) -> Option<&str> {
    for word in rest.split_whitespace() {
        // split_whitespace yields subslices of rest, so the offset is exact.
        let start = word.as_ptr() as usize - rest.as_ptr() as usize;
        let pos = start + word.len();
        if is_trigger(word) {
            let names = rest[pos..].trim();
            return (!names.is_empty()).then_some(names);
        }
    }
    // No trigger column (unusual chips): fall back to the last column set off by two or
    // more spaces, which is how the kernel separates the handler list.
    let cols: Vec<&str> = rest
        .split("  ")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    (cols.len() >= 3).then(|| cols[cols.len() - 1])
}

/// A trigger column: `Edge`/`Level` alone (ARM) or after the hardware IRQ number
/// (`2-edge`, `16-fasteoi`). A chip name such as the Pi 3's `ARMCTRL-level` is not one.
fn is_trigger(word: &str) -> bool {
    let w = word.to_ascii_lowercase();
    let kind = |k: &str| k.ends_with("edge") || k.ends_with("level") || k.ends_with("eoi");
    match w.split_once('-') {
        None => w == "edge" || w == "level",
        Some((n, k)) => !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()) && kind(k),
    }
}

/// The kind of audio-relevant controller a handler name belongs to, if any.
pub fn audio_relevant(device: &str) -> Option<&'static str> {
    let d = device.to_ascii_lowercase();
    if d.starts_with("snd") || d.contains("hda") || d.contains("audio") || d.contains("i2s") {
        Some("sound")
    } else if ["xhci", "ehci", "ohci", "uhci", "dwc_otg", "dwc2", "dwc3"]
        .iter()
        .any(|u| d.contains(u))
        || d.starts_with("usb")
    {
        Some("usb")
    } else {
        None
    }
}

/// Sound/USB controller lines and whether each is shared.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sharing {
    /// Audio-relevant lines with one handler.
    pub exclusive: Vec<IrqLine>,
    /// Audio-relevant lines with handlers of more than one driver.
    pub shared: Vec<IrqLine>,
}

/// How many drivers registered the handlers of a line. One driver may register several
/// (the Pi's `dwc_otg, dwc_otg_pcd, dwc_otg_hcd:usb1`): names equal up to a `:` suffix,
/// or extending another by `_…`, are one driver.
pub fn driver_count(devices: &[String]) -> usize {
    let key = |d: &str| d.split(':').next().unwrap_or(d).to_string();
    let mut keys: Vec<String> = devices.iter().map(|d| key(d)).collect();
    keys.sort_by_key(|k| k.len());
    let mut drivers: Vec<String> = Vec::new();
    for k in keys {
        if !drivers
            .iter()
            .any(|d| k == *d || k.starts_with(&format!("{d}_")))
        {
            drivers.push(k);
        }
    }
    drivers.len()
}

pub fn sharing(lines: &[IrqLine]) -> Sharing {
    let mut s = Sharing::default();
    for l in lines
        .iter()
        .filter(|l| l.devices.iter().any(|d| audio_relevant(d).is_some()))
    {
        if driver_count(&l.devices) > 1 {
            s.shared.push(l.clone());
        } else {
            s.exclusive.push(l.clone());
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const X86: &str = "           CPU0       CPU1       \n  \
  0:         44          0   IO-APIC   2-edge      timer\n  \
 16:       1200        300   IO-APIC  16-fasteoi   snd_hda_intel:card0, xhci_hcd\n  \
 17:          0          0   IO-APIC  17-fasteoi\n \
131:        100          0  PCI-MSI-0000:00:1f.3   0-edge      snd_hda_intel:card1\n\
NMI:          0          0   Non-maskable interrupts\n\
LOC:     100996      96744   Local timer interrupts\n\
ERR:          0\n";

    #[test]
    fn parses_handlers_and_skips_arch_rows() {
        let l = parse(X86);
        assert_eq!(l.len(), 3, "{l:?}");
        assert_eq!(l[0].devices, vec!["timer"]);
        assert_eq!(l[1].irq, "16");
        assert_eq!(l[1].devices, vec!["snd_hda_intel:card0", "xhci_hcd"]);
        assert_eq!(l[2].devices, vec!["snd_hda_intel:card1"]);
    }

    #[test]
    fn finds_shared_sound_and_usb_lines() {
        let s = sharing(&parse(X86));
        assert_eq!(s.shared.len(), 1);
        assert_eq!(s.shared[0].irq, "16");
        assert_eq!(s.exclusive.len(), 1);
    }

    #[test]
    fn arm_chip_names_with_single_spaces() {
        let t = "           CPU0       CPU1       CPU2       CPU3       \n \
 55:        812          0          0          0  BRCM STB PCIe MSI 524288 Edge      xhci_hcd\n";
        let l = parse(t);
        assert_eq!(l[0].devices, vec!["xhci_hcd"]);
        assert_eq!(audio_relevant("xhci_hcd"), Some("usb"));
        assert_eq!(audio_relevant("virtio0-config"), None);
    }

    #[test]
    fn one_driver_with_several_handlers_is_not_sharing() {
        // A Raspberry Pi 3's USB line (dwc_otg registers three handlers on it).
        let t = "           CPU0       CPU1       CPU2       CPU3       \n \
 56:    1033431          0          0          0  ARMCTRL-level  64 Edge      dwc_otg, dwc_otg_pcd, dwc_otg_hcd:usb1\n \
 57:       4021          0          0          0  ARMCTRL-level  65 Edge      dwc_otg, dwc_otg_pcd, dwc_otg_hcd:usb1, mmc1\n";
        let s = sharing(&parse(t));
        assert_eq!(s.exclusive.len(), 1, "{s:?}");
        assert_eq!(s.exclusive[0].irq, "56");
        assert_eq!(s.shared.len(), 1, "{s:?}");
        assert_eq!(s.shared[0].irq, "57");
    }

    #[test]
    fn garbage_does_not_panic() {
        assert!(parse("").is_empty());
        assert!(parse("CPU0\n:\n12\n 7: x\n\u{0}\n").len() <= 1);
    }
}
