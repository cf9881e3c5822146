//! Values' text forms into floe datums, for both paths rows take: COPY's text format
//! (the initial snapshot) and pgoutput's tuples (the stream). Both use one decoder with
//! the same session settings, so a row decodes to the same datums either way and an
//! UPDATE's old row retracts exactly the row stored before.

use std::borrow::Cow;

use floe_repr::strconv::{NUMERIC_MAX_PRECISION, civil_from_days, days_from_civil};
use floe_repr::{Datum, Row, SqlScalarType, parse_datum};

use crate::discovery::UpstreamTable;
use crate::error::PgError;

/// One value's text form into a datum of `ty`. Common types take a short path; every
/// other type, and any text the short path refuses, goes through floe's own parser
/// (which also words the error).
pub(crate) fn decode_value(text: &str, ty: &SqlScalarType) -> Result<Datum, String> {
    let quick = match ty {
        SqlScalarType::Int16 => text.parse().ok().map(Datum::Int16),
        SqlScalarType::Int32 => text.parse().ok().map(Datum::Int32),
        SqlScalarType::Int64 => text.parse().ok().map(Datum::Int64),
        SqlScalarType::Bool => match text {
            "t" => Some(Datum::Bool(true)),
            "f" => Some(Datum::Bool(false)),
            _ => None,
        },
        SqlScalarType::Text => Some(Datum::Text(text.to_string())),
        SqlScalarType::Timestamp => iso_timestamp(text, false).map(Datum::Timestamp),
        SqlScalarType::TimestampTz => iso_timestamp(text, true).map(Datum::TimestampTz),
        SqlScalarType::Date => iso_date(text.as_bytes()).map(|days| Datum::Date(days as i32)),
        SqlScalarType::Numeric {
            precision,
            max_scale,
        } => canonical_numeric(text, *precision, *max_scale).map(Datum::Numeric),
        _ => None,
    };
    let datum = match quick {
        Some(datum) => datum,
        None => parse_datum(text, ty).map_err(|e| e.to_string())?,
    };
    // A value the subsource's column cannot store exactly (a numeric of more digits than
    // a column without a scale keeps) stops the source with its cause, rather than
    // leaving a table no read can convert.
    floe_repr::strconv::check_stored(&datum, ty).map_err(|e| match &e.detail {
        Some(detail) => format!("{e} ({detail})"),
        None => e.to_string(),
    })?;
    Ok(datum)
}

/// `YYYY-MM-DD` (4-digit years, AD) as days since 1970-01-01: PostgreSQL's ISO output of
/// most dates. Anything else (`BC`, 5-digit years, infinity) takes the general parser.
fn iso_date(text: &[u8]) -> Option<i64> {
    if text.len() != 10 || text[4] != b'-' || text[7] != b'-' {
        return None;
    }
    let year = digits(&text[0..4])?;
    let month = digits(&text[5..7])?;
    let day = digits(&text[8..10])?;
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || year == 0 {
        return None;
    }
    let days = days_from_civil(i64::from(year), month, day);
    // A day past the month's end (never printed by PostgreSQL) is left to the parser.
    (civil_from_days(days) == (i64::from(year), month, day)).then_some(days)
}

/// `YYYY-MM-DD HH:MM:SS[.ffffff]` (with `+00` for timestamptz: the sessions run in UTC)
/// as microseconds since the epoch.
fn iso_timestamp(text: &str, with_zone: bool) -> Option<i64> {
    let text = text.as_bytes();
    let text = if with_zone {
        text.strip_suffix(b"+00")?
    } else {
        text
    };
    if text.len() < 19 || text[10] != b' ' || text[13] != b':' || text[16] != b':' {
        return None;
    }
    let days = iso_date(&text[..10])?;
    let (hour, minute, second) = (
        digits(&text[11..13])?,
        digits(&text[14..16])?,
        digits(&text[17..19])?,
    );
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let fraction = match &text[19..] {
        [] => 0,
        [b'.', rest @ ..] if (1..=6).contains(&rest.len()) => {
            digits(rest)? as i64 * 10i64.pow(6 - rest.len() as u32)
        }
        _ => return None,
    };
    let seconds = i64::from(hour * 3600 + minute * 60 + second);
    Some(days * 86_400_000_000 + seconds * 1_000_000 + fraction)
}

