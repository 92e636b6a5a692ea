//! `sine` and `poly`: frequencies, partials and note on/off behaviour.

use realfft::RealFftPlanner;
use xrunlab::dsp::{registry, Plugin, PluginContext};

const RATE: u32 = 48000;

fn make(name: &str, params: &str) -> Box<dyn Plugin> {
    let ctx = PluginContext {
        rate: RATE,
        max_frames: 256,
    };
    registry::create(name, params, &ctx).unwrap()
}

/// `frames` of output from silence, in blocks of 256.
fn render(p: &mut dyn Plugin, frames: usize) -> (Vec<f32>, Vec<f32>) {
    let (mut left, mut right) = (Vec::new(), Vec::new());
    while left.len() < frames {
        let n = 256.min(frames - left.len());
        let (mut l, mut r) = (vec![0.0f32; n], vec![0.0f32; n]);
        p.process(&mut l, &mut r);
        left.extend(l);
        right.extend(r);
    }
    (left, right)
}

/// Amplitude spectrum of exactly one second (1 Hz bins), Hann-windowed and scaled so a
/// sine of amplitude A shows A at its bin.
fn spectrum(x: &[f32]) -> Vec<f64> {
    let n = x.len();
    let mut planner = RealFftPlanner::<f64>::new();
    let fft = planner.plan_fft_forward(n);
    let mut buf: Vec<f64> = x
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let w = 0.5 - 0.5 * (2.0 * std::f64::consts::PI * i as f64 / n as f64).cos();
            v as f64 * w
        })
        .collect();
    let mut out = fft.make_output_vec();
    fft.process(&mut buf, &mut out).unwrap();
    out.iter().map(|c| c.norm() * 4.0 / n as f64).collect()
}

/// Frequency from the phase advance over a second: exact to far below a bin.
fn zero_crossing_freq(x: &[f32]) -> f64 {
    let ups: Vec<f64> = x
        .windows(2)
        .enumerate()
        .filter(|(_, w)| w[0] < 0.0 && w[1] >= 0.0)
        .map(|(i, w)| i as f64 + (-w[0] / (w[1] - w[0])) as f64)
        .collect();
    (ups.len() - 1) as f64 / (ups[ups.len() - 1] - ups[0]) * RATE as f64
}

#[test]
fn sine_has_the_set_frequency_and_amplitude() {
    for f in [100.0f64, 440.0, 1000.0, 12345.0] {
        let mut p = make("sine", &format!("freq={f},amp=0.5"));
        let (l, r) = render(p.as_mut(), RATE as usize);
        assert_eq!(l, r, "mono tone on both channels");
        let s = spectrum(&l);
        let peak = s
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map(|(k, _)| k)
            .unwrap();
        assert_eq!(peak as f64, f.round(), "FFT peak");
        assert!((s[peak] - 0.5).abs() < 0.01, "amplitude {}", s[peak]);
        let fz = zero_crossing_freq(&l);
        // Linear interpolation of the crossings is biased by ~1e-6 at 4 samples per period.
        assert!(
            (fz - f).abs() < (f * 1e-5).max(0.01),
            "{f} Hz measured {fz}"
        );
        // Purity: everything away from the tone is > 80 dB down.
        let spur = s
            .iter()
            .enumerate()
            .filter(|(k, _)| (*k as f64 - f).abs() > 3.0)
            .map(|(_, &v)| v)
            .fold(0.0, f64::max);
        assert!(spur < 0.5e-4, "spurious component {spur}");
    }
}

#[test]
fn poly_has_three_harmonic_partials() {
    let f = 220.0;
    let mut p = make("poly", "220");
    let (l, _) = render(p.as_mut(), RATE as usize);
    let s = spectrum(&l);
    let a1 = s[220];
    assert!(a1 > 0.1, "fundamental missing");
    for (k, want) in [(2usize, 0.5), (3, 1.0 / 3.0)] {
        let ak = s[(f as usize) * k];
        assert!(
            (ak / a1 - want).abs() < 0.01,
            "partial {k}: {ak} vs fundamental {a1}"
        );
    }
    let peak_sum = a1 + s[440] + s[660];
    assert!(
        (peak_sum - 0.5).abs() < 0.01,
        "default amp 0.5, got {peak_sum}"
    );
    let others = s
        .iter()
        .enumerate()
        .filter(|(k, _)| {
            [220.0, 440.0, 660.0]
                .iter()
                .all(|&h| (*k as f64 - h).abs() > 3.0)
        })
        .map(|(_, &v)| v)
        .fold(0.0, f64::max);
    assert!(others < 1e-4, "unexpected component {others}");
}

#[test]
fn note_on_restarts_and_note_off_silences() {
    let mut p = make("sine", "1000,gate=0");
    let (l, _) = render(p.as_mut(), 512);
    assert!(l.iter().all(|&v| v == 0.0), "gate=0 starts silent");
    p.note_on();
    let (a, _) = render(p.as_mut(), 64);
    assert_eq!(a[0], 0.0);
    let want = 0.5 * (2.0 * std::f64::consts::PI * 1000.0 / RATE as f64).sin();
    assert!((a[1] as f64 - want).abs() < 1e-5, "starts at phase 0");
    p.note_off();
    let (b, _) = render(p.as_mut(), 256);
    assert!(b.iter().all(|&v| v == 0.0));
    p.note_on();
    let (c, _) = render(p.as_mut(), 64);
    assert_eq!(a, c, "every note starts identically");
    // The tone adds to what passes through.
    let mut q = make("sine", "1000");
    let (mut l, mut r) = (vec![0.25f32; 4], vec![0.25f32; 4]);
    q.process(&mut l, &mut r);
    assert_eq!(l[0], 0.25);
    assert!((l[1] - 0.25 - want as f32).abs() < 1e-5);
}

#[test]
fn bad_tone_params_are_usage_errors() {
    let ctx = PluginContext {
        rate: RATE,
        max_frames: 64,
    };
    for (n, p) in [
        ("sine", "x"),
        ("sine", "30000"),
        ("sine", "amp=2"),
        ("sine", "gate=maybe"),
        ("poly", "9000"),
        ("poly", "freq=-1"),
        ("poly", "440,wave=square"),
    ] {
        let e = registry::create(n, p, &ctx).err();
        assert!(matches!(e, Some(xrunlab::Error::Usage(_))), "{n}({p})");
    }
}
