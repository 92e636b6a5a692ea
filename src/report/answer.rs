//! The verdict's first line: one decided sentence a musician can act on, and the exact
//! command to run next when a size is undecided or nothing passes. Built from the verdict's
//! rows only, so the terminal, the HTML report and JUnit say the same words.

use super::decide::{counts, judged};
use super::format::per_hour;
use crate::measure::latency::{LatencyConfig, DEFAULT_INTERVAL_NS};
use crate::measure::predict::{Outlook, Rate};
use crate::results::verdict::{Basis, Checked, Condition, VerdictConfig, VerdictRow};
use std::path::Path;

/// The label of a verdict whose latency was measured under SCHED_OTHER (a suite without
/// real-time rights).
pub const NOT_REALTIME: &str =
    "Not real-time (what an audio thread without RT priority gets, as PipeWire without rtkit)";

/// How the answer reads at a glance: the colour of the first line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    /// A buffer size is shown to meet the target.
    Ok,
    /// Undecided: measure longer.
    Warn,
    /// Every size judged fails (or nothing could be judged).
    Fail,
}

/// The tone of a verdict, from what it recommends and decides.
pub fn tone(recommended: Option<u32>, rows: &[VerdictRow], judged: Option<Condition>) -> Tone {
    if judged.is_none() {
        Tone::Fail
    } else if recommended.is_some() {
        Tone::Ok
    } else if rows.iter().any(|r| r.meets_target.is_none()) {
        Tone::Warn
    } else {
        Tone::Fail
    }
}

/// How often a rate per hour comes round, as a person says it.
pub fn often(per_hour: f64) -> String {
    let r = per_hour;
    if r >= 7_200.0 {
        format!("about {:.0} times a second", r / 3_600.0)
    } else if r >= 3_600.0 {
        "about once a second".into()
    } else if r >= 120.0 {
        format!("about {:.0} times a minute", r / 60.0)
    } else if r >= 60.0 {
        "about once a minute".into()
    } else if r >= 1.0 {
        // Rounded first: 59/h is "once a minute", never "once every 1 minutes".
        match (60.0 / r).round() {
            n if n <= 1.0 => "about once a minute".into(),
            n if n >= 60.0 => "about once an hour".into(),
            n => format!("about once every {n:.0} minutes"),
        }
    } else if r > 0.0 {
        match (1.0 / r).round() {
            n if n <= 1.0 => "about once an hour".into(),
            n => format!("about once every {n:.0} hours"),
        }
    } else {
        "never".into()
    }
}

/// "1 glitch in 4 h" for a rate that meets the target; a bound says "at most".
fn one_in(r: &Rate) -> String {
    let (x, bound) = if r.upper_bound {
        (r.high, "at most ")
    } else {
        (r.per_hour, "about ")
    };
    let hours = 1.0 / x.max(f64::MIN_POSITIVE);
    let span = if hours >= 48.0 {
        format!("{:.0} days", hours / 24.0)
    } else if hours >= 2.0 {
        format!("{hours:.0} h")
    } else {
        format!("{:.0} min", hours * 60.0)
    };
    format!("{bound}1 glitch in {span}")
}

fn khz(rate: u32) -> String {
    let k = rate as f64 / 1e3;
    if k.fract() == 0.0 {
        format!("{k:.0} kHz")
    } else {
        format!("{k:.1} kHz")
    }
}

/// The target as words: "1 glitch an hour", "1 glitch in 10 h".
fn target(per_hour: f64) -> String {
    if per_hour >= 1.0 && per_hour.fract() == 0.0 {
        let n = per_hour as u64;
        format!("{n} glitch{} an hour", if n == 1 { "" } else { "es" })
    } else {
        one_in(&Rate {
            per_hour,
            low: per_hour,
            high: per_hour,
            upper_bound: false,
        })
        .replacen("about ", "", 1)
    }
}

/// How long the engine ran a size: "4 min".
fn ran(c: &Checked) -> String {
    super::format::span((c.hours * 3.6e12) as u64)
}

