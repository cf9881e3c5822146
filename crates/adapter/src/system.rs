//! The builtin `mz_*` relations, defined as data: a schema, a name, typed
//! columns, and a function that derives the rows from the catalog.

use floe_catalog::{CatalogState, SinkStatusEvent};
use floe_repr::{Datum, GlobalId, PgType};
use floe_sql::catalog::{
    AwsAuth, CatalogItem, ConnectionDefinition, ItemDefinition, PlanCatalog, StringOrSecret,
};
use floe_sql::privilege::ObjectRef;

/// Everything the builtin relations are derived from.
pub struct SystemContext<'a> {
    pub catalog: &'a CatalogState,
    pub environment_id: &'a str,
    /// The AWS principal floe assumes roles from, if known.
    pub aws_principal: Option<&'a str>,
    pub sink_status_history: &'a [SinkStatusEvent],
    /// Change log sizes and frontiers of tables and sources.
    pub storage_usage: &'a [floe_storage::CollectionUsage],
    /// What each sink last reported.
    pub sink_progress: &'a std::collections::HashMap<GlobalId, floe_catalog::StoredSinkProgress>,
    /// Status changes of sources (only when a query reads them).
    pub source_status_history: &'a [floe_catalog::SourceStatusEvent],
    /// Each running Postgres source's counters.
    pub source_statistics:
        &'a std::collections::HashMap<GlobalId, floe_postgres::StatisticsSnapshot>,
    /// Milliseconds since the Unix epoch.
    pub now_ms: u64,
    /// The arrangements of materialized views' dataflows (only when a query reads them).
    pub arrangement_sizes: &'a [crate::views::ViewArrangementSize],
    /// What each sink's table maintenance did.
    pub sink_maintenance: &'a std::collections::HashMap<GlobalId, crate::sinks::SinkMaintenance>,
    /// The engine's scans of each relation since the server started.
    pub table_scans: crate::tables::ScanCounts,
}

/// A builtin relation.
pub struct BuiltinRelation {
    pub schema: &'static str,
    pub name: &'static str,
    /// Name, type, nullable.
    pub columns: &'static [(&'static str, PgType, bool)],
    pub rows: fn(&SystemContext) -> Vec<Vec<Datum>>,
}

use PgType::*;

const DATABASE_ID: &str = "u1";

/// The schemas, in `mz_schemas` order.
pub const SCHEMAS: [&str; 5] = [
    "mz_catalog",
    "pg_catalog",
    "public",
    "mz_internal",
    "information_schema",
];

/// A schema's OID (`mz_schemas.oid`, `pg_namespace.oid`).
pub fn schema_oid(schema: &str) -> u32 {
    16_385
        + SCHEMAS
            .iter()
            .position(|s| *s == schema)
            .unwrap_or(SCHEMAS.len()) as u32
}

/// Every builtin relation: the `mz_*` ones of this module, then PostgreSQL's
/// catalog for tools (`crate::pg_catalog`).
pub fn builtins() -> impl Iterator<Item = &'static BuiltinRelation> {
    BUILTINS
        .iter()
        .chain(crate::system_roles::ROLE_BUILTINS.iter())
        .chain(crate::pg_catalog::PG_CATALOG.iter())
}

/// Schema ids, as Materialize numbers them.
pub fn schema_id(schema: &str) -> &'static str {
    match schema {
        "mz_catalog" => "s1",
        "pg_catalog" => "s2",
        "public" => "u3",
        "mz_internal" => "s4",
        _ => "s5",
    }
}

/// The id of the schema a user item lives in: `public` or one users created.
fn item_schema_id(context: &SystemContext, schema: &str) -> String {
    match context.catalog.user_schema(schema) {
        Some(created) => created.id_text(),
        None => schema_id(schema).to_string(),
    }
}

/// A count as `int8` (saturating: counts past i64::MAX do not occur in practice).
fn count(value: u64) -> Datum {
    Datum::Int64(i64::try_from(value).unwrap_or(i64::MAX))
}

pub(crate) fn text(s: impl Into<String>) -> Datum {
    Datum::Text(s.into())
}

pub(crate) fn opt_text(s: Option<impl Into<String>>) -> Datum {
    s.map(|s| Datum::Text(s.into())).unwrap_or(Datum::Null)
}

fn owner_id(context: &SystemContext, object: &ObjectRef) -> Datum {
    text(context.catalog.owner(object).to_string())
}

/// An object's ACL in Materialize's `mz_aclitem` text: its owner's privileges
/// first, then what was granted.
fn privileges(context: &SystemContext, object: &ObjectRef) -> Datum {
    Datum::TextArray(
        crate::system_roles::acl(context, object)
            .into_iter()
            .map(Some)
            .collect(),
    )
}

