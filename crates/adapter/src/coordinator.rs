//! The coordinator: sequences planned statements against the catalog.
//!
//! A statement flows: parse -> plan (pure, under the catalog lock) ->
//! purify (network checks, without the lock) -> sequence (catalog
//! transaction first, side effects after) -> response.

use std::path::PathBuf;
use std::sync::Arc;

use floe_catalog::{Catalog, NewReplica, SinkStatusEvent};
use floe_repr::{ColumnDesc, Datum, GlobalId, PgType, Timestamp};
use floe_sink::{AwsAuthConfig, AwsConfig, AwsKeys, CatalogConfig, ClientCredentials};
use floe_sql::catalog::{
    AwsAuth, ConnectionDefinition, IcebergCatalogConnection, IcebergCatalogType, ItemDefinition,
    PlanCatalog, StringOrSecret,
};
use floe_sql::plan::*;
use floe_sql::{PlanNotice, SessionContext};
use floe_sql_parser::ast::Statement;
use tokio::sync::Mutex;
use tracing::info;

use crate::error::AdapterError;
use crate::query;
use crate::session::{Session, TransactionStatus};
use crate::system::{BUILTINS, SystemContext, external_id};

/// Server settings the coordinator needs.
#[derive(Debug, Clone, Default)]
pub struct CoordinatorConfig {
    pub data_dir: PathBuf,
    /// The external id prefix for a new data directory (a UUID if unset).
    pub environment_id: Option<String>,
    /// The AWS principal floe assumes roles from, shown in trust policies.
    pub aws_principal: Option<String>,
}

/// What a statement returns.
#[derive(Debug, Clone, PartialEq)]
pub enum ExecuteResponse {
    Rows {
        desc: Vec<ColumnDesc>,
        rows: Vec<Vec<Datum>>,
    },
    /// A command with its tag (`CREATE SINK`, `SET`, ...).
    Command {
        tag: String,
    },
    TransactionStarted,
    TransactionEnded {
        tag: &'static str,
    },
}

/// A notice for the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub message: String,
    pub hint: Option<String>,
}

impl From<PlanNotice> for Notice {
    fn from(notice: PlanNotice) -> Notice {
        Notice {
            message: notice.message,
            hint: notice.hint,
        }
    }
}

/// The coordinator. One per server; sessions share it.
pub struct Coordinator {
    catalog: Mutex<Catalog>,
    config: CoordinatorConfig,
}

impl std::fmt::Debug for Coordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coordinator").finish_non_exhaustive()
    }
}

impl Coordinator {
    /// Opens the catalog in the data directory.
    pub fn open(config: CoordinatorConfig) -> Result<Arc<Coordinator>, AdapterError> {
        let mut catalog = Catalog::open(&config.data_dir, config.environment_id.as_deref())?;
        catalog.state_mut().set_system_relations(
            BUILTINS
                .iter()
                .map(|b| (b.schema.to_string(), b.name.to_string()))
                .collect(),
        );
        info!(
            data_dir = %config.data_dir.display(),
            items = catalog.state().items().count(),
            "catalog opened"
        );
        Ok(Arc::new(Coordinator {
            catalog: Mutex::new(catalog),
            config,
        }))
    }

    /// The data directory's fixed prefix of external ids.
    pub async fn environment_id(&self) -> String {
        self.catalog.lock().await.environment_id().to_string()
    }

    /// Executes one parsed statement.
    pub async fn execute(
        &self,
        session: &mut Session,
        statement: Statement,
        notices: &mut Vec<Notice>,
    ) -> Result<ExecuteResponse, AdapterError> {
        // Inside a failed transaction block only its end is accepted.
        if session.transaction == TransactionStatus::Failed && !is_transaction_end(&statement) {
            return Err(failed_transaction_error());
        }
        let result = self.execute_inner(session, statement, notices).await;
        if result.is_err() && session.transaction == TransactionStatus::InTransaction {
            session.transaction = TransactionStatus::Failed;
        }
        result
    }

