//! Postgres connections and sources: validation, CREATE SOURCE ... FROM POSTGRES
//! (purified against the server, then created with its subsources and progress relation
//! in one catalog transaction), ALTER SOURCE ADD/DROP SUBSOURCE, and the replication
//! slots DROP removes upstream.
//!
//! Purification runs without the catalog lock; the transaction that follows checks the
//! catalog as it is then (a connection dropped meanwhile refuses the statement, naming
//! it) and the subsource names again.

use floe_catalog::{Catalog, NewItem, Op};
use floe_postgres::{
    ColumnReference, PgConnectionConfig, PurifyRequest, SubsourceDesc, TableRequest, TableSelection,
};
use floe_repr::GlobalId;
use floe_sql::catalog::{
    Ingestion, ItemDefinition, PlanCatalog, PostgresConnection, QualifiedName, SourceDefinition,
};
use floe_sql::postgres::{
    AlterSourcePlan, CreatePostgresSourcePlan, UpstreamColumnReference, UpstreamRequest,
    UpstreamTables, check_subsource_names, subsource_exists,
};
use tracing::info;

use super::command;
use crate::coordinator::{Coordinator, ExecuteResponse, Notice};
use crate::error::AdapterError;
use crate::postgres_sources::{
    SLOT_DROP_TIMEOUT, connection_config, postgres_source, resolve_connection,
};

/// A replication slot to remove upstream once its source is dropped.
pub(super) struct SlotToDrop {
    source: String,
    slot: String,
    /// `Err`: the connection's settings could not be read (the notice says why).
    connection: Result<PgConnectionConfig, String>,
}

impl Coordinator {
    /// Connects with a Postgres connection's settings (`definition` before it is
    /// created, or connection `id`) and checks that it can replicate.
    pub(super) async fn validate_postgres_connection(
        &self,
        definition: Result<&PostgresConnection, GlobalId>,
    ) -> Result<(), AdapterError> {
        let config = {
            let catalog = self.catalog.lock().await;
            match definition {
                Ok(definition) => resolve_connection(&catalog, definition)?,
                Err(id) => connection_config(&catalog, id)?,
            }
        };
        floe_postgres::validate_connection(&config)
            .await
            .map_err(AdapterError::Postgres)
    }

    pub(super) async fn sequence_create_postgres_source(
        &self,
        plan: CreatePostgresSourcePlan,
        notices: &mut Vec<Notice>,
    ) -> Result<ExecuteResponse, AdapterError> {
        let config = connection_config(&*self.catalog.lock().await, plan.connection)?;
        let subsources = floe_postgres::purify(&config, &purify_request(&plan.request))
            .await
            .map_err(AdapterError::Postgres)?;
        let mut catalog = self.catalog.lock().await;
        if plan.if_not_exists && catalog.state().item_by_name(&plan.name).is_some() {
            notices.push(Notice {
                message: format!("source \"{}\" already exists, skipping", plan.name),
                hint: None,
            });
            return command("CREATE SOURCE");
        }
        let names = subsource_names(&plan.name, &subsources);
        check_new_names(&catalog, &names, &[&plan.name, &plan.progress_name])?;
        let ids = catalog.reserve_item_ids(2 + subsources.len())?;
        let (source, progress) = (ids[0], ids[1]);
        let part = |id: GlobalId, name: QualifiedName, desc, parent, ingestion, create_sql| {
            Op::CreateItem(NewItem {
                id,
                name,
                definition: ItemDefinition::Source(SourceDefinition {
                    generator: "POSTGRES".into(),
                    tick_interval_ms: 0,
                    cluster: plan.cluster,
                    desc,
                    up_to: None,
                    parent,
                    ingestion: Some(ingestion),
                }),
                create_sql,
                secrets: Vec::new(),
            })
        };
        let mut ops = vec![
            part(
                source,
                plan.name.clone(),
                floe_postgres::source_desc(),
                None,
                Ingestion::Postgres {
                    connection: plan.connection,
                    publication: plan.request.publication.clone(),
                },
                plan.create_sql,
            ),
            part(
                progress,
                plan.progress_name.clone(),
                floe_postgres::progress_desc(),
                Some((source, "progress".to_string())),
                Ingestion::Progress,
                progress_create_sql(&plan.progress_name),
            ),
        ];
        for ((subsource, name), id) in subsources.iter().zip(names).zip(&ids[2..]) {
            ops.push(part(
                *id,
                name.clone(),
                subsource.table.desc(),
                Some((source, subsource.table.qualified_name())),
                Ingestion::PostgresTable(subsource.table.clone()),
                subsource_create_sql(&name, &plan.name, &config.database, subsource),
            ));
        }
        self.catalog_transact(&mut catalog, ops)?;
        info!(%source, subsources = subsources.len(), "created postgres source");
        command("CREATE SOURCE")
    }

