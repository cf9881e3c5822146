//! Intervals: Postgres's verbose and ISO 8601 input, its output style.

use super::*;

pub(super) fn interval_out_of_range() -> ValueError {
    ValueError::new(SqlState::DATETIME_FIELD_OVERFLOW, "interval out of range")
}

/// Accumulates interval fields with overflow checks.
#[derive(Default)]
pub(super) struct IntervalAcc {
    months: i64,
    days: i64,
    micros: i128,
}

impl IntervalAcc {
    /// Adds `value` (possibly fractional) of a unit: `months_per` months,
    /// `days_per` days or `micros_per` microseconds per unit. A fraction of
    /// a month spills into days (30 per month), of a day into time.
    fn add(
        &mut self,
        int_part: i64,
        frac: f64,
        months_per: i64,
        days_per: i64,
        micros_per: i64,
    ) -> Option<()> {
        if months_per != 0 {
            self.months = self.months.checked_add(int_part.checked_mul(months_per)?)?;
            let frac_months = frac * months_per as f64;
            let whole = frac_months.trunc();
            self.months = self.months.checked_add(whole as i64)?;
            let frac_days = (frac_months - whole) * 30.0;
            let whole_days = frac_days.trunc();
            self.days = self.days.checked_add(whole_days as i64)?;
            self.micros += ((frac_days - whole_days) * MICROS_PER_DAY as f64).round() as i128;
        } else if days_per != 0 {
            self.days = self.days.checked_add(int_part.checked_mul(days_per)?)?;
            let frac_days = frac * days_per as f64;
            let whole = frac_days.trunc();
            self.days = self.days.checked_add(whole as i64)?;
            self.micros += ((frac_days - whole) * MICROS_PER_DAY as f64).round() as i128;
        } else {
            self.micros += i128::from(int_part) * i128::from(micros_per);
            self.micros += (frac * micros_per as f64).round() as i128;
        }
        if self.micros.abs() > i128::from(i64::MAX) {
            return None;
        }
        Some(())
    }

    fn finish(self, negate: bool) -> Option<(i32, i32, i64)> {
        let sign = if negate { -1 } else { 1 };
        let months = i32::try_from(self.months * sign).ok()?;
        let days = i32::try_from(self.days * sign).ok()?;
        let micros = i64::try_from(self.micros * i128::from(sign)).ok()?;
        Some((months, days, micros))
    }
}

/// The unit of an interval field: (months, days, microseconds) per unit.
pub(super) fn interval_unit(unit: &str) -> Option<(i64, i64, i64)> {
    Some(match unit {
        "microsecond" | "microseconds" | "us" | "usec" | "usecs" | "microsecon" => (0, 0, 1),
        "millisecond" | "milliseconds" | "ms" | "msec" | "msecs" => (0, 0, 1_000),
        "second" | "seconds" | "s" | "sec" | "secs" => (0, 0, MICROS_PER_SECOND),
        "minute" | "minutes" | "m" | "min" | "mins" => (0, 0, 60 * MICROS_PER_SECOND),
        "hour" | "hours" | "h" | "hr" | "hrs" => (0, 0, 3600 * MICROS_PER_SECOND),
        "day" | "days" | "d" => (0, 1, 0),
        "week" | "weeks" | "w" => (0, 7, 0),
        "month" | "months" | "mon" | "mons" => (1, 0, 0),
        "year" | "years" | "y" | "yr" | "yrs" => (12, 0, 0),
        "decade" | "decades" | "dec" | "decs" => (120, 0, 0),
        "century" | "centuries" | "c" | "cent" => (1200, 0, 0),
        "millennium" | "millennia" | "mil" | "mils" => (12_000, 0, 0),
        _ => return None,
    })
}

/// Splits a decimal number into its integer part and signed fraction.
pub(super) fn split_number(number: &str) -> Option<(i64, f64)> {
    let (negative, digits) = match number.as_bytes().first()? {
        b'-' => (true, &number[1..]),
        b'+' => (false, &number[1..]),
        _ => (false, number),
    };
    let (int_text, frac_text) = digits.split_once('.').unwrap_or((digits, ""));
    if (int_text.is_empty() && frac_text.is_empty())
        || !int_text.bytes().all(|b| b.is_ascii_digit())
        || !frac_text.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let int_part: i64 = if int_text.is_empty() {
        0
    } else {
        int_text.parse().ok()?
    };
    let frac: f64 = if frac_text.is_empty() {
        0.0
    } else {
        format!("0.{frac_text}").parse().ok()?
    };
    Some(if negative {
        (-int_part, -frac)
    } else {
        (int_part, frac)
    })
}

