//! The round-trip latency model of Vignati et al. (eq. 1): n periods of buffering plus the
//! interface FIFO and the converters, and Table 1's rounding of it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The loop's fixed latencies besides buffering (Vignati et al. eq. 1).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LoopLatency {
    /// I²S (or other interface) FIFO latency, frames.
    pub fifo_frames: u32,
    /// Converter latencies, frames.
    pub adc_frames: u32,
    pub dac_frames: u32,
}

impl LoopLatency {
    pub fn fixed_frames(&self) -> u64 {
        self.fifo_frames as u64 + self.adc_frames as u64 + self.dac_frames as u64
    }
}

/// Parse `ADC+DAC` (e.g. `2+10`) or a single total.
pub fn parse_codec(s: &str) -> crate::Result<(u32, u32)> {
    let bad = || crate::Error::usage(format!("bad --codec '{s}': use ADC+DAC frames, e.g. 2+10"));
    match s.split_once('+') {
        Some((a, d)) => Ok((
            a.trim().parse().map_err(|_| bad())?,
            d.trim().parse().map_err(|_| bad())?,
        )),
        None => Ok((0, s.trim().parse().map_err(|_| bad())?)),
    }
}

/// A named hardware setup of Vignati et al.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Profile {
    pub name: &'static str,
    pub latency: LoopLatency,
    /// Smallest buffer the study's system ran at (Table 1 prints "-" below it).
    pub min_buffer: u32,
}

pub const PROFILES: [Profile; 2] = [
    Profile {
        name: "xenomai-hifiberry",
        latency: LoopLatency {
            fifo_frames: 13,
            adc_frames: 2,
            dac_frames: 10,
        },
        min_buffer: 16,
    },
    Profile {
        name: "preemptrt-hifiberry",
        latency: LoopLatency {
            fifo_frames: 20,
            adc_frames: 2,
            dac_frames: 10,
        },
        min_buffer: 64,
    },
];

pub fn profile(name: &str) -> crate::Result<Profile> {
    PROFILES
        .iter()
        .find(|p| p.name == name)
        .copied()
        .ok_or_else(|| {
            crate::Error::usage(format!(
                "unknown --profile '{name}': use {}",
                PROFILES.map(|p| p.name).join(" or ")
            ))
        })
}

/// One modelled buffer size.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ModelRow {
    pub buffer_frames: u32,
    /// periods·buffer + FIFO + ADC + DAC.
    pub rtl_frames: u64,
    /// rtl_frames / rate, exactly.
    pub rtl_ms: f64,
    /// The ms value as Vignati et al.'s Table 1 prints it (see [`published_ms`]).
    pub published_ms: f64,
    /// The profile's system did not run at this buffer size in Vignati et al.
    pub below_profile_min: bool,
}

/// RTL in frames: each of the `periods` periods of buffering delays the loop by one buffer
/// (capture completes one period, playback queues n−1); with n = 2 this is eq. 1's
/// 2·buffer/fs.
pub fn model_frames(buffer: u32, periods: u32, lat: &LoopLatency) -> u64 {
    periods as u64 * buffer as u64 + lat.fixed_frames()
}

/// Table 1(a) of Vignati et al. is not `frames/fs` rounded one way: its cells are the sum of
/// separately rounded terms — the period `buffer/fs` rounded *up* to 0.01 ms, times the
/// periods, plus eq. 2/3's fixed part rounded *down* to 0.01 ms (25/48 → 0.52, 32/48 → 0.66).
/// This reproduces all ten printed cells; the exact value is `rtl_ms`.
pub fn published_ms(buffer: u32, periods: u32, rate: u32, lat: &LoopLatency) -> f64 {
    let period_cms = (buffer as u64 * 100_000).div_ceil(rate as u64);
    let fixed_cms = lat.fixed_frames() * 100_000 / rate as u64;
    (periods as u64 * period_cms + fixed_cms) as f64 / 100.0
}

pub fn model_table(
    buffers: &[u32],
    periods: u32,
    rate: u32,
    lat: &LoopLatency,
    min_buffer: u32,
) -> Vec<ModelRow> {
    buffers
        .iter()
        .map(|&b| {
            let f = model_frames(b, periods, lat);
            ModelRow {
                buffer_frames: b,
                rtl_frames: f,
                rtl_ms: f as f64 * 1000.0 / rate as f64,
                published_ms: published_ms(b, periods, rate, lat),
                below_profile_min: b < min_buffer,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codec_parses() {
        assert_eq!(parse_codec("2+10").unwrap(), (2, 10));
        assert!(parse_codec("2+x").is_err());
    }
}
