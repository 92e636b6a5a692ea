use super::{figure, n, plot_bars};
use crate::dsp::bench::{BenchConfig, BenchResult};
use maud::{html, Markup};

pub fn section(cfg: &BenchConfig, r: &[BenchResult]) -> Markup {
    let bars: Vec<(String, f64)> = r.iter().map(|b| (label(b), b.ns_per_frame)).collect();
    html! {
        h3 { "Plugin cost" }
        (figure(plot_bars("Cost per frame (median block)", "ns per frame", &bars),
            &format!("Wall time per audio frame of one instance at {} Hz, {}-frame blocks, nothing else running. Lower is better.", cfg.rate, cfg.buffer_frames)))
        table.bench {
            tr { th { "plugin" } th { "params" } th { "inst" } th { "ns/frame p50" } th { "ns/frame min" }
                 th { "CPU ns/frame" } th { "% core/inst" } th { "inst/core" } }
            @for b in r {
                tr { td { (b.plugin) } td { (b.params) } (n(b.instances)) (n(format!("{:.1}", b.ns_per_frame)))
                     (n(format!("{:.1}", b.ns_per_frame_min))) (n(format!("{:.1}", b.cpu_ns_per_frame_mean)))
                     (n(format!("{:.2}", b.core_percent))) (n(format!("{:.1}", b.instances_per_core))) }
            }
        }
    }
}

pub(crate) fn label(b: &BenchResult) -> String {
    let mut s = b.plugin.clone();
    if !b.params.is_empty() {
        s.push_str(&format!("({})", b.params));
    }
    if b.instances > 1 {
        s.push_str(&format!(":{}", b.instances));
    }
    s
}
