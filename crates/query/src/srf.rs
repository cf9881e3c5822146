//! Set-returning functions as Postgres has them.
//!
//! - In `FROM`, a function returning one column names that column after the
//!   function (`generate_series`), or after the table alias (`AS g` names
//!   both the relation and its column `g`), or after the alias' column list
//!   (`AS g(x)`). DataFusion names it `value`: the call becomes a derived
//!   table that renames it.
//! - In the select list, a set-returning function produces one row per
//!   value (DataFusion's `generate_series` returns one list): the call is
//!   unnested.
//! - With integer arguments `generate_series` returns `integer`, as in
//!   Postgres (DataFusion's returns `bigint`).
//! - `jsonb_array_elements[_text]`, `jsonb_object_keys`, `jsonb_each[_text]`
//!   `regexp_split_to_table` and `string_to_table` are unnested lists of floe's list functions
//!   ([`LIST_FUNCTIONS`]), named as Postgres names their columns.
//! - `jsonb_to_record[set]` are derived tables of their column definition
//!   list ([`crate::json_record`]).

use sqlparser::ast::{
    Expr, FunctionArg, FunctionArgExpr, FunctionArguments, Ident, ObjectName, Query, SelectItem,
    SetExpr, TableAlias, TableFactor,
};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

use crate::functions::{json, jsonb};
use crate::naming::normalize;

/// The set-returning functions floe knows, by the name Postgres uses.
const GENERATE_SERIES: &str = "generate_series";
const UNNEST: &str = "unnest";

/// The set-returning functions that are a list function's unnested list: each
/// with its list function and, in `FROM`, its column's name (`None`: named after
/// the relation, as a function returning a scalar is).
const LIST_FUNCTIONS: &[(&str, &str, Option<&str>)] = &[
    ("jsonb_array_elements", jsonb::ARRAY_ELEMENTS, Some("value")),
    (
        "jsonb_array_elements_text",
        jsonb::ARRAY_ELEMENTS_TEXT,
        Some("value"),
    ),
    ("jsonb_object_keys", jsonb::OBJECT_KEYS, None),
    (
        "jsonb_path_query",
        crate::functions::jsonpath::PATH_QUERY,
        None,
    ),
    (
        "jsonb_path_query_tz",
        crate::functions::jsonpath::PATH_QUERY_TZ,
        None,
    ),
    (
        "regexp_split_to_table",
        crate::functions::text::REGEXP_SPLIT,
        None,
    ),
    ("string_to_table", "string_to_array", None),
    (
        "regexp_matches",
        crate::functions::text::REGEXP_MATCHES,
        None,
    ),
    ("json_array_elements", json::ARRAY_ELEMENTS, Some("value")),
    (
        "json_array_elements_text",
        json::ARRAY_ELEMENTS_TEXT,
        Some("value"),
    ),
    ("json_object_keys", json::OBJECT_KEYS, None),
];

/// The list functions whose items are documents: unnesting a list drops its
/// items' jsonb type (carried in the item field's metadata), so each unnested
/// item is read as jsonb again.
const DOCUMENT_LISTS: &[&str] = &[
    jsonb::ARRAY_ELEMENTS,
    jsonb::EACH_VALUES,
    crate::functions::jsonpath::PATH_QUERY,
    crate::functions::jsonpath::PATH_QUERY_TZ,
];

/// The list functions whose items are `json` values, read as `json` again.
const JSON_LISTS: &[&str] = &[json::ARRAY_ELEMENTS, json::EACH_VALUES];

/// The list functions whose items are text lists that Postgres types
/// `text[]` (`regexp_matches`).
const TEXT_ARRAY_LISTS: &[&str] = &[crate::functions::text::REGEXP_MATCHES];

/// `unnest(list(args))`, its items read as [`typed_items`] reads them.
fn unnested(list: &str, arguments: &str) -> String {
    let sql = format!("unnest({list}({arguments}))");
    let parsed = Parser::new(&PostgreSqlDialect {})
        .try_with_sql(&sql)
        .and_then(|mut parser| parser.parse_expr());
    match parsed {
        Ok(expr) => typed_items(list, expr).to_string(),
        Err(_) => sql,
    }
}

