//! Metrics in the Prometheus text exposition format (version 0.0.4): the writer every role's
//! `GET /metrics` renders with, the latency histogram the loops and the fetcher record into,
//! and a reader of the format for what shows other roles' metrics (the dashboard).
//!
//! ```
//! use crawlfleet_core::metrics::Exposition;
//!
//! let mut m = Exposition::new();
//! m.counter("crawlfleet_pages_fetched_total", "Pages fetched.", &[("collection", "web")], 12.0);
//! m.gauge("crawlfleet_queue_entries", "URIs queued.", &[("collection", "we\"b")], 3.0);
//! let text = m.finish();
//! assert!(text.starts_with("# HELP crawlfleet_pages_fetched_total Pages fetched.\n"));
//! assert!(text.contains("# TYPE crawlfleet_pages_fetched_total counter\n"));
//! assert!(text.contains("crawlfleet_queue_entries{collection=\"we\\\"b\"} 3\n"));
//! ```
//!
//! The writer is small on purpose: the roles already keep their figures (FSCADM statistics,
//! the duplicate server's counters, ...), so `/metrics` renders a snapshot of them rather than
//! registering metric objects of its own. A family's samples may be given in any order; each
//! family is written once, with its `# HELP` and `# TYPE` lines, in the order families first
//! appear.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// The content type of the text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A metric family's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up (names end in `_total`).
    Counter,
    /// Any value.
    Gauge,
    /// Cumulative buckets, `_sum` and `_count`.
    Histogram,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

struct Family {
    name: String,
    help: String,
    kind: Kind,
    lines: String,
}

/// A `/metrics` answer being written.
#[derive(Default)]
pub struct Exposition {
    families: Vec<Family>,
    index: HashMap<String, usize>,
}

/// Escapes a label value: backslash, double quote and line feed.
pub fn escape_label(v: &str, out: &mut String) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// A sample value as the format writes it (`NaN`, `+Inf`, `-Inf`, integers without a point).
pub fn format_value(v: f64, out: &mut String) {
    if v.is_nan() {
        out.push_str("NaN");
    } else if v.is_infinite() {
        out.push_str(if v > 0.0 { "+Inf" } else { "-Inf" });
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        let _ = write!(out, "{}", v as i64);
    } else {
        let _ = write!(out, "{v}");
    }
}

fn sample(
    out: &mut String,
    name: &str,
    labels: &[(&str, &str)],
    extra: Option<(&str, &str)>,
    v: f64,
) {
    out.push_str(name);
    let all = labels.iter().copied().chain(extra);
    let mut first = true;
    for (k, val) in all {
        out.push(if first { '{' } else { ',' });
        first = false;
        out.push_str(k);
        out.push_str("=\"");
        escape_label(val, out);
        out.push('"');
    }
    if !first {
        out.push('}');
    }
    out.push(' ');
    format_value(v, out);
    out.push('\n');
}

impl Exposition {
    /// An empty answer.
    pub fn new() -> Exposition {
        Exposition::default()
    }

    fn family(&mut self, name: &str, help: &str, kind: Kind) -> &mut String {
        let i = match self.index.get(name) {
            Some(&i) => i,
            None => {
                self.families.push(Family {
                    name: name.to_string(),
                    help: help.to_string(),
                    kind,
                    lines: String::new(),
                });
                self.index.insert(name.to_string(), self.families.len() - 1);
                self.families.len() - 1
            }
        };
        &mut self.families[i].lines
    }

    /// Declares a family with no samples yet (it is written with its HELP and TYPE lines).
    pub fn declare(&mut self, name: &str, help: &str, kind: Kind) {
        self.family(name, help, kind);
    }

    /// A counter sample (`name` ends in `_total`).
    pub fn counter(&mut self, name: &str, help: &str, labels: &[(&str, &str)], v: f64) {
        let out = self.family(name, help, Kind::Counter);
        sample(out, name, labels, None, v.max(0.0));
    }

