//! The durable catalog: every object a user creates, in SQLite.
//!
//! - Schema migrations are keyed on `PRAGMA user_version`.
//! - Every DDL is one SQLite transaction (WAL, `synchronous = FULL`): after
//!   `commit` returns it survives `kill -9`; before, nothing of it is visible.
//! - The in-memory [`CatalogState`] mirrors the tables and is only changed
//!   after the transaction committed.
//! - Secret values are encrypted ([`secrets`]); definitions never hold them.

pub mod secrets;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use floe_repr::{ClusterId, GlobalId, ReplicaId};
use floe_sql::catalog::{
    CatalogItem, Cluster, DEFAULT_CLUSTER, ItemDefinition, PlanCatalog, QualifiedName, Replica,
    SYSTEM_SCHEMAS,
};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

pub use secrets::SecretsKey;

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
    #[error("catalog is corrupt: {0}")]
    Corrupt(String),
    #[error("{0}")]
    Conflict(String),
}

impl CatalogError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> CatalogError {
        CatalogError::Io {
            path: path.to_path_buf(),
            source,
        }
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
];

/// What a sink reported, kept across restarts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SinkProgress {
    /// Everything before this time (ms) is delivered.
    pub frontier: u64,
    pub table_uuid: Option<String>,
    pub metadata_location: Option<String>,
    pub messages_staged: u64,
    pub messages_committed: u64,
    pub bytes_staged: u64,
    pub bytes_committed: u64,
}

/// One entry of `mz_sink_status_history`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkStatusEvent {
    /// Milliseconds since the Unix epoch.
    pub occurred_at: u64,
    pub sink_id: GlobalId,
    pub status: String,
    pub error: Option<String>,
    /// A JSON document, or `None`.
    pub details: Option<String>,
    pub replica_id: Option<ReplicaId>,
}

/// The in-memory mirror of the catalog, which planning reads.
#[derive(Debug, Clone, Default)]
pub struct CatalogState {
    items: BTreeMap<GlobalId, CatalogItem>,
    by_name: BTreeMap<QualifiedName, GlobalId>,
    clusters: BTreeMap<ClusterId, Cluster>,
    /// `(schema, name)` of every builtin relation, for name resolution.
    system_relations: Vec<(String, String)>,
}

impl CatalogState {
    pub fn items(&self) -> impl Iterator<Item = &CatalogItem> {
        self.items.values()
    }

    pub fn clusters(&self) -> impl Iterator<Item = &Cluster> {
        self.clusters.values()
    }

    /// Registers the builtin relations the query engine serves.
    pub fn set_system_relations(&mut self, relations: Vec<(String, String)>) {
        self.system_relations = relations;
    }

    fn insert_item(&mut self, item: CatalogItem) {
        self.by_name.insert(item.name.clone(), item.id);
        self.items.insert(item.id, item);
    }
}

impl PlanCatalog for CatalogState {
    fn item_by_name(&self, name: &QualifiedName) -> Option<&CatalogItem> {
        self.by_name.get(name).and_then(|id| self.items.get(id))
    }

    fn item(&self, id: GlobalId) -> Option<&CatalogItem> {
        self.items.get(&id)
    }

    fn dependents(&self, id: GlobalId) -> Vec<GlobalId> {
        self.items
            .values()
            .filter(|item| item.definition.uses().contains(&id))
            .map(|item| item.id)
            .collect()
    }

    fn cluster_by_name(&self, name: &str) -> Option<&Cluster> {
        self.clusters.values().find(|c| c.name == name)
    }

    fn cluster(&self, id: ClusterId) -> Option<&Cluster> {
        self.clusters.get(&id)
    }

    fn items_in_cluster(&self, id: ClusterId) -> Vec<GlobalId> {
        self.items
            .values()
            .filter(|item| match &item.definition {
                ItemDefinition::Sink(sink) => sink.cluster == id,
                ItemDefinition::Source(source) => source.cluster == id,
                _ => false,
            })
            .map(|item| item.id)
            .collect()
    }

    fn is_system_relation(&self, schema: &str, name: &str) -> bool {
        SYSTEM_SCHEMAS.contains(&schema)
            && self
                .system_relations
                .iter()
                .any(|(s, n)| s == schema && n == name)
    }
}

