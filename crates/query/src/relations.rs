//! The columns of the tables and views a statement names, from the catalog, for
//! the rewrites that need them before the engine plans (`whole_row`, `using_join`,
//! and the column aliases completed here).

use std::collections::HashMap;
use std::ops::ControlFlow;

use datafusion::prelude::SessionContext;
use sqlparser::ast::{
    Ident, ObjectName, Query, SelectItem, SetExpr, Statement, TableAliasColumnDef, TableFactor,
    Visit, VisitMut, Visitor, VisitorMut,
};

use floe_repr::SqlState;

use crate::error::QueryError;
use crate::naming;

/// The columns of each table or view a statement reads, by its name as written.
pub type TableColumns = HashMap<String, Vec<String>>;

/// The columns of every table or view `statement` reads that the catalog knows.
pub async fn table_columns(context: &SessionContext, statement: &Statement) -> TableColumns {
    let mut columns = TableColumns::new();
    for name in table_names(statement) {
        let reference = name.to_string();
        if columns.contains_key(&reference) {
            continue;
        }
        let Ok(provider) = context.table_provider(reference.as_str()).await else {
            continue;
        };
        let names = provider
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        columns.insert(reference, names);
    }
    columns
}

/// Every table or view name the statement reads.
fn table_names(statement: &Statement) -> Vec<ObjectName> {
    struct Tables(Vec<ObjectName>);
    impl Visitor for Tables {
        type Break = ();
        fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
            if let TableFactor::Table {
                name, args: None, ..
            } = factor
            {
                self.0.push(name.clone());
            }
            ControlFlow::Continue(())
        }
    }
    let mut tables = Tables(Vec::new());
    let _ = statement.visit(&mut tables);
    tables.0
}

/// Whether a table, derived table or CTE of `statement` is renamed with a
/// column list (`t AS x(k)`, `WITH w(k) AS ...`), which
/// [`complete_column_aliases`] completes.
pub fn renames_columns(statement: &Statement) -> bool {
    struct Finder;
    impl Visitor for Finder {
        type Break = ();
        fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
            match factor {
                TableFactor::Table {
                    alias: Some(alias),
                    args: None,
                    ..
                }
                | TableFactor::Derived {
                    alias: Some(alias), ..
                } if !alias.columns.is_empty() => ControlFlow::Break(()),
                _ => ControlFlow::Continue(()),
            }
        }
        fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
            let ctes = query.with.iter().flat_map(|with| &with.cte_tables);
            if ctes.into_iter().any(|cte| !cte.alias.columns.is_empty()) {
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        }
    }
    statement.visit(&mut Finder).is_break()
}

/// `t AS x(k)` names the first column of `t` `k` and keeps the others' names, as
/// PostgreSQL does, and so do a derived table's and a CTE's column lists; the
/// engine wants a name for every column, so each list is completed with the
/// relation's own names (a table's from the catalog, a query's from its select
/// list). A list longer than the relation's columns is PostgreSQL's 42P10.
pub fn complete_column_aliases(
    statement: &mut Statement,
    tables: &TableColumns,
) -> Result<(), QueryError> {
    struct Completer<'a>(&'a TableColumns);
    impl VisitorMut for Completer<'_> {
        type Break = QueryError;
        fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<QueryError> {
            let (alias, columns) = match factor {
                TableFactor::Table {
                    name,
                    alias: Some(alias),
                    args: None,
                    ..
                } => {
                    let columns = self.0.get(&name.to_string()).cloned();
                    (alias, columns)
                }
                TableFactor::Derived {
                    subquery,
                    alias: Some(alias),
                    ..
                } => (alias, query_output_names(subquery)),
                _ => return ControlFlow::Continue(()),
            };
            match columns {
                Some(columns) if !alias.columns.is_empty() => {
                    let name = naming::normalize(&alias.name);
                    completed(&mut alias.columns, &columns, || format!("table \"{name}\""))
                }
                _ => ControlFlow::Continue(()),
            }
        }
        fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<QueryError> {
            for cte in query.with.iter_mut().flat_map(|with| &mut with.cte_tables) {
                if cte.alias.columns.is_empty() {
                    continue;
                }
                let Some(columns) = query_output_names(&cte.query) else {
                    continue;
                };
                let name = naming::normalize(&cte.alias.name);
                let what = || format!("WITH query \"{name}\"");
                completed(&mut cte.alias.columns, &columns, what)?;
            }
            ControlFlow::Continue(())
        }
    }
    match statement.visit(&mut Completer(tables)) {
        ControlFlow::Break(error) => Err(error),
        ControlFlow::Continue(()) => Ok(()),
    }
}

