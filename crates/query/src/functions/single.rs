//! The value of a scalar subquery as an aggregate: its one row's value,
//! NULL without rows, and Postgres' error with more than one.
//!
//! DataFusion plans a correlated scalar subquery only when it is aggregated
//! (it decorrelates it into a join on the correlated columns). A subquery
//! that is not, such as `(SELECT y FROM t2 WHERE x = t1.a)`, is wrapped in
//! this aggregate, which keeps its meaning exactly: DataFusion can then
//! decorrelate it, or floe runs it per outer row ([`crate::subquery`]).

use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{Array, ArrayRef, Int64Array};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::format_state_name;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Signature, Volatility,
};
use floe_repr::SqlState;

use crate::error::QueryError;

/// The aggregate's name (not a Postgres function: floe plans it itself).
pub const SINGLE_VALUE: &str = "floe_subquery_value";

static SINGLE_UDAF: LazyLock<Arc<AggregateUDF>> =
    LazyLock::new(|| Arc::new(AggregateUDF::new_from_impl(SingleValue::new())));

/// The aggregate, shared.
pub fn single_value() -> Arc<AggregateUDF> {
    SINGLE_UDAF.clone()
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct SingleValue {
    signature: Signature,
}

impl SingleValue {
    fn new() -> SingleValue {
        SingleValue {
            signature: Signature::any(1, Volatility::Immutable),
        }
    }
}

impl AggregateUDFImpl for SingleValue {
    fn name(&self) -> &str {
        SINGLE_VALUE
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(arg_types.first().cloned().unwrap_or(DataType::Null))
    }

    fn return_field(&self, arg_fields: &[FieldRef]) -> DfResult<FieldRef> {
        // The value's field as it is (floe's type in its metadata), nullable.
        let field = arg_fields
            .first()
            .map(|f| f.as_ref().clone())
            .unwrap_or_else(|| Field::new(SINGLE_VALUE, DataType::Null, true));
        Ok(Arc::new(field.with_name(SINGLE_VALUE).with_nullable(true)))
    }

    fn accumulator(&self, args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
        Ok(Box::new(SingleAccumulator {
            rows: 0,
            value: ScalarValue::try_from(args.return_field.data_type())?,
        }))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> DfResult<Vec<FieldRef>> {
        Ok(vec![
            Arc::new(Field::new(
                format_state_name(args.name, "rows"),
                DataType::Int64,
                false,
            )),
            Arc::new(
                args.return_field
                    .as_ref()
                    .clone()
                    .with_name(format_state_name(args.name, "value"))
                    .with_nullable(true),
            ),
        ])
    }
}

#[derive(Debug)]
struct SingleAccumulator {
    rows: i64,
    value: ScalarValue,
}

impl SingleAccumulator {
    fn add(&mut self, rows: i64, value: ScalarValue) -> DfResult<()> {
        if rows == 0 {
            return Ok(());
        }
        self.rows += rows;
        if self.rows > 1 {
            return Err(QueryError::new(
                SqlState::CARDINALITY_VIOLATION,
                "more than one row returned by a subquery used as an expression",
            )
            .into_datafusion());
        }
        self.value = value;
        Ok(())
    }
}

impl Accumulator for SingleAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> DfResult<()> {
        let Some(array) = values.first() else {
            return Ok(());
        };
        for index in 0..array.len() {
            self.add(1, ScalarValue::try_from_array(array, index)?)?;
        }
        Ok(())
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> DfResult<()> {
        let (Some(rows), Some(values)) = (states.first(), states.get(1)) else {
            return Ok(());
        };
        let Some(rows) = rows.as_any().downcast_ref::<Int64Array>() else {
            return Err(
                QueryError::internal("subquery value state is not a count").into_datafusion()
            );
        };
        for index in 0..rows.len() {
            self.add(
                rows.value(index),
                ScalarValue::try_from_array(values, index)?,
            )?;
        }
        Ok(())
    }

    fn state(&mut self) -> DfResult<Vec<ScalarValue>> {
        Ok(vec![
            ScalarValue::Int64(Some(self.rows)),
            self.value.clone(),
        ])
    }

    fn evaluate(&mut self) -> DfResult<ScalarValue> {
        Ok(self.value.clone())
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.value.size()
    }
}
