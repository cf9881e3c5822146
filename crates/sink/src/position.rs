//! Position deletes for UPSERT sinks in `DELETE MODE = 'position'`.
//!
//! Instead of an equality delete per key (which pyiceberg, Snowflake and Unity Catalog do not
//! apply), a batch removes each touched key's current row by naming its data file and row
//! position. floe finds them in a [`PositionIndex`]: key -> (data file, row), built from the
//! table's live data files (their key columns and row positions, minus the table's position
//! deletes) whenever the sink starts or the table's head is not the one the index describes,
//! and moved forward by each of the sink's own commits once it is in the table. The index is
//! never written anywhere: what the table holds is its only source, so a crash at any instant
//! leaves nothing to reconcile.
//!
//! Memory per key is bounded: a key is a 128-bit [`KeyId`] (its canonical bytes themselves
//! when they fit, else a keyed hash of them) and its row a `(u32, u32)` pair.

use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex};

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_row::{RowConverter, SortField};
use arrow_schema::SchemaRef as ArrowSchemaRef;
use floe_repr::Datum;
use futures::TryStreamExt;
use iceberg::arrow::ArrowFileReader;
use iceberg::io::FileMetadata;
use iceberg::spec::{
    DataContentType, DataFile, NestedField, PrimitiveType, Schema, SchemaRef, Struct, Type,
};
use parquet::arrow::{ParquetRecordBatchStreamBuilder, ProjectionMask};

use async_trait::async_trait;

use crate::commit::{CommitIntent, Verdict};
use crate::envelope::{BatchLimits, RowBatch, add_row};
use crate::error::{ErrorKind, SinkError};
use crate::maintenance::RewriteLog;
use crate::maintenance::remap::Rewrite;
use crate::snapshot::{MAIN_BRANCH, PreparedCommit, read_manifest_list};
use crate::table::{LoadedTable, storage_error};
use crate::types::record_batch;
use crate::writer::{FileContent, FileWriter, PipelinedWriter};

/// Iceberg's reserved field id of a position delete's `file_path`.
pub const FILE_PATH_FIELD_ID: i32 = 2147483546;
/// Iceberg's reserved field id of a position delete's `pos`.
pub const POS_FIELD_ID: i32 = 2147483545;

/// Rows read or keyed per Arrow batch.
const KEY_BATCH_ROWS: usize = 8_192;

/// A key's identity: its canonical bytes (Arrow's row format of the key columns) packed
/// with their length when they fit in 15 bytes (integer keys: exact), else a 120-bit keyed
/// hash of them tagged `0xFF` (two different keys share one with probability about
/// n^2 / 2^121, 10^-18 for a billion keys). Two `u64`s rather than a `u128`, whose 16-byte
/// alignment would pad every index entry from 24 to 32 bytes.
pub(crate) type KeyId = [u64; 2];

/// A data file's partition: its spec id and partition tuple.
type FilePartition = (i32, Struct);

/// Where a key's current row is: an index into [`PositionIndex::files`] and a row position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct RowSlot {
    file: u32,
    pos: u32,
}

/// Turns key columns (as Arrow arrays) into [`KeyId`]s, the same way whether the values
/// come from the relation or from a data file of the table.
pub(crate) struct KeyEncoder {
    /// The key's Arrow schema (as the sink writes it); columns read back are cast to it.
    schema: ArrowSchemaRef,
    converter: RowConverter,
    /// Two independently seeded hashers: 128 bits for keys longer than 15 bytes.
    high: foldhash::quality::RandomState,
    low: foldhash::quality::RandomState,
}

impl KeyEncoder {
    /// An encoder of keys of `key_schema` (the table's schema projected on the key).
    pub fn new(key_schema: &Schema) -> Result<KeyEncoder, SinkError> {
        let schema = Arc::new(iceberg::arrow::schema_to_arrow_schema(key_schema).map_err(
            |err| SinkError::internal(format!("cannot convert the key schema to Arrow: {err}")),
        )?);
        let fields = schema
            .fields()
            .iter()
            .map(|field| SortField::new(field.data_type().clone()))
            .collect();
        let converter = RowConverter::new(fields).map_err(|err| {
            SinkError::new(
                ErrorKind::InvalidConfig,
                format!("the key's types cannot be indexed for position deletes: {err}"),
            )
            .with_retryable(false)
        })?;
        Ok(KeyEncoder {
            schema,
            converter,
            high: foldhash::quality::RandomState::default(),
            low: foldhash::quality::RandomState::default(),
        })
    }

    /// The ids of the rows of `columns` (the key columns, in key order).
    pub fn ids(&self, columns: &[ArrayRef]) -> Result<Vec<KeyId>, SinkError> {
        let cast = columns
            .iter()
            .zip(self.schema.fields())
            .map(|(column, field)| {
                if column.data_type() == field.data_type() {
                    Ok(column.clone())
                } else {
                    arrow_cast::cast(column, field.data_type())
                }
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|err| SinkError::internal(format!("cannot read key values: {err}")))?;
        let rows = self
            .converter
            .convert_columns(&cast)
            .map_err(|err| SinkError::internal(format!("cannot encode key values: {err}")))?;
        Ok(rows.iter().map(|row| self.id(row.as_ref())).collect())
    }

    /// The ids of the keys of `rows` (each key's values at `projection`).
    pub fn ids_of_rows(
        &self,
        rows: &[&[Datum]],
        projection: &[usize],
    ) -> Result<Vec<KeyId>, SinkError> {
        let columns: Vec<Vec<&Datum>> = projection
            .iter()
            .map(|index| {
                rows.iter()
                    .map(|row| row.get(*index).unwrap_or(&Datum::Null))
                    .collect()
            })
            .collect();
        let batch = record_batch(&self.schema, columns, rows.len())?;
        self.ids(batch.columns())
    }

    fn id(&self, bytes: &[u8]) -> KeyId {
        if bytes.len() <= 15 {
            let mut packed = [0u8; 16];
            packed[0] = bytes.len() as u8;
            packed[1..=bytes.len()].copy_from_slice(bytes);
            let (first, second) = packed.split_at(8);
            let word = |half: &[u8]| {
                let mut word = [0u8; 8];
                word.copy_from_slice(half);
                u64::from_le_bytes(word)
            };
            [word(first), word(second)]
        } else {
            // The low byte 0xFF tells a hash from packed bytes (whose low byte is 0..=15).
            [self.high.hash_one(bytes) | 0xFF, self.low.hash_one(bytes)]
        }
    }
}

type IdMap<V> = HashMap<KeyId, V, foldhash::fast::RandomState>;

/// Key -> the data file and row of its current row in the table, as of one snapshot of
/// its main branch.
pub(crate) struct PositionIndex {
    /// The main branch's head this index describes (`None`: an empty table).
    snapshot_id: Option<i64>,
    /// Data file paths, by the index a [`RowSlot`] names.
    files: Vec<String>,
    /// Each file's partition (spec id and tuple), by the same index: a position delete
    /// goes into the partition of the file it points into.
    partitions: Vec<FilePartition>,
    rows: IdMap<RowSlot>,
    /// Further live rows of a key (a table that holds a key twice, which floe never
    /// writes): deleted with the key's next change, so the table heals.
    duplicates: IdMap<Vec<RowSlot>>,
    /// In a format version 3 table, the deleted rows of each file that has any, with its
    /// deletion vector: a new one holds these too and replaces it.
    vectors: HashMap<u32, FileDeletes>,
    /// Whether `vectors` is kept: the table took deletion vectors when the index was
    /// built. An index built before someone upgraded the table to version 3 is built
    /// again, or a file's first vector would leave out the rows its older position delete
    /// files delete, which readers ignore for a file with a vector.
    keeps_vectors: bool,
}

/// The deleted rows of a data file of a format version 3 table, and its live deletion
/// vector (`None` when only position delete files of an older format delete its rows).
#[derive(Debug, Clone)]
pub(crate) struct FileDeletes {
    positions: roaring::RoaringTreemap,
    vector: Option<DataFile>,
}

impl PositionIndex {
    fn empty(snapshot_id: Option<i64>, keeps_vectors: bool) -> PositionIndex {
        PositionIndex {
            snapshot_id,
            keeps_vectors,
            files: Vec::new(),
            partitions: Vec::new(),
            rows: IdMap::default(),
            duplicates: IdMap::default(),
            vectors: HashMap::new(),
        }
    }

