//! The spellings PostgreSQL tools use in catalog queries, rewritten into what the
//! query engine takes. Applied to every query by `query::logical_plan`.
//!
//! Everywhere (each turns an error into PostgreSQL's meaning):
//! - `OPERATOR(pg_catalog.~)` and friends are the plain operators;
//! - `COLLATE pg_catalog.default` is dropped (there are no other collations);
//! - `pg_catalog.f(...)` and `information_schema.f(...)` are `f(...)`, and
//!   `::pg_catalog.text` is `::text`;
//! - `'name'::regclass` is the relation's OID (`regclassin`), `'t'::regtype` the
//!   type's, `'pg_catalog.f'::regproc` the function's name; an OID cast to a `reg*`
//!   type stays the OID;
//! - `ARRAY(SELECT x ...)` is `(SELECT array_agg(x) ...)` ([`crate::array_subquery`]).
//!
//! In statements that read the PostgreSQL catalog (`pg_catalog`,
//! `information_schema`) only, because the engine evaluates correlated scalar
//! subqueries only when they aggregate and correlate by equalities:
//! - a correlated scalar subquery's single column is aggregated (`max`);
//! - a condition on outer columns only moves out (`CASE WHEN cond THEN (subquery) END`);
//! - an outer column equated with an inner expression is replaced by it in the other
//!   conditions (`c.oid = a.attcollation AND a.attcollation <> t.typcollation`
//!   becomes `... AND c.oid <> t.typcollation`);
//! - `x = ANY(outer array)` is dropped: psql uses it only over `pg_policy`, which is
//!   empty (floe has no row-level security), so the result is the same;
//! - a text literal such as `'{0}'` compared with a value is the array it spells.

use std::collections::HashSet;

use sqlparser::ast::{
    BinaryOperator, DataType as SqlType, Expr, ObjectName, ObjectNamePart, Query, SelectItem,
    SetExpr, TableFactor, Value, Visit, VisitMut, Visitor, VisitorMut,
};

/// Rewrites a statement in place.
pub fn rewrite(statement: &mut sqlparser::ast::Statement) {
    let catalog = reads_catalog(statement);
    let _ = VisitMut::visit(statement, &mut CatalogSpellings { catalog });
}

