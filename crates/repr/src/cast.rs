//! Assignment casts: a value the query engine produced, converted to the
//! type of the column it is written to, with Postgres' checks (integer
//! ranges, numeric precision and scale, `varchar(n)` lengths).

use crate::datum::{Datum, RangeBounds};
use crate::strconv::{
    self, DATE_INFINITY, DATE_MINUS_INFINITY, Decimal, MICROS_PER_DAY, TIMESTAMP_INFINITY,
    TIMESTAMP_MINUS_INFINITY, ValueError, check_varchar, format_datum, make_range, numeric_to_type,
    parse_datum, range_type_name,
};
use crate::{SqlScalarType, SqlState};

/// The SQL name of a datum's type, for error messages.
pub fn datum_type_name(datum: &Datum) -> &'static str {
    match datum {
        Datum::Null => "unknown",
        Datum::Bool(_) => "boolean",
        Datum::Int16(_) => "smallint",
        Datum::Int32(_) => "integer",
        Datum::Int64(_) => "bigint",
        Datum::UInt16(_) => "uint2",
        Datum::UInt32(_) => "uint4",
        Datum::UInt64(_) => "uint8",
        Datum::Float32(_) => "real",
        Datum::Float64(_) => "double precision",
        Datum::Numeric(_) => "numeric",
        Datum::Text(_) => "text",
        Datum::Bytes(_) => "bytea",
        Datum::Date(_) => "date",
        Datum::Time(_) => "time",
        Datum::Timestamp(_) => "timestamp without time zone",
        Datum::TimestampTz(_) => "timestamp with time zone",
        Datum::Interval { .. } => "interval",
        Datum::Jsonb(_) => "jsonb",
        Datum::Uuid(_) => "uuid",
        Datum::Oid(_) => "oid",
        Datum::TextArray(_) => "text[]",
        Datum::Range(_) => "range",
        Datum::Record(_) => "record",
        Datum::List(_) => "list",
        Datum::Map(_) => "map",
    }
}

fn mismatch(datum: &Datum, ty: &SqlScalarType) -> ValueError {
    ValueError::new(
        SqlState::DATATYPE_MISMATCH,
        format!(
            "cannot assign a value of type {} to a column of type {ty}",
            datum_type_name(datum)
        ),
    )
}

fn out_of_range(type_name: &str) -> ValueError {
    ValueError::out_of_range(format!("{type_name} out of range"))
}

/// An integer value of any integer datum.
fn integer_of(datum: &Datum) -> Option<i128> {
    Some(match datum {
        Datum::Int16(v) => (*v).into(),
        Datum::Int32(v) => (*v).into(),
        Datum::Int64(v) => (*v).into(),
        Datum::UInt16(v) => (*v).into(),
        Datum::UInt32(v) => (*v).into(),
        Datum::UInt64(v) => (*v).into(),
        Datum::Oid(v) => (*v).into(),
        _ => return None,
    })
}

/// Rounds a float to an integer the way Postgres' float-to-int casts do
/// (`rint`: half to even) and checks the range.
fn float_to_integer(v: f64, min: i128, max: i128, type_name: &str) -> Result<i128, ValueError> {
    if !v.is_finite() {
        return Err(out_of_range(type_name));
    }
    let rounded = v.round_ties_even();
    if rounded < min as f64 || rounded > max as f64 {
        return Err(out_of_range(type_name));
    }
    let value = rounded as i128;
    if value < min || value > max {
        return Err(out_of_range(type_name));
    }
    Ok(value)
}

/// Rounds a numeric to an integer (half away from zero, as Postgres'
/// numeric-to-int casts do).
fn numeric_to_integer(text: &str, type_name: &str) -> Result<i128, ValueError> {
    let Some(mut decimal) = Decimal::parse(text)? else {
        return Err(ValueError::new(
            SqlState::FEATURE_NOT_SUPPORTED,
            format!("cannot convert NaN to {type_name}"),
        ));
    };
    decimal.round(0);
    if decimal.integer.len() > 39 {
        return Err(out_of_range(type_name));
    }
    let magnitude: i128 = if decimal.integer.is_empty() {
        0
    } else {
        decimal
            .integer
            .parse()
            .map_err(|_| out_of_range(type_name))?
    };
    Ok(if decimal.negative {
        -magnitude
    } else {
        magnitude
    })
}

