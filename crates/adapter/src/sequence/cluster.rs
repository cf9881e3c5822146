//! CREATE CLUSTER, ALTER CLUSTER, CREATE CLUSTER REPLICA. A change of a
//! cluster's replicas restarts its sinks through the diff.

use floe_catalog::{NewReplica, Op};
use floe_sql::plan::{AlterClusterPlan, CreateClusterPlan, CreateClusterReplicaPlan};

use super::command;
use crate::coordinator::{Coordinator, ExecuteResponse};
use crate::error::AdapterError;

impl Coordinator {
    pub(super) async fn sequence_create_cluster(
        &self,
        plan: CreateClusterPlan,
    ) -> Result<ExecuteResponse, AdapterError> {
        let mut catalog = self.catalog.lock().await;
        let replicas = plan
            .replicas
            .into_iter()
            .map(|(name, size)| NewReplica { name, size })
            .collect();
        self.catalog_transact(
            &mut catalog,
            vec![Op::CreateCluster {
                name: plan.name,
                managed: plan.managed,
                replicas,
            }],
        )?;
        command("CREATE CLUSTER")
    }

    pub(super) async fn sequence_alter_cluster(
        &self,
        plan: AlterClusterPlan,
    ) -> Result<ExecuteResponse, AdapterError> {
        let mut catalog = self.catalog.lock().await;
        self.catalog_transact(
            &mut catalog,
            vec![Op::AlterCluster {
                id: plan.id,
                size: plan.size,
                replication_factor: plan.replication_factor,
            }],
        )?;
        command("ALTER CLUSTER")
    }

    pub(super) async fn sequence_create_cluster_replica(
        &self,
        plan: CreateClusterReplicaPlan,
    ) -> Result<ExecuteResponse, AdapterError> {
        let mut catalog = self.catalog.lock().await;
        self.catalog_transact(
            &mut catalog,
            vec![Op::CreateReplica {
                cluster: plan.cluster,
                replica: NewReplica {
                    name: plan.name,
                    size: plan.size,
                },
            }],
        )?;
        command("CREATE CLUSTER REPLICA")
    }
}
