//! Small-file compaction: the data files of a sink's table that are small, or that many
//! delete files apply to, are rewritten together into files near the target size, with
//! the deletes that apply to them applied, and committed as a `replace` snapshot.
//!
//! - Files are grouped per partition (partition spec id and partition tuple: a rewritten
//!   file holds rows of one partition), oldest data sequence number first. A step takes
//!   the partitions that need it, of one spec, oldest first, at most [`step_bytes`] in
//!   all, so a step's work is bounded whatever the table's size, and a partitioned table
//!   (which gets files in many partitions with each commit) is compacted in one commit.
//! - The rewritten files keep the data sequence number of the snapshot they were read
//!   from (the step's base): the deletes committed up to it were applied and do not apply
//!   to them any more, and every equality delete committed after it (a sink commit that
//!   lands while the step runs) still does. Their file sequence number is the new
//!   snapshot's.
//! - Delete files that apply to no live data file any more (an equality delete whose data
//!   sequence number is not above any live data file's of its partition, a position
//!   delete whose data files are all gone) are removed by the same snapshot, so an UPSERT
//!   table keeps a handful of live delete files.
//! - The commit goes through the sink's [`Committer`]. When a sink commit lands first, the
//!   compaction is built again on the new head if nothing there contradicts it: every file
//!   it rewrites must still be live, and no position delete committed since its base may
//!   point into them (those rows would come back). Otherwise it is dropped and its files
//!   deleted (it never landed: its refusal happens only on a head none of its attempts was
//!   built on). The rewritten files stay until snapshot expiry deletes them with the last
//!   snapshot that references them.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use arrow_array::{Array, BooleanArray, RecordBatch, StringArray};
use async_trait::async_trait;
use futures::{StreamExt, TryStreamExt};
use iceberg::arrow::{ArrowReader, ArrowReaderBuilder};
use iceberg::scan::{FileScanTask, FileScanTaskDeleteFile};
use iceberg::spec::{
    DataContentType, DataFile, FormatVersion, Manifest, ManifestContentType, ManifestFile,
    Operation, SnapshotSummaryCollector, Struct,
};

use crate::commit::{CommitIntent, Committed, Committer, Verdict};
use crate::dv::{EntryKey, entry_key, is_deletion_vector};
use crate::error::{ErrorKind, SinkError};
use crate::maintenance::deleted_keys::DeletedKeys;
use crate::maintenance::manifests::{
    MergeTarget, Removal, carry_over, entry_sequence_numbers, manifest_writer, remove_entries,
    write_manifest,
};
use crate::maintenance::remap::{Rewrite, RewriteLog, RewrittenInput, RowMap};
use crate::partition::spec_by_id;
use crate::position::{
    FILE_PATH_FIELD_ID, load_manifest, placed_in_partition, read_columns, read_position_deletes,
    unreadable,
};
use crate::snapshot::{
    MAIN_BRANCH, NewSnapshot, PreparedCommit, add_totals, read_manifest_list, unique_snapshot_id,
    write_snapshot,
};
use crate::table::{LoadedTable, storage_error};
use crate::writer::{FileContent, FileWriter};

/// A data file below this share of the target size (in percent) is small. Not the whole
/// target: the rolling writer's files end near the target, a little under or over, and
/// rewriting a file of 99 % of the target again and again would gain nothing (Iceberg's
/// `min-file-size-bytes` default is the same 75 %).
const SMALL_PERCENT: u64 = 75;
/// A partition is compacted once it holds this many small files (fewer gain too little
/// for a rewrite; Iceberg's `min-input-files` default is 5).
const MIN_INPUT_FILES: usize = 5;
/// A data file that this many delete files apply to is rewritten whatever its size: its
/// reads pay for every one of them, and those deletes stay live as long as it does.
const DELETES_PER_FILE: usize = 8;
/// A data file whose deleted rows reach this share of its rows (in percent) is rewritten
/// whatever its size, when that share is known without reading it (deletion vectors and
/// position delete files count the rows they delete). Format version 3 holds at most one
/// vector per data file, so the count of delete files above never grows there: a large
/// file whose rows are mostly deleted would stay, read and skipped row by row, as long as
/// nothing else rewrites it. Reads pay for a deleted row about as much as for a live one,
/// so at 30 % they read close to half as much again as they return; Iceberg's Spark
/// action rewrites at the same share by default (`delete-ratio-threshold`).
const DELETED_PERCENT: u64 = 30;
/// Once this many delete files are live, every data file one of them applies to is
/// rewritten (a step at a time): an UPSERT table then holds only the delete files
/// committed since the last step, well under the 32 it may hold in steady state.
const DELETE_FILES_PRESSURE: usize = 16;
/// A partition's small files are compacted early, with the deletes that apply to them,
/// when that is cheap: at most this many bytes, and at most [`EAGER_AMPLIFICATION`] times
/// what was committed since the last step. Why: a reader pays a request or two per file,
/// so a small table committed to every second reads many times slower as a dozen files
/// with their deletes than as one; rewriting a few MiB is cheap next to that, while the
/// bound keeps a large table from being rewritten for every small commit (and the files
/// a step replaces are kept for the snapshot retention).
pub const EAGER_STEP_BYTES: u64 = 16 * 1024 * 1024;
/// How many times the bytes committed since the last step an early step may rewrite.
const EAGER_AMPLIFICATION: u64 = 64;
/// How many partitions a step rewrites at once. Why: a partition's rewrite is a few
/// requests to the object store (its data and delete files read, its file written), mostly
/// waiting; one after the other, a step over the 20 partitions of a table committed to
/// every second outlasted the second, so it always had to carry over the sink's next
/// commit's position deletes, a delete file per partition: 40 live delete files where a
/// step between two commits leaves 20.
const PARTITIONS_AT_ONCE: usize = 4;
/// A step reads at least this much (a small target must not make compaction crawl).
const MIN_STEP_BYTES: u64 = 64 * 1024 * 1024;

/// The most bytes of data files one step rewrites: four target files' worth.
pub fn step_bytes(target_file_size: u64) -> u64 {
    target_file_size.saturating_mul(4).max(MIN_STEP_BYTES)
}

/// What a compaction step did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompactionOutcome {
    pub data_files_rewritten: u64,
    /// Delete files applied to the rewritten data files.
    pub delete_files_applied: u64,
    /// Delete files removed from the table (they applied to no live data file any more).
    pub delete_files_removed: u64,
    /// Bytes of the data files rewritten.
    pub bytes_rewritten: u64,
    pub files_written: u64,
}

