//! Range functions and operators as PostgreSQL has them: the constructors
//! (`int4range(1, 5)`, `numrange(1.5, 2.5, '[]')`, ...), the bound accessors
//! (`lower`, `upper`, `isempty`, `lower_inc`, ...) and containment and
//! overlap (`@>`, `<@`, `&&`, planned in [`crate::semantics`]).

use std::cmp::Ordering;

use datafusion::logical_expr::{ScalarUDF, Volatility};
use floe_repr::strconv::{compare_bound_values, make_range, range_type_name};
use floe_repr::{Datum, RangeBounds, SqlScalarType, SqlState};

use super::{Arguments, RowFunction, no_such_function};
use crate::error::QueryError;

/// `range @> range-or-element` (`a <@ b` is this with its operands swapped).
pub const CONTAINS: &str = "floe_range_contains";
/// `range && range`.
pub const OVERLAPS: &str = "floe_range_overlaps";

/// The range constructors, named by their range types.
const CONSTRUCTORS: [&str; 6] = [
    "int4range",
    "int8range",
    "numrange",
    "daterange",
    "tsrange",
    "tstzrange",
];

pub(super) fn functions() -> Vec<ScalarUDF> {
    let immutable = Volatility::Immutable;
    let mut functions: Vec<ScalarUDF> = CONSTRUCTORS
        .iter()
        .map(|name| {
            RowFunction::new(name, immutable, constructor_type, construct)
                .lenient()
                .udf()
        })
        .collect();
    let accessors: [(&'static str, super::ReturnRule, super::RowRule); 5] = [
        ("isempty", flag_type, |row, _| {
            Ok(Datum::Bool(bounds(&row[0]).is_none()))
        }),
        ("lower_inc", flag_type, |row, _| {
            Ok(Datum::Bool(
                bounds(&row[0]).is_some_and(|b| b.lower_inclusive),
            ))
        }),
        ("upper_inc", flag_type, |row, _| {
            Ok(Datum::Bool(
                bounds(&row[0]).is_some_and(|b| b.upper_inclusive),
            ))
        }),
        ("lower_inf", flag_type, |row, _| {
            Ok(Datum::Bool(
                bounds(&row[0]).is_some_and(|b| b.lower.is_none()),
            ))
        }),
        ("upper_inf", flag_type, |row, _| {
            Ok(Datum::Bool(
                bounds(&row[0]).is_some_and(|b| b.upper.is_none()),
            ))
        }),
    ];
    functions.extend(
        accessors
            .into_iter()
            .map(|(name, rule, row)| RowFunction::new(name, immutable, rule, row).udf()),
    );
    functions.push(RowFunction::new(CONTAINS, immutable, operator_type, contains).udf());
    functions.push(RowFunction::new(OVERLAPS, immutable, operator_type, overlaps).udf());
    functions
}

/// `lower` and `upper` of a range, which are DataFusion's of text.
pub(super) fn overloads() -> Vec<ScalarUDF> {
    let immutable = Volatility::Immutable;
    let takes_range: fn(&[SqlScalarType]) -> bool = |types| matches!(types, [t] if is_range(t));
    vec![
        ScalarUDF::new_from_impl(super::Overloaded::new(
            RowFunction::new("lower", immutable, bound_type, |row, _| {
                Ok(bounds(&row[0])
                    .and_then(|b| b.lower.clone())
                    .unwrap_or(Datum::Null))
            }),
            datafusion::functions::string::lower(),
            takes_range,
        )),
        ScalarUDF::new_from_impl(super::Overloaded::new(
            RowFunction::new("upper", immutable, bound_type, |row, _| {
                Ok(bounds(&row[0])
                    .and_then(|b| b.upper.clone())
                    .unwrap_or(Datum::Null))
            }),
            datafusion::functions::string::upper(),
            takes_range,
        )),
    ]
}

/// Whether a type is a range.
pub fn is_range(ty: &SqlScalarType) -> bool {
    matches!(ty, SqlScalarType::Range { .. })
}

/// The element type of a constructor's range.
fn element_of(name: &str) -> Option<SqlScalarType> {
    Some(match name {
        "int4range" => SqlScalarType::Int32,
        "int8range" => SqlScalarType::Int64,
        "numrange" => SqlScalarType::Numeric {
            precision: None,
            max_scale: None,
        },
        "daterange" => SqlScalarType::Date,
        "tsrange" => SqlScalarType::Timestamp,
        "tstzrange" => SqlScalarType::TimestampTz,
        _ => return None,
    })
}

fn constructor_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    let element =
        element_of(arguments.function).ok_or_else(|| QueryError::internal("range constructor"))?;
    if !(2..=3).contains(&arguments.types.len()) {
        return Err(no_such_function(arguments.function, &arguments.types));
    }
    Ok(SqlScalarType::Range {
        element: Box::new(element),
    })
}

/// `int4range(lower, upper [, '[)'])`: a NULL bound is unbounded.
fn construct(row: &[Datum], ty: &SqlScalarType) -> Result<Datum, QueryError> {
    let SqlScalarType::Range { element } = ty else {
        return Err(QueryError::internal("range constructor type"));
    };
    let flags = match row.get(2) {
        None => "[)".to_string(),
        Some(Datum::Null) => {
            return Err(QueryError::new(
                SqlState::NULL_VALUE_NOT_ALLOWED,
                "range constructor flags argument must not be null",
            ));
        }
        Some(Datum::Text(flags)) => flags.clone(),
        Some(other) => floe_repr::format_datum(other),
    };
    let (lower_inclusive, upper_inclusive) = match flags.as_str() {
        "[]" => (true, true),
        "[)" => (true, false),
        "(]" => (false, true),
        "()" => (false, false),
        _ => {
            return Err(
                QueryError::new(SqlState::SYNTAX_ERROR, "invalid range bound flags")
                    .with_hint("Valid values are \"[]\", \"[)\", \"(]\", and \"()\"."),
            );
        }
    };
    let bound = |datum: &Datum| -> Result<Option<Datum>, QueryError> {
        match datum {
            Datum::Null => Ok(None),
            value => floe_repr::cast_datum(value.clone(), element)
                .map(Some)
                .map_err(QueryError::from_value),
        }
    };
    make_range(
        bound(&row[0])?,
        bound(&row[1])?,
        lower_inclusive,
        upper_inclusive,
        range_type_name(element),
    )
    .map_err(QueryError::from_value)
}

