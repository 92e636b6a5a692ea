//! SVG charts drawn with plotters into a String, for inlining into the HTML report: no
//! fonts or files are referenced, so the page stays self-contained.

use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// One named curve.
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

pub const W: u32 = 760;
pub const H: u32 = 340;

/// Axes of a line chart; `log_y` for counts spanning decades (OSADL's latency plots).
#[derive(Default)]
pub struct Axes<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub log_y: bool,
    /// Log x as well, for distributions whose tails are decades above their medians.
    pub log_x: bool,
    /// Fixed x extent (the run's duration for event timelines), instead of the data's.
    pub x_range: Option<(f64, f64)>,
    /// Draw markers only (sparse events) instead of lines.
    pub points_only: bool,
    /// Label only whole numbers on x (track counts).
    pub x_integer: bool,
    /// A linear y axis spanning the data only, not from 0 (estimates near a large value).
    pub y_tight: bool,
    /// Draw the line y = x with this legend label (measured against modelled values).
    pub diagonal: Option<&'a str>,
}

/// Pixels per legend row under the plot.
const LEGEND_ROW: u32 = 20;

/// The legend's layout under the plot: entries per row (fewer for long labels) and rows.
fn legend_layout(series: &[Series]) -> (usize, u32) {
    let longest = series
        .iter()
        .map(|s| s.label.chars().count())
        .max()
        .unwrap_or(0);
    let per_row = match longest {
        0..=28 => 3,
        29..=50 => 2,
        _ => 1,
    };
    (per_row, series.len().div_ceil(per_row) as u32)
}

/// Labels of a log axis: 1, 2, 5 times each power of ten within `x0..x1`, so a range of
/// less than a decade (a CDF from 200 to 900 µs) still has numbers under it.
fn log_keys(x0: f64, x1: f64) -> Vec<f64> {
    if !(x0 > 0.0 && x1 > x0 && x0.is_finite() && x1.is_finite()) {
        return Vec::new();
    }
    let mut keys = Vec::new();
    let mut decade = 10f64.powf(x0.log10().floor());
    while decade <= x1 && keys.len() < 64 {
        for m in [1.0, 2.0, 5.0] {
            let k = decade * m;
            if k >= x0 && k <= x1 {
                keys.push(k);
            }
        }
        decade *= 10.0;
    }
    if keys.len() < 3 {
        // Under a factor of 2.5: the ends and the middle, rounded to two digits.
        keys = [x0, (x0 * x1).sqrt(), x1]
            .iter()
            .map(|&v| {
                let p = 10f64.powf(v.log10().floor() - 1.0);
                (v / p).round() * p
            })
            .filter(|&v| v >= x0 && v <= x1)
            .collect();
    }
    keys
}