/// A live file of a snapshot, with what its manifest entry says about it.
#[derive(Debug, Clone)]
struct LiveFile {
    file: DataFile,
    spec_id: i32,
    /// Data sequence number.
    sequence_number: i64,
}

impl LiveFile {
    fn path(&self) -> &str {
        self.file.file_path()
    }

    /// The partition the file belongs to.
    fn partition(&self) -> (i32, &Struct) {
        (self.spec_id, self.file.partition())
    }
}

/// The live files of a table's main branch.
struct LiveFiles {
    /// The head's manifests, each with its entries (carried into the compaction's
    /// snapshot).
    manifests: Vec<(ManifestFile, Arc<Manifest>)>,
    data: Vec<LiveFile>,
    deletes: Vec<LiveFile>,
}

async fn live_files(
    table: &LoadedTable,
    state: &CompactionState,
) -> Result<Option<LiveFiles>, SinkError> {
    let Some(head) = table.metadata.snapshot_for_ref(MAIN_BRANCH) else {
        return Ok(None);
    };
    let mut live = LiveFiles {
        manifests: Vec::new(),
        data: Vec::new(),
        deletes: Vec::new(),
    };
    for manifest in read_manifest_list(table, head.manifest_list()).await? {
        let loaded = state.manifest(table, &manifest).await?;
        for entry in loaded.entries().iter().filter(|entry| entry.is_alive()) {
            let (sequence_number, _) = entry_sequence_numbers(&manifest, entry)?;
            let file = LiveFile {
                file: entry.data_file().clone(),
                spec_id: manifest.partition_spec_id,
                sequence_number,
            };
            match manifest.content {
                ManifestContentType::Data => live.data.push(file),
                ManifestContentType::Deletes => live.deletes.push(file),
            }
        }
        live.manifests.push((manifest, loaded));
    }
    Ok(Some(live))
}

/// The rows a position delete removes, by the data file they are of.
type Targets = Arc<HashMap<String, u64>>;

/// What compaction keeps between steps and between the attempts of a commit: manifests
/// and the data files each position delete file points into, read once each (neither
/// ever changes once written), so that building a commit again on a new head reads only
/// what the new head added.
#[derive(Default)]
pub struct CompactionState {
    manifests: Mutex<HashMap<String, Arc<Manifest>>>,
    targets: Mutex<HashMap<String, Targets>>,
    /// The data sequence number of the files the last step that landed wrote (its base's):
    /// files above it were committed since. `None` before this task's first step.
    last_step_sequence: Mutex<Option<i64>>,
    /// The most bytes an early step rewrites ([`EAGER_STEP_BYTES`]; 0: no early steps).
    eager_step_bytes: u64,
    /// Whether the table held [`DELETE_FILES_PRESSURE`] live delete files or more when
    /// the last step looked: the next step then runs without a pause.
    under_pressure: std::sync::atomic::AtomicBool,
    /// Where each compaction that lands is handed to the sink's position index.
    rewrites: RewriteLog,
}

