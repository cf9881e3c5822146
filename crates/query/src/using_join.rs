//! The merged columns of `USING` and `NATURAL` joins, as PostgreSQL reads them.
//!
//! `t1 FULL JOIN t2 USING (a)` has one column `a`, `COALESCE(t1.a, t2.a)`: on a
//! row only `t2` has, it is `t2.a`. DataFusion reads an unqualified `a` as the
//! left table's column, NULL on such a row, so `SELECT a`, `SELECT *`, `WHERE a
//! = 5` and `GROUP BY a` over a RIGHT or FULL join answered wrongly (apache/
//! datafusion#22881); and its `*` leaves a merged column where the left relation
//! has it, where PostgreSQL lists the merged columns first. Before planning, each
//! select whose `FROM` holds a join by `USING` or `NATURAL` is rewritten:
//! - its unqualified references to a merged column (select list, `WHERE`,
//!   `GROUP BY`, `HAVING`, the query's `ORDER BY`, later joins' `ON`) become the
//!   merged expression, keeping the column's name;
//! - `*` becomes the columns PostgreSQL lists: the merged ones first, then the
//!   left's others, then the right's;
//! - `NATURAL` becomes `USING` the common columns, and a join whose key is itself
//!   merged joins `ON` the merged expression.
//!
//! A join's alias (`USING (a) AS j`, which floe's parser passes as one more
//! USING column, `floe_sql_parser::join_alias`) names its merged columns:
//! `j.a` is the merged `a`, `j.*` every merged column.
//!
//! The columns of each relation come from the catalog (tables and views) or the
//! text (a derived table's select list or alias). A select whose rewrite needs a
//! relation's columns that are not known so (a CTE, a table function) is left to
//! the engine as it was.

use std::ops::ControlFlow;

use sqlparser::ast::{
    BinaryOperator, Expr, Ident, Join, JoinConstraint, JoinOperator, ObjectName, ObjectNamePart,
    Query, Select, SelectItem, SelectItemQualifiedWildcardKind, SetExpr, Statement, TableFactor,
    TableWithJoins,
};

use crate::naming;

use crate::relations::TableColumns;
use crate::scope::{self, Replacement, replace_references};

/// Whether `statement` holds a join by `USING` or `NATURAL`, the joins [`merge`]
/// rewrites.
pub fn has_using_join(statement: &Statement) -> bool {
    struct Finder;
    impl sqlparser::ast::Visitor for Finder {
        type Break = ();
        fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
            let mut found = false;
            for_each_select(&query.body, &mut |select| {
                found |= select
                    .from
                    .iter()
                    .any(|from| from.joins.iter().any(is_using));
            });
            if found {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        }
    }
    sqlparser::ast::Visit::visit(statement, &mut Finder).is_break()
}

/// Whether a join merges columns: by `USING` or `NATURAL`.
fn is_using(join: &Join) -> bool {
    let mut operator = join.join_operator.clone();
    matches!(
        constraint_mut(&mut operator),
        Some(JoinConstraint::Using(_) | JoinConstraint::Natural)
    )
}

/// Rewrites the selects of `statement` (see the module documentation), with the
/// columns of the tables it reads.
pub fn merge(statement: &mut Statement, tables: &TableColumns) {
    scope::rewrite_selects(statement, |select| merge_select(select, tables));
}

fn for_each_select(body: &SetExpr, visit: &mut impl FnMut(&Select)) {
    match body {
        SetExpr::Select(select) => visit(select),
        SetExpr::SetOperation { left, right, .. } => {
            for_each_select(left, visit);
            for_each_select(right, visit);
        }
        _ => {}
    }
}

/// One column a relation or join shows: its name and how it is read.
type Column = Replacement;

/// The columns a relation or join shows, in order; `None` when not known.
type Columns = Option<Vec<Column>>;

fn find<'a>(columns: &'a Columns, name: &str) -> Option<&'a Expr> {
    columns
        .as_ref()?
        .iter()
        .find(|column| column.name == name)
        .map(|column| &column.expr)
}

