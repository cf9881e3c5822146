//! Values on the wire: Postgres' text and binary formats for every floe type,
//! the type OIDs clients see, and decoding of binary values (for binary
//! parameters and for tests that read binary results).
//!
//! OIDs: Postgres' own for every Postgres type (ranges 3904/3926/3906/3912/
//! 3908/3910, `record` 2249, `varchar` 1043); Materialize's for its own
//! types: `uint2` 16460, `uint4` 16462, `uint8` 16464, `list` 16384, `map`
//! 16385.
//!
//! Binary formats are Postgres' where Postgres has the type. `uint2/4/8`
//! are big-endian unsigned integers of 2, 4 and 8 bytes. Materialize has no
//! binary format for `list` and `map`; floe sends a list like a
//! one-dimensional Postgres array (dimensions, has-null flag, element OID,
//! length, lower bound 1, then length-prefixed elements; an empty list has
//! zero dimensions) and a map as a count, the value OID, then per entry a
//! length-prefixed key and a length-prefixed value (-1 for NULL).
//! tokio-postgres and psql show these types through their text form; a
//! client asking for binary `list`/`map` gets floe's format above.

use bytes::{BufMut, BytesMut};
use floe_repr::strconv::{self, ValueError, format_datum};
use floe_repr::{Datum, PgType, RangeBounds, SqlState};
use pgwire::api::Type;
use postgres_types::Kind;

/// Microseconds between the Unix epoch and Postgres' epoch (2000-01-01).
const POSTGRES_EPOCH_MICROS: i64 = 946_684_800_000_000;
/// Days between the Unix epoch and Postgres' epoch.
const POSTGRES_EPOCH_DAYS: i32 = 10_957;

/// A day count moved to another epoch by `by` days; infinity and -infinity
/// are the extremes in both (PostgreSQL's binary form holds them so).
fn shift_days(days: i32, by: i32) -> i32 {
    if strconv::is_infinite_date(days) {
        days
    } else {
        days.wrapping_add(by)
    }
}

/// [`shift_days`] of a timestamp's microseconds.
fn shift_micros(micros: i64, by: i64) -> i64 {
    if strconv::is_infinite_timestamp(micros) {
        micros
    } else {
        micros.wrapping_add(by)
    }
}

pub use floe_repr::{LIST_OID, MAP_OID, UINT2_OID, UINT4_OID, UINT8_OID};

fn materialize_type(name: &str, oid: u32) -> Type {
    Type::new(
        name.to_string(),
        oid,
        Kind::Pseudo,
        "mz_catalog".to_string(),
    )
}

/// The wire type of a column.
pub fn wire_type(pg_type: PgType) -> Type {
    match pg_type {
        PgType::UInt2 => materialize_type("uint2", UINT2_OID),
        PgType::UInt4 => materialize_type("uint4", UINT4_OID),
        PgType::UInt8 => materialize_type("uint8", UINT8_OID),
        PgType::List => materialize_type("list", LIST_OID),
        PgType::Map => materialize_type("map", MAP_OID),
        // Every other type is PostgreSQL's own.
        other => Type::from_oid(other.oid()).unwrap_or(Type::TEXT),
    }
}

/// The floe type of a wire OID, if floe has one.
pub fn pg_type_from_oid(oid: u32) -> Option<PgType> {
    PgType::from_oid(oid)
}

/// The Postgres type a datum is a value of (`None` for NULL). Used for the
/// element OIDs of nested values in binary formats.
pub fn pg_type_of_datum(datum: &Datum) -> Option<PgType> {
    Some(match datum {
        Datum::Null => return None,
        Datum::Bool(_) => PgType::Bool,
        Datum::Int16(_) => PgType::Int2,
        Datum::Int32(_) => PgType::Int4,
        Datum::Int64(_) => PgType::Int8,
        Datum::UInt16(_) => PgType::UInt2,
        Datum::UInt32(_) => PgType::UInt4,
        Datum::UInt64(_) => PgType::UInt8,
        Datum::Float32(_) => PgType::Float4,
        Datum::Float64(_) => PgType::Float8,
        Datum::Numeric(_) => PgType::Numeric,
        Datum::Text(_) => PgType::Text,
        Datum::Bytes(_) => PgType::Bytea,
        Datum::Date(_) => PgType::Date,
        Datum::Time(_) => PgType::Time,
        Datum::Timestamp(_) => PgType::Timestamp,
        Datum::TimestampTz(_) => PgType::TimestampTz,
        Datum::Interval { .. } => PgType::Interval,
        Datum::Jsonb(_) => PgType::Jsonb,
        Datum::Uuid(_) => PgType::Uuid,
        Datum::Oid(_) => PgType::Oid,
        Datum::TextArray(_) => PgType::TextArray,
        Datum::Range(bounds) => {
            let bound = bounds
                .as_ref()
                .and_then(|b| b.lower.as_ref().or(b.upper.as_ref()));
            match bound {
                Some(Datum::Int64(_)) => PgType::Int8Range,
                Some(Datum::Numeric(_)) => PgType::NumRange,
                Some(Datum::Date(_)) => PgType::DateRange,
                Some(Datum::Timestamp(_)) => PgType::TsRange,
                Some(Datum::TimestampTz(_)) => PgType::TstzRange,
                _ => PgType::Int4Range,
            }
        }
        Datum::Record(_) => PgType::Record,
        Datum::List(_) => PgType::List,
        Datum::Map(_) => PgType::Map,
    })
}

