//! `SHOW ...` statements, planned as queries over the system catalog, as
//! Materialize does.

use floe_repr::SqlState;
use floe_sql_parser::ast::{ObjectType, ShowFilter, ShowObjectType, ShowStatement, quote_string};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

use crate::catalog::{
    Cluster, ItemKind, PUBLIC_SCHEMA, PUBLIC_SCHEMA_ID, PlanCatalog, SYSTEM_SCHEMAS,
};
use crate::error::PlanError;
use crate::plan::{Plan, SelectPlan, ShowVariablePlan};
use crate::planner::{normalize_ident, resolve_relations};

pub(crate) fn plan_show(
    catalog: &dyn PlanCatalog,
    statement: ShowStatement,
) -> Result<Plan, PlanError> {
    let sql = match statement {
        ShowStatement::Variable { name } => {
            return Ok(Plan::ShowVariable(ShowVariablePlan { name }));
        }
        ShowStatement::Objects {
            object_type,
            from,
            filter,
        } => {
            let schema_id = match from {
                Some(from) => schema_id(
                    catalog,
                    &from
                        .0
                        .last()
                        .and_then(|p| p.as_ident())
                        .map(normalize_ident)
                        .unwrap_or_default(),
                )?,
                None => crate::planner::current_schema(catalog)
                    .map(|schema| schema_id(catalog, &schema))
                    .transpose()?
                    .unwrap_or_default(),
            };
            let base = objects_query(object_type, &schema_id);
            match filter {
                None => format!("{base} ORDER BY name"),
                Some(ShowFilter::Like(pattern)) => format!(
                    "SELECT * FROM ({base}) AS show WHERE name LIKE {} ORDER BY name",
                    quote_string(&pattern)
                ),
                Some(ShowFilter::Where(expr)) => {
                    format!("SELECT * FROM ({base}) AS show WHERE {expr} ORDER BY name")
                }
            }
        }
        ShowStatement::Columns { table } => {
            // The relation along the search path, with its column comments.
            let item = crate::planner::resolve_item(catalog, &table)?;
            format!(
                "SELECT c.name, c.nullable, c.type, COALESCE(cm.comment, '') AS comment \
                 FROM mz_catalog.mz_columns c LEFT JOIN mz_internal.mz_comments cm \
                 ON cm.id = c.id AND cm.object_sub_id = c.position \
                 WHERE c.id = {} ORDER BY c.position",
                quote_string(&item.id.to_string())
            )
        }
        ShowStatement::Indexes {
            on,
            from,
            in_cluster,
        } => indexes_query(catalog, on, from, in_cluster)?,
        ShowStatement::Create { object_type, name } => {
            let (shown_name, create_sql) = show_create(catalog, object_type, &name)?;
            format!(
                "SELECT {} AS name, {} AS create_sql",
                quote_string(&shown_name),
                quote_string(&create_sql)
            )
        }
    };
    let statement = Parser::new(&PostgreSqlDialect {})
        .try_with_sql(&sql)
        .and_then(|mut p| p.parse_statement())
        .map_err(|e| PlanError::syntax(e.to_string()))?;
    // SHOW reads builtin relations only, which need no privilege.
    Ok(Plan::Select(SelectPlan {
        query: Box::new(resolve_relations(catalog, statement)?),
        desc: None,
        reads: Vec::new(),
    }))
}

