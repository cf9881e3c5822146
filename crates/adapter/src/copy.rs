//! `COPY ... FROM STDIN`: decoding the text and CSV formats into rows, fed
//! chunk by chunk as the client sends them. Each row is finished (defaults,
//! NOT NULL) as it arrives; the rows are written in one append when the client
//! ends the copy, so a COPY lands whole or not at all.

use std::borrow::Cow;

use floe_repr::{Datum, Row, SqlState};
use floe_sql::dml::{CopyFormat, CopyFromPlan};
use floe_storage::EncodedInserts;

use crate::error::AdapterError;

/// A COPY in progress on a session.
#[derive(Debug)]
pub struct CopyState {
    pub plan: CopyFromPlan,
    /// The values of the columns the copy does not give that have a default,
    /// evaluated once when it began, as the columns' types.
    defaults: Vec<(usize, Datum)>,
    /// Bytes of an incomplete line (or CSV record) from the last chunk.
    pending: Vec<u8>,
    /// The finished rows, encoded for storage as they arrive, so that the copy holds
    /// them only in the form the table will (see [`EncodedInserts`]).
    pub rows: EncodedInserts,
    /// The first error, reported when the copy ends.
    error: Option<floe_repr::ValueError>,
    /// Lines seen, for error messages.
    line: u64,
    /// Whether the data ended with `\.`.
    ended: bool,
}

impl CopyState {
    pub fn new(
        plan: CopyFromPlan,
        defaults: Vec<(usize, Datum)>,
        rows: EncodedInserts,
    ) -> CopyState {
        CopyState {
            plan,
            defaults,
            pending: Vec::new(),
            rows,
            error: None,
            line: 0,
            ended: false,
        }
    }

    /// Takes one chunk of COPY data.
    pub fn feed(&mut self, data: &[u8]) {
        if self.error.is_some() || self.ended {
            return;
        }
        self.pending.extend_from_slice(data);
        let complete = match self.plan.format {
            CopyFormat::Text => self
                .pending
                .iter()
                .rposition(|b| *b == b'\n')
                .map(|i| i + 1),
            CopyFormat::Csv => csv_complete_prefix(&self.pending),
        };
        if let Some(end) = complete {
            let chunk: Vec<u8> = self.pending.drain(..end).collect();
            self.decode(&chunk);
        }
    }

    /// Ends the data: decodes what is left (a last line without newline).
    pub fn finish(&mut self) {
        if !self.pending.is_empty() && self.error.is_none() && !self.ended {
            let mut rest = std::mem::take(&mut self.pending);
            rest.push(b'\n');
            self.decode(&rest);
        }
    }

    fn fail(&mut self, code: SqlState, message: String) {
        self.fail_with(floe_repr::ValueError::new(code, message));
    }

    /// Keeps the first error, its message followed by where in the data it is.
    fn fail_with(&mut self, mut error: floe_repr::ValueError) {
        if self.error.is_none() {
            error.message = format!(
                "{} (COPY {}, line {})",
                error.message, self.plan.name.item, self.line
            );
            self.error = Some(error);
        }
    }

    /// The first decoding error, as the client's error.
    pub fn error(&self) -> Option<AdapterError> {
        self.error.clone().map(crate::tables::value_error)
    }

    fn decode(&mut self, bytes: &[u8]) {
        let Ok(text) = std::str::from_utf8(bytes) else {
            self.line += 1;
            self.fail(
                SqlState::INVALID_TEXT_REPRESENTATION,
                "invalid byte sequence for encoding \"UTF8\"".into(),
            );
            return;
        };
        match self.plan.format {
            CopyFormat::Text => {
                for line in text.split_terminator('\n') {
                    self.line += 1;
                    let line = line.strip_suffix('\r').unwrap_or(line);
                    if line == "\\." {
                        self.ended = true;
                        return;
                    }
                    let fields = split_text_line(line, self.plan.delimiter, &self.plan.null);
                    self.push(fields);
                    if self.error.is_some() {
                        return;
                    }
                }
            }
            CopyFormat::Csv => {
                for record in csv_records(text, self.plan.delimiter) {
                    self.line += 1;
                    if self.line == 1 && self.plan.header {
                        continue;
                    }
                    if let [(marker, false)] = record.as_slice()
                        && marker == "\\."
                    {
                        self.ended = true;
                        return;
                    }
                    // Only an unquoted field equal to the NULL string is null.
                    let fields = record
                        .into_iter()
                        .map(|(value, quoted)| (quoted || value != self.plan.null).then_some(value))
                        .collect();
                    self.push(fields);
                    if self.error.is_some() {
                        return;
                    }
                }
            }
        }
    }

