//! How a sink turns a batch of changes into Iceberg files: one [`EnvelopeHandler`] per
//! envelope (APPEND, UPSERT), so the state machine never looks at which one it runs.
//!
//! Every handler writes through [`RowBatch`]es bounded by rows and bytes, so no input
//! (a change of multiplicity 10^8, a row of a gigabyte of text) can hold more than a batch
//! in memory or overflow an Arrow offset buffer.

use std::sync::Arc;

use async_trait::async_trait;
use floe_repr::{Datum, Timestamp};
use iceberg::spec::SchemaRef;

use crate::columns::ColumnBatches;
use crate::consolidate::KeyConsolidation;
use crate::consolidate_columns::{ColumnConsolidation, ConsolidatedColumns};
use crate::equality::{EqualityDeletes, live_data_specs};
use crate::error::SinkError;
use crate::input::{BuiltColumns, ColumnStream, SinkInput, UpdateStream};
use crate::partition::{Fanout, MakeWriter, Partitioning};
use crate::position::{
    DeleteFiles, KeyOutcome, PositionBatchWriter, PositionDeletes, StagedPositions,
};
use crate::sink::{DeleteMode, Envelope, SinkSettings};
use crate::table::LoadedTable;
use crate::types::{DIFF_COLUMN, TIMESTAMP_COLUMN, row_bytes};
use crate::writer::{FileContent, FileWriter, PipelinedWriter};

/// A batch written to files, not yet committed.
pub(crate) struct StagedBatch {
    pub lower: Timestamp,
    pub upper: Timestamp,
    /// The partition spec the data files were written with (delete files of position
    /// deletes carry the spec of the data files they point into).
    pub spec_id: i32,
    pub data: Vec<iceberg::spec::DataFile>,
    pub deletes: Vec<iceberg::spec::DataFile>,
    /// The spec of each file not of `spec_id`, by path (see `RowDelta::file_specs`).
    pub file_specs: std::collections::BTreeMap<String, i32>,
    /// Rows written (data and delete rows).
    pub messages: u64,
    pub bytes: u64,
    /// In `DELETE MODE = 'position'`: what the key index needs once the batch is
    /// committed.
    pub positions: Option<StagedPositions>,
}

impl StagedBatch {
    /// A batch of `[lower, upper)` written as `data` and `deletes` files.
    fn written(
        cx: &StageContext<'_>,
        (lower, upper): (Timestamp, Timestamp),
        data: Vec<iceberg::spec::DataFile>,
        deletes: Vec<iceberg::spec::DataFile>,
        messages: u64,
    ) -> StagedBatch {
        let bytes = data
            .iter()
            .chain(&deletes)
            .map(|f| f.file_size_in_bytes())
            .sum();
        StagedBatch {
            lower,
            upper,
            spec_id: cx.spec_id,
            data,
            deletes,
            file_specs: Default::default(),
            messages,
            bytes,
            positions: None,
        }
    }
}

/// What a handler needs to write one batch.
pub(crate) struct StageContext<'a> {
    pub table: &'a LoadedTable,
    /// The table's schema (field ids from the catalog).
    pub schema: &'a SchemaRef,
    /// The partition spec new files are written with (see `writer::writing_partition_spec`).
    pub spec_id: i32,
    /// How rows are partitioned under that spec (`None`: unpartitioned).
    pub partitioning: Option<Arc<Partitioning>>,
    pub input: &'a Arc<dyn SinkInput>,
    pub settings: &'a SinkSettings,
    pub commit_interval_ms: u64,
    /// Unique name prefix of this batch's files.
    pub file_prefix: String,
    /// The batch replaces the table's contents (a sink taking over a dropped sink's
    /// table): nothing it holds needs deleting.
    pub replaces_contents: bool,
}

impl StageContext<'_> {
    /// The input's snapshot at `upper`, read in chunks of the configured size: where
    /// every envelope starts a sink.
    async fn snapshot(&self, upper: Timestamp) -> Result<UpdateStream, SinkError> {
        self.input
            .snapshot(upper, self.settings.read_chunk_rows)
            .await
    }

    /// Writes the rows `read` reads as data files of the table's schema (APPEND's when
    /// `append`), from rows in columns, up to the batch's `cut`, when the input gives
    /// them so and the table's types are floe's own (see [`crate::columns`]): the data
    /// files and the rows written; `None` when they must be read as rows.
    ///
    /// The columns are built and written by one writer per core, each writing files of
    /// its own: the reader only reads, so a large batch is not one thread's work.
    async fn write_from_columns(
        &self,
        read: ColumnRead,
        suffix: &str,
        append: bool,
        cut: &mut BatchCut,
    ) -> Result<Option<(Vec<iceberg::spec::DataFile>, u64)>, SinkError> {
        let limits = self.limits();
        let arrow_schema = self.arrow_schema()?;
        let Some(batches) = ColumnBatches::new(&arrow_schema, self.input.desc(), append, limits)
        else {
            return Ok(None);
        };
        let (chunk_rows, input) = (self.settings.read_chunk_rows, &self.input);
        let columns = match read {
            ColumnRead::Snapshot(upper) => {
                input
                    .snapshot_columns(upper, chunk_rows, limits.bytes)
                    .await?
            }
            ColumnRead::Changes(lower, upper) => {
                input
                    .read_columns(lower, upper, chunk_rows, limits.bytes)
                    .await?
            }
        };
        let Some(columns) = columns else {
            return Ok(None);
        };
        let mut writers = self.data_writers(column_writers(), suffix)?;
        write_columns(columns, &batches, &mut writers, cut).await?;
        let (files, rows) = close_all(writers).await?;
        let table = self.table.metadata.location();
        if let ColumnRead::Snapshot(_) = read {
            // Once per sink: which way its snapshot went.
            let files = files.len();
            tracing::info!(%table, rows, files, "a new sink's snapshot written from columns");
        } else {
            tracing::debug!(%table, rows, files = files.len(), "changes written from columns");
        }
        Ok(Some((files, rows)))
    }

    fn writer(
        &self,
        schema: SchemaRef,
        content: FileContent,
        suffix: &str,
    ) -> Result<PipelinedWriter, SinkError> {
        self.writer_with_spec(
            schema,
            content,
            suffix,
            (self.spec_id, self.partitioning.clone()),
        )
    }

    /// How many data writers a batch of `rows` final rows gets: many rows are encoded by
    /// one writer per core, in turn; few by one, so that they make one file.
    fn writers_for(&self, rows: usize) -> usize {
        if rows >= self.settings.spread_rows {
            column_writers()
        } else {
            1
        }
    }

    /// `count` writers of data files, each naming its files apart: batches handed to them
    /// in turn are encoded on as many cores.
    fn data_writers(&self, count: usize, suffix: &str) -> Result<Vec<PipelinedWriter>, SinkError> {
        (0..count.max(1))
            .map(|n| {
                let suffix = match n {
                    0 => suffix.to_string(),
                    n => format!("{suffix}-w{n}"),
                };
                self.writer(self.schema.clone(), FileContent::Data, &suffix)
            })
            .collect()
    }

    /// A writer of files of spec `spec_id`, partitioned by `partitioning`.
    pub(crate) fn writer_with_spec(
        &self,
        schema: SchemaRef,
        content: FileContent,
        suffix: &str,
        (spec_id, partitioning): (i32, Option<Arc<Partitioning>>),
    ) -> Result<PipelinedWriter, SinkError> {
        let arrow_schema = Arc::new(iceberg::arrow::schema_to_arrow_schema(&schema).map_err(
            |err| SinkError::internal(format!("cannot convert the schema to Arrow: {err}")),
        )?);
        let table = self.table.clone();
        let prefix = format!("{}{suffix}", self.file_prefix);
        let target_file_size = self.settings.target_file_size;
        // One writer per partition (see `Fanout`), each naming its files apart.
        let make: MakeWriter = Box::new(move |made, key| {
            let prefix = match made {
                0 => prefix.clone(),
                n => format!("{prefix}-{n}"),
            };
            let writer = FileWriter::new(
                &table,
                schema.clone(),
                content.clone(),
                spec_id,
                prefix,
                target_file_size,
            )?;
            Ok(match key {
                Some(key) => writer.in_partition(key),
                None => writer,
            })
        });
        Ok(PipelinedWriter::spawn(
            Fanout::new(make, partitioning.clone()),
            arrow_schema,
            partitioning,
        ))
    }

    pub(crate) fn limits(&self) -> BatchLimits {
        BatchLimits {
            rows: self.settings.write_batch_rows.max(1),
            bytes: self.settings.write_batch_bytes.max(1),
        }
    }

    /// The table's schema in Arrow: what batches written from columns are made of.
    fn arrow_schema(&self) -> Result<arrow_schema::SchemaRef, SinkError> {
        let schema = iceberg::arrow::schema_to_arrow_schema(self.schema).map_err(|err| {
            SinkError::internal(format!("cannot convert the schema to Arrow: {err}"))
        })?;
        Ok(Arc::new(schema))
    }

    /// The cut of a batch of changes ending at `upper` at the latest.
    fn cut(&self, upper: Timestamp) -> BatchCut {
        BatchCut::new(self.settings.max_batch_rows, self.commit_interval_ms, upper)
    }

    fn columns(&self) -> usize {
        self.input.desc().columns.len()
    }
}