    /// The partition (spec id and tuple) of indexed file `file`.
    fn partition_of(&self, file: u32) -> Result<&FilePartition, SinkError> {
        self.partitions
            .get(file as usize)
            .ok_or_else(|| SinkError::internal("a position names no indexed file"))
    }

    /// The rows of key `id` in the table.
    fn rows_of(&self, id: KeyId) -> impl Iterator<Item = RowSlot> + '_ {
        self.rows
            .get(&id)
            .copied()
            .into_iter()
            .chain(self.duplicates.get(&id).into_iter().flatten().copied())
    }

    fn add_file(&mut self, path: String, partition: (i32, Struct)) -> Result<u32, SinkError> {
        let index = u32::try_from(self.files.len())
            .map_err(|_| SinkError::internal("the position index holds too many files"))?;
        self.files.push(path);
        self.partitions.push(partition);
        Ok(index)
    }

    /// Records `id`'s row at `slot`; a key already present keeps its older row as a
    /// duplicate to delete.
    fn insert(&mut self, id: KeyId, slot: RowSlot) -> bool {
        match self.rows.insert(id, slot) {
            Some(older) => {
                self.duplicates.entry(id).or_default().push(older);
                true
            }
            None => false,
        }
    }

    /// Moves the index past a commit of this sink: `update`'s keys lost their rows, and
    /// those with a new value have it where `update` places it in `data` (the batch's data
    /// files: read back when they span partitions, else in the order rows were written).
    fn apply(
        &mut self,
        update: IndexUpdate,
        (spec_id, data): (i32, &[DataFile]),
        snapshot_id: Option<i64>,
    ) -> Result<(), SinkError> {
        let mut firsts = Vec::with_capacity(data.len());
        let mut first_row = 0u64;
        for file in data {
            let partition = (spec_id, file.partition().clone());
            firsts.push((
                first_row,
                self.add_file(file.file_path().to_string(), partition)?,
            ));
            first_row += file.record_count();
        }
        if first_row != update.rows_written {
            return Err(SinkError::internal(format!(
                "the batch's data files hold {first_row} rows but {} were written",
                update.rows_written
            )));
        }
        for id in update.removed {
            self.rows.remove(&id);
            self.duplicates.remove(&id);
        }
        self.vectors.extend(update.vectors);
        if let Some(placed) = update.placed {
            for (id, at, pos) in placed {
                let Some((_, file)) = firsts.get(at as usize) else {
                    return Err(SinkError::internal("a key was read back from no data file"));
                };
                self.duplicates.remove(&id);
                self.rows.insert(id, slot(*file, pos)?);
            }
        } else {
            for (id, row) in update.added {
                self.duplicates.remove(&id);
                // The file holding global row `row`: the last whose first row is at most it.
                let at = firsts.partition_point(|(first, _)| *first <= row);
                let Some((first, file)) = at.checked_sub(1).and_then(|at| firsts.get(at)) else {
                    return Err(SinkError::internal("a written row lies in no data file"));
                };
                self.rows.insert(id, slot(*file, row - first)?);
            }
        }
        self.snapshot_id = snapshot_id;
        Ok(())
    }
}

impl PositionIndex {
    /// The index moved past `rewrite`, a compaction committed on the snapshot it describes:
    /// each row of a rewritten file is where the compaction put it (the rewrite keeps the
    /// rows' order, see [`crate::maintenance::remap`]), and each file written has the
    /// deletion vector the compaction carried onto it. An error when a row the index holds
    /// is not in the rewrite's maps (the index is then built again from the table).
    async fn remapped(
        mut self,
        table: &LoadedTable,
        rewrite: &Rewrite,
    ) -> Result<PositionIndex, SinkError> {
        let written = self.follow(rewrite)?;
        for vector in rewrite
            .carried
            .iter()
            .filter(|f| crate::dv::is_deletion_vector(f))
        {
            let target = vector.referenced_data_file();
            let Some(file) = target.as_deref().and_then(|path| written.get(path)) else {
                return Err(SinkError::internal(
                    "a carried vector names no file written",
                ));
            };
            let positions = crate::dv::read_deletion_vector(table, vector).await?;
            let deletes = FileDeletes {
                positions,
                vector: Some(vector.clone()),
            };
            self.vectors.insert(*file, deletes);
        }
        self.snapshot_id = Some(rewrite.snapshot_id);
        tracing::info!(table = %table.metadata_location, files_written = rewrite.written.len(), "moved the position index past a compaction");
        Ok(self)
    }

    /// Adds `rewrite`'s files written, moves the rows of the files it rewrote to them and
    /// forgets those files' deletes (applied by the rewrite); returns the index of each
    /// file written, by path.
    fn follow(&mut self, rewrite: &Rewrite) -> Result<HashMap<String, u32>, SinkError> {
        let mut written = HashMap::new();
        for file in &rewrite.written {
            let partition = (rewrite.spec_id, file.partition().clone());
            let index = self.add_file(file.file_path().to_string(), partition)?;
            written.insert(file.file_path().to_string(), index);
        }
        let rewritten: Vec<bool> = self
            .files
            .iter()
            .map(|path| rewrite.rewrote(path))
            .collect();
        let files = &self.files;
        let moved = |slot: &mut RowSlot| -> Result<(), SinkError> {
            if !rewritten[slot.file as usize] {
                return Ok(());
            }
            let (path, pos) = rewrite
                .new_position(&files[slot.file as usize], slot.pos)
                .ok_or_else(|| SinkError::internal("a live row is not in the compaction's map"))?;
            let file = written.get(path).ok_or_else(|| {
                SinkError::internal("a compaction's map names a file it did not write")
            })?;
            *slot = RowSlot { file: *file, pos };
            Ok(())
        };
        for slot in self.rows.values_mut() {
            moved(slot)?;
        }
        for slot in self.duplicates.values_mut().flatten() {
            moved(slot)?;
        }
        // The rewritten files' deletes were applied by the rewrite; the deletes committed
        // meanwhile were carried onto the files written.
        self.vectors.retain(|file, _| !rewritten[*file as usize]);
        Ok(written)
    }
}

fn slot(file: u32, pos: u64) -> Result<RowSlot, SinkError> {
    let pos = u32::try_from(pos).map_err(|_| {
        SinkError::internal(format!(
            "a data file holds more than {} rows, more than the position index addresses",
            u32::MAX
        ))
    })?;
    Ok(RowSlot { file, pos })
}

/// What a staged batch does to the index once it is committed.
#[derive(Default)]
pub(crate) struct IndexUpdate {
    /// Keys whose row the batch deletes without writing a new one.
    removed: Vec<KeyId>,
    /// Keys with a new row, at this position among the rows written.
    added: Vec<(KeyId, u64)>,
    rows_written: u64,
    /// Where the keys with a new row are, as read back from the batch's data files: the
    /// data file (its index among them) and the row. Set when the files span partitions:
    /// the writer fans rows out into a file per partition, so the order they were written
    /// in does not say where they are.
    placed: Option<Vec<(KeyId, u32, u64)>>,
    /// The deleted rows and new deletion vector of each file the batch deletes rows of,
    /// in a format version 3 table.
    vectors: Vec<(u32, FileDeletes)>,
}

