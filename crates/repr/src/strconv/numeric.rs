//! Booleans, integers, floats and `numeric`: parsing with Postgres's
//! rules and messages, printing as Postgres prints them.

use super::*;

/// Postgres' boolean input: `t`, `true`, `yes`, `on`, `1` and their
/// opposites, any case, unique prefixes of the words.
pub fn parse_bool(text: &str) -> Result<bool, ValueError> {
    let t = text.trim().to_ascii_lowercase();
    let matches_word = |word: &str, min: usize| t.len() >= min && word.starts_with(t.as_str());
    if t == "1" || matches_word("true", 1) || matches_word("yes", 1) || matches_word("on", 2) {
        Ok(true)
    } else if t == "0"
        || matches_word("false", 1)
        || matches_word("no", 1)
        || matches_word("off", 2)
    {
        Ok(false)
    } else {
        Err(ValueError::syntax("boolean", text))
    }
}

/// Parses an integer of any width, with Postgres' errors.
pub fn parse_int<T: std::str::FromStr>(text: &str, type_name: &str) -> Result<T, ValueError> {
    let t = text.trim();
    if let Ok(v) = t.parse::<T>() {
        return Ok(v);
    }
    let digits = t.strip_prefix(['+', '-']).unwrap_or(t);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        Err(ValueError::out_of_range(format!(
            "value \"{text}\" is out of range for type {type_name}"
        )))
    } else {
        Err(ValueError::syntax(type_name, text))
    }
}

pub(super) fn float_is_special(t: &str) -> bool {
    let lower = t.to_ascii_lowercase();
    let unsigned = lower.trim_start_matches(['+', '-']);
    matches!(unsigned, "inf" | "infinity" | "nan")
}

pub(super) fn float_has_nonzero_digit(t: &str) -> bool {
    let mantissa = t.split(['e', 'E']).next().unwrap_or("");
    mantissa.bytes().any(|b| (b'1'..=b'9').contains(&b))
}

pub(super) fn check_float_text(t: &str) -> bool {
    // Rust accepts a few forms Postgres does not ("1." is fine in both);
    // keep to digits, sign, point, exponent and the special words.
    float_is_special(t)
        || (!t.is_empty()
            && t.bytes()
                .all(|b| b.is_ascii_digit() || matches!(b, b'+' | b'-' | b'.' | b'e' | b'E')))
}

pub fn parse_float64(text: &str) -> Result<f64, ValueError> {
    let t = text.trim();
    if !check_float_text(t) {
        return Err(ValueError::syntax("double precision", text));
    }
    let v: f64 = t
        .parse()
        .map_err(|_| ValueError::syntax("double precision", text))?;
    if (v.is_infinite() && !float_is_special(t)) || (v == 0.0 && float_has_nonzero_digit(t)) {
        return Err(ValueError::out_of_range(format!(
            "\"{text}\" is out of range for type double precision"
        )));
    }
    Ok(v)
}

pub fn parse_float32(text: &str) -> Result<f32, ValueError> {
    let t = text.trim();
    if !check_float_text(t) {
        return Err(ValueError::syntax("real", text));
    }
    let v: f32 = t.parse().map_err(|_| ValueError::syntax("real", text))?;
    if (v.is_infinite() && !float_is_special(t)) || (v == 0.0 && float_has_nonzero_digit(t)) {
        return Err(ValueError::out_of_range(format!(
            "\"{text}\" is out of range for type real"
        )));
    }
    Ok(v)
}

pub(super) fn format_float_text(shortest: String, magnitude: f64, max_exponent: f64) -> String {
    if magnitude != 0.0 && !(1e-4..max_exponent).contains(&magnitude) {
        let (mantissa, exponent) = shortest.split_once('e').unwrap_or((&shortest, "0"));
        let exponent: i32 = exponent.parse().unwrap_or(0);
        let sign = if exponent < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exponent.abs());
    }
    shortest
}

/// `double precision` as Postgres prints it: shortest exact digits, `1e+20`
/// style beyond 15 integer digits or below 1e-4.
pub fn format_float64(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let magnitude = v.abs();
    if magnitude != 0.0 && !(1e-4..1e15).contains(&magnitude) {
        return format_float_text(format!("{v:e}"), magnitude, 1e15);
    }
    format!("{v}")
}

