//! Tables, sources and the durable, timestamped change log sinks read from.
//!
//! Every collection (a table or a source) is a log of `(row, ts, diff)`
//! updates in SQLite (`storage.db`, WAL, `synchronous = FULL`), plus:
//! - an **upper** (write frontier): every update with `ts < upper` is durable
//!   and final. A write gets `ts = max(wall clock, upper)` and moves the upper
//!   to `ts + 1` in the same transaction, so no write can land in an interval
//!   a sink may already have committed. A ticker advances every upper to the
//!   wall clock, durably, at least once a second.
//! - a **since** (compaction frontier): history before it is consolidated
//!   into rows stored at `since - 1`. Readers (sinks) place read holds; the
//!   since never passes the oldest hold.
//! - the current **contents**, consolidated in memory for queries and key
//!   checks, rebuilt from the log at start-up.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use floe_repr::codec::{decode_row, encode_row};
use floe_repr::{GlobalId, RelationDesc, Row, Timestamp};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

pub mod generator;

/// Why a storage operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("storage error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("storage directory {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("unknown collection {0}")]
    UnknownCollection(GlobalId),
    #[error("change log of {collection} is corrupt: {message}")]
    Corrupt {
        collection: GlobalId,
        message: String,
    },
    /// A read below the compaction frontier.
    #[error(
        "input compacted past resume upper: {collection} is compacted to {since}, the read starts at {lower}"
    )]
    Compacted {
        collection: GlobalId,
        since: u64,
        lower: u64,
    },
    /// A read beyond what is durable.
    #[error("read of {collection} up to {upper} is beyond its write frontier {frontier}")]
    BeyondUpper {
        collection: GlobalId,
        upper: u64,
        frontier: u64,
    },
    /// The blocking thread running a storage call panicked or was cancelled.
    #[error("storage call failed on its thread: {0}")]
    Thread(String),
    /// A timed append that does not continue the log (another writer moved it).
    #[error("append to {collection} at [{lower}, {upper}) does not continue its log at {frontier}")]
    UpperMismatch {
        collection: GlobalId,
        lower: u64,
        upper: u64,
        frontier: u64,
    },
}

/// Why an append was refused; nothing of it was written.
#[derive(Debug, Clone, PartialEq)]
pub enum AppendError {
    /// Two rows would share the primary key; `key` holds its values.
    UniqueViolation { key: Row },
    /// A retraction of a row that is not there (a lost concurrent update).
    RetractionOfAbsentRow,
}

/// One update of the log.
#[derive(Debug, Clone, PartialEq)]
pub struct LogUpdate {
    pub row: Row,
    pub ts: Timestamp,
    pub diff: i64,
}

/// Size and frontiers of one collection's log, for `mz_internal` views.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectionUsage {
    pub id: GlobalId,
    pub updates: u64,
    pub bytes: u64,
    pub since: Timestamp,
    pub upper: Timestamp,
    /// Read holds: holder id and the frontier it holds back.
    pub holds: Vec<(String, Timestamp)>,
    /// Updates and bytes appended since the server started (compaction does not
    /// lower them): the ingest counters of `/metrics`.
    pub appended_updates: u64,
    pub appended_bytes: u64,
}

/// The consolidated current contents of a collection.
#[derive(Debug, Default)]
struct Contents {
    /// Encoded row -> (row, multiplicity). Shared pointers, so a snapshot can take the
    /// whole contents under the lock without copying a row.
    rows: HashMap<Arc<[u8]>, (Arc<Row>, i64)>,
    /// The primary key's columns, if the collection has one.
    key: Option<Vec<usize>>,
    /// Encoded key -> how many rows carry it (at most 1 when consistent).
    key_counts: HashMap<Vec<u8>, i64>,
    /// Bumped on every change, so callers can cache derived forms.
    version: u64,
}

/// The key columns of a row, encoded.
fn encode_key(row: &Row, key: &[usize]) -> Vec<u8> {
    let key_row: Row = key
        .iter()
        .map(|i| row.get(*i).cloned().unwrap_or(floe_repr::Datum::Null))
        .collect();
    encode(&key_row)
}

impl Contents {
    fn apply(&mut self, encoded: Vec<u8>, row: &Row, diff: i64) {
        if let Some(key) = &self.key {
            let key_bytes = encode_key(row, key);
            let count = self.key_counts.entry(key_bytes.clone()).or_insert(0);
            *count += diff;
            if *count == 0 {
                self.key_counts.remove(&key_bytes);
            }
        }
        match self.rows.get_mut(encoded.as_slice()) {
            Some(entry) => {
                entry.1 += diff;
                // Consolidated-away rows leave, so memory follows the contents.
                if entry.1 == 0 {
                    self.rows.remove(encoded.as_slice());
                }
            }
            None => {
                if diff != 0 {
                    self.rows
                        .insert(Arc::from(encoded), (Arc::new(row.clone()), diff));
                }
            }
        }
    }
}

/// Consolidates a batch: an insert and a delete of the same row cancel.
fn consolidate(updates: Vec<(Row, i64)>) -> Vec<(Vec<u8>, Row, i64)> {
    let mut consolidated: HashMap<Vec<u8>, (Row, i64)> = HashMap::new();
    for (row, diff) in updates {
        let bytes = encode(&row);
        consolidated.entry(bytes).or_insert((row, 0)).1 += diff;
    }
    consolidated
        .into_iter()
        .filter(|(_, (_, diff))| *diff != 0)
        .map(|(bytes, (row, diff))| (bytes, row, diff))
        .collect()
}

