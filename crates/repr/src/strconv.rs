//! Text input and output of SQL values, as Postgres and Materialize read and
//! print them: `parse_datum` reads the text form of a value of a known type,
//! `format_datum` prints a value.
//!
//! Every function here is total: malformed input is an error carrying the
//! SQLSTATE Postgres uses, never a panic.
//!
//! The entry points and the nesting rules are here; each family of types has
//! its file: `numeric` (booleans, integers, floats, numeric), `text`
//! (character types, bytea, uuid), `datetime`, `interval`, `json` and
//! `composite` (lists, maps, records, ranges). Their public functions are
//! re-exported, so callers name them `strconv::parse_date` as before.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;

use crate::datum::{Datum, RangeBounds};
use crate::{SqlScalarType, SqlState};

mod composite;
mod datetime;
mod interval;
mod json;
mod numeric;
mod text;

pub use composite::*;
pub use datetime::*;
pub use interval::*;
pub use json::*;
pub use numeric::*;
pub use text::*;

/// Why a value could not be read, converted or encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueError {
    pub code: SqlState,
    pub message: String,
    pub detail: Option<String>,
    pub hint: Option<String>,
}

impl ValueError {
    pub fn new(code: SqlState, message: impl Into<String>) -> ValueError {
        ValueError {
            code,
            message: message.into(),
            detail: None,
            hint: None,
        }
    }

