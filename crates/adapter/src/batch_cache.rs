//! Tables' Arrow form for the query engine, kept between queries and brought up to date
//! by what changed rather than converted again.
//!
//! Storage keeps a collection's contents in segments (rows spread by a hash of their
//! encoding), each with the version of its last change, so a query converts only the
//! segments a write touched. A write of more than a few rows touches every segment, so
//! a segment that changed is not converted again either: the cache holds the encoding
//! of each row its batches show, and compares them with the segment's. An encoding is the
//! contents' own allocation, the same for as long as the row stays, so rows are matched by
//! address: rows that left are filtered out of the cached batches, rows that came are
//! decoded and converted, and nothing else is touched. A 1,000-row INSERT into a
//! 1M-row table then costs its next query a filter of the cached batches and the
//! conversion of 1,000 rows, not the conversion of 1M.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use datafusion::arrow::array::BooleanArray;
use datafusion::arrow::compute::{concat_batches, filter_record_batch};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::record_batch::RecordBatch;
use floe_repr::{GlobalId, RelationDesc, Row};
use floe_sql::catalog::QualifiedName;
use floe_storage::{ContentsSegment, Storage};

use crate::error::AdapterError;
use crate::tables::{
    EngineTable, ScanCounts, relation_batch, relation_schema, storage_error, value_error,
};

/// Arrow batches of each table, cached by the contents' version so repeated queries of
/// an unchanged table do not convert it again, and kept per segment of the contents.
#[derive(Default)]
pub struct BatchCache {
    entries: Mutex<HashMap<GlobalId, CachedBatches>>,
    /// Scans of each relation since the server started (kept here because every
    /// query's tables come from here).
    scans: ScanCounts,
}

/// A table's Arrow form.
#[derive(Clone)]
struct CachedBatches {
    /// The contents version `batches` show.
    version: u64,
    schema: SchemaRef,
    /// One per segment of the contents.
    segments: Vec<CachedSegment>,
    /// What the engine gets: every segment's batches, or one batch for a small table.
    batches: Vec<RecordBatch>,
    /// Rows the refresh that made this entry decoded (what it cost, for the tests).
    decoded: usize,
}

/// One segment's Arrow form.
#[derive(Clone)]
struct CachedSegment {
    /// The segment's version the batches show (`u64::MAX` before its first conversion).
    version: u64,
    batches: Vec<CachedBatch>,
}

impl Default for CachedSegment {
    fn default() -> Self {
        CachedSegment {
            version: u64::MAX,
            batches: Vec::new(),
        }
    }
}

/// A batch of a segment and the encoding of each of its rows, in order (a row of
/// multiplicity n, n times): the contents' own allocations, held so that an address
/// cannot be reused by another row while the cache still names it. Kept per batch, so
/// a batch a write does not touch is kept whole, its encodings not copied.
#[derive(Clone)]
struct CachedBatch {
    batch: RecordBatch,
    encodings: Arc<[Arc<[u8]>]>,
}

/// Rows per Arrow batch handed to the engine.
pub(crate) const BATCH_ROWS: usize = 8_192;

/// Batches a segment may hold beyond the fewest its rows need before they are joined
/// again: each write adds a small batch of the rows it brought, and the engine pays per
/// batch.
const EXTRA_BATCHES: usize = 4;

impl BatchCache {
    /// The engine's view of a table's current contents.
    pub fn table(
        &self,
        storage: &Storage,
        id: GlobalId,
        name: &QualifiedName,
        desc: &RelationDesc,
    ) -> Result<EngineTable, AdapterError> {
        let version = storage.contents_version(id).map_err(storage_error)?;
        let schema = relation_schema(desc);
        // The entry is cloned (its segments: shared encodings and batches) only when it
        // is about to be brought up to date; a current one gives just its batches.
        let cached = {
            let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            match entries.get(&id).filter(|cached| cached.schema == schema) {
                Some(cached) if cached.version == version => {
                    return Ok(EngineTable {
                        name: name.clone(),
                        schema,
                        batches: cached.batches.clone(),
                        scans: self.scan_counter(id),
                    });
                }
                Some(cached) => Some(cached.clone()),
                None => None,
            }
        };
        let refreshed = refresh_changed_segments(storage, id, name, desc, schema, cached)?;
        tracing::debug!(table = %name, rows = refreshed.decoded, "rows converted to arrow");
        Ok(self.keep(id, name, refreshed))
    }

