//! Conversions between floe's values and Arrow, for the query engine
//! (DataFusion) and anything else that speaks Arrow.
//!
//! Type mapping: `boolean` Boolean; `smallint`/`integer`/`bigint`
//! Int16/32/64; `uint2/4/8` UInt16/32/64; `real`/`double` Float32/64;
//! `numeric(p,s)` Decimal128(38, s) and bare `numeric` Decimal128(38, 10)
//! (the sink's `decimal(38,10)`; a value that does not fit exactly is an
//! error, never rounded); `date` Date32; `time` Time64(us); `timestamp`
//! Timestamp(us); `timestamptz` Timestamp(us, "+00:00"); `text`/`varchar`
//! Utf8; `bytea` Binary; `uuid` FixedSizeBinary(16); `jsonb` Utf8;
//! `interval` Interval(MonthDayNano); ranges Struct(lower, upper,
//! lower_inclusive, upper_inclusive, empty); records Struct; lists List;
//! maps Map(text keys); `oid` UInt32.
//!
//! Every field carries its SQL type as JSON in the metadata key
//! [`SQL_TYPE_METADATA`], so columns read back with their exact type (jsonb,
//! uuid, numeric scale, range, list, map, record) as long as the engine
//! keeps the field's metadata; computed columns without metadata are typed
//! by their Arrow type alone.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, ListArray, MapArray, NullArray, StringArray, StructArray,
};
use arrow::datatypes::{
    DataType, Field, FieldRef, Fields, IntervalUnit, Schema, SchemaRef, TimeUnit,
};
use arrow::record_batch::RecordBatch;
use floe_repr::strconv::{Decimal, ValueError, format_datum};
use floe_repr::{
    ColumnType, Datum, PgType, RangeBounds, RelationDesc, Row, SqlScalarType, SqlState, cast_datum,
};

pub use arrow;
pub use build::build_array as build_field_array;

mod build;
mod encoded;

pub use encoded::encoded_columns;

/// Field metadata: the column's SQL type, as JSON.
pub const SQL_TYPE_METADATA: &str = "floe.sql_type";
/// Field metadata for builtin columns whose type has no `SqlScalarType`
/// (`text[]`) or that predate [`SQL_TYPE_METADATA`] (`jsonb`, `numeric`).
pub const PG_TYPE_METADATA: &str = "floe.pg_type";

/// Field metadata of an `Int32` column holding the display scales of the
/// values of another column (its index) as they are stored (see
/// [`stored_scale_field`]).
pub const STORED_SCALE_OF_METADATA: &str = "floe.stored_scale_of";

/// The scale bare `numeric` gets in Arrow (and in Iceberg).
pub const BARE_NUMERIC_SCALE: i8 = 10;
/// The precision of every numeric in Arrow.
pub const NUMERIC_PRECISION: u8 = 38;

fn internal(message: impl Into<String>) -> ValueError {
    ValueError::new(SqlState::INTERNAL_ERROR, message)
}

/// The Arrow scale of a numeric type.
pub fn numeric_scale(max_scale: Option<u8>) -> i8 {
    match max_scale {
        Some(s) => s.min(38) as i8,
        None => BARE_NUMERIC_SCALE,
    }
}

fn with_type_metadata(field: Field, ty: &SqlScalarType) -> Field {
    let json = serde_json::to_string(ty).unwrap_or_default();
    field.with_metadata(HashMap::from([(SQL_TYPE_METADATA.to_string(), json)]))
}

fn typed_field(name: &str, ty: &SqlScalarType, nullable: bool) -> Field {
    with_type_metadata(Field::new(name, arrow_data_type(ty), nullable), ty)
}

fn range_fields(element: &SqlScalarType) -> Fields {
    Fields::from(vec![
        typed_field("lower", element, true),
        typed_field("upper", element, true),
        Field::new("lower_inclusive", DataType::Boolean, true),
        Field::new("upper_inclusive", DataType::Boolean, true),
        Field::new("empty", DataType::Boolean, true),
    ])
}

fn map_entries_field(value: &SqlScalarType) -> FieldRef {
    Arc::new(Field::new(
        "entries",
        DataType::Struct(Fields::from(vec![
            Field::new("key", DataType::Utf8, false),
            typed_field("value", value, true),
        ])),
        false,
    ))
}

/// The Arrow type of a SQL type.
pub fn arrow_data_type(ty: &SqlScalarType) -> DataType {
    use SqlScalarType as S;
    match ty {
        S::Bool => DataType::Boolean,
        S::Int16 => DataType::Int16,
        S::Int32 => DataType::Int32,
        S::Int64 => DataType::Int64,
        S::UInt16 => DataType::UInt16,
        S::UInt32 | S::Oid => DataType::UInt32,
        S::UInt64 => DataType::UInt64,
        S::Float32 => DataType::Float32,
        S::Float64 => DataType::Float64,
        S::Numeric { max_scale, .. } => {
            DataType::Decimal128(NUMERIC_PRECISION, numeric_scale(*max_scale))
        }
        S::Date => DataType::Date32,
        S::Time => DataType::Time64(TimeUnit::Microsecond),
        S::Timestamp => DataType::Timestamp(TimeUnit::Microsecond, None),
        S::TimestampTz => DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())),
        S::Text | S::VarChar { .. } | S::Jsonb | S::Json => DataType::Utf8,
        S::Bytes => DataType::Binary,
        S::Uuid => DataType::FixedSizeBinary(16),
        S::Interval => DataType::Interval(IntervalUnit::MonthDayNano),
        S::Range { element } => DataType::Struct(range_fields(element)),
        S::Record { fields } => DataType::Struct(Fields::from(
            fields
                .iter()
                .map(|(name, ty, nullable)| typed_field(name, ty, *nullable))
                .collect::<Vec<_>>(),
        )),
        S::List { element } => DataType::List(Arc::new(typed_field("item", element, true))),
        // An array of a type its Arrow type says all of is the list the engine
        // makes (ARRAY[...]), so the two meet without a cast.
        S::Array { element } if says_all(element) => DataType::List(Arc::new(
            Field::new_list_field(arrow_data_type(element), true),
        )),
        S::Array { element } => DataType::List(Arc::new(typed_field("item", element, true))),
        S::Map { value } => DataType::Map(map_entries_field(value), false),
    }
}

