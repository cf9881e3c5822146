//! `ALTER TABLE ... DROP CONSTRAINT`: drops a table's `UNIQUE` constraint, the
//! unique index that keeps it, and its clause from the table's `CREATE TABLE`.
//! A primary key stays (sinks and subscriptions are keyed by it).

use floe_repr::{GlobalId, SqlState};
use sqlparser::ast::{ColumnOption, Ident, TableConstraint};

use crate::alter_table::stored_create_table;
use crate::catalog::{CatalogItem, ItemDefinition, PlanCatalog};
use crate::error::PlanError;
use crate::plan::Plan;
use crate::planner::{PlanNotice, normalize_ident};

const TAG: &str = "ALTER TABLE";

/// The constraint's index to drop and the table's statement without it.
#[derive(Debug, Clone, PartialEq)]
pub struct DropConstraintPlan {
    pub table: GlobalId,
    pub index: GlobalId,
    /// The table's `CREATE TABLE` without the constraint.
    pub create_sql: String,
}

pub(crate) fn plan_drop_constraint(
    catalog: &dyn PlanCatalog,
    table: &CatalogItem,
    constraint: &str,
    if_exists: bool,
    notices: &mut Vec<PlanNotice>,
) -> Result<Plan, PlanError> {
    let index = catalog.dependents(table.id).into_iter().find(|id| {
        catalog.item(*id).is_some_and(|item| {
            item.name.item == constraint
                && matches!(&item.definition, ItemDefinition::Index(index) if index.constraint)
        })
    });
    let Some(index) = index else {
        if constraint == format!("{}_pkey", table.name.item) && has_primary_key(table) {
            return Err(PlanError::unsupported(
                "dropping a table's primary key is not supported",
            ));
        }
        let message = format!(
            "constraint \"{constraint}\" of relation \"{}\" does not exist",
            table.name.item
        );
        if if_exists {
            notices.push(PlanNotice {
                message: format!("{message}, skipping"),
                hint: None,
            });
            return Ok(Plan::NoOp { tag: TAG });
        }
        return Err(PlanError::new(SqlState::UNDEFINED_OBJECT, message));
    };
    let mut create = stored_create_table(&table.create_sql)?;
    let named =
        |name: &Option<Ident>| name.as_ref().map(normalize_ident).as_deref() == Some(constraint);
    for column in &mut create.columns {
        column.options.retain(|option| {
            !(matches!(option.option, ColumnOption::Unique(_)) && named(&option.name))
        });
    }
    create
        .constraints
        .retain(|clause| !matches!(clause, TableConstraint::Unique(unique) if named(&unique.name)));
    Ok(Plan::DropConstraint(DropConstraintPlan {
        table: table.id,
        index,
        create_sql: sqlparser::ast::Statement::CreateTable(create).to_string(),
    }))
}

fn has_primary_key(table: &CatalogItem) -> bool {
    table
        .definition
        .relation_desc()
        .is_some_and(|desc| desc.unique_keys.first().is_some_and(|key| !key.is_empty()))
}
