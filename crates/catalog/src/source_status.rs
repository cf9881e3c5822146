//! The status history of sources (`mz_source_status_history`), kept in the catalog
//! database so that it survives restarts. A Postgres source reports for itself, its
//! progress relation and each subsource.

use floe_repr::{GlobalId, ReplicaId};
use rusqlite::{OptionalExtension, params};

use crate::status::{StatusHistory, StatusRow};
use crate::{Catalog, CatalogError};

/// One entry of `mz_source_status_history`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceStatusEvent {
    /// Milliseconds since the Unix epoch.
    pub occurred_at: u64,
    /// The source, subsource or progress relation.
    pub source_id: GlobalId,
    pub status: String,
    pub error: Option<String>,
    /// A JSON document (`{"hints": [...]}`), or `None`.
    pub details: Option<String>,
    pub replica_id: Option<ReplicaId>,
}

/// Status changes kept per object: a source that loses its upstream every night for a
/// year must not grow the history (and every read of `mz_source_statuses`) without end.
pub const SOURCE_STATUS_HISTORY_PER_SOURCE: usize = 1_000;

const SOURCE_STATUS_HISTORY: StatusHistory = StatusHistory {
    table: "source_status_history",
    object_column: "source_id",
    kept: SOURCE_STATUS_HISTORY_PER_SOURCE,
};

impl Catalog {
    /// Appends a status change unless the object's latest status already has this
    /// status and error; the object's changes beyond the newest
    /// [`SOURCE_STATUS_HISTORY_PER_SOURCE`] go in the same transaction. Returns whether
    /// it recorded.
    pub fn record_source_status_if_changed(
        &mut self,
        event: &SourceStatusEvent,
    ) -> Result<bool, CatalogError> {
        let source_id = event.source_id.to_string();
        let transaction = self.connection.transaction()?;
        let latest = SOURCE_STATUS_HISTORY.latest(&transaction, &source_id)?;
        if latest.is_some_and(|(status, error)| status == event.status && error == event.error) {
            return Ok(false);
        }
        SOURCE_STATUS_HISTORY.append(
            &transaction,
            StatusRow {
                occurred_at: event.occurred_at,
                object_id: &source_id,
                status: &event.status,
                error: &event.error,
                details: &event.details,
                replica_id: event.replica_id,
            },
        )?;
        transaction.commit()?;
        Ok(true)
    }

    /// The object's latest status, if it has any.
    pub fn latest_source_status(&self, id: GlobalId) -> Result<Option<String>, CatalogError> {
        Ok(self
            .connection
            .query_row(
                "SELECT status FROM source_status_history WHERE source_id = ?1
                 ORDER BY sequence DESC LIMIT 1",
                params![id.to_string()],
                |row| row.get(0),
            )
            .optional()?)
    }

    /// The whole source status history, oldest first.
    pub fn source_status_history(&self) -> Result<Vec<SourceStatusEvent>, CatalogError> {
        let mut statement = self.connection.prepare_cached(
            "SELECT occurred_at, source_id, status, error, details, replica_id
             FROM source_status_history ORDER BY sequence",
        )?;
        let mut rows = statement.query([])?;
        let mut events = Vec::new();
        while let Some(row) = rows.next()? {
            let source_id: String = row.get(1)?;
            let replica_id: Option<String> = row.get(5)?;
            events.push(SourceStatusEvent {
                occurred_at: u64::try_from(row.get::<_, i64>(0)?).unwrap_or(0),
                source_id: source_id
                    .parse()
                    .map_err(|e| CatalogError::Corrupt(format!("source status: {e}")))?,
                status: row.get(2)?,
                error: row.get(3)?,
                details: row.get(4)?,
                replica_id: replica_id.and_then(|r| r.parse().ok()),
            });
        }
        Ok(events)
    }
}
