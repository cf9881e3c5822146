//! `numeric * numeric` where DataFusion's product would hold too few digits
//! before its point, or be simplified into another type.
//!
//! DataFusion types a product of decimals with the sum of their scales and
//! the sum of their precisions, cut at 38 digits. Two averages (19 places
//! each) make a decimal of 38 places, which holds nothing above 1:
//! `avg(a) * avg(b)` failed on any values above it. PostgreSQL's product is
//! exact. floe computes it exactly, at 76 digits, and keeps all its places
//! up to [`KEPT_PLACES`] (or up to an operand's places where it has more),
//! rounding half away from zero as PostgreSQL rounds. Its display scale is
//! still PostgreSQL's, the sum of the operands' ([`crate::display_scale`]).
//! A decimal times a constant is floe's too (see [`product`]).

use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::compute::kernels::numeric;
use datafusion::arrow::compute::{CastOptions, cast, cast_with_options};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::Result as DfResult;
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::simplify::{ExprSimplifyResult, SimplifyContext};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use floe_repr::SqlState;

use crate::error::QueryError;
use crate::functions::arithmetic::is_float;
use crate::functions::columnar;

/// The function such a product is planned as.
pub const NUMERIC_MULTIPLY: &str = "floe_numeric_multiply";

/// The most places a product is kept at (unless an operand has more): as
/// many as leave it 18 digits before the point, a bigint's.
const KEPT_PLACES: i8 = 20;
/// The digits of a product's column.
const PRECISION: u8 = 38;
/// The digits the product is computed at: two operands' of 38 each.
const WIDE_PRECISION: u8 = 76;

static NUMERIC_MULTIPLY_UDF: LazyLock<Arc<ScalarUDF>> = LazyLock::new(|| {
    Arc::new(ScalarUDF::new_from_impl(NumericMultiply {
        signature: Signature::any(2, Volatility::Immutable),
    }))
});

pub(super) fn functions() -> Vec<ScalarUDF> {
    vec![NUMERIC_MULTIPLY_UDF.as_ref().clone()]
}

/// The places an exact operand of this type has: a decimal's scale, an
/// integer's none; `None` for any other type.
fn places(data_type: &DataType) -> Option<i8> {
    match data_type {
        DataType::Decimal128(_, scale) => Some(*scale),
        // A NULL without a type: none.
        t if t.is_integer() || t.is_null() => Some(0),
        _ => None,
    }
}

/// The digits of an exact operand of this type.
fn digits(data_type: &DataType) -> u8 {
    match data_type {
        DataType::Decimal128(precision, _) => *precision,
        // Up to a bigint's 19 digits.
        _ => 19,
    }
}

/// The places a product of operands of these places is kept at: all of
/// them (their sum, DataFusion's), or where that is more than
/// [`KEPT_PLACES`] and either operand's, the larger of those.
fn kept_places(left: i8, right: i8) -> i8 {
    let summed = i16::from(left) + i16::from(right);
    let most = KEPT_PLACES.max(left).max(right);
    i8::try_from(summed).map_or(most, |summed| summed.min(most))
}

/// `left * right` as [`NUMERIC_MULTIPLY`] where DataFusion's product of
/// these operand types would be cut (more digits than a decimal holds) and
/// hold fewer places than floe keeps, or is a decimal's by a constant;
/// `None` where DataFusion's is exact, or where an operand is not an exact
/// number. DataFusion's simplifier reads a decimal times the constant 0 as
/// the 0 (where the decimal cannot be NULL) and a decimal times 1 as the
/// decimal, each of another type than the product's; an expression typed by
/// the product (a `CASE` comparing it, an `IN` list) then fails. A constant
/// such as `0 * 81` is 0 only once folded, so every product of a decimal and
/// a constant is floe's.
pub fn product(
    left: &Expr,
    left_type: &DataType,
    right: &Expr,
    right_type: &DataType,
) -> Option<Expr> {
    let (left_places, right_places) = (places(left_type)?, places(right_type)?);
    let cut =
        u16::from(digits(left_type)) + u16::from(digits(right_type)) + 1 > u16::from(PRECISION);
    let summed = i16::from(left_places) + i16::from(right_places);
    let decimal = |t: &DataType| matches!(t, DataType::Decimal128(..));
    // A product of constants is folded when planned, exactly.
    let constant = super::arithmetic::is_constant;
    let by_constant = constant(left) != constant(right)
        && ((decimal(left_type) && constant(right)) || (decimal(right_type) && constant(left)));
    if !by_constant && (!cut || summed <= i16::from(kept_places(left_places, right_places))) {
        return None;
    }
    Some(Expr::ScalarFunction(ScalarFunction::new_udf(
        NUMERIC_MULTIPLY_UDF.clone(),
        vec![left.clone(), right.clone()],
    )))
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct NumericMultiply {
    signature: Signature,
}

impl ScalarUDFImpl for NumericMultiply {
    fn name(&self) -> &str {
        NUMERIC_MULTIPLY
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        let [left, right] = arg_types else {
            return Err(QueryError::internal("numeric product arity").into_datafusion());
        };
        match (places(left), places(right)) {
            (Some(left), Some(right)) => {
                Ok(DataType::Decimal128(PRECISION, kept_places(left, right)))
            }
            // An operand the analyzer made a float after the product was
            // planned (`coalesce(avg(x), 0.1::float8) * 3`): a product of
            // doubles, as PostgreSQL's.
            _ if is_float(left) || is_float(right) => Ok(DataType::Float64),
            _ => Err(QueryError::internal("numeric product of a non-number").into_datafusion()),
        }
    }

    fn simplify(&self, args: Vec<Expr>, info: &SimplifyContext) -> DfResult<ExprSimplifyResult> {
        Ok(super::arithmetic::strict_simplified(self, args, info))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let result_type = args.return_type().clone();
        let (scalar, length) = super::call_rows(&args);
        let [left, right] = args.args.as_slice() else {
            return Err(QueryError::internal("numeric product arity").into_datafusion());
        };
        if result_type == DataType::Float64 {
            let double = |operand: &ColumnarValue| -> DfResult<ArrayRef> {
                Ok(cast(&operand.to_array(length)?, &DataType::Float64)?)
            };
            let product = super::float_arithmetic::arrays(
                super::float_arithmetic::FloatOperator::Multiply,
                &double(left)?,
                &double(right)?,
            )?;
            return columnar(product, scalar);
        }
        let product = numeric::mul(&wide(left, length)?, &wide(right, length)?)?;
        columnar(kept(&product, &result_type)?, scalar)
    }
}

/// An operand as a decimal of 76 digits at its own places.
fn wide(operand: &ColumnarValue, length: usize) -> DfResult<ArrayRef> {
    let array = operand.to_array(length)?;
    let places = places(array.data_type())
        .ok_or_else(|| QueryError::internal("numeric product of a non-number").into_datafusion())?;
    Ok(cast_with_options(
        &array,
        &DataType::Decimal256(WIDE_PRECISION, places),
        &CastOptions {
            safe: false,
            ..CastOptions::default()
        },
    )?)
}

/// The exact product rounded to the result's places; one too large for
/// them is PostgreSQL's overflow.
fn kept(product: &ArrayRef, result_type: &DataType) -> DfResult<ArrayRef> {
    cast_with_options(
        product,
        result_type,
        &CastOptions {
            safe: false,
            ..CastOptions::default()
        },
    )
    .map_err(|_| {
        QueryError::new(
            SqlState::NUMERIC_VALUE_OUT_OF_RANGE,
            "value overflows numeric format",
        )
        .into_datafusion()
    })
}
