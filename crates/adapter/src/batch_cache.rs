//! Tables' Arrow form for the query engine, kept between queries and brought up to date
//! by what changed rather than converted again.
//!
//! Storage keeps a collection's contents in segments (rows spread by a hash of their
//! encoding), each with the version of its last change, so a query looks only at the
//! segments a write touched. A write of more than a few rows touches every segment, so
//! a segment that changed is not converted again either: the cache holds the encoding
//! of each row its batches show, and compares them with the segment's. An encoding is the
//! contents' own allocation, the same for as long as the row stays, so rows are matched by
//! address: rows that left are filtered out of the cached batches, rows that came are
//! added, and nothing else is touched. A 1,000-row INSERT into a 1M-row table then costs
//! its next query a filter of the cached batches and the conversion of 1,000 rows, not
//! the conversion of 1M.
//!
//! Columns are converted when a scan first asks for them, not when rows arrive: a query
//! that reads one column of a freshly loaded table converts that column, passing over
//! the others in each encoding, and what it converted stays for the next query.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use datafusion::arrow::array::{ArrayRef, BooleanArray};
use datafusion::arrow::compute::{concat, concat_batches, filter};
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::common::{DataFusionError, Result as DfResult};
use floe_query::error::QueryError;
use floe_query::snapshot::TableBatches;
use floe_repr::{GlobalId, RelationDesc, Row};
use floe_sql::catalog::QualifiedName;
use floe_storage::Storage;

use crate::error::AdapterError;
use crate::tables::{EngineTable, ScanCounts, relation_schema, storage_error};

/// Arrow batches of each table, cached by the contents' version so repeated queries of
/// an unchanged table do not convert it again, and kept per segment of the contents.
#[derive(Default)]
pub struct BatchCache {
    entries: Mutex<HashMap<GlobalId, CachedBatches>>,
    /// Scans of each relation since the server started (kept here because every
    /// query's tables come from here).
    scans: ScanCounts,
    /// Rows converted to Arrow since the server started, a column or several at a time
    /// (what the cache costs, for the tests and the log).
    converted: Arc<AtomicUsize>,
}

/// A table's Arrow form.
#[derive(Clone)]
struct CachedBatches {
    /// The contents version `table` shows.
    version: u64,
    schema: SchemaRef,
    /// One per segment of the contents.
    segments: Vec<CachedSegment>,
    /// What the engine gets: every segment's batches.
    table: Arc<CachedTable>,
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

/// A batch of a segment: the encoding of each of its rows, in order (a row of
/// multiplicity n, n times), and each column's array once a scan asked for it. The
/// encodings are the contents' own allocations, held so that an address cannot be
/// reused by another row while the cache still names it. Kept per batch, so a batch a
/// write does not touch is kept whole, its encodings not copied; its columns are shared
/// by every table handed out since, so a column one query converted is there for the
/// next.
#[derive(Clone)]
struct CachedBatch {
    encodings: Arc<[Arc<[u8]>]>,
    columns: Arc<[OnceLock<ArrayRef>]>,
    /// By column: the display scales of an unconstrained numeric column's
    /// values, read off the encodings when a scan first asks for them.
    scales: Arc<[OnceLock<ArrayRef>]>,
}

impl CachedBatch {
    /// A batch of `encodings` with no column converted yet.
    fn unconverted(encodings: Arc<[Arc<[u8]>]>, columns: usize) -> CachedBatch {
        CachedBatch {
            encodings,
            columns: (0..columns).map(|_| OnceLock::new()).collect(),
            scales: (0..columns).map(|_| OnceLock::new()).collect(),
        }
    }

