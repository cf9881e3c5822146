//! A compact, self-describing binary encoding of rows for the durable change
//! log. Every datum is a tag byte and its payload; lengths are LEB128
//! varints. The encoding is deterministic: equal rows encode to equal bytes
//! (floats are canonicalized: `-0.0` as `0.0`, every NaN as one NaN), so the
//! bytes can key consolidation. Decoding checks every length and tag and
//! never panics on corrupt input.

use std::fmt;

use crate::datum::{Datum, RangeBounds, Row};

/// The first byte of every encoded row: the codec version.
const VERSION: u8 = 1;

/// How deeply encoded values may nest before decoding refuses them.
const MAX_DEPTH: usize = 128;

mod tag {
    pub const NULL: u8 = 0;
    pub const FALSE: u8 = 1;
    pub const TRUE: u8 = 2;
    pub const INT16: u8 = 3;
    pub const INT32: u8 = 4;
    pub const INT64: u8 = 5;
    pub const UINT16: u8 = 6;
    pub const UINT32: u8 = 7;
    pub const UINT64: u8 = 8;
    pub const FLOAT32: u8 = 9;
    pub const FLOAT64: u8 = 10;
    pub const NUMERIC: u8 = 11;
    pub const TEXT: u8 = 12;
    pub const BYTES: u8 = 13;
    pub const DATE: u8 = 14;
    pub const TIME: u8 = 15;
    pub const TIMESTAMP: u8 = 16;
    pub const TIMESTAMPTZ: u8 = 17;
    pub const INTERVAL: u8 = 18;
    pub const JSONB: u8 = 19;
    pub const UUID: u8 = 20;
    pub const OID: u8 = 21;
    pub const TEXT_ARRAY: u8 = 22;
    pub const RANGE_EMPTY: u8 = 23;
    pub const RANGE: u8 = 24;
    pub const RECORD: u8 = 25;
    pub const LIST: u8 = 26;
    pub const MAP: u8 = 27;
}

/// A kind of scalar stored as its tag and `N` bytes, which [`RowReader::next_fixed`]
/// reads straight, without a [`DatumRef`]: the kinds a reader of many rows into columns
/// reads most.
#[derive(Debug, Clone, Copy)]
pub struct Fixed<const N: usize>(u8);

impl Fixed<2> {
    pub const INT16: Fixed<2> = Fixed(tag::INT16);
    pub const UINT16: Fixed<2> = Fixed(tag::UINT16);
}

impl Fixed<4> {
    pub const INT32: Fixed<4> = Fixed(tag::INT32);
    pub const UINT32: Fixed<4> = Fixed(tag::UINT32);
    pub const FLOAT32: Fixed<4> = Fixed(tag::FLOAT32);
    pub const DATE: Fixed<4> = Fixed(tag::DATE);
    pub const OID: Fixed<4> = Fixed(tag::OID);
}

impl Fixed<8> {
    pub const INT64: Fixed<8> = Fixed(tag::INT64);
    pub const UINT64: Fixed<8> = Fixed(tag::UINT64);
    pub const FLOAT64: Fixed<8> = Fixed(tag::FLOAT64);
    pub const TIME: Fixed<8> = Fixed(tag::TIME);
    pub const TIMESTAMP: Fixed<8> = Fixed(tag::TIMESTAMP);
    pub const TIMESTAMPTZ: Fixed<8> = Fixed(tag::TIMESTAMPTZ);
}

/// A kind of scalar stored as its tag, a length and that many bytes, which
/// [`RowReader::next_counted`] reads straight.
#[derive(Debug, Clone, Copy)]
pub struct Counted(u8);

impl Counted {
    /// Text (and varchar, json), UTF-8.
    pub const TEXT: Counted = Counted(tag::TEXT);
    /// A numeric's text, UTF-8.
    pub const NUMERIC: Counted = Counted(tag::NUMERIC);
}

/// Why bytes could not be decoded as a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodecError(pub String);

impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "corrupt row encoding: {}", self.0)
    }
}

