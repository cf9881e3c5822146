//! Postgres' string functions DataFusion lacks: hashes (`md5`, `sha256`, ...),
//! quoting (`quote_ident`, `quote_literal`, `quote_nullable`, `format`),
//! regular expressions (`regexp_split_to_array`, the list behind
//! `regexp_split_to_table`, `substring(text from pattern)`), NULL counting and
//! `gen_random_uuid`.

use datafusion::logical_expr::{ScalarUDF, Volatility};
use floe_repr::{Datum, SqlScalarType, SqlState};
use md5::Digest;

use super::{Arguments, RowFunction, expect_arguments, no_such_function};
use crate::error::QueryError;

/// The list of a text's parts between a regular expression's matches, which
/// `regexp_split_to_table` unnests (`crate::srf`); `regexp_split_to_array` is the
/// same list as the `text[]` clients see.
pub const REGEXP_SPLIT: &str = "floe_regexp_split";

/// The list of a regular expression's matches, each the list of its groups'
/// texts, which `regexp_matches` unnests.
pub const REGEXP_MATCHES: &str = "floe_regexp_matches";

/// A text list as the `text[]` clients see (the unnested items of
/// [`REGEXP_MATCHES`]).
pub const AS_TEXT_ARRAY: &str = "floe_as_text_array";

/// The function `substring(text from pattern)` becomes (its pattern is a
/// regular expression, unlike `substring(text from position)`).
pub const SUBSTRING_MATCH: &str = "floe_substring_match";

/// The regular expression a `SIMILAR TO` pattern means (`x SIMILAR TO p
/// [ESCAPE e]` is `x ~ floe_similar_pattern(p [, e])`).
pub const SIMILAR_PATTERN: &str = "floe_similar_pattern";

pub(super) fn functions() -> Vec<ScalarUDF> {
    let immutable = Volatility::Immutable;
    vec![
        RowFunction::new(SIMILAR_PATTERN, immutable, similar_result, |row, _| {
            similar_pattern(&text(&row[0]), row.get(1).map(text).as_deref()).map(Datum::Text)
        })
        .udf(),
        RowFunction::new("md5", immutable, text_result, |row, _| {
            Ok(Datum::Text(hex(&md5::Md5::digest(bytes(&row[0])))))
        })
        .udf(),
        RowFunction::new("sha224", immutable, bytes_result, |row, _| {
            Ok(digest::<sha2::Sha224>(&row[0]))
        })
        .udf(),
        RowFunction::new("sha256", immutable, bytes_result, |row, _| {
            Ok(digest::<sha2::Sha256>(&row[0]))
        })
        .udf(),
        RowFunction::new("sha384", immutable, bytes_result, |row, _| {
            Ok(digest::<sha2::Sha384>(&row[0]))
        })
        .udf(),
        RowFunction::new("sha512", immutable, bytes_result, |row, _| {
            Ok(digest::<sha2::Sha512>(&row[0]))
        })
        .udf(),
        RowFunction::new("quote_ident", immutable, text_result, |row, _| {
            Ok(Datum::Text(quote_ident(&text(&row[0]))))
        })
        .udf(),
        RowFunction::new("quote_literal", immutable, text_result, |row, _| {
            Ok(Datum::Text(quote_literal(&text(&row[0]))))
        })
        .udf(),
        RowFunction::new("quote_nullable", immutable, text_result, |row, _| {
            Ok(Datum::Text(quote_nullable(&row[0])))
        })
        .lenient()
        .udf(),
        RowFunction::new("format", immutable, format_result, |row, _| {
            match row.first() {
                Some(Datum::Null) | None => Ok(Datum::Null),
                Some(template) => format(&text(template), &row[1..]).map(Datum::Text),
            }
        })
        .lenient()
        .udf(),
        RowFunction::new("num_nulls", immutable, count_result, |row, _| {
            Ok(Datum::Int32(count(row, true)))
        })
        .lenient()
        .udf(),
        RowFunction::new("num_nonnulls", immutable, count_result, |row, _| {
            Ok(Datum::Int32(count(row, false)))
        })
        .lenient()
        .udf(),
        RowFunction::new(REGEXP_SPLIT, immutable, split_result, |row, _| split(row)).udf(),
        RowFunction::new(
            "regexp_split_to_array",
            immutable,
            split_result,
            |row, _| split(row),
        )
        .returning(floe_repr::PgType::TextArray)
        .udf(),
        RowFunction::new(REGEXP_MATCHES, immutable, matches_result, |row, _| {
            regexp_matches(&text(&row[0]), &text(&row[1]), row.get(2).map(text))
        })
        .udf(),
        RowFunction::new(AS_TEXT_ARRAY, immutable, text_list_result, |row, _| {
            Ok(row[0].clone())
        })
        .returning(floe_repr::PgType::TextArray)
        .udf(),
        RowFunction::new("regexp_substr", immutable, substr_result, |row, _| {
            regexp_substr(row)
        })
        .udf(),
        RowFunction::new(SUBSTRING_MATCH, immutable, match_result, |row, _| {
            substring_match(&text(&row[0]), &text(&row[1]))
        })
        .udf(),
        RowFunction::new(
            "gen_random_uuid",
            Volatility::Volatile,
            uuid_result,
            |_, _| Ok(Datum::Uuid(*uuid::Uuid::new_v4().as_bytes())),
        )
        .nullary()
        .udf(),
    ]
}

