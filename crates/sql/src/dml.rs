//! INSERT, UPDATE and DELETE: planned as queries the engine runs (the rows to
//! write or the rows to change) plus what to do with their output.

use floe_repr::{GlobalId, RelationDesc, SqlState};
use sqlparser::ast::{
    AssignmentTarget, Delete, Expr, FromTable, Insert, SelectItem, SetExpr, Statement, TableFactor,
    TableObject, Update, Value,
};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

use crate::catalog::{ItemDefinition, PlanCatalog, QualifiedName};
use crate::error::PlanError;
use crate::plan::Plan;
use crate::planner::{normalize_ident, quote_ident, resolve_relations};

/// `INSERT INTO t [(columns)] { VALUES ... | SELECT ... } [RETURNING ...]`
#[derive(Debug, Clone, PartialEq)]
pub struct InsertPlan {
    pub table: GlobalId,
    pub name: QualifiedName,
    pub desc: RelationDesc,
    /// For each output column of `source`, the table column it fills.
    pub columns: Vec<usize>,
    /// Whether the statement names its target columns. Without a list, a source with
    /// fewer columns than the table fills the first ones (the others take their
    /// defaults), as PostgreSQL does.
    pub columns_named: bool,
    /// The query producing the rows.
    pub source: Box<Statement>,
    /// Default expressions (SQL text) per table column.
    pub defaults: Vec<Option<String>>,
    pub returning: Option<Vec<SelectItem>>,
}

/// `UPDATE t SET ... [WHERE ...] [RETURNING ...]`
#[derive(Debug, Clone, PartialEq)]
pub struct UpdatePlan {
    pub table: GlobalId,
    pub name: QualifiedName,
    pub desc: RelationDesc,
    /// The assigned columns, in the order of the extra output columns of
    /// `query`.
    pub assigned: Vec<usize>,
    /// `SELECT <every column>, <every assigned value> FROM t WHERE ...`.
    pub query: Box<Statement>,
    pub returning: Option<Vec<SelectItem>>,
}

/// `DELETE FROM t [WHERE ...] [RETURNING ...]`
#[derive(Debug, Clone, PartialEq)]
pub struct DeletePlan {
    pub table: GlobalId,
    pub name: QualifiedName,
    pub desc: RelationDesc,
    /// `SELECT <every column> FROM t WHERE ...`.
    pub query: Box<Statement>,
    pub returning: Option<Vec<SelectItem>>,
}

pub(crate) fn parse_query(sql: &str) -> Result<Statement, PlanError> {
    Parser::new(&PostgreSqlDialect {})
        .try_with_sql(sql)
        .and_then(|mut parser| parser.parse_statement())
        .map_err(|e| PlanError::syntax(e.to_string()))
}

/// Resolves the target of a write: a user table.
fn write_target<'a>(
    catalog: &'a dyn PlanCatalog,
    name: &sqlparser::ast::ObjectName,
) -> Result<
    (
        &'a crate::catalog::CatalogItem,
        RelationDesc,
        Vec<Option<String>>,
    ),
    PlanError,
> {
    let parts = crate::planner::identifier_parts(name);
    let Some(qualified) = crate::planner::qualify_parts(catalog, &parts) else {
        return Err(PlanError::syntax(format!("improper relation name {name}")));
    };
    if let [schema, item] | [_, schema, item] = parts.as_slice()
        && catalog.is_system_relation(schema, item)
    {
        return Err(PlanError::new(
            SqlState::INSUFFICIENT_PRIVILEGE,
            format!("cannot modify system relation {schema}.{item}"),
        ));
    }
    let Some(item) = catalog.item_by_name(&qualified) else {
        if let [item] = parts.as_slice()
            && crate::catalog::SYSTEM_SCHEMAS
                .iter()
                .any(|schema| catalog.is_system_relation(schema, item))
        {
            return Err(PlanError::new(
                SqlState::INSUFFICIENT_PRIVILEGE,
                format!("cannot modify system relation {item}"),
            ));
        }
        return Err(PlanError::new(
            SqlState::UNDEFINED_TABLE,
            format!("unknown catalog item '{}'", parts.join(".")),
        ));
    };
    match &item.definition {
        ItemDefinition::Table(table) => Ok((item, table.desc.clone(), table.defaults.clone())),
        other => Err(PlanError::new(
            SqlState::WRONG_OBJECT_TYPE,
            format!(
                "cannot insert into, update or delete from {} \"{}\": only tables accept writes",
                other.kind().human_name(),
                item.name
            ),
        )),
    }
}

