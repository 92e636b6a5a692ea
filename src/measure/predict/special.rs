//! Exact Poisson intervals (Garwood): the quantiles of the gamma distribution.

/// Lower end of the two-sided interval for a mean, having seen k events.
pub fn poisson_low(k: f64, alpha: f64) -> f64 {
    if k <= 0.0 {
        0.0
    } else {
        gamma_quantile(k, alpha / 2.0)
    }
}

/// Upper end of the two-sided interval for a mean, having seen k events.
pub fn poisson_high(k: f64, alpha: f64) -> f64 {
    gamma_quantile(k.max(0.0) + 1.0, 1.0 - alpha / 2.0)
}

fn ln_gamma(x: f64) -> f64 {
    // Lanczos, g = 7, n = 9: 15 significant digits for x > 0.
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + 7.5;
    for (k, c) in C.iter().enumerate().skip(1) {
        a += c / (x + k as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The regularised lower incomplete gamma function P(a, x).
fn gamma_p(a: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    let front = (a * x.ln() - x - ln_gamma(a)).exp();
    if x < a + 1.0 {
        let (mut sum, mut term, mut ap) = (1.0 / a, 1.0 / a, a);
        for _ in 0..10_000 {
            ap += 1.0;
            term *= x / ap;
            sum += term;
            if term.abs() < sum.abs() * 1e-16 {
                break;
            }
        }
        (sum * front).min(1.0)
    } else {
        // Continued fraction for Q(a, x) (modified Lentz).
        let tiny = 1e-300;
        let mut b = x + 1.0 - a;
        let mut c = 1.0 / tiny;
        let mut d = 1.0 / b;
        let mut h = d;
        for i in 1..10_000 {
            let an = -(i as f64) * (i as f64 - a);
            b += 2.0;
            d = an * d + b;
            if d.abs() < tiny {
                d = tiny;
            }
            c = b + an / c;
            if c.abs() < tiny {
                c = tiny;
            }
            d = 1.0 / d;
            let delta = d * c;
            h *= delta;
            if (delta - 1.0).abs() < 1e-16 {
                break;
            }
        }
        (1.0 - front * h).max(0.0)
    }
}

/// Answers of [`gamma_quantile`] kept at most, per thread.
const QUANTILES_KEPT: usize = 1 << 16;

thread_local! {
    /// [`gamma_quantile`]'s answers by the bits of (a, q). A verdict over a suite asks for
    /// the same few (no event beyond the budget, whole counts) in most of its rows, each
    /// bisection taking thousands of incomplete gamma functions.
    static QUANTILES: std::cell::RefCell<std::collections::HashMap<(u64, u64), f64>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

/// x with P(a, x) = q.
fn gamma_quantile(a: f64, q: f64) -> f64 {
    let key = (a.to_bits(), q.to_bits());
    if let Some(x) = QUANTILES.with(|m| m.borrow().get(&key).copied()) {
        return x;
    }
    let x = gamma_quantile_bisected(a, q);
    QUANTILES.with(|m| {
        let mut m = m.borrow_mut();
        if m.len() >= QUANTILES_KEPT {
            m.clear();
        }
        m.insert(key, x);
    });
    x
}

fn gamma_quantile_bisected(a: f64, q: f64) -> f64 {
    let mut hi = a.max(1.0);
    while gamma_p(a, hi) < q && hi < f64::MAX / 4.0 {
        hi *= 2.0;
    }
    let mut lo = 0.0;
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if gamma_p(a, mid) < q {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo <= hi * 1e-13 {
            break;
        }
    }
    0.5 * (lo + hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garwood_intervals_match_the_tables() {
        // Garwood (1936) / the usual tables of exact 95 % Poisson limits.
        for (k, lo, hi) in [
            (0.0, 0.0, 3.689),
            (1.0, 0.0253, 5.572),
            (3.0, 0.619, 8.767),
            (10.0, 4.795, 18.39),
            (100.0, 81.36, 121.63),
        ] {
            let (l, h) = (poisson_low(k, 0.05), poisson_high(k, 0.05));
            assert!(
                (l - lo).abs() <= lo * 1e-3 + 1e-4,
                "k={k}: low {l}, want {lo}"
            );
            assert!((h - hi).abs() <= hi * 1e-3, "k={k}: high {h}, want {hi}");
        }
        // Fractional counts are between their neighbours.
        let h = poisson_high(2.5, 0.05);
        assert!(poisson_high(2.0, 0.05) < h && h < poisson_high(3.0, 0.05));
    }
}
