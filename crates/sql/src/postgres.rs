//! Postgres connections and sources: `CREATE CONNECTION ... TO POSTGRES`,
//! `CREATE SOURCE ... FROM POSTGRES`, `ALTER SOURCE ... ADD | DROP SUBSOURCE`, and
//! what `DROP` may do to a source's parts. Which tables exist upstream, their
//! columns and replica identity are purification's to find out (the adapter asks
//! the server); planning checks what the statement and the catalog say.

use floe_repr::{ClusterId, GlobalId, SqlState};
use floe_sql_parser::ast::{
    AlterSourceAction, AlterSourceStatement, CreatePostgresSourceStatement, OptionValue,
    PostgresSourceOption, PostgresTableSelection, SqlOption, UpstreamTableReference,
};
use sqlparser::ast::{Ident, ObjectName};

use crate::catalog::*;
use crate::error::PlanError;
use crate::options::{PostgresConnectionOptions, Written};
use crate::plan::Plan;
use crate::planner::{
    PlanNotice, ResolvedStringOrSecret, dependency_error, display_name, find_item, name_parts,
    normalize_ident, qualified, resolve_item, resolve_secret_ref, resolve_string_or_secret,
    unknown_item, with_dependents,
};
use crate::source::NewSource;

/// `CREATE CONNECTION ... TO POSTGRES (...)`: the options resolved, defaults
/// applied. Secret values stay in their secrets: a password or client key written
/// as a plain string is refused.
pub(crate) fn plan_postgres_connection(
    catalog: &dyn PlanCatalog,
    options: &[SqlOption],
) -> Result<PostgresConnection, PlanError> {
    let options = PostgresConnectionOptions::extract(options, |_, unknown| {
        PlanError::invalid(format!(
            "POSTGRES connections do not support {} values",
            unknown.join(", ")
        ))
    })?;
    let host = options
        .host
        .ok_or_else(|| PlanError::invalid("invalid CONNECTION: must specify HOST"))?;
    let port = match options.port {
        None => 5432,
        Some(port) => port.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| {
            PlanError::invalid(format!(
                "invalid PORT: {port} is not a port number (1 to 65535)"
            ))
        })?,
    };
    let user = match resolve_string_or_secret(catalog, options.user)? {
        None => return Err(PlanError::invalid("invalid CONNECTION: must specify USER")),
        Some(value) => resolved(value),
    };
    let password = secret_only(catalog, options.password, "PASSWORD")?;
    let database = options.database.unwrap_or_else(|| "postgres".to_string());
    let ssl_mode = match options.ssl_mode {
        None => PostgresSslMode::Disable,
        Some(mode) => PostgresSslMode::parse(&mode).ok_or_else(|| {
            PlanError::invalid(format!("invalid SSL MODE: '{mode}'"))
                .with_hint("SSL MODE is one of 'disable', 'require', 'verify-ca' or 'verify-full'.")
        })?,
    };
    let ssl_certificate_authority =
        resolve_string_or_secret(catalog, options.ssl_certificate_authority)?.map(resolved);
    let ssl_certificate = resolve_string_or_secret(catalog, options.ssl_certificate)?.map(resolved);
    let ssl_key = secret_only(catalog, options.ssl_key, "SSL KEY")?;
    if ssl_certificate.is_some() != ssl_key.is_some() {
        return Err(PlanError::invalid(
            "invalid CONNECTION: SSL CERTIFICATE and SSL KEY must be specified together",
        ));
    }
    Ok(PostgresConnection {
        host,
        port,
        user,
        password,
        database,
        ssl_mode,
        ssl_certificate_authority,
        ssl_certificate,
        ssl_key,
    })
}

fn resolved(value: ResolvedStringOrSecret) -> StringOrSecret {
    match value {
        ResolvedStringOrSecret::String(s) => StringOrSecret::String(s),
        ResolvedStringOrSecret::Secret(id) => StringOrSecret::Secret(id),
    }
}

/// An option whose value must be `SECRET name` (PASSWORD, SSL KEY), in
/// Materialize's words.
fn secret_only(
    catalog: &dyn PlanCatalog,
    value: Option<Written>,
    name: &str,
) -> Result<Option<GlobalId>, PlanError> {
    match value {
        None => Ok(None),
        Some(Written(Some(OptionValue::Secret(secret)))) => {
            Ok(Some(resolve_secret_ref(catalog, &secret)?))
        }
        Some(_) => Err(
            PlanError::invalid(format!("{name} must be a secret")).with_hint(format!(
                "Store the value with CREATE SECRET and write {name} SECRET <name>."
            )),
        ),
    }
}

/// A table named in `FOR TABLES (...)` or `ADD SUBSOURCE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamTableRequest {
    /// `None`: the table is in schema `public`.
    pub schema: Option<String>,
    pub name: String,
    /// `AS name`: the subsource's name (default: the table's).
    pub alias: Option<String>,
}