/// The part of a staged batch the position index needs at commit.
pub(crate) struct StagedPositions {
    /// The main branch's head the deletes were resolved against.
    pub base_snapshot_id: Option<i64>,
    /// The data files the batch's position deletes point into (sorted).
    pub referenced: Vec<String>,
    /// The deletion vectors the batch's replace (their rows are in the new ones): the
    /// commit removes them.
    pub replaced: Vec<DataFile>,
    /// Whether the deletes were written as deletion vectors (the table was format
    /// version 3 when the batch was staged).
    pub as_vectors: bool,
    update: IndexUpdate,
}

/// The position-delete state of an UPSERT sink: the key encoder and the index, built
/// when first needed and dropped on a reset.
pub(crate) struct PositionDeletes {
    encoder: KeyEncoder,
    key_field_ids: Vec<i32>,
    index: Option<PositionIndex>,
    /// The compactions of the sink's maintenance task, which the index moves past.
    rewrites: RewriteLog,
}

impl PositionDeletes {
    pub fn new(
        key_schema: &Schema,
        key_field_ids: Vec<i32>,
        rewrites: RewriteLog,
    ) -> Result<PositionDeletes, SinkError> {
        Ok(PositionDeletes {
            encoder: KeyEncoder::new(key_schema)?,
            key_field_ids,
            index: None,
            rewrites,
        })
    }

    /// Forgets the index: it is built again from the table before the next batch.
    pub fn reset(&mut self) {
        self.index = None;
    }

    /// The index as of `table`'s main branch: moved past the sink's own compaction that
    /// made the head out of the snapshot it describes, else built again when it describes
    /// another head (a first batch, another writer's commit).
    pub async fn index_for(
        &mut self,
        table: &LoadedTable,
    ) -> Result<(&PositionIndex, KeyColumns<'_>), SinkError> {
        let head = table
            .metadata
            .snapshot_for_ref(MAIN_BRANCH)
            .map(|s| s.snapshot_id());
        let current = match self.index.take() {
            Some(index) if index.keeps_vectors != takes_deletion_vectors(table) => {
                tracing::info!(table = %table.metadata_location, "the table's format version changed; building the position index again");
                build_index(table, &self.encoder, &self.key_field_ids).await?
            }
            Some(index) if index.snapshot_id == head => index,
            Some(index) => match self.rewrites.between(index.snapshot_id, head) {
                Some(rewrite) => match index.remapped(table, &rewrite).await {
                    Ok(index) => index,
                    Err(error) => {
                        tracing::warn!(table = %table.metadata_location, error = %error.message, "the position index could not follow a compaction; building it again");
                        build_index(table, &self.encoder, &self.key_field_ids).await?
                    }
                },
                None => build_index(table, &self.encoder, &self.key_field_ids).await?,
            },
            None => build_index(table, &self.encoder, &self.key_field_ids).await?,
        };
        let index = self.index.insert(current);
        let keys = KeyColumns {
            encoder: &self.encoder,
            field_ids: &self.key_field_ids,
        };
        Ok((index, keys))
    }

    /// An empty index as of `table`'s main branch, for a batch that replaces the
    /// table's contents.
    pub fn empty_index_for(&mut self, table: &LoadedTable) -> (&PositionIndex, KeyColumns<'_>) {
        let head = table
            .metadata
            .snapshot_for_ref(MAIN_BRANCH)
            .map(|s| s.snapshot_id());
        let index = self
            .index
            .insert(PositionIndex::empty(head, takes_deletion_vectors(table)));
        let keys = KeyColumns {
            encoder: &self.encoder,
            field_ids: &self.key_field_ids,
        };
        (index, keys)
    }

    /// The batch with `positions` and `data` is in `table`: moves the index forward when
    /// the table's head is the snapshot this sink made of it (`ours`), else forgets it
    /// (another instance's snapshot landed for the batch: its files are not ours).
    pub fn committed(
        &mut self,
        positions: StagedPositions,
        data: (i32, &[DataFile]),
        table: &LoadedTable,
        ours: bool,
    ) -> Result<(), SinkError> {
        let head_snapshot = table.metadata.snapshot_for_ref(MAIN_BRANCH);
        let head = head_snapshot.map(|s| s.snapshot_id());
        // The commit must have landed right on the snapshot the index describes: one
        // built again on a newer head (a compaction's, which moved rows the batch does
        // not touch) leaves the index pointing at files that are gone.
        let parent = head_snapshot.and_then(|s| s.parent_snapshot_id());
        match self.index.as_mut() {
            Some(index)
                if ours
                    && index.snapshot_id == positions.base_snapshot_id
                    && parent == positions.base_snapshot_id =>
            {
                if let Err(err) = index.apply(positions.update, data, head) {
                    self.index = None;
                    return Err(err);
                }
            }
            _ => self.index = None,
        }
        Ok(())
    }
}

// -------------------------------------------------------------------------------------
// Building the index from the table.

/// A live data file of the table.
struct LiveDataFile {
    sequence_number: i64,
    path: String,
    size: u64,
    /// Its spec id and partition tuple.
    partition: (i32, Struct),
}

/// Reads the index from `table`'s main branch: every live data file's key columns with
/// their row positions, leaving out the rows its position deletes remove.
async fn build_index(
    table: &LoadedTable,
    encoder: &KeyEncoder,
    key_field_ids: &[i32],
) -> Result<PositionIndex, SinkError> {
    let Some(head) = table.metadata.snapshot_for_ref(MAIN_BRANCH) else {
        return Ok(PositionIndex::empty(None, takes_deletion_vectors(table)));
    };
    let started = std::time::Instant::now();
    let mut data = Vec::new();
    let mut deletes = Vec::new();
    for manifest in read_manifest_list(table, head.manifest_list()).await? {
        let manifest = load_manifest(table, &manifest).await?;
        let spec_id = manifest.metadata().partition_spec().spec_id();
        for entry in manifest.entries().iter().filter(|entry| entry.is_alive()) {
            let file = entry.data_file();
            match file.content_type() {
                DataContentType::Data => data.push(LiveDataFile {
                    sequence_number: entry.sequence_number().unwrap_or(0),
                    path: file.file_path().to_string(),
                    size: file.file_size_in_bytes(),
                    partition: (spec_id, file.partition().clone()),
                }),
                DataContentType::PositionDeletes => deletes.push(file.clone()),
                DataContentType::EqualityDeletes => {
                    return Err(SinkError::new(
                        ErrorKind::InvalidConfig,
                        "the Iceberg table holds equality delete files, which a sink with DELETE MODE = 'position' cannot index",
                    )
                    .with_detail(format!("Delete file {} holds equality deletes.", file.file_path()))
                    .with_hint("Rewrite the table's data files applying its deletes (a compaction), or drop and recreate the sink into a new table.")
                    .with_retryable(false));
                }
            }
        }
    }
    // Older files first: should a key have two live rows, the newest is its current one.
    data.sort_by_key(|file| file.sequence_number);
    let live: HashSet<&str> = data.iter().map(|file| file.path.as_str()).collect();
    let deleted = read_position_deletes(table, &deletes, &live).await?;
    let mut vectors = takes_deletion_vectors(table).then(|| live_vectors(&deletes));
    let mut index = PositionIndex::empty(Some(head.snapshot_id()), vectors.is_some());
    let mut duplicates = 0u64;
    for file in &data {
        let removed = deleted.get(file.path.as_str());
        let file_index = index.add_file(file.path.clone(), file.partition.clone())?;
        if let (Some(vectors), Some(removed)) = (vectors.as_mut(), removed) {
            let deletes = FileDeletes {
                positions: removed.iter().map(|pos| u64::from(*pos)).collect(),
                vector: vectors.remove(file.path.as_str()),
            };
            index.vectors.insert(file_index, deletes);
        }
        let mut batches = read_columns(table, &file.path, file.size, key_field_ids).await?;
        let mut pos = 0u64;
        while let Some(columns) = batches.next().await? {
            let rows = columns.first().map_or(0, |c| c.len()) as u64;
            for (offset, id) in encoder.ids(&columns)?.into_iter().enumerate() {
                let slot = slot(file_index, pos + offset as u64)?;
                if removed.is_some_and(|rows| rows.binary_search(&slot.pos).is_ok()) {
                    continue;
                }
                if index.insert(id, slot) {
                    duplicates += 1;
                }
            }
            pos += rows;
        }
    }
    if duplicates > 0 {
        tracing::warn!(table = %table.metadata_location, duplicates, "the sink's table holds keys more than once; their next change deletes every copy");
    }
    tracing::info!(
        keys = index.rows.len(),
        files = index.files.len(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "built the position index of the sink's table"
    );
    Ok(index)
}

/// Whether position deletes go into `table` as deletion vectors: format version 3 takes
/// them instead of position delete files.
pub(crate) fn takes_deletion_vectors(table: &LoadedTable) -> bool {
    table.metadata.format_version() == iceberg::spec::FormatVersion::V3
}

/// The live deletion vectors among `deletes`, by the data file each applies to.
fn live_vectors(deletes: &[DataFile]) -> HashMap<String, DataFile> {
    deletes
        .iter()
        .filter(|file| crate::dv::is_deletion_vector(file))
        .filter_map(|file| Some((file.referenced_data_file()?, file.clone())))
        .collect()
}

/// The rows the position deletes `deletes` (position delete files and deletion vectors)
/// remove from the files `live`, by file path (sorted, each once; a row past `u32::MAX`
/// cannot be indexed anyway, see [`slot`]).
pub(crate) async fn read_position_deletes<'a>(
    table: &LoadedTable,
    deletes: &[DataFile],
    live: &HashSet<&'a str>,
) -> Result<HashMap<&'a str, Vec<u32>>, SinkError> {
    let mut deleted: HashMap<&'a str, Vec<u32>> = HashMap::new();
    for delete in deletes {
        if crate::dv::is_deletion_vector(delete) {
            let target = delete.referenced_data_file();
            let Some(live) = target.as_deref().and_then(|path| live.get(path)) else {
                continue;
            };
            let positions = crate::dv::read_deletion_vector(table, delete).await?;
            let rows = deleted.entry(live).or_default();
            rows.extend(positions.iter().map_while(|pos| u32::try_from(pos).ok()));
            continue;
        }
        read_position_delete_file(table, delete, live, &mut deleted).await?;
    }
    for positions in deleted.values_mut() {
        positions.sort_unstable();
        positions.dedup();
    }
    Ok(deleted)
}