/// Rewrites one select; returns its merged columns (name and expression) when it
/// was rewritten, for the query's ORDER BY.
fn merge_select(select: &mut Select, tables: &TableColumns) -> Option<Vec<Column>> {
    if !select
        .from
        .iter()
        .any(|from| from.joins.iter().any(is_using))
    {
        return None;
    }
    // Worked out on a copy: a select that cannot be rewritten whole stays as it was.
    let mut from = select.from.clone();
    let mut merged = Vec::new();
    let mut aliases = Vec::new();
    let mut shown = Vec::new();
    for item in &mut from {
        let columns = merge_joins(item, tables, &mut merged, &mut aliases)?;
        shown.push(columns);
    }
    let mut projection = Vec::with_capacity(select.projection.len());
    for item in &select.projection {
        if let Some(items) = alias_items(item, &aliases) {
            projection.extend(items);
            continue;
        }
        match item {
            SelectItem::Wildcard(options) => {
                if options.opt_exclude.is_some()
                    || options.opt_except.is_some()
                    || options.opt_rename.is_some()
                    || options.opt_replace.is_some()
                    || options.opt_ilike.is_some()
                {
                    return None;
                }
                for columns in &shown {
                    for column in columns.as_ref()? {
                        projection.push(SelectItem::ExprWithAlias {
                            expr: column.expr.clone(),
                            alias: Ident::with_quote('"', column.name.clone()),
                        });
                    }
                }
            }
            _ => {
                let mut item = item.clone();
                scope::replace_in_item(&mut item, &merged);
                projection.push(item);
            }
        }
    }
    select.from = from;
    select.projection = projection;
    scope::replace_in_clauses(select, &merged);
    replace_alias_references(select, &aliases);
    Some(merged)
}

/// A join alias and the columns it names.
type JoinAlias = (String, Vec<Column>);

/// The merged column `alias.name`, if a join alias names it.
fn alias_column<'a>(expr: &Expr, aliases: &'a [JoinAlias]) -> Option<&'a Column> {
    let Expr::CompoundIdentifier(parts) = expr else {
        return None;
    };
    let [alias, name] = parts.as_slice() else {
        return None;
    };
    let (_, columns) = aliases
        .iter()
        .find(|(a, _)| *a == naming::normalize(alias))?;
    columns.iter().find(|c| c.name == naming::normalize(name))
}

/// A select item of a join alias: `j.a` named `a`, `j.*` its columns.
fn alias_items(item: &SelectItem, aliases: &[JoinAlias]) -> Option<Vec<SelectItem>> {
    let named = |column: &Column| SelectItem::ExprWithAlias {
        expr: column.expr.clone(),
        alias: Ident::with_quote('"', column.name.clone()),
    };
    match item {
        SelectItem::UnnamedExpr(expr) => Some(vec![named(alias_column(expr, aliases)?)]),
        SelectItem::QualifiedWildcard(SelectItemQualifiedWildcardKind::ObjectName(name), _) => {
            let [ObjectNamePart::Identifier(alias)] = name.0.as_slice() else {
                return None;
            };
            let (_, columns) = aliases
                .iter()
                .find(|(a, _)| *a == naming::normalize(alias))?;
            Some(columns.iter().map(named).collect())
        }
        _ => None,
    }
}

/// Every `alias.name` of a join alias in the select made the merged column.
fn replace_alias_references(select: &mut Select, aliases: &[JoinAlias]) {
    if aliases.is_empty() {
        return;
    }
    let _ = sqlparser::ast::visit_expressions_mut(select, |expr| {
        if let Some(column) = alias_column(expr, aliases) {
            *expr = column.expr.clone();
        }
        ControlFlow::<()>::Continue(())
    });
}

/// Takes the join alias out of a USING list (see the module documentation).
fn take_join_alias(names: &mut Vec<ObjectName>) -> Option<String> {
    let position = names.iter().position(|name| {
        matches!(name.0.as_slice(), [ObjectNamePart::Identifier(ident)]
            if ident.value.starts_with(floe_sql_parser::join_alias::JOIN_ALIAS))
    })?;
    let name = names.remove(position);
    let [ObjectNamePart::Identifier(ident)] = name.0.as_slice() else {
        return None;
    };
    let alias = ident
        .value
        .strip_prefix(floe_sql_parser::join_alias::JOIN_ALIAS)?;
    Some(naming::normalize(&Ident::new(alias)))
}

