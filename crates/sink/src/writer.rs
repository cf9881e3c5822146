//! Parquet data and equality delete files, written through the `iceberg` crate's rolling
//! Parquet writer so every file carries complete column statistics (value counts, null
//! counts, lower and upper bounds, column sizes).

use std::collections::HashSet;
use std::sync::Arc;

use arrow_array::{Array, RecordBatch};
use arrow_schema::SchemaRef as ArrowSchemaRef;
use floe_repr::Datum;
use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFile, DataFileFormat, PartitionKey, Schema, SchemaRef, TableMetadata,
};
use iceberg::writer::file_writer::ParquetWriterBuilder;
use iceberg::writer::file_writer::location_generator::{
    DefaultFileNameGenerator, DefaultLocationGenerator,
};
use iceberg::writer::file_writer::rolling_writer::{RollingFileWriter, RollingFileWriterBuilder};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::error::SinkError;
use crate::partition::{Fanout, Partitioning};
use crate::table::{LoadedTable, storage_error};
use crate::types::record_batch;

type Rolling =
    RollingFileWriter<ParquetWriterBuilder, DefaultLocationGenerator, DefaultFileNameGenerator>;

/// What a [`FileWriter`] writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileContent {
    Data,
    /// Equality deletes on these field ids.
    EqualityDeletes(Vec<i32>),
    /// Position deletes (`file_path`, `pos`; see [`crate::position`]).
    PositionDeletes,
}

/// Writes rows of one schema into rolling Parquet files under the table's `data/` folder.
pub struct FileWriter {
    /// Until the first batch: what the rolling writer is built from. The first batch's
    /// values choose each column's encoding (see [`writer_properties`]).
    plan: Option<RollingPlan>,
    /// From the first batch until closed.
    rolling: Option<Rolling>,
    arrow_schema: ArrowSchemaRef,
    content: FileContent,
    spec_id: i32,
    /// The partition the file belongs to (`None`: an unpartitioned spec).
    partition: Option<PartitionKey>,
    rows: u64,
}

impl FileWriter {
    /// A writer of `schema` (the table's schema, or the projection on the key columns for
    /// equality deletes) whose files are named `<prefix>-<n>.parquet` and written with
    /// partition spec `spec_id` (see [`writing_partition_spec`]), unpartitioned unless
    /// placed in a partition with [`FileWriter::in_partition`].
    pub fn new(
        table: &LoadedTable,
        schema: SchemaRef,
        content: FileContent,
        spec_id: i32,
        prefix: String,
        target_file_size: usize,
    ) -> Result<FileWriter, SinkError> {
        let arrow_schema = Arc::new(
            iceberg::arrow::schema_to_arrow_schema(&schema)
                .map_err(|err| internal(format!("cannot convert the schema to Arrow: {err}")))?,
        );
        let location = DefaultLocationGenerator::new(&table.metadata)
            .map_err(|err| internal(format!("cannot place data files: {err}")))?;
        let names = DefaultFileNameGenerator::new(prefix, None, DataFileFormat::Parquet);
        let plan = RollingPlan {
            schema,
            file_io: table.file_io.clone(),
            location,
            names,
            target_file_size,
        };
        Ok(FileWriter {
            plan: Some(plan),
            rolling: None,
            arrow_schema,
            content,
            spec_id,
            partition: None,
            rows: 0,
        })
    }

    /// The writer of files of partition `key` (placed under its partition path, and
    /// carrying its tuple and spec id).
    pub fn in_partition(mut self, key: PartitionKey) -> FileWriter {
        self.spec_id = key.spec().spec_id();
        self.partition = Some(key);
        self
    }

    /// The Arrow schema of the batches this writer takes.
    pub fn arrow_schema(&self) -> ArrowSchemaRef {
        self.arrow_schema.clone()
    }

    /// Writes a batch of the writer's Arrow schema.
    pub async fn write_batch(&mut self, batch: RecordBatch) -> Result<(), SinkError> {
        let rows = batch.num_rows();
        if rows == 0 {
            return Ok(());
        }
        if let Some(plan) = self.plan.take() {
            self.rolling = Some(plan.build(&batch));
        }
        let rolling = self
            .rolling
            .as_mut()
            .ok_or_else(|| internal("file writer used after close".into()))?;
        rolling
            .write(&self.partition, &batch)
            .await
            .map_err(|err| storage_error("writing a Parquet file failed".into(), err))?;
        self.rows += rows as u64;
        Ok(())
    }

