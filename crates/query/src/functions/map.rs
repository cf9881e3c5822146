//! Materialize's list and map constructors, and its map operators and
//! functions.
//!
//! floe's parser makes `LIST[a, b]` `floe_list(ARRAY[a, b])` and `MAP['k' =>
//! v]` `floe_map(ARRAY['k'], ARRAY[v])` (floe-sql-parser's `constructors`),
//! so the engine's array literal gives the items one type, as Materialize
//! gives a list's; the constructors retype the array as a list, or pair its
//! keys with its values (a list of lists is built of the lists themselves:
//! an array of them would be an array of more dimensions). A map holds its entries in key order, one per key
//! (a later entry of a key replaces an earlier one, as Materialize's do).
//!
//! Operators on a map (`semantics` plans them): `m -> k` (the value of key
//! `k`, NULL where there is none), `m ? k`, `m ?& keys`, `m ?| keys` (whether
//! it has the key, all, any of the keys), `m @> n` and `m <@ n` (whether it
//! holds every entry of `n`, whether `n` holds every one of its); and
//! `map_length(m)` and `list_n_layers(list)`.

use std::sync::Arc;

use datafusion::arrow::array::{Array, Int32Array};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use floe_repr::{Datum, SqlScalarType, SqlState};
use sqlparser::ast::BinaryOperator;

use super::{Arguments, RowFunction, no_such_function};
use crate::error::QueryError;
use crate::rewrite::{LIST_CONSTRUCTOR, LIST_OF_LISTS, MAP_CONSTRUCTOR};

const MAP_GET: &str = "floe_map_get";
const MAP_EXISTS: &str = "floe_map_exists";
const MAP_EXISTS_ALL: &str = "floe_map_exists_all";
const MAP_EXISTS_ANY: &str = "floe_map_exists_any";
const MAP_CONTAINS: &str = "floe_map_contains";
const MAP_CONTAINED: &str = "floe_map_contained";

pub(super) fn functions() -> Vec<ScalarUDF> {
    let function = |name, return_rule, row_rule| {
        RowFunction::new(name, Volatility::Immutable, return_rule, row_rule).udf()
    };
    vec![
        function(LIST_CONSTRUCTOR, list_type, |row, _| Ok(first(row))),
        RowFunction::new(
            LIST_OF_LISTS,
            Volatility::Immutable,
            lists_type,
            |row, _| Ok(Datum::List(row.to_vec())),
        )
        .lenient()
        .udf(),
        function(MAP_CONSTRUCTOR, map_type, |row, _| map_of(row)),
        function(MAP_GET, get_type, |row, _| Ok(get(row))),
        function(MAP_EXISTS, key_test_type, |row, _| Ok(exists(row))),
        function(MAP_EXISTS_ALL, keys_test_type, |row, _| {
            Ok(exists_keys(row, true))
        }),
        function(MAP_EXISTS_ANY, keys_test_type, |row, _| {
            Ok(exists_keys(row, false))
        }),
        function(MAP_CONTAINS, maps_test_type, |row, _| {
            Ok(contains(row.first(), row.get(1)))
        }),
        function(MAP_CONTAINED, maps_test_type, |row, _| {
            Ok(contains(row.get(1), row.first()))
        }),
        function("map_length", length_type, |row, _| Ok(length(row))),
        ScalarUDF::new_from_impl(ListLayers {
            signature: Signature::any(1, Volatility::Immutable),
        }),
    ]
}

/// `list_n_layers(list)`: how many lists its type nests (`int list list` is 2),
/// from the type, so an empty list has its layers too.
#[derive(Debug, PartialEq, Eq, Hash)]
struct ListLayers {
    signature: Signature,
}

