//! Build the verdict from the results there are (docs/methods.md "Verdict"): a
//! prediction per buffer size from every latency result (idle and stressed), measured xruns
//! from `run` results, headroom from `load` grids, round-trip latency from `rtl`, the causes
//! of the xruns every result saw, and `check`'s findings ranked by what the measurements say
//! they would help.

pub use super::decide::measured_rate;
use super::{xruns_and_skipped, Input, Loaded};
use crate::driver::DriverKind;
use crate::error::Result;
use crate::measure::predict::{self, CostInput, LatencyInput, Outlook, PredictConfig, PredictRow};
use crate::measure::run::XrunCounts;
use crate::results::verdict::{
    Advice, Basis, Calibration, CauseLine, Condition, CulpritLine, MeasuredRun, PluginHeadroom,
    Predicted, VerdictConfig, VerdictResults, VerdictRow,
};
use crate::results::Body;
use crate::system::check::Verdict as CheckVerdict;

/// What an interrupted verdict leaves: one over part of the inputs would pass for the whole.
pub const NOTHING_JUDGED: &str = "no verdict written";

/// The compute time the predictions assume when no `--cost` or `--load-pct` is given: a
/// period half full of DSP, a common ceiling for a JACK session.
pub const DEFAULT_LOAD_PCT: f64 = 50.0;

/// The largest size of the default range, and the largest the verdict adds past it while
/// nothing meets the target (docs/methods.md "Verdict").
pub const DEFAULT_LARGEST: u32 = 1024;
pub const MAX_LISTED: u32 = 4096;

/// What the user asks of a verdict; [`settle`] fills in the rest from the results.
pub struct Options {
    pub rate: Option<u32>,
    pub periods: u32,
    pub buffers: Vec<u32>,
    pub target_per_hour: f64,
    pub load_pct: Option<f64>,
    pub cost_file: Option<String>,
    pub fail_if_above: Option<u32>,
    pub holds: predict::Holds,
}

impl Options {
    /// `xrunlab verdict DIR` without options: 2 periods, 16..1024 frames, 1/h.
    pub fn defaults() -> Options {
        Options {
            rate: None,
            periods: 2,
            buffers: (4..=DEFAULT_LARGEST.ilog2()).map(|e| 1u32 << e).collect(),
            target_per_hour: 1.0,
            load_pct: None,
            cost_file: None,
            fail_if_above: None,
            holds: predict::Holds::default(),
        }
    }
}

/// The configuration: the rate (asked, the cost's, the results', else 48000; a cost measured
/// at another rate than asked is refused) and the buffer sizes asked plus those a run or a
/// load grid measured at that rate.
pub fn settle(inputs: &[Input], cost: &CostInput, o: Options) -> Result<VerdictConfig> {
    let rate = match (o.rate, cost.rate) {
        (Some(r), Some(c)) if r != c => {
            return Err(crate::error::Error::usage(format!(
                "--cost was measured at {c} Hz, not the {r} Hz of --rate"
            )))
        }
        (Some(r), _) | (None, Some(r)) => r,
        (None, None) => rate_of(inputs).unwrap_or(48_000),
    };
    crate::common::device::check_rate(rate)?;
    let mut buffers = o.buffers;
    for b in docs(inputs) {
        match b {
            Body::Run { config, .. } if config.rate == rate => buffers.push(config.buffer_frames),
            Body::Load { results, config } if config.rate == rate => {
                buffers.extend(results.cells.iter().map(|c| c.buffer_frames))
            }
            _ => {}
        }
    }
    buffers.sort_unstable();
    buffers.dedup();
    Ok(VerdictConfig {
        inputs: inputs
            .iter()
            .map(|i| i.path.display().to_string())
            .collect(),
        rate,
        periods: o.periods,
        buffers,
        target_per_hour: o.target_per_hour,
        load_pct: o.load_pct,
        cost_file: o.cost_file,
        fail_if_above: o.fail_if_above,
        holds: o.holds,
    })
}

/// The sizes the verdict judged, in its config: those asked plus the ones [`build`] added past
/// the range while nothing met the target (a result lists one row per configured size).
pub fn list_rows(cfg: &mut VerdictConfig, v: &VerdictResults) {
    cfg.buffers = v.rows.iter().map(|r| r.buffer_frames).collect();
}