/// Adds the rows the position delete file `delete` removes from the files `live` to
/// `deleted`.
async fn read_position_delete_file<'a>(
    table: &LoadedTable,
    delete: &DataFile,
    live: &HashSet<&'a str>,
    deleted: &mut HashMap<&'a str, Vec<u32>>,
) -> Result<(), SinkError> {
    let path = delete.file_path();
    let size = delete.file_size_in_bytes();
    let mut batches = read_columns(table, path, size, &[FILE_PATH_FIELD_ID, POS_FIELD_ID]).await?;
    while let Some(columns) = batches.next().await? {
        let (Some(paths), Some(positions)) = (
            columns[0].as_any().downcast_ref::<StringArray>(),
            columns[1].as_any().downcast_ref::<Int64Array>(),
        ) else {
            return Err(unreadable(
                path,
                "file_path and pos are not string and long",
            ));
        };
        for (file, pos) in paths.iter().zip(positions.iter()) {
            if let (Some(file), Some(pos)) = (file, pos)
                && let Some(live) = live.get(file)
                && let Ok(pos) = u32::try_from(pos)
            {
                deleted.entry(live).or_default().push(pos);
            }
        }
    }
    Ok(())
}

pub(crate) async fn load_manifest(
    table: &LoadedTable,
    manifest: &iceberg::spec::ManifestFile,
) -> Result<iceberg::spec::Manifest, SinkError> {
    manifest.load_manifest(&table.file_io).await.map_err(|err| {
        storage_error(
            format!("cannot read manifest {}", manifest.manifest_path),
            err,
        )
    })
}

fn parquet_error(path: &str, err: parquet::errors::ParquetError) -> SinkError {
    SinkError::caused_by(ErrorKind::Storage, format!("cannot read {path}"), err)
}

pub(crate) fn unreadable(path: &str, why: &str) -> SinkError {
    SinkError::new(
        ErrorKind::UnexpectedResponse,
        format!("cannot read the table's file {path}: {why}"),
    )
}

/// A stream of a Parquet file's top-level columns `field_ids` (in that order), read
/// column chunk by column chunk.
pub(crate) struct ColumnReader {
    stream: parquet::arrow::async_reader::ParquetRecordBatchStream<ArrowFileReader>,
    /// For each wanted field id, its column in the batches read.
    order: Vec<usize>,
    path: String,
}

impl ColumnReader {
    pub(crate) async fn next(&mut self) -> Result<Option<Vec<ArrayRef>>, SinkError> {
        let Some(batch): Option<RecordBatch> = self
            .stream
            .try_next()
            .await
            .map_err(|err| parquet_error(&self.path, err))?
        else {
            return Ok(None);
        };
        Ok(Some(
            self.order
                .iter()
                .map(|at| batch.column(*at).clone())
                .collect(),
        ))
    }
}

pub(crate) async fn read_columns(
    table: &LoadedTable,
    path: &str,
    size: u64,
    field_ids: &[i32],
) -> Result<ColumnReader, SinkError> {
    let input = table
        .file_io
        .new_input(path)
        .map_err(|err| storage_error(format!("cannot open {path}"), err))?;
    let reader = input
        .reader()
        .await
        .map_err(|err| storage_error(format!("cannot open {path}"), err))?;
    let builder =
        ParquetRecordBatchStreamBuilder::new(ArrowFileReader::new(FileMetadata { size }, reader))
            .await
            .map_err(|err| parquet_error(path, err))?;
    let roots = builder.parquet_schema().root_schema().get_fields();
    let mut wanted = Vec::with_capacity(field_ids.len());
    for id in field_ids {
        let root = roots
            .iter()
            .position(|field| {
                let info = field.get_basic_info();
                info.has_id() && info.id() == *id
            })
            .ok_or_else(|| unreadable(path, &format!("it has no column with field id {id}")))?;
        wanted.push(root);
    }
    let mask = ProjectionMask::roots(builder.parquet_schema(), wanted.iter().copied());
    // The batches hold the projected roots in file order.
    let mut sorted = wanted.clone();
    sorted.sort_unstable();
    let order = wanted
        .iter()
        .map(|root| sorted.binary_search(root).unwrap_or(0))
        .collect();
    let stream = builder
        .with_projection(mask)
        .with_batch_size(KEY_BATCH_ROWS)
        .build()
        .map_err(|err| parquet_error(path, err))?;
    Ok(ColumnReader {
        stream,
        order,
        path: path.to_string(),
    })
}

// -------------------------------------------------------------------------------------
// Writing a batch.

/// The schema of position delete files: Iceberg's reserved `file_path` and `pos`.
pub fn position_delete_schema() -> Result<SchemaRef, SinkError> {
    Schema::builder()
        .with_fields(vec![
            Arc::new(NestedField::required(
                FILE_PATH_FIELD_ID,
                "file_path",
                Type::Primitive(PrimitiveType::String),
            )),
            Arc::new(NestedField::required(
                POS_FIELD_ID,
                "pos",
                Type::Primitive(PrimitiveType::Long),
            )),
        ])
        .build()
        .map(Arc::new)
        .map_err(|err| {
            SinkError::internal(format!("cannot build the position delete schema: {err}"))
        })
}

