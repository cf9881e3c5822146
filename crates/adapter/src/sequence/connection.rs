//! CREATE CONNECTION, ALTER CONNECTION, VALIDATE CONNECTION.

use floe_catalog::{Catalog, Op, SecretValue};
use floe_repr::GlobalId;
use floe_sink::CatalogConfig;
use floe_sql::catalog::{ConnectionDefinition, ItemDefinition, PlanCatalog};
use floe_sql::plan::{AlterConnectionPlan, CreateConnectionPlan, ValidateConnectionPlan};
use tracing::info;

use super::command;
use crate::connection_config::{
    resolve_aws_config, resolve_aws_definition, resolve_catalog_config,
};
use crate::coordinator::{Coordinator, ExecuteResponse};
use crate::error::AdapterError;

impl Coordinator {
    /// An Iceberg catalog connection is validated before it is created; an AWS
    /// connection's external id names the connection, so it is validated once
    /// created, and dropped again when validation fails.
    pub(super) async fn sequence_create_connection(
        &self,
        plan: CreateConnectionPlan,
    ) -> Result<ExecuteResponse, AdapterError> {
        let is_aws = matches!(plan.definition, ConnectionDefinition::Aws(_));
        if plan.validate
            && let ConnectionDefinition::Postgres(postgres) = &plan.definition
        {
            self.validate_postgres_connection(Ok(postgres)).await?;
        }
        if plan.validate && !is_aws {
            let config = {
                let catalog = self.catalog.lock().await;
                self.connection_config(&catalog, None, &plan.definition, &plan.inline_secrets)?
            };
            if let Some(config) = config {
                self.validate_catalog_connection(&config).await?;
            }
        }
        let validate_aws = plan.validate && is_aws;
        let secrets = plan
            .inline_secrets
            .into_iter()
            .map(|(slot, value)| (slot, SecretValue(value)))
            .collect();
        let id = self.create_item(
            &mut *self.catalog.lock().await,
            plan.name,
            ItemDefinition::Connection(plan.definition),
            plan.create_sql,
            secrets,
        )?;
        if validate_aws && let Err(error) = self.validate_aws_connection(id).await {
            let mut catalog = self.catalog.lock().await;
            self.catalog_transact(&mut catalog, vec![Op::DropItem(id)])?;
            return Err(error);
        }
        info!(%id, "created connection");
        command("CREATE CONNECTION")
    }

    /// An AWS connection takes its new definition under the same id (and so
    /// the same external id); `WITH (VALIDATE)` checks the new definition
    /// first. The sinks that use it restart with it (`implications`).
    pub(super) async fn sequence_alter_connection(
        &self,
        plan: AlterConnectionPlan,
    ) -> Result<ExecuteResponse, AdapterError> {
        if plan.validate
            && let ConnectionDefinition::Aws(aws) = &plan.definition
        {
            let config = {
                let catalog = self.catalog.lock().await;
                resolve_aws_definition(&catalog, plan.id, aws, &plan.inline_secrets)?
            };
            self.sinks
                .credentials()
                .validate_aws(&config)
                .await
                .map_err(AdapterError::ConnectionValidation)?;
        }
        let mut ops = vec![Op::UpdateItem {
            id: plan.id,
            definition: ItemDefinition::Connection(plan.definition),
            create_sql: plan.create_sql,
        }];
        ops.extend(
            plan.inline_secrets
                .into_iter()
                .map(|(slot, value)| Op::WriteSecret {
                    id: plan.id,
                    slot,
                    value: SecretValue(value),
                }),
        );
        self.catalog_transact(&mut *self.catalog.lock().await, ops)?;
        info!(id = %plan.id, "altered connection");
        command("ALTER CONNECTION")
    }

    pub(super) async fn sequence_validate_connection(
        &self,
        plan: ValidateConnectionPlan,
    ) -> Result<ExecuteResponse, AdapterError> {
        let config = {
            let catalog = self.catalog.lock().await;
            let Some(ItemDefinition::Connection(definition)) =
                catalog.state().item(plan.id).map(|i| &i.definition)
            else {
                return Err(AdapterError::Internal(format!(
                    "{} is not a connection",
                    plan.id
                )));
            };
            if let ConnectionDefinition::Postgres(_) = definition {
                drop(catalog);
                self.validate_postgres_connection(Err(plan.id)).await?;
                return command("VALIDATE CONNECTION");
            }
            self.connection_config(&catalog, Some(plan.id), definition, &[])?
        };
        match config {
            Some(config) => self.validate_catalog_connection(&config).await?,
            None => self.validate_aws_connection(plan.id).await?,
        }
        command("VALIDATE CONNECTION")
    }

    /// Connects to an Iceberg catalog and lists its namespaces.
    async fn validate_catalog_connection(
        &self,
        config: &CatalogConfig,
    ) -> Result<(), AdapterError> {
        self.sinks
            .credentials()
            .validate_catalog(config)
            .await
            .map_err(AdapterError::ConnectionValidation)
    }

    /// Validates an AWS connection: STS GetCallerIdentity with static keys; an
    /// assumed role must be assumable with the external id and not without it.
    async fn validate_aws_connection(&self, id: GlobalId) -> Result<(), AdapterError> {
        let config = {
            let catalog = self.catalog.lock().await;
            resolve_aws_config(&catalog, id)?
        };
        self.sinks
            .credentials()
            .validate_aws(&config)
            .await
            .map_err(AdapterError::ConnectionValidation)
    }

    /// Resolves a connection to the settings the sink crate uses. `None` for
    /// AWS connections, which are validated through their catalog connections.
    fn connection_config(
        &self,
        catalog: &Catalog,
        id: Option<GlobalId>,
        definition: &ConnectionDefinition,
        inline_secrets: &[(String, String)],
    ) -> Result<Option<CatalogConfig>, AdapterError> {
        let ConnectionDefinition::IcebergCatalog(iceberg) = definition else {
            return Ok(None);
        };
        resolve_catalog_config(catalog, &self.config.data_dir, id, iceberg, inline_secrets)
            .map(Some)
    }
}
