//! A select's own expressions, and unqualified names in them read as other
//! expressions: what the rewrites before planning share (`using_join` reads a
//! merged column as its `COALESCE`, `function_row` a function's alias as its
//! column, `srf` unnests set-returning calls).

use std::ops::ControlFlow;

use sqlparser::ast::{
    Expr, GroupByExpr, Ident, OrderByKind, Query, Select, SelectItem, SetExpr, Statement, VisitMut,
    VisitorMut,
};

use crate::naming;

/// An unqualified name and the expression a select reads it as.
#[derive(Clone)]
pub struct Replacement {
    pub name: String,
    pub expr: Expr,
}

/// Applies `rewrite` to each select of `statement`; where it gives replacements,
/// they apply to the query's ORDER BY too (an item naming an output column is
/// that column, and stays).
pub fn rewrite_selects(
    statement: &mut Statement,
    rewrite: impl FnMut(&mut Select) -> Option<Vec<Replacement>>,
) {
    struct Queries<F>(F);
    impl<F: FnMut(&mut Select) -> Option<Vec<Replacement>>> VisitorMut for Queries<F> {
        type Break = ();
        fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
            // The query's ORDER BY reads the select that is its body.
            let SetExpr::Select(select) = query.body.as_mut() else {
                for_each_select_mut(&mut query.body, &mut |select| {
                    (self.0)(select);
                });
                return ControlFlow::Continue(());
            };
            if let Some(replacements) = (self.0)(select)
                && let Some(order_by) = &mut query.order_by
                && let OrderByKind::Expressions(items) = &mut order_by.kind
            {
                let outputs = output_names(select);
                for item in items {
                    let names_output = matches!(&item.expr, Expr::Identifier(ident)
                        if outputs.contains(&naming::normalize(ident)));
                    if !names_output {
                        replace_references(&mut item.expr, &replacements);
                    }
                }
            }
            ControlFlow::Continue(())
        }
    }
    let _ = VisitMut::visit(statement, &mut Queries(rewrite));
}

fn for_each_select_mut(body: &mut SetExpr, visit: &mut impl FnMut(&mut Select)) {
    match body {
        SetExpr::Select(select) => visit(select),
        SetExpr::SetOperation { left, right, .. } => {
            for_each_select_mut(left, visit);
            for_each_select_mut(right, visit);
        }
        _ => {}
    }
}

/// The names of a select's output columns that its list names.
fn output_names(select: &Select) -> Vec<String> {
    select
        .projection
        .iter()
        .filter_map(|item| match item {
            SelectItem::ExprWithAlias { alias, .. } => Some(naming::normalize(alias)),
            SelectItem::UnnamedExpr(expr) => Some(naming::column_name(expr)),
            _ => None,
        })
        .collect()
}

/// Applies `rewrite` to each expression of `expr`, innermost first, outside its
/// subqueries (which have a scope and a select list of their own).
pub fn rewrite_own_expressions(expr: &mut Expr, rewrite: impl FnMut(&mut Expr)) {
    struct Own<F> {
        rewrite: F,
        /// How many subqueries deep the visit is.
        depth: usize,
    }
    impl<F: FnMut(&mut Expr)> VisitorMut for Own<F> {
        type Break = ();
        fn pre_visit_query(&mut self, _: &mut Query) -> ControlFlow<()> {
            self.depth += 1;
            ControlFlow::Continue(())
        }
        fn post_visit_query(&mut self, _: &mut Query) -> ControlFlow<()> {
            self.depth -= 1;
            ControlFlow::Continue(())
        }
        fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
            if self.depth == 0 {
                (self.rewrite)(expr);
            }
            ControlFlow::Continue(())
        }
    }
    let _ = VisitMut::visit(expr, &mut Own { rewrite, depth: 0 });
}

/// Replaces the unqualified references to `replacements` in `expr` (not in its
/// subqueries) with their expressions. Returns whether any was replaced.
pub fn replace_references(expr: &mut Expr, replacements: &[Replacement]) -> bool {
    let mut replaced = false;
    rewrite_own_expressions(expr, |expr| {
        let Expr::Identifier(ident) = expr else {
            return;
        };
        let name = naming::normalize(ident);
        if let Some(replacement) = replacements.iter().find(|r| r.name == name) {
            *expr = match &replacement.expr {
                plain @ Expr::CompoundIdentifier(_) => plain.clone(),
                other => Expr::Nested(Box::new(other.clone())),
            };
            replaced = true;
        }
    });
    replaced
}

/// Replaces the references in a select list's item, which keeps its name: an item
/// whose references were replaced is aliased with the name it had, unless it became
/// a column of that name (left unaliased, so that a wildcard beside it may be
/// renamed, `rewrite::rewrite_beside_wildcards`). Wildcards stay.
pub fn replace_in_item(item: &mut SelectItem, replacements: &[Replacement]) {
    match item {
        SelectItem::UnnamedExpr(expr) => {
            let name = naming::column_name(expr);
            let mut rewritten = expr.clone();
            if !replace_references(&mut rewritten, replacements) {
                return;
            }
            let same_column = matches!(rewritten, Expr::CompoundIdentifier(_))
                && naming::column_name(&rewritten) == name;
            *item = if same_column {
                SelectItem::UnnamedExpr(rewritten)
            } else {
                SelectItem::ExprWithAlias {
                    expr: rewritten,
                    alias: Ident::with_quote('"', name),
                }
            };
        }
        SelectItem::ExprWithAlias { expr, .. } => {
            replace_references(expr, replacements);
        }
        _ => {}
    }
}

/// Replaces the references in a select's `WHERE`, `HAVING`, `QUALIFY` and
/// `GROUP BY`.
pub fn replace_in_clauses(select: &mut Select, replacements: &[Replacement]) {
    for expr in [
        &mut select.selection,
        &mut select.having,
        &mut select.qualify,
    ]
    .into_iter()
    .flatten()
    {
        replace_references(expr, replacements);
    }
    if let GroupByExpr::Expressions(exprs, _) = &mut select.group_by {
        for expr in exprs {
            replace_references(expr, replacements);
        }
    }
}