    /// A gauge sample.
    pub fn gauge(&mut self, name: &str, help: &str, labels: &[(&str, &str)], v: f64) {
        let out = self.family(name, help, Kind::Gauge);
        sample(out, name, labels, None, v);
    }

    /// A histogram's samples: the cumulative buckets of `h`, its sum and count.
    pub fn histogram(&mut self, name: &str, help: &str, labels: &[(&str, &str)], h: &Snapshot) {
        let out = self.family(name, help, Kind::Histogram);
        let bucket = format!("{name}_bucket");
        let mut cumulative = 0u64;
        let mut le = String::new();
        for (i, upper) in h.bounds.iter().enumerate() {
            cumulative += h.counts[i];
            le.clear();
            format_value(*upper, &mut le);
            sample(out, &bucket, labels, Some(("le", &le)), cumulative as f64);
        }
        let count = cumulative + h.counts.last().copied().unwrap_or(0);
        sample(out, &bucket, labels, Some(("le", "+Inf")), count as f64);
        sample(out, &format!("{name}_sum"), labels, None, h.sum);
        sample(out, &format!("{name}_count"), labels, None, count as f64);
    }

    /// The text: every family with its HELP and TYPE lines, then its samples.
    pub fn finish(self) -> String {
        let mut out = String::new();
        for f in self.families {
            out.push_str("# HELP ");
            out.push_str(&f.name);
            out.push(' ');
            for c in f.help.chars() {
                match c {
                    '\\' => out.push_str("\\\\"),
                    '\n' => out.push_str("\\n"),
                    c => out.push(c),
                }
            }
            let _ = write!(out, "\n# TYPE {} {}\n", f.name, f.kind.name());
            out.push_str(&f.lines);
        }
        out
    }
}

/// Upper bounds, in seconds, of the latency histograms: 100 µs to 60 s.
pub const LATENCY_BOUNDS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    10.0, 60.0,
];

/// A latency histogram several threads record into and `/metrics` reads: a count per bucket
/// of [`LATENCY_BOUNDS`] (and one above the last), and the sum in microseconds. Every field is
/// a lone relaxed counter: a reader may see a sample's bucket before its sum, which a scrape
/// tolerates (the next one is consistent again).
#[derive(Debug, Default)]
pub struct Histogram {
    counts: [AtomicU64; LATENCY_BOUNDS.len() + 1],
    sum_micros: AtomicU64,
}

/// What a [`Histogram`] held when read.
#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot {
    /// The buckets' upper bounds.
    pub bounds: Vec<f64>,
    /// Samples per bucket (not cumulative), one more than `bounds` (the samples above).
    pub counts: Vec<u64>,
    /// The sum of the samples.
    pub sum: f64,
}

impl Histogram {
    /// Records one duration in seconds.
    pub fn record(&self, seconds: f64) {
        let i = LATENCY_BOUNDS
            .iter()
            .position(|b| seconds <= *b)
            .unwrap_or(LATENCY_BOUNDS.len());
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        let micros = (seconds.max(0.0) * 1e6).round() as u64;
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
    }

    /// The counts now.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            bounds: LATENCY_BOUNDS.to_vec(),
            counts: self
                .counts
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .collect(),
            sum: self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6,
        }
    }
}

/// One sample read back from the text format: name, labels, value.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// The metric name (with `_bucket`, `_sum`, ... for histograms).
    pub name: String,
    /// Label names and values, unescaped, in the order written.
    pub labels: Vec<(String, String)>,
    /// The value.
    pub value: f64,
}

impl Sample {
    /// The value of label `k`.
    pub fn label(&self, k: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    }
}

/// Reads the samples of a text-format answer; comment lines are skipped, and so is a line that
/// is not a sample (the reader is for showing figures, not for checking the format: promtool
/// does that in the tests).
pub fn parse(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(parse_line)
        .collect()
}