fn items<'a>(context: &'a SystemContext) -> impl Iterator<Item = &'a CatalogItem> {
    context.catalog.items()
}

/// Each `COMMENT ON` text with the item it is on and its column number (`None`:
/// the item itself), for `mz_comments` and `pg_description`. Comments whose
/// item is gone are skipped.
pub(crate) fn item_comments<'a>(
    context: &'a SystemContext,
) -> impl Iterator<Item = (&'a CatalogItem, Option<i32>, &'a str)> {
    context
        .catalog
        .comments()
        .filter_map(|(id, column, comment)| {
            let item = context.catalog.item(id)?;
            Some((item, column.and_then(|c| i32::try_from(c).ok()), comment))
        })
}

/// The columns of a relation listing catalog items: `id`, `oid`, `schema_id` and
/// `name`, which [`item_rows`] fills, then the relation's own.
macro_rules! item_columns {
    ($($column:expr),* $(,)?) => {
        &[
            ("id", Text, false),
            ("oid", Oid, false),
            ("schema_id", Text, false),
            ("name", Text, false),
            $($column),*
        ]
    };
}

/// The rows of a relation listing catalog items (see `item_columns!`): a row for
/// each item `own_columns` lists (`None`: not of the relation's kind), its `id`,
/// `oid`, `schema_id` and `name`, then the columns `own_columns` gives.
fn item_rows(
    context: &SystemContext,
    own_columns: impl Fn(&CatalogItem) -> Option<Vec<Datum>>,
) -> Vec<Vec<Datum>> {
    items(context)
        .filter_map(|item| {
            let mut row = vec![
                text(item.id.to_string()),
                Datum::Oid(item.oid),
                text(item_schema_id(context, &item.name.schema)),
                text(&item.name.item),
            ];
            row.extend(own_columns(item)?);
            Some(row)
        })
        .collect()
}

/// `owner_id`, `privileges`, `create_sql` and `redacted_create_sql` (the same
/// text): the columns most relations listing items end with.
fn ownership_and_sql(context: &SystemContext, item: &CatalogItem) -> [Datum; 4] {
    [
        owner_id(context, &ObjectRef::Item(item.id)),
        privileges(context, &ObjectRef::Item(item.id)),
        text(&item.create_sql),
        text(&item.create_sql),
    ]
}

/// The columns of `mz_sink_statuses` and `mz_source_statuses`: each object's
/// latest status.
const STATUS_COLUMNS: &[(&str, PgType, bool)] = &[
    ("id", Text, false),
    ("name", Text, false),
    ("type", Text, false),
    ("last_status_change_at", TimestampTz, true),
    ("status", Text, false),
    ("error", Text, true),
    ("details", Jsonb, true),
];