/// One key's outcome in a batch: the row holding its values (at the writer's key
/// projection) and its new row, if any.
pub(crate) type KeyOutcome<'a> = (&'a [Datum], Option<&'a [Datum]>);

/// Writes one UPSERT batch in position mode: new rows into data files, and for every key
/// touched a position delete of its current row.
pub(crate) struct PositionBatchWriter {
    /// Data writers, handed batches in turn (rows read as rows go to the first). Their
    /// files come back in writer order, so a writer's rows follow its predecessors'.
    data: Vec<PipelinedWriter>,
    turn: usize,
    /// Per writer, the keys of the rows it was given, in order: placed among the batch's
    /// rows at finish.
    written: Vec<Vec<KeyId>>,
    /// The current rows of the keys touched.
    deletes: Vec<RowSlot>,
    update: IndexUpdate,
    base_snapshot_id: Option<i64>,
    limits: BatchLimits,
    columns: usize,
}

impl PositionBatchWriter {
    /// A writer of a batch over `data` (at least one writer).
    pub fn new(
        data: Vec<PipelinedWriter>,
        index: &PositionIndex,
        limits: BatchLimits,
        columns: usize,
    ) -> PositionBatchWriter {
        PositionBatchWriter {
            written: data.iter().map(|_| Vec::new()).collect(),
            data,
            turn: 0,
            deletes: Vec::new(),
            update: IndexUpdate::default(),
            base_snapshot_id: index.snapshot_id,
            limits,
            columns,
        }
    }

    /// Writes the outcomes of some keys (each key once per batch), their keys at
    /// `key_projection` of the rows given.
    pub async fn write(
        &mut self,
        index: &PositionIndex,
        encoder: &KeyEncoder,
        outcomes: &[KeyOutcome<'_>],
        key_projection: &[usize],
    ) -> Result<(), SinkError> {
        let all_columns: Vec<usize> = (0..self.columns).collect();
        for group in outcomes.chunks(KEY_BATCH_ROWS) {
            let keys: Vec<&[Datum]> = group.iter().map(|(key, _)| *key).collect();
            let ids = encoder.ids_of_rows(&keys, key_projection)?;
            let mut rows = RowBatch::new(self.limits);
            let (Some(data), Some(written)) = (self.data.first_mut(), self.written.first_mut())
            else {
                return Err(SinkError::internal(
                    "a position batch without a data writer",
                ));
            };
            for ((_, value), id) in group.iter().zip(ids) {
                self.deletes.extend(index.rows_of(id));
                match value {
                    Some(row) => {
                        let bytes = crate::types::row_bytes(row);
                        add_row(&mut rows, data, &all_columns, row, bytes).await?;
                        written.push(id);
                    }
                    None => self.update.removed.push(id),
                }
            }
            rows.flush(data, &all_columns, 0).await?;
        }
        Ok(())
    }

    /// Writes a batch consolidated in columns (see `crate::consolidate_columns`):
    /// `removed`, batches of the key columns of the keys the batch leaves without a row,
    /// and `upserts`, batches of the keys' final rows (whole rows, the key at
    /// `key_indexes`). Each key is in one of them at most once. Every key's current rows
    /// are deleted, as [`PositionBatchWriter::write`] does.
    pub async fn write_columns(
        &mut self,
        index: &PositionIndex,
        encoder: &KeyEncoder,
        removed: impl Iterator<Item = Result<RecordBatch, SinkError>>,
        upserts: impl Iterator<Item = Result<RecordBatch, SinkError>>,
        key_indexes: &[usize],
    ) -> Result<(), SinkError> {
        for keys in removed {
            for id in encoder.ids(keys?.columns())? {
                self.deletes.extend(index.rows_of(id));
                self.update.removed.push(id);
            }
        }
        for rows in upserts {
            let rows = rows?;
            let keys: Vec<ArrayRef> = key_indexes
                .iter()
                .map(|index| rows.column(*index).clone())
                .collect();
            let ids = encoder.ids(&keys)?;
            for id in &ids {
                self.deletes.extend(index.rows_of(*id));
            }
            let writer = self.turn % self.data.len();
            self.turn += 1;
            self.written[writer].extend(ids);
            self.data[writer].write_batch(rows).await?;
        }
        Ok(())
    }

    /// Closes the data writers: their files in writer order, and the batch's new rows
    /// placed among them (each writer's rows after its predecessors').
    async fn close_data(&mut self) -> Result<Vec<DataFile>, SinkError> {
        let writers = std::mem::take(&mut self.data);
        let closed = futures::future::try_join_all(writers.into_iter().map(PipelinedWriter::close));
        let files = closed.await?.into_iter().flatten().collect();
        for id in std::mem::take(&mut self.written).into_iter().flatten() {
            self.update.added.push((id, self.update.rows_written));
            self.update.rows_written += 1;
        }
        Ok(files)
    }

    /// Closes the data files and writes the position delete files (sorted by file path
    /// and position, as the spec requires), one set per partition of the files they point
    /// into (a position delete file belongs to the partition and spec of its data files).
    pub async fn finish(
        mut self,
        index: &PositionIndex,
        keys: KeyColumns<'_>,
        files: DeleteFiles<'_>,
    ) -> Result<FinishedPositions, SinkError> {
        let data = self.close_data().await?;
        let spans_partitions = data
            .windows(2)
            .any(|pair| pair[0].partition() != pair[1].partition());
        if spans_partitions {
            let placed = read_back_placements(files.table, keys, &data, &self.update.added).await?;
            self.update.placed = Some(placed);
        }
        let mut deletes: Vec<(&str, u32, u32)> = self
            .deletes
            .iter()
            .map(|slot| {
                index
                    .files
                    .get(slot.file as usize)
                    .map(|path| (path.as_str(), slot.pos, slot.file))
                    .ok_or_else(|| SinkError::internal("a position names no indexed file"))
            })
            .collect::<Result<_, _>>()?;
        deletes.sort_unstable();
        deletes.dedup();
        let mut referenced: Vec<String> = Vec::new();
        for (path, _, _) in &deletes {
            if referenced.last().map(String::as_str) != Some(*path) {
                referenced.push(path.to_string());
            }
        }
        let delete_rows = deletes.len() as u64;
        let as_vectors = takes_deletion_vectors(files.table);
        let written = if as_vectors {
            let (written, vectors) = write_vectors(index, &files, &deletes).await?;
            self.update.vectors = vectors;
            written
        } else {
            write_delete_files(index, &files, &deletes).await?
        };
        let messages = self.update.rows_written + delete_rows;
        Ok(FinishedPositions {
            data,
            deletes: written.files,
            file_specs: written.file_specs,
            positions: StagedPositions {
                base_snapshot_id: self.base_snapshot_id,
                referenced,
                replaced: written.replaced,
                as_vectors,
                update: self.update,
            },
            messages,
        })
    }
}

/// Writes `deletes` (file path, row, file index; sorted) as position delete files, one set
/// per partition of the files they point into (a position delete file belongs to the
/// partition and spec of its data files).
async fn write_delete_files(
    index: &PositionIndex,
    files: &DeleteFiles<'_>,
    deletes: &[(&str, u32, u32)],
) -> Result<WrittenDeletes, SinkError> {
    // Per partition, in order of first appearance; each keeps the sorted order.
    let mut groups: Vec<(&FilePartition, Vec<(&str, u32)>)> = Vec::new();
    for (path, pos, file) in deletes {
        let partition = index.partition_of(*file)?;
        match groups.iter_mut().find(|(p, _)| *p == partition) {
            Some((_, rows)) => rows.push((path, *pos)),
            None => groups.push((partition, vec![(path, *pos)])),
        }
    }
    let mut written = WrittenDeletes::default();
    for (made, ((spec_id, tuple), rows)) in groups.into_iter().enumerate() {
        let writer = files.writer(made, *spec_id, tuple)?;
        written.add(
            write_position_deletes(writer, &rows).await?,
            *spec_id,
            files.spec_id,
        );
    }
    Ok(written)
}

/// Writes `deletes` (file path, row, file index; sorted) as a deletion vector per data
/// file, each holding the file's rows deleted before too, and returns them with the
/// vectors they replace and the index's new state of each file. The vectors of one spec
/// share one Puffin file (a commit touching many data files writes one small file, not
/// one each); a spec a file of its own, as a delete file belongs to one spec.
async fn write_vectors(
    index: &PositionIndex,
    files: &DeleteFiles<'_>,
    deletes: &[(&str, u32, u32)],
) -> Result<(WrittenDeletes, Vec<(u32, FileDeletes)>), SinkError> {
    let mut per_file: Vec<(u32, &str, roaring::RoaringTreemap)> = Vec::new();
    for (path, pos, file) in deletes {
        match per_file.last_mut() {
            Some((last, _, positions)) if last == file => {
                positions.insert(u64::from(*pos));
            }
            _ => per_file.push((*file, path, [u64::from(*pos)].into_iter().collect())),
        }
    }
    // Each file's vector holds its rows deleted before too.
    for (file, _, positions) in &mut per_file {
        if let Some(before) = index.vectors.get(file) {
            *positions |= &before.positions;
        }
    }
    let mut specs: Vec<i32> = Vec::new();
    for (file, _, _) in &per_file {
        let (spec_id, _) = index.partition_of(*file)?;
        if !specs.contains(spec_id) {
            specs.push(*spec_id);
        }
    }
    let mut written = WrittenDeletes::default();
    let mut states = Vec::with_capacity(per_file.len());
    for spec_id in specs {
        let mut targets = Vec::new();
        let mut indexed = Vec::new();
        for (file, path, positions) in &per_file {
            let (file_spec, partition) = index.partition_of(*file)?;
            if *file_spec == spec_id {
                targets.push(crate::dv::DvTarget {
                    data_file: path,
                    spec_id,
                    partition,
                    positions,
                });
                indexed.push((*file, positions));
            }
        }
        let vectors =
            crate::dv::write_deletion_vectors(files.table, &files.prefix, &targets).await?;
        for ((file, positions), vector) in indexed.into_iter().zip(&vectors) {
            let before = index.vectors.get(&file);
            written
                .replaced
                .extend(before.and_then(|before| before.vector.clone()));
            let state = FileDeletes {
                positions: positions.clone(),
                vector: Some(vector.clone()),
            };
            states.push((file, state));
        }
        written.add(vectors, spec_id, files.spec_id);
    }
    Ok((written, states))
}

/// How keys are read from the table's data files: the encoder and the key's field ids.
pub(crate) struct KeyColumns<'a> {
    pub encoder: &'a KeyEncoder,
    pub field_ids: &'a [i32],
}

