//! Wavetable oscillators as in Topliss et al.: `sine` (one tone) and `poly` (three harmonically
//! related tones summed). Both add their tone to the audio passing through, so they work
//! at the head of a chain (silent input) and in the middle of one.
//!
//! `note_on` restarts the tone at phase 0, so the onset is the same on every trigger (the
//! event-latency measurement looks for it); `note_off` silences it. A tone sounds from
//! creation unless the parameters say `gate=0`.

use super::{Plugin, PluginContext};
use crate::error::{Error, Result};
use std::sync::OnceLock;

const TABLE_BITS: u32 = 12;
const TABLE_LEN: usize = 1 << TABLE_BITS;
const FRAC_BITS: u32 = 32 - TABLE_BITS;

/// One period of a sine plus a guard point, shared by every instance (one cache footprint
/// however many oscillators run). Linear interpolation on 4096 points is accurate to ~3e-7.
fn table() -> &'static [f32] {
    static TABLE: OnceLock<Box<[f32]>> = OnceLock::new();
    TABLE.get_or_init(|| {
        (0..=TABLE_LEN)
            .map(|i| (2.0 * std::f64::consts::PI * i as f64 / TABLE_LEN as f64).sin() as f32)
            .collect()
    })
}

/// A 32-bit phase accumulator: wraps exactly, frequency error < rate/2³² Hz.
#[derive(Debug, Clone, Copy)]
struct Osc {
    phase: u32,
    inc: u32,
    amp: f32,
}

impl Osc {
    fn new(freq: f64, amp: f32, rate: u32) -> Osc {
        Osc {
            phase: 0,
            inc: (freq / rate as f64 * 4_294_967_296.0).round() as u32,
            amp,
        }
    }

    #[inline(always)]
    fn next(&mut self, t: &[f32]) -> f32 {
        let i = (self.phase >> FRAC_BITS) as usize;
        let frac =
            (self.phase & ((1 << FRAC_BITS) - 1)) as f32 * (1.0 / (1u32 << FRAC_BITS) as f32);
        self.phase = self.phase.wrapping_add(self.inc);
        // i <= TABLE_LEN - 1, so i + 1 hits the guard point at most.
        let (a, b) = (t[i], t[i + 1]);
        self.amp * (a + frac * (b - a))
    }
}

/// `sine` and `poly` are the same plugin with one or three partials.
struct Tones<const K: usize> {
    osc: [Osc; K],
    on: bool,
    table: &'static [f32],
}

impl<const K: usize> Plugin for Tones<K> {
    fn process(&mut self, left: &mut [f32], right: &mut [f32]) {
        if !self.on {
            return;
        }
        let t = self.table;
        for (l, r) in left.iter_mut().zip(right.iter_mut()) {
            let mut v = 0.0;
            for o in self.osc.iter_mut() {
                v += o.next(t);
            }
            *l += v;
            *r += v;
        }
    }

    fn note_on(&mut self) {
        for o in self.osc.iter_mut() {
            o.phase = 0;
        }
        self.on = true;
    }

    fn note_off(&mut self) {
        self.on = false;
    }
}

/// Parsed `FREQ` or `freq=F,amp=A,gate=0|1`.
struct ToneParams {
    freq: f64,
    amp: f64,
    gate: bool,
}

fn parse(
    name: &str,
    text: &str,
    default_freq: f64,
    max_partial: f64,
    ctx: &PluginContext,
) -> Result<ToneParams> {
    let bad = |msg: String| {
        Error::usage(format!(
            "{name}: {msg} (syntax: {name}(FREQ) or {name}(freq=HZ,amp=0..1,gate=0|1))"
        ))
    };
    let mut p = ToneParams {
        freq: default_freq,
        amp: 0.5,
        gate: true,
    };
    for (idx, item) in text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .enumerate()
    {
        let (k, v) = match item.split_once('=') {
            Some((k, v)) => (k.trim().to_ascii_lowercase(), v.trim()),
            None if idx == 0 => ("freq".to_string(), item),
            None => return Err(bad(format!("expected key=value, got '{item}'"))),
        };
        let num = || {
            v.trim_end_matches("Hz")
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .ok_or_else(|| bad(format!("{k} must be a number, got '{v}'")))
        };
        match k.as_str() {
            "freq" | "f" => p.freq = num()?,
            "amp" => p.amp = num()?,
            "gate" => {
                p.gate = match v {
                    "1" | "on" | "true" => true,
                    "0" | "off" | "false" => false,
                    _ => return Err(bad(format!("gate must be 0 or 1, got '{v}'"))),
                }
            }
            _ => return Err(bad(format!("unknown parameter '{k}'"))),
        }
    }
    if let Some(why) = tone_problem(p.freq, max_partial, ctx.rate) {
        return Err(bad(why));
    }
    if !(0.0..=1.0).contains(&p.amp) {
        return Err(bad(format!("amp must be within 0..1, got {}", p.amp)));
    }
    Ok(p)
}

/// Why a tone of `freq` Hz whose highest partial is `max_partial` × `freq` cannot be played at
/// `rate` Hz, if it cannot: the one rule of the sine plugins and the virtual codec's
/// `--input sine:FREQ`.
pub fn tone_problem(freq: f64, max_partial: f64, rate: u32) -> Option<String> {
    let top = rate as f64 / 2.0;
    if freq.is_nan() || freq <= 0.0 {
        Some(format!("frequency must be above 0 Hz, got {freq}"))
    } else if freq * max_partial >= top {
        Some(if max_partial > 1.0 {
            format!("frequency {freq} Hz puts a partial at or above Nyquist ({top} Hz)")
        } else {
            format!("frequency {freq} Hz is at or above Nyquist ({top} Hz)")
        })
    } else {
        None
    }
}

pub fn create_sine(params: &str, ctx: &PluginContext) -> Result<Box<dyn Plugin>> {
    let p = parse("sine", params, 440.0, 1.0, ctx)?;
    Ok(Box::new(Tones::<1> {
        osc: [Osc::new(p.freq, p.amp as f32, ctx.rate)],
        on: p.gate,
        table: table(),
    }))
}

/// Partials 1, 2, 3 at amplitudes 1, 1/2, 1/3, scaled so their peak sum is `amp`.
pub fn create_poly(params: &str, ctx: &PluginContext) -> Result<Box<dyn Plugin>> {
    let p = parse("poly", params, 220.0, 3.0, ctx)?;
    let norm = p.amp / (1.0 + 1.0 / 2.0 + 1.0 / 3.0);
    Ok(Box::new(Tones::<3> {
        osc: std::array::from_fn(|k| {
            Osc::new(
                p.freq * (k + 1) as f64,
                (norm / (k + 1) as f64) as f32,
                ctx.rate,
            )
        }),
        on: p.gate,
        table: table(),
    }))
}
