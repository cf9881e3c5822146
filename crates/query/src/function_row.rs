//! A set-returning function of one named column, read by its alias.
//!
//! `jsonb_array_elements(doc) AS e` has one column, `value`; PostgreSQL also
//! reads `e` alone as that column (the relation's row, which for a function of
//! one column is its value), so `SELECT e ->> 'name' FROM t,
//! jsonb_array_elements(t.doc) e` is common. DataFusion knows only `e.value`:
//! before planning, an unqualified `e` in such a select becomes `e.value`, unless
//! another relation of its `FROM` has a column `e` (a column wins, as in
//! PostgreSQL) or might have one (its columns are not known).

use std::ops::ControlFlow;

use sqlparser::ast::{Expr, Ident, Select, Statement, TableFactor};

use crate::naming;
use crate::relations::TableColumns;
use crate::scope::{self, Replacement};

/// The functions of one column that a query may read by the relation's alias,
/// with that column's name.
const FUNCTIONS: &[(&str, &str)] = &[
    ("jsonb_array_elements", "value"),
    ("jsonb_array_elements_text", "value"),
    ("json_array_elements", "value"),
    ("json_array_elements_text", "value"),
];

/// Whether a select of `statement` reads such a function under an alias.
pub fn has_aliased_function(statement: &Statement) -> bool {
    struct Finder;
    impl sqlparser::ast::Visitor for Finder {
        type Break = ();
        fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
            if aliased_function(factor).is_some() {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        }
    }
    sqlparser::ast::Visit::visit(statement, &mut Finder).is_break()
}

/// The alias and column of a factor that calls one of [`FUNCTIONS`] under an alias
/// without a column list.
fn aliased_function(factor: &TableFactor) -> Option<(String, &'static str)> {
    let (name, alias) = match factor {
        TableFactor::Table {
            name,
            alias: Some(alias),
            args: Some(_),
            ..
        }
        | TableFactor::Function {
            name,
            alias: Some(alias),
            ..
        } => (name, alias),
        _ => return None,
    };
    if !alias.columns.is_empty() {
        return None;
    }
    let [part] = name.0.as_slice() else {
        return None;
    };
    let function = naming::normalize(part.as_ident()?);
    let (_, column) = FUNCTIONS.iter().find(|(f, _)| *f == function)?;
    Some((naming::normalize(&alias.name), column))
}

/// Rewrites each select's references to such an alias (see the module
/// documentation), with the columns of the tables the statement reads.
pub fn read_aliases(statement: &mut Statement, tables: &TableColumns) {
    scope::rewrite_selects(statement, |select| read_select_aliases(select, tables));
}

/// Rewrites one select; returns the aliases it read as columns, if any.
fn read_select_aliases(select: &mut Select, tables: &TableColumns) -> Option<Vec<Replacement>> {
    let factors: Vec<&TableFactor> = select
        .from
        .iter()
        .flat_map(|from| {
            std::iter::once(&from.relation).chain(from.joins.iter().map(|j| &j.relation))
        })
        .collect();
    let mut aliases = Vec::new();
    for factor in &factors {
        let Some((alias, column)) = aliased_function(factor) else {
            continue;
        };
        // Every other relation's columns known, and none of that name.
        let shadowed = factors.iter().any(|other| {
            !std::ptr::eq(*other, *factor)
                && column_names(other, tables).is_none_or(|names| names.contains(&alias))
        });
        if !shadowed {
            aliases.push(Replacement {
                expr: Expr::CompoundIdentifier(vec![
                    Ident::with_quote('"', alias.clone()),
                    Ident::with_quote('"', column),
                ]),
                name: alias,
            });
        }
    }
    if aliases.is_empty() {
        return None;
    }
    for item in &mut select.projection {
        scope::replace_in_item(item, &aliases);
    }
    scope::replace_in_clauses(select, &aliases);
    Some(aliases)
}

/// The columns a relation of a `FROM` shows, when known.
fn column_names(factor: &TableFactor, tables: &TableColumns) -> Option<Vec<String>> {
    if let Some((_, column)) = aliased_function(factor) {
        return Some(vec![column.to_string()]);
    }
    crate::relations::factor_columns(factor, tables).map(|(_, names)| names)
}