/// How one envelope stages batches. Handlers may work ahead (UPSERT consolidates the next
/// batch while the current one commits); [`EnvelopeHandler::reset`] drops that work.
#[async_trait]
pub(crate) trait EnvelopeHandler: Send {
    /// A new sink's first batch: the relation's snapshot as of `upper`, taken whole.
    async fn stage_snapshot(
        &mut self,
        cx: &StageContext<'_>,
        upper: Timestamp,
    ) -> Result<StagedBatch, SinkError>;

    /// The changes from `lower` up to `upper`, or to the batch's size cut (see
    /// [`BatchCut`]): the batch's upper says which.
    async fn stage_changes(
        &mut self,
        cx: &StageContext<'_>,
        lower: Timestamp,
        upper: Timestamp,
    ) -> Result<StagedBatch, SinkError>;

    /// Forgets work done ahead: the sink continues from another frontier.
    fn reset(&mut self) {}

    /// `batch` is committed and `table` is the table afterwards; `ours` says whether its
    /// head is a snapshot this sink made of the batch (not another instance's).
    fn committed(
        &mut self,
        _batch: &mut StagedBatch,
        _table: &LoadedTable,
        _ours: bool,
    ) -> Result<(), SinkError> {
        Ok(())
    }
}

/// The columns a table of `envelope` holds besides the relation's.
pub fn extra_columns(envelope: Envelope) -> &'static [&'static str] {
    match envelope {
        Envelope::Append => &[DIFF_COLUMN, TIMESTAMP_COLUMN],
        Envelope::Upsert => &[],
    }
}

/// The handler of `envelope`. UPSERT needs the key: its columns' indexes in the relation,
/// their field ids and the key's schema (the projection equality deletes are written in).
pub(crate) fn handler(
    envelope: Envelope,
    delete_mode: DeleteMode,
    key: Option<UpsertKey>,
    rewrites: &crate::maintenance::RewriteLog,
) -> Result<Box<dyn EnvelopeHandler>, SinkError> {
    Ok(match (envelope, key) {
        (Envelope::Upsert, Some(key)) => Box::new(UpsertEnvelope {
            positions: match delete_mode {
                DeleteMode::Equality => None,
                DeleteMode::Position => Some(PositionDeletes::new(
                    &key.schema,
                    key.field_ids.clone(),
                    rewrites.clone(),
                )?),
            },
            key,
            next_batch: None,
        }),
        // Without a key an UPSERT sink is refused before a handler is made.
        _ => Box::new(AppendEnvelope),
    })
}

// -------------------------------------------------------------------------------------
// Batches of rows bounded by rows and bytes.

/// How large one Arrow batch may grow.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BatchLimits {
    pub rows: usize,
    /// About this many bytes of values: well below the 2 GiB an Arrow offset buffer of
    /// 32-bit offsets can address.
    pub bytes: usize,
}

impl BatchLimits {
    /// How many more rows of `row_bytes` bytes fit in a batch holding `rows` rows and
    /// `bytes` bytes; an empty batch takes at least one row, however large.
    pub fn room(&self, rows: usize, bytes: usize, row_bytes: usize) -> usize {
        let by_rows = self.rows.saturating_sub(rows);
        let by_bytes = self.bytes.saturating_sub(bytes) / row_bytes.max(1);
        let room = by_rows.min(by_bytes);
        if rows == 0 { room.max(1) } else { room }
    }
}

/// Rows (borrowed) gathered for one Arrow batch, each repeated some number of times, with
/// extra trailing values per row (APPEND's `_mz_diff`, `_mz_timestamp`).
pub(crate) struct RowBatch<'a> {
    /// Each row's values, its extra values, and how many copies of it the batch holds.
    runs: Vec<(&'a [Datum], [Datum; 2], usize)>,
    rows: usize,
    bytes: usize,
    limits: BatchLimits,
}

