//! `jsonb` operators and functions as Postgres has them.
//!
//! Inside the engine a `jsonb` value is its normalized text (floe-repr's
//! `parse_jsonb`: compact, one value per key, keys in order, numbers with
//! their scale). Numbers keep their scale as Postgres prints them (`1.50`),
//! so documents equal by value may differ as text: `=`, `<>`, grouping,
//! DISTINCT and join keys compare their [`JSONB_KEY`] (numbers in their
//! shortest form; see [`crate::jsonb_keys`]), containment
//! compares parsed documents. [`postgres_text`] prints a document as
//! Postgres does (`{"a": [1, 2]}`, shorter keys first).

use std::collections::BTreeMap;

use datafusion::logical_expr::{ScalarUDF, Volatility};
use floe_repr::strconv::{Json, json_key_text, json_text, jsonb_key_text, parse_json};
use floe_repr::{Datum, SqlScalarType, SqlState};

use super::{Arguments, RowFunction, expect_arguments, no_such_function};
use crate::error::QueryError;

/// The function giving a document's comparison key: its text with every
/// number in its shortest form, equal for documents equal by value.
pub const JSONB_KEY: &str = "floe_jsonb_key";

/// The function giving a document's sort key: text that compares as
/// Postgres orders jsonb (see [`super::jsonb_order`]).
pub const JSONB_SORT_KEY: &str = "floe_jsonb_sort_key";

/// The function `greatest` of documents is, in Postgres' order of jsonb.
pub const JSONB_GREATEST: &str = "floe_jsonb_greatest";
/// The function `least` of documents is.
pub const JSONB_LEAST: &str = "floe_jsonb_least";

/// The greatest (or least) of the non-NULL documents in `row`, the first of
/// equals as Postgres keeps it; NULL when all are NULL.
fn extreme(row: &[Datum], greatest: bool) -> Result<Datum, QueryError> {
    let mut best: Option<(Vec<u8>, Datum)> = None;
    for datum in row.iter().filter(|d| !matches!(d, Datum::Null)) {
        let json = document(datum)?;
        let key = super::jsonb_order::sort_key(&json);
        let better = best
            .as_ref()
            .is_none_or(|(best, _)| if greatest { key > *best } else { key < *best });
        if better {
            // A quoted literal among documents is a document.
            let value = match datum {
                Datum::Jsonb(_) => datum.clone(),
                _ => jsonb(&json),
            };
            best = Some((key, value));
        }
    }
    Ok(best.map_or(Datum::Null, |(_, value)| value))
}

/// A document as Postgres prints it.
pub fn postgres_text(normalized: &str) -> String {
    match parse_json(normalized) {
        Ok(json) => {
            let mut out = String::new();
            write_postgres(&mut out, &json);
            out
        }
        Err(_) => normalized.to_string(),
    }
}

fn write_postgres(out: &mut String, json: &Json) {
    match json {
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_postgres(out, item);
            }
            out.push(']');
        }
        Json::Object(object) => {
            out.push('{');
            for (i, (key, value)) in postgres_order(object).into_iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&json_text(&Json::String(key.clone())));
                out.push_str(": ");
                write_postgres(out, value);
            }
            out.push('}');
        }
        scalar => out.push_str(&json_text(scalar)),
    }
}

/// Object entries in Postgres' storage order: shorter keys first, then by
/// their bytes.
pub fn postgres_order(object: &BTreeMap<String, Json>) -> Vec<(&String, &Json)> {
    let mut entries: Vec<(&String, &Json)> = object.iter().collect();
    entries.sort_by(|(a, _), (b, _)| a.len().cmp(&b.len()).then_with(|| a.cmp(b)));
    entries
}

/// The document in a `jsonb` datum.
pub fn document(datum: &Datum) -> Result<Json, QueryError> {
    match datum {
        Datum::Jsonb(text) | Datum::Text(text) => parse_json(text).map_err(QueryError::from_value),
        other => Ok(to_json(other)),
    }
}

/// A document as a `jsonb` datum.
pub fn jsonb(json: &Json) -> Datum {
    Datum::Jsonb(json_text(json))
}

