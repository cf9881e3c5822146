//! Dates, times and timestamps: proleptic Gregorian calendar, `BC` years,
//! time zones as offsets.

use super::*;

pub const MICROS_PER_SECOND: i64 = 1_000_000;
pub const MICROS_PER_DAY: i64 = 86_400 * MICROS_PER_SECOND;
/// Postgres' oldest date: 4714-11-24 BC (proleptic Gregorian), as days since
/// 1970-01-01.
pub const MIN_DATE_DAYS: i32 = -2_440_588;
/// The last date whose timestamp fits Postgres' range (294276 AD).
pub const MAX_TIMESTAMP_YEAR: i64 = 294_276;
/// Postgres' newest date, 5874897-12-31, as days since the epoch.
pub const MAX_DATE_DAYS: i32 = 2_145_042_905;

/// `'infinity'::date` and `'-infinity'::date`: later and earlier than every
/// date, as PostgreSQL holds them (the extremes of the day count).
pub const DATE_INFINITY: i32 = i32::MAX;
pub const DATE_MINUS_INFINITY: i32 = i32::MIN;
/// `'infinity'` and `'-infinity'` of a timestamp or timestamptz.
pub const TIMESTAMP_INFINITY: i64 = i64::MAX;
pub const TIMESTAMP_MINUS_INFINITY: i64 = i64::MIN;

/// Whether a date's day count is `infinity` or `-infinity`.
pub fn is_infinite_date(days: i32) -> bool {
    matches!(days, DATE_INFINITY | DATE_MINUS_INFINITY)
}

/// Whether a timestamp's (or timestamptz's) microseconds are `infinity` or
/// `-infinity`.
pub fn is_infinite_timestamp(micros: i64) -> bool {
    matches!(micros, TIMESTAMP_INFINITY | TIMESTAMP_MINUS_INFINITY)
}

/// A date as the microseconds of its midnight, `infinity` and `-infinity`
/// as the timestamp's (multiplying their day counts would pass an i64);
/// `None` for a date past the timestamps floe holds (after 294246).
pub fn date_midnight(days: i32) -> Option<i64> {
    match days {
        DATE_INFINITY => Some(TIMESTAMP_INFINITY),
        DATE_MINUS_INFINITY => Some(TIMESTAMP_MINUS_INFINITY),
        days => i64::from(days)
            .checked_mul(MICROS_PER_DAY)
            .filter(|micros| !is_infinite_timestamp(*micros)),
    }
}

/// [`date_midnight`] for comparing a date with timestamps: a date past them
/// is later than every finite one (earlier than none), not infinity.
pub fn date_midnight_compared(days: i32) -> i64 {
    date_midnight(days).unwrap_or(if days > 0 {
        TIMESTAMP_INFINITY - 1
    } else {
        TIMESTAMP_MINUS_INFINITY + 1
    })
}

/// The error of a date cast to a timestamp it has none of.
pub fn date_out_of_range_for_timestamp() -> ValueError {
    ValueError::new(
        SqlState::DATETIME_FIELD_OVERFLOW,
        "date out of range for timestamp",
    )
}

/// Whether `text` is `infinity` (`Some(true)`) or `-infinity` (`Some(false)`),
/// as date and timestamp input read them.
fn infinity(text: &str) -> Option<bool> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("infinity") {
        Some(true)
    } else if text.eq_ignore_ascii_case("-infinity") {
        Some(false)
    } else {
        None
    }
}

/// The text of an infinite date or timestamp, `None` for a finite one.
fn infinity_text(value: i64, plus: i64, minus: i64) -> Option<String> {
    match value {
        v if v == plus => Some("infinity".to_string()),
        v if v == minus => Some("-infinity".to_string()),
        _ => None,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (year 0 = 1 BC).
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian date of a day number.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// The days of `month` (1 to 12) of `year` (proleptic Gregorian).
pub fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        _ => 28,
    }
}

/// Splits a trailing ` BC` / ` AD` era marker off.
pub(super) fn strip_era(text: &str) -> (&str, bool) {
    let t = text.trim_end();
    let upper = t.len() >= 2 && t.is_char_boundary(t.len() - 2);
    if upper {
        let (head, tail) = t.split_at(t.len() - 2);
        if tail.eq_ignore_ascii_case("bc") && head.ends_with(|c: char| c.is_whitespace()) {
            return (head.trim_end(), true);
        }
        if tail.eq_ignore_ascii_case("ad") && head.ends_with(|c: char| c.is_whitespace()) {
            return (head.trim_end(), false);
        }
    }
    (t, false)
}

