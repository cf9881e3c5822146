//! Parquet data and equality delete files, written through the `iceberg` crate's rolling
//! Parquet writer so every file carries complete column statistics (value counts, null
//! counts, exact lower and upper bounds, column sizes).

use std::sync::Arc;

use arrow_schema::SchemaRef as ArrowSchemaRef;
use floe_repr::Datum;
use iceberg::spec::{DataContentType, DataFile, DataFileFormat, Schema, SchemaRef};
use iceberg::writer::file_writer::ParquetWriterBuilder;
use iceberg::writer::file_writer::location_generator::{
    DefaultFileNameGenerator, DefaultLocationGenerator,
};
use iceberg::writer::file_writer::rolling_writer::{RollingFileWriter, RollingFileWriterBuilder};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};

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
    /// equality deletes) whose files are named `<prefix>-<n>.parquet`.
    pub fn new(
        table: &LoadedTable,
        schema: SchemaRef,
        content: FileContent,
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
            spec_id: table.metadata.default_partition_spec_id(),
            rows: 0,
        })
    }

    /// Writes rows given column by column (all columns of the writer's schema).
    pub async fn write(&mut self, columns: Vec<Vec<&Datum>>, rows: usize) -> Result<(), SinkError> {
        if rows == 0 {
            return Ok(());
        }
        let batch = record_batch(&self.arrow_schema, columns, rows)?;
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

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        self.rows
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
    SinkError::new(ErrorKind::UnexpectedResponse, message).with_retryable(false)
}