/// Whether a type's Arrow type says all there is to know of it (its field
/// needs no SQL type in its metadata); arrays of these nest as the engine's.
pub fn says_all(ty: &SqlScalarType) -> bool {
    use SqlScalarType as S;
    match ty {
        S::Bool
        | S::Int16
        | S::Int32
        | S::Int64
        | S::Float32
        | S::Float64
        | S::Text
        | S::Date
        | S::Time
        | S::Timestamp
        | S::TimestampTz
        | S::Interval
        | S::Bytes => true,
        S::Array { element } => says_all(element),
        _ => false,
    }
}

/// The Arrow field of a column.
pub fn arrow_field(name: &str, column: &ColumnType) -> Field {
    typed_field(name, &column.scalar_type, column.nullable)
}

/// The Arrow schema of a relation.
pub fn arrow_schema(desc: &RelationDesc) -> SchemaRef {
    Arc::new(Schema::new(
        desc.columns
            .iter()
            .map(|(name, column)| arrow_field(name, column))
            .collect::<Vec<_>>(),
    ))
}

/// The SQL type of a builtin column's Postgres type (an array type's is an
/// array of its element's).
pub fn scalar_type_of_pg(pg_type: PgType) -> SqlScalarType {
    use SqlScalarType as S;
    match pg_type {
        PgType::Bool => S::Bool,
        PgType::Int2 => S::Int16,
        PgType::Int4 => S::Int32,
        PgType::Int8 => S::Int64,
        PgType::UInt2 => S::UInt16,
        PgType::UInt4 => S::UInt32,
        PgType::UInt8 => S::UInt64,
        PgType::Float4 => S::Float32,
        PgType::Float8 => S::Float64,
        PgType::Numeric => S::Numeric {
            precision: None,
            max_scale: None,
        },
        PgType::Text => S::Text,
        PgType::VarChar => S::VarChar { max_length: None },
        PgType::Bytea => S::Bytes,
        PgType::Date => S::Date,
        PgType::Time => S::Time,
        PgType::Timestamp => S::Timestamp,
        PgType::TimestampTz => S::TimestampTz,
        PgType::Interval => S::Interval,
        PgType::Jsonb => S::Jsonb,
        PgType::Json => S::Json,
        PgType::Uuid => S::Uuid,
        PgType::Oid => S::Oid,
        PgType::TextArray
        | PgType::Int2Array
        | PgType::BoolArray
        | PgType::ByteaArray
        | PgType::Int4Array
        | PgType::Int8Array
        | PgType::Float4Array
        | PgType::Float8Array
        | PgType::OidArray
        | PgType::VarCharArray
        | PgType::DateArray
        | PgType::TimeArray
        | PgType::TimestampArray
        | PgType::TimestampTzArray
        | PgType::IntervalArray
        | PgType::NumericArray
        | PgType::UuidArray
        | PgType::JsonbArray => S::Array {
            element: Box::new(scalar_type_of_pg(
                pg_type.array_element().unwrap_or(PgType::Text),
            )),
        },
        PgType::Int4Range => range_of(S::Int32),
        PgType::Int8Range => range_of(S::Int64),
        PgType::NumRange => range_of(S::Numeric {
            precision: None,
            max_scale: None,
        }),
        PgType::DateRange => range_of(S::Date),
        PgType::TsRange => range_of(S::Timestamp),
        PgType::TstzRange => range_of(S::TimestampTz),
        PgType::List => S::List {
            element: Box::new(S::Text),
        },
        PgType::Map => S::Map {
            value: Box::new(S::Text),
        },
        PgType::Record => S::Record { fields: vec![] },
        PgType::Char => S::Text,
    }
}

fn range_of(element: SqlScalarType) -> SqlScalarType {
    SqlScalarType::Range {
        element: Box::new(element),
    }
}

/// The Arrow field of a builtin (system) column declared by Postgres type.
///
/// A builtin `numeric` column is Utf8 marked `numeric`, holding the value's
/// exact text (builtin numerics have no declared scale).
pub fn pg_field(name: &str, pg_type: PgType, nullable: bool) -> Field {
    if pg_type == PgType::Numeric {
        return Field::new(name, DataType::Utf8, nullable).with_metadata(HashMap::from([(
            PG_TYPE_METADATA.to_string(),
            "numeric".to_string(),
        )]));
    }
    let field = typed_field(name, &scalar_type_of_pg(pg_type), nullable);
    let marker = match pg_type {
        PgType::TextArray => "text[]",
        PgType::Int2Array => "int2[]",
        PgType::Char => "char",
        _ => return field,
    };
    let mut metadata = field.metadata().clone();
    metadata.insert(PG_TYPE_METADATA.to_string(), marker.to_string());
    field.with_metadata(metadata)
}

/// The field of the display scales of column `column` (`field`) of a
/// relation, as its values are stored (`1.50` has 2): a query reads it after
/// the relation's columns, to print each unconstrained numeric as written. An
/// `Int32` column, or for an array of numerics a list of its items' scales.
pub fn stored_scale_field(field: &Field, column: usize) -> Field {
    let name = format!("floe_stored_scale_{}", field.name());
    Field::new(name, stored_scale_type(field.data_type()), true).with_metadata(HashMap::from([(
        STORED_SCALE_OF_METADATA.to_string(),
        column.to_string(),
    )]))
}

/// Whether a column of this type keeps each value's display scale beside it
/// (see [`stored_scale_field`]): an unconstrained numeric, or an array or a
/// list of them.
pub fn keeps_display_scales(ty: &SqlScalarType) -> bool {
    match ty {
        SqlScalarType::Numeric {
            max_scale: None, ..
        } => true,
        SqlScalarType::Array { element } | SqlScalarType::List { element } => matches!(
            element.as_ref(),
            SqlScalarType::Numeric {
                max_scale: None,
                ..
            }
        ),
        _ => false,
    }
}

/// The type of the stored display scales of a column of type `data_type`
/// (see [`stored_scale_field`]).
pub fn stored_scale_type(data_type: &DataType) -> DataType {
    match data_type {
        DataType::List(_) => DataType::List(Arc::new(Field::new_list_field(DataType::Int32, true))),
        _ => DataType::Int32,
    }
}