/// A list function's unnested items, read as jsonb when they are documents
/// and as `text[]` when Postgres types them so.
fn typed_items(list: &str, unnested: Expr) -> Expr {
    if DOCUMENT_LISTS.contains(&list) {
        Expr::Cast {
            kind: sqlparser::ast::CastKind::Cast,
            expr: Box::new(unnested),
            data_type: sqlparser::ast::DataType::JSONB,
            array: false,
            format: None,
        }
    } else if JSON_LISTS.contains(&list) {
        Expr::Cast {
            kind: sqlparser::ast::CastKind::Cast,
            expr: Box::new(unnested),
            data_type: sqlparser::ast::DataType::JSON,
            array: false,
            format: None,
        }
    } else if TEXT_ARRAY_LISTS.contains(&list) {
        crate::rewrite::function_call(crate::functions::text::AS_TEXT_ARRAY, vec![unnested])
    } else {
        unnested
    }
}

/// The set-returning functions of two columns, `key` and `value`: the list
/// functions of each column.
const KEY_VALUE_FUNCTIONS: &[(&str, &str, &str)] = &[
    ("jsonb_each", jsonb::EACH_KEYS, jsonb::EACH_VALUES),
    ("jsonb_each_text", jsonb::EACH_KEYS, jsonb::EACH_TEXT_VALUES),
    ("json_each", json::EACH_KEYS, json::EACH_VALUES),
    ("json_each_text", json::EACH_KEYS, json::EACH_TEXT_VALUES),
];

/// The alias of the call inside the derived table (a private-use character,
/// which no client writes), marking it as already rewritten.
const INNER_ALIAS: &str = "\u{E002}";

/// The column DataFusion's table functions name their output.
const ENGINE_COLUMN: &str = "value";

/// Rewrites `FROM generate_series(...) [AS alias [(column)]]` into a derived
/// table with Postgres' column name; `None` leaves `factor` as it is.
pub fn rewrite_table_function(factor: &TableFactor) -> Option<TableFactor> {
    rewrite_function_factor(factor, false)
}

/// Rewrites the set-returning calls of `select`'s `FROM` that read the columns
/// of the relations before them (`FROM t, jsonb_array_elements(t.doc) e`) into
/// lateral derived tables (`crate::lateral` flattens their joins). The first
/// relation of a `FROM` precedes nothing: a column it reads is an enclosing
/// query's, which DataFusion's own `UNNEST` resolves (psql's `\d+`), and it is
/// left to [`rewrite_table_function`].
pub fn rewrite_lateral_functions(select: &mut sqlparser::ast::Select) {
    for (index, table) in select.from.iter_mut().enumerate() {
        if index > 0
            && let Some(rewritten) = rewrite_function_factor(&table.relation, true)
        {
            table.relation = rewritten;
        }
        for join in &mut table.joins {
            if let Some(rewritten) = rewrite_function_factor(&join.relation, true) {
                join.relation = rewritten;
            }
        }
    }
}

