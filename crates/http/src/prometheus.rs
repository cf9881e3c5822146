//! `/metrics`: the server's state in the Prometheus text format. Every name starts
//! with `floe_`; per-object series carry the object's name (`sink`, `source`) and
//! its `id`.

use floe_adapter::OperationalStatus;
use floe_metrics::{MetricType, TextEncoder};

/// The statuses a sink can be in; `floe_sink_status` has one series per status
/// (1 for the current one), so an alert can watch `status="stalled"`.
const SINK_STATUSES: &[&str] = &["created", "starting", "running", "paused", "stalled"];
const SOURCE_STATUSES: &[&str] = &["running", "stalled"];

fn seconds(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

pub fn render(status: &OperationalStatus, auth_failures: u64, ready: bool) -> String {
    let mut out = TextEncoder::new();
    server_metrics(&mut out, status, auth_failures, ready);
    sink_metrics(&mut out, status);
    source_metrics(&mut out, status);
    out.finish()
}

fn server_metrics(
    out: &mut TextEncoder,
    status: &OperationalStatus,
    auth_failures: u64,
    ready: bool,
) {
    out.family(
        "floe_build_info",
        "The floe version, as a label.",
        MetricType::Gauge,
    );
    out.sample(
        "floe_build_info",
        &[("version", env!("CARGO_PKG_VERSION"))],
        1.0,
    );
    out.family(
        "floe_ready",
        "1 once the catalog is loaded and the listeners are up.",
        MetricType::Gauge,
    );
    out.sample("floe_ready", &[], if ready { 1.0 } else { 0.0 });
    out.family(
        "floe_pgwire_sessions",
        "SQL sessions open now.",
        MetricType::Gauge,
    );
    out.sample("floe_pgwire_sessions", &[], status.sessions as f64);
    out.family(
        "floe_pgwire_sessions_total",
        "SQL sessions opened since the server started.",
        MetricType::Counter,
    );
    out.sample(
        "floe_pgwire_sessions_total",
        &[],
        status.sessions_total as f64,
    );
    out.family(
        "floe_query_plans_reused_total",
        "Queries that ran on a plan kept from an earlier run of the same statement \
         (with other values of its parameters, for a prepared one).",
        MetricType::Counter,
    );
    out.sample(
        "floe_query_plans_reused_total",
        &[],
        status.plans_reused as f64,
    );
    out.family(
        "floe_auth_failures_total",
        "Failed logins (SQL and HTTP) since the server started.",
        MetricType::Counter,
    );
    out.sample("floe_auth_failures_total", &[], auth_failures as f64);
    out.family(
        "floe_storage_write_latency_seconds",
        "Durable appends to tables and sources (one SQLite transaction with its fsync).",
        MetricType::Histogram,
    );
    out.histogram(
        "floe_storage_write_latency_seconds",
        &[],
        &status.storage_write_latency,
    );
}

/// A per-object family: name, help, type, and the value of one object (none: no sample).
type Family<T> = (
    &'static str,
    &'static str,
    MetricType,
    fn(&T) -> Option<f64>,
);

fn sink_metrics(out: &mut TextEncoder, status: &OperationalStatus) {
    let families: [Family<floe_adapter::SinkState>; 4] = [
        (
            "floe_sink_messages_committed_total",
            "Rows a sink has committed to its Iceberg table.",
            MetricType::Counter,
            |sink| Some(sink.messages_committed as f64),
        ),
        (
            "floe_sink_bytes_committed_total",
            "Bytes of data files a sink has committed to its Iceberg table.",
            MetricType::Counter,
            |sink| Some(sink.bytes_committed as f64),
        ),
        (
            "floe_sink_commits_total",
            "Iceberg commits of a sink since the server started.",
            MetricType::Counter,
            |sink| Some(sink.commits as f64),
        ),
        (
            "floe_sink_lag_seconds",
            "Wall clock minus the sink's committed frontier (absent before its first commit).",
            MetricType::Gauge,
            |sink| sink.lag_ms.map(seconds),
        ),
    ];
    let labelled: Vec<(&floe_adapter::SinkState, String)> = status
        .sinks
        .iter()
        .map(|sink| (sink, sink.id.to_string()))
        .collect();
    for (family, help, kind, value) in families {
        out.family(family, help, kind);
        for (sink, id) in &labelled {
            if let Some(value) = value(sink) {
                out.sample(family, &[("sink", &sink.name), ("id", id)], value);
            }
        }
    }
    out.family(
        "floe_sink_commit_latency_seconds",
        "From a batch staged to its Iceberg commit, retries included.",
        MetricType::Histogram,
    );
    for (sink, id) in &labelled {
        out.histogram(
            "floe_sink_commit_latency_seconds",
            &[("sink", &sink.name), ("id", id)],
            &sink.commit_latency,
        );
    }
    out.family(
        "floe_sink_status",
        "1 for the sink's current status, 0 for the others.",
        MetricType::Gauge,
    );
    for (sink, id) in &labelled {
        status_samples(
            out,
            "floe_sink_status",
            ("sink", &sink.name),
            id,
            SINK_STATUSES,
            &sink.status,
        );
    }
}

/// One series per possible status, 1 for the current one.
fn status_samples(
    out: &mut TextEncoder,
    family: &str,
    object: (&str, &str),
    id: &str,
    statuses: &[&str],
    current: &str,
) {
    for candidate in statuses {
        out.sample(
            family,
            &[object, ("id", id), ("status", candidate)],
            if current == *candidate { 1.0 } else { 0.0 },
        );
    }
}

fn source_metrics(out: &mut TextEncoder, status: &OperationalStatus) {
    let families: [Family<floe_adapter::SourceState>; 3] = [
        (
            "floe_source_updates_total",
            "Updates (rows) a source has ingested since the server started.",
            MetricType::Counter,
            |source| Some(source.updates as f64),
        ),
        (
            "floe_source_bytes_total",
            "Bytes a source has ingested since the server started.",
            MetricType::Counter,
            |source| Some(source.bytes as f64),
        ),
        (
            "floe_source_lag_seconds",
            "Wall clock minus the source's write frontier.",
            MetricType::Gauge,
            |source| Some(seconds(source.lag_ms)),
        ),
    ];
    let labelled: Vec<(&floe_adapter::SourceState, String)> = status
        .sources
        .iter()
        .map(|source| (source, source.id.to_string()))
        .collect();
    for (family, help, kind, value) in families {
        out.family(family, help, kind);
        for (source, id) in &labelled {
            if let Some(value) = value(source) {
                out.sample(family, &[("source", &source.name), ("id", id)], value);
            }
        }
    }
    out.family(
        "floe_source_status",
        "1 for the source's current status, 0 for the others.",
        MetricType::Gauge,
    );
    for (source, id) in &labelled {
        status_samples(
            out,
            "floe_source_status",
            ("source", &source.name),
            id,
            SOURCE_STATUSES,
            source.status,
        );
    }
}