    /// The counter of a relation's scans, shared by every engine that reads it.
    pub fn scan_counter(&self, id: GlobalId) -> Arc<AtomicU64> {
        self.scans.counter(id)
    }

    /// The scans of every relation, for the catalog functions.
    pub fn scans(&self) -> ScanCounts {
        self.scans.clone()
    }

    /// Keeps what was just converted for the next query, and gives the engine its view.
    fn keep(&self, id: GlobalId, name: &QualifiedName, converted: CachedBatches) -> EngineTable {
        let table = EngineTable {
            name: name.clone(),
            schema: converted.schema.clone(),
            batches: converted.batches.clone(),
            scans: self.scan_counter(id),
        };
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, converted);
        table
    }

    pub fn forget(&self, id: GlobalId) {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
    }

    /// Forgets a dropped relation: its batches and its scans (a widened one keeps its
    /// scans, as PostgreSQL's statistics survive `ALTER TABLE`).
    pub fn drop_relation(&self, id: GlobalId) {
        self.forget(id);
        self.scans.remove(id);
    }
}

/// `cached` brought up to the current contents: the segments whose version changed are
/// refreshed, the others kept.
fn refresh_changed_segments(
    storage: &Storage,
    id: GlobalId,
    name: &QualifiedName,
    desc: &RelationDesc,
    schema: SchemaRef,
    cached: Option<CachedBatches>,
) -> Result<CachedBatches, AdapterError> {
    let mut segments = match cached {
        Some(cached) => cached.segments,
        None => vec![CachedSegment::default(); floe_storage::SEGMENTS],
    };
    let mut decoded = 0;
    // A segment whose changes do not match what the cache holds (which should not
    // happen) is taken whole on a second pass.
    let mut version = 0;
    for pass in 0..2 {
        let known: Vec<u64> = segments.iter().map(|segment| segment.version).collect();
        let changed;
        (changed, version) = storage
            .changed_segments(id, &known)
            .map_err(storage_error)?;
        let work = changed
            .into_iter()
            .filter_map(|current| {
                let index = current.index;
                let segment = segments.get(index)?.clone();
                Some((index, segment, current))
            })
            .collect();
        let mut mismatched = false;
        for (index, refreshed) in refresh_segments(name, desc, work)? {
            match refreshed {
                Some((refreshed, rows)) => {
                    segments[index] = refreshed;
                    decoded += rows;
                }
                None => {
                    tracing::warn!(table = %name, segment = index, "cached rows did not match the changes; converting the segment whole");
                    segments[index] = CachedSegment::default();
                    mismatched = true;
                }
            }
        }
        if !mismatched {
            break;
        }
        if pass == 1 {
            // Rows taken whole always match: this is a bug, not a table to show wrong.
            return Err(AdapterError::Internal(format!(
                "converting {name}: cached rows did not match the contents"
            )));
        }
    }
    let mut batches: Vec<RecordBatch> = segments
        .iter()
        .flat_map(|segment| segment.batches.iter().map(|cached| cached.batch.clone()))
        .collect();
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    if batches.len() > 1 && rows <= BATCH_ROWS {
        // A small table as one batch: the engine pays per batch.
        batches = vec![concat_batches(&schema, &batches).map_err(|e| arrow_error(name, e))?];
    }
    Ok(CachedBatches {
        version,
        schema,
        segments,
        batches,
        decoded,
    })
}

