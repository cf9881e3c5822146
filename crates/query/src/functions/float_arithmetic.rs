//! `+`, `-`, `*` and `/` of floats with PostgreSQL's checks.
//!
//! IEEE arithmetic, which the engine's operators do, answers infinity for a
//! float divided by zero or a sum past the type's range, and 0 for a product
//! below it. PostgreSQL refuses each (`float8_div` and its siblings): a zero
//! divisor is `division by zero` (unless the dividend is NaN), a finite
//! result that became infinite is `value out of range: overflow`, and a
//! non-zero product or quotient that became 0 is `value out of range:
//! underflow`. Infinite and NaN operands still compute as IEEE does.
//!
//! Two `real` operands compute as `real`; any other pair with a float, as
//! `double precision` (PostgreSQL reads an integer or a numeric beside a
//! `real` as a double).

use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{ArrayRef, AsArray, PrimitiveArray};
use datafusion::arrow::compute::{cast, try_binary};
use datafusion::arrow::datatypes::{ArrowPrimitiveType, DataType, Float32Type, Float64Type};
use datafusion::arrow::error::ArrowError;
use datafusion::common::Result as DfResult;
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::simplify::{ExprSimplifyResult, SimplifyContext};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use floe_repr::SqlState;

use crate::error::QueryError;
use crate::functions::columnar;

/// An arithmetic operator of floats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FloatOperator {
    Add,
    Subtract,
    Multiply,
    Divide,
}

impl FloatOperator {
    fn name(self) -> &'static str {
        match self {
            FloatOperator::Add => "floe_float_add",
            FloatOperator::Subtract => "floe_float_subtract",
            FloatOperator::Multiply => "floe_float_multiply",
            FloatOperator::Divide => "floe_float_divide",
        }
    }
}

static UDFS: LazyLock<[Arc<ScalarUDF>; 4]> = LazyLock::new(|| {
    [
        FloatOperator::Add,
        FloatOperator::Subtract,
        FloatOperator::Multiply,
        FloatOperator::Divide,
    ]
    .map(|operator| {
        Arc::new(ScalarUDF::new_from_impl(FloatArithmetic {
            operator,
            signature: Signature::any(2, Volatility::Immutable),
        }))
    })
});

pub(super) fn functions() -> Vec<ScalarUDF> {
    UDFS.iter().map(|udf| udf.as_ref().clone()).collect()
}

/// `left operator right` of floats, each operand cast to the type it computes
/// at (see the module documentation).
pub fn call(operator: FloatOperator, left: Expr, right: Expr) -> Expr {
    let udf = &UDFS[operator as usize];
    Expr::ScalarFunction(ScalarFunction::new_udf(udf.clone(), vec![left, right]))
}

