//! Postgres' array functions that drivers' catalog queries call: the bound functions
//! (pgjdbc's type lookup asks `array_upper(current_schemas(false), 1)`) and
//! `information_schema._pg_expandarray` (pgjdbc's `getPrimaryKeys` and `getIndexInfo`
//! expand `pg_index.indkey` with it). floe's arrays and lists have one dimension,
//! indexed from 1: an empty one has no bounds (NULL), as in Postgres.

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
        RowFunction::new(
            EXPAND_ARRAY,
            Volatility::Immutable,
            expand_type,
            |row, _| Ok(expand(row)),
        )
        .udf(),
        RowFunction::new(
            VECTOR_ELEMENT,
            Volatility::Immutable,
            vector_element_type,
            |row, _| vector_element(row),
        )
        .udf(),
    ]
}

/// `vector[i]` of an `int2vector` (`pg_index.indoption[i]`, which pgjdbc's
/// `getIndexInfo` reads): floe's catalog spells int2vectors as text (`0 0`), so a
/// subscript of a text value plans as this ([`crate::semantics`]).
pub const VECTOR_ELEMENT: &str = "floe_int2vector_element";

/// `(int2vector, integer) -> smallint`.
fn vector_element_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    match arguments.types.as_slice() {
        [
            SqlScalarType::Text,
            SqlScalarType::Int16 | SqlScalarType::Int32 | SqlScalarType::Int64,
        ] => Ok(SqlScalarType::Int16),
        [SqlScalarType::Text, _] => Err(QueryError::new(
            floe_repr::SqlState::DATATYPE_MISMATCH,
            "array subscript must have type integer",
        )),
        types => Err(no_such_function(VECTOR_ELEMENT, types)),
    }
}

/// The element at `index`, counted from 0 as an int2vector's are; NULL past either
/// end. Text that is no int2vector cannot be subscripted, as in Postgres.
fn vector_element(row: &[Datum]) -> Result<Datum, QueryError> {
    let Some(Datum::Text(vector)) = row.first() else {
        return Ok(Datum::Null);
    };
    let elements: Option<Vec<i16>> = vector
        .split_whitespace()
        .map(|word| word.parse::<i16>().ok())
        .collect();
    let Some(elements) = elements else {
        return Err(QueryError::new(
            floe_repr::SqlState::DATATYPE_MISMATCH,
            "cannot subscript type text because it does not support subscripting",
        ));
    };
    let index = match row.get(1) {
        Some(Datum::Int16(i)) => i64::from(*i),
        Some(Datum::Int32(i)) => i64::from(*i),
        Some(Datum::Int64(i)) => *i,
        _ => return Ok(Datum::Null),
    };
    Ok(usize::try_from(index)
        .ok()
        .and_then(|index| elements.get(index))
        .map_or(Datum::Null, |element| Datum::Int16(*element)))
}

/// `_pg_expandarray(array)`: a record `(x, n)` per element, the element and its
/// position from 1. A set-returning function: the rewrite unnests the list of records
/// this returns ([`crate::srf`]).
pub const EXPAND_ARRAY: &str = "_pg_expandarray";

/// `anyarray -> setof record(x anyelement, n integer)`; an `int2vector` (which floe's
/// `pg_index.indkey` spells as text, `1 2`) expands to `smallint` elements.
fn expand_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    let element = match arguments.types.as_slice() {
        [SqlScalarType::List { element }] => element.as_ref().clone(),
        [SqlScalarType::Text] => SqlScalarType::Int16,
        types => return Err(no_such_function(EXPAND_ARRAY, types)),
    };
    Ok(SqlScalarType::List {
        element: Box::new(SqlScalarType::Record {
            fields: vec![
                ("x".to_string(), element, true),
                ("n".to_string(), SqlScalarType::Int32, false),
            ],
        }),
    })
}

fn expand(row: &[Datum]) -> Datum {
    let elements: Vec<Datum> = match row.first() {
        Some(Datum::List(items)) => items.clone(),
        Some(Datum::TextArray(items)) => items
            .iter()
            .map(|item| item.clone().map_or(Datum::Null, Datum::Text))
            .collect(),
        // int2vector's text form; a word that is no smallint is NULL.
        Some(Datum::Text(vector)) => vector
            .split_whitespace()
            .map(|word| word.parse::<i16>().map_or(Datum::Null, Datum::Int16))
            .collect(),
        _ => return Datum::Null,
    };
    Datum::List(
        elements
            .into_iter()
            .zip(1..)
            .map(|(element, position)| Datum::Record(vec![element, Datum::Int32(position)]))
            .collect(),
    )
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