/// A function of one value, as text.
fn text_result(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    expect_arguments(arguments.function, arguments, &[1])?;
    Ok(SqlScalarType::Text)
}

/// `substring(text from pattern)`: of two values, as text.
fn match_result(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    expect_arguments("substring", arguments, &[2])?;
    Ok(SqlScalarType::Text)
}

fn bytes_result(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    expect_arguments("sha", arguments, &[1])?;
    Ok(SqlScalarType::Bytes)
}

fn format_result(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    if arguments.types.is_empty() {
        return Err(no_such_function("format", &arguments.types));
    }
    Ok(SqlScalarType::Text)
}

fn count_result(_: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    Ok(SqlScalarType::Int32)
}

fn split_result(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    expect_arguments(arguments.function, arguments, &[2, 3])?;
    Ok(SqlScalarType::Array {
        element: Box::new(SqlScalarType::Text),
    })
}

fn similar_result(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    expect_arguments("similar_to_escape", arguments, &[1, 2])?;
    Ok(SqlScalarType::Text)
}

/// A `SIMILAR TO` pattern as a regular expression matching the whole text, as
/// Postgres' `similar_to_escape` translates it: `%` is any text, `_` any
/// character, `[...]` a class copied as written, the escape character (`\`
/// unless given; none when empty) makes the next character literal, and the
/// characters special only to regular expressions (`.`, `^`, `$`) are literal.
fn similar_pattern(pattern: &str, escape: Option<&str>) -> Result<String, QueryError> {
    let escape = match escape {
        None => Some('\\'),
        Some(text) => {
            let mut chars = text.chars();
            match (chars.next(), chars.next()) {
                (None, _) => None,
                (Some(c), None) => Some(c),
                _ => {
                    return Err(QueryError::new(
                        SqlState::INVALID_ESCAPE_SEQUENCE,
                        "invalid escape string",
                    )
                    .with_hint("Escape string must be empty or one character."));
                }
            }
        }
    };
    let mut out = String::from("(?s)^(?:");
    let mut chars = pattern.chars().peekable();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        if Some(c) == escape {
            match chars.next() {
                Some(literal) => out.push_str(&regex::escape(&literal.to_string())),
                None => {
                    return Err(QueryError::new(
                        SqlState::INVALID_ESCAPE_SEQUENCE,
                        "invalid escape string",
                    ));
                }
            }
            continue;
        }
        if in_class {
            if c == ']' {
                in_class = false;
            }
            if c == '\\' || c == '[' {
                out.push('\\');
            }
            out.push(c);
            continue;
        }
        match c {
            '[' => {
                in_class = true;
                out.push('[');
                // A leading `^` negates and a leading `]` is a member.
                if let Some(next) = chars.next_if(|n| *n == '^') {
                    out.push(next);
                }
                if chars.next_if_eq(&']').is_some() {
                    out.push_str("\\]");
                }
            }
            '%' => out.push_str(".*"),
            '_' => out.push('.'),
            '(' => out.push_str("(?:"),
            '.' | '^' | '$' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            other => out.push(other),
        }
    }
    out.push_str(")$");
    Ok(out)
}