/// Whether the statement reads a relation of `pg_catalog` or `information_schema`.
fn reads_catalog(statement: &sqlparser::ast::Statement) -> bool {
    struct Finder(bool);
    impl Visitor for Finder {
        type Break = ();
        fn pre_visit_relation(&mut self, relation: &ObjectName) -> std::ops::ControlFlow<()> {
            let parts: Vec<String> = relation
                .0
                .iter()
                .filter_map(|part| part.as_ident().map(|i| i.value.to_ascii_lowercase()))
                .collect();
            if parts.len() >= 2
                && matches!(
                    parts[parts.len() - 2].as_str(),
                    "pg_catalog" | "information_schema"
                )
            {
                self.0 = true;
                return std::ops::ControlFlow::Break(());
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    let mut finder = Finder(false);
    let _ = Visit::visit(statement, &mut finder);
    finder.0
}

struct CatalogSpellings {
    /// The statement reads the catalog: the catalog-only rewrites apply.
    catalog: bool,
}

impl VisitorMut for CatalogSpellings {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> std::ops::ControlFlow<()> {
        // `FROM pg_catalog.unnest(...)` (psql's `\d+`) is the function `unnest`,
        // and `FROM pg_catalog.pg_get_keywords()` (pgjdbc) the table function
        // `pg_get_keywords`.
        if let TableFactor::Table {
            name,
            args: Some(_),
            ..
        } = factor
        {
            strip_catalog_schema(name);
        }
        std::ops::ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, expr: &mut Expr) -> std::ops::ControlFlow<()> {
        let replacement = match expr {
            Expr::BinaryOp { op, left, right } => {
                if let BinaryOperator::PGCustomBinaryOperator(parts) = op
                    && let Some(plain) = parts.last().and_then(|name| plain_operator(name))
                {
                    *op = plain;
                }
                if self.catalog && matches!(op, BinaryOperator::Eq | BinaryOperator::NotEq) {
                    for side in [left, right] {
                        if let Some(array) = array_literal(side) {
                            **side = array;
                        }
                    }
                }
                None
            }
            // Collations other than the default do not exist here.
            Expr::Collate { expr: inner, .. } => Some((**inner).clone()),
            Expr::Cast {
                expr: inner,
                data_type,
                ..
            } => rewrite_cast(inner, data_type),
            Expr::Function(function) => {
                strip_catalog_schema(&mut function.name);
                array_subquery(function, self.catalog)
            }
            Expr::Subquery(query) if self.catalog => scalar_subquery(query),
            // `current_schema` without parentheses is the function, as in
            // PostgreSQL (where the word is reserved).
            Expr::Identifier(ident) if is_current_schema_word(ident) => {
                Some(nullary_call("current_schema"))
            }
            _ => None,
        };
        if let Some(replacement) = replacement {
            *expr = replacement;
        }
        std::ops::ControlFlow::Continue(())
    }
}

/// `OPERATOR(pg_catalog.~)` and friends as plain operators.
fn plain_operator(name: &str) -> Option<BinaryOperator> {
    Some(match name {
        "~" => BinaryOperator::PGRegexMatch,
        "~*" => BinaryOperator::PGRegexIMatch,
        "!~" => BinaryOperator::PGRegexNotMatch,
        "!~*" => BinaryOperator::PGRegexNotIMatch,
        "=" => BinaryOperator::Eq,
        "<>" | "!=" => BinaryOperator::NotEq,
        "<" => BinaryOperator::Lt,
        "<=" => BinaryOperator::LtEq,
        ">" => BinaryOperator::Gt,
        ">=" => BinaryOperator::GtEq,
        "||" => BinaryOperator::StringConcat,
        _ => return None,
    })
}

/// `pg_catalog.f(...)` is `f(...)`, and so is `information_schema.f(...)`
/// (`information_schema._pg_expandarray`, which pgjdbc calls).
fn strip_catalog_schema(name: &mut ObjectName) {
    if name.0.len() == 2
        && let Some(ObjectNamePart::Identifier(schema)) = name.0.first()
        && (schema.value.eq_ignore_ascii_case("pg_catalog")
            || schema.value.eq_ignore_ascii_case("information_schema"))
    {
        name.0.remove(0);
    }
}

fn last_name(name: &ObjectName) -> Option<String> {
    match name.0.last()? {
        ObjectNamePart::Identifier(ident) => Some(ident.value.to_ascii_lowercase()),
        _ => None,
    }
}

fn call(name: &str, argument: Expr) -> Expr {
    floe_query::rewrite::function_call(name, vec![argument])
}

fn nullary_call(name: &str) -> Expr {
    floe_query::rewrite::function_call(name, vec![])
}

fn string_literal(expr: &Expr) -> Option<&str> {
    match expr {
        Expr::Value(value) => match &value.value {
            Value::SingleQuotedString(s) => Some(s),
            _ => None,
        },
        _ => None,
    }
}

/// The bare word `current_schema`, which is the function.
fn is_current_schema_word(ident: &sqlparser::ast::Ident) -> bool {
    ident.quote_style.is_none() && ident.value.eq_ignore_ascii_case("current_schema")
}

/// The catalog function the rewrite of `expr` itself adds a call of, if any:
/// `current_schema` for the bare word, `regclassin` and `regtypein` for a literal
/// cast to `regclass` and `regtype` (`pg_functions::called` reads a statement's
/// calls without rewriting a copy of it).
pub fn added_call(expr: &Expr) -> Option<&'static str> {
    match expr {
        Expr::Identifier(ident) if is_current_schema_word(ident) => Some("current_schema"),
        Expr::Cast {
            expr: inner,
            data_type,
            ..
        } if string_literal(inner).is_some() => match cast_type(data_type)?.0.as_str() {
            "regclass" => Some("regclassin"),
            "regtype" => Some("regtypein"),
            _ => None,
        },
        _ => None,
    }
}

/// The name of a type a cast may rewrite (lowercase), and whether it is qualified.
fn cast_type(data_type: &SqlType) -> Option<(String, bool)> {
    match data_type {
        SqlType::Regclass => Some(("regclass".to_string(), false)),
        SqlType::Custom(name, _) => Some((last_name(name)?, name.0.len() > 1)),
        _ => None,
    }
}

/// Casts to the `reg*` types and to `pg_catalog.`-qualified types.
fn rewrite_cast(inner: &mut Expr, data_type: &mut SqlType) -> Option<Expr> {
    let (type_name, qualified) = cast_type(data_type)?;
    let literal = string_literal(inner).map(str::to_string);
    match (type_name.as_str(), literal) {
        // 'name'::regclass is the relation's OID; an OID cast to regclass stays an OID.
        ("regclass", Some(_)) => Some(call("regclassin", inner.clone())),
        ("regtype", Some(_)) => Some(call("regtypein", inner.clone())),
        ("regproc" | "regprocedure", Some(name)) => Some(Expr::Value(
            Value::SingleQuotedString(name.trim_start_matches("pg_catalog.").to_string()).into(),
        )),
        (
            "regclass" | "regtype" | "regproc" | "regprocedure" | "regnamespace" | "regrole",
            None,
        ) => Some(inner.clone()),
        _ => {
            let standard = match type_name.as_str() {
                "text" | "name" | "char" | "bpchar" => SqlType::Text,
                "varchar" => SqlType::Varchar(None),
                "int2" => SqlType::SmallInt(None),
                "int4" => SqlType::Int(None),
                "int8" => SqlType::BigInt(None),
                "bool" => SqlType::Bool,
                // Any other `pg_catalog.`-qualified type is its plain name
                // (`'20001'::pg_catalog.oid`, psql's `\d+` of a view).
                _ if qualified => {
                    if let SqlType::Custom(name, _) = data_type {
                        name.0.drain(..name.0.len().saturating_sub(1));
                    }
                    return None;
                }
                _ => return None,
            };
            // Only qualified spellings and `"char"`/`name` need help.
            if qualified || matches!(type_name.as_str(), "char" | "name") {
                *data_type = standard;
            }
            None
        }
    }
}

/// `'{a,b}'` compared with an array is `ARRAY['a', 'b']`.
fn array_literal(expr: &Expr) -> Option<Expr> {
    let text = string_literal(expr)?;
    let items = text.strip_prefix('{')?.strip_suffix('}')?;
    let elements = items
        .split(',')
        .filter(|item| !item.is_empty())
        .map(|item| {
            Expr::Value(Value::SingleQuotedString(item.trim_matches('"').to_string()).into())
        })
        .collect();
    Some(Expr::Array(sqlparser::ast::Array {
        elem: elements,
        named: true,
    }))
}

/// `ARRAY(SELECT x ...)` ([`crate::array_subquery`]), `{}` when the
/// subquery has no rows.
fn array_subquery(function: &sqlparser::ast::Function, catalog: bool) -> Option<Expr> {
    let mut query = Box::new(crate::array_subquery::rewrite(function, catalog)?);
    let collected = match catalog {
        true => scalar_subquery(&mut query).unwrap_or(Expr::Subquery(query)),
        false => Expr::Subquery(query),
    };
    Some(call(floe_query::functions::or_empty::OR_EMPTY, collected))
}

/// The aliases (or names) the FROM clause of a SELECT introduces.
fn inner_names(select: &sqlparser::ast::Select) -> HashSet<String> {
    let mut names = HashSet::new();
    let mut add = |factor: &TableFactor| {
        if let TableFactor::Table { name, alias, .. } = factor {
            match alias {
                Some(alias) => names.insert(alias.name.value.to_ascii_lowercase()),
                None => last_name(name).map(|n| names.insert(n)).unwrap_or(false),
            };
        }
    };
    for table in &select.from {
        add(&table.relation);
        for join in &table.joins {
            add(&join.relation);
        }
    }
    names
}

/// References of an expression: (to outer relations, to inner relations or unqualified).
fn references(expr: &Expr, inner: &HashSet<String>) -> (bool, bool) {
    struct Refs<'a> {
        inner: &'a HashSet<String>,
        outer: bool,
        local: bool,
    }
    impl Visitor for Refs<'_> {
        type Break = ();
        fn pre_visit_expr(&mut self, expr: &Expr) -> std::ops::ControlFlow<()> {
            match expr {
                Expr::CompoundIdentifier(parts) if parts.len() >= 2 => {
                    let qualifier = parts[parts.len() - 2].value.to_ascii_lowercase();
                    if self.inner.contains(&qualifier) {
                        self.local = true;
                    } else {
                        self.outer = true;
                    }
                }
                Expr::Identifier(_) => self.local = true,
                _ => {}
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    let mut refs = Refs {
        inner,
        outer: false,
        local: false,
    };
    let _ = Visit::visit(expr, &mut refs);
    (refs.outer, refs.local)
}

fn conjuncts(expr: Expr, out: &mut Vec<Expr>) {
    match expr {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            conjuncts(*left, out);
            conjuncts(*right, out);
        }
        Expr::Nested(inner)
            if matches!(
                *inner,
                Expr::BinaryOp {
                    op: BinaryOperator::And,
                    ..
                }
            ) =>
        {
            conjuncts(*inner, out)
        }
        other => out.push(other),
    }
}

fn and_all(mut exprs: Vec<Expr>) -> Option<Expr> {
    let first = if exprs.is_empty() {
        return None;
    } else {
        exprs.remove(0)
    };
    Some(exprs.into_iter().fold(first, |all, next| Expr::BinaryOp {
        left: Box::new(all),
        op: BinaryOperator::And,
        right: Box::new(next),
    }))
}

/// Replaces outer column references that an equality ties to an inner expression.
fn substitute(expr: &mut Expr, ties: &[(Expr, Expr)]) {
    struct Substitution<'a>(&'a [(Expr, Expr)]);
    impl VisitorMut for Substitution<'_> {
        type Break = ();
        fn post_visit_expr(&mut self, expr: &mut Expr) -> std::ops::ControlFlow<()> {
            if let Some((_, inner)) = self.0.iter().find(|(outer, _)| outer == expr) {
                *expr = inner.clone();
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    let _ = VisitMut::visit(expr, &mut Substitution(ties));
}

const AGGREGATES: &[&str] = &[
    "max",
    "min",
    "count",
    "sum",
    "avg",
    "array_agg",
    "string_agg",
    "bool_and",
    "bool_or",
];

/// Makes a correlated scalar subquery one the engine evaluates (see the module
/// comment); returns the replacement expression when conditions moved out.
fn scalar_subquery(query: &mut Query) -> Option<Expr> {
    let SetExpr::Select(select) = query.body.as_mut() else {
        return None;
    };
    let inner = inner_names(select);
    let mut all = Vec::new();
    if let Some(selection) = select.selection.take() {
        conjuncts(selection, &mut all);
    }
    // Equalities `inner = outer_column` correlate the way the engine wants.
    let mut ties: Vec<(Expr, Expr)> = Vec::new();
    for condition in &all {
        if let Expr::BinaryOp {
            left,
            op: BinaryOperator::Eq,
            right,
        } = condition
        {
            for (outer, local) in [(left, right), (right, left)] {
                let outer_only = matches!(outer.as_ref(), Expr::CompoundIdentifier(_))
                    && references(outer, &inner) == (true, false);
                if outer_only && references(local, &inner) == (false, true) {
                    ties.push(((**outer).clone(), (**local).clone()));
                }
            }
        }
    }
    let mut kept = Vec::new();
    let mut hoisted = Vec::new();
    let mut correlated = false;
    for mut condition in all {
        let is_tie = ties.iter().any(|(outer, local)| {
            matches!(&condition, Expr::BinaryOp { left, op: BinaryOperator::Eq, right }
                if (**left == *outer && **right == *local) || (**left == *local && **right == *outer))
        });
        if is_tie {
            correlated = true;
            kept.push(condition);
            continue;
        }
        if references(&condition, &inner).0 {
            substitute(&mut condition, &ties);
        }
        match references(&condition, &inner) {
            (false, _) => kept.push(condition),
            (true, false) => hoisted.push(condition),
            (true, true) if matches!(&condition, Expr::AnyOp { right, .. } if references(right, &inner) == (true, false)) =>
            {
                correlated = true;
            }
            (true, true) => {
                correlated = true;
                kept.push(condition);
            }
        }
    }
    select.selection = and_all(kept);
    let projected_outer = select.projection.iter().any(|item| match item {
        SelectItem::UnnamedExpr(expr) | SelectItem::ExprWithAlias { expr, .. } => {
            references(expr, &inner).0
        }
        _ => false,
    });
    if correlated || !hoisted.is_empty() || projected_outer {
        aggregate_projection(select);
    }
    let condition = and_all(hoisted)?;
    Some(Expr::Case {
        case_token: sqlparser::ast::helpers::attached_token::AttachedToken::empty(),
        end_token: sqlparser::ast::helpers::attached_token::AttachedToken::empty(),
        operand: None,
        conditions: vec![sqlparser::ast::CaseWhen {
            condition,
            result: Expr::Subquery(Box::new(query.clone())),
        }],
        else_result: None,
    })
}

/// Aggregates a subquery's single column (`max`), unless it already is an aggregate.
fn aggregate_projection(select: &mut sqlparser::ast::Select) {
    let [item] = select.projection.as_mut_slice() else {
        return;
    };
    let expr = match item {
        SelectItem::UnnamedExpr(expr) | SelectItem::ExprWithAlias { expr, .. } => expr,
        _ => return,
    };
    if let Expr::Function(function) = expr
        && last_name(&function.name).is_some_and(|name| AGGREGATES.contains(&name.as_str()))
    {
        return;
    }
    *expr = call("max", expr.clone());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(sql: &str) -> String {
        let mut statements =
            sqlparser::parser::Parser::parse_sql(&sqlparser::dialect::PostgreSqlDialect {}, sql)
                .unwrap();
        rewrite(&mut statements[0]);
        statements[0].to_string()
    }

    #[test]
    fn psql_spellings_become_plain_sql() {
        assert_eq!(
            rewritten(
                "SELECT c.oid FROM pg_catalog.pg_class c WHERE c.relname OPERATOR(pg_catalog.~) '^(t)$' COLLATE pg_catalog.default AND pg_catalog.pg_table_is_visible(c.oid)"
            ),
            "SELECT c.oid FROM pg_catalog.pg_class c WHERE c.relname ~ '^(t)$' AND pg_table_is_visible(c.oid)"
        );
        assert_eq!(
            rewritten(
                "SELECT 'public.t'::pg_catalog.regclass, 't'::regclass, c.oid::regclass, c.reloftype::pg_catalog.regtype::pg_catalog.text FROM c"
            ),
            "SELECT regclassin('public.t'), regclassin('t'), c.oid, c.reloftype::TEXT FROM c"
        );
        assert_eq!(
            rewritten("SELECT typinput = 'pg_catalog.array_in'::regproc FROM t"),
            "SELECT typinput = 'array_in' FROM t"
        );
        assert_eq!(
            rewritten("SELECT pg_get_viewdef('20001'::pg_catalog.oid, true)"),
            "SELECT pg_get_viewdef('20001'::oid, true)"
        );
        // `current_schema` is the function; a quoted name is a column.
        assert_eq!(
            rewritten(r#"SELECT current_schema, "current_schema" FROM t"#),
            r#"SELECT current_schema(), "current_schema" FROM t"#
        );
        // Outside catalog queries a text literal stays text.
        assert_eq!(
            rewritten("SELECT a = '{0}' FROM t"),
            "SELECT a = '{0}' FROM t"
        );
    }

    #[test]
    fn correlated_catalog_subqueries_become_ones_the_engine_evaluates() {
        // psql's \d: a condition on the outer row moves out; the column is aggregated.
        assert_eq!(
            rewritten(
                "SELECT (SELECT pg_get_expr(d.adbin, d.adrelid, true) FROM pg_catalog.pg_attrdef d WHERE d.adrelid = a.attrelid AND d.adnum = a.attnum AND a.atthasdef) FROM pg_catalog.pg_attribute a"
            ),
            "SELECT CASE WHEN a.atthasdef THEN (SELECT max(pg_get_expr(d.adbin, d.adrelid, true)) FROM pg_catalog.pg_attrdef d WHERE d.adrelid = a.attrelid AND d.adnum = a.attnum) END FROM pg_catalog.pg_attribute a"
        );
        // An outer column tied to an inner one by an equality is replaced by it.
        assert_eq!(
            rewritten(
                "SELECT (SELECT c.collname FROM pg_catalog.pg_collation c, pg_catalog.pg_type t WHERE c.oid = a.attcollation AND t.oid = a.atttypid AND a.attcollation <> t.typcollation) AS attcollation FROM pg_catalog.pg_attribute a"
            ),
            "SELECT (SELECT max(c.collname) FROM pg_catalog.pg_collation c, pg_catalog.pg_type t WHERE c.oid = a.attcollation AND t.oid = a.atttypid AND c.oid <> t.typcollation) AS attcollation FROM pg_catalog.pg_attribute a"
        );
        // \du's ARRAY(SELECT ...) and \d's policies, with '{0}' as an array.
        assert_eq!(
            rewritten(
                "SELECT ARRAY(SELECT b.rolname FROM pg_catalog.pg_auth_members m JOIN pg_catalog.pg_roles b ON (m.roleid = b.oid) WHERE m.member = r.oid) as memberof FROM pg_catalog.pg_roles r"
            ),
            "SELECT floe_or_empty((SELECT array_agg(b.rolname) FROM pg_catalog.pg_auth_members m JOIN pg_catalog.pg_roles b ON (m.roleid = b.oid) WHERE m.member = r.oid)) AS memberof FROM pg_catalog.pg_roles r"
        );
        assert_eq!(
            rewritten(
                "SELECT CASE WHEN pol.polroles = '{0}' THEN NULL ELSE array_to_string(array(select rolname from pg_catalog.pg_roles where oid = any (pol.polroles) order by 1),',') END FROM pg_catalog.pg_policy pol"
            ),
            "SELECT CASE WHEN pol.polroles = ARRAY['0'] THEN NULL ELSE array_to_string(floe_or_empty((SELECT array_agg(rolname ORDER BY rolname) FROM pg_catalog.pg_roles)), ',') END FROM pg_catalog.pg_policy pol"
        );
        // ARRAY(subquery) outside the catalog: in place, its ORDER BY the
        // aggregate's; through a derived table numbered in its order when it
        // limits its rows.
        assert_eq!(
            rewritten("SELECT ARRAY(SELECT b AS y FROM t ORDER BY y DESC)"),
            "SELECT floe_or_empty((SELECT array_agg(b ORDER BY b DESC) FROM t))"
        );
        assert_eq!(
            rewritten("SELECT ARRAY(SELECT b FROM t ORDER BY a LIMIT 2)"),
            "SELECT floe_or_empty((SELECT array_agg(array_source.value ORDER BY array_source.position) FROM (SELECT b, row_number() OVER (ORDER BY a) FROM t ORDER BY a LIMIT 2) AS array_source (value, position)))"
        );
        // Uncorrelated subqueries are left alone.
        assert_eq!(
            rewritten("SELECT (SELECT t.oid FROM pg_catalog.pg_type t WHERE t.typname = 'int4')"),
            "SELECT (SELECT t.oid FROM pg_catalog.pg_type t WHERE t.typname = 'int4')"
        );
    }
}
