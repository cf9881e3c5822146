//! jsonb's btree order as bytes: [`sort_key`] encodes a document so that
//! comparing the bytes compares the documents as Postgres does
//! (`compareJsonbContainers`). Sorting, `<` and `>` compare these keys in
//! hexadecimal ([`sort_key_text`]): text sorts by its bytes as binary does,
//! and DataFusion's windows accept text orders (RANGE frames refuse binary).
//!
//! Postgres' order: Object > Array > Boolean > Number > String > Null;
//! objects by their number of pairs, then key, value, key, value... in
//! storage order (shorter keys first); arrays by their length, then element
//! by element; numbers by value; strings by their bytes (floe's collation is
//! C). A top-level scalar is stored as a one-element array marked "raw
//! scalar", which sorts before a real one-element array, so an empty
//! top-level array sorts before every scalar.

use floe_repr::strconv::{Decimal, Json};

use super::jsonb::postgres_order;

/// Type tags in Postgres' order (its `jbvNull` .. `jbvObject`).
const NULL: u8 = 0x00;
const STRING: u8 = 0x01;
const NUMBER: u8 = 0x02;
const BOOL: u8 = 0x03;
const ARRAY: u8 = 0x10;
const OBJECT: u8 = 0x11;

/// [`sort_key`] in hexadecimal, which sorts as the bytes do.
pub fn sort_key_text(json: &Json) -> String {
    sort_key(json).iter().map(|b| format!("{b:02x}")).collect()
}

/// The key of a whole document.
pub fn sort_key(json: &Json) -> Vec<u8> {
    let mut out = Vec::new();
    match json {
        Json::Array(items) => {
            out.push(ARRAY);
            push_count(&mut out, items.len());
            // Not a raw scalar: after one of the same length.
            out.push(1);
            for item in items {
                push_value(&mut out, item);
            }
        }
        Json::Object(_) => push_value(&mut out, json),
        scalar => {
            // A raw scalar: a one-element array that sorts first among them.
            out.push(ARRAY);
            push_count(&mut out, 1);
            out.push(0);
            push_value(&mut out, scalar);
        }
    }
    out
}

/// A value inside a document.
fn push_value(out: &mut Vec<u8>, json: &Json) {
    match json {
        Json::Null => out.push(NULL),
        Json::String(text) => {
            out.push(STRING);
            push_string(out, text);
        }
        Json::Number(text) => {
            out.push(NUMBER);
            push_number(out, text);
        }
        Json::Bool(value) => out.extend([BOOL, u8::from(*value)]),
        Json::Array(items) => {
            out.push(ARRAY);
            push_count(out, items.len());
            for item in items {
                push_value(out, item);
            }
        }
        Json::Object(object) => {
            out.push(OBJECT);
            push_count(out, object.len());
            for (key, value) in postgres_order(object) {
                push_string(out, key);
                push_value(out, value);
            }
        }
    }
}

/// Counts compare before contents: big-endian, fixed width.
fn push_count(out: &mut Vec<u8>, count: usize) {
    out.extend((count as u32).to_be_bytes());
}

/// A string's bytes with 0 escaped as `0 255`, ended by `0 1`: a string sorts
/// before any string it is a prefix of, whatever follows it in the key.
fn push_string(out: &mut Vec<u8>, text: &str) {
    for byte in text.bytes() {
        out.push(byte);
        if byte == 0 {
            out.push(0xff);
        }
    }
    out.extend([0, 1]);
}

/// A number by value: its sign; then, for a positive one, its decimal
/// exponent and significant digits (ended by a byte below every digit);
/// a negative one's bytes inverted, so larger magnitudes sort first.
fn push_number(out: &mut Vec<u8>, text: &str) {
    let decimal = match Decimal::parse(text) {
        Ok(Some(decimal)) => decimal,
        // JSON numbers are decimals; anything else sorts by its text.
        _ => {
            out.push(3);
            push_string(out, text);
            return;
        }
    };
    if decimal.is_zero() {
        out.push(1);
        return;
    }
    let digits = format!("{}{}", decimal.integer, decimal.fraction);
    let leading = digits.len() - digits.trim_start_matches('0').len();
    // The value is 0.<significant> * 10^exponent.
    let exponent = decimal.integer.len() as i64 - leading as i64;
    let significant = digits[leading..].trim_end_matches('0');
    let mut magnitude = Vec::with_capacity(5 + significant.len());
    // Offset so that a negative exponent sorts before a positive one.
    magnitude.extend(((exponent as i32 as u32) ^ (1 << 31)).to_be_bytes());
    magnitude.extend(significant.bytes());
    magnitude.push(0);
    if decimal.negative {
        out.push(0);
        out.extend(magnitude.iter().map(|b| !b));
    } else {
        out.push(2);
        out.extend(magnitude);
    }
}

#[cfg(test)]
mod tests {
    use floe_repr::strconv::parse_json;

    use super::sort_key;

    /// `SELECT j FROM (VALUES ...) v(j) ORDER BY j` in PostgreSQL 15 (a C
    /// collation database): this is its order. Documents on one line are
    /// equal there.
    const POSTGRES_ORDER: &[&[&str]] = &[
        &["[]"],
        &["null"],
        &[r#""""#],
        &[r#""a""#],
        &[r#""a\u0001""#],
        &[r#""b""#],
        &["-100"],
        &["-2.5"],
        &["-0.001"],
        &["0", "-0", "0.00"],
        &["0.001", "1e-3"],
        &["1", "1.0"],
        &["1.50", "1.5"],
        &["10"],
        &["1e20"],
        &["false"],
        &["true"],
        &["[null]"],
        &[r#"["x"]"#],
        &["[1]"],
        &["[true]"],
        &["[[1]]"],
        &["[{}]"],
        &["[0, 0]"],
        &["{}"],
        &[r#"{"a": 2}"#],
        &[r#"{"a": {"x": 1}}"#],
        &[r#"{"b": 1}"#],
        &[r#"{"b": 1, "d": 1}"#],
        &[r#"{"c": 1, "aa": 1}"#],
    ];

    #[test]
    fn keys_sort_documents_as_postgres_does() {
        let keys: Vec<Vec<Vec<u8>>> = POSTGRES_ORDER
            .iter()
            .map(|equal| {
                equal
                    .iter()
                    .map(|text| sort_key(&parse_json(text).unwrap()))
                    .collect()
            })
            .collect();
        for (rank, equal) in keys.iter().enumerate() {
            for key in equal {
                assert_eq!(key, &equal[0], "{:?}", POSTGRES_ORDER[rank]);
            }
            if let Some(next) = keys.get(rank + 1) {
                assert!(
                    equal[0] < next[0],
                    "{:?} < {:?}",
                    POSTGRES_ORDER[rank],
                    POSTGRES_ORDER[rank + 1]
                );
            }
        }
    }
}