    /// Finishes the open file and returns the files written.
    pub async fn close(mut self) -> Result<Vec<DataFile>, SinkError> {
        let Some(rolling) = self.rolling.take() else {
            return Ok(Vec::new());
        };
        if self.rows == 0 {
            return Ok(Vec::new());
        }
        let builders = rolling
            .close()
            .await
            .map_err(|err| storage_error("finishing a Parquet file failed".into(), err))?;
        let mut files = Vec::with_capacity(builders.len());
        for mut builder in builders {
            builder.partition_spec_id(self.spec_id);
            if let Some(key) = &self.partition {
                builder.partition(key.data().clone());
            }
            match &self.content {
                FileContent::Data => {
                    builder.content(DataContentType::Data);
                }
                FileContent::EqualityDeletes(ids) => {
                    builder
                        .content(DataContentType::EqualityDeletes)
                        .equality_ids(Some(ids.clone()));
                }
                FileContent::PositionDeletes => {
                    builder.content(DataContentType::PositionDeletes);
                }
            }
            let describe = |builder: &iceberg::spec::DataFileBuilder| {
                builder
                    .build()
                    .map_err(|err| internal(format!("cannot describe a written file: {err}")))
            };
            let mut file = describe(&builder)?;
            if let Some((lower, upper)) = crate::bounds::truncated_bounds(&file) {
                builder.lower_bounds(lower).upper_bounds(upper);
                file = describe(&builder)?;
            }
            files.push(file);
        }
        Ok(files)
    }
}

/// What a [`FileWriter`]'s rolling writer is built from at its first batch.
struct RollingPlan {
    schema: SchemaRef,
    file_io: FileIO,
    location: DefaultLocationGenerator,
    names: DefaultFileNameGenerator,
    target_file_size: usize,
}

impl RollingPlan {
    /// The rolling writer of files whose first batch is `first`.
    fn build(self, first: &RecordBatch) -> Rolling {
        RollingFileWriterBuilder::new(
            ParquetWriterBuilder::new(writer_properties(first), self.schema),
            self.target_file_size,
            self.file_io,
            self.location,
            self.names,
        )
        .build()
    }
}

/// The Parquet properties of files whose first batch is `first` (public for the
/// benchmark's ceiling, which encodes as the sink does).
pub fn writer_properties(first: &RecordBatch) -> WriterProperties {
    let mut properties = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        // Exact bounds for every column: readers prune with them, and equality deletes
        // are matched against them (the file's bounds of long strings and binaries are
        // then truncated as Iceberg's `truncate(16)`, see `crate::bounds`).
        .set_statistics_enabled(EnabledStatistics::Chunk)
        .set_statistics_truncate_length(None);
    // A dictionary of values that hardly repeat costs a hash of every value, and is
    // given up once it outgrows its page (a unique bigint column hashes 131,072 values
    // per row group first), with the file no smaller for it; such columns are written
    // plain from the start.
    for (field, column) in first.schema().fields().iter().zip(first.columns()) {
        if mostly_distinct(column.as_ref()) {
            let path = ColumnPath::new(vec![field.name().clone()]);
            properties = properties.set_column_dictionary_enabled(path, false);
        }
    }
    properties.build()
}

/// How many of a column's first values [`mostly_distinct`] looks at.
const DISTINCT_SAMPLE: usize = 16 * 1024;
/// Fewer non-null values than this say nothing of the column (a small first batch).
const DISTINCT_SAMPLE_MINIMUM: usize = 1024;

/// Whether at least nine in ten of the first non-null values of `column` (a flat column
/// of fixed-width or byte values) differ; `false` for nested columns, booleans and too
/// few values.
fn mostly_distinct(column: &dyn Array) -> bool {
    let Some(value) = value_bytes(column) else {
        return false;
    };
    let mut seen = HashSet::with_capacity_and_hasher(
        DISTINCT_SAMPLE.min(column.len()),
        foldhash::fast::RandomState::default(),
    );
    let mut values = 0;
    let valid = (0..column.len()).filter(|index| column.is_valid(*index));
    for index in valid.take(DISTINCT_SAMPLE) {
        seen.insert(value(index));
        values += 1;
    }
    values >= DISTINCT_SAMPLE_MINIMUM && seen.len() * 10 >= values * 9
}

