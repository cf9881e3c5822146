//! Date and time functions as PostgreSQL defines them, where DataFusion's
//! differ or are missing: `to_char` with PostgreSQL's templates, `extract`
//! (numeric) and `date_part` (double precision), `date_trunc`, `age`, `justify_*`,
//! interval times and divided by a number, and `AT TIME ZONE`
//! (`timezone(zone, value)`), which turns a timestamptz into the zone's
//! local timestamp and a timestamp into a timestamptz.
//!
//! floe's session time zone is UTC: a timestamptz is read and printed there.

pub mod arithmetic;
mod build;
pub mod date_timestamp;
pub(crate) mod from_char;
mod to_char;
mod trunc;

use chrono::{DateTime, Offset, TimeZone};
use datafusion::arrow::array::timezone::Tz;
use datafusion::logical_expr::{ScalarUDF, Volatility};
use floe_repr::strconv::{civil_from_days, days_from_civil};
use floe_repr::{Datum, SqlScalarType, SqlState};

use self::arithmetic::midnight;
use self::to_char::{BrokenDown, Number, format_datetime, format_number};
use super::{Arguments, RowFunction, expect_arguments, no_such_function};
use crate::error::QueryError;

/// `interval * number` and `number * interval` (planned in
/// [`crate::semantics`]).
pub const INTERVAL_MULTIPLY: &str = "floe_interval_multiply";
/// `interval / number`.
pub const INTERVAL_DIVIDE: &str = "floe_interval_divide";
/// `timestamp - timestamp` (and of timestamptz).
pub const TIMESTAMP_DIFFERENCE: &str = "floe_timestamp_difference";
/// `date - date`: the days between, an integer.
pub const DATE_DIFFERENCE: &str = "floe_date_difference";
/// `extract(field FROM value)`.
pub const EXTRACT: &str = "floe_extract";
/// `make_interval`, its seven parts given by position (the SQL rewrite
/// places named arguments).
pub const MAKE_INTERVAL: &str = "floe_make_interval";
/// `make_interval`'s parameters, in order.
pub const MAKE_INTERVAL_PARTS: [&str; 7] =
    ["years", "months", "weeks", "days", "hours", "mins", "secs"];
/// `value AT TIME ZONE zone`, as PostgreSQL names it.
pub const TIMEZONE: &str = "timezone";

const MICROS_PER_SECOND: i64 = 1_000_000;
const MICROS_PER_DAY: i64 = 86_400 * MICROS_PER_SECOND;

pub(super) fn functions() -> Vec<ScalarUDF> {
    let immutable = Volatility::Immutable;
    vec![
        RowFunction::new("to_char", immutable, to_char_type, to_char).udf(),
        RowFunction::new(EXTRACT, immutable, extract_type, extract).udf(),
        RowFunction::new("date_part", immutable, date_part_type, date_part).udf(),
        RowFunction::new("age", Volatility::Stable, age_type, age).udf(),
        RowFunction::new("justify_hours", immutable, justify_type, |row, _| {
            justify(row, justify_hours)
        })
        .udf(),
        RowFunction::new("justify_days", immutable, justify_type, |row, _| {
            justify(row, justify_days)
        })
        .udf(),
        RowFunction::new("justify_interval", immutable, justify_type, |row, _| {
            justify(row, justify_interval)
        })
        .udf(),
        RowFunction::new(INTERVAL_MULTIPLY, immutable, scaled_type, |row, _| {
            scale_interval(row, false)
        })
        .udf(),
        RowFunction::new(INTERVAL_DIVIDE, immutable, scaled_type, |row, _| {
            scale_interval(row, true)
        })
        .udf(),
        RowFunction::new(TIMEZONE, immutable, timezone_type, timezone).udf(),
        RowFunction::new(TIMESTAMP_DIFFERENCE, immutable, scaled_type, |row, _| {
            timestamp_difference(&row[0], &row[1])
        })
        .udf(),
        RowFunction::new(
            DATE_DIFFERENCE,
            immutable,
            |_| Ok(SqlScalarType::Int32),
            |row, _| date_difference(&row[0], &row[1]),
        )
        .udf(),
    ]
    .into_iter()
    .chain(build::functions())
    .chain(arithmetic::functions())
    .chain([trunc::function()])
    .chain(date_timestamp::functions())
    .collect()
}

fn is_number(ty: &SqlScalarType) -> bool {
    use SqlScalarType as S;
    matches!(
        ty,
        S::Int16 | S::Int32 | S::Int64 | S::Float32 | S::Float64 | S::Numeric { .. }
    )
}

