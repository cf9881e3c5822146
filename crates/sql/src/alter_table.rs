//! `ALTER TABLE ... ADD COLUMN`, as Materialize has it: one nullable column
//! without a default, appended. Rows already in the table read NULL in it.
//! (`ALTER TABLE ... DROP CONSTRAINT` is planned in `crate::constraint`.)
//!
//! Each added column is a new version of the table (its `version`); what read
//! the table before keeps reading the columns it saw: a view's or materialized
//! view's query reads the table at the version it was created with
//! ([`pin_table_versions`]), and a sink writes the columns its Iceberg table
//! was created with (`SinkDefinition::from_version`).

use std::ops::ControlFlow;

use floe_repr::{ColumnType, GlobalId, SqlState};
use sqlparser::ast::{
    AlterTable, AlterTableOperation, ColumnDef, ColumnOption, CreateTable, Ident, ObjectName,
    TableAlias, TableFactor, VisitorMut,
};

use crate::catalog::{CatalogItem, ItemDefinition, ItemKind, PlanCatalog};
use crate::error::PlanError;
use crate::plan::{AlterTableAddColumnPlan, Plan};
use crate::planner::{PlanNotice, find_for_alter, normalize_ident};

const TAG: &str = "ALTER TABLE";

/// The operations of ALTER TABLE floe has.
enum Operation<'a> {
    AddColumn {
        column_def: &'a ColumnDef,
        if_not_exists: bool,
    },
    DropConstraint {
        name: &'a Ident,
        if_exists: bool,
    },
}

pub(crate) fn plan_alter_table(
    catalog: &dyn PlanCatalog,
    alter: AlterTable,
    notices: &mut Vec<PlanNotice>,
) -> Result<Plan, PlanError> {
    let [operation] = alter.operations.as_slice() else {
        return Err(PlanError::unsupported(
            "ALTER TABLE with more than one operation is not supported",
        ));
    };
    // An operation floe lacks is refused whatever the table.
    let operation = match operation {
        AlterTableOperation::DropConstraint {
            if_exists, name, ..
        } => Operation::DropConstraint {
            name,
            if_exists: *if_exists,
        },
        AlterTableOperation::AddColumn {
            if_not_exists,
            column_def,
            column_position: None,
            ..
        } => Operation::AddColumn {
            column_def,
            if_not_exists: *if_not_exists,
        },
        other => {
            let text = other.to_string();
            let words: Vec<&str> = text.split_whitespace().take(2).collect();
            return Err(PlanError::unsupported(format!(
                "ALTER TABLE ... {} is not supported",
                words.join(" ").to_uppercase()
            )));
        }
    };
    let item = match find_for_alter(
        catalog,
        &alter.name,
        alter.if_exists,
        ItemKind::Table,
        TAG,
        notices,
    )? {
        Ok(item) => item,
        Err(no_op) => return Ok(no_op),
    };
    match operation {
        Operation::DropConstraint { name, if_exists } => crate::constraint::plan_drop_constraint(
            catalog,
            item,
            &normalize_ident(name),
            if_exists,
            notices,
        ),
        Operation::AddColumn {
            column_def,
            if_not_exists,
        } => plan_add_column(catalog, item, column_def, if_not_exists, notices),
    }
}

/// `ADD COLUMN`: the table's definition with the column appended.
fn plan_add_column(
    catalog: &dyn PlanCatalog,
    item: &CatalogItem,
    column_def: &ColumnDef,
    if_not_exists: bool,
    notices: &mut Vec<PlanNotice>,
) -> Result<Plan, PlanError> {
    let ItemDefinition::Table(table) = &item.definition else {
        return Err(PlanError::internal("table without a table definition"));
    };
    let column_name = normalize_ident(&column_def.name);
    if table
        .desc
        .columns
        .iter()
        .any(|(name, _)| name == &column_name)
    {
        let message = format!(
            "column \"{column_name}\" of relation \"{}\" already exists",
            item.name.item
        );
        if if_not_exists {
            notices.push(PlanNotice {
                message: format!("{message}, skipping"),
                hint: None,
            });
            return Ok(Plan::NoOp { tag: TAG });
        }
        return Err(PlanError::new(SqlState::DUPLICATE_COLUMN, message));
    }
    check_column_options(column_def)?;
    let (scalar_type, used) = crate::types::resolve_data_type(catalog, &column_def.data_type)?;
    let mut definition = table.clone();
    definition.types.extend(used);
    definition.types.sort();
    definition.types.dedup();
    definition.desc.columns.push((
        column_name,
        ColumnType {
            scalar_type,
            nullable: true,
        },
    ));
    definition.defaults.push(None);
    definition.version += 1;
    Ok(Plan::AlterTableAddColumn(AlterTableAddColumnPlan {
        id: item.id,
        definition,
        create_sql: create_sql_with(&item.create_sql, column_def)?,
    }))
}

