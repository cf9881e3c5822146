//! Encoding of result values in Postgres' text and binary formats.

use bytes::{BufMut, BytesMut};
use chrono::{DateTime, NaiveDate};
use floe_repr::datum::format_interval;
use floe_repr::{Datum, PgType};
use pgwire::api::Type;

/// Microseconds between the Unix epoch and Postgres' epoch (2000-01-01).
const POSTGRES_EPOCH_MICROS: i64 = 946_684_800_000_000;
/// Days between the Unix epoch and Postgres' epoch.
const POSTGRES_EPOCH_DAYS: i32 = 10_957;

/// The wire type of a column.
pub fn wire_type(pg_type: PgType) -> Type {
    match pg_type {
        PgType::Bool => Type::BOOL,
        PgType::Int2 => Type::INT2,
        PgType::Int4 => Type::INT4,
        PgType::Int8 => Type::INT8,
        PgType::Float4 => Type::FLOAT4,
        PgType::Float8 => Type::FLOAT8,
        PgType::Numeric => Type::NUMERIC,
        PgType::Text => Type::TEXT,
        PgType::Bytea => Type::BYTEA,
        PgType::Date => Type::DATE,
        PgType::Time => Type::TIME,
        PgType::Timestamp => Type::TIMESTAMP,
        PgType::TimestampTz => Type::TIMESTAMPTZ,
        PgType::Interval => Type::INTERVAL,
        PgType::Jsonb => Type::JSONB,
        PgType::Uuid => Type::UUID,
        PgType::Oid => Type::OID,
        PgType::TextArray => Type::TEXT_ARRAY,
    }
}

fn format_float(value: f64) -> String {
    if value.is_nan() {
        return "NaN".into();
    }
    if value.is_infinite() {
        return if value > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let magnitude = value.abs();
    if magnitude != 0.0 && !(1e-4..1e15).contains(&magnitude) {
        // Postgres: 1e+20, 1.5e-05.
        let text = format!("{value:e}");
        let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
        let exponent: i32 = exponent.parse().unwrap_or(0);
        let sign = if exponent < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exponent.abs());
    }
    format!("{value}")
}

fn format_micros_time(micros: i64) -> String {
    let seconds = micros.div_euclid(1_000_000);
    let fraction = micros.rem_euclid(1_000_000);
    let mut text = format!(
        "{:02}:{:02}:{:02}",
        seconds / 3600,
        (seconds / 60) % 60,
        seconds % 60
    );
    if fraction != 0 {
        text.push('.');
        text.push_str(format!("{fraction:06}").trim_end_matches('0'));
    }
    text
}

fn format_timestamp(micros: i64) -> String {
    let seconds = micros.div_euclid(1_000_000);
    let fraction = micros.rem_euclid(1_000_000);
    match DateTime::from_timestamp(seconds, 0) {
        Some(datetime) => {
            let mut text = datetime.naive_utc().format("%Y-%m-%d %H:%M:%S").to_string();
            if fraction != 0 {
                text.push('.');
                text.push_str(format!("{fraction:06}").trim_end_matches('0'));
            }
            text
        }
        None => micros.to_string(),
    }
}

fn format_date(days: i32) -> String {
    NaiveDate::from_num_days_from_ce_opt(days + 719_163)
        .map(|d| d.format("%Y-%m-%d").to_string())
        .unwrap_or_else(|| days.to_string())
}

