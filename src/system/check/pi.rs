//! The Raspberry Pi's own causes of xruns: the firmware's throttled flags, the SoC
//! temperature, the clock settings in config.txt, the kernel's page size, and an RT kernel
//! that is installed but not the one running.
//!
//! Sources, named here because the verdicts rest on them:
//! - Raspberry Pi documentation, "Raspberry Pi OS" → `vcgencmd get_throttled` (the bit
//!   meanings) and "config.txt" → overclocking (`force_turbo`, `arm_freq`) and conditional
//!   filters (`[all]`, `[pi4]`, `[pi5]`);
//! - Raspberry Pi documentation, "Frequency management and thermal control": Pi 4 and 5
//!   firmware throttles the ARM cores from 80 °C and further at 85 °C;
//! - raspberrypi/linux `drivers/firmware/raspberrypi.c`: `get_throttled` prints the same
//!   word as bare hex (`"%x\n"`);
//! - kernel docs, `Documentation/filesystems/proc.rst` (`KernelPageSize` in smaps) and
//!   `Documentation/devicetree/usage-model.rst` (`/proc/device-tree/model`, NUL-terminated).
//!
//! These checks join the report only on a Pi (or, for the RT kernel, where one is
//! installed), so other machines keep their list.

use super::{item, CheckItem, Ctx, Verdict};

use crate::system::throttle::{self, PATH as THROTTLED};

/// The board's model string when it is a Raspberry Pi: the device tree's, else the
/// `Model` line Raspberry Pi kernels add to /proc/cpuinfo.
pub(super) fn pi_model(c: &Ctx) -> Option<String> {
    [
        "/proc/device-tree/model",
        "/sys/firmware/devicetree/base/model",
    ]
    .iter()
    .find_map(|p| c.root.read(p))
    .map(|m| m.trim_end_matches('\0').trim().to_string())
    .into_iter()
    .chain(std::iter::once(c.env.cpus.model.clone()))
    .find(|m| m.contains("Raspberry Pi"))
}

/// The checks for this machine: all of them on a Pi, the RT-kernel one wherever an RT
/// kernel is installed, none otherwise.
pub(super) fn checks(c: &Ctx) -> Vec<CheckItem> {
    let mut v = Vec::new();
    let model = pi_model(c);
    if let Some(m) = &model {
        v.push(board(c, m));
    }
    if model.is_some() || c.root.exists(THROTTLED) {
        v.push(throttled(c));
    }
    if let Some(m) = &model {
        v.push(temperature(c));
        v.push(clock(c, m));
        v.push(page_size(c, m));
    }
    if let Some(rt) = rt_kernel(c, model.as_deref()) {
        v.push(rt);
    }
    v
}

fn board(c: &Ctx, model: &str) -> CheckItem {
    item(
        "pi-board",
        "Raspberry Pi board",
        Verdict::Ok,
        format!("{model}, {} CPUs online", c.env.cpus.count),
        "",
    )
}

/// The firmware's throttled word: the sysfs file, or on the live system `vcgencmd`.
fn throttled_word(c: &Ctx) -> Option<(u32, &'static str)> {
    if let Some(w) = c.root.read(THROTTLED).and_then(|t| throttle::parse(&t)) {
        return Some((w, "get_throttled"));
    }
    if !c.root.is_live() {
        return None;
    }
    let out = std::process::Command::new("vcgencmd")
        .arg("get_throttled")
        .output()
        .ok()?;
    throttle::parse(&String::from_utf8_lossy(&out.stdout)).map(|w| (w, "vcgencmd get_throttled"))
}