fn matches_result(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    expect_arguments("regexp_matches", arguments, &[2, 3])?;
    Ok(SqlScalarType::List {
        element: Box::new(SqlScalarType::Array {
            element: Box::new(SqlScalarType::Text),
        }),
    })
}

fn text_list_result(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    expect_arguments(arguments.function, arguments, &[1])?;
    Ok(SqlScalarType::Array {
        element: Box::new(SqlScalarType::Text),
    })
}

fn substr_result(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    expect_arguments("regexp_substr", arguments, &[2, 3, 4, 5, 6])?;
    let integer = |ty: &SqlScalarType| {
        matches!(
            ty,
            SqlScalarType::Int16 | SqlScalarType::Int32 | SqlScalarType::Int64
        )
    };
    let fits = arguments
        .types
        .iter()
        .enumerate()
        .all(|(index, ty)| match index {
            2 | 3 | 5 => integer(ty),
            _ => !integer(ty),
        });
    if !fits {
        return Err(no_such_function("regexp_substr", &arguments.types));
    }
    Ok(SqlScalarType::Text)
}

/// `regexp_matches(text, pattern [, flags])`: the groups of the first match
/// (of every match with the flag `g`), each match's as one list; a pattern
/// without groups gives the whole match. A group that took no part is NULL.
fn regexp_matches(value: &str, pattern: &str, flags: Option<String>) -> Result<Datum, QueryError> {
    let flags = flags.unwrap_or_default();
    let global = flags.contains('g');
    let flags: String = flags.chars().filter(|c| *c != 'g').collect();
    let pattern = regex(pattern, Some(&Datum::Text(flags)))?;
    let groups = |captures: regex::Captures<'_>| {
        let texts: Vec<Datum> = if captures.len() == 1 {
            vec![Datum::Text(captures[0].to_string())]
        } else {
            (1..captures.len())
                .map(|i| {
                    captures
                        .get(i)
                        .map_or(Datum::Null, |m| Datum::Text(m.as_str().to_string()))
                })
                .collect()
        };
        Datum::List(texts)
    };
    let matches: Vec<Datum> = if global {
        pattern.captures_iter(value).map(groups).collect()
    } else {
        pattern.captures(value).map(groups).into_iter().collect()
    };
    Ok(Datum::List(matches))
}

/// `regexp_substr(text, pattern [, start [, n [, flags [, group]]]])`: the
/// text of the `n`th match at or after character `start` (of its `group`th
/// group when given), NULL when there is none.
fn regexp_substr(row: &[Datum]) -> Result<Datum, QueryError> {
    let integer = |index: usize, default: i64| -> Result<i64, QueryError> {
        match row.get(index) {
            None => Ok(default),
            Some(Datum::Int16(v)) => Ok(i64::from(*v)),
            Some(Datum::Int32(v)) => Ok(i64::from(*v)),
            Some(Datum::Int64(v)) => Ok(*v),
            Some(other) => Err(QueryError::internal(format!(
                "regexp_substr argument {other:?}"
            ))),
        }
    };
    let (start, nth, group) = (integer(2, 1)?, integer(3, 1)?, integer(5, 0)?);
    let invalid = |name: &str, value: i64| {
        QueryError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            format!("invalid value for parameter \"{name}\": {value}"),
        )
    };
    if start < 1 {
        return Err(invalid("start", start));
    }
    if nth < 1 {
        return Err(invalid("n", nth));
    }
    if group < 0 {
        return Err(invalid("subexpr", group));
    }
    let value = text(&row[0]);
    let pattern = regex(&text(&row[1]), row.get(4))?;
    let offset = value
        .char_indices()
        .nth(usize::try_from(start - 1).unwrap_or(usize::MAX))
        .map_or(value.len(), |(at, _)| at);
    let found = pattern
        .captures_iter(&value[offset..])
        .nth(usize::try_from(nth - 1).unwrap_or(usize::MAX))
        .and_then(|captures| captures.get(usize::try_from(group).unwrap_or(usize::MAX)))
        .map(|m| Datum::Text(m.as_str().to_string()));
    Ok(found.unwrap_or(Datum::Null))
}