/// `to_jsonb`: a SQL value as JSON.
pub fn to_json(datum: &Datum) -> Json {
    match datum {
        Datum::Null => Json::Null,
        Datum::Bool(b) => Json::Bool(*b),
        Datum::Int16(_)
        | Datum::Int32(_)
        | Datum::Int64(_)
        | Datum::UInt16(_)
        | Datum::UInt32(_)
        | Datum::UInt64(_)
        | Datum::Oid(_)
        | Datum::Numeric(_) => Json::Number(floe_repr::format_datum(datum)),
        Datum::Float32(v) if v.is_finite() => Json::Number(floe_repr::format_datum(datum)),
        Datum::Float64(v) if v.is_finite() => Json::Number(floe_repr::format_datum(datum)),
        Datum::Jsonb(text) => parse_json(text).unwrap_or(Json::Null),
        Datum::Timestamp(_) => {
            // Postgres writes timestamps in JSON in ISO 8601 form.
            Json::String(floe_repr::format_datum(datum).replacen(' ', "T", 1))
        }
        // With the offset's minutes (`+00:00`), as ISO 8601 has them.
        Datum::TimestampTz(_) => {
            let text = floe_repr::format_datum(datum).replacen(' ', "T", 1);
            let hours_only = text.len() > 3
                && text.is_char_boundary(text.len() - 3)
                && text[text.len() - 3..].starts_with(['+', '-'])
                && !text.ends_with("infinity");
            Json::String(if hours_only {
                format!("{text}:00")
            } else {
                text
            })
        }
        Datum::List(items) => Json::Array(items.iter().map(to_json).collect()),
        Datum::TextArray(items) => Json::Array(
            items
                .iter()
                .map(|i| i.clone().map(Json::String).unwrap_or(Json::Null))
                .collect(),
        ),
        Datum::Map(entries) => Json::Object(
            entries
                .iter()
                .map(|(k, v)| (k.clone(), to_json(v)))
                .collect(),
        ),
        other => Json::String(floe_repr::format_datum(other)),
    }
}

/// The type name `jsonb_typeof` reports.
fn type_of(json: &Json) -> &'static str {
    match json {
        Json::Null => "null",
        Json::Bool(_) => "boolean",
        Json::Number(_) => "number",
        Json::String(_) => "string",
        Json::Array(_) => "array",
        Json::Object(_) => "object",
    }
}

/// A JSON value as `->>` returns it: strings unquoted, null as SQL NULL.
pub fn as_text(json: &Json) -> Datum {
    match json {
        Json::Null => Datum::Null,
        Json::String(s) => Datum::Text(s.clone()),
        other => Datum::Text(postgres_text(&json_text(other))),
    }
}

/// `->`: an object's field by key, or an array's element by index
/// (negative counts from the end).
pub fn get<'a>(json: &'a Json, key: &Datum) -> Option<&'a Json> {
    match (json, key) {
        (Json::Object(object), Datum::Text(k)) => object.get(k),
        (Json::Array(items), key) => {
            let index = integer(key)?;
            let index = if index < 0 {
                items.len() as i64 + index
            } else {
                index
            };
            usize::try_from(index).ok().and_then(|i| items.get(i))
        }
        _ => None,
    }
}

fn integer(datum: &Datum) -> Option<i64> {
    match datum {
        Datum::Int16(v) => Some((*v).into()),
        Datum::Int32(v) => Some((*v).into()),
        Datum::Int64(v) => Some(*v),
        Datum::Text(t) => t.trim().parse().ok(),
        _ => None,
    }
}

/// The elements of a text array argument: a list, a text array, or text in
/// Postgres' array form (`'{a,b}'`).
pub fn text_items(datum: &Datum) -> Result<Vec<Option<String>>, QueryError> {
    match datum {
        Datum::TextArray(items) => Ok(items.clone()),
        Datum::List(items) => Ok(items
            .iter()
            .map(|d| match d {
                Datum::Null => None,
                Datum::Text(s) => Some(s.clone()),
                other => Some(floe_repr::format_datum(other)),
            })
            .collect()),
        Datum::Text(text) => {
            let list = floe_repr::parse_datum(
                text,
                &SqlScalarType::List {
                    element: Box::new(SqlScalarType::Text),
                },
            )
            .map_err(|_| {
                QueryError::new(
                    SqlState::INVALID_TEXT_REPRESENTATION,
                    format!("malformed array literal: \"{text}\""),
                )
            })?;
            text_items(&list)
        }
        other => Err(QueryError::new(
            SqlState::DATATYPE_MISMATCH,
            format!(
                "expected a text array, got {}",
                floe_repr::cast::datum_type_name(other)
            ),
        )),
    }
}