/// `real` as Postgres prints it: shortest exact digits, exponent beyond 6
/// integer digits.
pub fn format_float32(v: f32) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let magnitude = f64::from(v.abs());
    if magnitude != 0.0 && !(1e-4..1e6).contains(&magnitude) {
        return format_float_text(format!("{v:e}"), magnitude, 1e6);
    }
    format!("{v}")
}

// ---------------------------------------------------------------------------
// Numeric
// ---------------------------------------------------------------------------

/// An exact decimal: sign, integer digits (no leading zeros) and fraction
/// digits. Zero has no integer digits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decimal {
    pub negative: bool,
    pub integer: String,
    pub fraction: String,
}

impl Decimal {
    pub fn is_zero(&self) -> bool {
        self.integer.is_empty() && self.fraction.bytes().all(|b| b == b'0')
    }

    /// Rounds to `scale` fraction digits, half away from zero (as Postgres
    /// rounds numeric).
    pub fn round(&mut self, scale: usize) {
        if self.fraction.len() <= scale {
            return;
        }
        let round_up = self.fraction.as_bytes()[scale] >= b'5';
        self.fraction.truncate(scale);
        if round_up {
            let mut digits: Vec<u8> = self.integer.bytes().chain(self.fraction.bytes()).collect();
            let mut i = digits.len();
            let mut carry = true;
            while carry && i > 0 {
                i -= 1;
                if digits[i] == b'9' {
                    digits[i] = b'0';
                } else {
                    digits[i] += 1;
                    carry = false;
                }
            }
            if carry {
                digits.insert(0, b'1');
            }
            let split = digits.len() - self.fraction.len();
            self.integer = String::from_utf8_lossy(&digits[..split]).into_owned();
            self.fraction = String::from_utf8_lossy(&digits[split..]).into_owned();
        }
        if self.is_zero() {
            self.negative = false;
        }
    }

    /// Prints with exactly `scale` fraction digits, or with trailing zeros
    /// removed when `scale` is `None`.
    pub fn format(&self, scale: Option<usize>) -> String {
        let mut fraction = self.fraction.clone();
        match scale {
            Some(s) => {
                while fraction.len() < s {
                    fraction.push('0');
                }
                fraction.truncate(s);
            }
            None => {
                let trimmed = fraction.trim_end_matches('0').len();
                fraction.truncate(trimmed);
            }
        }
        let zero = self.integer.is_empty() && fraction.bytes().all(|b| b == b'0');
        let mut out = String::new();
        if self.negative && !zero {
            out.push('-');
        }
        if self.integer.is_empty() {
            out.push('0');
        } else {
            out.push_str(&self.integer);
        }
        if !fraction.is_empty() {
            out.push('.');
            out.push_str(&fraction);
        }
        out
    }

    /// Parses `[+-]digits[.digits][e[+-]digits]`; `None` for NaN.
    pub fn parse(text: &str) -> Result<Option<Decimal>, ValueError> {
        let t = text.trim();
        if t.eq_ignore_ascii_case("nan") {
            return Ok(None);
        }
        let syntax = || ValueError::syntax("numeric", text);
        let (negative, rest) = match t.as_bytes().first() {
            Some(b'-') => (true, &t[1..]),
            Some(b'+') => (false, &t[1..]),
            _ => (false, t),
        };
        let (mantissa, exponent) = match rest.find(['e', 'E']) {
            Some(at) => (&rest[..at], Some(&rest[at + 1..])),
            None => (rest, None),
        };
        let (integer, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        if integer.is_empty() && fraction.is_empty() {
            return Err(syntax());
        }
        if !integer.bytes().all(|b| b.is_ascii_digit())
            || !fraction.bytes().all(|b| b.is_ascii_digit())
        {
            return Err(syntax());
        }
        let exponent: i64 = match exponent {
            None => 0,
            Some(e) => {
                let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(syntax());
                }
                e.parse::<i64>()
                    .ok()
                    .filter(|e| e.abs() <= 1000)
                    .ok_or_else(|| ValueError::out_of_range("value overflows numeric format"))?
            }
        };
        let mut digits = format!("{integer}{fraction}");
        let mut point = integer.len() as i64 + exponent;
        if point < 0 {
            digits = format!("{}{digits}", "0".repeat(point.unsigned_abs() as usize));
            point = 0;
        }
        let point = point as usize;
        while digits.len() < point {
            digits.push('0');
        }
        let (integer, fraction) = digits.split_at(point);
        let integer = integer.trim_start_matches('0').to_string();
        let mut decimal = Decimal {
            negative,
            integer,
            fraction: fraction.to_string(),
        };
        if decimal.is_zero() {
            decimal.negative = false;
        }
        Ok(Some(decimal))
    }
}