    pub(super) async fn sequence_alter_source(
        &self,
        plan: AlterSourcePlan,
    ) -> Result<ExecuteResponse, AdapterError> {
        match plan {
            AlterSourcePlan::AddSubsources { source, request } => {
                self.add_subsources(source, request).await
            }
            AlterSourcePlan::DropSubsources { items, .. } => {
                let mut catalog = self.catalog.lock().await;
                let ops = items.into_iter().map(Op::DropItem).collect();
                self.catalog_transact(&mut catalog, ops)?;
                command("ALTER SOURCE")
            }
        }
    }

    /// Purifies the new tables with the source's publication, then creates their
    /// subsources; the source restarts and snapshots them at a consistent point of
    /// their own.
    async fn add_subsources(
        &self,
        source: GlobalId,
        request: UpstreamRequest,
    ) -> Result<ExecuteResponse, AdapterError> {
        let (config, source_name) = {
            let catalog = self.catalog.lock().await;
            let connection = match postgres_source(catalog.state(), source)
                .and_then(|(_, definition)| definition.ingestion.as_ref())
            {
                Some(Ingestion::Postgres { connection, .. }) => *connection,
                _ => {
                    return Err(AdapterError::Internal(format!(
                        "{source} is not a POSTGRES source"
                    )));
                }
            };
            let name = catalog.state().item(source).map(|i| i.name.clone());
            (connection_config(&catalog, connection)?, name)
        };
        let source_name = source_name
            .ok_or_else(|| AdapterError::Internal(format!("unknown source {source}")))?;
        let subsources = floe_postgres::purify(&config, &purify_request(&request))
            .await
            .map_err(AdapterError::Postgres)?;
        let mut catalog = self.catalog.lock().await;
        // Dropped while the server was asked: refused as planning would refuse it now.
        let Some((_, definition)) = postgres_source(catalog.state(), source) else {
            return Err(floe_sql::PlanError::unknown_item(&source_name.item).into());
        };
        let definition = definition.clone();
        for subsource in &subsources {
            if let Some(existing) = replicated_by(catalog.state(), source, subsource.table.oid) {
                return Err(floe_sql::PlanError::invalid(format!(
                    "table {} is already replicated by subsource \"{}\" of source \"{}\"",
                    subsource.table.qualified_name(),
                    existing,
                    source_name.item
                ))
                .into());
            }
        }
        let names = subsource_names(&source_name, &subsources);
        check_new_names(&catalog, &names, &[])?;
        let ids = catalog.reserve_item_ids(subsources.len())?;
        let ops = subsources
            .iter()
            .zip(names)
            .zip(ids)
            .map(|((subsource, name), id)| {
                Op::CreateItem(NewItem {
                    id,
                    create_sql: subsource_create_sql(
                        &name,
                        &source_name,
                        &config.database,
                        subsource,
                    ),
                    name,
                    definition: ItemDefinition::Source(SourceDefinition {
                        desc: subsource.table.desc(),
                        parent: Some((source, subsource.table.qualified_name())),
                        ingestion: Some(Ingestion::PostgresTable(subsource.table.clone())),
                        ..definition.clone()
                    }),
                    secrets: Vec::new(),
                })
            })
            .collect();
        self.catalog_transact(&mut catalog, ops)?;
        command("ALTER SOURCE")
    }

    /// The slots of the Postgres sources among `items` (about to be dropped), with the
    /// settings to reach their servers, read now: the connection and its secrets may be
    /// dropped in the same statement.
    pub(super) fn slots_to_drop(&self, catalog: &Catalog, items: &[GlobalId]) -> Vec<SlotToDrop> {
        items
            .iter()
            .filter_map(|id| {
                let (_, definition) = postgres_source(catalog.state(), *id)?;
                let Some(Ingestion::Postgres { connection, .. }) = &definition.ingestion else {
                    return None;
                };
                Some(SlotToDrop {
                    source: catalog.state().item(*id)?.name.item.clone(),
                    slot: floe_postgres::slot_name(catalog.environment_id(), *id),
                    connection: connection_config(catalog, *connection).map_err(|e| e.to_string()),
                })
            })
            .collect()
    }