fn format_uuid(bytes: &[u8; 16]) -> String {
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

fn quote_array_element(element: &str) -> String {
    let needs_quotes = element.is_empty()
        || element.eq_ignore_ascii_case("null")
        || element
            .chars()
            .any(|c| matches!(c, '{' | '}' | ',' | '"' | '\\') || c.is_whitespace());
    if needs_quotes {
        format!("\"{}\"", element.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        element.to_string()
    }
}

/// The text form of a value, as Postgres prints it; `None` for NULL.
pub fn encode_text(datum: &Datum) -> Option<String> {
    Some(match datum {
        Datum::Null => return None,
        Datum::Bool(b) => if *b { "t" } else { "f" }.to_string(),
        Datum::Int16(v) => v.to_string(),
        Datum::Int32(v) => v.to_string(),
        Datum::Int64(v) => v.to_string(),
        Datum::Float32(v) => format_float(f64::from(*v)),
        Datum::Float64(v) => format_float(*v),
        Datum::Numeric(s) | Datum::Text(s) | Datum::Jsonb(s) => s.clone(),
        Datum::Bytes(bytes) => {
            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            format!("\\x{hex}")
        }
        Datum::Date(days) => format_date(*days),
        Datum::Time(micros) => format_micros_time(*micros),
        Datum::Timestamp(micros) => format_timestamp(*micros),
        Datum::TimestampTz(micros) => format!("{}+00", format_timestamp(*micros)),
        Datum::Interval {
            months,
            days,
            micros,
        } => format_interval(*months, *days, *micros),
        Datum::Uuid(bytes) => format_uuid(bytes),
        Datum::Oid(v) => v.to_string(),
        Datum::TextArray(elements) => {
            let parts: Vec<String> = elements
                .iter()
                .map(|e| match e {
                    None => "NULL".to_string(),
                    Some(s) => quote_array_element(s),
                })
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Datum::UInt16(v) => v.to_string(),
        Datum::UInt32(v) => v.to_string(),
        Datum::UInt64(v) => v.to_string(),
        // Placeholder forms until the full type work lands.
        other => format!("{other:?}"),
    })
}

/// Postgres' binary `numeric`: base-10000 digits with weight, sign, scale.
fn encode_numeric_binary(text: &str, out: &mut BytesMut) {
    let text = text.trim();
    if text.eq_ignore_ascii_case("nan") {
        out.put_i16(0);
        out.put_i16(0);
        out.put_u16(0xC000);
        out.put_i16(0);
        return;
    }
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let (integer, fraction) = unsigned.split_once('.').unwrap_or((unsigned, ""));
    let integer = integer.trim_start_matches('0');
    let scale = fraction.len();
    // Pad the integer part on the left and the fraction on the right to
    // whole groups of four digits.
    let integer_padded = format!("{}{}", "0".repeat((4 - integer.len() % 4) % 4), integer);
    let fraction_padded = format!("{}{}", fraction, "0".repeat((4 - fraction.len() % 4) % 4));
    let group = |s: &str| -> Vec<i16> {
        s.as_bytes()
            .chunks(4)
            .map(|c| {
                std::str::from_utf8(c)
                    .ok()
                    .and_then(|g| g.parse().ok())
                    .unwrap_or(0)
            })
            .collect()
    };
    let integer_groups = group(&integer_padded);
    let fraction_groups = group(&fraction_padded);
    let mut weight = integer_groups.len() as i16 - 1;
    let mut digits: Vec<i16> = integer_groups.into_iter().chain(fraction_groups).collect();
    while digits.first() == Some(&0) {
        digits.remove(0);
        weight -= 1;
    }
    while digits.last() == Some(&0) {
        digits.pop();
    }
    if digits.is_empty() {
        weight = 0;
    }
    out.put_i16(digits.len() as i16);
    out.put_i16(weight);
    out.put_u16(if negative && !digits.is_empty() {
        0x4000
    } else {
        0
    });
    out.put_i16(scale as i16);
    for digit in digits {
        out.put_i16(digit);
    }
}

/// The binary form of a value; `None` for NULL.
pub fn encode_binary(datum: &Datum) -> Option<BytesMut> {
    let mut out = BytesMut::new();
    match datum {
        Datum::Null => return None,
        Datum::Bool(b) => out.put_u8(u8::from(*b)),
        Datum::Int16(v) => out.put_i16(*v),
        Datum::Int32(v) => out.put_i32(*v),
        Datum::Int64(v) => out.put_i64(*v),
        Datum::Float32(v) => out.put_f32(*v),
        Datum::Float64(v) => out.put_f64(*v),
        Datum::Numeric(s) => encode_numeric_binary(s, &mut out),
        Datum::Text(s) => out.put_slice(s.as_bytes()),
        Datum::Jsonb(s) => {
            out.put_u8(1);
            out.put_slice(s.as_bytes());
        }
        Datum::Bytes(b) => out.put_slice(b),
        Datum::Date(days) => out.put_i32(days - POSTGRES_EPOCH_DAYS),
        Datum::Time(micros) => out.put_i64(*micros),
        Datum::Timestamp(micros) | Datum::TimestampTz(micros) => {
            out.put_i64(micros - POSTGRES_EPOCH_MICROS)
        }
        Datum::Interval {
            months,
            days,
            micros,
        } => {
            out.put_i64(*micros);
            out.put_i32(*days);
            out.put_i32(*months);
        }
        Datum::Uuid(bytes) => out.put_slice(bytes),
        Datum::Oid(v) => out.put_u32(*v),
        Datum::UInt16(_)
        | Datum::UInt32(_)
        | Datum::UInt64(_)
        | Datum::Range(_)
        | Datum::Record(_)
        | Datum::List(_)
        | Datum::Map(_) => out.put_slice(encode_text(datum).unwrap_or_default().as_bytes()),
        Datum::TextArray(elements) => {
            out.put_i32(1);
            out.put_i32(i32::from(elements.iter().any(Option::is_none)));
            out.put_u32(Type::TEXT.oid());
            out.put_i32(elements.len() as i32);
            out.put_i32(1);
            for element in elements {
                match element {
                    None => out.put_i32(-1),
                    Some(s) => {
                        out.put_i32(s.len() as i32);
                        out.put_slice(s.as_bytes());
                    }
                }
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_forms_match_postgres() {
        assert_eq!(encode_text(&Datum::Bool(true)).unwrap(), "t");
        assert_eq!(encode_text(&Datum::Float64(1.5)).unwrap(), "1.5");
        assert_eq!(encode_text(&Datum::Float64(1e20)).unwrap(), "1e+20");
        assert_eq!(encode_text(&Datum::Float64(1.5e-5)).unwrap(), "1.5e-05");
        assert_eq!(encode_text(&Datum::Float64(f64::NAN)).unwrap(), "NaN");
        assert_eq!(
            encode_text(&Datum::Bytes(vec![0xde, 0xad])).unwrap(),
            "\\xdead"
        );
        assert_eq!(encode_text(&Datum::Date(0)).unwrap(), "1970-01-01");
        assert_eq!(
            encode_text(&Datum::TimestampTz(1_764_460_800_123_000)).unwrap(),
            "2025-11-30 00:00:00.123+00"
        );
        assert_eq!(
            encode_text(&Datum::Time(3_723_500_000)).unwrap(),
            "01:02:03.5"
        );
        assert_eq!(
            encode_text(&Datum::TextArray(vec![
                Some("a b".into()),
                None,
                Some("c".into())
            ]))
            .unwrap(),
            "{\"a b\",NULL,c}"
        );
        assert_eq!(
            encode_text(&Datum::Uuid([0x12; 16])).unwrap(),
            "12121212-1212-1212-1212-121212121212"
        );
        assert_eq!(encode_text(&Datum::Null), None);
    }

    #[test]
    fn numeric_binary_uses_base_10000_groups() {
        let mut out = BytesMut::new();
        encode_numeric_binary("-12345.678", &mut out);
        // ndigits 3, weight 1, negative, scale 3, digits 1 2345 6780.
        let expected: Vec<u8> = [3i16, 1]
            .iter()
            .flat_map(|v| v.to_be_bytes())
            .chain(0x4000u16.to_be_bytes())
            .chain([3i16, 1, 2345, 6780].iter().flat_map(|v| v.to_be_bytes()))
            .collect();
        assert_eq!(out.to_vec(), expected);
        let mut zero = BytesMut::new();
        encode_numeric_binary("0.00", &mut zero);
        assert_eq!(
            zero.to_vec(),
            [0i16, 0, 0, 2]
                .iter()
                .flat_map(|v| v.to_be_bytes())
                .collect::<Vec<u8>>()
        );
    }
}
