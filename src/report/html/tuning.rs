//! "Tuning: before and after" (`suite --tuned`): what the profile applied and skipped, each
//! tuned stage beside its untuned one ([`crate::report::tuning`]), and what was restored.

use crate::report::grid::{table_html, Table};
use crate::report::{tuning, Input, Loaded};
use crate::results::suite::{Manifest, TUNED_SUFFIX};
use crate::results::Body;
use maud::{html, Markup};

/// The input a stage's file was loaded as.
fn input_of<'a>(inputs: &'a [Input], file: &str) -> Option<&'a Input> {
    let name = std::path::Path::new(file).file_name()?;
    inputs.iter().find(|i| i.path.file_name() == Some(name))
}

/// Before/after tables of every stage the suite ran both untuned and tuned.
pub fn pairs(m: &Manifest, inputs: &[Input]) -> Vec<Table> {
    let mut out = Vec::new();
    for after in m.stages.iter().filter(|s| s.is_tuned()) {
        let name = after.stage.trim_end_matches(TUNED_SUFFIX);
        let Some(before) = m.stages.iter().find(|s| s.stage == name) else {
            continue;
        };
        let (Some(bf), Some(af)) = (&before.file, &after.file) else {
            continue;
        };
        let (Some(bi), Some(ai)) = (input_of(inputs, bf), input_of(inputs, af)) else {
            continue;
        };
        let (Loaded::Doc(bd), Loaded::Doc(ad)) = (&bi.item, &ai.item) else {
            continue;
        };
        match (&bd.body, &ad.body) {
            (
                Body::Latency {
                    config: bc,
                    results: br,
                },
                Body::Latency {
                    config: ac,
                    results: ar,
                },
            ) => out.push(tuning::latency(
                name.trim_start_matches("latency-"),
                tuning::Latency {
                    path: &bi.path,
                    config: bc,
                    results: br,
                },
                tuning::Latency {
                    path: &ai.path,
                    config: ac,
                    results: ar,
                },
            )),
            (
                Body::Load {
                    config: bc,
                    results: br,
                },
                Body::Load {
                    config: ac,
                    results: ar,
                },
            ) => out.push(tuning::load((bc, br), (ac, ar))),
            _ => {}
        }
    }
    out
}

pub fn section(m: &Manifest, inputs: &[Input]) -> Markup {
    let Some(t) = &m.tuning else {
        return html! {};
    };
    let failed = t.restored.iter().filter(|r| r.error.is_some()).count();
    html! {
        section.tuning id="tuning" {
            h2 { "Tuning: before and after" }
            p { "The " code { (t.profile.to_string()) } " profile was applied with audio CPUs "
                (crate::rt::affinity::format_cpu_list(&t.audio_cpus)) " (everything else on "
                (crate::rt::affinity::format_cpu_list(&t.housekeeping_cpus)) "); the stages named "
                code { "…" (TUNED_SUFFIX) } " ran with it, from inside the audio cpuset, the others before it, "
                "both on the audio CPUs. Afterwards every value was restored"
                @if failed > 0 { span.fail { " except " (failed) " (retry " code { "xrunlab tune --restore --journal " (t.journal) } ")" } }
                ". The verdict judges the untuned results: the machine as the suite left it." }
            @if let Some(e) = &t.error { p.warn { (e) } }
            @for table in pairs(m, inputs) {
                h3 { (table.title) }
                (table_html(&table))
            }
            p { "Intervals are 95 %: percentiles from the ranks of the samples, the predicted rate "
                "exact Poisson (as in " code { "predict" } "); a change is shown as lower or higher only when the "
                "intervals do not overlap. A maximum is one sample: evidence only when the change is large. "
                "The load grid is one search per cell: one instance either way is within its resolution." }
            (table_html(&tuning::settings(&t.applied)))
            @if !t.boot_cmdline.is_empty() {
                p { "Boot-time settings the profile would add (never written): " code { (t.boot_cmdline) } }
            }
        }
    }
}
