//! Connection validation: connect to the catalog and list its namespaces.

use std::sync::Arc;

use crate::config::CatalogConfig;
use crate::error::{ErrorKind, SinkError};
use crate::http::HttpSettings;
use crate::local::LocalCatalog;
use crate::namespace::Namespace;
use crate::rest::RestCatalogClient;
use crate::sigv4::AwsCredentialsProvider;

/// Connects to the catalog with its credentials and lists namespaces, with default HTTP
/// settings.
pub async fn validate_catalog(config: &CatalogConfig) -> Result<(), SinkError> {
    validate_catalog_with(config, &HttpSettings::default())
        .await
        .map(|_| ())
}

/// Connects to the catalog and lists its top-level namespaces, which it returns. REST
/// catalogs: read `/v1/config` (exchanging the OAuth2 credentials for a token, or signing
/// with SigV4), then list. Local catalogs: open (or create) the SQLite file, then list.
pub async fn validate_catalog_with(
    config: &CatalogConfig,
    settings: &HttpSettings,
) -> Result<Vec<Namespace>, SinkError> {
    validate_catalog_with_credentials(config, settings, None).await
}

/// [`validate_catalog_with`], with the AWS credentials of an `s3tablesrest` catalog taken
/// from `aws_credentials` (an assumed role) instead of the connection's static keys.
pub async fn validate_catalog_with_credentials(
    config: &CatalogConfig,
    settings: &HttpSettings,
    aws_credentials: Option<Arc<dyn AwsCredentialsProvider>>,
) -> Result<Vec<Namespace>, SinkError> {
    match config {
        CatalogConfig::Local {
            database,
            warehouse,
        } => {
            let database = database.clone();
            let warehouse = warehouse.clone();
            tokio::task::spawn_blocking(move || {
                LocalCatalog::open(&database, &warehouse)?.list_namespaces()
            })
            .await
            .map_err(|err| {
                SinkError::new(
                    ErrorKind::Storage,
                    format!("validating the local catalog panicked: {err}"),
                )
            })?
        }
        CatalogConfig::Rest { .. } | CatalogConfig::S3TablesRest { .. } => {
            let client = match (config, aws_credentials) {
                (CatalogConfig::S3TablesRest { .. }, Some(provider)) => {
                    RestCatalogClient::connect_with_provider(config, settings, provider).await?
                }
                _ => RestCatalogClient::connect(config, settings).await?,
            };
            client.list_namespaces().await
        }
    }
}
