//! floe's embedded Iceberg catalog (`CATALOG TYPE = 'local'`): an Iceberg SQL catalog in
//! SQLite with a `file://` warehouse.
//!
//! The two tables are exactly those of pyiceberg's `SqlCatalog` (schema v1) and the Iceberg
//! JDBC catalog, so those tools can open the same file: pyiceberg's
//! `SqlCatalog(LOCAL_CATALOG_NAME, uri="sqlite:///<database>")` lists what floe wrote.
//! Namespaces are stored as dotted strings; a namespace exists when it has a property row
//! or a table (or a child namespace does), as in those catalogs.
//!
//! [`LocalCatalog`]'s calls are blocking (SQLite); [`EmbeddedCatalog`] is the same catalog
//! as an async [`Catalog`], running them on blocking threads and writing the tables'
//! metadata files into the warehouse.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use iceberg::io::FileIO;
use iceberg::spec::{Schema, TableMetadata, TableMetadataBuilder};
use rusqlite::{Connection, OptionalExtension, params};

use crate::catalog::{Catalog, TableCommit, TableCreation};
use crate::error::{ErrorKind, SinkError};
use crate::namespace::Namespace;
use crate::table::{LoadedTable, now_ms, storage_error};

/// The `catalog_name` floe writes in every row; other tools open the catalog by this name.
pub const LOCAL_CATALOG_NAME: &str = "floe";

/// `iceberg_type` of table rows (schema v1; views would be `VIEW`).
const TABLE_TYPE: &str = "TABLE";

/// The DDL pyiceberg's SqlCatalog issues on SQLite (and the JDBC catalog's v1 schema).
const CREATE_TABLES: &str = "
CREATE TABLE IF NOT EXISTS iceberg_tables (
    catalog_name VARCHAR(255) NOT NULL,
    table_namespace VARCHAR(255) NOT NULL,
    table_name VARCHAR(255) NOT NULL,
    metadata_location VARCHAR(1000),
    previous_metadata_location VARCHAR(1000),
    iceberg_type VARCHAR(5),
    PRIMARY KEY (catalog_name, table_namespace, table_name)
);
CREATE TABLE IF NOT EXISTS iceberg_namespace_properties (
    catalog_name VARCHAR(255) NOT NULL,
    namespace VARCHAR(255) NOT NULL,
    property_key VARCHAR(255) NOT NULL,
    property_value VARCHAR(1000) NOT NULL,
    PRIMARY KEY (catalog_name, namespace, property_key)
);
";

/// The `file:` URI of an absolute path: `file://` and the path, `file:///srv/w/t` (an
/// empty authority, RFC 8089). The path is not percent-encoded: iceberg-rust, DuckDB and
/// pyiceberg all read the characters after `file://` literally.
pub fn file_uri(path: &Path) -> String {
    format!("file://{}", path.display())
}

/// The absolute path a `file:` URI names (`file:///p` or `file://localhost/p`); `None`
/// for anything else, such as `file://./floe-data/...`, which floe wrote while its data
/// directory could be relative (the `.` there is a host, not a directory).
pub fn file_uri_path(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    let path = rest.strip_prefix("localhost").unwrap_or(rest);
    path.starts_with('/').then(|| PathBuf::from(path))
}

/// Refuses a table whose location floe wrote as `file://<relative path>` while its data
/// directory could be relative (`file://./floe-data/...`: the `.` is the URI's host).
/// iceberg-rust read such a location from the root of the file system, so the table's
/// files went to `/floe-data/...`, where other engines do not find them (DuckDB cannot
/// open the URI at all) and where a user who is not root cannot write. Writing on would
/// only grow a table nobody can read: the sink stalls with this error and the way out.
fn check_location(namespace: &Namespace, table: &str, location: &str) -> Result<(), SinkError> {
    if !location.starts_with("file:") || file_uri_path(location).is_some() {
        return Ok(());
    }
    Err(SinkError::new(
        ErrorKind::Storage,
        format!(
            "Iceberg table \"{namespace}.{table}\" has the location {location}, which is not an absolute file:// URI: an older floe wrote it while its data directory was a relative path, and other engines cannot read the table"
        ),
    )
    .with_detail("Its files are under the root of the file system, not under the data directory.")
    .with_hint(
        "Drop the sink and create it again with another TABLE, so that floe writes a new table under its data directory, or start again with a new data directory.",
    )
    .with_retryable(false))
}