/// The query of `SHOW <objects>`; objects that live in a schema are those of
/// `schema_id` (the `FROM` schema, else the current one), with their comments.
fn objects_query(object_type: ShowObjectType, schema_id: &str) -> String {
    // An object of a schema: `columns` of `relation` (as `alias`), its comment, and its
    // cluster's name when `with_cluster`; `filter` narrows it beside the schema.
    let in_schema =
        |columns: &str, relation: &str, alias: &str, with_cluster: bool, filter: &str| {
            let (cluster, join) = if with_cluster {
                (
                    "c.name AS cluster, ",
                    format!(" LEFT JOIN mz_catalog.mz_clusters c ON {alias}.cluster_id = c.id"),
                )
            } else {
                ("", String::new())
            };
            format!(
                "SELECT {columns}, {cluster}COALESCE(cm.comment, '') AS comment \
             FROM mz_catalog.{relation} {alias} LEFT JOIN mz_internal.mz_comments cm \
             ON cm.id = {alias}.id AND cm.object_sub_id IS NULL{join} \
             WHERE {filter}{alias}.schema_id = {}",
                quote_string(schema_id)
            )
        };
    let user_objects = "o.id LIKE 'u%' AND ";
    match object_type {
        ShowObjectType::Secrets => in_schema("o.name", "mz_secrets", "o", false, ""),
        ShowObjectType::Types => in_schema("o.name", "mz_types", "o", false, ""),
        ShowObjectType::Connections => in_schema("o.name, o.type", "mz_connections", "o", false, ""),
        ShowObjectType::Sinks => in_schema("s.name, s.type", "mz_sinks", "s", true, ""),
        ShowObjectType::Sources => {
            in_schema("s.name, s.type", "mz_sources", "s", true, "s.id LIKE 'u%' AND ")
        }
        ShowObjectType::Tables => in_schema("o.name", "mz_tables", "o", false, user_objects),
        ShowObjectType::Views => {
            in_schema("o.name", "mz_objects", "o", false, "o.type = 'view' AND ")
        }
        ShowObjectType::MaterializedViews => {
            in_schema("v.name", "mz_materialized_views", "v", true, "")
        }
        ShowObjectType::Objects => in_schema("o.name, o.type", "mz_objects", "o", false, user_objects),
        ShowObjectType::Clusters => "SELECT c.name, \
             COALESCE(string_agg(r.name || ' (' || r.size || ')', ', ' ORDER BY r.name), '') AS replicas, \
             '' AS comment \
             FROM mz_catalog.mz_clusters c LEFT JOIN mz_catalog.mz_cluster_replicas r ON r.cluster_id = c.id \
             GROUP BY c.name"
            .into(),
        ShowObjectType::ClusterReplicas => "SELECT c.name AS cluster, r.name AS replica, r.size, \
             true AS ready, '' AS comment, c.name || '.' || r.name AS name \
             FROM mz_catalog.mz_cluster_replicas r JOIN mz_catalog.mz_clusters c ON r.cluster_id = c.id"
            .into(),
        ShowObjectType::Schemas => {
            "SELECT name, '' AS comment FROM mz_catalog.mz_schemas".into()
        }
        ShowObjectType::Databases => {
            "SELECT name, '' AS comment FROM mz_catalog.mz_databases".into()
        }
    }
}

/// `SHOW INDEXES [ON relation | FROM schema] [IN CLUSTER c]`: Materialize's columns
/// (`name`, `on`, `cluster`, `key`, `comment`), the indexes of the relation, else of
/// the schema's relations (the current schema's without `FROM`).
fn indexes_query(
    catalog: &dyn PlanCatalog,
    on: Option<sqlparser::ast::ObjectName>,
    from: Option<sqlparser::ast::ObjectName>,
    in_cluster: Option<sqlparser::ast::Ident>,
) -> Result<String, PlanError> {
    let mut filters = Vec::new();
    match (on, from) {
        (Some(on), _) => {
            let item = crate::planner::resolve_item(catalog, &on)?;
            filters.push(format!("i.on_id = {}", quote_string(&item.id.to_string())));
        }
        (None, from) => {
            let schema = match from {
                Some(from) => from
                    .0
                    .last()
                    .and_then(|p| p.as_ident())
                    .map(normalize_ident)
                    .unwrap_or_default(),
                None => crate::planner::current_schema(catalog).unwrap_or_default(),
            };
            filters.push(format!(
                "i.schema_id = {}",
                quote_string(&schema_id(catalog, &schema)?)
            ));
        }
    }
    if let Some(cluster) = in_cluster {
        let name = normalize_ident(&cluster);
        let cluster = catalog
            .cluster_by_name(&name)
            .ok_or_else(|| PlanError::unknown_cluster(&name))?;
        filters.push(format!(
            "i.cluster_id = {}",
            quote_string(&cluster.id.to_string())
        ));
    }
    Ok(format!(
        "SELECT i.name, o.name AS on, c.name AS cluster, \
         array_agg(col.name ORDER BY ic.index_position) AS key, \
         COALESCE(min(cm.comment), '') AS comment \
         FROM mz_catalog.mz_indexes i \
         JOIN mz_catalog.mz_objects o ON o.id = i.on_id \
         LEFT JOIN mz_catalog.mz_clusters c ON c.id = i.cluster_id \
         JOIN mz_catalog.mz_index_columns ic ON ic.index_id = i.id \
         JOIN mz_catalog.mz_columns col ON col.id = i.on_id \
         AND col.position = CAST(ic.on_position AS bigint) \
         LEFT JOIN mz_internal.mz_comments cm ON cm.id = i.id AND cm.object_sub_id IS NULL \
         WHERE {} GROUP BY i.name, o.name, c.name ORDER BY i.name",
        filters.join(" AND ")
    ))
}