impl std::error::Error for CodecError {}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn canonical_f32(v: f32) -> u32 {
    if v.is_nan() {
        0x7fc0_0000
    } else if v == 0.0 {
        0
    } else {
        v.to_bits()
    }
}

fn canonical_f64(v: f64) -> u64 {
    if v.is_nan() {
        0x7ff8_0000_0000_0000
    } else if v == 0.0 {
        0
    } else {
        v.to_bits()
    }
}

/// Appends the encoding of `row` to `out`.
pub fn encode_row(row: &Row, out: &mut Vec<u8>) {
    out.push(VERSION);
    put_varint(out, row.len() as u64);
    for datum in row {
        encode_datum(datum, out);
    }
}

/// Appends the encoding of one datum.
pub fn encode_datum(datum: &Datum, out: &mut Vec<u8>) {
    match datum {
        Datum::Null => out.push(tag::NULL),
        Datum::Bool(false) => out.push(tag::FALSE),
        Datum::Bool(true) => out.push(tag::TRUE),
        Datum::Int16(v) => {
            out.push(tag::INT16);
            out.extend_from_slice(&v.to_le_bytes());
        }
        Datum::Int32(v) => {
            out.push(tag::INT32);
            out.extend_from_slice(&v.to_le_bytes());
        }
        Datum::Int64(v) => {
            out.push(tag::INT64);
            out.extend_from_slice(&v.to_le_bytes());
        }
        Datum::UInt16(v) => {
            out.push(tag::UINT16);
            out.extend_from_slice(&v.to_le_bytes());
        }
        Datum::UInt32(v) => {
            out.push(tag::UINT32);
            out.extend_from_slice(&v.to_le_bytes());
        }
        Datum::UInt64(v) => {
            out.push(tag::UINT64);
            out.extend_from_slice(&v.to_le_bytes());
        }
        Datum::Float32(v) => {
            out.push(tag::FLOAT32);
            out.extend_from_slice(&canonical_f32(*v).to_le_bytes());
        }
        Datum::Float64(v) => {
            out.push(tag::FLOAT64);
            out.extend_from_slice(&canonical_f64(*v).to_le_bytes());
        }
        Datum::Numeric(s) => {
            out.push(tag::NUMERIC);
            put_bytes(out, s.as_bytes());
        }
        Datum::Text(s) => {
            out.push(tag::TEXT);
            put_bytes(out, s.as_bytes());
        }
        Datum::Bytes(b) => {
            out.push(tag::BYTES);
            put_bytes(out, b);
        }
        Datum::Date(v) => {
            out.push(tag::DATE);
            out.extend_from_slice(&v.to_le_bytes());
        }
        Datum::Time(v) => {
            out.push(tag::TIME);
            out.extend_from_slice(&v.to_le_bytes());
        }
        Datum::Timestamp(v) => {
            out.push(tag::TIMESTAMP);
            out.extend_from_slice(&v.to_le_bytes());
        }
        Datum::TimestampTz(v) => {
            out.push(tag::TIMESTAMPTZ);
            out.extend_from_slice(&v.to_le_bytes());
        }
        Datum::Interval {
            months,
            days,
            micros,
        } => {
            out.push(tag::INTERVAL);
            out.extend_from_slice(&months.to_le_bytes());
            out.extend_from_slice(&days.to_le_bytes());
            out.extend_from_slice(&micros.to_le_bytes());
        }
        Datum::Jsonb(s) => {
            out.push(tag::JSONB);
            put_bytes(out, s.as_bytes());
        }
        Datum::Uuid(u) => {
            out.push(tag::UUID);
            out.extend_from_slice(u);
        }
        Datum::Oid(v) => {
            out.push(tag::OID);
            out.extend_from_slice(&v.to_le_bytes());
        }
        Datum::TextArray(items) => {
            out.push(tag::TEXT_ARRAY);
            put_varint(out, items.len() as u64);
            for item in items {
                match item {
                    None => out.push(0),
                    Some(s) => {
                        out.push(1);
                        put_bytes(out, s.as_bytes());
                    }
                }
            }
        }
        Datum::Range(None) => out.push(tag::RANGE_EMPTY),
        Datum::Range(Some(bounds)) => {
            out.push(tag::RANGE);
            let flags = u8::from(bounds.lower.is_some())
                | u8::from(bounds.upper.is_some()) << 1
                | u8::from(bounds.lower_inclusive) << 2
                | u8::from(bounds.upper_inclusive) << 3;
            out.push(flags);
            if let Some(lower) = &bounds.lower {
                encode_datum(lower, out);
            }
            if let Some(upper) = &bounds.upper {
                encode_datum(upper, out);
            }
        }
        Datum::Record(fields) => {
            out.push(tag::RECORD);
            put_varint(out, fields.len() as u64);
            for field in fields {
                encode_datum(field, out);
            }
        }
        Datum::List(items) => {
            out.push(tag::LIST);
            put_varint(out, items.len() as u64);
            for item in items {
                encode_datum(item, out);
            }
        }
        Datum::Map(entries) => {
            out.push(tag::MAP);
            put_varint(out, entries.len() as u64);
            for (key, value) in entries {
                put_bytes(out, key.as_bytes());
                encode_datum(value, out);
            }
        }
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

// The readers below are marked `#[inline]`: the sink and the query path read stored rows
// from other crates, and without it every datum was two calls or more (a tenth of a
// large snapshot's CPU).
impl<'a> Reader<'a> {
    #[cold]
    #[inline(never)]
    fn error(&self, what: &str) -> CodecError {
        CodecError(format!("{what} at byte {}", self.at))
    }

    #[inline]
    fn take(&mut self, n: usize) -> Result<&'a [u8], CodecError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|end| *end <= self.bytes.len())
            .ok_or_else(|| self.error("unexpected end of input"))?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }

    #[inline]
    fn array<const N: usize>(&mut self) -> Result<[u8; N], CodecError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    #[inline]
    fn byte(&mut self) -> Result<u8, CodecError> {
        Ok(self.take(1)?[0])
    }

    #[inline]
    fn varint(&mut self) -> Result<u64, CodecError> {
        // Most lengths and counts are one byte.
        if let Some(&byte) = self.bytes.get(self.at)
            && byte < 0x80
        {
            self.at += 1;
            return Ok(u64::from(byte));
        }
        self.long_varint()
    }

    fn long_varint(&mut self) -> Result<u64, CodecError> {
        let mut value: u64 = 0;
        for shift in (0..64).step_by(7) {
            let byte = self.byte()?;
            let bits = u64::from(byte & 0x7f);
            if shift == 63 && bits > 1 {
                return Err(self.error("varint overflow"));
            }
            value |= bits << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(self.error("varint overflow"))
    }

    /// A count of items, each at least one byte long: bounded by the rest
    /// of the input, so a corrupt count cannot make us allocate wildly.
    #[inline]
    fn count(&mut self) -> Result<usize, CodecError> {
        let n = self.varint()?;
        let remaining = (self.bytes.len() - self.at) as u64;
        if n > remaining {
            return Err(self.error("count exceeds input"));
        }
        Ok(n as usize)
    }

    #[inline]
    fn bytes(&mut self) -> Result<&'a [u8], CodecError> {
        let n = self.varint()?;
        let n = usize::try_from(n).map_err(|_| self.error("length overflow"))?;
        self.take(n)
    }

    fn string(&mut self) -> Result<String, CodecError> {
        self.str().map(str::to_string)
    }

    #[inline]
    fn str(&mut self) -> Result<&'a str, CodecError> {
        let bytes = self.bytes()?;
        std::str::from_utf8(bytes).map_err(|_| self.error("invalid utf-8"))
    }

    fn datum(&mut self, depth: usize) -> Result<Datum, CodecError> {
        self.datum_ref(depth).map(DatumRef::into_owned)
    }

    /// The next datum, read in place: text and bytes borrowed from the input.
    // Always inlined: returned through memory, the datum's parts were read back at other
    // offsets than they were written at, and each read stalled the processor.
    #[inline(always)]
    fn datum_ref(&mut self, depth: usize) -> Result<DatumRef<'a>, CodecError> {
        if depth > MAX_DEPTH {
            return Err(self.error("nesting too deep"));
        }
        let t = self.byte()?;
        Ok(match t {
            tag::NULL => DatumRef::Null,
            tag::FALSE => DatumRef::Bool(false),
            tag::TRUE => DatumRef::Bool(true),
            tag::INT16 => DatumRef::Int16(i16::from_le_bytes(self.array()?)),
            tag::INT32 => DatumRef::Int32(i32::from_le_bytes(self.array()?)),
            tag::INT64 => DatumRef::Int64(i64::from_le_bytes(self.array()?)),
            tag::UINT16 => DatumRef::UInt16(u16::from_le_bytes(self.array()?)),
            tag::UINT32 => DatumRef::UInt32(u32::from_le_bytes(self.array()?)),
            tag::UINT64 => DatumRef::UInt64(u64::from_le_bytes(self.array()?)),
            tag::FLOAT32 => DatumRef::Float32(f32::from_bits(u32::from_le_bytes(self.array()?))),
            tag::FLOAT64 => DatumRef::Float64(f64::from_bits(u64::from_le_bytes(self.array()?))),
            tag::NUMERIC => DatumRef::Numeric(self.str()?),
            tag::TEXT => DatumRef::Text(self.str()?),
            tag::BYTES => DatumRef::Bytes(self.bytes()?),
            tag::DATE => DatumRef::Date(i32::from_le_bytes(self.array()?)),
            tag::TIME => DatumRef::Time(i64::from_le_bytes(self.array()?)),
            tag::TIMESTAMP => DatumRef::Timestamp(i64::from_le_bytes(self.array()?)),
            tag::TIMESTAMPTZ => DatumRef::TimestampTz(i64::from_le_bytes(self.array()?)),
            tag::JSONB => DatumRef::Jsonb(self.str()?),
            tag::UUID => DatumRef::Uuid(self.array()?),
            tag::OID => DatumRef::Oid(u32::from_le_bytes(self.array()?)),
            _ => DatumRef::Composite(self.composite(t, depth)?),
        })
    }

    /// Passes over the next datum: fixed-size values and byte strings by their length,
    /// a value made of parts by decoding it.
    #[inline]
    fn skip_datum(&mut self) -> Result<(), CodecError> {
        let Some(&t) = self.bytes.get(self.at) else {
            return Err(self.error("unexpected end of input"));
        };
        let fixed = match t {
            tag::NULL | tag::FALSE | tag::TRUE => 0,
            tag::INT16 | tag::UINT16 => 2,
            tag::INT32 | tag::UINT32 | tag::FLOAT32 | tag::DATE | tag::OID => 4,
            tag::INT64
            | tag::UINT64
            | tag::FLOAT64
            | tag::TIME
            | tag::TIMESTAMP
            | tag::TIMESTAMPTZ => 8,
            tag::UUID => 16,
            tag::NUMERIC | tag::TEXT | tag::BYTES | tag::JSONB => {
                self.at += 1;
                return self.bytes().map(|_| ());
            }
            _ => return self.datum_ref(0).map(|_| ()),
        };
        self.at += 1;
        self.take(fixed).map(|_| ())
    }

    /// A datum of tag `t` that is made of parts (or an interval, a value of three),
    /// decoded whole.
    #[inline(never)]
    fn composite(&mut self, t: u8, depth: usize) -> Result<Datum, CodecError> {
        Ok(match t {
            tag::INTERVAL => Datum::Interval {
                months: i32::from_le_bytes(self.array()?),
                days: i32::from_le_bytes(self.array()?),
                micros: i64::from_le_bytes(self.array()?),
            },
            tag::TEXT_ARRAY => {
                let n = self.count()?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(match self.byte()? {
                        0 => None,
                        1 => Some(self.string()?),
                        _ => return Err(self.error("bad array element marker")),
                    });
                }
                Datum::TextArray(items)
            }
            tag::RANGE_EMPTY => Datum::Range(None),
            tag::RANGE => {
                let flags = self.byte()?;
                if flags & !0x0f != 0 {
                    return Err(self.error("bad range flags"));
                }
                let lower = if flags & 1 != 0 {
                    Some(self.datum(depth + 1)?)
                } else {
                    None
                };
                let upper = if flags & 2 != 0 {
                    Some(self.datum(depth + 1)?)
                } else {
                    None
                };
                Datum::Range(Some(Box::new(RangeBounds {
                    lower,
                    upper,
                    lower_inclusive: flags & 4 != 0,
                    upper_inclusive: flags & 8 != 0,
                })))
            }
            tag::RECORD | tag::LIST => {
                let n = self.count()?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.datum(depth + 1)?);
                }
                if t == tag::RECORD {
                    Datum::Record(items)
                } else {
                    Datum::List(items)
                }
            }
            tag::MAP => {
                let n = self.count()?;
                let mut entries = Vec::with_capacity(n);
                for _ in 0..n {
                    let key = self.string()?;
                    let value = self.datum(depth + 1)?;
                    entries.push((key, value));
                }
                Datum::Map(entries)
            }
            other => return Err(self.error(&format!("unknown tag {other}"))),
        })
    }
}