/// Refuses changes that would break the primary key or retract rows that
/// are not there.
fn check_changes(contents: &Contents, changes: &[(Vec<u8>, Row, i64)]) -> Result<(), AppendError> {
    if let Some(key) = &contents.key {
        let mut deltas: HashMap<Vec<u8>, (i64, &Row)> = HashMap::new();
        for (_, row, diff) in changes {
            deltas.entry(encode_key(row, key)).or_insert((0, row)).0 += diff;
        }
        for (key_bytes, (delta, row)) in deltas {
            let existing = contents.key_counts.get(&key_bytes).copied().unwrap_or(0);
            if existing + delta > 1 {
                let key_values = key
                    .iter()
                    .map(|i| row.get(*i).cloned().unwrap_or(floe_repr::Datum::Null))
                    .collect();
                return Err(AppendError::UniqueViolation { key: key_values });
            }
        }
    }
    for (encoded, _, diff) in changes {
        if *diff < 0 && contents.rows.get(encoded.as_slice()).map_or(0, |(_, c)| *c) + diff < 0 {
            return Err(AppendError::RetractionOfAbsentRow);
        }
    }
    Ok(())
}

fn encode(row: &Row) -> Vec<u8> {
    let mut bytes = Vec::new();
    encode_row(row, &mut bytes);
    bytes
}

/// `row` with NULLs appended up to `width` columns (a row written before
/// `ALTER TABLE ... ADD COLUMN`).
fn padded(row: &Row, width: usize) -> Row {
    let mut row = row.clone();
    if row.len() < width {
        row.resize(width, floe_repr::Datum::Null);
    }
    row
}

/// Rewrites the rows of a collection's log that are narrower than `width`
/// with NULLs in the missing columns; returns how many it rewrote.
fn pad_logged_rows(
    transaction: &rusqlite::Transaction<'_>,
    id: GlobalId,
    width: usize,
) -> Result<usize, StorageError> {
    let mut narrow = Vec::new();
    {
        let mut statement =
            transaction.prepare("SELECT rowid, row FROM updates WHERE collection_id = ?1")?;
        let mut rows = statement.query(params![id.to_string()])?;
        while let Some(record) = rows.next()? {
            let rowid: i64 = record.get(0)?;
            let bytes: Vec<u8> = record.get(1)?;
            let row = decode_row(&bytes).map_err(|e| StorageError::Corrupt {
                collection: id,
                message: e.to_string(),
            })?;
            if row.len() < width {
                narrow.push((rowid, encode(&padded(&row, width))));
            }
        }
    }
    let mut update = transaction.prepare("UPDATE updates SET row = ?2 WHERE rowid = ?1")?;
    for (rowid, bytes) in &narrow {
        update.execute(params![rowid, bytes])?;
    }
    Ok(narrow.len())
}

/// A collection's state.
#[derive(Debug)]
struct Collection {
    desc: RelationDesc,
    upper: u64,
    since: u64,
    contents: Contents,
    /// Updates and bytes in the log, for usage reporting and the
    /// compaction heuristic.
    log_updates: u64,
    log_bytes: u64,
    /// Updates at the last compaction: compacting again once the log has
    /// doubled keeps compaction's cost amortized O(1) per update.
    updates_after_compaction: u64,
    holds: BTreeMap<String, u64>,
    /// Appended since the server started.
    appended_updates: u64,
    appended_bytes: u64,
}

/// Updates rewritten per write transaction when compacting: each slice holds the writer
/// lock for milliseconds, so appends, read holds and the ticker go on between slices.
const COMPACTION_SLICE: usize = 4_096;

/// One distinct row's updates in the history being compacted.
#[derive(Default)]
struct HistoryGroup {
    /// Where its updates are stored.
    rowids: Vec<i64>,
    /// Their summed multiplicity.
    net: i64,
    /// A single update, already where compaction puts it.
    settled: bool,
}

/// The writer lock, held by [`Storage::hold_writes`].
pub struct HeldWrites<'a> {
    _writer: std::sync::MutexGuard<'a, Connection>,
}

/// The storage layer. One per server.
///
/// Its calls block (SQLite, fsync, the writer lock): from async code, run them with
/// [`Storage::blocking`], never on an async worker thread.
pub struct Storage {
    path: PathBuf,
    /// The write connection; writes are serialized through it.
    writer: Mutex<Connection>,
    /// Threads waiting for `writer`: compaction lets them go first between its slices
    /// (the mutex alone is not fair, and would let compaction take it back at once).
    writers_waiting: AtomicUsize,
    collections: RwLock<HashMap<GlobalId, Collection>>,
    /// Collections whose writer reports its own frontier (a Postgres source's): the
    /// ticker leaves them alone, so a source that falls behind or stalls shows its lag
    /// instead of claiming the wall clock. Kept apart from `collections` so it can be
    /// set before a collection is registered.
    self_timed: Mutex<std::collections::HashSet<GlobalId>>,
    /// How long durable appends take (the writer lock, the SQLite transaction and
    /// its fsync).
    write_latency: floe_metrics::Histogram,
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Storage").field("path", &self.path).finish()
    }
}

const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS collections (
        id TEXT PRIMARY KEY,
        upper INTEGER NOT NULL,
        since INTEGER NOT NULL
    );
    CREATE TABLE IF NOT EXISTS updates (
        collection_id TEXT NOT NULL,
        ts INTEGER NOT NULL,
        diff INTEGER NOT NULL,
        row BLOB NOT NULL
    );
    CREATE INDEX IF NOT EXISTS updates_by_time ON updates (collection_id, ts);
    -- Retractions only (small): tells whether a snapshot needs consolidating.
    CREATE INDEX IF NOT EXISTS updates_retractions ON updates (collection_id, ts) WHERE diff < 0;
    CREATE TABLE IF NOT EXISTS read_holds (
        collection_id TEXT NOT NULL,
        holder_id TEXT NOT NULL,
        frontier INTEGER NOT NULL,
        PRIMARY KEY (collection_id, holder_id)
    );
