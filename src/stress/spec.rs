//! What load to run: presets parsed from `--stress`, and the validated [`StressSpec`] every
//! measuring command builds from its stress options (`cli::stress_args`).

use crate::error::{Error, Result};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// One stress class. stress-ng stressors (`Cpu` … `Timer`) use stress-ng when installed;
/// Senoner's classes (`Disk*`, `Proc`, `Top`) are always built in, because their exact
/// behaviour (one large file, `top`-like /proc sweeps) is the point of the study.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Preset {
    /// Vignati et al.: `stress-ng --sched other --cpu 1 --udp 1 --io 1 --netdev 1 --aggressive --maximize`.
    Paper,
    Cpu,
    Io,
    Vm,
    Udp,
    Netdev,
    Cache,
    Timer,
    DiskWrite,
    DiskCopy,
    DiskRead,
    Proc,
    Top,
}

impl Preset {
    pub const ALL: [Preset; 13] = [
        Preset::Paper,
        Preset::Cpu,
        Preset::Io,
        Preset::Vm,
        Preset::Udp,
        Preset::Netdev,
        Preset::Cache,
        Preset::Timer,
        Preset::DiskWrite,
        Preset::DiskCopy,
        Preset::DiskRead,
        Preset::Proc,
        Preset::Top,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Preset::Paper => "paper",
            Preset::Cpu => "cpu",
            Preset::Io => "io",
            Preset::Vm => "vm",
            Preset::Udp => "udp",
            Preset::Netdev => "netdev",
            Preset::Cache => "cache",
            Preset::Timer => "timer",
            Preset::DiskWrite => "disk-write",
            Preset::DiskCopy => "disk-copy",
            Preset::DiskRead => "disk-read",
            Preset::Proc => "proc",
            Preset::Top => "top",
        }
    }

    /// The stress-ng stressor this preset maps to, if it is a stress-ng class.
    pub fn stress_ng_stressor(self) -> Option<&'static str> {
        Some(match self {
            Preset::Cpu => "cpu",
            Preset::Io => "io",
            Preset::Vm => "vm",
            Preset::Udp => "udp",
            Preset::Netdev => "netdev",
            Preset::Cache => "cache",
            Preset::Timer => "timer",
            _ => return None,
        })
    }

    /// True for classes that write files under the stress directory.
    pub fn uses_files(self) -> bool {
        matches!(
            self,
            Preset::DiskWrite | Preset::DiskCopy | Preset::DiskRead
        )
    }
}

impl fmt::Display for Preset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Preset {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let t = s.trim().to_ascii_lowercase();
        Preset::ALL
            .into_iter()
            .find(|p| p.name() == t)
            .ok_or_else(|| {
                Error::usage(format!(
                    "unknown stress preset '{s}': use {} or none",
                    Preset::ALL.map(Preset::name).join(", ")
                ))
            })
    }
}

/// Parse `PRESET[,PRESET…]`; `none` (alone) means idle. Duplicates are dropped.
pub fn parse_presets(s: &str) -> Result<Vec<Preset>> {
    let parts: Vec<&str> = s
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    if parts.is_empty() {
        return Err(Error::usage("--stress needs at least one preset (or none)"));
    }
    if parts.iter().any(|p| p.eq_ignore_ascii_case("none")) {
        if parts.len() > 1 {
            return Err(Error::usage(format!(
                "--stress '{s}': 'none' cannot be combined with other presets"
            )));
        }
        return Ok(Vec::new());
    }
    let mut out: Vec<Preset> = Vec::new();
    for p in parts {
        let p: Preset = p.parse()?;
        if !out.contains(&p) {
            out.push(p);
        }
    }
    Ok(out)
}

/// Which implementation runs the stress-ng classes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum BackendChoice {
    /// stress-ng when it is on PATH, the built-in stressors otherwise.
    #[default]
    Auto,
    /// stress-ng or fail (exit 3).
    StressNg,
    /// Always the built-in stressors (what a minimal image without stress-ng gets).
    Builtin,
}

/// A byte size such as `256M`, `1G`, `64k`, `4096` (binary multiples).
pub fn parse_size(s: &str) -> Result<u64> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let bad = || Error::usage(format!("bad size '{s}': expected e.g. 256M, 1G, 64k"));
    let n: u64 = num.parse().map_err(|_| bad())?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return Err(bad()),
    };
    let v = n.checked_mul(mult).ok_or_else(bad)?;
    if v == 0 {
        return Err(Error::usage(format!("size '{s}' must be > 0")));
    }
    Ok(v)
}

/// Default size of the disk classes' file: large enough to leave the page cache's
/// write-back path busy for seconds on an SD card or a VM disk, small enough for a Pi.
pub const DEFAULT_FILE_SIZE: u64 = 256 << 20;

/// A validated stress configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct StressSpec {
    pub presets: Vec<Preset>,
    pub workers: u32,
    /// CPUs the stressors are pinned to; empty = not pinned.
    pub cpus: Vec<usize>,
    /// Parent of the session's private directory; None = the system temp directory.
    pub dir: Option<PathBuf>,
    pub file_size: u64,
    /// User commands, already split into argv.
    pub commands: Vec<Vec<String>>,
    pub backend: BackendChoice,
    /// The xrunlab binary that runs the built-in stressors (`xrunlab __stressor`).
    /// None = `XRUNLAB_STRESSOR_EXE` if set, else this process's own executable. Test
    /// binaries set it to `env!("CARGO_BIN_EXE_xrunlab")`.
    pub stressor_exe: Option<PathBuf>,
}

impl Default for StressSpec {
    fn default() -> Self {
        StressSpec {
            presets: Vec::new(),
            workers: 1,
            cpus: Vec::new(),
            dir: None,
            file_size: DEFAULT_FILE_SIZE,
            commands: Vec::new(),
            backend: BackendChoice::Auto,
            stressor_exe: None,
        }
    }
}

impl StressSpec {
    /// A spec of these presets with every other option at its default.
    pub fn presets(list: &str) -> Result<Self> {
        Ok(StressSpec {
            presets: parse_presets(list)?,
            ..Default::default()
        })
    }

    /// Nothing to run: the measurement is idle.
    pub fn is_idle(&self) -> bool {
        self.presets.is_empty() && self.commands.is_empty()
    }

    /// What `Environment::stress` records: preset names, then `cmd:ARGV0` per command.
    pub fn labels(&self) -> Vec<String> {
        let mut v: Vec<String> = self.presets.iter().map(|p| p.name().to_string()).collect();
        v.extend(self.commands.iter().map(|c| format!("cmd:{}", c[0])));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_parse_and_reject() {
        assert_eq!(
            parse_presets("cpu, proc,cpu").unwrap(),
            vec![Preset::Cpu, Preset::Proc]
        );
        assert_eq!(parse_presets("none").unwrap(), vec![]);
        for p in Preset::ALL {
            assert_eq!(p.name().parse::<Preset>().unwrap(), p);
        }
        for bad in ["", "cpu,none", "gpu", ","] {
            let e = parse_presets(bad).unwrap_err();
            assert_eq!(e.exit_code(), crate::error::EXIT_USAGE, "{bad}");
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("256M").unwrap(), 256 << 20);
        assert_eq!(parse_size("1g").unwrap(), 1 << 30);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        for bad in ["", "0", "1T", "M", "-1M"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
