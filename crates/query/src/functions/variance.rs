//! `variance`, `var_samp`, `var_pop`, `stddev`, `stddev_samp` and `stddev_pop`
//! as PostgreSQL computes them, in place of DataFusion's (a double for every
//! input, by Welford's method):
//!
//! - of integers and numerics, a numeric computed exactly from the count, the
//!   sum and the sum of squares (`numeric_stddev_internal`): the quotient
//!   `(N * Σx² - (Σx)²) / (N * (N - 1))` rounded at `select_div_scale`'s digits,
//!   its square root rounded at the same; held at [`SCALE`] places and printed
//!   without trailing zeros, as floe's quotients are;
//! - of floats, a double by the Youngs-Cramer sums PostgreSQL keeps
//!   (`float8_accum`), so the last digit is PostgreSQL's.
//!
//! A value's digits after the point (PostgreSQL's display scale) are its
//! column's scale, or for a bare numeric (held at ten places) the digits left
//! once trailing zeros go, as floe prints it.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Float64Array};
use datafusion::arrow::datatypes::{
    DataType, Decimal128Type, Field, FieldRef, Float64Type, Int64Type, i256,
};
use datafusion::common::{Result as DfResult, ScalarValue, plan_err};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::format_state_name;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Signature, Volatility,
};
use floe_repr::SqlState;

use crate::error::QueryError;

/// The places a numeric result is held at (those of floe's quotients).
const SCALE: i8 = 20;

/// Which statistic: of a sample or of the population, the variance or its root.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
struct Statistic {
    sample: bool,
    root: bool,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct PgVariance {
    name: &'static str,
    aliases: Vec<String>,
    statistic: Statistic,
    signature: Signature,
    /// Whether this is the statistic's display scale (an `int`) rather than
    /// its value: PostgreSQL's scale of a numeric statistic depends on the
    /// sums (see `crate::display_scale`).
    display_scale: bool,
}

/// The name of the aggregate of the display scale of the numeric statistic
/// `name` (`var_samp`, `stddev_pop`, ...).
pub fn display_scale_name(name: &str) -> Option<String> {
    matches!(name, "var_samp" | "var_pop" | "stddev" | "stddev_pop")
        .then(|| format!("floe_display_scale_of_{name}"))
}

/// The aggregates floe registers over DataFusion's of these names.
pub fn aggregates() -> Vec<AggregateUDF> {
    let aggregate = |name, aliases: &[&str], sample, root, display_scale| {
        AggregateUDF::new_from_impl(PgVariance {
            name,
            aliases: aliases.iter().map(|a| a.to_string()).collect(),
            statistic: Statistic { sample, root },
            signature: Signature::user_defined(Volatility::Immutable),
            display_scale,
        })
    };
    vec![
        aggregate("var_samp", &["var", "variance"], true, false, false),
        aggregate("var_pop", &[], false, false, false),
        aggregate("stddev", &["stddev_samp"], true, true, false),
        aggregate("stddev_pop", &[], false, true, false),
        aggregate("floe_display_scale_of_var_samp", &[], true, false, true),
        aggregate("floe_display_scale_of_var_pop", &[], false, false, true),
        aggregate("floe_display_scale_of_stddev", &[], true, true, true),
        aggregate("floe_display_scale_of_stddev_pop", &[], false, true, true),
    ]
}

/// Whether a value of this type is summed exactly (a numeric result).
fn is_exact(data_type: &DataType) -> bool {
    matches!(data_type, DataType::Int64 | DataType::Decimal128(..))
}

impl AggregateUDFImpl for PgVariance {
    fn name(&self) -> &str {
        self.name
    }