fn throttled(c: &Ctx) -> CheckItem {
    const T: (&str, &str) = ("pi-throttled", "SoC throttling and under-voltage");
    let Some((w, source)) = throttled_word(c) else {
        return item(
            T.0,
            T.1,
            Verdict::Warn,
            "the firmware's throttled flags are not readable (no get_throttled)",
            "run `vcgencmd get_throttled` (0x0 means no under-voltage or throttling since boot)",
        );
    };
    let (now, since) = (throttle::names(w, 0), throttle::names(w, 16));
    let mut observed = format!("{source} = 0x{w:x}");
    if !now.is_empty() {
        observed.push_str(&format!("; now: {}", now.join(", ")));
    }
    if !since.is_empty() {
        observed.push_str(&format!("; since boot: {}", since.join(", ")));
    }
    if w == 0 {
        observed.push_str(": no under-voltage or throttling since boot");
    }
    let under_voltage = w & (1 | 1 << 16) != 0;
    let verdict = if w & 0b101 != 0 {
        // Under-voltage or throttling right now: the cores run slower than the DSP load
        // was measured at.
        Verdict::Fail
    } else if w != 0 {
        Verdict::Warn
    } else {
        Verdict::Ok
    };
    item(
        T.0,
        T.1,
        verdict,
        observed,
        if under_voltage {
            "under-voltage makes the firmware slow the cores mid-session: use the official supply (5.1 V 3 A for a Pi 4, 5 V 5 A for a Pi 5) and a short thick cable, and power USB audio interfaces from a powered hub"
        } else {
            "the SoC got hot enough to slow down: add a heatsink or fan, or an active-cooling case"
        },
    )
}

fn temperature(c: &Ctx) -> CheckItem {
    const T: (&str, &str) = ("pi-temperature", "SoC temperature");
    // The SoC sensor is the zone of type cpu-thermal on Raspberry Pi kernels; else the first.
    let zones: Vec<String> = c
        .root
        .list("/sys/class/thermal")
        .into_iter()
        .filter(|z| z.starts_with("thermal_zone"))
        .collect();
    let zone = zones
        .iter()
        .find(|z| {
            c.root
                .read(&format!("/sys/class/thermal/{z}/type"))
                .is_some_and(|t| t == "cpu-thermal")
        })
        .or(zones.first());
    let milli = zone.and_then(|z| {
        c.root
            .read(&format!("/sys/class/thermal/{z}/temp"))
            .and_then(|t| t.parse::<i64>().ok())
    });
    let Some(milli) = milli else {
        return item(
            T.0,
            T.1,
            Verdict::Warn,
            "no readable thermal zone",
            "run `vcgencmd measure_temp`",
        );
    };
    let deg = milli as f64 / 1000.0;
    let verdict = if deg >= 80.0 {
        Verdict::Fail
    } else if deg >= 70.0 {
        Verdict::Warn
    } else {
        Verdict::Ok
    };
    item(
        T.0,
        T.1,
        verdict,
        format!(
            "{deg:.1} °C ({}; the firmware throttles from 80 °C)",
            zone.map_or("", String::as_str)
        ),
        "cool the board (heatsink, fan or active-cooling case) before a session: at 80 °C the cores slow down",
    )
}

/// Settings of config.txt that apply to `model`: lines under `[all]` or a `[piN]` filter
/// naming this board; other filters (`[cm4]`, `[HDMI:1]`, `[gpio…]`) are left out rather
/// than guessed. Later lines win, as in the firmware.
fn config_txt(text: &str, model: &str) -> Vec<(String, String)> {
    let board = pi_generation(model);
    let mut applies = true;
    let mut out: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        let l = line.split('#').next().unwrap_or("").trim();
        if let Some(f) = l.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let f = f.to_ascii_lowercase();
            applies = f == "all" || board.is_some_and(|b| f == format!("pi{b}"));
            continue;
        }
        if let (true, Some((k, v))) = (applies, l.split_once('=')) {
            let (k, v) = (k.trim().to_string(), v.trim().to_string());
            out.retain(|(o, _)| *o != k);
            out.push((k, v));
        }
    }
    out
}

/// 3, 4, 5... from "Raspberry Pi 4 Model B Rev 1.4".
fn pi_generation(model: &str) -> Option<u32> {
    let rest = model.split("Raspberry Pi ").nth(1)?;
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// Where config.txt is: /boot/firmware on Raspberry Pi OS since bookworm, /boot before.
fn config_path(c: &Ctx) -> Option<&'static str> {
    ["/boot/firmware/config.txt", "/boot/config.txt"]
        .into_iter()
        .find(|p| c.root.exists(p))
}