/// The compute time a verdict assumes without `--cost` or `--load-pct`.
pub fn default_cost() -> CostInput {
    let mut c = CostInput::load_pct(DEFAULT_LOAD_PCT);
    c.description =
        format!("{DEFAULT_LOAD_PCT} % of each period (the default; --load-pct or --cost sets it)");
    c
}

/// The sample rate the results were measured at: the first one that records one.
pub fn rate_of(inputs: &[Input]) -> Option<u32> {
    docs(inputs).find_map(|b| match b {
        Body::Run { config, .. } => Some(config.rate),
        Body::Load { config, .. } => Some(config.rate),
        Body::Rtl { config, .. } => Some(config.rate),
        Body::Latency { config, .. } => config.audio_period.map(|a| a.rate),
        _ => None,
    })
}

fn docs(inputs: &[Input]) -> impl Iterator<Item = &Body> {
    inputs.iter().filter_map(|i| match &i.item {
        Loaded::Doc(d) => Some(&d.body),
        Loaded::Other { .. } => None,
    })
}

fn name(i: &Input) -> String {
    i.name()
}

/// Worse first: fails, then marginal, then ok; within one, the higher episode rate.
fn worse(a: &PredictRow, b: &PredictRow) -> bool {
    let rank = |o: Outlook| match o {
        Outlook::Fails => 2,
        Outlook::Marginal => 1,
        Outlook::Ok => 0,
    };
    (rank(a.outlook), a.episodes_per_hour.high) > (rank(b.outlook), b.episodes_per_hour.high)
}

fn predicted(label: &str, r: &PredictRow) -> Predicted {
    Predicted {
        latency: label.to_string(),
        xruns_per_hour: r.xruns_per_hour,
        episodes_per_hour: r.episodes_per_hour,
        outlook: r.outlook,
        measure_for_ns: r.measure_for_ns,
        overload: r.overload,
    }
}

/// Add a latency input, or pool it with one measured the same way (same condition, stress,
/// interval and CPUs): the suite extends a measurement that was too short with more of the
/// same, and two stretches of one measurement are one longer measurement.
fn pool_or_push(lat: &mut Vec<(LatencyInput, Condition)>, l: LatencyInput, c: Condition) {
    let same = |(m, mc): &&mut (LatencyInput, Condition)| {
        *mc == c
            && m.info.source == l.info.source
            && m.info.stress == l.info.stress
            && m.info.interval_ns == l.info.interval_ns
            && m.info.cpus == l.info.cpus
    };
    let Some((m, _)) = lat.iter_mut().find(|x| same(x)) else {
        lat.push((l, c));
        return;
    };
    m.absorb(l);
    let i = &mut m.info;
    i.label = match i.label.split_once(" + ") {
        Some((first, more)) => {
            let n: u32 = more
                .split(' ')
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or(1);
            format!("{first} + {} more", n + 1)
        }
        None => format!("{} + 1 more", i.label),
    };
}