/// The type two operands compute at.
pub fn result_type(left: &DataType, right: &DataType) -> DataType {
    if *left == DataType::Float32 && *right == DataType::Float32 {
        DataType::Float32
    } else {
        DataType::Float64
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct FloatArithmetic {
    operator: FloatOperator,
    signature: Signature,
}

impl ScalarUDFImpl for FloatArithmetic {
    fn name(&self) -> &str {
        self.operator.name()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        match arg_types {
            [left, right] => Ok(result_type(left, right)),
            _ => Err(QueryError::internal("float arithmetic arity").into_datafusion()),
        }
    }

    fn simplify(&self, args: Vec<Expr>, info: &SimplifyContext) -> DfResult<ExprSimplifyResult> {
        Ok(super::arithmetic::strict_simplified(self, args, info))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let (scalar, length) = super::call_rows(&args);
        let [left, right] = args.args.as_slice() else {
            return Err(QueryError::internal("float arithmetic arity").into_datafusion());
        };
        let data_type = args.return_type().clone();
        let (left, right) = (
            cast(&left.to_array(length)?, &data_type)?,
            cast(&right.to_array(length)?, &data_type)?,
        );
        columnar(arrays(self.operator, &left, &right)?, scalar)
    }
}

/// The operator of two arrays of one float type.
pub fn arrays(operator: FloatOperator, left: &ArrayRef, right: &ArrayRef) -> DfResult<ArrayRef> {
    Ok(match left.data_type() {
        DataType::Float32 => Arc::new(typed::<Float32Type>(operator, left, right)?),
        _ => Arc::new(typed::<Float64Type>(operator, left, right)?),
    })
}

fn typed<T>(
    operator: FloatOperator,
    left: &ArrayRef,
    right: &ArrayRef,
) -> DfResult<PrimitiveArray<T>>
where
    T: ArrowPrimitiveType,
    T::Native: num_traits::Float,
{
    let (left, right) = (left.as_primitive::<T>(), right.as_primitive::<T>());
    Ok(try_binary(left, right, |a, b| checked(operator, a, b))?)
}

/// PostgreSQL's `float8_pl`, `float8_mi`, `float8_mul` and `float8_div` (and
/// their `float4` twins) of one pair.
fn checked<F: num_traits::Float>(operator: FloatOperator, a: F, b: F) -> Result<F, ArrowError> {
    let zero = F::zero();
    let result = match operator {
        FloatOperator::Add => a + b,
        FloatOperator::Subtract => a - b,
        FloatOperator::Multiply => a * b,
        FloatOperator::Divide => {
            if b == zero && !a.is_nan() {
                return Err(refused(SqlState::DIVISION_BY_ZERO, "division by zero"));
            }
            a / b
        }
    };
    // Whether the operands could have given an infinite result: an infinite
    // operand (a dividend only; a quotient by infinity is finite).
    let infinite_operand = match operator {
        FloatOperator::Divide => a.is_infinite(),
        _ => a.is_infinite() || b.is_infinite(),
    };
    if result.is_infinite() && !infinite_operand {
        return Err(refused(
            SqlState::NUMERIC_VALUE_OUT_OF_RANGE,
            "value out of range: overflow",
        ));
    }
    let underflow = match operator {
        FloatOperator::Multiply => a != zero && b != zero,
        FloatOperator::Divide => a != zero && !b.is_infinite(),
        FloatOperator::Add | FloatOperator::Subtract => false,
    };
    if result == zero && underflow {
        return Err(refused(
            SqlState::NUMERIC_VALUE_OUT_OF_RANGE,
            "value out of range: underflow",
        ));
    }
    Ok(result)
}

/// A PostgreSQL error carried through the engine's kernel.
fn refused(code: SqlState, message: &str) -> ArrowError {
    ArrowError::ExternalError(Box::new(QueryError::new(code, message)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(operator: FloatOperator, a: f64, b: f64) -> String {
        match checked(operator, a, b) {
            Ok(result) => panic!("{a} {operator:?} {b} gave {result}"),
            Err(ArrowError::ExternalError(e)) => e.to_string(),
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn postgres_refuses_what_ieee_answers() {
        use FloatOperator::*;
        assert_eq!(error(Divide, 1.5, 0.0), "division by zero");
        assert_eq!(error(Divide, f64::INFINITY, 0.0), "division by zero");
        assert!(checked(Divide, f64::NAN, 0.0).unwrap().is_nan());
        assert_eq!(error(Multiply, 1e308, 10.0), "value out of range: overflow");
        assert_eq!(error(Add, 1e308, 1e308), "value out of range: overflow");
        assert_eq!(
            error(Subtract, -1e308, 1e308),
            "value out of range: overflow"
        );
        assert_eq!(error(Divide, 1e308, 0.1), "value out of range: overflow");
        assert_eq!(
            error(Multiply, 1e-300, 1e-300),
            "value out of range: underflow"
        );
        assert_eq!(
            error(Divide, 1e-300, 1e300),
            "value out of range: underflow"
        );
        assert_eq!(
            checked(Multiply, f64::INFINITY, 2.0).unwrap(),
            f64::INFINITY
        );
        assert_eq!(checked(Divide, 1.0, f64::INFINITY).unwrap(), 0.0);
        assert_eq!(checked(Add, 0.1, 0.2).unwrap(), 0.1 + 0.2);
        assert_eq!(
            checked(Multiply, 3e38_f32, 10.0_f32).map_err(|e| e.to_string()),
            Err("External error: value out of range: overflow".to_string())
        );
    }
}