fn oid_of_elements<'a>(items: impl Iterator<Item = &'a Datum>) -> u32 {
    items
        .filter_map(pg_type_of_datum)
        .next()
        .map(|t| wire_type(t).oid())
        .unwrap_or(25)
}

/// The text form of a value, as Postgres prints it; `None` for NULL.
pub fn encode_text(datum: &Datum) -> Option<String> {
    match datum {
        Datum::Null => None,
        // Postgres prints jsonb with a space after `:` and `,`, shorter keys first.
        Datum::Jsonb(s) => Some(floe_query::functions::jsonb::postgres_text(s)),
        other => Some(format_datum(other)),
    }
}

/// Postgres' binary `numeric`: base-10000 digits with weight, sign, scale.
fn encode_numeric_binary(text: &str, out: &mut BytesMut) {
    let decimal = match strconv::Decimal::parse(text) {
        Ok(Some(d)) => d,
        _ => {
            // NaN (and, defensively, anything unreadable).
            out.put_i16(0);
            out.put_i16(0);
            out.put_u16(0xC000);
            out.put_i16(0);
            return;
        }
    };
    let integer = decimal.integer.as_str();
    let fraction = decimal.fraction.as_str();
    let scale = fraction.len();
    let integer_padded = format!("{}{}", "0".repeat((4 - integer.len() % 4) % 4), integer);
    let fraction_padded = format!("{}{}", fraction, "0".repeat((4 - fraction.len() % 4) % 4));
    let group = |s: &str| -> Vec<i16> {
        s.as_bytes()
            .chunks(4)
            .map(|c| {
                c.iter().fold(0i16, |acc, d| {
                    acc * 10 + i16::from(d.wrapping_sub(b'0') % 10)
                })
            })
            .collect()
    };
    let integer_groups = group(&integer_padded);
    let fraction_groups = group(&fraction_padded);
    let mut weight = integer_groups.len() as i16 - 1;
    let mut digits: Vec<i16> = integer_groups.into_iter().chain(fraction_groups).collect();
    let leading = digits.iter().take_while(|d| **d == 0).count();
    digits.drain(..leading);
    weight -= leading as i16;
    while digits.last() == Some(&0) {
        digits.pop();
    }
    if digits.is_empty() {
        weight = 0;
    }
    out.put_i16(digits.len() as i16);
    out.put_i16(weight);
    out.put_u16(if decimal.negative && !digits.is_empty() {
        0x4000
    } else {
        0
    });
    out.put_i16(scale as i16);
    for digit in digits {
        out.put_i16(digit);
    }
}

/// Writes a nested value with its i32 length prefix (-1 for NULL).
fn put_element(out: &mut BytesMut, datum: &Datum) {
    match encode_binary(datum) {
        None => out.put_i32(-1),
        Some(bytes) => {
            out.put_i32(bytes.len() as i32);
            out.put_slice(&bytes);
        }
    }
}

