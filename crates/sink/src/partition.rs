//! Partitioned tables: the spec a sink creates its table with (`PARTITION BY`), the
//! partition values of rows ([`Partitioning`], with the `iceberg` crate's transform
//! functions: murmur3 buckets, code-point truncation, the time transforms), and the
//! writer that fans one stream of rows out into files per partition ([`Fanout`]).
//!
//! Every file carries its partition tuple and the spec id it was written with; a commit's
//! manifests are written per spec (see `crate::snapshot`), and the manifest writer derives
//! each manifest's partition summaries (lower, upper, contains-null) from the tuples.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, RecordBatchOptions, StructArray, UInt32Array};
use arrow_schema::{DataType, Fields, Schema as ArrowSchema, SchemaRef as ArrowSchemaRef};
use floe_repr::Datum;
use iceberg::spec::{
    DataFile, Literal, PartitionKey, PartitionSpec, PartitionSpecRef, SchemaRef, Struct,
    StructType, TableMetadata, Transform, Type, UnboundPartitionSpec,
};
use iceberg::transform::{BoxedTransformFunction, create_transform_function};

use crate::error::{ErrorKind, SinkError};
use crate::types::record_batch;
use crate::writer::FileWriter;

/// The table's partition spec `spec_id`, which a manifest or data file names: an error
/// (the table's metadata is inconsistent) when the table has no such spec.
pub(crate) fn spec_by_id(
    metadata: &TableMetadata,
    spec_id: i32,
) -> Result<&PartitionSpecRef, SinkError> {
    metadata.partition_spec_by_id(spec_id).ok_or_else(|| {
        SinkError::internal(format!(
            "the Iceberg table has no partition spec {spec_id}, which its files or manifests name"
        ))
    })
}

/// One field of `PARTITION BY`: a transform of a column of the relation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionColumn {
    pub column: String,
    pub transform: Transform,
}

/// A partition field's name, as Iceberg's Java and Python libraries name them: the column
/// for identity, else the column with the transform's suffix.
fn field_name(field: &PartitionColumn) -> String {
    let suffix = match field.transform {
        Transform::Identity => return field.column.clone(),
        Transform::Bucket(_) => "bucket",
        Transform::Truncate(_) => "trunc",
        Transform::Year => "year",
        Transform::Month => "month",
        Transform::Day => "day",
        Transform::Hour => "hour",
        Transform::Void => "null",
        Transform::Unknown => "unknown",
    };
    format!("{}_{suffix}", field.column)
}

/// The spec `PARTITION BY` asks for, checked against `schema` (the schema the catalog
/// returned, whose field ids it uses). Partition field ids start at 1000, as Iceberg
/// assigns them; the spec id is left to the catalog (`add-spec` assigns the next one).
pub fn partition_spec(
    schema: &SchemaRef,
    fields: &[PartitionColumn],
) -> Result<UnboundPartitionSpec, SinkError> {
    let mut builder = PartitionSpec::builder(schema.clone());
    for field in fields {
        builder = builder
            .add_partition_field(&field.column, field_name(field), field.transform)
            .map_err(|err| {
                SinkError::caused_by(
                    ErrorKind::InvalidConfig,
                    format!("cannot partition by {}({})", field.transform, field.column),
                    err,
                )
                .with_retryable(false)
            })?;
    }
    let spec = builder.build().map_err(|err| {
        SinkError::caused_by(ErrorKind::InvalidConfig, "invalid PARTITION BY", err)
            .with_retryable(false)
    })?;
    Ok(UnboundPartitionSpec::builder()
        .add_partition_fields(
            spec.fields()
                .iter()
                .map(|field| field.clone().into_unbound()),
        )
        .map_err(|err| SinkError::caused_by(ErrorKind::Internal, "invalid PARTITION BY", err))?
        .build())
}

