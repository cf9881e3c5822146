//! The sink worker pool: one Iceberg sink task per sink whose cluster has a
//! replica, and the bookkeeping of what the tasks report (statuses,
//! statistics, progress), kept durably in the catalog.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use floe_catalog::{Catalog, ObjectStatus, SinkStatusEvent, StoredSinkProgress};
use floe_repr::{GlobalId, ReplicaId, Timestamp};
use floe_sink::Namespace;
use floe_sink::input::SinkInput;
use floe_sink::maintenance::{MaintenanceOptions, MaintenanceReport};
use floe_sink::sink::{
    Envelope, ProgressReport, SinkConnection, SinkHandle, SinkReporter, SinkSettings, SinkSpec,
    SinkStatus, StatisticsUpdate, spawn_sink,
};
use floe_sql::catalog::{
    ItemDefinition, PlanCatalog, SinkDefinition, SinkEnvelope, SnapshotRetention,
};
use floe_storage::Storage;
use tokio::sync::{mpsc, watch};
use tracing::{info, warn};

use crate::connection_config::sink_catalog_config;
use crate::credentials::Credentials;
use crate::error::AdapterError;
use crate::sink_input::{CollectionInput, ViewErrorGate};

/// What sink tasks report, in order, to the coordinator's event loop.
#[derive(Debug)]
pub enum SinkEvent {
    Status {
        sink: GlobalId,
        replica: Option<ReplicaId>,
        /// The task that reported: a stopped task's late report is dropped.
        generation: u64,
        status: SinkStatus,
    },
    Statistics {
        sink: GlobalId,
        update: StatisticsUpdate,
    },
    Progress {
        sink: GlobalId,
        report: ProgressReport,
    },
    Maintenance {
        sink: GlobalId,
        report: MaintenanceReport,
    },
}

/// The reporter a sink task calls; it forwards to the event loop.
struct Reporter {
    sink: GlobalId,
    replica: Option<ReplicaId>,
    generation: u64,
    events: mpsc::UnboundedSender<SinkEvent>,
}

impl SinkReporter for Reporter {
    fn status(&self, status: SinkStatus) {
        let _ = self.events.send(SinkEvent::Status {
            sink: self.sink,
            replica: self.replica,
            generation: self.generation,
            status,
        });
    }

    fn statistics(&self, update: StatisticsUpdate) {
        let _ = self.events.send(SinkEvent::Statistics {
            sink: self.sink,
            update,
        });
    }

    fn progress(&self, report: ProgressReport) {
        let _ = self.events.send(SinkEvent::Progress {
            sink: self.sink,
            report,
        });
    }

    fn maintenance(&self, report: MaintenanceReport) {
        let _ = self.events.send(SinkEvent::Maintenance {
            sink: self.sink,
            report,
        });
    }
}

/// What `mz_internal.mz_sink_maintenance` shows of a sink: the totals of its
/// maintenance runs since floe started, and the last run's time and error.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SinkMaintenance {
    pub last_run_at: u64,
    pub data_files_rewritten: u64,
    pub delete_files_applied: u64,
    pub snapshots_expired: u64,
    pub bytes_rewritten: u64,
    pub error: Option<String>,
}

impl SinkMaintenance {
    fn add(&mut self, report: &MaintenanceReport) {
        self.last_run_at = report.run_at_ms;
        self.data_files_rewritten += report.data_files_rewritten;
        self.delete_files_applied += report.delete_files_applied;
        self.snapshots_expired += report.snapshots_expired;
        self.bytes_rewritten += report.bytes_rewritten;
        self.error = report.error.clone();
    }
}

/// A sink definition's maintenance settings as the sink engine takes them.
pub fn maintenance_options(definition: &SinkDefinition) -> MaintenanceOptions {
    let defaults = MaintenanceOptions::default();
    MaintenanceOptions {
        snapshot_retention: match definition.snapshot_retention {
            None => defaults.snapshot_retention,
            Some(SnapshotRetention::Off) => None,
            Some(SnapshotRetention::Keep { ms }) => Some(std::time::Duration::from_millis(ms)),
        },
        target_file_size: definition.target_file_size,
    }
}

