//! `numeric / numeric` with PostgreSQL's digits.
//!
//! DataFusion gives a decimal quotient four more digits than its dividend
//! (`1.0 / 3.0` is 0.33333). PostgreSQL picks each quotient's scale from its
//! operands (`select_div_scale`): at least 16 significant digits, and at least
//! either operand's scale (`1 / 3` is 0.33333333333333333333, `100 / 7` is
//! 14.2857142857142857), and rounds there. floe computes each quotient at
//! that scale and holds it in a decimal column of [`RESULT_SCALE`] digits,
//! typed as an unconstrained numeric: printed without trailing zeros (as
//! Materialize prints numerics), the value is PostgreSQL's wherever its scale
//! fits in the column's.

use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Decimal128Array};
use datafusion::arrow::datatypes::{DataType, Decimal128Type, i256};
use datafusion::common::Result as DfResult;
use datafusion::logical_expr::Expr;
use datafusion::logical_expr::simplify::{ExprSimplifyResult, SimplifyContext};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use floe_repr::SqlState;

use crate::error::QueryError;
use crate::functions::arithmetic::is_float;
use crate::functions::columnar;

/// The function `numeric / numeric` is planned as (an integer operand cast to
/// a decimal first).
pub const NUMERIC_DIVIDE: &str = "floe_numeric_divide";

/// The digits after the point a quotient column holds (more when an
/// operand has more, up to [`MAX_SCALE`]): PostgreSQL's 16 significant
/// digits of a quotient below 1, and 4 more.
const RESULT_SCALE: i8 = 20;
/// Leaves a quotient column at least six digits before its point.
const MAX_SCALE: i8 = 32;
/// The decimal digits a quotient column holds.
const PRECISION: u8 = 38;

static NUMERIC_DIVIDE_UDF: LazyLock<Arc<ScalarUDF>> = LazyLock::new(|| {
    Arc::new(ScalarUDF::new_from_impl(NumericDivide {
        signature: Signature::variadic_any(Volatility::Immutable),
    }))
});

/// `avg(x)`'s result from the group's `sum(x)` and `count(x)` (planned in
/// [`crate::semantics`]): their numeric quotient with PostgreSQL's digits for
/// integers and numerics, a double's for floats.
pub const AVERAGE: &str = "floe_average";

static AVERAGE_UDF: LazyLock<Arc<ScalarUDF>> = LazyLock::new(|| {
    Arc::new(ScalarUDF::new_from_impl(Average {
        signature: Signature::variadic_any(Volatility::Immutable),
    }))
});

pub(super) fn functions() -> Vec<ScalarUDF> {
    vec![
        NUMERIC_DIVIDE_UDF.as_ref().clone(),
        AVERAGE_UDF.as_ref().clone(),
    ]
}