fn digits(text: &[u8]) -> Option<u32> {
    text.iter().try_fold(0u32, |value, byte| {
        byte.is_ascii_digit()
            .then(|| value * 10 + u32::from(byte - b'0'))
    })
}

/// A numeric as PostgreSQL prints it, when floe would store exactly that text (or, for a
/// bare numeric, that text without trailing fraction zeros, as Materialize prints it):
/// `-?digits[.digits]` within the type's precision and scale.
fn canonical_numeric(text: &str, precision: Option<u8>, max_scale: Option<u8>) -> Option<String> {
    let unsigned = text.strip_prefix('-').unwrap_or(text);
    let (integer, fraction) = unsigned.split_once('.').unwrap_or((unsigned, ""));
    let plain = |part: &str| part.bytes().all(|b| b.is_ascii_digit());
    if integer.is_empty()
        || !plain(integer)
        || !plain(fraction)
        || unsigned.contains('.') && fraction.is_empty()
    {
        return None;
    }
    // PostgreSQL prints no leading zeros (but "0") and no negative zero.
    let integer_digits = if integer == "0" { 0 } else { integer.len() };
    if integer.len() > 1 && integer.starts_with('0') {
        return None;
    }
    match (precision, max_scale) {
        (Some(p), Some(s)) => (fraction.len() == usize::from(s)
            && integer_digits <= usize::from(p).saturating_sub(usize::from(s)))
        .then(|| text.to_string()),
        // An unconstrained numeric keeps the scale it comes with (`1.500` stays
        // `1.500`), as the general parser keeps it: PostgreSQL's display scale.
        (None, None) => {
            let significant = fraction.trim_end_matches('0');
            if integer_digits > NUMERIC_MAX_PRECISION || significant.len() > NUMERIC_MAX_PRECISION {
                return None;
            }
            let sign = if text.starts_with('-') && (integer_digits > 0 || !significant.is_empty()) {
                "-"
            } else {
                ""
            };
            Some(match fraction {
                "" => format!("{sign}{integer}"),
                fraction => format!("{sign}{integer}.{fraction}"),
            })
        }
        _ => None,
    }
}

/// The error of a value that cannot be decoded: it stops the table's subsource.
pub(crate) fn decode_error(table: &UpstreamTable, column: usize, why: &str) -> PgError {
    let name = table
        .columns
        .get(column)
        .map(|c| c.name.as_str())
        .unwrap_or("?");
    PgError::definite(format!(
        "failed to decode a value of column {}.{name}: {why}",
        table.qualified_name()
    ))
    .with_hint("List the column in TEXT COLUMNS to ingest its values as text.")
}

/// Decodes COPY ... TO STDOUT (text format) rows of one table as the bytes arrive in
/// chunks of any size.
pub(crate) struct CopyDecoder<'a> {
    table: &'a UpstreamTable,
    /// The start of a line whose end has not arrived yet.
    partial: Vec<u8>,
}