/// The verdict over `inputs` (their latency results must hold histograms: an error names the
/// file otherwise, exit 2).
pub fn build(cfg: &VerdictConfig, inputs: &[Input], cost: &CostInput) -> Result<VerdictResults> {
    // Predictions, one table per latency input at the one period count.
    let mut lat: Vec<(LatencyInput, Condition)> = Vec::new();
    for i in inputs {
        crate::rt::interrupt::check(NOTHING_JUDGED)?;
        if let Loaded::Doc(d) = &i.item {
            if let Body::Latency { config, results } = &d.body {
                let stem = i
                    .path
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_else(|| name(i));
                for l in LatencyInput::from_result(&i.path, &stem, config, results, None, None)? {
                    let c = if l.info.stress.is_empty() {
                        Condition::Idle
                    } else {
                        Condition::Stressed
                    };
                    pool_or_push(&mut lat, l, c);
                }
            }
        }
    }
    let pcfg = PredictConfig {
        latency: lat.iter().map(|(l, _)| l.info.file.clone()).collect(),
        cost_file: cfg.cost_file.clone(),
        load_pct: cfg.load_pct,
        instances: None,
        cell: None,
        cpu: None,
        interval_ns: None,
        rate: cfg.rate,
        buffers: cfg.buffers.clone(),
        periods: vec![cfg.periods],
        target_per_hour: cfg.target_per_hour,
        confidence: predict::CONFIDENCE,
        holds: cfg.holds,
    };
    let judged_on = if lat.iter().any(|(_, c)| *c == Condition::Stressed) {
        Some(Condition::Stressed)
    } else if lat.is_empty() {
        None
    } else {
        Some(Condition::Idle)
    };

    // Each size keeps only the worst prediction per condition: a table per latency input
    // (every size for every input) held hundreds of megabytes for a verdict over a suite of
    // a thousand results.
    let row_at = |frames: u32| -> Result<VerdictRow> {
        crate::rt::interrupt::check(NOTHING_JUDGED)?;
        let period_ns = frames as f64 * 1e9 / cfg.rate as f64;
        let points = cost.compute.at(frames, period_ns);
        let mut idle: Option<(&str, PredictRow)> = None;
        let mut stressed: Option<(&str, PredictRow)> = None;
        for (l, c) in &lat {
            let r = predict::row(&l.data, &points, frames, cfg.periods, &pcfg);
            let slot = match c {
                Condition::Idle => &mut idle,
                Condition::Stressed => &mut stressed,
            };
            if slot.as_ref().is_none_or(|(_, s)| worse(&r, s)) {
                *slot = Some((l.info.label.as_str(), r));
            }
        }
        let mean: f64 = points.iter().map(|p| p.probability * p.ns).sum();
        let (rtl_model_ms, rtl_measured_ms) = rtl_at(inputs, frames, cfg.periods, cfg.rate);
        Ok(VerdictRow {
            buffer_frames: frames,
            period_ms: period_ns / 1e6,
            idle: idle.map(|(l, r)| predicted(l, &r)),
            stressed: stressed.map(|(l, r)| predicted(l, &r)),
            measured: measured_runs(inputs, frames, cfg.rate),
            free_pct: (100.0 * (1.0 - mean / period_ns)).max(0.0),
            plugins: headroom(inputs, frames),
            rtl_model_ms,
            rtl_measured_ms,
            // decide::decide fills these in over all the rows.
            meets_target: None,
            checked: None,
            basis: None,
            calibration: None,
        })
    };
    let judge = super::decide::Judge {
        on: judged_on,
        periods: cfg.periods,
        target_per_hour: cfg.target_per_hour,
    };
    let mut rows = cfg
        .buffers
        .iter()
        .map(|&f| row_at(f))
        .collect::<Result<Vec<_>>>()?;
    super::decide::decide(&mut rows, judge);
    // Past the default range while nothing meets, so that the answer names the smallest size
    // that holds or says that none up to MAX_LISTED does.
    while judged_on.is_some() && !rows.iter().any(|r| r.meets_target == Some(true)) {
        match rows.last().map(|r| r.buffer_frames) {
            Some(l) if (DEFAULT_LARGEST..MAX_LISTED).contains(&l) => {
                rows.push(row_at((l + 1).next_power_of_two())?);
                super::decide::decide(&mut rows, judge);
            }
            _ => break,
        }
    }
    let recommended_frames = rows
        .iter()
        .find(|r| r.meets_target == Some(true))
        .map(|r| r.buffer_frames);
    let causes = causes(inputs);
    let culprits = culprits(inputs);
    let advice = advice(inputs, &rows, &causes, judged_on);
    let gaps = gaps(inputs, &rows, judged_on, cfg);
    let failed_threshold = match cfg.fail_if_above {
        Some(limit) => recommended_frames.is_none_or(|f| f > limit),
        None => false,
    };
    let mut headline = super::answer::sentence(cfg, &rows, recommended_frames, judged_on);
    if not_realtime(inputs) {
        headline = format!("{}: {headline}", super::answer::NOT_REALTIME);
    }
    let next = super::answer::next_command(
        &rows,
        recommended_frames,
        judged_on,
        super::answer::suite_dir(inputs),
        &again(inputs, judged_on),
    );
    Ok(VerdictResults {
        headline,
        next,
        judged_on,
        recommended_frames,
        compute: cost.description.clone(),
        rows,
        causes,
        culprits,
        advice,
        gaps,
        failed_threshold,
    })
}

/// The options that measure the judged condition's latency again (`answer::again`): the
/// first measured one's, else the protocol's stress for a stressed verdict.
fn again(inputs: &[Input], on: Option<Condition>) -> String {
    let stressed = on == Some(Condition::Stressed);
    docs(inputs)
        .find_map(|b| match b {
            Body::Latency { config, .. }
                if config.source == crate::measure::latency::LatencySource::Measured
                    && config.stress.is_empty() != stressed =>
            {
                Some(super::answer::again(config))
            }
            _ => None,
        })
        .unwrap_or_else(|| if stressed { " --stress paper" } else { "" }.into())
}