fn is_datetime(ty: &SqlScalarType) -> bool {
    use SqlScalarType as S;
    matches!(ty, S::Timestamp | S::TimestampTz | S::Date | S::Interval)
}

/// Whether a date or timestamp is `infinity` or `-infinity` (intervals are
/// finite).
fn is_infinite(value: &Datum) -> bool {
    use floe_repr::strconv::{is_infinite_date, is_infinite_timestamp};
    match value {
        Datum::Date(days) => is_infinite_date(*days),
        Datum::Timestamp(micros) | Datum::TimestampTz(micros) => is_infinite_timestamp(*micros),
        _ => false,
    }
}

fn interval_out_of_range() -> QueryError {
    QueryError::new(SqlState::DATETIME_FIELD_OVERFLOW, "interval out of range")
}

fn interval_parts(datum: &Datum) -> Result<(i32, i32, i64), QueryError> {
    match datum {
        Datum::Interval {
            months,
            days,
            micros,
        } => Ok((*months, *days, *micros)),
        other => Err(QueryError::internal(format!("not an interval: {other:?}"))),
    }
}

fn interval(months: i32, days: i32, micros: i64) -> Datum {
    Datum::Interval {
        months,
        days,
        micros,
    }
}

// ---------------------------------------------------------------------------
// to_char
// ---------------------------------------------------------------------------

fn to_char_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    expect_arguments("to_char", arguments, &[2])?;
    let value = &arguments.types[0];
    if (is_number(value) || is_datetime(value))
        && matches!(
            arguments.types[1],
            SqlScalarType::Text | SqlScalarType::VarChar { .. }
        )
    {
        Ok(SqlScalarType::Text)
    } else {
        Err(no_such_function("to_char", &arguments.types))
    }
}

fn to_char(row: &[Datum], _: &SqlScalarType) -> Result<Datum, QueryError> {
    let [value, Datum::Text(template)] = row else {
        return Err(QueryError::internal("to_char arguments"));
    };
    // PostgreSQL formats no infinite date or timestamp.
    if is_infinite(value) {
        return Ok(Datum::Null);
    }
    let text = match value {
        Datum::Timestamp(micros) => {
            format_datetime(&BrokenDown::timestamp(*micros, None), template)?
        }
        Datum::TimestampTz(micros) => {
            format_datetime(&BrokenDown::timestamp(*micros, Some("UTC")), template)?
        }
        Datum::Date(days) => {
            format_datetime(&BrokenDown::timestamp(midnight(*days)?, None), template)?
        }
        Datum::Interval {
            months,
            days,
            micros,
        } => format_datetime(&BrokenDown::interval(*months, *days, *micros), template)?,
        Datum::Int16(v) => format_number(Number::Integer(i64::from(*v)), template)?,
        Datum::Int32(v) => format_number(Number::Integer(i64::from(*v)), template)?,
        Datum::Int64(v) => format_number(Number::Integer(*v), template)?,
        // The digits a float holds exactly: C's FLT_DIG and DBL_DIG.
        Datum::Float32(v) => format_number(Number::Float(f64::from(*v), 6), template)?,
        Datum::Float64(v) => format_number(Number::Float(*v, 15), template)?,
        Datum::Numeric(text) => format_number(Number::Numeric(text), template)?,
        other => return Err(QueryError::internal(format!("to_char of {other:?}"))),
    };
    Ok(Datum::Text(text))
}

// ---------------------------------------------------------------------------
// extract and date_part
// ---------------------------------------------------------------------------

/// The number of fraction digits `extract` gives a field (PostgreSQL 14+
/// returns numeric: seconds to the microsecond, whole numbers otherwise).
fn extract_scale(field: &str, ty: &SqlScalarType) -> u8 {
    match Unit::parse(field) {
        Some(Unit::Epoch) if *ty == SqlScalarType::Date => 0,
        Some(Unit::Epoch | Unit::Second) => 6,
        Some(Unit::Milliseconds) => 3,
        _ => 0,
    }
}

fn extract_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    expect_arguments("extract", arguments, &[2])?;
    let field = arguments
        .constant_text(0)
        .unwrap_or_default()
        .to_lowercase();
    Ok(SqlScalarType::Numeric {
        precision: None,
        max_scale: Some(extract_scale(&field, &arguments.types[1])),
    })
}

fn date_part_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    expect_arguments("date_part", arguments, &[2])?;
    Ok(SqlScalarType::Float64)
}

