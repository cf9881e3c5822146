//! Output column names as Postgres chooses them (its `FigureColname`): a
//! column by its name, a function call by the function's name, a cast of
//! something nameless by its type (`int4`), `CASE` as `case`, anything else
//! `?column?`.
//!
//! Postgres allows several output columns of one name; DataFusion does not.
//! Every name after the first of a select list gets an invisible suffix
//! ([`MARKER`] and a number) for the engine, which [`visible_name`] removes
//! before the client sees it.

use sqlparser::ast::{
    DataType, Expr, Ident, ObjectName, OrderByExpr, Query, Select, SelectItem,
    SelectItemQualifiedWildcardKind, SetExpr, TableFactor, TrimWhereField, Value,
};

/// Starts the engine-only suffix of a duplicate name (a private-use
/// character, which no client writes in an identifier).
pub const MARKER: char = '\u{E000}';

/// A name as the client sees it: without the engine-only suffix.
pub fn visible_name(name: &str) -> &str {
    match name.find(MARKER) {
        Some(at) => &name[..at],
        None => name,
    }
}

/// How sure Postgres is of a name: a cast names its column by its type only
/// when its operand has no better name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Strength {
    None,
    Weak,
    Strong,
}

/// An identifier as the engine compares it: unquoted identifiers fold to
/// lower case.
pub fn normalize(ident: &Ident) -> String {
    match ident.quote_style {
        Some(_) => ident.value.clone(),
        None => ident.value.to_lowercase(),
    }
}

fn last_name(name: &ObjectName) -> String {
    name.0
        .last()
        .and_then(|part| part.as_ident())
        .map(normalize)
        .unwrap_or_default()
}

/// The name Postgres gives an output column computed by `expr`.
pub fn column_name(expr: &Expr) -> String {
    match figure(expr) {
        (Strength::None, _) => "?column?".to_string(),
        (_, name) => name,
    }
}

fn strong(name: impl Into<String>) -> (Strength, String) {
    (Strength::Strong, name.into())
}

fn weak(name: impl Into<String>) -> (Strength, String) {
    (Strength::Weak, name.into())
}

fn nameless() -> (Strength, String) {
    (Strength::None, String::new())
}

fn figure(expr: &Expr) -> (Strength, String) {
    match expr {
        Expr::Identifier(ident) => strong(normalize(ident)),
        Expr::CompoundIdentifier(parts) => match parts.last() {
            Some(last) => strong(normalize(last)),
            None => nameless(),
        },
        Expr::CompoundFieldAccess { root, access_chain } => {
            let field = access_chain.iter().rev().find_map(|access| match access {
                sqlparser::ast::AccessExpr::Dot(Expr::Identifier(ident)) => Some(normalize(ident)),
                _ => None,
            });
            match field {
                Some(name) => strong(name),
                None => figure(root),
            }
        }
        Expr::Nested(inner) | Expr::Collate { expr: inner, .. } => figure(inner),
        Expr::Function(function) => strong(function_name(function)),
        Expr::Cast {
            expr, data_type, ..
        } => match figure(expr) {
            (Strength::Strong, name) => strong(name),
            _ => weak(type_column_name(data_type)),
        },
        Expr::TypedString(typed) => weak(type_column_name(&typed.data_type)),
        Expr::Interval(_) => weak("interval"),
        Expr::Value(value) => match &value.value {
            // `true` is a cast of a string to boolean in Postgres' grammar.
            Value::Boolean(_) => weak("bool"),
            _ => nameless(),
        },
        // A CASE is named after its ELSE when that has a name of its own.
        Expr::Case { else_result, .. } => match else_result.as_deref().map(figure) {
            Some((Strength::Strong, name)) => strong(name),
            _ => weak("case"),
        },
        Expr::Array(_) => strong("array"),
        Expr::Tuple(_) => strong("row"),
        // `NOT EXISTS` is a NOT, which has no name.
        Expr::Exists { negated: false, .. } => strong("exists"),
        Expr::Subquery(query) => subquery_name(query),
        Expr::Extract { .. } => strong("extract"),
        Expr::Substring { .. } => strong("substring"),
        Expr::Position { .. } => strong("position"),
        Expr::Overlay { .. } => strong("overlay"),
        Expr::Ceil { .. } => strong("ceil"),
        Expr::Floor { .. } => strong("floor"),
        Expr::AtTimeZone { .. } => strong("timezone"),
        Expr::Trim { trim_where, .. } => strong(match trim_where {
            Some(TrimWhereField::Leading) => "ltrim",
            Some(TrimWhereField::Trailing) => "rtrim",
            _ => "btrim",
        }),
        _ => nameless(),
    }
}

