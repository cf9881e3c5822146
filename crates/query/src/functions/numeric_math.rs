//! `sqrt`, `exp`, `ln`, `log`, `log10` and `power` (`pow`, `^`) as
//! PostgreSQL resolves and computes them.
//!
//! Of a numeric (with no float argument) PostgreSQL answers a numeric it
//! computes exactly, at a result scale of its own rules (`numeric_sqrt`,
//! `numeric_exp`, `numeric_ln`, `log_var`, `power_var`: 16 significant digits
//! of an estimate of the result, at least the arguments' scales); DataFusion
//! answered a double. Of integers and floats PostgreSQL answers a double,
//! with its errors (`ln(0)`, `sqrt(-1)`, overflow) where the C library answers
//! infinity or NaN. `log(b, x)` exists for numerics only.
//!
//! A numeric result is held as a quotient is ([`super::numeric_division`]): in
//! a decimal column of [`SCALE`] places ([`POWER_SCALE`] for `power`, whose
//! results are larger), typed as an unconstrained numeric, except a power of
//! an integer exponent, whose scale is known before its values (see
//! `MathFunction::numeric_field`); a result past the column's 38 digits is an
//! error (22003) where PostgreSQL answers.

pub(super) mod exact;

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Decimal128Array, Float64Array};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::Result as DfResult;
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use floe_repr::{Datum, SqlScalarType, SqlState};
use num_traits::{Signed, ToPrimitive, Zero};

use exact::Exact;

use crate::error::QueryError;

/// The places of a numeric result's column (a quotient's).
const SCALE: u32 = 20;
/// The places of a numeric power's column: PostgreSQL's scale of a power of
/// an integer exponent, which leaves 22 digits before the point (2^64).
const POWER_SCALE: u32 = 16;
const PRECISION: u8 = 38;
/// PostgreSQL's `NUMERIC_MIN_SIG_DIGITS`.
const SIGNIFICANT: i64 = 16;
/// PostgreSQL's `NUMERIC_MAX_DISPLAY_SCALE`.
const MAX_DISPLAY_SCALE: i64 = 1000;
/// Powers of ten past which a result cannot fit a result column.
const LARGEST: f64 = 40.0;
/// Powers of ten below which a result rounds to zero in any result column.
const SMALLEST: f64 = -60.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Sqrt,
    Exp,
    Ln,
    Log,
    Power,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct MathFunction {
    name: &'static str,
    kind: Kind,
    signature: Signature,
}

/// `floe_numeric_math(name, arg..., scale...)`: the numeric function `name`
/// of arguments read at these display scales (a quotient's
/// `0.20000000000000000000` where its column holds 0.2), in the column the
/// function's result has (see [`crate::display_scale`]).
pub const NUMERIC_MATH: &str = "floe_numeric_math";

#[derive(Debug, PartialEq, Eq, Hash)]
struct ScaledMath {
    signature: Signature,
}

