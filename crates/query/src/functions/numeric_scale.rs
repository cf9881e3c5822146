//! Each value's PostgreSQL display scale, where it depends on the values.
//!
//! A quotient's, an average's and a numeric `sqrt`, `exp`, `ln`, `log` or
//! `power`'s display scale is chosen from the operands' values
//! (`select_div_scale` and its kin); floe's decimal column has one scale. The
//! functions here compute a value's display scale in a column of its own
//! (see [`crate::display_scale`]), and print a value at it.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int32Array, ListArray, StringArray};
use datafusion::arrow::buffer::{NullBuffer, OffsetBuffer};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use floe_repr::{Datum, PgType, SqlScalarType};
use num_traits::ToPrimitive;

use super::numeric_math::exact;
use super::numeric_math::exact::Exact;
use super::{Arguments, RowFunction};
use crate::error::QueryError;

/// `floe_division_scale(left, right, left_scale, right_scale)`: the display
/// scale of `left / right` whose operands have these display scales.
pub const DIVISION_SCALE: &str = "floe_division_scale";
/// `floe_math_scale(name, arg..., scale...)`: the display scale of the
/// numeric function `name` of arguments of these display scales.
pub const MATH_SCALE: &str = "floe_math_scale";
/// `floe_value_scale(x)`: the places of `x` as floe prints it (an
/// unconstrained numeric without trailing zeros).
pub const VALUE_SCALE: &str = "floe_value_scale";
/// `floe_scale_max(a, b)`: the larger of two display scales.
pub const SCALE_MAX: &str = "floe_scale_max";
/// `floe_numeric_text(x, scale)`: `x` printed at `scale` places, as
/// PostgreSQL prints a numeric of that display scale.
pub const NUMERIC_TEXT: &str = "floe_numeric_text";

/// `floe_item_type_scales(array, scale)`: an array of the shape of `array`
/// (of any dimensions) whose every item is `scale`, the display scale of its
/// items' type (NULL for an unconstrained numeric's).
pub const ITEM_TYPE_SCALES: &str = "floe_item_type_scales";

/// `floe_written_scales(text, dimensions)`: the display scales of the items
/// of an array of numerics of these dimensions written as `text`, as
/// written, in arrays of its shape; NULL where the text is no such array
/// (its cast's error is the query's).
pub const WRITTEN_SCALES: &str = "floe_written_scales";

/// PostgreSQL's `NUMERIC_MAX_DISPLAY_SCALE`.
const MAX_DISPLAY_SCALE: i64 = 1000;

pub(super) fn functions() -> Vec<ScalarUDF> {
    let immutable = Volatility::Immutable;
    vec![
        RowFunction::new(DIVISION_SCALE, immutable, scale_result, |row, _| {
            division_scale(row)
        })
        .udf(),
        RowFunction::new(MATH_SCALE, immutable, scale_result, |row, _| {
            math_scale(row)
        })
        .udf(),
        RowFunction::new(VALUE_SCALE, immutable, scale_result, |row, _| {
            let [value] = row else {
                return Err(QueryError::internal("floe_value_scale arity"));
            };
            Ok(scale_datum(exact(value)?.scale.into()))
        })
        .udf(),
        RowFunction::new(SCALE_MAX, immutable, scale_result, |row, _| {
            let scales = row.iter().map(scale_of).collect::<Result<Vec<_>, _>>()?;
            Ok(scale_datum(scales.into_iter().max().unwrap_or(0)))
        })
        .udf(),
        ScalarUDF::new_from_impl(NumericText {
            signature: Signature::any(2, immutable),
        }),
        RowFunction::new(WRITTEN_SCALES, immutable, written_scales_type, |row, _| {
            Ok(match row {
                [Datum::Text(text), dimensions] => {
                    written_scales(text, scale_of(dimensions)?).unwrap_or(Datum::Null)
                }
                _ => Datum::Null,
            })
        })
        .udf(),
        ScalarUDF::new_from_impl(ItemTypeScales {
            signature: Signature::any(2, immutable),
        }),
    ]
}

fn scale_result(_: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    Ok(SqlScalarType::Int32)
}

