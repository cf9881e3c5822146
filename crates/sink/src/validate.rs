//! Connection validation: connect to the catalog and list its namespaces.

use std::sync::Arc;

use crate::catalog;
use crate::config::CatalogConfig;
use crate::error::SinkError;
use crate::http::HttpSettings;
use crate::namespace::Namespace;
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
    catalog::connect(config, settings, aws_credentials)
        .await?
        .list_namespaces()
        .await
}
