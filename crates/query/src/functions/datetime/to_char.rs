//! `to_char` with PostgreSQL's template patterns (`formatting.c`), for
//! timestamps, dates, intervals and numbers. DataFusion's `to_char` reads
//! chrono patterns and would print a PostgreSQL template back as text.
//!
//! The number half follows PostgreSQL's processor step by step (where the
//! sign goes, blanks for missing digits, `FM` trimming), since its output is
//! defined by that code more than by its documentation.

use floe_repr::SqlState;
use floe_repr::strconv::{Decimal, civil_from_days, days_from_civil};

use crate::error::QueryError;

pub(super) const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
pub(super) const DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];
pub(super) const ROMAN_MONTHS: [&str; 12] = [
    "I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI", "XII",
];

/// A broken-down time, as PostgreSQL's `struct pg_tm` (year astronomical:
/// 0 is 1 BC; for an interval, its fields as they stand).
pub struct BrokenDown {
    pub year: i64,
    pub month: i64,
    pub day: i64,
    pub hour: i64,
    pub minute: i64,
    pub second: i64,
    pub micros: i64,
    /// Days since 1970-01-01 (dates and timestamps only).
    pub epoch_days: i64,
    pub interval: bool,
    /// The zone's abbreviation: `Some` for timestamptz.
    pub zone: Option<&'static str>,
}

impl BrokenDown {
    /// A timestamp's fields (microseconds since the epoch).
    pub fn timestamp(micros: i64, zone: Option<&'static str>) -> BrokenDown {
        let day_micros = 86_400_000_000;
        let epoch_days = micros.div_euclid(day_micros);
        let time = micros.rem_euclid(day_micros);
        let (year, month, day) = civil_from_days(epoch_days);
        BrokenDown {
            year,
            month: i64::from(month),
            day: i64::from(day),
            hour: time / 3_600_000_000,
            minute: time / 60_000_000 % 60,
            second: time / 1_000_000 % 60,
            micros: time % 1_000_000,
            epoch_days,
            interval: false,
            zone,
        }
    }

    pub fn interval(months: i32, days: i32, micros: i64) -> BrokenDown {
        let months = i64::from(months);
        BrokenDown {
            year: months / 12,
            month: months % 12,
            day: i64::from(days),
            hour: micros / 3_600_000_000,
            minute: micros / 60_000_000 % 60,
            second: micros / 1_000_000 % 60,
            micros: micros % 1_000_000,
            epoch_days: 0,
            interval: true,
            zone: None,
        }
    }

    /// Day of the week, 0 for Sunday.
    fn weekday(&self) -> i64 {
        (self.epoch_days + 4).rem_euclid(7)
    }

    fn day_of_year(&self) -> i64 {
        if self.interval {
            // PostgreSQL's interval_to_char counts 30-day months.
            return (self.year * 12 + self.month) * 30 + self.day;
        }
        self.epoch_days - days_from_civil(self.year, 1, 1) + 1
    }

    /// The ISO year and week of the date.
    fn iso_week(&self) -> (i64, i64) {
        let iso_weekday = (self.weekday() + 6) % 7 + 1;
        let thursday = self.epoch_days - (iso_weekday - 1) + 3;
        let (iso_year, _, _) = civil_from_days(thursday);
        let week = (thursday - days_from_civil(iso_year, 1, 1)) / 7 + 1;
        (iso_year, week)
    }

    /// A year as printed: BC years count from 1 (timestamps only).
    fn printed_year(&self, year: i64) -> i64 {
        if !self.interval && year <= 0 {
            1 - year
        } else {
            year
        }
    }
}

/// What a template keyword prints, with its letter case where it prints words.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Field {
    Era {
        dots: bool,
    },
    Meridiem {
        dots: bool,
    },
    Century,
    DayName {
        abbreviated: bool,
    },
    DayOfYear,
    DayOfMonth,
    DayOfWeek,
    Fraction(u32),
    Hour24,
    Hour12,
    IsoDayOfYear,
    IsoDayOfWeek,
    IsoWeek,
    IsoYear(u32),
    Julian,
    Minute,
    MonthNumber,
    MonthName {
        abbreviated: bool,
    },
    Millisecond,
    Microsecond,
    Offset,
    Quarter,
    RomanMonth,
    Second,
    SecondsOfDay,
    ZoneHour,
    ZoneMinute,
    Zone,
    WeekOfYear,
    WeekOfMonth,
    YearWithComma,
    Year(u32),
    /// `FX`: exact matching, meaningful only for input.
    Exact,
}

#[derive(Clone, Copy, PartialEq)]
pub(super) enum Case {
    Upper,
    Capitalized,
    Lower,
}