    /// The display scales of column `column`'s values (see
    /// `floe_query::snapshot::TableBatches::display_scales`).
    fn display_scales(
        &self,
        column: usize,
        data_type: &DataType,
        name: &QualifiedName,
    ) -> DfResult<ArrayRef> {
        if let Some(known) = self.scales.get(column).and_then(OnceLock::get) {
            return Ok(known.clone());
        }
        let mut values = Vec::with_capacity(self.encodings.len());
        for encoding in self.encodings.iter() {
            let mut row = floe_repr::codec::decode_row(encoding).map_err(|e| {
                QueryError::internal(format!("reading {name}: {e}")).into_datafusion()
            })?;
            values.push((column < row.len()).then(|| row.swap_remove(column)));
        }
        let array =
            floe_query::snapshot::stored_scales_of(values.iter().map(Option::as_ref), data_type);
        if let Some(cell) = self.scales.get(column) {
            let _ = cell.set(array.clone());
        }
        Ok(array)
    }

    /// The columns `wanted` of this batch, converted already, with `schema`.
    fn projected(&self, schema: &SchemaRef, wanted: &[usize]) -> DfResult<RecordBatch> {
        let mut arrays = Vec::with_capacity(wanted.len());
        for index in wanted {
            let Some(array) = self.columns.get(*index).and_then(OnceLock::get) else {
                return Err(DataFusionError::Internal(format!(
                    "column {index} of a cached batch was not converted"
                )));
            };
            arrays.push(array.clone());
        }
        Ok(RecordBatch::try_new_with_options(
            schema.clone(),
            arrays,
            &RecordBatchOptions::new().with_row_count(Some(self.encodings.len())),
        )?)
    }

    /// Which of the columns `wanted` this batch has not converted yet, ascending.
    fn missing(&self, wanted: &[usize]) -> Vec<usize> {
        let mut missing: Vec<usize> = wanted
            .iter()
            .copied()
            .filter(|index| {
                self.columns
                    .get(*index)
                    .is_some_and(|cell| cell.get().is_none())
            })
            .collect();
        missing.sort_unstable();
        missing.dedup();
        missing
    }
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
        // is about to be brought up to date; a current one gives just its table.
        let cached = {
            let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            match entries.get(&id).filter(|cached| cached.schema == schema) {
                Some(cached) if cached.version == version => {
                    return Ok(EngineTable {
                        name: name.clone(),
                        schema,
                        batches: cached.table.clone(),
                        scans: self.scan_counter(id),
                    });
                }
                Some(cached) => Some(cached.clone()),
                None => None,
            }
        };
        let refreshed = self.refresh_changed_segments(storage, id, name, desc, schema, cached)?;
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

    /// Keeps what was just brought up to date for the next query, and gives the engine
    /// its view.
    fn keep(&self, id: GlobalId, name: &QualifiedName, refreshed: CachedBatches) -> EngineTable {
        let table = EngineTable {
            name: name.clone(),
            schema: refreshed.schema.clone(),
            batches: refreshed.table.clone(),
            scans: self.scan_counter(id),
        };
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, refreshed);
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