/// The column whose stored display scales the field holds, if it is a
/// [`stored_scale_field`].
pub fn stored_scale_of(field: &Field) -> Option<usize> {
    field.metadata().get(STORED_SCALE_OF_METADATA)?.parse().ok()
}

/// The display scale of a stored numeric value (the digits of its fraction).
pub fn stored_scale(datum: &Datum) -> Option<i32> {
    match datum {
        Datum::Numeric(text) if text != "NaN" => {
            Some(text.split_once('.').map_or(0, |(_, fraction)| {
                i32::try_from(fraction.len()).unwrap_or(0)
            }))
        }
        _ => None,
    }
}

/// The display scales of column `column` (of type `data_type`) of `rows`,
/// NULL where the value is (see [`stored_scale_field`]).
pub fn stored_scales(rows: &[Row], column: usize, data_type: &DataType) -> ArrayRef {
    stored_scales_of(rows.iter().map(|row| row.get(column)), data_type)
}

/// The display scales of `values`, of a column of type `data_type`: each
/// numeric's, or each array's items' (see [`stored_scale_field`]).
pub fn stored_scales_of<'a>(
    values: impl Iterator<Item = Option<&'a Datum>>,
    data_type: &DataType,
) -> ArrayRef {
    if !matches!(data_type, DataType::List(_)) {
        return Arc::new(arrow::array::Int32Array::from_iter(
            values.map(|value| value.and_then(stored_scale)),
        ));
    }
    let mut lists = arrow::array::ListBuilder::new(arrow::array::Int32Builder::new());
    for value in values {
        match value {
            Some(Datum::List(items)) => {
                lists.append_value(items.iter().map(stored_scale));
            }
            _ => lists.append_null(),
        }
    }
    Arc::new(lists.finish())
}

/// A decimal field of a computed numeric (a quotient) whose values have
/// more digits than an unconstrained numeric column's scale: it is an
/// unconstrained numeric to clients, printed without trailing zeros.
pub fn computed_numeric_field(name: &str, precision: u8, scale: i8) -> Field {
    Field::new(name, DataType::Decimal128(precision, scale), true).with_metadata(HashMap::from([(
        PG_TYPE_METADATA.to_string(),
        "numeric".to_string(),
    )]))
}

/// The SQL type recorded in a field's metadata, if any.
pub fn sql_type_of(field: &Field) -> Option<SqlScalarType> {
    if let Some(json) = field.metadata().get(SQL_TYPE_METADATA)
        && let Ok(ty) = serde_json::from_str::<SqlScalarType>(json)
        && arrow_data_type(&ty) == *field.data_type()
    {
        return Some(ty);
    }
    match field.metadata().get(PG_TYPE_METADATA).map(String::as_str) {
        Some("jsonb") if is_string(field.data_type()) => Some(SqlScalarType::Jsonb),
        Some("numeric")
            if is_string(field.data_type())
                || matches!(field.data_type(), DataType::Decimal128(..)) =>
        {
            Some(SqlScalarType::Numeric {
                precision: None,
                max_scale: None,
            })
        }
        _ => None,
    }
}

fn is_string(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
    )
}

fn is_text_array(field: &Field) -> bool {
    field.metadata().get(PG_TYPE_METADATA).map(String::as_str) == Some("text[]")
}

/// The Postgres type a client sees for a column of this field.
pub fn pg_type_of(field: &Field) -> PgType {
    if is_text_array(field) {
        return PgType::TextArray;
    }
    match field.metadata().get(PG_TYPE_METADATA).map(String::as_str) {
        Some("char") => return PgType::Char,
        Some("int2[]") => return PgType::Int2Array,
        _ => {}
    }
    if let Some(ty) = sql_type_of(field) {
        return PgType::from_scalar(&ty);
    }
    match field.data_type() {
        DataType::Boolean => PgType::Bool,
        DataType::Int8 | DataType::Int16 | DataType::UInt8 => PgType::Int2,
        DataType::Int32 => PgType::Int4,
        DataType::Int64 => PgType::Int8,
        DataType::UInt16 => PgType::UInt2,
        DataType::UInt32 => PgType::UInt4,
        DataType::UInt64 => PgType::UInt8,
        DataType::Decimal32(..)
        | DataType::Decimal64(..)
        | DataType::Decimal128(..)
        | DataType::Decimal256(..) => PgType::Numeric,
        DataType::Float16 | DataType::Float32 => PgType::Float4,
        DataType::Float64 => PgType::Float8,
        DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_) => {
            if matches!(field.data_type(), DataType::FixedSizeBinary(16)) {
                PgType::Uuid
            } else {
                PgType::Bytea
            }
        }
        DataType::Date32 | DataType::Date64 => PgType::Date,
        DataType::Time32(_) | DataType::Time64(_) => PgType::Time,
        DataType::Timestamp(_, None) => PgType::Timestamp,
        DataType::Timestamp(_, Some(_)) => PgType::TimestampTz,
        DataType::Interval(_) | DataType::Duration(_) => PgType::Interval,
        DataType::List(f)
        | DataType::LargeList(f)
        | DataType::FixedSizeList(f, _)
        | DataType::ListView(f)
        | DataType::LargeListView(f) => {
            // A list the engine made (ARRAY[...], array_agg) is an array;
            // Materialize's lists carry their type in the metadata.
            PgType::array_of(innermost_pg_type(f)).unwrap_or(PgType::List)
        }
        DataType::Struct(_) => PgType::Record,
        DataType::Map(..) => PgType::Map,
        DataType::Dictionary(_, value) => pg_type_of(&Field::new("", (**value).clone(), true)),
        _ => PgType::Text,
    }
}

/// The Postgres type of the innermost elements of an array field.
fn innermost_pg_type(field: &Field) -> PgType {
    match (sql_type_of(field), field.data_type()) {
        (None, DataType::List(f) | DataType::LargeList(f)) => innermost_pg_type(f),
        _ => pg_type_of(field)
            .array_element()
            .unwrap_or(pg_type_of(field)),
    }
}

/// The client-visible shape of a field: name and Postgres type.
pub fn column_desc(field: &Field) -> floe_repr::ColumnDesc {
    floe_repr::ColumnDesc {
        name: field.name().clone(),
        pg_type: pg_type_of(field),
    }
}

