//! Design of the band-split filterbank each FDN delay line runs through: at every crossover
//! an odd-order Butterworth lowpass/highpass pair, plus the allpass that equals their sum
//! (lp + hp of an odd-order Butterworth pair is allpass), used to give every band the same
//! phase so that the bands add back to an allpass when all band gains are equal.
//!
//! Analog prototypes are mapped with the bilinear transform prewarped at the crossover, so
//! the -3 dB points land exactly on the requested frequencies. Designed in f64, run in f32.

/// One second-order section, `H(z) = (b0 + b1 z⁻¹ + b2 z⁻²) / (1 + a1 z⁻¹ + a2 z⁻²)`.
/// First-order sections are biquads with `b2 = a2 = 0`: it costs two multiplies per line
/// and frame but lets one kernel run every section in lock-step with its neighbours.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Biquad {
    pub b0: f32,
    pub b1: f32,
    pub b2: f32,
    pub a1: f32,
    pub a2: f32,
}

impl Biquad {
    pub const IDENTITY: Biquad = Biquad {
        b0: 1.0,
        b1: 0.0,
        b2: 0.0,
        a1: 0.0,
        a2: 0.0,
    };

    /// Analog `(n1 s + n0) / (s + d0)` with the cutoff normalised to 1 rad/s, mapped so that
    /// 1 rad/s lands on `fc`.
    fn first_order(n1: f64, n0: f64, d0: f64, fc: f64, rate: f64) -> Biquad {
        let c = 1.0 / (std::f64::consts::PI * fc / rate).tan();
        let d = d0 + c;
        Biquad {
            b0: ((n0 + n1 * c) / d) as f32,
            b1: ((n0 - n1 * c) / d) as f32,
            b2: 0.0,
            a1: ((d0 - c) / d) as f32,
            a2: 0.0,
        }
    }

    /// Analog `(n2 s² + n1 s + n0) / (s² + d1 s + d0)`, mapped as `first_order`.
    fn second_order(n2: f64, n1: f64, n0: f64, d1: f64, d0: f64, fc: f64, rate: f64) -> Biquad {
        let c = 1.0 / (std::f64::consts::PI * fc / rate).tan();
        let c2 = c * c;
        let d = d0 + d1 * c + c2;
        Biquad {
            b0: ((n0 + n1 * c + n2 * c2) / d) as f32,
            b1: (2.0 * (n0 - n2 * c2) / d) as f32,
            b2: ((n0 - n1 * c + n2 * c2) / d) as f32,
            a1: (2.0 * (d0 - c2) / d) as f32,
            a2: ((d0 - d1 * c + c2) / d) as f32,
        }
    }

    /// Complex response at normalised angular frequency `w` (rad/sample), as (re, im).
    pub fn response(&self, w: f64) -> (f64, f64) {
        let z1 = (w.cos(), -w.sin()); // z^-1
        let z2 = ((2.0 * w).cos(), -(2.0 * w).sin());
        let num = (
            self.b0 as f64 + self.b1 as f64 * z1.0 + self.b2 as f64 * z2.0,
            self.b1 as f64 * z1.1 + self.b2 as f64 * z2.1,
        );
        let den = (
            1.0 + self.a1 as f64 * z1.0 + self.a2 as f64 * z2.0,
            self.a1 as f64 * z1.1 + self.a2 as f64 * z2.1,
        );
        cdiv(num, den)
    }
}

pub(crate) fn cmul(a: (f64, f64), b: (f64, f64)) -> (f64, f64) {
    (a.0 * b.0 - a.1 * b.1, a.0 * b.1 + a.1 * b.0)
}

fn cdiv(a: (f64, f64), b: (f64, f64)) -> (f64, f64) {
    let m = b.0 * b.0 + b.1 * b.1;
    ((a.0 * b.0 + a.1 * b.1) / m, (a.1 * b.0 - a.0 * b.1) / m)
}

