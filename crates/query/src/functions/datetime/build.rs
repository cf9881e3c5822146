//! Functions that build dates, times and numbers from text or from parts:
//! `to_timestamp` (of text and a template, or of Unix seconds), `to_date`,
//! `to_number`, `make_timestamp`, `make_timestamptz` and `isfinite`.

use datafusion::logical_expr::{ScalarUDF, Volatility};
use floe_repr::strconv::days_from_civil;
use floe_repr::{Datum, SqlScalarType, SqlState};

use super::from_char::{read_datetime, read_number};
use super::{MICROS_PER_DAY, MICROS_PER_SECOND, is_number};
use crate::error::QueryError;
use crate::functions::text::text;
use crate::functions::{Arguments, RowFunction, no_such_function};

pub(super) fn functions() -> Vec<ScalarUDF> {
    let immutable = Volatility::Immutable;
    vec![
        RowFunction::new(
            "to_timestamp",
            Volatility::Stable,
            to_timestamp_type,
            |row, _| to_timestamp(row),
        )
        .udf(),
        RowFunction::new("to_date", Volatility::Stable, to_date_type, |row, _| {
            let read = read_datetime(&text(&row[0]), &text(&row[1]))?;
            let days = i32::try_from(read.epoch_days).map_err(|_| date_out_of_range())?;
            Ok(Datum::Date(days))
        })
        .udf(),
        RowFunction::new("to_number", immutable, to_number_type, |row, ty| {
            let digits = read_number(&text(&row[0]), &text(&row[1]))?;
            floe_repr::cast_datum(Datum::Text(digits), ty).map_err(QueryError::from_value)
        })
        .udf(),
        RowFunction::new("make_timestamp", immutable, make_type, |row, _| {
            make_timestamp(row).map(Datum::Timestamp)
        })
        .udf(),
        RowFunction::new(
            "make_timestamptz",
            Volatility::Stable,
            make_type,
            |row, _| make_timestamptz(row).map(Datum::TimestampTz),
        )
        .udf(),
        RowFunction::new(
            super::MAKE_INTERVAL,
            immutable,
            make_interval_type,
            |row, _| make_interval(row),
        )
        .udf(),
        // The time at the call, unlike `now()` (the transaction's start).
        RowFunction::new(
            "clock_timestamp",
            Volatility::Volatile,
            clock_type,
            |_, _| Ok(Datum::TimestampTz(clock_micros())),
        )
        .nullary()
        .udf(),
        RowFunction::new("isfinite", immutable, isfinite_type, |row, _| {
            Ok(Datum::Bool(!super::is_infinite(&row[0])))
        })
        .udf(),
    ]
}

fn is_text(ty: &SqlScalarType) -> bool {
    matches!(ty, SqlScalarType::Text | SqlScalarType::VarChar { .. })
}

/// Checks that the arguments are `types` (text or a number, by position).
fn expect(
    arguments: &Arguments<'_>,
    kinds: &[fn(&SqlScalarType) -> bool],
) -> Result<(), QueryError> {
    let fits = arguments.types.len() == kinds.len()
        && arguments.types.iter().zip(kinds).all(|(ty, kind)| kind(ty));
    if fits {
        Ok(())
    } else {
        Err(no_such_function(arguments.function, &arguments.types))
    }
}

fn to_timestamp_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    match arguments.types.len() {
        1 => expect(arguments, &[is_number])?,
        _ => expect(arguments, &[is_text, is_text])?,
    }
    Ok(SqlScalarType::TimestampTz)
}

fn to_date_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    expect(arguments, &[is_text, is_text])?;
    Ok(SqlScalarType::Date)
}

fn to_number_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    expect(arguments, &[is_text, is_text])?;
    Ok(SqlScalarType::Numeric {
        precision: None,
        max_scale: None,
    })
}

fn make_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    let zoned = arguments.function == "make_timestamptz";
    let fits = arguments.types.len() == 6 && arguments.types.iter().all(is_number)
        || zoned
            && arguments.types.len() == 7
            && arguments.types[..6].iter().all(is_number)
            && is_text(&arguments.types[6]);
    if !fits {
        return Err(no_such_function(arguments.function, &arguments.types));
    }
    Ok(if zoned {
        SqlScalarType::TimestampTz
    } else {
        SqlScalarType::Timestamp
    })
}

fn isfinite_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    let fits = matches!(
        arguments.types.as_slice(),
        [SqlScalarType::Date
            | SqlScalarType::Timestamp
            | SqlScalarType::TimestampTz
            | SqlScalarType::Interval]
    );
    if !fits {
        return Err(no_such_function("isfinite", &arguments.types));
    }
    Ok(SqlScalarType::Bool)
}

fn number(datum: &Datum) -> Result<f64, QueryError> {
    crate::functions::math::as_double(datum)
}

fn date_out_of_range() -> QueryError {
    QueryError::new(SqlState::DATETIME_FIELD_OVERFLOW, "date out of range")
}

fn timestamp_out_of_range() -> QueryError {
    QueryError::new(SqlState::DATETIME_FIELD_OVERFLOW, "timestamp out of range")
}