impl ScalarUDFImpl for ScaledMath {
    fn name(&self) -> &str {
        NUMERIC_MATH
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Err(QueryError::internal("floe_numeric_math is typed by its fields").into_datafusion())
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let power = matches!(
            args.scalar_arguments.first().copied().flatten(),
            Some(datafusion::common::ScalarValue::Utf8(Some(name))) if name == "power" || name == "pow"
        );
        let scale = if power { POWER_SCALE } else { SCALE };
        Ok(Arc::new(floe_arrow::computed_numeric_field(
            NUMERIC_MATH,
            PRECISION,
            scale as i8,
        )))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let (scalar, length, columns) = super::argument_datums(&args)?;
        let scale = match args.return_field.data_type() {
            DataType::Decimal128(_, scale) => (*scale).max(0) as u32,
            _ => return Err(QueryError::internal("a numeric result column").into_datafusion()),
        };
        let values = (0..length)
            .map(|index| {
                let row: Vec<Datum> = columns
                    .iter()
                    .map(|column| column.get(index).cloned().unwrap_or(Datum::Null))
                    .collect();
                scaled_math_row(&row, scale)
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(QueryError::into_datafusion)?;
        let array: ArrayRef = Arc::new(
            Decimal128Array::from(values)
                .with_precision_and_scale(PRECISION, scale as i8)
                .map_err(|e| QueryError::internal(e.to_string()).into_datafusion())?,
        );
        super::columnar(array, scalar)
    }
}

/// The arguments of `floe_numeric_math`'s row at their display scales.
fn scaled_arguments(row: &[Datum]) -> Result<Option<(Kind, Vec<Exact>)>, QueryError> {
    let Some((Datum::Text(name), rest)) = row.split_first() else {
        return Err(QueryError::internal("a numeric function's name"));
    };
    let kind = match name.as_str() {
        "sqrt" => Kind::Sqrt,
        "exp" => Kind::Exp,
        "ln" => Kind::Ln,
        "log" | "log10" => Kind::Log,
        "power" | "pow" => Kind::Power,
        _ => return Err(QueryError::internal(format!("no numeric function {name}"))),
    };
    if rest.iter().any(|d| matches!(d, Datum::Null)) {
        return Ok(None);
    }
    let (values, scales) = rest.split_at(rest.len() / 2);
    let mut args = Vec::with_capacity(values.len());
    for (value, scale) in values.iter().zip(scales) {
        let places = match scale {
            Datum::Int32(n) => u32::try_from(*n).unwrap_or(0).min(MAX_DISPLAY_SCALE as u32),
            _ => 0,
        };
        let value = exact(value)?;
        let at = places.max(value.scale);
        args.push(value.rounded(at));
    }
    Ok(Some((kind, args)))
}

fn scaled_math_row(row: &[Datum], scale: u32) -> Result<Option<i128>, QueryError> {
    let Some((kind, args)) = scaled_arguments(row)? else {
        return Ok(None);
    };
    let digits = numeric_result(kind, &args)?.rounded(scale).digits;
    if digits.abs() >= exact::ten_to(u32::from(PRECISION)) {
        return Err(overflow());
    }
    digits.to_i128().map(Some).ok_or_else(overflow)
}

/// The display scale of `floe_numeric_math`'s row (NULL where the value is
/// NULL or an error).
pub(super) fn scaled_result_scale(row: &[Datum]) -> Result<Option<u32>, QueryError> {
    let Some((kind, args)) = scaled_arguments(row)? else {
        return Ok(None);
    };
    Ok(numeric_result(kind, &args).ok().map(|result| result.scale))
}

pub(super) fn functions() -> Vec<ScalarUDF> {
    std::iter::once(ScalarUDF::new_from_impl(ScaledMath {
        signature: Signature::variadic_any(Volatility::Immutable),
    }))
    .chain(
        [
            ("sqrt", Kind::Sqrt),
            ("exp", Kind::Exp),
            ("ln", Kind::Ln),
            ("log", Kind::Log),
            ("log10", Kind::Log),
            ("power", Kind::Power),
            ("pow", Kind::Power),
        ]
        .into_iter()
        .map(|(name, kind)| {
            ScalarUDF::new_from_impl(MathFunction {
                name,
                kind,
                signature: Signature::variadic_any(Volatility::Immutable),
            })
        }),
    )
    .collect()
}

impl MathFunction {
    fn arities(&self) -> &'static [usize] {
        match (self.kind, self.name) {
            (Kind::Log, "log") => &[1, 2],
            (Kind::Power, _) => &[2],
            _ => &[1],
        }
    }

    /// Whether the call is the numeric function (else the double one), or no
    /// function matches it.
    fn is_numeric(&self, fields: &[FieldRef]) -> Result<bool, QueryError> {
        let types: Vec<SqlScalarType> = fields.iter().map(|f| super::sql_type(f)).collect();
        let unmatched = || super::no_such_function(self.name, &types);
        if !self.arities().contains(&fields.len()) {
            return Err(unmatched());
        }
        let mut numeric = self.kind == Kind::Log && fields.len() == 2;
        let mut float = false;
        for (field, ty) in fields.iter().zip(&types) {
            match ty {
                _ if field.data_type() == &DataType::Null => {}
                SqlScalarType::Numeric { .. } => numeric = true,
                SqlScalarType::Float32 | SqlScalarType::Float64 => float = true,
                SqlScalarType::Int16
                | SqlScalarType::Int32
                | SqlScalarType::Int64
                | SqlScalarType::UInt16
                | SqlScalarType::UInt32
                | SqlScalarType::UInt64 => {}
                _ => return Err(unmatched()),
            }
        }
        // A float with a numeric is the double function (a numeric casts to
        // a double implicitly, not back); `log(b, x)` has no double form.
        if float && self.kind == Kind::Log && fields.len() == 2 {
            return Err(unmatched());
        }
        Ok(numeric && !float)
    }

    /// The numeric result's field. A power of an integer exponent has
    /// PostgreSQL's scale whatever the values (16 places, or the base's
    /// scale when more), so its column is typed by it and prints all of it
    /// (`1024.0000000000000000`); any other result is held at the column
    /// scale of its kind and prints as an unconstrained numeric.
    fn numeric_field(&self, fields: &[FieldRef]) -> Field {
        if let [base, exponent] = fields
            && self.kind == Kind::Power
            && super::arithmetic::is_integer(exponent.data_type())
        {
            let base_scale = match (base.data_type(), super::numeric_display::is_bare(base)) {
                (DataType::Decimal128(_, scale), false) => (*scale).max(0) as u32,
                _ => 0,
            };
            let scale = POWER_SCALE.max(base_scale).min(u32::from(PRECISION));
            return Field::new(
                self.name,
                DataType::Decimal128(PRECISION, scale as i8),
                true,
            );
        }
        let scale = if self.kind == Kind::Power {
            POWER_SCALE
        } else {
            SCALE
        };
        floe_arrow::computed_numeric_field(self.name, PRECISION, scale as i8)
    }
}

impl ScalarUDFImpl for MathFunction {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Err(QueryError::internal(format!("{} is typed by its fields", self.name)).into_datafusion())
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let numeric = self
            .is_numeric(args.arg_fields)
            .map_err(QueryError::into_datafusion)?;
        Ok(Arc::new(if numeric {
            self.numeric_field(args.arg_fields)
        } else {
            Field::new(self.name, DataType::Float64, true)
        }))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let numeric = self
            .is_numeric(&args.arg_fields)
            .map_err(QueryError::into_datafusion)?;
        let (scalar, length, columns) = super::argument_datums(&args)?;
        let rows = (0..length).map(|index| {
            columns
                .iter()
                .map(|column| column.get(index).cloned().unwrap_or(Datum::Null))
                .collect::<Vec<_>>()
        });
        let array: ArrayRef = if numeric {
            let scale = match args.return_field.data_type() {
                DataType::Decimal128(_, scale) => (*scale).max(0) as u32,
                _ => return Err(QueryError::internal("a numeric result column").into_datafusion()),
            };
            let values = rows
                .map(|row| self.numeric_row(&row, scale))
                .collect::<Result<Vec<_>, _>>()
                .map_err(QueryError::into_datafusion)?;
            Arc::new(
                Decimal128Array::from(values)
                    .with_precision_and_scale(PRECISION, scale as i8)
                    .map_err(|e| QueryError::internal(e.to_string()).into_datafusion())?,
            )
        } else {
            let values = rows
                .map(|row| self.double_row(&row))
                .collect::<Result<Vec<_>, _>>()
                .map_err(QueryError::into_datafusion)?;
            Arc::new(Float64Array::from(values))
        };
        super::columnar(array, scalar)
    }
}

