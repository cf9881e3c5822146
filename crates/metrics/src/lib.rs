//! Metric primitives shared by the layers that measure (storage, the adapter, the
//! wire) and the one that reports them (`floe-http`'s `/metrics`): a latency
//! [`Histogram`] that costs two atomic additions per observation, and a writer of
//! the Prometheus text exposition format.
//!
//! No registry and no global state: each component owns its metrics and the
//! reporter asks for snapshots when it is scraped, so measuring adds nothing to a
//! hot path beyond the atomics.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds (seconds) of latency buckets: from 1 ms (a small SQLite write) to a
/// minute (a slow Iceberg commit with retries).
pub const LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// A histogram of durations with fixed bucket bounds.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    /// Observations per bucket (not cumulative); the last one is `+Inf`.
    buckets: Box<[AtomicU64]>,
    sum_nanos: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram::new(LATENCY_BUCKETS)
    }
}

impl Histogram {
    pub fn new(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            buckets: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_nanos: AtomicU64::new(0),
        }
    }

    pub fn observe(&self, duration: Duration) {
        let seconds = duration.as_secs_f64();
        let index = self
            .bounds
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(self.bounds.len());
        if let Some(bucket) = self.buckets.get(index) {
            bucket.fetch_add(1, Ordering::Relaxed);
        }
        let nanos = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut cumulative = Vec::with_capacity(self.buckets.len());
        let mut running = 0u64;
        for bucket in self.buckets.iter() {
            running = running.saturating_add(bucket.load(Ordering::Relaxed));
            cumulative.push(running);
        }
        HistogramSnapshot {
            bounds: self.bounds.to_vec(),
            cumulative,
            sum_seconds: self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9,
        }
    }
}

/// What a histogram held when it was read.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HistogramSnapshot {
    /// Bucket upper bounds in seconds, without `+Inf`.
    pub bounds: Vec<f64>,
    /// Observations at or below each bound, then the total (`+Inf`).
    pub cumulative: Vec<u64>,
    pub sum_seconds: f64,
}

impl HistogramSnapshot {
    /// How many observations there were.
    pub fn count(&self) -> u64 {
        self.cumulative.last().copied().unwrap_or(0)
    }
}

/// The kind of a metric family, as `# TYPE` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricType {
    Counter,
    Gauge,
    Histogram,
}

impl MetricType {
    fn name(self) -> &'static str {
        match self {
            MetricType::Counter => "counter",
            MetricType::Gauge => "gauge",
            MetricType::Histogram => "histogram",
        }
    }
}

/// Writes the Prometheus text exposition format (version 0.0.4).
#[derive(Debug, Default)]
pub struct TextEncoder {
    out: String,
}

impl TextEncoder {
    /// The `Content-Type` of the output.
    pub const CONTENT_TYPE: &'static str = "text/plain; version=0.0.4; charset=utf-8";

    pub fn new() -> TextEncoder {
        TextEncoder::default()
    }

    /// Starts a family: its help text and type. Its samples follow.
    pub fn family(&mut self, name: &str, help: &str, kind: MetricType) {
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {}", kind.name());
    }

    /// One sample of a counter or gauge.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.out.push_str(name);
        write_labels(&mut self.out, labels, None);
        let _ = writeln!(self.out, " {}", format_value(value));
    }

    /// The samples of one histogram (`_bucket`, `_sum`, `_count`).
    pub fn histogram(&mut self, name: &str, labels: &[(&str, &str)], snapshot: &HistogramSnapshot) {
        for (index, count) in snapshot.cumulative.iter().enumerate() {
            let bound = snapshot
                .bounds
                .get(index)
                .map(|b| format_value(*b))
                .unwrap_or_else(|| "+Inf".to_string());
            let _ = write!(self.out, "{name}_bucket");
            write_labels(&mut self.out, labels, Some(&bound));
            let _ = writeln!(self.out, " {count}");
        }
        let _ = write!(self.out, "{name}_sum");
        write_labels(&mut self.out, labels, None);
        let _ = writeln!(self.out, " {}", format_value(snapshot.sum_seconds));
        let _ = write!(self.out, "{name}_count");
        write_labels(&mut self.out, labels, None);
        let _ = writeln!(self.out, " {}", snapshot.count());
    }

    pub fn finish(self) -> String {
        self.out
    }
}

fn write_labels(out: &mut String, labels: &[(&str, &str)], le: Option<&str>) {
    if labels.is_empty() && le.is_none() {
        return;
    }
    out.push('{');
    let mut first = true;
    for (name, value) in labels.iter().copied().chain(le.map(|le| ("le", le))) {
        if !first {
            out.push(',');
        }
        first = false;
        out.push_str(name);
        out.push_str("=\"");
        for c in value.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '"' => out.push_str("\\\""),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
        out.push('"');
    }
    out.push('}');
}

fn format_value(value: f64) -> String {
    if value.is_nan() {
        "NaN".into()
    } else if value.is_infinite() {
        if value > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        }
    } else {
        format!("{value}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_count_into_cumulative_buckets() {
        let histogram = Histogram::new(&[0.01, 0.1, 1.0]);
        histogram.observe(Duration::from_millis(5));
        histogram.observe(Duration::from_millis(10));
        histogram.observe(Duration::from_millis(50));
        histogram.observe(Duration::from_secs(3));
        let snapshot = histogram.snapshot();
        assert_eq!(snapshot.cumulative, vec![2, 3, 3, 4]);
        assert_eq!(snapshot.count(), 4);
        assert!((snapshot.sum_seconds - 3.065).abs() < 1e-9);
    }

    #[test]
    fn the_text_format_escapes_labels_and_ends_histograms_with_inf() {
        let histogram = Histogram::new(&[0.5]);
        histogram.observe(Duration::from_millis(100));
        let mut encoder = TextEncoder::new();
        encoder.family(
            "floe_x_seconds",
            "A test.\nSecond line",
            MetricType::Histogram,
        );
        encoder.histogram(
            "floe_x_seconds",
            &[("sink", "a \"quoted\\\" name\n")],
            &histogram.snapshot(),
        );
        encoder.family("floe_up", "Up.", MetricType::Gauge);
        encoder.sample("floe_up", &[], 1.0);
        let text = encoder.finish();
        assert_eq!(
            text,
            "# HELP floe_x_seconds A test.\\nSecond line\n\
             # TYPE floe_x_seconds histogram\n\
             floe_x_seconds_bucket{sink=\"a \\\"quoted\\\\\\\" name\\n\",le=\"0.5\"} 1\n\
             floe_x_seconds_bucket{sink=\"a \\\"quoted\\\\\\\" name\\n\",le=\"+Inf\"} 1\n\
             floe_x_seconds_sum{sink=\"a \\\"quoted\\\\\\\" name\\n\"} 0.1\n\
             floe_x_seconds_count{sink=\"a \\\"quoted\\\\\\\" name\\n\"} 1\n\
             # HELP floe_up Up.\n\
             # TYPE floe_up gauge\n\
             floe_up 1\n"
        );
    }
}