/// A datum read in place from a row's encoding ([`read_row`]): scalars by value, text
/// and bytes borrowed from the encoding rather than copied out; values made of parts
/// decoded whole. What converts stored rows straight to another form (Arrow columns)
/// without a `Row` and its allocations in between.
#[derive(Debug, Clone, PartialEq)]
pub enum DatumRef<'a> {
    Null,
    Bool(bool),
    Int16(i16),
    Int32(i32),
    Int64(i64),
    UInt16(u16),
    UInt32(u32),
    UInt64(u64),
    Float32(f32),
    Float64(f64),
    Numeric(&'a str),
    Text(&'a str),
    Bytes(&'a [u8]),
    Date(i32),
    Time(i64),
    Timestamp(i64),
    TimestampTz(i64),
    Jsonb(&'a str),
    Uuid([u8; 16]),
    Oid(u32),
    /// An interval, range, record, list, map or text array.
    Composite(Datum),
}

impl DatumRef<'_> {
    pub fn into_owned(self) -> Datum {
        match self {
            DatumRef::Null => Datum::Null,
            DatumRef::Bool(v) => Datum::Bool(v),
            DatumRef::Int16(v) => Datum::Int16(v),
            DatumRef::Int32(v) => Datum::Int32(v),
            DatumRef::Int64(v) => Datum::Int64(v),
            DatumRef::UInt16(v) => Datum::UInt16(v),
            DatumRef::UInt32(v) => Datum::UInt32(v),
            DatumRef::UInt64(v) => Datum::UInt64(v),
            DatumRef::Float32(v) => Datum::Float32(v),
            DatumRef::Float64(v) => Datum::Float64(v),
            DatumRef::Numeric(v) => Datum::Numeric(v.to_string()),
            DatumRef::Text(v) => Datum::Text(v.to_string()),
            DatumRef::Bytes(v) => Datum::Bytes(v.to_vec()),
            DatumRef::Date(v) => Datum::Date(v),
            DatumRef::Time(v) => Datum::Time(v),
            DatumRef::Timestamp(v) => Datum::Timestamp(v),
            DatumRef::TimestampTz(v) => Datum::TimestampTz(v),
            DatumRef::Jsonb(v) => Datum::Jsonb(v.to_string()),
            DatumRef::Uuid(v) => Datum::Uuid(v),
            DatumRef::Oid(v) => Datum::Oid(v),
            DatumRef::Composite(datum) => datum,
        }
    }
}

/// Reads an encoded row's datums one at a time, in place ([`read_row`]).
pub struct RowReader<'a> {
    reader: Reader<'a>,
    /// Datums not read yet.
    left: usize,
}

/// A reader of the row encoded in `bytes` (by [`encode_row`]).
#[inline]
pub fn read_row(bytes: &[u8]) -> Result<RowReader<'_>, CodecError> {
    let mut reader = Reader { bytes, at: 0 };
    let version = reader.byte()?;
    if version != VERSION {
        return Err(reader.error(&format!("unknown codec version {version}")));
    }
    let left = reader.count()?;
    Ok(RowReader { reader, left })
}