/// Where each key of `added` is in `data`, read from the files' key columns: the data file
/// (its index in `data`) and the row. A batch holds each key once.
async fn read_back_placements(
    table: &LoadedTable,
    keys: KeyColumns<'_>,
    data: &[DataFile],
    added: &[(KeyId, u64)],
) -> Result<Vec<(KeyId, u32, u64)>, SinkError> {
    let wanted: HashSet<KeyId> = added.iter().map(|(id, _)| *id).collect();
    let mut placed = Vec::with_capacity(added.len());
    for (at, file) in data.iter().enumerate() {
        let at = u32::try_from(at)
            .map_err(|_| SinkError::internal("a batch wrote too many data files"))?;
        let mut batches = read_columns(
            table,
            file.file_path(),
            file.file_size_in_bytes(),
            keys.field_ids,
        )
        .await?;
        let mut pos = 0u64;
        while let Some(columns) = batches.next().await? {
            let ids = keys.encoder.ids(&columns)?;
            let rows = ids.len() as u64;
            for (offset, id) in ids.into_iter().enumerate() {
                if wanted.contains(&id) {
                    placed.push((id, at, pos + offset as u64));
                }
            }
            pos += rows;
        }
    }
    if placed.len() != added.len() {
        return Err(SinkError::internal(format!(
            "the batch's data files hold {} of the {} keys it wrote",
            placed.len(),
            added.len()
        )));
    }
    Ok(placed)
}

/// A batch's files in position mode, written by [`PositionBatchWriter::finish`].
pub(crate) struct FinishedPositions {
    pub data: Vec<DataFile>,
    pub deletes: Vec<DataFile>,
    /// The spec of each delete file not of the batch's spec, by path.
    pub file_specs: std::collections::BTreeMap<String, i32>,
    pub positions: StagedPositions,
    /// Rows written (data and delete rows).
    pub messages: u64,
}

/// A batch's delete files: the files written, the spec of those not of the batch's spec
/// (by path), and the deletion vectors they replace.
#[derive(Default)]
struct WrittenDeletes {
    files: Vec<DataFile>,
    file_specs: std::collections::BTreeMap<String, i32>,
    replaced: Vec<DataFile>,
}

impl WrittenDeletes {
    fn add(&mut self, written: Vec<DataFile>, spec_id: i32, batch_spec_id: i32) {
        if spec_id != batch_spec_id {
            self.file_specs
                .extend(written.iter().map(|f| (f.file_path().to_string(), spec_id)));
        }
        self.files.extend(written);
    }
}

/// Where a batch's position delete files go: the table, the batch's spec and file names.
pub(crate) struct DeleteFiles<'a> {
    pub table: &'a LoadedTable,
    /// The spec the batch's data files are written with.
    pub spec_id: i32,
    pub prefix: String,
    pub target_file_size: usize,
}

impl DeleteFiles<'_> {
    /// The writer of the position deletes into data files of spec `spec_id` and partition
    /// `tuple` (the `made`-th writer of the batch, which names its files apart).
    fn writer(&self, made: usize, spec_id: i32, tuple: &Struct) -> Result<FileWriter, SinkError> {
        let prefix = match made {
            0 => self.prefix.clone(),
            n => format!("{}-{n}", self.prefix),
        };
        let writer = position_delete_writer(self.table, spec_id, prefix, self.target_file_size)?;
        placed_in_partition(self.table, writer, spec_id, tuple)
    }
}

/// `writer`, writing files of partition `tuple` of spec `spec_id` (as they are).
pub(crate) fn placed_in_partition(
    table: &LoadedTable,
    writer: FileWriter,
    spec_id: i32,
    tuple: &Struct,
) -> Result<FileWriter, SinkError> {
    let metadata = &table.metadata;
    let spec = crate::partition::spec_by_id(metadata, spec_id)?;
    if spec.is_unpartitioned() {
        return Ok(writer);
    }
    let schema = metadata.current_schema();
    // The key's path is computed from the spec's partition type: it must bind.
    spec.partition_type(schema).map_err(|err| {
        SinkError::caused_by(
            ErrorKind::InvalidConfig,
            format!("partition spec {spec_id} no longer binds to the table's schema"),
            err,
        )
        .with_retryable(false)
    })?;
    Ok(writer.in_partition(iceberg::spec::PartitionKey::new(
        spec.as_ref().clone(),
        schema.clone(),
        tuple.clone(),
    )))
}

/// Position deletes go into format version 2 tables as position delete files and into
/// version 3 tables as deletion vectors; version 1 tables hold no deletes.
pub(crate) fn check_format_version(table: &LoadedTable) -> Result<(), SinkError> {
    use iceberg::spec::FormatVersion;
    if table.metadata.format_version() != FormatVersion::V1 {
        return Ok(());
    }
    Err(SinkError::new(
        ErrorKind::InvalidConfig,
        "DELETE MODE = 'position' cannot write position deletes into an Iceberg table of format version 1",
    )
    .with_detail("Format version 1 tables hold no delete files; version 2 takes position delete files and version 3 deletion vectors.")
    .with_hint("Drop the sink and create it again into a new TABLE: floe creates its tables with format version 2.")
    .with_retryable(false))
}