/// `FOR ALL TABLES | FOR TABLES (...) | FOR SCHEMAS (...)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamTables {
    All,
    Tables(Vec<UpstreamTableRequest>),
    Schemas(Vec<String>),
}

/// A column named in `TEXT COLUMNS` or `EXCLUDE COLUMNS`: `t.c` or `schema.t.c`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamColumnReference {
    pub schema: Option<String>,
    pub table: String,
    pub column: String,
}

/// What purification asks the server about: a publication, which of its tables,
/// and how to take their columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamRequest {
    pub publication: String,
    pub tables: UpstreamTables,
    pub text_columns: Vec<UpstreamColumnReference>,
    pub exclude_columns: Vec<UpstreamColumnReference>,
}

/// A planned `CREATE SOURCE ... FROM POSTGRES`. The subsources come from
/// purification; their names are checked against the catalog then.
#[derive(Debug, Clone, PartialEq)]
pub struct CreatePostgresSourcePlan {
    pub name: QualifiedName,
    pub if_not_exists: bool,
    pub cluster: ClusterId,
    pub connection: GlobalId,
    pub request: UpstreamRequest,
    /// `<name>_progress`.
    pub progress_name: QualifiedName,
    pub create_sql: String,
}

/// A planned `ALTER SOURCE`.
#[derive(Debug, Clone, PartialEq)]
pub enum AlterSourcePlan {
    /// `ADD SUBSOURCE`: tables to purify and add (`request.tables` is `Tables`).
    AddSubsources {
        source: GlobalId,
        request: UpstreamRequest,
    },
    /// `DROP SUBSOURCE`: the subsources and, with CASCADE, what depends on them
    /// (dependents first).
    DropSubsources {
        source: GlobalId,
        items: Vec<GlobalId>,
    },
}

pub(crate) fn plan_create_postgres_source(
    catalog: &dyn PlanCatalog,
    created: NewSource<'_>,
    statement: CreatePostgresSourceStatement,
) -> Result<Plan, PlanError> {
    let connection_item = resolve_item(catalog, &statement.connection)?;
    let ItemDefinition::Connection(ConnectionDefinition::Postgres(connection)) =
        &connection_item.definition
    else {
        return Err(PlanError::new(
            SqlState::WRONG_OBJECT_TYPE,
            format!(
                "\"{}\" is not a POSTGRES connection",
                connection_item.name.item
            ),
        ));
    };
    let (publication, text_columns, exclude_columns) = source_options(&statement.options)?;
    let publication = publication.ok_or_else(|| {
        PlanError::invalid("PUBLICATION option is required").with_hint(
            "Name the upstream publication: FROM POSTGRES CONNECTION c (PUBLICATION 'p').",
        )
    })?;
    let tables = match &statement.selection {
        PostgresTableSelection::AllTables => UpstreamTables::All,
        PostgresTableSelection::Tables(tables) => {
            UpstreamTables::Tables(table_requests(tables, &connection.database)?)
        }
        PostgresTableSelection::Schemas(schemas) => {
            UpstreamTables::Schemas(schemas.iter().map(normalize_ident).collect())
        }
    };
    let progress_name = QualifiedName {
        item: format!("{}_progress", created.name.item),
        ..created.name.clone()
    };
    check_subsource_names(catalog, std::iter::once(&progress_name))?;
    let mut normalized = statement.clone();
    normalized.name = qualified(&created.name);
    normalized.if_not_exists = false;
    normalized.in_cluster = Some(Ident::with_quote('"', created.cluster.name.clone()));
    normalized.connection = qualified(&connection_item.name);
    Ok(Plan::CreatePostgresSource(CreatePostgresSourcePlan {
        name: created.name,
        if_not_exists: statement.if_not_exists,
        cluster: created.cluster.id,
        connection: connection_item.id,
        request: UpstreamRequest {
            publication,
            tables,
            text_columns,
            exclude_columns,
        },
        progress_name,
        create_sql: normalized.to_string(),
    }))
}

/// Refuses names that are taken, as Materialize words it for subsources:
/// `catalog item '<name>' already exists`.
pub fn check_subsource_names<'a>(
    catalog: &dyn PlanCatalog,
    names: impl IntoIterator<Item = &'a QualifiedName>,
) -> Result<(), PlanError> {
    for name in names {
        if catalog.item_by_name(name).is_some() {
            return Err(subsource_exists(&name.item));
        }
    }
    Ok(())
}

/// `catalog item '<name>' already exists` (42710).
pub fn subsource_exists(name: &str) -> PlanError {
    PlanError::new(
        SqlState::DUPLICATE_OBJECT,
        format!("catalog item '{name}' already exists"),
    )
}

