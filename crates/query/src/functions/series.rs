//! `generate_series` as PostgreSQL has it: of numerics floe's, of integers,
//! dates and timestamps the engine's.
//!
//! PostgreSQL's `generate_series(numeric, numeric[, numeric])` steps from the
//! start by the step (1 when omitted) while the value has not passed the stop
//! (`generate_series(0.0, 1.0, 0.25)` is 0.0, 0.25, 0.50, 0.75, 1.00); the
//! engine takes only integers, dates and timestamps. floe's function answers a
//! list of the numerics (the select list's unnest makes them rows, see
//! [`crate::srf`]), exact at the start's and the step's scale and typed an
//! unconstrained numeric; each value's display scale is the start's, then the
//! larger of the start's and the step's, as PostgreSQL's sum of the two
//! ([`SERIES_SCALES`], read by [`crate::display_scale`]). A zero step is
//! PostgreSQL's error (the engine's words for it are mapped to it by
//! [`crate::error`]).

use std::cmp::Ordering;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Decimal128Builder, Int32Array, Int32Builder, ListBuilder,
};
use datafusion::arrow::datatypes::{DataType, Decimal128Type, Field, FieldRef, Int32Type};
use datafusion::common::Result as DfResult;
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use floe_repr::SqlState;

use crate::error::QueryError;

/// The name PostgreSQL gives the function.
pub const GENERATE_SERIES: &str = "generate_series";
/// `floe_series_scales(series, start_scale, step_scale)`: the display scale
/// of each value of a numeric `series` whose start and step have these
/// display scales.
pub const SERIES_SCALES: &str = "floe_series_scales";

/// The largest scale floe's series takes: an `int8` argument still fits the
/// decimal it is read as.
const MAX_SCALE: i8 = 18;
/// The precision of the decimals the series reads and answers.
const PRECISION: u8 = floe_arrow::NUMERIC_PRECISION;

pub(super) fn functions() -> Vec<ScalarUDF> {
    vec![
        ScalarUDF::new_from_impl(Series {
            engine: datafusion::functions_nested::range::gen_series_udf(),
            signature: Signature::user_defined(Volatility::Immutable),
        }),
        ScalarUDF::new_from_impl(SeriesScales {
            signature: Signature::any(3, Volatility::Immutable),
        }),
    ]
}

/// PostgreSQL's error for a zero step.
pub fn zero_step() -> QueryError {
    QueryError::new(
        SqlState::INVALID_PARAMETER_VALUE,
        "step size cannot equal zero",
    )
}

/// The scales of the decimals floe's series reads its arguments as.
#[derive(Clone, Copy)]
struct Scales {
    /// The start's and the step's: its values'.
    values: i8,
    /// The stop's.
    stop: i8,
}

/// The [`Scales`] of a series of arguments of these types, where floe's
/// function takes them: two or three numerics or integers, one a numeric
/// (PostgreSQL's numeric variant), none of more than [`MAX_SCALE`] places.
fn numeric_scales(types: &[DataType]) -> Option<Scales> {
    if !(2..=3).contains(&types.len())
        || !types.iter().any(|t| matches!(t, DataType::Decimal128(..)))
    {
        return None;
    }
    let scale = |ty: Option<&DataType>| match ty {
        Some(DataType::Decimal128(_, s)) => Some(*s),
        Some(
            DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 | DataType::Null,
        )
        | None => Some(0),
        Some(_) => None,
    };
    let scales = Scales {
        values: scale(types.first())?.max(scale(types.get(2))?),
        stop: scale(types.get(1))?,
    };
    let fits = |scale: i8| (0..=MAX_SCALE).contains(&scale);
    (fits(scales.values) && fits(scales.stop)).then_some(scales)
}

/// floe's numeric `generate_series` beside the engine's of other types.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Series {
    engine: Arc<ScalarUDF>,
    signature: Signature,
}

