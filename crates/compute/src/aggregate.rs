//! Aggregates, maintained three ways (as Materialize does):
//! - **accumulable** (`count`, `sum` and `avg` of integers and decimals, `bool_and`,
//!   `bool_or`): each row contributes a count and an exact integer sum carried in
//!   the update's difference, so a change costs O(1) whatever the group's size; the
//!   result is produced by DataFusion's own accumulator from that state;
//! - **hierarchical** (`min`, `max`): reduced through a tower of hash buckets, so
//!   retracting the minimum rescans one small bucket per level, not the group;
//! - **basic** (everything else: `string_agg`, `array_agg`, float sums, ...): the
//!   group's values, sorted by the aggregate's ORDER BY, fed to DataFusion's
//!   accumulator.

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Decimal128Array, Float64Array, Int64Array, UInt64Array,
    new_null_array,
};
use datafusion::arrow::compute::{SortOptions, cast, nullif};
use datafusion::arrow::datatypes::{
    DataType, Decimal128Type, Field, FieldRef, Int64Type, Schema, SchemaRef, UInt64Type,
};
use datafusion::logical_expr::AggregateUDF;
use datafusion::logical_expr::EmitTo;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::physical_expr::PhysicalExpr;
use differential_dataflow::difference::{Abelian, IsZero, Monoid, Multiply, Semigroup};
use serde::{Deserialize, Serialize};

use crate::error::{ComputeError, DataflowError};
use crate::row::{Row, RowCodec};

/// The state of an accumulable aggregate, carried in the difference of updates:
/// how many rows had a non-NULL argument and the exact sum of the arguments
/// (integers, or decimals' unscaled values; the number of `true`s for booleans).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Accum {
    pub count: i64,
    pub sum: i128,
}

impl IsZero for Accum {
    fn is_zero(&self) -> bool {
        self.count == 0 && self.sum == 0
    }
}

impl Semigroup for Accum {
    fn plus_equals(&mut self, rhs: &Accum) {
        self.count = self.count.wrapping_add(rhs.count);
        self.sum = self.sum.wrapping_add(rhs.sum);
    }
}

impl Monoid for Accum {
    fn zero() -> Accum {
        Accum::default()
    }
}

impl Abelian for Accum {
    fn negate(&mut self) {
        self.count = self.count.wrapping_neg();
        self.sum = self.sum.wrapping_neg();
    }
}

impl Multiply<i64> for Accum {
    type Output = Accum;
    fn multiply(self, rhs: &i64) -> Accum {
        Accum {
            count: self.count.wrapping_mul(*rhs),
            sum: self.sum.wrapping_mul(i128::from(*rhs)),
        }
    }
}

/// How an aggregate is maintained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggregateKind {
    Count,
    Sum,
    Avg,
    BoolAnd,
    BoolOr,
    Min,
    Max,
    Basic,
}

impl AggregateKind {
    pub fn is_accumulable(self) -> bool {
        matches!(
            self,
            AggregateKind::Count
                | AggregateKind::Sum
                | AggregateKind::Avg
                | AggregateKind::BoolAnd
                | AggregateKind::BoolOr
        )
    }
}

/// One aggregate of a GROUP BY, ready to render.
#[derive(Debug, Clone)]
pub struct AggregatePlan {
    /// The aggregate as the query wrote it (`sum(t.x)`), for messages.
    pub name: String,
    pub udf: Arc<AggregateUDF>,
    pub kind: AggregateKind,
    /// `DISTINCT`: the values are made distinct per group before aggregating.
    pub distinct: bool,
    /// What the aggregate consumes, over the reduce's input rows. For `avg` of an
    /// integer this is the integer below the planner's cast to double.
    pub args: Vec<Arc<dyn PhysicalExpr>>,
    /// The arguments as planned (DataFusion's accumulator reads literal arguments,
    /// such as `string_agg`'s delimiter, from these).
    pub planned_args: Vec<Arc<dyn PhysicalExpr>>,
    pub planned_arg_fields: Vec<FieldRef>,
    /// `FILTER (WHERE ...)`.
    pub filter: Option<Arc<dyn PhysicalExpr>>,
    /// The aggregate's `ORDER BY`, which orders the values a basic aggregate sees.
    pub order_by: Vec<Arc<dyn PhysicalExpr>>,
    /// The shape of one value as it travels: `[arg]` for min and max (ordered so
    /// that the first is the answer), `[order by..., args...]` for basic aggregates.
    pub value_codec: Arc<RowCodec>,
    /// A basic aggregate's result, as a one-column row.
    pub result_codec: Arc<RowCodec>,
    pub return_field: FieldRef,
    /// The reduce input's shape.
    pub input_schema: SchemaRef,
    pub ignore_nulls: bool,
    /// Count, sum and avg: the types of DataFusion's partial state.
    pub state_types: Vec<DataType>,
}