/// Below this many rows, segments are refreshed on the calling thread: starting threads
/// would cost more than they save.
const PARALLEL_ROWS: usize = 65_536;

/// Each changed segment (index, what the cache holds, what the contents hold) refreshed,
/// with the rows it decoded, on one thread per core when there are many rows: a table's
/// first query after a bulk load converts all of it.
fn refresh_segments(
    name: &QualifiedName,
    desc: &RelationDesc,
    work: Vec<(usize, CachedSegment, ContentsSegment)>,
) -> Result<Vec<(usize, Refreshed)>, AdapterError> {
    let refresh = |(index, segment, current): (usize, CachedSegment, ContentsSegment)| {
        Ok::<_, AdapterError>((index, segment.refreshed(current, name, desc)?))
    };
    // Rows taken whole are matched against what is held; changes only are cheap.
    let rows: usize = work
        .iter()
        .filter(|(_, _, current)| !current.changes_only())
        .map(|(_, segment, current)| segment.rows() + current.distinct_rows())
        .sum();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(work.len());
    if threads <= 1 || rows < PARALLEL_ROWS {
        return work.into_iter().map(refresh).collect();
    }
    let mut shares: Vec<Vec<_>> = (0..threads).map(|_| Vec::new()).collect();
    for (position, item) in work.into_iter().enumerate() {
        shares[position % threads].push(item);
    }
    let refresh = &refresh;
    std::thread::scope(|scope| {
        let handles: Vec<_> = shares
            .into_iter()
            .map(|share| {
                scope.spawn(move || {
                    share
                        .into_iter()
                        .map(refresh)
                        .collect::<Result<Vec<_>, _>>()
                })
            })
            .collect();
        let mut refreshed = Vec::new();
        for handle in handles {
            let share = handle.join().map_err(|_| {
                AdapterError::Internal(format!("converting {name}: a conversion thread panicked"))
            })?;
            refreshed.extend(share?);
        }
        Ok(refreshed)
    })
}

/// A segment brought up to date and the rows that decoded; `None` when the changes
/// storage gave do not match the rows the cache holds (it is then taken whole).
type Refreshed = Option<(CachedSegment, usize)>;

impl CachedSegment {
    /// How many rows the segment's batches hold.
    fn rows(&self) -> usize {
        self.batches
            .iter()
            .map(|cached| cached.encodings.len())
            .sum()
    }

    /// The encodings of every row the batches show, in order.
    fn encodings(&self) -> impl Iterator<Item = &Arc<[u8]>> {
        self.batches
            .iter()
            .flat_map(|cached| cached.encodings.iter())
    }

    /// This segment brought up to `current`, the segment (or its changes) as the
    /// contents hold it now, and how many rows that decoded.
    fn refreshed(
        &self,
        current: ContentsSegment,
        name: &QualifiedName,
        desc: &RelationDesc,
    ) -> Result<Refreshed, AdapterError> {
        let matched = if current.changes_only() {
            match match_changes(self, current.shared_rows()) {
                Some(matched) => matched,
                None => return Ok(None),
            }
        } else {
            match_rows(self, current.shared_rows())
        };
        let Matched { keep, arrived } = matched;
        let mut batches = kept_batches(&self.batches, &keep).map_err(|e| arrow_error(name, e))?;
        let mut arriving: Vec<Arc<[u8]>> = Vec::new();
        for (encoding, count) in arrived {
            for _ in 0..count {
                arriving.push(encoding.clone());
            }
        }
        for chunk in arriving.chunks(BATCH_ROWS) {
            batches.push(CachedBatch {
                batch: converted(&current, desc, chunk)?,
                encodings: chunk.into(),
            });
        }
        let rows: usize = batches.iter().map(|cached| cached.encodings.len()).sum();
        if batches.len() > rows.div_ceil(BATCH_ROWS) + EXTRA_BATCHES {
            batches = rebatched(&batches).map_err(|e| arrow_error(name, e))?;
        }
        let refreshed = CachedSegment {
            version: current.version,
            batches,
        };
        Ok(Some((refreshed, arriving.len())))
    }
}