/// The bytes of the value at an index of `column`, for the flat types Parquet may
/// dictionary-encode.
fn value_bytes<'a>(column: &'a dyn Array) -> Option<Box<dyn Fn(usize) -> &'a [u8] + 'a>> {
    use arrow_array::cast::AsArray;
    use arrow_schema::DataType;
    Some(match column.data_type() {
        DataType::Utf8 => {
            let strings = column.as_string::<i32>();
            Box::new(move |index| strings.value(index).as_bytes())
        }
        DataType::LargeUtf8 => {
            let strings = column.as_string::<i64>();
            Box::new(move |index| strings.value(index).as_bytes())
        }
        DataType::Binary => {
            let bytes = column.as_binary::<i32>();
            Box::new(move |index| bytes.value(index))
        }
        DataType::LargeBinary => {
            let bytes = column.as_binary::<i64>();
            Box::new(move |index| bytes.value(index))
        }
        DataType::FixedSizeBinary(_) => {
            let bytes = column.as_fixed_size_binary();
            Box::new(move |index| bytes.value(index))
        }
        kind if kind.is_primitive() => {
            let width = kind.primitive_width()?;
            // The array's own values (already sliced to it), `width` bytes each.
            let values: &[u8] = arrow_array::downcast_primitive_array!(
                column => column.values().inner().as_slice(),
                _ => return None
            );
            Box::new(move |index| &values[index * width..(index + 1) * width])
        }
        _ => return None,
    })
}

/// A [`FileWriter`] on a task of its own: Parquet encoding and uploads run while the
/// caller reads and converts the next rows (a pipeline of two stages, so a sink uses two
/// cores). At most [`PIPELINE_BATCHES`] converted batches wait between the stages, so
/// memory stays a few batches.
pub struct PipelinedWriter {
    /// `None` once closed; dropping it ends the writer task's input. Each batch comes
    /// with its rows' partition sources when the spec partitions.
    sender: Option<mpsc::Sender<(RecordBatch, Option<RecordBatch>)>>,
    /// The writer task: returns the files written. Aborted if this writer is dropped
    /// unclosed (a failed batch), so no upload continues for nothing.
    task: Option<JoinHandle<Result<Vec<DataFile>, SinkError>>>,
    arrow_schema: ArrowSchemaRef,
    partitioning: Option<Arc<Partitioning>>,
    rows: u64,
}

/// Converted batches waiting for the Parquet stage.
pub const PIPELINE_BATCHES: usize = 2;

impl PipelinedWriter {
    /// A writer task over `fanout`, which takes batches of `arrow_schema` and splits them
    /// per partition of `partitioning`, if any.
    pub fn spawn(
        mut fanout: Fanout,
        arrow_schema: ArrowSchemaRef,
        partitioning: Option<Arc<Partitioning>>,
    ) -> PipelinedWriter {
        let (sender, mut receiver) =
            mpsc::channel::<(RecordBatch, Option<RecordBatch>)>(PIPELINE_BATCHES);
        let task = tokio::spawn(async move {
            while let Some((batch, sources)) = receiver.recv().await {
                fanout.write(batch, sources).await?;
            }
            fanout.close().await
        });
        PipelinedWriter {
            sender: Some(sender),
            task: Some(task),
            arrow_schema,
            partitioning,
            rows: 0,
        }
    }

    /// The Arrow schema of the batches [`PipelinedWriter::write_batch`] takes.
    pub fn arrow_schema(&self) -> ArrowSchemaRef {
        self.arrow_schema.clone()
    }

    /// When the spec partitions: per partition field, the position of its source among
    /// the values of the rows given to [`PipelinedWriter::write`] (which may hold more
    /// columns than the writer writes, as a delete's full row holds its key).
    pub fn partition_sources(&self) -> Option<&[usize]> {
        self.partitioning.as_deref().map(Partitioning::sources)
    }

    /// Converts rows given column by column (all columns of the writer's schema) and hands
    /// them to the writer task, with their partition sources (column by column, see
    /// [`PipelinedWriter::partition_sources`]) when the spec partitions.
    pub async fn write(
        &mut self,
        columns: Vec<Vec<&Datum>>,
        sources: Option<Vec<Vec<&Datum>>>,
        rows: usize,
    ) -> Result<(), SinkError> {
        if rows == 0 {
            return Ok(());
        }
        let batch = record_batch(&self.arrow_schema, columns, rows)?;
        let sources = match (&self.partitioning, sources) {
            (Some(partitioning), Some(sources)) => Some(partitioning.source_batch(sources, rows)?),
            (Some(_), None) => {
                return Err(internal(
                    "rows of a partitioned table came without their partition values".into(),
                ));
            }
            (None, _) => None,
        };
        self.send(batch, sources).await
    }

    /// Hands a batch of the writer's Arrow schema to the writer task, with its partition
    /// sources when the spec partitions.
    pub async fn write_batch(&mut self, batch: RecordBatch) -> Result<(), SinkError> {
        let sources = match &self.partitioning {
            Some(partitioning) => Some(partitioning.sources_of(&batch)?),
            None => None,
        };
        self.send(batch, sources).await
    }

