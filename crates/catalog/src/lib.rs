//! The durable catalog: every object a user creates, in SQLite.
//!
//! - Schema migrations are keyed on `PRAGMA user_version`.
//! - Definitions are stored from versioned durable types (`durable.rs`), never
//!   from the planner's types, so the SQL floe understands can change without
//!   making data directories unreadable.
//! - Every DDL is one SQLite transaction (WAL, `synchronous = FULL`): after
//!   `commit` returns it survives `kill -9`; before, nothing of it is visible.
//! - The in-memory [`CatalogState`] mirrors the tables and is only changed
//!   after the transaction committed.
//! - Secret values are encrypted ([`secrets`]); definitions never hold them.

mod durable;
pub mod secrets;
mod source_status;
mod state;
mod status;
mod transact;

use std::path::{Path, PathBuf};

use floe_repr::{ClusterId, GlobalId, ReplicaId};
use floe_sql::PlanError;
use floe_sql::catalog::{CatalogItem, Cluster, DEFAULT_CLUSTER, QualifiedName, Replica, Schema};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

pub use secrets::SecretsKey;
pub use source_status::{SOURCE_STATUS_HISTORY_PER_SOURCE, SourceStatusEvent};
pub use state::CatalogState;
pub use status::{ObjectStatus, SINK_STATUS_HISTORY_PER_SINK, SinkStatusEvent, StoredSinkProgress};
pub use transact::{
    CatalogChange, CatalogDiff, NewItem, NewReplica, Op, RoleOp, SecretValue, Verifier,
};

/// The setting naming the floe version whose planning the stored shapes of plain
/// views are (see [`Catalog::views_planned_by`]).
const VIEWS_PLANNED_BY: &str = "views_planned_by";

/// The first object id Materialize gives user objects.
const FIRST_USER_OID: u32 = 20_000;

/// Why a catalog operation failed.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("catalog storage error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("catalog file {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// What is on disk cannot be read back.
    #[error("catalog is corrupt: {0}")]
    Corrupt(String),
    /// The data directory was made with other settings (its external id prefix).
    #[error("{0}")]
    Conflict(String),
    /// The catalog as it is now refuses a transaction's ops: a name taken or an
    /// object dropped since the statement was planned. The error is the one
    /// planning would give had it seen the catalog as it is.
    #[error("{0}")]
    Rejected(PlanError),
    /// A broken invariant of floe itself, never the user's doing.
    #[error("internal catalog error: {0}")]
    Internal(String),
}

impl CatalogError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> CatalogError {
        CatalogError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    pub(crate) fn internal(message: impl Into<String>) -> CatalogError {
        CatalogError::Internal(message.into())
    }
}

