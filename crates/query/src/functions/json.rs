//! `json`'s own operators, over its text as written: `->` answers the member's
//! or element's text with the input's spelling (`{"x" :  1}`), `->>` its text
//! (a string unquoted, `null` as NULL), as PostgreSQL's `json` does; `jsonb`'s
//! answer a normalized document.

use datafusion::logical_expr::{ScalarUDF, Volatility};
use floe_repr::strconv::{
    Json, JsonStep, json_elements_text, json_members_text, json_step_text, parse_json,
};
use floe_repr::{Datum, SqlScalarType};

use super::{Arguments, RowFunction, expect_arguments, no_such_function};
use crate::error::QueryError;

/// `json -> key` and `json -> index` (planned by `crate::semantics`).
pub const JSON_GET: &str = "floe_json_get";
/// `json ->> key` and `json ->> index`.
pub const JSON_GET_TEXT: &str = "floe_json_get_text";
/// `json #> path`: the value at the path, as written in the input.
pub const JSON_GET_PATH: &str = "floe_json_get_path";
/// `json #>> path`.
pub const JSON_GET_PATH_TEXT: &str = "floe_json_get_path_text";
/// The list functions behind the set-returning `json_array_elements`,
/// `json_array_elements_text`, `json_object_keys`, `json_each` and
/// `json_each_text` (`crate::srf` unnests them): values as written in the
/// input, members in its order with duplicates, as PostgreSQL's `json` has
/// them.
pub const ARRAY_ELEMENTS: &str = "floe_json_array_elements";
pub const ARRAY_ELEMENTS_TEXT: &str = "floe_json_array_elements_text";
pub const OBJECT_KEYS: &str = "floe_json_object_keys";
pub const EACH_KEYS: &str = "floe_json_each_keys";
pub const EACH_VALUES: &str = "floe_json_each_values";
pub const EACH_TEXT_VALUES: &str = "floe_json_each_text_values";

pub(super) fn functions() -> Vec<ScalarUDF> {
    let immutable = Volatility::Immutable;
    vec![
        RowFunction::new(
            JSON_GET,
            immutable,
            |a| step_type(a, SqlScalarType::Json),
            |row, _| Ok(step(row)?.map_or(Datum::Null, |text| Datum::Text(text.to_string()))),
        )
        .udf(),
        RowFunction::new(
            JSON_GET_TEXT,
            immutable,
            |a| step_type(a, SqlScalarType::Text),
            |row, _| step(row)?.map_or(Ok(Datum::Null), value_text),
        )
        .udf(),
        RowFunction::new(
            JSON_GET_PATH,
            Volatility::Immutable,
            |a| path_type(a, SqlScalarType::Json),
            |row, _| Ok(at_path(row, false)?.map_or(Datum::Null, as_json)),
        )
        .udf(),
        RowFunction::new(
            JSON_GET_PATH_TEXT,
            Volatility::Immutable,
            |a| path_type(a, SqlScalarType::Text),
            |row, _| at_path(row, false)?.map_or(Ok(Datum::Null), value_text),
        )
        .udf(),
        RowFunction::new(
            "json_extract_path",
            Volatility::Immutable,
            |a| path_type(a, SqlScalarType::Json),
            |row, _| Ok(at_path(row, true)?.map_or(Datum::Null, as_json)),
        )
        .lenient()
        .udf(),
        RowFunction::new(
            "json_extract_path_text",
            Volatility::Immutable,
            |a| path_type(a, SqlScalarType::Text),
            |row, _| at_path(row, true)?.map_or(Ok(Datum::Null), value_text),
        )
        .lenient()
        .udf(),
        list_function(ARRAY_ELEMENTS, SqlScalarType::Json, |row, _| {
            let elements = elements(row, "json_array_elements")?;
            Ok(Datum::List(elements.into_iter().map(as_json).collect()))
        }),
        list_function(ARRAY_ELEMENTS_TEXT, SqlScalarType::Text, |row, _| {
            let elements = elements(row, "json_array_elements_text")?;
            let texts = elements.into_iter().map(value_text);
            Ok(Datum::List(texts.collect::<Result<_, _>>()?))
        }),
        list_function(OBJECT_KEYS, SqlScalarType::Text, |row, _| {
            let members = members(row, Some("json_object_keys"))?;
            Ok(Datum::List(
                members.into_iter().map(|(k, _)| Datum::Text(k)).collect(),
            ))
        }),
        list_function(EACH_KEYS, SqlScalarType::Text, |row, _| {
            let members = members(row, None)?;
            Ok(Datum::List(
                members.into_iter().map(|(k, _)| Datum::Text(k)).collect(),
            ))
        }),
        list_function(EACH_VALUES, SqlScalarType::Json, |row, _| {
            let members = members(row, None)?;
            Ok(Datum::List(
                members.into_iter().map(|(_, v)| as_json(v)).collect(),
            ))
        }),
        list_function(EACH_TEXT_VALUES, SqlScalarType::Text, |row, _| {
            let members = members(row, None)?;
            let texts = members.into_iter().map(|(_, v)| value_text(v));
            Ok(Datum::List(texts.collect::<Result<_, _>>()?))
        }),
    ]
}

fn path_type(
    arguments: &Arguments<'_>,
    result: SqlScalarType,
) -> Result<SqlScalarType, QueryError> {
    if arguments.types.len() < 2 {
        return Err(no_such_function(arguments.function, &arguments.types));
    }
    Ok(result)
}