/// Materialize adds a column as nullable, without a default and without
/// constraints: rows already there have no value to take.
fn check_column_options(column_def: &ColumnDef) -> Result<(), PlanError> {
    for option in &column_def.options {
        match &option.option {
            ColumnOption::Null => {}
            ColumnOption::NotNull | ColumnOption::PrimaryKey(_) => {
                return Err(PlanError::unsupported(format!(
                    "ALTER TABLE ... ADD COLUMN ... {} is not supported",
                    option.option
                ))
                .with_hint(
                    "An added column is nullable: the rows already in the table read NULL in it.",
                ));
            }
            other => {
                return Err(PlanError::unsupported(format!(
                    "ALTER TABLE ... ADD COLUMN ... {other} is not supported"
                )));
            }
        }
    }
    Ok(())
}

/// The table's `CREATE TABLE` with the column appended, as `SHOW CREATE
/// TABLE` shows it.
fn create_sql_with(create_sql: &str, column_def: &ColumnDef) -> Result<String, PlanError> {
    let mut create = stored_create_table(create_sql)?;
    create.columns.push(column_def.clone());
    Ok(sqlparser::ast::Statement::CreateTable(create).to_string())
}

/// A table's stored `CREATE TABLE`, parsed.
pub(crate) fn stored_create_table(create_sql: &str) -> Result<CreateTable, PlanError> {
    let stored = || PlanError::internal("the stored CREATE TABLE does not parse");
    let parsed = floe_sql_parser::parser::parse_statement(create_sql).map_err(|_| stored())?;
    let floe_sql_parser::ast::Statement::Standard(statement) = parsed else {
        return Err(stored());
    };
    let sqlparser::ast::Statement::CreateTable(create) = *statement else {
        return Err(stored());
    };
    Ok(create)
}

/// The table versions a new view, materialized view or sink reads, for
/// [`pin_table_versions`]: only those above 0 (a table never altered, or a
/// dependent stored before tables had versions, reads version 0).
pub(crate) fn table_versions(catalog: &dyn PlanCatalog, uses: &[GlobalId]) -> Vec<(GlobalId, u64)> {
    uses.iter()
        .filter_map(|id| match &catalog.item(*id)?.definition {
            ItemDefinition::Table(table) if table.version > 0 => Some((*id, table.version)),
            _ => None,
        })
        .collect()
}

/// Rewrites a stored query so that each table it reads at an older version
/// than the table's own is read through a subquery of the columns it had
/// then: `"public"."t"` becomes `(SELECT "a", "b" FROM "public"."t") AS "t"`.
/// A `SELECT *` view keeps its columns after `ADD COLUMN`.
pub fn pin_table_versions(
    catalog: &dyn PlanCatalog,
    statement: &mut sqlparser::ast::Statement,
    versions: &[(GlobalId, u64)],
) {
    struct Pinner<'a> {
        catalog: &'a dyn PlanCatalog,
        versions: &'a [(GlobalId, u64)],
    }
    impl VisitorMut for Pinner<'_> {
        type Break = ();
        // After the factor's children: the subquery put in its place is not
        // visited again.
        fn post_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
            let TableFactor::Table { name, alias, .. } = factor else {
                return ControlFlow::Continue(());
            };
            let Some(item) = crate::view::user_item(self.catalog, name) else {
                return ControlFlow::Continue(());
            };
            let ItemDefinition::Table(table) = &item.definition else {
                return ControlFlow::Continue(());
            };
            let version = self
                .versions
                .iter()
                .find(|(id, _)| *id == item.id)
                .map_or(0, |(_, version)| *version);
            let columns = table.columns_at(version);
            if columns >= table.desc.columns.len() {
                return ControlFlow::Continue(());
            }
            let names = table.desc.columns[..columns]
                .iter()
                .map(|(name, _)| name.as_str());
            let alias = alias.take().unwrap_or(TableAlias {
                explicit: true,
                name: Ident::with_quote('"', item.name.item.clone()),
                columns: Vec::new(),
                at: None,
            });
            if let Some(pinned) = projection_of(name, names, alias) {
                *factor = pinned;
            }
            ControlFlow::Continue(())
        }
    }
    let _ = sqlparser::ast::VisitMut::visit(statement, &mut Pinner { catalog, versions });
}

/// `(SELECT <columns> FROM <table>) AS <alias>`; `None` if it does not parse
/// (it always does: the names are quoted).
fn projection_of<'a>(
    table: &ObjectName,
    columns: impl Iterator<Item = &'a str>,
    alias: TableAlias,
) -> Option<TableFactor> {
    let columns: Vec<String> = columns
        .map(|column| format!("\"{}\"", column.replace('"', "\"\"")))
        .collect();
    let sql = format!("SELECT {} FROM {table}", columns.join(", "));
    let floe_sql_parser::ast::Statement::Standard(statement) =
        floe_sql_parser::parser::parse_statement(&sql).ok()?
    else {
        return None;
    };
    let sqlparser::ast::Statement::Query(subquery) = *statement else {
        return None;
    };
    Some(TableFactor::Derived {
        lateral: false,
        subquery,
        alias: Some(alias),
        sample: None,
    })
}
