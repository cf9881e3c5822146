//! The sink worker pool and the Iceberg sink: catalog clients, credentials,
//! Parquet writing and the commit protocol.

pub mod allocator;
mod auth;
pub mod catalog;
pub mod commit;
pub mod config;
pub mod consolidate;
mod envelope;
pub mod error;
pub mod http;
pub mod input;
pub mod local;
pub mod namespace;
mod oauth;
pub mod rest;
pub mod rest_catalog;
pub mod sigv4;
pub mod sink;
pub mod snapshot;
pub mod sts;
pub mod table;
pub mod types;
pub mod validate;
pub mod writer;

pub use catalog::{Catalog, EmbeddedCatalog, RestCatalog};
pub use config::{AwsAuthConfig, AwsConfig, AwsKeys, CatalogConfig, ClientCredentials};
pub use error::{ErrorKind, SinkError};
pub use http::HttpSettings;
pub use local::LocalCatalog;
pub use namespace::Namespace;
pub use rest::{LoadTableResponse, RestCatalogClient};
pub use sigv4::{AwsCredentialsProvider, StaticAwsCredentials};
pub use sink::{
    Envelope, ProgressReport, SinkConnection, SinkHandle, SinkReporter, SinkSettings, SinkSpec,
    SinkStatus, StatisticsUpdate, TableState, check_sink_table, run_sink, spawn_sink,
};
pub use sts::{AssumeRoleProvider, AwsEnvironment, PrincipalSource, StsClient, StsSettings};
pub use validate::{validate_catalog, validate_catalog_with, validate_catalog_with_credentials};
