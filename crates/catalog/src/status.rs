//! What running sinks report, kept in the catalog database so that it
//! survives restarts: the status history (`mz_sink_status_history`) and each
//! sink's progress and statistics.

use std::collections::BTreeMap;

use floe_repr::{GlobalId, ReplicaId};
use rusqlite::{OptionalExtension, params};

use crate::{Catalog, CatalogError};

/// What a sink reported, kept across restarts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoredSinkProgress {
    /// Everything before this time (ms) is delivered.
    pub frontier: u64,
    pub table_uuid: Option<String>,
    pub metadata_location: Option<String>,
    pub messages_staged: u64,
    pub messages_committed: u64,
    pub bytes_staged: u64,
    pub bytes_committed: u64,
}

/// A status of `mz_sink_statuses`, named as Materialize names it, with the
/// order statuses may follow each other in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ObjectStatus {
    /// Recorded once, when the object is created.
    Created,
    /// Connecting, or resuming after a restart.
    Starting,
    Running,
    /// Not running because its cluster has no replica.
    Paused,
    /// Not making progress; the error says why.
    Stalled,
    /// The object was dropped: its last status.
    Dropped,
}

impl ObjectStatus {
    pub const ALL: [ObjectStatus; 6] = [
        ObjectStatus::Created,
        ObjectStatus::Starting,
        ObjectStatus::Running,
        ObjectStatus::Paused,
        ObjectStatus::Stalled,
        ObjectStatus::Dropped,
    ];

    /// The name the system views show.
    pub const fn as_str(self) -> &'static str {
        match self {
            ObjectStatus::Created => "created",
            ObjectStatus::Starting => "starting",
            ObjectStatus::Running => "running",
            ObjectStatus::Paused => "paused",
            ObjectStatus::Stalled => "stalled",
            ObjectStatus::Dropped => "dropped",
        }
    }

    pub fn from_name(name: &str) -> Option<ObjectStatus> {
        ObjectStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == name)
    }

    /// Whether this status may be recorded after `previous` (`None`: the
    /// object has no status yet): `created` comes first or not at all, and
    /// nothing comes after `dropped`.
    pub fn may_follow(self, previous: Option<ObjectStatus>) -> bool {
        match previous {
            Some(ObjectStatus::Dropped) => false,
            Some(_) => self != ObjectStatus::Created,
            None => true,
        }
    }
}

impl std::fmt::Display for ObjectStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&ObjectStatus> for String {
    fn from(status: &ObjectStatus) -> String {
        status.as_str().to_string()
    }
}

/// One entry of `mz_sink_status_history`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkStatusEvent {
    /// Milliseconds since the Unix epoch.
    pub occurred_at: u64,
    pub sink_id: GlobalId,
    pub status: ObjectStatus,
    pub error: Option<String>,
    /// A JSON document, or `None`.
    pub details: Option<String>,
    pub replica_id: Option<ReplicaId>,
}

/// Status changes kept per sink in `mz_sink_status_history`: a sink that flaps for months
/// must not make the history (and every read of `mz_sink_statuses`) grow without end.
pub const SINK_STATUS_HISTORY_PER_SINK: usize = 1_000;

/// A status history table: `sink_status_history` and `source_status_history` share
/// their columns but for the object's, and are appended to and pruned alike.
pub(crate) struct StatusHistory {
    pub(crate) table: &'static str,
    /// The column of the object whose status changed.
    pub(crate) object_column: &'static str,
    /// Status changes kept per object.
    pub(crate) kept: usize,
}

/// A row of a status history table.
pub(crate) struct StatusRow<'a> {
    /// Milliseconds since the Unix epoch.
    pub occurred_at: u64,
    pub object_id: &'a str,
    pub status: &'a str,
    pub error: &'a Option<String>,
    pub details: &'a Option<String>,
    pub replica_id: Option<ReplicaId>,
}

