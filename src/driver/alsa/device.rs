//! Opening a device: the hw/sw parameters negotiated for playback and, when the device has
//! it, capture.

use super::report::AlsaReport;
use super::{AlsaAccess, AlsaConfig, ENGINE_CHANNELS};
use crate::error::{Error, Result};
use ::alsa::pcm::{Access, Format, HwParams, TstampType, PCM};
use ::alsa::{Direction, ValueOr};

/// The text ALSA gives for an error (what `snd_strerror` prints for a system errno).
pub(super) fn alsa_text(e: &::alsa::Error) -> String {
    nix::errno::Errno::from_raw(e.errno()).desc().to_string()
}

/// What one PCM accepted.
#[derive(Debug, Clone, Copy)]
pub(super) struct Negotiated {
    pub(super) format: Format,
    pub(super) channels: u32,
    pub(super) rate: u32,
    pub(super) period: u32,
    pub(super) periods: u32,
    pub(super) buffer: u32,
}

/// Formats in order of preference: the engine's own float first, then integer formats
/// converted in the driver.
const FORMATS: [Format; 3] = [Format::FloatLE, Format::S32LE, Format::S16LE];

fn configure(
    pcm: &PCM,
    access: AlsaAccess,
    format: Option<Format>,
    rate: u32,
    period: u32,
    periods: u32,
) -> std::result::Result<Negotiated, (&'static str, ::alsa::Error)> {
    let hw = HwParams::any(pcm).map_err(|e| ("read the hardware parameters", e))?;
    hw.set_access(match access {
        AlsaAccess::Rw => Access::RWInterleaved,
        AlsaAccess::Mmap => Access::MMapInterleaved,
    })
    .map_err(|e| ("set the access type", e))?;
    let format = match format {
        Some(f) => f,
        None => FORMATS
            .into_iter()
            .find(|f| hw.test_format(*f).is_ok())
            .ok_or((
                "find FLOAT_LE, S32_LE or S16_LE",
                ::alsa::Error::unsupported("format"),
            ))?,
    };
    hw.set_format(format).map_err(|e| ("set the format", e))?;
    let channels = hw
        .set_channels_near(ENGINE_CHANNELS as u32)
        .map_err(|e| ("set 2 channels", e))?;
    // Resampling in alsa-lib would hide the device's real clock.
    let _ = hw.set_rate_resample(false);
    let rate = hw
        .set_rate_near(rate, ValueOr::Nearest)
        .map_err(|e| ("set the rate", e))?;
    hw.set_period_size_near(period as ::alsa::pcm::Frames, ValueOr::Nearest)
        .map_err(|e| ("set the period size", e))?;
    hw.set_periods_near(periods, ValueOr::Nearest)
        .map_err(|e| ("set the periods", e))?;
    pcm.hw_params(&hw)
        .map_err(|e| ("install the hardware parameters", e))?;
    let cur = pcm
        .hw_params_current()
        .map_err(|e| ("read back the hardware parameters", e))?;
    let n = Negotiated {
        format,
        channels,
        rate: cur.get_rate().unwrap_or(rate),
        period: cur.get_period_size().map_err(|e| ("read the period", e))? as u32,
        periods: cur.get_periods().map_err(|e| ("read the periods", e))?,
        buffer: cur.get_buffer_size().map_err(|e| ("read the buffer", e))? as u32,
    };
    let sw = pcm
        .sw_params_current()
        .map_err(|e| ("read the software parameters", e))?;
    let boundary = sw.get_boundary().map_err(|e| ("read the boundary", e))?;
    sw.set_avail_min(n.period as ::alsa::pcm::Frames)
        .map_err(|e| ("set avail_min", e))?;
    // Started explicitly after the pre-fill; an empty buffer is an xrun, never a pause.
    sw.set_start_threshold(boundary)
        .map_err(|e| ("set the start threshold", e))?;
    sw.set_stop_threshold(n.buffer as ::alsa::pcm::Frames)
        .map_err(|e| ("set the stop threshold", e))?;
    sw.set_tstamp_mode(true)
        .map_err(|e| ("enable timestamps", e))?;
    // Old kernels know only gettimeofday stamps: then t_ideal comes from our own reads.
    let _ = sw.set_tstamp_type(TstampType::Monotonic);
    pcm.sw_params(&sw)
        .map_err(|e| ("install the software parameters", e))?;
    Ok(n)
}

/// An open, configured device: playback, and capture when the device has it.
pub struct AlsaDevice {
    pub(super) cfg: AlsaConfig,
    pub(super) play: PCM,
    pub(super) cap: Option<PCM>,
    pub(super) linked: bool,
    pub(super) neg: Negotiated,
    pub(super) monotonic_tstamps: bool,
    pub(super) capture_note: Option<String>,
    pub(super) pcm_name: String,
}

