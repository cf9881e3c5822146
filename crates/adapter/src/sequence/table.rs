//! CREATE TABLE.

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
        self.create_item(
            &mut catalog,
            plan.name,
            ItemDefinition::Table(plan.definition),
            plan.create_sql,
            Vec::new(),
        )?;
        command("CREATE TABLE")
    }
}
