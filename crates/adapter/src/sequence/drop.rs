//! DROP of items, clusters, cluster replicas and schemas.

use floe_catalog::Op;
use floe_sql::plan::DropObjectsPlan;

use super::command;
use crate::coordinator::{Coordinator, ExecuteResponse, Notice};
use crate::error::AdapterError;

impl Coordinator {
    /// Everything the plan names goes in one transaction; the diff stops the
    /// dropped sinks, generators and sources and removes the dropped relations'
    /// logs. Dropped Postgres sources' replication slots are removed upstream
    /// afterwards (a notice names a slot that could not be).
    pub(super) async fn sequence_drop_objects(
        &self,
        plan: DropObjectsPlan,
        notices: &mut Vec<Notice>,
    ) -> Result<ExecuteResponse, AdapterError> {
        let mut catalog = self.catalog.lock().await;
        let slots = self.slots_to_drop(&catalog, &plan.items);
        let ops = plan
            .items
            .iter()
            .map(|id| Op::DropItem(*id))
            .chain(
                plan.replicas
                    .iter()
                    .map(|(cluster, replica)| Op::DropReplica {
                        cluster: *cluster,
                        replica: *replica,
                    }),
            )
            .chain(plan.clusters.iter().map(|id| Op::DropCluster(*id)))
            .chain(
                plan.schemas
                    .iter()
                    .map(|name| Op::DropSchema { name: name.clone() }),
            )
            .collect();
        self.catalog_transact(&mut catalog, ops)?;
        drop(catalog);
        self.drop_replication_slots(slots, notices).await;
        command(plan.tag)
    }
}