    async fn execute_inner(
        &self,
        session: &mut Session,
        statement: Statement,
        notices: &mut Vec<Notice>,
    ) -> Result<ExecuteResponse, AdapterError> {
        let plan = {
            let catalog = self.catalog.lock().await;
            let context = SessionContext {
                cluster: session.get("cluster")?,
            };
            let mut plan_notices = Vec::new();
            let plan = floe_sql::plan(catalog.state(), &context, statement, &mut plan_notices);
            notices.extend(plan_notices.into_iter().map(Notice::from));
            plan?
        };
        self.sequence(session, plan).await
    }

    /// The result shape of a statement, without running it (extended
    /// protocol `Describe`). `None` for statements that return no rows.
    pub async fn describe(
        &self,
        session: &mut Session,
        statement: Statement,
    ) -> Result<Option<Vec<ColumnDesc>>, AdapterError> {
        if session.transaction == TransactionStatus::Failed && !is_transaction_end(&statement) {
            return Err(failed_transaction_error());
        }
        let result = self.describe_inner(session, statement).await;
        // As in Postgres, an error at any step of the extended protocol
        // aborts the transaction block.
        if result.is_err() && session.transaction == TransactionStatus::InTransaction {
            session.transaction = TransactionStatus::Failed;
        }
        result
    }

    async fn describe_inner(
        &self,
        session: &Session,
        statement: Statement,
    ) -> Result<Option<Vec<ColumnDesc>>, AdapterError> {
        let catalog = self.catalog.lock().await;
        let context = SessionContext {
            cluster: session.get("cluster")?,
        };
        let mut notices = Vec::new();
        match floe_sql::plan(catalog.state(), &context, statement, &mut notices)? {
            Plan::Select(select) => {
                let history = catalog.sink_status_history()?;
                let system = self.system_context(&catalog, &history);
                let engine = query::session_context(&system)?;
                drop(catalog);
                let plan = query::logical_plan(&engine, *select.query).await?;
                Ok(Some(query::describe(&plan)))
            }
            Plan::ShowVariable(show) => Ok(Some(show_variable_desc(&show.name))),
            _ => Ok(None),
        }
    }