impl ScalarUDFImpl for ListLayers {
    fn name(&self) -> &str {
        "list_n_layers"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Int32)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let types: Vec<SqlScalarType> =
            args.arg_fields.iter().map(|f| super::sql_type(f)).collect();
        match types.as_slice() {
            [SqlScalarType::List { .. }] => {
                Ok(Arc::new(Field::new(self.name(), DataType::Int32, true)))
            }
            types => Err(no_such_function("list_n_layers", types).into_datafusion()),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let mut layers = 0;
        let mut ty = args.arg_fields.first().map(|f| super::sql_type(f));
        while let Some(SqlScalarType::List { element }) = ty {
            layers += 1;
            ty = Some(*element);
        }
        let Some(list) = args.args.first() else {
            return Err(QueryError::internal("list_n_layers arity").into_datafusion());
        };
        let list = list.to_array(args.number_rows)?;
        let counts: Int32Array = (0..list.len())
            .map(|row| (!list.is_null(row)).then_some(layers))
            .collect();
        super::columnar(
            Arc::new(counts),
            args.args
                .iter()
                .all(|a| matches!(a, ColumnarValue::Scalar(_))),
        )
    }
}

/// The function of operator `op` on a map, if it has one.
pub fn operator_function(op: &BinaryOperator) -> Option<&'static str> {
    Some(match op {
        BinaryOperator::Arrow => MAP_GET,
        BinaryOperator::Question => MAP_EXISTS,
        BinaryOperator::QuestionAnd => MAP_EXISTS_ALL,
        BinaryOperator::QuestionPipe => MAP_EXISTS_ANY,
        BinaryOperator::AtArrow => MAP_CONTAINS,
        BinaryOperator::ArrowAt => MAP_CONTAINED,
        _ => return None,
    })
}

fn first(row: &[Datum]) -> Datum {
    row.first().cloned().unwrap_or(Datum::Null)
}

/// `floe_list(array)`: a list of the array's items' type.
fn list_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    match arguments.types.as_slice() {
        [SqlScalarType::Array { element } | SqlScalarType::List { element }] => {
            Ok(SqlScalarType::List {
                element: element.clone(),
            })
        }
        types => Err(no_such_function("list", types)),
    }
}

/// `floe_list_of_lists(lists...)`: a list of the lists' type (NULL items
/// aside, all one).
fn lists_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    let null = |index: usize| {
        arguments
            .constants
            .get(index)
            .copied()
            .flatten()
            .is_some_and(ScalarValue::is_null)
    };
    let mut types = (0..arguments.types.len())
        .filter(|index| !null(*index))
        .map(|index| &arguments.types[index]);
    let first = types.next();
    match first {
        Some(list @ SqlScalarType::List { .. }) if types.all(|ty| ty == list) => {
            Ok(SqlScalarType::List {
                element: Box::new(list.clone()),
            })
        }
        _ => Err(QueryError::new(
            SqlState::DATATYPE_MISMATCH,
            format!(
                "cannot determine the type of a list of {}",
                arguments
                    .types
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

/// `floe_map(keys, values)`: a map of the values' type; its keys are text.
fn map_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    match arguments.types.as_slice() {
        [
            SqlScalarType::Array { element: key },
            SqlScalarType::Array { element: value },
        ] => {
            if !is_text(key) {
                return Err(QueryError::new(
                    SqlState::DATATYPE_MISMATCH,
                    format!("map keys must be of type text, not {key}"),
                ));
            }
            Ok(SqlScalarType::Map {
                value: value.clone(),
            })
        }
        types => Err(no_such_function("map", types)),
    }
}

fn is_text(ty: &SqlScalarType) -> bool {
    matches!(ty, SqlScalarType::Text | SqlScalarType::VarChar { .. })
}

/// The items of an array or list datum.
fn items(datum: &Datum) -> Option<Vec<Datum>> {
    match datum {
        Datum::List(items) => Some(items.clone()),
        Datum::TextArray(items) => Some(
            items
                .iter()
                .map(|item| item.clone().map_or(Datum::Null, Datum::Text))
                .collect(),
        ),
        _ => None,
    }
}

fn key_text(datum: &Datum) -> Option<&str> {
    match datum {
        Datum::Text(text) => Some(text),
        _ => None,
    }
}

/// The map of `keys` (row 0) paired with `values` (row 1), in key order.
fn map_of(row: &[Datum]) -> Result<Datum, QueryError> {
    let (Some(keys), Some(values)) = (row.first().and_then(items), row.get(1).and_then(items))
    else {
        return Ok(Datum::Null);
    };
    let mut entries = std::collections::BTreeMap::new();
    for (key, value) in keys.iter().zip(values) {
        let Some(key) = key_text(key) else {
            return Err(QueryError::new(
                SqlState::NULL_VALUE_NOT_ALLOWED,
                "map keys cannot be NULL",
            ));
        };
        entries.insert(key.to_string(), value);
    }
    Ok(Datum::Map(entries.into_iter().collect()))
}

fn map_value(arguments: &Arguments<'_>, name: &str) -> Result<SqlScalarType, QueryError> {
    match arguments.types.first() {
        Some(SqlScalarType::Map { value }) => Ok(value.as_ref().clone()),
        _ => Err(no_such_function(name, &arguments.types)),
    }
}

/// `map -> text`: of the map's values' type.
fn get_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    match arguments.types.get(1) {
        Some(key) if is_text(key) => map_value(arguments, "->"),
        _ => Err(operator_error("->", &arguments.types)),
    }
}

fn key_test_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    match arguments.types.as_slice() {
        [SqlScalarType::Map { .. }, key] if is_text(key) => Ok(SqlScalarType::Bool),
        types => Err(operator_error("?", types)),
    }
}

fn keys_test_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    match arguments.types.as_slice() {
        [
            SqlScalarType::Map { .. },
            SqlScalarType::Array { element } | SqlScalarType::List { element },
        ] if is_text(element) => Ok(SqlScalarType::Bool),
        types => Err(operator_error("?&", types)),
    }
}