fn clock(c: &Ctx, model: &str) -> CheckItem {
    const T: (&str, &str) = ("pi-clock", "Pi clock settings (config.txt)");
    let Some(path) = config_path(c) else {
        return item(
            T.0,
            T.1,
            Verdict::Warn,
            "no /boot/firmware/config.txt or /boot/config.txt",
            "mount the boot partition to check force_turbo and arm_freq",
        );
    };
    let Some(text) = c.root.read(path) else {
        return item(
            T.0,
            T.1,
            Verdict::Warn,
            format!("{path} is not readable"),
            "check force_turbo and arm_freq in config.txt by hand",
        );
    };
    let cfg = config_txt(&text, model);
    let get = |k: &str| cfg.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let turbo = get("force_turbo") == Some("1");
    let mut set: Vec<String> = ["force_turbo", "arm_freq", "over_voltage", "arm_boost"]
        .iter()
        .filter_map(|k| get(k).map(|v| format!("{k}={v}")))
        .collect();
    if set.is_empty() {
        set.push("no clock settings".into());
    }
    let governors = &c.env.governor;
    let ramping = !governors.is_empty() && governors.iter().any(|g| g != "performance");
    let observed = format!("{path}: {}", set.join(", "));
    if turbo || !ramping {
        let why = if turbo {
            "force_turbo keeps the cores at full clock"
        } else if governors.is_empty() {
            "no cpufreq governor: the firmware alone sets the clock"
        } else {
            "the performance governor keeps the cores at full clock"
        };
        return item(T.0, T.1, Verdict::Ok, format!("{observed}; {why}"), "");
    }
    item(
        T.0,
        T.1,
        Verdict::Warn,
        format!(
            "{observed}; the {} governor ramps the clock with load",
            governors
                .iter()
                .find(|g| *g != "performance")
                .map_or("", String::as_str)
        ),
        "Raspberry Pi OS boots with ondemand: set force_turbo=1 in config.txt (fixed full clock; no warranty bit without over_voltage), or the performance governor at boot",
    )
}

/// The kernel's page size from the first mapping's `KernelPageSize` in /proc/self/smaps:
/// the executable's text, never a huge page, so it is what `getconf PAGESIZE` says. A
/// tree copied from a board carries the file of the copying process (`cp`).
fn kernel_page_kib(c: &Ctx) -> Option<u64> {
    let smaps = c.root.read("/proc/self/smaps")?;
    let line = smaps.lines().find(|l| l.starts_with("KernelPageSize:"))?;
    let mut w = line.split_whitespace().skip(1);
    let (n, unit) = (w.next()?.parse::<u64>().ok()?, w.next()?);
    (unit == "kB").then_some(n)
}

fn page_size(c: &Ctx, model: &str) -> CheckItem {
    const T: (&str, &str) = ("page-size", "Kernel page size");
    let Some(kib) = kernel_page_kib(c) else {
        return item(
            T.0,
            T.1,
            Verdict::Warn,
            "not readable (/proc/self/smaps)",
            "run `getconf PAGESIZE`",
        );
    };
    let note = match (kib, pi_generation(model)) {
        (16, _) => "16 KiB (the Pi 5's kernel_2712): a prebuilt plugin or program that assumes 4 KiB pages fails to load; kernel=kernel8.img in config.txt boots the 4 KiB kernel",
        (4, Some(5)) => "4 KiB (kernel8 or v8-rt on a Pi 5; its default kernel_2712 has 16 KiB pages)",
        (4, _) => "4 KiB",
        _ => "",
    };
    let observed = if note.is_empty() {
        format!("{kib} KiB")
    } else {
        note.to_string()
    };
    let verdict = if [4, 16, 64].contains(&kib) {
        Verdict::Ok
    } else {
        Verdict::Warn
    };
    item(
        T.0,
        T.1,
        verdict,
        observed,
        "an unusual page size: check `getconf PAGESIZE`",
    )
}

/// Whether a kernel release or image name is an RT build: `6.12.47+rpt-rpi-v8-rt`,
/// `6.1.0-28-rt-amd64`, `kernel8_rt.img`.
fn is_rt_name(name: &str) -> bool {
    name.split(['-', '_', '.', '+'])
        .any(|w| w == "rt" || (w.starts_with("rt") && w[2..].chars().all(|c| c.is_ascii_digit())))
}

/// Installed RT kernels: module trees, Debian's /boot images and the Pi firmware's images.
fn installed_rt(c: &Ctx) -> Vec<String> {
    let mut found: Vec<String> = c
        .root
        .list("/lib/modules")
        .into_iter()
        .filter(|r| is_rt_name(r))
        .map(|r| format!("/lib/modules/{r}"))
        .collect();
    for dir in ["/boot", "/boot/firmware"] {
        found.extend(
            c.root
                .list(dir)
                .into_iter()
                .filter(|f| {
                    (f.starts_with("vmlinuz-") || (f.starts_with("kernel") && f.ends_with(".img")))
                        && is_rt_name(f)
                })
                .map(|f| format!("{dir}/{f}")),
        );
    }
    found
}