/// The `mz_schemas.id` of a schema objects can be listed from.
fn schema_id(catalog: &dyn PlanCatalog, schema: &str) -> Result<String, PlanError> {
    if schema == PUBLIC_SCHEMA {
        return Ok(format!("u{PUBLIC_SCHEMA_ID}"));
    }
    if let Some(created) = catalog.user_schema(schema) {
        return Ok(created.id_text());
    }
    if SYSTEM_SCHEMAS.contains(&schema) {
        // Builtin relations are not items: nothing of these kinds lives there.
        return Ok(String::new());
    }
    Err(PlanError::new(
        SqlState::INVALID_SCHEMA_NAME,
        format!("unknown schema '{schema}'"),
    ))
}

fn show_create(
    catalog: &dyn PlanCatalog,
    object_type: ObjectType,
    name: &sqlparser::ast::ObjectName,
) -> Result<(String, String), PlanError> {
    if object_type == ObjectType::Cluster {
        let cluster_name = name
            .0
            .last()
            .and_then(|p| p.as_ident())
            .map(normalize_ident)
            .unwrap_or_default();
        let cluster = catalog
            .cluster_by_name(&cluster_name)
            .ok_or_else(|| PlanError::unknown_cluster(&cluster_name))?;
        return Ok((cluster.name.clone(), cluster_create_sql(cluster)));
    }
    let kind = match object_type {
        ObjectType::Table => ItemKind::Table,
        ObjectType::Source => ItemKind::Source,
        ObjectType::Sink => ItemKind::Sink,
        ObjectType::Secret => ItemKind::Secret,
        ObjectType::Connection => ItemKind::Connection,
        ObjectType::View => ItemKind::View,
        ObjectType::MaterializedView => ItemKind::MaterializedView,
        ObjectType::Index => ItemKind::Index,
        ObjectType::Type => ItemKind::Type,
        other => {
            return Err(PlanError::unsupported(format!(
                "SHOW CREATE {other} is not supported"
            )));
        }
    };
    let parts = crate::planner::identifier_parts(name);
    let Some(qualified) = crate::planner::qualify_parts(catalog, &parts) else {
        return Err(PlanError::syntax("improper qualified name"));
    };
    let item = catalog.item_by_name(&qualified).ok_or_else(|| {
        PlanError::new(
            SqlState::UNDEFINED_OBJECT,
            format!("unknown catalog item '{}'", parts.join(".")),
        )
    })?;
    if item.definition.kind() != kind {
        return Err(PlanError::new(
            SqlState::WRONG_OBJECT_TYPE,
            format!("\"{}\" is not {}", item.name, kind.with_article()),
        ));
    }
    Ok((item.name.to_string(), item.create_sql.clone()))
}

fn cluster_create_sql(cluster: &Cluster) -> String {
    if cluster.managed {
        format!(
            "CREATE CLUSTER \"{}\" (SIZE = {}, REPLICATION FACTOR = {})",
            cluster.name,
            quote_string(cluster.size.as_deref().unwrap_or("")),
            cluster.replication_factor.unwrap_or(1)
        )
    } else {
        let replicas: Vec<String> = cluster
            .replicas
            .iter()
            .map(|r| format!("\"{}\" (SIZE = {})", r.name, quote_string(&r.size)))
            .collect();
        format!(
            "CREATE CLUSTER \"{}\" REPLICAS ({})",
            cluster.name,
            replicas.join(", ")
        )
    }
}