impl<'a> RowBatch<'a> {
    pub(crate) fn new(limits: BatchLimits) -> RowBatch<'a> {
        RowBatch {
            runs: Vec::new(),
            rows: 0,
            bytes: 0,
            limits,
        }
    }

    /// Adds up to `copies` copies of `row` (of `bytes` bytes); returns how many fit.
    pub(crate) fn add(
        &mut self,
        row: &'a [Datum],
        extra: [Datum; 2],
        copies: u64,
        bytes: usize,
    ) -> u64 {
        let room = self.limits.room(self.rows, self.bytes, bytes);
        let taken = copies.min(room as u64);
        if taken > 0 {
            // `taken` is at most `room`, a usize.
            let taken_rows = taken as usize;
            self.runs.push((row, extra, taken_rows));
            self.rows += taken_rows;
            self.bytes = self.bytes.saturating_add(bytes.saturating_mul(taken_rows));
        }
        taken
    }

    /// Converts the batch (the columns `projection` of each row, then `extras` of the
    /// extra values) and hands it to `writer`; the batch is empty afterwards.
    pub(crate) async fn flush(
        &mut self,
        writer: &mut PipelinedWriter,
        projection: &[usize],
        extras: usize,
    ) -> Result<(), SinkError> {
        if self.rows == 0 {
            return Ok(());
        }
        let mut columns: Vec<Vec<&Datum>> = (0..projection.len() + extras)
            .map(|_| Vec::with_capacity(self.rows))
            .collect();
        for (row, extra, copies) in &self.runs {
            for (column, index) in columns.iter_mut().zip(projection) {
                let datum = row.get(*index).unwrap_or(&Datum::Null);
                column.extend(std::iter::repeat_n(datum, *copies));
            }
            for (column, datum) in columns[projection.len()..].iter_mut().zip(extra) {
                column.extend(std::iter::repeat_n(datum, *copies));
            }
        }
        // A partitioned writer takes each row's partition sources: positions in the row
        // as given (a delete's full row), then in its extra values (APPEND's own columns).
        let sources = writer.partition_sources().map(|positions| {
            positions
                .iter()
                .map(|position| {
                    let mut column = Vec::with_capacity(self.rows);
                    for (row, extra, copies) in &self.runs {
                        let datum = row
                            .get(*position)
                            .or_else(|| extra.get(position.wrapping_sub(row.len())))
                            .unwrap_or(&Datum::Null);
                        column.extend(std::iter::repeat_n(datum, *copies));
                    }
                    column
                })
                .collect()
        });
        let rows = self.rows;
        let result = writer.write(columns, sources, rows).await;
        self.runs.clear();
        self.rows = 0;
        self.bytes = 0;
        result
    }
}

/// A row's values are all of it: nothing is added.
pub(crate) const NO_EXTRA: [Datum; 2] = [Datum::Null, Datum::Null];

// -------------------------------------------------------------------------------------
// APPEND.

/// APPEND: every change becomes `|diff|` rows with `_mz_diff` (+1 / -1) and
/// `_mz_timestamp`, streamed chunk by chunk into rolling data files; a change of any
/// multiplicity is written in pieces of a batch each.
struct AppendEnvelope;

#[async_trait]
impl EnvelopeHandler for AppendEnvelope {
    async fn stage_snapshot(
        &mut self,
        cx: &StageContext<'_>,
        upper: Timestamp,
    ) -> Result<StagedBatch, SinkError> {
        let read = ColumnRead::Snapshot(upper);
        let mut cut = BatchCut::none(upper);
        if let Some((data, rows)) = cx.write_from_columns(read, "", true, &mut cut).await? {
            let range = (Timestamp(0), upper);
            return Ok(StagedBatch::written(cx, range, data, Vec::new(), rows));
        }
        let writer = cx.writer(cx.schema.clone(), FileContent::Data, "")?;
        let mut snapshot = cx.snapshot(upper).await?;
        append_stream(
            cx,
            writer,
            &mut snapshot,
            Timestamp(0),
            BatchCut::none(upper),
        )
        .await
    }

    async fn stage_changes(
        &mut self,
        cx: &StageContext<'_>,
        lower: Timestamp,
        upper: Timestamp,
    ) -> Result<StagedBatch, SinkError> {
        let read = ColumnRead::Changes(lower, upper);
        let mut cut = cx.cut(upper);
        if let Some((data, rows)) = cx.write_from_columns(read, "", true, &mut cut).await? {
            let range = (lower, cut.upper());
            return Ok(StagedBatch::written(cx, range, data, Vec::new(), rows));
        }
        let mut changes = cx
            .input
            .read(lower, upper, cx.settings.read_chunk_rows)
            .await?;
        let writer = cx.writer(cx.schema.clone(), FileContent::Data, "")?;
        append_stream(cx, writer, &mut changes, lower, cut).await
    }
}

/// What rows in columns are read.
#[derive(Debug, Clone, Copy)]
enum ColumnRead {
    /// The snapshot as of this upper.
    Snapshot(Timestamp),
    /// The changes from the lower to the upper.
    Changes(Timestamp, Timestamp),
}

/// How many writers write rows read in columns: one per core, as many as four. Found
/// once: the core count is read from the cgroup's files, and a sink asks every batch.
fn column_writers() -> usize {
    static WRITERS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *WRITERS
        .get_or_init(|| std::thread::available_parallelism().map_or(1, |cores| cores.get().min(4)))
}

/// Closes `writers`: the files they wrote, and how many rows.
async fn close_all(
    writers: Vec<PipelinedWriter>,
) -> Result<(Vec<iceberg::spec::DataFile>, u64), SinkError> {
    let rows = writers.iter().map(PipelinedWriter::rows).sum();
    let closed =
        futures::future::try_join_all(writers.into_iter().map(PipelinedWriter::close)).await?;
    Ok((closed.into_iter().flatten().collect(), rows))
}

/// Writes rows read in columns, up to the batch's `cut`: each chunk's columns are built
/// on a blocking thread, as many at once as there are writers, and its batches go to the
/// writers in turn.
async fn write_columns(
    columns: ColumnStream,
    batches: &ColumnBatches,
    writers: &mut [PipelinedWriter],
    cut: &mut BatchCut,
) -> Result<(), SinkError> {
    let mut chunks = BuiltChunks::new(columns, writers.len());
    let mut turn = 0;
    while let Some(built) = chunks.next(cut).await? {
        let writer = &mut writers[turn % writers.len()];
        for batch in batches.batches(built) {
            writer.write_batch(batch?).await?;
        }
        turn += 1;
    }
    Ok(())
}

/// The chunks of a read in columns, built: each on a blocking thread, `parallel` at once,
/// taken in order (so a batch's cut sees times in order) and cut at the batch's end.
struct BuiltChunks {
    columns: ColumnStream,
    building:
        futures::stream::FuturesOrdered<tokio::task::JoinHandle<Result<BuiltColumns, SinkError>>>,
    parallel: usize,
    read_all: bool,
    /// The cut ended the batch: no chunk comes after the one it ended in.
    ended: bool,
}

impl BuiltChunks {
    fn new(columns: ColumnStream, parallel: usize) -> BuiltChunks {
        BuiltChunks {
            columns,
            building: futures::stream::FuturesOrdered::new(),
            parallel: parallel.max(1),
            read_all: false,
            ended: false,
        }
    }

    /// The next chunk's rows up to `cut` (the first row it does not admit ends the
    /// batch); `None` at the end of the read or of the batch. Dropping this stops the
    /// reader, and chunks built ahead are dropped.
    async fn next(&mut self, cut: &mut BatchCut) -> Result<Option<BuiltColumns>, SinkError> {
        if self.ended {
            return Ok(None);
        }
        while !self.read_all && self.building.len() < self.parallel {
            match self.columns.next().await? {
                Some(chunk) => self
                    .building
                    .push_back(tokio::task::spawn_blocking(|| chunk.build())),
                None => self.read_all = true,
            }
        }
        let Some(built) = futures::StreamExt::next(&mut self.building).await else {
            return Ok(None);
        };
        let mut built = built.map_err(|err| {
            SinkError::internal(format!("building rows' columns failed: {err}"))
        })??;
        let mut admitted = 0;
        for ts in &built.times {
            if !cut.admit(*ts)? {
                break;
            }
            admitted += 1;
        }
        if admitted < built.rows {
            self.ended = true;
            built.truncate(admitted);
        }
        Ok(Some(built))
    }
}

