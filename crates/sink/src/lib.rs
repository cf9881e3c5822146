//! The sink worker pool and the Iceberg sink: catalog clients, credentials,
//! Parquet writing and the commit protocol.

mod auth;
pub mod bounds;
pub mod catalog;
mod columns;
pub mod commit;
pub mod config;
pub mod consolidate;
mod consolidate_columns;
mod dv;
mod envelope;
mod equality;
pub mod error;
pub mod http;
pub mod input;
pub mod local;
pub mod maintenance;
pub mod namespace;
mod oauth;
pub mod partition;
mod position;
pub mod rest;
pub mod rest_catalog;
pub mod sigv4;
pub mod sink;
pub mod snapshot;
pub mod sts;
pub mod table;
pub mod types;
mod upload;
pub mod validate;
pub mod writer;

pub use catalog::{Catalog, EmbeddedCatalog, RestCatalog, TableCommit, TableCreation};
pub use config::{AwsAuthConfig, AwsConfig, AwsKeys, CatalogConfig, ClientCredentials};
pub use error::{ErrorKind, SinkError};
pub use http::HttpSettings;
pub use iceberg::spec::Transform as PartitionTransform;
pub use local::LocalCatalog;
pub use maintenance::{MaintenanceOptions, MaintenanceReport, MaintenanceSettings};
pub use namespace::Namespace;
pub use partition::PartitionColumn;
pub use rest::{LoadTableResponse, RestCatalogClient};
pub use sigv4::{AwsCredentialsProvider, StaticAwsCredentials};
pub use sink::{
    DeleteMode, Envelope, ProgressReport, SinkConnection, SinkHandle, SinkReporter, SinkSettings,
    SinkSpec, SinkStatus, StatisticsUpdate, TableState, check_sink_table, spawn_sink,
};
pub use sts::{AssumeRoleProvider, AwsEnvironment, PrincipalSource, StsClient, StsSettings};
pub use validate::{validate_catalog, validate_catalog_with, validate_catalog_with_credentials};
