//! CREATE [UNIQUE | DEFAULT] INDEX.

use floe_sql::catalog::{PlanCatalog, QualifiedName};
use floe_sql::index::{CreateIndexPlan, TAG};
use floe_storage::UniqueIndex;

use super::command;
use crate::coordinator::{Coordinator, ExecuteResponse};
use crate::error::AdapterError;
use crate::implications::{off_worker, storage_unique_indexes};
use crate::tables::unique_violation;

impl Coordinator {
    /// A unique index is counted over its table's rows and takes effect in storage
    /// before the catalog holds it, under the catalog lock: a write committed after
    /// this statement answers is checked against it, and rows that break it refuse
    /// the statement. An index that is not unique changes nothing outside the
    /// catalog.
    pub(super) async fn sequence_create_index(
        &self,
        plan: CreateIndexPlan,
    ) -> Result<ExecuteResponse, AdapterError> {
        let mut catalog = self.catalog.lock().await;
        let table = plan.definition.on;
        let before = storage_unique_indexes(catalog.state(), table);
        if plan.definition.unique {
            let mut after = before.clone();
            after.push(UniqueIndex {
                name: plan.name.item.clone(),
                columns: plan.definition.key.clone(),
            });
            after.sort_by(|a, b| a.name.cmp(&b.name));
            let set = off_worker(|| self.storage.set_unique_indexes(table, after))?;
            if let Err(refused) = set {
                return Err(could_not_create(
                    &plan.name,
                    catalog.state(),
                    table,
                    refused,
                ));
            }
        }
        let created = self.create_item(
            &mut catalog,
            plan.name.clone(),
            floe_sql::catalog::ItemDefinition::Index(plan.definition.clone()),
            plan.create_sql.clone(),
            Vec::new(),
        );
        if created.is_err()
            && plan.definition.unique
            && catalog.state().item_by_name(&plan.name).is_none()
        {
            // The catalog refused the index: storage forgets it again.
            off_worker(|| self.storage.set_unique_indexes(table, before))?.ok();
        }
        created?;
        command(TAG)
    }
}

/// PostgreSQL's error for a unique index its table's rows break.
fn could_not_create(
    name: &QualifiedName,
    catalog: &dyn PlanCatalog,
    table: floe_repr::GlobalId,
    refused: floe_storage::AppendError,
) -> AdapterError {
    let desc = catalog
        .item(table)
        .and_then(|item| item.definition.relation_desc())
        .cloned()
        .unwrap_or_default();
    match unique_violation(&desc, refused) {
        Some((columns, values)) => AdapterError::UniqueViolation {
            message: format!("could not create unique index \"{}\"", name.item),
            detail: format!("Key ({columns})=({values}) is duplicated."),
        },
        None => AdapterError::Internal(format!("creating the unique index {name} failed")),
    }
}