impl ScalarUDFImpl for Series {
    fn name(&self) -> &str {
        GENERATE_SERIES
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    /// Numerics as decimals of one scale; other types as the engine's function
    /// takes them.
    fn coerce_types(&self, arg_types: &[DataType]) -> DfResult<Vec<DataType>> {
        if let Some(scales) = numeric_scales(arg_types) {
            let mut types = vec![
                DataType::Decimal128(PRECISION, scales.values),
                DataType::Decimal128(PRECISION, scales.stop),
                DataType::Decimal128(PRECISION, scales.values),
            ];
            types.truncate(arg_types.len());
            return Ok(types);
        }
        super::engine_coerced_types(arg_types, self.engine.as_ref())
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        match numeric_scales(arg_types) {
            Some(scales) => Ok(list_type(scales.values)),
            None => self.engine.return_type(arg_types),
        }
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        match numeric_scales(&super::argument_types(args.arg_fields)) {
            Some(scales) => Ok(Arc::new(Field::new(
                GENERATE_SERIES,
                list_type(scales.values),
                true,
            ))),
            None => self.engine.return_field_from_args(args),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let types: Vec<DataType> = args.args.iter().map(ColumnarValue::data_type).collect();
        let Some(scales) = numeric_scales(&types) else {
            return self.engine.invoke_with_args(args);
        };
        let (scalar, rows) = super::call_rows(&args);
        let columns = decimal_columns(&args.args, rows)?;
        let mut lists = ListBuilder::new(
            Decimal128Builder::new().with_data_type(DataType::Decimal128(PRECISION, scales.values)),
        )
        .with_field(item_field(scales.values));
        for row in 0..rows {
            let Some((start, stop, step)) = bounds(&columns, row, scales.values) else {
                lists.append_null();
                continue;
            };
            for value in series(start, stop, step, scales)? {
                lists.values().append_value(value);
            }
            lists.append(true);
        }
        super::columnar(Arc::new(lists.finish()), scalar)
    }
}

/// The type of a series of numerics read at `scale`.
fn list_type(scale: i8) -> DataType {
    DataType::List(Arc::new(item_field(scale)))
}

/// A series' values: unconstrained numerics, exact at `scale` (the start's
/// and the step's, so that a series of integers prints as PostgreSQL's where
/// floe's display scales do not reach it).
fn item_field(scale: i8) -> Field {
    floe_arrow::computed_numeric_field("item", PRECISION, scale)
}

/// Each argument as a column of `rows` decimals.
fn decimal_columns(args: &[ColumnarValue], rows: usize) -> DfResult<Vec<ArrayRef>> {
    args.iter().map(|arg| arg.to_array(rows)).collect()
}

/// Row `row`'s start, stop and step (one, at the values' `scale`, when
/// omitted); `None` where one is NULL (no series).
fn bounds(columns: &[ArrayRef], row: usize, scale: i8) -> Option<(i128, i128, i128)> {
    let value = |index: usize| -> Option<i128> {
        let column = columns.get(index)?.as_primitive_opt::<Decimal128Type>()?;
        column.is_valid(row).then(|| column.value(row))
    };
    let one = 10i128.pow(u32::try_from(scale).ok()?);
    let step = if columns.len() > 2 { value(2)? } else { one };
    Some((value(0)?, value(1)?, step))
}

/// The values from `start` by `step` that have not passed `stop` (read at
/// `scales`).
fn series(start: i128, stop: i128, step: i128, scales: Scales) -> DfResult<Vec<i128>> {
    if step == 0 {
        return Err(zero_step().into_datafusion());
    }
    let mut values = Vec::new();
    let mut value = Some(start);
    while let Some(current) = value {
        let passed = if step > 0 {
            Ordering::Greater
        } else {
            Ordering::Less
        };
        if compare(current, scales.values, stop, scales.stop) == passed {
            break;
        }
        values.push(current);
        // Past the decimal's range the series has passed any stop it holds.
        value = current.checked_add(step);
    }
    Ok(values)
}

/// Decimal `a` of `a_scale` places against `b` of `b_scale`, exactly.
fn compare(a: i128, a_scale: i8, b: i128, b_scale: i8) -> Ordering {
    let rescaled = |x: i128, places: i8| x.checked_mul(10i128.pow(places.unsigned_abs().into()));
    // A decimal that overflows when rescaled is beyond any of 38 digits.
    match a_scale.cmp(&b_scale) {
        Ordering::Less => rescaled(a, b_scale - a_scale).map_or(a.cmp(&0), |a| a.cmp(&b)),
        Ordering::Greater => rescaled(b, a_scale - b_scale).map_or(0.cmp(&b), |b| a.cmp(&b)),
        Ordering::Equal => a.cmp(&b),
    }
}

/// The display scales of a numeric series' values (see the module
/// documentation): `floe_series_scales(series, start_scale, step_scale)`.
#[derive(Debug, PartialEq, Eq, Hash)]
struct SeriesScales {
    signature: Signature,
}

impl ScalarUDFImpl for SeriesScales {
    fn name(&self) -> &str {
        SERIES_SCALES
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::List(Arc::new(Field::new(
            "item",
            DataType::Int32,
            true,
        ))))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let (scalar, rows) = super::call_rows(&args);
        let [series, start_scale, step_scale] = args.args.as_slice() else {
            return Err(QueryError::internal("floe_series_scales arity").into_datafusion());
        };
        let series = series.to_array(rows)?;
        let series = series.as_list_opt::<i32>().ok_or_else(|| {
            QueryError::internal("floe_series_scales series type").into_datafusion()
        })?;
        let (start_scales, step_scales) = (scales(start_scale, rows)?, scales(step_scale, rows)?);
        let mut lists = ListBuilder::new(Int32Builder::new());
        for row in 0..rows {
            if series.is_null(row) {
                lists.append_null();
                continue;
            }
            let first = start_scales.is_valid(row).then(|| start_scales.value(row));
            let step = step_scales.is_valid(row).then(|| step_scales.value(row));
            let rest = first.max(step);
            for index in 0..series.value(row).len() {
                lists
                    .values()
                    .append_option(if index == 0 { first } else { rest });
            }
            lists.append(true);
        }
        super::columnar(Arc::new(lists.finish()), scalar)
    }
}

/// A column of `rows` display scales, as `int`s.
fn scales(scale: &ColumnarValue, rows: usize) -> DfResult<Int32Array> {
    let array = datafusion::arrow::compute::cast(&scale.to_array(rows)?, &DataType::Int32)?;
    Ok(array.as_primitive::<Int32Type>().clone())
}