/// `#>`: the value at a path of keys and indexes.
fn get_path<'a>(json: &'a Json, path: &[Option<String>]) -> Option<&'a Json> {
    let mut current = json;
    for step in path {
        let step = step.as_ref()?;
        current = get(current, &Datum::Text(step.clone()))?;
    }
    Some(current)
}

/// `@>`: whether `a` contains `b` (Postgres' containment rules: an array
/// contains another if every element of the other is in it; an object if
/// every pair of the other is contained; a top-level array contains a
/// scalar equal to one of its elements).
pub fn contains(a: &Json, b: &Json, top: bool) -> bool {
    match (a, b) {
        (Json::Object(a), Json::Object(b)) => b
            .iter()
            .all(|(k, bv)| a.get(k).is_some_and(|av| contains(av, bv, false))),
        (Json::Array(a), Json::Array(b)) => b.iter().all(|bv| {
            a.iter().any(|av| match (av, bv) {
                (Json::Array(_), Json::Array(_)) | (Json::Object(_), Json::Object(_)) => {
                    contains(av, bv, false)
                }
                _ => av == bv,
            })
        }),
        (Json::Array(a), scalar) if top && !matches!(scalar, Json::Object(_)) => {
            a.iter().any(|av| av == scalar)
        }
        (a, b) => a == b,
    }
}

/// `?`: whether a string is a key of an object, or an element of an array.
fn exists(json: &Json, key: &str) -> bool {
    match json {
        Json::Object(object) => object.contains_key(key),
        Json::Array(items) => items
            .iter()
            .any(|item| matches!(item, Json::String(s) if s == key)),
        Json::String(s) => s == key,
        _ => false,
    }
}

/// `||`: arrays concatenate, objects merge (right wins), anything else
/// becomes an array element.
fn concat(a: Json, b: Json) -> Json {
    match (a, b) {
        (Json::Object(mut a), Json::Object(b)) => {
            a.extend(b);
            Json::Object(a)
        }
        (Json::Array(mut a), Json::Array(b)) => {
            a.extend(b);
            Json::Array(a)
        }
        (Json::Array(mut a), b) => {
            a.push(b);
            Json::Array(a)
        }
        (a, Json::Array(b)) => {
            let mut items = vec![a];
            items.extend(b);
            Json::Array(items)
        }
        (a, b) => Json::Array(vec![a, b]),
    }
}

/// `-`: without a key (objects; also matching strings of arrays) or an index.
fn delete(json: Json, key: &Datum) -> Result<Json, QueryError> {
    Ok(match (json, key) {
        (Json::Object(mut object), Datum::Text(k)) => {
            object.remove(k);
            Json::Object(object)
        }
        (Json::Array(items), Datum::Text(k)) => Json::Array(
            items
                .into_iter()
                .filter(|i| !matches!(i, Json::String(s) if s == k))
                .collect(),
        ),
        (Json::Array(mut items), key) => {
            if let Some(index) = integer(key) {
                let index = if index < 0 {
                    items.len() as i64 + index
                } else {
                    index
                };
                if let Ok(index) = usize::try_from(index)
                    && index < items.len()
                {
                    items.remove(index);
                }
            }
            Json::Array(items)
        }
        (Json::Object(object), Datum::TextArray(_) | Datum::List(_)) => {
            let mut object = object;
            for k in text_items(key)?.into_iter().flatten() {
                object.remove(&k);
            }
            Json::Object(object)
        }
        (scalar, _) => {
            if matches!(scalar, Json::Object(_) | Json::Array(_)) {
                scalar
            } else {
                return Err(QueryError::new(
                    SqlState::INVALID_PARAMETER_VALUE,
                    "cannot delete from scalar",
                ));
            }
        }
    })
}

