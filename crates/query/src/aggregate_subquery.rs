//! Subqueries in aggregate arguments (`SELECT sum((SELECT count(*) FROM u WHERE
//! u.x = t.a)) FROM t`), which DataFusion cannot plan: each such subquery is
//! computed per row in a derived table of the query's relation, named as the
//! relation so every other reference still finds its columns, and the aggregate
//! reads its column instead.
//!
//! Only a query over one relation (no joins) is rewritten: a derived table of
//! several relations' columns could not keep their qualifiers apart.

use std::ops::ControlFlow;

use sqlparser::ast::{
    Expr, FunctionArguments, Ident, Query, Select, SelectItem, SetExpr, TableAlias, TableFactor,
    TableWithJoins, VisitMut, VisitorMut,
};

use crate::rewrite::AGGREGATES;

/// The prefix of the derived table's columns holding the subqueries' values (a
/// private-use character no client writes).
const VALUE: &str = "\u{E005}subquery";

/// Rewrites `select` when an aggregate of its select list or `HAVING` has a
/// subquery in its arguments and it reads one relation.
pub fn rewrite(select: &mut Select) {
    let [TableWithJoins { relation, joins }] = select.from.as_slice() else {
        return;
    };
    if !joins.is_empty() {
        return;
    }
    let Some(name) = relation_name(relation) else {
        return;
    };
    let mut lifter = Lifter {
        values: Vec::new(),
        aggregate_depth: 0,
        query_depth: 0,
    };
    for item in &mut select.projection {
        let _ = VisitMut::visit(item, &mut lifter);
    }
    if let Some(having) = &mut select.having {
        let _ = VisitMut::visit(having, &mut lifter);
    }
    if lifter.values.is_empty() {
        return;
    }
    let mut items = vec![SelectItem::Wildcard(Default::default())];
    for (index, value) in lifter.values.into_iter().enumerate() {
        items.push(SelectItem::ExprWithAlias {
            expr: value,
            alias: Ident::with_quote('"', format!("{VALUE}{index}")),
        });
    }
    let inner = Select {
        projection: items,
        from: select.from.clone(),
        selection: select.selection.take(),
        ..empty_select(select)
    };
    let derived = TableFactor::Derived {
        lateral: false,
        subquery: Box::new(query_of(inner)),
        alias: Some(TableAlias {
            explicit: true,
            name,
            columns: vec![],
            at: None,
        }),
        sample: None,
    };
    select.from = vec![TableWithJoins {
        relation: derived,
        joins: vec![],
    }];
}

/// The name other references use for the relation: its alias, else the last
/// part of its name. `None` for relations that are not a table or a named
/// derived table.
fn relation_name(relation: &TableFactor) -> Option<Ident> {
    match relation {
        TableFactor::Table {
            alias: Some(alias), ..
        }
        | TableFactor::Derived {
            alias: Some(alias), ..
        } if alias.columns.is_empty() => Some(alias.name.clone()),
        TableFactor::Table {
            name,
            alias: None,
            args: None,
            ..
        } => name.0.last()?.as_ident().cloned(),
        _ => None,
    }
}

/// Replaces each subquery inside an aggregate's arguments by a column of the
/// derived table, collecting the subqueries.
struct Lifter {
    values: Vec<Expr>,
    /// How many aggregate calls enclose the expression visited.
    aggregate_depth: usize,
    /// How many subqueries enclose it: a subquery's own aggregates are its
    /// own select's, rewritten when that select is.
    query_depth: usize,
}

impl VisitorMut for Lifter {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if self.query_depth > 0 {
            return ControlFlow::Continue(());
        }
        if is_aggregate(expr) {
            self.aggregate_depth += 1;
        }
        // `x > ALL (subquery)` goes whole: its subquery alone is no value.
        let quantified = matches!(
            expr,
            Expr::AnyOp { right, .. } | Expr::AllOp { right, .. }
                if matches!(right.as_ref(), Expr::Subquery(_))
        );
        if self.aggregate_depth > 0
            && (quantified
                || matches!(
                    expr,
                    Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. }
                ))
        {
            let column = Expr::Identifier(Ident::with_quote(
                '"',
                format!("{VALUE}{}", self.values.len()),
            ));
            self.values.push(std::mem::replace(expr, column));
        }
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if self.query_depth == 0 && is_aggregate(expr) {
            self.aggregate_depth -= 1;
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_query(&mut self, _query: &mut Query) -> ControlFlow<()> {
        self.query_depth += 1;
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _query: &mut Query) -> ControlFlow<()> {
        self.query_depth -= 1;
        ControlFlow::Continue(())
    }
}

/// Whether `expr` calls one of [`AGGREGATES`] (not as a window function).
fn is_aggregate(expr: &Expr) -> bool {
    let Expr::Function(function) = expr else {
        return false;
    };
    if function.over.is_some() || !matches!(function.args, FunctionArguments::List(_)) {
        return false;
    }
    function
        .name
        .0
        .last()
        .and_then(|part| part.as_ident())
        .is_some_and(|name| AGGREGATES.contains(&crate::naming::normalize(name).as_str()))
}

/// A select with nothing but `select`'s token and flavor (the fields the
/// derived table sets are filled in by the caller).
fn empty_select(select: &Select) -> Select {
    let mut empty = select.clone();
    empty.distinct = None;
    empty.top = None;
    empty.projection = Vec::new();
    empty.into = None;
    empty.from = Vec::new();
    empty.lateral_views = Vec::new();
    empty.prewhere = None;
    empty.selection = None;
    empty.group_by = sqlparser::ast::GroupByExpr::Expressions(vec![], vec![]);
    empty.cluster_by = Vec::new();
    empty.distribute_by = Vec::new();
    empty.sort_by = Vec::new();
    empty.having = None;
    empty.named_window = Vec::new();
    empty.qualify = None;
    empty
}

fn query_of(select: Select) -> Query {
    Query {
        with: None,
        body: Box::new(SetExpr::Select(Box::new(select))),
        order_by: None,
        limit_clause: None,
        fetch: None,
        locks: vec![],
        for_clause: None,
        settings: None,
        format_clause: None,
        pipe_operators: vec![],
    }
}