impl CompactionState {
    /// Whether the table held many live delete files when the last step looked (their
    /// bound is a promise: the step after runs without a pause).
    pub fn under_pressure(&self) -> bool {
        self.under_pressure
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// A state that hands each compaction that lands to `rewrites`, with early steps of at
    /// most `eager_step_bytes`.
    pub fn publishing(rewrites: RewriteLog, eager_step_bytes: u64) -> CompactionState {
        CompactionState {
            rewrites,
            eager_step_bytes,
            ..CompactionState::default()
        }
    }

    async fn manifest(
        &self,
        table: &LoadedTable,
        manifest: &ManifestFile,
    ) -> Result<Arc<Manifest>, SinkError> {
        if let Some(known) = lock(&self.manifests).get(&manifest.manifest_path) {
            return Ok(known.clone());
        }
        let loaded = Arc::new(load_manifest(table, manifest).await?);
        lock(&self.manifests).insert(manifest.manifest_path.clone(), loaded.clone());
        Ok(loaded)
    }

    /// The data files position delete `delete` points into, with how many rows of each.
    async fn targets(&self, table: &LoadedTable, delete: &DataFile) -> Result<Targets, SinkError> {
        // A deletion vector names its one data file and its cardinality in its entry (not
        // cached: the vectors of a commit share their path).
        if is_deletion_vector(delete) {
            let target = delete.referenced_data_file();
            let rows = delete.record_count();
            return Ok(Arc::new(target.into_iter().map(|t| (t, rows)).collect()));
        }
        let path = delete.file_path();
        if let Some(known) = lock(&self.targets).get(path) {
            return Ok(known.clone());
        }
        let mut targets: HashMap<String, u64> = HashMap::new();
        let mut batches = read_columns(
            table,
            path,
            delete.file_size_in_bytes(),
            &[FILE_PATH_FIELD_ID],
        )
        .await?;
        while let Some(columns) = batches.next().await? {
            let paths = columns
                .first()
                .and_then(|column| column.as_any().downcast_ref::<StringArray>())
                .ok_or_else(|| unreadable(path, "file_path is not a string"))?;
            for target in paths.iter().flatten() {
                match targets.get_mut(target) {
                    Some(rows) => *rows += 1,
                    None => {
                        targets.insert(target.to_string(), 1);
                    }
                }
            }
        }
        let targets = Arc::new(targets);
        lock(&self.targets).insert(path.to_string(), targets.clone());
        Ok(targets)
    }

    /// Forgets what `live` (the newest head seen) no longer holds.
    fn retain(&self, live: &LiveFiles) {
        let manifests: HashSet<&str> = live
            .manifests
            .iter()
            .map(|(m, _)| m.manifest_path.as_str())
            .collect();
        lock(&self.manifests).retain(|path, _| manifests.contains(path.as_str()));
        let deletes: HashSet<&str> = live.deletes.iter().map(LiveFile::path).collect();
        lock(&self.targets).retain(|path, _| deletes.contains(path.as_str()));
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The live delete files with, for position deletes, the data files they point into.
struct DeleteFiles<'a> {
    files: Vec<(&'a LiveFile, Option<Targets>)>,
}

impl<'a> DeleteFiles<'a> {
    async fn of(
        table: &LoadedTable,
        live: &'a LiveFiles,
        state: &CompactionState,
    ) -> Result<DeleteFiles<'a>, SinkError> {
        let mut files = Vec::with_capacity(live.deletes.len());
        for delete in &live.deletes {
            let paths = match delete.file.content_type() {
                DataContentType::PositionDeletes => Some(state.targets(table, &delete.file).await?),
                _ => None,
            };
            files.push((delete, paths));
        }
        Ok(DeleteFiles { files })
    }

    /// The delete files that apply to a data file of partition `partition` with data
    /// sequence number `sequence_number` at `path` (Iceberg's scan rules).
    fn applying_to(
        &self,
        path: &str,
        partition: (i32, &Struct),
        sequence_number: i64,
    ) -> Vec<&'a LiveFile> {
        self.applying(path, partition, sequence_number)
            .map(|(delete, _)| *delete)
            .collect()
    }

    /// The rows of the data file `file` its deletes remove, when known without reading
    /// it: its deletion vector's cardinality (which holds the rows of its older position
    /// delete files too), else the rows its position delete files name; `None` when an
    /// equality delete applies (which rows it removes is known only by reading them).
    fn deleted_rows(&self, file: &LiveFile) -> Option<u64> {
        let mut vector = None;
        let mut listed = 0;
        for (delete, targets) in self.applying(file.path(), file.partition(), file.sequence_number)
        {
            match delete.file.content_type() {
                DataContentType::EqualityDeletes => return None,
                _ if is_deletion_vector(&delete.file) => vector = Some(delete.file.record_count()),
                _ => {
                    listed += targets
                        .as_ref()
                        .and_then(|t| t.get(file.path()))
                        .copied()
                        .unwrap_or(0)
                }
            }
        }
        Some(vector.unwrap_or(listed))
    }

    fn applying(
        &self,
        path: &str,
        partition: (i32, &Struct),
        sequence_number: i64,
    ) -> impl Iterator<Item = &(&'a LiveFile, Option<Targets>)> {
        self.files.iter().filter(move |(delete, targets)| {
            let same_partition = delete.partition() == partition;
            match delete.file.content_type() {
                // An equality delete of an unpartitioned spec applies to every partition.
                DataContentType::EqualityDeletes => {
                    sequence_number < delete.sequence_number
                        && (same_partition || delete.file.partition().fields().is_empty())
                }
                DataContentType::PositionDeletes => {
                    sequence_number <= delete.sequence_number
                        && targets
                            .as_ref()
                            .is_none_or(|paths| paths.contains_key(path))
                }
                DataContentType::Data => false,
            }
        })
    }
}

/// The data files of one partition a step rewrites, each with the deletes to apply.
struct Plan {
    spec_id: i32,
    /// The partition of every file of the plan (and of the files written).
    partition: Struct,
    files: Vec<(LiveFile, Vec<LiveFile>)>,
}

impl Plan {
    fn bytes(&self) -> u64 {
        self.files
            .iter()
            .map(|(file, _)| file.file.file_size_in_bytes())
            .sum()
    }
}

/// The distinct delete files (entries: deletion vectors share paths) applied by a step's
/// `plans`.
fn deletes_applied(plans: &[Plan]) -> u64 {
    let distinct: HashSet<EntryKey<'_>> = plans
        .iter()
        .flat_map(|plan| plan.files.iter())
        .flat_map(|(_, deletes)| deletes.iter().map(|d| entry_key(&d.file)))
        .collect();
    distinct.len() as u64
}

/// A data file worth rewriting, with the delete files that apply to it.
type Candidate<'a> = (&'a LiveFile, Vec<&'a LiveFile>);

/// Picks the files a step rewrites: the partitions that need compacting, oldest candidate
/// first, all of the spec of the oldest (one manifest of written files), as many as the
/// step's bytes allow (at least one partition). Empty when no partition needs it. A
/// partitioned table gets files in every partition with each commit, so a step of one
/// partition would fall behind.
fn plan(
    live: &LiveFiles,
    deletes: &DeleteFiles<'_>,
    target: u64,
    table: &LoadedTable,
    eager_bytes: u64,
) -> Vec<Plan> {
    let small = target.saturating_mul(SMALL_PERCENT) / 100;
    let pressure = live.deletes.len() >= DELETE_FILES_PRESSURE;
    // Whether a file's deletes alone make it worth rewriting.
    let laden = |file: &LiveFile, applying: &[&LiveFile]| {
        applying.len() >= DELETES_PER_FILE
            || (pressure && !applying.is_empty())
            || mostly_deleted(file, deletes.deleted_rows(file))
    };
    // Per partition: the files a step would take (small or laden), with whether any is
    // laden (when none is, they are all small: what an early step takes).
    let mut groups: HashMap<(i32, &Struct), PartitionFiles<'_>> = HashMap::new();
    for file in &live.data {
        let applying = deletes.applying_to(file.path(), file.partition(), file.sequence_number);
        if !rewritable(&applying) {
            continue;
        }
        let laden = laden(file, &applying);
        if file.file.file_size_in_bytes() >= small && !laden {
            continue;
        }
        let group = groups.entry(file.partition()).or_default();
        group.any_laden |= laden;
        group.due.push((file, applying));
    }
    let mut due: Vec<Vec<Candidate<'_>>> = groups
        .into_iter()
        .filter(|((spec_id, _), _)| table.metadata.partition_spec_by_id(*spec_id).is_some())
        .filter_map(|(_, group)| group.into_due(eager_bytes))
        .map(|mut candidates| {
            candidates.sort_by_key(|(file, _)| (file.sequence_number, file.path().to_string()));
            candidates
        })
        .collect();
    // Oldest first (the partition tuple breaks ties, for a stable order).
    let oldest = |group: &[Candidate<'_>]| {
        group
            .first()
            .map(|(file, _)| (file.sequence_number, file.path().to_string()))
    };
    due.sort_by_cached_key(|group| oldest(group));
    let Some(spec_id) = due
        .first()
        .and_then(|g| g.first())
        .map(|(file, _)| file.spec_id)
    else {
        return Vec::new();
    };
    let mut budget = step_bytes(target);
    let mut plans = Vec::new();
    for candidates in due {
        if budget == 0 {
            break;
        }
        if candidates.first().map(|(file, _)| file.spec_id) != Some(spec_id) {
            continue;
        }
        if let Some(plan) = partition_plan(candidates, &mut budget, plans.is_empty()) {
            plans.push(plan);
        }
    }
    plans
}

/// The files of one partition a step may take.
#[derive(Default)]
struct PartitionFiles<'a> {
    /// The small files and those whose deletes make them worth rewriting (laden).
    due: Vec<Candidate<'a>>,
    any_laden: bool,
}

