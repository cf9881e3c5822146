//! CREATE TABLE.

use floe_catalog::{NewItem, Op};
use floe_sql::catalog::ItemDefinition;
use floe_sql::plan::CreateTablePlan;

use super::command;
use crate::coordinator::{Coordinator, ExecuteResponse};
use crate::error::AdapterError;

impl Coordinator {
    /// The catalog entry first; the diff then creates the table's log (and
    /// start-up creates it again if a crash came in between).
    pub(super) async fn sequence_create_table(
        &self,
        plan: CreateTablePlan,
    ) -> Result<ExecuteResponse, AdapterError> {
        let mut catalog = self.catalog.lock().await;
        let id = catalog.reserve_item_ids(1)?[0];
        self.catalog_transact(
            &mut catalog,
            vec![Op::CreateItem(NewItem {
                id,
                name: plan.name,
                definition: ItemDefinition::Table(plan.definition),
                create_sql: plan.create_sql,
                secrets: Vec::new(),
            })],
        )?;
        command("CREATE TABLE")
    }
}
