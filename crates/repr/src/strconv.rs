//! Text input and output of SQL values, as Postgres and Materialize read and
//! print them: `parse_datum` reads the text form of a value of a known type,
//! `format_datum` prints a value.
//!
//! Every function here is total: malformed input is an error carrying the
//! SQLSTATE Postgres uses, never a panic.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;

use crate::datum::{Datum, RangeBounds};
use crate::{SqlScalarType, SqlState};

/// Why a value could not be read, converted or encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueError {
    pub code: SqlState,
    pub message: String,
    pub detail: Option<String>,
}

impl ValueError {
    pub fn new(code: SqlState, message: impl Into<String>) -> ValueError {
        ValueError {
            code,
            message: message.into(),
            detail: None,
        }
    }

    pub fn with_detail(mut self, detail: impl Into<String>) -> ValueError {
        self.detail = Some(detail.into());
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
    use std::fmt::Write;
    match datum {
        Datum::Null => out.push_str("NULL"),
        Datum::Bool(b) => out.push(if *b { 't' } else { 'f' }),
        Datum::Int16(v) => {
            let _ = write!(out, "{v}");
        }
        Datum::Int32(v) => {
            let _ = write!(out, "{v}");
        }
        Datum::Int64(v) => {
            let _ = write!(out, "{v}");
        }
        Datum::UInt16(v) => {
            let _ = write!(out, "{v}");
        }
        Datum::UInt32(v) => {
            let _ = write!(out, "{v}");
        }
        Datum::UInt64(v) => {
            let _ = write!(out, "{v}");
        }
        Datum::Oid(v) => {
            let _ = write!(out, "{v}");
        }
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
            out.push('{');
            for (i, element) in elements.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                match element {
                    None => out.push_str("NULL"),
                    Some(s) => push_quoted_element(out, s, ElementKind::Array),
                }
            }
            out.push('}');
        }
        Datum::List(elements) => {
            out.push('{');
            for (i, element) in elements.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_element(out, element, ElementKind::List);
            }
            out.push('}');
        }
        Datum::Map(entries) => {
            out.push('{');
            for (i, (key, value)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_quoted_element(out, key, ElementKind::Map);
                out.push_str("=>");
                write_element(out, value, ElementKind::Map);
            }
            out.push('}');
        }
        Datum::Record(fields) => {
            out.push('(');
            for (i, field) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                if !matches!(field, Datum::Null) {
                    let text = format_datum(field);
                    push_quoted_composite(out, &text, b"(),\"\\");
                }
            }
            out.push(')');
        }
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
    if !needs_quotes {
        out.push_str(text);
        return;
    }
    out.push('"');
    for c in text.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
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
    if !needs_quotes {
        out.push_str(text);
        return;
    }
    out.push('"');
    for c in text.chars() {
        if c == '"' || c == '\\' {
            out.push(c);
        }
        out.push(c);
    }
    out.push('"');
}

// ---------------------------------------------------------------------------
// Booleans, integers, floats
// ---------------------------------------------------------------------------

/// Postgres' boolean input: `t`, `true`, `yes`, `on`, `1` and their
/// opposites, any case, unique prefixes of the words.
pub fn parse_bool(text: &str) -> Result<bool, ValueError> {
    let t = text.trim().to_ascii_lowercase();
    let matches_word = |word: &str, min: usize| t.len() >= min && word.starts_with(t.as_str());
    if t == "1" || matches_word("true", 1) || matches_word("yes", 1) || matches_word("on", 2) {
        Ok(true)
    } else if t == "0"
        || matches_word("false", 1)
        || matches_word("no", 1)
        || matches_word("off", 2)
    {
        Ok(false)
    } else {
        Err(ValueError::syntax("boolean", text))
    }
}

/// Parses an integer of any width, with Postgres' errors.
pub fn parse_int<T: std::str::FromStr>(text: &str, type_name: &str) -> Result<T, ValueError> {
    let t = text.trim();
    if let Ok(v) = t.parse::<T>() {
        return Ok(v);
    }
    let digits = t.strip_prefix(['+', '-']).unwrap_or(t);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        Err(ValueError::out_of_range(format!(
            "value \"{text}\" is out of range for type {type_name}"
        )))
    } else {
        Err(ValueError::syntax(type_name, text))
    }
}

fn float_is_special(t: &str) -> bool {
    let lower = t.to_ascii_lowercase();
    let unsigned = lower.trim_start_matches(['+', '-']);
    matches!(unsigned, "inf" | "infinity" | "nan")
}

fn float_has_nonzero_digit(t: &str) -> bool {
    let mantissa = t.split(['e', 'E']).next().unwrap_or("");
    mantissa.bytes().any(|b| (b'1'..=b'9').contains(&b))
}

fn check_float_text(t: &str) -> bool {
    // Rust accepts a few forms Postgres does not ("1." is fine in both);
    // keep to digits, sign, point, exponent and the special words.
    float_is_special(t)
        || (!t.is_empty()
            && t.bytes()
                .all(|b| b.is_ascii_digit() || matches!(b, b'+' | b'-' | b'.' | b'e' | b'E')))
}

pub fn parse_float64(text: &str) -> Result<f64, ValueError> {
    let t = text.trim();
    if !check_float_text(t) {
        return Err(ValueError::syntax("double precision", text));
    }
    let v: f64 = t
        .parse()
        .map_err(|_| ValueError::syntax("double precision", text))?;
    if (v.is_infinite() && !float_is_special(t)) || (v == 0.0 && float_has_nonzero_digit(t)) {
        return Err(ValueError::out_of_range(format!(
            "\"{text}\" is out of range for type double precision"
        )));
    }
    Ok(v)
}

pub fn parse_float32(text: &str) -> Result<f32, ValueError> {
    let t = text.trim();
    if !check_float_text(t) {
        return Err(ValueError::syntax("real", text));
    }
    let v: f32 = t.parse().map_err(|_| ValueError::syntax("real", text))?;
    if (v.is_infinite() && !float_is_special(t)) || (v == 0.0 && float_has_nonzero_digit(t)) {
        return Err(ValueError::out_of_range(format!(
            "\"{text}\" is out of range for type real"
        )));
    }
    Ok(v)
}

fn format_float_text(shortest: String, magnitude: f64, max_exponent: f64) -> String {
    if magnitude != 0.0 && !(1e-4..max_exponent).contains(&magnitude) {
        let (mantissa, exponent) = shortest.split_once('e').unwrap_or((&shortest, "0"));
        let exponent: i32 = exponent.parse().unwrap_or(0);
        let sign = if exponent < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exponent.abs());
    }
    shortest
}

/// `double precision` as Postgres prints it: shortest exact digits, `1e+20`
/// style beyond 15 integer digits or below 1e-4.
pub fn format_float64(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let magnitude = v.abs();
    if magnitude != 0.0 && !(1e-4..1e15).contains(&magnitude) {
        return format_float_text(format!("{v:e}"), magnitude, 1e15);
    }
    format!("{v}")
}

/// `real` as Postgres prints it: shortest exact digits, exponent beyond 6
/// integer digits.
pub fn format_float32(v: f32) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let magnitude = f64::from(v.abs());
    if magnitude != 0.0 && !(1e-4..1e6).contains(&magnitude) {
        return format_float_text(format!("{v:e}"), magnitude, 1e6);
    }
    format!("{v}")
}

// ---------------------------------------------------------------------------
// Numeric
// ---------------------------------------------------------------------------

/// An exact decimal: sign, integer digits (no leading zeros) and fraction
/// digits. Zero has no integer digits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decimal {
    pub negative: bool,
    pub integer: String,
    pub fraction: String,
}

impl Decimal {
    pub fn is_zero(&self) -> bool {
        self.integer.is_empty() && self.fraction.bytes().all(|b| b == b'0')
    }

    /// Rounds to `scale` fraction digits, half away from zero (as Postgres
    /// rounds numeric).
    pub fn round(&mut self, scale: usize) {
        if self.fraction.len() <= scale {
            return;
        }
        let round_up = self.fraction.as_bytes()[scale] >= b'5';
        self.fraction.truncate(scale);
        if round_up {
            let mut digits: Vec<u8> = self.integer.bytes().chain(self.fraction.bytes()).collect();
            let mut i = digits.len();
            let mut carry = true;
            while carry && i > 0 {
                i -= 1;
                if digits[i] == b'9' {
                    digits[i] = b'0';
                } else {
                    digits[i] += 1;
                    carry = false;
                }
            }
            if carry {
                digits.insert(0, b'1');
            }
            let split = digits.len() - self.fraction.len();
            self.integer = String::from_utf8_lossy(&digits[..split]).into_owned();
            self.fraction = String::from_utf8_lossy(&digits[split..]).into_owned();
        }
        if self.is_zero() {
            self.negative = false;
        }
    }

    /// Prints with exactly `scale` fraction digits, or with trailing zeros
    /// removed when `scale` is `None`.
    pub fn format(&self, scale: Option<usize>) -> String {
        let mut fraction = self.fraction.clone();
        match scale {
            Some(s) => {
                while fraction.len() < s {
                    fraction.push('0');
                }
                fraction.truncate(s);
            }
            None => {
                let trimmed = fraction.trim_end_matches('0').len();
                fraction.truncate(trimmed);
            }
        }
        let zero = self.integer.is_empty() && fraction.bytes().all(|b| b == b'0');
        let mut out = String::new();
        if self.negative && !zero {
            out.push('-');
        }
        if self.integer.is_empty() {
            out.push('0');
        } else {
            out.push_str(&self.integer);
        }
        if !fraction.is_empty() {
            out.push('.');
            out.push_str(&fraction);
        }
        out
    }

    /// Parses `[+-]digits[.digits][e[+-]digits]`; `None` for NaN.
    pub fn parse(text: &str) -> Result<Option<Decimal>, ValueError> {
        let t = text.trim();
        if t.eq_ignore_ascii_case("nan") {
            return Ok(None);
        }
        let syntax = || ValueError::syntax("numeric", text);
        let (negative, rest) = match t.as_bytes().first() {
            Some(b'-') => (true, &t[1..]),
            Some(b'+') => (false, &t[1..]),
            _ => (false, t),
        };
        let (mantissa, exponent) = match rest.find(['e', 'E']) {
            Some(at) => (&rest[..at], Some(&rest[at + 1..])),
            None => (rest, None),
        };
        let (integer, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        if integer.is_empty() && fraction.is_empty() {
            return Err(syntax());
        }
        if !integer.bytes().all(|b| b.is_ascii_digit())
            || !fraction.bytes().all(|b| b.is_ascii_digit())
        {
            return Err(syntax());
        }
        let exponent: i64 = match exponent {
            None => 0,
            Some(e) => {
                let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(syntax());
                }
                e.parse::<i64>()
                    .ok()
                    .filter(|e| e.abs() <= 1000)
                    .ok_or_else(|| ValueError::out_of_range("value overflows numeric format"))?
            }
        };
        let mut digits = format!("{integer}{fraction}");
        let mut point = integer.len() as i64 + exponent;
        if point < 0 {
            digits = format!("{}{digits}", "0".repeat(point.unsigned_abs() as usize));
            point = 0;
        }
        let point = point as usize;
        while digits.len() < point {
            digits.push('0');
        }
        let (integer, fraction) = digits.split_at(point);
        let integer = integer.trim_start_matches('0').to_string();
        let mut decimal = Decimal {
            negative,
            integer,
            fraction: fraction.to_string(),
        };
        if decimal.is_zero() {
            decimal.negative = false;
        }
        Ok(Some(decimal))
    }
}