/// PostgreSQL's keywords, longest first where one begins another.
pub(super) const DATETIME_KEYWORDS: &[(&str, Field, Case)] = {
    use Case::*;
    use Field::*;
    &[
        ("A.D.", Era { dots: true }, Upper),
        ("A.M.", Meridiem { dots: true }, Upper),
        ("AD", Era { dots: false }, Upper),
        ("AM", Meridiem { dots: false }, Upper),
        ("B.C.", Era { dots: true }, Upper),
        ("BC", Era { dots: false }, Upper),
        ("CC", Century, Upper),
        ("DAY", DayName { abbreviated: false }, Upper),
        ("DDD", DayOfYear, Upper),
        ("DD", DayOfMonth, Upper),
        ("DY", DayName { abbreviated: true }, Upper),
        ("Day", DayName { abbreviated: false }, Capitalized),
        ("Dy", DayName { abbreviated: true }, Capitalized),
        ("D", DayOfWeek, Upper),
        ("FF1", Fraction(1), Upper),
        ("FF2", Fraction(2), Upper),
        ("FF3", Fraction(3), Upper),
        ("FF4", Fraction(4), Upper),
        ("FF5", Fraction(5), Upper),
        ("FF6", Fraction(6), Upper),
        ("FX", Exact, Upper),
        ("HH24", Hour24, Upper),
        ("HH12", Hour12, Upper),
        ("HH", Hour12, Upper),
        ("IDDD", IsoDayOfYear, Upper),
        ("ID", IsoDayOfWeek, Upper),
        ("IW", IsoWeek, Upper),
        ("IYYY", IsoYear(4), Upper),
        ("IYY", IsoYear(3), Upper),
        ("IY", IsoYear(2), Upper),
        ("I", IsoYear(1), Upper),
        ("J", Julian, Upper),
        ("MI", Minute, Upper),
        ("MM", MonthNumber, Upper),
        ("MONTH", MonthName { abbreviated: false }, Upper),
        ("MON", MonthName { abbreviated: true }, Upper),
        ("MS", Millisecond, Upper),
        ("Month", MonthName { abbreviated: false }, Capitalized),
        ("Mon", MonthName { abbreviated: true }, Capitalized),
        ("OF", Offset, Upper),
        ("P.M.", Meridiem { dots: true }, Upper),
        ("PM", Meridiem { dots: false }, Upper),
        ("Q", Quarter, Upper),
        ("RM", RomanMonth, Upper),
        ("SSSSS", SecondsOfDay, Upper),
        ("SSSS", SecondsOfDay, Upper),
        ("SS", Second, Upper),
        ("TZH", ZoneHour, Upper),
        ("TZM", ZoneMinute, Upper),
        ("TZ", Zone, Upper),
        ("US", Microsecond, Upper),
        ("WW", WeekOfYear, Upper),
        ("W", WeekOfMonth, Upper),
        ("Y,YYY", YearWithComma, Upper),
        ("YYYY", Year(4), Upper),
        ("YYY", Year(3), Upper),
        ("YY", Year(2), Upper),
        ("Y", Year(1), Upper),
        ("a.d.", Era { dots: true }, Lower),
        ("a.m.", Meridiem { dots: true }, Lower),
        ("ad", Era { dots: false }, Lower),
        ("am", Meridiem { dots: false }, Lower),
        ("b.c.", Era { dots: true }, Lower),
        ("bc", Era { dots: false }, Lower),
        ("cc", Century, Lower),
        ("day", DayName { abbreviated: false }, Lower),
        ("ddd", DayOfYear, Lower),
        ("dd", DayOfMonth, Lower),
        ("dy", DayName { abbreviated: true }, Lower),
        ("d", DayOfWeek, Lower),
        ("ff1", Fraction(1), Lower),
        ("ff2", Fraction(2), Lower),
        ("ff3", Fraction(3), Lower),
        ("ff4", Fraction(4), Lower),
        ("ff5", Fraction(5), Lower),
        ("ff6", Fraction(6), Lower),
        ("fx", Exact, Lower),
        ("hh24", Hour24, Lower),
        ("hh12", Hour12, Lower),
        ("hh", Hour12, Lower),
        ("iddd", IsoDayOfYear, Lower),
        ("id", IsoDayOfWeek, Lower),
        ("iw", IsoWeek, Lower),
        ("iyyy", IsoYear(4), Lower),
        ("iyy", IsoYear(3), Lower),
        ("iy", IsoYear(2), Lower),
        ("i", IsoYear(1), Lower),
        ("j", Julian, Lower),
        ("mi", Minute, Lower),
        ("mm", MonthNumber, Lower),
        ("month", MonthName { abbreviated: false }, Lower),
        ("mon", MonthName { abbreviated: true }, Lower),
        ("ms", Millisecond, Lower),
        ("of", Offset, Lower),
        ("p.m.", Meridiem { dots: true }, Lower),
        ("pm", Meridiem { dots: false }, Lower),
        ("q", Quarter, Lower),
        ("rm", RomanMonth, Lower),
        ("sssss", SecondsOfDay, Lower),
        ("ssss", SecondsOfDay, Lower),
        ("ss", Second, Lower),
        ("tz", Zone, Lower),
        ("us", Microsecond, Lower),
        ("ww", WeekOfYear, Lower),
        ("w", WeekOfMonth, Lower),
        ("y,yyy", YearWithComma, Lower),
        ("yyyy", Year(4), Lower),
        ("yyy", Year(3), Lower),
        ("yy", Year(2), Lower),
        ("y", Year(1), Lower),
    ]
};

