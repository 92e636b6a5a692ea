//! `xrunlab latencytest`: Senoner's benchmark. A real-time loop takes t1, burns a share of
//! one audio fragment, takes t2, writes the fragment to a device that blocks until one of its
//! `fragments` slots is free (as an OSS/ALSA blocking write does), and takes t3; first with
//! the machine idle, then under each stress class in turn.
//!
//! This is its own loop rather than the engine on the virtual driver: the engine is *pulled*
//! by period interrupts (it sleeps until a period starts, then must finish by a deadline),
//! while Senoner's player *pushes* into a buffer and is paced by the blocking write. Those
//! are different timing models with different numbers (t3 − t1 includes the time blocked in
//! the write), so the loop is written directly on the rt toolbox: the device's fragment
//! times come from `DeviceClock::t_ideal` (exact, drift-free), the work from the calibrated
//! `burn` plugin, the blocking from absolute `clock_nanosleep`.

use crate::common::stats::{self, Summary};
use crate::common::DeviceParams;
use crate::common::Status;
use crate::driver::device::DeviceClock;
use crate::dsp::burn::Burn;
use crate::dsp::{Plugin, PluginContext};
use crate::error::{Error, Result};
use crate::measure::session::{Outcome, Session};
use crate::rt::thread::{spawn_rt, ThreadSpec};
use crate::rt::{clock, interrupt, Policy};
use crate::stress::session::SkippedPreset;
use crate::stress::{Preset, StressRecord, StressSpec};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The stress classes of Senoner's latencytest (graphics first, as there), plus `cpu`.
pub const DEFAULT_CLASSES: &str = "graphics,proc,disk-write,disk-copy,disk-read,cpu";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LatencytestConfig {
    pub rate: u32,
    pub fragment_frames: u32,
    /// Fragments the device buffers (its buffer is `fragments × fragment_frames`).
    pub fragments: u32,
    /// Work per cycle as a share of one fragment's duration, in percent.
    pub burn_pct: f64,
    pub phase_duration_ns: u64,
    /// Stress classes after the idle phase, in order (`graphics` or a load preset name).
    pub classes: Vec<String>,
    pub policy: Policy,
    /// Pin the loop to this CPU; None = not pinned.
    pub cpu: Option<usize>,
    pub mlock: bool,
    /// Pin the loop to these CPUs (`--cpus`); empty: `cpu`, else not pinned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpus: Vec<usize>,
}

impl Default for LatencytestConfig {
    fn default() -> Self {
        LatencytestConfig {
            rate: 44_100,
            fragment_frames: 64,
            fragments: 3,
            burn_pct: 80.0,
            phase_duration_ns: 10 * clock::NS_PER_S,
            classes: DEFAULT_CLASSES.split(',').map(String::from).collect(),
            policy: Policy::fifo(90),
            cpu: None,
            mlock: true,
            cpus: Vec::new(),
        }
    }
}

impl LatencytestConfig {
    pub fn params(&self) -> DeviceParams {
        DeviceParams {
            rate: self.rate,
            frames: self.fragment_frames,
            periods: self.fragments,
        }
    }

    pub fn fragment_ns(&self) -> u64 {
        self.params().period_ns()
    }

    pub fn buffer_ns(&self) -> u64 {
        self.fragment_ns() * self.fragments as u64
    }

    pub fn burn_nominal_ns(&self) -> u64 {
        (self.fragment_ns() as f64 * self.burn_pct / 100.0).round() as u64
    }

    pub fn validate(&self) -> Result<()> {
        if !(8_000..=384_000).contains(&self.rate) {
            return Err(Error::usage(format!(
                "--rate {} is outside 8000..384000",
                self.rate
            )));
        }
        if !(1..=8192).contains(&self.fragment_frames) {
            return Err(Error::usage("--fragment-frames must be within 1..8192"));
        }
        if !(2..=64).contains(&self.fragments) {
            return Err(Error::usage(
                "--fragments must be within 2..64 (one fragment plays while the next is written)",
            ));
        }
        if !(0.0..=100.0).contains(&self.burn_pct) {
            return Err(Error::usage("--burn must be within 0..100 %"));
        }
        if self.phase_duration_ns < 100_000_000 {
            return Err(Error::usage("--phase-duration must be at least 100ms"));
        }
        for c in &self.classes {
            if c != "graphics" {
                c.parse::<Preset>()?;
            }
        }
        self.policy.validate()
    }
}