/// `interval` input: Postgres' verbose form (`1 year 2 mons 3 days
/// 04:05:06`, `@ 1 hour ago`, `1.5 days`, `-1 day +02:00`), abbreviations
/// (`1h 30m`), a bare number of seconds, and ISO 8601 (`P1Y2M3DT4H5M6S`).
pub fn parse_interval(text: &str) -> Result<(i32, i32, i64), ValueError> {
    let syntax = || datetime_syntax("interval", text);
    let lower = text.trim().to_ascii_lowercase();
    if let Some(iso) = lower.strip_prefix('p') {
        return parse_iso_interval(iso).ok_or_else(syntax);
    }
    let mut rest = lower.strip_prefix('@').unwrap_or(&lower).trim_start();
    let mut acc = IntervalAcc::default();
    let mut negate = false;
    let mut any = false;
    while !rest.is_empty() {
        if rest == "ago" {
            negate = true;
            break;
        }
        let token_len = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let token = &rest[..token_len];
        if token.contains(':') {
            let (sign, clock) = match token.as_bytes()[0] {
                b'-' => (-1i128, &token[1..]),
                b'+' => (1, &token[1..]),
                _ => (1, token),
            };
            let micros = parse_interval_clock(clock).ok_or_else(syntax)?;
            acc.micros += sign * i128::from(micros);
            rest = rest[token_len..].trim_start();
            any = true;
            continue;
        }
        let number_len = token
            .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '-' | '+')))
            .unwrap_or(token.len());
        if number_len == 0 {
            return Err(syntax());
        }
        let (int_part, frac) = split_number(&token[..number_len]).ok_or_else(syntax)?;
        rest = rest[number_len..].trim_start();
        let unit_len = rest
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        let (months, days, micros) = if unit.is_empty() || unit == "ago" {
            (0, 0, MICROS_PER_SECOND)
        } else {
            rest = &rest[unit_len..];
            interval_unit(unit).ok_or_else(syntax)?
        };
        rest = rest.trim_start();
        acc.add(int_part, frac, months, days, micros)
            .ok_or_else(interval_out_of_range)?;
        any = true;
    }
    if !any {
        return Err(syntax());
    }
    acc.finish(negate).ok_or_else(interval_out_of_range)
}

pub(super) fn parse_interval_clock(clock: &str) -> Option<i64> {
    let parts: Vec<&str> = clock.split(':').collect();
    let (hours, minutes, seconds) = match parts.as_slice() {
        [h, m] => (*h, *m, "0"),
        [h, m, s] => (*h, *m, *s),
        _ => return None,
    };
    if hours.is_empty() || !hours.bytes().all(|b| b.is_ascii_digit()) || hours.len() > 12 {
        return None;
    }
    let hours: i64 = hours.parse().ok()?;
    if minutes.len() != 2 || !minutes.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let minutes: i64 = minutes.parse().ok()?;
    let (whole, fraction) = seconds.split_once('.').unwrap_or((seconds, ""));
    if whole.is_empty() || whole.len() > 2 || !whole.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let micros = super::datetime::fraction_micros(fraction)?;
    let whole: i64 = whole.parse().ok()?;
    if minutes > 59 || whole > 59 {
        return None;
    }
    hours
        .checked_mul(3600 * MICROS_PER_SECOND)?
        .checked_add((minutes * 60 + whole) * MICROS_PER_SECOND + micros)
}

pub(super) fn parse_iso_interval(body: &str) -> Option<(i32, i32, i64)> {
    let mut acc = IntervalAcc::default();
    let mut in_time = false;
    let mut rest = body;
    let mut any = false;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('t') {
            in_time = true;
            rest = r;
            continue;
        }
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '-' | '+')))
            .unwrap_or(rest.len());
        let (int_part, frac) = split_number(&rest[..number_len])?;
        let unit = rest[number_len..].chars().next()?;
        rest = &rest[number_len + 1..];
        let (months, days, micros) = match (unit, in_time) {
            ('y', false) => (12, 0, 0),
            ('m', false) => (1, 0, 0),
            ('w', false) => (0, 7, 0),
            ('d', false) => (0, 1, 0),
            ('h', true) => (0, 0, 3600 * MICROS_PER_SECOND),
            ('m', true) => (0, 0, 60 * MICROS_PER_SECOND),
            ('s', true) => (0, 0, MICROS_PER_SECOND),
            _ => return None,
        };
        acc.add(int_part, frac, months, days, micros)?;
        any = true;
    }
    if !any {
        return None;
    }
    acc.finish(false)
}

/// Prints an interval the way Postgres does with `IntervalStyle =
/// postgres`: `1 year 2 mons -3 days +04:05:06.5`. After a negative field,
/// later positive fields carry an explicit `+`.
pub fn format_interval(months: i32, days: i32, micros: i64) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut seen_negative = false;
    let field = |value: i64, unit: &str, parts: &mut Vec<String>, seen_negative: &mut bool| {
        if value == 0 {
            return;
        }
        let sign = if value > 0 && *seen_negative { "+" } else { "" };
        let plural = if value == 1 { "" } else { "s" };
        parts.push(format!("{sign}{value} {unit}{plural}"));
        if value < 0 {
            *seen_negative = true;
        }
    };
    let years = i64::from(months / 12);
    let mons = i64::from(months % 12);
    field(years, "year", &mut parts, &mut seen_negative);
    field(mons, "mon", &mut parts, &mut seen_negative);
    field(i64::from(days), "day", &mut parts, &mut seen_negative);
    if micros != 0 || parts.is_empty() {
        let sign = if micros < 0 {
            "-"
        } else if seen_negative {
            "+"
        } else {
            ""
        };
        let total = micros.unsigned_abs();
        let hours = total / 3_600_000_000;
        let minutes = (total / 60_000_000) % 60;
        let seconds = (total / 1_000_000) % 60;
        let fraction = total % 1_000_000;
        let mut text = format!("{sign}{hours:02}:{minutes:02}:{seconds:02}");
        if fraction != 0 {
            text.push('.');
            text.push_str(format!("{fraction:06}").trim_end_matches('0'));
        }
        parts.push(text);
    }
    parts.join(" ")
}
