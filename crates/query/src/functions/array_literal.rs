//! `ARRAY[...]` (DataFusion's `make_array`) with PostgreSQL's arrays of more
//! dimensions. floe holds them as arrays of arrays, so `ARRAY[[1,2],[3]]` is
//! a list of lists of unequal lengths to the engine; PostgreSQL's sub-arrays
//! must all have one shape (2202E). Its sub-arrays all NULL or empty make the
//! empty array (`ARRAY[NULL::int[], '{}']` is `{}`), some of them so beside
//! others are the same error. Exact numbers of more digits than floe's
//! numeric holds are one wider decimal (`ARRAY[1e40, 1.5]`), as PostgreSQL's
//! numeric is of any precision. Other calls are the engine's.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, ListArray, new_empty_array};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::compute::kernels::zip::zip;
use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::Result as DfResult;
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
};
use floe_repr::{Datum, SqlState};

use super::arithmetic::is_exact;
use super::array::{dimensions, innermost};
use super::compatible_element::common_decimal;
use crate::error::QueryError;

pub(super) fn function() -> ScalarUDF {
    let inner = datafusion::functions_nested::make_array::make_array_udf();
    ScalarUDF::new_from_impl(ArrayLiteral { inner })
}

/// DataFusion's `make_array`, its answer checked where its items are arrays.
#[derive(Debug, PartialEq, Eq, Hash)]
struct ArrayLiteral {
    inner: Arc<ScalarUDF>,
}

impl ScalarUDFImpl for ArrayLiteral {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> DfResult<Vec<DataType>> {
        if let Some(wide) = wide_decimal(arg_types) {
            return Ok(vec![wide; arg_types.len()]);
        }
        self.inner.coerce_types(arg_types)
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        self.inner.return_type(arg_types)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        self.inner.return_field_from_args(args)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let of_arrays = args
            .arg_fields
            .iter()
            .any(|field| matches!(field.data_type(), DataType::List(_)));
        let (scalar, rows) = super::call_rows(&args);
        let field = args.return_field.clone();
        let answer = self.inner.invoke_with_args(args)?;
        if !of_arrays {
            return Ok(answer);
        }
        let array = answer.to_array(rows)?;
        super::columnar(with_matching_dimensions(array, &field)?, scalar)
    }
}

/// The one decimal type of exact numbers whose digits are more than floe's
/// numeric precision holds (`ARRAY[1e40, 1.5]`), where the engine's would
/// overflow; `None` for any other items, which the engine makes one.
fn wide_decimal(arg_types: &[DataType]) -> Option<DataType> {
    let (first, rest) = arg_types.split_first()?;
    if !arg_types.iter().all(is_exact) {
        return None;
    }
    let common = rest
        .iter()
        .try_fold(first.clone(), |common, next| common_decimal(&common, next))?;
    matches!(common, DataType::Decimal256(..)).then_some(common)
}

/// PostgreSQL's error where a sub-array of NULLs alone, which is `text[]`
/// (`ARRAY[NULL, NULL]`), meets one of items of another type than text:
/// the sub-arrays are of the first's type, which the others do not convert
/// to (`ARRAY[[1,NULL],[NULL,NULL]]`, `ARRAY[[NULL],[1]]`).
pub(crate) fn unconvertible_sub_array(arg_types: &[DataType]) -> Option<QueryError> {
    let is_of_nulls = |t: &DataType| matches!(t, DataType::List(_)) && innermost(t).is_null();
    let is_text = |t: &DataType| is_of_nulls(t) || innermost(t) == &DataType::Utf8;
    let any_of_nulls = arg_types.iter().any(is_of_nulls);
    let other = arg_types
        .iter()
        .find(|t| matches!(t, DataType::List(_)) && !is_text(t))?;
    if !any_of_nulls {
        return None;
    }
    let first = arg_types.iter().find(|t| !t.is_null())?;
    let (from, to) = if is_text(first) {
        (array_type_name(other), "text[]".to_string())
    } else {
        ("text[]".to_string(), array_type_name(first))
    };
    Some(QueryError::new(
        SqlState::CANNOT_COERCE,
        format!("ARRAY could not convert type {from} to {to}"),
    ))
}

/// PostgreSQL's name of an array type (`integer[]` of any dimensions).
fn array_type_name(data_type: &DataType) -> String {
    super::sql_type(&datafusion::arrow::datatypes::Field::new(
        "",
        data_type.clone(),
        true,
    ))
    .to_string()
}

/// `array`, a list of sub-arrays, with each row of sub-arrays all NULL or
/// empty the empty array; an error where a row's sub-arrays differ in shape.
fn with_matching_dimensions(array: ArrayRef, field: &FieldRef) -> DfResult<ArrayRef> {
    let rows = floe_arrow::array_to_datums(&array, field)
        .map_err(|e| QueryError::from_value(e).into_datafusion())?;
    let mut empty = Vec::with_capacity(rows.len());
    for row in &rows {
        empty.push(match row {
            Datum::List(items) => all_empty(items).map_err(QueryError::into_datafusion)?,
            _ => false,
        });
    }
    if !empty.contains(&true) {
        return Ok(array);
    }
    let DataType::List(item) = array.data_type() else {
        return Ok(array);
    };
    // The engine's list of NULL or empty sub-arrays, where PostgreSQL's is `{}`.
    let empties = ListArray::new(
        item.clone(),
        OffsetBuffer::new_zeroed(array.len()),
        new_empty_array(item.data_type()),
        None,
    );
    Ok(zip(&BooleanArray::from(empty), &empties, &array)?)
}

/// Whether sub-arrays are all NULL or empty (their array is the empty one);
/// PostgreSQL's error where they differ in shape, or only some are so.
fn all_empty(items: &[Datum]) -> Result<bool, QueryError> {
    let mut shape: Option<Vec<usize>> = None;
    let mut some_empty = false;
    for item in items {
        match dimensions(item) {
            // NULL, or an array without dimensions.
            None => some_empty = true,
            Some(lengths) if lengths.is_empty() => some_empty = true,
            Some(lengths) => match &shape {
                None => shape = Some(lengths),
                Some(first) if *first == lengths => {}
                Some(_) => return Err(unmatched_dimensions()),
            },
        }
    }
    match (some_empty, shape) {
        (true, Some(_)) => Err(unmatched_dimensions()),
        (some_empty, _) => Ok(some_empty),
    }
}

fn unmatched_dimensions() -> QueryError {
    QueryError::new(
        SqlState::ARRAY_SUBSCRIPT_ERROR,
        "multidimensional arrays must have array expressions with matching dimensions",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn array_of(item: DataType) -> DataType {
        DataType::new_list(item, true)
    }

    #[test]
    fn a_sub_array_of_nulls_alone_is_text_which_other_items_do_not_meet() {
        let integers = array_of(DataType::Int32);
        let nulls = array_of(DataType::Null);
        let message = |types: &[DataType]| unconvertible_sub_array(types).map(|e| e.message);
        assert_eq!(
            message(&[integers.clone(), nulls.clone()]).as_deref(),
            Some("ARRAY could not convert type text[] to integer[]")
        );
        assert_eq!(
            message(&[nulls.clone(), integers.clone()]).as_deref(),
            Some("ARRAY could not convert type integer[] to text[]")
        );
        assert_eq!(message(&[nulls.clone(), array_of(DataType::Utf8)]), None);
        assert_eq!(message(&[integers.clone(), DataType::Null]), None);
        assert!(message(&[array_of(nulls), array_of(integers)]).is_some());
    }
}
