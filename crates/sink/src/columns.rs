//! A new sink's snapshot from rows that arrive in Arrow columns
//! ([`SinkInput::snapshot_columns`]): the table's batches are the input's arrays as they
//! come, with APPEND's two columns added, and no row is decoded into datums on the way.
//! Decoding each row and building the arrays again from its datums was about a third of
//! the CPU of a large table's first snapshot.
//!
//! Only a table whose every relation column has exactly the Arrow type floe gives its SQL
//! type goes this way (the common types: integers, floats, numerics, text, json,
//! timestamps, dates, booleans, uuids). Any other (a time of day, which Iceberg's range
//! clamps; a small integer Iceberg widens; nested values) sends the whole snapshot the
//! way through rows, so both ways write the same values.
//!
//! [`SinkInput::snapshot_columns`]: crate::input::SinkInput::snapshot_columns

use std::sync::Arc;

use arrow_array::{ArrayRef, Int32Array, Int64Array, RecordBatch, UInt64Array};
use arrow_schema::{DataType, SchemaRef as ArrowSchemaRef};
use floe_repr::RelationDesc;

use crate::envelope::BatchLimits;
use crate::error::SinkError;
use crate::input::BuiltColumns;

/// How a snapshot's column chunks become batches of a table's Arrow schema.
pub(crate) struct ColumnBatches {
    schema: ArrowSchemaRef,
    /// The table is APPEND's: each row's `_mz_diff` and `_mz_timestamp` follow its columns.
    append: bool,
    limits: BatchLimits,
}

impl ColumnBatches {
    /// The conversion into batches of `schema` (the writer's) of chunks of `desc`'s
    /// columns; `append`: the table is APPEND's, whose two columns follow. `None` when a
    /// column's Arrow type is not the table's (see the module documentation).
    pub fn new(
        schema: &ArrowSchemaRef,
        desc: &RelationDesc,
        append: bool,
        limits: BatchLimits,
    ) -> Option<ColumnBatches> {
        let extras = if append { 2 } else { 0 };
        let fields = schema.fields();
        if fields.len() != desc.columns.len() + extras {
            return None;
        }
        for ((_, column), field) in desc.columns.iter().zip(fields.iter()) {
            let ours = floe_arrow::arrow_data_type(&column.scalar_type);
            if &ours != field.data_type() || matches!(ours, DataType::Time64(_)) {
                return None;
            }
        }
        let append_types = [DataType::Int32, DataType::Int64];
        if append
            && fields[desc.columns.len()..]
                .iter()
                .zip(&append_types)
                .any(|(field, expected)| field.data_type() != expected)
        {
            return None;
        }
        Some(ColumnBatches {
            schema: schema.clone(),
            append,
            limits,
        })
    }

    /// The batches of `chunk`: its rows once each in one batch, or, when a row comes more
    /// than once (a diff other than +1 or -1), its copies in batches of at most a batch's
    /// rows, made one at a time as they are taken (a row of multiplicity 10^8 is never in
    /// memory 10^8 times). APPEND's rows carry their diff's sign and their time.
    pub fn batches(
        &self,
        chunk: BuiltColumns,
    ) -> Box<dyn Iterator<Item = Result<RecordBatch, SinkError>> + Send + '_> {
        let mut columns = chunk.columns;
        if self.append {
            let signs: Int32Array = chunk
                .counts
                .iter()
                .map(|count| count.signum() as i32)
                .collect();
            let times: Int64Array = chunk
                .times
                .iter()
                .map(|ts| i64::try_from(ts.0).unwrap_or(i64::MAX))
                .collect();
            columns.push(Arc::new(signs));
            columns.push(Arc::new(times));
        }
        if chunk.counts.iter().all(|count| count.unsigned_abs() == 1) {
            return Box::new(std::iter::once(self.batch(columns, chunk.rows)));
        }
        let pieces = RepeatedIndices::new(chunk.counts, self.limits.rows);
        Box::new(pieces.map(move |indices| {
            let taken = columns
                .iter()
                .map(|column| arrow_select::take::take(column.as_ref(), &indices, None))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|err| internal(format!("cannot repeat rows: {err}")))?;
            self.batch(taken, indices.len())
        }))
    }

    /// The batch of `rows` rows of `columns` (each row once).
    pub fn batch(&self, columns: Vec<ArrayRef>, rows: usize) -> Result<RecordBatch, SinkError> {
        let options = arrow_array::RecordBatchOptions::new().with_row_count(Some(rows));
        RecordBatch::try_new_with_options(self.schema.clone(), columns, &options)
            .map_err(|err| internal(format!("cannot assemble a record batch: {err}")))
    }
}

/// The row indexes of rows repeated `counts` times, in pieces of at most `max_rows`.
struct RepeatedIndices {
    counts: Vec<i64>,
    /// The row whose copies come next, and how many of them are left.
    row: usize,
    left: u64,
    max_rows: usize,
}

impl RepeatedIndices {
    fn new(counts: Vec<i64>, max_rows: usize) -> RepeatedIndices {
        let left = counts.first().map_or(0, |count| count.unsigned_abs());
        RepeatedIndices {
            counts,
            row: 0,
            left,
            max_rows: max_rows.max(1),
        }
    }
}

impl Iterator for RepeatedIndices {
    type Item = UInt64Array;