/// The integer a datum converts to in an assignment to an integer column.
fn to_integer(datum: &Datum, min: i128, max: i128, type_name: &str) -> Result<i128, ValueError> {
    let value = match datum {
        Datum::Float32(v) => float_to_integer(f64::from(*v), min, max, type_name)?,
        Datum::Float64(v) => float_to_integer(*v, min, max, type_name)?,
        Datum::Numeric(s) => numeric_to_integer(s, type_name)?,
        Datum::Bool(b) if type_name == "integer" => i128::from(*b),
        other => match integer_of(other) {
            Some(v) => v,
            None => return Err(ValueError::new(SqlState::DATATYPE_MISMATCH, String::new())),
        },
    };
    if value < min || value > max {
        return Err(out_of_range(type_name));
    }
    Ok(value)
}

fn float_to_numeric(v: f64) -> Result<Decimal, ValueError> {
    if v.is_nan() {
        return Ok(Decimal {
            negative: false,
            integer: String::new(),
            fraction: String::new(),
        });
    }
    if v.is_infinite() {
        return Err(ValueError::new(
            SqlState::FEATURE_NOT_SUPPORTED,
            "cannot convert infinity to numeric",
        ));
    }
    // The shortest text that reads back as the same float, as Postgres
    // uses for float-to-numeric casts.
    Decimal::parse(&format!("{v:e}"))?
        .ok_or_else(|| ValueError::out_of_range("cannot convert float to numeric"))
}

/// Converts `datum` to a value of `ty` for writing into a column of that
/// type. Text converts to any type through its text form; numbers convert
/// among themselves with range checks; every type converts to text.
pub fn cast_datum(datum: Datum, ty: &SqlScalarType) -> Result<Datum, ValueError> {
    cast_nested(datum, ty, 0)
}