/// [`rewrite_table_function`], with calls that read columns made lateral derived
/// tables when `lateral` allows (the factor follows another).
fn rewrite_function_factor(factor: &TableFactor, lateral: bool) -> Option<TableFactor> {
    if let Some(numbered) = with_ordinality(factor, lateral) {
        return Some(numbered);
    }
    // `LATERAL f(args)`: the call as the parser writes it without the keyword.
    if let TableFactor::Function {
        name,
        args,
        alias,
        with_ordinality,
        ..
    } = factor
    {
        let call = TableFactor::Table {
            name: name.clone(),
            alias: alias.clone(),
            args: Some(sqlparser::ast::TableFunctionArgs {
                args: args.clone(),
                settings: None,
            }),
            with_hints: vec![],
            version: None,
            with_ordinality: *with_ordinality,
            partitions: vec![],
            json_path: None,
            sample: None,
            index_hints: vec![],
        };
        return rewrite_function_factor(&call, lateral);
    }
    if let TableFactor::UNNEST {
        alias, array_exprs, ..
    } = factor
    {
        if let [array] = array_exprs.as_slice()
            && lateral
        {
            let args = sqlparser::ast::TableFunctionArgs {
                args: vec![FunctionArg::Unnamed(FunctionArgExpr::Expr(array.clone()))],
                settings: None,
            };
            return unnest_table(&args, alias.as_ref(), lateral);
        }
        return name_unnest_column(factor, alias.as_ref(), array_exprs);
    }
    let TableFactor::Table {
        name,
        alias,
        args: Some(args),
        ..
    } = factor
    else {
        return None;
    };
    // A table function's name is its folded name, quoted or not.
    let function = match name.0.as_slice() {
        [part] => normalize(part.as_ident()?),
        _ => return None,
    };
    if function == UNNEST {
        return unnest_table(args, alias.as_ref(), lateral);
    }
    if let Some(factor) = list_function_table(&function, args, alias.as_ref(), lateral) {
        return Some(factor);
    }
    if let Some(factor) = crate::json_record::record_table(&function, args, alias.as_ref(), lateral)
    {
        return Some(factor);
    }
    // The rewritten call itself carries the inner alias: left as it is.
    if function != GENERATE_SERIES || alias.as_ref().is_some_and(|a| a.name.value == INNER_ALIAS) {
        return None;
    }
    let relation = alias
        .as_ref()
        .map(|a| a.name.clone())
        .unwrap_or_else(|| Ident::new(GENERATE_SERIES));
    let column = alias
        .as_ref()
        .and_then(|a| a.columns.first())
        .map(|c| c.name.clone())
        .unwrap_or_else(|| relation.clone());
    let values: Vec<&Expr> = args
        .args
        .iter()
        .filter_map(|arg| match arg {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(expr)) => Some(expr),
            _ => None,
        })
        .collect();
    let arguments: Vec<String> = values.iter().map(|e| e.to_string()).collect();
    // DataFusion's table function takes only constants: arguments computed by a
    // function call (`array_upper(current_schemas(false), 1)` in pgjdbc's type lookup)
    // or read from a preceding relation's columns make it the select list's
    // set-returning call, unnested there.
    let lateral = lateral && values.iter().any(|value| references_columns(value));
    // The engine's table function also takes only integers (and timestamps of
    // another unit than floe's): a series of timestamps, dates or numerics is the
    // select list's call too.
    let integers = values.iter().all(|value| integer_literal(value));
    if lateral || !integers || values.iter().any(|value| calls_function(value)) {
        let sql = format!(
            "SELECT {GENERATE_SERIES}({}) AS {}",
            arguments.join(", "),
            quoted(&column)
        );
        return derived(&sql, relation, lateral);
    }
    let value = if all_int4(&values) {
        format!("CAST({ENGINE_COLUMN} AS INTEGER)")
    } else {
        ENGINE_COLUMN.to_string()
    };
    let sql = format!(
        "SELECT {value} AS {} FROM {GENERATE_SERIES}({}) AS \"{INNER_ALIAS}\"",
        quoted(&column),
        arguments.join(", ")
    );
    derived(&sql, relation, false)
}

