//! A sink's view of a collection's change log: [`SinkInput`] over storage.

use std::sync::Arc;

use async_trait::async_trait;
use floe_repr::{GlobalId, RelationDesc, Timestamp};
use floe_sink::input::{SinkInput, Update};
use floe_sink::{ErrorKind, SinkError};
use floe_storage::{Storage, StorageError};

/// The change log of `collection`, read by sink `sink` (which holds back its
/// compaction at the sink's committed frontier).
pub struct CollectionInput {
    storage: Arc<Storage>,
    collection: GlobalId,
    sink: GlobalId,
    desc: RelationDesc,
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
        }
    }

    /// The read hold's holder name: one per sink.
    pub fn holder(sink: GlobalId) -> String {
        format!("sink-{sink}")
    }
}

fn sink_error(error: StorageError) -> SinkError {
    match &error {
        StorageError::Compacted { .. } => {
            SinkError::new(ErrorKind::InvalidConfig, error.to_string()).with_retryable(false)
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
        self.storage.upper(self.collection).map_err(sink_error)
    }

    async fn since(&self) -> Result<Timestamp, SinkError> {
        self.storage.since(self.collection).map_err(sink_error)
    }

    async fn read(
        &self,
        lower: Timestamp,
        upper: Timestamp,
        max_rows: usize,
        chunk: &mut (dyn FnMut(Vec<Update>) -> Result<(), SinkError> + Send),
    ) -> Result<(), SinkError> {
        // SQLite reads block; they run on this task's thread, which the
        // sink task owns. Chunks keep memory bounded by `max_rows`.
        let mut failure = None;
        let result = tokio::task::block_in_place(|| {
            self.storage
                .read(self.collection, lower, upper, max_rows, &mut |updates| {
                    let updates = updates
                        .into_iter()
                        .map(|u| Update {
                            row: u.row,
                            ts: u.ts,
                            diff: u.diff,
                        })
                        .collect();
                    chunk(updates).map_err(|e| {
                        let message = e.message.clone();
                        failure = Some(e);
                        message
                    })
                })
        });
        match result {
            Err(e) => Err(sink_error(e)),
            Ok(Err(message)) => {
                Err(failure.unwrap_or_else(|| SinkError::new(ErrorKind::Storage, message)))
            }
            Ok(Ok(())) => Ok(()),
        }
    }

    async fn allow_compaction(&self, frontier: Timestamp) -> Result<(), SinkError> {
        self.storage
            .set_read_hold(
                self.collection,
                &CollectionInput::holder(self.sink),
                frontier,
            )
            .map_err(sink_error)
    }
}
