//! Results as test cases with an outcome and at most one measurement: what LAVA's result
//! lines and KCIDB's test records both are. One list, so the two formats never disagree on
//! what passed.

use super::Export;
use crate::report::Loaded;
use crate::results::suite::StageStatus;
use crate::results::{Body, ResultDoc, Status};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    Fail,
    Skip,
    /// Measured, with nothing to pass or fail (a figure for the record).
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Seconds,
    Frames,
    Xruns,
    XrunsPerHour,
    Percent,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    /// Path segments from the broad to the narrow, each `[a-z0-9_-]+`.
    pub path: Vec<String>,
    pub outcome: Outcome,
    pub measurement: Option<(f64, Unit)>,
    /// When the result it comes from started (RFC 3339), and its duration in seconds.
    pub started_at: Option<String>,
    pub duration_s: Option<f64>,
    /// The machine of the result it comes from: host name and kernel release (empty for a
    /// suite's stages).
    pub host: String,
    pub kernel: String,
}

/// A path segment: lower case, anything but letters, digits, `_` and `-` turned into `-`.
fn seg(s: &str) -> String {
    let t: String = s
        .to_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    if t.is_empty() {
        "-".into()
    } else {
        t
    }
}

struct Cases {
    list: Vec<Case>,
    started_at: Option<String>,
    duration_s: Option<f64>,
    host: String,
    kernel: String,
}

impl Cases {
    /// A case; one whose path is already there is replaced (the newer document's).
    fn add(&mut self, path: &[&str], outcome: Outcome, measurement: Option<(f64, Unit)>) {
        let c = Case {
            path: path.iter().map(|s| seg(s)).collect(),
            outcome,
            measurement,
            started_at: self.started_at.clone(),
            duration_s: self.duration_s,
            host: self.host.clone(),
            kernel: self.kernel.clone(),
        };
        match self.list.iter_mut().find(|o| o.path == c.path) {
            Some(o) => *o = c,
            None => self.list.push(c),
        }
    }
}

fn pass_if(ok: bool) -> Outcome {
    if ok {
        Outcome::Pass
    } else {
        Outcome::Fail
    }
}

/// The cases of `input`: a suite's stages, then each document's (oldest first, so that a
/// case two documents give is the newest's).
pub fn cases(input: &Export) -> Vec<Case> {
    let mut c = Cases {
        list: Vec::new(),
        started_at: None,
        duration_s: None,
        host: String::new(),
        kernel: String::new(),
    };
    if let Some(m) = input.manifest {
        c.started_at = Some(m.started_at.clone());
        for s in &m.stages {
            c.duration_s = Some(s.duration_s);
            let o = match s.status {
                StageStatus::Ok => Outcome::Pass,
                StageStatus::Failed => Outcome::Fail,
                StageStatus::Skipped => Outcome::Skip,
            };
            c.add(&["suite", &s.stage], o, None);
        }
    }
    let mut docs: Vec<&ResultDoc> = input
        .results
        .iter()
        .filter_map(|i| match &i.item {
            Loaded::Doc(d) => Some(d.as_ref()),
            Loaded::Other { .. } => None,
        })
        .collect();
    let end = |d: &ResultDoc| super::openmetrics::unix_seconds(&d.ended_at).unwrap_or(0.0);
    docs.sort_by(|a, b| end(a).total_cmp(&end(b)));
    for d in docs {
        add_doc(&mut c, d);
    }
    c.list
}

fn condition(stressed: bool) -> &'static str {
    if stressed {
        "stressed"
    } else {
        "idle"
    }
}