impl PartialOrd for Decimal {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Decimal {
    fn cmp(&self, other: &Self) -> Ordering {
        let magnitude = |d: &Decimal, e: &Decimal| {
            d.integer
                .len()
                .cmp(&e.integer.len())
                .then_with(|| d.integer.cmp(&e.integer))
                .then_with(|| {
                    let width = d.fraction.len().max(e.fraction.len());
                    let pad = |f: &str| format!("{f:0<width$}");
                    pad(&d.fraction).cmp(&pad(&e.fraction))
                })
        };
        if let (true, true) = (self.is_zero(), other.is_zero()) {
            return Ordering::Equal;
        }
        let self_negative = self.negative && !self.is_zero();
        let other_negative = other.negative && !other.is_zero();
        match (self_negative, other_negative) {
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
            (false, false) => magnitude(self, other),
            (true, true) => magnitude(other, self),
        }
    }
}

/// Reads a numeric and applies the type's precision and scale the way
/// Postgres does on assignment: round to the scale, then refuse a value
/// whose integer digits exceed `precision - scale`.
pub fn parse_numeric(
    text: &str,
    precision: Option<u8>,
    max_scale: Option<u8>,
) -> Result<String, ValueError> {
    match Decimal::parse(text)? {
        None => Ok("NaN".to_string()),
        Some(decimal) => numeric_to_type(decimal, precision, max_scale),
    }
}

/// Applies `numeric(p,s)` to an exact decimal.
pub fn numeric_to_type(
    mut decimal: Decimal,
    precision: Option<u8>,
    max_scale: Option<u8>,
) -> Result<String, ValueError> {
    match (precision, max_scale) {
        (Some(p), s) => {
            let s = usize::from(s.unwrap_or(0));
            let p = usize::from(p);
            decimal.round(s);
            if decimal.integer.len() > p.saturating_sub(s) {
                return Err(
                    ValueError::out_of_range("numeric field overflow").with_detail(format!(
                        "A field with precision {p}, scale {s} must round to an absolute value less than 10^{}.",
                        p.saturating_sub(s)
                    )),
                );
            }
            Ok(decimal.format(Some(s)))
        }
        (None, Some(s)) => {
            decimal.round(usize::from(s));
            check_bare_numeric(&decimal)?;
            Ok(decimal.format(Some(usize::from(s))))
        }
        (None, None) => {
            check_bare_numeric(&decimal)?;
            Ok(decimal.format(None))
        }
    }
}

fn check_bare_numeric(decimal: &Decimal) -> Result<(), ValueError> {
    let fraction = decimal.fraction.trim_end_matches('0').len();
    if decimal.integer.len() > NUMERIC_MAX_PRECISION || fraction > NUMERIC_MAX_PRECISION {
        return Err(ValueError::out_of_range(format!(
            "numeric value {} exceeds the maximum precision {NUMERIC_MAX_PRECISION}",
            decimal.format(None)
        )));
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Character types, bytea, uuid
// ---------------------------------------------------------------------------

/// `varchar(n)` on assignment: a longer value is an error unless the excess
/// is spaces, which are cut (as Postgres does).
pub fn check_varchar(text: &str, max_length: Option<u32>) -> Result<String, ValueError> {
    let Some(n) = max_length else {
        return Ok(text.to_string());
    };
    let n = n as usize;
    match text.char_indices().nth(n) {
        None => Ok(text.to_string()),
        Some((at, _)) if text[at..].chars().all(|c| c == ' ') => Ok(text[..at].to_string()),
        Some(_) => Err(ValueError::new(
            SqlState::STRING_DATA_RIGHT_TRUNCATION,
            format!("value too long for type character varying({n})"),
        )),
    }
}

/// `bytea` input: `\x` hex or the escape format.
pub fn parse_bytea(text: &str) -> Result<Vec<u8>, ValueError> {
    if let Some(hex) = text
        .strip_prefix("\\x")
        .or_else(|| text.strip_prefix("\\X"))
    {
        let mut out = Vec::with_capacity(hex.len() / 2);
        let mut chars = hex.chars().filter(|c| !c.is_ascii_whitespace());
        let digit = |c: char| {
            c.to_digit(16).map(|d| d as u8).ok_or_else(|| {
                ValueError::new(
                    SqlState::INVALID_PARAMETER_VALUE,
                    format!("invalid hexadecimal digit: \"{c}\""),
                )
            })
        };
        while let Some(high) = chars.next() {
            let high = digit(high)?;
            let Some(low) = chars.next() else {
                return Err(ValueError::new(
                    SqlState::INVALID_PARAMETER_VALUE,
                    "invalid hexadecimal data: odd number of digits",
                ));
            };
            out.push(high << 4 | digit(low)?);
        }
        return Ok(out);
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            out.push(bytes[i]);
            i += 1;
        } else if bytes.get(i + 1) == Some(&b'\\') {
            out.push(b'\\');
            i += 2;
        } else if let Some(octal) = bytes.get(i + 1..i + 4)
            && octal[0] <= b'3'
            && octal.iter().all(|b| (b'0'..=b'7').contains(b))
        {
            out.push((octal[0] - b'0') * 64 + (octal[1] - b'0') * 8 + (octal[2] - b'0'));
            i += 4;
        } else {
            return Err(ValueError::syntax("bytea", text));
        }
    }
    Ok(out)
}

pub fn format_bytea(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(2 + bytes.len() * 2);
    out.push_str("\\x");
    for b in bytes {
        out.push(HEX[usize::from(b >> 4)] as char);
        out.push(HEX[usize::from(b & 15)] as char);
    }
    out
}

/// `uuid` input: 32 hex digits, optionally in braces, with a hyphen allowed
/// after any group of four digits.
pub fn parse_uuid(text: &str) -> Result<[u8; 16], ValueError> {
    let t = text.trim();
    let inner = t
        .strip_prefix('{')
        .and_then(|s| s.strip_suffix('}'))
        .unwrap_or(t);
    let mut digits = Vec::with_capacity(32);
    let mut since_hyphen = 0;
    for (i, c) in inner.chars().enumerate() {
        if c == '-' {
            if i == 0 || since_hyphen % 4 != 0 || since_hyphen == 0 {
                return Err(ValueError::syntax("uuid", text));
            }
            since_hyphen = 0;
            continue;
        }
        let d = c
            .to_digit(16)
            .ok_or_else(|| ValueError::syntax("uuid", text))?;
        digits.push(d as u8);
        since_hyphen += 1;
    }
    if digits.len() != 32 || inner.ends_with('-') {
        return Err(ValueError::syntax("uuid", text));
    }
    let mut out = [0u8; 16];
    for (i, pair) in digits.chunks(2).enumerate() {
        out[i] = pair[0] << 4 | pair[1];
    }
    Ok(out)
}

pub fn format_uuid(bytes: &[u8; 16]) -> String {
    let hex = format_bytea(bytes);
    let hex = &hex[2..];
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

// ---------------------------------------------------------------------------
// Dates and times
// ---------------------------------------------------------------------------

pub const MICROS_PER_SECOND: i64 = 1_000_000;
pub const MICROS_PER_DAY: i64 = 86_400 * MICROS_PER_SECOND;
/// Postgres' oldest date: 4713-11-24 BC (proleptic Gregorian), as days since
/// 1970-01-01.
pub const MIN_DATE_DAYS: i32 = -2_440_588;
/// The last date whose timestamp fits Postgres' range (294276 AD).
pub const MAX_TIMESTAMP_YEAR: i64 = 294_276;
/// Postgres' newest date, 5874897-12-31, as days since the epoch.
pub const MAX_DATE_DAYS: i32 = 2_145_042_905;

/// Days since 1970-01-01 of a proleptic Gregorian date (year 0 = 1 BC).
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian date of a day number.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        _ => 28,
    }
}

/// Splits a trailing ` BC` / ` AD` era marker off.
fn strip_era(text: &str) -> (&str, bool) {
    let t = text.trim_end();
    let upper = t.len() >= 2 && t.is_char_boundary(t.len() - 2);
    if upper {
        let (head, tail) = t.split_at(t.len() - 2);
        if tail.eq_ignore_ascii_case("bc") && head.ends_with(|c: char| c.is_whitespace()) {
            return (head.trim_end(), true);
        }
        if tail.eq_ignore_ascii_case("ad") && head.ends_with(|c: char| c.is_whitespace()) {
            return (head.trim_end(), false);
        }
    }
    (t, false)
}

/// Parses `YYYY-MM-DD` at the start of `text`; returns the day number and
/// the rest.
fn parse_date_prefix(text: &str, bc: bool) -> Option<(i64, &str)> {
    let bytes = text.as_bytes();
    let year_len = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
    if !(1..=7).contains(&year_len) || bytes.get(year_len) != Some(&b'-') {
        return None;
    }
    let year: i64 = text[..year_len].parse().ok()?;
    let rest = &text[year_len + 1..];
    let month_len = rest.bytes().take_while(|b| b.is_ascii_digit()).count();
    if !(1..=2).contains(&month_len) || rest.as_bytes().get(month_len) != Some(&b'-') {
        return None;
    }
    let month: u32 = rest[..month_len].parse().ok()?;
    let rest = &rest[month_len + 1..];
    let day_len = rest.bytes().take_while(|b| b.is_ascii_digit()).count();
    if !(1..=2).contains(&day_len) {
        return None;
    }
    let day: u32 = rest[..day_len].parse().ok()?;
    let year = if bc {
        if year == 0 {
            return None;
        }
        1 - year
    } else {
        if year == 0 {
            return None;
        }
        year
    };
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    Some((days_from_civil(year, month, day), &rest[day_len..]))
}

fn date_out_of_range(text: &str) -> ValueError {
    ValueError::new(
        SqlState::DATETIME_FIELD_OVERFLOW,
        format!("date out of range: \"{text}\""),
    )
}

/// `date` input: ISO `YYYY-MM-DD`, optionally with ` BC`, optionally
/// followed by a time (ignored, as Postgres does).
pub fn parse_date(text: &str) -> Result<i32, ValueError> {
    let (t, bc) = strip_era(text.trim());
    if t.eq_ignore_ascii_case("epoch") {
        return Ok(0);
    }
    let Some((days, rest)) = parse_date_prefix(t, bc) else {
        return Err(datetime_syntax("date", text));
    };
    let rest = rest.trim_start_matches(['T', 't', ' ']);
    if !rest.is_empty() {
        parse_time_and_zone(rest).map_err(|_| datetime_syntax("date", text))?;
    }
    if days < i64::from(MIN_DATE_DAYS) || days > i64::from(MAX_DATE_DAYS) {
        return Err(date_out_of_range(text));
    }
    Ok(days as i32)
}

fn datetime_syntax(type_name: &str, text: &str) -> ValueError {
    ValueError::new(
        SqlState::INVALID_DATETIME_FORMAT,
        format!("invalid input syntax for type {type_name}: \"{text}\""),
    )
}

fn push_year_month_day(out: &mut String, days: i64) -> bool {
    let (year, month, day) = civil_from_days(days);
    let bc = year <= 0;
    let year = if bc { 1 - year } else { year };
    out.push_str(&format!("{year:04}-{month:02}-{day:02}"));
    bc
}

pub fn format_date(days: i32) -> String {
    let mut out = String::new();
    if push_year_month_day(&mut out, i64::from(days)) {
        out.push_str(" BC");
    }
    out
}

/// Parses `HH:MM[:SS[.ffffff]]`, rounding to microseconds.
fn parse_clock(text: &str) -> Option<i64> {
    let mut parts = text.splitn(3, ':');
    let hours = parts.next()?;
    let minutes = parts.next()?;
    let seconds = parts.next().unwrap_or("0");
    let number = |s: &str, max_len: usize| -> Option<i64> {
        if s.is_empty() || s.len() > max_len || !s.bytes().all(|b| b.is_ascii_digit()) {
            None
        } else {
            s.parse().ok()
        }
    };
    let hours = number(hours, 2)?;
    let minutes = number(minutes, 2)?;
    let (whole, fraction) = seconds.split_once('.').unwrap_or((seconds, ""));
    let whole = number(whole, 2)?;
    if !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut micros: i64 = 0;
    for (i, b) in fraction.bytes().take(6).enumerate() {
        micros += i64::from(b - b'0') * 10i64.pow(5 - i as u32);
    }
    if fraction.as_bytes().get(6).is_some_and(|b| *b >= b'5') {
        micros += 1;
    }
    if hours > 24 || minutes > 59 || whole > 60 {
        return None;
    }
    let total = ((hours * 60 + minutes) * 60 + whole) * MICROS_PER_SECOND + micros;
    if total > MICROS_PER_DAY {
        return None;
    }
    Some(total)
}

/// Parses a time of day and an optional zone offset (in seconds east of
/// UTC): `10:00`, `10:00:00.5+02`, `10:00Z`, `10:00 UTC`.
fn parse_time_and_zone(text: &str) -> Result<(i64, Option<i64>), ()> {
    let t = text.trim();
    let zone_at = t
        .char_indices()
        .skip(1)
        .find(|(_, c)| matches!(c, '+' | '-' | 'Z' | 'z' | ' ' | 'U' | 'u' | 'G' | 'g'))
        .map(|(i, _)| i);
    let (clock, zone) = match zone_at {
        Some(at) => (&t[..at], Some(t[at..].trim())),
        None => (t, None),
    };
    let micros = parse_clock(clock.trim()).ok_or(())?;
    let offset = match zone {
        None | Some("") => None,
        Some(z) => Some(parse_zone(z).ok_or(())?),
    };
    Ok((micros, offset))
}

/// A zone offset in seconds east of UTC.
fn parse_zone(zone: &str) -> Option<i64> {
    if zone.eq_ignore_ascii_case("z")
        || zone.eq_ignore_ascii_case("utc")
        || zone.eq_ignore_ascii_case("gmt")
    {
        return Some(0);
    }
    let (sign, rest) = match zone.as_bytes().first()? {
        b'+' => (1, &zone[1..]),
        b'-' => (-1, &zone[1..]),
        _ => return None,
    };
    let (hours, minutes, seconds) = if rest.contains(':') {
        let mut parts = rest.split(':');
        let h = parts.next()?;
        let m = parts.next().unwrap_or("0");
        let s = parts.next().unwrap_or("0");
        if parts.next().is_some() {
            return None;
        }
        (h, m, s)
    } else {
        match rest.len() {
            1 | 2 => (rest, "0", "0"),
            4 => (&rest[..2], &rest[2..], "0"),
            6 => (&rest[..2], &rest[2..4], &rest[4..]),
            _ => return None,
        }
    };
    let n = |s: &str| -> Option<i64> {
        if s.is_empty() || s.len() > 2 || !s.bytes().all(|b| b.is_ascii_digit()) {
            None
        } else {
            s.parse().ok()
        }
    };
    let (h, m, s) = (n(hours)?, n(minutes)?, n(seconds)?);
    if h > 15 || m > 59 || s > 59 {
        return None;
    }
    Some(sign * (h * 3600 + m * 60 + s))
}

/// `time` input.
pub fn parse_time(text: &str) -> Result<i64, ValueError> {
    match parse_time_and_zone(text) {
        Ok((micros, _)) => Ok(micros),
        Err(()) => Err(datetime_syntax("time without time zone", text)),
    }
}

fn push_clock(out: &mut String, micros: i64) {
    let seconds = micros.div_euclid(MICROS_PER_SECOND);
    let fraction = micros.rem_euclid(MICROS_PER_SECOND);
    out.push_str(&format!(
        "{:02}:{:02}:{:02}",
        seconds / 3600,
        (seconds / 60) % 60,
        seconds % 60
    ));
    if fraction != 0 {
        out.push('.');
        out.push_str(format!("{fraction:06}").trim_end_matches('0'));
    }
}

pub fn format_time(micros: i64) -> String {
    let mut out = String::new();
    push_clock(&mut out, micros);
    out
}

/// Parses a timestamp; the zone offset, if any, is returned separately.
fn parse_timestamp_parts(text: &str, type_name: &str) -> Result<(i64, Option<i64>), ValueError> {
    let (t, bc) = strip_era(text.trim());
    if t.eq_ignore_ascii_case("epoch") {
        return Ok((0, None));
    }
    let Some((days, rest)) = parse_date_prefix(t, bc) else {
        return Err(datetime_syntax(type_name, text));
    };
    let time_part = if let Some(r) = rest.strip_prefix(['T', 't']) {
        Some(r)
    } else if rest.starts_with(char::is_whitespace) {
        Some(rest.trim_start())
    } else if rest.is_empty() {
        None
    } else {
        return Err(datetime_syntax(type_name, text));
    };
    let (micros, zone) = match time_part {
        None | Some("") => (0, None),
        Some(time) => parse_time_and_zone(time).map_err(|_| datetime_syntax(type_name, text))?,
    };
    let (year, _, _) = civil_from_days(days);
    if !(-4712..=MAX_TIMESTAMP_YEAR).contains(&year) {
        return Err(ValueError::new(
            SqlState::DATETIME_FIELD_OVERFLOW,
            format!("timestamp out of range: \"{text}\""),
        ));
    }
    Ok((days * MICROS_PER_DAY + micros, zone))
}

/// `timestamp` input; a zone in the text is ignored, as Postgres does.
pub fn parse_timestamp(text: &str) -> Result<i64, ValueError> {
    parse_timestamp_parts(text, "timestamp").map(|(micros, _)| micros)
}

/// `timestamptz` input; without a zone the session zone (UTC) applies.
pub fn parse_timestamptz(text: &str) -> Result<i64, ValueError> {
    let (micros, zone) = parse_timestamp_parts(text, "timestamp with time zone")?;
    Ok(micros - zone.unwrap_or(0) * MICROS_PER_SECOND)
}

fn push_timestamp(out: &mut String, micros: i64) -> bool {
    let days = micros.div_euclid(MICROS_PER_DAY);
    let time = micros.rem_euclid(MICROS_PER_DAY);
    let bc = push_year_month_day(out, days);
    out.push(' ');
    push_clock(out, time);
    bc
}

pub fn format_timestamp(micros: i64) -> String {
    let mut out = String::new();
    if push_timestamp(&mut out, micros) {
        out.push_str(" BC");
    }
    out
}

/// `timestamptz` in the session zone, UTC: `2025-01-01 00:00:00+00`.
pub fn format_timestamptz(micros: i64) -> String {
    let mut out = String::new();
    let bc = push_timestamp(&mut out, micros);
    out.push_str("+00");
    if bc {
        out.push_str(" BC");
    }
    out
}

// ---------------------------------------------------------------------------
// Intervals
// ---------------------------------------------------------------------------

fn interval_out_of_range() -> ValueError {
    ValueError::new(SqlState::DATETIME_FIELD_OVERFLOW, "interval out of range")
}

/// Accumulates interval fields with overflow checks.
#[derive(Default)]
struct IntervalAcc {
    months: i64,
    days: i64,
    micros: i128,
}

impl IntervalAcc {
    /// Adds `value` (possibly fractional) of a unit: `months_per` months,
    /// `days_per` days or `micros_per` microseconds per unit. A fraction of
    /// a month spills into days (30 per month), of a day into time.
    fn add(
        &mut self,
        int_part: i64,
        frac: f64,
        months_per: i64,
        days_per: i64,
        micros_per: i64,
    ) -> Option<()> {
        if months_per != 0 {
            self.months = self.months.checked_add(int_part.checked_mul(months_per)?)?;
            let frac_months = frac * months_per as f64;
            let whole = frac_months.trunc();
            self.months = self.months.checked_add(whole as i64)?;
            let frac_days = (frac_months - whole) * 30.0;
            let whole_days = frac_days.trunc();
            self.days = self.days.checked_add(whole_days as i64)?;
            self.micros += ((frac_days - whole_days) * MICROS_PER_DAY as f64).round() as i128;
        } else if days_per != 0 {
            self.days = self.days.checked_add(int_part.checked_mul(days_per)?)?;
            let frac_days = frac * days_per as f64;
            let whole = frac_days.trunc();
            self.days = self.days.checked_add(whole as i64)?;
            self.micros += ((frac_days - whole) * MICROS_PER_DAY as f64).round() as i128;
        } else {
            self.micros += i128::from(int_part) * i128::from(micros_per);
            self.micros += (frac * micros_per as f64).round() as i128;
        }
        if self.micros.abs() > i128::from(i64::MAX) {
            return None;
        }
        Some(())
    }

