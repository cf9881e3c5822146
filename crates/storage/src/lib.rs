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

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use floe_repr::codec::{decode_row, encode_datum, encode_row};
use floe_repr::{Datum, GlobalId, RelationDesc, Row, Timestamp};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

pub mod generator;
mod group_commit;
mod inserts;
mod parts;
mod unique;

pub use group_commit::Updates;
pub use inserts::EncodedInserts;
use unique::UniqueCounts;
pub use unique::UniqueIndex;

use parts::{PartUpdates, PartWriter, update_size};

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
    /// The durable write of a group commit failed (the writer's error, as text: the
    /// group's other appends get it too).
    #[error("storage write failed: {message}")]
    WriteFailed { message: String },
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
    /// Two rows would share a key: the primary key (`index` is `None`) or a unique
    /// index's. `columns` are the key's, `key` holds its values.
    UniqueViolation {
        index: Option<String>,
        columns: Vec<usize>,
        key: Row,
    },
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

/// Rows of a snapshot as stored (see [`Storage::read_snapshot_encoded`]): each row's
/// encoding ([`floe_repr::codec`]) and how many times the contents hold it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EncodedChunk {
    /// The encodings, one after the other.
    bytes: Vec<u8>,
    /// Where each row's encoding ends in `bytes`.
    ends: Vec<usize>,
    counts: Vec<i64>,
    times: Vec<u64>,
}

impl EncodedChunk {
    /// An empty chunk with room for as much as this one holds.
    fn with_same_room(&self) -> EncodedChunk {
        EncodedChunk {
            bytes: Vec::with_capacity(self.bytes.len()),
            ends: Vec::with_capacity(self.ends.len()),
            counts: Vec::with_capacity(self.counts.len()),
            times: Vec::with_capacity(self.times.len()),
        }
    }

    fn push(&mut self, ts: u64, count: i64, row: &[u8]) {
        self.bytes.extend_from_slice(row);
        self.ends.push(self.bytes.len());
        self.counts.push(count);
        self.times.push(ts);
    }

    /// The rows' encodings, in order.
    pub fn rows(&self) -> Vec<&[u8]> {
        let mut start = 0;
        self.ends
            .iter()
            .map(|end| {
                let row = &self.bytes[start..*end];
                start = *end;
                row
            })
            .collect()
    }

    /// Each row's count (its diff: positive in a snapshot), in order.
    pub fn counts(&self) -> &[i64] {
        &self.counts
    }

    /// Each row's time, in order (a snapshot's rows are all at its time).
    pub fn times(&self) -> &[u64] {
        &self.times
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }
}

/// Gathers encoded rows into chunks of at most `max_rows` rows and about `max_bytes`
/// bytes (at least one row) for a reader.
struct EncodedChunks<'a> {
    max_rows: usize,
    max_bytes: usize,
    current: EncodedChunk,
    chunk: &'a mut dyn FnMut(EncodedChunk) -> Result<(), String>,
}

impl<'a> EncodedChunks<'a> {
    fn new(
        (max_rows, max_bytes): (usize, usize),
        chunk: &'a mut dyn FnMut(EncodedChunk) -> Result<(), String>,
    ) -> EncodedChunks<'a> {
        EncodedChunks {
            max_rows: max_rows.max(1),
            max_bytes,
            current: EncodedChunk::default(),
            chunk,
        }
    }

    fn push(&mut self, ts: u64, count: i64, bytes: &[u8]) -> Result<(), ScanStop> {
        self.current.push(ts, count, bytes);
        if self.current.len() >= self.max_rows || self.current.bytes.len() >= self.max_bytes {
            // The next chunk starts with the room this one grew to.
            let next = self.current.with_same_room();
            let full = std::mem::replace(&mut self.current, next);
            (self.chunk)(full).map_err(ScanStop::Reader)?;
        }
        Ok(())
    }

    /// Hands over the last, partial chunk.
    fn finish(self, scanned: Result<(), ScanStop>) -> Result<Result<(), String>, StorageError> {
        let outcome = scan_outcome(scanned)?;
        if outcome.is_err() || self.current.is_empty() {
            return Ok(outcome);
        }
        Ok((self.chunk)(self.current))
    }
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

/// Maps keyed by encoded rows or keys: foldhash, seeded per process (SipHash took a
/// tenth of an append's time).
type BytesMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// Segments of a collection's contents. Rows are spread over them by a hash of their
/// encoding, and each segment remembers the version of its last change, so a reader that
/// keeps a form of each segment (the query engine's Arrow batches) redoes only those a
/// write touched, not the whole table.
pub const SEGMENTS: usize = 64;

/// Which segment an encoded row belongs to (the same in every process).
fn segment_of(encoded: &[u8]) -> usize {
    use std::hash::BuildHasher;
    const HASHER: foldhash::fast::FixedState = foldhash::fast::FixedState::with_seed(0x5e6);
    (HASHER.hash_one(encoded) % SEGMENTS as u64) as usize
}

/// Encoded row -> multiplicity. Only the encoding is kept (readers decode what they
/// take): a decoded `Row` beside it tripled a row's memory, and allocating and zeroing
/// that memory was most of a bulk load's time. Shared pointers, so a snapshot can take
/// the whole contents under the lock without copying a row.
type RowMap = BytesMap<Arc<[u8]>, i64>;

/// One segment of the contents.
#[derive(Debug, Default)]
struct Segment {
    rows: RowMap,
    /// The contents' version when a row of the segment last changed.
    version: u64,
    recent: RecentChanges,
}

/// A segment's latest changes, so a reader that holds the segment as of a recent
/// version takes what changed since instead of every row: a 1,000-row write to a
/// 1M-row table touches every segment, and taking each one whole costs the reader a
/// million shared rows.
#[derive(Debug)]
struct RecentChanges {
    /// (version, encoding, diff), in the order made; the encoding is the one the
    /// contents hold for the row (the row's identity for readers).
    changes: Vec<(u64, Arc<[u8]>, i64)>,
    /// `changes` holds every change made after this version (`u64::MAX`: no history
    /// yet, every reader takes the segment whole).
    after: u64,
}

impl Default for RecentChanges {
    fn default() -> Self {
        RecentChanges {
            changes: Vec::new(),
            after: u64::MAX,
        }
    }
}

/// Changes a segment remembers beyond an eighth of its rows (see `RecentChanges::record`).
const RECENT_CHANGES: usize = 256;

