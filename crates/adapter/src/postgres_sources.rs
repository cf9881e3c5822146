//! Running Postgres sources: one supervised task per source (`floe_postgres::spawn_source`)
//! whose cluster has a replica, and the bookkeeping of what the tasks report: statuses,
//! recorded durably in the catalog (`mz_source_status_history`), and statistics.
//!
//! The catalog holds a source as three kinds of items (see
//! [`floe_sql::catalog::Ingestion`]): the source, whose relation holds each subsource's
//! replication state, its progress relation, and one subsource per upstream table. The
//! task is built from all of them; adding or dropping a subsource restarts it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use floe_catalog::{Catalog, CatalogState, SourceStatusEvent};
use floe_postgres::{
    PgConnectionConfig, SourceHandle, SourceReporter, SourceSettings, SourceSpec, SourceStatistics,
    SourceStatus, SslMode, StatisticsSnapshot, SubsourceSpec,
};
use floe_repr::{GlobalId, ReplicaId, Timestamp};
use floe_sql::catalog::{
    Ingestion, ItemDefinition, PlanCatalog, PostgresConnection, PostgresSslMode, SourceDefinition,
    StringOrSecret,
};
use floe_storage::Storage;
use tokio::sync::mpsc;
use tracing::{info, warn};

use crate::error::AdapterError;

/// How long DROP SOURCE waits for the upstream server before it leaves the slot
/// behind with a notice.
pub const SLOT_DROP_TIMEOUT: Duration = Duration::from_secs(10);

/// A status change a source task reported.
#[derive(Debug)]
pub struct SourceEvent {
    /// The source, its progress relation or a subsource.
    pub object: GlobalId,
    /// The source whose task reported.
    pub source: GlobalId,
    /// The task that reported: a stopped task's late report is dropped.
    pub generation: u64,
    pub replica: Option<ReplicaId>,
    pub status: SourceStatus,
}

/// The reporter a source task calls; it forwards to the event loop.
struct Reporter {
    source: GlobalId,
    generation: u64,
    replica: Option<ReplicaId>,
    events: mpsc::UnboundedSender<SourceEvent>,
}

impl SourceReporter for Reporter {
    fn status(&self, object: GlobalId, status: SourceStatus) {
        let _ = self.events.send(SourceEvent {
            object,
            source: self.source,
            generation: self.generation,
            replica: self.replica,
            status,
        });
    }
}

/// One source's counters: those of tasks that ended, and the running task's.
#[derive(Default)]
struct Counters {
    ended: StatisticsSnapshot,
    running: Option<Arc<SourceStatistics>>,
}

impl Counters {
    /// Cumulative counters add up across tasks; positions and snapshot sizes are the
    /// furthest any task reached.
    fn total(&self) -> StatisticsSnapshot {
        let current = self
            .running
            .as_ref()
            .map(|s| s.snapshot())
            .unwrap_or_default();
        let ended = &self.ended;
        StatisticsSnapshot {
            messages_received: ended.messages_received + current.messages_received,
            bytes_received: ended.bytes_received + current.bytes_received,
            updates_staged: ended.updates_staged + current.updates_staged,
            updates_committed: ended.updates_committed + current.updates_committed,
            snapshot_records_known: ended
                .snapshot_records_known
                .max(current.snapshot_records_known),
            snapshot_records_staged: ended
                .snapshot_records_staged
                .max(current.snapshot_records_staged),
            offset_known: ended.offset_known.max(current.offset_known),
            offset_committed: ended.offset_committed.max(current.offset_committed),
        }
    }
}

/// The running Postgres source tasks.
pub struct PostgresSources {
    storage: Arc<Storage>,
    settings: SourceSettings,
    events: mpsc::UnboundedSender<SourceEvent>,
    running: Mutex<HashMap<GlobalId, SourceHandle>>,
    /// Bumped each time a source's task stops, so that reports of a stopped task that
    /// arrive late cannot overwrite what came after.
    generations: Mutex<HashMap<GlobalId, u64>>,
    counters: Mutex<HashMap<GlobalId, Counters>>,
}

