//! The Iceberg catalogs a sink writes through, behind one trait: namespaces, loading,
//! creating and committing tables, and keeping the storage credentials of a loaded table
//! fresh.
//!
//! Implementations: [`RestCatalog`] (any Iceberg REST catalog, S3 Tables and Unity
//! included) and [`EmbeddedCatalog`] (floe's SQLite catalog with a `file://` warehouse).
//! Another catalog (AWS Glue, say) is another implementation and another arm in
//! [`connect`], the one place a catalog type is chosen.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use iceberg::spec::Schema;
use iceberg::{TableRequirement, TableUpdate};

use crate::config::CatalogConfig;
use crate::error::{ErrorKind, SinkError};
use crate::http::HttpSettings;
pub use crate::local::EmbeddedCatalog;
use crate::namespace::Namespace;
pub use crate::rest_catalog::RestCatalog;
use crate::sigv4::AwsCredentialsProvider;
use crate::snapshot::PreparedCommit;
use crate::table::LoadedTable;

/// A new table: an unpartitioned format-v2 table with `schema` and `properties`
/// (one value, as a [`TableCommit`] is, so that the catalogs share its signature).
pub struct TableCreation<'a> {
    pub namespace: &'a Namespace,
    pub table: &'a str,
    pub schema: &'a Schema,
    pub properties: BTreeMap<String, String>,
}

/// One optimistic commit to a table.
pub struct TableCommit<'a> {
    pub namespace: &'a Namespace,
    pub table: &'a str,
    /// The table as last loaded: what the requirements were made against.
    pub base: &'a LoadedTable,
    /// What must still hold of the table for the updates to apply.
    pub requirements: Vec<TableRequirement>,
    pub updates: Vec<TableUpdate>,
}

impl<'a> TableCommit<'a> {
    /// The commit of `prepared`, made against `base`.
    pub fn prepared(
        namespace: &'a Namespace,
        table: &'a str,
        base: &'a LoadedTable,
        prepared: PreparedCommit,
    ) -> TableCommit<'a> {
        TableCommit {
            namespace,
            table,
            base,
            requirements: prepared.requirements,
            updates: prepared.updates,
        }
    }
}

/// An Iceberg catalog as floe uses it.
#[async_trait]
pub trait Catalog: Send + Sync + fmt::Debug {
    /// The top-level namespaces.
    async fn list_namespaces(&self) -> Result<Vec<Namespace>, SinkError>;

    /// Whether the namespace exists (and the client may see it).
    async fn namespace_exists(&self, namespace: &Namespace) -> Result<bool, SinkError>;

    /// Creates a namespace without properties; an existing one is
    /// [`ErrorKind::AlreadyExists`].
    async fn create_namespace(&self, namespace: &Namespace) -> Result<(), SinkError>;

    /// Loads a table with a file IO that reaches its files; a missing table is
    /// [`ErrorKind::TableNotFound`].
    async fn load_table(
        &self,
        namespace: &Namespace,
        table: &str,
    ) -> Result<LoadedTable, SinkError>;

    /// Creates the table, and loads it back (the catalog may have assigned other field
    /// ids than those sent).
    async fn create_table(&self, creation: TableCreation<'_>) -> Result<LoadedTable, SinkError>;

    /// Commits the commit's updates under its requirements, and returns the table as the
    /// catalog has it afterwards. Requirements that no longer hold are
    /// [`ErrorKind::CommitConflict`]; an unknown outcome is [`ErrorKind::Unavailable`]:
    /// the caller reloads and decides.
    async fn commit(&self, commit: TableCommit<'_>) -> Result<LoadedTable, SinkError>;

    /// `table` with fresh storage credentials in its file IO, its metadata unchanged.
    /// Catalogs whose credentials never expire return it as it is.
    async fn refresh_credentials(
        &self,
        _namespace: &Namespace,
        _table_name: &str,
        table: &LoadedTable,
    ) -> Result<LoadedTable, SinkError> {
        Ok(table.clone())
    }

    /// Whether this session renews vended credentials through the table's credentials
    /// endpoint (false once the catalog answered that it has none).
    fn uses_credentials_endpoint(&self) -> bool {
        false
    }

    /// Fails with [`ErrorKind::NamespaceNotFound`] unless the namespace exists.
    async fn require_namespace(&self, namespace: &Namespace) -> Result<(), SinkError> {
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
}

/// Connects to the catalog of a connection. `aws_credentials` supplies the keys of an
/// assumed-role AWS connection (static keys are taken from `config`).
pub async fn connect(
    config: &CatalogConfig,
    settings: &HttpSettings,
    aws_credentials: Option<Arc<dyn AwsCredentialsProvider>>,
) -> Result<Arc<dyn Catalog>, SinkError> {
    Ok(match config {
        CatalogConfig::Local {
            database,
            warehouse,
        } => Arc::new(EmbeddedCatalog::open(database.clone(), warehouse.clone()).await?),
        CatalogConfig::Rest { .. } | CatalogConfig::S3TablesRest { .. } => {
            Arc::new(RestCatalog::connect(config, settings, aws_credentials).await?)
        }
    })
}
