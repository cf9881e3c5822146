//! The coordinator: plans statements against the catalog and sequences them
//! (`crate::sequence`).
//!
//! A statement flows: parse -> plan (pure, under the catalog lock) ->
//! purify (network checks, without the lock) -> sequence (catalog ops in one
//! transaction, checked against the catalog as it is then) -> implications
//! of the diff (`crate::implications`) -> response.

use std::path::PathBuf;
use std::sync::Arc;

use floe_catalog::{Catalog, SinkStatusEvent};
use floe_repr::{ColumnDesc, Datum, GlobalId, PgType, Timestamp};
use floe_sql::catalog::PlanCatalog;
use floe_sql::plan::*;
use floe_sql::{PlanNotice, SessionContext};
use floe_sql_parser::ast::Statement;
use tokio::sync::Mutex;
use tracing::{info, warn};

use crate::batch_cache::BatchCache;
use crate::error::AdapterError;
use crate::query;
use crate::session::{Session, TransactionStatus};
use crate::system::SystemContext;
use crate::tables::{self, register_tables, storage_collections};
use floe_storage::Storage;

mod status;
pub use status::{OperationalStatus, SinkState, SourceState};

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
    /// `COPY ... TO STDOUT`: the lines to send (text or CSV).
    CopyOut {
        columns: usize,
        lines: Vec<Vec<u8>>,
    },
    /// `SUBSCRIBE ...`: rows as they come, each sent at once, until the client goes
    /// away, the query is canceled or the subscription fails; as COPY text lines
    /// (`copy`) for `COPY (SUBSCRIBE ...) TO STDOUT`.
    Subscribe {
        columns: Vec<ColumnDesc>,
        copy: bool,
        rows: crate::subscribe::SubscribeLines,
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
    pub(crate) catalog: Mutex<Catalog>,
    pub(crate) config: CoordinatorConfig,
    /// Tables' and sources' change logs.
    pub(crate) storage: Arc<Storage>,
    /// Orders writes: a write that reads a table (UPDATE, DELETE, INSERT ... SELECT, a
    /// transaction's COMMIT, ALTER TABLE) holds it exclusively, so that it writes on what
    /// it read and concurrent UPDATEs cannot lose each other. A write that reads no table
    /// (INSERT ... VALUES, COPY) holds it shared: its changes do not depend on other
    /// writes, storage checks its keys as it appends, and concurrent ones share one
    /// durable commit.
    pub(crate) write_lock: tokio::sync::RwLock<()>,
    /// Tables converted for the query engine, by contents version.
    pub(crate) batches: BatchCache,
    /// The physical plans of queries that run again (`floe_query::plan_cache`).
    pub(crate) plans: floe_query::plan_cache::PlanCache,
    /// The sink tasks and what they report.
    pub(crate) sinks: crate::sinks::SinkManager,
    /// The running load generators.
    pub(crate) generators: crate::sources::Generators,
    /// The running Postgres sources.
    pub(crate) postgres_sources: crate::postgres_sources::PostgresSources,
    /// Sessions and sink commit timings, for `/metrics` and the status page.
    pub(crate) metrics: Arc<crate::metrics::AdapterMetrics>,
    /// The replicas and the materialized views they maintain.
    pub(crate) views: crate::views::Views,
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
            crate::system::builtins()
                .map(|b| (b.schema.to_string(), b.name.to_string()))
                .collect(),
        );
        info!(
            data_dir = %config.data_dir.display(),
            items = catalog.state().items().count(),
            "catalog opened"
        );
        let storage = Storage::open(&config.data_dir)?;
        let credentials = crate::credentials::Credentials::new(
            config.extra_ca_bundle.clone(),
            config.aws_principal.clone(),
            &config.credentials,
        );
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(credentials.clone().discover_principal());
        }
        let progress = catalog.sink_progress()?.into_iter().collect();
        let views = crate::views::Views::default();
        let (sinks, sink_events) = crate::sinks::SinkManager::new(
            storage.clone(),
            credentials,
            config.data_dir.clone(),
            progress,
            views.errors(),
        );
        let (postgres_sources, source_events) =
            crate::postgres_sources::PostgresSources::new(storage.clone());
        let coordinator = Arc::new(Coordinator {
            postgres_sources,
            catalog: Mutex::new(catalog),
            config,
            sinks,
            storage,
            write_lock: tokio::sync::RwLock::new(()),
            batches: BatchCache::default(),
            plans: Default::default(),
            generators: Default::default(),
            metrics: Default::default(),
            views,
        });
        coordinator.spawn_background_tasks();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(crate::sinks::run_event_loop(
                Arc::downgrade(&coordinator),
                sink_events,
            ));
            runtime.spawn(crate::postgres_sources::run_event_loop(
                Arc::downgrade(&coordinator),
                source_events,
            ));
        }
        coordinator.start_up()?;
        Ok(coordinator)
    }

    /// Brings storage, generators and sinks in line with the catalog: the
    /// implications of the diff from an empty catalog, after removing the logs
    /// of relations the catalog no longer has. An object that cannot start is
    /// reported (a log line; a sink shows `stalled` with the cause) and the
    /// rest starts.
    fn start_up(&self) -> Result<(), AdapterError> {
        let mut catalog = self
            .catalog
            .try_lock()
            .map_err(|_| AdapterError::Internal("catalog locked during start-up".into()))?;
        crate::implications::drop_orphaned_collections(&self.storage, catalog.state())?;
        refresh_view_shapes(&mut catalog);
        let diff = floe_catalog::CatalogDiff::from_empty(catalog.state());
        if let Err(error) = self.apply_implications(&mut catalog, &diff) {
            warn!(error = %error, "not every catalog object started");
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
            | crate::sinks::SinkEvent::Progress { sink, .. }
            | crate::sinks::SinkEvent::Maintenance { sink, .. } => *sink,
        };
        // A dropped sink's last words are not recorded.
        if catalog.state().item(sink).is_none() {
            return Ok(());
        }
        if let crate::sinks::SinkEvent::Statistics { sink, update } = &event {
            self.metrics.observe_sink_statistics(*sink, update);
        }
        let (status, progress) = self.sinks.apply(&event);
        // SQLite commits: off the async worker (see `off_worker`).
        crate::implications::off_worker(|| {
            if let Some(status) = status {
                catalog.record_sink_status_if_changed(&status)?;
            }
            if let Some((sink, progress)) = progress {
                catalog.set_sink_progress(sink, &progress)?;
            }
            Ok(())
        })
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

    /// A query engine session for `statement`: the user tables it reads and the
    /// catalog functions it calls.
    pub(crate) async fn engine_for(
        &self,
        statement: &sqlparser::ast::Statement,
    ) -> Result<datafusion::execution::context::SessionContext, AdapterError> {
        let functions = crate::pg_functions::called(statement);
        self.engine_reading(Some(referenced_names(statement)), Some(&functions))
            .await
    }

    /// A query engine session with the named builtin relations and user tables
    /// (`(schema, name)`; every one when `None`) and the named catalog functions
    /// (`pg_functions`; every one when `None`): building a relation, converting a
    /// table or gathering the catalog for functions nobody uses would only cost time
    /// (the sink status history grows for as long as the server runs).
    pub(crate) async fn engine_reading(
        &self,
        referenced: Option<std::collections::BTreeSet<(String, String)>>,
        functions: Option<&std::collections::BTreeSet<String>>,
    ) -> Result<datafusion::execution::context::SessionContext, AdapterError> {
        let reads = |name: &str| {
            referenced
                .as_ref()
                .is_none_or(|names| names.contains(&("mz_internal".to_string(), name.to_string())))
        };
        // Before the catalog is locked: the replicas' workers measure while this thread waits.
        let arrangement_sizes = if reads("mz_arrangement_sizes") {
            crate::implications::off_worker(|| self.views.arrangement_sizes())
        } else {
            Vec::new()
        };
        let catalog = self.catalog.lock().await;
        let history = if reads("mz_sink_statuses") || reads("mz_sink_status_history") {
            catalog.sink_status_history()?
        } else {
            Vec::new()
        };
        let source_history = if reads("mz_source_statuses") || reads("mz_source_status_history") {
            catalog.source_status_history()?
        } else {
            Vec::new()
        };
        let usage = self.storage.usage();
        let progress = self.sinks.progress();
        let source_statistics = self.postgres_sources.statistics();
        let maintenance = self.sinks.maintenance();
        let mut system = self.system_context(&catalog, &history, &usage, &progress);
        system.sink_maintenance = &maintenance;
        system.source_status_history = &source_history;
        system.source_statistics = &source_statistics;
        system.arrangement_sizes = &arrangement_sizes;
        let context = query::session_context(&system, referenced.as_ref(), functions)?;
        floe_query::snapshot::snapshot_of(&context).set_revision(catalog.revision());
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
            session.fail_transaction();
            return Err(error);
        }
        let result = match session.transaction.as_mut().and_then(|t| t.writes_mut()) {
            Some(pending) => {
                let mut target = tables::WriteTarget::Transaction {
                    storage: &self.storage,
                    pending,
                };
                tables::copy_in(&mut target, &copy.plan, copy.rows).await
            }
            None => {
                // Shared: a COPY reads no table.
                let _write = self.write_lock.read().await;
                let mut target = tables::WriteTarget::Storage(&self.storage);
                tables::copy_in(&mut target, &copy.plan, copy.rows).await
            }
        };
        if result.is_err() {
            session.fail_transaction();
        }
        result
    }

    /// Abandons a `COPY ... FROM STDIN` the client failed.
    pub fn copy_fail(&self, session: &mut Session) {
        session.copy = None;
        session.fail_transaction();
    }

    /// Whether the catalog holds no user objects.
    pub async fn is_empty(&self) -> bool {
        self.catalog.lock().await.state().items().next().is_none()
    }

    /// Storage (the change logs of tables and sources), for tools and tests that
    /// work beside the coordinator, such as holding its writer lock.
    pub fn storage(&self) -> &Arc<Storage> {
        &self.storage
    }

    /// The data directory's fixed prefix of external ids.
    pub async fn environment_id(&self) -> String {
        self.catalog.lock().await.environment_id().to_string()
    }

    /// Binds a new session to the role it logged in as (see `crate::rbac`);
    /// `authenticated` says whether the client proved a password. Refused when
    /// an authenticated role no longer exists.
    pub async fn start_session(
        &self,
        session: &mut Session,
        authenticated: bool,
    ) -> Result<(), AdapterError> {
        let catalog = self.catalog.lock().await;
        let refused = |message: String| {
            floe_sql::PlanError::new(
                floe_repr::SqlState::INVALID_AUTHORIZATION_SPECIFICATION,
                message,
            )
        };
        let role = crate::rbac::session_role(catalog.state(), &session.user, authenticated)
            .ok_or_else(|| refused(format!("role \"{}\" does not exist", session.user)))?;
        // NOLOGIN is kept even without authentication, as in PostgreSQL.
        if catalog.state().role(role).is_some_and(|role| !role.login) {
            return Err(refused(format!(
                "role \"{}\" is not permitted to log in",
                session.user
            ))
            .into());
        }
        session.role = Some(role);
        Ok(())
    }

    /// The role a session runs as; a session the wire did not start (the
    /// quickstart script's) is bound on its first statement.
    fn bound_role(
        state: &floe_catalog::CatalogState,
        session: &mut Session,
    ) -> Result<floe_repr::RoleId, floe_sql::PlanError> {
        match session.role {
            Some(role) => Ok(role),
            None => {
                let role = crate::rbac::session_role(state, &session.user, false)
                    .unwrap_or(floe_sql::role::SUPERUSER_ROLE_ID);
                session.role = Some(role);
                Ok(role)
            }
        }
    }

    /// Executes one parsed statement.
    pub async fn execute(
        &self,
        session: &mut Session,
        statement: Statement,
        notices: &mut Vec<Notice>,
    ) -> Result<ExecuteResponse, AdapterError> {
        let result = self
            .execute_in_transaction(session, statement, notices)
            .await;
        // Parameters belong to the one statement they were bound for.
        session.parameters = None;
        result
    }

    async fn execute_in_transaction(
        &self,
        session: &mut Session,
        statement: Statement,
        notices: &mut Vec<Notice>,
    ) -> Result<ExecuteResponse, AdapterError> {
        // Inside a failed transaction block only its end is accepted.
        if session.transaction_status() == TransactionStatus::Failed
            && !is_transaction_end(&statement)
        {
            return Err(failed_transaction_error());
        }
        // Transaction control, and what a transaction block lets run.
        let result = match self.transaction_control(session, statement, notices).await {
            Ok(crate::sequence::Control::Run(statement)) => {
                self.execute_inner(session, *statement, notices).await
            }
            Ok(crate::sequence::Control::Done(response)) => Ok(response),
            Err(error) => Err(error),
        };
        if result.is_err() {
            session.fail_transaction();
        }
        result
    }

    pub(crate) async fn execute_inner(
        &self,
        session: &mut Session,
        statement: Statement,
        notices: &mut Vec<Notice>,
    ) -> Result<ExecuteResponse, AdapterError> {
        // Cursors belong to the session's transaction block, not to a plan.
        let statement = match statement {
            Statement::Declare(declare) => {
                return self.declare_cursor(session, declare, notices).await;
            }
            Statement::Fetch(fetch) => return self.fetch(session, fetch).await,
            Statement::Close(name) => return self.close_cursor(session, &name),
            statement => statement,
        };
        let (plan, actor) = match session.parameters.take() {
            None => self.plan_checked(session, statement, notices).await?,
            // A query with its parameters read when it runs; the statement with the
            // values bound when it cannot be planned that way.
            Some(parameters) => match self.plan_checked(session, statement, notices).await {
                Ok((plan @ Plan::Select(_), actor)) => {
                    session.parameters = Some(parameters);
                    (plan, actor)
                }
                _ => {
                    self.plan_checked(session, parameters.bound.statement()?, notices)
                        .await?
                }
            },
        };
        let search_path = floe_sql::planner::parse_search_path(&session.get("search_path")?);
        // What the statement creates is owned by the session's role; its
        // `current_schema()` follows the session's search path.
        let sequenced = crate::pg_functions::SEARCH_PATH
            .scope(search_path, self.sequence(session, plan, notices));
        crate::rbac::ACTOR.scope(actor, sequenced).await
    }

    /// Plans a statement and checks the session's role may run the plan; the role is
    /// the one the plan acts as.
    pub(crate) async fn plan_checked(
        &self,
        session: &mut Session,
        statement: Statement,
        notices: &mut Vec<Notice>,
    ) -> Result<(Plan, floe_repr::RoleId), AdapterError> {
        let plan = {
            let catalog = self.catalog.lock().await;
            let context =
                SessionContext::new(session.get("cluster")?, &session.get("search_path")?);
            let mut plan_notices = Vec::new();
            let plan = floe_sql::plan(catalog.state(), &context, statement, &mut plan_notices);
            notices.extend(plan_notices.into_iter().map(Notice::from));
            let plan = plan?;
            let role = Self::bound_role(catalog.state(), session)?;
            crate::rbac::check_plan(catalog.state(), &session.user, role, &plan)?;
            (plan, role)
        };
        Ok(plan)
    }

    /// The catalog's revision: a description kept outside the coordinator holds
    /// while it is the same.
    pub async fn catalog_revision(&self) -> u64 {
        self.catalog.lock().await.revision()
    }

    /// The result shape of a statement, without running it (extended
    /// protocol `Describe`). `None` for statements that return no rows.
    pub async fn describe(
        &self,
        session: &mut Session,
        statement: Statement,
    ) -> Result<Described, AdapterError> {
        if session.transaction_status() == TransactionStatus::Failed
            && !is_transaction_end(&statement)
        {
            return Err(failed_transaction_error());
        }
        let result = self.describe_inner(session, statement).await;
        // As in Postgres, an error at any step of the extended protocol
        // aborts the transaction block.
        if result.is_err() {
            session.fail_transaction();
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
        // DDL returns no rows and is checked when it runs (in a transaction
        // block, at COMMIT), as in Postgres.
        if crate::transaction::ddl_in_transaction(&statement).is_some() {
            return Ok(None);
        }
        match &statement {
            Statement::Fetch(fetch) => {
                return crate::cursor::fetch_columns(session, &fetch.name)
                    .map(Some)
                    .ok_or_else(|| AdapterError::Query {
                        code: floe_repr::SqlState::INVALID_CURSOR_NAME,
                        message: format!(
                            "cursor \"{}\" does not exist",
                            floe_sql::planner::normalize_ident(&fetch.name)
                        ),
                    });
            }
            Statement::Declare(_) | Statement::Close(_) => return Ok(None),
            _ => {}
        }
        let catalog = self.catalog.lock().await;
        let context = SessionContext::new(session.get("cluster")?, &session.get("search_path")?);
        let mut notices = Vec::new();
        match floe_sql::plan(catalog.state(), &context, statement, &mut notices)? {
            Plan::Select(select) => {
                drop(catalog);
                let engine = self.engine_for(&select.query).await?;
                // In a transaction, the tables as it first read them: the shapes the
                // statement will read when it runs.
                if let Some(transaction) = &session.transaction {
                    register_tables(&engine, transaction.pinned_tables())?;
                }
                // A plan kept for the statement as it is has no parameters; a
                // statement with parameters is kept as Describe answered it
                // (`floe_query::plan_cache`).
                let snapshot = floe_query::snapshot::snapshot_of(&engine);
                if let Some(kept) = self.plans.get(&select.query, &snapshot) {
                    return Ok(Some(kept.columns.clone()));
                }
                if let Some(described) = self.plans.description(&select.query, &snapshot) {
                    parameters.clone_from(&described.parameters);
                    return Ok(Some(described.columns.clone()));
                }
                let plan = query::logical_plan(&engine, (*select.query).clone()).await?;
                *parameters = crate::params::parameter_types(&plan.plan);
                let columns = query::describe(&plan);
                self.plans.keep_description(
                    *select.query,
                    &snapshot,
                    &plan.plan,
                    columns.clone(),
                    parameters.clone(),
                );
                Ok(Some(columns))
            }
            Plan::ShowVariable(show) => Ok(Some(show_variable_desc(&show.name))),
            Plan::Subscribe(subscribe) if !subscribe.copy => {
                drop(catalog);
                Ok(Some(self.subscribe_columns(subscribe).await?))
            }
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
                Ok(Some(tables::returning_desc(&name, &desc, &items).await?))
            }
            _ => Ok(None),
        }
    }

    fn system_context<'a>(
        &'a self,
        catalog: &'a Catalog,
        history: &'a [SinkStatusEvent],
        usage: &'a [floe_storage::CollectionUsage],
        progress: &'a std::collections::HashMap<GlobalId, floe_catalog::StoredSinkProgress>,
    ) -> SystemContext<'a> {
        SystemContext {
            catalog: catalog.state(),
            environment_id: catalog.environment_id(),
            aws_principal: self.sinks.credentials().principal(),
            sink_status_history: history,
            storage_usage: usage,
            sink_progress: progress,
            source_status_history: &[],
            source_statistics: crate::system::no_source_statistics(),
            now_ms: Timestamp::now().millis(),
            arrangement_sizes: &[],
            sink_maintenance: crate::system::no_sink_maintenance(),
            table_scans: self.batches.scans(),
        }
    }
}

