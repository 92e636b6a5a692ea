//! Reverb behaviour: stability under long noise, per-band decay times measured from the
//! impulse response, and block-size independence.

mod common;
use realfft::RealFftPlanner;
use xrunlab::dsp::{registry, Plugin, PluginContext};

const RATE: u32 = 48000;

fn ctx(max_frames: usize) -> PluginContext {
    PluginContext {
        rate: RATE,
        max_frames,
    }
}

fn reverb(name: &str, params: &str, max_frames: usize) -> Box<dyn Plugin> {
    registry::create(name, params, &ctx(max_frames)).unwrap()
}

struct Noise(u32);

impl Noise {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 17;
        self.0 ^= self.0 << 5;
        self.0 as f32 / u32::MAX as f32 - 0.5
    }
}

fn rms(x: &[f32]) -> f64 {
    (x.iter().map(|&v| v as f64 * v as f64).sum::<f64>() / x.len() as f64).sqrt()
}

/// Feed `seconds` of white noise; return the left output.
fn run_noise(p: &mut dyn Plugin, seconds: usize) -> Vec<f32> {
    let block = 256;
    let mut noise = Noise(0x1234_5678);
    let mut out = Vec::with_capacity(seconds * RATE as usize);
    let (mut l, mut r) = (vec![0.0f32; block], vec![0.0f32; block]);
    for _ in 0..seconds * RATE as usize / block {
        for (a, b) in l.iter_mut().zip(r.iter_mut()) {
            *a = noise.next();
            *b = noise.next();
        }
        p.process(&mut l, &mut r);
        assert!(
            l.iter().chain(r.iter()).all(|v| v.is_finite()),
            "non-finite output"
        );
        out.extend_from_slice(&l);
    }
    out
}

fn assert_stationary(out: &[f32], what: &str) {
    let sec = RATE as usize;
    let peak = out.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    assert!(
        peak < 20.0,
        "{what}: output peak {peak} for input within ±0.5"
    );
    let n = out.len() / sec;
    let early = rms(&out[(n / 3) * sec..(n / 3 + 5) * sec]);
    let late = rms(&out[(n - 5) * sec..]);
    assert!(
        early > 0.01 && (late / early) < 1.5 && (late / early) > 0.67,
        "{what}: level drifts from {early} to {late}"
    );
}

#[test]
fn bounded_over_60_s_of_white_noise() {
    let mut p = reverb("reverb-heavy", "", 256);
    let out = run_noise(p.as_mut(), 60);
    assert_stationary(&out, "reverb-heavy");
}

#[test]
fn bounded_with_very_long_decay() {
    // Loop gains within 1e-4 of unity in every band: the slowest stable setting.
    let mut p = reverb("reverb-light", "t60=100/100/100/100/100", 256);
    let out = run_noise(p.as_mut(), 30);
    let peak = out.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    assert!(peak < 20.0, "peak {peak}");
}

/// Impulse response (left + right outputs for an impulse into both inputs).
fn impulse_response(p: &mut dyn Plugin, frames: usize, block: usize) -> Vec<f32> {
    let mut h = Vec::with_capacity(frames);
    let (mut l, mut r) = (vec![0.0f32; block], vec![0.0f32; block]);
    let mut first = true;
    while h.len() < frames {
        l.fill(0.0);
        r.fill(0.0);
        if first {
            l[0] = 1.0;
            r[0] = 1.0;
            first = false;
        }
        p.process(&mut l, &mut r);
        h.extend(l.iter().zip(r.iter()).map(|(a, b)| a + b));
    }
    h.truncate(frames);
    h
}