/// A function's name as Postgres reports it.
fn function_name(function: &sqlparser::ast::Function) -> String {
    let name = last_name(&function.name);
    match name.as_str() {
        // Materialize's constructors, written `LIST[...]` and `MAP[...]`.
        crate::rewrite::LIST_CONSTRUCTOR | crate::rewrite::LIST_OF_LISTS => "list".to_string(),
        crate::rewrite::MAP_CONSTRUCTOR => "map".to_string(),
        // What `ARRAY(subquery)` is rewritten to.
        crate::functions::or_empty::OR_EMPTY => "array".to_string(),
        _ => name,
    }
}

/// A scalar subquery is named after its only output column.
fn subquery_name(query: &Query) -> (Strength, String) {
    match query.body.as_ref() {
        SetExpr::Select(select) => match select.projection.first() {
            Some(SelectItem::ExprWithAlias { alias, .. }) => strong(normalize(alias)),
            Some(SelectItem::UnnamedExpr(expr)) => match figure(expr) {
                (Strength::None, _) => nameless(),
                (_, name) => strong(name),
            },
            _ => nameless(),
        },
        SetExpr::Query(inner) => subquery_name(inner),
        _ => nameless(),
    }
}

/// The name Postgres gives a cast to `data_type` whose operand has none:
/// the type's internal name (`int4`, `float8`, `bpchar`, ...).
pub fn type_column_name(data_type: &DataType) -> String {
    use DataType as D;
    match data_type {
        D::Int(_) | D::Integer(_) | D::Int4(_) => "int4".into(),
        D::SmallInt(_) | D::Int2(_) => "int2".into(),
        D::BigInt(_) | D::Int8(_) => "int8".into(),
        D::Real | D::Float4 => "float4".into(),
        D::Float(info) => match info {
            sqlparser::ast::ExactNumberInfo::Precision(p) if *p <= 24 => "float4".into(),
            _ => "float8".into(),
        },
        D::Double(_) | D::DoublePrecision | D::Float8 => "float8".into(),
        D::Numeric(_) | D::Decimal(_) | D::Dec(_) => "numeric".into(),
        D::Bool | D::Boolean => "bool".into(),
        D::Varchar(_) | D::CharacterVarying(_) | D::CharVarying(_) => "varchar".into(),
        D::Char(_) | D::Character(_) => "bpchar".into(),
        D::Text => "text".into(),
        D::Bytea => "bytea".into(),
        D::Date => "date".into(),
        D::Time(_, tz) => match tz {
            sqlparser::ast::TimezoneInfo::WithTimeZone | sqlparser::ast::TimezoneInfo::Tz => {
                "timetz".into()
            }
            _ => "time".into(),
        },
        D::Timestamp(_, tz) => match tz {
            sqlparser::ast::TimezoneInfo::WithTimeZone | sqlparser::ast::TimezoneInfo::Tz => {
                "timestamptz".into()
            }
            _ => "timestamp".into(),
        },
        D::Interval { .. } => "interval".into(),
        D::JSON => "json".into(),
        D::JSONB => "jsonb".into(),
        D::Uuid => "uuid".into(),
        D::Regclass => "regclass".into(),
        D::Array(sqlparser::ast::ArrayElemTypeDef::SquareBracket(inner, _))
        | D::Array(sqlparser::ast::ArrayElemTypeDef::AngleBracket(inner)) => {
            type_column_name(inner)
        }
        D::Custom(name, _) => {
            let name = last_name(name);
            // floe's parser writes Materialize's `T list` and `map[K=>V]` as
            // one custom name; Materialize names such a column `list`/`map`.
            if name.ends_with(" list") {
                "list".into()
            } else if name.starts_with("map[") {
                "map".into()
            } else {
                name
            }
        }
        other => other.to_string().to_lowercase(),
    }
}