impl RecentChanges {
    /// The most changes a segment of `rows` rows remembers: an eighth of its rows, at
    /// least [`RECENT_CHANGES`].
    fn limit(rows: usize) -> usize {
        RECENT_CHANGES.max(rows / 8)
    }

    /// Remembers a change made at `version` (versions only grow), keeping at most
    /// `limit`: when full, the changes of the oldest version go (a reader holding an
    /// older one takes the segment whole); when the current version alone fills it, the
    /// history starts again after this version.
    fn record(&mut self, limit: usize, version: u64, encoded: &Arc<[u8]>, diff: i64) {
        if self.after == u64::MAX {
            self.after = version;
        } else if self.changes.len() >= limit {
            match self.changes.first().map(|(oldest, _, _)| *oldest) {
                Some(oldest) if oldest < version => {
                    let end = self.changes.partition_point(|(v, _, _)| *v <= oldest);
                    self.changes.drain(..end);
                    self.after = oldest;
                }
                _ => {
                    self.changes.clear();
                    self.after = version;
                }
            }
        }
        self.changes.push((version, encoded.clone(), diff));
    }

    /// The changes made after `known` to a segment now at `version`, if the history
    /// reaches back to it.
    fn after(&self, known: u64, version: u64) -> Option<TakenRows> {
        if known == u64::MAX || known < self.after || known > version {
            return None;
        }
        Some(
            self.changes
                .iter()
                .filter(|(made, _, _)| *made > known)
                .map(|(_, encoded, diff)| (encoded.clone(), *diff))
                .collect(),
        )
    }
}

/// The consolidated current contents of a collection.
#[derive(Debug)]
struct Contents {
    /// [`SEGMENTS`] segments.
    segments: Vec<Segment>,
    /// The primary key's columns, if the collection has one.
    key: Option<Vec<usize>>,
    /// Encoded key -> how many rows carry it (at most 1 when consistent).
    key_counts: BytesMap<Vec<u8>, i64>,
    /// The unique indexes besides the primary key (`CREATE UNIQUE INDEX`).
    unique: Vec<UniqueCounts>,
    /// Bumped on every change, so callers can cache derived forms.
    version: u64,
}

impl Default for Contents {
    fn default() -> Self {
        Contents {
            segments: (0..SEGMENTS).map(|_| Segment::default()).collect(),
            key: None,
            key_counts: BytesMap::default(),
            unique: Vec::new(),
            version: 0,
        }
    }
}

/// One change to a collection, with the encodings that checking, logging and applying
/// it need, each computed once.
struct Change {
    /// The row's encoding: what the log stores and the contents are keyed by (allocated
    /// once, at its exact size, and shared by the contents and the group commit).
    encoded: Arc<[u8]>,
    /// The primary key's encoding, when the collection has a key.
    key: Option<Vec<u8>>,
    /// No decoded row: a bulk write's rows are freed as they are encoded, and their
    /// memory reused for the encodings (a refused key decodes its row again).
    diff: i64,
}

/// One segment of a collection's contents, as [`Storage::changed_segments`] returns it.
#[derive(Debug, Clone, PartialEq)]
pub struct ContentsSegment {
    pub index: usize,
    pub version: u64,
    taken: TakenRows,
    /// Whether `taken` holds the changes made since the version the reader gave rather
    /// than the segment's rows.
    changes_only: bool,
}

impl ContentsSegment {
    /// Whether [`ContentsSegment::shared_rows`] are the changes made since the version
    /// the reader gave (each encoding with its diff, in the order they were made), not
    /// the segment's rows.
    pub fn changes_only(&self) -> bool {
        self.changes_only
    }

    /// The segment's rows as the contents hold them, each encoding with its
    /// multiplicity, or the changes since the reader's version (see
    /// [`ContentsSegment::changes_only`]). An encoding is the contents' own allocation,
    /// the same for as long as the row stays: a reader that keeps a segment's encodings
    /// tells a kept row from a new one, and finds a retracted one, by address.
    pub fn shared_rows(&self) -> &[(Arc<[u8]>, i64)] {
        &self.taken
    }

    /// [`ContentsSegment::shared_rows`], taken: a reader that keeps them moves them
    /// instead of sharing each again.
    pub fn into_shared_rows(self) -> Vec<(Arc<[u8]>, i64)> {
        self.taken
    }
}

/// Rows of the contents as a reader takes them under the lock: encodings (shared, not
/// copied) and multiplicities, decoded once the lock is released.
type TakenRows = Vec<(Arc<[u8]>, i64)>;

/// Takes `rows` (of the contents, or of one segment) under the lock.
fn take<'a>(rows: impl Iterator<Item = (&'a Arc<[u8]>, &'a i64)>) -> TakenRows {
    rows.map(|(encoded, count)| (encoded.clone(), *count))
        .collect()
}

/// The rows of `taken`, each repeated by its multiplicity.
fn decode_taken(collection: GlobalId, taken: TakenRows) -> Result<Vec<Row>, StorageError> {
    let mut rows = Vec::with_capacity(taken.len());
    for (encoded, count) in taken {
        if count <= 0 {
            continue;
        }
        let row = decode_row(&encoded).map_err(|e| corrupt(collection, e.to_string()))?;
        for _ in 1..count {
            rows.push(Row::clone(&row));
        }
        rows.push(row);
    }
    Ok(rows)
}

/// The key columns of a row, encoded: an in-memory identity only (never stored), so the
/// datums are written one after the other without a row header.
fn encode_key(row: &Row, key: &[usize]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(16);
    for column in key {
        encode_datum(row.get(*column).unwrap_or(&Datum::Null), &mut bytes);
    }
    bytes
}

/// Adds `diff` to the count of `key`; a count that reaches 0 goes (and a 0 is never
/// added), so the map holds the keys rows carry.
fn add_count(counts: &mut BytesMap<Vec<u8>, i64>, key: Vec<u8>, diff: i64) {
    match counts.entry(key) {
        Entry::Occupied(mut count) => {
            *count.get_mut() += diff;
            if *count.get() == 0 {
                count.remove();
            }
        }
        Entry::Vacant(count) => {
            if diff != 0 {
                count.insert(diff);
            }
        }
    }
}

/// The change of `row` by `diff` in a collection keyed by `key`, `encoded` being the
/// row's encoding.
fn change_of(key: Option<&[usize]>, encoded: &[u8], row: &Row, diff: i64) -> Change {
    Change {
        key: key.map(|key| encode_key(row, key)),
        encoded: Arc::from(encoded),
        diff,
    }
}

