//! `COPY (SUBSCRIBE name ...) TO STDOUT`: a relation's contents, then its changes.

use floe_repr::{GlobalId, RelationDesc, SqlState};
use floe_sql_parser::ast::SubscribeStatement;

use crate::catalog::{ItemDefinition, PlanCatalog, QualifiedName};
use crate::error::PlanError;
use crate::plan::Plan;
use crate::planner::resolve_item;

/// What a SUBSCRIBE reads and how it reports.
#[derive(Debug, Clone, PartialEq)]
pub struct SubscribePlan {
    /// The relation: a table, a source or a materialized view (its change log).
    pub id: GlobalId,
    pub name: QualifiedName,
    pub desc: RelationDesc,
    /// Whether the contents as of the start come first.
    pub snapshot: bool,
    /// Whether progress rows are sent.
    pub progress: bool,
}

pub(crate) fn plan_subscribe(
    catalog: &dyn PlanCatalog,
    statement: SubscribeStatement,
) -> Result<Plan, PlanError> {
    let item = resolve_item(catalog, &statement.name)?;
    if let ItemDefinition::View(_) = item.definition {
        return Err(PlanError::unsupported(format!(
            "SUBSCRIBE to view \"{}\" is not supported; create a materialized view and subscribe to it",
            item.name
        )));
    }
    let Some(desc) = item.definition.desc() else {
        return Err(PlanError::new(
            SqlState::WRONG_OBJECT_TYPE,
            format!(
                "\"{}\" is not a table, source or materialized view",
                item.name
            ),
        ));
    };
    Ok(Plan::Subscribe(SubscribePlan {
        id: item.id,
        name: item.name.clone(),
        desc: desc.clone(),
        snapshot: statement.snapshot,
        progress: statement.progress,
    }))
}