impl<'a> PartitionFiles<'a> {
    /// What a step takes of the partition: its due files when there are enough of them
    /// or one is laden; else (all of them small) an early step's, when they come to at
    /// most `eager_bytes` and rewriting them would leave fewer files to read (two or more,
    /// or one with deletes); else nothing.
    fn into_due(self, eager_bytes: u64) -> Option<Vec<Candidate<'a>>> {
        if self.due.len() >= MIN_INPUT_FILES || self.any_laden {
            return Some(self.due);
        }
        let bytes: u64 = self
            .due
            .iter()
            .map(|(file, _)| file.file.file_size_in_bytes())
            .sum();
        let fewer = self.due.len() >= 2 || self.due.iter().any(|(_, d)| !d.is_empty());
        (fewer && bytes <= eager_bytes).then_some(self.due)
    }
}

/// The bytes of the live data and delete files committed since the last step (files
/// whose data sequence number is above the one it wrote); all of them before this task's
/// first step.
fn fresh_bytes(live: &LiveFiles, last_step_sequence: Option<i64>) -> u64 {
    live.data
        .iter()
        .chain(&live.deletes)
        .filter(|file| last_step_sequence.is_none_or(|last| file.sequence_number > last))
        .map(|file| file.file.file_size_in_bytes())
        .sum()
}

/// Whether `deleted` (rows of `file` its deletes remove, when known) reach
/// [`DELETED_PERCENT`] of its rows.
fn mostly_deleted(file: &LiveFile, deleted: Option<u64>) -> bool {
    let rows = file.file.record_count();
    deleted.is_some_and(|deleted| {
        deleted > 0 && u128::from(deleted) * 100 >= u128::from(rows) * u128::from(DELETED_PERCENT)
    })
}

/// Whether a data file with the deletes `applying` can be rewritten: its deletion vector
/// is applied by position, which equality deletes applied with it would shift (a table
/// floe writes never holds both; another writer's is left as it is).
fn rewritable(applying: &[&LiveFile]) -> bool {
    let vector = applying.iter().any(|d| is_deletion_vector(&d.file));
    let equality = applying
        .iter()
        .any(|d| d.file.content_type() == DataContentType::EqualityDeletes);
    !(vector && equality)
}

/// The files of one partition's `candidates` (oldest first) that fit in `budget` (which
/// they use up), or all of the first file when `first` (a step rewrites something);
/// `None` when that would be one file without deletes, which gains nothing.
fn partition_plan(candidates: Vec<Candidate<'_>>, budget: &mut u64, first: bool) -> Option<Plan> {
    let (spec_id, partition) = candidates
        .first()
        .map(|(file, _)| (file.spec_id, file.file.partition().clone()))?;
    let mut files = Vec::new();
    let mut left = *budget;
    for (file, applying) in candidates {
        let size = file.file.file_size_in_bytes();
        if size > left && !(first && files.is_empty()) {
            break;
        }
        left = left.saturating_sub(size);
        files.push((
            file.clone(),
            applying.into_iter().cloned().collect::<Vec<_>>(),
        ));
    }
    if files.len() < 2 && files.iter().all(|(_, deletes)| deletes.is_empty()) {
        return None;
    }
    *budget = left;
    Some(Plan {
        spec_id,
        partition,
        files,
    })
}

/// Reads the plan's files with their deletes applied and writes the rows left into new
/// files of the table's current schema near `target` bytes each, in the order read.
async fn rewrite(
    table: &LoadedTable,
    plan: &Plan,
    target: u64,
) -> Result<Vec<DataFile>, SinkError> {
    let metadata = &table.metadata;
    let schema = metadata.current_schema().clone();
    let writer = FileWriter::new(
        table,
        schema.clone(),
        FileContent::Data,
        plan.spec_id,
        format!("compacted-{}", uuid::Uuid::new_v4()),
        usize::try_from(target).unwrap_or(usize::MAX),
    )?;
    let mut writer = placed_in_partition(table, writer, plan.spec_id, &plan.partition)?;
    let runtime = iceberg::Runtime::try_current().map_err(|err| {
        SinkError::caused_by(ErrorKind::Internal, "no runtime to read files on", err)
    })?;
    let new_reader = || {
        ArrowReaderBuilder::new(table.file_io.clone(), runtime.clone())
            .with_data_file_concurrency_limit(1)
            .build()
    };
    // One reader for the files whose position delete files it applies: its clones share
    // the delete files it has loaded, so one that applies to many files of the step is
    // read once, not once per file.
    let shared = new_reader();
    let keys = deleted_keys(table, &schema, plan).await?;
    for (file, deletes) in &plan.files {
        // A file read whole, its deletes applied here by position, gets a reader that has
        // loaded no delete file: iceberg-rust's reader applies the rows of every position
        // delete file it has loaded to each file they name, listed in the file's task or
        // not, which would drop rows before the positions here are counted.
        let own;
        let reader = if applied_by_position(deletes) {
            own = new_reader();
            &own
        } else {
            &shared
        };
        rewrite_file(table, plan, (file, deletes), (reader, &keys), &mut writer).await?;
    }
    writer.close().await
}

/// The keys the equality deletes that apply to `plan`'s files remove, each delete file
/// read once. One map serves every file of the plan: they share a partition, so the
/// equality deletes that apply to one of them apply to each other one whose data sequence
/// number is below theirs (which the map keeps per key).
async fn deleted_keys(
    table: &LoadedTable,
    schema: &iceberg::spec::Schema,
    plan: &Plan,
) -> Result<DeletedKeys, SinkError> {
    let mut seen = HashSet::new();
    let deletes: Vec<(&DataFile, i64)> = plan
        .files
        .iter()
        .flat_map(|(_, deletes)| deletes)
        .filter(|delete| seen.insert(delete.path()))
        .map(|delete| (&delete.file, delete.sequence_number))
        .collect();
    DeletedKeys::read(table, schema, &deletes).await
}

/// Whether a data file with `deletes` is read whole and its deleted positions dropped by
/// floe: iceberg-rust's reader does not apply deletion vectors.
fn applied_by_position(deletes: &[LiveFile]) -> bool {
    deletes.iter().any(|d| is_deletion_vector(&d.file))
}