fn add_doc(c: &mut Cases, d: &ResultDoc) {
    use super::openmetrics::unix_seconds;
    c.started_at = Some(d.started_at.clone());
    c.host = d.environment.hostname.clone();
    c.kernel = d.environment.kernel.clone();
    c.duration_s = unix_seconds(&d.started_at)
        .zip(unix_seconds(&d.ended_at))
        .map(|(a, b)| (b - a).max(0.0));
    let kind = d.kind();
    let (driver, period, server);
    let prefix: Vec<&str> = match &d.body {
        Body::Latency { config, .. } => vec![kind, condition(!config.stress.is_empty())],
        Body::Run { config, results } => {
            driver = config.driver.name();
            period = format!("{}-frames", config.buffer_frames);
            let stressed = !config.stress.is_empty() || results.stress.is_some();
            vec![kind, driver, &period, condition(stressed)]
        }
        Body::Rtl { config, .. } => vec![kind, config.driver.map_or("model", |d| d.name())],
        Body::Watch { results, .. } => {
            server = results.server.kind.clone();
            period = format!("{}-frames", results.server.frames);
            vec![kind, &server, &period]
        }
        // Measured at no one period, server or condition: the kind names them.
        Body::Check { .. }
        | Body::Stress { .. }
        | Body::Bench { .. }
        | Body::Audit { .. }
        | Body::Latencytest { .. }
        | Body::Load { .. }
        | Body::Sched { .. }
        | Body::Event { .. }
        | Body::Predict { .. }
        | Body::Verdict { .. } => vec![kind],
    };
    let at = |last: &str| {
        let mut p = prefix.clone();
        p.push(last);
        p.iter().map(|s| s.to_string()).collect::<Vec<String>>()
    };
    let add = |c: &mut Cases, last: &str, o: Outcome, m: Option<(f64, Unit)>| {
        let p = at(last);
        let p: Vec<&str> = p.iter().map(String::as_str).collect();
        c.add(&p, o, m);
    };
    add(c, "complete", pass_if(d.status == Status::Complete), None);
    match &d.body {
        Body::Check { results, .. } => {
            use crate::system::check::Verdict;
            for item in &results.checks {
                add(c, &item.id, pass_if(item.verdict != Verdict::Fail), None);
            }
        }
        Body::Latency { results, .. } => {
            let o = &results.overall.summary;
            let crossed = results.fail_above.as_ref().is_some_and(|f| f.crossed);
            add(
                c,
                "max-latency",
                pass_if(!crossed),
                Some((o.max as f64 / 1e9, Unit::Seconds)),
            );
            add(
                c,
                "p99-latency",
                Outcome::Done,
                Some((o.p99 as f64 / 1e9, Unit::Seconds)),
            );
            if let Some(f) = &results.fail_above {
                let name = format!("{}-latency", f.percentile.replace('.', "_"));
                add(
                    c,
                    &name,
                    pass_if(!f.crossed),
                    Some((f.value_ns as f64 / 1e9, Unit::Seconds)),
                );
            }
        }
        Body::Run { results, .. } => {
            let x = results.xruns.total;
            add(c, "xruns", pass_if(x == 0), Some((x as f64, Unit::Xruns)));
            let worst = results.budget_ns as f64 - results.end_time_ns.max as f64;
            add(
                c,
                "min-headroom",
                Outcome::Done,
                Some((worst / 1e9, Unit::Seconds)),
            );
        }
        Body::Rtl { results, .. } => {
            match results.measured.as_ref().and_then(|m| m.delay_ms) {
                Some(ms) => add(
                    c,
                    "round-trip",
                    Outcome::Pass,
                    Some((ms / 1e3, Unit::Seconds)),
                ),
                None => add(c, "round-trip", Outcome::Skip, None),
            }
            for row in &results.model {
                let name = format!("model-{}-frames", row.buffer_frames);
                add(
                    c,
                    &name,
                    Outcome::Done,
                    Some((row.rtl_ms / 1e3, Unit::Seconds)),
                );
            }
        }
        Body::Verdict { results, .. } => add_verdict(c, &add, results),
        Body::Watch { results, .. } => add_watch(c, &add, results),
        // No pass/fail a fleet acts on beyond completing: the complete case says it.
        Body::Stress { .. }
        | Body::Bench { .. }
        | Body::Audit { .. }
        | Body::Latencytest { .. }
        | Body::Load { .. }
        | Body::Sched { .. }
        | Body::Event { .. }
        | Body::Predict { .. } => {}
    }
}