impl<'a> RowReader<'a> {
    /// How many datums the row has left to read.
    pub fn left(&self) -> usize {
        self.left
    }

    /// The next datum; `None` past the row's last.
    #[inline(always)]
    pub fn next_datum(&mut self) -> Option<Result<DatumRef<'a>, CodecError>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        Some(self.reader.datum_ref(0))
    }

    /// Whether the next datum is of the kind `tag`; when it is, it counts as read and
    /// the reader stands at its value.
    #[inline(always)]
    fn take_tag(&mut self, tag: u8) -> bool {
        if self.left == 0 || self.reader.bytes.get(self.reader.at) != Some(&tag) {
            return false;
        }
        self.left -= 1;
        self.reader.at += 1;
        true
    }

    /// The next datum's value when it is of the kind `kind`, read without a
    /// [`DatumRef`]: one comparison of its tag instead of a match over every kind.
    /// `Ok(None)`, nothing read, when it is of another kind (NULL too) or the row ended.
    #[inline(always)]
    pub fn next_fixed<const N: usize>(
        &mut self,
        kind: Fixed<N>,
    ) -> Result<Option<[u8; N]>, CodecError> {
        if !self.take_tag(kind.0) {
            return Ok(None);
        }
        self.reader.array().map(Some)
    }

    /// The next datum's bytes when it is of the kind `kind`, not checked for UTF-8: a
    /// reader that gathers many texts checks them at once, which is cheaper than one by
    /// one. `Ok(None)`, nothing read, when it is of another kind or the row ended.
    #[inline(always)]
    pub fn next_counted(&mut self, kind: Counted) -> Result<Option<&'a [u8]>, CodecError> {
        if !self.take_tag(kind.0) {
            return Ok(None);
        }
        self.reader.bytes().map(Some)
    }

    /// Passes over the next datum without reading it (text is not checked for UTF-8,
    /// a value made of parts is decoded as `next_datum` would); `None` past the row's
    /// last.
    #[inline]
    pub fn skip_datum(&mut self) -> Option<Result<(), CodecError>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        Some(self.reader.skip_datum())
    }

    /// Checks that the row ended where its input does, every datum read.
    #[inline]
    pub fn finish(self) -> Result<(), CodecError> {
        if self.left != 0 || self.reader.at != self.reader.bytes.len() {
            return Err(self.reader.error("trailing bytes"));
        }
        Ok(())
    }
}