    fn aliases(&self) -> &[String] {
        &self.aliases
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> DfResult<Vec<DataType>> {
        use DataType as D;
        let [argument] = arg_types else {
            return plan_err!("function {} takes one argument", self.name);
        };
        Ok(vec![match argument {
            D::Int8 | D::Int16 | D::Int32 | D::Int64 | D::UInt8 | D::UInt16 | D::UInt32 => D::Int64,
            D::Decimal128(..) => argument.clone(),
            D::Decimal32(p, s) | D::Decimal64(p, s) => D::Decimal128(*p, *s),
            D::Null | D::Float16 | D::Float32 | D::Float64 => D::Float64,
            other => return plan_err!("function {}({other}) does not exist", self.name),
        }])
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        if self.display_scale {
            return Ok(DataType::Int32);
        }
        Ok(match arg_types.first() {
            Some(data_type) if is_exact(data_type) => {
                DataType::Decimal128(floe_arrow::NUMERIC_PRECISION, SCALE)
            }
            _ => DataType::Float64,
        })
    }

    fn return_field(&self, arg_fields: &[FieldRef]) -> DfResult<FieldRef> {
        if self.display_scale {
            return Ok(Arc::new(Field::new(self.name, DataType::Int32, true)));
        }
        let exact = arg_fields.first().is_some_and(|f| is_exact(f.data_type()));
        Ok(Arc::new(if exact {
            floe_arrow::computed_numeric_field(self.name, floe_arrow::NUMERIC_PRECISION, SCALE)
        } else {
            Field::new(self.name, DataType::Float64, true)
        }))
    }

    fn accumulator(&self, args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
        let field = args.expr_fields.first();
        let bare = field.is_some_and(|f| {
            matches!(
                floe_arrow::sql_type_of(f),
                Some(floe_repr::SqlScalarType::Numeric {
                    max_scale: None,
                    ..
                })
            )
        });
        let exact = field.is_some_and(|f| is_exact(f.data_type()));
        Ok(if exact {
            Box::new(ExactSums {
                statistic: self.statistic,
                bare,
                display_scale: self.display_scale,
                ..ExactSums::default()
            })
        } else {
            Box::new(FloatSums {
                statistic: self.statistic,
                ..FloatSums::default()
            })
        })
    }

    fn state_fields(&self, args: StateFieldsArgs) -> DfResult<Vec<FieldRef>> {
        let exact = args
            .input_fields
            .first()
            .is_some_and(|f| is_exact(f.data_type()));
        let field = |name: &str, data_type: DataType| {
            Arc::new(Field::new(
                format_state_name(args.name, name),
                data_type,
                true,
            ))
        };
        Ok(if exact {
            vec![
                field("count", DataType::Int64),
                field("scale", DataType::Int64),
                field("sum", DataType::Utf8),
                field("squares", DataType::Utf8),
            ]
        } else {
            vec![
                field("count", DataType::Float64),
                field("sum", DataType::Float64),
                field("squares", DataType::Float64),
            ]
        })
    }
}

fn overflow() -> datafusion::error::DataFusionError {
    QueryError::new(
        SqlState::NUMERIC_VALUE_OUT_OF_RANGE,
        "value overflows numeric format",
    )
    .into_datafusion()
}

fn ten_to(exponent: u32) -> DfResult<i256> {
    i256::from_i128(10)
        .checked_pow(exponent)
        .ok_or_else(overflow)
}

/// Exact sums of integers or numerics: the count, the sum and the sum of
/// squares, at `scale` and twice it.
#[derive(Debug, Default)]
struct ExactSums {
    statistic: Statistic,
    /// Whether the input is a bare numeric (its values' scales are their own).
    bare: bool,
    /// Whether to answer the statistic's display scale rather than its value.
    display_scale: bool,
    count: i64,
    scale: u32,
    sum: i256,
    squares: i256,
}

impl ExactSums {
    /// Raises the scale of the sums to `scale`.
    fn rescale(&mut self, scale: u32) -> DfResult<()> {
        if scale <= self.scale {
            return Ok(());
        }
        let shift = scale - self.scale;
        self.sum = self.sum.checked_mul(ten_to(shift)?).ok_or_else(overflow)?;
        self.squares = self
            .squares
            .checked_mul(ten_to(2 * shift)?)
            .ok_or_else(overflow)?;
        self.scale = scale;
        Ok(())
    }

    /// Adds a count and sums at `scale`.
    fn add(&mut self, count: i64, scale: u32, mut sum: i256, mut squares: i256) -> DfResult<()> {
        self.rescale(scale)?;
        let shift = self.scale - scale;
        sum = sum.checked_mul(ten_to(shift)?).ok_or_else(overflow)?;
        squares = squares
            .checked_mul(ten_to(2 * shift)?)
            .ok_or_else(overflow)?;
        self.count += count;
        self.sum = self.sum.checked_add(sum).ok_or_else(overflow)?;
        self.squares = self.squares.checked_add(squares).ok_or_else(overflow)?;
        Ok(())
    }