/// `int[]` of the dimensions `floe_written_scales` is given (a constant).
fn written_scales_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    let dimensions = match arguments.constants.get(1).copied().flatten() {
        Some(ScalarValue::Int32(Some(dimensions))) => *dimensions,
        Some(ScalarValue::Int64(Some(dimensions))) => i32::try_from(*dimensions).unwrap_or(1),
        _ => {
            return Err(QueryError::internal(
                "floe_written_scales needs its dimensions",
            ));
        }
    };
    Ok(array_of(SqlScalarType::Int32, dimensions))
}

/// `element` in arrays of `dimensions` dimensions.
pub fn array_of(element: SqlScalarType, dimensions: impl TryInto<usize>) -> SqlScalarType {
    let dimensions = dimensions.try_into().unwrap_or(1);
    (0..dimensions).fold(element, |ty, _| SqlScalarType::Array {
        element: Box::new(ty),
    })
}

/// The display scales of the items of an array of numerics of `dimensions`
/// written as `text`, as written, in arrays of its shape; `None` where the
/// text is no such array.
pub fn written_scales(text: &str, dimensions: impl TryInto<usize>) -> Option<Datum> {
    let numeric = SqlScalarType::Numeric {
        precision: None,
        max_scale: None,
    };
    let array = floe_repr::strconv::parse_datum(text, &array_of(numeric, dimensions)).ok()?;
    Some(scales_of(array))
}

/// The display scale of each numeric of a value, in arrays of its shape.
fn scales_of(value: Datum) -> Datum {
    match value {
        Datum::List(items) => Datum::List(items.into_iter().map(scales_of).collect()),
        value => floe_arrow::stored_scale(&value).map_or(Datum::Null, Datum::Int32),
    }
}

fn scale_datum(scale: i64) -> Datum {
    Datum::Int32(scale.clamp(0, MAX_DISPLAY_SCALE) as i32)
}

fn scale_of(datum: &Datum) -> Result<i64, QueryError> {
    match datum {
        Datum::Int16(n) => Ok(i64::from(*n)),
        Datum::Int32(n) => Ok(i64::from(*n)),
        Datum::Int64(n) => Ok(*n),
        _ => Err(QueryError::internal("a display scale is an integer")),
    }
}

/// An exact value as an unscaled `i128` and its scale, if it fits.
fn unscaled(value: &Exact) -> Result<(i128, i8), QueryError> {
    let digits = value
        .digits
        .to_i128()
        .ok_or_else(|| QueryError::internal("a numeric past 38 digits"))?;
    let scale = i8::try_from(value.scale).map_err(|_| QueryError::internal("a numeric scale"))?;
    Ok((digits, scale))
}

/// PostgreSQL's `select_div_scale` of the operands' values, at least either
/// operand's display scale.
fn division_scale(row: &[Datum]) -> Result<Datum, QueryError> {
    let [left, right, left_scale, right_scale] = row else {
        return Err(QueryError::internal("floe_division_scale arity"));
    };
    let (left, right) = (unscaled(&exact(left)?)?, unscaled(&exact(right)?)?);
    if right.0 == 0 {
        // The quotient itself is the error.
        return Ok(Datum::Null);
    }
    let scale = i64::from(super::numeric_division::postgres_scale(
        left.0, left.1, right.0, right.1,
    ))
    .max(scale_of(left_scale)?)
    .max(scale_of(right_scale)?);
    Ok(scale_datum(scale))
}