/// An open local catalog. Clones share the connection.
#[derive(Clone)]
pub struct LocalCatalog {
    connection: Arc<Mutex<Connection>>,
    database: PathBuf,
    warehouse: PathBuf,
    catalog_name: String,
    /// Whether `iceberg_tables` has the v1 `iceberg_type` column (a catalog created by an
    /// older pyiceberg may not; floe then neither writes nor filters on it).
    has_type_column: bool,
}

impl fmt::Debug for LocalCatalog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalCatalog")
            .field("database", &self.database)
            .field("warehouse", &self.warehouse)
            .field("catalog_name", &self.catalog_name)
            .finish_non_exhaustive()
    }
}

impl LocalCatalog {
    /// Opens the catalog in `database`, creating the file, its tables and the warehouse
    /// directory when missing.
    pub fn open(database: &Path, warehouse: &Path) -> Result<LocalCatalog, SinkError> {
        LocalCatalog::open_named(database, warehouse, LOCAL_CATALOG_NAME)
    }

    /// [`LocalCatalog::open`] with another `catalog_name`.
    pub fn open_named(
        database: &Path,
        warehouse: &Path,
        catalog_name: &str,
    ) -> Result<LocalCatalog, SinkError> {
        let storage_error = |what: &str, path: &Path, err: &dyn fmt::Display| {
            SinkError::new(
                ErrorKind::Storage,
                format!("cannot {what} {}: {err}", path.display()),
            )
            .with_retryable(false)
        };
        let database = &std::path::absolute(database)
            .map_err(|err| storage_error("resolve", database, &err))?;
        if let Some(parent) = database.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|err| storage_error("create directory", parent, &err))?;
        }
        std::fs::create_dir_all(warehouse)
            .map_err(|err| storage_error("create warehouse directory", warehouse, &err))?;
        // Canonical paths, so that the `file://` locations of tables are well formed
        // (`file:///...`) whatever the current directory of floe or of a reader.
        let warehouse = &warehouse
            .canonicalize()
            .map_err(|err| storage_error("resolve", warehouse, &err))?;
        let connection = Connection::open(database)
            .map_err(|err| storage_error("open local catalog", database, &err))?;
        // Other processes (pyiceberg, a second floe tool) may hold the file briefly.
        connection
            .busy_timeout(Duration::from_secs(5))
            .and_then(|()| connection.execute_batch(CREATE_TABLES))
            .map_err(|err| storage_error("initialize local catalog", database, &err))?;
        let has_type_column = connection
            .prepare("SELECT iceberg_type FROM iceberg_tables LIMIT 0")
            .is_ok();
        Ok(LocalCatalog {
            connection: Arc::new(Mutex::new(connection)),
            database: database.to_path_buf(),
            warehouse: warehouse.to_path_buf(),
            catalog_name: catalog_name.to_string(),
            has_type_column,
        })
    }

    pub fn database(&self) -> &Path {
        &self.database
    }

    pub fn warehouse(&self) -> &Path {
        &self.warehouse
    }

    pub fn catalog_name(&self) -> &str {
        &self.catalog_name
    }

    /// Where a new table's files go: `file:///<warehouse>/<namespace>.db/<table>`,
    /// pyiceberg's layout.
    pub fn default_table_location(&self, namespace: &Namespace, table: &str) -> String {
        file_uri(&self.warehouse.join(format!("{namespace}.db")).join(table))
    }

    fn connection(&self) -> std::sync::MutexGuard<'_, Connection> {
        // A panic while holding the lock leaves SQLite consistent; keep going.
        self.connection
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn sql_error(&self, what: &str, err: rusqlite::Error) -> SinkError {
        let busy = matches!(
            err.sqlite_error_code(),
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
        );
        SinkError::new(
            ErrorKind::Storage,
            format!(
                "local catalog {} failed {what}: {err}",
                self.database.display()
            ),
        )
        .with_retryable(busy)
    }

    /// The top-level namespaces (what pyiceberg's `list_namespaces()` returns).
    pub fn list_namespaces(&self) -> Result<Vec<Namespace>, SinkError> {
        let connection = self.connection();
        let names = (|| {
            let mut statement = connection.prepare(
                "SELECT table_namespace FROM iceberg_tables WHERE catalog_name = ?1
                 UNION
                 SELECT namespace FROM iceberg_namespace_properties WHERE catalog_name = ?1",
            )?;
            let rows =
                statement.query_map(params![self.catalog_name], |row| row.get::<_, String>(0))?;
            rows.collect::<Result<Vec<String>, _>>()
        })()
        .map_err(|err| self.sql_error("listing namespaces", err))?;
        let mut top_level: Vec<Namespace> = names
            .iter()
            .filter_map(|name| name.split('.').next())
            .filter(|level| !level.is_empty())
            .map(|level| Namespace::new(vec![level.to_string()]))
            .collect::<Result<_, _>>()?;
        top_level.sort();
        top_level.dedup();
        Ok(top_level)
    }

    /// Whether the namespace exists: a property row or a table in it or below it.
    pub fn namespace_exists(&self, namespace: &Namespace) -> Result<bool, SinkError> {
        let connection = self.connection();
        namespace_exists(&connection, &self.catalog_name, namespace)
            .map_err(|err| self.sql_error(&format!("checking namespace \"{namespace}\""), err))
    }

    /// Creates a namespace with `properties` (pyiceberg's `{"exists": "true"}` when empty,
    /// so that an empty namespace still has a row).
    pub fn create_namespace(
        &self,
        namespace: &Namespace,
        properties: &BTreeMap<String, String>,
    ) -> Result<(), SinkError> {
        let mut connection = self.connection();
        let what = format!("creating namespace \"{namespace}\"");
        let transaction = connection
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|err| self.sql_error(&what, err))?;
        if namespace_exists(&transaction, &self.catalog_name, namespace)
            .map_err(|err| self.sql_error(&what, err))?
        {
            return Err(SinkError::new(
                ErrorKind::AlreadyExists,
                format!("namespace \"{namespace}\" already exists"),
            ));
        }
        let minimal = BTreeMap::from([("exists".to_string(), "true".to_string())]);
        let properties = if properties.is_empty() {
            &minimal
        } else {
            properties
        };
        for (key, value) in properties {
            transaction
                .execute(
                    "INSERT INTO iceberg_namespace_properties
                     (catalog_name, namespace, property_key, property_value)
                     VALUES (?1, ?2, ?3, ?4)",
                    params![self.catalog_name, namespace.to_string(), key, value],
                )
                .map_err(|err| self.sql_error(&what, err))?;
        }
        transaction
            .commit()
            .map_err(|err| self.sql_error(&what, err))
    }

    /// Registers a new table whose first metadata file is `metadata_location`.
    pub fn create_table(
        &self,
        namespace: &Namespace,
        table: &str,
        metadata_location: &str,
    ) -> Result<(), SinkError> {
        let mut connection = self.connection();
        let what = format!("creating table \"{namespace}.{table}\"");
        let transaction = connection
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|err| self.sql_error(&what, err))?;
        if !namespace_exists(&transaction, &self.catalog_name, namespace)
            .map_err(|err| self.sql_error(&what, err))?
        {
            return Err(namespace_not_found(namespace));
        }
        let inserted = if self.has_type_column {
            transaction.execute(
                "INSERT OR IGNORE INTO iceberg_tables
                 (catalog_name, table_namespace, table_name, metadata_location,
                  previous_metadata_location, iceberg_type)
                 VALUES (?1, ?2, ?3, ?4, NULL, ?5)",
                params![
                    self.catalog_name,
                    namespace.to_string(),
                    table,
                    metadata_location,
                    TABLE_TYPE
                ],
            )
        } else {
            transaction.execute(
                "INSERT OR IGNORE INTO iceberg_tables
                 (catalog_name, table_namespace, table_name, metadata_location,
                  previous_metadata_location)
                 VALUES (?1, ?2, ?3, ?4, NULL)",
                params![
                    self.catalog_name,
                    namespace.to_string(),
                    table,
                    metadata_location
                ],
            )
        }
        .map_err(|err| self.sql_error(&what, err))?;
        if inserted == 0 {
            return Err(SinkError::new(
                ErrorKind::AlreadyExists,
                format!("Iceberg table \"{namespace}.{table}\" already exists"),
            ));
        }
        transaction
            .commit()
            .map_err(|err| self.sql_error(&what, err))
    }

    /// The current metadata file of a table.
    pub fn load_table_location(
        &self,
        namespace: &Namespace,
        table: &str,
    ) -> Result<String, SinkError> {
        let connection = self.connection();
        let what = format!("loading table \"{namespace}.{table}\"");
        let location = current_location(&connection, self, namespace, table)
            .map_err(|err| self.sql_error(&what, err))?;
        match location {
            Some(Some(location)) => {
                check_location(namespace, table, &location)?;
                Ok(location)
            }
            Some(None) => Err(SinkError::new(
                ErrorKind::UnexpectedResponse,
                format!("Iceberg table \"{namespace}.{table}\" has no metadata location"),
            )),
            None => Err(table_not_found(namespace, table)),
        }
    }

    /// Points a table at a new metadata file, if and only if its current one is still
    /// `expected` (compare and swap): the commit step of the SQL catalog. Another writer's
    /// commit in between makes this fail with [`ErrorKind::CommitConflict`].
    pub fn swap_metadata_location(
        &self,
        namespace: &Namespace,
        table: &str,
        expected: &str,
        new: &str,
    ) -> Result<(), SinkError> {
        let connection = self.connection();
        let what = format!("committing table \"{namespace}.{table}\"");
        let type_filter = if self.has_type_column {
            " AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL)"
        } else {
            ""
        };
        let updated = connection
            .execute(
                &format!(
                    "UPDATE iceberg_tables
                     SET metadata_location = ?5, previous_metadata_location = ?4
                     WHERE catalog_name = ?1 AND table_namespace = ?2 AND table_name = ?3
                       AND metadata_location = ?4{type_filter}"
                ),
                params![
                    self.catalog_name,
                    namespace.to_string(),
                    table,
                    expected,
                    new
                ],
            )
            .map_err(|err| self.sql_error(&what, err))?;
        if updated == 1 {
            return Ok(());
        }
        match current_location(&connection, self, namespace, table)
            .map_err(|err| self.sql_error(&what, err))?
        {
            None => Err(table_not_found(namespace, table)),
            Some(current) => Err(SinkError::new(
                ErrorKind::CommitConflict,
                format!("Iceberg table \"{namespace}.{table}\" was changed by another writer"),
            )
            .with_detail(format!(
                "expected metadata location {expected}, found {}",
                current.as_deref().unwrap_or("none")
            ))),
        }
    }

    /// The tables of a namespace.
    pub fn list_tables(&self, namespace: &Namespace) -> Result<Vec<String>, SinkError> {
        let connection = self.connection();
        let what = format!("listing tables of \"{namespace}\"");
        let type_filter = if self.has_type_column {
            " AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL)"
        } else {
            ""
        };
        let tables = (|| {
            let mut statement = connection.prepare(&format!(
                "SELECT table_name FROM iceberg_tables
                 WHERE catalog_name = ?1 AND table_namespace = ?2{type_filter}
                 ORDER BY table_name"
            ))?;
            let rows = statement
                .query_map(params![self.catalog_name, namespace.to_string()], |row| {
                    row.get::<_, String>(0)
                })?;
            rows.collect::<Result<Vec<String>, _>>()
        })()
        .map_err(|err| self.sql_error(&what, err))?;
        Ok(tables)
    }
}