/// `jsonb_set`: the document with the value at `path` replaced (or added
/// when `create` and only the last step is missing).
fn set_path(json: &mut Json, path: &[String], value: Json, create: bool) {
    let Some((first, rest)) = path.split_first() else {
        *json = value;
        return;
    };
    match json {
        Json::Object(object) => {
            if rest.is_empty() {
                if create || object.contains_key(first) {
                    object.insert(first.clone(), value);
                }
            } else if let Some(child) = object.get_mut(first) {
                set_path(child, rest, value, create);
            }
        }
        Json::Array(items) => match array_step(first, items.len()) {
            Some(ArrayStep::Element(position)) => {
                let child = &mut items[position];
                if rest.is_empty() {
                    *child = value;
                } else {
                    set_path(child, rest, value, create);
                }
            }
            Some(ArrayStep::BeforeStart) if rest.is_empty() && create => items.insert(0, value),
            Some(ArrayStep::AfterEnd) if rest.is_empty() && create => items.push(value),
            _ => {}
        },
        _ => {}
    }
}

/// Where a path step lands in an array (see [`array_step`]).
enum ArrayStep {
    Element(usize),
    BeforeStart,
    AfterEnd,
}

/// Where the path step `step` lands in an array of `len` elements: an element (a
/// negative step counts from the end), or before or after them; `None` when the step is
/// not a number. `jsonb_set` and `#-` walk arrays alike.
fn array_step(step: &str, len: usize) -> Option<ArrayStep> {
    let index = step.parse::<i64>().ok()?;
    let len = len as i64;
    let position = if index < 0 { len + index } else { index };
    Some(if position < 0 {
        ArrayStep::BeforeStart
    } else if position >= len {
        ArrayStep::AfterEnd
    } else {
        ArrayStep::Element(position as usize)
    })
}

/// `jsonb_strip_nulls`: without object fields whose value is null.
fn strip_nulls(json: Json) -> Json {
    match json {
        Json::Object(object) => Json::Object(
            object
                .into_iter()
                .filter(|(_, v)| *v != Json::Null)
                .map(|(k, v)| (k, strip_nulls(v)))
                .collect(),
        ),
        Json::Array(items) => Json::Array(items.into_iter().map(strip_nulls).collect()),
        other => other,
    }
}

/// `jsonb_pretty`: four-space indented, as Postgres prints it.
fn pretty(out: &mut String, json: &Json, indent: usize) {
    let pad = |n: usize| "    ".repeat(n);
    match json {
        Json::Array(items) if !items.is_empty() => {
            out.push_str("[\n");
            for (i, item) in items.iter().enumerate() {
                out.push_str(&pad(indent + 1));
                pretty(out, item, indent + 1);
                if i + 1 < items.len() {
                    out.push(',');
                }
                out.push('\n');
            }
            out.push_str(&pad(indent));
            out.push(']');
        }
        Json::Object(object) if !object.is_empty() => {
            out.push_str("{\n");
            let entries = postgres_order(object);
            let count = entries.len();
            for (i, (key, value)) in entries.into_iter().enumerate() {
                out.push_str(&pad(indent + 1));
                out.push_str(&json_text(&Json::String(key.clone())));
                out.push_str(": ");
                pretty(out, value, indent + 1);
                if i + 1 < count {
                    out.push(',');
                }
                out.push('\n');
            }
            out.push_str(&pad(indent));
            out.push('}');
        }
        other => out.push_str(&postgres_text(&json_text(other))),
    }
}

fn jsonb_type(_: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    Ok(SqlScalarType::Jsonb)
}

fn text_type(_: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    Ok(SqlScalarType::Text)
}

fn bool_type(_: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    Ok(SqlScalarType::Bool)
}

fn int_type(_: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    Ok(SqlScalarType::Int32)
}

fn arg(row: &[Datum], index: usize) -> &Datum {
    row.get(index).unwrap_or(&Datum::Null)
}

/// `jsonb_extract_path` and `jsonb_extract_path_text`: the value of the first
/// argument at the path the remaining (variadic) ones spell, as `render` shows it;
/// the two differ only in that rendering.
fn extract_path(row: &[Datum], render: fn(&Json) -> Datum) -> Result<Datum, QueryError> {
    let path: Vec<Option<String>> = row[1..].iter().map(text_of).collect();
    Ok(get_path(&document(arg(row, 0))?, &path).map_or(Datum::Null, render))
}

