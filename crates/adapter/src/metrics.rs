//! What the adapter measures for `/metrics` and the status page, from what it
//! already sees: wire sessions opening and closing, and the statistics sink tasks
//! report (a batch staged, then committed), so no hot path does extra work.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use floe_metrics::{Histogram, HistogramSnapshot};
use floe_repr::GlobalId;
use floe_sink::sink::StatisticsUpdate;

/// The adapter's metrics. One per coordinator.
#[derive(Debug, Default)]
pub struct AdapterMetrics {
    /// Wire sessions open now.
    sessions: AtomicI64,
    /// Wire sessions opened since the server started.
    sessions_total: AtomicU64,
    sinks: Mutex<HashMap<GlobalId, SinkCommits>>,
}

/// Commit timing of one sink, derived from its statistics reports.
#[derive(Debug, Default)]
struct SinkCommits {
    /// When the batch now being committed finished staging.
    staged_at: Option<Instant>,
    /// Commits since the server started (empty progress commits included).
    commits: u64,
    /// From a batch staged to the same batch committed: the Iceberg commit,
    /// retries included.
    latency: Arc<Histogram>,
}

/// What a sink's commits looked like when asked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SinkCommitStatistics {
    pub commits: u64,
    pub latency: HistogramSnapshot,
}

/// Counts a session as open until dropped (kept in the connection's state).
#[derive(Debug)]
pub struct SessionGuard(Arc<AdapterMetrics>);

impl Drop for SessionGuard {
    fn drop(&mut self) {
        self.0.sessions.fetch_sub(1, Ordering::Relaxed);
    }
}

impl AdapterMetrics {
    /// A wire session started; it counts as open until the guard is dropped.
    pub fn session_started(self: &Arc<Self>) -> SessionGuard {
        self.sessions.fetch_add(1, Ordering::Relaxed);
        self.sessions_total.fetch_add(1, Ordering::Relaxed);
        SessionGuard(self.clone())
    }

    pub fn sessions(&self) -> i64 {
        self.sessions.load(Ordering::Relaxed)
    }

    pub fn sessions_total(&self) -> u64 {
        self.sessions_total.load(Ordering::Relaxed)
    }

    /// Takes a sink's statistics report: a staging report starts a commit's clock, a
    /// commit report stops it. A new staging report replaces an unfinished one (the
    /// task restarted and staged again).
    pub fn observe_sink_statistics(&self, sink: GlobalId, update: &StatisticsUpdate) {
        self.observe_sink_statistics_at(sink, update, Instant::now());
    }

    fn observe_sink_statistics_at(&self, sink: GlobalId, update: &StatisticsUpdate, now: Instant) {
        let mut sinks = self.sinks.lock().unwrap_or_else(|e| e.into_inner());
        let entry = sinks.entry(sink).or_default();
        let staged = update.messages_staged > 0 || update.bytes_staged > 0;
        let committed = update.messages_committed > 0
            || update.bytes_committed > 0
            || (!staged && update == &StatisticsUpdate::default());
        if staged {
            entry.staged_at = Some(now);
        }
        if committed {
            entry.commits += 1;
            if let Some(staged_at) = entry.staged_at.take() {
                entry
                    .latency
                    .observe(now.saturating_duration_since(staged_at));
            }
        }
    }

    /// A sink's commit count and latency histogram.
    pub fn sink_commits(&self, sink: GlobalId) -> SinkCommitStatistics {
        let sinks = self.sinks.lock().unwrap_or_else(|e| e.into_inner());
        sinks
            .get(&sink)
            .map(|entry| SinkCommitStatistics {
                commits: entry.commits,
                latency: entry.latency.snapshot(),
            })
            .unwrap_or_else(|| SinkCommitStatistics {
                commits: 0,
                latency: Histogram::default().snapshot(),
            })
    }

    /// Forgets a dropped sink.
    pub fn forget_sink(&self, sink: GlobalId) {
        self.sinks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&sink);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn sessions_count_while_their_guard_lives() {
        let metrics = Arc::new(AdapterMetrics::default());
        let first = metrics.session_started();
        let second = metrics.session_started();
        assert_eq!(metrics.sessions(), 2);
        drop(first);
        assert_eq!(metrics.sessions(), 1);
        drop(second);
        assert_eq!((metrics.sessions(), metrics.sessions_total()), (0, 2));
    }

    #[test]
    fn commit_latency_runs_from_staged_to_committed() {
        let metrics = AdapterMetrics::default();
        let sink: GlobalId = "u7".parse().unwrap();
        let start = Instant::now();
        let staged = StatisticsUpdate {
            messages_staged: 10,
            bytes_staged: 100,
            ..Default::default()
        };
        let committed = StatisticsUpdate {
            messages_committed: 10,
            bytes_committed: 100,
            ..Default::default()
        };
        // Staged, abandoned (restart), staged again, committed 2 s later.
        metrics.observe_sink_statistics_at(sink, &staged, start);
        metrics.observe_sink_statistics_at(sink, &staged, start + Duration::from_secs(5));
        metrics.observe_sink_statistics_at(sink, &committed, start + Duration::from_secs(7));
        // An empty progress commit counts as a commit without a latency.
        metrics.observe_sink_statistics_at(
            sink,
            &StatisticsUpdate::default(),
            start + Duration::from_secs(9),
        );
        let statistics = metrics.sink_commits(sink);
        assert_eq!(statistics.commits, 2);
        assert_eq!(statistics.latency.count(), 1);
        assert!((statistics.latency.sum_seconds - 2.0).abs() < 1e-6);
        metrics.forget_sink(sink);
        assert_eq!(metrics.sink_commits(sink).commits, 0);
    }
}