async fn append_stream(
    cx: &StageContext<'_>,
    mut writer: PipelinedWriter,
    input: &mut UpdateStream,
    lower: Timestamp,
    mut cut: BatchCut,
) -> Result<StagedBatch, SinkError> {
    let projection: Vec<usize> = (0..cx.columns()).collect();
    'read: while let Some(chunk) = input.next().await? {
        let mut batch = RowBatch::new(cx.limits());
        let mut ended = false;
        for update in &chunk {
            if !cut.admit(update.ts)? {
                ended = true;
                break;
            }
            let diff = Datum::Int32(if update.diff > 0 { 1 } else { -1 });
            let ts = Datum::Int64(i64::try_from(update.ts.0).unwrap_or(i64::MAX));
            // Two extra columns of 4 and 8 bytes.
            let bytes = row_bytes(&update.row) + 12;
            let mut remaining = update.diff.unsigned_abs();
            while remaining > 0 {
                let taken = batch.add(&update.row, [diff.clone(), ts.clone()], remaining, bytes);
                remaining -= taken;
                if remaining > 0 {
                    batch.flush(&mut writer, &projection, 2).await?;
                }
            }
        }
        batch.flush(&mut writer, &projection, 2).await?;
        if ended {
            break 'read;
        }
    }
    let messages = writer.rows();
    let data = writer.close().await?;
    Ok(StagedBatch::written(
        cx,
        (lower, cut.upper()),
        data,
        Vec::new(),
        messages,
    ))
}

// -------------------------------------------------------------------------------------
// UPSERT.

/// The key of an UPSERT sink.
#[derive(Clone)]
pub(crate) struct UpsertKey {
    /// The key columns' indexes in the relation.
    pub indexes: Vec<usize>,
    /// Their field ids in the table: the equality delete ids.
    pub field_ids: Vec<i32>,
    /// The projection of the table's schema on the key columns.
    pub schema: SchemaRef,
    /// Whether the relation itself guarantees the key unique (a unique key of the relation
    /// lies within it), so a consolidated snapshot holds one row per key.
    pub unique_in_relation: bool,
}

/// UPSERT: a batch is consolidated per key; every key it touches gets an equality delete
/// (when the table may hold rows), or in position mode a position delete of its current
/// row, and its final value, if any, one data row.
struct UpsertEnvelope {
    key: UpsertKey,
    /// The key index of `DELETE MODE = 'position'`; `None` for equality deletes.
    positions: Option<PositionDeletes>,
    /// The next batch, consolidated ahead while catching up.
    next_batch: Option<NextBatch>,
}

#[async_trait]
impl EnvelopeHandler for UpsertEnvelope {
    async fn stage_snapshot(
        &mut self,
        cx: &StageContext<'_>,
        upper: Timestamp,
    ) -> Result<StagedBatch, SinkError> {
        if self.positions.is_some() && self.key.unique_in_relation {
            if let Some(staged) = self.stage_position_snapshot_from_columns(cx, upper).await? {
                return Ok(staged);
            }
            let snapshot = cx.snapshot(upper).await?;
            return self.stage_position_snapshot(cx, upper, snapshot).await;
        }
        if !self.key.unique_in_relation {
            let mut snapshot = cx.snapshot(upper).await?;
            // A key the relation does not enforce (`NOT ENFORCED`) may come with several
            // rows: consolidate per key so that the table gets one row per key.
            let mut consolidation = KeyConsolidation::new(&self.key.indexes);
            while let Some(chunk) = snapshot.next().await? {
                for update in chunk {
                    consolidation.add(update);
                }
            }
            let staged = self
                .write_consolidated(cx, Timestamp(0), upper, &consolidation)
                .await;
            tokio::task::spawn_blocking(move || drop(consolidation));
            return staged;
        }
        // A consolidated snapshot holds one row per key: it streams into data files.
        let delete_specs = live_data_specs(cx.table).await?;
        if delete_specs.is_empty()
            // Nothing to delete in a table without rows: the rows may come in columns.
            && let Some((data, rows)) = cx
                .write_from_columns(
                    ColumnRead::Snapshot(upper),
                    "-data",
                    false,
                    &mut BatchCut::none(upper),
                )
                .await?
        {
            let range = (Timestamp(0), upper);
            return Ok(StagedBatch::written(cx, range, data, Vec::new(), rows));
        }
        let mut data_writer = cx.writer(cx.schema.clone(), FileContent::Data, "-data")?;
        let mut snapshot = cx.snapshot(upper).await?;
        let all_columns: Vec<usize> = (0..cx.columns()).collect();
        let mut delete_files = Vec::new();
        let mut file_specs = std::collections::BTreeMap::new();
        let mut delete_rows = 0;
        while let Some(chunk) = snapshot.next().await? {
            let mut data = RowBatch::new(cx.limits());
            // Per chunk (its rows are borrowed): the deletes of a snapshot are rare (a
            // table taken over holds rows), so a few more files are of no concern.
            let mut deletes = self.deletes(cx, &delete_specs)?;
            for update in chunk.iter().filter(|update| update.diff > 0) {
                let bytes = row_bytes(&update.row);
                deletes.delete_row(&update.row).await?;
                add_row(
                    &mut data,
                    &mut data_writer,
                    &all_columns,
                    &update.row,
                    bytes,
                )
                .await?;
            }
            data.flush(&mut data_writer, &all_columns, 0).await?;
            delete_rows += deletes.rows();
            let (files, specs) = deletes.close().await?;
            delete_files.extend(files);
            file_specs.extend(specs);
        }
        let messages = data_writer.rows() + delete_rows;
        let mut staged = StagedBatch::written(
            cx,
            (Timestamp(0), upper),
            data_writer.close().await?,
            delete_files,
            messages,
        );
        staged.file_specs = file_specs;
        Ok(staged)
    }

    async fn stage_changes(
        &mut self,
        cx: &StageContext<'_>,
        lower: Timestamp,
        upper: Timestamp,
    ) -> Result<StagedBatch, SinkError> {
        let plan = self.column_plan(cx)?;
        let read_ahead = match self.next_batch.take() {
            Some(next) if next.lower == lower => Some(next.join().await?),
            _ => None,
        };
        let consolidated = match read_ahead {
            Some(consolidated) => consolidated,
            None => {
                // Read here, not ahead: a batch of new keys can be written while it is read.
                let early = match (&plan.columns, &self.positions) {
                    (Some(_), None) => EarlyWrite::new(cx)?,
                    _ => None,
                };
                let read =
                    Consolidated::read(cx.input.clone(), plan.clone(), lower, cx.cut(upper), early);
                read.await?
            }
        };
        let upper = consolidated.upper();
        // Catching up: the next batch is read and consolidated while this one is written
        // and committed (two batches in memory at most).
        let interval = cx.commit_interval_ms.max(1);
        let boundary = Timestamp(cx.input.upper().await?.0 / interval * interval);
        if boundary > upper {
            self.next_batch = Some(NextBatch::spawn(
                cx.input.clone(),
                plan,
                upper,
                cx.cut(boundary),
            ));
        }
        match consolidated {
            Consolidated::Columns(columns, upper, early) => {
                if let Some(early) = early.filter(|_| columns.only_new_keys) {
                    return Self::written_early(cx, (lower, upper), early, columns).await;
                }
                match self
                    .write_columns_consolidated(cx, lower, upper, columns)
                    .await?
                {
                    Some(staged) => Ok(staged),
                    // A spec of the table partitions now: read again as rows.
                    None => {
                        let plan = ConsolidationPlan::rows(cx, &self.key);
                        let read = consolidate_rows(cx.input.clone(), &plan, lower, cx.cut(upper));
                        let (consolidation, upper) = read.await?;
                        self.write_rows_consolidated(cx, lower, upper, consolidation)
                            .await
                    }
                }
            }
            Consolidated::Rows(consolidation, upper) => {
                self.write_rows_consolidated(cx, lower, upper, consolidation)
                    .await
            }
        }
    }