impl MathFunction {
    /// One row's numeric result at the column's `scale` (NULL of a NULL).
    fn numeric_row(&self, row: &[Datum], scale: u32) -> Result<Option<i128>, QueryError> {
        if row.iter().any(|d| matches!(d, Datum::Null)) {
            return Ok(None);
        }
        let args = row.iter().map(exact).collect::<Result<Vec<_>, _>>()?;
        let result = numeric_result(self.kind, &args)?;
        let digits = result.rounded(scale).digits;
        if digits.abs() >= exact::ten_to(u32::from(PRECISION)) {
            return Err(overflow());
        }
        digits.to_i128().map(Some).ok_or_else(overflow)
    }

    /// One row's double result (NULL of a NULL), with PostgreSQL's errors.
    fn double_row(&self, row: &[Datum]) -> Result<Option<f64>, QueryError> {
        if row.iter().any(|d| matches!(d, Datum::Null)) {
            return Ok(None);
        }
        let args = row
            .iter()
            .map(super::math::as_double)
            .collect::<Result<Vec<_>, _>>()?;
        let result = match (self.kind, args.as_slice()) {
            (Kind::Sqrt, [x]) if *x < 0.0 => return Err(negative_root()),
            (Kind::Sqrt, [x]) => x.sqrt(),
            (Kind::Exp, [x]) => double_exp(*x)?,
            (Kind::Ln, [x]) => logarithm_argument(*x)?.ln(),
            (Kind::Log, [x]) => logarithm_argument(*x)?.log10(),
            (Kind::Power, [x, y]) => super::math::power(*x, *y)?,
            _ => return Err(QueryError::internal("double function arity")),
        };
        Ok(Some(result))
    }
}

