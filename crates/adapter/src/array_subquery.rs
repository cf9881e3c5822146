//! `ARRAY(subquery)`, which the engine lacks, as an aggregate of the
//! subquery's rows: its values in the subquery's order. `pg_rewrite` makes
//! no rows `{}` (`floe_or_empty`, which names its column `array`).
//!
//! A plain `SELECT x FROM ... WHERE ... ORDER BY k` is aggregated in place,
//! `(SELECT array_agg(x ORDER BY k) ...)`, which keeps a correlated subquery
//! one the engine decorrelates. A subquery whose rows the aggregate cannot
//! take in place (DISTINCT, GROUP BY, an aggregate, LIMIT, a set operation)
//! becomes a derived table the aggregate reads, ordered by its value, or by
//! a row number in the subquery's order.

use floe_query::rewrite::{AGGREGATES, ARRAY_SOURCE};
use sqlparser::ast::{
    Expr, Function, FunctionArgumentClause, FunctionArguments, GroupByExpr, Ident, OrderByExpr,
    OrderByKind, Query, Select, SelectItem, SetExpr, TableFactor, Value, Visit, Visitor,
    WindowSpec, WindowType,
};

/// The aggregate query `ARRAY(subquery)` stands for, when `function` is one.
/// In statements reading the catalog every SELECT is aggregated in place, for
/// the rewrites of correlated catalog subqueries that aggregate its column.
pub fn rewrite(function: &Function, catalog: bool) -> Option<Query> {
    if !is_array_call(function) {
        return None;
    }
    let FunctionArguments::Subquery(query) = &function.args else {
        return None;
    };
    if let SetExpr::Select(select) = query.body.as_ref()
        && select.projection.len() != 1
    {
        // As it is, for the check that refuses it: a subquery of more than
        // one column.
        return Some(query.as_ref().clone());
    }
    if let Some(query) = in_place(query, catalog) {
        return Some(query);
    }
    if catalog {
        return None;
    }
    through_derived_table(query)
}

fn is_array_call(function: &Function) -> bool {
    matches!(function.name.0.as_slice(), [part]
        if part.as_ident().is_some_and(|name| name.value.eq_ignore_ascii_case("array")))
}

/// The single output of a plain SELECT: its expression and alias.
fn single_item(select: &Select) -> Option<(Expr, Option<Ident>)> {
    match select.projection.as_slice() {
        [SelectItem::UnnamedExpr(expr)] => Some((expr.clone(), None)),
        [SelectItem::ExprWithAlias { expr, alias }] => Some((expr.clone(), Some(alias.clone()))),
        _ => None,
    }
}

/// The subquery's ORDER BY, each key naming the output (`ORDER BY 1`, its
/// alias) replaced by the output's expression; `None` for `ORDER BY ALL`.
fn order_keys(query: &Query, value: &Expr, alias: Option<&Ident>) -> Option<Vec<OrderByExpr>> {
    let Some(order_by) = &query.order_by else {
        return Some(Vec::new());
    };
    let OrderByKind::Expressions(keys) = &order_by.kind else {
        return None;
    };
    let names_value = |key: &Expr| match key {
        Expr::Value(number) => matches!(&number.value, Value::Number(digits, _) if digits == "1"),
        Expr::Identifier(ident) => alias.is_some_and(|alias| alias.value == ident.value),
        _ => false,
    };
    let mut keys = keys.clone();
    for key in &mut keys {
        if names_value(&key.expr) {
            key.expr = value.clone();
        }
    }
    Some(keys)
}

/// `(SELECT array_agg(x ORDER BY k) ...)` of a plain `SELECT x ... ORDER BY k`.
fn in_place(query: &Query, catalog: bool) -> Option<Query> {
    let SetExpr::Select(select) = query.body.as_ref() else {
        return None;
    };
    let (value, alias) = single_item(select)?;
    // The catalog's subqueries are aggregated in place whatever they hold,
    // as the correlated catalog rewrites expect.
    if !catalog && (!is_plain(query, select) || holds_aggregate(&value)) {
        return None;
    }
    let keys = order_keys(query, &value, alias.as_ref())?;
    let mut query = query.clone();
    query.order_by = None;
    if let SetExpr::Select(select) = query.body.as_mut() {
        select.projection = vec![SelectItem::UnnamedExpr(aggregate(value, keys))];
    }
    Some(query)
}

/// A SELECT whose rows are the ones it reads: no grouping, DISTINCT or row
/// limit.
fn is_plain(query: &Query, select: &Select) -> bool {
    let grouped = match &select.group_by {
        GroupByExpr::Expressions(exprs, modifiers) => !exprs.is_empty() || !modifiers.is_empty(),
        GroupByExpr::All(_) => true,
    };
    query.limit_clause.is_none()
        && query.fetch.is_none()
        && query.with.is_none()
        && select.distinct.is_none()
        && select.having.is_none()
        && select.qualify.is_none()
        && select.named_window.is_empty()
        && !grouped
}