/// Some latency behind the predictions was measured without a real-time policy.
fn not_realtime(inputs: &[Input]) -> bool {
    docs(inputs).any(|b| match b {
        Body::Latency { config, .. } => {
            config.source == crate::measure::latency::LatencySource::Measured
                && config.policy.as_ref().is_some_and(|p| !p.is_realtime())
        }
        _ => false,
    })
}

fn stress_of(r: &crate::measure::run::RunResults, cfg_stress: &[String]) -> Vec<String> {
    match &r.stress {
        Some(s) => s.presets.clone(),
        None => cfg_stress.to_vec(),
    }
}

fn measured_runs(inputs: &[Input], frames: u32, rate: u32) -> Vec<MeasuredRun> {
    let mut out = Vec::new();
    for i in inputs {
        let Loaded::Doc(d) = &i.item else { continue };
        let Body::Run { config, results } = &d.body else {
            continue;
        };
        if config.buffer_frames != frames || config.rate != rate {
            continue;
        }
        let hours = results.periods_elapsed as f64 * results.period_ns as f64 / 3.6e12;
        if hours <= 0.0 {
            continue;
        }
        let xruns = xruns_and_skipped(results);
        let span_ns = results.periods_elapsed.saturating_mul(results.period_ns);
        let events = &results.xrun_events;
        let windows = crate::report::decide::windows_of(
            events.iter().map(|e| e.at_ns),
            span_ns,
            events.len() as u64 == results.xruns.total,
        );
        out.push(MeasuredRun {
            file: name(i),
            stress: stress_of(results, &config.stress),
            periods: config.periods,
            hours,
            xruns,
            per_hour: measured_rate(xruns, hours),
            dsp_load_mean_pct: results.dsp_load_pct.mean,
            windows,
        });
    }
    out
}

fn headroom(inputs: &[Input], frames: u32) -> Vec<PluginHeadroom> {
    docs(inputs)
        .filter_map(|b| match b {
            Body::Load { results, .. } => Some(results),
            _ => None,
        })
        .flat_map(|r| r.cells.iter().filter(|c| c.buffer_frames == frames))
        .map(|c| PluginHeadroom {
            plugin: c.plugin.clone(),
            tracks: c.tracks,
            max_per_track: c.max_per_track,
            capped: c.capped,
            dsp_load_pct: c.dsp_load_pct.mean,
        })
        .collect()
}

/// The modelled round trip (an rtl result's model row, else n·P alone) and the measured one.
fn rtl_at(inputs: &[Input], frames: u32, periods: u32, rate: u32) -> (f64, Option<f64>) {
    let mut model = None;
    let mut measured = None;
    for b in docs(inputs) {
        let Body::Rtl { config, results } = b else {
            continue;
        };
        if config.rate != rate {
            continue;
        }
        if model.is_none() && config.periods == periods {
            model = results
                .model
                .iter()
                .find(|m| m.buffer_frames == frames)
                .map(|m| m.rtl_ms);
        }
        // The virtual and sim loops check the method, not the machine's converters.
        let real = matches!(config.driver, Some(DriverKind::Jack | DriverKind::Alsa));
        if real && measured.is_none() && config.buffers.first() == Some(&frames) {
            measured = results.measured.as_ref().and_then(|m| m.delay_ms);
        }
    }
    let buffering = periods as f64 * frames as f64 * 1e3 / rate as f64;
    (model.unwrap_or(buffering), measured)
}

fn add(counts: &mut [(String, u64, Vec<String>)], cause: &str, n: u64, file: &str) {
    if n == 0 {
        return;
    }
    if let Some(c) = counts.iter_mut().find(|c| c.0 == cause) {
        c.1 = c.1.saturating_add(n);
        if !c.2.iter().any(|f| f == file) {
            c.2.push(file.to_string());
        }
    }
}

fn add_counts(counts: &mut [(String, u64, Vec<String>)], x: &XrunCounts, file: &str) {
    add(counts, "late-wakeup", x.late_wakeup, file);
    add(counts, "overload", x.overload, file);
    add(counts, "interference", x.interference, file);
}