/// Why date or time text is refused: it is not written as one (22007), or a
/// field is outside its range, as February 30 (22008).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FieldError {
    Syntax,
    OutOfRange,
}

impl FieldError {
    /// The error for `text` of `type_name`, in PostgreSQL's words.
    pub(super) fn into_value_error(self, type_name: &str, text: &str) -> ValueError {
        match self {
            FieldError::Syntax => datetime_syntax(type_name, text),
            FieldError::OutOfRange => ValueError::new(
                SqlState::DATETIME_FIELD_OVERFLOW,
                format!("date/time field value out of range: \"{text}\""),
            ),
        }
    }
}

/// The digits at the start of `text` as a number, when there are between 1
/// and `max_len` of them, and the rest.
fn leading_number(text: &str, max_len: usize) -> Option<(i64, &str)> {
    let len = text.bytes().take_while(|b| b.is_ascii_digit()).count();
    if !(1..=max_len).contains(&len) {
        return None;
    }
    Some((text[..len].parse().ok()?, &text[len..]))
}

/// Parses `YYYY-MM-DD` at the start of `text`; returns the day number and
/// the rest.
pub(super) fn parse_date_prefix(text: &str, bc: bool) -> Result<(i64, &str), FieldError> {
    let (year, rest) = leading_number(text, 7).ok_or(FieldError::Syntax)?;
    let rest = rest.strip_prefix('-').ok_or(FieldError::Syntax)?;
    let (month, rest) = leading_number(rest, 2).ok_or(FieldError::Syntax)?;
    let rest = rest.strip_prefix('-').ok_or(FieldError::Syntax)?;
    let (day, rest) = leading_number(rest, 2).ok_or(FieldError::Syntax)?;
    if year == 0 {
        return Err(FieldError::OutOfRange);
    }
    let year = if bc { 1 - year } else { year };
    let (month, day) = (month as u32, day as u32);
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return Err(FieldError::OutOfRange);
    }
    Ok((days_from_civil(year, month, day), rest))
}

pub(super) fn date_out_of_range(text: &str) -> ValueError {
    ValueError::new(
        SqlState::DATETIME_FIELD_OVERFLOW,
        format!("date out of range: \"{text}\""),
    )
}

/// `date` input: ISO `YYYY-MM-DD`, optionally with ` BC`, optionally
/// followed by a time (ignored, as Postgres does).
pub fn parse_date(text: &str) -> Result<i32, ValueError> {
    if let Some(plus) = infinity(text) {
        return Ok(if plus {
            DATE_INFINITY
        } else {
            DATE_MINUS_INFINITY
        });
    }
    let (t, bc) = strip_era(text.trim());
    if t.eq_ignore_ascii_case("epoch") {
        return Ok(0);
    }
    let refuse = |error: FieldError| error.into_value_error("date", text);
    let (days, rest) = parse_date_prefix(t, bc).map_err(refuse)?;
    let rest = rest.trim_start_matches(['T', 't', ' ']);
    if !rest.is_empty() {
        parse_time_and_zone(rest).map_err(refuse)?;
    }
    if days < i64::from(MIN_DATE_DAYS) || days > i64::from(MAX_DATE_DAYS) {
        return Err(date_out_of_range(text));
    }
    Ok(days as i32)
}

pub(super) fn datetime_syntax(type_name: &str, text: &str) -> ValueError {
    ValueError::new(
        SqlState::INVALID_DATETIME_FORMAT,
        format!("invalid input syntax for type {type_name}: \"{text}\""),
    )
}

pub(super) fn push_year_month_day(out: &mut String, days: i64) -> bool {
    let (year, month, day) = civil_from_days(days);
    let bc = year <= 0;
    let year = if bc { 1 - year } else { year };
    out.push_str(&format!("{year:04}-{month:02}-{day:02}"));
    bc
}

pub fn format_date(days: i32) -> String {
    let infinite = i64::from(days);
    if let Some(text) = infinity_text(infinite, DATE_INFINITY.into(), DATE_MINUS_INFINITY.into()) {
        return text;
    }
    let mut out = String::new();
    if push_year_month_day(&mut out, i64::from(days)) {
        out.push_str(" BC");
    }
    out
}

