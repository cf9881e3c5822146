//! Postgres' array bound functions, which drivers' catalog queries call (pgjdbc's type
//! lookup asks `array_upper(current_schemas(false), 1)`). floe's arrays and lists have
//! one dimension, indexed from 1: an empty one has no bounds (NULL), as in Postgres.

use datafusion::logical_expr::{ScalarUDF, Volatility};
use floe_repr::{Datum, SqlScalarType};

use super::{Arguments, RowFunction, no_such_function};
use crate::error::QueryError;

pub(super) fn functions() -> Vec<ScalarUDF> {
    vec![
        RowFunction::new(
            "array_upper",
            Volatility::Immutable,
            upper_type,
            |row, _| Ok(bound(row, |length| length as i64)),
        )
        .udf(),
        RowFunction::new(
            "array_lower",
            Volatility::Immutable,
            lower_type,
            |row, _| Ok(bound(row, |_| 1)),
        )
        .udf(),
    ]
}

fn upper_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    bound_type("array_upper", arguments)
}

fn lower_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    bound_type("array_lower", arguments)
}

/// `(array, integer) -> integer`.
fn bound_type(name: &str, arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    match arguments.types.as_slice() {
        [
            SqlScalarType::List { .. },
            SqlScalarType::Int16 | SqlScalarType::Int32 | SqlScalarType::Int64,
        ] => Ok(SqlScalarType::Int32),
        types => Err(no_such_function(name, types)),
    }
}

/// The bound `of_length` gives for dimension 1 of a non-empty array; NULL for an empty
/// array or another dimension.
fn bound(row: &[Datum], of_length: fn(usize) -> i64) -> Datum {
    let length = match row.first() {
        Some(Datum::List(items)) => items.len(),
        Some(Datum::TextArray(items)) => items.len(),
        _ => return Datum::Null,
    };
    let dimension = match row.get(1) {
        Some(Datum::Int16(d)) => i64::from(*d),
        Some(Datum::Int32(d)) => i64::from(*d),
        Some(Datum::Int64(d)) => *d,
        _ => return Datum::Null,
    };
    match i32::try_from(of_length(length)) {
        Ok(bound) if dimension == 1 && length > 0 => Datum::Int32(bound),
        _ => Datum::Null,
    }
}