fn extract(row: &[Datum], _: &SqlScalarType) -> Result<Datum, QueryError> {
    match infinite_field(row)? {
        Some(None) => return Ok(Datum::Null),
        Some(Some(_)) => {
            return Err(QueryError::new(
                SqlState::FEATURE_NOT_SUPPORTED,
                "extract of this field of an infinite value is infinity, which a numeric does not hold",
            ));
        }
        None => {}
    }
    let (numerator, scale) = field_value(row)?;
    Ok(Datum::Numeric(decimal_text(numerator, scale)))
}

fn date_part(row: &[Datum], _: &SqlScalarType) -> Result<Datum, QueryError> {
    if let Some(infinite) = infinite_field(row)? {
        return Ok(infinite.map_or(Datum::Null, Datum::Float64));
    }
    let (numerator, scale) = field_value(row)?;
    Ok(Datum::Float64(
        numerator as f64 / 10_f64.powi(i32::from(scale)),
    ))
}

/// A field of an infinite date or timestamp, as PostgreSQL gives it: the
/// value's infinity for a field that grows with time (the year, the epoch),
/// NULL (`Some(None)`) for another. `None` for a finite value.
fn infinite_field(row: &[Datum]) -> Result<Option<Option<f64>>, QueryError> {
    let [Datum::Text(field), value] = row else {
        return Ok(None);
    };
    if !is_infinite(value) {
        return Ok(None);
    }
    // The unit is checked as for a finite value of the type.
    let finite = match value {
        Datum::Date(_) => Datum::Date(0),
        Datum::Timestamp(_) => Datum::Timestamp(0),
        _ => Datum::TimestampTz(0),
    };
    field_value(&[Datum::Text(field.clone()), finite])?;
    let later = matches!(
        value,
        Datum::Date(floe_repr::strconv::DATE_INFINITY)
            | Datum::Timestamp(floe_repr::strconv::TIMESTAMP_INFINITY)
            | Datum::TimestampTz(floe_repr::strconv::TIMESTAMP_INFINITY)
    );
    let infinity = if later {
        f64::INFINITY
    } else {
        f64::NEG_INFINITY
    };
    Ok(Some(match Unit::parse(&field.to_lowercase()) {
        Some(
            Unit::Year
            | Unit::Decade
            | Unit::Century
            | Unit::Millennium
            | Unit::IsoYear
            | Unit::Epoch,
        ) => Some(infinity),
        _ => None,
    }))
}

/// `numerator / 10^scale` as decimal text with exactly `scale` digits.
fn decimal_text(numerator: i128, scale: u8) -> String {
    let divisor = 10_i128.pow(u32::from(scale));
    let sign = if numerator < 0 { "-" } else { "" };
    let whole = numerator.unsigned_abs() / divisor.unsigned_abs();
    if scale == 0 {
        return format!("{sign}{whole}");
    }
    let fraction = numerator.unsigned_abs() % divisor.unsigned_abs();
    format!(
        "{sign}{whole}.{fraction:0width$}",
        width = usize::from(scale)
    )
}

/// A field of a date, time, timestamp or interval as `numerator /
/// 10^scale` (PostgreSQL's `timestamp_part_common` and kin).
fn field_value(row: &[Datum]) -> Result<(i128, u8), QueryError> {
    let [Datum::Text(field), value] = row else {
        return Err(QueryError::internal("extract arguments"));
    };
    let field = field.to_lowercase();
    let type_name = match value {
        Datum::Date(_) => "date",
        Datum::Time(_) => "time without time zone",
        Datum::Timestamp(_) => "timestamp without time zone",
        Datum::TimestampTz(_) => "timestamp with time zone",
        Datum::Interval { .. } => "interval",
        other => return Err(QueryError::internal(format!("extract from {other:?}"))),
    };
    let unsupported = || {
        QueryError::new(
            SqlState::FEATURE_NOT_SUPPORTED,
            format!("unit \"{field}\" not supported for type {type_name}"),
        )
    };
    let unit = Unit::parse(&field).ok_or_else(|| {
        QueryError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            format!("unit \"{field}\" not recognized for type {type_name}"),
        )
    })?;
    let parts = match value {
        Datum::Date(days) => {
            if unit.is_time_of_day() {
                return Err(unsupported());
            }
            calendar_field(unit, midnight(*days)?, false)
        }
        Datum::Timestamp(micros) => calendar_field(unit, *micros, false),
        Datum::TimestampTz(micros) => calendar_field(unit, *micros, true),
        Datum::Time(micros) => time_field(unit, *micros),
        Datum::Interval {
            months,
            days,
            micros,
        } => interval_field(unit, *months, *days, *micros),
        _ => None,
    };
    let (numerator, scale) = parts.ok_or_else(unsupported)?;
    let ty = match value {
        Datum::Date(_) => SqlScalarType::Date,
        _ => SqlScalarType::Timestamp,
    };
    let scale_wanted = extract_scale(&field, &ty);
    // Every field is computed at its own scale; bring it to extract's.
    let numerator = numerator * 10_i128.pow(u32::from(scale_wanted.saturating_sub(scale)))
        / 10_i128.pow(u32::from(scale.saturating_sub(scale_wanted)));
    Ok((numerator, scale_wanted))
}

