//! Stored rows straight to Arrow: each encoded row is read in place
//! ([`floe_repr::codec::read_row`]) and its datums appended to the columns' builders,
//! with no decoded `Row` in between. Converting a table for the query engine through
//! rows allocated a row and each of its strings, then copied every string again into
//! the array; most of a large table's first query went there.
//!
//! Only values that [`crate::rows_to_batch`] would take as they are (a column's own
//! kind of scalar) go this way. Anything else (a nested value, a value of another kind
//! that `rows_to_batch` would cast, a row that does not decode) makes the whole batch
//! go through rows instead, so both ways give the same arrays.

use std::sync::Arc;

use arrow::array::builder::NullBufferBuilder;
use arrow::array::builder::{
    BinaryBuilder, BooleanBuilder, Date32Builder, Decimal128Builder, FixedSizeBinaryBuilder,
    Float32Builder, Float64Builder, Int16Builder, Int32Builder, Int64Builder, StringBuilder,
    Time64MicrosecondBuilder, TimestampMicrosecondBuilder, UInt16Builder, UInt32Builder,
    UInt64Builder,
};
use arrow::array::{ArrayRef, StringArray};
use arrow::buffer::{Buffer, OffsetBuffer, ScalarBuffer};
use arrow::datatypes::DataType;
use floe_repr::codec::{Counted, DatumRef, Fixed, RowReader, read_row};
use floe_repr::strconv::ValueError;
use floe_repr::{RelationDesc, SqlScalarType};

use crate::{arrow_data_type, internal};

/// The arrays of the columns `wanted` (indexes into `desc`, ascending) of `rows`
/// (encodings of rows of `desc`), built without decoding the rows: the other columns'
/// values are passed over, and a row is read no further than the last wanted column.
/// `None` when a value or row needs the way through rows (see the module
/// documentation).
pub fn encoded_columns(
    desc: &RelationDesc,
    rows: &[&[u8]],
    wanted: &[usize],
) -> Option<Result<Vec<ArrayRef>, ValueError>> {
    // The builder each column of the row goes to, if it is wanted.
    let mut slots: Vec<Option<usize>> = vec![None; desc.columns.len()];
    let mut columns = Vec::with_capacity(wanted.len());
    for (slot, index) in wanted.iter().enumerate() {
        let (_, column) = desc.columns.get(*index)?;
        *slots.get_mut(*index)? = Some(slot);
        columns.push(Column::of(&column.scalar_type, rows.len())?);
    }
    let Some(last) = wanted.last().copied() else {
        return Some(Ok(Vec::new()));
    };
    // A row whose every column is read must end with them, as a decoded row would.
    let whole = last + 1 == desc.columns.len();
    for (position, encoded) in rows.iter().enumerate() {
        if let Some(ahead) = rows.get(position + PREFETCH_DISTANCE) {
            prefetch(ahead);
        }
        let mut reader = read_row(encoded).ok()?;
        for (index, slot) in slots.iter().enumerate().take(last + 1) {
            let Some(slot) = slot else {
                // A row written before a column was added is shorter: nothing to pass.
                if let Some(skipped) = reader.skip_datum() {
                    skipped.ok()?;
                }
                continue;
            };
            match columns[*slot].read_own(&mut reader)? {
                Ok(true) => continue,
                // NULL, another kind, or past a shorter row's end: read as a datum.
                Ok(false) => {}
                Err(error) => return Some(Err(named(error, desc, index))),
            }
            // A row written before a column was added is shorter; the rest are NULL then,
            // as `rows_to_batch` reads them.
            let datum = match reader.next_datum() {
                Some(datum) => datum.ok()?,
                None => DatumRef::Null,
            };
            if let Err(error) = columns[*slot].push(&datum)? {
                return Some(Err(named(error, desc, index)));
            }
        }
        if whole {
            if reader.left() > 0 {
                return None;
            }
            reader.finish().ok()?;
        }
    }
    let mut arrays = Vec::with_capacity(columns.len());
    for column in columns {
        match column.finish()? {
            Ok(array) => arrays.push(array),
            Err(error) => return Some(Err(error)),
        }
    }
    Some(Ok(arrays))
}