/// Running sink tasks and their latest reports.
pub struct SinkManager {
    storage: Arc<Storage>,
    /// HTTP and sink settings, and the AWS credentials of connections.
    credentials: Arc<Credentials>,
    data_dir: std::path::PathBuf,
    events: mpsc::UnboundedSender<SinkEvent>,
    running: Mutex<HashMap<GlobalId, SinkHandle>>,
    /// Bumped each time a sink's task is stopped, so that status reports of
    /// a stopped task that arrive late cannot overwrite `paused`.
    generations: Mutex<HashMap<GlobalId, u64>>,
    /// Progress and statistics per sink, as last reported (and persisted).
    progress: Mutex<HashMap<GlobalId, StoredSinkProgress>>,
    /// Materialized views' run-time errors, which stall the views' sinks.
    view_errors: crate::view_errors::ViewErrors,
    /// Each running sink's maintenance settings, which ALTER SINK changes live.
    maintenance_options: Mutex<HashMap<GlobalId, watch::Sender<MaintenanceOptions>>>,
    /// What each sink's maintenance did since floe started.
    maintenance: Mutex<HashMap<GlobalId, SinkMaintenance>>,
}

impl SinkManager {
    pub fn new(
        storage: Arc<Storage>,
        credentials: Arc<Credentials>,
        data_dir: std::path::PathBuf,
        progress: HashMap<GlobalId, StoredSinkProgress>,
        view_errors: crate::view_errors::ViewErrors,
    ) -> (SinkManager, mpsc::UnboundedReceiver<SinkEvent>) {
        let (events, receiver) = mpsc::unbounded_channel();
        (
            SinkManager {
                storage,
                credentials,
                data_dir,
                events,
                running: Mutex::new(HashMap::new()),
                generations: Mutex::new(HashMap::new()),
                progress: Mutex::new(progress),
                view_errors,
                maintenance_options: Mutex::new(HashMap::new()),
                maintenance: Mutex::new(HashMap::new()),
            },
            receiver,
        )
    }

    /// The credentials and settings connections use.
    pub fn credentials(&self) -> &Arc<Credentials> {
        &self.credentials
    }

    /// A snapshot of every sink's progress.
    pub fn progress(&self) -> HashMap<GlobalId, StoredSinkProgress> {
        self.progress
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The generation of a sink's current task.
    fn generation(&self, sink: GlobalId) -> u64 {
        self.generations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&sink)
            .copied()
            .unwrap_or(0)
    }

