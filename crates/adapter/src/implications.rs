//! What a catalog change means outside the catalog. Every DDL commits a list of
//! catalog ops ([`Coordinator::catalog_transact`]) and passes the resulting
//! [`CatalogDiff`] here; start-up passes the diff from an empty catalog. This is
//! the only place that registers and drops storage collections, places and
//! releases read holds, starts, restarts and stops load generators and sinks,
//! records status changes caused by DDL, and evicts caches.
//!
//! Two steps: [`implications`] derives the side effects from the diff (pure,
//! ordered by [`Implication::phase`]), then [`Coordinator::apply_implications`]
//! carries them out one by one. Each is idempotent, so start-up, which applies
//! them all again, also repairs a crash between a DDL's commit and its effects.
//!
//! Adding a kind of item: its arms in [`item_added`], [`item_updated`] and
//! [`item_dropped`] (a view has none; a materialized view registers a collection
//! and starts its dataflow, as a source starts its generator), and a new
//! [`Implication`] variant with its phase and its arm in `apply_implication` only
//! if it needs an effect none of the existing ones has.

use floe_catalog::{
    Catalog, CatalogChange, CatalogDiff, CatalogState, ObjectStatus, SinkStatusEvent,
};
use floe_repr::{GlobalId, RelationDesc, Timestamp};
use floe_sql::catalog::{CatalogItem, ItemDefinition, PlanCatalog, SinkDefinition};
use tracing::{info, warn};

use crate::coordinator::Coordinator;
use crate::error::AdapterError;
use crate::postgres_sources;
use crate::sink_input::CollectionInput;
use crate::sinks::{missing_input_error, sinks_on_cluster, sinks_using};

/// One side effect of a catalog change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Implication {
    /// Stop a dropped sink's task, forget its progress and record `dropped`.
    DropSink(GlobalId),
    /// Release a dropped sink's hold on its input.
    ReleaseReadHold {
        collection: GlobalId,
        sink: GlobalId,
    },
    StopGenerator(GlobalId),
    /// Stop maintaining a dropped materialized view and release its input holds.
    StopView(GlobalId),
    /// Remove a dropped relation's change log and its cached batches.
    DropCollection(GlobalId),
    /// Create a table's or source's change log, or load it if it exists.
    RegisterCollection {
        id: GlobalId,
        desc: RelationDesc,
    },
    /// A table's added column: its log's rows gain NULL in it (start-up's
    /// `RegisterCollection` does the same after a crash in between).
    WidenCollection {
        id: GlobalId,
        desc: RelationDesc,
    },
    /// A table's unique indexes as the catalog holds them: storage checks its
    /// writes against these from now on.
    SetUniqueIndexes {
        table: GlobalId,
        indexes: Vec<floe_storage::UniqueIndex>,
    },
    /// Start (or restart) a source's load generator.
    StartGenerator(GlobalId),
    /// Start (or restart) maintaining a materialized view on its cluster.
    StartView(GlobalId),
    /// Record a sink's first status, `created`, unless it has one.
    RecordSinkCreated(GlobalId),
    /// Hold a new sink's input back from its beginning, unless the sink holds
    /// it already.
    PlaceReadHold {
        collection: GlobalId,
        sink: GlobalId,
    },
    /// Start or restart a sink's task on its cluster (`paused` without a replica).
    StartSink(GlobalId),
    /// Hand a running sink its new maintenance settings (ALTER SINK SET
    /// (SNAPSHOT RETENTION | TARGET FILE SIZE)): no restart, no new version.
    UpdateSinkMaintenance(GlobalId),
    /// Start a sink its owner may now run, stop one it may no longer run (a
    /// sink runs with its owner's privileges).
    RecheckSinkAccess(GlobalId),
    /// A Postgres source's collection: its writer, not the ticker, moves its upper
    /// (set before the collection is registered).
    MarkSelfTimed(GlobalId),
    /// Stop a Postgres source's task (dropped, or about to restart without a dropped
    /// subsource's collection).
    StopPostgresSource(GlobalId),
    /// Start or restart a Postgres source's task with its subsources as the catalog
    /// holds them (`paused` without a replica).
    StartPostgresSource(GlobalId),
    /// Record a source part's first status, `created`, unless it has one.
    RecordSourceCreated(GlobalId),
    /// Record that a source part was dropped.
    RecordSourceDropped(GlobalId),
    /// An item that cannot run as the catalog holds it (a sink whose relation
    /// is gone, left by an older floe): logged, and a sink shows `stalled` with
    /// the cause until it is dropped. Everything else starts.
    ReportInconsistent {
        id: GlobalId,
        cause: String,
    },
}

