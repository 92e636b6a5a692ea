//! `--gpio CHIP:LINE`: drive one GPIO line high at the trigger time and low once the tone
//! was rendered, so an oscilloscope can time the trigger-to-sound latency as Topliss et al. did
//! (GPIO edge on one channel, audio on the other). Linux GPIO character device, v2 uAPI,
//! through two ioctls: request the line as an output, then set its value.

use crate::error::{Error, Result};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const LINES_MAX: usize = 64;
const NAME_SIZE: usize = 32;
const ATTRS_MAX: usize = 10;
const FLAG_OUTPUT: u64 = 1 << 3;

#[repr(C)]
#[derive(Clone, Copy)]
struct LineAttribute {
    id: u32,
    padding: u32,
    value: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct ConfigAttribute {
    attr: LineAttribute,
    mask: u64,
}

#[repr(C)]
struct LineConfig {
    flags: u64,
    num_attrs: u32,
    padding: [u32; 5],
    attrs: [ConfigAttribute; ATTRS_MAX],
}

#[repr(C)]
struct LineRequest {
    offsets: [u32; LINES_MAX],
    consumer: [u8; NAME_SIZE],
    config: LineConfig,
    num_lines: u32,
    event_buffer_size: u32,
    padding: [u32; 5],
    fd: i32,
}

#[repr(C)]
struct LineValues {
    bits: u64,
    mask: u64,
}

nix::ioctl_readwrite!(get_line, 0xB4, 0x07, LineRequest);
nix::ioctl_readwrite!(set_values, 0xB4, 0x0F, LineValues);

/// Where the line is: `gpiochip0:17`, `/dev/gpiochip0:17` or `0:17`.
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct GpioSpec {
    /// Character device path.
    pub chip: String,
    pub line: u32,
}

impl std::str::FromStr for GpioSpec {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let bad = || {
            Error::usage(format!(
                "bad --gpio '{s}': use CHIP:LINE, e.g. gpiochip0:17"
            ))
        };
        let (chip, line) = s.rsplit_once(':').ok_or_else(bad)?;
        let line: u32 = line.trim().parse().map_err(|_| bad())?;
        let chip = chip.trim();
        if chip.is_empty() {
            return Err(bad());
        }
        let chip = if chip.starts_with('/') {
            chip.to_string()
        } else if chip.bytes().all(|b| b.is_ascii_digit()) {
            format!("/dev/gpiochip{chip}")
        } else {
            format!("/dev/{chip}")
        };
        if line as usize >= 1 << 16 {
            return Err(bad());
        }
        Ok(GpioSpec { chip, line })
    }
}

/// A requested output line; released (and left at its last value by the kernel) on drop.
pub struct GpioLine {
    fd: OwnedFd,
}

impl GpioLine {
    /// Request the line as an output, initially low. A missing chip, a line it does not
    /// have, or a line held by someone else cannot be measured with: exit 3 naming it.
    pub fn open(spec: &GpioSpec) -> Result<GpioLine> {
        let chip = std::fs::File::open(&spec.chip).map_err(|e| {
            Error::cannot_measure(format!(
                "--gpio: cannot open GPIO chip {}: {e} (list chips with `ls /dev/gpiochip*`)",
                spec.chip
            ))
        })?;
        let mut consumer = [0u8; NAME_SIZE];
        consumer[..7].copy_from_slice(b"xrunlab");
        let empty = ConfigAttribute {
            attr: LineAttribute {
                id: 0,
                padding: 0,
                value: 0,
            },
            mask: 0,
        };
        let mut offsets = [0u32; LINES_MAX];
        offsets[0] = spec.line;
        let mut req = LineRequest {
            offsets,
            consumer,
            config: LineConfig {
                flags: FLAG_OUTPUT,
                num_attrs: 0,
                padding: [0; 5],
                attrs: [empty; ATTRS_MAX],
            },
            num_lines: 1,
            event_buffer_size: 0,
            padding: [0; 5],
            fd: -1,
        };
        // SAFETY: `req` is a properly laid-out gpio_v2_line_request for the kernel to fill.
        unsafe { get_line(chip.as_raw_fd(), &mut req) }.map_err(|e| {
            Error::cannot_measure(format!(
                "--gpio: cannot request line {} of {} as an output: {e}",
                spec.line, spec.chip
            ))
        })?;
        // SAFETY: on success the kernel returned a new file descriptor we now own.
        let fd = unsafe { OwnedFd::from_raw_fd(req.fd) };
        Ok(GpioLine { fd })
    }

    /// Drive the line; real-time safe enough for the trigger thread (one ioctl).
    pub fn set(&self, high: bool) -> Result<()> {
        let mut v = LineValues {
            bits: high as u64,
            mask: 1,
        };
        // SAFETY: `v` is a gpio_v2_line_values; the fd is a line request fd.
        unsafe { set_values(self.fd.as_raw_fd(), &mut v) }
            .map(|_| ())
            .map_err(|e| Error::cannot_measure(format!("--gpio: setting the line failed: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_the_kernel_uapi() {
        assert_eq!(std::mem::size_of::<LineAttribute>(), 16);
        assert_eq!(std::mem::size_of::<ConfigAttribute>(), 24);
        assert_eq!(std::mem::size_of::<LineConfig>(), 272);
        assert_eq!(std::mem::size_of::<LineRequest>(), 592);
        assert_eq!(std::mem::size_of::<LineValues>(), 16);
    }

    #[test]
    fn specs_parse() {
        let g: GpioSpec = "gpiochip0:17".parse().unwrap();
        assert_eq!((g.chip.as_str(), g.line), ("/dev/gpiochip0", 17));
        let g: GpioSpec = "2:3".parse().unwrap();
        assert_eq!(g.chip, "/dev/gpiochip2");
        let g: GpioSpec = "/dev/gpiochip1:0".parse().unwrap();
        assert_eq!(g.chip, "/dev/gpiochip1");
        assert!("gpiochip0".parse::<GpioSpec>().is_err());
        assert!("gpiochip0:x".parse::<GpioSpec>().is_err());
        assert!(":4".parse::<GpioSpec>().is_err());
    }
}