/// `FROM f(args) [AS alias [(columns)]]` of a function of [`LIST_FUNCTIONS`] or
/// [`KEY_VALUE_FUNCTIONS`]: a derived table of its unnested lists, its columns
/// named as Postgres names them (after the alias' column list, else the
/// function's output names, else the relation).
fn list_function_table(
    function: &str,
    args: &sqlparser::ast::TableFunctionArgs,
    alias: Option<&TableAlias>,
    lateral: bool,
) -> Option<TableFactor> {
    let arguments: Vec<String> = args.args.iter().map(|a| a.to_string()).collect();
    let arguments = arguments.join(", ");
    let relation = alias
        .map(|a| a.name.clone())
        .unwrap_or_else(|| Ident::new(function));
    let column = |index: usize, default: &str| {
        alias
            .and_then(|a| a.columns.get(index))
            .map(|c| quoted(&c.name))
            .unwrap_or_else(|| format!("\"{default}\""))
    };
    let sql = if let Some((_, list, name)) = LIST_FUNCTIONS.iter().find(|f| f.0 == function) {
        let default = name.map_or_else(|| normalize(&relation), str::to_string);
        format!(
            "SELECT {} AS {}",
            unnested(list, &arguments),
            column(0, &default)
        )
    } else {
        let (_, keys, values) = KEY_VALUE_FUNCTIONS.iter().find(|f| f.0 == function)?;
        format!(
            "SELECT {} AS {}, {} AS {}",
            unnested(keys, &arguments),
            column(0, "key"),
            unnested(values, &arguments),
            column(1, "value")
        )
    };
    let lateral = lateral && references_columns_in(args);
    derived(&sql, relation, lateral)
}

/// Whether a call's arguments read a column (of a preceding relation).
pub(crate) fn references_columns_in(args: &sqlparser::ast::TableFunctionArgs) -> bool {
    args.args.iter().any(|arg| match arg {
        FunctionArg::Unnamed(FunctionArgExpr::Expr(expr)) => references_columns(expr),
        _ => false,
    })
}

/// Whether an expression reads a column (of a preceding relation, in `FROM`).
pub fn references_columns(expr: &Expr) -> bool {
    use sqlparser::ast::Visit;
    struct Columns;
    impl sqlparser::ast::Visitor for Columns {
        type Break = ();
        fn pre_visit_expr(&mut self, expr: &Expr) -> std::ops::ControlFlow<()> {
            match expr {
                Expr::Identifier(_) | Expr::CompoundIdentifier(_) => {
                    std::ops::ControlFlow::Break(())
                }
                _ => std::ops::ControlFlow::Continue(()),
            }
        }
    }
    expr.visit(&mut Columns).is_break()
}

/// A derived table of `sql` named `relation`; `lateral` when it reads the
/// columns of the relations before it (`crate::lateral` flattens the join).
pub(crate) fn derived(sql: &str, relation: Ident, lateral: bool) -> Option<TableFactor> {
    let subquery = parse_query(sql)?;
    Some(TableFactor::Derived {
        lateral,
        subquery: Box::new(subquery),
        alias: Some(TableAlias {
            explicit: true,
            name: relation,
            columns: vec![],
            at: None,
        }),
        sample: None,
    })
}

/// Whether an expression calls a function (so it is no constant DataFusion's table
/// functions accept).
fn calls_function(expr: &Expr) -> bool {
    match expr {
        Expr::Function(_) => true,
        Expr::Nested(inner)
        | Expr::UnaryOp { expr: inner, .. }
        | Expr::Cast { expr: inner, .. } => calls_function(inner),
        Expr::BinaryOp { left, right, .. } => calls_function(left) || calls_function(right),
        _ => false,
    }
}

