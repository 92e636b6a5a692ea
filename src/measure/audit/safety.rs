//! Real-time safety and output (docs/methods.md "Plugin audit"): what the plugin does on the
//! audio thread while it processes, after warm-up, at every block size and rate asked, and
//! what comes out of it.

use super::probe::{self, Op};
use super::{blocks_for, AuditConfig, Check, Feed, Stage, Subject, Verdict};

/// What came out of the plugin over one phase.
#[derive(Debug, Default, Clone, Copy)]
pub struct OutStats {
    pub samples: u64,
    pub nonfinite: u64,
    pub subnormal: u64,
    pub peak: f32,
}

impl OutStats {
    #[inline]
    pub fn add(&mut self, l: &[f32], r: &[f32]) {
        for &s in l.iter().chain(r.iter()) {
            if !s.is_finite() {
                self.nonfinite += 1;
            } else {
                if s != 0.0 && s.abs() < f32::MIN_POSITIVE {
                    self.subnormal += 1;
                }
                self.peak = self.peak.max(s.abs());
            }
        }
        self.samples += (l.len() + r.len()) as u64;
    }
}

/// What one counted phase of a setting saw.
#[derive(Default)]
struct Phase {
    blocks: usize,
    counted: probe::Counted,
    switches: u64,
}

/// One setting's run: operations counted while processing with the controls still (noise,
/// then the silence after it) and while they move, and the output on noise and on silence.
struct Run {
    rate: u32,
    frames: usize,
    still: Phase,
    moving: Phase,
    sound: OutStats,
    silence: OutStats,
}

impl Run {
    fn setting(&self) -> String {
        format!("{} frames/{} Hz", self.frames, self.rate)
    }
}

/// A peak below this (−100 dBFS) is silence.
const SILENT: f32 = 1e-5;

/// Count what `f` does on this thread, with the thread's voluntary context switches.
fn phase(blocks: usize, f: impl FnOnce()) -> Phase {
    let switches = probe::voluntary_switches();
    let ((), counted) = probe::counted(f);
    Phase {
        blocks,
        counted,
        switches: probe::voluntary_switches().saturating_sub(switches),
    }
}

fn run_one(
    s: &Subject,
    rate: u32,
    frames: usize,
    controls: &[super::Control],
) -> Result<Run, String> {
    let mut p = s.instantiate(rate, frames).map_err(|e| e.to_string())?;
    let mut feed = Feed::new(rate, frames);
    let instrument = s.is_instrument();
    if instrument {
        p.note_on();
    }
    for _ in 0..blocks_for(0.1, rate, frames, 16) {
        feed.fill(false);
        feed.process(p.as_mut());
    }
    let sound_blocks = blocks_for(0.25, rate, frames, 32);
    let param_blocks = if controls.is_empty() {
        0
    } else {
        blocks_for(0.1, rate, frames, 16)
    };
    let silence_blocks = blocks_for(0.1, rate, frames, 16);
    let (mut sound, mut silence) = (OutStats::default(), OutStats::default());
    let still = phase(sound_blocks + silence_blocks, || {
        for b in 0..sound_blocks {
            if instrument && b.is_multiple_of(64) {
                p.note_on();
            }
            feed.fill(false);
            feed.process(p.as_mut());
            sound.add(&feed.l, &feed.r);
        }
        if instrument {
            p.note_off();
        }
        for _ in 0..silence_blocks {
            feed.fill(true);
            feed.process(p.as_mut());
            silence.add(&feed.l, &feed.r);
        }
    });
    let moving = phase(param_blocks, || {
        for b in 0..param_blocks {
            // One triangle through each control's whole range, up and back down.
            let ph = 2.0 * b as f32 / param_blocks as f32;
            let x = if ph <= 1.0 { ph } else { 2.0 - ph };
            for c in controls {
                p.set_control(c.index, c.at(x));
            }
            feed.fill(false);
            feed.process(p.as_mut());
        }
    });
    Ok(Run {
        rate,
        frames,
        still,
        moving,
        sound,
        silence,
    })
}

