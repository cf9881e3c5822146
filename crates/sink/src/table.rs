//! The catalogs a sink writes through, behind one interface: load, create and commit a
//! table, for REST catalogs (floe's own client) and the embedded local catalog.
//!
//! Every load also builds the table's file IO: vended credentials from `loadTable` (the
//! longest matching `storage-credentials` prefix, else `config`), else the static or
//! assumed-role keys of the AWS connection; local tables use the file system.
//!
//! Credentials that expire are renewed by [`SinkCatalog::refresh_credentials`]: vended ones
//! through the table's credentials endpoint (or, for catalogs without one, by loading the
//! table again), assumed-role ones by loading the table again with the provider's new keys.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use iceberg::io::{FileIO, FileIOBuilder};
use iceberg::spec::{Schema, TableMetadata, TableMetadataBuilder};
use iceberg::{TableRequirement, TableUpdate};
use iceberg_storage_opendal::OpenDalStorageFactory;

use crate::config::{AwsAuthConfig, AwsConfig, CatalogConfig};
use crate::error::{ErrorKind, SinkError};
use crate::http::HttpSettings;
use crate::local::LocalCatalog;
use crate::namespace::Namespace;
use crate::rest::{
    LoadTableResponse, RestCatalogClient, StorageCredential, TableCredentials, is_unity_url,
};
use crate::sigv4::{AwsCredentialsProvider, StaticAwsCredentials};

/// The table property naming the sink that created (and owns) a table.
pub const SINK_ID_PROPERTY: &str = "mz-sink-id";
/// The table property naming the floe environment (data directory) of that sink.
pub const ENVIRONMENT_ID_PROPERTY: &str = "mz-environment-id";

/// A loaded table: its metadata, where that metadata lives, and how to reach its files.
#[derive(Clone)]
pub struct LoadedTable {
    pub metadata: Arc<TableMetadata>,
    pub metadata_location: String,
    pub file_io: FileIO,
    /// When the file IO's storage credentials expire (ms since the epoch), if known.
    pub credentials_expire_at_ms: Option<i64>,
    /// When the file IO's storage credentials were obtained (ms since the epoch).
    credentials_obtained_at_ms: i64,
    /// Whether the catalog vended the file IO's storage credentials.
    vended_credentials: bool,
    /// The catalog's storage properties for the table without credentials (endpoint,
    /// region, path style), to combine with renewed credentials.
    storage_config: BTreeMap<String, String>,
}

/// Storage properties that are credentials, or say when they expire.
const CREDENTIAL_PROPERTIES: [&str; 4] = [
    "s3.access-key-id",
    "s3.secret-access-key",
    "s3.session-token",
    "s3.session-token-expires-at-ms",
];

/// Milliseconds since the Unix epoch.
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl std::fmt::Debug for LoadedTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedTable")
            .field("metadata_location", &self.metadata_location)
            .field("uuid", &self.metadata.uuid())
            .field("credentials_expire_at_ms", &self.credentials_expire_at_ms)
            .field("vended_credentials", &self.vended_credentials)
            .finish_non_exhaustive()
    }
}

/// A catalog connection as the sink uses it.
pub struct SinkCatalog {
    kind: CatalogKind,
    /// How often vended credentials without an expiry are renewed.
    credential_refresh_interval: Duration,
    /// Cleared once the catalog answered that it has no credentials endpoint, so that this
    /// session renews credentials by loading the table without asking again.
    credentials_endpoint: AtomicBool,
}

enum CatalogKind {
    Rest {
        client: Box<RestCatalogClient>,
        /// S3 access when nothing is vended.
        aws: Option<AwsConfig>,
        credentials: Option<Arc<dyn AwsCredentialsProvider>>,
        /// A Databricks Unity Catalog endpoint: its storage is reachable only through
        /// vended credentials.
        unity: bool,
    },
    Local(Arc<LocalCatalog>),
}

