//! The operational view of the server for `/metrics` and the status page: every
//! sink and source with its status, last error, frontier, lag and counters. Read
//! from what the coordinator already keeps (the catalog's status history, the sink
//! manager's progress, storage's usage); nothing is computed on a hot path.

use std::collections::HashMap;

use floe_metrics::HistogramSnapshot;
use floe_repr::{GlobalId, Timestamp};
use floe_sql::catalog::ItemDefinition;

use super::Coordinator;
use crate::error::AdapterError;

/// The server's state as operators watch it.
#[derive(Debug, Clone, PartialEq)]
pub struct OperationalStatus {
    /// Milliseconds since the Unix epoch when this was read.
    pub now_ms: u64,
    pub sinks: Vec<SinkState>,
    pub sources: Vec<SourceState>,
    /// Wire sessions open now, and opened since the server started.
    pub sessions: i64,
    pub sessions_total: u64,
    /// Queries that ran on a plan kept from an earlier run (`floe_query::plan_cache`).
    pub plans_reused: u64,
    /// Durable appends to storage (tables, sources).
    pub storage_write_latency: HistogramSnapshot,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SinkState {
    pub id: GlobalId,
    /// `schema.name`.
    pub name: String,
    /// As `mz_sink_statuses.status`: created, starting, running, paused, stalled.
    pub status: String,
    /// The error of a stalled sink.
    pub error: Option<String>,
    /// When the status last changed (ms since the epoch).
    pub status_changed_ms: Option<u64>,
    /// Everything before this time is in the Iceberg table (ms since the epoch).
    pub frontier_ms: Option<u64>,
    /// Wall clock minus the frontier.
    pub lag_ms: Option<u64>,
    /// The Iceberg table, `namespace.table`.
    pub table: String,
    pub messages_committed: u64,
    pub bytes_committed: u64,
    /// Commits since the server started, and how long they took.
    pub commits: u64,
    pub commit_latency: HistogramSnapshot,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SourceState {
    pub id: GlobalId,
    pub name: String,
    /// `load-generator` or `subsource`.
    pub kind: &'static str,
    /// running, or stalled when its ingestion stopped.
    pub status: &'static str,
    pub error: Option<String>,
    /// The write frontier (ms since the epoch).
    pub frontier_ms: u64,
    pub lag_ms: u64,
    /// Updates and bytes ingested since the server started.
    pub updates: u64,
    pub bytes: u64,
}

impl Coordinator {
    /// The adapter's metrics (sessions, sink commits).
    pub fn metrics(&self) -> &std::sync::Arc<crate::metrics::AdapterMetrics> {
        &self.metrics
    }

    /// Reads every sink's and source's state.
    pub async fn operational_status(&self) -> Result<OperationalStatus, AdapterError> {
        let now_ms = Timestamp::now().millis();
        let catalog = self.catalog.lock().await;
        let history = catalog.sink_status_history()?;
        let mut latest = HashMap::new();
        for event in &history {
            latest.insert(event.sink_id, event);
        }
        let progress = self.sinks.progress();
        let usage: HashMap<GlobalId, floe_storage::CollectionUsage> = self
            .storage
            .usage()
            .into_iter()
            .map(|usage| (usage.id, usage))
            .collect();
        let mut sinks = Vec::new();
        let mut sources = Vec::new();
        for item in catalog.state().items() {
            let name = format!("{}.{}", item.name.schema, item.name.item);
            match &item.definition {
                ItemDefinition::Sink(sink) => {
                    let event = latest.get(&item.id);
                    let progress = progress.get(&item.id).cloned().unwrap_or_default();
                    let frontier_ms = (progress.frontier > 0).then_some(progress.frontier);
                    let commits = self.metrics.sink_commits(item.id);
                    sinks.push(SinkState {
                        id: item.id,
                        name,
                        status: event
                            .map_or(floe_catalog::ObjectStatus::Created, |e| e.status)
                            .to_string(),
                        error: event.and_then(|e| e.error.clone()),
                        status_changed_ms: event.map(|e| e.occurred_at),
                        frontier_ms,
                        lag_ms: frontier_ms.map(|f| now_ms.saturating_sub(f)),
                        table: format!("{}.{}", sink.namespace, sink.table),
                        messages_committed: progress.messages_committed,
                        bytes_committed: progress.bytes_committed,
                        commits: commits.commits,
                        commit_latency: commits.latency,
                    });
                }
                ItemDefinition::Source(source) => {
                    let generator = source.parent.as_ref().map_or(item.id, |(p, _)| *p);
                    let (status, error) = self.generator_status(generator, source.up_to);
                    let usage = usage.get(&item.id);
                    let frontier_ms = usage.map_or(0, |u| u.upper.0);
                    sources.push(SourceState {
                        id: item.id,
                        name,
                        kind: if source.parent.is_some() {
                            "subsource"
                        } else {
                            "load-generator"
                        },
                        status,
                        error,
                        frontier_ms,
                        lag_ms: now_ms.saturating_sub(frontier_ms),
                        updates: usage.map_or(0, |u| u.appended_updates),
                        bytes: usage.map_or(0, |u| u.appended_bytes),
                    });
                }
                _ => {}
            }
        }
        Ok(OperationalStatus {
            now_ms,
            sinks,
            sources,
            sessions: self.metrics.sessions(),
            sessions_total: self.metrics.sessions_total(),
            plans_reused: self.plans.hits(),
            storage_write_latency: self.storage.write_latency(),
        })
    }

    /// A load generator runs until it reaches `UP TO`; one that cannot write, or
    /// stopped before, is stalled, with the cause it gave.
    fn generator_status(
        &self,
        generator: GlobalId,
        up_to: Option<u64>,
    ) -> (&'static str, Option<String>) {
        if let Some(cause) = self.generators.stall_cause(generator) {
            ("stalled", Some(cause))
        } else if self.generators.finished(generator) && up_to.is_none() {
            // A task that ended without saying why (it panicked).
            (
                "stalled",
                Some("the load generator stopped; the server log has the cause".into()),
            )
        } else {
            ("running", None)
        }
    }
}