// ---------------------------------------------------------------------------
// Datums to Arrow
// ---------------------------------------------------------------------------

/// Converts rows of a relation to one record batch.
pub fn rows_to_batch(desc: &RelationDesc, rows: &[Row]) -> Result<RecordBatch, ValueError> {
    let schema = arrow_schema(desc);
    let every: Vec<usize> = (0..desc.columns.len()).collect();
    RecordBatch::try_new_with_options(
        schema,
        rows_to_columns(desc, rows, &every)?,
        &arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(rows.len())),
    )
    .map_err(|e| internal(e.to_string()))
}

/// The arrays of the columns `wanted` (indexes into `desc`) of `rows`, as
/// [`rows_to_batch`] builds them.
pub fn rows_to_columns(
    desc: &RelationDesc,
    rows: &[Row],
    wanted: &[usize],
) -> Result<Vec<ArrayRef>, ValueError> {
    let mut columns = Vec::with_capacity(wanted.len());
    for index in wanted {
        let Some((name, column)) = desc.columns.get(*index) else {
            return Err(internal(format!("no column {index}")));
        };
        let values: Vec<&Datum> = rows
            .iter()
            .map(|row| row.get(*index).unwrap_or(&Datum::Null))
            .collect();
        let array = build_array(&column.scalar_type, &values).map_err(|mut e| {
            e.message = format!("column \"{name}\": {}", e.message);
            e
        })?;
        columns.push(array);
    }
    Ok(columns)
}

/// Builds an array of builtin-column values declared by Postgres type.
pub fn pg_array(pg_type: PgType, values: &[Datum]) -> Result<ArrayRef, ValueError> {
    if pg_type == PgType::Numeric {
        let mut texts = Vec::with_capacity(values.len());
        for d in values {
            texts.push(match d {
                Datum::Null => None,
                Datum::Numeric(s) | Datum::Text(s) => Some(s.clone()),
                other => match cast_datum(
                    other.clone(),
                    &SqlScalarType::Numeric {
                        precision: None,
                        max_scale: None,
                    },
                )? {
                    Datum::Numeric(s) => Some(s),
                    _ => None,
                },
            });
        }
        return Ok(Arc::new(StringArray::from(texts)));
    }
    let refs: Vec<&Datum> = values.iter().collect();
    build_array(&scalar_type_of_pg(pg_type), &refs)
}

/// A datum of the column's type: values of other types are converted with
/// the assignment cast (an Int32 into a bigint column, text into anything).
fn coerce<'a>(
    datum: &'a Datum,
    ty: &SqlScalarType,
) -> Result<std::borrow::Cow<'a, Datum>, ValueError> {
    use SqlScalarType as S;
    let fits = matches!(
        (datum, ty),
        (Datum::Null, _)
            | (Datum::Bool(_), S::Bool)
            | (Datum::Int16(_), S::Int16)
            | (Datum::Int32(_), S::Int32)
            | (Datum::Int64(_), S::Int64)
            | (Datum::UInt16(_), S::UInt16)
            | (Datum::UInt32(_), S::UInt32)
            | (Datum::UInt64(_), S::UInt64)
            | (Datum::Oid(_), S::Oid)
            | (Datum::Float32(_), S::Float32)
            | (Datum::Float64(_), S::Float64)
            | (Datum::Numeric(_), S::Numeric { .. })
            | (Datum::Date(_), S::Date)
            | (Datum::Time(_), S::Time)
            | (Datum::Timestamp(_), S::Timestamp)
            | (Datum::TimestampTz(_), S::TimestampTz)
            | (Datum::Text(_), S::Text | S::VarChar { .. } | S::Json)
            | (Datum::Jsonb(_), S::Jsonb)
            | (Datum::Bytes(_), S::Bytes)
            | (Datum::Uuid(_), S::Uuid)
            | (Datum::Interval { .. }, S::Interval)
            | (Datum::Range(_), S::Range { .. })
            | (Datum::Record(_), S::Record { .. })
            | (Datum::List(_), S::List { .. } | S::Array { .. })
            | (Datum::TextArray(_), S::List { .. } | S::Array { .. })
            | (Datum::Map(_), S::Map { .. })
    );
    if fits {
        Ok(std::borrow::Cow::Borrowed(datum))
    } else if let (Datum::Text(s), S::Jsonb) = (datum, ty) {
        Ok(std::borrow::Cow::Owned(Datum::Jsonb(s.clone())))
    } else {
        cast_datum(datum.clone(), ty).map(std::borrow::Cow::Owned)
    }
}

/// The unscaled integer of exact decimal text (`-12.340`, `1.5e3`) at `scale`, refusing
/// (22003) anything that would need rounding or more than `precision` digits: floe
/// never rounds a value it stores or writes.
pub fn decimal_to_i128(text: &str, precision: u8, scale: i8) -> Result<i128, ValueError> {
    match plain_decimal(text.as_bytes(), precision, scale) {
        Some(value) => Ok(value),
        None => parsed_decimal(text, precision, scale),
    }
}

