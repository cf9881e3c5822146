//! `date_trunc` as PostgreSQL defines it: of a timestamp a timestamp, of a
//! timestamptz or a date a timestamptz (a date is a timestamptz at midnight
//! of the session zone), of an interval or a time an interval, and with a
//! third argument, a zone, the timestamptz truncated in that zone. Every unit
//! down to the millennium.
//!
//! DataFusion's `date_trunc` types a date as a timestamp, takes no interval,
//! decade, century, millennium or zone, and fails on timestamps of years BC
//! from the hour up. A column of timestamps truncated to a constant unit is
//! truncated as a whole ([`DateTrunc`]); everything else row by row.

use std::sync::Arc;

use datafusion::arrow::array::AsArray;
use datafusion::arrow::datatypes::{DataType, FieldRef, TimeUnit, TimestampMicrosecondType};
use datafusion::common::Result as DfResult;
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use floe_repr::strconv::{civil_from_days, days_from_civil};
use floe_repr::{Datum, SqlScalarType, SqlState};

use super::{MICROS_PER_DAY, MICROS_PER_SECOND, Unit, Zone, interval, interval_parts};
use crate::error::QueryError;
use crate::functions::text::text;
use crate::functions::{Arguments, RowFunction, no_such_function};

const MICROS_PER_MINUTE: i64 = 60 * MICROS_PER_SECOND;
const MICROS_PER_HOUR: i64 = 60 * MICROS_PER_MINUTE;

pub(super) fn function() -> ScalarUDF {
    ScalarUDF::new_from_impl(DateTrunc {
        rows: RowFunction::new("date_trunc", Volatility::Immutable, trunc_type, date_trunc),
    })
}

/// `date_trunc`: row by row ([`date_trunc`]), but for a column of timestamps
/// (or timestamptz, in UTC) and a constant unit, whose microseconds are
/// truncated as one array.
#[derive(Debug, PartialEq, Eq, Hash)]
struct DateTrunc {
    rows: RowFunction,
}

impl ScalarUDFImpl for DateTrunc {
    fn name(&self) -> &str {
        self.rows.name()
    }

    fn signature(&self) -> &Signature {
        self.rows.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        self.rows.return_type(arg_types)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        self.rows.return_field_from_args(args)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let unit = match args.args.as_slice() {
            [ColumnarValue::Scalar(unit), ColumnarValue::Array(_)] => unit
                .try_as_str()
                .flatten()
                .and_then(|name| timestamp_unit(&name.to_lowercase(), "").ok()),
            _ => None,
        };
        let DataType::Timestamp(TimeUnit::Microsecond, zone) = args.return_field.data_type() else {
            return self.rows.invoke_with_args(args);
        };
        match (unit, &args.args[1]) {
            (Some(unit), ColumnarValue::Array(array))
                if matches!(
                    array.data_type(),
                    DataType::Timestamp(TimeUnit::Microsecond, _)
                ) =>
            {
                let truncated = array
                    .as_primitive::<TimestampMicrosecondType>()
                    .unary::<_, TimestampMicrosecondType>(|micros| {
                        if floe_repr::strconv::is_infinite_timestamp(micros) {
                            micros
                        } else {
                            truncate_local(unit, micros)
                        }
                    })
                    .with_timezone_opt(zone.clone());
                Ok(ColumnarValue::Array(Arc::new(truncated)))
            }
            _ => self.rows.invoke_with_args(args),
        }
    }
}

fn trunc_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    use SqlScalarType as S;
    // A string literal is of no type yet: with a zone only a timestamptz fits
    // it, without one PostgreSQL cannot choose.
    let unknown = arguments.constant_text(1).is_some();
    match arguments.types.as_slice() {
        [S::Text, S::Timestamp] => Ok(S::Timestamp),
        [S::Text, S::TimestampTz | S::Date] => Ok(S::TimestampTz),
        [S::Text, S::Interval | S::Time] => Ok(S::Interval),
        [S::Text, S::Timestamp | S::TimestampTz | S::Date, S::Text] => Ok(S::TimestampTz),
        [S::Text, S::Text, S::Text] if unknown => Ok(S::TimestampTz),
        [S::Text, S::Text] if unknown => Err(QueryError::new(
            SqlState::AMBIGUOUS_FUNCTION,
            format!(
                "function date_trunc({}, unknown) is not unique",
                if arguments.constant_text(0).is_some() {
                    "unknown"
                } else {
                    "text"
                }
            ),
        )
        .with_hint(
            "Could not choose a best candidate function. You might need to add explicit type casts.",
        )),
        _ => Err(no_such_function("date_trunc", &arguments.types)),
    }
}

fn date_trunc(row: &[Datum], ty: &SqlScalarType) -> Result<Datum, QueryError> {
    let unit = text(&row[0]).to_lowercase();
    match (&row[1], ty) {
        (Datum::Timestamp(micros), SqlScalarType::Timestamp) => {
            let unit = timestamp_unit(&unit, "timestamp without time zone")?;
            if super::is_infinite(&row[1]) {
                return Ok(row[1].clone());
            }
            Ok(Datum::Timestamp(truncate_local(unit, *micros)))
        }
        (Datum::Interval { .. } | Datum::Time(_), _) => {
            let (months, days, micros) = match &row[1] {
                Datum::Time(micros) => (0, 0, *micros),
                value => interval_parts(value)?,
            };
            let (months, days, micros) =
                truncate_interval(interval_unit(&unit)?, months, days, micros);
            Ok(interval(months, days, micros))
        }
        (value, _) => {
            let unit = timestamp_unit(&unit, "timestamp with time zone")?;
            // A date, a timestamp (in the session zone, UTC) and a string
            // literal are read as a timestamptz.
            let instant = floe_repr::cast_datum(value.clone(), &SqlScalarType::TimestampTz)
                .map_err(QueryError::from_value)?;
            // An infinite one is its own truncation.
            let Datum::TimestampTz(micros) = instant else {
                return Err(QueryError::internal("date_trunc of a timestamptz"));
            };
            if super::is_infinite(&instant) {
                return Ok(instant);
            }
            let zone = match row.get(2) {
                Some(zone) => Zone::parse(&text(zone))?,
                None => Zone::Fixed(0),
            };
            Ok(Datum::TimestampTz(truncate_in_zone(unit, micros, &zone)))
        }
    }
}