/// The table columns a write names (all of them, in order, when it names
/// none): each must exist, and at most once.
fn target_columns(
    table: &QualifiedName,
    desc: &RelationDesc,
    names: &[String],
) -> Result<Vec<usize>, PlanError> {
    if names.is_empty() {
        return Ok((0..desc.columns.len()).collect());
    }
    let mut columns = Vec::with_capacity(names.len());
    for name in names {
        let Some(index) = desc.column_index(name) else {
            return Err(PlanError::new(
                SqlState::UNDEFINED_COLUMN,
                format!(
                    "column \"{name}\" of relation \"{}\" does not exist",
                    table.item
                ),
            ));
        };
        if columns.contains(&index) {
            return Err(PlanError::new(
                SqlState::DUPLICATE_COLUMN,
                format!("column \"{name}\" specified more than once"),
            ));
        }
        columns.push(index);
    }
    Ok(columns)
}

fn column_list(desc: &RelationDesc) -> String {
    desc.columns
        .iter()
        .map(|(name, _)| quote_ident(name))
        .collect::<Vec<_>>()
        .join(", ")
}

fn table_reference(name: &QualifiedName) -> String {
    format!("{}.{}", quote_ident(&name.schema), quote_ident(&name.item))
}

pub(crate) fn plan_insert(catalog: &dyn PlanCatalog, insert: Insert) -> Result<Plan, PlanError> {
    let TableObject::TableName(table_name) = &insert.table else {
        return Err(PlanError::unsupported(
            "INSERT INTO a table function is not supported",
        ));
    };
    if insert.on.is_some() {
        return Err(PlanError::unsupported(
            "INSERT ... ON CONFLICT is not supported",
        ));
    }
    let (item, desc, defaults) = write_target(catalog, table_name)?;
    let names: Vec<String> = insert
        .columns
        .iter()
        .map(|column| {
            column
                .0
                .last()
                .and_then(|p| p.as_ident())
                .map(normalize_ident)
                .unwrap_or_default()
        })
        .collect();
    let columns = target_columns(&item.name, &desc, &names)?;
    let Some(source) = insert.source else {
        return Err(PlanError::unsupported(
            "INSERT without VALUES or a query is not supported",
        ));
    };
    let mut source = resolve_relations(catalog, Statement::Query(source))?;
    type_nested_literals(&mut source, &desc, &columns);
    Ok(Plan::Insert(InsertPlan {
        table: item.id,
        name: item.name.clone(),
        desc,
        columns_named: !names.is_empty(),
        columns,
        source: Box::new(source),
        defaults,
        returning: insert.returning,
    }))
}