#[derive(Clone, Copy, PartialEq)]
enum Unit {
    Microseconds,
    Milliseconds,
    Second,
    Minute,
    Hour,
    Day,
    Month,
    Quarter,
    Week,
    Year,
    Decade,
    Century,
    Millennium,
    DayOfWeek,
    IsoDayOfWeek,
    DayOfYear,
    IsoYear,
    Epoch,
    Timezone,
    TimezoneHour,
    TimezoneMinute,
}

impl Unit {
    /// PostgreSQL's unit names, with their plurals and abbreviations.
    fn parse(name: &str) -> Option<Unit> {
        use Unit::*;
        Some(match name {
            "microsecond" | "microseconds" | "us" | "usec" | "usecs" | "useconds" => Microseconds,
            "millisecond" | "milliseconds" | "ms" | "msec" | "msecs" | "mseconds" => Milliseconds,
            "second" | "seconds" | "s" | "sec" | "secs" => Second,
            "minute" | "minutes" | "m" | "min" | "mins" => Minute,
            "hour" | "hours" | "h" | "hr" | "hrs" => Hour,
            "day" | "days" | "d" => Day,
            "month" | "months" | "mon" | "mons" => Month,
            "quarter" | "qtr" => Quarter,
            "week" | "weeks" | "w" => Week,
            "year" | "years" | "y" | "yr" | "yrs" => Year,
            "decade" | "decades" | "dec" | "decs" => Decade,
            "century" | "centuries" | "c" | "cent" => Century,
            "millennium" | "millennia" | "mil" | "mils" | "millenniums" => Millennium,
            "dow" => DayOfWeek,
            "isodow" => IsoDayOfWeek,
            "doy" => DayOfYear,
            "isoyear" => IsoYear,
            "epoch" => Epoch,
            "timezone" => Timezone,
            "timezone_h" | "timezone_hour" => TimezoneHour,
            "timezone_m" | "timezone_minute" => TimezoneMinute,
            _ => return None,
        })
    }

    fn is_time_of_day(self) -> bool {
        use Unit::*;
        matches!(
            self,
            Microseconds
                | Milliseconds
                | Second
                | Minute
                | Hour
                | Timezone
                | TimezoneHour
                | TimezoneMinute
        )
    }
}

/// The seconds of a minute as `(micros, 6)`, in the unit asked for.
fn seconds_field(unit: Unit, micros_of_minute: i64) -> Option<(i128, u8)> {
    let value = i128::from(micros_of_minute);
    match unit {
        Unit::Microseconds => Some((value, 0)),
        Unit::Milliseconds => Some((value, 3)),
        Unit::Second => Some((value, 6)),
        _ => None,
    }
}

fn calendar_field(unit: Unit, micros: i64, with_zone: bool) -> Option<(i128, u8)> {
    use Unit::*;
    let epoch_days = micros.div_euclid(MICROS_PER_DAY);
    let time = micros.rem_euclid(MICROS_PER_DAY);
    let (year, month, day) = civil_from_days(epoch_days);
    let weekday = (epoch_days + 4).rem_euclid(7);
    let iso_weekday = (weekday + 6) % 7 + 1;
    let thursday = epoch_days - (iso_weekday - 1) + 3;
    let iso_year = civil_from_days(thursday).0;
    let whole = |v: i64| Some((i128::from(v), 0));
    // Years as PostgreSQL counts them: there is no year 0.
    let ad_year = if year > 0 { year } else { year - 1 };
    let count_up = |per: i64| {
        if year > 0 {
            (year + per - 1) / per
        } else {
            -((per - 1 - (year - 1)) / per)
        }
    };
    match unit {
        Microseconds | Milliseconds | Second => seconds_field(unit, time % 60_000_000),
        Minute => whole(time / 60_000_000 % 60),
        Hour => whole(time / 3_600_000_000),
        Day => whole(i64::from(day)),
        Month => whole(i64::from(month)),
        Quarter => whole((i64::from(month) - 1) / 3 + 1),
        Week => whole((thursday - days_from_civil(iso_year, 1, 1)) / 7 + 1),
        Year => whole(ad_year),
        Decade => whole(if year >= 0 {
            year / 10
        } else {
            -((8 - (year - 1)) / 10)
        }),
        Century => whole(count_up(100)),
        Millennium => whole(count_up(1000)),
        DayOfWeek => whole(weekday),
        IsoDayOfWeek => whole(iso_weekday),
        DayOfYear => whole(epoch_days - days_from_civil(year, 1, 1) + 1),
        IsoYear => whole(if iso_year > 0 { iso_year } else { iso_year - 1 }),
        Epoch => Some((i128::from(micros), 6)),
        Timezone | TimezoneHour | TimezoneMinute if with_zone => whole(0),
        Timezone | TimezoneHour | TimezoneMinute => None,
    }
}