/// A writer of position delete files for a batch.
pub(crate) fn position_delete_writer(
    table: &LoadedTable,
    spec_id: i32,
    prefix: String,
    target_file_size: usize,
) -> Result<FileWriter, SinkError> {
    FileWriter::new(
        table,
        position_delete_schema()?,
        FileContent::PositionDeletes,
        spec_id,
        prefix,
        target_file_size,
    )
}

pub(crate) async fn write_position_deletes(
    mut writer: FileWriter,
    deletes: &[(&str, u32)],
) -> Result<Vec<DataFile>, SinkError> {
    let schema = writer.arrow_schema();
    for chunk in deletes.chunks(KEY_BATCH_ROWS) {
        let paths: StringArray = chunk.iter().map(|(path, _)| Some(*path)).collect();
        let positions: Int64Array = chunk.iter().map(|(_, pos)| Some(i64::from(*pos))).collect();
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(paths) as ArrayRef, Arc::new(positions) as ArrayRef],
        )
        .map_err(|err| SinkError::internal(format!("cannot build position deletes: {err}")))?;
        writer.write_batch(batch).await?;
    }
    writer.close().await
}

/// Whether `positions` still holds on `table`'s main branch: the data files its deletes
/// point into are live, and each one's deletion vector is still the one the batch's new
/// vector replaces (another writer's vector for one of them would be lost otherwise).
async fn positions_still_hold(
    table: &LoadedTable,
    positions: &StagedPositions,
) -> Result<bool, SinkError> {
    let vectors = takes_deletion_vectors(table);
    let Some((missing, live_vectors)) = live_state(table, &positions.referenced, vectors).await?
    else {
        return Ok(positions.referenced.is_empty());
    };
    if !missing.is_empty() {
        return Ok(false);
    }
    // By path and offset: the vectors of one commit share their Puffin file.
    let mut replaced: Vec<_> = positions
        .replaced
        .iter()
        .map(crate::dv::entry_key)
        .collect();
    replaced.sort_unstable();
    let mut live: Vec<_> = live_vectors
        .iter()
        .map(|(path, offset)| (path.as_str(), *offset))
        .collect();
    live.sort_unstable();
    Ok(replaced == live)
}

/// The data files of `referenced` not live in `table`'s main branch and, when `vectors`,
/// the live deletion vectors of those that are (path and offset); `None` for an empty
/// table.
async fn live_state<'a>(
    table: &LoadedTable,
    referenced: &'a [String],
    vectors: bool,
) -> Result<Option<(HashSet<&'a str>, Vec<(String, Option<i64>)>)>, SinkError> {
    let Some(head) = table.metadata.snapshot_for_ref(MAIN_BRANCH) else {
        return Ok(None);
    };
    let mut missing: HashSet<&str> = referenced.iter().map(String::as_str).collect();
    let wanted = missing.clone();
    let mut live_vectors = Vec::new();
    for manifest in read_manifest_list(table, head.manifest_list()).await? {
        let is_data = manifest.content == iceberg::spec::ManifestContentType::Data;
        if !is_data && !vectors {
            continue;
        }
        let manifest = load_manifest(table, &manifest).await?;
        for entry in manifest.entries().iter().filter(|entry| entry.is_alive()) {
            let file = entry.data_file();
            if is_data {
                missing.remove(file.file_path());
            } else if crate::dv::is_deletion_vector(file)
                && file
                    .referenced_data_file()
                    .is_some_and(|target| wanted.contains(target.as_str()))
            {
                live_vectors.push((file.file_path().to_string(), file.content_offset()));
            }
        }
    }
    Ok(Some((missing, live_vectors)))
}

/// Why a batch with position deletes cannot be committed on the table's new head (see
/// [`must_restage`]).
const FILES_REWRITTEN: &str =
    "the data files the batch's position deletes point into were rewritten meanwhile";
/// Why a batch with position deletes cannot be committed on the table as it is now:
/// someone upgraded it to format version 3, which takes deletion vectors and no position
/// delete file.
const FORMAT_UPGRADED: &str =
    "the table was upgraded to format version 3 after the batch's position deletes were written";

/// Whether a commit failed because its position deletes no longer fit the table: the
/// data files they point into were rewritten meanwhile (a compaction), or the table now
/// takes deletion vectors. The batch must be staged again, from the index built again on
/// the table as it is now.
pub(crate) fn must_restage(error: &SinkError) -> bool {
    error.kind == ErrorKind::CommitConflict
        && (error.message == FILES_REWRITTEN || error.message == FORMAT_UPGRADED)
}

/// A sink commit with position deletes: the commit's own intent, which may be built again
/// on a newer head only while every data file its deletes point into is still live there,
/// and which remembers the snapshots it built (to tell its own from another instance's).
pub(crate) struct PositionGuard<'a> {
    inner: &'a (dyn CommitIntent + 'a),
    positions: Option<&'a StagedPositions>,
    prepared: Mutex<Vec<i64>>,
}

impl<'a> PositionGuard<'a> {
    pub fn new(
        inner: &'a (dyn CommitIntent + 'a),
        positions: Option<&'a StagedPositions>,
    ) -> PositionGuard<'a> {
        PositionGuard {
            inner,
            positions,
            prepared: Mutex::new(Vec::new()),
        }
    }

    /// Whether `table`'s main branch points at a snapshot built by this commit.
    pub fn made_head_of(&self, table: &LoadedTable) -> bool {
        let Some(head) = table.metadata.snapshot_for_ref(MAIN_BRANCH) else {
            return false;
        };
        self.prepared
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .contains(&head.snapshot_id())
    }
}