/// The durable catalog.
pub struct Catalog {
    connection: Connection,
    state: CatalogState,
    secrets_key: SecretsKey,
    /// A UUID fixed for the life of the data directory: the middle of every
    /// AWS external id, and the owner mark on Iceberg tables floe creates.
    environment_id: String,
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog")
            .field("environment_id", &self.environment_id)
            .finish_non_exhaustive()
    }
}

/// What a new cluster replica is.
pub struct NewReplica {
    pub name: String,
    pub size: String,
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
        })
    }

    pub fn state(&self) -> &CatalogState {
        &self.state
    }

    pub fn state_mut(&mut self) -> &mut CatalogState {
        &mut self.state
    }

    pub fn environment_id(&self) -> &str {
        &self.environment_id
    }

    /// Creates an item with its secret values (`(slot, value)`), in one
    /// transaction. Returns its id.
    pub fn create_item(
        &mut self,
        name: QualifiedName,
        definition: ItemDefinition,
        create_sql: String,
        secrets: &[(String, String)],
    ) -> Result<GlobalId, CatalogError> {
        let transaction = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let id = GlobalId::User(allocate(&transaction, "item")?);
        let oid = u32::try_from(allocate(&transaction, "oid")?)
            .map_err(|_| CatalogError::Corrupt("object ids exhausted".into()))?
            .max(FIRST_USER_OID);
        let definition_json =
            serde_json::to_string(&definition).map_err(|e| CatalogError::Corrupt(e.to_string()))?;
        let inserted = transaction.execute(
            "INSERT INTO items (id, oid, database_name, schema_name, name, definition, create_sql)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                id.to_string(),
                oid,
                name.database,
                name.schema,
                name.item,
                definition_json,
                create_sql
            ],
        );
        if let Err(rusqlite::Error::SqliteFailure(e, _)) = &inserted
            && e.code == rusqlite::ErrorCode::ConstraintViolation
        {
            return Err(CatalogError::Conflict(format!(
                "catalog item \"{name}\" already exists"
            )));
        }
        inserted?;
        for (slot, value) in secrets {
            write_secret(&transaction, &self.secrets_key, id, slot, value)?;
        }
        transaction.commit()?;
        self.state.insert_item(CatalogItem {
            id,
            oid,
            name,
            definition,
            create_sql,
        });
        Ok(id)
    }

    /// Creates a source and its subsources in one transaction; each
    /// subsource's definition is made from the source's new id.
    pub fn create_source(
        &mut self,
        name: QualifiedName,
        definition: ItemDefinition,
        create_sql: String,
        subsources: Vec<(QualifiedName, String)>,
        subsource_definition: impl Fn(GlobalId, usize) -> ItemDefinition,
    ) -> Result<(GlobalId, Vec<GlobalId>), CatalogError> {
        let transaction = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut created = Vec::new();
        let insert = |name: QualifiedName,
                      definition: ItemDefinition,
                      create_sql: String|
         -> Result<CatalogItem, CatalogError> {
            let id = GlobalId::User(allocate(&transaction, "item")?);
            let oid = u32::try_from(allocate(&transaction, "oid")?)
                .map_err(|_| CatalogError::Corrupt("object ids exhausted".into()))?;
            let definition_json = serde_json::to_string(&definition)
                .map_err(|e| CatalogError::Corrupt(e.to_string()))?;
            let inserted = transaction.execute(
                "INSERT INTO items (id, oid, database_name, schema_name, name, definition, create_sql)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![id.to_string(), oid, name.database, name.schema, name.item, definition_json, create_sql],
            );
            if let Err(rusqlite::Error::SqliteFailure(e, _)) = &inserted
                && e.code == rusqlite::ErrorCode::ConstraintViolation
            {
                return Err(CatalogError::Conflict(format!(
                    "catalog item \"{name}\" already exists"
                )));
            }
            inserted?;
            Ok(CatalogItem {
                id,
                oid,
                name,
                definition,
                create_sql,
            })
        };
        let parent = insert(name, definition, create_sql)?;
        let parent_id = parent.id;
        created.push(parent);
        for (index, (subsource_name, subsource_sql)) in subsources.into_iter().enumerate() {
            created.push(insert(
                subsource_name,
                subsource_definition(parent_id, index),
                subsource_sql,
            )?);
        }
        transaction.commit()?;
        let ids: Vec<GlobalId> = created.iter().skip(1).map(|i| i.id).collect();
        for item in created {
            self.state.insert_item(item);
        }
        Ok((parent_id, ids))
    }

    /// Replaces an item's definition and statement (ALTER SINK).
    pub fn update_item(
        &mut self,
        id: GlobalId,
        definition: ItemDefinition,
        create_sql: String,
    ) -> Result<(), CatalogError> {
        let definition_json =
            serde_json::to_string(&definition).map_err(|e| CatalogError::Corrupt(e.to_string()))?;
        let transaction = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let updated = transaction.execute(
            "UPDATE items SET definition = ?2, create_sql = ?3 WHERE id = ?1",
            params![id.to_string(), definition_json, create_sql],
        )?;
        if updated != 1 {
            return Err(CatalogError::Conflict(format!("unknown catalog item {id}")));
        }
        transaction.commit()?;
        if let Some(item) = self.state.items.get_mut(&id) {
            item.definition = definition;
            item.create_sql = create_sql;
        }
        Ok(())
    }

    /// Sets a secret's value (ALTER SECRET).
    pub fn set_secret(
        &mut self,
        id: GlobalId,
        slot: &str,
        value: &str,
    ) -> Result<(), CatalogError> {
        let transaction = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        write_secret(&transaction, &self.secrets_key, id, slot, value)?;
        transaction.commit()?;
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

    /// Drops items, replicas and clusters, in one transaction.
    pub fn drop_objects(
        &mut self,
        items: &[GlobalId],
        replicas: &[(ClusterId, ReplicaId)],
        clusters: &[ClusterId],
    ) -> Result<(), CatalogError> {
        let transaction = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        for id in items {
            transaction.execute("DELETE FROM items WHERE id = ?1", params![id.to_string()])?;
            transaction.execute(
                "DELETE FROM sink_progress WHERE sink_id = ?1",
                params![id.to_string()],
            )?;
            transaction.execute(
                "DELETE FROM secrets WHERE owner_id = ?1",
                params![id.to_string()],
            )?;
        }
        for (_, replica) in replicas {
            transaction.execute(
                "DELETE FROM cluster_replicas WHERE id = ?1",
                params![replica.to_string()],
            )?;
        }
        for cluster in clusters {
            transaction.execute(
                "DELETE FROM cluster_replicas WHERE cluster_id = ?1",
                params![cluster.to_string()],
            )?;
            transaction.execute(
                "DELETE FROM clusters WHERE id = ?1",
                params![cluster.to_string()],
            )?;
        }
        transaction.commit()?;
        for id in items {
            if let Some(item) = self.state.items.remove(id) {
                self.state.by_name.remove(&item.name);
            }
        }
        for (cluster, replica) in replicas {
            if let Some(cluster) = self.state.clusters.get_mut(cluster) {
                cluster.replicas.retain(|r| r.id != *replica);
            }
        }
        for cluster in clusters {
            self.state.clusters.remove(cluster);
        }
        Ok(())
    }

    /// Creates a cluster: managed with `(size, replication factor)`, or
    /// unmanaged with its replicas.
    pub fn create_cluster(
        &mut self,
        name: &str,
        managed: Option<(String, u32)>,
        replicas: Vec<NewReplica>,
    ) -> Result<ClusterId, CatalogError> {
        let transaction = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let id = ClusterId::User(allocate(&transaction, "cluster")?);
        let replicas = match &managed {
            Some((size, factor)) => managed_replicas(size, *factor),
            None => replicas,
        };
        transaction.execute(
            "INSERT INTO clusters VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                id.to_string(),
                name,
                managed.is_some(),
                managed.as_ref().map(|(s, _)| s.clone()),
                managed.as_ref().map(|(_, f)| *f)
            ],
        )?;
        let mut created = Vec::new();
        for replica in replicas {
            let replica_id = ReplicaId::User(allocate(&transaction, "replica")?);
            transaction.execute(
                "INSERT INTO cluster_replicas VALUES (?1, ?2, ?3, ?4)",
                params![
                    replica_id.to_string(),
                    id.to_string(),
                    replica.name,
                    replica.size
                ],
            )?;
            created.push(Replica {
                id: replica_id,
                name: replica.name,
                size: replica.size,
            });
        }
        transaction.commit()?;
        self.state.clusters.insert(
            id,
            Cluster {
                id,
                name: name.to_string(),
                managed: managed.is_some(),
                size: managed.as_ref().map(|(s, _)| s.clone()),
                replication_factor: managed.as_ref().map(|(_, f)| *f),
                replicas: created,
            },
        );
        Ok(id)
    }

    /// Changes a managed cluster's size or replication factor; its replicas
    /// become `r1..rN` of the new size (replicas whose name and size stay the
    /// same are kept).
    pub fn alter_cluster(
        &mut self,
        id: ClusterId,
        size: &str,
        replication_factor: u32,
    ) -> Result<(), CatalogError> {
        let Some(cluster) = self.state.clusters.get(&id).cloned() else {
            return Err(CatalogError::Conflict(format!("unknown cluster {id}")));
        };
        let wanted = managed_replicas(size, replication_factor);
        let transaction = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        transaction.execute(
            "UPDATE clusters SET size = ?2, replication_factor = ?3 WHERE id = ?1",
            params![id.to_string(), size, replication_factor],
        )?;
        let mut replicas = Vec::new();
        for existing in &cluster.replicas {
            if wanted
                .iter()
                .any(|w| w.name == existing.name && w.size == existing.size)
            {
                replicas.push(existing.clone());
            } else {
                transaction.execute(
                    "DELETE FROM cluster_replicas WHERE id = ?1",
                    params![existing.id.to_string()],
                )?;
            }
        }
        for replica in wanted {
            if replicas.iter().any(|r| r.name == replica.name) {
                continue;
            }
            let replica_id = ReplicaId::User(allocate(&transaction, "replica")?);
            transaction.execute(
                "INSERT INTO cluster_replicas VALUES (?1, ?2, ?3, ?4)",
                params![
                    replica_id.to_string(),
                    id.to_string(),
                    replica.name,
                    replica.size
                ],
            )?;
            replicas.push(Replica {
                id: replica_id,
                name: replica.name,
                size: replica.size,
            });
        }
        transaction.commit()?;
        replicas.sort_by(|a, b| a.name.cmp(&b.name));
        let cluster = self
            .state
            .clusters
            .get_mut(&id)
            .ok_or_else(|| CatalogError::Conflict(format!("unknown cluster {id}")))?;
        cluster.size = Some(size.to_string());
        cluster.replication_factor = Some(replication_factor);
        cluster.replicas = replicas;
        Ok(())
    }

    /// Adds a replica to an unmanaged cluster.
    pub fn create_replica(
        &mut self,
        cluster: ClusterId,
        name: &str,
        size: &str,
    ) -> Result<ReplicaId, CatalogError> {
        let transaction = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let id = ReplicaId::User(allocate(&transaction, "replica")?);
        transaction.execute(
            "INSERT INTO cluster_replicas VALUES (?1, ?2, ?3, ?4)",
            params![id.to_string(), cluster.to_string(), name, size],
        )?;
        transaction.commit()?;
        if let Some(c) = self.state.clusters.get_mut(&cluster) {
            c.replicas.push(Replica {
                id,
                name: name.to_string(),
                size: size.to_string(),
            });
            c.replicas.sort_by(|a, b| a.name.cmp(&b.name));
        }
        Ok(id)
    }
}