    /// Removes dropped sources' slots upstream. A server that cannot be reached leaves
    /// its slot behind, and a notice names it (it holds WAL until dropped by hand).
    pub(super) async fn drop_replication_slots(
        &self,
        slots: Vec<SlotToDrop>,
        notices: &mut Vec<Notice>,
    ) {
        for SlotToDrop {
            source,
            slot,
            connection,
        } in slots
        {
            let result = match connection {
                Ok(mut config) => {
                    config.connect_timeout = config.connect_timeout.min(SLOT_DROP_TIMEOUT);
                    tokio::time::timeout(
                        SLOT_DROP_TIMEOUT * 2,
                        floe_postgres::drop_replication_slot(&config, &slot),
                    )
                    .await
                    .unwrap_or_else(|_| {
                        Err(floe_postgres::PgError::connection(
                            "the server did not answer in time",
                        ))
                    })
                    .map_err(|e| e.message)
                }
                Err(cause) => Err(cause),
            };
            match result {
                Ok(()) => info!(%source, %slot, "dropped replication slot"),
                Err(cause) => {
                    tracing::warn!(%source, %slot, %cause, "replication slot left upstream");
                    notices.push(Notice {
                        message: format!(
                            "source \"{source}\" was dropped, but its replication slot \"{slot}\" could not be dropped upstream: {cause}"
                        ),
                        hint: Some(format!(
                            "The slot keeps WAL on the server until it is dropped: run SELECT pg_drop_replication_slot('{slot}'); on the upstream database."
                        )),
                    });
                }
            }
        }
    }
}

/// The subsource a table of `source` is replicated by, if any.
fn replicated_by(state: &floe_catalog::CatalogState, source: GlobalId, oid: u32) -> Option<String> {
    state.items().find_map(|item| match &item.definition {
        ItemDefinition::Source(SourceDefinition {
            parent: Some((parent, _)),
            ingestion: Some(Ingestion::PostgresTable(table)),
            ..
        }) if *parent == source && table.oid == oid => Some(item.name.item.clone()),
        _ => None,
    })
}

/// Each subsource's name: in the source's schema, named after its table or `AS` name.
fn subsource_names(source: &QualifiedName, subsources: &[SubsourceDesc]) -> Vec<QualifiedName> {
    subsources
        .iter()
        .map(|s| QualifiedName {
            item: s.name.clone(),
            ..source.clone()
        })
        .collect()
}

/// New names must be free in the catalog and distinct from each other and from the
/// other names the statement creates.
fn check_new_names(
    catalog: &Catalog,
    names: &[QualifiedName],
    others: &[&QualifiedName],
) -> Result<(), AdapterError> {
    check_subsource_names(catalog.state(), names.iter().chain(others.iter().copied()))?;
    for (i, name) in names.iter().enumerate() {
        if others.contains(&name) || names[..i].contains(name) {
            return Err(subsource_exists(&name.item).into());
        }
    }
    Ok(())
}

fn purify_request(request: &UpstreamRequest) -> PurifyRequest {
    let columns = |references: &[UpstreamColumnReference]| {
        references
            .iter()
            .map(|r| ColumnReference {
                schema: r.schema.clone(),
                table: r.table.clone(),
                column: r.column.clone(),
            })
            .collect()
    };
    PurifyRequest {
        publication: request.publication.clone(),
        selection: match &request.tables {
            UpstreamTables::All => TableSelection::All,
            UpstreamTables::Schemas(schemas) => TableSelection::Schemas(schemas.clone()),
            UpstreamTables::Tables(tables) => TableSelection::Tables(
                tables
                    .iter()
                    .map(|t| TableRequest {
                        schema: t.schema.clone(),
                        name: t.name.clone(),
                        alias: t.alias.clone(),
                    })
                    .collect(),
            ),
        },
        text_columns: columns(&request.text_columns),
        exclude_columns: columns(&request.exclude_columns),
    }
}

fn quoted(name: &QualifiedName) -> String {
    let quote = |part: &str| format!("\"{}\"", part.replace('"', "\"\""));
    format!(
        "{}.{}.{}",
        quote(&name.database),
        quote(&name.schema),
        quote(&name.item)
    )
}

/// The statement `SHOW CREATE SOURCE` shows for a subsource: its columns and the
/// upstream table it replicates, as Materialize writes it.
fn subsource_create_sql(
    name: &QualifiedName,
    source: &QualifiedName,
    database: &str,
    subsource: &SubsourceDesc,
) -> String {
    let columns: Vec<String> = subsource
        .table
        .columns
        .iter()
        .map(|c| {
            format!(
                "\"{}\" {}{}",
                c.name.replace('"', "\"\""),
                c.scalar_type,
                if c.nullable { "" } else { " NOT NULL" }
            )
        })
        .collect();
    let reference = QualifiedName {
        database: database.to_string(),
        schema: subsource.table.schema.clone(),
        item: subsource.table.name.clone(),
    };
    format!(
        "CREATE SUBSOURCE {} ({}) OF SOURCE {} WITH (EXTERNAL REFERENCE = {})",
        quoted(name),
        columns.join(", "),
        quoted(source),
        quoted(&reference)
    )
}

fn progress_create_sql(name: &QualifiedName) -> String {
    format!(
        "CREATE SUBSOURCE {} (\"lsn\" uint8 NOT NULL) WITH (PROGRESS = true)",
        quoted(name)
    )
}