    fn finish(self, negate: bool) -> Option<(i32, i32, i64)> {
        let sign = if negate { -1 } else { 1 };
        let months = i32::try_from(self.months * sign).ok()?;
        let days = i32::try_from(self.days * sign).ok()?;
        let micros = i64::try_from(self.micros * i128::from(sign)).ok()?;
        Some((months, days, micros))
    }
}

/// The unit of an interval field: (months, days, microseconds) per unit.
fn interval_unit(unit: &str) -> Option<(i64, i64, i64)> {
    Some(match unit {
        "microsecond" | "microseconds" | "us" | "usec" | "usecs" | "microsecon" => (0, 0, 1),
        "millisecond" | "milliseconds" | "ms" | "msec" | "msecs" => (0, 0, 1_000),
        "second" | "seconds" | "s" | "sec" | "secs" => (0, 0, MICROS_PER_SECOND),
        "minute" | "minutes" | "m" | "min" | "mins" => (0, 0, 60 * MICROS_PER_SECOND),
        "hour" | "hours" | "h" | "hr" | "hrs" => (0, 0, 3600 * MICROS_PER_SECOND),
        "day" | "days" | "d" => (0, 1, 0),
        "week" | "weeks" | "w" => (0, 7, 0),
        "month" | "months" | "mon" | "mons" => (1, 0, 0),
        "year" | "years" | "y" | "yr" | "yrs" => (12, 0, 0),
        "decade" | "decades" | "dec" | "decs" => (120, 0, 0),
        "century" | "centuries" | "c" | "cent" => (1200, 0, 0),
        "millennium" | "millennia" | "mil" | "mils" => (12_000, 0, 0),
        _ => return None,
    })
}

/// Splits a decimal number into its integer part and signed fraction.
fn split_number(number: &str) -> Option<(i64, f64)> {
    let (negative, digits) = match number.as_bytes().first()? {
        b'-' => (true, &number[1..]),
        b'+' => (false, &number[1..]),
        _ => (false, number),
    };
    let (int_text, frac_text) = digits.split_once('.').unwrap_or((digits, ""));
    if (int_text.is_empty() && frac_text.is_empty())
        || !int_text.bytes().all(|b| b.is_ascii_digit())
        || !frac_text.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let int_part: i64 = if int_text.is_empty() {
        0
    } else {
        int_text.parse().ok()?
    };
    let frac: f64 = if frac_text.is_empty() {
        0.0
    } else {
        format!("0.{frac_text}").parse().ok()?
    };
    Some(if negative {
        (-int_part, -frac)
    } else {
        (int_part, frac)
    })
}

/// `interval` input: Postgres' verbose form (`1 year 2 mons 3 days
/// 04:05:06`, `@ 1 hour ago`, `1.5 days`, `-1 day +02:00`), abbreviations
/// (`1h 30m`), a bare number of seconds, and ISO 8601 (`P1Y2M3DT4H5M6S`).
pub fn parse_interval(text: &str) -> Result<(i32, i32, i64), ValueError> {
    let syntax = || datetime_syntax("interval", text);
    let lower = text.trim().to_ascii_lowercase();
    if let Some(iso) = lower.strip_prefix('p') {
        return parse_iso_interval(iso).ok_or_else(syntax);
    }
    let mut rest = lower.strip_prefix('@').unwrap_or(&lower).trim_start();
    let mut acc = IntervalAcc::default();
    let mut negate = false;
    let mut any = false;
    while !rest.is_empty() {
        if rest == "ago" {
            negate = true;
            break;
        }
        let token_len = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let token = &rest[..token_len];
        if token.contains(':') {
            let (sign, clock) = match token.as_bytes()[0] {
                b'-' => (-1i128, &token[1..]),
                b'+' => (1, &token[1..]),
                _ => (1, token),
            };
            let micros = parse_interval_clock(clock).ok_or_else(syntax)?;
            acc.micros += sign * i128::from(micros);
            rest = rest[token_len..].trim_start();
            any = true;
            continue;
        }
        let number_len = token
            .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '-' | '+')))
            .unwrap_or(token.len());
        if number_len == 0 {
            return Err(syntax());
        }
        let (int_part, frac) = split_number(&token[..number_len]).ok_or_else(syntax)?;
        rest = rest[number_len..].trim_start();
        let unit_len = rest
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        let (months, days, micros) = if unit.is_empty() || unit == "ago" {
            (0, 0, MICROS_PER_SECOND)
        } else {
            rest = &rest[unit_len..];
            interval_unit(unit).ok_or_else(syntax)?
        };
        rest = rest.trim_start();
        acc.add(int_part, frac, months, days, micros)
            .ok_or_else(interval_out_of_range)?;
        any = true;
    }
    if !any {
        return Err(syntax());
    }
    acc.finish(negate).ok_or_else(interval_out_of_range)
}

