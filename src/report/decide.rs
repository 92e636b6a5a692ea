//! Each verdict row's outcome from its prediction and the engine's own runs at that size
//! (docs/methods.md "Verdict", "Calibration"): a run under the judged condition decides
//! what it can (its 95 % interval above the target fails the size, within it meets it);
//! where the runs are too short to tell, the prediction decides, scaled by the ratio of
//! measured to predicted the nearest size with both showed, and never against a run.

use crate::measure::predict::{Outlook, Rate};
use crate::results::verdict::{
    Basis, Calibration, Checked, Condition, MeasuredRun, Predicted, VerdictRow, Windows,
};

/// What a verdict judges against: the condition, the period count and the target.
#[derive(Debug, Clone, Copy)]
pub struct Judge {
    pub on: Option<Condition>,
    pub periods: u32,
    pub target_per_hour: f64,
}

/// The prediction a row is judged on.
pub fn judged(r: &VerdictRow, on: Condition) -> Option<&Predicted> {
    match on {
        Condition::Stressed => r.stressed.as_ref(),
        Condition::Idle => r.idle.as_ref(),
    }
}

/// A run counts for the judged condition: stressed runs for a stressed verdict, idle runs
/// for an idle one, at the verdict's period count.
pub fn counts(m: &MeasuredRun, on: Condition, periods: u32) -> bool {
    m.stress.is_empty() != (on == Condition::Stressed) && m.periods == periods
}

/// The runs that count at this size as one longer run: slices of one check alternate with
/// latency stretches, and together they are the run that was meant.
fn pooled(r: &VerdictRow, on: Condition, periods: u32) -> Option<Checked> {
    let runs: Vec<&MeasuredRun> = r
        .measured
        .iter()
        .filter(|m| counts(m, on, periods))
        .collect();
    if runs.is_empty() {
        return None;
    }
    let xruns = runs.iter().map(|m| m.xruns).fold(0, u64::saturating_add);
    let hours: f64 = runs.iter().map(|m| m.hours).sum();
    let phi = dispersion(runs.iter().map(|m| m.windows));
    Some(Checked {
        xruns,
        hours,
        per_hour: dispersed_rate(xruns, hours, phi.unwrap_or(1.0)),
        dispersion: phi,
    })
}

/// The length of the windows a run's xruns are counted in for their dispersion: long
/// enough to hold a burst (a host stall's late cycles come within a second), short enough
/// that a one-minute slice gives six.
pub const WINDOW_S: f64 = 10.0;

/// A run's xruns (their times since its start, ns) counted in whole [`WINDOW_S`] windows of
/// its `span_ns`; none when no window fits or the times kept are not all of its xruns
/// (`kept` false: the engine keeps the first 1000). The suite's slices are short: their
/// windows are pooled, and [`dispersion`] wants 4 in all.
pub fn windows_of(at_ns: impl Iterator<Item = u64>, span_ns: u64, kept: bool) -> Option<Windows> {
    let w = (WINDOW_S * 1e9) as u64;
    let count = span_ns / w;
    if count == 0 || !kept {
        return None;
    }
    // Only the windows that saw an xrun are counted (at most the 1000 kept): a file's span
    // sizes nothing here.
    let mut per = std::collections::BTreeMap::<u64, u64>::new();
    for i in at_ns.map(|t| t / w).filter(|&i| i < count) {
        *per.entry(i).or_default() += 1;
    }
    Some(Windows {
        seconds: WINDOW_S,
        count,
        sum: per.values().sum(),
        sum_sq: per.values().map(|c| c.saturating_mul(*c)).sum(),
    })
}

/// The dispersion of xrun counts pooled over runs' windows: Pearson's statistic over its
/// degrees of freedom, Σ(c − m)² / m / (n − 1) with m the mean count of all n windows, and
/// at least 1 (a count cannot be surer than Poisson's). 1 is what independent glitches
/// give; a host that stalls in bursts gives more, and a rate measured from it deserves a
/// wider interval than Garwood's (docs/methods.md "Verdict"). None without windows that
/// saw a glitch, or with fewer than 4 windows in all.
pub fn dispersion(runs: impl Iterator<Item = Option<Windows>>) -> Option<f64> {
    let (mut n, mut sum, mut sum_sq) = (0u64, 0u64, 0u64);
    for w in runs.flatten() {
        // Saturating: a verdict file read back is not trusted to hold consistent counts.
        n = n.saturating_add(w.count);
        sum = sum.saturating_add(w.sum);
        sum_sq = sum_sq.saturating_add(w.sum_sq);
    }
    if n < 4 || sum == 0 {
        return None;
    }
    let m = sum as f64 / n as f64;
    let ss = sum_sq as f64 - 2.0 * m * sum as f64 + m * m * n as f64;
    Some((ss / m / (n - 1) as f64).max(1.0))
}

