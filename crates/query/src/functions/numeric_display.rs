//! How computed numerics print, where floe can know it before the rows.
//!
//! PostgreSQL gives each numeric value its own display scale; floe's decimal
//! columns have one scale each. A column typed by its scale (a literal's
//! `1.10`, a `numeric(10,2)`) prints all its places, and DataFusion's `+`,
//! `-`, `*` and `%` give results PostgreSQL's scales (the larger operand
//! scale, their sum). An unconstrained numeric prints without trailing
//! zeros, as Materialize prints it; arithmetic on one stays one
//! ([`BARE_NUMERIC`]) instead of printing all of the engine's places
//! (`3.0000000000`). `round(x, n)` and `trunc(x, n)` of a constant `n` have
//! PostgreSQL's display scale `n` whatever `x`'s ([`ROUND_TO`],
//! [`TRUNC_TO`]). `min` and `max` of an unconstrained numeric are one
//! ([`min_max`]).

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use floe_repr::{Datum, SqlScalarType};

use super::numeric_math::exact::Exact;
use super::{Arguments, RowFunction};
use crate::error::QueryError;

/// Its argument, a decimal, as an unconstrained numeric.
pub const BARE_NUMERIC: &str = "floe_bare_numeric";
/// `round(x, n)` of a numeric or integer `x` and an integer literal `n`.
pub const ROUND_TO: &str = "floe_round_to";
/// `trunc(x, n)` of a numeric or integer `x` and an integer literal `n`.
pub const TRUNC_TO: &str = "floe_trunc_to";

pub(super) fn functions() -> Vec<ScalarUDF> {
    let immutable = Volatility::Immutable;
    vec![
        ScalarUDF::new_from_impl(BareNumeric {
            signature: Signature::any(1, immutable),
        }),
        RowFunction::new(ROUND_TO, immutable, places_result, |row, _| {
            to_places(row, false)
        })
        .udf(),
        RowFunction::new(TRUNC_TO, immutable, places_result, |row, _| {
            to_places(row, true)
        })
        .udf(),
    ]
}

/// `expr` (a decimal) marked an unconstrained numeric.
pub fn bare(expr: Expr) -> Result<Expr, QueryError> {
    super::call(BARE_NUMERIC, vec![expr])
}