    fn reset(&mut self) {
        self.next_batch = None;
        if let Some(positions) = &mut self.positions {
            positions.reset();
        }
    }

    fn committed(
        &mut self,
        batch: &mut StagedBatch,
        table: &LoadedTable,
        ours: bool,
    ) -> Result<(), SinkError> {
        match (&mut self.positions, batch.positions.take()) {
            (Some(index), Some(staged)) => {
                index.committed(staged, (batch.spec_id, &batch.data), table, ours)
            }
            _ => Ok(()),
        }
    }
}

impl UpsertEnvelope {
    /// How this sink's batches are consolidated: over the columns the log is read into
    /// (see `crate::consolidate_columns`), which spares decoding rows into values and
    /// converting them back, for a key the relation enforces with equality deletes into a
    /// table that does not partition, when the table's column types are written from
    /// columns; otherwise as rows.
    fn column_plan(&self, cx: &StageContext<'_>) -> Result<ConsolidationPlan, SinkError> {
        let rows = ConsolidationPlan::rows(cx, &self.key);
        if !self.key.unique_in_relation || cx.partitioning.is_some() {
            return Ok(rows);
        }
        let limits = cx.limits();
        let schema = cx.arrow_schema()?;
        if ColumnBatches::new(&schema, cx.input.desc(), false, limits).is_none() {
            return Ok(rows);
        }
        Ok(ConsolidationPlan {
            columns: Some(ColumnPlan {
                types: schema
                    .fields()
                    .iter()
                    .map(|f| f.data_type().clone())
                    .collect(),
                max_bytes: limits.bytes,
            }),
            ..rows
        })
    }

    /// A batch of new keys only, written while it was read (see [`EarlyWrite`]): its
    /// files, and no deletes (the table held none of its keys).
    async fn written_early(
        cx: &StageContext<'_>,
        range: (Timestamp, Timestamp),
        early: EarlyWrite,
        consolidated: ConsolidatedColumns,
    ) -> Result<StagedBatch, SinkError> {
        let (data, rows) = early.close().await?;
        let table = cx.table.metadata.location();
        tracing::debug!(%table, rows, "an UPSERT batch of new keys written as it was read");
        // Freeing a large batch's columns takes a while: not on the sink's path.
        tokio::task::spawn_blocking(move || drop(consolidated));
        Ok(StagedBatch::written(cx, range, data, Vec::new(), rows))
    }

    /// A batch consolidated in columns: its final rows and deleted keys gathered from the
    /// columns into the writers. `None` when a spec of the table partitions (the keys are
    /// then deleted in their rows' partitions, which takes rows).
    async fn write_columns_consolidated(
        &mut self,
        cx: &StageContext<'_>,
        lower: Timestamp,
        upper: Timestamp,
        consolidated: ConsolidatedColumns,
    ) -> Result<Option<StagedBatch>, SinkError> {
        if self.positions.is_some() {
            let staged = self
                .write_positions_from_columns(cx, lower, upper, &consolidated)
                .await;
            tokio::task::spawn_blocking(move || drop(consolidated));
            return staged.map(Some);
        }
        let mut deletes = self.deletes(cx, &live_data_specs(cx.table).await?)?;
        if deletes.partitions() {
            return Ok(None);
        }
        let limits = cx.limits();
        let batch_limits = (limits.rows, limits.bytes);
        let data_schema = cx.arrow_schema()?;
        let writers = cx.writers_for(consolidated.upserts.len());
        let mut data_writers = cx.data_writers(writers, "-data")?;
        let all_columns: Vec<usize> = (0..cx.columns()).collect();
        let upserts = consolidated.batches(
            &consolidated.upserts,
            &all_columns,
            &data_schema,
            batch_limits,
        );
        for (turn, batch) in upserts.enumerate() {
            data_writers[turn % writers].write_batch(batch?).await?;
        }
        // No key schema: the table holds no rows, nothing to delete.
        if let Some(key_schema) = &deletes.key_arrow_schema() {
            let keys = consolidated.batches(
                &consolidated.deletes,
                &self.key.indexes,
                key_schema,
                batch_limits,
            );
            for batch in keys {
                deletes.delete_keys(&batch?).await?;
            }
        }
        let delete_rows = deletes.rows();
        let ((delete_files, file_specs), (data_files, data_rows)) =
            futures::try_join!(deletes.close(), close_all(data_writers))?;
        let table = cx.table.metadata.location();
        tracing::debug!(%table, data_rows, delete_rows, "an UPSERT batch consolidated in columns");
        let mut staged = StagedBatch::written(
            cx,
            (lower, upper),
            data_files,
            delete_files,
            data_rows + delete_rows,
        );
        staged.file_specs = file_specs;
        // Freeing a large batch's columns takes a while: not on the sink's path.
        tokio::task::spawn_blocking(move || drop(consolidated));
        Ok(Some(staged))
    }

    /// A batch consolidated as rows, written (see [`UpsertEnvelope::write_consolidated`]).
    async fn write_rows_consolidated(
        &mut self,
        cx: &StageContext<'_>,
        lower: Timestamp,
        upper: Timestamp,
        consolidation: KeyConsolidation,
    ) -> Result<StagedBatch, SinkError> {
        let staged = self
            .write_consolidated(cx, lower, upper, &consolidation)
            .await;
        // Freeing a large batch's rows takes a while: not on the sink's path.
        tokio::task::spawn_blocking(move || drop(consolidation));
        staged
    }

