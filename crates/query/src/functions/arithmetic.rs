//! Integer arithmetic as Postgres does it: the result has the wider
//! operand's type (`int2 + int2` is `int2`, `int4 * int8` is `int8`), and a
//! result that does not fit is an error (`integer out of range`), never a
//! wrapped value. Division truncates toward zero; by zero is an error.
//!
//! DataFusion's own operators wrap on overflow; the semantics rule sends
//! integer operands here instead.

use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{Array, ArrayRef, Int64Array};
use datafusion::arrow::compute::kernels::numeric;
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::error::ArrowError;
use datafusion::common::metadata::FieldMetadata;
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::simplify::{ExprSimplifyResult, SimplifyContext};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, Operator, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature, Volatility,
};
use floe_repr::SqlState;

use crate::error::QueryError;

/// Whether Postgres' integer arithmetic applies to this type.
pub fn is_integer(data_type: &DataType) -> bool {
    data_type.is_integer()
}

/// Whether a type is a decimal: floe's numeric, or one of more digits than it
/// holds (`1e40` beside `1.5`).
pub fn is_decimal(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Decimal128(..) | DataType::Decimal256(..)
    )
}

/// Whether a type is a float: `real` or `double precision`.
pub fn is_float(data_type: &DataType) -> bool {
    matches!(data_type, DataType::Float32 | DataType::Float64)
}

/// Whether a type is of exact numbers: a decimal or an integer.
pub fn is_exact(data_type: &DataType) -> bool {
    is_decimal(data_type) || is_integer(data_type)
}

/// The type of an integer operation's result.
fn result_type(left: &DataType, right: &DataType) -> DataType {
    use DataType as D;
    let width = |t: &DataType| match t {
        D::Int8 | D::UInt8 => 1,
        D::Int16 | D::UInt16 => 2,
        D::Int32 | D::UInt32 => 4,
        _ => 8,
    };
    let unsigned = |t: &DataType| t.is_unsigned_integer();
    let widest = width(left).max(width(right)).max(2);
    match (unsigned(left) && unsigned(right), widest) {
        (true, 2) => D::UInt16,
        (true, 4) => D::UInt32,
        (true, _) => D::UInt64,
        // Mixing signed and unsigned needs room for both ranges.
        (false, w) if unsigned(left) != unsigned(right) => match w {
            2 => D::Int32,
            _ => D::Int64,
        },
        (false, 2) => D::Int16,
        (false, 4) => D::Int32,
        (false, _) => D::Int64,
    }
}

/// The SQL name of an integer type, for range errors.
fn type_name(data_type: &DataType) -> &'static str {
    match data_type {
        DataType::Int16 => "smallint",
        DataType::Int32 => "integer",
        DataType::UInt16 => "uint2",
        DataType::UInt32 => "uint4",
        DataType::UInt64 => "uint8",
        _ => "bigint",
    }
}

/// `left op right` with Postgres' integer semantics.
pub fn integer_op(op: Operator, left: Expr, right: Expr) -> Option<Expr> {
    let udf = match op {
        Operator::Plus => &ADD,
        Operator::Minus => &SUBTRACT,
        Operator::Multiply => &MULTIPLY,
        Operator::Divide => &DIVIDE,
        Operator::Modulo => &MODULO,
        _ => return None,
    };
    Some(Expr::ScalarFunction(ScalarFunction::new_udf(
        Arc::clone(udf),
        vec![left, right],
    )))
}

/// `-operand` with Postgres' integer semantics.
pub fn integer_negate(operand: Expr) -> Expr {
    Expr::ScalarFunction(ScalarFunction::new_udf(Arc::clone(&NEGATE), vec![operand]))
}

static ADD: LazyLock<Arc<ScalarUDF>> = LazyLock::new(|| udf("floe_int_add", Operator::Plus));
static SUBTRACT: LazyLock<Arc<ScalarUDF>> =
    LazyLock::new(|| udf("floe_int_subtract", Operator::Minus));
static MULTIPLY: LazyLock<Arc<ScalarUDF>> =
    LazyLock::new(|| udf("floe_int_multiply", Operator::Multiply));
