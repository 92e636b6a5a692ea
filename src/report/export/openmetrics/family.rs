//! The Prometheus text exposition format (version 0.0.4, the one `promtool check metrics` and
//! node_exporter's textfile collector parse) as a small builder: metric families, each with
//! its series, rendered in one go. The watch's live snapshot and the result documents both
//! go through it, so that one name always has one type and a series is written once.

use std::fmt::Write as _;

/// A metric family's type, as its `# TYPE` line says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    Counter,
    Gauge,
    Histogram,
    Summary,
}

impl Type {
    fn word(self) -> &'static str {
        match self {
            Type::Counter => "counter",
            Type::Gauge => "gauge",
            Type::Histogram => "histogram",
            Type::Summary => "summary",
        }
    }
}

/// Label names and values of one series, in the order given.
pub type Labels = Vec<(&'static str, String)>;

/// One sample of a series: name suffix (`_bucket`, `_sum`…), one extra label such as `le`,
/// value.
type Sample = (&'static str, Option<(&'static str, String)>, f64);

/// One series: its labels and its samples.
#[derive(Debug, Clone)]
struct Series {
    labels: Labels,
    samples: Vec<Sample>,
}

#[derive(Debug, Clone)]
struct Family {
    name: String,
    help: &'static str,
    ty: Type,
    series: Vec<Series>,
}

/// Metric families in the order they were first added. A series added twice with the same
/// labels replaces the earlier one: callers add older results first, so the newest wins and
/// the output never holds a duplicate series (which Prometheus refuses).
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    families: Vec<Family>,
}

impl Metrics {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether nothing was added.
    pub fn is_empty(&self) -> bool {
        self.families.is_empty()
    }

    fn put(&mut self, name: &str, help: &'static str, ty: Type, s: Series) {
        debug_assert!(valid_name(name), "{name}");
        let i = match self.families.iter().position(|f| f.name == name) {
            Some(i) => i,
            None => {
                self.families.push(Family {
                    name: name.into(),
                    help,
                    ty,
                    series: Vec::new(),
                });
                self.families.len() - 1
            }
        };
        let f = &mut self.families[i];
        assert_eq!(f.ty, ty, "{name} given two types");
        match f.series.iter_mut().find(|o| o.labels == s.labels) {
            Some(o) => *o = s,
            None => f.series.push(s),
        }
    }

    /// A gauge: a value that can go up and down.
    pub fn gauge(&mut self, name: &str, help: &'static str, labels: Labels, value: f64) {
        let s = Series {
            labels,
            samples: vec![("", None, value)],
        };
        self.put(name, help, Type::Gauge, s);
    }

    /// A counter; `name` ends in `_total` as Prometheus' naming rules ask.
    pub fn counter(&mut self, name: &str, help: &'static str, labels: Labels, value: f64) {
        debug_assert!(name.ends_with("_total"), "{name}");
        let s = Series {
            labels,
            samples: vec![("", None, value)],
        };
        self.put(name, help, Type::Counter, s);
    }

    /// A histogram from `(upper bound, count of observations ≤ it)` pairs in increasing
    /// order (cumulative), the observations' sum and their count (the `+Inf` bucket).
    pub fn histogram(
        &mut self,
        name: &str,
        help: &'static str,
        labels: Labels,
        buckets: &[(f64, u64)],
        sum: f64,
        count: u64,
    ) {
        let mut samples: Vec<_> = buckets
            .iter()
            .map(|&(le, n)| ("_bucket", Some(("le", number(le))), n as f64))
            .collect();
        samples.push(("_bucket", Some(("le", "+Inf".into())), count as f64));
        samples.push(("_sum", None, sum));
        samples.push(("_count", None, count as f64));
        self.put(name, help, Type::Histogram, Series { labels, samples });
    }

    /// A summary from `(quantile, value)` pairs, the observations' sum and count.
    pub fn summary(
        &mut self,
        name: &str,
        help: &'static str,
        labels: Labels,
        quantiles: &[(f64, f64)],
        sum: f64,
        count: u64,
    ) {
        let mut samples: Vec<_> = quantiles
            .iter()
            .map(|&(q, v)| ("", Some(("quantile", number(q))), v))
            .collect();
        samples.push(("_sum", None, sum));
        samples.push(("_count", None, count as f64));
        self.put(name, help, Type::Summary, Series { labels, samples });
    }

