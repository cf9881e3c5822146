//! `SUBSCRIBE` (on its own, in `COPY (...) TO STDOUT`, in a cursor).

use floe_repr::{ClusterId, RelationDesc, SqlState};
use floe_sql::catalog::{ItemDefinition, PlanCatalog};
use floe_sql::subscribe::{SubscribeFrom, SubscribePlan};

use crate::coordinator::{Coordinator, ExecuteResponse};
use crate::error::AdapterError;
use crate::subscribe::{LogSubscription, RowShape, SubscribeLines};
use crate::views::{compute_error, relation_desc};

impl Coordinator {
    pub(super) async fn sequence_subscribe(
        &self,
        plan: SubscribePlan,
    ) -> Result<ExecuteResponse, AdapterError> {
        let (desc, shape, rows) = self.start_subscription(plan.clone()).await?;
        Ok(ExecuteResponse::Subscribe {
            columns: shape.columns(&desc),
            copy: plan.copy,
            rows,
        })
    }

    /// A subscription's columns, without starting it (the extended protocol's Describe).
    pub(crate) async fn subscribe_columns(
        &self,
        plan: SubscribePlan,
    ) -> Result<Vec<floe_repr::ColumnDesc>, AdapterError> {
        let desc = match plan.from {
            SubscribeFrom::Relation { desc, .. } => desc,
            SubscribeFrom::Query { query, .. } => {
                let engine = self.engine_for(&query).await?;
                relation_desc(&crate::query::logical_plan(&engine, *query).await?.plan)?
            }
        };
        let shape = RowShape {
            progress: plan.progress,
            width: desc.columns.len(),
        };
        Ok(shape.columns(&desc))
    }

    /// Starts a subscription: its shape and its rows.
    pub(crate) async fn start_subscription(
        &self,
        plan: SubscribePlan,
    ) -> Result<(RelationDesc, RowShape, SubscribeLines), AdapterError> {
        match plan.from {
            SubscribeFrom::Relation { id, name, desc } => {
                let shape = RowShape {
                    progress: plan.progress,
                    width: desc.columns.len(),
                };
                let rows = self
                    .subscribe_log(id, name.item, shape, plan.snapshot)
                    .await?;
                Ok((desc, shape, rows))
            }
            SubscribeFrom::Query { query, cluster, .. } => {
                self.subscribe_query(*query, cluster, plan.progress, plan.snapshot)
                    .await
            }
        }
    }

    /// A subscription to a change log, as of now: a materialized view is first caught
    /// up with its inputs (and refused while it holds an error), tables' uppers are
    /// moved to the wall clock, so the snapshot holds every write acknowledged before.
    async fn subscribe_log(
        &self,
        id: floe_repr::GlobalId,
        name: String,
        shape: RowShape,
        snapshot: bool,
    ) -> Result<SubscribeLines, AdapterError> {
        let upstream = {
            let catalog = self.catalog.lock().await;
            let state = catalog.state();
            match state.item(id).map(|item| &item.definition) {
                Some(ItemDefinition::MaterializedView(_)) => {
                    Some(crate::views::view_and_upstream(state, id))
                }
                _ => None,
            }
        };
        match &upstream {
            Some(upstream) => {
                self.await_view(id, &name).await?;
                if let Some(error) = self.views.error(upstream) {
                    return Err(error);
                }
            }
            None => self.storage.blocking(|storage| storage.tick()).await?,
        }
        Ok(crate::subscribe::start(LogSubscription {
            storage: self.storage.clone(),
            id,
            shape,
            snapshot,
            errors: upstream.map(|upstream| (self.views.errors(), upstream)),
        }))
    }

    /// A subscription to a query: planned as a materialized view is (what one refuses
    /// is refused with the same error), run on `cluster` as of now.
    async fn subscribe_query(
        &self,
        query: sqlparser::ast::Statement,
        cluster: ClusterId,
        progress: bool,
        snapshot: bool,
    ) -> Result<(RelationDesc, RowShape, SubscribeLines), AdapterError> {
        let engine = self.engine_for(&query).await?;
        let logical = crate::query::logical_plan(&engine, query.clone()).await?;
        let desc = relation_desc(&logical.plan)?;
        floe_compute::compile(&logical.plan, &engine.state()).map_err(compute_error)?;
        // Materialized views it reads are caught up and free of errors; tables are
        // complete up to now.
        self.await_materialized_views(&query).await?;
        self.storage.blocking(|storage| storage.tick()).await?;
        let (spec, inputs, upstream, size) = {
            let catalog = self.catalog.lock().await;
            let state = catalog.state();
            let Some(cluster) = state.cluster(cluster) else {
                return Err(AdapterError::Query {
                    code: SqlState::UNDEFINED_OBJECT,
                    message: "the session's cluster no longer exists".into(),
                });
            };
            let Some(size) = cluster.replicas.first().map(|r| r.size.clone()) else {
                return Err(AdapterError::Query {
                    code: SqlState::FEATURE_NOT_SUPPORTED,
                    message: format!(
                        "cannot SUBSCRIBE on cluster \"{}\": it has no replicas",
                        cluster.name
                    ),
                });
            };
            let (spec, inputs) = crate::views::query_dataflow_spec(state, 0, "subscribe", &query);
            let mut upstream = Vec::new();
            for input in &inputs {
                if let Some(ItemDefinition::MaterializedView(_)) =
                    state.item(*input).map(|item| &item.definition)
                {
                    upstream.extend(crate::views::view_and_upstream(state, *input));
                }
            }
            (spec, inputs, upstream, size)
        };
        let replica = self.views.replica(cluster, &size)?;
        let shape = RowShape {
            progress,
            width: desc.columns.len(),
        };
        let storage = self.storage.clone();
        let subscription = crate::subscribe_dataflow::QuerySubscription {
            storage,
            replica,
            spec,
            inputs,
            shape,
            snapshot,
            upstream,
            errors: self.views.errors(),
        };
        let rows = crate::subscribe_dataflow::start(subscription)?;
        Ok((desc, shape, rows))
    }
}
