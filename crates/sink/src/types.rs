//! How SQL relations become Iceberg schemas and how their values become Arrow arrays.
//!
//! The type mapping is the one the user documentation tables (SPEC §3). Values that cannot be
//! written exactly (a numeric with more digits than its decimal) are errors naming the column;
//! nothing is ever rounded.

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::{DataType, SchemaRef as ArrowSchemaRef};
use floe_repr::{Datum, RelationDesc, SqlScalarType};
use iceberg::spec::{
    ListType, MapType, NestedField, NestedFieldRef, PrimitiveType, Schema, StructType, Type,
};

use crate::error::{ErrorKind, SinkError};

/// The column APPEND sinks add for each change's multiplicity (+1 or -1).
pub const DIFF_COLUMN: &str = "_mz_diff";
/// The column APPEND sinks add for each change's timestamp (ms since the epoch).
pub const TIMESTAMP_COLUMN: &str = "_mz_timestamp";

/// Iceberg decimals hold at most 38 digits.
const MAX_DECIMAL_PRECISION: u32 = 38;
/// The scale of a `numeric` without one, as Materialize writes it.
const DEFAULT_NUMERIC_SCALE: u32 = 10;

/// The Iceberg type of a SQL type, with `next_id` handing out field ids for nested fields
/// (depth first: a field's own id is taken before its children's).
fn iceberg_type(scalar: &SqlScalarType, next_id: &mut i32) -> Type {
    let primitive = |p: PrimitiveType| Type::Primitive(p);
    match scalar {
        SqlScalarType::Bool => primitive(PrimitiveType::Boolean),
        SqlScalarType::Int16 | SqlScalarType::Int32 | SqlScalarType::UInt16 => {
            primitive(PrimitiveType::Int)
        }
        SqlScalarType::Int64 | SqlScalarType::UInt32 | SqlScalarType::Oid => {
            primitive(PrimitiveType::Long)
        }
        SqlScalarType::UInt64 => primitive(PrimitiveType::Decimal {
            precision: 20,
            scale: 0,
        }),
        SqlScalarType::Float32 => primitive(PrimitiveType::Float),
        SqlScalarType::Float64 => primitive(PrimitiveType::Double),
        SqlScalarType::Numeric { max_scale, .. } => primitive(PrimitiveType::Decimal {
            precision: MAX_DECIMAL_PRECISION,
            scale: max_scale.map_or(DEFAULT_NUMERIC_SCALE, u32::from),
        }),
        SqlScalarType::Date => primitive(PrimitiveType::Date),
        SqlScalarType::Time => primitive(PrimitiveType::Time),
        SqlScalarType::Timestamp => primitive(PrimitiveType::Timestamp),
        SqlScalarType::TimestampTz => primitive(PrimitiveType::Timestamptz),
        SqlScalarType::Text
        | SqlScalarType::VarChar { .. }
        | SqlScalarType::Jsonb
        | SqlScalarType::Json
        | SqlScalarType::Interval => primitive(PrimitiveType::String),
        SqlScalarType::Bytes => primitive(PrimitiveType::Binary),
        SqlScalarType::Uuid => primitive(PrimitiveType::Fixed(16)),
        SqlScalarType::Range { element } => {
            let mut fields = Vec::new();
            for (name, element, required) in [
                ("lower", Some(element.as_ref()), false),
                ("upper", Some(element.as_ref()), false),
                ("lower_inclusive", None, true),
                ("upper_inclusive", None, true),
                ("empty", None, true),
            ] {
                let id = take_id(next_id);
                let field_type = match element {
                    Some(element) => iceberg_type(element, next_id),
                    None => primitive(PrimitiveType::Boolean),
                };
                fields.push(nested(id, name, field_type, required));
            }
            Type::Struct(StructType::new(fields))
        }
        SqlScalarType::Record { fields } => {
            let mut nested_fields = Vec::new();
            for (name, field_type, nullable) in fields {
                let id = take_id(next_id);
                let field_type = iceberg_type(field_type, next_id);
                nested_fields.push(nested(id, name, field_type, !nullable));
            }
            Type::Struct(StructType::new(nested_fields))
        }
        SqlScalarType::List { element } | SqlScalarType::Array { element } => {
            let id = take_id(next_id);
            let element = iceberg_type(element, next_id);
            Type::List(ListType::new(Arc::new(NestedField::list_element(
                id, element, false,
            ))))
        }
        SqlScalarType::Map { value } => {
            let key_id = take_id(next_id);
            let value_id = take_id(next_id);
            let value = iceberg_type(value, next_id);
            Type::Map(MapType::new(
                Arc::new(NestedField::map_key_element(
                    key_id,
                    Type::Primitive(PrimitiveType::String),
                )),
                Arc::new(NestedField::map_value_element(value_id, value, false)),
            ))
        }
    }
}