fn bounds(series: &[Series], log_x: bool, log_y: bool, y_tight: bool) -> (f64, f64, f64, f64) {
    let mut x0 = f64::INFINITY;
    let mut x1 = f64::NEG_INFINITY;
    let mut y0 = f64::INFINITY;
    let mut y1 = f64::NEG_INFINITY;
    for (x, y) in series.iter().flat_map(|s| s.points.iter().copied()) {
        if !x.is_finite() || !y.is_finite() || (log_y && y <= 0.0) || (log_x && x <= 0.0) {
            continue;
        }
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if !x0.is_finite() {
        return (0.0, 1.0, if log_y { 1.0 } else { 0.0 }, 10.0);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    if log_x {
        x0 /= 1.2;
        x1 *= 1.2;
    }
    let b = if log_y {
        (x0, x1, y0 / 1.5, y1 * 2.0)
    } else if y_tight {
        let pad = ((y1 - y0) * 0.1).max(y1.abs() * 1e-4).max(1e-9);
        (x0, x1, y0 - pad, y1 + pad)
    } else {
        let lo = y0.min(0.0);
        (x0, x1, lo, if y1 > lo { y1 * 1.05 } else { lo + 1.0 })
    };
    // Values near f64::MAX (a corrupted file) overflow the padding: draw empty axes.
    if [b.0, b.1, b.2, b.3].iter().all(|v| v.is_finite()) {
        b
    } else {
        (0.0, 1.0, if log_y { 1.0 } else { 0.0 }, 10.0)
    }
}

/// `(x, y)` moved onto the edge of the axes when it lies outside them. plotters maps a point
/// to an i32 pixel, which overflows for a value far outside the axes (an event a file places
/// 10^10 s into a 3 s run); such a point is shown where the axes end. None for a point that
/// cannot be drawn at all.
fn clip((x, y): (f64, f64), (x0, x1, y0, y1): (f64, f64, f64, f64)) -> Option<(f64, f64)> {
    (x.is_finite() && y.is_finite()).then(|| (x.max(x0).min(x1), y.max(y0).min(y1)))
}

/// A line (or marker) chart with a legend; an empty string never comes back, even for no
/// data (the axes are drawn with a "no data" title) so a section's layout does not shift.
pub fn line_chart(axes: &Axes, series: &[Series]) -> String {
    let mut svg = String::new();
    let (mut x0, mut x1, y0, y1) = bounds(series, axes.log_x, axes.log_y, axes.y_tight);
    if let Some((a, b)) = axes
        .x_range
        .filter(|(a, b)| a.is_finite() && b.is_finite() && b > a)
    {
        (x0, x1) = (a, b);
    } else if axes.x_integer {
        // Room for the markers of the first and last whole-number column.
        (x0, x1) = (x0 - 0.25, x1 + 0.25);
    }
    // The legend goes under the plot, never over a curve.
    let (per_row, rows) = legend_layout(series);
    let legend_h = if series.is_empty() {
        0
    } else {
        rows * LEGEND_ROW + 8
    };
    {
        let root = SVGBackend::with_string(&mut svg, (W, H + legend_h)).into_drawing_area();
        let (plot, legend) = root.split_vertically(H);
        let _ = draw_lines(&plot, axes, series, (x0, x1, y0, y1));
        let _ = draw_legend(&legend, series, per_row);
        let _ = root.present();
    }
    svg
}

fn draw_legend(
    area: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    series: &[Series],
    per_row: usize,
) -> DrawResult {
    let col_w = (W as i32 - 100) / per_row as i32;
    let max_chars = (col_w as usize / 7).saturating_sub(4);
    for (i, s) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let x = 80 + (i % per_row) as i32 * col_w;
        let y = 4 + (i / per_row) as i32 * LEGEND_ROW as i32 + LEGEND_ROW as i32 / 2;
        area.draw(&PathElement::new(
            vec![(x, y), (x + 18, y)],
            color.stroke_width(3),
        ))?;
        let label: String = if s.label.chars().count() > max_chars {
            let mut t: String = s.label.chars().take(max_chars.saturating_sub(1)).collect();
            t.push('…');
            t
        } else {
            s.label.clone()
        };
        area.draw(&Text::new(
            label,
            (x + 24, y),
            ("sans-serif", 13)
                .into_font()
                .color(&BLACK)
                .pos(Pos::new(HPos::Left, VPos::Center)),
        ))?;
    }
    Ok(())
}

type DrawResult = Result<(), Box<dyn std::error::Error>>;

fn draw_lines(
    root: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    axes: &Axes,
    series: &[Series],
    (x0, x1, y0, y1): (f64, f64, f64, f64),
) -> DrawResult {
    root.fill(&WHITE)?;
    let title = if series.iter().all(|s| s.points.is_empty()) {
        format!("{} (no data)", axes.title)
    } else {
        axes.title.to_string()
    };
    let mut b = ChartBuilder::on(root);
    b.caption(title, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(70);
    macro_rules! body {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(axes.x_label)
                .y_desc(axes.y_label)
                .light_line_style(RGBColor(235, 235, 235))
                .x_label_formatter(&|v| {
                    if axes.x_integer && (v - v.round()).abs() > 1e-6 {
                        String::new()
                    } else {
                        tick(*v)
                    }
                })
                .y_label_formatter(&|v| tick_in(*v, y1 - y0, axes.log_y))
                .draw()?;
            for (i, s) in series.iter().enumerate() {
                let color = Palette99::pick(i).to_rgba();
                let pts: Vec<(f64, f64)> = s
                    .points
                    .iter()
                    .copied()
                    .filter(|&(x, y)| (!axes.log_y || y > 0.0) && (!axes.log_x || x > 0.0))
                    .filter_map(|p| clip(p, (x0, x1, y0, y1)))
                    .collect();
                if axes.points_only {
                    chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
                } else {
                    // A few points (a grid's cells, a short run's hops) get markers too, so
                    // a single one is still seen; reference lines do not.
                    if pts.len() <= 60 && !is_reference(&pts) {
                        chart
                            .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
                    }
                    chart.draw_series(LineSeries::new(pts, color.stroke_width(2)))?;
                }
            }
            if let Some(label) = axes.diagonal {
                let (a, b) = (x0.max(y0), x1.min(y1));
                if b > a {
                    let grey = RGBColor(110, 110, 110);
                    chart.draw_series(DashedLineSeries::new(
                        vec![(a, a), (b, b)],
                        6,
                        4,
                        grey.stroke_width(1),
                    ))?;
                    chart.draw_series(std::iter::once(Text::new(
                        label.to_string(),
                        (b, b),
                        ("sans-serif", 12)
                            .into_font()
                            .color(&grey)
                            .pos(Pos::new(HPos::Right, VPos::Bottom)),
                    )))?;
                }
            }
        }};
    }
    let keys = log_keys(x0, x1);
    match (axes.log_x, axes.log_y) {
        (false, false) => body!(b.build_cartesian_2d(x0..x1, y0..y1)?),
        (false, true) => body!(b.build_cartesian_2d(x0..x1, (y0..y1).log_scale())?),
        (true, false) => {
            body!(b.build_cartesian_2d((x0..x1).log_scale().with_key_points(keys), y0..y1)?)
        }
        (true, true) => body!(b.build_cartesian_2d(
            (x0..x1).log_scale().with_key_points(keys),
            (y0..y1).log_scale()
        )?),
    }
    Ok(())
}

