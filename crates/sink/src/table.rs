//! A table as the sink works from it ([`LoadedTable`]: metadata, where it lives, and a
//! file IO that reaches its files) and the catalog connection a sink writes through
//! ([`SinkCatalog`], over any [`Catalog`]).
//!
//! Credentials that expire are renewed by [`SinkCatalog::refresh_credentials`] when
//! [`SinkCatalog::credentials_need_refresh`] says they are due.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use iceberg::io::FileIO;
use iceberg::spec::TableMetadata;

use crate::catalog::{self, Catalog};
use crate::config::CatalogConfig;
use crate::error::{ErrorKind, SinkError};
use crate::http::HttpSettings;
use crate::sigv4::AwsCredentialsProvider;

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
    pub(crate) credentials_obtained_at_ms: i64,
    /// Whether the catalog vended the file IO's storage credentials.
    pub(crate) vended_credentials: bool,
    /// The catalog's storage properties for the table without credentials (endpoint,
    /// region, path style), to combine with renewed credentials.
    pub(crate) storage_config: BTreeMap<String, String>,
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
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

/// A catalog connection as the sink uses it: the [`Catalog`], and when the storage
/// credentials of its tables are due for renewal.
pub struct SinkCatalog {
    catalog: Arc<dyn Catalog>,
    /// How often vended credentials without an expiry are renewed.
    credential_refresh_interval: Duration,
}

impl SinkCatalog {
    /// Connects to the catalog of a connection. `aws_credentials` supplies the keys of an
    /// assumed-role AWS connection (static keys are taken from `config`).
    pub async fn connect(
        config: &CatalogConfig,
        settings: &HttpSettings,
        aws_credentials: Option<Arc<dyn AwsCredentialsProvider>>,
    ) -> Result<SinkCatalog, SinkError> {
        Ok(SinkCatalog {
            catalog: catalog::connect(config, settings, aws_credentials).await?,
            credential_refresh_interval: settings.credential_refresh_interval,
        })
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
}

/// The catalog's own operations (load, create, commit, namespaces, credentials renewal).
impl std::ops::Deref for SinkCatalog {
    type Target = dyn Catalog;

    fn deref(&self) -> &(dyn Catalog + 'static) {
        self.catalog.as_ref()
    }
}

pub(crate) fn storage_error(context: String, err: iceberg::Error) -> SinkError {
    SinkError::caused_by(ErrorKind::Storage, context, err)
}
