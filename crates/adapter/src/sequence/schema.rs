//! CREATE SCHEMA and COMMENT ON: catalog changes with no effect outside the
//! catalog (DROP SCHEMA is a DROP, `drop.rs`).

use floe_catalog::Op;
use floe_sql::plan::{CommentPlan, CreateSchemaPlan};

use super::command;
use crate::coordinator::{Coordinator, ExecuteResponse};
use crate::error::AdapterError;

impl Coordinator {
    pub(super) async fn sequence_create_schema(
        &self,
        plan: CreateSchemaPlan,
    ) -> Result<ExecuteResponse, AdapterError> {
        let mut catalog = self.catalog.lock().await;
        self.catalog_transact(&mut catalog, vec![Op::CreateSchema { name: plan.name }])?;
        command("CREATE SCHEMA")
    }

    pub(super) async fn sequence_comment(
        &self,
        plan: CommentPlan,
    ) -> Result<ExecuteResponse, AdapterError> {
        let mut catalog = self.catalog.lock().await;
        self.catalog_transact(
            &mut catalog,
            vec![Op::Comment {
                id: plan.id,
                column: plan.column,
                comment: plan.comment,
            }],
        )?;
        command("COMMENT")
    }
}