/// Whether the document in argument `outer` contains the one in argument `inner`:
/// `@>` and `<@` are this test with the operands swapped.
fn argument_contains(row: &[Datum], outer: usize, inner: usize) -> Result<Datum, QueryError> {
    Ok(Datum::Bool(contains(
        &document(arg(row, outer))?,
        &document(arg(row, inner))?,
        true,
    )))
}

fn build_object(row: &[Datum]) -> Result<Json, QueryError> {
    if !row.len().is_multiple_of(2) {
        return Err(QueryError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            "argument list must have even number of elements",
        )
        .with_hint(
            "The arguments of jsonb_build_object() must consist of alternating keys and values.",
        ));
    }
    let mut object = BTreeMap::new();
    for pair in row.chunks(2) {
        let key = match &pair[0] {
            Datum::Null => {
                return Err(QueryError::new(
                    SqlState::NULL_VALUE_NOT_ALLOWED,
                    "argument 1: key must not be null",
                ));
            }
            Datum::Text(k) => k.clone(),
            other => floe_repr::format_datum(other),
        };
        object.insert(key, to_json(&pair[1]));
    }
    Ok(Json::Object(object))
}

fn build_object_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    if !arguments.types.len().is_multiple_of(2) {
        return Err(QueryError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            "argument list must have even number of elements",
        )
        .with_hint(
            "The arguments of jsonb_build_object() must consist of alternating keys and values.",
        ));
    }
    Ok(SqlScalarType::Jsonb)
}

fn path_steps(datum: &Datum) -> Result<Vec<Option<String>>, QueryError> {
    text_items(datum)
}

/// The list functions behind the set-returning `jsonb_array_elements`,
/// `jsonb_array_elements_text`, `jsonb_object_keys`, `jsonb_each` and
/// `jsonb_each_text` (`crate::srf` unnests them).
pub const ARRAY_ELEMENTS: &str = "floe_jsonb_array_elements";
pub const ARRAY_ELEMENTS_TEXT: &str = "floe_jsonb_array_elements_text";
pub const OBJECT_KEYS: &str = "floe_jsonb_object_keys";
pub const EACH_KEYS: &str = "floe_jsonb_each_keys";
pub const EACH_VALUES: &str = "floe_jsonb_each_values";
pub const EACH_TEXT_VALUES: &str = "floe_jsonb_each_text_values";

fn jsonb_list_type(_: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    Ok(SqlScalarType::List {
        element: Box::new(SqlScalarType::Jsonb),
    })
}

fn text_list_type(_: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    Ok(SqlScalarType::List {
        element: Box::new(SqlScalarType::Text),
    })
}

/// An array's elements, each as `render` shows it; Postgres' error for any
/// other document.
fn elements(datum: &Datum, render: fn(&Json) -> Datum) -> Result<Datum, QueryError> {
    match document(datum)? {
        Json::Array(items) => Ok(Datum::List(items.iter().map(render).collect())),
        Json::Object(_) => Err(QueryError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            "cannot extract elements from an object",
        )),
        _ => Err(QueryError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            "cannot extract elements from a scalar",
        )),
    }
}

/// An object's fields, in the order floe prints them; Postgres' error (naming
/// the set-returning function called) for any other document.
fn fields(datum: &Datum, function: &str) -> Result<BTreeMap<String, Json>, QueryError> {
    match document(datum)? {
        Json::Object(fields) => Ok(fields),
        Json::Array(_) if function == "jsonb_object_keys" => Err(QueryError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            "cannot call jsonb_object_keys on an array",
        )),
        _ if function == "jsonb_object_keys" => Err(QueryError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            "cannot call jsonb_object_keys on a scalar",
        )),
        _ => Err(QueryError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            format!("cannot call {function} on a non-object"),
        )),
    }
}