/// `f(...) WITH ORDINALITY [AS alias [(columns)]]`: the call rewritten without it,
/// its rows numbered from 1 by `row_number()` in a column named after the alias'
/// column beyond the function's own, else `ordinality`. `None` for a factor without
/// ordinality.
fn with_ordinality(factor: &TableFactor, lateral: bool) -> Option<TableFactor> {
    let mut plain = factor.clone();
    let (alias, name, width) = match &mut plain {
        TableFactor::Table {
            with_ordinality: with_ordinality @ true,
            alias,
            name,
            ..
        } => {
            *with_ordinality = false;
            let function = match name.0.as_slice() {
                [part] => normalize(part.as_ident()?),
                _ => return None,
            };
            let width = if KEY_VALUE_FUNCTIONS.iter().any(|f| f.0 == function) {
                2
            } else {
                1
            };
            (alias, Ident::new(function), width)
        }
        TableFactor::UNNEST {
            with_ordinality: with_ordinality @ true,
            alias,
            array_exprs,
            ..
        } => {
            *with_ordinality = false;
            (alias, Ident::new(UNNEST), array_exprs.len())
        }
        _ => return None,
    };
    let relation = alias.as_ref().map(|a| a.name.clone()).unwrap_or(name);
    let ordinality = match alias {
        Some(alias) if alias.columns.len() > width => alias.columns.remove(width).name,
        _ => Ident::new("ordinality"),
    };
    let mut inner = rewrite_function_factor(&plain, lateral).unwrap_or(plain);
    if lateral && let Some(numbered) = numbered_unnest(&inner, &relation, &ordinality) {
        return Some(numbered);
    }
    // The call's own relation, under a name of its own: the outer one is the user's.
    let inner_alias = Ident::with_quote('"', ORDINALITY_ALIAS);
    match &mut inner {
        TableFactor::Derived { alias, .. }
        | TableFactor::UNNEST { alias, .. }
        | TableFactor::Table { alias, .. } => match alias {
            Some(alias) => alias.name = inner_alias,
            None => {
                *alias = Some(TableAlias {
                    explicit: true,
                    name: inner_alias,
                    columns: vec![],
                    at: None,
                })
            }
        },
        _ => return None,
    }
    let sql = format!(
        "SELECT \"{ORDINALITY_ALIAS}\".*, CAST(row_number() OVER () AS bigint) AS {} FROM {inner}",
        quoted(&ordinality)
    );
    derived(&sql, relation, lateral)
}

/// A lateral call's derived table, `SELECT unnest(list) AS c`, numbered by a second
/// unnest beside it, `unnest(range(1, cardinality(list) + 1))`: the numbers
/// start again at each row of the relations before it (a `row_number()` over the
/// derived table would count on across them, and DataFusion cannot decorrelate
/// it).
fn numbered_unnest(
    inner: &TableFactor,
    relation: &Ident,
    ordinality: &Ident,
) -> Option<TableFactor> {
    let TableFactor::Derived { subquery, .. } = inner else {
        return None;
    };
    let SetExpr::Select(select) = subquery.body.as_ref() else {
        return None;
    };
    let [
        SelectItem::ExprWithAlias {
            expr: Expr::Function(call),
            alias,
        },
    ] = select.projection.as_slice()
    else {
        return None;
    };
    let FunctionArguments::List(list) = &call.args else {
        return None;
    };
    if !select.from.is_empty() {
        return None;
    }
    if call.name.to_string() == GENERATE_SERIES {
        return numbered_series(call, &list.args, alias, relation, ordinality);
    }
    let [FunctionArg::Unnamed(FunctionArgExpr::Expr(items))] = list.args.as_slice() else {
        return None;
    };
    if call.name.to_string() != UNNEST {
        return None;
    }
    let sql = format!(
        "SELECT {UNNEST}({items}) AS {}, {UNNEST}(range(CAST(1 AS bigint), cardinality({items}) + 1)) AS {}",
        quoted(alias),
        quoted(ordinality)
    );
    derived(&sql, relation.clone(), true)
}

/// A lateral `generate_series(start, stop[, step])` numbered by a second series
/// beside it, `(generate_series(...) - start) / step + 1`, the two unnested side
/// by side (a series of timestamps has no such number: the engine refuses it).
fn numbered_series(
    call: &sqlparser::ast::Function,
    args: &[FunctionArg],
    alias: &Ident,
    relation: &Ident,
    ordinality: &Ident,
) -> Option<TableFactor> {
    let (start, step) = match args {
        [FunctionArg::Unnamed(FunctionArgExpr::Expr(start)), _] => (start.to_string(), "1".into()),
        [
            FunctionArg::Unnamed(FunctionArgExpr::Expr(start)),
            _,
            FunctionArg::Unnamed(FunctionArgExpr::Expr(step)),
        ] => (start.to_string(), step.to_string()),
        _ => return None,
    };
    let sql = format!(
        "SELECT {call} AS {}, CAST(({call} - ({start})) / ({step}) + 1 AS bigint) AS {}",
        quoted(alias),
        quoted(ordinality)
    );
    derived(&sql, relation.clone(), true)
}