    fn next(&mut self) -> Option<UInt64Array> {
        let mut piece: Vec<u64> = Vec::new();
        while piece.len() < self.max_rows && self.row < self.counts.len() {
            // At most the room left in the piece, a usize.
            let taken = self.left.min((self.max_rows - piece.len()) as u64);
            piece.extend(std::iter::repeat_n(self.row as u64, taken as usize));
            self.left -= taken;
            if self.left == 0 {
                self.row += 1;
                self.left = self.counts.get(self.row).map_or(0, |c| c.unsigned_abs());
            }
        }
        (!piece.is_empty()).then(|| UInt64Array::from(piece))
    }
}

fn internal(message: String) -> SinkError {
    SinkError::internal(message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use floe_repr::{ColumnType, SqlScalarType, Timestamp};

    fn desc(types: &[SqlScalarType]) -> RelationDesc {
        RelationDesc {
            columns: types
                .iter()
                .enumerate()
                .map(|(i, ty)| {
                    let column = ColumnType {
                        scalar_type: ty.clone(),
                        nullable: true,
                    };
                    (format!("c{i}"), column)
                })
                .collect(),
            unique_keys: Vec::new(),
        }
    }

    /// The Arrow schema the sink writes a table of `desc` with (APPEND's when `append`).
    fn table_schema(desc: &RelationDesc, append: bool) -> ArrowSchemaRef {
        let schema = crate::types::sink_schema(desc, append, &[]).unwrap();
        Arc::new(iceberg::arrow::schema_to_arrow_schema(&schema).unwrap())
    }

    const LIMITS: BatchLimits = BatchLimits {
        rows: 8_192,
        bytes: 1 << 20,
    };

    #[test]
    fn columns_go_straight_in_only_where_the_types_are_the_tables() {
        use SqlScalarType as S;
        let straight = desc(&[
            S::Bool,
            S::Int32,
            S::Int64,
            S::Float32,
            S::Float64,
            S::Numeric {
                precision: Some(12),
                max_scale: Some(2),
            },
            S::Numeric {
                precision: None,
                max_scale: None,
            },
            S::Date,
            S::Timestamp,
            S::TimestampTz,
            S::Text,
            S::Jsonb,
            S::Uuid,
        ]);
        for (_, column) in &straight.columns {
            let one = desc(std::slice::from_ref(&column.scalar_type));
            let schema = table_schema(&one, false);
            assert!(
                ColumnBatches::new(&schema, &one, false, LIMITS).is_some(),
                "{:?}: floe's {:?}, the table's {:?}",
                column.scalar_type,
                floe_arrow::arrow_data_type(&column.scalar_type),
                schema.field(0).data_type()
            );
        }
        for append in [false, true] {
            let schema = table_schema(&straight, append);
            assert!(ColumnBatches::new(&schema, &straight, append, LIMITS).is_some());
            // The schema must be the one the batches are for.
            assert!(ColumnBatches::new(&schema, &straight, !append, LIMITS).is_none());
        }
        // Iceberg widens these (bytes to large binaries), clamps times, or nests them its own
        // way: through rows.
        for other in [
            S::Bytes,
            S::Int16,
            S::UInt32,
            S::UInt64,
            S::Time,
            S::Interval,
            S::List {
                element: Box::new(S::Int32),
            },
        ] {
            let through_rows = desc(&[S::Int64, other.clone()]);
            let schema = table_schema(&through_rows, true);
            assert!(
                ColumnBatches::new(&schema, &through_rows, true, LIMITS).is_none(),
                "{other:?}"
            );
        }
    }

    #[test]
    fn a_batch_carries_its_rows_diffs_and_times() {
        let desc = desc(&[SqlScalarType::Int64, SqlScalarType::Text]);
        let schema = table_schema(&desc, true);
        let batches = ColumnBatches::new(&schema, &desc, true, LIMITS).unwrap();
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(vec![1, 2])),
            Arc::new(arrow_array::StringArray::from(vec![Some("a"), None])),
        ];
        let built = BuiltColumns {
            columns,
            rows: 2,
            counts: vec![-1, 2],
            times: vec![Timestamp(40), Timestamp(41)],
        };
        let written: Vec<RecordBatch> = batches.batches(built).map(Result::unwrap).collect();
        assert_eq!(written.len(), 1);
        let batch = &written[0];
        assert_eq!(batch.num_rows(), 3);
        let ids = batch
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        assert_eq!(ids.values().to_vec(), [1, 2, 2]);
        let diffs = batch
            .column(2)
            .as_any()
            .downcast_ref::<Int32Array>()
            .unwrap();
        assert_eq!(diffs.values().to_vec(), [-1, 1, 1]);
        let times = batch
            .column(3)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        assert_eq!(times.values().to_vec(), [40, 41, 41]);
    }

    #[test]
    fn repeated_rows_come_in_pieces_of_a_batch() {
        let pieces = RepeatedIndices::new(vec![1, 3, 1], 2);
        let values: Vec<Vec<u64>> = pieces.map(|p| p.values().to_vec()).collect();
        assert_eq!(values, [vec![0, 1], vec![1, 1], vec![2]]);
        let many = RepeatedIndices::new(vec![2, 100_000_000], 8_192);
        let (pieces, rows) = many.fold((0, 0), |(n, rows), p| (n + 1, rows + p.len()));
        assert_eq!(rows, 100_000_002);
        assert_eq!(pieces, 100_000_002_usize.div_ceil(8_192));
    }
}
