//! A sink's view of a collection's change log: [`SinkInput`] over storage.

use std::sync::Arc;

use arrow_array::ArrayRef;
use async_trait::async_trait;
use floe_repr::{GlobalId, RelationDesc, Timestamp};
use floe_sink::input::{
    ChunkStream, ColumnChunk, ColumnStream, READ_AHEAD_CHUNKS, SinkInput, Update, UpdateStream,
};
use floe_sink::{ErrorKind, SinkError};
use floe_storage::{EncodedChunk, LogUpdate, Storage, StorageError};

/// The change log of `collection`, read by sink `sink` (which holds back its
/// compaction at the sink's committed frontier). Rows are cut to `desc`'s
/// columns: a table's columns added after the sink was created are not its.
pub struct CollectionInput {
    storage: Arc<Storage>,
    collection: GlobalId,
    sink: GlobalId,
    desc: RelationDesc,
    /// A materialized view's run-time errors, which hold its upper back (`None`: any
    /// other relation).
    view_errors: Option<ViewErrorGate>,
}

/// What holds the change log of a materialized view back for its sinks: the upper stops
/// where the view's run-time errors began (`division by zero` in one of its rows), so the
/// sink stalls naming the error and goes on once the rows causing it are gone, writing
/// nothing computed while the view held an error.
pub struct ViewErrorGate {
    pub errors: crate::view_errors::ViewErrors,
    /// The view and the materialized views it reads, whose errors are its errors.
    pub upstream: Vec<GlobalId>,
    /// The view's name, for the error the sink stalls with.
    pub name: String,
}

impl ViewErrorGate {
    /// The error the sink stalls with while the view holds one.
    fn error(&self) -> Option<SinkError> {
        self.errors.holding_of(&self.upstream).map(|(_, error)| {
            SinkError::new(
                ErrorKind::RelationError,
                format!("error in materialized view \"{}\": {error}", self.name),
            )
            .with_hint(
                "The sink goes on by itself once the rows causing the error are gone from the view's inputs.",
            )
        })
    }
}

impl CollectionInput {
    pub fn new(
        storage: Arc<Storage>,
        collection: GlobalId,
        sink: GlobalId,
        desc: RelationDesc,
    ) -> CollectionInput {
        CollectionInput {
            storage,
            collection,
            sink,
            desc,
            view_errors: None,
        }
    }

    /// This input, held back by a materialized view's errors.
    pub fn held_back_by(self, gate: ViewErrorGate) -> CollectionInput {
        CollectionInput {
            view_errors: Some(gate),
            ..self
        }
    }

    /// A storage read of rows, each cut to the sink's columns.
    fn stream(
        &self,
        read: impl FnOnce(
            &Storage,
            GlobalId,
            &mut dyn FnMut(Vec<LogUpdate>) -> Result<(), String>,
        ) -> Result<Result<(), String>, StorageError>
        + Send
        + 'static,
    ) -> UpdateStream {
        let width = self.desc.columns.len();
        self.spawn_read(read, move |_, _| {
            Ok(move |updates: Vec<LogUpdate>| {
                updates
                    .into_iter()
                    .map(|mut u| {
                        u.row.truncate(width);
                        Update {
                            row: u.row,
                            ts: u.ts,
                            diff: u.diff,
                        }
                    })
                    .collect()
            })
        })
    }

    /// A storage read of encoded rows: each chunk goes to the sink with the closure that
    /// builds its columns, which the sink runs on threads of its own.
    fn column_stream(
        &self,
        read: impl FnOnce(
            &Storage,
            GlobalId,
            &mut dyn FnMut(EncodedChunk) -> Result<(), String>,
        ) -> Result<Result<(), String>, StorageError>
        + Send
        + 'static,
    ) -> ColumnStream {
        let desc = Arc::new(self.desc.clone());
        self.spawn_read(read, move |storage, collection| {
            // The stored rows' own shape: the table may have gained columns since.
            let stored = Arc::new(storage.desc(collection)?);
            Ok(move |chunk: EncodedChunk| {
                let rows = chunk.len();
                let counts = chunk.counts().to_vec();
                let times = chunk.times().iter().map(|ts| Timestamp(*ts)).collect();
                let (stored, desc) = (stored.clone(), desc.clone());
                ColumnChunk {
                    build: Box::new(move || encoded_columns(&stored, &desc, &chunk)),
                    rows,
                    counts,
                    times,
                }
            })
        })
    }

    /// Runs a storage read on a blocking thread (SQLite reads block), handing its chunks,
    /// each as `converter` (made on that thread) makes it, to the returned stream through
    /// a small bounded channel: the read runs ahead of the sink by at most
    /// [`READ_AHEAD_CHUNKS`] chunks, and stops when the sink drops the stream.
    fn spawn_read<C, T, F>(
        &self,
        read: impl FnOnce(
            &Storage,
            GlobalId,
            &mut dyn FnMut(C) -> Result<(), String>,
        ) -> Result<Result<(), String>, StorageError>
        + Send
        + 'static,
        converter: impl FnOnce(&Storage, GlobalId) -> Result<F, StorageError> + Send + 'static,
    ) -> ChunkStream<T>
    where
        F: FnMut(C) -> T,
        T: Send + 'static,
    {
        let (sender, stream) = ChunkStream::channel(READ_AHEAD_CHUNKS);
        let storage = self.storage.clone();
        let collection = self.collection;
        tokio::task::spawn_blocking(move || {
            let mut convert = match converter(&storage, collection) {
                Ok(convert) => convert,
                Err(error) => return sender.blocking_fail(sink_error(error)),
            };
            let result = read(&storage, collection, &mut |chunk| {
                if sender.blocking_send(convert(chunk)) {
                    Ok(())
                } else {
                    Err("the sink stopped reading".to_string())
                }
            });
            match result {
                Ok(Ok(())) => sender.blocking_finish(),
                // The sink dropped the stream: nobody to tell.
                Ok(Err(_)) => {}
                Err(error) => sender.blocking_fail(sink_error(error)),
            }
        });
        stream
    }

