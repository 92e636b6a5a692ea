//! Each verdict row's outcome from its prediction and the engine's own runs at that size
//! (docs/methods.md "Verdict", "Calibration"): a run under the judged condition decides
//! what it can (its 95 % interval above the target fails the size, within it meets it);
//! where the runs are too short to tell, the prediction decides, scaled by the ratio of
//! measured to predicted the nearest size with both showed, and never against a run.

use crate::measure::predict::{Outlook, Rate};
use crate::results::verdict::{
    Basis, Calibration, Checked, Condition, MeasuredRun, Predicted, VerdictRow,
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
    Some(Checked {
        xruns,
        hours,
        per_hour: measured_rate(xruns, hours),
    })
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
}