    /// Turns one line's fields into a row of the table.
    fn push(&mut self, fields: Vec<Option<Cow<'_, str>>>) {
        if fields.len() != self.plan.columns.len() {
            let message = if fields.len() < self.plan.columns.len() {
                "missing data for a column".to_string()
            } else {
                "extra data after last expected column".to_string()
            };
            self.fail(SqlState::BAD_COPY_FILE_FORMAT, message);
            return;
        }
        let mut row: Row = vec![Datum::Null; self.plan.desc.columns.len()];
        for (field, column) in fields.into_iter().zip(&self.plan.columns) {
            let Some(text) = field else { continue };
            let (name, column_type) = &self.plan.desc.columns[*column];
            match floe_repr::strconv::parse_datum(&text, &column_type.scalar_type) {
                Ok(datum) => row[*column] = datum,
                Err(mut e) => {
                    e.message = format!("{} for column \"{name}\"", e.message);
                    self.fail_with(e);
                    return;
                }
            }
        }
        for (column, value) in &self.defaults {
            row[*column] = value.clone();
        }
        if let Some(message) =
            crate::tables::not_null_violation(&self.plan.name, &self.plan.desc, &row)
        {
            self.fail(SqlState::NOT_NULL_VIOLATION, message);
            return;
        }
        if let Some(error) = crate::tables::unstorable_value(&self.plan.desc, &row) {
            self.fail_with(error);
            return;
        }
        self.rows.push(&row);
    }
}

/// Splits a text-format line into fields, undoing backslash escapes; a field
/// equal to the NULL string (before unescaping) is NULL. A field without escapes is
/// borrowed from the line.
fn split_text_line<'a>(line: &'a str, delimiter: char, null: &str) -> Vec<Option<Cow<'a, str>>> {
    let field = |raw: &'a str| {
        if raw == null {
            None
        } else if raw.contains('\\') {
            Some(Cow::Owned(unescape_text(raw)))
        } else {
            Some(Cow::Borrowed(raw))
        }
    };
    if !line.contains('\\') {
        return line.split(delimiter).map(field).collect();
    }
    // A backslash may escape the delimiter: split where a delimiter is not escaped.
    let mut fields = Vec::new();
    let mut start = 0;
    let mut chars = line.char_indices();
    while let Some((at, c)) = chars.next() {
        if c == '\\' {
            chars.next();
        } else if c == delimiter {
            fields.push(field(&line[start..at]));
            start = at + c.len_utf8();
        }
    }
    fields.push(field(&line[start..]));
    fields
}