/// `floe_average(sum, count)`.
pub fn average(
    sum: datafusion::logical_expr::Expr,
    count: datafusion::logical_expr::Expr,
) -> datafusion::logical_expr::Expr {
    datafusion::logical_expr::Expr::ScalarFunction(
        datafusion::logical_expr::expr::ScalarFunction::new_udf(
            AVERAGE_UDF.clone(),
            vec![sum, count],
        ),
    )
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Average {
    signature: Signature,
}

/// The decimal type a sum divides as: an integer sum is a decimal of scale 0.
fn as_decimal(data_type: &DataType) -> Option<DataType> {
    match data_type {
        DataType::Decimal128(..) => Some(data_type.clone()),
        DataType::Int16 | DataType::Int32 | DataType::Int64 => Some(DataType::Decimal128(20, 0)),
        _ => None,
    }
}

/// The scale of an average's column: a quotient's, but 19 for a sum of
/// scale 0 held as a decimal (of bigints), whose average may have 19
/// digits before the point.
fn average_scale(sum: &DataType) -> i8 {
    match sum {
        DataType::Decimal128(_, 0) => 19,
        other => result_scale(other, &DataType::Decimal128(20, 0)),
    }
}

impl ScalarUDFImpl for Average {
    fn name(&self) -> &str {
        AVERAGE
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Err(QueryError::internal("floe_average is typed by its fields").into_datafusion())
    }

    fn return_field_from_args(
        &self,
        args: datafusion::logical_expr::ReturnFieldArgs,
    ) -> DfResult<datafusion::arrow::datatypes::FieldRef> {
        let [sum, _, ..] = args.arg_fields else {
            return Err(QueryError::internal("floe_average arity").into_datafusion());
        };
        if is_float(sum.data_type()) {
            return Ok(Arc::new(datafusion::arrow::datatypes::Field::new(
                AVERAGE,
                DataType::Float64,
                true,
            )));
        }
        let Some(decimal) = as_decimal(sum.data_type()) else {
            let ty = crate::functions::sql_type(sum);
            return Err(crate::functions::no_such_function("avg", &[ty]).into_datafusion());
        };
        Ok(Arc::new(floe_arrow::computed_numeric_field(
            AVERAGE,
            PRECISION,
            average_scale(&decimal),
        )))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        use datafusion::arrow::compute::cast;
        let (sum, count, scalar) = operands(&args)?;
        let array: ArrayRef = if is_float(sum.data_type()) {
            let sum = cast(&sum, &DataType::Float64)?;
            let count = cast(&count, &DataType::Float64)?;
            datafusion::arrow::compute::kernels::numeric::div(&sum, &count)?
        } else {
            let decimal = as_decimal(sum.data_type()).ok_or_else(|| {
                QueryError::internal("floe_average of a non-number").into_datafusion()
            })?;
            let sum = cast(&sum, &decimal)?;
            let count = cast(&count, &DataType::Decimal128(20, 0))?;
            let scales = display_scales(&args, 2)?;
            quotient_array(&sum, &count, average_scale(&decimal), scales.as_ref())?
        };
        columnar(array, scalar)
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct NumericDivide {
    signature: Signature,
}

/// The scale of a decimal type (0 for anything else).
fn scale_of(data_type: &DataType) -> i8 {
    match data_type {
        DataType::Decimal128(_, scale) => *scale,
        _ => 0,
    }
}

/// The scale of the quotient column of operands of these types.
fn result_scale(left: &DataType, right: &DataType) -> i8 {
    RESULT_SCALE
        .max(scale_of(left))
        .max(scale_of(right))
        .min(MAX_SCALE)
}

impl ScalarUDFImpl for NumericDivide {
    fn name(&self) -> &str {
        NUMERIC_DIVIDE
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        match arg_types {
            [left, right, ..] if is_float(left) || is_float(right) => Ok(DataType::Float64),
            [left, right, ..] => Ok(DataType::Decimal128(PRECISION, result_scale(left, right))),
            _ => Err(QueryError::internal("numeric division arity").into_datafusion()),
        }
    }

    /// A quotient prints as an unconstrained numeric (without trailing zeros).
    fn return_field_from_args(
        &self,
        args: datafusion::logical_expr::ReturnFieldArgs,
    ) -> DfResult<datafusion::arrow::datatypes::FieldRef> {
        let [left, right, ..] = args.arg_fields else {
            return Err(QueryError::internal("numeric division arity").into_datafusion());
        };
        if is_float(left.data_type()) || is_float(right.data_type()) {
            return Ok(Arc::new(datafusion::arrow::datatypes::Field::new(
                NUMERIC_DIVIDE,
                DataType::Float64,
                true,
            )));
        }
        let scale = result_scale(left.data_type(), right.data_type());
        Ok(Arc::new(floe_arrow::computed_numeric_field(
            NUMERIC_DIVIDE,
            PRECISION,
            scale,
        )))
    }

    fn simplify(&self, args: Vec<Expr>, info: &SimplifyContext) -> DfResult<ExprSimplifyResult> {
        Ok(super::arithmetic::strict_simplified(self, args, info))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let (left, right, scalar) = operands(&args)?;
        if is_float(left.data_type()) || is_float(right.data_type()) {
            return columnar(float_quotient(&left, &right)?, scalar);
        }
        let out_scale = result_scale(left.data_type(), right.data_type());
        let scales = display_scales(&args, 2)?;
        columnar(
            quotient_array(&left, &right, out_scale, scales.as_ref())?,
            scalar,
        )
    }
}

/// A quotient planned for numerics whose operand the analyzer made a float
/// after it was planned (a `CASE` of a `real` and an integer): PostgreSQL's
/// division of doubles, which refuses a zero divisor.
fn float_quotient(left: &ArrayRef, right: &ArrayRef) -> DfResult<ArrayRef> {
    let left = datafusion::arrow::compute::cast(left, &DataType::Float64)?;
    let right = datafusion::arrow::compute::cast(right, &DataType::Float64)?;
    super::float_arithmetic::arrays(
        super::float_arithmetic::FloatOperator::Divide,
        &left,
        &right,
    )
}

/// A two-operand call's operands as arrays (of one row when both are
/// scalars), and whether both were.
fn operands(args: &ScalarFunctionArgs) -> DfResult<(ArrayRef, ArrayRef, bool)> {
    let (scalar, length) = super::call_rows(args);
    let [left, right, ..] = args.args.as_slice() else {
        return Err(QueryError::internal("a quotient of two operands").into_datafusion());
    };
    Ok((left.to_array(length)?, right.to_array(length)?, scalar))
}

/// The operands' display scales, where the call passes them after its
/// `operands` operands (see [`crate::display_scale`]): each row's larger.
fn display_scales(args: &ScalarFunctionArgs, operands: usize) -> DfResult<Option<Vec<i32>>> {
    use datafusion::arrow::datatypes::Int32Type;
    let scales = &args.args[operands.min(args.args.len())..];
    if scales.is_empty() {
        return Ok(None);
    }
    let (_, length) = super::call_rows(args);
    let mut largest = vec![0; length];
    for scale in scales {
        let array = datafusion::arrow::compute::cast(&scale.to_array(length)?, &DataType::Int32)?;
        let array = array.as_primitive::<Int32Type>();
        for (index, value) in largest.iter_mut().enumerate() {
            if array.is_valid(index) {
                *value = (*value).max(array.value(index));
            }
        }
    }
    Ok(Some(largest))
}

/// The quotients of two decimal arrays in a column of `out_scale` places,
/// each rounded at no fewer places than its row's operands' display scale.
fn quotient_array(
    left: &ArrayRef,
    right: &ArrayRef,
    out_scale: i8,
    display_scales: Option<&Vec<i32>>,
) -> DfResult<ArrayRef> {
    let quotients = divide_arrays(left, right, out_scale, display_scales)
        .map_err(QueryError::into_datafusion)?;
    Ok(Arc::new(
        quotients
            .with_precision_and_scale(PRECISION, out_scale)
            .map_err(|e| QueryError::internal(e.to_string()).into_datafusion())?,
    ))
}

fn divide_arrays(
    left: &ArrayRef,
    right: &ArrayRef,
    out_scale: i8,
    display_scales: Option<&Vec<i32>>,
) -> Result<Decimal128Array, QueryError> {
    let (Some(l), Some(r)) = (
        left.as_primitive_opt::<Decimal128Type>(),
        right.as_primitive_opt::<Decimal128Type>(),
    ) else {
        return Err(QueryError::internal("numeric division of non-decimals"));
    };
    let (s1, s2) = (scale_of(left.data_type()), scale_of(right.data_type()));
    let mut out = Vec::with_capacity(l.len());
    for index in 0..l.len() {
        if l.is_null(index) || r.is_null(index) {
            out.push(None);
            continue;
        }
        let least = display_scales.and_then(|s| s.get(index)).copied();
        out.push(Some(divide_at(
            l.value(index),
            s1,
            r.value(index),
            s2,
            out_scale,
            least.unwrap_or(0),
        )?));
    }
    Ok(Decimal128Array::from(out))
}

fn overflow() -> QueryError {
    QueryError::new(
        SqlState::NUMERIC_VALUE_OUT_OF_RANGE,
        "value overflows numeric format",
    )
}

fn power_of_ten(exponent: u32) -> Result<i256, QueryError> {
    i256::from_i128(10)
        .checked_pow(exponent)
        .ok_or_else(overflow)
}

/// `left / right` (unscaled values at scales `s1`, `s2`), rounded half away
/// from zero at PostgreSQL's scale for them (at most `out_scale`), as an
/// unscaled value at `out_scale`.
pub fn divide(left: i128, s1: i8, right: i128, s2: i8, out_scale: i8) -> Result<i128, QueryError> {
    divide_at(left, s1, right, s2, out_scale, 0)
}

/// [`divide`] at no fewer than `least` places (the operands' display
/// scales, where they exceed their columns' digits).
fn divide_at(
    left: i128,
    s1: i8,
    right: i128,
    s2: i8,
    out_scale: i8,
    least: i32,
) -> Result<i128, QueryError> {
    if right == 0 {
        return Err(QueryError::new(
            SqlState::DIVISION_BY_ZERO,
            "division by zero",
        ));
    }
    let target = postgres_scale(left, s1, right, s2)
        .max(least)
        .min(i32::from(out_scale));
    // left / right at `target` digits: left * 10^(target + s2 - s1) / right.
    let exponent = target + i32::from(s2) - i32::from(s1);
    let mut numerator = i256::from_i128(left);
    let mut denominator = i256::from_i128(right);
    if exponent >= 0 {
        numerator = numerator
            .checked_mul(power_of_ten(exponent.unsigned_abs())?)
            .ok_or_else(overflow)?;
    } else {
        denominator = denominator
            .checked_mul(power_of_ten(exponent.unsigned_abs())?)
            .ok_or_else(overflow)?;
    }
    let mut quotient = numerator / denominator;
    let remainder = numerator % denominator;
    let twice = remainder
        .wrapping_abs()
        .checked_mul(i256::from_i128(2))
        .ok_or_else(overflow)?;
    if twice >= denominator.wrapping_abs() {
        let away = if (numerator < i256::ZERO) != (denominator < i256::ZERO) {
            i256::MINUS_ONE
        } else {
            i256::ONE
        };
        quotient = quotient.wrapping_add(away);
    }
    let scaled = quotient
        .checked_mul(power_of_ten(
            (i32::from(out_scale) - target).unsigned_abs(),
        )?)
        .ok_or_else(overflow)?;
    let limit = power_of_ten(u32::from(PRECISION))?;
    if scaled.wrapping_abs() >= limit {
        return Err(overflow());
    }
    scaled.to_i128().ok_or_else(overflow)
}

/// A nonzero value's weight and first digit in base 10000, as PostgreSQL
/// stores numerics: `value = first * 10000^weight + (lower digits)`.
fn weight_and_first_digit(value: i128, scale: i8) -> (i32, i128) {
    let magnitude = value.unsigned_abs();
    let digits = magnitude.checked_ilog10().map_or(1, |log| log as i32 + 1);
    let exponent = digits - 1 - i32::from(scale);
    let weight = exponent.div_euclid(4);
    let shift = i32::from(scale) + 4 * weight;
    let first = if shift >= 0 {
        magnitude / 10u128.pow(shift.unsigned_abs())
    } else {
        magnitude.saturating_mul(10u128.pow(shift.unsigned_abs()))
    };
    (weight, i128::try_from(first).unwrap_or(i128::MAX))
}

/// PostgreSQL's `select_div_scale`: enough digits for 16 significant
/// digits of the estimated quotient, and at least either operand's scale.
pub(crate) fn postgres_scale(left: i128, s1: i8, right: i128, s2: i8) -> i32 {
    let (weight1, first1) = if left == 0 {
        (0, 0)
    } else {
        weight_and_first_digit(left, s1)
    };
    let (weight2, first2) = weight_and_first_digit(right, s2);
    let mut quotient_weight = weight1 - weight2;
    if first1 <= first2 {
        quotient_weight -= 1;
    }
    (16 - quotient_weight * 4)
        .max(i32::from(s1))
        .max(i32::from(s2))
        .clamp(0, 1000)
}

/// `numeric / numeric` (an integer operand cast to a decimal).
pub fn call(
    left: datafusion::logical_expr::Expr,
    right: datafusion::logical_expr::Expr,
) -> datafusion::logical_expr::Expr {
    datafusion::logical_expr::Expr::ScalarFunction(
        datafusion::logical_expr::expr::ScalarFunction::new_udf(
            NUMERIC_DIVIDE_UDF.clone(),
            vec![left, right],
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A quotient as text, trailing zeros trimmed (as floe prints numerics).
    fn quotient(left: i128, s1: i8, right: i128, s2: i8) -> String {
        let value = divide(left, s1, right, s2, RESULT_SCALE).unwrap();
        let text = format!("{}", value.unsigned_abs());
        let padded = format!("{:0>width$}", text, width = RESULT_SCALE as usize + 1);
        let (whole, fraction) = padded.split_at(padded.len() - RESULT_SCALE as usize);
        let fraction = fraction.trim_end_matches('0');
        let sign = if value < 0 { "-" } else { "" };
        if fraction.is_empty() {
            format!("{sign}{whole}")
        } else {
            format!("{sign}{whole}.{fraction}")
        }
    }

    #[test]
    fn quotients_have_postgres_digits() {
        // Each against PostgreSQL 15's answer, trailing zeros trimmed.
        assert_eq!(quotient(1, 0, 3, 0), "0.33333333333333333333");
        assert_eq!(quotient(2, 0, 3, 0), "0.66666666666666666667");
        assert_eq!(quotient(10, 0, 4, 0), "2.5");
        assert_eq!(quotient(100, 0, 7, 0), "14.2857142857142857");
        assert_eq!(quotient(10, 1, 30, 1), "0.33333333333333333333");
        assert_eq!(quotient(-5, 0, 3, 0), "-1.6666666666666667");
        assert_eq!(quotient(12345678, 0, 7, 0), "1763668.285714285714");
        assert_eq!(quotient(1, 0, 1, 0), "1");
        assert_eq!(quotient(0, 0, 7, 0), "0");
    }

    #[test]
    fn zero_divisors_and_overflow_are_errors() {
        assert_eq!(
            divide(1, 0, 0, 0, RESULT_SCALE).unwrap_err().code,
            SqlState::DIVISION_BY_ZERO
        );
        assert_eq!(
            divide(10i128.pow(37), 0, 1, 10, RESULT_SCALE)
                .unwrap_err()
                .code,
            SqlState::NUMERIC_VALUE_OUT_OF_RANGE
        );
    }
}
