//! Connection validation: connect to the catalog and list its namespaces.

use crate::config::CatalogConfig;
use crate::error::{ErrorKind, SinkError};
use crate::http::HttpSettings;
use crate::local::LocalCatalog;
use crate::namespace::Namespace;
use crate::rest::RestCatalogClient;

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
            let client = RestCatalogClient::connect(config, settings).await?;
            client.list_namespaces().await
        }
    }
}