/// How many late clients a watch names as cases: the ones late most often (bounded, as a
/// result database's test names must be).
const TOP_LATE_CLIENTS: usize = 5;

/// A watch's figures: its xruns (pass only without any, as for `run`), their rate per hour,
/// the worst driver delay, the DSP load's peak, and with `--forensics` the clients named late
/// (each a failure, with the xruns it was late in).
fn add_watch(c: &mut Cases, add: &Add, r: &crate::measure::watch::WatchResults) {
    let n = r.total_xruns();
    add(c, "xruns", pass_if(n == 0), Some((n as f64, Unit::Xruns)));
    let hours = r.watched_ns as f64 / 3.6e12;
    if hours > 0.0 {
        let rate = Some((n as f64 / hours, Unit::XrunsPerHour));
        add(c, "xrun-rate", Outcome::Done, rate);
    }
    let worst_us = r
        .xruns
        .iter()
        .map(|x| x.delayed_us)
        .fold(r.max_delayed_us, f64::max);
    if worst_us > 0.0 {
        let worst = Some((worst_us / 1e6, Unit::Seconds));
        add(c, "worst-delay", Outcome::Done, worst);
    }
    if r.dsp_load.samples > 0 {
        let peak = Some((r.dsp_load.max_pct, Unit::Percent));
        add(c, "dsp-load-max", Outcome::Done, peak);
    }
    // A client with several real-time threads is one name.
    let mut late: Vec<(&str, u64)> = Vec::new();
    for t in r.clients.iter().filter(|t| t.xruns_late > 0) {
        match late.iter_mut().find(|(name, _)| *name == t.name) {
            Some(l) => l.1 += t.xruns_late,
            None => late.push((&t.name, t.xruns_late)),
        }
    }
    late.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    for (name, k) in late.into_iter().take(TOP_LATE_CLIENTS) {
        let case = format!("late-{name}");
        add(c, &case, Outcome::Fail, Some((k as f64, Unit::Xruns)));
    }
}

type Add<'a> = dyn Fn(&mut Cases, &str, Outcome, Option<(f64, Unit)>) + 'a;