    /// Stops a sink's task, if it runs; its later status reports are ignored.
    pub fn stop(&self, sink: GlobalId) -> bool {
        *self
            .generations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(sink)
            .or_insert(0) += 1;
        let handle = self
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&sink);
        match handle {
            Some(handle) => {
                handle.abort();
                true
            }
            None => false,
        }
    }

    pub fn is_running(&self, sink: GlobalId) -> bool {
        self.running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&sink)
            .is_some_and(|h| !h.is_finished())
    }

    /// Forgets a dropped sink.
    pub fn forget(&self, sink: GlobalId) {
        self.stop(sink);
        self.progress
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&sink);
        self.maintenance
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&sink);
        self.maintenance_options
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&sink);
    }

    /// What every sink's maintenance did (`mz_internal.mz_sink_maintenance`).
    pub fn maintenance(&self) -> HashMap<GlobalId, SinkMaintenance> {
        self.maintenance
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Hands a running sink its definition's maintenance settings (a sink that
    /// is not running takes them when it starts).
    pub fn update_maintenance(&self, sink: GlobalId, definition: &SinkDefinition) {
        let options = maintenance_options(definition);
        if let Some(sender) = self
            .maintenance_options
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&sink)
        {
            sender.send_replace(options);
        }
        info!(%sink, ?options, "sink maintenance settings changed");
    }

    /// (Re)starts a sink on its cluster, or pauses it when the cluster has no
    /// replica. Returns the status change to record, if any: `paused`, or
    /// `stalled` with the error when the sink cannot even be configured (its
    /// connection's secret has the wrong form, say).
    pub fn start(
        &self,
        catalog: &Catalog,
        sink: GlobalId,
    ) -> Result<Option<(ObjectStatus, Option<String>)>, AdapterError> {
        let state = catalog.state();
        let Some(item) = state.item(sink) else {
            return Ok(None);
        };
        let ItemDefinition::Sink(definition) = &item.definition else {
            return Ok(None);
        };
        let replica = state
            .cluster(definition.cluster)
            .and_then(|cluster| cluster.replicas.first().map(|r| r.id));
        let was_running = self.stop(sink);
        let Some(replica) = replica else {
            info!(%sink, "sink paused: its cluster has no replica");
            return Ok(Some((ObjectStatus::Paused, None)));
        };
        if let Some(denied) = crate::rbac::sink_denied(state, sink, definition) {
            warn!(%sink, error = %denied, "sink cannot start");
            return Ok(Some((ObjectStatus::Stalled, Some(denied))));
        }
        let configured = self
            .connection(catalog, definition)
            .and_then(|connection| Ok((connection, self.spec(catalog, sink, definition)?)));
        let (connection, spec) = match configured {
            Ok(configured) => configured,
            Err(error) => {
                warn!(%sink, error = %error, "sink cannot start");
                return Ok(Some((
                    ObjectStatus::Stalled,
                    Some(format!("iceberg: {error}")),
                )));
            }
        };
        // A table altered since the sink was created: the columns it had then,
        // which the sink's Iceberg table has.
        let Some(desc) = state
            .item(definition.from)
            .and_then(|i| match &i.definition {
                ItemDefinition::Table(table) => Some(table.desc_at(definition.from_version)),
                other => other.desc().cloned(),
            })
        else {
            warn!(%sink, from = %definition.from, "sink cannot start: its relation is gone");
            return Ok(Some((
                ObjectStatus::Stalled,
                Some(missing_input_error(definition.from)),
            )));
        };
        let collection = CollectionInput::new(self.storage.clone(), definition.from, sink, desc);
        let input: Arc<dyn SinkInput> = match state.item(definition.from) {
            Some(view) if matches!(view.definition, ItemDefinition::MaterializedView(_)) => {
                Arc::new(collection.held_back_by(ViewErrorGate {
                    errors: self.view_errors.clone(),
                    upstream: crate::views::view_and_upstream(state, view.id),
                    name: view.name.item.clone(),
                }))
            }
            _ => Arc::new(collection),
        };
        let reporter = Arc::new(Reporter {
            sink,
            replica: Some(replica),
            generation: self.generation(sink),
            events: self.events.clone(),
        });
        let mut settings: SinkSettings = self.credentials.sink_settings();
        let (options, receiver) = watch::channel(maintenance_options(definition));
        settings.maintenance.options = receiver;
        self.maintenance_options
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(sink, options);
        let handle = spawn_sink(connection, spec, input, reporter, settings);
        self.running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(sink, handle);
        info!(%sink, restarted = was_running, "sink started");
        Ok(None)
    }

    fn connection(
        &self,
        catalog: &Catalog,
        definition: &SinkDefinition,
    ) -> Result<SinkConnection, AdapterError> {
        let config = sink_catalog_config(catalog, &self.data_dir, definition)?;
        self.credentials
            .sink_connection(config)
            .map_err(AdapterError::ConnectionValidation)
    }

    fn spec(
        &self,
        catalog: &Catalog,
        sink: GlobalId,
        definition: &SinkDefinition,
    ) -> Result<SinkSpec, AdapterError> {
        let namespace =
            Namespace::parse(&definition.namespace).map_err(AdapterError::ConnectionValidation)?;
        let (table_uuid, resume_frontier) = self
            .progress
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&sink)
            .map_or((None, None), |p| {
                (
                    p.table_uuid.as_deref().and_then(|u| u.parse().ok()),
                    // Where the sink resumes if its table no longer records its progress.
                    (p.frontier > 0).then_some(Timestamp(p.frontier)),
                )
            });
        Ok(SinkSpec {
            sink_id: sink.to_string(),
            version: definition.version,
            namespace,
            table: definition.table.clone(),
            envelope: sink_envelope(definition.envelope),
            delete_mode: match definition.delete_mode {
                floe_sql::catalog::DeleteMode::Equality => floe_sink::DeleteMode::Equality,
                floe_sql::catalog::DeleteMode::Position => floe_sink::DeleteMode::Position,
            },
            key_columns: definition.key.clone().unwrap_or_default(),
            partition_by: partition_columns(definition)?,
            commit_interval_ms: definition.commit_interval_ms,
            environment_id: catalog.environment_id().to_string(),
            table_uuid,
            resume_frontier,
            takes_over: definition.takes_over.map(|id| id.to_string()),
        })
    }

    /// Applies one event to the live state; returns the status change to
    /// record and whether progress should be persisted.
    pub fn apply(
        &self,
        event: &SinkEvent,
    ) -> (
        Option<SinkStatusEvent>,
        Option<(GlobalId, StoredSinkProgress)>,
    ) {
        let now = Timestamp::now().millis();
        match event {
            SinkEvent::Status {
                sink,
                replica,
                generation,
                status,
            } => {
                if *generation != self.generation(*sink) {
                    return (None, None);
                }
                let (name, error, details) = match status {
                    SinkStatus::Starting => (ObjectStatus::Starting, None, None),
                    SinkStatus::Running => (ObjectStatus::Running, None, None),
                    SinkStatus::Stalled { error, hint } => (
                        ObjectStatus::Stalled,
                        Some(error.clone()),
                        hint.as_ref()
                            .map(|h| serde_json::json!({ "hints": [h] }).to_string()),
                    ),
                };
                (
                    Some(SinkStatusEvent {
                        occurred_at: now,
                        sink_id: *sink,
                        status: name,
                        error,
                        details,
                        replica_id: *replica,
                    }),
                    None,
                )
            }
            SinkEvent::Statistics { sink, update } => {
                let mut progress = self.progress.lock().unwrap_or_else(|e| e.into_inner());
                let entry = progress.entry(*sink).or_default();
                entry.messages_staged += update.messages_staged;
                entry.bytes_staged += update.bytes_staged;
                entry.messages_committed += update.messages_committed;
                entry.bytes_committed += update.bytes_committed;
                (None, Some((*sink, entry.clone())))
            }
            SinkEvent::Maintenance { sink, report } => {
                self.maintenance
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .entry(*sink)
                    .or_default()
                    .add(report);
                (None, None)
            }
            SinkEvent::Progress { sink, report } => {
                let mut progress = self.progress.lock().unwrap_or_else(|e| e.into_inner());
                let entry = progress.entry(*sink).or_default();
                entry.frontier = entry.frontier.max(report.frontier.0);
                entry.table_uuid = Some(report.table_uuid.to_string());
                entry.metadata_location = Some(report.metadata_location.clone());
                (None, Some((*sink, entry.clone())))
            }
        }
    }
}

