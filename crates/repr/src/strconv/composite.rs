//! Lists, maps, records and ranges: their text forms, element by element.

use super::*;

pub(super) struct Scanner<'a> {
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
pub(super) fn scan_element(
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

/// Reads `{item,item,...}` as the type `type_name` (`list` or `map`), each item by
/// `read_item`: lists and maps share their braces, separators and errors.
fn parse_braced(
    text: &str,
    type_name: &str,
    mut read_item: impl FnMut(&mut Scanner<'_>, &dyn Fn(&str) -> ValueError) -> Result<(), ValueError>,
) -> Result<(), ValueError> {
    let malformed = |detail: &str| {
        let message = if type_name == ARRAY {
            format!("malformed array literal: \"{text}\"")
        } else {
            format!("invalid input syntax for type {type_name}: {detail}: \"{text}\"")
        };
        ValueError::new(SqlState::INVALID_TEXT_REPRESENTATION, message)
    };
    let mut scanner = Scanner { text, at: 0 };
    scanner.skip_ws();
    if !scanner.eat('{') {
        return Err(malformed("expected '{'"));
    }
    scanner.skip_ws();
    if !scanner.eat('}') {
        loop {
            read_item(&mut scanner, &malformed)?;
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
    Ok(())
}

pub(super) fn parse_list(
    text: &str,
    element: &SqlScalarType,
    depth: usize,
) -> Result<Datum, ValueError> {
    parse_elements(text, element, depth, "list")
}

/// A PostgreSQL array's text form, `{1,2}` (of arrays, `{{1,2},{3,4}}`).
pub(super) fn parse_array(
    text: &str,
    element: &SqlScalarType,
    depth: usize,
) -> Result<Datum, ValueError> {
    parse_elements(text, element, depth, ARRAY)
}

/// What [`parse_braced`] reads an array by: its errors are PostgreSQL's.
const ARRAY: &str = "array";

fn parse_elements(
    text: &str,
    element: &SqlScalarType,
    depth: usize,
    type_name: &str,
) -> Result<Datum, ValueError> {
    let nested = matches!(
        element,
        SqlScalarType::List { .. } | SqlScalarType::Map { .. } | SqlScalarType::Array { .. }
    );
    let mut elements = Vec::new();
    parse_braced(text, type_name, |scanner, malformed| {
        let item = scan_element(scanner, nested, &[',', '}'])
            .ok_or_else(|| malformed("malformed element"))?;
        elements.push(match item {
            None => Datum::Null,
            Some((item, quoted)) => {
                if type_name == ARRAY && !nested && !quoted && item.starts_with('{') {
                    return Err(multidimensional_text());
                }
                parse_nested(&item, element, depth + 1)?
            }
        });
        Ok(())
    })?;
    if type_name == ARRAY && nested && !same_dimensions(&elements) {
        return Err(ValueError::new(
            SqlState::INVALID_TEXT_REPRESENTATION,
            format!("malformed array literal: \"{text}\""),
        ));
    }
    Ok(Datum::List(elements))
}

/// An array's text of more dimensions than its type has: floe reads the
/// dimensions of a literal's text only (`'{{1,2},{3,4}}'::int[]`), as its
/// arrays of more dimensions are arrays of arrays, of a type planned before
/// the text is read. A type naming them reads such text anywhere.
fn multidimensional_text() -> ValueError {
    ValueError::new(
        SqlState::FEATURE_NOT_SUPPORTED,
        "multidimensional array text is supported only in a literal",
    )
    .with_hint("Name the array's dimensions in its type, as in integer[][].")
}

/// Whether the sub-arrays of a multidimensional array are all arrays of one
/// length, as Postgres requires.
fn same_dimensions(elements: &[Datum]) -> bool {
    let mut lengths = elements.iter().map(|element| match element {
        Datum::List(items) => Some(items.len()),
        _ => None,
    });
    let Some(Some(first)) = lengths.next() else {
        return elements.is_empty();
    };
    lengths.all(|length| length == Some(first))
}

pub(super) fn parse_map(
    text: &str,
    value: &SqlScalarType,
    depth: usize,
) -> Result<Datum, ValueError> {
    let nested = matches!(
        value,
        SqlScalarType::Map { .. } | SqlScalarType::List { .. } | SqlScalarType::Array { .. }
    );
    let mut entries: BTreeMap<String, Datum> = BTreeMap::new();
    parse_braced(text, "map", |scanner, malformed| {
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
        let item = scan_element(scanner, nested, &[',', '}'])
            .ok_or_else(|| malformed("malformed value"))?;
        let value = match item {
            None => Datum::Null,
            Some((text, _)) => parse_nested(&text, value, depth + 1)?,
        };
        entries.insert(key, value);
        Ok(())
    })?;
    Ok(Datum::Map(entries.into_iter().collect()))
}

/// Reads one field of a record or bound of a range (Postgres' composite
/// syntax): quoted with `""` or `\` escapes, or unquoted up to a stop; an
/// empty unquoted field is NULL (`None`).
pub(super) fn scan_composite_field(
    scanner: &mut Scanner<'_>,
    stops: &[char],
) -> Option<Option<String>> {
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

pub(super) fn parse_record(
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

pub(super) fn parse_range(
    text: &str,
    element: &SqlScalarType,
    depth: usize,
) -> Result<Datum, ValueError> {
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
pub(super) fn successor(datum: &Datum, type_name: &str) -> Result<Datum, ValueError> {
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
