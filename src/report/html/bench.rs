use super::{figure, n, plot_bars};
use crate::dsp::plugin_cost::{BenchConfig, BenchResult};
use maud::{html, Markup};

pub fn section(cfg: &BenchConfig, r: &[BenchResult]) -> Markup {
    use crate::units::format_ns;
    let bars: Vec<(String, f64)> = r.iter().map(|b| (label(b), b.ns_per_frame)).collect();
    let signal = r
        .first()
        .map_or(cfg.signal.describe(), |b| b.signal_description.as_str());
    let block = |b: &BenchResult, f: fn(&crate::dsp::plugin_cost::BlockStats) -> u64| {
        b.per_block.map_or("—".into(), |s| format_ns(f(&s)))
    };
    html! {
        h3 { "Plugin cost" }
        (figure(plot_bars("Cost per frame (median block)", "ns per frame", &bars),
            &format!("Wall time per audio frame of one instance at {} Hz, {}-frame blocks, input {}, nothing else running. Lower is better.", cfg.rate, cfg.buffer_frames, signal)))
        table.bench {
            tr { th { "plugin" } th { "params" } th { "K" } th { "ns/frame mean" } th { "block p50" } th { "block p99" }
                 th { "block p99.9" } th { "block max" } th { "ns/frame median" } th { "CPU ns/frame" }
                 th { "% core/inst" } th { "inst/core" } }
            @for b in r {
                tr { td { (b.plugin) } td { (b.params) } (n(b.instances))
                     (n(b.mean_ns_per_frame.map_or("—".into(), |m| format!("{m:.1}"))))
                     (n(block(b, |s| s.p50_ns))) (n(block(b, |s| s.p99_ns)))
                     (n(block(b, |s| s.p999_ns))) (n(block(b, |s| s.max_ns)))
                     (n(format!("{:.1}", b.ns_per_frame))) (n(format!("{:.1}", b.cpu_ns_per_frame_mean)))
                     (n(format!("{:.2}", b.core_percent))) (n(format!("{:.1}", b.instances_per_core))) }
            }
        }
        p { "K: distinct instances in series; per-frame figures are per instance. ns/frame mean: all timed blocks' wall time / frames / K. "
            "Block p50 … max: wall time of one block through all K instances. ns/frame median: the median ~50 µs group, robust against host steal; "
            "% core and instances per core derive from it." }
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