/// The numeric function of this kind of these arguments, at PostgreSQL's
/// result scale.
fn numeric_result(kind: Kind, args: &[Exact]) -> Result<Exact, QueryError> {
    Ok(match (kind, args) {
        (Kind::Sqrt, [x]) => sqrt(x)?,
        (Kind::Exp, [x]) => exp(x)?,
        (Kind::Ln, [x]) => ln(x)?,
        (Kind::Log, [x]) => log(&Exact::integer(10), x)?,
        (Kind::Log, [base, x]) => log(base, x)?,
        (Kind::Power, [x, y]) => power(x, y)?,
        _ => return Err(QueryError::internal("numeric function arity")),
    })
}

/// Whether `name` is one of the functions here.
pub(crate) fn is_math_function(name: &str) -> bool {
    matches!(
        name,
        "sqrt" | "exp" | "ln" | "log" | "log10" | "power" | "pow"
    )
}

/// A numeric or integer value, exactly (an integer is a numeric of scale 0).
pub(super) fn exact(datum: &Datum) -> Result<Exact, QueryError> {
    let integer = match datum {
        Datum::Numeric(text) => {
            return Exact::parse(text)
                .ok_or_else(|| QueryError::internal(format!("not a finite numeric: {text}")));
        }
        Datum::Int16(n) => i128::from(*n),
        Datum::Int32(n) => i128::from(*n),
        Datum::Int64(n) => i128::from(*n),
        Datum::UInt16(n) => i128::from(*n),
        Datum::UInt32(n) => i128::from(*n),
        Datum::UInt64(n) => i128::from(*n),
        _ => return Err(QueryError::internal("a numeric value was expected")),
    };
    Ok(Exact::integer(integer))
}

/// A result scale from PostgreSQL's estimate of its leading digit's power of
/// ten, at least each argument's scale.
fn result_scale(weight: i64, arguments: &[&Exact]) -> u32 {
    let scale = arguments
        .iter()
        .map(|a| i64::from(a.scale))
        .fold(SIGNIFICANT - weight, i64::max);
    scale.clamp(0, MAX_DISPLAY_SCALE) as u32
}

fn zero(scale: u32) -> Exact {
    Exact {
        digits: Zero::zero(),
        scale,
    }
}

fn sqrt(x: &Exact) -> Result<Exact, QueryError> {
    if x.is_negative() {
        return Err(negative_root());
    }
    // PostgreSQL's weight of the root in base-10000 digits.
    let weight = if x.is_zero() {
        0
    } else {
        x.exponent().div_euclid(4)
    };
    let root_weight = (weight + 1) * 2 - 1;
    Ok(exact::sqrt(x, result_scale(root_weight, &[x])))
}

fn exp(x: &Exact) -> Result<Exact, QueryError> {
    let weight = (x.to_f64() * std::f64::consts::LOG10_E).clamp(-2000.0, 2000.0);
    let scale = result_scale(weight as i64, &[x]);
    if weight > LARGEST {
        return Err(overflow());
    }
    if weight < SMALLEST {
        return Ok(zero(scale));
    }
    let working = scale + 60;
    let one = exact::ten_to(working);
    Ok(Exact {
        digits: exact::exp(&x.at(working), &one),
        scale: working,
    }
    .rounded(scale))
}

fn ln(x: &Exact) -> Result<Exact, QueryError> {
    logarithm_argument_of(x)?;
    let scale = result_scale(exact::ln_weight(x), &[x]);
    Ok(Exact {
        digits: exact::ln(x, scale + 4),
        scale: scale + 4,
    }
    .rounded(scale))
}

/// `log(base, x)`: `ln(x) / ln(base)`.
fn log(base: &Exact, x: &Exact) -> Result<Exact, QueryError> {
    logarithm_argument_of(base)?;
    logarithm_argument_of(x)?;
    let weight = exact::ln_weight(x) - exact::ln_weight(base);
    let scale = result_scale(weight, &[base, x]);
    let working = scale + 40;
    let ln_base = exact::ln(base, working);
    if ln_base.is_zero() {
        return Err(QueryError::new(
            SqlState::DIVISION_BY_ZERO,
            "division by zero",
        ));
    }
    let ln_x = exact::ln(x, working) * exact::ten_to(scale + 4);
    Ok(Exact {
        digits: exact::divide_rounded(&ln_x, &ln_base),
        scale: scale + 4,
    }
    .rounded(scale))
}

