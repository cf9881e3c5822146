//! SELECT, INSERT, UPDATE, DELETE, COPY FROM STDIN.

use floe_sql::dml::{CopyFromPlan, DeletePlan, InsertPlan, UpdatePlan};
use floe_sql::plan::SelectPlan;

use crate::coordinator::{Coordinator, ExecuteResponse};
use crate::error::AdapterError;
use crate::session::Session;
use crate::{query, tables};

impl Coordinator {
    pub(super) async fn sequence_select(
        &self,
        plan: SelectPlan,
    ) -> Result<ExecuteResponse, AdapterError> {
        let engine = self.engine_for(&plan.query).await?;
        let plan = query::logical_plan(&engine, *plan.query).await?;
        let (desc, rows) = query::execute(&engine, plan).await?;
        Ok(ExecuteResponse::Rows {
            desc,
            rows,
            tag: None,
        })
    }

    /// The rows arrive as `COPY` data; `copy_done` writes them.
    pub(super) fn sequence_copy_from(
        &self,
        session: &mut Session,
        plan: CopyFromPlan,
    ) -> Result<ExecuteResponse, AdapterError> {
        let columns = plan.columns.len();
        session.copy = Some(Box::new(crate::copy::CopyState::new(plan)));
        Ok(ExecuteResponse::CopyIn { columns })
    }

    /// Writes run under the write lock, so that a write reads what the
    /// previous one wrote.
    pub(super) async fn sequence_insert(
        &self,
        plan: InsertPlan,
    ) -> Result<ExecuteResponse, AdapterError> {
        let _write = self.write_lock.lock().await;
        let engine = self.engine_for(&plan.source).await?;
        tables::insert(&engine, &self.storage, plan).await
    }

    pub(super) async fn sequence_update(
        &self,
        plan: UpdatePlan,
    ) -> Result<ExecuteResponse, AdapterError> {
        let _write = self.write_lock.lock().await;
        let engine = self.engine_for(&plan.query).await?;
        tables::update(&engine, &self.storage, plan).await
    }

    pub(super) async fn sequence_delete(
        &self,
        plan: DeletePlan,
    ) -> Result<ExecuteResponse, AdapterError> {
        let _write = self.write_lock.lock().await;
        let engine = self.engine_for(&plan.query).await?;
        tables::delete(&engine, &self.storage, plan).await
    }
}
