//! What CREATE SOURCE asks the server before anything is created ("purification"):
//! the connection is usable for replication, the publication exists and has tables,
//! every selected table has REPLICA IDENTITY FULL, and every column has a type floe can
//! represent (or is listed in TEXT COLUMNS / EXCLUDE COLUMNS).

use std::collections::{BTreeMap, HashMap, HashSet};

use floe_repr::{SqlScalarType, SqlState};
use serde::{Deserialize, Serialize};

use crate::config::{PgConnectionConfig, connect};
use crate::error::{ErrorKind, PgError};
use crate::types::{TypeInfo, scalar_type};

pub use floe_repr::upstream::{UpstreamColumn, UpstreamTable};

/// A subsource CREATE SOURCE will create: its name in floe and the table it replicates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubsourceDesc {
    pub name: String,
    pub table: UpstreamTable,
}

/// A table named in `FOR TABLES (...)`; an unqualified name is in schema `public`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableRequest {
    pub schema: Option<String>,
    pub name: String,
    /// `AS name`: the subsource's name.
    pub alias: Option<String>,
}

/// `FOR ALL TABLES | FOR TABLES (...) | FOR SCHEMAS (...)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableSelection {
    All,
    Tables(Vec<TableRequest>),
    Schemas(Vec<String>),
}

/// A column named in `TEXT COLUMNS` or `EXCLUDE COLUMNS`: `t.c` or `schema.t.c`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ColumnReference {
    pub schema: Option<String>,
    pub table: String,
    pub column: String,
}

/// What CREATE SOURCE (or ALTER SOURCE ADD SUBSOURCE) asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PurifyRequest {
    pub publication: String,
    pub selection: TableSelection,
    pub text_columns: Vec<ColumnReference>,
    pub exclude_columns: Vec<ColumnReference>,
}

fn error(kind: ErrorKind, code: SqlState, message: impl Into<String>) -> PgError {
    PgError::new(kind, code, message).with_retryable(false)
}

/// Validation of a connection (CREATE CONNECTION, VALIDATE CONNECTION): it connects,
/// `wal_level` is `logical`, and the user may replicate.
pub async fn validate_connection(config: &PgConnectionConfig) -> Result<(), PgError> {
    let client = connect(config, "floe validate connection").await?;
    check_replication_prerequisites(&client, &config.user).await
}

async fn check_replication_prerequisites(
    client: &tokio_postgres::Client,
    user: &str,
) -> Result<(), PgError> {
    let wal_level: String = client.query_one("SHOW wal_level", &[]).await?.get(0);
    if wal_level != "logical" {
        return Err(error(
            ErrorKind::WalLevel,
            SqlState::OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("logical replication is not enabled on the server: wal_level is {wal_level}"),
        )
        .with_hint(
            "Set wal_level = logical in the server's configuration and restart the server.",
        ));
    }
    // Superusers may always replicate; on RDS, members of rds_replication may.
    let may_replicate: bool = client
        .query_one(
            "SELECT r.rolreplication OR r.rolsuper OR COALESCE((
                 SELECT pg_has_role(current_user, g.oid, 'member')
                 FROM pg_roles g WHERE g.rolname = 'rds_replication'), false)
             FROM pg_roles r WHERE r.rolname = current_user",
            &[],
        )
        .await?
        .get(0);
    if !may_replicate {
        return Err(error(
            ErrorKind::Privilege,
            SqlState::INSUFFICIENT_PRIVILEGE,
            format!("role \"{user}\" does not have the REPLICATION attribute"),
        )
        .with_hint(format!(
            "Grant it with ALTER ROLE \"{user}\" WITH REPLICATION, or use a role that has it."
        )));
    }
    Ok(())
}

/// A published table before its columns are looked at.
#[derive(Debug, Clone)]
struct PublishedTable {
    oid: u32,
    schema: String,
    name: String,
    replica_identity: u8,
    /// The publication's column list (PostgreSQL 15+), if it has one.
    column_list: Option<Vec<String>>,
}

