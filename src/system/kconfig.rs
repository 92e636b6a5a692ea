//! The kernel's build configuration, when the system exposes it.
//!
//! Debian ships it as `/boot/config-$(uname -r)`; many other kernels (and this project's CI
//! VMs) expose it only as `/proc/config.gz`. No gzip crate is in the tree, so the compressed
//! form is read by running `zcat`, which every Debian system has (package gzip is essential).

use super::Root;
use std::collections::BTreeMap;
use std::process::{Command, Stdio};

/// `CONFIG_*` options with their values (`y`, `m`, numbers, strings) and where they came from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KernelConfig {
    pub source: String,
    options: BTreeMap<String, String>,
}

impl KernelConfig {
    /// Parse the text of a kernel `.config`. `# CONFIG_X is not set` lines are dropped: an
    /// absent option and an unset one mean the same to every check.
    pub fn parse(source: impl Into<String>, text: &str) -> Self {
        let options = text
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with("CONFIG_"))
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.trim_matches('"').to_string()))
            .collect();
        KernelConfig {
            source: source.into(),
            options,
        }
    }

    /// The value of an option, with or without its `CONFIG_` prefix.
    pub fn get(&self, name: &str) -> Option<&str> {
        let key = if name.starts_with("CONFIG_") {
            name.to_string()
        } else {
            format!("CONFIG_{name}")
        };
        self.options.get(&key).map(String::as_str)
    }

    /// True when the option is built in (`=y`).
    pub fn is_y(&self, name: &str) -> bool {
        self.get(name) == Some("y")
    }

    pub fn is_empty(&self) -> bool {
        self.options.is_empty()
    }

    /// Read the configuration of kernel `release` under `root`: `/boot/config-<release>`
    /// first (plain text, no subprocess), then `/proc/config.gz` through `zcat`.
    pub fn read(root: &Root, release: &str) -> Option<Self> {
        if !release.is_empty() && !release.contains('/') {
            let boot = format!("/boot/config-{release}");
            if let Some(text) = root.read(&boot) {
                let c = Self::parse(boot, &text);
                if !c.is_empty() {
                    return Some(c);
                }
            }
        }
        let gz = root.path("/proc/config.gz");
        if !gz.is_file() {
            return None;
        }
        let out = Command::new("zcat")
            .arg(&gz)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()?;
        if !out.status.success() {
            return None;
        }
        let c = Self::parse("/proc/config.gz", &String::from_utf8_lossy(&out.stdout));
        (!c.is_empty()).then_some(c)
    }

    /// The preemption model the kernel was built with (for PREEMPT_DYNAMIC kernels: the one
    /// it boots into when `preempt=` is not given).
    pub fn preempt_default(&self) -> Option<&'static str> {
        // PREEMPT_RT kernels also set CONFIG_PREEMPT(ION), so test it first; PREEMPTION
        // alone says nothing on dynamic kernels, which set it whatever their default.
        if self.is_y("PREEMPT_RT") {
            Some("rt")
        } else if self.is_y("PREEMPT_LAZY") {
            Some("lazy")
        } else if self.is_y("PREEMPT") {
            Some("full")
        } else if self.is_y("PREEMPT_VOLUNTARY") {
            Some("voluntary")
        } else if self.is_y("PREEMPT_NONE") {
            Some("none")
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_values_and_ignores_unset_lines() {
        let c = KernelConfig::parse(
            "t",
            "# CONFIG_PREEMPT_RT is not set\nCONFIG_HZ=250\nCONFIG_NO_HZ_IDLE=y\nCONFIG_LOCALVERSION=\"-rt\"\n",
        );
        assert_eq!(c.get("HZ"), Some("250"));
        assert_eq!(c.get("CONFIG_LOCALVERSION"), Some("-rt"));
        assert!(c.is_y("NO_HZ_IDLE"));
        assert!(!c.is_y("PREEMPT_RT"));
    }

    #[test]
    fn dynamic_kernel_default_is_the_chosen_model_not_preemption() {
        let c = KernelConfig::parse(
            "t",
            "CONFIG_PREEMPT_BUILD=y\nCONFIG_PREEMPT_NONE=y\nCONFIG_PREEMPTION=y\nCONFIG_PREEMPT_DYNAMIC=y\n",
        );
        assert_eq!(c.preempt_default(), Some("none"));
        let rt = KernelConfig::parse("t", "CONFIG_PREEMPT=y\nCONFIG_PREEMPT_RT=y\n");
        assert_eq!(rt.preempt_default(), Some("rt"));
    }

    #[test]
    fn missing_config_is_none_and_bad_release_is_not_a_path() {
        let d = tempfile::tempdir().unwrap();
        assert!(KernelConfig::read(&Root::new(d.path()), "6.1.0").is_none());
        assert!(KernelConfig::read(&Root::new(d.path()), "../../etc/passwd").is_none());
    }
}