#[async_trait]
impl CommitIntent for PositionGuard<'_> {
    async fn prepare(&self, base: &LoadedTable) -> Result<PreparedCommit, SinkError> {
        if let Some(positions) = self.positions {
            if positions.as_vectors != takes_deletion_vectors(base) {
                return Err(SinkError::new(ErrorKind::CommitConflict, FORMAT_UPGRADED)
                    .with_detail("The batch is written again against the table as it is now.")
                    .with_retryable(true));
            }
            let head = base
                .metadata
                .snapshot_for_ref(MAIN_BRANCH)
                .map(|s| s.snapshot_id());
            if head != positions.base_snapshot_id && !positions_still_hold(base, positions).await? {
                return Err(SinkError::new(ErrorKind::CommitConflict, FILES_REWRITTEN)
                    .with_detail("The batch is written again against the table as it is now.")
                    .with_retryable(true));
            }
        }
        let prepared = self.inner.prepare(base).await?;
        self.prepared
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(prepared.snapshot_id);
        Ok(prepared)
    }

    fn judge(&self, reloaded: &LoadedTable) -> Result<Verdict, SinkError> {
        self.inner.judge(reloaded)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use iceberg::spec::{NestedField, PrimitiveType, Type};

    fn key_schema(primitive: PrimitiveType) -> Schema {
        Schema::builder()
            .with_fields(vec![Arc::new(NestedField::required(
                1,
                "id",
                Type::Primitive(primitive),
            ))])
            .build()
            .unwrap()
    }

    #[test]
    fn short_keys_are_kept_exactly_and_long_ones_hashed() {
        let encoder = KeyEncoder::new(&key_schema(PrimitiveType::Long)).unwrap();
        let rows: Vec<Vec<Datum>> = (0..1_000).map(|i| vec![Datum::Int64(i)]).collect();
        let refs: Vec<&[Datum]> = rows.iter().map(Vec::as_slice).collect();
        let ids = encoder.ids_of_rows(&refs, &[0]).unwrap();
        let distinct: HashSet<KeyId> = ids.iter().copied().collect();
        assert_eq!(distinct.len(), 1_000);
        // Packed, not hashed: the low byte is the length.
        assert!(ids.iter().all(|id| (id[0] & 0xFF) <= 15));
        // The same values give the same ids.
        assert_eq!(encoder.ids_of_rows(&refs, &[0]).unwrap(), ids);

        let encoder = KeyEncoder::new(&key_schema(PrimitiveType::String)).unwrap();
        let rows: Vec<Vec<Datum>> = (0..1_000)
            .map(|i| vec![Datum::Text(format!("a key long enough to be hashed {i}"))])
            .collect();
        let refs: Vec<&[Datum]> = rows.iter().map(Vec::as_slice).collect();
        let ids = encoder.ids_of_rows(&refs, &[0]).unwrap();
        assert!(ids.iter().all(|id| id[0] & 0xFF == 0xFF));
        assert_eq!(ids.iter().copied().collect::<HashSet<_>>().len(), 1_000);
        assert_eq!(encoder.ids_of_rows(&refs, &[0]).unwrap(), ids);
    }

    #[test]
    fn an_index_entry_is_24_bytes() {
        // The bound on memory per key (plus the hash table's control byte and free room).
        assert_eq!(std::mem::size_of::<(KeyId, RowSlot)>(), 24);
    }

    #[test]
    fn an_update_moves_keys_to_their_new_rows() {
        let mut index = PositionIndex::empty(Some(1), true);
        let old = index
            .add_file("old.parquet".into(), (0, Struct::empty()))
            .unwrap();
        index.insert([7, 0], RowSlot { file: old, pos: 3 });
        index.insert([8, 0], RowSlot { file: old, pos: 4 });
        // A duplicate of 8 (a table that held it twice).
        assert!(index.insert([8, 0], RowSlot { file: old, pos: 5 }));
        assert_eq!(index.rows_of([8, 0]).count(), 2);
        let update = IndexUpdate {
            removed: vec![[7, 0]],
            added: vec![([8, 0], 0), ([9, 0], 1), ([10, 0], 2)],
            rows_written: 3,
            placed: None,
            vectors: Vec::new(),
        };
        let files = [data_file("a.parquet", 2), data_file("b.parquet", 1)];
        index.apply(update, (0, &files), Some(2)).unwrap();
        assert_eq!(index.rows_of([7, 0]).count(), 0);
        let path = |slot: RowSlot| (index.files[slot.file as usize].clone(), slot.pos);
        assert_eq!(
            index.rows_of([8, 0]).map(path).collect::<Vec<_>>(),
            [("a.parquet".to_string(), 0)]
        );
        assert_eq!(
            index.rows_of([9, 0]).map(path).collect::<Vec<_>>(),
            [("a.parquet".to_string(), 1)]
        );
        assert_eq!(
            index.rows_of([10, 0]).map(path).collect::<Vec<_>>(),
            [("b.parquet".to_string(), 0)]
        );
        assert_eq!(index.snapshot_id, Some(2));
        // Files that do not hold the rows written are an error, never a wrong index.
        let update = IndexUpdate {
            removed: vec![],
            added: vec![([11, 0], 0)],
            rows_written: 1,
            placed: None,
            vectors: Vec::new(),
        };
        assert!(index.apply(update, (0, &[]), Some(3)).is_err());
    }

    #[test]
    fn keys_read_back_from_fanned_out_files_go_where_they_were_found() {
        let mut index = PositionIndex::empty(Some(1), true);
        // Written in the order 20, 21, 22, but 21 went into the second partition's file:
        // its place comes from reading the files back, not from the order.
        let update = IndexUpdate {
            removed: vec![],
            added: vec![([20, 0], 0), ([21, 0], 1), ([22, 0], 2)],
            rows_written: 3,
            placed: Some(vec![([20, 0], 0, 0), ([22, 0], 0, 1), ([21, 0], 1, 0)]),
            vectors: Vec::new(),
        };
        let files = [data_file("p0.parquet", 2), data_file("p1.parquet", 1)];
        index.apply(update, (0, &files), Some(2)).unwrap();
        let path = |slot: RowSlot| (index.files[slot.file as usize].clone(), slot.pos);
        let place = |id: u64| index.rows_of([id, 0]).map(path).collect::<Vec<_>>();
        assert_eq!(place(20), [("p0.parquet".to_string(), 0)]);
        assert_eq!(place(22), [("p0.parquet".to_string(), 1)]);
        assert_eq!(place(21), [("p1.parquet".to_string(), 0)]);
    }

    /// A data file of the unpartitioned spec 0 holding `rows` rows (for unit tests).
    #[test]
    fn the_index_follows_a_compaction_to_the_rows_it_wrote() {
        use crate::maintenance::remap::tests::a_and_b_into_x_and_y;
        let key = |n: u64| -> KeyId { [n, 0] };
        let mut index = PositionIndex::empty(Some(1), true);
        let unpartitioned = || (0, Struct::empty());
        let (a, b, c) = (
            index.add_file("a".into(), unpartitioned()).unwrap(),
            index.add_file("b".into(), unpartitioned()).unwrap(),
            index.add_file("c".into(), unpartitioned()).unwrap(),
        );
        // Rows live in a (0, 2, 4: 1 and 3 deleted), in b (2, 3: 0 deleted by the
        // compaction's base, 1 by a commit since, carried over), a duplicate in b, and a
        // row in c, which the compaction left alone.
        for (id, file, pos) in [(1, a, 0), (2, a, 2), (3, a, 4), (4, b, 2), (6, c, 7)] {
            index.insert(key(id), RowSlot { file, pos });
        }
        index.insert(key(2), RowSlot { file: b, pos: 3 });
        let deleted = |positions: &[u64]| FileDeletes {
            positions: positions.iter().copied().collect(),
            vector: None,
        };
        index.vectors.insert(a, deleted(&[1, 3]));
        index.vectors.insert(c, deleted(&[0]));
        let rewrite = Rewrite {
            snapshot_id: 2,
            parent_id: Some(1),
            spec_id: 0,
            maps: vec![a_and_b_into_x_and_y()],
            written: vec![data_file("x", 4), data_file("y", 2)],
            carried: Vec::new(),
        };
        let written = index.follow(&rewrite).unwrap();
        let (x, y) = (written["x"], written["y"]);
        let at = |id: u64| index.rows_of(key(id)).collect::<Vec<_>>();
        // a0 a2 a4 b1 | b2 b3: x holds a0 a2 a4 b1, y holds b2 b3.
        assert_eq!(at(1), [RowSlot { file: x, pos: 0 }]);
        assert_eq!(
            at(2),
            [RowSlot { file: y, pos: 1 }, RowSlot { file: x, pos: 1 }]
        );
        assert_eq!(at(3), [RowSlot { file: x, pos: 2 }]);
        assert_eq!(at(4), [RowSlot { file: y, pos: 0 }]);
        assert_eq!(at(6), [RowSlot { file: c, pos: 7 }]);
        // The rewritten file's deletes were applied; the untouched file keeps its own.
        assert!(!index.vectors.contains_key(&a));
        assert!(index.vectors.contains_key(&c));
        assert_eq!(index.files[x as usize], "x");

        // A live row the map does not hold (the compaction dropped it) is an error: the
        // index is then built again from the table.
        let mut index = PositionIndex::empty(Some(1), true);
        let a = index.add_file("a".into(), unpartitioned()).unwrap();
        index.insert(key(1), RowSlot { file: a, pos: 1 });
        assert!(index.follow(&rewrite).is_err());
    }

    pub(crate) fn data_file(path: &str, rows: u64) -> DataFile {
        iceberg::spec::DataFileBuilder::default()
            .content(DataContentType::Data)
            .file_path(path.to_string())
            .file_format(iceberg::spec::DataFileFormat::Parquet)
            .partition(iceberg::spec::Struct::empty())
            .record_count(rows)
            .file_size_in_bytes(100)
            .partition_spec_id(0)
            .build()
            .unwrap()
    }
}
