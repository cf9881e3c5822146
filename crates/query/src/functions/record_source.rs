//! The documents `jsonb_to_record` and `jsonb_to_recordset` read
//! (`crate::json_record`), checked as PostgreSQL checks them: an object, an
//! array of objects. Each function answers its document, or PostgreSQL's
//! error naming the function called (its second argument).

use datafusion::logical_expr::{ScalarUDF, Volatility};
use floe_repr::strconv::Json;
use floe_repr::{Datum, SqlScalarType, SqlState};

use super::jsonb::document;
use super::{Arguments, RowFunction};
use crate::error::QueryError;

/// `floe_record_object(doc, function)`: `doc`, an object.
pub const RECORD_OBJECT: &str = "floe_record_object";
/// `floe_record_array(doc, function)`: `doc`, an array of objects.
pub const RECORD_ARRAY: &str = "floe_record_array";

pub(super) fn functions() -> Vec<ScalarUDF> {
    let immutable = Volatility::Immutable;
    vec![
        RowFunction::new(RECORD_OBJECT, immutable, jsonb_type, |row, _| {
            object(&row[0])
        })
        .udf(),
        RowFunction::new(RECORD_ARRAY, immutable, jsonb_type, |row, _| {
            array_of_objects(&row[0], &row[1])
        })
        .udf(),
    ]
}

fn jsonb_type(_: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    Ok(SqlScalarType::Jsonb)
}

fn invalid(message: String) -> QueryError {
    QueryError::new(SqlState::INVALID_PARAMETER_VALUE, message)
}

fn object(value: &Datum) -> Result<Datum, QueryError> {
    match document(value)? {
        Json::Object(_) => Ok(value.clone()),
        Json::Array(_) => Err(invalid(
            "cannot call populate_composite on an array".to_string(),
        )),
        _ => Err(invalid(
            "cannot call populate_composite on a scalar".to_string(),
        )),
    }
}

fn array_of_objects(value: &Datum, function: &Datum) -> Result<Datum, QueryError> {
    let function = match function {
        Datum::Text(name) => name.as_str(),
        _ => "jsonb_to_recordset",
    };
    match document(value)? {
        Json::Array(items) if items.iter().all(|item| matches!(item, Json::Object(_))) => {
            Ok(value.clone())
        }
        Json::Array(_) => Err(invalid(format!(
            "argument of {function} must be an array of objects"
        ))),
        _ => Err(invalid(format!("cannot call {function} on a non-array"))),
    }
}