/// The binary form of a value; `None` for NULL.
pub fn encode_binary(datum: &Datum) -> Option<BytesMut> {
    let mut out = BytesMut::new();
    match datum {
        Datum::Null => return None,
        Datum::Bool(b) => out.put_u8(u8::from(*b)),
        Datum::Int16(v) => out.put_i16(*v),
        Datum::Int32(v) => out.put_i32(*v),
        Datum::Int64(v) => out.put_i64(*v),
        Datum::UInt16(v) => out.put_u16(*v),
        Datum::UInt32(v) => out.put_u32(*v),
        Datum::UInt64(v) => out.put_u64(*v),
        Datum::Float32(v) => out.put_f32(*v),
        Datum::Float64(v) => out.put_f64(*v),
        Datum::Numeric(s) => encode_numeric_binary(s, &mut out),
        Datum::Text(s) => out.put_slice(s.as_bytes()),
        Datum::Jsonb(s) => {
            out.put_u8(1);
            out.put_slice(floe_query::functions::jsonb::postgres_text(s).as_bytes());
        }
        Datum::Bytes(b) => out.put_slice(b),
        Datum::Date(days) => out.put_i32(shift_days(*days, -POSTGRES_EPOCH_DAYS)),
        Datum::Time(micros) => out.put_i64(*micros),
        Datum::Timestamp(micros) | Datum::TimestampTz(micros) => {
            out.put_i64(shift_micros(*micros, -POSTGRES_EPOCH_MICROS))
        }
        Datum::Interval {
            months,
            days,
            micros,
        } => {
            out.put_i64(*micros);
            out.put_i32(*days);
            out.put_i32(*months);
        }
        Datum::Uuid(bytes) => out.put_slice(bytes),
        Datum::Oid(v) => out.put_u32(*v),
        Datum::TextArray(elements) => {
            let items: Vec<Datum> = elements
                .iter()
                .map(|e| e.clone().map(Datum::Text).unwrap_or(Datum::Null))
                .collect();
            put_array(&mut out, &items, 25);
        }
        Datum::List(items) => put_array(&mut out, items, oid_of_elements(items.iter())),
        Datum::Map(entries) => {
            out.put_i32(entries.len() as i32);
            out.put_u32(oid_of_elements(entries.iter().map(|(_, v)| v)));
            for (key, value) in entries {
                out.put_i32(key.len() as i32);
                out.put_slice(key.as_bytes());
                put_element(&mut out, value);
            }
        }
        Datum::Record(fields) => {
            out.put_i32(fields.len() as i32);
            for field in fields {
                out.put_u32(
                    pg_type_of_datum(field)
                        .map(|t| wire_type(t).oid())
                        .unwrap_or(25),
                );
                put_element(&mut out, field);
            }
        }
        Datum::Range(None) => out.put_u8(RANGE_EMPTY),
        Datum::Range(Some(bounds)) => {
            let mut flags = 0;
            if bounds.lower_inclusive && bounds.lower.is_some() {
                flags |= RANGE_LB_INC;
            }
            if bounds.upper_inclusive && bounds.upper.is_some() {
                flags |= RANGE_UB_INC;
            }
            if bounds.lower.is_none() {
                flags |= RANGE_LB_INF;
            }
            if bounds.upper.is_none() {
                flags |= RANGE_UB_INF;
            }
            out.put_u8(flags);
            for bound in [&bounds.lower, &bounds.upper].into_iter().flatten() {
                put_element(&mut out, bound);
            }
        }
    }
    Some(out)
}

const RANGE_EMPTY: u8 = 0x01;
const RANGE_LB_INC: u8 = 0x02;
const RANGE_UB_INC: u8 = 0x04;
const RANGE_LB_INF: u8 = 0x08;
const RANGE_UB_INF: u8 = 0x10;

/// The binary form of a value of a column of `pg_type`: an array as
/// PostgreSQL sends it, its dimensions as such and its element type the
/// column's even when every element is NULL; anything else as
/// [`encode_binary`] writes it.
pub fn encode_binary_as(datum: &Datum, pg_type: PgType) -> Option<BytesMut> {
    let (Some(element), Datum::List(items)) = (pg_type.array_element(), datum) else {
        return encode_binary(datum);
    };
    let Some(dimensions) = array_dimensions(items) else {
        return encode_binary(datum);
    };
    let mut flat = Vec::new();
    flatten_array(items, dimensions.len(), &mut flat);
    let mut out = BytesMut::new();
    if flat.is_empty() {
        out.put_i32(0);
        out.put_i32(0);
        out.put_u32(wire_type(element).oid());
        return Some(out);
    }
    out.put_i32(dimensions.len() as i32);
    out.put_i32(i32::from(flat.iter().any(|d| matches!(d, Datum::Null))));
    out.put_u32(wire_type(element).oid());
    for length in &dimensions {
        out.put_i32(*length as i32);
        out.put_i32(1);
    }
    for item in flat {
        put_element(&mut out, item);
    }
    Some(out)
}