    /// The read hold's holder name: one per sink.
    pub fn holder(sink: GlobalId) -> String {
        format!("sink-{sink}")
    }
}

/// The columns of `desc` (a sink's relation: the stored relation's first columns) of
/// rows read encoded, built from their encodings (`stored` describes them: a table may have
/// gained columns since the sink was created); rows go through datums only when a value
/// needs it, as [`floe_arrow::encoded_columns`] says.
fn encoded_columns(
    stored: &RelationDesc,
    desc: &RelationDesc,
    chunk: &EncodedChunk,
) -> Result<Vec<ArrayRef>, SinkError> {
    let wanted: Vec<usize> = (0..desc.columns.len()).collect();
    let rows = chunk.rows();
    let same_columns = stored.columns.get(..desc.columns.len()) == Some(&desc.columns[..]);
    if same_columns && let Some(built) = floe_arrow::encoded_columns(stored, &rows, &wanted) {
        return built.map_err(floe_sink::types::column_value_error);
    }
    let decoded = rows
        .iter()
        .map(|encoded| {
            let mut row = floe_repr::codec::decode_row(encoded).map_err(|error| {
                SinkError::new(
                    ErrorKind::Storage,
                    format!("reading the change log: a row does not decode: {error}"),
                )
            })?;
            row.truncate(desc.columns.len());
            Ok(row)
        })
        .collect::<Result<Vec<_>, SinkError>>()?;
    floe_arrow::rows_to_columns(desc, &decoded, &wanted)
        .map_err(floe_sink::types::column_value_error)
}

fn sink_error(error: StorageError) -> SinkError {
    match &error {
        StorageError::Compacted { .. } => {
            SinkError::new(ErrorKind::InvalidConfig, error.to_string())
                .with_hint(floe_sink::sink::RECREATE_SINK_HINT)
                .with_retryable(false)
        }
        _ => SinkError::new(
            ErrorKind::Storage,
            format!("reading the change log: {error}"),
        ),
    }
}

#[async_trait]
impl SinkInput for CollectionInput {
    fn desc(&self) -> &RelationDesc {
        &self.desc
    }

    async fn upper(&self) -> Result<Timestamp, SinkError> {
        // The errors first: an error's time is recorded before the log's upper passes it.
        let readable = self
            .view_errors
            .as_ref()
            .and_then(|gate| gate.errors.readable_upper_of(&gate.upstream));
        let upper = self.storage.upper(self.collection).map_err(sink_error)?;
        Ok(match readable {
            Some(readable) => upper.min(Timestamp(readable)),
            None => upper,
        })
    }

    async fn since(&self) -> Result<Timestamp, SinkError> {
        self.storage.since(self.collection).map_err(sink_error)
    }

    async fn read(
        &self,
        lower: Timestamp,
        upper: Timestamp,
        max_rows: usize,
    ) -> Result<UpdateStream, SinkError> {
        Ok(self.stream(move |storage, collection, chunk| {
            storage.read(collection, lower, upper, max_rows, chunk)
        }))
    }

    async fn snapshot(&self, upper: Timestamp, max_rows: usize) -> Result<UpdateStream, SinkError> {
        Ok(self.stream(move |storage, collection, chunk| {
            storage.read_snapshot(collection, upper, max_rows, chunk)
        }))
    }

    async fn snapshot_columns(
        &self,
        upper: Timestamp,
        max_rows: usize,
        max_bytes: usize,
    ) -> Result<Option<ColumnStream>, SinkError> {
        Ok(Some(self.column_stream(
            move |storage, collection, chunk| {
                storage.read_snapshot_encoded(collection, upper, (max_rows, max_bytes), chunk)
            },
        )))
    }

    async fn read_columns(
        &self,
        lower: Timestamp,
        upper: Timestamp,
        max_rows: usize,
        max_bytes: usize,
    ) -> Result<Option<ColumnStream>, SinkError> {
        Ok(Some(self.column_stream(
            move |storage, collection, chunk| {
                storage.read_encoded(collection, lower, upper, (max_rows, max_bytes), chunk)
            },
        )))
    }

    async fn error(&self) -> Result<Option<SinkError>, SinkError> {
        Ok(self.view_errors.as_ref().and_then(ViewErrorGate::error))
    }

    async fn allow_compaction(&self, frontier: Timestamp) -> Result<(), SinkError> {
        let (collection, holder) = (self.collection, CollectionInput::holder(self.sink));
        // A durable write behind the writer lock: on a blocking thread.
        self.storage
            .blocking(move |storage| storage.set_read_hold(collection, &holder, frontier))
            .await
            .map_err(sink_error)
    }
}