/// Decodes a row encoded by [`encode_row`]; the whole input must be one row.
pub fn decode_row(bytes: &[u8]) -> Result<Row, CodecError> {
    let mut reader = read_row(bytes)?;
    let mut row = Vec::with_capacity(reader.left());
    while let Some(datum) = reader.next_datum() {
        row.push(datum?.into_owned());
    }
    reader.finish()?;
    Ok(row)
}

/// Encodes a row into a new buffer.
pub fn row_to_bytes(row: &Row) -> Vec<u8> {
    let mut out = Vec::new();
    encode_row(row, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Straight reads take a datum of their own kind, leave any other datum to be read
    /// as one, and stop at the row's end.
    #[test]
    fn straight_reads_take_only_their_own_kind() {
        let row = vec![
            Datum::Text("é".into()),
            Datum::Null,
            Datum::Int64(-7),
            Datum::Float64(1.5),
            Datum::Numeric("12.50".into()),
            Datum::TimestampTz(9),
            Datum::Text(String::new()),
        ];
        let mut bytes = Vec::new();
        encode_row(&row, &mut bytes);
        let mut reader = read_row(&bytes).expect("row");
        assert_eq!(reader.next_counted(Counted::TEXT), Ok(Some("é".as_bytes())));
        // NULL is no kind's value: read as a datum.
        assert_eq!(reader.next_fixed(Fixed::INT64), Ok(None));
        assert_eq!(reader.next_counted(Counted::TEXT), Ok(None));
        assert_eq!(reader.next_datum(), Some(Ok(DatumRef::Null)));
        // Another kind's reader leaves the datum where it is.
        assert_eq!(reader.next_fixed(Fixed::TIMESTAMPTZ), Ok(None));
        assert_eq!(
            reader.next_fixed(Fixed::INT64),
            Ok(Some((-7i64).to_le_bytes()))
        );
        assert_eq!(
            reader.next_fixed(Fixed::FLOAT64),
            Ok(Some(1.5f64.to_bits().to_le_bytes()))
        );
        assert_eq!(
            reader.next_counted(Counted::NUMERIC),
            Ok(Some(&b"12.50"[..]))
        );
        let read = reader.next_datum().expect("a datum").expect("decodes");
        assert_eq!(read.into_owned(), Datum::TimestampTz(9));
        assert_eq!(reader.next_counted(Counted::TEXT), Ok(Some(&b""[..])));
        // Past the row's end nothing is read.
        assert_eq!(reader.next_counted(Counted::TEXT), Ok(None));
        assert_eq!(reader.next_fixed(Fixed::INT64), Ok(None));
        reader.finish().expect("the row ends where its datums do");
        // A length or a value past the end is an error, not a read beyond the input.
        let mut reader = read_row(&[VERSION, 1, tag::TEXT, 9, b'a']).expect("row");
        assert!(reader.next_counted(Counted::TEXT).is_err());
        let mut reader = read_row(&[VERSION, 1, tag::INT64, 1, 2]).expect("row");
        assert!(reader.next_fixed(Fixed::INT64).is_err());
    }

    /// Skipping any datums of a row and reading the others reads what reading all gives,
    /// and ends where the row does.
    #[test]
    fn skipped_datums_leave_the_others_as_read() {
        for row in sample_rows() {
            let mut bytes = Vec::new();
            encode_row(&row, &mut bytes);
            for keep_every in 1..=3 {
                let mut reader = read_row(&bytes).expect("row");
                for (index, datum) in row.iter().enumerate() {
                    if index % keep_every == 0 {
                        let read = reader.next_datum().expect("a datum").expect("decodes");
                        assert_eq!(&read.into_owned(), datum);
                    } else {
                        reader.skip_datum().expect("a datum").expect("skips");
                    }
                }
                assert!(reader.skip_datum().is_none());
                reader.finish().expect("the row ends where its datums do");
            }
        }
        // A length past the end is an error, not a read beyond the input.
        let mut reader = read_row(&[VERSION, 1, tag::TEXT, 9, b'a']).expect("row");
        assert!(reader.skip_datum().expect("a datum").is_err());
    }

    fn sample_rows() -> Vec<Row> {
        vec![
            vec![],
            vec![Datum::Null],
            vec![
                Datum::Bool(true),
                Datum::Bool(false),
                Datum::Int16(i16::MIN),
                Datum::Int32(i32::MAX),
                Datum::Int64(-1),
                Datum::UInt16(u16::MAX),
                Datum::UInt32(7),
                Datum::UInt64(u64::MAX),
                Datum::Float32(1.5),
                Datum::Float64(-2.25),
                Datum::Numeric("12.50".into()),
                Datum::Text("héllo 😀".into()),
                Datum::Bytes(vec![0, 255, 10]),
                Datum::Date(-5),
                Datum::Time(86_400_000_000),
                Datum::Timestamp(i64::MIN),
                Datum::TimestampTz(i64::MAX),
                Datum::Interval {
                    months: -1,
                    days: 2,
                    micros: -3,
                },
                Datum::Jsonb("{\"a\":1}".into()),
                Datum::Uuid([7; 16]),
                Datum::Oid(26),
                Datum::TextArray(vec![Some("a".into()), None]),
            ],
            vec![
                Datum::Range(None),
                Datum::Range(Some(Box::new(RangeBounds {
                    lower: Some(Datum::Int32(1)),
                    upper: None,
                    lower_inclusive: true,
                    upper_inclusive: false,
                }))),
                Datum::Record(vec![
                    Datum::Null,
                    Datum::List(vec![Datum::Int32(1), Datum::Null]),
                ]),
                Datum::List(vec![]),
                Datum::Map(vec![
                    ("a".into(), Datum::Null),
                    (
                        "b".into(),
                        Datum::Map(vec![("c".into(), Datum::Text(String::new()))]),
                    ),
                ]),
            ],
        ]
    }

    #[test]
    fn rows_round_trip() {
        for row in sample_rows() {
            let bytes = row_to_bytes(&row);
            assert_eq!(decode_row(&bytes).unwrap(), row);
            // Deterministic: encoding again gives the same bytes.
            assert_eq!(row_to_bytes(&decode_row(&bytes).unwrap()), bytes);
        }
    }

    #[test]
    fn rows_read_in_place_are_the_decoded_rows() {
        for row in sample_rows() {
            let bytes = row_to_bytes(&row);
            let mut reader = read_row(&bytes).unwrap();
            let mut read = Vec::new();
            while let Some(datum) = reader.next_datum() {
                read.push(datum.unwrap().into_owned());
            }
            reader.finish().unwrap();
            assert_eq!(read, row);
        }
        // Text is borrowed from the encoding, not copied.
        let bytes = row_to_bytes(&vec![Datum::Text("borrowed".into())]);
        let mut reader = read_row(&bytes).unwrap();
        let Some(Ok(DatumRef::Text(text))) = reader.next_datum() else {
            panic!("a text datum");
        };
        assert!(bytes.as_ptr_range().contains(&text.as_ptr()));
        // A row read only in part is not finished.
        let bytes = row_to_bytes(&vec![Datum::Int64(1), Datum::Int64(2)]);
        let mut reader = read_row(&bytes).unwrap();
        reader.next_datum();
        assert!(reader.finish().is_err());
    }

    #[test]
    fn equal_floats_encode_equally() {
        assert_eq!(
            row_to_bytes(&vec![Datum::Float64(0.0)]),
            row_to_bytes(&vec![Datum::Float64(-0.0)])
        );
        assert_eq!(
            row_to_bytes(&vec![Datum::Float32(f32::NAN)]),
            row_to_bytes(&vec![Datum::Float32(-f32::NAN)])
        );
        assert_ne!(
            row_to_bytes(&vec![Datum::Int32(1)]),
            row_to_bytes(&vec![Datum::Int64(1)])
        );
    }

    #[test]
    fn corrupt_bytes_are_errors_not_panics() {
        assert!(decode_row(&[]).is_err());
        assert!(decode_row(&[2, 0]).is_err());
        assert!(decode_row(&[1, 1, 99]).is_err());
        assert!(
            decode_row(&[
                1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f
            ])
            .is_err()
        );
        assert!(decode_row(&[1, 1, tag::TEXT, 2, 0xff, 0xfe]).is_err());
        assert!(decode_row(&[1, 1, tag::NULL, 0]).is_err());
        // Deep nesting is refused.
        let mut deep = vec![1, 1];
        for _ in 0..1000 {
            deep.extend([tag::LIST, 1]);
        }
        deep.push(tag::NULL);
        assert!(decode_row(&deep).is_err());
        // Every truncation and every single-byte corruption of valid rows.
        for row in sample_rows() {
            let bytes = row_to_bytes(&row);
            for end in 0..bytes.len() {
                assert!(decode_row(&bytes[..end]).is_err());
            }
            for i in 0..bytes.len() {
                for flip in [0x01u8, 0x80, 0xff] {
                    let mut corrupt = bytes.clone();
                    corrupt[i] ^= flip;
                    let _ = decode_row(&corrupt);
                }
            }
        }
    }
}