    fn system_context<'a>(
        &'a self,
        catalog: &'a Catalog,
        history: &'a [SinkStatusEvent],
    ) -> SystemContext<'a> {
        SystemContext {
            catalog: catalog.state(),
            environment_id: catalog.environment_id(),
            aws_principal: self.config.aws_principal.as_deref(),
            sink_status_history: history,
            now_ms: Timestamp::now().millis(),
        }
    }

    async fn sequence(
        &self,
        session: &mut Session,
        plan: Plan,
    ) -> Result<ExecuteResponse, AdapterError> {
        let command = |tag: &str| {
            Ok(ExecuteResponse::Command {
                tag: tag.to_string(),
            })
        };
        match plan {
            Plan::NoOp { tag } => command(tag),
            Plan::CreateSecret(plan) => {
                let mut catalog = self.catalog.lock().await;
                let id = catalog.create_item(
                    plan.name,
                    ItemDefinition::Secret,
                    plan.create_sql,
                    &[("value".to_string(), plan.value)],
                )?;
                info!(%id, "created secret");
                command("CREATE SECRET")
            }
            Plan::AlterSecret(plan) => {
                let mut catalog = self.catalog.lock().await;
                catalog.set_secret(plan.id, "value", &plan.value)?;
                info!(id = %plan.id, "altered secret");
                command("ALTER SECRET")
            }
            Plan::CreateConnection(plan) => {
                if plan.validate {
                    let config = {
                        let catalog = self.catalog.lock().await;
                        self.connection_config(
                            &catalog,
                            None,
                            &plan.definition,
                            &plan.inline_secrets,
                        )?
                    };
                    if let Some(config) = config {
                        floe_sink::validate::validate_catalog(&config)
                            .await
                            .map_err(AdapterError::ConnectionValidation)?;
                    }
                }
                let mut catalog = self.catalog.lock().await;
                let id = catalog.create_item(
                    plan.name,
                    ItemDefinition::Connection(plan.definition),
                    plan.create_sql,
                    &plan.inline_secrets,
                )?;
                info!(%id, "created connection");
                command("CREATE CONNECTION")
            }
            Plan::ValidateConnection(plan) => {
                let config = {
                    let catalog = self.catalog.lock().await;
                    let Some(item) = catalog.state().item(plan.id) else {
                        return Err(AdapterError::Internal(format!("unknown item {}", plan.id)));
                    };
                    let ItemDefinition::Connection(definition) = item.definition.clone() else {
                        return Err(AdapterError::Internal(format!(
                            "{} is not a connection",
                            plan.id
                        )));
                    };
                    self.connection_config(&catalog, Some(plan.id), &definition, &[])?
                };
                match config {
                    Some(config) => floe_sink::validate::validate_catalog(&config)
                        .await
                        .map_err(AdapterError::ConnectionValidation)?,
                    None => {
                        return Err(AdapterError::ConnectionValidation(
                            floe_sink::SinkError::new(
                                floe_sink::ErrorKind::InvalidConfig,
                                "validating AWS connections is not supported yet",
                            ),
                        ));
                    }
                }
                command("VALIDATE CONNECTION")
            }
            Plan::CreateSink(plan) => {
                let mut catalog = self.catalog.lock().await;
                let id = catalog.create_item(
                    plan.name,
                    ItemDefinition::Sink(plan.definition),
                    plan.create_sql,
                    &[],
                )?;
                catalog.record_sink_status(&SinkStatusEvent {
                    occurred_at: Timestamp::now().millis(),
                    sink_id: id,
                    status: "created".into(),
                    error: None,
                    details: None,
                    replica_id: None,
                })?;
                info!(%id, "created sink");
                command("CREATE SINK")
            }
            Plan::AlterSink(plan) => {
                let mut catalog = self.catalog.lock().await;
                let Some(ItemDefinition::Sink(mut sink)) =
                    catalog.state().item(plan.id).map(|i| i.definition.clone())
                else {
                    return Err(AdapterError::Internal(format!("{} is not a sink", plan.id)));
                };
                sink.commit_interval_ms = plan.commit_interval_ms;
                sink.version += 1;
                catalog.update_item(plan.id, ItemDefinition::Sink(sink), plan.create_sql)?;
                info!(id = %plan.id, "altered sink");
                command("ALTER SINK")
            }
            Plan::CreateTable(plan) => {
                let mut catalog = self.catalog.lock().await;
                catalog.create_item(
                    plan.name,
                    ItemDefinition::Table(plan.definition),
                    plan.create_sql,
                    &[],
                )?;
                command("CREATE TABLE")
            }
            Plan::CreateCluster(plan) => {
                let mut catalog = self.catalog.lock().await;
                let replicas = plan
                    .replicas
                    .into_iter()
                    .map(|(name, size)| NewReplica { name, size })
                    .collect();
                catalog.create_cluster(&plan.name, plan.managed, replicas)?;
                command("CREATE CLUSTER")
            }
            Plan::AlterCluster(plan) => {
                let mut catalog = self.catalog.lock().await;
                catalog.alter_cluster(plan.id, &plan.size, plan.replication_factor)?;
                command("ALTER CLUSTER")
            }
            Plan::CreateClusterReplica(plan) => {
                let mut catalog = self.catalog.lock().await;
                catalog.create_replica(plan.cluster, &plan.name, &plan.size)?;
                command("CREATE CLUSTER REPLICA")
            }
            Plan::DropObjects(plan) => {
                let mut catalog = self.catalog.lock().await;
                let sinks: Vec<GlobalId> = plan
                    .items
                    .iter()
                    .filter(|id| {
                        matches!(
                            catalog.state().item(**id).map(|i| &i.definition),
                            Some(ItemDefinition::Sink(_))
                        )
                    })
                    .copied()
                    .collect();
                catalog.drop_objects(&plan.items, &plan.replicas, &plan.clusters)?;
                for sink in sinks {
                    catalog.record_sink_status(&SinkStatusEvent {
                        occurred_at: Timestamp::now().millis(),
                        sink_id: sink,
                        status: "dropped".into(),
                        error: None,
                        details: None,
                        replica_id: None,
                    })?;
                }
                command(plan.tag)
            }
            Plan::Select(select) => {
                let engine = {
                    let catalog = self.catalog.lock().await;
                    let history = catalog.sink_status_history()?;
                    let system = self.system_context(&catalog, &history);
                    query::session_context(&system)?
                };
                let plan = query::logical_plan(&engine, *select.query).await?;
                let (desc, rows) = query::execute(&engine, plan).await?;
                Ok(ExecuteResponse::Rows { desc, rows })
            }
            Plan::ShowVariable(show) => {
                if show.name == "all" {
                    let rows = session
                        .all()
                        .into_iter()
                        .map(|(name, value)| {
                            vec![
                                Datum::Text(name.to_string()),
                                Datum::Text(value),
                                Datum::Text(String::new()),
                            ]
                        })
                        .collect();
                    return Ok(ExecuteResponse::Rows {
                        desc: show_variable_desc("all"),
                        rows,
                    });
                }
                let value = session.get(&show.name)?;
                Ok(ExecuteResponse::Rows {
                    desc: show_variable_desc(&show.name),
                    rows: vec![vec![Datum::Text(value)]],
                })
            }
            Plan::SetVariable(set) => {
                if set.name == "cluster" {
                    if let Some(name) = &set.value {
                        let catalog = self.catalog.lock().await;
                        if catalog.state().cluster_by_name(name).is_none() {
                            return Err(AdapterError::InvalidVariableValue {
                                name: "cluster".into(),
                                value: name.clone(),
                                hint: Some(format!("There is no cluster named \"{name}\".")),
                            });
                        }
                    }
                }
                session.set(&set.name, set.value.as_deref())?;
                command(if set.value.is_none() && set.name == "all" {
                    "RESET"
                } else {
                    "SET"
                })
            }
            Plan::Transaction(TransactionPlan::Begin) => {
                if session.transaction == TransactionStatus::Idle {
                    session.transaction = TransactionStatus::InTransaction;
                }
                Ok(ExecuteResponse::TransactionStarted)
            }
            Plan::Transaction(TransactionPlan::Commit) => {
                let tag = if session.transaction == TransactionStatus::Failed {
                    "ROLLBACK"
                } else {
                    "COMMIT"
                };
                session.transaction = TransactionStatus::Idle;
                Ok(ExecuteResponse::TransactionEnded { tag })
            }
            Plan::Transaction(TransactionPlan::Rollback) => {
                session.transaction = TransactionStatus::Idle;
                Ok(ExecuteResponse::TransactionEnded { tag: "ROLLBACK" })
            }
        }
    }

    /// Resolves a connection to the settings the sink crate uses: secret
    /// values decrypted, defaults applied. `None` for AWS connections, which
    /// are validated through their catalog connections.
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