    /// The equality delete writers of a batch into a table with data files of `specs`.
    fn deletes<'a>(
        &self,
        cx: &StageContext<'_>,
        specs: &std::collections::BTreeSet<i32>,
    ) -> Result<EqualityDeletes<'a>, SinkError> {
        EqualityDeletes::new(
            cx,
            specs,
            &self.key.schema,
            &self.key.field_ids,
            &self.key.indexes,
        )
    }

    /// A consolidated batch: an equality delete per key touched (when the table may hold
    /// it) and a data row per final value.
    async fn write_consolidated(
        &mut self,
        cx: &StageContext<'_>,
        lower: Timestamp,
        upper: Timestamp,
        consolidation: &KeyConsolidation,
    ) -> Result<StagedBatch, SinkError> {
        if self.positions.is_some() {
            let outcomes: Vec<KeyOutcome<'_>> = consolidation
                .changes()
                .map(|change| (change.key, change.value))
                .collect();
            let key_columns: Vec<usize> = (0..self.key.indexes.len()).collect();
            return self
                .write_positions(cx, lower, upper, &outcomes, &key_columns)
                .await;
        }
        // Each key touched is deleted wherever the table may hold its rows (see
        // `crate::equality`), and its new value written. A key the relation enforces
        // that the batch does not retract had no row before it, so the table (the
        // relation as of `lower`) holds none to delete: a batch of new keys writes no
        // delete files, as in APPEND, and readers and compaction have none to apply.
        let writers = cx.writers_for(consolidation.keys());
        let mut data_writers = cx.data_writers(writers, "-data")?;
        // The specs of the data files the table holds, which equality deletes go to (none
        // when it holds no rows).
        let delete_specs = live_data_specs(cx.table).await?;
        let mut deletes = self.deletes(cx, &delete_specs)?;
        let all_columns: Vec<usize> = (0..cx.columns()).collect();
        let mut data = RowBatch::new(cx.limits());
        let mut turn = 0;
        for change in consolidation.changes() {
            if !self.key.unique_in_relation || change.retracts() {
                deletes.delete_change(&change).await?;
            }
            if let Some(row) = change.value {
                let bytes = row_bytes(row);
                if data.add(row, NO_EXTRA, 1, bytes) == 0 {
                    let writer = &mut data_writers[turn % writers];
                    data.flush(writer, &all_columns, 0).await?;
                    turn += 1;
                    data.add(row, NO_EXTRA, 1, bytes);
                }
            }
        }
        data.flush(&mut data_writers[turn % writers], &all_columns, 0)
            .await?;
        let delete_rows = deletes.rows();
        let ((delete_files, file_specs), (data_files, data_rows)) =
            futures::try_join!(deletes.close(), close_all(data_writers))?;
        let messages = data_rows + delete_rows;
        let mut staged =
            StagedBatch::written(cx, (lower, upper), data_files, delete_files, messages);
        staged.file_specs = file_specs;
        Ok(staged)
    }
}

impl UpsertEnvelope {
    /// Position mode: the outcomes of a batch's keys (their keys at `key_projection`).
    async fn write_positions(
        &mut self,
        cx: &StageContext<'_>,
        lower: Timestamp,
        upper: Timestamp,
        outcomes: &[KeyOutcome<'_>],
        key_projection: &[usize],
    ) -> Result<StagedBatch, SinkError> {
        let mut writer = self.position_writer(cx, 1).await?;
        let (index, keys) = self.position_index(cx).await?;
        writer
            .write(index, keys.encoder, outcomes, key_projection)
            .await?;
        self.finish_positions(cx, lower, upper, writer).await
    }

    /// Position mode, a batch consolidated in columns: the final rows written as they are
    /// gathered, each key's current row deleted (see [`PositionBatchWriter::write_columns`]).
    async fn write_positions_from_columns(
        &mut self,
        cx: &StageContext<'_>,
        lower: Timestamp,
        upper: Timestamp,
        consolidated: &ConsolidatedColumns,
    ) -> Result<StagedBatch, SinkError> {
        let limits = cx.limits();
        let batch_limits = (limits.rows, limits.bytes);
        let data_schema = cx.arrow_schema()?;
        let key_schema = Arc::new(
            data_schema
                .project(&self.key.indexes)
                .map_err(|err| SinkError::internal(format!("cannot project the key: {err}")))?,
        );
        let all_columns: Vec<usize> = (0..cx.columns()).collect();
        let key_indexes = self.key.indexes.clone();
        let writers = cx.writers_for(consolidated.upserts.len());
        // A key updated is found by its final row's key; only those deleted by theirs.
        let removed = consolidated.batches(
            &consolidated.removed,
            &key_indexes,
            &key_schema,
            batch_limits,
        );
        let upserts = consolidated.batches(
            &consolidated.upserts,
            &all_columns,
            &data_schema,
            batch_limits,
        );
        let mut writer = self.position_writer(cx, writers).await?;
        let (index, keys) = self.position_index(cx).await?;
        writer
            .write_columns(index, keys.encoder, removed, upserts, &key_indexes)
            .await?;
        self.finish_positions(cx, lower, upper, writer).await
    }

    /// [`UpsertEnvelope::stage_position_snapshot`] from rows read in columns, when the
    /// input gives them so and the table's types are floe's own (see [`crate::columns`]);
    /// `None` when they must be read as rows. The columns are built and encoded on several
    /// threads, as APPEND's snapshot is.
    async fn stage_position_snapshot_from_columns(
        &mut self,
        cx: &StageContext<'_>,
        upper: Timestamp,
    ) -> Result<Option<StagedBatch>, SinkError> {
        let limits = cx.limits();
        let arrow_schema = cx.arrow_schema()?;
        let Some(batches) = ColumnBatches::new(&arrow_schema, cx.input.desc(), false, limits)
        else {
            return Ok(None);
        };
        let read = cx
            .input
            .snapshot_columns(upper, cx.settings.read_chunk_rows, limits.bytes);
        let Some(columns) = read.await? else {
            return Ok(None);
        };
        let mut writer = self.position_writer(cx, column_writers()).await?;
        let key_indexes = self.key.indexes.clone();
        let mut chunks = BuiltChunks::new(columns, column_writers());
        let mut cut = BatchCut::none(upper);
        while let Some(built) = chunks.next(&mut cut).await? {
            let (index, keys) = self.position_index(cx).await?;
            let rows = batches.batches(built);
            writer
                .write_columns(index, keys.encoder, std::iter::empty(), rows, &key_indexes)
                .await?;
        }
        let staged = self
            .finish_positions(cx, Timestamp(0), upper, writer)
            .await?;
        Ok(Some(staged))
    }

    /// Position mode, a new sink's snapshot with a unique key: streamed into data files,
    /// each row deleting the key's row the table holds, if any (none unless it replaces).
    async fn stage_position_snapshot(
        &mut self,
        cx: &StageContext<'_>,
        upper: Timestamp,
        mut snapshot: UpdateStream,
    ) -> Result<StagedBatch, SinkError> {
        let mut writer = self.position_writer(cx, 1).await?;
        let key_indexes = self.key.indexes.clone();
        while let Some(chunk) = snapshot.next().await? {
            let outcomes: Vec<KeyOutcome<'_>> = chunk
                .iter()
                .filter(|update| update.diff > 0)
                .map(|update| (update.row.as_slice(), Some(update.row.as_slice())))
                .collect();
            let (index, keys) = self.position_index(cx).await?;
            writer
                .write(index, keys.encoder, &outcomes, &key_indexes)
                .await?;
        }
        self.finish_positions(cx, Timestamp(0), upper, writer).await
    }

    async fn position_index(
        &mut self,
        cx: &StageContext<'_>,
    ) -> Result<
        (
            &crate::position::PositionIndex,
            crate::position::KeyColumns<'_>,
        ),
        SinkError,
    > {
        let positions = self
            .positions
            .as_mut()
            .ok_or_else(|| SinkError::internal("position deletes without a key index"))?;
        if cx.replaces_contents {
            // The batch replaces everything the table holds: no row of it is deleted.
            return Ok(positions.empty_index_for(cx.table));
        }
        positions.index_for(cx.table).await
    }

    /// A position batch's writer over `writers` data writers.
    async fn position_writer(
        &mut self,
        cx: &StageContext<'_>,
        writers: usize,
    ) -> Result<PositionBatchWriter, SinkError> {
        crate::position::check_format_version(cx.table)?;
        let data = cx.data_writers(writers, "-data")?;
        let (index, _) = self.position_index(cx).await?;
        Ok(PositionBatchWriter::new(
            data,
            index,
            cx.limits(),
            cx.columns(),
        ))
    }

    async fn finish_positions(
        &mut self,
        cx: &StageContext<'_>,
        lower: Timestamp,
        upper: Timestamp,
        writer: PositionBatchWriter,
    ) -> Result<StagedBatch, SinkError> {
        let files = DeleteFiles {
            table: cx.table,
            spec_id: cx.spec_id,
            prefix: format!("{}-deletes", cx.file_prefix),
            target_file_size: cx.settings.target_file_size,
        };
        let (index, keys) = self.position_index(cx).await?;
        let finished = writer.finish(index, keys, files).await?;
        let mut staged = StagedBatch::written(
            cx,
            (lower, upper),
            finished.data,
            finished.deletes,
            finished.messages,
        );
        staged.file_specs = finished.file_specs;
        staged.positions = Some(finished.positions);
        Ok(staged)
    }
}

/// Adds one row to `batch`, flushing it into `writer` first when it is full.
pub(crate) async fn add_row<'a>(
    batch: &mut RowBatch<'a>,
    writer: &mut PipelinedWriter,
    projection: &[usize],
    row: &'a [Datum],
    bytes: usize,
) -> Result<(), SinkError> {
    if batch.add(row, NO_EXTRA, 1, bytes) == 0 {
        batch.flush(writer, projection, 0).await?;
        batch.add(row, NO_EXTRA, 1, bytes);
    }
    Ok(())
}