/// Rows of `segment` (`encodings`) as a batch: read straight from their encodings, or
/// decoded into rows first when a value needs that way (see `encoded_rows_to_batch`).
fn converted(
    segment: &ContentsSegment,
    desc: &RelationDesc,
    encodings: &[Arc<[u8]>],
) -> Result<RecordBatch, AdapterError> {
    let encoded: Vec<&[u8]> = encodings.iter().map(|encoding| &encoding[..]).collect();
    if let Some(batch) = floe_arrow::encoded_rows_to_batch(desc, &encoded) {
        return batch.map_err(value_error);
    }
    let rows = encoded
        .iter()
        .map(|encoding| segment.decode(encoding))
        .collect::<Result<Vec<Row>, _>>()
        .map_err(storage_error)?;
    relation_batch(desc, &rows)
}

/// Which of the rows `held` shows are still among the contents' `current` rows, and
/// which current rows it does not show yet, with how many times. Rows are matched by
/// the address of their encoding; a row whose multiplicity fell keeps its first
/// occurrences, one whose multiplicity rose arrives the difference.
fn match_rows<'a>(held: &CachedSegment, current: &'a [(Arc<[u8]>, i64)]) -> Matched<'a> {
    // Addresses sorted once, then searched: a segment holds thousands of rows, and
    // sorting integers beats hashing them.
    let mut by_address: Vec<(usize, usize)> = current
        .iter()
        .enumerate()
        .filter(|(_, (_, count))| *count > 0)
        .map(|(index, (encoding, _))| (address(encoding), index))
        .collect();
    by_address.sort_unstable();
    let mut unshown: Vec<i64> = current.iter().map(|(_, count)| (*count).max(0)).collect();
    let keep = held
        .encodings()
        .map(|encoding| {
            let Ok(found) = by_address.binary_search_by_key(&address(encoding), |(a, _)| *a) else {
                return false;
            };
            let left = &mut unshown[by_address[found].1];
            *left -= 1;
            *left >= 0
        })
        .collect();
    let arrived = current
        .iter()
        .zip(unshown)
        .filter(|(_, count)| *count > 0)
        .map(|((encoding, _), count)| (encoding, count))
        .collect();
    Matched { keep, arrived }
}

/// What `held` shows after the `changes` made since (encodings with diffs, in the
/// order made): the rows a change retracted are dropped (the first occurrences of
/// their address), the rows added arrive. Nothing is touched beyond the addresses of
/// the held rows, and not even those when nothing was retracted. `None` when a
/// retraction names a row `held` does not show.
fn match_changes<'a>(held: &CachedSegment, changes: &'a [(Arc<[u8]>, i64)]) -> Option<Matched<'a>> {
    // Net change per row, in the order rows were first changed.
    let mut net: HashMap<usize, (usize, i64)> = HashMap::with_capacity(changes.len());
    let mut order: Vec<&'a Arc<[u8]>> = Vec::new();
    for (encoding, diff) in changes {
        let entry = net.entry(address(encoding)).or_insert_with(|| {
            order.push(encoding);
            (order.len() - 1, 0)
        });
        entry.1 += diff;
    }
    let mut retracted: HashMap<usize, i64> = net
        .iter()
        .filter(|(_, (_, diff))| *diff < 0)
        .map(|(address, (_, diff))| (*address, -diff))
        .collect();
    let keep = if retracted.is_empty() {
        vec![true; held.rows()]
    } else {
        held.encodings()
            .map(|encoding| match retracted.get_mut(&address(encoding)) {
                Some(left) if *left > 0 => {
                    *left -= 1;
                    false
                }
                _ => true,
            })
            .collect()
    };
    if retracted.values().any(|left| *left > 0) {
        return None;
    }
    let arrived = order
        .into_iter()
        .filter_map(|encoding| {
            let (_, diff) = net[&address(encoding)];
            (diff > 0).then_some((encoding, diff))
        })
        .collect();
    Some(Matched { keep, arrived })
}

