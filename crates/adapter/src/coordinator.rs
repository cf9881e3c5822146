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
use crate::tables::{self, BatchCache, register_tables, storage_collections};
use floe_storage::Storage;

/// Server settings the coordinator needs.
#[derive(Debug, Clone, Default)]
pub struct CoordinatorConfig {
    pub data_dir: PathBuf,
    /// The external id prefix for a new data directory (a UUID if unset).
    pub environment_id: Option<String>,
    /// The AWS principal floe assumes roles from, shown in trust policies.
    pub aws_principal: Option<String>,
    /// Extra certificate authorities to trust for HTTPS.
    pub extra_ca_bundle: Option<PathBuf>,
    /// Refresh margins of tokens and credentials, and the assumed-role session lifetime.
    pub credentials: crate::credentials::CredentialSettings,
}

/// What a statement returns.
#[derive(Debug, Clone, PartialEq)]
pub enum ExecuteResponse {
    Rows {
        desc: Vec<ColumnDesc>,
        rows: Vec<Vec<Datum>>,
        /// The command tag before the row count; `None` means `SELECT`.
        tag: Option<String>,
    },
    /// A command with its tag (`CREATE SINK`, `SET`, ...).
    Command {
        tag: String,
    },
    TransactionStarted,
    TransactionEnded {
        tag: &'static str,
    },
    /// `COPY ... FROM STDIN` is ready for this many columns of data.
    CopyIn {
        columns: usize,
    },
}

