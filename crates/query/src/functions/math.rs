//! Postgres' numeric functions DataFusion lacks or computes its own way: `sign`,
//! `width_bucket`, `^` of doubles with Postgres' errors ([`POWER`]), and
//! `floor`, `ceil` and `round` ([`FLOOR`], [`CEIL`], [`ROUND`]): of a numeric an
//! exact numeric (DataFusion's answer a double), of anything else a double,
//! `round` of a double to even (as C's `rint`; DataFusion's rounds half away
//! from zero). `crate::rewrite` calls these for Postgres' names, so the SQL
//! planner types the call as Postgres does.
//! (`mod` and `div` are rewritten into `%` and a truncated division, which
//! already have Postgres' semantics; see `crate::rewrite`.)

use datafusion::logical_expr::{ScalarUDF, Volatility};
use floe_repr::{Datum, SqlScalarType, SqlState};

use super::{Arguments, RowFunction, expect_arguments};
use crate::error::QueryError;

/// `x ^ y` of doubles: Postgres' errors where DataFusion's `power` answers NaN
/// or infinity.
pub const POWER: &str = "floe_power";

/// `#` of integers.
pub const BITWISE_XOR: &str = "floe_bitwise_xor";
pub const FLOOR: &str = "floe_floor";
pub const CEIL: &str = "floe_ceil";
pub const ROUND: &str = "floe_round";

pub(super) fn functions() -> Vec<ScalarUDF> {
    let immutable = Volatility::Immutable;
    vec![
        RowFunction::new("scale", immutable, scale_result, |row, _| {
            Ok(fraction_digits(&row[0], false))
        })
        .udf(),
        RowFunction::new("min_scale", immutable, scale_result, |row, _| {
            Ok(fraction_digits(&row[0], true))
        })
        .udf(),
        RowFunction::new("trim_scale", immutable, trim_scale_result, |row, _| {
            Ok(match &row[0] {
                Datum::Numeric(text) => Datum::Numeric(trimmed(text).to_string()),
                other => other.clone(),
            })
        })
        .udf(),
        RowFunction::new(BITWISE_XOR, immutable, xor_result, |row, ty| {
            bitwise_xor(&row[0], &row[1], ty)
        })
        .udf(),
        RowFunction::new(FLOOR, immutable, integral_result, |row, _| match &row[0] {
            Datum::Numeric(text) => Ok(integral(text, Direction::Down)),
            other => Ok(Datum::Float64(as_double(other)?.floor())),
        })
        .udf(),
        RowFunction::new(CEIL, immutable, integral_result, |row, _| match &row[0] {
            Datum::Numeric(text) => Ok(integral(text, Direction::Up)),
            other => Ok(Datum::Float64(as_double(other)?.ceil())),
        })
        .udf(),
        RowFunction::new(ROUND, immutable, integral_result, |row, _| match &row[0] {
            Datum::Numeric(text) => Ok(integral(text, Direction::Nearest)),
            other => Ok(Datum::Float64(as_double(other)?.round_ties_even())),
        })
        .udf(),
        RowFunction::new(POWER, immutable, power_result, |row, _| {
            power(as_double(&row[0])?, as_double(&row[1])?).map(Datum::Float64)
        })
        .udf(),
        RowFunction::new("sign", immutable, sign_result, |row, ty| sign(&row[0], ty)).udf(),
        RowFunction::new("cbrt", immutable, cbrt_result, |row, _| {
            Ok(Datum::Float64(cbrt(as_double(&row[0])?)))
        })
        .udf(),
        RowFunction::new("width_bucket", immutable, bucket_result, |row, _| {
            width_bucket(&row[0], &row[1], &row[2], &row[3])
        })
        .udf(),
    ]
}

/// `sign` of a float is a double precision; of anything else a numeric of
/// scale 0 (PostgreSQL's is -1, 0 or 1 at display scale 0, so `sign(x) * 1.50`
/// prints 1.50).
fn sign_result(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    expect_arguments("sign", arguments, &[1])?;
    numbers("sign", arguments)?;
    Ok(match arguments.types[0] {
        SqlScalarType::Float32 | SqlScalarType::Float64 => SqlScalarType::Float64,
        _ => SqlScalarType::Numeric {
            precision: None,
            max_scale: Some(0),
        },
    })
}