/// The display scale of a numeric function's result, its arguments read at
/// their display scales (the function's result scale depends on them).
fn math_scale(row: &[Datum]) -> Result<Datum, QueryError> {
    // An argument the function refuses is the value's error.
    Ok(super::numeric_math::scaled_result_scale(row)?
        .map_or(Datum::Null, |scale| scale_datum(scale.into())))
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct ItemTypeScales {
    signature: Signature,
}

impl ScalarUDFImpl for ItemTypeScales {
    fn name(&self) -> &str {
        ITEM_TYPE_SCALES
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(arg_types
            .first()
            .map_or(DataType::Int32, scales_of_shape_type))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let (scalar, length) = super::call_rows(&args);
        let [array, scale] = args.args.as_slice() else {
            return Err(QueryError::internal("floe_item_type_scales arity").into_datafusion());
        };
        let scale = match scale {
            ColumnarValue::Scalar(ScalarValue::Int32(scale)) => *scale,
            _ => None,
        };
        super::columnar(scales_of_shape(&array.to_array(length)?, scale), scalar)
    }
}

/// The type of the display scales of an array's items: arrays of `int` of
/// the array's dimensions.
pub fn scales_of_shape_type(data_type: &DataType) -> DataType {
    match data_type {
        DataType::List(item) => DataType::new_list(scales_of_shape_type(item.data_type()), true),
        _ => DataType::Int32,
    }
}

/// `array` with every item `scale`: its arrays' lengths and NULLs kept.
fn scales_of_shape(array: &ArrayRef, scale: Option<i32>) -> ArrayRef {
    let DataType::List(_) = array.data_type() else {
        return Arc::new(Int32Array::from(vec![scale; array.len()]));
    };
    let lists = array.as_list::<i32>();
    let items = scales_of_shape(lists.values(), scale);
    Arc::new(ListArray::new(
        Arc::new(Field::new_list_field(items.data_type().clone(), true)),
        lists.offsets().clone(),
        items,
        lists.nulls().cloned(),
    ))
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct NumericText {
    signature: Signature,
}

impl ScalarUDFImpl for NumericText {
    fn name(&self) -> &str {
        NUMERIC_TEXT
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(arg_types.first().map_or(DataType::Utf8, text_type))
    }

    /// The exact text, typed as an unconstrained numeric for clients (an
    /// array's items so).
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let types = super::argument_types(args.arg_fields);
        Ok(Arc::new(match self.return_type(&types)? {
            DataType::Utf8 => numeric_text_field(NUMERIC_TEXT),
            list => Field::new(NUMERIC_TEXT, list, true),
        }))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let (scalar, length) = super::call_rows(&args);
        let [value, scale] = args.args.as_slice() else {
            return Err(QueryError::internal("floe_numeric_text arity").into_datafusion());
        };
        let [value_field, scale_field] = args.arg_fields.as_slice() else {
            return Err(QueryError::internal("floe_numeric_text arity").into_datafusion());
        };
        let datums = |value: &ColumnarValue, field: &FieldRef| {
            floe_arrow::array_to_datums(&value.to_array(length)?, field)
                .map_err(|e| QueryError::from_value(e).into_datafusion())
        };
        let (values, scales) = (datums(value, value_field)?, datums(scale, scale_field)?);
        let texts = values
            .iter()
            .zip(&scales)
            .map(|(value, scale)| text_tree(value, scale))
            .collect::<Result<Vec<_>, _>>()
            .map_err(QueryError::into_datafusion)?;
        let array = texts_array(&texts, &text_type(value_field.data_type()))?;
        super::columnar(array, scalar)
    }
}

/// A field of numeric text, typed as an unconstrained numeric for clients.
fn numeric_text_field(name: &str) -> Field {
    floe_arrow::pg_field(name, PgType::Numeric, true)
}

/// The type of [`NUMERIC_TEXT`]'s answer for a value of `data_type`: text,
/// or arrays of it as deep as the value's (arrays of more dimensions).
fn text_type(data_type: &DataType) -> DataType {
    match data_type {
        DataType::List(item) => {
            let item = match item.data_type() {
                DataType::List(_) => Field::new("item", text_type(item.data_type()), true),
                _ => numeric_text_field("item"),
            };
            DataType::List(Arc::new(item))
        }
        _ => DataType::Utf8,
    }
}

/// A value's text at its display scale, an array's items' each at theirs
/// (`scale` a list as long as the array, of the same shape; an item without
/// one as floe prints it): texts in lists of the value's shape.
fn text_tree(value: &Datum, scale: &Datum) -> Result<Datum, QueryError> {
    let Datum::List(items) = value else {
        return Ok(text_at(value, scale)?.map_or(Datum::Null, Datum::Text));
    };
    let scales = match scale {
        Datum::List(scales) if scales.len() == items.len() => scales.as_slice(),
        _ => &[],
    };
    items
        .iter()
        .enumerate()
        .map(|(index, item)| text_tree(item, scales.get(index).unwrap_or(&Datum::Null)))
        .collect::<Result<Vec<_>, _>>()
        .map(Datum::List)
}

/// An Arrow array of `data_type` (a [`text_type`]) holding texts in lists
/// ([`text_tree`]s).
fn texts_array(texts: &[Datum], data_type: &DataType) -> DfResult<ArrayRef> {
    let DataType::List(item) = data_type else {
        let text = |datum: &Datum| match datum {
            Datum::Text(text) => Some(text.clone()),
            _ => None,
        };
        return Ok(Arc::new(StringArray::from_iter(texts.iter().map(text))));
    };
    let mut lengths = Vec::with_capacity(texts.len());
    let mut valid = Vec::with_capacity(texts.len());
    let mut items = Vec::new();
    for text in texts {
        let list = match text {
            Datum::List(list) => Some(list),
            _ => None,
        };
        lengths.push(list.map_or(0, Vec::len));
        valid.push(list.is_some());
        items.extend(list.into_iter().flatten().cloned());
    }
    let values = texts_array(&items, item.data_type())?;
    Ok(Arc::new(ListArray::try_new(
        item.clone(),
        OffsetBuffer::from_lengths(lengths),
        values,
        Some(NullBuffer::from(valid)),
    )?))
}

/// A value's text at a display scale (as floe prints it without one).
fn text_at(value: &Datum, scale: &Datum) -> Result<Option<String>, QueryError> {
    match value {
        Datum::Null => return Ok(None),
        // A value the planner typed as a numeric before the analyzer made it
        // a float (the CASE of `case when c then 2 else 0.5::real end *
        // avg(x)` typed by its first result): a float prints as a float.
        Datum::Float32(_) | Datum::Float64(_) => return Ok(Some(floe_repr::format_datum(value))),
        _ => {}
    }
    let exact = exact(value)?;
    let places = match scale {
        Datum::Null => exact.scale,
        scale => u32::try_from(scale_of(scale)?.clamp(0, MAX_DISPLAY_SCALE)).unwrap_or(0),
    };
    Ok(Some(exact.rounded(places).to_text()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numeric(text: &str) -> Datum {
        Datum::Numeric(text.to_string())
    }

    #[test]
    fn quotient_scales_are_postgres() {
        // PostgreSQL 15: avg of 1 and 2 is 1.5000000000000000, of 100000 and
        // 200000 150000.000000000000, of 10000 and 10000 10000.0000000000000000.
        let scale = |l: &str, r: &str| {
            division_scale(&[numeric(l), numeric(r), Datum::Int32(0), Datum::Int32(0)]).unwrap()
        };
        assert_eq!(scale("3", "2"), Datum::Int32(16));
        assert_eq!(scale("300000", "2"), Datum::Int32(12));
        assert_eq!(scale("20000", "2"), Datum::Int32(16));
        assert_eq!(scale("1", "3"), Datum::Int32(20));
    }

    #[test]
    fn values_print_at_their_scale() {
        assert_eq!(
            text_at(&numeric("1.5"), &Datum::Int32(16))
                .unwrap()
                .unwrap(),
            "1.5000000000000000"
        );
        assert_eq!(
            text_at(&numeric("-0.125"), &Datum::Int32(2))
                .unwrap()
                .unwrap(),
            "-0.13"
        );
        assert_eq!(text_at(&numeric("7"), &Datum::Null).unwrap().unwrap(), "7");
    }

    #[test]
    fn written_scales_are_each_item_as_written_in_its_shape() {
        let scales = |text: &str, dimensions: usize| written_scales(text, dimensions);
        assert_eq!(
            scales("{1.50,NULL,-3}", 1),
            Some(Datum::List(vec![
                Datum::Int32(2),
                Datum::Null,
                Datum::Int32(0)
            ]))
        );
        assert_eq!(
            scales("{{2.0},{4.125}}", 2),
            Some(Datum::List(vec![
                Datum::List(vec![Datum::Int32(1)]),
                Datum::List(vec![Datum::Int32(3)]),
            ]))
        );
        assert_eq!(scales("{1.50,x}", 1), None);
    }
}