fn take_id(next_id: &mut i32) -> i32 {
    let id = *next_id;
    *next_id += 1;
    id
}

fn nested(id: i32, name: &str, field_type: Type, required: bool) -> NestedFieldRef {
    Arc::new(if required {
        NestedField::required(id, name, field_type)
    } else {
        NestedField::optional(id, name, field_type)
    })
}

/// The schema a sink of `desc` creates: the relation's columns (nullability preserved, field
/// ids depth first from 1), plus `_mz_diff` and `_mz_timestamp` in APPEND mode. `key` lists
/// the key columns' indexes; they become `identifier-field-ids` when all are NOT NULL.
pub fn sink_schema(desc: &RelationDesc, append: bool, key: &[usize]) -> Result<Schema, SinkError> {
    let mut next_id = 1;
    let mut fields = Vec::new();
    let mut key_ids = Vec::new();
    for (index, (name, column_type)) in desc.columns.iter().enumerate() {
        let id = next_id;
        next_id += 1;
        let field_type = iceberg_type(&column_type.scalar_type, &mut next_id);
        fields.push(nested(id, name, field_type, !column_type.nullable));
        if key.contains(&index) {
            key_ids.push((id, column_type.nullable));
        }
    }
    if append {
        for (name, field_type) in [
            (DIFF_COLUMN, PrimitiveType::Int),
            (TIMESTAMP_COLUMN, PrimitiveType::Long),
        ] {
            fields.push(nested(next_id, name, Type::Primitive(field_type), true));
            next_id += 1;
        }
    }
    let mut builder = Schema::builder().with_fields(fields);
    if !key_ids.is_empty() && key_ids.iter().all(|(_, nullable)| !nullable) {
        builder = builder.with_identifier_field_ids(key_ids.iter().map(|(id, _)| *id));
    }
    builder
        .build()
        .map_err(|err| internal(format!("cannot build the table schema: {err}")))
}

fn internal(message: String) -> SinkError {
    SinkError::internal(message)
}

/// A value Iceberg's type cannot hold exactly: the data's fault, so not retryable.
/// `what` names the column (`column "amount": ...`).
fn conversion_error(what: String) -> SinkError {
    SinkError::new(ErrorKind::DataConversion, format!("cannot write {what}")).with_retryable(false)
}

/// The error of a conversion whose message names its column (as
/// [`floe_arrow::rows_to_columns`] names it), as the sink reports a value it cannot write.
pub fn column_value_error(error: floe_repr::strconv::ValueError) -> SinkError {
    if error.code == floe_repr::SqlState::INTERNAL_ERROR {
        internal(error.message)
    } else {
        conversion_error(error.message)
    }
}

/// Builds a record batch of `schema` from columns of values (one `Vec` per top-level field,
/// all of the same length), with floe's one Datum-to-Arrow conversion
/// ([`floe_arrow::build_field_array`]): Iceberg's types hold floe's (unsigned integers in
/// wider signed ones or decimals, intervals and jsonb as text); times past Iceberg's last
/// time of day are clamped first.
pub fn record_batch(
    schema: &ArrowSchemaRef,
    columns: Vec<Vec<&Datum>>,
    rows: usize,
) -> Result<RecordBatch, SinkError> {
    let mut arrays = Vec::with_capacity(columns.len());
    for (field, values) in schema.fields().iter().zip(columns) {
        let array = if holds_time(field.data_type()) {
            let clamped: Vec<Datum> = values.iter().map(|d| iceberg_times(d)).collect();
            let references: Vec<&Datum> = clamped.iter().collect();
            floe_arrow::build_field_array(field, &references)
        } else {
            floe_arrow::build_field_array(field, &values)
        };
        arrays.push(array.map_err(|error| value_error(field.name(), error))?);
    }
    let options = arrow_array::RecordBatchOptions::new().with_row_count(Some(rows));
    RecordBatch::try_new_with_options(schema.clone(), arrays, &options)
        .map_err(|err| internal(format!("cannot assemble a record batch: {err}")))
}

/// A conversion's error: a value Iceberg's type cannot hold exactly is the data's fault
/// (not retryable), anything else floe's own.
fn value_error(column: &str, mut error: floe_repr::strconv::ValueError) -> SinkError {
    if error.code != floe_repr::SqlState::INTERNAL_ERROR {
        error.message = format!("column \"{column}\": {}", error.message);
    }
    column_value_error(error)
}