/// A VALUES source's quoted literals and NULLs bound for a column of a list,
/// map, record or array type, cast to that type: the source runs as a query
/// of its own, whose rows must be of one type per column, and `LIST[...]` in
/// one row and `'{...}'` in another would not be (the text's cast is the one
/// the assignment would make, and these types have no modifier for an
/// explicit cast to cut where the assignment refuses).
fn type_nested_literals(source: &mut Statement, desc: &RelationDesc, columns: &[usize]) {
    use floe_repr::SqlScalarType as S;
    let Statement::Query(query) = source else {
        return;
    };
    let SetExpr::Values(values) = query.body.as_mut() else {
        return;
    };
    if values.rows.len() < 2 {
        return;
    }
    for row in &mut values.rows {
        for (cell, column) in row.content.iter_mut().zip(columns) {
            let Some((_, column_type)) = desc.columns.get(*column) else {
                continue;
            };
            let nested = matches!(
                column_type.scalar_type,
                S::List { .. } | S::Map { .. } | S::Record { .. } | S::Array { .. }
            );
            let literal = matches!(
                cell,
                Expr::Value(value) if matches!(value.value, Value::SingleQuotedString(_) | Value::Null)
            );
            if nested && literal {
                *cell = Expr::Cast {
                    kind: sqlparser::ast::CastKind::Cast,
                    expr: Box::new(cell.clone()),
                    data_type: crate::types::spelled(&column_type.scalar_type),
                    array: false,
                    format: None,
                };
            }
        }
    }
}

fn table_factor_alias(factor: &TableFactor) -> Option<String> {
    match factor {
        TableFactor::Table {
            alias: Some(alias), ..
        } => Some(alias.name.to_string()),
        _ => None,
    }
}

pub(crate) fn plan_update(catalog: &dyn PlanCatalog, update: Update) -> Result<Plan, PlanError> {
    if update.from.is_some() || !update.table.joins.is_empty() {
        return Err(PlanError::unsupported("UPDATE ... FROM is not supported"));
    }
    let TableFactor::Table { name, .. } = &update.table.relation else {
        return Err(PlanError::unsupported(
            "UPDATE of this relation is not supported",
        ));
    };
    let (item, desc, _) = write_target(catalog, name)?;
    let mut assigned = Vec::new();
    let mut values: Vec<&Expr> = Vec::new();
    for assignment in &update.assignments {
        let AssignmentTarget::ColumnName(column) = &assignment.target else {
            return Err(PlanError::unsupported(
                "UPDATE of column tuples is not supported",
            ));
        };
        let column_name = column
            .0
            .last()
            .and_then(|p| p.as_ident())
            .map(normalize_ident)
            .unwrap_or_default();
        let Some(index) = desc.column_index(&column_name) else {
            return Err(PlanError::new(
                SqlState::UNDEFINED_COLUMN,
                format!(
                    "column \"{column_name}\" of relation \"{}\" does not exist",
                    item.name.item
                ),
            ));
        };
        if assigned.contains(&index) {
            return Err(PlanError::new(
                SqlState::SYNTAX_ERROR,
                format!("multiple assignments to same column \"{column_name}\""),
            ));
        }
        assigned.push(index);
        values.push(&assignment.value);
    }
    let alias = table_factor_alias(&update.table.relation)
        .map(|a| format!(" AS {a}"))
        .unwrap_or_default();
    let mut sql = format!("SELECT {}", column_list(&desc));
    for (i, value) in values.iter().enumerate() {
        sql.push_str(&format!(", ({value}) AS \"__floe_new_{i}\""));
    }
    sql.push_str(&format!(" FROM {}{alias}", table_reference(&item.name)));
    if let Some(selection) = &update.selection {
        sql.push_str(&format!(" WHERE {selection}"));
    }
    let query = resolve_relations(catalog, parse_query(&sql)?)?;
    Ok(Plan::Update(UpdatePlan {
        table: item.id,
        name: item.name.clone(),
        desc,
        assigned,
        query: Box::new(query),
        returning: update.returning,
    }))
}

