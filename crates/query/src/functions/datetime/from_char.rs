//! The input side of PostgreSQL's templates (`formatting.c`'s `DCH_from_char`
//! and `NUM_processor` reading): `to_timestamp(text, template)`,
//! `to_date(text, template)` and `to_number(text, template)`.
//!
//! As PostgreSQL does outside `FX` mode: blanks before a field are skipped, a
//! template's separator skips one separator of the input (or none where the
//! input has none), and a number runs to its field's width only when another
//! field follows at once (`YYYYMMDD`); otherwise it takes every digit there is.

use floe_repr::SqlState;
use floe_repr::strconv::days_from_civil;

use super::to_char::{
    DATETIME_KEYWORDS, DAYS, Field, MONTHS, NUMBER_KEYWORDS, NumberKeyword, Piece, ROMAN_MONTHS,
    parse,
};
use crate::error::QueryError;

/// The Julian day number of 1970-01-01.
const JULIAN_EPOCH: i64 = 2_440_588;

/// A point in time read from text: days since 1970-01-01, the time of day,
/// and the zone offset the text gave (`TZH`, `TZM`), in seconds east.
pub struct ReadTime {
    pub epoch_days: i64,
    pub micros_of_day: i64,
    pub zone_seconds: Option<i64>,
}

/// The fields read, before they make a date and a time.
#[derive(Default)]
struct Fields {
    year: Option<i64>,
    century: Option<i64>,
    month: Option<i64>,
    day: Option<i64>,
    day_of_year: Option<i64>,
    julian: Option<i64>,
    hour: i64,
    minute: i64,
    second: i64,
    micros: i64,
    /// Whether the hour came from a 12-hour field, which AM/PM completes.
    twelve_hour: bool,
    afternoon: Option<bool>,
    before_christ: bool,
    zone_hours: Option<i64>,
    zone_minutes: Option<i64>,
}

/// The input not read yet.
struct Input<'a> {
    rest: &'a str,
}

impl<'a> Input<'a> {
    fn skip_blanks(&mut self) {
        self.rest = self.rest.trim_start();
    }

    /// Up to `width` digits (every digit with no width), with a sign where
    /// `signed`; `name` is the template field, for errors.
    fn number(
        &mut self,
        width: Option<usize>,
        signed: bool,
        name: &str,
    ) -> Result<(i64, usize), QueryError> {
        let mut text = self.rest;
        let negative = signed && text.starts_with('-');
        if signed && (text.starts_with('-') || text.starts_with('+')) {
            text = &text[1..];
        }
        let limit = width.unwrap_or(usize::MAX);
        let digits = text
            .bytes()
            .take(limit)
            .take_while(u8::is_ascii_digit)
            .count();
        if digits == 0 {
            let shown: String = self.rest.chars().take(limit.min(8)).collect();
            return Err(QueryError::new(
                SqlState::INVALID_DATETIME_FORMAT,
                format!("invalid value \"{shown}\" for \"{name}\""),
            )
            .with_detail("Value must be an integer."));
        }
        let value: i64 = text[..digits].parse().map_err(|_| {
            QueryError::new(
                SqlState::DATETIME_FIELD_OVERFLOW,
                format!("value for \"{name}\" in source string is out of range"),
            )
        })?;
        self.rest = &text[digits..];
        Ok((if negative { -value } else { value }, digits))
    }

    /// The longest of `words` the input starts with (ignoring case), by index.
    fn word(&mut self, words: &[&str], name: &str) -> Result<usize, QueryError> {
        let lower = self.rest.to_lowercase();
        let found = words
            .iter()
            .enumerate()
            .filter(|(_, word)| lower.starts_with(&word.to_lowercase()))
            .max_by_key(|(_, word)| word.len());
        match found {
            Some((index, word)) if self.rest.is_char_boundary(word.len()) => {
                self.rest = &self.rest[word.len()..];
                Ok(index)
            }
            _ => {
                let shown: String = self.rest.chars().take(8).collect();
                Err(QueryError::new(
                    SqlState::INVALID_DATETIME_FORMAT,
                    format!("invalid value \"{shown}\" for \"{name}\""),
                )
                .with_detail(
                    "The given value did not match any of the allowed values for this field.",
                ))
            }
        }
    }