/// [`decimal_to_i128`] of any text numeric's output gives.
fn parsed_decimal(text: &str, precision: u8, scale: i8) -> Result<i128, ValueError> {
    let refuse = |why: &str| {
        ValueError::out_of_range(format!(
            "numeric value {text} does not fit decimal({precision},{scale}) exactly: {why}"
        ))
    };
    let trimmed = text.trim();
    let (negative, unsigned) = match trimmed.as_bytes().first() {
        Some(b'-') => (true, &trimmed[1..]),
        Some(b'+') => (false, &trimmed[1..]),
        _ => (false, trimmed),
    };
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(at) => (
            &unsigned[..at],
            unsigned[at + 1..]
                .parse::<i32>()
                .map_err(|_| refuse("not a finite number"))?,
        ),
        None => (unsigned, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if whole.is_empty() && fraction.is_empty()
        || !whole.bytes().all(|b| b.is_ascii_digit())
        || !fraction.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(refuse("not a finite number"));
    }
    // All digits (without copying them), and the power of ten of the last one.
    let (whole, fraction) = (whole.as_bytes(), fraction.as_bytes());
    let count = whole.len() + fraction.len();
    let digit = |i: usize| -> u8 {
        if i < whole.len() {
            whole[i] - b'0'
        } else {
            fraction[i - whole.len()] - b'0'
        }
    };
    let last_power = exponent.saturating_sub(i32::try_from(fraction.len()).unwrap_or(i32::MAX));
    // Digits below the target scale must be zeros; drop them.
    let target = -i32::from(scale);
    let below = usize::try_from(i64::from(target) - i64::from(last_power)).unwrap_or(0);
    let kept = count.saturating_sub(below);
    if (kept..count).any(|i| digit(i) != 0) {
        return Err(refuse("it would be rounded"));
    }
    let last_power = last_power.max(target);
    let mut value: i128 = 0;
    for i in (0..kept).skip_while(|i| digit(*i) == 0) {
        value = value
            .checked_mul(10)
            .and_then(|v| v.checked_add(i128::from(digit(i))))
            .ok_or_else(|| refuse("too many digits"))?;
    }
    for _ in target..last_power {
        value = value
            .checked_mul(10)
            .ok_or_else(|| refuse("too many digits"))?;
    }
    // More than `precision` digits: at least 10^precision (no limit past u128's range).
    if 10u128
        .checked_pow(u32::from(precision))
        .is_some_and(|limit| value.unsigned_abs() >= limit)
    {
        return Err(refuse("too many digits"));
    }
    Ok(if negative { -value } else { value })
}

/// The common case of [`decimal_to_i128`] without its general parse: an optional `-`,
/// digits, optionally `.` and no more fraction digits than `scale`, 18 digits at most,
/// fitting `precision`. `None` for anything else, which the general parse then takes
/// (and gives the same value for what this takes).
fn plain_decimal(text: &[u8], precision: u8, scale: i8) -> Option<i128> {
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    let (whole, fraction) = match digits.iter().position(|b| *b == b'.') {
        Some(at) => (&digits[..at], &digits[at + 1..]),
        None => (digits, &digits[digits.len()..]),
    };
    let fraction_digits = u32::try_from(fraction.len()).ok()?;
    let scale = u32::try_from(scale).ok()?;
    if whole.is_empty() || whole.len() + fraction.len() > 18 || fraction_digits > scale {
        return None;
    }
    let mut value: i64 = 0;
    for byte in whole.iter().chain(fraction) {
        if !byte.is_ascii_digit() {
            return None;
        }
        value = value * 10 + i64::from(byte - b'0');
    }
    let value = i128::from(value).checked_mul(10i128.checked_pow(scale - fraction_digits)?)?;
    // More than `precision` digits: the general parse names the error.
    if value.unsigned_abs() >= 10u128.checked_pow(u32::from(precision))? {
        return None;
    }
    Some(if negative { -value } else { value })
}

/// Builds an Arrow array of SQL type `ty` (its form [`arrow_data_type`]) from datums,
/// casting each value (and each element, field and bound of a nested one) to its
/// type first, as an assignment does.
pub fn build_array(ty: &SqlScalarType, values: &[&Datum]) -> Result<ArrayRef, ValueError> {
    let coerced: Vec<std::borrow::Cow<'_, Datum>> = values
        .iter()
        .map(|d| coerce_deep(d, ty))
        .collect::<Result<_, _>>()?;
    let values: Vec<&Datum> = coerced.iter().map(|c| c.as_ref()).collect();
    build::build_array(&typed_field("", ty, true), &values)
}

/// [`coerce`], into nested values too.
fn coerce_deep<'a>(
    datum: &'a Datum,
    ty: &SqlScalarType,
) -> Result<std::borrow::Cow<'a, Datum>, ValueError> {
    use SqlScalarType as S;
    use std::borrow::Cow;
    let owned = |d: &Datum, ty: &SqlScalarType| coerce_deep(d, ty).map(Cow::into_owned);
    let top = coerce(datum, ty)?;
    Ok(match (top.as_ref(), ty) {
        (Datum::List(items), S::List { element } | S::Array { element }) => {
            Cow::Owned(Datum::List(
                items
                    .iter()
                    .map(|item| owned(item, element))
                    .collect::<Result<_, _>>()?,
            ))
        }
        (Datum::TextArray(items), S::List { element } | S::Array { element })
            if **element != S::Text =>
        {
            Cow::Owned(Datum::List(
                items
                    .iter()
                    .map(|item| owned(&item.clone().map_or(Datum::Null, Datum::Text), element))
                    .collect::<Result<_, _>>()?,
            ))
        }
        (Datum::Record(items), S::Record { fields }) => Cow::Owned(Datum::Record(
            items
                .iter()
                .zip(fields)
                .map(|(item, (_, field, _))| owned(item, field))
                .collect::<Result<_, _>>()?,
        )),
        (Datum::Map(entries), S::Map { value }) => Cow::Owned(Datum::Map(
            entries
                .iter()
                .map(|(key, item)| Ok((key.clone(), owned(item, value)?)))
                .collect::<Result<_, ValueError>>()?,
        )),
        (Datum::Range(Some(bounds)), S::Range { element }) => {
            let bound = |b: &Option<Datum>| b.as_ref().map(|d| owned(d, element)).transpose();
            Cow::Owned(Datum::Range(Some(Box::new(RangeBounds {
                lower: bound(&bounds.lower)?,
                upper: bound(&bounds.upper)?,
                ..bounds.as_ref().clone()
            }))))
        }
        _ => top,
    })
}

// ---------------------------------------------------------------------------
// Arrow to datums
// ---------------------------------------------------------------------------

/// Converts an array the engine produced to datums, using the field's
/// metadata to recover the SQL type (jsonb, uuid, unsigned, numeric scale,
/// range, list, map, record). Any Arrow type converts: unknown ones become
/// their Arrow text form.
pub fn array_to_datums(array: &ArrayRef, field: &Field) -> Result<Vec<Datum>, ValueError> {
    let hint = if is_text_array(field) {
        Hint::TextArray
    } else {
        match sql_type_of(field) {
            Some(ty) => Hint::Sql(ty),
            None => Hint::None,
        }
    };
    convert(array.as_ref(), &hint, 0)
}

/// What is known about an array beyond its Arrow type.
#[derive(Debug, Clone)]
enum Hint {
    None,
    Sql(SqlScalarType),
    TextArray,
}

