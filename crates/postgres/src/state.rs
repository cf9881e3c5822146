//! What a source keeps durably, in floe's storage next to the rows it writes, so that a
//! restart (or `kill -9`) resumes exactly where the last durable write ended:
//! - the **progress** collection (`<source>_progress`, one row `(lsn uint8)`): every
//!   upstream change committed before this LSN is in the subsources, nothing after it;
//! - the **source's own** collection, one row per subsource `(subsource, snapshot_lsn,
//!   error)`: the LSN its snapshot was taken at (stream changes committed before it are
//!   already in the snapshot) and, once it failed, its error, which is permanent.
//!
//! Both change in the same storage transaction as the rows they describe.

use std::collections::{BTreeMap, HashMap};

use floe_repr::{Datum, GlobalId, RelationDesc, Row, SqlScalarType};
use floe_storage::{EncodedInserts, Storage, Updates};

use crate::error::PgError;
use crate::lsn::Lsn;

/// The progress collection's relation: `(lsn uint8)`.
pub fn progress_desc() -> RelationDesc {
    RelationDesc::from_columns(&[("lsn", SqlScalarType::UInt64, false)], vec![])
}

/// The source's own relation: `(subsource text, snapshot_lsn uint8, error text)`, one row
/// per subsource, keyed by the subsource's id.
pub fn source_desc() -> RelationDesc {
    RelationDesc::from_columns(
        &[
            ("subsource", SqlScalarType::Text, false),
            ("snapshot_lsn", SqlScalarType::UInt64, false),
            ("error", SqlScalarType::Text, true),
        ],
        vec![vec![0]],
    )
}

/// A subsource's durable state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SubsourceState {
    pub snapshot_lsn: Lsn,
    pub error: Option<String>,
}

impl SubsourceState {
    fn row(&self, id: GlobalId) -> Row {
        vec![
            Datum::Text(id.to_string()),
            Datum::UInt64(self.snapshot_lsn.0),
            self.error.clone().map_or(Datum::Null, Datum::Text),
        ]
    }
}

fn progress_row(lsn: Lsn) -> Row {
    vec![Datum::UInt64(lsn.0)]
}

/// Everything durable about a source, as read at start and kept current by its writer.
#[derive(Debug, Clone, Default)]
pub(crate) struct DurableState {
    /// `None` until the initial snapshot is written.
    pub progress: Option<Lsn>,
    pub subsources: HashMap<GlobalId, SubsourceState>,
}

fn corrupt(what: &str, row: &Row) -> PgError {
    PgError::storage(format!(
        "the source's {what} holds an unexpected row: {row:?}"
    ))
    .with_retryable(false)
}

impl DurableState {
    pub fn read(
        storage: &Storage,
        source_id: GlobalId,
        progress_id: GlobalId,
    ) -> Result<DurableState, PgError> {
        let storage_error = |e: floe_storage::StorageError| PgError::storage(e.to_string());
        let (progress_rows, _) = storage.contents(progress_id).map_err(storage_error)?;
        let progress = match progress_rows.as_slice() {
            [] => None,
            [row] => match row.as_slice() {
                [Datum::UInt64(lsn)] => Some(Lsn(*lsn)),
                _ => return Err(corrupt("progress", row)),
            },
            [row, ..] => return Err(corrupt("progress", row)),
        };
        let (state_rows, _) = storage.contents(source_id).map_err(storage_error)?;
        let mut subsources = HashMap::new();
        for row in &state_rows {
            let (id, state) = match row.as_slice() {
                [Datum::Text(id), Datum::UInt64(lsn), error] => {
                    let id: GlobalId = id.parse().map_err(|_| corrupt("state", row))?;
                    let error = match error {
                        Datum::Text(text) => Some(text.clone()),
                        _ => None,
                    };
                    (
                        id,
                        SubsourceState {
                            snapshot_lsn: Lsn(*lsn),
                            error,
                        },
                    )
                }
                _ => return Err(corrupt("state", row)),
            };
            subsources.insert(id, state);
        }
        Ok(DurableState {
            progress,
            subsources,
        })
    }

    /// The subsource's error, if it failed.
    pub fn error(&self, id: GlobalId) -> Option<&str> {
        self.subsources.get(&id).and_then(|s| s.error.as_deref())
    }
}

/// One storage transaction being assembled: rows, and the state they move to.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    pub updates: BTreeMap<GlobalId, Vec<(Row, i64)>>,
    /// Snapshots' rows, encoded as they were read, each into its own subsource.
    pub loads: Vec<EncodedInserts>,
    /// The progress after this batch (when it moves).
    pub progress: Option<Lsn>,
    /// Subsource states after this batch (new subsources, new errors).
    pub states: BTreeMap<GlobalId, SubsourceState>,
    pub update_count: u64,
    /// Whether the stream had caught up with the server when the batch ended (its last
    /// event was a keepalive after every transaction in it).
    pub caught_up: bool,
    /// Collections whose upper the write moves even without changes: a source reports
    /// its own frontier (the storage ticker leaves its collections alone), so a caught-up
    /// write moves every healthy collection to the write's time, and a source that is
    /// behind or stalled shows its lag.
    pub advance: Vec<GlobalId>,
}