/// Per-cycle data for diagrams, ns: t1 from the phase start, t2 − t1 and t3 − t1.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Series {
    pub t1_ns: Vec<u64>,
    pub burn_ns: Vec<u64>,
    pub loop_ns: Vec<u64>,
    /// Cycles beyond the preallocated series (counted in the statistics, not stored).
    pub dropped: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Phase {
    /// `idle` or the stress class.
    pub name: String,
    pub elapsed_ns: u64,
    pub cycles: u64,
    /// t3 − t1: one loop, work plus the (blocking) write.
    pub loop_ns: Summary,
    /// t2 − t1: the work alone.
    pub burn_ns: Summary,
    /// max |t2 − t1 − nominal burn|.
    pub burn_max_dev_ns: u64,
    /// Loops longer than the buffer time (Senoner's "overruns": an audible dropout).
    pub overruns: u64,
    /// Loops longer than one fragment.
    pub over_fragment: u64,
    /// Writes that came after the device had run out of data (it restarts from that write).
    pub underruns: u64,
    /// Share of cycles with |t2 − t1 − nominal| ≤ 0.1 ms and ≤ 1 ms.
    pub burn_within_100us_pct: f64,
    pub burn_within_1ms_pct: f64,
    /// Share of cycles with |t3 − t1 − fragment| ≤ 0.1 ms and ≤ 1 ms.
    pub loop_within_100us_pct: f64,
    pub loop_within_1ms_pct: f64,
    pub stress: Option<StressRecord>,
    pub series: Series,
    /// `--forensics`: who took the time of its overruns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forensics: Option<crate::trace::Forensics>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LatencytestResult {
    pub fragment_ns: u64,
    pub buffer_ns: u64,
    pub burn_nominal_ns: u64,
    pub phases: Vec<Phase>,
    /// Classes that could not run here, with the reason.
    pub skipped: Vec<SkippedPreset>,
    #[serde(default)]
    pub interrupted: bool,
    /// `--forensics`: the phases' sections merged (`phases[].forensics` has each).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forensics: Option<crate::trace::Forensics>,
}

/// Why X11 graphics stress cannot run here, or the drawing command to run.
pub fn graphics_stressor() -> std::result::Result<Vec<String>, String> {
    let display = std::env::var("DISPLAY").unwrap_or_default();
    if display.is_empty() {
        return Err("no display: $DISPLAY is not set".into());
    }
    // Only local displays (":N" or "unix:N") are checked by their socket.
    let num = display
        .rsplit_once(':')
        .map(|(_, n)| n.split('.').next().unwrap_or("").to_string())
        .unwrap_or_default();
    let sock = format!("/tmp/.X11-unix/X{num}");
    if std::os::unix::net::UnixStream::connect(&sock).is_err() {
        return Err(format!("display {display} is not reachable ({sock})"));
    }
    for (exe, args) in [
        ("x11perf", &["-repeat", "1000000", "-rect500"][..]),
        ("glxgears", &[][..]),
    ] {
        if let Some(p) = which(exe) {
            let mut v = vec![p];
            v.extend(args.iter().map(|s| s.to_string()));
            return Ok(v);
        }
    }
    Err("no X11 drawing client (x11perf or glxgears) is installed".into())
}

fn which(exe: &str) -> Option<String> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(exe))
            .find(|p| p.is_file())
            .map(|p| p.display().to_string())
    })
}

/// What one phase's loop measured (before summarising).
struct Raw {
    /// The loop thread's id, for forensics.
    tid: i32,
    series: Series,
    cycles: u64,
    underruns: u64,
    start_ns: u64,
    end_ns: u64,
}