fn unescape_text(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('b') => out.push('\u{8}'),
            Some('f') => out.push('\u{c}'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('t') => out.push('\t'),
            Some('v') => out.push('\u{b}'),
            Some('x') => {
                let mut value = 0u32;
                let mut digits = 0;
                while digits < 2 {
                    match chars.peek().and_then(|c| c.to_digit(16)) {
                        Some(d) => {
                            value = value * 16 + d;
                            chars.next();
                            digits += 1;
                        }
                        None => break,
                    }
                }
                if digits == 0 {
                    out.push('x');
                } else if let Some(c) = char::from_u32(value) {
                    out.push(c);
                }
            }
            Some(d @ '0'..='7') => {
                let mut value = d.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    match chars.peek().and_then(|c| c.to_digit(8)) {
                        Some(d) => {
                            value = value * 8 + d;
                            chars.next();
                        }
                        None => break,
                    }
                }
                if let Some(c) = char::from_u32(value) {
                    out.push(c);
                }
            }
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

/// The length of the longest prefix of complete CSV records (ending in a
/// newline outside quotes).
fn csv_complete_prefix(bytes: &[u8]) -> Option<usize> {
    let mut in_quotes = false;
    let mut end = None;
    for (i, b) in bytes.iter().enumerate() {
        match b {
            b'"' => in_quotes = !in_quotes,
            b'\n' if !in_quotes => end = Some(i + 1),
            _ => {}
        }
    }
    end
}

/// Splits complete CSV text into records of fields, each with whether it
/// was quoted (a quoted field is never NULL). A field without quotes is borrowed
/// from the text.
fn csv_records(text: &str, delimiter: char) -> Vec<Vec<(Cow<'_, str>, bool)>> {
    let mut records = Vec::new();
    let mut record = Vec::new();
    // The field being read: where it starts, and its text once a quote made it differ
    // from the slice of the input.
    let mut start = 0;
    let mut owned: Option<String> = None;
    let mut quoted = false;
    let mut in_quotes = false;
    let mut chars = text.char_indices().peekable();
    let field = |start: usize, end: usize, owned: &mut Option<String>| match owned.take() {
        Some(value) => Cow::Owned(value),
        None => Cow::Borrowed(&text[start..end]),
    };
    while let Some((at, c)) = chars.next() {
        if in_quotes {
            if c == '"' {
                if chars.peek().map(|(_, next)| *next) == Some('"') {
                    owned.get_or_insert_with(String::new).push('"');
                    chars.next();
                } else {
                    in_quotes = false;
                }
            } else {
                owned.get_or_insert_with(String::new).push(c);
            }
            continue;
        }
        match c {
            '"' => {
                // From here on the field is built, not sliced.
                owned.get_or_insert_with(|| text[start..at].to_string());
                in_quotes = true;
                quoted = true;
            }
            '\r' if chars.peek().map(|(_, next)| *next) == Some('\n') => {
                record.push((field(start, at, &mut owned), quoted));
                records.push(std::mem::take(&mut record));
                quoted = false;
                chars.next();
                start = at + 2;
            }
            '\n' => {
                record.push((field(start, at, &mut owned), quoted));
                records.push(std::mem::take(&mut record));
                quoted = false;
                start = at + 1;
            }
            c if c == delimiter => {
                record.push((field(start, at, &mut owned), quoted));
                quoted = false;
                start = at + c.len_utf8();
            }
            c => {
                if let Some(value) = owned.as_mut() {
                    value.push(c);
                }
            }
        }
    }
    records
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_lines_split_and_unescape() {
        assert_eq!(
            split_text_line("1\ta\\tb\t\\N\tx\\\\y", '\t', "\\N"),
            vec![
                Some("1".into()),
                Some("a\tb".into()),
                None,
                Some("x\\y".into())
            ]
        );
        assert_eq!(unescape_text("\\x41\\101\\n"), "AA\n");
        assert_eq!(
            split_text_line("a\\\tb\tc", '\t', "\\N"),
            vec![Some("a\tb".into()), Some("c".into())],
            "an escaped delimiter is data"
        );
    }

    #[test]
    fn csv_records_handle_quotes_and_nulls() {
        let records: Vec<Vec<(String, bool)>> =
            csv_records("1,\"a,b\",,\"\"\r\n2,\"line\nbreak\",\"q\"\"q\",x\n", ',')
                .into_iter()
                .map(|record| {
                    record
                        .into_iter()
                        .map(|(value, quoted)| (value.into_owned(), quoted))
                        .collect()
                })
                .collect();
        let owned = |v: &[(&str, bool)]| {
            v.iter()
                .map(|(s, q)| (s.to_string(), *q))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            records,
            vec![
                owned(&[("1", false), ("a,b", true), ("", false), ("", true)]),
                owned(&[
                    ("2", false),
                    ("line\nbreak", true),
                    ("q\"q", true),
                    ("x", false)
                ]),
            ]
        );
        assert_eq!(csv_complete_prefix(b"1,\"a\nb\"\n2,"), Some(8));
    }
}