/// The migrations, in order; `PRAGMA user_version` counts those applied.
const MIGRATIONS: &[&str] = &[
    // 1: the objects users create.
    "CREATE TABLE settings (name TEXT PRIMARY KEY, value TEXT NOT NULL);
     CREATE TABLE id_allocators (name TEXT PRIMARY KEY, next_id INTEGER NOT NULL);
     CREATE TABLE items (
         id TEXT PRIMARY KEY,
         oid INTEGER NOT NULL UNIQUE,
         database_name TEXT NOT NULL,
         schema_name TEXT NOT NULL,
         name TEXT NOT NULL,
         definition TEXT NOT NULL,
         create_sql TEXT NOT NULL,
         UNIQUE (database_name, schema_name, name)
     );
     CREATE TABLE secrets (
         owner_id TEXT NOT NULL,
         slot TEXT NOT NULL,
         nonce BLOB NOT NULL,
         ciphertext BLOB NOT NULL,
         PRIMARY KEY (owner_id, slot)
     );
     CREATE TABLE clusters (
         id TEXT PRIMARY KEY,
         name TEXT NOT NULL UNIQUE,
         managed INTEGER NOT NULL,
         size TEXT,
         replication_factor INTEGER
     );
     CREATE TABLE cluster_replicas (
         id TEXT PRIMARY KEY,
         cluster_id TEXT NOT NULL REFERENCES clusters (id),
         name TEXT NOT NULL,
         size TEXT NOT NULL,
         UNIQUE (cluster_id, name)
     );
     INSERT INTO id_allocators VALUES ('item', 1), ('oid', 20000), ('cluster', 1), ('replica', 1);",
    // 2: sink status history, which survives restarts.
    "CREATE TABLE sink_status_history (
         sequence INTEGER PRIMARY KEY AUTOINCREMENT,
         occurred_at INTEGER NOT NULL,
         sink_id TEXT NOT NULL,
         status TEXT NOT NULL,
         error TEXT,
         details TEXT,
         replica_id TEXT
     );
     CREATE INDEX sink_status_history_by_sink ON sink_status_history (sink_id, sequence);",
    // 3: what running sinks report: progress and cumulative statistics.
    "CREATE TABLE sink_progress (
         sink_id TEXT PRIMARY KEY,
         frontier INTEGER NOT NULL,
         table_uuid TEXT,
         metadata_location TEXT,
         messages_staged INTEGER NOT NULL DEFAULT 0,
         messages_committed INTEGER NOT NULL DEFAULT 0,
         bytes_staged INTEGER NOT NULL DEFAULT 0,
         bytes_committed INTEGER NOT NULL DEFAULT 0
     );",
    // 4: the format each stored definition is written in (see `durable.rs`);
    // rows written before are format 1, the shape floe 0.1.0 wrote.
    "ALTER TABLE items ADD COLUMN definition_format INTEGER NOT NULL DEFAULT 1;",
    // 5: source status history (Postgres sources, their subsources and progress).
    "CREATE TABLE source_status_history (
         sequence INTEGER PRIMARY KEY AUTOINCREMENT,
         occurred_at INTEGER NOT NULL,
         source_id TEXT NOT NULL,
         status TEXT NOT NULL,
         error TEXT,
         details TEXT,
         replica_id TEXT
     );
     CREATE INDEX source_status_history_by_source ON source_status_history (source_id, sequence);",
    // 6: schemas users create (`public` is implicit, id u3) and comments
    // (`COMMENT ON`; column 0 is the object itself).
    "CREATE TABLE schemas (
         id INTEGER PRIMARY KEY,
         oid INTEGER NOT NULL UNIQUE,
         database_name TEXT NOT NULL,
         name TEXT NOT NULL,
         UNIQUE (database_name, name)
     );
     INSERT INTO id_allocators VALUES ('schema', 4);
     CREATE TABLE comments (
         object_id TEXT NOT NULL,
         column_position INTEGER NOT NULL,
         comment TEXT NOT NULL,
         PRIMARY KEY (object_id, column_position)
     );",
    // 7: roles (passwords only as SCRAM verifiers), role membership, owners and
    // grants (`transact/roles.rs`). The superuser `materialize` is `u1`, owner of
    // everything made before; PUBLIC may use the database, the `public` schema
    // and the default cluster, as in Materialize.
    "CREATE TABLE roles (
         id TEXT PRIMARY KEY,
         oid INTEGER NOT NULL UNIQUE,
         name TEXT NOT NULL UNIQUE,
         login INTEGER NOT NULL,
         superuser INTEGER NOT NULL,
         inherit INTEGER NOT NULL,
         password TEXT
     );
     CREATE TABLE role_members (
         role_id TEXT NOT NULL,
         member_id TEXT NOT NULL,
         grantor_id TEXT NOT NULL,
         PRIMARY KEY (role_id, member_id)
     );
     CREATE TABLE object_owners (object TEXT PRIMARY KEY, owner_id TEXT NOT NULL);
     CREATE TABLE object_privileges (
         object TEXT NOT NULL,
         grantee_id TEXT NOT NULL,
         grantor_id TEXT NOT NULL,
         privileges TEXT NOT NULL,
         PRIMARY KEY (object, grantee_id, grantor_id)
     );
     INSERT INTO roles VALUES ('u1', 16661, 'materialize', 1, 1, 1, NULL);
     INSERT INTO id_allocators VALUES ('role', 2);
     INSERT INTO object_privileges VALUES ('database', 'p', 'u1', 'U'), ('schema:public', 'p', 'u1', 'U');
     INSERT INTO object_privileges
         SELECT 'cluster:' || id, 'p', 'u1', 'U' FROM clusters WHERE name = 'quickstart';",
];