impl Hint {
    fn sql(&self) -> Option<&SqlScalarType> {
        match self {
            Hint::Sql(ty) => Some(ty),
            _ => None,
        }
    }

    /// The hint for a child field: the parent's type knowledge, else the
    /// child field's own metadata.
    fn child(known: Option<&SqlScalarType>, field: &Field) -> Hint {
        match known {
            Some(ty) => Hint::Sql(ty.clone()),
            None => {
                if is_text_array(field) {
                    Hint::TextArray
                } else {
                    sql_type_of(field).map(Hint::Sql).unwrap_or(Hint::None)
                }
            }
        }
    }
}

fn cast_to(array: &dyn Array, to: &DataType) -> Result<ArrayRef, ValueError> {
    arrow::compute::cast(array, to).map_err(|e| internal(e.to_string()))
}

fn format_decimal(value: String, scale: i8, hint: &Hint) -> String {
    let (negative, digits) = match value.strip_prefix('-') {
        Some(d) => (true, d.to_string()),
        None => (false, value),
    };
    let decimal = if scale > 0 {
        let scale = scale as usize;
        let padded = format!("{digits:0>width$}", width = scale + 1);
        let (integer, fraction) = padded.split_at(padded.len() - scale);
        Decimal {
            negative,
            integer: integer.trim_start_matches('0').to_string(),
            fraction: fraction.to_string(),
        }
    } else {
        let zeros = "0".repeat(scale.unsigned_abs() as usize);
        Decimal {
            negative,
            integer: format!("{digits}{zeros}")
                .trim_start_matches('0')
                .to_string(),
            fraction: String::new(),
        }
    };
    match hint.sql() {
        Some(SqlScalarType::Numeric {
            max_scale: Some(s), ..
        }) => decimal.format(Some(usize::from(*s))),
        Some(SqlScalarType::Numeric {
            max_scale: None, ..
        }) => decimal.format(None),
        _ => decimal.format(Some(scale.max(0) as usize)),
    }
}

/// The datums of a typed Arrow array of `len` values, NULL where the array is null,
/// else `$datum` of the value `$v`.
macro_rules! each {
    ($len:expr, $typed:expr, |$v:ident| $datum:expr) => {{
        let typed = $typed;
        (0..$len)
            .map(|i| {
                if typed.is_null(i) {
                    Datum::Null
                } else {
                    let $v = typed.value(i);
                    $datum
                }
            })
            .collect::<Vec<Datum>>()
    }};
}

fn convert(array: &dyn Array, hint: &Hint, depth: usize) -> Result<Vec<Datum>, ValueError> {
    if depth > floe_repr::strconv::MAX_NESTING {
        return Err(internal("value is too deeply nested"));
    }
    if let Some(target) = normalized_type(array.data_type()) {
        return convert(cast_to(array, &target)?.as_ref(), hint, depth);
    }
    let len = array.len();
    let sql = hint.sql();
    Ok(match array.data_type() {
        DataType::Null => vec![Datum::Null; len],
        DataType::Boolean => each!(len, array.as_boolean(), |v| Datum::Bool(v)),
        DataType::Int8 => each!(
            len,
            array.as_primitive::<arrow::datatypes::Int8Type>(),
            |v| Datum::Int16(v.into())
        ),
        DataType::UInt8 => each!(
            len,
            array.as_primitive::<arrow::datatypes::UInt8Type>(),
            |v| Datum::Int16(v.into())
        ),
        DataType::Int16 => each!(
            len,
            array.as_primitive::<arrow::datatypes::Int16Type>(),
            |v| Datum::Int16(v)
        ),
        DataType::Int32 => each!(
            len,
            array.as_primitive::<arrow::datatypes::Int32Type>(),
            |v| Datum::Int32(v)
        ),
        DataType::Int64 => each!(
            len,
            array.as_primitive::<arrow::datatypes::Int64Type>(),
            |v| Datum::Int64(v)
        ),
        DataType::UInt16 => each!(
            len,
            array.as_primitive::<arrow::datatypes::UInt16Type>(),
            |v| Datum::UInt16(v)
        ),
        DataType::UInt32 => {
            let oid = matches!(sql, Some(SqlScalarType::Oid));
            each!(
                len,
                array.as_primitive::<arrow::datatypes::UInt32Type>(),
                |v| if oid { Datum::Oid(v) } else { Datum::UInt32(v) }
            )
        }
        DataType::UInt64 => each!(
            len,
            array.as_primitive::<arrow::datatypes::UInt64Type>(),
            |v| Datum::UInt64(v)
        ),
        DataType::Float16 => each!(
            len,
            array.as_primitive::<arrow::datatypes::Float16Type>(),
            |v| Datum::Float32(v.to_f32())
        ),
        DataType::Float32 => each!(
            len,
            array.as_primitive::<arrow::datatypes::Float32Type>(),
            |v| Datum::Float32(v)
        ),
        DataType::Float64 => each!(
            len,
            array.as_primitive::<arrow::datatypes::Float64Type>(),
            |v| Datum::Float64(v)
        ),
        DataType::Decimal32(_, scale)
        | DataType::Decimal64(_, scale)
        | DataType::Decimal128(_, scale)
        | DataType::Decimal256(_, scale) => convert_decimal(array, *scale, hint),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => convert_text(array, hint),
        DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_) => convert_binary(array, hint),
        DataType::Date32 => each!(
            len,
            array.as_primitive::<arrow::datatypes::Date32Type>(),
            |v| Datum::Date(v)
        ),
        DataType::Time64(TimeUnit::Microsecond) => each!(
            len,
            array.as_primitive::<arrow::datatypes::Time64MicrosecondType>(),
            |v| Datum::Time(v)
        ),
        DataType::Timestamp(TimeUnit::Microsecond, tz) => {
            let with_tz = tz.is_some();
            each!(
                len,
                array.as_primitive::<arrow::datatypes::TimestampMicrosecondType>(),
                |v| if with_tz {
                    Datum::TimestampTz(v)
                } else {
                    Datum::Timestamp(v)
                }
            )
        }
        DataType::Interval(IntervalUnit::MonthDayNano) => each!(
            len,
            array.as_primitive::<arrow::datatypes::IntervalMonthDayNanoType>(),
            |v| Datum::Interval {
                months: v.months,
                days: v.days,
                micros: v.nanoseconds / 1000,
            }
        ),
        DataType::List(_) => convert_list(array, hint, depth)?,
        DataType::Map(_, _) => convert_map(array, hint, depth)?,
        DataType::Struct(fields) => convert_struct(array, fields, hint, depth)?,
        // Anything else is shown in its Arrow text form.
        _ => convert_displayed(array)?,
    })
}

