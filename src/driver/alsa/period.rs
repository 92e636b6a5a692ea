//! One period in and out of a PCM: the sample formats, (de)interleaving, and whole-period
//! reads and writes however many calls they take.

use super::AlsaAccess;
use ::alsa::pcm::{IoFormat, IO, PCM};

/// A sample format the driver converts to and from.
pub(super) trait Sample: IoFormat + Send + 'static {
    const ZERO: Self;
    fn from_f32(x: f32) -> Self;
    fn to_f32(self) -> f32;
}

impl Sample for f32 {
    const ZERO: Self = 0.0;
    #[inline]
    fn from_f32(x: f32) -> Self {
        x
    }
    #[inline]
    fn to_f32(self) -> f32 {
        self
    }
}

impl Sample for i32 {
    const ZERO: Self = 0;
    #[inline]
    fn from_f32(x: f32) -> Self {
        // f64: 2^31−1 is not representable in f32, and the cast saturates anyway.
        (x.clamp(-1.0, 1.0) as f64 * i32::MAX as f64) as i32
    }
    #[inline]
    fn to_f32(self) -> f32 {
        (self as f64 / i32::MAX as f64) as f32
    }
}

impl Sample for i16 {
    const ZERO: Self = 0;
    #[inline]
    fn from_f32(x: f32) -> Self {
        (x.clamp(-1.0, 1.0) * i16::MAX as f32) as i16
    }
    #[inline]
    fn to_f32(self) -> f32 {
        self as f32 / i16::MAX as f32
    }
}

pub(super) fn interleave<S: Sample>(l: &[f32], r: &[f32], out: &mut [S], ch: usize) {
    for (i, frame) in out.chunks_exact_mut(ch).enumerate() {
        if ch == 1 {
            frame[0] = S::from_f32(0.5 * (l[i] + r[i]));
            continue;
        }
        frame[0] = S::from_f32(l[i]);
        frame[1] = S::from_f32(r[i]);
        for s in &mut frame[2..] {
            *s = S::ZERO;
        }
    }
}

pub(super) fn deinterleave<S: Sample>(buf: &[S], l: &mut [f32], r: &mut [f32], ch: usize) {
    for (i, frame) in buf.chunks_exact(ch).enumerate() {
        l[i] = frame[0].to_f32();
        r[i] = frame[ch.min(2) - 1].to_f32();
    }
}

/// Move one period through a PCM, however many calls it takes: `step(done)` moves what it
/// can from frame `done` on and returns how many frames it moved; 0 means the device has no
/// room yet, so wait for it.
fn whole_period(
    pcm: &PCM,
    frames: usize,
    mut step: impl FnMut(usize) -> std::result::Result<usize, ::alsa::Error>,
) -> std::result::Result<(), ::alsa::Error> {
    let mut done = 0;
    while done < frames {
        let n = step(done)?;
        if n == 0 {
            pcm.wait(Some(1000))?;
        }
        done += n;
    }
    Ok(())
}

/// Write one period.
pub(super) fn write_period<S: Sample>(
    pcm: &PCM,
    io: &IO<'_, S>,
    buf: &[S],
    ch: usize,
    access: AlsaAccess,
) -> std::result::Result<(), ::alsa::Error> {
    let frames = buf.len() / ch;
    whole_period(pcm, frames, |done| {
        let src = &buf[done * ch..];
        match access {
            AlsaAccess::Rw => io.writei(src),
            AlsaAccess::Mmap => {
                pcm.avail_update()?;
                io.mmap(frames - done, |dst| {
                    let k = dst.len().min(src.len());
                    dst[..k].copy_from_slice(&src[..k]);
                    k / ch
                })
            }
        }
    })
}

/// Read one period.
pub(super) fn read_period<S: Sample>(
    pcm: &PCM,
    io: &IO<'_, S>,
    buf: &mut [S],
    ch: usize,
    access: AlsaAccess,
) -> std::result::Result<(), ::alsa::Error> {
    let frames = buf.len() / ch;
    whole_period(pcm, frames, |done| {
        let dst = &mut buf[done * ch..];
        match access {
            AlsaAccess::Rw => io.readi(dst),
            AlsaAccess::Mmap => {
                pcm.avail_update()?;
                io.mmap(frames - done, |src| {
                    let k = src.len().min(dst.len());
                    dst[..k].copy_from_slice(&src[..k]);
                    k / ch
                })
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversion_saturates_and_keeps_sign() {
        assert_eq!(i16::from_f32(1.5), i16::MAX);
        assert_eq!(i16::from_f32(-1.0), -i16::MAX);
        assert_eq!(i32::from_f32(0.5), i32::MAX / 2);
        assert_eq!(i32::from_f32(-2.0), -i32::MAX);
        assert_eq!(f32::from_f32(0.25), 0.25);
    }

    #[test]
    fn interleave_fills_extra_channels_with_silence_and_mixes_mono() {
        let (l, r) = ([0.5f32, -0.5], [0.25f32, 0.0]);
        let mut four = [9.0f32; 8];
        interleave(&l, &r, &mut four, 4);
        assert_eq!(four, [0.5, 0.25, 0.0, 0.0, -0.5, 0.0, 0.0, 0.0]);
        let mut mono = [0i16; 2];
        interleave(&l, &r, &mut mono, 1);
        assert_eq!(mono, [i16::from_f32(0.375), i16::from_f32(-0.25)]);
    }
}