/// A statement's shape for the extended protocol's Describe.
#[derive(Debug, Clone, PartialEq)]
pub struct Described {
    /// The result columns; `None` for statements that return no rows.
    pub columns: Option<Vec<ColumnDesc>>,
    /// The type the engine infers for each `$n` parameter, by position.
    pub parameters: Vec<Option<floe_repr::PgType>>,
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
    /// Tables' and sources' change logs.
    storage: Arc<Storage>,
    /// Serializes writes: a write reads the table and writes the change
    /// under this lock, so concurrent UPDATEs cannot lose each other.
    write_lock: Mutex<()>,
    /// Tables converted for the query engine, by contents version.
    batches: BatchCache,
    /// The sink tasks and what they report.
    sinks: crate::sinks::SinkManager,
    /// The running load generators, by source id.
    generators: std::sync::Mutex<std::collections::HashMap<GlobalId, tokio::task::JoinHandle<()>>>,
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
        let storage = Storage::open(&config.data_dir).map_err(AdapterError::Storage)?;
        let collections = storage_collections(catalog.state());
        let known: Vec<GlobalId> = collections.iter().map(|(id, _, _)| *id).collect();
        for (id, _, desc) in collections {
            storage.register(id, desc).map_err(AdapterError::Storage)?;
        }
        // A crash between dropping an item from the catalog and dropping its
        // log leaves an orphaned log: remove it now.
        for id in storage
            .stored_collections()
            .map_err(AdapterError::Storage)?
        {
            if !known.contains(&id) {
                info!(%id, "dropping the change log of a dropped collection");
                storage.drop_collection(id).map_err(AdapterError::Storage)?;
            }
        }
        let credentials = crate::credentials::Credentials::new(
            config.extra_ca_bundle.clone(),
            config.aws_principal.clone(),
            &config.credentials,
        );
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(credentials.clone().discover_principal());
        }
        let progress = catalog.sink_progress()?.into_iter().collect();
        let (sinks, sink_events) = crate::sinks::SinkManager::new(
            storage.clone(),
            credentials,
            config.data_dir.clone(),
            progress,
        );
        let coordinator = Arc::new(Coordinator {
            catalog: Mutex::new(catalog),
            config,
            sinks,
            storage,
            write_lock: Mutex::new(()),
            batches: BatchCache::default(),
            generators: Default::default(),
        });
        coordinator.spawn_background_tasks();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(crate::sinks::run_event_loop(
                Arc::downgrade(&coordinator),
                sink_events,
            ));
        }
        {
            let catalog = coordinator
                .catalog
                .try_lock()
                .map_err(|_| AdapterError::Internal("catalog locked during start-up".into()))?;
            for item in catalog.state().items() {
                if let ItemDefinition::Source(source) = &item.definition
                    && source.parent.is_none()
                {
                    coordinator.start_generator(catalog.state(), item.id, source.clone());
                }
            }
            let sinks: Vec<GlobalId> = catalog
                .state()
                .items()
                .filter(|i| matches!(i.definition, ItemDefinition::Sink(_)))
                .map(|i| i.id)
                .collect();
            drop(catalog);
            let mut catalog = coordinator
                .catalog
                .try_lock()
                .map_err(|_| AdapterError::Internal("catalog locked during start-up".into()))?;
            for sink in sinks {
                coordinator.start_sink(&mut catalog, sink)?;
            }
        }
        Ok(coordinator)
    }

    /// Starts (or restarts, or pauses) a sink and records a pause.
    fn start_sink(&self, catalog: &mut Catalog, sink: GlobalId) -> Result<(), AdapterError> {
        if let Some((status, error)) = self.sinks.start(catalog, sink)? {
            catalog.record_sink_status_if_changed(&SinkStatusEvent {
                occurred_at: Timestamp::now().millis(),
                sink_id: sink,
                status: status.to_string(),
                error,
                details: None,
                replica_id: None,
            })?;
        }
        Ok(())
    }

    /// Restarts every sink of a cluster (its replicas changed).
    fn restart_cluster_sinks(
        &self,
        catalog: &mut Catalog,
        cluster: floe_repr::ClusterId,
    ) -> Result<(), AdapterError> {
        for sink in crate::sinks::sinks_on_cluster(catalog.state(), cluster) {
            self.start_sink(catalog, sink)?;
        }
        Ok(())
    }

    /// Records what a sink task reported.
    pub(crate) async fn record_sink_event(
        &self,
        event: crate::sinks::SinkEvent,
    ) -> Result<(), AdapterError> {
        let mut catalog = self.catalog.lock().await;
        let sink = match &event {
            crate::sinks::SinkEvent::Status { sink, .. }
            | crate::sinks::SinkEvent::Statistics { sink, .. }
            | crate::sinks::SinkEvent::Progress { sink, .. } => *sink,
        };
        // A dropped sink's last words are not recorded.
        if catalog.state().item(sink).is_none() {
            return Ok(());
        }
        let (status, progress) = self.sinks.apply(&event);
        if let Some(status) = status {
            catalog.record_sink_status_if_changed(&status)?;
        }
        if let Some((sink, progress)) = progress {
            catalog.set_sink_progress(sink, &progress)?;
        }
        Ok(())
    }

    /// Starts the load generator of a source.
    fn start_generator(
        &self,
        state: &floe_catalog::CatalogState,
        id: GlobalId,
        definition: floe_sql::catalog::SourceDefinition,
    ) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let subsources = state
            .items()
            .filter_map(|item| match &item.definition {
                ItemDefinition::Source(source) => match &source.parent {
                    Some((parent, output)) if *parent == id => Some((output.clone(), item.id)),
                    _ => None,
                },
                _ => None,
            })
            .collect();
        let outputs = crate::sources::GeneratorOutputs {
            source: id,
            subsources,
        };
        let task = runtime.spawn(crate::sources::run_generator(
            self.storage.clone(),
            definition,
            outputs,
        ));
        if let Some(previous) = self
            .generators
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, task)
        {
            previous.abort();
        }
    }

    /// Advances every collection's upper with the wall clock (once a second)
    /// and compacts change logs (every ten seconds). Runs until the
    /// coordinator is dropped.
    fn spawn_background_tasks(self: &Arc<Self>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let weak = Arc::downgrade(self);
        runtime.spawn(async move {
            let mut interval = tokio::time::interval(std::time::Duration::from_millis(1000));
            let mut ticks: u64 = 0;
            loop {
                interval.tick().await;
                let Some(coordinator) = weak.upgrade() else {
                    return;
                };
                let storage = coordinator.storage.clone();
                drop(coordinator);
                ticks += 1;
                let compact = ticks.is_multiple_of(10);
                let result = tokio::task::spawn_blocking(move || {
                    storage.tick()?;
                    if compact {
                        storage.compact()?;
                    }
                    Ok::<_, floe_storage::StorageError>(())
                })
                .await;
                match result {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => tracing::warn!(error = %e, "advancing frontiers failed"),
                    Err(e) => tracing::warn!(error = %e, "frontier task failed"),
                }
            }
        });
    }

    /// A query engine session for `statement`: the user tables it reads.
    async fn engine_for(
        &self,
        statement: &sqlparser::ast::Statement,
    ) -> Result<datafusion::execution::context::SessionContext, AdapterError> {
        let mut names = std::collections::BTreeSet::new();
        let _ = sqlparser::ast::visit_relations(statement, |relation| {
            // `schema.item` or `materialize.schema.item` (the planner qualified them).
            let parts = relation.0.as_slice();
            if let [.., schema, item] = parts
                && parts.len() <= 3
                && let (Some(schema), Some(item)) = (schema.as_ident(), item.as_ident())
            {
                names.insert((schema.value.clone(), item.value.clone()));
            }
            std::ops::ControlFlow::<()>::Continue(())
        });
        self.engine_reading(Some(names)).await
    }

    /// A query engine session with the named builtin relations and user tables
    /// (`(schema, name)`; every one when `None`): building a relation or converting a
    /// table nobody reads would only cost time (the sink status history grows for as
    /// long as the server runs).
    async fn engine_reading(
        &self,
        referenced: Option<std::collections::BTreeSet<(String, String)>>,
    ) -> Result<datafusion::execution::context::SessionContext, AdapterError> {
        let catalog = self.catalog.lock().await;
        let reads = |name: &str| {
            referenced
                .as_ref()
                .is_none_or(|names| names.contains(&("mz_internal".to_string(), name.to_string())))
        };
        let history = if reads("mz_sink_statuses") || reads("mz_sink_status_history") {
            catalog.sink_status_history()?
        } else {
            Vec::new()
        };
        let usage = self.storage.usage();
        let progress = self.sinks.progress();
        let system = self.system_context(&catalog, &history, &usage, &progress);
        let context = query::session_context(&system, referenced.as_ref())?;
        let mut tables = Vec::new();
        for (id, name, desc) in storage_collections(catalog.state()) {
            if let Some(referenced) = &referenced
                && !referenced.contains(&(name.schema.clone(), name.item.clone()))
            {
                continue;
            }
            tables.push(self.batches.table(&self.storage, id, &name, &desc)?);
        }
        drop(catalog);
        register_tables(&context, tables)?;
        Ok(context)
    }

    /// Takes a chunk of `COPY ... FROM STDIN` data.
    pub fn copy_data(&self, session: &mut Session, data: &[u8]) {
        if let Some(copy) = session.copy.as_mut() {
            copy.feed(data);
        }
    }

    /// Ends a `COPY ... FROM STDIN`: writes every row, or none. Returns the
    /// number of rows.
    pub async fn copy_done(&self, session: &mut Session) -> Result<usize, AdapterError> {
        let Some(mut copy) = session.copy.take() else {
            return Err(AdapterError::Internal("no COPY in progress".into()));
        };
        copy.finish();
        if let Some(error) = copy.error() {
            return Err(error);
        }
        let rows = std::mem::take(&mut copy.rows);
        let _write = self.write_lock.lock().await;
        // Only defaults are evaluated: no user table is read.
        let engine = self.engine_reading(Some(Default::default())).await?;
        tables::copy_in(&engine, &self.storage, &copy.plan, rows).await
    }

    /// Abandons a `COPY ... FROM STDIN` the client failed.
    pub fn copy_fail(&self, session: &mut Session) {
        session.copy = None;
    }

    /// Whether the catalog holds no user objects.
    pub async fn is_empty(&self) -> bool {
        self.catalog.lock().await.state().items().next().is_none()
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
        self.sequence(session, plan, notices).await
    }

    /// The result shape of a statement, without running it (extended
    /// protocol `Describe`). `None` for statements that return no rows.
    pub async fn describe(
        &self,
        session: &mut Session,
        statement: Statement,
    ) -> Result<Described, AdapterError> {
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
    ) -> Result<Described, AdapterError> {
        // Parameters are typed by what the engine infers for them in a query.
        let mut parameters = Vec::new();
        let columns = self
            .describe_columns(session, statement, &mut parameters)
            .await?;
        Ok(Described {
            columns,
            parameters,
        })
    }

    async fn describe_columns(
        &self,
        session: &Session,
        statement: Statement,
        parameters: &mut Vec<Option<floe_repr::PgType>>,
    ) -> Result<Option<Vec<ColumnDesc>>, AdapterError> {
        let catalog = self.catalog.lock().await;
        let context = SessionContext {
            cluster: session.get("cluster")?,
        };
        let mut notices = Vec::new();
        match floe_sql::plan(catalog.state(), &context, statement, &mut notices)? {
            Plan::Select(select) => {
                drop(catalog);
                let engine = self.engine_for(&select.query).await?;
                let plan = query::logical_plan(&engine, *select.query).await?;
                *parameters = crate::params::parameter_types(&plan);
                Ok(Some(query::describe(&plan)))
            }
            Plan::ShowVariable(show) => Ok(Some(show_variable_desc(&show.name))),
            Plan::Insert(insert) if insert.returning.is_none() => {
                // `VALUES ($1, $2)`: each parameter takes its column's type.
                *parameters = crate::params::insert_parameter_types(&insert);
                Ok(None)
            }
            Plan::Insert(floe_sql::dml::InsertPlan {
                name,
                desc,
                returning: Some(items),
                ..
            })
            | Plan::Update(floe_sql::dml::UpdatePlan {
                name,
                desc,
                returning: Some(items),
                ..
            })
            | Plan::Delete(floe_sql::dml::DeletePlan {
                name,
                desc,
                returning: Some(items),
                ..
            }) => {
                drop(catalog);
                let engine = self
                    .engine_reading(Some(
                        [(name.schema.clone(), name.item.clone())]
                            .into_iter()
                            .collect(),
                    ))
                    .await?;
                Ok(Some(
                    tables::returning_desc(&engine, &name, &desc, &items).await?,
                ))
            }
            _ => Ok(None),
        }
    }

    fn system_context<'a>(
        &'a self,
        catalog: &'a Catalog,
        history: &'a [SinkStatusEvent],
        usage: &'a [floe_storage::CollectionUsage],
        progress: &'a std::collections::HashMap<GlobalId, floe_catalog::SinkProgress>,
    ) -> SystemContext<'a> {
        SystemContext {
            catalog: catalog.state(),
            environment_id: catalog.environment_id(),
            aws_principal: self.sinks.credentials().principal(),
            sink_status_history: history,
            storage_usage: usage,
            sink_progress: progress,
            now_ms: Timestamp::now().millis(),
        }
    }

    async fn sequence(
        &self,
        session: &mut Session,
        plan: Plan,
        notices: &mut Vec<Notice>,
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
                // Sinks using the secret (through their connections) reconnect with it.
                for sink in crate::sinks::sinks_using(catalog.state(), plan.id) {
                    self.start_sink(&mut catalog, sink)?;
                }
                command("ALTER SECRET")
            }
            Plan::CreateConnection(plan) => {
                let is_aws = matches!(plan.definition, ConnectionDefinition::Aws(_));
                if plan.validate && !is_aws {
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
                        self.sinks
                            .credentials()
                            .validate_catalog(&config)
                            .await
                            .map_err(AdapterError::ConnectionValidation)?;
                    }
                }
                let validate_aws = plan.validate && is_aws;
                let id = {
                    let mut catalog = self.catalog.lock().await;
                    catalog.create_item(
                        plan.name,
                        ItemDefinition::Connection(plan.definition),
                        plan.create_sql,
                        &plan.inline_secrets,
                    )?
                };
                // An AWS connection's external id names the connection, so it is
                // validated once created, and dropped again when validation fails.
                if validate_aws && let Err(error) = self.validate_aws_connection(id).await {
                    let mut catalog = self.catalog.lock().await;
                    catalog.drop_objects(&[id], &[], &[])?;
                    return Err(error);
                }
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
                    Some(config) => self
                        .sinks
                        .credentials()
                        .validate_catalog(&config)
                        .await
                        .map_err(AdapterError::ConnectionValidation)?,
                    None => self.validate_aws_connection(plan.id).await?,
                }
                command("VALIDATE CONNECTION")
            }
            Plan::CreateSink(plan) => {
                // A table that exists and is not this sink's, or a missing
                // namespace, refuses the sink. When the catalog cannot be
                // asked (unreachable, credentials refused), the sink is
                // created and checks again when it starts, stalling with the
                // cause until it is fixed; the client is told now.
                match self.purify_sink(&plan.definition).await {
                    Ok(()) => {}
                    Err(AdapterError::SinkCheck(error))
                        if !matches!(
                            error.kind,
                            floe_sink::ErrorKind::AlreadyExists
                                | floe_sink::ErrorKind::NamespaceNotFound
                        ) =>
                    {
                        notices.push(Notice {
                            message: format!("could not check the Iceberg table before creating the sink: {error}"),
                            hint: Some(
                                "The sink checks again when it starts; until the catalog answers, mz_internal.mz_sink_statuses shows it stalled with the cause."
                                    .into(),
                            ),
                        });
                    }
                    Err(other) => return Err(other),
                }
                let mut catalog = self.catalog.lock().await;
                let from = plan.definition.from;
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
                // The sink reads the relation from its beginning: hold it.
                self.storage
                    .set_read_hold(
                        from,
                        &crate::sink_input::CollectionInput::holder(id),
                        Timestamp(0),
                    )
                    .map_err(AdapterError::Storage)?;
                info!(%id, "created sink");
                self.start_sink(&mut catalog, id)?;
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
                // A new version: the restart commits everything pending.
                self.start_sink(&mut catalog, plan.id)?;
                command("ALTER SINK")
            }
            Plan::CreateTable(plan) => {
                let mut catalog = self.catalog.lock().await;
                let desc = plan.definition.desc.clone();
                let id = catalog.create_item(
                    plan.name,
                    ItemDefinition::Table(plan.definition),
                    plan.create_sql,
                    &[],
                )?;
                // The catalog entry first; its log is created now, and again
                // at start-up if a crash came in between.
                self.storage
                    .register(id, desc)
                    .map_err(AdapterError::Storage)?;
                command("CREATE TABLE")
            }
            Plan::CreateSource(plan) => {
                let mut catalog = self.catalog.lock().await;
                let parent_desc = plan.definition.desc.clone();
                let definition = plan.definition.clone();
                let subsource_outputs: Vec<(String, floe_repr::RelationDesc)> = plan
                    .subsources
                    .iter()
                    .map(|(_, output, desc)| (output.clone(), desc.clone()))
                    .collect();
                let parent_name = plan.name.clone();
                let subsources = plan
                    .subsources
                    .iter()
                    .map(|(name, output, _)| {
                        (
                            name.clone(),
                            format!(
                                "CREATE SUBSOURCE \"{}\".\"{}\".\"{}\" OF SOURCE \"{}\".\"{}\".\"{}\" (REFERENCE = '{output}')",
                                name.database, name.schema, name.item,
                                parent_name.database, parent_name.schema, parent_name.item
                            ),
                        )
                    })
                    .collect();
                let (id, subsource_ids) = catalog.create_source(
                    plan.name,
                    ItemDefinition::Source(plan.definition),
                    plan.create_sql,
                    subsources,
                    |parent, index| {
                        let (output, desc) = &subsource_outputs[index];
                        ItemDefinition::Source(floe_sql::catalog::SourceDefinition {
                            desc: desc.clone(),
                            parent: Some((parent, output.clone())),
                            ..definition.clone()
                        })
                    },
                )?;
                self.storage
                    .register(id, parent_desc)
                    .map_err(AdapterError::Storage)?;
                for (subsource, (_, desc)) in subsource_ids.iter().zip(&subsource_outputs) {
                    self.storage
                        .register(*subsource, desc.clone())
                        .map_err(AdapterError::Storage)?;
                }
                self.start_generator(catalog.state(), id, definition);
                info!(%id, "created source");
                command("CREATE SOURCE")
            }
            Plan::CopyFrom(plan) => {
                let columns = plan.columns.len();
                session.copy = Some(Box::new(crate::copy::CopyState::new(plan)));
                Ok(ExecuteResponse::CopyIn { columns })
            }
            Plan::Insert(plan) => {
                let _write = self.write_lock.lock().await;
                let engine = self.engine_for(&plan.source).await?;
                tables::insert(&engine, &self.storage, plan).await
            }
            Plan::Update(plan) => {
                let _write = self.write_lock.lock().await;
                let engine = self.engine_for(&plan.query).await?;
                tables::update(&engine, &self.storage, plan).await
            }
            Plan::Delete(plan) => {
                let _write = self.write_lock.lock().await;
                let engine = self.engine_for(&plan.query).await?;
                tables::delete(&engine, &self.storage, plan).await
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
                self.restart_cluster_sinks(&mut catalog, plan.id)?;
                command("ALTER CLUSTER")
            }
            Plan::CreateClusterReplica(plan) => {
                let mut catalog = self.catalog.lock().await;
                catalog.create_replica(plan.cluster, &plan.name, &plan.size)?;
                self.restart_cluster_sinks(&mut catalog, plan.cluster)?;
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
                let holds: Vec<(GlobalId, GlobalId)> = sinks
                    .iter()
                    .filter_map(
                        |sink| match catalog.state().item(*sink).map(|i| &i.definition) {
                            Some(ItemDefinition::Sink(definition)) => {
                                Some((definition.from, *sink))
                            }
                            _ => None,
                        },
                    )
                    .collect();
                let collections: Vec<GlobalId> = plan
                    .items
                    .iter()
                    .filter(|id| {
                        matches!(
                            catalog.state().item(**id).map(|i| &i.definition),
                            Some(ItemDefinition::Table(_) | ItemDefinition::Source(_))
                        )
                    })
                    .copied()
                    .collect();
                catalog.drop_objects(&plan.items, &plan.replicas, &plan.clusters)?;
                for (from, sink) in holds {
                    if !collections.contains(&from) {
                        self.storage
                            .drop_read_hold(from, &crate::sink_input::CollectionInput::holder(sink))
                            .map_err(AdapterError::Storage)?;
                    }
                }
                for id in collections {
                    if let Some(task) = self
                        .generators
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(&id)
                    {
                        task.abort();
                    }
                    self.storage
                        .drop_collection(id)
                        .map_err(AdapterError::Storage)?;
                    self.batches.forget(id);
                }
                for (cluster, _) in &plan.replicas {
                    if !plan.clusters.contains(cluster) {
                        self.restart_cluster_sinks(&mut catalog, *cluster)?;
                    }
                }
                for sink in sinks {
                    self.sinks.forget(sink);
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
                let engine = self.engine_for(&select.query).await?;
                let plan = query::logical_plan(&engine, *select.query).await?;
                let (desc, rows) = query::execute(&engine, plan).await?;
                Ok(ExecuteResponse::Rows {
                    desc,
                    rows,
                    tag: None,
                })
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
                        tag: None,
                    });
                }
                let value = session.get(&show.name)?;
                Ok(ExecuteResponse::Rows {
                    desc: show_variable_desc(&show.name),
                    rows: vec![vec![Datum::Text(value)]],
                    tag: None,
                })
            }
            Plan::SetVariable(set) => {
                if set.name == "cluster"
                    && let Some(name) = &set.value
                {
                    let catalog = self.catalog.lock().await;
                    if catalog.state().cluster_by_name(name).is_none() {
                        return Err(AdapterError::InvalidVariableValue {
                            name: "cluster".into(),
                            value: name.clone(),
                            hint: Some(format!("There is no cluster named \"{name}\".")),
                        });
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

    /// Checks what CREATE SINK needs from the catalog, over the network and
    /// before anything is written: the namespace exists (created on floe's
    /// embedded catalog), and the table is missing.
    async fn purify_sink(
        &self,
        definition: &floe_sql::catalog::SinkDefinition,
    ) -> Result<(), AdapterError> {
        let as_check = |e: AdapterError| match e {
            AdapterError::SinkCheck(e) | AdapterError::ConnectionValidation(e) => {
                AdapterError::SinkCheck(e)
            }
            other => AdapterError::SinkCheck(floe_sink::SinkError::new(
                floe_sink::ErrorKind::InvalidConfig,
                other.to_string(),
            )),
        };
        let (connection, environment_id) = {
            let catalog = self.catalog.lock().await;
            let Some(ItemDefinition::Connection(ConnectionDefinition::IcebergCatalog(iceberg))) =
                catalog
                    .state()
                    .item(definition.connection)
                    .map(|i| i.definition.clone())
            else {
                return Err(AdapterError::Internal(
                    "sink without an Iceberg catalog connection".into(),
                ));
            };
            let config = resolve_catalog_config(
                &catalog,
                &self.config.data_dir,
                Some(definition.connection),
                &iceberg,
                &[],
            )
            .map_err(as_check)?;
            (
                self.sinks
                    .credentials()
                    .sink_connection(config)
                    .map_err(AdapterError::SinkCheck)?,
                catalog.environment_id().to_string(),
            )
        };
        let namespace = floe_sink::Namespace::parse(&definition.namespace)
            .map_err(AdapterError::ConnectionValidation)?;
        if let CatalogConfig::Local {
            database,
            warehouse,
        } = &connection.catalog
        {
            let local = floe_sink::LocalCatalog::open(database, warehouse)
                .map_err(AdapterError::ConnectionValidation)?;
            if !local
                .namespace_exists(&namespace)
                .map_err(AdapterError::ConnectionValidation)?
            {
                local
                    .create_namespace(&namespace, &Default::default())
                    .map_err(AdapterError::ConnectionValidation)?;
            }
        }
        floe_sink::sink::check_sink_table(
            &connection,
            self.sinks.credentials().http(),
            &namespace,
            &definition.table,
            "",
            &environment_id,
        )
        .await
        .map_err(AdapterError::SinkCheck)?;
        Ok(())
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
                Some(url) => floe_sink::local::file_uri_path(url).ok_or_else(|| {
                    AdapterError::Plan(floe_sql::PlanError::invalid(format!(
                        "invalid CONNECTION: WAREHOUSE of a local catalog must be an absolute file:// URL such as 'file:///srv/warehouse', not '{url}'"
                    )))
                })?,
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