fn sign(value: &Datum, ty: &SqlScalarType) -> Result<Datum, QueryError> {
    let value = as_double(value)?;
    let sign = if value > 0.0 {
        1.0
    } else if value < 0.0 {
        -1.0
    } else {
        0.0
    };
    Ok(match ty {
        SqlScalarType::Float64 => Datum::Float64(sign),
        _ => Datum::Numeric(format!("{sign}")),
    })
}

/// `floor`, `ceil` and `round` of a numeric are numerics of scale 0; of
/// anything else (an integer, a float) doubles, as Postgres resolves them.
fn integral_result(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    expect_arguments("floor", arguments, &[1])?;
    numbers("floor", arguments)?;
    Ok(match arguments.types[0] {
        SqlScalarType::Numeric { .. } => SqlScalarType::Numeric {
            precision: None,
            max_scale: Some(0),
        },
        _ => SqlScalarType::Float64,
    })
}

/// Which way a numeric's fraction is cut off.
#[derive(Clone, Copy)]
enum Direction {
    Down,
    Up,
    /// Half away from zero, as Postgres rounds a numeric.
    Nearest,
}

/// A numeric without its fraction, exactly: its integer digits, one more in
/// magnitude when the fraction is cut off away from zero.
fn integral(text: &str, direction: Direction) -> Datum {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    let whole = if whole.is_empty() { "0" } else { whole };
    let cut = fraction.bytes().any(|b| b != b'0');
    let away = match direction {
        Direction::Down => cut && negative,
        Direction::Up => cut && !negative,
        Direction::Nearest => fraction.bytes().next().is_some_and(|b| b >= b'5'),
    };
    let magnitude = if away {
        increment(whole)
    } else {
        whole.to_string()
    };
    let zero = magnitude.bytes().all(|b| b == b'0');
    Datum::Numeric(if negative && !zero {
        format!("-{magnitude}")
    } else {
        magnitude
    })
}

/// A decimal digit string plus one.
fn increment(digits: &str) -> String {
    let mut bytes = digits.as_bytes().to_vec();
    for byte in bytes.iter_mut().rev() {
        if *byte == b'9' {
            *byte = b'0';
        } else {
            *byte += 1;
            return String::from_utf8(bytes).unwrap_or_default();
        }
    }
    format!("1{}", String::from_utf8(bytes).unwrap_or_default())
}

/// `#` of two integers is of the wider one's type; Postgres has no `#` of other
/// types.
fn xor_result(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    use SqlScalarType as S;
    let width = |ty: &SqlScalarType| match ty {
        S::Int16 => Some(2),
        S::Int32 => Some(4),
        S::Int64 => Some(8),
        _ => None,
    };
    let [left, right] = arguments.types.as_slice() else {
        return Err(super::no_such_function("#", &arguments.types));
    };
    match (width(left), width(right)) {
        (Some(l), Some(r)) => Ok(match l.max(r) {
            2 => S::Int16,
            4 => S::Int32,
            _ => S::Int64,
        }),
        _ => Err(QueryError::new(
            SqlState::UNDEFINED_FUNCTION,
            format!("operator does not exist: {left} # {right}"),
        )
        .with_hint(
            "No operator matches the given name and argument types. You might need to add explicit type casts.",
        )),
    }
}

fn bitwise_xor(left: &Datum, right: &Datum, ty: &SqlScalarType) -> Result<Datum, QueryError> {
    let integer = |datum: &Datum| match datum {
        Datum::Int16(n) => Ok(i64::from(*n)),
        Datum::Int32(n) => Ok(i64::from(*n)),
        Datum::Int64(n) => Ok(*n),
        _ => Err(QueryError::internal("an integer was expected")),
    };
    let xor = integer(left)? ^ integer(right)?;
    // Both fit the wider type, so their exclusive or does.
    Ok(match ty {
        SqlScalarType::Int16 => Datum::Int16(xor as i16),
        SqlScalarType::Int32 => Datum::Int32(xor as i32),
        _ => Datum::Int64(xor),
    })
}

fn power_result(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    expect_arguments("power", arguments, &[2])?;
    numbers("power", arguments)?;
    Ok(SqlScalarType::Float64)
}

fn cbrt_result(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    expect_arguments("cbrt", arguments, &[1])?;
    numbers("cbrt", arguments)?;
    Ok(SqlScalarType::Float64)
}