/// The real-time loop of one phase. Everything is allocated before the first cycle.
fn phase_loop(cfg: &LatencytestConfig, mut series: Series) -> Raw {
    let params = cfg.params();
    let n = params.periods as u64;
    let ctx = PluginContext {
        rate: cfg.rate,
        max_frames: cfg.fragment_frames as usize,
    };
    let mut burn = Burn::new(cfg.burn_pct, &ctx);
    let mut left = vec![0.0f32; ctx.max_frames];
    let mut right = vec![0.0f32; ctx.max_frames];
    let cap = series.t1_ns.capacity();
    let start = clock::monotonic_ns();
    let end = start + cfg.phase_duration_ns;
    // The device starts playing at the first write and restarts after running dry.
    let mut dev: Option<DeviceClock> = None;
    let mut written = 0u64;
    let (mut cycles, mut underruns) = (0u64, 0u64);
    loop {
        let t1 = clock::monotonic_ns();
        if t1 >= end || interrupt::requested() {
            break;
        }
        burn.process(&mut left, &mut right);
        let t2 = clock::monotonic_ns();
        match &dev {
            Some(d) if t2 > d.t_ideal(written) => {
                // Fragment `written` should have started playing already: the device ran dry.
                underruns += 1;
                dev = Some(DeviceClock::new(params, t2));
                written = 0;
            }
            Some(d) if written >= n => {
                // Blocks until fragment written − n has played and freed its slot.
                let free = d.t_ideal(written - n + 1);
                if free > t2 {
                    clock::sleep_until_ns(free);
                }
            }
            Some(_) => {}
            None => {
                dev = Some(DeviceClock::new(params, t2));
                written = 0;
            }
        }
        written += 1;
        let t3 = clock::monotonic_ns();
        cycles += 1;
        if series.t1_ns.len() < cap {
            series.t1_ns.push(t1 - start);
            series.burn_ns.push(t2 - t1);
            series.loop_ns.push(t3 - t1);
        } else {
            series.dropped += 1;
        }
    }
    Raw {
        tid: clock::gettid(),
        series,
        cycles,
        underruns,
        start_ns: start,
        end_ns: clock::monotonic_ns(),
    }
}

fn summarise(v: &[u64]) -> Summary {
    let mut h = stats::new_ns_histogram();
    let (mut min, mut max, mut sum) = (u64::MAX, 0u64, 0u128);
    for &x in v {
        stats::record_clamped(&mut h, x);
        min = min.min(x);
        max = max.max(x);
        sum += x as u128;
    }
    Summary::of(&h).with_exact(min, max, sum)
}