/// floe's embedded catalog as a [`Catalog`]: the SQL catalog's blocking calls run on
/// blocking threads; table metadata files live in the warehouse, read and written through
/// the file system.
#[derive(Debug, Clone)]
pub struct EmbeddedCatalog {
    catalog: LocalCatalog,
}

impl EmbeddedCatalog {
    /// Opens (or creates) the catalog in `database` with its warehouse directory.
    pub async fn open(database: PathBuf, warehouse: PathBuf) -> Result<EmbeddedCatalog, SinkError> {
        let catalog = blocking(move || LocalCatalog::open(&database, &warehouse)).await?;
        Ok(EmbeddedCatalog { catalog })
    }

    /// Runs `work` on the SQL catalog on a blocking thread.
    async fn with_catalog<T: Send + 'static>(
        &self,
        work: impl FnOnce(&LocalCatalog) -> Result<T, SinkError> + Send + 'static,
    ) -> Result<T, SinkError> {
        let catalog = self.catalog.clone();
        blocking(move || work(&catalog)).await
    }
}

#[async_trait]
impl Catalog for EmbeddedCatalog {
    async fn list_namespaces(&self) -> Result<Vec<Namespace>, SinkError> {
        self.with_catalog(LocalCatalog::list_namespaces).await
    }

    async fn namespace_exists(&self, namespace: &Namespace) -> Result<bool, SinkError> {
        let namespace = namespace.clone();
        self.with_catalog(move |catalog| catalog.namespace_exists(&namespace))
            .await
    }