/// The lengths of an array's dimensions (nested lists as PostgreSQL's
/// dimensions), or `None` when its sub-arrays differ in length.
fn array_dimensions(items: &[Datum]) -> Option<Vec<usize>> {
    let mut dimensions = vec![items.len()];
    let nested: Vec<&[Datum]> = items
        .iter()
        .map(|item| match item {
            Datum::List(inner) => Some(inner.as_slice()),
            _ => None,
        })
        .collect::<Option<_>>()
        .unwrap_or_default();
    if nested.is_empty() || nested.len() != items.len() {
        return Some(dimensions);
    }
    let inner = array_dimensions(nested[0])?;
    for sub in &nested[1..] {
        if array_dimensions(sub)? != inner {
            return None;
        }
    }
    dimensions.extend(inner);
    Some(dimensions)
}

/// An array's elements in row-major order, `depth` dimensions down.
fn flatten_array<'a>(items: &'a [Datum], depth: usize, out: &mut Vec<&'a Datum>) {
    for item in items {
        match item {
            Datum::List(inner) if depth > 1 => flatten_array(inner, depth - 1, out),
            other => out.push(other),
        }
    }
}

/// A one-dimensional Postgres array (lower bound 1).
fn put_array(out: &mut BytesMut, items: &[Datum], element_oid: u32) {
    if items.is_empty() {
        out.put_i32(0);
        out.put_i32(0);
        out.put_u32(element_oid);
        return;
    }
    out.put_i32(1);
    out.put_i32(i32::from(items.iter().any(|d| matches!(d, Datum::Null))));
    out.put_u32(element_oid);
    out.put_i32(items.len() as i32);
    out.put_i32(1);
    for item in items {
        put_element(out, item);
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

fn binary_error(message: impl Into<String>) -> ValueError {
    ValueError::new(SqlState::INVALID_BINARY_REPRESENTATION, message)
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], ValueError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|end| *end <= self.bytes.len())
            .ok_or_else(|| binary_error("insufficient data left in message"))?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], ValueError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn i32(&mut self) -> Result<i32, ValueError> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, ValueError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    fn i16(&mut self) -> Result<i16, ValueError> {
        Ok(i16::from_be_bytes(self.array()?))
    }

    fn rest(&mut self) -> &'a [u8] {
        let rest = &self.bytes[self.at..];
        self.at = self.bytes.len();
        rest
    }

    fn finish(&self) -> Result<(), ValueError> {
        if self.at == self.bytes.len() {
            Ok(())
        } else {
            Err(binary_error("incorrect binary data format"))
        }
    }

    /// A length-prefixed nested value of the type with `oid`.
    fn element(&mut self, oid: u32, depth: usize) -> Result<Datum, ValueError> {
        let len = self.i32()?;
        if len < 0 {
            return Ok(Datum::Null);
        }
        let bytes = self.take(len as usize)?;
        let pg_type = pg_type_from_oid(oid)
            .ok_or_else(|| binary_error(format!("unsupported element type oid {oid}")))?;
        decode_nested(pg_type, bytes, depth + 1)
    }
}

fn utf8(bytes: &[u8]) -> Result<String, ValueError> {
    std::str::from_utf8(bytes).map(str::to_string).map_err(|_| {
        ValueError::new(
            SqlState::CHARACTER_NOT_IN_REPERTOIRE,
            "invalid byte sequence for encoding \"UTF8\"",
        )
    })
}

fn decode_numeric_binary(reader: &mut Reader<'_>) -> Result<String, ValueError> {
    let ndigits = reader.i16()?;
    let weight = i32::from(reader.i16()?);
    let sign = u16::from_be_bytes(reader.array()?);
    let scale = reader.i16()?;
    if sign == 0xC000 {
        return Ok("NaN".into());
    }
    if ndigits < 0 || scale < 0 || !(sign == 0 || sign == 0x4000) || weight.abs() > 1000 {
        return Err(binary_error("invalid numeric in binary format"));
    }
    let mut digits = Vec::with_capacity(ndigits as usize);
    for _ in 0..ndigits {
        let d = reader.i16()?;
        if !(0..10_000).contains(&d) {
            return Err(binary_error("invalid digit in external \"numeric\" value"));
        }
        digits.push(d);
    }
    reader.finish()?;
    let digit = |group: i32| -> i16 {
        usize::try_from(group)
            .ok()
            .and_then(|g| digits.get(g).copied())
            .unwrap_or(0)
    };
    let mut integer = String::new();
    for group in 0..=weight {
        if integer.is_empty() {
            if digit(group) != 0 {
                integer.push_str(&digit(group).to_string());
            }
        } else {
            integer.push_str(&format!("{:04}", digit(group)));
        }
    }
    let mut fraction = String::new();
    let mut group = weight + 1;
    let scale = scale as usize;
    while fraction.len() < scale {
        fraction.push_str(&format!("{:04}", digit(group)));
        group += 1;
    }
    fraction.truncate(scale);
    let decimal = strconv::Decimal {
        negative: sign == 0x4000,
        integer,
        fraction,
    };
    Ok(decimal.format(Some(scale)))
}