    /// A template's literal text: a separator (a blank or a character not
    /// a letter or digit) skips the input's blanks and one separator, if
    /// there is one; another character skips itself.
    fn literal(&mut self, text: &str) {
        for c in text.chars() {
            let separator = !c.is_alphanumeric();
            if separator {
                self.skip_blanks();
            }
            match self.rest.chars().next() {
                Some(next) if next == c || (separator && !next.is_alphanumeric()) => {
                    self.rest = &self.rest[next.len_utf8()..];
                }
                _ => {}
            }
        }
    }
}

/// Reads `input` as `template` describes it (`to_timestamp`, `to_date`).
pub fn read_datetime(input: &str, template: &str) -> Result<ReadTime, QueryError> {
    read_fields(input, template).map(|(read, _, _)| read)
}

/// Which kinds of fields a template read.
pub struct FieldKinds {
    /// A year, month, day, ...
    pub date: bool,
    /// An hour, minute, second or fraction.
    pub time: bool,
}

/// [`read_datetime`] where all of `input` must be read (jsonpath's
/// `.datetime(template)`, PostgreSQL's strict mode), and which kinds of
/// fields the template has.
pub fn read_datetime_whole(
    input: &str,
    template: &str,
) -> Result<(ReadTime, FieldKinds), QueryError> {
    let (read, kinds, rest) = read_fields(input, template)?;
    if !rest.trim_start().is_empty() {
        return Err(QueryError::new(
            SqlState::INVALID_DATETIME_FORMAT,
            "trailing characters remain in input string after datetime format",
        ));
    }
    Ok((read, kinds))
}

/// [`read_datetime`], the kinds of fields read and the input left unread.
fn read_fields<'a>(
    input: &'a str,
    template: &str,
) -> Result<(ReadTime, FieldKinds, &'a str), QueryError> {
    let mut kinds = FieldKinds {
        date: false,
        time: false,
    };
    let keywords: Vec<(&str, (&str, Field))> = DATETIME_KEYWORDS
        .iter()
        .map(|(name, field, _)| (*name, (*name, *field)))
        .collect();
    let pieces = parse(template, &keywords, true);
    let mut reader = Input { rest: input };
    let mut fields = Fields::default();
    for (index, piece) in pieces.iter().enumerate() {
        match piece {
            Piece::Text(text) => reader.literal(text),
            Piece::Keyword {
                keyword: (name, field),
                fill_mode,
                ..
            } => {
                reader.skip_blanks();
                // A field followed at once by another has its fixed width.
                let adjacent = matches!(pieces.get(index + 1), Some(Piece::Keyword { .. }));
                let fixed = adjacent && !fill_mode;
                read_field(&mut reader, &mut fields, *field, name, fixed)?;
                kinds.date |= is_date_field(*field);
                kinds.time |= is_time_field(*field);
            }
        }
    }
    Ok((assemble(&fields, input)?, kinds, reader.rest))
}

fn is_date_field(field: Field) -> bool {
    matches!(
        field,
        Field::Year(_)
            | Field::YearWithComma
            | Field::Century
            | Field::MonthNumber
            | Field::MonthName { .. }
            | Field::RomanMonth
            | Field::DayOfMonth
            | Field::DayOfYear
            | Field::Julian
            | Field::Era { .. }
    )
}

fn is_time_field(field: Field) -> bool {
    matches!(
        field,
        Field::Hour24
            | Field::Hour12
            | Field::Minute
            | Field::Second
            | Field::SecondsOfDay
            | Field::Millisecond
            | Field::Microsecond
            | Field::Fraction(_)
            | Field::Meridiem { .. }
    )
}