/// The durable catalog.
pub struct Catalog {
    connection: Connection,
    state: CatalogState,
    secrets_key: SecretsKey,
    /// A UUID fixed for the life of the data directory: the middle of every
    /// AWS external id, and the owner mark on Iceberg tables floe creates.
    environment_id: String,
    /// Names of objects dropped while open, for the errors of stale plans.
    tombstones: transact::Tombstones,
    /// Counts the changes of `state` since the catalog was opened: what was
    /// planned against one revision holds until the next (cached query plans).
    revision: u64,
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog")
            .field("environment_id", &self.environment_id)
            .finish_non_exhaustive()
    }
}

impl Catalog {
    /// Opens (creating if needed) the catalog in `data_dir`. `environment_id`
    /// is used only when the directory is new; an existing directory keeps
    /// its own, and a different explicit value is refused.
    pub fn open(data_dir: &Path, environment_id: Option<&str>) -> Result<Catalog, CatalogError> {
        std::fs::create_dir_all(data_dir).map_err(|e| CatalogError::io(data_dir, e))?;
        let secrets_key = SecretsKey::load_or_create(data_dir)?;
        let path = data_dir.join("catalog.db");
        let mut connection = Connection::open(&path)?;
        connection.pragma_update(None, "journal_mode", "WAL")?;
        connection.pragma_update(None, "synchronous", "FULL")?;
        connection.pragma_update(None, "foreign_keys", "ON")?;
        migrate(&mut connection)?;

        let stored: Option<String> = connection
            .query_row(
                "SELECT value FROM settings WHERE name = 'environment_id'",
                [],
                |row| row.get(0),
            )
            .optional()?;
        let environment_id = match (stored, environment_id) {
            (Some(stored), Some(requested)) if stored != requested => {
                return Err(CatalogError::Conflict(format!(
                    "the data directory's external id prefix is {stored}; it cannot be changed to {requested} (AWS trust policies name it)"
                )));
            }
            (Some(stored), _) => stored,
            (None, requested) => {
                let id = requested
                    .map(str::to_string)
                    .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
                let transaction = connection.transaction()?;
                transaction.execute(
                    "INSERT INTO settings (name, value) VALUES ('environment_id', ?1)",
                    params![id],
                )?;
                // The default cluster, as in Materialize.
                let cluster_id = allocate(&transaction, "cluster")?;
                let replica_id = allocate(&transaction, "replica")?;
                transaction.execute(
                    "INSERT INTO clusters VALUES (?1, ?2, 1, '25cc', 1)",
                    params![ClusterId::User(cluster_id).to_string(), DEFAULT_CLUSTER],
                )?;
                // PUBLIC may use the default cluster (migration 7 grants the rest).
                transaction.execute(
                    "INSERT INTO object_privileges VALUES (?1, 'p', 'u1', 'U')",
                    params![format!("cluster:{}", ClusterId::User(cluster_id))],
                )?;
                transaction.execute(
                    "INSERT INTO cluster_replicas VALUES (?1, ?2, 'r1', '25cc')",
                    params![
                        ReplicaId::User(replica_id).to_string(),
                        ClusterId::User(cluster_id).to_string()
                    ],
                )?;
                transaction.commit()?;
                id
            }
        };
        let state = load_state(&connection)?;
        Ok(Catalog {
            connection,
            state,
            secrets_key,
            environment_id,
            tombstones: Default::default(),
            revision: 0,
        })
    }