fn locked<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl PostgresSources {
    pub fn new(storage: Arc<Storage>) -> (PostgresSources, mpsc::UnboundedReceiver<SourceEvent>) {
        let (events, receiver) = mpsc::unbounded_channel();
        (
            PostgresSources {
                storage,
                settings: SourceSettings::default(),
                events,
                running: Mutex::new(HashMap::new()),
                generations: Mutex::new(HashMap::new()),
                counters: Mutex::new(HashMap::new()),
            },
            receiver,
        )
    }

    fn generation(&self, source: GlobalId) -> u64 {
        locked(&self.generations).get(&source).copied().unwrap_or(0)
    }

    /// Stops a source's task, if it runs (a storage write it started finishes or not
    /// as a whole; the next task waits for it). Its later reports are ignored.
    pub fn stop(&self, source: GlobalId) {
        *locked(&self.generations).entry(source).or_insert(0) += 1;
        if let Some(handle) = locked(&self.running).remove(&source) {
            handle.abort();
        }
        let mut counters = locked(&self.counters);
        let entry = counters.entry(source).or_default();
        entry.ended = entry.total();
        entry.running = None;
    }

    /// Forgets a dropped source.
    pub fn forget(&self, source: GlobalId) {
        self.stop(source);
        locked(&self.counters).remove(&source);
    }

    /// (Re)starts a source's task on its cluster. Returns the statuses to record
    /// when it does not run: `paused` without a replica, `stalled` when it cannot
    /// even be configured (a secret it needs is gone, say).
    pub fn start(
        &self,
        catalog: &Catalog,
        source: GlobalId,
    ) -> Result<Vec<SourceStatusEvent>, AdapterError> {
        let state = catalog.state();
        let Some((cluster, _)) = postgres_source(state, source) else {
            return Ok(Vec::new());
        };
        self.stop(source);
        let parts = source_parts(state, source);
        let replica = state
            .cluster(cluster)
            .and_then(|cluster| cluster.replicas.first().map(|r| r.id));
        let Some(replica) = replica else {
            info!(%source, "postgres source paused: its cluster has no replica");
            return Ok(status_events(&parts, "paused", None, None, None));
        };
        let spec = match source_spec(catalog, source) {
            Ok(spec) => spec,
            Err(error) => {
                warn!(%source, error = %error, "postgres source cannot start");
                let message = error.to_string();
                return Ok(status_events(
                    &parts,
                    "stalled",
                    Some(&message),
                    error.hint(),
                    Some(replica),
                ));
            }
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return Ok(Vec::new());
        };
        let _guard = runtime.enter();
        let reporter = Arc::new(Reporter {
            source,
            generation: self.generation(source),
            replica: Some(replica),
            events: self.events.clone(),
        });
        let handle = floe_postgres::spawn_source(
            spec,
            self.storage.clone(),
            reporter,
            self.settings.clone(),
        );
        locked(&self.counters).entry(source).or_default().running = Some(handle.statistics());
        locked(&self.running).insert(source, handle);
        info!(%source, "postgres source started");
        Ok(Vec::new())
    }

    /// The status change to record for an event, unless it comes from a stopped task.
    pub fn event_status(&self, event: &SourceEvent) -> Option<SourceStatusEvent> {
        if event.generation != self.generation(event.source) {
            return None;
        }
        let (status, error, hint) = match &event.status {
            SourceStatus::Starting => ("starting", None, None),
            SourceStatus::Running => ("running", None, None),
            SourceStatus::Stalled { error, hint } => {
                ("stalled", Some(error.as_str()), hint.clone())
            }
        };
        status_events(&[event.object], status, error, hint, event.replica).pop()
    }

    /// Every source's statistics (since this process started).
    pub fn statistics(&self) -> HashMap<GlobalId, StatisticsSnapshot> {
        locked(&self.counters)
            .iter()
            .map(|(id, counters)| (*id, counters.total()))
            .collect()
    }
}

/// Status events for each of `objects`, now.
pub fn status_events(
    objects: &[GlobalId],
    status: &str,
    error: Option<&str>,
    hint: Option<String>,
    replica: Option<ReplicaId>,
) -> Vec<SourceStatusEvent> {
    let details = hint.map(|h| serde_json::json!({ "hints": [h] }).to_string());
    objects
        .iter()
        .map(|object| SourceStatusEvent {
            occurred_at: Timestamp::now().millis(),
            source_id: *object,
            status: status.to_string(),
            error: error.map(str::to_string),
            details: details.clone(),
            replica_id: replica,
        })
        .collect()
}

/// The event loop: records what source tasks report. Runs until every sender is gone.
pub async fn run_event_loop(
    coordinator: std::sync::Weak<crate::Coordinator>,
    mut events: mpsc::UnboundedReceiver<SourceEvent>,
) {
    while let Some(event) = events.recv().await {
        let Some(coordinator) = coordinator.upgrade() else {
            return;
        };
        let mut catalog = coordinator.catalog.lock().await;
        // A dropped object's last words are not recorded.
        if catalog.state().item(event.object).is_none() {
            continue;
        }
        if let Some(status) = coordinator.postgres_sources.event_status(&event)
            && let Err(error) =
                crate::implications::off_worker(|| catalog.record_source_status_if_changed(&status))
        {
            warn!(error = %error, "recording a source status failed");
        }
    }
}

/// The cluster and definition of `id` if it is a Postgres source (not a subsource).
pub fn postgres_source(
    state: &CatalogState,
    id: GlobalId,
) -> Option<(floe_repr::ClusterId, &SourceDefinition)> {
    match state.item(id).map(|i| &i.definition) {
        Some(ItemDefinition::Source(
            source @ SourceDefinition {
                ingestion: Some(Ingestion::Postgres { .. }),
                ..
            },
        )) => Some((source.cluster, source)),
        _ => None,
    }
}