/// `to_timestamp(seconds)` or `to_timestamp(text, template)`; floe's
/// session zone is UTC, so local time is UTC unless the text gives a zone.
fn to_timestamp(row: &[Datum]) -> Result<Datum, QueryError> {
    if let [seconds] = row {
        let seconds = number(seconds)?;
        if seconds.is_nan() {
            return Err(QueryError::new(
                SqlState::DATETIME_FIELD_OVERFLOW,
                "timestamp cannot be NaN",
            ));
        }
        let micros = (seconds * MICROS_PER_SECOND as f64).round();
        if !micros.is_finite() || micros.abs() >= i64::MAX as f64 {
            return Err(timestamp_out_of_range());
        }
        return Ok(Datum::TimestampTz(micros as i64));
    }
    let read = read_datetime(&text(&row[0]), &text(&row[1]))?;
    let zone = read.zone_seconds.unwrap_or(0) * MICROS_PER_SECOND;
    read.epoch_days
        .checked_mul(MICROS_PER_DAY)
        .and_then(|day| day.checked_add(read.micros_of_day))
        .and_then(|local| local.checked_sub(zone))
        .map(Datum::TimestampTz)
        .ok_or_else(timestamp_out_of_range)
}

/// `make_timestamp(year, month, day, hour, minute, seconds)`.
fn make_timestamp(row: &[Datum]) -> Result<i64, QueryError> {
    let part = |index: usize| number(&row[index]);
    let (year, month, day) = (part(0)? as i64, part(1)? as i64, part(2)? as i64);
    let valid_month = (1..=12).contains(&month);
    let days_in_month = if valid_month {
        let next = if month == 12 {
            days_from_civil(year + 1, 1, 1)
        } else {
            days_from_civil(year, month as u32 + 1, 1)
        };
        next - days_from_civil(year, month as u32, 1)
    } else {
        0
    };
    if year == 0 || !valid_month || day < 1 || day > days_in_month {
        return Err(QueryError::new(
            SqlState::DATETIME_FIELD_OVERFLOW,
            format!("date field value out of range: {year}-{month:02}-{day:02}"),
        ));
    }
    // A negative year is BC: -1 is 1 BC, astronomical year 0.
    let astronomical = if year < 0 { year + 1 } else { year };
    let (hour, minute, seconds) = (part(3)?, part(4)?, part(5)?);
    let valid_time = (0.0..=24.0).contains(&hour)
        && (0.0..60.0).contains(&minute)
        && (0.0..=60.0).contains(&seconds)
        && hour.fract() == 0.0
        && minute.fract() == 0.0;
    if !valid_time {
        return Err(QueryError::new(
            SqlState::DATETIME_FIELD_OVERFLOW,
            format!("time field value out of range: {hour}:{minute:02}:{seconds:02}"),
        ));
    }
    let micros_of_day = ((hour * 3600.0 + minute * 60.0) * MICROS_PER_SECOND as f64
        + (seconds * MICROS_PER_SECOND as f64).round()) as i64;
    days_from_civil(astronomical, month as u32, day as u32)
        .checked_mul(MICROS_PER_DAY)
        .and_then(|day| day.checked_add(micros_of_day))
        .ok_or_else(timestamp_out_of_range)
}

/// `make_timestamptz(..., [zone])`: the local time in the zone (UTC when
/// none is given) as a point in time.
fn make_timestamptz(row: &[Datum]) -> Result<i64, QueryError> {
    let local = make_timestamp(&row[..6])?;
    let Some(zone) = row.get(6) else {
        return Ok(local);
    };
    match super::timezone(
        &[zone.clone(), Datum::Timestamp(local)],
        &SqlScalarType::TimestampTz,
    )? {
        Datum::TimestampTz(micros) => Ok(micros),
        other => Err(QueryError::internal(format!(
            "make_timestamptz zone gave {other:?}"
        ))),
    }
}

fn clock_type(_: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    Ok(SqlScalarType::TimestampTz)
}

fn clock_micros() -> i64 {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since_epoch.as_micros()).unwrap_or(i64::MAX)
}

fn make_interval_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    let integer = |ty: &SqlScalarType| {
        matches!(
            ty,
            SqlScalarType::Int16 | SqlScalarType::Int32 | SqlScalarType::Int64
        )
    };
    let fits = arguments.types.len() == 7
        && arguments.types[..6].iter().all(integer)
        && is_number(&arguments.types[6]);
    if !fits {
        return Err(no_such_function("make_interval", &arguments.types));
    }
    Ok(SqlScalarType::Interval)
}

/// `make_interval(years, months, weeks, days, hours, mins, secs)`.
fn make_interval(row: &[Datum]) -> Result<Datum, QueryError> {
    let overflow = || QueryError::new(SqlState::DATETIME_FIELD_OVERFLOW, "interval out of range");
    let whole = |index: usize| -> Result<i64, QueryError> { Ok(number(&row[index])? as i64) };
    let months = whole(0)?
        .checked_mul(12)
        .and_then(|m| m.checked_add(whole(1).ok()?))
        .and_then(|m| i32::try_from(m).ok())
        .ok_or_else(overflow)?;
    let days = whole(2)?
        .checked_mul(7)
        .and_then(|d| d.checked_add(whole(3).ok()?))
        .and_then(|d| i32::try_from(d).ok())
        .ok_or_else(overflow)?;
    let seconds = number(&row[6])?;
    let micros =
        (whole(4)? as f64 * 3600.0 + whole(5)? as f64 * 60.0 + seconds) * MICROS_PER_SECOND as f64;
    if !micros.is_finite() || micros.abs() >= i64::MAX as f64 {
        return Err(overflow());
    }
    Ok(Datum::Interval {
        months,
        days,
        micros: micros.round() as i64,
    })
}
