//! Datums to Arrow arrays: the one conversion floe has. The query engine builds
//! arrays of each SQL type's Arrow form ([`crate::arrow_field`]) after casting the
//! values to the column's type ([`crate::rows_to_batch`]); the Iceberg writer builds
//! arrays of its table's Arrow schema, whose nested fields carry Iceberg field ids.
//!
//! The array has the field's type. A value fits it when it is that type's kind of
//! value, or an integer of a narrower or unsigned kind that the field's integer or
//! decimal holds exactly (Iceberg has no unsigned types), or an interval or jsonb
//! written as a string (its Postgres text). Anything else is an error naming the
//! column path; nothing is rounded.

use std::borrow::Cow;
use std::sync::Arc;

use arrow::array::builder::{
    BinaryBuilder, BooleanBuilder, Date32Builder, Decimal128Builder, FixedSizeBinaryBuilder,
    Float32Builder, Float64Builder, Int16Builder, Int32Builder, Int64Builder,
    IntervalMonthDayNanoBuilder, LargeBinaryBuilder, LargeStringBuilder, StringBuilder,
    Time64MicrosecondBuilder, TimestampMicrosecondBuilder, UInt16Builder, UInt32Builder,
    UInt64Builder,
};
use arrow::array::{ArrayRef, ListArray, MapArray, StructArray};
use arrow::buffer::{NullBuffer, OffsetBuffer};
use arrow::datatypes::{DataType, Field, FieldRef, Fields, IntervalMonthDayNano, TimeUnit};
use floe_repr::datum::format_interval;
use floe_repr::strconv::ValueError;
use floe_repr::{Datum, SqlState};

use crate::internal;

/// A placeholder for the children of NULL parents.
static NULL: Datum = Datum::Null;

/// One Arrow array of `field`'s type from `values` (see the module documentation).
pub fn build_array(field: &Field, values: &[&Datum]) -> Result<ArrayRef, ValueError> {
    build(field, values, field.name())
}