/// Every builtin relation, in id order (`s1`, `s2`, ...).
pub static BUILTINS: &[BuiltinRelation] = &[
    BuiltinRelation {
        schema: "mz_catalog",
        name: "mz_databases",
        columns: &[
            ("id", Text, false),
            ("oid", Oid, false),
            ("name", Text, false),
            ("owner_id", Text, false),
            ("privileges", TextArray, false),
        ],
        rows: |context| {
            vec![vec![
                text(DATABASE_ID),
                Datum::Oid(16_384),
                text("materialize"),
                owner_id(context, &ObjectRef::Database),
                privileges(context, &ObjectRef::Database),
            ]]
        },
    },
    BuiltinRelation {
        schema: "mz_catalog",
        name: "mz_schemas",
        columns: &[
            ("id", Text, false),
            ("oid", Oid, false),
            ("database_id", Text, true),
            ("name", Text, false),
            ("owner_id", Text, false),
            ("privileges", TextArray, false),
        ],
        rows: |context| {
            let builtin = SCHEMAS.iter().map(|name| {
                let schema = ObjectRef::Schema(name.to_string());
                vec![
                    text(schema_id(name)),
                    Datum::Oid(schema_oid(name)),
                    if *name == "public" {
                        text(DATABASE_ID)
                    } else {
                        Datum::Null
                    },
                    text(*name),
                    owner_id(context, &schema),
                    privileges(context, &schema),
                ]
            });
            let created = context.catalog.schemas().map(|schema| {
                let object = ObjectRef::Schema(schema.name.clone());
                vec![
                    text(schema.id_text()),
                    Datum::Oid(schema.oid),
                    text(DATABASE_ID),
                    text(&schema.name),
                    owner_id(context, &object),
                    privileges(context, &object),
                ]
            });
            builtin.chain(created).collect()
        },
    },
    BuiltinRelation {
        schema: "mz_catalog",
        name: "mz_connections",
        columns: item_columns![
            ("type", Text, false),
            ("owner_id", Text, false),
            ("privileges", TextArray, false),
            ("create_sql", Text, false),
            ("redacted_create_sql", Text, false),
        ],
        rows: connection_rows,
    },
    BuiltinRelation {
        schema: "mz_internal",
        name: "mz_aws_connections",
        columns: &[
            ("id", Text, false),
            ("endpoint", Text, true),
            ("region", Text, true),
            ("access_key_id", Text, true),
            ("access_key_id_secret_id", Text, true),
            ("secret_access_key_secret_id", Text, true),
            ("session_token", Text, true),
            ("session_token_secret_id", Text, true),
            ("assume_role_arn", Text, true),
            ("assume_role_session_name", Text, true),
            ("principal", Text, true),
            ("external_id", Text, true),
            ("example_trust_policy", Jsonb, true),
        ],
        rows: |context| {
            items(context)
                .filter_map(|item| match &item.definition {
                    ItemDefinition::Connection(ConnectionDefinition::Aws(aws)) => {
                        Some(aws_connection_row(context, item.id, aws))
                    }
                    _ => None,
                })
                .collect()
        },
    },
    BuiltinRelation {
        schema: "mz_catalog",
        name: "mz_secrets",
        columns: item_columns![("owner_id", Text, false), ("privileges", TextArray, false)],
        rows: secret_rows,
    },
    BuiltinRelation {
        schema: "mz_catalog",
        name: "mz_types",
        columns: item_columns![
            ("category", Text, false),
            ("owner_id", Text, false),
            ("privileges", TextArray, false),
            ("create_sql", Text, false),
            ("redacted_create_sql", Text, false),
        ],
        rows: type_rows,
    },
    BuiltinRelation {
        schema: "mz_catalog",
        name: "mz_sinks",
        columns: item_columns![
            ("type", Text, false),
            ("connection_id", Text, true),
            ("size", Text, true),
            ("envelope_type", Text, true),
            ("format", Text, true),
            ("key_format", Text, true),
            ("value_format", Text, true),
            ("cluster_id", Text, false),
            ("owner_id", Text, false),
            ("create_sql", Text, false),
            ("redacted_create_sql", Text, false),
        ],
        rows: sink_rows,
    },
    BuiltinRelation {
        schema: "mz_catalog",
        name: "mz_iceberg_sinks",
        columns: &[
            ("id", Text, false),
            ("namespace", Text, false),
            ("table", Text, false),
            ("table_uuid", Text, true),
            ("metadata_location", Text, true),
            // floe's own: everything before this time is delivered.
            ("frontier", TimestampTz, true),
        ],
        rows: |context| {
            items(context)
                .filter_map(|item| match &item.definition {
                    ItemDefinition::Sink(sink) => {
                        let progress = context.sink_progress.get(&item.id);
                        Some(vec![
                            text(item.id.to_string()),
                            text(&sink.namespace),
                            text(&sink.table),
                            opt_text(progress.and_then(|p| p.table_uuid.clone())),
                            opt_text(progress.and_then(|p| p.metadata_location.clone())),
                            progress
                                .filter(|p| p.frontier > 0)
                                .map(|p| Datum::TimestampTz(millis_to_micros(p.frontier)))
                                .unwrap_or(Datum::Null),
                        ])
                    }
                    _ => None,
                })
                .collect()
        },
    },
    BuiltinRelation {
        schema: "mz_catalog",
        name: "mz_objects",
        columns: item_columns![
            ("type", Text, false),
            ("owner_id", Text, false),
            ("cluster_id", Text, true),
            ("privileges", TextArray, false),
        ],
        rows: object_rows,
    },
    BuiltinRelation {
        schema: "mz_catalog",
        name: "mz_tables",
        columns: item_columns![
            ("owner_id", Text, false),
            ("privileges", TextArray, false),
            ("create_sql", Text, true),
            ("redacted_create_sql", Text, true),
            ("source_id", Text, true),
        ],
        rows: table_rows,
    },
    BuiltinRelation {
        schema: "mz_catalog",
        name: "mz_sources",
        columns: item_columns![
            ("type", Text, false),
            ("connection_id", Text, true),
            ("size", Text, true),
            ("envelope_type", Text, true),
            ("key_format", Text, true),
            ("value_format", Text, true),
            ("cluster_id", Text, true),
            ("owner_id", Text, false),
            ("privileges", TextArray, false),
            ("create_sql", Text, true),
            ("redacted_create_sql", Text, true),
        ],
        rows: source_rows,
    },
    BuiltinRelation {
        schema: "mz_catalog",
        name: "mz_columns",
        columns: &[
            ("id", Text, false),
            ("name", Text, false),
            ("position", Int8, false),
            ("nullable", Bool, false),
            ("type", Text, false),
            ("default", Text, true),
            ("type_oid", Oid, false),
            ("type_mod", Int4, false),
        ],
        rows: |context| {
            let mut rows = Vec::new();
            for item in items(context) {
                let Some(desc) = item.definition.relation_desc() else {
                    continue;
                };
                let defaults = match &item.definition {
                    ItemDefinition::Table(t) => t.defaults.clone(),
                    _ => vec![],
                };
                for (position, (name, column_type)) in desc.columns.iter().enumerate() {
                    rows.push(vec![
                        text(item.id.to_string()),
                        text(name),
                        Datum::Int64(position as i64 + 1),
                        Datum::Bool(column_type.nullable),
                        text(column_type.scalar_type.to_string()),
                        opt_text(defaults.get(position).cloned().flatten()),
                        Datum::Oid(0),
                        Datum::Int32(-1),
                    ]);
                }
            }
            rows
        },
    },
    BuiltinRelation {
        schema: "mz_catalog",
        name: "mz_clusters",
        columns: &[
            ("id", Text, false),
            ("name", Text, false),
            ("owner_id", Text, false),
            ("privileges", TextArray, false),
            ("managed", Bool, false),
            ("size", Text, true),
            ("replication_factor", Int8, true),
        ],
        rows: |context| {
            context
                .catalog
                .clusters()
                .map(|cluster| {
                    vec![
                        text(cluster.id.to_string()),
                        text(&cluster.name),
                        owner_id(context, &ObjectRef::Cluster(cluster.id)),
                        privileges(context, &ObjectRef::Cluster(cluster.id)),
                        Datum::Bool(cluster.managed),
                        opt_text(cluster.size.clone()),
                        cluster
                            .replication_factor
                            .map(|f| Datum::Int64(f.into()))
                            .unwrap_or(Datum::Null),
                    ]
                })
                .collect()
        },
    },
    BuiltinRelation {
        schema: "mz_catalog",
        name: "mz_cluster_replicas",
        columns: &[
            ("id", Text, false),
            ("name", Text, false),
            ("cluster_id", Text, false),
            ("size", Text, true),
            ("availability_zone", Text, true),
            ("owner_id", Text, false),
        ],
        rows: |context| {
            context
                .catalog
                .clusters()
                .flat_map(|cluster| {
                    cluster.replicas.iter().map(move |replica| {
                        vec![
                            text(replica.id.to_string()),
                            text(&replica.name),
                            text(cluster.id.to_string()),
                            text(&replica.size),
                            Datum::Null,
                            owner_id(context, &ObjectRef::Cluster(cluster.id)),
                        ]
                    })
                })
                .collect()
        },
    },
    BuiltinRelation {
        schema: "mz_internal",
        name: "mz_sink_statuses",
        columns: STATUS_COLUMNS,
        rows: |context| {
            items(context)
                .filter(|item| matches!(item.definition, ItemDefinition::Sink(_)))
                .map(|item| {
                    let latest = context
                        .sink_status_history
                        .iter()
                        .rev()
                        .find(|event| event.sink_id == item.id);
                    vec![
                        text(item.id.to_string()),
                        text(&item.name.item),
                        text("iceberg"),
                        latest
                            .map(|e| Datum::TimestampTz(millis_to_micros(e.occurred_at)))
                            .unwrap_or(Datum::Null),
                        text(latest.map(|e| e.status.as_str()).unwrap_or("created")),
                        opt_text(latest.and_then(|e| e.error.clone())),
                        latest
                            .and_then(|e| e.details.clone())
                            .map(Datum::Jsonb)
                            .unwrap_or(Datum::Null),
                    ]
                })
                .collect()
        },
    },
    BuiltinRelation {
        schema: "mz_internal",
        name: "mz_sink_status_history",
        columns: &[
            ("occurred_at", TimestampTz, false),
            ("sink_id", Text, false),
            ("status", Text, false),
            ("error", Text, true),
            ("details", Jsonb, true),
            ("replica_id", Text, true),
        ],
        rows: |context| {
            context
                .sink_status_history
                .iter()
                .map(|event| {
                    vec![
                        Datum::TimestampTz(millis_to_micros(event.occurred_at)),
                        text(event.sink_id.to_string()),
                        text(&event.status),
                        opt_text(event.error.clone()),
                        event
                            .details
                            .clone()
                            .map(Datum::Jsonb)
                            .unwrap_or(Datum::Null),
                        opt_text(event.replica_id.map(|r| r.to_string())),
                    ]
                })
                .collect()
        },
    },
    BuiltinRelation {
        schema: "mz_internal",
        name: "mz_sink_statistics",
        columns: &[
            ("id", Text, false),
            ("messages_staged", Int8, false),
            ("messages_committed", Int8, false),
            ("bytes_staged", Int8, false),
            ("bytes_committed", Int8, false),
        ],
        rows: |context| {
            items(context)
                .filter(|item| matches!(item.definition, ItemDefinition::Sink(_)))
                .map(|item| {
                    let progress = context
                        .sink_progress
                        .get(&item.id)
                        .cloned()
                        .unwrap_or_default();
                    vec![
                        text(item.id.to_string()),
                        count(progress.messages_staged),
                        count(progress.messages_committed),
                        count(progress.bytes_staged),
                        count(progress.bytes_committed),
                    ]
                })
                .collect()
        },
    },
    BuiltinRelation {
        schema: "mz_internal",
        name: "mz_sink_maintenance",
        columns: &[
            ("sink_id", Text, false),
            ("last_run_at", TimestampTz, true),
            ("data_files_rewritten", Int8, false),
            ("delete_files_applied", Int8, false),
            ("snapshots_expired", Int8, false),
            ("bytes_rewritten", Int8, false),
            ("error", Text, true),
        ],
        // One row per sink; a sink whose maintenance has not run yet has zeros.
        rows: |context| {
            items(context)
                .filter(|item| matches!(item.definition, ItemDefinition::Sink(_)))
                .map(|item| {
                    let done = context
                        .sink_maintenance
                        .get(&item.id)
                        .cloned()
                        .unwrap_or_default();
                    vec![
                        text(item.id.to_string()),
                        if done.last_run_at == 0 {
                            Datum::Null
                        } else {
                            Datum::TimestampTz(millis_to_micros(done.last_run_at))
                        },
                        count(done.data_files_rewritten),
                        count(done.delete_files_applied),
                        count(done.snapshots_expired),
                        count(done.bytes_rewritten),
                        done.error.map_or(Datum::Null, text),
                    ]
                })
                .collect()
        },
    },
    BuiltinRelation {
        schema: "mz_internal",
        name: "mz_wallclock_global_lag",
        columns: &[("object_id", Text, false), ("lag", Interval, true)],
        // Wall clock now minus each object's write frontier.
        rows: |context| {
            let mut rows: Vec<Vec<Datum>> = context
                .storage_usage
                .iter()
                .map(|usage| {
                    let lag_ms = context.now_ms.saturating_sub(usage.upper.0);
                    vec![text(usage.id.to_string()), lag_interval(lag_ms)]
                })
                .collect();
            // A sink's frontier is its last delivered point in time.
            for item in items(context) {
                if let ItemDefinition::Sink(_) = item.definition {
                    let frontier = context
                        .sink_progress
                        .get(&item.id)
                        .map_or(0, |p| p.frontier);
                    rows.push(vec![
                        text(item.id.to_string()),
                        if frontier == 0 {
                            Datum::Null
                        } else {
                            lag_interval(context.now_ms.saturating_sub(frontier))
                        },
                    ]);
                }
            }
            rows
        },
    },
    BuiltinRelation {
        schema: "mz_internal",
        name: "mz_change_log_usage",
        columns: &[
            ("object_id", Text, false),
            ("updates", Int8, false),
            ("bytes", Int8, false),
            ("since", TimestampTz, false),
            ("upper", TimestampTz, false),
        ],
        rows: |context| {
            context
                .storage_usage
                .iter()
                .map(|usage| {
                    vec![
                        text(usage.id.to_string()),
                        count(usage.updates),
                        count(usage.bytes),
                        Datum::TimestampTz(millis_to_micros(usage.since.0)),
                        Datum::TimestampTz(millis_to_micros(usage.upper.0)),
                    ]
                })
                .collect()
        },
    },
    BuiltinRelation {
        schema: "mz_internal",
        name: "mz_read_holds",
        columns: &[
            ("object_id", Text, false),
            ("holder_id", Text, false),
            ("frontier", TimestampTz, false),
        ],
        rows: |context| {
            context
                .storage_usage
                .iter()
                .flat_map(|usage| {
                    usage.holds.iter().map(move |(holder, frontier)| {
                        vec![
                            text(usage.id.to_string()),
                            text(holder),
                            Datum::TimestampTz(millis_to_micros(frontier.0)),
                        ]
                    })
                })
                .collect()
        },
    },
    BuiltinRelation {
        schema: "mz_internal",
        name: "mz_arrangement_sizes",
        columns: &[
            ("object_id", Text, false),
            ("operator", Text, false),
            ("worker_id", Int8, false),
            ("records", Int8, false),
            ("size", Int8, false),
        ],
        // Each arrangement of each materialized view's dataflow on each worker: the
        // updates it holds and their bytes.
        rows: |context| {
            context
                .arrangement_sizes
                .iter()
                .map(|size| {
                    vec![
                        text(size.view.to_string()),
                        text(&size.operator),
                        count(size.worker as u64),
                        count(size.records),
                        count(size.bytes),
                    ]
                })
                .collect()
        },
    },
    BuiltinRelation {
        schema: "mz_internal",
        name: "mz_wallclock_global_lag_history",
        columns: &[
            ("object_id", Text, false),
            ("lag", Interval, true),
            ("occurred_at", TimestampTz, false),
        ],
        rows: |_| Vec::new(),
    },
    BuiltinRelation {
        schema: "mz_internal",
        name: "mz_source_statuses",
        columns: STATUS_COLUMNS,
        rows: crate::source_views::source_statuses,
    },
    BuiltinRelation {
        schema: "mz_internal",
        name: "mz_source_status_history",
        columns: &[
            ("occurred_at", TimestampTz, false),
            ("source_id", Text, false),
            ("status", Text, false),
            ("error", Text, true),
            ("details", Jsonb, true),
            ("replica_id", Text, true),
        ],
        rows: crate::source_views::source_status_history,
    },
    BuiltinRelation {
        schema: "mz_internal",
        name: "mz_source_statistics",
        columns: &[
            ("id", Text, false),
            ("messages_received", UInt8, false),
            ("bytes_received", UInt8, false),
            ("updates_staged", UInt8, false),
            ("updates_committed", UInt8, false),
            ("snapshot_records_known", UInt8, true),
            ("snapshot_records_staged", UInt8, true),
            ("offset_known", UInt8, true),
            ("offset_committed", UInt8, true),
        ],
        rows: crate::source_views::source_statistics,
    },
    BuiltinRelation {
        schema: "mz_catalog",
        name: "mz_views",
        columns: item_columns![
            ("definition", Text, false),
            ("owner_id", Text, false),
            ("privileges", TextArray, false),
            ("create_sql", Text, true),
            ("redacted_create_sql", Text, true),
        ],
        rows: view_rows,
    },
    BuiltinRelation {
        schema: "mz_catalog",
        name: "mz_materialized_views",
        columns: item_columns![
            ("cluster_id", Text, false),
            ("definition", Text, false),
            ("owner_id", Text, false),
            ("privileges", TextArray, false),
            ("create_sql", Text, true),
            ("redacted_create_sql", Text, true),
        ],
        rows: materialized_view_rows,
    },
    BuiltinRelation {
        schema: "mz_catalog",
        name: "mz_indexes",
        columns: item_columns![
            ("on_id", Text, false),
            ("cluster_id", Text, false),
            ("owner_id", Text, false),
            ("create_sql", Text, false),
            ("redacted_create_sql", Text, false),
        ],
        rows: index_rows,
    },
    BuiltinRelation {
        schema: "mz_catalog",
        name: "mz_index_columns",
        columns: &[
            ("index_id", Text, false),
            ("index_position", UInt8, false),
            ("on_position", UInt8, true),
            ("on_expression", Text, true),
            ("nullable", Bool, false),
        ],
        rows: index_column_rows,
    },
    BuiltinRelation {
        schema: "mz_internal",
        name: "mz_object_dependencies",
        columns: &[
            ("object_id", Text, false),
            ("referenced_object_id", Text, false),
        ],
        rows: |context| {
            items(context)
                .flat_map(|item| {
                    item.definition
                        .uses()
                        .into_iter()
                        .map(|used| vec![text(item.id.to_string()), text(used.to_string())])
                })
                .collect()
        },
    },
    BuiltinRelation {
        schema: "mz_internal",
        name: "mz_comments",
        columns: &[
            ("id", Text, false),
            ("object_type", Text, false),
            ("object_sub_id", Int4, true),
            ("comment", Text, false),
        ],
        rows: |context| {
            item_comments(context)
                .map(|(item, column, comment)| {
                    vec![
                        text(item.id.to_string()),
                        text(item.definition.kind().name()),
                        column.map(Datum::Int32).unwrap_or(Datum::Null),
                        text(comment),
                    ]
                })
                .collect()
        },
    },
];