/// T60 of the band [lo, hi] Hz: band-limit via FFT, Schroeder backward integration, and a
/// least-squares line through the -5..-25 dB part of the decay curve, extrapolated to -60 dB.
fn band_t60(h: &[f32], lo: f64, hi: f64) -> f64 {
    let len = h.len().next_power_of_two();
    let mut planner = RealFftPlanner::<f64>::new();
    let fwd = planner.plan_fft_forward(len);
    let inv = planner.plan_fft_inverse(len);
    let mut x: Vec<f64> = h.iter().map(|&v| v as f64).collect();
    x.resize(len, 0.0);
    let mut spec = fwd.make_output_vec();
    fwd.process(&mut x, &mut spec).unwrap();
    let bin_hz = RATE as f64 / len as f64;
    for (k, c) in spec.iter_mut().enumerate() {
        let f = k as f64 * bin_hz;
        if f < lo || f > hi {
            *c = realfft::num_complex::Complex::new(0.0, 0.0);
        }
    }
    let mut band = inv.make_output_vec();
    inv.process(&mut spec, &mut band).unwrap();
    let e: Vec<f64> = band[..h.len()].iter().map(|v| v * v).collect();
    let mut sch = vec![0.0; e.len()];
    let mut acc = 0.0;
    for i in (0..e.len()).rev() {
        acc += e[i];
        sch[i] = acc;
    }
    let total = sch[0];
    let (mut n, mut sx, mut sy, mut sxx, mut sxy) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for (i, &s) in sch.iter().enumerate() {
        let db = 10.0 * (s / total).log10();
        if (-25.0..=-5.0).contains(&db) {
            let t = i as f64 / RATE as f64;
            n += 1.0;
            sx += t;
            sy += db;
            sxx += t * t;
            sxy += t * db;
        }
    }
    assert!(n > 100.0, "band {lo}-{hi} Hz: decay never reached -25 dB");
    let slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
    -60.0 / slope
}

/// Analysis bands well inside each reverb band (crossovers at 500/1000/2000/4000 Hz).
const BANDS: [(f64, f64); 5] = [
    (100.0, 300.0),
    (620.0, 800.0),
    (1250.0, 1600.0),
    (2500.0, 3200.0),
    (6000.0, 12000.0),
];

/// The measured T60 of each analysis band of `name(params)`'s impulse response.
fn measure_t60(name: &str, params: &str, longest: f64) -> [f64; 5] {
    let mut p = reverb(name, params, 256);
    let frames = (longest * 1.2 * RATE as f64) as usize;
    let h = impulse_response(p.as_mut(), frames, 256);
    BANDS.map(|(lo, hi)| band_t60(&h, lo, hi))
}

fn check_t60(name: &str, params: &str, want: [f64; 5]) {
    let got = measure_t60(name, params, want.iter().cloned().fold(0.0, f64::max));
    let mut report = String::new();
    let mut ok = true;
    for (b, &(lo, hi)) in BANDS.iter().enumerate() {
        let t = got[b];
        let err = t / want[b] - 1.0;
        report.push_str(&format!(
            "band {b} ({lo}-{hi} Hz): T60 {t:.2} s, set {:.2} s ({:+.1} %)\n",
            want[b],
            err * 100.0
        ));
        ok &= err.abs() <= 0.15;
    }
    eprint!("{name}({params}):\n{report}");
    assert!(
        ok,
        "{name}({params}): a band's T60 is off by more than 15 %:\n{report}"
    );
}

// Settings a room can have: decay times within about 1.5x of the neighbouring band's and
// long against the loop delays (0.03-0.6 s). A band much shorter than its neighbours is
// dominated by their leakage through the crossovers after a few dB, in Faust's filterbank
// as here, so its T60 is not measurable to 15 %.

#[test]
fn per_band_t60_matches_defaults_heavy() {
    check_t60("reverb-heavy", "", [8.4, 6.5, 5.0, 3.8, 2.7]);
}

#[test]
fn per_band_t60_matches_defaults_light() {
    check_t60("reverb-light", "", [8.4, 6.5, 5.0, 3.8, 2.7]);
}

#[test]
fn per_band_t60_matches_custom_heavy() {
    check_t60(
        "reverb-heavy",
        "t60=3/4/3.2/2.4/1.8",
        [3.0, 4.0, 3.2, 2.4, 1.8],
    );
}

#[test]
fn per_band_t60_matches_order_5() {
    check_t60(
        "reverb",
        "N=8,BSO=5,t60=5/4/3/2.5/2",
        [5.0, 4.0, 3.0, 2.5, 2.0],
    );
}

