//! `COPY (SUBSCRIBE ...) TO STDOUT`.

use floe_sql::catalog::{ItemDefinition, PlanCatalog};
use floe_sql::subscribe::SubscribePlan;

use crate::coordinator::{Coordinator, ExecuteResponse};
use crate::error::AdapterError;
use crate::subscribe::{Subscription, column_count, start};

impl Coordinator {
    /// Starts a subscription as of now: a materialized view is first caught up with
    /// its inputs (and refused while it holds an error), tables' uppers are moved to
    /// the wall clock, so the snapshot holds every write acknowledged before.
    pub(super) async fn sequence_subscribe(
        &self,
        plan: SubscribePlan,
    ) -> Result<ExecuteResponse, AdapterError> {
        let upstream = {
            let catalog = self.catalog.lock().await;
            let state = catalog.state();
            match state.item(plan.id).map(|item| &item.definition) {
                Some(ItemDefinition::MaterializedView(_)) => {
                    Some(crate::views::view_and_upstream(state, plan.id))
                }
                _ => None,
            }
        };
        match &upstream {
            Some(upstream) => {
                self.await_view(plan.id, &plan.name.item).await?;
                if let Some(error) = self.views.error(upstream) {
                    return Err(error);
                }
            }
            None => self.storage.blocking(|storage| storage.tick()).await?,
        }
        let columns = column_count(&plan);
        let lines = start(Subscription {
            storage: self.storage.clone(),
            errors: upstream.map(|upstream| (self.views.errors(), upstream)),
            plan,
        });
        Ok(ExecuteResponse::Subscribe { columns, lines })
    }
}