    async fn create_namespace(&self, namespace: &Namespace) -> Result<(), SinkError> {
        let namespace = namespace.clone();
        self.with_catalog(move |catalog| catalog.create_namespace(&namespace, &BTreeMap::new()))
            .await
    }

    async fn load_table(
        &self,
        namespace: &Namespace,
        table: &str,
    ) -> Result<LoadedTable, SinkError> {
        let (namespace, table) = (namespace.clone(), table.to_string());
        let location = self
            .with_catalog(move |catalog| catalog.load_table_location(&namespace, &table))
            .await?;
        let file_io = FileIO::new_with_fs();
        let metadata = TableMetadata::read_from(&file_io, &location)
            .await
            .map_err(|err| storage_error(format!("cannot read table metadata {location}"), err))?;
        Ok(LoadedTable {
            metadata: Arc::new(metadata),
            metadata_location: location,
            file_io,
            credentials_expire_at_ms: None,
            credentials_obtained_at_ms: now_ms(),
            vended_credentials: false,
            storage_config: BTreeMap::new(),
        })
    }

    async fn create_table(&self, creation: TableCreation<'_>) -> Result<LoadedTable, SinkError> {
        let (namespace, table) = (creation.namespace, creation.table);
        let location = self.catalog.default_table_location(namespace, table);
        let metadata = new_local_metadata(creation.schema, &location, creation.properties)?;
        let metadata_location = format!(
            "{location}/metadata/00000-{}.metadata.json",
            uuid::Uuid::new_v4()
        );
        write_metadata(&FileIO::new_with_fs(), &metadata, &metadata_location).await?;
        {
            let (namespace, table) = (namespace.clone(), table.to_string());
            let metadata_location = metadata_location.clone();
            self.with_catalog(move |catalog| {
                catalog.create_table(&namespace, &table, &metadata_location)
            })
            .await?;
        }
        self.load_table(namespace, table).await
    }

