//! jsonpath's `.datetime()` and `.datetime(template)`: a string read as a
//! date, a time or a timestamp (each with or without a time zone), as
//! PostgreSQL 15's `executeDateTimeMethod` reads it.
//!
//! A path's items are documents, and a datetime is none: it travels among them
//! as a string no document holds, a NUL (which no jsonb string can contain)
//! then its kind, its value as a number to compare, its zone, and its text
//! ([`encode`]). A comparison of two reads their values ([`compare`]), `.type()`
//! names its kind, and the path's output shows its text, as PostgreSQL's
//! prints a datetime it returns as a string in ISO style ([`plain`]).

use std::cmp::Ordering;

use floe_repr::SqlState;
use floe_repr::strconv::{Json, days_from_civil};

use crate::error::QueryError;
use crate::functions::datetime::from_char::{ReadTime, read_datetime_whole};

/// What a datetime item is.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Date,
    Time,
    TimeTz,
    Timestamp,
    TimestampTz,
}

impl Kind {
    fn letter(self) -> char {
        match self {
            Kind::Date => 'd',
            Kind::Time => 't',
            Kind::TimeTz => 'z',
            Kind::Timestamp => 's',
            Kind::TimestampTz => 'S',
        }
    }

    fn of_letter(letter: char) -> Option<Kind> {
        Some(match letter {
            'd' => Kind::Date,
            't' => Kind::Time,
            'z' => Kind::TimeTz,
            's' => Kind::Timestamp,
            'S' => Kind::TimestampTz,
            _ => return None,
        })
    }

    /// `.type()`'s name of the kind.
    fn name(self) -> &'static str {
        match self {
            Kind::Date => "date",
            Kind::Time => "time without time zone",
            Kind::TimeTz => "time with time zone",
            Kind::Timestamp => "timestamp without time zone",
            Kind::TimestampTz => "timestamp with time zone",
        }
    }
}

/// A datetime item: its kind, its value as a number that orders it (days of
/// a date, microseconds of a time or a timestamp, in UTC where it has a
/// zone), its zone offset (seconds east) and its ISO text.
struct DateTime {
    kind: Kind,
    value: i64,
    zone: i64,
    text: String,
}

/// What begins a datetime item's string (see the module documentation).
const MARK: char = '\0';
/// What parts a datetime item's string.
const SEPARATOR: char = '\u{1}';

fn encode(datetime: &DateTime) -> Json {
    Json::String(format!(
        "{MARK}{}{}{SEPARATOR}{}{SEPARATOR}{}",
        datetime.kind.letter(),
        datetime.value,
        datetime.zone,
        datetime.text
    ))
}

fn decode(item: &Json) -> Option<DateTime> {
    let Json::String(text) = item else {
        return None;
    };
    let mut chars = text.strip_prefix(MARK)?.chars();
    let kind = Kind::of_letter(chars.next()?)?;
    let mut parts = chars.as_str().splitn(3, SEPARATOR);
    let value = parts.next()?.parse().ok()?;
    let zone = parts.next()?.parse().ok()?;
    let text = parts.next()?.to_string();
    Some(DateTime {
        kind,
        value,
        zone,
        text,
    })
}

/// Whether `item` is a datetime, not a string of a document.
pub fn is_datetime(item: &Json) -> bool {
    matches!(item, Json::String(text) if is_datetime_text(text))
}

/// Whether a string item's `text` is a datetime's.
pub fn is_datetime_text(text: &str) -> bool {
    text.starts_with(MARK)
}

/// `.type()` of a datetime item.
pub fn type_name(item: &Json) -> Option<&'static str> {
    decode(item).map(|datetime| datetime.kind.name())
}

/// An item as the path's output shows it: a datetime as its ISO text.
pub fn plain(item: Json) -> Json {
    match decode(&item) {
        Some(datetime) => Json::String(datetime.text),
        None => item,
    }
}