/// Reads a string-or-secret value.
fn resolve_string(
    catalog: &Catalog,
    owner: Option<GlobalId>,
    value: &StringOrSecret,
    inline_secrets: &[(String, String)],
) -> Result<String, AdapterError> {
    match value {
        StringOrSecret::String(s) => Ok(s.clone()),
        StringOrSecret::Secret(id) => Ok(catalog.secret(*id, "value")?),
        StringOrSecret::Inline { slot } => {
            if let Some((_, value)) = inline_secrets.iter().find(|(s, _)| s == slot) {
                return Ok(value.clone());
            }
            let owner = owner.ok_or_else(|| {
                AdapterError::Internal(format!("inline secret {slot} without owner"))
            })?;
            Ok(catalog.secret(owner, slot)?)
        }
    }
}

/// Resolves an AWS connection.
pub fn resolve_aws_config(catalog: &Catalog, id: GlobalId) -> Result<AwsConfig, AdapterError> {
    let Some(item) = catalog.state().item(id) else {
        return Err(AdapterError::Internal(format!(
            "unknown AWS connection {id}"
        )));
    };
    let ItemDefinition::Connection(ConnectionDefinition::Aws(aws)) = &item.definition else {
        return Err(AdapterError::Internal(format!(
            "{id} is not an AWS connection"
        )));
    };
    let auth = match &aws.auth {
        AwsAuth::Credentials {
            access_key_id,
            secret_access_key,
            session_token,
        } => AwsAuthConfig::Keys(AwsKeys {
            access_key_id: resolve_string(catalog, Some(id), access_key_id, &[])?,
            secret_access_key: catalog.secret(*secret_access_key, "value")?,
            session_token: session_token
                .as_ref()
                .map(|t| resolve_string(catalog, Some(id), t, &[]))
                .transpose()?,
        }),
        AwsAuth::AssumeRole { arn, session_name } => AwsAuthConfig::AssumeRole {
            arn: arn.clone(),
            session_name: session_name.clone().unwrap_or_else(|| format!("floe-{id}")),
            external_id: external_id(catalog.environment_id(), id),
        },
    };
    Ok(AwsConfig {
        endpoint: aws.endpoint.clone(),
        region: aws.region.clone(),
        auth,
    })
}