pub(crate) fn plan_delete(catalog: &dyn PlanCatalog, delete: Delete) -> Result<Plan, PlanError> {
    if delete.using.is_some() {
        return Err(PlanError::unsupported("DELETE ... USING is not supported"));
    }
    let tables = match &delete.from {
        FromTable::WithFromKeyword(tables) | FromTable::WithoutKeyword(tables) => tables,
    };
    let [table] = tables.as_slice() else {
        return Err(PlanError::unsupported(
            "DELETE from several tables is not supported",
        ));
    };
    let TableFactor::Table { name, .. } = &table.relation else {
        return Err(PlanError::unsupported(
            "DELETE from this relation is not supported",
        ));
    };
    let (item, desc, _) = write_target(catalog, name)?;
    let alias = table_factor_alias(&table.relation)
        .map(|a| format!(" AS {a}"))
        .unwrap_or_default();
    let mut sql = format!(
        "SELECT {} FROM {}{alias}",
        column_list(&desc),
        table_reference(&item.name)
    );
    if let Some(selection) = &delete.selection {
        sql.push_str(&format!(" WHERE {selection}"));
    }
    let query = resolve_relations(catalog, parse_query(&sql)?)?;
    Ok(Plan::Delete(DeletePlan {
        table: item.id,
        name: item.name.clone(),
        desc,
        query: Box::new(query),
        returning: delete.returning,
    }))
}

/// The query computing `RETURNING` items over the written rows, which the
/// engine serves as the table itself.
pub fn returning_query(name: &QualifiedName, items: &[SelectItem]) -> Result<Statement, PlanError> {
    let items: Vec<String> = items.iter().map(|i| i.to_string()).collect();
    let sql = format!("SELECT {} FROM {}", items.join(", "), table_reference(name));
    parse_query(&sql)
}

/// The text formats `COPY ... FROM STDIN` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyFormat {
    /// Postgres' text format: tab-separated, `\N` for NULL, backslash escapes.
    Text,
    /// CSV: comma-separated, quoted fields, empty unquoted field is NULL.
    Csv,
}

/// `COPY t [(columns)] FROM STDIN [WITH (FORMAT ..., DELIMITER ..., NULL ..., HEADER)]`
#[derive(Debug, Clone, PartialEq)]
pub struct CopyFromPlan {
    pub table: GlobalId,
    pub name: QualifiedName,
    pub desc: RelationDesc,
    /// The table column each field fills, in order.
    pub columns: Vec<usize>,
    pub defaults: Vec<Option<String>>,
    pub format: CopyFormat,
    pub delimiter: char,
    /// The text that means NULL.
    pub null: String,
    /// Whether the first line is a header to skip (CSV).
    pub header: bool,
}

/// `COPY (SELECT ...) TO STDOUT` / `COPY t [(columns)] TO STDOUT`, with the
/// options of COPY FROM.
#[derive(Debug, Clone, PartialEq)]
pub struct CopyToPlan {
    /// The query whose rows are sent.
    pub query: Box<Statement>,
    pub options: CopyOptions,
}

/// How COPY writes or reads rows as text.
#[derive(Debug, Clone, PartialEq)]
pub struct CopyOptions {
    pub format: CopyFormat,
    pub delimiter: char,
    /// The text that means NULL.
    pub null: String,
    /// Whether the first line is a header (CSV).
    pub header: bool,
}

pub(crate) fn plan_copy(
    catalog: &dyn PlanCatalog,
    statement: Statement,
) -> Result<Plan, PlanError> {
    use sqlparser::ast::{CopySource, CopyTarget};
    let Statement::Copy {
        source,
        to,
        target,
        options,
        legacy_options,
        values,
    } = statement
    else {
        return Err(PlanError::syntax("expected COPY"));
    };
    let options = copy_options(options, legacy_options)?;
    if to {
        if !matches!(target, CopyTarget::Stdout) {
            return Err(PlanError::unsupported("COPY TO supports only STDOUT"));
        }
        return plan_copy_to(catalog, source, options);
    }
    if !matches!(target, CopyTarget::Stdin) {
        return Err(PlanError::unsupported("COPY FROM supports only STDIN"));
    }
    if !values.is_empty() {
        return Err(PlanError::unsupported(
            "COPY with inline data is not supported: send the rows over the COPY protocol",
        ));
    }
    let CopySource::Table {
        table_name,
        columns,
    } = source
    else {
        return Err(PlanError::unsupported(
            "COPY FROM into a query is not supported",
        ));
    };
    let (item, desc, defaults) = write_target(catalog, &table_name)?;
    let names: Vec<String> = columns.iter().map(normalize_ident).collect();
    let columns = target_columns(&item.name, &desc, &names)?;
    Ok(Plan::CopyFrom(CopyFromPlan {
        table: item.id,
        name: item.name.clone(),
        desc,
        columns,
        defaults,
        format: options.format,
        delimiter: options.delimiter,
        null: options.null,
        header: options.header,
    }))
}

