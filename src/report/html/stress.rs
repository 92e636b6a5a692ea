use super::generic;
use crate::stress::run::{StressConfig, StressResults};
use maud::{html, Markup};

pub fn section(cfg: &StressConfig, r: &StressResults) -> Markup {
    let s = &r.stress;
    html! {
        h3 { "Stress record" }
        p { "presets " (cfg.presets.join(", ")) ", backend " (s.backend) ", " (s.workers) " worker(s), "
            (crate::units::format_ns(s.duration_ns)) }
        table.processes {
            tr { th { "backend" } th { "presets" } th { "command" } th { "exit" } }
            @for p in &s.processes {
                tr { td { (p.backend) } td { (p.presets.join(",")) } td { code { (p.argv.join(" ")) } }
                     td { (p.exit) @if p.ended_early { " (early)" } } }
            }
        }
        @if !s.metrics.is_empty() {
            table.metrics {
                tr { th { "stressor" } th { "source" } th { "bogo ops" } th { "seconds" } th { "ops/s" } }
                @for x in &s.metrics {
                    tr { td { (x.stressor) } td { (x.source) } (super::n(format!("{:.0}", x.bogo_ops)))
                         (super::n(format!("{:.2}", x.real_time_s))) (super::n(format!("{:.1}", x.bogo_ops_per_s))) }
                }
            }
        }
        @for k in &s.skipped { p.warn { "skipped " (k.preset) ": " (k.reason) } }
        @if let Some(c) = &r.compete {
            h3 { "Competing periodic task" }
            (generic::table(&crate::report::flatten(&serde_json::to_value(&c.stats).unwrap_or_default(), 60)))
        }
    }
}