impl Batch {
    pub fn push(&mut self, id: GlobalId, row: Row, diff: i64) {
        self.updates.entry(id).or_default().push((row, diff));
        self.update_count += 1;
    }

    /// Adds a table's snapshot, loaded into its subsource.
    pub fn load(&mut self, inserts: EncodedInserts) {
        self.update_count += inserts.len() as u64;
        self.loads.push(inserts);
    }

    /// Whether anything beyond moving the progress is in it.
    pub fn has_data(&self) -> bool {
        self.update_count > 0 || !self.states.is_empty()
    }

    pub fn is_empty(&self) -> bool {
        !self.has_data() && self.progress.is_none()
    }

    /// Writes the batch in one storage transaction: all of it is durable afterwards, or
    /// none of it. The old progress and state rows are retracted by value, so a writer
    /// working from stale state is refused (the retraction of an absent row fails)
    /// instead of writing twice. `durable` becomes the new state on success.
    pub fn write(
        self,
        storage: &std::sync::Arc<Storage>,
        source_id: GlobalId,
        progress_id: GlobalId,
        durable: &mut DurableState,
    ) -> Result<(), PgError> {
        let mut batches: Vec<(GlobalId, Updates)> = self
            .updates
            .into_iter()
            .map(|(id, rows)| (id, Updates::Rows(rows)))
            .collect();
        let loads = self.loads.into_iter();
        batches.extend(loads.map(|load| (load.collection(), Updates::Encoded(load))));
        if let Some(progress) = self.progress {
            let mut changes = vec![(progress_row(progress), 1)];
            if let Some(old) = durable.progress {
                changes.push((progress_row(old), -1));
            }
            batches.push((progress_id, Updates::Rows(changes)));
        }
        if !self.states.is_empty() {
            let mut changes = Vec::new();
            for (id, state) in &self.states {
                if let Some(old) = durable.subsources.get(id) {
                    changes.push((old.row(*id), -1));
                }
                changes.push((state.row(*id), 1));
            }
            batches.push((source_id, Updates::Rows(changes)));
        }
        for id in self.advance {
            if !batches.iter().any(|(written, _)| *written == id) {
                batches.push((id, Updates::Rows(Vec::new())));
            }
        }
        match storage.append_updates_blocking(batches) {
            Ok(Ok(_)) => {}
            Ok(Err(refused)) => {
                return Err(PgError::storage(format!(
                    "storage refused the source's write ({refused:?}); another writer may have moved its progress"
                )));
            }
            Err(e) => return Err(PgError::storage(e.to_string())),
        }
        if let Some(progress) = self.progress {
            durable.progress = Some(progress);
        }
        durable.subsources.extend(self.states);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_write_rows_progress_and_states_together_and_refuse_stale_writers() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Storage::open(dir.path()).unwrap();
        let (source, progress, table) = (GlobalId::User(1), GlobalId::User(2), GlobalId::User(3));
        storage.register(source, source_desc()).unwrap();
        storage.register(progress, progress_desc()).unwrap();
        storage
            .register(
                table,
                RelationDesc::from_columns(&[("a", SqlScalarType::Int32, true)], vec![]),
            )
            .unwrap();
        let mut durable = DurableState::read(&storage, source, progress).unwrap();
        assert_eq!(durable.progress, None);
        let mut first = Batch::default();
        first.push(table, vec![Datum::Int32(1)], 1);
        first.progress = Some(Lsn(100));
        first.states.insert(
            table,
            SubsourceState {
                snapshot_lsn: Lsn(100),
                error: None,
            },
        );
        first
            .write(&storage, source, progress, &mut durable)
            .unwrap();
        let stale = durable.clone();
        let mut second = Batch {
            progress: Some(Lsn(200)),
            ..Batch::default()
        };
        second.states.insert(
            table,
            SubsourceState {
                snapshot_lsn: Lsn(100),
                error: Some("table was truncated".into()),
            },
        );
        second
            .write(&storage, source, progress, &mut durable)
            .unwrap();
        let reread = DurableState::read(&storage, source, progress).unwrap();
        assert_eq!(reread.progress, Some(Lsn(200)));
        assert_eq!(reread.error(table), Some("table was truncated"));
        // A writer that still believes the progress is 100 is refused, and writes nothing.
        let mut stale = stale;
        let mut late = Batch::default();
        late.push(table, vec![Datum::Int32(2)], 1);
        late.progress = Some(Lsn(150));
        assert!(late.write(&storage, source, progress, &mut stale).is_err());
        assert_eq!(
            storage.contents(table).unwrap().0,
            vec![vec![Datum::Int32(1)]]
        );
    }
}