    /// Adds one value, unscaled at `scale` (a negative scale: its power of
    /// ten is a factor, `1e20` held as 1 at -20).
    fn add_value(&mut self, value: i128, scale: i32) -> DfResult<()> {
        let mut value = i256::from_i128(value);
        if scale < 0 {
            value = value
                .checked_mul(ten_to(scale.unsigned_abs())?)
                .ok_or_else(overflow)?;
        }
        let mut scale = scale.max(0).unsigned_abs();
        let ten = i256::from_i128(10);
        if self.bare {
            while scale > 0 && value % ten == i256::ZERO {
                value /= ten;
                scale -= 1;
            }
        }
        let square = value.checked_mul(value).ok_or_else(overflow)?;
        self.add(1, scale, value, square)
    }

    /// The variance's quotient of the sums, `n·Σx² − (Σx)²` over `n·n` (or `n·(n − 1)` for
    /// a sample), as `numeric_stddev_internal` forms it; `None` when there is no
    /// statistic (no rows, or one for a sample), a zero numerator for a zero variance.
    fn quotient(&self) -> DfResult<Option<(i256, i256)>> {
        if self.count == 0 || (self.statistic.sample && self.count == 1) {
            return Ok(None);
        }
        let n = i256::from_i128(i128::from(self.count));
        let numerator = n
            .checked_mul(self.squares)
            .and_then(|a| Some(a - self.sum.checked_mul(self.sum)?))
            .ok_or_else(overflow)?;
        if numerator <= i256::ZERO {
            return Ok(Some((i256::ZERO, i256::ONE)));
        }
        let other = if self.statistic.sample {
            n - i256::ONE
        } else {
            n
        };
        let denominator = n.checked_mul(other).ok_or_else(overflow)?;
        Ok(Some((numerator, denominator)))
    }

    /// PostgreSQL's display scale of [`Self::statistic`]: `select_div_scale`'s
    /// of the sums' quotient (0 for a zero variance).
    fn display_scale(&self) -> DfResult<Option<i32>> {
        let Some((numerator, denominator)) = self.quotient()? else {
            return Ok(None);
        };
        if numerator == i256::ZERO {
            return Ok(Some(0));
        }
        let scale = division_scale(numerator, 2 * self.scale, denominator);
        Ok(Some(i32::try_from(scale).unwrap_or(i32::MAX)))
    }