/// The alias of a call numbered [`with_ordinality`] inside its derived table.
const ORDINALITY_ALIAS: &str = "\u{E002}ordinality";

/// `FROM unnest(array) [AS alias [(column)]]` as DataFusion's `UNNEST`
/// table factor, its column named as Postgres names it (after the alias, or
/// `unnest`). DataFusion has no `unnest` table function, and its `UNNEST`
/// plans the argument against the outer query, so a column of an outer
/// relation (`array(SELECT ... FROM unnest(tc.reloptions) x)`, psql's `\d+`)
/// is a correlation the subquery runner supplies.
fn unnest_table(
    args: &sqlparser::ast::TableFunctionArgs,
    alias: Option<&TableAlias>,
    lateral: bool,
) -> Option<TableFactor> {
    let [FunctionArg::Unnamed(FunctionArgExpr::Expr(array))] = args.args.as_slice() else {
        return None;
    };
    let relation = alias
        .map(|a| a.name.clone())
        .unwrap_or_else(|| Ident::new(UNNEST));
    let column = alias
        .and_then(|a| a.columns.first().cloned())
        .unwrap_or_else(|| sqlparser::ast::TableAliasColumnDef {
            name: relation.clone(),
            data_type: None,
        });
    // An array of a preceding relation's columns: the select list's unnest of a
    // lateral derived table.
    if lateral && references_columns(array) {
        let sql = format!("SELECT {UNNEST}({array}) AS {}", quoted(&column.name));
        return derived(&sql, relation, true);
    }
    Some(TableFactor::UNNEST {
        alias: Some(TableAlias {
            explicit: true,
            name: relation,
            columns: vec![column],
            at: None,
        }),
        array_exprs: vec![array.clone()],
        with_offset: false,
        with_offset_alias: None,
        with_ordinality: false,
    })
}

/// Names the column of the parser's `UNNEST(array) [AS alias]` as Postgres
/// does (DataFusion names it after the call's text); `None` when it is named
/// already or unnests several arrays.
fn name_unnest_column(
    factor: &TableFactor,
    alias: Option<&TableAlias>,
    array_exprs: &[Expr],
) -> Option<TableFactor> {
    if array_exprs.len() != 1 || alias.is_some_and(|a| !a.columns.is_empty()) {
        return None;
    }
    let relation = alias
        .map(|a| a.name.clone())
        .unwrap_or_else(|| Ident::new(UNNEST));
    let mut named = factor.clone();
    if let TableFactor::UNNEST { alias, .. } = &mut named {
        *alias = Some(TableAlias {
            explicit: true,
            name: relation.clone(),
            columns: vec![sqlparser::ast::TableAliasColumnDef {
                name: relation,
                data_type: None,
            }],
            at: None,
        });
    }
    Some(named)
}

/// Unnests the set-returning calls of a select list, so that each value is a
/// row.
pub fn unnest_select_items(items: &mut [SelectItem]) {
    for item in items {
        let expr = match item {
            SelectItem::UnnamedExpr(expr) | SelectItem::ExprWithAlias { expr, .. } => expr,
            _ => continue,
        };
        unnest_calls(expr);
    }
}

/// Each set-returning call in `expr` (`generate_series(...)::date`), outside its
/// subqueries (their select lists are their own), unnested.
fn unnest_calls(expr: &mut Expr) {
    crate::scope::rewrite_own_expressions(expr, unnest_call);
}