/// Decodes the binary form of a value of `pg_type` (a parameter bound in
/// binary, or a result read back in tests). Malformed bytes are an error,
/// never a panic.
pub fn decode_binary(pg_type: PgType, bytes: &[u8]) -> Result<Datum, ValueError> {
    decode_nested(pg_type, bytes, 0)
}

fn decode_nested(pg_type: PgType, bytes: &[u8], depth: usize) -> Result<Datum, ValueError> {
    if depth > strconv::MAX_NESTING {
        return Err(binary_error("value is too deeply nested"));
    }
    let mut r = Reader { bytes, at: 0 };
    let datum = match pg_type {
        PgType::Bool => Datum::Bool(r.array::<1>()?[0] != 0),
        PgType::Int2 => Datum::Int16(r.i16()?),
        PgType::Int4 => Datum::Int32(r.i32()?),
        PgType::Int8 => Datum::Int64(i64::from_be_bytes(r.array()?)),
        PgType::UInt2 => Datum::UInt16(u16::from_be_bytes(r.array()?)),
        PgType::UInt4 => Datum::UInt32(r.u32()?),
        PgType::UInt8 => Datum::UInt64(u64::from_be_bytes(r.array()?)),
        PgType::Oid => Datum::Oid(r.u32()?),
        PgType::Float4 => Datum::Float32(f32::from_be_bytes(r.array()?)),
        PgType::Float8 => Datum::Float64(f64::from_be_bytes(r.array()?)),
        PgType::Numeric => Datum::Numeric(decode_numeric_binary(&mut r)?),
        PgType::Text | PgType::VarChar | PgType::Char => Datum::Text(utf8(r.rest())?),
        PgType::Json => {
            let text = utf8(r.rest())?;
            strconv::parse_json(&text)?;
            Datum::Text(text)
        }
        PgType::Bytea => Datum::Bytes(r.rest().to_vec()),
        PgType::Jsonb => {
            let version = r.array::<1>()?[0];
            if version != 1 {
                return Err(binary_error(format!(
                    "unsupported jsonb version number {version}"
                )));
            }
            Datum::Jsonb(strconv::parse_jsonb(&utf8(r.rest())?)?)
        }
        PgType::Date => Datum::Date(shift_days(r.i32()?, POSTGRES_EPOCH_DAYS)),
        PgType::Time => Datum::Time(i64::from_be_bytes(r.array()?)),
        PgType::Timestamp => Datum::Timestamp(shift_micros(
            i64::from_be_bytes(r.array()?),
            POSTGRES_EPOCH_MICROS,
        )),
        PgType::TimestampTz => Datum::TimestampTz(shift_micros(
            i64::from_be_bytes(r.array()?),
            POSTGRES_EPOCH_MICROS,
        )),
        PgType::Interval => {
            let micros = i64::from_be_bytes(r.array()?);
            let days = r.i32()?;
            let months = r.i32()?;
            Datum::Interval {
                months,
                days,
                micros,
            }
        }
        PgType::Uuid => Datum::Uuid(r.array()?),
        PgType::TextArray
        | PgType::Int2Array
        | PgType::List
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
        | PgType::JsonbArray => decode_array(&mut r, pg_type, depth)?,
        PgType::Map => decode_map(&mut r, depth)?,
        PgType::Record => decode_record(&mut r, depth)?,
        PgType::Int4Range
        | PgType::Int8Range
        | PgType::NumRange
        | PgType::DateRange
        | PgType::TsRange
        | PgType::TstzRange => decode_range(&mut r, pg_type, depth)?,
    };
    r.finish()?;
    Ok(datum)
}