impl Contents {
    /// The change of `row` by `diff`, `encoded` being the row's encoding.
    fn change(&self, encoded: &[u8], row: &Row, diff: i64) -> Change {
        change_of(self.key.as_deref(), encoded, row, diff)
    }

    /// Applies a change without remembering it (a rebuild, which ends with
    /// [`Contents::forget_recent`]).
    fn apply(&mut self, change: Change) {
        self.apply_as(change, false);
    }

    /// Applies a write's change and remembers it for readers that hold the segment.
    fn apply_recorded(&mut self, change: Change) {
        self.apply_as(change, true);
    }

    /// The history of every segment starts again after the current version: readers
    /// holding an older one take the segments whole. After a rebuild, and after a write
    /// too large for the history to hold (recording it would only be thrown away).
    fn forget_recent(&mut self) {
        for segment in &mut self.segments {
            segment.recent.changes.clear();
            segment.recent.after = self.version;
        }
    }

    fn apply_as(&mut self, change: Change, record: bool) {
        if !self.unique.is_empty() {
            let row = decode_row(&change.encoded).unwrap_or_default();
            for index in &mut self.unique {
                index.apply(&row, change.diff);
            }
        }
        let Change { encoded, key, diff } = change;
        if let Some(key) = key {
            add_count(&mut self.key_counts, key, diff);
        }
        let segment = &mut self.segments[segment_of(&encoded)];
        segment.version = self.version;
        if diff == 0 {
            return;
        }
        let limit = RecentChanges::limit(segment.rows.len());
        match segment.rows.entry(encoded) {
            Entry::Occupied(mut count) => {
                // The contents' own encoding of the row: its identity for readers.
                if record {
                    segment
                        .recent
                        .record(limit, self.version, count.key(), diff);
                }
                *count.get_mut() += diff;
                // Consolidated-away rows leave, so memory follows the contents.
                if *count.get() == 0 {
                    count.remove();
                }
            }
            Entry::Vacant(count) => {
                if record {
                    segment
                        .recent
                        .record(limit, self.version, count.key(), diff);
                }
                count.insert(diff);
            }
        }
    }

    /// Room for `changes` more rows and keys, taken at once: a bulk load into maps that
    /// grew by doubling allocated (and had the kernel zero) about twice what they end up
    /// holding. Only for writes of at least [`BULK_WRITE_CHANGES`]: a small one would
    /// visit every segment for nothing.
    fn reserve(&mut self, changes: usize) {
        if self.key.is_some() {
            self.key_counts.reserve(changes);
        }
        let per_segment = changes.div_ceil(SEGMENTS);
        for segment in &mut self.segments {
            segment.rows.reserve(per_segment);
        }
    }

    /// How many distinct rows the contents hold.
    fn rows(&self) -> usize {
        self.segments.iter().map(|segment| segment.rows.len()).sum()
    }

    /// The multiplicity of the row encoded as `encoded` (0 when absent).
    fn count(&self, encoded: &[u8]) -> i64 {
        self.segments[segment_of(encoded)]
            .rows
            .get(encoded)
            .copied()
            .unwrap_or(0)
    }

    /// Every row: encoding and multiplicity.
    fn iter(&self) -> impl Iterator<Item = (&Arc<[u8]>, &i64)> {
        self.segments.iter().flat_map(|segment| segment.rows.iter())
    }

    /// A batch as changes: an insert and a delete of the same row cancel. A batch of
    /// inserts only is taken as it is (a row inserted twice is logged twice, which
    /// means the same as once with multiplicity 2), saving a map of the whole batch.
    fn changes(&self, updates: Vec<(Row, i64)>) -> Vec<Change> {
        if updates.iter().all(|(_, diff)| *diff > 0) {
            // Each row is encoded into one reused buffer, then copied once at its size.
            let mut encoded = Vec::new();
            return updates
                .into_iter()
                .map(|(row, diff)| {
                    encoded.clear();
                    encode_row(&row, &mut encoded);
                    self.change(&encoded, &row, diff)
                })
                .collect();
        }
        let mut consolidated: BytesMap<Vec<u8>, (Row, i64)> = BytesMap::default();
        for (row, diff) in updates {
            consolidated.entry(encode(&row)).or_insert((row, 0)).1 += diff;
        }
        consolidated
            .into_iter()
            .filter(|(_, (_, diff))| *diff != 0)
            .map(|(encoded, (row, diff))| self.change(&encoded, &row, diff))
            .collect()
    }

    /// Refuses changes that would break the primary key or retract rows that are not
    /// there, given the changes `accepted` before them in the same group commit.
    fn check(&self, changes: &[Change], accepted: &Accepted) -> Result<(), AppendError> {
        if let Some(key) = &self.key {
            // Encoded key -> (net change, the encoding of a row carrying it).
            let mut deltas: BytesMap<&[u8], (i64, &[u8])> =
                BytesMap::with_capacity_and_hasher(changes.len(), Default::default());
            for change in changes {
                let key_bytes = change.key.as_deref().unwrap_or_default();
                deltas.entry(key_bytes).or_insert((0, &change.encoded)).0 += change.diff;
            }
            for (key_bytes, (delta, encoded)) in deltas {
                let existing = self.key_counts.get(key_bytes).copied().unwrap_or(0)
                    + accepted.keys.get(key_bytes).copied().unwrap_or(0);
                if existing + delta > 1 {
                    // The row was encoded from a `Row` just before: it decodes.
                    let row = decode_row(encoded).unwrap_or_default();
                    let key_values = key
                        .iter()
                        .map(|i| row.get(*i).cloned().unwrap_or(Datum::Null))
                        .collect();
                    return Err(AppendError::UniqueViolation {
                        index: None,
                        columns: key.clone(),
                        key: key_values,
                    });
                }
            }
        }
        for (position, index) in self.unique.iter().enumerate() {
            index.check(changes, accepted.unique.get(position))?;
        }
        // Only retractions need their row present: a bulk load's inserts look nothing up.
        for change in changes.iter().filter(|change| change.diff < 0) {
            let present = self.count(&change.encoded)
                + accepted.rows.get(&*change.encoded).copied().unwrap_or(0);
            if present + change.diff < 0 {
                return Err(AppendError::RetractionOfAbsentRow);
            }
        }
        Ok(())
    }
}