/// The source, its progress relation and its subsources.
pub fn source_parts(state: &CatalogState, source: GlobalId) -> Vec<GlobalId> {
    std::iter::once(source)
        .chain(state.items().filter_map(|item| match &item.definition {
            ItemDefinition::Source(definition)
                if definition.parent.as_ref().map(|p| p.0) == Some(source) =>
            {
                Some(item.id)
            }
            _ => None,
        }))
        .collect()
}

/// The Postgres sources that run on a cluster.
pub fn sources_on_cluster(state: &CatalogState, cluster: floe_repr::ClusterId) -> Vec<GlobalId> {
    state
        .items_in_cluster(cluster)
        .into_iter()
        .filter(|id| postgres_source(state, *id).is_some())
        .collect()
}

/// The Postgres sources that use `id` directly or through other items (a secret
/// through their connection), so that ALTER SECRET restarts them with the new value.
pub fn sources_using(state: &CatalogState, id: GlobalId) -> Vec<GlobalId> {
    state
        .transitive_dependents(id)
        .into_iter()
        .filter(|dependent| postgres_source(state, *dependent).is_some())
        .collect()
}

/// What a source task needs, from the catalog.
fn source_spec(catalog: &Catalog, source: GlobalId) -> Result<SourceSpec, AdapterError> {
    let state = catalog.state();
    let item = state
        .item(source)
        .ok_or_else(|| AdapterError::Internal(format!("unknown source {source}")))?;
    let ItemDefinition::Source(SourceDefinition {
        ingestion:
            Some(Ingestion::Postgres {
                connection,
                publication,
            }),
        ..
    }) = &item.definition
    else {
        return Err(AdapterError::Internal(format!(
            "{source} is not a POSTGRES source"
        )));
    };
    let mut progress = None;
    let mut subsources = Vec::new();
    for part in source_parts(state, source).into_iter().skip(1) {
        match state.item(part).map(|i| &i.definition) {
            Some(ItemDefinition::Source(SourceDefinition {
                ingestion: Some(Ingestion::Progress),
                ..
            })) => progress = Some(part),
            Some(ItemDefinition::Source(SourceDefinition {
                ingestion: Some(Ingestion::PostgresTable(table)),
                ..
            })) => subsources.push(SubsourceSpec {
                id: part,
                table: table.clone(),
            }),
            _ => {}
        }
    }
    let progress_id = progress.ok_or_else(|| {
        AdapterError::Internal(format!("source {source} has no progress relation"))
    })?;
    Ok(SourceSpec {
        source_id: source,
        progress_id,
        name: item.name.item.clone(),
        connection: connection_config(catalog, *connection)?,
        publication: publication.clone(),
        slot_name: floe_postgres::slot_name(catalog.environment_id(), source),
        subsources,
    })
}

/// The settings of Postgres connection `id`, its secrets read.
pub fn connection_config(
    catalog: &Catalog,
    id: GlobalId,
) -> Result<PgConnectionConfig, AdapterError> {
    match catalog.state().item(id).map(|i| &i.definition) {
        Some(ItemDefinition::Connection(floe_sql::catalog::ConnectionDefinition::Postgres(
            postgres,
        ))) => resolve_connection(catalog, postgres),
        _ => Err(AdapterError::Internal(format!(
            "{id} is not a POSTGRES connection"
        ))),
    }
}

/// A Postgres connection's definition with its secrets read (the value lives only as
/// long as the connection attempt).
pub fn resolve_connection(
    catalog: &Catalog,
    postgres: &PostgresConnection,
) -> Result<PgConnectionConfig, AdapterError> {
    let read = |value: &StringOrSecret| -> Result<String, AdapterError> {
        match value {
            StringOrSecret::String(s) => Ok(s.clone()),
            StringOrSecret::Secret(id) => Ok(catalog.secret(*id, "value")?),
            StringOrSecret::Inline { .. } => Err(AdapterError::Internal(
                "a Postgres connection has no inline secrets".into(),
            )),
        }
    };
    let mut config = PgConnectionConfig::new(postgres.host.clone(), read(&postgres.user)?);
    config.port = postgres.port;
    config.database = postgres.database.clone();
    config.password = postgres
        .password
        .map(|id| catalog.secret(id, "value"))
        .transpose()?;
    config.ssl_mode = match postgres.ssl_mode {
        PostgresSslMode::Disable => SslMode::Disable,
        PostgresSslMode::Require => SslMode::Require,
        PostgresSslMode::VerifyCa => SslMode::VerifyCa,
        PostgresSslMode::VerifyFull => SslMode::VerifyFull,
    };
    config.ssl_root_certificate = postgres
        .ssl_certificate_authority
        .as_ref()
        .map(read)
        .transpose()?;
    config.ssl_certificate = postgres.ssl_certificate.as_ref().map(read).transpose()?;
    config.ssl_key = postgres
        .ssl_key
        .map(|id| catalog.secret(id, "value"))
        .transpose()?;
    Ok(config)
}