fn parse_interval_clock(clock: &str) -> Option<i64> {
    let parts: Vec<&str> = clock.split(':').collect();
    let (hours, minutes, seconds) = match parts.as_slice() {
        [h, m] => (*h, *m, "0"),
        [h, m, s] => (*h, *m, *s),
        _ => return None,
    };
    if hours.is_empty() || !hours.bytes().all(|b| b.is_ascii_digit()) || hours.len() > 12 {
        return None;
    }
    let hours: i64 = hours.parse().ok()?;
    if minutes.len() != 2 || !minutes.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let minutes: i64 = minutes.parse().ok()?;
    let (whole, fraction) = seconds.split_once('.').unwrap_or((seconds, ""));
    if whole.is_empty() || whole.len() > 2 || !whole.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let whole: i64 = whole.parse().ok()?;
    if minutes > 59 || whole > 59 {
        return None;
    }
    let mut micros: i64 = 0;
    for (i, b) in fraction.bytes().take(6).enumerate() {
        micros += i64::from(b - b'0') * 10i64.pow(5 - i as u32);
    }
    if fraction.as_bytes().get(6).is_some_and(|b| *b >= b'5') {
        micros += 1;
    }
    hours
        .checked_mul(3600 * MICROS_PER_SECOND)?
        .checked_add((minutes * 60 + whole) * MICROS_PER_SECOND + micros)
}

fn parse_iso_interval(body: &str) -> Option<(i32, i32, i64)> {
    let mut acc = IntervalAcc::default();
    let mut in_time = false;
    let mut rest = body;
    let mut any = false;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('t') {
            in_time = true;
            rest = r;
            continue;
        }
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '-' | '+')))
            .unwrap_or(rest.len());
        let (int_part, frac) = split_number(&rest[..number_len])?;
        let unit = rest[number_len..].chars().next()?;
        rest = &rest[number_len + 1..];
        let (months, days, micros) = match (unit, in_time) {
            ('y', false) => (12, 0, 0),
            ('m', false) => (1, 0, 0),
            ('w', false) => (0, 7, 0),
            ('d', false) => (0, 1, 0),
            ('h', true) => (0, 0, 3600 * MICROS_PER_SECOND),
            ('m', true) => (0, 0, 60 * MICROS_PER_SECOND),
            ('s', true) => (0, 0, MICROS_PER_SECOND),
            _ => return None,
        };
        acc.add(int_part, frac, months, days, micros)?;
        any = true;
    }
    if !any {
        return None;
    }
    acc.finish(false)
}

/// Prints an interval the way Postgres does with `IntervalStyle =
/// postgres`: `1 year 2 mons -3 days +04:05:06.5`. After a negative field,
/// later positive fields carry an explicit `+`.
pub fn format_interval(months: i32, days: i32, micros: i64) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut seen_negative = false;
    let field = |value: i64, unit: &str, parts: &mut Vec<String>, seen_negative: &mut bool| {
        if value == 0 {
            return;
        }
        let sign = if value > 0 && *seen_negative { "+" } else { "" };
        let plural = if value == 1 { "" } else { "s" };
        parts.push(format!("{sign}{value} {unit}{plural}"));
        if value < 0 {
            *seen_negative = true;
        }
    };
    let years = i64::from(months / 12);
    let mons = i64::from(months % 12);
    field(years, "year", &mut parts, &mut seen_negative);
    field(mons, "mon", &mut parts, &mut seen_negative);
    field(i64::from(days), "day", &mut parts, &mut seen_negative);
    if micros != 0 || parts.is_empty() {
        let sign = if micros < 0 {
            "-"
        } else if seen_negative {
            "+"
        } else {
            ""
        };
        let total = micros.unsigned_abs();
        let hours = total / 3_600_000_000;
        let minutes = (total / 60_000_000) % 60;
        let seconds = (total / 1_000_000) % 60;
        let fraction = total % 1_000_000;
        let mut text = format!("{sign}{hours:02}:{minutes:02}:{seconds:02}");
        if fraction != 0 {
            text.push('.');
            text.push_str(format!("{fraction:06}").trim_end_matches('0'));
        }
        parts.push(text);
    }
    parts.join(" ")
}

// ---------------------------------------------------------------------------
// JSON
// ---------------------------------------------------------------------------

/// A parsed JSON document: objects keep their last value per key, in key
/// order; numbers are exact decimals.
#[derive(Debug, Clone, PartialEq)]
enum Json {
    Null,
    Bool(bool),
    Number(String),
    String(String),
    Array(Vec<Json>),
    Object(BTreeMap<String, Json>),
}

struct JsonParser<'a> {
    bytes: &'a [u8],
    text: &'a str,
    at: usize,
}

impl<'a> JsonParser<'a> {
    fn error(&self, what: &str) -> ValueError {
        ValueError::new(
            SqlState::INVALID_TEXT_REPRESENTATION,
            format!("invalid input syntax for type jsonb: {what}"),
        )
        .with_detail(format!("at byte {} of \"{}\"", self.at, self.text))
    }

    fn skip_ws(&mut self) {
        while self
            .bytes
            .get(self.at)
            .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        {
            self.at += 1;
        }
    }

    fn literal(&mut self, word: &str, value: Json) -> Result<Json, ValueError> {
        if self.bytes[self.at..].starts_with(word.as_bytes()) {
            self.at += word.len();
            Ok(value)
        } else {
            Err(self.error("unexpected token"))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json, ValueError> {
        if depth > MAX_NESTING {
            return Err(ValueError::new(
                SqlState::PROGRAM_LIMIT_EXCEEDED,
                "jsonb value is too deeply nested",
            ));
        }
        self.skip_ws();
        match self.bytes.get(self.at) {
            None => Err(self.error("unexpected end of input")),
            Some(b'n') => self.literal("null", Json::Null),
            Some(b't') => self.literal("true", Json::Bool(true)),
            Some(b'f') => self.literal("false", Json::Bool(false)),
            Some(b'"') => Ok(Json::String(self.string()?)),
            Some(b'[') => {
                self.at += 1;
                let mut items = Vec::new();
                self.skip_ws();
                if self.bytes.get(self.at) == Some(&b']') {
                    self.at += 1;
                    return Ok(Json::Array(items));
                }
                loop {
                    items.push(self.value(depth + 1)?);
                    self.skip_ws();
                    match self.bytes.get(self.at) {
                        Some(b',') => self.at += 1,
                        Some(b']') => {
                            self.at += 1;
                            return Ok(Json::Array(items));
                        }
                        _ => return Err(self.error("expected \",\" or \"]\"")),
                    }
                }
            }
            Some(b'{') => {
                self.at += 1;
                let mut object = BTreeMap::new();
                self.skip_ws();
                if self.bytes.get(self.at) == Some(&b'}') {
                    self.at += 1;
                    return Ok(Json::Object(object));
                }
                loop {
                    self.skip_ws();
                    if self.bytes.get(self.at) != Some(&b'"') {
                        return Err(self.error("expected a string key"));
                    }
                    let key = self.string()?;
                    self.skip_ws();
                    if self.bytes.get(self.at) != Some(&b':') {
                        return Err(self.error("expected \":\""));
                    }
                    self.at += 1;
                    let value = self.value(depth + 1)?;
                    object.insert(key, value);
                    self.skip_ws();
                    match self.bytes.get(self.at) {
                        Some(b',') => self.at += 1,
                        Some(b'}') => {
                            self.at += 1;
                            return Ok(Json::Object(object));
                        }
                        _ => return Err(self.error("expected \",\" or \"}\"")),
                    }
                }
            }
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.error("unexpected token")),
        }
    }

    fn number(&mut self) -> Result<Json, ValueError> {
        let start = self.at;
        let digits = |p: &mut Self| {
            let from = p.at;
            while p.bytes.get(p.at).is_some_and(u8::is_ascii_digit) {
                p.at += 1;
            }
            p.at - from
        };
        if self.bytes.get(self.at) == Some(&b'-') {
            self.at += 1;
        }
        let int_start = self.at;
        let n = digits(self);
        if n == 0 || (n > 1 && self.bytes[int_start] == b'0') {
            return Err(self.error("invalid number"));
        }
        if self.bytes.get(self.at) == Some(&b'.') {
            self.at += 1;
            if digits(self) == 0 {
                return Err(self.error("invalid number"));
            }
        }
        if matches!(self.bytes.get(self.at), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.bytes.get(self.at), Some(b'+' | b'-')) {
                self.at += 1;
            }
            if digits(self) == 0 {
                return Err(self.error("invalid number"));
            }
        }
        let text = &self.text[start..self.at];
        let decimal = Decimal::parse(text)?.ok_or_else(|| self.error("invalid number"))?;
        check_bare_numeric(&decimal)?;
        Ok(Json::Number(decimal.format(None)))
    }