/// The changes to one collection accepted earlier in a group commit: checked, about to
/// be written, not yet in the contents. Later appends of the group are checked against
/// the contents and these.
#[derive(Default)]
struct Accepted {
    /// Encoded key -> net change of the rows carrying it.
    keys: BytesMap<Vec<u8>, i64>,
    /// Encoded row -> net change.
    rows: BytesMap<Arc<[u8]>, i64>,
    /// Per unique index of the contents, in order: encoded key -> net change.
    unique: Vec<BytesMap<Vec<u8>, i64>>,
}

impl Accepted {
    fn add(&mut self, contents: &Contents, changes: &[Change]) {
        self.unique
            .resize_with(contents.unique.len(), BytesMap::default);
        for (index, deltas) in contents.unique.iter().zip(&mut self.unique) {
            index.add_deltas(changes, deltas);
        }
        for change in changes {
            if let Some(key) = &change.key {
                *self.keys.entry(key.clone()).or_insert(0) += change.diff;
            }
            *self.rows.entry(change.encoded.clone()).or_insert(0) += change.diff;
        }
    }
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
        row.resize(width, Datum::Null);
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
    let mut rewritten = Vec::new();
    let mut padded_rows = 0;
    {
        let mut statement = transaction.prepare(
            "SELECT d.id, d.data FROM parts p JOIN part_data d ON d.id = p.data_id
             WHERE p.collection_id = ?1",
        )?;
        let mut records = statement.query(params![id.to_string()])?;
        while let Some(record) = records.next()? {
            let data_id: i64 = record.get(0)?;
            let data = record
                .get_ref(1)?
                .as_blob()
                .map_err(|e| corrupt(id, e.to_string()))?;
            let mut narrow = 0;
            let mut wide = Vec::with_capacity(data.len());
            for update in PartUpdates::new(data) {
                let (ts, diff, bytes) = update.map_err(|message| corrupt(id, message))?;
                let row = decode_row(bytes).map_err(|e| corrupt(id, e.to_string()))?;
                if row.len() < width {
                    narrow += 1;
                    parts::encode_update(&mut wide, ts, diff, &encode(&padded(&row, width)));
                } else {
                    parts::encode_update(&mut wide, ts, diff, bytes);
                }
            }
            if narrow > 0 {
                padded_rows += narrow;
                rewritten.push((data_id, wide));
            }
        }
    }
    let mut update = transaction.prepare("UPDATE part_data SET data = ?2 WHERE id = ?1")?;
    for (data_id, data) in &rewritten {
        update.execute(params![data_id, data])?;
    }
    Ok(padded_rows)
}

/// The error for a log that does not decode.
fn corrupt(collection: GlobalId, message: String) -> StorageError {
    StorageError::Corrupt {
        collection,
        message,
    }
}

/// Why a scan of the log stopped early.
enum ScanStop {
    /// The reader's callback asked to stop, with its reason.
    Reader(String),
    Storage(StorageError),
}

impl From<rusqlite::Error> for ScanStop {
    fn from(error: rusqlite::Error) -> Self {
        ScanStop::Storage(error.into())
    }
}

impl From<StorageError> for ScanStop {
    fn from(error: StorageError) -> Self {
        ScanStop::Storage(error)
    }
}

/// A scan's outcome as the read calls answer it: a storage error, or whether the reader
/// stopped.
fn scan_outcome(scanned: Result<(), ScanStop>) -> Result<Result<(), String>, StorageError> {
    match scanned {
        Ok(()) => Ok(Ok(())),
        Err(ScanStop::Reader(message)) => Ok(Err(message)),
        Err(ScanStop::Storage(error)) => Err(error),
    }
}

/// What a snapshot's scan calls for each row: `(count, row bytes)`.
type RowVisitor<'a> = dyn FnMut(i64, &[u8]) -> Result<(), ScanStop> + 'a;

/// What a scan calls for each update: `(ts, diff, row bytes)`.
type UpdateVisitor<'a> = dyn FnMut(u64, i64, &[u8]) -> Result<(), ScanStop> + 'a;

/// Calls `each(ts, diff, row bytes)` for every update of `id` with `lower <= ts < upper`,
/// in time order (parts in order of their lowest time, each in its own order).
fn scan_updates(
    connection: &Connection,
    id: GlobalId,
    lower: u64,
    upper: u64,
    each: &mut UpdateVisitor<'_>,
) -> Result<(), ScanStop> {
    let mut statement = connection.prepare_cached(
        "SELECT d.data FROM parts p INDEXED BY parts_by_time
         JOIN part_data d ON d.id = p.data_id
         WHERE p.collection_id = ?1 AND p.lower_ts < ?3 AND p.max_ts >= ?2
         ORDER BY p.lower_ts",
    )?;
    let mut records = statement.query(params![id.to_string(), to_i64(lower), to_i64(upper)])?;
    while let Some(record) = records.next()? {
        let data = record
            .get_ref(0)?
            .as_blob()
            .map_err(|e| corrupt(id, e.to_string()))?;
        for update in PartUpdates::new(data) {
            let (ts, diff, bytes) = update.map_err(|message| corrupt(id, message))?;
            if lower <= ts && ts < upper {
                each(ts, diff, bytes)?;
            }
        }
    }
    Ok(())
}

/// Gathers decoded updates into chunks of at most `max_rows` for a reader, checking each
/// row's width.
struct Chunks<'a> {
    id: GlobalId,
    arity: usize,
    max_rows: usize,
    buffer: Vec<LogUpdate>,
    chunk: &'a mut dyn FnMut(Vec<LogUpdate>) -> Result<(), String>,
}

impl<'a> Chunks<'a> {
    fn new(
        id: GlobalId,
        arity: usize,
        max_rows: usize,
        chunk: &'a mut dyn FnMut(Vec<LogUpdate>) -> Result<(), String>,
    ) -> Chunks<'a> {
        let max_rows = max_rows.max(1);
        Chunks {
            id,
            arity,
            max_rows,
            buffer: Vec::with_capacity(max_rows.min(65_536)),
            chunk,
        }
    }

    fn push_encoded(&mut self, ts: Timestamp, diff: i64, bytes: &[u8]) -> Result<(), ScanStop> {
        let row = decode_row(bytes).map_err(|e| corrupt(self.id, e.to_string()))?;
        self.push(ts, diff, row)
    }

    fn push(&mut self, ts: Timestamp, diff: i64, row: Row) -> Result<(), ScanStop> {
        if row.len() != self.arity {
            return Err(ScanStop::Storage(corrupt(
                self.id,
                format!(
                    "a row of {} columns in a relation of {}",
                    row.len(),
                    self.arity
                ),
            )));
        }
        self.buffer.push(LogUpdate { row, ts, diff });
        if self.buffer.len() >= self.max_rows {
            (self.chunk)(std::mem::take(&mut self.buffer)).map_err(ScanStop::Reader)?;
        }
        Ok(())
    }

    /// Hands over the last, partial chunk.
    fn finish(self, scanned: Result<(), ScanStop>) -> Result<Result<(), String>, StorageError> {
        let outcome = scan_outcome(scanned)?;
        if outcome.is_err() || self.buffer.is_empty() {
            return Ok(outcome);
        }
        Ok((self.chunk)(self.buffer))
    }
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