/// [`measured_rate`] for a count `phi` times as dispersed as Poisson's: the interval of a
/// quasi-Poisson count, Garwood's on k/φ events scaled back by φ (equal to Garwood's at
/// φ = 1). The point estimate stays k/hours.
pub fn dispersed_rate(k: u64, hours: f64, phi: f64) -> Rate {
    let plain = measured_rate(k, hours);
    if phi <= 1.0 || k == 0 {
        return plain;
    }
    let alpha = 1.0 - crate::measure::predict::CONFIDENCE;
    let h = hours.max(f64::MIN_POSITIVE);
    let eff = k as f64 / phi;
    Rate {
        low: crate::measure::predict::poisson_low(eff, alpha) * phi / h,
        high: crate::measure::predict::poisson_high(eff, alpha) * phi / h,
        ..plain
    }
}

/// The predicted rate a ratio divides by: the point estimate, or the bound where the
/// latency saw too few samples for one (the ratio is then at least what it says).
fn point(p: &Rate) -> f64 {
    if p.upper_bound {
        p.high
    } else {
        p.per_hour
    }
}

/// Measured over predicted at a size with both, when the run saw a glitch to measure and
/// the prediction a rate to divide by.
fn own_ratio(c: &Checked, p: &Predicted) -> Option<Rate> {
    let den = point(&p.episodes_per_hour);
    (c.xruns > 0 && den > 0.0 && !p.overload).then(|| Rate {
        per_hour: c.per_hour.per_hour / den,
        low: c.per_hour.low / den,
        high: c.per_hour.high / den,
        upper_bound: c.per_hour.upper_bound,
    })
}

/// A prediction times a ratio, its interval widened by both.
fn scaled(p: &Rate, r: &Rate) -> Rate {
    Rate {
        per_hour: point(p) * r.per_hour,
        low: p.low * r.low,
        high: p.high * r.high,
        upper_bound: p.upper_bound || r.upper_bound,
    }
}

/// Within the target (true), above it (false), or not told apart (None).
fn against(r: &Rate, target: f64) -> Option<bool> {
    if r.low > target {
        Some(false)
    } else if r.high <= target {
        Some(true)
    } else {
        None
    }
}

/// A run too short to decide can still rule the prediction out: their 95 % intervals do
/// not meet (a prediction of 93–891 glitches/h against a clean 3-minute run, < 74/h). The
/// size is then undecided, never decided on a figure the engine contradicted.
pub fn refuted(r: &VerdictRow, on: Condition) -> Option<Rate> {
    let (c, p) = (r.checked.as_ref()?, judged(r, on)?);
    if p.overload {
        return None;
    }
    let k = r
        .calibration
        .as_ref()
        .and_then(|c| c.calibrated)
        .unwrap_or(p.episodes_per_hour);
    (c.per_hour.high < k.low || c.per_hour.low > k.high).then_some(k)
}