/// One piece of a template: a keyword with its modifiers, or literal text.
pub(super) enum Piece<K> {
    Keyword {
        keyword: K,
        fill_mode: bool,
        ordinal: Option<Case>,
    },
    Text(String),
}

/// Splits a template into keywords and literal text as PostgreSQL's
/// `parse_format` does: double-quoted text is literal (a backslash in it
/// escapes the next character), outside quotes a backslash only escapes a
/// double quote. Datetime keywords take prefixes (`FM`, `TM`) and suffixes
/// (`TH`, `th`, `SP`); number keywords take none.
pub(super) fn parse<K: Copy>(
    template: &str,
    keywords: &[(&str, K)],
    with_modifiers: bool,
) -> Vec<Piece<K>> {
    let mut pieces = Vec::new();
    let mut rest = template;
    while let Some(first) = rest.chars().next() {
        let mut fill_mode = false;
        if with_modifiers {
            for prefix in ["FM", "fm", "TM", "tm"] {
                if let Some(after) = rest.strip_prefix(prefix) {
                    fill_mode |= prefix.eq_ignore_ascii_case("fm");
                    rest = after;
                    break;
                }
            }
        }
        if let Some((name, keyword)) = keywords.iter().find(|(name, _)| rest.starts_with(name)) {
            rest = &rest[name.len()..];
            let mut ordinal = None;
            if with_modifiers {
                if let Some(after) = rest.strip_prefix("TH") {
                    (ordinal, rest) = (Some(Case::Upper), after);
                } else if let Some(after) = rest.strip_prefix("th") {
                    (ordinal, rest) = (Some(Case::Lower), after);
                } else if let Some(after) = rest.strip_prefix("SP") {
                    // Spell mode is not implemented in PostgreSQL either.
                    rest = after;
                }
            }
            pieces.push(Piece::Keyword {
                keyword: *keyword,
                fill_mode,
                ordinal,
            });
            continue;
        }
        if rest.is_empty() {
            break;
        }
        let first = rest.chars().next().unwrap_or(first);
        if first == '"' {
            let mut text = String::new();
            let mut chars = rest[1..].char_indices();
            let mut end = rest.len();
            while let Some((at, c)) = chars.next() {
                match c {
                    '"' => {
                        end = at + 2;
                        break;
                    }
                    '\\' => match chars.next() {
                        Some((_, escaped)) => text.push(escaped),
                        None => text.push('\\'),
                    },
                    c => text.push(c),
                }
            }
            pieces.push(Piece::Text(text));
            rest = &rest[end.min(rest.len())..];
        } else if let Some(after) = rest.strip_prefix("\\\"") {
            pieces.push(Piece::Text("\"".into()));
            rest = after;
        } else {
            pieces.push(Piece::Text(first.to_string()));
            rest = &rest[first.len_utf8()..];
        }
    }
    pieces
}

/// `to_char(timestamp|date|interval, template)`.
pub fn format_datetime(time: &BrokenDown, template: &str) -> Result<String, QueryError> {
    let keywords: Vec<(&str, (Field, Case))> = DATETIME_KEYWORDS
        .iter()
        .map(|(name, field, case)| (*name, (*field, *case)))
        .collect();
    let mut out = String::new();
    for piece in parse(template, &keywords, true) {
        match piece {
            Piece::Text(text) => out.push_str(&text),
            Piece::Keyword {
                keyword: (field, case),
                fill_mode,
                ordinal,
            } => {
                let mut text = datetime_field(time, field, case, fill_mode)?;
                if let Some(case) = ordinal {
                    text.push_str(&ordinal_suffix(&text, case));
                }
                out.push_str(&text);
            }
        }
    }
    Ok(out)
}

fn invalid_for_interval() -> QueryError {
    QueryError::new(
        SqlState::INVALID_DATETIME_FORMAT,
        "invalid format specification for an interval value",
    )
    .with_hint("Intervals are not tied to specific calendar dates.")
}

/// `value` zero-padded to `width` digits (a minus sign takes one more), or
/// unpadded in fill mode, as PostgreSQL's `%0*d`.
fn padded(value: i64, width: usize, fill_mode: bool) -> String {
    padded_to(value, width + usize::from(value < 0), fill_mode)
}

/// `value` zero-padded to `width` characters, its sign among them (days and
/// weeks, which PostgreSQL pads so).
fn padded_to(value: i64, width: usize, fill_mode: bool) -> String {
    if fill_mode {
        value.to_string()
    } else {
        format!("{value:0width$}")
    }
}

fn cased(word: &str, case: Case) -> String {
    match case {
        Case::Upper => word.to_uppercase(),
        Case::Lower => word.to_lowercase(),
        Case::Capitalized => word.to_string(),
    }
}

/// A name, padded to nine characters unless in fill mode.
fn name(word: &str, case: Case, abbreviated: bool, fill_mode: bool) -> String {
    if abbreviated {
        return cased(&word[..3], case);
    }
    let word = cased(word, case);
    if fill_mode {
        word
    } else {
        format!("{word:<9}")
    }
}

