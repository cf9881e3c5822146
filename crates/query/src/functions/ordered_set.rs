//! Postgres' ordered-set aggregates DataFusion lacks, over the sorted list of
//! a group's non-NULL values that the SQL rewrite collects with `array_agg`
//! (`mode() WITHIN GROUP (ORDER BY x)` is `floe_mode(array_agg(x ORDER BY x)
//! FILTER (WHERE x IS NOT NULL))`). With an array of fractions,
//! `percentile_disc` and `percentile_cont` answer an array, one value per
//! fraction (DataFusion's `percentile_cont` takes one).

use datafusion::logical_expr::{ScalarUDF, Volatility};
use floe_repr::{Datum, SqlScalarType, SqlState};

use super::{Arguments, RowFunction, expect_arguments};
use crate::error::QueryError;

/// `mode()`: the most frequent value, the first in the ordering of equals.
pub const MODE: &str = "floe_mode";
/// `percentile_disc(fraction)`: the first value at or past the fraction.
pub const PERCENTILE_DISC: &str = "floe_percentile_disc";
/// `percentile_disc(fractions)`: [`PERCENTILE_DISC`] of each.
pub const PERCENTILE_DISC_EACH: &str = "floe_percentile_disc_each";
/// `percentile_cont(fractions)` of doubles: the value interpolated at each.
pub const PERCENTILE_CONT_EACH: &str = "floe_percentile_cont_each";

pub(super) fn functions() -> Vec<ScalarUDF> {
    let immutable = Volatility::Immutable;
    vec![
        RowFunction::new(MODE, immutable, element_type, |row, _| {
            Ok(mode(items(&row[0])))
        })
        .udf(),
        RowFunction::new(PERCENTILE_DISC, immutable, element_type, |row, _| {
            percentile_disc(items(&row[0]), &row[1])
        })
        .udf(),
        RowFunction::new(PERCENTILE_DISC_EACH, immutable, array_type, |row, _| {
            each_fraction(&row[0], &row[1], percentile_disc)
        })
        .udf(),
        RowFunction::new(PERCENTILE_CONT_EACH, immutable, array_type, |row, _| {
            each_fraction(&row[0], &row[1], percentile_cont)
        })
        .udf(),
    ]
}

/// The type of the collected list's elements.
fn element_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    expect_arguments(arguments.function, arguments, &[1, 2])?;
    Ok(match &arguments.types[0] {
        SqlScalarType::List { element } | SqlScalarType::Array { element } => {
            element.as_ref().clone()
        }
        _ => SqlScalarType::Text,
    })
}

/// An array of the collected list's elements.
fn array_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    Ok(SqlScalarType::Array {
        element: Box::new(element_type(arguments)?),
    })
}

/// `percentile` of the sorted values at each fraction (NULL at a NULL one);
/// NULL for a group of no values.
fn each_fraction(
    sorted: &Datum,
    fractions: &Datum,
    percentile: fn(Vec<Datum>, &Datum) -> Result<Datum, QueryError>,
) -> Result<Datum, QueryError> {
    let sorted = items(sorted);
    if sorted.is_empty() {
        return Ok(Datum::Null);
    }
    items(fractions)
        .iter()
        .map(|fraction| match fraction {
            Datum::Null => Ok(Datum::Null),
            fraction => percentile(sorted.clone(), fraction),
        })
        .collect::<Result<_, _>>()
        .map(Datum::List)
}

fn items(datum: &Datum) -> Vec<Datum> {
    match datum {
        Datum::List(items) => items.clone(),
        Datum::TextArray(items) => items
            .iter()
            .map(|i| i.clone().map_or(Datum::Null, Datum::Text))
            .collect(),
        _ => Vec::new(),
    }
}

/// The value of the longest run of equal values in a sorted list (the first
/// such run); NULL for an empty list.
fn mode(sorted: Vec<Datum>) -> Datum {
    let mut best: Option<(usize, Datum)> = None;
    let mut index = 0;
    while index < sorted.len() {
        let run = sorted[index..]
            .iter()
            .take_while(|d| **d == sorted[index])
            .count();
        if best.as_ref().is_none_or(|(longest, _)| run > *longest) {
            best = Some((run, sorted[index].clone()));
        }
        index += run;
    }
    best.map_or(Datum::Null, |(_, value)| value)
}

/// A fraction as a double, checked to lie between 0 and 1.
fn checked_fraction(fraction: &Datum) -> Result<f64, QueryError> {
    let fraction = super::math::as_double(fraction)?;
    if !(0.0..=1.0).contains(&fraction) {
        return Err(QueryError::new(
            SqlState::NUMERIC_VALUE_OUT_OF_RANGE,
            format!("percentile value {fraction} is not between 0 and 1"),
        ));
    }
    Ok(fraction)
}

/// PostgreSQL's `percentile_cont`: the value at `fraction * (n - 1)` in the
/// sorted doubles, interpolated between its neighbours.
fn percentile_cont(sorted: Vec<Datum>, fraction: &Datum) -> Result<Datum, QueryError> {
    let fraction = checked_fraction(fraction)?;
    let values = sorted
        .iter()
        .map(super::math::as_double)
        .collect::<Result<Vec<f64>, _>>()?;
    let Some(last) = values.len().checked_sub(1) else {
        return Ok(Datum::Null);
    };
    let position = fraction * last as f64;
    let (lower, upper) = (position.floor() as usize, position.ceil() as usize);
    let (low, high) = (values[lower.min(last)], values[upper.min(last)]);
    Ok(Datum::Float64(
        low + (high - low) * (position - lower as f64),
    ))
}

fn percentile_disc(sorted: Vec<Datum>, fraction: &Datum) -> Result<Datum, QueryError> {
    let fraction = checked_fraction(fraction)?;
    if sorted.is_empty() {
        return Ok(Datum::Null);
    }
    let position = ((fraction * sorted.len() as f64).ceil() as usize).max(1);
    Ok(sorted.into_iter().nth(position - 1).unwrap_or(Datum::Null))
}