fn power(x: &Exact, y: &Exact) -> Result<Exact, QueryError> {
    if x.is_zero() && y.is_negative() {
        return Err(power_error("zero raised to a negative power is undefined"));
    }
    if y.is_integral()
        && let Some(n) = y.at(0).to_i32()
    {
        let scale = result_scale(0, &[x]);
        return integer_power(x, n, scale);
    }
    if x.is_zero() {
        return Ok(zero(SIGNIFICANT as u32));
    }
    if x.is_negative() && !y.is_integral() {
        return Err(power_error(
            "a negative number raised to a non-integer power yields a complex result",
        ));
    }
    general_power(x, y)
}

/// `x ^ n` of an integer `n`: exact where its digits are few, at
/// PostgreSQL's scale of 16 places (or `x`'s).
fn integer_power(x: &Exact, n: i32, scale: u32) -> Result<Exact, QueryError> {
    if n == 0 {
        return Ok(Exact {
            digits: exact::ten_to(scale),
            scale,
        });
    }
    if x.is_zero() {
        return Ok(zero(scale));
    }
    let weight = f64::from(n) * x.to_f64().abs().log10();
    if weight > LARGEST {
        return Err(overflow());
    }
    if weight < SMALLEST {
        return Ok(zero(scale));
    }
    let count = n.unsigned_abs();
    if u64::from(count) * u64::from(x.scale) > 600 {
        return general_power(x, &Exact::integer(i128::from(n)));
    }
    let raised = Exact {
        digits: x.digits.pow(count),
        scale: x.scale * count,
    };
    if n > 0 {
        return Ok(raised.rounded(scale));
    }
    let numerator = exact::ten_to(raised.scale + scale);
    Ok(Exact {
        digits: exact::divide_rounded(&numerator, &raised.digits),
        scale,
    })
}

/// `x ^ y` as `exp(y * ln |x|)` (negative for a negative `x` and an odd `y`),
/// at PostgreSQL's scale from a low-precision first estimate, as
/// `power_var` chooses it.
fn general_power(x: &Exact, y: &Exact) -> Result<Exact, QueryError> {
    let odd = y.is_integral() && (y.at(0) % 2u8) != Zero::zero();
    let negative = x.is_negative() && odd;
    let base = Exact {
        digits: x.digits.abs(),
        scale: x.scale,
    };
    let ln_weight = exact::ln_weight(&base);
    let rough = (8 - ln_weight).max(0) as u32;
    let ln_rough = Exact {
        digits: exact::ln(&base, rough + 4),
        scale: rough + 4,
    }
    .rounded(rough);
    let product = Exact {
        digits: ln_rough.digits * &y.digits,
        scale: rough + y.scale,
    }
    .rounded(rough);
    let weight = product.to_f64() * std::f64::consts::LOG10_E;
    if weight > LARGEST {
        return Err(overflow());
    }
    let scale = result_scale(weight as i64, &[x, y]);
    if weight < SMALLEST {
        return Ok(zero(scale));
    }
    let working = scale + 60;
    // |y| multiplies ln's error.
    let ln_scale = working + u32::try_from(y.exponent().max(0)).unwrap_or(0) + 1;
    let exponent = Exact {
        digits: exact::ln(&base, ln_scale) * &y.digits,
        scale: ln_scale + y.scale,
    }
    .at(working);
    let mut result = Exact {
        digits: exact::exp(&exponent, &exact::ten_to(working)),
        scale: working,
    }
    .rounded(scale);
    if negative {
        result.digits = -result.digits;
    }
    Ok(result)
}

/// The argument of a double logarithm, or PostgreSQL's error.
fn logarithm_argument(x: f64) -> Result<f64, QueryError> {
    if x == 0.0 {
        Err(log_error("cannot take logarithm of zero"))
    } else if x < 0.0 {
        Err(log_error("cannot take logarithm of a negative number"))
    } else {
        Ok(x)
    }
}

fn logarithm_argument_of(x: &Exact) -> Result<(), QueryError> {
    if x.is_zero() {
        Err(log_error("cannot take logarithm of zero"))
    } else if x.is_negative() {
        Err(log_error("cannot take logarithm of a negative number"))
    } else {
        Ok(())
    }
}