type ColumnLists = (
    Option<String>,
    Vec<UpstreamColumnReference>,
    Vec<UpstreamColumnReference>,
);

/// `PUBLICATION`, `TEXT COLUMNS` and `EXCLUDE COLUMNS`, each at most once.
fn source_options(options: &[PostgresSourceOption]) -> Result<ColumnLists, PlanError> {
    let mut publication = None;
    let mut text: Option<Vec<UpstreamColumnReference>> = None;
    let mut exclude: Option<Vec<UpstreamColumnReference>> = None;
    for option in options {
        let (name, taken) = match option {
            PostgresSourceOption::Publication(p) => {
                ("PUBLICATION", publication.replace(p.clone()).is_some())
            }
            PostgresSourceOption::TextColumns(columns) => (
                "TEXT COLUMNS",
                text.replace(column_references(columns, "TEXT COLUMNS")?)
                    .is_some(),
            ),
            PostgresSourceOption::ExcludeColumns(columns) => (
                "EXCLUDE COLUMNS",
                exclude
                    .replace(column_references(columns, "EXCLUDE COLUMNS")?)
                    .is_some(),
            ),
        };
        if taken {
            return Err(PlanError::invalid(format!(
                "{name} specified more than once"
            )));
        }
    }
    Ok((
        publication,
        text.unwrap_or_default(),
        exclude.unwrap_or_default(),
    ))
}

fn column_references(
    columns: &[ObjectName],
    option: &str,
) -> Result<Vec<UpstreamColumnReference>, PlanError> {
    let mut references: Vec<UpstreamColumnReference> = Vec::with_capacity(columns.len());
    for column in columns {
        let reference = match name_parts(column)?.as_slice() {
            [table, column] => UpstreamColumnReference {
                schema: None,
                table: table.clone(),
                column: column.clone(),
            },
            [schema, table, column] => UpstreamColumnReference {
                schema: Some(schema.clone()),
                table: table.clone(),
                column: column.clone(),
            },
            _ => {
                return Err(PlanError::invalid(format!(
                    "invalid {option} option value: column name '{}' must be written table.column or schema.table.column",
                    display_name(column)
                )));
            }
        };
        if references.contains(&reference) {
            return Err(PlanError::invalid(format!(
                "invalid {option} option value: unexpected multiple references to {}",
                display_name(column)
            )));
        }
        references.push(reference);
    }
    Ok(references)
}

/// `schema.t [AS name]`; a three-part name's database must be the connection's.
fn table_requests(
    tables: &[UpstreamTableReference],
    database: &str,
) -> Result<Vec<UpstreamTableRequest>, PlanError> {
    tables
        .iter()
        .map(|table| {
            let (schema, name) = match name_parts(&table.name)?.as_slice() {
                [name] => (None, name.clone()),
                [schema, name] => (Some(schema.clone()), name.clone()),
                [db, schema, name] if db == database => (Some(schema.clone()), name.clone()),
                [db, _, _] => {
                    return Err(PlanError::invalid(format!(
                        "table {} is in database \"{db}\", not in the connection's database \"{database}\"",
                        display_name(&table.name)
                    )));
                }
                _ => {
                    return Err(PlanError::syntax(format!(
                        "improper upstream table name (too many dotted names): {}",
                        table.name
                    )));
                }
            };
            Ok(UpstreamTableRequest {
                schema,
                name,
                alias: table.alias.as_ref().map(normalize_ident),
            })
        })
        .collect()
}

/// The Postgres source an item of kind source is a part of, with the part it is.
fn postgres_part(item: &CatalogItem) -> Option<(GlobalId, &Ingestion)> {
    match &item.definition {
        ItemDefinition::Source(source) => source
            .postgres_source(item.id)
            .zip(source.ingestion.as_ref()),
        _ => None,
    }
}

pub(crate) fn plan_alter_source(
    catalog: &dyn PlanCatalog,
    source: &CatalogItem,
    statement: AlterSourceStatement,
    notices: &mut Vec<PlanNotice>,
) -> Result<Plan, PlanError> {
    let (connection, publication) = match postgres_part(source) {
        Some((
            _,
            Ingestion::Postgres {
                connection,
                publication,
            },
        )) => (*connection, publication.clone()),
        _ => {
            return Err(PlanError::unsupported(format!(
                "ALTER SOURCE...{} is only supported for POSTGRES sources, and \"{}\" is not one",
                match statement.action {
                    AlterSourceAction::AddSubsources { .. } => "ADD SUBSOURCE",
                    AlterSourceAction::DropSubsources { .. } => "DROP SUBSOURCE",
                },
                source.name.item
            )));
        }
    };
    match statement.action {
        AlterSourceAction::AddSubsources { tables, options } => {
            let database = match catalog.item(connection).map(|c| &c.definition) {
                Some(ItemDefinition::Connection(ConnectionDefinition::Postgres(c))) => {
                    c.database.clone()
                }
                _ => return Err(PlanError::internal("the source's connection is gone")),
            };
            let (written, text_columns, exclude_columns) = source_options(&options)?;
            if written.is_some() {
                return Err(PlanError::invalid(
                    "ALTER SOURCE...ADD SUBSOURCE does not support PUBLICATION: the source's publication is used",
                ));
            }
            Ok(Plan::AlterSource(AlterSourcePlan::AddSubsources {
                source: source.id,
                request: UpstreamRequest {
                    publication,
                    tables: UpstreamTables::Tables(table_requests(&tables, &database)?),
                    text_columns,
                    exclude_columns,
                },
            }))
        }
        AlterSourceAction::DropSubsources {
            if_exists,
            names,
            cascade,
        } => plan_drop_subsources(catalog, source, &names, if_exists, cascade, notices),
    }
}

