//! What a sink reads: the timestamped change log of one relation.
//!
//! The storage layer implements [`SinkInput`]; the sink never sees storage
//! internals. Timestamps are milliseconds since the Unix epoch.
//!
//! Reads are streams of chunks pulled by the sink ([`UpdateStream`]): a reader produces
//! chunks ahead of the sink through a small bounded channel, so reading the log overlaps
//! with writing Parquet, and memory holds a few chunks, never a whole batch or table.

use arrow_array::ArrayRef;
use async_trait::async_trait;
use floe_repr::{RelationDesc, Row, Timestamp};
use tokio::sync::mpsc;

use crate::error::{ErrorKind, SinkError};

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
    /// updates before `since` are reported at `since - 1`. Reading from a
    /// `lower` below `since` fails with `input compacted past resume upper`.
    async fn since(&self) -> Result<Timestamp, SinkError>;

    /// The updates with `lower <= ts < upper` in time order (non-decreasing `ts`), in
    /// chunks of at most `max_rows`; `upper` must not exceed [`SinkInput::upper`].
    /// The relation as of every time keeps the unique keys of [`SinkInput::desc`], and at
    /// each time a key has at most one row inserted and one retracted (storage checks a
    /// table's primary key against every write, those of one group commit included, and
    /// a view's output is consolidated per time): an UPSERT sink of such a key
    /// consolidates without comparing rows. Dropping the stream stops the read.
    async fn read(
        &self,
        lower: Timestamp,
        upper: Timestamp,
        max_rows: usize,
    ) -> Result<UpdateStream, SinkError>;

    /// The relation's contents as of `upper` (everything with `ts < upper`), consolidated:
    /// each distinct row once, `diff` its multiplicity, `ts` = `upper - 1`. What a new
    /// sink writes first.
    async fn snapshot(&self, upper: Timestamp, max_rows: usize) -> Result<UpdateStream, SinkError>;

    /// The same snapshot with its rows in Arrow columns, in chunks of at most `max_rows`
    /// rows and about `max_bytes` bytes, when the input can build them without decoding
    /// rows (a log that keeps rows encoded converts them straight to columns); `None`
    /// otherwise, and the sink reads [`SinkInput::snapshot`].
    async fn snapshot_columns(
        &self,
        _upper: Timestamp,
        _max_rows: usize,
        _max_bytes: usize,
    ) -> Result<Option<ColumnStream>, SinkError> {
        Ok(None)
    }

    /// The changes [`SinkInput::read`] gives, with their rows in Arrow columns, as
    /// [`SinkInput::snapshot_columns`] gives a snapshot's; `None`: read them as rows.
    async fn read_columns(
        &self,
        _lower: Timestamp,
        _upper: Timestamp,
        _max_rows: usize,
        _max_bytes: usize,
    ) -> Result<Option<ColumnStream>, SinkError> {
        Ok(None)
    }

    /// The error in the relation's contents that holds its upper back, if any: a
    /// materialized view whose query fails on some rows (`division by zero`) keeps its
    /// upper where the error began until those rows go away, and a sink waiting on it
    /// is stalled by it. Relations that cannot hold errors (tables, sources) have none.
    async fn error(&self) -> Result<Option<SinkError>, SinkError> {
        Ok(None)
    }

    /// Tells the log that the sink will never read before `frontier` again
    /// (it committed up to it), so history before it may be compacted.
    async fn allow_compaction(&self, frontier: Timestamp) -> Result<(), SinkError>;
}

/// How many chunks a reader may produce ahead of the sink: enough to keep both sides busy,
/// few enough that memory stays a few chunks.
pub const READ_AHEAD_CHUNKS: usize = 2;

/// A snapshot's rows, to be built into Arrow columns (see [`SinkInput::snapshot_columns`]).
pub struct ColumnChunk {
    /// Builds the relation's columns, of the Arrow types [`floe_arrow::arrow_data_type`]
    /// gives their SQL types. The sink runs it, on as many threads as it has cores: the
    /// reader only reads, so building columns is not one thread's work.
    pub build: Box<dyn FnOnce() -> Result<Vec<ArrayRef>, SinkError> + Send>,
    pub rows: usize,
    /// Each row's diff (in a snapshot, how many times it holds the row: positive).
    pub counts: Vec<i64>,
    /// Each row's time, in order.
    pub times: Vec<Timestamp>,
}

/// A chunk's columns, built.
#[derive(Debug, Clone)]
pub struct BuiltColumns {
    pub columns: Vec<ArrayRef>,
    pub rows: usize,
    pub counts: Vec<i64>,
    pub times: Vec<Timestamp>,
}

impl ColumnChunk {
    /// Builds the chunk's columns (CPU work: call it on a blocking thread).
    pub fn build(self) -> Result<BuiltColumns, SinkError> {
        Ok(BuiltColumns {
            columns: (self.build)()?,
            rows: self.rows,
            counts: self.counts,
            times: self.times,
        })
    }
}

impl BuiltColumns {
    /// The first `rows` rows.
    pub fn truncate(&mut self, rows: usize) {
        if rows < self.rows {
            for column in &mut self.columns {
                *column = column.slice(0, rows);
            }
            self.rows = rows;
            self.counts.truncate(rows);
            self.times.truncate(rows);
        }
    }
}

