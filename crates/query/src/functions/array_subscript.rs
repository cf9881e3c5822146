//! PostgreSQL's subscripts of an array of more dimensions: one subscript per
//! dimension takes an item, fewer or more take none (NULL), and the result is
//! of the item type whatever their number (`(ARRAY[[1,2],[3,4]])[1]` is a
//! NULL integer). floe holds such arrays as arrays of arrays, whose engine
//! subscript takes a sub-array, so the planner ([`crate::semantics`]) plans
//! `a[i][j]` of one as this function of `a` and all its subscripts.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int64Array, new_null_array};
use datafusion::arrow::compute::{cast, take};
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
        let scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let rows = if scalar { 1 } else { args.number_rows };
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
    use datafusion::arrow::array::{Int32Array, ListArray};
    use datafusion::arrow::datatypes::Int32Type;

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
    fn dimensions_count_the_nested_lists() {
        let int = DataType::Int32;
        let list = |t: DataType| DataType::new_list(t, true);
        assert_eq!(dimensions(&int), 0);
        assert_eq!(dimensions(&list(list(int))), 2);
    }
}
