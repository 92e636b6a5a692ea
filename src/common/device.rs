//! Device parameters and the one conversion between frames and nanoseconds, so that a
//! period means the same number of nanoseconds to the driver that paces it, the engine that
//! fills it and the measurement that reports it.

/// Nanoseconds per second.
const NS_PER_S: u128 = 1_000_000_000;

/// Sample rates (Hz) any command accepts; a result with another rate was not measured.
pub const RATES: std::ops::RangeInclusive<u32> = 1000..=768_000;

/// `--rate` refused unless within [`RATES`]: every command checks it before anything divides
/// by it (a plugin sizing its work per period once panicked on a rate of 0).
pub fn check_rate(rate: u32) -> crate::error::Result<()> {
    if !RATES.contains(&rate) {
        return Err(crate::error::Error::usage(format!(
            "--rate {rate} is outside {}..{} Hz",
            RATES.start(),
            RATES.end()
        )));
    }
    Ok(())
}

/// The duration of `frames` at `rate` Hz, rounded down to a nanosecond.
pub fn ns_of_frames(frames: u64, rate: u32) -> u64 {
    (frames as u128 * NS_PER_S / rate as u128) as u64
}

/// The whole frames at `rate` Hz that fit in `ns`.
pub fn frames_of_ns(ns: u64, rate: u32) -> u64 {
    (ns as u128 * rate as u128 / NS_PER_S) as u64
}

/// Device parameters shared by every driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceParams {
    pub rate: u32,
    pub frames: u32,
    /// Periods of buffering n (≥ 2).
    pub periods: u32,
}

impl DeviceParams {
    /// Nominal period P, rounded down to a nanosecond (timestamps use the exact rational).
    pub fn period_ns(&self) -> u64 {
        ns_of_frames(self.frames as u64, self.rate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_round_down_and_invert_on_whole_frames() {
        assert_eq!(ns_of_frames(64, 48_000), 1_333_333);
        assert_eq!(frames_of_ns(1_333_334, 48_000), 64);
        assert_eq!(frames_of_ns(ns_of_frames(48_000, 48_000), 48_000), 48_000);
        let p = DeviceParams {
            rate: 44_100,
            frames: 128,
            periods: 2,
        };
        assert_eq!(p.period_ns(), 2_902_494);
        // Large counts do not overflow: a week of frames at 768 kHz.
        assert_eq!(
            ns_of_frames(768_000 * 604_800, 768_000),
            604_800 * 1_000_000_000
        );
    }
}
