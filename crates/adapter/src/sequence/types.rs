//! CREATE TYPE.

use floe_sql::catalog::ItemDefinition;
use floe_sql::types::CreateTypePlan;
use tracing::info;

use super::command;
use crate::coordinator::{Coordinator, ExecuteResponse};
use crate::error::AdapterError;

impl Coordinator {
    /// A named type is a catalog item alone: queries read it from the
    /// catalog (`query::session_context`), nothing runs for it.
    pub(super) async fn sequence_create_type(
        &self,
        plan: CreateTypePlan,
    ) -> Result<ExecuteResponse, AdapterError> {
        let mut catalog = self.catalog.lock().await;
        let id = self.create_item(
            &mut catalog,
            plan.name,
            ItemDefinition::Type(plan.definition),
            plan.create_sql,
            Vec::new(),
        )?;
        info!(%id, "created type");
        command("CREATE TYPE")
    }
}