fn list_functions() -> Vec<ScalarUDF> {
    let immutable = Volatility::Immutable;
    vec![
        RowFunction::new(ARRAY_ELEMENTS, immutable, jsonb_list_type, |row, _| {
            elements(arg(row, 0), jsonb)
        })
        .udf(),
        RowFunction::new(ARRAY_ELEMENTS_TEXT, immutable, text_list_type, |row, _| {
            elements(arg(row, 0), as_text)
        })
        .udf(),
        RowFunction::new(OBJECT_KEYS, immutable, text_list_type, |row, _| {
            let keys = fields(arg(row, 0), "jsonb_object_keys")?.into_keys();
            Ok(Datum::List(keys.map(Datum::Text).collect()))
        })
        .udf(),
        RowFunction::new(EACH_KEYS, immutable, text_list_type, |row, _| {
            let keys = fields(arg(row, 0), "jsonb_each")?.into_keys();
            Ok(Datum::List(keys.map(Datum::Text).collect()))
        })
        .udf(),
        RowFunction::new(EACH_VALUES, immutable, jsonb_list_type, |row, _| {
            let values = fields(arg(row, 0), "jsonb_each")?;
            Ok(Datum::List(values.values().map(jsonb).collect()))
        })
        .udf(),
        RowFunction::new(EACH_TEXT_VALUES, immutable, text_list_type, |row, _| {
            let values = fields(arg(row, 0), "jsonb_each_text")?;
            Ok(Datum::List(values.values().map(as_text).collect()))
        })
        .udf(),
    ]
}