impl SinkCatalog {
    /// Connects to the catalog of a connection. `aws_credentials` supplies the keys of an
    /// assumed-role AWS connection (static keys are taken from `config`).
    pub async fn connect(
        config: &CatalogConfig,
        settings: &HttpSettings,
        aws_credentials: Option<Arc<dyn AwsCredentialsProvider>>,
    ) -> Result<SinkCatalog, SinkError> {
        let kind = match config {
            CatalogConfig::Local {
                database,
                warehouse,
            } => {
                let database = database.clone();
                let warehouse = warehouse.clone();
                let catalog = blocking(move || LocalCatalog::open(&database, &warehouse)).await?;
                CatalogKind::Local(Arc::new(catalog))
            }
            CatalogConfig::Rest { aws, url, .. } => CatalogKind::Rest {
                client: Box::new(RestCatalogClient::connect(config, settings).await?),
                aws: aws.clone(),
                credentials: aws_credentials.or_else(|| static_provider(aws.as_ref())),
                unity: is_unity_url(url),
            },
            CatalogConfig::S3TablesRest { aws, .. } => {
                let provider = aws_credentials.or_else(|| static_provider(Some(aws)));
                let client = match &provider {
                    Some(provider) => {
                        RestCatalogClient::connect_with_provider(config, settings, provider.clone())
                            .await?
                    }
                    None => RestCatalogClient::connect(config, settings).await?,
                };
                CatalogKind::Rest {
                    client: Box::new(client),
                    aws: Some(aws.clone()),
                    credentials: provider,
                    unity: false,
                }
            }
        };
        Ok(SinkCatalog {
            kind,
            credential_refresh_interval: settings.credential_refresh_interval,
            credentials_endpoint: AtomicBool::new(true),
        })
    }

    /// Whether this session still uses the table's credentials endpoint (false once the
    /// catalog answered that it has none).
    pub fn uses_credentials_endpoint(&self) -> bool {
        self.credentials_endpoint.load(Ordering::Relaxed)
    }

    /// When `table`'s storage credentials are due for renewal (ms since the epoch): `margin`
    /// before they expire or, for vended credentials without an expiry, the refresh
    /// interval after they were obtained. `None`: they never expire (local tables, static
    /// keys).
    pub fn credentials_due_at_ms(&self, table: &LoadedTable, margin: Duration) -> Option<i64> {
        match table.credentials_expire_at_ms {
            Some(expires) => Some(expires.saturating_sub(margin.as_millis() as i64)),
            None if table.vended_credentials => Some(
                table
                    .credentials_obtained_at_ms
                    .saturating_add(self.credential_refresh_interval.as_millis() as i64),
            ),
            None => None,
        }
    }

    /// Whether `table`'s storage credentials are due for renewal now.
    pub fn credentials_need_refresh(&self, table: &LoadedTable, margin: Duration) -> bool {
        self.credentials_due_at_ms(table, margin)
            .is_some_and(|due| due <= now_ms())
    }

    /// `table` with fresh storage credentials in its file IO (its metadata unchanged).
    /// Vended credentials come from the table's credentials endpoint; a catalog without one
    /// (404, 405, 501) has the table loaded again instead, for the rest of this session.
    pub async fn refresh_credentials(
        &self,
        namespace: &Namespace,
        table_name: &str,
        table: &LoadedTable,
    ) -> Result<LoadedTable, SinkError> {
        let CatalogKind::Rest {
            client,
            aws,
            credentials,
            unity,
        } = &self.kind
        else {
            return Ok(table.clone());
        };
        if table.vended_credentials && self.uses_credentials_endpoint() {
            match client.load_credentials(namespace, table_name).await? {
                TableCredentials::Vended(fresh) => {
                    let location = table.metadata.location();
                    let access = storage_properties(
                        &table.storage_config,
                        &fresh,
                        location,
                        aws.as_ref(),
                        credentials.as_ref(),
                    )
                    .await?;
                    if !access.vended {
                        return Err(SinkError::new(
                            ErrorKind::Storage,
                            format!(
                                "the catalog's credentials endpoint returned no storage credentials for table \"{namespace}.{table_name}\""
                            ),
                        ));
                    }
                    tracing::debug!(table = %format!("{namespace}.{table_name}"), expires_at_ms = ?access.expires_at_ms, "renewed vended storage credentials");
                    return Ok(LoadedTable {
                        file_io: file_io(location, access.properties),
                        credentials_expire_at_ms: access.expires_at_ms,
                        credentials_obtained_at_ms: now_ms(),
                        ..table.clone()
                    });
                }
                TableCredentials::Unsupported => {
                    self.credentials_endpoint.store(false, Ordering::Relaxed);
                    tracing::info!(table = %format!("{namespace}.{table_name}"), "the catalog has no credentials endpoint: renewing storage credentials by loading the table");
                }
            }
        }
        let response = client.load_table(namespace, table_name).await?;
        let reloaded = self
            .rest_table(
                response,
                aws.as_ref(),
                credentials.as_ref(),
                *unity,
                namespace,
                table_name,
            )
            .await?;
        Ok(LoadedTable {
            metadata: table.metadata.clone(),
            metadata_location: table.metadata_location.clone(),
            ..reloaded
        })
    }

