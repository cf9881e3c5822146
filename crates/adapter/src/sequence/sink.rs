//! CREATE SINK, ALTER SINK.

use floe_catalog::Op;
use floe_repr::GlobalId;
use floe_sink::{CatalogConfig, TableState};
use floe_sql::catalog::{ItemDefinition, PlanCatalog, SinkDefinition};
use floe_sql::plan::{AlterSinkPlan, CreateSinkPlan};

use super::command;
use crate::connection_config::sink_catalog_config;
use crate::coordinator::{Coordinator, ExecuteResponse, Notice};
use crate::error::AdapterError;

impl Coordinator {
    /// A table that exists and is not this sink's, or a missing namespace,
    /// refuses the sink. When the catalog cannot be asked (unreachable,
    /// credentials refused), the sink is created and checks again when it
    /// starts, stalling with the cause until it is fixed; the client is told
    /// now. The check runs without the catalog lock, so the relation or the
    /// connection may be dropped meanwhile: the catalog transaction then
    /// refuses the sink, naming what is gone.
    pub(super) async fn sequence_create_sink(
        &self,
        plan: CreateSinkPlan,
        notices: &mut Vec<Notice>,
    ) -> Result<ExecuteResponse, AdapterError> {
        let mut definition = plan.definition;
        match self.purify_sink(&definition).await {
            Ok(None) => {}
            Ok(Some(dropped)) => {
                notices.push(Notice {
                    message: format!(
                        "replacing the contents of Iceberg table \"{}.{}\" written by dropped sink {dropped}",
                        definition.namespace, definition.table
                    ),
                    hint: None,
                });
                definition.takes_over = Some(dropped);
            }
            Err(AdapterError::SinkCheck(error))
                if !matches!(
                    error.kind,
                    floe_sink::ErrorKind::AlreadyExists | floe_sink::ErrorKind::NamespaceNotFound
                ) =>
            {
                notices.push(Notice {
                    message: format!(
                        "could not check the Iceberg table before creating the sink: {error}"
                    ),
                    hint: Some(
                        "The sink checks again when it starts; until the catalog answers, mz_internal.mz_sink_statuses shows it stalled with the cause."
                            .into(),
                    ),
                });
            }
            Err(other) => return Err(other),
        }
        let mut catalog = self.catalog.lock().await;
        self.create_item(
            &mut catalog,
            plan.name,
            ItemDefinition::Sink(definition),
            plan.create_sql,
            Vec::new(),
        )?;
        command("CREATE SINK")
    }

    /// A new COMMIT INTERVAL bumps the sink's version; the diff restarts the
    /// sink, which commits everything pending in one catch-up commit. The
    /// maintenance settings (SNAPSHOT RETENTION, TARGET FILE SIZE) change
    /// nothing the sink writes: no new version, and the running sink takes
    /// them on without a restart.
    pub(super) async fn sequence_alter_sink(
        &self,
        plan: AlterSinkPlan,
    ) -> Result<ExecuteResponse, AdapterError> {
        let mut catalog = self.catalog.lock().await;
        let Some(ItemDefinition::Sink(mut sink)) =
            catalog.state().item(plan.id).map(|i| i.definition.clone())
        else {
            return Err(AdapterError::Internal(format!("{} is not a sink", plan.id)));
        };
        if sink.commit_interval_ms != plan.commit_interval_ms {
            sink.commit_interval_ms = plan.commit_interval_ms;
            sink.version += 1;
        }
        sink.snapshot_retention = plan.snapshot_retention;
        sink.target_file_size = plan.target_file_size;
        self.catalog_transact(
            &mut catalog,
            vec![Op::UpdateItem {
                id: plan.id,
                definition: ItemDefinition::Sink(sink),
                create_sql: plan.create_sql,
            }],
        )?;
        tracing::info!(id = %plan.id, "altered sink");
        command("ALTER SINK")
    }

    /// Checks what CREATE SINK needs from the catalog, over the network and
    /// before anything is written: the namespace exists (created on floe's
    /// embedded catalog), and the table is missing, or is the table of a
    /// dropped sink of this environment with the new sink's columns: then the
    /// new sink takes it over (the reference documents' recovery, "drop and
    /// recreate the sink"), and its id is returned.
    async fn purify_sink(
        &self,
        definition: &SinkDefinition,
    ) -> Result<Option<GlobalId>, AdapterError> {
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
            let config = sink_catalog_config(&catalog, &self.config.data_dir, definition)
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
        let state = floe_sink::sink::check_sink_table(
            &connection,
            self.sinks.credentials().http(),
            &namespace,
            &definition.table,
            "",
            &environment_id,
        )
        .await
        .map_err(AdapterError::SinkCheck)?;
        match state {
            TableState::Missing | TableState::OwnedBySink => Ok(None),
            TableState::OfAnotherSink { sink_id, columns } => {
                let catalog = self.catalog.lock().await;
                self.dropped_sink_to_take_over(
                    catalog.state(),
                    definition,
                    &namespace,
                    &sink_id,
                    &columns,
                )
                .map(Some)
            }
        }
    }

    /// The table is marked by sink `sink_id` of this environment: it may be taken over
    /// when that sink no longer exists and the table has the new sink's columns.
    fn dropped_sink_to_take_over(
        &self,
        state: &floe_catalog::CatalogState,
        definition: &SinkDefinition,
        namespace: &floe_sink::Namespace,
        sink_id: &str,
        columns: &floe_sink::sink::TableColumns,
    ) -> Result<GlobalId, AdapterError> {
        let refuse = |detail: String| {
            AdapterError::SinkCheck(
                floe_sink::sink::already_exists(namespace, &definition.table).with_detail(detail),
            )
        };
        let dropped: GlobalId = sink_id
            .parse()
            .map_err(|_| refuse(format!("The table is marked as written by {sink_id:?}, which is not a sink id of this floe.")))?;
        if let Some(live) = state.item(dropped) {
            return Err(refuse(format!(
                "It is the table of {} \"{}\".",
                live.definition.kind().name(),
                live.name
            )));
        }
        let desc = state
            .item(definition.from)
            .and_then(|item| item.definition.desc())
            .ok_or_else(|| {
                AdapterError::Internal(format!("sink input {} has no change log", definition.from))
            })?;
        match columns
            .difference(desc, crate::sinks::sink_envelope(definition.envelope))
            .map_err(AdapterError::SinkCheck)?
        {
            None => Ok(dropped),
            Some(difference) => Err(refuse(format!(
                "It was written by dropped sink {dropped}, whose columns differ from the new sink's. {difference}"
            ))),
        }
    }
}