/// Parses `HH:MM[:SS[.ffffff]]`, rounding to microseconds; `24:00:00` is
/// the end of the day.
pub(super) fn parse_clock(text: &str) -> Result<i64, FieldError> {
    let mut parts = text.splitn(3, ':');
    let hours = parts.next().ok_or(FieldError::Syntax)?;
    let minutes = parts.next().ok_or(FieldError::Syntax)?;
    let seconds = parts.next().unwrap_or("0");
    let number = |s: &str| match leading_number(s, 2) {
        Some((n, "")) => Ok(n),
        _ => Err(FieldError::Syntax),
    };
    let hours = number(hours)?;
    let minutes = number(minutes)?;
    let (whole, fraction) = seconds.split_once('.').unwrap_or((seconds, ""));
    let whole = number(whole)?;
    let micros = fraction_micros(fraction).ok_or(FieldError::Syntax)?;
    if hours > 24 || minutes > 59 || whole > 60 {
        return Err(FieldError::OutOfRange);
    }
    let total = ((hours * 60 + minutes) * 60 + whole) * MICROS_PER_SECOND + micros;
    if total > MICROS_PER_DAY {
        return Err(FieldError::OutOfRange);
    }
    Ok(total)
}

/// Parses a time of day and an optional zone offset (in seconds east of
/// UTC): `10:00`, `10:00:00.5+02`, `10:00Z`, `10:00 UTC`.
pub(super) fn parse_time_and_zone(text: &str) -> Result<(i64, Option<i64>), FieldError> {
    let t = text.trim();
    let zone_at = t
        .char_indices()
        .skip(1)
        .find(|(_, c)| matches!(c, '+' | '-' | 'Z' | 'z' | ' ' | 'U' | 'u' | 'G' | 'g'))
        .map(|(i, _)| i);
    let (clock, zone) = match zone_at {
        Some(at) => (&t[..at], Some(t[at..].trim())),
        None => (t, None),
    };
    let micros = parse_clock(clock.trim())?;
    let offset = match zone {
        None | Some("") => None,
        Some(z) => Some(parse_zone(z).ok_or(FieldError::Syntax)?),
    };
    Ok((micros, offset))
}

/// A zone offset in seconds east of UTC.
pub(super) fn parse_zone(zone: &str) -> Option<i64> {
    if zone.eq_ignore_ascii_case("z")
        || zone.eq_ignore_ascii_case("utc")
        || zone.eq_ignore_ascii_case("gmt")
    {
        return Some(0);
    }
    let (sign, rest) = match zone.as_bytes().first()? {
        b'+' => (1, &zone[1..]),
        b'-' => (-1, &zone[1..]),
        _ => return None,
    };
    let (hours, minutes, seconds) = if rest.contains(':') {
        let mut parts = rest.split(':');
        let h = parts.next()?;
        let m = parts.next().unwrap_or("0");
        let s = parts.next().unwrap_or("0");
        if parts.next().is_some() {
            return None;
        }
        (h, m, s)
    } else {
        match rest.len() {
            1 | 2 => (rest, "0", "0"),
            4 => (&rest[..2], &rest[2..], "0"),
            6 => (&rest[..2], &rest[2..4], &rest[4..]),
            _ => return None,
        }
    };
    let n = |s: &str| -> Option<i64> {
        if s.is_empty() || s.len() > 2 || !s.bytes().all(|b| b.is_ascii_digit()) {
            None
        } else {
            s.parse().ok()
        }
    };
    let (h, m, s) = (n(hours)?, n(minutes)?, n(seconds)?);
    if h > 15 || m > 59 || s > 59 {
        return None;
    }
    Some(sign * (h * 3600 + m * 60 + s))
}

/// `time` input.
pub fn parse_time(text: &str) -> Result<i64, ValueError> {
    parse_time_and_zone(text)
        .map(|(micros, _)| micros)
        .map_err(|error| error.into_value_error("time without time zone", text))
}

pub(super) fn push_clock(out: &mut String, micros: i64) {
    let seconds = micros.div_euclid(MICROS_PER_SECOND);
    let fraction = micros.rem_euclid(MICROS_PER_SECOND);
    out.push_str(&format!(
        "{:02}:{:02}:{:02}",
        seconds / 3600,
        (seconds / 60) % 60,
        seconds % 60
    ));
    if fraction != 0 {
        out.push('.');
        out.push_str(format!("{fraction:06}").trim_end_matches('0'));
    }
}

pub fn format_time(micros: i64) -> String {
    let mut out = String::new();
    push_clock(&mut out, micros);
    out
}

