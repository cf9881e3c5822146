//! Resolved connection settings: what the coordinator hands the sink crate
//! after looking up secrets. Values here are sensitive; `Debug` redacts them.

use std::fmt;
use std::path::PathBuf;

/// OAuth2 client credentials (`CREDENTIAL 'client_id:client_secret'`).
#[derive(Clone, PartialEq, Eq)]
pub struct ClientCredentials {
    pub client_id: String,
    pub client_secret: String,
}

impl fmt::Debug for ClientCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientCredentials")
            .field("client_id", &self.client_id)
            .field("client_secret", &"********")
            .finish()
    }
}

impl ClientCredentials {
    /// Splits `client_id:client_secret` at the first colon.
    pub fn parse(credential: &str) -> Option<ClientCredentials> {
        let (id, secret) = credential.split_once(':')?;
        if id.is_empty() {
            return None;
        }
        Some(ClientCredentials {
            client_id: id.to_string(),
            client_secret: secret.to_string(),
        })
    }
}

/// Static AWS keys.
#[derive(Clone, PartialEq, Eq)]
pub struct AwsKeys {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
}

impl fmt::Debug for AwsKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AwsKeys")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"********")
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "********"),
            )
            .finish()
    }
}

/// The AWS SDK's form of the keys (for signing and for SDK clients).
impl From<&AwsKeys> for aws_credential_types::Credentials {
    fn from(keys: &AwsKeys) -> aws_credential_types::Credentials {
        aws_credential_types::Credentials::new(
            keys.access_key_id.clone(),
            keys.secret_access_key.clone(),
            keys.session_token.clone(),
            None,
            "floe",
        )
    }
}

/// How an AWS connection gets its credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AwsAuthConfig {
    Keys(AwsKeys),
    AssumeRole {
        arn: String,
        session_name: String,
        /// `mz_<environment id>_<connection id>`.
        external_id: String,
    },
}

/// A resolved AWS connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsConfig {
    pub endpoint: Option<String>,
    pub region: Option<String>,
    pub auth: AwsAuthConfig,
}

/// A resolved Iceberg catalog connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CatalogConfig {
    /// Any Iceberg REST catalog (including Unity Catalog) with OAuth2.
    Rest {
        url: String,
        warehouse: Option<String>,
        credentials: Option<ClientCredentials>,
        scope: String,
        oauth2_server_url: String,
        vended_credentials: bool,
        /// Static S3 access when nothing is vended.
        aws: Option<AwsConfig>,
    },
    /// AWS S3 Tables' REST endpoint, SigV4-signed.
    S3TablesRest {
        url: String,
        warehouse: String,
        aws: AwsConfig,
    },
    /// floe's embedded SQL catalog in SQLite with a file:// warehouse.
    Local {
        /// The SQLite file of the catalog.
        database: PathBuf,
        /// The warehouse directory.
        warehouse: PathBuf,
    },
}

impl CatalogConfig {
    /// The AWS connection of the catalog: S3 Tables' signing identity, or a REST catalog's
    /// static S3 access when nothing is vended.
    pub fn aws(&self) -> Option<&AwsConfig> {
        match self {
            CatalogConfig::Rest { aws, .. } => aws.as_ref(),
            CatalogConfig::S3TablesRest { aws, .. } => Some(aws),
            CatalogConfig::Local { .. } => None,
        }
    }
}