/// Rewrites the joins of one `FROM` item; returns the columns it shows and adds
/// the merged ones to `merged`. `None` when a column the rewrite needs is not known.
fn merge_joins(
    item: &mut TableWithJoins,
    tables: &TableColumns,
    merged: &mut Vec<Column>,
    aliases: &mut Vec<JoinAlias>,
) -> Option<Columns> {
    let mut left = factor_columns(&mut item.relation, tables, merged, aliases)?;
    for join in &mut item.joins {
        let right = factor_columns(&mut join.relation, tables, merged, aliases)?;
        let right_outer = matches!(
            join.join_operator,
            JoinOperator::Right(_) | JoinOperator::RightOuter(_) | JoinOperator::FullOuter(_)
        );
        let Some(constraint) = constraint_mut(&mut join.join_operator) else {
            left = concat(left, right);
            continue;
        };
        let alias = match constraint {
            JoinConstraint::Using(names) => take_join_alias(names),
            _ => None,
        };
        let names = match constraint {
            JoinConstraint::Using(names) => names
                .iter()
                .map(|name| match name.0.as_slice() {
                    [ObjectNamePart::Identifier(ident)] => Some(naming::normalize(ident)),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()?,
            JoinConstraint::Natural => common_names(&left, &right)?,
            JoinConstraint::On(on) => {
                if !merged.is_empty() {
                    replace_references(on, merged);
                }
                left = concat(left, right);
                continue;
            }
            JoinConstraint::None => {
                left = concat(left, right);
                continue;
            }
        };
        let mut keys = Vec::with_capacity(names.len());
        let mut joined = Vec::new();
        for name in &names {
            let left_expr = find(&left, name)?.clone();
            let right_expr = find(&right, name)?.clone();
            let expr = if right_outer {
                crate::rewrite::function_call(
                    "coalesce",
                    vec![left_expr.clone(), right_expr.clone()],
                )
            } else {
                left_expr.clone()
            };
            let column = Column {
                name: name.clone(),
                expr,
            };
            merged.retain(|m: &Column| m.name != *name);
            merged.push(column.clone());
            joined.push(column);
            keys.push((left_expr, right_expr));
        }
        if let Some(alias) = alias {
            aliases.push((alias, joined.clone()));
        }
        // The engine matches a USING key by the left relation's column: a key that
        // is itself merged (a COALESCE) joins ON it instead.
        let plain = keys.iter().all(|(l, r)| {
            matches!(l, Expr::CompoundIdentifier(_)) && matches!(r, Expr::CompoundIdentifier(_))
        });
        if matches!(constraint, JoinConstraint::Natural) || !plain {
            *constraint = if plain {
                JoinConstraint::Using(
                    names
                        .iter()
                        .map(|n| ObjectName(vec![ObjectNamePart::Identifier(quoted(n))]))
                        .collect(),
                )
            } else {
                JoinConstraint::On(equalities(keys))
            };
        }
        let rest = |columns: Columns| -> Columns {
            Some(
                columns?
                    .into_iter()
                    .filter(|c| !names.contains(&c.name))
                    .collect(),
            )
        };
        left = concat(concat(Some(joined), rest(left)), rest(right));
    }
    Some(left)
}

fn constraint_mut(operator: &mut JoinOperator) -> Option<&mut JoinConstraint> {
    match operator {
        JoinOperator::Join(c)
        | JoinOperator::Inner(c)
        | JoinOperator::Left(c)
        | JoinOperator::LeftOuter(c)
        | JoinOperator::Right(c)
        | JoinOperator::RightOuter(c)
        | JoinOperator::FullOuter(c)
        | JoinOperator::CrossJoin(c) => Some(c),
        _ => None,
    }
}

fn concat(left: Columns, right: Columns) -> Columns {
    let mut left = left?;
    left.extend(right?);
    Some(left)
}

/// The names both sides show, in the left's order (a NATURAL join's keys).
fn common_names(left: &Columns, right: &Columns) -> Option<Vec<String>> {
    let right = right.as_ref()?;
    Some(
        left.as_ref()?
            .iter()
            .filter(|l| right.iter().any(|r| r.name == l.name))
            .map(|l| l.name.clone())
            .collect(),
    )
}

fn equalities(keys: Vec<(Expr, Expr)>) -> Expr {
    let mut conditions = keys.into_iter().map(|(left, right)| Expr::BinaryOp {
        left: Box::new(left),
        op: BinaryOperator::Eq,
        right: Box::new(right),
    });
    let first = conditions
        .next()
        .unwrap_or(Expr::Value(sqlparser::ast::Value::Boolean(true).into()));
    conditions.fold(first, |all, next| Expr::BinaryOp {
        left: Box::new(all),
        op: BinaryOperator::And,
        right: Box::new(next),
    })
}

fn quoted(name: &str) -> Ident {
    Ident::with_quote('"', name)
}

/// The columns a relation of a `FROM` shows, each read qualified by the name the
/// query gives the relation. `Some(None)` when they are not known; `None` when a
/// nested join could not be rewritten.
fn factor_columns(
    factor: &mut TableFactor,
    tables: &TableColumns,
    merged: &mut Vec<Column>,
    aliases: &mut Vec<JoinAlias>,
) -> Option<Columns> {
    if let TableFactor::NestedJoin {
        table_with_joins,
        alias: None,
    } = factor
    {
        return merge_joins(table_with_joins, tables, merged, aliases);
    }
    let Some((reference, names)) = crate::relations::factor_columns(factor, tables) else {
        return Some(None);
    };
    Some(Some(
        names
            .into_iter()
            .map(|name| Column {
                expr: Expr::CompoundIdentifier(vec![quoted(&reference), quoted(&name)]),
                name,
            })
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(sql: &str) -> String {
        let mut statement =
            sqlparser::parser::Parser::new(&sqlparser::dialect::PostgreSqlDialect {})
                .try_with_sql(sql)
                .and_then(|mut parser| parser.parse_statement())
                .unwrap();
        let mut tables = TableColumns::new();
        tables.insert("t1".into(), vec!["b".into(), "a".into()]);
        tables.insert("t2".into(), vec!["a".into(), "c".into()]);
        merge(&mut statement, &tables);
        statement.to_string()
    }

    #[test]
    fn a_full_join_reads_its_merged_column_as_coalesce() {
        assert_eq!(
            rewritten("SELECT a, a + 1 FROM t1 FULL JOIN t2 USING (a) WHERE a > 1 ORDER BY a + 2"),
            "SELECT (coalesce(\"t1\".\"a\", \"t2\".\"a\")) AS \"a\", \
             (coalesce(\"t1\".\"a\", \"t2\".\"a\")) + 1 AS \"?column?\" \
             FROM t1 FULL JOIN t2 USING(a) WHERE (coalesce(\"t1\".\"a\", \"t2\".\"a\")) > 1 \
             ORDER BY (coalesce(\"t1\".\"a\", \"t2\".\"a\")) + 2"
        );
    }

    #[test]
    fn a_wildcard_lists_merged_columns_first() {
        assert_eq!(
            rewritten("SELECT * FROM t1 NATURAL JOIN t2"),
            "SELECT \"t1\".\"a\" AS \"a\", \"t1\".\"b\" AS \"b\", \"t2\".\"c\" AS \"c\" \
             FROM t1 JOIN t2 USING(\"a\")"
        );
    }

    #[test]
    fn a_key_merged_before_joins_on_its_merged_value() {
        assert_eq!(
            rewritten("SELECT a FROM t1 FULL JOIN t2 USING (a) JOIN t2 AS t3 USING (a)"),
            "SELECT (coalesce(\"t1\".\"a\", \"t2\".\"a\")) AS \"a\" \
             FROM t1 FULL JOIN t2 USING(a) JOIN t2 AS t3 ON coalesce(\"t1\".\"a\", \"t2\".\"a\") = \"t3\".\"a\""
        );
    }

    #[test]
    fn a_select_with_a_relation_of_unknown_columns_is_left_as_it_was() {
        let sql = "SELECT * FROM t1 FULL JOIN unknown USING(a)";
        assert_eq!(rewritten(sql), sql);
        let sql = "SELECT a FROM t1 JOIN t2 USING(a) NATURAL FULL JOIN unknown";
        assert_eq!(rewritten(sql), sql);
    }
}