/// `aliases` completed with the names of `columns` past them; PostgreSQL's
/// refusal of more aliases than columns, naming the relation by `what`.
fn completed(
    aliases: &mut Vec<TableAliasColumnDef>,
    columns: &[String],
    what: impl FnOnce() -> String,
) -> ControlFlow<QueryError> {
    if aliases.len() > columns.len() {
        return ControlFlow::Break(QueryError::new(
            SqlState::INVALID_COLUMN_REFERENCE,
            format!(
                "{} has {} columns available but {} columns specified",
                what(),
                columns.len(),
                aliases.len()
            ),
        ));
    }
    for column in columns.iter().skip(aliases.len()) {
        aliases.push(TableAliasColumnDef {
            name: Ident::with_quote('"', column.clone()),
            data_type: None,
        });
    }
    ControlFlow::Continue(())
}

/// The name a query gives a relation of its `FROM` (its alias, else a table's last
/// name part) and the names of its columns, when the catalog or the text tells
/// them: a table or view (renamed by the alias' column list, if any), or a derived
/// table whose select list names every column.
pub fn factor_columns(
    factor: &TableFactor,
    tables: &TableColumns,
) -> Option<(String, Vec<String>)> {
    let (reference, mut names) = match factor {
        TableFactor::Table {
            name,
            alias,
            args: None,
            ..
        } => {
            let reference = match alias {
                Some(alias) => naming::normalize(&alias.name),
                None => naming::normalize(name.0.last()?.as_ident()?),
            };
            (reference, tables.get(&name.to_string())?.clone())
        }
        TableFactor::Derived {
            subquery,
            alias: Some(alias),
            ..
        } => (
            naming::normalize(&alias.name),
            query_output_names(subquery)?,
        ),
        _ => return None,
    };
    let renamed = match factor {
        TableFactor::Table { alias, .. } | TableFactor::Derived { alias, .. } => {
            alias.iter().flat_map(|a| &a.columns)
        }
        _ => return None,
    };
    for (position, column) in renamed.enumerate() {
        match names.get_mut(position) {
            Some(name) => *name = naming::normalize(&column.name),
            None => names.push(naming::normalize(&column.name)),
        }
    }
    Some((reference, names))
}

/// The names of a query's output columns, when its select list names them all (or
/// it is a `VALUES` list, whose columns are `column1`, `column2`, ...); a set
/// operation's are its first input's.
pub fn query_output_names(query: &Query) -> Option<Vec<String>> {
    body_output_names(&query.body)
}

fn body_output_names(body: &SetExpr) -> Option<Vec<String>> {
    let select = match body {
        SetExpr::SetOperation { left, .. } => return body_output_names(left),
        SetExpr::Query(query) => return query_output_names(query),
        SetExpr::Select(select) => select,
        SetExpr::Values(values) => {
            let count = values.rows.first()?.len();
            return Some((1..=count).map(|n| format!("column{n}")).collect());
        }
        _ => return None,
    };
    select
        .projection
        .iter()
        .map(|item| match item {
            SelectItem::UnnamedExpr(expr) => Some(naming::column_name(expr)),
            SelectItem::ExprWithAlias { alias, .. } => Some(naming::normalize(alias)),
            _ => None,
        })
        .collect()
}