impl PartialOrd for Decimal {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Decimal {
    fn cmp(&self, other: &Self) -> Ordering {
        let magnitude = |d: &Decimal, e: &Decimal| {
            d.integer
                .len()
                .cmp(&e.integer.len())
                .then_with(|| d.integer.cmp(&e.integer))
                .then_with(|| {
                    let width = d.fraction.len().max(e.fraction.len());
                    let pad = |f: &str| format!("{f:0<width$}");
                    pad(&d.fraction).cmp(&pad(&e.fraction))
                })
        };
        if let (true, true) = (self.is_zero(), other.is_zero()) {
            return Ordering::Equal;
        }
        let self_negative = self.negative && !self.is_zero();
        let other_negative = other.negative && !other.is_zero();
        match (self_negative, other_negative) {
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
            (false, false) => magnitude(self, other),
            (true, true) => magnitude(other, self),
        }
    }
}

/// Reads a numeric and applies the type's precision and scale the way
/// Postgres does on assignment: round to the scale, then refuse a value
/// whose integer digits exceed `precision - scale`.
pub fn parse_numeric(
    text: &str,
    precision: Option<u8>,
    max_scale: Option<u8>,
) -> Result<String, ValueError> {
    match Decimal::parse(text)? {
        None => Ok("NaN".to_string()),
        Some(decimal) => numeric_to_type(decimal, precision, max_scale),
    }
}

/// Applies `numeric(p,s)` to an exact decimal.
pub fn numeric_to_type(
    mut decimal: Decimal,
    precision: Option<u8>,
    max_scale: Option<u8>,
) -> Result<String, ValueError> {
    match (precision, max_scale) {
        (Some(p), s) => {
            let s = usize::from(s.unwrap_or(0));
            let p = usize::from(p);
            decimal.round(s);
            if decimal.integer.len() > p.saturating_sub(s) {
                return Err(
                    ValueError::out_of_range("numeric field overflow").with_detail(format!(
                        "A field with precision {p}, scale {s} must round to an absolute value less than 10^{}.",
                        p.saturating_sub(s)
                    )),
                );
            }
            Ok(decimal.format(Some(s)))
        }
        (None, Some(s)) => {
            decimal.round(usize::from(s));
            check_bare_numeric(&decimal)?;
            Ok(decimal.format(Some(usize::from(s))))
        }
        // An unconstrained numeric keeps the scale it is written with, as
        // PostgreSQL's display scale (`1.50` stays `1.50`).
        (None, None) => {
            check_bare_numeric(&decimal)?;
            Ok(decimal.format(Some(decimal.fraction.len())))
        }
    }
}

/// The digits a column of bare `numeric` stores before the point and after it: its
/// values' Arrow form is decimal(38,10), which the query engine reads and a sink writes
/// (SPEC's type mapping).
pub const STORED_NUMERIC_INTEGER_DIGITS: usize = 28;
pub const STORED_NUMERIC_FRACTION_DIGITS: usize = 10;

/// Refuses a numeric value (its text) that a column of numeric with `max_scale` cannot
/// store exactly: NaN (an exact decimal has none), and in a column without a scale a
/// value of more digits than [`STORED_NUMERIC_INTEGER_DIGITS`] before the point or
/// [`STORED_NUMERIC_FRACTION_DIGITS`] after it. A query may compute such a value and
/// show it; writing it would leave a table no read could convert (`floe_arrow` refuses
/// to round), so the write is refused instead, and nothing is rounded.
pub fn check_stored_numeric(text: &str, max_scale: Option<u8>) -> Result<(), ValueError> {
    if let Some((integer, fraction)) = plain_digits(text)
        && (max_scale.is_some()
            || (integer <= STORED_NUMERIC_INTEGER_DIGITS
                && fraction <= STORED_NUMERIC_FRACTION_DIGITS))
    {
        // The common case, checked without parsing: every value a COPY writes passes here.
        return Ok(());
    }
    let Some(decimal) = Decimal::parse(text)? else {
        return Err(
            ValueError::new(SqlState::FEATURE_NOT_SUPPORTED, "cannot store numeric NaN")
                .with_detail("floe stores numeric values as exact decimals, which have no NaN."),
        );
    };
    let fraction = decimal.fraction.trim_end_matches('0').len();
    if max_scale.is_some()
        || (decimal.integer.len() <= STORED_NUMERIC_INTEGER_DIGITS
            && fraction <= STORED_NUMERIC_FRACTION_DIGITS)
    {
        return Ok(());
    }
    let error = ValueError::out_of_range(format!(
        "numeric value {} has too many digits",
        text.trim()
    ))
    .with_detail(format!(
        "A numeric column without a declared scale stores up to {STORED_NUMERIC_INTEGER_DIGITS} digits before the decimal point and {STORED_NUMERIC_FRACTION_DIGITS} after it."
    ));
    // Places past the tenth can be rounded away or given a scale; a value too large for
    // 28 digits fits no numeric column of floe's with places to spare.
    if decimal.integer.len() > STORED_NUMERIC_INTEGER_DIGITS {
        return Err(error.with_hint(
            "Declare the column as numeric(38, 0) for up to 38 digits, or as double precision.",
        ));
    }
    Err(error.with_hint(
        "Round the value, as round(value, 10), or declare the column with the scale it needs, as numeric(38, 20).",
    ))
}

/// The significant digits of plain decimal text (`-012.340`: 2 and 2) before and after
/// the point; `None` for anything else (an exponent, NaN, spaces), which the parser
/// reads instead.
fn plain_digits(text: &str) -> Option<(usize, usize)> {
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    let (integer, fraction) = unsigned.split_once('.').unwrap_or((unsigned, ""));
    let all_digits = integer
        .bytes()
        .chain(fraction.bytes())
        .all(|b| b.is_ascii_digit());
    if !all_digits || (integer.is_empty() && fraction.is_empty()) {
        return None;
    }
    Some((
        integer.trim_start_matches('0').len(),
        fraction.trim_end_matches('0').len(),
    ))
}

/// [`check_stored_numeric`] of every numeric a value of `ty` holds, in lists, arrays,
/// maps and records too.
pub fn check_stored(datum: &Datum, ty: &SqlScalarType) -> Result<(), ValueError> {
    match (datum, ty) {
        (Datum::Numeric(text), SqlScalarType::Numeric { max_scale, .. }) => {
            check_stored_numeric(text, *max_scale)
        }
        (
            Datum::List(items),
            SqlScalarType::List { element } | SqlScalarType::Array { element },
        ) => items
            .iter()
            .try_for_each(|item| check_stored(item, element)),
        (Datum::Map(entries), SqlScalarType::Map { value }) => entries
            .iter()
            .try_for_each(|(_, item)| check_stored(item, value)),
        (Datum::Record(items), SqlScalarType::Record { fields }) => items
            .iter()
            .zip(fields)
            .try_for_each(|(item, (_, ty, _))| check_stored(item, ty)),
        (Datum::Range(Some(bounds)), SqlScalarType::Range { element }) => bounds
            .lower
            .iter()
            .chain(&bounds.upper)
            .try_for_each(|bound| check_stored(bound, element)),
        _ => Ok(()),
    }
}

pub(super) fn check_bare_numeric(decimal: &Decimal) -> Result<(), ValueError> {
    let fraction = decimal.fraction.trim_end_matches('0').len();
    if decimal.integer.len() > NUMERIC_MAX_PRECISION || fraction > NUMERIC_MAX_PRECISION {
        return Err(ValueError::out_of_range(format!(
            "numeric value {} exceeds the maximum precision {NUMERIC_MAX_PRECISION}",
            decimal.format(None)
        )));
    }
    Ok(())
}
