//! `INSERT ... VALUES` of literals without the query engine.
//!
//! Most INSERTs a client sends are rows of literals, or of bound parameters (which
//! `params::bind` writes as `CAST('<text>' AS <type>)`). Planning and running such a
//! statement through DataFusion costs more than the write itself, and is paid by every
//! single-row INSERT. This module reads those rows straight off the statement: each value
//! becomes the datum its literal denotes, and `tables::insert` casts it to its column's
//! type exactly as it casts what the engine answers (PostgreSQL coerces each value of an
//! INSERT's VALUES list to its target column in the same way).
//!
//! What is taken is what the engine would answer as the same datum: NULL and quoted
//! strings into any column (the engine answers a string literal as text, which the
//! column's cast reads: a date, a timestamp, jsonb, ...), booleans into boolean columns,
//! numbers into number columns, and bound parameters of number and boolean types.
//! Anything else (expressions, other literal forms, a number into a text column, whose
//! printed form is the engine's to decide) goes through the engine as before.

use floe_repr::{Datum, Row, SqlScalarType};
use sqlparser::ast::{CastKind, DataType, Expr, SetExpr, Statement, UnaryOperator, Value};

/// The rows of `source` when it is `VALUES` of literals each going into a column of
/// `targets` (the types of the columns the values fill, in order) that this module
/// handles; `None` when the engine must run it.
pub fn literal_rows(source: &Statement, targets: &[&SqlScalarType]) -> Option<Vec<Row>> {
    let Statement::Query(query) = source else {
        return None;
    };
    let plain = query.with.is_none()
        && query.order_by.is_none()
        && query.limit_clause.is_none()
        && query.fetch.is_none()
        && query.locks.is_empty();
    let SetExpr::Values(values) = query.body.as_ref() else {
        return None;
    };
    if !plain {
        return None;
    }
    let width = values.rows.first()?.len();
    // More values than columns is the engine's error to give.
    if width > targets.len() {
        return None;
    }
    values
        .rows
        .iter()
        .map(|row| {
            if row.len() != width {
                return None;
            }
            row.iter()
                .zip(targets)
                .map(|(expr, target)| literal(expr, target))
                .collect()
        })
        .collect()
}

fn numeric_target(ty: &SqlScalarType) -> bool {
    matches!(
        ty,
        SqlScalarType::Int16
            | SqlScalarType::Int32
            | SqlScalarType::Int64
            | SqlScalarType::Float32
            | SqlScalarType::Float64
            | SqlScalarType::Numeric { .. }
    )
}

fn float_target(ty: &SqlScalarType) -> bool {
    matches!(ty, SqlScalarType::Float32 | SqlScalarType::Float64)
}

/// A number literal for a `real` or `double precision` column, in any spelling
/// (`-1e308`): the numeric PostgreSQL reads, whose cast to the column gives its
/// double or PostgreSQL's error (the engine's decimals hold no such digits).
fn float(digits: &str, negative: bool) -> Option<Datum> {
    let sign = if negative { "-" } else { "" };
    // Any number of digits: a double holds more than a numeric column.
    let decimal = floe_repr::strconv::Decimal::parse(&format!("{sign}{digits}")).ok()??;
    Some(Datum::Numeric(decimal.format(None)))
}

/// The datum `expr` denotes, before the cast to `target`; `None` when it is not one of
/// the literals this module reads.
fn literal(expr: &Expr, target: &SqlScalarType) -> Option<Datum> {
    match expr {
        Expr::Value(value) => match &value.value {
            Value::Null => Some(Datum::Null),
            Value::Boolean(b) if *target == SqlScalarType::Bool => Some(Datum::Bool(*b)),
            // A string has no type of its own: it is read as its column's input.
            Value::SingleQuotedString(text) => Some(Datum::Text(text.clone())),
            // A number goes into number columns only: into text, its printed form is the
            // engine's to decide.
            Value::Number(digits, false) if float_target(target) => float(digits, false),
            Value::Number(digits, false) if numeric_target(target) => number(digits, false),
            _ => None,
        },
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } if numeric_target(target) => match expr.as_ref() {
            Expr::Value(value) => match &value.value {
                Value::Number(digits, false) if float_target(target) => float(digits, true),
                Value::Number(digits, false) => number(digits, true),
                _ => None,
            },
            _ => None,
        },
        // A bound parameter: `CAST('<text>' AS <type>)` (or NULL).
        Expr::Cast {
            kind: CastKind::Cast,
            expr,
            data_type,
            array: false,
            format: None,
        } => {
            let ty = cast_type(data_type)?;
            match expr.as_ref() {
                Expr::Value(value) => match &value.value {
                    Value::Null => Some(Datum::Null),
                    Value::SingleQuotedString(text) => {
                        floe_repr::cast::cast_datum(Datum::Text(text.clone()), &ty).ok()
                    }
                    _ => None,
                },
                _ => None,
            }
        }
        _ => None,
    }
}