/// `.datetime()` (no `template`) or `.datetime(template)` of one item.
pub fn method(item: &Json, template: Option<&str>) -> Result<Json, QueryError> {
    let text = match item {
        Json::String(text) if !is_datetime(item) => text,
        _ => {
            return Err(QueryError::new(
                SqlState::INVALID_ARGUMENT_FOR_SQL_JSON_DATETIME_FUNCTION,
                "jsonpath item method .datetime() can only be applied to a string",
            ));
        }
    };
    let datetime = match template {
        Some(template) => templated(text, template)?,
        None => recognized(text).ok_or_else(|| {
            QueryError::new(
                SqlState::INVALID_ARGUMENT_FOR_SQL_JSON_DATETIME_FUNCTION,
                format!("datetime format is not recognized: \"{text}\""),
            )
            .with_hint("Use a datetime template argument to specify the input data format.")
        })?,
    };
    Ok(encode(&datetime))
}

/// Two datetimes compared as PostgreSQL's `compareDatetime` compares them:
/// of one kind, or a date and a timestamp (the date at midnight); `None` for
/// kinds that do not compare (a date and a time). A kind with a zone meets
/// one without only through the session's zone, which the `_tz` functions
/// alone may use (`session_zone`); elsewhere that is an error.
pub fn compare(
    left: &Json,
    right: &Json,
    session_zone: bool,
) -> Option<Result<Ordering, QueryError>> {
    let (mut left, mut right) = (decode(left)?, decode(right)?);
    if session_zone {
        (left, right) = in_one_zone(left, right);
    }
    let micros_of_date = |datetime: &DateTime| match datetime.kind {
        Kind::Date => datetime.value * MICROS_PER_DAY,
        _ => datetime.value,
    };
    Some(Ok(match (left.kind, right.kind) {
        (l, r) if l == r && l == Kind::TimeTz => left
            .value
            .cmp(&right.value)
            .then(right.zone.cmp(&left.zone)),
        (l, r) if l == r => left.value.cmp(&right.value),
        (Kind::Date | Kind::Timestamp, Kind::Date | Kind::Timestamp) => {
            micros_of_date(&left).cmp(&micros_of_date(&right))
        }
        (Kind::Date | Kind::Timestamp | Kind::TimestampTz, Kind::TimestampTz)
        | (Kind::TimestampTz, Kind::Date | Kind::Timestamp)
        | (Kind::Time | Kind::TimeTz, Kind::TimeTz)
        | (Kind::TimeTz, Kind::Time) => return Some(Err(zone_needed(left.kind, right.kind))),
        _ => return None,
    }))
}

/// Two datetimes of which one has a zone and the other not, the other read in
/// the session's zone as PostgreSQL's casts read it (a date at its midnight, a
/// time given the session's offset). A floe session's zone is always UTC (its
/// `timezone` setting takes no other), so the values are kept and only the
/// kind changes. Any other pair is returned as it came.
fn in_one_zone(left: DateTime, right: DateTime) -> (DateTime, DateTime) {
    match (left.kind, right.kind) {
        (Kind::Date | Kind::Timestamp, Kind::TimestampTz) | (Kind::Time, Kind::TimeTz) => {
            (in_session_zone(left), right)
        }
        (Kind::TimestampTz, Kind::Date | Kind::Timestamp) | (Kind::TimeTz, Kind::Time) => {
            (left, in_session_zone(right))
        }
        _ => (left, right),
    }
}

/// A date, timestamp or time without a zone as the kind with one, in UTC.
fn in_session_zone(datetime: DateTime) -> DateTime {
    let (kind, value) = match datetime.kind {
        Kind::Date => (Kind::TimestampTz, datetime.value * MICROS_PER_DAY),
        Kind::Timestamp => (Kind::TimestampTz, datetime.value),
        Kind::Time => (Kind::TimeTz, datetime.value),
        kind => (kind, datetime.value),
    };
    DateTime {
        kind,
        value,
        zone: 0,
        text: datetime.text,
    }
}