fn connection_rows(context: &SystemContext) -> Vec<Vec<Datum>> {
    item_rows(context, |item| match &item.definition {
        ItemDefinition::Connection(connection) => {
            let mut own = vec![text(connection.type_name())];
            own.extend(ownership_and_sql(context, item));
            Some(own)
        }
        _ => None,
    })
}

fn secret_rows(context: &SystemContext) -> Vec<Vec<Datum>> {
    item_rows(context, |item| match &item.definition {
        ItemDefinition::Secret => Some(vec![
            owner_id(context, &ObjectRef::Item(item.id)),
            privileges(context, &ObjectRef::Item(item.id)),
        ]),
        _ => None,
    })
}

/// Named types (`CREATE TYPE`), by their category as Materialize names it.
fn type_rows(context: &SystemContext) -> Vec<Vec<Datum>> {
    item_rows(context, |item| {
        let ItemDefinition::Type(named) = &item.definition else {
            return None;
        };
        let category = match named.scalar_type {
            floe_repr::SqlScalarType::List { .. } => "list",
            floe_repr::SqlScalarType::Map { .. } => "map",
            _ => "composite",
        };
        Some(vec![
            text(category),
            owner_id(context, &ObjectRef::Item(item.id)),
            privileges(context, &ObjectRef::Item(item.id)),
            text(item.create_sql.clone()),
            text(item.create_sql.clone()),
        ])
    })
}