fn plan_drop_subsources(
    catalog: &dyn PlanCatalog,
    source: &CatalogItem,
    names: &[ObjectName],
    if_exists: bool,
    cascade: bool,
    notices: &mut Vec<PlanNotice>,
) -> Result<Plan, PlanError> {
    let mut items = Vec::new();
    for name in names {
        let Some(item) = find_item(catalog, name)? else {
            if if_exists {
                notices.push(PlanNotice {
                    message: format!(
                        "subsource \"{}\" does not exist, skipping",
                        display_name(name)
                    ),
                    hint: None,
                });
                continue;
            }
            return Err(unknown_item(name));
        };
        match postgres_part(item) {
            Some((parent, Ingestion::PostgresTable(_))) if parent == source.id => {}
            Some((parent, Ingestion::Progress)) if parent == source.id => {
                return Err(PlanError::invalid(format!(
                    "cannot drop the progress subsource \"{}\" of source \"{}\"",
                    item.name.item, source.name.item
                ))
                .with_hint(format!(
                    "DROP SOURCE {} drops the source with its progress subsource.",
                    source.name.item
                )));
            }
            _ => {
                return Err(PlanError::new(
                    SqlState::WRONG_OBJECT_TYPE,
                    format!(
                        "\"{}\" is not a subsource of \"{}\"",
                        item.name.item, source.name.item
                    ),
                ));
            }
        }
        let dependents: Vec<GlobalId> = catalog
            .dependents(item.id)
            .into_iter()
            .filter(|d| !items.contains(d))
            .collect();
        if let Some(first) = dependents.first()
            && !cascade
        {
            let dependent = catalog
                .item(*first)
                .ok_or_else(|| PlanError::internal("dangling dependency"))?;
            return Err(dependency_error("source", &item.name.item, dependent));
        }
        with_dependents(catalog, item.id, &mut items);
    }
    if items.is_empty() {
        return Ok(Plan::NoOp {
            tag: "ALTER SOURCE",
        });
    }
    Ok(Plan::AlterSource(AlterSourcePlan::DropSubsources {
        source: source.id,
        items,
    }))
}

/// Whether `DROP` may name `item` on its own: a Postgres source's subsources are
/// dropped with `ALTER SOURCE ... DROP SUBSOURCE` and its progress relation only
/// with the source (as in Materialize).
pub(crate) fn check_droppable(
    catalog: &dyn PlanCatalog,
    item: &CatalogItem,
) -> Result<(), PlanError> {
    let source_name = |id: GlobalId| {
        catalog
            .item(id)
            .map(|s| s.name.item.clone())
            .unwrap_or_else(|| id.to_string())
    };
    match postgres_part(item) {
        Some((source, Ingestion::PostgresTable(_))) => Err(PlanError::invalid(format!(
            "source \"{}\" is a subsource and must be dropped with ALTER SOURCE...DROP SUBSOURCE",
            item.name.item
        ))
        .with_hint(format!(
            "Use ALTER SOURCE {} DROP SUBSOURCE {}.",
            source_name(source),
            item.name.item
        ))),
        Some((source, Ingestion::Progress)) => Err(PlanError::invalid(format!(
            "source \"{}\" is the progress subsource of source \"{}\" and is dropped with it",
            item.name.item,
            source_name(source)
        ))
        .with_hint(format!("Use DROP SOURCE {}.", source_name(source)))),
        _ => Ok(()),
    }
}

/// Whether `dependent` goes with `item` even under RESTRICT: a source's progress
/// relation is part of the source.
pub(crate) fn drops_with(catalog: &dyn PlanCatalog, dependent: GlobalId, item: GlobalId) -> bool {
    catalog
        .item(dependent)
        .and_then(postgres_part)
        .is_some_and(|(source, part)| source == item && matches!(part, Ingestion::Progress))
}