impl Implication {
    /// The order effects run in: what a dropped object stops comes before what
    /// it stored is removed, a relation's log exists before its generator and
    /// sinks start.
    pub fn phase(&self) -> u8 {
        match self {
            Implication::DropSink(_) | Implication::StopPostgresSource(_) => 0,
            Implication::RecordSourceDropped(_) => 0,
            Implication::ReleaseReadHold { .. } => 1,
            Implication::StopGenerator(_) | Implication::StopView(_) => 2,
            Implication::DropCollection(_) => 3,
            Implication::MarkSelfTimed(_)
            | Implication::RegisterCollection { .. }
            | Implication::WidenCollection { .. } => 4,
            Implication::StartGenerator(_)
            | Implication::StartView(_)
            | Implication::SetUniqueIndexes { .. } => 5,
            Implication::RecordSinkCreated(_) | Implication::RecordSourceCreated(_) => 6,
            Implication::PlaceReadHold { .. } => 7,
            Implication::StartSink(_) | Implication::StartPostgresSource(_) => 8,
            Implication::RecheckSinkAccess(_) | Implication::UpdateSinkMaintenance(_) => 8,
            Implication::ReportInconsistent { .. } => 9,
        }
    }
}

/// The side effects of `diff`, in the order they run; `state` is the catalog
/// after the change.
pub fn implications(state: &CatalogState, diff: &CatalogDiff) -> Vec<Implication> {
    let mut effects = Vec::new();
    for change in &diff.changes {
        match change {
            CatalogChange::ItemAdded(item) => item_added(state, item, &mut effects),
            CatalogChange::ItemUpdated { old, new } => {
                item_updated(state, old, new, &mut effects)
            }
            CatalogChange::ItemDropped(item) => item_dropped(state, item, &mut effects),
            // Sinks read secrets when they connect: restart them with the new value.
            CatalogChange::SecretRotated(id) => {
                effects.extend(
                    sinks_using(state, *id)
                        .into_iter()
                        .map(Implication::StartSink),
                );
                effects.extend(
                    postgres_sources::sources_using(state, *id)
                        .into_iter()
                        .map(Implication::StartPostgresSource),
                );
            }
            // Sinks, sources and materialized views run on their cluster's replicas.
            CatalogChange::ClusterUpdated { old, new } if old.replicas != new.replicas => {
                effects.extend(
                    sinks_on_cluster(state, new.id)
                        .into_iter()
                        .map(Implication::StartSink),
                );
                effects.extend(
                    postgres_sources::sources_on_cluster(state, new.id)
                        .into_iter()
                        .map(Implication::StartPostgresSource),
                );
                effects.extend(
                    state
                        .items_in_cluster(new.id)
                        .into_iter()
                        .filter(|id| {
                            matches!(
                                state.item(*id).map(|i| &i.definition),
                                Some(ItemDefinition::MaterializedView(_))
                            )
                        })
                        .map(Implication::StartView),
                );
            }
            CatalogChange::AccessChanged => effects.extend(
                state
                    .items()
                    .filter(|item| matches!(item.definition, ItemDefinition::Sink(_)))
                    .map(|item| Implication::RecheckSinkAccess(item.id)),
            ),
            CatalogChange::ClusterAdded(_)
            | CatalogChange::ClusterUpdated { .. }
            | CatalogChange::ClusterDropped(_)
            // A schema is a name space: its items carry their own effects.
            | CatalogChange::SchemaAdded(_)
            | CatalogChange::SchemaDropped(_) => {}
        }
    }
    effects.sort_by_key(Implication::phase);
    // A sink or source restarts once however many of its inputs or parts changed.
    let mut seen = Vec::new();
    effects.retain(|effect| match effect {
        Implication::StartSink(_) | Implication::StartPostgresSource(_) => {
            if seen.contains(effect) {
                false
            } else {
                seen.push(effect.clone());
                true
            }
        }
        _ => true,
    });
    effects
}