/// The text at a path (a text array, or with `keys` the arguments after the
/// document), as written; `None` where the path reaches nothing (or a step,
/// or the document, is NULL).
fn at_path(row: &[Datum], keys: bool) -> Result<Option<&str>, QueryError> {
    if matches!(row.first(), None | Some(Datum::Null)) {
        return Ok(None);
    }
    let mut text = json_argument(row)?;
    let steps = match row {
        [_, path] if !keys => super::jsonb::text_items(path)?,
        [_, keys @ ..] => keys
            .iter()
            .map(|key| match key {
                Datum::Null => None,
                Datum::Text(key) => Some(key.clone()),
                other => Some(floe_repr::format_datum(other)),
            })
            .collect(),
        [] => return Ok(None),
    };
    for step in steps {
        let Some(step) = step else {
            return Ok(None);
        };
        // A step into an array is an index (a key that is none reaches nothing).
        let reached = if text.trim_start().starts_with('[') {
            match step.trim().parse::<i64>() {
                Ok(index) => json_step_text(text, JsonStep::Index(index)),
                Err(_) => return Ok(None),
            }
        } else {
            json_step_text(text, JsonStep::Key(&step))
        };
        match reached.map_err(QueryError::from_value)? {
            Some(next) => text = next,
            None => return Ok(None),
        }
    }
    Ok(Some(text))
}

/// A function of `json` text answering a list of `item`s.
fn list_function(name: &'static str, item: SqlScalarType, rule: super::RowRule) -> ScalarUDF {
    let result = if item == SqlScalarType::Json {
        |a: &Arguments<'_>| json_list(a, SqlScalarType::Json)
    } else {
        |a: &Arguments<'_>| json_list(a, SqlScalarType::Text)
    };
    RowFunction::new(name, Volatility::Immutable, result, rule).udf()
}

fn json_list(arguments: &Arguments<'_>, item: SqlScalarType) -> Result<SqlScalarType, QueryError> {
    expect_arguments(arguments.function, arguments, &[1])?;
    match &arguments.types[0] {
        SqlScalarType::Json | SqlScalarType::Text | SqlScalarType::VarChar { .. } => {
            Ok(SqlScalarType::List {
                element: Box::new(item),
            })
        }
        _ => Err(no_such_function(arguments.function, &arguments.types)),
    }
}

fn as_json(text: &str) -> Datum {
    Datum::Text(text.to_string())
}

fn json_argument(row: &[Datum]) -> Result<&str, QueryError> {
    match row.first() {
        Some(Datum::Text(text)) => Ok(text),
        _ => Err(QueryError::internal("json is text")),
    }
}

/// Whether json text (that is no object) is an array, which PostgreSQL's
/// errors tell from a scalar.
fn is_array(text: &str) -> bool {
    text.trim_start().starts_with('[')
}

fn invalid(message: String) -> QueryError {
    QueryError::new(floe_repr::SqlState::INVALID_PARAMETER_VALUE, message)
}

fn elements<'a>(row: &'a [Datum], function: &str) -> Result<Vec<&'a str>, QueryError> {
    let text = json_argument(row)?;
    match json_elements_text(text).map_err(QueryError::from_value)? {
        Some(elements) => Ok(elements),
        None if text.trim_start().starts_with('{') => {
            Err(invalid(format!("cannot call {function} on a non-array")))
        }
        None => Err(invalid(format!("cannot call {function} on a scalar"))),
    }
}

/// An object's members; `function` names `json_object_keys` in its errors
/// (`json_each`'s are worded otherwise).
fn members<'a>(
    row: &'a [Datum],
    function: Option<&str>,
) -> Result<Vec<(String, &'a str)>, QueryError> {
    let text = json_argument(row)?;
    if let Some(members) = json_members_text(text).map_err(QueryError::from_value)? {
        return Ok(members);
    }
    let array = is_array(text);
    let what = if array { "an array" } else { "a scalar" };
    Err(invalid(match function {
        Some(function) => format!("cannot call {function} on {what}"),
        None if array => "cannot deconstruct an array as an object".to_string(),
        None => "cannot deconstruct a scalar".to_string(),
    }))
}

fn step_type(
    arguments: &Arguments<'_>,
    result: SqlScalarType,
) -> Result<SqlScalarType, QueryError> {
    expect_arguments(arguments.function, arguments, &[2])?;
    match &arguments.types[1] {
        SqlScalarType::Text
        | SqlScalarType::VarChar { .. }
        | SqlScalarType::Int16
        | SqlScalarType::Int32
        | SqlScalarType::Int64 => Ok(result),
        _ => Err(no_such_function(arguments.function, &arguments.types)),
    }
}

/// The text the step of `row[1]` reaches in the `json` of `row[0]`.
fn step(row: &[Datum]) -> Result<Option<&str>, QueryError> {
    let Datum::Text(json) = &row[0] else {
        return Err(QueryError::internal("json is text"));
    };
    let step = match &row[1] {
        Datum::Text(key) => JsonStep::Key(key),
        Datum::Int16(index) => JsonStep::Index(i64::from(*index)),
        Datum::Int32(index) => JsonStep::Index(i64::from(*index)),
        Datum::Int64(index) => JsonStep::Index(*index),
        other => return Err(QueryError::internal(format!("json step {other:?}"))),
    };
    json_step_text(json, step).map_err(QueryError::from_value)
}

/// `->>`'s text of a value: a string's contents, NULL for `null`, else the
/// value as written.
fn value_text(text: &str) -> Result<Datum, QueryError> {
    Ok(match parse_json(text).map_err(QueryError::from_value)? {
        Json::String(contents) => Datum::Text(contents),
        Json::Null => Datum::Null,
        _ => Datum::Text(text.to_string()),
    })
}