fn sink_rows(context: &SystemContext) -> Vec<Vec<Datum>> {
    item_rows(context, |item| match &item.definition {
        ItemDefinition::Sink(sink) => Some(vec![
            text("iceberg"),
            text(sink.connection.to_string()),
            opt_text(
                context
                    .catalog
                    .clusters()
                    .find(|c| c.id == sink.cluster)
                    .and_then(|c| c.size.clone()),
            ),
            text(sink.envelope.name()),
            Datum::Null,
            Datum::Null,
            Datum::Null,
            text(sink.cluster.to_string()),
            owner_id(context, &ObjectRef::Item(item.id)),
            text(&item.create_sql),
            text(&item.create_sql),
        ]),
        _ => None,
    })
}

fn object_rows(context: &SystemContext) -> Vec<Vec<Datum>> {
    item_rows(context, |item| {
        let cluster = item.definition.cluster().map(|c| c.to_string());
        Some(vec![
            text(item.definition.kind().name()),
            owner_id(context, &ObjectRef::Item(item.id)),
            opt_text(cluster),
            privileges(context, &ObjectRef::Item(item.id)),
        ])
    })
}

fn table_rows(context: &SystemContext) -> Vec<Vec<Datum>> {
    item_rows(context, |item| match &item.definition {
        ItemDefinition::Table(_) => {
            let mut own = ownership_and_sql(context, item).to_vec();
            own.push(Datum::Null);
            Some(own)
        }
        _ => None,
    })
}