/// Reads one template field into `fields`.
fn read_field(
    input: &mut Input<'_>,
    fields: &mut Fields,
    field: Field,
    name: &str,
    fixed: bool,
) -> Result<(), QueryError> {
    let width = |digits: usize| fixed.then_some(digits);
    match field {
        Field::Year(digits) => {
            let (year, read) = input.number(width(digits as usize), true, name)?;
            fields.year = Some(partial_year(year, read, digits));
        }
        Field::YearWithComma => {
            let (thousands, _) = input.number(None, false, name)?;
            let year = if input.rest.starts_with(',') {
                input.rest = &input.rest[1..];
                let (rest, _) = input.number(Some(3), false, name)?;
                thousands * 1000 + rest
            } else {
                thousands
            };
            fields.year = Some(year);
        }
        Field::Century => fields.century = Some(input.number(width(2), true, name)?.0),
        Field::MonthNumber => fields.month = Some(input.number(width(2), false, name)?.0),
        Field::MonthName { abbreviated } => {
            let names: Vec<&str> = if abbreviated {
                MONTHS.iter().map(|m| &m[..3]).collect()
            } else {
                MONTHS.to_vec()
            };
            fields.month = Some(input.word(&names, name)? as i64 + 1);
        }
        Field::RomanMonth => fields.month = Some(input.word(&ROMAN_MONTHS, name)? as i64 + 1),
        Field::DayName { abbreviated } => {
            let names: Vec<&str> = if abbreviated {
                DAYS.iter().map(|d| &d[..3]).collect()
            } else {
                DAYS.to_vec()
            };
            input.word(&names, name)?;
        }
        Field::DayOfMonth => fields.day = Some(input.number(width(2), false, name)?.0),
        Field::DayOfYear => fields.day_of_year = Some(input.number(width(3), false, name)?.0),
        // The day of the week and the quarter say nothing a date needs.
        Field::DayOfWeek | Field::Quarter => {
            input.number(width(1), false, name)?;
        }
        Field::Julian => fields.julian = Some(input.number(None, false, name)?.0),
        Field::Hour24 => fields.hour = input.number(width(2), false, name)?.0,
        Field::Hour12 => {
            fields.hour = input.number(width(2), false, name)?.0;
            fields.twelve_hour = true;
        }
        Field::Minute => fields.minute = input.number(width(2), false, name)?.0,
        Field::Second => fields.second = input.number(width(2), false, name)?.0,
        Field::SecondsOfDay => {
            let seconds = input.number(width(5), false, name)?.0;
            fields.hour = seconds / 3600;
            fields.minute = seconds / 60 % 60;
            fields.second = seconds % 60;
        }
        // A fraction read as digits after a point: `SS.MS` of `12.3` is 300 ms.
        Field::Millisecond => fields.micros = fraction(input, 3, name)?,
        Field::Microsecond => fields.micros = fraction(input, 6, name)?,
        Field::Fraction(digits) => fields.micros = fraction(input, digits as usize, name)?,
        Field::Meridiem { .. } => {
            let index = input.word(&["am", "pm", "a.m.", "p.m."], name)?;
            fields.afternoon = Some(index % 2 == 1);
        }
        Field::Era { .. } => {
            let index = input.word(&["ad", "bc", "a.d.", "b.c."], name)?;
            fields.before_christ = index % 2 == 1;
        }
        Field::ZoneHour => fields.zone_hours = Some(input.number(width(2), true, name)?.0),
        Field::ZoneMinute => fields.zone_minutes = Some(input.number(width(2), false, name)?.0),
        Field::Exact => {}
        Field::Zone
        | Field::Offset
        | Field::IsoYear(_)
        | Field::IsoWeek
        | Field::IsoDayOfWeek
        | Field::IsoDayOfYear
        | Field::WeekOfYear
        | Field::WeekOfMonth => {
            return Err(QueryError::new(
                SqlState::FEATURE_NOT_SUPPORTED,
                format!("formatting field \"{name}\" is only supported in to_char"),
            ));
        }
    }
    Ok(())
}

/// A year of fewer digits than four, taken nearest 2020 as PostgreSQL does
/// (`YY` 69 is 2069, 70 is 1970).
fn partial_year(year: i64, read: usize, digits: u32) -> i64 {
    if read > 3 || digits > 3 || year < 0 {
        return year;
    }
    match read {
        1 => year + 2000,
        2 if year < 70 => year + 2000,
        2 => year + 1900,
        _ if year < 100 => year + 2000,
        _ if year < 520 => year + 2000,
        _ => year + 1000,
    }
}

/// Digits of a second's fraction, scaled to microseconds from `places`
/// digits (`MS`: 3, `US`: 6).
fn fraction(input: &mut Input<'_>, places: usize, name: &str) -> Result<i64, QueryError> {
    let (value, read) = input.number(Some(places), false, name)?;
    let scale = 10_i64.pow(u32::try_from(6 - read.min(6)).unwrap_or(0));
    Ok(value * scale)
}

fn out_of_range(input: &str) -> QueryError {
    QueryError::new(
        SqlState::DATETIME_FIELD_OVERFLOW,
        format!("date/time field value out of range: \"{input}\""),
    )
}