/// `build_array`, with `path` naming the (nested) column in errors.
fn build(field: &Field, values: &[&Datum], path: &str) -> Result<ArrayRef, ValueError> {
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
    Ok(match field.data_type() {
        DataType::Boolean => primitive!(BooleanBuilder::new(), |d: &Datum| match d {
            Datum::Bool(b) => Some(*b),
            _ => None,
        }),
        DataType::Int16 => primitive!(Int16Builder::new(), |d: &Datum| match d {
            Datum::Int16(v) => Some(*v),
            _ => None,
        }),
        DataType::Int32 => primitive!(Int32Builder::new(), |d: &Datum| match d {
            Datum::Int16(v) => Some(i32::from(*v)),
            Datum::Int32(v) => Some(*v),
            Datum::UInt16(v) => Some(i32::from(*v)),
            _ => None,
        }),
        DataType::Int64 => primitive!(Int64Builder::new(), |d: &Datum| match d {
            Datum::Int16(v) => Some(i64::from(*v)),
            Datum::Int32(v) => Some(i64::from(*v)),
            Datum::Int64(v) => Some(*v),
            Datum::UInt16(v) => Some(i64::from(*v)),
            Datum::UInt32(v) | Datum::Oid(v) => Some(i64::from(*v)),
            _ => None,
        }),
        DataType::UInt16 => primitive!(UInt16Builder::new(), |d: &Datum| match d {
            Datum::UInt16(v) => Some(*v),
            _ => None,
        }),
        DataType::UInt32 => primitive!(UInt32Builder::new(), |d: &Datum| match d {
            Datum::UInt32(v) | Datum::Oid(v) => Some(*v),
            _ => None,
        }),
        DataType::UInt64 => primitive!(UInt64Builder::new(), |d: &Datum| match d {
            Datum::UInt64(v) => Some(*v),
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
        DataType::Decimal128(precision, scale) => decimals(values, *precision, *scale, path)?,
        DataType::Date32 => primitive!(Date32Builder::new(), |d: &Datum| match d {
            Datum::Date(v) => Some(*v),
            _ => None,
        }),
        DataType::Time64(TimeUnit::Microsecond) => {
            primitive!(Time64MicrosecondBuilder::new(), |d: &Datum| match d {
                Datum::Time(v) => Some(*v),
                _ => None,
            })
        }
        DataType::Timestamp(TimeUnit::Microsecond, zone) => {
            let builder = TimestampMicrosecondBuilder::new().with_timezone_opt(zone.clone());
            primitive!(builder, |d: &Datum| match d {
                Datum::Timestamp(v) | Datum::TimestampTz(v) => Some(*v),
                _ => None,
            })
        }
        DataType::Interval(arrow::datatypes::IntervalUnit::MonthDayNano) => {
            let mut builder = IntervalMonthDayNanoBuilder::new();
            for datum in values {
                match datum {
                    Datum::Null => builder.append_null(),
                    datum => builder.append_value(interval(datum).ok_or_else(|| mismatch(datum))??),
                }
            }
            Arc::new(builder.finish())
        }
        DataType::Utf8 => primitive!(StringBuilder::new(), text_of),
        DataType::LargeUtf8 => primitive!(LargeStringBuilder::new(), text_of),
        DataType::Binary => primitive!(BinaryBuilder::new(), bytes_of),
        DataType::LargeBinary => primitive!(LargeBinaryBuilder::new(), bytes_of),
        DataType::FixedSizeBinary(16) => {
            let mut builder = FixedSizeBinaryBuilder::new(16);
            for datum in values {
                match datum {
                    Datum::Null => builder.append_null(),
                    Datum::Uuid(bytes) => builder
                        .append_value(bytes)
                        .map_err(|e| internal(format!("uuid column \"{path}\": {e}")))?,
                    datum => return Err(mismatch(datum)),
                }
            }
            Arc::new(builder.finish())
        }
        DataType::Struct(fields) => structs(fields, values, path, &mismatch)?,
        DataType::List(element) => lists(element, values, path, &mismatch)?,
        DataType::Map(entries, sorted) => maps(entries, *sorted, values, path, &mismatch)?,
        other => {
            return Err(internal(format!(
                "column \"{path}\" has unsupported Arrow type {other}"
            )));
        }
    })
}

/// An interval as Arrow holds it; `None` for another kind of value.
fn interval(datum: &Datum) -> Option<Result<IntervalMonthDayNano, ValueError>> {
    let Datum::Interval {
        months,
        days,
        micros,
    } = datum
    else {
        return None;
    };
    Some(
        micros
            .checked_mul(1000)
            .map(|nanos| IntervalMonthDayNano::new(*months, *days, nanos))
            .ok_or_else(|| {
                ValueError::new(SqlState::DATETIME_FIELD_OVERFLOW, "interval out of range")
            }),
    )
}

fn bytes_of(datum: &Datum) -> Option<&[u8]> {
    match datum {
        Datum::Bytes(bytes) => Some(bytes),
        _ => None,
    }
}

/// The Postgres text of values Arrow holds as strings.
fn text_of(datum: &Datum) -> Option<Cow<'_, str>> {
    match datum {
        // Borrowed: the builder copies the bytes anyway.
        Datum::Text(text) | Datum::Jsonb(text) | Datum::Numeric(text) => Some(Cow::Borrowed(text)),
        Datum::Interval {
            months,
            days,
            micros,
        } => Some(Cow::Owned(format_interval(*months, *days, *micros))),
        _ => None,
    }
}

/// Exact decimals: numeric text, or an unsigned integer (`uint8` as `decimal(20,0)`).
fn decimals(
    values: &[&Datum],
    precision: u8,
    scale: i8,
    path: &str,
) -> Result<ArrayRef, ValueError> {
    let mut builder = Decimal128Builder::new();
    for datum in values {
        match datum {
            Datum::Null => builder.append_null(),
            Datum::Numeric(text) => {
                builder.append_value(crate::decimal_to_i128(text, precision, scale)?)
            }
            Datum::UInt64(v) => {
                builder.append_value(crate::decimal_to_i128(&v.to_string(), precision, scale)?)
            }
            datum => {
                return Err(internal(format!(
                    "column \"{path}\" of type decimal({precision},{scale}) cannot hold {datum:?}"
                )));
            }
        }
    }
    Ok(Arc::new(
        builder
            .finish()
            .with_precision_and_scale(precision, scale)
            .map_err(|e| internal(format!("decimal column \"{path}\": {e}")))?,
    ))
}

/// The validity of `values`: `None` when none is NULL.
fn validity(values: &[&Datum]) -> Option<NullBuffer> {
    values
        .iter()
        .any(|d| matches!(d, Datum::Null))
        .then(|| NullBuffer::from_iter(values.iter().map(|d| !matches!(d, Datum::Null))))
}

/// An offset past `length` elements, refused when one batch cannot hold it.
fn offset(length: usize, path: &str) -> Result<i32, ValueError> {
    i32::try_from(length).map_err(|_| {
        ValueError::new(
            SqlState::PROGRAM_LIMIT_EXCEEDED,
            format!("column \"{path}\": too many elements for one batch"),
        )
    })
}

fn lists(
    element: &FieldRef,
    values: &[&Datum],
    path: &str,
    mismatch: &dyn Fn(&Datum) -> ValueError,
) -> Result<ArrayRef, ValueError> {
    let mut offsets = vec![0i32];
    // A text array's elements become datums here (borrowed from a list's).
    let mut elements: Vec<Cow<'_, Datum>> = Vec::new();
    for datum in values {
        match datum {
            Datum::Null => {}
            Datum::List(items) => elements.extend(items.iter().map(Cow::Borrowed)),
            Datum::TextArray(items) => elements.extend(
                items
                    .iter()
                    .map(|i| Cow::Owned(i.clone().map_or(Datum::Null, Datum::Text))),
            ),
            datum => return Err(mismatch(datum)),
        }
        offsets.push(offset(elements.len(), path)?);
    }
    let elements: Vec<&Datum> = elements.iter().map(AsRef::as_ref).collect();
    let child = build(element, &elements, &format!("{path}.element"))?;
    Ok(Arc::new(
        ListArray::try_new(
            element.clone(),
            OffsetBuffer::new(offsets.into()),
            child,
            validity(values),
        )
        .map_err(|e| internal(format!("list column \"{path}\": {e}")))?,
    ))
}

fn maps(
    entries: &FieldRef,
    sorted: bool,
    values: &[&Datum],
    path: &str,
    mismatch: &dyn Fn(&Datum) -> ValueError,
) -> Result<ArrayRef, ValueError> {
    let DataType::Struct(entry_fields) = entries.data_type() else {
        return Err(internal(format!(
            "map column \"{path}\" has no entry struct"
        )));
    };
    let [key_field, value_field] = entry_fields.iter().collect::<Vec<_>>()[..] else {
        return Err(internal(format!(
            "map column \"{path}\" entries are not pairs"
        )));
    };
    let mut offsets = vec![0i32];
    let mut keys: Vec<Datum> = Vec::new();
    let mut map_values: Vec<&Datum> = Vec::new();
    for datum in values {
        match datum {
            Datum::Null => {}
            Datum::Map(pairs) => {
                for (key, value) in pairs {
                    keys.push(Datum::Text(key.clone()));
                    map_values.push(value);
                }
            }
            datum => return Err(mismatch(datum)),
        }
        offsets.push(offset(keys.len(), path)?);
    }
    let key_refs: Vec<&Datum> = keys.iter().collect();
    let key_array = build(key_field, &key_refs, &format!("{path}.key"))?;
    let value_array = build(value_field, &map_values, &format!("{path}.value"))?;
    let entries_array =
        StructArray::try_new(entry_fields.clone(), vec![key_array, value_array], None)
            .map_err(|e| internal(format!("map column \"{path}\": {e}")))?;
    Ok(Arc::new(
        MapArray::try_new(
            entries.clone(),
            OffsetBuffer::new(offsets.into()),
            entries_array,
            validity(values),
            sorted,
        )
        .map_err(|e| internal(format!("map column \"{path}\": {e}")))?,
    ))
}

/// A struct array from records (one child per field) or ranges (lower, upper,
/// lower_inclusive, upper_inclusive, empty).
fn structs(
    fields: &Fields,
    values: &[&Datum],
    path: &str,
    mismatch: &dyn Fn(&Datum) -> ValueError,
) -> Result<ArrayRef, ValueError> {
    if fields.is_empty() {
        return Ok(Arc::new(StructArray::new_empty_fields(
            values.len(),
            validity(values),
        )));
    }
    // Range flags are computed values; kept alive while their references are used.
    let flags: Vec<[Datum; 3]> = values
        .iter()
        .filter_map(|datum| match datum {
            Datum::Range(bounds) => Some(range_flags(bounds.as_deref())),
            _ => None,
        })
        .collect();
    let mut flags = flags.iter();
    let mut children: Vec<Vec<&Datum>> = vec![Vec::with_capacity(values.len()); fields.len()];
    for datum in values {
        match datum {
            Datum::Null => children.iter_mut().for_each(|child| child.push(&NULL)),
            Datum::Record(items) if items.len() == fields.len() => {
                for (child, item) in children.iter_mut().zip(items) {
                    child.push(item);
                }
            }
            Datum::Range(bounds) if fields.len() == 5 => {
                let (lower, upper) = match bounds {
                    None => (&NULL, &NULL),
                    Some(bounds) => (
                        bounds.lower.as_ref().unwrap_or(&NULL),
                        bounds.upper.as_ref().unwrap_or(&NULL),
                    ),
                };
                let [lower_inclusive, upper_inclusive, empty] =
                    flags.next().ok_or_else(|| mismatch(datum))?;
                for (child, value) in
                    children
                        .iter_mut()
                        .zip([lower, upper, lower_inclusive, upper_inclusive, empty])
                {
                    child.push(value);
                }
            }
            datum => return Err(mismatch(datum)),
        }
    }
    let mut arrays = Vec::with_capacity(fields.len());
    for (field, child) in fields.iter().zip(&children) {
        arrays.push(build(field, child, &format!("{path}.{}", field.name()))?);
    }
    Ok(Arc::new(
        StructArray::try_new(fields.clone(), arrays, validity(values))
            .map_err(|e| internal(format!("struct column \"{path}\": {e}")))?,
    ))
}

/// A range's `lower_inclusive`, `upper_inclusive` and `empty` (an empty range has
/// no bounds).
fn range_flags(bounds: Option<&floe_repr::RangeBounds>) -> [Datum; 3] {
    match bounds {
        None => [Datum::Bool(false), Datum::Bool(false), Datum::Bool(true)],
        Some(bounds) => [
            Datum::Bool(bounds.lower_inclusive),
            Datum::Bool(bounds.upper_inclusive),
            Datum::Bool(false),
        ],
    }
}
