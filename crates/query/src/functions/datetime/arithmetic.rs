//! `+` and `-` of dates, timestamps, intervals, times and day counts as
//! PostgreSQL answers them: `infinity` and `-infinity` stay infinite (Arrow's
//! arithmetic overflows on their extreme counts), months add by the calendar
//! (the day clamped to the month's last), and a result past PostgreSQL's range
//! is 22008.
//!
//! - `timestamp[tz] ± interval`, `interval + timestamp[tz]`: the same type;
//! - `date ± interval`, `interval + date`, `date ± time`, `time + date`: a
//!   timestamp;
//! - `date ± integer`, `integer + date`: a date.

use floe_repr::strconv::{
    MAX_DATE_DAYS, MICROS_PER_DAY, MIN_DATE_DAYS, civil_from_days, date_midnight,
    date_out_of_range_for_timestamp, days_from_civil, is_infinite_date, is_infinite_timestamp,
};
use floe_repr::{Datum, SqlScalarType, SqlState};

use super::super::{Arguments, RowFunction, expect_arguments, no_such_function};
use crate::error::QueryError;

/// `a + b` of the types above (planned by `crate::semantics`).
pub const DATETIME_PLUS: &str = "floe_datetime_plus";
/// `a - b` of the types above.
pub const DATETIME_MINUS: &str = "floe_datetime_minus";

pub(super) fn functions() -> Vec<datafusion::logical_expr::ScalarUDF> {
    let immutable = datafusion::logical_expr::Volatility::Immutable;
    vec![
        RowFunction::new(DATETIME_PLUS, immutable, plus_type, |row, _| {
            plus(&row[0], &row[1])
        })
        .udf(),
        RowFunction::new(DATETIME_MINUS, immutable, minus_type, |row, _| {
            minus(&row[0], &row[1])
        })
        .udf(),
    ]
}

/// The result type of `left + right`, if floe adds them here.
pub fn plus_result(left: &SqlScalarType, right: &SqlScalarType) -> Option<SqlScalarType> {
    use SqlScalarType as S;
    match (left, right) {
        (S::Timestamp | S::TimestampTz, S::Interval) => Some(left.clone()),
        (S::Interval, S::Timestamp | S::TimestampTz) => Some(right.clone()),
        (S::Date, S::Interval | S::Time) | (S::Interval | S::Time, S::Date) => Some(S::Timestamp),
        (S::Date, S::Int16 | S::Int32 | S::Int64) | (S::Int16 | S::Int32 | S::Int64, S::Date) => {
            Some(S::Date)
        }
        _ => None,
    }
}

/// The result type of `left - right`, if floe subtracts them here.
pub fn minus_result(left: &SqlScalarType, right: &SqlScalarType) -> Option<SqlScalarType> {
    use SqlScalarType as S;
    match (left, right) {
        (S::Timestamp | S::TimestampTz, S::Interval) => Some(left.clone()),
        (S::Date, S::Interval | S::Time) => Some(S::Timestamp),
        (S::Date, S::Int16 | S::Int32 | S::Int64) => Some(S::Date),
        _ => None,
    }
}

fn plus_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    expect_arguments("+", arguments, &[2])?;
    plus_result(&arguments.types[0], &arguments.types[1])
        .ok_or_else(|| no_such_function("+", &arguments.types))
}

fn minus_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    expect_arguments("-", arguments, &[2])?;
    minus_result(&arguments.types[0], &arguments.types[1])
        .ok_or_else(|| no_such_function("-", &arguments.types))
}

fn plus(left: &Datum, right: &Datum) -> Result<Datum, QueryError> {
    match (left, right) {
        (Datum::Interval { .. } | Datum::Time(_), _)
        | (Datum::Int16(_) | Datum::Int32(_) | Datum::Int64(_), Datum::Date(_)) => {
            plus(right, left)
        }
        (Datum::Timestamp(micros), interval) => {
            add_interval(*micros, interval, false).map(Datum::Timestamp)
        }
        (Datum::TimestampTz(micros), interval) => {
            add_interval(*micros, interval, false).map(Datum::TimestampTz)
        }
        (Datum::Date(days), Datum::Time(micros)) => add_time(*days, *micros),
        (Datum::Date(days), Datum::Interval { .. }) => {
            add_interval(midnight(*days)?, right, false).map(Datum::Timestamp)
        }
        (Datum::Date(days), count) => add_days(*days, day_count(count)?),
        _ => Err(QueryError::internal("datetime + of unexpected values")),
    }
}

fn minus(left: &Datum, right: &Datum) -> Result<Datum, QueryError> {
    match (left, right) {
        (Datum::Timestamp(micros), interval) => {
            add_interval(*micros, interval, true).map(Datum::Timestamp)
        }
        (Datum::TimestampTz(micros), interval) => {
            add_interval(*micros, interval, true).map(Datum::TimestampTz)
        }
        (Datum::Date(days), Datum::Time(micros)) => add_time(*days, -*micros),
        (Datum::Date(days), Datum::Interval { .. }) => {
            add_interval(midnight(*days)?, right, true).map(Datum::Timestamp)
        }
        (Datum::Date(days), count) => {
            let count = day_count(count)?;
            add_days(*days, count.checked_neg().ok_or_else(date_out_of_range)?)
        }
        _ => Err(QueryError::internal("datetime - of unexpected values")),
    }
}

