//! The suite's adaptive part: after the protocol's stages, the budget goes to the engine
//! itself and to more stressed latency, alternated in slices so that both meet the same
//! drift of the machine. The engine runs (`run` with the verdict's compute share under the
//! same stress) at the size the verdict recommends and the one below it, or around the knee
//! (the first size above the largest failing one) when nothing is recommended; the verdict
//! decides a size on them as soon as their interval leaves the target (report::decide). The
//! latency stretches go on while the knee's prediction is undecided; the verdict pools them
//! with the first stressed measurement (report::verdict), so each adds what was missing.

use super::stages::Need;
use super::{Manifest, Stage, StageStatus};
use crate::report::verdict::{self, Options};
use crate::results::verdict::{Basis, Condition, VerdictResults, VerdictRow};
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
pub const MIN_STRETCH: Duration = Duration::from_secs(20);

/// What the verdict still misses: the first buffer size above the largest failing one that
/// is undecided, and the latency wall time (stressed, on the same CPUs) it needs in all.
#[derive(Debug, Clone, PartialEq)]
pub struct Knee {
    pub frames: u32,
    pub need: Duration,
    pub measured: Duration,
}

/// The verdict over the results the manifest lists, with the stressed latency measured so
/// far; None when the results cannot be judged (the final verdict then says why).
fn judge(m: &Manifest, dir: &Path) -> Option<(VerdictResults, Duration)> {
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
    (v.judged_on == Some(Condition::Stressed)).then_some((v, measured))
}

/// The knee of the verdict over the results the manifest lists, if a size there is still
/// undecided and a longer latency measurement would decide it; None when decided or when
/// the results cannot be judged (the final verdict then says why).
pub fn knee(m: &Manifest, dir: &Path) -> Option<Knee> {
    let (v, measured) = judge(m, dir)?;
    knee_of(&v.rows, measured)
}

/// The engine check's stage: `run` with the verdict's compute share under the stressed
/// latency's stress; [`run_argv`] adds the size and the slice's length.
pub static RUN_STAGE: Stage = Stage {
    name: "run-check",
    quick: RUN_BASE,
    full: RUN_BASE,
    smoke: RUN_BASE,
    needs: &[Need::Driver],
    resumable: false,
    uses_stress_ng: true,
};

const RUN_BASE: &[&str] = &[
    "run",
    "--driver",
    "{driver}",
    "--periods",
    "2",
    "--chain",
    "burn(50%)",
    "--stress",
    "paper",
];

/// Name of the engine check stages, numbered: `run-check1`, `run-check2`…
pub const RUN: &str = "run-check";

/// One slice of engine run or of latency: short enough that the two alternate several
/// times in a quick suite's budget, long enough that a size glitching once a minute shows.
pub const SLICE: Duration = Duration::from_secs(60);

/// A size the engine has run this long is checked as far as the suite goes: the length of
/// run that Vignati et al.'s trials and the check use.
pub const CHECKED: Duration = Duration::from_secs(600);

/// What the adaptive part does next.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// The engine at this size (None: a JACK server's own size), which it has run this long.
    Run { frames: Option<u32>, ran: Duration },
    /// More stressed latency for the knee.
    Latency(Knee),
}

/// The next slice: the engine where a size is still to check, latency where the knee's
/// prediction is undecided, the two in turn (`last_was_run`); None when neither has
/// anything left to do.
pub fn next(m: &Manifest, dir: &Path, jack: bool, last_was_run: bool) -> Option<Next> {
    let (v, measured) = judge(m, dir)?;
    let run = to_run(&v.rows, v.recommended_frames, jack);
    let knee = knee_of(&v.rows, measured);
    match (run, knee) {
        (Some(r), Some(k)) => Some(if last_was_run { Next::Latency(k) } else { r }),
        (Some(r), None) => Some(r),
        (None, Some(k)) => Some(Next::Latency(k)),
        (None, None) => None,
    }
}