/// What a failing size does: "glitches about 3 times a minute". A size the engine's runs
/// failed is said with their rate and length; one a run failed that its prediction did not
/// (an older verdict without `checked`) with the run's rate (a bounded prediction's 0 read
/// "glitches never" of a size a run saw glitch).
fn glitches(r: &VerdictRow, on: Condition, periods: u32) -> String {
    let p = judged(r, on);
    if p.is_some_and(|p| p.overload) {
        return "cannot keep up (the DSP fills the period)".into();
    }
    if let (Some(Basis::Measured), Some(c)) = (r.basis, &r.checked) {
        return format!(
            "glitches {} (measured: {} in {})",
            often(c.per_hour.per_hour),
            c.xruns,
            ran(c)
        );
    }
    let run = r
        .measured
        .iter()
        .filter(|m| counts(m, on, periods))
        .max_by(|a, b| a.per_hour.low.total_cmp(&b.per_hour.low));
    match (p, run) {
        (Some(p), _) if p.outlook == Outlook::Fails => {
            format!("glitches {}", often(p.episodes_per_hour.per_hour))
        }
        (_, Some(m)) => format!("glitches {} in a run", often(m.per_hour.per_hour)),
        (Some(p), None) if p.episodes_per_hour.upper_bound => format!(
            "glitches up to {} times an hour",
            per_hour(p.episodes_per_hour.high)
        ),
        (Some(p), None) => format!("glitches {}", often(p.episodes_per_hour.per_hour)),
        (None, None) => "fails".into(),
    }
}

/// The rate a size that meets the target is said with, and what it rests on:
/// "about 1 glitch in 4 h (predicted; no glitch in 3 min measured)".
fn meets_rate(r: &VerdictRow, on: Condition) -> String {
    let calibrated = r.calibration.as_ref().and_then(|c| {
        c.calibrated
            .map(|k| (k, format!(", calibrated on {} frames' run", c.from_frames)))
    });
    let predicted = || {
        calibrated
            .as_ref()
            .map(|(k, _)| one_in(k))
            .or_else(|| judged(r, on).map(|p| one_in(&p.episodes_per_hour)))
            .unwrap_or_default()
    };
    let how = calibrated.as_ref().map_or("", |(_, w)| w.as_str());
    match (r.basis, &r.checked) {
        (Some(Basis::Measured), Some(c)) => {
            format!("{} (measured in {})", one_in(&c.per_hour), ran(c))
        }
        (Some(Basis::Both), Some(c)) if c.xruns == 0 => format!(
            "{} (predicted{how}; no glitch in {} measured)",
            predicted(),
            ran(c)
        ),
        (Some(Basis::Both), Some(c)) => format!(
            "{} (predicted{how}; {} in {} measured)",
            predicted(),
            c.xruns,
            ran(c)
        ),
        _ => format!("{} (predicted{how})", predicted()),
    }
}

/// What an undecided size's data says so far, for the sentence: its rate with the 95 %
/// interval, or the bound when too few glitches were seen for a rate. A user near the
/// target learns more from "about 1.4 an hour, 0.38–3.6" than from "undecided".
fn so_far(r: &VerdictRow, on: Condition) -> String {
    if let (Some(p), Some(c)) = (super::decide::refuted(r, on), &r.checked) {
        return format!(
            " ({} frames so far: {} in {} measured, which rules out the predicted {}–{} an hour)",
            r.buffer_frames,
            if c.xruns == 0 {
                "no glitch".to_string()
            } else {
                format!("{} glitches", c.xruns)
            },
            ran(c),
            per_hour(p.low),
            per_hour(p.high)
        );
    }
    match judged(r, on).map(|p| &p.episodes_per_hour) {
        Some(e) if e.upper_bound => format!(
            " ({} frames so far: at most {} glitches an hour)",
            r.buffer_frames,
            per_hour(e.high)
        ),
        Some(e) => format!(
            " ({} frames so far: about {} glitches an hour, 95 %: {}–{})",
            r.buffer_frames,
            per_hour(e.per_hour),
            per_hour(e.low),
            per_hour(e.high)
        ),
        None => String::new(),
    }
}