    async fn send(
        &mut self,
        batch: RecordBatch,
        sources: Option<RecordBatch>,
    ) -> Result<(), SinkError> {
        let rows = batch.num_rows();
        if rows == 0 {
            return Ok(());
        }
        let sender = self
            .sender
            .as_ref()
            .ok_or_else(|| internal("file writer used after close".into()))?;
        if sender.send((batch, sources)).await.is_err() {
            // The writer task stopped: it failed, and its error says why.
            self.sender = None;
            return Err(self.join().await.err().unwrap_or_else(|| {
                internal("the Parquet writer stopped before its input ended".into())
            }));
        }
        self.rows += rows as u64;
        Ok(())
    }

    /// Rows handed to the writer so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Waits for the writer task to write everything and returns the files written.
    pub async fn close(mut self) -> Result<Vec<DataFile>, SinkError> {
        self.sender = None;
        self.join().await
    }

    async fn join(&mut self) -> Result<Vec<DataFile>, SinkError> {
        let task = self
            .task
            .take()
            .ok_or_else(|| internal("file writer closed twice".into()))?;
        match task.await {
            Ok(result) => result,
            Err(err) => Err(internal(format!("the Parquet writer task failed: {err}"))),
        }
    }
}

impl Drop for PipelinedWriter {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// The partition spec new files of `table` are written with: the table's default spec,
/// whichever it is now (a spec someone changed with `add-spec` and `set-default-spec` is
/// written from the next batch on), with the partitioning of rows under it (`None` when
/// it is unpartitioned).
pub fn writing_partition_spec(
    metadata: &TableMetadata,
) -> Result<(i32, Option<Arc<Partitioning>>), SinkError> {
    let spec = metadata.default_partition_spec();
    let partitioning = Partitioning::new(spec, metadata.current_schema())?;
    Ok((spec.spec_id(), partitioning.map(Arc::new)))
}

/// The projection of `schema` on the fields `ids` (top-level columns), for equality
/// delete files.
pub fn key_schema(schema: &Schema, ids: &[i32]) -> Result<SchemaRef, SinkError> {
    let fields = ids
        .iter()
        .map(|id| {
            schema
                .as_struct()
                .fields()
                .iter()
                .find(|field| field.id == *id)
                .cloned()
                .ok_or_else(|| internal(format!("the table has no field with id {id}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Schema::builder()
        .with_schema_id(schema.schema_id())
        .with_fields(fields)
        .build()
        .map(Arc::new)
        .map_err(|err| internal(format!("cannot build the key schema: {err}")))
}

fn internal(message: String) -> SinkError {
    SinkError::internal(message)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
    use parquet::schema::types::ColumnPath;

    use super::{mostly_distinct, writer_properties};

    fn keys(count: i64, distinct: i64) -> Int64Array {
        Int64Array::from_iter_values((0..count).map(|i| i % distinct))
    }

    #[test]
    fn unique_values_are_mostly_distinct_and_repeated_ones_are_not() {
        assert!(mostly_distinct(&keys(20_000, 20_000)));
        assert!(!mostly_distinct(&keys(20_000, 100)));
        // Nine in ten distinct is the line.
        assert!(mostly_distinct(&keys(10_000, 9_000)));
        assert!(!mostly_distinct(&keys(10_000, 8_000)));
        let names = StringArray::from_iter_values((0..5_000).map(|i| format!("customer-{i}")));
        assert!(mostly_distinct(&names));
        let kinds = StringArray::from_iter_values((0..5_000).map(|i| format!("kind-{}", i % 7)));
        assert!(!mostly_distinct(&kinds));
    }

    #[test]
    fn a_small_or_mostly_null_first_batch_keeps_the_dictionary() {
        assert!(!mostly_distinct(&keys(1_000, 1_000)));
        let sparse = Int64Array::from_iter((0..20_000).map(|i| (i % 20 == 0).then_some(i)));
        assert!(!mostly_distinct(&sparse));
    }

    #[test]
    fn a_sliced_column_is_read_from_its_own_values() {
        // Unique values first, then one repeated value: the slice holds only the latter.
        let values =
            Int64Array::from_iter_values((0..10_000).chain(std::iter::repeat_n(7, 10_000)));
        assert!(!mostly_distinct(&values.slice(10_000, 10_000)));
        assert!(mostly_distinct(&values.slice(0, 10_000)));
    }

    #[test]
    fn only_mostly_distinct_columns_are_written_without_a_dictionary() {
        let batch = RecordBatch::try_from_iter([
            ("id", Arc::new(keys(4_096, 4_096)) as ArrayRef),
            ("bucket", Arc::new(keys(4_096, 16)) as ArrayRef),
        ])
        .unwrap();
        let properties = writer_properties(&batch);
        assert!(!properties.dictionary_enabled(&ColumnPath::from("id")));
        assert!(properties.dictionary_enabled(&ColumnPath::from("bucket")));
    }
}