/// Whether a field is an unconstrained numeric column (printed without
/// trailing zeros).
pub fn is_bare(field: &Field) -> bool {
    matches!(
        floe_arrow::sql_type_of(field),
        Some(SqlScalarType::Numeric {
            max_scale: None,
            ..
        })
    )
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct BareNumeric {
    signature: Signature,
}

impl ScalarUDFImpl for BareNumeric {
    fn name(&self) -> &str {
        BARE_NUMERIC
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        arg_types
            .first()
            .cloned()
            .ok_or_else(|| QueryError::internal("floe_bare_numeric arity").into_datafusion())
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let [field] = args.arg_fields else {
            return Err(QueryError::internal("floe_bare_numeric arity").into_datafusion());
        };
        Ok(Arc::new(match field.data_type() {
            DataType::Decimal128(precision, scale) => {
                floe_arrow::computed_numeric_field(BARE_NUMERIC, *precision, *scale)
            }
            other => Field::new(BARE_NUMERIC, other.clone(), true),
        }))
    }

    fn invoke_with_args(&self, mut args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        args.args
            .pop()
            .ok_or_else(|| QueryError::internal("floe_bare_numeric arity").into_datafusion())
    }
}

/// A numeric of scale `n` for a constant `n` (0 when negative); an
/// unconstrained one otherwise. PostgreSQL has these of numerics only (an
/// integer is read as one).
fn places_result(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    use SqlScalarType as S;
    let name = if arguments.function == ROUND_TO {
        "round"
    } else {
        "trunc"
    };
    let fits = matches!(
        arguments.types.as_slice(),
        [
            S::Numeric { .. } | S::Int16 | S::Int32 | S::Int64,
            S::Int16 | S::Int32 | S::Int64
        ]
    );
    if !fits {
        // The places are written as an `integer` (floe passes the literal as
        // the engine's bigint so that it is a constant when typed).
        let mut types = arguments.types.clone();
        if let Some(places @ S::Int64) = types.get_mut(1) {
            *places = S::Int32;
        }
        return Err(super::no_such_function(name, &types));
    }
    let places = match arguments.constants.get(1).copied().flatten() {
        Some(ScalarValue::Int16(Some(n))) => Some(i64::from(*n)),
        Some(ScalarValue::Int32(Some(n))) => Some(i64::from(*n)),
        Some(ScalarValue::Int64(Some(n))) => Some(*n),
        _ => None,
    };
    Ok(S::Numeric {
        precision: None,
        max_scale: places.map(|n| n.clamp(0, i64::from(floe_arrow::NUMERIC_PRECISION)) as u8),
    })
}

fn to_places(row: &[Datum], truncate: bool) -> Result<Datum, QueryError> {
    let [value, places] = row else {
        return Err(QueryError::internal("round arity"));
    };
    let value = match value {
        Datum::Numeric(text) => Exact::parse(text)
            .ok_or_else(|| QueryError::internal(format!("not a finite numeric: {text}")))?,
        Datum::Int16(n) => Exact::integer(i128::from(*n)),
        Datum::Int32(n) => Exact::integer(i128::from(*n)),
        Datum::Int64(n) => Exact::integer(i128::from(*n)),
        _ => return Err(QueryError::internal("round of a non-number")),
    };
    let places = match places {
        Datum::Int16(n) => i64::from(*n),
        Datum::Int32(n) => i64::from(*n),
        Datum::Int64(n) => *n,
        _ => return Err(QueryError::internal("round to a non-integer")),
    };
    Ok(Datum::Numeric(value.to_places(places, truncate).to_text()))
}

/// `min` and `max`, DataFusion's, whose result keeps its argument's field:
/// of an unconstrained numeric an unconstrained numeric (DataFusion's result
/// field is a plain decimal, which printed all ten places: `1.5000000000`).
pub fn min_max() -> Vec<datafusion::logical_expr::AggregateUDF> {
    use datafusion::functions_aggregate::min_max::{max_udaf, min_udaf};
    [min_udaf(), max_udaf()]
        .into_iter()
        .map(|inner| {
            datafusion::logical_expr::AggregateUDF::new_from_impl(KeepsField {
                inner: inner.as_ref().clone(),
            })
        })
        .collect()
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct KeepsField {
    inner: datafusion::logical_expr::AggregateUDF,
}

mod keeps_field {
    use datafusion::arrow::datatypes::{DataType, FieldRef};
    use datafusion::common::{Result as DfResult, ScalarValue};
    use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
    use datafusion::logical_expr::utils::AggregateOrderSensitivity;
    use datafusion::logical_expr::{
        Accumulator, AggregateUDFImpl, Documentation, GroupsAccumulator, ReversedUDAF,
        SetMonotonicity, Signature, StatisticsArgs,
    };

    use super::KeepsField;

    impl AggregateUDFImpl for KeepsField {
        fn name(&self) -> &str {
            self.inner.name()
        }

        fn signature(&self) -> &Signature {
            self.inner.signature()
        }

        fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
            self.inner.return_type(arg_types)
        }

        fn return_field(&self, arg_fields: &[FieldRef]) -> DfResult<FieldRef> {
            match arg_fields {
                [field] if super::is_bare(field) => Ok(std::sync::Arc::new(
                    field.as_ref().clone().with_name(self.name()),
                )),
                _ => self.inner.inner().return_field(arg_fields),
            }
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

        fn create_sliding_accumulator(
            &self,
            args: AccumulatorArgs,
        ) -> DfResult<Box<dyn Accumulator>> {
            self.inner.create_sliding_accumulator(args)
        }

        fn is_descending(&self) -> Option<bool> {
            self.inner.is_descending()
        }

        fn order_sensitivity(&self) -> AggregateOrderSensitivity {
            self.inner.inner().order_sensitivity()
        }

        fn coerce_types(&self, arg_types: &[DataType]) -> DfResult<Vec<DataType>> {
            self.inner.coerce_types(arg_types)
        }

        fn reverse_expr(&self) -> ReversedUDAF {
            self.inner.inner().reverse_expr()
        }

        fn value_from_stats(&self, statistics_args: &StatisticsArgs) -> Option<ScalarValue> {
            self.inner.value_from_stats(statistics_args)
        }

        fn documentation(&self) -> Option<&Documentation> {
            self.inner.documentation()
        }

        fn set_monotonicity(&self, data_type: &DataType) -> SetMonotonicity {
            self.inner.inner().set_monotonicity(data_type)
        }
    }
}