fn source_rows(context: &SystemContext) -> Vec<Vec<Datum>> {
    item_rows(context, |item| match &item.definition {
        ItemDefinition::Source(source) => {
            let mut own = vec![
                text(source.type_name()),
                opt_text(crate::source_views::connection_id(source)),
                Datum::Null,
                Datum::Null,
                Datum::Null,
                Datum::Null,
                text(source.cluster.to_string()),
            ];
            own.extend(ownership_and_sql(context, item));
            Some(own)
        }
        _ => None,
    })
}

fn view_rows(context: &SystemContext) -> Vec<Vec<Datum>> {
    item_rows(context, |item| match &item.definition {
        ItemDefinition::View(view) => {
            let mut own = vec![text(&view.query)];
            own.extend(ownership_and_sql(context, item));
            Some(own)
        }
        _ => None,
    })
}

fn materialized_view_rows(context: &SystemContext) -> Vec<Vec<Datum>> {
    item_rows(context, |item| match &item.definition {
        ItemDefinition::MaterializedView(view) => {
            let mut own = vec![
                opt_text(view.cluster.map(|c| c.to_string())),
                text(&view.query),
            ];
            own.extend(ownership_and_sql(context, item));
            Some(own)
        }
        _ => None,
    })
}

fn index_rows(context: &SystemContext) -> Vec<Vec<Datum>> {
    item_rows(context, |item| match &item.definition {
        ItemDefinition::Index(index) => Some(vec![
            text(index.on.to_string()),
            text(index.cluster.to_string()),
            owner_id(context, &ObjectRef::Item(item.id)),
            text(&item.create_sql),
            text(&item.create_sql),
        ]),
        _ => None,
    })
}