    fn hex4(&mut self) -> Result<u32, ValueError> {
        let digits = self
            .bytes
            .get(self.at..self.at + 4)
            .ok_or_else(|| self.error("invalid unicode escape"))?;
        let mut value = 0;
        for d in digits {
            value = value * 16
                + (*d as char)
                    .to_digit(16)
                    .ok_or_else(|| self.error("invalid unicode escape"))?;
        }
        self.at += 4;
        Ok(value)
    }

    fn string(&mut self) -> Result<String, ValueError> {
        self.at += 1;
        let mut out = String::new();
        loop {
            let start = self.at;
            while self
                .bytes
                .get(self.at)
                .is_some_and(|b| *b != b'"' && *b != b'\\' && *b >= 0x20)
            {
                self.at += 1;
            }
            out.push_str(&self.text[start..self.at]);
            match self.bytes.get(self.at) {
                None => return Err(self.error("unterminated string")),
                Some(b'"') => {
                    self.at += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.at += 1;
                    let escape = self
                        .bytes
                        .get(self.at)
                        .copied()
                        .ok_or_else(|| self.error("unterminated string"))?;
                    self.at += 1;
                    match escape {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let first = self.hex4()?;
                            let code = if (0xD800..0xDC00).contains(&first) {
                                if !self.bytes[self.at..].starts_with(b"\\u") {
                                    return Err(self.error("invalid unicode surrogate pair"));
                                }
                                self.at += 2;
                                let second = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&second) {
                                    return Err(self.error("invalid unicode surrogate pair"));
                                }
                                0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
                            } else {
                                first
                            };
                            if code == 0 {
                                return Err(ValueError::new(
                                    SqlState::UNTRANSLATABLE_CHARACTER,
                                    "unsupported Unicode escape sequence",
                                )
                                .with_detail("\\u0000 cannot be converted to text."));
                            }
                            out.push(
                                char::from_u32(code)
                                    .ok_or_else(|| self.error("invalid unicode escape"))?,
                            );
                        }
                        _ => return Err(self.error("invalid escape")),
                    }
                }
                Some(_) => return Err(self.error("control character in string")),
            }
        }
    }
}

fn write_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn write_json(out: &mut String, json: &Json) {
    match json {
        Json::Null => out.push_str("null"),
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Json::Number(n) => out.push_str(n),
        Json::String(s) => write_json_string(out, s),
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(out, item);
            }
            out.push(']');
        }
        Json::Object(object) => {
            out.push('{');
            for (i, (key, value)) in object.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json_string(out, key);
                out.push(':');
                write_json(out, value);
            }
            out.push('}');
        }
    }
}

/// `jsonb` input, normalized the way Materialize prints jsonb: no
/// insignificant whitespace, object keys in order with the last of
/// duplicates kept, numbers as exact decimals (`1.0` is `1`, `1e2` is `100`).
pub fn parse_jsonb(text: &str) -> Result<String, ValueError> {
    let mut parser = JsonParser {
        bytes: text.as_bytes(),
        text,
        at: 0,
    };
    let json = parser.value(0)?;
    parser.skip_ws();
    if parser.at != parser.bytes.len() {
        return Err(parser.error("trailing characters"));
    }
    let mut out = String::new();
    write_json(&mut out, &json);
    Ok(out)
}

// ---------------------------------------------------------------------------
// Lists, maps, records, ranges
// ---------------------------------------------------------------------------

struct Scanner<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Scanner<'a> {
    fn peek(&self) -> Option<char> {
        self.text[self.at..].chars().next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.at += c.len_utf8();
        Some(c)
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.bump();
        }
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn rest(&self) -> &'a str {
        &self.text[self.at..]
    }

    /// A double-quoted string with backslash escapes; the opening quote has
    /// not been consumed. With `doubled`, `""` is a quote too (records,
    /// ranges).
    fn quoted(&mut self, doubled: bool) -> Option<String> {
        self.bump();
        let mut out = String::new();
        loop {
            match self.bump()? {
                '"' if doubled && self.peek() == Some('"') => {
                    self.bump();
                    out.push('"');
                }
                '"' => return Some(out),
                '\\' => out.push(self.bump()?),
                c => out.push(c),
            }
        }
    }

    /// A balanced `{...}` run, returned verbatim (quotes respected).
    fn balanced_braces(&mut self) -> Option<&'a str> {
        let start = self.at;
        let mut depth = 0usize;
        let mut in_quotes = false;
        loop {
            let c = self.bump()?;
            match c {
                '\\' if in_quotes => {
                    self.bump()?;
                }
                '"' => in_quotes = !in_quotes,
                '{' if !in_quotes => depth += 1,
                '}' if !in_quotes => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(&self.text[start..self.at]);
                    }
                }
                _ => {}
            }
        }
    }

    /// An unquoted run up to one of `stops`, with backslash escapes; trailing
    /// whitespace is dropped.
    fn unquoted(&mut self, stops: &[char]) -> Option<String> {
        let mut out = String::new();
        let mut keep = 0;
        loop {
            match self.peek() {
                None => return None,
                Some(c) if stops.contains(&c) => break,
                Some('\\') => {
                    self.bump();
                    out.push(self.bump()?);
                    keep = out.len();
                }
                Some(c) => {
                    self.bump();
                    out.push(c);
                    if !c.is_whitespace() {
                        keep = out.len();
                    }
                }
            }
        }
        out.truncate(keep);
        Some(out)
    }
}

/// One list element or map value: `None` for NULL, else its text (or the
/// verbatim nested `{...}` when `nested` allows it).
fn scan_element(
    scanner: &mut Scanner<'_>,
    nested: bool,
    stops: &[char],
) -> Option<Option<(String, bool)>> {
    scanner.skip_ws();
    match scanner.peek()? {
        '"' => {
            let text = scanner.quoted(false)?;
            scanner.skip_ws();
            Some(Some((text, true)))
        }
        '{' if nested => {
            let text = scanner.balanced_braces()?.to_string();
            scanner.skip_ws();
            Some(Some((text, true)))
        }
        _ => {
            let text = scanner.unquoted(stops)?;
            if text.is_empty() {
                return None;
            }
            if text.eq_ignore_ascii_case("null") {
                Some(None)
            } else {
                Some(Some((text, false)))
            }
        }
    }
}

fn parse_list(text: &str, element: &SqlScalarType, depth: usize) -> Result<Datum, ValueError> {
    let malformed = |detail: &str| {
        ValueError::new(
            SqlState::INVALID_TEXT_REPRESENTATION,
            format!("invalid input syntax for type list: {detail}: \"{text}\""),
        )
    };
    let mut scanner = Scanner { text, at: 0 };
    scanner.skip_ws();
    if !scanner.eat('{') {
        return Err(malformed("expected '{'"));
    }
    let nested = matches!(
        element,
        SqlScalarType::List { .. } | SqlScalarType::Map { .. }
    );
    let mut elements = Vec::new();
    scanner.skip_ws();
    if !scanner.eat('}') {
        loop {
            let item = scan_element(&mut scanner, nested, &[',', '}'])
                .ok_or_else(|| malformed("malformed element"))?;
            elements.push(match item {
                None => Datum::Null,
                Some((text, _)) => parse_nested(&text, element, depth + 1)?,
            });
            match scanner.bump() {
                Some(',') => continue,
                Some('}') => break,
                _ => return Err(malformed("expected ',' or '}'")),
            }
        }
    }
    scanner.skip_ws();
    if !scanner.rest().is_empty() {
        return Err(malformed("junk after closing right brace"));
    }
    Ok(Datum::List(elements))
}

fn parse_map(text: &str, value: &SqlScalarType, depth: usize) -> Result<Datum, ValueError> {
    let malformed = |detail: &str| {
        ValueError::new(
            SqlState::INVALID_TEXT_REPRESENTATION,
            format!("invalid input syntax for type map: {detail}: \"{text}\""),
        )
    };
    let mut scanner = Scanner { text, at: 0 };
    scanner.skip_ws();
    if !scanner.eat('{') {
        return Err(malformed("expected '{'"));
    }
    let nested = matches!(
        value,
        SqlScalarType::Map { .. } | SqlScalarType::List { .. }
    );
    let mut entries: BTreeMap<String, Datum> = BTreeMap::new();
    scanner.skip_ws();
    if !scanner.eat('}') {
        loop {
            scanner.skip_ws();
            let key = if scanner.peek() == Some('"') {
                let key = scanner
                    .quoted(false)
                    .ok_or_else(|| malformed("unterminated quoted key"))?;
                scanner.skip_ws();
                key
            } else {
                let key = scanner
                    .unquoted(&['=', ',', '}'])
                    .ok_or_else(|| malformed("expected \"=>\""))?;
                if key.is_empty() {
                    return Err(malformed("expected key"));
                }
                key
            };
            if !(scanner.eat('=') && scanner.eat('>')) {
                return Err(malformed("expected \"=>\""));
            }
            let item = scan_element(&mut scanner, nested, &[',', '}'])
                .ok_or_else(|| malformed("malformed value"))?;
            let value = match item {
                None => Datum::Null,
                Some((text, _)) => parse_nested(&text, value, depth + 1)?,
            };
            entries.insert(key, value);
            match scanner.bump() {
                Some(',') => continue,
                Some('}') => break,
                _ => return Err(malformed("expected ',' or '}'")),
            }
        }
    }
    scanner.skip_ws();
    if !scanner.rest().is_empty() {
        return Err(malformed("junk after closing right brace"));
    }
    Ok(Datum::Map(entries.into_iter().collect()))
}