/// COPY TO: the query, or the table's (named) columns, planned as a SELECT.
fn plan_copy_to(
    catalog: &dyn PlanCatalog,
    source: sqlparser::ast::CopySource,
    options: CopyOptions,
) -> Result<Plan, PlanError> {
    let query = match source {
        sqlparser::ast::CopySource::Query(query) => Statement::Query(query),
        sqlparser::ast::CopySource::Table {
            table_name,
            columns,
        } => {
            let columns: Vec<String> = columns.iter().map(ToString::to_string).collect();
            let projection = if columns.is_empty() {
                "*".to_string()
            } else {
                columns.join(", ")
            };
            parse_query(&format!("SELECT {projection} FROM {table_name}"))?
        }
    };
    // floe-query names the output columns as Postgres does.
    let query = resolve_relations(catalog, query)?;
    Ok(Plan::CopyTo(CopyToPlan {
        query: Box::new(query),
        options,
    }))
}

/// The options of COPY, in the current and the legacy syntax.
fn copy_options(
    options: Vec<sqlparser::ast::CopyOption>,
    legacy_options: Vec<sqlparser::ast::CopyLegacyOption>,
) -> Result<CopyOptions, PlanError> {
    use sqlparser::ast::{CopyLegacyCsvOption, CopyLegacyOption, CopyOption};
    let unsupported = |option: &dyn std::fmt::Display| {
        PlanError::unsupported(format!("COPY option {option} is not supported"))
    };
    let mut format = CopyFormat::Text;
    let mut delimiter = None;
    let mut null = None;
    let mut header = false;
    for option in options {
        match option {
            CopyOption::Format(name) => {
                format = match name.value.to_lowercase().as_str() {
                    "text" => CopyFormat::Text,
                    "csv" => CopyFormat::Csv,
                    other => {
                        return Err(PlanError::unsupported(format!(
                            "COPY format \"{other}\" is not supported"
                        )));
                    }
                }
            }
            CopyOption::Delimiter(c) => delimiter = Some(c),
            CopyOption::Null(text) => null = Some(text),
            CopyOption::Header(h) => header = h,
            other => return Err(unsupported(&other)),
        }
    }
    for option in legacy_options {
        match option {
            CopyLegacyOption::Csv(csv_options) => {
                format = CopyFormat::Csv;
                for csv_option in csv_options {
                    match csv_option {
                        CopyLegacyCsvOption::Header => header = true,
                        other => return Err(unsupported(&other)),
                    }
                }
            }
            CopyLegacyOption::Delimiter(c) => delimiter = Some(c),
            CopyLegacyOption::Null(text) => null = Some(text),
            other => return Err(unsupported(&other)),
        }
    }
    if header && format == CopyFormat::Text {
        return Err(PlanError::unsupported(
            "COPY HEADER available only in CSV mode",
        ));
    }
    Ok(CopyOptions {
        format,
        delimiter: delimiter.unwrap_or(match format {
            CopyFormat::Text => '\t',
            CopyFormat::Csv => ',',
        }),
        null: null.unwrap_or_else(|| match format {
            CopyFormat::Text => "\\N".to_string(),
            CopyFormat::Csv => String::new(),
        }),
        header,
    })
}