/// Fill in each row's pooled check, calibration, outcome and what it rests on.
pub fn decide(rows: &mut [VerdictRow], j: Judge) {
    let Some(on) = j.on else {
        for r in rows.iter_mut() {
            r.meets_target = None;
            r.basis = None;
        }
        return;
    };
    for r in rows.iter_mut() {
        r.checked = pooled(r, on, j.periods);
        r.calibration = match (&r.checked, judged(r, on)) {
            (Some(c), Some(p)) => own_ratio(c, p).map(|ratio| Calibration {
                from_frames: r.buffer_frames,
                ratio,
                calibrated: None,
            }),
            _ => None,
        };
    }
    // Carried only where the model read low (ratio above 1): a run that saw fewer glitches
    // than predicted at one size is no evidence that another size holds.
    let own: Vec<(u32, Rate)> = rows
        .iter()
        .filter_map(|r| r.calibration.as_ref().map(|c| (r.buffer_frames, c.ratio)))
        .filter(|(_, r)| r.per_hour > 1.0)
        .collect();
    for r in rows.iter_mut().filter(|r| r.calibration.is_none()) {
        let distance = |f: u32| (f64::from(f) / f64::from(r.buffer_frames)).log2().abs();
        let nearest = own
            .iter()
            .min_by(|a, b| distance(a.0).total_cmp(&distance(b.0)));
        if let (Some((from, ratio)), Some(p)) = (nearest, judged(r, on)) {
            if !p.overload {
                r.calibration = Some(Calibration {
                    from_frames: *from,
                    ratio: *ratio,
                    calibrated: Some(scaled(&p.episodes_per_hour, ratio)),
                });
            }
        }
    }
    for r in rows.iter_mut() {
        let measured = r
            .checked
            .as_ref()
            .and_then(|c| against(&c.per_hour, j.target_per_hour));
        if measured.is_some() {
            r.meets_target = measured;
            r.basis = Some(Basis::Measured);
            continue;
        }
        let predicted = judged(r, on).and_then(|p| match p.outlook {
            _ if p.overload => Some(false),
            Outlook::Ok => Some(true),
            Outlook::Fails => Some(false),
            Outlook::Marginal => None,
        });
        let calibrated = r
            .calibration
            .as_ref()
            .and_then(|c| c.calibrated.as_ref())
            .map(|c| against(c, j.target_per_hour));
        r.meets_target = match (predicted, calibrated) {
            _ if refuted(r, on).is_some() => None,
            (Some(false), _) | (_, Some(Some(false))) => Some(false),
            (Some(true), None | Some(Some(true))) => Some(true),
            _ => None,
        };
        r.basis = judged(r, on).map(|_| match r.checked {
            Some(_) => Basis::Both,
            None => Basis::Predicted,
        });
    }
}

