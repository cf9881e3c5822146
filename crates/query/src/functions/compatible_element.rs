//! DataFusion's `array_append` and `array_prepend` (also spelled `||`) with
//! Postgres' `anycompatible` typing of exact numbers: `ARRAY[1.5, 2] || 1.500`
//! is a `numeric[]` of `{1.5,2,1.500}`. DataFusion refuses an element whose
//! decimal type differs from the array's items' (`decimal(4,3)` beside
//! `decimal(11,1)`), or an integer beside decimals: both are cast to one
//! decimal type that holds either, an unconstrained numeric when one is. The
//! values keep their display scales (see [`crate::display_scale`]). Other
//! arguments are coerced as DataFusion coerces them.

use std::sync::Arc;

use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DECIMAL256_MAX_PRECISION, DataType, Field, FieldRef};
use datafusion::common::Result as DfResult;
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};

use super::arithmetic::{is_decimal, is_exact};
use super::numeric_display::is_bare;

pub(super) fn functions() -> Vec<ScalarUDF> {
    vec![
        CompatibleElement::wrap(datafusion::functions_nested::concat::array_append_udf(), 0),
        CompatibleElement::wrap(datafusion::functions_nested::concat::array_prepend_udf(), 1),
    ]
}

/// A DataFusion function of an array (argument `array`) and an element.
#[derive(Debug, PartialEq, Eq, Hash)]
struct CompatibleElement {
    inner: Arc<ScalarUDF>,
    array: usize,
    signature: Signature,
}

impl CompatibleElement {
    fn wrap(inner: Arc<ScalarUDF>, array: usize) -> ScalarUDF {
        let signature = Signature::user_defined(Volatility::Immutable);
        ScalarUDF::new_from_impl(CompatibleElement {
            inner,
            array,
            signature,
        })
    }
}

impl ScalarUDFImpl for CompatibleElement {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> DfResult<Vec<DataType>> {
        if let Some(types) = exact_number_types(arg_types, self.array) {
            return Ok(types);
        }
        super::engine_coerced_types(arg_types, self.inner.as_ref())
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        self.inner.return_type(arg_types)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        self.inner.return_field_from_args(args)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let promised = args.return_field.data_type().clone();
        // Its implementation's own: the function checks its answer is of
        // the promised type, which it is only once cast.
        let answer = self.inner.inner().invoke_with_args(args)?;
        if answer.data_type() == promised {
            return Ok(answer);
        }
        // DataFusion's answer drops the items' metadata (an unconstrained
        // numeric's) its planning promised.
        match answer {
            ColumnarValue::Array(array) => Ok(ColumnarValue::Array(cast(&array, &promised)?)),
            ColumnarValue::Scalar(scalar) => Ok(ColumnarValue::Scalar(super::first_scalar(
                &cast(&scalar.to_array_of_size(1)?, &promised)?,
            )?)),
        }
    }
}

/// The types of an array of exact numbers and an exact number (the array at
/// `array` of two arguments) made one where they differ, `None` otherwise.
fn exact_number_types(arg_types: &[DataType], array: usize) -> Option<Vec<DataType>> {
    let [first, second] = arg_types else {
        return None;
    };
    let (list, element) = if array == 0 {
        (first, second)
    } else {
        (second, first)
    };
    let DataType::List(item) = list else {
        return None;
    };
    let any_decimal = is_decimal(item.data_type()) || is_decimal(element);
    if item.data_type() == element
        || !is_exact(item.data_type())
        || !is_exact(element)
        || !any_decimal
    {
        return None;
    }
    // An unconstrained numeric's items stay one, the element becomes one,
    // unless it has more digits than floe's numeric holds (`1e40`): then
    // both are of the wider decimal, as PostgreSQL's numeric has any.
    let common = common_decimal(item.data_type(), element)?;
    let item = if is_bare(item) && matches!(common, DataType::Decimal128(..)) {
        item.as_ref().clone()
    } else {
        Field::new(item.name(), common, true)
    };
    let common = item.data_type().clone();
    let list = DataType::List(Arc::new(item));
    Some(if array == 0 {
        vec![list, common]
    } else {
        vec![common, list]
    })
}

/// The narrowest decimal holding values of both exact number types: of
/// floe's numeric precision where that holds them, else of more digits
/// (`1e40` beside `1.5`), as PostgreSQL's numeric has any.
pub(super) fn common_decimal(left: &DataType, right: &DataType) -> Option<DataType> {
    let (left_digits, left_scale) = digits(left)?;
    let (right_digits, right_scale) = digits(right)?;
    // A negative scale (`1e40` is 1 digit at -40) holds no fraction.
    let scale = left_scale.max(right_scale).max(0);
    let integer_digits = (left_digits - left_scale).max(right_digits - right_scale);
    let precision = integer_digits + scale;
    if precision <= i16::from(floe_arrow::NUMERIC_PRECISION) {
        return Some(DataType::Decimal128(
            u8::try_from(precision).ok()?,
            i8::try_from(scale).ok()?,
        ));
    }
    // Arrow's widest decimal; past it the cast's overflow is the error.
    let precision = precision.min(i16::from(DECIMAL256_MAX_PRECISION));
    Some(DataType::Decimal256(
        u8::try_from(precision).ok()?,
        i8::try_from(scale.min(precision)).ok()?,
    ))
}

/// An exact number type's precision and scale (an integer's digits, 0).
fn digits(data_type: &DataType) -> Option<(i16, i16)> {
    Some(match data_type {
        DataType::Decimal128(precision, scale) | DataType::Decimal256(precision, scale) => {
            (i16::from(*precision), i16::from(*scale))
        }
        DataType::Int8 | DataType::UInt8 => (3, 0),
        DataType::Int16 | DataType::UInt16 => (5, 0),
        DataType::Int32 | DataType::UInt32 => (10, 0),
        DataType::Int64 => (19, 0),
        DataType::UInt64 => (20, 0),
        _ => return None,
    })
}