fn zone_needed(from: Kind, to: Kind) -> QueryError {
    // PostgreSQL names the conversion toward the kind with a zone.
    let (from, to) = if matches!(from, Kind::TimeTz | Kind::TimestampTz) {
        (to, from)
    } else {
        (from, to)
    };
    let short = |kind: Kind| match kind {
        Kind::Date => "date",
        Kind::Time => "time",
        Kind::TimeTz => "timetz",
        Kind::Timestamp => "timestamp",
        Kind::TimestampTz => "timestamptz",
    };
    // PostgreSQL 15 raises it as 0A000, which no `silent` keeps quiet.
    QueryError::new(
        SqlState::FEATURE_NOT_SUPPORTED,
        format!(
            "cannot convert value from {} to {} without time zone usage",
            short(from),
            short(to)
        ),
    )
    .with_hint("Use *_tz() function for time zone support.")
}

const MICROS_PER_SECOND: i64 = 1_000_000;
const MICROS_PER_DAY: i64 = 86_400 * MICROS_PER_SECOND;

// ---------------------------------------------------------------------------
// Reading a datetime

/// `text` read by the first of PostgreSQL's formats that reads all of it: a
/// date `yyyy-mm-dd`, a time `HH24:MI:SS` (with a fraction of up to six
/// digits, with a zone `+HH` or `+HH:MM`), or a date and a time apart by a
/// blank or a `T`. Blanks before it are skipped.
fn recognized(text: &str) -> Option<DateTime> {
    let mut input = Scanner {
        rest: text.trim_start(),
    };
    let days = input.date();
    let time = match days {
        Some(_) if input.rest.is_empty() => None,
        Some(_) => {
            let separator = input.rest.chars().next()?;
            if separator != ' ' && separator != 'T' {
                return None;
            }
            input.rest = &input.rest[1..];
            Some(input.time()?)
        }
        None => Some(input.time()?),
    };
    let zone = match time {
        Some(_) => input.zone()?,
        None => None,
    };
    if !input.rest.is_empty() {
        return None;
    }
    Some(made(
        ReadTime {
            epoch_days: days.unwrap_or(0),
            micros_of_day: time.unwrap_or(0),
            zone_seconds: zone,
        },
        days.is_some(),
        time.is_some(),
    ))
}

/// `text` read by `template` (PostgreSQL's `to_timestamp` fields), all of it:
/// a date where the template has only date fields, a time where only time
/// fields, a timestamp where both; with a zone where it reads one.
fn templated(text: &str, template: &str) -> Result<DateTime, QueryError> {
    let (read, fields) = read_datetime_whole(text, template)?;
    if !fields.date && !fields.time {
        return Err(QueryError::new(
            SqlState::INVALID_DATETIME_FORMAT,
            "datetime format is not dated and not timed",
        ));
    }
    if read.zone_seconds.is_some() && !fields.time {
        return Err(QueryError::new(
            SqlState::INVALID_DATETIME_FORMAT,
            "datetime format is zoned but not timed",
        ));
    }
    Ok(made(read, fields.date, fields.time))
}

/// The datetime of what was read, of the kind its fields make.
fn made(read: ReadTime, dated: bool, timed: bool) -> DateTime {
    let kind = match (dated, timed, read.zone_seconds.is_some()) {
        (true, false, _) => Kind::Date,
        (false, _, false) => Kind::Time,
        (false, _, true) => Kind::TimeTz,
        (true, true, false) => Kind::Timestamp,
        (true, true, true) => Kind::TimestampTz,
    };
    let zone = read.zone_seconds.unwrap_or(0);
    let date = civil_text(read.epoch_days);
    // `HH:MM:SS`, with the fraction's digits up to its last nonzero one.
    let time = floe_repr::strconv::format_time(read.micros_of_day);
    let (value, text) = match kind {
        Kind::Date => (read.epoch_days, date),
        Kind::Time => (read.micros_of_day, time),
        Kind::TimeTz => (
            read.micros_of_day - zone * MICROS_PER_SECOND,
            format!("{time}{}", zone_text(zone)),
        ),
        Kind::Timestamp => (
            read.epoch_days * MICROS_PER_DAY + read.micros_of_day,
            format!("{date}T{time}"),
        ),
        Kind::TimestampTz => (
            read.epoch_days * MICROS_PER_DAY + read.micros_of_day - zone * MICROS_PER_SECOND,
            format!("{date}T{time}{}", zone_text(zone)),
        ),
    };
    DateTime {
        kind,
        value,
        zone,
        text,
    }
}