    pub fn state(&self) -> &CatalogState {
        &self.state
    }

    pub fn state_mut(&mut self) -> &mut CatalogState {
        self.revision += 1;
        &mut self.state
    }

    /// Changes with every change of the state (see the field).
    pub fn revision(&self) -> u64 {
        self.revision
    }

    pub fn environment_id(&self) -> &str {
        &self.environment_id
    }

    /// The build of floe that last brought the stored shapes of plain views up to
    /// date with its planning (`None` before any did: a catalog of floe
    /// 0.1.0, or one never opened by a floe that records it).
    pub fn views_planned_by(&self) -> Result<Option<String>, CatalogError> {
        Ok(self
            .connection
            .query_row(
                "SELECT value FROM settings WHERE name = ?1",
                [VIEWS_PLANNED_BY],
                |row| row.get(0),
            )
            .optional()?)
    }

    /// Records that the stored shapes of plain views are what `build` plans.
    pub fn set_views_planned_by(&mut self, build: &str) -> Result<(), CatalogError> {
        self.connection.execute(
            "INSERT INTO settings (name, value) VALUES (?1, ?2)
             ON CONFLICT (name) DO UPDATE SET value = excluded.value",
            params![VIEWS_PLANNED_BY, build],
        )?;
        Ok(())
    }

    /// The decrypted value of a secret slot.
    pub fn secret(&self, id: GlobalId, slot: &str) -> Result<String, CatalogError> {
        let (nonce, ciphertext): (Vec<u8>, Vec<u8>) = self
            .connection
            .query_row(
                "SELECT nonce, ciphertext FROM secrets WHERE owner_id = ?1 AND slot = ?2",
                params![id.to_string(), slot],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()?
            .ok_or_else(|| CatalogError::Corrupt(format!("secret {id}.{slot} is missing")))?;
        self.secrets_key
            .decrypt(&format!("{id}.{slot}"), &nonce, &ciphertext)
    }
}

fn migrate(connection: &mut Connection) -> Result<(), CatalogError> {
    let version: usize = connection.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    if version > MIGRATIONS.len() {
        return Err(CatalogError::Corrupt(format!(
            "the catalog is at schema version {version}, newer than this floe ({}); use a newer floe",
            MIGRATIONS.len()
        )));
    }
    for (index, migration) in MIGRATIONS.iter().enumerate().skip(version) {
        let transaction = connection.transaction_with_behavior(TransactionBehavior::Exclusive)?;
        transaction.execute_batch(migration)?;
        transaction.pragma_update(None, "user_version", index + 1)?;
        transaction.commit()?;
    }
    Ok(())
}

fn allocate(transaction: &rusqlite::Transaction<'_>, name: &str) -> Result<u64, CatalogError> {
    let next: i64 = transaction.query_row(
        "UPDATE id_allocators SET next_id = next_id + 1 WHERE name = ?1 RETURNING next_id - 1",
        params![name],
        |row| row.get(0),
    )?;
    u64::try_from(next)
        .map_err(|_| CatalogError::Corrupt(format!("id allocator {name} is negative")))
}

fn write_secret(
    transaction: &rusqlite::Transaction<'_>,
    key: &SecretsKey,
    id: GlobalId,
    slot: &str,
    value: &str,
) -> Result<(), CatalogError> {
    let (nonce, ciphertext) = key.encrypt(&format!("{id}.{slot}"), value)?;
    transaction.execute(
        "INSERT INTO secrets (owner_id, slot, nonce, ciphertext) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (owner_id, slot) DO UPDATE SET nonce = excluded.nonce, ciphertext = excluded.ciphertext",
        params![id.to_string(), slot, nonce, ciphertext],
    )?;
    Ok(())
}

fn load_state(connection: &Connection) -> Result<CatalogState, CatalogError> {
    let mut state = CatalogState::default();
    for_each_row(connection, "SELECT id, oid, database_name, schema_name, name, definition_format, definition, create_sql
         FROM items", |row: (String, u32, String, String, String, u32, String, String)| {
        let (id, oid, database, schema, item, format, definition, create_sql) = row;
        let id: GlobalId = stored_id(&id, "item id")?;
        let definition = durable::decode_definition(&id, format, &definition)?;
        state.insert_item(CatalogItem {
            id,
            oid,
            name: QualifiedName {
                database,
                schema,
                item,
            },
            definition,
            create_sql,
        });
        Ok(())
    })?;
    load_schemas_and_comments(connection, &mut state)?;
    for_each_row(
        connection,
        "SELECT id, name, managed, size, replication_factor FROM clusters",
        |row: (String, String, bool, Option<String>, Option<u32>)| {
            let (id, name, managed, size, replication_factor) = row;
            let id: ClusterId = stored_id(&id, "cluster id")?;
            state.clusters.insert(
                id,
                Cluster {
                    id,
                    name,
                    managed,
                    size,
                    replication_factor,
                    replicas: Vec::new(),
                },
            );
            Ok(())
        },
    )?;
    for_each_row(
        connection,
        "SELECT id, cluster_id, name, size FROM cluster_replicas ORDER BY name",
        |row: (String, String, String, String)| {
            let (id, cluster_id, name, size) = row;
            let id: ReplicaId = stored_id(&id, "replica id")?;
            let cluster_id: ClusterId = stored_id(&cluster_id, "cluster id")?;
            let cluster = state.clusters.get_mut(&cluster_id).ok_or_else(|| {
                CatalogError::Corrupt(format!("replica {id} of unknown cluster {cluster_id}"))
            })?;
            cluster.replicas.push(Replica { id, name, size });
            Ok(())
        },
    )?;
    transact::load_roles(connection, &mut state)?;
    Ok(state)
}