/// The name of an `ORDER BY` key that names two different output columns of
/// `select` (`SELECT d, d::timestamp ... ORDER BY d`), which PostgreSQL refuses
/// as ambiguous. Two columns read from relations are told apart by their names
/// only (`t1.a` and `t2.a` are not refused).
pub fn ambiguous_order_key(select: &Select, keys: &[OrderByExpr]) -> Option<String> {
    if select.projection.iter().any(|item| {
        matches!(
            item,
            SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..)
        )
    }) {
        return None;
    }
    keys.iter().find_map(|key| {
        let Expr::Identifier(ident) = &key.expr else {
            return None;
        };
        let name = normalize(ident);
        let mut named = select.projection.iter().filter_map(|item| match item {
            SelectItem::UnnamedExpr(expr) if column_name(expr) == name => Some(comparable(expr)),
            SelectItem::ExprWithAlias { expr, alias } if normalize(alias) == name => {
                Some(comparable(expr))
            }
            _ => None,
        });
        let first = named.next()?;
        named.any(|other| other != first).then_some(name)
    })
}

/// An output column's expression as [`ambiguous_order_key`] compares it: a
/// column by its name.
fn comparable(expr: &Expr) -> String {
    match expr {
        Expr::Identifier(ident) => normalize(ident),
        Expr::CompoundIdentifier(parts) => parts.last().map(normalize).unwrap_or_default(),
        other => other.to_string(),
    }
}

/// Names the items of a select list as Postgres does, aliasing each
/// computed item, and makes the names unique for the engine.
pub fn name_select_items(select: &mut Select, beside_wildcards: bool) {
    // The names a wildcard expands to are the engine's to know: when they are
    // known to clash, every column named from a column gets an engine-only name.
    let rename_columns = beside_wildcards
        && select.projection.iter().any(|item| {
            matches!(
                item,
                SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..)
            )
        });
    let mut taken: Vec<String> = Vec::with_capacity(select.projection.len());
    for (position, item) in select.projection.iter_mut().enumerate() {
        let (expr, name, explicit) = match item {
            SelectItem::UnnamedExpr(expr) => {
                let name = column_name(expr);
                (expr.clone(), name, false)
            }
            SelectItem::ExprWithAlias { expr, alias } => (expr.clone(), normalize(alias), true),
            // Wildcards expand to names the engine already knows.
            _ => continue,
        };
        let mut unique = name.clone();
        let mut counter = 0;
        while taken.contains(&unique) {
            counter += 1;
            unique = format!("{name}{MARKER}{counter}");
        }
        taken.push(unique.clone());
        let plain_column = matches!(expr, Expr::Identifier(_) | Expr::CompoundIdentifier(_));
        if rename_columns && !explicit && plain_column {
            unique = format!("{name}{MARKER}w{position}");
        }
        if unique == name && (explicit || plain_column) {
            // The engine already names it so.
            continue;
        }
        *item = SelectItem::ExprWithAlias {
            expr,
            alias: Ident::with_quote('"', unique),
        };
    }
}

/// `t.*` over a table named `schema.t` (as resolution writes every table's name)
/// is the table's columns, as in Postgres: DataFusion matches a wildcard's
/// qualifier with the table's name exactly, so the qualifier is completed to the
/// name the FROM clause gives the table when it has no alias.
pub fn qualify_wildcards(select: &mut Select) {
    let tables: Vec<&ObjectName> = select
        .from
        .iter()
        .flat_map(|from| {
            std::iter::once(&from.relation).chain(from.joins.iter().map(|j| &j.relation))
        })
        .filter_map(|factor| match factor {
            TableFactor::Table {
                name, alias: None, ..
            } => Some(name),
            _ => None,
        })
        .collect();
    let parts = |name: &ObjectName| -> Vec<String> {
        name.0
            .iter()
            .filter_map(|p| p.as_ident())
            .map(normalize)
            .collect()
    };
    let mut completions = Vec::new();
    for (index, item) in select.projection.iter().enumerate() {
        let SelectItem::QualifiedWildcard(
            SelectItemQualifiedWildcardKind::ObjectName(qualifier),
            _,
        ) = item
        else {
            continue;
        };
        let wanted = parts(qualifier);
        let mut matches = tables.iter().filter(|table| {
            let full = parts(table);
            full.len() > wanted.len() && full.ends_with(&wanted)
        });
        // One table only: an ambiguous qualifier is left for the engine to refuse.
        if let (Some(table), None) = (matches.next(), matches.next()) {
            completions.push((index, (*table).clone()));
        }
    }
    for (index, table) in completions {
        if let Some(SelectItem::QualifiedWildcard(
            SelectItemQualifiedWildcardKind::ObjectName(qualifier),
            _,
        )) = select.projection.get_mut(index)
        {
            *qualifier = table;
        }
    }
}