fn cast_nested(datum: Datum, ty: &SqlScalarType, depth: usize) -> Result<Datum, ValueError> {
    if depth > strconv::MAX_NESTING {
        return Err(ValueError::new(
            SqlState::PROGRAM_LIMIT_EXCEEDED,
            "value is too deeply nested",
        ));
    }
    use SqlScalarType as S;
    if matches!(datum, Datum::Null) {
        return Ok(Datum::Null);
    }
    // Text converts to anything through the type's input function.
    if let Datum::Text(text) = &datum
        && !matches!(ty, S::Text)
    {
        return parse_datum(text, ty);
    }
    let integer = |min: i128, max: i128, name: &str| -> Result<i128, ValueError> {
        to_integer(&datum, min, max, name).map_err(|e| {
            if e.message.is_empty() {
                mismatch(&datum, ty)
            } else {
                e
            }
        })
    };
    let result = match ty {
        S::Text => Datum::Text(match datum {
            Datum::Text(s) => s,
            other => format_datum(&other),
        }),
        S::VarChar { max_length } => {
            let text = match datum {
                Datum::Text(s) => s,
                other => format_datum(&other),
            };
            Datum::Text(check_varchar(&text, *max_length)?)
        }
        S::Bool => match datum {
            Datum::Bool(b) => Datum::Bool(b),
            Datum::Int32(v) => Datum::Bool(v != 0),
            Datum::Jsonb(s) if s == "true" || s == "false" => Datum::Bool(s == "true"),
            other => return Err(mismatch(&other, ty)),
        },
        S::Int16 => Datum::Int16(integer(i16::MIN.into(), i16::MAX.into(), "smallint")? as i16),
        S::Int32 => Datum::Int32(integer(i32::MIN.into(), i32::MAX.into(), "integer")? as i32),
        S::Int64 => Datum::Int64(integer(i64::MIN.into(), i64::MAX.into(), "bigint")? as i64),
        S::UInt16 => Datum::UInt16(integer(0, u16::MAX.into(), "uint2")? as u16),
        S::UInt32 => Datum::UInt32(integer(0, u32::MAX.into(), "uint4")? as u32),
        S::UInt64 => Datum::UInt64(integer(0, u64::MAX.into(), "uint8")? as u64),
        S::Oid => Datum::Oid(integer(0, u32::MAX.into(), "oid")? as u32),
        S::Float32 | S::Float64 | S::Numeric { .. } => cast_to_inexact(datum, ty)?,
        S::Date => match datum {
            Datum::Date(d) => Datum::Date(d),
            Datum::Timestamp(TIMESTAMP_INFINITY) | Datum::TimestampTz(TIMESTAMP_INFINITY) => {
                Datum::Date(DATE_INFINITY)
            }
            Datum::Timestamp(TIMESTAMP_MINUS_INFINITY)
            | Datum::TimestampTz(TIMESTAMP_MINUS_INFINITY) => Datum::Date(DATE_MINUS_INFINITY),
            Datum::Timestamp(t) | Datum::TimestampTz(t) => {
                Datum::Date(i32::try_from(t.div_euclid(MICROS_PER_DAY)).map_err(|_| {
                    ValueError::new(SqlState::DATETIME_FIELD_OVERFLOW, "date out of range")
                })?)
            }
            other => return Err(mismatch(&other, ty)),
        },
        S::Time => match datum {
            Datum::Time(t) => Datum::Time(t),
            Datum::Timestamp(t) | Datum::TimestampTz(t) => {
                Datum::Time(t.rem_euclid(MICROS_PER_DAY))
            }
            Datum::Interval { micros, .. } => Datum::Time(micros.rem_euclid(MICROS_PER_DAY)),
            other => return Err(mismatch(&other, ty)),
        },
        S::Timestamp | S::TimestampTz => {
            let micros = match datum {
                Datum::Timestamp(t) | Datum::TimestampTz(t) => t,
                Datum::Date(d) => strconv::date_midnight(d)
                    .ok_or_else(strconv::date_out_of_range_for_timestamp)?,
                other => return Err(mismatch(&other, ty)),
            };
            if matches!(ty, S::Timestamp) {
                Datum::Timestamp(micros)
            } else {
                Datum::TimestampTz(micros)
            }
        }
        S::Interval => match datum {
            d @ Datum::Interval { .. } => d,
            Datum::Time(t) => Datum::Interval {
                months: 0,
                days: 0,
                micros: t,
            },
            other => return Err(mismatch(&other, ty)),
        },
        S::Bytes => match datum {
            Datum::Bytes(b) => Datum::Bytes(b),
            other => return Err(mismatch(&other, ty)),
        },
        S::Uuid => match datum {
            Datum::Uuid(u) => Datum::Uuid(u),
            Datum::Bytes(b) if b.len() == 16 => {
                let mut u = [0u8; 16];
                u.copy_from_slice(&b);
                Datum::Uuid(u)
            }
            other => return Err(mismatch(&other, ty)),
        },
        S::Jsonb => match datum {
            Datum::Jsonb(s) => Datum::Jsonb(strconv::parse_jsonb(&s)?),
            other => return Err(mismatch(&other, ty)),
        },
        S::Json => match datum {
            Datum::Jsonb(s) => Datum::Text(s),
            other => return Err(mismatch(&other, ty)),
        },
        S::Range { .. } | S::List { .. } | S::Array { .. } | S::Map { .. } | S::Record { .. } => {
            cast_composite(datum, ty, depth)?
        }
    };
    Ok(result)
}