    /// Whether the namespace exists.
    pub async fn namespace_exists(&self, namespace: &Namespace) -> Result<bool, SinkError> {
        match &self.kind {
            CatalogKind::Rest { client, .. } => client.namespace_exists(namespace).await,
            CatalogKind::Local(catalog) => {
                let catalog = catalog.clone();
                let namespace = namespace.clone();
                blocking(move || catalog.namespace_exists(&namespace)).await
            }
        }
    }

    /// Fails with [`ErrorKind::NamespaceNotFound`] unless the namespace exists.
    pub async fn require_namespace(&self, namespace: &Namespace) -> Result<(), SinkError> {
        if self.namespace_exists(namespace).await? {
            Ok(())
        } else {
            Err(SinkError::new(
                ErrorKind::NamespaceNotFound,
                format!("namespace \"{namespace}\" not found in the catalog"),
            )
            .with_hint(
                "Create the namespace in the catalog, and check that the client may see it: \
                 floe does not create namespaces.",
            ))
        }
    }

    /// Loads a table; a missing one is [`ErrorKind::TableNotFound`].
    pub async fn load_table(
        &self,
        namespace: &Namespace,
        table: &str,
    ) -> Result<LoadedTable, SinkError> {
        match &self.kind {
            CatalogKind::Rest {
                client,
                aws,
                credentials,
                unity,
            } => {
                let response = client.load_table(namespace, table).await?;
                self.rest_table(
                    response,
                    aws.as_ref(),
                    credentials.as_ref(),
                    *unity,
                    namespace,
                    table,
                )
                .await
            }
            CatalogKind::Local(catalog) => {
                let location = {
                    let catalog = catalog.clone();
                    let namespace = namespace.clone();
                    let table = table.to_string();
                    blocking(move || catalog.load_table_location(&namespace, &table)).await?
                };
                let file_io = FileIO::new_with_fs();
                let metadata = TableMetadata::read_from(&file_io, &location)
                    .await
                    .map_err(|err| {
                        storage_error(format!("cannot read table metadata {location}"), err)
                    })?;
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
        }
    }

    /// Creates an unpartitioned format-v2 table with `schema` and `properties`, and loads
    /// it back (the catalog may have assigned other field ids than those sent).
    pub async fn create_table(
        &self,
        namespace: &Namespace,
        table: &str,
        schema: &Schema,
        properties: BTreeMap<String, String>,
    ) -> Result<LoadedTable, SinkError> {
        match &self.kind {
            CatalogKind::Rest {
                client,
                aws,
                credentials,
                unity,
            } => {
                let mut properties = properties;
                properties.insert("format-version".into(), "2".into());
                let request = serde_json::json!({
                    "name": table,
                    "schema": schema,
                    "partition-spec": {"spec-id": 0, "fields": []},
                    "write-order": {"order-id": 0, "fields": []},
                    "stage-create": false,
                    "properties": properties,
                });
                let response = client.create_table(namespace, table, request).await?;
                self.rest_table(
                    response,
                    aws.as_ref(),
                    credentials.as_ref(),
                    *unity,
                    namespace,
                    table,
                )
                .await
            }
            CatalogKind::Local(catalog) => {
                let location = catalog.default_table_location(namespace, table);
                let metadata = new_local_metadata(schema, &location, properties)?;
                let metadata_location = format!(
                    "{location}/metadata/00000-{}.metadata.json",
                    uuid::Uuid::new_v4()
                );
                let file_io = FileIO::new_with_fs();
                write_metadata(&file_io, &metadata, &metadata_location).await?;
                {
                    let catalog = catalog.clone();
                    let namespace = namespace.clone();
                    let table = table.to_string();
                    let metadata_location = metadata_location.clone();
                    blocking(move || catalog.create_table(&namespace, &table, &metadata_location))
                        .await?;
                }
                self.load_table(namespace, table).await
            }
        }
    }

    /// Commits `updates` under `requirements`, based on `base` (the table as last loaded).
    /// Returns the table as the catalog has it afterwards.
    pub async fn commit(
        &self,
        namespace: &Namespace,
        table: &str,
        base: &LoadedTable,
        requirements: Vec<TableRequirement>,
        updates: Vec<TableUpdate>,
    ) -> Result<LoadedTable, SinkError> {
        match &self.kind {
            CatalogKind::Rest { client, .. } => {
                let request = serde_json::json!({
                    "identifier": {"namespace": namespace.levels(), "name": table},
                    "requirements": requirements,
                    "updates": updates,
                });
                let response = client.commit_table(namespace, table, request).await?;
                // The commit answer carries no storage credentials: keep the ones we have.
                let metadata = parse_metadata(&response.metadata)?;
                let location = response.metadata_location.ok_or_else(|| {
                    SinkError::new(
                        ErrorKind::UnexpectedResponse,
                        format!("the catalog's commit answer for \"{namespace}.{table}\" has no metadata location"),
                    )
                })?;
                Ok(LoadedTable {
                    metadata: Arc::new(metadata),
                    metadata_location: location,
                    ..base.clone()
                })
            }
            CatalogKind::Local(catalog) => {
                for requirement in &requirements {
                    requirement.check(Some(&base.metadata)).map_err(|err| {
                        SinkError::new(
                            ErrorKind::CommitConflict,
                            format!("Iceberg table \"{namespace}.{table}\" was changed by another writer: {err}"),
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
                    let catalog = catalog.clone();
                    let namespace = namespace.clone();
                    let table = table.to_string();
                    let expected = base.metadata_location.clone();
                    let new = metadata_location.clone();
                    blocking(move || {
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
    }

    async fn rest_table(
        &self,
        response: LoadTableResponse,
        aws: Option<&AwsConfig>,
        credentials: Option<&Arc<dyn AwsCredentialsProvider>>,
        unity: bool,
        namespace: &Namespace,
        table: &str,
    ) -> Result<LoadedTable, SinkError> {
        let metadata = parse_metadata(&response.metadata)?;
        let location = response.metadata_location.clone().ok_or_else(|| {
            SinkError::new(
                ErrorKind::UnexpectedResponse,
                format!("Iceberg table \"{namespace}.{table}\" has no metadata location"),
            )
        })?;
        let storage_config: BTreeMap<String, String> = response
            .config
            .iter()
            .filter(|(key, _)| is_storage_property(key))
            .filter(|(key, _)| !CREDENTIAL_PROPERTIES.contains(&key.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let access = storage_properties(
            &response.config,
            &response.storage_credentials,
            metadata.location(),
            aws,
            credentials,
        )
        .await?;
        if unity
            && !metadata.location().starts_with("file:")
            && !access.properties.contains_key("s3.access-key-id")
        {
            return Err(SinkError::new(
                ErrorKind::Storage,
                format!(
                    "storage credentials missing: Unity Catalog vended none for table \"{namespace}.{table}\""
                ),
            )
            .with_detail(
                "Unity Catalog hands out credentials for a table's storage only to requests that ask for them, and only when the service principal may use the storage location.",
            )
            .with_hint(
                "Set ACCESS DELEGATION = 'vended-credentials' on the connection (drop and recreate it), and grant the service principal EXTERNAL USE LOCATION on the catalog's external location.",
            ));
        }
        let file_io = file_io(metadata.location(), access.properties);
        Ok(LoadedTable {
            metadata: Arc::new(metadata),
            metadata_location: location,
            file_io,
            credentials_expire_at_ms: access.expires_at_ms,
            credentials_obtained_at_ms: now_ms(),
            vended_credentials: access.vended,
            storage_config,
        })
    }
}

/// The file IO of a table at `location` with S3 `properties` (local paths need none).
fn file_io(location: &str, properties: HashMap<String, String>) -> FileIO {
    if location.starts_with("file:") {
        FileIO::new_with_fs()
    } else {
        FileIOBuilder::new(Arc::new(OpenDalStorageFactory::S3 {
            customized_credential_load: None,
        }))
        .with_props(properties)
        .build()
    }
}

/// Whether a catalog property configures the S3 client.
fn is_storage_property(key: &str) -> bool {
    key.starts_with("s3.") || key.starts_with("client.")
}

fn static_provider(aws: Option<&AwsConfig>) -> Option<Arc<dyn AwsCredentialsProvider>> {
    match aws.map(|aws| &aws.auth) {
        Some(AwsAuthConfig::Keys(keys)) => Some(Arc::new(StaticAwsCredentials::new(keys.clone()))),
        _ => None,
    }
}

/// How a table's files are reached.
struct StorageAccess {
    /// The S3 file IO properties, credentials included.
    properties: HashMap<String, String>,
    /// When the credentials expire (ms since the epoch), if they do.
    expires_at_ms: Option<i64>,
    /// Whether the credentials were vended by the catalog.
    vended: bool,
}

/// The S3 file IO properties of a table: vended credentials when the catalog sent any
/// (the longest `storage_credentials` prefix of the table location wins over `config`),
/// else the AWS connection's keys, endpoint and region.
async fn storage_properties(
    config: &BTreeMap<String, String>,
    storage_credentials: &[StorageCredential],
    table_location: &str,
    aws: Option<&AwsConfig>,
    credentials: Option<&Arc<dyn AwsCredentialsProvider>>,
) -> Result<StorageAccess, SinkError> {
    let mut properties: HashMap<String, String> = HashMap::new();
    // Never reach for ambient credentials (instance metadata, ~/.aws): only what floe was given.
    properties.insert("s3.disable-ec2-metadata".into(), "true".into());
    properties.insert("s3.disable-config-load".into(), "true".into());
    if let Some(aws) = aws {
        if let Some(endpoint) = &aws.endpoint {
            properties.insert("s3.endpoint".into(), endpoint.clone());
            properties.insert("s3.path-style-access".into(), "true".into());
        }
        if let Some(region) = &aws.region {
            properties.insert("s3.region".into(), region.clone());
        }
    }
    let vended = storage_credentials
        .iter()
        .filter(|credential| table_location.starts_with(&credential.prefix))
        .max_by_key(|credential| credential.prefix.len())
        .map(|credential| &credential.config);
    let mut vended_properties: BTreeMap<String, String> = config
        .iter()
        .filter(|(key, _)| is_storage_property(key))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if let Some(vended) = vended {
        vended_properties.extend(vended.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    let has_vended_keys = vended_properties.contains_key("s3.access-key-id");
    let mut expires = vended_properties
        .get("s3.session-token-expires-at-ms")
        .and_then(|v| v.parse::<i64>().ok());
    if !has_vended_keys && let Some(credentials) = credentials {
        let (keys, keys_expire) = credentials.credentials_with_expiry().await?;
        // Assumed-role keys expire too: reload the table (and its file IO) before they do.
        if let Some(at) = keys_expire {
            let at_ms = at
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64);
            expires = Some(expires.map_or(at_ms, |e| e.min(at_ms)));
        }
        properties.insert("s3.access-key-id".into(), keys.access_key_id);
        properties.insert("s3.secret-access-key".into(), keys.secret_access_key);
        if let Some(token) = keys.session_token {
            properties.insert("s3.session-token".into(), token);
        }
    }
    for (key, value) in vended_properties {
        if key != "s3.session-token-expires-at-ms" {
            properties.insert(key, value);
        }
    }
    if !properties.contains_key("s3.region") {
        // opendal insists on a region; S3-compatible stores ignore it.
        let region = properties
            .get("client.region")
            .cloned()
            .unwrap_or_else(|| "us-east-1".into());
        properties.insert("s3.region".into(), region);
    }
    Ok(StorageAccess {
        properties,
        expires_at_ms: expires,
        vended: has_vended_keys,
    })
}

fn parse_metadata(value: &serde_json::Value) -> Result<TableMetadata, SinkError> {
    serde_json::from_value(value.clone()).map_err(|err| {
        SinkError::new(
            ErrorKind::UnexpectedResponse,
            format!("cannot read the table metadata the catalog returned: {err}"),
        )
    })
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

pub(crate) fn storage_error(context: String, err: iceberg::Error) -> SinkError {
    SinkError::new(ErrorKind::Storage, format!("{context}: {err}"))
}

fn internal(message: String) -> SinkError {
    SinkError::new(ErrorKind::UnexpectedResponse, message).with_retryable(false)
}

/// Runs blocking catalog work (SQLite) off the async threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, SinkError> + Send + 'static,
) -> Result<T, SinkError> {
    tokio::task::spawn_blocking(work).await.map_err(|err| {
        SinkError::new(
            ErrorKind::Storage,
            format!("local catalog work panicked: {err}"),
        )
    })?
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