const MEANINGS: [(&str, &str); 3] = [
    (
        "late-wakeup",
        "the audio thread woke after its deadline had begun to run out: scheduling latency (IRQ handlers, non-preemptible kernel sections, other RT tasks, host stalls in a VM)",
    ),
    (
        "overload",
        "the cycle's own work took longer than the budget once awake: DSP load too high for the buffer size, frequency scaling, or CPU time the host took",
    ),
    (
        "interference",
        "the cycle was in time on its own CPU time but other tasks or interrupts ran on its CPU while it worked",
    ),
];

/// The causes of the xruns the results saw in runs meant to succeed (run results, and the
/// passing trial at each load cell's maximum).
fn causes(inputs: &[Input]) -> Vec<CauseLine> {
    let mut counts: Vec<(String, u64, Vec<String>)> = MEANINGS
        .iter()
        .map(|(c, _)| (c.to_string(), 0, Vec::new()))
        .collect();
    for i in inputs {
        let Loaded::Doc(d) = &i.item else { continue };
        let file = name(i);
        match &d.body {
            Body::Run { results, .. } => add_counts(&mut counts, &results.xruns, &file),
            // A grid pushes every cell into overload on purpose: only the xruns its passing
            // trials tolerated at each maximum say something about the machine. (Sched rows
            // run under policies chosen to lose, so they are left out too.)
            Body::Load { results, .. } => {
                for c in &results.cells {
                    add_counts(&mut counts, &c.xruns, &file);
                }
            }
            _ => {}
        }
    }
    let total: u64 = counts.iter().map(|c| c.1).fold(0, u64::saturating_add);
    let mut out: Vec<CauseLine> = counts
        .into_iter()
        .filter(|c| c.1 > 0)
        .map(|(cause, xruns, files)| CauseLine {
            meaning: MEANINGS
                .iter()
                .find(|m| m.0 == cause)
                .map(|m| m.1.to_string())
                .unwrap_or_default(),
            share_pct: 100.0 * xruns as f64 / total.max(1) as f64,
            cause,
            xruns,
            files,
        })
        .collect();
    out.sort_by_key(|c| std::cmp::Reverse(c.xruns));
    out
}

/// Whose a culprit is: xrunlab's own threads and test load (another thread of ours, a chain
/// element or burn track of the engine, a competing `xr-*` task a stage started, the
/// stressors of `--stress`) are "ours", never the machine's.
fn is_ours(c: &crate::trace::attribute::Culprit) -> bool {
    use crate::trace::attribute::CulpritKind;
    matches!(c.kind, CulpritKind::Ours | CulpritKind::Element)
        || (c.kind == CulpritKind::Task
            && ["xr-", "xrunlab", "stress-ng"]
                .iter()
                .any(|p| c.name.starts_with(p)))
}

/// What the trace could not give to anyone is named for what it is: on a guest whose host
/// stole CPU time during the result, the vCPU not running; otherwise untraced.
pub const HYPERVISOR: &str = "hypervisor: the vCPU was not running";
pub const UNTRACED: &str = "untraced";

fn culprit_label(c: &crate::trace::attribute::Culprit, i: &Input) -> String {
    if c.kind != crate::trace::attribute::CulpritKind::Unaccounted {
        return c.label();
    }
    let steal = i
        .environment()
        .and_then(|e| e.hypervisor_steal)
        .is_some_and(|s| s.stolen_ms > 0.0);
    if steal { HYPERVISOR } else { UNTRACED }.into()
}

/// The culprits of every traced result that were the top culprit of at least one xrun or
/// spike, the same culprit summed across results, most windows explained first (the trace's
/// own "self" and "idle" are not culprits); the machine's and ours apart.
fn culprits(inputs: &[Input]) -> Vec<CulpritLine> {
    let mut out: Vec<CulpritLine> = Vec::new();
    for i in inputs {
        let Loaded::Doc(d) = &i.item else { continue };
        for row in d.body.forensics().into_iter().flat_map(|f| &f.culprits) {
            if !row.culprit.is_culprit() || row.explained == 0 {
                continue;
            }
            let label = culprit_label(&row.culprit, i);
            let ours = is_ours(&row.culprit);
            let file = name(i);
            match out.iter_mut().find(|c| c.culprit == label) {
                Some(c) => {
                    c.explained = c.explained.saturating_add(row.explained);
                    c.total_ns = c.total_ns.saturating_add(row.total_ns);
                    c.worst_ns = c.worst_ns.max(row.worst_ns);
                    if !c.files.contains(&file) {
                        c.files.push(file);
                    }
                }
                None => out.push(CulpritLine {
                    culprit: label,
                    explained: row.explained,
                    total_ns: row.total_ns,
                    worst_ns: row.worst_ns,
                    files: vec![file],
                    ours,
                }),
            }
        }
    }
    out.sort_by(|a, b| {
        a.ours
            .cmp(&b.ours)
            .then(b.explained.cmp(&a.explained))
            .then(b.total_ns.cmp(&a.total_ns))
    });
    // Ten of the machine's at most, and ten of ours.
    let mut kept = (0, 0);
    out.retain(|c| {
        let n = if c.ours { &mut kept.1 } else { &mut kept.0 };
        *n += 1;
        *n <= 10
    });
    out
}