/// A cast to `real`, `double precision` or `numeric`.
fn cast_to_inexact(datum: Datum, ty: &SqlScalarType) -> Result<Datum, ValueError> {
    use SqlScalarType as S;
    Ok(match ty {
        S::Float32 => match datum {
            Datum::Float32(v) => Datum::Float32(v),
            Datum::Float64(v) => {
                let narrowed = v as f32;
                if narrowed.is_infinite() && v.is_finite() {
                    return Err(ValueError::out_of_range("value out of range: overflow"));
                }
                if narrowed == 0.0 && v != 0.0 {
                    return Err(ValueError::out_of_range("value out of range: underflow"));
                }
                Datum::Float32(narrowed)
            }
            Datum::Numeric(s) => Datum::Float32(strconv::parse_float32(&s)?),
            other => match integer_of(&other) {
                Some(v) => Datum::Float32(v as f32),
                None => return Err(mismatch(&other, ty)),
            },
        },
        S::Float64 => match datum {
            Datum::Float64(v) => Datum::Float64(v),
            Datum::Float32(v) => Datum::Float64(f64::from(v)),
            Datum::Numeric(s) => Datum::Float64(strconv::parse_float64(&s)?),
            other => match integer_of(&other) {
                Some(v) => Datum::Float64(v as f64),
                None => return Err(mismatch(&other, ty)),
            },
        },
        S::Numeric {
            precision,
            max_scale,
        } => {
            let decimal = match &datum {
                Datum::Numeric(s) => Decimal::parse(s)?,
                Datum::Float32(v) if v.is_nan() => None,
                Datum::Float64(v) if v.is_nan() => None,
                Datum::Float32(v) => Some(float_to_numeric(f64::from(*v))?),
                Datum::Float64(v) => Some(float_to_numeric(*v)?),
                other => match integer_of(other) {
                    Some(v) => Decimal::parse(&v.to_string())?,
                    None => return Err(mismatch(other, ty)),
                },
            };
            match decimal {
                None => Datum::Numeric("NaN".into()),
                Some(d) => Datum::Numeric(numeric_to_type(d, *precision, *max_scale)?),
            }
        }
        _ => return Err(mismatch(&datum, ty)),
    })
}

