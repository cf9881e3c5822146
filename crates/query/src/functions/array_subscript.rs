//! PostgreSQL's subscripts of an array of more dimensions: one subscript per
//! dimension takes an item, fewer or more take none (NULL), and the result is
//! of the item type whatever their number (`(ARRAY[[1,2],[3,4]])[1]` is a
//! NULL integer). floe holds such arrays as arrays of arrays, whose engine
//! subscript takes a sub-array, so the planner ([`crate::semantics`]) plans
//! `a[i][j]` of one as [`ARRAY_ITEM`] of `a` and all its subscripts.
//!
//! A slice among the subscripts makes each a slice (`[2]` is `[1:2]`), each
//! of its dimension: `(ARRAY[[1,2],[3,4]])[2][2:2]` is `{{2},{4}}`, planned
//! as [`ARRAY_SLICE`]. A dimension without one is whole; one sliced empty,
//! or more slices than dimensions, make the empty array.

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Int64Array, ListArray, new_empty_array, new_null_array,
};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::compute::kernels::zip::zip;
use datafusion::arrow::compute::{cast, nullif, take};
use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};

/// `floe_array_item(array, subscript, ...)`.
pub const ARRAY_ITEM: &str = "floe_array_item";

pub(super) fn function() -> ScalarUDF {
    ScalarUDF::new_from_impl(ArrayItem {
        signature: Signature::variadic_any(Volatility::Immutable),
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct ArrayItem {
    signature: Signature,
}

impl ScalarUDFImpl for ArrayItem {
    fn name(&self) -> &str {
        ARRAY_ITEM
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Err(DataFusionError::Internal(format!(
            "{ARRAY_ITEM} is typed by its fields"
        )))
    }

    /// The innermost item's field, its SQL type (an unconstrained numeric's)
    /// kept.
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let array = args.arg_fields.first().ok_or_else(|| {
            DataFusionError::Plan(format!("{ARRAY_ITEM} takes an array and subscripts"))
        })?;
        let mut item = array.clone();
        while let DataType::List(inner) = item.data_type() {
            item = inner.clone();
        }
        Ok(Arc::new(
            item.as_ref()
                .clone()
                .with_name(ARRAY_ITEM)
                .with_nullable(true),
        ))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let (scalar, rows) = super::call_rows(&args);
        let item_type = args.return_field.data_type().clone();
        let Some((array, subscripts)) = args.args.split_first() else {
            return Ok(ColumnarValue::Array(new_null_array(&item_type, rows)));
        };
        let mut values = array.to_array(rows)?;
        if dimensions(values.data_type()) != subscripts.len() {
            return super::columnar(new_null_array(&item_type, rows), scalar);
        }
        for subscript in subscripts {
            let subscript = cast(&subscript.to_array(rows)?, &DataType::Int64)?;
            values = items_at(&values, subscript.as_primitive())?;
        }
        super::columnar(values, scalar)
    }
}

/// `floe_array_slice(array, lower, upper, ...)`: a bound pair per dimension.
pub const ARRAY_SLICE: &str = "floe_array_slice";

pub(super) fn slice_function() -> ScalarUDF {
    ScalarUDF::new_from_impl(ArraySlice {
        signature: Signature::variadic_any(Volatility::Immutable),
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct ArraySlice {
    signature: Signature,
}

impl ScalarUDFImpl for ArraySlice {
    fn name(&self) -> &str {
        ARRAY_SLICE
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        arg_types.first().cloned().ok_or_else(|| {
            DataFusionError::Plan(format!("{ARRAY_SLICE} takes an array and bounds"))
        })
    }

    /// The array's own field: a slice is of its type.
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let array = args.arg_fields.first().ok_or_else(|| {
            DataFusionError::Plan(format!("{ARRAY_SLICE} takes an array and bounds"))
        })?;
        Ok(Arc::new(
            array
                .as_ref()
                .clone()
                .with_name(ARRAY_SLICE)
                .with_nullable(true),
        ))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let (scalar, rows) = super::call_rows(&args);
        let Some((array, bounds)) = args.args.split_first() else {
            return Err(DataFusionError::Plan(format!(
                "{ARRAY_SLICE} takes an array and bounds"
            )));
        };
        let bounds = bounds
            .iter()
            .map(|bound| Ok(cast(&bound.to_array(rows)?, &DataType::Int64)?))
            .collect::<DfResult<Vec<ArrayRef>>>()?;
        let bounds: Vec<(&Int64Array, &Int64Array)> = bounds
            .chunks(2)
            .filter_map(|pair| match pair {
                [lower, upper] => Some((lower.as_primitive(), upper.as_primitive())),
                _ => None,
            })
            .collect();
        let array = array.to_array(rows)?;
        let origins: Vec<usize> = (0..rows).collect();
        let mut empty = vec![false; rows];
        let sliced = slice_lists(&array, &bounds, &origins, &mut empty)?;
        // A row of a NULL bound is NULL, one sliced empty anywhere `{}`.
        let null_bounds: BooleanArray = (0..rows)
            .map(|row| Some(bounds.iter().any(|(l, u)| l.is_null(row) || u.is_null(row))))
            .collect();
        let empty = BooleanArray::from(empty);
        let empties = ListArray::new(
            list_item(&array)?,
            OffsetBuffer::new_zeroed(rows),
            new_empty_array(list_item(&array)?.data_type()),
            None,
        );
        let answer = zip(&empty, &empties, &sliced)?;
        let answer = nullif(&answer, &null_bounds)?;
        super::columnar(answer, scalar)
    }
}

/// The item field of a list type.
fn list_item(array: &ArrayRef) -> DfResult<FieldRef> {
    match array.data_type() {
        DataType::List(item) => Ok(item.clone()),
        other => Err(DataFusionError::Plan(format!(
            "{ARRAY_SLICE} of {other}, which is no array"
        ))),
    }
}

/// `lists` (of the rows `origins` name) with each list's items from the
/// lower to the upper bound of its row (from 1, within the list), their own
/// items sliced by the bounds that follow. `empty` notes the rows a slice
/// leaves empty, and those with more bounds than dimensions.
fn slice_lists(
    lists: &ArrayRef,
    bounds: &[(&Int64Array, &Int64Array)],
    origins: &[usize],
    empty: &mut [bool],
) -> DfResult<ArrayRef> {
    let DataType::List(_) = lists.data_type() else {
        for origin in origins {
            empty[*origin] |= !bounds.is_empty();
        }
        return Ok(lists.clone());
    };
    let list = lists.as_list::<i32>();
    let offsets = list.value_offsets();
    let mut kept = Vec::new();
    let mut kept_origins = Vec::new();
    let mut lengths = Vec::with_capacity(list.len());
    for (row, origin) in origins.iter().enumerate() {
        let start = i64::from(offsets[row]);
        let length = i64::from(offsets[row + 1]) - start;
        let (lower, upper) = match bounds.first() {
            Some((lower, upper)) if !lower.is_null(*origin) && !upper.is_null(*origin) => (
                lower.value(*origin).max(1),
                upper.value(*origin).min(length),
            ),
            Some(_) => (1, 0),
            // A dimension without a slice is whole.
            None => (1, length),
        };
        let taken = if list.is_null(row) {
            0
        } else {
            (upper - lower + 1).max(0)
        };
        if taken == 0 && !list.is_null(row) {
            empty[*origin] = true;
        }
        kept.extend((0..taken).map(|i| start + lower - 1 + i));
        kept_origins.extend(std::iter::repeat_n(
            *origin,
            usize::try_from(taken).unwrap_or(0),
        ));
        lengths.push(usize::try_from(taken).unwrap_or(0));
    }
    let items = take(list.values().as_ref(), &Int64Array::from(kept), None)?;
    let rest = bounds.get(1..).unwrap_or_default();
    let items = slice_lists(&items, rest, &kept_origins, empty)?;
    Ok(Arc::new(ListArray::new(
        list_item(lists)?,
        OffsetBuffer::from_lengths(lengths),
        items,
        list.nulls().cloned(),
    )))
}

/// The number of dimensions of an array of arrays' type.
fn dimensions(data_type: &DataType) -> usize {
    match data_type {
        DataType::List(item) => 1 + dimensions(item.data_type()),
        _ => 0,
    }
}

/// Each row's item at its subscript (from 1), NULL past either end or where
/// the array or the subscript is.
fn items_at(lists: &ArrayRef, subscripts: &Int64Array) -> DfResult<ArrayRef> {
    let lists = lists.as_list::<i32>();
    let offsets = lists.value_offsets();
    let positions: Int64Array = (0..lists.len())
        .map(|row| {
            if lists.is_null(row) || subscripts.is_null(row) {
                return None;
            }
            let start = i64::from(offsets[row]);
            let length = i64::from(offsets[row + 1]) - start;
            let subscript = subscripts.value(row);
            (1..=length)
                .contains(&subscript)
                .then(|| start + subscript - 1)
        })
        .collect();
    Ok(take(lists.values().as_ref(), &positions, None)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Int32Array;
    use datafusion::arrow::datatypes::{Field, Int32Type};

    #[test]
    fn an_item_at_each_subscript_or_null_past_the_ends() {
        let lists: ArrayRef = Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>([
            Some(vec![Some(1), Some(2)]),
            None,
            Some(vec![Some(3)]),
        ]));
        let subscripts = Int64Array::from(vec![Some(2), Some(1), Some(2)]);
        let items = items_at(&lists, &subscripts).unwrap();
        assert_eq!(
            items.as_primitive::<Int32Type>(),
            &Int32Array::from(vec![Some(2), None, None])
        );
    }

    #[test]
    fn a_slice_of_each_dimension_or_empty() {
        let rows: ArrayRef = Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>([
            Some(vec![Some(1), Some(2)]),
            Some(vec![Some(3), Some(4)]),
        ]));
        let array: ArrayRef = Arc::new(ListArray::new(
            Arc::new(Field::new_list_field(rows.data_type().clone(), true)),
            OffsetBuffer::from_lengths([2]),
            rows,
            None,
        ));
        let bound = |value: i64| Int64Array::from(vec![value]);
        let (one, two, three) = (bound(1), bound(2), bound(3));
        let mut empty = vec![false];
        let sliced = slice_lists(&array, &[(&one, &two), (&two, &two)], &[0], &mut empty).unwrap();
        let items = sliced
            .as_list::<i32>()
            .values()
            .as_list::<i32>()
            .values()
            .clone();
        assert_eq!(
            items.as_primitive::<Int32Type>(),
            &Int32Array::from(vec![2, 4])
        );
        assert_eq!(empty, [false]);
        slice_lists(&array, &[(&three, &three)], &[0], &mut empty).unwrap();
        assert_eq!(empty, [true]);
        let mut empty = vec![false];
        let deeper = [(&one, &one), (&one, &one), (&one, &one)];
        slice_lists(&array, &deeper, &[0], &mut empty).unwrap();
        assert_eq!(empty, [true]);
    }

    #[test]
    fn dimensions_count_the_nested_lists() {
        let int = DataType::Int32;
        let list = |t: DataType| DataType::new_list(t, true);
        assert_eq!(dimensions(&int), 0);
        assert_eq!(dimensions(&list(list(int))), 2);
    }
}