/// How much fixing a check is expected to help against each symptom (late wake-ups /
/// overload / interference), and whether it is a prerequisite of any real-time run.
/// Reasoning per id: docs/methods.md "Verdict".
fn weights(id: &str) -> (u32, u32, u32, bool) {
    match id {
        "user" | "rtprio-limit" | "rt-priority" | "memlock" => (0, 0, 0, true),
        "preempt" => (30, 0, 5, false),
        "virtualization" => (25, 15, 10, false),
        "threadirqs" => (20, 0, 10, false),
        "hrtimers" => (20, 0, 0, false),
        "isolation" => (15, 0, 20, false),
        "cpu-dma-latency" => (15, 5, 0, false),
        "governor" => (10, 20, 0, false),
        "smt" => (10, 10, 10, false),
        "irq-sharing" => (10, 0, 10, false),
        "mitigations" => (5, 10, 0, false),
        "rt-throttling" => (5, 0, 5, false),
        "tickless" | "clocksource" => (5, 0, 0, false),
        _ => (0, 0, 0, false),
    }
}

/// The worst latency a condition saw (ns) and where.
type Worst = Option<(u64, String)>;

/// The worst latency idle and under stress.
fn worst_latency(inputs: &[Input]) -> (Worst, Worst) {
    let (mut idle, mut stressed): (Worst, Worst) = (None, None);
    for i in inputs {
        let Loaded::Doc(d) = &i.item else { continue };
        let Body::Latency { config, results } = &d.body else {
            continue;
        };
        let max = results.overall.summary.max;
        let slot = if config.stress.is_empty() {
            &mut idle
        } else {
            &mut stressed
        };
        if slot.as_ref().is_none_or(|(m, _)| max > *m) {
            *slot = Some((max, name(i)));
        }
        if let Some(b) = &results.baseline {
            let bmax = b.overall.summary.max;
            if idle.as_ref().is_none_or(|(m, _)| bmax > *m) {
                idle = Some((bmax, format!("{} (idle baseline)", name(i))));
            }
        }
    }
    (idle, stressed)
}

fn advice(
    inputs: &[Input],
    rows: &[VerdictRow],
    causes: &[CauseLine],
    judged_on: Option<Condition>,
) -> Vec<Advice> {
    use crate::units::format_ns;
    let xruns = |c: &str| causes.iter().find(|l| l.cause == c).map_or(0, |l| l.xruns);
    let (idle, stressed) = worst_latency(inputs);
    // Latency matters when some buffer size fails or is undecided on it.
    let undecided = rows.iter().filter(|r| r.meets_target != Some(true)).count();
    let mut late_evidence = Vec::new();
    let tail: Vec<String> = [(&stressed, "under stress"), (&idle, "idle")]
        .into_iter()
        .filter_map(|(w, c)| {
            w.as_ref()
                .map(|(max, file)| format!("{} {c} ({file})", format_ns(*max)))
        })
        .collect();
    if !tail.is_empty() {
        late_evidence.push(format!("worst wake-up {}", tail.join(", ")));
    }
    if xruns("late-wakeup") > 0 {
        late_evidence.push(format!("{} late-wakeup xruns", xruns("late-wakeup")));
    }
    if undecided > 0 && judged_on.is_some() {
        late_evidence.push(format!(
            "{undecided} of {} buffer sizes not shown to meet the target",
            rows.len()
        ));
    }
    let late = !late_evidence.is_empty() && (undecided > 0 || xruns("late-wakeup") > 0);
    let mut out = Vec::new();
    for d in docs(inputs) {
        let Body::Check { results, .. } = d else {
            continue;
        };
        for c in &results.checks {
            if c.verdict == CheckVerdict::Ok || out.iter().any(|a: &Advice| a.id == c.id) {
                continue;
            }
            let (wl, wo, wi, prerequisite) = weights(&c.id);
            let fail = c.verdict == CheckVerdict::Fail;
            let mut score = if fail { 20 } else { 10 };
            let mut evidence = vec![format!("check: {}", c.observed)];
            if prerequisite && fail {
                score += 100;
                evidence.push("without it no thread of xrunlab or JACK runs real-time".into());
            }
            if late && wl > 0 {
                score += wl;
                evidence.extend(late_evidence.iter().cloned());
            }
            if xruns("overload") > 0 && wo > 0 {
                score += wo;
                evidence.push(format!("{} overload xruns", xruns("overload")));
            }
            if xruns("interference") > 0 && wi > 0 {
                score += wi;
                evidence.push(format!("{} interference xruns", xruns("interference")));
            }
            out.push(Advice {
                id: c.id.clone(),
                title: c.title.clone(),
                verdict: if fail { "fail" } else { "warn" }.into(),
                advice: c.advice.clone(),
                evidence,
                score,
            });
        }
    }
    out.sort_by(|a, b| b.score.cmp(&a.score).then_with(|| a.id.cmp(&b.id)));
    out
}