fn datetime_field(
    t: &BrokenDown,
    field: Field,
    case: Case,
    fill_mode: bool,
) -> Result<String, QueryError> {
    use Field::*;
    let calendar_only = matches!(
        field,
        Era { .. }
            | DayName { .. }
            | DayOfWeek
            | IsoDayOfWeek
            | MonthName { .. }
            | Zone
            | Offset
            | ZoneHour
            | ZoneMinute
    );
    if t.interval && calendar_only {
        return Err(invalid_for_interval());
    }
    let dotted = |word: &str, dots: bool| {
        let word = if dots {
            format!("{}.{}.", &word[..1], &word[1..])
        } else {
            word.to_string()
        };
        cased(&word, case)
    };
    let hour12 = if t.hour % 12 == 0 { 12 } else { t.hour % 12 };
    let year = t.printed_year(t.year);
    Ok(match field {
        Era { dots } => dotted(if t.year <= 0 { "BC" } else { "AD" }, dots),
        Meridiem { dots } => dotted(if t.hour % 24 >= 12 { "PM" } else { "AM" }, dots),
        Century => {
            let century = if t.interval {
                t.year / 100
            } else if t.year > 0 {
                (t.year - 1) / 100 + 1
            } else {
                t.year / 100 - 1
            };
            if (-99..=99).contains(&century) {
                padded(century, 2, fill_mode)
            } else {
                century.to_string()
            }
        }
        DayName { abbreviated } => name(DAYS[t.weekday() as usize], case, abbreviated, fill_mode),
        DayOfYear => padded_to(t.day_of_year(), 3, fill_mode),
        DayOfMonth => padded_to(t.day, 2, fill_mode),
        DayOfWeek => (t.weekday() + 1).to_string(),
        Fraction(digits) => {
            let divisor = 10_i64.pow(6 - digits);
            format!("{:0width$}", t.micros / divisor, width = digits as usize)
        }
        Hour24 => padded(t.hour, 2, fill_mode),
        Hour12 => padded(hour12, 2, fill_mode),
        IsoDayOfYear => {
            let (_, week) = t.iso_week();
            padded_to((week - 1) * 7 + (t.weekday() + 6) % 7 + 1, 3, fill_mode)
        }
        IsoDayOfWeek => ((t.weekday() + 6) % 7 + 1).to_string(),
        IsoWeek => padded_to(t.iso_week().1, 2, fill_mode),
        IsoYear(digits) => year_digits(t.printed_year(t.iso_week().0), digits, fill_mode),
        Julian => (t.epoch_days + 2_440_588).to_string(),
        Minute => padded(t.minute, 2, fill_mode),
        MonthNumber => padded(t.month, 2, fill_mode),
        MonthName { abbreviated } => match t.month {
            1..=12 => name(MONTHS[t.month as usize - 1], case, abbreviated, fill_mode),
            _ => String::new(),
        },
        Millisecond => format!("{:03}", t.micros / 1000),
        Microsecond => format!("{:06}", t.micros),
        Offset | ZoneHour => "+00".into(),
        ZoneMinute => "00".into(),
        Zone => t.zone.map(|z| cased(z, case)).unwrap_or_default(),
        Quarter => match t.month {
            1..=12 => ((t.month - 1) / 3 + 1).to_string(),
            _ => String::new(),
        },
        RomanMonth => match t.month {
            1..=12 => {
                let numeral = cased(ROMAN_MONTHS[t.month as usize - 1], case);
                if fill_mode {
                    numeral
                } else {
                    format!("{numeral:<4}")
                }
            }
            _ => String::new(),
        },
        Second => padded(t.second, 2, fill_mode),
        SecondsOfDay => (t.hour * 3600 + t.minute * 60 + t.second).to_string(),
        WeekOfYear => padded_to((t.day_of_year() - 1) / 7 + 1, 2, fill_mode),
        WeekOfMonth => ((t.day - 1) / 7 + 1).to_string(),
        YearWithComma => format!("{},{:03}", year / 1000, year % 1000),
        Year(digits) => year_digits(year, digits, fill_mode),
        Exact => String::new(),
    })
}

/// `YYYY`, `YYY`, `YY`, `Y`: the year's last `digits` digits (all of them
/// for four).
fn year_digits(year: i64, digits: u32, fill_mode: bool) -> String {
    match digits {
        4 => padded(year, 4, fill_mode),
        1 => (year % 10).to_string(),
        _ => padded(year % 10_i64.pow(digits), digits as usize, fill_mode),
    }
}

/// `TH`/`th`: the English ordinal suffix of a number's last digits.
fn ordinal_suffix(number: &str, case: Case) -> String {
    let digits = number.as_bytes();
    let Some(&last) = digits.last().filter(|b| b.is_ascii_digit()) else {
        return String::new();
    };
    let teen = digits.len() > 1 && digits[digits.len() - 2] == b'1';
    let suffix = match last {
        _ if teen => "th",
        b'1' => "st",
        b'2' => "nd",
        b'3' => "rd",
        _ => "th",
    };
    cased(suffix, case)
}