/// The Arrow type an array of another representation of the same values is cast to
/// before conversion (dates in milliseconds, times and timestamps in other units, other
/// intervals, dictionaries, other list layouts), or `None` for a type converted as it is.
fn normalized_type(data_type: &DataType) -> Option<DataType> {
    match data_type {
        DataType::Date64 => Some(DataType::Date32),
        DataType::Time64(TimeUnit::Microsecond) => None,
        DataType::Time32(_) | DataType::Time64(_) => Some(DataType::Time64(TimeUnit::Microsecond)),
        DataType::Timestamp(TimeUnit::Microsecond, _) => None,
        DataType::Timestamp(_, tz) => Some(DataType::Timestamp(TimeUnit::Microsecond, tz.clone())),
        DataType::Interval(IntervalUnit::MonthDayNano) => None,
        DataType::Interval(_) | DataType::Duration(_) => {
            Some(DataType::Interval(IntervalUnit::MonthDayNano))
        }
        DataType::Dictionary(_, value) => Some(value.as_ref().clone()),
        DataType::LargeList(f)
        | DataType::FixedSizeList(f, _)
        | DataType::ListView(f)
        | DataType::LargeListView(f) => Some(DataType::List(f.clone())),
        _ => None,
    }
}

/// A string array: text, or jsonb or numeric where the hint says the text is one.
fn convert_text(array: &dyn Array, hint: &Hint) -> Vec<Datum> {
    let len = array.len();
    let make = |s: &str| match hint.sql() {
        Some(SqlScalarType::Jsonb) => Datum::Jsonb(s.to_string()),
        Some(SqlScalarType::Numeric { .. }) => Datum::Numeric(s.to_string()),
        _ => Datum::Text(s.to_string()),
    };
    match array.data_type() {
        DataType::Utf8 => each!(len, array.as_string::<i32>(), |v| make(v)),
        DataType::LargeUtf8 => each!(len, array.as_string::<i64>(), |v| make(v)),
        _ => each!(len, array.as_string_view(), |v| make(v)),
    }
}

/// A binary array: bytes, or a uuid for 16 fixed bytes unless the hint says bytea.
fn convert_binary(array: &dyn Array, hint: &Hint) -> Vec<Datum> {
    let len = array.len();
    match array.data_type() {
        DataType::Binary => each!(len, array.as_binary::<i32>(), |v| Datum::Bytes(v.to_vec())),
        DataType::LargeBinary => each!(len, array.as_binary::<i64>(), |v| Datum::Bytes(v.to_vec())),
        DataType::FixedSizeBinary(size) => {
            let uuid = *size == 16 && !matches!(hint.sql(), Some(SqlScalarType::Bytes));
            each!(len, array.as_fixed_size_binary(), |v| {
                match <[u8; 16]>::try_from(v) {
                    Ok(bytes) if uuid => Datum::Uuid(bytes),
                    _ => Datum::Bytes(v.to_vec()),
                }
            })
        }
        _ => each!(len, array.as_binary_view(), |v| Datum::Bytes(v.to_vec())),
    }
}

/// A decimal array of any width: `Datum::Numeric` with the scale the hint asks for.
fn convert_decimal(array: &dyn Array, scale: i8, hint: &Hint) -> Vec<Datum> {
    use arrow::datatypes::{Decimal32Type, Decimal64Type, Decimal128Type, Decimal256Type};
    let len = array.len();
    let numeric = |digits: String| Datum::Numeric(format_decimal(digits, scale, hint));
    match array.data_type() {
        DataType::Decimal32(..) => {
            each!(len, array.as_primitive::<Decimal32Type>(), |v| numeric(
                v.to_string()
            ))
        }
        DataType::Decimal64(..) => {
            each!(len, array.as_primitive::<Decimal64Type>(), |v| numeric(
                v.to_string()
            ))
        }
        DataType::Decimal128(..) => {
            each!(len, array.as_primitive::<Decimal128Type>(), |v| numeric(
                v.to_string()
            ))
        }
        _ => each!(len, array.as_primitive::<Decimal256Type>(), |v| numeric(
            v.to_string()
        )),
    }
}

/// A list array: `Datum::List`, or `Datum::TextArray` for arrays of text.
fn convert_list(array: &dyn Array, hint: &Hint, depth: usize) -> Result<Vec<Datum>, ValueError> {
    let len = array.len();
    let sql = hint.sql();
    let list: &ListArray = array.as_list::<i32>();
    let child_field = match list.data_type() {
        DataType::List(f) => f.clone(),
        _ => return Err(internal("list without item field")),
    };
    let element_type = match sql {
        Some(SqlScalarType::List { element } | SqlScalarType::Array { element }) => {
            Some(element.as_ref())
        }
        _ => None,
    };
    let child_hint = Hint::child(element_type, &child_field);
    let mut values = convert(list.values().as_ref(), &child_hint, depth + 1)?;
    let offsets = list.value_offsets();
    let nested = matches!(child_field.data_type(), DataType::List(_));
    if nested {
        // An array of text arrays is one array of more dimensions, as
        // PostgreSQL has them: its sub-arrays are nested lists, which print
        // bare (`{{a,b}}`) and go on the wire as its dimensions.
        values = values.into_iter().map(text_array_as_list).collect();
    }
    let text_array = !nested
        && (matches!(hint, Hint::TextArray)
            || (matches!(hint, Hint::None)
                && is_string(child_field.data_type())
                && matches!(child_hint, Hint::None)));
    Ok((0..len)
        .map(|i| {
            if list.is_null(i) {
                return Datum::Null;
            }
            let start = usize::try_from(offsets[i]).unwrap_or(0).min(values.len());
            let end = usize::try_from(offsets[i + 1])
                .unwrap_or(0)
                .clamp(start, values.len());
            let items = values[start..end].to_vec();
            if text_array {
                Datum::TextArray(
                    items
                        .into_iter()
                        .map(|d| match d {
                            Datum::Null => None,
                            Datum::Text(s) => Some(s),
                            other => Some(format_datum(&other)),
                        })
                        .collect(),
                )
            } else {
                Datum::List(items)
            }
        })
        .collect())
}

