//! How SQL relations become Iceberg schemas and how their values become Arrow arrays.
//!
//! The type mapping is the one the user documentation tables (SPEC §3). Values that cannot be
//! written exactly (a numeric with more digits than its decimal) are errors naming the column;
//! nothing is ever rounded.

use std::sync::Arc;

use arrow_array::builder::{
    BinaryBuilder, BooleanBuilder, Date32Builder, Decimal128Builder, FixedSizeBinaryBuilder,
    Float32Builder, Float64Builder, Int32Builder, Int64Builder, LargeBinaryBuilder,
    LargeStringBuilder, StringBuilder, Time64MicrosecondBuilder, TimestampMicrosecondBuilder,
};
use arrow_array::{ArrayRef, ListArray, MapArray, RecordBatch, StructArray};
use arrow_schema::{DataType, Field, Fields, SchemaRef as ArrowSchemaRef, TimeUnit};
use floe_repr::datum::format_interval;
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
        SqlScalarType::List { element } => {
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

fn conversion(column: &str, what: String) -> SinkError {
    SinkError::new(
        ErrorKind::DataConversion,
        format!("cannot write column \"{column}\": {what}"),
    )
    .with_retryable(false)
}

/// A placeholder for the children of NULL parents.
static NULL: Datum = Datum::Null;

/// Builds a record batch of `schema` from columns of values (one `Vec` per top-level field,
/// all of the same length).
pub fn record_batch(
    schema: &ArrowSchemaRef,
    columns: Vec<Vec<&Datum>>,
    rows: usize,
) -> Result<RecordBatch, SinkError> {
    let mut arrays = Vec::with_capacity(columns.len());
    for (field, values) in schema.fields().iter().zip(columns) {
        arrays.push(build_array(field, &values, field.name())?);
    }
    let options = arrow_array::RecordBatchOptions::new().with_row_count(Some(rows));
    RecordBatch::try_new_with_options(schema.clone(), arrays, &options)
        .map_err(|err| internal(format!("cannot assemble a record batch: {err}")))
}

/// One Arrow array of `field`'s type from `values`; `path` names the column in errors.
fn build_array(field: &Field, values: &[&Datum], path: &str) -> Result<ArrayRef, SinkError> {
    let mismatch = |datum: &Datum| {
        internal(format!(
            "column \"{path}\" of type {} cannot hold {datum:?}",
            field.data_type()
        ))
    };
    macro_rules! primitive {
        ($builder:expr, $convert:expr) => {{
            let mut builder = $builder;
            for datum in values {
                match datum {
                    Datum::Null => builder.append_null(),
                    datum => builder.append_value($convert(*datum).ok_or_else(|| mismatch(datum))?),
                }
            }
            Arc::new(builder.finish()) as ArrayRef
        }};
    }
    let array: ArrayRef = match field.data_type() {
        DataType::Boolean => primitive!(BooleanBuilder::new(), |d: &Datum| match d {
            Datum::Bool(b) => Some(*b),
            _ => None,
        }),
        DataType::Int32 => primitive!(Int32Builder::new(), |d: &Datum| match d {
            Datum::Int16(v) => Some(i32::from(*v)),
            Datum::Int32(v) => Some(*v),
            Datum::UInt16(v) => Some(i32::from(*v)),
            _ => None,
        }),
        DataType::Int64 => primitive!(Int64Builder::new(), |d: &Datum| match d {
            Datum::Int64(v) => Some(*v),
            Datum::UInt32(v) => Some(i64::from(*v)),
            Datum::Oid(v) => Some(i64::from(*v)),
            Datum::Int32(v) => Some(i64::from(*v)),
            _ => None,
        }),
        DataType::Float32 => primitive!(Float32Builder::new(), |d: &Datum| match d {
            Datum::Float32(v) => Some(*v),
            _ => None,
        }),
        DataType::Float64 => primitive!(Float64Builder::new(), |d: &Datum| match d {
            Datum::Float64(v) => Some(*v),
            _ => None,
        }),
        DataType::Decimal128(precision, scale) => {
            let (precision, scale) = (*precision, *scale);
            let mut builder = Decimal128Builder::new();
            for datum in values {
                match datum {
                    Datum::Null => builder.append_null(),
                    Datum::Numeric(text) => {
                        builder.append_value(parse_decimal(text, precision, scale, path)?)
                    }
                    Datum::UInt64(v) => builder.append_value(i128::from(*v)),
                    datum => return Err(mismatch(datum)),
                }
            }
            Arc::new(
                builder
                    .finish()
                    .with_precision_and_scale(precision, scale)
                    .map_err(|err| internal(format!("decimal column \"{path}\": {err}")))?,
            )
        }
        DataType::Date32 => primitive!(Date32Builder::new(), |d: &Datum| match d {
            Datum::Date(v) => Some(*v),
            _ => None,
        }),
        DataType::Time64(TimeUnit::Microsecond) => {
            primitive!(Time64MicrosecondBuilder::new(), |d: &Datum| match d {
                Datum::Time(v) => Some(iceberg_time(*v)),
                _ => None,
            })
        }
        DataType::Timestamp(TimeUnit::Microsecond, zone) => {
            let builder = TimestampMicrosecondBuilder::new();
            let array = primitive!(builder, |d: &Datum| match d {
                Datum::Timestamp(v) | Datum::TimestampTz(v) => Some(*v),
                _ => None,
            });
            match zone {
                Some(zone) => {
                    let array = array
                        .as_any()
                        .downcast_ref::<arrow_array::TimestampMicrosecondArray>()
                        .expect("built as a timestamp array")
                        .clone()
                        .with_timezone(zone.clone());
                    Arc::new(array)
                }
                None => array,
            }
        }
        DataType::Utf8 => primitive!(StringBuilder::new(), text_of),
        DataType::LargeUtf8 => primitive!(LargeStringBuilder::new(), text_of),
        DataType::Binary => primitive!(BinaryBuilder::new(), |d: &Datum| match d {
            Datum::Bytes(v) => Some(v.clone()),
            _ => None,
        }),
        DataType::LargeBinary => primitive!(LargeBinaryBuilder::new(), |d: &Datum| match d {
            Datum::Bytes(v) => Some(v.clone()),
            _ => None,
        }),
        DataType::FixedSizeBinary(16) => {
            let mut builder = FixedSizeBinaryBuilder::new(16);
            for datum in values {
                match datum {
                    Datum::Null => builder.append_null(),
                    Datum::Uuid(bytes) => builder
                        .append_value(bytes)
                        .map_err(|err| internal(format!("uuid column \"{path}\": {err}")))?,
                    datum => return Err(mismatch(datum)),
                }
            }
            Arc::new(builder.finish())
        }
        DataType::Struct(fields) => build_struct(fields, values, path, &mismatch)?,
        DataType::List(element) => {
            let mut offsets = vec![0i32];
            let mut elements: Vec<&Datum> = Vec::new();
            let mut validity = Vec::with_capacity(values.len());
            for datum in values {
                match datum {
                    Datum::Null => validity.push(false),
                    Datum::List(items) => {
                        validity.push(true);
                        elements.extend(items.iter());
                    }
                    datum => return Err(mismatch(datum)),
                }
                offsets
                    .push(i32::try_from(elements.len()).map_err(|_| {
                        conversion(path, "list too long for one batch".to_string())
                    })?);
            }
            let child = build_array(element, &elements, &format!("{path}.element"))?;
            Arc::new(
                ListArray::try_new(
                    element.clone(),
                    arrow_buffer::OffsetBuffer::new(offsets.into()),
                    child,
                    Some(validity.into()),
                )
                .map_err(|err| internal(format!("list column \"{path}\": {err}")))?,
            )
        }
        DataType::Map(entries, sorted) => {
            let DataType::Struct(entry_fields) = entries.data_type() else {
                return Err(internal(format!(
                    "map column \"{path}\" has no entry struct"
                )));
            };
            let mut offsets = vec![0i32];
            let mut keys: Vec<Datum> = Vec::new();
            let mut map_values: Vec<&Datum> = Vec::new();
            let mut validity = Vec::with_capacity(values.len());
            for datum in values {
                match datum {
                    Datum::Null => validity.push(false),
                    Datum::Map(pairs) => {
                        validity.push(true);
                        for (key, value) in pairs {
                            keys.push(Datum::Text(key.clone()));
                            map_values.push(value);
                        }
                    }
                    datum => return Err(mismatch(datum)),
                }
                offsets
                    .push(i32::try_from(keys.len()).map_err(|_| {
                        conversion(path, "map too large for one batch".to_string())
                    })?);
            }
            let key_refs: Vec<&Datum> = keys.iter().collect();
            let key_array = build_array(&entry_fields[0], &key_refs, &format!("{path}.key"))?;
            let value_array = build_array(&entry_fields[1], &map_values, &format!("{path}.value"))?;
            let entries_array =
                StructArray::try_new(entry_fields.clone(), vec![key_array, value_array], None)
                    .map_err(|err| internal(format!("map column \"{path}\": {err}")))?;
            Arc::new(
                MapArray::try_new(
                    entries.clone(),
                    arrow_buffer::OffsetBuffer::new(offsets.into()),
                    entries_array,
                    Some(validity.into()),
                    *sorted,
                )
                .map_err(|err| internal(format!("map column \"{path}\": {err}")))?,
            )
        }
        other => {
            return Err(internal(format!(
                "column \"{path}\" has unsupported Arrow type {other}"
            )));
        }
    };
    Ok(array)
}

/// A struct array from records (one child per field) or ranges (lower, upper,
/// lower_inclusive, upper_inclusive, empty).
fn build_struct(
    fields: &Fields,
    values: &[&Datum],
    path: &str,
    mismatch: &dyn Fn(&Datum) -> SinkError,
) -> Result<ArrayRef, SinkError> {
    // Range flags are computed values; keep them alive while their references are used.
    let mut flags: Vec<[Datum; 3]> = Vec::with_capacity(values.len());
    for datum in values {
        if let Datum::Range(bounds) = datum {
            flags.push(match bounds {
                None => [Datum::Bool(false), Datum::Bool(false), Datum::Bool(true)],
                Some(bounds) => [
                    Datum::Bool(bounds.lower_inclusive),
                    Datum::Bool(bounds.upper_inclusive),
                    Datum::Bool(false),
                ],
            });
        }
    }
    let mut children: Vec<Vec<&Datum>> = vec![Vec::with_capacity(values.len()); fields.len()];
    let mut validity = Vec::with_capacity(values.len());
    let mut range_index = 0;
    for datum in values {
        match datum {
            Datum::Null => {
                validity.push(false);
                for child in &mut children {
                    child.push(&NULL);
                }
            }
            Datum::Record(items) if items.len() == fields.len() => {
                validity.push(true);
                for (child, item) in children.iter_mut().zip(items) {
                    child.push(item);
                }
            }
            Datum::Range(bounds) if fields.len() == 5 => {
                validity.push(true);
                let (lower, upper) = match bounds {
                    None => (&NULL, &NULL),
                    Some(bounds) => (
                        bounds.lower.as_ref().unwrap_or(&NULL),
                        bounds.upper.as_ref().unwrap_or(&NULL),
                    ),
                };
                children[0].push(lower);
                children[1].push(upper);
                let [lower_inclusive, upper_inclusive, empty] = &flags[range_index];
                children[2].push(lower_inclusive);
                children[3].push(upper_inclusive);
                children[4].push(empty);
                range_index += 1;
            }
            datum => return Err(mismatch(datum)),
        }
    }
    let mut arrays = Vec::with_capacity(fields.len());
    for (field, child) in fields.iter().zip(&children) {
        arrays.push(build_array(
            field,
            child,
            &format!("{path}.{}", field.name()),
        )?);
    }
    let nulls = validity.iter().any(|valid| !valid).then(|| validity.into());
    Ok(Arc::new(
        StructArray::try_new(fields.clone(), arrays, nulls)
            .map_err(|err| internal(format!("struct column \"{path}\": {err}")))?,
    ))
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

/// The Postgres text form of values Iceberg stores as strings.
fn text_of(datum: &Datum) -> Option<std::borrow::Cow<'_, str>> {
    match datum {
        // Borrowed: the builder copies the bytes anyway.
        Datum::Text(text) | Datum::Jsonb(text) => Some(std::borrow::Cow::Borrowed(text)),
        Datum::Interval {
            months,
            days,
            micros,
        } => Some(std::borrow::Cow::Owned(format_interval(
            *months, *days, *micros,
        ))),
        _ => None,
    }
}

/// Parses exact decimal text (`-12.340`, `1.5e3`) as an unscaled integer of `scale`, refusing
/// anything that would need rounding or more than `precision` digits.
pub fn parse_decimal(
    text: &str,
    precision: u8,
    scale: i8,
    column: &str,
) -> Result<i128, SinkError> {
    let refuse = |why: &str| {
        conversion(
            column,
            format!(
                "numeric value {text} does not fit decimal({precision},{scale}) exactly: {why}"
            ),
        )
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
    let last_power = exponent - i32::try_from(fraction.len()).unwrap_or(i32::MAX);
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

    #[test]
    fn decimals_parse_exactly() {
        assert_eq!(parse_decimal("12.34", 38, 2, "c").unwrap(), 1234);
        assert_eq!(parse_decimal("-12.3", 38, 2, "c").unwrap(), -1230);
        assert_eq!(parse_decimal("12.3400", 38, 2, "c").unwrap(), 1234);
        assert_eq!(parse_decimal("1.5e3", 38, 0, "c").unwrap(), 1500);
        assert_eq!(parse_decimal("0", 38, 10, "c").unwrap(), 0);
        assert_eq!(parse_decimal(".5", 38, 1, "c").unwrap(), 5);
        assert_eq!(
            parse_decimal("18446744073709551615", 20, 0, "c").unwrap(),
            18446744073709551615
        );
        let err = parse_decimal("1.235", 38, 2, "price").unwrap_err();
        assert_eq!(err.kind, ErrorKind::DataConversion);
        assert!(err.message.contains("\"price\""), "{}", err.message);
        assert!(parse_decimal("NaN", 38, 2, "c").is_err());
        assert!(parse_decimal(&"9".repeat(39), 38, 0, "c").is_err());
        assert!(parse_decimal(&"9".repeat(37), 38, 2, "c").is_err());
        assert!(parse_decimal(&"9".repeat(36), 38, 2, "c").is_ok());
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