fn time_field(unit: Unit, micros: i64) -> Option<(i128, u8)> {
    match unit {
        Unit::Microseconds | Unit::Milliseconds | Unit::Second => {
            seconds_field(unit, micros % 60_000_000)
        }
        Unit::Minute => Some((i128::from(micros / 60_000_000 % 60), 0)),
        Unit::Hour => Some((i128::from(micros / 3_600_000_000), 0)),
        Unit::Epoch => Some((i128::from(micros), 6)),
        _ => None,
    }
}

fn interval_field(unit: Unit, months: i32, days: i32, micros: i64) -> Option<(i128, u8)> {
    use Unit::*;
    let (months, days) = (i64::from(months), i64::from(days));
    let years = months / 12;
    let whole = |v: i64| Some((i128::from(v), 0));
    match unit {
        Microseconds | Milliseconds | Second => seconds_field(unit, micros % 60_000_000),
        Minute => whole(micros / 60_000_000 % 60),
        Hour => whole(micros / 3_600_000_000),
        Day => whole(days),
        Month => whole(months % 12),
        Quarter => whole(months % 12 / 3 + 1),
        Year => whole(years),
        Decade => whole(years / 10),
        Century => whole(years / 100),
        Millennium => whole(years / 1000),
        // A year is 365.25 days and a month 30, as PostgreSQL counts them.
        Epoch => {
            let quarter_days = 1461 * years + 120 * (months % 12) + 4 * days;
            let seconds = i128::from(quarter_days) * 21_600;
            Some((seconds * 1_000_000 + i128::from(micros), 6))
        }
        _ => None,
    }
}

// ---------------------------------------------------------------------------
// age
// ---------------------------------------------------------------------------

fn age_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    expect_arguments("age", arguments, &[1, 2])?;
    let point = |t: &SqlScalarType| {
        matches!(
            t,
            SqlScalarType::Timestamp | SqlScalarType::TimestampTz | SqlScalarType::Date
        )
    };
    if arguments.types.iter().all(point) {
        Ok(SqlScalarType::Interval)
    } else {
        Err(no_such_function("age", &arguments.types))
    }
}

fn point_in_time(datum: &Datum) -> Result<i64, QueryError> {
    match datum {
        Datum::Timestamp(micros) | Datum::TimestampTz(micros) => Ok(*micros),
        Datum::Date(days) => midnight(*days),
        other => Err(QueryError::internal(format!("age of {other:?}"))),
    }
}

fn age(row: &[Datum], _: &SqlScalarType) -> Result<Datum, QueryError> {
    let (later, earlier) = match row {
        [only] => {
            // Against midnight of today (`current_date`), in UTC.
            let now = i64::try_from(floe_repr::Timestamp::now().millis()).unwrap_or(i64::MAX);
            let today = (now * 1000).div_euclid(MICROS_PER_DAY) * MICROS_PER_DAY;
            (today, point_in_time(only)?)
        }
        [a, b] => (point_in_time(a)?, point_in_time(b)?),
        _ => return Err(QueryError::internal("age arguments")),
    };
    symbolic_difference(later, earlier)
}

