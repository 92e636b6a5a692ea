//! The suite's adaptive part: after the protocol's stages, the stressed latency is measured
//! again on the same CPUs, in stretches, until the verdict at the buffer sizes around the
//! knee (the first size above the largest failing one) is decided or `--budget` is spent.
//! The verdict pools the stretches with the first stressed measurement (report::verdict),
//! so each stretch only adds what the prediction said was still missing.

use super::{Manifest, Stage, StageStatus};
use crate::report::verdict::{self, Options};
use crate::results::verdict::{Condition, VerdictRow};
use std::path::Path;
use std::time::Duration;

/// Name of the extension stages, numbered: `latency-more1`, `latency-more2`…
pub const MORE: &str = "latency-more";

/// The stage an extension runs as: the stressed latency stage's argv with its own
/// `--duration` (see [`argv`]).
pub fn stage() -> &'static Stage {
    super::STAGES
        .iter()
        .find(|s| s.name == "latency-stress")
        .expect("the protocol has a stressed latency stage")
}

/// The shortest stretch worth a stage of its own: the stressor's start and the child's
/// own start cost a few seconds.
const MIN_STRETCH: Duration = Duration::from_secs(20);

/// What the verdict still misses: the first buffer size above the largest failing one that
/// is undecided, and the latency wall time (stressed, on the same CPUs) it needs in all.
#[derive(Debug, Clone, PartialEq)]
pub struct Knee {
    pub frames: u32,
    pub need: Duration,
    pub measured: Duration,
}

/// The knee of the verdict over the results the manifest lists, if a size there is still
/// undecided and a longer latency measurement would decide it; None when decided or when
/// the results cannot be judged (the final verdict then says why).
pub fn knee(m: &Manifest, dir: &Path) -> Option<Knee> {
    let mut inputs = Vec::new();
    let mut measured = Duration::ZERO;
    for s in m.stages.iter().filter(|s| s.status == StageStatus::Ok) {
        let Some(f) = &s.file else { continue };
        let Ok(i) = crate::report::load(&dir.join(f)) else {
            continue;
        };
        if let crate::report::Loaded::Doc(d) = &i.item {
            if let crate::results::Body::Latency { config, .. } = &d.body {
                if !config.stress.is_empty() {
                    measured += Duration::from_nanos(config.duration_ns.unwrap_or(0));
                }
            }
        }
        if !matches!(i.kind(), "verdict" | "predict") {
            inputs.push(i);
        }
    }
    let cost = verdict::default_cost();
    let cfg = verdict::settle(&inputs, &cost, Options::defaults()).ok()?;
    let v = verdict::build(&cfg, &inputs, &cost).ok()?;
    if v.judged_on != Some(Condition::Stressed) {
        return None;
    }
    knee_of(&v.rows, measured)
}

/// The first size above the largest failing one, when it is undecided. A larger size that
/// meets the target does not end the search: "1024 frames, and 512 is not decided yet"
/// leaves the smallest size that would do unknown, which is what the suite measures for.
fn knee_of(rows: &[VerdictRow], measured: Duration) -> Option<Knee> {
    let failing = rows
        .iter()
        .filter(|r| r.meets_target == Some(false))
        .map(|r| r.buffer_frames)
        .max();
    let row = rows
        .iter()
        .find(|r| failing.is_none_or(|f| r.buffer_frames > f))?;
    // Enough events for a rate whose interval still holds the target: twice as long.
    let need = match row.stressed.as_ref()?.measure_for_ns {
        Some(ns) => Duration::from_nanos(ns),
        None => measured * 2,
    };
    (row.meets_target.is_none()).then_some(Knee {
        frames: row.buffer_frames,
        need,
        measured,
    })
}

/// The next stretch: what the knee still needs (with a quarter more, as the rule of three
/// events behind `measure_for` is looser than the 95 % bound that decides), at least
/// [`MIN_STRETCH`], at most what is `left`; None when not even the minimum fits.
pub fn stretch(k: &Knee, left: Duration) -> Option<Duration> {
    let s = wanted(k).min(left);
    (s >= MIN_STRETCH).then(|| Duration::from_secs(s.as_secs()))
}

/// The stretch the knee asks for, whatever the budget: what it still needs with a quarter
/// more, at least [`MIN_STRETCH`] (its estimate may already be spent while the rate is
/// still undecided).
pub fn wanted(k: &Knee) -> Duration {
    k.need
        .mul_f64(1.25)
        .saturating_sub(k.measured)
        .max(MIN_STRETCH)
}

/// The argv of one stretch: the stressed latency stage's with `--duration` replaced.
pub fn argv(base: &[String], secs: u64) -> Vec<String> {
    let mut v = base.to_vec();
    match v.iter().position(|a| a == "--duration") {
        Some(i) if i + 1 < v.len() => v[i + 1] = format!("{secs}s"),
        _ => v.extend(["--duration".into(), format!("{secs}s")]),
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::verdict::test_row as row;

    #[test]
    fn a_stretch_covers_what_is_missing_within_the_budget() {
        let k = Knee {
            frames: 256,
            need: Duration::from_secs(200),
            measured: Duration::from_secs(10),
        };
        assert_eq!(
            stretch(&k, Duration::from_secs(600)),
            Some(Duration::from_secs(240))
        );
        assert_eq!(
            stretch(&k, Duration::from_secs(90)),
            Some(Duration::from_secs(90))
        );
        assert_eq!(stretch(&k, Duration::from_secs(10)), None);
        assert_eq!(wanted(&k), Duration::from_secs(240));
        let nearly = Knee {
            measured: Duration::from_secs(249),
            ..k
        };
        assert_eq!(
            stretch(&nearly, Duration::from_secs(600)),
            Some(MIN_STRETCH)
        );
        // Past its estimate and still undecided: a minimum stretch, never "0 s more".
        let spent = Knee {
            measured: Duration::from_secs(400),
            ..k
        };
        assert_eq!(wanted(&spent), MIN_STRETCH);
    }

    #[test]
    fn an_undecided_size_below_one_that_meets_is_still_the_knee() {
        let t = Duration::from_secs(63);
        // As a quick suite on the development VM ended: 256 fails, 512 undecided, 1024 meets.
        let rows = [
            row(256, 5.9, 21.1),
            row(512, 0.87, 6.25),
            row(1024, 0.0, 0.99),
        ];
        let k = knee_of(&rows, t).expect("512 frames is undecided");
        assert_eq!((k.frames, k.need, k.measured), (512, t * 2, t));
        // Decided on both sides of the knee: nothing to measure.
        let rows = [row(256, 5.9, 21.1), row(512, 0.1, 0.9), row(1024, 0.0, 0.5)];
        assert_eq!(knee_of(&rows, t), None);
        // Nothing fails: the smallest size is the knee, decided or not.
        let rows = [row(256, 0.5, 2.0), row(512, 0.1, 0.9)];
        assert_eq!(knee_of(&rows, t).map(|k| k.frames), Some(256));
        let rows = [row(256, 0.1, 0.9), row(512, 0.5, 2.0)];
        assert_eq!(knee_of(&rows, t), None);
        // Every size fails: no knee a longer measurement could find.
        assert_eq!(knee_of(&[row(256, 2.0, 3.0)], t), None);
    }

    #[test]
    fn the_duration_is_replaced() {
        let base: Vec<String> = ["latency", "--stress", "paper", "--duration", "10s"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(argv(&base, 90)[4], "90s");
        assert_eq!(argv(&base[..3], 90)[3..], ["--duration", "90s"]);
    }
}