/// A tick of a linear axis spanning `range`: as many decimals as the tick step needs
/// (a tight axis around 160 frames reads 160.2, 160.4 — not 160 eight times).
fn tick_in(v: f64, range: f64, log: bool) -> String {
    if log || range >= 10.0 || range <= 0.0 {
        return tick(v);
    }
    let decimals = (-(range / 10.0).log10()).ceil().clamp(0.0, 6.0) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A horizontal or vertical two-point line: what [`hline`] and [`vline`] make.
fn is_reference(pts: &[(f64, f64)]) -> bool {
    pts.len() == 2 && (pts[0].0 == pts[1].0 || pts[0].1 == pts[1].1)
}

/// Tick labels without plotters' fixed one decimal: "1000", "0.001", "2.5".
fn tick(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 10_000.0 && (v / 1000.0 - (v / 1000.0).round()).abs() < 1e-9 {
        // Log axes crowd their top decade: "60k" fits where "60000" collides.
        format!("{:.0}k", v / 1000.0)
    } else if a >= 100.0 || (v - v.round()).abs() < 1e-9 * a.max(1.0) && a >= 1.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        let s = format!("{v:.6}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// A vertical bar chart, one bar per named value.
pub fn bar_chart(title: &str, y_label: &str, bars: &[(String, f64)]) -> String {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        let _ = draw_bars(&root, title, y_label, bars);
        let _ = root.present();
    }
    svg
}

fn draw_bars(
    root: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    title: &str,
    y_label: &str,
    bars: &[(String, f64)],
) -> DrawResult {
    root.fill(&WHITE)?;
    let n = bars.len().max(1) as u32;
    let top = bars
        .iter()
        .map(|b| b.1)
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max)
        .max(1e-9)
        * 1.15;
    let top = if top.is_finite() { top } else { f64::MAX };
    let bars: Vec<(String, f64)> = bars
        .iter()
        .map(|(n, v)| {
            (
                n.clone(),
                if v.is_finite() {
                    v.clamp(0.0, top)
                } else {
                    0.0
                },
            )
        })
        .collect();
    let bars = bars.as_slice();
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((0u32..n - 1).into_segmented(), 0f64..top)?;
    let names: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n as usize)
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => names.get(*i as usize).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .y_desc(y_label)
        .y_label_formatter(&|v| tick(*v))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;
    chart.draw_series(
        Histogram::vertical(&chart)
            .margin(20)
            .style(Palette99::pick(0).filled())
            .data(bars.iter().enumerate().map(|(i, b)| (i as u32, b.1))),
    )?;
    // The value on top of each bar: the figure a reader wants without a ruler.
    chart.draw_series(bars.iter().enumerate().map(|(i, b)| {
        Text::new(
            format!("{:.1}", b.1),
            (SegmentValue::CenterOf(i as u32), b.1 + top * 0.01),
            ("sans-serif", 13)
                .into_font()
                .color(&BLACK)
                .pos(Pos::new(HPos::Center, VPos::Bottom)),
        )
    }))?;
    Ok(())
}