/// The text still to read of a datetime.
struct Scanner<'a> {
    rest: &'a str,
}

impl Scanner<'_> {
    /// Up to `most` digits (at least one), as a number.
    fn digits(&mut self, most: usize) -> Option<(i64, usize)> {
        let count = self
            .rest
            .bytes()
            .take(most)
            .take_while(u8::is_ascii_digit)
            .count();
        if count == 0 {
            return None;
        }
        let value = self.rest[..count].parse().ok()?;
        self.rest = &self.rest[count..];
        Some((value, count))
    }

    fn eat(&mut self, c: char) -> bool {
        match self.rest.strip_prefix(c) {
            Some(rest) => {
                self.rest = rest;
                true
            }
            None => false,
        }
    }

    /// `yyyy-mm-dd`, a valid date, as days since 1970-01-01; nothing read
    /// where the text is no date.
    fn date(&mut self) -> Option<i64> {
        let mut ahead = Scanner { rest: self.rest };
        let (year, _) = ahead.digits(4)?;
        if !ahead.eat('-') {
            return None;
        }
        let (month, _) = ahead.digits(2)?;
        if !ahead.eat('-') {
            return None;
        }
        let (day, _) = ahead.digits(2)?;
        let valid = u32::try_from(month).is_ok_and(|month| {
            (1..=12).contains(&month)
                && day >= 1
                && day <= i64::from(floe_repr::strconv::days_in_month(year, month))
        });
        if !valid {
            return None;
        }
        self.rest = ahead.rest;
        Some(days_from_civil(year, month as u32, day as u32))
    }

    /// `HH24:MI:SS[.US]`, a valid time, as microseconds of its day.
    fn time(&mut self) -> Option<i64> {
        let (hour, _) = self.digits(2)?;
        let (minute, second) = (self.colon_field()?, self.colon_field()?);
        let micros = if self.eat('.') {
            let (fraction, places) = self.digits(6)?;
            fraction * 10_i64.pow(6 - places as u32)
        } else {
            0
        };
        if hour > 24
            || minute > 59
            || second > 59
            || (hour == 24 && (minute, second, micros) != (0, 0, 0))
        {
            return None;
        }
        Some(((hour * 60 + minute) * 60 + second) * MICROS_PER_SECOND + micros)
    }

    fn colon_field(&mut self) -> Option<i64> {
        if !self.eat(':') {
            return None;
        }
        Some(self.digits(2)?.0)
    }

    /// A zone `+HH` or `+HH:MM` (or `-`), in seconds east, if one follows;
    /// `None` (the whole) where a sign begins no zone.
    fn zone(&mut self) -> Option<Option<i64>> {
        let sign = match self.rest.chars().next() {
            Some('+') => 1,
            Some('-') => -1,
            _ => return Some(None),
        };
        self.rest = &self.rest[1..];
        let (hours, _) = self.digits(2)?;
        let minutes = if self.rest.starts_with(':') {
            self.colon_field()?
        } else {
            0
        };
        if minutes > 59 {
            return None;
        }
        Some(Some(sign * (hours * 3600 + minutes * 60)))
    }
}

// ---------------------------------------------------------------------------
// Printing a datetime as PostgreSQL's JSON shows it

fn civil_text(epoch_days: i64) -> String {
    let (year, month, day) = floe_repr::strconv::civil_from_days(epoch_days);
    format!("{year:04}-{month:02}-{day:02}")
}

/// `+HH:MM` (with `:SS` where the offset has seconds).
fn zone_text(zone: i64) -> String {
    let sign = if zone < 0 { '-' } else { '+' };
    let zone = zone.abs();
    let mut text = format!("{sign}{:02}:{:02}", zone / 3600, zone / 60 % 60);
    if zone % 60 != 0 {
        text.push_str(&format!(":{:02}", zone % 60));
    }
    text
}
