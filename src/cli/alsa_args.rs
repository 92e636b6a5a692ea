//! The ALSA device flags shared by `run`, `event` and `rtl`: one definition so they read
//! and validate the same everywhere.

use crate::driver::alsa::{AlsaAccess, AlsaConfig};
use crate::error::{Error, Result};
use clap::{Args, ValueEnum};

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum AccessArg {
    Rw,
    Mmap,
}

#[derive(Debug, Clone, Args)]
pub struct AlsaArgs {
    /// alsa: PCM device, e.g. hw:0, hw:Loopback, default, or a PCM of your ALSA config
    /// [default: default]. ALSA's period size is --buffer, its periods --periods, its buffer
    /// size --buffer × --periods.
    #[arg(long, value_name = "NAME")]
    pub device: Option<String>,
    /// alsa: interleaved read/write calls, or mmap straight into the device buffer.
    #[arg(long, value_enum, value_name = "rw|mmap")]
    pub access: Option<AccessArg>,
}

impl AlsaArgs {
    /// The device configuration when `alsa` is the driver; with any other driver the ALSA
    /// flags are a usage error rather than silently ignored.
    pub fn to_config(&self, alsa: bool) -> Result<Option<AlsaConfig>> {
        if !alsa {
            if self.device.is_some() || self.access.is_some() {
                return Err(Error::usage("--device and --access need --driver alsa"));
            }
            return Ok(None);
        }
        let device = self.device.clone().unwrap_or_else(|| "default".into());
        if device.trim().is_empty() {
            return Err(Error::usage("--device: empty device name"));
        }
        Ok(Some(AlsaConfig {
            device,
            access: match self.access {
                Some(AccessArg::Mmap) => AlsaAccess::Mmap,
                _ => AlsaAccess::Rw,
            },
        }))
    }
}