/// A count seen over `hours` as a rate with its exact 95 % interval.
pub fn measured_rate(k: u64, hours: f64) -> Rate {
    let alpha = 1.0 - crate::measure::predict::CONFIDENCE;
    let k = k as f64;
    let h = hours.max(f64::MIN_POSITIVE);
    Rate {
        per_hour: k / h,
        low: crate::measure::predict::poisson_low(k, alpha) / h,
        high: crate::measure::predict::poisson_high(k, alpha) / h,
        // A count is exact however small: 2 xruns in a minute is a rate (with a wide
        // interval), not a bound; only a run that saw none bounds it.
        upper_bound: k == 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::verdict::test_row;

    fn run(frames_hours: f64, xruns: u64) -> MeasuredRun {
        MeasuredRun {
            file: "run.json".into(),
            stress: vec!["paper".into()],
            periods: 2,
            hours: frames_hours,
            xruns,
            per_hour: super::measured_rate(xruns, frames_hours),
            dsp_load_mean_pct: 50.0,
            windows: None,
        }
    }

    const J: Judge = Judge {
        on: Some(Condition::Stressed),
        periods: 2,
        target_per_hour: 1.0,
    };

    #[test]
    fn a_prediction_five_times_too_low_is_failed_by_the_run() {
        // Predicted 0.4/h [0.1, 0.9] (meets); the engine saw 2/h × 5 over 2 h: 20 glitches.
        let mut rows = [test_row(1024, 0.1, 0.9)];
        rows[0]
            .stressed
            .as_mut()
            .unwrap()
            .episodes_per_hour
            .per_hour = 0.4;
        rows[0].measured = vec![run(1.0, 9), run(1.0, 11)];
        decide(&mut rows, J);
        let r = &rows[0];
        assert_eq!(r.meets_target, Some(false));
        assert_eq!(r.basis, Some(Basis::Measured));
        let c = r.checked.as_ref().unwrap();
        assert_eq!((c.xruns, c.hours), (20, 2.0));
        let ratio = r.calibration.as_ref().unwrap().ratio;
        assert!((ratio.per_hour - 25.0).abs() < 1e-9, "{ratio:?}");
        assert!(ratio.low > 1.0 && ratio.high > ratio.per_hour);
    }

    #[test]
    fn a_clean_short_run_leaves_the_prediction_to_decide() {
        let mut rows = [test_row(1024, 0.0, 0.5)];
        rows[0].measured = vec![run(0.05, 0)];
        decide(&mut rows, J);
        assert_eq!(rows[0].meets_target, Some(true));
        assert_eq!(rows[0].basis, Some(Basis::Both));
        assert!(rows[0].calibration.is_none());
        // An idle run says nothing of a stressed verdict.
        let mut idle = run(0.05, 40);
        idle.stress.clear();
        let mut rows = [test_row(1024, 0.0, 0.5)];
        rows[0].measured = vec![idle];
        decide(&mut rows, J);
        assert_eq!(rows[0].meets_target, Some(true));
        assert_eq!(rows[0].basis, Some(Basis::Predicted));
    }

    #[test]
    fn the_ratio_is_carried_to_the_nearest_size_without_a_run() {
        // 512 predicted 0.7/h, measured 30/h over 20 min: ratio about 43. 1024 predicted
        // 0.3 [0.1, 0.8] (meets on its own) is then about 13/h: it fails, calibrated.
        let mut rows = [
            test_row(256, 1.5, 4.0),
            test_row(512, 0.3, 1.6),
            test_row(1024, 0.1, 0.8),
            test_row(2048, 0.0, 0.01),
        ];
        rows[1]
            .stressed
            .as_mut()
            .unwrap()
            .episodes_per_hour
            .per_hour = 0.7;
        rows[2]
            .stressed
            .as_mut()
            .unwrap()
            .episodes_per_hour
            .per_hour = 0.3;
        rows[1].measured = vec![run(1.0 / 3.0, 10)];
        decide(&mut rows, J);
        assert_eq!(rows[1].meets_target, Some(false));
        let c = rows[2].calibration.as_ref().unwrap();
        assert_eq!(c.from_frames, 512);
        let cal = c.calibrated.unwrap();
        assert!((cal.per_hour - 0.3 * 30.0 / 0.7).abs() < 1e-9, "{cal:?}");
        assert_eq!(rows[2].meets_target, Some(false));
        assert_eq!(rows[2].basis, Some(Basis::Predicted));
        // Far enough below the target, the calibrated prediction still meets it.
        assert_eq!(rows[3].calibration.as_ref().unwrap().from_frames, 512);
        assert!(
            rows[3]
                .calibration
                .as_ref()
                .unwrap()
                .calibrated
                .unwrap()
                .high
                <= 1.0
        );
        assert_eq!(rows[3].meets_target, Some(true));
        // A model that read high is not carried: it would pass sizes nobody ran.
        let mut rows = [test_row(512, 3.0, 9.0), test_row(1024, 0.5, 2.0)];
        rows[0].measured = vec![run(1.0, 2)];
        decide(&mut rows, J);
        assert!(rows[0].calibration.as_ref().unwrap().ratio.per_hour < 1.0);
        assert!(rows[1].calibration.is_none());
        assert_eq!(rows[1].meets_target, None);
    }

    #[test]
    fn a_prediction_the_run_rules_out_decides_nothing() {
        // Predicted 300/h [93, 891] (fails); the engine ran 3 min clean: < 74/h.
        let mut rows = [test_row(4096, 93.0, 891.0)];
        rows[0]
            .stressed
            .as_mut()
            .unwrap()
            .episodes_per_hour
            .per_hour = 300.0;
        rows[0].measured = vec![run(0.05, 0)];
        decide(&mut rows, J);
        assert_eq!(rows[0].meets_target, None);
        assert_eq!(rows[0].basis, Some(Basis::Both));
        // Predicted to meet at 0.1–0.5/h; the engine saw 3 in an hour (0.6–8.8/h): not
        // enough to fail the size, too many for the prediction.
        let mut rows = [test_row(1024, 0.1, 0.5)];
        rows[0].measured = vec![run(1.0, 3)];
        decide(&mut rows, J);
        assert_eq!(rows[0].meets_target, None);
        // Where the intervals meet, the prediction still decides.
        let mut rows = [test_row(1024, 0.0, 0.5)];
        rows[0].measured = vec![run(0.05, 0)];
        decide(&mut rows, J);
        assert_eq!(rows[0].meets_target, Some(true));
    }

    #[test]
    fn without_a_judged_condition_nothing_is_decided() {
        let mut rows = [test_row(256, 0.0, 0.5)];
        rows[0].measured = vec![run(1.0, 50)];
        decide(&mut rows, Judge { on: None, ..J });
        assert_eq!((rows[0].meets_target, rows[0].basis), (None, None));
    }

    #[test]
    fn xruns_in_windows_and_their_dispersion() {
        let s = 1_000_000_000u64;
        // 60 s, 6 windows: six xruns one per window are as even as can be (φ floors at 1);
        // the same six in one burst spread 6 times a Poisson count's variance.
        let even = windows_of((0..6).map(|i| i * 10 * s + s), 60 * s, true).unwrap();
        assert_eq!((even.count, even.sum, even.sum_sq), (6, 6, 6));
        assert_eq!(dispersion([Some(even)].into_iter()), Some(1.0));
        let burst = windows_of((0..6).map(|i| 31 * s + i * 1000), 60 * s, true).unwrap();
        assert_eq!((burst.sum, burst.sum_sq), (6, 36));
        // m = 1, Σ(c − m)² = 25 + 5 = 30, over 5 degrees of freedom.
        assert_eq!(dispersion([Some(burst)].into_iter()), Some(6.0));
        // Pooled with the even run: one mean over 12 windows.
        let pooled = dispersion([Some(even), Some(burst), None].into_iter()).unwrap();
        assert!((pooled - 30.0 / 11.0).abs() < 1e-9, "{pooled}");
        // Too short, past the kept events, or clean: nothing to say.
        assert_eq!(windows_of(std::iter::empty(), 9 * s, true), None);
        let three = windows_of(std::iter::empty(), 39 * s, true);
        assert_eq!(dispersion([three].into_iter()), None);
        assert_eq!(windows_of([s].into_iter(), 60 * s, false), None);
        let clean = windows_of(std::iter::empty(), 60 * s, true);
        assert_eq!(dispersion([clean].into_iter()), None);
        // A span no vector could hold costs nothing.
        let huge = windows_of([s].into_iter(), u64::MAX, true).unwrap();
        assert_eq!((huge.sum, huge.sum_sq), (1, 1));
        // An xrun past the last whole window is not counted in one.
        let tail = windows_of([55 * s].into_iter(), 55 * s + 1, true).unwrap();
        assert_eq!((tail.count, tail.sum), (5, 0));
    }

    #[test]
    fn a_dispersed_count_gets_a_wider_interval_around_the_same_rate() {
        let plain = measured_rate(12, 0.5);
        assert_eq!(dispersed_rate(12, 0.5, 1.0), plain);
        assert_eq!(dispersed_rate(0, 0.5, 4.0), measured_rate(0, 0.5));
        let wide = dispersed_rate(12, 0.5, 4.0);
        assert_eq!(wide.per_hour, plain.per_hour);
        assert!(
            wide.low < plain.low && wide.high > plain.high,
            "{wide:?} {plain:?}"
        );
        // φ = 4: Garwood's interval on 3 events, times 4.
        let three = measured_rate(3, 0.5);
        assert!((wide.high - 4.0 * three.high).abs() < 1e-9);
    }

    /// Bursty runs widen the size's measured interval around the same rate, and with it the
    /// prediction their ratio calibrates at a neighbour.
    #[test]
    fn bursty_runs_widen_what_they_decide_and_carry() {
        let s = 1_000_000_000u64;
        let at = |burst: bool| -> Vec<u64> {
            (0..10)
                .map(|i| if burst { 5 * s + i * 1000 } else { i * 36 * s })
                .collect()
        };
        let mut got = Vec::new();
        for burst in [false, true] {
            let mut rows = [test_row(512, 0.3, 1.6), test_row(1024, 0.1, 0.8)];
            rows[0]
                .stressed
                .as_mut()
                .unwrap()
                .episodes_per_hour
                .per_hour = 0.7;
            rows[1]
                .stressed
                .as_mut()
                .unwrap()
                .episodes_per_hour
                .per_hour = 0.03;
            let mut m = run(0.1, 10);
            m.windows = windows_of(at(burst).into_iter(), 360 * s, true);
            rows[0].measured = vec![m];
            decide(&mut rows, J);
            let c = rows[0].checked.clone().unwrap();
            got.push((c, rows[1].clone()));
        }
        let ((even, _), (bursty, next)) = (&got[0], &got[1]);
        assert_eq!(even.dispersion, Some(1.0));
        assert!(bursty.dispersion.unwrap() > 5.0, "{bursty:?}");
        assert_eq!(bursty.per_hour.per_hour, even.per_hour.per_hour);
        assert!(bursty.per_hour.low < even.per_hour.low);
        assert!(bursty.per_hour.high > even.per_hour.high);
        let wide = next.calibration.as_ref().unwrap().calibrated.unwrap();
        let narrow = got[0].1.calibration.as_ref().unwrap().calibrated.unwrap();
        assert!(
            wide.high > narrow.high && wide.low < narrow.low,
            "{wide:?} {narrow:?}"
        );
    }
}