/// PostgreSQL's `dexp`.
fn double_exp(x: f64) -> Result<f64, QueryError> {
    let result = x.exp();
    if result.is_infinite() && x.is_finite() {
        Err(QueryError::new(
            SqlState::NUMERIC_VALUE_OUT_OF_RANGE,
            "value out of range: overflow",
        ))
    } else if result == 0.0 && x.is_finite() {
        Err(QueryError::new(
            SqlState::NUMERIC_VALUE_OUT_OF_RANGE,
            "value out of range: underflow",
        ))
    } else {
        Ok(result)
    }
}

fn log_error(message: &str) -> QueryError {
    QueryError::new(SqlState::INVALID_ARGUMENT_FOR_LOGARITHM, message)
}

fn power_error(message: &str) -> QueryError {
    QueryError::new(SqlState::INVALID_ARGUMENT_FOR_POWER_FUNCTION, message)
}

fn negative_root() -> QueryError {
    power_error("cannot take square root of a negative number")
}

fn overflow() -> QueryError {
    QueryError::new(
        SqlState::NUMERIC_VALUE_OUT_OF_RANGE,
        "value overflows numeric format",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(result: Result<Exact, QueryError>) -> String {
        result.unwrap().to_text()
    }

    fn n(text: &str) -> Exact {
        Exact::parse(text).unwrap()
    }

    #[test]
    fn results_are_postgres_digits() {
        // Each PostgreSQL 15's answer.
        assert_eq!(text(sqrt(&n("2"))), "1.414213562373095");
        assert_eq!(text(sqrt(&n("0"))), "0.000000000000000");
        assert_eq!(text(exp(&n("1"))), "2.7182818284590452");
        assert_eq!(text(exp(&n("-10"))), "0.00004539992976248485");
        assert_eq!(text(ln(&n("10"))), "2.3025850929940457");
        assert_eq!(text(ln(&n("1"))), "0.0000000000000000");
        assert_eq!(text(log(&n("10"), &n("100"))), "2.0000000000000000");
        assert_eq!(text(log(&n("2"), &n("8"))), "3.0000000000000000");
        assert_eq!(text(power(&n("2"), &n("10"))), "1024.0000000000000000");
        assert_eq!(text(power(&n("0.5"), &n("100"))), "0.0000000000000000");
        assert_eq!(text(power(&n("10"), &n("-3"))), "0.0010000000000000");
        assert_eq!(text(power(&n("-2"), &n("3"))), "-8.0000000000000000");
        assert_eq!(text(power(&n("0"), &n("0"))), "1.0000000000000000");
        assert_eq!(text(power(&n("1.05"), &n("10"))), "1.6288946267774414");
        assert_eq!(text(power(&n("2"), &n("1.5"))), "2.8284271247461901");
        assert_eq!(text(power(&n("2.0"), &n("0.5"))), "1.4142135623730950");
        assert_eq!(text(power(&n("1.5"), &n("2.5"))), "2.7556759606310754");
        assert_eq!(text(power(&n("100"), &n("1.5"))), "1000.0000000000000");
    }

    #[test]
    fn errors_are_postgres_errors() {
        let code = |r: Result<Exact, QueryError>| r.unwrap_err().code;
        assert_eq!(code(ln(&n("0"))), SqlState::INVALID_ARGUMENT_FOR_LOGARITHM);
        assert_eq!(code(ln(&n("-1"))), SqlState::INVALID_ARGUMENT_FOR_LOGARITHM);
        assert_eq!(
            code(sqrt(&n("-1"))),
            SqlState::INVALID_ARGUMENT_FOR_POWER_FUNCTION
        );
        assert_eq!(
            code(power(&n("0"), &n("-1"))),
            SqlState::INVALID_ARGUMENT_FOR_POWER_FUNCTION
        );
        assert_eq!(
            code(power(&n("-8"), &n("0.5"))),
            SqlState::INVALID_ARGUMENT_FOR_POWER_FUNCTION
        );
        assert_eq!(code(log(&n("1"), &n("10"))), SqlState::DIVISION_BY_ZERO);
        assert_eq!(
            code(exp(&n("100000"))),
            SqlState::NUMERIC_VALUE_OUT_OF_RANGE
        );
        assert_eq!(
            code(power(&n("10"), &n("100"))),
            SqlState::NUMERIC_VALUE_OUT_OF_RANGE
        );
    }
}