fn gaps(
    inputs: &[Input],
    rows: &[VerdictRow],
    judged_on: Option<Condition>,
    cfg: &VerdictConfig,
) -> Vec<String> {
    use super::format::span_at_least;
    let has = |k: &str| inputs.iter().any(|i| i.kind() == k);
    let mut out = Vec::new();
    match judged_on {
        None => out.push(
            "no latency result: nothing predicts a rate (xrunlab latency --stress paper --baseline idle --duration 10m -o lat.json)"
                .into(),
        ),
        Some(Condition::Idle) => out.push(
            "no latency under stress: the verdict is judged idle (xrunlab latency --stress paper --duration 10m -o lat-stress.json)"
                .into(),
        ),
        Some(Condition::Stressed) => {}
    }
    // The first undecided size whose prediction says how long to measure.
    let pick = |r: &VerdictRow| match judged_on {
        Some(Condition::Stressed) => r.stressed.clone(),
        _ => r.idle.clone(),
    };
    if let Some((r, p)) = rows
        .iter()
        .filter(|r| r.meets_target.is_none())
        .find_map(|r| pick(r).map(|p| (r, p)))
    {
        match p.measure_for_ns {
            Some(t) => out.push(format!(
                "{} frames is undecided: latency {} is too short to tell {}/h; about {} of latency measurement on the same CPUs would settle it",
                r.buffer_frames,
                p.latency,
                super::format::per_hour(cfg.target_per_hour),
                span_at_least(t)
            )),
            None => out.push(format!(
                "{} frames is undecided: its interval contains the target; measure longer",
                r.buffer_frames
            )),
        }
    }
    if !has("load") {
        out.push(
            "no load grid: the headroom is the free share of the period only (xrunlab load)".into(),
        );
    }
    if !has("run") {
        out.push(
            "no run result: the predictions are not checked against measured xruns (xrunlab run --buffer N --duration 10m)"
                .into(),
        );
    }
    if !has("check") {
        out.push("no check result: no configuration advice (xrunlab check)".into());
    }
    out
}

/// The column of [`HEADER`] the terminal prints below its table.
pub const PLUGINS_COLUMN: usize = 6;

/// The table's columns, for the terminal and the HTML report alike.
pub const HEADER: [&str; 9] = [
    "buffer",
    "P ms",
    "idle glitches/h",
    "stressed glitches/h",
    "measured xruns/h",
    "free %",
    "max instances/track (1/2/… tracks)",
    "RTL ms model / measured",
    "target",
];

fn predicted_cell(p: &Option<Predicted>) -> String {
    use super::format::rate_cell;
    match p {
        None => "—".into(),
        Some(p) if p.overload => "overload".into(),
        // Glitches (episodes of late cycles), as the terminal's table and the answer count
        // them: the outcome is judged on these.
        Some(p) => rate_cell(&p.episodes_per_hour),
    }
}