/// What travels through a [`ChunkStream`]'s channel. The explicit end tells a complete
/// read from a reader that stopped half-way (it panicked or was cancelled): a channel that
/// closes without it is an error, never a short batch.
enum Message<T> {
    Chunk(T),
    End,
}

/// The consuming side of a read: chunks in order, then `None`.
pub struct ChunkStream<T> {
    receiver: mpsc::Receiver<Result<Message<T>, SinkError>>,
    ended: bool,
}

/// The producing side of a read, for a reader on another task or a blocking thread.
pub struct ChunkSender<T> {
    sender: mpsc::Sender<Result<Message<T>, SinkError>>,
}

/// A read of changes, a chunk of updates at a time.
pub type UpdateStream = ChunkStream<Vec<Update>>;
pub type UpdateSender = ChunkSender<Vec<Update>>;
/// A read of a snapshot in columns.
pub type ColumnStream = ChunkStream<ColumnChunk>;

impl<T> ChunkStream<T> {
    /// A stream and its sender, with room for `capacity` chunks in flight.
    pub fn channel(capacity: usize) -> (ChunkSender<T>, ChunkStream<T>) {
        let (sender, receiver) = mpsc::channel(capacity.max(1));
        (
            ChunkSender { sender },
            ChunkStream {
                receiver,
                ended: false,
            },
        )
    }

    /// The next chunk, `None` once the read is complete.
    pub async fn next(&mut self) -> Result<Option<T>, SinkError> {
        if self.ended {
            return Ok(None);
        }
        match self.receiver.recv().await {
            Some(Ok(Message::Chunk(chunk))) => Ok(Some(chunk)),
            Some(Ok(Message::End)) => {
                self.ended = true;
                Ok(None)
            }
            Some(Err(err)) => Err(err),
            None => Err(SinkError::new(
                ErrorKind::Storage,
                "the change log reader stopped before the end of the read",
            )),
        }
    }
}

impl UpdateStream {
    /// A stream over updates already in memory, in chunks of `max_rows`.
    pub fn from_updates(updates: Vec<Update>, max_rows: usize) -> UpdateStream {
        let max_rows = max_rows.max(1);
        let chunks = updates.len().div_ceil(max_rows);
        let (sender, stream) = UpdateStream::channel(chunks + 1);
        let mut updates = updates.into_iter().peekable();
        while updates.peek().is_some() {
            let chunk: Vec<Update> = updates.by_ref().take(max_rows).collect();
            // Room for every chunk was made above.
            let _ = sender.sender.try_send(Ok(Message::Chunk(chunk)));
        }
        let _ = sender.sender.try_send(Ok(Message::End));
        stream
    }
}

impl<T> ChunkSender<T> {
    /// Sends a chunk from a blocking thread, waiting for room. `false`: the stream was
    /// dropped, stop reading.
    pub fn blocking_send(&self, chunk: T) -> bool {
        self.sender.blocking_send(Ok(Message::Chunk(chunk))).is_ok()
    }

    /// Sends a chunk from a task, waiting for room. `false`: the stream was dropped.
    pub async fn send(&self, chunk: T) -> bool {
        self.sender.send(Ok(Message::Chunk(chunk))).await.is_ok()
    }

    /// Ends the read successfully (from a blocking thread).
    pub fn blocking_finish(self) {
        let _ = self.sender.blocking_send(Ok(Message::End));
    }

    /// Ends the read successfully (from a task).
    pub async fn finish(self) {
        let _ = self.sender.send(Ok(Message::End)).await;
    }

    /// Ends the read with an error (from a blocking thread).
    pub fn blocking_fail(self, error: SinkError) {
        let _ = self.sender.blocking_send(Err(error));
    }

    /// Ends the read with an error (from a task).
    pub async fn fail(self, error: SinkError) {
        let _ = self.sender.send(Err(error)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use floe_repr::Datum;

    fn update(id: i64) -> Update {
        Update {
            row: vec![Datum::Int64(id)],
            ts: Timestamp(1),
            diff: 1,
        }
    }

    #[tokio::test]
    async fn chunks_then_the_end() {
        let mut stream = UpdateStream::from_updates((0..5).map(update).collect(), 2);
        let mut sizes = Vec::new();
        while let Some(chunk) = stream.next().await.unwrap() {
            sizes.push(chunk.len());
        }
        assert_eq!(sizes, [2, 2, 1]);
        assert_eq!(stream.next().await.unwrap(), None);
    }

    #[tokio::test]
    async fn a_reader_that_stops_early_is_an_error_not_a_short_read() {
        let (sender, mut stream) = UpdateStream::channel(2);
        assert!(sender.send(vec![update(1)]).await);
        drop(sender);
        assert_eq!(stream.next().await.unwrap().map(|c| c.len()), Some(1));
        let err = stream.next().await.unwrap_err();
        assert!(err.message.contains("stopped before the end"), "{err:?}");
    }

    #[tokio::test]
    async fn a_dropped_stream_stops_the_reader() {
        let (sender, stream) = UpdateStream::channel(1);
        drop(stream);
        assert!(!sender.send(vec![update(1)]).await);
    }
}