static DIVIDE: LazyLock<Arc<ScalarUDF>> =
    LazyLock::new(|| udf("floe_int_divide", Operator::Divide));
static MODULO: LazyLock<Arc<ScalarUDF>> =
    LazyLock::new(|| udf("floe_int_modulo", Operator::Modulo));
static NEGATE: LazyLock<Arc<ScalarUDF>> = LazyLock::new(|| {
    Arc::new(ScalarUDF::new_from_impl(IntegerOp {
        name: "floe_int_negate",
        op: None,
        signature: Signature::any(1, Volatility::Immutable),
    }))
});

fn udf(name: &'static str, op: Operator) -> Arc<ScalarUDF> {
    Arc::new(ScalarUDF::new_from_impl(IntegerOp {
        name,
        op: Some(op),
        signature: Signature::any(2, Volatility::Immutable),
    }))
}

pub(super) fn functions() -> Vec<ScalarUDF> {
    [&ADD, &SUBTRACT, &MULTIPLY, &DIVIDE, &MODULO, &NEGATE]
        .into_iter()
        .map(|f| f.as_ref().clone())
        .collect()
}

/// One checked integer operation (`op` is `None` for negation).
#[derive(Debug, PartialEq, Eq, Hash)]
struct IntegerOp {
    name: &'static str,
    op: Option<Operator>,
    signature: Signature,
}

impl ScalarUDFImpl for IntegerOp {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(match arg_types {
            [operand] => result_type(operand, operand),
            [left, right] => result_type(left, right),
            _ => DataType::Int64,
        })
    }

    fn simplify(&self, args: Vec<Expr>, info: &SimplifyContext) -> DfResult<ExprSimplifyResult> {
        Ok(strict_simplified(self, args, info))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let ty = args.return_type().clone();
        let (scalar, length) = super::call_rows(&args);
        let arrays = args
            .args
            .iter()
            .map(|a| {
                let array = a.to_array(length)?;
                Ok(datafusion::arrow::compute::cast(&array, &ty)?)
            })
            .collect::<DfResult<Vec<ArrayRef>>>()?;
        let result = match (self.op, arrays.as_slice()) {
            (None, [operand]) => numeric::neg(operand),
            (Some(op), [left, right]) => apply(op, left, right),
            _ => return Err(QueryError::internal("integer operator arity").into_datafusion()),
        }
        .map_err(|e| range_error(e, &ty))?;
        if scalar {
            Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(
                &result, 0,
            )?))
        } else {
            Ok(ColumnarValue::Array(result))
        }
    }
}

fn apply(op: Operator, left: &ArrayRef, right: &ArrayRef) -> Result<ArrayRef, ArrowError> {
    match op {
        Operator::Plus => numeric::add(left, right),
        Operator::Minus => numeric::sub(left, right),
        Operator::Multiply => numeric::mul(left, right),
        Operator::Divide => numeric::div(left, right),
        _ => remainder(left, right),
    }
}

/// `left % right`: Postgres answers 0 for the one case that overflows
/// (the minimum value modulo -1), where the checked kernel fails.
fn remainder(left: &ArrayRef, right: &ArrayRef) -> Result<ArrayRef, ArrowError> {
    match numeric::rem(left, right) {
        Err(ArrowError::ArithmeticOverflow(_)) => {
            let wide_left = datafusion::arrow::compute::cast(left, &DataType::Int64)?;
            let wide_right = datafusion::arrow::compute::cast(right, &DataType::Int64)?;
            let l = wide_left
                .as_any()
                .downcast_ref::<Int64Array>()
                .ok_or_else(|| ArrowError::ComputeError("remainder operand".into()))?;
            let r = wide_right
                .as_any()
                .downcast_ref::<Int64Array>()
                .ok_or_else(|| ArrowError::ComputeError("remainder operand".into()))?;
            let values: Int64Array = l
                .iter()
                .zip(r.iter())
                .map(|(a, b)| match (a, b) {
                    (Some(a), Some(b)) => Some(a.checked_rem(b).unwrap_or(0)),
                    _ => None,
                })
                .collect();
            datafusion::arrow::compute::cast(&values, left.data_type())
        }
        other => other,
    }
}