impl Collection {
    /// Durable appended changes at `ts`: into the contents and the counters, and the
    /// upper past `ts`.
    fn apply_appended(&mut self, changes: Vec<Change>, ts: u64) {
        let bytes: u64 = changes.iter().map(|c| update_size(c.encoded.len())).sum();
        self.appended_updates += changes.len() as u64;
        self.log_updates += changes.len() as u64;
        // A write with no changes only moves the upper: the contents (and what queries
        // cached of them) stay valid.
        if bytes > 0 {
            self.contents.version += 1;
        }
        if changes.len() >= BULK_WRITE_CHANGES {
            self.contents.reserve(changes.len());
        }
        // A write of more changes per segment than a segment remembers resets the
        // histories instead of filling and emptying them (a bulk load).
        let record =
            changes.len() / SEGMENTS < RecentChanges::limit(self.contents.rows() / SEGMENTS);
        for change in changes {
            if record {
                self.contents.apply_recorded(change);
            } else {
                self.contents.apply(change);
            }
        }
        if !record {
            self.contents.forget_recent();
        }
        self.log_bytes += bytes;
        self.appended_bytes += bytes;
        self.upper = self.upper.max(ts + 1);
    }
}

/// Changes from which a write reserves room in the contents at once (see
/// `Contents::reserve`).
const BULK_WRITE_CHANGES: usize = 4_096;

/// Blobs written or freed per transaction when compacting: each slice holds the writer
/// lock for milliseconds, so appends, read holds and the ticker go on between slices.
const COMPACTION_SLICE_PARTS: usize = 8;

