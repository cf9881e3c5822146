//! An Iceberg REST catalog as a [`Catalog`]: floe's REST client for the catalog, plus how
//! a table's files are reached.
//!
//! Every load also builds the table's file IO: vended credentials from `loadTable` (the
//! longest matching `storage-credentials` prefix, else `config`), else the static or
//! assumed-role keys of the AWS connection.
//!
//! Credentials that expire are renewed by [`Catalog::refresh_credentials`]: vended ones
//! through the table's credentials endpoint (or, for catalogs without one, by loading the
//! table again), assumed-role ones by loading the table again with the provider's new keys.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::UNIX_EPOCH;

use async_trait::async_trait;
use iceberg::io::{FileIO, FileIOBuilder};
use iceberg::spec::TableMetadata;
use iceberg_storage_opendal::OpenDalStorageFactory;

use crate::catalog::{Catalog, TableCommit, TableCreation};
use crate::config::{AwsAuthConfig, AwsConfig, CatalogConfig};
use crate::error::{ErrorKind, SinkError};
use crate::http::HttpSettings;
use crate::namespace::Namespace;
use crate::rest::{
    LoadTableResponse, RestCatalogClient, StorageCredential, TableCredentials, is_unity_url,
};
use crate::sigv4::{AwsCredentialsProvider, StaticAwsCredentials};
use crate::table::{LoadedTable, now_ms};
use crate::upload::UploadingStorageFactory;

/// Storage properties that are credentials, or say when they expire.
const CREDENTIAL_PROPERTIES: [&str; 4] = [
    "s3.access-key-id",
    "s3.secret-access-key",
    "s3.session-token",
    "s3.session-token-expires-at-ms",
];

/// A REST catalog connection and the storage access of its tables.
#[derive(Debug)]
pub struct RestCatalog {
    client: RestCatalogClient,
    /// S3 access when nothing is vended.
    aws: Option<AwsConfig>,
    credentials: Option<Arc<dyn AwsCredentialsProvider>>,
    /// A Databricks Unity Catalog endpoint: its storage is reachable only through vended
    /// credentials.
    unity: bool,
    /// Whether the connection asks for vended credentials (ACCESS DELEGATION).
    asks_for_vended_credentials: bool,
    /// Cleared once the catalog answered that it has no credentials endpoint, so that this
    /// session renews credentials by loading the table without asking again.
    credentials_endpoint: AtomicBool,
}

impl RestCatalog {
    /// Connects to a `rest` or `s3tablesrest` catalog. `aws_credentials` supplies the keys
    /// of an assumed-role AWS connection (static keys are taken from `config`).
    pub async fn connect(
        config: &CatalogConfig,
        settings: &HttpSettings,
        aws_credentials: Option<Arc<dyn AwsCredentialsProvider>>,
    ) -> Result<RestCatalog, SinkError> {
        let aws = config.aws().cloned();
        let credentials = aws_credentials.or_else(|| static_provider(aws.as_ref()));
        let client = match (config, &credentials) {
            (CatalogConfig::S3TablesRest { .. }, Some(provider)) => {
                RestCatalogClient::connect_with_provider(config, settings, provider.clone()).await?
            }
            _ => RestCatalogClient::connect(config, settings).await?,
        };
        let (unity, asks_for_vended_credentials) = match config {
            CatalogConfig::Rest {
                url,
                vended_credentials,
                ..
            } => (is_unity_url(url), *vended_credentials),
            _ => (false, false),
        };
        Ok(RestCatalog {
            client,
            aws,
            credentials,
            unity,
            asks_for_vended_credentials,
            credentials_endpoint: AtomicBool::new(true),
        })
    }

    /// The REST client underneath.
    pub fn client(&self) -> &RestCatalogClient {
        &self.client
    }

    /// The error for a table whose files floe has no credentials for: neither vended nor
    /// from an AWS connection. Without it, the sink's first write would fail deep inside
    /// the S3 client ("called: reqsign::Sign").
    fn storage_credentials_missing(
        &self,
        namespace: &Namespace,
        table: &str,
        location: &str,
    ) -> SinkError {
        if self.unity {
            return SinkError::new(
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
            );
        }
        let (message, detail) = if self.asks_for_vended_credentials {
            (
                format!(
                    "storage credentials missing: the catalog vended none for table \"{namespace}.{table}\""
                ),
                format!(
                    "The connection asks for vended credentials (ACCESS DELEGATION), but the catalog's answer held none for the table's files at {location}, and the connection has no AWS CONNECTION."
                ),
            )
        } else {
            (
                format!(
                    "storage credentials missing for table \"{namespace}.{table}\": the connection has no AWS CONNECTION and asks for no vended credentials"
                ),
                format!(
                    "floe writes the table's files at {location} with credentials the catalog vends or with the keys of the connection's AWS CONNECTION, and this connection gives neither."
                ),
            )
        };
        SinkError::new(ErrorKind::Storage, message)
            .with_detail(detail)
            .with_hint(
                "Recreate the connection with ACCESS DELEGATION = 'vended-credentials' if the catalog vends storage credentials, or with AWS CONNECTION = an AWS connection (ACCESS KEY ID and SECRET ACCESS KEY, or ASSUME ROLE ARN) that may use the table's storage.",
            )
    }