// ---------------------------------------------------------------------------
// Numbers
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq)]
pub(super) enum NumberKeyword {
    Comma,
    Point,
    Zero,
    Nine,
    LocalePoint,
    FillMode,
    LocaleComma,
    Minus,
    Plus,
    Sign,
    LocaleSign,
    /// `EEEE`: scientific notation.
    Exponent,
    /// `RN` (upper case) or `rn` (lower case): Roman numerals.
    Roman {
        lower: bool,
    },
    /// A keyword floe does not implement (`V`, `PR`, ...).
    Unsupported(&'static str),
}

pub(super) const NUMBER_KEYWORDS: &[(&str, NumberKeyword)] = {
    use NumberKeyword::*;
    &[
        (",", Comma),
        (".", Point),
        ("0", Zero),
        ("9", Nine),
        ("B", Unsupported("B")),
        ("C", Unsupported("C")),
        ("D", LocalePoint),
        ("EEEE", Exponent),
        ("FM", FillMode),
        ("G", LocaleComma),
        ("L", Unsupported("L")),
        ("MI", Minus),
        ("PL", Plus),
        ("PR", Unsupported("PR")),
        ("RN", Roman { lower: false }),
        ("SG", Sign),
        ("SP", Unsupported("SP")),
        ("S", LocaleSign),
        ("TH", Unsupported("TH")),
        ("V", Unsupported("V")),
        ("b", Unsupported("b")),
        ("c", Unsupported("c")),
        ("d", LocalePoint),
        ("eeee", Exponent),
        ("fm", FillMode),
        ("g", LocaleComma),
        ("l", Unsupported("l")),
        ("mi", Minus),
        ("pl", Plus),
        ("pr", Unsupported("pr")),
        ("rn", Roman { lower: true }),
        ("sg", Sign),
        ("sp", Unsupported("sp")),
        ("s", LocaleSign),
        ("th", Unsupported("th")),
        ("v", Unsupported("v")),
    ]
};

/// Where an `S` prints its sign.
#[derive(Clone, Copy, PartialEq)]
enum SignPlace {
    None,
    Before,
    After,
}

/// A number template's description (PostgreSQL's `NUMDesc`).
struct NumberTemplate {
    pieces: Vec<Piece<NumberKeyword>>,
    /// Digits before and after the decimal point.
    pre: usize,
    post: usize,
    decimal: bool,
    zero: bool,
    /// 1-based position of the first `0` before the point, and of the last `0`.
    zero_start: usize,
    zero_end: usize,
    fill_mode: bool,
    minus: bool,
    plus: bool,
    sign_place: SignPlace,
    /// Digits before the point when `S` came (to tell a trailing `S`).
    pre_at_sign: usize,
    /// `EEEE`: the number in scientific notation.
    exponent: bool,
    /// `RN`: the number in Roman numerals.
    roman: bool,
}

fn template_error(message: &str) -> QueryError {
    QueryError::new(SqlState::SYNTAX_ERROR, message.to_string())
}

impl NumberTemplate {
    fn parse(template: &str) -> Result<NumberTemplate, QueryError> {
        let mut t = NumberTemplate {
            pieces: parse(template, NUMBER_KEYWORDS, false),
            pre: 0,
            post: 0,
            decimal: false,
            zero: false,
            zero_start: 0,
            zero_end: 0,
            fill_mode: false,
            minus: false,
            plus: false,
            sign_place: SignPlace::None,
            pre_at_sign: 0,
            exponent: false,
            roman: false,
        };
        let keywords: Vec<NumberKeyword> = t
            .pieces
            .iter()
            .filter_map(|p| match p {
                Piece::Keyword { keyword, .. } => Some(*keyword),
                Piece::Text(_) => None,
            })
            .collect();
        for keyword in keywords {
            if t.exponent && keyword != NumberKeyword::Exponent {
                return Err(template_error("\"EEEE\" must be the last pattern used"));
            }
            t.describe(keyword)?;
        }
        Ok(t)
    }