/// PostgreSQL's `timestamp_age`: the difference field by field, each
/// negative field borrowing from the next larger one (a month borrows the
/// length of the earlier operand's month, of the later one's when the
/// result is negative).
fn symbolic_difference(a: i64, b: i64) -> Result<Datum, QueryError> {
    let fields = |micros: i64| {
        let days = micros.div_euclid(MICROS_PER_DAY);
        let time = micros.rem_euclid(MICROS_PER_DAY);
        let (year, month, day) = civil_from_days(days);
        [
            year,
            i64::from(month),
            i64::from(day),
            time / 3_600_000_000,
            time / 60_000_000 % 60,
            time / 1_000_000 % 60,
            time % 1_000_000,
        ]
    };
    let (first, second) = (fields(a), fields(b));
    let negative = a < b;
    let mut d: Vec<i64> = first.iter().zip(&second).map(|(x, y)| x - y).collect();
    if negative {
        d.iter_mut().for_each(|v| *v = -*v);
    }
    // Borrow upward: microseconds, seconds, minutes, hours.
    for (index, unit) in [(6, 1_000_000), (5, 60), (4, 60), (3, 24)] {
        while d[index] < 0 {
            d[index] += unit;
            d[index - 1] -= 1;
        }
    }
    let borrowed_from = if negative { first } else { second };
    while d[2] < 0 {
        d[2] += days_in_month(borrowed_from[0], borrowed_from[1]);
        d[1] -= 1;
    }
    while d[1] < 0 {
        d[1] += 12;
        d[0] -= 1;
    }
    if negative {
        d.iter_mut().for_each(|v| *v = -*v);
    }
    let months = i32::try_from(d[0] * 12 + d[1]).map_err(|_| interval_out_of_range())?;
    let days = i32::try_from(d[2]).map_err(|_| interval_out_of_range())?;
    let micros = ((d[3] * 60 + d[4]) * 60 + d[5]) * MICROS_PER_SECOND + d[6];
    Ok(interval(months, days, micros))
}

fn days_in_month(year: i64, month: i64) -> i64 {
    let next = if month == 12 {
        days_from_civil(year + 1, 1, 1)
    } else {
        days_from_civil(year, month as u32 + 1, 1)
    };
    next - days_from_civil(year, month as u32, 1)
}

// ---------------------------------------------------------------------------
// justify_hours, justify_days, justify_interval
// ---------------------------------------------------------------------------

fn justify_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    expect_arguments("justify", arguments, &[1])?;
    match arguments.types[0] {
        SqlScalarType::Interval => Ok(SqlScalarType::Interval),
        _ => Err(no_such_function("justify_interval", &arguments.types)),
    }
}

type Parts = (i64, i64, i64);

fn justify(row: &[Datum], rule: fn(Parts) -> Parts) -> Result<Datum, QueryError> {
    let (months, days, micros) = interval_parts(&row[0])?;
    let (months, days, micros) = rule((i64::from(months), i64::from(days), micros));
    Ok(interval(
        i32::try_from(months).map_err(|_| interval_out_of_range())?,
        i32::try_from(days).map_err(|_| interval_out_of_range())?,
        micros,
    ))
}

/// Whole days of time into days, then days and time given one sign.
fn justify_hours((months, days, micros): Parts) -> Parts {
    let days = days + micros / MICROS_PER_DAY;
    let micros = micros % MICROS_PER_DAY;
    match (days, micros) {
        (d, t) if d > 0 && t < 0 => (months, d - 1, t + MICROS_PER_DAY),
        (d, t) if d < 0 && t > 0 => (months, d + 1, t - MICROS_PER_DAY),
        (d, t) => (months, d, t),
    }
}

/// Whole 30-day months of days into months, then months and days given one
/// sign.
fn justify_days((months, days, micros): Parts) -> Parts {
    let months = months + days / 30;
    let days = days % 30;
    match (months, days) {
        (m, d) if m > 0 && d < 0 => (m - 1, d + 30, micros),
        (m, d) if m < 0 && d > 0 => (m + 1, d - 30, micros),
        (m, d) => (m, d, micros),
    }
}

fn justify_interval((mut months, mut days, mut micros): Parts) -> Parts {
    if (days > 0 && micros > 0) || (days < 0 && micros < 0) {
        months += days / 30;
        days %= 30;
    }
    days += micros / MICROS_PER_DAY;
    micros %= MICROS_PER_DAY;
    months += days / 30;
    days %= 30;
    if months > 0 && (days < 0 || (days == 0 && micros < 0)) {
        days += 30;
        months -= 1;
    } else if months < 0 && (days > 0 || (days == 0 && micros > 0)) {
        days -= 30;
        months += 1;
    }
    if days > 0 && micros < 0 {
        micros += MICROS_PER_DAY;
        days -= 1;
    } else if days < 0 && micros > 0 {
        micros -= MICROS_PER_DAY;
        days += 1;
    }
    (months, days, micros)
}