/// Reads one field of a record or bound of a range (Postgres' composite
/// syntax): quoted with `""` or `\` escapes, or unquoted up to a stop; an
/// empty unquoted field is NULL (`None`).
fn scan_composite_field(scanner: &mut Scanner<'_>, stops: &[char]) -> Option<Option<String>> {
    let mut out = String::new();
    let mut quoted_any = false;
    loop {
        match scanner.peek()? {
            c if stops.contains(&c) => break,
            '"' => {
                quoted_any = true;
                let part = scanner.quoted(true)?;
                out.push_str(&part);
            }
            '\\' => {
                scanner.bump();
                out.push(scanner.bump()?);
                quoted_any = true;
            }
            c => {
                scanner.bump();
                out.push(c);
            }
        }
    }
    if out.is_empty() && !quoted_any {
        Some(None)
    } else {
        Some(Some(out))
    }
}

fn parse_record(
    text: &str,
    fields: &[(String, SqlScalarType, bool)],
    depth: usize,
) -> Result<Datum, ValueError> {
    let malformed = |detail: &str| {
        ValueError::new(
            SqlState::INVALID_TEXT_REPRESENTATION,
            format!("malformed record literal: \"{text}\""),
        )
        .with_detail(detail.to_string())
    };
    let mut scanner = Scanner { text, at: 0 };
    scanner.skip_ws();
    if !scanner.eat('(') {
        return Err(malformed("Missing left parenthesis."));
    }
    let mut values = Vec::with_capacity(fields.len());
    for (i, (name, ty, nullable)) in fields.iter().enumerate() {
        let field = scan_composite_field(&mut scanner, &[',', ')'])
            .ok_or_else(|| malformed("Unexpected end of input."))?;
        let value = match field {
            None => {
                if !nullable {
                    return Err(ValueError::new(
                        SqlState::NOT_NULL_VIOLATION,
                        format!("null value in record field \"{name}\""),
                    ));
                }
                Datum::Null
            }
            Some(text) => parse_nested(&text, ty, depth + 1)?,
        };
        values.push(value);
        let expected = if i + 1 == fields.len() { ')' } else { ',' };
        match scanner.bump() {
            Some(c) if c == expected => {}
            Some(',') => return Err(malformed("Too many columns.")),
            _ => return Err(malformed("Too few columns.")),
        }
    }
    if fields.is_empty() && !scanner.eat(')') {
        return Err(malformed("Too many columns."));
    }
    scanner.skip_ws();
    if !scanner.rest().is_empty() {
        return Err(malformed("Junk after right parenthesis."));
    }
    Ok(Datum::Record(values))
}

/// The name Postgres gives a range of `element`.
pub fn range_type_name(element: &SqlScalarType) -> &'static str {
    match element {
        SqlScalarType::Int32 => "int4range",
        SqlScalarType::Int64 => "int8range",
        SqlScalarType::Date => "daterange",
        SqlScalarType::Timestamp => "tsrange",
        SqlScalarType::TimestampTz => "tstzrange",
        _ => "numrange",
    }
}

fn parse_range(text: &str, element: &SqlScalarType, depth: usize) -> Result<Datum, ValueError> {
    let type_name = range_type_name(element);
    let malformed = |detail: &str| {
        ValueError::new(
            SqlState::INVALID_TEXT_REPRESENTATION,
            format!("malformed range literal: \"{text}\""),
        )
        .with_detail(detail.to_string())
    };
    let trimmed = text.trim();
    if trimmed.eq_ignore_ascii_case("empty") {
        return Ok(Datum::Range(None));
    }
    let mut scanner = Scanner {
        text: trimmed,
        at: 0,
    };
    let lower_inclusive = match scanner.bump() {
        Some('[') => true,
        Some('(') => false,
        _ => return Err(malformed("Missing left parenthesis or bracket.")),
    };
    let lower = scan_composite_field(&mut scanner, &[','])
        .ok_or_else(|| malformed("Missing comma after lower bound."))?;
    scanner.bump();
    let upper = scan_composite_field(&mut scanner, &[')', ']'])
        .ok_or_else(|| malformed("Missing right parenthesis or bracket."))?;
    let upper_inclusive = matches!(scanner.bump(), Some(']'));
    if !scanner.rest().trim().is_empty() {
        return Err(malformed("Junk after right parenthesis or bracket."));
    }
    let bound = |b: Option<String>| -> Result<Option<Datum>, ValueError> {
        match b {
            None => Ok(None),
            Some(text) => parse_nested(&text, element, depth + 1).map(Some),
        }
    };
    let lower = bound(lower)?;
    let upper = bound(upper)?;
    make_range(lower, upper, lower_inclusive, upper_inclusive, type_name)
}

/// Compares two range bounds of the same element type.
pub fn compare_bound_values(a: &Datum, b: &Datum) -> Option<Ordering> {
    Some(match (a, b) {
        (Datum::Int32(a), Datum::Int32(b)) => a.cmp(b),
        (Datum::Int64(a), Datum::Int64(b)) => a.cmp(b),
        (Datum::Date(a), Datum::Date(b)) => a.cmp(b),
        (Datum::Timestamp(a), Datum::Timestamp(b)) => a.cmp(b),
        (Datum::TimestampTz(a), Datum::TimestampTz(b)) => a.cmp(b),
        (Datum::Numeric(a), Datum::Numeric(b)) => {
            match (Decimal::parse(a).ok()?, Decimal::parse(b).ok()?) {
                (None, None) => Ordering::Equal,
                (None, Some(_)) => Ordering::Greater,
                (Some(_), None) => Ordering::Less,
                (Some(a), Some(b)) => a.cmp(&b),
            }
        }
        _ => return None,
    })
}

/// The next value of a discrete range element (`None` on overflow).
fn successor(datum: &Datum, type_name: &str) -> Result<Datum, ValueError> {
    let overflow = |what: &str| ValueError::out_of_range(format!("{what} out of range"));
    let _ = type_name;
    Ok(match datum {
        Datum::Int32(v) => Datum::Int32(v.checked_add(1).ok_or_else(|| overflow("integer"))?),
        Datum::Int64(v) => Datum::Int64(v.checked_add(1).ok_or_else(|| overflow("bigint"))?),
        Datum::Date(v) => Datum::Date(v.checked_add(1).ok_or_else(|| overflow("date"))?),
        other => other.clone(),
    })
}