/// Reads one of `plan`'s files with `deletes` applied into `writer`. iceberg-rust's reader
/// applies position delete files but not deletion vectors: a file with one is read whole
/// and its deleted positions (the vector's and any position delete file's) are filtered
/// out here. Equality deletes are applied here too, from `keys` (see [`DeletedKeys`]).
async fn rewrite_file(
    table: &LoadedTable,
    plan: &Plan,
    (file, deletes): (&LiveFile, &[LiveFile]),
    (reader, keys): (&ArrowReader, &DeletedKeys),
    writer: &mut FileWriter,
) -> Result<(), SinkError> {
    let by_position = applied_by_position(deletes);
    let deleted = if by_position {
        let positional: Vec<DataFile> = deletes
            .iter()
            .filter(|d| d.file.content_type() == DataContentType::PositionDeletes)
            .map(|d| d.file.clone())
            .collect();
        let live = HashSet::from([file.path()]);
        let mut read = read_position_deletes(table, &positional, &live).await?;
        read.remove(file.path()).unwrap_or_default()
    } else {
        Vec::new()
    };
    let task = scan_task(table, plan, file, if by_position { &[] } else { deletes })?;
    let mut batches = reader
        .clone()
        .read(futures::stream::iter([Ok(task)]).boxed())
        .map_err(|err| storage_error("cannot read the files to compact".into(), err))?
        .stream();
    let arrow_schema = writer.arrow_schema();
    let mut position = 0u64;
    while let Some(batch) = batches
        .try_next()
        .await
        .map_err(|err| storage_error("cannot read the files to compact".into(), err))?
    {
        // The reader's batches hold the schema's columns in order; the writer wants its
        // own Arrow schema (with the field ids) on them.
        let batch = RecordBatch::try_new(arrow_schema.clone(), batch.columns().to_vec()).map_err(
            |err| SinkError::internal(format!("cannot rewrite a batch read for compaction: {err}")),
        )?;
        let rows = batch.num_rows() as u64;
        let batch = without_positions(batch, position, &deleted)?;
        let batch = keys.retain(batch, file.sequence_number)?;
        position += rows;
        writer.write_batch(batch).await?;
    }
    Ok(())
}

/// The scan task reading `file` of `plan` whole, with the position delete files among
/// `deletes` applied (never its equality deletes: see [`DeletedKeys`]).
fn scan_task(
    table: &LoadedTable,
    plan: &Plan,
    file: &LiveFile,
    deletes: &[LiveFile],
) -> Result<FileScanTask, SinkError> {
    let schema = table.metadata.current_schema().clone();
    let spec = spec_by_id(&table.metadata, plan.spec_id)?.clone();
    let size = file.file.file_size_in_bytes();
    Ok(FileScanTask {
        file_size_in_bytes: size,
        start: 0,
        length: size,
        record_count: Some(file.file.record_count()),
        data_file_path: file.path().to_string(),
        data_file_format: file.file.file_format(),
        project_field_ids: schema.as_struct().fields().iter().map(|f| f.id).collect(),
        schema,
        predicate: None,
        deletes: deletes
            .iter()
            .filter(|d| d.file.content_type() == DataContentType::PositionDeletes)
            .map(scan_delete)
            .collect(),
        partition: Some(file.file.partition().clone()),
        partition_spec: Some(spec),
        name_mapping: None,
        case_sensitive: true,
    })
}

/// `batch` (rows `first`.. of its file) without the rows at `deleted` (sorted).
fn without_positions(
    batch: RecordBatch,
    first: u64,
    deleted: &[u32],
) -> Result<RecordBatch, SinkError> {
    let end = first + batch.num_rows() as u64;
    let from = deleted.partition_point(|pos| u64::from(*pos) < first);
    let to = deleted.partition_point(|pos| u64::from(*pos) < end);
    if from == to {
        return Ok(batch);
    }
    let mut keep = vec![true; batch.num_rows()];
    for pos in &deleted[from..to] {
        keep[(u64::from(*pos) - first) as usize] = false;
    }
    arrow_select::filter::filter_record_batch(&batch, &BooleanArray::from(keep))
        .map_err(|err| SinkError::internal(format!("cannot drop deleted rows: {err}")))
}

fn scan_delete(delete: &LiveFile) -> FileScanTaskDeleteFile {
    FileScanTaskDeleteFile {
        file_path: delete.path().to_string(),
        file_size_in_bytes: delete.file.file_size_in_bytes(),
        file_type: delete.file.content_type(),
        partition_spec_id: delete.spec_id,
        equality_ids: delete.file.equality_ids(),
    }
}

/// The row map of `plan`'s rewrite, when no equality delete applies to its files.
async fn row_map(table: &LoadedTable, plan: &Plan) -> Result<Option<RowMap>, SinkError> {
    let mut inputs = Vec::with_capacity(plan.files.len());
    for (file, deletes) in &plan.files {
        let mut position_deletes = Vec::new();
        for delete in deletes {
            if delete.file.content_type() != DataContentType::PositionDeletes {
                return Ok(None);
            }
            position_deletes.push(delete.file.clone());
        }
        inputs.push(RewrittenInput {
            path: file.path().to_string(),
            record_count: file.file.record_count(),
            position_deletes,
        });
    }
    RowMap::read(table, &inputs).await
}

/// One partition's part of a step once rewritten.
struct RewrittenPartition {
    partition: Struct,
    /// The paths of the files rewritten.
    rewritten: HashSet<String>,
    /// The files written, in the order of the rows read.
    written: Vec<DataFile>,
    /// Where the rewritten rows went, to carry over position deletes committed meanwhile
    /// (`None` when the rows an equality delete removed are not known).
    row_map: Option<RowMap>,
}

/// Rewrites one partition's files of a step.
async fn rewrite_partition(
    table: &LoadedTable,
    plan: &Plan,
    target: u64,
) -> Result<RewrittenPartition, SinkError> {
    let mut row_map = row_map(table, plan).await?;
    let written = rewrite(table, plan, target).await?;
    if let Some(map) = row_map.as_mut()
        && !map.written(&written)
    {
        // The files written hold other rows than the rewritten files' deletes leave:
        // committing them would lose rows or bring deleted ones back.
        let rows: u64 = written.iter().map(DataFile::record_count).sum();
        delete_unused(table, &written, "a compaction that wrote the wrong rows").await;
        return Err(SinkError::internal(format!(
            "a compaction wrote {rows} rows where the files it rewrote hold {} live rows; it was dropped",
            map.expected_rows()
        )));
    }
    Ok(RewrittenPartition {
        partition: plan.partition.clone(),
        rewritten: plan
            .files
            .iter()
            .map(|(f, _)| f.path().to_string())
            .collect(),
        written,
        row_map,
    })
}

/// Why a compaction is dropped (see [`CompactionIntent::prepare`]).
const OUTDATED: &str = "the files a compaction rewrote changed meanwhile";