/// Parses a timestamp; the zone offset, if any, is returned separately.
pub(super) fn parse_timestamp_parts(
    text: &str,
    type_name: &str,
) -> Result<(i64, Option<i64>), ValueError> {
    if let Some(plus) = infinity(text) {
        let micros = if plus {
            TIMESTAMP_INFINITY
        } else {
            TIMESTAMP_MINUS_INFINITY
        };
        return Ok((micros, None));
    }
    let (t, bc) = strip_era(text.trim());
    if t.eq_ignore_ascii_case("epoch") {
        return Ok((0, None));
    }
    let refuse = |error: FieldError| error.into_value_error(type_name, text);
    let (days, rest) = parse_date_prefix(t, bc).map_err(refuse)?;
    let time_part = if let Some(r) = rest.strip_prefix(['T', 't']) {
        Some(r)
    } else if rest.starts_with(char::is_whitespace) {
        Some(rest.trim_start())
    } else if rest.is_empty() {
        None
    } else {
        return Err(datetime_syntax(type_name, text));
    };
    let (micros, zone) = match time_part {
        None | Some("") => (0, None),
        Some(time) => parse_time_and_zone(time).map_err(refuse)?,
    };
    let out_of_range = || {
        ValueError::new(
            SqlState::DATETIME_FIELD_OVERFLOW,
            format!("timestamp out of range: \"{text}\""),
        )
    };
    // PostgreSQL's first timestamp is its first date's midnight (4714-11-24 BC).
    let (year, _, _) = civil_from_days(days);
    if days < i64::from(MIN_DATE_DAYS) || year > MAX_TIMESTAMP_YEAR {
        return Err(out_of_range());
    }
    // The last days of year 294276 are past the microseconds since 1970 an
    // i64 holds (PostgreSQL counts from 2000); the largest is infinity's.
    days.checked_mul(MICROS_PER_DAY)
        .and_then(|start| start.checked_add(micros))
        .filter(|micros| *micros < TIMESTAMP_INFINITY)
        .map(|micros| (micros, zone))
        .ok_or_else(out_of_range)
}

/// `timestamp` input; a zone in the text is ignored, as Postgres does.
pub fn parse_timestamp(text: &str) -> Result<i64, ValueError> {
    parse_timestamp_parts(text, "timestamp").map(|(micros, _)| micros)
}

/// `timestamptz` input; without a zone the session zone (UTC) applies.
pub fn parse_timestamptz(text: &str) -> Result<i64, ValueError> {
    let (micros, zone) = parse_timestamp_parts(text, "timestamp with time zone")?;
    micros
        .checked_sub(zone.unwrap_or(0) * MICROS_PER_SECOND)
        .ok_or_else(|| {
            ValueError::new(
                SqlState::DATETIME_FIELD_OVERFLOW,
                format!("timestamp out of range: \"{text}\""),
            )
        })
}

pub(super) fn push_timestamp(out: &mut String, micros: i64) -> bool {
    let days = micros.div_euclid(MICROS_PER_DAY);
    let time = micros.rem_euclid(MICROS_PER_DAY);
    let bc = push_year_month_day(out, days);
    out.push(' ');
    push_clock(out, time);
    bc
}

pub fn format_timestamp(micros: i64) -> String {
    if let Some(text) = infinity_text(micros, TIMESTAMP_INFINITY, TIMESTAMP_MINUS_INFINITY) {
        return text;
    }
    let mut out = String::new();
    if push_timestamp(&mut out, micros) {
        out.push_str(" BC");
    }
    out
}

/// `timestamptz` in the session zone, UTC: `2025-01-01 00:00:00+00`.
pub fn format_timestamptz(micros: i64) -> String {
    if let Some(text) = infinity_text(micros, TIMESTAMP_INFINITY, TIMESTAMP_MINUS_INFINITY) {
        return text;
    }
    let mut out = String::new();
    let bc = push_timestamp(&mut out, micros);
    out.push_str("+00");
    if bc {
        out.push_str(" BC");
    }
    out
}

/// The microseconds a fraction of a second's digits (after the `.`) stand for, rounded
/// half up at the seventh digit; `None` when it holds anything but digits. Times and
/// intervals read their seconds' fractions alike.
pub(super) fn fraction_micros(fraction: &str) -> Option<i64> {
    if !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut micros: i64 = 0;
    for (i, b) in fraction.bytes().take(6).enumerate() {
        micros += i64::from(b - b'0') * 10i64.pow(5 - i as u32);
    }
    if fraction.as_bytes().get(6).is_some_and(|b| *b >= b'5') {
        micros += 1;
    }
    Some(micros)
}