fn parse_line(line: &str) -> Option<Sample> {
    let name_end = line.find(['{', ' '])?;
    let name = line[..name_end].to_string();
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(r) = rest.strip_prefix('{') {
        let mut chars = r.char_indices();
        let mut key = String::new();
        loop {
            let (i, c) = chars.next()?;
            match c {
                '}' => {
                    rest = &r[i + 1..];
                    break;
                }
                ',' | ' ' => {}
                '=' => {
                    if chars.next()?.1 != '"' {
                        return None;
                    }
                    let mut v = String::new();
                    loop {
                        match chars.next()?.1 {
                            '"' => break,
                            '\\' => match chars.next()?.1 {
                                'n' => v.push('\n'),
                                c => v.push(c),
                            },
                            c => v.push(c),
                        }
                    }
                    labels.push((std::mem::take(&mut key), v));
                }
                c => key.push(c),
            }
        }
    }
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    Some(Sample {
        name,
        labels,
        value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_are_written_once_with_help_and_type() {
        let mut m = Exposition::new();
        m.counter("a_total", "A.", &[("c", "x")], 1.0);
        m.gauge("b", "B\\ with\nnewline.", &[], 2.5);
        m.counter("a_total", "A.", &[("c", "y")], 2.0);
        m.declare("c_total", "C.", Kind::Counter);
        let t = m.finish();
        assert_eq!(
            t,
            "# HELP a_total A.\n# TYPE a_total counter\na_total{c=\"x\"} 1\na_total{c=\"y\"} 2\n\
             # HELP b B\\\\ with\\nnewline.\n# TYPE b gauge\nb 2.5\n\
             # HELP c_total C.\n# TYPE c_total counter\n"
        );
    }

    #[test]
    fn label_values_are_escaped_and_read_back() {
        let mut m = Exposition::new();
        let odd = "a\"b\\c\nd";
        m.gauge("g", "G.", &[("v", odd), ("w", "plain")], f64::NAN);
        let t = m.finish();
        assert!(
            t.contains("g{v=\"a\\\"b\\\\c\\nd\",w=\"plain\"} NaN\n"),
            "{t}"
        );
        let s = parse(&t);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].label("v"), Some(odd));
        assert_eq!(s[0].label("w"), Some("plain"));
        assert!(s[0].value.is_nan());
    }

    #[test]
    fn histogram_buckets_are_cumulative() {
        let h = Histogram::default();
        for s in [0.00005, 0.003, 0.003, 100.0] {
            h.record(s);
        }
        let mut m = Exposition::new();
        m.histogram("lat_seconds", "L.", &[("loop", "x")], &h.snapshot());
        let t = m.finish();
        let s = parse(&t);
        let bucket = |le: &str| {
            s.iter()
                .find(|x| x.name == "lat_seconds_bucket" && x.label("le") == Some(le))
                .map(|x| x.value)
        };
        assert_eq!(bucket("0.0001"), Some(1.0));
        assert_eq!(bucket("0.0025"), Some(1.0));
        assert_eq!(bucket("0.005"), Some(3.0));
        assert_eq!(bucket("60"), Some(3.0));
        assert_eq!(bucket("+Inf"), Some(4.0));
        let count = s.iter().find(|x| x.name == "lat_seconds_count").unwrap();
        assert_eq!(count.value, 4.0);
        let sum = s.iter().find(|x| x.name == "lat_seconds_sum").unwrap();
        assert!((sum.value - 100.00605).abs() < 1e-6, "{}", sum.value);
    }

    #[test]
    fn counters_never_go_negative_and_integers_have_no_point() {
        let mut m = Exposition::new();
        m.counter("x_total", "X.", &[], -3.0);
        m.gauge("y", "Y.", &[], 1e20);
        let t = m.finish();
        assert!(t.contains("x_total 0\n"));
        assert!(t.contains("y 100000000000000000000\n"));
    }
}