    fn describe(&mut self, keyword: NumberKeyword) -> Result<(), QueryError> {
        use NumberKeyword::*;
        match keyword {
            Nine | Zero => {
                if keyword == Zero && !self.zero && !self.decimal {
                    self.zero = true;
                    self.zero_start = self.pre + 1;
                }
                if self.decimal {
                    self.post += 1;
                } else {
                    self.pre += 1;
                }
                if keyword == Zero {
                    self.zero_end = self.pre + self.post;
                }
            }
            Point | LocalePoint => {
                if self.decimal {
                    return Err(template_error("multiple decimal points"));
                }
                self.decimal = true;
            }
            FillMode => self.fill_mode = true,
            LocaleSign => {
                if self.sign_place != SignPlace::None {
                    return Err(template_error("cannot use \"S\" twice"));
                }
                if self.plus || self.minus {
                    return Err(template_error(
                        "cannot use \"S\" and \"PL\"/\"MI\"/\"SG\"/\"PR\" together",
                    ));
                }
                self.sign_place = if self.decimal {
                    SignPlace::After
                } else {
                    SignPlace::Before
                };
                self.pre_at_sign = self.pre;
            }
            Minus | Plus | Sign => {
                if self.sign_place != SignPlace::None {
                    return Err(template_error(
                        "cannot use \"S\" and \"PL\"/\"MI\"/\"SG\"/\"PR\" together",
                    ));
                }
                self.minus |= keyword != Plus;
                self.plus |= keyword != Minus;
            }
            Comma | LocaleComma => {}
            Exponent => {
                if self.exponent {
                    return Err(template_error("cannot use \"EEEE\" twice"));
                }
                if self.fill_mode
                    || self.sign_place != SignPlace::None
                    || self.minus
                    || self.plus
                    || self.roman
                {
                    return Err(
                        template_error("\"EEEE\" is incompatible with other formats").with_detail(
                            "\"EEEE\" may only be used together with digit and decimal point patterns.",
                        ),
                    );
                }
                self.exponent = true;
            }
            Roman { .. } => self.roman = true,
            Unsupported(pattern) => {
                return Err(QueryError::new(
                    SqlState::FEATURE_NOT_SUPPORTED,
                    format!("to_char pattern \"{pattern}\" is not supported"),
                ));
            }
        }
        Ok(())
    }
}

/// A number to print: its digits (with a `.` when it has a fraction) and sign.
pub enum Number<'a> {
    Integer(i64),
    /// A float, with the digits its type holds exactly (`FLT_DIG`, `DBL_DIG`).
    Float(f64, usize),
    Numeric(&'a str),
}

/// `to_char(number, template)`.
pub fn format_number(number: Number<'_>, template: &str) -> Result<String, QueryError> {
    let mut t = NumberTemplate::parse(template)?;
    if t.exponent {
        return scientific(&number, t.pre, t.post);
    }
    if t.roman {
        return roman_template(&number, &t);
    }
    let (negative, mut digits) = match number {
        Number::Integer(value) => {
            let mut digits = value.unsigned_abs().to_string();
            if t.post > 0 {
                digits.push('.');
                digits.push_str(&"0".repeat(t.post));
            }
            (value < 0, digits)
        }
        Number::Float(value, exact_digits) if value.is_finite() => {
            let whole = format!("{:.0}", value.abs()).len();
            if whole >= exact_digits {
                t.post = 0;
            } else if whole + t.post > exact_digits {
                t.post = exact_digits - whole;
            }
            let text = format!("{value:.*}", t.post);
            match text.strip_prefix('-') {
                Some(digits) => (true, digits.to_string()),
                None => (false, text),
            }
        }
        Number::Float(..) => (false, "#".repeat(t.pre + 1)),
        Number::Numeric(text) => match Decimal::parse(text).map_err(QueryError::from_value)? {
            Some(mut decimal) => {
                decimal.round(t.post);
                let negative = decimal.negative && !decimal.is_zero();
                decimal.negative = false;
                (negative, decimal.format(Some(t.post)))
            }
            None => (false, "#".repeat(t.pre + 1)),
        },
    };
    let whole = digits.find('.').unwrap_or(digits.len());
    let mut pre_spaces = 0;
    if whole < t.pre {
        pre_spaces = t.pre - whole;
    } else if whole > t.pre {
        digits = "#".repeat(t.pre + t.post + 1);
        digits.replace_range(t.pre..=t.pre, ".");
    }
    Ok(NumberWriter::new(&t, digits.as_bytes(), negative, pre_spaces).write())
}

/// `to_char` with `EEEE`: the number in scientific notation with `post`
/// digits after the point and a two-digit exponent at least, a space where a
/// positive number has no sign (PostgreSQL prints the template's other
/// patterns not at all); of a NaN or an infinity, `#`s.
fn scientific(number: &Number<'_>, pre: usize, post: usize) -> Result<String, QueryError> {
    let not_finite = || {
        let mut fill: Vec<char> = "#".repeat(pre + post + 6).chars().collect();
        fill[0] = ' ';
        fill[pre + 1] = '.';
        fill.into_iter().collect::<String>()
    };
    let text = match number {
        Number::Integer(value) => float_scientific(*value as f64, post),
        Number::Float(value, _) if value.is_finite() => float_scientific(*value, post),
        Number::Float(..) => not_finite(),
        Number::Numeric(text) => match Decimal::parse(text).map_err(QueryError::from_value)? {
            Some(decimal) => numeric_scientific(&decimal, post),
            None => not_finite(),
        },
    };
    Ok(text)
}

/// C's `%+.*e` of a double, the `+` made a space.
fn float_scientific(value: f64, post: usize) -> String {
    let formatted = format!("{:.*e}", post, value.abs());
    let (mantissa, exponent) = formatted.split_once('e').unwrap_or((&formatted, "0"));
    let exponent: i64 = exponent.parse().unwrap_or(0);
    let sign = if value.is_sign_negative() && value != 0.0 {
        '-'
    } else {
        ' '
    };
    format!("{sign}{mantissa}e{}", exponent_text(exponent))
}

/// An exponent as C's `%+03d` prints it.
fn exponent_text(exponent: i64) -> String {
    let sign = if exponent < 0 { '-' } else { '+' };
    format!("{sign}{:02}", exponent.unsigned_abs())
}

/// PostgreSQL's `numeric_out_sci`: the significand rounded half away from
/// zero at `post` digits (`9.999` at two is `10.00e+00`, as PostgreSQL prints
/// it), the exponent of the first significant digit (0 for zero).
fn numeric_scientific(decimal: &Decimal, post: usize) -> String {
    let digits = format!("{}{}", decimal.integer, decimal.fraction);
    let first = digits.bytes().position(|b| b != b'0');
    let exponent = match first {
        Some(first) => decimal.integer.len() as i64 - 1 - first as i64,
        None => 0,
    };
    // The significand's digits: the value's, from its first significant one.
    let significant = first.map_or("0", |first| &digits[first..]);
    let mut significand = Decimal {
        negative: false,
        integer: significant[..1].trim_start_matches('0').to_string(),
        fraction: significant[1..].to_string(),
    };
    significand.round(post);
    let sign = if decimal.negative && first.is_some() {
        '-'
    } else {
        ' '
    };
    format!(
        "{sign}{}e{}",
        significand.format(Some(post)),
        exponent_text(exponent)
    )
}

/// `to_char` with `RN`: the number, rounded to an integer, in Roman
/// numerals (`#`s outside 1 to 3999), right-aligned in 15 characters unless
/// in fill mode; the template's text around it as written.
fn roman_template(number: &Number<'_>, t: &NumberTemplate) -> Result<String, QueryError> {
    let out_of_range =
        || QueryError::new(SqlState::NUMERIC_VALUE_OUT_OF_RANGE, "integer out of range");
    let value: i64 = match number {
        Number::Integer(value) => i64::from(i32::try_from(*value).map_err(|_| out_of_range())?),
        // C's `(int) rint(value)`; a value past an int prints as one past 3999.
        Number::Float(value, _) => {
            let rounded = value.round_ties_even();
            if rounded.is_finite() && rounded.abs() < 2_147_483_648.0 {
                rounded as i64
            } else {
                i64::from(i32::MIN)
            }
        }
        Number::Numeric(text) => match Decimal::parse(text).map_err(QueryError::from_value)? {
            Some(mut decimal) => {
                decimal.round(0);
                let text = decimal.format(Some(0));
                i64::from(text.parse::<i32>().map_err(|_| out_of_range())?)
            }
            None => {
                return Err(QueryError::new(
                    SqlState::FEATURE_NOT_SUPPORTED,
                    "cannot convert NaN to integer",
                ));
            }
        },
    };
    let numeral = roman(value);
    let mut out = String::new();
    for piece in &t.pieces {
        match piece {
            Piece::Text(text) => out.push_str(text),
            Piece::Keyword {
                keyword: NumberKeyword::Roman { lower },
                ..
            } => {
                let numeral = if *lower {
                    numeral.to_lowercase()
                } else {
                    numeral.clone()
                };
                if t.fill_mode {
                    out.push_str(&numeral);
                } else {
                    out.push_str(&format!("{numeral:>15}"));
                }
            }
            // PostgreSQL prints no digits beside Roman numerals.
            Piece::Keyword { .. } => {}
        }
    }
    Ok(out)
}

/// PostgreSQL's `int_to_roman`.
fn roman(value: i64) -> String {
    if !(1..=3999).contains(&value) {
        return "#".repeat(15);
    }
    const HUNDREDS: [&str; 9] = ["C", "CC", "CCC", "CD", "D", "DC", "DCC", "DCCC", "CM"];
    const TENS: [&str; 9] = ["X", "XX", "XXX", "XL", "L", "LX", "LXX", "LXXX", "XC"];
    const ONES: [&str; 9] = ["I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX"];
    let mut out = "M".repeat((value / 1000) as usize);
    for (digit, names) in [
        ((value / 100) % 10, &HUNDREDS),
        ((value / 10) % 10, &TENS),
        (value % 10, &ONES),
    ] {
        if digit > 0 {
            out.push_str(names[(digit - 1) as usize]);
        }
    }
    out
}

/// PostgreSQL's `NUM_processor` for output.
struct NumberWriter<'a> {
    t: &'a NumberTemplate,
    digits: &'a [u8],
    /// The next digit to print (may be at the end).
    at: usize,
    negative: bool,
    sign_written: bool,
    pre_spaces: usize,
    /// The last fraction digit fill mode keeps (its index), if any.
    last_relevant: Option<usize>,
    sign_place: SignPlace,
    zero_start: usize,
    count: usize,
    current: usize,
    /// Whether a digit has been printed (a comma prints after one).
    in_number: bool,
    out: String,
    /// Where PostgreSQL's output ends: writing past the digits writes the
    /// C string's terminator.
    cut: Option<usize>,
}