/// Whether `expr` calls an aggregate or a window function.
fn holds_aggregate(expr: &Expr) -> bool {
    struct Finder;
    impl Visitor for Finder {
        type Break = ();
        fn pre_visit_expr(&mut self, expr: &Expr) -> std::ops::ControlFlow<()> {
            if let Expr::Function(function) = expr {
                let name = function.name.to_string().to_lowercase();
                if function.over.is_some() || AGGREGATES.contains(&name.as_str()) {
                    return std::ops::ControlFlow::Break(());
                }
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    Visit::visit(expr, &mut Finder).is_break()
}

/// `(SELECT array_agg(v ORDER BY ...) FROM (subquery) AS array_source (v[, n]))`:
/// ordered by the value when the subquery's keys are its value, else by a
/// row number the subquery numbers its rows with in its own order.
fn through_derived_table(query: &Query) -> Option<Query> {
    let mut inner = query.clone();
    let (value_keys, row_keys) = match inner.body.as_ref() {
        // `SELECT *`: a single column, whose keys name it, as a set operation's.
        SetExpr::Select(select) if is_wildcard(select) => (set_operation_keys(query)?, None),
        SetExpr::Select(select) => {
            let (value, alias) = single_item(select)?;
            let keys = order_keys(query, &value, alias.as_ref())?;
            if keys.iter().all(|key| key.expr == value) {
                (keys, None)
            } else if select.distinct.is_some() {
                // PostgreSQL refuses it: DISTINCT orders by its output only.
                return None;
            } else {
                (Vec::new(), Some(keys))
            }
        }
        _ => (set_operation_keys(query)?, None),
    };
    let value = column("value");
    let numbered = row_keys.is_some();
    let order = match row_keys {
        Some(keys) => {
            if let SetExpr::Select(select) = inner.body.as_mut() {
                select
                    .projection
                    .push(SelectItem::UnnamedExpr(row_number(keys)));
            }
            vec![key(column("position"))]
        }
        None => value_keys
            .into_iter()
            .map(|key| OrderByExpr {
                expr: value.clone(),
                ..key
            })
            .collect(),
    };
    outer_query(inner, aggregate(value, order), numbered)
}

fn is_wildcard(select: &Select) -> bool {
    matches!(
        select.projection.as_slice(),
        [SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..)]
    )
}

/// The ORDER BY of a set operation of one column, whose keys can only name
/// that column (`ORDER BY 1`, `ORDER BY x`).
fn set_operation_keys(query: &Query) -> Option<Vec<OrderByExpr>> {
    let output = Expr::Identifier(Ident::new("output"));
    let keys = order_keys(query, &output, None)?;
    keys.iter()
        .all(|key| matches!(key.expr, Expr::Identifier(_)))
        .then_some(keys)
}

/// A column of the derived table.
fn column(name: &str) -> Expr {
    Expr::CompoundIdentifier(vec![Ident::new(ARRAY_SOURCE), Ident::new(name)])
}

fn key(expr: Expr) -> OrderByExpr {
    OrderByExpr {
        expr,
        options: Default::default(),
        with_fill: None,
    }
}

/// `SELECT <collected> FROM (inner) AS array_source (value[, position])`.
fn outer_query(inner: Query, collected: Expr, numbered: bool) -> Option<Query> {
    let columns = if numbered { "value, position" } else { "value" };
    let mut query = floe_query::srf::parse_query(&format!(
        "SELECT 1 FROM (SELECT 1) AS {ARRAY_SOURCE} ({columns})"
    ))?;
    let SetExpr::Select(select) = query.body.as_mut() else {
        return None;
    };
    select.projection = vec![SelectItem::UnnamedExpr(collected)];
    if let TableFactor::Derived { subquery, .. } = &mut select.from.first_mut()?.relation {
        **subquery = inner;
    }
    Some(query)
}

/// `row_number() OVER (ORDER BY keys)`.
fn row_number(keys: Vec<OrderByExpr>) -> Expr {
    let mut call = floe_query::rewrite::function_call("row_number", vec![]);
    if let Expr::Function(function) = &mut call {
        function.over = Some(WindowType::WindowSpec(WindowSpec {
            window_name: None,
            partition_by: Vec::new(),
            order_by: keys,
            window_frame: None,
        }));
    }
    call
}

/// `array_agg(value ORDER BY keys)`.
fn aggregate(value: Expr, keys: Vec<OrderByExpr>) -> Expr {
    let mut call = floe_query::rewrite::function_call("array_agg", vec![value]);
    if let Expr::Function(function) = &mut call
        && let FunctionArguments::List(list) = &mut function.args
        && !keys.is_empty()
    {
        list.clauses.push(FunctionArgumentClause::OrderBy(keys));
    }
    call
}
