//! DROP of items, clusters and cluster replicas.

use floe_catalog::Op;
use floe_sql::plan::DropObjectsPlan;

use super::command;
use crate::coordinator::{Coordinator, ExecuteResponse};
use crate::error::AdapterError;

impl Coordinator {
    /// Everything the plan names goes in one transaction; the diff stops the
    /// dropped sinks and generators and removes the dropped relations' logs.
    pub(super) async fn sequence_drop_objects(
        &self,
        plan: DropObjectsPlan,
    ) -> Result<ExecuteResponse, AdapterError> {
        let mut catalog = self.catalog.lock().await;
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
            .collect();
        self.catalog_transact(&mut catalog, ops)?;
        command(plan.tag)
    }
}