/// What [`match_rows`] and [`match_changes`] find.
struct Matched<'a> {
    /// Per row the batches show: whether it is still in the contents.
    keep: Vec<bool>,
    /// Rows of the contents the batches do not show yet, and how many times.
    arrived: Vec<(&'a Arc<[u8]>, i64)>,
}

/// Where an encoding lives: the identity of a row in the contents.
fn address(encoding: &Arc<[u8]>) -> usize {
    encoding.as_ptr() as usize
}

/// `batches` without the rows `keep` says left (one flag per row, in order): a batch
/// that keeps every row is kept whole.
fn kept_batches(batches: &[CachedBatch], keep: &[bool]) -> Result<Vec<CachedBatch>, ArrowError> {
    let mut kept = Vec::with_capacity(batches.len());
    let mut offset = 0;
    for cached in batches {
        let rows = cached.encodings.len();
        let Some(flags) = keep.get(offset..offset + rows) else {
            return Err(ArrowError::InvalidArgumentError(
                "a cached segment names fewer rows than its batches hold".into(),
            ));
        };
        offset += rows;
        if flags.iter().all(|kept| *kept) {
            kept.push(cached.clone());
        } else if flags.iter().any(|kept| *kept) {
            let encodings: Vec<Arc<[u8]>> = cached
                .encodings
                .iter()
                .zip(flags)
                .filter(|(_, kept)| **kept)
                .map(|(encoding, _)| encoding.clone())
                .collect();
            kept.push(CachedBatch {
                batch: filter_record_batch(&cached.batch, &BooleanArray::from(flags.to_vec()))?,
                encodings: encodings.into(),
            });
        }
    }
    Ok(kept)
}

/// `batches` joined and cut again into batches of [`BATCH_ROWS`] (slices of one joined
/// batch, so its columns are copied once).
fn rebatched(batches: &[CachedBatch]) -> Result<Vec<CachedBatch>, ArrowError> {
    let Some(first) = batches.first() else {
        return Ok(Vec::new());
    };
    let arrays: Vec<RecordBatch> = batches.iter().map(|cached| cached.batch.clone()).collect();
    let joined = concat_batches(&first.batch.schema(), &arrays)?;
    let encodings: Vec<Arc<[u8]>> = batches
        .iter()
        .flat_map(|cached| cached.encodings.iter().cloned())
        .collect();
    if encodings.len() != joined.num_rows() {
        return Err(ArrowError::InvalidArgumentError(
            "a cached segment names another number of rows than its batches hold".into(),
        ));
    }
    Ok((0..joined.num_rows())
        .step_by(BATCH_ROWS)
        .map(|offset| {
            let rows = BATCH_ROWS.min(joined.num_rows() - offset);
            CachedBatch {
                batch: joined.slice(offset, rows),
                encodings: encodings[offset..offset + rows].into(),
            }
        })
        .collect())
}

