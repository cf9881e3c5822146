//! `sum` as Postgres types it: the sum of `smallint`s and `integer`s is a
//! `bigint`, the sum of `bigint`s a `numeric`, which does not overflow where
//! DataFusion's bigint sum would wrap. DataFusion's own `sum` does the
//! summing; this only chooses the type its argument is coerced to, so the
//! planned column has the result type from the start (floe-compute
//! maintains such a sum as it does any decimal sum).

use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::{Result as DfResult, plan_err};
use datafusion::functions_aggregate::sum::Sum;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::AggregateOrderSensitivity;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, GroupsAccumulator, ReversedUDAF, Signature,
    Volatility,
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
