//! `sum` as Postgres types it: the sum of `smallint`s and `integer`s is a
//! `bigint`, the sum of `bigint`s a `numeric`, which does not overflow where
//! DataFusion's bigint sum would wrap. DataFusion's own `sum` does the
//! summing; this only chooses the type its argument is coerced to, so the
//! planned column has the result type from the start (floe-compute
//! maintains such a sum as it does any decimal sum).

use datafusion::arrow::datatypes::{DataType, FieldRef};
use std::sync::Arc;

use datafusion::common::{DFSchema, Result as DfResult, plan_err};
use datafusion::functions_aggregate::sum::{Sum, sum_udaf};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::AggregateOrderSensitivity;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Expr, ExprSchemable, GroupsAccumulator,
    ReversedUDAF, Signature, Volatility, cast,
};

/// `sum` with Postgres' result types.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PgSum {
    inner: Sum,
    signature: Signature,
}

/// The `sum` aggregate floe registers over DataFusion's.
pub fn pg_sum() -> AggregateUDF {
    AggregateUDF::new_from_impl(PgSum {
        inner: Sum::new(),
        signature: Signature::user_defined(Volatility::Immutable),
    })
}

/// For floe's `sum` of a `smallint` or `integer` (`function` over
/// `arguments`), DataFusion's own `sum` and the argument cast to `bigint`: a
/// `bigint` sum, as in Postgres. [`PgSum`] coerces such an argument to
/// `bigint`, but type coercion types the aggregate again from its coerced
/// argument, and floe's sum of a `bigint` is a `numeric`: the column changed
/// type under the expressions planned against it (`SELECT 1 = sum(2)`
/// compared a bigint with a numeric). Rewritten before coercion, the
/// aggregate keeps its type.
pub fn bigint_sum_of_integers(
    function: &AggregateUDF,
    arguments: &[Expr],
    schema: &DFSchema,
) -> DfResult<Option<(Arc<AggregateUDF>, Vec<Expr>)>> {
    let [argument] = arguments else {
        return Ok(None);
    };
    let is_pg_sum = function.inner().downcast_ref::<PgSum>().is_some();
    let small_integer = matches!(
        argument.get_type(schema)?,
        DataType::Int8 | DataType::Int16 | DataType::Int32
    );
    Ok((is_pg_sum && small_integer)
        .then(|| (sum_udaf(), vec![cast(argument.clone(), DataType::Int64)])))
}

impl AggregateUDFImpl for PgSum {
    fn name(&self) -> &str {
        "sum"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> DfResult<Vec<DataType>> {
        use DataType as D;
        let [argument] = arg_types else {
            return plan_err!("sum takes one argument");
        };
        let coerced = match argument {
            D::Null | D::Int8 | D::Int16 | D::Int32 => D::Int64,
            D::UInt8 | D::UInt16 | D::UInt32 => D::UInt64,
            D::Int64 | D::UInt64 => D::Decimal128(floe_arrow::NUMERIC_PRECISION, 0),
            D::Float16 | D::Float32 => D::Float64,
            D::Float64 | D::Decimal128(..) | D::Decimal256(..) | D::Duration(_) => argument.clone(),
            D::Decimal32(p, s) | D::Decimal64(p, s) => D::Decimal128(*p, *s),
            other => return plan_err!("function sum({other}) does not exist"),
        };
        Ok(vec![coerced])
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        self.inner.return_type(arg_types)
    }

    /// The sum of an unconstrained numeric is one (printed without
    /// trailing zeros, as its operand; see `functions::numeric_display`).
    fn return_field(&self, arg_fields: &[FieldRef]) -> DfResult<FieldRef> {
        let types: Vec<DataType> = arg_fields.iter().map(|f| f.data_type().clone()).collect();
        let data_type = self.return_type(&types)?;
        if let (DataType::Decimal128(precision, scale), [field]) = (&data_type, arg_fields)
            && super::numeric_display::is_bare(field)
        {
            return Ok(Arc::new(floe_arrow::computed_numeric_field(
                "sum", *precision, *scale,
            )));
        }
        Ok(Arc::new(datafusion::arrow::datatypes::Field::new(
            "sum", data_type, true,
        )))
    }

    fn accumulator(&self, args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
        self.inner.accumulator(args)
    }

    fn state_fields(&self, args: StateFieldsArgs) -> DfResult<Vec<FieldRef>> {
        self.inner.state_fields(args)
    }

    fn groups_accumulator_supported(&self, args: AccumulatorArgs) -> bool {
        self.inner.groups_accumulator_supported(args)
    }

    fn create_groups_accumulator(
        &self,
        args: AccumulatorArgs,
    ) -> DfResult<Box<dyn GroupsAccumulator>> {
        self.inner.create_groups_accumulator(args)
    }

    fn create_sliding_accumulator(&self, args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
        self.inner.create_sliding_accumulator(args)
    }

    fn reverse_expr(&self) -> ReversedUDAF {
        ReversedUDAF::Identical
    }

    fn order_sensitivity(&self) -> AggregateOrderSensitivity {
        self.inner.order_sensitivity()
    }
}