/// The type of a parameter's cast, for the types `params::bind` names that this module
/// reads.
fn cast_type(data_type: &DataType) -> Option<SqlScalarType> {
    Some(match data_type {
        DataType::Boolean | DataType::Bool => SqlScalarType::Bool,
        DataType::SmallInt(None) | DataType::Int2(None) => SqlScalarType::Int16,
        DataType::Int(None) | DataType::Integer(None) | DataType::Int4(None) => {
            SqlScalarType::Int32
        }
        DataType::BigInt(None) | DataType::Int8(None) => SqlScalarType::Int64,
        DataType::Real | DataType::Float4 => SqlScalarType::Float32,
        DataType::DoublePrecision | DataType::Float8 => SqlScalarType::Float64,
        DataType::Numeric(sqlparser::ast::ExactNumberInfo::None) => SqlScalarType::Numeric {
            precision: None,
            max_scale: None,
        },
        _ => return None,
    })
}

/// A number literal in its canonical form (digits, an optional fraction, no leading
/// zeros, no exponent) as the engine reads it: `bigint` when it fits, else `numeric`.
fn number(digits: &str, negative: bool) -> Option<Datum> {
    let (whole, fraction) = match digits.split_once('.') {
        Some((whole, fraction)) => (whole, Some(fraction)),
        None => (digits, None),
    };
    let canonical = !whole.is_empty()
        && whole.bytes().all(|b| b.is_ascii_digit())
        && (whole == "0" || !whole.starts_with('0'))
        && fraction.is_none_or(|f| !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()));
    if !canonical {
        return None;
    }
    let sign = if negative { "-" } else { "" };
    if fraction.is_none()
        && let Ok(value) = format!("{sign}{whole}").parse::<i64>()
    {
        return Some(Datum::Int64(value));
    }
    Some(Datum::Numeric(format!("{sign}{digits}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(sql: &str) -> Statement {
        sqlparser::parser::Parser::parse_sql(&sqlparser::dialect::PostgreSqlDialect {}, sql)
            .unwrap()
            .remove(0)
    }

    fn rows(sql: &str, targets: &[SqlScalarType]) -> Option<Vec<Row>> {
        let targets: Vec<&SqlScalarType> = targets.iter().collect();
        literal_rows(&parse(sql), &targets)
    }

    const NUMERIC: SqlScalarType = SqlScalarType::Numeric {
        precision: None,
        max_scale: None,
    };

    #[test]
    fn literals_become_the_datums_they_denote() {
        let targets = [SqlScalarType::Int64, SqlScalarType::Text, NUMERIC];
        assert_eq!(
            rows("VALUES (1, 'a', 2.50), (-3, NULL, -0.5)", &targets),
            Some(vec![
                vec![
                    Datum::Int64(1),
                    Datum::Text("a".into()),
                    Datum::Numeric("2.50".into())
                ],
                vec![Datum::Int64(-3), Datum::Null, Datum::Numeric("-0.5".into())],
            ])
        );
        // Into doubles, any spelling of a number, past the engine's decimals too.
        let float_rows =
            rows("VALUES (-1e308), (1.5), (-2)", &[SqlScalarType::Float64]).expect("literals");
        let doubles: Vec<Datum> = float_rows
            .into_iter()
            .map(|row| floe_repr::cast::cast_datum(row[0].clone(), &SqlScalarType::Float64))
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            doubles,
            [
                Datum::Float64(-1e308),
                Datum::Float64(1.5),
                Datum::Float64(-2.0)
            ]
        );
        // Past bigint: numeric.
        assert_eq!(
            rows("VALUES (99999999999999999999)", &[NUMERIC]),
            Some(vec![vec![Datum::Numeric("99999999999999999999".into())]])
        );
        // A bound parameter, as `params::bind` writes it.
        assert_eq!(
            rows(
                "VALUES (CAST('42' AS bigint), CAST(NULL AS bigint))",
                &[SqlScalarType::Int64, SqlScalarType::Int64]
            ),
            Some(vec![vec![Datum::Int64(42), Datum::Null]])
        );
        assert_eq!(
            rows("VALUES (true)", &[SqlScalarType::Bool]),
            Some(vec![vec![Datum::Bool(true)]])
        );
        // A string into any column is its text, for the column's cast to read.
        assert_eq!(
            rows(
                "VALUES ('2025-01-01', '2025-11-30 00:00:00+00', NULL)",
                &[
                    SqlScalarType::Date,
                    SqlScalarType::TimestampTz,
                    SqlScalarType::Jsonb
                ]
            ),
            Some(vec![vec![
                Datum::Text("2025-01-01".into()),
                Datum::Text("2025-11-30 00:00:00+00".into()),
                Datum::Null
            ]])
        );
    }

    #[test]
    fn anything_else_goes_through_the_engine() {
        let int = [SqlScalarType::Int64];
        for sql in [
            "VALUES (1 + 1)",
            "VALUES (1e5)",
            "VALUES (007)",
            "VALUES (.5)",
            "VALUES (E'a')",
            "VALUES ($1)",
            "VALUES (CAST('x' AS bigint))",
            "SELECT 1",
            "VALUES (1) ORDER BY 1",
            "VALUES (1, 2)",
        ] {
            assert_eq!(rows(sql, &int), None, "{sql}");
        }
        // Rows of different lengths: the engine's error.
        assert_eq!(
            rows(
                "VALUES (1, 2), (3)",
                &[SqlScalarType::Int64, SqlScalarType::Int64]
            ),
            None
        );
        // Numbers into text, booleans into numbers.
        assert_eq!(rows("VALUES (1)", &[SqlScalarType::Text]), None);
        assert_eq!(rows("VALUES (true)", &int), None);
    }
}