/// A one-dimensional array (a text array or a list) in binary form.
fn decode_array(r: &mut Reader<'_>, pg_type: PgType, depth: usize) -> Result<Datum, ValueError> {
    let dimensions = r.i32()?;
    let _has_null = r.i32()?;
    let element_oid = r.u32()?;
    let items = match dimensions {
        0 => Vec::new(),
        1 => {
            let len = r.i32()?;
            let _lower = r.i32()?;
            let len = usize::try_from(len).map_err(|_| binary_error("negative length"))?;
            if len > r.bytes.len() {
                return Err(binary_error("array length exceeds message"));
            }
            let mut items = Vec::with_capacity(len);
            for _ in 0..len {
                items.push(r.element(element_oid, depth)?);
            }
            items
        }
        _ => return Err(binary_error("only one-dimensional arrays are supported")),
    };
    Ok(if pg_type == PgType::TextArray {
        Datum::TextArray(
            items
                .into_iter()
                .map(|d| match d {
                    Datum::Null => None,
                    other => Some(format_datum(&other)),
                })
                .collect(),
        )
    } else {
        Datum::List(items)
    })
}

/// A map in binary form: its entries sorted by key, one per key.
fn decode_map(r: &mut Reader<'_>, depth: usize) -> Result<Datum, ValueError> {
    let len = r.i32()?;
    let value_oid = r.u32()?;
    let len = usize::try_from(len).map_err(|_| binary_error("negative length"))?;
    if len > r.bytes.len() {
        return Err(binary_error("map length exceeds message"));
    }
    let mut entries: Vec<(String, Datum)> = Vec::with_capacity(len);
    for _ in 0..len {
        let key_len = r.i32()?;
        let key_len = usize::try_from(key_len).map_err(|_| binary_error("map key is NULL"))?;
        let key = utf8(r.take(key_len)?)?;
        let value = r.element(value_oid, depth)?;
        entries.push((key, value));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    entries.dedup_by(|later, earlier| later.0 == earlier.0);
    Ok(Datum::Map(entries))
}

/// A record in binary form: a field count, then each field's type and value.
fn decode_record(r: &mut Reader<'_>, depth: usize) -> Result<Datum, ValueError> {
    let len = r.i32()?;
    let len = usize::try_from(len).map_err(|_| binary_error("negative field count"))?;
    if len > r.bytes.len() {
        return Err(binary_error("field count exceeds message"));
    }
    let mut fields = Vec::with_capacity(len);
    for _ in 0..len {
        let oid = r.u32()?;
        fields.push(r.element(oid, depth)?);
    }
    Ok(Datum::Record(fields))
}

/// A range in binary form: flags, then the bounds that are not infinite.
fn decode_range(r: &mut Reader<'_>, pg_type: PgType, depth: usize) -> Result<Datum, ValueError> {
    let element = match pg_type {
        PgType::Int4Range => PgType::Int4,
        PgType::Int8Range => PgType::Int8,
        PgType::NumRange => PgType::Numeric,
        PgType::DateRange => PgType::Date,
        PgType::TsRange => PgType::Timestamp,
        _ => PgType::TimestampTz,
    };
    let flags = r.array::<1>()?[0];
    Ok(if flags & RANGE_EMPTY != 0 {
        Datum::Range(None)
    } else {
        let oid = wire_type(element).oid();
        let lower = if flags & RANGE_LB_INF == 0 {
            Some(r.element(oid, depth)?)
        } else {
            None
        };
        let upper = if flags & RANGE_UB_INF == 0 {
            Some(r.element(oid, depth)?)
        } else {
            None
        };
        Datum::Range(Some(Box::new(RangeBounds {
            lower,
            upper,
            lower_inclusive: flags & RANGE_LB_INC != 0,
            upper_inclusive: flags & RANGE_UB_INC != 0,
        })))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use floe_repr::{SqlScalarType, parse_datum};

    #[test]
    fn text_forms_match_postgres() {
        assert_eq!(encode_text(&Datum::Bool(true)).unwrap(), "t");
        assert_eq!(encode_text(&Datum::Float64(1.5)).unwrap(), "1.5");
        assert_eq!(encode_text(&Datum::Float64(1e20)).unwrap(), "1e+20");
        assert_eq!(encode_text(&Datum::Float64(1.5e-5)).unwrap(), "1.5e-05");
        assert_eq!(encode_text(&Datum::Float64(f64::NAN)).unwrap(), "NaN");
        assert_eq!(encode_text(&Datum::Float32(0.1)).unwrap(), "0.1");
        assert_eq!(
            encode_text(&Datum::Bytes(vec![0xde, 0xad])).unwrap(),
            "\\xdead"
        );
        assert_eq!(encode_text(&Datum::Date(0)).unwrap(), "1970-01-01");
        assert_eq!(
            encode_text(&Datum::TimestampTz(1_764_460_800_123_000)).unwrap(),
            "2025-11-30 00:00:00.123+00"
        );
        assert_eq!(
            encode_text(&Datum::Time(3_723_500_000)).unwrap(),
            "01:02:03.5"
        );
        assert_eq!(
            encode_text(&Datum::TextArray(vec![
                Some("a b".into()),
                None,
                Some("c".into())
            ]))
            .unwrap(),
            "{\"a b\",NULL,c}"
        );
        assert_eq!(
            encode_text(&Datum::Uuid([0x12; 16])).unwrap(),
            "12121212-1212-1212-1212-121212121212"
        );
        assert_eq!(
            encode_text(&Datum::UInt64(u64::MAX)).unwrap(),
            "18446744073709551615"
        );
        assert_eq!(encode_text(&Datum::Null), None);
    }

    #[test]
    fn numeric_binary_uses_base_10000_groups() {
        let mut out = BytesMut::new();
        encode_numeric_binary("-12345.678", &mut out);
        // ndigits 3, weight 1, negative, scale 3, digits 1 2345 6780.
        let expected: Vec<u8> = [3i16, 1]
            .iter()
            .flat_map(|v| v.to_be_bytes())
            .chain(0x4000u16.to_be_bytes())
            .chain([3i16, 1, 2345, 6780].iter().flat_map(|v| v.to_be_bytes()))
            .collect();
        assert_eq!(out.to_vec(), expected);
        let mut zero = BytesMut::new();
        encode_numeric_binary("0.00", &mut zero);
        assert_eq!(
            zero.to_vec(),
            [0i16, 0, 0, 2]
                .iter()
                .flat_map(|v| v.to_be_bytes())
                .collect::<Vec<u8>>()
        );
    }

    fn samples() -> Vec<(PgType, Datum)> {
        use SqlScalarType as S;
        let p = |text: &str, ty: S| parse_datum(text, &ty).unwrap();
        let range = |e: S| S::Range {
            element: Box::new(e),
        };
        let list = |e: S| S::List {
            element: Box::new(e),
        };
        vec![
            (PgType::Bool, Datum::Bool(false)),
            (PgType::Int2, Datum::Int16(i16::MIN)),
            (PgType::Int4, Datum::Int32(-7)),
            (PgType::Int8, Datum::Int64(i64::MAX)),
            (PgType::UInt2, Datum::UInt16(u16::MAX)),
            (PgType::UInt4, Datum::UInt32(u32::MAX)),
            (PgType::UInt8, Datum::UInt64(u64::MAX)),
            (PgType::Float4, Datum::Float32(-1.25)),
            (PgType::Float8, Datum::Float64(1e300)),
            (PgType::Numeric, Datum::Numeric("-12345.678".into())),
            (PgType::Numeric, Datum::Numeric("0.0001".into())),
            (PgType::Numeric, Datum::Numeric("100000000".into())),
            (PgType::Numeric, Datum::Numeric("0.00".into())),
            (PgType::Numeric, Datum::Numeric("NaN".into())),
            (PgType::Text, Datum::Text("héllo".into())),
            (PgType::Bytea, Datum::Bytes(vec![0, 1, 255])),
            (PgType::Date, Datum::Date(-800_000)),
            (PgType::Time, Datum::Time(86_399_999_999)),
            (PgType::Timestamp, Datum::Timestamp(-1)),
            (
                PgType::TimestampTz,
                Datum::TimestampTz(1_764_460_800_123_000),
            ),
            (
                PgType::Interval,
                Datum::Interval {
                    months: -14,
                    days: 3,
                    micros: -5,
                },
            ),
            (PgType::Jsonb, Datum::Jsonb("{\"a\":[1,null]}".into())),
            (PgType::Uuid, Datum::Uuid([9; 16])),
            (PgType::Oid, Datum::Oid(26)),
            (
                PgType::TextArray,
                Datum::TextArray(vec![Some("a".into()), None]),
            ),
            (PgType::Int4Range, p("[1,5)", range(S::Int32))),
            (PgType::Int8Range, p("(,5)", range(S::Int64))),
            (
                PgType::NumRange,
                p(
                    "[1.5,]",
                    range(S::Numeric {
                        precision: None,
                        max_scale: None,
                    }),
                ),
            ),
            (PgType::DateRange, p("empty", range(S::Date))),
            // Infinities are PostgreSQL's extremes of the binary form too.
            (PgType::Date, Datum::Date(strconv::DATE_INFINITY)),
            (PgType::Date, Datum::Date(strconv::DATE_MINUS_INFINITY)),
            (
                PgType::Timestamp,
                Datum::Timestamp(strconv::TIMESTAMP_INFINITY),
            ),
            (
                PgType::TimestampTz,
                Datum::TimestampTz(strconv::TIMESTAMP_MINUS_INFINITY),
            ),
            (
                PgType::TsRange,
                p("[2024-01-01,2024-01-02]", range(S::Timestamp)),
            ),
            (
                PgType::TstzRange,
                p("(2024-01-01 00:00+02,)", range(S::TimestampTz)),
            ),
            (PgType::List, p("{{1,NULL},{}}", list(list(S::Int32)))),
            (PgType::List, p("{}", list(S::Text))),
            (
                PgType::Map,
                p(
                    "{a=>1,b=>NULL}",
                    S::Map {
                        value: Box::new(S::Int64),
                    },
                ),
            ),
            (
                PgType::Record,
                Datum::Record(vec![Datum::Int32(1), Datum::Null, Datum::Text("x".into())]),
            ),
        ]
    }

    #[test]
    fn binary_round_trips_every_type() {
        for (pg_type, datum) in samples() {
            let bytes = encode_binary(&datum).unwrap();
            let decoded = decode_binary(pg_type, &bytes)
                .unwrap_or_else(|e| panic!("{pg_type:?} {datum:?}: {e}"));
            match (&decoded, &datum) {
                (Datum::Record(a), Datum::Record(b)) => {
                    // A NULL field carries no type: compare the text forms.
                    assert_eq!(a.len(), b.len());
                    assert_eq!(format_datum(&decoded), format_datum(&datum));
                }
                _ => assert_eq!(decoded, datum, "{pg_type:?}"),
            }
            assert_eq!(
                pg_type_from_oid(wire_type(pg_type).oid()),
                Some(pg_type),
                "{pg_type:?}"
            );
        }
    }

    #[test]
    fn range_binary_is_postgres_layout() {
        let r = parse_datum(
            "[1,5)",
            &SqlScalarType::Range {
                element: Box::new(SqlScalarType::Int32),
            },
        )
        .unwrap();
        assert_eq!(
            encode_binary(&r).unwrap().to_vec(),
            vec![0x02, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 5]
        );
        assert_eq!(
            encode_binary(&Datum::Range(None)).unwrap().to_vec(),
            vec![1]
        );
    }

    #[test]
    fn oids() {
        assert_eq!(wire_type(PgType::UInt2).oid(), 16_460);
        assert_eq!(wire_type(PgType::UInt4).oid(), 16_462);
        assert_eq!(wire_type(PgType::UInt8).oid(), 16_464);
        assert_eq!(wire_type(PgType::List).oid(), 16_384);
        assert_eq!(wire_type(PgType::Map).oid(), 16_385);
        assert_eq!(wire_type(PgType::Record).oid(), 2249);
        assert_eq!(wire_type(PgType::Int4Range).oid(), 3904);
        assert_eq!(wire_type(PgType::Int8Range).oid(), 3926);
        assert_eq!(wire_type(PgType::NumRange).oid(), 3906);
        assert_eq!(wire_type(PgType::DateRange).oid(), 3912);
        assert_eq!(wire_type(PgType::TsRange).oid(), 3908);
        assert_eq!(wire_type(PgType::TstzRange).oid(), 3910);
    }

    #[test]
    fn corrupt_binary_is_an_error() {
        for (pg_type, datum) in samples() {
            let bytes = encode_binary(&datum).unwrap();
            for end in 0..bytes.len() {
                let _ = decode_binary(pg_type, &bytes[..end]);
            }
            let mut longer = bytes.to_vec();
            longer.push(0);
            if !matches!(pg_type, PgType::Text | PgType::Bytea | PgType::Jsonb) {
                assert!(decode_binary(pg_type, &longer).is_err(), "{pg_type:?}");
            }
            for i in 0..bytes.len() {
                let mut corrupt = bytes.to_vec();
                corrupt[i] ^= 0xff;
                let _ = decode_binary(pg_type, &corrupt);
            }
        }
        assert!(decode_binary(PgType::Int4, &[0, 0]).is_err());
        assert!(decode_binary(PgType::Text, &[0xff]).is_err());
        assert!(
            decode_binary(
                PgType::List,
                &[
                    0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 23, 0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 1
                ]
            )
            .is_err()
        );
    }
}