/// The cube root as PostgreSQL's `dcbrt` answers it on glibc, whose `cbrt`
/// is not correctly rounded (`cbrt(27)` is 3.0000000000000004): glibc's
/// polynomial estimate and one Halley step, where Rust's `f64::cbrt` gives 3.
pub(super) fn cbrt(x: f64) -> f64 {
    const CBRT2: f64 = 1.259_921_049_894_873_2;
    const SQUARED_CBRT2: f64 = 1.587_401_051_968_199_5;
    const FACTORS: [f64; 5] = [1.0 / SQUARED_CBRT2, 1.0 / CBRT2, 1.0, CBRT2, SQUARED_CBRT2];
    if x == 0.0 || !x.is_finite() {
        return x + x;
    }
    let (xm, xe) = frexp(x.abs());
    let u = 0.354_895_765_043_919_86
        + (1.508_191_937_815_849
            + (-2.114_994_941_673_713
                + (2.446_931_225_635_344_3
                    + (-1.834_692_774_836_130_9
                        + (0.784_932_344_976_639_3 - 0.145_263_899_385_486_38 * xm) * xm)
                        * xm)
                    * xm)
                * xm)
            * xm;
    let t2 = u * u * u;
    // C's `%` and `/` truncate toward zero.
    let factor = FACTORS[(2 + xe % 3) as usize];
    let ym = u * (t2 + 2.0 * xm) / (2.0 * t2 + xm) * factor;
    let root = ym * 2f64.powi(xe / 3);
    if x > 0.0 { root } else { -root }
}

/// `x` as a fraction in [0.5, 1) and a power of two (C's `frexp`), for a
/// finite nonzero `x`.
fn frexp(x: f64) -> (f64, i32) {
    let bits = x.to_bits();
    let exponent = ((bits >> 52) & 0x7ff) as i32;
    if exponent == 0 {
        // Subnormal: scale into the normal range first.
        let (fraction, power) = frexp(x * 2f64.powi(64));
        return (fraction, power - 64);
    }
    let fraction = f64::from_bits((bits & !(0x7ff << 52)) | (1022 << 52));
    (fraction, exponent - 1022)
}

/// Postgres' `dpow`.
pub(super) fn power(base: f64, exponent: f64) -> Result<f64, QueryError> {
    let power_error =
        |message| QueryError::new(SqlState::INVALID_ARGUMENT_FOR_POWER_FUNCTION, message);
    if base == 0.0 && exponent < 0.0 {
        return Err(power_error("zero raised to a negative power is undefined"));
    }
    if base < 0.0 && exponent.is_finite() && exponent.fract() != 0.0 {
        return Err(power_error(
            "a negative number raised to a non-integer power yields a complex result",
        ));
    }
    let result = base.powf(exponent);
    if result.is_infinite() && base.is_finite() && exponent.is_finite() {
        return Err(QueryError::new(
            SqlState::NUMERIC_VALUE_OUT_OF_RANGE,
            "value out of range: overflow",
        ));
    }
    if result == 0.0 && base != 0.0 && base.is_finite() && exponent.is_finite() {
        return Err(QueryError::new(
            SqlState::NUMERIC_VALUE_OUT_OF_RANGE,
            "value out of range: underflow",
        ));
    }
    Ok(result)
}

fn bucket_result(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    expect_arguments("width_bucket", arguments, &[4])?;
    numbers("width_bucket", arguments)?;
    Ok(SqlScalarType::Int32)
}

/// The bucket `operand` falls in of `count` equal-width buckets from `low` to
/// `high` (either way round): 0 below the range, `count + 1` above it.
fn width_bucket(
    operand: &Datum,
    low: &Datum,
    high: &Datum,
    count: &Datum,
) -> Result<Datum, QueryError> {
    let (operand, low, high) = (as_double(operand)?, as_double(low)?, as_double(high)?);
    let count = match count {
        Datum::Int16(n) => i32::from(*n),
        Datum::Int32(n) => *n,
        Datum::Int64(n) => i32::try_from(*n).map_err(|_| out_of_range())?,
        _ => {
            return Err(QueryError::new(
                SqlState::UNDEFINED_FUNCTION,
                "width_bucket's count must be an integer",
            ));
        }
    };
    if count <= 0 {
        return Err(bucket_error("count must be greater than zero"));
    }
    if low == high {
        return Err(bucket_error("lower bound cannot equal upper bound"));
    }
    if !operand.is_finite() || !low.is_finite() || !high.is_finite() {
        return Err(bucket_error(
            "operand, lower bound, and upper bound cannot be NaN or infinity",
        ));
    }
    let buckets = f64::from(count);
    // The fraction of the range below the operand, in the range's direction.
    let (below, width) = if low < high {
        (operand - low, high - low)
    } else {
        (low - operand, low - high)
    };
    let bucket = if below < 0.0 {
        0.0
    } else if below >= width {
        buckets + 1.0
    } else {
        // Rounding never puts an operand inside the range past the last bucket.
        ((below / width * buckets).floor() + 1.0).min(buckets)
    };
    Ok(Datum::Int32(bucket as i32))
}