fn rt_kernel(c: &Ctx, model: Option<&str>) -> Option<CheckItem> {
    const T: (&str, &str) = ("rt-kernel", "RT kernel installed and booted");
    let installed = installed_rt(c);
    let booted_rt = c.env.preempt.model == "rt";
    let booted = if c.env.kernel.is_empty() {
        "unknown kernel"
    } else {
        c.env.kernel.as_str()
    };
    // A config.txt that asks for an RT image the firmware did not boot (e.g. an update
    // replaced the kernel, rpi-update #50).
    let asked = model.and_then(|m| {
        let text = c.root.read(config_path(c)?)?;
        config_txt(&text, m)
            .into_iter()
            .find(|(k, v)| k == "kernel" && is_rt_name(v))
            .map(|(_, v)| v)
    });
    if model.is_none() && installed.is_empty() {
        return None;
    }
    if booted_rt {
        return Some(item(
            T.0,
            T.1,
            Verdict::Ok,
            format!("booted: {booted} (PREEMPT_RT)"),
            "",
        ));
    }
    if installed.is_empty() && asked.is_none() {
        return Some(item(
            T.0,
            T.1,
            Verdict::Ok,
            format!("booted: {booted}; no RT kernel installed (see preempt)"),
            "",
        ));
    }
    let mut observed = format!("booted: {booted}, not RT");
    if !installed.is_empty() {
        observed.push_str(&format!("; installed: {}", installed.join(", ")));
    }
    if let Some(k) = &asked {
        observed.push_str(&format!("; config.txt asks for kernel={k}"));
    }
    let advice = match (model, &asked) {
        (Some(_), Some(_)) => "config.txt names an RT image the firmware did not boot: check that the image exists in the boot partition and that no later [pi…] section overrides kernel=",
        (Some(_), None) => "boot it: add kernel=kernel8_rt.img (Raspberry Pi OS's linux-image-rpi-v8-rt) to config.txt and reboot",
        _ => "boot it: pick it in the boot loader (GRUB: Advanced options) or make it the default, then reboot",
    };
    Some(item(T.0, T.1, Verdict::Warn, observed, advice))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rt_names() {
        for rt in [
            "6.12.47+rpt-rpi-v8-rt",
            "6.1.0-28-rt-amd64",
            "kernel8_rt.img",
            "vmlinuz-6.1.0-28-rt-amd64",
            "6.6.20-rt25-v8+",
        ] {
            assert!(is_rt_name(rt), "{rt}");
        }
        for not in [
            "6.12.47+rpt-rpi-v8",
            "kernel8.img",
            "6.1.0-28-amd64",
            "vmlinuz-start",
        ] {
            assert!(!is_rt_name(not), "{not}");
        }
    }

    #[test]
    fn config_txt_follows_the_board_filters() {
        let t = "arm_freq=1500\n[pi4]\narm_freq=1800 # overclock\nforce_turbo=1\n[pi5]\narm_freq=2800\n[cm4]\nforce_turbo=0\n[all]\nover_voltage=2\n";
        let get = |m: &str, k: &str| {
            config_txt(t, m)
                .into_iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v)
        };
        assert_eq!(
            get("Raspberry Pi 4 Model B Rev 1.4", "arm_freq").as_deref(),
            Some("1800")
        );
        assert_eq!(
            get("Raspberry Pi 4 Model B Rev 1.4", "force_turbo").as_deref(),
            Some("1")
        );
        assert_eq!(
            get("Raspberry Pi 5 Model B Rev 1.0", "arm_freq").as_deref(),
            Some("2800")
        );
        assert_eq!(get("Raspberry Pi 5 Model B Rev 1.0", "force_turbo"), None);
        assert_eq!(
            get("Raspberry Pi 3 Model B Plus Rev 1.3", "over_voltage").as_deref(),
            Some("2")
        );
        assert_eq!(pi_generation("Raspberry Pi 400 Rev 1.0"), Some(400));
    }
}