/// The partition values of rows under one partitioned spec of a table.
pub struct Partitioning {
    spec: PartitionSpec,
    table_schema: SchemaRef,
    /// Per partition field, its source column's position among the table's top-level
    /// columns (which are the relation's, then APPEND's own).
    sources: Vec<usize>,
    /// The source columns as Arrow fields, in partition field order.
    source_schema: ArrowSchemaRef,
    transforms: Vec<BoxedTransformFunction>,
    partition_type: StructType,
    partition_fields: Fields,
}

impl std::fmt::Debug for Partitioning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Partitioning")
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

impl Partitioning {
    /// The partitioning of files written with `spec` into a table of `schema`; `None` for
    /// an unpartitioned spec. A spec whose source is not a top-level column of the schema
    /// cannot be written by floe (another writer's spec on a nested field).
    pub fn new(
        spec: &PartitionSpec,
        schema: &SchemaRef,
    ) -> Result<Option<Partitioning>, SinkError> {
        if spec.is_unpartitioned() {
            return Ok(None);
        }
        let table_arrow = iceberg::arrow::schema_to_arrow_schema(schema)
            .map_err(|err| internal(format!("cannot convert the schema to Arrow: {err}")))?;
        let top_level = schema.as_struct().fields();
        let mut sources = Vec::new();
        let mut source_fields = Vec::new();
        let mut transforms = Vec::new();
        for (at, field) in spec.fields().iter().enumerate() {
            let position = top_level
                .iter()
                .position(|column| column.id == field.source_id)
                .ok_or_else(|| {
                    SinkError::new(
                        ErrorKind::InvalidConfig,
                        format!(
                            "partition field {} of spec {} has source field {}, which is not a top-level column: floe cannot write it",
                            field.name,
                            spec.spec_id(),
                            field.source_id
                        ),
                    )
                    .with_retryable(false)
                })?;
            let arrow_field = table_arrow.field(position);
            source_fields.push(arrow_field.clone().with_name(format!("source_{at}")));
            sources.push(position);
            transforms.push(create_transform_function(&field.transform).map_err(|err| {
                SinkError::caused_by(
                    ErrorKind::InvalidConfig,
                    format!("floe cannot apply partition transform {}", field.transform),
                    err,
                )
                .with_retryable(false)
            })?);
        }
        let partition_type = spec
            .partition_type(schema)
            .map_err(|err| internal(format!("cannot type the partition spec: {err}")))?;
        let partition_fields =
            match iceberg::arrow::type_to_arrow_type(&Type::Struct(partition_type.clone())) {
                Ok(DataType::Struct(fields)) => fields,
                Ok(_) | Err(_) => {
                    return Err(internal(
                        "cannot convert the partition type to Arrow".into(),
                    ));
                }
            };
        Ok(Some(Partitioning {
            spec: spec.clone(),
            table_schema: schema.clone(),
            sources,
            source_schema: Arc::new(ArrowSchema::new(source_fields)),
            transforms,
            partition_type,
            partition_fields,
        }))
    }

    pub fn spec_id(&self) -> i32 {
        self.spec.spec_id()
    }

    /// Per partition field, the position of its source among a row's values (the table's
    /// top-level columns).
    pub fn sources(&self) -> &[usize] {
        &self.sources
    }

    /// The source columns' values (per partition field, one value per row) as a batch of
    /// [`Partitioning::partitions_of`]'s input.
    pub fn source_batch(
        &self,
        columns: Vec<Vec<&Datum>>,
        rows: usize,
    ) -> Result<RecordBatch, SinkError> {
        record_batch(&self.source_schema, columns, rows)
    }

