//! Result documents as metrics: what a fleet's Prometheus wants of each kind (xruns by
//! cause, period and server; cycle headroom and wake-up latency; culprit time; the verdict's
//! smallest good buffer size), and for every kind when it last ran and whether it completed.

use super::family::{Labels, Metrics};
use crate::common::stats::Summary;
use crate::results::suite::{Manifest, StageStatus};
use crate::results::{Body, ResultDoc, Status};
use crate::trace::Forensics;

/// Culprits kept per result: the rest of their time is summed under `other`, so that the
/// series a board exports stay bounded whatever its trace saw.
pub const TOP_CULPRITS: usize = 10;

/// Wake-up latency histogram bounds (seconds): 5 µs to 10 ms, the range between a tuned
/// PREEMPT_RT machine's worst case and a period lost at common buffer sizes.
pub const LATENCY_BUCKETS: &[f64] = &[
    0.000005, 0.00001, 0.00002, 0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01,
];

fn s(ns: f64) -> f64 {
    ns / 1e9
}

/// Seconds since the epoch of an RFC 3339 time stamp (None: not one).
pub fn unix_seconds(t: &str) -> Option<f64> {
    let at = humantime::parse_rfc3339_weak(t).ok()?;
    Some(
        at.duration_since(std::time::UNIX_EPOCH)
            .ok()?
            .as_secs_f64(),
    )
}

/// The labels that tell one document's series from another's of the same kind: its kind,
/// and for the kinds measured at a period the server, rate, period and whether stress ran.
pub fn doc_labels(d: &ResultDoc) -> Labels {
    let mut l: Labels = vec![("test", d.kind().to_string())];
    let condition = |stressed: bool| if stressed { "stressed" } else { "idle" }.to_string();
    match &d.body {
        Body::Run { config, results } => {
            l.push(("driver", config.driver.name().to_string()));
            l.push(("rate", config.rate.to_string()));
            l.push(("period", config.buffer_frames.to_string()));
            l.push((
                "condition",
                condition(!config.stress.is_empty() || results.stress.is_some()),
            ));
        }
        Body::Latency { config, .. } => {
            l.push(("condition", condition(!config.stress.is_empty())));
        }
        Body::Verdict { config, .. } => l.push(("rate", config.rate.to_string())),
        Body::Rtl { config, .. } => {
            l.push(("driver", config.driver.map_or("model", |d| d.name()).to_string()))
        }
        // Measured at no one period or condition: the test label tells them apart.
        Body::Check { .. }
        | Body::Stress { .. }
        | Body::Bench { .. }
        | Body::Audit { .. }
        | Body::Latencytest { .. }
        | Body::Load { .. }
        | Body::Sched { .. }
        | Body::Event { .. }
        | Body::Predict { .. }
        | Body::Watch { .. } => {}
    }
    l
}