/// How an UPSERT sink's batches are read and consolidated.
#[derive(Clone)]
struct ConsolidationPlan {
    key_indexes: Vec<usize>,
    chunk_rows: usize,
    /// In columns, when the sink's key, table and types allow it (see
    /// `UpsertEnvelope::column_plan`); else as rows.
    columns: Option<ColumnPlan>,
}

/// What a read in columns needs: the table's column types in Arrow, and the bytes a
/// chunk may hold.
#[derive(Clone)]
struct ColumnPlan {
    types: Vec<arrow_schema::DataType>,
    max_bytes: usize,
}

impl ConsolidationPlan {
    fn rows(cx: &StageContext<'_>, key: &UpsertKey) -> ConsolidationPlan {
        ConsolidationPlan {
            key_indexes: key.indexes.clone(),
            chunk_rows: cx.settings.read_chunk_rows,
            columns: None,
        }
    }
}

/// A batch of changes consolidated per key, and its upper.
enum Consolidated {
    /// With the writers the batch's rows went to while it was read, if they all did
    /// (see [`EarlyWrite`]).
    Columns(ConsolidatedColumns, Timestamp, Option<EarlyWrite>),
    Rows(KeyConsolidation, Timestamp),
}

/// Data writers a batch's chunks go to while they are read and consolidated, as long as
/// every change inserts a key of its own (a catch-up after inserts): such a batch's
/// final rows are its rows as read, so they are encoded while later chunks are read and
/// their keys hashed, not after the last one. Dropped at the first change that is not:
/// the writer tasks are aborted and no file of theirs is completed.
pub(crate) struct EarlyWrite {
    writers: Vec<PipelinedWriter>,
    batches: ColumnBatches,
    turn: usize,
}

impl EarlyWrite {
    /// Early writers of a batch of `cx`, when its rows can be written from columns.
    fn new(cx: &StageContext<'_>) -> Result<Option<EarlyWrite>, SinkError> {
        let schema = cx.arrow_schema()?;
        let Some(batches) = ColumnBatches::new(&schema, cx.input.desc(), false, cx.limits()) else {
            return Ok(None);
        };
        Ok(Some(EarlyWrite {
            writers: cx.data_writers(column_writers(), "-data")?,
            batches,
            turn: 0,
        }))
    }

    /// Hands a chunk's `rows` rows (each inserted once), its `columns`, to the next
    /// writer.
    async fn write(
        &mut self,
        columns: Vec<arrow_array::ArrayRef>,
        rows: usize,
    ) -> Result<(), SinkError> {
        let writer = self.turn % self.writers.len();
        self.turn += 1;
        let batch = self.batches.batch(columns, rows)?;
        self.writers[writer].write_batch(batch).await
    }

    /// Closes the writers: the files written, and how many rows.
    async fn close(self) -> Result<(Vec<iceberg::spec::DataFile>, u64), SinkError> {
        close_all(self.writers).await
    }
}

impl Consolidated {
    /// Reads the batch of changes from `lower` up to its cut and consolidates it as
    /// `plan` says: in columns if it can (the input gives columns, and the changes keep
    /// the key unique), else as rows, consolidated as they arrive while the read runs
    /// ahead on its own thread.
    async fn read(
        input: Arc<dyn SinkInput>,
        plan: ConsolidationPlan,
        lower: Timestamp,
        cut: BatchCut,
        early: Option<EarlyWrite>,
    ) -> Result<Consolidated, SinkError> {
        if let Some(columns) = &plan.columns
            && let Some(consolidated) =
                consolidate_in_columns(&input, &plan, columns, lower, cut.clone(), early).await?
        {
            return Ok(consolidated);
        }
        let (consolidation, upper) = consolidate_rows(input, &plan, lower, cut).await?;
        Ok(Consolidated::Rows(consolidation, upper))
    }

    fn upper(&self) -> Timestamp {
        match self {
            Consolidated::Columns(_, upper, _) | Consolidated::Rows(_, upper) => *upper,
        }
    }
}

/// [`Consolidated::read`] in columns; `None` when the input gives no columns or the
/// changes contradict the key's uniqueness.
async fn consolidate_in_columns(
    input: &Arc<dyn SinkInput>,
    plan: &ConsolidationPlan,
    columns: &ColumnPlan,
    lower: Timestamp,
    mut cut: BatchCut,
    mut early: Option<EarlyWrite>,
) -> Result<Option<Consolidated>, SinkError> {
    let Some(mut consolidation) = ColumnConsolidation::new(&columns.types, &plan.key_indexes)
    else {
        return Ok(None);
    };
    let read = input.read_columns(lower, cut.upper, plan.chunk_rows, columns.max_bytes);
    let Some(stream) = read.await? else {
        return Ok(None);
    };
    let mut chunks = BuiltChunks::new(stream, column_writers());
    while let Some(built) = chunks.next(&mut cut).await? {
        // The chunk's columns are shared (cheap clones), not copied.
        let early_chunk = early.is_some().then(|| (built.columns.clone(), built.rows));
        consolidation.add(built)?;
        let still_new = consolidation.only_new_keys();
        match (early.as_mut(), early_chunk) {
            (Some(write), Some((columns, rows))) if still_new => write.write(columns, rows).await?,
            _ => early = None,
        }
    }
    let Some(consolidated) = consolidation.finish() else {
        tracing::debug!(%lower, "a batch contradicts its key's uniqueness: read as rows");
        return Ok(None);
    };
    Ok(Some(Consolidated::Columns(
        consolidated,
        cut.upper(),
        early,
    )))
}