/// The date and time the fields make, checked as PostgreSQL checks them.
fn assemble(fields: &Fields, input: &str) -> Result<ReadTime, QueryError> {
    let mut year = match (fields.year, fields.century) {
        (Some(year), _) => year,
        (None, Some(century)) => (century - 1) * 100 + 1,
        // No year is year 0, 1 BC, as in PostgreSQL.
        (None, None) => 0,
    };
    if fields.before_christ && (fields.year.is_some() || fields.century.is_some()) {
        year = 1 - year;
    }
    let epoch_days = if let Some(julian) = fields.julian {
        julian - JULIAN_EPOCH
    } else if let (Some(day_of_year), None) = (fields.day_of_year, fields.month) {
        let days = if is_leap(year) { 366 } else { 365 };
        if !(1..=days).contains(&day_of_year) {
            return Err(out_of_range(input));
        }
        days_from_civil(year, 1, 1) + day_of_year - 1
    } else {
        let month = fields.month.unwrap_or(1);
        let day = fields.day.unwrap_or(1);
        if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
            return Err(out_of_range(input));
        }
        days_from_civil(year, month as u32, day as u32)
    };
    let mut hour = fields.hour;
    if fields.twelve_hour && !(1..=12).contains(&hour) {
        return Err(QueryError::new(
            SqlState::INVALID_DATETIME_FORMAT,
            format!("hour \"{hour}\" is invalid for the 12-hour clock"),
        )
        .with_hint("Use the 24-hour clock, or give an hour between 1 and 12."));
    }
    match fields.afternoon {
        Some(true) if hour < 12 => hour += 12,
        Some(false) if hour == 12 => hour = 0,
        _ => {}
    }
    if hour > 24 || fields.minute > 59 || fields.second > 60 {
        return Err(out_of_range(input));
    }
    let micros_of_day =
        ((hour * 60 + fields.minute) * 60 + fields.second) * 1_000_000 + fields.micros;
    let zone_seconds = match (fields.zone_hours, fields.zone_minutes) {
        (None, None) => None,
        (hours, minutes) => {
            let hours = hours.unwrap_or(0);
            let minutes = minutes.unwrap_or(0);
            let sign = if hours < 0 { -1 } else { 1 };
            Some(hours * 3600 + sign * minutes * 60)
        }
    };
    Ok(ReadTime {
        epoch_days,
        micros_of_day,
        zone_seconds,
    })
}

fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// `to_number(text, template)`: the digits, point and sign `template`
/// reads from `input`, as a numeric's text.
pub fn read_number(input: &str, template: &str) -> Result<String, QueryError> {
    let pieces = parse(template, NUMBER_KEYWORDS, false);
    let mut rest = input;
    let mut digits = String::new();
    let mut negative = false;
    let mut started = false;
    for piece in &pieces {
        match piece {
            Piece::Keyword {
                keyword: NumberKeyword::Nine | NumberKeyword::Zero,
                ..
            } => {
                // A sign may lead the first digit without a sign field.
                if !started && let Some(after) = rest.strip_prefix('-') {
                    negative = true;
                    rest = after;
                } else if !started && let Some(after) = rest.strip_prefix('+') {
                    rest = after;
                }
                // A digit position takes one character of the input, a digit
                // or not (PostgreSQL skips what is no digit).
                if let Some(c) = rest.chars().next() {
                    if c.is_ascii_digit() {
                        digits.push(c);
                        started = true;
                    }
                    rest = &rest[c.len_utf8()..];
                }
            }
            Piece::Keyword {
                keyword: NumberKeyword::Point | NumberKeyword::LocalePoint,
                ..
            } => {
                if let Some(after) = rest.strip_prefix('.') {
                    digits.push('.');
                    rest = after;
                }
            }
            Piece::Keyword {
                keyword: NumberKeyword::Comma | NumberKeyword::LocaleComma,
                ..
            } => {
                if let Some(after) = rest.strip_prefix(',') {
                    rest = after;
                }
            }
            Piece::Keyword {
                keyword:
                    NumberKeyword::Minus
                    | NumberKeyword::Plus
                    | NumberKeyword::Sign
                    | NumberKeyword::LocaleSign,
                ..
            } => {
                rest = rest.trim_start();
                if let Some(after) = rest.strip_prefix('-') {
                    negative = true;
                    rest = after;
                } else if let Some(after) = rest.strip_prefix('+') {
                    rest = after;
                }
            }
            Piece::Keyword {
                keyword: NumberKeyword::FillMode,
                ..
            } => {}
            // A currency symbol: one character, as PostgreSQL's C locale reads it.
            Piece::Keyword {
                keyword: NumberKeyword::Unsupported("L" | "l"),
                ..
            } => {
                if let Some(c) = rest.chars().next() {
                    rest = &rest[c.len_utf8()..];
                }
            }
            Piece::Keyword {
                keyword: NumberKeyword::Unsupported(name),
                ..
            } => {
                return Err(QueryError::new(
                    SqlState::FEATURE_NOT_SUPPORTED,
                    format!("\"{name}\" is not supported in to_number"),
                ));
            }
            Piece::Keyword {
                keyword: NumberKeyword::Exponent,
                ..
            } => {
                return Err(QueryError::new(
                    SqlState::FEATURE_NOT_SUPPORTED,
                    "\"EEEE\" not supported for input",
                ));
            }
            Piece::Keyword {
                keyword: NumberKeyword::Roman { .. },
                ..
            } => {
                return Err(QueryError::new(
                    SqlState::FEATURE_NOT_SUPPORTED,
                    "\"RN\" not supported for input",
                ));
            }
            Piece::Text(text) => {
                for _ in text.chars() {
                    if let Some(c) = rest.chars().next() {
                        rest = &rest[c.len_utf8()..];
                    }
                }
            }
        }
    }
    if !digits.bytes().any(|b| b.is_ascii_digit()) {
        return Err(QueryError::new(
            SqlState::INVALID_TEXT_REPRESENTATION,
            "invalid input syntax for type numeric: \" \"",
        ));
    }
    if negative {
        digits.insert(0, '-');
    }
    Ok(digits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timestamp(input: &str, template: &str) -> (i64, i64) {
        let read = read_datetime(input, template).unwrap_or_else(|e| panic!("{input}: {e:?}"));
        (read.epoch_days, read.micros_of_day)
    }

    #[test]
    fn dates_and_times_read_as_postgres_reads_them() {
        let day = days_from_civil(2000, 12, 5);
        assert_eq!(timestamp("05 Dec 2000", "DD Mon YYYY"), (day, 0));
        assert_eq!(timestamp("20001205", "YYYYMMDD"), (day, 0));
        assert_eq!(timestamp("2000-12-05", "YYYY MM DD"), (day, 0));
        assert_eq!(
            timestamp("2000-12-05 10:11:12.5", "YYYY-MM-DD HH24:MI:SS.MS"),
            (day, 36_672_500_000)
        );
        assert_eq!(timestamp("5 december 00", "DD Month YY"), (day, 0));
        assert_eq!(
            timestamp("12/05/2000 01:02 PM", "MM/DD/YYYY HH:MI AM"),
            (day, (13 * 60 + 2) * 60_000_000)
        );
        assert_eq!(timestamp("2451884", "J"), (day, 0));
        assert_eq!(timestamp("2000 340", "YYYY DDD"), (day, 0));
    }

    #[test]
    fn bad_fields_are_postgres_errors() {
        let error = |input: &str, template: &str| match read_datetime(input, template) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("{input} read"),
        };
        assert!(error("2000-13-01", "YYYY-MM-DD").contains("out of range"));
        assert!(error("2000-02-30", "YYYY-MM-DD").contains("out of range"));
        assert!(error("xx", "MM").contains("invalid value \"xx\" for \"MM\""));
        assert!(error("13:00 PM", "HH:MI AM").contains("12-hour clock"));
        assert!(error("2000 Foo", "YYYY Mon").contains("for \"Mon\""));
    }

    #[test]
    fn numbers_read_through_templates() {
        assert_eq!(read_number("12,454.8-", "99G999D9S").unwrap(), "-12454.8");
        assert_eq!(read_number("$123", "L999").unwrap(), "123");
        assert_eq!(read_number("a12", "999").unwrap(), "12");
        assert_eq!(read_number("12345", "999").unwrap(), "123");
        assert_eq!(read_number("-12", "99").unwrap(), "-12");
        assert_eq!(read_number("  1.5", "999.9").unwrap(), "1.5");
        assert!(read_number("x", "9").is_err());
    }
}