impl PublishedTable {
    fn qualified_name(&self) -> String {
        format!("{}.{}", self.schema, self.name)
    }
}

/// The network checks of CREATE SOURCE: returns the subsources to create, in the order of
/// the selection (or by schema and name for ALL TABLES / SCHEMAS).
pub async fn purify(
    config: &PgConnectionConfig,
    request: &PurifyRequest,
) -> Result<Vec<SubsourceDesc>, PgError> {
    let client = connect(config, "floe purification").await?;
    check_replication_prerequisites(&client, &config.user).await?;
    let published = published_tables(&client, &request.publication).await?;
    let selected = select_tables(&published, request)?;
    for (table, _) in &selected {
        if table.replica_identity != b'f' {
            return Err(error(
                ErrorKind::UnsupportedTable,
                SqlState::OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!(
                    "table {} does not have REPLICA IDENTITY FULL",
                    table.qualified_name()
                ),
            )
            .with_hint(format!(
                "Run ALTER TABLE {} REPLICA IDENTITY FULL upstream, then create the source again.",
                table.qualified_name()
            )));
        }
    }
    let options = ColumnOptions::resolve(request, &selected)?;
    let oids: Vec<u32> = selected.iter().map(|(t, _)| t.oid).collect();
    let mut columns = table_columns(&client, &oids).await?;
    let keys = primary_keys(&client, &oids).await?;
    let mut subsources = Vec::with_capacity(selected.len());
    for (table, name) in selected {
        let raw = columns.remove(&table.oid).unwrap_or_default();
        let upstream = build_table(&table, raw, keys.get(&table.oid), &options)?;
        subsources.push(SubsourceDesc {
            name,
            table: upstream,
        });
    }
    Ok(subsources)
}

async fn published_tables(
    client: &tokio_postgres::Client,
    publication: &str,
) -> Result<Vec<PublishedTable>, PgError> {
    let exists = client
        .query_opt(
            "SELECT 1 FROM pg_publication WHERE pubname = $1",
            &[&publication],
        )
        .await?;
    if exists.is_none() {
        return Err(error(
            ErrorKind::Publication,
            SqlState::UNDEFINED_OBJECT,
            format!("publication \"{publication}\" does not exist"),
        ));
    }
    let version: i32 = client
        .query_one("SELECT current_setting('server_version_num')::int4", &[])
        .await?
        .get(0);
    // Column lists came with PostgreSQL 15.
    let column_list = if version >= 150000 {
        "pt.attnames::text[]"
    } else {
        "NULL::text[]"
    };
    let rows = client
        .query(
            &format!(
                "SELECT c.oid, pt.schemaname::text, pt.tablename::text, c.relreplident, {column_list}
                 FROM pg_publication_tables pt
                 JOIN pg_namespace n ON n.nspname = pt.schemaname
                 JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = pt.tablename
                 WHERE pt.pubname = $1
                 ORDER BY pt.schemaname, pt.tablename"
            ),
            &[&publication],
        )
        .await?;
    if rows.is_empty() {
        return Err(error(
            ErrorKind::Publication,
            SqlState::OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("publication \"{publication}\" has no tables"),
        ));
    }
    Ok(rows
        .iter()
        .map(|row| PublishedTable {
            oid: row.get(0),
            schema: row.get(1),
            name: row.get(2),
            replica_identity: row.get::<_, i8>(3) as u8,
            column_list: row.get(4),
        })
        .collect())
}