/// The types of DataFusion's partial state for an accumulable aggregate.
pub fn state_types(
    udf: &AggregateUDF,
    name: &str,
    arg_fields: &[FieldRef],
    return_field: &FieldRef,
) -> Result<Vec<DataType>, ComputeError> {
    let fields = udf
        .state_fields(StateFieldsArgs {
            name,
            input_fields: arg_fields,
            return_field: return_field.clone(),
            ordering_fields: &[],
            is_distinct: false,
        })
        .map_err(ComputeError::plan)?;
    Ok(fields.iter().map(|f| f.data_type().clone()).collect())
}

/// The codec of min/max values: the first value in byte order is the answer.
pub fn extreme_codec(arg: &Field, kind: AggregateKind) -> Result<RowCodec, ComputeError> {
    let options = SortOptions {
        descending: kind == AggregateKind::Max,
        nulls_first: false,
    };
    let field = arg.clone().with_nullable(true);
    RowCodec::with_options(Arc::new(Schema::new(vec![field])), vec![options])
}

impl AggregatePlan {
    fn accumulator_args<'a>(&'a self) -> AccumulatorArgs<'a> {
        AccumulatorArgs {
            return_field: self.return_field.clone(),
            schema: &self.input_schema,
            ignore_nulls: self.ignore_nulls,
            order_bys: &[],
            is_reversed: false,
            name: &self.name,
            is_distinct: false,
            exprs: &self.planned_args,
            expr_fields: &self.planned_arg_fields,
        }
    }

    /// Each row's contribution to an accumulable aggregate, from the evaluated
    /// argument (the first column of `args`). Rows with a NULL argument contribute
    /// nothing.
    pub fn accums(&self, args: &[ArrayRef]) -> Result<Vec<Accum>, DataflowError> {
        let Some(arg) = args.first() else {
            return Err(internal("aggregate without argument"));
        };
        let rows = arg.len();
        let counted = |i: usize| i64::from(arg.is_valid(i));
        let out: Vec<Accum> = match self.kind {
            AggregateKind::Count => (0..rows)
                .map(|i| Accum {
                    count: counted(i),
                    sum: 0,
                })
                .collect(),
            AggregateKind::BoolAnd | AggregateKind::BoolOr => {
                let values = arg
                    .as_boolean_opt()
                    .ok_or_else(|| internal("boolean aggregate over non-boolean"))?;
                (0..rows)
                    .map(|i| Accum {
                        count: counted(i),
                        sum: i128::from(values.is_valid(i) && values.value(i)),
                    })
                    .collect()
            }
            AggregateKind::Sum | AggregateKind::Avg => {
                let sums = integer_values(arg)?;
                (0..rows)
                    .map(|i| Accum {
                        count: counted(i),
                        sum: if arg.is_valid(i) { sums[i] } else { 0 },
                    })
                    .collect()
            }
            _ => return Err(internal("not an accumulable aggregate")),
        };
        Ok(out)
    }

    /// The results of an accumulable aggregate for a batch of groups, from their
    /// accumulated states. Groups whose result cannot be represented (a sum out of
    /// range) are NULL in the array and listed with their error.
    pub fn finalize_accumulable(
        &self,
        accums: &[Accum],
    ) -> Result<(ArrayRef, Vec<(usize, DataflowError)>), ComputeError> {
        let mut errors = Vec::new();
        let array: ArrayRef = match self.kind {
            AggregateKind::Count => {
                Arc::new(Int64Array::from_iter_values(accums.iter().map(|a| a.count)))
            }
            AggregateKind::BoolAnd | AggregateKind::BoolOr => {
                let and = self.kind == AggregateKind::BoolAnd;
                Arc::new(BooleanArray::from_iter(accums.iter().map(|a| {
                    (a.count > 0).then(|| {
                        if and {
                            a.sum == i128::from(a.count)
                        } else {
                            a.sum > 0
                        }
                    })
                })))
            }
            AggregateKind::Sum | AggregateKind::Avg => {
                let (states, state_errors) = self.states(accums)?;
                errors = state_errors;
                let mut accumulator = self
                    .udf
                    .create_groups_accumulator(self.accumulator_args())
                    .map_err(ComputeError::internal)?;
                let groups: Vec<usize> = (0..accums.len()).collect();
                accumulator
                    .merge_batch(&states, &groups, None, accums.len())
                    .map_err(ComputeError::internal)?;
                let result = accumulator
                    .evaluate(EmitTo::All)
                    .map_err(ComputeError::internal)?;
                // A group without a non-NULL value sums and averages to NULL.
                let empty = BooleanArray::from_iter(accums.iter().map(|a| Some(a.count <= 0)));
                nullif(&result, &empty).map_err(ComputeError::internal)?
            }
            _ => return Err(ComputeError::internal("not an accumulable aggregate")),
        };
        let array = if array.data_type() == self.return_field.data_type() {
            array
        } else {
            cast(&array, self.return_field.data_type()).map_err(ComputeError::internal)?
        };
        Ok((array, errors))
    }

    /// DataFusion's partial state (`[sum]` or `[count, sum]`) for each group.
    fn states(
        &self,
        accums: &[Accum],
    ) -> Result<(Vec<ArrayRef>, crate::error::RowErrors), ComputeError> {
        let Some(sum_type) = self.state_types.last() else {
            return Err(ComputeError::internal("aggregate without state"));
        };
        let mut errors = Vec::new();
        let mut present = |i: usize, fits: bool, a: &Accum| {
            if a.count > 0 && !fits {
                errors.push((
                    i,
                    DataflowError::new("22003", format!("{} out of range", self.name)),
                ));
            }
            a.count > 0 && fits
        };
        let sums: ArrayRef = match sum_type {
            DataType::Int64 => Arc::new(Int64Array::from_iter(accums.iter().enumerate().map(
                |(i, a)| {
                    let value = i64::try_from(a.sum);
                    present(i, value.is_ok(), a).then(|| value.unwrap_or_default())
                },
            ))),
            DataType::UInt64 => Arc::new(UInt64Array::from_iter(accums.iter().enumerate().map(
                |(i, a)| {
                    let value = u64::try_from(a.sum);
                    present(i, value.is_ok(), a).then(|| value.unwrap_or_default())
                },
            ))),
            DataType::Float64 => Arc::new(Float64Array::from_iter(
                accums.iter().map(|a| (a.count > 0).then_some(a.sum as f64)),
            )),
            DataType::Decimal128(precision, scale) => {
                let limit = 10i128
                    .checked_pow(u32::from(*precision))
                    .unwrap_or(i128::MAX);
                let array = Decimal128Array::from_iter(
                    accums
                        .iter()
                        .enumerate()
                        .map(|(i, a)| present(i, a.sum.abs() < limit, a).then_some(a.sum)),
                )
                .with_precision_and_scale(*precision, *scale)
                .map_err(ComputeError::internal)?;
                Arc::new(array)
            }
            other => {
                return Err(ComputeError::internal(format!("sum state of type {other}")));
            }
        };
        let states = if self.state_types.len() == 2 {
            let counts: ArrayRef = Arc::new(UInt64Array::from_iter_values(
                accums.iter().map(|a| u64::try_from(a.count).unwrap_or(0)),
            ));
            vec![counts, sums]
        } else {
            vec![sums]
        };
        Ok((states, errors))
    }

    /// A basic aggregate over a group's values (sorted, with multiplicities), as a
    /// one-column row of its result.
    pub fn evaluate_basic(&self, values: &[(&Row, i64)]) -> Result<Row, DataflowError> {
        let mut repeated: Vec<&Row> = Vec::with_capacity(values.len());
        for (row, count) in values {
            if *count < 0 {
                return Err(internal("negative multiplicity in an aggregate's input"));
            }
            repeated.extend(std::iter::repeat_n(*row, *count as usize));
        }
        let columns = self
            .value_codec
            .decode(repeated.iter().copied())
            .map_err(|e| internal(&e.message))?;
        let args = columns.get(self.order_by.len()..).unwrap_or_default();
        let mut accumulator = self
            .udf
            .accumulator(self.accumulator_args())
            .map_err(|e| DataflowError::from_datafusion(&e))?;
        if !repeated.is_empty() {
            accumulator
                .update_batch(args)
                .map_err(|e| DataflowError::from_datafusion(&e))?;
        }
        let value = accumulator
            .evaluate()
            .map_err(|e| DataflowError::from_datafusion(&e))?;
        let array = value
            .to_array()
            .map_err(|e| DataflowError::from_datafusion(&e))?;
        self.encode_result(array)
    }

    /// The result of a basic aggregate over no rows (a global aggregate's default).
    pub fn empty_result(&self) -> Result<ArrayRef, ComputeError> {
        match self.kind {
            AggregateKind::Basic => {
                let row = self
                    .evaluate_basic(&[])
                    .map_err(|e| ComputeError::internal(e.message))?;
                self.decode_results(&[Some(&row)])
            }
            AggregateKind::Min | AggregateKind::Max => {
                Ok(new_null_array(self.return_field.data_type(), 1))
            }
            _ => Ok(self.finalize_accumulable(&[Accum::default()])?.0),
        }
    }

    fn encode_result(&self, array: ArrayRef) -> Result<Row, DataflowError> {
        let array = if array.data_type() == self.return_field.data_type() {
            array
        } else {
            cast(&array, self.return_field.data_type())
                .map_err(|e| DataflowError::new("22000", e.to_string()))?
        };
        self.result_codec
            .encode(&[array], 1)
            .map_err(|e| internal(&e.message))?
            .pop()
            .ok_or_else(|| internal("empty aggregate result"))
    }

    /// The result column for a batch of groups from their value rows (min/max: the
    /// extreme value; basic: the encoded result); `None` is NULL.
    pub fn decode_results(&self, rows: &[Option<&Row>]) -> Result<ArrayRef, ComputeError> {
        let codec = match self.kind {
            AggregateKind::Min | AggregateKind::Max => &self.value_codec,
            _ => &self.result_codec,
        };
        let present: Vec<&Row> = rows.iter().flatten().copied().collect();
        let decoded = codec.decode(present.iter().copied())?;
        let values = decoded
            .into_iter()
            .next()
            .unwrap_or_else(|| new_null_array(self.return_field.data_type(), 0));
        let mut next = 0u64;
        let indices = datafusion::arrow::array::UInt64Array::from_iter(rows.iter().map(|r| {
            r.map(|_| {
                next += 1;
                next - 1
            })
        }));
        let taken = datafusion::arrow::compute::take(&values, &indices, None)
            .map_err(ComputeError::internal)?;
        if taken.data_type() == self.return_field.data_type() {
            Ok(taken)
        } else {
            cast(&taken, self.return_field.data_type()).map_err(ComputeError::internal)
        }
    }
}

