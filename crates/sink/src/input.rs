//! What a sink reads: the timestamped change log of one relation.
//!
//! The storage layer implements [`SinkInput`]; the sink never sees storage
//! internals. Timestamps are milliseconds since the Unix epoch.

use async_trait::async_trait;
use floe_repr::{RelationDesc, Row, Timestamp};

use crate::error::SinkError;

/// One change: a row, the time it happened, and its multiplicity change
/// (+1 insert, -1 delete; an update is a -1 and a +1 at the same time).
#[derive(Debug, Clone, PartialEq)]
pub struct Update {
    pub row: Row,
    pub ts: Timestamp,
    pub diff: i64,
}

/// The change log of the relation a sink reads.
#[async_trait]
pub trait SinkInput: Send + Sync {
    /// The relation's shape.
    fn desc(&self) -> &RelationDesc;

    /// The write frontier: every update with `ts < upper` is durable and
    /// will never change. Advances with the wall clock even without writes.
    async fn upper(&self) -> Result<Timestamp, SinkError>;

    /// The compaction frontier: history before it has been consolidated, so
    /// updates before `since` are reported at `since`. Reading from a
    /// `lower` below `since` fails with `input compacted past resume upper`
    /// unless `lower` is the beginning of time (a new sink's snapshot).
    async fn since(&self) -> Result<Timestamp, SinkError>;

    /// The updates with `lower <= ts < upper`, in chunks of at most
    /// `max_rows`, in no particular order; `upper` must not exceed
    /// [`SinkInput::upper`]. `Timestamp(0)` as `lower` reads everything the
    /// log holds (the snapshot, for a new sink).
    async fn read(
        &self,
        lower: Timestamp,
        upper: Timestamp,
        max_rows: usize,
        chunk: &mut (dyn FnMut(Vec<Update>) -> Result<(), SinkError> + Send),
    ) -> Result<(), SinkError>;

    /// Tells the log that the sink will never read before `frontier` again
    /// (it committed up to it), so history before it may be compacted.
    async fn allow_compaction(&self, frontier: Timestamp) -> Result<(), SinkError>;
}
