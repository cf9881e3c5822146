//! `$n` parameters of the extended protocol: their inferred types, and
//! binding values into a statement as typed literals.

use datafusion::arrow::datatypes::Field;
use datafusion::logical_expr::LogicalPlan;
use floe_repr::PgType;
use floe_sql_parser::ast::{Statement, quote_string};
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
            let Some(index) = name
                .strip_prefix('$')
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|n| *n >= 1)
            else {
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
            let literal = match bound {
                None => "NULL".to_string(),
                Some(text) => quote_string(text),
            };
            let text = match self
                .types
                .get(index - 1)
                .copied()
                .flatten()
                .and_then(sql_type_name)
            {
                Some(type_name) => format!("CAST({literal} AS {type_name})"),
                None => literal,
            };
            match sqlparser::parser::Parser::new(&sqlparser::dialect::PostgreSqlDialect {})
                .try_with_sql(&text)
                .and_then(|mut p| p.parse_expr())
            {
                Ok(parsed) => *expr = parsed,
                Err(e) => {
                    self.error = Some(AdapterError::Internal(format!("binding ${index}: {e}")));
                    return std::ops::ControlFlow::Break(());
                }
            }
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
                && let Some(n) = name.strip_prefix('$').and_then(|n| n.parse::<usize>().ok())
                && n >= 1
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