fn add_verdict(c: &mut Cases, add: &Add, r: &crate::results::verdict::VerdictResults) {
    use crate::results::verdict::Condition;
    for row in &r.rows {
        let p = match r.judged_on {
            Some(Condition::Stressed) => row.stressed.as_ref(),
            _ => row.idle.as_ref(),
        };
        let name = format!("{}-frames", row.buffer_frames);
        let rate = p.map(|p| (p.xruns_per_hour.per_hour, Unit::XrunsPerHour));
        match row.meets_target {
            Some(ok) => add(c, &name, pass_if(ok), rate),
            None => add(c, &name, Outcome::Skip, None),
        }
    }
    match r.recommended_frames {
        Some(f) => add(
            c,
            "min-buffer",
            pass_if(!r.failed_threshold),
            Some((f64::from(f), Unit::Frames)),
        ),
        None => add(c, "min-buffer", Outcome::Fail, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::watch::{clients::ClientTiming, WatchConfig, WatchResults, WatchXrun};
    use crate::report::Input;

    /// A watch result: run.json's envelope around a watch body.
    fn watch_input(r: WatchResults) -> Input {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/results/run.json");
        let mut input = crate::report::load(&p).unwrap();
        let Loaded::Doc(d) = &mut input.item else {
            panic!("run.json is typed")
        };
        d.status = Status::Complete;
        d.body = Body::Watch {
            config: WatchConfig {
                server: Default::default(),
                server_name: None,
                duration_ns: None,
                follow: false,
                forensics: true,
                sample_ns: 0,
            },
            results: Box::new(r),
        };
        input
    }

    fn xrun(delayed_us: f64) -> WatchXrun {
        WatchXrun {
            index: 1,
            at_ns: 0,
            wall: String::new(),
            frame: 0,
            cycle: 0,
            delayed_us,
            dsp_load_pct: 0.0,
            late: None,
            late_by_ns: None,
            node_run: None,
            soc_throttled: Vec::new(),
        }
    }

    fn client(name: &str, xruns_late: u64) -> ClientTiming {
        ClientTiming {
            name: name.into(),
            pid: 1,
            tid: 1,
            process: String::new(),
            named_by: Default::default(),
            busy_ns: Default::default(),
            run_ns: Default::default(),
            wake_delay_ns: Default::default(),
            xruns_late,
        }
    }

    fn line(cs: &[Case], last: &str) -> Option<(Outcome, Option<(f64, Unit)>)> {
        cs.iter()
            .find(|c| c.path.last().is_some_and(|l| l == last))
            .map(|c| (c.outcome, c.measurement))
    }

    #[test]
    fn a_watch_gives_its_xruns_rate_worst_delay_and_late_clients() {
        let mut r = WatchResults {
            watched_ns: 1_800_000_000_000,
            xruns: vec![xrun(0.0), xrun(2500.0), xrun(0.0)],
            xruns_lost: 1,
            max_delayed_us: 1000.0,
            clients: (0..7)
                .map(|i| client(&format!("Synth {i}"), i))
                .chain([client("Synth 6", 2)])
                .collect(),
            ..Default::default()
        };
        r.server.kind = "jackd2".into();
        r.server.frames = 256;
        r.dsp_load.samples = 10;
        r.dsp_load.max_pct = 87.5;
        let input = [watch_input(r)];
        let cs = cases(&Export::of(&input));
        assert_eq!(cs[0].path, ["watch", "jackd2", "256-frames", "complete"]);
        assert_eq!(cs[0].outcome, Outcome::Pass);
        assert_eq!(
            line(&cs, "xruns"),
            Some((Outcome::Fail, Some((4.0, Unit::Xruns))))
        );
        assert_eq!(
            line(&cs, "xrun-rate"),
            Some((Outcome::Done, Some((8.0, Unit::XrunsPerHour))))
        );
        assert_eq!(
            line(&cs, "worst-delay"),
            Some((Outcome::Done, Some((0.0025, Unit::Seconds))))
        );
        assert_eq!(
            line(&cs, "dsp-load-max"),
            Some((Outcome::Done, Some((87.5, Unit::Percent))))
        );
        // Top 5 by xruns late, a name's threads summed, none that was never late.
        let late: Vec<String> = cs
            .iter()
            .filter(|c| c.path[3].starts_with("late-"))
            .map(|c| format!("{} {:?}", c.path[3], c.measurement.unwrap().0))
            .collect();
        assert_eq!(
            late,
            [
                "late-synth-6 8.0",
                "late-synth-5 5.0",
                "late-synth-4 4.0",
                "late-synth-3 3.0",
                "late-synth-2 2.0"
            ]
        );
    }

    #[test]
    fn a_clean_watch_passes_without_a_delay_to_report() {
        let input = [watch_input(WatchResults {
            watched_ns: 60_000_000_000,
            ..Default::default()
        })];
        let cs = cases(&Export::of(&input));
        assert_eq!(
            line(&cs, "xruns"),
            Some((Outcome::Pass, Some((0.0, Unit::Xruns))))
        );
        assert_eq!(
            line(&cs, "xrun-rate"),
            Some((Outcome::Done, Some((0.0, Unit::XrunsPerHour))))
        );
        assert_eq!(line(&cs, "worst-delay"), None);
        assert!(!cs.iter().any(|c| c.path[3].starts_with("late-")));
    }
}