fn pct(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// Phase statistics from the loop's raw series (pure: tested on synthetic series).
pub fn analyse(
    cfg: &LatencytestConfig,
    name: &str,
    series: Series,
    cycles: u64,
    underruns: u64,
    elapsed_ns: u64,
) -> Phase {
    let frag = cfg.fragment_ns();
    let buffer = cfg.buffer_ns();
    let nominal = cfg.burn_nominal_ns();
    let dev = |x: u64, c: u64| x.abs_diff(c);
    let within = |v: &[u64], c: u64, tol: u64| v.iter().filter(|&&x| dev(x, c) <= tol).count();
    let n = series.loop_ns.len();
    Phase {
        name: name.to_string(),
        elapsed_ns,
        cycles,
        loop_ns: summarise(&series.loop_ns),
        burn_ns: summarise(&series.burn_ns),
        burn_max_dev_ns: series
            .burn_ns
            .iter()
            .map(|&b| dev(b, nominal))
            .max()
            .unwrap_or(0),
        overruns: series.loop_ns.iter().filter(|&&l| l > buffer).count() as u64,
        over_fragment: series.loop_ns.iter().filter(|&&l| l > frag).count() as u64,
        underruns,
        burn_within_100us_pct: pct(within(&series.burn_ns, nominal, 100_000), n),
        burn_within_1ms_pct: pct(within(&series.burn_ns, nominal, 1_000_000), n),
        loop_within_100us_pct: pct(within(&series.loop_ns, frag, 100_000), n),
        loop_within_1ms_pct: pct(within(&series.loop_ns, frag, 1_000_000), n),
        stress: None,
        series,
        forensics: None,
    }
}

/// The overruns of a phase as forensic windows: `[t1, t3]` of each loop longer than the
/// buffer (the thread is running from t1: the whole loop is "after the wake-up").
fn overrun_windows(
    cfg: &LatencytestConfig,
    tid: i32,
    start_ns: u64,
    s: &Series,
) -> Vec<crate::trace::Window> {
    let buffer = cfg.buffer_ns();
    let pinned = match (cfg.cpu, cfg.cpus.as_slice()) {
        (Some(c), []) => Some(c),
        (None, [c]) => Some(*c),
        _ => None,
    };
    s.t1_ns
        .iter()
        .zip(&s.loop_ns)
        .enumerate()
        .filter(|(_, (_, &l))| l > buffer)
        .map(|(i, (&t1, &l))| crate::trace::Window {
            id: i as u64,
            tid,
            cpu: pinned,
            t_ideal_ns: start_ns + t1,
            wake_ns: start_ns + t1,
            end_ns: start_ns + t1 + l,
            own_cpu_ns: None,
            shared_thread: false,
        })
        .collect()
}

fn run_phase(
    cfg: &LatencytestConfig,
    name: &str,
    rec: Option<crate::trace::Recorder>,
    warnings: &mut Vec<String>,
) -> Result<Phase> {
    // Room for twice the nominal cycle count: the loop is paced by the device, and only the
    // few cycles after a restart (the buffer refilling) are shorter than a fragment.
    let cap = (cfg.phase_duration_ns / cfg.fragment_ns().max(1)) as usize * 2 + 1024;
    let series = Series {
        t1_ns: Vec::with_capacity(cap),
        burn_ns: Vec::with_capacity(cap),
        loop_ns: Vec::with_capacity(cap),
        dropped: 0,
    };
    let c = cfg.clone();
    let t = spawn_rt(
        ThreadSpec {
            name: "xrl-latencytest".into(),
            policy: cfg.policy,
            cpus: cfg
                .cpu
                .into_iter()
                .chain(cfg.cpus.iter().copied())
                .collect(),
        },
        move || phase_loop(&c, series),
    )?;
    let raw = t.join();
    let forensics = rec.map(|rec| {
        let windows = overrun_windows(cfg, raw.tid, raw.start_ns, &raw.series);
        let (f, w) = rec.explain("overrun", &windows, &[raw.tid]);
        warnings.extend(w);
        f
    });
    let mut phase = analyse(
        cfg,
        name,
        raw.series,
        raw.cycles,
        raw.underruns,
        raw.end_ns - raw.start_ns,
    );
    phase.forensics = forensics;
    Ok(phase)
}

/// The outcome of `latencytest`.
pub type LatencytestOutcome = Outcome<LatencytestConfig, LatencytestResult>;

/// `xrunlab latencytest`: the idle phase and then one phase per class. The session's stress
/// supplies every option of the phases' stress but the presets (directory, file size,
/// backend, CPUs, stressor binary); each phase's stressors are started before it and stopped
/// after it, on every path. A signal ends the current phase early and skips the rest
/// (`interrupted`). With forensics a recording starts before every phase, the phase's
/// overruns are explained after it (`phases[].forensics`) and the sections are merged.
pub fn run(cfg: &LatencytestConfig, session: &mut Session) -> Result<LatencytestOutcome> {
    let mut warnings = vec![
        "phases after idle were measured under stress: each phase's `stress` says what ran"
            .to_string(),
    ];
    cfg.validate()?;
    let _mlock = if cfg.mlock {
        Some(crate::rt::memory::MemoryLock::acquire()?)
    } else {
        None
    };
    // Calibrate the burn outside the timed phases (the first Burn::new measures the CPU).
    let _ = crate::dsp::burn::ns_per_unit();
    let mut out = LatencytestResult {
        fragment_ns: cfg.fragment_ns(),
        buffer_ns: cfg.buffer_ns(),
        burn_nominal_ns: cfg.burn_nominal_ns(),
        phases: Vec::new(),
        skipped: Vec::new(),
        interrupted: false,
        forensics: None,
    };
    let mut plan: Vec<(String, Option<StressSpec>)> = vec![("idle".into(), None)];
    for class in &cfg.classes {
        let mut spec = session.stress().clone();
        if class == "graphics" {
            match graphics_stressor() {
                Ok(argv) => {
                    spec.presets = Vec::new();
                    spec.commands = vec![argv];
                }
                Err(reason) => {
                    out.skipped.push(SkippedPreset {
                        preset: class.clone(),
                        reason,
                    });
                    continue;
                }
            }
        } else {
            spec.presets = vec![class.parse()?];
            spec.commands = Vec::new();
        }
        plan.push((class.clone(), Some(spec)));
    }
    let secs = cfg.phase_duration_ns.div_ceil(clock::NS_PER_S);
    session.progress().set_unit(crate::progress::Unit::Seconds);
    session.progress().set_total(secs * plan.len() as u64);
    let idle = StressSpec::default();
    for (i, (name, spec)) in plan.iter().enumerate() {
        if interrupt::requested() {
            out.interrupted = true;
            break;
        }
        session.progress().set_message(name);
        session.progress().set_position(secs * i as u64);
        let cpus: Vec<usize> = cfg
            .cpu
            .into_iter()
            .chain(cfg.cpus.iter().copied())
            .collect();
        let (mut phase, loaded) = session.loaded(
            Some(spec.as_ref().unwrap_or(&idle)),
            Duration::from_nanos(cfg.phase_duration_ns),
            None,
            |s| {
                let rec = s.start_trace(&cpus, cfg.phase_duration_ns);
                run_phase(cfg, name, rec, &mut warnings)
            },
        )?;
        phase.stress = loaded.stress;
        out.phases.push(phase);
        if interrupt::requested() {
            out.interrupted = true;
            break;
        }
    }
    session.progress().finish();
    out.forensics = session.merged(
        out.phases.iter().filter_map(|p| p.forensics.as_ref()),
        &mut warnings,
    );
    let status = if out.interrupted {
        Status::Interrupted
    } else {
        Status::Complete
    };
    Ok(Outcome {
        status,
        config: cfg.clone(),
        results: out,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> LatencytestConfig {
        LatencytestConfig::default()
    }

    #[test]
    fn defaults_reproduce_the_seed_buffer() {
        let c = cfg();
        // 64 frames at 44.1 kHz = 1451 µs; three of them = 4.35 ms.
        assert_eq!(c.fragment_ns(), 1_451_247);
        assert_eq!(c.buffer_ns(), 4_353_741);
        assert_eq!(c.burn_nominal_ns(), 1_160_998);
        c.validate().unwrap();
    }

    #[test]
    fn analysis_counts_overruns_and_tolerance_bands() {
        let c = cfg();
        let f = c.fragment_ns();
        let b = c.burn_nominal_ns();
        let s = Series {
            t1_ns: vec![0, f, 2 * f, 3 * f],
            burn_ns: vec![b, b + 50_000, b + 500_000, b + 2_000_000],
            // On time, 0.5 ms late, beyond the buffer, one fragment exactly.
            loop_ns: vec![f + 10_000, f + 500_000, c.buffer_ns() + 1, f],
            dropped: 0,
        };
        let p = analyse(&c, "idle", s, 4, 1, 4 * f);
        assert_eq!(p.cycles, 4);
        assert_eq!(p.overruns, 1);
        assert_eq!(p.over_fragment, 3);
        assert_eq!(p.underruns, 1);
        assert_eq!(p.burn_max_dev_ns, 2_000_000);
        assert_eq!(p.burn_within_100us_pct, 50.0);
        assert_eq!(p.burn_within_1ms_pct, 75.0);
        assert_eq!(p.loop_within_100us_pct, 50.0);
        assert_eq!(p.loop_within_1ms_pct, 75.0);
        assert_eq!(p.loop_ns.max, c.buffer_ns() + 1);
    }

    #[test]
    fn bad_configs_are_usage_errors() {
        for bad in [
            LatencytestConfig {
                fragments: 1,
                ..cfg()
            },
            LatencytestConfig {
                burn_pct: 150.0,
                ..cfg()
            },
            LatencytestConfig {
                classes: vec!["nonsense".into()],
                ..cfg()
            },
            LatencytestConfig {
                phase_duration_ns: 1,
                ..cfg()
            },
        ] {
            assert_eq!(bad.validate().unwrap_err().exit_code(), 2, "{bad:?}");
        }
    }
}