/// The selected tables with their subsource names.
fn select_tables(
    published: &[PublishedTable],
    request: &PurifyRequest,
) -> Result<Vec<(PublishedTable, String)>, PgError> {
    let publication = &request.publication;
    let selected: Vec<(PublishedTable, String)> = match &request.selection {
        TableSelection::All => published
            .iter()
            .map(|t| (t.clone(), t.name.clone()))
            .collect(),
        TableSelection::Schemas(schemas) => {
            let mut selected = Vec::new();
            for schema in schemas {
                let before = selected.len();
                selected.extend(
                    published
                        .iter()
                        .filter(|t| &t.schema == schema)
                        .map(|t| (t.clone(), t.name.clone())),
                );
                if selected.len() == before {
                    return Err(error(
                        ErrorKind::Publication,
                        SqlState::UNDEFINED_TABLE,
                        format!(
                            "no tables of schema \"{schema}\" found in publication \"{publication}\""
                        ),
                    ));
                }
            }
            selected
        }
        TableSelection::Tables(requests) => {
            let mut selected = Vec::new();
            for request in requests {
                let schema = request.schema.as_deref().unwrap_or("public");
                let table = published
                    .iter()
                    .find(|t| t.schema == schema && t.name == request.name)
                    .ok_or_else(|| {
                        error(
                            ErrorKind::Publication,
                            SqlState::UNDEFINED_TABLE,
                            format!(
                                "table {schema}.{} not found in publication \"{publication}\"",
                                request.name
                            ),
                        )
                    })?;
                let name = request.alias.clone().unwrap_or_else(|| table.name.clone());
                selected.push((table.clone(), name));
            }
            selected
        }
    };
    check_unique(&selected)?;
    Ok(selected)
}

/// No table twice, no two subsources with one name.
fn check_unique(selected: &[(PublishedTable, String)]) -> Result<(), PgError> {
    let mut tables = HashSet::new();
    let mut names = HashSet::new();
    for (table, name) in selected {
        if !tables.insert(table.oid) {
            return Err(error(
                ErrorKind::Publication,
                SqlState::DUPLICATE_OBJECT,
                format!(
                    "table {} is referenced more than once",
                    table.qualified_name()
                ),
            ));
        }
        if !names.insert(name.as_str()) {
            return Err(error(
                ErrorKind::Publication,
                SqlState::DUPLICATE_OBJECT,
                format!("multiple subsources would be named \"{name}\""),
            )
            .with_hint("Name the tables with FOR TABLES (schema.table AS name, ...)."));
        }
    }
    Ok(())
}

/// TEXT COLUMNS and EXCLUDE COLUMNS resolved to (table oid, column name).
struct ColumnOptions {
    text: HashSet<(u32, String)>,
    exclude: HashSet<(u32, String)>,
    /// Every reference, to check that its column exists: (table oid, column, option, as written).
    references: Vec<(u32, String, &'static str, String)>,
}

impl ColumnOptions {
    fn resolve(
        request: &PurifyRequest,
        selected: &[(PublishedTable, String)],
    ) -> Result<ColumnOptions, PgError> {
        let mut options = ColumnOptions {
            text: HashSet::new(),
            exclude: HashSet::new(),
            references: Vec::new(),
        };
        for (option, list) in [
            ("TEXT COLUMNS", &request.text_columns),
            ("EXCLUDE COLUMNS", &request.exclude_columns),
        ] {
            for reference in list {
                let table = resolve_table(reference, selected, option)?;
                let written = format!("{}.{}", table.qualified_name(), reference.column);
                let key = (table.oid, reference.column.clone());
                if option == "TEXT COLUMNS" {
                    options.text.insert(key);
                } else {
                    if options.text.contains(&key) {
                        return Err(error(
                            ErrorKind::Publication,
                            SqlState::INVALID_PARAMETER_VALUE,
                            format!("column {written} is in both TEXT COLUMNS and EXCLUDE COLUMNS"),
                        ));
                    }
                    options.exclude.insert(key);
                }
                options
                    .references
                    .push((table.oid, reference.column.clone(), option, written));
            }
        }
        Ok(options)
    }
}

fn resolve_table<'a>(
    reference: &ColumnReference,
    selected: &'a [(PublishedTable, String)],
    option: &str,
) -> Result<&'a PublishedTable, PgError> {
    let matches: Vec<&PublishedTable> = selected
        .iter()
        .map(|(t, _)| t)
        .filter(|t| {
            t.name == reference.table && reference.schema.as_ref().is_none_or(|s| s == &t.schema)
        })
        .collect();
    let written = match &reference.schema {
        Some(schema) => format!("{schema}.{}", reference.table),
        None => reference.table.clone(),
    };
    match matches.as_slice() {
        [table] => Ok(table),
        [] => Err(error(
            ErrorKind::Publication,
            SqlState::UNDEFINED_TABLE,
            format!("invalid {option} option value: table {written} is not part of the source"),
        )),
        _ => Err(error(
            ErrorKind::Publication,
            SqlState::AMBIGUOUS_COLUMN,
            format!("invalid {option} option value: table name {written} is ambiguous"),
        )
        .with_hint("Qualify the table with its schema: schema.table.column.")),
    }
}