/// A cast to a range, list, map or record type: element by element.
fn cast_composite(datum: Datum, ty: &SqlScalarType, depth: usize) -> Result<Datum, ValueError> {
    use SqlScalarType as S;
    Ok(match ty {
        S::Range { element } => match datum {
            Datum::Range(None) => Datum::Range(None),
            Datum::Range(Some(bounds)) => {
                let RangeBounds {
                    lower,
                    upper,
                    lower_inclusive,
                    upper_inclusive,
                } = *bounds;
                let cast_bound = |b: Option<Datum>| -> Result<Option<Datum>, ValueError> {
                    b.map(|d| cast_nested(d, element, depth + 1)).transpose()
                };
                make_range(
                    cast_bound(lower)?,
                    cast_bound(upper)?,
                    lower_inclusive,
                    upper_inclusive,
                    range_type_name(element),
                )?
            }
            other => return Err(mismatch(&other, ty)),
        },
        S::List { element } | S::Array { element } => match datum {
            Datum::List(items) => Datum::List(
                items
                    .into_iter()
                    .map(|d| cast_nested(d, element, depth + 1))
                    .collect::<Result<_, _>>()?,
            ),
            Datum::TextArray(items) => Datum::List(
                items
                    .into_iter()
                    .map(|d| {
                        cast_nested(
                            d.map(Datum::Text).unwrap_or(Datum::Null),
                            element,
                            depth + 1,
                        )
                    })
                    .collect::<Result<_, _>>()?,
            ),
            other => return Err(mismatch(&other, ty)),
        },
        S::Map { value } => match datum {
            Datum::Map(entries) => {
                let mut out: Vec<(String, Datum)> = entries
                    .into_iter()
                    .map(|(k, v)| Ok((k, cast_nested(v, value, depth + 1)?)))
                    .collect::<Result<_, ValueError>>()?;
                out.sort_by(|a, b| a.0.cmp(&b.0));
                out.dedup_by(|later, earlier| {
                    if later.0 == earlier.0 {
                        std::mem::swap(later, earlier);
                        true
                    } else {
                        false
                    }
                });
                Datum::Map(out)
            }
            other => return Err(mismatch(&other, ty)),
        },
        S::Record { fields } => match datum {
            Datum::Record(values) if values.len() == fields.len() => Datum::Record(
                values
                    .into_iter()
                    .zip(fields)
                    .map(|(v, (name, field_ty, nullable))| {
                        let v = cast_nested(v, field_ty, depth + 1)?;
                        if !nullable && matches!(v, Datum::Null) {
                            return Err(ValueError::new(
                                SqlState::NOT_NULL_VIOLATION,
                                format!("null value in record field \"{name}\""),
                            ));
                        }
                        Ok(v)
                    })
                    .collect::<Result<_, _>>()?,
            ),
            other => return Err(mismatch(&other, ty)),
        },
        _ => return Err(mismatch(&datum, ty)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use SqlScalarType as S;

    fn cast(datum: Datum, ty: &SqlScalarType) -> Result<Datum, ValueError> {
        cast_datum(datum, ty)
    }

    fn numeric(p: Option<u8>, s: Option<u8>) -> SqlScalarType {
        S::Numeric {
            precision: p,
            max_scale: s,
        }
    }

    #[test]
    fn integers_are_range_checked() {
        assert_eq!(cast(Datum::Int64(5), &S::Int32).unwrap(), Datum::Int32(5));
        let e = cast(Datum::Int64(1 << 40), &S::Int32).unwrap_err();
        assert_eq!(e.code, SqlState::NUMERIC_VALUE_OUT_OF_RANGE);
        assert_eq!(e.message, "integer out of range");
        assert_eq!(
            cast(Datum::Int32(40_000), &S::Int16).unwrap_err().message,
            "smallint out of range"
        );
        assert_eq!(
            cast(Datum::Int64(-1), &S::UInt16).unwrap_err().message,
            "uint2 out of range"
        );
        assert_eq!(
            cast(Datum::Int64(i64::MAX), &S::UInt64).unwrap(),
            Datum::UInt64(i64::MAX as u64)
        );
        assert_eq!(
            cast(Datum::Float64(2.5), &S::Int32).unwrap(),
            Datum::Int32(2)
        );
        assert_eq!(
            cast(Datum::Float64(3.5), &S::Int32).unwrap(),
            Datum::Int32(4)
        );
        assert!(cast(Datum::Float64(f64::NAN), &S::Int32).is_err());
        assert!(cast(Datum::Float64(1e300), &S::Int64).is_err());
        assert_eq!(
            cast(Datum::Numeric("2.5".into()), &S::Int32).unwrap(),
            Datum::Int32(3)
        );
        assert_eq!(
            cast(Datum::Numeric("-2.5".into()), &S::Int32).unwrap(),
            Datum::Int32(-3)
        );
        assert!(cast(Datum::Numeric("NaN".into()), &S::Int32).is_err());
        assert!(cast(Datum::Numeric("1e50".into()), &S::Int64).is_err());
        assert_eq!(
            cast(Datum::Text(" 7 ".into()), &S::Int16).unwrap(),
            Datum::Int16(7)
        );
        assert_eq!(
            cast(Datum::Bytes(vec![1]), &S::Int32).unwrap_err().code,
            SqlState::DATATYPE_MISMATCH
        );
    }

    #[test]
    fn numerics_round_like_postgres_on_insert() {
        let ty = numeric(Some(5), Some(2));
        assert_eq!(
            cast(Datum::Int32(12), &ty).unwrap(),
            Datum::Numeric("12.00".into())
        );
        assert_eq!(
            cast(Datum::Numeric("1.234".into()), &ty).unwrap(),
            Datum::Numeric("1.23".into())
        );
        assert_eq!(
            cast(Datum::Numeric("1.235".into()), &ty).unwrap(),
            Datum::Numeric("1.24".into())
        );
        assert_eq!(
            cast(Datum::Float64(0.1), &ty).unwrap(),
            Datum::Numeric("0.10".into())
        );
        assert_eq!(
            cast(Datum::Int32(1000), &ty).unwrap_err().message,
            "numeric field overflow"
        );
        assert_eq!(
            cast(Datum::Float64(f64::NAN), &ty).unwrap(),
            Datum::Numeric("NaN".into())
        );
        assert!(cast(Datum::Float64(f64::INFINITY), &ty).is_err());
        assert_eq!(
            cast(Datum::UInt64(u64::MAX), &numeric(None, None)).unwrap(),
            Datum::Numeric("18446744073709551615".into())
        );
        assert_eq!(
            cast(Datum::Numeric("2.50".into()), &S::Float64).unwrap(),
            Datum::Float64(2.5)
        );
        assert_eq!(
            cast(Datum::Float64(1e300), &S::Float32).unwrap_err().code,
            SqlState::NUMERIC_VALUE_OUT_OF_RANGE
        );
    }

    #[test]
    fn text_converts_through_input_and_everything_to_text() {
        let ty = S::VarChar {
            max_length: Some(2),
        };
        assert_eq!(
            cast(Datum::Text("ab".into()), &ty).unwrap(),
            Datum::Text("ab".into())
        );
        assert_eq!(
            cast(Datum::Text("abc".into()), &ty).unwrap_err().code,
            SqlState::STRING_DATA_RIGHT_TRUNCATION
        );
        assert_eq!(
            cast(Datum::Int32(123), &ty).unwrap_err().code,
            SqlState::STRING_DATA_RIGHT_TRUNCATION
        );
        assert_eq!(
            cast(Datum::Int32(123), &S::Text).unwrap(),
            Datum::Text("123".into())
        );
        assert_eq!(
            cast(Datum::Bool(true), &S::Text).unwrap(),
            Datum::Text("t".into())
        );
        assert_eq!(
            cast(
                Datum::Text("[1,3]".into()),
                &S::Range {
                    element: Box::new(S::Int32)
                }
            )
            .unwrap(),
            strconv::parse_datum(
                "[1,4)",
                &S::Range {
                    element: Box::new(S::Int32)
                }
            )
            .unwrap()
        );
        assert_eq!(
            cast(Datum::Text("{\"b\": 1}".into()), &S::Jsonb).unwrap(),
            Datum::Jsonb("{\"b\":1}".into())
        );
        assert_eq!(cast(Datum::Null, &S::Int32).unwrap(), Datum::Null);
    }

    #[test]
    fn dates_times_and_nested_values() {
        assert_eq!(
            cast(Datum::Date(1), &S::Timestamp).unwrap(),
            Datum::Timestamp(MICROS_PER_DAY)
        );
        assert_eq!(
            cast(Datum::Timestamp(MICROS_PER_DAY + 5), &S::Date).unwrap(),
            Datum::Date(1)
        );
        assert_eq!(
            cast(Datum::Timestamp(-1), &S::Date).unwrap(),
            Datum::Date(-1)
        );
        assert_eq!(
            cast(Datum::Timestamp(7), &S::TimestampTz).unwrap(),
            Datum::TimestampTz(7)
        );
        let list = S::List {
            element: Box::new(S::Int16),
        };
        assert_eq!(
            cast(Datum::List(vec![Datum::Int64(1), Datum::Null]), &list).unwrap(),
            Datum::List(vec![Datum::Int16(1), Datum::Null])
        );
        assert!(cast(Datum::List(vec![Datum::Int64(1 << 20)]), &list).is_err());
        let map = S::Map {
            value: Box::new(S::Int64),
        };
        assert_eq!(
            cast(
                Datum::Map(vec![
                    ("b".into(), Datum::Int32(1)),
                    ("a".into(), Datum::Int32(2)),
                    ("b".into(), Datum::Int32(3))
                ]),
                &map
            )
            .unwrap(),
            Datum::Map(vec![
                ("a".into(), Datum::Int64(2)),
                ("b".into(), Datum::Int64(3))
            ])
        );
        let record = S::Record {
            fields: vec![("a".into(), S::Int64, false), ("b".into(), S::Text, true)],
        };
        assert_eq!(
            cast(
                Datum::Record(vec![Datum::Int32(1), Datum::Int32(2)]),
                &record
            )
            .unwrap(),
            Datum::Record(vec![Datum::Int64(1), Datum::Text("2".into())])
        );
        assert_eq!(
            cast(Datum::Record(vec![Datum::Null, Datum::Null]), &record)
                .unwrap_err()
                .code,
            SqlState::NOT_NULL_VIOLATION
        );
        assert!(cast(Datum::Record(vec![Datum::Int32(1)]), &record).is_err());
        let range = S::Range {
            element: Box::new(S::Int64),
        };
        let r = Datum::Range(Some(Box::new(RangeBounds {
            lower: Some(Datum::Int32(1)),
            upper: Some(Datum::Int32(3)),
            lower_inclusive: false,
            upper_inclusive: true,
        })));
        assert_eq!(strconv::format_datum(&cast(r, &range).unwrap()), "[2,4)");
    }
}
