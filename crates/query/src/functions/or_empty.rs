//! `floe_or_empty(array)`: the array, or an empty array of its type where it
//! is NULL. `ARRAY(subquery)` of no rows is `{}` where `array_agg` of no rows
//! is NULL; an empty array literal would have no element type, which the
//! engine's decorrelation of a correlated subquery does not coerce.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, ListArray, Scalar, new_empty_array};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::compute::{is_not_null, kernels::zip::zip};
use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::Result as DfResult;
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};

/// The function's name (a private spelling, called by floe's rewrites).
pub const OR_EMPTY: &str = "floe_or_empty";

pub(super) fn function() -> ScalarUDF {
    ScalarUDF::new_from_impl(OrEmpty {
        signature: Signature::any(1, Volatility::Immutable),
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct OrEmpty {
    signature: Signature,
}

impl ScalarUDFImpl for OrEmpty {
    fn name(&self) -> &str {
        OR_EMPTY
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(arg_types[0].clone())
    }

    /// The argument's own field, metadata and all, but never NULL.
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let field = args.arg_fields[0].as_ref().clone();
        Ok(Arc::new(field.with_name(OR_EMPTY).with_nullable(false)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        match &args.args[0] {
            ColumnarValue::Array(array) => Ok(ColumnarValue::Array(or_empty(array)?)),
            ColumnarValue::Scalar(scalar) => {
                super::columnar(or_empty(&scalar.to_array_of_size(1)?)?, true)
            }
        }
    }
}

/// Every NULL of a list array replaced by an empty list; other arrays as
/// they are.
fn or_empty(array: &ArrayRef) -> DfResult<ArrayRef> {
    let DataType::List(item) = array.data_type() else {
        return Ok(Arc::clone(array));
    };
    if array.null_count() == 0 {
        return Ok(Arc::clone(array));
    }
    let empty = ListArray::try_new(
        Arc::clone(item),
        OffsetBuffer::new_zeroed(1),
        new_empty_array(item.data_type()),
        None,
    )?;
    let present = is_not_null(array.as_ref())?;
    Ok(zip(&present, array, &Scalar::new(empty))?)
}