    /// Checks the requirements against `base`, writes the next metadata file and swaps the
    /// catalog's pointer to it if the table still points at `base`'s (compare and swap).
    async fn commit(&self, commit: TableCommit<'_>) -> Result<LoadedTable, SinkError> {
        let TableCommit {
            namespace,
            table,
            base,
            requirements,
            updates,
        } = commit;
        for requirement in &requirements {
            requirement.check(Some(&base.metadata)).map_err(|err| {
                SinkError::new(
                    ErrorKind::CommitConflict,
                    format!(
                        "Iceberg table \"{namespace}.{table}\" was changed by another writer: {err}"
                    ),
                )
            })?;
        }
        let mut builder = TableMetadataBuilder::new_from_metadata(
            (*base.metadata).clone(),
            Some(base.metadata_location.clone()),
        );
        for update in updates {
            builder = update
                .apply(builder)
                .map_err(|err| internal(format!("cannot apply a table update: {err}")))?;
        }
        let metadata = builder
            .build()
            .map_err(|err| internal(format!("cannot build table metadata: {err}")))?
            .metadata;
        let metadata_location =
            next_metadata_location(metadata.location(), &base.metadata_location);
        write_metadata(&base.file_io, &metadata, &metadata_location).await?;
        {
            let (namespace, table) = (namespace.clone(), table.to_string());
            let expected = base.metadata_location.clone();
            let new = metadata_location.clone();
            self.with_catalog(move |catalog| {
                catalog.swap_metadata_location(&namespace, &table, &expected, &new)
            })
            .await?;
        }
        Ok(LoadedTable {
            metadata: Arc::new(metadata),
            metadata_location,
            ..base.clone()
        })
    }
}