/// The `(schema, item)` names of the relations a planned statement reads (the
/// planner qualified them: `schema.item` or `materialize.schema.item`).
pub(crate) fn referenced_names(
    statement: &sqlparser::ast::Statement,
) -> std::collections::BTreeSet<(String, String)> {
    let mut names = std::collections::BTreeSet::new();
    let _ = sqlparser::ast::visit_relations(statement, |relation| {
        let parts = relation.0.as_slice();
        if let [.., schema, item] = parts
            && parts.len() <= 3
            && let (Some(schema), Some(item)) = (schema.as_ident(), item.as_ident())
        {
            names.insert((schema.value.clone(), item.value.clone()));
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    names
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

pub(crate) fn show_variable_desc(name: &str) -> Vec<ColumnDesc> {
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

/// Brings the stored shapes of plain views up to date with this floe's planning
/// ([`crate::views::refreshed_view_shapes`]) once per build of floe: planning every
/// view is most of start-up with many views (200 views: 1.2-1.9 s of a debug
/// build's start, 0.1 s without), and a build plans a query as it did when it
/// stored the shape.
fn refresh_view_shapes(catalog: &mut floe_catalog::Catalog) {
    let build = planner_build();
    match catalog.views_planned_by() {
        Ok(Some(planned_by)) if planned_by == build => return,
        Ok(_) => {}
        Err(error) => warn!(error = %error, "the version that planned the views is unknown"),
    }
    let refreshed = crate::views::refreshed_view_shapes(catalog.state());
    if !refreshed.is_empty()
        && let Err(error) = catalog.transact(refreshed)
    {
        // Left unrecorded, so the next start tries again.
        warn!(error = %error, "the shapes of older views were not refreshed");
        return;
    }
    if let Err(error) = catalog.set_views_planned_by(&build) {
        warn!(error = %error, "the version that planned the views was not recorded");
    }
}

/// Which build of floe planned the stored view shapes: its version, and its
/// executable's size and modification time. Builds between releases share a version,
/// and one that changes a query's types must plan the views again; a copy of the same
/// executable plans them once more, which costs one slower start.
fn planner_build() -> String {
    let version = env!("CARGO_PKG_VERSION");
    let executable = std::env::current_exe()
        .and_then(std::fs::metadata)
        .ok()
        .and_then(|metadata| {
            let modified = metadata.modified().ok()?;
            let since_epoch = modified.duration_since(std::time::UNIX_EPOCH).ok()?;
            Some(format!("{}-{}", metadata.len(), since_epoch.as_nanos()))
        });
    match executable {
        Some(executable) => format!("{version}+{executable}"),
        // No executable to tell builds apart by: the version alone.
        None => version.to_string(),
    }
}