/// A column as the catalog describes it.
#[derive(Debug, Clone)]
struct RawColumn {
    attnum: i16,
    name: String,
    type_oid: u32,
    type_modifier: i32,
    not_null: bool,
    /// `format_type(...)`, for the unsupported type error.
    type_name: String,
    info: Option<TypeInfo>,
}

/// The columns of each table (published, not dropped, not generated), by table oid.
async fn table_columns(
    client: &tokio_postgres::Client,
    oids: &[u32],
) -> Result<HashMap<u32, Vec<RawColumn>>, PgError> {
    let rows = client
        .query(
            "SELECT a.attrelid, a.attnum, a.attname::text, a.atttypid, a.atttypmod, a.attnotnull,
                    format_type(a.atttypid, a.atttypmod)
             FROM pg_attribute a
             WHERE a.attrelid = ANY($1) AND a.attnum > 0 AND NOT a.attisdropped
               AND a.attgenerated = ''
             ORDER BY a.attrelid, a.attnum",
            &[&oids],
        )
        .await?;
    let mut type_oids: Vec<u32> = rows.iter().map(|r| r.get::<_, u32>(3)).collect();
    type_oids.sort_unstable();
    type_oids.dedup();
    let types = type_catalog(client, type_oids).await?;
    let mut columns: HashMap<u32, Vec<RawColumn>> = HashMap::new();
    for row in rows {
        let type_oid: u32 = row.get(3);
        let type_modifier: i32 = row.get(4);
        columns.entry(row.get(0)).or_default().push(RawColumn {
            attnum: row.get(1),
            name: row.get(2),
            type_oid,
            type_modifier,
            not_null: row.get(5),
            type_name: row.get(6),
            info: resolve_type(&types, type_oid, type_modifier, 0),
        });
    }
    Ok(columns)
}

/// One `pg_type` row.
#[derive(Debug, Clone)]
struct TypeRow {
    kind: u8,
    category: u8,
    element: u32,
    base: u32,
    base_modifier: i32,
}

/// `pg_type` rows of the given types and everything they refer to (array elements,
/// domains' base types), fetched until closed.
async fn type_catalog(
    client: &tokio_postgres::Client,
    mut pending: Vec<u32>,
) -> Result<HashMap<u32, TypeRow>, PgError> {
    let mut types: HashMap<u32, TypeRow> = HashMap::new();
    while !pending.is_empty() {
        let rows = client
            .query(
                "SELECT oid, typtype, typcategory, typelem, typbasetype, typtypmod
                 FROM pg_type WHERE oid = ANY($1)",
                &[&pending],
            )
            .await?;
        pending.clear();
        for row in rows {
            let entry = TypeRow {
                kind: row.get::<_, i8>(1) as u8,
                category: row.get::<_, i8>(2) as u8,
                element: row.get(3),
                base: row.get(4),
                base_modifier: row.get(5),
            };
            for next in [entry.element, entry.base] {
                if next != 0 && !types.contains_key(&next) {
                    pending.push(next);
                }
            }
            types.insert(row.get(0), entry);
        }
        pending.retain(|oid| !types.contains_key(oid));
        pending.sort_unstable();
        pending.dedup();
    }
    Ok(types)
}

