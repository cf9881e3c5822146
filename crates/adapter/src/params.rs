//! `$n` parameters of the extended protocol: their inferred types, and
//! binding values into a statement as typed literals.

use datafusion::arrow::datatypes::{DataType, Field};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::LogicalPlan;
use floe_repr::PgType;
use floe_sql_parser::ast::Statement;
use sqlparser::ast::{Expr, Value, VisitMut, VisitorMut};

use crate::error::AdapterError;

/// The engine's inferred type of each parameter, by position (`$1` first).
pub fn parameter_types(plan: &LogicalPlan) -> Vec<Option<PgType>> {
    let Ok(types) = plan.get_parameter_types() else {
        return Vec::new();
    };
    let count = types
        .keys()
        .filter_map(|name| name.trim_start_matches('$').parse::<usize>().ok())
        .max()
        .unwrap_or(0);
    // Compared with an `oid` column: `oid`, not the `uint4` its Arrow type would say.
    let oids = crate::pg_functions::oid_parameters(plan);
    (1..=count)
        .map(|n| {
            let name = format!("${n}");
            if oids.contains(&name) {
                return Some(PgType::Oid);
            }
            types
                .get(&name)
                .cloned()
                .flatten()
                .map(|data_type| floe_arrow::pg_type_of(&Field::new("", data_type, true)))
        })
        .collect()
}

/// The SQL type a parameter's literal is cast to, when its type is known.
fn sql_type_name(pg_type: PgType) -> Option<&'static str> {
    Some(match pg_type {
        PgType::Bool => "boolean",
        PgType::Int2 => "smallint",
        PgType::Int4 => "integer",
        PgType::Int8 => "bigint",
        PgType::Float4 => "real",
        PgType::Float8 => "double precision",
        PgType::Numeric => "numeric",
        PgType::Date => "date",
        PgType::Timestamp => "timestamp",
        PgType::TimestampTz => "timestamptz",
        PgType::Interval => "interval",
        _ => return None,
    })
}

/// The number of a `$n` placeholder (1 or more).
fn parameter_number(name: &str) -> Option<usize> {
    name.strip_prefix('$')
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|n| *n >= 1)
}

/// `CAST(expr AS type_name)`, the type parsed once per name (every run of a prepared
/// statement casts its parameters; parsing the cast's text each time cost a run more
/// than planning it did).
fn cast_to(expr: Expr, type_name: &'static str) -> Option<Expr> {
    static PARSED: std::sync::LazyLock<
        std::sync::Mutex<std::collections::HashMap<&'static str, sqlparser::ast::DataType>>,
    > = std::sync::LazyLock::new(Default::default);
    let mut parsed = PARSED.lock().ok()?;
    let data_type = match parsed.get(type_name) {
        Some(data_type) => data_type.clone(),
        None => {
            let data_type =
                sqlparser::parser::Parser::new(&sqlparser::dialect::PostgreSqlDialect {})
                    .try_with_sql(type_name)
                    .and_then(|mut parser| parser.parse_data_type())
                    .ok()?;
            parsed.insert(type_name, data_type.clone());
            data_type
        }
    };
    Some(Expr::Cast {
        kind: sqlparser::ast::CastKind::Cast,
        expr: Box::new(expr),
        data_type,
        array: false,
        format: None,
    })
}