    /// PostgreSQL's `numeric_stddev_internal`, unscaled at [`SCALE`].
    fn statistic(&self) -> DfResult<Option<i128>> {
        let Some((numerator, denominator)) = self.quotient()? else {
            return Ok(None);
        };
        if numerator == i256::ZERO {
            return Ok(Some(0));
        }
        let numerator_scale = 2 * self.scale;
        let scale = division_scale(numerator, numerator_scale, denominator);
        // numerator / 10^numerator_scale / denominator, at `scale` places.
        let mut quotient = rounded_quotient(
            numerator.checked_mul(ten_to(scale)?).ok_or_else(overflow)?,
            denominator
                .checked_mul(ten_to(numerator_scale)?)
                .ok_or_else(overflow)?,
        );
        if self.statistic.root {
            quotient = rounded_root(quotient.checked_mul(ten_to(scale)?).ok_or_else(overflow)?);
        }
        let held = if scale <= SCALE as u32 {
            quotient
                .checked_mul(ten_to(SCALE as u32 - scale)?)
                .ok_or_else(overflow)?
        } else {
            rounded_quotient(quotient, ten_to(scale - SCALE as u32)?)
        };
        let limit = ten_to(u32::from(floe_arrow::NUMERIC_PRECISION))?;
        if held >= limit {
            return Err(overflow());
        }
        held.to_i128().map(Some).ok_or_else(overflow)
    }
}

/// `a / b` (both positive) rounded half up.
fn rounded_quotient(a: i256, b: i256) -> i256 {
    let quotient = a / b;
    if (a % b) * i256::from_i128(2) >= b {
        quotient + i256::ONE
    } else {
        quotient
    }
}

/// The square root of a positive integer, rounded half up.
fn rounded_root(value: i256) -> i256 {
    // Newton's method from above, down to the floor of the root.
    let mut root = value;
    let mut next = (root + i256::ONE) / i256::from_i128(2);
    while next < root {
        root = next;
        next = (root + value / root) / i256::from_i128(2);
    }
    // Up when value is past (root + 1/2)^2 = root^2 + root + 1/4.
    if value - root * root > root {
        root + i256::ONE
    } else {
        root
    }
}

/// A value's weight and first digit in base 10000, as PostgreSQL stores it.
fn weight_and_first_digit(value: i256, scale: u32) -> (i64, i64) {
    let digits = value.to_string().trim_start_matches('-').to_string();
    let exponent = digits.len() as i64 - 1 - i64::from(scale);
    let weight = exponent.div_euclid(4);
    // The digits of the first base-10000 group: those above 10000^weight,
    // zeros past the last digit included.
    let group = (exponent - 4 * weight + 1) as usize;
    let padded = format!("{digits:0<group$}");
    let first = padded[..group].parse().unwrap_or(0);
    (weight, first)
}

/// PostgreSQL's `select_div_scale` for `numerator` (at `scale`) divided by a
/// positive integer.
fn division_scale(numerator: i256, scale: u32, denominator: i256) -> u32 {
    let (weight1, first1) = weight_and_first_digit(numerator, scale);
    let (weight2, first2) = weight_and_first_digit(denominator, 0);
    let mut quotient_weight = weight1 - weight2;
    if first1 <= first2 {
        quotient_weight -= 1;
    }
    (16 - quotient_weight * 4)
        .max(i64::from(scale))
        .clamp(0, 1000) as u32
}

impl Accumulator for ExactSums {
    fn update_batch(&mut self, values: &[ArrayRef]) -> DfResult<()> {
        let Some(array) = values.first() else {
            return Ok(());
        };
        match array.data_type() {
            DataType::Int64 => {
                for value in array.as_primitive::<Int64Type>().iter().flatten() {
                    self.add_value(i128::from(value), 0)?;
                }
            }
            DataType::Decimal128(_, scale) => {
                for value in array.as_primitive::<Decimal128Type>().iter().flatten() {
                    self.add_value(value, i32::from(*scale))?;
                }
            }
            _ => {
                return Err(
                    QueryError::internal("variance of an unexpected type").into_datafusion()
                );
            }
        }
        Ok(())
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> DfResult<()> {
        let [counts, scales, sums, squares] = states else {
            return Err(QueryError::internal("variance state").into_datafusion());
        };
        let counts = counts.as_primitive::<Int64Type>();
        let scales = scales.as_primitive::<Int64Type>();
        let (sums, squares) = (sums.as_string::<i32>(), squares.as_string::<i32>());
        for row in 0..counts.len() {
            if counts.is_null(row) || counts.value(row) == 0 {
                continue;
            }
            let parse = |text: &str| {
                i256::from_string(text)
                    .ok_or_else(|| QueryError::internal("variance sum").into_datafusion())
            };
            self.add(
                counts.value(row),
                u32::try_from(scales.value(row)).unwrap_or(0),
                parse(sums.value(row))?,
                parse(squares.value(row))?,
            )?;
        }
        Ok(())
    }

    fn state(&mut self) -> DfResult<Vec<ScalarValue>> {
        Ok(vec![
            ScalarValue::Int64(Some(self.count)),
            ScalarValue::Int64(Some(i64::from(self.scale))),
            ScalarValue::Utf8(Some(self.sum.to_string())),
            ScalarValue::Utf8(Some(self.squares.to_string())),
        ])
    }

    fn evaluate(&mut self) -> DfResult<ScalarValue> {
        if self.display_scale {
            return Ok(ScalarValue::Int32(self.display_scale()?));
        }
        Ok(ScalarValue::Decimal128(
            self.statistic()?,
            floe_arrow::NUMERIC_PRECISION,
            SCALE,
        ))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
    }
}

/// PostgreSQL's sums of doubles (`float8_accum`): the count, the sum and the
/// sum of squared deviations, by Youngs and Cramer's update.
#[derive(Debug, Default)]
struct FloatSums {
    statistic: Statistic,
    count: f64,
    sum: f64,
    squares: f64,
}

impl FloatSums {
    fn add(&mut self, value: f64) {
        let previous = self.count;
        self.count += 1.0;
        self.sum += value;
        if previous > 0.0 {
            let deviation = value * self.count - self.sum;
            self.squares += deviation * deviation / (self.count * previous);
        } else if !value.is_finite() {
            self.squares = f64::NAN;
        }
    }