fn item_added(state: &CatalogState, item: &CatalogItem, effects: &mut Vec<Implication>) {
    match &item.definition {
        ItemDefinition::Source(source) if source.ingestion.is_some() => {
            postgres_part_added(state, item, source, effects)
        }
        ItemDefinition::Table(table) => effects.extend([
            Implication::RegisterCollection {
                id: item.id,
                desc: table.desc.clone(),
            },
            unique_indexes(state, item.id),
        ]),
        ItemDefinition::Source(source) => {
            effects.push(Implication::RegisterCollection {
                id: item.id,
                desc: source.desc.clone(),
            });
            match &source.parent {
                None => effects.push(Implication::StartGenerator(item.id)),
                Some((parent, _)) if state.item(*parent).is_none() => {
                    effects.push(Implication::ReportInconsistent {
                        id: item.id,
                        cause: format!("the subsource's source {parent} does not exist"),
                    });
                }
                Some(_) => {}
            }
        }
        ItemDefinition::Sink(sink) => match sink_inconsistency(state, sink) {
            Some(cause) => effects.push(Implication::ReportInconsistent { id: item.id, cause }),
            None => effects.extend([
                Implication::RecordSinkCreated(item.id),
                Implication::PlaceReadHold {
                    collection: sink.from,
                    sink: item.id,
                },
                Implication::StartSink(item.id),
            ]),
        },
        // The view's writer moves its upper (to its inputs' frontier), never the ticker.
        ItemDefinition::MaterializedView(view) => effects.extend([
            Implication::MarkSelfTimed(item.id),
            Implication::RegisterCollection {
                id: item.id,
                desc: view.desc.clone(),
            },
            Implication::StartView(item.id),
        ]),
        ItemDefinition::Index(index) if index.unique => {
            effects.push(unique_indexes(state, index.on))
        }
        ItemDefinition::Secret
        | ItemDefinition::Connection(_)
        | ItemDefinition::View(_)
        | ItemDefinition::Index(_)
        | ItemDefinition::Type(_) => {}
    }
}

/// Storage takes the unique indexes `state` holds for `table`.
fn unique_indexes(state: &CatalogState, table: GlobalId) -> Implication {
    Implication::SetUniqueIndexes {
        table,
        indexes: storage_unique_indexes(state, table),
    }
}

/// The unique indexes `catalog` holds for `table`, as storage takes them.
pub(crate) fn storage_unique_indexes(
    catalog: &dyn PlanCatalog,
    table: GlobalId,
) -> Vec<floe_storage::UniqueIndex> {
    floe_sql::index::unique_indexes_of(catalog, table)
        .into_iter()
        .map(|(name, columns)| floe_storage::UniqueIndex { name, columns })
        .collect()
}

fn item_updated(
    state: &CatalogState,
    old: &CatalogItem,
    new: &CatalogItem,
    effects: &mut Vec<Implication>,
) {
    match &new.definition {
        // ALTER TABLE ... ADD COLUMN: what reads the table keeps its columns
        // (views by their table versions, sinks by `from_version`).
        ItemDefinition::Table(table) if old.definition != new.definition => {
            effects.push(Implication::WidenCollection {
                id: new.id,
                desc: table.desc.clone(),
            });
        }
        // ALTER SINK: the new version restarts and commits everything pending;
        // new maintenance settings alone reach the running sink.
        ItemDefinition::Sink(sink) if old.definition != new.definition => {
            let maintenance_only = match &old.definition {
                ItemDefinition::Sink(old_sink) => &old_sink.with_maintenance_of(sink) == sink,
                _ => false,
            };
            effects.push(if maintenance_only {
                Implication::UpdateSinkMaintenance(new.id)
            } else {
                Implication::StartSink(new.id)
            });
        }
        // ALTER CONNECTION: the sinks using it restart with its new settings
        // (a rotated inline credential restarts them through `SecretRotated`).
        ItemDefinition::Connection(_) if old.definition != new.definition => {
            effects.extend(
                sinks_using(state, new.id)
                    .into_iter()
                    .map(Implication::StartSink),
            );
        }
        _ => {}
    }
}