/// Replaces `$n` placeholders with the bound values (text form; `None` is
/// NULL), each cast to its type when known.
pub fn bind(
    statement: Statement,
    values: &[Option<String>],
    types: &[Option<PgType>],
) -> Result<Statement, AdapterError> {
    let Statement::Standard(mut statement) = statement else {
        return Err(AdapterError::ParametersUnsupported("these"));
    };
    struct Binder<'a> {
        values: &'a [Option<String>],
        types: &'a [Option<PgType>],
        error: Option<AdapterError>,
    }
    impl VisitorMut for Binder<'_> {
        type Break = ();
        fn post_visit_expr(&mut self, expr: &mut Expr) -> std::ops::ControlFlow<()> {
            let Expr::Value(value) = expr else {
                return std::ops::ControlFlow::Continue(());
            };
            let Value::Placeholder(name) = &value.value else {
                return std::ops::ControlFlow::Continue(());
            };
            let Some(index) = parameter_number(name) else {
                self.error = Some(AdapterError::Query {
                    code: floe_repr::SqlState::SYNTAX_ERROR,
                    message: format!("invalid parameter {name}"),
                });
                return std::ops::ControlFlow::Break(());
            };
            let Some(bound) = self.values.get(index - 1) else {
                self.error = Some(AdapterError::Query {
                    code: floe_repr::SqlState::UNDEFINED_PARAMETER,
                    message: format!("there is no parameter ${index}"),
                });
                return std::ops::ControlFlow::Break(());
            };
            let literal = Expr::Value(
                match bound {
                    None => Value::Null,
                    Some(text) => Value::SingleQuotedString(text.clone()),
                }
                .into(),
            );
            let type_name = self
                .types
                .get(index - 1)
                .copied()
                .flatten()
                .and_then(sql_type_name);
            *expr = match type_name {
                Some(type_name) => match cast_to(literal, type_name) {
                    Some(cast) => cast,
                    None => {
                        self.error = Some(AdapterError::Internal(format!(
                            "binding ${index}: no type {type_name}"
                        )));
                        return std::ops::ControlFlow::Break(());
                    }
                },
                None => literal,
            };
            std::ops::ControlFlow::Continue(())
        }
    }
    let mut binder = Binder {
        values,
        types,
        error: None,
    };
    let _ = VisitMut::visit(statement.as_mut(), &mut binder);
    match binder.error {
        Some(error) => Err(error),
        None => Ok(Statement::Standard(statement)),
    }
}

/// For `INSERT ... VALUES`, the type of each parameter that stands alone as a
/// value: its target column's type.
pub fn insert_parameter_types(plan: &floe_sql::dml::InsertPlan) -> Vec<Option<PgType>> {
    use sqlparser::ast::{SetExpr, Statement as S};
    let mut types: Vec<Option<PgType>> = Vec::new();
    let S::Query(query) = plan.source.as_ref() else {
        return types;
    };
    let SetExpr::Values(values) = query.body.as_ref() else {
        return types;
    };
    for row in &values.rows {
        for (expr, column) in row.iter().zip(&plan.columns) {
            if let Expr::Value(value) = expr
                && let Value::Placeholder(name) = &value.value
                && let Some(n) = parameter_number(name)
            {
                if types.len() < n {
                    types.resize(n, None);
                }
                let scalar = &plan.desc.columns[*column].1.scalar_type;
                types[n - 1] = Some(PgType::from_scalar(scalar));
            }
        }
    }
    types
}

/// A query planned once for every value of its `$n` parameters
/// (`floe_query::parameter`): the statement to run has each parameter cast to its
/// type, as [`bind`] casts its literal.
#[derive(Debug, Clone)]
pub struct LateParameters {
    pub types: Vec<DataType>,
    /// This run's values.
    pub values: Vec<ScalarValue>,
    /// The statement with the values bound, to run instead when the query cannot be
    /// planned with its parameters.
    pub bound: Bound,
}

/// A statement with a run's values bound, bound only when it is run (most runs are
/// of the statement with parameters).
#[derive(Debug, Clone)]
pub enum Bound {
    /// Bound as written (the simple protocol's statement).
    Statement(Statement),
    /// The statement with `$n`, and the values' texts and types to bind.
    Later {
        statement: Statement,
        values: Vec<Option<String>>,
        types: Vec<Option<PgType>>,
    },
}