/// The history a compaction rewrites.
#[derive(Default)]
struct History {
    /// The `parts` rows it replaces.
    parts: Vec<i64>,
    /// Their updates and bytes.
    updates: u64,
    bytes: u64,
    /// Encoded row -> summed multiplicity.
    net: BytesMap<Vec<u8>, i64>,
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
    /// Appends waiting for the writer: a drainer writes them all in one durable
    /// transaction (group commit).
    append_queue: Mutex<group_commit::AppendQueue>,
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
        let mut connection = open_connection(&path)?;
        connection.execute_batch(SCHEMA)?;
        connection.execute_batch(parts::SCHEMA)?;
        let migrated = parts::migrate_row_log(&mut connection)?;
        if migrated > 0 {
            tracing::info!(
                updates = migrated,
                "the change log was rewritten into parts"
            );
        }
        // Blobs of a compaction that a crash cut short.
        let transaction = connection.transaction()?;
        parts::delete_garbage(&transaction, usize::MAX)?;
        transaction.commit()?;
        Ok(Arc::new(Storage {
            path,
            writer: Mutex::new(connection),
            writers_waiting: AtomicUsize::new(0),
            collections: RwLock::new(HashMap::new()),
            self_timed: Mutex::new(Default::default()),
            write_latency: floe_metrics::Histogram::default(),
            append_queue: Mutex::new(Default::default()),
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

    /// `read` of collection `id`, under the read lock.
    fn read_collection<T>(
        &self,
        id: GlobalId,
        read: impl FnOnce(&Collection) -> T,
    ) -> Result<T, StorageError> {
        let collections = self.collections_read();
        let collection = collections
            .get(&id)
            .ok_or(StorageError::UnknownCollection(id))?;
        Ok(read(collection))
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
        let scanned = scan_updates(&writer, id, 0, u64::MAX, &mut |_, diff, bytes| {
            log_updates += 1;
            log_bytes += update_size(bytes.len());
            let row = decode_row(bytes).map_err(|e| corrupt(id, e.to_string()))?;
            if row.len() < width {
                // Written before an ADD COLUMN whose widening a crash cut short.
                narrow = true;
                let row = padded(&row, width);
                let change = contents.change(&encode(&row), &row, diff);
                contents.apply(change);
            } else {
                let change = contents.change(bytes, &row, diff);
                contents.apply(change);
            }
            Ok(())
        });
        scan_outcome(scanned)?.map_err(|message| corrupt(id, message))?;
        contents.forget_recent();
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
            unique: collection
                .contents
                .unique
                .iter()
                .map(|counts| UniqueCounts::new(counts.index.clone()))
                .collect(),
            version: collection.contents.version + 1,
            ..Contents::default()
        };
        for (encoded, count) in collection.contents.iter() {
            let row = decode_row(encoded).map_err(|e| corrupt(id, e.to_string()))?;
            let row = padded(&row, width);
            let change = contents.change(&encode(&row), &row, *count);
            contents.apply(change);
        }
        contents.forget_recent();
        collection.contents = contents;
        collection.desc = desc;
        Ok(())
    }

    /// Sets a table's unique indexes (besides its primary key) to `indexes`: from now
    /// on every write is checked against them. An index it did not have is counted from
    /// the contents first and refused, the old set kept, when two rows share a key;
    /// setting the set it has is a no-op. Serialized with group commits (it takes the
    /// writer), so no write is checked against one set and applied under another.
    pub fn set_unique_indexes(
        &self,
        id: GlobalId,
        indexes: Vec<UniqueIndex>,
    ) -> Result<Result<(), AppendError>, StorageError> {
        let _writer = self.writer();
        let mut collections = self.collections_write();
        let collection = collections
            .get_mut(&id)
            .ok_or(StorageError::UnknownCollection(id))?;
        let contents = &mut collection.contents;
        if contents.unique.iter().map(|c| &c.index).eq(indexes.iter()) {
            return Ok(Ok(()));
        }
        // The new ones are counted before anything changes: a duplicate keeps the old set.
        let mut counted = Vec::new();
        for index in &indexes {
            if contents.unique.iter().any(|c| c.index == *index) {
                continue;
            }
            let mut counts = UniqueCounts::new(index.clone());
            for (encoded, count) in contents.iter() {
                let row = decode_row(encoded).map_err(|e| corrupt(id, e.to_string()))?;
                counts.apply(&row, *count);
            }
            if let Some(duplicate) = counts.duplicate() {
                return Ok(Err(duplicate));
            }
            counted.push(counts);
        }
        let mut old = std::mem::take(&mut contents.unique);
        for index in indexes {
            let kept = match old.iter().position(|c| c.index == index) {
                Some(position) => old.swap_remove(position),
                None => {
                    let position = counted.iter().position(|c| c.index == index);
                    match position {
                        Some(position) => counted.swap_remove(position),
                        // The same index twice in `indexes`: counted once.
                        None => continue,
                    }
                }
            };
            contents.unique.push(kept);
        }
        Ok(Ok(()))
    }

    /// Removes a collection and its log.
    pub fn drop_collection(&self, id: GlobalId) -> Result<(), StorageError> {
        let mut writer = self.writer();
        let transaction = writer.transaction_with_behavior(TransactionBehavior::Immediate)?;
        transaction.execute(
            "DELETE FROM part_data WHERE id IN (SELECT data_id FROM parts WHERE collection_id = ?1)",
            params![id.to_string()],
        )?;
        for table in ["parts", "read_holds"] {
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
        self: &Arc<Self>,
        id: GlobalId,
        updates: Vec<(Row, i64)>,
    ) -> Result<Result<Timestamp, AppendError>, StorageError> {
        self.append_many(vec![(id, updates)])
    }

    /// Checks updates as [`Storage::append`] would (primary key, retractions of
    /// rows that are there), without writing them: a transaction checks its
    /// changes when a statement makes them and writes them at COMMIT.
    pub fn check(
        &self,
        id: GlobalId,
        updates: &[(Row, i64)],
    ) -> Result<Result<(), AppendError>, StorageError> {
        self.read_collection(id, |collection| {
            let changes = collection.contents.changes(updates.to_vec());
            collection.contents.check(&changes, &Accepted::default())
        })
    }

    /// The column sets no two rows may share, as [`Storage::check`] and appends enforce
    /// them: the primary key's, then each unique index's.
    pub fn unique_keys(&self, id: GlobalId) -> Result<Vec<Vec<usize>>, StorageError> {
        self.read_collection(id, |collection| {
            let contents = &collection.contents;
            let indexes = contents.unique.iter().map(|c| c.index.columns.clone());
            contents.key.iter().cloned().chain(indexes).collect()
        })
    }

    /// The current contents, each row repeated by its multiplicity, and the
    /// contents' version.
    pub fn contents(&self, id: GlobalId) -> Result<(Vec<Row>, u64), StorageError> {
        let (taken, version) = self.read_collection(id, |collection| {
            let contents = &collection.contents;
            (take(contents.iter()), contents.version)
        })?;
        Ok((decode_taken(id, taken)?, version))
    }

    /// The segments of the contents whose version is not the one in `known` (a segment
    /// index -> version map of what the caller holds, `u64::MAX` for nothing): each
    /// one's index, version, and rows or, when the segment remembers every change since
    /// the caller's version, those changes; and the contents' version, read at once.
    pub fn changed_segments(
        &self,
        id: GlobalId,
        known: &[u64],
    ) -> Result<(Vec<ContentsSegment>, u64), StorageError> {
        let (taken, version) = self.read_collection(id, |collection| {
            let contents = &collection.contents;
            let taken: Vec<(usize, u64, TakenRows, bool)> = contents
                .segments
                .iter()
                .enumerate()
                .filter(|(index, segment)| known.get(*index) != Some(&segment.version))
                .map(|(index, segment)| {
                    let known = known.get(index).copied().unwrap_or(u64::MAX);
                    match segment.recent.after(known, segment.version) {
                        Some(changes) => (index, segment.version, changes, true),
                        None => (index, segment.version, take(segment.rows.iter()), false),
                    }
                })
                .collect();
            (taken, contents.version)
        })?;
        let changed = taken
            .into_iter()
            .map(|(index, version, taken, changes_only)| ContentsSegment {
                index,
                version,
                taken,
                changes_only,
            })
            .collect();
        Ok((changed, version))
    }

    /// The version of the contents (changes on every write).
    pub fn contents_version(&self, id: GlobalId) -> Result<u64, StorageError> {
        self.read_collection(id, |collection| collection.contents.version)
    }

    /// The collection's shape.
    pub fn desc(&self, id: GlobalId) -> Result<RelationDesc, StorageError> {
        self.read_collection(id, |collection| collection.desc.clone())
    }

    pub fn upper(&self, id: GlobalId) -> Result<Timestamp, StorageError> {
        self.read_collection(id, |collection| Timestamp(collection.upper))
    }

    pub fn since(&self, id: GlobalId) -> Result<Timestamp, StorageError> {
        self.read_collection(id, |collection| Timestamp(collection.since))
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
        let mut encoded: Vec<(Vec<u8>, Row, u64, i64)> = updates
            .into_iter()
            .filter(|(_, ts, diff)| *diff != 0 && lower <= *ts && *ts < upper)
            .map(|(row, ts, diff)| (encode(&row), row, ts.0, diff))
            .collect();
        // A part holds its updates in time order.
        encoded.sort_by_key(|(_, _, ts, _)| *ts);
        let mut part_writer = PartWriter::default();
        let mut bytes = 0;
        for (row, _, ts, diff) in &encoded {
            part_writer.push(*ts, *diff, row);
            bytes += update_size(row.len());
        }
        let transaction = writer.transaction_with_behavior(TransactionBehavior::Immediate)?;
        parts::insert_parts(&transaction, &id.to_string(), &part_writer.finish())?;
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
            let change = collection.contents.change(&bytes, &row, diff);
            collection.contents.apply_recorded(change);
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
        // A connection of its own: WAL readers do not block the writer.
        let connection = open_connection(&self.path)?;
        let transaction = connection.unchecked_transaction()?;
        let mut chunks = Chunks::new(id, arity, max_rows, chunk);
        let scanned = scan_updates(
            &transaction,
            id,
            lower.0,
            upper.0,
            &mut |ts, diff, bytes| chunks.push_encoded(Timestamp(ts), diff, bytes),
        );
        chunks.finish(scanned)
    }

    /// The contents as of `upper` (every update with `ts < upper`), consolidated: rows
    /// with positive multiplicities as `diff`, at `ts = upper - 1`, in chunks of at most
    /// `max_rows`; nothing retracted. What a new sink writes first (see
    /// [`Storage::scan_snapshot`] for how it is read).
    pub fn read_snapshot(
        &self,
        id: GlobalId,
        upper: Timestamp,
        max_rows: usize,
        chunk: &mut dyn FnMut(Vec<LogUpdate>) -> Result<(), String>,
    ) -> Result<Result<(), String>, StorageError> {
        let (arity, since) = self.check_readable(id, Timestamp(0), upper)?;
        let as_of = Timestamp(upper.0.saturating_sub(1));
        let mut chunks = Chunks::new(id, arity, max_rows, chunk);
        let scanned = self.scan_snapshot(id, upper, since, &mut |count, bytes| {
            chunks.push_encoded(as_of, count, bytes)
        })?;
        chunks.finish(scanned)
    }

    /// The snapshot [`Storage::read_snapshot`] reads, with its rows left encoded: chunks
    /// of at most `max_rows` rows and about `max_bytes` bytes of encodings (a chunk holds
    /// at least one row). For a reader that converts encodings itself (a sink building
    /// Arrow columns straight from them), so no row is decoded into datums on the way.
    pub fn read_snapshot_encoded(
        &self,
        id: GlobalId,
        upper: Timestamp,
        limits: (usize, usize),
        chunk: &mut dyn FnMut(EncodedChunk) -> Result<(), String>,
    ) -> Result<Result<(), String>, StorageError> {
        let (_, since) = self.check_readable(id, Timestamp(0), upper)?;
        let as_of = upper.0.saturating_sub(1);
        let mut chunks = EncodedChunks::new(limits, chunk);
        let scanned = self.scan_snapshot(id, upper, since, &mut |count, bytes| {
            chunks.push(as_of, count, bytes)
        })?;
        chunks.finish(scanned)
    }

    /// The updates [`Storage::read`] reads, with their rows left encoded (in chunks as
    /// [`Storage::read_snapshot_encoded`] makes them).
    pub fn read_encoded(
        &self,
        id: GlobalId,
        lower: Timestamp,
        upper: Timestamp,
        limits: (usize, usize),
        chunk: &mut dyn FnMut(EncodedChunk) -> Result<(), String>,
    ) -> Result<Result<(), String>, StorageError> {
        self.check_readable(id, lower, upper)?;
        // A connection of its own: WAL readers do not block the writer.
        let connection = open_connection(&self.path)?;
        let transaction = connection.unchecked_transaction()?;
        let mut chunks = EncodedChunks::new(limits, chunk);
        let scanned = scan_updates(
            &transaction,
            id,
            lower.0,
            upper.0,
            &mut |ts, diff, bytes| chunks.push(ts, diff, bytes),
        );
        chunks.finish(scanned)
    }

    /// Calls `each(count, row bytes)` for every row of the contents as of `upper` (every
    /// update with `ts < upper`), consolidated: positive counts only. `since` is the
    /// collection's compaction frontier, as the caller's readability check found it.
    ///
    /// A log without retractions before `upper` is its own consolidation (a row inserted
    /// twice may come twice, with count 1 each) and is streamed as stored, in bounded
    /// memory. Otherwise the consolidated contents in memory are taken (shared pointers,
    /// 40 bytes a row while the snapshot is read) and the changes since `upper` taken back
    /// out of them: sorting the whole log instead ran about seven times slower.
    fn scan_snapshot(
        &self,
        id: GlobalId,
        upper: Timestamp,
        since: u64,
        each: &mut RowVisitor<'_>,
    ) -> Result<Result<(), ScanStop>, StorageError> {
        // History before `since` sits at `since - 1`: a snapshot as of an earlier time
        // would miss it.
        if upper.0 < since {
            return Err(StorageError::Compacted {
                collection: id,
                since,
                lower: upper.0,
            });
        }
        let connection = open_connection(&self.path)?;
        {
            let transaction = connection.unchecked_transaction()?;
            // A part that reaches past `upper` with retractions counts: it may hold
            // them before `upper` (the contents then answer, which is right too).
            let retracted: bool = transaction.query_row(
                "SELECT EXISTS (SELECT 1 FROM parts
                 WHERE collection_id = ?1 AND lower_ts < ?2 AND retractions > 0)",
                params![id.to_string(), to_i64(upper.0)],
                |record| record.get(0),
            )?;
            if !retracted {
                return Ok(scan_updates(
                    &transaction,
                    id,
                    0,
                    upper.0,
                    &mut |_, diff, bytes| each(diff, bytes),
                ));
            }
        }
        // Consolidating the log would sort all of it: take the consolidated contents
        // instead (as of the collection's upper, shared, under the lock), and take back
        // out the changes since `upper`.
        let (contents, contents_upper) = self.read_collection(id, |collection| {
            (take(collection.contents.iter()), collection.upper)
        })?;
        // A read transaction begun after the copy sees every change the contents hold.
        let mut later: HashMap<Vec<u8>, i64> = HashMap::new();
        if contents_upper > upper.0 {
            let transaction = connection.unchecked_transaction()?;
            let scanned = scan_updates(
                &transaction,
                id,
                upper.0,
                contents_upper,
                &mut |_, diff, bytes| {
                    *later.entry(bytes.to_vec()).or_insert(0) += diff;
                    Ok(())
                },
            );
            scan_outcome(scanned)?.map_err(|message| corrupt(id, message))?;
        }
        let stream = || -> Result<(), ScanStop> {
            for (bytes, count) in contents {
                let count = count - later.remove(&*bytes).unwrap_or(0);
                if count > 0 {
                    each(count, &bytes)?;
                }
            }
            // What is left was removed since `upper`: there then, gone from the contents.
            for (bytes, diff) in later {
                if diff < 0 {
                    each(-diff, &bytes)?;
                }
            }
            Ok(())
        };
        Ok(stream())
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

    /// Consolidates every part wholly before `target` into parts at `target - 1`. The
    /// compaction frontier moves first (reads below `target` are refused from then on);
    /// the history is read and consolidated without the writer lock; the new blobs are
    /// stored a few per transaction (garbage until used); then one short transaction
    /// swaps the old parts for the new; the old blobs are freed in slices. Writers wait
    /// for one slice at most, and a crash at any point leaves a log that is correct.
    pub fn compact_collection(&self, id: GlobalId, target: u64) -> Result<(), StorageError> {
        let id_text = id.to_string();
        let width = {
            let writer = self.writer();
            writer.execute(
                "UPDATE collections SET since = max(since, ?2) WHERE id = ?1",
                params![id_text, to_i64(target)],
            )?;
            let mut collections = self.collections_write();
            let collection = collections
                .get_mut(&id)
                .ok_or(StorageError::UnknownCollection(id))?;
            collection.since = collection.since.max(target);
            collection.desc.columns.len()
        };
        // One connection reads both what the history holds and, when it retracts, the
        // history itself.
        let connection = open_connection(&self.path)?;
        if !Self::history_retracts(&connection, id, target)? {
            // Inserts only: nothing would cancel, and every read at or past `since` sees
            // the history the same at any time below it, so consolidating would only
            // copy it, after holding all of it in memory (a freshly loaded table's every
            // row). The log is left as it is until it doubles again.
            if let Some(collection) = self.collections_write().get_mut(&id) {
                collection.updates_after_compaction = collection.log_updates;
            }
            return Ok(());
        }
        let settled_at = target.saturating_sub(1);
        let Some(history) = Self::history(&connection, id, target, settled_at)? else {
            return Ok(());
        };
        let mut part_writer = PartWriter::default();
        for (bytes, net) in &history.net {
            if *net != 0 {
                part_writer.push(settled_at, *net, bytes);
            }
        }
        let outputs = part_writer.finish();
        let mut data_ids = Vec::with_capacity(outputs.len());
        for slice in outputs.chunks(COMPACTION_SLICE_PARTS) {
            let mut writer = self.writer();
            let transaction = writer.transaction_with_behavior(TransactionBehavior::Immediate)?;
            for part in slice {
                data_ids.push(parts::insert_data(&transaction, &part.data)?);
            }
            transaction.commit()?;
            drop(writer);
            self.let_writers_pass();
        }
        if self.swap_parts(id, width, &history.parts, &outputs, &data_ids)? {
            let added: u64 = outputs.iter().map(|p| p.updates).sum();
            let added_bytes: u64 = outputs.iter().map(|p| p.data.len() as u64).sum();
            if let Some(collection) = self.collections_write().get_mut(&id) {
                collection.log_updates =
                    (collection.log_updates + added).saturating_sub(history.updates);
                collection.log_bytes =
                    (collection.log_bytes + added_bytes).saturating_sub(history.bytes);
                collection.updates_after_compaction = collection.log_updates;
            }
        }
        self.collect_garbage()
    }

    /// Replaces the parts `inputs` of `id` by the stored blobs `data_ids` of `outputs`,
    /// in one transaction; `false` (nothing changed) if the collection was dropped or
    /// widened meanwhile, or an input is gone.
    fn swap_parts(
        &self,
        id: GlobalId,
        width: usize,
        inputs: &[i64],
        outputs: &[parts::EncodedPart],
        data_ids: &[i64],
    ) -> Result<bool, StorageError> {
        let mut writer = self.writer();
        let unchanged = self
            .collections_read()
            .get(&id)
            .is_some_and(|c| c.desc.columns.len() == width);
        if !unchanged {
            return Ok(false);
        }
        let transaction = writer.transaction_with_behavior(TransactionBehavior::Immediate)?;
        {
            let mut delete = transaction.prepare_cached("DELETE FROM parts WHERE rowid = ?1")?;
            for rowid in inputs {
                if delete.execute(params![rowid])? != 1 {
                    return Ok(false);
                }
            }
        }
        let id_text = id.to_string();
        for (part, data_id) in outputs.iter().zip(data_ids) {
            parts::insert_part_row(&transaction, &id_text, part, *data_id)?;
        }
        transaction.commit()?;
        Ok(true)
    }

    /// Frees the blobs no part points at, a slice per transaction.
    fn collect_garbage(&self) -> Result<(), StorageError> {
        loop {
            let mut writer = self.writer();
            let transaction = writer.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let deleted = parts::delete_garbage(&transaction, COMPACTION_SLICE_PARTS)?;
            transaction.commit()?;
            drop(writer);
            if deleted < COMPACTION_SLICE_PARTS {
                return Ok(());
            }
            self.let_writers_pass();
        }
    }

    /// Whether the history of `id` wholly before `target` (what compaction would
    /// consolidate) retracts anything.
    fn history_retracts(
        connection: &Connection,
        id: GlobalId,
        target: u64,
    ) -> Result<bool, StorageError> {
        Ok(connection.query_row(
            "SELECT EXISTS (SELECT 1 FROM parts
             WHERE collection_id = ?1 AND max_ts < ?2 AND retractions > 0)",
            params![id.to_string(), to_i64(target)],
            |record| record.get(0),
        )?)
    }

    /// The parts of `id` wholly before `target` and their updates consolidated per
    /// distinct row, read on a connection of the compaction's own (WAL readers neither
    /// take nor wait for the writer lock). `None` when there is nothing to rewrite: no
    /// parts, or one already at `settled_at`.
    fn history(
        connection: &Connection,
        id: GlobalId,
        target: u64,
        settled_at: u64,
    ) -> Result<Option<History>, StorageError> {
        let transaction = connection.unchecked_transaction()?;
        let mut statement = transaction.prepare(
            "SELECT p.rowid, p.lower_ts, d.data FROM parts p JOIN part_data d ON d.id = p.data_id
             WHERE p.collection_id = ?1 AND p.max_ts < ?2",
        )?;
        let mut records = statement.query(params![id.to_string(), to_i64(target)])?;
        let mut history = History::default();
        let mut settled = true;
        while let Some(record) = records.next()? {
            history.parts.push(record.get(0)?);
            settled &= to_u64(record.get(1)?) == settled_at;
            let data = record
                .get_ref(2)?
                .as_blob()
                .map_err(|e| corrupt(id, e.to_string()))?;
            history.bytes += data.len() as u64;
            for update in PartUpdates::new(data) {
                let (_, diff, bytes) = update.map_err(|message| corrupt(id, message))?;
                history.updates += 1;
                match history.net.get_mut(bytes) {
                    Some(net) => *net += diff,
                    None => {
                        history.net.insert(bytes.to_vec(), diff);
                    }
                }
            }
        }
        if history.parts.is_empty() || (history.parts.len() == 1 && settled) {
            return Ok(None);
        }
        Ok(Some(history))
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