/// The size the engine checks next: the recommended size and the one below it, or the knee
/// and the one below it when nothing is recommended, or the largest size when every size
/// fails on its prediction; the one run least so far, the larger first (the size the
/// answer names is the one a run must not contradict). A size its runs already failed, or
/// one run [`CHECKED`] long, is done. A JACK server runs its own size: the engine runs
/// there until that size is done.
fn to_run(rows: &[VerdictRow], recommended: Option<u32>, jack: bool) -> Option<Next> {
    let ran = |r: &VerdictRow| {
        Duration::from_secs_f64(r.checked.as_ref().map_or(0.0, |c| c.hours * 3600.0))
    };
    let done = |r: &VerdictRow| {
        (r.basis == Some(Basis::Measured) && r.meets_target == Some(false)) || ran(r) >= CHECKED
    };
    if jack {
        let server = rows
            .iter()
            .filter(|r| r.checked.is_some())
            .max_by_key(|r| ran(r));
        return match server {
            Some(r) if done(r) => None,
            r => Some(Next::Run {
                frames: None,
                ran: r.map_or(Duration::ZERO, ran),
            }),
        };
    }
    let at = recommended
        .or_else(|| knee_of(rows, Duration::ZERO).map(|k| k.frames))
        .or_else(|| rows.last().map(|r| r.buffer_frames))?;
    let i = rows.iter().position(|r| r.buffer_frames == at)?;
    rows[i.saturating_sub(1)..=i]
        .iter()
        .filter(|r| !done(r))
        .min_by_key(|r| (ran(r), std::cmp::Reverse(r.buffer_frames)))
        .map(|r| Next::Run {
            frames: Some(r.buffer_frames),
            ran: ran(r),
        })
}

/// The argv of one engine slice: the check stage's with the size (unless the JACK
/// server's) and the slice's length.
pub fn run_argv(base: &[String], frames: Option<u32>, secs: u64) -> Vec<String> {
    let mut v = base.to_vec();
    if let Some(f) = frames {
        v.extend(["--buffer".into(), f.to_string()]);
    }
    v.extend(["--duration".into(), format!("{secs}s")]);
    v
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

    /// A row as the verdict leaves it after the engine ran it `secs` with `xruns`.
    fn ran(mut r: VerdictRow, secs: f64, xruns: u64) -> VerdictRow {
        let hours = secs / 3600.0;
        r.measured = vec![crate::results::verdict::MeasuredRun {
            file: "run.json".into(),
            stress: vec!["paper".into()],
            periods: 2,
            hours,
            xruns,
            per_hour: verdict::measured_rate(xruns, hours),
            dsp_load_mean_pct: 50.0,
            windows: None,
        }];
        let mut rows = [r];
        crate::report::decide::decide(
            &mut rows,
            crate::report::decide::Judge {
                on: Some(Condition::Stressed),
                periods: 2,
                target_per_hour: 1.0,
            },
        );
        let [r] = rows;
        r
    }

    #[test]
    fn the_engine_checks_the_recommended_size_and_the_one_below() {
        let at = |frames, secs| {
            Some(Next::Run {
                frames: Some(frames),
                ran: Duration::from_secs(secs),
            })
        };
        // 1024 recommended on its prediction, nothing run: 1024 first, then the one below.
        let mut rows = vec![
            row(256, 5.9, 21.1),
            row(512, 0.87, 6.25),
            row(1024, 0.0, 0.99),
        ];
        assert_eq!(to_run(&rows, Some(1024), false), at(1024, 0));
        rows[2] = ran(rows[2].clone(), 60.0, 0);
        assert_eq!(rows[2].meets_target, Some(true));
        assert_eq!(to_run(&rows, Some(1024), false), at(512, 0));
        // 512 failed by its run (5 glitches in 60 s): 1024 again.
        rows[1] = ran(rows[1].clone(), 60.0, 5);
        assert_eq!(rows[1].meets_target, Some(false));
        assert_eq!(to_run(&rows, Some(1024), false), at(1024, 60));
        // 1024 clean for ten minutes: checked as far as the suite goes.
        rows[2] = ran(rows[2].clone(), 600.0, 0);
        assert_eq!(to_run(&rows, Some(1024), false), None);
        // Nothing recommended, every size failing: the largest.
        let rows = vec![row(2048, 2.0, 3.0), row(4096, 1.5, 3.0)];
        assert_eq!(to_run(&rows, None, false), at(4096, 0));
        // JACK: the server's size until its runs decide it.
        assert_eq!(
            to_run(&rows, None, true),
            Some(Next::Run {
                frames: None,
                ran: Duration::ZERO
            })
        );
        let failed = vec![ran(row(256, 0.0, 0.5), 60.0, 9)];
        assert_eq!(to_run(&failed, None, true), None);
        assert_eq!(
            run_argv(&["run".to_string()], Some(512), 60)[1..],
            ["--buffer", "512", "--duration", "60s"]
        );
        assert_eq!(run_argv(&["run".to_string()], None, 60).len(), 3);
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