/// One compaction step on `table` (the table as last loaded): plans, rewrites and
/// commits; an outcome of zeros when nothing needs compacting or the step was dropped
/// because the table changed under it (tried again next time).
pub async fn compact(
    committer: &Committer<'_>,
    table: LoadedTable,
    target: u64,
    state: &CompactionState,
) -> Result<CompactionOutcome, SinkError> {
    // Format 1 has no sequence numbers: deletes cannot be told apart by age.
    if table.metadata.format_version() == FormatVersion::V1 {
        return Ok(CompactionOutcome::default());
    }
    let Some(live) = live_files(&table, state).await? else {
        return Ok(CompactionOutcome::default());
    };
    state.retain(&live);
    state.under_pressure.store(
        live.deletes.len() >= DELETE_FILES_PRESSURE,
        std::sync::atomic::Ordering::Relaxed,
    );
    let deletes = DeleteFiles::of(&table, &live, state).await?;
    let fresh = fresh_bytes(&live, *lock(&state.last_step_sequence));
    let eager_bytes = state
        .eager_step_bytes
        .min(fresh.saturating_mul(EAGER_AMPLIFICATION));
    let plans = plan(&live, &deletes, target, &table, eager_bytes);
    let Some(spec_id) = plans.first().map(|plan| plan.spec_id) else {
        return Ok(CompactionOutcome::default());
    };
    let Some(base) = table.metadata.snapshot_for_ref(MAIN_BRANCH).cloned() else {
        return Ok(CompactionOutcome::default());
    };
    let rewrites: Vec<_> = plans
        .iter()
        .map(|plan| rewrite_partition(&table, plan, target))
        .collect();
    let parts: Vec<RewrittenPartition> = futures::stream::iter(rewrites)
        .buffered(PARTITIONS_AT_ONCE)
        .try_collect()
        .await?;
    let written: Vec<DataFile> = parts.iter().flat_map(|p| p.written.clone()).collect();
    let intent = CompactionIntent {
        base_snapshot_id: base.snapshot_id(),
        data_sequence_number: base.sequence_number(),
        rewritten: plans
            .iter()
            .flat_map(|plan| plan.files.iter().map(|(f, _)| f.path().to_string()))
            .collect(),
        known_deletes: live.deletes.iter().map(|d| d.path().to_string()).collect(),
        spec_id,
        parts,
        state,
        built: Mutex::new(Vec::new()),
        removed_deletes: Mutex::new(0),
        carried: Mutex::new(Vec::new()),
    };
    let landed = match committer.commit_on_latest(&table, &intent).await {
        Ok(Committed::Done(after) | Committed::Superseded(after)) => {
            let landed = intent.landed_in(&after);
            let carried = intent.forget_attempts(&after, landed).await;
            landed.map(|id| (id, after, carried))
        }
        Err(err) if err.kind == ErrorKind::CommitConflict && err.message == OUTDATED => {
            intent.forget_attempts(&table, None).await;
            // Never in a snapshot (see the module's documentation): its files go.
            delete_unused(&table, &written, "a dropped compaction").await;
            tracing::info!(table = %table.metadata_location, "a compaction was dropped: the table changed under it");
            return Ok(CompactionOutcome::default());
        }
        Err(err) => return Err(err),
    };
    let removed_deletes = *lock(&intent.removed_deletes);
    if let Some((snapshot_id, after, carried)) = landed {
        *lock(&state.last_step_sequence) = Some(intent.data_sequence_number);
        publish(state, intent, (snapshot_id, &after), carried);
    }
    let outcome = CompactionOutcome {
        data_files_rewritten: plans.iter().map(|p| p.files.len() as u64).sum(),
        delete_files_applied: deletes_applied(&plans),
        delete_files_removed: removed_deletes,
        bytes_rewritten: plans.iter().map(Plan::bytes).sum(),
        files_written: written.len() as u64,
    };
    tracing::info!(table = %table.metadata_location, data_files_rewritten = outcome.data_files_rewritten, files_written = outcome.files_written, delete_files_applied = outcome.delete_files_applied, delete_files_removed = outcome.delete_files_removed, bytes_rewritten = outcome.bytes_rewritten, "compacted the table's small files");
    Ok(outcome)
}

/// Deletes `files`, written by `writer` and never in a snapshot; one that cannot be
/// deleted stays as an orphan for orphan cleanup.
async fn delete_unused(table: &LoadedTable, files: &[DataFile], writer: &str) {
    for file in files {
        if let Err(error) = table.file_io.delete(file.file_path()).await {
            tracing::warn!(file = %file.file_path(), %error, "deleting a file of {writer} failed; it stays as an orphan");
        }
    }
}

/// Hands the compaction `intent`, which landed as snapshot `snapshot_id` of `after` with
/// the delete files `carried`, to the sink's position index, when every row it rewrote
/// is known to have gone where its map says (no equality delete applied).
fn publish(
    state: &CompactionState,
    intent: CompactionIntent<'_>,
    (snapshot_id, after): (i64, &LoadedTable),
    carried: Vec<DataFile>,
) {
    let Some(snapshot) = after.metadata.snapshot_by_id(snapshot_id) else {
        return;
    };
    let written = intent.written().cloned().collect();
    let maps: Option<Vec<RowMap>> = intent.parts.into_iter().map(|part| part.row_map).collect();
    if let Some(maps) = maps {
        state.rewrites.publish(Rewrite {
            snapshot_id,
            parent_id: snapshot.parent_snapshot_id(),
            spec_id: intent.spec_id,
            maps,
            written,
            carried,
        });
    }
}

/// A compaction's commit: replaces `rewritten` by `written` on the table's head as it is
/// when the commit is built.
struct CompactionIntent<'a> {
    /// The snapshot the rewritten files were read from.
    base_snapshot_id: i64,
    /// Its sequence number: the data sequence number of the files written.
    data_sequence_number: i64,
    rewritten: HashSet<String>,
    /// The delete files live in the base (any other was committed since).
    known_deletes: HashSet<String>,
    /// The spec of the files rewritten and written.
    spec_id: i32,
    /// Per partition rewritten: the files written and where the rows went.
    parts: Vec<RewrittenPartition>,
    state: &'a CompactionState,
    /// The snapshots built, to recognise one that landed despite an error.
    built: Mutex<Vec<i64>>,
    /// How many delete files the last snapshot built removes.
    removed_deletes: Mutex<u64>,
    /// The position deletes each attempt (by snapshot id) carried over.
    carried: Mutex<Vec<(i64, Vec<DataFile>)>>,
}