fn item_dropped(state: &CatalogState, item: &CatalogItem, effects: &mut Vec<Implication>) {
    match &item.definition {
        ItemDefinition::Source(source) if source.ingestion.is_some() => {
            effects.extend([
                Implication::RecordSourceDropped(item.id),
                Implication::DropCollection(item.id),
            ]);
            // The source stops; a dropped subsource's source restarts without it
            // (and stays stopped when it is dropped too).
            let owner = source.postgres_source(item.id).unwrap_or(item.id);
            effects.push(Implication::StopPostgresSource(owner));
            if owner != item.id {
                effects.push(Implication::StartPostgresSource(owner));
            }
        }
        ItemDefinition::Table(_) => effects.push(Implication::DropCollection(item.id)),
        ItemDefinition::Source(_) => effects.extend([
            Implication::StopGenerator(item.id),
            Implication::DropCollection(item.id),
        ]),
        ItemDefinition::Sink(sink) => effects.extend([
            Implication::DropSink(item.id),
            Implication::ReleaseReadHold {
                collection: sink.from,
                sink: item.id,
            },
        ]),
        ItemDefinition::MaterializedView(_) => effects.extend([
            Implication::StopView(item.id),
            Implication::DropCollection(item.id),
        ]),
        // A table dropped with its indexes takes its constraints with it.
        ItemDefinition::Index(index) if index.unique && state.item(index.on).is_some() => {
            effects.push(unique_indexes(state, index.on))
        }
        ItemDefinition::Secret
        | ItemDefinition::Connection(_)
        | ItemDefinition::View(_)
        | ItemDefinition::Index(_)
        | ItemDefinition::Type(_) => {}
    }
}

/// A Postgres source, subsource or progress relation: its collection is self-timed;
/// the source starts, and restarts when a subsource is added to it.
fn postgres_part_added(
    state: &CatalogState,
    item: &CatalogItem,
    source: &floe_sql::catalog::SourceDefinition,
    effects: &mut Vec<Implication>,
) {
    effects.extend([
        Implication::MarkSelfTimed(item.id),
        Implication::RegisterCollection {
            id: item.id,
            desc: source.desc.clone(),
        },
        Implication::RecordSourceCreated(item.id),
    ]);
    match source.postgres_source(item.id) {
        Some(owner) if postgres_sources::postgres_source(state, owner).is_some() => {
            effects.push(Implication::StartPostgresSource(owner));
        }
        _ => effects.push(Implication::ReportInconsistent {
            id: item.id,
            cause: format!(
                "the subsource's source {} does not exist",
                source.parent.as_ref().map_or(item.id, |p| p.0)
            ),
        }),
    }
}

/// Why a sink cannot run as the catalog holds it, if it cannot.
fn sink_inconsistency(state: &CatalogState, sink: &SinkDefinition) -> Option<String> {
    if state
        .item(sink.from)
        .and_then(|from| from.definition.desc())
        .is_none()
    {
        return Some(missing_input_error(sink.from));
    }
    if state.item(sink.connection).is_none() {
        return Some(format!(
            "the sink's connection {} does not exist",
            sink.connection
        ));
    }
    if state.cluster(sink.cluster).is_none() {
        return Some(format!(
            "the sink's cluster {} does not exist",
            sink.cluster
        ));
    }
    None
}

impl Coordinator {
    /// Commits `ops` in one catalog transaction, then carries out what the
    /// change implies. The one way DDL changes the catalog.
    pub(crate) fn catalog_transact(
        &self,
        catalog: &mut Catalog,
        mut ops: Vec<floe_catalog::Op>,
    ) -> Result<CatalogDiff, AdapterError> {
        // Items and clusters a statement creates are its session's role's (the
        // task-local is read here, on the statement's task).
        if let Ok(owner) = crate::rbac::ACTOR.try_with(|owner| *owner) {
            ops.push(floe_catalog::Op::Role(floe_catalog::RoleOp::OwnCreated {
                owner,
            }));
        }
        // The catalog's durable write (an SQLite commit) and the implications' storage
        // work both block: off the async worker, so other sessions keep being answered.
        off_worker(|| {
            let diff = catalog.transact(ops)?;
            self.apply_implications(catalog, &diff)?;
            Ok(diff)
        })
    }

