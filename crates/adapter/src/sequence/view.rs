//! CREATE [OR REPLACE] [MATERIALIZED] VIEW.

use floe_catalog::{NewItem, Op};
use floe_sql::view::CreateViewPlan;

use super::command;
use crate::coordinator::{Coordinator, ExecuteResponse};
use crate::error::AdapterError;
use crate::query;
use crate::views::{compute_error, relation_desc};

impl Coordinator {
    /// The query engine plans the query (its shape is the view's); a materialized
    /// view's plan must also lower to a dataflow, so what cannot be maintained is
    /// refused here. The diff then creates the view's log and starts its dataflow.
    pub(super) async fn sequence_create_view(
        &self,
        plan: CreateViewPlan,
    ) -> Result<ExecuteResponse, AdapterError> {
        let engine = self.engine_for(&plan.query).await?;
        let logical = query::logical_plan(&engine, (*plan.query).clone()).await?;
        let desc = relation_desc(&logical.plan)?;
        if plan.materialized {
            floe_compute::compile(&logical.plan, &engine.state()).map_err(compute_error)?;
            crate::views::refuse_unencodable_inputs(&logical.plan)?;
            // The dataflow plans the stored text again (on every start too): a
            // text that does not read back is refused before it is stored.
            if floe_sql_parser::parser::parse_statement(&plan.definition).is_err() {
                return Err(AdapterError::Internal(format!(
                    "the query of {} does not read back as SQL: {}",
                    plan.name, plan.definition
                )));
            }
        }
        let mut catalog = self.catalog.lock().await;
        let id = catalog.reserve_item_ids(1)?[0];
        let mut ops = Vec::new();
        ops.extend(plan.replaces.map(Op::DropItem));
        ops.push(Op::CreateItem(NewItem {
            id,
            name: plan.name.clone(),
            definition: plan.definition(desc),
            create_sql: plan.create_sql.clone(),
            secrets: Vec::new(),
        }));
        self.catalog_transact(&mut catalog, ops)?;
        command(plan.tag())
    }
}