fn maps_test_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    match arguments.types.as_slice() {
        [
            SqlScalarType::Map { value: a },
            SqlScalarType::Map { value: b },
        ] if a == b => Ok(SqlScalarType::Bool),
        types => Err(operator_error("@>", types)),
    }
}

fn length_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    map_value(arguments, "map_length").map(|_| SqlScalarType::Int32)
}

/// PostgreSQL's 42883 for an operator of these operand types.
fn operator_error(operator: &str, types: &[SqlScalarType]) -> QueryError {
    let operands: Vec<String> = types.iter().map(ToString::to_string).collect();
    QueryError::new(
        SqlState::UNDEFINED_FUNCTION,
        format!("operator does not exist: {}", operands.join(&format!(" {operator} "))),
    )
    .with_hint(
        "No operator matches the given name and argument types. You might need to add explicit type casts.",
    )
}

fn entries(datum: Option<&Datum>) -> &[(String, Datum)] {
    match datum {
        Some(Datum::Map(entries)) => entries,
        _ => &[],
    }
}

fn get(row: &[Datum]) -> Datum {
    let key = row.get(1).and_then(key_text);
    entries(row.first())
        .iter()
        .find(|(k, _)| Some(k.as_str()) == key)
        .map_or(Datum::Null, |(_, value)| value.clone())
}

fn has_key(map: &[(String, Datum)], key: &str) -> bool {
    map.binary_search_by(|(k, _)| k.as_str().cmp(key)).is_ok()
}

fn exists(row: &[Datum]) -> Datum {
    let map = entries(row.first());
    Datum::Bool(
        row.get(1)
            .and_then(key_text)
            .is_some_and(|key| has_key(map, key)),
    )
}

/// Whether the map has all (`all`) or any of the keys; a NULL key is none of
/// its keys.
fn exists_keys(row: &[Datum], all: bool) -> Datum {
    let map = entries(row.first());
    let keys = row.get(1).and_then(items).unwrap_or_default();
    let mut found = keys
        .iter()
        .map(|key| key_text(key).is_some_and(|key| has_key(map, key)));
    Datum::Bool(if all {
        found.all(|f| f)
    } else {
        found.any(|f| f)
    })
}

/// Whether `outer` holds every entry of `inner` (of an equal value).
fn contains(outer: Option<&Datum>, inner: Option<&Datum>) -> Datum {
    let outer = entries(outer);
    Datum::Bool(entries(inner).iter().all(|(key, value)| {
        outer
            .binary_search_by(|(k, _)| k.as_str().cmp(key))
            .is_ok_and(|at| &outer[at].1 == value)
    }))
}

fn length(row: &[Datum]) -> Datum {
    let count = entries(row.first()).len();
    Datum::Int32(i32::try_from(count).unwrap_or(i32::MAX))
}
