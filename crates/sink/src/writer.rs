//! Parquet data and equality delete files, written through the `iceberg` crate's rolling
//! Parquet writer so every file carries complete column statistics (value counts, null
//! counts, exact lower and upper bounds, column sizes).

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef as ArrowSchemaRef;
use floe_repr::Datum;
use iceberg::spec::{DataContentType, DataFile, DataFileFormat, Schema, SchemaRef, TableMetadata};
use iceberg::writer::file_writer::ParquetWriterBuilder;
use iceberg::writer::file_writer::location_generator::{
    DefaultFileNameGenerator, DefaultLocationGenerator,
};
use iceberg::writer::file_writer::rolling_writer::{RollingFileWriter, RollingFileWriterBuilder};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::error::{ErrorKind, SinkError};
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
}

/// Writes rows of one schema into rolling Parquet files under the table's `data/` folder.
pub struct FileWriter {
    rolling: Option<Rolling>,
    arrow_schema: ArrowSchemaRef,
    content: FileContent,
    spec_id: i32,
    rows: u64,
}

impl FileWriter {
    /// A writer of `schema` (the table's schema, or the projection on the key columns for
    /// equality deletes) whose files are named `<prefix>-<n>.parquet` and written with
    /// partition spec `spec_id` (see [`writable_partition_spec`]).
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
        let properties = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            // Exact bounds for every column: readers prune with them, and equality deletes
            // are matched against them.
            .set_statistics_enabled(EnabledStatistics::Chunk)
            .set_statistics_truncate_length(None)
            .build();
        let location = DefaultLocationGenerator::new(&table.metadata)
            .map_err(|err| internal(format!("cannot place data files: {err}")))?;
        let names = DefaultFileNameGenerator::new(prefix, None, DataFileFormat::Parquet);
        let rolling = RollingFileWriterBuilder::new(
            ParquetWriterBuilder::new(properties, schema),
            target_file_size,
            table.file_io.clone(),
            location,
            names,
        )
        .build();
        Ok(FileWriter {
            rolling: Some(rolling),
            arrow_schema,
            content,
            spec_id,
            rows: 0,
        })
    }

    /// Writes a batch of the writer's Arrow schema.
    pub async fn write_batch(&mut self, batch: RecordBatch) -> Result<(), SinkError> {
        let rows = batch.num_rows();
        if rows == 0 {
            return Ok(());
        }
        let rolling = self
            .rolling
            .as_mut()
            .ok_or_else(|| internal("file writer used after close".into()))?;
        rolling
            .write(&None, &batch)
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
            match &self.content {
                FileContent::Data => {
                    builder.content(DataContentType::Data);
                }
                FileContent::EqualityDeletes(ids) => {
                    builder
                        .content(DataContentType::EqualityDeletes)
                        .equality_ids(Some(ids.clone()));
                }
            }
            files.push(
                builder
                    .build()
                    .map_err(|err| internal(format!("cannot describe a written file: {err}")))?,
            );
        }
        Ok(files)
    }
}

/// A [`FileWriter`] on a task of its own: Parquet encoding and uploads run while the
/// caller reads and converts the next rows (a pipeline of two stages, so a sink uses two
/// cores). At most [`PIPELINE_BATCHES`] converted batches wait between the stages, so
/// memory stays a few batches.
pub struct PipelinedWriter {
    /// `None` once closed; dropping it ends the writer task's input.
    sender: Option<mpsc::Sender<RecordBatch>>,
    /// The writer task: returns the files written. Aborted if this writer is dropped
    /// unclosed (a failed batch), so no upload continues for nothing.
    task: Option<JoinHandle<Result<Vec<DataFile>, SinkError>>>,
    arrow_schema: ArrowSchemaRef,
    rows: u64,
}

/// Converted batches waiting for the Parquet stage.
pub const PIPELINE_BATCHES: usize = 2;

impl PipelinedWriter {
    pub fn spawn(mut writer: FileWriter) -> PipelinedWriter {
        let arrow_schema = writer.arrow_schema.clone();
        let (sender, mut receiver) = mpsc::channel::<RecordBatch>(PIPELINE_BATCHES);
        let task = tokio::spawn(async move {
            while let Some(batch) = receiver.recv().await {
                writer.write_batch(batch).await?;
            }
            writer.close().await
        });
        PipelinedWriter {
            sender: Some(sender),
            task: Some(task),
            arrow_schema,
            rows: 0,
        }
    }

    /// Converts rows given column by column (all columns of the writer's schema) and hands
    /// them to the writer task.
    pub async fn write(&mut self, columns: Vec<Vec<&Datum>>, rows: usize) -> Result<(), SinkError> {
        if rows == 0 {
            return Ok(());
        }
        let batch = record_batch(&self.arrow_schema, columns, rows)?;
        let sender = self
            .sender
            .as_ref()
            .ok_or_else(|| internal("file writer used after close".into()))?;
        if sender.send(batch).await.is_err() {
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

/// The partition spec new files of `table` are written with: the table's current one,
/// which floe writes only when it is unpartitioned (a sink creates its tables unpartitioned;
/// partitioned writing is yet to come). A table whose current spec partitions, because it
/// was changed outside floe, is an error naming the spec: a file written unpartitioned
/// under a partitioned spec would carry no partition values.
pub fn writable_partition_spec(
    metadata: &TableMetadata,
    qualified_table: &str,
) -> Result<i32, SinkError> {
    let spec = metadata.default_partition_spec();
    if spec.is_unpartitioned() {
        return Ok(spec.spec_id());
    }
    let fields: Vec<String> = spec
        .fields()
        .iter()
        .map(|field| {
            let source = metadata
                .current_schema()
                .field_by_id(field.source_id)
                .map_or_else(|| format!("field {}", field.source_id), |f| f.name.clone());
            format!("{}({source})", field.transform)
        })
        .collect();
    Err(SinkError::new(
        ErrorKind::InvalidConfig,
        format!(
            "Iceberg table \"{qualified_table}\" is partitioned by spec {} ({}), which floe cannot write",
            spec.spec_id(),
            fields.join(", ")
        ),
    )
    .with_detail("The table's partition spec was changed outside floe; floe writes its tables unpartitioned.")
    .with_hint("Set the table's partition spec back to unpartitioned, or drop and recreate the sink.")
    .with_retryable(false))
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