/// A set-returning call as the unnested list of its values.
fn unnest_call(expr: &mut Expr) {
    {
        let Expr::Function(function) = expr else {
            return;
        };
        let Some(name) = single_unquoted(&function.name) else {
            return;
        };
        if function.over.is_some() {
            return;
        }
        // The unnested items of `list` called with the call's arguments.
        let items = |list: &str| {
            let mut call = function.clone();
            call.name = ObjectName::from(vec![Ident::new(list)]);
            typed_items(
                list,
                crate::rewrite::function_call(UNNEST, vec![Expr::Function(call)]),
            )
        };
        if let Some((_, list, _)) = LIST_FUNCTIONS.iter().find(|f| f.0 == name) {
            *expr = items(list);
            return;
        }
        // `jsonb_each(x)` in a select list: a record of each key and value
        // (the two lists unnest in step).
        if let Some((_, keys, values)) = KEY_VALUE_FUNCTIONS.iter().find(|f| f.0 == name) {
            *expr = crate::rewrite::function_call("row", vec![items(keys), items(values)]);
            return;
        }
        if name != GENERATE_SERIES {
            return;
        }
        let int4 = match &function.args {
            FunctionArguments::List(list) => all_int4(
                &list
                    .args
                    .iter()
                    .filter_map(|arg| match arg {
                        FunctionArg::Unnamed(FunctionArgExpr::Expr(expr)) => Some(expr),
                        _ => None,
                    })
                    .collect::<Vec<_>>(),
            ),
            _ => false,
        };
        let unnested = crate::rewrite::function_call("unnest", vec![expr.clone()]);
        *expr = if int4 {
            Expr::Cast {
                kind: sqlparser::ast::CastKind::Cast,
                expr: Box::new(unnested),
                data_type: sqlparser::ast::DataType::Integer(None),
                array: false,
                format: None,
            }
        } else {
            unnested
        };
    }
}

/// `_pg_expandarray(array)` anywhere in an expression produces a row per element:
/// the function returns a list of records, unnested here (Postgres expands
/// set-returning calls in the select list; two of them in one list run in step).
pub fn unnest_record_function(expr: &mut Expr) {
    let Expr::Function(function) = expr else {
        return;
    };
    let name = match function.name.0.as_slice() {
        [part] => part.as_ident().map(normalize),
        _ => None,
    };
    if function.over.is_some() || name.as_deref() != Some(crate::functions::EXPAND_ARRAY) {
        return;
    }
    *expr = crate::rewrite::function_call(UNNEST, vec![expr.clone()]);
}

/// Whether every argument is an integer literal that fits `integer` (what
/// makes Postgres pick its `integer` variant).
fn all_int4(args: &[&Expr]) -> bool {
    !args.is_empty() && args.iter().all(|arg| int4_literal(arg))
}

/// An integer written as a literal (of any size), perhaps negated.
fn integer_literal(expr: &Expr) -> bool {
    literal_digits(expr).is_some_and(|digits| digits.parse::<i64>().is_ok())
}

fn int4_literal(expr: &Expr) -> bool {
    literal_digits(expr).is_some_and(|digits| digits.parse::<i32>().is_ok())
}

/// The digits of a number literal, perhaps negated or in parentheses (the sign
/// left out).
fn literal_digits(expr: &Expr) -> Option<&str> {
    match expr {
        Expr::Value(value) => match &value.value {
            sqlparser::ast::Value::Number(digits, _) => Some(digits),
            _ => None,
        },
        Expr::UnaryOp {
            op: sqlparser::ast::UnaryOperator::Minus,
            expr,
        }
        | Expr::Nested(expr) => literal_digits(expr),
        _ => None,
    }
}

/// The function name when it is one unquoted identifier, normalized.
fn single_unquoted(name: &ObjectName) -> Option<String> {
    match name.0.as_slice() {
        [part] => {
            let ident = part.as_ident()?;
            ident.quote_style.is_none().then(|| normalize(ident))
        }
        _ => None,
    }
}

pub(crate) fn quoted(ident: &Ident) -> String {
    format!("\"{}\"", normalize(ident).replace('"', "\"\""))
}

/// A query from its text (`None` if it does not parse): how rewrites build the
/// queries they write out as SQL.
pub fn parse_query(sql: &str) -> Option<Query> {
    let mut parser = Parser::new(&PostgreSqlDialect {}).try_with_sql(sql).ok()?;
    parser.parse_query().ok().map(|q| *q)
}
