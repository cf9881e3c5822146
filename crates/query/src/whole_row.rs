//! Whole-row references: `to_jsonb(t)`, `row_to_json(t)` and `jsonb_agg(t)`
//! (or `t.*`) with `t` a table or view of the query's `FROM`, as Postgres reads them
//! (the row of `t` as a document, its columns as keys).
//!
//! DataFusion has no whole-row value: an identifier naming a relation is an
//! unknown column. Before planning, each such argument becomes
//! `jsonb_build_object('a', t.a, 'b', t.b, ...)` (for `json`'s functions
//! `floe_json_row(...)`, which keeps the columns' order) from the relation's columns,
//! looked up in the catalog (or a derived table's select list). A column of that
//! name wins, as in Postgres; a CTE is not expanded (its columns are not known
//! before planning).

use std::ops::ControlFlow;

use sqlparser::ast::{
    Expr, FunctionArg, FunctionArgExpr, FunctionArguments, Ident, Select, Statement, TableFactor,
    Value, ValueWithSpan, Visit, VisitMut, Visitor, VisitorMut,
};

use crate::naming;
use crate::relations::TableColumns;

/// The functions whose one argument may be a whole row: each reads it as a
/// document.
const WHOLE_ROW_FUNCTIONS: &[&str] = &[
    "to_jsonb",
    "to_json",
    "row_to_json",
    "jsonb_agg",
    "json_agg",
];

/// Expands whole-row arguments in `statement` (see the module documentation), with
/// the columns of the tables it reads.
pub fn expand(statement: &mut Statement, tables: &TableColumns) {
    let _ = statement.visit(&mut SelectVisitor { columns: tables });
}

/// Whether a call is of a function that may take a whole row.
fn is_whole_row_call(function: &sqlparser::ast::Function) -> bool {
    match function.name.0.as_slice() {
        [part] => part
            .as_ident()
            .is_some_and(|name| WHOLE_ROW_FUNCTIONS.contains(&naming::normalize(name).as_str())),
        _ => false,
    }
}

pub fn mentions_whole_row_function(statement: &Statement) -> bool {
    struct Finder;
    impl Visitor for Finder {
        type Break = ();
        fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
            match expr {
                Expr::Function(function) if is_whole_row_call(function) => ControlFlow::Break(()),
                _ => ControlFlow::Continue(()),
            }
        }
    }
    statement.visit(&mut Finder).is_break()
}

/// The relations of a select's `FROM`, by the name a query refers to them
/// with (the alias, else the table's last name part), with their columns.
fn relations(select: &Select, columns: &TableColumns) -> Vec<(String, Vec<String>)> {
    let mut found = Vec::new();
    let mut add = |factor: &TableFactor| {
        if let Some(relation) = crate::relations::factor_columns(factor, columns) {
            found.push(relation);
        }
    };
    for table in &select.from {
        add(&table.relation);
        for join in &table.joins {
            add(&join.relation);
        }
    }
    found
}

/// Visits each select of a statement with its own `FROM`, holding the
/// columns of each table the statement reads (by its name as written).
struct SelectVisitor<'a> {
    columns: &'a TableColumns,
}

impl VisitorMut for SelectVisitor<'_> {
    type Break = ();
    fn pre_visit_query(&mut self, query: &mut sqlparser::ast::Query) -> ControlFlow<()> {
        if let sqlparser::ast::SetExpr::Select(select) = query.body.as_mut() {
            let relations = relations(select, self.columns);
            if !relations.is_empty() {
                let _ = sqlparser::ast::visit_expressions_mut(select.as_mut(), |expr| {
                    expand_call(expr, &relations);
                    ControlFlow::<()>::Continue(())
                });
            }
        }
        ControlFlow::Continue(())
    }
}

/// `f(t)` with `t` a relation (and no column) as `f(jsonb_build_object(...))`.
fn expand_call(expr: &mut Expr, relations: &[(String, Vec<String>)]) {
    let Expr::Function(function) = expr else {
        return;
    };
    if !is_whole_row_call(function) {
        return;
    }
    let is_column = |name: &str| {
        relations
            .iter()
            .any(|(_, columns)| columns.iter().any(|c| c == name))
    };
    let FunctionArguments::List(list) = &mut function.args else {
        return;
    };
    let [FunctionArg::Unnamed(argument)] = list.args.as_mut_slice() else {
        return;
    };
    // `f(t)`, unless `t` is also a column, or `f(t.*)`.
    let name = match argument {
        FunctionArgExpr::Expr(Expr::Identifier(ident)) => {
            let name = naming::normalize(ident);
            if is_column(&name) {
                return;
            }
            name
        }
        FunctionArgExpr::QualifiedWildcard(relation) => match relation.0.as_slice() {
            [part] => match part.as_ident() {
                Some(ident) => naming::normalize(ident),
                None => return,
            },
            _ => return,
        },
        _ => return,
    };
    let Some((_, columns)) = relations.iter().find(|(relation, _)| *relation == name) else {
        return;
    };
    let mut pairs = Vec::with_capacity(columns.len() * 2);
    for column in columns {
        pairs.push(Expr::Value(ValueWithSpan::from(Value::SingleQuotedString(
            column.clone(),
        ))));
        pairs.push(Expr::CompoundIdentifier(vec![
            Ident::with_quote('"', name.clone()),
            Ident::with_quote('"', column.clone()),
        ]));
    }
    // `json`'s row keeps the columns' order and is written compactly.
    let json = function
        .name
        .0
        .last()
        .and_then(|part| part.as_ident())
        .is_some_and(|name| {
            matches!(
                naming::normalize(name).as_str(),
                "to_json" | "row_to_json" | "json_agg"
            )
        });
    let builder = if json {
        crate::functions::json_build::JSON_ROW
    } else {
        "jsonb_build_object"
    };
    *argument = FunctionArgExpr::Expr(crate::rewrite::function_call(builder, pairs));
}