impl<'a> NumberWriter<'a> {
    fn new(
        t: &'a NumberTemplate,
        digits: &'a [u8],
        negative: bool,
        pre_spaces: usize,
    ) -> NumberWriter<'a> {
        let mut sign_place = t.sign_place;
        let sign_written = if t.plus || t.minus {
            !t.plus || t.minus
        } else {
            !negative && t.fill_mode && sign_place == SignPlace::None
        };
        if sign_place == SignPlace::Before && t.pre == t.pre_at_sign {
            sign_place = SignPlace::After;
        }
        let mut last_relevant = None;
        if t.fill_mode && t.decimal {
            last_relevant = digits.iter().position(|&b| b == b'.').map(|point| {
                (point + 1..digits.len())
                    .rfind(|&i| digits[i] != b'0')
                    .unwrap_or(point)
            });
            if let Some(relevant) = last_relevant
                && t.zero_end > pre_spaces
            {
                let last_zero = (digits.len() - 1).min(t.zero_end - pre_spaces);
                last_relevant = Some(relevant.max(last_zero));
            }
        }
        let mut count = (t.post + t.pre).saturating_sub(1);
        if !sign_written && pre_spaces == 0 {
            count += 1;
        }
        NumberWriter {
            t,
            digits,
            at: 0,
            negative,
            sign_written,
            pre_spaces,
            last_relevant,
            sign_place,
            zero_start: t.zero_start.saturating_sub(1),
            count,
            current: 0,
            in_number: false,
            out: String::new(),
            cut: None,
        }
    }

    fn digit(&self) -> u8 {
        self.digits.get(self.at).copied().unwrap_or(0)
    }

    fn sign_char(&self) -> char {
        if self.negative { '-' } else { '+' }
    }

    /// The leading zero of `0.5` under `9.9`, which prints as a blank.
    fn zero_before_point(&self) -> bool {
        !self.t.zero && self.at == 0 && self.digits.first() == Some(&b'0') && self.t.post != 0
    }

    fn write(mut self) -> String {
        use NumberKeyword::*;
        let pieces = &self.t.pieces;
        for piece in pieces {
            let keyword = match piece {
                Piece::Text(text) => {
                    self.out.push_str(text);
                    continue;
                }
                Piece::Keyword { keyword, .. } => *keyword,
            };
            let fill_mode = self.t.fill_mode;
            match keyword {
                Nine | Zero | Point | LocalePoint => self.number_part(keyword),
                Comma | LocaleComma if self.in_number => self.out.push(','),
                Comma | LocaleComma if !fill_mode => self.out.push(' '),
                Minus if self.negative => self.out.push('-'),
                Minus if !fill_mode => self.out.push(' '),
                Plus if !self.negative => self.out.push('+'),
                Plus if !fill_mode => self.out.push(' '),
                Sign => self.out.push(self.sign_char()),
                _ => {}
            }
        }
        if let Some(cut) = self.cut {
            self.out.truncate(cut);
        }
        self.out
    }

    /// A digit position or the decimal point (`NUM_numpart_to_char`).
    fn number_part(&mut self, keyword: NumberKeyword) {
        let fill_mode = self.t.fill_mode;
        let relevant_is_point = self
            .last_relevant
            .is_some_and(|i| self.digits.get(i) == Some(&b'.'));
        self.in_number = false;
        let zero_here = self.t.zero && self.zero_start == self.current;
        if !self.sign_written
            && (self.current >= self.pre_spaces || zero_here)
            && (!self.zero_before_point() || relevant_is_point)
        {
            match self.sign_place {
                SignPlace::Before => {
                    self.out.push(self.sign_char());
                    self.sign_written = true;
                }
                SignPlace::After => {}
                SignPlace::None if !self.negative => {
                    if !fill_mode {
                        self.out.push(' ');
                    }
                    self.sign_written = true;
                }
                SignPlace::None => {
                    self.out.push('-');
                    self.sign_written = true;
                }
            }
        }
        if self.current < self.pre_spaces && (self.zero_start > self.current || !self.t.zero) {
            if !fill_mode {
                self.out.push(' ');
            }
        } else if self.t.zero && self.current < self.pre_spaces && self.zero_start <= self.current {
            self.out.push('0');
            self.in_number = true;
        } else {
            let digit = self.digit();
            if digit == b'.' {
                if !relevant_is_point || fill_mode {
                    self.out.push('.');
                }
            } else if self
                .last_relevant
                .is_some_and(|relevant| self.at > relevant && keyword != NumberKeyword::Zero)
            {
            } else if self.zero_before_point() {
                if !fill_mode {
                    self.out.push(' ');
                } else if relevant_is_point {
                    self.out.push('0');
                }
            } else if digit == 0 {
                self.cut.get_or_insert(self.out.len());
            } else {
                self.out.push(char::from(digit));
                self.in_number = true;
            }
            if digit != 0 {
                self.at += 1;
            }
        }
        let mut end = self.count + usize::from(self.pre_spaces > 0) + usize::from(self.t.decimal);
        if self.last_relevant == Some(self.at) {
            end = self.current;
        }
        if self.current + 1 == end && self.sign_place == SignPlace::After {
            self.out.push(self.sign_char());
        }
        self.current += 1;
    }
}