/// The event loop: records statuses and progress durably. Runs until every
/// sender is gone.
pub async fn run_event_loop(
    coordinator: std::sync::Weak<crate::Coordinator>,
    mut events: mpsc::UnboundedReceiver<SinkEvent>,
) {
    while let Some(event) = events.recv().await {
        let Some(coordinator) = coordinator.upgrade() else {
            return;
        };
        if let Err(e) = coordinator.record_sink_event(event).await {
            warn!(error = %e, "recording a sink event failed");
        }
    }
}

/// The sinks that use `id` directly or through other items (a secret through its
/// connections), so that ALTER SECRET can restart them with the new value.
pub fn sinks_using(state: &floe_catalog::CatalogState, id: GlobalId) -> Vec<GlobalId> {
    state
        .transitive_dependents(id)
        .into_iter()
        .filter(|dependent| is_sink(state, *dependent))
        .collect()
}

/// Whether `id` is a sink.
fn is_sink(state: &floe_catalog::CatalogState, id: GlobalId) -> bool {
    matches!(
        state.item(id).map(|i| &i.definition),
        Some(ItemDefinition::Sink(_))
    )
}

/// The error a sink whose relation is gone shows.
pub fn missing_input_error(from: GlobalId) -> String {
    format!("the sink's input relation {from} does not exist")
}

/// The sinks that run on a cluster.
pub fn sinks_on_cluster(
    state: &floe_catalog::CatalogState,
    cluster: floe_repr::ClusterId,
) -> Vec<GlobalId> {
    state
        .items_in_cluster(cluster)
        .into_iter()
        .filter(|id| is_sink(state, *id))
        .collect()
}

/// The sink engine's envelope of a planned sink's.
/// The sink's `PARTITION BY` (checked at CREATE SINK) as the sink engine takes it.
fn partition_columns(
    definition: &SinkDefinition,
) -> Result<Vec<floe_sink::PartitionColumn>, AdapterError> {
    use floe_sink::PartitionTransform as Transform;
    use floe_sql::partition::PartitionTransform;
    let Some(text) = &definition.partition_by else {
        return Ok(Vec::new());
    };
    let fields = floe_sql::partition::parse_partition_by(text).map_err(AdapterError::from)?;
    Ok(fields
        .into_iter()
        .map(|field| floe_sink::PartitionColumn {
            column: field.column,
            transform: match field.transform {
                PartitionTransform::Identity => Transform::Identity,
                PartitionTransform::Bucket(n) => Transform::Bucket(n),
                PartitionTransform::Truncate(width) => Transform::Truncate(width),
                PartitionTransform::Year => Transform::Year,
                PartitionTransform::Month => Transform::Month,
                PartitionTransform::Day => Transform::Day,
                PartitionTransform::Hour => Transform::Hour,
            },
        })
        .collect())
}

pub(crate) fn sink_envelope(envelope: SinkEnvelope) -> Envelope {
    match envelope {
        SinkEnvelope::Append => Envelope::Append,
        SinkEnvelope::Upsert => Envelope::Upsert,
    }
}