    /// The source columns of `batch`, a batch of the table's Arrow schema.
    pub fn sources_of(&self, batch: &RecordBatch) -> Result<RecordBatch, SinkError> {
        let columns = self
            .sources
            .iter()
            .map(|position| {
                batch.columns().get(*position).cloned().ok_or_else(|| {
                    internal(format!("a batch without its partition source {position}"))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
        RecordBatch::try_new_with_options(self.source_schema.clone(), columns, &options)
            .map_err(|err| internal(format!("cannot assemble partition sources: {err}")))
    }

    /// Each row's partition tuple.
    pub fn partitions_of(&self, sources: &RecordBatch) -> Result<Vec<Struct>, SinkError> {
        let mut values: Vec<ArrayRef> = Vec::with_capacity(self.transforms.len());
        for (column, transform) in sources.columns().iter().zip(&self.transforms) {
            values.push(
                transform
                    .transform(column.clone())
                    .map_err(|err| partition_error("cannot compute a partition value", err))?,
            );
        }
        let tuples = StructArray::try_new(self.partition_fields.clone(), values, None)
            .map_err(|err| internal(format!("cannot assemble partition values: {err}")))?;
        let literals = iceberg::arrow::arrow_struct_to_literal(
            &(Arc::new(tuples) as ArrayRef),
            &self.partition_type,
        )
        .map_err(|err| partition_error("cannot read partition values", err))?;
        literals
            .into_iter()
            .map(|literal| match literal {
                Some(Literal::Struct(tuple)) => Ok(tuple),
                _ => Err(internal("a row has no partition tuple".into())),
            })
            .collect()
    }

    /// The key files of partition `tuple` are written under.
    pub fn key(&self, tuple: Struct) -> PartitionKey {
        PartitionKey::new(self.spec.clone(), self.table_schema.clone(), tuple)
    }
}

/// Open files per batch and kind of file: past this many partitions, the least recently
/// written file is finished (its partition gets another file if more of its rows come),
/// so memory stays bounded whatever the number of partitions.
pub const MAX_OPEN_PARTITIONS: usize = 32;

/// Makes the file writer of one partition.
pub type MakeWriter =
    Box<dyn Fn(usize, Option<PartitionKey>) -> Result<FileWriter, SinkError> + Send>;

/// Files of one kind for one batch, fanned out per partition.
pub struct Fanout {
    make: MakeWriter,
    partitioning: Option<Arc<Partitioning>>,
    /// The file of an unpartitioned spec.
    single: Option<FileWriter>,
    /// Open files by partition tuple, with the time each was last written.
    open: HashMap<Struct, (FileWriter, u64)>,
    clock: u64,
    /// Writers made so far (names each writer's files apart).
    made: usize,
    finished: Vec<DataFile>,
}

impl Fanout {
    pub fn new(make: MakeWriter, partitioning: Option<Arc<Partitioning>>) -> Fanout {
        Fanout {
            make,
            partitioning,
            single: None,
            open: HashMap::new(),
            clock: 0,
            made: 0,
            finished: Vec::new(),
        }
    }

    /// Writes `batch`, whose rows' partition sources are `sources` (`None` when
    /// unpartitioned).
    pub async fn write(
        &mut self,
        batch: RecordBatch,
        sources: Option<RecordBatch>,
    ) -> Result<(), SinkError> {
        let (Some(partitioning), Some(sources)) = (self.partitioning.clone(), sources) else {
            if self.single.is_none() {
                self.single = Some((self.make)(self.made, None)?);
                self.made += 1;
            }
            return match self.single.as_mut() {
                Some(writer) => writer.write_batch(batch).await,
                None => Err(internal("no open file".into())),
            };
        };
        let tuples = partitioning.partitions_of(&sources)?;
        // Rows by partition, in order of first appearance.
        let mut groups: Vec<(Struct, Vec<u32>)> = Vec::new();
        let mut by_tuple: HashMap<&Struct, usize> = HashMap::new();
        for (row, tuple) in tuples.iter().enumerate() {
            let at = *by_tuple.entry(tuple).or_insert_with(|| {
                groups.push((tuple.clone(), Vec::new()));
                groups.len() - 1
            });
            groups[at].1.push(row as u32);
        }
        for (tuple, rows) in groups {
            let part = if rows.len() == batch.num_rows() {
                batch.clone()
            } else {
                take_rows(&batch, rows)?
            };
            self.clock += 1;
            let clock = self.clock;
            if !self.open.contains_key(&tuple) {
                self.make_room().await?;
                let writer = (self.make)(self.made, Some(partitioning.key(tuple.clone())))?;
                self.made += 1;
                self.open.insert(tuple.clone(), (writer, clock));
            }
            let Some((writer, used)) = self.open.get_mut(&tuple) else {
                return Err(internal("a partition's file is not open".into()));
            };
            *used = clock;
            writer.write_batch(part).await?;
        }
        Ok(())
    }

    /// Finishes the least recently written file when [`MAX_OPEN_PARTITIONS`] are open.
    async fn make_room(&mut self) -> Result<(), SinkError> {
        if self.open.len() < MAX_OPEN_PARTITIONS {
            return Ok(());
        }
        let oldest = self
            .open
            .iter()
            .min_by_key(|(_, (_, used))| *used)
            .map(|(tuple, _)| tuple.clone());
        if let Some((writer, _)) = oldest.and_then(|tuple| self.open.remove(&tuple)) {
            self.finished.extend(writer.close().await?);
        }
        Ok(())
    }

    /// Finishes every file and returns all files written.
    pub async fn close(mut self) -> Result<Vec<DataFile>, SinkError> {
        if let Some(single) = self.single.take() {
            self.finished.extend(single.close().await?);
        }
        let mut open: Vec<(FileWriter, u64)> = self.open.drain().map(|(_, open)| open).collect();
        // In order of first write: deterministic file order within a batch.
        open.sort_by_key(|(_, used)| *used);
        for (writer, _) in open {
            self.finished.extend(writer.close().await?);
        }
        Ok(self.finished)
    }
}

fn take_rows(batch: &RecordBatch, rows: Vec<u32>) -> Result<RecordBatch, SinkError> {
    let indices = UInt32Array::from(rows);
    let columns = batch
        .columns()
        .iter()
        .map(|column| arrow_select::take::take(column.as_ref(), &indices, None))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| internal(format!("cannot split a batch by partition: {err}")))?;
    let options = arrow_array::RecordBatchOptions::new().with_row_count(Some(indices.len()));
    RecordBatch::try_new_with_options(batch.schema(), columns, &options)
        .map_err(|err| internal(format!("cannot split a batch by partition: {err}")))
}

fn partition_error(context: &str, err: iceberg::Error) -> SinkError {
    SinkError::caused_by(ErrorKind::DataConversion, context, err)
}

fn internal(message: String) -> SinkError {
    SinkError::internal(message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use floe_repr::{ColumnType, RelationDesc, SqlScalarType};

    fn column(name: &str, scalar_type: SqlScalarType) -> (String, ColumnType) {
        (
            name.to_string(),
            ColumnType {
                scalar_type,
                nullable: true,
            },
        )
    }

    /// The partition tuples of `rows` of `desc` under `fields`.
    fn tuples(desc: &RelationDesc, fields: &[PartitionColumn], rows: &[Vec<Datum>]) -> Vec<Struct> {
        let schema: SchemaRef = Arc::new(crate::types::sink_schema(desc, false, &[]).unwrap());
        let spec = partition_spec(&schema, fields)
            .unwrap()
            .bind(schema.clone())
            .unwrap();
        let partitioning = Partitioning::new(&spec, &schema).unwrap().unwrap();
        let columns = partitioning
            .sources()
            .iter()
            .map(|at| rows.iter().map(|row| &row[*at]).collect())
            .collect();
        let batch = partitioning.source_batch(columns, rows.len()).unwrap();
        partitioning.partitions_of(&batch).unwrap()
    }

    #[test]
    fn buckets_are_the_iceberg_specs_murmur3_hashes_of_floes_values() {
        // The spec's test vectors (Appendix B); with N = i32::MAX a bucket is the hash's
        // low 31 bits.
        let desc = RelationDesc {
            columns: vec![
                column("i", SqlScalarType::Int32),
                column("l", SqlScalarType::Int64),
                column(
                    "d",
                    SqlScalarType::Numeric {
                        precision: Some(9),
                        max_scale: Some(2),
                    },
                ),
                column("dt", SqlScalarType::Date),
                column("ts", SqlScalarType::TimestampTz),
                column("s", SqlScalarType::Text),
                column("u", SqlScalarType::Uuid),
            ],
            unique_keys: vec![],
        };
        let fields: Vec<PartitionColumn> = ["i", "l", "d", "dt", "ts", "s", "u"]
            .iter()
            .map(|c| PartitionColumn {
                column: c.to_string(),
                transform: Transform::Bucket(i32::MAX as u32),
            })
            .collect();
        let uuid = [
            0xf7, 0x9c, 0x3e, 0x09, 0x67, 0x7c, 0x4b, 0xbd, 0xa4, 0x79, 0x3f, 0x34, 0x9c, 0xb7,
            0x85, 0xe7,
        ];
        let row = vec![
            Datum::Int32(34),
            Datum::Int64(34),
            Datum::Numeric("14.20".into()),
            Datum::Date(17_486),
            // 2017-11-16T22:31:08Z
            Datum::TimestampTz(1_510_871_468_000_000),
            Datum::Text("iceberg".into()),
            Datum::Uuid(uuid),
        ];
        let hashes: [i32; 7] = [
            2017239379,
            2017239379,
            -500754589,
            -653330422,
            -2047944441,
            1210000089,
            1488055340,
        ];
        let expected = Struct::from_iter(
            hashes
                .iter()
                .map(|hash| Some(Literal::int(hash & i32::MAX))),
        );
        assert_eq!(tuples(&desc, &fields, &[row]), [expected]);
    }

    #[test]
    fn truncation_and_time_transforms_follow_the_spec() {
        let desc = RelationDesc {
            columns: vec![
                column("s", SqlScalarType::Text),
                column(
                    "d",
                    SqlScalarType::Numeric {
                        precision: Some(9),
                        max_scale: Some(2),
                    },
                ),
                column("n", SqlScalarType::Int64),
                column("ts", SqlScalarType::TimestampTz),
                // One time transform per column (Iceberg refuses redundant ones).
                column("ts2", SqlScalarType::TimestampTz),
                column("ts3", SqlScalarType::TimestampTz),
            ],
            unique_keys: vec![],
        };
        let field = |column: &str, transform| PartitionColumn {
            column: column.into(),
            transform,
        };
        let fields = [
            // Strings by code points, not bytes.
            field("s", Transform::Truncate(3)),
            field("d", Transform::Truncate(10)),
            field("n", Transform::Truncate(10)),
            field("ts", Transform::Day),
            field("ts2", Transform::Hour),
            field("ts3", Transform::Month),
        ];
        let rows = [
            vec![
                Datum::Text("héllo".into()),
                Datum::Numeric("14.27".into()),
                Datum::Int64(-1),
                Datum::TimestampTz(1_510_871_468_000_000),
                Datum::TimestampTz(1_510_871_468_000_000),
                Datum::TimestampTz(1_510_871_468_000_000),
            ],
            vec![
                Datum::Null,
                Datum::Null,
                Datum::Int64(19),
                Datum::TimestampTz(-1),
                Datum::TimestampTz(-1),
                Datum::TimestampTz(-1),
            ],
        ];
        let tuples = tuples(&desc, &fields, &rows);
        assert_eq!(
            tuples[0],
            Struct::from_iter([
                Some(Literal::string("hél")),
                Some(Literal::decimal(1420)),
                Some(Literal::long(-10)),
                Some(Literal::int(17_486)),
                Some(Literal::int(17_486 * 24 + 22)),
                Some(Literal::int(47 * 12 + 10)),
            ])
        );
        // Nulls stay null; a time before the epoch is in day -1.
        assert_eq!(
            tuples[1],
            Struct::from_iter([
                None,
                None,
                Some(Literal::long(10)),
                Some(Literal::int(-1)),
                Some(Literal::int(-1)),
                Some(Literal::int(-1)),
            ])
        );
    }
}