// ---------------------------------------------------------------------------
// interval * number, interval / number
// ---------------------------------------------------------------------------

/// PostgreSQL's `timestamp_mi`: the difference in whole days and the time
/// left over (`380 days 01:30:00`, not 9121 hours), both negative when the
/// second is later.
fn timestamp_difference(left: &Datum, right: &Datum) -> Result<Datum, QueryError> {
    let micros = |datum: &Datum| match datum {
        Datum::Timestamp(micros) | Datum::TimestampTz(micros) => Ok(*micros),
        _ => Err(QueryError::internal("a timestamp was expected")),
    };
    if is_infinite(left) || is_infinite(right) {
        return Err(QueryError::new(
            SqlState::DATETIME_FIELD_OVERFLOW,
            "cannot subtract infinite timestamps",
        ));
    }
    let difference = micros(left)?.checked_sub(micros(right)?).ok_or_else(|| {
        QueryError::new(SqlState::INTERVAL_FIELD_OVERFLOW, "interval out of range")
    })?;
    let days = i32::try_from(difference / MICROS_PER_DAY)
        .map_err(|_| QueryError::new(SqlState::INTERVAL_FIELD_OVERFLOW, "interval out of range"))?;
    Ok(Datum::Interval {
        months: 0,
        days,
        micros: difference % MICROS_PER_DAY,
    })
}

fn date_difference(left: &Datum, right: &Datum) -> Result<Datum, QueryError> {
    if is_infinite(left) || is_infinite(right) {
        return Err(QueryError::new(
            SqlState::DATETIME_FIELD_OVERFLOW,
            "cannot subtract infinite dates",
        ));
    }
    let (Datum::Date(left), Datum::Date(right)) = (left, right) else {
        return Err(QueryError::internal("dates were expected"));
    };
    left.checked_sub(*right).map(Datum::Int32).ok_or_else(|| {
        QueryError::new(SqlState::NUMERIC_VALUE_OUT_OF_RANGE, "integer out of range")
    })
}

fn scaled_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    expect_arguments("interval arithmetic", arguments, &[2])?;
    Ok(SqlScalarType::Interval)
}

/// PostgreSQL's `interval_mul`/`interval_div`: months and days scale as
/// whole numbers, their fractions spill down (30 days a month, 86400
/// seconds a day) and never up. Arguments are the interval, then the number.
fn scale_interval(row: &[Datum], divide: bool) -> Result<Datum, QueryError> {
    let (months, days, micros) = interval_parts(&row[0])?;
    let factor = super::math::as_double(&row[1])?;
    if divide && factor == 0.0 {
        return Err(QueryError::new(
            SqlState::DIVISION_BY_ZERO,
            "division by zero",
        ));
    }
    let apply = |v: f64| if divide { v / factor } else { v * factor };
    let to_i32 = |v: f64| {
        if v.is_nan() || v < f64::from(i32::MIN) || v >= -f64::from(i32::MIN) {
            Err(interval_out_of_range())
        } else {
            Ok(v as i32)
        }
    };
    // Rounds to microseconds, as PostgreSQL's TSROUND, to keep whole numbers whole.
    let round = |v: f64| (v * 1e6).round_ties_even() / 1e6;
    let result_months = to_i32(apply(f64::from(months)))?;
    let mut result_days = to_i32(apply(f64::from(days)))?;
    let month_remainder_days = round((apply(f64::from(months)) - f64::from(result_months)) * 30.0);
    let mut seconds_remainder = round(
        (apply(f64::from(days)) - f64::from(result_days) + month_remainder_days
            - month_remainder_days.trunc())
            * 86_400.0,
    );
    if seconds_remainder.abs() >= 86_400.0 {
        let whole_days = (seconds_remainder / 86_400.0).trunc();
        result_days = result_days
            .checked_add(whole_days as i32)
            .ok_or_else(interval_out_of_range)?;
        seconds_remainder -= whole_days * 86_400.0;
    }
    result_days = result_days
        .checked_add(month_remainder_days as i32)
        .ok_or_else(interval_out_of_range)?;
    let time = (apply(micros as f64) + seconds_remainder * 1e6).round_ties_even();
    if time.is_nan() || time < i64::MIN as f64 || time >= -(i64::MIN as f64) {
        return Err(interval_out_of_range());
    }
    Ok(interval(result_months, result_days, time as i64))
}

// ---------------------------------------------------------------------------
// AT TIME ZONE
// ---------------------------------------------------------------------------

