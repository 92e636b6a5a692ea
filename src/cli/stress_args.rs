//! The stress options every measuring command accepts (`#[command(flatten)]`), and the
//! validated [`StressSpec`] they make.

use crate::error::{Error, Result};
use crate::stress::spec::{
    parse_presets, parse_size, BackendChoice, StressSpec, DEFAULT_FILE_SIZE,
};
use clap::Args;
use std::path::PathBuf;

/// The stress options every measuring command accepts (`#[command(flatten)]`).
// Per-argument headings: a struct-level next_help_heading would leak onto the options
// that follow the flattened group in the host command.
#[derive(Debug, Clone, Args)]
pub struct StressArgs {
    /// Run under stress: PRESET[,PRESET…] of paper, cpu, io, vm, udp, netdev, cache, timer,
    /// disk-write, disk-copy, disk-read, proc, top; or none.
    #[arg(help_heading = "Stress", long, value_name = "PRESETS")]
    pub stress: Option<String>,
    /// Instances of each stress-ng class and of the built-in cpu/io/vm/udp/cache/timer
    /// stressors (the paper preset always uses its own line).
    #[arg(help_heading = "Stress", long, value_name = "N", default_value_t = 1)]
    pub stress_workers: u32,
    /// Pin the stressors to these CPUs (kernel list format, e.g. 1 or 0-2).
    #[arg(help_heading = "Stress", long, value_name = "LIST")]
    pub stress_cpus: Option<String>,
    /// Directory for the disk classes' files (a private subdirectory is created and removed).
    #[arg(help_heading = "Stress", long, value_name = "DIR")]
    pub stress_dir: Option<PathBuf>,
    /// Size of the disk classes' file [default: 256M].
    #[arg(help_heading = "Stress", long, value_name = "SIZE")]
    pub stress_size: Option<String>,
    /// Run your own command as a stressor; split like a shell would split words, but run
    /// directly (no shell: $VAR, globs, | and ; are passed literally). Repeatable.
    #[arg(
        help_heading = "Stress",
        long,
        value_name = "'ARGV…'",
        allow_hyphen_values = true
    )]
    pub stress_cmd: Vec<String>,
    /// Which implementation runs the stress-ng classes.
    #[arg(help_heading = "Stress", long, value_enum, value_name = "BACKEND", default_value_t = BackendChoice::Auto)]
    pub stress_backend: BackendChoice,
}

impl Default for StressArgs {
    fn default() -> Self {
        StressArgs {
            stress: None,
            stress_workers: 1,
            stress_cpus: None,
            stress_dir: None,
            stress_size: None,
            stress_cmd: Vec::new(),
            stress_backend: BackendChoice::Auto,
        }
    }
}

impl StressArgs {
    pub fn to_spec(&self) -> Result<StressSpec> {
        let presets = match &self.stress {
            Some(s) => parse_presets(s)?,
            None => Vec::new(),
        };
        if !(1..=256).contains(&self.stress_workers) {
            return Err(Error::usage(format!(
                "--stress-workers {} is outside 1..256",
                self.stress_workers
            )));
        }
        let cpus = match &self.stress_cpus {
            Some(list) => crate::rt::affinity::select_cpus(Some(list))
                .map_err(|e| Error::usage(format!("--stress-cpus: {e}")))?,
            None => Vec::new(),
        };
        // Absolute before any stressor starts: the stressors run in their own working
        // directory, where a relative path names another place (or none).
        let dir = match &self.stress_dir {
            Some(d) if !d.is_dir() => {
                return Err(Error::usage(format!(
                    "--stress-dir {}: not a directory",
                    d.display()
                )))
            }
            Some(d) => Some(
                std::fs::canonicalize(d)
                    .map_err(|e| Error::usage(format!("--stress-dir {}: {e}", d.display())))?,
            ),
            None => None,
        };
        let file_size = match &self.stress_size {
            Some(s) => parse_size(s)?,
            None => DEFAULT_FILE_SIZE,
        };
        let commands = self
            .stress_cmd
            .iter()
            .map(|c| crate::stress::argv::split_argv(c))
            .collect::<Result<Vec<_>>>()?;
        Ok(StressSpec {
            presets,
            workers: self.stress_workers,
            cpus,
            dir,
            file_size,
            commands,
            backend: self.stress_backend,
            stressor_exe: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stress::Preset;

    #[test]
    fn args_to_spec() {
        let a = StressArgs {
            stress: Some("paper,disk-read".into()),
            stress_workers: 2,
            stress_size: Some("8M".into()),
            stress_cmd: vec!["echo 'a b' c".into()],
            ..Default::default()
        };
        let s = a.to_spec().unwrap();
        assert_eq!(s.presets, vec![Preset::Paper, Preset::DiskRead]);
        assert_eq!(s.workers, 2);
        assert_eq!(s.file_size, 8 << 20);
        assert_eq!(s.commands, vec![vec!["echo", "a b", "c"]]);
        assert_eq!(s.labels(), vec!["paper", "disk-read", "cmd:echo"]);
        let bad = StressArgs {
            stress_workers: 0,
            ..Default::default()
        };
        assert!(bad.to_spec().is_err());
        assert!(StressArgs::default().to_spec().unwrap().is_idle());
    }
}
