//! CREATE SECRET, ALTER SECRET.

use floe_catalog::{Op, SecretValue};
use floe_sql::catalog::ItemDefinition;
use floe_sql::plan::{AlterSecretPlan, CreateSecretPlan};
use tracing::info;

use super::command;
use crate::coordinator::{Coordinator, ExecuteResponse};
use crate::error::AdapterError;

impl Coordinator {
    pub(super) async fn sequence_create_secret(
        &self,
        plan: CreateSecretPlan,
    ) -> Result<ExecuteResponse, AdapterError> {
        let mut catalog = self.catalog.lock().await;
        let secrets = vec![("value".to_string(), SecretValue(plan.value))];
        let id = self.create_item(
            &mut catalog,
            plan.name,
            ItemDefinition::Secret,
            plan.create_sql,
            secrets,
        )?;
        info!(%id, "created secret");
        command("CREATE SECRET")
    }

    /// The new value reaches running sinks through the diff: a rotated secret
    /// restarts the sinks that use it.
    pub(super) async fn sequence_alter_secret(
        &self,
        plan: AlterSecretPlan,
    ) -> Result<ExecuteResponse, AdapterError> {
        let mut catalog = self.catalog.lock().await;
        self.catalog_transact(
            &mut catalog,
            vec![Op::WriteSecret {
                id: plan.id,
                slot: "value".to_string(),
                value: SecretValue(plan.value),
            }],
        )?;
        info!(id = %plan.id, "altered secret");
        command("ALTER SECRET")
    }
}
