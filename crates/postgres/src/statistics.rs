//! The counters `mz_source_statistics` shows, kept by a running source and read by its
//! owner at any time (atomics: no lock between the source and the reader).

use std::sync::atomic::{AtomicU64, Ordering};

/// A source's counters since its task started (the owner accumulates across restarts).
#[derive(Debug, Default)]
pub struct SourceStatistics {
    /// pgoutput messages received.
    pub messages_received: AtomicU64,
    /// Bytes of replication messages and COPY data received.
    pub bytes_received: AtomicU64,
    /// Updates decoded, not yet durable.
    pub updates_staged: AtomicU64,
    /// Updates written durably to floe's storage.
    pub updates_committed: AtomicU64,
    /// Rows the initial snapshot has (an estimate until the snapshot is read).
    pub snapshot_records_known: AtomicU64,
    /// Snapshot rows read so far.
    pub snapshot_records_staged: AtomicU64,
    /// The furthest upstream position the server reported.
    pub offset_known: AtomicU64,
    /// The upstream position durable in floe (the progress LSN).
    pub offset_committed: AtomicU64,
}

/// A copy of the counters at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatisticsSnapshot {
    pub messages_received: u64,
    pub bytes_received: u64,
    pub updates_staged: u64,
    pub updates_committed: u64,
    pub snapshot_records_known: u64,
    pub snapshot_records_staged: u64,
    pub offset_known: u64,
    pub offset_committed: u64,
}

impl SourceStatistics {
    pub fn snapshot(&self) -> StatisticsSnapshot {
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        StatisticsSnapshot {
            messages_received: load(&self.messages_received),
            bytes_received: load(&self.bytes_received),
            updates_staged: load(&self.updates_staged),
            updates_committed: load(&self.updates_committed),
            snapshot_records_known: load(&self.snapshot_records_known),
            snapshot_records_staged: load(&self.snapshot_records_staged),
            offset_known: load(&self.offset_known),
            offset_committed: load(&self.offset_committed),
        }
    }

    pub(crate) fn add(counter: &AtomicU64, value: u64) {
        counter.fetch_add(value, Ordering::Relaxed);
    }

    pub(crate) fn raise(counter: &AtomicU64, value: u64) {
        counter.fetch_max(value, Ordering::Relaxed);
    }

    pub(crate) fn set(counter: &AtomicU64, value: u64) {
        counter.store(value, Ordering::Relaxed);
    }
}