fn not_recognized(unit: &str, type_name: &str) -> QueryError {
    QueryError::new(
        SqlState::INVALID_PARAMETER_VALUE,
        format!("unit \"{unit}\" not recognized for type {type_name}"),
    )
}

/// A unit a timestamp truncates to: a calendar or clock unit.
fn timestamp_unit(name: &str, type_name: &str) -> Result<Unit, QueryError> {
    use Unit::*;
    match Unit::parse(name) {
        Some(
            unit @ (Microseconds | Milliseconds | Second | Minute | Hour | Day | Week | Month
            | Quarter | Year | Decade | Century | Millennium),
        ) => Ok(unit),
        _ => Err(not_recognized(name, type_name)),
    }
}

/// A unit an interval truncates to: a timestamp's, but the week, which
/// does not divide a month.
fn interval_unit(name: &str) -> Result<Unit, QueryError> {
    match timestamp_unit(name, "interval")? {
        Unit::Week => Err(QueryError::new(
            SqlState::FEATURE_NOT_SUPPORTED,
            format!("unit \"{name}\" not supported for type interval"),
        )
        .with_detail("Months usually have fractional weeks.")),
        unit => Ok(unit),
    }
}

/// A timestamptz truncated as the local time of `zone`. A unit of a day or
/// more gives that zone's midnight, at the offset it has then; a smaller
/// one keeps the offset the time had.
fn truncate_in_zone(unit: Unit, utc: i64, zone: &Zone) -> i64 {
    let offset = zone.offset_at_utc(utc) * MICROS_PER_SECOND;
    let local = truncate_local(unit, utc + offset);
    let offset = match unit {
        Unit::Microseconds | Unit::Milliseconds | Unit::Second | Unit::Minute | Unit::Hour => {
            offset
        }
        _ => zone.offset_of_local(local) * MICROS_PER_SECOND,
    };
    local - offset
}

/// A local time (microseconds since the epoch, no zone) truncated to `unit`,
/// one of [`timestamp_unit`]'s.
fn truncate_local(unit: Unit, micros: i64) -> i64 {
    let days = micros.div_euclid(MICROS_PER_DAY);
    let (year, month, _) = civil_from_days(days);
    let first_day = |year: i64, month: u32| days_from_civil(year, month, 1) * MICROS_PER_DAY;
    let down_to = |step: i64| micros - micros.rem_euclid(step);
    match unit {
        Unit::Milliseconds => down_to(1000),
        Unit::Second => down_to(MICROS_PER_SECOND),
        Unit::Minute => down_to(MICROS_PER_MINUTE),
        Unit::Hour => down_to(MICROS_PER_HOUR),
        Unit::Day => days * MICROS_PER_DAY,
        // The epoch was a Thursday: back to the Monday of its ISO week.
        Unit::Week => (days - (days + 3).rem_euclid(7)) * MICROS_PER_DAY,
        Unit::Month => first_day(year, month),
        Unit::Quarter => first_day(year, (month - 1) / 3 * 3 + 1),
        Unit::Year => first_day(year, 1),
        Unit::Decade => first_day(year.div_euclid(10) * 10, 1),
        Unit::Century => first_day(first_year(year, 100), 1),
        Unit::Millennium => first_day(first_year(year, 1000), 1),
        _ => micros,
    }
}

/// The first year of the century (`span` 100) or millennium (1000) that
/// holds `year` (0 is 1 BC): one ending in 1 AD (2001), or in 00 BC (100 BC),
/// as PostgreSQL counts them.
fn first_year(year: i64, span: i64) -> i64 {
    if year > 0 {
        (year - 1) / span * span + 1
    } else {
        let before_christ = 1 - year;
        1 - (before_christ + span - 1) / span * span
    }
}

/// An interval truncated to `unit`, each field toward zero, as PostgreSQL
/// does: `-3 days -25 hours` to the day is `-3 days`.
fn truncate_interval(unit: Unit, months: i32, days: i32, micros: i64) -> (i32, i32, i64) {
    let years = |span: i32| (months / 12 / span * span * 12, 0, 0);
    let clock = |step: i64| (months, days, micros / step * step);
    match unit {
        Unit::Millennium => years(1000),
        Unit::Century => years(100),
        Unit::Decade => years(10),
        Unit::Year => years(1),
        Unit::Quarter => (months / 3 * 3, 0, 0),
        Unit::Month => (months, 0, 0),
        Unit::Day => (months, days, 0),
        Unit::Hour => clock(MICROS_PER_HOUR),
        Unit::Minute => clock(MICROS_PER_MINUTE),
        Unit::Second => clock(MICROS_PER_SECOND),
        Unit::Milliseconds => clock(1000),
        _ => (months, days, micros),
    }
}