/// Whether values of `data_type` hold times (at any depth).
fn holds_time(data_type: &DataType) -> bool {
    match data_type {
        DataType::Time64(_) => true,
        DataType::List(field) | DataType::Map(field, _) => holds_time(field.data_type()),
        DataType::Struct(fields) => fields.iter().any(|f| holds_time(f.data_type())),
        _ => false,
    }
}

/// `datum` with every time in it as Iceberg can hold it ([`iceberg_time`]).
fn iceberg_times(datum: &Datum) -> Datum {
    match datum {
        Datum::Time(micros) => Datum::Time(iceberg_time(*micros)),
        Datum::List(items) => Datum::List(items.iter().map(iceberg_times).collect()),
        Datum::Record(items) => Datum::Record(items.iter().map(iceberg_times).collect()),
        Datum::Map(entries) => Datum::Map(
            entries
                .iter()
                .map(|(key, value)| (key.clone(), iceberg_times(value)))
                .collect(),
        ),
        Datum::Range(Some(bounds)) => Datum::Range(Some(Box::new(floe_repr::RangeBounds {
            lower: bounds.lower.as_ref().map(iceberg_times),
            upper: bounds.upper.as_ref().map(iceberg_times),
            ..bounds.as_ref().clone()
        }))),
        other => other.clone(),
    }
}

/// The last microsecond of a day: Iceberg's `time` ends there, where SQL's `time` allows
/// `24:00:00` (one microsecond later).
pub const LAST_TIME_OF_DAY: i64 = 86_400_000_000 - 1;

/// A time of day as Iceberg holds it: `24:00:00` becomes `23:59:59.999999`, the latest
/// time Iceberg can hold (as JDBC drivers map it to `LocalTime.MAX`); a reader of an
/// Iceberg table cannot receive a time outside its type's range.
fn iceberg_time(micros: i64) -> i64 {
    micros.clamp(0, LAST_TIME_OF_DAY)
}

/// About how many bytes `row`'s values take in Arrow buffers (payload plus offsets), what
/// batches are cut by so that no batch outgrows its offset buffers.
pub fn row_bytes(row: &[Datum]) -> usize {
    row.iter().map(datum_bytes).fold(0, usize::saturating_add)
}

