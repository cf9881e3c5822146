//! jsonpath arithmetic (`+ - * / %`, unary `-` and `+`) and the item methods
//! `.type()`, `.size()`, `.double()`, `.abs()`, `.floor()`, `.ceiling()` and
//! `.keyvalue()`,
//! computed as PostgreSQL's `jsonpath_exec.c` computes them: in numeric, with
//! numeric's display scales (`$.a / $.b` of 7 and 2.0 is 3.5000000000000000).

use floe_repr::SqlState;
use floe_repr::strconv::Json;
use num_bigint::BigInt;
use num_traits::{Signed, ToPrimitive, Zero};

use crate::error::QueryError;
use crate::functions::numeric_math::exact::{Exact, divide_rounded, ten_to};

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Operator {
    Add,
    Subtract,
    Multiply,
    Divide,
    Modulo,
}

impl Operator {
    pub fn of(punct: &str) -> Option<Operator> {
        Some(match punct {
            "+" => Operator::Add,
            "-" => Operator::Subtract,
            "*" => Operator::Multiply,
            "/" => Operator::Divide,
            "%" => Operator::Modulo,
            _ => return None,
        })
    }

    fn spelled(self) -> &'static str {
        match self {
            Operator::Add => "+",
            Operator::Subtract => "-",
            Operator::Multiply => "*",
            Operator::Divide => "/",
            Operator::Modulo => "%",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Method {
    Type,
    Size,
    Double,
    Abs,
    Floor,
    Ceiling,
    KeyValue,
}

impl Method {
    pub fn of(name: &str) -> Option<Method> {
        Some(match name {
            "type" => Method::Type,
            "size" => Method::Size,
            "double" => Method::Double,
            "abs" => Method::Abs,
            "floor" => Method::Floor,
            "ceiling" => Method::Ceiling,
            "keyvalue" => Method::KeyValue,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Method::Type => "type",
            Method::Size => "size",
            Method::Double => "double",
            Method::Abs => "abs",
            Method::Floor => "floor",
            Method::Ceiling => "ceiling",
            Method::KeyValue => "keyvalue",
        }
    }

    /// Whether lax mode applies the method to an array's elements rather
    /// than to the array.
    pub fn unwraps(self) -> bool {
        !matches!(self, Method::Type | Method::Size)
    }
}

/// `left operator right` of two sequences, each of which must be one number.
pub fn binary(left: &[Json], operator: Operator, right: &[Json]) -> Result<Json, QueryError> {
    let operand = |items: &[Json], side: &str| match items {
        [Json::Number(text)] => number(text),
        _ => Err(QueryError::new(
            SqlState::SINGLETON_SQL_JSON_ITEM_REQUIRED,
            format!(
                "{side} operand of jsonpath operator {} is not a single numeric value",
                operator.spelled()
            ),
        )),
    };
    let (left, right) = (operand(left, "left")?, operand(right, "right")?);
    let scale = left.scale.max(right.scale);
    let result = match operator {
        Operator::Add => Exact {
            digits: left.at(scale) + right.at(scale),
            scale,
        },
        Operator::Subtract => Exact {
            digits: left.at(scale) - right.at(scale),
            scale,
        },
        Operator::Multiply => Exact {
            digits: &left.digits * &right.digits,
            scale: left.scale + right.scale,
        },
        Operator::Divide => divide(&left, &right)?,
        Operator::Modulo => {
            let divisor = right.at(scale);
            if divisor.is_zero() {
                return Err(division_by_zero());
            }
            Exact {
                digits: left.at(scale) % divisor,
                scale,
            }
        }
    };
    Ok(Json::Number(result.to_text()))
}

/// Unary `-` (or `+`) of each item, each of which must be a number.
pub fn unary(items: Vec<Json>, minus: bool) -> Result<Vec<Json>, QueryError> {
    items
        .into_iter()
        .map(|item| match item {
            Json::Number(text) if minus => {
                let value = number(&text)?;
                Ok(Json::Number(
                    Exact {
                        digits: -value.digits,
                        scale: value.scale,
                    }
                    .to_text(),
                ))
            }
            number @ Json::Number(_) => Ok(number),
            _ => Err(QueryError::new(
                SqlState::SQL_JSON_NUMBER_NOT_FOUND,
                format!(
                    "operand of unary jsonpath operator {} is not a numeric value",
                    if minus { "-" } else { "+" }
                ),
            )),
        })
        .collect()
}

/// An item method of one item; `None` where lax mode yields nothing.
pub fn method(method: Method, item: Json, strict: bool) -> Result<Option<Json>, QueryError> {
    Ok(Some(match (method, item) {
        (Method::Type, item) => Json::String(type_name(&item).to_string()),
        (Method::Size, Json::Array(elements)) => Json::Number(elements.len().to_string()),
        (Method::Size, _) if strict => {
            return Err(QueryError::new(
                SqlState::SQL_JSON_ARRAY_NOT_FOUND,
                "jsonpath item method .size() can only be applied to an array",
            ));
        }
        (Method::Size, _) => Json::Number("1".to_string()),
        (Method::Double, Json::Number(text)) => Json::Number(double(&text)?),
        // A datetime is no string to read a number from.
        (Method::Double, Json::String(text)) if !super::datetime::is_datetime_text(&text) => {
            Json::Number(double(&text)?)
        }
        (Method::Double, _) => {
            return Err(non_numeric(
                "jsonpath item method .double() can only be applied to a string or numeric value",
            ));
        }
        (method, Json::Number(text)) => Json::Number(rounded(method, &number(&text)?).to_text()),
        (method, _) => {
            return Err(non_numeric(&format!(
                "jsonpath item method .{}() can only be applied to a numeric value",
                method.name()
            )));
        }
    }))
}

fn type_name(item: &Json) -> &'static str {
    if let Some(name) = super::datetime::type_name(item) {
        return name;
    }
    match item {
        Json::Null => "null",
        Json::Bool(_) => "boolean",
        Json::Number(_) => "number",
        Json::String(_) => "string",
        Json::Array(_) => "array",
        Json::Object(_) => "object",
    }
}

/// `.abs()`, `.floor()` and `.ceiling()` of a number.
fn rounded(method: Method, value: &Exact) -> Exact {
    if method == Method::Abs {
        return Exact {
            digits: value.digits.abs(),
            scale: value.scale,
        };
    }
    let truncated = value.to_places(0, true).digits;
    let fraction = !value.is_integral();
    let digits = match method {
        Method::Floor if fraction && value.is_negative() => truncated - 1,
        Method::Ceiling if fraction && !value.is_negative() => truncated + 1,
        _ => truncated,
    };
    Exact { digits, scale: 0 }
}

/// `.double()`: the number through a double precision, printed with its 15
/// significant digits as PostgreSQL converts a double to a numeric.
fn double(text: &str) -> Result<String, QueryError> {
    let value: f64 = text.trim().parse().map_err(|_| {
        non_numeric(
            "string argument of jsonpath item method .double() is not a valid representation of a double precision number",
        )
    })?;
    if !value.is_finite() {
        return Err(non_numeric(
            "NaN or Infinity is not allowed for jsonpath item method .double()",
        ));
    }
    let rounded = format!("{value:.14e}");
    let (mantissa, exponent) = rounded.split_once('e').unwrap_or((&rounded, "0"));
    let exponent: i64 = exponent.parse().unwrap_or(0);
    let mantissa = number(mantissa)?;
    // mantissa * 10^exponent, without trailing zeros.
    let value = if exponent >= 0 {
        Exact {
            digits: mantissa.digits * ten_to(exponent.unsigned_abs() as u32),
            scale: mantissa.scale,
        }
    } else {
        Exact {
            digits: mantissa.digits,
            scale: mantissa.scale + exponent.unsigned_abs() as u32,
        }
    };
    let text = value.to_text();
    Ok(if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    })
}

/// A quotient at PostgreSQL's scale for it (`select_div_scale`).
fn divide(left: &Exact, right: &Exact) -> Result<Exact, QueryError> {
    if right.is_zero() {
        return Err(division_by_zero());
    }
    let small = |x: &Exact| Some((x.digits.to_i128()?, i8::try_from(x.scale).ok()?));
    let ((l, s1), (r, s2)) = small(left).zip(small(right)).ok_or_else(|| {
        QueryError::new(SqlState::NUMERIC_VALUE_OUT_OF_RANGE, "value out of range")
    })?;
    let scale = crate::functions::numeric_division::postgres_scale(l, s1, r, s2).max(0) as u32;
    // left / right at `scale` places: left * 10^(scale + s2 - s1) / right.
    let shift = i64::from(scale) + i64::from(right.scale) - i64::from(left.scale);
    let power = ten_to(shift.unsigned_abs() as u32);
    let (numerator, denominator): (BigInt, BigInt) = if shift >= 0 {
        (&left.digits * power, right.digits.clone())
    } else {
        (left.digits.clone(), &right.digits * power)
    };
    Ok(Exact {
        digits: divide_rounded(&numerator, &denominator),
        scale,
    })
}

fn number(text: &str) -> Result<Exact, QueryError> {
    Exact::parse(text).ok_or_else(|| QueryError::internal(format!("not a number: {text}")))
}

fn non_numeric(message: &str) -> QueryError {
    QueryError::new(SqlState::NON_NUMERIC_SQL_JSON_ITEM, message)
}

fn division_by_zero() -> QueryError {
    QueryError::new(SqlState::DIVISION_BY_ZERO, "division by zero")
}

/// `.keyvalue()` of one item of the document `root`: an object's members as
/// objects `{"id": ..., "key": ..., "value": ...}` in PostgreSQL's order of
/// keys (shorter first, then by bytes), `id` being where PostgreSQL's binary
/// jsonb of `root` holds the object (0 for the root itself).
pub fn key_values(item: Json, root: &Json) -> Result<Vec<Json>, QueryError> {
    let Json::Object(members) = &item else {
        return Err(QueryError::new(
            SqlState::SQL_JSON_OBJECT_NOT_FOUND,
            "jsonpath item method .keyvalue() can only be applied to an object",
        ));
    };
    let mut found = Vec::new();
    find_containers(root, &item, 0, &mut found);
    let id = match found.as_slice() {
        [offset] => *offset,
        // Not in the document (a variable's object), or equal objects at two
        // places, whose ids differ in PostgreSQL.
        _ => {
            return Err(QueryError::new(
                SqlState::FEATURE_NOT_SUPPORTED,
                "jsonpath item method .keyvalue() of an object that is not once in the document is not supported",
            ));
        }
    };
    Ok(stored_order(members)
        .into_iter()
        .map(|(key, value)| {
            Json::Object(
                [
                    ("id".to_string(), Json::Number(id.to_string())),
                    ("key".to_string(), Json::String(key.clone())),
                    ("value".to_string(), value.clone()),
                ]
                .into_iter()
                .collect(),
            )
        })
        .collect())
}

/// An object's members in jsonb's order of keys: shorter first, then by bytes.
fn stored_order(members: &std::collections::BTreeMap<String, Json>) -> Vec<(&String, &Json)> {
    let mut ordered: Vec<(&String, &Json)> = members.iter().collect();
    ordered.sort_by(|(a, _), (b, _)| a.len().cmp(&b.len()).then(a.as_bytes().cmp(b.as_bytes())));
    ordered
}

/// The offsets of the containers equal to `wanted` within `value`, stored at
/// `offset` in PostgreSQL's binary jsonb (relative to the root container).
fn find_containers(value: &Json, wanted: &Json, offset: usize, found: &mut Vec<usize>) {
    if value == wanted && matches!(value, Json::Object(_)) {
        found.push(offset);
    }
    let children: Vec<&Json> = match value {
        Json::Array(elements) => elements.iter().collect(),
        Json::Object(members) => stored_order(members).into_iter().map(|(_, v)| v).collect(),
        _ => return,
    };
    // The header, then a JEntry per element (per key and per value).
    let entries = match value {
        Json::Object(members) => 2 * members.len(),
        _ => children.len(),
    };
    let mut at = offset + 4 + 4 * entries;
    if let Json::Object(members) = value {
        at += members.keys().map(String::len).sum::<usize>();
    }
    for child in children {
        if matches!(child, Json::Array(_) | Json::Object(_) | Json::Number(_)) {
            at = at.next_multiple_of(4);
        }
        find_containers(child, wanted, at, found);
        at += stored_size(child);
    }
}

/// The bytes PostgreSQL's binary jsonb gives a value (its data, without its
/// JEntry), from an offset aligned as it is stored.
fn stored_size(value: &Json) -> usize {
    match value {
        Json::Null | Json::Bool(_) => 0,
        Json::String(text) => text.len(),
        Json::Number(text) => numeric_size(text),
        Json::Array(_) | Json::Object(_) => {
            let children: Vec<&Json> = match value {
                Json::Array(elements) => elements.iter().collect(),
                Json::Object(members) => {
                    stored_order(members).into_iter().map(|(_, v)| v).collect()
                }
                _ => Vec::new(),
            };
            let entries = match value {
                Json::Object(members) => 2 * members.len(),
                _ => children.len(),
            };
            let mut at = 4 + 4 * entries;
            if let Json::Object(members) = value {
                at += members.keys().map(String::len).sum::<usize>();
            }
            for child in children {
                if matches!(child, Json::Array(_) | Json::Object(_) | Json::Number(_)) {
                    at = at.next_multiple_of(4);
                }
                at += stored_size(child);
            }
            at
        }
    }
}

/// The size of PostgreSQL's numeric datum of this text: a 4-byte length, a
/// 2-byte header (4 when the weight or the display scale is large) and 2
/// bytes per base-10000 digit, without leading and trailing zero digits.
fn numeric_size(text: &str) -> usize {
    let unsigned = text.trim_start_matches('-');
    let (whole, fraction) = unsigned.split_once('.').unwrap_or((unsigned, ""));
    let scale = fraction.len();
    let whole = whole.trim_start_matches('0');
    // Base-10000 groups aligned at the point.
    let whole_groups = whole.len().div_ceil(4);
    let padded_whole = format!("{whole:0>width$}", width = whole_groups * 4);
    let padded_fraction = format!("{fraction:0<width$}", width = scale.div_ceil(4) * 4);
    let groups: Vec<&str> = padded_whole
        .as_bytes()
        .chunks(4)
        .chain(padded_fraction.as_bytes().chunks(4))
        .map(|chunk| std::str::from_utf8(chunk).unwrap_or("0000"))
        .collect();
    let first = groups.iter().position(|g| *g != "0000");
    let last = groups.iter().rposition(|g| *g != "0000");
    let (digits, weight) = match (first, last) {
        (Some(first), Some(last)) => (last - first + 1, whole_groups as i64 - 1 - first as i64),
        _ => (0, 0),
    };
    let short = scale <= 63 && (-64..=63).contains(&weight);
    4 + if short { 2 } else { 4 } + 2 * digits
}
