//! DataFusion's `array_position` and `array_positions` with Postgres' result types:
//! positions are `integer` (`integer[]`), where DataFusion answers `uint8`. The
//! search itself stays DataFusion's, which coerces the element and the array to a
//! common type as Postgres' `anycompatible` does; only the answer is cast.

use std::sync::Arc;

use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::Result as DfResult;
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
};
use floe_repr::SqlScalarType;

pub(super) fn array_position() -> ScalarUDF {
    IntegerResult::wrap(
        datafusion::functions_nested::position::array_position_udf(),
        SqlScalarType::Int32,
    )
}

pub(super) fn array_positions() -> ScalarUDF {
    IntegerResult::wrap(
        datafusion::functions_nested::position::array_positions_udf(),
        SqlScalarType::Array {
            element: Box::new(SqlScalarType::Int32),
        },
    )
}

/// A DataFusion function whose unsigned answer is cast to `result`. It has no
/// aliases: DataFusion's spellings (`array_indexof`) are not Postgres'.
#[derive(Debug, PartialEq, Eq, Hash)]
struct IntegerResult {
    inner: Arc<ScalarUDF>,
    result: SqlScalarType,
}

impl IntegerResult {
    fn wrap(inner: Arc<ScalarUDF>, result: SqlScalarType) -> ScalarUDF {
        ScalarUDF::new_from_impl(IntegerResult { inner, result })
    }

    fn result_type(&self) -> DataType {
        crate::types::field(&self.result).data_type().clone()
    }
}

impl ScalarUDFImpl for IntegerResult {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> DfResult<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(self.result_type())
    }

    fn return_field_from_args(&self, _args: ReturnFieldArgs) -> DfResult<FieldRef> {
        Ok(Arc::new(
            crate::types::field(&self.result).with_name(self.name()),
        ))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        // DataFusion's function computes its own type of answer.
        let inner_type = self
            .inner
            .return_type(&super::argument_types(&args.arg_fields))?;
        let args = ScalarFunctionArgs {
            return_field: Arc::new(Field::new(self.name(), inner_type, true)),
            ..args
        };
        let to = self.result_type();
        // Positions fit an integer: an array has fewer than 2^31 elements.
        match self.inner.invoke_with_args(args)? {
            ColumnarValue::Array(array) => Ok(ColumnarValue::Array(cast(&array, &to)?)),
            // Cast as an array: a scalar's cast loses the list item's metadata.
            ColumnarValue::Scalar(scalar) => Ok(ColumnarValue::Scalar(super::first_scalar(
                &cast(&scalar.to_array_of_size(1)?, &to)?,
            )?)),
        }
    }
}