impl Bound {
    /// The bound statement ([`bind`]).
    pub fn statement(self) -> Result<Statement, AdapterError> {
        match self {
            Bound::Statement(statement) => Ok(statement),
            Bound::Later {
                statement,
                values,
                types,
            } => bind(statement, &values, &types),
        }
    }
}

/// The query `statement` to run with its parameters read when it runs, when every
/// parameter's value reads as its type in one unmistakable way (the forms below,
/// which mean the same to PostgreSQL and to a cast) and none stands in a `LIMIT`,
/// `OFFSET` or `FETCH` (planned as numbers). `None` sends the statement the way of
/// [`bind`], which also gives the errors of values that do not read: the statement
/// comes back as the error.
pub fn late_parameters(
    statement: Statement,
    values: &[Option<String>],
    types: &[Option<PgType>],
) -> Result<(Statement, LateParameters), Box<Statement>> {
    let Some((data_types, scalars)) = late_values(&statement, values, types) else {
        return Err(Box::new(statement));
    };
    let mut generic = statement.clone();
    if cast_parameters(&mut generic, types, Cast::AsBound).is_none() {
        return Err(Box::new(statement));
    }
    let parameters = LateParameters {
        types: data_types,
        values: scalars,
        bound: Bound::Later {
            statement,
            values: values.to_vec(),
            types: types.to_vec(),
        },
    };
    Ok((generic, parameters))
}

/// The engine's types and this run's values of `statement`'s parameters, when it is
/// a query that [`late_parameters`] may run with them.
fn late_values(
    statement: &Statement,
    values: &[Option<String>],
    types: &[Option<PgType>],
) -> Option<(Vec<DataType>, Vec<ScalarValue>)> {
    let Statement::Standard(standard) = statement else {
        return None;
    };
    let sqlparser::ast::Statement::Query(query) = standard.as_ref() else {
        return None;
    };
    if values.len() != types.len() || limits_hold_parameters(query) {
        return None;
    }
    let mut data_types = Vec::with_capacity(types.len());
    let mut scalars = Vec::with_capacity(types.len());
    for (value, pg_type) in values.iter().zip(types) {
        let data_type = late_type(pg_type.as_ref().copied()?)?;
        let scalar = match value {
            None => ScalarValue::try_from(&data_type).ok()?,
            Some(text) => read_value(text, &data_type)?,
        };
        data_types.push(data_type);
        scalars.push(scalar);
    }
    Some((data_types, scalars))
}

/// The engine's type of a parameter of `pg_type`, for the types read when a plan
/// runs.
fn late_type(pg_type: PgType) -> Option<DataType> {
    Some(match pg_type {
        PgType::Bool => DataType::Boolean,
        PgType::Int2 => DataType::Int16,
        PgType::Int4 => DataType::Int32,
        PgType::Int8 => DataType::Int64,
        PgType::Float8 => DataType::Float64,
        PgType::Text => DataType::Utf8,
        _ => return None,
    })
}

/// `text` as a value of `data_type`, in the forms every reader takes alike: digits
/// with a sign for integers (in range), a plain decimal or exponent for a double,
/// `t`, `true`, `f`, `false` for a boolean, any text for text.
fn read_value(text: &str, data_type: &DataType) -> Option<ScalarValue> {
    let integer = || {
        let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
        (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then_some(text)
    };
    Some(match data_type {
        DataType::Int16 => ScalarValue::Int16(Some(integer()?.parse().ok()?)),
        DataType::Int32 => ScalarValue::Int32(Some(integer()?.parse().ok()?)),
        DataType::Int64 => ScalarValue::Int64(Some(integer()?.parse().ok()?)),
        DataType::Float64 => ScalarValue::Float64(Some(plain_double(text)?)),
        DataType::Boolean => ScalarValue::Boolean(Some(match text {
            "t" | "true" => true,
            "f" | "false" => false,
            _ => return None,
        })),
        DataType::Utf8 => ScalarValue::Utf8(Some(text.to_string())),
        _ => return None,
    })
}

/// A finite double written as digits, a point and an exponent (`-1.5`, `2e+300`):
/// not `NaN`, `Infinity` or spaces, which readers spell differently.
fn plain_double(text: &str) -> Option<f64> {
    let plain = text
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'+' | b'-' | b'.' | b'e' | b'E'))
        && text.bytes().any(|b| b.is_ascii_digit());
    let value: f64 = text.parse().ok().filter(|_| plain)?;
    value.is_finite().then_some(value)
}