impl CompactionIntent<'_> {
    /// Whether the compaction still holds on `head`'s live files: every rewritten file
    /// is live there, and the position delete files committed since the base that point
    /// into one (returned) can be carried over to the rewritten rows. `None` when it no
    /// longer holds.
    async fn position_deletes_since(
        &self,
        table: &LoadedTable,
        live: &LiveFiles,
    ) -> Result<Option<Vec<DataFile>>, SinkError> {
        let live_paths: HashSet<&str> = live.data.iter().map(LiveFile::path).collect();
        if !self
            .rewritten
            .iter()
            .all(|path| live_paths.contains(path.as_str()))
        {
            return Ok(None);
        }
        let mut touching = Vec::new();
        for delete in &live.deletes {
            if self.known_deletes.contains(delete.path())
                || delete.file.content_type() != DataContentType::PositionDeletes
            {
                continue;
            }
            let targets = self.state.targets(table, &delete.file).await?;
            let mut touches = false;
            for part in &self.parts {
                if targets.keys().any(|path| part.rewritten.contains(path)) {
                    if part.row_map.is_none() {
                        return Ok(None);
                    }
                    touches = true;
                }
            }
            if touches {
                touching.push(delete.file.clone());
            }
        }
        Ok(Some(touching))
    }

    /// Deletes the position delete files carried over by attempts that did not land
    /// (`landed`: the snapshot that did, if one did) and returns those of the one that
    /// did. No other attempt can land later: it was built on a head `main` has left.
    async fn forget_attempts(&self, table: &LoadedTable, landed: Option<i64>) -> Vec<DataFile> {
        let attempts = std::mem::take(&mut *lock(&self.carried));
        let mut kept = Vec::new();
        for (snapshot_id, files) in attempts {
            if Some(snapshot_id) == landed {
                kept = files;
                continue;
            }
            // Each file once: carried-over vectors share a Puffin file.
            let paths: HashSet<&str> = files.iter().map(DataFile::file_path).collect();
            for path in paths {
                if let Err(error) = table.file_io.delete(path).await {
                    tracing::warn!(file = %path, %error, "deleting a file of a compaction attempt failed; it stays as an orphan");
                }
            }
        }
        kept
    }

    /// The files the step wrote, partition after partition.
    fn written(&self) -> impl Iterator<Item = &DataFile> {
        self.parts.iter().flat_map(|part| &part.written)
    }

    fn landed_in(&self, table: &LoadedTable) -> Option<i64> {
        lock(&self.built)
            .iter()
            .copied()
            .find(|id| table.metadata.snapshot_by_id(*id).is_some())
    }
}

#[async_trait]
impl CommitIntent for CompactionIntent<'_> {
    async fn prepare(&self, base: &LoadedTable) -> Result<PreparedCommit, SinkError> {
        let live = live_files(base, self.state).await?.ok_or_else(|| {
            SinkError::new(ErrorKind::CommitConflict, OUTDATED).with_retryable(false)
        })?;
        let head = base
            .metadata
            .snapshot_for_ref(MAIN_BRANCH)
            .map(|s| s.snapshot_id());
        let touching = if head == Some(self.base_snapshot_id) {
            Some(Vec::new())
        } else {
            self.position_deletes_since(base, &live).await?
        };
        let Some(touching) = touching else {
            return Err(SinkError::new(ErrorKind::CommitConflict, OUTDATED)
                .with_detail("It is planned again from the table as it is now.")
                .with_retryable(false));
        };
        let mut carried = Vec::new();
        for part in self.parts.iter().filter(|_| !touching.is_empty()) {
            if let Some(map) = &part.row_map {
                let moved = map
                    .carry_over(base, self.spec_id, &part.partition, &touching)
                    .await?;
                carried.extend(moved);
            }
        }
        // The data files once the rewrite is in, and the delete files still needed by one.
        let written: Vec<LiveFile> = self
            .written()
            .map(|file| LiveFile {
                file: file.clone(),
                spec_id: self.spec_id,
                sequence_number: self.data_sequence_number,
            })
            .collect();
        let remaining = live
            .data
            .iter()
            .filter(|file| !self.rewritten.contains(file.path()))
            .chain(&written);
        let deletes = DeleteFiles::of(base, &live, self.state).await?;
        // By entry: a deletion vector of a rewritten file goes while the others of its
        // Puffin file stay.
        let mut needed: HashSet<EntryKey<'_>> = HashSet::new();
        for file in remaining {
            for delete in deletes.applying_to(file.path(), file.partition(), file.sequence_number) {
                needed.insert(entry_key(&delete.file));
            }
        }
        let removed: HashSet<EntryKey<'_>> = self
            .rewritten
            .iter()
            .map(|path| (path.as_str(), None))
            .chain(
                live.deletes
                    .iter()
                    .map(|d| entry_key(&d.file))
                    .filter(|key| !needed.contains(key)),
            )
            .collect();
        let removed_deletes = live.deletes.len() - needed.len().min(live.deletes.len());
        let prepared = self.write(base, &live, &removed, &carried).await?;
        lock(&self.carried).push((prepared.snapshot_id, carried));
        *self
            .removed_deletes
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = removed_deletes as u64;
        self.built
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(prepared.snapshot_id);
        Ok(prepared)
    }

    fn judge(&self, reloaded: &LoadedTable) -> Result<Verdict, SinkError> {
        let built = lock(&self.built);
        Ok(
            if built
                .iter()
                .any(|id| reloaded.metadata.snapshot_by_id(*id).is_some())
            {
                Verdict::Landed
            } else {
                Verdict::Retry
            },
        )
    }
}