/// Each key column of each index, positions from 1 as Materialize numbers them.
fn index_column_rows(context: &SystemContext) -> Vec<Vec<Datum>> {
    let mut rows = Vec::new();
    for item in items(context) {
        let ItemDefinition::Index(index) = &item.definition else {
            continue;
        };
        let desc = context
            .catalog
            .item(index.on)
            .and_then(|on| on.definition.relation_desc());
        for (position, column) in index.key.iter().enumerate() {
            let nullable = desc
                .and_then(|desc| desc.columns.get(*column))
                .is_none_or(|(_, column_type)| column_type.nullable);
            rows.push(vec![
                text(item.id.to_string()),
                Datum::UInt64(position as u64 + 1),
                Datum::UInt64(*column as u64 + 1),
                Datum::Null,
                Datum::Bool(nullable),
            ]);
        }
    }
    rows
}

/// The maintenance of no sink (for contexts built before any is read).
pub fn no_sink_maintenance()
-> &'static std::collections::HashMap<GlobalId, crate::sinks::SinkMaintenance> {
    static EMPTY: std::sync::OnceLock<
        std::collections::HashMap<GlobalId, crate::sinks::SinkMaintenance>,
    > = std::sync::OnceLock::new();
    EMPTY.get_or_init(Default::default)
}