fn datum_bytes(datum: &Datum) -> usize {
    // Variable-length values: their bytes and a 4-byte offset.
    let var = |len: usize| len.saturating_add(4);
    match datum {
        Datum::Null | Datum::Bool(_) => 1,
        Datum::Text(text) | Datum::Jsonb(text) | Datum::Numeric(text) => var(text.len()),
        Datum::Bytes(bytes) => var(bytes.len()),
        Datum::Uuid(_) => 16,
        // Written as its text form.
        Datum::Interval { .. } => var(48),
        Datum::TextArray(items) => var(items
            .iter()
            .map(|item| var(item.as_ref().map_or(0, String::len)))
            .fold(0, usize::saturating_add)),
        Datum::Record(items) | Datum::List(items) => var(row_bytes(items)),
        Datum::Map(entries) => var(entries
            .iter()
            .map(|(key, value)| var(key.len()).saturating_add(datum_bytes(value)))
            .fold(0, usize::saturating_add)),
        Datum::Range(bounds) => {
            3 + bounds.as_ref().map_or(2, |bounds| {
                [&bounds.lower, &bounds.upper]
                    .into_iter()
                    .map(|bound| bound.as_ref().map_or(1, datum_bytes))
                    .fold(0, usize::saturating_add)
            })
        }
        _ => 8,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use floe_repr::{ColumnType, RangeBounds};

    fn column(name: &str, scalar_type: SqlScalarType, nullable: bool) -> (String, ColumnType) {
        (
            name.to_string(),
            ColumnType {
                scalar_type,
                nullable,
            },
        )
    }

    /// A numeric the table's decimal cannot hold exactly is refused naming the column, as
    /// the data's fault; a `24:00:00` time is Iceberg's last time of day.
    #[test]
    fn inexact_decimals_are_refused_and_midnight_clamped() {
        let desc = RelationDesc {
            columns: vec![
                column(
                    "price",
                    SqlScalarType::Numeric {
                        precision: None,
                        max_scale: Some(2),
                    },
                    true,
                ),
                column("at", SqlScalarType::Time, true),
            ],
            unique_keys: vec![],
        };
        let schema = sink_schema(&desc, false, &[]).unwrap();
        let arrow = Arc::new(iceberg::arrow::schema_to_arrow_schema(&schema).unwrap());
        let midnight = Datum::Time(86_400_000_000);
        let exact = Datum::Numeric("1.50".into());
        let batch = record_batch(&arrow, vec![vec![&exact], vec![&midnight]], 1).unwrap();
        let times = batch
            .column(1)
            .as_any()
            .downcast_ref::<arrow_array::Time64MicrosecondArray>()
            .unwrap();
        assert_eq!(times.value(0), LAST_TIME_OF_DAY);
        let rounded = Datum::Numeric("1.235".into());
        let err = record_batch(&arrow, vec![vec![&rounded], vec![&midnight]], 1).unwrap_err();
        assert_eq!(err.kind, ErrorKind::DataConversion);
        assert!(err.message.contains("\"price\""), "{}", err.message);
        assert!(err.message.contains("rounded"), "{}", err.message);
    }

    #[test]
    fn schema_maps_types_and_ids_depth_first() {
        let desc = RelationDesc {
            columns: vec![
                column("id", SqlScalarType::Int32, false),
                column(
                    "r",
                    SqlScalarType::Record {
                        fields: vec![
                            ("a".into(), SqlScalarType::Text, true),
                            ("b".into(), SqlScalarType::UInt64, false),
                        ],
                    },
                    true,
                ),
                column(
                    "n",
                    SqlScalarType::Numeric {
                        precision: None,
                        max_scale: None,
                    },
                    true,
                ),
                column("u", SqlScalarType::Uuid, true),
            ],
            unique_keys: vec![],
        };
        let schema = sink_schema(&desc, true, &[0]).unwrap();
        let ids: Vec<(i32, String)> = schema
            .as_struct()
            .fields()
            .iter()
            .map(|f| (f.id, f.name.clone()))
            .collect();
        assert_eq!(
            ids,
            vec![
                (1, "id".into()),
                (2, "r".into()),
                (5, "n".into()),
                (6, "u".into()),
                (7, DIFF_COLUMN.into()),
                (8, TIMESTAMP_COLUMN.into())
            ]
        );
        assert_eq!(schema.field_by_id(3).unwrap().name, "a");
        assert_eq!(
            *schema.field_by_id(4).unwrap().field_type,
            Type::Primitive(PrimitiveType::Decimal {
                precision: 20,
                scale: 0
            })
        );
        assert_eq!(
            *schema.field_by_id(5).unwrap().field_type,
            Type::Primitive(PrimitiveType::Decimal {
                precision: 38,
                scale: 10
            })
        );
        assert!(schema.field_by_id(1).unwrap().required);
        assert!(!schema.field_by_id(2).unwrap().required);
        assert_eq!(schema.identifier_field_ids().collect::<Vec<_>>(), vec![1]);
    }

    #[test]
    fn values_convert() {
        let desc = RelationDesc {
            columns: vec![
                column("id", SqlScalarType::Int64, false),
                column(
                    "r",
                    SqlScalarType::Range {
                        element: Box::new(SqlScalarType::Int32),
                    },
                    true,
                ),
                column(
                    "l",
                    SqlScalarType::List {
                        element: Box::new(SqlScalarType::Text),
                    },
                    true,
                ),
                column(
                    "m",
                    SqlScalarType::Map {
                        value: Box::new(SqlScalarType::Int32),
                    },
                    true,
                ),
                column("i", SqlScalarType::Interval, true),
            ],
            unique_keys: vec![],
        };
        let schema = sink_schema(&desc, false, &[]).unwrap();
        let arrow = Arc::new(iceberg::arrow::schema_to_arrow_schema(&schema).unwrap());
        let rows = [
            vec![
                Datum::Int64(1),
                Datum::Range(Some(Box::new(RangeBounds {
                    lower: Some(Datum::Int32(1)),
                    upper: None,
                    lower_inclusive: true,
                    upper_inclusive: false,
                }))),
                Datum::List(vec![Datum::Text("a".into()), Datum::Null]),
                Datum::Map(vec![("k".into(), Datum::Int32(3))]),
                Datum::Interval {
                    months: 14,
                    days: 3,
                    micros: 0,
                },
            ],
            vec![
                Datum::Int64(2),
                Datum::Range(None),
                Datum::Null,
                Datum::Null,
                Datum::Null,
            ],
            vec![
                Datum::Int64(3),
                Datum::Null,
                Datum::Null,
                Datum::Null,
                Datum::Null,
            ],
        ];
        let columns = (0..5)
            .map(|c| rows.iter().map(|row| &row[c]).collect())
            .collect();
        let batch = record_batch(&arrow, columns, rows.len()).unwrap();
        assert_eq!(batch.num_rows(), 3);
        let strings = batch
            .column(4)
            .as_any()
            .downcast_ref::<arrow_array::StringArray>()
            .unwrap();
        assert_eq!(strings.value(0), "1 year 2 mons 3 days");
    }
}