    /// `cached` brought up to the current contents: the segments whose version changed
    /// are refreshed, the others kept.
    fn refresh_changed_segments(
        &self,
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
        let width = desc.columns.len();
        // A segment whose changes do not match what the cache holds (which should not
        // happen) is taken whole on a second pass.
        let mut version = 0;
        for pass in 0..2 {
            let known: Vec<u64> = segments.iter().map(|segment| segment.version).collect();
            let changed;
            (changed, version) = storage
                .changed_segments(id, &known)
                .map_err(storage_error)?;
            let mut mismatched = false;
            for current in changed {
                let index = current.index;
                let Some(segment) = segments.get_mut(index) else {
                    continue;
                };
                match segment.refreshed(current, width) {
                    Some(refreshed) => *segment = refreshed.map_err(|e| arrow_error(name, e))?,
                    None => {
                        tracing::warn!(table = %name, segment = index, "cached rows did not match the changes; taking the segment whole");
                        *segment = CachedSegment::default();
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
        let batches: Vec<CachedBatch> = segments
            .iter()
            .flat_map(|segment| segment.batches.iter().cloned())
            .collect();
        let table = CachedTable {
            name: name.clone(),
            desc: desc.clone(),
            rows: batches.iter().map(|batch| batch.encodings.len()).sum(),
            batches,
            whole: OnceLock::new(),
            scales: Mutex::default(),
            converted: self.converted.clone(),
        };
        Ok(CachedBatches {
            version,
            schema,
            segments,
            table: Arc::new(table),
        })
    }
}

/// A table as the engine reads it from the cache: every segment's batches, whose
/// columns are converted as scans ask for them.
struct CachedTable {
    name: QualifiedName,
    desc: RelationDesc,
    batches: Vec<CachedBatch>,
    rows: usize,
    /// A small table spread over several segments, as one batch of every column, made
    /// at its first scan: the engine pays per batch.
    whole: OnceLock<RecordBatch>,
    /// By unconstrained numeric column: every row's display scale, read off the
    /// stored values at a scan's first need of them.
    scales: Mutex<HashMap<usize, ArrayRef>>,
    /// The cache's count of rows converted.
    converted: Arc<AtomicUsize>,
}

impl std::fmt::Debug for CachedTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedTable")
            .field("name", &self.name)
            .field("rows", &self.rows)
            .field("batches", &self.batches.len())
            .finish()
    }
}

impl TableBatches for CachedTable {
    fn num_rows(&self) -> usize {
        self.rows
    }

    fn batches(
        &self,
        schema: &SchemaRef,
        projection: Option<&[usize]>,
        limit: Option<usize>,
    ) -> DfResult<Vec<RecordBatch>> {
        let every: Vec<usize>;
        let wanted = match projection {
            Some(wanted) => wanted,
            None => {
                every = self.every_column();
                &every
            }
        };
        if self.batches.len() > 1 && self.rows <= BATCH_ROWS {
            return Ok(vec![self.whole(schema)?.project(wanted)?]);
        }
        // A limit needs only the first batches that hold that many rows.
        let mut needed = self.batches.len();
        if let Some(limit) = limit {
            let mut rows = 0;
            if let Some(enough) = self.batches.iter().position(|batch| {
                rows += batch.encodings.len();
                rows >= limit
            }) {
                needed = enough + 1;
            }
        }
        let batches = &self.batches[..needed];
        self.convert(batches, wanted)?;
        let projected = Arc::new(schema.project(wanted)?);
        batches
            .iter()
            .map(|batch| batch.projected(&projected, wanted))
            .collect()
    }

    fn display_scales(&self, column: usize) -> DfResult<Option<ArrayRef>> {
        let mut scales = self.scales.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(known) = scales.get(&column) {
            return Ok(Some(known.clone()));
        }
        let Some((_, column_type)) = self.desc.columns.get(column) else {
            return Ok(None);
        };
        let data_type = floe_arrow::arrow_data_type(&column_type.scalar_type);
        // Each batch keeps its scales across the table's versions (a write
        // changes a segment's batches, not the others').
        let arrays = self
            .batches
            .iter()
            .map(|batch| batch.display_scales(column, &data_type, &self.name))
            .collect::<DfResult<Vec<_>>>()?;
        let parts: Vec<&dyn datafusion::arrow::array::Array> =
            arrays.iter().map(|array| array.as_ref()).collect();
        let array: ArrayRef = if parts.is_empty() {
            floe_query::snapshot::stored_scales_of(std::iter::empty(), &data_type)
        } else {
            concat(&parts)?
        };
        scales.insert(column, array.clone());
        Ok(Some(array))
    }
}

/// Below this many rows to convert, batches are converted on the calling thread:
/// starting threads would cost more than they save.
const PARALLEL_ROWS: usize = 65_536;

impl CachedTable {
    /// The indexes of every column.
    fn every_column(&self) -> Vec<usize> {
        (0..self.desc.columns.len()).collect()
    }

    /// The whole table as one batch of every column.
    fn whole(&self, schema: &SchemaRef) -> DfResult<RecordBatch> {
        if let Some(whole) = self.whole.get() {
            return Ok(whole.clone());
        }
        let every = self.every_column();
        self.convert(&self.batches, &every)?;
        let batches = self
            .batches
            .iter()
            .map(|batch| batch.projected(schema, &every))
            .collect::<DfResult<Vec<_>>>()?;
        let whole = concat_batches(schema, &batches)?;
        Ok(self.whole.get_or_init(|| whole).clone())
    }

    /// Converts the columns `wanted` of `batches` where a batch has not yet, on one
    /// thread per core when there are many rows (a table's first query after a bulk
    /// load converts all of them).
    fn convert(&self, batches: &[CachedBatch], wanted: &[usize]) -> DfResult<()> {
        let work: Vec<(&CachedBatch, Vec<usize>)> = batches
            .iter()
            .map(|batch| (batch, batch.missing(wanted)))
            .filter(|(_, missing)| !missing.is_empty())
            .collect();
        let rows: usize = work.iter().map(|(batch, _)| batch.encodings.len()).sum();
        if rows == 0 {
            return Ok(());
        }
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(work.len());
        let convert =
            |(batch, missing): &(&CachedBatch, Vec<usize>)| self.convert_batch(batch, missing);
        if threads <= 1 || rows < PARALLEL_ROWS {
            work.iter().try_for_each(convert)?;
        } else {
            let convert = &convert;
            let work = &work;
            std::thread::scope(|scope| {
                let handles: Vec<_> = (0..threads)
                    .map(|thread| {
                        scope.spawn(move || {
                            work.iter()
                                .skip(thread)
                                .step_by(threads)
                                .try_for_each(convert)
                        })
                    })
                    .collect();
                for handle in handles {
                    handle.join().map_err(|_| {
                        DataFusionError::Internal(format!(
                            "converting {}: a conversion thread panicked",
                            self.name
                        ))
                    })??;
                }
                Ok::<_, DataFusionError>(())
            })?;
        }
        self.converted.fetch_add(rows, Ordering::Relaxed);
        tracing::debug!(table = %self.name, rows, columns = wanted.len(), "rows converted to arrow");
        Ok(())
    }

    /// Converts the columns `missing` (ascending) of `batch`: read straight from the
    /// encodings, or decoded into rows first when a value needs that way (see
    /// `floe_arrow::encoded_columns`).
    fn convert_batch(&self, batch: &CachedBatch, missing: &[usize]) -> DfResult<()> {
        let encoded: Vec<&[u8]> = batch
            .encodings
            .iter()
            .map(|encoding| &encoding[..])
            .collect();
        let arrays = match floe_arrow::encoded_columns(&self.desc, &encoded, missing) {
            Some(arrays) => arrays,
            None => {
                let rows = encoded
                    .iter()
                    .map(|encoding| floe_repr::codec::decode_row(encoding))
                    .collect::<Result<Vec<Row>, _>>()
                    .map_err(|e| {
                        QueryError::internal(format!("converting {}: {e}", self.name))
                            .into_datafusion()
                    })?;
                floe_arrow::rows_to_columns(&self.desc, &rows, missing)
            }
        }
        .map_err(|e| QueryError::from_value(e).into_datafusion())?;
        for (index, array) in missing.iter().zip(arrays) {
            if let Some(cell) = batch.columns.get(*index) {
                // Another scan may have converted it meanwhile: the same array either way.
                let _ = cell.set(array);
            }
        }
        Ok(())
    }
}

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
    /// contents hold it now, for a table of `width` columns; `None` when the changes
    /// storage gave do not match the rows the cache holds (it is then taken whole).
    fn refreshed(
        &self,
        current: floe_storage::ContentsSegment,
        width: usize,
    ) -> Option<Result<CachedSegment, ArrowError>> {
        let version = current.version;
        if self.batches.is_empty() && !current.changes_only() {
            // Nothing held (a table's first query): every row arrives, moved as it is.
            let rows = current
                .into_shared_rows()
                .into_iter()
                .flat_map(|(encoding, count)| {
                    std::iter::repeat_n(encoding, usize::try_from(count).unwrap_or(0))
                });
            return Some(Ok(CachedSegment {
                version,
                batches: unconverted_batches(rows, width),
            }));
        }
        let Matched { keep, arrived } = if current.changes_only() {
            match_changes(self, current.shared_rows())?
        } else {
            match_rows(self, current.shared_rows())
        };
        let mut batches = match kept_batches(&self.batches, &keep) {
            Ok(batches) => batches,
            Err(error) => return Some(Err(error)),
        };
        let arriving = arrived.into_iter().flat_map(|(encoding, count)| {
            std::iter::repeat_n(encoding, usize::try_from(count).unwrap_or(0)).cloned()
        });
        batches.extend(unconverted_batches(arriving, width));
        let rows: usize = batches.iter().map(|cached| cached.encodings.len()).sum();
        if batches.len() > rows.div_ceil(BATCH_ROWS) + EXTRA_BATCHES {
            batches = match rebatched(&batches, width) {
                Ok(batches) => batches,
                Err(error) => return Some(Err(error)),
            };
        }
        Some(Ok(CachedSegment { version, batches }))
    }
}

/// `rows` (encodings) as batches of [`BATCH_ROWS`] with no column converted.
fn unconverted_batches(rows: impl Iterator<Item = Arc<[u8]>>, width: usize) -> Vec<CachedBatch> {
    let mut batches = Vec::new();
    let mut chunk: Vec<Arc<[u8]>> = Vec::new();
    for encoding in rows {
        if chunk.len() == BATCH_ROWS {
            batches.push(CachedBatch::unconverted(
                std::mem::take(&mut chunk).into(),
                width,
            ));
        }
        chunk.push(encoding);
    }
    if !chunk.is_empty() {
        batches.push(CachedBatch::unconverted(chunk.into(), width));
    }
    batches
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
/// that keeps every row is kept whole, and one that loses some keeps its converted
/// columns filtered.
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
            let mask = BooleanArray::from(flags.to_vec());
            let columns = cached
                .columns
                .iter()
                .map(|column| {
                    let filtered = OnceLock::new();
                    if let Some(array) = column.get() {
                        let _ = filtered.set(filter(array, &mask)?);
                    }
                    Ok(filtered)
                })
                .collect::<Result<Arc<[OnceLock<ArrayRef>]>, ArrowError>>()?;
            let width = columns.len();
            kept.push(CachedBatch {
                encodings: encodings.into(),
                columns,
                scales: (0..width).map(|_| OnceLock::new()).collect(),
            });
        }
    }
    Ok(kept)
}