/// `error` of the value of column `index`, named as `rows_to_batch` names the column.
fn named(mut error: ValueError, desc: &RelationDesc, index: usize) -> ValueError {
    if let Some((name, _)) = desc.columns.get(index) {
        error.message = format!("column \"{name}\": {}", error.message);
    }
    error
}

/// How many rows ahead of the one being read the next row's bytes are asked for: each
/// row is an allocation of its own, and a table's rows are read in the order of its
/// segments, not of their addresses, so every row would otherwise wait for memory.
const PREFETCH_DISTANCE: usize = 8;

/// Asks the processor to bring the start of `bytes` into its cache.
#[inline(always)]
fn prefetch(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint: it reads nothing into the program and cannot fault,
    // and the pointer is of a live slice.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>(bytes.as_ptr().cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

/// One column's builder, for a type whose values go straight in.
enum Column {
    Bool(BooleanBuilder),
    Int16(Int16Builder),
    Int32(Int32Builder),
    Int64(Int64Builder),
    UInt16(UInt16Builder),
    UInt32(UInt32Builder),
    /// `oid`, held as `uint4` is.
    Oid(UInt32Builder),
    UInt64(UInt64Builder),
    Float32(Float32Builder),
    Float64(Float64Builder),
    Numeric {
        builder: Decimal128Builder,
        precision: u8,
        scale: i8,
    },
    Date(Date32Builder),
    Time(Time64MicrosecondBuilder),
    Timestamp(TimestampMicrosecondBuilder),
    TimestampTz(TimestampMicrosecondBuilder),
    /// `text`, `varchar` and `json`.
    Text(TextColumn),
    Jsonb(StringBuilder),
    Bytes(BinaryBuilder),
    Uuid(FixedSizeBinaryBuilder),
}

impl Column {
    /// The builder of a column of type `ty`, room for `rows` values; `None` for a type
    /// whose values go through rows.
    fn of(ty: &SqlScalarType, rows: usize) -> Option<Column> {
        use SqlScalarType as S;
        let timestamps = || match arrow_data_type(ty) {
            DataType::Timestamp(_, zone) => {
                Some(TimestampMicrosecondBuilder::with_capacity(rows).with_timezone_opt(zone))
            }
            _ => None,
        };
        Some(match ty {
            S::Bool => Column::Bool(BooleanBuilder::with_capacity(rows)),
            S::Int16 => Column::Int16(Int16Builder::with_capacity(rows)),
            S::Int32 => Column::Int32(Int32Builder::with_capacity(rows)),
            S::Int64 => Column::Int64(Int64Builder::with_capacity(rows)),
            S::UInt16 => Column::UInt16(UInt16Builder::with_capacity(rows)),
            S::UInt32 => Column::UInt32(UInt32Builder::with_capacity(rows)),
            S::Oid => Column::Oid(UInt32Builder::with_capacity(rows)),
            S::UInt64 => Column::UInt64(UInt64Builder::with_capacity(rows)),
            S::Float32 => Column::Float32(Float32Builder::with_capacity(rows)),
            S::Float64 => Column::Float64(Float64Builder::with_capacity(rows)),
            S::Numeric { .. } => {
                let DataType::Decimal128(precision, scale) = arrow_data_type(ty) else {
                    return None;
                };
                Column::Numeric {
                    builder: Decimal128Builder::with_capacity(rows),
                    precision,
                    scale,
                }
            }
            S::Date => Column::Date(Date32Builder::with_capacity(rows)),
            S::Time => Column::Time(Time64MicrosecondBuilder::with_capacity(rows)),
            S::Timestamp => Column::Timestamp(timestamps()?),
            S::TimestampTz => Column::TimestampTz(timestamps()?),
            S::Text | S::VarChar { .. } | S::Json => Column::Text(TextColumn::with_capacity(rows)),
            S::Jsonb => Column::Jsonb(StringBuilder::with_capacity(rows, 0)),
            S::Bytes => Column::Bytes(BinaryBuilder::with_capacity(rows, 0)),
            S::Uuid => Column::Uuid(FixedSizeBinaryBuilder::with_capacity(rows, 16)),
            S::Interval
            | S::Range { .. }
            | S::Record { .. }
            | S::List { .. }
            | S::Array { .. }
            | S::Map { .. } => {
                return None;
            }
        })
    }

    /// Reads the row's next datum straight into the builder when it is a value of the
    /// column's own kind: its tag compared once and its bytes taken, where a
    /// [`DatumRef`] is a match over every kind and then one over the column's (most of
    /// building a large snapshot's columns went there). `Ok(false)`, nothing read, for
    /// any other datum (NULL too) and for kinds without a straight way; `None` when the
    /// row does not decode (it goes through rows); an error for a value that does not fit.
    #[inline(always)]
    fn read_own(&mut self, reader: &mut RowReader<'_>) -> Option<Result<bool, ValueError>> {
        macro_rules! fixed {
            ($builder:expr, $kind:expr, $value:expr) => {
                match reader.next_fixed($kind).ok()? {
                    Some(bytes) => {
                        $builder.append_value($value(bytes));
                        Some(Ok(true))
                    }
                    None => Some(Ok(false)),
                }
            };
        }
        let float32 = |bytes| f32::from_bits(u32::from_le_bytes(bytes));
        let float64 = |bytes| f64::from_bits(u64::from_le_bytes(bytes));
        match self {
            Column::Int16(builder) => fixed!(builder, Fixed::INT16, i16::from_le_bytes),
            Column::Int32(builder) => fixed!(builder, Fixed::INT32, i32::from_le_bytes),
            Column::Int64(builder) => fixed!(builder, Fixed::INT64, i64::from_le_bytes),
            Column::UInt16(builder) => fixed!(builder, Fixed::UINT16, u16::from_le_bytes),
            Column::UInt32(builder) => fixed!(builder, Fixed::UINT32, u32::from_le_bytes),
            Column::Oid(builder) => fixed!(builder, Fixed::OID, u32::from_le_bytes),
            Column::UInt64(builder) => fixed!(builder, Fixed::UINT64, u64::from_le_bytes),
            Column::Float32(builder) => fixed!(builder, Fixed::FLOAT32, float32),
            Column::Float64(builder) => fixed!(builder, Fixed::FLOAT64, float64),
            Column::Date(builder) => fixed!(builder, Fixed::DATE, i32::from_le_bytes),
            Column::Time(builder) => fixed!(builder, Fixed::TIME, i64::from_le_bytes),
            Column::Timestamp(builder) => fixed!(builder, Fixed::TIMESTAMP, i64::from_le_bytes),
            Column::TimestampTz(builder) => {
                fixed!(builder, Fixed::TIMESTAMPTZ, i64::from_le_bytes)
            }
            // Text is gathered unchecked and checked for UTF-8 once, at the end.
            Column::Text(text) => match reader.next_counted(Counted::TEXT).ok()? {
                Some(bytes) => text.push(bytes).map(|()| Ok(true)),
                None => Some(Ok(false)),
            },
            Column::Numeric {
                builder,
                precision,
                scale,
            } => match reader.next_counted(Counted::NUMERIC).ok()? {
                Some(bytes) => Some(
                    numeric_bytes_to_i128(bytes, *precision, *scale)?
                        .map(|value| builder.append_value(value))
                        .map(|()| true),
                ),
                None => Some(Ok(false)),
            },
            Column::Bool(_) | Column::Jsonb(_) | Column::Bytes(_) | Column::Uuid(_) => {
                Some(Ok(false))
            }
        }
    }

    /// Appends `datum`; `None` when it is not this column's own kind of value (it goes
    /// through rows), an error when it is but does not fit (a numeric too wide).
    #[inline(always)]
    fn push(&mut self, datum: &DatumRef<'_>) -> Option<Result<(), ValueError>> {
        macro_rules! value {
            ($builder:expr, $value:expr) => {{
                $builder.append_value($value);
                Some(Ok(()))
            }};
        }
        if matches!(datum, DatumRef::Null) {
            self.push_null();
            return Some(Ok(()));
        }
        // The column's kind first, then the datum's: matched as a pair, the datum was
        // written to memory and read back whole, which stalled the processor.
        match self {
            Column::Bool(builder) => match datum {
                DatumRef::Bool(v) => value!(builder, *v),
                _ => None,
            },
            Column::Int16(builder) => match datum {
                DatumRef::Int16(v) => value!(builder, *v),
                _ => None,
            },
            Column::Int32(builder) => match datum {
                DatumRef::Int32(v) => value!(builder, *v),
                _ => None,
            },
            Column::Int64(builder) => match datum {
                DatumRef::Int64(v) => value!(builder, *v),
                _ => None,
            },
            Column::UInt16(builder) => match datum {
                DatumRef::UInt16(v) => value!(builder, *v),
                _ => None,
            },
            Column::UInt32(builder) => match datum {
                DatumRef::UInt32(v) => value!(builder, *v),
                _ => None,
            },
            Column::Oid(builder) => match datum {
                DatumRef::Oid(v) => value!(builder, *v),
                _ => None,
            },
            Column::UInt64(builder) => match datum {
                DatumRef::UInt64(v) => value!(builder, *v),
                _ => None,
            },
            Column::Float32(builder) => match datum {
                DatumRef::Float32(v) => value!(builder, *v),
                _ => None,
            },
            Column::Float64(builder) => match datum {
                DatumRef::Float64(v) => value!(builder, *v),
                _ => None,
            },
            Column::Numeric {
                builder,
                precision,
                scale,
            } => match datum {
                DatumRef::Numeric(text) => Some(
                    crate::decimal_to_i128(text, *precision, *scale)
                        .map(|value| builder.append_value(value)),
                ),
                _ => None,
            },
            Column::Date(builder) => match datum {
                DatumRef::Date(v) => value!(builder, *v),
                _ => None,
            },
            Column::Time(builder) => match datum {
                DatumRef::Time(v) => value!(builder, *v),
                _ => None,
            },
            Column::Timestamp(builder) => match datum {
                DatumRef::Timestamp(v) => value!(builder, *v),
                _ => None,
            },
            Column::TimestampTz(builder) => match datum {
                DatumRef::TimestampTz(v) => value!(builder, *v),
                _ => None,
            },
            Column::Text(text) => match datum {
                DatumRef::Text(v) => text.push(v.as_bytes()).map(Ok),
                _ => None,
            },
            Column::Jsonb(builder) => match datum {
                DatumRef::Jsonb(v) => value!(builder, *v),
                _ => None,
            },
            Column::Bytes(builder) => match datum {
                DatumRef::Bytes(v) => value!(builder, *v),
                _ => None,
            },
            Column::Uuid(builder) => match datum {
                DatumRef::Uuid(v) => Some(
                    builder
                        .append_value(*v)
                        .map_err(|e| internal(e.to_string())),
                ),
                _ => None,
            },
        }
    }

    fn push_null(&mut self) {
        match self {
            Column::Bool(builder) => builder.append_null(),
            Column::Int16(builder) => builder.append_null(),
            Column::Int32(builder) => builder.append_null(),
            Column::Int64(builder) => builder.append_null(),
            Column::UInt16(builder) => builder.append_null(),
            Column::UInt32(builder) | Column::Oid(builder) => builder.append_null(),
            Column::UInt64(builder) => builder.append_null(),
            Column::Float32(builder) => builder.append_null(),
            Column::Float64(builder) => builder.append_null(),
            Column::Numeric { builder, .. } => builder.append_null(),
            Column::Date(builder) => builder.append_null(),
            Column::Time(builder) => builder.append_null(),
            Column::Timestamp(builder) | Column::TimestampTz(builder) => builder.append_null(),
            Column::Text(text) => text.push_null(),
            Column::Jsonb(builder) => builder.append_null(),
            Column::Bytes(builder) => builder.append_null(),
            Column::Uuid(builder) => builder.append_null(),
        }
    }

    /// The column's array; `None` when its values must go through rows after all (text
    /// that is not UTF-8: the way through rows says where).
    fn finish(self) -> Option<Result<ArrayRef, ValueError>> {
        Some(Ok(match self {
            Column::Bool(mut builder) => Arc::new(builder.finish()),
            Column::Int16(mut builder) => Arc::new(builder.finish()),
            Column::Int32(mut builder) => Arc::new(builder.finish()),
            Column::Int64(mut builder) => Arc::new(builder.finish()),
            Column::UInt16(mut builder) => Arc::new(builder.finish()),
            Column::UInt32(mut builder) | Column::Oid(mut builder) => Arc::new(builder.finish()),
            Column::UInt64(mut builder) => Arc::new(builder.finish()),
            Column::Float32(mut builder) => Arc::new(builder.finish()),
            Column::Float64(mut builder) => Arc::new(builder.finish()),
            Column::Numeric {
                mut builder,
                precision,
                scale,
            } => match builder.finish().with_precision_and_scale(precision, scale) {
                Ok(array) => Arc::new(array),
                Err(error) => return Some(Err(internal(error.to_string()))),
            },
            Column::Date(mut builder) => Arc::new(builder.finish()),
            Column::Time(mut builder) => Arc::new(builder.finish()),
            Column::Timestamp(mut builder) | Column::TimestampTz(mut builder) => {
                Arc::new(builder.finish())
            }
            Column::Text(text) => Arc::new(text.finish()?),
            Column::Jsonb(mut builder) => Arc::new(builder.finish()),
            Column::Bytes(mut builder) => Arc::new(builder.finish()),
            Column::Uuid(mut builder) => Arc::new(builder.finish()),
        }))
    }
}

/// A stored numeric's text as a decimal of `precision` and `scale`, as
/// [`crate::decimal_to_i128`] reads it; `None` when the text is not UTF-8 (the row goes
/// through rows, which say so).
#[inline(always)]
fn numeric_bytes_to_i128(
    bytes: &[u8],
    precision: u8,
    scale: i8,
) -> Option<Result<i128, ValueError>> {
    // Plain digits (the common case) need no UTF-8 check of their own.
    if let Some(value) = crate::plain_decimal(bytes, precision, scale) {
        return Some(Ok(value));
    }
    let text = std::str::from_utf8(bytes).ok()?;
    Some(crate::parsed_decimal(text, precision, scale))
}

/// A text column gathered from encodings without checking each value for UTF-8: the
/// values are checked together when the array is made, one pass over one buffer instead
/// of a call per value.
struct TextColumn {
    values: Vec<u8>,
    /// Where each value starts, and where the last ends: `rows + 1` of them.
    offsets: Vec<i32>,
    nulls: NullBufferBuilder,
}

impl TextColumn {
    fn with_capacity(rows: usize) -> TextColumn {
        let mut offsets = Vec::with_capacity(rows + 1);
        offsets.push(0);
        TextColumn {
            values: Vec::new(),
            offsets,
            nulls: NullBufferBuilder::new(rows),
        }
    }

    /// Appends a value; `None` when the column's values would pass an `i32` offset (the
    /// way through rows reports that).
    #[inline(always)]
    fn push(&mut self, bytes: &[u8]) -> Option<()> {
        self.values.extend_from_slice(bytes);
        self.offsets.push(i32::try_from(self.values.len()).ok()?);
        self.nulls.append_non_null();
        Some(())
    }

    fn push_null(&mut self) {
        let end = self.offsets.last().copied().unwrap_or(0);
        self.offsets.push(end);
        self.nulls.append_null();
    }

    /// The array, its values checked for UTF-8 (and each value's bounds for character
    /// boundaries) at once; `None` when they are not text.
    fn finish(mut self) -> Option<StringArray> {
        // Offsets start at 0 and never decrease, as `OffsetBuffer::new` requires.
        let offsets = OffsetBuffer::new(ScalarBuffer::from(self.offsets));
        StringArray::try_new(offsets, Buffer::from_vec(self.values), self.nulls.finish()).ok()
    }
}