fn day_count(datum: &Datum) -> Result<i64, QueryError> {
    match datum {
        Datum::Int16(n) => Ok(i64::from(*n)),
        Datum::Int32(n) => Ok(i64::from(*n)),
        Datum::Int64(n) => Ok(*n),
        _ => Err(QueryError::internal("a day count was expected")),
    }
}

fn timestamp_out_of_range() -> QueryError {
    QueryError::new(SqlState::DATETIME_FIELD_OVERFLOW, "timestamp out of range")
}

fn date_out_of_range() -> QueryError {
    QueryError::new(SqlState::DATETIME_FIELD_OVERFLOW, "date out of range")
}

/// `date + n` days; an infinite date stays as it is.
fn add_days(days: i32, count: i64) -> Result<Datum, QueryError> {
    if is_infinite_date(days) {
        return Ok(Datum::Date(days));
    }
    i64::from(days)
        .checked_add(count)
        .filter(|sum| (i64::from(MIN_DATE_DAYS)..=i64::from(MAX_DATE_DAYS)).contains(sum))
        .map(|sum| Datum::Date(sum as i32))
        .ok_or_else(date_out_of_range)
}

/// A date as the timestamp of its midnight, or PostgreSQL's error for a
/// date past the timestamps.
pub(super) fn midnight(days: i32) -> Result<i64, QueryError> {
    date_midnight(days).ok_or_else(|| QueryError::from_value(date_out_of_range_for_timestamp()))
}

/// `date + time`: the timestamp of the date at that time of day.
fn add_time(days: i32, micros: i64) -> Result<Datum, QueryError> {
    let midnight = midnight(days)?;
    if is_infinite_date(days) {
        return Ok(Datum::Timestamp(midnight));
    }
    midnight
        .checked_add(micros)
        .filter(|sum| in_range(*sum))
        .map(Datum::Timestamp)
        .ok_or_else(timestamp_out_of_range)
}

/// Whether a finite timestamp is within PostgreSQL's range (from 4713 BC).
fn in_range(micros: i64) -> bool {
    micros >= i64::from(MIN_DATE_DAYS) * MICROS_PER_DAY && !is_infinite_timestamp(micros)
}

/// A timestamp plus (or minus) an interval, as PostgreSQL's
/// `timestamp_pl_interval`: months by the calendar, then days, then the
/// time; an infinite timestamp stays as it is.
fn add_interval(micros: i64, interval: &Datum, subtract: bool) -> Result<i64, QueryError> {
    let Datum::Interval {
        months,
        days,
        micros: time,
    } = interval
    else {
        return Err(QueryError::internal("an interval was expected"));
    };
    if is_infinite_timestamp(micros) {
        return Ok(micros);
    }
    let sign = if subtract { -1 } else { 1 };
    let day = micros.div_euclid(MICROS_PER_DAY);
    let clock = micros.rem_euclid(MICROS_PER_DAY);
    let (year, month, day_of_month) = civil_from_days(day);
    let month_index = year * 12 + i64::from(month) - 1 + sign * i64::from(*months);
    let (year, month) = (
        month_index.div_euclid(12),
        month_index.rem_euclid(12) as u32 + 1,
    );
    let day_of_month = day_of_month.min(days_in_month(year, month));
    let shifted_day = days_from_civil(year, month, day_of_month) + sign * i64::from(*days);
    shifted_day
        .checked_mul(MICROS_PER_DAY)
        .and_then(|start| start.checked_add(clock))
        .and_then(|start| start.checked_add(time.checked_mul(sign)?))
        .filter(|sum| in_range(*sum))
        .ok_or_else(timestamp_out_of_range)
}

fn days_in_month(year: i64, month: u32) -> u32 {
    let (next_year, next_month) = if month == 12 {
        (year + 1, 1)
    } else {
        (year, month + 1)
    };
    (days_from_civil(next_year, next_month, 1) - days_from_civil(year, month, 1)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interval(months: i32, days: i32, micros: i64) -> Datum {
        Datum::Interval {
            months,
            days,
            micros,
        }
    }

    #[test]
    fn months_clamp_to_the_last_day() {
        let jan_31 = days_from_civil(2024, 1, 31) * MICROS_PER_DAY;
        let feb_29 = days_from_civil(2024, 2, 29) * MICROS_PER_DAY;
        assert_eq!(
            add_interval(jan_31, &interval(1, 0, 0), false).ok(),
            Some(feb_29)
        );
        assert_eq!(
            add_interval(feb_29, &interval(0, 1, 1), true).ok(),
            Some(feb_29 - MICROS_PER_DAY - 1)
        );
    }

    #[test]
    fn infinity_stays_and_overflow_is_an_error() {
        let infinity = midnight(floe_repr::strconv::DATE_INFINITY).unwrap();
        assert_eq!(
            add_interval(infinity, &interval(1, 1, 1), true).ok(),
            Some(infinity)
        );
        assert_eq!(
            add_days(floe_repr::strconv::DATE_MINUS_INFINITY, 5).ok(),
            Some(Datum::Date(floe_repr::strconv::DATE_MINUS_INFINITY))
        );
        assert!(add_interval(0, &interval(0, 0, i64::MIN), true).is_err());
        assert!(add_days(MAX_DATE_DAYS, 1).is_err());
        assert!(add_interval(i64::MAX - 1, &interval(0, 0, 1), false).is_err());
        assert!(add_interval(0, &interval(i32::MAX, 0, 0), false).is_err());
    }
}