impl CompactionIntent<'_> {
    /// Writes the `replace` snapshot on `base`: the manifests holding a `removed` file
    /// rewritten into one per kind (content and partition spec), the removed files
    /// `deleted` in it and the others `existing`; a manifest of the written files; the
    /// other manifests carried over (merged to the bound).
    async fn write(
        &self,
        base: &LoadedTable,
        live: &LiveFiles,
        removed: &HashSet<EntryKey<'_>>,
        carried_deletes: &[DataFile],
    ) -> Result<PreparedCommit, SinkError> {
        let metadata = &base.metadata;
        let snapshot_id = unique_snapshot_id(base);
        let commit_uuid = uuid::Uuid::new_v4();
        let prefix = format!(
            "{}/metadata/{commit_uuid}",
            metadata.location().trim_end_matches('/')
        );
        let schema = metadata.current_schema().clone();
        let mut summary = SnapshotSummaryCollector::default();
        let removal = Removal {
            removed,
            snapshot_id,
            path_prefix: &prefix,
        };
        let carried = remove_entries(base, &live.manifests, &removal, &mut summary).await?;
        let spec = spec_by_id(metadata, self.spec_id)?.clone();
        // The written files keep the base's sequence number as their data sequence
        // number; the carried-over deletes get this snapshot's (-1: inherited).
        let mut manifests = Vec::new();
        let written: Vec<DataFile> = self.written().cloned().collect();
        for (index, (content, files, sequence_number)) in [
            (
                ManifestContentType::Data,
                &written[..],
                self.data_sequence_number,
            ),
            (ManifestContentType::Deletes, carried_deletes, -1),
        ]
        .into_iter()
        .enumerate()
        {
            if files.is_empty() {
                continue;
            }
            let path = format!("{prefix}-m{index}.avro");
            let writer = manifest_writer(base, self.spec_id, &content, &path, snapshot_id)?;
            let stats = (&mut summary, &schema, &spec);
            manifests.push(write_manifest(writer, files, sequence_number, stats, &path).await?);
        }
        let target = MergeTarget {
            snapshot_id,
            path_prefix: &prefix,
        };
        let mut carried = carry_over(base, carried, manifests.len(), &target).await?;
        carried.append(&mut manifests);
        let mut properties = summary.build();
        let parent = metadata.snapshot_for_ref(MAIN_BRANCH);
        add_totals(
            &mut properties,
            parent.map(|p| &p.summary().additional_properties),
        );
        write_snapshot(
            base,
            NewSnapshot {
                snapshot_id,
                commit_uuid,
                manifests: carried,
                operation: Operation::Replace,
                summary: properties,
                progress: None,
            },
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use iceberg::spec::{DataFileBuilder, DataFileFormat};

    use super::*;
    use crate::position::tests::data_file;

    fn live(file: DataFile, sequence_number: i64) -> LiveFile {
        LiveFile {
            file,
            spec_id: 0,
            sequence_number,
        }
    }

    /// A position delete file (Parquet) deleting `rows` rows.
    fn delete_file(path: &str, rows: u64) -> DataFile {
        DataFileBuilder::default()
            .content(DataContentType::PositionDeletes)
            .file_path(path.to_string())
            .file_format(DataFileFormat::Parquet)
            .partition(Struct::empty())
            .record_count(rows)
            .file_size_in_bytes(100)
            .partition_spec_id(0)
            .build()
            .unwrap()
    }

    /// A deletion vector of `target` deleting `rows` rows, at `offset` of Puffin file `path`.
    fn vector(path: &str, target: &str, rows: u64, offset: i64) -> DataFile {
        DataFileBuilder::default()
            .content(DataContentType::PositionDeletes)
            .file_path(path.to_string())
            .file_format(DataFileFormat::Puffin)
            .partition(Struct::empty())
            .record_count(rows)
            .file_size_in_bytes(1000)
            .partition_spec_id(0)
            .referenced_data_file(Some(target.to_string()))
            .content_offset(Some(offset))
            .content_size_in_bytes(Some(50))
            .build()
            .unwrap()
    }

    fn targets(rows: &[(&str, u64)]) -> Option<Targets> {
        Some(Arc::new(
            rows.iter()
                .map(|(path, n)| (path.to_string(), *n))
                .collect(),
        ))
    }

    #[test]
    fn the_share_of_deleted_rows_counts_vectors_and_position_delete_files() {
        let a = live(data_file("a", 100), 1);
        let b = live(data_file("b", 100), 1);
        let c = live(data_file("c", 100), 1);
        // a: a vector of 30 rows (which holds its older position delete file's 10 too).
        let vector = live(vector("p.stats", "a", 30, 4), 3);
        let older = live(delete_file("d1.parquet", 12), 2);
        // b: 29 rows in two position delete files that name other files too.
        let newer = live(delete_file("d2.parquet", 28), 3);
        let deletes = DeleteFiles {
            files: vec![
                (&vector, targets(&[("a", 30)])),
                (&older, targets(&[("a", 10), ("b", 2)])),
                (&newer, targets(&[("b", 27), ("c", 1)])),
            ],
        };
        assert_eq!(deletes.deleted_rows(&a), Some(30));
        assert!(mostly_deleted(&a, deletes.deleted_rows(&a)));
        assert_eq!(deletes.deleted_rows(&b), Some(29));
        assert!(!mostly_deleted(&b, deletes.deleted_rows(&b)));
        assert_eq!(deletes.deleted_rows(&c), Some(1));
        // A delete older than the data file does not apply to it.
        let d = live(data_file("d", 10), 4);
        assert_eq!(deletes.deleted_rows(&d), Some(0));
        assert!(!mostly_deleted(&d, Some(0)));
        // An empty file with nothing deleted is not mostly deleted.
        assert!(!mostly_deleted(&live(data_file("e", 0), 1), Some(0)));
    }

    #[test]
    fn equality_deletes_leave_the_share_unknown() {
        let a = live(data_file("a", 100), 1);
        let equality = live(
            DataFileBuilder::default()
                .content(DataContentType::EqualityDeletes)
                .file_path("e.parquet".to_string())
                .file_format(DataFileFormat::Parquet)
                .partition(Struct::empty())
                .record_count(90)
                .file_size_in_bytes(100)
                .partition_spec_id(0)
                .equality_ids(Some(vec![1]))
                .build()
                .unwrap(),
            2,
        );
        let deletes = DeleteFiles {
            files: vec![(&equality, None)],
        };
        assert_eq!(deletes.deleted_rows(&a), None);
        assert!(!mostly_deleted(&a, deletes.deleted_rows(&a)));
    }

    #[test]
    fn vectors_sharing_a_puffin_file_are_told_apart() {
        let first = live(vector("p.stats", "a", 3, 4), 2);
        let second = live(vector("p.stats", "b", 3, 54), 2);
        assert_ne!(entry_key(&first.file), entry_key(&second.file));
        assert_eq!(entry_key(&first.file), ("p.stats", Some(4)));
        let a = live(data_file("a", 100), 1);
        let b = live(data_file("b", 10), 1);
        let deletes = DeleteFiles {
            files: vec![
                (&first, targets(&[("a", 3)])),
                (&second, targets(&[("b", 3)])),
            ],
        };
        // Each vector applies to its own data file only.
        let applying = deletes.applying_to("b", b.partition(), 1);
        assert_eq!(applying.len(), 1);
        assert_eq!(
            applying[0].file.referenced_data_file().as_deref(),
            Some("b")
        );
        assert_eq!(deletes.deleted_rows(&a), Some(3));
        assert!(mostly_deleted(&b, deletes.deleted_rows(&b)));
    }
}
