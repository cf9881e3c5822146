//! SELECT, INSERT, UPDATE, DELETE, COPY FROM STDIN, COPY TO STDOUT.

use floe_sql::dml::{CopyFromPlan, CopyToPlan, InsertPlan};
use floe_sql::plan::SelectPlan;

use crate::coordinator::{Coordinator, ExecuteResponse};
use crate::error::AdapterError;
use crate::session::Session;
use crate::transaction::Access;
use crate::{query, tables};

impl Coordinator {
    pub(super) async fn sequence_select(
        &self,
        session: &mut Session,
        plan: SelectPlan,
    ) -> Result<ExecuteResponse, AdapterError> {
        self.await_materialized_views(&plan.query).await?;
        let engine = self.engine_for_query(session, &plan.query).await?;
        let (desc, rows) = match session.parameters.take() {
            Some(parameters) => {
                self.select_with_parameters(session, &engine, *plan.query, parameters)
                    .await?
            }
            None => query::run(&engine, &self.plans, *plan.query).await?,
        };
        Ok(ExecuteResponse::Rows {
            desc,
            rows,
            tag: None,
        })
    }

    /// A query with its `$n` read when its plan runs (one plan for every value), or,
    /// when it cannot be planned that way, the statement with the values bound.
    async fn select_with_parameters(
        &self,
        session: &mut Session,
        engine: &datafusion::execution::context::SessionContext,
        query: sqlparser::ast::Statement,
        parameters: crate::params::LateParameters,
    ) -> Result<query::Answer, AdapterError> {
        let crate::params::LateParameters {
            types,
            values,
            bound,
        } = parameters;
        if let Some(answer) =
            query::run_with_parameters(engine, &self.plans, query, &types, values).await?
        {
            return Ok(answer);
        }
        // Its notices were given when the statement with parameters was planned.
        let mut notices = Vec::new();
        match self
            .plan_checked(session, bound.statement()?, &mut notices)
            .await?
        {
            (floe_sql::plan::Plan::Select(select), _) => {
                query::run(engine, &self.plans, *select.query).await
            }
            _ => Err(AdapterError::Internal(
                "a query with its values bound did not plan as a query".into(),
            )),
        }
    }

    /// The query's rows as COPY data (a read, as SELECT is).
    pub(super) async fn sequence_copy_to(
        &self,
        session: &mut Session,
        plan: CopyToPlan,
    ) -> Result<ExecuteResponse, AdapterError> {
        // Like SELECT: the views read are caught up, and an error in them fails the copy.
        self.await_materialized_views(&plan.query).await?;
        let engine = self.engine_for_query(session, &plan.query).await?;
        let (desc, rows) = query::run(&engine, &self.plans, *plan.query).await?;
        Ok(ExecuteResponse::CopyOut {
            columns: desc.len(),
            lines: crate::copy_out::encode_rows(&desc, &rows, &plan.options),
        })
    }

    /// The rows arrive as `COPY` data; `copy_done` writes them.
    pub(super) async fn sequence_copy_from(
        &self,
        session: &mut Session,
        plan: CopyFromPlan,
    ) -> Result<ExecuteResponse, AdapterError> {
        if let Some(transaction) = session.transaction.as_mut() {
            transaction.admit(Access::Write)?;
        }
        let rows = self
            .storage
            .inserts(plan.table)
            .map_err(tables::storage_error)?;
        let defaults = if tables::copy_needs_defaults(&plan) {
            // Only defaults are evaluated: no user table is read.
            let engine = self.engine_reading(Some(Default::default()), None).await?;
            tables::copy_defaults(&engine, &plan).await?
        } else {
            Vec::new()
        };
        let columns = plan.columns.len();
        let copy = crate::copy::CopyState::new(plan, defaults, rows);
        session.copy = Some(Box::new(copy));
        Ok(ExecuteResponse::CopyIn { columns })
    }

    /// Writes outside a transaction run under the write lock (see
    /// `Coordinator::write_lock`), so that a write reads what the previous one wrote; in a
    /// transaction they wait for COMMIT (`sequence::transaction`).
    pub(super) async fn sequence_insert(
        &self,
        session: &mut Session,
        plan: InsertPlan,
    ) -> Result<ExecuteResponse, AdapterError> {
        // Names no relation: reads nothing (no catalog lookup on the INSERT's hot path).
        let reads_relations = !crate::coordinator::referenced_names(&plan.source).is_empty();
        let _write = self
            .write_lock_outside_transaction(session, reads_relations)
            .await;
        let literal = tables::literal_rows(&plan);
        if let Some(rows) = literal.as_ref()
            && !tables::defaults_needed(&plan, rows)
        {
            // Nothing for the engine to compute: no session context is built.
            let mut target = self.write_target(session)?;
            let rows = literal.unwrap_or_default();
            return tables::insert(tables::InsertSource::Literal(rows), &mut target, plan).await;
        }
        let (engine, mut target) = self.engine_for_write(session, &plan.source).await?;
        let source = tables::InsertSource::Engine {
            context: &engine,
            literal,
        };
        tables::insert(source, &mut target, plan).await
    }

    /// UPDATE and DELETE: their query reads the table, so outside a transaction they
    /// hold the write lock exclusively.
    pub(super) async fn sequence_read_then_write(
        &self,
        session: &mut Session,
        write: tables::ReadThenWrite,
    ) -> Result<ExecuteResponse, AdapterError> {
        let _write = self.write_lock_outside_transaction(session, true).await;
        let (engine, mut target) = self.engine_for_write(session, write.query()).await?;
        tables::read_then_write(&engine, &mut target, write).await
    }

    /// The write lock, for a write that commits alone: exclusive when the write reads
    /// a table, shared otherwise.
    async fn write_lock_outside_transaction(
        &self,
        session: &Session,
        reads_relations: bool,
    ) -> Option<WriteLockGuard<'_>> {
        match (&session.transaction, reads_relations) {
            (Some(_), _) => None,
            (None, true) => Some(WriteLockGuard::Exclusive {
                _guard: self.write_lock.write().await,
            }),
            (None, false) => Some(WriteLockGuard::Shared {
                _guard: self.write_lock.read().await,
            }),
        }
    }
}

/// The write lock as a write holds it.
pub(super) enum WriteLockGuard<'a> {
    Exclusive {
        _guard: tokio::sync::RwLockWriteGuard<'a, ()>,
    },
    Shared {
        _guard: tokio::sync::RwLockReadGuard<'a, ()>,
    },
}