    /// `table` with the credentials the table's credentials endpoint vends, or `None` when
    /// the catalog has no such endpoint (remembered for this session).
    async fn renew_from_endpoint(
        &self,
        namespace: &Namespace,
        table_name: &str,
        table: &LoadedTable,
    ) -> Result<Option<LoadedTable>, SinkError> {
        let fresh = match self.client.load_credentials(namespace, table_name).await? {
            TableCredentials::Vended(fresh) => fresh,
            TableCredentials::Unsupported => {
                self.credentials_endpoint.store(false, Ordering::Relaxed);
                tracing::info!(table = %format!("{namespace}.{table_name}"), "the catalog has no credentials endpoint: renewing storage credentials by loading the table");
                return Ok(None);
            }
        };
        let location = table.metadata.location();
        let access = storage_properties(
            &table.storage_config,
            &fresh,
            location,
            self.aws.as_ref(),
            self.credentials.as_ref(),
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
        Ok(Some(LoadedTable {
            file_io: file_io(location, access.properties),
            credentials_expire_at_ms: access.expires_at_ms,
            credentials_obtained_at_ms: now_ms(),
            ..table.clone()
        }))
    }

    /// The table a `loadTable`-shaped answer describes, with a file IO that reaches its
    /// files: vended credentials, else the AWS connection's keys.
    async fn table_from(
        &self,
        response: LoadTableResponse,
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
            self.aws.as_ref(),
            self.credentials.as_ref(),
        )
        .await?;
        if !metadata.location().starts_with("file:")
            && !access.properties.contains_key("s3.access-key-id")
        {
            return Err(self.storage_credentials_missing(namespace, table, metadata.location()));
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

#[async_trait]
impl Catalog for RestCatalog {
    async fn list_namespaces(&self) -> Result<Vec<Namespace>, SinkError> {
        self.client.list_namespaces().await
    }

    async fn namespace_exists(&self, namespace: &Namespace) -> Result<bool, SinkError> {
        self.client.namespace_exists(namespace).await
    }

    async fn create_namespace(&self, namespace: &Namespace) -> Result<(), SinkError> {
        self.client.create_namespace(namespace).await
    }

    async fn load_table(
        &self,
        namespace: &Namespace,
        table: &str,
    ) -> Result<LoadedTable, SinkError> {
        let response = self.client.load_table(namespace, table).await?;
        self.table_from(response, namespace, table).await
    }

    async fn create_table(&self, creation: TableCreation<'_>) -> Result<LoadedTable, SinkError> {
        let (namespace, table) = (creation.namespace, creation.table);
        let mut properties = creation.properties;
        properties.insert("format-version".into(), "2".into());
        let request = serde_json::json!({
            "name": table,
            "schema": creation.schema,
            "partition-spec": {"spec-id": 0, "fields": []},
            "write-order": {"order-id": 0, "fields": []},
            "stage-create": false,
            "properties": properties,
        });
        let response = self.client.create_table(namespace, table, request).await?;
        self.table_from(response, namespace, table).await
    }

    async fn commit(&self, commit: TableCommit<'_>) -> Result<LoadedTable, SinkError> {
        let (namespace, table) = (commit.namespace, commit.table);
        let request = serde_json::json!({
            "identifier": {"namespace": namespace.levels(), "name": table},
            "requirements": commit.requirements,
            "updates": commit.updates,
        });
        let response = self.client.commit_table(namespace, table, request).await?;
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
            ..commit.base.clone()
        })
    }

    /// Vended credentials come from the table's credentials endpoint; a catalog without one
    /// (404, 405, 501) has the table loaded again instead, for the rest of this session.
    async fn refresh_credentials(
        &self,
        namespace: &Namespace,
        table_name: &str,
        table: &LoadedTable,
    ) -> Result<LoadedTable, SinkError> {
        if table.vended_credentials
            && self.uses_credentials_endpoint()
            && let Some(renewed) = self
                .renew_from_endpoint(namespace, table_name, table)
                .await?
        {
            return Ok(renewed);
        }
        let reloaded = self.load_table(namespace, table_name).await?;
        Ok(LoadedTable {
            metadata: table.metadata.clone(),
            metadata_location: table.metadata_location.clone(),
            ..reloaded
        })
    }

    fn uses_credentials_endpoint(&self) -> bool {
        self.credentials_endpoint.load(Ordering::Relaxed)
    }
}

/// The file IO of a table at `location` with S3 `properties` (local paths need none).
fn file_io(location: &str, properties: HashMap<String, String>) -> FileIO {
    if location.starts_with("file:") {
        FileIO::new_with_fs()
    } else {
        // Data files' row groups are encoded while the ones before them upload.
        FileIOBuilder::new(Arc::new(UploadingStorageFactory::new(
            OpenDalStorageFactory::S3 {
                customized_credential_load: None,
            },
        )))
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