fn with(l: &Labels, more: &[(&'static str, String)]) -> Labels {
    let mut l = l.clone();
    l.extend(more.iter().cloned());
    l
}

/// Everything `d` says as metrics, added to `m`.
pub fn add_doc(m: &mut Metrics, d: &ResultDoc, top: usize) {
    let l = doc_labels(d);
    if let Some(t) = unix_seconds(&d.ended_at).or_else(|| unix_seconds(&d.started_at)) {
        m.gauge(
            "xrunlab_last_run_timestamp_seconds",
            "When the result's run ended, seconds since the epoch.",
            l.clone(),
            t,
        );
    }
    if let (Some(a), Some(b)) = (unix_seconds(&d.started_at), unix_seconds(&d.ended_at)) {
        m.gauge(
            "xrunlab_run_duration_seconds",
            "How long the result's run took.",
            l.clone(),
            (b - a).max(0.0),
        );
    }
    m.gauge(
        "xrunlab_result_complete",
        "1 when the run completed, 0 when it was interrupted, stopped by the watchdog or lost its server.",
        l.clone(),
        f64::from(u8::from(d.status == Status::Complete)),
    );
    m.gauge(
        "xrunlab_result_warnings",
        "Conditions that weaken the result's evidence (VM, governor, no privilege...).",
        l.clone(),
        d.warnings.len() as f64,
    );
    match &d.body {
        Body::Run { results, .. } => add_run(m, &l, results),
        Body::Latency { results, .. } => add_latency(m, &l, results),
        Body::Verdict { results, .. } => add_verdict(m, &l, results),
        Body::Check { results, .. } => {
            for c in &results.checks {
                let verdict = serde_json::to_value(c.verdict)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                m.gauge(
                    "xrunlab_check_verdict",
                    "1 for each check of `xrunlab check`, labelled with its verdict (ok, warn, fail).",
                    with(&l, &[("check", c.id.clone()), ("verdict", verdict)]),
                    1.0,
                );
            }
        }
        Body::Rtl { config, results } => {
            for row in &results.model {
                m.gauge(
                    "xrunlab_round_trip_seconds",
                    "Round-trip latency: modelled (eq. 1 of Vignati et al.) or measured on a loop.",
                    with(
                        &l,
                        &[
                            ("period", row.buffer_frames.to_string()),
                            ("source", "model".into()),
                        ],
                    ),
                    row.rtl_ms / 1e3,
                );
            }
            if let Some(ms) = results.measured.as_ref().and_then(|x| x.delay_ms) {
                let period = config.buffers.first().map_or(String::new(), u32::to_string);
                m.gauge(
                    "xrunlab_round_trip_seconds",
                    "Round-trip latency: modelled (eq. 1 of Vignati et al.) or measured on a loop.",
                    with(&l, &[("period", period), ("source", "measured".into())]),
                    ms / 1e3,
                );
            }
            xruns(m, &l, &[("all", results.xruns)]);
            cycles(m, &l, results.cycles);
        }
        Body::Load { results, .. } => {
            for c in &results.cells {
                m.gauge(
                    "xrunlab_load_max_instances",
                    "Most plugin instances per track that ran without xruns (the DSP load grid).",
                    with(
                        &l,
                        &[
                            ("period", c.buffer_frames.to_string()),
                            ("tracks", c.tracks.to_string()),
                            ("plugin", c.plugin.clone()),
                        ],
                    ),
                    f64::from(c.max_per_track),
                );
            }
        }
        // A watch's live figures are served by the watch itself (`openmetrics::live`); its
        // result adds the code inside each client thread (`--forensics`).
        Body::Watch { results, .. } => {
            if let Some(i) = &results.inside {
                inside_code(m, &l, i);
            }
            cause_classes(m, &l, results);
        }
        // No gauge of their own yet: their culprits (below) are what a fleet graphs.
        Body::Stress { .. }
        | Body::Bench { .. }
        | Body::Audit { .. }
        | Body::Latencytest { .. }
        | Body::Sched { .. }
        | Body::Event { .. }
        | Body::Predict { .. } => {}
    }
    if let Some(f) = d.body.forensics() {
        add_culprits(m, &l, f, top);
    }
}

fn xruns(m: &mut Metrics, l: &Labels, by_cause: &[(&str, u64)]) {
    for (cause, n) in by_cause {
        m.counter(
            "xrunlab_xruns_total",
            "Cycles that missed their deadline, by cause.",
            with(l, &[("cause", (*cause).to_string())]),
            *n as f64,
        );
    }
}

fn cycles(m: &mut Metrics, l: &Labels, n: u64) {
    m.counter(
        "xrunlab_cycles_total",
        "Audio cycles run.",
        l.clone(),
        n as f64,
    );
}

/// The quantiles a [`Summary`] holds, lowest first: (q, 1 − q written exactly, value at q).
fn quantiles(x: &Summary) -> [(f64, f64, u64); 8] {
    [
        (0.0, 1.0, x.min),
        (0.5, 0.5, x.p50),
        (0.9, 0.1, x.p90),
        (0.99, 0.01, x.p99),
        (0.999, 0.001, x.p99_9),
        (0.9999, 0.0001, x.p99_99),
        (0.999999, 0.000001, x.p99_9999),
        (1.0, 0.0, x.max),
    ]
}

fn add_run(m: &mut Metrics, l: &Labels, r: &crate::measure::run::RunResults) {
    let x = &r.xruns;
    let known = x.late_wakeup + x.overload + x.interference;
    let mut by = vec![
        ("late-wakeup", x.late_wakeup),
        ("overload", x.overload),
        ("interference", x.interference),
    ];
    if x.total > known {
        by.push(("other", x.total - known));
    }
    xruns(m, l, &by);
    cycles(m, l, r.cycles);
    m.gauge(
        "xrunlab_period_seconds",
        "The audio period: the deadline of every cycle.",
        l.clone(),
        s(r.period_ns as f64),
    );
    // The result keeps percentiles, not every cycle: a summary says exactly that, where a
    // histogram's buckets would have to be invented from them.
    let end = &r.end_time_ns;
    let budget = r.budget_ns as f64;
    let head: Vec<(f64, f64)> = quantiles(end)
        .iter()
        .map(|&(_, q, v)| (q, s(budget - v as f64)))
        .rev()
        .collect();
    m.summary(
        "xrunlab_cycle_headroom_seconds",
        "Time left in the period when the cycle finished (negative: late); low quantiles are the near misses.",
        l.clone(),
        &head,
        s((budget - end.mean) * end.count as f64),
        end.count,
    );
    let w = &r.wake_latency_ns;
    let wake: Vec<(f64, f64)> = quantiles(w)
        .iter()
        .map(|&(q, _, v)| (q, s(v as f64)))
        .collect();
    m.summary(
        "xrunlab_cycle_wakeup_latency_seconds",
        "How late the audio thread woke for its cycle.",
        l.clone(),
        &wake,
        s(w.mean * w.count as f64),
        w.count,
    );
    for (stat, v) in [
        ("mean", r.dsp_load_pct.mean),
        ("p99", r.dsp_load_pct.p99),
        ("max", r.dsp_load_pct.max),
    ] {
        m.gauge(
            "xrunlab_dsp_load_ratio",
            "Time the cycle's work took, as a fraction of the period.",
            with(l, &[("stat", stat.into())]),
            v / 100.0,
        );
    }
}

fn add_latency(m: &mut Metrics, l: &Labels, r: &crate::measure::latency::LatencyResult) {
    // The per-CPU 1 µs buckets (a wake-up of 17.9 µs is in bucket 17, so every latency of
    // bucket b is below b + 1 µs) and the overflows above them, summed into fixed bounds.
    let mut counts = vec![0u64; LATENCY_BUCKETS.len()];
    let mut count = 0u64;
    let mut sum_ns = 0.0;
    for c in &r.per_cpu {
        for &(us, n) in &c.histogram_us {
            let upper = (us + 1) as f64 * 1e-6;
            for (i, &le) in LATENCY_BUCKETS.iter().enumerate() {
                if upper <= le + 1e-12 {
                    counts[i] += n;
                }
            }
        }
        for &(ns, n) in &c.overflow_ns {
            for (i, &le) in LATENCY_BUCKETS.iter().enumerate() {
                if s(ns as f64) <= le {
                    counts[i] += n;
                }
            }
        }
        count += c.stats.summary.count;
        sum_ns += c.stats.summary.mean * c.stats.summary.count as f64;
    }
    let buckets: Vec<(f64, u64)> = LATENCY_BUCKETS.iter().copied().zip(counts).collect();
    m.histogram(
        "xrunlab_wakeup_latency_seconds",
        "Timer wake-up latency of the measuring threads (cyclictest's measure), all CPUs.",
        l.clone(),
        &buckets,
        s(sum_ns),
        count,
    );
    m.gauge(
        "xrunlab_wakeup_latency_max_seconds",
        "The worst wake-up latency of the run.",
        l.clone(),
        s(r.overall.summary.max as f64),
    );
}

fn add_verdict(m: &mut Metrics, l: &Labels, r: &crate::results::verdict::VerdictResults) {
    if let Some(f) = r.recommended_frames {
        m.gauge(
            "xrunlab_verdict_min_buffer_frames",
            "The smallest buffer size (frames per period) that meets the verdict's xrun target.",
            l.clone(),
            f64::from(f),
        );
    }
    m.gauge(
        "xrunlab_verdict_pass",
        "1 when some buffer size meets the target (within --fail-above when given).",
        l.clone(),
        f64::from(u8::from(
            r.recommended_frames.is_some() && !r.failed_threshold,
        )),
    );
    let judged = r.judged_on.map_or("idle", |c| c.word());
    for row in &r.rows {
        let lb = with(l, &[("period", row.buffer_frames.to_string())]);
        if let Some(ok) = row.meets_target {
            m.gauge(
                "xrunlab_verdict_meets_target",
                "1 when this buffer size meets the xrun target, 0 when not (undecided ones are left out).",
                lb.clone(),
                f64::from(u8::from(ok)),
            );
        }
        let p = match r.judged_on {
            Some(crate::results::verdict::Condition::Stressed) => row.stressed.as_ref(),
            _ => row.idle.as_ref(),
        };
        if let Some(p) = p {
            m.gauge(
                "xrunlab_verdict_predicted_xruns_per_hour",
                "Xruns per hour predicted at this buffer size, in the condition judged on.",
                with(&lb, &[("condition", judged.to_string())]),
                p.xruns_per_hour.per_hour,
            );
        }
        m.gauge(
            "xrunlab_verdict_round_trip_seconds",
            "Modelled round-trip latency at this buffer size.",
            lb,
            row.rtl_model_ms / 1e3,
        );
    }
}

/// Culprit time summed over CPUs per (kind, name) — a pid changes every run, so it is left
/// out of the labels — the top `top` by time, and the rest as `other`.
fn add_culprits(m: &mut Metrics, l: &Labels, f: &Forensics, top: usize) {
    let mut by: Vec<(String, String, u64)> = Vec::new();
    for row in f.culprits.iter().filter(|r| r.culprit.is_culprit()) {
        let kind = serde_json::to_value(row.culprit.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        match by
            .iter_mut()
            .find(|(k, n, _)| *k == kind && *n == row.culprit.name)
        {
            Some(e) => e.2 += row.total_ns,
            None => by.push((kind, row.culprit.name.clone(), row.total_ns)),
        }
    }
    by.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| (&a.0, &a.1).cmp(&(&b.0, &b.1))));
    let other: u64 = by.iter().skip(top).map(|e| e.2).sum();
    let shown = by.len().min(top);
    let mut rows: Vec<(String, String, u64)> = by.into_iter().take(shown).collect();
    if other > 0 {
        rows.push(("other".into(), "other".into(), other));
    }
    for (kind, name, ns) in rows {
        m.counter(
            "xrunlab_culprit_seconds_total",
            "Time culprits took from the audio thread in the traced xrun or spike windows, top N by time plus other.",
            with(l, &[("kind", kind), ("name", name)]),
            s(ns as f64),
        );
    }
}

/// A suite's stages: each one's status and duration.
pub fn add_manifest(m: &mut Metrics, man: &Manifest) {
    for st in &man.stages {
        let status = match st.status {
            StageStatus::Ok => "ok",
            StageStatus::Failed => "failed",
            StageStatus::Skipped => "skipped",
        };
        m.gauge(
            "xrunlab_suite_stage",
            "1 for each stage of the last suite, labelled with its status (ok, failed, skipped).",
            vec![("stage", st.stage.clone()), ("status", status.into())],
            1.0,
        );
        m.gauge(
            "xrunlab_suite_stage_duration_seconds",
            "How long each stage of the last suite took.",
            vec![("stage", st.stage.clone())],
            st.duration_s,
        );
    }
    if let Some(t) = unix_seconds(&man.started_at) {
        m.gauge(
            "xrunlab_suite_start_timestamp_seconds",
            "When the last suite started, seconds since the epoch.",
            vec![],
            t,
        );
    }
}

/// The watch's xruns by the class of their cause (`--forensics`), every class present so
/// that a fleet's query sees zeros.
fn cause_classes(m: &mut Metrics, l: &Labels, r: &crate::measure::watch::WatchResults) {
    if r.forensics.is_none() {
        return;
    }
    for c in crate::trace::CulpritClass::ALL {
        let n = r
            .xruns
            .iter()
            .filter(|x| x.late.as_ref().and_then(|l| l.class) == Some(c))
            .count();
        m.counter(
            "xrunlab_watch_xruns_by_cause_total",
            "Xruns of the watch by the class of their cause (own work, rt-task, interrupt, kernel-thread, kernel-section, blocked-io, lock, rt-throttled, not-realtime, cpu-quota, hypervisor).",
            with(l, &[("cause", c.key().to_string())]),
            n as f64,
        );
    }
}

/// Per client thread and code (plugin, host, library, kernel): its mean CPU time per
/// period and the xruns whose late run it held most. Bounded: at most 12 codes a thread.
fn inside_code(m: &mut Metrics, l: &Labels, i: &crate::measure::watch::inside::InsideSummary) {
    for c in &i.code {
        let kind = serde_json::to_value(c.code.kind)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default();
        let labels = with(
            l,
            &[
                ("client", c.client.clone()),
                ("code", c.code.name.clone()),
                ("code_kind", kind),
            ],
        );
        m.gauge(
            "xrunlab_watch_code_seconds_per_cycle",
            "Mean CPU time per graph period of one code (plugin, host, library, kernel) in one client thread, from sampling it.",
            labels.clone(),
            s(c.mean_ns as f64),
        );
        m.counter(
            "xrunlab_watch_code_xruns_led_total",
            "Xruns whose late run one code held most (its samples), per client thread.",
            labels,
            c.xruns_led as f64,
        );
    }
}