    /// The text exposition: `# HELP`, `# TYPE`, then the samples of each family; ends with
    /// a newline (the textfile collector needs the last line terminated).
    pub fn render(&self) -> String {
        let mut out = String::new();
        for f in &self.families {
            let _ = writeln!(out, "# HELP {} {}", f.name, escape_help(f.help));
            let _ = writeln!(out, "# TYPE {} {}", f.name, f.ty.word());
            for s in &f.series {
                for (suffix, extra, value) in &s.samples {
                    out.push_str(&f.name);
                    out.push_str(suffix);
                    let all = s.labels.iter().map(|(k, v)| (*k, v.as_str()));
                    let all: Vec<(&str, &str)> =
                        all.chain(extra.iter().map(|(k, v)| (*k, v.as_str()))).collect();
                    if !all.is_empty() {
                        out.push('{');
                        for (i, (k, v)) in all.iter().enumerate() {
                            if i > 0 {
                                out.push(',');
                            }
                            let _ = write!(out, "{k}=\"{}\"", escape_label(v));
                        }
                        out.push('}');
                    }
                    let _ = writeln!(out, " {}", number(*value));
                }
            }
        }
        out
    }
}

/// A number as the format writes it: `NaN`, `+Inf`, `-Inf`, else Rust's shortest exact
/// decimal (never an exponent the parser could misread).
pub fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

/// A label value: backslash, double quote and line feed escaped, as the format asks.
fn escape_label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

/// `[a-zA-Z_:][a-zA-Z0-9_:]*`, Prometheus' metric name rule.
fn valid_name(n: &str) -> bool {
    let mut c = n.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_' || f == ':')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_' || x == ':')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_render_with_help_type_and_escaped_labels() {
        let mut m = Metrics::new();
        m.counter(
            "x_total",
            "Things.",
            vec![("name", "a\"b\\c\nd".into())],
            3.0,
        );
        m.histogram("h_seconds", "H.", vec![], &[(0.001, 1), (0.01, 4)], 0.02, 5);
        m.summary("s_seconds", "S.", vec![("k", "v".into())], &[(0.5, 0.25)], 1.5, 2);
        assert_eq!(
            m.render(),
            "# HELP x_total Things.\n# TYPE x_total counter\nx_total{name=\"a\\\"b\\\\c\\nd\"} 3\n\
# HELP h_seconds H.\n# TYPE h_seconds histogram\nh_seconds_bucket{le=\"0.001\"} 1\nh_seconds_bucket{le=\"0.01\"} 4\n\
h_seconds_bucket{le=\"+Inf\"} 5\nh_seconds_sum 0.02\nh_seconds_count 5\n\
# HELP s_seconds S.\n# TYPE s_seconds summary\ns_seconds{k=\"v\",quantile=\"0.5\"} 0.25\ns_seconds_sum{k=\"v\"} 1.5\ns_seconds_count{k=\"v\"} 2\n"
        );
    }

    #[test]
    fn the_same_series_twice_keeps_the_last() {
        let mut m = Metrics::new();
        m.gauge("g", "G.", vec![("a", "1".into())], 1.0);
        m.gauge("g", "G.", vec![("a", "2".into())], 2.0);
        m.gauge("g", "G.", vec![("a", "1".into())], 3.0);
        assert_eq!(
            m.render(),
            "# HELP g G.\n# TYPE g gauge\ng{a=\"1\"} 3\ng{a=\"2\"} 2\n"
        );
    }

    #[test]
    fn numbers_are_written_as_the_parser_reads_them() {
        assert_eq!(number(1e-7), "0.0000001");
        assert_eq!(number(2.0), "2");
        assert_eq!(number(f64::NAN), "NaN");
        assert_eq!(number(f64::NEG_INFINITY), "-Inf");
    }
}