/// The first metadata of a local table: built by iceberg's metadata builder, with the
/// schema replaced by ours so that field ids stay depth first (the builder renumbers them
/// level by level).
fn new_local_metadata(
    schema: &Schema,
    location: &str,
    properties: BTreeMap<String, String>,
) -> Result<TableMetadata, SinkError> {
    let built = TableMetadataBuilder::new(
        schema.clone(),
        iceberg::spec::UnboundPartitionSpec::builder().build(),
        iceberg::spec::SortOrder::unsorted_order(),
        location.to_string(),
        iceberg::spec::FormatVersion::V2,
        properties.into_iter().collect(),
    )
    .and_then(|builder| builder.build())
    .map_err(|err| internal(format!("cannot build table metadata: {err}")))?
    .metadata;
    let mut json = serde_json::to_value(&built)
        .map_err(|err| internal(format!("cannot serialize table metadata: {err}")))?;
    let mut schema_json = serde_json::to_value(schema)
        .map_err(|err| internal(format!("cannot serialize the schema: {err}")))?;
    schema_json["schema-id"] = serde_json::json!(0);
    json["schemas"] = serde_json::json!([schema_json]);
    json["current-schema-id"] = serde_json::json!(0);
    json["last-column-id"] = serde_json::json!(schema.highest_field_id());
    serde_json::from_value(json).map_err(|err| internal(format!("invalid table metadata: {err}")))
}

async fn write_metadata(
    file_io: &FileIO,
    metadata: &TableMetadata,
    location: &str,
) -> Result<(), SinkError> {
    let json = serde_json::to_vec(metadata)
        .map_err(|err| internal(format!("cannot serialize table metadata: {err}")))?;
    file_io
        .new_output(location)
        .map_err(|err| storage_error(format!("cannot write {location}"), err))?
        .write(json.into())
        .await
        .map_err(|err| storage_error(format!("cannot write {location}"), err))
}

/// `<location>/metadata/<version + 1>-<uuid>.metadata.json`, the version taken from the
/// current file's name.
fn next_metadata_location(table_location: &str, current: &str) -> String {
    let version = current
        .rsplit('/')
        .next()
        .and_then(|name| name.split('-').next())
        .and_then(|number| number.parse::<u64>().ok())
        .map_or(0, |version| version + 1);
    format!(
        "{}/metadata/{version:05}-{}.metadata.json",
        table_location.trim_end_matches('/'),
        uuid::Uuid::new_v4()
    )
}

fn internal(message: String) -> SinkError {
    SinkError::internal(message)
}

/// Runs blocking catalog work (SQLite) off the async threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, SinkError> + Send + 'static,
) -> Result<T, SinkError> {
    tokio::task::spawn_blocking(work).await?
}

/// `Some(location)` when the table exists (the location itself may be NULL).
fn current_location(
    connection: &Connection,
    catalog: &LocalCatalog,
    namespace: &Namespace,
    table: &str,
) -> Result<Option<Option<String>>, rusqlite::Error> {
    let type_filter = if catalog.has_type_column {
        " AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL)"
    } else {
        ""
    };
    connection
        .query_row(
            &format!(
                "SELECT metadata_location FROM iceberg_tables
                 WHERE catalog_name = ?1 AND table_namespace = ?2 AND table_name = ?3{type_filter}"
            ),
            params![catalog.catalog_name, namespace.to_string(), table],
            |row| row.get::<_, Option<String>>(0),
        )
        .optional()
}