/// Status changes kept per sink in `mz_sink_status_history`: a sink that flaps for months
/// must not make the history (and every read of `mz_sink_statuses`) grow without end.
pub const SINK_STATUS_HISTORY_PER_SINK: usize = 1_000;

impl Catalog {
    /// Appends a sink status change, and forgets the sink's changes beyond the newest
    /// [`SINK_STATUS_HISTORY_PER_SINK`] in the same transaction.
    pub fn record_sink_status(&mut self, event: &SinkStatusEvent) -> Result<(), CatalogError> {
        let transaction = self.connection.transaction()?;
        let sink_id = event.sink_id.to_string();
        transaction.execute(
            "INSERT INTO sink_status_history (occurred_at, sink_id, status, error, details, replica_id)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                i64::try_from(event.occurred_at).unwrap_or(i64::MAX),
                sink_id,
                event.status,
                event.error,
                event.details,
                event.replica_id.map(|r| r.to_string())
            ],
        )?;
        transaction.execute(
            "DELETE FROM sink_status_history WHERE sink_id = ?1 AND sequence <= (
                 SELECT sequence FROM sink_status_history WHERE sink_id = ?1
                 ORDER BY sequence DESC LIMIT 1 OFFSET ?2)",
            params![sink_id, SINK_STATUS_HISTORY_PER_SINK as i64],
        )?;
        transaction.commit()?;
        Ok(())
    }

    /// Stores a sink's progress and statistics.
    pub fn set_sink_progress(
        &mut self,
        sink: GlobalId,
        progress: &SinkProgress,
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
    pub fn sink_progress(&self) -> Result<BTreeMap<GlobalId, SinkProgress>, CatalogError> {
        let mut statement = self.connection.prepare_cached(
            "SELECT sink_id, frontier, table_uuid, metadata_location, messages_staged,
                    messages_committed, bytes_staged, bytes_committed FROM sink_progress",
        )?;
        let rows = statement.query_map([], |row| {
            let as_u64 = |v: i64| u64::try_from(v).unwrap_or(0);
            Ok((
                row.get::<_, String>(0)?,
                SinkProgress {
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

    /// Appends a sink status change unless the sink's latest status already
    /// has this status and error. Reads only that latest entry (indexed), so
    /// the cost does not grow with the history. Returns whether it recorded.
    pub fn record_sink_status_if_changed(
        &mut self,
        event: &SinkStatusEvent,
    ) -> Result<bool, CatalogError> {
        let latest: Option<(String, Option<String>)> = self
            .connection
            .query_row(
                "SELECT status, error FROM sink_status_history WHERE sink_id = ?1
                 ORDER BY sequence DESC LIMIT 1",
                params![event.sink_id.to_string()],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()?;
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
                sink_id: sink_id
                    .parse()
                    .map_err(|e| CatalogError::Corrupt(format!("sink status: {e}")))?,
                status,
                error,
                details,
                replica_id: replica_id.and_then(|r| r.parse().ok()),
            });
        }
        Ok(events)
    }
}

fn managed_replicas(size: &str, factor: u32) -> Vec<NewReplica> {
    (1..=factor)
        .map(|n| NewReplica {
            name: format!("r{n}"),
            size: size.to_string(),
        })
        .collect()
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
    let mut statement = connection.prepare(
        "SELECT id, oid, database_name, schema_name, name, definition, create_sql FROM items",
    )?;
    let rows = statement.query_map([], |row| {
        Ok((
            row.get::<_, String>(0)?,
            row.get::<_, u32>(1)?,
            row.get::<_, String>(2)?,
            row.get::<_, String>(3)?,
            row.get::<_, String>(4)?,
            row.get::<_, String>(5)?,
            row.get::<_, String>(6)?,
        ))
    })?;
    for row in rows {
        let (id, oid, database, schema, item, definition, create_sql) = row?;
        let id: GlobalId = id
            .parse()
            .map_err(|e| CatalogError::Corrupt(format!("item id: {e}")))?;
        let definition: ItemDefinition = serde_json::from_str(&definition)
            .map_err(|e| CatalogError::Corrupt(format!("definition of {id}: {e}")))?;
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
    }
    let mut statement =
        connection.prepare("SELECT id, name, managed, size, replication_factor FROM clusters")?;
    let rows = statement.query_map([], |row| {
        Ok((
            row.get::<_, String>(0)?,
            row.get::<_, String>(1)?,
            row.get::<_, bool>(2)?,
            row.get::<_, Option<String>>(3)?,
            row.get::<_, Option<u32>>(4)?,
        ))
    })?;
    for row in rows {
        let (id, name, managed, size, replication_factor) = row?;
        let id: ClusterId = id
            .parse()
            .map_err(|e| CatalogError::Corrupt(format!("cluster id: {e}")))?;
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
    }
    let mut statement = connection
        .prepare("SELECT id, cluster_id, name, size FROM cluster_replicas ORDER BY name")?;
    let rows = statement.query_map([], |row| {
        Ok((
            row.get::<_, String>(0)?,
            row.get::<_, String>(1)?,
            row.get::<_, String>(2)?,
            row.get::<_, String>(3)?,
        ))
    })?;
    for row in rows {
        let (id, cluster_id, name, size) = row?;
        let id: ReplicaId = id
            .parse()
            .map_err(|e| CatalogError::Corrupt(format!("replica id: {e}")))?;
        let cluster_id: ClusterId = cluster_id
            .parse()
            .map_err(|e| CatalogError::Corrupt(format!("cluster id: {e}")))?;
        let cluster = state.clusters.get_mut(&cluster_id).ok_or_else(|| {
            CatalogError::Corrupt(format!("replica {id} of unknown cluster {cluster_id}"))
        })?;
        cluster.replicas.push(Replica { id, name, size });
    }
    Ok(state)
}

#[cfg(test)]
mod tests;