fn timezone_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    expect_arguments("timezone", arguments, &[2])?;
    match arguments.types[1] {
        SqlScalarType::TimestampTz => Ok(SqlScalarType::Timestamp),
        SqlScalarType::Timestamp => Ok(SqlScalarType::TimestampTz),
        _ => Err(no_such_function("timezone", &arguments.types)),
    }
}

/// A zone as PostgreSQL reads `AT TIME ZONE`'s: `UTC`, a POSIX offset
/// (`+02` and `UTC+3` are hours *west* of Greenwich), or a tz database name.
enum Zone {
    /// Seconds east of UTC.
    Fixed(i64),
    Named(Tz),
}

impl Zone {
    fn parse(name: &str) -> Result<Zone, QueryError> {
        let not_recognized = || {
            QueryError::new(
                SqlState::INVALID_PARAMETER_VALUE,
                format!("time zone \"{name}\" not recognized"),
            )
        };
        let upper = name.to_uppercase();
        if matches!(upper.as_str(), "UTC" | "GMT" | "Z" | "ZULU" | "UCT") {
            return Ok(Zone::Fixed(0));
        }
        let offset = upper
            .strip_prefix("UTC")
            .or_else(|| upper.strip_prefix("GMT"))
            .unwrap_or(&upper);
        if offset.starts_with(['+', '-']) || offset.starts_with(|c: char| c.is_ascii_digit()) {
            return posix_offset(offset)
                .map(Zone::Fixed)
                .ok_or_else(not_recognized);
        }
        name.parse::<Tz>()
            .map(Zone::Named)
            .map_err(|_| not_recognized())
    }

    /// The offset east of UTC at a UTC instant.
    fn offset_at_utc(&self, micros: i64) -> i64 {
        match self {
            Zone::Fixed(seconds) => *seconds,
            Zone::Named(tz) => {
                let instant = DateTime::from_timestamp_micros(micros).unwrap_or_default();
                i64::from(
                    tz.offset_from_utc_datetime(&instant.naive_utc())
                        .fix()
                        .local_minus_utc(),
                )
            }
        }
    }

    /// The offset east of UTC of a local time: after the transition for
    /// an ambiguous one, before it for one skipped (as PostgreSQL resolves them).
    fn offset_of_local(&self, micros: i64) -> i64 {
        let Zone::Named(tz) = self else {
            return self.offset_at_utc(micros);
        };
        let local = DateTime::from_timestamp_micros(micros)
            .unwrap_or_default()
            .naive_utc();
        match tz.offset_from_local_datetime(&local) {
            chrono::LocalResult::Single(offset) => i64::from(offset.fix().local_minus_utc()),
            chrono::LocalResult::Ambiguous(_, after) => i64::from(after.fix().local_minus_utc()),
            chrono::LocalResult::None => self.offset_at_utc(micros - MICROS_PER_DAY),
        }
    }
}

/// `[+-]hh[:mm[:ss]]` as seconds east of UTC (the POSIX sign is west).
fn posix_offset(text: &str) -> Option<i64> {
    let (west, digits) = match text.as_bytes().first()? {
        b'-' => (false, &text[1..]),
        b'+' => (true, &text[1..]),
        _ => (true, text),
    };
    let mut parts = digits.split(':');
    let mut seconds = 0;
    for unit in [3600, 60, 1] {
        if let Some(part) = parts.next() {
            if part.is_empty() || part.len() > 2 || !part.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            seconds += part.parse::<i64>().ok()? * unit;
        }
    }
    if parts.next().is_some() || seconds > 15 * 3600 {
        return None;
    }
    Some(if west { -seconds } else { seconds })
}

fn timezone(row: &[Datum], _: &SqlScalarType) -> Result<Datum, QueryError> {
    let [Datum::Text(zone), value] = row else {
        return Err(QueryError::internal("timezone arguments"));
    };
    let zone = Zone::parse(zone)?;
    match value {
        // Infinity is infinity in every zone.
        Datum::TimestampTz(micros) if is_infinite(value) => Ok(Datum::Timestamp(*micros)),
        Datum::Timestamp(micros) if is_infinite(value) => Ok(Datum::TimestampTz(*micros)),
        Datum::TimestampTz(utc) => Ok(Datum::Timestamp(
            utc + zone.offset_at_utc(*utc) * MICROS_PER_SECOND,
        )),
        Datum::Timestamp(local) => Ok(Datum::TimestampTz(
            local - zone.offset_of_local(*local) * MICROS_PER_SECOND,
        )),
        other => Err(QueryError::internal(format!("timezone of {other:?}"))),
    }
}