fn uuid_result(_: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    Ok(SqlScalarType::Uuid)
}

/// A text's parts between a regular expression's matches (`regexp_split_*`).
fn split(row: &[Datum]) -> Result<Datum, QueryError> {
    let pattern = regex(&text(&row[1]), row.get(2))?;
    let parts = pattern
        .split(&text(&row[0]))
        .map(|part| Datum::Text(part.to_string()))
        .collect();
    Ok(Datum::List(parts))
}

/// A value as text, as it prints.
pub(super) fn text(datum: &Datum) -> String {
    match datum {
        Datum::Text(text) => text.clone(),
        other => floe_repr::format_datum(other),
    }
}

/// The bytes a hash function digests: a bytea's, or a text's UTF-8.
fn bytes(datum: &Datum) -> Vec<u8> {
    match datum {
        Datum::Bytes(bytes) => bytes.clone(),
        other => text(other).into_bytes(),
    }
}

/// A value's digest under hash `D`, as a bytea.
fn digest<D: Digest>(value: &Datum) -> Datum {
    Datum::Bytes(D::digest(bytes(value)).to_vec())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Postgres' `quote_ident`: quoted unless a plain lowercase identifier.
fn quote_ident(name: &str) -> String {
    floe_sql::planner::quote_ident(name)
}

/// Postgres' `quote_literal`: single-quoted with quotes doubled; a text with a
/// backslash becomes an escape string (`E'a\\b'`) with backslashes doubled.
fn quote_literal(value: &str) -> String {
    let quoted = value.replace('\'', "''");
    if value.contains('\\') {
        format!("E'{}'", quoted.replace('\\', "\\\\"))
    } else {
        format!("'{quoted}'")
    }
}

fn quote_nullable(value: &Datum) -> String {
    match value {
        Datum::Null => "NULL".to_string(),
        other => quote_literal(&text(other)),
    }
}

fn count(row: &[Datum], nulls: bool) -> i32 {
    let counted = row
        .iter()
        .filter(|datum| matches!(datum, Datum::Null) == nulls)
        .count();
    i32::try_from(counted).unwrap_or(i32::MAX)
}

/// Postgres' `format`: `%s` (a value as text, NULL as nothing), `%I` (an
/// identifier), `%L` (a literal, NULL unquoted), `%%`, each optionally with an
/// argument position (`%2$s`) and a width (`%5s`; `%-5s` left-aligned); a
/// width taken from the arguments (`%*s`) is refused.
fn format(template: &str, values: &[Datum]) -> Result<String, QueryError> {
    let mut out = String::new();
    let mut chars = template.chars().peekable();
    let mut next = 0usize;
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut digits = number(&mut chars);
        let position = if !digits.is_empty() && chars.next_if_eq(&'$').is_some() {
            let position: usize = digits
                .parse()
                .map_err(|_| format_error("invalid argument number"))?;
            digits = String::new();
            Some(position.checked_sub(1).ok_or_else(|| {
                format_error("format specifies argument 0, but arguments are numbered from 1")
            })?)
        } else {
            None
        };
        // `%-10s`: left-aligned in 10 characters; `%10s`: right-aligned.
        let left = digits.is_empty() && chars.next_if_eq(&'-').is_some();
        if digits.is_empty() {
            digits = number(&mut chars);
        }
        let width: usize = match digits.as_str() {
            "" => 0,
            digits => digits
                .parse()
                .map_err(|_| format_error("number is out of range"))?,
        };
        if chars.peek() == Some(&'*') {
            return Err(unsupported_format());
        }
        let kind = chars
            .next()
            .ok_or_else(|| format_error("unterminated format() type specifier"))?;
        if kind == '%' && position.is_none() {
            out.push('%');
            continue;
        }
        let index = position.unwrap_or(next);
        next = index + 1;
        let value = values
            .get(index)
            .ok_or_else(|| format_error("too few arguments for format()"))?;
        let formatted = match kind {
            's' => match value {
                Datum::Null => String::new(),
                other => text(other),
            },
            'I' => match value {
                Datum::Null => {
                    return Err(QueryError::new(
                        SqlState::NULL_VALUE_NOT_ALLOWED,
                        "null values cannot be formatted as an SQL identifier",
                    ));
                }
                other => quote_ident(&text(other)),
            },
            'L' => quote_nullable(value),
            other => {
                return Err(format_error(&format!(
                    "unrecognized format() type specifier \"{other}\""
                ))
                .with_hint("For a single \"%\" use \"%%\"."));
            }
        };
        let padding = " ".repeat(width.saturating_sub(formatted.chars().count()));
        if left {
            out.push_str(&formatted);
            out.push_str(&padding);
        } else {
            out.push_str(&padding);
            out.push_str(&formatted);
        }
    }
    Ok(out)
}

