//! Postgres' array functions that drivers' catalog queries call: the bound functions
//! (pgjdbc's type lookup asks `array_upper(current_schemas(false), 1)`) and
//! `information_schema._pg_expandarray` (pgjdbc's `getPrimaryKeys` and `getIndexInfo`
//! expand `pg_index.indkey` with it), and the functions on an array's shape, which
//! answer `integer` as in Postgres (DataFusion's answer `uint8`). Arrays are indexed
//! from 1: an empty one has no bounds and no dimensions (NULL), as in Postgres.

use datafusion::arrow::datatypes::DataType;
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
            "array_length",
            Volatility::Immutable,
            length_type,
            |row, _| Ok(length(row)),
        )
        .udf(),
        RowFunction::new(
            "cardinality",
            Volatility::Immutable,
            cardinality_type,
            |row, _| Ok(cardinality(row)),
        )
        .udf(),
        RowFunction::new(
            "array_ndims",
            Volatility::Immutable,
            ndims_type,
            |row, _| Ok(ndims(row)),
        )
        .udf(),
        RowFunction::new("array_dims", Volatility::Immutable, dims_type, |row, _| {
            Ok(dims(row))
        })
        .udf(),
        RowFunction::new(
            "list_length",
            Volatility::Immutable,
            list_length_type,
            |row, _| Ok(list_length(row)),
        )
        .udf(),
        super::integer_result::array_position(),
        super::integer_result::array_positions(),
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
        [SqlScalarType::List { element } | SqlScalarType::Array { element }] => {
            element.as_ref().clone()
        }
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
            SqlScalarType::List { .. } | SqlScalarType::Array { .. },
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

/// The lengths of an array's dimensions, outermost first: a nested array's are
/// its first element's, as Postgres' arrays are rectangular. Empty for an empty
/// array (which has no dimensions in Postgres), `None` for a value that is none.
pub(super) fn dimensions(value: &Datum) -> Option<Vec<usize>> {
    let (length, first) = match value {
        Datum::List(items) => (items.len(), items.first()),
        Datum::TextArray(items) => (items.len(), None),
        _ => return None,
    };
    if length == 0 {
        return Some(Vec::new());
    }
    let mut lengths = vec![length];
    if let Some(first @ (Datum::List(_) | Datum::TextArray(_))) = first {
        let inner = dimensions(first)?;
        // Arrays of empty arrays are the empty array.
        if inner.is_empty() {
            return Some(Vec::new());
        }
        lengths.extend(inner);
    }
    Some(lengths)
}

/// The item type of arrays of arrays, however deep.
pub fn innermost(data_type: &DataType) -> &DataType {
    match data_type {
        DataType::List(item) => innermost(item.data_type()),
        other => other,
    }
}

fn integer(value: usize) -> Datum {
    i32::try_from(value).map_or(Datum::Null, Datum::Int32)
}

fn length_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    bound_type("array_length", arguments)
}

/// `array_length(array, dimension)`: NULL for an empty array or a dimension it
/// does not have (never 0, as in Postgres).
fn length(row: &[Datum]) -> Datum {
    let dimension = match row.get(1) {
        Some(Datum::Int16(d)) => i64::from(*d),
        Some(Datum::Int32(d)) => i64::from(*d),
        Some(Datum::Int64(d)) => *d,
        _ => return Datum::Null,
    };
    let lengths = row.first().and_then(dimensions).unwrap_or_default();
    usize::try_from(dimension)
        .ok()
        .and_then(|d| d.checked_sub(1))
        .and_then(|index| lengths.get(index))
        .map_or(Datum::Null, |length| integer(*length))
}

/// `(array) -> integer`, the rule of the functions of one array.
fn of_array(name: &str, arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    match arguments.types.as_slice() {
        [SqlScalarType::List { .. } | SqlScalarType::Array { .. }] => Ok(SqlScalarType::Int32),
        types => Err(no_such_function(name, types)),
    }
}

fn cardinality_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    of_array("cardinality", arguments)
}

/// `cardinality(array)`: the number of elements in all dimensions; 0 when empty.
fn cardinality(row: &[Datum]) -> Datum {
    match row.first().and_then(dimensions) {
        Some(lengths) if lengths.is_empty() => Datum::Int32(0),
        Some(lengths) => lengths
            .iter()
            .try_fold(1usize, |product, length| product.checked_mul(*length))
            .map_or(Datum::Null, integer),
        None => Datum::Null,
    }
}

fn ndims_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    of_array("array_ndims", arguments)
}

/// `array_ndims(array)`: NULL for an empty array.
fn ndims(row: &[Datum]) -> Datum {
    match row.first().and_then(dimensions) {
        Some(lengths) if !lengths.is_empty() => integer(lengths.len()),
        _ => Datum::Null,
    }
}

fn dims_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    of_array("array_dims", arguments).map(|_| SqlScalarType::Text)
}

/// `array_dims(array)`: each dimension's bounds as text, `[1:3][1:2]`; NULL for
/// an empty array.
fn dims(row: &[Datum]) -> Datum {
    match row.first().and_then(dimensions) {
        Some(lengths) if !lengths.is_empty() => Datum::Text(
            lengths
                .iter()
                .map(|length| format!("[1:{length}]"))
                .collect(),
        ),
        _ => Datum::Null,
    }
}

fn list_length_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    of_array("list_length", arguments)
}

/// Materialize's `list_length(list)`: the number of the list's own elements (a
/// list of lists counts its lists), `integer` as Materialize answers.
fn list_length(row: &[Datum]) -> Datum {
    match row.first() {
        Some(Datum::List(items)) => integer(items.len()),
        Some(Datum::TextArray(items)) => integer(items.len()),
        _ => Datum::Null,
    }
}