/// The statistics of no source (for contexts built before any are read).
pub fn no_source_statistics()
-> &'static std::collections::HashMap<GlobalId, floe_postgres::StatisticsSnapshot> {
    static EMPTY: std::sync::OnceLock<
        std::collections::HashMap<GlobalId, floe_postgres::StatisticsSnapshot>,
    > = std::sync::OnceLock::new();
    EMPTY.get_or_init(Default::default)
}

fn lag_interval(lag_ms: u64) -> Datum {
    Datum::Interval {
        months: 0,
        days: 0,
        micros: i64::try_from(lag_ms).unwrap_or(i64::MAX / 1000) * 1000,
    }
}

pub(crate) fn millis_to_micros(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX / 1000) * 1000
}

/// The external id floe passes to STS AssumeRole for an AWS connection.
pub fn external_id(environment_id: &str, connection: GlobalId) -> String {
    format!("mz_{environment_id}_{connection}")
}

/// The trust policy a user pastes into IAM for an assume-role connection.
pub fn example_trust_policy(principal: Option<&str>, external_id: &str) -> String {
    let principal = principal
        .unwrap_or("<the AWS principal floe runs as: set --aws-principal or FLOE_AWS_PRINCIPAL>");
    serde_json::json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Principal": {"AWS": principal},
            "Action": "sts:AssumeRole",
            "Condition": {"StringEquals": {"sts:ExternalId": external_id}}
        }]
    })
    .to_string()
}

fn aws_connection_row(
    context: &SystemContext,
    id: GlobalId,
    aws: &floe_sql::catalog::AwsConnection,
) -> Vec<Datum> {
    let (
        access_key_id,
        access_key_id_secret_id,
        secret_access_key_secret_id,
        session_token_secret_id,
    ) = match &aws.auth {
        AwsAuth::Credentials {
            access_key_id,
            secret_access_key,
            session_token,
        } => (
            match access_key_id {
                StringOrSecret::String(s) => Some(s.clone()),
                _ => None,
            },
            match access_key_id {
                StringOrSecret::Secret(id) => Some(id.to_string()),
                _ => None,
            },
            Some(secret_access_key.to_string()),
            match session_token {
                Some(StringOrSecret::Secret(id)) => Some(id.to_string()),
                _ => None,
            },
        ),
        AwsAuth::AssumeRole { .. } => (None, None, None, None),
    };
    let (arn, session_name, principal, external, policy) = match &aws.auth {
        AwsAuth::AssumeRole { arn, session_name } => {
            let external = external_id(context.environment_id, id);
            let policy = example_trust_policy(context.aws_principal, &external);
            (
                Some(arn.clone()),
                session_name.clone(),
                context.aws_principal.map(str::to_string),
                Some(external),
                Some(policy),
            )
        }
        AwsAuth::Credentials { .. } => (None, None, None, None, None),
    };
    // A plain-string session token is a credential: never shown.
    let session_token = match &aws.auth {
        AwsAuth::Credentials {
            session_token: Some(StringOrSecret::Inline { .. }),
            ..
        } => Some("********".to_string()),
        _ => None,
    };
    vec![
        text(id.to_string()),
        opt_text(aws.endpoint.clone()),
        opt_text(aws.region.clone()),
        opt_text(access_key_id),
        opt_text(access_key_id_secret_id),
        opt_text(secret_access_key_secret_id),
        opt_text(session_token),
        opt_text(session_token_secret_id),
        opt_text(arn),
        opt_text(session_name),
        opt_text(principal),
        opt_text(external),
        policy.map(Datum::Jsonb).unwrap_or(Datum::Null),
    ]
}