fn arrow_error(name: &QualifiedName, error: ArrowError) -> AdapterError {
    AdapterError::Internal(format!("converting {name}: {error}"))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use floe_repr::{Datum, GlobalId, RelationDesc, Row, SqlScalarType};
    use floe_sql::catalog::QualifiedName;
    use floe_storage::Storage;

    use super::{BatchCache, match_rows};

    const TABLE: GlobalId = GlobalId::User(1);

    /// A table without a key, so a row can be there more than once.
    fn open() -> (tempfile::TempDir, Arc<Storage>, RelationDesc) {
        let dir = tempfile::tempdir().expect("temporary directory");
        let storage = Storage::open(dir.path()).expect("storage opens");
        let desc = RelationDesc::from_columns(
            &[
                ("id", SqlScalarType::Int64, false),
                ("name", SqlScalarType::Text, true),
            ],
            Vec::new(),
        );
        storage.register(TABLE, desc.clone()).expect("registers");
        (dir, storage, desc)
    }

    fn row(id: i64) -> Row {
        vec![Datum::Int64(id), Datum::Text(format!("row {id}"))]
    }

    fn write(storage: &Arc<Storage>, changes: Vec<(Row, i64)>) {
        storage
            .append(TABLE, changes)
            .expect("append")
            .expect("no key to refuse it");
    }

    fn name() -> QualifiedName {
        QualifiedName {
            database: "materialize".into(),
            schema: "public".into(),
            item: "t".into(),
        }
    }

    /// Rows as their encodings, sorted: a multiset to compare.
    fn sorted(rows: &[Row]) -> Vec<Vec<u8>> {
        let mut encoded: Vec<Vec<u8>> = rows
            .iter()
            .map(|row| {
                let mut bytes = Vec::new();
                floe_repr::codec::encode_row(row, &mut bytes);
                bytes
            })
            .collect();
        encoded.sort();
        encoded
    }

    /// The rows the cache gives the engine, sorted, and how many rows its refresh decoded.
    fn cached(cache: &BatchCache, storage: &Storage, desc: &RelationDesc) -> (Vec<Vec<u8>>, usize) {
        let table = cache.table(storage, TABLE, &name(), desc).expect("table");
        let mut rows = Vec::new();
        for batch in &table.batches {
            rows.extend(floe_arrow::batch_to_rows(batch).expect("rows of a batch"));
        }
        let entries = cache.entries.lock().expect("cache lock");
        (sorted(&rows), entries[&TABLE].decoded)
    }

    /// The contents, each row repeated by its multiplicity.
    fn contents(storage: &Storage) -> Vec<Row> {
        storage.contents(TABLE).expect("contents").0
    }

    #[test]
    fn a_write_to_a_large_table_converts_only_the_rows_it_brought() {
        let (_dir, storage, desc) = open();
        write(&storage, (0..100_000).map(|id| (row(id), 1)).collect());
        let cache = BatchCache::default();
        let (rows, decoded) = cached(&cache, &storage, &desc);
        assert_eq!((rows.len(), decoded), (100_000, 100_000));
        // A thousand rows in, five hundred out, one row twice more: every segment changes.
        let mut changes: Vec<(Row, i64)> = (100_000..101_000).map(|id| (row(id), 1)).collect();
        changes.extend((0..500).map(|id| (row(id * 7), -1)));
        changes.push((row(99_999), 2));
        write(&storage, changes);
        let (rows, decoded) = cached(&cache, &storage, &desc);
        assert_eq!(
            decoded, 1_002,
            "the new rows and the new copies of one, nothing else"
        );
        assert_eq!(rows, sorted(&contents(&storage)));
        // Unchanged contents: nothing decoded, the same rows.
        let (again, _) = cached(&cache, &storage, &desc);
        assert_eq!(again, rows);
    }

    #[test]
    fn random_writes_keep_the_cached_rows_equal_to_the_contents() {
        let (_dir, storage, desc) = open();
        let cache = BatchCache::default();
        // A fixed linear congruential sequence: the same rounds every run.
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move |below: u64| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            (state >> 33) % below
        };
        for round in 0..60 {
            let present = contents(&storage);
            let mut changes = Vec::new();
            // Inserts from a small domain, so rows repeat and multiplicities rise; every
            // tenth round more than a segment remembers, so the segments are taken whole
            // and matched against the rows held, and otherwise their changes.
            let inserts = if round % 10 == 5 { 40_000 } else { next(3_000) };
            for _ in 0..inserts {
                changes.push((row(next(20_000) as i64), 1));
            }
            // Deletes of rows that are there (each at most once per round).
            let mut deleted = std::collections::BTreeSet::new();
            for _ in 0..next(2_000).min(present.len() as u64) {
                let index = next(present.len() as u64) as usize;
                if deleted.insert(index) {
                    changes.push((present[index].clone(), -1));
                }
            }
            write(&storage, changes);
            let (rows, _) = cached(&cache, &storage, &desc);
            assert_eq!(rows, sorted(&contents(&storage)), "round {round}");
        }
        let table = cache.table(&storage, TABLE, &name(), &desc).expect("table");
        let rows: usize = table.batches.iter().map(|batch| batch.num_rows()).sum();
        let fewest =
            floe_storage::SEGMENTS * (1 + super::EXTRA_BATCHES) + rows.div_ceil(super::BATCH_ROWS);
        assert!(
            table.batches.len() <= fewest,
            "60 writes leave {} batches for {rows} rows: small batches are joined again",
            table.batches.len()
        );
    }

    /// A segment showing `encodings` (in one batch without columns: matching looks only
    /// at encodings).
    fn holding(encodings: Vec<Arc<[u8]>>) -> super::CachedSegment {
        use datafusion::arrow::datatypes::Schema;
        use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};
        let batch = RecordBatch::try_new_with_options(
            Arc::new(Schema::empty()),
            vec![],
            &RecordBatchOptions::new().with_row_count(Some(encodings.len())),
        )
        .expect("batch");
        super::CachedSegment {
            version: 1,
            batches: vec![super::CachedBatch {
                batch,
                encodings: encodings.into(),
            }],
        }
    }

    #[test]
    fn changes_drop_the_first_rows_they_retract_and_bring_the_rows_they_add() {
        let a: Arc<[u8]> = Arc::from(&b"a"[..]);
        let b: Arc<[u8]> = Arc::from(&b"b"[..]);
        let c: Arc<[u8]> = Arc::from(&b"c"[..]);
        let held = holding(vec![a.clone(), b.clone(), b.clone()]);
        // b once less, c added then retracted (nothing), a twice more.
        let changes = vec![
            (b.clone(), -1),
            (c.clone(), 1),
            (a.clone(), 1),
            (c.clone(), -1),
            (a.clone(), 1),
        ];
        let super::Matched { keep, arrived } =
            super::match_changes(&held, &changes).expect("changes match");
        assert_eq!(keep, vec![true, false, true]);
        let arrived: Vec<(&[u8], i64)> = arrived
            .into_iter()
            .map(|(encoding, count)| (&encoding[..], count))
            .collect();
        assert_eq!(arrived, vec![(&b"a"[..], 2)]);
        // Inserts only: every row kept without looking.
        let super::Matched { keep, .. } =
            super::match_changes(&held, &[(c.clone(), 1)]).expect("changes match");
        assert_eq!(keep, vec![true; 3]);
        // A retraction of a row the segment does not show, or of more copies than it
        // shows: the segment is taken whole instead.
        assert!(super::match_changes(&held, &[(c.clone(), -1)]).is_none());
        assert!(super::match_changes(&held, &[(a.clone(), -2)]).is_none());
    }

    #[test]
    fn rows_are_matched_by_the_address_of_their_encoding() {
        let a: Arc<[u8]> = Arc::from(&b"a"[..]);
        let b: Arc<[u8]> = Arc::from(&b"b"[..]);
        let c: Arc<[u8]> = Arc::from(&b"c"[..]);
        // An equal encoding at another address is another row: it left and came again.
        let a_again: Arc<[u8]> = Arc::from(&b"a"[..]);
        let held = vec![a.clone(), b.clone(), b.clone(), b.clone(), c.clone()];
        let current = vec![(b.clone(), 2), (a_again.clone(), 1), (c.clone(), 3)];
        let super::Matched { keep, arrived } = match_rows(&holding(held), &current);
        assert_eq!(keep, vec![false, true, true, false, true]);
        let arrived: Vec<(&[u8], i64)> = arrived
            .into_iter()
            .map(|(encoding, count)| (&encoding[..], count))
            .collect();
        assert_eq!(arrived, vec![(&b"a"[..], 1), (&b"c"[..], 2)]);
    }
}
