//! Postgres' ordered-set aggregates DataFusion lacks, over the sorted list of
//! a group's non-NULL values that the SQL rewrite collects with `array_agg`
//! (`mode() WITHIN GROUP (ORDER BY x)` is `floe_mode(array_agg(x ORDER BY x)
//! FILTER (WHERE x IS NOT NULL))`).

use datafusion::logical_expr::{ScalarUDF, Volatility};
use floe_repr::{Datum, SqlScalarType, SqlState};

use super::{Arguments, RowFunction, expect_arguments};
use crate::error::QueryError;

/// `mode()`: the most frequent value, the first in the ordering of equals.
pub const MODE: &str = "floe_mode";
/// `percentile_disc(fraction)`: the first value at or past the fraction.
pub const PERCENTILE_DISC: &str = "floe_percentile_disc";

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

fn percentile_disc(sorted: Vec<Datum>, fraction: &Datum) -> Result<Datum, QueryError> {
    let fraction = super::math::as_double(fraction)?;
    if !(0.0..=1.0).contains(&fraction) {
        return Err(QueryError::new(
            SqlState::NUMERIC_VALUE_OUT_OF_RANGE,
            format!("percentile value {fraction} is not between 0 and 1"),
        ));
    }
    if sorted.is_empty() {
        return Ok(Datum::Null);
    }
    let position = ((fraction * sorted.len() as f64).ceil() as usize).max(1);
    Ok(sorted.into_iter().nth(position - 1).unwrap_or(Datum::Null))
}