pub(crate) const SINK_STATUS_HISTORY: StatusHistory = StatusHistory {
    table: "sink_status_history",
    object_column: "sink_id",
    kept: SINK_STATUS_HISTORY_PER_SINK,
};

impl StatusHistory {
    /// Appends `row`, and forgets the object's changes beyond the newest `kept`, in
    /// `transaction`.
    pub(crate) fn append(
        &self,
        transaction: &rusqlite::Transaction<'_>,
        row: StatusRow<'_>,
    ) -> Result<(), CatalogError> {
        let StatusHistory {
            table,
            object_column,
            kept,
        } = self;
        transaction.execute(
            &format!(
                "INSERT INTO {table} (occurred_at, {object_column}, status, error, details, replica_id)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
            ),
            params![
                i64::try_from(row.occurred_at).unwrap_or(i64::MAX),
                row.object_id,
                row.status,
                row.error,
                row.details,
                row.replica_id.map(|r| r.to_string())
            ],
        )?;
        transaction.execute(
            &format!(
                "DELETE FROM {table} WHERE {object_column} = ?1 AND sequence <= (
                     SELECT sequence FROM {table} WHERE {object_column} = ?1
                     ORDER BY sequence DESC LIMIT 1 OFFSET ?2)"
            ),
            params![row.object_id, *kept as i64],
        )?;
        Ok(())
    }

    /// The object's latest status and error, if it has any.
    pub(crate) fn latest(
        &self,
        connection: &rusqlite::Connection,
        object_id: &str,
    ) -> Result<Option<(String, Option<String>)>, CatalogError> {
        let StatusHistory {
            table,
            object_column,
            ..
        } = self;
        Ok(connection
            .query_row(
                &format!(
                    "SELECT status, error FROM {table} WHERE {object_column} = ?1
                     ORDER BY sequence DESC LIMIT 1"
                ),
                params![object_id],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()?)
    }
}

impl Catalog {
    /// Appends a sink status change, and forgets the sink's changes beyond the newest
    /// [`SINK_STATUS_HISTORY_PER_SINK`] in the same transaction. A change the
    /// sink's latest status does not allow (see [`ObjectStatus::may_follow`]) is
    /// refused.
    pub fn record_sink_status(&mut self, event: &SinkStatusEvent) -> Result<(), CatalogError> {
        let previous = self
            .latest_sink_status(event.sink_id)?
            .map(|(status, _)| status);
        if !event.status.may_follow(previous) {
            return Err(CatalogError::internal(format!(
                "sink {} cannot go from {} to {}",
                event.sink_id,
                previous.map_or("no status", ObjectStatus::as_str),
                event.status
            )));
        }
        let transaction = self.connection.transaction()?;
        let sink_id = event.sink_id.to_string();
        SINK_STATUS_HISTORY.append(
            &transaction,
            StatusRow {
                occurred_at: event.occurred_at,
                object_id: &sink_id,
                status: event.status.as_str(),
                error: &event.error,
                details: &event.details,
                replica_id: event.replica_id,
            },
        )?;
        transaction.commit()?;
        Ok(())
    }