/// Resolves an Iceberg catalog connection.
pub fn resolve_catalog_config(
    catalog: &Catalog,
    data_dir: &std::path::Path,
    id: Option<GlobalId>,
    iceberg: &IcebergCatalogConnection,
    inline_secrets: &[(String, String)],
) -> Result<CatalogConfig, AdapterError> {
    let credentials = iceberg
        .credential
        .as_ref()
        .map(|c| resolve_string(catalog, id, c, inline_secrets))
        .transpose()?
        .map(|text| {
            ClientCredentials::parse(&text).ok_or_else(|| {
                AdapterError::Plan(floe_sql::PlanError::invalid(
                    "CREDENTIAL must have the form 'client_id:client_secret'",
                ))
            })
        })
        .transpose()?;
    let aws = iceberg
        .aws_connection
        .map(|aws| resolve_aws_config(catalog, aws))
        .transpose()?;
    Ok(match iceberg.catalog_type {
        IcebergCatalogType::Local => {
            let warehouse = match &iceberg.warehouse {
                Some(url) => PathBuf::from(url.trim_start_matches("file://")),
                None => data_dir.join("warehouse"),
            };
            CatalogConfig::Local {
                database: warehouse.join("floe_catalog.db"),
                warehouse,
            }
        }
        IcebergCatalogType::Rest => CatalogConfig::Rest {
            url: iceberg.url.clone().unwrap_or_default(),
            warehouse: iceberg.warehouse.clone(),
            credentials,
            scope: iceberg.effective_scope().to_string(),
            oauth2_server_url: iceberg.effective_oauth2_server_url().unwrap_or_default(),
            vended_credentials: iceberg.vended_credentials,
            aws,
        },
        IcebergCatalogType::S3TablesRest => CatalogConfig::S3TablesRest {
            url: iceberg.url.clone().unwrap_or_default(),
            warehouse: iceberg.warehouse.clone().unwrap_or_default(),
            aws: aws.ok_or_else(|| {
                AdapterError::Internal("s3tablesrest connection without AWS connection".into())
            })?,
        },
    })
}

/// Whether a statement ends a transaction block (accepted even when the
/// block failed).
fn is_transaction_end(statement: &Statement) -> bool {
    matches!(
        statement,
        Statement::Standard(s) if matches!(
            s.as_ref(),
            sqlparser::ast::Statement::Commit { .. } | sqlparser::ast::Statement::Rollback { .. }
        )
    )
}

fn failed_transaction_error() -> AdapterError {
    AdapterError::Query {
        code: floe_repr::SqlState::IN_FAILED_SQL_TRANSACTION,
        message: "current transaction is aborted, commands ignored until end of transaction block"
            .into(),
    }
}

fn show_variable_desc(name: &str) -> Vec<ColumnDesc> {
    if name == "all" {
        ["name", "setting", "description"]
            .into_iter()
            .map(|n| ColumnDesc {
                name: n.to_string(),
                pg_type: PgType::Text,
            })
            .collect()
    } else {
        vec![ColumnDesc {
            name: name.to_string(),
            pg_type: PgType::Text,
        }]
    }
}