/// A number as a double, for the functions whose result needs no more (and
/// `interval * number`, a float8 factor in Postgres).
pub(super) fn as_double(value: &Datum) -> Result<f64, QueryError> {
    Ok(match value {
        Datum::Int16(n) => f64::from(*n),
        Datum::Int32(n) => f64::from(*n),
        Datum::Int64(n) => *n as f64,
        Datum::UInt16(n) => f64::from(*n),
        Datum::UInt32(n) => f64::from(*n),
        Datum::UInt64(n) => *n as f64,
        Datum::Float32(n) => f64::from(*n),
        Datum::Float64(n) => *n,
        Datum::Numeric(text) => {
            floe_repr::strconv::parse_float64(text).map_err(QueryError::from_value)?
        }
        // The result rules admit numbers only.
        _ => return Err(QueryError::internal("a number was expected")),
    })
}

/// The call's arguments are all numbers, or no function matches it.
fn numbers(name: &str, arguments: &Arguments<'_>) -> Result<(), QueryError> {
    use SqlScalarType as S;
    let number = |ty: &SqlScalarType| {
        matches!(
            ty,
            S::Int16
                | S::Int32
                | S::Int64
                | S::UInt16
                | S::UInt32
                | S::UInt64
                | S::Float32
                | S::Float64
                | S::Numeric { .. }
        )
    };
    if arguments.types.iter().all(number) {
        Ok(())
    } else {
        Err(super::no_such_function(name, &arguments.types))
    }
}

fn bucket_error(message: &str) -> QueryError {
    QueryError::new(SqlState::INVALID_ARGUMENT_FOR_WIDTH_BUCKET, message)
}

fn out_of_range() -> QueryError {
    QueryError::new(SqlState::NUMERIC_VALUE_OUT_OF_RANGE, "integer out of range")
}

fn scale_result(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    trim_scale_result(arguments)?;
    Ok(SqlScalarType::Int32)
}

/// `scale`, `min_scale` and `trim_scale` take a numeric (an integer is read
/// as one).
fn trim_scale_result(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    let fits = matches!(
        arguments.types.as_slice(),
        [SqlScalarType::Numeric { .. }
            | SqlScalarType::Int16
            | SqlScalarType::Int32
            | SqlScalarType::Int64]
    );
    if !fits {
        return Err(super::no_such_function(
            arguments.function,
            &arguments.types,
        ));
    }
    Ok(SqlScalarType::Numeric {
        precision: None,
        max_scale: None,
    })
}

/// A numeric's text without trailing fraction zeros (nor a bare point).
fn trimmed(text: &str) -> &str {
    if !text.contains('.') {
        return text;
    }
    text.trim_end_matches('0').trim_end_matches('.')
}

/// How many digits a numeric has after its point (`min_scale`: without
/// trailing zeros); NULL for NaN.
fn fraction_digits(value: &Datum, minimum: bool) -> Datum {
    let Datum::Numeric(text) = value else {
        return Datum::Int32(0);
    };
    if text.eq_ignore_ascii_case("nan") {
        return Datum::Null;
    }
    let text = if minimum {
        trimmed(text)
    } else {
        text.as_str()
    };
    let digits = text
        .split_once('.')
        .map_or(0, |(_, fraction)| fraction.len());
    Datum::Int32(i32::try_from(digits).unwrap_or(i32::MAX))
}

#[cfg(test)]
mod cbrt_tests {
    /// PostgreSQL 15 on glibc.
    #[test]
    fn cube_roots_are_glibc_s() {
        assert_eq!(super::cbrt(27.0).to_string(), "3.0000000000000004");
        assert_eq!(super::cbrt(-27.0).to_string(), "-3.0000000000000004");
        assert_eq!(super::cbrt(8.0).to_string(), "2");
        assert_eq!(super::cbrt(2.0).to_string(), "1.2599210498948734");
        assert_eq!(super::cbrt(1e300), 1e100);
        assert_eq!(super::cbrt(0.001).to_string(), "0.1");
        assert_eq!(super::cbrt(0.0).to_string(), "0");
    }
}