/// The real-time safety and output checks over every block size and rate of `cfg`.
pub fn checks(s: &Subject, cfg: &AuditConfig, stage: &mut dyn Stage) -> Vec<Check> {
    let controls = s.controls();
    let mut runs = Vec::new();
    let mut failed = Vec::new();
    for &rate in &cfg.rates {
        for &frames in &cfg.blocks {
            stage.set(&format!(
                "processing at {frames} frames/{rate} Hz (real-time safety)"
            ));
            match run_one(s, rate, frames as usize, &controls) {
                Ok(r) => runs.push(r),
                Err(e) => failed.push(format!("{frames} frames/{rate} Hz: {e}")),
            }
        }
    }
    let mut out = Vec::new();
    if runs.is_empty() {
        let why = format!("could not run at any setting: {}", failed.join("; "));
        for id in [
            "rt.heap",
            "rt.locks",
            "rt.blocking",
            "output.finite",
            "output.subnormal",
            "output.signal",
        ] {
            out.push(Check::new(id, Verdict::Fail, why.clone()));
        }
        return out;
    }
    out.extend(rt_checks(&runs));
    out.extend(output_checks(s, &runs));
    if !failed.is_empty() {
        // A setting the plugin refused is the user's to know, but not a real-time fault.
        if let Some(c) = out.iter_mut().find(|c| c.id == "rt.heap") {
            c.figure += &format!(" (not run: {})", failed.join("; "));
            c.verdict = c.verdict.max(Verdict::Warn);
        }
    }
    out
}

/// Of some ops over one phase of every run: the total, and where the first was seen.
fn tally(runs: &[Run], moving: bool, ops: &[Op]) -> (u64, Option<String>) {
    let mut total = 0;
    let mut first = None;
    for r in runs {
        let ph = if moving { &r.moving } else { &r.still };
        let n: u64 = ops.iter().map(|&o| ph.counted.counts[o as usize]).sum();
        if n > 0 && first.is_none() {
            let site = ops
                .iter()
                .find_map(|&o| ph.counted.sites[o as usize].clone())
                .map(|s| format!(" in {s}"))
                .unwrap_or_default();
            first = Some(format!(
                "first{} at {}{site}",
                if moving { " with controls moving" } else { "" },
                r.setting()
            ));
        }
        total += n;
    }
    (total, first)
}

/// One real-time check: `what` counted over both phases, failing when any was seen.
fn rt_check(id: &str, runs: &[Run], ops: &[Op], what: &str, scope: &str) -> Check {
    let (still, first_still) = tally(runs, false, ops);
    let (moving, first_moving) = tally(runs, true, ops);
    if still + moving == 0 {
        return Check::new(id, Verdict::Pass, format!("no {what} in {scope}")).value(0.0);
    }
    let by = |o: Op| {
        runs.iter()
            .map(|r| r.still.counted.counts[o as usize] + r.moving.counted.counts[o as usize])
            .sum::<u64>()
    };
    let kinds = match id {
        "rt.heap" => format!(
            " ({} allocations, {} frees in all)",
            by(Op::Alloc),
            by(Op::Free)
        ),
        "rt.blocking" => format!(
            " ({} waits, {} sleeps, {} read/write/poll in all)",
            by(Op::Wait),
            by(Op::Sleep),
            by(Op::Io)
        ),
        _ => String::new(),
    };
    Check::new(
        id,
        Verdict::Fail,
        format!(
            "{still} {what} while processing, {moving} while controls moved{kinds}, in {scope}; {}",
            first_still.or(first_moving).unwrap_or_default()
        ),
    )
    .value((still + moving) as f64)
}