/// Whether a `LIMIT`, `OFFSET` or `FETCH` of the query or a query in it holds a
/// parameter.
fn limits_hold_parameters(query: &sqlparser::ast::Query) -> bool {
    use sqlparser::ast::{Visit, Visitor};
    struct Limits;
    impl Visitor for Limits {
        type Break = ();
        fn pre_visit_query(&mut self, query: &sqlparser::ast::Query) -> std::ops::ControlFlow<()> {
            let holds = query
                .limit_clause
                .as_ref()
                .map(|limit| limit.to_string())
                .into_iter()
                .chain(query.fetch.as_ref().map(|fetch| fetch.to_string()))
                .any(|text| text.contains('$'));
            if holds {
                std::ops::ControlFlow::Break(())
            } else {
                std::ops::ControlFlow::Continue(())
            }
        }
    }
    query.visit(&mut Limits).is_break()
}

/// A query as Describe plans it: each parameter the client gave a type cast to it,
/// as PostgreSQL plans it (a driver that declares `$1` an integer reads the
/// columns of `$1 - $2` as integers; `$1 || $2` of two text parameters is text).
/// Other statements, and parameters without a type, stay as they are.
pub fn with_declared_types(statement: &Statement, declared: &[Option<PgType>]) -> Statement {
    let mut described = statement.clone();
    let is_query = matches!(
        statement,
        Statement::Standard(standard) if matches!(standard.as_ref(), sqlparser::ast::Statement::Query(_))
    );
    if is_query
        && declared.iter().any(Option::is_some)
        && cast_parameters(&mut described, declared, Cast::TextToo).is_some()
    {
        return described;
    }
    statement.clone()
}

/// Which parameters [`cast_parameters`] casts.
#[derive(Clone, Copy, PartialEq)]
enum Cast {
    /// Those [`bind`] casts: a text parameter stays bare, as its literal does.
    AsBound,
    /// Text ones too.
    TextToo,
}