pub(super) fn functions() -> Vec<ScalarUDF> {
    let immutable = Volatility::Immutable;
    let mut functions = list_functions();
    functions.extend(vec![
        RowFunction::new("floe_jsonb_get", immutable, jsonb_type, |row, _| {
            Ok(get(&document(arg(row, 0))?, arg(row, 1)).map_or(Datum::Null, jsonb))
        })
        .udf(),
        RowFunction::new("floe_jsonb_get_text", immutable, text_type, |row, _| {
            Ok(get(&document(arg(row, 0))?, arg(row, 1)).map_or(Datum::Null, as_text))
        })
        .udf(),
        RowFunction::new("floe_jsonb_get_path", immutable, jsonb_type, |row, _| {
            let path = path_steps(arg(row, 1))?;
            Ok(get_path(&document(arg(row, 0))?, &path).map_or(Datum::Null, jsonb))
        })
        .udf(),
        RowFunction::new(
            "floe_jsonb_get_path_text",
            immutable,
            text_type,
            |row, _| {
                let path = path_steps(arg(row, 1))?;
                Ok(get_path(&document(arg(row, 0))?, &path).map_or(Datum::Null, as_text))
            },
        )
        .udf(),
        RowFunction::new("jsonb_extract_path", immutable, jsonb_type, |row, _| {
            extract_path(row, jsonb)
        })
        .lenient()
        .udf(),
        RowFunction::new("jsonb_extract_path_text", immutable, text_type, |row, _| {
            extract_path(row, as_text)
        })
        .lenient()
        .udf(),
        RowFunction::new(JSONB_KEY, immutable, text_type, |row, _| {
            let key = match arg(row, 0) {
                Datum::Jsonb(normalized) => jsonb_key_text(normalized),
                // A quoted literal compared with a document is a document.
                Datum::Text(text) => parse_json(text).map(|json| json_key_text(&json)),
                other => Ok(json_key_text(&to_json(other))),
            };
            key.map(Datum::Text).map_err(QueryError::from_value)
        })
        .udf(),
        RowFunction::new(JSONB_SORT_KEY, immutable, text_type, |row, _| {
            // A quoted literal compared with a document is a document.
            let json = document(arg(row, 0))?;
            Ok(Datum::Text(super::jsonb_order::sort_key_text(&json)))
        })
        .udf(),
        RowFunction::new(JSONB_GREATEST, immutable, jsonb_type, |row, _| {
            extreme(row, true)
        })
        .lenient()
        .udf(),
        RowFunction::new(JSONB_LEAST, immutable, jsonb_type, |row, _| {
            extreme(row, false)
        })
        .lenient()
        .udf(),
        RowFunction::new("floe_jsonb_contains", immutable, bool_type, |row, _| {
            argument_contains(row, 0, 1)
        })
        .udf(),
        RowFunction::new("floe_jsonb_contained", immutable, bool_type, |row, _| {
            argument_contains(row, 1, 0)
        })
        .udf(),
        RowFunction::new("floe_jsonb_exists", immutable, bool_type, |row, _| {
            let key = text_of(arg(row, 1)).unwrap_or_default();
            Ok(Datum::Bool(exists(&document(arg(row, 0))?, &key)))
        })
        .udf(),
        RowFunction::new("floe_jsonb_exists_any", immutable, bool_type, |row, _| {
            let json = document(arg(row, 0))?;
            let keys = text_items(arg(row, 1))?;
            Ok(Datum::Bool(keys.iter().flatten().any(|k| exists(&json, k))))
        })
        .udf(),
        RowFunction::new("floe_jsonb_exists_all", immutable, bool_type, |row, _| {
            let json = document(arg(row, 0))?;
            let keys = text_items(arg(row, 1))?;
            Ok(Datum::Bool(keys.iter().flatten().all(|k| exists(&json, k))))
        })
        .udf(),
        RowFunction::new("floe_jsonb_concat", immutable, jsonb_type, |row, _| {
            Ok(jsonb(&concat(
                document(arg(row, 0))?,
                document(arg(row, 1))?,
            )))
        })
        .udf(),
        RowFunction::new("floe_jsonb_delete", immutable, jsonb_type, |row, _| {
            Ok(jsonb(&delete(document(arg(row, 0))?, arg(row, 1))?))
        })
        .udf(),
        RowFunction::new("floe_jsonb_delete_path", immutable, jsonb_type, |row, _| {
            let mut json = document(arg(row, 0))?;
            let path: Vec<String> = path_steps(arg(row, 1))?.into_iter().flatten().collect();
            delete_path(&mut json, &path);
            Ok(jsonb(&json))
        })
        .udf(),
        RowFunction::new("jsonb_typeof", immutable, text_type, |row, _| {
            Ok(Datum::Text(type_of(&document(arg(row, 0))?).into()))
        })
        .udf(),
        RowFunction::new(
            "jsonb_array_length",
            immutable,
            int_type,
            |row, _| match document(arg(row, 0))? {
                Json::Array(items) => Ok(Datum::Int32(items.len() as i32)),
                Json::Object(_) => Err(QueryError::new(
                    SqlState::INVALID_PARAMETER_VALUE,
                    "cannot get array length of a non-array",
                )),
                _ => Err(QueryError::new(
                    SqlState::INVALID_PARAMETER_VALUE,
                    "cannot get array length of a scalar",
                )),
            },
        )
        .udf(),
        RowFunction::new("jsonb_strip_nulls", immutable, jsonb_type, |row, _| {
            Ok(jsonb(&strip_nulls(document(arg(row, 0))?)))
        })
        .udf(),
        RowFunction::new("jsonb_pretty", immutable, text_type, |row, _| {
            let mut out = String::new();
            pretty(&mut out, &document(arg(row, 0))?, 0);
            Ok(Datum::Text(out))
        })
        .udf(),
        RowFunction::new("to_jsonb", immutable, jsonb_type, |row, _| {
            Ok(jsonb(&to_json(arg(row, 0))))
        })
        .udf(),
        RowFunction::new("jsonb_build_array", immutable, jsonb_type, |row, _| {
            Ok(jsonb(&Json::Array(row.iter().map(to_json).collect())))
        })
        .lenient()
        .or_none()
        .udf(),
        RowFunction::new(
            "jsonb_build_object",
            immutable,
            build_object_type,
            |row, _| Ok(jsonb(&build_object(row)?)),
        )
        .lenient()
        .or_none()
        .udf(),
        RowFunction::new("jsonb_set", immutable, jsonb_set_type, |row, _| {
            let mut json = document(arg(row, 0))?;
            let path: Vec<String> = path_steps(arg(row, 1))?.into_iter().flatten().collect();
            let value = document(arg(row, 2))?;
            let create = !matches!(arg(row, 3), Datum::Bool(false));
            set_path(&mut json, &path, value, create);
            Ok(jsonb(&json))
        })
        .udf(),
        RowFunction::new("jsonb_insert", immutable, jsonb_set_type, |row, _| {
            let mut json = document(arg(row, 0))?;
            let path: Vec<String> = path_steps(arg(row, 1))?.into_iter().flatten().collect();
            let value = document(arg(row, 2))?;
            let after = matches!(arg(row, 3), Datum::Bool(true));
            insert_path(&mut json, &path, value, after)?;
            Ok(jsonb(&json))
        })
        .udf(),
        // `jsonb_agg`'s list of documents (each value's `to_jsonb`, NULL for SQL NULL).
        RowFunction::new(
            "floe_jsonb_from_documents",
            immutable,
            jsonb_type,
            |row, _| {
                let items = list_items(arg(row, 0));
                let documents = items.iter().map(document_or_null);
                Ok(jsonb(&Json::Array(documents.collect::<Result<_, _>>()?)))
            },
        )
        .udf(),
        RowFunction::new(
            "floe_jsonb_object_from_lists",
            immutable,
            jsonb_type,
            |row, _| {
                let keys = list_items(arg(row, 0));
                let values = list_items(arg(row, 1));
                let mut object = BTreeMap::new();
                for (key, value) in keys.iter().zip(&values) {
                    let Some(key) = text_of(key) else {
                        return Err(QueryError::new(
                            SqlState::INVALID_PARAMETER_VALUE,
                            "field name must not be null",
                        ));
                    };
                    object.insert(key, document_or_null(value)?);
                }
                Ok(jsonb(&Json::Object(object)))
            },
        )
        .udf(),
    ]);
    functions
}