/// Builds a range the way Postgres' `range_in`/constructors do: checks the
/// bounds' order, canonicalizes discrete ranges to `[a,b)`, and makes a
/// range with no points `empty`.
pub fn make_range(
    lower: Option<Datum>,
    upper: Option<Datum>,
    mut lower_inclusive: bool,
    mut upper_inclusive: bool,
    type_name: &str,
) -> Result<Datum, ValueError> {
    let lower = lower.filter(|d| !matches!(d, Datum::Null));
    let upper = upper.filter(|d| !matches!(d, Datum::Null));
    if let (Some(l), Some(u)) = (&lower, &upper) {
        let order = compare_bound_values(l, u).ok_or_else(|| {
            ValueError::new(
                SqlState::DATATYPE_MISMATCH,
                format!("range bounds of {type_name} have different types"),
            )
        })?;
        if order == Ordering::Greater {
            return Err(ValueError::new(
                SqlState::DATA_EXCEPTION,
                "range lower bound must be less than or equal to range upper bound",
            ));
        }
    }
    let discrete = matches!(
        lower.as_ref().or(upper.as_ref()),
        Some(Datum::Int32(_) | Datum::Int64(_) | Datum::Date(_))
    );
    let mut lower = lower;
    let mut upper = upper;
    if discrete {
        if let Some(l) = &lower
            && !lower_inclusive
        {
            lower = Some(successor(l, type_name)?);
            lower_inclusive = true;
        }
        if let Some(u) = &upper
            && upper_inclusive
        {
            upper = Some(successor(u, type_name)?);
            upper_inclusive = false;
        }
    }
    if lower.is_none() {
        lower_inclusive = false;
    }
    if upper.is_none() {
        upper_inclusive = false;
    }
    if let (Some(l), Some(u)) = (&lower, &upper) {
        let order = compare_bound_values(l, u).unwrap_or(Ordering::Less);
        if order == Ordering::Greater
            || (order == Ordering::Equal && !(lower_inclusive && upper_inclusive))
        {
            return Ok(Datum::Range(None));
        }
    }
    Ok(Datum::Range(Some(Box::new(RangeBounds {
        lower,
        upper,
        lower_inclusive,
        upper_inclusive,
    }))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use SqlScalarType as S;

    fn round_trip(text: &str, ty: &SqlScalarType, expected: &str) {
        let datum = parse_datum(text, ty).unwrap_or_else(|e| panic!("{text}: {e}"));
        let printed = format_datum(&datum);
        assert_eq!(printed, expected, "{text} as {ty}");
        // The printed form reads back as the same value.
        let again = parse_datum(&printed, ty).unwrap();
        assert_eq!(format_datum(&again), printed, "{printed}");
    }

    fn error(text: &str, ty: &SqlScalarType) -> ValueError {
        parse_datum(text, ty).expect_err(text)
    }

    fn numeric(p: Option<u8>, s: Option<u8>) -> SqlScalarType {
        S::Numeric {
            precision: p,
            max_scale: s,
        }
    }

    #[test]
    fn booleans() {
        for t in ["t", "TRUE", " yes ", "on", "1", "tr"] {
            assert_eq!(parse_datum(t, &S::Bool).unwrap(), Datum::Bool(true), "{t}");
        }
        for t in ["f", "false", "NO", "off", "0"] {
            assert_eq!(parse_datum(t, &S::Bool).unwrap(), Datum::Bool(false), "{t}");
        }
        let e = error("maybe", &S::Bool);
        assert_eq!(e.code, SqlState::INVALID_TEXT_REPRESENTATION);
        assert_eq!(
            e.message,
            "invalid input syntax for type boolean: \"maybe\""
        );
        assert!(parse_datum("o", &S::Bool).is_err());
    }

    #[test]
    fn integers_and_their_limits() {
        round_trip(" 42 ", &S::Int32, "42");
        round_trip("-32768", &S::Int16, "-32768");
        round_trip("9223372036854775807", &S::Int64, "9223372036854775807");
        round_trip("-9223372036854775808", &S::Int64, "-9223372036854775808");
        round_trip("65535", &S::UInt16, "65535");
        round_trip("4294967295", &S::UInt32, "4294967295");
        round_trip("18446744073709551615", &S::UInt64, "18446744073709551615");
        let e = error("32768", &S::Int16);
        assert_eq!(e.code, SqlState::NUMERIC_VALUE_OUT_OF_RANGE);
        assert_eq!(
            e.message,
            "value \"32768\" is out of range for type smallint"
        );
        assert_eq!(
            error("-1", &S::UInt64).code,
            SqlState::NUMERIC_VALUE_OUT_OF_RANGE
        );
        assert_eq!(
            error("12a", &S::Int32).message,
            "invalid input syntax for type integer: \"12a\""
        );
        assert!(parse_datum("", &S::Int32).is_err());
    }

    #[test]
    fn floats_print_like_postgres() {
        round_trip("1.5", &S::Float64, "1.5");
        round_trip("1e20", &S::Float64, "1e+20");
        round_trip("1.5e-5", &S::Float64, "1.5e-05");
        round_trip("123456789012345", &S::Float64, "123456789012345");
        round_trip("0.1", &S::Float32, "0.1");
        round_trip("1000000", &S::Float32, "1e+06");
        round_trip("123456", &S::Float32, "123456");
        round_trip("NaN", &S::Float64, "NaN");
        round_trip("-Infinity", &S::Float64, "-Infinity");
        round_trip("inf", &S::Float32, "Infinity");
        round_trip("-0", &S::Float64, "-0");
        assert_eq!(
            error("1e400", &S::Float64).code,
            SqlState::NUMERIC_VALUE_OUT_OF_RANGE
        );
        assert_eq!(
            error("1e40", &S::Float32).code,
            SqlState::NUMERIC_VALUE_OUT_OF_RANGE
        );
        assert_eq!(
            error("1e-400", &S::Float64).code,
            SqlState::NUMERIC_VALUE_OUT_OF_RANGE
        );
        assert_eq!(
            error("abc", &S::Float64).code,
            SqlState::INVALID_TEXT_REPRESENTATION
        );
        assert!(parse_datum("infinityx", &S::Float64).is_err());
    }

    #[test]
    fn numerics_round_to_scale_and_check_precision() {
        round_trip("1.5", &numeric(Some(10), Some(2)), "1.50");
        round_trip("1.005", &numeric(Some(10), Some(2)), "1.01");
        round_trip("-1.005", &numeric(Some(10), Some(2)), "-1.01");
        round_trip("-0.001", &numeric(Some(10), Some(2)), "0.00");
        round_trip("999.994", &numeric(Some(5), Some(2)), "999.99");
        round_trip("12.5", &numeric(Some(3), None), "13");
        round_trip("1.500", &numeric(None, None), "1.5");
        round_trip("1e3", &numeric(None, None), "1000");
        round_trip("-.5", &numeric(None, None), "-0.5");
        round_trip("00012.3400", &numeric(None, None), "12.34");
        round_trip("NaN", &numeric(Some(10), Some(2)), "NaN");
        round_trip(
            "123456789012345678901234567890123456789",
            &numeric(None, None),
            "123456789012345678901234567890123456789",
        );
        let e = error("999.995", &numeric(Some(5), Some(2)));
        assert_eq!(e.code, SqlState::NUMERIC_VALUE_OUT_OF_RANGE);
        assert_eq!(e.message, "numeric field overflow");
        assert_eq!(
            e.detail.as_deref(),
            Some(
                "A field with precision 5, scale 2 must round to an absolute value less than 10^3."
            )
        );
        assert!(parse_datum("1e1001", &numeric(None, None)).is_err());
        assert!(
            parse_datum(
                "1234567890123456789012345678901234567890",
                &numeric(None, None)
            )
            .is_err()
        );
        assert_eq!(
            error("1.2.3", &numeric(None, None)).code,
            SqlState::INVALID_TEXT_REPRESENTATION
        );
        assert!(parse_datum("", &numeric(None, None)).is_err());
        assert!(parse_datum("e5", &numeric(None, None)).is_err());
    }

    #[test]
    fn decimals_compare_by_value() {
        let d = |s: &str| Decimal::parse(s).unwrap().unwrap();
        assert!(d("-2") < d("-1.5"));
        assert!(d("0.10") == d("0.1").clone() || d("0.10").cmp(&d("0.1")) == Ordering::Equal);
        assert!(d("10") > d("9.99"));
        assert_eq!(d("-0").cmp(&d("0")), Ordering::Equal);
    }

    #[test]
    fn varchar_length_is_checked_on_assignment() {
        let ty = S::VarChar {
            max_length: Some(3),
        };
        round_trip("abc", &ty, "abc");
        round_trip("äöü", &ty, "äöü");
        assert_eq!(
            parse_datum("ab   ", &ty).unwrap(),
            Datum::Text("ab ".into())
        );
        let e = error("abcd", &ty);
        assert_eq!(e.code, SqlState::STRING_DATA_RIGHT_TRUNCATION);
        assert_eq!(e.message, "value too long for type character varying(3)");
        round_trip(
            "anything at all",
            &S::VarChar { max_length: None },
            "anything at all",
        );
    }

    #[test]
    fn bytea_hex_and_escape() {
        round_trip("\\xDEADbeef", &S::Bytes, "\\xdeadbeef");
        round_trip("\\x", &S::Bytes, "\\x");
        round_trip("\\x de ad", &S::Bytes, "\\xdead");
        assert_eq!(
            parse_datum("a\\\\b\\001", &S::Bytes).unwrap(),
            Datum::Bytes(vec![b'a', b'\\', b'b', 1])
        );
        assert_eq!(
            error("\\xabc", &S::Bytes).message,
            "invalid hexadecimal data: odd number of digits"
        );
        assert_eq!(
            error("\\xzz", &S::Bytes).message,
            "invalid hexadecimal digit: \"z\""
        );
        assert!(parse_datum("a\\9", &S::Bytes).is_err());
    }

    #[test]
    fn uuids() {
        let canonical = "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11";
        round_trip(canonical, &S::Uuid, canonical);
        round_trip("A0EEBC999C0B4EF8BB6D6BB9BD380A11", &S::Uuid, canonical);
        round_trip("{a0eebc99-9c0b4ef8-bb6d6bb9-bd380a11}", &S::Uuid, canonical);
        assert!(parse_datum("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1", &S::Uuid).is_err());
        assert!(parse_datum("-a0eebc999c0b4ef8bb6d6bb9bd380a11", &S::Uuid).is_err());
        assert!(parse_datum("a0eebc999c0b4ef8bb6d6bb9bd380a11-", &S::Uuid).is_err());
        assert!(parse_datum("g0eebc999c0b4ef8bb6d6bb9bd380a11", &S::Uuid).is_err());
    }

    #[test]
    fn dates_and_times() {
        round_trip("2024-02-29", &S::Date, "2024-02-29");
        round_trip("1970-01-01", &S::Date, "1970-01-01");
        round_trip("0044-03-15 BC", &S::Date, "0044-03-15 BC");
        round_trip("4714-11-24 BC", &S::Date, "4714-11-24 BC");
        round_trip("5874897-12-31", &S::Date, "5874897-12-31");
        round_trip("2024-01-02 10:00:00", &S::Date, "2024-01-02");
        assert_eq!(days_from_civil(-4713, 11, 24), i64::from(MIN_DATE_DAYS));
        assert_eq!(days_from_civil(5_874_897, 12, 31), i64::from(MAX_DATE_DAYS));
        assert_eq!(parse_datum("1970-01-02", &S::Date).unwrap(), Datum::Date(1));
        assert_eq!(
            error("2023-02-29", &S::Date).code,
            SqlState::INVALID_DATETIME_FORMAT
        );
        assert_eq!(
            error("5874898-01-01", &S::Date).code,
            SqlState::DATETIME_FIELD_OVERFLOW
        );
        assert!(parse_datum("2024-13-01", &S::Date).is_err());
        assert!(parse_datum("0000-01-01", &S::Date).is_err());
        assert!(parse_datum("yesterday", &S::Date).is_err());

        round_trip("01:02:03.5", &S::Time, "01:02:03.5");
        round_trip("23:59", &S::Time, "23:59:00");
        round_trip("00:00:00.0000005", &S::Time, "00:00:00.000001");
        round_trip("24:00:00", &S::Time, "24:00:00");
        assert!(parse_datum("24:00:01", &S::Time).is_err());
        assert!(parse_datum("12:60", &S::Time).is_err());
        assert!(parse_datum("1:2:3:4", &S::Time).is_err());
    }

    #[test]
    fn timestamps_in_iso_forms() {
        round_trip(
            "2025-11-30 00:00:00.123",
            &S::Timestamp,
            "2025-11-30 00:00:00.123",
        );
        round_trip("2025-11-30T12:34:56", &S::Timestamp, "2025-11-30 12:34:56");
        round_trip("2025-11-30", &S::Timestamp, "2025-11-30 00:00:00");
        round_trip(
            "2025-11-30 10:00:00+05",
            &S::Timestamp,
            "2025-11-30 10:00:00",
        );
        round_trip(
            "1969-12-31 23:59:59.999999",
            &S::Timestamp,
            "1969-12-31 23:59:59.999999",
        );
        round_trip(
            "0001-01-01 00:00:00 BC",
            &S::Timestamp,
            "0001-01-01 00:00:00 BC",
        );
        round_trip(
            "2025-11-30 10:00:00+02",
            &S::TimestampTz,
            "2025-11-30 08:00:00+00",
        );
        round_trip(
            "2025-11-30T10:00:00Z",
            &S::TimestampTz,
            "2025-11-30 10:00:00+00",
        );
        round_trip(
            "2025-11-30 10:00:00 UTC",
            &S::TimestampTz,
            "2025-11-30 10:00:00+00",
        );
        round_trip(
            "2025-11-30 10:00:00-05:30",
            &S::TimestampTz,
            "2025-11-30 15:30:00+00",
        );
        round_trip(
            "2025-11-30 10:00:00.5-0530",
            &S::TimestampTz,
            "2025-11-30 15:30:00.5+00",
        );
        assert_eq!(
            parse_datum("2025-11-30 00:00:00.123+00", &S::TimestampTz).unwrap(),
            Datum::TimestampTz(1_764_460_800_123_000)
        );
        assert!(parse_datum("2025-11-30X10:00", &S::Timestamp).is_err());
        assert!(parse_datum("2025-11-30 10:00 Mars/Olympus", &S::TimestampTz).is_err());
        assert_eq!(
            error("300000-01-01", &S::Timestamp).code,
            SqlState::DATETIME_FIELD_OVERFLOW
        );
    }

    #[test]
    fn intervals_in_postgres_forms() {
        let iv = |m, d, us| Datum::Interval {
            months: m,
            days: d,
            micros: us,
        };
        round_trip("1 day 02:00:00", &S::Interval, "1 day 02:00:00");
        round_trip(
            "1 year 2 months 3 days 4 hours 5 minutes 6.789 seconds",
            &S::Interval,
            "1 year 2 mons 3 days 04:05:06.789",
        );
        round_trip("-1 year", &S::Interval, "-1 years");
        round_trip("-1 day 1 hour", &S::Interval, "-1 days +01:00:00");
        round_trip("1 day -00:00:01", &S::Interval, "1 day -00:00:01");
        round_trip("-1 month 1 day", &S::Interval, "-1 mons +1 day");
        round_trip("1.5 days", &S::Interval, "1 day 12:00:00");
        round_trip("1h 30m", &S::Interval, "01:30:00");
        round_trip("1h30m", &S::Interval, "01:30:00");
        round_trip("10", &S::Interval, "00:00:10");
        round_trip("@ 2 hours ago", &S::Interval, "-02:00:00");
        round_trip("0", &S::Interval, "00:00:00");
        round_trip(
            "P1Y2M3DT4H5M6S",
            &S::Interval,
            "1 year 2 mons 3 days 04:05:06",
        );
        round_trip("PT0.5S", &S::Interval, "00:00:00.5");
        round_trip("1 week", &S::Interval, "7 days");
        round_trip("1.5 months", &S::Interval, "1 mon 15 days");
        round_trip("100:00:00", &S::Interval, "100:00:00");
        assert_eq!(
            parse_datum("1m", &S::Interval).unwrap(),
            iv(0, 0, 60_000_000)
        );
        assert_eq!(parse_datum("2 mons", &S::Interval).unwrap(), iv(2, 0, 0));
        assert_eq!(
            error("1 fortnight", &S::Interval).code,
            SqlState::INVALID_DATETIME_FORMAT
        );
        assert!(parse_datum("", &S::Interval).is_err());
        assert!(parse_datum("P", &S::Interval).is_err());
        assert_eq!(
            error("999999999999 years", &S::Interval).code,
            SqlState::DATETIME_FIELD_OVERFLOW
        );
        assert!(parse_datum("9223372036854775807 hours", &S::Interval).is_err());
        assert!(format_interval(i32::MIN, i32::MIN, i64::MIN).len() > 10);
    }

    #[test]
    fn jsonb_is_normalized() {
        round_trip(
            r#"{"b": 1, "a": [1, 2.50, "x"]}"#,
            &S::Jsonb,
            r#"{"a":[1,2.5,"x"],"b":1}"#,
        );
        round_trip(r#"{"a": 1, "a": 2}"#, &S::Jsonb, r#"{"a":2}"#);
        round_trip("1e2", &S::Jsonb, "100");
        round_trip("-0.0", &S::Jsonb, "0");
        round_trip(" null ", &S::Jsonb, "null");
        round_trip(
            r#""\u00e9\n\"q\"\\ \ud83d\ude00""#,
            &S::Jsonb,
            "\"é\\n\\\"q\\\"\\\\ 😀\"",
        );
        round_trip(r#""\u0001""#, &S::Jsonb, r#""\u0001""#);
        round_trip("[]", &S::Jsonb, "[]");
        round_trip("{}", &S::Jsonb, "{}");
        round_trip(r#"{"ü": "ö"}"#, &S::Jsonb, r#"{"ü":"ö"}"#);
        for bad in [
            "{",
            "[1,]",
            "01",
            "1.",
            "tru",
            "\"a",
            "{\"a\" 1}",
            "[1] x",
            "\"\\ud800\"",
            "NaN",
            "\"\u{1}\"",
        ] {
            let e = error(bad, &S::Jsonb);
            assert_eq!(e.code, SqlState::INVALID_TEXT_REPRESENTATION, "{bad}");
        }
        assert_eq!(
            error(r#""\u0000""#, &S::Jsonb).code,
            SqlState::UNTRANSLATABLE_CHARACTER
        );
        let deep = format!("{}{}", "[".repeat(1000), "]".repeat(1000));
        assert_eq!(
            error(&deep, &S::Jsonb).code,
            SqlState::PROGRAM_LIMIT_EXCEEDED
        );
    }

    fn list(element: SqlScalarType) -> SqlScalarType {
        S::List {
            element: Box::new(element),
        }
    }

    fn map(value: SqlScalarType) -> SqlScalarType {
        S::Map {
            value: Box::new(value),
        }
    }

    fn range(element: SqlScalarType) -> SqlScalarType {
        S::Range {
            element: Box::new(element),
        }
    }

    #[test]
    fn lists() {
        round_trip("{1,2,3}", &list(S::Int32), "{1,2,3}");
        round_trip(" { 1 , NULL , 3 } ", &list(S::Int32), "{1,NULL,3}");
        round_trip("{}", &list(S::Int32), "{}");
        round_trip(
            "{{1,2},{},{NULL}}",
            &list(list(S::Int32)),
            "{{1,2},{},{NULL}}",
        );
        round_trip(
            r#"{a,"b c","","NULL",NULL,"q\"uote","back\\slash",é}"#,
            &list(S::Text),
            r#"{a,"b c","","NULL",NULL,"q\"uote","back\\slash",é}"#,
        );
        round_trip(r#"{"{a=>1}"}"#, &list(map(S::Int32)), "{{a=>1}}");
        round_trip("{{a=>1}}", &list(map(S::Int32)), "{{a=>1}}");
        round_trip(
            r#"{"2024-01-01 10:00:00"}"#,
            &list(S::Timestamp),
            r#"{"2024-01-01 10:00:00"}"#,
        );
        assert!(parse_datum("{1,2", &list(S::Int32)).is_err());
        assert!(parse_datum("{1,,2}", &list(S::Int32)).is_err());
        assert!(parse_datum("1,2", &list(S::Int32)).is_err());
        assert!(parse_datum("{1} x", &list(S::Int32)).is_err());
        assert_eq!(
            error("{x}", &list(S::Int32)).code,
            SqlState::INVALID_TEXT_REPRESENTATION
        );
        assert!(parse_datum("{\"a}", &list(S::Text)).is_err());
        let mut nested = list(S::Int32);
        for _ in 0..200 {
            nested = list(nested);
        }
        let deep = format!("{}{}", "{".repeat(201), "}".repeat(201));
        assert_eq!(error(&deep, &nested).code, SqlState::PROGRAM_LIMIT_EXCEEDED);
    }

    #[test]
    fn maps() {
        round_trip("{a=>1,b=>2}", &map(S::Int32), "{a=>1,b=>2}");
        round_trip(" { b => 2 , a => NULL } ", &map(S::Int32), "{a=>NULL,b=>2}");
        round_trip("{a=>1,a=>2}", &map(S::Int32), "{a=>2}");
        round_trip("{}", &map(S::Text), "{}");
        round_trip(
            r#"{"a b"=>"c,d","x=>y"=>"","n"=>"NULL"}"#,
            &map(S::Text),
            r#"{"a b"=>"c,d",n=>"NULL","x=>y"=>""}"#,
        );
        round_trip("{a=>{b=>1}}", &map(map(S::Int32)), "{a=>{b=>1}}");
        round_trip("{a=>{1,2}}", &map(list(S::Int32)), "{a=>{1,2}}");
        assert!(parse_datum("{a=1}", &map(S::Int32)).is_err());
        assert!(parse_datum("{=>1}", &map(S::Int32)).is_err());
        assert!(parse_datum("{a=>}", &map(S::Int32)).is_err());
        assert!(parse_datum("{a=>x}", &map(S::Int32)).is_err());
    }

    #[test]
    fn records() {
        let ty = S::Record {
            fields: vec![
                ("a".into(), S::Int32, true),
                ("b".into(), S::Text, true),
                ("c".into(), S::Timestamp, true),
            ],
        };
        round_trip("(1,x,)", &ty, "(1,x,)");
        round_trip(r#"(,"",)"#, &ty, r#"(,"",)"#);
        round_trip(
            r#"(1,"a ""b"" \\c (d)","2024-01-01 00:00:00")"#,
            &ty,
            r#"(1,"a ""b"" \\c (d)","2024-01-01 00:00:00")"#,
        );
        assert!(parse_datum("(1,x)", &ty).is_err());
        assert!(parse_datum("(1,x,,)", &ty).is_err());
        assert!(parse_datum("1,x,", &ty).is_err());
        assert!(parse_datum("(1,x,) junk", &ty).is_err());
        let strict = S::Record {
            fields: vec![("a".into(), S::Int32, false)],
        };
        assert_eq!(error("()", &strict).code, SqlState::NOT_NULL_VIOLATION);
        let nested = S::Record {
            fields: vec![
                ("r".into(), ty.clone(), true),
                ("l".into(), list(S::Int32), true),
            ],
        };
        round_trip(r#"("(1,x,)","{1,2}")"#, &nested, r#"("(1,x,)","{1,2}")"#);
    }

    #[test]
    fn ranges_canonicalize() {
        round_trip("[1,5)", &range(S::Int32), "[1,5)");
        round_trip("(1,5]", &range(S::Int32), "[2,6)");
        round_trip("[1,1)", &range(S::Int32), "empty");
        round_trip("(1,2)", &range(S::Int32), "empty");
        round_trip("EMPTY", &range(S::Int32), "empty");
        round_trip("[,5)", &range(S::Int64), "(,5)");
        round_trip("(,)", &range(S::Int64), "(,)");
        round_trip("[3,]", &range(S::Int64), "[3,)");
        round_trip("[1.5,2.5]", &range(numeric(None, None)), "[1.5,2.5]");
        round_trip("[1.5,1.5]", &range(numeric(None, None)), "[1.5,1.5]");
        round_trip("(1.5,1.5]", &range(numeric(None, None)), "empty");
        round_trip(
            "[2024-01-01,2024-01-31]",
            &range(S::Date),
            "[2024-01-01,2024-02-01)",
        );
        round_trip(
            "[2024-01-01 10:00, 2024-01-02)",
            &range(S::Timestamp),
            r#"["2024-01-01 10:00:00","2024-01-02 00:00:00")"#,
        );
        round_trip(
            r#"("2024-01-01 10:00+02",)"#,
            &range(S::TimestampTz),
            r#"("2024-01-01 08:00:00+00",)"#,
        );
        let e = error("[5,1)", &range(S::Int32));
        assert_eq!(e.code, SqlState::DATA_EXCEPTION);
        assert_eq!(
            e.message,
            "range lower bound must be less than or equal to range upper bound"
        );
        assert_eq!(
            error("[1,2147483647]", &range(S::Int32)).code,
            SqlState::NUMERIC_VALUE_OUT_OF_RANGE
        );
        assert!(parse_datum("[1,5", &range(S::Int32)).is_err());
        assert!(parse_datum("1,5", &range(S::Int32)).is_err());
        assert!(parse_datum("[1,5) x", &range(S::Int32)).is_err());
        assert!(parse_datum("[a,5)", &range(S::Int32)).is_err());
    }

    #[test]
    fn garbage_never_panics() {
        let types = [
            S::Bool,
            S::Int32,
            S::Float64,
            numeric(Some(5), Some(2)),
            S::Date,
            S::Time,
            S::Timestamp,
            S::TimestampTz,
            S::Interval,
            S::Bytes,
            S::Uuid,
            S::Jsonb,
            range(S::Int32),
            range(S::Timestamp),
            list(list(S::Text)),
            map(list(S::Int32)),
            S::Record {
                fields: vec![("a".into(), S::Text, true)],
            },
        ];
        let inputs = [
            "",
            " ",
            "\\",
            "\"",
            "{",
            "}",
            "(",
            ")",
            "[",
            "]",
            "{\"",
            "(\"",
            "[\"",
            "{\\",
            "(\\",
            "é",
            "😀",
            "-",
            "+",
            ".",
            "e",
            "1e",
            "::",
            "P",
            "PT",
            "\u{0}",
            "{a=>",
            "{a=>{",
            "[,",
            "(,\"",
            "2024-",
            "2024-01-01T",
            "10:",
            "-:",
            "@",
            "ago",
            "1 ago ago",
        ];
        for ty in &types {
            for input in inputs {
                let _ = parse_datum(input, ty);
            }
        }
    }
}