    /// PostgreSQL's `float8_combine`.
    fn merge(&mut self, count: f64, sum: f64, squares: f64) {
        if count == 0.0 {
            return;
        }
        if self.count == 0.0 {
            (self.count, self.sum, self.squares) = (count, sum, squares);
            return;
        }
        let total = self.count + count;
        let deviation = self.sum / self.count - sum / count;
        self.squares += squares + self.count * count * deviation * deviation / total;
        self.count = total;
        self.sum += sum;
    }

    fn statistic(&self) -> Option<f64> {
        let divisor = if self.statistic.sample {
            self.count - 1.0
        } else {
            self.count
        };
        if self.count == 0.0 || divisor <= 0.0 {
            return None;
        }
        let variance = self.squares / divisor;
        Some(if self.statistic.root {
            variance.sqrt()
        } else {
            variance
        })
    }
}

impl Accumulator for FloatSums {
    fn update_batch(&mut self, values: &[ArrayRef]) -> DfResult<()> {
        if let Some(array) = values.first() {
            for value in array.as_primitive::<Float64Type>().iter().flatten() {
                self.add(value);
            }
        }
        Ok(())
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> DfResult<()> {
        let [counts, sums, squares] = states else {
            return Err(QueryError::internal("variance state").into_datafusion());
        };
        let column = |array: &ArrayRef| array.as_primitive::<Float64Type>().clone();
        let (counts, sums, squares): (Float64Array, Float64Array, Float64Array) =
            (column(counts), column(sums), column(squares));
        for row in 0..counts.len() {
            self.merge(counts.value(row), sums.value(row), squares.value(row));
        }
        Ok(())
    }

    fn state(&mut self) -> DfResult<Vec<ScalarValue>> {
        Ok(vec![
            ScalarValue::Float64(Some(self.count)),
            ScalarValue::Float64(Some(self.sum)),
            ScalarValue::Float64(Some(self.squares)),
        ])
    }

    fn evaluate(&mut self) -> DfResult<ScalarValue> {
        Ok(ScalarValue::Float64(self.statistic()))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sums(values: &[(i128, i32)], sample: bool, root: bool) -> ExactSums {
        let mut sums = ExactSums {
            statistic: Statistic { sample, root },
            ..ExactSums::default()
        };
        for (value, scale) in values {
            sums.add_value(*value, *scale).unwrap();
        }
        sums
    }

    fn exact(values: &[(i128, i32)], sample: bool, root: bool) -> Option<i128> {
        sums(values, sample, root).statistic().unwrap()
    }

    #[test]
    fn numeric_statistics_have_postgres_digits() {
        // 1.0, 2.0, 4.0: var_samp 2.3333333333333333, stddev 1.5275252316519467.
        let values = [(10, 1), (20, 1), (40, 1)];
        assert_eq!(
            exact(&values, true, false),
            Some(233_333_333_333_333_330_000)
        );
        assert_eq!(
            exact(&values, true, true),
            Some(152_752_523_165_194_670_000)
        );
        assert_eq!(
            exact(&values, false, false),
            Some(155_555_555_555_555_560_000)
        );
        assert_eq!(exact(&[(5, 0)], true, false), None);
        assert_eq!(exact(&[(5, 0)], false, false), Some(0));
        // 1e2 and 2e2, held at scale -2.
        assert_eq!(
            exact(&[(1, -2), (2, -2)], true, false),
            Some(5000 * 10i128.pow(20))
        );
    }

    /// A result of 10^18 or more does not fit the column (22003), as a
    /// quotient does not.
    #[test]
    fn a_variance_past_the_column_is_an_error() {
        let error = sums(&[(1, -20), (2, -20)], true, false)
            .statistic()
            .unwrap_err();
        assert_eq!(
            QueryError::from_datafusion(error).code,
            SqlState::NUMERIC_VALUE_OUT_OF_RANGE
        );
    }

    #[test]
    fn float_statistics_are_youngs_cramer() {
        let mut sums = FloatSums {
            statistic: Statistic {
                sample: true,
                root: true,
            },
            ..FloatSums::default()
        };
        for value in [1.0, 2.0, 4.0] {
            sums.add(value);
        }
        assert_eq!(sums.statistic(), Some(1.5275252316519468));
    }

    #[test]
    fn roots_round_half_up() {
        assert_eq!(rounded_root(i256::from_i128(8)), i256::from_i128(3));
        assert_eq!(rounded_root(i256::from_i128(6)), i256::from_i128(2));
        assert_eq!(rounded_root(i256::from_i128(1)), i256::from_i128(1));
    }
}