fn internal(message: &str) -> DataflowError {
    DataflowError::new("XX000", message)
}

/// An integer or decimal column's values as exact integers (decimals unscaled).
fn integer_values(array: &ArrayRef) -> Result<Vec<i128>, DataflowError> {
    let to_error =
        |e: datafusion::arrow::error::ArrowError| DataflowError::new("22000", e.to_string());
    Ok(match array.data_type() {
        DataType::Decimal128(_, _) => array
            .as_primitive::<Decimal128Type>()
            .values()
            .iter()
            .copied()
            .collect(),
        DataType::UInt8 | DataType::UInt16 | DataType::UInt32 | DataType::UInt64 => {
            let cast = cast(array, &DataType::UInt64).map_err(to_error)?;
            cast.as_primitive::<UInt64Type>()
                .values()
                .iter()
                .map(|v| i128::from(*v))
                .collect()
        }
        _ => {
            let cast = cast(array, &DataType::Int64).map_err(to_error)?;
            cast.as_primitive::<Int64Type>()
                .values()
                .iter()
                .map(|v| i128::from(*v))
                .collect()
        }
    })
}

/// Whether a column of this type sums exactly as integers.
pub fn sums_exactly(data_type: &DataType) -> bool {
    data_type.is_integer() || matches!(data_type, DataType::Decimal128(_, _))
}