/// The one-sentence answer.
pub fn sentence(
    cfg: &VerdictConfig,
    rows: &[VerdictRow],
    recommended: Option<u32>,
    on: Option<Condition>,
) -> String {
    let Some(on) = on else {
        return "No answer yet: no latency was measured, so nothing predicts a glitch rate.".into();
    };
    let cond = match on {
        Condition::Stressed => "under load",
        Condition::Idle => "idle (not measured under load)",
    };
    let dsp = match cfg.load_pct {
        Some(p) => format!("{p:.0} %"),
        None => "half".into(),
    };
    let failing = rows
        .iter()
        .filter(|r| r.meets_target == Some(false))
        .max_by_key(|r| r.buffer_frames);
    let rec = recommended.and_then(|f| rows.iter().find(|r| r.buffer_frames == f));
    if let Some(r) = rec {
        let rate = meets_rate(r, on);
        let below = rows
            .iter()
            .filter(|x| x.buffer_frames < r.buffer_frames)
            .max_by_key(|x| x.buffer_frames)
            .map(|x| match x.meets_target {
                Some(false) => format!(
                    "; {} frames {}",
                    x.buffer_frames,
                    glitches(x, on, cfg.periods)
                ),
                _ => format!("; {} frames is not decided yet", x.buffer_frames),
            })
            .unwrap_or_default();
        return format!(
            "This machine can run {} frames at {} ({} periods, {:.1} ms round trip) with {rate} \
             {cond} while DSP fills {dsp} of each period{below}.",
            r.buffer_frames,
            khz(cfg.rate),
            cfg.periods,
            r.rtl_measured_ms.unwrap_or(r.rtl_model_ms),
        );
    }
    let undecided = rows
        .iter()
        .filter(|r| r.meets_target.is_none())
        .find(|r| failing.is_none_or(|f| r.buffer_frames > f.buffer_frames));
    match (failing, undecided) {
        (Some(f), Some(u)) => format!(
            "Not decided yet: {} frames {} {cond}; {} frames {} a longer measurement{}.",
            f.buffer_frames,
            glitches(f, on, cfg.periods),
            u.buffer_frames,
            if rows
                .last()
                .is_some_and(|l| l.buffer_frames > u.buffer_frames)
            {
                "and up need"
            } else {
                "needs"
            },
            so_far(u, on)
        ),
        (None, Some(u)) => format!(
            "Not decided yet: the measurement {cond} is too short to show that {} frames or \
             more stays within {}{}.",
            u.buffer_frames,
            target(cfg.target_per_hour),
            so_far(u, on)
        ),
        (
            Some(
                f @ VerdictRow {
                    basis: Some(Basis::Measured),
                    checked: Some(c),
                    ..
                },
            ),
            None,
        ) => {
            format!(
                "This machine cannot run even {} frames at {} within {} {cond}: {} glitches/h \
                 measured ({} in {}).",
                f.buffer_frames,
                khz(cfg.rate),
                target(cfg.target_per_hour),
                per_hour(c.per_hour.per_hour),
                c.xruns,
                ran(c)
            )
        }
        (Some(f), None) => format!(
            "This machine cannot run even {} frames at {} within {} {cond}: it {}.",
            f.buffer_frames,
            khz(cfg.rate),
            target(cfg.target_per_hour),
            glitches(f, on, cfg.periods)
        ),
        (None, None) => "No answer: no buffer size was judged.".into(),
    }
}

/// The directory of a suite the inputs come from (its manifest beside them), if any.
pub fn suite_dir(inputs: &[super::Input]) -> Option<&Path> {
    let dir = inputs.first()?.path.parent()?;
    let all_there = inputs.iter().all(|i| i.path.parent() == Some(dir));
    (all_there && dir.join(crate::results::suite::MANIFEST).is_file()).then_some(dir)
}

/// A latency measurement long enough for `ns`, in whole minutes a person types.
fn minutes(ns: u64) -> u64 {
    (ns as f64 / 60e9).ceil().max(1.0) as u64
}

/// The `latency` options that measure again as `c` did, so that the new file pools with it
/// (the verdict refuses to pool a different interval, stress or `--busy` share) and meets
/// the machine as it did (`/dev/cpu_dma_latency`, mlock, policy); without `--duration`, nor
/// `--cpus`: a result records the CPUs it measured, not whether they were chosen.
pub fn again(c: &LatencyConfig) -> String {
    let mut a = String::new();
    if !c.stress.is_empty() {
        a += &format!(" --stress {}", c.stress.join(","));
    }
    match (c.audio_period, c.interval_ns) {
        (Some(p), _) => a += &format!(" --audio-period {}@{}", p.frames, p.rate),
        (None, Some(ns)) if ns != DEFAULT_INTERVAL_NS => {
            a += &match ns % 1_000 {
                0 => format!(" --interval {}us", ns / 1_000),
                _ => format!(" --interval {ns}ns"),
            }
        }
        _ => {}
    }
    if let Some(pct) = c.busy_pct {
        a += &format!(" --busy {pct}");
    }
    if c.policy.as_ref().is_some_and(|p| !p.is_realtime()) {
        a += " --policy other";
    }
    if c.dma_latency == Some(false) {
        a += " --no-dma-latency";
    }
    if c.mlock == Some(false) {
        a += " --no-mlock";
    }
    a
}

