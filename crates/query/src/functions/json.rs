//! `json`'s own operators, over its text as written: `->` answers the member's
//! or element's text with the input's spelling (`{"x" :  1}`), `->>` its text
//! (a string unquoted, `null` as NULL), as PostgreSQL's `json` does; `jsonb`'s
//! answer a normalized document.

use datafusion::logical_expr::{ScalarUDF, Volatility};
use floe_repr::strconv::{Json, JsonStep, json_step_text, parse_json};
use floe_repr::{Datum, SqlScalarType};

use super::{Arguments, RowFunction, expect_arguments, no_such_function};
use crate::error::QueryError;

/// `json -> key` and `json -> index` (planned by `crate::semantics`).
pub const JSON_GET: &str = "floe_json_get";
/// `json ->> key` and `json ->> index`.
pub const JSON_GET_TEXT: &str = "floe_json_get_text";

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
    ]
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