/// One row's cells, in [`HEADER`]'s order.
pub fn row_cells(r: &VerdictRow) -> Vec<String> {
    use super::format::rate_cell;
    let measured = if r.measured.is_empty() {
        "—".to_string()
    } else {
        r.measured
            .iter()
            .map(|m| {
                format!(
                    "{} ({} in {}{})",
                    rate_cell(&m.per_hour),
                    m.xruns,
                    super::format::span((m.hours * 3.6e12) as u64),
                    if m.stress.is_empty() {
                        String::new()
                    } else {
                        format!(", {}", m.stress.join(","))
                    }
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    // Per plugin, its maxima at each track count in the grid's order: "reverb-light 375/343".
    let mut names: Vec<&str> = Vec::new();
    for p in &r.plugins {
        if !names.contains(&p.plugin.as_str()) {
            names.push(&p.plugin);
        }
    }
    let plugins = if names.is_empty() {
        "—".to_string()
    } else {
        names
            .iter()
            .map(|n| {
                let counts: Vec<String> = r
                    .plugins
                    .iter()
                    .filter(|p| p.plugin == *n)
                    .map(|p| format!("{}{}", p.max_per_track, if p.capped { "+" } else { "" }))
                    .collect();
                format!("{n} {}", counts.join("/"))
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    vec![
        r.buffer_frames.to_string(),
        format!("{:.2}", r.period_ms),
        // The calibration is of the judged prediction: the stressed one where there is one.
        if r.stressed.is_some() {
            predicted_cell(&r.idle)
        } else {
            calibrated_cell(&r.idle, r)
        },
        calibrated_cell(&r.stressed, r),
        measured,
        format!("{:.0}", r.free_pct),
        plugins,
        format!(
            "{:.1} / {}",
            r.rtl_model_ms,
            r.rtl_measured_ms
                .map_or("—".to_string(), |m| format!("{m:.1}"))
        ),
        target_cell(r),
    ]
}

/// The outcome and what it rests on: "fails, measured", "meets, predicted and measured".
/// A verdict written before the engine checked its sizes records no basis: predicted.
fn target_cell(r: &VerdictRow) -> String {
    let outcome = match r.meets_target {
        Some(true) => "meets",
        Some(false) => "fails",
        None => "undecided",
    };
    let basis = r.basis.unwrap_or(Basis::Predicted);
    match (r.meets_target, &r.checked) {
        (None, _) => outcome.into(),
        (Some(_), Some(c)) if basis == Basis::Both => format!(
            "{outcome}, predicted ({} in {} measured)",
            if c.xruns == 0 {
                "no glitch".to_string()
            } else {
                c.xruns.to_string()
            },
            super::format::span((c.hours * 3.6e12) as u64)
        ),
        _ => format!("{outcome}, {}", basis.word()),
    }
}

/// The judged prediction's cell with the calibration beside it: "0.71 [0.2, 1.8]; ×43 →
/// 31 [9.1, 78] (512 frames' run)".
fn calibrated_cell(p: &Option<Predicted>, r: &VerdictRow) -> String {
    use super::format::{per_hour, rate_cell};
    let base = predicted_cell(p);
    match &r.calibration {
        Some(c) if c.from_frames == r.buffer_frames => {
            format!("{base}; measured/predicted ×{}", per_hour(c.ratio.per_hour))
        }
        Some(Calibration {
            from_frames,
            ratio,
            calibrated: Some(k),
        }) => format!(
            "{base}; ×{} → {} ({from_frames} frames' run)",
            per_hour(ratio.per_hour),
            rate_cell(k)
        ),
        _ => base,
    }
}

#[cfg(test)]
mod tests {
    use crate::results::verdict::{test_row, Condition};

    /// The table's outcome cell says what the outcome rests on, and a row from before runs
    /// were recorded (no basis) reads as predicted.
    #[test]
    fn the_outcome_cell_says_predicted_without_runs() {
        let mut rows = [test_row(1024, 0.05, 0.5)];
        let judge = super::super::decide::Judge {
            on: Some(Condition::Stressed),
            periods: 2,
            target_per_hour: 1.0,
        };
        super::super::decide::decide(&mut rows, judge);
        assert_eq!(
            super::row_cells(&rows[0]).last().unwrap(),
            "meets, predicted"
        );
        rows[0].basis = None;
        assert_eq!(
            super::row_cells(&rows[0]).last().unwrap(),
            "meets, predicted"
        );
    }
}