/// The exact command to run next: measure longer where a size is undecided (the suite
/// resumed with a budget that covers it, or one more latency file measured `again` as the
/// judged one was: [`again`]), try tuning where everything fails; None when a size meets
/// the target.
pub fn next_command(
    rows: &[VerdictRow],
    recommended: Option<u32>,
    on: Option<Condition>,
    suite: Option<&Path>,
    again: &str,
) -> Option<String> {
    let Some(on) = on else {
        return Some("xrunlab latency --stress paper --baseline idle --duration 5m -o lat.json && xrunlab verdict lat.json".into());
    };
    if recommended.is_some() {
        return None;
    }
    let failing = rows
        .iter()
        .filter(|r| r.meets_target == Some(false))
        .map(|r| r.buffer_frames)
        .max();
    let need = rows
        .iter()
        .filter(|r| r.meets_target.is_none() && failing.is_none_or(|f| r.buffer_frames > f))
        .find_map(|r| judged(r, on).and_then(|p| p.measure_for_ns));
    match (need, suite) {
        (Some(ns), Some(dir)) => Some(format!(
            "xrunlab suite --resume {} --budget {}m",
            dir.display(),
            minutes(ns) + 2
        )),
        (Some(ns), None) => Some(format!(
            "xrunlab latency{again} --duration {}m -o lat-more.json",
            minutes(ns)
        )),
        // Everything judged fails on the DSP alone: no tuning makes the period longer.
        (None, _)
            if rows
                .iter()
                .all(|r| judged(r, on).is_some_and(|p| p.overload)) =>
        {
            None
        }
        // Everything judged fails on latency: does tuning the machine help?
        (None, _) => Some("sudo xrunlab suite --tuned --quick -o xrunlab-tuned".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_latency_measures_as_the_judged_one_did() {
        let mut c = LatencyConfig {
            stress: vec!["paper".into()],
            audio_period: Some(crate::units::AudioPeriod {
                frames: 64,
                rate: 48000,
            }),
            busy_pct: Some(50.0),
            dma_latency: Some(false),
            ..LatencyConfig::default()
        };
        assert_eq!(
            again(&c),
            " --stress paper --audio-period 64@48000 --busy 50 --no-dma-latency"
        );
        c = LatencyConfig {
            interval_ns: Some(1_000_000),
            policy: Some(crate::rt::policy::Policy::Other { nice: 0 }),
            mlock: Some(false),
            ..LatencyConfig::default()
        };
        assert_eq!(again(&c), " --interval 1000us --policy other --no-mlock");
        assert_eq!(again(&LatencyConfig::default()), "");
    }

    #[test]
    fn rates_are_said_as_people_say_them() {
        assert_eq!(often(7.2e4), "about 20 times a second");
        assert_eq!(often(3_000.0), "about 50 times a minute");
        assert_eq!(often(70.0), "about once a minute");
        assert_eq!(often(6.0), "about once every 10 minutes");
        assert_eq!(often(0.25), "about once every 4 hours");
        // Rounding never leaves a plural of one.
        assert_eq!(often(59.0), "about once a minute");
        assert_eq!(often(2.01), "about once every 30 minutes");
        assert_eq!(often(0.8), "about once an hour");
        assert_eq!(often(1.5), "about once every 40 minutes");
        let r = |per_hour, high, upper_bound| Rate {
            per_hour,
            low: 0.0,
            high,
            upper_bound,
        };
        assert_eq!(one_in(&r(0.25, 0.5, false)), "about 1 glitch in 4 h");
        assert_eq!(one_in(&r(0.0, 0.5, true)), "at most 1 glitch in 2 h");
        assert_eq!(one_in(&r(0.0, 0.01, true)), "at most 1 glitch in 4 days");
        assert_eq!(target(1.0), "1 glitch an hour");
        assert_eq!(target(0.1), "1 glitch in 10 h");
    }

    /// The headline says what it rests on: a clean short run beside a prediction within the
    /// target, a size the runs failed up to 4096 frames.
    #[test]
    fn the_sentence_says_measured_or_predicted() {
        use crate::report::decide::{decide, Judge};
        use crate::results::verdict::{test_row, MeasuredRun};
        let run = |hours: f64, xruns: u64| MeasuredRun {
            file: "run.json".into(),
            stress: vec!["paper".into()],
            periods: 2,
            hours,
            xruns,
            per_hour: crate::report::decide::measured_rate(xruns, hours),
            dsp_load_mean_pct: 50.0,
            windows: None,
        };
        let cfg = VerdictConfig {
            inputs: vec![],
            rate: 48000,
            periods: 2,
            buffers: vec![],
            target_per_hour: 1.0,
            load_pct: None,
            cost_file: None,
            fail_if_above: None,
            holds: crate::measure::predict::Holds::default(),
        };
        let j = Judge {
            on: Some(Condition::Stressed),
            periods: 2,
            target_per_hour: 1.0,
        };
        // 512 predicted as its run measured it (240/h): no calibration to carry.
        let mut rows = [test_row(512, 100.0, 400.0), test_row(1024, 0.05, 0.5)];
        rows[0].measured = vec![run(0.05, 12)];
        rows[1].measured = vec![run(0.05, 0)];
        decide(&mut rows, j);
        let s = sentence(&cfg, &rows, Some(1024), Some(Condition::Stressed));
        assert!(
            s.contains("1024 frames") && s.contains("(predicted; no glitch in 3 min measured)"),
            "{s}"
        );
        assert!(
            s.contains("512 frames glitches") && s.contains("(measured: 12 in 3 min)"),
            "{s}"
        );
        // Nothing holds up to 4096: the largest size tried and its measured rate.
        let mut rows = [test_row(2048, 0.0, 0.5), test_row(4096, 0.0, 0.5)];
        rows[0].measured = vec![run(0.1, 4)];
        rows[1].measured = vec![run(0.1, 3)];
        decide(&mut rows, j);
        let s = sentence(&cfg, &rows, None, Some(Condition::Stressed));
        assert!(
            s.starts_with("This machine cannot run even 4096 frames")
                && s.contains("30.0 glitches/h measured (3 in 6 min)"),
            "{s}"
        );
        // A size whose clean run rules its prediction out is undecided, said with the run.
        let mut rows = [test_row(1024, 100.0, 400.0), test_row(2048, 93.0, 891.0)];
        rows[0].measured = vec![run(0.05, 12)];
        rows[1].measured = vec![run(0.05, 0)];
        decide(&mut rows, j);
        assert_eq!(rows[1].meets_target, None);
        let s = sentence(&cfg, &rows, None, Some(Condition::Stressed));
        assert!(
            s.starts_with("Not decided yet: 1024 frames")
                && s.contains("2048 frames so far: no glitch in 3 min measured, which rules out the predicted 93.0–891 an hour"),
            "{s}"
        );
        // A verdict over results without runs stays predicted and says so.
        let mut rows = [test_row(1024, 0.05, 0.5)];
        decide(&mut rows, j);
        let s = sentence(&cfg, &rows, Some(1024), Some(Condition::Stressed));
        assert!(s.contains("(predicted)"), "{s}");
        rows[0].basis = None;
        let s = sentence(&cfg, &rows, Some(1024), Some(Condition::Stressed));
        assert!(s.contains("(predicted)"), "{s}");
    }

    /// A size that fails on a run its bounded prediction passed is said with the run's rate.
    #[test]
    fn a_size_a_run_failed_is_said_with_the_runs_rate() {
        use crate::results::verdict::{test_row, MeasuredRun};
        let run = |stress: &[&str], per_hour: f64| MeasuredRun {
            file: "run.json".into(),
            stress: stress.iter().map(|s| s.to_string()).collect(),
            periods: 2,
            hours: 0.25,
            xruns: (per_hour / 4.0) as u64,
            per_hour: Rate {
                per_hour,
                low: per_hour / 2.0,
                high: per_hour * 2.0,
                upper_bound: false,
            },
            dsp_load_mean_pct: 50.0,
            windows: None,
        };
        let mut r = test_row(1024, 0.0, 0.49);
        r.stressed.as_mut().unwrap().episodes_per_hour.upper_bound = true;
        r.stressed.as_mut().unwrap().episodes_per_hour.per_hour = 0.0;
        r.meets_target = Some(false);
        r.measured = vec![run(&["paper"], 28.0), run(&[], 400.0)];
        let s = Condition::Stressed;
        assert_eq!(
            glitches(&r, s, 2),
            "glitches about once every 2 minutes in a run"
        );
        // A run with another period count or the other condition says nothing here; the
        // bound does.
        assert_eq!(glitches(&r, s, 3), "glitches up to 0.49 times an hour");
        // Where the prediction itself fails, it is what the sentence says.
        let mut f = test_row(512, 3.7, 8.9);
        f.measured = vec![run(&["paper"], 279.0)];
        assert_eq!(glitches(&f, s, 2), "glitches about once every 10 minutes");
    }
}