";

fn open_connection(path: &Path) -> Result<Connection, StorageError> {
    let connection = Connection::open(path)?;
    connection.pragma_update(None, "journal_mode", "WAL")?;
    connection.pragma_update(None, "synchronous", "FULL")?;
    connection.busy_timeout(std::time::Duration::from_secs(30))?;
    Ok(connection)
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

impl Storage {
    /// Opens (creating if needed) the storage of a data directory.
    pub fn open(data_dir: &Path) -> Result<Arc<Storage>, StorageError> {
        std::fs::create_dir_all(data_dir).map_err(|source| StorageError::Io {
            path: data_dir.to_path_buf(),
            source,
        })?;
        let path = data_dir.join("storage.db");
        let connection = open_connection(&path)?;
        connection.execute_batch(SCHEMA)?;
        Ok(Arc::new(Storage {
            path,
            writer: Mutex::new(connection),
            writers_waiting: AtomicUsize::new(0),
            collections: RwLock::new(HashMap::new()),
            self_timed: Mutex::new(Default::default()),
            write_latency: floe_metrics::Histogram::default(),
        }))
    }

    /// Runs `work` on a blocking thread (tokio's pool) and waits for it without holding
    /// an async worker thread: SQLite calls wait on the disk and on the writer lock, and a
    /// worker that waits stops every task queued on it (sessions, sinks).
    pub async fn blocking<T: Send + 'static>(
        self: &Arc<Self>,
        work: impl FnOnce(&Storage) -> Result<T, StorageError> + Send + 'static,
    ) -> Result<T, StorageError> {
        let storage = self.clone();
        tokio::task::spawn_blocking(move || work(&storage))
            .await
            .map_err(|err| StorageError::Thread(err.to_string()))?
    }

    /// Test hook: holds the writer lock until the returned guard is dropped, as a long
    /// write would. Every storage write waits meanwhile; nothing else should.
    pub fn hold_writes(&self) -> HeldWrites<'_> {
        HeldWrites {
            _writer: self.writer(),
        }
    }

    fn writer(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.writers_waiting.fetch_add(1, Ordering::SeqCst);
        // A poisoned lock only means another writer panicked mid-call; the
        // SQLite transaction it held was rolled back, so the connection is fine.
        let writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        self.writers_waiting.fetch_sub(1, Ordering::SeqCst);
        writer
    }

    /// Between two slices of a long job: lets the writers waiting meanwhile take the lock
    /// first (for a while at most, so the job goes on under a stream of writes).
    fn let_writers_pass(&self) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(200);
        while self.writers_waiting.load(Ordering::SeqCst) > 0
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    fn collections_read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<GlobalId, Collection>> {
        self.collections.read().unwrap_or_else(|e| e.into_inner())
    }

    fn collections_write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<GlobalId, Collection>> {
        self.collections.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a collection: creates its log if new, or loads its
    /// frontiers, holds and contents from the log.
    pub fn register(&self, id: GlobalId, desc: RelationDesc) -> Result<(), StorageError> {
        let mut writer = self.writer();
        let existing: Option<(i64, i64)> = writer
            .query_row(
                "SELECT upper, since FROM collections WHERE id = ?1",
                params![id.to_string()],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()?;
        let (upper, since) = match existing {
            Some((upper, since)) => (to_u64(upper), to_u64(since)),
            None => {
                let now = Timestamp::now().millis();
                writer.execute(
                    "INSERT INTO collections (id, upper, since) VALUES (?1, ?2, 0)",
                    params![id.to_string(), to_i64(now)],
                )?;
                (now, 0)
            }
        };
        let mut contents = Contents {
            key: desc.unique_keys.first().cloned(),
            ..Contents::default()
        };
        let mut log_updates = 0;
        let mut log_bytes = 0;
        let width = desc.columns.len();
        let mut narrow = false;
        {
            let mut statement =
                writer.prepare("SELECT diff, row FROM updates WHERE collection_id = ?1")?;
            let mut rows = statement.query(params![id.to_string()])?;
            while let Some(record) = rows.next()? {
                let diff: i64 = record.get(0)?;
                let bytes: Vec<u8> = record.get(1)?;
                log_updates += 1;
                log_bytes += bytes.len() as u64 + 16;
                let row = decode_row(&bytes).map_err(|e| StorageError::Corrupt {
                    collection: id,
                    message: e.to_string(),
                })?;
                if row.len() < width {
                    // Written before an ADD COLUMN whose widening a crash cut short.
                    narrow = true;
                    let row = padded(&row, width);
                    contents.apply(encode(&row), &row, diff);
                } else {
                    contents.apply(bytes, &row, diff);
                }
            }
        }
        if narrow {
            let transaction = writer.transaction_with_behavior(TransactionBehavior::Immediate)?;
            pad_logged_rows(&transaction, id, width)?;
            transaction.commit()?;
        }
        let mut holds = BTreeMap::new();
        {
            let mut statement = writer
                .prepare("SELECT holder_id, frontier FROM read_holds WHERE collection_id = ?1")?;
            let rows = statement.query_map(params![id.to_string()], |row| {
                Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))
            })?;
            for row in rows {
                let (holder, frontier) = row?;
                holds.insert(holder, to_u64(frontier));
            }
        }
        self.collections_write().insert(
            id,
            Collection {
                desc,
                upper,
                since,
                contents,
                log_updates,
                log_bytes,
                updates_after_compaction: log_updates,
                holds,
                appended_updates: 0,
                appended_bytes: 0,
            },
        );
        Ok(())
    }

    /// A table's added column (`ALTER TABLE ... ADD COLUMN`): the collection takes its
    /// wider shape, and every row in its log and its contents gains NULLs in the new
    /// columns, in one write transaction, so that the rows read, retracted and
    /// compacted later are all of one width. Idempotent.
    pub fn widen(&self, id: GlobalId, desc: RelationDesc) -> Result<(), StorageError> {
        let width = desc.columns.len();
        let mut writer = self.writer();
        let transaction = writer.transaction_with_behavior(TransactionBehavior::Immediate)?;
        pad_logged_rows(&transaction, id, width)?;
        transaction.commit()?;
        let mut collections = self.collections_write();
        let collection = collections
            .get_mut(&id)
            .ok_or(StorageError::UnknownCollection(id))?;
        let mut contents = Contents {
            key: collection.contents.key.clone(),
            version: collection.contents.version + 1,
            ..Contents::default()
        };
        for (row, count) in collection.contents.rows.values() {
            let row = padded(row, width);
            contents.apply(encode(&row), &row, *count);
        }
        collection.contents = contents;
        collection.desc = desc;
        Ok(())
    }

    /// Removes a collection and its log.
    pub fn drop_collection(&self, id: GlobalId) -> Result<(), StorageError> {
        let mut writer = self.writer();
        let transaction = writer.transaction_with_behavior(TransactionBehavior::Immediate)?;
        for table in ["updates", "read_holds"] {
            transaction.execute(
                &format!("DELETE FROM {table} WHERE collection_id = ?1"),
                params![id.to_string()],
            )?;
        }
        transaction.execute(
            "DELETE FROM collections WHERE id = ?1",
            params![id.to_string()],
        )?;
        transaction.commit()?;
        self.collections_write().remove(&id);
        self.set_self_timed(id, false);
        Ok(())
    }

    /// Appends updates at one new timestamp, durably, and returns the
    /// timestamp. The batch is consolidated first (an insert and a delete of
    /// the same row cancel). A batch that would leave two rows with the same
    /// primary key is refused whole with [`AppendError::UniqueViolation`].
    pub fn append(
        &self,
        id: GlobalId,
        updates: Vec<(Row, i64)>,
    ) -> Result<Result<Timestamp, AppendError>, StorageError> {
        self.append_many(vec![(id, updates)])
    }

    /// Appends to several collections in one transaction at one timestamp:
    /// all of it becomes durable and visible, or none of it.
    pub fn append_many(
        &self,
        batches: Vec<(GlobalId, Vec<(Row, i64)>)>,
    ) -> Result<Result<Timestamp, AppendError>, StorageError> {
        let started = std::time::Instant::now();
        let mut writer = self.writer();
        let mut prepared = Vec::with_capacity(batches.len());
        let mut upper = 0;
        {
            let collections = self.collections_read();
            for (id, updates) in batches {
                let collection = collections
                    .get(&id)
                    .ok_or(StorageError::UnknownCollection(id))?;
                let changes = consolidate(updates);
                if let Err(e) = check_changes(&collection.contents, &changes) {
                    return Ok(Err(e));
                }
                upper = upper.max(collection.upper);
                prepared.push((id, changes));
            }
        }
        let ts = Timestamp::now().millis().max(upper);
        let transaction = writer.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut bytes_written = Vec::with_capacity(prepared.len());
        {
            let mut insert = transaction.prepare_cached(
                "INSERT INTO updates (collection_id, ts, diff, row) VALUES (?1, ?2, ?3, ?4)",
            )?;
            for (id, changes) in &prepared {
                let id_text = id.to_string();
                let mut bytes = 0;
                for (encoded, _, diff) in changes {
                    insert.execute(params![id_text, to_i64(ts), diff, encoded])?;
                    bytes += encoded.len() as u64 + 16;
                }
                bytes_written.push(bytes);
            }
        }
        for (id, _) in &prepared {
            transaction.execute(
                "UPDATE collections SET upper = max(upper, ?2) WHERE id = ?1",
                params![id.to_string(), to_i64(ts + 1)],
            )?;
        }
        transaction.commit()?;
        self.write_latency.observe(started.elapsed());
        // Durable: now visible to queries and, through the upper, to sinks.
        let mut collections = self.collections_write();
        for ((id, changes), bytes) in prepared.into_iter().zip(bytes_written) {
            let collection = collections
                .get_mut(&id)
                .ok_or(StorageError::UnknownCollection(id))?;
            collection.appended_updates += changes.len() as u64;
            for (encoded, row, diff) in changes {
                collection.contents.apply(encoded, &row, diff);
                collection.log_updates += 1;
            }
            collection.log_bytes += bytes;
            collection.appended_bytes += bytes;
            // A write with no changes only moves the upper: the contents (and what
            // queries cached of them) stay valid.
            if bytes > 0 {
                collection.contents.version += 1;
            }
            collection.upper = collection.upper.max(ts + 1);
        }
        Ok(Ok(Timestamp(ts)))
    }

    /// Checks updates as [`Storage::append`] would (primary key, retractions of
    /// rows that are there), without writing them: a transaction checks its
    /// changes when a statement makes them and writes them at COMMIT.
    pub fn check(
        &self,
        id: GlobalId,
        updates: &[(Row, i64)],
    ) -> Result<Result<(), AppendError>, StorageError> {
        let collections = self.collections_read();
        let collection = collections
            .get(&id)
            .ok_or(StorageError::UnknownCollection(id))?;
        Ok(check_changes(
            &collection.contents,
            &consolidate(updates.to_vec()),
        ))
    }

    /// The current contents, each row repeated by its multiplicity, and the
    /// contents' version.
    pub fn contents(&self, id: GlobalId) -> Result<(Vec<Row>, u64), StorageError> {
        let collections = self.collections_read();
        let collection = collections
            .get(&id)
            .ok_or(StorageError::UnknownCollection(id))?;
        let mut rows = Vec::with_capacity(collection.contents.rows.len());
        for (row, count) in collection.contents.rows.values() {
            for _ in 0..(*count).max(0) {
                rows.push(Row::clone(row));
            }
        }
        Ok((rows, collection.contents.version))
    }

    /// The version of the contents (changes on every write).
    pub fn contents_version(&self, id: GlobalId) -> Result<u64, StorageError> {
        let collections = self.collections_read();
        Ok(collections
            .get(&id)
            .ok_or(StorageError::UnknownCollection(id))?
            .contents
            .version)
    }

    /// The collection's shape.
    pub fn desc(&self, id: GlobalId) -> Result<RelationDesc, StorageError> {
        let collections = self.collections_read();
        Ok(collections
            .get(&id)
            .ok_or(StorageError::UnknownCollection(id))?
            .desc
            .clone())
    }

    pub fn upper(&self, id: GlobalId) -> Result<Timestamp, StorageError> {
        let collections = self.collections_read();
        Ok(Timestamp(
            collections
                .get(&id)
                .ok_or(StorageError::UnknownCollection(id))?
                .upper,
        ))
    }

    pub fn since(&self, id: GlobalId) -> Result<Timestamp, StorageError> {
        let collections = self.collections_read();
        Ok(Timestamp(
            collections
                .get(&id)
                .ok_or(StorageError::UnknownCollection(id))?
                .since,
        ))
    }

    /// Whether the ticker advances `id` (the default) or its writer moves its upper
    /// itself, with writes (empty ones too) that reach the wall clock only while it
    /// keeps up with its upstream.
    pub fn set_self_timed(&self, id: GlobalId, self_timed: bool) {
        let mut set = self.self_timed.lock().unwrap_or_else(|e| e.into_inner());
        if self_timed {
            set.insert(id);
        } else {
            set.remove(&id);
        }
    }

    /// Appends updates at their own times in `[lower, upper)` and moves the upper from
    /// `lower` to `upper`, in one transaction: a materialized view's output, whose
    /// times are its inputs' times. Refused whole when the log's upper is not `lower`.
    pub fn append_at(
        &self,
        id: GlobalId,
        lower: Timestamp,
        upper: Timestamp,
        updates: Vec<(Row, Timestamp, i64)>,
    ) -> Result<(), StorageError> {
        let mut writer = self.writer();
        let frontier = self.upper(id)?.0;
        if frontier != lower.0 || upper.0 <= lower.0 {
            return Err(StorageError::UpperMismatch {
                collection: id,
                lower: lower.0,
                upper: upper.0,
                frontier,
            });
        }
        let encoded: Vec<(Vec<u8>, Row, u64, i64)> = updates
            .into_iter()
            .filter(|(_, ts, diff)| *diff != 0 && lower <= *ts && *ts < upper)
            .map(|(row, ts, diff)| (encode(&row), row, ts.0, diff))
            .collect();
        let transaction = writer.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut bytes = 0;
        {
            let mut insert = transaction.prepare_cached(
                "INSERT INTO updates (collection_id, ts, diff, row) VALUES (?1, ?2, ?3, ?4)",
            )?;
            let id_text = id.to_string();
            for (row, _, ts, diff) in &encoded {
                insert.execute(params![id_text, to_i64(*ts), diff, row])?;
                bytes += row.len() as u64 + 16;
            }
        }
        transaction.execute(
            "UPDATE collections SET upper = ?2 WHERE id = ?1",
            params![id.to_string(), to_i64(upper.0)],
        )?;
        transaction.commit()?;
        let mut collections = self.collections_write();
        let collection = collections
            .get_mut(&id)
            .ok_or(StorageError::UnknownCollection(id))?;
        if !encoded.is_empty() {
            collection.contents.version += 1;
        }
        for (bytes, row, _, diff) in encoded {
            collection.contents.apply(bytes, &row, diff);
            collection.log_updates += 1;
        }
        collection.log_bytes += bytes;
        collection.upper = upper.0;
        Ok(())
    }

    /// Advances every upper to the wall clock, durably, except those of self-timed
    /// collections. Called at least once a second so idle collections' frontiers (and
    /// their sinks) move on.
    pub fn tick(&self) -> Result<(), StorageError> {
        let now = Timestamp::now().millis();
        let mut writer = self.writer();
        let self_timed = self
            .self_timed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let behind: Vec<GlobalId> = self
            .collections_read()
            .iter()
            .filter(|(id, c)| c.upper < now && !self_timed.contains(id))
            .map(|(id, _)| *id)
            .collect();
        if behind.is_empty() {
            return Ok(());
        }
        let transaction = writer.transaction_with_behavior(TransactionBehavior::Immediate)?;
        for id in &behind {
            transaction.execute(
                "UPDATE collections SET upper = max(upper, ?2) WHERE id = ?1",
                params![id.to_string(), to_i64(now)],
            )?;
        }
        transaction.commit()?;
        let mut collections = self.collections_write();
        for id in behind {
            if let Some(collection) = collections.get_mut(&id) {
                collection.upper = collection.upper.max(now);
            }
        }
        Ok(())
    }

    /// Checks that `[lower, upper)` can be read: not below the compaction frontier (unless
    /// `lower` is 0, the beginning), not beyond the write frontier. Returns the relation's
    /// number of columns, which every row read must have, and its compaction frontier.
    fn check_readable(
        &self,
        id: GlobalId,
        lower: Timestamp,
        upper: Timestamp,
    ) -> Result<(usize, u64), StorageError> {
        let collections = self.collections_read();
        let collection = collections
            .get(&id)
            .ok_or(StorageError::UnknownCollection(id))?;
        if lower.0 > 0 && lower.0 < collection.since {
            return Err(StorageError::Compacted {
                collection: id,
                since: collection.since,
                lower: lower.0,
            });
        }
        if upper.0 > collection.upper {
            return Err(StorageError::BeyondUpper {
                collection: id,
                upper: upper.0,
                frontier: collection.upper,
            });
        }
        Ok((collection.desc.columns.len(), collection.since))
    }

    /// Reads the updates with `lower <= ts < upper` in time order, in chunks of at most
    /// `max_rows`. `lower = 0` reads everything, compacted history included.
    pub fn read(
        &self,
        id: GlobalId,
        lower: Timestamp,
        upper: Timestamp,
        max_rows: usize,
        chunk: &mut dyn FnMut(Vec<LogUpdate>) -> Result<(), String>,
    ) -> Result<Result<(), String>, StorageError> {
        let (arity, _) = self.check_readable(id, lower, upper)?;
        // A connection of its own: WAL readers do not block the writer. The time index
        // yields the rows in time order without a sort.
        let connection = open_connection(&self.path)?;
        let transaction = connection.unchecked_transaction()?;
        let mut statement = transaction.prepare(
            "SELECT ts, diff, row FROM updates INDEXED BY updates_by_time
             WHERE collection_id = ?1 AND ts >= ?2 AND ts < ?3 ORDER BY ts",
        )?;
        let rows = statement.query(params![id.to_string(), to_i64(lower.0), to_i64(upper.0)])?;
        Self::read_chunks(
            id,
            rows,
            2,
            arity,
            max_rows,
            |record| Ok((Timestamp(to_u64(record.get(0)?)), record.get(1)?)),
            chunk,
        )
    }

    /// The contents as of `upper` (every update with `ts < upper`), consolidated: rows
    /// with positive multiplicities as `diff`, at `ts = upper - 1`, in chunks of at most
    /// `max_rows`; nothing retracted. What a new sink writes first.
    ///
    /// A log without retractions before `upper` is its own consolidation (a row inserted
    /// twice may come twice, with diff 1 each) and is streamed as stored, in bounded
    /// memory. Otherwise the consolidated contents in memory are taken (shared pointers,
    /// 40 bytes a row while the snapshot is read) and the changes since `upper` taken back
    /// out of them: sorting the whole log instead ran about seven times slower.
    pub fn read_snapshot(
        &self,
        id: GlobalId,
        upper: Timestamp,
        max_rows: usize,
        chunk: &mut dyn FnMut(Vec<LogUpdate>) -> Result<(), String>,
    ) -> Result<Result<(), String>, StorageError> {
        let (arity, since) = self.check_readable(id, Timestamp(0), upper)?;
        // History before `since` sits at `since - 1`: a snapshot as of an earlier time
        // would miss it.
        if upper.0 < since {
            return Err(StorageError::Compacted {
                collection: id,
                since,
                lower: upper.0,
            });
        }
        let as_of = Timestamp(upper.0.saturating_sub(1));
        let connection = open_connection(&self.path)?;
        {
            let transaction = connection.unchecked_transaction()?;
            let retracted: bool = transaction.query_row(
                "SELECT EXISTS (SELECT 1 FROM updates INDEXED BY updates_retractions
                 WHERE collection_id = ?1 AND ts < ?2 AND diff < 0)",
                params![id.to_string(), to_i64(upper.0)],
                |record| record.get(0),
            )?;
            if !retracted {
                let mut statement = transaction.prepare(
                    "SELECT diff, row FROM updates WHERE collection_id = ?1 AND ts < ?2",
                )?;
                let rows = statement.query(params![id.to_string(), to_i64(upper.0)])?;
                return Self::read_chunks(
                    id,
                    rows,
                    1,
                    arity,
                    max_rows,
                    |record| Ok((as_of, record.get(0)?)),
                    chunk,
                );
            }
        }
        // Consolidating the log would sort all of it: take the consolidated contents
        // instead (as of the collection's upper, shared, under the lock), and take back
        // out the changes since `upper`.
        let (contents, contents_upper) = {
            let collections = self.collections_read();
            let collection = collections
                .get(&id)
                .ok_or(StorageError::UnknownCollection(id))?;
            let contents: Vec<(Arc<[u8]>, Arc<Row>, i64)> = collection
                .contents
                .rows
                .iter()
                .map(|(bytes, (row, count))| (bytes.clone(), row.clone(), *count))
                .collect();
            (contents, collection.upper)
        };
        // A read transaction begun after the copy sees every change the contents hold.
        let mut later: HashMap<Vec<u8>, i64> = HashMap::new();
        if contents_upper > upper.0 {
            let transaction = connection.unchecked_transaction()?;
            let mut statement = transaction.prepare(
                "SELECT diff, row FROM updates INDEXED BY updates_by_time
                 WHERE collection_id = ?1 AND ts >= ?2 AND ts < ?3",
            )?;
            let mut rows = statement.query(params![
                id.to_string(),
                to_i64(upper.0),
                to_i64(contents_upper)
            ])?;
            while let Some(record) = rows.next()? {
                *later.entry(record.get(1)?).or_insert(0) += record.get::<_, i64>(0)?;
            }
        }
        let max_rows = max_rows.max(1);
        let mut buffer = Vec::with_capacity(max_rows.min(65_536));
        let streamed = {
            let mut push = |row: Row, diff: i64, buffer: &mut Vec<LogUpdate>| {
                if row.len() != arity {
                    return Err(Err(StorageError::Corrupt {
                        collection: id,
                        message: format!("a row of {} columns in a relation of {arity}", row.len()),
                    }));
                }
                buffer.push(LogUpdate {
                    row,
                    ts: as_of,
                    diff,
                });
                if buffer.len() >= max_rows {
                    // `Ok(message)`: the reader stopped.
                    chunk(std::mem::take(buffer)).map_err(Ok)?;
                }
                Ok(())
            };
            let stream = || -> Result<(), Result<String, StorageError>> {
                for (bytes, row, count) in contents {
                    let count = count - later.remove(&*bytes).unwrap_or(0);
                    if count > 0 {
                        push(Row::clone(&row), count, &mut buffer)?;
                    }
                }
                // What is left was removed since `upper`: there then, gone from the contents.
                for (bytes, diff) in later {
                    if diff < 0 {
                        let row = decode_row(&bytes).map_err(|e| {
                            Err(StorageError::Corrupt {
                                collection: id,
                                message: e.to_string(),
                            })
                        })?;
                        push(row, -diff, &mut buffer)?;
                    }
                }
                Ok(())
            };
            stream()
        };
        match streamed {
            Ok(()) if buffer.is_empty() => Ok(Ok(())),
            Ok(()) => Ok(chunk(buffer)),
            Err(Ok(stopped)) => Ok(Err(stopped)),
            Err(Err(error)) => Err(error),
        }
    }

    /// Decodes records into chunks of updates: the encoded row is column `row_column`,
    /// `time_and_diff` reads the rest of a record.
    fn read_chunks(
        id: GlobalId,
        mut rows: rusqlite::Rows<'_>,
        row_column: usize,
        arity: usize,
        max_rows: usize,
        time_and_diff: impl Fn(&rusqlite::Row<'_>) -> rusqlite::Result<(Timestamp, i64)>,
        chunk: &mut dyn FnMut(Vec<LogUpdate>) -> Result<(), String>,
    ) -> Result<Result<(), String>, StorageError> {
        let max_rows = max_rows.max(1);
        let mut buffer = Vec::with_capacity(max_rows.min(65_536));
        while let Some(record) = rows.next()? {
            let corrupt = |message: String| StorageError::Corrupt {
                collection: id,
                message,
            };
            let bytes = record
                .get_ref(row_column)?
                .as_blob()
                .map_err(|e| corrupt(e.to_string()))?;
            let row = decode_row(bytes).map_err(|e| corrupt(e.to_string()))?;
            if row.len() != arity {
                return Err(corrupt(format!(
                    "a row of {} columns in a relation of {arity}",
                    row.len()
                )));
            }
            let (ts, diff) = time_and_diff(record)?;
            buffer.push(LogUpdate { row, ts, diff });
            if buffer.len() >= max_rows
                && let Err(e) = chunk(std::mem::take(&mut buffer))
            {
                return Ok(Err(e));
            }
        }
        if !buffer.is_empty()
            && let Err(e) = chunk(buffer)
        {
            return Ok(Err(e));
        }
        Ok(Ok(()))
    }

    /// Holds back compaction of `id` at `frontier` on behalf of `holder`.
    pub fn set_read_hold(
        &self,
        id: GlobalId,
        holder: &str,
        frontier: Timestamp,
    ) -> Result<(), StorageError> {
        let writer = self.writer();
        writer.execute(
            "INSERT INTO read_holds (collection_id, holder_id, frontier) VALUES (?1, ?2, ?3)
             ON CONFLICT (collection_id, holder_id) DO UPDATE SET frontier = excluded.frontier",
            params![id.to_string(), holder, to_i64(frontier.0)],
        )?;
        let mut collections = self.collections_write();
        if let Some(collection) = collections.get_mut(&id) {
            collection.holds.insert(holder.to_string(), frontier.0);
        }
        Ok(())
    }

    /// Holds back compaction of `id` at `frontier` on behalf of `holder` for as long as
    /// this process runs, without writing it down: a subscription's hold, which a crash
    /// must not leave behind (its subscription ends with the connection).
    pub fn set_transient_read_hold(
        &self,
        id: GlobalId,
        holder: &str,
        frontier: Timestamp,
    ) -> Result<(), StorageError> {
        let mut collections = self.collections_write();
        let collection = collections
            .get_mut(&id)
            .ok_or(StorageError::UnknownCollection(id))?;
        collection.holds.insert(holder.to_string(), frontier.0);
        Ok(())
    }

    /// Releases `holder`'s hold on `id`.
    pub fn drop_read_hold(&self, id: GlobalId, holder: &str) -> Result<(), StorageError> {
        let writer = self.writer();
        writer.execute(
            "DELETE FROM read_holds WHERE collection_id = ?1 AND holder_id = ?2",
            params![id.to_string(), holder],
        )?;
        let mut collections = self.collections_write();
        if let Some(collection) = collections.get_mut(&id) {
            collection.holds.remove(holder);
        }
        Ok(())
    }

    /// Consolidates history below the oldest read hold (or the upper, when
    /// nothing holds it) for collections whose log has doubled since the last
    /// compaction. Returns how many collections were compacted.
    pub fn compact(&self) -> Result<usize, StorageError> {
        let candidates: Vec<(GlobalId, u64)> = self
            .collections_read()
            .iter()
            .filter(|(_, c)| {
                c.log_updates > 1_000 && c.log_updates >= 2 * c.updates_after_compaction.max(1)
            })
            .map(|(id, c)| {
                let target = c
                    .holds
                    .values()
                    .copied()
                    .min()
                    .unwrap_or(c.upper)
                    .min(c.upper);
                (*id, target)
            })
            .filter(|(id, target)| {
                self.collections_read()
                    .get(id)
                    .is_some_and(|c| *target > c.since)
            })
            .collect();
        let mut compacted = 0;
        for (id, target) in candidates {
            self.compact_collection(id, target)?;
            compacted += 1;
        }
        Ok(compacted)
    }

    /// Consolidates every update before `target` into rows at `target - 1`, in slices:
    /// the compaction frontier moves first (reads below `target` are refused from then
    /// on), the history is read and grouped per distinct row without the writer lock, and
    /// each slice of groups is rewritten in a short transaction of its own (a group's
    /// updates deleted and its net inserted together), so every commit leaves the
    /// contents as of any time from `target - 1` on unchanged and writers wait for one
    /// slice at most. A crash between slices leaves a log that is correct and only
    /// partly compacted.
    pub fn compact_collection(&self, id: GlobalId, target: u64) -> Result<(), StorageError> {
        let id_text = id.to_string();
        {
            let writer = self.writer();
            writer.execute(
                "UPDATE collections SET since = max(since, ?2) WHERE id = ?1",
                params![id_text, to_i64(target)],
            )?;
            if let Some(collection) = self.collections_write().get_mut(&id) {
                collection.since = collection.since.max(target);
            }
        }
        let settled_at = target.saturating_sub(1);
        let groups = self.history_groups(id, target, settled_at)?;
        let mut groups = groups.into_iter().peekable();
        while groups.peek().is_some() {
            let mut writer = self.writer();
            let transaction = writer.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let (mut removed, mut removed_bytes, mut added, mut added_bytes) =
                (0u64, 0u64, 0u64, 0u64);
            {
                let mut delete =
                    transaction.prepare_cached("DELETE FROM updates WHERE rowid = ?1")?;
                let mut insert = transaction.prepare_cached(
                    "INSERT INTO updates (collection_id, ts, diff, row) VALUES (?1, ?2, ?3, ?4)",
                )?;
                while (removed as usize) < COMPACTION_SLICE {
                    let Some((bytes, group)) = groups.next() else {
                        break;
                    };
                    let size = bytes.len() as u64 + 16;
                    for rowid in &group.rowids {
                        delete.execute(params![rowid])?;
                    }
                    removed += group.rowids.len() as u64;
                    removed_bytes += size * group.rowids.len() as u64;
                    if group.net != 0 {
                        insert.execute(params![id_text, to_i64(settled_at), group.net, bytes])?;
                        added += 1;
                        added_bytes += size;
                    }
                }
            }
            transaction.commit()?;
            drop(writer);
            self.let_writers_pass();
            if let Some(collection) = self.collections_write().get_mut(&id) {
                collection.log_updates = (collection.log_updates + added).saturating_sub(removed);
                collection.log_bytes =
                    (collection.log_bytes + added_bytes).saturating_sub(removed_bytes);
            }
        }
        if let Some(collection) = self.collections_write().get_mut(&id) {
            collection.updates_after_compaction = collection.log_updates;
        }
        Ok(())
    }

    /// The updates of `id` before `target`, grouped per distinct row (encoded), read on a
    /// connection of its own: WAL readers neither take nor wait for the writer lock.
    /// A row's single update already at `settled_at` is left out: nothing to rewrite.
    fn history_groups(
        &self,
        id: GlobalId,
        target: u64,
        settled_at: u64,
    ) -> Result<HashMap<Vec<u8>, HistoryGroup>, StorageError> {
        let connection = open_connection(&self.path)?;
        let transaction = connection.unchecked_transaction()?;
        let mut statement = transaction.prepare(
            "SELECT rowid, ts, diff, row FROM updates WHERE collection_id = ?1 AND ts < ?2",
        )?;
        let mut rows = statement.query(params![id.to_string(), to_i64(target)])?;
        let mut groups: HashMap<Vec<u8>, HistoryGroup> = HashMap::new();
        while let Some(record) = rows.next()? {
            let group = groups.entry(record.get(3)?).or_default();
            group.rowids.push(record.get(0)?);
            group.net += record.get::<_, i64>(2)?;
            group.settled = group.rowids.len() == 1 && to_u64(record.get(1)?) == settled_at;
        }
        groups.retain(|_, group| !group.settled);
        Ok(groups)
    }

    /// The ids of every collection with a log on disk.
    pub fn stored_collections(&self) -> Result<Vec<GlobalId>, StorageError> {
        let writer = self.writer();
        let mut statement = writer.prepare("SELECT id FROM collections")?;
        let ids = statement
            .query_map([], |row| row.get::<_, String>(0))?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ids.into_iter().filter_map(|id| id.parse().ok()).collect())
    }

    /// How long durable appends have taken since the server started.
    pub fn write_latency(&self) -> floe_metrics::HistogramSnapshot {
        self.write_latency.snapshot()
    }

    /// Log sizes, frontiers and holds of every collection.
    pub fn usage(&self) -> Vec<CollectionUsage> {
        let collections = self.collections_read();
        let mut usage: Vec<CollectionUsage> = collections
            .iter()
            .map(|(id, c)| CollectionUsage {
                id: *id,
                updates: c.log_updates,
                bytes: c.log_bytes,
                since: Timestamp(c.since),
                upper: Timestamp(c.upper),
                holds: c
                    .holds
                    .iter()
                    .map(|(h, f)| (h.clone(), Timestamp(*f)))
                    .collect(),
                appended_updates: c.appended_updates,
                appended_bytes: c.appended_bytes,
            })
            .collect();
        usage.sort_by_key(|u| u.id);
        usage
    }
}

#[cfg(test)]
mod tests;