    /// Carries out every implication of `diff`. One that fails is logged and
    /// does not stop the others (one broken object must not keep the rest from
    /// starting); the first failure is returned.
    pub(crate) fn apply_implications(
        &self,
        catalog: &mut Catalog,
        diff: &CatalogDiff,
    ) -> Result<(), AdapterError> {
        let mut first_error = None;
        for implication in implications(catalog.state(), diff) {
            if let Err(error) = self.apply_implication(catalog, &implication) {
                warn!(?implication, error = %error, "a catalog change's side effect failed");
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    fn apply_implication(
        &self,
        catalog: &mut Catalog,
        implication: &Implication,
    ) -> Result<(), AdapterError> {
        match implication {
            Implication::DropSink(sink) => {
                self.sinks.forget(*sink);
                self.metrics.forget_sink(*sink);
                catalog.record_sink_status(&status_event(
                    *sink,
                    ObjectStatus::Dropped,
                    None,
                    None,
                ))?;
            }
            Implication::ReleaseReadHold { collection, sink } => {
                let holder = CollectionInput::holder(*sink);
                off_worker(|| self.storage.drop_read_hold(*collection, &holder))?
            }
            Implication::StopGenerator(source) => self.generators.stop(*source),
            Implication::StopView(view) => off_worker(|| self.views.stop(&self.storage, *view)),
            Implication::StartView(view) => {
                off_worker(|| self.views.start(&self.storage, catalog.state(), *view))?;
            }
            Implication::DropCollection(id) => {
                self.generators.stop(*id);
                off_worker(|| self.storage.drop_collection(*id))?;
                self.batches.drop_relation(*id);
            }
            Implication::RegisterCollection { id, desc } => {
                off_worker(|| self.storage.register(*id, desc.clone()))?;
            }
            Implication::WidenCollection { id, desc } => {
                off_worker(|| self.storage.widen(*id, desc.clone()))?;
                self.batches.forget(*id);
            }
            Implication::SetUniqueIndexes { table, indexes } => {
                let set = off_worker(|| self.storage.set_unique_indexes(*table, indexes.clone()))?;
                if let Err(refused) = set {
                    // Only rows written before the index existed can break it: the
                    // statement creating it counted them first.
                    return Err(AdapterError::Internal(format!(
                        "the unique indexes of {table} do not hold on its rows: {refused:?}"
                    )));
                }
            }
            Implication::StartGenerator(source) => {
                if let Some(ItemDefinition::Source(definition)) =
                    catalog.state().item(*source).map(|i| &i.definition)
                {
                    self.generators.start(
                        &self.storage,
                        catalog.state(),
                        *source,
                        definition.clone(),
                    );
                }
            }
            Implication::RecordSinkCreated(sink) => {
                if catalog.latest_sink_status(*sink)?.is_none() {
                    catalog.record_sink_status(&status_event(
                        *sink,
                        ObjectStatus::Created,
                        None,
                        None,
                    ))?;
                    info!(%sink, "created sink");
                }
            }
            Implication::PlaceReadHold { collection, sink } => {
                let holder = CollectionInput::holder(*sink);
                let held = self.storage.usage().into_iter().any(|usage| {
                    usage.id == *collection && usage.holds.iter().any(|(h, _)| *h == holder)
                });
                if !held {
                    off_worker(|| {
                        self.storage
                            .set_read_hold(*collection, &holder, Timestamp(0))
                    })?;
                }
            }
            Implication::StartSink(sink) => {
                if let Some((status, error)) = self.sinks.start(catalog, *sink)? {
                    catalog
                        .record_sink_status_if_changed(&status_event(*sink, status, error, None))?;
                }
            }
            Implication::UpdateSinkMaintenance(sink) => {
                if let Some(ItemDefinition::Sink(definition)) =
                    catalog.state().item(*sink).map(|i| &i.definition)
                {
                    self.sinks.update_maintenance(*sink, definition);
                }
            }
            Implication::RecheckSinkAccess(sink) => {
                let denied = match catalog.state().item(*sink).map(|i| &i.definition) {
                    Some(ItemDefinition::Sink(definition)) => {
                        crate::rbac::sink_denied(catalog.state(), *sink, definition).is_some()
                    }
                    _ => return Ok(()),
                };
                // Running though denied, or stalled for a permission its owner has
                // again: start decides. A sink down for any other reason is left
                // as it is.
                let stalled_for_permission = catalog
                    .latest_sink_status(*sink)?
                    .and_then(|(_, error)| error)
                    .is_some_and(|error| error.starts_with(crate::rbac::SINK_DENIED_PREFIX));
                let running = self.sinks.is_running(*sink);
                if ((denied && running) || (!denied && stalled_for_permission))
                    && let Some((status, error)) = self.sinks.start(catalog, *sink)?
                {
                    catalog
                        .record_sink_status_if_changed(&status_event(*sink, status, error, None))?;
                }
            }
            Implication::MarkSelfTimed(id) => self.storage.set_self_timed(*id, true),
            Implication::StopPostgresSource(source) => match catalog.state().item(*source) {
                Some(_) => self.postgres_sources.stop(*source),
                None => self.postgres_sources.forget(*source),
            },
            Implication::StartPostgresSource(source) => {
                for status in self.postgres_sources.start(catalog, *source)? {
                    catalog.record_source_status_if_changed(&status)?;
                }
            }
            Implication::RecordSourceCreated(id) => {
                if catalog.latest_source_status(*id)?.is_none() {
                    for status in
                        postgres_sources::status_events(&[*id], "created", None, None, None)
                    {
                        catalog.record_source_status_if_changed(&status)?;
                    }
                }
            }
            Implication::RecordSourceDropped(id) => {
                for status in postgres_sources::status_events(&[*id], "dropped", None, None, None) {
                    catalog.record_source_status_if_changed(&status)?;
                }
            }
            Implication::ReportInconsistent { id, cause } => {
                warn!(%id, cause, "catalog object is inconsistent: it does not run until it is dropped");
                if matches!(
                    catalog.state().item(*id).map(|i| &i.definition),
                    Some(ItemDefinition::Sink(_))
                ) {
                    let hint =
                        "Drop the sink (DROP SINK) and create it again on an existing relation.";
                    catalog.record_sink_status_if_changed(&status_event(
                        *id,
                        ObjectStatus::Stalled,
                        Some(cause.clone()),
                        Some(serde_json::json!({ "hints": [hint] }).to_string()),
                    ))?;
                }
            }
        }
        Ok(())
    }
}

/// Runs storage work that may wait for storage's writer lock (another write,
/// a compaction slice) from synchronous code on an async worker: on the
/// multi-threaded runtime the worker hands its other tasks to the rest of the
/// runtime while it waits, so other sessions keep being answered. Elsewhere (a
/// current-thread runtime in tests, no runtime at start-up) it runs as is.
pub(crate) fn off_worker<T>(work: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
    }
}

/// A status change floe itself records (not reported by a sink's task).
fn status_event(
    sink: GlobalId,
    status: ObjectStatus,
    error: Option<String>,
    details: Option<String>,
) -> SinkStatusEvent {
    SinkStatusEvent {
        occurred_at: Timestamp::now().millis(),
        sink_id: sink,
        status,
        error,
        details,
        replica_id: None,
    }
}

/// Removes the change logs of collections the catalog no longer has: a crash
/// between a DROP's commit and its effects leaves them behind.
pub(crate) fn drop_orphaned_collections(
    storage: &floe_storage::Storage,
    state: &CatalogState,
) -> Result<(), AdapterError> {
    for id in storage.stored_collections()? {
        if state.item(id).and_then(|i| i.definition.desc()).is_none() {
            info!(%id, "dropping the change log of a dropped collection");
            storage.drop_collection(id)?;
        }
    }
    Ok(())
}