    pub fn with_detail(mut self, detail: impl Into<String>) -> ValueError {
        self.detail = Some(detail.into());
        self
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> ValueError {
        self.hint = Some(hint.into());
        self
    }

    /// `invalid input syntax for type T: "text"` (22P02).
    pub fn syntax(type_name: &str, text: &str) -> ValueError {
        ValueError::new(
            SqlState::INVALID_TEXT_REPRESENTATION,
            format!("invalid input syntax for type {type_name}: \"{text}\""),
        )
    }

    /// A numeric value out of range (22003).
    pub fn out_of_range(message: impl Into<String>) -> ValueError {
        ValueError::new(SqlState::NUMERIC_VALUE_OUT_OF_RANGE, message)
    }
}

impl fmt::Display for ValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ValueError {}

/// How deeply lists, maps, records, ranges and JSON documents may nest.
pub const MAX_NESTING: usize = 128;

/// Materialize's maximum numeric precision.
pub const NUMERIC_MAX_PRECISION: usize = 39;

// ---------------------------------------------------------------------------
// Entry points
// ---------------------------------------------------------------------------

/// Reads the text form of a value of type `ty`. The text is never NULL;
/// NULL is a separate condition on the wire.
pub fn parse_datum(text: &str, ty: &SqlScalarType) -> Result<Datum, ValueError> {
    parse_nested(text, ty, 0)
}

fn parse_nested(text: &str, ty: &SqlScalarType, depth: usize) -> Result<Datum, ValueError> {
    if depth > MAX_NESTING {
        return Err(ValueError::new(
            SqlState::PROGRAM_LIMIT_EXCEEDED,
            "value is too deeply nested",
        ));
    }
    use SqlScalarType as S;
    Ok(match ty {
        S::Bool => Datum::Bool(parse_bool(text)?),
        S::Int16 => Datum::Int16(parse_int(text, "smallint")?),
        S::Int32 => Datum::Int32(parse_int(text, "integer")?),
        S::Int64 => Datum::Int64(parse_int(text, "bigint")?),
        S::UInt16 => Datum::UInt16(parse_int(text, "uint2")?),
        S::UInt32 => Datum::UInt32(parse_int(text, "uint4")?),
        S::UInt64 => Datum::UInt64(parse_int(text, "uint8")?),
        S::Oid => Datum::Oid(parse_int(text, "oid")?),
        S::Float32 => Datum::Float32(parse_float32(text)?),
        S::Float64 => Datum::Float64(parse_float64(text)?),
        S::Numeric {
            precision,
            max_scale,
        } => Datum::Numeric(parse_numeric(text, *precision, *max_scale)?),
        S::Date => Datum::Date(parse_date(text)?),
        S::Time => Datum::Time(parse_time(text)?),
        S::Timestamp => Datum::Timestamp(parse_timestamp(text)?),
        S::TimestampTz => Datum::TimestampTz(parse_timestamptz(text)?),
        S::Text => Datum::Text(text.to_string()),
        S::VarChar { max_length } => Datum::Text(check_varchar(text, *max_length)?),
        S::Bytes => Datum::Bytes(parse_bytea(text)?),
        S::Uuid => Datum::Uuid(parse_uuid(text)?),
        S::Jsonb => Datum::Jsonb(parse_jsonb(text)?),
        // `json` keeps its input as written, once it reads as JSON.
        S::Json => {
            parse_json(text)?;
            Datum::Text(text.to_string())
        }
        S::Interval => {
            let (months, days, micros) = parse_interval(text)?;
            Datum::Interval {
                months,
                days,
                micros,
            }
        }
        S::Range { element } => parse_range(text, element, depth)?,
        S::List { element } => parse_list(text, element, depth)?,
        S::Array { element } => parse_array(text, element, depth)?,
        S::Map { value } => parse_map(text, value, depth)?,
        S::Record { fields } => parse_record(text, fields, depth)?,
    })
}

/// Prints a value in its text form. NULL prints as `NULL`; callers that put
/// values on the wire check for NULL first.
pub fn format_datum(datum: &Datum) -> String {
    let mut out = String::new();
    write_datum(&mut out, datum);
    out
}

fn write_datum(out: &mut String, datum: &Datum) {
    match datum {
        Datum::Null => out.push_str("NULL"),
        Datum::Bool(b) => out.push(if *b { 't' } else { 'f' }),
        Datum::Int16(v) => push_display(out, v),
        Datum::Int32(v) => push_display(out, v),
        Datum::Int64(v) => push_display(out, v),
        Datum::UInt16(v) => push_display(out, v),
        Datum::UInt32(v) => push_display(out, v),
        Datum::UInt64(v) => push_display(out, v),
        Datum::Oid(v) => push_display(out, v),
        Datum::Float32(v) => out.push_str(&format_float32(*v)),
        Datum::Float64(v) => out.push_str(&format_float64(*v)),
        Datum::Numeric(s) | Datum::Text(s) | Datum::Jsonb(s) => out.push_str(s),
        Datum::Bytes(bytes) => out.push_str(&format_bytea(bytes)),
        Datum::Date(days) => out.push_str(&format_date(*days)),
        Datum::Time(micros) => out.push_str(&format_time(*micros)),
        Datum::Timestamp(micros) => out.push_str(&format_timestamp(*micros)),
        Datum::TimestampTz(micros) => out.push_str(&format_timestamptz(*micros)),
        Datum::Interval {
            months,
            days,
            micros,
        } => out.push_str(&format_interval(*months, *days, *micros)),
        Datum::Uuid(bytes) => out.push_str(&format_uuid(bytes)),
        Datum::TextArray(elements) => {
            push_delimited(out, ('{', '}'), elements, |out, element| match element {
                None => out.push_str("NULL"),
                Some(s) => push_quoted_element(out, s, ElementKind::Array),
            })
        }
        Datum::List(elements) => push_delimited(out, ('{', '}'), elements, |out, element| {
            write_element(out, element, ElementKind::List)
        }),
        Datum::Map(entries) => push_delimited(out, ('{', '}'), entries, |out, (key, value)| {
            push_quoted_element(out, key, ElementKind::Map);
            out.push_str("=>");
            write_element(out, value, ElementKind::Map);
        }),
        Datum::Record(fields) => push_delimited(out, ('(', ')'), fields, |out, field| {
            if !matches!(field, Datum::Null) {
                let text = format_datum(field);
                push_quoted_composite(out, &text, b"(),\"\\");
            }
        }),
        Datum::Range(None) => out.push_str("empty"),
        Datum::Range(Some(bounds)) => {
            let lower_inclusive = bounds.lower_inclusive && bounds.lower.is_some();
            let upper_inclusive = bounds.upper_inclusive && bounds.upper.is_some();
            out.push(if lower_inclusive { '[' } else { '(' });
            if let Some(lower) = &bounds.lower {
                push_quoted_composite(out, &format_datum(lower), b"()[],\"\\");
            }
            out.push(',');
            if let Some(upper) = &bounds.upper {
                push_quoted_composite(out, &format_datum(upper), b"()[],\"\\");
            }
            out.push(if upper_inclusive { ']' } else { ')' });
        }
    }
}

/// Writes a value by its `Display` form: the integers and oids print so.
fn push_display(out: &mut String, value: impl fmt::Display) {
    use std::fmt::Write;
    let _ = write!(out, "{value}");
}

/// Writes `items` comma-separated between the `brackets`, each by `write_item`: arrays,
/// lists, maps and records all print so.
fn push_delimited<'a, T: 'a>(
    out: &mut String,
    brackets: (char, char),
    items: impl IntoIterator<Item = &'a T>,
    mut write_item: impl FnMut(&mut String, &'a T),
) {
    out.push(brackets.0);
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_item(out, item);
    }
    out.push(brackets.1);
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ElementKind {
    Array,
    List,
    Map,
}

/// Writes an element of a list or the value of a map entry. Nested lists
/// and maps are written bare (their braces delimit them); anything else is
/// quoted when it needs to be.
fn write_element(out: &mut String, element: &Datum, kind: ElementKind) {
    match (element, kind) {
        (Datum::Null, _) => out.push_str("NULL"),
        (Datum::List(_) | Datum::Map(_), ElementKind::List | ElementKind::Map) => {
            write_datum(out, element)
        }
        _ => push_quoted_element(out, &format_datum(element), kind),
    }
}

/// Quotes an array, list or map element when it is empty, reads as NULL, or
/// holds a character with a meaning in the enclosing syntax.
fn push_quoted_element(out: &mut String, text: &str, kind: ElementKind) {
    let special = |c: char| {
        matches!(c, '{' | '}' | ',' | '"' | '\\')
            || c.is_whitespace()
            || (kind == ElementKind::Map && matches!(c, '=' | '>'))
    };
    let needs_quotes =
        text.is_empty() || text.eq_ignore_ascii_case("null") || text.chars().any(special);
    if needs_quotes {
        push_quoted(out, text, Some('\\'));
    } else {
        out.push_str(text);
    }
}

/// Writes `text` in double quotes, each quote and backslash in it escaped by `escape`
/// before it, or doubled when `escape` is `None`: elements and composite fields quote so.
fn push_quoted(out: &mut String, text: &str, escape: Option<char>) {
    out.push('"');
    for c in text.chars() {
        if c == '"' || c == '\\' {
            out.push(escape.unwrap_or(c));
        }
        out.push(c);
    }
    out.push('"');
}

/// Quotes a record field or range bound the way Postgres' `record_out` and
/// `range_out` do: quotes and backslashes are doubled.
fn push_quoted_composite(out: &mut String, text: &str, specials: &[u8]) {
    let needs_quotes = text.is_empty()
        || text
            .chars()
            .any(|c| c.is_whitespace() || (c.is_ascii() && specials.contains(&(c as u8))));
    if needs_quotes {
        push_quoted(out, text, None);
    } else {
        out.push_str(text);
    }
}

#[cfg(test)]
mod tests;