/// [`Consolidated::read`] as rows: the consolidation and the batch's upper.
async fn consolidate_rows(
    input: Arc<dyn SinkInput>,
    plan: &ConsolidationPlan,
    lower: Timestamp,
    mut cut: BatchCut,
) -> Result<(KeyConsolidation, Timestamp), SinkError> {
    let mut changes = input.read(lower, cut.upper, plan.chunk_rows).await?;
    let mut consolidation = KeyConsolidation::new(&plan.key_indexes);
    'read: while let Some(chunk) = changes.next().await? {
        for update in chunk {
            if !cut.admit(update.ts)? {
                break 'read;
            }
            consolidation.add(update);
        }
    }
    Ok((consolidation, cut.upper()))
}

/// An UPSERT batch being consolidated ahead, on a task of its own, while the previous one
/// is written and committed. Dropped (a stall, a restart) it stops.
struct NextBatch {
    lower: Timestamp,
    task: tokio::task::JoinHandle<Result<Consolidated, SinkError>>,
}

impl NextBatch {
    fn spawn(
        input: Arc<dyn SinkInput>,
        plan: ConsolidationPlan,
        lower: Timestamp,
        cut: BatchCut,
    ) -> NextBatch {
        NextBatch {
            lower,
            task: tokio::spawn(Consolidated::read(input, plan, lower, cut, None)),
        }
    }

    async fn join(mut self) -> Result<Consolidated, SinkError> {
        match (&mut self.task).await {
            Ok(result) => result,
            Err(err) => Err(SinkError::internal(format!(
                "consolidating the next batch failed: {err}"
            ))),
        }
    }
}

impl Drop for NextBatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

// -------------------------------------------------------------------------------------
// Where a batch ends.

/// Where a batch of changes ends. A batch reads `[lower, upper)`, but once it holds
/// `max_rows` changes it ends at the next interval boundary (batch bounds stay multiples
/// of the interval, and one interval is never split), so a catch-up after a long pause is
/// committed as several snapshots and an UPSERT batch in memory stays bounded.
#[derive(Clone)]
pub(crate) struct BatchCut {
    max_rows: usize,
    interval: u64,
    upper: Timestamp,
    /// The boundary the batch ends at, once it is full.
    end: Option<Timestamp>,
    /// Whether a change at or after `end` was seen (else the whole read was taken).
    ended: bool,
    admitted: usize,
    last_ts: Timestamp,
}

impl BatchCut {
    pub fn new(max_rows: usize, interval: u64, upper: Timestamp) -> BatchCut {
        BatchCut {
            max_rows: max_rows.max(1),
            interval: interval.max(1),
            upper,
            end: None,
            ended: false,
            admitted: 0,
            last_ts: Timestamp(0),
        }
    }

    /// A batch taken whole (a snapshot).
    pub fn none(upper: Timestamp) -> BatchCut {
        BatchCut::new(usize::MAX, 1, upper)
    }

    /// Whether the change at `ts` belongs to the batch. The input comes in time order;
    /// a change out of order would make the cut lose changes, so it is an error.
    pub fn admit(&mut self, ts: Timestamp) -> Result<bool, SinkError> {
        if ts < self.last_ts {
            return Err(SinkError::new(
                crate::error::ErrorKind::Storage,
                format!(
                    "the change log returned a change at {ts} after one at {}",
                    self.last_ts
                ),
            ));
        }
        self.last_ts = ts;
        if let Some(end) = self.end
            && ts >= end
        {
            self.ended = true;
            return Ok(false);
        }
        self.admitted += 1;
        if self.end.is_none() && self.admitted >= self.max_rows {
            let end = Timestamp((ts.0 / self.interval + 1).saturating_mul(self.interval));
            if end < self.upper {
                self.end = Some(end);
            }
        }
        Ok(true)
    }

    /// The batch's upper: the cut, if the read went past it.
    pub fn upper(&self) -> Timestamp {
        match self.end {
            Some(end) if self.ended => end,
            _ => self.upper,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_batch_ends_at_the_next_interval_boundary() {
        let mut cut = BatchCut::new(3, 100, Timestamp(1_000));
        for ts in [105, 110, 150, 180, 199] {
            assert!(cut.admit(Timestamp(ts)).unwrap(), "{ts} is before the cut");
        }
        assert!(!cut.admit(Timestamp(200)).unwrap());
        assert_eq!(cut.upper(), Timestamp(200));
        // Out of order input is refused, never silently cut.
        let mut cut = BatchCut::new(3, 100, Timestamp(1_000));
        cut.admit(Timestamp(150)).unwrap();
        assert!(cut.admit(Timestamp(149)).is_err());
    }

    #[test]
    fn a_batch_that_never_reaches_its_cut_takes_the_whole_read() {
        let mut cut = BatchCut::new(2, 100, Timestamp(1_000));
        for ts in [105, 110, 150] {
            assert!(cut.admit(Timestamp(ts)).unwrap());
        }
        // The read ended before 200: nothing lies between, so the batch is the whole read.
        assert_eq!(cut.upper(), Timestamp(1_000));
        // A cut at the read's upper is no cut.
        let mut cut = BatchCut::new(1, 100, Timestamp(200));
        assert!(cut.admit(Timestamp(150)).unwrap());
        assert!(cut.admit(Timestamp(199)).unwrap());
        assert_eq!(cut.upper(), Timestamp(200));
        let mut whole = BatchCut::none(Timestamp(500));
        for ts in 0..400 {
            assert!(whole.admit(Timestamp(ts)).unwrap());
        }
        assert_eq!(whole.upper(), Timestamp(500));
    }

    #[test]
    fn a_batch_is_bounded_by_rows_and_by_bytes() {
        let limits = BatchLimits {
            rows: 100,
            bytes: 1_000,
        };
        // By rows, by bytes, whichever is first.
        assert_eq!(limits.room(0, 0, 1), 100);
        assert_eq!(limits.room(0, 0, 100), 10);
        assert_eq!(limits.room(95, 0, 1), 5);
        assert_eq!(limits.room(5, 950, 10), 5);
        // A row larger than the whole budget goes alone into an empty batch.
        assert_eq!(limits.room(0, 0, 1_000_000), 1);
        assert_eq!(limits.room(1, 10, 1_000_000), 0);
    }

    #[test]
    fn a_huge_multiplicity_is_taken_in_pieces_without_allocating_it() {
        // 10^15 copies of a row (what compaction can sum a diff to): each piece takes
        // what fits one batch, and only one entry per piece is held.
        let row = [Datum::Text("x".repeat(100))];
        let limits = BatchLimits {
            rows: 8_192,
            bytes: 64 * 1024,
        };
        let mut batch = RowBatch::new(limits);
        let bytes = row_bytes(&row) + 12;
        let mut remaining: u64 = 1_000_000_000_000_000;
        let mut pieces = 0;
        while remaining > 0 && pieces < 1_000 {
            let taken = batch.add(&row, NO_EXTRA, remaining, bytes);
            assert!(
                taken >= 1 && taken as usize * bytes <= limits.bytes,
                "{taken}"
            );
            assert_eq!(batch.runs.len(), 1, "one entry per piece");
            remaining -= taken;
            batch.runs.clear();
            batch.rows = 0;
            batch.bytes = 0;
            pieces += 1;
        }
        assert_eq!(pieces, 1_000);
        assert!(remaining > 0);
    }
}
