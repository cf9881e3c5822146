//! Values' text forms into floe datums, for both paths rows take: COPY's text format
//! (the initial snapshot) and pgoutput's tuples (the stream). Both use one decoder with
//! the same session settings, so a row decodes to the same datums either way and an
//! UPDATE's old row retracts exactly the row stored before.

use std::borrow::Cow;

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
        _ => None,
    };
    match quick {
        Some(datum) => Ok(datum),
        None => parse_datum(text, ty).map_err(|e| e.to_string()),
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
    fn unescapes_octal_and_hex() {
        assert_eq!(unescape("\\101\\x42\\q"), "ABq");
        assert_eq!(unescape("plain"), "plain");
        assert_eq!(unescape("end\\"), "end\\");
    }
}