/// The type info of a column of type `type_oid`, through domains and array elements.
fn resolve_type(
    types: &HashMap<u32, TypeRow>,
    type_oid: u32,
    modifier: i32,
    depth: usize,
) -> Option<TypeInfo> {
    // Domains over domains are fine; a cycle is not possible in a sane catalog, but a
    // bound keeps a corrupt one from looping.
    if depth > 16 {
        return None;
    }
    let row = types.get(&type_oid)?;
    if row.kind == b'd' {
        let modifier = if row.base_modifier >= 0 {
            row.base_modifier
        } else {
            modifier
        };
        return resolve_type(types, row.base, modifier, depth + 1);
    }
    let element = if row.category == b'A' && row.element != 0 {
        Some(Box::new(resolve_type(
            types,
            row.element,
            modifier,
            depth + 1,
        )?))
    } else {
        None
    };
    Some(TypeInfo {
        oid: type_oid,
        modifier,
        kind: row.kind,
        category: row.category,
        element,
    })
}

/// Primary key columns (attnums) by table oid.
async fn primary_keys(
    client: &tokio_postgres::Client,
    oids: &[u32],
) -> Result<HashMap<u32, Vec<i16>>, PgError> {
    let rows = client
        .query(
            "SELECT conrelid, conkey FROM pg_constraint WHERE contype = 'p' AND conrelid = ANY($1)",
            &[&oids],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|row| (row.get::<_, u32>(0), row.get::<_, Vec<i16>>(1)))
        .collect())
}

fn build_table(
    table: &PublishedTable,
    raw: Vec<RawColumn>,
    key: Option<&Vec<i16>>,
    options: &ColumnOptions,
) -> Result<UpstreamTable, PgError> {
    let names: HashSet<&str> = raw.iter().map(|c| c.name.as_str()).collect();
    for (oid, column, option, written) in &options.references {
        if *oid == table.oid && !names.contains(column.as_str()) {
            return Err(error(
                ErrorKind::Publication,
                SqlState::UNDEFINED_COLUMN,
                format!("invalid {option} option value: column {written} does not exist"),
            ));
        }
    }
    let published: Option<HashSet<&str>> = table
        .column_list
        .as_ref()
        .map(|list| list.iter().map(String::as_str).collect());
    let mut kept: BTreeMap<i16, UpstreamColumn> = BTreeMap::new();
    for column in raw {
        let key = (table.oid, column.name.clone());
        let not_published = published
            .as_ref()
            .is_some_and(|p| !p.contains(column.name.as_str()));
        if options.exclude.contains(&key) || not_published {
            continue;
        }
        let scalar_type = if options.text.contains(&key) {
            SqlScalarType::Text
        } else {
            column
                .info
                .as_ref()
                .and_then(scalar_type)
                .ok_or_else(|| unsupported_type(table, &column))?
        };
        kept.insert(
            column.attnum,
            UpstreamColumn {
                name: column.name,
                type_oid: column.type_oid,
                type_modifier: column.type_modifier,
                scalar_type,
                nullable: !column.not_null,
            },
        );
    }
    // The key survives only if every one of its columns is kept.
    let primary_key = key.and_then(|attnums| {
        attnums
            .iter()
            .map(|attnum| kept.keys().position(|k| k == attnum))
            .collect::<Option<Vec<usize>>>()
    });
    Ok(UpstreamTable {
        oid: table.oid,
        schema: table.schema.clone(),
        name: table.name.clone(),
        columns: kept.into_values().collect(),
        primary_key,
    })
}

fn unsupported_type(table: &PublishedTable, column: &RawColumn) -> PgError {
    let written = format!("{}.{}", table.qualified_name(), column.name);
    error(
        ErrorKind::UnsupportedTable,
        SqlState::FEATURE_NOT_SUPPORTED,
        format!(
            "column {written} has unsupported type {}",
            column.type_name
        ),
    )
    .with_hint(format!(
        "Use TEXT COLUMNS ({written}) to ingest its values as text, or EXCLUDE COLUMNS ({written}) to leave it out."
    ))
}