#[test]
fn block_size_does_not_change_the_output() {
    for (name, params) in [
        ("reverb-heavy", ""),
        ("reverb", "N=2,NB=3,BSO=1"),
        ("reverb-light", "simd=base"),
        ("reverb-heavy", "simd=avx512"),
    ] {
        if registry::create(name, params, &ctx(64)).is_err() {
            eprintln!("SKIPPED {name}({params}): not supported on this CPU");
            continue;
        }
        let max = 512;
        let total = 30_000;
        let mut input = Noise(99);
        let src: Vec<(f32, f32)> = (0..total).map(|_| (input.next(), input.next())).collect();
        let run = |sizes: &mut dyn FnMut() -> usize| {
            let mut p = reverb(name, params, max);
            let mut out = Vec::with_capacity(total);
            let mut done = 0;
            while done < total {
                let n = sizes().min(total - done);
                let mut l: Vec<f32> = src[done..done + n].iter().map(|s| s.0).collect();
                let mut r: Vec<f32> = src[done..done + n].iter().map(|s| s.1).collect();
                p.process(&mut l, &mut r);
                out.extend(l.into_iter().zip(r));
                done += n;
            }
            out
        };
        let reference = run(&mut || max);
        let mut seed = 7u32;
        let varied = run(&mut || {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            // 0..=max, empty blocks included.
            (seed >> 8) as usize % (max + 1)
        });
        assert_eq!(reference.len(), varied.len());
        let first_diff = reference.iter().zip(&varied).position(|(a, b)| a != b);
        assert_eq!(
            first_diff, None,
            "{name}({params}): output depends on block size"
        );
        assert!(
            reference.iter().any(|s| s.0 != 0.0),
            "{name}: silent output"
        );
    }
}

/// Faust's own reverbDesigner (the Raspberry Pi 4 study's workload, built as LV2 by
/// scripts/build-reverb-designer) against the built-in equivalent, per band, at the defaults.
/// Measured here (2026-11): Faust's decays are ~0.73x the slider values in every band
/// (heavy 6.16/4.61/3.48/2.74/2.12 s for 8.4/6.5/5/3.8/2.7) while the built-in is within
/// 10 % of them; the *shape* across bands is the same, which is what this asserts: each
/// band's T60 relative to the lowest band's matches the built-in's within 15 %, and the
/// overall scale is printed. Its output stage defaults to -40 dB; 0 dB here.
fn compare_with_faust(variant: &str) {
    let uri = format!("urn:xrunlab:reverbDesigner-{variant}");
    let found = xrunlab::dsp::lv2::describe(&uri).is_ok();
    if !common::require(
        found,
        &format!("LV2 plugin {uri} (scripts/build-reverb-designer)"),
    ) {
        return;
    }
    let faust = measure_t60(&format!("lv2:{uri}"), "Output_Level__dB__17=0", 8.4);
    let ours = measure_t60(&format!("reverb-{variant}"), "", 8.4);
    let mut report = String::new();
    let mut ok = true;
    for b in 0..5 {
        let shape = (faust[b] / faust[0]) / (ours[b] / ours[0]) - 1.0;
        report.push_str(&format!(
            "band {b}: Faust {:.2} s, built-in {:.2} s, ratio {:.2}, shape {:+.1} %\n",
            faust[b],
            ours[b],
            faust[b] / ours[b],
            shape * 100.0
        ));
        ok &= shape.abs() <= 0.15 && faust[b] > 0.5;
    }
    eprint!("reverbDesigner-{variant} vs reverb-{variant}:\n{report}");
    assert!(ok, "the per-band decay shapes differ:\n{report}");
}

#[test]
fn per_band_decay_of_fausts_reverbdesigner_heavy_has_the_builtin_shape() {
    compare_with_faust("heavy");
}

#[test]
fn per_band_decay_of_fausts_reverbdesigner_light_has_the_builtin_shape() {
    compare_with_faust("light");
}