/// A text array as a list of texts (other values as they are).
fn text_array_as_list(datum: Datum) -> Datum {
    match datum {
        Datum::TextArray(items) => Datum::List(
            items
                .into_iter()
                .map(|item| item.map_or(Datum::Null, Datum::Text))
                .collect(),
        ),
        other => other,
    }
}

/// A map array: `Datum::Map` with its entries sorted by key, the last of equal keys kept.
fn convert_map(array: &dyn Array, hint: &Hint, depth: usize) -> Result<Vec<Datum>, ValueError> {
    let len = array.len();
    let sql = hint.sql();
    let map: &MapArray = array.as_map();
    let value_type = match sql {
        Some(SqlScalarType::Map { value }) => Some(value.as_ref()),
        _ => None,
    };
    let entries = map.entries();
    let (key_field, value_field) = match entries.fields().iter().collect::<Vec<_>>()[..] {
        [k, v] => (k.clone(), v.clone()),
        _ => return Err(internal("map entries without key and value")),
    };
    let keys = convert(
        map.keys().as_ref(),
        &Hint::child(Some(&SqlScalarType::Text), &key_field),
        depth + 1,
    )?;
    let values = convert(
        map.values().as_ref(),
        &Hint::child(value_type, &value_field),
        depth + 1,
    )?;
    let offsets = map.value_offsets();
    Ok((0..len)
        .map(|i| {
            if map.is_null(i) {
                return Datum::Null;
            }
            let start = usize::try_from(offsets[i]).unwrap_or(0).min(values.len());
            let end = usize::try_from(offsets[i + 1])
                .unwrap_or(0)
                .clamp(start, values.len());
            let mut entries: Vec<(String, Datum)> = (start..end)
                .map(|j| {
                    let key = match &keys[j] {
                        Datum::Text(s) => s.clone(),
                        other => format_datum(other),
                    };
                    (key, values[j].clone())
                })
                .collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            entries.dedup_by(|later, earlier| {
                if later.0 == earlier.0 {
                    std::mem::swap(later, earlier);
                    true
                } else {
                    false
                }
            });
            Datum::Map(entries)
        })
        .collect())
}

/// A struct array: a range where the hint says so, else a record.
fn convert_struct(
    array: &dyn Array,
    fields: &arrow::datatypes::Fields,
    hint: &Hint,
    depth: usize,
) -> Result<Vec<Datum>, ValueError> {
    let len = array.len();
    let sql = hint.sql();
    let structs: &StructArray = array.as_struct();
    Ok(if let Some(SqlScalarType::Range { element }) = sql {
        let column = |name: &str| -> Result<Vec<Datum>, ValueError> {
            let child = structs
                .column_by_name(name)
                .ok_or_else(|| internal(format!("range without {name}")))?;
            let child_hint = if name.ends_with("inclusive") || name == "empty" {
                Hint::Sql(SqlScalarType::Bool)
            } else {
                Hint::Sql(element.as_ref().clone())
            };
            convert(child.as_ref(), &child_hint, depth + 1)
        };
        let lower = column("lower")?;
        let upper = column("upper")?;
        let lower_inclusive = column("lower_inclusive")?;
        let upper_inclusive = column("upper_inclusive")?;
        let empty = column("empty")?;
        (0..len)
            .map(|i| {
                if structs.is_null(i) {
                    return Datum::Null;
                }
                if empty[i] == Datum::Bool(true) {
                    return Datum::Range(None);
                }
                let bound = |d: &Datum| match d {
                    Datum::Null => None,
                    other => Some(other.clone()),
                };
                Datum::Range(Some(Box::new(RangeBounds {
                    lower: bound(&lower[i]),
                    upper: bound(&upper[i]),
                    lower_inclusive: lower_inclusive[i] == Datum::Bool(true),
                    upper_inclusive: upper_inclusive[i] == Datum::Bool(true),
                })))
            })
            .collect()
    } else {
        let known: Vec<Option<&SqlScalarType>> = match sql {
            Some(SqlScalarType::Record { fields: known }) if known.len() == fields.len() => {
                known.iter().map(|(_, ty, _)| Some(ty)).collect()
            }
            _ => vec![None; fields.len()],
        };
        let columns: Vec<Vec<Datum>> = structs
            .columns()
            .iter()
            .zip(fields.iter())
            .zip(known)
            .map(|((column, field), known)| {
                convert(column.as_ref(), &Hint::child(known, field), depth + 1)
            })
            .collect::<Result<_, _>>()?;
        (0..len)
            .map(|i| {
                if structs.is_null(i) {
                    Datum::Null
                } else {
                    Datum::Record(columns.iter().map(|c| c[i].clone()).collect())
                }
            })
            .collect()
    })
}

/// Any other array, as its Arrow text form.
fn convert_displayed(array: &dyn Array) -> Result<Vec<Datum>, ValueError> {
    let len = array.len();
    // Anything else is shown in its Arrow text form.
    let options = arrow::util::display::FormatOptions::default();
    let formatter = arrow::util::display::ArrayFormatter::try_new(array, &options)
        .map_err(|e| internal(e.to_string()))?;
    Ok((0..len)
        .map(|i| {
            if array.is_null(i) {
                Datum::Null
            } else {
                Datum::Text(formatter.value(i).to_string())
            }
        })
        .collect())
}

/// Converts every row of a record batch to datums.
pub fn batch_to_rows(batch: &RecordBatch) -> Result<Vec<Row>, ValueError> {
    let schema = batch.schema();
    let columns: Vec<Vec<Datum>> = batch
        .columns()
        .iter()
        .zip(schema.fields().iter())
        .map(|(array, field)| array_to_datums(array, field))
        .collect::<Result<_, _>>()?;
    Ok((0..batch.num_rows())
        .map(|row| columns.iter().map(|c| c[row].clone()).collect())
        .collect())
}

/// An all-NULL array of any type (for tests and padding).
pub fn null_array(len: usize) -> ArrayRef {
    Arc::new(NullArray::new(len))
}

#[cfg(test)]
mod tests;
