//! The coordinator: sessions, purification, sequencing of plans against the
//! catalog, and query execution over the system catalog.

mod array_subquery;
pub mod auth;
pub mod batch_cache;
pub mod connection_config;
pub mod coordinator;
pub mod copy;
pub mod copy_out;
pub mod credentials;
pub mod cursor;
pub mod error;
pub mod implications;
mod literal_insert;
pub mod login;
pub mod metrics;
pub mod params;
pub mod pg_catalog;
pub mod pg_functions;
pub mod pg_indexes;
mod pg_keywords;
mod pg_privileges;
pub mod pg_rewrite;
pub mod postgres_sources;
pub mod query;
pub mod rbac;
mod sequence;
pub mod session;
pub mod sink_input;
pub mod sinks;
pub mod source_views;
pub mod sources;
pub mod subscribe;
mod subscribe_dataflow;
pub mod system;
pub mod system_roles;
pub mod tables;
pub mod transaction;
pub mod view_errors;
pub mod views;

pub use coordinator::{
    Coordinator, CoordinatorConfig, Described, ExecuteResponse, Notice, OperationalStatus,
    SinkState, SourceState,
};
pub use error::AdapterError;
pub use session::{Session, TransactionStatus};

/// The stack of the threads of a runtime that runs a coordinator (floe's main, and tests
/// that run one in process). Planning a query recurses once per level of
/// nesting (DataFusion's SQL planner, with views expanded into the query), with large
/// frames in a debug build: views over views over nested subqueries overflowed tokio's
/// default 2 MiB and aborted the process (the randomized view test's seed 105). The
/// memory is reserved, and only used as deep as a plan goes.
pub const RUNTIME_STACK: usize = 16 * 1024 * 1024;