/// Casts each `$n` of `statement` that has a type to it (those `cast` says; one
/// without a type stays bare). `None` when a parameter has no number.
fn cast_parameters(statement: &mut Statement, types: &[Option<PgType>], cast: Cast) -> Option<()> {
    let Statement::Standard(statement) = statement else {
        return None;
    };
    struct Caster<'a> {
        types: &'a [Option<PgType>],
        cast: Cast,
    }
    impl VisitorMut for Caster<'_> {
        type Break = ();
        fn post_visit_expr(&mut self, expr: &mut Expr) -> std::ops::ControlFlow<()> {
            let Expr::Value(value) = expr else {
                return std::ops::ControlFlow::Continue(());
            };
            let Value::Placeholder(name) = &value.value else {
                return std::ops::ControlFlow::Continue(());
            };
            let Some(index) = parameter_number(name).map(|n| n - 1) else {
                return std::ops::ControlFlow::Break(());
            };
            let pg_type = self.types.get(index).copied().flatten();
            let type_name = match pg_type {
                Some(PgType::Text) if self.cast == Cast::TextToo => Some("text"),
                _ => pg_type.and_then(sql_type_name),
            };
            if let Some(type_name) = type_name {
                match cast_to(expr.clone(), type_name) {
                    Some(cast) => *expr = cast,
                    None => return std::ops::ControlFlow::Break(()),
                }
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    let mut caster = Caster { types, cast };
    VisitMut::visit(statement.as_mut(), &mut caster)
        .is_continue()
        .then_some(())
}

/// The most literals [`literal_parameters`] takes out of one statement.
const MAX_LITERAL_PARAMETERS: usize = 64;

/// A query of the simple protocol with the integer constants it compares against
/// read when it runs, so that the same query with other constants (an application
/// that writes its values into the text) runs on one plan: each integer literal
/// that is an operand of a comparison (`=`, `<>`, `<`, `<=`, `>`, `>=`), an item of
/// an `IN` list or a bound of `BETWEEN`, and fits an `integer` (the type PostgreSQL
/// gives it), becomes a parameter of type `integer`. A comparison's answer does not
/// depend on which integer type its constant has. `None` when there is no such
/// literal, or when the statement has parameters of its own.
pub fn literal_parameters(statement: &Statement) -> Option<(Statement, LateParameters)> {
    let Statement::Standard(standard) = statement else {
        return None;
    };
    let sqlparser::ast::Statement::Query(query) = standard.as_ref() else {
        return None;
    };
    if holds_parameters(query) {
        return None;
    }
    let mut generic = standard.clone();
    let mut taker = LiteralTaker {
        values: Vec::new(),
        refused: false,
    };
    let _ = VisitMut::visit(generic.as_mut(), &mut taker);
    if taker.refused || taker.values.is_empty() {
        return None;
    }
    let parameters = LateParameters {
        types: vec![DataType::Int32; taker.values.len()],
        values: taker
            .values
            .into_iter()
            .map(|value| ScalarValue::Int32(Some(value)))
            .collect(),
        bound: Bound::Statement(statement.clone()),
    };
    Some((Statement::Standard(generic), parameters))
}

/// Whether `query` holds a `$n`.
fn holds_parameters(query: &sqlparser::ast::Query) -> bool {
    use sqlparser::ast::{Visit, Visitor};
    struct Parameters;
    impl Visitor for Parameters {
        type Break = ();
        fn pre_visit_expr(&mut self, expr: &Expr) -> std::ops::ControlFlow<()> {
            match expr {
                Expr::Value(value) if matches!(value.value, Value::Placeholder(_)) => {
                    std::ops::ControlFlow::Break(())
                }
                _ => std::ops::ControlFlow::Continue(()),
            }
        }
    }
    query.visit(&mut Parameters).is_break()
}

/// Takes the integer literals [`literal_parameters`] names out of a statement.
struct LiteralTaker {
    values: Vec<i32>,
    /// Too many literals.
    refused: bool,
}

impl LiteralTaker {
    /// Replaces `expr` with a parameter when it is an integer literal that fits an
    /// `integer` (negated or not).
    fn take(&mut self, expr: &mut Expr) {
        let value = match expr {
            Expr::Value(value) => integer_literal(&value.value),
            Expr::UnaryOp {
                op: sqlparser::ast::UnaryOperator::Minus,
                expr: inner,
            } => match inner.as_ref() {
                Expr::Value(value) => integer_literal(&value.value).and_then(|v| v.checked_neg()),
                _ => None,
            },
            _ => None,
        };
        let Some(value) = value else {
            return;
        };
        if self.values.len() >= MAX_LITERAL_PARAMETERS {
            self.refused = true;
            return;
        }
        self.values.push(value);
        let placeholder = Expr::Value(Value::Placeholder(format!("${}", self.values.len())).into());
        match cast_to(placeholder, "integer") {
            Some(cast) => *expr = cast,
            None => self.refused = true,
        }
    }
}

/// Whether `expr` names a column. A literal is taken only where it is compared
/// with a value of the rows: a comparison of constants (`1 = 2`, `-59 = 55 *
/// -56`) is folded when planned, as PostgreSQL folds it, so that what it
/// decides (a `CASE` branch never taken, with its `1 / 0`) is never run.
fn names_column(expr: &Expr) -> bool {
    floe_query::srf::references_columns(expr)
}

/// The value of an unsigned integer literal that fits an `integer`.
fn integer_literal(value: &Value) -> Option<i32> {
    match value {
        Value::Number(digits, _) if digits.bytes().all(|b| b.is_ascii_digit()) => {
            digits.parse().ok()
        }
        _ => None,
    }
}

impl VisitorMut for LiteralTaker {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> std::ops::ControlFlow<()> {
        use sqlparser::ast::BinaryOperator as Op;
        match expr {
            Expr::BinaryOp {
                left,
                op: Op::Eq | Op::NotEq | Op::Lt | Op::LtEq | Op::Gt | Op::GtEq,
                right,
            } => {
                if names_column(right) {
                    self.take(left);
                }
                if names_column(left) {
                    self.take(right);
                }
            }
            Expr::InList { expr, list, .. } if names_column(expr) => {
                list.iter_mut().for_each(|item| self.take(item))
            }
            Expr::Between {
                expr, low, high, ..
            } if names_column(expr) => {
                self.take(low);
                self.take(high);
            }
            _ => {}
        }
        if self.refused {
            std::ops::ControlFlow::Break(())
        } else {
            std::ops::ControlFlow::Continue(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(sql: &str) -> Statement {
        floe_sql_parser::parse_statements(sql)
            .unwrap()
            .into_iter()
            .next()
            .unwrap()
    }

    /// The generic statement's text and the values taken, or `None`.
    fn taken(sql: &str) -> Option<(String, Vec<ScalarValue>)> {
        literal_parameters(&parse(sql)).map(|(generic, parameters)| {
            assert_eq!(
                parameters.bound.clone().statement().unwrap(),
                parse(sql),
                "the statement as written"
            );
            (generic.to_string(), parameters.values)
        })
    }

    #[test]
    fn integer_constants_of_comparisons_become_parameters() {
        let (text, values) = taken(
            "SELECT a > 1 FROM t WHERE a = 42 AND b IN (1, -2) AND c BETWEEN 3 AND 2147483647 \
             AND d <> 1.5 GROUP BY 1 ORDER BY 1 LIMIT 5",
        )
        .unwrap();
        assert_eq!(
            text,
            "SELECT a > CAST($1 AS INTEGER) FROM t WHERE a = CAST($2 AS INTEGER) AND b IN \
             (CAST($3 AS INTEGER), CAST($4 AS INTEGER)) AND c BETWEEN CAST($5 AS INTEGER) AND \
             CAST($6 AS INTEGER) AND d <> 1.5 GROUP BY 1 ORDER BY 1 LIMIT 5"
        );
        let integers: Vec<ScalarValue> = [1, 42, 1, -2, 3, i32::MAX]
            .into_iter()
            .map(|v| ScalarValue::Int32(Some(v)))
            .collect();
        assert_eq!(values, integers);
    }

    #[test]
    fn other_statements_and_constants_stay() {
        for sql in [
            // No comparison, a constant beyond `integer`, a decimal, a string.
            "SELECT 42",
            "SELECT a FROM t WHERE a = 3000000000",
            "SELECT a FROM t WHERE a = -2147483649",
            "SELECT a FROM t WHERE a = 1.0 OR b = '1'",
            // Constants compared with constants: folded when planned.
            "SELECT CASE WHEN 1 = 2 THEN 1 / 0 END",
            "SELECT 3 IN (1, 2), 4 BETWEEN 1 AND 2 FROM t WHERE -59 = 55 * -56 + 95",
            // The statement's own parameters.
            "SELECT a FROM t WHERE a = $1 AND b = 2",
            "INSERT INTO t VALUES (1)",
            "DELETE FROM t WHERE a = 1",
        ] {
            assert_eq!(taken(sql), None, "{sql}");
        }
        let many = (0..=MAX_LITERAL_PARAMETERS)
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        assert_eq!(taken(&format!("SELECT a FROM t WHERE a IN ({many})")), None);
    }
}