/// Response of a cascade of sections.
pub fn cascade_response(secs: &[Biquad], w: f64) -> (f64, f64) {
    secs.iter()
        .fold((1.0, 0.0), |acc, s| cmul(acc, s.response(w)))
}

/// The filters of one crossover at `fc` for band-split order `order` (odd).
#[derive(Debug, Clone, PartialEq)]
pub struct Crossover {
    pub fc: f64,
    /// First-order section then (order-1)/2 biquads.
    pub lowpass: Vec<Biquad>,
    pub highpass: Vec<Biquad>,
    /// Equal to lowpass + highpass, with the pole-zero pairs that cancel removed.
    pub allpass: Vec<Biquad>,
}

impl Crossover {
    pub fn new(order: usize, fc: f64, rate: f64) -> Crossover {
        debug_assert!(order % 2 == 1);
        let mut lowpass = vec![Biquad::first_order(0.0, 1.0, 1.0, fc, rate)];
        let mut highpass = vec![Biquad::first_order(1.0, 0.0, 1.0, fc, rate)];
        // Butterworth pole pairs of an odd order: s² + 2 sin((2k-1)π/(2·order)) s + 1.
        for k in 1..=order / 2 {
            let d1 = 2.0 * ((2 * k - 1) as f64 * std::f64::consts::PI / (2 * order) as f64).sin();
            lowpass.push(Biquad::second_order(0.0, 0.0, 1.0, d1, 1.0, fc, rate));
            highpass.push(Biquad::second_order(1.0, 0.0, 0.0, d1, 1.0, fc, rate));
        }
        // (1 + s^order)/B(s): the zeros of 1 + s^order in the right half-plane, at
        // angles (2m+1)π/order < π/2, mirror poles of B and make allpass pairs; the rest
        // cancel poles of B (the real pole always cancels).
        let mut allpass = Vec::new();
        let mut m = 0;
        while 2 * (2 * m + 1) < order {
            let c = 2.0 * ((2 * m + 1) as f64 * std::f64::consts::PI / order as f64).cos();
            allpass.push(Biquad::second_order(1.0, -c, 1.0, c, 1.0, fc, rate));
            m += 1;
        }
        Crossover {
            fc,
            lowpass,
            highpass,
            allpass,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mag(c: (f64, f64)) -> f64 {
        (c.0 * c.0 + c.1 * c.1).sqrt()
    }

    #[test]
    fn butterworth_pairs_and_allpass_match_definition() {
        let rate = 48000.0;
        for order in [1usize, 3, 5, 7, 9] {
            let x = Crossover::new(order, 1000.0, rate);
            assert_eq!(x.lowpass.len(), 1 + order / 2);
            let w_c = 2.0 * std::f64::consts::PI * 1000.0 / rate;
            // -3 dB at the crossover for both halves.
            let lp = mag(cascade_response(&x.lowpass, w_c));
            let hp = mag(cascade_response(&x.highpass, w_c));
            assert!((lp - 0.5f64.sqrt()).abs() < 1e-4, "order {order} lp {lp}");
            assert!((hp - 0.5f64.sqrt()).abs() < 1e-4, "order {order} hp {hp}");
            for f in [20.0, 300.0, 999.0, 1000.0, 2500.0, 15000.0] {
                let w = 2.0 * std::f64::consts::PI * f / rate;
                let l = cascade_response(&x.lowpass, w);
                let h = cascade_response(&x.highpass, w);
                let a = cascade_response(&x.allpass, w);
                assert!((mag(a) - 1.0).abs() < 1e-4, "order {order} |ap|={}", mag(a));
                let sum = (l.0 + h.0, l.1 + h.1);
                assert!(
                    (sum.0 - a.0).abs() < 1e-4 && (sum.1 - a.1).abs() < 1e-4,
                    "order {order} f {f}: lp+hp {sum:?} != ap {a:?}"
                );
            }
        }
    }
}