impl<'a> CopyDecoder<'a> {
    pub fn new(table: &'a UpstreamTable) -> CopyDecoder<'a> {
        CopyDecoder {
            table,
            partial: Vec::new(),
        }
    }

    /// Decodes every complete line of `chunk` (with what was left over before) into
    /// `rows`.
    pub fn feed(&mut self, chunk: &[u8], rows: &mut Vec<Row>) -> Result<(), PgError> {
        let mut rest = chunk;
        if !self.partial.is_empty() {
            let Some(end) = rest.iter().position(|b| *b == b'\n') else {
                self.partial.extend_from_slice(rest);
                return Ok(());
            };
            let mut line = std::mem::take(&mut self.partial);
            line.extend_from_slice(&rest[..end]);
            rows.push(self.decode_line(&line)?);
            rest = &rest[end + 1..];
        }
        while let Some(end) = rest.iter().position(|b| *b == b'\n') {
            rows.push(self.decode_line(&rest[..end])?);
            rest = &rest[end + 1..];
        }
        self.partial.extend_from_slice(rest);
        Ok(())
    }

    /// Checks that the data ended with a whole line.
    pub fn finish(self) -> Result<(), PgError> {
        if self.partial.is_empty() {
            Ok(())
        } else {
            Err(PgError::protocol("COPY data ended in the middle of a row"))
        }
    }

    fn decode_line(&self, line: &[u8]) -> Result<Row, PgError> {
        let line = std::str::from_utf8(line)
            .map_err(|_| PgError::protocol("COPY data is not valid UTF-8"))?;
        let columns = &self.table.columns;
        let mut row = Vec::with_capacity(columns.len());
        for (index, field) in line.split('\t').enumerate() {
            let column = columns.get(index).ok_or_else(|| arity_error(self.table))?;
            if field == "\\N" {
                row.push(Datum::Null);
                continue;
            }
            let text = unescape(field);
            let datum = decode_value(&text, &column.scalar_type)
                .map_err(|why| decode_error(self.table, index, &why))?;
            row.push(datum);
        }
        if row.len() != columns.len() {
            return Err(arity_error(self.table));
        }
        Ok(row)
    }
}

fn arity_error(table: &UpstreamTable) -> PgError {
    PgError::protocol(format!(
        "COPY of {} returned rows of another width than its {} columns",
        table.qualified_name(),
        table.columns.len()
    ))
}

/// COPY's text escapes: `\b \f \n \r \t \v \\`, octal `\ooo`, hex `\xhh`; any other
/// escaped character stands for itself.
fn unescape(field: &str) -> Cow<'_, str> {
    if !field.contains('\\') {
        return Cow::Borrowed(field);
    }
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let byte = bytes[i];
        i += 1;
        if byte != b'\\' || i >= bytes.len() {
            out.push(byte);
            continue;
        }
        let escaped = bytes[i];
        i += 1;
        match escaped {
            b'b' => out.push(0x08),
            b'f' => out.push(0x0C),
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b't' => out.push(b'\t'),
            b'v' => out.push(0x0B),
            b'0'..=b'7' => {
                let mut value = u32::from(escaped - b'0');
                for _ in 0..2 {
                    match bytes.get(i) {
                        Some(d @ b'0'..=b'7') => {
                            value = value * 8 + u32::from(d - b'0');
                            i += 1;
                        }
                        _ => break,
                    }
                }
                out.push(value as u8);
            }
            b'x' => {
                let mut value = 0u32;
                let mut digits = 0;
                while digits < 2 {
                    match bytes.get(i).and_then(|d| (*d as char).to_digit(16)) {
                        Some(d) => {
                            value = value * 16 + d;
                            i += 1;
                            digits += 1;
                        }
                        None => break,
                    }
                }
                if digits == 0 {
                    out.push(b'x');
                } else {
                    out.push(value as u8);
                }
            }
            other => out.push(other),
        }
    }
    // An escape can spell bytes that are not UTF-8: keep what can be kept.
    Cow::Owned(String::from_utf8_lossy(&out).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::UpstreamColumn;

    fn table(types: &[SqlScalarType]) -> UpstreamTable {
        UpstreamTable {
            oid: 1,
            schema: "public".into(),
            name: "t".into(),
            columns: types
                .iter()
                .enumerate()
                .map(|(i, ty)| UpstreamColumn {
                    name: format!("c{i}"),
                    type_oid: 0,
                    type_modifier: -1,
                    scalar_type: ty.clone(),
                    nullable: true,
                })
                .collect(),
            primary_key: None,
        }
    }

    #[test]
    fn decodes_copy_lines_split_anywhere() {
        let t = table(&[
            SqlScalarType::Int32,
            SqlScalarType::Text,
            SqlScalarType::Bool,
        ]);
        let data = b"1\ta\\tb\\\\c\\nd\tt\n2\t\\N\tf\n";
        for split in 0..data.len() {
            let mut decoder = CopyDecoder::new(&t);
            let mut rows = Vec::new();
            decoder.feed(&data[..split], &mut rows).unwrap();
            decoder.feed(&data[split..], &mut rows).unwrap();
            decoder.finish().unwrap();
            assert_eq!(
                rows,
                vec![
                    vec![
                        Datum::Int32(1),
                        Datum::Text("a\tb\\c\nd".into()),
                        Datum::Bool(true)
                    ],
                    vec![Datum::Int32(2), Datum::Null, Datum::Bool(false)],
                ],
                "split at {split}"
            );
        }
    }

    #[test]
    fn refuses_bad_rows_with_errors() {
        let t = table(&[SqlScalarType::Int32]);
        let mut rows = Vec::new();
        let error = CopyDecoder::new(&t).feed(b"x\n", &mut rows).unwrap_err();
        assert!(error.message.contains("public.t.c0"), "{}", error.message);
        assert!(CopyDecoder::new(&t).feed(b"1\t2\n", &mut rows).is_err());
        assert!(CopyDecoder::new(&t).feed(b"\xff\n", &mut rows).is_err());
        let mut partial = CopyDecoder::new(&t);
        partial.feed(b"1", &mut rows).unwrap();
        assert!(partial.finish().is_err());
    }

    #[test]
    fn short_paths_decode_exactly_as_the_general_parser() {
        let numeric = |p: Option<u8>, s: Option<u8>| SqlScalarType::Numeric {
            precision: p,
            max_scale: s,
        };
        let cases: Vec<(&str, SqlScalarType)> = vec![
            ("2024-02-29", SqlScalarType::Date),
            ("1970-01-01", SqlScalarType::Date),
            ("0001-01-01", SqlScalarType::Date),
            ("1969-12-31", SqlScalarType::Date),
            ("9999-12-31", SqlScalarType::Date),
            ("2024-02-29 12:34:56.789012", SqlScalarType::Timestamp),
            ("1969-12-31 23:59:59.5", SqlScalarType::Timestamp),
            ("2000-01-01 00:00:00", SqlScalarType::Timestamp),
            ("1999-12-31 18:59:59.123+00", SqlScalarType::TimestampTz),
            ("1900-03-01 00:00:00+00", SqlScalarType::TimestampTz),
            ("12345678.91", numeric(Some(10), Some(2))),
            ("-0.50", numeric(Some(10), Some(2))),
            ("0.00", numeric(Some(10), Some(2))),
            ("7", numeric(Some(5), Some(0))),
            ("1.500", numeric(None, None)),
            ("-1.500", numeric(None, None)),
            ("0.000", numeric(None, None)),
            ("100", numeric(None, None)),
            ("-0.0010", numeric(None, None)),
        ];
        for (text, ty) in cases {
            let general = parse_datum(text, &ty).unwrap();
            assert_eq!(decode_value(text, &ty).unwrap(), general, "{text} as {ty}");
        }
        // Texts the short paths leave to the general parser give its answer (or error).
        for (text, ty) in [
            ("0044-03-15 BC", SqlScalarType::Date),
            ("infinity", SqlScalarType::Date),
            ("12345-01-01", SqlScalarType::Date),
            ("2024-02-30", SqlScalarType::Date),
            ("2024-01-01 00:00:00+05", SqlScalarType::TimestampTz),
            ("1.5", numeric(Some(10), Some(2))),
            ("1e5", numeric(None, None)),
        ] {
            assert_eq!(
                decode_value(text, &ty),
                parse_datum(text, &ty).map_err(|e| e.to_string()),
                "{text} as {ty}"
            );
        }
    }

    /// An upstream value the subsource's column cannot store exactly stops the source
    /// with its cause (the column's stored form, decimal(38,10), and no NaN), on both
    /// the short path and the general parser's.
    #[test]
    fn a_value_the_column_cannot_store_is_refused() {
        let numeric = |p: Option<u8>, s: Option<u8>| SqlScalarType::Numeric {
            precision: p,
            max_scale: s,
        };
        let bare = numeric(None, None);
        let error = decode_value("0.66666666666666666667", &bare).unwrap_err();
        assert!(
            error.starts_with("numeric value 0.66666666666666666667 has too many digits (")
                && error.contains("28 digits before the decimal point and 10 after it"),
            "{error}"
        );
        assert!(decode_value("1e-11", &bare).is_err());
        assert!(decode_value("1e27", &bare).is_ok());
        assert_eq!(
            decode_value("NaN", &numeric(Some(10), Some(2))).unwrap_err(),
            "cannot store numeric NaN (floe stores numeric values as exact decimals, which have no NaN.)"
        );
        let list = SqlScalarType::List {
            element: Box::new(bare.clone()),
        };
        assert!(decode_value("{1.5,0.12345678901}", &list).is_err());
        assert!(decode_value("{1.5,0.1234567890}", &list).is_ok());
    }

    #[test]
    fn unescapes_octal_and_hex() {
        assert_eq!(unescape("\\101\\x42\\q"), "ABq");
        assert_eq!(unescape("plain"), "plain");
        assert_eq!(unescape("end\\"), "end\\");
    }
}