fn range_argument<'a>(arguments: &'a Arguments<'_>) -> Result<&'a SqlScalarType, QueryError> {
    match arguments.types.as_slice() {
        [SqlScalarType::Range { element }] => Ok(element),
        _ => Err(no_such_function(arguments.function, &arguments.types)),
    }
}

fn bound_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    range_argument(arguments).cloned()
}

fn flag_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    range_argument(arguments)?;
    Ok(SqlScalarType::Bool)
}

fn operator_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    if arguments.types.len() != 2 || !arguments.types.iter().any(is_range) {
        return Err(no_such_function(arguments.function, &arguments.types));
    }
    Ok(SqlScalarType::Bool)
}

/// A range's bounds; `None` for the empty range.
fn bounds(datum: &Datum) -> Option<&RangeBounds> {
    match datum {
        Datum::Range(Some(bounds)) => Some(bounds),
        _ => None,
    }
}

/// Orders two values of one element type (an element compared with a
/// range is first read as the range's element type).
fn compare(a: &Datum, b: &Datum) -> Result<Ordering, QueryError> {
    compare_bound_values(a, b).ok_or_else(|| {
        QueryError::new(
            SqlState::DATATYPE_MISMATCH,
            "range element type does not match the range",
        )
    })
}

/// Compares lower bounds: unbounded first; at one value an inclusive bound
/// starts before an exclusive one.
fn compare_lower(a: &RangeBounds, b: &RangeBounds) -> Result<Ordering, QueryError> {
    Ok(match (&a.lower, &b.lower) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(x), Some(y)) => compare(x, y)?.then(b.lower_inclusive.cmp(&a.lower_inclusive)),
    })
}

/// Compares upper bounds: unbounded last; at one value an exclusive bound
/// ends before an inclusive one.
fn compare_upper(a: &RangeBounds, b: &RangeBounds) -> Result<Ordering, QueryError> {
    Ok(match (&a.upper, &b.upper) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Greater,
        (Some(_), None) => Ordering::Less,
        (Some(x), Some(y)) => compare(x, y)?.then(a.upper_inclusive.cmp(&b.upper_inclusive)),
    })
}

/// Whether the lower bound of `a` is at or before the upper bound of `b`.
fn starts_before_end(a: &RangeBounds, b: &RangeBounds) -> Result<bool, QueryError> {
    let (Some(lower), Some(upper)) = (&a.lower, &b.upper) else {
        return Ok(true);
    };
    Ok(match compare(lower, upper)? {
        Ordering::Less => true,
        Ordering::Equal => a.lower_inclusive && b.upper_inclusive,
        Ordering::Greater => false,
    })
}

/// An element as the range's element type (`numrange @> 2`).
fn as_element(value: &Datum, range: &RangeBounds) -> Result<Datum, QueryError> {
    let Some(sample) = range.lower.as_ref().or(range.upper.as_ref()) else {
        return Ok(value.clone());
    };
    let ty = match sample {
        Datum::Int32(_) => SqlScalarType::Int32,
        Datum::Int64(_) => SqlScalarType::Int64,
        Datum::Date(_) => SqlScalarType::Date,
        Datum::Timestamp(_) => SqlScalarType::Timestamp,
        Datum::TimestampTz(_) => SqlScalarType::TimestampTz,
        _ => SqlScalarType::Numeric {
            precision: None,
            max_scale: None,
        },
    };
    floe_repr::cast_datum(value.clone(), &ty).map_err(QueryError::from_value)
}

/// `a @> b`: a range contains a range or an element.
fn contains(row: &[Datum], _: &SqlScalarType) -> Result<Datum, QueryError> {
    let (outer, inner) = (&row[0], &row[1]);
    let Some(outer) = bounds(outer) else {
        // The empty range contains only the empty range.
        return Ok(Datum::Bool(matches!(inner, Datum::Range(None))));
    };
    let contained = match inner {
        Datum::Range(None) => true,
        Datum::Range(Some(inner)) => {
            compare_lower(outer, inner)? != Ordering::Greater
                && compare_upper(outer, inner)? != Ordering::Less
        }
        element => {
            let element = as_element(element, outer)?;
            let point = RangeBounds {
                lower: Some(element.clone()),
                upper: Some(element),
                lower_inclusive: true,
                upper_inclusive: true,
            };
            compare_lower(outer, &point)? != Ordering::Greater
                && compare_upper(outer, &point)? != Ordering::Less
        }
    };
    Ok(Datum::Bool(contained))
}

/// `a && b`: two ranges share a point.
fn overlaps(row: &[Datum], _: &SqlScalarType) -> Result<Datum, QueryError> {
    let (Some(a), Some(b)) = (bounds(&row[0]), bounds(&row[1])) else {
        return Ok(Datum::Bool(false));
    };
    Ok(Datum::Bool(
        starts_before_end(a, b)? && starts_before_end(b, a)?,
    ))
}