fn load_schemas_and_comments(
    connection: &Connection,
    state: &mut CatalogState,
) -> Result<(), CatalogError> {
    let mut statement = connection.prepare("SELECT id, oid, name FROM schemas")?;
    let rows = statement.query_map([], |row| {
        Ok(Schema {
            id: row.get(0)?,
            oid: row.get(1)?,
            name: row.get(2)?,
        })
    })?;
    for schema in rows {
        let schema = schema?;
        state.schemas.insert(schema.name.clone(), schema);
    }
    for_each_row(
        connection,
        "SELECT object_id, column_position, comment FROM comments",
        |row: (String, usize, String)| {
            let (id, position, comment) = row;
            let id: GlobalId = stored_id(&id, "commented object id")?;
            state
                .comments
                .insert((id, (position > 0).then_some(position)), comment);
            Ok(())
        },
    )?;
    Ok(())
}

/// Calls `each` with every row `sql` selects, read as the tuple `T` of its columns: the
/// catalog loads each of its tables so. Stops at the first error, a row's or `each`'s.
pub(crate) fn for_each_row<T>(
    connection: &Connection,
    sql: &str,
    mut each: impl FnMut(T) -> Result<(), CatalogError>,
) -> Result<(), CatalogError>
where
    T: for<'row> TryFrom<&'row rusqlite::Row<'row>, Error = rusqlite::Error>,
{
    let mut statement = connection.prepare(sql)?;
    for row in statement.query_map([], |row| T::try_from(row))? {
        each(row?)?;
    }
    Ok(())
}

/// An id as stored; `what` names it in the error.
pub(crate) fn stored_id<T>(text: &str, what: &str) -> Result<T, CatalogError>
where
    T: std::str::FromStr<Err = floe_repr::id::InvalidId>,
{
    text.parse()
        .map_err(|e| CatalogError::Corrupt(format!("{what}: {e}")))
}

#[cfg(test)]
mod tests;
