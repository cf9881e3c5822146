//! The lag of every sink and source over the last hour, kept in memory for the
//! status page (a restart starts a new hour), and the JSON the page draws.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use floe_adapter::OperationalStatus;
use floe_repr::GlobalId;
use serde_json::{Value, json};

/// One sample: when (ms since the Unix epoch) and the lag then (ms), `None` while
/// a sink has not delivered anything.
type LagSample = (u64, Option<u64>);

/// Lag samples per object: `(time, lag)` in milliseconds, oldest first; `None`
/// while a sink has not delivered anything.
pub struct LagHistory {
    /// Samples older than this are dropped.
    window_ms: u64,
    /// At most this many samples per object (the window over the sample interval).
    capacity: usize,
    samples: Mutex<HashMap<GlobalId, VecDeque<LagSample>>>,
}

impl LagHistory {
    pub fn new(window: Duration, interval: Duration) -> LagHistory {
        let window_ms = u64::try_from(window.as_millis()).unwrap_or(u64::MAX);
        let interval_ms = u64::try_from(interval.as_millis()).unwrap_or(1).max(1);
        LagHistory {
            window_ms,
            capacity: usize::try_from(window_ms / interval_ms).unwrap_or(usize::MAX) + 1,
            samples: Mutex::new(HashMap::new()),
        }
    }

    /// Adds one sample per sink and source; forgets dropped objects.
    pub fn record(&self, status: &OperationalStatus) {
        let now = status.now_ms;
        let current: Vec<(GlobalId, Option<u64>)> = status
            .sinks
            .iter()
            .map(|sink| (sink.id, sink.lag_ms))
            .chain(
                status
                    .sources
                    .iter()
                    .map(|source| (source.id, Some(source.lag_ms))),
            )
            .collect();
        let mut samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        samples.retain(|id, _| current.iter().any(|(c, _)| c == id));
        for (id, lag) in current {
            let series = samples.entry(id).or_default();
            series.push_back((now, lag));
            while series.len() > self.capacity
                || series
                    .front()
                    .is_some_and(|(at, _)| now.saturating_sub(*at) > self.window_ms)
            {
                series.pop_front();
            }
        }
    }

    /// An object's samples, oldest first.
    pub fn series(&self, id: GlobalId) -> Vec<(u64, Option<u64>)> {
        self.samples
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&id)
            .map(|series| series.iter().copied().collect())
            .unwrap_or_default()
    }
}

/// What `/api/status` answers: every sink and source with its state and lag history.
/// No secrets: names, statuses, errors (which never carry credentials), frontiers.
pub fn status_document(status: &OperationalStatus, history: &LagHistory) -> Value {
    let series = |id: GlobalId| -> Value {
        history
            .series(id)
            .into_iter()
            .map(|(at, lag)| json!([at, lag]))
            .collect()
    };
    let sinks: Vec<Value> = status
        .sinks
        .iter()
        .map(|sink| {
            json!({
                "id": sink.id.to_string(),
                "name": sink.name,
                "status": sink.status,
                "error": sink.error,
                "status_changed_ms": sink.status_changed_ms,
                "frontier_ms": sink.frontier_ms,
                "lag_ms": sink.lag_ms,
                "table": sink.table,
                "messages_committed": sink.messages_committed,
                "bytes_committed": sink.bytes_committed,
                "commits": sink.commits,
                "lag_history": series(sink.id),
            })
        })
        .collect();
    let sources: Vec<Value> = status
        .sources
        .iter()
        .map(|source| {
            json!({
                "id": source.id.to_string(),
                "name": source.name,
                "kind": source.kind,
                "status": source.status,
                "error": source.error,
                "frontier_ms": source.frontier_ms,
                "lag_ms": source.lag_ms,
                "updates": source.updates,
                "bytes": source.bytes,
                "lag_history": series(source.id),
            })
        })
        .collect();
    json!({
        "now_ms": status.now_ms,
        "version": env!("CARGO_PKG_VERSION"),
        "sessions": status.sessions,
        "sinks": sinks,
        "sources": sources,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use floe_adapter::SourceState;

    fn status(now_ms: u64, sources: &[(&str, u64)]) -> OperationalStatus {
        OperationalStatus {
            now_ms,
            sinks: vec![],
            sources: sources
                .iter()
                .map(|(id, lag)| SourceState {
                    id: id.parse().unwrap(),
                    name: format!("public.{id}"),
                    kind: "load-generator",
                    status: "running",
                    error: None,
                    frontier_ms: now_ms - lag,
                    lag_ms: *lag,
                    updates: 0,
                    bytes: 0,
                })
                .collect(),
            sessions: 0,
            sessions_total: 0,
            plans_reused: 0,
            storage_write_latency: Default::default(),
        }
    }

    #[test]
    fn keeps_an_hour_and_forgets_dropped_objects() {
        let history = LagHistory::new(Duration::from_secs(3600), Duration::from_secs(5));
        let start = 1_000_000_000;
        for i in 0..800u64 {
            history.record(&status(start + i * 5_000, &[("u1", i), ("u2", 7)]));
        }
        let series = history.series("u1".parse().unwrap());
        // 3600 s / 5 s, plus the sample at the window's start.
        assert_eq!(series.len(), 721);
        assert_eq!(series.last(), Some(&(start + 799 * 5_000, Some(799))));
        assert_eq!(series.first(), Some(&(start + 79 * 5_000, Some(79))));
        history.record(&status(start + 800 * 5_000, &[("u1", 1)]));
        assert!(history.series("u2".parse().unwrap()).is_empty());
    }
}