fn range_error(error: ArrowError, ty: &DataType) -> datafusion::error::DataFusionError {
    match error {
        ArrowError::DivideByZero => {
            QueryError::new(SqlState::DIVISION_BY_ZERO, "division by zero").into_datafusion()
        }
        ArrowError::ArithmeticOverflow(_) => QueryError::new(
            SqlState::NUMERIC_VALUE_OUT_OF_RANGE,
            format!("{} out of range", type_name(ty)),
        )
        .into_datafusion(),
        other => other.into(),
    }
}

/// `simplify` of a strict operator of floe's: [`null_of_null_argument`] where
/// it folds, else the arguments as they came.
pub(crate) fn strict_simplified(
    function: &dyn ScalarUDFImpl,
    args: Vec<Expr>,
    info: &SimplifyContext,
) -> ExprSimplifyResult {
    match null_of_null_argument(function, &args, info) {
        Some(null) => ExprSimplifyResult::Simplified(null),
        None => ExprSimplifyResult::Original(args),
    }
}

/// PostgreSQL's planner folds a call of a strict function with a NULL constant
/// argument to NULL before the call runs: `count(*) / 0 * NULL::int` is NULL,
/// its division never made. floe's own arithmetic (`simplify` of its integer
/// and numeric operators, [`strict_simplified`]) folds the same way;
/// DataFusion's simplifier does so for its operators. `None` where no argument is a NULL constant, or the
/// result's field cannot be read from the arguments' (then the call runs).
fn null_of_null_argument(
    function: &dyn ScalarUDFImpl,
    args: &[Expr],
    info: &SimplifyContext,
) -> Option<Expr> {
    if !args
        .iter()
        .any(|arg| matches!(arg, Expr::Literal(value, _) if value.is_null()))
    {
        return None;
    }
    // PostgreSQL's planner folds from the leaves: a constant operand that fails
    // (`1 / 0 * NULL`) raises its error first. The simplifier leaves such an
    // operand unevaluated, so it runs, and fails, as the call does.
    if args.iter().any(failed_constant) {
        return None;
    }
    let fields = args
        .iter()
        .map(|arg| arg.to_field(info.schema()).map(|(_, field)| field))
        .collect::<DfResult<Vec<_>>>()
        .ok()?;
    let scalars: Vec<Option<&ScalarValue>> = args
        .iter()
        .map(|arg| match arg {
            Expr::Literal(value, _) => Some(value),
            _ => None,
        })
        .collect();
    let field = function
        .return_field_from_args(ReturnFieldArgs {
            arg_fields: &fields,
            scalar_arguments: &scalars,
        })
        .ok()?;
    let null = ScalarValue::try_from(field.data_type()).ok()?;
    let metadata = (!field.metadata().is_empty()).then(|| FieldMetadata::from(field.as_ref()));
    Some(Expr::Literal(null, metadata))
}

/// Whether `arg` is a constant the simplifier could not evaluate: no literal,
/// yet nothing in it that varies by row or run.
fn failed_constant(arg: &Expr) -> bool {
    !matches!(arg, Expr::Literal(..)) && is_constant(arg)
}

/// Whether `expr` is the same for every row and run: no column, parameter,
/// subquery or aggregate in it, and nothing volatile.
pub(crate) fn is_constant(expr: &Expr) -> bool {
    use datafusion::common::tree_node::TreeNode;
    if expr.is_volatile() {
        return false;
    }
    let varies = expr.exists(|node| {
        Ok(matches!(
            node,
            Expr::Column(_)
                | Expr::OuterReferenceColumn(..)
                | Expr::Placeholder(_)
                | Expr::ScalarSubquery(_)
                | Expr::Exists(_)
                | Expr::InSubquery(_)
                | Expr::SetComparison(_)
                | Expr::AggregateFunction(_)
                | Expr::WindowFunction(_)
        ))
    });
    !varies.unwrap_or(true)
}