/// `batches` joined and cut again into batches of [`BATCH_ROWS`]: a column every batch
/// has converted is joined once and sliced, the others are left to convert.
fn rebatched(batches: &[CachedBatch], width: usize) -> Result<Vec<CachedBatch>, ArrowError> {
    let encodings: Vec<Arc<[u8]>> = batches
        .iter()
        .flat_map(|cached| cached.encodings.iter().cloned())
        .collect();
    let mut joined: Vec<Option<ArrayRef>> = Vec::with_capacity(width);
    for index in 0..width {
        let arrays: Option<Vec<&dyn datafusion::arrow::array::Array>> = batches
            .iter()
            .map(|cached| cached.columns.get(index)?.get().map(|array| array.as_ref()))
            .collect();
        joined.push(match arrays {
            Some(arrays) if !arrays.is_empty() => Some(concat(&arrays)?),
            _ => None,
        });
    }
    if joined
        .iter()
        .flatten()
        .any(|array| array.len() != encodings.len())
    {
        return Err(ArrowError::InvalidArgumentError(
            "a cached segment names another number of rows than its batches hold".into(),
        ));
    }
    Ok((0..encodings.len())
        .step_by(BATCH_ROWS)
        .map(|offset| {
            let rows = BATCH_ROWS.min(encodings.len() - offset);
            let columns = joined
                .iter()
                .map(|array| {
                    let cell = OnceLock::new();
                    if let Some(array) = array {
                        let _ = cell.set(array.slice(offset, rows));
                    }
                    cell
                })
                .collect();
            CachedBatch {
                encodings: encodings[offset..offset + rows].into(),
                columns,
                scales: (0..width).map(|_| OnceLock::new()).collect(),
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

    use std::sync::atomic::Ordering;

    use datafusion::arrow::record_batch::RecordBatch;

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

    /// Every column of the table the cache gives the engine, as batches.
    fn scanned(cache: &BatchCache, storage: &Storage, desc: &RelationDesc) -> Vec<RecordBatch> {
        let table = cache.table(storage, TABLE, &name(), desc).expect("table");
        table
            .batches
            .batches(&table.schema, None, None)
            .expect("batches")
    }

    /// The rows the cache gives the engine, sorted, and how many rows that converted.
    fn cached(cache: &BatchCache, storage: &Storage, desc: &RelationDesc) -> (Vec<Vec<u8>>, usize) {
        let before = cache.converted.load(Ordering::Relaxed);
        let mut rows = Vec::new();
        for batch in scanned(cache, storage, desc) {
            rows.extend(floe_arrow::batch_to_rows(&batch).expect("rows of a batch"));
        }
        let converted = cache.converted.load(Ordering::Relaxed) - before;
        (sorted(&rows), converted)
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
    fn a_scan_converts_the_columns_it_reads_once() {
        let (_dir, storage, desc) = open();
        write(&storage, (0..100_000).map(|id| (row(id), 1)).collect());
        let cache = BatchCache::default();
        let table = cache.table(&storage, TABLE, &name(), &desc).expect("table");
        let scan = |projection: &[usize], limit: Option<usize>| {
            let before = cache.converted.load(Ordering::Relaxed);
            let batches = table
                .batches
                .batches(&table.schema, Some(projection), limit)
                .expect("batches");
            let converted = cache.converted.load(Ordering::Relaxed) - before;
            (batches, converted)
        };
        // The names alone: every row converted once, one column of it.
        let (batches, converted) = scan(&[1], None);
        assert_eq!(converted, 100_000);
        let mut names: Vec<String> = batches
            .iter()
            .flat_map(|batch| floe_arrow::batch_to_rows(batch).expect("rows"))
            .map(|row| match &row[..] {
                [Datum::Text(name)] => name.clone(),
                other => panic!("one text column, not {other:?}"),
            })
            .collect();
        names.sort();
        let mut expected: Vec<String> = (0..100_000).map(|id| format!("row {id}")).collect();
        expected.sort();
        assert_eq!(names, expected);
        // Again: nothing converted. Both columns, in another order: the ids only.
        assert_eq!(scan(&[1], None).1, 0);
        let (batches, converted) = scan(&[1, 0], None);
        assert_eq!(converted, 100_000);
        assert_eq!(batches[0].schema().field(0).name(), "name");
        // A limit converts the batches that hold that many rows, not the table.
        let fresh = BatchCache::default();
        let table = fresh.table(&storage, TABLE, &name(), &desc).expect("table");
        let limited = table
            .batches
            .batches(&table.schema, Some(&[0, 1]), Some(10))
            .expect("batches");
        assert!(limited.iter().map(RecordBatch::num_rows).sum::<usize>() >= 10);
        let converted = fresh.converted.load(Ordering::Relaxed);
        assert!(
            converted > 0 && converted <= super::BATCH_ROWS,
            "a limit of 10 converted {converted} rows"
        );
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
        let batches = scanned(&cache, &storage, &desc);
        let rows: usize = batches.iter().map(|batch| batch.num_rows()).sum();
        let fewest =
            floe_storage::SEGMENTS * (1 + super::EXTRA_BATCHES) + rows.div_ceil(super::BATCH_ROWS);
        assert!(
            batches.len() <= fewest,
            "60 writes leave {} batches for {rows} rows: small batches are joined again",
            batches.len()
        );
    }

    /// A segment showing `encodings` (in one batch without columns: matching looks only
    /// at encodings).
    fn holding(encodings: Vec<Arc<[u8]>>) -> super::CachedSegment {
        super::CachedSegment {
            version: 1,
            batches: vec![super::CachedBatch::unconverted(encodings.into(), 0)],
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
