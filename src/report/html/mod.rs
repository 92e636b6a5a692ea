//! The self-contained HTML report: inline CSS, inline SVG, no scripts, nothing fetched.
//! One section per result: environment and warnings first, then the kind's own part
//! (one module per kind; unknown kinds get [`generic`]).

mod audit;
mod bench;
pub(crate) use bench::label as bench_label;
mod check;
mod event;
mod forensics;
mod generic;
mod latency;
mod latencytest;
mod load;
mod predict;
pub(crate) use load::fig2_series as load_series;
mod rtl;
mod run;
pub(crate) use run::cdf;
mod sched;
pub(crate) use sched::set_q as sched_set_q;
mod stress;
mod tuning;
mod verdict;
mod watch;

use super::{Input, Loaded};
use crate::results::Body;
use crate::system::Environment;
use maud::{html, Markup, PreEscaped, DOCTYPE};

const CSS: &str = "
body{font-family:sans-serif;margin:2em auto;max-width:1000px;color:#222;line-height:1.4}
h1{border-bottom:2px solid #444}
section.result{border-top:1px solid #aaa;margin-top:2.5em}
table{border-collapse:collapse;margin:0.6em 0}
th,td{border:1px solid #ccc;padding:2px 8px;font-size:0.9em;vertical-align:top}
th{background:#eee;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}
ul.warnings li{color:#8a4b00}
.ok{color:#176d1c}.warn{color:#8a4b00;font-weight:bold}.fail{color:#b00020;font-weight:bold}
figure{margin:1em 0}figcaption{font-size:0.85em;color:#555;max-width:760px}
code{background:#f4f4f4;padding:0 3px}
div.answer{border-left:10px solid #888;border-radius:4px;padding:0.5em 1em;margin:1em 0;font-size:1.2em}
div.answer p{margin:0.3em 0}div.answer p.headline{font-weight:bold}
div.answer.tone-ok{background:#e6f4e7;border-color:#176d1c}
div.answer.tone-warn{background:#fff3dc;border-color:#c77800}
div.answer.tone-fail{background:#fde7ea;border-color:#b00020}
div.answer code{background:#fff;font-size:0.85em}
p.same-env{font-size:0.85em;color:#555}
";

/// A whole report over `inputs`, in the order given.
pub fn report(inputs: &[Input]) -> String {
    report_with(inputs, None)
}

/// A report headed by a suite's stage table when `manifest` is given. Verdicts given first
/// come before it: their coloured answer opens the page, then how it was reached, then the
/// environment once (each section then shows only what differs from it).
pub fn report_with(inputs: &[Input], manifest: Option<&crate::results::suite::Manifest>) -> String {
    let lead = inputs.iter().take_while(|i| i.kind() == "verdict").count();
    let base = Base::of(inputs);
    page(
        "xrunlab report",
        html! {
            @for inp in inputs.iter().take(lead) { (answer_of(inp)) }
            p { "xrunlab " (env!("CARGO_PKG_VERSION")) " — " (inputs.len()) " result(s)" }
            @for (i, inp) in inputs.iter().enumerate().take(lead) {
                (section(i + 1, inp, &base, true))
            }
            (base.block())
            @if let Some(m) = manifest { (suite_table(m)) (tuning::section(m, inputs)) }
            ul.toc {
                @for (i, inp) in inputs.iter().enumerate() {
                    li { a href={ "#r" (i + 1) } { (inp.kind()) " — " (inp.name()) } }
                }
            }
            @for (i, inp) in inputs.iter().enumerate().skip(lead) {
                (section(i + 1, inp, &base, false))
            }
        },
    )
}

/// The coloured one-sentence answer of a verdict input; nothing for other kinds.
fn answer_of(inp: &Input) -> Markup {
    match &inp.item {
        Loaded::Doc(doc) => match &doc.body {
            Body::Verdict { results, .. } => verdict::answer(results),
            _ => html! {},
        },
        Loaded::Other { .. } => html! {},
    }
}

/// The environment shared by a report's results, shown once at the top: the first result's
/// rows and the warnings every result carries. A result then lists only what differs (its
/// stress, another kernel when results of two machines are reported together).
struct Base {
    rows: Vec<(&'static str, String)>,
    warnings: Vec<String>,
}

impl Base {
    fn of(inputs: &[Input]) -> Base {
        let rows = inputs
            .iter()
            .find_map(|i| i.environment())
            .map(env_rows)
            .unwrap_or_default();
        let mut warnings: Vec<String> = inputs
            .first()
            .map(|i| i.warnings().to_vec())
            .unwrap_or_default();
        warnings.retain(|w| inputs.iter().all(|i| i.warnings().contains(w)));
        Base { rows, warnings }
    }

    fn block(&self) -> Markup {
        if self.rows.is_empty() {
            return html! {};
        }
        html! {
            div.environment.common {
                h2 { "Environment" }
                @if !self.warnings.is_empty() {
                    ul.warnings { @for w in &self.warnings { li { "⚠ " (w) } } }
                }
                table { @for (k, v) in &self.rows { tr { th { (k) } td { (v) } } } }
            }
        }
    }
}

/// What a suite ran, skipped (and why) and how long each stage took.
fn suite_table(m: &crate::results::suite::Manifest) -> Markup {
    use crate::results::suite::StageStatus;
    html! {
        section.suite {
            h2 { "Suite" }
            p { "xrunlab suite, " (format!("{:?}", m.mode).to_lowercase()) " mode, driver " (m.driver)
                ", started " (m.started_at) "." }
            table.stages {
                tr { th { "stage" } th { "status" } th { "time" } th { "result, or why not" } }
                @for s in &m.stages {
                    tr {
                        td { (s.stage) }
                        @match s.status {
                            StageStatus::Ok => td.ok { "ok" },
                            StageStatus::Failed => td.fail { "FAILED" },
                            StageStatus::Skipped => td.warn { "skipped" },
                        }
                        td.n style="white-space:nowrap" { (format!("{:.1} s", s.duration_s)) }
                        td {
                            @if let Some(f) = &s.file { code { (f) } " " }
                            @if let Some(r) = &s.reason { (r) }
                            @if let Some(x) = &s.note { " (" (x) ")" }
                            @if s.status != StageStatus::Skipped { br; code { "xrunlab " (s.argv.join(" ")) } }
                        }
                    }
                }
            }
        }
    }
}

/// The HTML shell shared by the report and compare pages.
pub fn page(title: &str, body: Markup) -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { (title) }
                style { (PreEscaped(CSS)) }
            }
            body { h1 { (title) } (body) }
        }
    }
    .into_string()
}

/// One result's section; `answered`: its verdict's answer already opens the page.
fn section(n: usize, inp: &Input, base: &Base, answered: bool) -> Markup {
    html! {
        section.result id={ "r" (n) } data-kind=(inp.kind()) {
            h2 { (n) ". " (inp.kind()) " — " (inp.name()) }
            (environment(inp, base))
            @match &inp.item {
                Loaded::Doc(doc) => @match &doc.body {
                    Body::Latency { config, results } => (latency::section(config, results)),
                    Body::Run { config, results } => (run::section(config, results)),
                    Body::Bench { config, results } => (bench::section(config, results)),
                    Body::Audit { config, results } => (audit::section(config, results)),
                    Body::Check { results, .. } => (check::section(results)),
                    Body::Stress { config, results } => (stress::section(config, results)),
                    Body::Latencytest { config, results } => (latencytest::section(config, results)),
                    Body::Load { config, results } => (load::section(config, results)),
                    Body::Sched { config, results } => (sched::section(config, results)),
                    Body::Rtl { config, results } => (rtl::section(config, results)),
                    Body::Event { config, results } => (event::section(config, results)),
                    Body::Predict { config, results } => (predict::section(config, results)),
                    Body::Verdict { config, results } => {
                        @if !answered { (verdict::answer(results)) }
                        (verdict::section(config, results))
                    }
                    Body::Watch { config, results } => (watch::section(config, results)),
                },
                Loaded::Other { kind, value, .. } => (generic::section(kind, value)),
            }
        }
    }
}

fn environment(inp: &Input, base: &Base) -> Markup {
    let command = match &inp.item {
        Loaded::Doc(d) => d.command.join(" "),
        Loaded::Other { value, .. } => value
            .get("command")
            .and_then(|c| c.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default(),
    };
    let differs: Vec<(&'static str, String)> = inp
        .environment()
        .map(env_rows)
        .unwrap_or_default()
        .into_iter()
        .filter(|r| !base.rows.contains(r))
        .collect();
    let own: Vec<&String> = inp
        .warnings()
        .iter()
        .filter(|w| !base.warnings.contains(w))
        .collect();
    html! {
        div.environment {
            @if !own.is_empty() {
                ul.warnings {
                    @for w in own { li { "⚠ " (w) } }
                }
            }
            table {
                tr { th { "status" } td { (inp.status()) } }
                tr { th { "command" } td { code { (command) } } }
                @for (k, v) in &differs { tr { th { (k) } td { (v) } } }
            }
            @if differs.is_empty() && inp.environment().is_some() {
                p.same-env { "Environment as in the report's Environment section." }
            }
        }
    }
}

/// The environment as (label, value) rows, compared row by row between results.
fn env_rows(env: &Environment) -> Vec<(&'static str, String)> {
    let opt = |o: &Option<String>| o.clone().unwrap_or_else(|| "none".into());
    vec![
        ("system", crate::report::text::style::system_line(env)),
        ("preemption", env.preempt.model.to_string()),
        (
            "governor",
            if env.governor.is_empty() {
                "no cpufreq".into()
            } else {
                env.governor.join(", ")
            },
        ),
        (
            "SMT",
            env.smt
                .map_or("unknown".into(), |s| if s { "on" } else { "off" }.into()),
        ),
        (
            "isolation",
            format!(
                "isolcpus {}, nohz_full {}, threadirqs {}",
                opt(&env.isolation.isolcpus),
                opt(&env.isolation.nohz_full),
                env.isolation.threadirqs
            ),
        ),
        (
            "RT throttling",
            env.limits
                .sched_rt_runtime_us
                .map_or("unknown".into(), |r| {
                    if r < 0 {
                        "off".to_string()
                    } else {
                        format!("{r} µs per period")
                    }
                }),
        ),
        (
            "RLIMIT_RTPRIO",
            format!("{} (euid {})", env.limits.rtprio, env.limits.euid),
        ),
        ("clocksource", opt(&env.clocksource)),
        (
            "stress",
            if env.stress.is_empty() {
                "none (idle)".into()
            } else {
                env.stress.join(", ")
            },
        ),
    ]
}

/// A figure around an inline SVG.
pub(crate) fn figure(svg: String, caption: &str) -> Markup {
    html! {
        figure {
            (PreEscaped(svg))
            figcaption { (caption) }
        }
    }
}

/// A right-aligned number cell.
pub(crate) fn n(s: impl std::fmt::Display) -> Markup {
    html! { td.n { (s) } }
}

/// µs with one decimal, the unit latency readers use.
pub(crate) fn us(ns: f64) -> String {
    format!("{:.1}", ns / 1e3)
}

pub(crate) fn plot_bars(title: &str, y: &str, bars: &[(String, f64)]) -> String {
    crate::report::plot::bar_chart(title, y, bars)
}