fn rt_checks(runs: &[Run]) -> Vec<Check> {
    if !probe::shims_present() {
        let why = "skipped: this process has no interposer (run through the xrunlab binary)";
        return ["rt.heap", "rt.locks", "rt.blocking"]
            .iter()
            .map(|id| Check::new(id, Verdict::Skip, why))
            .collect();
    }
    let still: usize = runs.iter().map(|r| r.still.blocks).sum();
    let moving: usize = runs.iter().map(|r| r.moving.blocks).sum();
    let scope = format!(
        "{} blocks at {} settings ({moving} with controls moving)",
        still + moving,
        runs.len()
    );
    let mut blocking = rt_check(
        "rt.blocking",
        runs,
        &[Op::Wait, Op::Sleep, Op::Io],
        "blocking calls",
        &scope,
    );
    let switches: u64 = runs
        .iter()
        .map(|r| r.still.switches + r.moving.switches)
        .sum();
    if blocking.verdict == Verdict::Pass && switches > 0 {
        blocking = Check::new(
            "rt.blocking",
            Verdict::Warn,
            format!("no blocking call seen, but the thread blocked {switches} times in the kernel (voluntary context switches) in {scope}"),
        )
        .value(switches as f64);
    }
    vec![
        rt_check(
            "rt.heap",
            runs,
            &[Op::Alloc, Op::Free],
            "heap operations",
            &scope,
        ),
        rt_check("rt.locks", runs, &[Op::Lock], "mutex locks", &scope),
        blocking,
    ]
}

fn output_checks(s: &Subject, runs: &[Run]) -> Vec<Check> {
    let mut out = Vec::new();
    let nonfinite: u64 = runs
        .iter()
        .map(|r| r.sound.nonfinite + r.silence.nonfinite)
        .sum();
    let samples: u64 = runs
        .iter()
        .map(|r| r.sound.samples + r.silence.samples)
        .sum();
    let first = |f: &dyn Fn(&Run) -> bool| {
        runs.iter()
            .find(|r| f(r))
            .map(|r| format!(" (first at {})", r.setting()))
            .unwrap_or_default()
    };
    out.push(if nonfinite == 0 {
        Check::new(
            "output.finite",
            Verdict::Pass,
            format!("all {samples} samples checked are finite"),
        )
        .value(0.0)
    } else {
        Check::new(
            "output.finite",
            Verdict::Fail,
            format!(
                "{nonfinite} of {samples} samples are NaN or infinite{}",
                first(&|r| r.sound.nonfinite + r.silence.nonfinite > 0)
            ),
        )
        .value(nonfinite as f64)
    });
    let sub: u64 = runs
        .iter()
        .map(|r| r.sound.subnormal + r.silence.subnormal)
        .sum();
    out.push(if sub == 0 {
        Check::new(
            "output.subnormal",
            Verdict::Pass,
            "no subnormal sample, on noise or on the silence after it",
        )
        .value(0.0)
    } else {
        Check::new(
            "output.subnormal",
            Verdict::Warn,
            format!(
                "{sub} subnormal samples{} (they slow down whatever processes them next)",
                first(&|r| r.sound.subnormal + r.silence.subnormal > 0)
            ),
        )
        .value(sub as f64)
    });
    let expected = s.has_audio_in() || s.is_instrument();
    let loudest = runs.iter().map(|r| r.sound.peak).fold(0.0f32, f32::max);
    let db = 20.0 * (loudest.max(1e-12) as f64).log10();
    let input = if s.has_audio_in() {
        "noise at −20 dBFS in"
    } else {
        "notes played"
    };
    out.push(if !expected {
        Check::new(
            "output.signal",
            Verdict::Skip,
            "no audio input and no MIDI input: nothing to expect",
        )
    } else if loudest < SILENT {
        Check::new(
            "output.signal",
            Verdict::Warn,
            format!("silent ({db:.0} dBFS peak) with {input}, at every setting"),
        )
        .value(db)
    } else {
        Check::new(
            "output.signal",
            Verdict::Pass,
            format!("{db:.1} dBFS peak with {input}"),
        )
        .value(db)
    });
    out
}