/// At most about `max` points of a time series, keeping each bucket's lowest and highest
/// value in time order: a spike survives decimation, which is what a latency plot is for.
pub fn decimate(points: &[(f64, f64)], max: usize) -> Vec<(f64, f64)> {
    if points.len() <= max || max < 4 {
        return points.to_vec();
    }
    let per = points.len().div_ceil(max / 2);
    let mut out = Vec::with_capacity(max + 2);
    for chunk in points.chunks(per) {
        let lo = chunk
            .iter()
            .enumerate()
            .min_by(|a, b| a.1 .1.total_cmp(&b.1 .1))
            .map(|(i, _)| i);
        let hi = chunk
            .iter()
            .enumerate()
            .max_by(|a, b| a.1 .1.total_cmp(&b.1 .1))
            .map(|(i, _)| i);
        if let (Some(lo), Some(hi)) = (lo, hi) {
            let (a, b) = if lo <= hi { (lo, hi) } else { (hi, lo) };
            out.push(chunk[a]);
            if b != a {
                out.push(chunk[b]);
            }
        }
    }
    out
}

/// A horizontal reference line (a deadline, a model value) across `x0..x1`, as a series.
pub fn hline(label: impl Into<String>, y: f64, x0: f64, x1: f64) -> Series {
    Series {
        label: label.into(),
        points: vec![(x0, y), (x1, y)],
    }
}

/// A vertical reference line at `x` from `y0` to `y1`, as a series.
pub fn vline(label: impl Into<String>, x: f64, y0: f64, y1: f64) -> Series {
    Series {
        label: label.into(),
        points: vec![(x, y0), (x, y1)],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_axis_shorter_than_a_decade_still_has_labels() {
        let k = log_keys(150.0, 900.0);
        assert!(
            k.len() >= 2 && k.iter().all(|&v| (150.0..=900.0).contains(&v)),
            "{k:?}"
        );
        assert_eq!(log_keys(1.0, 1000.0).len(), 10);
        // Under a factor of 2.5 there is no 1-2-5 step inside: three rounded values.
        let k = log_keys(310.0, 640.0);
        assert_eq!(k.len(), 3, "{k:?}");
        assert!(k.iter().all(|&v| (310.0..=640.0).contains(&v)), "{k:?}");
        assert!(log_keys(0.0, 10.0).is_empty());
    }

    #[test]
    fn the_legend_sits_under_the_plot() {
        let s = |l: &str, y: f64| Series {
            label: l.into(),
            points: vec![(1.0, y), (10.0, y + 1.0)],
        };
        let svg = line_chart(&Axes::default(), &[s("one", 1.0), s("two", 2.0)]);
        assert!(
            svg.contains(&format!("height=\"{}\"", H + LEGEND_ROW + 8)),
            "{}",
            &svg[..200]
        );
        // plotters writes a text element's content on a line of its own.
        let flat = svg.replace('\n', "");
        assert!(flat.contains(">one<") && flat.contains(">two<"), "{svg}");
    }

    #[test]
    fn decimate_keeps_spikes_and_order() {
        let mut pts: Vec<(f64, f64)> = (0..10_000).map(|i| (i as f64, 1.0)).collect();
        pts[7_777].1 = 50.0;
        pts[1_234].1 = -3.0;
        let d = decimate(&pts, 500);
        assert!(d.len() <= 502, "{}", d.len());
        assert!(d.contains(&(7_777.0, 50.0)));
        assert!(d.contains(&(1_234.0, -3.0)));
        assert!(d.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(decimate(&pts[..10], 500).len(), 10);
    }
}