    /// Stores a sink's progress and statistics.
    pub fn set_sink_progress(
        &mut self,
        sink: GlobalId,
        progress: &StoredSinkProgress,
    ) -> Result<(), CatalogError> {
        let as_i64 = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        self.connection.execute(
            "INSERT INTO sink_progress (sink_id, frontier, table_uuid, metadata_location,
                 messages_staged, messages_committed, bytes_staged, bytes_committed)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
             ON CONFLICT (sink_id) DO UPDATE SET frontier = excluded.frontier,
                 table_uuid = excluded.table_uuid, metadata_location = excluded.metadata_location,
                 messages_staged = excluded.messages_staged, messages_committed = excluded.messages_committed,
                 bytes_staged = excluded.bytes_staged, bytes_committed = excluded.bytes_committed",
            params![
                sink.to_string(),
                as_i64(progress.frontier),
                progress.table_uuid,
                progress.metadata_location,
                as_i64(progress.messages_staged),
                as_i64(progress.messages_committed),
                as_i64(progress.bytes_staged),
                as_i64(progress.bytes_committed)
            ],
        )?;
        Ok(())
    }

    /// Every sink's stored progress.
    pub fn sink_progress(&self) -> Result<BTreeMap<GlobalId, StoredSinkProgress>, CatalogError> {
        let mut statement = self.connection.prepare_cached(
            "SELECT sink_id, frontier, table_uuid, metadata_location, messages_staged,
                    messages_committed, bytes_staged, bytes_committed FROM sink_progress",
        )?;
        let rows = statement.query_map([], |row| {
            let as_u64 = |v: i64| u64::try_from(v).unwrap_or(0);
            Ok((
                row.get::<_, String>(0)?,
                StoredSinkProgress {
                    frontier: as_u64(row.get(1)?),
                    table_uuid: row.get(2)?,
                    metadata_location: row.get(3)?,
                    messages_staged: as_u64(row.get(4)?),
                    messages_committed: as_u64(row.get(5)?),
                    bytes_staged: as_u64(row.get(6)?),
                    bytes_committed: as_u64(row.get(7)?),
                },
            ))
        })?;
        let mut progress = BTreeMap::new();
        for row in rows {
            let (id, value) = row?;
            if let Ok(id) = id.parse() {
                progress.insert(id, value);
            }
        }
        Ok(progress)
    }

    /// The sink's latest status and error, if it has any.
    pub fn latest_sink_status(
        &self,
        sink: GlobalId,
    ) -> Result<Option<(ObjectStatus, Option<String>)>, CatalogError> {
        SINK_STATUS_HISTORY
            .latest(&self.connection, &sink.to_string())?
            .map(|(status, error)| Ok((stored_status(&status)?, error)))
            .transpose()
    }

    /// Appends a sink status change unless the sink's latest status already
    /// has this status and error. Reads only that latest entry (indexed), so
    /// the cost does not grow with the history. Returns whether it recorded.
    pub fn record_sink_status_if_changed(
        &mut self,
        event: &SinkStatusEvent,
    ) -> Result<bool, CatalogError> {
        let latest = self.latest_sink_status(event.sink_id)?;
        if latest
            .as_ref()
            .is_some_and(|(status, error)| *status == event.status && *error == event.error)
        {
            return Ok(false);
        }
        self.record_sink_status(event)?;
        Ok(true)
    }

    /// The whole status history, oldest first.
    pub fn sink_status_history(&self) -> Result<Vec<SinkStatusEvent>, CatalogError> {
        let mut statement = self.connection.prepare_cached(
            "SELECT occurred_at, sink_id, status, error, details, replica_id
             FROM sink_status_history ORDER BY sequence",
        )?;
        let rows = statement.query_map([], |row| {
            Ok((
                row.get::<_, i64>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, String>(2)?,
                row.get::<_, Option<String>>(3)?,
                row.get::<_, Option<String>>(4)?,
                row.get::<_, Option<String>>(5)?,
            ))
        })?;
        let mut events = Vec::new();
        for row in rows {
            let (occurred_at, sink_id, status, error, details, replica_id) = row?;
            events.push(SinkStatusEvent {
                occurred_at: u64::try_from(occurred_at).unwrap_or(0),
                sink_id: crate::stored_id(&sink_id, "sink status")?,
                status: stored_status(&status)?,
                error,
                details,
                replica_id: replica_id.and_then(|r| r.parse().ok()),
            });
        }
        Ok(events)
    }
}

/// A status as stored.
fn stored_status(name: &str) -> Result<ObjectStatus, CatalogError> {
    ObjectStatus::from_name(name)
        .ok_or_else(|| CatalogError::Corrupt(format!("unknown sink status '{name}'")))
}