/// The digits at the front of `chars`, taken.
fn number(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> String {
    let mut digits = String::new();
    while let Some(d) = chars.next_if(char::is_ascii_digit) {
        digits.push(d);
    }
    digits
}

fn format_error(message: &str) -> QueryError {
    QueryError::new(SqlState::INVALID_PARAMETER_VALUE, message)
}

fn unsupported_format() -> QueryError {
    QueryError::new(
        SqlState::FEATURE_NOT_SUPPORTED,
        "format() widths taken from arguments are not supported",
    )
}

/// A Postgres regular expression with its flags (`i` for case-insensitive). The
/// last one compiled on this thread is kept: a function's pattern is usually
/// the same on every row, and compiling it is most of a row's work.
fn regex(pattern: &str, flags: Option<&Datum>) -> Result<regex::Regex, QueryError> {
    thread_local! {
        static LAST: std::cell::RefCell<Option<(String, String, regex::Regex)>> =
            const { std::cell::RefCell::new(None) };
    }
    let flags = flags.map(text).unwrap_or_default();
    let kept = LAST.with_borrow(|last| match last {
        Some((p, f, compiled)) if p == pattern && *f == flags => Some(compiled.clone()),
        _ => None,
    });
    if let Some(compiled) = kept {
        return Ok(compiled);
    }
    let compiled = compile(pattern, &flags)?;
    LAST.set(Some((pattern.to_string(), flags, compiled.clone())));
    Ok(compiled)
}

fn compile(pattern: &str, flags: &str) -> Result<regex::Regex, QueryError> {
    let mut builder = regex::RegexBuilder::new(pattern);
    for flag in flags.chars() {
        match flag {
            'i' => builder.case_insensitive(true),
            'c' => builder.case_insensitive(false),
            other => {
                return Err(QueryError::new(
                    SqlState::INVALID_PARAMETER_VALUE,
                    format!("invalid regular expression option: \"{other}\""),
                ));
            }
        };
    }
    builder.build().map_err(|error| {
        QueryError::new(
            SqlState::INVALID_REGULAR_EXPRESSION,
            format!("invalid regular expression: {error}"),
        )
    })
}

/// `substring(text from pattern)`: the text of the pattern's first
/// parenthesized group in the first match, or of the whole match without one;
/// NULL without a match.
fn substring_match(value: &str, pattern: &str) -> Result<Datum, QueryError> {
    let pattern = regex(pattern, None)?;
    let Some(captures) = pattern.captures(value) else {
        return Ok(Datum::Null);
    };
    let matched = match captures.len() {
        1 => captures.get(0),
        _ => captures.get(1),
    };
    Ok(matched.map_or(Datum::Null, |m| Datum::Text(m.as_str().to_string())))
}