fn namespace_exists(
    connection: &Connection,
    catalog_name: &str,
    namespace: &Namespace,
) -> Result<bool, rusqlite::Error> {
    let name = namespace.to_string();
    // Children count too (`a` exists when `a.b` does); escape LIKE's wildcards in the name.
    let children = format!(
        "{}.%",
        name.replace('!', "!!")
            .replace('_', "!_")
            .replace('%', "!%")
    );
    connection.query_row(
        "SELECT EXISTS (
             SELECT 1 FROM iceberg_tables WHERE catalog_name = ?1
               AND (table_namespace = ?2 OR table_namespace LIKE ?3 ESCAPE '!'))
         OR EXISTS (
             SELECT 1 FROM iceberg_namespace_properties WHERE catalog_name = ?1
               AND (namespace = ?2 OR namespace LIKE ?3 ESCAPE '!'))",
        params![catalog_name, name, children],
        |row| row.get::<_, bool>(0),
    )
}

fn namespace_not_found(namespace: &Namespace) -> SinkError {
    SinkError::new(
        ErrorKind::NamespaceNotFound,
        format!("namespace \"{namespace}\" not found in the catalog"),
    )
    .with_hint("Create the namespace in the catalog first: floe does not create namespaces.")
}

fn table_not_found(namespace: &Namespace, table: &str) -> SinkError {
    SinkError::new(
        ErrorKind::TableNotFound,
        format!("Iceberg table \"{namespace}.{table}\" does not exist"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open() -> (tempfile::TempDir, LocalCatalog) {
        let dir = tempfile::tempdir().unwrap();
        let catalog =
            LocalCatalog::open(&dir.path().join("sub/catalog.db"), &dir.path().join("wh")).unwrap();
        (dir, catalog)
    }

    fn ns(name: &str) -> Namespace {
        Namespace::parse(name).unwrap()
    }

    #[test]
    fn file_uris_are_absolute() {
        assert_eq!(file_uri(Path::new("/srv/w h/t")), "file:///srv/w h/t");
        assert_eq!(
            file_uri_path("file:///srv/w/t"),
            Some(PathBuf::from("/srv/w/t"))
        );
        assert_eq!(
            file_uri_path("file://localhost/srv/w"),
            Some(PathBuf::from("/srv/w"))
        );
        // What floe wrote with a relative data directory: `.` is the URI's host.
        assert_eq!(file_uri_path("file://./floe-data/warehouse"), None);
        assert_eq!(file_uri_path("file:relative"), None);
        assert_eq!(file_uri_path("s3://bucket/t"), None);
    }

    #[test]
    fn tables_with_relative_file_uris_are_refused() {
        let (_dir, catalog) = open();
        let legacy =
            "file://./floe-data/warehouse/quickstart.db/orders/metadata/00002-a.metadata.json";
        catalog
            .create_namespace(&ns("quickstart"), &BTreeMap::new())
            .unwrap();
        catalog
            .create_table(&ns("quickstart"), "orders", legacy)
            .unwrap();
        let error = catalog
            .load_table_location(&ns("quickstart"), "orders")
            .unwrap_err();
        assert!(error.message.contains(legacy), "{}", error.message);
        assert!(
            error.message.contains("not an absolute file:// URI"),
            "{}",
            error.message
        );
        assert!(!error.retryable);
        assert!(
            error
                .hint
                .as_deref()
                .unwrap_or_default()
                .contains("another TABLE")
        );
    }

    #[test]
    fn relative_paths_give_absolute_table_locations() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = std::env::current_dir().unwrap();
        let relative_dir = pathdiff(dir.path(), &cwd);
        let catalog = LocalCatalog::open(
            &relative_dir.join("catalog.db"),
            &relative_dir.join("warehouse"),
        )
        .unwrap();
        assert!(catalog.warehouse().is_absolute());
        assert!(catalog.database().is_absolute());
        let location = catalog.default_table_location(&ns("shop"), "orders");
        assert_eq!(
            file_uri_path(&location),
            Some(
                dir.path()
                    .canonicalize()
                    .unwrap()
                    .join("warehouse/shop.db/orders")
            ),
            "{location}"
        );
    }

    /// `target` relative to `base` (both absolute), through `..` where needed.
    fn pathdiff(target: &Path, base: &Path) -> PathBuf {
        let common = target
            .components()
            .zip(base.components())
            .take_while(|(a, b)| a == b)
            .count();
        let mut relative = PathBuf::new();
        for _ in base.components().skip(common) {
            relative.push("..");
        }
        for component in target.components().skip(common) {
            relative.push(component);
        }
        relative
    }

    #[test]
    fn namespaces_round_trip() {
        let (dir, catalog) = open();
        assert!(dir.path().join("wh").is_dir());
        assert_eq!(catalog.list_namespaces().unwrap(), vec![]);
        assert!(!catalog.namespace_exists(&ns("a")).unwrap());
        catalog
            .create_namespace(&ns("b"), &BTreeMap::new())
            .unwrap();
        catalog
            .create_namespace(&ns("a.x"), &BTreeMap::new())
            .unwrap();
        assert_eq!(catalog.list_namespaces().unwrap(), vec![ns("a"), ns("b")]);
        assert!(catalog.namespace_exists(&ns("a")).unwrap());
        assert!(catalog.namespace_exists(&ns("a.x")).unwrap());
        assert!(!catalog.namespace_exists(&ns("a.y")).unwrap());
        let err = catalog
            .create_namespace(&ns("b"), &BTreeMap::new())
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::AlreadyExists);
        // LIKE wildcards in a name match only themselves.
        catalog
            .create_namespace(&ns("c_d"), &BTreeMap::new())
            .unwrap();
        assert!(!catalog.namespace_exists(&ns("cxd")).unwrap());
    }

    #[test]
    fn compare_and_swap() {
        let (_dir, catalog) = open();
        let sales = ns("sales");
        let err = catalog.create_table(&sales, "t", "m0").unwrap_err();
        assert_eq!(err.kind, ErrorKind::NamespaceNotFound);
        catalog.create_namespace(&sales, &BTreeMap::new()).unwrap();
        catalog.create_table(&sales, "t", "m0").unwrap();
        assert_eq!(
            catalog.create_table(&sales, "t", "m0").unwrap_err().kind,
            ErrorKind::AlreadyExists
        );
        assert_eq!(catalog.load_table_location(&sales, "t").unwrap(), "m0");
        catalog
            .swap_metadata_location(&sales, "t", "m0", "m1")
            .unwrap();
        assert_eq!(catalog.load_table_location(&sales, "t").unwrap(), "m1");
        let err = catalog
            .swap_metadata_location(&sales, "t", "m0", "m2")
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::CommitConflict);
        assert_eq!(catalog.load_table_location(&sales, "t").unwrap(), "m1");
        let err = catalog
            .swap_metadata_location(&sales, "missing", "m0", "m2")
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::TableNotFound);
        assert_eq!(
            catalog
                .load_table_location(&sales, "missing")
                .unwrap_err()
                .kind,
            ErrorKind::TableNotFound
        );
        assert_eq!(catalog.list_tables(&sales).unwrap(), vec!["t".to_string()]);
        let previous: Option<String> = catalog
            .connection()
            .query_row(
                "SELECT previous_metadata_location FROM iceberg_tables WHERE table_name = 't'",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(previous.as_deref(), Some("m0"));
    }

    #[test]
    fn metadata_locations_count_up() {
        let next = next_metadata_location(
            "file:///w/t",
            "file:///w/t/metadata/00003-abc.metadata.json",
        );
        assert!(next.starts_with("file:///w/t/metadata/00004-"), "{next}");
        let next = next_metadata_location("s3://b/t/", "s3://b/t/metadata/weird.json");
        assert!(next.starts_with("s3://b/t/metadata/00000-"), "{next}");
    }

    #[test]
    fn reopening_keeps_rows() {
        let dir = tempfile::tempdir().unwrap();
        let database = dir.path().join("catalog.db");
        {
            let catalog = LocalCatalog::open(&database, dir.path()).unwrap();
            catalog
                .create_namespace(&ns("kept"), &BTreeMap::new())
                .unwrap();
        }
        let catalog = LocalCatalog::open(&database, dir.path()).unwrap();
        assert_eq!(catalog.list_namespaces().unwrap(), vec![ns("kept")]);
        // Another catalog name in the same file sees nothing of floe's.
        let other = LocalCatalog::open_named(&database, dir.path(), "other").unwrap();
        assert_eq!(other.list_namespaces().unwrap(), vec![]);
    }
}