/// An item of a list of documents: SQL NULL is JSON null.
fn document_or_null(item: &Datum) -> Result<Json, QueryError> {
    match item {
        Datum::Null => Ok(Json::Null),
        item => document(item),
    }
}

/// The elements of a list value (a text list arrives as a text array).
pub(super) fn list_items(datum: &Datum) -> Vec<Datum> {
    match datum {
        Datum::List(items) => items.clone(),
        Datum::TextArray(items) => items
            .iter()
            .map(|i| i.clone().map(Datum::Text).unwrap_or(Datum::Null))
            .collect(),
        _ => Vec::new(),
    }
}

/// `jsonb_set` and `jsonb_insert`: a document (or a quoted literal, which
/// Postgres reads as one), a path, a value and a flag.
fn jsonb_set_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    expect_arguments(arguments.function, arguments, &[3, 4])?;
    let literal = arguments.constant_text(0).is_some();
    let document = matches!(arguments.types[0], SqlScalarType::Jsonb)
        || (literal && arguments.types[0] == SqlScalarType::Text);
    if !document {
        return Err(no_such_function(arguments.function, &arguments.types));
    }
    Ok(SqlScalarType::Jsonb)
}

/// `jsonb_insert`: the document with `value` inserted at `path`, before the
/// array element there (after it when `after`), or as a new object key.
fn insert_path(
    json: &mut Json,
    path: &[String],
    value: Json,
    after: bool,
) -> Result<(), QueryError> {
    let Some((first, rest)) = path.split_first() else {
        return Ok(());
    };
    match json {
        Json::Object(object) if rest.is_empty() => {
            if object.contains_key(first) {
                return Err(QueryError::new(
                    SqlState::INVALID_PARAMETER_VALUE,
                    "cannot replace existing key",
                )
                .with_hint("Try using the function jsonb_set to replace key value."));
            }
            object.insert(first.clone(), value);
        }
        Json::Object(object) => {
            if let Some(child) = object.get_mut(first) {
                insert_path(child, rest, value, after)?;
            }
        }
        Json::Array(items) => match array_step(first, items.len()) {
            Some(ArrayStep::Element(position)) if rest.is_empty() => {
                items.insert(position + usize::from(after), value);
            }
            Some(ArrayStep::Element(position)) => {
                insert_path(&mut items[position], rest, value, after)?;
            }
            Some(ArrayStep::BeforeStart) if rest.is_empty() => items.insert(0, value),
            Some(ArrayStep::AfterEnd) if rest.is_empty() => items.push(value),
            _ => {}
        },
        _ => {}
    }
    Ok(())
}

/// Text of a key or path step (any scalar prints as its text).
fn text_of(datum: &Datum) -> Option<String> {
    match datum {
        Datum::Null => None,
        Datum::Text(s) => Some(s.clone()),
        other => Some(floe_repr::format_datum(other)),
    }
}

/// `#-`: the document without the value at `path`.
fn delete_path(json: &mut Json, path: &[String]) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    match json {
        Json::Object(object) => {
            if rest.is_empty() {
                object.remove(first);
            } else if let Some(child) = object.get_mut(first) {
                delete_path(child, rest);
            }
        }
        Json::Array(items) => {
            if let Some(ArrayStep::Element(position)) = array_step(first, items.len()) {
                if rest.is_empty() {
                    items.remove(position);
                } else {
                    delete_path(&mut items[position], rest);
                }
            }
        }
        _ => {}
    }
}