impl AlsaDevice {
    /// Whether `cfg.device` opens for playback now, without configuring it: a command that
    /// measures several backends asks before it measures any, so a missing or busy device is
    /// a skipped backend with ALSA's reason, not an error after the others' minutes.
    pub fn probe(cfg: &AlsaConfig) -> Result<()> {
        PCM::new(&cfg.device, Direction::Playback, true)
            .map(drop)
            .map_err(|e| {
                Error::cannot_measure(format!(
                    "cannot open ALSA device '{}': {}",
                    cfg.device,
                    alsa_text(&e)
                ))
            })
    }

    /// Open `cfg.device` and negotiate the period (xrunlab's `--buffer`), periods and rate
    /// closest to those asked. A device that cannot be opened or configured is an
    /// environment error (exit 3) with ALSA's text.
    pub fn open(cfg: &AlsaConfig, rate: u32, frames: u32, periods: u32) -> Result<Self> {
        let play = PCM::new(&cfg.device, Direction::Playback, false).map_err(|e| {
            let msg = format!(
                "cannot open ALSA device '{}': {}",
                cfg.device,
                alsa_text(&e)
            );
            // Another program holding the device is worth telling apart: it is the one case
            // the user fixes by closing something rather than by configuring.
            if e.errno() == libc::EBUSY {
                Error::device_busy(msg)
            } else {
                Error::cannot_measure(msg)
            }
        })?;
        let neg =
            configure(&play, cfg.access, None, rate, frames, periods).map_err(|(what, e)| {
                Error::cannot_measure(format!(
                    "ALSA device '{}' (playback): cannot {what}: {}",
                    cfg.device,
                    alsa_text(&e)
                ))
            })?;
        let monotonic_tstamps = play
            .sw_params_current()
            .and_then(|s| s.get_tstamp_type())
            .is_ok_and(|t| t == TstampType::Monotonic);
        // Capture with exactly playback's format, rate and period, or none: a duplex pair
        // that disagrees cannot share one cycle.
        let (cap, capture_note) = match PCM::new(&cfg.device, Direction::Capture, false) {
            Err(e) => (None, Some(format!("no capture stream: {}", alsa_text(&e)))),
            Ok(c) => match configure(
                &c,
                cfg.access,
                Some(neg.format),
                neg.rate,
                neg.period,
                neg.periods,
            ) {
                Ok(cn) if cn.rate == neg.rate && cn.period == neg.period => (Some(c), None),
                Ok(cn) => (
                    None,
                    Some(format!(
                        "capture negotiated {} Hz / {} frames, playback {} Hz / {} frames: playback only",
                        cn.rate, cn.period, neg.rate, neg.period
                    )),
                ),
                Err((what, e)) => (
                    None,
                    Some(format!("capture: cannot {what}: {}", alsa_text(&e))),
                ),
            },
        };
        let linked = cap.as_ref().is_some_and(|c| play.link(c).is_ok());
        let pcm_name = play
            .info()
            .ok()
            .and_then(|i| i.get_name().ok().map(str::to_string))
            .unwrap_or_default();
        Ok(AlsaDevice {
            cfg: cfg.clone(),
            play,
            cap,
            linked,
            neg,
            monotonic_tstamps,
            capture_note,
            pcm_name,
        })
    }

    pub fn rate(&self) -> u32 {
        self.neg.rate
    }
    /// ALSA's period size = xrunlab's buffer.
    pub fn period_frames(&self) -> u32 {
        self.neg.period
    }
    pub fn periods(&self) -> u32 {
        self.neg.periods
    }
    /// Capture was opened beside playback with the same setup (full duplex).
    pub fn has_capture(&self) -> bool {
        self.cap.is_some()
    }
    /// Why there is no capture stream.
    pub fn capture_note(&self) -> Option<&str> {
        self.capture_note.as_deref()
    }

    pub(super) fn report(&self) -> AlsaReport {
        AlsaReport {
            device: self.cfg.device.clone(),
            pcm_name: self.pcm_name.clone(),
            capture: self.cap.is_some(),
            capture_note: self.capture_note.clone(),
            linked: self.linked,
            format: self.neg.format.to_string(),
            access: self.cfg.access,
            channels: self.neg.channels,
            rate: self.neg.rate,
            period_frames: self.neg.period,
            periods: self.neg.periods,
            buffer_frames: self.neg.buffer,
            ..AlsaReport::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_device_is_an_environment_error_with_alsa_text() {
        let e = AlsaDevice::open(
            &AlsaConfig {
                device: "hw:9".into(),
                access: AlsaAccess::Rw,
            },
            48000,
            256,
            2,
        )
        .err()
        .expect("hw:9 does not exist");
        assert_eq!(e.exit_code(), crate::error::EXIT_CANNOT_MEASURE);
        let msg = e.to_string();
        assert!(msg.starts_with("cannot open ALSA device 'hw:9': "), "{msg}");
    }
}
